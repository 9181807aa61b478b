"""Benchmark ``kv``: LevelDB's db_bench workloads on HummockStorage and on RocksDB (rocksdict) in
the same invocation.

Workloads (N keys of 16 bytes, 100-byte random values, writes in batches of 1,000 keys per epoch):
- ``fillseq`` / ``fillrandom``: load N keys in order / in random order into an empty store; the
  time includes the final ``checkpoint`` (RocksDB: write batches, then ``flush``); the batches
  (sorted lists of pairs) are prepared before the clock starts, for both engines;
- ``overwrite``: N random keys over the filled store, same batching;
- ``readrandom`` / ``readmissing``: N point gets of present / absent keys;
- ``readseq`` / ``readreverse``: one full scan forward / backward;
- ``seekrandom``: N/10 seeks to random present keys, each followed by 10 nexts (ops = seeks);
  the median of ``--seek-runs`` runs (default 5).
RocksDB runs with a 10 bits/key bloom filter (kept on reopen via ``column_families``) and
default write options. Reported: ops/s for both and the ratio ours/rocksdict; then peak RSS of a
separate child that fills N=2,000,000 keys with a 64 MiB shared buffer and a 64 MiB block cache
and reads them back.

Targets (issue "engine"): >= 2.0x rocksdict on fillrandom, >= 1.0x on every other workload;
peak RSS < 512 MiB in the 2M run; issue 11: seekrandom >= 1.5x. ``--compactor`` picks hummock's
compactor (``local``: the default background thread, which shares the interpreter lock with the
reads; ``workers``: merges in a worker process; ``none``). Run: ``python -m bench.kv [--keys N]
[--rss-keys M] [--seek-runs K] [--compactor local|workers|none]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import COMPACTORS, compactor_options, report

BATCH = 1000
EPOCH_STEP = 1 << 16
TABLE = 1


def make_keys(n: int, seed: int = 11) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(16) for _ in range(n)]


def batches(keys: list[bytes], values: list[bytes]) -> list[list[tuple[bytes, bytes]]]:
    """The write batches of a fill, prepared before timing (sorted, duplicates dropped)."""
    return [sorted(dict(zip(keys[i:i + BATCH], values[i:i + BATCH])).items())
            for i in range(0, len(keys), BATCH)]


def timed(fn) -> float:
    """Seconds ``fn()`` takes. Collects garbage first, so neither engine pays for a collection
    of the harness's freshly prepared objects (the 200k batch tuples) inside its timed run."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Hummock:
    name = "hummock"

    def __init__(self, path: str, **options):
        from hummock import HummockStorage, StorageOptions
        self.store = HummockStorage.open(path, StorageOptions(**options))
        self.epoch = self.store.max_committed_epoch

    def fill(self, prepared):
        for chunk in prepared:
            self.epoch += EPOCH_STEP
            self.store.ingest_batch(TABLE, chunk, self.epoch)
        self.store.checkpoint(self.epoch)

    def get(self, key):
        return self.store.get(TABLE, key, self.epoch)

    def multi_get(self, keys):
        return self.store.multi_get(TABLE, keys, self.epoch)

    def scan(self, reverse=False):
        n = 0
        for _ in self.store.iter(TABLE, self.epoch, reverse=reverse):
            n += 1
        return n

    def seek_next(self, key, count):
        it = self.store.iter(TABLE, self.epoch, start=key)
        for _ in range(count):
            if next(it, None) is None:
                break
        it.close()

    def close(self):
        self.store.close()


class RocksDict:
    name = "rocksdict"

    def __init__(self, path: str):
        from rocksdict import BlockBasedOptions, Options, Rdict
        opts = Options(raw_mode=True)
        table = BlockBasedOptions()
        table.set_bloom_filter(10, False)
        opts.set_block_based_table_factory(table)
        opts.create_if_missing(True)
        self.db = Rdict(path, opts, column_families={"default": opts})

    def fill(self, prepared):
        from rocksdict import WriteBatch
        for chunk in prepared:
            wb = WriteBatch(raw_mode=True)
            for k, v in chunk:
                wb.put(k, v)
            self.db.write(wb)
        self.db.flush()

    def get(self, key):
        return self.db.get(key)

    def scan(self, reverse=False):
        it = self.db.iter()
        n = 0
        if reverse:
            it.seek_to_last()
            while it.valid():
                it.key(), it.value()
                n += 1
                it.prev()
        else:
            for _ in self.db.items():
                n += 1
        return n

    def seek_next(self, key, count):
        it = self.db.iter()
        it.seek(key)
        for _ in range(count):
            if not it.valid():
                break
            it.key(), it.value()
            it.next()

    def close(self):
        self.db.close()


