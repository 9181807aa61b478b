"""Sources: where a stream starts. :class:`TableSource` reads a table's input channel (DML
writes and the barrier loop's barriers, in the order they were sent); :class:`Values` emits
fixed rows once, right after the first barrier (``INSERT ... VALUES`` into an MV, tests).

Both forward every barrier. ``Pause``/``Resume`` mutations: a paused TableSource holds data
chunks back (in order) until a Resume barrier, then emits them after it; barriers still flow.

Callers: the runtime (``StreamRuntime.source``), the planner.
"""

from __future__ import annotations

from stream.chunk import DEFAULT_CHUNK_SIZE, StreamChunk, StreamChunkBuilder
from stream.executor import Executor, UnaryExecutor
from stream.message import Barrier, Pause, Resume


class TableSource(Executor):
    """The messages of a source channel (``channel.messages()``), Pause/Resume applied."""

    def __init__(self, channel, schema, stream_key=(), identity: str | None = None):
        super().__init__([], schema, stream_key, identity or f"TableSource({channel.name})")
        self.channel = channel

    async def execute(self):
        paused, held = False, []
        async for msg in self.channel.messages():
            if type(msg) is Barrier:
                yield msg
                if isinstance(msg.mutation, Pause):
                    paused = True
                elif isinstance(msg.mutation, Resume) and paused:
                    paused = False
                    for chunk in held:
                        yield chunk
                    held = []
            elif paused and type(msg) is StreamChunk:
                held.append(msg)
            else:
                yield msg


class Values(UnaryExecutor):
    """Emits ``rows`` (tuples of Python values) as inserts after the first barrier of its input
    (a barrier source), in chunks of ``chunk_size``; then forwards barriers only."""

    def __init__(self, input: Executor, schema, rows, stream_key=(), chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__(input, schema, stream_key, identity="Values")
        self.rows = [tuple(r) for r in rows]
        self.chunk_size = chunk_size

    def on_init(self, barrier: Barrier) -> None:
        self._pending = True

    def handle_barrier(self, barrier: Barrier) -> list:
        out = super().handle_barrier(barrier)
        if getattr(self, "_pending", False):
            self._pending = False
            builder = StreamChunkBuilder(self.schema, self.chunk_size)
            for row in self.rows:
                chunk = builder.append(1, row)
                if chunk is not None:
                    out.append(chunk)
            last = builder.take()
            if last is not None:
                out.append(last)
        return out

    def on_chunk(self, chunk: StreamChunk):
        return None   # a barrier source carries no data
