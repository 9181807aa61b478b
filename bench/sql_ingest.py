"""Benchmark ``sql_ingest``: the SQL ingest path against the same executors driven directly
(issue 30 item 1: SQL may add at most 30 % over the executors).

Input: Nexmark-style bids ``(auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
date_time TIMESTAMP)``, auction ids 1000..10999 with half of the events on 100 hot auctions,
fed in batches of 10,000 rows with one checkpointed epoch (FLUSH) after each, the issue's
setup. Queries (each an MV over the bids):

- ``q1``: ``SELECT auction, bidder, price * 0.908::float8 AS p, date_time FROM bids``
- ``q2``: ``SELECT auction, price FROM bids WHERE auction % 123 = 0``
- ``qa``: ``SELECT auction, count(*), sum(price), max(price) FROM bids GROUP BY auction``
- ``qt``: ``SELECT auction, price FROM bids ORDER BY price DESC LIMIT 10``

Two ways, each on a fresh local store in a temp directory:

- ``sql``: ``sql.connect(path)``, ``CREATE TABLE bids (...) APPEND ONLY`` and the MV, then per
  batch ``insert_arrow`` + ``FLUSH`` (the table's Dml and Materialize run too: that is the SQL
  path's cost).
- ``stream``: the MV's executors as the SQL planner builds them (``sql.build.build_plan`` over
  the same logical plan), fed the same rows (row ids filled in) straight from a runtime source,
  one ``StreamRuntime.barrier(checkpoint=True)`` per batch: no table, no Dml.

Figures: events/s by wall time and by CPU time of this process (``time.process_time``: every
thread, robust on a shared machine), the median of ``--repeats`` runs after a warm-up, and the
ratio ``sql / stream`` (1.0: no overhead; the issue's target >= 0.77, i.e. at most 30 % more time).

Run: ``python -m bench.sql_ingest [--quick] [--rows N] [--queries q1,qa] [--repeats R] [--profile Q]``.
Prints a table and one JSON line ``{"bench": "sql_ingest", ...}``, with ``conditions``: native
modules or twins, allocator environment variables, the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import pyarrow as pa

from bench.harness import machine, run_dir
from sql.bulk import DEFAULT_CHUNK_SIZE

BATCH = 10_000
CHUNK = DEFAULT_CHUNK_SIZE   # the executors' chunks as insert_arrow cuts them (sql/bulk.py)
QUERIES = {
    "q1": "SELECT auction, bidder, price * 0.908::float8 AS p, date_time FROM bids",
    "q2": "SELECT auction, price FROM bids WHERE auction % 123 = 0",
    "qa": "SELECT auction, count(*) AS n, sum(price) AS s, max(price) AS hi FROM bids GROUP BY auction",
    "qt": "SELECT auction, price FROM bids ORDER BY price DESC LIMIT 10",
}
TABLE = ("CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, "
         "date_time TIMESTAMP) APPEND ONLY")
PUSH_SOURCE = ("CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, "
               "date_time TIMESTAMP) WITH (connector = 'push')")


def make_batches(rows: int, seed: int = 11) -> list:
    """The bids as Arrow tables of ``BATCH`` rows (built before any clock starts)."""
    rng = np.random.default_rng(seed)
    hot = rng.integers(1000, 1100, rows)
    cold = rng.integers(1000, 11000, rows)
    auction = np.where(rng.random(rows) < 0.5, hot, cold).astype(np.int64)
    bidder = rng.integers(0, 100_000, rows).astype(np.int64)
    price = rng.integers(1, 10_000_000, rows).astype(np.int64)
    channels = np.array(["apple", "google", "facebook", "baidu"], dtype=object)
    channel = channels[rng.integers(0, 4, rows)]
    ts = (np.int64(1_700_000_000_000_000) + np.arange(rows, dtype=np.int64) * 1000)
    table = pa.table({"auction": auction, "bidder": bidder, "price": price,
                      "channel": pa.array(channel, pa.string()),
                      "date_time": pa.array(ts, pa.timestamp("us"))})
    return [table.slice(at, BATCH) for at in range(0, rows, BATCH)]


def run_sql(query: str, batches, profiler=None, create: str = TABLE,
            batch_times: list | None = None) -> tuple[float, float, list]:
    """(wall s, CPU s, the MV's rows) of the SQL path (``create``: the bids relation's DDL, the
    APPEND ONLY table or ``PUSH_SOURCE``); ``batch_times``, if given, gets each batch's seconds
    (its ``insert_arrow`` and FLUSH)."""
    import sql
    with run_dir("bench-sql-ingest-") as tmp:
        with sql.connect(tmp + "/db") as c:
            c.execute(create)
            c.execute(f"CREATE MATERIALIZED VIEW mv AS {QUERIES[query]}")
            if profiler is not None:
                profiler.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                started = time.perf_counter()
                c.insert_arrow("bids", batch)
                c.execute("FLUSH")
                if batch_times is not None:
                    batch_times.append(time.perf_counter() - started)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if profiler is not None:
                profiler.disable()
            rows = c.execute("SELECT * FROM mv").fetchall()
        return wall, cpu, rows


class _Builder:
    """What ``sql.build.build_plan`` needs: the one source's executor as every scan's head."""

    def __init__(self, store, head):
        self.store, self._head = store, head

    def head(self, relation, backfill):
        return self._head


class _Ids:
    def __init__(self):
        self.next = 100

    def allocate_id(self):
        self.next += 1
        return self.next


def run_stream(query: str, batches, profiler=None) -> tuple[float, float, list]:
    """(wall s, CPU s, the MV's rows) of the executors driven directly."""
    import sql
    from hummock import HummockStorage
    from relational.state_table import StateTable
    from sql.build import IdAllocator, allocate, build_plan, mv_desc
    from stream.chunk import INSERT, StreamChunk
    from stream.executors import Materialize
    from stream.runtime import StreamRuntime
    from stream.schema import Schema

    with sql.connect(":memory:") as c:   # only to plan the MV exactly as SQL does
        c.execute(TABLE)
        c.execute(f"CREATE MATERIALIZED VIEW mv AS {QUERIES[query]}")
        bids = c.db.catalog.get("bids")
        mv = c.db.catalog.get("mv")
        plan = c.db.plan_of(mv)
    schema = Schema(list(bids.desc.columns))
    chunks, next_id = [], 1
    for batch in batches:   # the rows as the table's Dml would pass them on: row ids filled in
        ids = pa.array(np.arange(next_id, next_id + batch.num_rows, dtype=np.int64))
        next_id += batch.num_rows
        whole = pa.table(list(batch.columns) + [ids], names=[n for n, _ in bids.desc.columns])
        parts = []
        for at in range(0, whole.num_rows, CHUNK):
            part = whole.slice(at, CHUNK).combine_chunks()
            parts.append(StreamChunk(np.full(part.num_rows, INSERT, np.int8),
                                     [col.chunk(0) for col in part.columns], schema))
        chunks.append(parts)
    with run_dir("bench-sql-ingest-") as tmp:
        with HummockStorage.open(tmp + "/db") as store:
            rt = StreamRuntime(store)
            src = rt.source("bids", schema, stream_key=bids.pk_indices)
            ids = allocate(plan, IdAllocator(catalog=_Ids()))
            root = build_plan(plan, _Builder(store, src.executor), ids, False)
            desc = mv_desc(plan, 1, "mv", [n for n, _ in mv.desc.columns][:plan.n_visible])
            table = StateTable(store, desc.table_id, desc.columns, desc.pk_indices, desc.order_types,
                               desc.dist_key_indices, desc.value_indices, name="mv", consistent=False)
            rt.actor(Materialize(root, table, "no_check"))
            rt.start()
            if profiler is not None:
                profiler.enable()
            wall, cpu = time.perf_counter(), time.process_time()
            for parts in chunks:
                for chunk in parts:
                    rt.write(src, chunk)
                rt.barrier(checkpoint=True)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            if profiler is not None:
                profiler.disable()
            rows = [tuple(r[:plan.n_visible]) for r in table.iter_with_prefix(())]
            rt.stop()
        return wall, cpu, rows


RUNNERS = {"sql": run_sql, "stream": run_stream}


def measure(query: str, batches, repeats: int) -> dict:
    rows = sum(b.num_rows for b in batches)
    out = {"query": query, "rows": rows}
    results = {}
    for way, run in RUNNERS.items():
        run(query, batches[:2])   # warm-up
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu, result = run(query, batches)
            walls.append(wall)
            cpus.append(cpu)
        results[way] = sorted(result, key=repr)
        out[f"{way}_events_per_s"] = rows / statistics.median(walls)
        out[f"{way}_cpu_events_per_s"] = rows / statistics.median(cpus)
    if results["sql"] != results["stream"]:
        raise SystemExit(f"{query}: the SQL and stream results differ")
    out["ratio_wall"] = out["sql_events_per_s"] / out["stream_events_per_s"]
    out["ratio_cpu"] = out["sql_cpu_events_per_s"] / out["stream_cpu_events_per_s"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 1 repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--profile", metavar="QUERY", help="cProfile this query's SQL and stream runs")
    args = parser.parse_args(argv)
    rows, repeats = (100_000, 1) if args.quick else (args.rows, args.repeats)
    batches = make_batches(rows)
    if args.profile:
        import cProfile
        import pstats
        for way, run in RUNNERS.items():
            profiler = cProfile.Profile()
            run(args.profile, batches, profiler)
            print(f"--- {way} (this thread only)")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        return
    load_before = os.getloadavg()[0]
    results = [measure(q, batches, repeats) for q in args.queries.split(",")]
    cols = ["query", "rows", "sql_events_per_s", "stream_events_per_s", "ratio_wall", "sql_cpu_events_per_s",
            "stream_cpu_events_per_s", "ratio_cpu"]
    print("  ".join(cols))
    for r in results:
        print("  ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    print(json.dumps({"bench": "sql_ingest", "rows": rows, "repeats": repeats,
                      "events_per_s": {r["query"]: {k: round(v, 3) if k.startswith("ratio") else round(v)
                                                    for k, v in r.items() if k not in ("query", "rows")}
                                       for r in results},
                      "machine": machine(), "conditions": conditions(load_before)}, sort_keys=True))


def conditions(load_before: float) -> dict:
    """What the figures depend on besides the code: native modules or their pure-Python twins
    (and which failed to load), the allocator/glibc environment, and the host's 1-minute load
    average before and after the run (another process's load shows in the wall figures)."""
    from hummock import _twins
    prefixes = ("MALLOC", "GLIBC_TUNABLES", "PYTHONMALLOC", "LD_PRELOAD", "HUMMOCK_")
    env = {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
    return {"pure_python": _twins.pure_python_forced(),
            "native_modules": sorted(k for k, v in _twins.LOADED.items() if v),
            "twins_used": sorted(k for k, v in _twins.LOADED.items() if not v),
            "env": env, "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "cpus": os.cpu_count()}


if __name__ == "__main__":
    main()
