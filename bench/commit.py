"""Benchmark ``commit``: the wall time of one durable checkpoint (issue 30: a FLUSH per 10k-row
batch pays one flush SST and one manifest delta).

Workload: a fresh local store (``compactor="none"``: only the checkpoint's own I/O), then per
epoch one ``ingest_batch`` of ``--rows`` entries (16-byte keys, 48-byte values: about a 10k-row
batch of bench.peers' bids) and ``checkpoint(epoch)``; the clock runs around ``checkpoint``
only (seal, build and upload the SST, write the delta), for ``--epochs`` epochs.

Two protocols, run alternately in the same process (``--rounds`` rounds, each runs both, the
order alternating), so both see the same disk:

- ``before``: the commit path before issue 30's durability work -- the sync's upload handed to
  the uploader thread, the flush SST fsynced at upload (file, rename, directory), then the
  delta (its temporary file fsynced, linked, directory fsynced): four fsyncs waited for one
  after the other. Obtained by turning off ``LocalObjectStore.deferred_durability`` and the
  uploader's inline runs (``Uploader.submit(inline=...)``) for the run.
- ``after``: the engine's path: ``sync`` builds and uploads the SST on the calling thread
  (hummock/uploader.py), published unsynced; the delta's ``upload_if_absent`` fsyncs {SST, SST
  directory, delta temp} concurrently and, after the link, the manifest directory: two rounds
  (docs/object_store.md, "Deferred durability").

Figures per protocol: median, mean and max ms per checkpoint over every epoch of every round
(the max shows a manifest rotation's stall: one checkpoint in ``checkpoint_interval``), the mean
CPU ms per checkpoint (``process_time``: every thread of the process), fsyncs per epoch (every
``os.fsync`` of this process counted), and the median fsync duration. fsync
cost on a shared virtual disk moves by 10x within minutes (other processes' writeback joins
every journal commit), so only the alternating comparison is meaningful, never one figure
alone. Prints a table and one JSON line ``{"bench": "commit", ...}`` with ``machine``.

Run: ``python -m bench.commit [--epochs 200] [--rounds 3] [--rows 10000]``.
Callers: users; tests/test_bench_commit.py (tiny sizes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import threading
import time

from bench.harness import machine
from hummock import HummockStorage, StorageOptions
from hummock.object_store import LocalObjectStore
from hummock.uploader import Uploader

PROTOCOLS = ("before", "after")


class _FsyncCounter:
    """Wraps ``os.fsync`` for the duration: counts calls and their wall time (any thread)."""

    def __init__(self):
        self.durations: list[float] = []
        self._lock = threading.Lock()

    def __enter__(self):
        self._real = os.fsync

        def fsync(fd):
            started = time.perf_counter()
            try:
                self._real(fd)
            finally:
                with self._lock:
                    self.durations.append(time.perf_counter() - started)
        os.fsync = fsync
        return self

    def __exit__(self, *exc):
        os.fsync = self._real


@contextlib.contextmanager
def _protocol(name: str):
    if name == "after":
        yield
        return
    deferred, submit = LocalObjectStore.deferred_durability, Uploader.submit
    LocalObjectStore.deferred_durability = lambda self: contextlib.nullcontext()
    Uploader.submit = lambda self, task, inline=False: submit(self, task)
    try:
        yield
    finally:
        LocalObjectStore.deferred_durability, Uploader.submit = deferred, submit


def run_once(protocol: str, epochs: int, rows: int) -> dict:
    """Checkpoint ``epochs`` epochs of ``rows`` entries on a fresh store; per-epoch walls and fsyncs."""
    tmp = tempfile.mkdtemp(prefix="bench-commit-")
    try:
        with _protocol(protocol):
            store = HummockStorage.open(os.path.join(tmp, "db"), StorageOptions(compactor="none"))
            try:
                walls, cpus = [], []
                with _FsyncCounter() as fsyncs:
                    for e in range(1, epochs + 1):
                        batch = [(b"%08d%08d" % (e, i), b"v" * 48) for i in range(rows)]
                        store.ingest_batch(1, batch, e << 16)
                        started, cpu = time.perf_counter(), time.process_time()
                        store.checkpoint(e << 16)
                        walls.append(time.perf_counter() - started)
                        cpus.append(time.process_time() - cpu)
            finally:
                store.close()
        return {"walls": walls, "cpus": cpus, "fsyncs": fsyncs.durations, "epochs": epochs}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(epochs: int, rounds: int, rows: int) -> dict:
    runs = {p: [] for p in PROTOCOLS}
    run_once("after", 3, rows)   # warm-up: imports, caches
    for r in range(rounds):
        for protocol in (PROTOCOLS if r % 2 == 0 else PROTOCOLS[::-1]):
            runs[protocol].append(run_once(protocol, epochs, rows))
    out = {}
    for protocol, results in runs.items():
        walls = [w for res in results for w in res["walls"]]
        fsyncs = [f for res in results for f in res["fsyncs"]]
        cpus = [c for res in results for c in res["cpus"]]
        n = sum(res["epochs"] for res in results)
        out[protocol] = {
            "ms_per_checkpoint_median": round(statistics.median(walls) * 1000, 3),
            "ms_per_checkpoint_mean": round(statistics.mean(walls) * 1000, 3),
            "ms_per_checkpoint_max": round(max(walls) * 1000, 3),
            "cpu_ms_per_checkpoint_mean": round(statistics.mean(cpus) * 1000, 3),
            "round_medians_ms": [round(statistics.median(res["walls"]) * 1000, 3) for res in results],
            "fsyncs_per_epoch": round(len(fsyncs) / n, 2),
            "fsync_ms_median": round(statistics.median(fsyncs) * 1000, 3) if fsyncs else None,
        }
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    figures = run(args.epochs, args.rounds, args.rows)
    print(f"{'protocol':14s} {'median ms':>10s} {'mean ms':>9s} {'max ms':>8s} {'CPU ms':>7s} "
          f"{'fsyncs/epoch':>13s} {'fsync median ms':>16s}  round medians")
    for protocol, f in figures.items():
        print(f"{protocol:14s} {f['ms_per_checkpoint_median']:10.2f} {f['ms_per_checkpoint_mean']:9.2f} "
              f"{f['ms_per_checkpoint_max']:8.1f} {f['cpu_ms_per_checkpoint_mean']:7.2f} "
              f"{f['fsyncs_per_epoch']:13.2f} {f['fsync_ms_median']:16.3f}  {f['round_medians_ms']}")
    print(json.dumps({"bench": "commit", "epochs": args.epochs, "rounds": args.rounds, "rows": args.rows,
                      "protocols": figures, "machine": machine()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
