"""The expression tree (stream/expr.py) against Python: three-valued logic, checked integer
arithmetic with Postgres' truncating division and remainder, data errors (overflow, division by
zero) raising inside ``raising_errors`` and NULL (counted) in streaming mode, numeric widening,
casts and functions, and construction errors for operands that do not fit."""

import operator

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational.types import DataType as T
from stream.errors import ExpressionError
from stream.expr import And, Arith, Cast, Cmp, Col, Func, IsNull, Lit, Not, Or, error_counts, raising_errors

INT32 = st.one_of(st.none(), st.integers(-(2 ** 31), 2 ** 31 - 1))


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _model(op, a, b):
    """Postgres semantics on Python ints (None = NULL; division by zero -> 'zero';
    overflow -> 'overflow')."""
    if a is None or b is None:
        return None
    if op in "/%" and b == 0:
        return "zero"
    value = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _trunc_div,
             "%": lambda x, y: x - _trunc_div(x, y) * y}[op](a, b)
    return value if -(2 ** 31) <= value < 2 ** 31 else "overflow"


@given(st.sampled_from("+-*/%"), st.lists(st.tuples(INT32, INT32), min_size=1, max_size=20))
def test_integer_arithmetic_matches_postgres(op, pairs):
    cols = [pa.array([a for a, _ in pairs], pa.int32()), pa.array([b for _, b in pairs], pa.int32())]
    expr = Arith(op, Col(0, T.INT), Col(1, T.INT))
    expected = [_model(op, a, b) for a, b in pairs]
    bad = sum(v in ("overflow", "zero") for v in expected)
    if bad:
        with raising_errors(), pytest.raises(ExpressionError, match="out of range|division by zero"):
            expr.eval(cols, len(pairs))
    else:
        with raising_errors():
            assert expr.eval(cols, len(pairs)).to_pylist() == expected
    # streaming mode: a failing row's value is NULL and the failure is counted
    before = sum(error_counts().values())
    out = expr.eval(cols, len(pairs))
    assert out.type == pa.int32()
    assert out.to_pylist() == [None if v in ("overflow", "zero") else v for v in expected]
    assert sum(error_counts().values()) - before == bad


@given(st.lists(st.tuples(st.sampled_from([True, False, None]), st.sampled_from([True, False, None])),
                min_size=1, max_size=9))
def test_and_or_not_are_three_valued(pairs):
    cols = [pa.array([a for a, _ in pairs], pa.bool_()), pa.array([b for _, b in pairs], pa.bool_())]
    a, b = Col(0, T.BOOLEAN), Col(1, T.BOOLEAN)

    def kleene_and(x, y):
        return False if x is False or y is False else (None if x is None or y is None else True)

    def kleene_or(x, y):
        return True if x is True or y is True else (None if x is None or y is None else False)
    n = len(pairs)
    assert And(a, b).eval(cols, n).to_pylist() == [kleene_and(x, y) for x, y in pairs]
    assert Or(a, b).eval(cols, n).to_pylist() == [kleene_or(x, y) for x, y in pairs]
    assert Not(a).eval(cols, n).to_pylist() == [None if x is None else not x for x, _ in pairs]
    assert IsNull(a).eval(cols, n).to_pylist() == [x is None for x, _ in pairs]
    assert IsNull(a, negated=True).eval(cols, n).to_pylist() == [x is not None for x, _ in pairs]


def test_widening_comparisons_and_literals():
    cols = [pa.array([1, None, 3], pa.int16()), pa.array([0.5, 2.0, None]), pa.array(["a", "B", None])]
    mixed = Arith("+", Col(0, T.SMALLINT), Lit(2 ** 40, T.BIGINT))
    assert mixed.data_type == T.BIGINT and mixed.eval(cols, 3).to_pylist() == [2 ** 40 + 1, None, 2 ** 40 + 3]
    assert Arith("*", Col(0, T.SMALLINT), Col(1, T.DOUBLE)).eval(cols, 3).to_pylist() == [0.5, None, None]
    assert Arith("/", Col(1, T.DOUBLE), Lit(0, T.INT)).eval(cols, 3).to_pylist() == [None, None, None]
    assert Cmp(">=", Col(0, T.SMALLINT), Lit(3, T.BIGINT)).eval(cols, 3).to_pylist() == [False, None, True]
    assert Cmp("<>", Col(2, T.VARCHAR), Lit("a", T.VARCHAR)).eval(cols, 3).to_pylist() == [False, True, None]
    assert Lit(7, T.INT).eval(cols, 3).to_pylist() == [7, 7, 7]
    assert Lit(None, T.VARCHAR).eval(cols, 3).to_pylist() == [None, None, None]


def test_casts_and_functions():
    cols = [pa.array([1.5, -2.5, None]), pa.array(["Ab", None, "xyz"]), pa.array([-3, 4, None], pa.int32())]
    assert Cast(Col(0, T.DOUBLE), T.INT).eval(cols, 3).to_pylist() == [2, -2, None]   # rint: half to even (Postgres)
    assert Cast(Col(2, T.INT), T.VARCHAR).eval(cols, 3).to_pylist() == ["-3", "4", None]
    with raising_errors(), pytest.raises(ExpressionError):
        Cast(Col(1, T.VARCHAR), T.INT).eval(cols, 3)
    assert Cast(Col(1, T.VARCHAR), T.INT).eval(cols, 3).to_pylist() == [None, None, None]   # streaming
    assert Func("abs", Col(2, T.INT)).eval(cols, 3).to_pylist() == [3, 4, None]
    assert Func("upper", Col(1, T.VARCHAR)).eval(cols, 3).to_pylist() == ["AB", None, "XYZ"]
    assert Func("length", Col(1, T.VARCHAR)).eval(cols, 3).to_pylist() == [2, None, 3]
    assert Func("round", Col(0, T.DOUBLE)).eval(cols, 3).to_pylist() == [2.0, -2.0, None]   # rint, as Postgres
    assert Func("coalesce", Col(1, T.VARCHAR), Lit("-", T.VARCHAR)).eval(cols, 3).to_pylist() == ["Ab", "-", "xyz"]
    assert Func("concat", Col(1, T.VARCHAR), Col(2, T.INT)).eval(cols, 3).to_pylist() == ["Ab-3", "4", "xyz"]
    assert Col(0, T.DOUBLE, "x").column_refs() == {0}
    assert Func("concat", Col(1, T.VARCHAR), Col(2, T.INT)).column_refs() == {1, 2}


@pytest.mark.parametrize("build", [
    lambda: Arith("+", Col(0, T.VARCHAR), Lit(1, T.INT)),
    lambda: Arith("^", Col(0, T.INT), Lit(1, T.INT)),
    lambda: Cmp("=", Col(0, T.VARCHAR), Lit(1, T.INT)),
    lambda: And(Col(0, T.INT)),
    lambda: Not(Col(0, T.VARCHAR)),
    lambda: Func("nope", Col(0, T.INT)),
    lambda: Func("lower", Col(0, T.INT)),
    lambda: Func("abs"),
    lambda: Lit("x", T.INT),
])
def test_operands_that_do_not_fit_fail_at_construction(build):
    with pytest.raises((ExpressionError, TypeError)):
        build()
