"""Benchmark ``sstable``: blocks, SST build, cached point gets, scans and filter probes, native vs
pure, with RocksDB (rocksdict) as the peer.

Workloads (16-byte user keys = 4-byte table id + 12-byte table key, 100-byte random values,
64 KiB blocks, lz4, 10 bits/key filter):
- ``block_build``: ``BlockBuilder.add`` + ``finish_block`` every 64 KiB, MB/s of block content;
- ``sst_build``: ``SstableBuilder`` into memory, keys/s (peer: rocksdict ``SstFileWriter``);
- ``get_cached``: ``Sstable.get`` of random present keys, every block already in the block cache,
  ns/op (peer: ``Rdict.get`` on a DB that ingested the peer's SST, warm); the keys spread over
  ~120 MB of blocks, so most of the time is CPU cache misses;
- ``get_cached_reader``: the same through the engine's native ``SstReader`` (its read path);
- ``get_cached_hot``: ``Sstable.get`` cycling over 1,000 keys, blocks hot in the CPU caches
  (the code's own cost);
- ``get_absent``: ``Sstable.get`` of absent keys (answered by the filter), ns/op;
- ``scan``: a full ``Sstable.scan()``, entries/s (peer: ``Rdict.items()``);
- filter rows from ``bench.filter`` (probe ns, false-positive rate, vs pybloom-live).

The pure-Python figures come from a child process run with ``HUMMOCK_PURE_PYTHON=1`` on fewer
keys (the same code path, only slower). Targets (native): SST build >= 1.5M keys/s, cached get
<= 1 us, scan >= 5M entries/s, filter probe <= 0.2 us.
Run: ``python -m bench.sstable [--keys N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from bench.harness import median_rate, report
from hummock import _twins
from hummock.key import encode_full_key
from hummock.object_store import MemoryObjectStore
from hummock.sstable.block import BlockBuilder
from hummock.sstable.builder import SstableBuilder
from hummock.sstable.cache import LruCache
from hummock.read_view import SstReader
from hummock.sstable.reader import Sstable

EPOCH = 7 << 16
BLOCK_SIZE = 64 * 1024


def make_entries(n: int, seed: int = 1):
    rng = random.Random(seed)
    keys = sorted({rng.randbytes(12) for _ in range(n)})
    return [(encode_full_key(1, k, EPOCH), rng.randbytes(100)) for k in keys]


def bench_block_build(entries) -> float:
    content_bytes = 0

    def run():
        nonlocal content_bytes
        builder, total = BlockBuilder(16), 0
        for key, value in entries:
            builder.add(key, value)
            if builder.block_size_estimate >= BLOCK_SIZE:
                total += len(builder.finish_block())
        if builder.block_entry_count:
            total += len(builder.finish_block())
        content_bytes = total
    rate = median_rate(run, 1, repeats=3)
    return content_bytes * rate / 1e6


def build(entries, sst_id: int = 1):
    builder = SstableBuilder(sst_id)
    for key, value in entries:
        builder.add(key, value)
    info = builder.finish()
    return builder.sink.getvalue(), info


def run_current_mode(n: int) -> list[dict]:
    """Every workload with whatever implementation this process loaded."""
    impl = "native" if all(_twins.LOADED.values()) else "pure"
    entries = make_entries(n)
    rows = [{"workload": "block_build", "impl": impl, "value": bench_block_build(entries), "unit": "MB/s"}]
    rows.append({"workload": "sst_build", "impl": impl, "value": median_rate(lambda: build(entries), n, 3),
                 "unit": "keys/s"})
    data, info = build(entries)
    store = MemoryObjectStore()
    store.upload(info.object_path, data)
    sst = Sstable.open(store, info, block_cache=LruCache(1 << 30))
    list(sst.scan())  # warm the block cache
    rng = random.Random(2)
    probes = [k[:-8] for k, _ in rng.sample(entries, min(n, 100_000))]
    absent = [encode_full_key(1, rng.randbytes(12), 0)[:-8] for _ in range(len(probes))]
    get = sst.get

    def gets(keys):
        for k in keys:
            get(k, EPOCH)
    rows.append({"workload": "get_cached", "impl": impl, "value": 1e9 / median_rate(lambda: gets(probes), len(probes)),
                 "unit": "ns/op"})
    reader = SstReader(info, lambda _info: sst)  # the engine's native read-path handle on the SST
    rget = reader.get
    full_probes = [encode_full_key(1, k[4:], 0)[:-8] for k in probes]

    def reader_gets(keys):
        for k in keys:
            rget(k, EPOCH)
    rows.append({"workload": "get_cached_reader", "impl": impl,
                 "value": 1e9 / median_rate(lambda: reader_gets(full_probes), len(full_probes)), "unit": "ns/op"})
    hot = probes[:1000] * (len(probes) // 1000)
    rows.append({"workload": "get_cached_hot", "impl": impl, "value": 1e9 / median_rate(lambda: gets(hot), len(hot)),
                 "unit": "ns/op"})
    rows.append({"workload": "get_absent", "impl": impl, "value": 1e9 / median_rate(lambda: gets(absent), len(absent)),
                 "unit": "ns/op"})

    def scan():
        for _ in sst.scan():
            pass
    rows.append({"workload": "scan", "impl": impl, "value": median_rate(scan, n, 3), "unit": "entries/s"})
    return rows


def run_rocksdict(n: int) -> list[dict]:
    from rocksdict import Options, Rdict, SstFileWriter
    entries = [(k[:-8], v) for k, v in make_entries(n)]  # RocksDB keys: the user keys
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "peer.sst")

        def write():
            writer = SstFileWriter(options=Options(raw_mode=True))
            writer.open(path)
            for key, value in entries:
                writer[key] = value
            writer.finish()
        rows.append({"workload": "sst_build", "impl": "rocksdict", "value": median_rate(write, n, 3), "unit": "keys/s"})
        db = Rdict(os.path.join(tmp, "db"), Options(raw_mode=True))
        db.ingest_external_file([path])
        rng = random.Random(2)
        probes = [k for k, _ in rng.sample(entries, min(n, 100_000))]
        for _ in db.items():
            pass

        def gets():
            for k in probes:
                db.get(k)
        rows.append({"workload": "get_cached", "impl": "rocksdict", "value": 1e9 / median_rate(gets, len(probes)),
                     "unit": "ns/op"})

        def scan():
            for _ in db.items():
                pass
        rows.append({"workload": "scan", "impl": "rocksdict", "value": median_rate(scan, n, 3), "unit": "entries/s"})
        db.close()
    return rows


def run_pure_child(n: int) -> list[dict]:
    env = dict(os.environ, HUMMOCK_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-m", "bench.sstable", "--child", "--keys", str(n)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--pure-keys", type=int, default=100_000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_current_mode(args.keys)))
        return
    if not all(_twins.LOADED.values()):
        sys.exit("bench.sstable: native modules are not built (pip install -e .); refusing to report pure as native")
    start = time.perf_counter()
    rows = run_current_mode(args.keys) + run_pure_child(args.pure_keys) + run_rocksdict(args.keys)
    from bench import filter as filter_bench
    filter_rows = filter_bench.run()
    report("sstable", rows, ["workload", "impl", "value", "unit"])
    print()
    report("sstable_filter", filter_rows, sorted({k for r in filter_rows for k in r}))
    print(f"# {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
