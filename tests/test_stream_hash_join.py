"""HashJoin on hand-written chunks (docs/streaming.md, stream/executors/hash_join.py): every join
type with NULL keys, many-to-many keys, degree transitions of outer sides (the NULL-padded row
retracted at 0 -> 1 and emitted at 1 -> 0), an extra condition flipping under updates, update
pairs (kept as pairs when the join key stays, split when it moves), strict-mode errors, caches
under a tiny budget, recovery from committed state; then a hypothesis model test driving the
executor directly with random chunks of both sides (strict and relaxed state tables). After every chunk the output, applied to a
view keyed by the join's stream key (exact retractions checked), equals the batch join of the
inputs, and ``_check`` compares caches and degrees with the state tables.
(The end-to-end oracle through the runtime, with kill-and-reopen: test_stream_join_oracle.py.)"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import Checked
from stream.executors import HashJoin, join_key_filter
from stream.executors.join_key_filter import hash_keys
from stream.expr import And, Cmp, Col, IsNull, Lit, Or
from stream.message import Barrier
from stream.schema import Schema
from join_model import KeyedView, batch_join
from stream_harness import Epochs, ListSource, drain, visible_rows

L = Schema([("id", T.BIGINT), ("k", T.INT), ("v", T.INT)])
R = Schema([("rid", T.BIGINT), ("k", T.INT), ("w", T.INT)])
NULL3 = (None, None, None)
TYPES = ("inner", "left", "right", "full")
SEMI_ANTI = ("left_semi", "left_anti")   # more in tests/test_stream_semi_join.py


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


class Driver:
    """One HashJoin driven chunk by chunk (no runtime): keeps models of both inputs and a view
    of the output, and checks both after every chunk."""

    def __init__(self, store, join_type, condition=None, py_condition=None, budget=None, consistent=True,
                 left=L, right=R, keys=([1], [1]), left_key=(0,), right_key=(0,), ids=(1, 2, 3, 4),
                 fresh_rows=True):
        self.store, self.epochs = store, Epochs(store.max_committed_epoch)
        self.fresh_rows = fresh_rows   # False: the sides keep no fresh rows (tests counting store reads)
        self.args = (join_type, condition, budget, consistent, left, right, keys, left_key, right_key, ids)
        self.join_type, self.py_condition = join_type, py_condition
        self.models = ({}, {})
        self.join = self._build()
        self.join.handle_barrier(self.epochs.barrier())
        self.view = KeyedView(self.join.stream_key)

    def _build(self):
        join_type, condition, budget, consistent, left, right, keys, lk, rk, ids = self.args
        join = HashJoin(ListSource(left, list(lk), []), ListSource(right, list(rk), []), keys[0], keys[1],
                        join_type, store=self.store, table_ids=ids, condition=condition,
                        budget=budget if budget is not None else MemoryBudget(), consistent=consistent)
        if not self.fresh_rows:
            join.left.fresh = join.right.fresh = None
        return join

    def send(self, side, *items) -> list:
        schema = self.join.left.schema if side == 0 else self.join.right.schema
        key = self.join.left.stream_key if side == 0 else self.join.right.stream_key
        out = self.join.on_side_chunk(side, StreamChunk.from_rows(schema, items))
        changes = []
        for chunk in out:
            chunk.validate(self.join.stream_key)
            changes += chunk.rows()
        self.view.apply(changes)
        model = self.models[side]
        for op, row in items:
            pk = tuple(row[i] for i in key)
            if op in ("+", "U+"):
                model[pk] = row
            else:
                del model[pk]
        self.verify()
        return changes

    def verify(self):
        left, right = (list(m.values()) for m in self.models)
        j = self.join
        expected = batch_join(left, right, j.left.keys, j.right.keys, self.join_type, self.py_condition,
                              (j.left.width, j.right.width))
        assert self.view.sorted() == expected
        j._check()

    def barrier(self):
        self.join.handle_barrier(self.epochs.barrier())

    def checkpointed_restart(self):
        """Commit and checkpoint the epoch, then a fresh executor (empty caches) over the same
        tables, initialized at the committed epoch as recovery does."""
        prev = self.epochs.epoch
        self.join.handle_barrier(self.epochs.barrier())
        self.store.checkpoint(prev)
        self.join.close()
        self.join = self._build()
        self.join.handle_barrier(Barrier(self.store.max_committed_epoch, self.epochs.barrier().curr_epoch))


# --- per join type --------------------------------------------------------------------------------

@pytest.mark.parametrize("join_type", TYPES)
def test_null_keys_never_match_and_outer_sides_pad_them(store, join_type):
    d = Driver(store, join_type)
    d.send(0, ("+", (1, None, 5)), ("+", (2, 7, 5)))
    d.send(1, ("+", (10, None, 1)), ("+", (11, 7, 1)))
    rows = d.view.sorted()
    assert (1, None, 5, 10, None, 1) not in rows and (1, None, 5, 2, 7, 5) not in rows
    assert ((1, None, 5) + NULL3 in rows) == (join_type in ("left", "full"))
    assert (NULL3 + (10, None, 1) in rows) == (join_type in ("right", "full"))
    d.send(0, ("U-", (1, None, 5)), ("U+", (1, 7, 5)))    # the NULL key becomes 7: now it matches
    d.send(1, ("U-", (11, 7, 1)), ("U+", (11, None, 1)))  # and the 7 on the right goes NULL
    d.send(0, ("-", (1, 7, 5)), ("-", (2, 7, 5)))
    d.send(1, ("-", (10, None, 1)), ("-", (11, None, 1)))
    assert d.view.rows == {}


@pytest.mark.parametrize("join_type", TYPES)
def test_many_to_many_keys_and_their_retractions(store, join_type):
    d = Driver(store, join_type)
    d.send(0, *[("+", (i, i % 2, i)) for i in range(6)])              # keys 0 and 1, three rows each
    d.send(1, *[("+", (10 + i, i % 3, i)) for i in range(6)])         # keys 0, 1, 2, two rows each
    assert sum(1 for r in d.view.rows.values() if r[0] is not None and r[3] is not None) == 12
    d.send(1, ("-", (10, 0, 0)), ("+", (20, 0, 9)), ("-", (13, 0, 3)))
    d.send(0, *[("-", (i, i % 2, i)) for i in range(0, 6, 2)])        # key 0 leaves the left
    d.barrier()
    d.send(1, ("-", (20, 0, 9)))
    d.send(0, ("+", (0, 2, 0)), ("-", (1, 1, 1)))


def test_left_join_degree_transitions_emit_and_retract_the_padded_row(store):
    d = Driver(store, "left")
    pad = (1, 10, 5) + NULL3
    assert d.send(0, ("+", (1, 10, 5))) == [(INSERT, pad)]
    assert d.send(1, ("+", (100, 10, 0))) == [(DELETE, pad), (INSERT, (1, 10, 5, 100, 10, 0))]   # 0 -> 1
    assert d.send(1, ("+", (101, 10, 0))) == [(INSERT, (1, 10, 5, 101, 10, 0))]                   # 1 -> 2
    assert d.send(1, ("-", (100, 10, 0))) == [(DELETE, (1, 10, 5, 100, 10, 0))]                   # 2 -> 1
    assert d.send(1, ("-", (101, 10, 0))) == [(DELETE, (1, 10, 5, 101, 10, 0)), (INSERT, pad)]    # 1 -> 0
    assert d.send(0, ("-", (1, 10, 5))) == [(DELETE, pad)]
    assert d.join.left.degree.get_row((10, 1)) is None


def test_right_join_pads_the_right_side(store):
    d = Driver(store, "right")
    assert d.send(1, ("+", (100, 3, 0))) == [(INSERT, NULL3 + (100, 3, 0))]
    assert d.send(0, ("+", (1, 3, 5)), ("+", (2, 3, 6))) == [
        (DELETE, NULL3 + (100, 3, 0)), (INSERT, (1, 3, 5, 100, 3, 0)), (INSERT, (2, 3, 6, 100, 3, 0))]
    assert d.join.right.degree.get_row((3, 100)) == (3, 100, 2)
    assert d.send(0, ("-", (1, 3, 5)), ("-", (2, 3, 6))) == [
        (DELETE, (1, 3, 5, 100, 3, 0)), (DELETE, (2, 3, 6, 100, 3, 0)), (INSERT, NULL3 + (100, 3, 0))]


def _v_below_w():
    return Cmp("<", Col(2, T.INT), Col(5, T.INT)), lambda l, r: None not in (l[2], r[2]) and l[2] < r[2]


@pytest.mark.parametrize("join_type", TYPES)
def test_the_extra_condition_flipping_under_updates(store, join_type):
    cond, py = _v_below_w()
    d = Driver(store, join_type, cond, py)
    d.send(0, ("+", (1, 1, 5)), ("+", (2, 1, 50)), ("+", (3, 1, None)))
    d.send(1, ("+", (10, 1, 10)), ("+", (11, 1, 100)))
    d.send(1, ("U-", (10, 1, 10)), ("U+", (10, 1, 1)))      # (1, 10) stops matching
    d.send(0, ("U-", (2, 1, 50)), ("U+", (2, 1, 0)))        # (2, 10) starts matching
    d.send(0, ("U-", (3, 1, None)), ("U+", (3, 1, 7)))      # NULL condition -> TRUE for 11
    d.send(1, ("U-", (11, 1, 100)), ("U+", (11, 1, None)))  # everything of 11 stops matching
    d.send(1, ("U-", (10, 1, 1)), ("U+", (10, 2, 1)))       # the key moves


def test_update_pairs_stay_pairs_when_the_join_key_stays(store):
    d = Driver(store, "full")
    d.send(0, ("+", (1, 1, 5)))
    d.send(1, ("+", (10, 1, 0)), ("+", (11, 1, 0)), ("+", (12, 2, 0)))
    out = d.send(0, ("U-", (1, 1, 5)), ("U+", (1, 1, 6)))
    assert out == [(UPDATE_DELETE, (1, 1, 5, 10, 1, 0)), (UPDATE_INSERT, (1, 1, 6, 10, 1, 0)),
                   (UPDATE_DELETE, (1, 1, 5, 11, 1, 0)), (UPDATE_INSERT, (1, 1, 6, 11, 1, 0))]
    out = d.send(0, ("U-", (1, 1, 6)), ("U+", (1, 2, 6)))      # the key moves: deletes and inserts
    assert sorted(out, key=repr) == sorted([(DELETE, (1, 1, 6, 10, 1, 0)), (DELETE, (1, 1, 6, 11, 1, 0)),
                                  (INSERT, (None, None, None, 10, 1, 0)), (INSERT, (None, None, None, 11, 1, 0)),
                                  (DELETE, (None, None, None, 12, 2, 0)), (INSERT, (1, 2, 6, 12, 2, 0))], key=repr)
    assert UPDATE_DELETE not in [op for op, _ in out]
    d.send(1, ("-", (12, 2, 0)))
    out = d.send(0, ("U-", (1, 2, 6)), ("U+", (1, 2, 7)))      # no match on either side: the padded pair
    assert out == [(UPDATE_DELETE, (1, 2, 6) + NULL3), (UPDATE_INSERT, (1, 2, 7) + NULL3)]


def test_a_one_to_one_join_on_the_keys_reuses_its_own_inserts_as_cache(store):
    d = Driver(store, "inner", keys=([0], [0]))
    assert d.join.stream_key == [0]   # the right id equals the left id on every row: deduped
    assert d.join.left.unique and d.join.right.unique
    d.send(0, *[("+", (i, i, i)) for i in range(10)])
    misses = d.join.left.cache.misses
    d.send(1, *[("+", (i, i, -i)) for i in range(0, 20, 2)])
    assert d.join.left.cache.misses == misses   # the keys 10..18: the left's key filter says it never
    # had them; 0..8 were cached by its own inserts or kept as its fresh rows, unread
    assert d.join.left.cache.hits + d.join.left.fresh.hits >= 5
    d.send(1, ("U-", (4, 4, -4)), ("U+", (4, 4, 44)))
    d.send(0, ("-", (4, 4, 4)))


def test_stream_keys_per_join_type(store):
    cases = {"inner": [0, 3], "left": [0, 3], "right": [0, 3], "full": [0, 3]}
    for n, (join_type, key) in enumerate(cases.items()):
        j = Driver(store, join_type, ids=tuple(range(10 * n, 10 * n + 4))).join
        assert j.stream_key == key
    # join keys inside both stream keys: inner/left drop the right copy, right drops the left one
    for n, (join_type, key) in enumerate({"inner": [0, 1, 3], "left": [0, 1, 3], "right": [0, 3, 4],
                                          "full": [0, 1, 3, 4]}.items()):
        j = Driver(store, join_type, keys=([1], [1]), left_key=(0, 1), right_key=(0, 1),
                   ids=tuple(range(100 + 10 * n, 100 + 10 * n + 4))).join
        assert j.stream_key == key, join_type


def test_strict_mode_names_the_executor_and_key_and_applies_nothing(store):
    d = Driver(store, "left")
    d.send(0, ("+", (1, 10, 5)))
    with pytest.raises(InconsistentStreamError, match=r"HashJoin\(left\).*pk=\(11, 2\)") as info:
        d.join.on_side_chunk(0, StreamChunk.from_rows(L, [("+", (3, 10, 1)), ("-", (2, 11, 5))]))
    assert info.value.pk == (11, 2)
    with pytest.raises(InconsistentStreamError, match="already has a row"):
        d.join.on_side_chunk(0, StreamChunk.from_rows(L, [("+", (1, 10, 5))]))
    d.verify()   # nothing of the refused chunks was applied
    assert d.join.left.table.get_row((10, 3)) is None


def test_a_tiny_budget_evicts_and_refills_from_state(store):
    budget = MemoryBudget(600)
    d = Driver(store, "full", budget=budget)
    for step in range(6):
        d.send(0, *[("+", (step * 10 + i, i % 4, i)) for i in range(5)])
        d.send(1, *[("+", (step * 10 + i, i % 5, i)) for i in range(4)])
        d.barrier()
    assert budget.evictions > 0
    d.send(0, *[("-", (i, i % 4, i)) for i in range(5)])
    d.send(1, ("U-", (11, 1, 1)), ("U+", (11, 3, 1)))


def test_recovery_reads_the_committed_state(store):
    d = Driver(store, "full")
    d.send(0, ("+", (1, 1, 5)), ("+", (2, 2, 5)))
    d.send(1, ("+", (10, 1, 0)))
    d.checkpointed_restart()   # a fresh executor, empty caches, same tables
    d.send(1, ("+", (11, 2, 0)), ("-", (10, 1, 0)))
    d.send(0, ("-", (1, 1, 5)))


def test_execute_aligns_barriers_and_commits_each_epoch(store):
    e = Epochs(store.max_committed_epoch)
    b0, b1, b2 = e.barrier(), e.barrier(), e.barrier()
    left = ListSource(L, [0], [b0, StreamChunk.from_rows(L, [("+", (1, 1, 1))]), b1,
                               StreamChunk.from_rows(L, [("-", (1, 1, 1))]), b2])
    right = ListSource(R, [0], [b0, b1, StreamChunk.from_rows(R, [("+", (10, 1, 0))]), b2])
    join = HashJoin(left, right, [1], [1], "left", store=store, table_ids=(1, 2, 3), budget=MemoryBudget())
    out = drain(Checked(join))
    assert [m for m in out if not isinstance(m, StreamChunk)] == [b0, b1, b2]
    changes = visible_rows(out)
    assert changes[0] == (INSERT, (1, 1, 1) + NULL3)
    # epoch 2: the left delete and the right insert, in the order alignment delivered them
    assert changes[1:] in ([(DELETE, (1, 1, 1) + NULL3)],
                           [(DELETE, (1, 1, 1) + NULL3), (INSERT, (1, 1, 1, 10, 1, 0)), (DELETE, (1, 1, 1, 10, 1, 0))])
    assert join.left.table.epoch == b2.curr_epoch


def test_construction_errors(store):
    left, right = ListSource(L, [0], []), ListSource(R, [0], [])
    with pytest.raises(ExecutorError, match="join_type"):
        HashJoin(left, right, [1], [1], "cross", store=store, table_ids=(1, 2))
    with pytest.raises(ExecutorError, match="types differ"):
        HashJoin(left, ListSource(Schema([("a", T.BIGINT), ("k", T.BIGINT)]), [0], []), [1], [1],
                 store=store, table_ids=(1, 2))
    with pytest.raises(ExecutorError, match="degree table"):
        HashJoin(left, right, [1], [1], "full", store=store, table_ids=(1, 2, 3))
    with pytest.raises(ExecutorError, match="as many"):
        HashJoin(left, right, [1, 2], [1], store=store, table_ids=(1, 2))
    with pytest.raises(ExecutorError, match="BOOLEAN"):
        HashJoin(left, right, [1], [1], store=store, table_ids=(1, 2), condition=Col(2, T.INT))


# --- the model test ------------------------------------------------------------------------------

ROW_VALUES = st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 6)))
CHUNK = st.lists(st.tuples(st.integers(0, 7), ROW_VALUES, st.booleans()), min_size=1, max_size=7)
STEPS = st.lists(st.one_of(st.tuples(st.just("chunk"), st.integers(0, 1), CHUNK),
                           st.tuples(st.just("barrier")), st.tuples(st.just("restart"))), max_size=14)
CONDITIONS = {
    None: None,
    "v<w": _v_below_w(),
    "v=w or v null": (Or(Cmp("=", Col(2, T.INT), Col(5, T.INT)), IsNull(Col(2, T.INT))),
                      lambda l, r: l[2] is None or (r[2] is not None and l[2] == r[2])),
    "v>1 and w<5": (And(Cmp(">", Col(2, T.INT), Lit(1, T.INT)), Cmp("<", Col(5, T.INT), Lit(5, T.INT))),
                    lambda l, r: l[2] is not None and l[2] > 1 and r[2] is not None and r[2] < 5),
}


def _changes(model, items):
    """Consistent changes from random items: a new id inserts, a known one deletes (``drop``) or
    updates."""
    out = []
    for i, (k, v), drop in items:
        old = model.get(i)
        if old is None:
            out.append(("+", (i, k, v)))
            model[i] = (i, k, v)
        elif drop:
            out.append(("-", old))
            del model[i]
        else:
            out += [("U-", old), ("U+", (i, k, v))]
            model[i] = (i, k, v)
    return out


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(join_type=st.sampled_from(TYPES + SEMI_ANTI), condition=st.sampled_from(sorted(CONDITIONS, key=str)),
       budget=st.sampled_from([None, 0, 400, 3000]), steps=STEPS, consistent=st.booleans())
def test_random_chunks_equal_the_batch_join(store, join_type, condition, budget, steps, consistent):
    base = 1000 * _fresh_ids()
    cond, py = CONDITIONS[condition] or (None, None)
    d = Driver(store, join_type, cond, py, budget=MemoryBudget(budget) if budget is not None else None,
               consistent=consistent, ids=(base + 1, base + 2, base + 3, base + 4))
    shadow = ({}, {})
    for step in steps:
        if step[0] == "chunk":
            items = _changes(shadow[step[1]], step[2])
            if items:
                d.send(step[1], *items)
        elif step[0] == "barrier":
            d.barrier()
        else:
            d.checkpointed_restart()
            d.verify()


_counter = [0]


def _fresh_ids() -> int:
    _counter[0] += 1
    return _counter[0]


# --- the column-wise inner path against the row-by-row path --------------------------------------

INSERT_DELETE_CHUNK = st.lists(st.tuples(st.integers(0, 9), st.one_of(st.none(), st.integers(0, 3)), st.booleans()),
                               min_size=1, max_size=9)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 1), INSERT_DELETE_CHUNK), max_size=12),
       budget=st.sampled_from([None, 0, 400]), consistent=st.booleans())
def test_inner_joins_without_a_condition_emit_what_the_row_path_emits(store, steps, budget, consistent):
    """An inner join without an extra condition builds the output of insert/delete chunks
    column-wise (``HashJoin._inner_chunk``); a TRUE condition takes the row-by-row path. Both
    must emit the same chunks, row for row and op for op (split at the same ``chunk_size``),
    except for the order of one input row's matches: the two paths cache the other side's keys
    differently (a key the column-wise probe reads once is not made an entry), and a cached
    entry keeps its rows in arrival order, a key read from the store comes in pk order. Both
    leave consistent caches (``_check``)."""
    base = 1000 * _fresh_ids()
    joins = []
    for offset, condition in ((0, None), (10, Lit(True, T.BOOLEAN))):
        ids = tuple(base + offset + i for i in (1, 2))
        j = HashJoin(ListSource(L, [0], []), ListSource(R, [0], []), [1], [1], "inner", store=store, table_ids=ids,
                     condition=condition, budget=MemoryBudget(budget) if budget is not None else MemoryBudget(),
                     consistent=consistent, chunk_size=3)
        j.handle_barrier(Barrier(store.max_committed_epoch, Epochs(store.max_committed_epoch).barrier().curr_epoch))
        joins.append(j)
    models = ({}, {})
    for side, items in steps:
        model, rows = models[side], []
        for i, k, drop in items:
            if i in model and drop:
                rows.append(("-", model.pop(i)))
            elif i not in model:
                model[i] = (i, k, 7 * i)
                rows.append(("+", model[i]))
        if not rows:
            continue
        schema = L if side == 0 else R
        fast, slow = (j.on_side_chunk(side, StreamChunk.from_rows(schema, rows)) for j in joins)
        assert [len(c) for c in fast] == [len(c) for c in slow]
        assert _matches_in_order(fast, side) == _matches_in_order(slow, side)
        for c in fast:
            c.validate(joins[0].stream_key)
            assert len(c) <= 3
        for j in joins:
            j._check()


def _matches_in_order(chunks, side: int) -> list:
    """The ``(op, row)`` pairs of ``chunks`` in order, each input row's matches (a run of one op
    and one row of the chunk's side, ``side``: 0 the left columns, 1 the right) sorted."""
    pairs = [pair for c in chunks for pair in c.rows()]
    width = len(L.names)
    own = (lambda row: row[:width]) if side == 0 else (lambda row: row[width:])
    out, run = [], []
    for op, row in pairs:
        if run and (run[0][0], own(run[0][1])) != (op, own(row)):
            out.extend(sorted(run, key=repr))
            run = []
        run.append((op, row))
    return out + sorted(run, key=repr)


