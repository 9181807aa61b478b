"""Casts between expression types: :class:`Cast` (``CAST(x AS t)``) and :func:`cast_to`, the
conversion every operator node applies to widen its operands to a common type.

Rules (Postgres): a cast from REAL/DOUBLE to an integer rounds half to even (C's ``rint``, as
Postgres' ``dtoi4``), from DECIMAL half away from zero (``numeric_int4``); an integer to
REAL/DOUBLE rounds to the nearest float (``2^53 + 1`` becomes ``2^53``); a value that does
not fit the target is a data error (raised inside ``raising_errors``, NULL and
counted in a stream: :mod:`stream.expr_errors`). DECIMAL (NUMERIC) values are exact decimal text
(:mod:`stream.decimal_ops`): casts to and from them go through Python decimals row by row,
except DECIMAL -> REAL/DOUBLE (Arrow parses the text, correctly rounded) and DECIMAL ->
VARCHAR of plain values (the stored text already is Postgres' output). DECIMAL casts only to
and from integers, floats and VARCHAR; :class:`Cast` rejects the rest at construction. VARCHAR
and INTERVAL cast both ways as Postgres reads and prints intervals (:mod:`stream.interval_text`).

Invariant: ``cast_to(v, t, t, ...)`` returns ``v`` itself; array in, array out; scalar in,
scalar out.

Callers: :mod:`stream.expr_ops` (Arith, Cmp operands), :mod:`stream.expr_funcs` (arguments
taken as DOUBLE), and through the facade :mod:`stream.expr`, the SQL binder (``Cast``).
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType, Interval, TypeKind
from stream import decimal_ops as D
from stream import decimal_vec as V
from stream.errors import ExpressionError
from stream.expr_base import DECIMAL as _DECIMAL
from stream.expr_base import FLOATS as _FLOATS
from stream.expr_base import INTS as _INTS
from stream.expr_base import Expr, Lit
from stream.expr_errors import ARROW_ERRORS as _ARROW_ERRORS
from stream.expr_errors import data_error
from stream.expr_errors import guarded as _guarded
from stream.expr_errors import wrap as _wrap
from stream.expr_float import null_where, result_range
from stream import expr_jsonb as _jsonb
from stream.interval_text import format_interval, parse_interval

_CLOCKS = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.TIME)


def float_text(f: float, real: bool = False) -> str:
    """A double (``real``: a REAL) as Postgres' float8out / float4out print it: the shortest
    digits that read back to the same value, in exponent form (``1e-05``, ``1.5e+15``) when
    the decimal exponent is below -4 or at least 15 (6 for REAL), else plain (``100``,
    ``0.0001``); ``NaN``, ``Infinity``, ``-Infinity``."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Infinity" if f > 0 else "-Infinity"
    sci = np.format_float_scientific(np.float32(f) if real else np.float64(f), unique=True, trim="-")
    mantissa, exponent = sci.split("e")
    exp10 = int(exponent)
    if exp10 < -4 or exp10 >= (6 if real else 15):
        return f"{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    point = exp10 + 1   # digits before the decimal point
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return sign + text


def _clock_text(value, source: DataType):
    """TIMESTAMP / TIMESTAMPTZ / TIME as Postgres prints them: the fraction of a second without
    trailing zeros (none when zero), a TIMESTAMPTZ in UTC with ``+00``."""
    text = pc.cast(value, pa.string())
    text = pc.replace_substring_regex(text, r"Z$", "")
    text = pc.replace_substring_regex(text, r"\.0+$", "")
    text = pc.replace_substring_regex(text, r"(\.\d*?)0+$", r"\1")
    if source.kind == TypeKind.TIMESTAMPTZ:
        text = pc.binary_join_element_wise(text, "+00", "")
    return text


@functools.cache
def _bool_words() -> tuple[pa.Array, pa.Array]:
    """boolin's words, any case, surrounding blanks ignored, and their unambiguous prefixes:
    (true, false). Made on first use: ``pa.array`` asks pyarrow whether pandas is installed,
    which imports pandas (~0.25 s) -- at import time that was on the path of every
    ``sql.connect`` (bench.startup)."""
    return (pa.array(["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"]),
            pa.array(["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"]))


