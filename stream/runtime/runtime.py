"""StreamRuntime: builds a graph of actors, runs it on one asyncio event loop in a background
thread, and drives barriers and checkpoints (docs/streaming.md, "Runtime").

Building (before ``start``):

    rt = StreamRuntime(store, barrier_interval_ms=1000)
    t = rt.source("t", schema, stream_key=[0])           # a table's input: DML writes + barriers
    a = rt.actor(Materialize(Dml(t.executor, ...), table))   # an actor: a chain of executors
    outs = rt.exchange([a], 2, "hash", key=[0])          # channels + dispatchers -> 2 Merge heads
    for i, head in enumerate(outs): rt.actor(Materialize(Project(head, ...), tables[i]))

Memory: the runtime owns one :class:`~stream.cache.MemoryBudget` (``memory_budget_bytes``,
:attr:`budget`) for the caches of all its executors: ``actor()`` moves the caches of every
executor of the chain that was built without a ``budget=`` of its own onto it.

Running: ``start()`` starts every actor and sends the initial barrier (``prev_epoch`` = the
store's ``max_committed_epoch``, not a checkpoint): every state table then reads exactly the
committed state -- which is how recovery works: reopen the store, build the same graph,
``start()``. ``write(source, chunk)`` hands a DML chunk to the source (from any thread, without waiting
for the loop; it blocks while ``channel_capacity`` chunks of that source are in flight). ``barrier(checkpoint=True)`` injects a barrier and returns once every
actor passed it and (for a checkpoint) the store committed its ``prev_epoch``; ``flush()`` is
that and returns the committed epoch (SQL ``FLUSH``). With ``barrier_interval_ms`` a ticker
injects barriers by itself, every ``checkpoint_frequency``-th one a checkpoint
(``start_ticker(ms)`` starts it later for a runtime started without an interval). ``stop()``
sends a checkpointed Stop barrier to every actor and waits for them; ``abort()`` cancels
everything without a checkpoint (what a crash leaves: the store keeps only committed epochs).

Garbage collection: while a runtime runs, full collections are rarer (:mod:`stream.runtime.gc_policy`).

Durability of a write: ``write(source, chunk, ticket)`` stamps ``ticket.epoch`` (a
:class:`WriteTicket`), on the loop, with the epoch the chunk joined; the chunk is durable once
``store.max_committed_epoch >= ticket.epoch`` (:meth:`WriteTicket.durable`). A ticket still
unstamped, or stamped above the committed epoch, when the graph fails names a write that the
failure lost: the SQL layer keeps such chunks and writes them again into the rebuilt graph
(sql/database.py).

Data errors: a value that fails an expression is NULL, never a failure (stream/expr_errors.py);
:meth:`data_errors` returns each actor's counts.

Errors: an actor that raises fails the graph, and so does a checkpoint that fails (the store
cannot commit); the next ``write``/``barrier``/``stop`` raises the failure
(:class:`~stream.errors.ActorFailedError` with the original error as ``__cause__``, or
:class:`~stream.errors.CheckpointFailedError`), and :attr:`failure` holds it.
Thread-safety: the building methods belong to one thread before ``start``; after it,
``write``, ``barrier``, ``flush``, ``stop`` and ``abort`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import TimeoutError as FutureTimeout

from stream.cache import DEFAULT_BUDGET_BYTES, MemoryBudget
from stream.errors import ActorFailedError, CheckpointFailedError, StreamError
from stream.executors.source import TableSource
from stream.message import Stop
from stream.runtime import gc_policy
from stream.runtime.actor import Actor
from stream.row_id import RowIdHorizon
from stream.runtime.barrier_loop import BarrierLoop, CheckpointHandoff
from stream.runtime.channel import DEFAULT_CAPACITY, Channel, Merge, Receiver, SourceChannel
from stream.runtime.dispatch import BroadcastDispatcher, HashDispatcher, SimpleDispatcher, vnode_mapping
from stream.schema import Schema
from stream.tasks import lives_with_the_loop

_POLL_S = 0.05


def _stamp(ticket: WriteTicket, rt: StreamRuntime) -> None:
    """On the loop, as the chunk enters its source queue: the epoch it joins is the current
    barrier's (``BarrierLoop.epoch``: sends of a barrier to every source never yield between)."""
    ticket.epoch = rt.barrier_loop.epoch


