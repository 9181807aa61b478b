"""The read path's iterators: batch sources and the merging, version-resolving ``UserScan``.

``UserScan(sources, read_epoch, reverse)`` comes from ``native/_iterators.pyx`` when built, else
from the twin ``hummock/_iterators_py.py`` (same results). This module builds its sources:
:func:`imm_source` (a slice of one imm, raw values) and :func:`sst_source` (one or more SSTs of a
non-overlapping run, chained, tagged values). See the twin's docstring for the contracts.
Callers: :mod:`hummock.read_view`.
"""

from __future__ import annotations

from hummock import _twins
from hummock.key import encode_full_keys

_impl = _twins.load("_iterators", "hummock._iterators_py")
UserScan = _impl.UserScan


def imm_source(imm, table_id: int, lo: int, hi: int, reverse: bool):
    """Entries ``lo..hi`` of ``imm`` as one batch of full keys and raw values."""
    full_keys = encode_full_keys(table_id, imm.keys[lo:hi], imm.epoch)
    batch = list(zip(full_keys, imm.values[lo:hi]))
    if reverse:
        batch.reverse()
    return [batch], False


def sst_source(infos, open_sst, start_full, end_full, reverse: bool):
    """The entries of the SSTs ``infos`` -- in iteration order, key ranges not overlapping -- one
    batch per block, within ``[start_full, end_full)``. Each SST is opened (``open_sst(info)``)
    only when the scan reaches it."""
    def batches():
        for info in infos:
            yield from open_sst(info).scan_batches(start_full, end_full, reverse=reverse)
    return batches(), True
