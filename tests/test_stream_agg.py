"""HashAgg and SimpleAgg on hand-written chunks (stream/executors/hash_agg.py): every aggregate,
retractions and update pairs (also moving a row between groups), NULL group keys and values,
empty groups deleted, SimpleAgg's row when empty, FILTER, min/max whose cache empties and
refills, count(DISTINCT), strict-mode errors, append-only inputs, recovery, a tiny budget.
"""

import decimal
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from hummock import HummockStorage
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, SimpleAgg, agg_table_count
from stream.executors.agg_call import AggregateOverflowError, numeric_div
from stream.expr_errors import counting_into, raising_errors
from stream.expr import Cmp, Col, Lit
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows

S = Schema([("id", T.BIGINT), ("g", T.INT), ("v", T.INT), ("b", T.BIGINT), ("s", T.VARCHAR), ("f", T.BOOLEAN)])
D = decimal.Decimal


def chunk(*rows):
    return StreamChunk.from_rows(S, rows)


def run(executor_factory, batches, store=None, epochs=None):
    """Run ``batches`` (lists of chunks, one list per epoch) through a fresh executor; returns
    (the executor, the output rows of each epoch)."""
    store = store or HummockStorage.open("memory://")
    epochs = epochs or Epochs()
    msgs = [epochs.barrier()]
    for chunks in batches:
        msgs += chunks
        msgs.append(epochs.barrier())
    ex = executor_factory(ListSource(S, [0], msgs), store)
    out, per_epoch = drain(Checked(ex)), []
    current = []
    for m in out[1:]:
        if isinstance(m, StreamChunk):
            current += m.rows()
        else:
            per_epoch.append(current)
            current = []
    return ex, per_epoch


def hash_agg(group, calls, **kw):
    def make(src, store):
        return HashAgg(src, group, calls, store, range(10, 10 + agg_table_count(calls, kw.get("append_only", False))),
                       **kw)
    return make


def simple_agg(calls, **kw):
    def make(src, store):
        return SimpleAgg(src, calls, store, range(10, 10 + agg_table_count(calls)), **kw)
    return make


def test_every_aggregate_with_retractions_update_pairs_and_a_row_moving_between_groups():
    calls = [AggCall("count"), AggCall("count", 2), AggCall("sum", 2), AggCall("sum", 3), AggCall("avg", 2),
             AggCall("min", 2), AggCall("max", 4), AggCall("count", 2, distinct=True),
             AggCall("bool_and", 5), AggCall("bool_or", 5)]
    ex, out = run(hash_agg([1], calls), [
        [chunk(("+", (1, 1, 10, 5, "a", True)), ("+", (2, 1, 20, None, "c", False)),
               ("+", (3, 2, 7, 1, "b", None)))],
        [chunk(("U-", (2, 1, 20, None, "c", False)), ("U+", (2, 2, 10, 4, "z", True)),
               ("-", (1, 1, 10, 5, "a", True)))],
    ])
    assert sorted(out[0]) == [
        (1, (1, 2, 2, 30, D(5), D("15.0000000000000000"), 10, "c", 2, False, True)),
        (1, (2, 1, 1, 7, D(1), D("7.0000000000000000"), 7, "b", 1, None, None))]
    # group 1 loses both rows (deleted), group 2 gains row 2 (an update pair)
    assert out[1] == [(2, (1, 2, 2, 30, D(5), D("15.0000000000000000"), 10, "c", 2, False, True)),
                      (3, (2, 1, 1, 7, D(1), D("7.0000000000000000"), 7, "b", 1, None, None)),
                      (4, (2, 2, 2, 17, D(5), D("8.5000000000000000"), 7, "z", 2, True, True))]
    ex._check()


