"""``= <> < <= > >=`` between two JSONB values in Postgres' jsonb order: :class:`JsonbCmp`.

A subclass of :class:`stream.expr_ops.Cmp`, so the planner's rules about comparisons apply to it,
while evaluation goes row by row through :func:`stream.expr_jsonb.compare` (``'1.0'::jsonb = '1'`` is true; objects
compare by pair count, then key and value in stored order...). Kept apart from
:mod:`stream.expr_jsonb` because :mod:`stream.expr_cast` imports that module and
:mod:`stream.expr_ops` imports :mod:`stream.expr_cast`.

An equality between two JSONB expressions of a join's two sides (or an ``IN`` / correlated
subquery's probe and value) is a hash key only through :func:`equality_key`: the memcomparable
bytes of a JSONB value keep each number's scale (GROUP BY keeps ``1`` and ``1.0`` apart), so the
join hashes on the value with every number at its least scale instead, whose bytes are equal
exactly when the values are ``=``.

Callers: :mod:`sql.bind.expr` (``_cmp`` of two JSONB operands); :func:`equality_key`:
:mod:`sql.bind.select` (join keys), :mod:`sql.bind.subquery` / :mod:`sql.bind.correlated`
(semi/anti-join keys).
"""

from __future__ import annotations

from relational.types import DataType
from stream.errors import ExpressionError
from stream.expr_errors import guarded as _guarded
from stream.expr_jsonb import compare
from stream.expr_funcs import Func
from stream.expr_ops import Cmp
from stream.expr_pg import rowwise

_OPS = {"=": lambda c: c == 0, "<>": lambda c: c != 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
        ">": lambda c: c > 0, ">=": lambda c: c >= 0}


class JsonbCmp(Cmp):
    """``left op right`` of two JSONB operands in Postgres' jsonb order (``1.0 = 1``)."""

    def __init__(self, op: str, left, right):   # noqa: D107 (Cmp's checks do not apply: no Arrow kernel)
        if op not in _OPS:
            raise ExpressionError(f"unknown comparison {op!r}")
        if left.data_type != DataType.JSONB or right.data_type != DataType.JSONB:
            raise ExpressionError("JsonbCmp compares two JSONB operands", self)
        self.op, self.left, self.right, self.data_type = op, left, right, DataType.BOOLEAN
        self._common = DataType.JSONB

    def children(self) -> tuple:
        return (self.left, self.right)

    def evaluate(self, columns):
        return _guarded(self, columns, self._compute)

    def _compute(self, columns):
        test = _OPS[self.op]

        def cmp(a, b):
            return test(compare(a, b))
        cmp.__name__ = "jsonb_compare"
        return rowwise(cmp, lambda ts: DataType.BOOLEAN)([self.left, self.right], columns)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


def equality_key(expr):
    """The hash-join key standing for ``expr`` in an equality: ``expr`` itself, or for a JSONB
    expression its value with numbers at their least scale (``jsonb join key``), so the key
    matches ``1`` with ``1.0`` as ``=`` does. The joined rows keep their own values."""
    if expr.data_type != DataType.JSONB:
        return expr
    return Func("jsonb join key", expr)
