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
Table watermarks and truncations (``hide``: what a read at the watermark hides, from
``HummockStorage._compaction_hide``) drop more: every version they hide at the watermark, since
they hide it at every later epoch too (``hummock/table_watermarks.py``).

The per-entry loop (merge, retention, feeding the SST builder) is ``native/_compact.pyx`` or its
pure twin ``hummock/compaction/_compact_py.py``: same cuts, byte-identical outputs.

Key ranges: each ``SstRun`` is read within its own ``[start, end)`` (full keys), so a runner may
split one task into partitions that compact disjoint key ranges independently (the Spark
runner). REQUIRES: such bounds fall on user-key boundaries -- a bound is the first full key of a
user key, ``user_key || 0x00 * 8`` -- so that all versions of a user key meet in one call (split
versions could keep an old put whose newer tombstone another partition dropped); then the
partitions' outputs do not overlap and together equal one unbounded compaction.

REQUIRES: inputs hold each (user key, epoch) at most once. Errors abort the output SSTs being
built; SSTs already finished are orphans until the caller commits or vacuum removes them.
Corrupt inputs raise ``CorruptionError``.
Callers: the compaction runners (in-process, and Spark executors with key-range-bounded runs).
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass

from hummock import _twins
from hummock.sstable.builder import SstableOutputs

_impl = _twins.load("_compact", "hummock.compaction._compact_py")


@dataclass
class CompactionStats:
    input_entries: int = 0
    output_entries: int = 0
    dropped_versions: int = 0
    dropped_tombstones: int = 0
    dropped_hidden: int = 0      # versions a table watermark or truncation hides

    def add(self, other) -> None:
        """Fold ``other``'s counters (a CompactionStats or a dict of its fields) into these."""
        items = other.items() if isinstance(other, dict) else dataclasses.asdict(other).items()
        for name, value in items:
            setattr(self, name, getattr(self, name) + value)


def compact(runs, watermark: int, bottom: bool, store, builder_options, target_sst_size: int, new_sst_id,
            stats: CompactionStats | None = None, hide: dict | None = None) -> list:
    """Merge ``runs`` (:class:`hummock.iterators.SstRun` s, each scanned within its own key
    range) into new SSTs in ``store``; return their infos in key order. See the module docstring
    for what is kept. ``new_sst_id()`` names each output; ``stats`` accumulates counters;
    ``hide``: ``{table_id: resolved table watermark}`` at ``watermark`` (default: none)."""
    stats = stats if stats is not None else CompactionStats()
    with SstableOutputs(store, builder_options, new_sst_id) as outputs:
        _impl.compact_into(runs, watermark, bottom, outputs, target_sst_size, stats, hide)
    return outputs.infos
