"""Benchmark ``stream``: rows per second through the streaming engine, and barrier latency.

Workloads (input table ``id BIGINT`` pk, ``a INT``, ``b INT``, ``s VARCHAR`` ~12 chars; chunks of
1,024 inserts with distinct ids, built before the clock starts; a checkpoint barrier every
1,000 chunks and one at the end, the clock stops when it is committed):
- ``project_filter_materialize``: TableSource -> Project(id, a * 2, b + 1, s) ->
  Filter(a2 % 4 = 0 OR b1 > 50; keeps ~62%) -> Materialize into a relaxed state table
  (``consistent=False``; distribution key = pk): an MV whose input is consistent by
  construction needs no check (RisingWave's ``NoCheck``). The issue's target: >= 500k rows/s.
- ``project_filter_materialize_strict``: the same into a strict table (every insert probed
  against the store: one batched ``multi_get`` per chunk), which names a broken key.
- ``materialize``: TableSource -> Materialize (relaxed; the state table write alone, through the
  engine, every input row written).
- ``project_filter``: TableSource -> Project -> Filter, no state (the engine's overhead).
- ``hash_exchange_2``: TableSource -> hash exchange by id -> 2 actors of Project -> Filter ->
  Materialize, each owning half the vnodes (one event loop: this shows the exchange's cost,
  not parallelism).
- ``hash_agg_1k``, ``hash_agg_1k_retractable``, ``hash_agg_10k``, ``hash_agg_1m``,
  ``hash_agg_1m_retractable``: HashAgg workloads (bench/stream_agg.py).
- ``top_n``, ``top_n_append_only``, ``group_top_n``: TopN / GroupTopN into an MV
  (bench/stream_top_n.py).
- ``hash_join_1to1``, ``hash_join_1ton``: HashJoin (inner) of two sides split off the input,
  1 or 10 right rows per key, into an MV (bench/stream_join.py). Target: >= 100k rows/s 1:1.
The writer is the caller's thread (``StreamRuntime.write``: one cross-thread hand-off per chunk,
bounded channels), the graph runs on the runtime's event loop thread; rows/s counts input rows.
Barrier latency: inject -> committed (checkpoint done) of every barrier in the run, p50/p99 ms.
``cpu_rows_per_s``: input rows per CPU second of the process over the same runs (every thread:
the writer, the event loop, uploads, the in-process compactor; not a compaction worker
process), which moves far less than the wall figure when other jobs share the cores.
Isolation: each workload runs in a fresh interpreter of its own (``--child``; it builds the
same input), so none inherits another's heap, caches or allocator state -- one streaming job
per process, as deployed; ``--same-process`` runs them all in this one (a 1:1 join after twelve
other workloads ran ~8% slower: a fragmented heap).
Memory: ``peak_rss_mib_by_workload`` is each workload's peak RSS (its process's VmHWM, reset
before its runs, Linux), ``peak_rss_mib`` the largest; ``input_rss_mib`` the RSS once the
input is built (interpreter, libraries and the prebuilt chunks), which every peak includes.
``python -m bench.stream_memory WORKLOAD`` shows where the rest goes.
``--compactor`` picks the store's compaction (``default``: the store's, merges in a worker
process on 2+ cores; ``local``: in the background thread; ``workers``: ``compaction_workers=1``;
``none``; bench/harness.py). Method: bench/harness.py (one warm-up run, then the
median of ``--repeats`` fresh runs, each on a new local store in a temp directory).
``--profile WORKLOAD`` runs one workload under cProfile and prints the top functions.

Run: ``python -m bench.stream [--chunks N] [--quick] [--compactor default|local|workers|none] [--same-process]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time

import numpy as np
import pyarrow as pa

from bench import stream_top_n
from bench.harness import COMPACTORS, _fmt, compactor_options, machine, run_dir
from bench.stream_agg import AGG_WORKLOADS, build_agg

CHUNK = 1024
CHECKPOINT_EVERY = 1000
WORKLOADS = ["project_filter_materialize", "project_filter_materialize_strict", "materialize", "project_filter",
             "hash_exchange_2", *AGG_WORKLOADS, *stream_top_n.WORKLOADS, "hash_join_1to1", "hash_join_1ton"]


def make_chunks(n_chunks: int, seed: int = 7):
    from relational.types import DataType as T
    from stream.chunk import StreamChunk
    from stream.schema import Schema
    schema = Schema([("id", T.BIGINT), ("a", T.INT), ("b", T.INT), ("s", T.VARCHAR)])
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n_chunks * CHUNK).astype(np.int64)
    ops = np.ones(CHUNK, np.int8)
    chunks = []
    for i in range(n_chunks):
        c = ids[i * CHUNK:(i + 1) * CHUNK]
        chunks.append(StreamChunk(ops, [pa.array(c), pa.array((c % 1000).astype(np.int32)),
                                        pa.array((c % 77).astype(np.int32)),
                                        pa.array([f"value-{x:06d}" for x in c.tolist()])], schema))
    return schema, chunks


def options(compactor: str):
    """The store's options: the compactor's, and the block cache of the streaming memory split
    (docs/streaming.md: 128 MiB, the floor of the machine-sized default), so figures and peak RSS
    compare across machines and with the figures taken before that default scaled with memory."""
    from hummock import StorageOptions
    from hummock.options import BLOCK_CACHE_MIN
    return StorageOptions(block_cache_capacity=BLOCK_CACHE_MIN, **compactor_options(compactor))


def build(workload: str, store, schema):
    from relational import StateTable
    from relational.types import DataType as T
    from stream.executors import Filter, Materialize, Project
    from stream.expr import Arith, Cmp, Col, Lit, Or
    from stream.runtime import StreamRuntime
    from stream.runtime.dispatch import vnode_bitmaps

    rt = StreamRuntime(store)
    src = rt.source("t", schema, [0])

    def project_filter(head):
        p = Project(head, [Col(0, T.BIGINT), Arith("*", Col(1, T.INT), Lit(2, T.INT)),
                           Arith("+", Col(2, T.INT), Lit(1, T.INT)), Col(3, T.VARCHAR)],
                    names=["id", "a2", "b1", "s"])
        return Filter(p, Or(Cmp("=", Arith("%", Col(1, T.INT), Lit(4, T.INT)), Lit(0, T.INT)),
                            Cmp(">", Col(2, T.INT), Lit(50, T.INT))))

    def mv(head, table_id, vnodes=None, strict=False):
        table = StateTable(store, table_id, head.schema.pairs(), [0], dist_key_indices=[0], vnodes=vnodes,
                           consistent=strict)
        return Materialize(head, table)

    if workload == "project_filter_materialize":
        rt.actor(mv(project_filter(src.executor), 1))
    elif workload == "project_filter_materialize_strict":
        rt.actor(mv(project_filter(src.executor), 1, strict=True))
    elif workload == "materialize":
        rt.actor(mv(src.executor, 1))
    elif workload == "project_filter":
        rt.actor(project_filter(src.executor))
    elif workload == "hash_exchange_2":
        up = rt.actor(src.executor)
        for head, vnodes in zip(rt.exchange([up], 2, "hash", key=[0]), vnode_bitmaps(2)):
            rt.actor(mv(project_filter(head), 1, vnodes))
    elif workload in AGG_WORKLOADS:
        build_agg(workload, rt, store, src)
    elif workload in stream_top_n.WORKLOADS:
        stream_top_n.build(workload, rt, src, store)
    elif workload in ("hash_join_1to1", "hash_join_1ton"):
        from bench import stream_join
        stream_join.build(workload, rt, store, src)
    else:
        raise SystemExit(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
    return rt, src


def run_once(workload: str, schema, chunks, compactor: str, profiler=None):
    """(seconds, CPU seconds of this process, barrier latencies in ms) of one fresh run;
    ``profiler`` (cProfile) profiles the event loop's thread, where the graph runs."""
    from hummock import HummockStorage
    with run_dir("bench-stream-") as tmp:
        with HummockStorage.open(tmp + "/db", options(compactor)) as store:
            rt, src = build(workload, store, schema)
            rt.start()
            if profiler is not None:
                rt._call(_on_loop(profiler.enable))
            start, cpu_start = time.perf_counter(), time.process_time()
            for i, chunk in enumerate(chunks, 1):
                rt.write(src, chunk)
                if i % CHECKPOINT_EVERY == 0:   # like the ticker: the writer does not wait
                    rt.barrier(checkpoint=True, wait=False)
            rt.flush()
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            if profiler is not None:
                rt._call(_on_loop(profiler.disable))
            latencies = [commit * 1000 for _, commit in rt.barrier_loop.latencies[1:]]   # not the initial one
            rt.stop()
        return elapsed, cpu, latencies


