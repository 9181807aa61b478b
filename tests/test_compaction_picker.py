"""The leveled picker on hand-built versions: triggers, dynamic base level, trivial moves, busy
inputs, compact_all; every task it returns applies to the version as a valid delta."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from hummock.compaction.picker import CompactionTask, PickerConfig, level_targets, pending_bytes, pick, pick_all
from hummock.key import encode_full_key
from hummock.sstable.meta import SstableInfo
from hummock.version import HummockVersion, Level, SubLevel, VersionDelta, apply

MiB = 1 << 20
_ids = itertools.count(1)


def multi(ranges: dict, size: int = MiB) -> SstableInfo:
    """An SST holding, per table id, the keys ``ranges[table] = (lo, hi)``."""
    tables = sorted(ranges)
    return SstableInfo(next(_ids), encode_full_key(tables[0], b"%06d" % ranges[tables[0]][0], 9),
                       encode_full_key(tables[-1], b"%06d" % ranges[tables[-1]][1], 1),
                       size, size - 100, 1, 9, 10, 0, tuple(tables))


def sst(lo: int, hi: int, size: int = MiB, table: int = 1) -> SstableInfo:
    return multi({table: (lo, hi)}, size)


def version(l0=(), levels=None, n=6) -> HummockVersion:
    levels = levels or {}
    subs = tuple(SubLevel(100 - i, tuple(ssts), overlapping) for i, (ssts, overlapping) in enumerate(l0))
    lv = tuple(Level(i, tuple(sorted(levels.get(i, ()), key=lambda s: s.smallest_key))) for i in range(1, n + 1))
    v = HummockVersion(7, 5, subs, lv, next(_ids) + 1000, 200)
    v._check()
    return v


def check_applies(v: HummockVersion, task: CompactionTask):
    """A task's delta must apply: a move as is, a compaction with stand-in outputs."""
    if task.kind == "move":
        apply(v, VersionDelta.move(v, task.input_ids, task.target_level))
    else:
        ids = itertools.count(v.next_sst_id - 1000)
        inputs = [s for run in task.runs for s in run]
        out = SstableInfo(next(ids), min(s.smallest_key for s in inputs), max(s.largest_key for s in inputs),
                          MiB, MiB - 100, 1, 9, 1, 0, (1,))
        apply(v, VersionDelta.compaction(v, task.input_ids, {task.target_level: [out]}))


def test_nothing_to_do_below_the_triggers():
    assert pick(version(l0=[([sst(0, 10)], False)] * 1)) is None
    assert pick(version()) is None


def test_l0_goes_to_the_last_level_of_a_small_tree():
    under = sst(5, 6)
    far = sst(50, 60)
    v = version(l0=[([sst(0, 10)], False), ([sst(3, 8), sst(9, 12)], True), ([sst(1, 2)], False),
                    ([sst(4, 4)], False)], levels={6: [under, far]})
    config = PickerConfig(l0_trigger=4)
    task = pick(v, config)
    assert task.kind == "compact" and task.input_level == 0 and task.target_level == 6
    assert under.sst_id in task.input_ids and far.sst_id not in task.input_ids
    assert task.bottom
    assert len(task.runs) == 6  # 3 non-overlapping sub-levels, 2 SSTs of an overlapping one, 1 base run
    check_applies(v, task)
    blocked = pick(v, config, busy=frozenset({under.sst_id}))
    assert blocked.target_level == 0 and under.sst_id not in blocked.input_ids, "base busy: merge inside L0"
    assert pick(v, PickerConfig(l0_trigger=4, l0_intra_trigger=9), busy=frozenset({under.sst_id})) is None, \
        "busy inputs are never picked twice"


