"""Benchmark ``state_table``: the relational layer's write, point-read and scan paths.

Workloads (table: ``id BIGINT`` pk, ``a INT``, ``b INT``, ``s VARCHAR`` ~12 chars; N rows with
the ids in random order):
- ``write``: ``write_chunk`` of N rows in Arrow chunks of 1,024 (all inserts), a ``commit``
  every 16 chunks followed by ``store.checkpoint`` of the committed epoch (a barrier every
  16,384 rows), timed to the last checkpoint. The chunks are built before the clock starts.
- ``get_row``: 100,000 point reads of present random ids on the warm table (one at a time).
- ``get_rows``: the same 100,000 ids through ``StateTable.get_rows``, 1,024 pks per call.
- ``scan``: one full ``iter_with_prefix()`` (empty prefix) in pk order, rows decoded to tuples.
- ``batch_iter``: the same scan through ``StorageTable.batch_iter`` as Arrow record batches.
- ``mixed``: an executor's update stream on the warm table: chunks of 1,024 rows, of which 60%
  are update pairs (307 update-delete/update-insert pairs of present ids), 20% inserts of new
  ids and 20% deletes of present ids, in random order (ids distinct within a chunk, random
  across chunks, so an epoch updates some ids again), through ``write_chunk``, a ``commit`` +
  ``store.checkpoint`` every 16 chunks. Rows/s counts chunk rows (an update pair is 2 rows).
  Three consecutive runs of N/2 rows each on the same table (each run's chunks follow the
  table's state after the previous run; net size unchanged); the chunks are built before the
  clock starts. Strict tables check every row (one batched ``multi_get`` per chunk).
The store has default options (the headline figures; compaction keeps L0 short, its merges in a
worker process on a machine of 2+ cores); ``--compactor local`` merges in the background thread
(``compaction_workers=0``, sharing the interpreter lock with the writer), ``workers`` in one
worker process, ``none`` shows the layer without compaction (bench/harness.py). Each runs
on three tables: ``singleton`` (no distribution key, relaxed mode), ``singleton-strict``
(every insert checked against storage), ``hashed-strict`` (distribution key = pk, so a scan
merges 256 vnodes). Targets (issue 6): write >= 500k rows/s, get_row >= 200k ops/s, scan >= 1M
rows/s; issue 11: mixed (strict) >= 400k rows/s, get_rows >= 1M rows/s. No peer exists in
Python for this layer; the KV figures of ``bench.kv`` are the floor.
Method: bench/harness.py (warm-up, median of repeats; writes: median of fresh runs).

Run: ``python -m bench.state_table [--rows N] [--quick] [--compactor default|local|workers|none]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

from bench.harness import COMPACTORS, compactor_options, median_rate, report

CHUNK = 1024
CHUNKS_PER_EPOCH = 16
GET_ROWS_BATCH = 1024
MIXED_UPDATE_PAIRS, MIXED_INSERTS, MIXED_DELETES = 307, 205, 205   # 614 + 205 + 205 = 1,024 rows
CONFIGS = [("singleton", None, False), ("singleton-strict", None, True), ("hashed-strict", [0], True)]


def make_chunks(n: int, seed: int = 7):
    ids = np.random.default_rng(seed).permutation(n).astype(np.int64)
    chunks = []
    for i in range(0, n, CHUNK):
        c = ids[i:i + CHUNK]
        chunks.append([pa.array(c), pa.array((c % 1000).astype(np.int32)), pa.array((c % 77).astype(np.int32)),
                       pa.array([f"value-{x:06d}" for x in c.tolist()])])
    return ids, chunks


def open_table(path, dist, consistent, compactor="default"):
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    from relational.state_table import StateTable
    from relational.types import DataType as T
    options = StorageOptions(**compactor_options(compactor or "default"))
    store = HummockStorage.open(path, options)
    schema = [("id", T.BIGINT), ("a", T.INT), ("b", T.INT), ("s", T.VARCHAR)]
    table = StateTable(store, 1, schema, [0], dist_key_indices=dist, consistent=consistent)
    table.init_epoch(new_epoch())
    return store, table


def initial_row(i: int) -> tuple:
    """The row ``make_chunks`` writes for id ``i`` (without the id)."""
    return i % 1000, i % 77, f"value-{i:06d}"


def make_mixed_chunks(ids, runs: int, rows_per_run: int, seed: int = 11):
    """``runs`` lists of ``(ops, columns)`` chunks (module docstring, ``mixed``), each run
    following the state the previous one leaves; the table starts with the rows of ``ids``."""
    from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT
    rng = np.random.default_rng(seed)
    live = [int(i) for i in ids]
    current = {}                       # id -> row (without id) when changed from initial_row
    next_id = int(max(live)) + 1 if live else 0
    version = 0
    out = []
    for _ in range(runs):
        chunks = []
        for _ in range(max(1, rows_per_run // CHUNK)):
            picked = rng.choice(len(live), MIXED_UPDATE_PAIRS + MIXED_DELETES, replace=False)
            units = []
            for j, pos in enumerate(picked.tolist()):
                i = live[pos]
                old = current.get(i) or initial_row(i)
                if j < MIXED_UPDATE_PAIRS:
                    version += 1
                    new = ((old[0] + 1) % 1000, old[1], f"upd-{version:08d}")
                    current[i] = new
                    units.append([(OP_UPDATE_DELETE, i, old), (OP_UPDATE_INSERT, i, new)])
                else:
                    units.append([(OP_DELETE, i, old)])
            for pos in sorted(picked[MIXED_UPDATE_PAIRS:].tolist(), reverse=True):   # remove the deleted
                i = live[pos]
                live[pos] = live[-1]
                live.pop()
                current.pop(i, None)
            for _ in range(MIXED_INSERTS):
                i, next_id = next_id, next_id + 1
                live.append(i)
                units.append([(OP_INSERT, i, initial_row(i))])
            rng.shuffle(units)
            rows = [r for unit in units for r in unit]
            ops = np.array([r[0] for r in rows], dtype=np.int8)
            cols = [pa.array([r[1] for r in rows], pa.int64()), pa.array([r[2][0] for r in rows], pa.int32()),
                    pa.array([r[2][1] for r in rows], pa.int32()), pa.array([r[2][2] for r in rows])]
            chunks.append((ops, cols))
        out.append(chunks)
    return out


def write_mixed(store, table, chunks) -> None:
    from hummock.key import new_epoch
    for j, (ops, cols) in enumerate(chunks):
        table.write_chunk(ops, cols)
        if j % CHUNKS_PER_EPOCH == CHUNKS_PER_EPOCH - 1 or j == len(chunks) - 1:
            epoch = table.epoch
            table.commit(new_epoch())
            store.checkpoint(epoch)


def write_all(store, table, chunks) -> None:
    from hummock.key import new_epoch
    from relational.state_table import OP_INSERT
    ops = np.full(CHUNK, OP_INSERT, dtype=np.int8)
    for j, cols in enumerate(chunks):
        table.write_chunk(ops[:len(cols[0])], cols)
        if j % CHUNKS_PER_EPOCH == CHUNKS_PER_EPOCH - 1 or j == len(chunks) - 1:
            epoch = table.epoch
            table.commit(new_epoch())
            store.checkpoint(epoch)


def run_config(name, dist, consistent, ids, chunks, mixed_runs, repeats, compactor="default") -> dict:
    from relational.storage_table import StorageTable
    n = len(ids)
    warm_path = tempfile.mkdtemp(prefix="bench-state-table-")
    store, table = open_table(warm_path, dist, consistent, compactor)        # warm-up: imports, schema caches
    write_all(store, table, chunks[:2 * CHUNKS_PER_EPOCH])
    store.close()
    shutil.rmtree(warm_path, ignore_errors=True)
    rates = []
    for r in range(repeats):
        path = tempfile.mkdtemp(prefix="bench-state-table-")
        store, table = open_table(path, dist, consistent, compactor)
        start = time.perf_counter()
        write_all(store, table, chunks)
        rates.append(n / (time.perf_counter() - start))
        if r < repeats - 1:
            store.close()
            shutil.rmtree(path, ignore_errors=True)
    row = {"table": name, "rows": n, "write rows/s": statistics.median(rates)}
    probe = [(int(x),) for x in np.random.default_rng(3).choice(ids, size=min(100_000, n), replace=False)]

    def gets():
        for pk in probe:
            table.get_row(pk)
    row["get_row ops/s"] = median_rate(gets, len(probe), repeats=3)
    pk_batches = [probe[i:i + GET_ROWS_BATCH] for i in range(0, len(probe), GET_ROWS_BATCH)]

    def get_rows():
        for pks in pk_batches:
            table.get_rows(pks)
    if hasattr(table, "get_rows"):     # (absent before issue 11: the bench also runs on older trees)
        assert all(r is not None for r in table.get_rows(pk_batches[0]))
        row["get_rows rows/s"] = median_rate(get_rows, len(probe), repeats=3)

    def scan():
        count = sum(1 for _ in table.iter_with_prefix())
        assert count == n, count
    row["scan rows/s"] = median_rate(scan, n, repeats=3)
    reader = StorageTable(store, 1, list(zip(table.names, table.types)), [0], dist_key_indices=dist)
    epoch = store.max_committed_epoch

    def batches():
        count = sum(b.num_rows for b in reader.batch_iter(epoch))
        assert count == n, count
    row["batch_iter rows/s"] = median_rate(batches, n, repeats=3)
    mixed_rates = []
    for chunks in mixed_runs:
        rows_in = sum(len(ops) for ops, _ in chunks)
        start = time.perf_counter()
        write_mixed(store, table, chunks)
        mixed_rates.append(rows_in / (time.perf_counter() - start))
    row["mixed rows/s"] = statistics.median(mixed_rates)
    store.close()
    shutil.rmtree(path, ignore_errors=True)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows, one write run")
    parser.add_argument("--compactor", choices=COMPACTORS, default="default",
                        help="default: the store's (merges in a worker process on 2+ cores); local: in the "
                             "background thread; workers: compaction_workers=1; none")
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else args.rows
    repeats = 1 if args.quick else 3
    from hummock import _twins
    import relational.value_encoding  # noqa: F401  (loads the twins, for the mode column)
    mode = "native" if all(_twins.LOADED.values()) else "pure"
    ids, chunks = make_chunks(n)
    mixed_runs = make_mixed_chunks(ids, 3, n // 2)
    rows = []
    for name, dist, consistent in CONFIGS:
        row = run_config(name, dist, consistent, ids, chunks, mixed_runs, repeats, args.compactor)
        row["mode"] = mode
        row["compactor"] = args.compactor
        rows.append(row)
    report("state_table", rows, ["table", "mode", "compactor", "rows", "write rows/s", "get_row ops/s",
                                 "get_rows rows/s", "scan rows/s", "batch_iter rows/s", "mixed rows/s"])


if __name__ == "__main__":
    main()
