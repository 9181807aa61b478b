"""The expression protocol and its leaves: :class:`Expr`, :class:`Col`, :class:`Lit`, and the
numeric typing rules every operator node shares.

:class:`Expr` defines evaluation in two public steps (its docstring): ``evaluate(columns)``,
which each node implements and parents call on their children, returning an Arrow array or a
scalar standing for every row; and ``eval(columns, n)``, the broadcasting wrapper executors
call. A node's ``data_type`` is fixed at construction; evaluation never changes it.

Numeric typing (Postgres): SMALLINT < INT < BIGINT < DECIMAL; any REAL/DOUBLE operand makes
DOUBLE (REAL with REAL stays REAL) -- :func:`common_numeric`. ``INTS`` (kind -> rank),
``FLOATS`` and ``DECIMAL`` are the kind sets the operator modules test against.

Invariant: this module imports no other ``stream.expr_*`` node module, so every node module can
import it without a cycle.

Callers: every node module (:mod:`stream.expr_cast`, :mod:`stream.expr_ops`,
:mod:`stream.expr_funcs`, :mod:`stream.expr_case`, :mod:`stream.expr_like`,
:mod:`stream.expr_time`); everyone else imports these names from the facade :mod:`stream.expr`.
"""

from __future__ import annotations

import pyarrow as pa

from relational.arrow import _to_arrow_value, arrow_type
from relational.types import DataType, TypeKind
from stream.errors import ExpressionError

# Kind sets the operator modules test operand types against (INTS maps a kind to its width rank).
INTS = {TypeKind.SMALLINT: 0, TypeKind.INT: 1, TypeKind.BIGINT: 2}
FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
DECIMAL = TypeKind.DECIMAL
_INT_BY_RANK = [DataType.SMALLINT, DataType.INT, DataType.BIGINT]


def is_numeric(t: DataType) -> bool:
    """Whether ``t`` is an integer, float or DECIMAL type (operands of ``+ - * / %``)."""
    return t.kind in INTS or t.kind in FLOATS or t.kind == DECIMAL


def common_numeric(a: DataType, b: DataType) -> DataType | None:
    """The type both operands widen to, or None when one is not numeric (module docstring)."""
    if not (is_numeric(a) and is_numeric(b)):
        return None
    if a.kind in FLOATS or b.kind in FLOATS:
        return DataType.REAL if a.kind == b.kind == TypeKind.REAL else DataType.DOUBLE
    if DECIMAL in (a.kind, b.kind):
        return DataType.DECIMAL
    return _INT_BY_RANK[max(INTS[a.kind], INTS[b.kind])]


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
        if self.data_type.kind in _SQL_TEXT:   # an error names TIMESTAMP '2024-01-01 00:00:00', not a Python repr
            return f"{self.data_type.sql_name()} '{self.value}'"
        return str(self.value) if self.data_type.kind == DECIMAL else repr(self.value)


_SQL_TEXT = (TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.INTERVAL)


def require_bool(expr: Expr, parent) -> None:
    """Raise ``ExpressionError`` (naming ``parent``) unless ``expr`` is BOOLEAN."""
    if expr.data_type != DataType.BOOLEAN:
        raise ExpressionError(f"needs a BOOLEAN operand, got {expr.data_type.sql_name()} {expr}", parent)
