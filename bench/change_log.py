"""Benchmark ``change_log``: what a subscription's change log costs the MVs it logs.

Workloads (one local database in a temp directory per run, ``barrier_interval_ms=0``; a table
``t (id BIGINT PRIMARY KEY, g INT, v INT)`` fed by ``Connection.insert_arrow`` in batches of
``--batch`` rows, a FLUSH after each batch, so each batch is one epoch; the clock stops after the
last FLUSH):
- ``agg``: an aggregate MV ``SELECT g, count(*), sum(v) FROM t GROUP BY g`` (1,000 groups), with
  no subscription, then with one on the MV (at most 1,000 log entries an epoch: updates);
- ``proj``: a projection MV ``SELECT id, g, v * 2 FROM t``, with no subscription, then with one on
  the MV (one log entry per row: the worst case);
- ``table``: the agg MV plus a subscription on the table itself (one entry per row).
Each figure is rows/s through the whole graph, the median of ``--repeat`` runs after one
warm-up run, the runs with and without interleaved; the overhead is ``1 - with / without``. The
peer is the same graph without the log in the same run. ``writer_us_per_row``: the log
writer alone (``ChangeLogWriter.record`` + ``commit`` on an in-memory store, 20,000-row chunks,
median of 5 epochs) for insert chunks and for update chunks (U-/U+ pairs): the steadier figure
on a loaded machine.

Run: ``python -m bench.change_log [--quick]``; prints a table, then one JSON line
``{"bench": "change_log", ...}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

import sql
from bench.harness import machine
from hummock import HummockStorage
from hummock.key import EPOCH_PHYSICAL_SHIFT, new_epoch
from relational.change_log import ChangeLogSpec, ChangeLogWriter
from relational.row_serde import RowSerde
from relational.types import DataType
from relational.vnode import Bitmap

WORKLOADS = {
    "agg": ("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g", "m"),
    "proj": ("CREATE MATERIALIZED VIEW m AS SELECT id, g, v * 2 AS v2 FROM t", "m"),
    "table": ("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g", "t"),
}


def run(workload: str, subscribe: bool, rows: int, batch: int) -> float:
    tmp = tempfile.mkdtemp(prefix="bench-change-log-")
    try:
        with sql.connect(f"{tmp}/db", barrier_interval_ms=0) as conn:
            mv, target = WORKLOADS[workload]
            conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v INT)")
            conn.execute(mv)
            if subscribe:
                conn.execute(f"CREATE SUBSCRIPTION s FROM {target} WITH (retention = '1 hour')")
            batches = [pa.table({"id": pa.array(range(at, min(at + batch, rows)), pa.int64()),
                                 "g": pa.array([i % 1000 for i in range(at, min(at + batch, rows))], pa.int32()),
                                 "v": pa.array([i % 97 for i in range(at, min(at + batch, rows))], pa.int32())})
                       for at in range(0, rows, batch)]
            start = time.perf_counter()
            for b in batches:
                conn.insert_arrow("t", b)
                conn.execute("FLUSH")
            elapsed = time.perf_counter() - start
            if subscribe and workload != "table":   # the log holds the MV's changes
                conn.execute("DECLARE c SUBSCRIPTION CURSOR FOR s SINCE begin()")
                assert conn.execute("FETCH ALL FROM c").rowcount > 0
        return rows / elapsed
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def writer_us_per_row(kind: str, n: int = 20_000, epochs: int = 5) -> float:
    """The writer alone (module docstring): ``kind`` ``insert`` or ``update``."""
    serde = RowSerde([DataType.BIGINT, DataType.INT, DataType.INT], [0], None, ())
    store = HummockStorage.open("memory://")
    try:
        writer = ChangeLogWriter(store, ChangeLogSpec(5, 3_600_000), serde, Bitmap.full)
        epoch, times = new_epoch(), []
        for e in range(epochs):
            ids = list(range(e * n, (e + 1) * n)) if kind == "insert" else [i for i in range(n // 2) for _ in (0, 1)]
            cols = [pa.array(ids, pa.int64()), pa.array([i % 1000 for i in ids], pa.int32()),
                    pa.array([(i + (j & 1) + e) % 97 for j, i in enumerate(ids)], pa.int32())]
            ops = np.ones(n, np.int8) if kind == "insert" else np.tile(np.array([3, 4], np.int8), n // 2)
            start = time.perf_counter()
            writer.record(ops, cols)
            writer.commit(epoch)
            times.append((time.perf_counter() - start) / n * 1e6)
            epoch += 1 << EPOCH_PHYSICAL_SHIFT
        return statistics.median(times)
    finally:
        store.close()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.batch, args.repeat = 40_000, 10_000, 1
    out = {}
    run("agg", True, args.batch, args.batch)   # warm-up: imports, caches
    print(f"{'workload':<8} {'without rows/s':>15} {'with rows/s':>12} {'overhead':>9}")
    for workload in WORKLOADS:
        without, with_log = [], []
        for _ in range(args.repeat):   # interleaved, so load changes hit both alike
            without.append(run(workload, False, args.rows, args.batch))
            with_log.append(run(workload, True, args.rows, args.batch))
        a, b = statistics.median(without), statistics.median(with_log)
        out[workload] = {"without_rows_per_s": round(a), "with_rows_per_s": round(b),
                         "overhead": round(1 - b / a, 3)}
        print(f"{workload:<8} {a:>15,.0f} {b:>12,.0f} {1 - b / a:>8.1%}")
    writer = {kind: round(writer_us_per_row(kind), 2) for kind in ("insert", "update")}
    print(f"writer alone: {writer['insert']} us per inserted row, {writer['update']} us per updated row")
    result = {"bench": "change_log", "rows": args.rows, "batch": args.batch, "repeat": args.repeat,
              "workloads": out, "writer_us_per_row": writer, "machine": machine()}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
