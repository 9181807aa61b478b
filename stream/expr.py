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
- Integer arithmetic is checked: an overflow raises ``ExpressionError``; ``/`` on integers
  truncates toward zero; ``%`` has the dividend's sign. Division or remainder by zero gives
  NULL, for floats too (as RisingWave's streaming engine does, which logs the error and emits NULL; Postgres
  raises) so that one bad row does not stop a materialized view.
- Mixed numeric operands widen: SMALLINT < INT < BIGINT; any REAL/DOUBLE makes DOUBLE (REAL
  with REAL stays REAL). DECIMAL (stored as text in Arrow) is not computable here yet.
- A cast from REAL/DOUBLE to an integer rounds half away from zero, like Postgres.
Evaluation never loops in Python over rows: every node is one or a few Arrow kernels.

Callers: :mod:`stream.executors.project`, :mod:`stream.executors.filter`, sql's planner.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.errors import ExpressionError

_INTS = {TypeKind.SMALLINT: 0, TypeKind.INT: 1, TypeKind.BIGINT: 2}
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_INT_BY_RANK = [DataType.SMALLINT, DataType.INT, DataType.BIGINT]


def is_numeric(t: DataType) -> bool:
    return t.kind in _INTS or t.kind in _FLOATS


def common_numeric(a: DataType, b: DataType) -> DataType | None:
    """The type both operands widen to, or None when one is not numeric (module docstring)."""
    if not (is_numeric(a) and is_numeric(b)):
        return None
    if a.kind in _FLOATS or b.kind in _FLOATS:
        return DataType.REAL if a.kind == b.kind == TypeKind.REAL else DataType.DOUBLE
    return _INT_BY_RANK[max(_INTS[a.kind], _INTS[b.kind])]


def _wrap(fn, expr, *args):
    try:
        return fn(*args)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ExpressionError(str(exc), expr) from exc


class Expr:
    """A typed expression. ``eval(columns, n)`` returns an Arrow array of ``n`` values of
    ``arrow_type(self.data_type)``; ``columns`` are a chunk's columns (all rows, visible or not)."""

    data_type: DataType

    def eval(self, columns, n: int) -> pa.Array:
        out = self._eval(columns)
        if isinstance(out, pa.Scalar):
            return pa.repeat(out, n) if out.is_valid else pa.nulls(n, arrow_type(self.data_type))
        return out

    def eval_chunk(self, chunk) -> pa.Array:
        return self.eval(chunk.columns, len(chunk))

    def _eval(self, columns):   # -> pa.Array or pa.Scalar
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

    def _eval(self, columns):
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
        self._scalar = pa.scalar(self.value, type=arrow_type(data_type))

    def _eval(self, columns):
        return self._scalar

    def __str__(self) -> str:
        return "NULL" if self.value is None else repr(self.value)


def _cast_to(value, source: DataType, target: DataType, expr):
    if source == target:
        return value
    if source.kind in _FLOATS and target.kind in _INTS:
        value = _wrap(pc.round, expr, value, 0, "half_towards_infinity")
    return _wrap(pc.cast, expr, value, arrow_type(target), True)


class Arith(Expr):
    """``left op right`` for ``op`` in ``+ - * / %`` over numeric operands."""

    _KERNELS = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked,
                "/": pc.divide_checked, "%": pc.remainder_checked}

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

    def _eval(self, columns):
        left = _cast_to(self.left._eval(columns), self.left.data_type, self.data_type, self)
        right = _cast_to(self.right._eval(columns), self.right.data_type, self.data_type, self)
        if self.op in ("/", "%") and not self._nonzero_divisor:   # division by zero: NULL (module docstring)
            zero = pc.equal(right, pa.scalar(0, right.type))
            right = pc.if_else(zero, pa.scalar(None, right.type), right)
        return _wrap(self._KERNELS[self.op], self, left, right)

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

    def _eval(self, columns):
        left = _cast_to(self.left._eval(columns), self.left.data_type, self._common, self)
        right = _cast_to(self.right._eval(columns), self.right.data_type, self._common, self)
        return _wrap(self._KERNELS[self.op], self, left, right)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


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

    def _eval(self, columns):
        out = self.args[0]._eval(columns)
        for a in self.args[1:]:
            out = pc.and_kleene(out, a._eval(columns))
        return out

    def __str__(self) -> str:
        return "(" + " AND ".join(map(str, self.args)) + ")"


class Or(And):
    """Three-valued OR of one or more BOOLEAN operands."""

    def _eval(self, columns):
        out = self.args[0]._eval(columns)
        for a in self.args[1:]:
            out = pc.or_kleene(out, a._eval(columns))
        return out

    def __str__(self) -> str:
        return "(" + " OR ".join(map(str, self.args)) + ")"


class Not(Expr):
    def __init__(self, arg: Expr):
        self.arg, self.data_type = arg, DataType.BOOLEAN
        _require_bool(arg, self)

    def children(self) -> tuple:
        return (self.arg,)

    def _eval(self, columns):
        return pc.invert(self.arg._eval(columns))

    def __str__(self) -> str:
        return f"(NOT {self.arg})"


class IsNull(Expr):
    """``arg IS NULL`` (``negated``: IS NOT NULL); never NULL itself."""

    def __init__(self, arg: Expr, negated: bool = False):
        self.arg, self.negated, self.data_type = arg, negated, DataType.BOOLEAN

    def children(self) -> tuple:
        return (self.arg,)

    def _eval(self, columns):
        value = self.arg._eval(columns)
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

    def children(self) -> tuple:
        return (self.arg,)

    def _eval(self, columns):
        return _cast_to(self.arg._eval(columns), self.arg.data_type, self.data_type, self)

    def __str__(self) -> str:
        return f"CAST({self.arg} AS {self.data_type.sql_name()})"


def _func_abs(args, columns):
    return pc.abs_checked(args[0]._eval(columns))


def _func_round(args, columns):
    return pc.round(args[0]._eval(columns), 0, "half_towards_infinity")


def _func_coalesce(args, columns):
    return pc.coalesce(*(a._eval(columns) for a in args))


def _func_concat(args, columns):   # Postgres concat(): NULL arguments are skipped
    values = [pc.fill_null(_as_text(a, columns), "") for a in args]
    return pc.binary_join_element_wise(*values, "")


def _as_text(arg, columns):
    value = arg._eval(columns)
    return value if arg.data_type == DataType.VARCHAR else pc.cast(value, pa.string())


_FUNCS = {
    # name: (implementation, result type from the argument types, (min args, max args))
    "abs": (_func_abs, lambda ts: ts[0] if is_numeric(ts[0]) else None, (1, 1)),
    "round": (_func_round, lambda ts: ts[0] if ts[0].kind in _FLOATS else None, (1, 1)),
    "lower": (lambda a, c: pc.utf8_lower(a[0]._eval(c)), lambda ts: ts[0] if ts[0] == DataType.VARCHAR else None,
              (1, 1)),
    "upper": (lambda a, c: pc.utf8_upper(a[0]._eval(c)), lambda ts: ts[0] if ts[0] == DataType.VARCHAR else None,
              (1, 1)),
    "length": (lambda a, c: pc.cast(pc.utf8_length(a[0]._eval(c)), pa.int32()),
               lambda ts: DataType.INT if ts[0] == DataType.VARCHAR else None, (1, 1)),
    "coalesce": (_func_coalesce, lambda ts: ts[0] if all(t == ts[0] for t in ts) else None, (1, None)),
    "concat": (_func_concat, lambda ts: DataType.VARCHAR, (1, None)),
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

    def _eval(self, columns):
        return _wrap(self._impl, self, self.args, columns)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"
