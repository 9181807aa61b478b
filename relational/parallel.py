"""The threads batch reads and batch operators run their parts in, and how many there are.

Job: one process-wide pool of worker threads, one per usable core, made on first use, for work
whose heavy part releases the GIL -- a native table scan's block walk
(:meth:`relational.storage_table.StorageTable.read_split`), Arrow's compute kernels (the batch
engine's two-phase GROUP BY, ``sql/batch/vector.py``). Submitters wait for their own futures;
nothing is shared between tasks but the pool. A task never submits to the pool and waits (the
workers could all be waiting): callers check :func:`in_pool` and run serially there.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_POOL = None
_POOL_LOCK = threading.Lock()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not Linux
        return max(1, os.cpu_count() or 1)


_PREFIX = "hummock-parts"


def in_pool() -> bool:
    """This thread is one of the pool's workers: it must not wait on the pool."""
    return threading.current_thread().name.startswith(_PREFIX)


def pool() -> ThreadPoolExecutor:
    """The shared worker threads: one per usable core, made on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix=_PREFIX)
        return _POOL


__all__ = ["in_pool", "pool", "usable_cores"]
