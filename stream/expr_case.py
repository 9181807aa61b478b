"""``CASE WHEN c1 THEN v1 ... [ELSE e] END``: :class:`Case`.

Lazy, as Postgres' CASE is: a branch's value is evaluated only on the rows that take it (the
first branch whose condition is TRUE; NULL counts as not TRUE), so
``CASE WHEN b <> 0 THEN a / b END`` never divides by zero. Each branch sees a narrowed copy of
the columns it reads (:func:`_take`; the others are NULL placeholders never read), and the
pieces are put back in row order at the end. With no array column (all constants) only the
taken branch is evaluated and the result is a scalar. Every value (and ``ELSE``) must already
have the CASE's type and every condition must be BOOLEAN; the binder inserts the casts.

Callers: the facade :mod:`stream.expr` (the SQL binder imports from there).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType
from stream.errors import ExpressionError
from stream.expr_base import Expr
from stream.expr_base import require_bool as _require_bool
from stream.expr_errors import chunk_len as _chunk_len
from stream.expr_errors import is_array as _is_array


def _take(columns, rows, refs):
    """The ``rows`` of the columns an expression reads (``refs``); the others become NULL
    placeholders of the new length (never read)."""
    idx = pa.array(rows, pa.int64())
    return [c.take(idx) if i in refs and _is_array(c) else pa.nulls(len(rows))
            for i, c in enumerate(columns)]


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

    def evaluate(self, columns):
        n = _chunk_len(columns)
        if n is None:   # all constants: only the taken branch is evaluated
            for cond, value in self.whens:
                c = cond.evaluate(columns)
                if c.is_valid and c.as_py():
                    return value.evaluate(columns)
            return self.else_.evaluate(columns) if self.else_ is not None else pa.scalar(None, arrow_type(self.data_type))
        t = arrow_type(self.data_type)
        refs = self.column_refs()
        rows, cols = np.arange(n), columns
        where, parts = [], []
        for cond, value in self.whens:
            if not len(rows):
                break
            taken = pc.fill_null(cond.eval(cols, len(rows)), False).to_numpy(zero_copy_only=False)
            if taken.all():
                where.append(rows)
                parts.append(value.eval(cols, len(rows)))
                rows = rows[:0]
                break
            if taken.any():
                sel = np.flatnonzero(taken)
                where.append(rows[sel])
                parts.append(value.eval(_take(cols, sel, refs), len(sel)))
                keep = np.flatnonzero(~taken)
                rows, cols = rows[keep], _take(cols, keep, refs)
        if len(rows):
            where.append(rows)
            parts.append(self.else_.eval(cols, len(rows)) if self.else_ is not None else pa.nulls(len(rows), t))
        parts = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in parts]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return pa.nulls(0, t)
        return pa.concat_arrays(parts).take(pa.array(np.argsort(np.concatenate(where), kind="stable")))

    def __str__(self) -> str:
        body = " ".join(f"WHEN {c} THEN {v}" for c, v in self.whens)
        return f"(CASE {body}{'' if self.else_ is None else f' ELSE {self.else_}'} END)"
