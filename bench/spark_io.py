"""Benchmark ``spark_io``: Hummock tables into and out of Spark, against Parquet on the same rows.

Workloads (``--rows`` rows, default 2,000,000, of ``id BIGINT`` (pk), ``g INT``, ``name STRING``
(~10 chars), ``score DOUBLE``; written once by pyarrow as Parquet files of 500,000 rows under
a temp dir, which is also the source DataFrame of every load):

- ``load``: ``df.write.format("hummock")...save()`` of the source DataFrame into a new table of a
  local-directory store (tasks sort their rows and build SSTs; one commit), against
  ``df.write.parquet`` of the same DataFrame;
- ``count``: ``spark.read.format("hummock")...load().count()`` of a loaded table, against
  ``spark.read.parquet(...).count()`` (which Parquet answers from its footers);
- ``to_arrow``: a full ``toArrow()`` of the same, against the same of the Parquet files.

Each master (``local[1]``, ``local[2]``) runs in a child process of its own (one SparkSession per
process); session start-up is excluded. Method (bench/harness.py): one untimed run, then the
median of ``--repeats`` timed runs, reported as rows/s; ``ratio`` is Hummock's rate over
Parquet's (the issue's bar for reads: >= 0.5). Reads use ``partition_bytes`` of
``--partition-mib`` (default 16) so a 2M-row table gives each core work.

Run: ``python -m bench.spark_io [--rows 2000000] [--repeats 3]``; ``--quick`` is 200,000 rows,
1 repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import machine, report

SPARK_MASTERS = ("local[1]", "local[2]")
PARQUET_FILE_ROWS = 500_000


def write_source(root: str, rows: int) -> str:
    """The rows as Parquet files written by pyarrow; returns their directory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds

    rng = np.random.default_rng(7)
    ids = rng.permutation(rows).astype(np.int64)   # not in key order: loads must sort
    table = pa.table({"id": ids, "g": (ids % 1000).astype(np.int32),
                      "name": pa.array([f"name{i:06d}" for i in ids.tolist()]),
                      "score": rng.random(rows)})
    path = os.path.join(root, "source")
    ds.write_dataset(table, path, format="parquet", max_rows_per_file=PARQUET_FILE_ROWS,
                     max_rows_per_group=PARQUET_FILE_ROWS // 4)
    return path


def _timed(fn, repeats: int) -> tuple[float, object]:
    """(median seconds of ``repeats`` runs after one untimed run, the last result)."""
    result = fn(0)
    timings = []
    for attempt in range(1, repeats + 1):
        start = time.perf_counter()
        result = fn(attempt)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings), result


def child(master: str, root: str, rows: int, repeats: int, partition_mib: int) -> None:
    """One master's figures, printed as one JSON line (runs in its own process)."""
    from hummock.compaction.spark import spark_session

    spark, _ = spark_session(master)
    import relational.spark  # noqa: F401 -- registers the data source with this session

    tag = master.replace("[", "").replace("]", "")
    url = os.path.join(root, "store")
    source = spark.read.parquet(os.path.join(root, "source"))

    def load(attempt):
        source.write.format("hummock").mode("append").option("url", url).option("table", f"t_{tag}_{attempt}") \
            .option("pk", "id").save()

    def parquet_write(attempt):
        source.write.mode("overwrite").parquet(os.path.join(root, f"out_{tag}_{attempt}"))

    def hummock_df():
        return spark.read.format("hummock").option("url", url).option("table", f"t_{tag}_0") \
            .option("partition_bytes", f"{partition_mib}m").load()

    def parquet_df():
        return spark.read.parquet(os.path.join(root, "source"))

    figures = {"master": master}
    figures["load_s"], _ = _timed(load, repeats)
    figures["parquet_write_s"], _ = _timed(parquet_write, repeats)
    figures["count_s"], n = _timed(lambda _: hummock_df().count(), repeats)
    figures["parquet_count_s"], pn = _timed(lambda _: parquet_df().count(), repeats)
    figures["to_arrow_s"], table = _timed(lambda _: hummock_df().toArrow(), repeats)
    figures["parquet_to_arrow_s"], ptable = _timed(lambda _: parquet_df().toArrow(), repeats)
    if not n == pn == table.num_rows == ptable.num_rows == rows:
        raise SystemExit(f"row counts differ: hummock {n}/{table.num_rows}, parquet {pn}/{ptable.num_rows}, "
                         f"expected {rows}")
    if table.column("id").to_numpy().sum() != \
            ptable.column("id").to_numpy().sum():
        raise SystemExit("the hummock read returned other ids than the Parquet one")
    figures["partitions"] = hummock_df().rdd.getNumPartitions()
    print(json.dumps(figures))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, help="rows of the table (default 2,000,000)")
    parser.add_argument("--repeats", type=int, help="timed runs per figure (default 3)")
    parser.add_argument("--partition-mib", type=int, default=16, help="partition_bytes of the reads, MiB")
    parser.add_argument("--quick", action="store_true", help="200,000 rows, 1 repeat")
    parser.add_argument("--child", help=argparse.SUPPRESS)   # child mode: the master to run on
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 2_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    if args.child:
        child(args.child, args.root, rows, repeats, args.partition_mib)
        return {}
    root = tempfile.mkdtemp(prefix="hummock-bench-spark-io-")
    try:
        write_source(root, rows)
        results = []
        for master in SPARK_MASTERS:
            out = subprocess.run([sys.executable, "-m", "bench.spark_io", "--child", master, "--root", root,
                                  "--rows", str(rows), "--repeats", str(repeats),
                                  "--partition-mib", str(args.partition_mib)],
                                 capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f"child {master} failed:\n{out.stderr[-4000:]}")
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            for name, ours, peer in (("load", "load_s", "parquet_write_s"), ("count", "count_s", "parquet_count_s"),
                                     ("to_arrow", "to_arrow_s", "parquet_to_arrow_s")):
                results.append({"workload": name, "master": master, "hummock_rows_s": rows / figures[ours],
                                "parquet_rows_s": rows / figures[peer], "ratio": figures[peer] / figures[ours],
                                "partitions": figures["partitions"] if name != "load" else None})
        print(f"# {rows:,} rows; median of {repeats} after a warm-up; rows/s (higher is better); "
              f"ratio = hummock / parquet")
        report("spark_io", results, ["workload", "master", "hummock_rows_s", "parquet_rows_s", "ratio", "partitions"])
        return {"rows": rows, "machine": machine(), "results": results}
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
