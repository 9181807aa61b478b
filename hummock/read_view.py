"""Read states: what a read sees, built once per change, and the scan over them.

A :class:`ReadState` (native ``native/_readpath.pyx`` or the twin ``hummock/_readpath_py.py``)
freezes the imms of every table, the staging SSTs and the committed version's SSTs as
:class:`SstReader` groups; its ``get``/``multi_get`` are the point-read path. This module builds
the version part (:func:`version_groups`) and runs scans over a state (:func:`scan`), merging
imm slices and SST block batches with :class:`~hummock.iterators.UserScan`.

Reads at epoch E see, per user key, the newest version with epoch <= E | 0xFFFF (every spill
offset of epoch E), tombstones hidden (DESIGN.md section 5).
Callers: :mod:`hummock.storage`.
"""

from __future__ import annotations

import bisect

from hummock import _twins
from hummock import iterators as it
from hummock.key import EPOCH_SPILL_MASK

_impl = _twins.load("_readpath", "hummock._readpath_py")
ReadState = _impl.ReadState
SstReader = _impl.SstReader

_EPOCH_LEN = 8


def visible_epoch(epoch: int) -> int:
    """The largest versioned epoch a read at ``epoch`` sees."""
    return epoch | EPOCH_SPILL_MASK


def version_groups(version, reader_for) -> tuple[tuple, tuple]:
    """``(l0, levels)`` for a :class:`ReadState`: L0 sub-levels newest first as
    ``(overlapping, readers)`` -- overlapping ones sorted by max epoch, newest first, the others by
    key -- and each lower level's readers sorted by key. ``reader_for(info)`` gives the reader."""
    l0 = []
    for sub in version.l0:
        if sub.overlapping:
            infos = sorted(sub.ssts, key=lambda s: s.max_epoch, reverse=True)
        else:
            infos = sorted(sub.ssts, key=lambda s: s.smallest_key[:-_EPOCH_LEN])
        if infos:
            l0.append((bool(sub.overlapping), tuple(reader_for(s) for s in infos)))
    levels = []
    for level in version.levels:
        infos = sorted(level.ssts, key=lambda s: s.smallest_key[:-_EPOCH_LEN])
        if infos:
            levels.append(tuple(reader_for(s) for s in infos))
    return tuple(l0), tuple(levels)


def _intersects(reader, lo_user: bytes, hi_user: bytes | None) -> bool:
    return reader.hi >= lo_user and (hi_user is None or reader.lo < hi_user)


def scan(state, table_id: int, epoch: int, start: bytes | None, end: bytes | None, reverse: bool):
    """Yield ``(key, value)`` of ``table_id`` for keys in ``[start, end)`` at ``epoch``, in key order
    (or reverse), from the sources frozen in ``state``."""
    read_epoch = visible_epoch(epoch)
    prefix = table_id.to_bytes(4, "big")
    lo_key = start or b""
    lo_user = prefix + lo_key
    hi_user = prefix + end if end is not None else None
    start_full = lo_user + b"\x00" * _EPOCH_LEN   # the newest version of the first key
    end_full = (hi_user + b"\x00" * _EPOCH_LEN) if hi_user is not None else _next_table_start(table_id)
    sources = []
    for imm in state.imms.get(table_id, ()):
        if imm.epoch > read_epoch:
            continue
        lo = bisect.bisect_left(imm.keys, lo_key)
        hi = len(imm.keys) if end is None else bisect.bisect_left(imm.keys, end)
        if lo < hi:
            sources.append(it.imm_source(imm, table_id, lo, hi, reverse))
    SstRun = it.SstRun
    for reader in state.staging:   # staging SSTs may overlap: one source each
        if reader.min_epoch <= read_epoch and _intersects(reader, lo_user, hi_user):
            sources.append(SstRun([reader], start_full, end_full))
    runs = [readers for overlapping, readers in state.l0 if not overlapping]
    runs.extend(state.levels)
    for overlapping, readers in state.l0:
        if overlapping:
            for reader in readers:
                if reader.min_epoch <= read_epoch and _intersects(reader, lo_user, hi_user):
                    sources.append(SstRun([reader], start_full, end_full))
    for readers in runs:   # non-overlapping runs, already sorted by key: one chained source each
        chosen = [r for r in readers if r.min_epoch <= read_epoch and _intersects(r, lo_user, hi_user)]
        if chosen:
            sources.append(SstRun(chosen, start_full, end_full))
    return it.UserScan(sources, read_epoch, reverse, state)


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
