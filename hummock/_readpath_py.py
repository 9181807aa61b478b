"""Pure-Python twin of ``native/_readpath.pyx``: immutable read states and the point-get path.

A :class:`ReadState` is everything a read needs, frozen at one moment: per table the imms
(oldest first), the staging SSTs, and the committed version as L0 groups and lower levels of
:class:`SstReader` s. The engine builds a new state on every change and swaps it in; a reader
takes the current state and needs no lock. ``active`` counts gets in flight, so vacuum can tell
when a retired state's SSTs are no longer read.

``get`` order (DESIGN.md section 5): staging data first -- imms newest first (the native twin
screens each by a bloom filter built on first use), then staging SSTs,
the newest version among all hits winning (spills can interleave epochs) -- then the L0 groups
newest first (first group with a hit wins; inside an overlapping group the newest hit), then one
SST per lower level. SSTs are screened by key range, then by their filter.
Reads at epoch E see versioned epochs <= E | 0xFFFF. Table watermarks and truncations
(``marks``: table id -> :class:`~hummock.table_watermarks.TableWatermarks`) hide what they
cover at E: a get checks the version it found (``hides``), a scan hands the resolved records
to ``UserScan`` and skips sources that hold only truncated versions. Tables without records
cost one dict lookup on an empty dict.

``iter`` builds a scan over the same sources: one source per imm slice, per staging SST and per
SST of an overlapping L0 sub-level, one chained :class:`~hummock.iterators.SstRun` per
non-overlapping sub-level or lower level (only its SSTs that meet the range and hold an epoch
<= the read epoch), merged by :class:`~hummock.iterators.UserScan`, which keeps the state alive.
Prefix filters: when the version declares a prefix length ``n`` for the table and every key of
the scan's range starts with ``start[:n]``, an SST whose prefix filter (built with some length
``m``, the range confined to ``start[:m]`` too) says no is no source: no block is read for it.
An SST without a prefix filter for the table, or with a length the range is not confined to,
is always read. A scan without sources is an empty iterator.

Callers: :mod:`hummock.read_view` (facade) and the engine.
"""

from __future__ import annotations

import bisect

from hummock import iterators as it
from hummock.errors import ExpiredEpochError, InvalidArgumentError
from hummock.key import clamp_bounds, prefix_end
from hummock.table_watermarks import hides

_MAX_EPOCH = (1 << 64) - 1
_SPILL_MASK = 0xFFFF


class SstReader:
    """One SST as the read path sees it; opens the SST (``opener(info)``) on first use."""

    def __init__(self, info, opener):
        self.info = info
        self.sst_id = info.sst_id
        self.lo = info.smallest_key[:-8]
        self.hi = info.largest_key[:-8]
        self.min_epoch = info.min_epoch
        self.max_epoch = info.max_epoch
        self._opener = opener
        self._sst = None

    @property
    def sst(self):
        if self._sst is None:
            self._sst = self._opener(self.info)
        return self._sst

    def get(self, user_key: bytes, read_epoch: int):
        """``(version_epoch, value_or_None)`` of the newest version <= ``read_epoch``, or None."""
        return self.sst.get(user_key, read_epoch)

    def prefix_excludes(self, probe) -> bool:
        """True when this SST's prefix filter proves no key of ``probe``'s range is here."""
        sst = self.sst
        if sst.prefix_filter is None:
            return False
        n = sst.prefix_lens.get(probe.table_id)
        if n is None or n > len(probe.start):
            return False
        return probe.confined_to(n) and not sst.prefix_filter.may_contain(probe.lo_user[:4 + n])


def confined(start: bytes, end, n: int) -> bool:
    """Every key of ``[start, end)`` starts with ``start[:n]`` (REQUIRES ``len(start) >= n``)."""
    bound = prefix_end(start[:n])
    return bound is None or (end is not None and end <= bound)


