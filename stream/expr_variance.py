"""The final step of ``stddev``/``variance`` in a materialized view: :class:`VarianceFinal`
computes ``var_samp``/``var_pop``/``stddev_samp``/``stddev_pop`` from three aggregate outputs
of the same argument, ``sum(x)``, ``sum(x * x)`` and ``count(x)``, which HashAgg/SimpleAgg
maintain incrementally (the planner's rewrite, as RisingWave does it; sql/bind/select.py).

Semantics are Postgres' and the batch path's (sql/batch/execute.py uses :func:`variance_value`
for NUMERIC too, so both agree digit for digit): NULL for no value, and for one value in the
sample forms; ``(n*sumsq - sum^2) / (n*(n-1))`` (``n*n`` for the population forms); DECIMAL
for integer and NUMERIC input, exact in a 60-digit context, rounded to 20 decimal places and
normalized as the batch path does; DOUBLE for float input, NaN when a NaN or an infinity is
among the values (then ``sum`` or ``sum(x*x)`` is NaN or infinite).

Float input is summed exactly: :class:`ExactDecimal` turns each double into the NUMERIC of its
exact binary value (and its exact square), so the sums are exact and never overflow, and the
final value is the correctly rounded double of the exact variance. Float sums instead (as
RisingWave keeps them) cancel catastrophically: the sample variance of 1e9, 1e9, 1e9 + 1 would
come out 0, not 1/3. A result is still clamped at 0 (Postgres' algorithm never returns a
negative variance). The batch path's two-pass float sum may differ in the last bits.

Evaluation is row by row in Python: :class:`VarianceFinal` runs on an aggregate's output, one
row per changed group; :class:`ExactDecimal` on the input rows (float variance in MVs only).

Callers: the binder (MV aggregates), :mod:`sql.batch.execute` (:func:`variance_value`).
"""

from __future__ import annotations

import decimal
import math

import pyarrow as pa

from relational.arrow import to_arrow, to_pylist
from relational.types import DataType
from stream.expr_base import Expr

KINDS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
_EXACT = decimal.Context(prec=60)
_SCALE = decimal.Decimal(1).scaleb(-20)
# exact products of exact binary fractions (a double is at most ~770 significant digits)
_UNLIMITED = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_FLOAT_DIV = decimal.Context(prec=40)


def variance_value(kind: str, n: int, total, sumsq, floats: bool):
    """One group's ``kind`` from ``n`` non-NULL values whose sum is ``total`` and whose sum of
    squares is ``sumsq``, both exact NUMERICs (module docstring); a DOUBLE when ``floats``."""
    sample = kind in ("var_samp", "stddev_samp")
    if not n or (sample and n == 1) or total is None or sumsq is None:
        return None
    den = n * (n - 1) if sample else n * n
    if floats:
        total, sumsq = decimal.Decimal(total), decimal.Decimal(sumsq)
        if not (total.is_finite() and sumsq.is_finite()):
            return math.nan
        num = _UNLIMITED.subtract(_UNLIMITED.multiply(n, sumsq), _UNLIMITED.multiply(total, total))
        var = max(_FLOAT_DIV.divide(num, den), decimal.Decimal(0))
        return float(_FLOAT_DIV.sqrt(var)) if kind.startswith("stddev") else float(var)
    with decimal.localcontext(_EXACT):
        total, sumsq = decimal.Decimal(total), decimal.Decimal(sumsq)
        if not (total.is_finite() and sumsq.is_finite()):
            return decimal.Decimal("NaN")
        var = (n * sumsq - total * total) / den
        if var < 0:
            var = decimal.Decimal(0)
        out = var.sqrt() if kind.startswith("stddev") else var
        return out.quantize(_SCALE).normalize() if out else decimal.Decimal(0)


class ExactDecimal(Expr):
    """A DOUBLE ``arg`` as the NUMERIC of its exact binary value (NaN and +-Infinity as
    NUMERIC's), or that value's exact square with ``square`` (module docstring)."""

    def __init__(self, arg: Expr, square: bool = False):
        assert arg.data_type == DataType.DOUBLE, arg.data_type
        self.arg, self.square, self.data_type = arg, square, DataType.DECIMAL

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        n = next((len(c) for c in columns if not isinstance(c, pa.Scalar)), 1)
        out = []
        for v in to_pylist(self.arg.eval(columns, n), DataType.DOUBLE):
            if v is None:
                out.append(None)
                continue
            d = decimal.Decimal(v)   # exact (NaN, Infinity too)
            out.append(_UNLIMITED.multiply(d, d) if self.square and d.is_finite() else
                       (decimal.Decimal("Infinity") if self.square and d.is_infinite() else d))
        return to_arrow(out, DataType.DECIMAL)

    def __str__(self) -> str:
        return f"({self.arg})::numeric{' ^ 2' if self.square else ''} /* exact */"


class VarianceFinal(Expr):
    """``kind`` over the columns ``total`` (sum), ``sumsq`` (sum of squares) and ``count``:
    DOUBLE when ``floats``, else DECIMAL."""

    def __init__(self, kind: str, total: Expr, sumsq: Expr, count: Expr, floats: bool):
        assert kind in KINDS, kind
        self.kind, self.total, self.sumsq, self.count, self.floats = kind, total, sumsq, count, floats
        self.data_type = DataType.DOUBLE if floats else DataType.DECIMAL

    def children(self) -> tuple:
        return self.total, self.sumsq, self.count

    def evaluate(self, columns):
        n = next((len(c) for c in columns if not isinstance(c, pa.Scalar)), 1)
        parts = [to_pylist(child.eval(columns, n), child.data_type) for child in self.children()]
        values = [variance_value(self.kind, c or 0, t, s, self.floats) for t, s, c in zip(*parts)]
        return to_arrow(values, self.data_type)

    def __str__(self) -> str:
        return f"{self.kind}({self.total}, {self.sumsq}, {self.count})"
