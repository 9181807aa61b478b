"""The HashJoin workloads of ``python -m bench.stream`` (bench/stream.py calls :func:`build`).

Both sides come from the bench's one input table (``id BIGINT`` pk, ``a INT``, ``b INT``,
``s VARCHAR``; ids a random permutation of 0..n-1, so a row's partner arrives at a random
later or earlier moment of the run, not in the same chunk): a Filter routes each row to a side
and a Project gives it its join key ``k``; the join's output goes into a relaxed MV keyed by
the join's stream key. Every input row enters the join once; rows/s counts input rows.

- ``hash_join_1to1``: left = rows with even id, ``k = id / 2``; right = odd ids, ``k = id / 2``:
  every key has one row on each side. Neither side's stream key (``id``) is inside the join
  key, so no probe is answered by the side's own inserts: each row's probe of the other side
  is a cache hit, one batched prefix read, or -- when the partner has not come yet -- answered
  by the other side's key filter without a read (stream/executors/join_key_filter.py).
- ``hash_join_1ton``: left = ids divisible by 11, ``k = id / 11``; right = the others,
  ``k = id / 11``: each key has one left row and 10 right rows (output ~ 10/11 of the input).

Inner joins with default options (the runtime's ``MemoryBudget``, default 128 MiB, for the caches); with
``--chunks 2000`` (``--quick``) the 1:1 join has 1M keys.

``python -m bench.stream_join`` measures the join in CPU seconds (issue 30; wall time on this
shared machine swings with the load, CPU time less): ``direct`` (:func:`run_direct`) is the
HashJoin alone -- the workload's side chunks prebuilt as the Filter and Project make them,
``on_side_chunk`` for each input chunk's left then right chunk, the state tables committed every
1,000 input chunks, the join thread's CPU time; ``runtime`` is the workload through
``bench.stream.run_once`` (its timed part's process CPU). Figures are input rows per CPU second, the best and the
median of ``--repeats`` (the load only ever adds); one JSON line at the end. ``--profile``
prints a cProfile of one direct run.
"""

from __future__ import annotations


def build(workload: str, rt, store, src) -> None:
    """Add the workload's actors to ``rt`` after ``src`` (the table's source handle): the
    source's actor broadcasts to one actor running Filter/Project on both sides, the join and
    the MV."""
    from relational import StateTable
    from relational.types import DataType as T
    from stream.executors import Filter, HashJoin, Materialize, Project
    from stream.expr import Arith, Cmp, Col, Lit, Not

    fanout = {"hash_join_1to1": 2, "hash_join_1ton": 11}[workload]
    div = Lit(fanout, T.BIGINT)
    on_left = Cmp("=", Arith("%", Col(0, T.BIGINT), div), Lit(0, T.BIGINT))

    up = rt.actor(src.executor)
    heads = rt.exchange([up], 2, "broadcast")

    def side(head, cond, value_col, name):
        picked = Filter(head, cond)
        return Project(picked, [Col(0, T.BIGINT), Arith("/", Col(0, T.BIGINT), div), Col(value_col, T.INT)],
                       names=["id", "k", name])

    left = side(heads[0], on_left, 1, "a")
    right = side(heads[1], Not(on_left), 2, "b")
    join = HashJoin(left, right, [1], [1], "inner", store=store, table_ids=(11, 12))
    mv = StateTable(store, 13, join.schema.pairs(), join.stream_key, dist_key_indices=join.stream_key[:1],
                    consistent=False)
    rt.actor(Materialize(join, mv))


