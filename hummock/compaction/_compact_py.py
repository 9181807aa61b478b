"""Pure-Python twin of ``native/_compact.pyx``: the per-entry loop of the compaction core.

:func:`compact_into` merges the input runs in full-key order, applies the retention rule
(``hummock/compaction/core.py`` states it) and adds the survivors to ``outputs`` (an
``SstableOutputs``), starting a new SST before a user key when the open one has reached
``target_sst_size`` or when the table id changes. Both implementations cut blocks exactly as
``SstableBuilder.add_tagged`` does, so they write byte-identical SSTs.

``hide`` (optional): ``{table_id: resolved table watermark}`` (``resolve_all`` at the
compaction's watermark epoch): every version a truncation hides and every version of a key in
a watermark range is dropped before the retention rule looks at it (counted in
``stats.dropped_hidden``); reads at or above the watermark hide them anyway.

Errors: a stored value whose tag is neither ``0x01`` nor a lone ``0x02`` raises
``CorruptionError``; so does any corruption the SST reader finds. Counters are added to
``stats`` (a ``CompactionStats``) even when the merge fails midway.
Callers: :mod:`hummock.compaction.core` only.
"""

from __future__ import annotations

import heapq

from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import full_key_sort_key
from hummock.table_watermarks import VNODE_LEN

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


def _in_range(ranges, user_key: bytes) -> bool:
    if len(user_key) < 4 + VNODE_LEN:
        return False
    rng = ranges.get(user_key[4] << 8 | user_key[5])
    if rng is None:
        return False
    rest = user_key[4 + VNODE_LEN:]
    return rng[0] <= rest and (rng[1] is None or rest < rng[1])


def check_hide(hide) -> dict:
    """``hide`` as a dict (``None``: empty); InvalidArgumentError if it is not one."""
    if hide is None:
        return {}
    if type(hide) is not dict:
        raise InvalidArgumentError(f"hide must be a dict {{table_id: resolved}}, got {type(hide).__name__}")
    return hide


def compact_into(runs, watermark: int, bottom: bool, outputs, target_sst_size: int, stats, hide=None) -> None:
    """Merge ``runs`` (``SstRun`` s) into ``outputs``; see the module docstring."""
    if type(watermark) is not int or not 0 <= watermark <= _MAX_EPOCH:
        raise InvalidArgumentError(f"watermark must be an int in [0, 2**64), got {watermark!r}")
    hide = check_hide(hide)
    n_in = n_out = dropped_versions = dropped_tombstones = dropped_hidden = 0
    current = None          # user key of the entry being looked at
    settled = False         # its newest version <= watermark was handled
    last = None             # user key of the last entry written
    table = None            # table id prefix of current, and what hides in that table:
    floor, ranges = -1, None    # versions <= floor (a truncation), keys in ranges
    in_range = False        # current lies in a watermark range
    builder = None
    try:
        for full_key, tagged in _merged(runs):
            n_in += 1
            user_key = full_key[:-_EPOCH_LEN]
            if user_key != current:
                current, settled = user_key, False
                if hide and user_key[:4] != table:
                    table = user_key[:4]
                    resolved = hide.get(int.from_bytes(table, "big"))
                    floor = -1 if resolved is None or resolved[0] is None else resolved[0]
                    ranges = None if resolved is None else resolved[1]
                in_range = ranges is not None and _in_range(ranges, user_key)
            if tagged[:1] != _TAG_PUT and tagged != _TAG_DELETE:
                raise CorruptionError("bad value tag", object="compaction input", expected="0x01 or lone 0x02",
                                      found=tagged[:2].hex())
            epoch = _MAX_EPOCH - int.from_bytes(full_key[-_EPOCH_LEN:], "big")
            if in_range or epoch <= floor:
                dropped_hidden += 1
                continue
            if epoch <= watermark:
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
        stats.dropped_hidden += dropped_hidden
