"""Benchmark ``encoding``: memcomparable and value encoding of rows, native vs pure, and the
vectorized column path.

Workloads (named as in LevelDB's db_bench):
- ``memcmp_encode`` / ``memcmp_decode``: rows (BIGINT, VARCHAR ~16 chars, DOUBLE, nullable INT,
  one row in three NULL) through ``encode_rows`` / ``decode_rows`` (one call per batch);
- ``memcmp_encode_row``: the same rows one ``encode_row`` call each (per-call overhead included);
- ``value_encode`` / ``value_decode``: the same rows through the value encoding;
- ``vector_bigint``: ``encode_columns`` over a 10M-value BIGINT numpy column (values/s);
- ``value_columns_fixed`` / ``value_columns_mixed``: ``encode_column_buffer`` (the packed write
  path's value encoder: a state table's chunk written as one buffer) of 10,000-row chunks in a
  shuffled order, rows/s: four 8-byte columns without NULLs (q1's MV row in bench.peers: the
  one-row-size path), and the same with a VARCHAR column and a nullable one (the general path).

Targets (issue "Foundation"): native >= 2M rows/s encode and >= 1.5M rows/s decode; vectorized
BIGINT >= 50M values/s; native >= 10x pure. Run: ``python -m bench.encoding [--rows N]``.
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np

from bench.harness import median_rate, report
from relational import memcomparable
from relational.types import DataType

TYPES = (DataType.BIGINT, DataType.VARCHAR, DataType.DOUBLE, DataType.INT)


def make_rows(n: int) -> list[tuple]:
    rng = np.random.default_rng(7)
    ids = rng.integers(-(2**62), 2**62, n)
    return [(int(ids[i]), f"user-{i:011d}", i * 0.25, None if i % 3 == 0 else i) for i in range(n)]


def with_x_pure(results: list[dict]) -> list[dict]:
    """``results`` with each native row's ``x_pure``: its rate over the pure twin's."""
    by_key = {(r["workload"], r["impl"]): r["per_s"] for r in results}
    for r in results:
        if r["impl"] == "native":
            r["x_pure"] = r["per_s"] / by_key[(r["workload"], "pure")]
    return results


def bench_implementations(rows: list[tuple]) -> list[dict]:
    results = []
    impls = {
        "native": (importlib.import_module("native._memcomparable"), importlib.import_module("native._value_encoding")),
        "pure": (importlib.import_module("relational._memcomparable_py"),
                 importlib.import_module("relational._value_encoding_py")),
    }
    n = len(rows)
    for name, (mc, ve) in impls.items():
        keys = mc.encode_rows(rows, TYPES)
        values = ve.encode_rows(rows, TYPES)
        small = rows[: max(1, n // 4)]
        figures = {
            "memcmp_encode": median_rate(lambda: mc.encode_rows(rows, TYPES), n),
            "memcmp_decode": median_rate(lambda: mc.decode_rows(keys, TYPES), n),
            "memcmp_encode_row": median_rate(lambda: [mc.encode_row(r, TYPES) for r in small], len(small)),
            "value_encode": median_rate(lambda: ve.encode_rows(rows, TYPES), n),
            "value_decode": median_rate(lambda: ve.decode_rows(values, TYPES), n),
        }
        for workload, rate in figures.items():
            results.append({"workload": workload, "impl": name, "per_s": rate})
    return with_x_pure(results)


def bench_vector(n: int) -> list[dict]:
    column = np.random.default_rng(3).integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    rate = median_rate(lambda: memcomparable.encode_columns([column], [DataType.BIGINT]), n)
    return [{"workload": "vector_bigint", "impl": "numpy", "per_s": rate}]


def bench_column_buffers(chunk: int = 10_000) -> list[dict]:
    rng = np.random.default_rng(5)
    order = rng.permutation(chunk).astype(np.int64)
    fixed = [(8, rng.integers(-(2**62), 2**62, chunk, dtype=np.int64), None, None) for _ in range(4)]
    text = b"".join(b"channel-%03d" % (i % 500) for i in range(chunk))
    offsets = np.arange(0, 11 * (chunk + 1), 11, dtype=np.int64)
    mixed = fixed[:2] + [(0, offsets, text, None),
                         (4, rng.integers(0, 2**31, chunk, dtype=np.int64), None, (np.arange(chunk) % 3 == 0).astype(np.uint8))]
    results = []
    for name, module in (("native", "native._value_encoding"), ("pure", "relational._value_encoding_py")):
        impl = importlib.import_module(module)
        for workload, cols in (("value_columns_fixed", fixed), ("value_columns_mixed", mixed)):
            rate = median_rate(lambda: impl.encode_column_buffer(cols, chunk, order), chunk)
            results.append({"workload": workload, "impl": name, "per_s": rate})
    return with_x_pure(results)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--vector-values", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    rows = make_rows(args.rows)
    results = bench_implementations(rows) + bench_vector(args.vector_values) + bench_column_buffers()
    report("encoding", results, ["workload", "impl", "per_s", "x_pure"])


if __name__ == "__main__":
    main()
