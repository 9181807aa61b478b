"""The leveled compaction picker: which SSTs to compact next, and where to (DESIGN.md section 6).

Levels are sized dynamically, as RocksDB's ``level_compaction_dynamic_level_bytes``: the last
level L_n holds most data; level L's target is ``size(L_n) / multiplier ** (n - L)``. The *base
level* (where L0 goes) is the highest level whose target is still at least
``base_level_bytes``, so a small tree sends L0 straight to L_n and levels fill upwards as it grows.

Rules, first match wins:
1. L0 -> base level when L0 has ``l0_trigger`` sub-levels or ``l0_bytes_trigger`` bytes: every
   L0 SST plus the base-level SSTs they overlap, table by table (``_base_below``).
2. Intra-L0 when L0 has ``l0_intra_trigger`` sub-levels: the newest window of at least that many
   consecutive sub-levels of similar size (none more than ``l0_intra_size_ratio`` times the
   window's newest one, together under ``l0_bytes_trigger``) merges into one non-overlapping
   sub-level in their place. Every commit adds a sub-level; merging them in size tiers keeps
   their count -- the probes of every read -- low, while each byte is rewritten only about
   log_fanin(L0 bytes / commit bytes) times before L0 goes down, instead of each commit
   rewriting the overlapped base level. Except while L0 meets no base-level SST (keys that
   only grow, as a row-id table's or an append-only MV's; or an empty base level) and has
   fewer than twice ``l0_trigger`` sub-levels: then rule 1 rewrites each L0 byte exactly once
   and touches nothing below, so merging inside L0 first would only add rewrites (q1 of
   bench.peers: 82 MB of compaction input per 1M rows with it, 55 MB without).
3. L_i -> L_i+1 for the level (base <= i < n) with the highest ``size / target`` above 1: one SST
   of L_i (taking turns through the key space) plus the SSTs of L_i+1 it overlaps; with none, a
   trivial move.
Manual: :func:`pick_all` (``compact_all``) pushes every level down to the last one;
:func:`pick_range` / :func:`pick_bottom_rewrite` (``compact_range``) do it for the SSTs meeting a
key range (L0 whole, if any of it meets the range), then rewrite the range's last-level SSTs
that hold tombstones.
Inputs already in a running task (``busy``) are never picked again, so tasks never overlap.
``bottom`` is true when nothing lies below the target level: tombstones may then be dropped
(never for intra-L0).

Pure functions of a :class:`~hummock.version.HummockVersion`; callers: the compaction manager.
"""

from __future__ import annotations

from dataclasses import dataclass

_EPOCH_LEN = 8
L0_STOP_FACTOR = 3   # writers stall while L0 has this many times ``l0_trigger`` sub-levels (the engine)


@dataclass(frozen=True)
class PickerConfig:
    l0_trigger: int = 12                 # L0 sub-levels that start an L0 -> base compaction
    l0_bytes_trigger: int = 256 << 20    # ... or this many L0 bytes
    l0_intra_trigger: int = 4            # L0 sub-levels that start an intra-L0 compaction
    l0_intra_size_ratio: int = 2         # a window's sub-levels are at most this times its newest
    base_level_bytes: int = 256 << 20    # the base level's target size
    multiplier: int = 10                 # size ratio between adjacent levels


@dataclass(frozen=True)
class CompactionTask:
    """What to compact: ``runs`` are groups of input SSTs with disjoint key ranges (each merged as
    one sorted source); ``kind`` is ``"compact"`` or ``"move"`` (no rewrite)."""

    kind: str
    input_level: int
    target_level: int
    runs: tuple            # tuple of tuples of SstableInfo
    bottom: bool
    reason: str

    @property
    def input_ids(self) -> frozenset:
        return frozenset(info.sst_id for run in self.runs for info in run)

    @property
    def input_bytes(self) -> int:
        return sum(info.file_size for run in self.runs for info in run)


def _range(info):
    return info.smallest_key[:-_EPOCH_LEN], info.largest_key[:-_EPOCH_LEN]


def _overlapping(ssts, low: bytes, high: bytes):
    return [s for s in ssts if _range(s)[1] >= low and _range(s)[0] <= high]


def level_sizes(version) -> list[int]:
    """Bytes per level: index 0 is L0, then L1..Ln."""
    return [sum(s.file_size for sub in version.l0 for s in sub.ssts)] + \
        [sum(s.file_size for s in level.ssts) for level in version.levels]


