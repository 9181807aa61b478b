"""NUMERIC results of integral sums in HashAgg (issue 30 item 2): ``sum``/``avg`` of BIGINT (and
``sum`` of INTERVAL) keep their DECIMAL slot as Python ints and hand them to Arrow vectorized
(``hash_agg._column``) while they fit int64; a sum beyond int64, a state read back from the
store (Decimal) and a mix of both stay exact and keep Postgres' text. Each case is checked
against Python's exact arithmetic and, through SQL, against the batch recomputation."""

import decimal

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from relational.types import DataType as T
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, agg_table_count
from stream.executors.hash_agg import _column
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain

S = Schema([("id", T.BIGINT), ("g", T.INT), ("v", T.BIGINT)])
D = decimal.Decimal
BIG = (1 << 63) - 1


def _run(store, epochs, batches, calls):
    msgs = [epochs.barrier()]
    for rows in batches:
        msgs += [StreamChunk.from_rows(S, rows), epochs.barrier()]
    ex = HashAgg(ListSource(S, [0], msgs), [1], calls, store, range(10, 10 + agg_table_count(calls)))
    out = []
    for m in drain(Checked(ex)):
        if isinstance(m, StreamChunk):
            out += m.rows()
    return ex, out


def test_column_is_vectorized_only_for_plain_ints():
    assert _column([1, None, -5], T.DECIMAL).to_pylist() == ["1", None, "-5"]
    assert _column([1 << 70, 2], T.DECIMAL).to_pylist() == [str(1 << 70), "2"]   # beyond int64
    assert _column([D("1.50"), 2], T.DECIMAL).to_pylist() == ["1.50", "2"]      # a Decimal keeps its scale
    assert _column([D("NaN"), None], T.DECIMAL).to_pylist() == ["NaN", None]
    assert _column([1.5, 2], T.DOUBLE).type == pa.float64()


def test_sums_beyond_int64_and_after_a_restart_stay_exact():
    calls = [AggCall("sum", 2), AggCall("avg", 2), AggCall("count")]
    store, epochs = HummockStorage.open("memory://"), Epochs()
    first = [("+", (1, 1, BIG)), ("+", (2, 1, BIG)), ("+", (3, 2, 7)), ("+", (4, 3, -BIG - 1))]
    _, out = _run(store, epochs, [first], calls)
    assert sorted(r for _, r in out) == sorted([(1, D(2 * BIG), D(BIG), 2), (2, D(7), D(7), 1),
                                                (3, D(-BIG - 1), D(-BIG - 1), 1)])
    # a new executor reads the groups back (their sums as Decimal) and goes on from there
    ex, out = _run(store, epochs, [[("-", (1, 1, BIG)), ("+", (5, 2, 5)), ("-", (4, 3, -BIG - 1))]], calls)
    assert out == [(3, (1, D(2 * BIG), D(BIG), 2)), (4, (1, D(BIG), D(BIG), 1)),
                   (3, (2, D(7), D(7), 1)), (4, (2, D(12), D(6), 2)), (2, (3, D(-BIG - 1), D(-BIG - 1), 1))]
    assert all(type(ex.groups.peek(k)[1]) is int for k in ex.groups.keys())   # ints again after the read
    ex._check()


@settings(deadline=None, max_examples=max(5, settings().max_examples // 5))
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(-BIG - 1, BIG),
                                                                        st.integers(-9, 9))),
                                 min_size=1, max_size=8), min_size=1, max_size=3))
def test_sql_bigint_sums_equal_the_batch_sums(batches):
    q = "SELECT g, sum(v) AS s, avg(v) AS a, count(v) AS n FROM t GROUP BY g"
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (g INT, v BIGINT) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
        sums: dict = {}
        for batch in batches:
            c.executemany("INSERT INTO t VALUES (%s, %s)", batch)
            c.execute("FLUSH")
            for g, v in batch:
                if v is not None:
                    sums[g] = sums.get(g, 0) + v
            got = sorted(c.execute("SELECT * FROM m").fetchall(), key=repr)
            assert got == sorted(c.execute(q).fetchall(), key=repr)
            assert {g: s for g, s, _, _ in got if s is not None} == {g: D(s) for g, s in sums.items()}


SD = Schema([("id", T.BIGINT), ("g", T.INT), ("d", T.DECIMAL)])
_decimal_text = st.one_of(
    st.none(),
    st.builds(lambda i, f, neg: ("-" if neg else "") + str(i) + (("." + f) if f else ""),
              st.integers(0, 10 ** 6), st.sampled_from(["", "0", "5", "25", "125", "10", "000", "0001"]),
              st.booleans()),
    st.sampled_from(["99999999999999.9999", "0.000000000000000001", "123456789012345678", "NaN", "-Infinity"]))


def _decimal_outputs(batches, monkeypatch, fast: bool):
    from stream.executors import agg_call
    if not fast:
        monkeypatch.setattr(agg_call, "scaled_decimals", lambda column, weight: None)
    calls = [AggCall("sum", 2), AggCall("avg", 2), AggCall("count", 2)]
    epochs = Epochs()
    msgs = [epochs.barrier()]
    for rows in batches:
        msgs += [StreamChunk.from_rows(SD, rows), epochs.barrier()]
    ex = HashAgg(ListSource(SD, [0], msgs), [1], calls, HummockStorage.open("memory://"),
                 range(10, 10 + agg_table_count(calls)))
    out = [(op, tuple(map(str, row))) for m in drain(Checked(ex)) if isinstance(m, StreamChunk) for op, row in m.rows()]
    ex._check()
    monkeypatch.undo()
    return out


@settings(deadline=None, max_examples=max(10, settings().max_examples // 3))
@given(data=st.lists(st.tuples(st.integers(0, 3), _decimal_text), min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 30), max_size=3), deleted=st.sets(st.integers(0, 29), max_size=10))
@example(data=[(0, None), (1, "0.0")], cuts=[], deleted=set())   # a Decimal zero keeps its scale: 0.0
def test_numeric_sums_are_the_row_by_row_sums_text_included(data, cuts, deleted):
    """Sums of NUMERIC per group through the scaled-integer path equal the Decimal row-by-row
    path exactly, as text (value and scale), with NULLs, NaN/Infinity (the row-by-row path for
    that chunk), values beyond 18 digits at the chunk's scale, and deletes in a later epoch."""
    import pytest
    rows = [(i, g, d) for i, (g, d) in enumerate(data)]
    bounds = sorted({0, len(rows), *[c for c in cuts if c <= len(rows)]})
    batches = [[("+", r) for r in rows[a:b]] for a, b in zip(bounds, bounds[1:]) if b > a]
    gone = [("-", r) for r in rows if r[0] in deleted]
    if gone:
        batches.append(gone)
    with pytest.MonkeyPatch.context() as mp:
        assert _decimal_outputs(batches, mp, True) == _decimal_outputs(batches, mp, False)
