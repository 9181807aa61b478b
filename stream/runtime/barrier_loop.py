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

Row ids borrowed ahead of the clock (``row_id_horizon``, a :class:`~stream.row_id.RowIdHorizon`
the runtime's DML executors note at each barrier): a checkpoint whose horizon is still ahead of
the clock first syncs the epoch (its SSTs are built and uploaded), then sleeps until the clock
has passed the horizon, then commits -- no committed id is ahead of the clock, and the wait
overlaps the SST build instead of holding up the barrier in every DML executor.

A checkpoint that raises fails every barrier not finished and calls ``on_checkpoint_failure``
(the runtime then fails the graph: nothing after it can commit).

Checkpoints run by their waiter: a barrier injected with a :class:`CheckpointHandoff` (a
thread blocked in ``StreamRuntime.barrier(wait=True)``, e.g. SQL ``FLUSH``) has its checkpoint
run on that waiting thread instead of a worker thread: when its turn comes the loop hands the
epoch over and awaits the outcome, and the waiter returns as soon as the commit did. A FLUSH
then wakes one thread after the barrier is collected instead of three (loop -> worker ->
loop -> waiter); each wake-up of a sleeping thread costs this VM ~0.1-0.3 ms. Order, failure
handling and the row-id wait are the same either way. A waiter that gives up first (the graph
failed while it waited) withdraws the offer, and the loop runs the checkpoint itself.

Invariants: an epoch is checkpointed only after every actor committed its state tables for
it, so ``max_committed_epoch`` is always a consistent cut of the whole graph (an MV equals its
computation over the base tables at that epoch). Stop mutations shrink the actor set.
Timings (inject -> collected -> committed, seconds) are kept in ``latencies``.

Callers: :mod:`stream.runtime.runtime` (on the event loop's thread only).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

from hummock.key import EPOCH_PHYSICAL_SHIFT, new_epoch
from stream.errors import BarrierError
from stream.message import Barrier, Stop
from stream.tasks import lives_with_the_loop


def _retrieve(future) -> None:
    if not future.cancelled():
        future.exception()


class CheckpointHandoff:
    """A waiting thread's offer to run its checkpoint barrier's checkpoint (module docstring).
    The loop calls :meth:`request` in the barrier's turn; the waiter waits for it
    (:meth:`wait`), runs the checkpoint and reports with :meth:`finish`; or gives it back first
    (:meth:`withdraw`)."""

    __slots__ = ("_lock", "_ready", "_withdrawn", "_loop", "_outcome", "barrier")

    def __init__(self):
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._withdrawn = False
        self._loop = self._outcome = self.barrier = None

    def request(self, barrier, loop) -> asyncio.Future | None:
        """Loop side: hand ``barrier``'s checkpoint to the waiter; the future of its outcome, or
        None if the waiter withdrew (the loop checkpoints itself)."""
        with self._lock:
            if self._withdrawn:
                return None
            self.barrier, self._loop = barrier, loop
            self._outcome = loop.create_future()
            self._ready.set()
            return self._outcome

    def wait(self, timeout: float) -> bool:
        """Waiter side: True once the checkpoint is this thread's to run."""
        return self._ready.wait(timeout)

    def withdraw(self) -> bool:
        """Waiter side: give the checkpoint back to the loop; False if it was already handed
        over (the waiter must run it and :meth:`finish`)."""
        with self._lock:
            if self._ready.is_set():
                return False
            self._withdrawn = True
            return True

    def finish(self, error: BaseException | None) -> None:
        """Waiter side: report the checkpoint's outcome to the loop (from any thread)."""
        def settle():
            if not self._outcome.done():
                if error is None:
                    self._outcome.set_result(None)
                else:
                    self._outcome.set_exception(error)
        try:
            self._loop.call_soon_threadsafe(settle)
        except RuntimeError:   # the loop is closed (the runtime was aborted): no one awaits it
            pass


class _Inflight:
    __slots__ = ("barrier", "remaining", "future", "injected", "collected", "handoff")

    def __init__(self, barrier, remaining, future, handoff=None):
        self.barrier, self.remaining, self.future = barrier, remaining, future
        self.injected = time.perf_counter()
        self.collected = None
        self.handoff = handoff


class BarrierLoop:
    """Injection, collection and checkpoints (module docstring)."""

    def __init__(self, store, source_channels, actor_ids, prev_epoch: int, on_checkpoint_failure=None,
                 row_id_horizon=None):
        self.store = store
        self.on_checkpoint_failure = on_checkpoint_failure
        self.row_id_horizon = row_id_horizon
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
        self._task = lives_with_the_loop(asyncio.ensure_future(self._finish_in_order()))

    def next_epoch(self) -> int:
        epoch = new_epoch()
        if epoch <= self.epoch:   # a clock behind the committed epoch (another process's)
            epoch = self.epoch + (1 << EPOCH_PHYSICAL_SHIFT)
        return epoch

    async def inject(self, checkpoint: bool = True, mutation=None, handoff: CheckpointHandoff | None = None
                     ) -> asyncio.Future:
        """Send a new barrier into every source; returns the future of its completion
        (resolves to the barrier once collected, and checkpointed if ``checkpoint``).
        ``handoff``: a checkpoint barrier's waiter runs the checkpoint (module docstring)."""
        if self.failure is not None:
            raise self.failure
        barrier = Barrier(self.epoch, self.next_epoch(), checkpoint, mutation)
        self.epoch = barrier.curr_epoch
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)   # a ticker's barrier has no waiter: no "never retrieved"
        inflight = _Inflight(barrier, set(self.actor_ids), future, handoff if checkpoint else None)
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
                    outcome = None if inflight.handoff is None else inflight.handoff.request(
                        barrier, asyncio.get_running_loop())
                    if outcome is not None:
                        await outcome   # run by the waiter: self.checkpoint on its thread
                    else:
                        await asyncio.to_thread(self.checkpoint, barrier.prev_epoch)
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

    def checkpoint(self, epoch: int) -> None:
        """``epoch``'s checkpoint, on the calling thread (a worker thread of the loop's, or the
        waiter's): if row ids were borrowed ahead of the clock, sync the epoch and sleep until
        the clock passes them (module docstring); then ``store.checkpoint``."""
        horizon = self.row_id_horizon
        if horizon is not None and horizon.ahead_s() > 0:
            self.store.sync(epoch)   # the epoch's SSTs while the clock catches up
            while (ahead := horizon.ahead_s()) > 0:   # (as RowIdGenerator.catch_up)
                time.sleep(ahead)
        self.store.checkpoint(epoch)

    def in_flight(self) -> int:
        return len(self._order)

    def fail(self, exc: BaseException) -> None:
        """Fail every barrier not yet finished (an actor or a checkpoint failed)."""
        if self.failure is None:
            self.failure = exc
        for inflight in self._order:
            if not inflight.future.done():
                inflight.future.set_exception(exc)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
