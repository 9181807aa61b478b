"""Read states: what a read sees, built once per change.

A :class:`ReadState` (native ``native/_readpath.pyx`` or the twin ``hummock/_readpath_py.py``)
freezes the imms of every table, the staging SSTs and the committed version's SSTs as
:class:`SstReader` groups; its ``get``/``multi_get`` are the point-read path and its ``iter``
the scan path (sources merged by :class:`~hummock.iterators.UserScan`). This module builds the
version part of a state (:func:`version_groups`), which a :class:`VersionView` holds once per
version, so a write's new state costs nothing per SST; a :class:`ReadHandle` gives the store
stable ``get``/``multi_get``/``iter`` methods over whichever state is installed.

Reads at epoch E see, per user key, the newest version with epoch <= E | 0xFFFF (every spill
offset of epoch E), tombstones hidden (DESIGN.md section 5).
Callers: :mod:`hummock.storage`.
"""

from __future__ import annotations

from hummock import _twins
from hummock.key import EPOCH_SPILL_MASK

_impl = _twins.load("_readpath", "hummock._readpath_py")
ReadState = _impl.ReadState
SstReader = _impl.SstReader
VersionView = _impl.VersionView
ReadHandle = _impl.ReadHandle

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
