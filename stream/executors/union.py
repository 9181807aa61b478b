"""Union: the changes of several inputs with the same schema, as one stream (UNION ALL), with
barrier alignment (stream/align.py): a barrier is emitted once every input delivered it.

Stream key: the planner passes one that stays unique across inputs (usually the inputs' key
plus a column telling the inputs apart); by default the first input's. Watermarks: a column's
watermark is the lowest of the inputs' latest watermarks on it, emitted when it rises, once
every input has sent one (RisingWave's union does the same).

Callers: the planner, tests.
"""

from __future__ import annotations

from stream.align import align_barriers
from stream.chunk import StreamChunk
from stream.errors import ExecutorError
from stream.executor import Executor
from stream.message import Watermark


class Union(Executor):
    """UNION ALL of ``inputs`` (module docstring)."""

    def __init__(self, inputs, stream_key=None, identity: str | None = None):
        inputs = list(inputs)
        if not inputs:
            raise ExecutorError(identity or "Union", "needs at least one input")
        identity = identity or f"Union({len(inputs)} inputs)"
        for i in inputs[1:]:
            if i.schema.types != inputs[0].schema.types:
                raise ExecutorError(identity, f"input {i.identity} has {i.schema!r}, not {inputs[0].schema!r}")
        super().__init__(inputs, inputs[0].schema, inputs[0].stream_key if stream_key is None else stream_key,
                         identity)
        self._watermarks: dict = {}   # column -> {input index: value}
        self._emitted: dict = {}      # column -> value

    def _watermark(self, i: int, wm: Watermark):
        latest = self._watermarks.setdefault(wm.column, {})
        latest[i] = wm.value
        if len(latest) < len(self.inputs):
            return None
        low = min(latest.values())
        if wm.column in self._emitted and not low > self._emitted[wm.column]:
            return None
        self._emitted[wm.column] = low
        return Watermark(wm.column, low)

    async def execute(self):
        async for i, msg in align_barriers([x.execute() for x in self.inputs], self.identity):
            if i is None:
                for m in self.handle_barrier(msg):
                    yield m
            elif type(msg) is StreamChunk:
                yield msg if msg.schema is self.schema else msg.with_columns(msg.columns, self.schema)
            else:
                out = self._watermark(i, msg)
                if out is not None:
                    yield out