def _text_bool(value, expr):
    """VARCHAR -> BOOLEAN as Postgres' boolin reads text; anything else is 'invalid input
    syntax for type boolean'."""
    word = pc.utf8_lower(pc.utf8_trim_whitespace(value))
    true_words, false_words = _bool_words()
    true, false = pc.is_in(word, value_set=true_words), pc.is_in(word, value_set=false_words)
    bad = pc.and_(pc.invert(pc.or_(true, false)), pc.is_valid(word))
    if isinstance(bad, pa.Scalar):
        if bad.as_py():
            raise ExpressionError(f'invalid input syntax for type boolean: "{value.as_py()}"', expr)
        return pa.scalar(None, pa.bool_()) if not value.is_valid else true
    if pc.any(bad).as_py():
        first = value.filter(bad)[0].as_py()
        raise ExpressionError(f'invalid input syntax for type boolean: "{first}"', expr)
    return pc.if_else(pc.is_valid(word), true, pa.scalar(None, pa.bool_()))


def _text_time(value, expr):
    """VARCHAR -> TIME (``HH:MM[:SS[.ffffff]]``, surrounding blanks ignored): read as the time of
    day of 1970-01-01 by Arrow's ISO 8601 parser (Arrow has no string -> time64 cast); text it
    cannot read is Postgres' 'invalid input syntax for type time' (Postgres reads more forms, e.g.
    ``7:05 PM``, refused here with that error)."""
    text = pc.replace_substring_regex(pc.utf8_trim_whitespace(value), r"^(\d):", r"0\1:")   # 7:05 -> 07:05
    try:
        stamp = pc.cast(pc.binary_join_element_wise("1970-01-01 ", text, ""), pa.timestamp("us"))
    except _ARROW_ERRORS as exc:
        bad = re.search(r"'1970-01-01 (.*)' as a scalar", str(exc), re.S)
        shown = ""
        if bad is not None:   # the row as written (the parser saw it trimmed and padded)
            if isinstance(value, pa.Scalar):
                shown = f': "{value.as_py()}"'
            else:
                at = pc.index(text, bad.group(1)).as_py()
                shown = f': "{value[at].as_py() if at >= 0 else bad.group(1)}"'
        raise ExpressionError(f"invalid input syntax for type time{shown}", expr) from exc
    return pc.cast(stamp, pa.time64("us"))


def cast_to(value, source: DataType, target: DataType, expr):
    """``value`` (array or scalar of ``source``) as ``target``; a value that does not fit is a
    data error (module docstring)."""
    if source == target:
        return value
    if TypeKind.JSONB in (source.kind, target.kind):   # Postgres' jsonb casts (stream/expr_jsonb.py)
        return _jsonb.cast_jsonb(value, source, target, expr)
    if TypeKind.LIST in (source.kind, target.kind):   # arrays: stream/expr_array.py (imports this module)
        from stream.expr_array import cast_array
        return cast_array(value, source, target, expr)
    if source.kind == _DECIMAL or target.kind == _DECIMAL:
        return _decimal_cast(value, source, target, expr)
    if source.kind in _FLOATS and target.kind in _INTS:   # Postgres: rint(), half to even
        return _float_to_int(value, target, expr)
    if source.kind in _INTS and target.kind in _FLOATS:   # rounds to nearest above 2**53 (24 for REAL)
        return _wrap(pc.cast, expr, value, arrow_type(target), False)
    if TypeKind.INTERVAL in (source.kind, target.kind) and TypeKind.VARCHAR in (source.kind, target.kind):
        return _interval_text(value, target, expr)
    if source.kind in _CLOCKS and target.kind == TypeKind.VARCHAR:
        return _clock_text(value, source)
    if source.kind in _FLOATS and target.kind == TypeKind.VARCHAR:
        scalar = isinstance(value, pa.Scalar)
        floats = [value.as_py()] if scalar else value.to_pylist()
        real = source.kind == TypeKind.REAL
        out = [None if f is None else float_text(f, real) for f in floats]
        return pa.scalar(out[0], pa.string()) if scalar else pa.array(out, pa.string())
    if source.kind == TypeKind.VARCHAR and target.kind in _FLOATS:   # float8in: out of range is an error
        name = "real" if target.kind == TypeKind.REAL else "double precision"
        try:
            out = pc.cast(pc.utf8_trim_whitespace(value), arrow_type(target))
        except _ARROW_ERRORS as exc:
            raise ExpressionError(f"invalid input syntax for type {name}", expr) from exc
        message = f"value out of range for type {name}"
        out = null_where(expr, out, pc.and_(pc.is_inf(out), pc.invert(pc.match_substring_regex(
            value, _INF_TEXT, ignore_case=True))), message)
        return null_where(expr, out, pc.and_(pc.equal(out, 0), pc.match_substring_regex(value, _NONZERO_FLOAT)), message)
    if source.kind == TypeKind.VARCHAR and target.kind == TypeKind.TIME:
        return _text_time(value, expr)
    if source.kind == TypeKind.VARCHAR and target.kind == TypeKind.BOOLEAN:
        return _text_bool(value, expr)
    if source.kind == TypeKind.DOUBLE and target.kind == TypeKind.REAL:   # float8_to_float4's checks
        return result_range(expr, _wrap(pc.cast, expr, value, pa.float32(), False), value)
    return _wrap(pc.cast, expr, value, arrow_type(target), True)


