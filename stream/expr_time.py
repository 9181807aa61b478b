"""Date/time arithmetic for :mod:`stream.expr` trees (Postgres semantics, UTC as the only zone).

:class:`TimeArith` is ``left + right`` / ``left - right`` where one side is a date, time stamp
or interval:

===============================================  ==============================================
``timestamp[tz] +/- interval``, ``interval + timestamp[tz]``   the time stamp's type
``date +/- interval``, ``interval + date``        TIMESTAMP (the date at midnight, shifted)
``date +/- integer``, ``integer + date``          DATE (whole days)
``date - date``                                   INT (days)
``timestamp[tz] - timestamp[tz]``                 INTERVAL (days and microseconds, no months)
``interval +/- interval``                         INTERVAL (field by field)
===============================================  ==============================================

An interval is applied as Postgres applies it: months first (the day clamped to the month's
length: Jan 31 + 1 month = Feb 28/29), then days, then microseconds. NULL in, NULL out; a result
outside the type's range raises ``ExpressionError``. A constant interval without months (the
usual ``ts - INTERVAL '10' SECOND``) is one Arrow kernel; anything else goes row by row in
Python.

Callers: :mod:`sql.bind.expr` (``+``/``-`` when an operand is temporal, :func:`is_temporal`);
window queries such as Nexmark q7 (``date_time BETWEEN w - INTERVAL '10' SECOND AND w``).
"""

from __future__ import annotations

import calendar
import datetime

import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.errors import ExpressionError
from stream.expr_base import Expr
from stream.expr_errors import guarded

_TS = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
_MIN_US, _MAX_US = -62_135_596_800_000_000, 253_402_300_799_999_999   # 0001-01-01 .. 9999-12-31 23:59:59.999999
_INTS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
_TEMPORAL = _TS + (TypeKind.DATE, TypeKind.INTERVAL)
_DAY_US = 86_400_000_000
_DATETIME = (TypeKind.DATE, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)   # in Postgres' implicit cast order


def is_temporal(*types: DataType) -> bool:
    """Whether ``+``/``-`` over operands of ``types`` is date/time arithmetic (a :class:`TimeArith`)."""
    return any(t.kind in _TEMPORAL for t in types)


