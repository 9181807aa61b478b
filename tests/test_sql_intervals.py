"""INTERVAL literals, comparison and negation as PostgreSQL has them (issue 25), in batch SELECT
and inside a materialized view (the streaming expression evaluator).

Expected values are Postgres 16's: ``interval_in`` reads every field of the text (time parts,
fractions cascading down, unit abbreviations, ``ago``, ISO 8601, field restrictions); intervals
compare by their span with 30-day months and 24-hour days; ``-interval`` negates each field.
"""

import datetime

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from relational.types import DataType, Interval
from sql.errors import BindError, ExecutionError
from sql.types import format_interval, parse_interval
from stream import expr as E
from stream.expr_interval import compare

H = 3_600_000_000
DAY = 24 * H


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


def iv(conn, text):
    return conn.execute(f"SELECT INTERVAL '{text}'").fetchall()[0][0]


def fields(i):
    return (i.months, i.days, i.usecs)


@pytest.mark.parametrize("text, expected", [
    ("1 day 01:00:00", (0, 1, H)),
    ("1.5 days", (0, 1, 12 * H)),
    ("2 mons", (2, 0, 0)),
    ("1 mon", (1, 0, 0)),
    ("3 months", (3, 0, 0)),
    ("1 yr 2 mon", (14, 0, 0)),
    ("1.5 years", (18, 0, 0)),
    ("1.1 months", (1, 3, 0)),
    ("0.01 months", (0, 0, 7 * H + 12 * 60_000_000)),
    ("2 hrs 30 mins", (0, 0, 2 * H + 30 * 60_000_000)),
    ("1h 30m 15s", (0, 0, H + 30 * 60_000_000 + 15_000_000)),
    ("10 sec", (0, 0, 10_000_000)),
    ("5 ms", (0, 0, 5000)),
    ("7 us", (0, 0, 7)),
    ("3 weeks", (0, 21, 0)),
    ("2 decades", (240, 0, 0)),
    ("-1 day +02:03", (0, -1, 2 * H + 3 * 60_000_000)),
    ("1 year 2 months 3 days ago", (-14, -3, 0)),
    ("01:02:03.5", (0, 0, H + 2 * 60_000_000 + 3_500_000)),
    ("1 01:00:00", (0, 1, H)),
    ("1-2", (14, 0, 0)),
    ("@ 1 hour", (0, 0, H)),
    ("42", (0, 0, 42_000_000)),
    ("P1Y2M3DT4H5M6S", (14, 3, 4 * H + 5 * 60_000_000 + 6_000_000)),
    ("PT1.5S", (0, 0, 1_500_000)),
])
def test_interval_literals_read_every_field(conn, text, expected):
    assert fields(iv(conn, text)) == expected
    assert fields(conn.execute(f"SELECT '{text}'::interval").fetchall()[0][0]) == expected


@pytest.mark.parametrize("sql_text, expected", [
    ("INTERVAL '1' DAY", (0, 1, 0)),
    ("INTERVAL '10' SECOND", (0, 0, 10_000_000)),
    ("INTERVAL '1:30' HOUR TO MINUTE", (0, 0, H + 30 * 60_000_000)),
    ("INTERVAL '1:30' MINUTE TO SECOND", (0, 0, 90_000_000)),
    ("INTERVAL '1 day 02:03:04' HOUR TO MINUTE", (0, 1, 2 * H + 3 * 60_000_000)),
    ("INTERVAL '1 year 5 months' YEAR", (12, 0, 0)),
    ("INTERVAL '1-2' YEAR TO MONTH", (14, 0, 0)),
])
def test_field_restrictions(conn, sql_text, expected):
    assert fields(conn.execute(f"SELECT {sql_text}").fetchall()[0][0]) == expected


def test_an_interval_alias_is_not_taken_for_a_field(conn):
    cur = conn.execute("SELECT INTERVAL '1 day' x")
    assert cur.description[0][0] == "x" and fields(cur.fetchall()[0][0]) == (0, 1, 0)


@pytest.mark.parametrize("text", ["garbage", "1 fortnight", "", "1 day 2 3", "1e3 days", "1 day foo", "P", "ago",
                                  "1 ago", "1 day 2 days", "1 hour 01:00", "infinity"])
def test_bad_interval_text_is_a_positioned_sql_error(conn, text):
    with pytest.raises(BindError, match="invalid input syntax for type interval") as info:
        conn.execute(f"SELECT 1, INTERVAL '{text}'")
    assert info.value.line == 1 and info.value.column is not None


@pytest.mark.parametrize("text", ["3000000000 days", "1000000000 years", "99999999999999999999999999999999 days",
                                  "1:70", "1-12", "P" + "9" * 5000 + "-1", "9" * 5000 + " days"])
def test_out_of_range_interval_text_is_a_sql_error(conn, text):
    with pytest.raises(BindError, match="out of range"):
        conn.execute(f"SELECT INTERVAL '{text}'")