class _PrefixProbe:
    """A scan whose range lies within one key prefix of at least the table's declared length:
    SSTs whose prefix filter rules that prefix out are skipped (docs/engine.md "Prefix filters")."""

    def __init__(self, table_id: int, start: bytes, end, lo_user: bytes):
        self.table_id, self.start, self.end, self.lo_user = table_id, start, end, lo_user
        self._n, self._ok = None, False

    def confined_to(self, n: int) -> bool:
        if n != self._n:
            self._n, self._ok = n, confined(self.start, self.end, n)
        return self._ok


def _check_args(table_id, key, epoch):
    if type(table_id) is not int or not 0 <= table_id <= 0xFFFFFFFF:
        raise InvalidArgumentError(f"table_id must be an int in [0, 4294967295], got {table_id!r}")
    if type(key) is not bytes:
        if not isinstance(key, (bytearray, memoryview)):
            raise InvalidArgumentError(f"key must be bytes, got {type(key).__name__}")
        key = bytes(key)
    if type(epoch) is not int or not 0 <= epoch <= _MAX_EPOCH:
        raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
    return key


def _check_bound(key, what: str):
    if key is None or type(key) is bytes:
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise InvalidArgumentError(f"{what} must be bytes, got {type(key).__name__}")


class VersionView:
    """The committed version's part of a read state, built once per version (its cost grows
    with the number of SSTs; a write's new state reuses it). ``l0``: tuple of ``(overlapping,
    readers)`` newest first, readers sorted by max epoch (overlapping) or by key (not);
    ``levels``: tuple of reader tuples sorted by key; ``min_epoch``: reads below raise
    ExpiredEpochError; ``marks``: the version's table watermarks (table id ->
    ``TableWatermarks``). Every argument is treated as immutable."""

    def __init__(self, l0: tuple, levels: tuple, version=None, min_epoch=0, marks=None):
        self.l0 = l0
        self.levels = levels
        self.version = version
        self.min_epoch = min_epoch
        self.prefix_lens = getattr(version, "prefix_len_map", None) or {}   # declared prefix lengths
        self.marks = {} if marks is None else marks
        self.l0_his = [None if overlapping else [r.hi for r in readers] for overlapping, readers in l0]
        self.level_his = [[r.hi for r in readers] for readers in levels]