def test_null_group_keys_form_one_group_and_null_values_are_ignored():
    calls = [AggCall("count"), AggCall("count", 2), AggCall("sum", 2), AggCall("max", 2)]
    _, out = run(hash_agg([1], calls), [
        [chunk(("+", (1, None, None, 0, "", None)), ("+", (2, None, 3, 0, "", None)),
               ("+", (3, 5, None, 0, "", None)))],
        [chunk(("-", (2, None, 3, 0, "", None)))],
    ])
    assert sorted(out[0], key=repr) == sorted([(1, (None, 2, 1, 3, 3)), (1, (5, 1, 0, None, None))], key=repr)
    assert out[1] == [(3, (None, 2, 1, 3, 3)), (4, (None, 1, 0, None, None))]


def test_a_group_created_and_emptied_within_one_epoch_emits_nothing():
    _, out = run(hash_agg([1], [AggCall("count")]), [
        [chunk(("+", (1, 1, 1, 1, "", None))), chunk(("-", (1, 1, 1, 1, "", None)))],
        [chunk(("+", (1, 1, 1, 1, "", None)), ("-", (1, 1, 1, 1, "", None)), ("+", (2, 1, 1, 1, "", None)))],
    ])
    assert out == [[], [(1, (1, 1))]]


def test_an_unchanged_result_is_not_emitted():
    _, out = run(hash_agg([1], [AggCall("max", 2)]), [
        [chunk(("+", (1, 1, 9, 1, "", None)))],
        [chunk(("+", (2, 1, 3, 1, "", None)))],   # row count changes, max does not: state only
    ])
    assert out == [[(1, (1, 9))], []]


def test_simple_agg_emits_its_row_when_empty_and_never_deletes_it():
    calls = [AggCall("count"), AggCall("sum", 2), AggCall("avg", 2), AggCall("min", 4), AggCall("bool_or", 5)]
    ex, out = run(simple_agg(calls), [
        [],
        [chunk(("+", (1, 1, 4, 1, "q", True)))],
        [chunk(("-", (1, 1, 4, 1, "q", True)))],
        [],
    ])
    empty = (0, None, None, None, None)
    one = (1, 4, D("4.0000000000000000"), "q", True)
    assert out == [[(1, empty)], [(3, empty), (4, one)], [(3, one), (4, empty)], []]
    assert ex.stream_key == []


def test_simple_agg_after_a_restart_does_not_insert_its_row_again():
    store, epochs = HummockStorage.open("memory://"), Epochs()
    _, out = run(simple_agg([AggCall("count")]), [[chunk(("+", (1, 1, 4, 1, "q", True)))]], store, epochs)
    assert out == [[(1, (1,))]]
    _, out = run(simple_agg([AggCall("count")]), [[], [chunk(("+", (2, 1, 4, 1, "q", True)))]], store, epochs)
    assert out == [[], [(3, (1,)), (4, (2,))]]


def test_filter_counts_only_rows_where_the_condition_is_true():
    big = Cmp(">", Col(2, T.INT), Lit(5, T.INT))   # NULL v: not counted
    calls = [AggCall("count", filter=big), AggCall("sum", 2, filter=big), AggCall("count")]
    _, out = run(hash_agg([1], calls), [
        [chunk(("+", (1, 1, 10, 0, "", None)), ("+", (2, 1, 1, 0, "", None)), ("+", (3, 1, None, 0, "", None)))],
        [chunk(("U-", (1, 1, 10, 0, "", None)), ("U+", (1, 1, 2, 0, "", None)))],
    ])
    assert out == [[(1, (1, 1, 10, 3))], [(3, (1, 1, 10, 3)), (4, (1, 0, None, 3))]]


@pytest.mark.parametrize("kind", ["min", "max"])
def test_min_max_refill_from_the_materialized_input_when_the_cache_runs_empty(kind):
    values = [5, 3, 8, 3, 9, 1, 7]
    rows = [(i, 1, v, 0, "", None) for i, v in enumerate(values)]
    ordered = sorted(rows, key=lambda r: r[2], reverse=kind == "max")
    batches = [[chunk(*[("+", r) for r in rows])], []]   # the second epoch refills a cache of 2
    for r in ordered[:-1]:   # delete the best row, epoch by epoch
        batches.append([chunk(("-", r))])
    ex, out = run(hash_agg([1], [AggCall(kind, 2)], extreme_cache_rows=2), batches)
    best = [r[2] for r in ordered]
    assert out[0] == [(1, (1, best[0]))]
    changes = [o for o in out[2:] if o]
    expected = [[(3, (1, best[i])), (4, (1, best[i + 1]))] for i in range(len(best) - 1) if best[i] != best[i + 1]]
    assert changes == expected
    ex._check()


