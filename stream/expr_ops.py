"""Operator nodes: :class:`Arith` (``+ - * / %``), :class:`Cmp` (``= <> < <= > >=``),
:class:`And`, :class:`Or`, :class:`Not` and :class:`IsNull`.

Semantics (Postgres): operands widen to their common numeric type first
(:func:`stream.expr_base.common_numeric`, :func:`stream.expr_cast.cast_to`). NULL in, NULL out,
except AND/OR, which are three-valued (Kleene), and IS [NOT] NULL, which is never NULL. Integer
arithmetic is checked: ``/`` truncates toward zero, ``%`` has the dividend's sign; overflow,
division or remainder by zero, and a float result that overflows or underflows
(:mod:`stream.expr_float`) are data errors (:mod:`stream.expr_errors`: raised in strict mode,
otherwise only the failing rows become NULL -- :meth:`Arith._overflowing` recomputes them
exactly). DECIMAL arithmetic and comparison are exact (:mod:`stream.decimal_vec` vectorized,
:mod:`stream.decimal_ops` row by row). Float comparison follows Postgres' order, where NaN
equals NaN and sorts above every other value (:func:`_nan_order`). INTERVAL comparison counts a
month as 30 days and a day as 24 hours (:mod:`stream.expr_interval`).

Callers: the facade :mod:`stream.expr` (the SQL binder, executors and tests import from there).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream import decimal_ops as D
from stream import decimal_vec as V
from stream.errors import ExpressionError
from stream.expr_base import DECIMAL as _DECIMAL
from stream.expr_base import FLOATS as _FLOATS
from stream.expr_base import INTS as _INTS
from stream.expr_base import Expr, Lit, common_numeric
from stream.expr_base import require_bool as _require_bool
from stream.expr_cast import cast_to as _cast_to
from stream.expr_cast import decimal_rows as _decimal_rows
from stream.expr_errors import ARROW_ERRORS as _ARROW_ERRORS
from stream.expr_errors import arrow_message as _arrow_message
from stream.expr_errors import data_error, strict
from stream.expr_errors import is_array as _is_array
from stream.expr_errors import wrap as _wrap
from stream.expr_float import arith_range as _arith_range
from stream.expr_interval import compare as _interval_compare

_INT_RANGE = {TypeKind.SMALLINT: (-(1 << 15), (1 << 15) - 1), TypeKind.INT: (-(1 << 31), (1 << 31) - 1),
              TypeKind.BIGINT: (-(1 << 63), (1 << 63) - 1)}
_INT_NAME = {TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer", TypeKind.BIGINT: "bigint"}


def _broadcast_len(*values):
    for v in values:
        if _is_array(v):
            return len(v)
    return None


def _count_true(mask) -> int:
    if isinstance(mask, pa.Scalar):
        return int(bool(mask.is_valid and mask.as_py()))
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


class Arith(Expr):
    """``left op right`` for ``op`` in ``+ - * / %`` over numeric operands."""

    _KERNELS = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked,
                "/": pc.divide_checked, "%": pc.remainder_checked}
    _PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
           "%": lambda a, b: a - abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1) * b}

    def __init__(self, op: str, left: Expr, right: Expr):
        if op not in self._KERNELS:
            raise ExpressionError(f"unknown arithmetic operator {op!r}")
        self.op, self.left, self.right = op, left, right
        common = common_numeric(left.data_type, right.data_type)
        if common is None:
            raise ExpressionError(f"operator {op} needs numeric operands, got {left.data_type.sql_name()} and "
                                  f"{right.data_type.sql_name()}", self)
        if op == "%" and common.kind in _FLOATS:   # Postgres has no float % (nor mod(float, float))
            raise ExpressionError(f"operator does not exist: {left.data_type.sql_name()} % "
                                  f"{right.data_type.sql_name()}", self)
        self.data_type = common
        self._nonzero_divisor = isinstance(right, Lit) and right.value not in (None, 0)

    def children(self) -> tuple:
        return self.left, self.right

    def evaluate(self, columns):
        left = _cast_to(self.left.evaluate(columns), self.left.data_type, self.data_type, self)
        right = _cast_to(self.right.evaluate(columns), self.right.data_type, self.data_type, self)
        if self.data_type.kind == _DECIMAL:
            return self._decimal(left, right)
        if self.op in ("/", "%") and not self._nonzero_divisor:   # division by zero: a data error
            zero = pc.equal(right, pa.scalar(0, right.type))
            failed = _count_true(pc.and_kleene(zero, pc.is_valid(left)))
            if failed:
                data_error(self, "division by zero", failed)
            right = pc.if_else(zero, pa.scalar(None, right.type), right)
        try:
            out = self._KERNELS[self.op](left, right)
            return _arith_range(self, self.op, left, right, out) if self.data_type.kind in _FLOATS else out
        except _ARROW_ERRORS as exc:
            if self.data_type.kind in _INTS and "overflow" in str(exc).lower():
                if strict() and self.op != "%":   # INT_MIN % -1 is 0, computed exactly below
                    raise ExpressionError(f"{_INT_NAME[self.data_type.kind]} out of range", self) from exc
            else:
                raise ExpressionError(_arrow_message(exc), self) from exc
            return self._overflowing(left, right)

    def _overflowing(self, left, right):
        """Streaming mode after an integer overflow: exact Python ints, out-of-range rows NULL."""
        n = _broadcast_len(left, right) or 1
        cols = [[v.as_py()] * n if isinstance(v, pa.Scalar) else v.to_pylist() for v in (left, right)]
        lo, hi = _INT_RANGE[self.data_type.kind]
        fn = self._PY[self.op]
        out = [None if a is None or b is None else fn(a, b) for a, b in zip(*cols)]
        bad = sum(1 for v in out if v is not None and not lo <= v <= hi)
        data_error(self, f"{_INT_NAME[self.data_type.kind]} out of range", bad)
        out = [v if v is None or lo <= v <= hi else None for v in out]
        if isinstance(left, pa.Scalar) and isinstance(right, pa.Scalar):
            return pa.scalar(out[0], arrow_type(self.data_type))
        return pa.array(out, arrow_type(self.data_type))

    def _decimal(self, left, right):
        fast = V.arith(self.op, left, right)   # None: not plain, too wide, or not + - *
        if fast is not None:
            return fast
        (lv, ls), (rv, rs) = D.decode(left), D.decode(right)
        n = None if ls and rs else (len(rv) if ls else len(lv))
        out = _decimal_rows(self, D.ARITH[self.op], [lv, rv], ls and rs, n)
        return D.encode(out, ls and rs)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


class Cmp(Expr):
    """``left op right`` for ``op`` in ``= <> < <= > >=``; numeric operands widen first."""

    _KERNELS = {"=": pc.equal, "<>": pc.not_equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
                ">": pc.greater, ">=": pc.greater_equal}

    def __init__(self, op: str, left: Expr, right: Expr):
        if op not in self._KERNELS:
            raise ExpressionError(f"unknown comparison operator {op!r}")
        self.op, self.left, self.right = op, left, right
        self.data_type = DataType.BOOLEAN
        lt, rt = left.data_type, right.data_type
        self._common = common_numeric(lt, rt) or (lt if lt == rt else None)
        if self._common is None or self._common.kind in (TypeKind.STRUCT, TypeKind.LIST):
            raise ExpressionError(f"cannot compare {lt.sql_name()} with {rt.sql_name()}", self)

    def children(self) -> tuple:
        return self.left, self.right

    def evaluate(self, columns):
        left = _cast_to(self.left.evaluate(columns), self.left.data_type, self._common, self)
        right = _cast_to(self.right.evaluate(columns), self.right.data_type, self._common, self)
        if self._common.kind == _DECIMAL:
            fast = V.compare(self.op, left, right)
            if fast is not None:
                return fast
            (lv, ls), (rv, rs) = D.decode(left), D.decode(right)
            n = None if ls and rs else (len(rv) if ls else len(lv))
            out, _, _ = D.map_rows(D.CMP[self.op], [lv, rv], n)
            return pa.scalar(out[0], pa.bool_()) if ls and rs else pa.array(out, pa.bool_())
        if self._common.kind == TypeKind.INTERVAL:   # no Arrow kernel: Postgres' 30-day-month order
            return _interval_compare(self.op, left, right)
        out = _wrap(self._KERNELS[self.op], self, left, right)
        if self._common.kind in _FLOATS:
            out = _nan_order(self.op, left, right, out)
        return out

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


def _nan_order(op: str, left, right, out):
    """Postgres' float order on top of IEEE's: NaN equals NaN and is above every other value
    (``'NaN'::float8 = 'NaN'`` is true, ``1 < 'NaN'`` is true). NULL stays NULL."""
    def has_nan(v):
        if isinstance(v, pa.Scalar):
            return v.is_valid and v.as_py() != v.as_py()
        return v.null_count < len(v) and pc.any(pc.is_nan(v)).as_py()
    if not (has_nan(left) or has_nan(right)):
        return out
    ln, rn = pc.is_nan(left), pc.is_nan(right)
    if op == "=":
        return pc.or_(out, pc.and_(ln, rn))
    if op in ("<>", "!="):
        return pc.and_(out, pc.invert(pc.and_(ln, rn)))
    if op == "<":
        return pc.or_(out, pc.and_(pc.invert(ln), rn))
    if op == "<=":
        return pc.or_(out, rn)
    if op == ">":
        return pc.or_(out, pc.and_(ln, pc.invert(rn)))
    return pc.or_(out, ln)   # >=


class And(Expr):
    """Three-valued AND of one or more BOOLEAN operands."""

    def __init__(self, *args: Expr):
        if not args:
            raise ExpressionError("AND needs at least one operand")
        self.args, self.data_type = args, DataType.BOOLEAN
        for a in args:
            _require_bool(a, self)

    def children(self) -> tuple:
        return self.args

    def evaluate(self, columns):
        out = self.args[0].evaluate(columns)
        for a in self.args[1:]:
            out = pc.and_kleene(out, a.evaluate(columns))
        return out

    def __str__(self) -> str:
        return "(" + " AND ".join(map(str, self.args)) + ")"


class Or(And):
    """Three-valued OR of one or more BOOLEAN operands."""

    def evaluate(self, columns):
        out = self.args[0].evaluate(columns)
        for a in self.args[1:]:
            out = pc.or_kleene(out, a.evaluate(columns))
        return out

    def __str__(self) -> str:
        return "(" + " OR ".join(map(str, self.args)) + ")"


class Not(Expr):
    def __init__(self, arg: Expr):
        self.arg, self.data_type = arg, DataType.BOOLEAN
        _require_bool(arg, self)

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        return pc.invert(self.arg.evaluate(columns))

    def __str__(self) -> str:
        return f"(NOT {self.arg})"


class IsNull(Expr):
    """``arg IS NULL`` (``negated``: IS NOT NULL); never NULL itself."""

    def __init__(self, arg: Expr, negated: bool = False):
        self.arg, self.negated, self.data_type = arg, negated, DataType.BOOLEAN

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        value = self.arg.evaluate(columns)
        if isinstance(value, pa.Scalar):
            return pa.scalar(value.is_valid if self.negated else not value.is_valid)
        return pc.is_valid(value) if self.negated else pc.is_null(value)

    def __str__(self) -> str:
        return f"({self.arg} IS {'NOT ' if self.negated else ''}NULL)"
