"""Project: evaluates expressions over each chunk (stream/expr.py); ops pass through unchanged,
so update pairs stay pairs.

Stream key: the planner passes it (``stream_key``, output indices); by default each input key
column must be projected as a plain column reference, and its output position is the key.
A key column that is not projected is an :class:`~stream.errors.ExecutorError` at construction
(the planner must keep it, as a hidden column). Watermarks: one on a column projected as a
plain reference is re-numbered and passed on; others are dropped.

Per chunk the work is one Arrow kernel per expression node over the visible rows: a chunk with a
visibility mask (a Filter's output) is compacted first -- only the columns the expressions read
(``column_refs``; the others are all-NULL placeholders of the right length) -- so hidden rows
cost nothing and raise no data error (``10 / x`` under ``WHERE x <> 0`` never divides by
zero), as RisingWave evaluates only visible rows. A chunk with no visible row emits nothing.
Callers: the planner, tests.
"""

from __future__ import annotations

import pyarrow as pa

from stream.chunk import StreamChunk
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.expr import Col, Expr
from stream.message import Watermark
from stream.schema import Schema


class Project(UnaryExecutor):
    """``SELECT exprs`` over the input; ``names`` default to ``e0, e1, ...`` or a column's name."""

    def __init__(self, input, exprs, names=None, stream_key=None, identity: str | None = None):
        exprs = list(exprs)
        for e in exprs:
            if not isinstance(e, Expr):
                raise ExecutorError(identity or "Project", f"{e!r} is not an expression")
        if names is None:
            names = [input.schema.names[e.index] if isinstance(e, Col) else f"e{i}" for i, e in enumerate(exprs)]
        schema = Schema(list(zip(names, (e.data_type for e in exprs))))
        self._out_of = {}   # input column -> output column, for plain references
        for out, e in enumerate(exprs):
            if isinstance(e, Col):
                self._out_of.setdefault(e.index, out)
        identity = identity or f"Project({', '.join(map(str, exprs))})"
        if stream_key is None:
            missing = [input.schema.names[k] for k in input.stream_key if k not in self._out_of]
            if missing:
                raise ExecutorError(identity, f"stream key columns {missing} are not projected")
            stream_key = [self._out_of[k] for k in input.stream_key]
        super().__init__(input, schema, stream_key, identity)
        self.exprs = exprs
        self._reads = set().union(*(e.column_refs() for e in exprs))

    def on_chunk(self, chunk: StreamChunk):
        visibility = chunk.visibility
        if visibility is None:
            ops, columns = chunk.ops, chunk.columns
        else:   # only the columns an expression reads are compacted (a Filter's wide input)
            ops = chunk.ops[visibility]
            mask = pa.array(visibility)
            unread = pa.nulls(len(ops))   # (a NullArray: no buffers; no expression reads it)
            columns = [c.filter(mask) if i in self._reads else unread for i, c in enumerate(chunk.columns)]
            # (the placeholders never leave this method: a chunk must match its schema's types)
        n = len(ops)
        if n == 0:
            return None
        return StreamChunk(ops, [e.eval(columns, n) for e in self.exprs], self.schema)

    def on_watermark(self, watermark: Watermark):
        out = self._out_of.get(watermark.column)
        return None if out is None else Watermark(out, watermark.value)
