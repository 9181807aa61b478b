"""Dml: the entry of a table's changes into the stream graph, with row ids for tables without
a primary key.

Per chunk: the columns are conformed to the table's schema (same DataTypes in order; an Arrow
column of another numeric/string width is cast, safely, to the declared type; anything else is
an :class:`~stream.errors.InvalidChunkError`), invisible rows are dropped, and the chunk is
validated (update pairs adjacent; with ``row_id_index`` after the ids are filled in; a chunk of
only INSERTs whose row ids are all NULL -- the bulk path -- only gets its ids: it has no pair).

Row ids (``row_id_index`` set: the table's hidden BIGINT pk column, RisingWave's ``_row_id``):
an INSERT whose row id is NULL gets a new id from its :class:`~stream.row_id.RowIdGenerator`
(``generator`` = this DML actor's first generator number, ``generator_width`` how many it
owns); a U+ whose row id is NULL takes the id of its U-
(an update keeps its row); a DELETE or U- must name its row id (it comes from reading the table),
else ``InvalidChunkError``. Ids given on inserts are kept. The generator starts, after each
(re)start, at the physical time of the first barrier's epoch (stream/row_id.py). Ids a chunk
borrows ahead of the clock (over 4,096 in one millisecond) are waited for at the next barrier,
not after each chunk (``RowIdGenerator.catch_up``) -- or, given the runtime's ``horizon``
(:class:`~stream.row_id.RowIdHorizon`), noted there at each barrier for the runtime to wait
for before it commits the epoch (the barrier passes at once; the epoch's SSTs are built
meanwhile). Either way none of a committed epoch's ids is ahead of the clock.

Callers: the runtime's table sources, the planner (``INSERT/UPDATE/DELETE``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import InvalidChunkError
from stream.executor import UnaryExecutor
from stream.message import Barrier
from stream.row_id import RowIdGenerator


class Dml(UnaryExecutor):
    """Conforms DML chunks to ``schema`` and fills row ids (module docstring)."""

    def __init__(self, input, schema, stream_key, row_id_index: int | None = None, generator: int = 0,
                 identity: str | None = None, horizon=None, generator_width: int = 1):
        super().__init__(input, schema, stream_key, identity or "Dml")
        if row_id_index is not None and self.schema.types[row_id_index] != DataType.BIGINT:
            raise InvalidChunkError(f"{self.identity}: the row id column must be BIGINT")
        self.row_id_index = row_id_index
        self.row_ids = RowIdGenerator(generator, width=generator_width)
        self.horizon = horizon   # a RowIdHorizon the runtime waits for before commits, or None

    def on_init(self, barrier: Barrier) -> None:
        self.row_ids.start_at_epoch(barrier.curr_epoch)

    def on_barrier(self, barrier: Barrier):
        if self.horizon is not None:   # the runtime waits for the clock before the commit
            self.horizon.note(self.row_ids.last_ms)
        else:
            self.row_ids.catch_up()   # ids borrowed ahead of the clock: none is once the barrier passes
        return None

    def _conform(self, chunk: StreamChunk) -> StreamChunk:
        if chunk.schema.types != self.schema.types:
            raise InvalidChunkError(f"{self.identity}: a chunk of {chunk.schema!r} for a table of {self.schema!r}")
        columns = list(chunk.columns)
        for i, (column, atype) in enumerate(zip(columns, self.schema.arrow_types)):
            if column.type != atype:
                try:
                    columns[i] = pc.cast(column, atype, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise InvalidChunkError(f"{self.identity}: column {self.schema.names[i]} of type {column.type} "
                                            f"does not fit {atype}: {exc}") from None
        return StreamChunk(chunk.ops, columns, self.schema, chunk.visibility).compact()

    def _all_inserts(self, chunk: StreamChunk) -> bool:
        """Whether every row of the (conformed, compacted) ``chunk`` is an INSERT and every
        column has one value per op (what ``validate`` would check of such a chunk)."""
        ops = chunk.ops
        n = len(ops)
        return bool((ops == INSERT).all()) and len(chunk.columns) == len(self.schema) and \
            all(len(c) == n for c in chunk.columns)

    def on_chunk(self, chunk: StreamChunk):
        chunk = self._conform(chunk)
        if self.row_id_index is None:
            return chunk if self._all_inserts(chunk) else chunk.validate(self.stream_key)
        r = self.row_id_index
        column = chunk.columns[r]
        n = len(column)
        if n and column.null_count == n and self._all_inserts(chunk):
            # the bulk path (INSERT, insert_arrow): only new rows, every id to fill -- nothing of
            # an update pair to check, so the ids are filled in and the chunk goes on as it is
            columns = list(chunk.columns)
            columns[r] = pa.array(self.row_ids.next_ids(n, wait=False), type=pa.int64())
            return StreamChunk(chunk.ops, columns, self.schema)
        chunk.validate()
        if not column.null_count:
            return chunk.validate(self.stream_key)
        null = column.is_null().to_numpy(zero_copy_only=False)
        ops = chunk.ops
        unnamed = null & ((ops == DELETE) | (ops == UPDATE_DELETE))
        if unnamed.any():
            raise InvalidChunkError(f"{self.identity}: a delete must name its row id "
                                    f"({self.schema.names[r]} is NULL)", int(np.argmax(unnamed)))
        ids = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=True)
        fresh = np.flatnonzero(null & (ops == INSERT))
        if len(fresh):
            ids[fresh] = self.row_ids.next_ids(len(fresh), wait=False)
        kept = np.flatnonzero(null & (ops == UPDATE_INSERT))
        if len(kept):
            ids[kept] = ids[kept - 1]   # the U- right before (validated above)
        columns = list(chunk.columns)
        columns[r] = pa.array(ids, type=pa.int64())
        return StreamChunk(ops, columns, self.schema).validate(self.stream_key)