def level_targets(version, config: PickerConfig) -> tuple[int, list[int]]:
    """``(base_level, targets)``: targets[L] for L = 1..n (index 0 unused)."""
    n = len(version.levels)
    sizes = level_sizes(version)
    targets = [0] * (n + 1)
    bottom = sizes[n] if n else 0
    for level in range(n, 0, -1):
        targets[level] = max(bottom // config.multiplier ** (n - level), 1)
    base = n
    while base > 1 and targets[base - 1] >= config.base_level_bytes:
        base -= 1
    for level in range(base, n):
        targets[level] = max(targets[level], config.base_level_bytes)
    return base, targets


def pending_bytes(version, config: PickerConfig = PickerConfig()) -> int:
    """Compaction debt: bytes the picker wants to rewrite now -- all of L0 once it passes an
    L0 -> base trigger, else the sub-levels an intra-L0 task would merge, plus every level's
    bytes above its target (what ``stats()`` reports as pending work)."""
    n = len(version.levels)
    if n == 0:
        return 0
    base, targets = level_targets(version, config)
    sizes = level_sizes(version)
    debt = sum(max(0, sizes[level] - targets[level]) for level in range(base, n))
    if len(version.l0) >= config.l0_trigger or sizes[0] >= config.l0_bytes_trigger:
        debt += sizes[0]
    else:
        intra = _pick_intra_l0(version, config, frozenset())
        debt += intra.input_bytes if intra is not None else 0
    return debt


def _nothing_below(version, level: int) -> bool:
    return all(not lv.ssts for lv in version.levels[level:])   # levels[level] is L(level+1)


def pick(version, config: PickerConfig = PickerConfig(), busy: frozenset = frozenset(),
         cursor: dict | None = None) -> CompactionTask | None:
    """The next task, or ``None``. ``cursor`` (level -> last picked key) makes L_i picks take turns."""
    n = len(version.levels)
    if n == 0:
        return None
    base, targets = level_targets(version, config)
    sizes = level_sizes(version)
    l0_ssts = [s for sub in version.l0 for s in sub.ssts]
    if l0_ssts and (len(version.l0) >= config.l0_trigger or sizes[0] >= config.l0_bytes_trigger):
        if not any(s.sst_id in busy for s in l0_ssts):
            below = _base_below(version.levels[base - 1].ssts, l0_ssts)
            if not any(s.sst_id in busy for s in below):
                runs = []
                for sub in version.l0:
                    if sub.overlapping:
                        runs.extend((s,) for s in sub.ssts)
                    else:
                        runs.append(tuple(sub.ssts))
                if below:
                    runs.append(tuple(below))
                return CompactionTask("compact", 0, base, tuple(runs), _nothing_below(version, base),
                                      f"L0 has {len(version.l0)} sub-levels, {sizes[0]} bytes")
    task = _pick_intra_l0(version, config, busy)
    if task is not None:
        return task
    scores = [(sizes[level] / targets[level], level) for level in range(base, n)
              if sizes[level] > targets[level]]
    for _, level in sorted(scores, reverse=True):
        task = _pick_level(version, level, busy, cursor, f"L{level} holds {sizes[level]} bytes, target {targets[level]}")
        if task is not None:
            return task
    return None


def _pick_intra_l0(version, config: PickerConfig, busy) -> CompactionTask | None:
    subs = version.l0
    if len(subs) < config.l0_intra_trigger:
        return None
    if len(subs) < 2 * config.l0_trigger and not _l0_meets_base(version, config):
        return None   # rule 2's exception (module doc): L0 -> base will rewrite each byte once
    sizes = [max(1, sum(s.file_size for s in sub.ssts)) for sub in subs]
    free = [not any(s.sst_id in busy for s in sub.ssts) for sub in subs]
    for first in range(len(subs)):   # newest first
        end, total = first, 0
        while (end < len(subs) and free[end] and sizes[end] <= sizes[first] * config.l0_intra_size_ratio
               and total + sizes[end] <= config.l0_bytes_trigger):
            total += sizes[end]
            end += 1
        if end - first >= config.l0_intra_trigger:
            runs = []
            for sub in subs[first:end]:
                if sub.overlapping:
                    runs.extend((s,) for s in sub.ssts)
                else:
                    runs.append(tuple(sub.ssts))
            return CompactionTask("compact", 0, 0, tuple(runs), False,
                                  f"intra-L0: {end - first} of {len(subs)} sub-levels, {total} bytes")
    return None


def _l0_meets_base(version, config: PickerConfig) -> bool:
    """Whether an L0 -> base task would take any base-level SST (:func:`_base_below`)."""
    l0_ssts = [s for sub in version.l0 for s in sub.ssts]
    if not l0_ssts:
        return False
    base, _ = level_targets(version, config)
    return bool(_base_below(version.levels[base - 1].ssts, l0_ssts))


def _base_below(base_ssts, l0_ssts) -> list:
    """The base-level SSTs an L0 -> base task must take with all of ``l0_ssts``: per table,
    those meeting the span of that table's keys in L0.

    Why per table: outputs are cut between table ids (the compaction core), so an output of
    table t holds only t's keys and spans at most the L0 SSTs holding t plus the base SSTs
    taken for t; a base SST of table t outside that span can stay. (A table keyed by row id
    next to its MV -- one flush SST holding both -- would otherwise drag the MV's whole base
    level into each task, and always count as meeting the base.) A table's span in an L0 SST
    holding several tables is the SST's range clamped to the table's key prefix. When a base
    SST meeting the whole L0 span holds several tables, or an L0 SST names none, this falls
    back to every base SST meeting the whole L0 span (the output of one table could then
    reach past a base SST left out)."""
    low = min(_range(s)[0] for s in l0_ssts)
    high = max(_range(s)[1] for s in l0_ssts)
    whole = _overlapping(base_ssts, low, high)
    if not whole or any(len(s.table_ids) != 1 for s in whole) or any(not s.table_ids for s in l0_ssts):
        return whole
    spans: dict = {}
    for sst in l0_ssts:
        sst_low, sst_high = _range(sst)
        for table_id in sst.table_ids:
            table_low, table_high = _table_bounds(table_id)
            span = (max(sst_low, table_low), sst_high if table_high is None else min(sst_high, table_high))
            known = spans.get(table_id)
            spans[table_id] = span if known is None else (min(known[0], span[0]), max(known[1], span[1]))
    return [s for s in whole if s.table_ids[0] in spans and _overlapping((s,), *spans[s.table_ids[0]])]


def _table_bounds(table_id: int) -> tuple:
    """Inclusive user-key bounds of ``table_id``'s keys: its prefix, and the next table's prefix
    (no key of this table reaches it; meeting it exactly only takes one SST more), or None for
    the last table id (no bound above)."""
    return table_id.to_bytes(4, "big"), (table_id + 1).to_bytes(4, "big") if table_id < 0xFFFFFFFF else None


def _pick_level(version, level: int, busy, cursor, reason: str) -> CompactionTask | None:
    ssts = sorted(version.levels[level - 1].ssts, key=lambda s: _range(s)[0])
    after = (cursor or {}).get(level)
    ordered = [s for s in ssts if after is None or _range(s)[0] > after] + \
        [s for s in ssts if after is not None and _range(s)[0] <= after]
    for sst in ordered:
        task = _sst_task(version, level, sst, busy, reason)
        if task is not None:
            if cursor is not None:
                cursor[level] = _range(sst)[0]
            return task
    return None


def _sst_task(version, level: int, sst, busy, reason: str) -> CompactionTask | None:
    """``sst`` of L_level plus the SSTs of L_level+1 it overlaps (a trivial move with none)."""
    if sst.sst_id in busy:
        return None
    below = _overlapping(version.levels[level].ssts, *_range(sst))
    if any(s.sst_id in busy for s in below):
        return None
    bottom = _nothing_below(version, level + 1)
    if not below:
        return CompactionTask("move", level, level + 1, ((sst,),), bottom, reason + " (trivial move)")
    return CompactionTask("compact", level, level + 1, ((sst,), tuple(sorted(below, key=lambda s: _range(s)[0]))),
                          bottom, reason)


_EAGER = PickerConfig(l0_trigger=1, l0_bytes_trigger=1, base_level_bytes=1 << 62, l0_intra_trigger=1 << 30)


def pick_range(version, low: bytes, high: bytes | None, busy: frozenset = frozenset()) -> CompactionTask | None:
    """A task of a manual range compaction: move every SST holding user keys in ``[low, high)``
    (full user keys, table id included; ``high`` None: unbounded) down to the last level.
    L0 goes down whole once any of its SSTs meets the range -- moving only part of it could put
    a newer version below an older one left in L0, which reads would then see first."""
    n = len(version.levels)
    if n == 0:
        return None

    def meets(s) -> bool:
        lo, hi = _range(s)
        return hi >= low and (high is None or lo < high)
    if any(meets(s) for sub in version.l0 for s in sub.ssts):
        return pick(version, _EAGER, busy)
    for level in range(1, n):
        for sst in sorted((s for s in version.levels[level - 1].ssts if meets(s)), key=lambda s: _range(s)[0]):
            task = _sst_task(version, level, sst, busy, f"manual range compaction: L{level} -> L{level + 1}")
            if task is not None:
                return task
    return None


def pick_bottom_rewrite(version, low: bytes, high: bytes | None, busy: frozenset = frozenset()
                        ) -> CompactionTask | None:
    """The last level's SSTs in ``[low, high)`` that hold tombstones, rewritten in place (the
    end of a manual range compaction: drops the tombstones and the versions nobody can read)."""
    n = len(version.levels)
    if n == 0:
        return None
    ssts = [s for s in version.levels[n - 1].ssts
            if s.tombstone_count and _range(s)[1] >= low and (high is None or _range(s)[0] < high)]
    if not ssts or any(s.sst_id in busy for s in ssts):
        return None
    return CompactionTask("compact", n, n, (tuple(sorted(ssts, key=lambda s: _range(s)[0])),), True,
                          "manual range compaction: rewrite the last level")


def pick_all(version, busy: frozenset = frozenset()) -> CompactionTask | None:
    """A task of a manual full compaction (``compact_all``): push every level above the last one
    down, L0 first, until everything lives in the last level."""
    n = len(version.levels)
    if n == 0:
        return None
    task = pick(version, _EAGER, busy)   # L0 -> base, where base is L_n with this config
    if task is not None:
        return task
    for level in range(1, n):
        if version.levels[level - 1].ssts:
            task = _pick_level(version, level, busy, None, f"compact_all: L{level} -> L{level + 1}")
            if task is not None:
                return task
    return None
