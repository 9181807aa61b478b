"""Bulk INSERT of Arrow data: ``Connection.insert_arrow(table, data)``, the fast path for feeders
(the Nexmark benchmark and demo) where ``executemany`` binds every row in Python.

Job: check ``data`` (a ``pyarrow`` RecordBatch or Table) against the table's visible columns
(by name: every column present at most once, nothing else -- one left out takes its DEFAULT,
or NULL; types cast safely to the declared Arrow
types, so an int32 column fits a BIGINT one; NUMERIC text read and range-checked as Postgres'
``numeric_in``), refuse NULL in a user primary key (``NUMERIC(p, s)`` and NOT NULL columns are
checked with every DML chunk: ``sql.column_checks`` via ``write_chunks``), add the hidden
``_row_id`` as NULLs (the table's Dml fills them), and hand insert chunks of ``chunk_size``
rows straight to the table's source. Same semantics as INSERT VALUES of the same rows: the
table's ON CONFLICT applies, the rows become visible with the next checkpoint (or at once
with ``RW_IMPLICIT_FLUSH``).

Invariants: nothing is written when a check fails (all checks run before the first chunk); a
failure inside the graph is recovered as for any DML (``Database.write``: the rows are kept
and written again, or the statement is reported lost with ``LostWritesError``).

Callers: :mod:`sql.session` (``Connection.insert_arrow``), :mod:`sql.statements` (INSERT ...
SELECT of columns that fit as they are).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import TypeKind
from stream import decimal_ops
from stream.chunk import INSERT, StreamChunk
from stream.schema import Schema

from sql.errors import BindError, CatalogError, ExecutionError
from sql.source import kind_name, takes_inserts

# rows per chunk handed to the graph: every executor has a per-chunk cost, so a larger chunk is
# cheaper per row (bench.peers through a push source at 10k-row batches: 4,096 -> 16,384 gave
# q1 +10-20 %, qt +5-25 % events per CPU second); the chunks are slices of ``data`` (no copy)
DEFAULT_CHUNK_SIZE = 16384


def insert_arrow(db, table: str, data, variables, chunk_size: int = DEFAULT_CHUNK_SIZE) -> int:
    """Insert every row of ``data`` into ``table``; returns the row count (module docstring)."""
    from sql.statements import write_chunks
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise BindError(f"insert_arrow needs a pyarrow RecordBatch or Table, got {type(data).__name__}")
    rel = db.catalog.get(table.lower())
    if rel is None or not takes_inserts(rel):
        raise (CatalogError(f"table {table!r} does not exist") if rel is None
               else BindError(f"cannot insert into {kind_name(rel)} {table!r}"))
    return insert_arrow_into(db, rel, data, variables, chunk_size)


def insert_arrow_into(db, rel, data, variables, chunk_size: int = DEFAULT_CHUNK_SIZE) -> int:
    """:func:`insert_arrow` into the table :class:`~sql.catalog.Relation` ``rel`` (also INSERT ...
    SELECT whose columns fit the table as they are: sql/statements.py)."""
    from sql.statements import write_chunks
    schema = Schema(list(rel.desc.columns))
    visible = rel.visible_columns
    names = data.column_names
    extra = sorted(set(names) - {n for n, _ in visible})
    if extra or len(set(names)) != len(names):
        raise BindError(f"columns {extra or names} do not match the columns of {rel.name!r}")
    columns = []
    for i, (name, _) in enumerate(visible):
        atype = schema.arrow_types[i]
        if name not in names and rel.default_of(i) is not None:   # its DEFAULT (sql/defaults.py)
            from relational.arrow import to_arrow
            from sql.defaults import default_columns
            column = to_arrow(default_columns(rel, [i], data.num_rows)[i], rel.desc.columns[i][1])
        elif name not in names:
            column = pa.nulls(data.num_rows, atype)
        else:
            column = data.column(name)
            if column.type != atype:
                try:
                    column = pc.cast(column, atype, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise BindError(f"column {name!r} of type {column.type} does not fit "
                                    f"{rel.desc.columns[i][1].sql_name()}: {exc}") from None
        if rel.desc.columns[i][1].kind == TypeKind.DECIMAL and pa.types.is_string(column.type):
            try:   # Postgres' numeric range and syntax, checked before anything is written
                column = decimal_ops.stored_texts(column)
            except decimal_ops.RowError as exc:
                raise BindError(f"column {name!r}: {exc}") from None
        if rel.desc.columns[i][1].kind == TypeKind.JSONB:   # the normal text, checked before anything is written
            from relational.jsonb import JsonbSyntaxError
            from stream.jsonb_ingest import normal_column
            try:
                column = normal_column(column)
            except JsonbSyntaxError as exc:
                raise ExecutionError(f"column {name!r}: {exc}") from None
        if rel.user_pk and i in rel.pk_indices and column.null_count:
            from sql.column_checks import not_null_error
            raise not_null_error(rel, name)   # a pk column is NOT NULL
        columns.append(column)
    if rel.row_id:
        columns.append(pa.nulls(data.num_rows, pa.int64()))
    n = data.num_rows
    if n == 0:
        return 0
    whole = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    parts = (whole.slice(at, chunk_size) for at in range(0, n, chunk_size))
    write_chunks(db, rel, (StreamChunk(np.full(p.num_rows, INSERT, np.int8), p.columns, schema) for p in parts),
                 variables)
    return n
