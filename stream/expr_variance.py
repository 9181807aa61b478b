"""The final step of ``stddev``/``variance`` in a materialized view: :class:`VarianceFinal`
computes ``var_samp``/``var_pop``/``stddev_samp``/``stddev_pop`` from three aggregate outputs
of the same argument, ``sum(x)``, ``sum(x * x)`` and ``count(x)``, which HashAgg/SimpleAgg
maintain incrementally (the planner's rewrite, as RisingWave does it; sql/bind/select.py).

Semantics are Postgres' and the batch path's (sql/batch/execute.py uses :func:`variance_value`
for NUMERIC too, so both agree digit for digit): NULL for no value, and for one value in the
sample forms; DOUBLE for float input: ``(n*sumsq - sum^2) / (n*(n-1))`` (``n*n`` for the
population forms), clamped at 0 (float rounding can make it slightly negative; Postgres'
algorithm never returns a negative variance), NaN when a NaN or an infinity is among the values
(then ``sum`` or ``sum(x*x)`` is NaN or infinite); DECIMAL for integer and NUMERIC input, exact
in a 60-digit context, rounded to 20 decimal places and normalized as the batch path does, NaN
when a value is NaN or infinite. A float sum that overflowed (NULL, a counted data error of the
aggregate) gives NULL.

Evaluation is row by row in Python: it runs on an aggregate's output, one row per changed group.

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


def variance_value(kind: str, n: int, total, sumsq, floats: bool):
    """One group's ``kind`` from ``n`` non-NULL values whose sum is ``total`` and whose sum of
    squares is ``sumsq`` (module docstring)."""
    sample = kind in ("var_samp", "stddev_samp")
    if not n or (sample and n == 1) or total is None or sumsq is None:
        return None
    den = n * (n - 1) if sample else n * n
    if floats:
        total, sumsq = float(total), float(sumsq)
        if math.isnan(total) or math.isinf(total) or math.isnan(sumsq) or math.isinf(sumsq):
            return math.nan
        var = max((n * sumsq - total * total) / den, 0.0)
        return math.sqrt(var) if kind.startswith("stddev") else var
    with decimal.localcontext(_EXACT):
        total, sumsq = decimal.Decimal(total), decimal.Decimal(sumsq)
        if not (total.is_finite() and sumsq.is_finite()):
            return decimal.Decimal("NaN")
        var = (n * sumsq - total * total) / den
        if var < 0:
            var = decimal.Decimal(0)
        out = var.sqrt() if kind.startswith("stddev") else var
        return out.quantize(_SCALE).normalize() if out else decimal.Decimal(0)


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
