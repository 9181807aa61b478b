"""Now: the one-row stream of the current time, which temporal filters compare against
(RisingWave's NowExecutor; ``WHERE t > now() - INTERVAL '1 hour'`` in a materialized view).

At every barrier after the first, the row becomes the wall-clock time of the barrier's
``curr_epoch`` (``hummock.key.epoch_to_unix_ms``, as TIMESTAMPTZ in UTC): an INSERT the first
time, an UPDATE pair after, nothing when the time did not move. The change is emitted before
the barrier, so a :class:`~stream.executors.dynamic_filter.DynamicFilter` reading it puts the
new time in force for the epoch the barrier opens. The time comes from the epoch, not from a
clock read, so a replayed epoch gives the same row.

State: a one-row table (keyed by nothing) holding the last time emitted, committed with every
barrier; a rebuilt graph reads it back in ``on_init`` and continues with an UPDATE from it (a
reader's state already holds that row).

Input: a barrier-only source (its data chunks are refused). Output: schema ``(now
TIMESTAMPTZ)``, stream key empty (one row). Callers: :mod:`sql.build` (the ``Now`` plan node).
"""

from __future__ import annotations

import datetime

from hummock.key import epoch_to_unix_ms
from relational import StateTable
from relational.types import DataType
from stream.chunk import INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.schema import Schema

NOW_SCHEMA = Schema([("now", DataType.TIMESTAMPTZ)])
_UNIX = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def now_state_table(store, table_id: int, **kwargs) -> StateTable:
    """The Now executor's state: the last time emitted, keyed by nothing."""
    return StateTable(store, table_id, NOW_SCHEMA.pairs(), [], **kwargs)


def epoch_time(epoch: int) -> datetime.datetime:
    """The wall-clock time of ``epoch`` as an aware UTC datetime (millisecond precision)."""
    return _UNIX + datetime.timedelta(milliseconds=epoch_to_unix_ms(epoch))


class Now(UnaryExecutor):
    """See the module docstring."""

    def __init__(self, input, table: StateTable):
        super().__init__(input, NOW_SCHEMA, [], identity="Now")
        if list(table.serde.pk_indices) or list(table.types) != [DataType.TIMESTAMPTZ]:
            raise ExecutorError(self.identity, "the state table must hold one TIMESTAMPTZ keyed by nothing")
        self.table = table
        self._last = None

    def state_tables(self) -> list:
        return [self.table]

    def on_init(self, barrier) -> None:
        self._last = self.table.get_row(())

    def on_barrier(self, barrier):
        row = (epoch_time(barrier.curr_epoch),)
        if self._last == row:
            return None
        builder = StreamChunkBuilder(self.schema, 4)   # room for the update pair: take() returns it
        if self._last is None:
            builder.append(INSERT, row)
        else:
            builder.append(UPDATE_DELETE, self._last)
            builder.append(UPDATE_INSERT, row)
            self.table.delete(self._last)
        self.table.insert(row)
        self._last = row
        return builder.take()

    def on_chunk(self, chunk: StreamChunk):
        raise ExecutorError(self.identity, "its input is a barrier-only source; it got a data chunk")
