"""Benchmark ``sql``: the SQL layer end to end through ``sql.connect()`` (issue 13).

Figures (one local database in a temp directory per figure, implicit flush off):
- ``insert_rows_per_s``: ``executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)`` in batches of
  ``--batch`` parameter sets into a table ``t (id BIGINT PRIMARY KEY, g INT, v INT)`` that feeds
  one aggregate MV (``SELECT g, count(*), sum(v) FROM t GROUP BY g``, 1,000 groups); the clock
  stops after the final FLUSH, so every row has gone through the MV and is committed.
- ``flush_ms_p50`` / ``flush_ms_p99``: a one-row INSERT then FLUSH, until the MV's row shows the
  change (INSERT-to-visible latency of a small change), ``--flushes`` times.
- ``select_rows_per_s``: ``SELECT * FROM mv`` over an MV of ``--select-rows`` rows (a
  projection MV of a table), fetched as Arrow (``cursor.fetch_arrow()``); median of 3 runs.

Targets (issue 13): INSERT >= 200k rows/s through the MV, FLUSH p50 <= 50 ms, SELECT >= 2M rows/s.
There is no peer in the same run: sqlite3 has no incremental MVs; the figures are the SQL
layer's own (the engine underneath is compared with rocksdict in bench.kv).

Run: ``python -m bench.sql [--quick]``; prints a table, then one JSON line ``{"bench": "sql", ...}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time

import sql
from bench.harness import machine


def _db(tmp: str, name: str):
    return sql.connect(f"{tmp}/{name}")


def insert_rate(tmp: str, rows: int, batch: int) -> float:
    with _db(tmp, "insert") as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g")
        params = [(i, i % 1000, i % 97) for i in range(rows)]
        start = time.perf_counter()
        for at in range(0, rows, batch):
            conn.executemany("INSERT INTO t VALUES (%s, %s, %s)", params[at:at + batch])
        conn.execute("FLUSH")
        elapsed = time.perf_counter() - start
        (n,), = conn.execute("SELECT sum(n) FROM m").fetchall()
        assert n == rows, (n, rows)  # every row reached the MV
    return rows / elapsed


def flush_latency_ms(tmp: str, flushes: int) -> tuple[float, float]:
    with _db(tmp, "flush") as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g")
        conn.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(i, i % 100, 1) for i in range(10_000)])
        conn.execute("FLUSH")
        timings = []
        for i in range(flushes):
            start = time.perf_counter()
            conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (10_000 + i, 7, 1))
            conn.execute("FLUSH")
            (n,), = conn.execute("SELECT n FROM m WHERE g = 7").fetchall()
            timings.append((time.perf_counter() - start) * 1000)
            assert n == 101 + i, (n, i)
    timings.sort()
    return statistics.median(timings), timings[min(len(timings) - 1, int(len(timings) * 0.99))]


def select_rate(tmp: str, rows: int) -> float:
    with _db(tmp, "select") as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT id, g, v * 2 AS v2 FROM t")
        for at in range(0, rows, 100_000):
            conn.executemany("INSERT INTO t VALUES (%s, %s, %s)",
                             [(i, i % 1000, i % 97) for i in range(at, min(rows, at + 100_000))])
        conn.execute("FLUSH")
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            table = conn.execute("SELECT * FROM mv").fetch_arrow()
            timings.append(time.perf_counter() - start)
            assert table.num_rows == rows, table.num_rows
    return rows / statistics.median(timings)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    ap.add_argument("--rows", type=int, default=None, help="rows inserted (default 200,000; quick 20,000)")
    ap.add_argument("--batch", type=int, default=10_000, help="parameter sets per executemany call")
    ap.add_argument("--flushes", type=int, default=None, help="FLUSH samples (default 200; quick 30)")
    ap.add_argument("--select-rows", type=int, default=None, help="MV rows read (default 1,000,000; quick 100,000)")
    args = ap.parse_args(argv)
    rows = args.rows or (20_000 if args.quick else 200_000)
    flushes = args.flushes or (30 if args.quick else 200)
    select_rows = args.select_rows or (100_000 if args.quick else 1_000_000)
    tmp = tempfile.mkdtemp(prefix="bench-sql-")
    try:
        result = {"insert_rows_per_s": insert_rate(tmp, rows, args.batch)}
        result["flush_ms_p50"], result["flush_ms_p99"] = flush_latency_ms(tmp, flushes)
        result["select_rows_per_s"] = select_rate(tmp, select_rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    targets = {"insert_rows_per_s": (">=", 200_000), "flush_ms_p50": ("<=", 50), "select_rows_per_s": (">=", 2_000_000)}
    print(f"{'figure':<20} {'value':>14}  target")
    for key, value in result.items():
        op, goal = targets.get(key, ("", None))
        print(f"{key:<20} {value:>14,.1f}  {op} {goal:,}" if goal is not None else f"{key:<20} {value:>14,.1f}")
    line = {"bench": "sql", "machine": machine(), "rows": rows, "batch": args.batch,
            "select_rows": select_rows, **{k: round(v, 2) for k, v in result.items()}}
    print(json.dumps(line, sort_keys=True))
    return line


if __name__ == "__main__":
    main()