def test_intra_l0_merges_a_window_of_similar_sub_levels():
    small = [([sst(i, i + 50, MiB)], False) for i in range(4)]
    v = version(l0=small + [([sst(0, 90, 8 * MiB), sst(91, 99, MiB)], True)], levels={6: [sst(0, 99, 100 * MiB)]})
    task = pick(v)
    assert task.kind == "compact" and task.input_level == task.target_level == 0 and not task.bottom
    assert task.input_ids == {s.sst_id for ssts, _ in small for s in ssts}, "the 9 MiB sub-level is another tier"
    check_applies(v, task)
    merged = apply(v, VersionDelta.compaction(v, task.input_ids, {0: [
        SstableInfo(v.next_sst_id - 1, small[0][0][0].smallest_key, small[-1][0][0].largest_key,
                    4 * MiB, 4 * MiB - 100, 1, 9, 40, 0, (1,))]}))
    assert [sub.sub_level_id for sub in merged.l0] == [100, 96] and not merged.l0[0].overlapping
    assert pick(merged) is None, "2 sub-levels: below both triggers"
    busy = frozenset({small[1][0][0].sst_id})
    assert pick(v, busy=busy) is None, "a busy sub-level breaks the window"
    assert pick(v, PickerConfig(l0_intra_trigger=5)) is None
    assert pick(v, PickerConfig(l0_intra_trigger=5, l0_intra_size_ratio=9)).input_level == 0
    assert pick(v, PickerConfig(l0_trigger=5)).target_level == 6, "L0 -> base comes first"


def test_no_intra_l0_while_l0_lies_beside_the_base_level():
    """Keys that only grow (a row-id table): L0 meets no base SST, so L0 -> base at its trigger
    rewrites each byte once and intra-L0 would only add rewrites -- until L0 has twice the
    trigger's sub-levels (an L0 -> base running long), when it merges again."""
    base = [sst(0, 99, 4 * MiB)]
    def appended(n):
        return [([sst(100 + 10 * i, 109 + 10 * i)], False) for i in reversed(range(n))]
    v = version(l0=appended(11), levels={6: base})
    assert pick(v) is None and pending_bytes(v) == 0
    task = pick(version(l0=appended(12), levels={6: base}))
    assert (task.input_level, task.target_level) == (0, 6) and base[0].sst_id not in task.input_ids
    busy = version(l0=appended(24), levels={6: base})
    held = frozenset(s.sst_id for sub in busy.l0[-12:] for s in sub.ssts)   # the oldest half in a task
    assert pick(busy, busy=held).target_level == 0, "at twice the trigger, intra-L0 runs again"
    overlapping = version(l0=appended(3) + [([sst(50, 60)], False)], levels={6: base})
    assert pick(overlapping).target_level == 0, "L0 meets the base level: intra-L0 as before"


def test_base_level_rises_as_the_tree_grows():
    config = PickerConfig(base_level_bytes=10 * MiB, multiplier=10)
    big = version(levels={6: [sst(i * 10, i * 10 + 9, 100 * MiB) for i in range(10)]})  # 1000 MiB in L6
    base, targets = level_targets(big, config)
    assert base == 4 and targets[4] == 10 * MiB and targets[5] == 100 * MiB
    small = version(levels={6: [sst(0, 9, 50 * MiB)]})
    assert level_targets(small, config)[0] == 6


def test_oversized_level_compacts_down_or_moves():
    config = PickerConfig(base_level_bytes=2 * MiB, multiplier=10)
    l5 = [sst(0, 9, 3 * MiB), sst(20, 29, 3 * MiB)]
    l6 = [sst(5, 15, 40 * MiB)]
    v = version(levels={5: l5, 6: l6})
    task = pick(v, config)
    assert task.input_level == 5 and task.target_level == 6 and task.kind == "compact"
    assert task.input_ids == {l5[0].sst_id, l6[0].sst_id} and task.bottom
    check_applies(v, task)
    task = pick(v, config, busy=frozenset({l6[0].sst_id}))
    assert task.kind == "move" and task.input_ids == {l5[1].sst_id}, "an SST overlapping nothing moves down"
    check_applies(v, task)


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 90), st.integers(1, 9), st.integers(1, 50)),
                max_size=25))
def test_compact_all_tasks_always_apply_and_reach_the_last_level(spec):
    l0, levels = [], {}
    taken = {i: [] for i in range(1, 7)}
    for level, lo, width, size in spec:
        s = sst(lo, lo + width, size * MiB)
        if level == 0:
            l0.append(([s], False))
        elif not any(not (s.largest_key < t.smallest_key or s.smallest_key > t.largest_key) for t in taken[level]):
            taken[level].append(s)
            levels.setdefault(level, []).append(s)
    v = version(l0=l0, levels=levels)
    for _ in range(100):
        task = pick_all(v)
        if task is None:
            break
        if task.kind == "move":
            v = apply(v, VersionDelta.move(v, task.input_ids, task.target_level))
        else:
            inputs = [s for run in task.runs for s in run]
            out = SstableInfo(v.next_sst_id - 1, min(s.smallest_key for s in inputs),
                              max(s.largest_key for s in inputs), MiB, MiB - 100, 1, 9, 1, 0, (1,))
            v = apply(v, VersionDelta.compaction(v, task.input_ids, {task.target_level: [out]}))
            v = HummockVersion(v.id, v.max_committed_epoch, v.l0, v.levels, v.next_sst_id + 1, v.next_sub_level_id)
        v._check()
    assert pick_all(v) is None
    assert not v.l0 and all(not level.ssts for level in v.levels[:-1])


