"""Benchmark ``watermark``: StateTable watermark cleaning, the old scan-and-tombstone path against
the store's table watermarks (issue 11), in the same run.

Workload: a state table ``(ts BIGINT, id BIGINT, s VARCHAR ~12 chars)``, pk ``(ts, id)``,
distribution key ``id`` (rows spread over all 256 vnodes), N rows (1,000 ids per ``ts``) written
through ``write_chunk`` and checkpointed, in two fresh stores (``compactor="none"``, so no
background work runs during the timings). Then one watermark above every ``ts`` cleans all N rows:

- ``scan+tombstones``: what ``StateTable.commit`` did before issue 11 (kept here as
  :func:`legacy_commit`): per owned vnode scan the rows below the watermark, add one tombstone
  per row to the epoch's batch, ingest it; then ``store.checkpoint``.
- ``table watermark``: ``update_watermark`` + ``commit`` (one store watermark per owned vnode in
  the shared buffer, published with the commit's version delta) + ``store.checkpoint``.

Timed: from the watermark to the checkpoint's return (what a barrier waits for). Both tables must
then read empty. Also reported, untimed in the ratio: ``compact_all`` afterwards (the old path
rewrites N rows plus N tombstones; table watermarks drop the rows) and the bytes left in SSTs.
Target (issue 11): table watermark <= 1% of scan+tombstones at 1M rows.
Method: bench/harness.py conventions; ``--repeats`` fresh runs, medians.

Run: ``python -m bench.watermark [--rows N] [--repeats R] [--quick]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

from bench.harness import report

CHUNK = 4096
IDS_PER_TS = 1000


def chunks(n: int) -> list:
    out = []
    for start in range(0, n, CHUNK):
        i = np.arange(start, min(n, start + CHUNK), dtype=np.int64)
        out.append([pa.array(i // IDS_PER_TS), pa.array(i), pa.array([f"value-{x:06d}" for x in i.tolist()])])
    return out


def loaded_table(path: str, data: list):
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    from relational.state_table import OP_INSERT, StateTable
    from relational.types import DataType as T
    store = HummockStorage.open(path, StorageOptions(compactor="none"))
    table = StateTable(store, 1, [("ts", T.BIGINT), ("id", T.BIGINT), ("s", T.VARCHAR)], [0, 1],
                       dist_key_indices=[1], consistent=False)
    table.init_epoch(new_epoch())
    for j, cols in enumerate(data):
        table.write_chunk(np.full(len(cols[0]), OP_INSERT, dtype=np.int8), cols)
        if j % 16 == 15 or j == len(data) - 1:
            epoch = table.epoch
            table.commit(new_epoch())
            store.checkpoint(epoch)
    return store, table


def legacy_commit(table, watermark, new_epoch: int) -> None:
    """``StateTable.commit`` with watermark cleaning as it was before issue 11: scan every owned
    vnode's rows below the watermark and delete each in the epoch's batch."""
    from relational.memcomparable import encode_row
    w = encode_row([watermark], table.serde.pk_types[:1], table.serde.order_types[:1])
    doomed = []
    for vnode in table.vnodes:                       # ascending first pk column
        vp = vnode.to_bytes(2, "big")
        doomed.extend(table._merged(vp + b"\x01", vp + w, False))
    batch = table.mem.copy()
    for key, value in doomed:
        batch.delete(key, value)
    keys, values = batch.columns()
    if keys:
        table.store.ingest_batch(table.table_id, zip(keys, values), table.epoch)
    table.mem.clear()
    table.epoch = new_epoch


def sst_bytes(store) -> int:
    return sum(info.file_size for info in store.version().all_ssts())


def run(n: int, path_kind: str, data: list) -> dict:
    from hummock.key import new_epoch
    root = tempfile.mkdtemp(prefix="bench-watermark-")
    try:
        store, table = loaded_table(root, data)
        watermark = n // IDS_PER_TS + 1                # above every ts: cleans all N rows
        epoch = table.epoch
        start = time.perf_counter()
        if path_kind == "scan+tombstones":
            legacy_commit(table, watermark, new_epoch())
        else:
            table.update_watermark(watermark)
            table.commit(new_epoch())
        store.checkpoint(epoch)
        seconds = time.perf_counter() - start
        assert next(iter(table.iter_with_prefix()), None) is None, "rows left after cleaning"
        before = sst_bytes(store)
        start = time.perf_counter()
        store.compact_all()
        compact_seconds = time.perf_counter() - start
        row = {"path": path_kind, "ms": 1000 * seconds, "compact_all s": compact_seconds,
               "sst MiB before": before / 2**20, "sst MiB after": sst_bytes(store) / 2**20}
        store.close()
        return row
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="100,000 rows")
    args = parser.parse_args(argv)
    n = 100_000 if args.quick else args.rows
    from hummock import _twins
    import relational.value_encoding  # noqa: F401  (loads the twins, for the mode column)
    mode = "native" if all(_twins.LOADED.values()) else "pure"
    data = chunks(n)
    run(min(n, 20_000), "table watermark", data[:max(1, 20_000 // CHUNK)])   # warm-up: imports, caches
    rows = []
    for kind in ("scan+tombstones", "table watermark"):
        runs = [run(n, kind, data) for _ in range(args.repeats)]
        row = {k: statistics.median(r[k] for r in runs) if k != "path" else v for k, v in runs[0].items()}
        row.update(mode=mode, rows=n, **{"rows/s": 1000 * n / row["ms"]})
        rows.append(row)
    rows[1]["% of old"] = 100 * rows[1]["ms"] / rows[0]["ms"]
    report("watermark", rows, ["path", "mode", "rows", "ms", "rows/s", "% of old", "compact_all s",
                               "sst MiB before", "sst MiB after"])


if __name__ == "__main__":
    main()
