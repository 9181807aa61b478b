"""A small expression tree evaluated on Arrow columns (``pyarrow.compute``), for Project and
Filter; the SQL layer builds these trees from sqlglot.

Nodes: :class:`Col` (a column by index), :class:`Lit` (a typed constant), :class:`Arith`
(``+ - * / %``), :class:`Cmp` (``= <> < <= > >=``), :class:`And`, :class:`Or`, :class:`Not`,
:class:`IsNull` (and IS NOT NULL), :class:`Cast`, :class:`Func` (``abs``, ``lower``,
``upper``, ``length``, ``round``, ``coalesce``, ``concat``). Each node knows its result
:class:`~relational.types.DataType` at construction, so a Project's output schema is known
before any data flows; operands that do not fit raise :class:`ExpressionError` at
construction, not at the first chunk.

Semantics (Postgres, except where noted):
- NULL in, NULL out for arithmetic, comparisons, casts and functions (``coalesce`` aside);
  AND/OR are three-valued (Kleene). A Filter keeps a row only where its condition is TRUE.
- Integer arithmetic is checked; ``/`` on integers truncates toward zero; ``%`` has the
  dividend's sign.
- Mixed numeric operands widen: SMALLINT < INT < BIGINT < DECIMAL; any REAL/DOUBLE makes DOUBLE
  (REAL with REAL stays REAL). DECIMAL (NUMERIC) is exact: stream/decimal_ops.py.
- A cast from REAL/DOUBLE/DECIMAL to an integer rounds half away from zero, like Postgres.
- Data errors (integer overflow, division or remainder by zero, a cast that does not fit)
  depend on the evaluation mode (stream/expr_errors.py). Inside :func:`raising_errors` (batch SELECT, DML) they raise
  :class:`ExpressionError` (``expr`` is the failing node). Otherwise (a streaming MV) the row's
  value is NULL, the error is logged (logger ``stream.expr``) and counted
  (:func:`error_counts`), as RisingWave's streaming engine does, so one bad row does not stop
  a materialized view.
- ``CASE`` evaluates a branch only on the rows that take it (Postgres' lazy CASE), so
  ``CASE WHEN b <> 0 THEN a / b END`` never divides by zero.
Evaluation never loops in Python over rows, except for DECIMAL values that Arrow's decimal128
cannot hold exactly (stream/decimal_vec.py is the vectorized path for ``+ - *`` and
comparisons; division, ``%``, NaN/Infinity and wider values go row by row) and the rows of a
chunk on which a kernel failed in streaming mode.

Callers: :mod:`stream.executors.project`, :mod:`stream.executors.filter`, sql's planner.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import _to_arrow_value, arrow_type
from relational.types import DataType, TypeKind
from stream import decimal_ops as D
from stream import decimal_vec as V
from stream.errors import ExpressionError
from stream.expr_errors import ARROW_ERRORS as _ARROW_ERRORS
from stream.expr_errors import data_error, error_counts, raising_errors, strict  # noqa: F401 (re-exported)
from stream.expr_errors import arrow_message as _arrow_message
from stream.expr_errors import chunk_len as _chunk_len
from stream.expr_errors import guarded as _guarded
from stream.expr_errors import is_array as _is_array
from stream.expr_errors import wrap as _wrap

_INTS = {TypeKind.SMALLINT: 0, TypeKind.INT: 1, TypeKind.BIGINT: 2}
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_DECIMAL = TypeKind.DECIMAL
_INT_BY_RANK = [DataType.SMALLINT, DataType.INT, DataType.BIGINT]
_INT_RANGE = {TypeKind.SMALLINT: (-(1 << 15), (1 << 15) - 1), TypeKind.INT: (-(1 << 31), (1 << 31) - 1),
              TypeKind.BIGINT: (-(1 << 63), (1 << 63) - 1)}
_INT_NAME = {TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer", TypeKind.BIGINT: "bigint"}

def is_numeric(t: DataType) -> bool:
    return t.kind in _INTS or t.kind in _FLOATS or t.kind == _DECIMAL


def common_numeric(a: DataType, b: DataType) -> DataType | None:
    """The type both operands widen to, or None when one is not numeric (module docstring)."""
    if not (is_numeric(a) and is_numeric(b)):
        return None
    if a.kind in _FLOATS or b.kind in _FLOATS:
        return DataType.REAL if a.kind == b.kind == TypeKind.REAL else DataType.DOUBLE
    if _DECIMAL in (a.kind, b.kind):
        return DataType.DECIMAL
    return _INT_BY_RANK[max(_INTS[a.kind], _INTS[b.kind])]


class Expr:
    """A typed expression node. Evaluation has two public steps:

    - :meth:`evaluate` ``(columns)`` is the step every node implements and the one a parent
      node calls on its children. It returns a ``pa.Array`` with one value per row of
      ``columns``, or a ``pa.Scalar`` standing for every row (a constant subtree, so Arrow
      broadcasts it instead of materializing ``n`` copies); both of
      ``arrow_type(self.data_type)``.
    - :meth:`eval` ``(columns, n)`` is what executors call: :meth:`evaluate` with a scalar
      result broadcast to an array of ``n`` values.

    ``columns`` are a chunk's columns (all rows, visible or not); an entry may be a
    ``pa.Scalar`` or a ``pa.ChunkedArray`` (CASE branches and the row-by-row retry of
    :func:`stream.expr_errors.guarded` pass such lists). Type errors are raised at
    construction; data errors at evaluation follow the mode of :mod:`stream.expr_errors`.
    """

    data_type: DataType

    def eval(self, columns, n: int) -> pa.Array:
        """An Arrow array of ``n`` values of ``arrow_type(self.data_type)``."""
        out = self.evaluate(columns)
        if isinstance(out, pa.Scalar):
            return pa.repeat(out, n) if out.is_valid else pa.nulls(n, arrow_type(self.data_type))
        return out

    def eval_chunk(self, chunk) -> pa.Array:
        return self.eval(chunk.columns, len(chunk))

    def evaluate(self, columns):
        """This node over ``columns``: a ``pa.Array`` (one value per row) or a ``pa.Scalar``
        (the same value for every row); see the class docstring."""
        raise NotImplementedError

    def children(self) -> tuple:
        return ()

    def column_refs(self) -> set:
        """Indices of the columns this expression reads."""
        refs = set()
        for child in self.children():
            refs |= child.column_refs()
        return refs


class Col(Expr):
    """Input column ``index`` of type ``data_type`` (``name`` only for printing)."""

    def __init__(self, index: int, data_type: DataType, name: str | None = None):
        self.index, self.data_type, self.name = index, data_type, name

    def evaluate(self, columns):
        return columns[self.index]

    def column_refs(self) -> set:
        return {self.index}

    def __str__(self) -> str:
        return self.name or f"${self.index}"


class Lit(Expr):
    """A constant of ``data_type`` (``None`` is a typed NULL)."""

    def __init__(self, value, data_type: DataType):
        self.data_type = data_type
        self.value = data_type.validate(value) if value is not None else None
        self._scalar = pa.scalar(None if self.value is None else _to_arrow_value(self.value, data_type),
                                 type=arrow_type(data_type))

    def evaluate(self, columns):
        return self._scalar

    def __str__(self) -> str:
        if self.value is None:
            return "NULL"
        return str(self.value) if self.data_type.kind == _DECIMAL else repr(self.value)


def _cast_to(value, source: DataType, target: DataType, expr):
    """``value`` (array or scalar of ``source``) as ``target``; a value that does not fit is a
    data error (module docstring)."""
    if source == target:
        return value
    if source.kind == _DECIMAL or target.kind == _DECIMAL:
        return _decimal_cast(value, source, target, expr)
    if source.kind in _FLOATS and target.kind in _INTS:
        value = _wrap(pc.round, expr, value, 0, "half_towards_infinity")
    return _wrap(pc.cast, expr, value, arrow_type(target), True)


def _decimal_rows(expr, fn, values, scalar: bool, n=None):
    """``fn`` over decoded rows; failed rows are data errors (raise or NULL)."""
    out, message, failed = D.map_rows(fn, values, n)
    if failed:
        data_error(expr, message, failed)
    return out


def _decimal_cast(value, source: DataType, target: DataType, expr):
    kind = target.kind
    if source.kind == _DECIMAL and kind in _FLOATS:   # Arrow parses the text, correctly rounded
        try:
            return pc.cast(value, arrow_type(target))
        except _ARROW_ERRORS:
            pass
    if source.kind == _DECIMAL and kind == TypeKind.VARCHAR and V.is_plain(value):
        return value   # the stored text is already Postgres' output
    if source.kind == _DECIMAL:
        values, scalar = D.decode(value)
        if kind in _INTS:
            out = _decimal_rows(expr, lambda d: D.to_int(d, target.kind.name), [values], scalar)
        elif kind in _FLOATS:
            out = [None if d is None else float(d) for d in values]
        elif kind == TypeKind.VARCHAR:
            out = [None if d is None else D.to_text(d) for d in values]
        else:
            raise ExpressionError(f"cannot cast NUMERIC to {target.sql_name()}", expr)
        return pa.scalar(out[0], arrow_type(target)) if scalar else pa.array(out, arrow_type(target))
    if source.kind in _INTS:   # exact: the integer's digits are the numeric's text
        return _wrap(pc.cast, expr, value, pa.string())
    if source.kind in _FLOATS:
        digits = 6 if source.kind == TypeKind.REAL else 15
        floats = [value.as_py()] if isinstance(value, pa.Scalar) else value.to_pylist()
        return D.encode([None if f is None else D.from_float(f, digits) for f in floats], isinstance(value, pa.Scalar))
    if source.kind == TypeKind.VARCHAR:
        scalar = isinstance(value, pa.Scalar)
        texts = [value.as_py()] if scalar else value.to_pylist()
        return D.encode(_decimal_rows(expr, D.from_text, [texts], scalar), scalar)
    raise ExpressionError(f"cannot cast {source.sql_name()} to NUMERIC", expr)


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
            return self._KERNELS[self.op](left, right)
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


def _require_bool(expr: Expr, parent) -> None:
    if expr.data_type != DataType.BOOLEAN:
        raise ExpressionError(f"needs a BOOLEAN operand, got {expr.data_type.sql_name()} {expr}", parent)


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


class Cast(Expr):
    """``CAST(arg AS data_type)``; a value that does not fit raises ``ExpressionError``."""

    def __init__(self, arg: Expr, data_type: DataType):
        self.arg, self.data_type = arg, data_type
        if data_type.kind in (TypeKind.STRUCT, TypeKind.LIST) and arg.data_type != data_type:
            raise ExpressionError(f"cannot cast {arg.data_type.sql_name()} to {data_type.sql_name()}", self)
        kinds = {arg.data_type.kind, data_type.kind}
        if _DECIMAL in kinds and not kinds <= {_DECIMAL, TypeKind.VARCHAR, *_INTS, *_FLOATS}:
            raise ExpressionError(f"cannot cast {arg.data_type.sql_name()} to {data_type.sql_name()}", self)

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        return _guarded(self, columns, lambda: self._compute(columns))

    def _compute(self, columns):
        return _cast_to(self.arg.evaluate(columns), self.arg.data_type, self.data_type, self)

    def __str__(self) -> str:
        return f"CAST({self.arg} AS {self.data_type.sql_name()})"


def _func_abs(args, columns):
    if args[0].data_type.kind == _DECIMAL:
        return _decimal_func(lambda d: d.copy_abs())(args, columns)
    return pc.abs_checked(args[0].evaluate(columns))


def _decimal_func(fn):
    """A function of DECIMAL (and integer) arguments computed row by row (decimal_ops)."""
    def run(args, columns):
        decoded = [D.decode(a.evaluate(columns)) if a.data_type.kind == _DECIMAL else _py_values(a.evaluate(columns))
                   for a in args]
        scalar = all(sc for _, sc in decoded)
        n = None if scalar else next(len(v) for v, sc in decoded if not sc)
        out, _, _ = D.map_rows(fn, [v for v, _ in decoded], n)
        return D.encode(out, scalar)
    return run


def _py_values(value):
    if isinstance(value, pa.Scalar):
        return [value.as_py()], True
    return value.to_pylist(), False


def _func_round(args, columns):
    if args[0].data_type.kind == _DECIMAL:
        return _decimal_func(D.round_to)(args, columns)
    return pc.round(args[0].evaluate(columns), 0, "half_towards_infinity")


def _round_type(ts):
    if len(ts) == 2:
        return DataType.DECIMAL if ts[0].kind == _DECIMAL and ts[1].kind in _INTS else None
    return ts[0] if ts[0].kind in _FLOATS or ts[0].kind == _DECIMAL else None


def _ceil_floor(kernel, fn):
    def run(args, columns):
        if args[0].data_type.kind == _DECIMAL:
            return _decimal_func(fn)(args, columns)
        if args[0].data_type.kind in _INTS:   # Postgres: ceil(integer) is ceil(double precision)
            return kernel(_as_double(args[0], columns))
        return kernel(args[0].evaluate(columns))
    return run


def _ceil_floor_type(ts):
    if ts[0].kind in _FLOATS or ts[0].kind in _INTS:
        return DataType.DOUBLE
    return DataType.DECIMAL if ts[0].kind == _DECIMAL else None


def _nulled(values, bad, what: str, message: str):
    """``values`` with the rows of mask ``bad`` NULL: a data error (``stream.expr_errors``:
    raised in batch and DML, NULL and counted in a stream)."""
    if isinstance(bad, pa.Scalar):
        if bad.as_py():
            data_error(what, message)
            return pa.scalar(None, values.type)
        return values
    count = pc.sum(pc.cast(bad, pa.int64())).as_py() or 0
    if not count:
        return values
    data_error(what, message, count)
    return pc.if_else(bad, pa.scalar(None, values.type), values)


def _func_sqrt(args, columns):
    x = _as_double(args[0], columns)
    x = _nulled(x, pc.fill_null(pc.less(x, 0.0), False), f"sqrt({args[0]})",
                "cannot take square root of a negative number")
    return pc.sqrt(x)


def _func_power(args, columns):
    """Postgres's power(): 0 to a negative power and a negative number to a non-integer power
    are data errors (not Infinity / NaN)."""
    x, y = _as_double(args[0], columns), _as_double(args[1], columns)
    what = f"power({args[0]}, {args[1]})"
    zero_neg = pc.fill_null(pc.and_(pc.equal(x, 0.0), pc.less(y, 0.0)), False)
    x = _nulled(x, zero_neg, what, "zero raised to a negative power is undefined")
    complex_ = pc.fill_null(pc.and_(pc.and_(pc.less(x, 0.0), pc.is_finite(y)), pc.not_equal(pc.floor(y), y)), False)
    x = _nulled(x, complex_, what, "a negative number raised to a non-integer power yields a complex result")
    return pc.power(x, y)


def _func_coalesce(args, columns):
    return pc.coalesce(*(a.evaluate(columns) for a in args))


def _func_concat(args, columns):   # Postgres concat(): NULL arguments are skipped
    values = [pc.fill_null(_as_text(a, columns), "") for a in args]
    return pc.binary_join_element_wise(*values, "")


def _as_text(arg, columns):
    value = arg.evaluate(columns)
    return value if arg.data_type == DataType.VARCHAR else pc.cast(value, pa.string())


def _text_to_text(ts):
    return ts[0] if ts[0] == DataType.VARCHAR else None


def _as_double(arg, columns):
    return _cast_to(arg.evaluate(columns), arg.data_type, DataType.DOUBLE, arg)


def _func_substr(args, columns):   # substr(s, start [, count]), 1-based like Postgres
    value = args[0].evaluate(columns)
    start = args[1]
    count = args[2] if len(args) > 2 else None
    if not isinstance(start, Lit) or (count is not None and not isinstance(count, Lit)):
        raise ExpressionError("substr needs constant start and count")
    if start.value is None or (count is not None and count.value is None):
        return pa.scalar(None, pa.string())
    begin = start.value - 1
    end = None if count is None else begin + count.value
    if count is not None and count.value < 0:
        raise ExpressionError("negative substring length not allowed")
    begin_clamped = max(begin, 0)
    if end is not None and end <= begin_clamped:
        return pc.if_else(pc.is_null(value), pa.scalar(None, pa.string()), pa.scalar("", pa.string())) \
            if isinstance(value, pa.Array) else pa.scalar(None if not value.is_valid else "", pa.string())
    return pc.utf8_slice_codeunits(value, begin_clamped, end)


def _func_replace(args, columns):
    pattern, repl = args[1], args[2]
    if not isinstance(pattern, Lit) or not isinstance(repl, Lit):
        raise ExpressionError("replace needs constant pattern and replacement")
    if pattern.value is None or repl.value is None:
        return pa.scalar(None, pa.string())
    return pc.replace_substring(args[0].evaluate(columns), pattern.value, repl.value)


_FUNCS = {
    # name: (implementation, result type from the argument types, (min args, max args))
    "abs": (_func_abs, lambda ts: ts[0] if is_numeric(ts[0]) else None, (1, 1)),
    "round": (_func_round, _round_type, (1, 2)),
    "lower": (lambda a, c: pc.utf8_lower(a[0].evaluate(c)), lambda ts: ts[0] if ts[0] == DataType.VARCHAR else None,
              (1, 1)),
    "upper": (lambda a, c: pc.utf8_upper(a[0].evaluate(c)), lambda ts: ts[0] if ts[0] == DataType.VARCHAR else None,
              (1, 1)),
    "length": (lambda a, c: pc.cast(pc.utf8_length(a[0].evaluate(c)), pa.int32()),
               lambda ts: DataType.INT if ts[0] == DataType.VARCHAR else None, (1, 1)),
    "coalesce": (_func_coalesce, lambda ts: ts[0] if all(t == ts[0] for t in ts) else None, (1, None)),
    "concat": (_func_concat, lambda ts: DataType.VARCHAR, (1, None)),
    "substr": (_func_substr, lambda ts: ts[0] if ts[0] == DataType.VARCHAR and all(t.kind in _INTS for t in ts[1:])
               else None, (2, 3)),
    "trim": (lambda a, c: pc.utf8_trim_whitespace(a[0].evaluate(c)), _text_to_text, (1, 1)),
    "ltrim": (lambda a, c: pc.utf8_ltrim_whitespace(a[0].evaluate(c)), _text_to_text, (1, 1)),
    "rtrim": (lambda a, c: pc.utf8_rtrim_whitespace(a[0].evaluate(c)), _text_to_text, (1, 1)),
    "replace": (_func_replace, lambda ts: ts[0] if all(t == DataType.VARCHAR for t in ts) else None, (3, 3)),
    "ceil": (_ceil_floor(pc.ceil, D.ceil), _ceil_floor_type, (1, 1)),
    "floor": (_ceil_floor(pc.floor, D.floor), _ceil_floor_type, (1, 1)),
    "sqrt": (_func_sqrt, lambda ts: DataType.DOUBLE if is_numeric(ts[0]) else None, (1, 1)),
    "power": (_func_power, lambda ts: DataType.DOUBLE if all(is_numeric(t) for t in ts) else None, (2, 2)),
}


class Func(Expr):
    """A named function (``abs``, ``round``, ``lower``, ``upper``, ``length``, ``coalesce``,
    ``concat``); unknown names and argument types that do not fit raise at construction."""

    def __init__(self, name: str, *args: Expr):
        self.name, self.args = name.lower(), args
        try:
            self._impl, result_type, (lo, hi) = _FUNCS[self.name]
        except KeyError:
            raise ExpressionError(f"unknown function {name!r}; known: {', '.join(sorted(_FUNCS))}") from None
        if len(args) < lo or hi is not None and len(args) > hi:
            raise ExpressionError(f"{name} takes {lo}{'' if hi == lo else '+'} arguments, got {len(args)}", self)
        self.data_type = result_type([a.data_type for a in args])
        if self.data_type is None:
            raise ExpressionError(f"{name} does not take ({', '.join(a.data_type.sql_name() for a in args)})", self)

    def children(self) -> tuple:
        return self.args

    def evaluate(self, columns):
        return _guarded(self, columns, lambda: self._compute(columns))

    def _compute(self, columns):
        return _wrap(self._impl, self, self.args, columns)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


def _take(columns, rows, refs):
    """The ``rows`` of the columns an expression reads (``refs``); the others become NULL
    placeholders of the new length (never read)."""
    idx = pa.array(rows, pa.int64())
    return [c.take(idx) if i in refs and _is_array(c) else pa.nulls(len(rows))
            for i, c in enumerate(columns)]


class Case(Expr):
    """``CASE WHEN c1 THEN v1 ... ELSE e END``: the first branch whose condition is TRUE (NULL
    counts as not TRUE); every value (and ``else_``, None = NULL) already has ``data_type``."""

    def __init__(self, whens, else_: Expr | None, data_type: DataType):
        self.whens, self.else_, self.data_type = [tuple(w) for w in whens], else_, data_type
        if not self.whens:
            raise ExpressionError("CASE needs at least one WHEN")
        for cond, value in self.whens:
            _require_bool(cond, self)
            if value.data_type != data_type:
                raise ExpressionError(f"CASE branch {value} is {value.data_type.sql_name()}, not "
                                      f"{data_type.sql_name()}", self)
        if else_ is not None and else_.data_type != data_type:
            raise ExpressionError(f"CASE ELSE is {else_.data_type.sql_name()}, not {data_type.sql_name()}", self)

    def children(self) -> tuple:
        out = [x for w in self.whens for x in w]
        return tuple(out + ([self.else_] if self.else_ is not None else []))

    def evaluate(self, columns):
        n = _chunk_len(columns)
        if n is None:   # all constants: only the taken branch is evaluated
            for cond, value in self.whens:
                c = cond.evaluate(columns)
                if c.is_valid and c.as_py():
                    return value.evaluate(columns)
            return self.else_.evaluate(columns) if self.else_ is not None else pa.scalar(None, arrow_type(self.data_type))
        t = arrow_type(self.data_type)
        refs = self.column_refs()
        rows, cols = np.arange(n), columns
        where, parts = [], []
        for cond, value in self.whens:
            if not len(rows):
                break
            taken = pc.fill_null(cond.eval(cols, len(rows)), False).to_numpy(zero_copy_only=False)
            if taken.all():
                where.append(rows)
                parts.append(value.eval(cols, len(rows)))
                rows = rows[:0]
                break
            if taken.any():
                sel = np.flatnonzero(taken)
                where.append(rows[sel])
                parts.append(value.eval(_take(cols, sel, refs), len(sel)))
                keep = np.flatnonzero(~taken)
                rows, cols = rows[keep], _take(cols, keep, refs)
        if len(rows):
            where.append(rows)
            parts.append(self.else_.eval(cols, len(rows)) if self.else_ is not None else pa.nulls(len(rows), t))
        parts = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in parts]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return pa.nulls(0, t)
        return pa.concat_arrays(parts).take(pa.array(np.argsort(np.concatenate(where), kind="stable")))

    def __str__(self) -> str:
        body = " ".join(f"WHEN {c} THEN {v}" for c, v in self.whens)
        return f"(CASE {body}{'' if self.else_ is None else f' ELSE {self.else_}'} END)"


_REGEX_META = set("\\.^$|?*+()[]{}")


def like_regex(pattern: str, escape: str | None = "\\") -> str:
    """An anchored RE2 regex for a LIKE ``pattern`` (``%`` any run, ``_`` one character,
    ``escape`` makes the next character literal; None or '' means no escape character)."""
    out, i = ["(?s)^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 == len(pattern):
                raise ExpressionError("LIKE pattern must not end with escape character")
            ch = pattern[i + 1]
            out.append("\\" + ch if ch in _REGEX_META else ch)
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else ("\\" + ch if ch in _REGEX_META else ch))
        i += 1
    out.append("$")
    return "".join(out)


class Like(Expr):
    """``arg [NOT] LIKE pattern [ESCAPE e]`` (``ignore_case``: ILIKE); the pattern is a
    constant (None: NULL). The default escape character is a backslash, as in Postgres."""

    def __init__(self, arg: Expr, pattern: str | None, negated: bool = False, ignore_case: bool = False,
                 escape: str | None = "\\"):
        if arg.data_type != DataType.VARCHAR:
            raise ExpressionError(f"LIKE needs a VARCHAR operand, got {arg.data_type.sql_name()}", self)
        if escape is not None and len(escape) > 1:
            raise ExpressionError("invalid escape string: it must be empty or one character")
        self.arg, self.pattern, self.negated, self.ignore_case = arg, pattern, negated, ignore_case
        self.escape = escape
        self.data_type = DataType.BOOLEAN
        self._regex = None if pattern is None else like_regex(pattern, escape)

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        value = self.arg.evaluate(columns)
        if self.pattern is None or self.escape is None:
            return pa.scalar(None, pa.bool_())
        if self.escape == "\\":   # Arrow's LIKE (its escape is a backslash) has fast paths
            out = _wrap(lambda: pc.match_like(value, self.pattern, ignore_case=self.ignore_case), self)
        else:
            out = _wrap(lambda: pc.match_substring_regex(value, self._regex, ignore_case=self.ignore_case), self)
        return pc.invert(out) if self.negated else out

    def __str__(self) -> str:
        op = ("NOT " if self.negated else "") + ("ILIKE" if self.ignore_case else "LIKE")
        esc = "" if self.escape == "\\" else f" ESCAPE {self.escape!r}"
        return f"({self.arg} {op} {self.pattern!r}{esc})"
