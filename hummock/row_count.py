"""A table's row count at an epoch from SST metadata alone, when the metadata decides it.

Job: ``count(*)`` over a whole table without reading a block. Every SST of format version 2
records, per table id, its *live count*: the user keys whose newest version in that SST is a
put (docs/format.md 4.3). A read at epoch E sees exactly the sum of the table's live counts
when all of these hold, and :func:`count_rows` answers ``None`` (scan instead) otherwise:

- the read state holds no imm and no staging SST of the table (a snapshot's state never does);
- the table has no watermark or truncation record hiding versions at E;
- every SST holding the table carries live counts and has ``max_epoch <= E`` (each key's
  newest version there is the one E sees);
- those SSTs' user-key ranges are pairwise disjoint, so no user key is in two of them: no
  older version elsewhere can be revived or shadowed, and no key is counted twice. After a
  full compaction the table is one sorted run, which is the case this serves.

Invariant: whenever the answer is an int, it equals the number of rows a scan of the table at
E yields (tested against scans over random histories in tests/test_row_count.py).
Callers: :class:`hummock.read_side.Snapshot` (``count_rows``).
"""

from __future__ import annotations

from hummock.key import EPOCH_SPILL_MASK


def _readers(state):
    for overlapping, readers in state.l0:
        yield from readers
    for readers in state.levels:
        yield from readers


def count_rows(state, table_id: int, epoch: int) -> int | None:
    """The rows of ``table_id`` a read of ``state`` at ``epoch`` sees, or ``None`` when the SST
    metadata cannot decide it (module docstring)."""
    if state.imms.get(table_id) or any(table_id in r.info.table_ids for r in state.staging):
        return None
    read_epoch = epoch | EPOCH_SPILL_MASK
    records = state.marks.get(table_id) if state.marks else None
    if records is not None and records.resolve(read_epoch) is not None:
        return None
    held = []
    for r in _readers(state):
        info = r.info
        if table_id not in info.table_ids:
            continue
        if info.live_counts is None or info.max_epoch > read_epoch:
            return None
        held.append((r.lo, r.hi, info.live_counts[info.table_ids.index(table_id)]))
    held.sort()
    for (_, hi, _), (lo, _, _) in zip(held, held[1:]):
        if hi >= lo:   # two SSTs may hold versions of one user key
            return None
    return sum(n for _, _, n in held)


__all__ = ["count_rows"]
