"""Timing helpers shared by the benchmarks: warm-up, repeats, medians, and reporting.

Method: each workload runs once untimed (warm-up: caches, lazy imports, schema compilation),
then ``repeats`` timed runs with ``time.perf_counter``; the figure reported is the median rate.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time


def median_rate(fn, items: int, repeats: int = 5) -> float:
    """Items per second of ``fn()`` (which processes ``items`` items), median of ``repeats``."""
    fn()
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        timings.append(time.perf_counter() - start)
    return items / statistics.median(timings)


#: ``--compactor`` choices of the benchmarks (``compactor_options``)
COMPACTORS = ("default", "local", "workers", "none")


def compactor_options(name: str) -> dict:
    """``StorageOptions`` keywords for a bench's ``--compactor``: ``default`` the store's
    defaults (merges in a worker process on 2+ cores), ``local`` merges in the background
    thread (``compaction_workers=0``), ``workers`` one worker process, ``none`` no compaction."""
    if name not in COMPACTORS:
        raise ValueError(f"--compactor must be one of {COMPACTORS}, got {name!r}")
    return {"default": {}, "local": {"compactor": "local", "compaction_workers": 0},
            "workers": {"compactor": "local", "compaction_workers": 1}, "none": {"compactor": "none"}}[name]


def machine() -> dict:
    return {"python": platform.python_version(), "machine": platform.machine(),
            "processor": platform.processor() or "unknown"}


def report(name: str, rows: list[dict], columns: list[str]) -> None:
    """Print ``rows`` as an aligned table, then one JSON line ``{"bench": name, ...}``."""
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))
    print(json.dumps({"bench": name, "machine": machine(), "results": rows}, sort_keys=True))
    sys.stdout.flush()


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return "" if value is None else str(value)
