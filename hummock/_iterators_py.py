"""Pure-Python twin of ``native/_iterators.pyx``: the merge + user iterator of the read path.

Inputs are :class:`SstRun` s (SSTs of a run, scanned natively block by block in the native
twin) or *batch sources*: ``(batches, tagged)`` pairs where ``batches`` iterates lists of
``(full_key, value)`` entries in full-key order (reverse full-key order for reverse scans) and
``tagged`` says whether values carry the stored tag byte (SST entries: ``0x01``+payload or
``0x02``) or are raw (imm entries: bytes, or ``None`` for a delete). Producing whole lists (one
per SST block or imm slice) keeps per-entry Python work out of the sources.

:class:`UserScan` merges the sources (DESIGN.md's ``MergeIterator``; SSTs of one non-overlapping
level arrive as one chained source, the ``ConcatIterator``) and resolves versions (the
``UserIterator``): for each user key the newest version with epoch <= ``read_epoch``, tombstones
hidden. It yields ``(table_key, value)``. ``owner`` (the engine's read state) is kept referenced
while the scan lives, so vacuum spares what the scan reads. ``hide`` (optional) is a resolved
table watermark (``TableWatermarks.resolve``): versions at or below its truncation epoch are
ignored as if absent (so the newest one above it, if any, wins), and keys in a watermark range
are skipped (``hummock/table_watermarks.py``).

Contract: each (user key, epoch) appears in at most one source; sources respect the scan bounds.
Callers: :mod:`hummock.iterators` (the facade) only.
"""

from __future__ import annotations

import heapq

from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import full_key_sort_key
from hummock.table_watermarks import VNODE_LEN

_MAX_EPOCH = (1 << 64) - 1
_TAG_PUT = 0x01
_TAG_DELETE = 0x02


def _entries(batches, tagged: bool):
    for batch in batches:
        for full_key, value in batch:
            yield full_key, value, tagged


def _plain(value, tagged: bool):
    """The user value, or ``None`` for a delete."""
    if not tagged:
        return value
    if value[:1] == b"\x01":
        return value[1:]
    if value == b"\x02":
        return None
    raise CorruptionError("bad value tag", object="scan", expected="0x01 or lone 0x02", found=value[:2].hex())


class SstRun:
    """A run of SSTs with disjoint key ranges, in key order, scanned within ``[start, end)``
    (full keys, ``None``: unbounded). ``readers`` expose ``.sst`` (an opened Sstable)."""

    def __init__(self, readers, start=None, end=None):
        self.readers = list(readers)
        self.start = start
        self.end = end

    def batches(self, reverse: bool):
        """The run as lists of ``(full_key, tagged_value)`` (the generic source form)."""
        ordered = self.readers[::-1] if reverse else self.readers
        for reader in ordered:
            yield from reader.sst.scan_batches(self.start, self.end, reverse=reverse)


def _unpack_hide(hide):
    """``(through or None, ranges or None)`` of a resolved table watermark, checked as the
    native twin checks it."""
    if hide is None:
        return None, None
    if type(hide) is not tuple or len(hide) != 2:
        raise InvalidArgumentError("hide must be None or a (through, ranges) tuple")
    through, ranges = hide
    if through is not None and (type(through) is not int or not 0 <= through <= _MAX_EPOCH):
        raise InvalidArgumentError(f"a truncation epoch must be an int in [0, 2**64), got {through!r}")
    if ranges is not None and type(ranges) is not dict:
        raise InvalidArgumentError("watermark ranges must be a dict")
    return through, ranges


class UserScan:
    """Iterator of ``(table_key, value)``; see the module docstring."""

    def __init__(self, sources, read_epoch: int, reverse: bool = False, owner=None, hide=None):
        self.owner = owner  # kept alive for the scan's lifetime (the engine's read state)
        if type(read_epoch) is not int or not 0 <= read_epoch <= _MAX_EPOCH:
            raise InvalidArgumentError(f"read_epoch must be an int in [0, 2**64), got {read_epoch!r}")
        through, self._ranges = _unpack_hide(hide)
        self._floor = -1 if through is None else through
        streams = []
        for source in sources:
            if isinstance(source, SstRun):
                streams.append(_entries(source.batches(reverse), True))
            elif type(source) is tuple and len(source) == 2:
                streams.append(_entries(*source))
            else:
                raise InvalidArgumentError("a scan source must be an SstRun or a (batches, tagged) pair")
        if len(streams) == 1:
            self._merged = streams[0]
        else:
            self._merged = heapq.merge(*streams, key=lambda e: full_key_sort_key(e[0]), reverse=reverse)
        self._read_epoch = read_epoch
        self._gen = self._reverse() if reverse else self._forward()

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def close(self) -> None:
        """Stop early: drop the sources and the state this scan was reading."""
        self._gen = iter(())
        self._merged = iter(())
        self.owner = None

    def _in_range(self, user_key: bytes) -> bool:
        """``user_key`` (table id + table key) lies in its vnode's watermark range."""
        if self._ranges is None or len(user_key) < 4 + VNODE_LEN:
            return False
        rng = self._ranges.get(user_key[4] << 8 | user_key[5])
        if rng is None:
            return False
        rest = user_key[4 + VNODE_LEN:]
        return rng[0] <= rest and (rng[1] is None or rest < rng[1])

    def _forward(self):
        decided = None
        read_epoch, floor = self._read_epoch, self._floor
        for full_key, value, tagged in self._merged:
            user_key = full_key[:-8]
            if user_key == decided:
                continue
            epoch = _MAX_EPOCH - int.from_bytes(full_key[-8:], "big")
            if epoch > read_epoch or epoch <= floor:
                continue
            decided = user_key
            value = _plain(value, tagged)
            if value is not None and not self._in_range(user_key):
                yield user_key[4:], value

    def _reverse(self):
        # the versions of a user key arrive oldest first: the last visible one wins
        current, best, have = None, None, False
        read_epoch, floor = self._read_epoch, self._floor
        for full_key, value, tagged in self._merged:
            user_key = full_key[:-8]
            if user_key != current:
                if have and best is not None and not self._in_range(current):
                    yield current[4:], best
                current, best, have = user_key, None, False
            if floor < _MAX_EPOCH - int.from_bytes(full_key[-8:], "big") <= read_epoch:
                best, have = _plain(value, tagged), True
        if have and best is not None and not self._in_range(current):
            yield current[4:], best
