"""The compaction core: merge input SSTs into new ones, dropping versions nobody can read.

Input: runs of SSTs (each run's SSTs have disjoint key ranges; runs may overlap), the
*watermark* (the lowest epoch any reader may still read at: the oldest pinned snapshot, or
``max_committed_epoch``), and whether the output goes to the bottom of the tree (nothing older
below it). Output: new SSTs in key order, cut at ``target_sst_size`` between user keys and
always between table ids, uploaded through the SST builder; their ``SstableInfo`` s are returned.

Retention rule, per user key (versions arrive newest first):
- every version with epoch > watermark is kept (a reader at any epoch >= watermark may need it);
- the newest version with epoch <= watermark is kept (it is what a read at the watermark sees),
  except a tombstone at the bottom level, which hides nothing any more and is dropped;
- every older version is dropped: no reader at an epoch >= watermark can see it.
So a read at any epoch >= watermark returns the same before and after compaction.

REQUIRES: inputs hold each (user key, epoch) at most once. Errors abort the output SSTs being
built; SSTs already finished are orphans until the caller commits or vacuum removes them.
Callers: the compaction runners.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from hummock.key import full_key_sort_key
from hummock.sstable.builder import SstableOutputs

_EPOCH_LEN = 8
_MAX_EPOCH = (1 << 64) - 1
_TAG_DELETE = b"\x02"


@dataclass
class CompactionStats:
    input_entries: int = 0
    output_entries: int = 0
    dropped_versions: int = 0
    dropped_tombstones: int = 0


def merged_entries(runs):
    """``(full_key, tagged_value)`` of every input, in full-key order."""
    streams = [(entry for batch in run.batches(False) for entry in batch) for run in runs]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda entry: full_key_sort_key(entry[0]))


def retained(entries, watermark: int, bottom: bool, stats: CompactionStats):
    """Apply the retention rule (module docstring) to entries in full-key order."""
    current = None
    settled = False  # the current user key's newest version <= watermark was handled
    for full_key, tagged in entries:
        stats.input_entries += 1
        user_key = full_key[:-_EPOCH_LEN]
        if user_key != current:
            current, settled = user_key, False
        epoch = _MAX_EPOCH - int.from_bytes(full_key[-_EPOCH_LEN:], "big")
        if epoch > watermark:
            yield full_key, tagged
            continue
        if settled:
            stats.dropped_versions += 1
            continue
        settled = True
        if bottom and tagged == _TAG_DELETE:
            stats.dropped_tombstones += 1
            continue
        yield full_key, tagged


def compact(runs, watermark: int, bottom: bool, store, builder_options, target_sst_size: int, new_sst_id,
            stats: CompactionStats | None = None) -> list:
    """Merge ``runs`` (:class:`hummock.iterators.SstRun` s) into new SSTs in ``store``; return
    their infos in key order. See the module docstring for what is kept."""
    stats = stats if stats is not None else CompactionStats()
    last_user_key = None
    with SstableOutputs(store, builder_options, new_sst_id) as outputs:
        for full_key, tagged in retained(merged_entries(runs), watermark, bottom, stats):
            user_key = full_key[:-_EPOCH_LEN]
            if outputs.is_open and user_key != last_user_key and (
                    outputs.current().estimated_size >= target_sst_size or user_key[:4] != last_user_key[:4]):
                outputs.cut()
            outputs.current().add_tagged(full_key, tagged)
            last_user_key = user_key
            stats.output_entries += 1
    return outputs.infos