# built from buffers: pa.array() of Python objects imports pandas when it is installed (0.25 s)
_INFINITIES = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(np.array([0, 8, 17], np.int32)),
                                                     pa.py_buffer(b"Infinity-Infinity")])
_NONZERO = r"^[-+]?[0.]*[1-9]"   # the text of a non-zero NUMERIC
_NONZERO_FLOAT = r"^\s*[-+]?[0.]*[1-9]"   # float text whose mantissa is not zero
_INF_TEXT = r"^\s*[-+]?inf(inity)?\s*$"
_FLOAT_INT_LIMITS = {   # [lo, hi): the doubles whose rint() fits (2**63 itself does not fit a bigint)
    TypeKind.SMALLINT: (-32768.5, 32767.5), TypeKind.INT: (-2147483648.5, 2147483647.5),
    TypeKind.BIGINT: (-9223372036854775808.0, 9223372036854775808.0)}
_INT_NAMES = {TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer", TypeKind.BIGINT: "bigint"}


def _float_to_int(value, target: DataType, expr):
    """REAL/DOUBLE to an integer type as Postgres' ``dtoi4``: round half to even, then a range
    check ("integer out of range", also for NaN and +-Infinity)."""
    rounded = pc.round(value, 0, "half_to_even")
    lo, hi = _FLOAT_INT_LIMITS[target.kind]
    ok = pc.and_(pc.greater_equal(rounded, lo), pc.less(rounded, hi))   # NaN compares false
    rounded = null_where(expr, rounded, pc.invert(pc.fill_null(ok, True)), f"{_INT_NAMES[target.kind]} out of range")
    return _wrap(pc.cast, expr, rounded, arrow_type(target), False)


def _interval_text(value, target: DataType, expr):
    """VARCHAR -> INTERVAL (Postgres' ``interval_in``; text that does not read is a data error)
    or INTERVAL -> VARCHAR (``interval_out``), row by row (:mod:`stream.interval_text`)."""
    scalar = isinstance(value, pa.Scalar)
    values = [value.as_py()] if scalar else value.to_pylist()
    out, failed, message = [], 0, None
    for v in values:
        if v is None:
            out.append(None)
        elif target.kind == TypeKind.VARCHAR:
            out.append(format_interval(Interval(v.months, v.days, v.nanoseconds // 1000)))
        else:
            try:
                iv = parse_interval(v)
                out.append(pa.MonthDayNano([iv.months, iv.days, iv.usecs * 1000]))
            except ValueError as exc:   # IntervalOutOfRange is one too
                out.append(None)
                failed += 1
                message = message or str(exc)
    if failed:
        data_error(expr, message, failed)   # raises in strict mode
    return pa.scalar(out[0], arrow_type(target)) if scalar else pa.array(out, arrow_type(target))


def decimal_rows(expr, fn, values, scalar: bool, n=None):
    """``fn`` over decoded rows; failed rows are data errors (raise or NULL)."""
    out, message, failed = D.map_rows(fn, values, n)
    if failed:
        data_error(expr, message, failed)
    return out


def _decimal_cast(value, source: DataType, target: DataType, expr):
    kind = target.kind
    if source.kind == _DECIMAL and kind in _FLOATS:   # Arrow parses the text, correctly rounded
        try:
            out = pc.cast(value, arrow_type(target))
        except _ARROW_ERRORS:
            pass
        else:   # Postgres: a value beyond the float's range is an error, not +-Infinity or 0
            message = f"numeric value out of range for type {'real' if kind == TypeKind.REAL else 'double precision'}"
            out = null_where(expr, out, pc.and_(pc.is_inf(out), pc.invert(pc.is_in(value, _INFINITIES))), message)
            return null_where(expr, out, pc.and_(pc.equal(out, 0), pc.match_substring_regex(value, _NONZERO)), message)
    if source.kind == _DECIMAL and kind == TypeKind.VARCHAR and V.is_plain(value):
        return value   # the stored text is already Postgres' output
    if source.kind == _DECIMAL:
        values, scalar = D.decode(value)
        if kind in _INTS:
            out = decimal_rows(expr, lambda d: D.to_int(d, target.kind.name), [values], scalar)
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
        return D.encode(decimal_rows(expr, D.from_text, [texts], scalar), scalar)
    raise ExpressionError(f"cannot cast {source.sql_name()} to NUMERIC", expr)


def _truncate(value, n: int):
    """Text values cut to their first ``n`` characters (``CAST(x AS VARCHAR(n))``)."""
    if isinstance(value, pa.Scalar):
        text = value.as_py()
        return pa.scalar(None if text is None else text[:n], value.type)
    return pc.utf8_slice_codeunits(value, 0, n)


class Cast(Expr):
    """``CAST(arg AS data_type)``; a value that does not fit raises ``ExpressionError``.
    ``typmod``: ``(precision, scale)`` of a cast to ``NUMERIC(p, s)``, whose result is rounded
    and range-checked as Postgres does (:mod:`stream.numeric_typmod`); ``(n,)`` of a cast to
    ``VARCHAR(n)``, which truncates to ``n`` characters as Postgres' explicit cast does."""

    def __init__(self, arg: Expr, data_type: DataType, typmod: tuple | None = None):
        self.arg, self.data_type = arg, data_type
        self.typmod = tuple(typmod) if typmod is not None and data_type.kind in (_DECIMAL, TypeKind.VARCHAR) \
            else None   # (precision, scale) of NUMERIC(p, s); (n,) of VARCHAR(n)
        array_cast = TypeKind.LIST in (arg.data_type.kind, data_type.kind) and \
            {arg.data_type.kind, data_type.kind} <= {TypeKind.LIST, TypeKind.VARCHAR}   # stream/expr_array.py
        if data_type.kind in (TypeKind.STRUCT, TypeKind.LIST) and arg.data_type != data_type and not array_cast:
            raise ExpressionError(f"cannot cast {arg.data_type.sql_name()} to {data_type.sql_name()}", self)
        kinds = {arg.data_type.kind, data_type.kind}
        if TypeKind.JSONB in kinds and arg.data_type != data_type and not _jsonb.can_cast(arg.data_type, data_type):
            raise ExpressionError(f"cannot cast type {_jsonb.pg_name(arg.data_type)} to {_jsonb.pg_name(data_type)}",
                                  self)
        if _DECIMAL in kinds and not kinds <= {_DECIMAL, TypeKind.VARCHAR, TypeKind.JSONB, *_INTS, *_FLOATS}:
            raise ExpressionError(f"cannot cast {arg.data_type.sql_name()} to {data_type.sql_name()}", self)
        # a cast of a non-NULL numeric literal to a numeric type is one value: kept once computed
        # (``0.908::float8`` through the NUMERIC path costs ~0.4 ms a chunk); a failed cast is
        # never kept, so every chunk still raises or counts its data error
        self._foldable = isinstance(arg, Lit) and arg.value is not None and kinds <= {_DECIMAL, *_INTS, *_FLOATS}
        self._folded = None

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        if self._folded is not None:
            return self._folded
        out = _guarded(self, columns, self._compute)
        if self._foldable and isinstance(out, pa.Scalar) and out.is_valid:
            self._folded = out
        return out

    def _compute(self, columns):
        out = cast_to(self.arg.evaluate(columns), self.arg.data_type, self.data_type, self)
        if self.typmod is None:
            return out
        if self.data_type.kind == TypeKind.VARCHAR:   # an explicit cast to varchar(n) truncates, as Postgres
            return _truncate(out, self.typmod[0])
        from stream.numeric_typmod import apply_column
        out, message, failed = apply_column(out, *self.typmod)
        if failed:
            data_error(self, message, failed)   # raises in strict mode; NULLs in a stream
        return out

    def __str__(self) -> str:
        if self.typmod is not None and len(self.typmod) == 1:
            return f"CAST({self.arg} AS VARCHAR({self.typmod[0]}))"
        if self.typmod is not None:
            return f"CAST({self.arg} AS NUMERIC({self.typmod[0]}, {self.typmod[1]}))"
        return f"CAST({self.arg} AS {self.data_type.sql_name()})"
