"""Helpers for the stream tests: a source that replays a list of messages, a driver that runs
an executor to the end and returns what it yielded, and barriers with increasing epochs.

``ListSource(schema, key, messages)`` is an executor whose ``execute()`` yields ``messages``;
``drain(executor)`` runs ``executor.execute()`` on a fresh event loop and returns the list of
output messages; ``Epochs().barrier()`` makes ``Barrier(prev, curr)`` pairs that chain from a
real ``new_epoch()``. ``chunk(schema, "+ 1 a", ...)``-style builders live in the test files.
"""

import asyncio

from hummock.key import EPOCH_PHYSICAL_SHIFT, new_epoch
from stream.chunk import StreamChunk
from stream.executor import Executor
from stream.message import Barrier


class ListSource(Executor):
    def __init__(self, schema, stream_key, messages):
        super().__init__([], schema, stream_key, "ListSource")
        self.messages = list(messages)

    async def execute(self):
        for msg in self.messages:
            yield msg


def drain(executor) -> list:
    async def go():
        return [m async for m in executor.execute()]
    return asyncio.run(go())


def chunks_of(messages) -> list:
    return [m for m in messages if type(m) is StreamChunk]


def visible_rows(messages) -> list:
    """``(op, row)`` of every visible row of every chunk, in order."""
    return [r for m in chunks_of(messages) for r in m.rows()]


class Epochs:
    """Barriers whose epochs chain: the first has prev = 0 (an empty store's committed epoch)."""

    def __init__(self, start: int | None = None):
        self.epoch = 0 if start is None else start

    def barrier(self, checkpoint: bool = True, mutation=None) -> Barrier:
        curr = max(new_epoch(), self.epoch + (1 << EPOCH_PHYSICAL_SHIFT))
        b = Barrier(self.epoch, curr, checkpoint, mutation)
        self.epoch = curr
        return b
