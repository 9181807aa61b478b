"""TopN and GroupTopN on hand-written chunks (ties at the boundary, OFFSET, WITH TIES, NULL order
keys, retractions that drain the cache, update pairs, group moves, append-only), and a hypothesis
test driving the executor directly with random changes, chunk cuts, barriers, restarts and
budgets: after every chunk the materialized output equals the Python ``top_n`` of the rows so
far, and the cache invariants (``_check``) hold. Stores: memory."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.memcomparable import OrderType
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executors.top_n import GroupTopN, TopN, top_n_layout, top_n_state_table
from stream.schema import Schema
from stream.executor import Checked
from stream.message import Watermark
from stream_harness import Epochs, ListSource, drain, visible_rows
from stream_topn_model import apply_changes, top_n

S = Schema([("id", T.BIGINT), ("g", T.VARCHAR), ("v", T.INT), ("w", T.INT)])
ASC, DESC = OrderType.ASC, OrderType.DESC


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


class Driver:
    """Runs a (Group)TopN by calling its hooks: chunks in, output materialized strictly."""

    def __init__(self, store, table_id=1, order_by=((2, ASC),), limit=2, offset=0, group_key=(), with_ties=False,
                 append_only=False, budget=None, cache_extra=8):
        self.store, self.table_id = store, table_id
        self.args = dict(order_by=list(order_by), limit=limit, offset=offset, group_key=list(group_key),
                         with_ties=with_ties, append_only=append_only, cache_extra=cache_extra)
        self.budget = budget if budget is not None else MemoryBudget(1 << 20)
        self.epochs = Epochs()
        self.mv: dict = {}
        self.rows: dict = {}
        self.start()

    def start(self):
        a = self.args
        table = top_n_state_table(self.store, self.table_id, S, [0], a["order_by"], a["group_key"])
        self.x = GroupTopN(ListSource(S, [0], []), table, budget=self.budget, **a)
        self.x.handle_barrier(self.epochs.barrier())

    def restart(self):
        self.x.cache.close()
        self.start()

    def send(self, *items):
        chunk = StreamChunk.from_rows(S, items)
        out = self.x.on_chunk(chunk) or []
        out = [out] if isinstance(out, StreamChunk) else list(out)
        apply_changes(self.mv, out, [0])
        for op, row in chunk.rows():
            if op in (INSERT, UPDATE_INSERT):
                self.rows[row[0]] = row
            else:
                del self.rows[row[0]]
        return [r for c in out for r in c.rows()]

    def barrier(self):
        self.x.handle_barrier(self.epochs.barrier())

    def expected(self):
        a = self.args
        return top_n(self.rows.values(), a["order_by"], a["limit"], a["offset"], a["group_key"], [0], a["with_ties"])

    def check(self):
        assert sorted(self.mv.values(), key=repr) == self.expected()
        self.x._check()


def test_ties_at_the_boundary_are_broken_by_the_pk(store):
    d = Driver(store, limit=2)
    out = d.send(("+", (5, "a", 1, 0)), ("+", (3, "a", 1, 0)), ("+", (4, "a", 1, 0)))
    assert sorted(out) == [(INSERT, (3, "a", 1, 0)), (INSERT, (4, "a", 1, 0))]
    # a lower pk with the same order key pushes out the highest pk of the tie
    assert d.send(("+", (1, "a", 1, 0))) == [(DELETE, (4, "a", 1, 0)), (INSERT, (1, "a", 1, 0))]
    # deleting a window row brings back the next in (order key, pk) order
    assert d.send(("-", (1, "a", 1, 0))) == [(DELETE, (1, "a", 1, 0)), (INSERT, (4, "a", 1, 0))]
    d.check()


def test_offset_skips_rows_and_shifts_when_rows_enter_above(store):
    d = Driver(store, limit=2, offset=2)
    d.send(*[("+", (i, "a", 10 * i, 0)) for i in range(1, 6)])
    assert sorted(d.mv) == [(3,), (4,)]
    assert d.send(("+", (9, "a", 5, 0))) == [(DELETE, (4, "a", 40, 0)), (INSERT, (2, "a", 20, 0))]
    d.check()
    d.send(("-", (9, "a", 5, 0)), ("-", (1, "a", 10, 0)), ("-", (2, "a", 20, 0)))
    assert sorted(d.mv) == [(5,)]
    d.check()


def test_with_ties_includes_every_row_equal_to_the_last(store):
    d = Driver(store, limit=2, with_ties=True)
    d.send(("+", (1, "a", 1, 0)), ("+", (2, "a", 2, 0)), ("+", (3, "a", 2, 0)), ("+", (4, "a", 2, 0)),
           ("+", (5, "a", 3, 0)))
    assert sorted(d.mv) == [(1,), (2,), (3,), (4,)]
    out = d.send(("+", (6, "a", 0, 0)))     # the boundary moves up: the ties of 2 all leave
    assert out == [(DELETE, (2, "a", 2, 0)), (DELETE, (3, "a", 2, 0)), (DELETE, (4, "a", 2, 0)),
                   (INSERT, (6, "a", 0, 0))]
    d.check()
    d.send(("-", (6, "a", 0, 0)), ("-", (1, "a", 1, 0)))
    assert sorted(d.mv) == [(2,), (3,), (4,)]
    d.check()


@pytest.mark.parametrize("order", [OrderType(False, True), OrderType(False, False), OrderType(True, True),
                                   OrderType(True, False)])
def test_null_order_keys_sort_as_the_order_type_says(store, order):
    d = Driver(store, order_by=[(2, order)], limit=2)
    d.send(("+", (1, "a", None, 0)), ("+", (2, "a", 5, 0)), ("+", (3, "a", None, 0)), ("+", (4, "a", 7, 0)))
    d.check()
    want = {(True, False): [(1,), (3,)], (True, True): [(1,), (3,)], (False, False): [(2,), (4,)],
            (False, True): [(2,), (4,)]}[(order.nulls_first, order.descending)]
    assert sorted(d.mv) == want
    d.send(("U-", (1, "a", None, 0)), ("U+", (1, "a", 6, 0)))
    d.check()


def test_several_order_columns_desc_then_asc(store):
    d = Driver(store, order_by=[(3, DESC), (2, ASC)], limit=3)
    d.send(*[("+", (i, "a", i % 3, i % 2)) for i in range(10)])
    d.check()
    assert sorted(d.mv) == [(1,), (3,), (9,)]   # w=1 first; v 0, 0, then 1 of ids 1 and 7: the lower pk


def test_ordering_by_the_group_column_only_leaves_the_pk_to_decide(store):
    d = Driver(store, order_by=[(1, DESC)], group_key=[1], limit=2, with_ties=True)
    d.send(("+", (3, "a", 0, 0)), ("+", (1, "a", 0, 0)), ("+", (2, "b", 0, 0)))
    d.check()
    assert sorted(d.mv) == [(1,), (2,), (3,)]     # every row of a group ties on (g)


def test_retractions_drain_the_cache_and_it_refills_by_prefix_scan(store):
    budget = MemoryBudget(1 << 20)
    d = Driver(store, limit=3, budget=budget)
    d.send(*[("+", (i, "a", i, 0)) for i in range(200)])
    d.barrier()
    g = d.x.cache.peek(())
    assert not g.complete and len(g.keys) < 60     # a prefix of the 200 rows only
    for lo in range(0, 150, 7):   # delete the top rows chunk after chunk: the cache drains and refills
        d.send(*[("-", (i, "a", i, 0)) for i in range(lo, lo + 7)])
        d.check()
    assert sorted(d.mv) == [(154,), (155,), (156,)]
    d.barrier()
    d.restart()    # an empty cache refills from the committed state
    d.send(("-", (154, "a", 154, 0)))
    d.check()


def test_a_tiny_budget_evicts_groups_and_results_stay_exact(store):
    budget = MemoryBudget(600)
    d = Driver(store, limit=2, group_key=[1], budget=budget)
    for round_ in range(4):
        d.send(*[("+", (round_ * 100 + i, f"g{i % 7}", (i * 13) % 11, 0)) for i in range(30)])
        d.check()
        d.send(*[("-", (round_ * 100 + i, f"g{i % 7}", (i * 13) % 11, 0)) for i in range(0, 30, 3)])
        d.check()
    assert budget.evictions > 0
    budget._check()


def test_update_pairs_keep_the_key_and_a_row_can_move_between_groups(store):
    d = Driver(store, limit=1, group_key=[1])
    d.send(("+", (1, "a", 1, 0)), ("+", (2, "b", 1, 0)), ("+", (3, "a", 2, 0)))
    # a non-order column changes inside the window: one update pair
    assert d.send(("U-", (1, "a", 1, 0)), ("U+", (1, "a", 1, 9))) == [(UPDATE_DELETE, (1, "a", 1, 0)),
                                                                      (UPDATE_INSERT, (1, "a", 1, 9))]
    # the row moves to group b, ahead of 2: a leaves for 3, b takes 1
    out = d.send(("U-", (1, "a", 1, 9)), ("U+", (1, "b", 0, 9)))
    assert out == [(DELETE, (1, "a", 1, 9)), (DELETE, (2, "b", 1, 0)), (INSERT, (3, "a", 2, 0)),
                   (INSERT, (1, "b", 0, 9))]
    d.check()


def test_append_only_keeps_only_the_window_in_state(store):
    d = Driver(store, limit=2, offset=1, group_key=[1], append_only=True)
    d.send(*[("+", (i, "ab"[i % 2], (i * 7) % 10, 0)) for i in range(40)])
    d.check()
    stored = list(d.x.table.iter_with_prefix())
    assert len(stored) == 6     # offset + limit per group, nothing else
    d.barrier()
    d.restart()
    d.send(("+", (100, "a", -1, 0)))
    d.check()
    with pytest.raises(ExecutorError, match="append-only"):
        d.send(("-", (100, "a", -1, 0)))


def test_append_only_with_ties_keeps_the_ties(store):
    d = Driver(store, limit=1, with_ties=True, append_only=True)
    d.send(("+", (1, "a", 5, 0)), ("+", (2, "a", 5, 0)), ("+", (3, "a", 6, 0)))
    d.check()
    assert sorted(d.mv) == [(1,), (2,)]
    d.send(("+", (4, "a", 4, 0)))
    d.check()
    assert len(list(d.x.table.iter_with_prefix())) == 1


def test_a_delete_of_a_missing_row_is_a_strict_error_naming_the_key(store):
    d = Driver(store)
    with pytest.raises(InconsistentStreamError, match="TopN"):
        d.send(("-", (7, "a", 1, 0)))


def test_the_executor_loop_runs_it_and_drops_watermarks(store):
    e = Epochs()
    msgs = [e.barrier(), StreamChunk.from_rows(S, [("+", (1, "a", 3, 0)), ("+", (2, "a", 1, 0))]), Watermark(2, 1),
            e.barrier(), StreamChunk.from_rows(S, [("-", (2, "a", 1, 0))]), e.barrier()]
    x = TopN(ListSource(S, [0], msgs), top_n_state_table(store, 1, S, [0], [(2, ASC)]), [(2, ASC)], 1)
    out = drain(Checked(x))
    assert not any(type(m) is Watermark for m in out)
    assert visible_rows(out) == [(INSERT, (2, "a", 1, 0)), (DELETE, (2, "a", 1, 0)), (INSERT, (1, "a", 3, 0))]


def test_layout_and_bad_arguments(store):
    assert top_n_layout([0], [(2, ASC), (0, DESC)], [1]) == ([1, 2, 0], [ASC, ASC, DESC])
    table = top_n_state_table(store, 1, S, [0], [(2, ASC)])
    src = ListSource(S, [0], [])
    with pytest.raises(ExecutorError, match="limit"):
        TopN(src, table, [(2, ASC)], -1)
    with pytest.raises(ExecutorError, match="pk"):
        TopN(src, table, [(3, ASC)], 1)


# --- hypothesis: random streams against the Python top_n -----------------------------------------

VALUES = st.one_of(st.none(), st.integers(0, 4))
ITEM = st.tuples(st.integers(0, 30), st.sampled_from(["a", "b", None]), VALUES, VALUES, st.integers(0, 2))
STEP = st.one_of(st.lists(ITEM, min_size=1, max_size=12), st.just("barrier"), st.just("restart"))
CONFIG = st.fixed_dictionaries({
    "order_by": st.sampled_from([[(2, ASC)], [(2, DESC)], [(2, OrderType(False, True)), (3, DESC)],
                                 [(3, OrderType(True, False)), (2, ASC)]]),
    "limit": st.integers(0, 4), "offset": st.integers(0, 3), "with_ties": st.booleans(),
    "group_key": st.sampled_from([[], [1]]), "budget": st.sampled_from([0, 700, 1 << 20]),
    "cache_extra": st.integers(1, 3)})


def _changes(rows: dict, items, append_only: bool) -> list:
    out = []
    for i, g, v, w, delete in items:
        old = rows.get(i)
        new = (i, g, v, w)
        if old is None:
            out.append(("+", new))
            rows[i] = new
        elif append_only:
            continue
        elif delete == 0:
            out.append(("-", old))
            del rows[i]
        elif old != new:
            out += [("U-", old), ("U+", new)]
            rows[i] = new
    return out


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], max_examples=120,
          deadline=None)
@given(CONFIG, st.booleans(), st.lists(STEP, max_size=20))
def test_top_n_equals_the_python_top_n_after_every_chunk(config, append_only, steps):
    with HummockStorage.open("memory://") as store:
        config = dict(config)
        budget = MemoryBudget(config.pop("budget"))
        d = Driver(store, append_only=append_only, budget=budget, **config)
        shadow: dict = {}
        for step in steps:
            if step == "barrier":
                d.barrier()
            elif step == "restart":
                d.barrier()
                d.restart()
            else:
                rows = _changes(shadow, step, append_only)
                if rows:
                    d.send(*rows)
            d.check()
        budget._check()