class TimeArith(Expr):
    """``left op right`` for ``op`` in ``+ -`` over temporal operands (module docstring)."""

    def __init__(self, op: str, left: Expr, right: Expr):
        self.op, self.left, self.right = op, left, right
        if op not in ("+", "-"):
            raise ExpressionError(f"operator {op} is not defined on {left.data_type.sql_name()} and "
                                  f"{right.data_type.sql_name()}", self)
        self.sign = 1 if op == "+" else -1
        lk, rk = left.data_type.kind, right.data_type.kind
        plus = op == "+"
        if not plus and lk != rk and lk in _DATETIME and rk in _DATETIME:
            # timestamptz - timestamp, date - timestamp, ...: Postgres casts the lower one up
            # (date -> timestamp -> timestamptz, the session zone being UTC) and subtracts
            from stream.expr_cast import Cast
            to = max(left.data_type, right.data_type, key=lambda t: _DATETIME.index(t.kind))
            left, right = (e if e.data_type == to else Cast(e, to) for e in (left, right))
            self.left, self.right = left, right
            lk = rk = to.kind
        if lk in _TS + (TypeKind.DATE,) and rk == TypeKind.INTERVAL:
            self.mode, self.swap = "shift", False
        elif plus and lk == TypeKind.INTERVAL and rk in _TS + (TypeKind.DATE,):
            self.mode, self.swap = "shift", True
        elif lk == TypeKind.DATE and rk in _INTS:
            self.mode, self.swap = "days", False
        elif plus and lk in _INTS and rk == TypeKind.DATE:
            self.mode, self.swap = "days", True
        elif not plus and lk == rk == TypeKind.DATE:
            self.mode, self.swap = "date_diff", False
        elif not plus and lk in _TS and rk in _TS and lk == rk:
            self.mode, self.swap = "ts_diff", False
        elif lk == rk == TypeKind.INTERVAL:
            self.mode, self.swap = "interval", False
        else:
            raise ExpressionError(f"operator {op} is not defined on {left.data_type.sql_name()} and "
                                  f"{right.data_type.sql_name()}", self)
        base = (right if self.swap else left).data_type
        self.data_type = {"shift": DataType.TIMESTAMP if base.kind == TypeKind.DATE else base,
                          "days": DataType.DATE, "date_diff": DataType.INT, "ts_diff": DataType.INTERVAL,
                          "interval": DataType.INTERVAL}[self.mode]

    def children(self) -> tuple:
        return self.left, self.right

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"

    def evaluate(self, columns):   # a row out of range: NULL in a stream, an error in strict mode
        return guarded(self, columns, self._compute)

    def _compute(self, columns):
        a, b = self.left.evaluate(columns), self.right.evaluate(columns)
        base, other = (b, a) if self.swap else (a, b)
        try:
            fast = self._fast(base, other)
            if fast is not None:
                return fast
            return self._rows(base, other)
        except (pa.ArrowInvalid, OverflowError, ValueError) as exc:
            raise ExpressionError(f"{self.data_type.sql_name()} out of range: {exc}", self) from exc

    def _fast(self, base, other):
        """One Arrow kernel for a column shifted by a constant interval without months."""
        if self.mode != "shift" or not isinstance(other, pa.Scalar) or isinstance(base, pa.Scalar):
            return None
        if not other.is_valid:
            return pa.nulls(len(base), arrow_type(self.data_type))
        iv = other.as_py()
        if iv.months:
            return None
        delta = pa.scalar(self.sign * (iv.days * _DAY_US + iv.nanoseconds // 1000), pa.duration("us"))
        if pa.types.is_date32(base.type):
            base = pc.cast(base, pa.timestamp("us"))
        out = pc.add_checked(base, delta)
        lo, hi = pc.min_max(pc.cast(out, pa.int64())).values()
        if lo.is_valid and (lo.as_py() < _MIN_US or hi.as_py() > _MAX_US):   # Python datetime's range
            raise OverflowError("date value out of range")
        return out

    def _rows(self, base, other):
        n = next((len(v) for v in (base, other) if not isinstance(v, pa.Scalar)), None)
        xs, ys = (_values(v, n) for v in (base, other))
        out = [None if x is None or y is None else self._one(x, y) for x, y in zip(xs, ys)]
        if n is None:
            return pa.scalar(out[0], arrow_type(self.data_type))
        return pa.array(out, arrow_type(self.data_type))

    def _one(self, x, y):
        s = self.sign
        if self.mode == "shift":
            if not isinstance(x, datetime.datetime):
                x = datetime.datetime(x.year, x.month, x.day)
            return add_interval(x, s * y.months, s * y.days, s * (y.nanoseconds // 1000))
        if self.mode == "days":
            return x + datetime.timedelta(days=s * y)
        if self.mode == "date_diff":
            return (x - y).days
        if self.mode == "ts_diff":
            us = (x - y) // datetime.timedelta(microseconds=1)
            days = int(us / _DAY_US)   # toward zero, as Postgres splits an interval
            return pa.MonthDayNano([0, days, (us - days * _DAY_US) * 1000])
        return pa.MonthDayNano([x.months + s * y.months, x.days + s * y.days, x.nanoseconds + s * y.nanoseconds])


def add_interval(at: datetime.datetime, months: int, days: int, usecs: int) -> datetime.datetime:
    """``at`` plus an interval, Postgres's way: months (day clamped), then days, then microseconds."""
    if months:
        total = at.year * 12 + at.month - 1 + months
        year, month = divmod(total, 12)
        month += 1
        at = at.replace(year=year, month=month, day=min(at.day, calendar.monthrange(year, month)[1]))
    return at + datetime.timedelta(days=days, microseconds=usecs)


def _values(v, n):
    if isinstance(v, pa.Scalar):
        return [v.as_py()] * (n or 1)
    return v.to_pylist()
