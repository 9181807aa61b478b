"""The read path's iterators: batch sources and the merging, version-resolving ``UserScan``.

``UserScan(sources, read_epoch, reverse)`` comes from ``native/_iterators.pyx`` when built, else
from the twin ``hummock/_iterators_py.py`` (same results). Sources are
:func:`imm_source` (a slice of one imm, raw values) and :class:`SstRun` (one or more SSTs of a
non-overlapping run, tagged values; scanned block by block in C by the native ``UserScan``). See the twin's docstring for the contracts.
Callers: :mod:`hummock.read_view`.
"""

from __future__ import annotations

from hummock import _twins
from hummock.key import encode_full_keys

_impl = _twins.load("_iterators", "hummock._iterators_py")
UserScan = _impl.UserScan
#: ``SstRun(readers, start_full, end_full)``: SSTs with disjoint ranges, in key order, as one source.
SstRun = _impl.SstRun


def imm_source(imm, table_id: int, lo: int, hi: int, reverse: bool):
    """Entries ``lo..hi`` of ``imm`` as one batch of full keys and raw values."""
    full_keys = encode_full_keys(table_id, imm.keys[lo:hi], imm.epoch)
    batch = list(zip(full_keys, imm.values[lo:hi]))
    if reverse:
        batch.reverse()
    return [batch], False
