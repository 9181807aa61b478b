"""Benchmark ``stream_memory``: where a streaming workload's memory goes (issue 12's 1 GiB target).

Runs one ``bench.stream`` workload once, alone in this process (so the RSS is its own), fed
exactly as ``bench.stream`` feeds it (chunks of 1,024 inserts built before the clock starts, a
checkpoint barrier every 1,000 chunks). Every ``--every`` chunks the writer's thread samples:

- ``rss``: the process's resident set now (``/proc/self/statm``) and its peak (``ru_maxrss``);
- ``buffer``: the store's shared buffer as charged (what ``shared_buffer_capacity`` bounds) and,
  with ``--deep``, its bytes in Python objects (``sys.getsizeof`` of every imm key, value and
  list: O(entries), so it slows the run);
- ``block``/``meta``: the block and meta caches' charges;
- ``budget``: the runtime's ``MemoryBudget`` charge (executor caches);
- ``mem``: the sum of the state tables' MemTable estimates (``approx_bytes``).

The samples read structures another thread changes (a racy but harmless snapshot). One JSON
line at the end: ``{"bench": "stream_memory", "workload": ..., "input_rss_mib": RSS after
building the input, "peak_rss_mib": ..., "rows_per_s": ..., "samples": [...]}``.

Run: ``python -m bench.stream_memory hash_agg_1m [--chunks 5000] [--every 250] [--deep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

from bench.harness import COMPACTORS, machine

MiB = 1 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """The process's resident set now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _imm_bytes(imm) -> int:
    size = sys.getsizeof(imm.keys) + sys.getsizeof(imm.values)
    size += sum(map(sys.getsizeof, imm.keys))
    size += sum(sys.getsizeof(v) for v in imm.values if v is not None)
    return size


def _executors(rt) -> list:
    seen, out, todo = set(), [], [a.executor for a in rt.actors]
    while todo:
        ex = todo.pop()
        if id(ex) in seen:
            continue
        seen.add(id(ex))
        out.append(ex)
        todo.extend(getattr(ex, "inputs", ()))
    return out


def sample(store, rt, deep: bool) -> dict:
    with store._lock:
        imms = [imm for imms in store._buffer.frozen().values() for imm in imms]
        charged = store._buffer.size
    tables = [t for ex in _executors(rt) for t in ex.state_tables()]
    out = {"rss_mib": rss_bytes() / MiB, "peak_mib": peak_rss_bytes() / MiB,
           "buffer_mib": charged / MiB, "buffer_entries": sum(len(m.keys) for m in imms),
           "block_mib": store._block_cache.stats()["used_bytes"] / MiB,
           "meta_mib": store._meta_cache.stats()["used_bytes"] / MiB,
           "mem_mib": sum(t.mem.approx_bytes for t in tables) / MiB}
    budget = getattr(rt, "budget", None)
    if budget is None:
        from stream.cache import default_budget
        budget = default_budget()
    out["budget_mib"] = budget.used / MiB
    if deep:
        out["buffer_real_mib"] = sum(map(_imm_bytes, imms)) / MiB
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}


def main(argv=None) -> None:
    from bench.stream import CHECKPOINT_EVERY, CHUNK, build, make_chunks, options
    from hummock import HummockStorage
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload")
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--deep", action="store_true")
    parser.add_argument("--compactor", choices=COMPACTORS, default="default")
    args = parser.parse_args(argv)
    schema, chunks = make_chunks(args.chunks)
    input_rss = rss_bytes()
    samples = []
    tmp = tempfile.mkdtemp(prefix="bench-stream-mem-")
    try:
        with HummockStorage.open(tmp + "/db", options(args.compactor)) as store:
            rt, src = build(args.workload, store, schema)
            rt.start()
            start = time.perf_counter()
            for i, chunk in enumerate(chunks, 1):
                rt.write(src, chunk)
                if i % CHECKPOINT_EVERY == 0:
                    rt.barrier(checkpoint=True, wait=False)
                if i % args.every == 0:
                    s = sample(store, rt, args.deep)
                    s["chunks"] = i
                    samples.append(s)
                    print(json.dumps(s), flush=True)
            rt.flush()
            elapsed = time.perf_counter() - start
            rt.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"bench": "stream_memory", "workload": args.workload, "chunks": args.chunks,
                      "compactor": args.compactor, "input_rss_mib": round(input_rss / MiB, 1),
                      "peak_rss_mib": round(peak_rss_bytes() / MiB, 1),
                      "rows_per_s": round(args.chunks * CHUNK / elapsed), "machine": machine()}, sort_keys=True))


if __name__ == "__main__":
    main()