def test_min_max_of_strings_and_inserts_into_a_cached_group():
    calls = [AggCall("min", 4), AggCall("max", 4)]
    ex, out = run(hash_agg([1], calls, extreme_cache_rows=2), [
        [chunk(*[("+", (i, 1, 0, 0, s, None)) for i, s in enumerate(["m", "c", "x", "a", "q"])])],
        [chunk(("+", (9, 1, 0, 0, "b", None)), ("-", (3, 1, 0, 0, "a", None)))],
        [chunk(("-", (9, 1, 0, 0, "b", None)), ("-", (1, 1, 0, 0, "c", None)), ("+", (10, 1, 0, 0, "zz", None)))],
    ])
    assert out == [[(1, (1, "a", "x"))], [(3, (1, "a", "x")), (4, (1, "b", "x"))],
                   [(3, (1, "b", "x")), (4, (1, "m", "zz"))]]
    ex._check()


def test_count_distinct_counts_values_not_rows():
    calls = [AggCall("count", 2, distinct=True), AggCall("count", 2)]
    ex, out = run(hash_agg([1], calls), [
        [chunk(("+", (1, 1, 5, 0, "", None)), ("+", (2, 1, 5, 0, "", None)), ("+", (3, 1, 6, 0, "", None)),
               ("+", (4, 1, None, 0, "", None)))],
        [chunk(("-", (1, 1, 5, 0, "", None)))],
        [chunk(("-", (2, 1, 5, 0, "", None)))],
    ])
    assert out == [[(1, (1, 2, 3))], [(3, (1, 2, 3)), (4, (1, 2, 2))], [(3, (1, 2, 2)), (4, (1, 1, 1))]]
    ex._check()


def test_sum_types_follow_postgres():
    schema = Schema([("id", T.BIGINT), ("i2", T.SMALLINT), ("r", T.REAL), ("d", T.DOUBLE), ("n", T.DECIMAL)])
    calls = [AggCall("sum", 1), AggCall("sum", 0), AggCall("sum", 2), AggCall("sum", 3), AggCall("sum", 4),
             AggCall("avg", 0), AggCall("avg", 3), AggCall("avg", 4), AggCall("max", 4)]
    store, e = HummockStorage.open("memory://"), Epochs()
    rows = [(1, 2, 1.5, 0.25, D("1.10")), (2, 3, 2.5, 0.5, D("2.205")), (2 ** 62, None, None, None, None)]
    msgs = [e.barrier(), StreamChunk.from_rows(schema, [("+", r) for r in rows]), e.barrier()]
    ex = SimpleAgg(ListSource(schema, [0], msgs), calls, store, range(10, 12))
    assert [c.return_type for c in ex.calls] == [T.BIGINT, T.DECIMAL, T.REAL, T.DOUBLE, T.DECIMAL, T.DECIMAL,
                                                  T.DOUBLE, T.DECIMAL, T.DECIMAL]
    [(_, row)] = visible_rows(drain(ex))
    assert row == (5, D(2 ** 62 + 3), 4.0, 0.75, D("3.305"), D("1537228672809129302"), 0.375,
                   D("1.6525000000000000"), D("2.205"))
    assert str(row[5]) == "1537228672809129302"   # 19 integer digits leave no room for a fraction


def test_numeric_division_scale_is_postgres():
    assert str(numeric_div(D(1), 3)) == "0.33333333333333333333"
    assert str(numeric_div(D(2), 1)) == "2.0000000000000000"
    assert str(numeric_div(D(10), 4)) == "2.5000000000000000"
    assert str(numeric_div(D(100000), 3)) == "33333.333333333333"
    assert str(numeric_div(D(1), 1)) == "1.00000000000000000000"
    assert str(numeric_div(D("1.123456789012345678"), 1)) == "1.12345678901234567800"


