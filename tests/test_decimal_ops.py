"""NUMERIC arithmetic (stream/decimal_ops.py and the DECIMAL paths of stream/expr.py) against an
exact model (fractions) and against values Postgres prints: exact + - * %, division rounded
half away from zero at Postgres' select_div_scale, NaN ordering, casts, and the data-error
modes (raise inside ``raising_errors``, NULL in streaming)."""

import decimal
from fractions import Fraction

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational.types import DataType as T
from stream import decimal_ops as D
from stream.errors import ExpressionError
from stream.expr import Arith, Cast, Cmp, Col, Func, Lit, raising_errors

Dec = decimal.Decimal
DECIMALS = st.builds(lambda n, s: Dec(f"{n}E-{s}"), st.integers(-10 ** 30, 10 ** 30), st.integers(0, 12))


def scale(d: Dec) -> int:
    return max(0, -d.as_tuple().exponent)


def trunc_div(a: Fraction, b: Fraction) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@given(DECIMALS, DECIMALS)
def test_add_sub_mul_mod_are_exact_with_postgres_scales(a, b):
    fa, fb = Fraction(a), Fraction(b)
    assert Fraction(D.ARITH["+"](a, b)) == fa + fb and scale(D.ARITH["+"](a, b)) == max(scale(a), scale(b))
    assert Fraction(D.ARITH["-"](a, b)) == fa - fb and scale(D.ARITH["-"](a, b)) == max(scale(a), scale(b))
    assert Fraction(D.ARITH["*"](a, b)) == fa * fb and scale(D.ARITH["*"](a, b)) == scale(a) + scale(b)
    if b:
        r = D.ARITH["%"](a, b)
        assert Fraction(r) == fa - trunc_div(fa, fb) * fb and scale(r) == max(scale(a), scale(b))
    else:
        with pytest.raises(D.RowError, match="division by zero"):
            D.ARITH["%"](a, b)


@given(DECIMALS, DECIMALS)
def test_division_rounds_half_away_from_zero_with_at_least_16_digits(a, b):
    if not b:
        with pytest.raises(D.RowError, match="division by zero"):
            D.div(a, b)
        return
    q = D.div(a, b)
    exact = Fraction(a) / Fraction(b)
    s = scale(q)
    assert s >= max(scale(a), scale(b))
    error = abs(Fraction(q) - exact)
    assert error <= Fraction(1, 2 * 10 ** s)
    if error == Fraction(1, 2 * 10 ** s):   # a tie: away from zero
        assert abs(Fraction(q)) > abs(exact)
    if exact:
        assert s + q.adjusted() + 1 >= 16 or s == 1000   # at least 16 significant digits


@pytest.mark.parametrize("a, b, printed", [   # what Postgres prints for a::numeric / b::numeric
    ("1", "3", "0.33333333333333333333"), ("2", "3", "0.66666666666666666667"),
    ("10", "4", "2.5000000000000000"), ("7", "7", "1.00000000000000000000"),
    ("100000", "3", "33333.333333333333"), ("1.0", "3", "0.33333333333333333333"),
    ("-1", "8", "-0.12500000000000000000"), ("1", "0.001", "1000.0000000000000000"),
])
def test_division_prints_like_postgres(a, b, printed):
    assert D.to_text(D.div(Dec(a), Dec(b))) == printed


def test_specials_and_normal_form():
    nan, inf = Dec("NaN"), Dec("Infinity")
    assert D.ARITH["+"](nan, Dec(1)).is_nan() and D.ARITH["-"](inf, inf).is_nan()
    assert D.ARITH["*"](Dec(0), inf).is_nan() and D.div(Dec(1), inf) == 0
    assert D.CMP["="](nan, nan) and D.CMP[">"](nan, inf) and not D.CMP["<"](nan, Dec(5))
    def stored(d):
        return D.encode([d], True).as_py()
    assert stored(D.ARITH["*"](Dec("1E+1"), Dec(10))) == "100"       # no negative scale
    assert stored(D.ARITH["*"](Dec("0.0"), Dec(-1))) == "0.0"         # no negative zero
    assert D.decode(pa.array(["1E+2", None]))[0] == [Dec("100"), None] and scale(D.decode(pa.scalar("1E+2"))[0][0]) == 0
    assert D.to_text(Dec("1E+3")) == "1000" and D.to_text(-inf) == "-Infinity"


