"""Aggregates over INTERVAL and float sums that overflow, as PostgreSQL has them (issue 25), in a
batch SELECT and in materialized views kept through INSERT, DELETE and UPDATE.

- ``min``/``max`` of an INTERVAL order by its span with 30-day months and 24-hour days
  (``INTERVAL '40 days' > INTERVAL '1 mon'`` though its month field is smaller), in batch, in
  a HashAgg's retractable state (materialized input + cache), append-only, and OVER windows.
- ``sum`` of an INTERVAL adds months, days and microseconds fieldwise (``interval_pl``),
  ``avg`` divides that sum by the count (``interval_div``); a field out of range is "interval
  out of range": an error in a batch, that group's NULL (counted) in an MV.
- ``sum(double precision)`` / ``sum(real)`` / ``avg(double precision)`` whose finite values'
  sum overflows is "value out of range: overflow" (Postgres' ``float8_accum``/``float4pl``),
  not Infinity: an error in a batch, NULL and counted in an MV; an infinite input is no overflow.

Expected values are computed by a small Postgres model (``pg_*`` below) or written out from
Postgres 16.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from relational.types import DataType as T, Interval
from sql.errors import ExecutionError
from stream.executors import AggCall, HashAgg, agg_table_count
from stream.executor import Checked
from stream.chunk import StreamChunk
from stream.expr_interval import scale_interval
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows

H = 3_600_000_000
DAY = 24 * H


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


def pg_sum(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return Interval(sum(v.months for v in vals), sum(v.days for v in vals), sum(v.usecs for v in vals))


def pg_avg(values):
    total = pg_sum(values)
    if total is None:
        return None
    n = len([v for v in values if v is not None])
    return Interval(*scale_interval(total.months, total.days, total.usecs, float(n), True))


def fields(v):
    return None if v is None else (v.months, v.days, v.usecs)


def span(v):
    return None if v is None else v.total_usecs()


def test_min_and_max_order_intervals_by_their_span_in_batch_and_in_mvs_through_dml(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, v INTERVAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, min(v) AS lo, max(v) AS hi FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW m1 AS SELECT min(v) AS lo, max(v) AS hi FROM t")
    conn.execute("INSERT INTO t VALUES (1, 1, INTERVAL '1 mon'), (2, 1, INTERVAL '40 days'), "
                 "(3, 1, INTERVAL '-1 mon'), (4, 1, INTERVAL '-40 days'), (5, 1, INTERVAL '1000 hours'), "
                 "(6, 2, NULL), (7, 2, INTERVAL '1 day 01:00:00'), (8, 2, INTERVAL '25 hours')")

    def check(expected):
        batch = conn.execute("SELECT g, min(v), max(v) FROM t GROUP BY g ORDER BY g").fetchall()
        mv = conn.execute("SELECT g, lo, hi FROM m ORDER BY g").fetchall()
        got = [(g, span(lo), span(hi)) for g, lo, hi in batch]
        assert got == expected
        assert [(g, span(lo), span(hi)) for g, lo, hi in mv] == expected
        lo, hi = conn.execute("SELECT lo, hi FROM m1").fetchall()[0]
        assert (span(lo), span(hi)) == (min(e[1] for e in expected), max(e[2] for e in expected))
        assert [tuple(map(span, r)) for r in conn.execute("SELECT min(v), max(v) FROM t").fetchall()] == \
            [(span(lo), span(hi))]

    # 1000 hours (41 days 16 h) > 40 days > 1 mon (30 days), though '1 mon' has the larger month field
    check([(1, -40 * DAY, 1000 * H), (2, 25 * H, 25 * H)])
    assert fields(conn.execute("SELECT max(v) FROM t WHERE g = 1").fetchall()[0][0]) == (0, 0, 1000 * H)
    conn.execute("DELETE FROM t WHERE id IN (4, 5)")          # the extremes go: the next ones come back
    check([(1, -30 * DAY, 40 * DAY), (2, 25 * H, 25 * H)])
    assert fields(conn.execute("SELECT hi FROM m WHERE g = 1").fetchall()[0][0]) == (0, 40, 0)
    conn.execute("UPDATE t SET v = INTERVAL '2 mons' WHERE id = 3")
    check([(1, 30 * DAY, 60 * DAY), (2, 25 * H, 25 * H)])
    conn.execute("UPDATE t SET v = NULL WHERE g = 2")
    assert conn.execute("SELECT g, lo, hi FROM m WHERE g = 2").fetchall() == [(2, None, None)]
    assert conn.execute("SELECT min(v), max(v) FROM t WHERE g = 2").fetchall() == [(None, None)]


def test_min_and_max_of_intervals_in_window_aggregates_and_append_only_tables(conn):
    conn.execute("CREATE TABLE t (g INT, v INTERVAL) APPEND ONLY")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, min(v) AS lo, max(v) AS hi FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (1, INTERVAL '1 mon'), (1, INTERVAL '29 days'), (1, INTERVAL '31 days')")
    conn.execute("INSERT INTO t VALUES (1, INTERVAL '1 mon 1 day'), (1, INTERVAL '-1 year')")
    assert [(g, span(lo), span(hi)) for g, lo, hi in conn.execute("SELECT * FROM m").fetchall()] == \
        [(1, -360 * DAY, 31 * DAY)]
    rows = conn.execute("SELECT max(v) OVER (PARTITION BY g) FROM t").fetchall()
    assert {span(r[0]) for r in rows} == {31 * DAY}


S = Schema([("id", T.BIGINT), ("g", T.INT), ("v", T.INTERVAL)])


def test_an_append_only_hash_agg_keeps_the_interval_with_the_largest_span():
    """The append-only HashAgg's per-chunk best (Arrow has no min/max kernel for intervals)."""
    calls = [AggCall("min", 2), AggCall("max", 2)]
    epochs = Epochs()
    rows1 = [(1, 1, Interval(1, 0, 0)), (2, 1, Interval(0, 40, 0)), (3, 2, None), (4, 2, Interval(0, 0, H))]
    rows2 = [(5, 1, Interval(0, 0, 1000 * H)), (6, 1, Interval(-1, 0, 0)), (7, 2, Interval(0, -1, 0))]
    msgs = [epochs.barrier(), StreamChunk.from_rows(S, [("+", r) for r in rows1]), epochs.barrier(),
            StreamChunk.from_rows(S, [("+", r) for r in rows2]), epochs.barrier()]
    store = HummockStorage.open("memory://")
    ex = HashAgg(ListSource(S, [0], msgs), [1], calls, store, range(10, 10 + agg_table_count(calls, True)),
                 append_only=True)
    out = [(op, (g, fields(lo), fields(hi))) for op, (g, lo, hi) in visible_rows(drain(Checked(ex)))]
    assert out[:2] == [(1, (1, (1, 0, 0), (0, 40, 0))), (1, (2, (0, 0, H), (0, 0, H)))]
    assert sorted(out[2:]) == sorted([(3, (1, (1, 0, 0), (0, 40, 0))), (4, (1, (-1, 0, 0), (0, 0, 1000 * H))),
                                      (3, (2, (0, 0, H), (0, 0, H))), (4, (2, (0, -1, 0), (0, 0, H)))])