def test_sum_of_int_overflowing_bigint_is_a_clear_error_in_a_batch_and_null_in_a_stream():
    call = AggCall("sum", 1).bind(S)
    with raising_errors(), pytest.raises(AggregateOverflowError, match="out of range for BIGINT in group"):
        call.result_column([[2 ** 63], [1]], "batch aggregate", [(7,)])
    assert call.result_column([[2 ** 63 - 1, 0], [1, 0]], "HashAgg", [(7,), (8,)]) == [2 ** 63 - 1, None]
    counted = Counter()
    with counting_into(counted):   # a stream: that group's result is NULL, counted
        assert call.result_column([[2 ** 63, 5], [1, 1]], "HashAgg", [(7,), (8,)]) == [None, 5]
    assert counted == {"bigint out of range": 1}


def test_strict_mode_names_the_group_of_a_delete_it_does_not_have():
    with pytest.raises(InconsistentStreamError, match="group") as info:
        run(hash_agg([1], [AggCall("count")]), [[chunk(("-", (1, 4, 1, 1, "", None)))]])
    assert info.value.pk == (4,)
    with pytest.raises(InconsistentStreamError):   # a distinct value it does not have
        run(hash_agg([1], [AggCall("count", 2, distinct=True)]),
            [[chunk(("+", (1, 4, 1, 1, "", None)))], [chunk(("-", (2, 4, 2, 1, "", None)))]])


def test_append_only_keeps_one_extreme_and_refuses_deletes():
    calls = [AggCall("max", 2), AggCall("min", 4)]
    assert agg_table_count(calls, append_only=True) == 1 and agg_table_count(calls) == 3
    _, out = run(hash_agg([1], calls, append_only=True), [
        [chunk(("+", (1, 1, 3, 0, "k", None)), ("+", (2, 1, None, 0, "b", None)))],
        [chunk(("+", (3, 1, 9, 0, "z", None)), ("+", (4, 2, 1, 0, None, None)))],
    ])
    assert out == [[(1, (1, 3, "b"))], [(3, (1, 3, "b")), (4, (1, 9, "b")), (1, (2, 1, None))]]
    with pytest.raises(ExecutorError, match="append-only"):
        run(hash_agg([1], calls, append_only=True), [[chunk(("+", (1, 1, 3, 0, "k", None)), ("-", (1, 1, 3, 0, "k", None)))]])


def test_a_restarted_executor_continues_from_the_committed_state():
    calls = [AggCall("count"), AggCall("max", 2), AggCall("count", 2, distinct=True)]
    store, epochs = HummockStorage.open("memory://"), Epochs()
    run(hash_agg([1], calls, extreme_cache_rows=1), [[chunk(("+", (1, 1, 3, 0, "", None)), ("+", (2, 1, 8, 0, "", None)))]],
        store, epochs)
    ex, out = run(hash_agg([1], calls, extreme_cache_rows=1), [[chunk(("-", (2, 1, 8, 0, "", None)))]], store, epochs)
    assert out == [[(3, (1, 2, 8, 2)), (4, (1, 1, 3, 1))]]
    ex._check()


def test_a_tiny_budget_evicts_groups_and_reads_them_again():
    budget = MemoryBudget(2000)
    calls = [AggCall("count"), AggCall("sum", 2), AggCall("max", 2)]
    rows = [(i, i % 13, i, 0, "", None) for i in range(60)]
    batches = [[chunk(*[("+", r) for r in rows[:30]])], [chunk(*[("+", r) for r in rows[30:]])],
               [chunk(*[("-", r) for r in rows[::3]])]]
    ex, out = run(hash_agg([1], calls, budget=budget, extreme_cache_rows=2), batches)
    assert budget.evictions > 0
    final = {}
    for r in rows:
        if r[0] % 3:
            final.setdefault(r[1], []).append(r[2])
    state = {}
    for epoch in out:
        for op, row in epoch:
            if op in (1, 4):
                state[row[0]] = row[1:]
            else:
                assert state.pop(row[0]) == row[1:]
    assert state == {g: (len(v), sum(v), max(v)) for g, v in final.items()}
    ex._check()


