"""TemporalJoin: an append-only stream joined with a table as the table is when each row
arrives (RisingWave's temporal join, ``JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON ...``).

Each left row looks up, by its key columns, the right table's row with that primary key in the
table's newest committed epoch (``store.multi_get``, one call per chunk) and is emitted joined
with it -- inner: only when found; left: with NULLs otherwise. Later changes of the right table
change nothing already emitted (that is the point: enrichment as of processing time), so the
executor keeps no state and the right table feeds no stream into it.

Input contract: the left input only inserts (the planner admits an append-only left only); a
delete or update on the left raises :class:`~stream.errors.InconsistentStreamError`, since
what it joined with may have changed since. Output: left columns then the right table's
columns; stream key: the left's (one output row per left row: the lookup is by the whole
primary key). A NULL key column matches nothing.

Callers: :mod:`sql.build` (a ``P.Join`` marked ``temporal``), tests.
"""

from __future__ import annotations

from stream.chunk import INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor
from stream.schema import Schema


class TemporalJoin(UnaryExecutor):
    """See the module docstring. ``table``: a :class:`relational.storage_table.StorageTable` of
    the right relation; ``key_of_pk``: for each of its primary-key columns, in pk order, the
    left column holding its value; ``kind``: ``inner`` or ``left``."""

    def __init__(self, input, table, key_of_pk, kind: str):
        if kind not in ("inner", "left"):
            raise ExecutorError("TemporalJoin", f"kind must be inner or left, got {kind!r}")
        right = list(zip(table.names, table.serde.types))
        schema = Schema(list(input.schema.pairs()) + right)
        super().__init__(input, schema, list(input.stream_key), identity=f"TemporalJoin({table.name})")
        if len(key_of_pk) != len(table.serde.pk_indices):
            raise ExecutorError(self.identity, "one left column per primary-key column of the right table needed")
        self.table, self.key_of_pk, self.kind = table, list(key_of_pk), kind
        self._nulls = (None,) * len(right)

    def on_chunk(self, chunk: StreamChunk):
        rows = chunk.rows()
        for op, row in rows:
            if op != INSERT:
                raise InconsistentStreamError(f"{self.identity}: its left input must only insert (a temporal "
                                              f"join's matches are not kept), got op {op} for {row!r}")
        keys = [tuple(row[i] for i in self.key_of_pk) for _, row in rows]
        found = self.table.get_rows(keys, self.table.store.max_committed_epoch)
        builder = StreamChunkBuilder(self.schema, max(3, len(rows)))   # (a builder holds at least 3)
        out = []
        for (_, row), match in zip(rows, found):
            if match is None and self.kind == "inner":
                continue
            full = builder.append(INSERT, tuple(row) + (self._nulls if match is None else tuple(match)))
            if full is not None:
                out.append(full)
        last = builder.take()
        if last is not None:
            out.append(last)
        return out