def side_chunks(workload: str, chunks):
    """The join's two inputs as the workload's Filter and Project build them, prebuilt: per
    input chunk ``(left chunk, right chunk)`` of ``(id, k, a)`` / ``(id, k, b)``."""
    import numpy as np
    import pyarrow as pa
    from relational.types import DataType as T
    from stream.chunk import StreamChunk
    from stream.schema import Schema

    fanout = {"hash_join_1to1": 2, "hash_join_1ton": 11}[workload]
    lschema = Schema([("id", T.BIGINT), ("k", T.BIGINT), ("a", T.INT)])
    rschema = Schema([("id", T.BIGINT), ("k", T.BIGINT), ("b", T.INT)])
    out = []
    for c in chunks:
        ids = c.columns[0].to_numpy()
        left = ids % fanout == 0
        pair = []
        for mask, schema, col in ((left, lschema, 1), (~left, rschema, 2)):
            at = np.flatnonzero(mask)
            sel = ids[at]
            pair.append(StreamChunk(np.ones(len(at), np.int8),
                                    [pa.array(sel), pa.array(sel // fanout), c.columns[col].take(pa.array(at))],
                                    schema))
        out.append(tuple(pair))
    return lschema, rschema, out


def run_direct(workload: str, lschema, rschema, pairs, checkpoint_every: int, profiler=None) -> float:
    """Thread CPU seconds of the HashJoin alone over ``pairs`` (``side_chunks``): each input
    chunk's left then right chunk into ``on_side_chunk``, the state tables committed every
    ``checkpoint_every`` input chunks and at the end; no runtime, no MV."""
    import tempfile
    import time
    from hummock import HummockStorage
    from hummock.key import new_epoch
    from stream.executors import HashJoin

    class _Input:   # what an executor reads of its input at construction
        def __init__(self, schema):
            self.schema, self.stream_key = schema, [0]

    with tempfile.TemporaryDirectory(prefix="bench-stream-join-") as tmp, HummockStorage.open(tmp + "/db") as store:
        join = HashJoin(_Input(lschema), _Input(rschema), [1], [1], "inner", store=store, table_ids=(11, 12))
        tables = join.state_tables()
        epoch = new_epoch()
        for t in tables:
            t.init_epoch(epoch)
        join._epoch = epoch
        join.on_init(None)
        if profiler is not None:
            profiler.enable()
        start = time.thread_time()
        for i, (left, right) in enumerate(pairs, 1):
            join.on_side_chunk(0, left)
            join.on_side_chunk(1, right)
            if i % checkpoint_every == 0 or i == len(pairs):
                epoch = new_epoch()
                for t in tables:
                    t.commit(epoch)
        took = time.thread_time() - start
        if profiler is not None:
            profiler.disable()
        join.close()
        return took


def main(argv=None) -> None:
    """``python -m bench.stream_join``: the join workloads in CPU seconds (issue 30). ``direct``
    is :func:`run_direct` (the join's thread); ``runtime`` the workload through
    ``bench.stream.run_once`` (its timed part's process CPU, every thread; the compaction worker process
    excluded). Each figure: input rows per CPU second, min and median of ``--repeats``
    (min: the machine's load only ever adds). One JSON line at the end."""
    import argparse
    import json
    import statistics
    import time
    from bench import stream as bs
    from bench.harness import machine
    parser = argparse.ArgumentParser(description="bench.stream's join workloads in CPU seconds")
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default="hash_join_1to1,hash_join_1ton")
    parser.add_argument("--ways", default="direct")
    parser.add_argument("--compactor", default="default", choices=["default", "local", "workers", "none"])
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one direct run")
    args = parser.parse_args(argv)
    schema, chunks = bs.make_chunks(args.chunks)
    rows = args.chunks * bs.CHUNK
    ways = args.ways.split(",")
    out = {}
    for workload in args.workloads.split(","):
        figures = out[workload] = {}
        if "runtime" in ways:
            cpus = [bs.run_once(workload, schema, chunks, args.compactor)[1] for _ in range(args.repeats)]
            figures["runtime"] = {"best": round(rows / min(cpus)), "median": round(rows / statistics.median(cpus))}
        if "direct" in ways:
            lschema, rschema, pairs = side_chunks(workload, chunks)
            if args.profile:
                import cProfile
                import pstats
                prof = cProfile.Profile()
                run_direct(workload, lschema, rschema, pairs, bs.CHECKPOINT_EVERY, prof)
                pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
            cpus = [run_direct(workload, lschema, rschema, pairs, bs.CHECKPOINT_EVERY) for _ in range(args.repeats)]
            figures["direct"] = {"best": round(rows / min(cpus)), "median": round(rows / statistics.median(cpus))}
        print(f"{workload:16s} " + "  ".join(f"{w} {figures[w]['best']:>10,} (median {figures[w]['median']:,}) "
                                             f"rows/CPU s" for w in ways), flush=True)
    print(json.dumps({"bench": "stream_join", "chunks": args.chunks, "repeats": args.repeats,
                      "cpu_rows_per_s": out, "machine": machine()}))


if __name__ == "__main__":
    main()