def test_bad_calls_are_refused_at_construction():
    with pytest.raises(ExecutorError, match="DISTINCT"):
        AggCall("max", 1, distinct=True)   # (the binder drops DISTINCT from min/max: it changes nothing)
    with pytest.raises(ExecutorError, match="DISTINCT"):
        AggCall("count", None, distinct=True)
    with pytest.raises(ExecutorError, match="needs an argument"):
        AggCall("max")
    with pytest.raises(ExecutorError, match="BOOLEAN"):
        AggCall("bool_or", 1).bind(S)
    with pytest.raises(ExecutorError, match="not supported"):
        AggCall("sum", 4).bind(S)
    with pytest.raises(ExecutorError, match="table ids"):
        HashAgg(ListSource(S, [0], []), [1], [AggCall("max", 2)], HummockStorage.open("memory://"), [1])


def test_state_table_layout():
    """docs/format.md section 8: the persisted columns of the aggregation state tables."""
    calls = [AggCall("count"), AggCall("sum", 2), AggCall("sum", 3), AggCall("max", 4), AggCall("bool_or", 5),
             AggCall("count", 2, distinct=True), AggCall("min", 2)]
    ex = HashAgg(ListSource(S, [0], []), [1], calls, HummockStorage.open("memory://"), [7, 8, 9, 10])
    value, max_in, min_in, distinct = ex.state_tables()   # value, extremes, distincts
    assert [t.table_id for t in (value, max_in, min_in, distinct)] == [7, 8, 10, 9]
    assert list(zip(value.names, value.types)) == [
        ("g", T.INT), ("_row_count", T.BIGINT), ("_s0_0", T.BIGINT), ("_s1_0", T.BIGINT), ("_s1_1", T.BIGINT),
        ("_s2_0", T.DECIMAL), ("_s2_1", T.BIGINT), ("_s3_0", T.VARCHAR), ("_s4_0", T.BIGINT), ("_s4_1", T.BIGINT),
        ("_s5_0", T.BIGINT), ("_s6_0", T.INT)]
    assert list(value.serde.pk_indices) == [0] and list(value.serde.dist_key_indices) == [0]
    assert list(zip(max_in.names, max_in.types)) == [("g", T.INT), ("_v", T.VARCHAR), ("_k0", T.BIGINT)]
    assert [o.descending for o in max_in.serde.order_types] == [False, True, False]
    assert [o.descending for o in min_in.serde.order_types] == [False, False, False]
    assert list(zip(distinct.names, distinct.types)) == [("g", T.INT), ("_v", T.INT), ("_count", T.BIGINT)]
    assert list(distinct.serde.pk_indices) == [0, 1]


def _final(epochs):
    """The MV an aggregation's output builds (group key -> results), checking every delete
    and U- names the current row."""
    state = {}
    for epoch in epochs:
        for op, row in epoch:
            if op in (1, 4):
                assert row[0] not in state
                state[row[0]] = row[1:]
            else:
                assert state.pop(row[0]) == row[1:]
    return state


def test_many_changed_groups_come_out_in_chunks_that_keep_update_pairs_whole():
    rows = [(i, i, i, 0, "", None) for i in range(1500)]
    src_batches = [[chunk(*[("+", r) for r in rows[:700]]), chunk(*[("+", r) for r in rows[700:]])],
                   [chunk(*[("U-", r), ("U+", (r[0], r[1], r[2] + 1, 0, "", None))]) for r in rows[:600]]]
    store, epochs = HummockStorage.open("memory://"), Epochs()
    msgs = [epochs.barrier()]
    for batch in src_batches:
        msgs += batch + [epochs.barrier()]
    out = drain(Checked(HashAgg(ListSource(S, [0], msgs), [1], [AggCall("sum", 2)], store, [10])))
    sizes = [len(m) for m in out if isinstance(m, StreamChunk)]
    assert max(sizes) <= 1025 and sum(sizes) == 1500 + 1200
    mv = _final([[r for m in out if isinstance(m, StreamChunk) for r in m.rows()]])
    assert mv == {i: (i + 1 if i < 600 else i,) for i in range(1500)}


