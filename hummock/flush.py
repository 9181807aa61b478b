"""Turning imms into SSTs: the merge-and-build step of ``sync`` and of shared-buffer spills.

:func:`flush_imms` merges imms into one stream in full-key order (table id, table key, epoch
descending), cuts it into SSTs of about ``target_sst_size`` bytes -- only between two user keys,
so the versions of a key never straddle two SSTs of one flush -- and uploads each SST to the
object store as it is built. It also cuts between two tables when either side is large (at
least ``TABLE_OWN_SST_BYTES``: the next table's imms, or the SST so far), so a large table's
keys sit in SSTs of their own and the compaction picker sees each table's own key span in L0
(a table keyed by row id flushed together with its MV would otherwise make every L0 SST span
the MV's older keys too); small tables still share one SST, as the many small state tables of
one checkpoint do. It returns the ``SstableInfo`` of every SST written, in key order,
so one flush's SSTs never overlap each other (a table whose imms are all packed and unread, with
disjoint key ranges, is added straight from their buffers: ``SstableBuilder.add_packed``; a read
packed imm holds lists instead, and its table takes the general merge, which writes the same
bytes); given a ``metas`` list, it appends each SST's :class:`~hummock.sstable.meta.SstableMeta`
as built (parallel to the infos) for the caller's meta cache.

REQUIRES: imms that are immutable and have distinct versioned epochs per table.
On error every SST this call started is aborted or left as an orphan that vacuum removes; the
imms stay where they were (the caller removes them only after success).
Callers: :mod:`hummock.storage`.
"""

from __future__ import annotations

from hummock.shared_buffer import PackedImm, merge_runs
from hummock.sstable.builder import SstableOutputs

#: A table with at least this many bytes in one flush gets SSTs of its own, and so does the
#: next table after an SST that already holds this many (module doc).
TABLE_OWN_SST_BYTES = 256 << 10


def flush_imms(imms, store, builder_options, target_sst_size: int, new_sst_id, metas: list | None = None) -> list:
    """Build and upload SSTs holding every entry of ``imms``; return their infos in key order
    (and append their metas to ``metas``, when given, once every SST is uploaded)."""
    by_table: dict[int, list] = {}
    for imm in imms:
        by_table.setdefault(imm.table_id, []).append(imm)
    with SstableOutputs(store, builder_options, new_sst_id) as outputs:
        for table_id in sorted(by_table):
            if outputs.is_open and (outputs.current().estimated_size >= TABLE_OWN_SST_BYTES
                                    or sum(imm.size for imm in by_table[table_id]) >= TABLE_OWN_SST_BYTES):
                outputs.cut()   # a large table's keys get SSTs of their own (module doc)
            prefix = table_id.to_bytes(4, "big")
            packed = _packed_in_order(by_table[table_id])
            if packed is not None:   # straight from the buffers: no bytes object per entry
                for j, (epoch, batch) in enumerate(packed):
                    i, n = 0, len(batch)
                    while i < n:   # cut where add_batch of the merged lists would: the same SSTs
                        i = outputs.current().add_packed(prefix, epoch, batch, i, stop_at_size=target_sst_size,
                                                         continued=j > 0 and i == 0)
                        if i < n:
                            outputs.cut()
                continue
            runs = [(imm.epoch, imm.keys, imm.values) for imm in by_table[table_id]]
            keys, values = merge_runs(prefix, runs)
            i = 0
            while i < len(keys):
                i = outputs.current().add_batch(keys, values, i, stop_at_size=target_sst_size)
                if i < len(keys):
                    outputs.cut()
    if metas is not None:
        metas.extend(outputs.metas)
    return outputs.infos


def _packed_in_order(imms: list):
    """``[(versioned epoch, PackedColumns)]`` of ``imms`` (one table's) in key order when every
    one is a ``PackedImm`` that still holds its buffers (a read replaces them with lists) and
    their key ranges are disjoint -- the merge is then their concatenation, each a single
    version per key -- else None (the general merge). Each imm's ``packed`` is read once: a
    reader dropping it meanwhile leaves the flush the buffers it took."""
    batches = []
    for imm in imms:
        if type(imm) is not PackedImm:
            return None
        batch = imm.packed
        if batch is None:
            return None
        batches.append((imm.epoch, batch))
    batches.sort(key=lambda pair: pair[1].first_key)
    for (_, a), (_, b) in zip(batches, batches[1:]):
        if a.last_key >= b.first_key:
            return None
    return batches
