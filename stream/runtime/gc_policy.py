"""The cyclic garbage collector's policy while stream runtimes run.

Executor caches hold millions of long-lived container objects (join rows, aggregation groups,
top-N windows). CPython's collector walks every tracked object of the oldest generation in a
full collection, and with the default thresholds (700, 10, 10) it runs one whenever the young
survivors grow by a quarter of the old ones: measured on ``bench.stream hash_agg_1m`` (1M
groups, 2,000 chunks), 38 full collections took 7.3 s of the run's 14.8 s of CPU. Nothing a
runtime allocates per chunk needs the full collector to be freed (chunks, rows and cache
entries are freed by reference counting; the young generations still collect young cycles),
so while at least one runtime runs, the oldest generation's threshold is raised to
``FULL_COLLECTION_THRESHOLD`` (a full collection after about 7M surviving allocations instead
of 70k); the thresholds the process had are restored when the last runtime stops.

Invariants: ``acquire``/``release`` are counted; the thresholds are changed on the first
acquire and restored on the last release only if nobody changed them in between.
Who may call: :class:`~stream.runtime.runtime.StreamRuntime` (``start`` / shutdown), and the Spark
runtime's stage tasks (``sql/spark_pipeline/task.py``, for the length of a task).
"""

from __future__ import annotations

import gc
import threading

FULL_COLLECTION_THRESHOLD = 1000

_lock = threading.Lock()
_users = 0
_saved: tuple | None = None     # the thresholds before the first acquire
_installed: tuple | None = None  # the thresholds acquire set


def acquire() -> None:
    """A runtime starts: raise the oldest generation's threshold (first runtime only)."""
    global _users, _saved, _installed
    with _lock:
        _users += 1
        if _users == 1:
            _saved = gc.get_threshold()
            g0, g1, g2 = _saved
            _installed = (g0, g1, max(g2, FULL_COLLECTION_THRESHOLD))
            gc.set_threshold(*_installed)


def release() -> None:
    """A runtime stopped: restore the process's thresholds after the last one (unless they
    were changed meanwhile by someone else, whose choice then stands)."""
    global _users, _saved, _installed
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0:
            if gc.get_threshold() == _installed and _saved is not None:
                gc.set_threshold(*_saved)
            _saved = _installed = None


def active_runtimes() -> int:
    """How many runtimes hold the policy (tests)."""
    return _users
