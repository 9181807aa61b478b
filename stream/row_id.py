"""Snowflake-style row ids for tables without a primary key (RisingWave's RowIdGenerator).

Layout of one id (a positive BIGINT; part of the stored data of every such table, do not change):

    bit 63: 0 | 41 bits: ms since 2021-04-01 (the epoch base) | 10 bits: generator | 12 bits: sequence

- ``generator`` (0..1023) tells apart the generators that run at the same time: one per DML
  actor of a table (RisingWave puts the vnode there). Two generators never issue the same id.
- Within one generator ids strictly increase: the sequence counts up to 4,095 within one
  millisecond; a chunk that needs more takes the next milliseconds ahead of the clock and the
  generator then sleeps until the clock has caught up, so no issued id is ever ahead of the
  wall clock when the call returns (at most 4,096 ids per ms per generator: 4M rows/s).
- Across restarts: a new generator starts at the later of the wall clock and the physical time
  of its first epoch (which is above the store's ``max_committed_epoch``). Every id of an
  earlier run was issued at an earlier wall-clock time, so ids stay unique as long as the clock
  does not go back across a restart; the epoch floor covers a clock that went back to before
  the committed epoch.
Vectorized: ``next_ids(n)`` builds the ids with numpy, no Python per row.

The layout and the generator live in :mod:`relational.row_id` (Spark loads and sinks, in the
relational layer, issue ids too); this module re-exports them with the stream layer's error.

Callers: :mod:`stream.executors.dml`.
"""

from __future__ import annotations

from relational.row_id import (_TS_SHIFT, GENERATOR_BITS, MAX_GENERATOR, SEQUENCE_BITS, SEQUENCE_LIMIT,
                               TS_BITS, _wall_ms, split_row_id)
from relational.row_id import RowIdGenerator as _RowIdGenerator
from stream.errors import StreamError


class RowIdGenerator(_RowIdGenerator):
    """Issues row ids for one generator id (:class:`relational.row_id.RowIdGenerator`); raises
    ``StreamError``."""

    error = StreamError


__all__ = ["RowIdGenerator", "split_row_id", "TS_BITS", "GENERATOR_BITS", "SEQUENCE_BITS", "MAX_GENERATOR",
           "SEQUENCE_LIMIT", "_TS_SHIFT", "_wall_ms"]
