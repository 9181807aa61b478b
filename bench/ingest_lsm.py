"""Per-write cost against the LSM's size (issue 11 part 2): ``ingest_batch`` of 1,000 keys into
a store whose version holds 10 SSTs, then one holding 5,000.

Each store (``memory://``, no compactor, ``target_sst_size`` 4 KiB, 1 KiB blocks) first gets table 1 filled
with enough 100-byte rows that one sync cuts them (incompressible values) into the wanted number of SSTs, committed in
one epoch; then ``--batches`` batches of 1,000 fresh keys of table 2 (built before the clock
starts) are ingested at one new epoch and timed one by one. Reported: the median and p99 µs
per batch, and the ratio of the 5,000-SST median to the 10-SST one (1.0 = independent of the
LSM's size). Before issue 11 every write rebuilt the read state by walking every SST.

Run: ``python -m bench.ingest_lsm [--batches N] [--ssts A,B]``.
"""

from __future__ import annotations

import argparse
import math
import os
import time

from bench.harness import report

ROW = 100          # bytes of value per filler row


def build(n_ssts: int):
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0)
    store = HummockStorage.open("memory://", options)
    per_sst = 4096 // (ROW + 24)   # rows per 4 KiB SST (key, value and entry overhead)
    keys = n_ssts * per_sst
    epoch = new_epoch()
    filler = os.urandom(ROW * keys)   # incompressible values, so SSTs are cut at the target size
    batch = [(b"f%09d" % i, filler[i * ROW:(i + 1) * ROW]) for i in range(keys)]
    for start in range(0, keys, 10_000):
        store.ingest_batch(1, batch[start:start + 10_000], epoch)
    store.checkpoint(epoch)
    return store


def measure(store, batches: int) -> list[float]:
    from hummock.key import new_epoch
    epoch = new_epoch()
    data = [[(b"w%05d%04d" % (b, i), b"x" * 20) for i in range(1000)] for b in range(batches)]
    times = []
    for batch in data:
        t0 = time.perf_counter()
        store.ingest_batch(2, batch, epoch)
        times.append(time.perf_counter() - t0)
    return times


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--ssts", default="10,5000")
    args = parser.parse_args(argv)
    rows = []
    for n in (int(x) for x in args.ssts.split(",")):
        store = build(n)
        try:
            ssts = len(store.version().sst_ids())
            times = sorted(measure(store, args.batches))
        finally:
            store.close()
        median = times[len(times) // 2]
        p99 = times[max(0, math.ceil(0.99 * len(times)) - 1)]
        rows.append({"ssts in version": ssts, "batch keys": 1000, "median us": median * 1e6, "p99 us": p99 * 1e6})
    for row in rows:
        row["vs first"] = row["median us"] / rows[0]["median us"]
    report("ingest_lsm", rows, ["ssts in version", "batch keys", "median us", "p99 us", "vs first"])


if __name__ == "__main__":
    main()