class WriteTicket:
    """Which epoch a written chunk joined (``epoch``: None until the loop took the chunk)."""

    __slots__ = ("epoch",)

    def __init__(self):
        self.epoch: int | None = None

    def durable(self, committed_epoch: int) -> bool:
        """Whether the chunk's epoch is committed (``committed_epoch``: the store's
        ``max_committed_epoch``)."""
        return self.epoch is not None and self.epoch <= committed_epoch

    def __repr__(self) -> str:
        return f"WriteTicket(epoch={self.epoch})"


class SourceHandle:
    """A table's input: ``executor`` heads its DML actor; write through ``StreamRuntime.write``."""

    def __init__(self, name: str, schema: Schema, stream_key, capacity: int):
        self.name = name
        self.channel = SourceChannel(capacity, name)
        self.executor = TableSource(self.channel, schema, stream_key)


class StreamRuntime:
    """One stream graph over one store (module docstring)."""

    def __init__(self, store, *, barrier_interval_ms: int | None = None, checkpoint_frequency: int = 1,
                 channel_capacity: int = DEFAULT_CAPACITY, max_in_flight_barriers: int = 4,
                 memory_budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.store = store
        self.budget = MemoryBudget(memory_budget_bytes)
        self.barrier_interval_ms = barrier_interval_ms
        self.checkpoint_frequency = max(1, int(checkpoint_frequency))
        self.channel_capacity = channel_capacity
        self.max_in_flight = max(1, max_in_flight_barriers)
        self.sources: list[SourceHandle] = []
        self.actors: list[Actor] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list = []
        self._failure: BaseException | None = None
        self.barrier_loop: BarrierLoop | None = None
        # ids the DML executors borrowed ahead of the clock: waited for before each commit
        # (stream/runtime/barrier_loop.py), not at each barrier in the DML executors
        self.row_id_horizon = RowIdHorizon()
        self._ticker = None
        self._gc_held = False

    # --- building -------------------------------------------------------------------------------

    def _require_building(self) -> None:
        if self._loop is not None:
            raise StreamError("the graph is running: build it before start()")

    def source(self, name: str, schema, stream_key=()) -> SourceHandle:
        """A new table input (DML channel + barriers)."""
        self._require_building()
        handle = SourceHandle(name, schema if isinstance(schema, Schema) else Schema(schema), stream_key,
                              self.channel_capacity)
        self.sources.append(handle)
        return handle

    def actor(self, executor) -> Actor:
        """A new actor running ``executor`` (the last of its chain). Every executor of the
        chain built without a ``budget`` moves its caches to the runtime's :attr:`budget`."""
        self._require_building()
        todo = [executor]
        while todo:
            ex = todo.pop()
            ex.use_budget(self.budget)
            todo.extend(ex.inputs)
        actor = Actor(len(self.actors) + 1, executor, self._collect)
        self.actors.append(actor)
        return actor

    def exchange(self, upstreams, n: int = 1, kind: str = "simple", key=None) -> list:
        """Connect ``upstreams`` (actors with one output schema) to ``n`` new downstream heads:
        ``kind`` "simple" (n = 1), "broadcast" or "hash" (by the vnode of columns ``key``).
        Returns the ``n`` head executors (a Receiver or a Merge each) for downstream actors."""
        self._require_building()
        upstreams = list(upstreams)
        if not upstreams or n < 1:
            raise StreamError("an exchange needs upstream actors and n >= 1")
        first = upstreams[0].executor
        for up in upstreams[1:]:
            if up.executor.schema != first.schema:
                raise StreamError(f"exchange upstreams disagree: {up.executor.schema!r} vs {first.schema!r}")
        if kind == "simple" and n != 1:
            raise StreamError("a simple exchange has exactly one downstream")
        if kind == "hash" and not key:
            raise StreamError("a hash exchange needs key column indices")
        if kind not in ("simple", "broadcast", "hash"):
            raise StreamError(f"unknown exchange kind {kind!r}")
        grid = []
        mapping = vnode_mapping(n)
        for up in upstreams:
            row = [Channel(self.channel_capacity, f"{up.actor_id}->{i}") for i in range(n)]
            grid.append(row)
            if kind == "simple":
                up.dispatchers.append(SimpleDispatcher(row[0]))
            elif kind == "broadcast":
                up.dispatchers.append(BroadcastDispatcher(row))
            else:
                up.dispatchers.append(HashDispatcher(row, key, mapping))
        heads = []
        for i in range(n):
            channels = [row[i] for row in grid]
            if len(channels) == 1:
                heads.append(Receiver(channels[0], first.schema, first.stream_key))
            else:
                heads.append(Merge(channels, first.schema, first.stream_key))
        return heads

    # --- running --------------------------------------------------------------------------------

    def start(self) -> int:
        """Start every actor and pass the initial barrier; returns the first epoch."""
        self._require_building()
        if not self.actors:
            raise StreamError("no actors to run")
        gc_policy.acquire()   # fewer full collections while caches hold millions of objects
        self._gc_held = True
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="stream-runtime", daemon=True)
        self._thread.start()
        barrier = self._call(self._start())
        return barrier.curr_epoch

    async def _start(self):
        self.barrier_loop = BarrierLoop(self.store, [s.channel for s in self.sources],
                                        [a.actor_id for a in self.actors], self.store.max_committed_epoch,
                                        on_checkpoint_failure=self._checkpoint_failed,
                                        row_id_horizon=self.row_id_horizon)
        self.barrier_loop.start()
        for actor in self.actors:
            task = lives_with_the_loop(asyncio.ensure_future(actor.run()))
            task.add_done_callback(lambda t, a=actor: self._actor_done(a, t))
            self._tasks.append(task)
        future = await self.barrier_loop.inject(checkpoint=False)
        barrier = await future
        if self.barrier_interval_ms:
            self._ticker = lives_with_the_loop(asyncio.ensure_future(self._tick()))
        return barrier

    def start_ticker(self, barrier_interval_ms: int) -> None:
        """Start injecting barriers every ``barrier_interval_ms`` (for a runtime started without
        an interval: the SQL layer writes its catalog records into the first epoch before any
        other barrier may seal it)."""
        self._check()

        async def go():
            if self._ticker is None:
                self.barrier_interval_ms = barrier_interval_ms
                self._ticker = lives_with_the_loop(asyncio.ensure_future(self._tick()))
        self._call(go())

    def _actor_done(self, actor: Actor, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        failure = ActorFailedError(actor.actor_id, f"{type(exc).__name__}: {exc}")
        failure.__cause__ = exc
        self._fail_graph(failure)

    def _checkpoint_failed(self, exc: BaseException) -> None:
        failure = CheckpointFailedError(f"{type(exc).__name__}: {exc}")
        failure.__cause__ = exc
        self._fail_graph(failure)

    def _fail_graph(self, failure: StreamError) -> None:
        """The first failure wins: every waiter gets it, and the actors end."""
        if self._failure is None:
            self._failure = failure
            if self.barrier_loop is not None:
                self.barrier_loop.fail(failure)
            for a in self.actors:   # unblock the others: ending their outputs ends the graph
                for d in a.dispatchers:
                    d.close_nowait()

    def _collect(self, actor_id, barrier) -> None:
        self.barrier_loop.collect(actor_id, barrier)

    async def _tick(self) -> None:
        count = 0
        while True:
            await asyncio.sleep(self.barrier_interval_ms / 1000)
            while self.barrier_loop.in_flight() >= self.max_in_flight:
                await asyncio.sleep(self.barrier_interval_ms / 4000)
            count += 1
            try:
                await self.barrier_loop.inject(checkpoint=count % self.checkpoint_frequency == 0)
            except BaseException:
                return

    def _call(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop and wait for it, raising the graph's failure if any."""
        return self._wait(self._submit(coro))

    def _submit(self, coro):
        """Schedule ``coro`` on the loop; its ``concurrent.futures.Future``."""
        if self._loop is None:
            coro.close()
            raise StreamError("the graph is not running: call start()")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _wait(self, future):
        """The result of ``future`` (of a coroutine on the loop), raising the graph's failure
        if an actor failed while it was awaited."""
        while self._failure is None or not future.done():
            try:
                return future.result(_POLL_S)
            except FutureTimeout:
                if self._failure is not None:   # an actor failed: what we wait for may never come
                    future.cancel()
                    break
        if future.done() and not future.cancelled():
            return future.result()
        # raised outside the except block: ``raise ... from None`` would clear the failure's
        # own __cause__ (the actor's or the checkpoint's error) for every later reader
        raise self._failure

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    def write(self, source: SourceHandle, chunk, ticket: WriteTicket | None = None) -> None:
        """Hand a DML chunk to ``source`` (any thread but the runtime's own; blocks while
        ``channel_capacity`` of its chunks are in flight). ``ticket`` gets the chunk's epoch
        (module docstring, "Durability of a write")."""
        self._check()
        loop = self._loop
        if loop is None:
            raise StreamError("the graph is not running: call start()")
        on_put = None if ticket is None else functools.partial(_stamp, ticket, self)
        while not source.channel.offer(loop, chunk, _POLL_S, on_put):
            self._check()

    def barrier(self, checkpoint: bool = True, mutation=None, *, wait: bool = True):
        """Inject a barrier and wait until every actor passed it (and the store committed its
        ``prev_epoch`` for a checkpoint). Returns the barrier; with ``wait=False`` returns at
        once a ``concurrent.futures.Future`` of it (the writer goes on while the barrier
        flows and the checkpoint runs, as with the ticker)."""
        self._check()
        handoff = CheckpointHandoff() if wait and checkpoint else None

        async def go():
            future = await self.barrier_loop.inject(checkpoint, mutation, handoff)
            return await future
        if not wait:
            return self._submit(go())
        if handoff is None:
            return self._call(go())
        return self._checkpoint_here(handoff, self._submit(go()))

    def _checkpoint_here(self, handoff: CheckpointHandoff, future):
        """Wait for ``handoff``'s barrier and run its checkpoint on this thread (barrier_loop
        module doc); the barrier. ``future``: the barrier's own, which raises the graph's
        failure when the barrier or its checkpoint fails."""
        while not handoff.wait(_POLL_S):
            if (future.done() or self._failure is not None) and handoff.withdraw():
                return self._wait(future)   # failed before its turn: raises the failure
        barrier = handoff.barrier
        try:
            self.barrier_loop.checkpoint(barrier.prev_epoch)
        except Exception as exc:
            handoff.finish(exc)        # the loop fails the graph with it, as for its own
            return self._wait(future)  # raises the graph's failure (CheckpointFailedError)
        except BaseException as exc:   # (KeyboardInterrupt: never into the loop's tasks)
            handoff.finish(StreamError(f"the checkpoint was interrupted ({type(exc).__name__})"))
            raise
        handoff.finish(None)
        return barrier

    def flush(self) -> int:
        """Make everything written so far visible: a checkpoint barrier; the committed epoch."""
        return self.barrier(True).prev_epoch

    def stop(self) -> int:
        """Stop every actor after a checkpointed Stop barrier; returns the committed epoch."""
        self._check()
        self._call(self._stop_ticker())   # no barrier after the Stop barrier
        ids = frozenset(a.actor_id for a in self.actors)
        barrier = self.barrier(True, Stop(ids))
        self._call(self._join())
        self._shutdown()
        return barrier.prev_epoch

    async def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
            self._ticker = None

    async def _join(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def abort(self) -> None:
        """Cancel everything now, without a checkpoint (a crash, for tests and shutdown after
        an error). The store keeps what was committed."""
        if self._loop is None:
            return

        async def cancel():
            if self._ticker is not None:
                self._ticker.cancel()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(cancel(), self._loop).result()
        self._shutdown()

    def _shutdown(self) -> None:
        if self._gc_held:
            self._gc_held = False
            gc_policy.release()
        loop, self._loop = self._loop, None
        if loop is None:
            return

        async def quiesce():   # cancel the loop's own tasks and let them finish cancelling
            tasks = [t for t in (self._ticker, self.barrier_loop and self.barrier_loop._task) if t is not None]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # close the async generators still suspended (an actor's input stream), as asyncio.run
            # does: else the collector finalizes them later on the closed loop ("Task was
            # destroyed but it is pending!")
            await loop.shutdown_asyncgens()
        asyncio.run_coroutine_threadsafe(quiesce(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join()
        loop.close()

    @property
    def failure(self):
        return self._failure

    def data_errors(self) -> dict:
        """``{actor_id: {kind: rows}}``: the data errors each actor turned into NULLs."""
        return {a.actor_id: dict(a.data_errors) for a in self.actors if a.data_errors}

    def __enter__(self) -> StreamRuntime:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self._loop is None:
            return
        if exc_type is None and self._failure is None:
            self.stop()
        else:
            self.abort()
