"""Read views: a consistent set of sources for one read, and the get / iter algorithms over them.

A :class:`ReadView` is captured under the engine's lock and then read without it: the imms of one
table (immutable), the staging SSTs (synced, not yet committed) and a committed
:class:`~hummock.version.HummockVersion` with its :class:`VersionIndex`. The caller keeps the
version pinned while the view is in use, so vacuum cannot delete its SSTs.

Reads at epoch E see, per user key, the newest version with epoch <= E | 0xFFFF (every spill
offset of epoch E), tombstones hidden (DESIGN.md section 5).

``get`` order: the staging data (imms and staging SSTs; the newest version among all hits wins,
since spills can interleave epochs), then L0 sub-levels newest first (the first hit wins: a
newer commit holds only newer epochs; inside an overlapping sub-level the newest hit wins), then
one SST per lower level. Every SST is screened by key range, then by its filter.
Callers: :mod:`hummock.storage`.
"""

from __future__ import annotations

import bisect

from hummock import iterators as it
from hummock.key import EPOCH_SPILL_MASK, MAX_EPOCH

_EPOCH_LEN = 8


def visible_epoch(epoch: int) -> int:
    """The largest versioned epoch a read at ``epoch`` sees."""
    return epoch | EPOCH_SPILL_MASK


def _user_range(info):
    return info.smallest_key[:-_EPOCH_LEN], info.largest_key[:-_EPOCH_LEN]


class VersionIndex:
    """Per-version lookup structures, built once per version (versions are immutable)."""

    def __init__(self, version):
        self.version = version
        self.l0 = []  # (overlapping, infos, lows, highs) newest sub-level first
        for sub in version.l0:
            if sub.overlapping:
                infos = sorted(sub.ssts, key=lambda s: s.max_epoch, reverse=True)
            else:
                infos = sorted(sub.ssts, key=lambda s: _user_range(s)[0])
            self.l0.append((sub.overlapping, infos, [_user_range(s)[0] for s in infos],
                            [_user_range(s)[1] for s in infos]))
        self.levels = []  # (infos sorted by key, highs)
        for level in version.levels:
            infos = sorted(level.ssts, key=lambda s: _user_range(s)[0])
            if infos:
                self.levels.append((infos, [_user_range(s)[1] for s in infos]))

    def candidates_for_key(self, user_key: bytes):
        """Yield ``(group, infos)``: groups of SSTs that may hold ``user_key``, newest group first;
        within a group the newest version wins, and the first group with a hit ends the search."""
        for overlapping, infos, lows, highs in self.l0:
            if overlapping:
                hits = [s for s, lo, hi in zip(infos, lows, highs) if lo <= user_key <= hi]
                if hits:
                    yield hits
            else:
                i = bisect.bisect_left(highs, user_key)
                if i < len(infos) and lows[i] <= user_key:
                    yield [infos[i]]
        for infos, highs in self.levels:
            i = bisect.bisect_left(highs, user_key)
            if i < len(infos) and _user_range(infos[i])[0] <= user_key:
                yield [infos[i]]

    def ssts_for_range(self, lo_user: bytes, hi_user: bytes | None):
        """Yield ``(non_overlapping, infos)`` groups whose SSTs intersect ``[lo_user, hi_user)``."""
        def overlaps(info):
            low, high = _user_range(info)
            return high >= lo_user and (hi_user is None or low < hi_user)
        for overlapping, infos, _, _ in self.l0:
            chosen = [s for s in infos if overlaps(s)]
            if chosen:
                yield (not overlapping, chosen)
        for infos, _ in self.levels:
            chosen = [s for s in infos if overlaps(s)]
            if chosen:
                yield (True, chosen)


