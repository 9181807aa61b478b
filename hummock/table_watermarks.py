"""Table watermarks and truncations: per table, which keys reads hide from a given epoch on.

RisingWave's *table watermarks*, generalized a little. Two kinds of record, both per table id,
both taking effect for reads at epochs >= the record's epoch (docs/engine.md "Table watermarks"):

- a **watermark** on one vnode: table keys start with a 2-byte vnode (big-endian); a watermark
  ``(lo, hi)`` hides every key of that vnode whose bytes after the vnode lie in ``[lo, hi)``
  (``hi`` ``None``: no upper end), whatever the epoch the key was written at. RisingWave's
  ascending watermark ``W`` is ``(b"", W)``; its descending one is ``(W, None)``; a state table
  that must keep NULLs passes a range excluding their tag bytes. Keys shorter than 2 bytes
  have no vnode and are never hidden by a watermark.
- a **truncation** ``(epoch, through)``: every version of the table with versioned epoch
  ``<= through`` is hidden (``through`` = the epoch plus the spill offsets written before the
  truncation, minus one: writes made after ``truncate_table`` in the same epoch survive).

Invariants (:meth:`TableWatermarks.problems` checks them; a version holding a table that breaks
one is corrupt):
- watermarks only grow: a vnode's later range contains its earlier one (an update is merged
  into the current range as their hull, refused if they neither overlap nor touch, ignored if
  contained), so what a read hides only grows with its epoch. Compaction relies on it: it may
  drop what a read at its watermark epoch hides, because every later read hides it too;
- record epochs have their low 16 bits zero; watermark entries and truncations are each sorted
  by strictly increasing epoch; truncations' ``through`` values never fall.

History: ``entries`` keeps one ``(epoch, ((vnode, lo, hi), ...))`` per epoch that changed a
range, because reads at older epochs (down to the version's ``safe_epoch``) must stay exact.
:meth:`TableWatermarks.folded` merges everything at or below ``safe_epoch`` into one entry (and
keeps only the newest truncation there) when compaction raises it.

Resolution for reads: :meth:`TableWatermarks.resolve` gives, for a read epoch, ``None`` (nothing
hidden) or ``(through_or_None, ranges_or_None)``; the read path (``native/_readpath.pyx``,
``native/_iterators.pyx``, their twins) and the compaction core take that tuple. Reads at or
above the newest record (the common case) get a cached answer.

Everything here is immutable and thread-safe. Callers: :mod:`hummock.version` (persistence),
:mod:`hummock.storage` (updates, reads), the compaction runners (what they may drop).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Mapping

from hummock.errors import InvalidArgumentError

__all__ = ["TableWatermarks", "check_ranges", "hides", "resolve_all", "with_pending", "MAX_VNODE", "VNODE_LEN"]

VNODE_LEN = 2              # bytes of vnode at the start of a table key
MAX_VNODE = 0xFFFF
_SPILL_MASK = 0xFFFF
_U64_MAX = 2**64 - 1


def _bad(message: str):
    raise InvalidArgumentError(message)


def _as_bytes(value, what: str) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(f"{what} must be bytes, got {type(value).__name__}")


def check_ranges(ranges) -> dict[int, tuple[bytes, bytes | None]]:
    """A caller's ``{vnode: W or (lo, hi)}`` as ``{vnode: (lo, hi)}``; a bare ``W`` (bytes)
    means ``(b"", W)``. Raises InvalidArgumentError for a vnode outside ``[0, 65535]``, a bound
    that is not bytes (``hi`` may be ``None``), or an empty range (``lo >= hi``)."""
    if not isinstance(ranges, Mapping):
        raise InvalidArgumentError(f"watermarks must be a mapping {{vnode: W or (lo, hi)}}, got "
                                   f"{type(ranges).__name__}")
    out = {}
    for vnode, rng in ranges.items():
        if isinstance(vnode, bool) or not isinstance(vnode, int) or not 0 <= vnode <= MAX_VNODE:
            raise InvalidArgumentError(f"vnode must be an int in [0, {MAX_VNODE}], got {vnode!r}")
        if isinstance(rng, (bytes, bytearray, memoryview)):
            lo, hi = b"", _as_bytes(rng, f"watermark of vnode {vnode}")
        elif isinstance(rng, (tuple, list)) and len(rng) == 2:
            lo = _as_bytes(rng[0], f"lo of vnode {vnode}")
            hi = None if rng[1] is None else _as_bytes(rng[1], f"hi of vnode {vnode}")
        else:
            raise InvalidArgumentError(f"the watermark of vnode {vnode} must be bytes W or a pair "
                                       f"(lo, hi), got {rng!r:.100}")
        if hi is not None and lo >= hi:
            raise InvalidArgumentError(f"the watermark range of vnode {vnode} is empty: lo {lo.hex()} "
                                       f">= hi {hi.hex()}")
        out[vnode] = (lo, hi)
    return out


def _contains(outer, inner) -> bool:
    return outer[0] <= inner[0] and (outer[1] is None or (inner[1] is not None and inner[1] <= outer[1]))


def _hull(current, new):
    """The smallest range holding both; None if they neither overlap nor touch."""
    (clo, chi), (lo, hi) = current, new
    if (chi is not None and lo > chi) or (hi is not None and clo > hi):
        return None
    return min(clo, lo), (None if chi is None or hi is None else max(chi, hi))


def hides(resolved, table_key: bytes, version_epoch: int) -> bool:
    """Whether ``resolved`` (from :meth:`TableWatermarks.resolve`; ``None`` hides nothing)
    hides the version of ``table_key`` written at ``version_epoch`` (the pure read path's check;
    the native one is ``native/_iterators.pyx``'s ``range_hides`` plus an epoch compare)."""
    if resolved is None:
        return False
    through, ranges = resolved
    if through is not None and version_epoch <= through:
        return True
    if ranges is not None and len(table_key) >= VNODE_LEN:
        rng = ranges.get(table_key[0] << 8 | table_key[1])
        if rng is not None:
            rest = table_key[VNODE_LEN:]
            return rng[0] <= rest and (rng[1] is None or rest < rng[1])
    return False


@dataclasses.dataclass(frozen=True)
class TableWatermarks:
    """One table's truncations and watermark history (module doc). Build with the ``with_*``
    methods, which validate; treat every field as immutable."""

    truncations: tuple[tuple[int, int], ...] = ()   # (epoch, through), epochs increasing
    entries: tuple = ()     # (epoch, ((vnode, lo, hi), ...) by vnode), epochs increasing

    # --- derived, cached (the object is immutable) ------------------------------------------

    @functools.cached_property
    def latest(self) -> dict:
        """``{vnode: (lo, hi)}``: each vnode's newest range (do not mutate)."""
        out = {}
        for _, changes in self.entries:
            for vnode, lo, hi in changes:
                out[vnode] = (lo, hi)
        return out

    @functools.cached_property
    def newest_epoch(self) -> int:
        """The epoch of the newest record, 0 if none."""
        return max(self.entries[-1][0] if self.entries else 0,
                   self.truncations[-1][0] if self.truncations else 0)

    @functools.cached_property
    def _epochs(self) -> list:
        return sorted({e for e, _ in self.entries} | {e for e, _ in self.truncations})

    @functools.cached_property
    def _top(self):
        through = self.truncations[-1][1] if self.truncations else None
        ranges = self.latest or None
        return None if through is None and ranges is None else (through, ranges)

    def __bool__(self) -> bool:
        return bool(self.entries or self.truncations)

    # --- resolution ------------------------------------------------------------------------

    def resolve(self, read_epoch: int):
        """What a read at ``read_epoch`` (a versioned epoch: ``epoch | 0xFFFF``) hides: ``None``
        or ``(through_or_None, {vnode: (lo, hi)} or None)``. Cached for reads at or above the
        newest record; older reads rebuild it from the history (a few per version)."""
        if read_epoch >= self.newest_epoch:
            return self._top
        epochs = self._epochs
        bucket = bisect.bisect_right(epochs, read_epoch)
        if bucket == 0:
            return None
        cache = self.__dict__.setdefault("_resolved", {})
        if bucket not in cache:
            cutoff = epochs[bucket - 1]
            through = None
            for epoch, thr in self.truncations:
                if epoch <= cutoff:
                    through = thr
            ranges = {}
            for epoch, changes in self.entries:
                if epoch > cutoff:
                    break
                for vnode, lo, hi in changes:
                    ranges[vnode] = (lo, hi)
            cache[bucket] = None if through is None and not ranges else (through, ranges or None)
        return cache[bucket]

    # --- building ---------------------------------------------------------------------------

    def with_watermarks(self, epoch: int, ranges) -> TableWatermarks:
        """These records plus ``ranges`` (``{vnode: W or (lo, hi)}``, see :func:`check_ranges`)
        at ``epoch``, each merged into its vnode's current range (module doc). Raises
        InvalidArgumentError for bad ranges, an ``epoch`` below the newest watermark entry's or a
        range disjoint from its vnode's current one."""
        ranges = check_ranges(ranges)
        if self.entries and epoch < self.entries[-1][0]:
            _bad(f"watermark epoch {epoch} is below this table's newest watermark epoch "
                 f"{self.entries[-1][0]}; watermarks arrive in epoch order")
        latest = self.latest
        changed = {}
        for vnode, rng in ranges.items():
            current = latest.get(vnode)
            if current is None:
                changed[vnode] = rng
                continue
            merged = _hull(current, rng)
            if merged is None:
                _bad(f"the watermark range of vnode {vnode} does not overlap or touch its current "
                     f"one {_show(current)}: a watermark only grows")
            if merged != current:
                changed[vnode] = merged
        if not changed:
            return self
        entries = list(self.entries)
        if entries and entries[-1][0] == epoch:   # a second update in the same epoch
            changed = {**{v: (lo, hi) for v, lo, hi in entries.pop()[1]}, **changed}
        entries.append((epoch, tuple((v, *changed[v]) for v in sorted(changed))))
        new = dataclasses.replace(self, entries=tuple(entries))
        new.__dict__["latest"] = {**latest, **changed}
        return new

    def with_truncation(self, epoch: int, through: int) -> TableWatermarks:
        """These records plus a truncation at ``epoch`` of versions ``<= through``. Raises
        InvalidArgumentError if ``epoch`` is below the newest truncation's."""
        truncations = list(self.truncations)
        if truncations:
            last_epoch, last_through = truncations[-1]
            if epoch < last_epoch:
                _bad(f"truncation epoch {epoch} is below this table's newest truncation epoch {last_epoch}")
            if epoch == last_epoch:
                truncations.pop()
                through = max(through, last_through)
        truncations.append((epoch, through))
        return dataclasses.replace(self, truncations=tuple(truncations))

    def between(self, low: int, high: int) -> TableWatermarks:
        """The records with ``low < epoch <= high`` (what a commit of ``high`` publishes when
        ``low`` was the committed epoch)."""
        return TableWatermarks(tuple(t for t in self.truncations if low < t[0] <= high),
                               tuple(e for e in self.entries if low < e[0] <= high))

    def extended(self, newer: TableWatermarks) -> TableWatermarks:
        """These records followed by ``newer``'s, all of whose epochs must be above every epoch
        here and whose ranges must contain the current ones (InvalidArgumentError otherwise)."""
        if not newer:
            return self
        if not self:
            return newer
        first = min([e for e, _ in newer.entries] + [e for e, _ in newer.truncations])
        if first <= self.newest_epoch:
            _bad(f"records at epoch {first} do not follow the newest record at {self.newest_epoch}")
        if newer.truncations and self.truncations and newer.truncations[0][1] < self.truncations[-1][1]:
            _bad("a truncation's 'through' epoch falls")
        latest = dict(self.latest)
        for _, changes in newer.entries:
            for vnode, lo, hi in changes:
                current = latest.get(vnode)
                if current is not None and not _contains((lo, hi), current):
                    _bad(f"the watermark range of vnode {vnode} shrinks: {_show(current)} -> {_show((lo, hi))}")
                latest[vnode] = (lo, hi)
        out = TableWatermarks(self.truncations + newer.truncations, self.entries + newer.entries)
        out.__dict__["latest"] = latest
        return out

    def folded(self, safe_epoch: int) -> TableWatermarks:
        """The same reads at every epoch >= ``safe_epoch``, with the history at or below it
        merged: one watermark entry (at the newest such epoch) and the newest truncation."""
        old = [e for e in self.entries if e[0] <= safe_epoch]
        cut = [t for t in self.truncations if t[0] <= safe_epoch]
        if len(old) <= 1 and len(cut) <= 1:
            return self
        truncations = self.truncations[max(len(cut) - 1, 0):]
        entries = self.entries
        if len(old) > 1:
            base = {}
            for _, changes in old:
                for vnode, lo, hi in changes:
                    base[vnode] = (lo, hi)
            merged = (old[-1][0], tuple((v, *base[v]) for v in sorted(base)))
            entries = (merged,) + self.entries[len(old):]
        out = TableWatermarks(truncations, entries)
        if "latest" in self.__dict__:
            out.__dict__["latest"] = self.latest
        return out

    # --- checks and JSON (docs/format.md section 6) -----------------------------------------

    def problems(self) -> list[str]:
        """Every broken invariant (module doc) as a message; empty if sound."""
        out = []
        prev_epoch = prev_through = None
        for item in self.truncations:
            if not (isinstance(item, tuple) and len(item) == 2 and all(_u64(x) for x in item)):
                return [f"bad truncation {item!r}"]
            epoch, through = item
            if epoch & _SPILL_MASK:
                out.append(f"truncation epoch {epoch} has low 16 bits set")
            if not epoch - 1 <= through <= epoch | _SPILL_MASK:
                out.append(f"truncation at {epoch} hides through {through}, outside its epoch")
            if prev_epoch is not None and (epoch <= prev_epoch or through < prev_through):
                out.append(f"truncations not increasing at epoch {epoch}")
            prev_epoch, prev_through = epoch, through
        prev_epoch, seen = None, {}
        for item in self.entries:
            if not (isinstance(item, tuple) and len(item) == 2 and _u64(item[0]) and isinstance(item[1], tuple)):
                return out + [f"bad watermark entry {item!r:.100}"]
            epoch, changes = item
            if epoch & _SPILL_MASK:
                out.append(f"watermark epoch {epoch} has low 16 bits set")
            if prev_epoch is not None and epoch <= prev_epoch:
                out.append(f"watermark epochs not increasing at {epoch}")
            if not changes:
                out.append(f"empty watermark entry at epoch {epoch}")
            prev_epoch, prev_vnode = epoch, -1
            for change in changes:
                if not (isinstance(change, tuple) and len(change) == 3):
                    return out + [f"bad watermark {change!r:.100}"]
                vnode, lo, hi = change
                if isinstance(vnode, bool) or not isinstance(vnode, int) or not prev_vnode < vnode <= MAX_VNODE:
                    out.append(f"watermark vnodes not increasing in [0, {MAX_VNODE}] at epoch {epoch}")
                    continue
                prev_vnode = vnode
                if type(lo) is not bytes or not (hi is None or type(hi) is bytes) or (hi is not None and lo >= hi):
                    out.append(f"bad watermark range of vnode {vnode} at epoch {epoch}")
                    continue
                if vnode in seen and not _contains((lo, hi), seen[vnode]):
                    out.append(f"the watermark range of vnode {vnode} shrinks at epoch {epoch}")
                seen[vnode] = (lo, hi)
        return out


def _u64(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _U64_MAX


def _show(rng) -> str:
    return f"[{rng[0].hex()}, {'end' if rng[1] is None else rng[1].hex()})"


def resolve_all(marks: Mapping, read_epoch: int) -> dict:
    """``{table_id: resolved}`` of every table with something hidden at ``read_epoch`` (what a
    compaction at watermark epoch ``e`` may drop: pass ``e | 0xFFFF``). Plain data: picklable."""
    out = {}
    for table_id, records in marks.items():
        resolved = records.resolve(read_epoch)
        if resolved is not None:
            out[table_id] = resolved
    return out


def with_pending(committed: Mapping, current: Mapping, committed_epoch: int) -> Mapping:
    """The read states' records: ``committed`` (a version's) plus the records of ``current``
    (the previous combination) above ``committed_epoch`` -- uncommitted ones, kept across a new
    version. Returns ``committed`` itself when nothing is pending."""
    pending = {t: r.between(committed_epoch, _U64_MAX) for t, r in current.items()
               if r.newest_epoch > committed_epoch}
    pending = {t: r for t, r in pending.items() if r}
    if not pending:
        return committed
    out = dict(committed)
    for table_id, records in pending.items():
        out[table_id] = out.get(table_id, TableWatermarks()).extended(records)
    return out