def _count_reads(monkeypatch, table_of) -> list:
    """The prefixes the table ``table_of()`` gives at the time (a restart builds new tables) is
    probed for from now on (its batched reads: rows or pairs)."""
    reads = []
    cls = type(table_of())
    for name in ("rows_with_prefixes", "pairs_with_prefixes"):
        original = getattr(cls, name)

        def counting(self, prefixes, original=original):
            prefixes = list(prefixes)
            if self is table_of():
                reads.extend(prefixes)
            return original(self, prefixes)
        monkeypatch.setattr(cls, name, counting)
    return reads


def test_known_absent_keys_spare_reads_and_leave_when_rows_come(store, monkeypatch):
    """A probe of a key without rows remembers it: probing it again reads nothing; rows added
    to it (by the side itself) take it out of the set (write-around: the next probe reads
    them), and the join answers as the model does throughout (``verify`` runs ``_check``, which
    checks the known-absent keys too). The set stays under its limit, dropping its older half."""
    d = Driver(store, "inner")
    d.join.right.filter.off()   # else the right's key filter answers key 7 first (tested below)
    read = _count_reads(monkeypatch, lambda: d.join.right.table)   # reads of the right side's rows only
    d.send(0, ("+", (1, 7, 0)))                    # right has no key 7: read once
    assert read == [(7,)] and (7,) in d.join.right.known_absent()
    d.send(0, ("+", (2, 7, 0)))                    # known absent: no read
    assert read == [(7,)]
    d.send(1, ("+", (10, 7, 1)))                   # right gets key 7: it leaves the set
    assert (7,) not in d.join.right.known_absent() and (7,) not in d.join.right.cache
    d.send(0, ("+", (3, 7, 0)))                    # read again: its first read with rows, not cached
    assert read == [(7,), (7,)] and (7,) not in d.join.right.cache
    assert d.join.right.seen_hashes.peek(0).contains(hash_keys([pa.array([7], pa.int32())])).all()
    d.send(0, ("+", (5, 7, 0)))                    # read again, now cached with its row
    assert read == [(7,), (7,), (7,)] and (7,) in d.join.right.cache
    d.send(1, ("-", (10, 7, 1)))                   # its last row goes: absent again
    assert (7,) in d.join.right.known_absent() and (7,) not in d.join.right.cache
    d.send(0, ("+", (4, 7, 0)))
    assert read == [(7,), (7,), (7,)]
    d.join.right.absent_limit = 4
    d.send(0, *[("+", (100 + k, 50 + k, 0)) for k in range(9)])
    assert len(d.join.right.known_absent()) <= 4
    d.send(1, *[("+", (200 + k, 50 + k, 1)) for k in range(9)])   # every key joins, known or not


