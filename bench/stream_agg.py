"""The aggregation workloads of ``bench/stream.py`` (issue 12): graph building only.

- ``hash_agg_1k``: TableSource -> HashAgg(GROUP BY a: 1,000 groups; count(*), sum(b), max(b);
  ``append_only=True``: the bench's input only inserts, so max keeps one value per group and
  needs no materialized input -- the issue's comparison, Bytewax's per-key count/sum/max
  without retractions) -> Materialize (relaxed). Its output still retracts: every changed
  group is emitted as an update pair, and the value state is checkpointed.
- ``hash_agg_1k_retractable``: the same on a retractable input (``append_only=False``): every
  row also goes into max's materialized-input state table (the cost of exact deletes).
- ``hash_agg_10k``: as ``hash_agg_1m`` below with ``id % 10,000``: ten thousand groups, all in
  the group cache (issue 30: it should approach ``hash_agg_1k``'s figure).
- ``hash_agg_1m``: TableSource -> Project(id % 1,000,000 AS g, id, b) -> HashAgg(GROUP BY g; the
  same calls, append-only) -> Materialize: a million groups, so the group cache (default
  budget) evicts and the state tables spill; peak RSS must stay <= 1 GiB.
- ``hash_agg_1m_retractable``: the same on a retractable input.

``python -m bench.stream_agg`` measures these workloads in CPU seconds (issue 30: wall time on
this shared machine swings with the load, CPU time far less): ``runtime``, the graph above
through ``bench.stream.run_once`` (its timed part's process CPU, every thread; the compaction worker process
excluded), and ``direct``, the HashAgg alone -- its input chunks (the Project's ``g`` computed
before the clock), ``on_chunk`` per chunk and a flush and commit every 1,000 chunks (the
bench's checkpoint) on one thread, no runtime. Medians of ``--repeats``; ``--compactor`` as
bench.stream's (``none`` in the test); ``--per-group`` builds every HashAgg with
``columnar=False`` (the per-group states of hash_agg.py, not agg_columnar.py's columns: the
"before" of issue 30's figures); one JSON line
``{"bench": "stream_agg", "cpu_rows_per_s": {workload: {"runtime": ..., "direct": ...}}, "columnar": ..., "machine": ...}``.
"""

from __future__ import annotations

AGG_WORKLOADS = ["hash_agg_1k", "hash_agg_1k_retractable", "hash_agg_10k", "hash_agg_1m", "hash_agg_1m_retractable"]
GROUPS = {"hash_agg_10k": 10_000, "hash_agg_1m": 1_000_000}   # a Project's ``id % n`` key
COLUMNAR = {"on": True}   # ``--per-group`` turns it off: HashAgg(columnar=...) of both ways


def build_agg(workload: str, rt, store, src) -> None:
    from relational import StateTable
    from relational.types import DataType as T
    from stream.executors import AggCall, HashAgg, Materialize, Project
    from stream.executors.hash_agg import agg_table_count
    from stream.expr import Arith, Col, Lit

    head = src.executor
    append_only = not workload.endswith("_retractable")
    groups = GROUPS.get(workload.removesuffix("_retractable"))
    if groups is not None:
        head = Project(head, [Arith("%", Col(0, T.BIGINT), Lit(groups, T.BIGINT)), Col(0, T.BIGINT),
                              Col(2, T.INT)], names=["g", "id", "b"], stream_key=[1])
        group, b = [0], 2
    else:
        group, b = [1], 2
    calls = [AggCall("count"), AggCall("sum", b), AggCall("max", b)]
    ids = list(range(10, 10 + agg_table_count(calls, append_only)))
    agg = HashAgg(head, group, calls, store, ids, append_only=append_only, consistent=False,
                  names=["cnt", "sum_b", "max_b"], columnar=COLUMNAR["on"])
    table = StateTable(store, 1, agg.schema.pairs(), [0], dist_key_indices=[0], consistent=False)
    rt.actor(Materialize(agg, table))


