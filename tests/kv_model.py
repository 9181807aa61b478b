"""A plain model of the KV API's semantics, for tests of this layer and the layers above.

``KvModel`` keeps, per (table, key), every version as ``(versioned_epoch, value_or_None)``. It
assigns spill offsets exactly as the engine promises (several batches of one table in one epoch
get epoch + 0, + 1, ...), so "later batch wins" falls out of "newest version wins". Reads at
epoch E see versions <= E | 0xFFFF; ``reopen`` forgets everything above the committed epoch.
"""

from __future__ import annotations

from collections import defaultdict

SPILL_MASK = 0xFFFF


class KvModel:
    def __init__(self):
        self.versions = defaultdict(list)   # (table, key) -> [(versioned_epoch, value)]
        self.offsets = defaultdict(int)     # (table, epoch) -> next spill offset
        self.committed_epoch = 0

    def ingest(self, table: int, pairs, epoch: int) -> None:
        if not pairs:
            return
        versioned = epoch + self.offsets[(table, epoch)]
        self.offsets[(table, epoch)] += 1
        for key, value in pairs:
            self.versions[(table, key)].append((versioned, value))

    def commit(self, epoch: int) -> None:
        self.committed_epoch = epoch

    def reopen(self) -> None:
        """A crash or close: everything above the committed epoch is gone."""
        for key in list(self.versions):
            kept = [v for v in self.versions[key] if v[0] & ~SPILL_MASK <= self.committed_epoch]
            if kept:
                self.versions[key] = kept
            else:
                del self.versions[key]
        self.offsets = defaultdict(int, {k: v for k, v in self.offsets.items() if k[1] <= self.committed_epoch})

    def get(self, table: int, key: bytes, epoch: int):
        visible = [v for v in self.versions.get((table, key), []) if v[0] <= epoch | SPILL_MASK]
        return max(visible)[1] if visible else None

    def items(self, table: int, epoch: int, start=None, end=None, prefix=None, reverse=False):
        out = []
        for (t, key) in self.versions:
            if t != table or (start is not None and key < start) or (end is not None and key >= end):
                continue
            if prefix is not None and not key.startswith(prefix):
                continue
            value = self.get(table, key, epoch)
            if value is not None:
                out.append((key, value))
        out.sort(reverse=reverse)
        return out