def test_the_key_filter_spares_reads_of_keys_the_other_side_never_had(store, monkeypatch):
    """An inner join's probe skips the keys outside the other side's key filter (every join
    key it ever wrote, join_key_filter.py): no read, no known-absent entry. A key with rows is
    always read; a deleted key stays in the filter (a read finds nothing). Recovery rebuilds
    the filter from the stored rows, so a key written before the restart is still read, and
    the join answers as the model does throughout (``_check`` checks the filter too)."""
    d = Driver(store, "inner", fresh_rows=False)   # (fresh rows would answer key 2 unread)
    reads = _count_reads(monkeypatch, lambda: d.join.right.table)
    d.send(0, *[("+", (k, k, 0)) for k in range(4)])            # right never had them
    assert reads == [] and not d.join.right.known_absent()
    d.send(1, ("+", (100, 2, 1)), ("+", (101, 9, 1)))
    d.send(0, ("+", (10, 2, 0)), ("+", (11, 3, 0)))              # key 2 is read, key 3 is not
    assert reads == [(2,)]
    d.send(1, ("-", (101, 9, 1)))
    d.send(0, ("+", (12, 9, 0)))                                 # deleted: still in the filter
    assert reads == [(2,), (9,)]
    d.checkpointed_restart()                                     # rebuilt from the stored rows
    assert d.join.right.filter.on and d.join.left.filter.on
    d.send(0, ("+", (13, 2, 0)), ("+", (14, 5, 0)))
    assert reads[2:] == [(2,)]
    d.send(1, ("+", (102, 5, 1)), ("+", (103, 0, 1)))           # the left's keys from before the restart
    assert d.join.right.filter.may_contain(hash_keys([pa.array([2, 7], pa.int32())])).tolist() == [True, False]