def test_an_epoch_over_max_dirty_groups_flushes_early_and_stays_exact():
    rows = [(i, i % 40, i, 0, "", None) for i in range(200)]
    batches = [[chunk(*[("+", r) for r in rows[k:k + 20]]) for k in range(0, 200, 20)],
               [chunk(*[("-", r) for r in rows[k:k + 30:3]]) for k in range(0, 200, 30)]]
    ex, out = run(hash_agg([1], [AggCall("count"), AggCall("max", 2)], max_dirty_groups=5, extreme_cache_rows=2),
                  batches)
    deleted = {r[0] for k in range(0, 200, 30) for r in rows[k:k + 30:3]}
    kept = [r for r in rows if r[0] not in deleted]
    groups = {}
    for r in kept:
        groups.setdefault(r[1], []).append(r[2])
    assert _final(out) == {g: (len(v), max(v)) for g, v in groups.items()}
    ex._check()


def test_an_epoch_of_tens_of_thousands_of_groups_emits_each_group_once_by_default():
    """The default ``max_dirty_groups`` holds an epoch of 40k groups (each hit twice, in two
    chunks) without an early flush: each group is emitted once, as its insert with both rows."""
    n = 40_000
    ids = pa.array(np.arange(2 * n, dtype=np.int64))
    groups = pa.array(np.tile(np.arange(n, dtype=np.int64), 2))
    s = Schema([("id", T.BIGINT), ("g", T.BIGINT)])
    e = Epochs()
    chunks = [StreamChunk(np.full(n, INSERT, np.int8), [ids.slice(at, n), groups.slice(at, n)], s)
              for at in (0, n)]
    ex = HashAgg(ListSource(s, [0], [e.barrier(), *chunks, e.barrier()]), [1], [AggCall("count")],
                 HummockStorage.open("memory://"), [10], append_only=True)
    out = [m for m in drain(ex) if isinstance(m, StreamChunk)]
    assert sum(len(m) for m in out) == n and all((m.ops == INSERT).all() for m in out)
    assert {tuple(c.to_pylist()) for c in out[0].columns[1:]} == {(2,) * len(out[0])}


def test_keys_equal_as_values_but_not_as_text_are_one_group():
    schema = Schema([("id", T.BIGINT), ("n", T.DECIMAL), ("x", T.DOUBLE)])
    rows = [(1, D("1.0"), 0.0), (2, D("1.00"), -0.0), (3, D("2"), 1.0)]
    e = Epochs()
    msgs = [e.barrier(), StreamChunk.from_rows(schema, [("+", r) for r in rows]), e.barrier()]
    by_n = HashAgg(ListSource(schema, [0], msgs), [1], [AggCall("count")], HummockStorage.open("memory://"), [1])
    assert sorted(r for _, r in visible_rows(drain(by_n))) == [(D("1.0"), 2), (D("2"), 1)]
    by_x = HashAgg(ListSource(schema, [0], msgs), [2], [AggCall("count")], HummockStorage.open("memory://"), [1])
    assert sorted(r for _, r in visible_rows(drain(by_x))) == [(0.0, 2), (1.0, 1)]


def test_an_append_only_bigint_extreme_with_nulls_in_the_chunk_stays_exact():
    # the per-chunk min/max of a BIGINT column holding NULLs was taken over float64 (Arrow's
    # to_numpy of a column with NULLs): 2**53 + 1 came out as 2**53
    calls = [AggCall("max", 3), AggCall("min", 3)]
    big = 2 ** 53 + 1
    for key in ([1], [4]):   # an integer key (also the columnar state's) and a VARCHAR key
        ex, out = run(hash_agg(key, calls, append_only=True),
                      [[chunk(("+", (1, 1, 0, None, "a", None)), ("+", (2, 1, 0, big, "a", None)))]])
        assert [row[-2:] for _, row in out[0]] == [(big, big)]
