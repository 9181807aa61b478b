"""Cutting one table's key space into parallel scan partitions, and scanning one partition.

Job: for distributed reads (``relational/spark.py``), turn "these table-key ranges of table T in
version V" into partitions of about ``partition_bytes`` of stored data each, using the block
metas of the version's SSTs (the same size estimate the Spark compaction runner splits by), and
scan one partition's ranges at an epoch as pairs (for ``relational/scan_columns.py``) or as
decoded rows (the row path, for the columns it does not read).

Ranges are table-key ranges ``(lo, hi)`` (``hi`` ``None``: to the table's end); the whole table
is ``[(b"", None)]``, a pk prefix or bound gives one range per vnode (``table_iter.pk_ranges``).
Cuts fall on block first keys, i.e. on user-key boundaries, so every version of a key lies in
exactly one partition, and the partitions, in order, cover the ranges exactly: their union is the
input, they never overlap. A table without data gets one (empty) partition.

Pure planning over a version plus reads of SST metas; callers: :mod:`relational.spark`, tests.
"""

from __future__ import annotations

import bisect
from itertools import chain, islice

from hummock.sstable.reader import Sstable

DEFAULT_PARTITION_BYTES = 96 << 20   # between the 64 and 128 MiB a Spark task reads well
SCAN_BATCH = 4096                    # rows decoded per call while scanning


def table_ssts(version, table_id: int) -> list:
    """The version's SSTs that hold keys of ``table_id``."""
    return [info for info in version.all_ssts() if table_id in info.table_ids]


def block_weights(store, infos, table_id: int) -> list:
    """``[(table key of a block's first key, bytes)]`` over the blocks of ``infos`` that belong to
    ``table_id`` (a block's bytes: the larger of stored and decompressed length), sorted."""
    prefix = table_id.to_bytes(4, "big")
    out = []
    for info in infos:
        for meta in Sstable.open(store, info).meta.blocks:
            if meta.first_key[:4] == prefix:
                out.append((meta.first_key[4:-8], max(meta.stored_len, meta.content_len)))
    out.sort()
    return out


def plan_partitions(ranges, weights, partition_bytes: int) -> list:
    """Cut ``ranges`` (ascending, disjoint table-key ranges) into partitions, each a list of
    ranges, cutting at a weighted key once a partition holds ``partition_bytes`` (module doc)."""
    parts, current, charged = [], [], 0
    keys = [k for k, _ in weights]
    for lo, hi in ranges:
        start = lo
        first = bisect.bisect_left(keys, lo)
        last = len(keys) if hi is None else bisect.bisect_left(keys, hi)
        for key, size in islice(weights, first, last):
            if charged >= partition_bytes and key > start:
                current.append((start, key))
                parts.append(current)
                current, charged, start = [], 0, key
            charged += size
        current.append((start, hi))
    if current:
        parts.append(current)
    return parts or [[]]


def scan_pairs(reader, table_id: int, epoch: int, ranges):
    """One iterator of the ``(table key, value)`` pairs of ``ranges`` at ``epoch``, in key order
    (each range's scan opened when the previous one is used up); ``reader`` as for :func:`scan_rows`."""
    return chain.from_iterable(reader.iter(table_id, epoch, lo or None, hi) for lo, hi in ranges)


def scan_rows(reader, table_id: int, epoch: int, serde, ranges, batch_rows: int = SCAN_BATCH):
    """Yield lists of at most ``batch_rows`` rows (tuples in schema order) of ``ranges`` at
    ``epoch``, in key order; ``reader`` has ``iter(table_id, epoch, start, end)`` (a
    ``VersionReader`` or a snapshot-like store)."""
    for lo, hi in ranges:
        pairs = reader.iter(table_id, epoch, lo or None, hi)
        while True:
            batch = list(islice(pairs, batch_rows))
            if not batch:
                break
            keys, values = zip(*batch)
            yield serde.decode_many(keys, values)
            if len(batch) < batch_rows:
                break


__all__ = ["DEFAULT_PARTITION_BYTES", "table_ssts", "block_weights", "plan_partitions", "scan_pairs", "scan_rows"]