def test_the_own_key_filter_spares_the_strict_insert_probe_of_new_keys(store, monkeypatch):
    """A strict side's insert whose join key its own key filter has never seen cannot repeat a
    stored pk, so the state table is told it is fresh and probes nothing in the store
    (``StateTable.write_chunk_fresh``); an insert of a key the side wrote before is probed,
    and a repeated pk -- in the MemTable or, after a restart, only in the store -- still
    raises with nothing applied."""
    d = Driver(store, "inner")
    probed = []
    original = store.multi_get

    def counting(table_id, keys, epoch):
        keys = list(keys)
        if table_id in (1, 2):
            probed.extend(keys)
        return original(table_id, keys, epoch)
    monkeypatch.setattr(store, "multi_get", counting)
    d.send(0, *[("+", (k, k, 0)) for k in range(6)])
    d.send(1, *[("+", (100 + k, k, 1)) for k in range(3)])
    assert probed == []                                   # every key new to its side
    d.send(0, ("+", (50, 2, 0)), ("+", (51, 77, 0)))      # key 2 was written by the left before
    assert len(probed) == 1
    d.checkpointed_restart()                              # the rows are in the store only now
    with pytest.raises(InconsistentStreamError, match="already has a row"):
        d.join.on_side_chunk(0, StreamChunk.from_rows(L, [("+", (60, 78, 0)), ("+", (3, 3, 0))]))
    assert d.join.left.table.get_row((78, 60)) is None
    d.verify()