def print_table(rows: list, columns: list) -> None:
    """``rows`` as an aligned table (harness.report's layout, without its JSON line: this bench
    prints one JSON line of its own)."""
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _reset_peak_rss() -> bool:
    """Reset the process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0: ``5`` into
    ``/proc/self/clear_refs``); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int:
    """VmHWM: the peak RSS since the last reset."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmHWM in /proc/self/status")


async def _on_loop(fn):
    fn()


def percentile(values, q: float):
    if not values:
        return None
    return float(np.percentile(np.array(values), q))


def measure(workload: str, schema, chunks, repeats: int, compactor: str) -> tuple[dict, list]:
    """One workload in this process: a warm-up run, then ``repeats`` fresh runs; returns its
    table row and every barrier latency of the timed runs."""
    reset = _reset_peak_rss()
    run_once(workload, schema, chunks[:max(50, len(chunks) // 20)], compactor)   # warm-up
    timings, cpus, all_latencies = [], [], []
    for _ in range(repeats):
        elapsed, cpu, latencies = run_once(workload, schema, chunks, compactor)
        timings.append(elapsed)
        cpus.append(cpu)
        all_latencies += latencies
    peak = round(_peak_rss_bytes() / (1 << 20), 1) if reset else None
    return ({"workload": workload, "rows": len(chunks) * CHUNK,
             "rows_per_s": len(chunks) * CHUNK / statistics.median(timings),
             "cpu_rows_per_s": len(chunks) * CHUNK / statistics.median(cpus), "compactor": compactor,
             "peak_rss_mib": peak, "barrier_ms_p50": percentile(all_latencies, 50),
             "barrier_ms_p99": percentile(all_latencies, 99)}, all_latencies)


def measure_in_child(workload: str, n_chunks: int, repeats: int, compactor: str) -> tuple[dict, list, float]:
    """:func:`measure` in a fresh interpreter (``--child``): no workload inherits another's
    heap, caches or allocator state. Returns the row, the latencies and the child's input RSS."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "bench.stream", "--child", "--workloads", workload,
                          "--chunks", str(n_chunks), "--repeats", str(repeats), "--compactor", compactor],
                         check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["row"], result["latencies"], result["input_rss_mib"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="2,000 chunks, 1 repeat (under a minute)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compactor", choices=COMPACTORS, default="default")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--profile", metavar="WORKLOAD")
    parser.add_argument("--same-process", action="store_true",
                        help="run every workload in this process (default: one fresh process each)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n_chunks, repeats = (2000, 1) if args.quick else (args.chunks, args.repeats)
    workloads = args.workloads.split(",")
    isolated = not (args.same_process or args.child or args.profile) and len(workloads) > 1
    if not isolated:
        schema, chunks = make_chunks(n_chunks)
        input_rss_mib = round(_rss_bytes() / (1 << 20), 1)   # the interpreter and the prebuilt input
    if args.profile:
        import cProfile
        import pstats
        profiler = cProfile.Profile()
        run_once(args.profile, schema, chunks, args.compactor, profiler)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    if args.child:
        row, latencies = measure(workloads[0], schema, chunks, repeats, args.compactor)
        print(json.dumps({"row": row, "latencies": latencies, "input_rss_mib": input_rss_mib}))
        return
    rows, all_latencies = [], []
    for workload in workloads:
        if isolated:
            row, latencies, input_rss_mib = measure_in_child(workload, n_chunks, repeats, args.compactor)
        else:
            row, latencies = measure(workload, schema, chunks, repeats, args.compactor)
        rows.append(row)
        all_latencies += latencies
    print_table(rows, ["workload", "rows", "rows_per_s", "cpu_rows_per_s", "compactor", "peak_rss_mib", "barrier_ms_p50",
                       "barrier_ms_p99"])
    peaks = {r["workload"]: r["peak_rss_mib"] for r in rows if r["peak_rss_mib"] is not None}
    print(json.dumps({"bench": "stream", "rows_per_s": {r["workload"]: round(r["rows_per_s"]) for r in rows},
                      "cpu_rows_per_s": {r["workload"]: round(r["cpu_rows_per_s"]) for r in rows},
                      "compactor": args.compactor, "isolated": isolated,
                      "barrier_ms_p50": percentile(all_latencies, 50),
                      "barrier_ms_p99": percentile(all_latencies, 99),
                      "peak_rss_mib": max(peaks.values()) if peaks else
                      round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "peak_rss_mib_by_workload": peaks,
                      "input_rss_mib": input_rss_mib,
                      "machine": machine()}, sort_keys=True))


if __name__ == "__main__":
    main()