def test_pending_bytes_counts_l0_past_a_trigger_and_levels_over_target():
    config = PickerConfig(base_level_bytes=2 * MiB, multiplier=10)
    assert pending_bytes(version(), config) == 0
    assert pending_bytes(version(l0=[([sst(0, 9)], False) for _ in range(3)]), config) == 0
    assert pending_bytes(version(l0=[([sst(0, 9)], False) for _ in range(4)], levels={6: [sst(5, 6)]}),
                         config) == 4 * MiB
    assert pending_bytes(version(l0=[([sst(0, 9)], False) for _ in range(4)]), config) == 0, \
        "nothing below: L0 -> base at its trigger rewrites each byte once"
    def tiers():
        return [([sst(0, 9, MiB)], False) for _ in range(3)] + [([sst(0, 9, 8 * MiB)], False)]
    assert pending_bytes(version(l0=tiers()), config) == 0, "4 sub-levels but no tier to merge: nothing to do"
    assert pending_bytes(version(l0=tiers() + tiers() + tiers()), PickerConfig(l0_trigger=12)) == 33 * MiB
    over = version(levels={5: [sst(0, 9, 3 * MiB), sst(20, 29, 3 * MiB)], 6: [sst(5, 15, 40 * MiB)]})
    assert pending_bytes(over, config) == 6 * MiB - level_targets(over, config)[1][5]


def test_pick_range_moves_only_the_range_and_takes_l0_whole():
    from hummock.compaction.picker import pick_bottom_rewrite, pick_range
    key = lambda k: encode_full_key(1, b"%06d" % k, 1)[:-8]   # noqa: E731
    inside, outside = sst(10, 19), sst(50, 59)
    bottom = [sst(0, 30), sst(40, 70)]
    v = version(levels={3: [inside, outside], 6: bottom})
    task = pick_range(v, key(15), key(16))
    assert (task.kind, task.input_level, task.target_level, task.input_ids) == ("move", 3, 4, {inside.sst_id})
    moved = v
    for level in (3, 4):                # moves down level by level while nothing lies below
        moved = apply(moved, VersionDelta.move(moved, task.input_ids, task.target_level))
        task = pick_range(moved, key(15), key(16))
    assert task.input_level == 5 and task.input_ids == {inside.sst_id, bottom[0].sst_id}, "then merges"
    check_applies(moved, task)
    assert pick_range(v, key(20), key(49)) is None, "nothing in [20, 49) above the last level"
    assert pick_range(moved, key(15), key(16), busy=frozenset({bottom[0].sst_id})) is None
    with_l0 = version(l0=[([sst(15, 16)], False), ([sst(80, 90)], True)], levels={6: bottom})
    assert pick_range(with_l0, key(15), key(16)).input_level == 0
    assert len([s for run in pick_range(with_l0, key(15), key(16)).runs for s in run]) == 4, \
        "all of L0 plus the bottom SSTs it overlaps"
    assert pick_bottom_rewrite(v, key(0), None) is None, "no tombstones in the last level"
    dead = SstableInfo(next(_ids), key(100) + bytes(8), key(110) + bytes(8), MiB, MiB - 100, 1, 9, 10, 3, (1,))
    v = version(levels={6: bottom + [dead]})
    task = pick_bottom_rewrite(v, key(0), None)
    assert task.input_ids == {dead.sst_id} and task.target_level == task.input_level == 6 and task.bottom
    check_applies(v, task)