def test_casts():
    assert D.from_float(0.1) == Dec("0.1") and str(D.from_float(1 / 3)) == "0.333333333333333"
    assert str(D.from_float(1e20)) == "100000000000000000000" and D.from_float(float("nan")).is_nan()
    assert D.from_float(0.1 + 0.2, 6) == Dec("0.3")
    assert D.to_int(Dec("2.5"), "INT") == 3 and D.to_int(Dec("-2.5"), "INT") == -3
    with pytest.raises(D.RowError, match="integer out of range"):
        D.to_int(Dec("2147483647.5"), "INT")
    with pytest.raises(D.RowError, match="NaN"):
        D.to_int(Dec("NaN"), "BIGINT")
    assert D.from_text(" 1.50 ") == Dec("1.50") and D.from_text("-inf") == Dec("-Infinity")
    with pytest.raises(D.RowError, match="invalid input syntax"):
        D.from_text("1.2.3")


def _dec_col(values):
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def test_expression_nodes_over_decimal_columns():
    cols = [_dec_col(["1.5", "-2.25", None, "0"]), pa.array([2, 3, 4, None], pa.int32()),
            pa.array([0.5, 1.0, 2.0, 3.0])]
    d, i, x = Col(0, T.DECIMAL), Col(1, T.INT), Col(2, T.DOUBLE)
    plus = Arith("+", d, i)
    assert plus.data_type == T.DECIMAL and plus.eval(cols, 4).to_pylist() == ["3.5", "0.75", None, None]
    times = Arith("*", Lit(Dec("0.5"), T.DECIMAL), x)       # NUMERIC with DOUBLE is DOUBLE
    assert times.data_type == T.DOUBLE and times.eval(cols, 4).to_pylist() == [0.25, 0.5, 1.0, 1.5]
    assert Cmp("<", d, i).eval(cols, 4).to_pylist() == [True, True, None, None]
    assert Cmp("=", d, Lit(Dec("1.50"), T.DECIMAL)).eval(cols, 4).to_pylist() == [True, False, None, False]
    assert Cast(d, T.INT).eval(cols, 4).to_pylist() == [2, -2, None, 0]
    assert Cast(d, T.VARCHAR).eval(cols, 4).to_pylist() == ["1.5", "-2.25", None, "0"]
    assert Cast(i, T.DECIMAL).eval(cols, 4).to_pylist() == ["2", "3", "4", None]
    assert Func("round", d, Lit(1, T.INT)).eval(cols, 4).to_pylist() == ["1.5", "-2.3", None, "0.0"]
    assert Func("abs", d).eval(cols, 4).to_pylist() == ["1.5", "2.25", None, "0"]
    assert Func("ceil", d).data_type == T.DECIMAL and Func("floor", d).eval(cols, 4).to_pylist() == \
        ["1", "-3", None, "0"]
    # division by zero: NULL in streaming mode, an error inside raising_errors
    quotient = Arith("/", i, d)
    assert quotient.eval(cols, 4).to_pylist() == ["1.3333333333333333", "-1.3333333333333333", None, None]
    with raising_errors(), pytest.raises(ExpressionError, match="division by zero"):
        Arith("/", d, Lit(Dec(0), T.DECIMAL)).eval(cols, 4)


PLAIN = st.builds(lambda n, s: Dec(f"{n}E-{s}"), st.integers(-10 ** 12, 10 ** 12), st.integers(0, 6))


@given(st.sampled_from(["+", "-", "*", "<", "=", ">="]),
       st.lists(st.tuples(st.one_of(st.none(), PLAIN), st.one_of(st.none(), PLAIN)), min_size=1, max_size=12),
       st.booleans())