class ReadState:
    """See the module docstring: ``imms`` (table id -> imms oldest first), ``staging`` (readers),
    a :class:`VersionView` and ``marks`` (table watermarks; default: the view's). Building one
    costs O(imm tables + staging SSTs), not O(SSTs)."""

    def __init__(self, imms: dict, staging: tuple, view: VersionView, marks=None):
        self.imms = imms
        self.staging = staging
        self.view = view
        self.marks = view.marks if marks is None else marks
        self.l0 = view.l0
        self.levels = view.levels
        self.version = view.version
        self.min_epoch = view.min_epoch   # reads below raise ExpiredEpochError
        self.active = 0
        self._l0_his = view.l0_his
        self._level_his = view.level_his
        self._prefix_lens = view.prefix_lens

    def get(self, table_id, key, epoch):
        """The value of ``key`` at ``epoch``, or ``None`` (absent or deleted)."""
        key = _check_args(table_id, key, epoch)
        if epoch < self.min_epoch:
            raise ExpiredEpochError(epoch, self.min_epoch)
        self.active += 1
        try:
            found = self._get_version(table_id, key, epoch | _SPILL_MASK)
        finally:
            self.active -= 1
        if found is None:
            return None
        if self.marks:
            records = self.marks.get(table_id)
            if records is not None and hides(records.resolve(epoch | _SPILL_MASK), key, found[0]):
                return None
        return found[1]

    def _check_read(self, table_id, epoch) -> None:
        """A read's table id and epoch: ints in range, the epoch not below ``min_epoch``."""
        _check_args(table_id, b"", epoch)
        if epoch < self.min_epoch:
            raise ExpiredEpochError(epoch, self.min_epoch)

    def multi_get(self, table_id, keys, epoch) -> list:
        """``[get(table_id, k, epoch) for k in keys]``; every key is checked before any is read."""
        self._check_read(table_id, epoch)
        try:
            keys = iter(keys)
        except TypeError:
            raise InvalidArgumentError(f"keys must be an iterable of bytes, got {type(keys).__name__}") from None
        checked = [_check_args(table_id, k, epoch) for k in keys]
        return [self.get(table_id, k, epoch) for k in checked]

    def iter(self, table_id, epoch, start=None, end=None, *, prefix=None, reverse=False):
        """``(key, value)`` of ``table_id`` for keys in ``[start, end)`` with ``prefix`` at
        ``epoch``, ascending (descending with ``reverse``); an iterator holding this state."""
        self._check_read(table_id, epoch)
        start = _check_bound(start, "start")
        end = _check_bound(end, "end")
        prefix = _check_bound(prefix, "prefix")
        start, end = clamp_bounds(start, end, prefix)
        if start is not None and end is not None and start >= end:
            return iter(())
        return self._scan(table_id, epoch | _SPILL_MASK, start, end, bool(reverse))

    def scan_prefixes(self, table_id, epoch, prefixes):
        """Every ``(key, value)`` of ``table_id`` at ``epoch`` whose key starts with each of
        ``prefixes`` (bytes; ``b""``: the whole table), ascending, as one ``(keys, values,
        ends)``: prefix i's pairs are ``keys[ends[i-1]:ends[i]]`` (``ends[-1]`` = 0). The same
        pairs as ``iter(prefix=p)`` per prefix, from this one state (a join probing many keys
        at once); every argument is checked before anything is read."""
        self._check_read(table_id, epoch)
        try:
            checked = list(prefixes)
        except TypeError:
            raise InvalidArgumentError(f"prefixes must be an iterable of bytes, got {type(prefixes).__name__}") from None
        for i, p in enumerate(checked):
            if type(p) is not bytes:
                if p is None:
                    raise InvalidArgumentError("prefix must be bytes, got NoneType")
                checked[i] = _check_bound(p, "prefix")
        read = epoch | _SPILL_MASK
        keys, values, ends = [], [], []
        for p in checked:
            for key, value in self._scan(table_id, read, p, prefix_end(p), False):
                keys.append(key)
                values.append(value)
            ends.append(len(keys))
        return keys, values, ends

    def _scan(self, table_id: int, read_epoch: int, start, end, reverse: bool):
        table = table_id.to_bytes(4, "big")
        lo_user = table + (start or b"")
        hi_user = None if end is None else table + end
        start_full = lo_user + bytes(8)   # the newest version of the first key
        if hi_user is not None:
            end_full = hi_user + bytes(8)
        elif table_id != 0xFFFFFFFF:
            # the table's end: an SST starting in a later table is no source (never opened)
            hi_user = (table_id + 1).to_bytes(4, "big")
            end_full = hi_user + bytes(8)
        else:
            end_full = None

        probe = None
        declared = self._prefix_lens.get(table_id)
        if declared is not None and start is not None and len(start) >= declared and confined(start, end, declared):
            probe = _PrefixProbe(table_id, start, end, lo_user)
        hide = None
        records = self.marks.get(table_id) if self.marks else None
        if records is not None:
            hide = records.resolve(read_epoch)
        floor = -1 if hide is None or hide[0] is None else hide[0]   # versions <= floor are hidden

        def wanted(r):
            return (r.min_epoch <= read_epoch and r.max_epoch > floor and r.hi >= lo_user
                    and (hi_user is None or r.lo < hi_user) and (probe is None or not r.prefix_excludes(probe)))

        sources = []
        for imm in self.imms.get(table_id, ()):
            if floor < imm.epoch <= read_epoch:
                lo = 0 if start is None else bisect.bisect_left(imm.keys, start)
                hi = len(imm.keys) if end is None else bisect.bisect_left(imm.keys, end)
                if lo < hi:
                    sources.append(it.imm_source(imm, table_id, lo, hi, reverse))
        for r in self.staging:   # staging SSTs may overlap: one source each
            if wanted(r):
                sources.append(it.SstRun([r], start_full, end_full))
        runs = []
        for (overlapping, readers), his in zip(self.l0, self._l0_his):
            if overlapping:
                sources.extend(it.SstRun([r], start_full, end_full) for r in readers if wanted(r))
            else:
                runs.append((readers, his))
        runs.extend(zip(self.levels, self._level_his))
        for readers, his in runs:   # sorted, non-overlapping: one chained source from the first hit
            chosen = []
            for r in readers[bisect.bisect_left(his, lo_user):]:
                if hi_user is not None and r.lo >= hi_user:
                    break
                if r.min_epoch <= read_epoch and r.max_epoch > floor and (
                        probe is None or not r.prefix_excludes(probe)):
                    chosen.append(r)
            if chosen:
                sources.append(it.SstRun(chosen, start_full, end_full))
        if not sources:
            return iter(())
        return it.UserScan(sources, read_epoch, reverse, self, hide)

    def _get_version(self, table_id: int, key: bytes, read_epoch: int):
        best = None
        for imm in reversed(self.imms.get(table_id, ())):
            if imm.epoch <= read_epoch:
                i = bisect.bisect_left(imm.keys, key)
                if i < len(imm.keys) and imm.keys[i] == key:
                    best = (imm.epoch, imm.values[i])
                    break
        user_key = table_id.to_bytes(4, "big") + key
        best = _best_of(self.staging, user_key, read_epoch, best)
        if best is not None:
            return best
        for (overlapping, readers), his in zip(self.l0, self._l0_his):
            best = _best_of(readers, user_key, read_epoch, None) if overlapping else \
                _one_of(readers, his, user_key, read_epoch)
            if best is not None:
                return best
        for readers, his in zip(self.levels, self._level_his):
            best = _one_of(readers, his, user_key, read_epoch)
            if best is not None:
                return best
        return None


