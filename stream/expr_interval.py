"""INTERVAL comparison, negation and scaling on Arrow ``month_day_nano_interval`` columns (Postgres
semantics), which Arrow has no kernels for.

Postgres compares intervals by their span with a month of 30 days and a day of 24 hours
(``interval_cmp_value``): ``INTERVAL '1 mon' = INTERVAL '30 days'`` is true and
``INTERVAL '1 day' = INTERVAL '24 hours'`` too, as :class:`relational.types.Interval` compares.
The span needs up to ~83 bits, so :func:`sort_key` splits it into two int64 numbers that order
lexicographically like the span: whole days (``months*30 + days + floor(usecs / 1 day)``) and
the microseconds left in the day (``0 <= r < 1 day``). Everything is vectorized with numpy over
the array's data buffer (16 bytes a value: int32 months, int32 days, int64 nanoseconds).

Negation (``-interval``) negates each field, as Postgres' ``interval_um``; a field that does
not fit (``-(-2147483648 months)``) is a data error "interval out of range".

Multiplication and division by a number (:class:`IntervalScale`) follow Postgres'
``interval_mul``/``interval_div`` step by step in double precision.

Callers: :mod:`stream.expr_ops` (``Cmp`` over INTERVAL operands), :class:`Negate` and
:class:`IntervalScale` via the facade :mod:`stream.expr` (the SQL binder's unary minus, ``*``
and ``/`` on an interval).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType, TypeKind
from stream.errors import ExpressionError
from stream.expr_base import Expr
from stream.expr_errors import guarded

_DAY_US = 86_400_000_000
_INT32_MIN = -(1 << 31)
_LAYOUT = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])
_OPS = {"=": np.equal, "<>": np.not_equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
        ">": np.greater, ">=": np.greater_equal}


def _fields(value) -> tuple:
    """``(array, months, days, usecs)`` of an interval array or scalar (numpy int64 arrays)."""
    if isinstance(value, pa.Scalar):
        value = pa.array([value.as_py() if value.is_valid else None], pa.month_day_nano_interval())
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    return (value, *interval_fields(value))


def interval_fields(array: pa.Array) -> tuple:
    """``(months, days, usecs)`` int64 numpy arrays of a month_day_nano array (NULL rows hold
    arbitrary numbers: callers mask or weight them)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    data = array.buffers()[1]
    if data is None:   # an all-NULL array may have no data buffer
        raw = np.zeros(len(array), dtype=_LAYOUT)
    else:
        raw = np.frombuffer(data, dtype=_LAYOUT, count=array.offset + len(array))[array.offset:]
    return raw["months"].astype(np.int64), raw["days"].astype(np.int64), raw["nanos"] // 1000


def sort_key(value) -> tuple:
    """``(days, usecs_in_day)`` int64 arrays ordering like Postgres' interval order (module
    docstring); NULL rows hold arbitrary numbers (callers mask them)."""
    _, months, days, usecs = _fields(value)
    carry, rest = np.divmod(usecs, _DAY_US)
    return months * 30 + days + carry, rest


def compare(op: str, left, right):
    """``left op right`` for two interval arrays/scalars: a boolean array (a scalar when both
    are scalars); NULL where either side is NULL."""
    (ld, lr), (rd, rr) = sort_key(left), sort_key(right)
    cmp = np.where(ld != rd, np.sign(ld - rd), np.sign(lr - rr))   # broadcasts a 1-row side
    out = _OPS[op](cmp, 0)
    if isinstance(left, pa.Scalar) and isinstance(right, pa.Scalar):
        return pa.scalar(bool(out[0]) if left.is_valid and right.is_valid else None, pa.bool_())
    n = len(out)
    return pa.array(out, pa.bool_(), mask=~(_valid(left, n) & _valid(right, n)))


def _valid(v, n: int) -> np.ndarray:
    if isinstance(v, pa.Scalar):
        return np.full(n, v.is_valid)
    return np.asarray(pc.is_valid(v).to_numpy(zero_copy_only=False), dtype=bool)


class Negate(Expr):
    """``-arg`` for an INTERVAL ``arg``: every field negated (module docstring)."""

    def __init__(self, arg: Expr):
        if arg.data_type.kind != TypeKind.INTERVAL:
            raise ExpressionError(f"unary minus on INTERVAL only, got {arg.data_type.sql_name()}", self)
        self.arg, self.data_type = arg, DataType.INTERVAL

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        return guarded(self, columns, self._compute)

    def _compute(self, columns):
        value = self.arg.evaluate(columns)
        array, months, days, usecs = _fields(value)
        valid = _valid(array, len(array))
        if (valid & ((months == _INT32_MIN) | (days == _INT32_MIN))).any():
            raise ExpressionError("interval out of range", self)
        out = np.zeros(len(array), dtype=_LAYOUT)
        out["months"] = np.where(valid, -months, 0)
        out["days"] = np.where(valid, -days, 0)
        out["nanos"] = np.where(valid, -usecs * 1000, 0)   # |usecs| < 2**63 / 1000: always fits
        bitmap = None if array.null_count == 0 else pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())
        result = pa.Array.from_buffers(pa.month_day_nano_interval(), len(array),
                                       [bitmap, pa.py_buffer(out.tobytes())], null_count=array.null_count)
        return result[0] if isinstance(value, pa.Scalar) else result

    def __str__(self) -> str:
        return f"(- {self.arg})"


