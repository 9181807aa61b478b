"""A plain model of the KV API's semantics, for tests of this layer and the layers above.

``KvModel`` keeps, per (table, key), every version as ``(versioned_epoch, value_or_None)``. It
assigns spill offsets exactly as the engine promises (several batches of one table in one epoch
get epoch + 0, + 1, ...), so "later batch wins" falls out of "newest version wins". Reads at
epoch E see versions <= E | 0xFFFF; ``reopen`` forgets everything above the committed epoch (and
may fall back to the epoch the store recovered, when nothing was committed after it).
"""

from __future__ import annotations

from collections import defaultdict

SPILL_MASK = 0xFFFF


class KvModel:
    def __init__(self):
        self.versions = defaultdict(list)   # (table, key) -> [(versioned_epoch, value)]
        self.offsets = defaultdict(int)     # (table, epoch) -> next spill offset
        self.committed_epoch = 0
        self.watermarks = defaultdict(list)    # (table, vnode) -> [(epoch, lo, hi)], hulls
        self.truncations = defaultdict(list)   # table -> [(epoch, through)]

    def ingest(self, table: int, pairs, epoch: int) -> None:
        if not pairs:
            return
        versioned = epoch + self.offsets[(table, epoch)]
        self.offsets[(table, epoch)] += 1
        for key, value in pairs:
            self.versions[(table, key)].append((versioned, value))

    def commit(self, epoch: int) -> None:
        self.committed_epoch = epoch

    def reopen(self, recovered: int | None = None) -> None:
        """A crash or close: everything above the committed epoch is gone.

        ``recovered``: the store's ``max_committed_epoch`` after the reopen. A commit of an
        epoch with nothing to publish writes no delta (docs/engine.md), so the store may come
        back at an earlier committed epoch -- only one after which nothing was committed: no
        version above it, and reads at it see what reads at the model's committed epoch saw.
        The model then falls back to it. Anything else is an AssertionError."""
        if recovered is not None and recovered != self.committed_epoch:
            self._fall_back(recovered)
        for key in list(self.versions):
            kept = [v for v in self.versions[key] if v[0] & ~SPILL_MASK <= self.committed_epoch]
            if kept:
                self.versions[key] = kept
            else:
                del self.versions[key]
        self.offsets = defaultdict(int, {k: v for k, v in self.offsets.items() if k[1] <= self.committed_epoch})
        for records in (self.watermarks, self.truncations):
            for key in list(records):
                records[key] = [r for r in records[key] if r[0] <= self.committed_epoch]
                if not records[key]:
                    del records[key]

    def _fall_back(self, recovered: int) -> None:
        committed = self.committed_epoch
        assert recovered < committed, f"the store recovered epoch {recovered} above the committed {committed}"
        lost = [(t, k, v) for (t, k), vs in self.versions.items() for v, _ in vs
                if recovered < v & ~SPILL_MASK <= committed]
        assert not lost, f"reopen fell back to {recovered} below committed {committed}, losing {lost[:3]}"
        tables = {t for t, _ in self.versions} | {t for t, _ in self.watermarks} | set(self.truncations)
        for table in tables:
            assert self.items(table, recovered) == self.items(table, committed), \
                f"reopen fell back to {recovered} below committed {committed}: table {table} differs"
        self.committed_epoch = recovered

    # --- watermarks and truncations ----------------------------------------------------------

    def watermark_error(self, table: int, epoch: int, ranges: dict) -> str | None:
        """Why the store must refuse ``ranges`` ({vnode: (lo, hi)}) at ``epoch``, or None."""
        newest = max((r[-1][0] for (t, _), r in self.watermarks.items() if t == table and r), default=0)
        if epoch < newest:
            return "epoch below the newest watermark's"
        for vnode, (lo, hi) in ranges.items():
            if hi is not None and lo >= hi:
                return "empty range"
            current = self.watermarks.get((table, vnode))
            if current:
                _, clo, chi = current[-1]
                if (chi is not None and lo > chi) or (hi is not None and clo > hi):
                    return "disjoint from the current range"
        return None

    def update_watermarks(self, table: int, epoch: int, ranges: dict) -> None:
        """Merge each range into its vnode's current one (their hull); a range inside the
        current one changes nothing -- it leaves no record at ``epoch``, so it does not raise
        the table's newest watermark epoch either."""
        for vnode, (lo, hi) in ranges.items():
            history = self.watermarks[(table, vnode)]
            if history:
                _, clo, chi = history[-1]
                lo, hi = min(lo, clo), (None if hi is None or chi is None else max(hi, chi))
                if (lo, hi) == (clo, chi):
                    continue
                if history[-1][0] == epoch:
                    history.pop()
            history.append((epoch, lo, hi))

    def truncate_error(self, table: int, epoch: int) -> str | None:
        """Why the store must refuse a truncation of ``table`` at ``epoch``, or None."""
        history = self.truncations.get(table)
        return "epoch below the newest truncation's" if history and epoch < history[-1][0] else None

    def truncate(self, table: int, epoch: int) -> None:
        through = epoch + self.offsets[(table, epoch)] - 1
        history = self.truncations[table]
        if history and history[-1][0] == epoch:
            through = max(through, history.pop()[1])
        history.append((epoch, through))

    def _through(self, table: int, read: int) -> int:
        return max((t for e, t in self.truncations.get(table, ()) if e <= read), default=-1)

    def _hidden(self, table: int, key: bytes, read: int) -> bool:
        if len(key) < 2:
            return False
        ranges = [r for r in self.watermarks.get((table, key[0] << 8 | key[1]), ()) if r[0] <= read]
        if not ranges:
            return False
        _, lo, hi = ranges[-1]
        return lo <= key[2:] and (hi is None or key[2:] < hi)

    def get(self, table: int, key: bytes, epoch: int):
        read = epoch | SPILL_MASK
        through = self._through(table, read)
        visible = [v for v in self.versions.get((table, key), []) if through < v[0] <= read]
        if not visible or self._hidden(table, key, read):
            return None
        return max(visible)[1]

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
