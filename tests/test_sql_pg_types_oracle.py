"""Interval text, interval arithmetic, float rounding and float range against a real PostgreSQL
(issue 25): each property sends the same expression to Hummock (batch SELECT) and to the server
of ``tests/pg_server.py`` and requires the same answer, or an error on both sides.

Intervals are compared as Postgres' text output (``::text``, ``IntervalStyle = postgres``): that text names
the three fields exactly (Hummock's ``str(Interval)`` is the same function), so equal text is
equal months, days and microseconds -- a stricter test than interval equality, which normalises.
"""

import decimal
import math

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import SqlError

pytestmark = pytest.mark.postgres

UNITS = ["year", "years", "yr", "y", "mon", "mons", "month", "months", "week", "w", "day", "days", "d", "hour",
         "hours", "hr", "h", "min", "mins", "minute", "m", "sec", "secs", "second", "s", "ms", "msec",
         "millisecond", "us", "usec", "microseconds", "decade", "century", "millennium"]


@pytest.fixture(scope="module")
def pg(pg_server):
    conn = psycopg.connect(pg_server.dsn, autocommit=True)
    conn.execute("SET IntervalStyle TO postgres")
    conn.execute("SET extra_float_digits TO 1")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def hk():
    with sql.connect(":memory:") as c:
        yield c


def both(hk, pg, query: str):
    """``(hummock, postgres)``: each the single value of ``query`` as text, or ``"ERROR"``."""
    try:
        ours = hk.execute(query).fetchall()[0][0]
        ours = "NULL" if ours is None else (str(ours) if not isinstance(ours, float) else repr(ours))
    except SqlError:
        ours = "ERROR"
    try:
        theirs = pg.execute(query).fetchone()[0]
        theirs = "NULL" if theirs is None else (str(theirs) if not isinstance(theirs, float) else repr(theirs))
    except psycopg.Error:
        theirs = "ERROR"
    return ours, theirs


def _number(draw, fraction: bool):
    whole = draw(st.integers(0, 400))
    sign = draw(st.sampled_from(["", "", "-", "+"]))
    if fraction and draw(st.booleans()):
        return f"{sign}{whole}.{draw(st.integers(0, 999)):0{draw(st.integers(1, 3))}d}"
    return f"{sign}{whole}"


