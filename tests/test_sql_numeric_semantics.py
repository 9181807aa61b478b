"""Float rounding, float range errors and bigint -> double as PostgreSQL has them (issue 25), in
batch SELECT and inside a materialized view.

Expected values are Postgres 16's: ``float8 -> int`` and ``round(float8)`` use C's ``rint``
(half to even) while NUMERIC rounds half away from zero; ``bigint::float8`` rounds to the nearest
double; a float result that overflows or underflows is "value out of range: ..." (an error in
batch, a NULL counted as a data error in an MV), and so is float text beyond the type's range.
"""

import decimal
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import BindError, ExecutionError
from stream.expr import error_counts

Dec = decimal.Decimal


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


def one(conn, query, params=()):
    return conn.execute(query, params).fetchall()[0]


# --- rounding to integers ----------------------------------------------------------------------

def test_double_to_integer_rounds_half_to_even(conn):
    assert one(conn, "SELECT 0.5::float8::int, 1.5::float8::int, 2.5::float8::int, -2.5::float8::bigint, "
                     "-0.5::float8::smallint, 2.5::real::int, 3.5::float8::int, 2.5000001::float8::int") == \
        (0, 2, 2, -2, 0, 2, 4, 3)


def test_round_double_is_rint_and_round_numeric_is_half_away(conn):
    assert one(conn, "SELECT round(0.5::float8), round(2.5::float8), round(-2.5::float8), round(3.5::real)") == \
        (0.0, 2.0, -2.0, 4.0)
    assert one(conn, "SELECT round(2.5), round(-2.5), round(0.5), 2.5::int, (-2.5)::int, round(2.345, 2)") == \
        (Dec(3), Dec(-3), Dec(1), 3, -3, Dec("2.35"))


def test_assignment_of_a_double_to_an_integer_column_rounds_half_to_even(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT)")
    conn.execute("INSERT INTO t VALUES (1, 2.5::float8), (2, 3.5::float8), (3, 2.5), (4, $1)", (0.5,))
    assert conn.execute("SELECT k, a FROM t ORDER BY k").fetchall() == [(1, 2), (2, 4), (3, 3), (4, 0)]


@pytest.mark.parametrize("query, message", [
    ("SELECT 'NaN'::float8::int", "integer out of range"),
    ("SELECT 'Infinity'::float8::bigint", "bigint out of range"),
    ("SELECT 2147483647.5::float8::int", "integer out of range"),   # rint gives 2^31
    ("SELECT 32767.5::float8::smallint", "smallint out of range"),
    ("SELECT 9223372036854775807::float8::bigint", "bigint out of range"),   # the double is 2^63
])
def test_double_to_integer_out_of_range(conn, query, message):
    with pytest.raises(ExecutionError, match=message):
        conn.execute(query).fetchall()


def test_mv_rounds_like_batch(conn):
    conn.execute("CREATE TABLE f (k INT PRIMARY KEY, x DOUBLE)")
    conn.execute("INSERT INTO f VALUES (1, 0.5), (2, 1.5), (3, 2.5), (4, -2.5), (5, NULL), (6, 1e300)")
    query = "SELECT k, x::INT AS i, round(x) AS r FROM f WHERE k < 6"
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {query}")
    expected = [(1, 0, 0.0), (2, 2, 2.0), (3, 2, 2.0), (4, -2, -2.0), (5, None, None)]
    assert sorted(conn.execute(query).fetchall()) == sorted(conn.execute("SELECT * FROM m").fetchall()) == expected
    before = error_counts().get("integer out of range", 0)
    conn.execute("CREATE MATERIALIZED VIEW big AS SELECT k, x::INT AS i FROM f")
    assert sorted(conn.execute("SELECT * FROM big").fetchall())[-1] == (6, None)   # NULL and counted
    assert error_counts().get("integer out of range", 0) == before + 1


# --- integer -> float --------------------------------------------------------------------------

def test_bigint_to_double_rounds_to_nearest(conn):
    assert one(conn, "SELECT 9007199254740993::bigint::float8, 9223372036854775807::float8, "
                     "(-9223372036854775807 - 1)::float8, 16777217::real, 9007199254740993 + 0.5::float8") == \
        (9007199254740992.0, 9.223372036854776e18, -9.223372036854776e18, 16777216.0, 9007199254740992.0)


def test_bigint_to_double_in_an_mv_keeps_the_graph_running(conn):
    conn.execute("CREATE TABLE b (k INT PRIMARY KEY, v BIGINT)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, v::DOUBLE AS d, v * 1.5::float8 AS e FROM b")
    conn.execute("INSERT INTO b VALUES (1, 9007199254740993), (2, 9223372036854775807), (3, 3)")
    conn.execute("INSERT INTO b VALUES (4, 5)")   # the graph is alive after the big values
    assert sorted(conn.execute("SELECT k, d FROM m").fetchall()) == \
        [(1, 9007199254740992.0), (2, 9.223372036854776e18), (3, 3.0), (4, 5.0)]


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_bigint_to_double_is_python_float(v):
    with sql.connect(":memory:") as c:
        assert c.execute("SELECT $1::bigint::float8", (v,)).fetchall() == [(float(v),)]


