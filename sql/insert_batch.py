"""The columnar fast path of ``executemany("INSERT INTO t VALUES ($1, $2, ...)", rows)``.

Job: when every item of the INSERT's VALUES tuples is a parameter (``%s`` / ``$n``), the
statement is a template: bind it once (target columns, their types), then turn the parameter
sets into Arrow columns a column at a time instead of binding each set as its own statement
(which costs ~50 us a row in sqlglot and the binder).

Invariant: the fast path gives exactly what binding each parameter set would give, or nothing.
A column is taken as is only when every value already has its type's canonical Python type
(``int`` in range for integers, ``float``/``int`` for floats, ``str`` encodable as UTF-8 for
VARCHAR, ``bool`` for BOOLEAN) and no primary-key value is NULL; anything else (a string for a
date, a Decimal, an out-of-range int, a NULL key) makes :func:`build_insert_chunks` return None,
and the caller binds row by row, which converts or raises the exact per-row error. A column the
statement leaves out takes its DEFAULT (:mod:`sql.defaults`, evaluated once for all the rows of
the statement), else NULL. NUMERIC(p, s) typmods and NOT NULL columns are checked on the chunks
this builds, as on every DML write (``sql.column_checks`` via ``write_chunks``).

Callers: :func:`sql.statements.insert_many` only.
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from relational.arrow import to_arrow
from relational.state_table import OP_INSERT
from relational.types import DataType, TypeKind
from stream.chunk import StreamChunk
from stream.schema import Schema

CHUNK_ROWS = 4096
_INT_RANGES = {TypeKind.SMALLINT: (-(1 << 15), (1 << 15) - 1), TypeKind.INT: (-(1 << 31), (1 << 31) - 1),
               TypeKind.BIGINT: (-(1 << 63), (1 << 63) - 1)}


def parameter_slots(values: exp.Values, width: int) -> list[list[int]] | None:
    """For each VALUES tuple, the 0-based parameter index of each item; None unless every item
    is a ``$n`` parameter and every tuple has ``width`` items."""
    slots = []
    for tup in values.expressions:
        items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
        if len(items) != width:
            return None
        row = []
        for item in items:
            if not (isinstance(item, exp.Parameter) and item.this is not None and item.this.name.isdigit()):
                return None
            row.append(int(item.this.name) - 1)
        slots.append(row)
    return slots


def build_insert_chunks(rel, cols: list[str], slots: list[list[int]], seq_of_params) -> list[StreamChunk] | None:
    """Chunks of inserts for ``seq_of_params`` through the template (``cols`` named in the
    statement, ``slots`` from :func:`parameter_slots`); None when a value needs the row path."""
    n_params = max((max(row) for row in slots), default=-1) + 1
    if not seq_of_params or min(map(len, seq_of_params)) < n_params:
        return None
    by_param = list(zip(*seq_of_params))  # one tuple per parameter position, built in C
    visible = rel.visible_columns
    if len(visible) + bool(rel.row_id) != len(rel.desc.columns):
        return None
    position = {c: i for i, c in enumerate(cols)}
    n_rows = len(seq_of_params) * len(slots)
    columns = []
    for i, (name, dtype) in enumerate(visible):
        if name not in position:
            if rel.default_of(i) is not None:   # its DEFAULT, evaluated for the statement (sql/defaults.py)
                from sql.defaults import default_columns
                values = default_columns(rel, [i], n_rows)[i]
                if i in rel.pk_indices and not rel.row_id and any(v is None for v in values):
                    return None
                columns.append(values)
                continue
            if i in rel.pk_indices and not rel.row_id:
                return None  # a NULL key: the row path raises the exact error
            columns.append([None] * n_rows)
            continue
        at = position[name]
        if len(slots) == 1:
            values = list(by_param[slots[0][at]])
        else:  # several tuples per parameter set: rows interleave set by set
            values = [v for vs in zip(*(by_param[row[at]] for row in slots)) for v in vs]
        values = _canonical(values, dtype, nullable=not (i in rel.pk_indices and not rel.row_id))
        if values is None:
            return None
        columns.append(values)
    if rel.row_id:
        columns.append([None] * n_rows)
    schema = Schema(list(rel.desc.columns))
    arrays = [to_arrow(v, t) for v, (_, t) in zip(columns, rel.desc.columns)]
    chunks = []
    for at in range(0, n_rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, n_rows - at)
        chunk = StreamChunk(np.full(n, OP_INSERT, np.int8), [a.slice(at, n) for a in arrays], schema)
        chunk.validate()
        chunks.append(chunk)
    return chunks


def _canonical(values: list, dtype: DataType, nullable: bool) -> list | None:
    """``values`` unchanged when each is already canonical for ``dtype`` (floats: ints become
    floats), else None."""
    present = [v for v in values if v is not None]
    if len(present) != len(values) and not nullable:
        return None
    kinds = set(map(type, present))
    kind = dtype.kind
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        if not kinds <= {int} or (present and not (lo <= min(present) and max(present) <= hi)):
            return None
        return values
    if kind == TypeKind.DOUBLE:
        if kinds <= {float}:
            return values
        if kinds <= {float, int}:
            try:
                return [None if v is None else float(v) for v in values]
            except OverflowError:
                return None
        return None
    if kind == TypeKind.VARCHAR:
        if not kinds <= {str}:
            return None
        try:
            "".join(present).encode("utf-8")
        except UnicodeEncodeError:
            return None
        return values
    if kind == TypeKind.BOOLEAN:
        return values if kinds <= {bool} else None
    return None