def test_l0_to_base_takes_base_ssts_table_by_table():
    """A row-id table and its MV flushed into one SST a checkpoint (the APPEND ONLY table path):
    their new keys lie beside each table's older ones, so neither the L0 -> base task nor the
    intra-L0 rule's exception looks at the MV's base SSTs lying between the two tables' keys."""
    base = [sst(0, 49, 4 * MiB, table=1), sst(0, 49, 4 * MiB, table=2)]
    def appended(n, split):
        return [([sst(50 + 10 * i, 59 + 10 * i, table=1), sst(50 + 10 * i, 59 + 10 * i, table=2)] if split
                 else [multi({1: (50 + 10 * i, 59 + 10 * i), 2: (50 + 10 * i, 59 + 10 * i)})], False)
                for i in reversed(range(n))]
    task = pick(version(l0=appended(12, split=True), levels={6: base}))
    assert (task.input_level, task.target_level) == (0, 6) and not task.input_ids & {s.sst_id for s in base}
    assert pick(version(l0=appended(11, split=True), levels={6: base})) is None, "no intra-L0 beside the base"
    # one SST holding both tables: table 2's span in it starts at its prefix, so it meets table 2's base
    together = pick(version(l0=appended(12, split=False), levels={6: base}))
    assert together.input_ids & {s.sst_id for s in base} == {base[1].sst_id}
    assert pick(version(l0=appended(11, split=False), levels={6: base})).target_level == 0
    # a base SST holding two tables: every base SST meeting the whole L0 span, as before
    mixed = [sst(0, 49, table=1), multi({2: (0, 49), 3: (0, 9)})]
    task = pick(version(l0=appended(12, split=True), levels={6: mixed}))
    assert task.input_ids & {s.sst_id for s in mixed} == {mixed[1].sst_id}, "table 1's base lies below L0"
    assert pick(version(l0=appended(11, split=True), levels={6: mixed})).target_level == 0


@given(st.lists(st.dictionaries(st.integers(1, 3), st.tuples(st.integers(0, 90), st.integers(0, 9)),
                                min_size=1, max_size=3), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(1, 3), st.integers(0, 90), st.integers(0, 9)), max_size=10),
       st.booleans())
def test_l0_to_base_outputs_cut_per_table_always_fit_the_base_level(l0_spec, base_spec, with_mixed):
    """Whatever the L0 and base SSTs, the task's outputs -- one per table, spanning that table's
    keys of every input (the compaction core cuts between tables) -- never overlap a base SST
    left out; and the task takes no base SST the whole-L0-span rule would not."""
    model = {}   # sst_id -> {table: (lo, hi)}
    def make(ranges):
        info = multi(ranges)
        model[info.sst_id] = ranges
        return info
    l0 = [([make({t: (lo, lo + w) for t, (lo, w) in ranges.items()})], False) for ranges in l0_spec]
    base, used = [], []
    for t, lo, w in base_spec:
        key = (t, lo, lo + w)
        if all(u[0] != t or u[2] < lo or u[1] > lo + w for u in used):
            used.append(key)
            base.append(make({t: (lo, lo + w)}))
    if with_mixed and all(u[0] not in (1, 2) or (u[0] == 1 and u[2] < 95) or (u[0] == 2 and u[1] > 3) for u in used):
        base.append(make({1: (95, 99), 2: (0, 3)}))   # spans the end of table 1 and the start of table 2
    v = version(l0=l0, levels={6: base})
    task = pick(v, PickerConfig(l0_trigger=1))
    assert task is not None and (task.input_level, task.target_level) == (0, 6)
    l0_ssts = [s for sub in v.l0 for s in sub.ssts]
    low = min(s.smallest_key for s in l0_ssts)
    high = max(s.largest_key for s in l0_ssts)
    whole = {s.sst_id for s in base if not (s.largest_key[:-8] < low[:-8] or s.smallest_key[:-8] > high[:-8])}
    assert task.input_ids - {s.sst_id for s in l0_ssts} <= whole
    per_table = {}
    for sst_id in task.input_ids:
        for t, (lo, hi) in model[sst_id].items():
            known = per_table.get(t, (lo, hi))
            per_table[t] = (min(known[0], lo), max(known[1], hi))
    outputs = [SstableInfo(v.next_sst_id - 1000 + i, encode_full_key(t, b"%06d" % lo, 9),
                           encode_full_key(t, b"%06d" % hi, 1), MiB, MiB - 100, 1, 9, 1, 0, (t,))
               for i, (t, (lo, hi)) in enumerate(sorted(per_table.items()))]
    apply(v, VersionDelta.compaction(v, task.input_ids, {6: outputs}))   # raises if an output overlaps
