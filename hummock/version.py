"""Versions of the LSM tree and the deltas between them: the data model of the manifest.

A :class:`HummockVersion` is an immutable snapshot of the SSTs that make up the store
(DESIGN.md sections 4 and 6, the "HummockVersion" of RisingWave's Hummock manager):

- ``l0``: sub-levels, **newest first**. Each commit adds one sub-level holding the SSTs of one
  sync; inside a sub-level the SSTs are sorted by smallest key and, unless ``overlapping``,
  their key ranges are disjoint. Sub-levels may overlap each other.
- ``levels``: L1..Ln (``levels[i]`` is level ``i + 1``), each sorted by smallest full key
  (``hummock.key.full_key_sort_key``) with disjoint key ranges; a level may be empty.
- ``max_committed_epoch``: every epoch <= it is durable; ``next_sst_id`` / ``next_sub_level_id``
  are the first ids not yet handed out.
- ``safe_epoch``: the highest watermark any applied compaction used. Compaction keeps, per key,
  the newest version <= its watermark and every newer one, so reads at epochs >= safe_epoch are
  exact and reads below may not be (the engine refuses them: ``ExpiredEpochError``). Only a
  compaction delta raises it; it never exceeds ``max_committed_epoch``.
- ``table_prefix_lens``: per table id, the declared key-prefix length (bytes of table key) that
  flushes and compactions build SST prefix filters on (docs/engine.md "Prefix filters"); sorted
  ``(table_id, n)`` pairs, ``prefix_len_map`` as a dict. Only a ``table_options`` delta changes it.
- ``table_watermarks``: table id -> :class:`~hummock.table_watermarks.TableWatermarks`, the
  watermark and truncation records reads apply (that module states their rules). A commit
  appends the records of the epochs it publishes; a compaction that raises ``safe_epoch``
  folds each table's history at or below it (``apply`` derives the fold, so replay agrees).
- ``bulk_loads``: the newest ``MAX_BULK_LOADS`` bulk loads published (``ingest_ssts``), oldest
  first, as ``(table_id, epoch, digest)`` (``bulk_load_digest`` of the load's SST ids); a
  multi-producer commit (``commit_ssts``, any tables) is recorded with ``table_id`` ``None``.
  A retry of a load whose outcome was unknown asks here whether it landed: the record outlives
  the SSTs, which compaction may have rewritten since. Only a commit carrying ``bulk_load``
  appends to it (``apply`` trims it, so replay agrees).

Versions change only through :class:`VersionDelta` and :func:`apply`, which returns a new
version with ``id = delta.id = delta.prev_id + 1``. Kinds of delta:

- ``commit``: publishes an epoch (strictly increasing) and adds one L0 sub-level (or none for an
  epoch without data), with the table watermark records of the epochs it publishes;
- ``compaction``: removes input SSTs (from L0 sub-levels and/or levels; emptied sub-levels are
  dropped) and adds outputs to L1+; or, *intra-L0*, merges whole consecutive L0 sub-levels into
  one non-overlapping sub-level that takes their place and the newest one's id (outputs "added
  to level 0");
- ``move``: a trivial move: removes SSTs and adds the same ``SstableInfo`` to another level;
- ``table_options``: replaces ``table_prefix_lens`` (nothing else changes);
- ``reserve_ids``: raises ``next_sst_id`` by a block. **SST ids are never reused, even after a
  crash**: the writer persists a ``reserve_ids`` delta *before* it uploads any SST named from the
  block, so a recovered version's ``next_sst_id`` lies above every id that may exist in the
  store. ``apply`` enforces it: a commit or compaction may only add ids ``< next_sst_id``.

Invariants (checked by :meth:`HummockVersion._check`; ``apply`` keeps them): SST ids are unique
across the whole version and below ``next_sst_id``; L1+ levels and non-overlapping sub-levels
are sorted and disjoint; sub-level ids are unique, decreasing newest-first and below
``next_sub_level_id``; no sub-level is empty; ``levels`` holds levels ``1..num_levels``.
Epoch contents of SSTs are not checked (compaction outputs keep their data's epochs).

Serialization lives in ``hummock/version_codec.py`` (layout in ``docs/format.md`` section 6);
this module knows nothing of bytes or JSON.

Errors: :class:`VersionConflictError` (the delta was built for another version, or its inputs
are gone: the engine discards or :meth:`VersionDelta.rebase`\\ s it) and ``InvalidArgumentError``
(a malformed delta: the caller's bug). Everything here is pure and thread-safe.
Callers: ``hummock/manifest.py`` (persistence), the storage engine (commit, compaction).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Mapping

from hummock.errors import HummockError, InvalidArgumentError
from hummock.key import full_key_sort_key
from hummock.sstable.builder import check_prefix_lens
from hummock.sstable.meta import SstableInfo
from hummock.table_watermarks import TableWatermarks

__all__ = [
    "SubLevel", "Level", "HummockVersion", "VersionDelta", "VersionConflictError", "apply",
    "DEFAULT_NUM_LEVELS", "KINDS", "KIND_COMMIT", "KIND_COMPACTION", "KIND_MOVE", "KIND_RESERVE", "KIND_TABLE_OPTIONS",
    "MAX_BULK_LOADS", "bulk_load_digest",
]

DEFAULT_NUM_LEVELS = 6
KIND_COMMIT, KIND_COMPACTION, KIND_MOVE, KIND_RESERVE = "commit", "compaction", "move", "reserve_ids"
KIND_TABLE_OPTIONS = "table_options"
KINDS = (KIND_COMMIT, KIND_COMPACTION, KIND_MOVE, KIND_RESERVE, KIND_TABLE_OPTIONS)
_U64_MAX = 2**64 - 1
MAX_BULK_LOADS = 256          # bulk load records a version keeps (the newest; a retry comes soon)
BULK_LOAD_DIGEST_CHARS = 32   # hex digits of a bulk load's digest (128 bits)


class VersionConflictError(HummockError):
    """A delta does not fit the version: built on another version id, or it removes an SST the
    version does not hold (at that level). Nothing was applied; rebuild or rebase the delta."""


def _key(info: SstableInfo):
    return full_key_sort_key(info.smallest_key), info.sst_id


def _check_run(ssts, what: str) -> str | None:
    """The first problem of a sorted, disjoint run of SSTs, or None."""
    for a, b in zip(ssts, ssts[1:]):
        if full_key_sort_key(a.largest_key) >= full_key_sort_key(b.smallest_key):
            return f"{what}: SST {a.sst_id} overlaps or is not before SST {b.sst_id}"
    return None


def _check_u64(name: str, value) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _U64_MAX:
        return value
    raise InvalidArgumentError(f"{name} must be an int in [0, 2**64), got {value!r}")


def _check_infos(ssts, what: str) -> tuple[SstableInfo, ...]:
    ssts = tuple(ssts)
    for info in ssts:
        if not isinstance(info, SstableInfo):
            raise InvalidArgumentError(f"{what} must be SstableInfo objects, got {type(info).__name__}")
        if full_key_sort_key(info.smallest_key) > full_key_sort_key(info.largest_key):
            raise InvalidArgumentError(f"{what}: SST {info.sst_id} has smallest key > largest key")
    return ssts


@dataclasses.dataclass(frozen=True)
class SubLevel:
    """One L0 sub-level: the SSTs of one commit, sorted by smallest key."""

    sub_level_id: int
    ssts: tuple[SstableInfo, ...]
    overlapping: bool


@dataclasses.dataclass(frozen=True)
class Level:
    """Level ``level`` >= 1: SSTs sorted by smallest full key, key ranges disjoint."""

    level: int
    ssts: tuple[SstableInfo, ...]


@dataclasses.dataclass(frozen=True)
class HummockVersion:
    """An immutable snapshot of the LSM tree (see the module doc for fields and invariants)."""

    id: int
    max_committed_epoch: int
    l0: tuple[SubLevel, ...]
    levels: tuple[Level, ...]
    next_sst_id: int
    next_sub_level_id: int
    safe_epoch: int = 0   # reads below it may miss versions compaction dropped (max watermark used)
    table_prefix_lens: tuple = ()   # sorted (table_id, prefix_len) pairs: declared prefix filters
    #: table id -> its TableWatermarks (hummock/table_watermarks.py); tables without records absent
    table_watermarks: Mapping[int, TableWatermarks] = dataclasses.field(default_factory=dict, hash=False)
    #: the newest bulk loads, oldest first: ``(table_id, epoch, digest)`` (``bulk_load_digest``)
    bulk_loads: tuple = ()

    @functools.cached_property
    def prefix_len_map(self) -> dict:
        """``table_prefix_lens`` as a dict: table id -> declared prefix length."""
        return dict(self.table_prefix_lens)

    @classmethod
    def empty(cls, num_levels: int = DEFAULT_NUM_LEVELS) -> HummockVersion:
        """Version 0: no SSTs, epoch 0, ``num_levels`` empty levels (REQUIRES 1 <= n <= 64)."""
        if not isinstance(num_levels, int) or isinstance(num_levels, bool) or not 1 <= num_levels <= 64:
            raise InvalidArgumentError(f"num_levels must be an int in [1, 64], got {num_levels!r}")
        return cls(0, 0, (), tuple(Level(n, ()) for n in range(1, num_levels + 1)), 1, 1)

    def __repr__(self) -> str:
        return (f"HummockVersion(id={self.id}, max_committed_epoch={self.max_committed_epoch}, "
                f"l0={len(self.l0)} sub-levels, ssts per level={self.level_counts()}, "
                f"next_sst_id={self.next_sst_id})")

    @property
    def num_levels(self) -> int:
        return len(self.levels)

    @functools.cached_property
    def _locations(self) -> dict[int, int]:
        """sst id -> level (0 for L0). Cached: versions are immutable."""
        where = {info.sst_id: 0 for sub in self.l0 for info in sub.ssts}
        where.update((info.sst_id, level.level) for level in self.levels for info in level.ssts)
        return where

    def all_ssts(self) -> list[SstableInfo]:
        """Every SST: L0 sub-levels newest first, then L1..Ln in key order."""
        return [info for sub in self.l0 for info in sub.ssts] + [
            info for level in self.levels for info in level.ssts]

    def sst_ids(self) -> frozenset[int]:
        """The ids of every SST the version references."""
        return frozenset(self._locations)

    def level_of(self, sst_id: int) -> int | None:
        """The level holding ``sst_id`` (0 for L0), or None."""
        return self._locations.get(sst_id)

    def level_sizes(self) -> tuple[int, ...]:
        """Total ``file_size`` per level: index 0 is L0, index n is Ln."""
        return (sum(i.file_size for sub in self.l0 for i in sub.ssts),) + tuple(
            sum(i.file_size for i in level.ssts) for level in self.levels)

    def level_counts(self) -> tuple[int, ...]:
        """Number of SSTs per level: index 0 is L0 (all sub-levels), index n is Ln."""
        return (sum(len(sub.ssts) for sub in self.l0),) + tuple(len(lv.ssts) for lv in self.levels)

    def problems(self) -> list[str]:
        """Every violated invariant (module doc), as messages; empty if the version is sound."""
        out = []
        ids = [info.sst_id for info in self.all_ssts()]
        if len(ids) != len(set(ids)):
            out.append(f"duplicate SST ids {sorted(i for i in set(ids) if ids.count(i) > 1)}")
        if ids and max(ids) >= self.next_sst_id:
            out.append(f"SST id {max(ids)} >= next_sst_id {self.next_sst_id}")
        for info in self.all_ssts():
            if full_key_sort_key(info.smallest_key) > full_key_sort_key(info.largest_key):
                out.append(f"SST {info.sst_id} has smallest key > largest key")
        sub_ids = [sub.sub_level_id for sub in self.l0]
        if any(a <= b for a, b in zip(sub_ids, sub_ids[1:])):
            out.append(f"sub-level ids not strictly decreasing newest-first: {sub_ids}")
        if sub_ids and sub_ids[0] >= self.next_sub_level_id:
            out.append(f"sub-level id {sub_ids[0]} >= next_sub_level_id {self.next_sub_level_id}")
        for sub in self.l0:
            if not sub.ssts:
                out.append(f"sub-level {sub.sub_level_id} is empty")
            if list(sub.ssts) != sorted(sub.ssts, key=_key):
                out.append(f"sub-level {sub.sub_level_id} not sorted by smallest key")
            if not sub.overlapping:
                out.append(_check_run(sub.ssts, f"sub-level {sub.sub_level_id}"))
        if self.safe_epoch > self.max_committed_epoch:
            out.append(f"safe_epoch {self.safe_epoch} > max_committed_epoch {self.max_committed_epoch}")
        for table_id, records in self.table_watermarks.items():
            if not isinstance(records, TableWatermarks) or not records:
                out.append(f"table {table_id}: empty or malformed watermark records")
                continue
            out.extend(f"table {table_id}: {p}" for p in records.problems())
            if records.newest_epoch > self.max_committed_epoch:
                out.append(f"table {table_id} has a watermark record above max_committed_epoch")
        out.extend(_bulk_load_problems(self))
        if [lv.level for lv in self.levels] != list(range(1, len(self.levels) + 1)):
            out.append(f"levels are {[lv.level for lv in self.levels]}, expected 1..{len(self.levels)}")
        for lv in self.levels:
            if list(lv.ssts) != sorted(lv.ssts, key=_key):
                out.append(f"L{lv.level} not sorted by smallest key")
            out.append(_check_run(lv.ssts, f"L{lv.level}"))
        return [p for p in out if p]

    def _check(self) -> None:
        """Raise AssertionError listing every violated invariant (an engine bug if it fires)."""
        problems = self.problems()
        if problems:
            raise AssertionError(f"version {self.id} is unsound: " + "; ".join(problems))


@dataclasses.dataclass(frozen=True)
class VersionDelta:
    """The change from version ``prev_id`` to version ``id`` (module doc: kinds).

    ``removed`` holds ``(level, sst_id)`` pairs, level 0 meaning "in some L0 sub-level";
    ``added`` holds ``(level >= 1, SstableInfo)``; ``max_committed_epoch`` and ``next_sst_id``
    are the values of the resulting version. Build deltas with the constructors, which validate
    against the version they start from.
    """

    prev_id: int
    id: int
    max_committed_epoch: int
    next_sst_id: int
    new_sub_level: SubLevel | None = None
    removed: tuple[tuple[int, int], ...] = ()
    added: tuple[tuple[int, SstableInfo], ...] = ()
    kind: str = KIND_COMMIT
    safe_epoch: int = 0   # the resulting version's safe_epoch (compactions raise it)
    writer: str = ""      # a token of the writer that built it: two writers' deltas never match
    table_prefix_lens: tuple | None = None   # table_options: the new declarations (else None)
    #: commits only: table id -> the watermark records of epochs in (previous committed, epoch]
    table_watermarks: Mapping[int, TableWatermarks] = dataclasses.field(default_factory=dict, hash=False)
    #: commits of a bulk load only: ``(table_id, digest)`` of the load it publishes (``table_id``
    #: ``None``: a multi-producer commit, ``commit_ssts``, which may publish no SST at all)
    bulk_load: tuple | None = None

    @classmethod
    def commit(cls, version: HummockVersion, epoch: int, ssts: Iterable[SstableInfo],
               overlapping: bool = True, table_watermarks: Mapping[int, TableWatermarks] | None = None,
               bulk_load: tuple | None = None) -> VersionDelta:
        """Publish ``epoch`` with the SSTs of its sync as one new L0 sub-level (none if empty)
        and the table watermark records of the epochs it publishes; ``bulk_load``
        (``(table_id, bulk_load_digest(ids))``) records that it publishes that bulk load, so a
        retry can tell it landed whatever compaction did to its SSTs since.

        REQUIRES: ``epoch > version.max_committed_epoch``; SST ids unique, reserved (``<
        version.next_sst_id``) and not in the version; with ``overlapping=False`` disjoint key
        ranges; watermark records with epochs in ``(max_committed_epoch, epoch]`` that extend
        the version's (``TableWatermarks.extended``). Raises InvalidArgumentError otherwise.
        """
        _check_u64("epoch", epoch)
        ssts = tuple(sorted(_check_infos(ssts, "committed SSTs"), key=_key))
        sub = SubLevel(version.next_sub_level_id, ssts, bool(overlapping)) if ssts else None
        marks = {t: r for t, r in (table_watermarks or {}).items() if r}
        return cls._validated(version, cls(version.id, version.id + 1, epoch, version.next_sst_id,
                                           new_sub_level=sub, kind=KIND_COMMIT,
                                           safe_epoch=version.safe_epoch, table_watermarks=marks,
                                           bulk_load=bulk_load))

    @classmethod
    def compaction(cls, version: HummockVersion, removed_ids: Iterable[int],
                   added_by_level: Mapping[int, Iterable[SstableInfo]], watermark: int = 0) -> VersionDelta:
        """Replace the input SSTs ``removed_ids`` (any levels) by outputs in levels >= 1; or, with
        outputs for level 0 only (intra-L0), replace whole consecutive L0 sub-levels by one
        non-overlapping sub-level in their place (see ``_merged_sub_level_slot``).

        Raises VersionConflictError if an input is not in ``version`` or an output overlaps an
        SST left in its level (the level changed since the task was planned);
        InvalidArgumentError if an output id is not reserved or already used, an output level is
        out of range, or outputs overlap each other.
        """
        added = tuple((level, info) for level, infos in sorted(added_by_level.items())
                      for info in sorted(_check_infos(infos, "compaction outputs"), key=_key))
        delta = cls._removing(version, KIND_COMPACTION, removed_ids, added)
        safe = max(version.safe_epoch, min(_check_u64("watermark", watermark), version.max_committed_epoch))
        return cls._validated(version, dataclasses.replace(delta, safe_epoch=safe))

    @classmethod
    def move(cls, version: HummockVersion, sst_ids: Iterable[int], target_level: int) -> VersionDelta:
        """Trivial move: the SSTs ``sst_ids`` leave their level(s) for ``target_level`` >= 1.

        Raises VersionConflictError if one is missing or one overlaps an SST of the target
        level; InvalidArgumentError if they overlap each other or the level is out of range.
        """
        delta = cls._removing(version, KIND_MOVE, sst_ids, ())
        lookup = {info.sst_id: info for info in version.all_ssts()}
        added = tuple((target_level, lookup[sst_id]) for _, sst_id in delta.removed)
        return cls._validated(version, dataclasses.replace(delta, added=added))

    @classmethod
    def reserve_sst_ids(cls, version: HummockVersion, count: int) -> VersionDelta:
        """Reserve ``count`` >= 1 ids: ``range(version.next_sst_id, delta.next_sst_id)`` may be
        used once this delta is persisted (module doc; ``Manifest.reserve_sst_ids`` does both).
        Raises InvalidArgumentError for a bad count."""
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 2**32:
            raise InvalidArgumentError(f"count must be an int in [1, 2**32], got {count!r}")
        return cls._validated(version, cls(version.id, version.id + 1, version.max_committed_epoch,
                                           version.next_sst_id + count, kind=KIND_RESERVE,
                                           safe_epoch=version.safe_epoch))

    @classmethod
    def table_options(cls, version: HummockVersion, prefix_lens) -> VersionDelta:
        """Replace the version's declared prefix lengths by ``prefix_lens`` (a dict or
        ``(table_id, n)`` pairs; ``check_prefix_lens`` rules, InvalidArgumentError)."""
        return cls._validated(version, cls(version.id, version.id + 1, version.max_committed_epoch,
                                           version.next_sst_id, kind=KIND_TABLE_OPTIONS,
                                           safe_epoch=version.safe_epoch,
                                           table_prefix_lens=check_prefix_lens(prefix_lens)))

    @classmethod
    def _removing(cls, version, kind, sst_ids, added) -> VersionDelta:
        removed = []
        for sst_id in sst_ids:
            level = version.level_of(sst_id)
            if level is None:
                raise VersionConflictError(f"SST {sst_id!r} is not in version {version.id}")
            removed.append((level, sst_id))
        return cls(version.id, version.id + 1, version.max_committed_epoch, version.next_sst_id,
                   removed=tuple(sorted(removed)), added=added, kind=kind, safe_epoch=version.safe_epoch)

    @classmethod
    def _validated(cls, version: HummockVersion, delta: VersionDelta) -> VersionDelta:
        apply(version, delta)  # raises if the delta does not fit; the result is discarded
        return delta

    def rebase(self, version: HummockVersion) -> VersionDelta:
        """This compaction or move re-targeted at ``version`` (e.g. after commits landed while
        it ran). Raises VersionConflictError if its inputs are gone or its outputs no longer
        fit; InvalidArgumentError for other kinds (rebuild a commit; a reservation must not
        silently change its range)."""
        if self.kind not in (KIND_COMPACTION, KIND_MOVE):
            raise InvalidArgumentError(f"only compaction and move deltas are rebased, not {self.kind!r}")
        delta = dataclasses.replace(self, prev_id=version.id, id=version.id + 1,
                                    max_committed_epoch=version.max_committed_epoch,
                                    next_sst_id=version.next_sst_id,
                                    safe_epoch=max(self.safe_epoch, version.safe_epoch))
        try:
            return self._validated(version, delta)
        except InvalidArgumentError as exc:
            raise VersionConflictError(f"delta no longer fits version {version.id}: {exc}") from exc


# --- apply -----------------------------------------------------------------------------------

def apply(version: HummockVersion, delta: VersionDelta) -> HummockVersion:
    """Return the version ``delta`` produces from ``version`` (a new object; both unchanged).

    Raises VersionConflictError if ``delta.prev_id != version.id``, it removes an SST the
    version does not hold at that level, or an SST it adds overlaps one the delta did not plan
    for in its level; InvalidArgumentError if the delta is malformed: ids out of sequence, a
    commit epoch not above ``max_committed_epoch``, unreserved or reused SST ids, added SSTs
    overlapping each other, fields a kind must not change.
    """
    if delta.prev_id != version.id:
        raise VersionConflictError(
            f"{delta.kind} delta {delta.prev_id}->{delta.id} does not apply to version {version.id}")
    _check_shape(version, delta)
    l0, levels = list(version.l0), {lv.level: list(lv.ssts) for lv in version.levels}
    touched = {level for level, _ in delta.removed} | {level for level, _ in delta.added if level}
    merged = sorted((info for level, info in delta.added if level == 0), key=_key)
    slot = _merged_sub_level_slot(version, delta) if merged else None
    removed = {}
    for level, sst_id in delta.removed:
        removed[sst_id] = _remove(l0, levels, level, sst_id, version.id)
    new_ids = {}
    for level, info in delta.added:
        if level == 0:
            _check_new_id(version, delta, info, removed, new_ids)
            continue
        if level not in levels:
            raise InvalidArgumentError(f"SST {info.sst_id} added to level {level}; levels are "
                                       f"1..{version.num_levels}")
        _check_new_id(version, delta, info, removed, new_ids)
        levels[level].append(info)
    for level in sorted({level for level, _ in delta.added if level}):
        ssts = sorted(levels[level], key=_key)
        problem = _check_run(ssts, f"L{level} after the {delta.kind}")
        if problem:
            mine = {info.sst_id for lv, info in delta.added if lv == level}
            outputs_only = _check_run([i for i in ssts if i.sst_id in mine], "outputs")
            raise (InvalidArgumentError if outputs_only else VersionConflictError)(problem)
        levels[level] = ssts
    if merged:
        problem = _check_run(merged, "intra-L0 outputs")
        if problem:
            raise InvalidArgumentError(problem)
        position, sub_level_id = slot
        l0.insert(position, SubLevel(sub_level_id, tuple(merged), False))
    next_sub = version.next_sub_level_id
    if delta.new_sub_level is not None:
        for info in delta.new_sub_level.ssts:
            _check_new_id(version, delta, info, removed, new_ids)
        l0.insert(0, delta.new_sub_level)
        next_sub += 1
    new_levels = tuple(Level(lv.level, tuple(levels[lv.level])) if lv.level in touched else lv
                       for lv in version.levels)
    prefix_lens = version.table_prefix_lens if delta.table_prefix_lens is None else delta.table_prefix_lens
    safe_epoch = max(version.safe_epoch, delta.safe_epoch)
    loads = version.bulk_loads
    if delta.bulk_load is not None:   # the newest MAX_BULK_LOADS are kept: replay derives it
        table_id, digest = delta.bulk_load
        loads = (loads + ((table_id, delta.max_committed_epoch, digest),))[-MAX_BULK_LOADS:]
    return HummockVersion(delta.id, delta.max_committed_epoch, tuple(l0), new_levels,
                          delta.next_sst_id, next_sub, safe_epoch, table_prefix_lens=prefix_lens,
                          table_watermarks=_applied_watermarks(version, delta, safe_epoch),
                          bulk_loads=loads)


def _applied_watermarks(version: HummockVersion, delta: VersionDelta, safe_epoch: int):
    """The resulting version's table watermarks: a commit's records appended, and the history
    at or below a raised ``safe_epoch`` folded (``TableWatermarks.folded``)."""
    marks = version.table_watermarks
    if delta.table_watermarks:
        marks = dict(marks)
        for table_id, records in delta.table_watermarks.items():
            if not isinstance(records, TableWatermarks):
                raise InvalidArgumentError(f"watermarks of table {table_id} must be TableWatermarks")
            problems = records.problems()
            if problems:
                raise InvalidArgumentError(f"watermarks of table {table_id}: {problems[0]}")
            epochs = [e for e, _ in records.entries] + [e for e, _ in records.truncations]
            if not all(version.max_committed_epoch < e <= delta.max_committed_epoch for e in epochs):
                raise InvalidArgumentError(
                    f"watermarks of table {table_id} must have epochs in ({version.max_committed_epoch}, "
                    f"{delta.max_committed_epoch}]: those the commit publishes")
            marks[table_id] = marks.get(table_id, TableWatermarks()).extended(records)
    if safe_epoch > version.safe_epoch and marks:
        marks = {t: r.folded(safe_epoch) for t, r in marks.items()}
    return marks


def _check_shape(version: HummockVersion, delta: VersionDelta) -> None:
    """Kind-specific rules on the scalar fields (all InvalidArgumentError)."""
    def bad(message):
        raise InvalidArgumentError(f"{delta.kind} delta {delta.prev_id}->{delta.id}: {message}")
    if delta.kind not in KINDS:
        bad(f"unknown kind; expected one of {KINDS}")
    if delta.id != delta.prev_id + 1:
        bad("id must be prev_id + 1")
    changes_ids = delta.kind == KIND_RESERVE
    if changes_ids != (delta.next_sst_id != version.next_sst_id) or delta.next_sst_id < version.next_sst_id:
        bad(f"next_sst_id {delta.next_sst_id} (version has {version.next_sst_id}); only "
            f"reserve_ids raises it")
    if delta.kind == KIND_COMMIT:
        if delta.max_committed_epoch <= version.max_committed_epoch:
            bad(f"epoch {delta.max_committed_epoch} is not above max_committed_epoch "
                f"{version.max_committed_epoch}; epochs must strictly increase")
    elif delta.max_committed_epoch != version.max_committed_epoch:
        bad("only a commit changes max_committed_epoch")
    sub = delta.new_sub_level
    if sub is not None:
        if delta.kind != KIND_COMMIT:
            bad("only a commit adds an L0 sub-level")
        if sub.sub_level_id != version.next_sub_level_id or not sub.ssts:
            bad(f"new sub-level must be non-empty with id {version.next_sub_level_id}")
        if list(sub.ssts) != sorted(_check_infos(sub.ssts, "sub-level SSTs"), key=_key) or (
                not sub.overlapping and _check_run(sub.ssts, "sub-level")):
            bad("new sub-level must be sorted by smallest key (and disjoint unless overlapping)")
    _check_infos((info for _, info in delta.added), "added SSTs")
    if (delta.kind == KIND_TABLE_OPTIONS) != (delta.table_prefix_lens is not None):
        bad("table_prefix_lens is set by (and only by) a table_options delta")
    if delta.table_prefix_lens is not None and check_prefix_lens(delta.table_prefix_lens) != delta.table_prefix_lens:
        bad("table_prefix_lens must be sorted (table_id, prefix_len) pairs")
    if delta.table_watermarks and delta.kind != KIND_COMMIT:
        bad("only a commit carries table watermarks")
    if delta.bulk_load is not None:
        if not _is_bulk_load(delta.bulk_load):
            bad(f"bulk_load must be (table_id or None, {BULK_LOAD_DIGEST_CHARS} hex digits), "
                f"got {delta.bulk_load!r:.100}")
        if delta.kind != KIND_COMMIT or (sub is None and delta.bulk_load[0] is not None):
            bad("only a commit that publishes SSTs records a bulk load (a multi-producer "
                "commit, table None, may publish none)")
    if delta.kind in (KIND_COMMIT, KIND_RESERVE, KIND_TABLE_OPTIONS) and (delta.removed or delta.added):
        bad("must not remove or add level SSTs")
    if delta.kind in (KIND_COMPACTION, KIND_MOVE) and not delta.removed:
        bad("must remove at least one SST")
    if len({sst_id for _, sst_id in delta.removed}) != len(delta.removed):
        bad("removes an SST twice")
    if delta.safe_epoch < version.safe_epoch or delta.safe_epoch > delta.max_committed_epoch:
        bad(f"safe_epoch {delta.safe_epoch} must lie in [{version.safe_epoch}, "
            f"{delta.max_committed_epoch}] (it never falls, nor passes the committed epoch)")
    if delta.kind != KIND_COMPACTION and delta.safe_epoch != version.safe_epoch:
        bad("only a compaction raises safe_epoch")
    if delta.kind == KIND_MOVE and sorted(i.sst_id for _, i in delta.added) != sorted(
            sst_id for _, sst_id in delta.removed):
        bad("a move must add exactly the SSTs it removes")


def bulk_load_digest(sst_ids: Iterable[int]) -> str:
    """What identifies one bulk load in the version's record: the first 128 bits (hex) of the
    SHA-256 of its SST ids, sorted, as 8-byte big-endian integers. SST ids are never reused, so
    two loads never share a digest (and one load's retry always has the same)."""
    data = b"".join(i.to_bytes(8, "big") for i in sorted(sst_ids))
    return hashlib.sha256(data).hexdigest()[:BULK_LOAD_DIGEST_CHARS]


def _is_bulk_load(record) -> bool:
    """Whether ``record`` is a delta's ``(table_id, digest)``; ``table_id`` ``None`` marks a
    multi-producer commit (``commit_ssts``)."""
    return (isinstance(record, tuple) and len(record) == 2
            and (record[0] is None or (isinstance(record[0], int) and not isinstance(record[0], bool)
                                       and 0 <= record[0] <= 0xFFFFFFFF))
            and isinstance(record[1], str) and len(record[1]) == BULK_LOAD_DIGEST_CHARS
            and all(c in "0123456789abcdef" for c in record[1]))


def _bulk_load_problems(version: HummockVersion) -> list[str]:
    loads = version.bulk_loads
    if not isinstance(loads, tuple) or len(loads) > MAX_BULK_LOADS:
        return [f"bulk_loads must be a tuple of at most {MAX_BULK_LOADS} records"]
    out, last = [], -1
    for record in loads:
        if not (isinstance(record, tuple) and len(record) == 3 and _is_bulk_load((record[0], record[2]))
                and isinstance(record[1], int) and not isinstance(record[1], bool)):
            out.append(f"malformed bulk load record {record!r:.100}")
            continue
        if not last < record[1] <= version.max_committed_epoch:
            out.append(f"bulk load epochs must increase and not pass max_committed_epoch: {record[1]}")
        last = record[1]
    return out


def _merged_sub_level_slot(version: HummockVersion, delta: VersionDelta) -> tuple[int, int]:
    """Where an intra-L0 compaction's outputs go: ``(index in l0, sub-level id)`` of the newest
    sub-level it removes. Its inputs must be whole, consecutive L0 sub-levels; the merged
    sub-level takes their place, so the newest-first order of sub-levels (and of the epochs
    they hold) is kept. Raises VersionConflictError when a sub-level is no longer whole (the
    version changed since the task was planned), InvalidArgumentError for a malformed delta."""
    if delta.kind != KIND_COMPACTION:
        raise InvalidArgumentError(f"only a compaction adds SSTs to L0 (intra-L0), not a {delta.kind}")
    if any(level != 0 for level, _ in delta.removed) or any(level != 0 for level, _ in delta.added):
        raise InvalidArgumentError("an intra-L0 compaction must take and give only L0 SSTs")
    doomed = {sst_id for _, sst_id in delta.removed}
    positions = []
    for n, sub in enumerate(version.l0):
        ids = {info.sst_id for info in sub.ssts}
        if ids & doomed:
            if not ids <= doomed:
                raise VersionConflictError(f"L0 sub-level {sub.sub_level_id} is not whole in the intra-L0 "
                                           f"compaction's inputs (version {version.id})")
            positions.append(n)
    if not positions:
        raise VersionConflictError(f"the intra-L0 compaction's inputs are not in version {version.id}")
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise InvalidArgumentError("an intra-L0 compaction must merge consecutive L0 sub-levels")
    return positions[0], version.l0[positions[0]].sub_level_id


def _remove(l0: list, levels: dict, level: int, sst_id: int, version_id: int) -> SstableInfo:
    """Remove ``sst_id`` from ``level`` (0: any sub-level, dropping it once empty)."""
    if level == 0:
        for n, sub in enumerate(l0):
            for info in sub.ssts:
                if info.sst_id == sst_id:
                    rest = tuple(i for i in sub.ssts if i.sst_id != sst_id)
                    if rest:
                        l0[n] = dataclasses.replace(sub, ssts=rest)
                    else:
                        del l0[n]
                    return info
    else:
        for n, info in enumerate(levels.get(level, ())):
            if info.sst_id == sst_id:
                return levels[level].pop(n)
    raise VersionConflictError(f"SST {sst_id} is not in L{level} of version {version_id}")


def _check_new_id(version, delta, info: SstableInfo, removed: dict, new_ids: dict) -> None:
    """An SST a delta adds: reserved, unique, and not in the version unless moved unchanged."""
    sst_id = info.sst_id
    if sst_id in new_ids:
        raise InvalidArgumentError(f"{delta.kind} delta adds SST {sst_id} twice")
    new_ids[sst_id] = info
    if sst_id in removed:
        if removed[sst_id] != info:
            raise InvalidArgumentError(f"SST {sst_id} is re-added with different metadata")
        return
    if version.level_of(sst_id) is not None:
        raise InvalidArgumentError(f"SST id {sst_id} is already in version {version.id}")
    if sst_id >= version.next_sst_id:
        raise InvalidArgumentError(f"SST id {sst_id} is not reserved (next_sst_id is "
                                   f"{version.next_sst_id}); reserve ids before uploading SSTs")
