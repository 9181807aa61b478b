"""The barrier loop: injects barriers into the sources, collects them from every actor, and
checkpoints the store (seed 002, "Barrier based checkpoint"; RisingWave's barrier manager).

Per barrier: ``inject`` takes ``curr_epoch = new_epoch()`` (kept above the previous epoch),
sends ``Barrier(prev_epoch, curr_epoch, checkpoint, mutation)`` into every source channel (it
waits while a channel is full: backpressure reaches the barrier loop too), and records the set
of actors that must pass it. ``collect`` is called by each actor after passing the barrier on.
When the set is empty, the barrier is complete; completed barriers are finished strictly in
epoch order by one task: a checkpoint barrier runs ``store.checkpoint(prev_epoch)`` in a worker
thread (the actors go on with ``curr_epoch`` meanwhile; the store allows writes above the
sealed epoch), then the barrier's future resolves. A non-checkpoint barrier resolves when
collected; its epoch is committed by the next checkpoint (``commit_epoch`` publishes every
epoch up to its argument).

Checkpoint by the waiter (:class:`Handoff`): a barrier injected with a handoff (a thread blocked
in ``StreamRuntime.barrier``, e.g. SQL ``FLUSH``) has its checkpoint run by that thread instead
of a worker: in its turn the task resolves ``handoff.turn``, the waiting thread wakes, runs
``store.checkpoint(prev_epoch)`` and reports the outcome to ``handoff.done`` without waiting
(``Handoff.finish``), and the task goes on as after a worker's checkpoint. The order is the
same (the task waits for ``done`` before finishing any later barrier) and so is a failure's path
(the error goes to ``on_checkpoint_failure`` and fails every barrier); it saves two thread
hand-offs per checkpoint (loop -> worker -> loop, each a wake-up and a GIL switch). A waiter that
leaves before its turn (interrupted, or the graph failed) abandons the handoff, and the task
runs that checkpoint in a worker as before.

A checkpoint that raises fails every barrier not finished and calls ``on_checkpoint_failure``
(the runtime then fails the graph: nothing after it can commit).

Invariants: an epoch is checkpointed only after every actor committed its state tables for
it, so ``max_committed_epoch`` is always a consistent cut of the whole graph (an MV equals its
computation over the base tables at that epoch). Stop mutations shrink the actor set.
Timings (inject -> collected -> committed, seconds) are kept in ``latencies``.

Callers: :mod:`stream.runtime.runtime` (on the event loop's thread only).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from hummock.key import EPOCH_PHYSICAL_SHIFT, new_epoch
from stream.errors import BarrierError
from stream.message import Barrier, Stop


def _retrieve(future) -> None:
    if not future.cancelled():
        future.exception()


ABANDONED = object()   # Handoff.done's value when its waiter left: the loop checkpoints itself


def _resolve(future, value) -> None:
    if not future.done():
        future.set_result(value)


class Handoff:
    """A checkpoint run by the thread that waits for its barrier (module docstring): ``turn``
    resolves on the loop when the checkpoint may run, ``done`` gets its outcome."""

    __slots__ = ("loop", "turn", "done", "barrier")

    def __init__(self, loop):
        """Made by the waiting thread before it injects, so it can always abandon it."""
        self.loop = loop
        self.barrier = None   # set by inject
        self.turn = self.loop.create_future()
        self.turn.add_done_callback(_retrieve)   # failed by fail() after its waiter left
        self.done = self.loop.create_future()

    def _give_turn(self) -> bool:
        """On the loop: wake the waiter; False if it already left (abandoned or failed)."""
        if self.turn.done():
            return False
        self.turn.set_result(None)
        return True

    def finish(self, error: BaseException | None) -> None:
        """From the waiter's thread, after ``store.checkpoint``: its error, or None; never waits."""
        self._post(error)

    def abandon(self) -> None:
        """From the waiter's thread when it leaves without running the checkpoint."""
        self._post(ABANDONED)

    def _post(self, outcome) -> None:
        def post():
            if not self.turn.done():
                self.turn.cancel()   # the turn has not come: the loop will not give it
            _resolve(self.done, outcome)
        try:
            self.loop.call_soon_threadsafe(post)
        except RuntimeError:   # the loop is closed (the runtime shut down): nobody waits
            pass


