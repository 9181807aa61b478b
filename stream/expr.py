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

from relational.arrow import _to_arrow_value, arrow_type
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
        self._scalar = pa.scalar(None if self.value is None else _to_arrow_value(self.value, data_type),
                                 type=arrow_type(data_type))

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


def _text_to_text(ts):
    return ts[0] if ts[0] == DataType.VARCHAR else None


def _as_double(arg, columns):
    return _cast_to(arg._eval(columns), arg.data_type, DataType.DOUBLE, arg)


def _func_substr(args, columns):   # substr(s, start [, count]), 1-based like Postgres
    value = args[0]._eval(columns)
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
    return pc.replace_substring(args[0]._eval(columns), pattern.value, repl.value)


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
    "substr": (_func_substr, lambda ts: ts[0] if ts[0] == DataType.VARCHAR and all(t.kind in _INTS for t in ts[1:])
               else None, (2, 3)),
    "trim": (lambda a, c: pc.utf8_trim_whitespace(a[0]._eval(c)), _text_to_text, (1, 1)),
    "ltrim": (lambda a, c: pc.utf8_ltrim_whitespace(a[0]._eval(c)), _text_to_text, (1, 1)),
    "rtrim": (lambda a, c: pc.utf8_rtrim_whitespace(a[0]._eval(c)), _text_to_text, (1, 1)),
    "replace": (_func_replace, lambda ts: ts[0] if all(t == DataType.VARCHAR for t in ts) else None, (3, 3)),
    "ceil": (lambda a, c: pc.ceil(a[0]._eval(c)), lambda ts: DataType.DOUBLE if ts[0].kind in _FLOATS else None,
             (1, 1)),
    "floor": (lambda a, c: pc.floor(a[0]._eval(c)), lambda ts: DataType.DOUBLE if ts[0].kind in _FLOATS else None,
              (1, 1)),
    "sqrt": (lambda a, c: pc.sqrt(_as_double(a[0], c)), lambda ts: DataType.DOUBLE if is_numeric(ts[0]) else None,
             (1, 1)),
    "power": (lambda a, c: pc.power(_as_double(a[0], c), _as_double(a[1], c)),
              lambda ts: DataType.DOUBLE if all(is_numeric(t) for t in ts) else None, (2, 2)),
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


def _length_of(columns, values) -> int | None:
    for v in list(values) + list(columns):
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            return len(v)
    return None


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

    def _eval(self, columns):
        conds = [c._eval(columns) for c, _ in self.whens]
        values = [v._eval(columns) for _, v in self.whens]
        other = self.else_._eval(columns) if self.else_ is not None else pa.scalar(None, arrow_type(self.data_type))
        n = _length_of(columns, conds + values + [other])
        if n is None:   # all constants
            for cond, value in zip(conds, values):
                if cond.is_valid and cond.as_py():
                    return value
            return other
        def arr(v, t):
            return pa.repeat(v, n) if isinstance(v, pa.Scalar) and v.is_valid else \
                (pa.nulls(n, t) if isinstance(v, pa.Scalar) else v)
        conds = [pc.fill_null(arr(c, pa.bool_()), False) for c in conds]
        t = arrow_type(self.data_type)
        return _wrap(pc.case_when, self, pa.StructArray.from_arrays(conds, [f"c{i}" for i in range(len(conds))]),
                     *[arr(v, t) for v in values], arr(other, t))

    def __str__(self) -> str:
        body = " ".join(f"WHEN {c} THEN {v}" for c, v in self.whens)
        return f"(CASE {body}{'' if self.else_ is None else f' ELSE {self.else_}'} END)"


class Like(Expr):
    """``arg [NOT] LIKE pattern`` (``ignore_case``: ILIKE); the pattern is a constant."""

    def __init__(self, arg: Expr, pattern: str | None, negated: bool = False, ignore_case: bool = False):
        if arg.data_type != DataType.VARCHAR:
            raise ExpressionError(f"LIKE needs a VARCHAR operand, got {arg.data_type.sql_name()}", self)
        self.arg, self.pattern, self.negated, self.ignore_case = arg, pattern, negated, ignore_case
        self.data_type = DataType.BOOLEAN

    def children(self) -> tuple:
        return (self.arg,)

    def _eval(self, columns):
        value = self.arg._eval(columns)
        if self.pattern is None:
            return pa.scalar(None, pa.bool_())
        out = _wrap(lambda: pc.match_like(value, self.pattern, ignore_case=self.ignore_case), self)
        return pc.invert(out) if self.negated else out

    def __str__(self) -> str:
        op = ("NOT " if self.negated else "") + ("ILIKE" if self.ignore_case else "LIKE")
        return f"({self.arg} {op} {self.pattern!r})"
