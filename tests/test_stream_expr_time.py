"""Date/time arithmetic (stream/expr_time.py) against Python's datetime and dateutil's
relativedelta (which clamps a month shift to the month's last day, as Postgres does): columns
and constants, with and without months, NULLs, each supported operand pair; and the SQL
surface (Nexmark q7's ``w - INTERVAL '10' SECOND`` in an MV equals its batch result)."""

import datetime

import pyarrow as pa
import pytest
from dateutil.relativedelta import relativedelta
from hypothesis import given
from hypothesis import strategies as st

import sql
from relational.arrow import arrow_type
from relational.types import DataType as T, Interval
from stream.errors import ExpressionError
from stream.expr import Col, Lit
from stream.expr_time import TimeArith

UTC = datetime.timezone.utc
TIMES = st.datetimes(datetime.datetime(1990, 1, 1), datetime.datetime(2100, 1, 1))
INTERVALS = st.builds(Interval, st.integers(-30, 30), st.integers(-400, 400),
                      st.integers(-10 ** 11, 10 ** 11))


def _shift(at, iv, sign):
    return at + relativedelta(months=sign * iv.months) + datetime.timedelta(days=sign * iv.days,
                                                                            microseconds=sign * iv.usecs)


def _eval(expr, cols, n):
    return expr.eval(cols, n).to_pylist()


@pytest.mark.parametrize("tz", [False, True])
@given(st.sampled_from("+-"), st.lists(st.one_of(st.none(), TIMES), min_size=1, max_size=8), INTERVALS,
       st.booleans())
def test_timestamp_plus_minus_interval(tz, op, times, iv, constant):
    dtype = T.TIMESTAMPTZ if tz else T.TIMESTAMP
    if tz:
        times = [None if t is None else t.replace(tzinfo=UTC) for t in times]
    sign = 1 if op == "+" else -1
    col = pa.array(times, arrow_type(dtype))
    if constant:
        expr, cols = TimeArith(op, Col(0, dtype), Lit(iv, T.INTERVAL)), [col]
    else:   # an interval column: the row-by-row path
        expr = TimeArith(op, Col(0, dtype), Col(1, T.INTERVAL))
        cols = [col, pa.array([pa.MonthDayNano([iv.months, iv.days, iv.usecs * 1000])] * len(times),
                              pa.month_day_nano_interval())]
    assert expr.data_type == dtype
    got = _eval(expr, cols, len(times))
    want = [None if t is None else _shift(t, iv, sign) for t in times]
    if tz:
        got = [None if g is None else g.astimezone(UTC) for g in got]
    assert got == want


@given(st.lists(st.one_of(st.none(), st.dates(datetime.date(1990, 1, 1), datetime.date(2100, 1, 1))),
                min_size=1, max_size=8), st.integers(-1000, 1000), INTERVALS)
def test_date_arithmetic(dates, k, iv):
    col = pa.array(dates, pa.date32())
    plus = TimeArith("+", Col(0, T.DATE), Lit(k, T.INT))
    assert plus.data_type == T.DATE
    assert _eval(plus, [col], len(dates)) == [None if d is None else d + datetime.timedelta(days=k) for d in dates]
    flipped = TimeArith("+", Lit(k, T.INT), Col(0, T.DATE))
    assert _eval(flipped, [col], len(dates)) == _eval(plus, [col], len(dates))
    shifted = TimeArith("-", Col(0, T.DATE), Lit(iv, T.INTERVAL))
    assert shifted.data_type == T.TIMESTAMP
    assert _eval(shifted, [col], len(dates)) == [
        None if d is None else _shift(datetime.datetime(d.year, d.month, d.day), iv, -1) for d in dates]
    diff = TimeArith("-", Col(0, T.DATE), Lit(datetime.date(2000, 1, 1), T.DATE))
    assert diff.data_type == T.INT
    assert _eval(diff, [col], len(dates)) == [None if d is None else (d - datetime.date(2000, 1, 1)).days
                                              for d in dates]