def test_sum_and_avg_of_intervals_add_fieldwise_as_postgres(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, v INTERVAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, sum(v) AS s, avg(v) AS a FROM t GROUP BY g")
    conn.execute("CREATE MATERIALIZED VIEW m1 AS SELECT sum(v) AS s, avg(v) AS a FROM t")
    conn.execute("INSERT INTO t VALUES (1, 1, INTERVAL '1 mon 2 days 03:00:00'), (2, 1, INTERVAL '40 days'), "
                 "(3, 1, INTERVAL '-1 mon'), (4, 1, NULL), (5, 2, INTERVAL '1 mon'), (6, 2, INTERVAL '1 day'), "
                 "(7, 2, INTERVAL '1 hour')")
    # Postgres 16: sum is '42 days 03:00:00' and '1 mon 1 day 01:00:00' (fields kept apart, not
    # justified); avg '14 days 01:00:00' and '10 days 08:20:00' (the month's third cascades into days)
    expected = [(1, (0, 42, 3 * H), (0, 14, H)), (2, (1, 1, H), (0, 10, 8 * H + 20 * 60_000_000))]
    for query in ("SELECT g, sum(v), avg(v) FROM t GROUP BY g ORDER BY g", "SELECT g, s, a FROM m ORDER BY g"):
        assert [(g, fields(s), fields(a)) for g, s, a in conn.execute(query).fetchall()] == expected
    for query in ("SELECT sum(v), avg(v) FROM t", "SELECT s, a FROM m1"):
        s, a = conn.execute(query).fetchall()[0]
        assert (fields(s), fields(a)) == ((1, 43, 4 * H), (0, 12, 4 * H + 40 * 60_000_000))
    conn.execute("DELETE FROM t WHERE id = 6")
    conn.execute("UPDATE t SET v = v * 2 WHERE g = 1")
    expected = [(1, (0, 84, 6 * H), (0, 28, 2 * H)), (2, (1, 0, H), (0, 15, 30 * 60_000_000))]
    for query in ("SELECT g, sum(v), avg(v) FROM t GROUP BY g ORDER BY g", "SELECT g, s, a FROM m ORDER BY g"):
        assert [(g, fields(s), fields(a)) for g, s, a in conn.execute(query).fetchall()] == expected
    conn.execute("DELETE FROM t WHERE g = 2")
    assert conn.execute("SELECT g FROM m ORDER BY g").fetchall() == [(1,)]
    assert conn.execute("SELECT sum(v), avg(v) FROM t WHERE g = 2").fetchall() == [(None, None)]
    rows = conn.execute("SELECT id, sum(v) OVER (ORDER BY id) FROM t ORDER BY id").fetchall()
    assert [(i, fields(s)) for i, s in rows] == [(1, (2, 4, 6 * H)), (2, (2, 84, 6 * H)), (3, (0, 84, 6 * H)),
                                                 (4, (0, 84, 6 * H))]


def test_an_interval_sum_out_of_range_is_an_error_in_a_batch_and_a_counted_null_in_an_mv(conn):
    conn.execute("CREATE TABLE t (g INT, v INTERVAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, sum(v) AS s, avg(v) AS a, count(*) AS n FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (1, INTERVAL '2000000000 mons'), (1, INTERVAL '2000000000 mons'), "
                 "(2, INTERVAL '2000000000 days'), (2, INTERVAL '2000000000 days'), (3, INTERVAL '1 day')")
    for agg in ("sum", "avg"):
        with pytest.raises(ExecutionError, match="interval out of range"):
            conn.execute(f"SELECT g, {agg}(v) FROM t GROUP BY g").fetchall()
    rows = conn.execute("SELECT g, s, a, n FROM m ORDER BY g").fetchall()
    assert [(g, fields(s), fields(a), n) for g, s, a, n in rows] == \
        [(1, None, None, 2), (2, None, None, 2), (3, (0, 1, 0), (0, 1, 0), 1)]
    assert conn.data_errors()["m"] == {"interval out of range": 4}
    conn.execute("DELETE FROM t WHERE g = 1 AND v = INTERVAL '2000000000 mons'")   # both rows: fits again
    conn.execute("INSERT INTO t VALUES (1, INTERVAL '2000000000 mons')")
    s, a = conn.execute("SELECT s, a FROM m WHERE g = 1").fetchall()[0]
    assert (fields(s), fields(a)) == ((2_000_000_000, 0, 0), (2_000_000_000, 0, 0))


intervals = st.builds(Interval, st.integers(-2000, 2000), st.integers(-20_000, 20_000),
                      st.integers(-10 ** 14, 10 ** 14)) | st.none()


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 3), intervals), max_size=25),
       deletes=st.lists(st.integers(0, 24), max_size=10))
