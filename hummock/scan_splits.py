"""Cut points of one table's key range into parts of about equal stored bytes, for scans that
read the parts side by side (a batch query's scan in threads: ``StorageTable.read_split``).

Job: from a read state's SST block metadata alone (no block read), the table keys that cut
``[start, end)`` of ``table_id`` into at most ``parts`` ranges holding about the same bytes of
blocks. Points are block first keys' user keys (:func:`hummock.compaction.splits.split_points`),
so every version of a key falls in one part; they ascend and lie strictly inside the range, and
each part is charged at least ``min_bytes`` (fewer parts, or none, for a small range). Staging
data (imms, staging SSTs) is not weighed: parts are a cost estimate, never a correctness matter --
any cut points give the same rows, read part after part.

Callers: :class:`hummock.read_side.Snapshot` (``split_keys``).
"""

from __future__ import annotations

from hummock.compaction.splits import split_points

_TABLE_ID_LEN = 4
_EPOCH_LEN = 8


def _readers(state):
    for _, readers in state.l0:
        yield from readers
    for readers in state.levels:
        yield from readers


def split_keys(state, table_id: int, parts: int, start: bytes | None, end: bytes | None,
               min_bytes: int) -> list[bytes]:
    """Table keys cutting ``[start, end)`` of ``table_id`` in ``state`` (module docstring)."""
    if parts < 2:
        return []
    prefix = table_id.to_bytes(_TABLE_ID_LEN, "big")
    blocks = []
    for reader in _readers(state):
        if table_id not in reader.info.table_ids:
            continue
        for meta in reader.sst.meta.blocks:
            first = meta.first_key
            if first[:_TABLE_ID_LEN] != prefix:
                continue
            key = first[_TABLE_ID_LEN:-_EPOCH_LEN]
            if (end is not None and key >= end) or (start is not None and key < start):
                continue
            blocks.append((key, max(meta.stored_len, meta.content_len)))
    total = sum(size for _, size in blocks)
    parts = min(parts, total // max(1, min_bytes))
    points = split_points(blocks, parts)
    return [p for p in points if (start is None or p > start) and (end is None or p < end)]


__all__ = ["split_keys"]
