"""The stream runtime's own asyncio tasks: actors, the barrier loop, the ticker, and the pulls a
fan-in (``stream/align.py``) keeps pending on its inputs.

Job: mark such a task as living as long as the runtime's event loop. Such a task is collected
while still pending only when the interpreter exits with the runtime running (a connection never
closed: the loop's thread is a daemon), which loses what a crash would lose and nothing
committed; asyncio would print "Task was destroyed but it is pending!" for each of them. A
runtime that is stopped ends them normally, so nothing else is silenced.

A module of its own so that ``stream/align.py`` (imported by executors) and
``stream/runtime/`` (which imports the executors) can both use it without a cycle.
Callers: :mod:`stream.runtime.runtime`, :mod:`stream.runtime.barrier_loop`, :mod:`stream.align`.
"""

from __future__ import annotations

import asyncio


def lives_with_the_loop(task: asyncio.Task) -> asyncio.Task:
    """``task``, told not to log "Task was destroyed but it is pending!" (module docstring)."""
    task._log_destroy_pending = False   # (a private flag of asyncio.Task, read only by its finalizer)
    return task