def run_engine(make, root: str, n: int, seek_runs: int = 5) -> dict:
    rng = random.Random(5)
    seq_keys = sorted(make_keys(n, 1))
    rand_keys = make_keys(n, 2)
    values = [rng.randbytes(100) for _ in range(n)]
    results = {}
    engine = make(os.path.join(root, "seq"))
    prepared = batches(seq_keys, values)
    results["fillseq"] = n / timed(lambda: engine.fill(prepared))
    engine.close()
    engine = make(os.path.join(root, "random"))
    prepared = batches(rand_keys, values)
    results["fillrandom"] = n / timed(lambda: engine.fill(prepared))
    prepared = batches([rand_keys[rng.randrange(n)] for _ in range(n)], values)
    results["overwrite"] = n / timed(lambda: engine.fill(prepared))
    probes = [rand_keys[rng.randrange(n)] for _ in range(n)]
    missing = make_keys(n, 3)
    get = engine.get
    engine.scan()  # warm caches as db_bench's reads follow a fill

    def gets(keys):
        for k in keys:
            get(k)
    results["readrandom"] = n / timed(lambda: gets(probes))
    results["readmissing"] = n / timed(lambda: gets(missing))
    results["readseq"] = n / timed(lambda: engine.scan())
    results["readreverse"] = n / timed(lambda: engine.scan(reverse=True))
    seeks = probes[: n // 10]
    rates = [len(seeks) / timed(lambda: [engine.seek_next(k, 10) for k in seeks]) for _ in range(seek_runs)]
    results["seekrandom"] = statistics.median(rates)   # the median of seek_runs runs
    engine.close()
    return results


def rss_child(n: int, engine: str) -> None:
    """Fill and read ``n`` keys in this process; print the peak RSS in MiB (child mode)."""
    root = tempfile.mkdtemp(prefix="hummock-rss-")
    try:
        if engine == "hummock":
            make = Hummock(root, shared_buffer_capacity=64 << 20, block_cache_capacity=64 << 20,
                           meta_cache_capacity=16 << 20)
        else:
            make = RocksDict(root)
        rng = random.Random(9)
        keys = make_keys(n, 4)
        for start in range(0, n, 200_000):  # values generated per slice: the harness stays small
            part = keys[start:start + 200_000]
            make.fill(batches(part, [rng.randbytes(100) for _ in part]))
        for k in keys[:: max(1, n // 100_000)]:
            make.get(k)
        make.scan()
        make.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"engine": engine, "keys": n,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rss-keys", type=int, default=2_000_000)
    parser.add_argument("--rss-child", choices=["hummock", "rocksdict"], help=argparse.SUPPRESS)
    parser.add_argument("--seek-runs", type=int, default=5, help="seekrandom: median of this many runs")
    parser.add_argument("--compactor", choices=COMPACTORS, default="default",
                        help="hummock's compaction: the store's default (a worker process on 2+ cores), the "
                             "background thread (local), one worker process, none")
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_keys, args.rss_child)
        return
    from hummock import _twins
    mode = "native" if _twins.LOADED and all(_twins.LOADED.values()) else "pure"
    root = tempfile.mkdtemp(prefix="hummock-bench-")
    try:
        options = compactor_options(args.compactor)
        ours = run_engine(lambda p: Hummock(p, **options), os.path.join(root, "h"), args.keys, args.seek_runs)
        theirs = run_engine(lambda p: RocksDict(p), os.path.join(root, "r"), args.keys, args.seek_runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [{"workload": w, "hummock_ops_s": ours[w], "rocksdict_ops_s": theirs[w], "ratio": ours[w] / theirs[w]}
            for w in ours]
    print(f"# N={args.keys}, mode={mode}, compactor={args.compactor}")
    report("kv", rows, ["workload", "hummock_ops_s", "rocksdict_ops_s", "ratio"])
    rss_rows = []
    if args.rss_keys:
        for engine in ("hummock", "rocksdict"):
            out = subprocess.run([sys.executable, "-m", "bench.kv", "--rss-child", engine, "--rss-keys",
                                  str(args.rss_keys)], capture_output=True, text=True, check=True)
            rss_rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        report("kv_rss", rss_rows, ["engine", "keys", "peak_rss_mib"])


if __name__ == "__main__":
    main()
