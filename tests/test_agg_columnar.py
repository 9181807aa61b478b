"""The columnar group state of append-only HashAggs over one integer key
(stream/executors/agg_columnar.py): :class:`IntSlotMap` against a dict, and the executor against
the per-group path of hash_agg.py (``columnar=False``) on random inputs -- NULL keys and values,
FILTERs, sums leaving int64, early flushes, a budget small enough to evict, a reopen -- with
``_check()`` after every barrier; the value state and every epoch's changes must be equal."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import StreamChunk
from stream.message import Barrier
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, agg_table_count
from stream.executors.agg_columnar import IntSlotMap
from stream.expr import Col
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain

I64 = (1 << 63) - 1


# --- IntSlotMap ---------------------------------------------------------------------------------

_keys = st.integers(-I64 - 1, I64) | st.integers(-50, 50)


@settings(deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["insert", "null", "rebuild"]), st.lists(_keys, max_size=40)),
                      max_size=12))
def test_int_slot_map_is_a_dict_of_dense_slots(steps):
    m, model, null = IntSlotMap(capacity=4), {}, None
    for op, keys in steps:
        if op == "insert":
            new = list(dict.fromkeys(k for k in keys if k not in model))
            slots = m.insert(np.array(new, np.int64))
            assert slots.tolist() == list(range(len(model) + (null is not None), m.n))
            model.update(zip(new, slots.tolist()))
        elif op == "null" and null is None:
            null = m.insert_null()
        elif op == "rebuild":   # keep the keys listed (and the NULL key), renumbered densely
            kept = [k for k in model if k in set(keys)]
            order = kept + (["null"] if null is not None else [])
            arr = np.array([0 if k == "null" else k for k in order], np.int64)
            null = order.index("null") if null is not None else None
            m.rebuild(arr, -1 if null is None else null)
            model = {k: i for i, k in enumerate(order) if k != "null"}
        m._check()
        probe = np.array(keys + list(model), np.int64)
        assert m.lookup(probe).tolist() == [model.get(k, -1) for k in probe.tolist()]
        assert m.n == len(model) + (null is not None) and m.null_slot == (-1 if null is None else null)


# --- the executor against the per-group path ----------------------------------------------------

S = Schema([("id", T.BIGINT), ("g", T.BIGINT), ("v", T.INT), ("w", T.BIGINT), ("f", T.BOOLEAN)])
SI = Schema([("id", T.BIGINT), ("g", T.SMALLINT), ("v", T.INT), ("w", T.BIGINT), ("f", T.BOOLEAN)])


def _calls(schema):
    return [AggCall("count"), AggCall("sum", 2), AggCall("max", 2), AggCall("min", 3), AggCall("sum", 3),
            AggCall("count", 3), AggCall("sum", 2, filter=Col(4, T.BOOLEAN)),
            AggCall("count", None, filter=Col(4, T.BOOLEAN)), AggCall("max", 3, filter=Col(4, T.BOOLEAN))]


def _run(store, schema, epochs_rows, columnar, start_epoch=None, **kw):
    """Per epoch, the Counter of emitted (op, row); the executor."""
    calls = _calls(schema)
    epochs = Epochs(start_epoch)
    msgs = [epochs.barrier()]
    for chunks in epochs_rows:
        msgs += [StreamChunk.from_rows(schema, rows) for rows in chunks if rows]
        msgs.append(epochs.barrier())
    agg = HashAgg(ListSource(schema, [0], msgs), [1], calls, store,
                  range(10, 10 + agg_table_count(calls, True)), append_only=True, columnar=columnar, **kw)
    assert (agg._columnar is not None) == columnar
    out, cur = [], Counter()
    for m in drain(Checked(agg))[1:]:
        if isinstance(m, StreamChunk):
            cur.update((op, row) for op, row in m.rows())
        elif isinstance(m, Barrier):
            agg._check()
            out.append(cur)
            cur = Counter()
    return agg, out, epochs


_val = st.none() | st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(-5, 5)
_big = st.none() | st.integers(-I64 - 1, I64) | st.integers(-5, 5)
_row = st.tuples(st.none() | st.integers(-3, 12), _val, _big, st.none() | st.booleans())


@settings(deadline=None)
@given(epochs=st.lists(st.lists(st.lists(_row, max_size=12), max_size=3), min_size=1, max_size=4),
       max_dirty=st.sampled_from([2, 5, 1 << 17]), budget=st.sampled_from([600, 3000, 1 << 26]),
       small_key=st.booleans())
def test_columnar_groups_equal_the_per_group_path(epochs, max_dirty, budget, small_key):
    schema = SI if small_key else S
    ids = iter(range(1, 10 ** 6))
    rows = [[[("+", (next(ids), *r)) for r in chunk] for chunk in ep] for ep in epochs]
    half = len(rows) // 2
    got = []
    for columnar in (True, False):
        store = HummockStorage.open("memory://")
        kw = dict(max_dirty_groups=max_dirty, budget=MemoryBudget(budget))
        agg, out, ep = _run(store, schema, rows[:half], columnar, **kw)
        # a reopen over the same store: the stored groups are read back
        agg2, out2, _ = _run(store, schema, rows[half:], columnar, start_epoch=ep.epoch, **kw)
        state = sorted(map(repr, agg2.value_table.iter_with_prefix()))
        got.append((out + out2, state))
    assert got[0] == got[1]


def test_sums_beyond_int64_stay_exact_and_a_bigint_sum_of_ints_overflows_as_postgres():
    big = I64 - 1
    rows = [[[("+", (1, 7, 2 ** 31 - 1, big, True)), ("+", (2, 7, 1, big, True))]],
            [[("+", (3, 7, 5, big, None))] * 1],
            [[("+", (4, 7, -5, -big, False)), ("+", (5, 7, 0, -big, True))]]]
    store = HummockStorage.open("memory://")
    agg, out, _ = _run(store, S, rows, True)
    assert agg._columnar.cur[agg.slots[4][0]].dtype == object   # sum(w) left int64 on the way
    final = {}
    for epoch in out:
        for (op, row), k in epoch.items():
            if op in (1, 4):
                final[row[0]] = row[1:]
    # count, sum(v), max(v), min(w), sum(w) NUMERIC, count(w), sum(v) FILTER, count FILTER, max(w) FILTER
    assert final[7] == (5, 2 ** 31 - 1 + 1 + 5 - 5 + 0, 2 ** 31 - 1, -big, big,
                        5, 2 ** 31 - 1 + 1 + 0, 3, big)


def test_only_append_only_integer_keyed_count_sum_min_max_take_the_columnar_state():
    def agg(calls, key=1, append_only=True, schema=S):
        return HashAgg(ListSource(schema, [0], []), [key], calls, HummockStorage.open("memory://"),
                       range(10, 10 + agg_table_count(calls, append_only)), append_only=append_only)._columnar
    assert agg([AggCall("count"), AggCall("sum", 3), AggCall("max", 2)]) is not None
    assert agg([AggCall("count"), AggCall("sum", 3)], append_only=False) is None
    assert agg([AggCall("count", 3, distinct=True)]) is None
    assert agg([AggCall("count")], key=4) is None   # a BOOLEAN key
    assert agg([AggCall("avg", 3)]) is None


def test_an_sql_mv_over_an_append_only_table_equals_its_batch_recomputation():
    q = ("SELECT g, count(*) AS n, sum(v) AS s, max(v) AS hi, min(w) AS lo, sum(w) AS sw "
         "FROM t GROUP BY g")
    rng = np.random.default_rng(5)
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (g BIGINT, v BIGINT, w INT) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
        for _ in range(4):
            batch = [(None if rng.random() < 0.05 else int(rng.integers(0, 40)),
                      None if rng.random() < 0.1 else int(rng.integers(-10 ** 12, 10 ** 12)),
                      int(rng.integers(-100, 100))) for _ in range(200)]
            c.executemany("INSERT INTO t VALUES (%s, %s, %s)", batch)
            c.execute("FLUSH")
            assert sorted(c.execute("SELECT * FROM m").fetchall(), key=repr) == \
                sorted(c.execute(q).fetchall(), key=repr)


def test_check_catches_a_clean_group_that_differs_from_its_stored_row_and_a_lost_dirty_slot():
    import pytest
    rows = [[[("+", (1, 3, 10, 5, True)), ("+", (2, 4, 20, 6, True))]]]
    agg, _, _ = _run(HummockStorage.open("memory://"), S, rows, True)
    col = agg._columnar
    col._check()
    col.cur[1][0] += 1   # the count of a clean (flushed) group
    with pytest.raises(AssertionError):
        col._check()
    col.cur[1][0] -= 1
    col.dirty[1] = True  # dirty without being in the dirty order
    with pytest.raises(AssertionError):
        col._check()


def test_an_entry_the_budget_evicted_with_nothing_clean_to_drop_is_charged_again():
    """When the budget evicts the arrays' cache entry while every group is dirty, nothing can
    be dropped and the arrays keep their size: the entry is put back, so they stay charged."""
    from stream.executors.agg_columnar import _ENTRY
    store = HummockStorage.open("memory://")
    rows = [[[("+", (i, i % 4, 1, 1, True)) for i in range(1, 9)]]]
    agg, _, _ = _run(store, S, rows, True)
    col = agg._columnar
    n = col.map.n
    col.dirty[:n] = True   # as mid-epoch, before the flush: no clean group to drop
    agg.groups.pop(_ENTRY)  # what the budget's eviction does
    col._charge()
    assert agg.groups.get(_ENTRY) is not None
    col.dirty[:n] = False