# --- float range -------------------------------------------------------------------------------

@pytest.mark.parametrize("query, message", [
    ("SELECT 1e308::float8 * 10", "value out of range: overflow"),
    ("SELECT 1e308::float8 + 1e308::float8", "value out of range: overflow"),
    ("SELECT -1e308::float8 - 1e308::float8", "value out of range: overflow"),
    ("SELECT 1e300::float8 / 1e-300::float8", "value out of range: overflow"),
    ("SELECT 1e-300::float8 * 1e-300::float8", "value out of range: underflow"),
    ("SELECT 1e-300::float8 / 1e300::float8", "value out of range: underflow"),
    ("SELECT 3e38::real * 10::real", "value out of range: overflow"),
    ("SELECT 1e300::float8::real", "value out of range: overflow"),
    ("SELECT 1e-300::float8::real", "value out of range: underflow"),
    ("SELECT power(10::float8, 400)", "value out of range: overflow"),
    ("SELECT power(10::float8, -400)", "value out of range: underflow"),
    ("SELECT 1e400::float8", "out of range for type double precision"),
    ("SELECT 1e-400::float8", "out of range for type double precision"),
    ("SELECT 1e39::real", "out of range for type real"),
])
def test_float_overflow_is_an_error_in_batch(conn, query, message):
    with pytest.raises(ExecutionError, match=message):
        conn.execute(query).fetchall()


@pytest.mark.parametrize("query", ["SELECT '1e400'::float8", "SELECT '-1e400'::float8", "SELECT '1e-400'::float8",
                                   "SELECT '1e39'::real", "SELECT '1e-50'::real"])
def test_float_text_out_of_range_is_a_positioned_error(conn, query):
    with pytest.raises(BindError, match="out of range for type") as info:
        conn.execute(query)
    assert info.value.line == 1 and info.value.column == 8


def test_infinities_and_nan_are_values_not_errors(conn):
    row = one(conn, "SELECT 'Infinity'::float8 * 2, 'Infinity'::float8 + 1, 0::float8 * 5, 1::float8 / 'Infinity', "
                    "'-inf'::float8, 'Infinity'::float8::real, 1e-310::float8, 'Infinity'::numeric::float8")
    assert row[:3] == (math.inf, math.inf, 0.0) and row[3] == 0.0 and row[4] == -math.inf
    assert row[5] == math.inf and row[6] == 1e-310 and row[7] == math.inf
    assert math.isnan(one(conn, "SELECT 'NaN'::float8 * 0")[0])


def test_float_overflow_in_an_mv_is_null_and_counted(conn):
    conn.execute("CREATE TABLE f (k INT PRIMARY KEY, x DOUBLE)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, x * 10 AS y, x::REAL AS r FROM f")
    before = error_counts().get("value out of range: overflow", 0)
    conn.execute("INSERT INTO f VALUES (1, 1e308), (2, 1.5), (3, NULL)")
    conn.execute("INSERT INTO f VALUES (4, 2)")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == \
        [(1, None, None), (2, 15.0, 1.5), (3, None, None), (4, 20.0, 2.0)]
    assert error_counts().get("value out of range: overflow", 0) == before + 2
    with pytest.raises(ExecutionError, match="overflow"):
        conn.execute("SELECT x * 10 FROM f").fetchall()


def test_text_to_float_at_run_time_checks_the_range(conn):
    conn.execute("CREATE TABLE s (k INT PRIMARY KEY, t VARCHAR)")
    conn.execute("INSERT INTO s VALUES (1, '1e400'), (2, ' 1.5 '), (3, 'NaN'), (4, '1e-400'), (5, '-Infinity'),"
                 " (6, '0.0e5'), (7, 'x')")
    for k, message in ((1, "value out of range for type double precision"),
                       (4, "value out of range for type double precision"),
                       (7, "invalid input syntax for type double precision")):
        with pytest.raises(ExecutionError, match=message):
            conn.execute(f"SELECT t::float8 FROM s WHERE k = {k}").fetchall()
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, t::float8 AS f FROM s")
    rows = dict(conn.execute("SELECT k, f FROM m").fetchall())
    assert {k: v for k, v in rows.items() if k != 3} == {1: None, 2: 1.5, 4: None, 5: -math.inf, 6: 0.0, 7: None}
    assert math.isnan(rows[3])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300])
