"""Benchmark ``copy``: loading and unloading files with SQL COPY (issue 27 item 4), beside DuckDB.

The data: ``--rows`` rows (1M; 100k with ``--quick``) of ``t (id BIGINT PRIMARY KEY, k INT,
v DOUBLE, s VARCHAR)`` written once as CSV (with a header) and as Parquet. Figures, each the
best of ``--repeat`` runs, in rows/s (wall clock, statement start to return):

- ``copy_in_csv`` / ``copy_in_parquet``: ``COPY t FROM 'file'`` into an empty table that nothing
  reads -- the fast path, SSTs built directly and committed (sql/copy.py) -- then checked:
  ``count(*)`` and ``sum(k)`` agree with the file;
- ``copy_in_csv_mv``: the same CSV into a table an aggregate MV reads (the dataflow path: the
  rows go through the table's source and the MV; the clock stops after the final FLUSH);
- ``copy_out_csv`` / ``copy_out_parquet``: ``COPY t TO 'file'`` of the loaded table;
- ``duckdb_*``: DuckDB's ``COPY t FROM`` / ``COPY t TO`` of the same files into / out of an
  in-memory DuckDB table with the same schema and primary key, in the same run.

``rows_per_cpu_s`` gives the same figures per CPU second of this process (every thread, Arrow's
and DuckDB's included): on a shared machine the wall-clock figures move with the load, these less.

Target (issue 27): COPY in at least 1M rows/s on this machine. Run: ``python -m bench.copy
[--quick]``; prints a table, then one JSON line ``{"bench": "copy", ...}`` (last line).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

import sql
from bench.harness import machine

SCHEMA = "id BIGINT PRIMARY KEY, k INT, v DOUBLE, s VARCHAR"


def make_files(tmp: str, rows: int) -> tuple[str, str, int]:
    """The CSV and Parquet files of the data; returns their paths and ``sum(k)``."""
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(27)
    k = rng.integers(0, 1000, rows).astype(np.int32)
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "k": k, "v": rng.random(rows),
                      "s": pa.array([f"name-{i % 5000}" for i in range(rows)])})
    csv_path, parquet_path = f"{tmp}/t.csv", f"{tmp}/t.parquet"
    csv.write_csv(table, csv_path)
    pq.write_table(table, parquet_path)
    return csv_path, parquet_path, int(k.sum())


CPU: dict = {}   # figure -> best rows per CPU second of this process (Arrow's and DuckDB's threads included)


def _timed(fn, name: str | None = None, rows: int = 0) -> float:
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    if name is not None:
        CPU[name] = max(CPU.get(name, 0.0), rows / max(time.process_time() - cpu, 1e-9))
    return time.perf_counter() - start


def hummock_figures(tmp: str, csv_path: str, parquet_path: str, rows: int, total_k: int, repeat: int) -> dict:
    best: dict = {}

    def keep(name, fn):
        best[name] = max(best.get(name, 0.0), rows / _timed(fn, name, rows))

    for run in range(repeat):
        with sql.connect(f"{tmp}/db{run}") as conn:
            for fmt, path in (("csv", csv_path), ("parquet", parquet_path)):
                table = f"t_{fmt}"
                conn.execute(f"CREATE TABLE {table} ({SCHEMA})")
                header = " WITH (format csv, header true)" if fmt == "csv" else ""
                keep(f"copy_in_{fmt}", lambda: conn.execute(f"COPY {table} FROM '{path}'{header}"))
                got = conn.execute(f"SELECT count(*), sum(k) FROM {table}").fetchall()
                assert got == [(rows, total_k)], (got, rows, total_k)
            conn.execute(f"CREATE TABLE t_mv ({SCHEMA})")
            conn.execute("CREATE MATERIALIZED VIEW agg AS SELECT k, count(*) AS n FROM t_mv GROUP BY k")

            def through_mv():
                conn.execute(f"COPY t_mv FROM '{csv_path}' WITH (format csv, header true)")
                conn.execute("FLUSH")
            keep("copy_in_csv_mv", through_mv)
            assert conn.execute("SELECT sum(n) FROM agg").fetchall() == [(rows,)]
            keep("copy_out_csv", lambda: conn.execute(f"COPY t_csv TO '{tmp}/out.csv' (format csv)"))
            keep("copy_out_parquet", lambda: conn.execute(f"COPY t_csv TO '{tmp}/out.parquet'"))
        shutil.rmtree(f"{tmp}/db{run}", ignore_errors=True)
    return best


def duckdb_figures(tmp: str, csv_path: str, parquet_path: str, rows: int, repeat: int) -> dict:
    import duckdb

    best: dict = {}
    for _ in range(repeat):
        con = duckdb.connect()
        for fmt, path in (("csv", csv_path), ("parquet", parquet_path)):
            con.execute(f"CREATE TABLE t_{fmt} ({SCHEMA})")
            opts = "(FORMAT csv, HEADER true)" if fmt == "csv" else "(FORMAT parquet)"
            seconds = _timed(lambda: con.execute(f"COPY t_{fmt} FROM '{path}' {opts}"), f"duckdb_copy_in_{fmt}", rows)
            best[f"duckdb_copy_in_{fmt}"] = max(best.get(f"duckdb_copy_in_{fmt}", 0.0), rows / seconds)
            assert con.execute(f"SELECT count(*) FROM t_{fmt}").fetchone()[0] == rows
        for fmt in ("csv", "parquet"):
            seconds = _timed(lambda: con.execute(f"COPY t_csv TO '{tmp}/duck.{fmt}' (FORMAT {fmt})"),
                             f"duckdb_copy_out_{fmt}", rows)
            best[f"duckdb_copy_out_{fmt}"] = max(best.get(f"duckdb_copy_out_{fmt}", 0.0), rows / seconds)
        con.close()
    return best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100k rows, one run")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args(argv)
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="bench-copy-")
    try:
        csv_path, parquet_path, total_k = make_files(tmp, rows)
        figures = hummock_figures(tmp, csv_path, parquet_path, rows, total_k, repeat)
        figures.update(duckdb_figures(tmp, csv_path, parquet_path, rows, repeat))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'figure (rows/s)':<26} {'hummock':>12} {'duckdb':>12} {'ratio':>7}")
    for name in ("copy_in_csv", "copy_in_parquet", "copy_in_csv_mv", "copy_out_csv", "copy_out_parquet"):
        peer = figures.get(f"duckdb_{name}") or figures.get(f"duckdb_{name.replace('_mv', '')}")
        ratio = f"{figures[name] / peer:.2f}" if peer else ""
        print(f"{name:<26} {figures[name]:>12,.0f} {peer or 0:>12,.0f} {ratio:>7}")
    line = {"bench": "copy", "machine": machine(), "rows": rows, "repeat": repeat,
            "rows_per_s": {k: round(v) for k, v in sorted(figures.items())},
            "rows_per_cpu_s": {k: round(v) for k, v in sorted(CPU.items())},
            "target_copy_in_rows_per_s": 1_000_000}
    print(json.dumps(line, sort_keys=True))
    return line


if __name__ == "__main__":
    main()
