"""Benchmark ``scan_stages``: where one Spark read task's time goes, in a plain Python process.

A table of ``--rows`` rows (default 500,000) of ``bench.spark_io``'s schema (``id BIGINT`` pk,
``g INT``, ``name STRING``, ``score DOUBLE``) is bulk-loaded into a local-directory store
(``relational/bulk_load.py``, no Spark); then the whole table is read through a pinned
``VersionReader`` as a Spark task reads its partition, stage by stage:

- ``kv_scan``: iterate the ``(key, value)`` pairs only (the hummock read path);
- ``row_decode``: pairs in batches of 65,536 -> ``RowSerde.decode_many`` (Python tuples);
- ``row_path``: ... -> Arrow arrays built from Python values -> record batches (the read path
  before ``relational/scan_columns.py``, still taken for DECIMAL / INTERVAL / STRUCT / LIST);
- ``column_path``: pairs -> ``ColumnScan`` (native ``decode_columns``) -> record batches;
- ``count_only``: pairs counted by ``ColumnScan`` with no column (nothing decoded).

Method (bench/harness.py): one untimed run, then the median of ``--repeats`` runs; rows/s.

Run: ``python -m bench.scan_stages [--rows 500000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from itertools import islice

from bench.harness import median_rate, report

BATCH_ROWS = 65536


def build(root: str, rows: int):
    """Load the table into a store under ``root``; return ``(url, desc)``."""
    import numpy as np
    import pyarrow as pa

    from hummock import HummockStorage, StorageOptions
    from hummock.key import EPOCH_SPILL_MASK, new_epoch
    from relational.bulk_load import build_task_ssts, commit_load
    from relational.catalog import TableDesc
    from relational.row_serde import RowSerde
    from relational.types import DataType as T

    desc = TableDesc(1, "t", (("id", T.BIGINT), ("g", T.INT), ("name", T.VARCHAR), ("score", T.DOUBLE)), (0,),
                     dist_key_indices=(0,))
    rng = np.random.default_rng(7)
    ids = rng.permutation(rows).astype(np.int64)
    columns = [pa.array(ids), pa.array((ids % 1000).astype(np.int32)),
               pa.array([f"name{i:06d}" for i in ids.tolist()]), pa.array(rng.random(rows))]
    url = os.path.join(root, "store")
    options = StorageOptions(compactor="none")
    serde = RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices)
    with HummockStorage.open(url, options) as store:
        epoch = max(new_epoch(), (store.max_committed_epoch | EPOCH_SPILL_MASK) + 1)
        ids_ = store.reserve_sst_ids(1024)
        infos = build_task_ssts(store._store, serde, desc.table_id, columns, rows, epoch, 0, ids_,
                                options.sst_builder_options(), options.target_sst_size)
        commit_load(store, desc, infos, epoch, new_table=True)
    return url, desc, serde


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import pyarrow as pa

    from hummock import HummockStorage, StorageOptions
    from hummock.pinned_read import VersionReader
    from relational.scan_columns import ColumnScan
    from relational.spark_types import spark_column, spark_schema
    from relational.table_scan import scan_pairs

    root = tempfile.mkdtemp(prefix="hummock-bench-scan-stages-")
    try:
        url, desc, serde = build(root, args.rows)
        store = HummockStorage.open(url, StorageOptions(compactor="none"), read_only=True)
        reader = VersionReader(store._store, store.version(), 16 << 20)
        epoch = store.max_committed_epoch
        ranges = [(b"", None)]
        columns = list(range(len(desc.columns)))
        from pyspark.sql.pandas.types import to_arrow_schema
        target = to_arrow_schema(spark_schema([n for n, _ in desc.columns], desc.types), timezone="UTC")

        def pairs():
            return scan_pairs(reader, desc.table_id, epoch, ranges)

        def kv_scan():
            for _ in pairs():
                pass

        def row_batches():
            it = pairs()
            while True:
                batch = list(islice(it, BATCH_ROWS))
                if not batch:
                    return
                keys, values = zip(*batch)
                yield serde.decode_many(keys, values)

        def row_decode():
            for _ in row_batches():
                pass

        def row_path():
            for rows in row_batches():
                pa.RecordBatch.from_arrays([spark_column([r[i] for r in rows], desc.types[i], target.field(i).type)
                                            for i in columns], schema=target)

        def column_path():
            for _, arrays in ColumnScan.of(serde, columns).batches(pairs(), BATCH_ROWS):
                pa.RecordBatch.from_arrays(arrays, schema=target)

        def count_only():
            for _ in ColumnScan.of(serde, []).batches(pairs(), BATCH_ROWS):
                pass

        results = []
        for name, fn in (("kv_scan", kv_scan), ("row_decode", row_decode), ("row_path", row_path),
                         ("column_path", column_path), ("count_only", count_only)):
            results.append({"stage": name, "rows_s": median_rate(fn, args.rows, args.repeats)})
        store.close()
        print(f"# {args.rows:,} rows, one process; median of {args.repeats} after a warm-up; rows/s")
        report("scan_stages", results, ["stage", "rows_s"])
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