class ReadView:
    """Sources for reads of one table at one moment. See the module docstring."""

    def __init__(self, table_id: int, imms, staging, index: VersionIndex, open_sst):
        self.table_id = table_id
        self.prefix = table_id.to_bytes(4, "big")
        self.imms = imms            # this table's imms, oldest first
        self.staging = staging      # staging SstableInfos (all tables)
        self.index = index
        self.open_sst = open_sst    # SstableInfo -> Sstable

    # --- point reads ---

    def get(self, key: bytes, epoch: int):
        """The value of ``key`` at ``epoch``, or ``None`` (absent or deleted)."""
        found = self.get_version(key, visible_epoch(epoch))
        return None if found is None else found[1]

    def get_version(self, key: bytes, read_epoch: int):
        """``(version_epoch, value_or_None)`` of the newest visible version, or ``None``."""
        best = None
        for imm in reversed(self.imms):
            if imm.epoch <= read_epoch:
                present, value = imm.get(key)
                if present:
                    best = (imm.epoch, value)
                    break
        user_key = self.prefix + key
        for info in self.staging:
            if info.min_epoch > read_epoch or (best is not None and info.max_epoch <= best[0]):
                continue
            low, high = _user_range(info)
            if low <= user_key <= high:
                hit = self.open_sst(info).get(user_key, read_epoch)
                if hit is not None and (best is None or hit[0] > best[0]):
                    best = hit
        if best is not None:
            return best
        for group in self.index.candidates_for_key(user_key):
            for info in group:
                if info.min_epoch > read_epoch or (best is not None and info.max_epoch <= best[0]):
                    continue
                hit = self.open_sst(info).get(user_key, read_epoch)
                if hit is not None and (best is None or hit[0] > best[0]):
                    best = hit
            if best is not None:
                return best
        return None

    # --- scans ---

    def iter(self, epoch: int, start: bytes | None, end: bytes | None, reverse: bool):
        """Yield ``(key, value)`` for keys in ``[start, end)`` at ``epoch``, in key order (or reverse)."""
        read_epoch = visible_epoch(epoch)
        lo_key = start or b""
        lo_user = self.prefix + lo_key
        hi_user = self.prefix + end if end is not None else None
        start_full = lo_user + b"\x00" * _EPOCH_LEN   # the newest version of the first key
        end_full = (hi_user + b"\x00" * _EPOCH_LEN) if hi_user is not None else _next_table_start(self.table_id)
        sources = []
        for imm in self.imms:
            if imm.epoch > read_epoch:
                continue
            lo = bisect.bisect_left(imm.keys, lo_key)
            hi = len(imm.keys) if end is None else bisect.bisect_left(imm.keys, end)
            if lo < hi:
                sources.append(it.imm_source(imm, self.table_id, lo, hi, reverse))
        for info in self.staging:
            if info.min_epoch <= read_epoch and _intersects(info, lo_user, hi_user):
                sources.append(it.sst_source([info], self.open_sst, start_full, end_full, reverse))
        for non_overlapping, infos in self.index.ssts_for_range(lo_user, hi_user):
            infos = [s for s in infos if s.min_epoch <= read_epoch]
            if not infos:
                continue
            if non_overlapping:
                ordered = infos[::-1] if reverse else infos
                sources.append(it.sst_source(ordered, self.open_sst, start_full, end_full, reverse))
            else:
                sources.extend(it.sst_source([s], self.open_sst, start_full, end_full, reverse) for s in infos)
        if not sources:
            return iter(())
        return it.UserScan(sources, read_epoch, reverse)


def _intersects(info, lo_user: bytes, hi_user: bytes | None) -> bool:
    low, high = _user_range(info)
    return high >= lo_user and (hi_user is None or low < hi_user)


def _next_table_start(table_id: int):
    if table_id >= 0xFFFFFFFF:
        return None
    return (table_id + 1).to_bytes(4, "big") + b"\x00" * _EPOCH_LEN


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (``None``: unbounded)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes((trimmed[-1] + 1,))


def clamp_bounds(start, end, prefix):
    """Intersect ``[start, end)`` with the keys having ``prefix``."""
    if prefix is None:
        return start, end
    p_start, p_end = prefix, prefix_end(prefix)
    start = p_start if start is None or start < p_start else start
    if p_end is not None and (end is None or end > p_end):
        end = p_end
    return start, end


__all__ = ["ReadView", "VersionIndex", "visible_epoch", "prefix_end", "clamp_bounds", "MAX_EPOCH"]