def test_the_key_filter_is_bounded_and_answers_maybe_once_off(monkeypatch):
    """Past ``MAX_BITS`` the filter turns off (every key "maybe"), so its memory is bounded;
    until then no key it took is ever answered absent."""
    monkeypatch.setattr(join_key_filter, "MAX_BITS", join_key_filter.FIRST_BITS * 5)
    f = join_key_filter.KeyFilter()
    keys = np.arange(0, join_key_filter.FIRST_BITS // 8, dtype=np.int64)
    f.add(hash_keys([pa.array(keys)]))                           # fills the first array, opens a 4x one
    assert f.on and len(f.arrays) == 2 and f.may_contain(hash_keys([pa.array(keys)])).all()
    others = f.may_contain(hash_keys([pa.array(keys + (1 << 40))]))
    assert others.mean() < 0.1                                   # false positives are rare
    f.add(hash_keys([pa.array(keys)]))
    f.add(hash_keys([pa.array(keys)]))                           # a third array would pass the cap
    assert not f.on and f.bits == 0 and f.may_contain(hash_keys([pa.array(keys)])) is None


def test_a_full_key_filter_array_has_under_one_percent_false_positives():
    """Four bits of one word a key: an array holding its ``bits // 16`` keys answers "maybe"
    for ~0.5 % of other keys (two bits gave ~1.6 %; each such probe of a 1:1 join reads the
    store, and each such insert is not kept as a fresh row)."""
    f = join_key_filter.KeyFilter()
    keys = np.arange(join_key_filter.FIRST_BITS // join_key_filter.BITS_PER_KEY, dtype=np.int64)
    f.add(hash_keys([pa.array(keys)]))
    assert len(f.arrays) == 1 and f.may_contain(hash_keys([pa.array(keys)])).all()
    others = f.may_contain(hash_keys([pa.array(np.arange(200_000, dtype=np.int64) + (1 << 40))]))
    assert others.mean() < 0.01


def test_the_key_filter_answers_alike_with_the_hashes_probe_parts():
    """``add`` and ``may_contain`` given the hashes' ``probe_parts`` (computed once for a
    chunk's two filters) set and answer exactly as without them, across arrays (an add that
    fills one array and opens the next splits the parts with the hashes)."""
    with_parts, without = join_key_filter.KeyFilter(), join_key_filter.KeyFilter()
    full = join_key_filter.FIRST_BITS // join_key_filter.BITS_PER_KEY
    for a, b in ((0, full - 100), (full - 100, full + 300), (full + 300, full + 900)):
        h = hash_keys([pa.array(np.arange(a, b, dtype=np.int64))])
        with_parts.add(h, join_key_filter.probe_parts(h))
        without.add(h)
    assert len(with_parts.arrays) == len(without.arrays) == 2
    assert all((x[0] == y[0]).all() and x[2:] == y[2:] for x, y in zip(with_parts.arrays, without.arrays))
    h = hash_keys([pa.array(np.arange(0, 4 * full, 7, dtype=np.int64))])
    assert (with_parts.may_contain(h, join_key_filter.probe_parts(h)) == without.may_contain(h)).all()


def test_the_budget_may_drop_the_known_absent_keys(store):
    budget = MemoryBudget(1 << 20)
    d = Driver(store, "left", budget=budget)
    # keys the right side had once: inside its key filter (keys outside it need no entry)
    d.send(1, *[("+", (100 + i, i, 1)) for i in range(20)])
    d.send(1, *[("-", (100 + i, i, 1)) for i in range(20)])
    d.send(0, *[("+", (i, i, 0)) for i in range(20)])
    assert len(d.join.right.known_absent()) == 20
    d.join.right.absent_cache.clear()             # what an eviction does
    assert d.join.right.known_absent() == {}
    d.send(1, *[("+", (100 + i, i, 1)) for i in range(0, 20, 2)])   # read from state again
    d.send(0, *[("-", (i, i, 0)) for i in range(20)])


def test_rows_store_exact_key_columns_once_and_read_back_exactly(store):
    """The rows table keeps a key column only in the key when it decodes to the very value
    (integers here: the value holds ``v`` alone); a DOUBLE or DECIMAL key column stays in the
    value too, so a row read back from the store (budget 0: every probe reads) keeps ``-0.0``
    and a decimal's scale, as the row written had them."""
    import decimal
    from relational import value_encoding
    d = Driver(store, "inner", budget=MemoryBudget(0))
    d.send(0, ("+", (1, 7, 5)))
    d.barrier()
    [(_, stored)] = list(store.iter(1, d.join.left.table.epoch))
    assert value_encoding.decode_row(stored, (T.INT,)) == (5,)   # v alone

    left = Schema([("id", T.BIGINT), ("k", T.DOUBLE), ("m", T.DECIMAL)])
    right = Schema([("rid", T.BIGINT), ("k", T.DOUBLE), ("n", T.DECIMAL)])
    for keys in (([1], [1]), ([2], [2])):
        d = Driver(store, "full", budget=MemoryBudget(0), left=left, right=right, keys=keys,
                   ids=tuple(10 * keys[0][0] + i for i in range(4)))
        d.send(0, ("+", (1, -0.0, decimal.Decimal("1.50"))))
        d.barrier()
        out = d.send(1, ("+", (2, 0.0, decimal.Decimal("1.5"))))   # equal keys: a match
        assert [repr(r) for _, r in out if r[0] is not None and r[3] is not None] == [
            repr((1, -0.0, decimal.Decimal("1.50"), 2, 0.0, decimal.Decimal("1.5")))]


LS = Schema([("id", T.BIGINT), ("k", T.VARCHAR), ("v", T.INT)])
RS = Schema([("rid", T.BIGINT), ("k", T.VARCHAR), ("w", T.INT)])


@pytest.mark.parametrize("key_type", ["int", "varchar"])
def test_entries_read_once_are_not_cached_a_second_read_admits_them(store, monkeypatch, key_type):
    """A key whose rows are read from the store is cached only on its second read within the
    side's seen keys (an admission test): in a 1:1 join every key is probed once per side, so
    its entry would only be put and evicted. Caching changes no output (``verify``), and the
    budget may drop the seen keys (the next read of a key is then a first one again). Integer
    keys keep them as a filter of key hashes (``SeenFilter``, fixed size), others as a bounded
    key set."""
    if key_type == "int":   # (without fresh rows, which would answer these keys unread)
        d, k = Driver(store, "inner", fresh_rows=False), (lambda i: i)
    else:
        d, k = Driver(store, "inner", left=LS, right=RS), (lambda i: f"k{i}")
    right = d.join.right
    assert (right.seen_hashes is not None) == (key_type == "int")

    def seen():
        """The keys 0..5 and 50..58 the right side's seen keys hold."""
        keys = [*range(6), *range(50, 59)]
        if right.seen_hashes is None:
            return {i for i in keys if (k(i),) in right.seen.keys()}
        sf = right.seen_hashes.peek(0)
        if sf is None:
            return set()
        column = pa.array(keys, pa.int32())
        return set(np.array(keys)[sf.contains(hash_keys([column]))].tolist())

    def forget():   # what an eviction of the seen keys does
        (right.seen if right.seen_hashes is None else right.seen_hashes).clear()
    d.send(1, *[("+", (100 + i, k(i), 1)) for i in range(6)])
    d.barrier()
    reads = _count_reads(monkeypatch, lambda: d.join.right.table)
    d.send(0, *[("+", (i, k(i), 0)) for i in range(3)])          # first reads: seen, not cached
    assert sorted(reads) == [(k(0),), (k(1),), (k(2),)] and len(right.cache) == 0
    assert seen() == {0, 1, 2}
    d.send(0, *[("+", (10 + i, k(i), 0)) for i in range(2)], ("+", (13, k(3), 0)))   # second reads: admitted
    assert sorted(reads[3:]) == [(k(0),), (k(1),), (k(3),)] and set(right.cache.keys()) == {(k(0),), (k(1),)}
    assert {pk: row for e in map(right.cache.peek, right.cache.keys()) for pk, row in e.rows.items()} == {
        (k(0), 100): (100, k(0), 1), (k(1), 101): (101, k(1), 1)}
    d.send(0, ("+", (20, k(0), 0)), ("+", (21, k(1), 0)))       # cache hits: no read
    assert len(reads) == 6
    forget()
    d.send(0, ("+", (22, k(2), 0)))                              # a first read again
    assert reads[-1] == (k(2),) and (k(2),) not in right.cache and seen() == {2}
    d.send(0, *[("+", (30 + i, k(i), 0)) for i in range(3, 6)])
    d.send(1, *[("+", (200 + i, k(50 + i), 1)) for i in range(9)])
    d.barrier()
    d.send(0, *[("+", (300 + i, k(50 + i), 0)) for i in range(9)])
    if right.seen_hashes is None:   # the set stays bounded
        right.seen.limit = 4
        d.send(0, *[("+", (400 + i, k(50 + i), 0)) for i in range(9)])
        assert len(right.seen.keys()) <= 4
    else:   # a fixed size, charged to the budget
        assert right.seen_hashes.used >= right.seen_hashes.peek(0).nbytes > 0


def test_keys_new_to_a_side_skip_its_entries_and_known_absent_keys_stay_in_its_filter(store):
    """The column-wise path looks up S's cached entries and known-absent keys only for rows
    whose key S's key filter had seen (a key new to S has neither): a key that became known
    absent on S (deleted), an admitted cached key and a key new to S, written in one chunk,
    all join as the batch join says; the row path's probe (an update pair) answers keys
    outside the probed side's key filter without an entry, so known-absent keys stay inside
    it (``_check`` after every chunk). No fresh rows: the probes read."""
    d = Driver(store, "inner", fresh_rows=False)
    d.send(1, ("+", (100, 1, 0)), ("+", (101, 2, 0)))
    d.send(1, ("-", (100, 1, 0)))                      # key 1 inside right's filter, no rows
    d.send(0, ("+", (1, 1, 0)), ("+", (2, 2, 0)))      # probes right: 1 known absent, 2 read once
    assert (1,) in d.join.right.known_absent()
    d.send(0, ("+", (3, 2, 0)))                        # 2 read again: admitted to right's cache
    assert (2,) in d.join.right.cache
    # right writes: 1 (known absent), 2 (cached), 9 (new) in one column-wise chunk
    d.send(1, ("+", (102, 1, 5)), ("+", (103, 2, 5)), ("+", (104, 9, 5)))
    assert (1,) not in d.join.right.known_absent()
    assert len(d.join.right.cache.peek((2,)).rows) == 2
    d.send(0, ("+", (4, 1, 0)), ("+", (5, 2, 0)), ("+", (6, 9, 0)))
    # the row path (an update pair) probing keys the right side never had: no entry
    d.send(0, ("U-", (6, 9, 0)), ("U+", (6, 7, 1)), ("U-", (5, 2, 0)), ("U+", (5, 8, 1)))
    assert (7,) not in d.join.right.known_absent() and (8,) not in d.join.right.known_absent()
    d.send(1, ("+", (105, 7, 5)), ("+", (106, 8, 5)))


def test_key_values_are_to_pylist_s_whatever_the_column():
    """The column-wise path's key values: integer columns without NULLs through numpy, any
    other (NULLs, dates, strings) through Arrow -- the same Python values either way."""
    import datetime
    from relational.arrow import to_pylist
    from stream.executors.hash_join import _key_values
    rows = np.array([0, 2, 3], np.int64)
    for column, t in [(pa.array([5, -1, 2**40, 7], pa.int64()), T.BIGINT), (pa.array([1, 2, 3, 4], pa.int32()), T.INT),
                      (pa.array([1, None, 3, 4], pa.int32()), T.INT), (pa.array(["a", "b", None, "d"]), T.VARCHAR),
                      (pa.array([datetime.date(2020, 1, d) for d in (1, 2, 3, 4)]), T.DATE)]:
        full = to_pylist(column, t)
        assert _key_values(column, t) == full
        got = _key_values(column, t, rows)
        assert got == [full[i] for i in rows] and [type(v) for v in got] == [type(full[i]) for i in rows]


def test_take_gathers_as_arrow_take_does():
    """The column-wise output's gather: integer columns without NULLs through numpy, others
    (NULLs, dates, strings, a slice) through Arrow -- equal to ``Array.take`` either way."""
    import datetime
    from stream.executors.hash_join import _take
    rows = np.array([3, 0, 0, 2], np.int64)
    for column in [pa.array([5, -1, 2**40, 7], pa.int64()), pa.array([1, 2, 3, 4], pa.int16()),
                   pa.array([9, 1, 2, 3, 4, 5], pa.int32()).slice(2), pa.array([1, None, 3, 4], pa.int32()),
                   pa.array(["a", "b", None, "d"]), pa.array([datetime.date(2020, 1, d) for d in (1, 2, 3, 4)])]:
        got, want = _take(column, rows), column.take(pa.array(rows))
        assert got.type == want.type and got.to_pylist() == want.to_pylist() and got.null_count == want.null_count