class _Inflight:
    __slots__ = ("barrier", "remaining", "future", "injected", "collected", "handoff")

    def __init__(self, barrier, remaining, future, handoff=None):
        self.barrier, self.remaining, self.future = barrier, remaining, future
        self.handoff = handoff
        self.injected = time.perf_counter()
        self.collected = None


class BarrierLoop:
    """Injection, collection and checkpoints (module docstring)."""

    def __init__(self, store, source_channels, actor_ids, prev_epoch: int, on_checkpoint_failure=None):
        self.store = store
        self.on_checkpoint_failure = on_checkpoint_failure
        self.source_channels = list(source_channels)
        self.actor_ids = set(actor_ids)
        self.epoch = prev_epoch
        self._inflight: dict = {}
        self._order: deque = deque()
        self._completed = asyncio.Queue()
        self._task = None
        self.failure: BaseException | None = None
        self.latencies: list = []   # (collect seconds, commit seconds) per barrier

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._finish_in_order())

    def next_epoch(self) -> int:
        epoch = new_epoch()
        if epoch <= self.epoch:   # a clock behind the committed epoch (another process's)
            epoch = self.epoch + (1 << EPOCH_PHYSICAL_SHIFT)
        return epoch

    async def inject(self, checkpoint: bool = True, mutation=None, handoff: Handoff | None = None) -> asyncio.Future:
        """Send a new barrier into every source; returns the future of its completion
        (resolves to the barrier once collected, and checkpointed if ``checkpoint``). With a
        ``handoff`` (a checkpoint barrier) its waiter runs the checkpoint (module docstring)."""
        if self.failure is not None:
            raise self.failure
        barrier = Barrier(self.epoch, self.next_epoch(), checkpoint, mutation)
        self.epoch = barrier.curr_epoch
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)   # a ticker's barrier has no waiter: no "never retrieved"
        inflight = _Inflight(barrier, set(self.actor_ids), future, handoff if checkpoint else None)
        if inflight.handoff is not None:
            handoff.barrier = barrier
        self._inflight[barrier.curr_epoch] = inflight
        self._order.append(inflight)
        if isinstance(mutation, Stop):
            self.actor_ids -= set(mutation.actor_ids)
        if not inflight.remaining:
            self._complete(inflight)
        for channel in self.source_channels:
            await channel.send(barrier)
        return future

    def collect(self, actor_id: int, barrier: Barrier) -> None:
        inflight = self._inflight.get(barrier.curr_epoch)
        if inflight is None or actor_id not in inflight.remaining:
            raise BarrierError(f"actor {actor_id} reported {barrier!r}, which it does not owe")
        inflight.remaining.discard(actor_id)
        if not inflight.remaining:
            self._complete(inflight)

    def _complete(self, inflight) -> None:
        inflight.collected = time.perf_counter()
        del self._inflight[inflight.barrier.curr_epoch]
        self._completed.put_nowait(inflight)

    async def _finish_in_order(self) -> None:
        while True:
            inflight = await self._completed.get()
            head = self._order.popleft()
            assert head is inflight, "barriers complete in injection order"
            barrier = inflight.barrier
            try:
                if barrier.checkpoint:
                    handoff, outcome = inflight.handoff, ABANDONED
                    if handoff is not None and handoff._give_turn():
                        outcome = await handoff.done   # its waiter runs the checkpoint
                    if outcome is ABANDONED:
                        await asyncio.to_thread(self.store.checkpoint, barrier.prev_epoch)
                    elif outcome is not None:
                        raise outcome   # the waiter's checkpoint failed
            except asyncio.CancelledError:   # the runtime shuts down
                for pending in self._order:
                    pending.future.cancel()
                inflight.future.cancel()
                raise
            except BaseException as exc:
                if self.on_checkpoint_failure is not None:   # the runtime fails the whole graph
                    self.on_checkpoint_failure(exc)          # (and this loop, with its error)
                self.fail(exc)
                return
            done = time.perf_counter()
            self.latencies.append((inflight.collected - inflight.injected, done - inflight.injected))
            if not inflight.future.done():
                inflight.future.set_result(barrier)

    def in_flight(self) -> int:
        return len(self._order)

    def fail(self, exc: BaseException) -> None:
        """Fail every barrier not yet finished (an actor or a checkpoint failed)."""
        if self.failure is None:
            self.failure = exc
        for inflight in self._order:
            if not inflight.future.done():
                inflight.future.set_exception(exc)
            if inflight.handoff is not None and not inflight.handoff.turn.done():
                inflight.handoff.turn.set_exception(exc)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
