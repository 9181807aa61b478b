"""Column constraints every write into a table passes: ``NUMERIC(p, s)`` / ``VARCHAR(n)`` typmods and ``NOT NULL``.

Job: :func:`check_columns` takes the Arrow columns of rows about to be written into a table (its
full width: visible columns, then the hidden ``_row_id``) and returns them with each
``NUMERIC(p, s)`` column rounded to its scale (:mod:`stream.numeric_typmod`: half away from zero,
``numeric field overflow`` beyond the precision, Infinity refused, NaN kept), and refuses a NULL
in a ``NOT NULL`` column with Postgres' message (``null value in column "c" of relation "t"
violates not-null constraint``); a ``VARCHAR(n)`` column refuses a longer value (``value too
long for type character varying(n)``) unless the excess is spaces, which are cut off, as
Postgres; all are :class:`~sql.errors.ExecutionError`.
:func:`check_chunks` does it to the chunks of one DML statement, all of them before the first
is written, so a refused statement writes nothing.

Where it runs (every path passes exactly one of these): ``sql.statements.write_chunks`` (INSERT
VALUES / SELECT, executemany, UPDATE, DELETE, ``insert_arrow``, COPY's dataflow path), COPY's
bulk-load path (``sql.copy``) and ALTER TABLE ... ADD COLUMN's fill value (``sql.alter``).
A deleted row (``-`` / ``U-``) is the stored row: only rows written (``+`` / ``U+``) are checked
for NULLs; rounding is idempotent on stored values.

Invariant: a table without typmods and NOT NULL columns (``Relation.checked`` False) is not
touched: its chunks pass through as the same objects, lazily.

Callers: :mod:`sql.statements`, :mod:`sql.copy`, :mod:`sql.alter`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream.chunk import DELETE, UPDATE_DELETE, StreamChunk
from stream.numeric_typmod import apply_column

from sql.errors import ExecutionError


def not_null_error(rel, column: str) -> ExecutionError:
    return ExecutionError(f'null value in column "{column}" of relation "{rel.name}" violates not-null constraint')


def fit_varchar(column, length: int, where: str = ""):
    """A VARCHAR column checked against ``VARCHAR(length)`` as Postgres' assignment does: a value
    longer than ``length`` characters is an ExecutionError "value too long for type character
    varying(n)" unless the characters beyond ``length`` are all spaces, which are cut off."""
    lengths = pc.utf8_length(column)
    if not pc.any(pc.greater(lengths, length)).as_py():
        return column
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    values = column.to_pylist()
    for i, text in enumerate(values):
        if text is not None and len(text) > length:
            if text[length:].strip(" "):
                raise ExecutionError(f"{where}value too long for type character varying({length})")
            values[i] = text[:length]
    return pa.array(values, column.type)


def round_column(column, typmod, where: str = "") -> pa.Array:
    """A DECIMAL column rounded to ``typmod`` (``(precision, scale)``), or a VARCHAR column
    checked against ``(n,)`` (:func:`fit_varchar`); the first failing value's error as an
    ExecutionError (``where`` prefixes it)."""
    if len(typmod) == 1:
        return fit_varchar(column, typmod[0], where)
    out, message, failed = apply_column(column, *typmod)
    if failed:
        raise ExecutionError(f"{where}{message}")
    return out


def check_columns(rel, columns: list, ops=None, where: str = "") -> list:
    """``columns`` (``rel``'s full width) with typmods applied; NULL in a NOT NULL column of a
    row written (``ops``: the chunk's ops, None for inserts only) is an ExecutionError."""
    if not rel.checked:
        return columns
    out = list(columns)
    for i in range(len(rel.visible_columns)):   # typmods first: Postgres coerces, then checks constraints
        typmod = rel.typmod_of(i)
        if typmod is not None:
            out[i] = round_column(out[i], typmod, where)
    written = None
    for i, (name, _) in enumerate(rel.visible_columns):
        column = out[i]
        if rel.not_null and rel.not_null[i] and column.null_count:
            nulls = pc.is_null(column)
            if ops is not None:
                if written is None:
                    written = pa.array(~np.isin(ops, (DELETE, UPDATE_DELETE)))
                nulls = pc.and_(nulls, written)
            if pc.any(nulls).as_py():
                raise ExecutionError(f"{where}{not_null_error(rel, name)}")
    return out


def check_chunks(rel, chunks):
    """The chunks of one statement with :func:`check_columns` applied, all checked before any
    is returned (a list); ``chunks`` itself when ``rel`` has nothing to check."""
    if not rel.checked:
        return chunks
    out = []
    for chunk in chunks:
        chunk = chunk.compact() if chunk.visibility is not None else chunk
        columns = check_columns(rel, list(chunk.columns), chunk.ops)
        out.append(StreamChunk(chunk.ops, columns, chunk.schema))
    return out


def check_table(rel, table: pa.Table, where: str = "") -> pa.Table:
    """A ``pyarrow.Table`` of ``rel``'s visible columns (by name; a column it does not have is
    NULL) with :func:`check_columns` applied (COPY and ``insert_arrow`` of whole inputs)."""
    if not rel.checked:
        return table
    names = table.column_names
    for i, (name, _) in enumerate(rel.visible_columns):
        if name not in names:
            if rel.not_null and rel.not_null[i] and table.num_rows:
                raise ExecutionError(f"{where}{not_null_error(rel, name)}")
            continue
        column = table.column(name)
        [checked] = check_columns(_One(rel, i), [column], where=where)
        if checked is not column:
            table = table.set_column(names.index(name), name, checked)
    return table


class _One:
    """Column ``i`` of ``rel`` seen as a one-column table (for :func:`check_table`)."""

    def __init__(self, rel, i: int):
        self.name = rel.name
        self.visible_columns = [rel.visible_columns[i]]
        self.typmods = [rel.typmod_of(i)]
        self.not_null = [bool(rel.not_null and rel.not_null[i])]
        self.checked = bool(self.typmods[0]) or self.not_null[0]

    def typmod_of(self, i: int):
        return self.typmods[i]