def test_vectorized_path_equals_the_exact_row_path(op, pairs, scalar_right):
    """stream/decimal_vec.py gives decimal_ops' results, text (per-row scale) included."""
    from stream import decimal_vec as V

    left = D.encode([a for a, _ in pairs], False)
    right = D.encode([pairs[0][1]], True) if scalar_right else D.encode([b for _, b in pairs], False)
    rights = [pairs[0][1]] * len(pairs) if scalar_right else [b for _, b in pairs]
    if op in "+-*":
        fast = V.arith(op, left, right)
        exact, _, _ = D.map_rows(D.ARITH[op], [[a for a, _ in pairs], rights], None)
        # Arrow prints values below 1E-6 in exponent form, which the fast path declines; with
        # operand scales <= 3 (result scale <= 6) that cannot happen
        if max((scale(v) for p in pairs for v in p if v is not None), default=0) <= 3:
            assert fast is not None
        if fast is not None:
            assert fast.to_pylist() == D.encode(exact, False).to_pylist()
    else:
        fast = V.compare(op, left, right)
        exact, _, _ = D.map_rows(D.CMP[op], [[a for a, _ in pairs], rights], None)
        assert fast is not None and fast.to_pylist() == exact


def test_vectorized_constant_operand_equals_the_same_value_repeated():
    """A constant operand (``0.908 * price``) is kept a scalar on the fast path: either side, the
    result (text, per-row scale, declining) is what the constant repeated to every row gives."""
    import pyarrow as pa

    from stream import decimal_vec as V

    column = D.encode([Dec("123"), Dec("-4.50"), None, Dec("0.001"), Dec("99999999")], False)
    for text in ("0.908", "-2.50", "007", "-0", "0.0000001", "NaN", "1E+5", "9" * 30):
        constant = pa.scalar(text, pa.string())
        repeated = pa.repeat(constant, len(column))
        for op in ("+", "-", "*"):
            for args, same in (((constant, column), (repeated, column)), ((column, constant), (column, repeated))):
                got, want = V.arith(op, *args), V.arith(op, *same)
                assert (got is None) == (want is None) and (got is None or got.equals(want)), (text, op)
        for op in ("<", "=", ">="):
            got, want = V.compare(op, column, constant), V.compare(op, column, repeated)
            assert (got is None) == (want is None) and (got is None or got.equals(want)), (text, op)


def test_vectorized_path_declines_what_it_cannot_do_exactly():
    from stream import decimal_vec as V

    assert V.arith("+", D.encode([Dec("NaN"), Dec(1)], False), D.encode([Dec(1)], True)) is None
    assert V.arith("*", D.encode([Dec(10) ** 30], False), D.encode([Dec(10) ** 20], True)) is None
    assert V.arith("*", D.encode([Dec("0.0001")], False), D.encode([Dec("0.0001")], True)) is None  # 1E-8
    assert V.arith("/", D.encode([Dec(1)], False), D.encode([Dec(3)], True)) is None
    # and the expression node still gets those right through decimal_ops
    col = [D.encode([Dec("0.0001"), Dec("NaN")], False)]
    assert Arith("*", Col(0, T.DECIMAL), Col(0, T.DECIMAL)).eval(col, 2).to_pylist() == ["1E-8", "NaN"]


def test_casts_from_numeric_columns_plain_or_not():
    plain = [_dec_col(["1.50", "-2", None])]
    odd = [_dec_col(["1E-8", "NaN", "-Infinity", "1E+2"])]
    assert Cast(Col(0, T.DECIMAL), T.VARCHAR).eval(plain, 3).to_pylist() == ["1.50", "-2", None]
    assert Cast(Col(0, T.DECIMAL), T.VARCHAR).eval(odd, 4).to_pylist() == ["0.00000001", "NaN", "-Infinity", "100"]
    assert Cast(Col(0, T.DECIMAL), T.DOUBLE).eval(odd, 4).to_pylist()[2:] == [float("-inf"), 100.0]
    assert Cast(Col(0, T.DECIMAL), T.REAL).eval(plain, 3).to_pylist() == [1.5, -2.0, None]
    with raising_errors(), pytest.raises(ExpressionError, match="NaN"):
        Cast(Col(0, T.DECIMAL), T.BIGINT).eval(odd, 4)
    assert Cast(Col(0, T.DECIMAL), T.BIGINT).eval(odd, 4).to_pylist() == [0, None, None, 100]   # streaming
