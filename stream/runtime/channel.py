"""Bounded channels between actors, and the executors that read them.

A :class:`Channel` is an ``asyncio.Queue`` of at most ``capacity`` messages: a sender whose
downstream is slow waits in ``send`` (backpressure, as RisingWave's permit-based channels),
so memory stays bounded whatever the rates. ``close()`` ends the stream (the sending actor
stopped). Channels live on the runtime's event loop; other threads use
``asyncio.run_coroutine_threadsafe`` (the runtime does, for DML writes).

:class:`Receiver` is the executor at the head of an actor that reads one channel;
:class:`Merge` reads several (one per upstream actor) with barrier alignment
(:mod:`stream.align`). Both declare the upstream's schema and stream key.

Callers: :mod:`stream.runtime.runtime`, :mod:`stream.runtime.dispatch`.
"""

from __future__ import annotations

import asyncio

from stream.align import align_barriers
from stream.executor import Executor

_END = object()
DEFAULT_CAPACITY = 16


class Channel:
    """A bounded FIFO of messages (module docstring). One sender, one receiver."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, name: str = "channel"):
        self.queue: asyncio.Queue = asyncio.Queue(capacity)
        self.name = name

    async def send(self, msg) -> None:
        await self.queue.put(msg)

    async def close(self) -> None:
        await self.queue.put(_END)

    def close_nowait(self) -> bool:
        """End the stream without waiting (the actor failed or was cancelled); False if full."""
        try:
            self.queue.put_nowait(_END)
            return True
        except asyncio.QueueFull:
            return False

    async def messages(self):
        get = self.queue.get
        while True:
            msg = await get()
            if msg is _END:
                return
            yield msg


class Receiver(Executor):
    """Reads one channel: the messages of one upstream actor, as they were sent."""

    def __init__(self, channel: Channel, schema, stream_key, identity: str | None = None):
        super().__init__([], schema, stream_key, identity or f"Receiver({channel.name})")
        self.channel = channel

    def execute(self):
        return self.channel.messages()


class Merge(Executor):
    """Reads one channel per upstream actor and aligns their barriers (stream/align.py)."""

    def __init__(self, channels, schema, stream_key, identity: str | None = None):
        super().__init__([], schema, stream_key, identity or f"Merge({len(channels)} inputs)")
        self.channels = list(channels)

    async def execute(self):
        async for _, msg in align_barriers([c.messages() for c in self.channels], self.identity):
            yield msg
