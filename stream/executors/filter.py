"""Filter: keeps the rows whose condition is TRUE (NULL and FALSE drop the row), by
narrowing the chunk's visibility mask; the columns are not copied.

Retraction rules (RisingWave's ``filter.rs``): an insert or delete passes or not on its own.
An update pair (U- then U+) is judged by both rows: both pass -> the pair stays; only the old
row passes -> it becomes a DELETE (the row left the filtered relation); only the new row
passes -> it becomes an INSERT; neither -> both hidden. So the output never holds half a pair.
The whole chunk is one condition evaluation plus a few numpy operations: :func:`filter_chunk`
(a plain function, tested directly).

Callers: the planner, tests.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, StreamChunk
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.expr import Expr


def filter_chunk(chunk: StreamChunk, passed: np.ndarray) -> StreamChunk | None:
    """``chunk`` with only the rows where ``passed`` (numpy bool, one per row) visible, update
    pairs rewritten (module docstring); None when no row is visible."""
    vis = passed if chunk.visibility is None else passed & chunk.visibility
    if not vis.any():
        return None
    ops = chunk.ops
    ud = np.flatnonzero(ops[:-1] == UPDATE_DELETE)   # pair starts; the U+ is at ud + 1
    if len(ud):
        old_in, new_in = vis[ud], vis[ud + 1]
        alone = old_in != new_in
        if alone.any():
            ops = ops.copy()
            ops[ud[alone & old_in]] = DELETE
            ops[ud[alone & new_in] + 1] = INSERT
    return StreamChunk(ops, chunk.columns, chunk.schema, vis)


class Filter(UnaryExecutor):
    """``WHERE condition`` over the input (module docstring)."""

    def __init__(self, input, condition: Expr, identity: str | None = None):
        identity = identity or f"Filter({condition})"
        if condition.data_type != DataType.BOOLEAN:
            raise ExecutorError(identity, f"the condition is {condition.data_type.sql_name()}, not BOOLEAN")
        super().__init__(input, identity=identity)
        self.condition = condition

    def on_chunk(self, chunk: StreamChunk):
        result = self.condition.eval(chunk.columns, len(chunk))
        if result.null_count:
            result = pc.fill_null(result, False)
        passed = result.to_numpy(zero_copy_only=False) if isinstance(result, pa.Array) else np.asarray(result)
        return filter_chunk(chunk, passed)