@st.composite
def interval_text(draw):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["unit", "unit", "unit", "time"]))
        if kind == "unit":
            parts.append(f"{_number(draw, True)} {draw(st.sampled_from(UNITS))}")
        else:
            sign = draw(st.sampled_from(["", "-", "+"]))
            h, m, s = draw(st.integers(0, 40)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
            frac = draw(st.sampled_from(["", ".5", ".000001", ".25"]))
            parts.append(f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}{frac}" if draw(st.booleans()) else ""))
    if draw(st.integers(0, 5)) == 0:
        parts.append("ago")
    return " ".join(parts)


@settings(max_examples=150, deadline=None)
@given(interval_text())
def test_interval_text_reads_as_postgres(hk, pg, text):
    for query in (f"SELECT (INTERVAL '{text}')::text", f"SELECT '{text}'::interval::text"):
        ours, theirs = both(hk, pg, query)
        assert ours == theirs, query


EXAMPLES = [   # odd corners of interval_in included (commas, spaced signs, ISO forms, repeated fields)
    "1 day 01:00:00", "1.5 days", "2 mons", "-1 day +02:03", "1-2", "P1Y2M3DT4H5M6S", "PT1.5S", "@ 3 hours ago",
    "1 01:02:03", "1.5 years", "0.01 months", "3 weeks", "1h 30m", "garbage", "1 fortnight", "", "1:70",
    "3000000000 days", "1 day ago 2 hours", "@1 day", "1 day,2 hours", "+1 day", "- 1 day", "1.5 weeks",
    ".5 days", "5.", "P1.5D", "P1W", "P1DT", "1 h", "10 mins 30 secs", " 1 day ", "DAY", "1 DAY", "1e2 days",
    "01:02:03.123456789", "100:00:00", "-1:-2", "1:2:3:4", "1 2 hours", "1 day 2 3", "ago", "1 ago",
    "1 sec ago ago", "1.5 sec 3 us", "0.0000015 sec", "0.0000005 sec", "2.5 us", "1.5 ms",
    "1 millisecond 1 microsecond", "1.123456789 days", "P0.5Y", "P1Y0.5M", "P1-2", "P0001-02-03T04:05:06",
    "1 year -2 mons", "+1 -2 mons", "1 m", "1 mon 2 m", "1 century 1 decade 1 millennium", "12:34", "12:34:56.5",
    "-12:34:56.5", "1 01:02", "1-2 3", "1-2 3 04:05:06", "-1-2", "+1-2", "1-13", "1.5-2", "1 d 2 h 3 m 4 s",
    "1 yrs", "2 mons ago", "1 week ago 1 day", "10", "-10", "1.5", "PT", "P", "P1DT", "P1D T1H", "PT1H",
    "P1Y-2M", "P-1D", "1 day -", "--1 day", "- - 1", "1,", ",1 day", "1 2 3 hours", "1 2 hours 3 mins",
    "1 day 2 hours 3", "5 1 hours", "1 2 hours ago", "P1-2-3", "P1-2T01:02:03", "P1-2-3T1:2:3.5", "1-11",
    "-1-11 2", "@ 1 day ago", "@ago", "1 hour 2", "1 min 2", "2 hours 1"
]


@pytest.mark.parametrize("text", EXAMPLES)
def test_interval_examples_read_as_postgres(hk, pg, text):
    ours, theirs = both(hk, pg, f"SELECT (INTERVAL '{text}')::text")
    assert ours == theirs


@pytest.mark.parametrize("literal", ["INTERVAL '1' DAY", "INTERVAL '10' SECOND", "INTERVAL '1:30' HOUR TO MINUTE",
                                     "INTERVAL '1:30' MINUTE TO SECOND", "INTERVAL '1 day 02:03:04' HOUR TO MINUTE",
                                     "INTERVAL '1 year 5 months' YEAR", "INTERVAL '1-2' YEAR TO MONTH"])
def test_field_restrictions_as_postgres(hk, pg, literal):
    ours, theirs = both(hk, pg, f"SELECT ({literal})::text")
    assert ours == theirs


@settings(max_examples=150, deadline=None)
@given(interval_text(), st.one_of(st.integers(-5, 5).map(str), st.sampled_from(
    ["1.5", "0.1", "-1.7", "2.75", "0.333", "1000", "0.0001", "7"])), st.sampled_from(["*", "/"]))
def test_interval_times_and_divided_as_postgres(hk, pg, text, factor, op):
    ours, theirs = both(hk, pg, f"SELECT (INTERVAL '{text}' {op} {factor}::float8)::text")
    assert ours == theirs, (text, op, factor)


@settings(max_examples=100, deadline=None)
@given(interval_text(), interval_text(), st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
def test_interval_comparison_and_negation_as_postgres(hk, pg, a, b, op):
    for query in (f"SELECT INTERVAL '{a}' {op} INTERVAL '{b}'", f"SELECT (-INTERVAL '{a}')::text"):
        ours, theirs = both(hk, pg, query)
        assert ours == theirs, query


_DOUBLES = st.one_of(st.integers(-20, 20).map(lambda n: n / 2), st.floats(-1e6, 1e6, allow_nan=False),
                     st.sampled_from([2147483647.5, 2147483646.5, -2147483648.5, 32767.5, 9.2233720368547758e18,
                                      0.49999999999999994, 1e300, 4503599627370497.0]))


@settings(max_examples=200, deadline=None)
@given(_DOUBLES, st.sampled_from(["int", "bigint", "smallint"]))
def test_double_to_integer_and_round_as_postgres(hk, pg, x, target):
    for query in (f"SELECT ('{x!r}'::float8)::{target}", f"SELECT round('{x!r}'::float8)"):
        ours, theirs = both(hk, pg, query)
        assert ours == theirs, query


@pytest.mark.parametrize("expr", ["1e308::float8 * 10", "'1e308'::float8 + '1e308'::float8",
                                  "'1e-300'::float8 * '1e-300'::float8", "'1e300'::float8 / '1e-300'::float8",
                                  "'1e300'::float8::real", "'1e-300'::float8::real", "'Infinity'::float8 * 2",
                                  "power(10::float8, 400)", "'1e400'::float8", "'NaN'::float8::int",
                                  "9007199254740993::bigint::float8", "9223372036854775807::float8",
                                  "'Infinity'::float8 - 'Infinity'::float8"])
def test_float_range_as_postgres(hk, pg, expr):
    ours, theirs = both(hk, pg, f"SELECT {expr}")
    if ours not in ("ERROR", "NULL") and theirs not in ("ERROR", "NULL"):
        a, b = float(ours), float(theirs)
        assert a == b or (math.isnan(a) and math.isnan(b))
    else:
        assert ours == theirs


@settings(max_examples=150, deadline=None)
@given(st.integers(-3000, 3000), st.integers(0, 3), st.sampled_from(["round({x})", "round({x}, 1)", "({x})::int",
                                                                     "({x})::float8::int", "round(({x})::float8)",
                                                                     "({x})::bigint::float8"]))
def test_numeric_and_double_rounding_as_postgres(hk, pg, n, scale, template):
    x = str(decimal.Decimal(n).scaleb(-scale))   # 2.5, -0.05, 12: ties of every kind
    if "bigint" in template:
        x = str(n * 10 ** 15 + 1)
    ours, theirs = both(hk, pg, "SELECT (" + template.format(x=x) + ")::text")
    assert ours == theirs, template.format(x=x)


@pytest.mark.parametrize("expr", ["1e131071 > 0", "1e131072 > 0", "1e-16383 > 0", "1e-16384 > 0",
                                  "length((" + "9" * 5000 + ")::text)", "9223372036854775808 > 0",
                                  "'" + "9" * 30 + "'::int"])
def test_numeric_literal_limits_as_postgres(hk, pg, expr):
    ours, theirs = both(hk, pg, f"SELECT {expr}")
    assert ours == theirs