def test_a_double_parameter_beyond_an_integer_column_is_out_of_range(conn, value):
    conn.execute("CREATE TABLE u (a INT)")
    with pytest.raises(ExecutionError, match="integer out of range"):
        conn.execute("INSERT INTO u VALUES (%s)", (value,))


def test_float_text_with_underscores_is_not_a_number(conn):
    with pytest.raises(BindError, match="invalid input syntax"):
        conn.execute("SELECT '1_000'::float8")


def test_round_ceil_floor_of_real_are_double_precision(conn):
    conn.execute("CREATE TABLE r (x REAL)")
    conn.execute("INSERT INTO r VALUES (2.5)")
    cur = conn.execute("SELECT round(x), ceil(x), floor(x) FROM r")
    assert [d[1] for d in cur.description] == ["double precision"] * 3
    assert cur.fetch_arrow().schema.types == [pa.float64()] * 3
    assert conn.execute("SELECT round(x), ceil(x), floor(x) FROM r").fetchall() == [(2.0, 3.0, 2.0)]


def test_round_of_an_integer_is_double_precision(conn):
    cur = conn.execute("SELECT round(5), round(-7::bigint), round(3::smallint)")
    assert [d[1] for d in cur.description] == ["double precision"] * 3
    assert cur.fetchall() == [(5.0, -7.0, 3.0)]


@pytest.mark.parametrize("query", ["SELECT 2.5::float8 % 1", "SELECT mod(2.5::float8, 1)", "SELECT 1::real % 2::real"])
def test_float_remainder_does_not_exist(conn, query):
    with pytest.raises(BindError, match="operator does not exist"):
        conn.execute(query)


def test_unary_minus_of_a_float_zero_is_negative_zero(conn):
    """Postgres negates a float (-(0.0::float8) is -0, its text '-0'), where 0 - x would give
    +0; batch and MV alike. NUMERIC and integers have no -0."""
    conn.execute("CREATE TABLE negz (x DOUBLE PRECISION, r REAL, n NUMERIC, i INT)")
    conn.execute("INSERT INTO negz VALUES (0, 0, 0, 0)")
    conn.execute("CREATE MATERIALIZED VIEW negz_mv AS SELECT -x AS x, -r AS r, -n AS n, -i AS i FROM negz")
    conn.execute("FLUSH")
    for q in ("SELECT -x, -r, -n, -i FROM negz", "SELECT * FROM negz_mv"):
        x, r, n, i = conn.execute(q).fetchall()[0]
        assert math.copysign(1, x) == -1 and math.copysign(1, r) == -1, q
        assert str(n) == "0" and i == 0, q


_FLOATS = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1e-300, 1e300, math.inf, -math.inf, math.nan]),
                    st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from("+-*/"), st.lists(st.tuples(_FLOATS, _FLOATS), min_size=1, max_size=40))
def test_float_range_checks_skipped_only_when_none_can_fire(op, pairs):
    """arith_range's numpy pre-check (no infinite and, for * and /, no zero result) gives what
    the exact Arrow checks give, NULLs and error counts included."""
    import pyarrow.compute as pc

    from stream import expr_float

    left = pa.array([a for a, _ in pairs], pa.float64())
    right = pa.array([b if b != 0 or op != "/" else 1.0 for _, b in pairs], pa.float64())
    kernel = {"+": pc.add, "-": pc.subtract, "*": pc.multiply, "/": pc.divide}[op]
    out = kernel(left, right)
    results = []
    for skip in (True, False):
        before = dict(error_counts())
        if skip:
            got = expr_float.arith_range(None, op, left, right, out)
        else:
            fast, expr_float._cannot_fail = expr_float._cannot_fail, lambda *_: False
            try:
                got = expr_float.arith_range(None, op, left, right, out)
            finally:
                expr_float._cannot_fail = fast
        after = error_counts()
        results.append((got.to_pylist(), {k: after[k] - before.get(k, 0) for k in after}))
    norm = [([("nan" if isinstance(v, float) and math.isnan(v) else v) for v in vals], counts)
            for vals, counts in results]
    assert norm[0] == norm[1]


def test_a_numeric_literal_cast_is_computed_once_and_a_failing_one_every_time(conn):
    """Cast keeps a numeric literal's successful cast (the value never changes); a cast that
    fails is not kept, so an MV counts its data error on every chunk."""
    from relational.types import DataType
    from stream.expr import Cast, Lit

    cast = Cast(Lit(decimal.Decimal("0.908"), DataType.DECIMAL), DataType.DOUBLE)
    first = cast.evaluate([])
    assert first.as_py() == 0.908 and cast.evaluate([]) is first
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, k * 1e400::numeric::float8 AS x FROM t")
    message = "numeric value out of range for type double precision"
    before = error_counts().get(message, 0)
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("INSERT INTO t VALUES (2)")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [(1, None), (2, None)]
    assert error_counts().get(message, 0) == before + 2
