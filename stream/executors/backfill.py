"""Backfill: a new MV's view of an upstream relation -- its committed snapshot, then its live
changes.

On the first barrier (whose ``prev_epoch`` is the committed epoch the graph starts from) it
reads the upstream's materialized table at ``prev_epoch`` through ``StorageTable`` and emits it
as insert chunks right after that barrier, before any live change; later messages pass through.
Used by the SQL layer when a DDL rebuild adds an MV (docs/sql.md: "DDL rebuilds the graph").

Invariant: the snapshot and the live stream never overlap: the graph is stopped at a
checkpoint before the rebuild, so nothing changes between ``prev_epoch`` and the first
barrier. The snapshot's chunks are produced lazily, one as the actor pulls it, so
``on_rows(done, finished)`` (optional) reports rows as the downstream executors take them:
the progress of the backfill. Callers: :mod:`sql.build`.
"""

from __future__ import annotations

from stream.chunk import StreamChunk
from stream.executor import UnaryExecutor
from stream.message import Barrier

from relational.storage_table import StorageTable


class Backfill(UnaryExecutor):
    def __init__(self, input, desc, store, batch_size: int = 1024, on_rows=None):
        super().__init__(input, identity=f"Backfill({desc.name})")
        self.storage = StorageTable.from_desc(store, desc)
        self.batch_size = batch_size
        self.on_rows = on_rows
        self._done = False

    def handle_barrier(self, barrier: Barrier):
        out = super().handle_barrier(barrier)
        if self._done:
            return out
        self._done = True
        return self._snapshot(out, barrier.prev_epoch)

    def _snapshot(self, out, epoch: int):
        """The barrier's own messages, then the snapshot at ``epoch`` a chunk at a time."""
        yield from out
        done = 0
        for batch in self.storage.batch_iter(epoch, batch_size=self.batch_size):
            if batch.num_rows:
                yield StreamChunk([1] * batch.num_rows, list(batch.columns), self.schema)
                done += batch.num_rows
                if self.on_rows is not None:
                    self.on_rows(done, False)
        if self.on_rows is not None:
            self.on_rows(done, True)

    def on_chunk(self, chunk):
        return chunk
