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
import threading

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


class SourceChannel(Channel):
    """A table's input channel, written from other threads without a round trip: ``offer``
    (any thread) waits on a ``threading.Semaphore`` of ``capacity`` permits -- the bound on
    data chunks in flight, i.e. the backpressure on writers -- and hands the chunk to the
    loop with ``call_soon_threadsafe``; the reader returns the permits of the chunks it took
    in batches of half the capacity (or whenever the queue ran empty), so a blocked writer
    wakes -- and competes for the interpreter lock -- once per batch.
    Barriers (``send``, on the loop) need no permit: the barrier loop bounds them. Messages
    keep the order in which they were handed to the loop, so a write that returned before a
    barrier was injected belongs to that barrier's epoch."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, name: str = "source"):
        self.queue = asyncio.Queue()
        self.name = name
        self.capacity = capacity
        self.permits = threading.Semaphore(capacity)

    def offer(self, loop, msg, timeout: float, on_put=None) -> bool:
        """Hand ``msg`` to the loop; False if no permit came within ``timeout`` seconds.
        ``on_put()`` runs on the loop right after ``msg`` entered the queue (the runtime notes
        the epoch the chunk belongs to)."""
        if not self.permits.acquire(timeout=timeout):
            return False
        if on_put is None:
            loop.call_soon_threadsafe(self.queue.put_nowait, (msg,))
        else:
            loop.call_soon_threadsafe(self._put_then, msg, on_put)
        return True

    def _put_then(self, msg, on_put) -> None:
        self.queue.put_nowait((msg,))
        on_put()

    async def messages(self):
        queue, release = self.queue, self.permits.release
        batch = max(1, self.capacity // 2)
        owed = 0
        while True:
            if owed and (owed >= batch or queue.empty()):
                release(owed)   # in batches: the writer wakes once per batch, not per chunk
                owed = 0
            msg = await queue.get()
            if msg is _END:
                return
            if type(msg) is tuple:   # a data chunk that holds a permit
                owed += 1
                msg = msg[0]
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