def test_comparison_normalises_months_and_days(conn):
    row = conn.execute("SELECT INTERVAL '1 mon' = INTERVAL '30 days', INTERVAL '1 day' = INTERVAL '24 hours', "
                       "INTERVAL '1' DAY < INTERVAL '2' DAY, INTERVAL '-1 day' < INTERVAL '1 hour', "
                       "INTERVAL '1 day' > '23:59:59', INTERVAL '1 mon' <> INTERVAL '31 days', "
                       "INTERVAL '1 day' >= INTERVAL '24:00:00', INTERVAL '1 day' <= INTERVAL '-1 mon'").fetchall()
    assert row == [(True, True, True, True, True, True, True, False)]


def _setup(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, i INTERVAL)")
    conn.execute("INSERT INTO t VALUES (1, '1 day'), (2, '25 hours'), (3, NULL), (4, '1 mon'), (5, '-1 day'),"
                 " (6, '30 days'), (7, '-2 mons 59 days 23:59:59')")


def test_interval_filters_negation_and_order_in_batch_and_mv(conn):
    _setup(conn)
    query = ("SELECT k, -i AS n, i > INTERVAL '1 day' AS big, i BETWEEN '1 hour' AND '1 mon' AS mid "
             "FROM t WHERE i < INTERVAL '1 mon' OR i IS NULL")
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {query}")
    expected = [(1, Interval(0, -1, 0), False, True), (2, Interval(0, 0, -25 * H), True, True),
                (3, None, None, None), (5, Interval(0, 1, 0), False, False),
                (7, Interval(2, -59, -(24 * H - 1_000_000)), False, False)]   # k=7 spans -1 second
    batch = sorted(conn.execute(query).fetchall())
    mv = sorted(conn.execute("SELECT * FROM m").fetchall())
    assert batch == mv == expected
    assert [fields(r[1]) for r in batch if r[1] is not None] == [fields(r[1]) for r in expected if r[1] is not None]
    conn.execute("INSERT INTO t VALUES (8, '2 hours')")
    conn.execute("DELETE FROM t WHERE k = 2")
    assert sorted(conn.execute("SELECT k FROM m").fetchall()) == [(1,), (3,), (5,), (7,), (8,)]
    order = conn.execute("SELECT k FROM t ORDER BY i NULLS FIRST, k").fetchall()
    assert order == [(3,), (5,), (7,), (8,), (1,), (4,), (6,)]


def test_interval_order_and_comparison_in_an_mv_at_create(conn):
    _setup(conn)
    conn.execute("CREATE MATERIALIZED VIEW top AS SELECT k FROM t WHERE i >= INTERVAL '1 day' ORDER BY i DESC, k "
                 "LIMIT 2")
    assert sorted(conn.execute("SELECT * FROM top").fetchall()) == [(4,), (6,)]


def test_negation_overflow_is_a_data_error(conn):
    conn.execute("CREATE TABLE n (k INT PRIMARY KEY, i INTERVAL)")
    conn.execute("INSERT INTO n VALUES (1, $1), (2, '1 day')", (Interval(-(1 << 31), 0, 0),))
    with pytest.raises(ExecutionError, match="interval out of range"):
        conn.execute("SELECT -i FROM n").fetchall()
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, -i AS n FROM n")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [(1, None), (2, Interval(0, -1, 0))]


def test_unary_minus_on_text_is_refused(conn):
    with pytest.raises(BindError, match="operator does not exist"):
        conn.execute("SELECT -'abc'::varchar")


def test_timestamp_plus_a_full_interval_literal(conn):
    row = conn.execute("SELECT TIMESTAMP '2020-01-31 00:00:00' + INTERVAL '1 mon 1.5 days 01:00'").fetchall()
    assert row == [(datetime.datetime(2020, 3, 1, 13, 0),)]


