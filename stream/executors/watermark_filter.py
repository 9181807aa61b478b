"""WatermarkFilter: event-time watermarks of a table or source (``WATERMARK FOR ts AS expr``,
RisingWave's WatermarkFilterExecutor) and the drop of late rows.

Per chunk (visible rows only): every row whose event-time column ``column`` is below the
watermark as it stood *before* the chunk -- or NULL, once there is a watermark -- is dropped: it
is *late* (the row never reaches the table or any MV). Then the watermark expression is
evaluated over every row of the chunk; its largest non-NULL value, when above the current
watermark, becomes the new watermark. This is RisingWave's order (its WatermarkFilterExecutor
builds the ``column >= watermark`` predicate before it takes the chunk's maximum): with
``ts - INTERVAL 'd'`` as the expression a row is late when it is more than ``d`` older than the
newest event time of the chunks before its own; rows of one chunk never make each other late.
The chunk is emitted (without the late rows), then -- when the watermark advanced -- one
:class:`~stream.message.Watermark` ``(column, value)``: at most one per chunk. An update pair
with one late half is split as Filter splits it (docs: the input is append-only in practice).

State: a one-row table keyed by nothing holding the current watermark (NULL: none yet),
written on the barrier after it advanced and committed with it. On the first barrier
(recovery, a DDL rebuild) the stored watermark is read back and emitted right after that
barrier, so late rows stay late across restarts and readers re-learn the watermark.

Invariants: the watermark never goes down; no row emitted after a ``Watermark(column, w)`` has
``column`` below ``w`` (or NULL) -- a chunk's rows are emitted before the watermark they raise.
Input watermarks are dropped (this executor is the origin).

Callers: :mod:`sql.build` (between the Dml and the Materialize of a table with a watermark, after
the Dml of a source with one), tests.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational import StateTable
from relational.arrow import to_arrow, to_pylist
from relational.types import DataType, TypeKind
from stream.chunk import StreamChunk
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.executors.filter import filter_chunk
from stream.message import Barrier, Watermark

#: the event-time column types a watermark may be declared on
WATERMARK_KINDS = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)


def watermark_state_table(store, table_id: int, data_type: DataType, **kwargs) -> StateTable:
    """The WatermarkFilter's state: the current watermark (``data_type``), keyed by nothing."""
    return StateTable(store, table_id, [("watermark", data_type)], [], **kwargs)


class WatermarkFilter(UnaryExecutor):
    """See the module docstring. ``column``: the event-time column's index; ``expr``: the
    watermark expression over the input row, of the column's type; ``table``: the state table
    (:func:`watermark_state_table`)."""

    def __init__(self, input, column: int, expr, table: StateTable, identity: str | None = None):
        identity = identity or f"WatermarkFilter({input.schema.names[column]})"
        super().__init__(input, identity=identity)
        dtype = input.schema.types[column]
        if dtype.kind not in WATERMARK_KINDS:
            raise ExecutorError(identity, f"a watermark needs a TIMESTAMP or TIMESTAMPTZ column, got "
                                          f"{dtype.sql_name()}")
        if expr.data_type != dtype:
            raise ExecutorError(identity, f"the watermark expression is {expr.data_type.sql_name()}, the column "
                                          f"{dtype.sql_name()}")
        if list(table.serde.pk_indices) or list(table.types) != [dtype]:
            raise ExecutorError(identity, f"the state table must hold one {dtype.sql_name()} keyed by nothing")
        self.column, self.expr, self.table, self.dtype = column, expr, table, dtype
        self.watermark = None     # the current watermark (a Python value), None before the first
        self._scalar = None       # the same as an Arrow scalar of the column's type
        self._stored = None       # what the state table holds (its row, or None)
        self.dropped = 0          # late rows dropped since this executor was built (tests, stats)

    def state_tables(self) -> list:
        return [self.table]

    def _set(self, value) -> None:
        self.watermark = value
        self._scalar = to_arrow([value], self.dtype)[0]

    def on_init(self, barrier: Barrier) -> None:
        self._stored = self.table.get_row(())
        self.watermark = self._scalar = None
        if self._stored is not None and self._stored[0] is not None:
            self._set(self._stored[0])

    def handle_barrier(self, barrier: Barrier):
        first = self._epoch is None
        out = super().handle_barrier(barrier)
        if first and self.watermark is not None:   # a recovered watermark: readers learn it again
            out.append(Watermark(self.column, self.watermark))
        return out

    def on_barrier(self, barrier: Barrier):
        if self.watermark is None:
            return None
        row = (self.watermark,)
        if self._stored is None:
            self.table.insert(row)
        elif self._stored != row:
            self.table.update(self._stored, row)
        self._stored = row
        return None

    def on_chunk(self, chunk: StreamChunk):
        chunk = chunk.compact()
        n = len(chunk.ops)
        if not n:
            return None
        values = self.expr.eval(chunk.columns, n)   # (of every row: late ones still raise it)
        if self.watermark is not None:   # late against the watermark before this chunk
            keep = pc.greater_equal(chunk.columns[self.column], self._scalar)
            if keep.null_count:
                keep = pc.fill_null(keep, False)
            passed = keep.to_numpy(zero_copy_only=False)
            if not passed.all():
                self.dropped += int(n - np.count_nonzero(passed))
                chunk = filter_chunk(chunk, passed)
        advanced = False
        if values.null_count < n:
            top = pc.max(values)
            if top.is_valid:
                [value] = to_pylist(pa.array([top.as_py()], type=values.type), self.dtype)
                if self.watermark is None or value > self.watermark:
                    self._set(value)
                    advanced = True
        if not advanced:
            return chunk
        return ([chunk] if chunk is not None else []) + [Watermark(self.column, self.watermark)]

    def on_watermark(self, watermark: Watermark):
        return None
