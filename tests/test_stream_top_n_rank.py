"""RankedGroupTopN (the executor behind ``ROW_NUMBER() OVER (...) AS rn ... WHERE rn <= n`` with
rn selected): its output rows end with their rank in the group, and a rank that changes is an
update pair of the same key. A hand-written case, and a hypothesis test driving the executor
with random changes, barriers, restarts (append-only too) against the Python ``top_n`` with
ranks, the output materialized strictly by stream key. Stores: memory."""

from functools import cmp_to_key

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.memcomparable import OrderType
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.executors.top_n import RankedGroupTopN, top_n_state_table
from stream.schema import Schema
from stream_harness import Epochs, ListSource
from stream_topn_model import apply_changes, order_cmp

S = Schema([("id", T.BIGINT), ("g", T.VARCHAR), ("v", T.INT), ("w", T.INT)])
ASC, DESC = OrderType.ASC, OrderType.DESC


class RankDriver:
    def __init__(self, store, order_by, limit, offset, group_key, append_only=False, budget=None):
        self.store, self.epochs = store, Epochs()
        self.args = dict(order_by=list(order_by), limit=limit, offset=offset, group_key=list(group_key),
                         append_only=append_only)
        self.budget = budget or MemoryBudget(1 << 20)
        self.mv, self.rows = {}, {}
        self.start()

    def start(self):
        a = self.args
        table = top_n_state_table(self.store, 7, S, [0], a["order_by"], a["group_key"])
        self.x = RankedGroupTopN(ListSource(S, [0], []), table, a["order_by"], a["limit"], a["offset"],
                                 a["group_key"], rank_name="rn", append_only=a["append_only"], budget=self.budget,
                                 cache_extra=1)
        self.x.handle_barrier(self.epochs.barrier())

    def restart(self):
        self.x.handle_barrier(self.epochs.barrier())
        self.x.cache.close()
        self.start()

    def send(self, changes):
        chunk = StreamChunk.from_rows(S, changes)
        out = self.x.on_chunk(chunk) or []
        out = [out] if isinstance(out, StreamChunk) else list(out)
        for c in out:
            assert c.schema == self.x.schema
        apply_changes(self.mv, out, self.x.stream_key)
        for op, row in chunk.rows():
            if op in (INSERT, UPDATE_INSERT):
                self.rows[row[0]] = row
            else:
                del self.rows[row[0]]
        return [r for c in out for r in c.rows()]

    def expected(self):
        a = self.args
        groups: dict = {}
        for r in self.rows.values():
            groups.setdefault(tuple(r[c] for c in a["group_key"]), []).append(r)
        out = []
        for members in groups.values():
            members.sort(key=cmp_to_key(order_cmp(a["order_by"], [0])))
            end = a["offset"] + a["limit"]
            out += [r + (a["offset"] + i + 1,) for i, r in enumerate(members[a["offset"]:end])]
        return sorted(out, key=repr)

    def check(self):
        assert sorted(self.mv.values(), key=repr) == self.expected()
        self.x._check()


def test_ranks_shift_as_update_pairs_when_a_row_enters_above():
    with HummockStorage.open("memory://") as store:
        d = RankDriver(store, [(2, DESC)], limit=2, offset=0, group_key=[1])
        d.send([("+", (1, "a", 10, 0)), ("+", (2, "a", 5, 0)), ("+", (3, "b", 1, 0))])
        d.check()
        assert sorted(d.mv.values()) == [(1, "a", 10, 0, 1), (2, "a", 5, 0, 2), (3, "b", 1, 0, 1)]
        out = d.send([("+", (4, "a", 20, 0))])   # enters at rank 1: 1 -> rank 2, 2 leaves
        d.check()
        assert (UPDATE_DELETE, (1, "a", 10, 0, 1)) in out and (UPDATE_INSERT, (1, "a", 10, 0, 2)) in out
        assert sorted(d.mv.values()) == [(1, "a", 10, 0, 2), (3, "b", 1, 0, 1), (4, "a", 20, 0, 1)]
        d.send([("-", (4, "a", 20, 0))])          # leaves: 1 back to rank 1, 2 comes back at rank 2
        d.check()
        assert d.x.schema.names[-1] == "rn" and d.x.schema.types[-1] == T.BIGINT


def test_offset_counts_in_the_rank():
    with HummockStorage.open("memory://") as store:
        d = RankDriver(store, [(2, ASC)], limit=2, offset=1, group_key=[])
        d.send([("+", (i, "a", i * 10, 0)) for i in range(1, 5)])
        d.check()
        assert sorted(d.mv.values()) == [(2, "a", 20, 0, 2), (3, "a", 30, 0, 3)]


VALUES = st.one_of(st.none(), st.integers(0, 4))
ITEM = st.tuples(st.integers(0, 20), st.sampled_from(["a", "b", None]), VALUES, st.booleans())
STEP = st.one_of(st.lists(ITEM, min_size=1, max_size=10), st.just("barrier"), st.just("restart"))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from([[(2, ASC)], [(2, DESC)], [(2, OrderType(False, True)), (0, DESC)]]),
       st.integers(0, 3), st.integers(0, 2), st.sampled_from([[], [1]]), st.booleans(),
       st.sampled_from([0, 600, 1 << 20]), st.lists(STEP, max_size=16))
def test_ranked_top_n_equals_the_python_ranks_after_every_chunk(order_by, limit, offset, group_key, append_only,
                                                                 budget, steps):
    with HummockStorage.open("memory://") as store:
        d = RankDriver(store, order_by, limit, offset, group_key, append_only, MemoryBudget(budget))
        for step in steps:
            if step == "barrier":
                d.x.handle_barrier(d.epochs.barrier())
            elif step == "restart":
                d.restart()
            else:
                changes, seen = [], dict(d.rows)
                for i, g, v, delete in step:
                    old, new = seen.get(i), (i, g, v, 0)
                    if old is None:
                        changes.append(("+", new))
                        seen[i] = new
                    elif append_only:
                        continue
                    elif delete:
                        changes.append(("-", old))
                        del seen[i]
                    elif old != new:
                        changes += [("U-", old), ("U+", new)]
                        seen[i] = new
                if changes:
                    d.send(changes)
            d.check()
