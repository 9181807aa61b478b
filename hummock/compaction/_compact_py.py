"""Pure-Python twin of ``native/_compact.pyx``: the per-entry loop of the compaction core.

:func:`compact_into` merges the input runs in full-key order, applies the retention rule
(``hummock/compaction/core.py`` states it) and adds the survivors to ``outputs`` (an
``SstableOutputs``), starting a new SST before a user key when the open one has reached
``target_sst_size`` or when the table id changes. Both implementations cut blocks exactly as
``SstableBuilder.add_tagged`` does, so they write byte-identical SSTs.

Errors: a stored value whose tag is neither ``0x01`` nor a lone ``0x02`` raises
``CorruptionError``; so does any corruption the SST reader finds. Counters are added to
``stats`` (a ``CompactionStats``) even when the merge fails midway.
Callers: :mod:`hummock.compaction.core` only.
"""

from __future__ import annotations

import heapq

from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import full_key_sort_key

_EPOCH_LEN = 8
_MAX_EPOCH = (1 << 64) - 1
_TAG_DELETE = b"\x02"
_TAG_PUT = b"\x01"


def _merged(runs):
    """``(full_key, tagged_value)`` of every run, in full-key order."""
    streams = [(entry for batch in run.batches(False) for entry in batch) for run in runs]
    if len(streams) == 1:
        return streams[0]
    return heapq.merge(*streams, key=lambda entry: full_key_sort_key(entry[0]))


def compact_into(runs, watermark: int, bottom: bool, outputs, target_sst_size: int, stats) -> None:
    """Merge ``runs`` (``SstRun`` s) into ``outputs``; see the module docstring."""
    if type(watermark) is not int or not 0 <= watermark <= _MAX_EPOCH:
        raise InvalidArgumentError(f"watermark must be an int in [0, 2**64), got {watermark!r}")
    n_in = n_out = dropped_versions = dropped_tombstones = 0
    current = None          # user key of the entry being looked at
    settled = False         # its newest version <= watermark was handled
    last = None             # user key of the last entry written
    builder = None
    try:
        for full_key, tagged in _merged(runs):
            n_in += 1
            user_key = full_key[:-_EPOCH_LEN]
            if user_key != current:
                current, settled = user_key, False
            if tagged[:1] != _TAG_PUT and tagged != _TAG_DELETE:
                raise CorruptionError("bad value tag", object="compaction input", expected="0x01 or lone 0x02",
                                      found=tagged[:2].hex())
            if _MAX_EPOCH - int.from_bytes(full_key[-_EPOCH_LEN:], "big") <= watermark:
                if settled:
                    dropped_versions += 1
                    continue
                settled = True
                if bottom and tagged == _TAG_DELETE:
                    dropped_tombstones += 1
                    continue
            if user_key != last:
                if builder is not None and (builder.estimated_size >= target_sst_size or user_key[:4] != last[:4]):
                    outputs.cut()
                    builder = None
                if builder is None:
                    builder = outputs.current()
                last = user_key
            builder.add_tagged(full_key, tagged)
            n_out += 1
    finally:
        stats.input_entries += n_in
        stats.output_entries += n_out
        stats.dropped_versions += dropped_versions
        stats.dropped_tombstones += dropped_tombstones