class IntervalScale(Expr):
    """``interval * number``, ``number * interval`` or ``interval / number`` (Postgres'
    ``interval_mul``/``interval_div``, the number taken as DOUBLE): each field is scaled and
    truncated toward zero, the fraction of the months cascading into days (30 a month) and of
    the days into time, rounded to the microsecond as Postgres does in double precision. A
    field that does not fit is "interval out of range", ``/ 0`` "division by zero" -- data
    errors. Row by row in Python (an Interval is three integers; Arrow has no kernel)."""

    def __init__(self, op: str, left: Expr, right: Expr):
        lk, rk = left.data_type.kind, right.data_type.kind
        numeric = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DECIMAL, TypeKind.REAL, TypeKind.DOUBLE)
        self.op, self.left, self.right, self.data_type = op, left, right, DataType.INTERVAL
        if lk == TypeKind.INTERVAL and rk in numeric and op in ("*", "/"):
            self.span, self.factor = left, right
        elif op == "*" and lk in numeric and rk == TypeKind.INTERVAL:
            self.span, self.factor = right, left
        else:
            raise ExpressionError(f"operator {op} is not defined on {left.data_type.sql_name()} and "
                                  f"{right.data_type.sql_name()}", self)

    def children(self) -> tuple:
        return self.left, self.right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def evaluate(self, columns):
        return guarded(self, columns, self._compute)

    def _compute(self, columns):
        from stream.expr_cast import cast_to   # expr_cast imports this module's neighbours only
        span = self.span.evaluate(columns)
        factor = cast_to(self.factor.evaluate(columns), self.factor.data_type, DataType.DOUBLE, self)
        scalar = isinstance(span, pa.Scalar) and isinstance(factor, pa.Scalar)
        n = next((len(v) for v in (span, factor) if not isinstance(v, pa.Scalar)), 1)
        spans = [span.as_py()] * n if isinstance(span, pa.Scalar) else span.to_pylist()
        factors = [factor.as_py()] * n if isinstance(factor, pa.Scalar) else factor.to_pylist()
        out = []
        for iv, f in zip(spans, factors):
            if iv is None or f is None:
                out.append(None)
                continue
            if self.op == "/" and f == 0:
                raise ExpressionError("division by zero", self)
            months, days, usecs = scale_interval(iv.months, iv.days, iv.nanoseconds // 1000, f, self.op == "/")
            out.append(pa.MonthDayNano([months, days, usecs * 1000]))
        if scalar:
            return pa.scalar(out[0], pa.month_day_nano_interval())
        return pa.array(out, pa.month_day_nano_interval())


def _tsround(x: float) -> float:
    return round(x * 1_000_000.0) / 1_000_000.0   # Postgres' TSROUND: rint to microseconds


def scale_interval(months: int, days: int, usecs: int, factor: float, divide: bool) -> tuple:
    """``(months, days, usecs) * factor`` (``/ factor`` when ``divide``) exactly as Postgres'
    ``interval_mul``/``interval_div`` compute it in double precision; ValueError when a field
    does not fit."""
    def scaled(v):
        return v / factor if divide else v * factor
    m, d = scaled(months), scaled(days)
    for v in (m, d):
        if v != v or not -2147483648.0 <= v < 2147483648.0:   # FLOAT8_FITS_IN_INT32
            raise ValueError("interval out of range")
    rm, rd = int(m), int(d)   # C's (int32) cast: toward zero
    month_days = _tsround((m - rm) * 30.0)
    sec = _tsround((d - rd + month_days - int(month_days)) * 86400.0)
    if abs(sec) >= 86400.0:
        rd += int(sec / 86400.0)
        sec -= int(sec / 86400.0) * 86400.0
    rd += int(month_days)
    total = scaled(usecs) + sec * 1_000_000.0
    t = round(total) if math.isfinite(total) else None   # rint
    # Postgres' int64 limit, and ours: Arrow keeps nanoseconds in an int64
    if t is None or not -(1 << 31) <= rd < (1 << 31) or not -(1 << 63) // 1000 < t < (1 << 63) // 1000:
        raise ValueError("interval out of range")
    return rm, rd, t