def _best_of(readers, user_key: bytes, read_epoch: int, best):
    """The newest hit among overlapping readers (``best``: a hit found elsewhere, or None)."""
    for r in readers:
        if r.min_epoch > read_epoch or (best is not None and r.max_epoch <= best[0]):
            continue
        if r.lo <= user_key <= r.hi:
            hit = r.get(user_key, read_epoch)
            if hit is not None and (best is None or hit[0] > best[0]):
                best = hit
    return best


def _one_of(readers, his, user_key: bytes, read_epoch: int):
    """The hit in the one reader of a sorted, non-overlapping run whose range holds the key."""
    i = bisect.bisect_left(his, user_key)
    if i < len(readers):
        r = readers[i]
        if r.lo <= user_key and r.min_epoch <= read_epoch:
            return r.get(user_key, read_epoch)
    return None


class ReadHandle:
    """The store's stable read methods: ``get``/``multi_get``/``iter`` read whichever state is
    installed in ``state`` when they are called, so a caller may keep ``g = store.get`` and
    always read the current store. ``closed_error``: if set, every read raises it."""

    def __init__(self, state):
        self.state = state
        self.closed_error = None

    def get(self, table_id, key, epoch):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        return self.state.get(table_id, key, epoch)

    def multi_get(self, table_id, keys, epoch):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        return self.state.multi_get(table_id, keys, epoch)

    def iter(self, table_id, epoch, start=None, end=None, *, prefix=None, reverse=False):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        return self.state.iter(table_id, epoch, start, end, prefix=prefix, reverse=reverse)

    def scan_prefixes(self, table_id, epoch, prefixes):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        return self.state.scan_prefixes(table_id, epoch, prefixes)