@given(TIMES, TIMES)
def test_timestamp_difference_is_days_and_microseconds(a, b):
    expr = TimeArith("-", Lit(a, T.TIMESTAMP), Lit(b, T.TIMESTAMP))
    [iv] = _eval(expr, [], 1)
    assert iv.months == 0 and datetime.timedelta(days=iv.days, microseconds=iv.nanoseconds // 1000) == a - b
    assert abs(iv.nanoseconds) < 86_400 * 10 ** 9 and (iv.days == 0 or (iv.days > 0) == (a > b))


def test_interval_plus_interval_and_interval_plus_timestamp():
    one = Lit(Interval(1, 2, 3), T.INTERVAL)
    assert _eval(TimeArith("-", one, Lit(Interval(4, 5, 6), T.INTERVAL)), [], 1)[0] == \
        pa.MonthDayNano([-3, -3, -3000])
    at = datetime.datetime(2026, 1, 31, 12)
    assert _eval(TimeArith("+", one, Lit(at, T.TIMESTAMP)), [], 1) == [datetime.datetime(2026, 3, 2, 12, 0, 0, 3)]


@pytest.mark.parametrize("op, left, right", [
    ("*", T.TIMESTAMP, T.INTERVAL), ("+", T.TIMESTAMP, T.INT), ("+", T.TIMESTAMP, T.TIMESTAMP),
    ("-", T.INTERVAL, T.TIMESTAMP), ("-", T.INT, T.DATE), ("+", T.DATE, T.DATE),
])
def test_undefined_operand_pairs_raise_at_construction(op, left, right):
    with pytest.raises(ExpressionError, match="not defined"):
        TimeArith(op, Col(0, left), Col(1, right))


def test_out_of_range_is_an_error():
    """A data error: raises in strict mode (batch, DML), NULL in a stream (stream/expr_errors.py)."""
    from stream.expr_errors import raising_errors
    late = TimeArith("+", Lit(datetime.datetime(9999, 12, 31), T.TIMESTAMP), Lit(Interval(0, 2, 0), T.INTERVAL))
    with raising_errors(), pytest.raises(ExpressionError, match="out of range"):
        late.eval([], 1)
    assert late.eval([], 1).to_pylist() == [None]
    # the one-kernel path (a column shifted by a constant interval) checks the range too
    col = pa.array([datetime.datetime(1, 1, 1), datetime.datetime(2000, 1, 2)], pa.timestamp("us"))
    early = TimeArith("-", Col(0, T.TIMESTAMP), Lit(Interval(0, 1, 0), T.INTERVAL))
    with raising_errors(), pytest.raises(ExpressionError, match="out of range"):
        early.eval([col], 2)
    assert early.eval([col], 2).to_pylist() == [None, datetime.datetime(2000, 1, 1)]


def test_sql_window_bounds_in_an_mv_equal_batch():
    """Nexmark q7's shape: the highest bid of each 10 s window, bounded by window_end - 10 s."""
    q7 = ("SELECT B.auction, B.price, B.date_time FROM bid B JOIN ("
          "SELECT MAX(price) AS maxprice, window_end AS date_time FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) "
          "GROUP BY window_end) B1 ON B.price = B1.maxprice "
          "WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time")
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE bid (auction INT, price INT, date_time TIMESTAMP) APPEND ONLY")
        conn.execute(f"CREATE MATERIALIZED VIEW q7 AS {q7}")
        conn.execute("INSERT INTO bid VALUES (1, 5, '2026-01-01 00:00:01'), (2, 9, '2026-01-01 00:00:02'),"
                     " (3, 9, '2026-01-01 00:00:15'), (4, 7, '2026-01-01 00:00:16'), (5, 7, '2026-01-01 00:00:25')")
        conn.execute("FLUSH")
        t = lambda s: datetime.datetime(2026, 1, 1, 0, 0, s)  # noqa: E731
        # window [0,10) max 9 (auction 2); [10,20) max 9 (auction 3; auction 2 has price 9 too but
        # lies outside [20 - 10, 20]); [20,30) max 7: auction 5 (auction 4's 7 is in [10, 20])
        expected = [(2, 9, t(2)), (3, 9, t(15)), (5, 7, t(25))]
        assert sorted(conn.execute("SELECT * FROM q7").fetchall()) == expected
        assert sorted(conn.execute(q7).fetchall()) == expected
        assert conn.execute("SELECT DATE '2026-01-31' + INTERVAL '1 month'").fetchall() == \
            [(datetime.datetime(2026, 2, 28),)]
