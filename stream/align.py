"""Barrier alignment across several inputs (fan-in: Merge, Union, joins).

``align_barriers(streams, identity)`` pulls every input concurrently and yields
``(input_index, message)`` for chunks and watermarks, and ``(None, barrier)`` once per epoch:
when an input delivers a barrier it is not pulled again until every input has delivered the
barrier of the same epoch (Chandy-Lamport alignment); then the barrier is yielded once and all
inputs resume. So every message yielded before a barrier belongs to that barrier's
``prev_epoch`` on every input, and nothing of the next epoch overtakes it.

Invariants: the inputs' barriers must agree (same ``prev_epoch`` and ``curr_epoch``); otherwise
:class:`~stream.errors.BarrierError`. An input that ends before the others raises too, unless
all end together (after a stop barrier). When several inputs have a message ready, the lowest
index goes first (deterministic). While an input waits at a barrier its channel fills up and
its upstream blocks: backpressure, not buffering.

Callers: :mod:`stream.executors.union`, :mod:`stream.runtime.channel` (Merge), joins.
"""

from __future__ import annotations

import asyncio

from stream.errors import BarrierError
from stream.message import Barrier
from stream.tasks import lives_with_the_loop


async def align_barriers(streams, identity: str):
    """Yield ``(i, message)`` and ``(None, barrier)`` as the module docstring says."""
    iters = [s.__aiter__() for s in streams]
    n = len(iters)
    if n == 1:   # nothing to align: no tasks per message
        async for msg in iters[0]:
            yield (None, msg) if type(msg) is Barrier else (0, msg)
        return
    pending: dict = {}
    blocked: dict = {}
    ended: set = set()

    def arm(i: int) -> None:   # (a pull lives as long as its actor: stream/tasks.py)
        pending[lives_with_the_loop(asyncio.ensure_future(iters[i].__anext__()))] = i

    try:
        for i in range(n):
            arm(i)
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=pending.__getitem__):
                i = pending.pop(task)
                try:
                    msg = task.result()
                except StopAsyncIteration:
                    ended.add(i)
                    continue
                if type(msg) is Barrier:
                    blocked[i] = msg
                else:
                    yield i, msg
                    arm(i)
            if ended:
                if len(ended) == n:
                    return
                if len(ended) + len(blocked) == n and not pending:
                    raise BarrierError(f"{identity}: inputs {sorted(ended)} ended while the others wait at a barrier")
            if len(blocked) == n:
                barriers = list(blocked.values())
                first = barriers[0]
                for b in barriers[1:]:
                    if (b.prev_epoch, b.curr_epoch) != (first.prev_epoch, first.curr_epoch):
                        raise BarrierError(f"{identity}: inputs deliver different barriers {first!r} and {b!r}")
                blocked.clear()
                yield None, first
                for i in range(n):
                    arm(i)
    finally:
        for task in pending:
            task.cancel()
