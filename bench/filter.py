"""Benchmark ``filter``: the per-SST Bloom filter, native vs pure twin vs pybloom-live.

Keys are 16-byte user keys ``b"\\x00\\x00\\x00\\x01" + 12 random bytes`` (table id 1), seeded,
so every run measures the same sets. Workloads (named as in LevelDB's db_bench):

- ``build``: build a filter over ``n_keys`` keys (``build_filter``; pybloom-live: ``add`` each
  key into ``BloomFilter(n_keys, error_rate=0.01)``); ns per key.
- ``probe_pos`` / ``probe_neg``: one ``may_contain`` call per key (pybloom-live: ``key in bf``),
  over the inserted keys / over ``n_keys`` keys never inserted; ns per probe. The Python
  ``for`` loop that issues the calls is included (about 10-15 ns of each figure).
- ``probe_many_pos`` / ``probe_many_neg``: one ``may_contain_many`` call over the whole list
  (pybloom-live has no batch call; ``[k in bf for k in keys]`` stands in); ns per key.

Every row of an implementation carries its false-positive rate (share of the negative keys the
filter accepts; theory for a Bloom filter with k=7 at 10 bits/key: 0.82%) and its size in
bits per key. Method: bench.harness.median_rate (one warm-up, median of 5 runs).

Run alone with ``python -m bench.filter [--keys N]``; ``bench/sstable.py`` calls :func:`run`.
"""

from __future__ import annotations

import argparse
import importlib
import random

from bench.harness import median_rate, report

COLUMNS = ["workload", "impl", "ns_per_op", "per_s", "fp_rate_pct", "bits_per_key"]


def make_keys(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [b"\x00\x00\x00\x01" + rng.randbytes(12) for _ in range(n)]


def _ours(module, keys: list[bytes], negatives: list[bytes]) -> tuple[dict, float, float]:
    """Rates of one implementation of hummock's filter, plus its FP rate and bits per key."""
    reader = module.FilterReader(module.build_filter(keys))
    may_contain = reader.may_contain

    def probe(batch):
        for k in batch:
            may_contain(k)

    n = len(keys)
    rates = {
        "build": median_rate(lambda: module.build_filter(keys), n),
        "probe_pos": median_rate(lambda: probe(keys), n),
        "probe_neg": median_rate(lambda: probe(negatives), len(negatives)),
        "probe_many_pos": median_rate(lambda: reader.may_contain_many(keys), n),
        "probe_many_neg": median_rate(lambda: reader.may_contain_many(negatives), len(negatives)),
    }
    assert all(reader.may_contain_many(keys)), "false negative: the filter is broken"
    fp_rate = sum(reader.may_contain_many(negatives)) / len(negatives)
    return rates, fp_rate, reader.num_bits / n


def _pybloom(keys: list[bytes], negatives: list[bytes]) -> tuple[dict, float, float]:
    from pybloom_live import BloomFilter

    def build():
        bf = BloomFilter(len(keys), error_rate=0.01)
        add = bf.add
        for k in keys:
            add(k)
        return bf

    bf = build()
    contains = bf.__contains__

    def probe(batch):
        for k in batch:
            k in bf  # noqa: B015 - the membership test is the workload

    n = len(keys)
    rates = {
        "build": median_rate(build, n),
        "probe_pos": median_rate(lambda: probe(keys), n),
        "probe_neg": median_rate(lambda: probe(negatives), len(negatives)),
        "probe_many_pos": median_rate(lambda: [contains(k) for k in keys], n),
        "probe_many_neg": median_rate(lambda: [contains(k) for k in negatives], len(negatives)),
    }
    assert all(k in bf for k in keys), "pybloom-live false negative"
    fp_rate = sum(k in bf for k in negatives) / len(negatives)
    return rates, fp_rate, bf.num_bits / n


def run(n_keys: int = 100_000) -> list[dict]:
    """Measure every workload for native, pure and pybloom-live; return one row per pair."""
    keys = make_keys(n_keys, seed=1)
    key_set = set(keys)
    negatives = [k for k in make_keys(n_keys, seed=2) if k not in key_set]
    impls = {
        "native": lambda: _ours(importlib.import_module("native._filter"), keys, negatives),
        "pure": lambda: _ours(importlib.import_module("hummock.sstable._filter_py"), keys,
                              negatives),
        "pybloom-live": lambda: _pybloom(keys, negatives),
    }
    rows = []
    for impl, measure in impls.items():
        rates, fp_rate, bits_per_key = measure()
        for workload, per_s in rates.items():
            rows.append({"workload": workload, "impl": impl, "ns_per_op": 1e9 / per_s,
                         "per_s": per_s, "fp_rate_pct": 100 * fp_rate,
                         "bits_per_key": bits_per_key})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    args = parser.parse_args(argv)
    report("filter", run(args.keys), COLUMNS)


if __name__ == "__main__":
    main()