_FIELD = st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 31), (1 << 31) - 1),
                   st.integers(-(1 << 63) // 1000 + 1, (1 << 63) // 1000 - 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), _FIELD), min_size=1, max_size=20), _FIELD,
       st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
def test_vectorized_compare_matches_the_interval_model(values, scalar, op):
    """stream.expr_interval.compare against relational.types.Interval's total-microsecond order."""
    ivs = [None if v is None else Interval(*v) for v in values]
    arr = pa.array([None if v is None else pa.MonthDayNano([v[0], v[1], v[2] * 1000]) for v in values],
                   pa.month_day_nano_interval())
    other = Interval(*scalar)
    ops = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
    expected = [None if v is None else ops[op](v, other) for v in ivs]
    sc = pa.scalar(pa.MonthDayNano([scalar[0], scalar[1], scalar[2] * 1000]), pa.month_day_nano_interval())
    assert compare(op, arr, sc).to_pylist() == expected
    assert compare(op, arr.slice(1), arr.slice(0, len(arr) - 1)).to_pylist() == \
        [None if a is None or b is None else ops[op](a, b) for a, b in zip(ivs[1:], ivs[:-1])]
    neg = E.Negate(E.Col(0, DataType.INTERVAL)).eval([arr.slice(1)], len(arr) - 1)   # streaming: overflow NULL
    assert neg.to_pylist() == [None if v is None or -(1 << 31) in v[:2] else pa.MonthDayNano([-v[0], -v[1], -v[2] * 1000])
                               for v in values[1:]]


def test_parse_interval_is_postgres_interval_in():
    assert fields(parse_interval("1 day", ("HOUR",))) == (0, 1, 0)
    assert fields(parse_interval("-1.5 days")) == (0, -1, -12 * H)
    assert fields(parse_interval("2 DAYS AGO")) == (0, -2, 0)


@pytest.mark.parametrize("text, shown", [
    ("1 day 01:00:00", "1 day 01:00:00"), ("-14 mons", "-1 years -2 mons"), ("-1 day +02:03", "-1 days +02:03:00"),
    ("0", "00:00:00"), ("1 year 2 mons 3 days 04:05:06.5", "1 year 2 mons 3 days 04:05:06.5"),
    ("25 hours", "25:00:00"), ("1 mon -1 day", "1 mon -1 days"), ("-1 sec", "-00:00:01"), ("2 us", "00:00:00.000002"),
])
def test_interval_to_text_is_postgres_output(conn, text, shown):
    assert conn.execute(f"SELECT INTERVAL '{text}'::varchar").fetchall() == [(shown,)]


def test_text_interval_casts_at_run_time_in_batch_and_mv(conn):
    conn.execute("CREATE TABLE s (k INT PRIMARY KEY, t VARCHAR, i INTERVAL)")
    conn.execute("INSERT INTO s VALUES (1, '1 day 2 hours', '-14 mons 3 days'), (2, 'bogus', NULL), (3, NULL, '1.5 days')")
    with pytest.raises(ExecutionError, match="invalid input syntax for type interval"):
        conn.execute("SELECT t::interval FROM s").fetchall()
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, t::interval AS iv, i::varchar AS txt FROM s")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [
        (1, Interval(0, 1, 2 * H), "-1 years -2 mons +3 days"), (2, None, None), (3, None, "1 day 12:00:00")]


@settings(max_examples=300, deadline=None)
@given(_FIELD)
def test_interval_text_round_trips_every_field(f):
    """format_interval's text reads back (parse_interval) to the same three fields."""
    iv = Interval(*f)
    back = parse_interval(format_interval(iv))
    assert fields(back) == fields(iv)


def test_str_of_an_interval_is_postgres_text_and_empty_inputs_compare():
    assert str(Interval(-14, 3, 0)) == "-1 years -2 mons +3 days"
    assert str(Interval(12, 0, -1)) == "1 year -00:00:00.000001"
    assert str(Interval(0, 0, 0)) == "00:00:00"
    empty = pa.array([], pa.month_day_nano_interval())
    assert compare("<", empty, empty).to_pylist() == []
    assert compare("=", pa.chunked_array([], pa.month_day_nano_interval()), pa.scalar(None, empty.type)).to_pylist() == []


@pytest.mark.parametrize("sql_text, expected", [   # Postgres' documentation and interval_mul/interval_div
    ("INTERVAL '1 second' * 900", (0, 0, 900_000_000)),
    ("21 * INTERVAL '1 day'", (0, 21, 0)),
    ("3.5::float8 * INTERVAL '1 hour'", (0, 0, 3 * H + H // 2)),
    ("INTERVAL '1 hour' / 1.5::float8", (0, 0, 40 * 60_000_000)),
    ("INTERVAL '1 mon' * 1.5", (1, 15, 0)),
    ("INTERVAL '1 day' * 1.5", (0, 1, 12 * H)),
    ("INTERVAL '3 mons' / 2", (1, 15, 0)),
    ("INTERVAL '1 mon 3 days' * -1", (-1, -3, 0)),
    ("INTERVAL '1 year 1 day' * 0", (0, 0, 0)),
])
def test_interval_times_and_divided_by_a_number(conn, sql_text, expected):
    assert fields(conn.execute(f"SELECT {sql_text}").fetchall()[0][0]) == expected


def test_interval_scaling_errors_and_mv(conn):
    for query, message in (("SELECT INTERVAL '1 day' / 0", "division by zero"),
                           ("SELECT INTERVAL '2000000000 mons' * 2", "interval out of range"),
                           ("SELECT INTERVAL '1 day' * 'NaN'::float8", "interval out of range")):
        with pytest.raises(ExecutionError, match=message):
            conn.execute(query).fetchall()
    with pytest.raises(BindError, match="operator"):
        conn.execute("SELECT 2 / INTERVAL '1 day'")
    conn.execute("CREATE TABLE w (k INT PRIMARY KEY, n INT, i INTERVAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, n * i AS t, i / n AS q FROM w")
    conn.execute("INSERT INTO w VALUES (1, 2, '1 day'), (2, 0, '1 hour'), (3, NULL, '1 day'), (4, 1500000000, '2 mons')")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [
        (1, Interval(0, 2, 0), Interval(0, 0, 12 * H)), (2, Interval(0, 0, 0), None), (3, None, None),
        (4, None, Interval(0, 0, 0))]   # 2 mons * 1.5e9 is out of range; / 1.5e9 rounds away (TSROUND)