def direct_input(workload: str, chunks):
    """The HashAgg's input schema, its chunks (``bench.stream``'s chunks, with the Project's
    ``g`` computed) and the group key / argument columns."""
    import numpy as np
    import pyarrow as pa
    from relational.types import DataType as T
    from stream.chunk import StreamChunk
    from stream.schema import Schema
    groups = GROUPS.get(workload.removesuffix("_retractable"))
    if groups is None:
        return chunks[0].schema, chunks, [1], 2
    schema = Schema([("g", T.BIGINT), ("id", T.BIGINT), ("b", T.INT)])
    out = []
    for c in chunks:
        ids = c.columns[0].to_numpy()
        out.append(StreamChunk(c.ops, [pa.array(ids % np.int64(groups)), c.columns[0], c.columns[2]], schema))
    return schema, out, [0], 2


def run_direct(workload: str, schema, chunks, key, b, checkpoint_every: int) -> float:
    """CPU seconds of the HashAgg alone over ``chunks`` (module docstring)."""
    import tempfile
    import time
    from hummock import HummockStorage
    from hummock.key import new_epoch
    from stream.executors import AggCall, HashAgg
    from stream.executors.hash_agg import agg_table_count

    class _Input:   # what an executor reads of its input at construction
        def __init__(self):
            projected = workload.removesuffix("_retractable") in GROUPS
            self.schema, self.stream_key = schema, [1] if projected else [0]

    append_only = not workload.endswith("_retractable")
    calls = [AggCall("count"), AggCall("sum", b), AggCall("max", b)]
    with tempfile.TemporaryDirectory(prefix="bench-stream-agg-") as tmp, HummockStorage.open(tmp + "/db") as store:
        agg = HashAgg(_Input(), key, calls, store, range(10, 10 + agg_table_count(calls, append_only)),
                      append_only=append_only, consistent=False, columnar=COLUMNAR["on"])
        tables = agg.state_tables()
        epoch = new_epoch()
        for t in tables:
            t.init_epoch(epoch)
        start = time.process_time()
        for i, chunk in enumerate(chunks, 1):
            agg.on_chunk(chunk)
            if i % checkpoint_every == 0 or i == len(chunks):
                agg.on_barrier(None)
                epoch = new_epoch()
                for t in tables:
                    t.commit(epoch)
        return time.process_time() - start


def main(argv=None) -> None:
    import argparse
    import json
    import statistics
    import time
    from bench import stream as bs
    from bench.harness import machine
    parser = argparse.ArgumentParser(description="bench.stream's aggregation workloads in CPU seconds")
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default="hash_agg_1k,hash_agg_10k,hash_agg_1m")
    parser.add_argument("--ways", default="runtime,direct")
    parser.add_argument("--compactor", default="default", choices=["default", "local", "workers", "none"])
    parser.add_argument("--per-group", action="store_true",
                        help="HashAgg(columnar=False): the per-group states instead of the columns")
    args = parser.parse_args(argv)
    COLUMNAR["on"] = not args.per_group
    schema, chunks = bs.make_chunks(args.chunks)
    rows = args.chunks * bs.CHUNK
    ways = args.ways.split(",")
    out = {}
    for workload in args.workloads.split(","):
        figures = out[workload] = {}
        if "runtime" in ways:
            bs.run_once(workload, schema, chunks[:max(5, len(chunks) // 20)], args.compactor)   # warm-up
            cpus = [bs.run_once(workload, schema, chunks, args.compactor)[1] for _ in range(args.repeats)]
            figures["runtime"] = round(rows / statistics.median(cpus))
        if "direct" in ways:
            agg_schema, agg_chunks, key, b = direct_input(workload, chunks)
            cpus = [run_direct(workload, agg_schema, agg_chunks, key, b, bs.CHECKPOINT_EVERY)
                    for _ in range(args.repeats)]
            figures["direct"] = round(rows / statistics.median(cpus))
        print(f"{workload:26s} " + "  ".join(f"{w} {figures[w]:>12,} rows/CPU s" for w in ways), flush=True)
    print(json.dumps({"bench": "stream_agg", "chunks": args.chunks, "repeats": args.repeats,
                      "compactor": args.compactor, "columnar": COLUMNAR["on"], "cpu_rows_per_s": out, "machine": machine()}))


if __name__ == "__main__":
    main()