def test_interval_aggregates_of_batch_and_mv_agree_with_a_postgres_model(rows, deletes):
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, v INTERVAL)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, min(v) AS lo, max(v) AS hi, sum(v) AS s, "
                     "avg(v) AS a, count(*) AS n FROM t GROUP BY g")
        if rows:
            conn.executemany("INSERT INTO t VALUES ($1, $2, $3)", [(i, g, v) for i, (g, v) in enumerate(rows)])
        live = dict(enumerate(rows))
        for i in deletes:
            conn.execute("DELETE FROM t WHERE id = $1", (i,))
            live.pop(i, None)
        expected = []
        for g in sorted({g for g, _ in live.values()}):
            vals = [v for gg, v in live.values() if gg == g]
            present = [v for v in vals if v is not None]
            expected.append((g, span(min(present)) if present else None, span(max(present)) if present else None,
                             fields(pg_sum(vals)), fields(pg_avg(vals)), len(vals)))

        def norm(result):
            return [(g, span(lo), span(hi), fields(s), fields(a), n) for g, lo, hi, s, a, n in result]
        assert norm(conn.execute("SELECT g, min(v), max(v), sum(v), avg(v), count(*) FROM t GROUP BY g "
                                 "ORDER BY g").fetchall()) == expected
        assert norm(conn.execute("SELECT * FROM m ORDER BY g").fetchall()) == expected


def test_a_float_sum_that_overflows_is_an_error_in_a_batch_and_a_counted_null_in_an_mv(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, d DOUBLE PRECISION, r REAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, sum(d) AS sd, avg(d) AS ad, sum(r) AS sr, "
                 "count(*) AS n FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (1, 1, 1e308, 3e38), (2, 1, 1e308, 3e38), (3, 2, 5, 1), "
                 "(4, 3, 'Infinity', 'Infinity'), (5, 3, 1e308, 1)")
    for query in ("SELECT sum(d) FROM t WHERE g = 1", "SELECT g, avg(d) FROM t GROUP BY g",
                  "SELECT sum(r) FROM t WHERE g = 1", "SELECT id, sum(d) OVER () FROM t WHERE g = 1"):
        with pytest.raises(ExecutionError, match="value out of range: overflow"):
            conn.execute(query).fetchall()
    # an infinite input is no overflow (Postgres: Infinity); avg(real) adds in double precision
    assert conn.execute("SELECT g, sum(d), sum(r) FROM t WHERE g <> 1 GROUP BY g ORDER BY g").fetchall() == \
        [(2, 5.0, 1.0), (3, float("inf"), float("inf"))]
    assert conn.execute("SELECT avg(r) FROM t WHERE g = 1").fetchall() == [(pytest.approx(3e38, rel=1e-6),)]
    assert conn.execute("SELECT * FROM m ORDER BY g").fetchall() == \
        [(1, None, None, None, 2), (2, 5.0, 5.0, 1.0, 1), (3, float("inf"), float("inf"), float("inf"), 2)]
    assert conn.data_errors()["m"] == {"value out of range: overflow": 3}
    conn.execute("INSERT INTO t VALUES (6, 2, 1.5, 2)")   # other groups go on
    assert conn.execute("SELECT sd, sr FROM m WHERE g = 2").fetchall() == [(6.5, 3.0)]
