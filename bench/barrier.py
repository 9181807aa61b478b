"""Barrier benchmark: many small state tables, one checkpoint per epoch (issue 11).

A streaming job's shape: ``--tables`` state tables (default 50) each write ``--rows`` rows (default
100: inserts of new ids and updates of earlier ones, through ``StateTable.write_chunk``) per
epoch; at the barrier every table commits (``StateTable.commit`` ingests its batch) and the
epoch is sealed. Two ways to finish an epoch:

- ``pipelined`` (how the stream layer runs): the writer seals epoch N and goes on with N+1 at
  once; a committer thread runs ``store.commit_epoch(N)``, which waits for N's upload and
  publishes it. Writes of N+1 overlap N's upload.
- ``inline`` (the baseline: what a caller without a committer thread does): the writer calls
  ``store.checkpoint(N)`` itself and waits for it before writing N+1.

Figures: barrier-to-committed latency p50/p99/max (from ``seal_epoch(N)`` to ``commit_epoch(N)``
returning; inline: the checkpoint call), epochs/s and rows/s of the whole run, the longest
write (one table's ``write_chunk`` + ``commit``) while an upload ran, and the overlap: the share
of epochs whose next epoch's writes ran while their own upload was still running (0 would mean
writers waited for uploads). ``--timeline K`` prints K epochs' events in ms from the run's start
(writes of N, seal, upload of N start/end, committed).

Stores: ``local`` (a temp directory, default), ``memory``, ``s3`` (a moto server in this
process, so its request handling shares the interpreter). Default ``StorageOptions`` (the
in-process compactor runs).

Run: ``python -m bench.barrier [--epochs N] [--tables T] [--rows R] [--store local|memory|s3]
[--timeline K] [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import queue
import shutil
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

from bench.harness import report


def _open_store(kind: str):
    from hummock import HummockStorage, StorageOptions
    cleanup = []
    if kind == "memory":
        url = "memory://"
    elif kind == "local":
        url = tempfile.mkdtemp(prefix="bench-barrier-")
        cleanup.append(lambda: shutil.rmtree(url, ignore_errors=True))
    else:
        import os
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tests"))
        from s3_server import MotoS3   # tests/s3_server.py: moto on 127.0.0.1, dummy credentials
        server = MotoS3()
        server.start()
        store = server.new_store()
        cleanup.append(server.stop)
        return HummockStorage.open(store, StorageOptions()), cleanup
    return HummockStorage.open(url, StorageOptions()), cleanup


def _tables(store, count: int):
    from hummock.key import new_epoch
    from relational.state_table import StateTable
    from relational.types import DataType as T
    schema = [("id", T.BIGINT), ("v", T.BIGINT), ("s", T.VARCHAR)]
    epoch = new_epoch()
    tables = []
    for i in range(count):
        t = StateTable(store, 100 + i, schema, [0], dist_key_indices=[0], consistent=False)
        t.init_epoch(epoch)
        tables.append(t)
    return tables, epoch


def _chunks(epochs: int, tables: int, rows: int, seed: int = 3):
    """Per epoch and table ``(ops, columns)``: half inserts of new ids, half update pairs of ids
    written before (after the first epoch)."""
    from relational.state_table import OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT
    rng = np.random.default_rng(seed)
    out = []
    next_id = [0] * tables
    for e in range(epochs):
        per_table = []
        for t in range(tables):
            if e == 0:
                ids = list(range(next_id[t], next_id[t] + rows))
                next_id[t] += rows
                ops = [OP_INSERT] * rows
                vals = [0] * rows
            else:
                fresh = list(range(next_id[t], next_id[t] + rows // 2))
                next_id[t] += rows // 2
                old = rng.choice(next_id[t] - len(fresh), (rows - len(fresh)) // 2, replace=False).tolist()
                ids, ops, vals = list(fresh), [OP_INSERT] * len(fresh), [e] * len(fresh)
                for i in old:   # the pair's old row is not checked (relaxed table)
                    ids += [i, i]
                    ops += [OP_UPDATE_DELETE, OP_UPDATE_INSERT]
                    vals += [e - 1, e]
            per_table.append((np.array(ops, dtype=np.int8),
                              [pa.array(ids, pa.int64()), pa.array(vals, pa.int64()),
                               pa.array([f"row-{i}" for i in ids])]))
        out.append(per_table)
    return out


def run(kind: str, mode: str, epochs: int, n_tables: int, rows: int, timeline: int) -> dict:
    from hummock.key import new_epoch
    store, cleanup = _open_store(kind)
    try:
        tables, epoch = _tables(store, n_tables)
        chunks = _chunks(epochs, n_tables, rows)
        store._upload_log = uploads = []
        events = []                     # (epoch index, writes start, writes end, sealed)
        committed = {}                  # epoch index -> perf_counter when committed
        latencies = []
        longest_write = []              # (duration, start) of each table's write + commit
        pending: queue.Queue = queue.Queue()
        errors = []

        def committer():
            while True:
                item = pending.get()
                if item is None:
                    return
                index, e, sealed = item
                try:
                    store.commit_epoch(e)
                except BaseException as exc:   # noqa: BLE001 -- reported by the run
                    errors.append(exc)
                    return
                done = time.perf_counter()
                committed[index] = done
                latencies.append(done - sealed)
        thread = None
        if mode == "pipelined":
            thread = threading.Thread(target=committer, daemon=True)
            thread.start()
        start = time.perf_counter()
        for index, per_table in enumerate(chunks):
            w0 = time.perf_counter()
            next_epoch = new_epoch()
            for table, (ops, cols) in zip(tables, per_table):
                t0 = time.perf_counter()
                table.write_chunk(ops, cols)
                table.commit(next_epoch)
                longest_write.append((time.perf_counter() - t0, t0))
            w1 = time.perf_counter()
            store.seal_epoch(epoch)
            sealed = time.perf_counter()
            events.append((index, w0, w1, sealed))
            if mode == "pipelined":
                pending.put((index, epoch, sealed))
            else:
                store.checkpoint(epoch)
                committed[index] = time.perf_counter()
                latencies.append(committed[index] - sealed)
            epoch = next_epoch
        if thread is not None:
            pending.put(None)
            thread.join()
        elapsed = time.perf_counter() - start
        if errors:
            raise errors[0]
        store._upload_log = None
    finally:
        store.close()
        for fn in cleanup:
            fn()
    # overlap: epoch N's upload still ran when epoch N+1's writes started
    upload_of = {}
    for kind_, lowest, highest, submitted, finished in uploads:
        if kind_ == "seal":
            upload_of.setdefault(lowest, (submitted, finished))
    index_epoch = {}
    e_sorted = sorted(upload_of)
    for (index, *_), e in zip(events, e_sorted):
        index_epoch[index] = e
    overlapped = 0
    write_during_upload = 0.0
    for index, w0, w1, sealed in events[1:]:
        prev = upload_of.get(index_epoch.get(index - 1))
        if prev and w0 < prev[1]:
            overlapped += 1
    for duration, t0 in longest_write:
        if any(s <= t0 < f for s, f in upload_of.values()):
            write_during_upload = max(write_during_upload, duration)
    if timeline:
        print(f"timeline ({kind}, {mode}), ms from start: writes of N | sealed | upload of N | committed")
        for index, w0, w1, sealed in events[:timeline]:
            up = upload_of.get(index_epoch.get(index), (float("nan"), float("nan")))
            ms = [(x - start) * 1000 for x in (w0, w1, sealed, up[0], up[1], committed.get(index, float("nan")))]
            print(f"  epoch {index:3d}: writes {ms[0]:8.1f}-{ms[1]:8.1f} | sealed {ms[2]:8.1f} | "
                  f"upload {ms[3]:8.1f}-{ms[4]:8.1f} | committed {ms[5]:8.1f}")
    ranked = sorted(latencies)
    p50, p99 = (ranked[max(0, math.ceil(f * len(ranked)) - 1)] for f in (0.50, 0.99))   # nearest rank
    total_rows = sum(len(ops) for per_table in chunks for ops, _ in per_table)
    return {"store": kind, "mode": mode, "tables": n_tables, "rows/table/epoch": rows, "epochs": epochs,
            "barrier p50 ms": p50 * 1000, "barrier p99 ms": p99 * 1000, "barrier max ms": max(latencies) * 1000,
            "epochs/s": epochs / elapsed, "rows/s": total_rows / elapsed,
            "overlapped epochs %": 100.0 * overlapped / max(1, len(events) - 1),
            "longest write during upload ms": write_during_upload * 1000}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--store", choices=["local", "memory", "s3"], action="append")
    parser.add_argument("--timeline", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="40 epochs")
    args = parser.parse_args(argv)
    epochs = 40 if args.quick else args.epochs
    rows = []
    for kind in args.store or ["local"]:
        for mode in ("pipelined", "inline"):
            rows.append(run(kind, mode, epochs, args.tables, args.rows, args.timeline if mode == "pipelined" else 0))
    report("barrier", rows, ["store", "mode", "tables", "rows/table/epoch", "epochs", "barrier p50 ms",
                             "barrier p99 ms", "barrier max ms", "epochs/s", "rows/s", "overlapped epochs %",
                             "longest write during upload ms"])


if __name__ == "__main__":
    main()
