"""Scalar functions: :class:`Func` and its table ``_FUNCS`` (``abs``, ``round``, ``ceil``,
``floor``, ``sqrt``, ``power``, ``lower``, ``upper``, ``length``, ``trim``/``ltrim``/``rtrim``,
``substr``, ``replace``, ``coalesce``, ``concat``), plus the row-by-row Postgres functions of
:mod:`stream.expr_pg` (``trunc``, ``ln``, trigonometry, ``greatest``/``least``, ``split_part``,
``lpad``, ``regexp_replace``, ``date_trunc``, ``extract``, ``to_char``, ``make_date``, ``age``...).

Each ``_FUNCS`` entry is ``name: (implementation, result type from the argument types, (min
args, max args))``; a name that is not there, a wrong argument count or argument types the
entry's typing function rejects (returns None) raise ``ExpressionError`` at construction. An
implementation takes the argument nodes and the columns and returns an Arrow array or scalar
(the :meth:`stream.expr_base.Expr.evaluate` contract). NULL in, NULL out, except ``coalesce``
and ``concat`` (which skips NULLs, as Postgres does). DECIMAL arguments go row by row through
:mod:`stream.decimal_ops`; ``sqrt`` of a negative number and ``power``'s undefined cases are
data errors (:mod:`stream.expr_errors`), not NaN.

Adding a function: one ``_FUNCS`` entry here plus the sqlglot class in ``sql/bind/expr.py``
(which checks names against ``stream.expr._FUNCS``).

Callers: the facade :mod:`stream.expr` (the SQL binder and tests import from there).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType, TypeKind
from stream import decimal_ops as D
from stream.errors import ExpressionError
from stream.expr_base import DECIMAL as _DECIMAL
from stream.expr_base import FLOATS as _FLOATS
from stream.expr_base import INTS as _INTS
from stream.expr_base import Expr, Lit, is_numeric
from stream.expr_cast import cast_to as _cast_to
from stream.expr_errors import data_error
from stream.expr_errors import guarded as _guarded
from stream.expr_errors import wrap as _wrap
from stream.expr_float import result_range
from stream.expr_array import FUNCS as _ARRAY_FUNCS
from stream.expr_jsonb import FUNCS as _JSONB_FUNCS
from stream.expr_pg import FUNCS as _PG_FUNCS


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
    return pc.round(_as_double(args[0], columns), 0, "half_to_even")   # Postgres' dround is rint()


def _round_type(ts):   # Postgres: round(real) is round(double precision)
    if len(ts) == 2:
        return DataType.DECIMAL if ts[0].kind == _DECIMAL and ts[1].kind in _INTS else None
    return DataType.DOUBLE if ts[0].kind in _FLOATS else (ts[0] if ts[0].kind == _DECIMAL else None)


def _ceil_floor(kernel, fn):
    def run(args, columns):
        if args[0].data_type.kind == _DECIMAL:
            return _decimal_func(fn)(args, columns)
        return kernel(_as_double(args[0], columns))   # ceil(integer/real) is ceil(double precision)
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
    return result_range(what, pc.power(x, y), x, y)   # Postgres: overflow/underflow are errors


def _func_coalesce(args, columns):
    return pc.coalesce(*(a.evaluate(columns) for a in args))


def _func_concat(args, columns):   # Postgres concat(): NULL arguments are skipped
    values = [pc.fill_null(_as_text(a, columns), "") for a in args]
    return pc.binary_join_element_wise(*values, "")


def _as_text(arg, columns):
    value = arg.evaluate(columns)
    if arg.data_type == DataType.VARCHAR:
        return value
    if arg.data_type == DataType.BOOLEAN:   # Postgres' boolout (t / f), not the ::text cast (true / false)
        return pc.if_else(value, pa.scalar("t"), pa.scalar("f"))
    if arg.data_type.kind in _FLOATS or arg.data_type.kind in _TEXT_CASTS:   # Postgres' output, as ::text
        return _cast_to(value, arg.data_type, DataType.VARCHAR, arg)
    return pc.cast(value, pa.string())


_TEXT_CASTS = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.TIME, TypeKind.INTERVAL, TypeKind.DECIMAL)


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


def _trimmer(kernel):
    """``trim``/``ltrim``/``rtrim(s [, characters])`` as Postgres' btrim/ltrim/rtrim: strip the
    longest run made only of ``characters`` (default a space -- not other whitespace) from both
    ends, the start or the end. ``characters`` must be a constant (the binder checks)."""
    def trim(args, columns):
        chars = " "
        if len(args) == 2:
            if not isinstance(args[1], Lit):
                raise ExpressionError("trim needs constant characters")
            if args[1].value is None:
                return pa.scalar(None, pa.string())
            chars = args[1].value
        value = args[0].evaluate(columns)
        return kernel(value, characters=chars) if chars else value
    return trim


def _trim_type(ts):
    return ts[0] if all(t == DataType.VARCHAR for t in ts) else None


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
    "trim": (_trimmer(pc.utf8_trim), _trim_type, (1, 2)),
    "ltrim": (_trimmer(pc.utf8_ltrim), _trim_type, (1, 2)),
    "rtrim": (_trimmer(pc.utf8_rtrim), _trim_type, (1, 2)),
    "replace": (_func_replace, lambda ts: ts[0] if all(t == DataType.VARCHAR for t in ts) else None, (3, 3)),
    "ceil": (_ceil_floor(pc.ceil, D.ceil), _ceil_floor_type, (1, 1)),
    "floor": (_ceil_floor(pc.floor, D.floor), _ceil_floor_type, (1, 1)),
    "sqrt": (_func_sqrt, lambda ts: DataType.DOUBLE if is_numeric(ts[0]) else None, (1, 1)),
    "power": (_func_power, lambda ts: DataType.DOUBLE if all(is_numeric(t) for t in ts) else None, (2, 2)),
}
_FUNCS.update(_PG_FUNCS)   # math, text and date/time functions computed row by row (stream/expr_pg.py)
_FUNCS.update(_JSONB_FUNCS)   # JSONB operators and functions (stream/expr_jsonb.py)
_FUNCS.update(_ARRAY_FUNCS)   # array functions (stream/expr_array.py)


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
            raise ExpressionError(f"function {name.split(' ')[0]}("   # an internal name: its SQL function's
                                  f"{', '.join(a.data_type.sql_name().lower() for a in args)}) does not exist", self)

    def children(self) -> tuple:
        return self.args

    def evaluate(self, columns):
        return _guarded(self, columns, self._compute)

    def _compute(self, columns):
        return _wrap(self._impl, self, self.args, columns)

    def __str__(self) -> str:
        if not self.name[:1].isalpha() and len(self.args) == 2:   # an operator's entry (j -> 'a': expr_jsonb)
            return f"({self.args[0]} {self.name} {self.args[1]})"
        return f"{self.name}({', '.join(map(str, self.args))})"
