"""Snowflake-style row ids for tables without a primary key, for the stream layer.

The layout and the generator live in :mod:`relational.row_id` (Spark loads and sinks, in the
relational layer, issue ids too); this module re-exports them with the stream layer's error.

Callers: :mod:`stream.executors.dml`.
"""

from __future__ import annotations

from relational.row_id import (_TS_SHIFT, GENERATOR_BITS, MAX_GENERATOR, SEQUENCE_BITS, SEQUENCE_LIMIT,
                               SQL_DML_WIDTH, TS_BITS, RowIdHorizon, _wall_ms, split_row_id)
from relational.row_id import RowIdGenerator as _RowIdGenerator
from stream.errors import StreamError


class RowIdGenerator(_RowIdGenerator):
    """Issues row ids for one generator id (:class:`relational.row_id.RowIdGenerator`); raises
    ``StreamError``."""

    error = StreamError


__all__ = ["RowIdGenerator", "RowIdHorizon", "split_row_id", "TS_BITS", "GENERATOR_BITS", "SEQUENCE_BITS", "MAX_GENERATOR",
           "SEQUENCE_LIMIT", "SQL_DML_WIDTH", "_TS_SHIFT", "_wall_ms"]
