"""Tests of versions and deltas (``hummock/version.py``) and their codec
(``hummock/version_codec.py``, ``docs/format.md`` section 6).

- A hypothesis test drives random commit / compaction / move / reserve sequences (and rejected
  ones: stale deltas, unreserved ids, overlapping outputs, non-increasing epochs) against a
  model (level -> set of SST ids), checking ``_check()`` and a serialization round trip after
  every step.
- Golden bytes pin the frozen envelope and JSON layout of a small version and delta.
- Conflict detection, rebase, the invariant checker, and corruption of encoded bytes.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import encode_full_key
from hummock.sstable.block import checksum
from hummock.sstable.meta import SstableInfo
from hummock.version import HummockVersion, Level, SubLevel, VersionConflictError, VersionDelta, apply
from hummock.version_codec import (
    DELTA_MAGIC, ENVELOPE, VERSION_MAGIC, _seal, decode_delta, decode_version, encode_delta, encode_version,
)

EPOCH = 1 << 16


def sst(sst_id: int, lo: int, hi: int, epoch: int = EPOCH, size: int = 1000) -> SstableInfo:
    """An SST over user keys ``lo..hi`` (ints rendered as 3 digits) of table 1."""
    return SstableInfo(sst_id, encode_full_key(1, b"%03d" % lo, epoch), encode_full_key(1, b"%03d" % hi, epoch),
                       size, size - 100, epoch, epoch, hi - lo + 1, 0, (1,))


def reserved(n: int = 100, levels: int = 6) -> HummockVersion:
    version = HummockVersion.empty(levels)
    return apply(version, VersionDelta.reserve_sst_ids(version, n))


def level_sets(version: HummockVersion) -> dict[int, set[int]]:
    out = {0: {i.sst_id for sub in version.l0 for i in sub.ssts}}
    out.update((lv.level, {i.sst_id for i in lv.ssts}) for lv in version.levels)
    return out


# --- a model test -----------------------------------------------------------------------------

class Model:
    """level -> set of ids, plus each id's key range, the free reserved ids and the epoch."""

    def __init__(self, levels: int):
        self.levels = {n: set() for n in range(levels + 1)}
        self.ranges: dict[int, tuple[int, int]] = {}
        self.next_id, self.used, self.epoch, self.sub_levels = 1, 0, 0, 0

    def free(self, n: int) -> list[int] | None:
        """n unused reserved ids, or None if fewer remain."""
        first = max(self.used, 0) + 1
        ids = list(range(first, first + n))
        return ids if first + n <= self.next_id else None

    def where(self, sst_id: int) -> int:
        return next(level for level, ids in self.levels.items() if sst_id in ids)

    def overlapping(self, level: int, lo: int, hi: int, exclude=()) -> set[int]:
        return {i for i in self.levels[level] - set(exclude)
                if not (self.ranges[i][1] < lo or hi < self.ranges[i][0])}


def disjoint_ranges(draw, count: int) -> list[tuple[int, int]]:
    cuts = sorted(draw(st.lists(st.integers(0, 99), min_size=2 * count, max_size=2 * count, unique=True)))
    return [(cuts[2 * i], cuts[2 * i + 1]) for i in range(count)]


def step(draw, version: HummockVersion, model: Model, history: list) -> HummockVersion:
    op = draw(st.sampled_from(["reserve", "commit", "commit", "compact", "compact", "intra_l0", "move", "stale",
                               "bad_epoch"]))
    if op == "reserve":
        n = draw(st.integers(1, 6))
        delta = VersionDelta.reserve_sst_ids(version, n)
        model.next_id += n
    elif op in ("commit", "bad_epoch"):
        count = draw(st.integers(0, 3))
        overlapping = draw(st.booleans())
        ids = model.free(count)
        if ids is None:  # using ids nobody reserved is refused
            with pytest.raises(InvalidArgumentError, match="not reserved"):
                VersionDelta.commit(version, model.epoch + EPOCH, [sst(model.next_id, 0, 1)])
            return version
        if overlapping:
            ranges = [tuple(sorted(draw(st.lists(st.integers(0, 99), min_size=2, max_size=2)))) for _ in ids]
        else:
            ranges = disjoint_ranges(draw, count)
        infos = [sst(i, lo, hi) for i, (lo, hi) in zip(ids, ranges)]
        if op == "bad_epoch":
            with pytest.raises(InvalidArgumentError, match="strictly increase"):
                VersionDelta.commit(version, model.epoch - draw(st.integers(0, min(model.epoch, 3))), infos)
            return version
        model.epoch += draw(st.integers(1, 3)) * EPOCH
        delta = VersionDelta.commit(version, model.epoch, infos, overlapping=overlapping)
        model.used += count
        model.ranges.update((i, r) for i, r in zip(ids, ranges))
        model.levels[0].update(ids)
        model.sub_levels += bool(ids)
    elif op == "compact":
        everything = sorted(i for ids in model.levels.values() for i in ids)
        if not everything:
            return version
        inputs = set(draw(st.lists(st.sampled_from(everything), min_size=1, max_size=4, unique=True)))
        target = draw(st.integers(1, len(model.levels) - 1))
        while True:  # pull in every SST of the target level that the output range touches
            lo = min(model.ranges[i][0] for i in inputs)
            hi = max(model.ranges[i][1] for i in inputs)
            more = model.overlapping(target, lo, hi, exclude=inputs)
            if not more:
                break
            inputs |= more
        pieces = draw(st.integers(1, 3))
        ids = model.free(pieces)
        if ids is None:
            return version
        bounds = sorted(set([lo, hi + 1] + draw(st.lists(st.integers(lo, hi + 1), max_size=pieces - 1))))
        ids = ids[:len(bounds) - 1]
        outputs = [sst(i, a, b - 1) for i, a, b in zip(ids, bounds, bounds[1:])]
        delta = VersionDelta.compaction(version, inputs, {target: outputs})
        for i in inputs:
            model.levels[model.where(i)].discard(i)
        model.used += len(ids)
        model.ranges.update((o.sst_id, (a, b - 1)) for o, a, b in zip(outputs, bounds, bounds[1:]))
        model.levels[target].update(ids)
    elif op == "intra_l0":   # merge whole consecutive sub-levels into one, in their place
        if not version.l0:
            return version
        first = draw(st.integers(0, len(version.l0) - 1))
        last = draw(st.integers(first, len(version.l0) - 1))
        merged = version.l0[first:last + 1]
        inputs = {i.sst_id for sub in merged for i in sub.ssts}
        lo = min(model.ranges[i][0] for i in inputs)
        hi = max(model.ranges[i][1] for i in inputs)
        ids = model.free(draw(st.integers(1, 2)))
        if ids is None:
            return version
        cut = draw(st.integers(lo, hi + 1)) if len(ids) == 2 else hi + 1
        pieces = [(a, b) for a, b in ((lo, cut - 1), (cut, hi)) if a <= b][:len(ids)]
        outputs = [sst(i, a, b) for i, (a, b) in zip(ids, pieces)]
        delta = VersionDelta.compaction(version, inputs, {0: outputs})
        new = apply(version, delta)
        assert len(new.l0) == len(version.l0) - (last - first)
        assert new.l0[first].sub_level_id == merged[0].sub_level_id and not new.l0[first].overlapping
        assert {i.sst_id for i in new.l0[first].ssts} == {o.sst_id for o in outputs}
        model.levels[0] -= inputs
        model.levels[0].update(o.sst_id for o in outputs)
        model.used += len(outputs)
        model.ranges.update((o.sst_id, r) for o, r in zip(outputs, pieces))
        model.sub_levels -= last - first
    elif op == "move":
        everything = sorted(i for ids in model.levels.values() for i in ids)
        if not everything:
            return version
        moved = draw(st.lists(st.sampled_from(everything), min_size=1, max_size=3, unique=True))
        target = draw(st.integers(1, len(model.levels) - 1))
        spans = sorted(model.ranges[i] for i in moved)
        if any(a[1] >= b[0] for a, b in zip(spans, spans[1:])):
            with pytest.raises(InvalidArgumentError):
                VersionDelta.move(version, moved, target)
            return version
        if any(model.overlapping(target, lo, hi, exclude=moved) for lo, hi in spans):
            with pytest.raises(VersionConflictError):
                VersionDelta.move(version, moved, target)
            return version
        delta = VersionDelta.move(version, moved, target)
        for i in moved:
            model.levels[model.where(i)].discard(i)
        model.levels[target].update(moved)
    else:  # a delta built on an older version no longer applies
        if not history:
            return version
        old_version, old_delta = draw(st.sampled_from(history))
        with pytest.raises(VersionConflictError):
            apply(version, old_delta)
        return version
    new = apply(version, delta)
    assert decode_delta(encode_delta(delta)) == delta
    history.append((version, delta))
    return new


@settings(max_examples=150)
@given(data=st.data(), levels=st.integers(1, 4))
def test_random_deltas_against_model(data, levels):
    version, model, history = HummockVersion.empty(levels), Model(levels), []
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        version = step(data.draw, version, model, history)
        version._check()
        assert level_sets(version) == model.levels
        assert version.max_committed_epoch == model.epoch and version.next_sst_id == model.next_id
        assert version.id == len(history)
        assert decode_version(encode_version(version)) == version
        assert version.sst_ids() == set(model.ranges) & set().union(*model.levels.values())


# --- golden bytes -----------------------------------------------------------------------------

GOLDEN_VERSION = (
    "48554d4b564552310100000082020000551fcae27eeeb3477b226964223a342c226c30223a5b7b226f7665726c61"
    "7070696e67223a747275652c2273737473223a5b7b2266696c655f73697a65223a313030302c226b65795f636f75"
    "6e74223a31302c226c6172676573745f6b6579223a22303030303030303133303330333966666666666666666666"
    "666566666666222c226d61785f65706f6368223a36353533362c226d6574615f6f6666736574223a3930302c226d"
    "696e5f65706f6368223a36353533362c22736d616c6c6573745f6b6579223a223030303030303031333033303330"
    "66666666666666666666666566666666222c227373745f6964223a322c227461626c655f696473223a5b315d2c22"
    "746f6d6273746f6e655f636f756e74223a307d5d2c227375625f6c6576656c5f6964223a327d5d2c226c6576656c"
    "73223a5b7b226c6576656c223a312c2273737473223a5b7b2266696c655f73697a65223a313030302c226b65795f"
    "636f756e74223a362c226c6172676573745f6b6579223a2230303030303030313330333933396666666666666666"
    "6666666566666666222c226d61785f65706f6368223a36353533362c226d6574615f6f6666736574223a3930302c"
    "226d696e5f65706f6368223a36353533362c22736d616c6c6573745f6b6579223a22303030303030303133303339"
    "333466666666666666666666666566666666222c227373745f6964223a312c227461626c655f696473223a5b315d"
    "2c22746f6d6273746f6e655f636f756e74223a307d5d7d2c7b226c6576656c223a322c2273737473223a5b5d7d5d"
    "2c226d61785f636f6d6d69747465645f65706f6368223a3133313037322c226e6578745f7373745f6964223a342c"
    "226e6578745f7375625f6c6576656c5f6964223a337d")
GOLDEN_DELTA = (
    "48554d4b444c5431010000008e01000012177eb35a2014fe7b226164646564223a5b5d2c226964223a342c226b69"
    "6e64223a22636f6d6d6974222c226d61785f636f6d6d69747465645f65706f6368223a3133313037322c226e6577"
    "5f7375625f6c6576656c223a7b226f7665726c617070696e67223a747275652c2273737473223a5b7b2266696c65"
    "5f73697a65223a313030302c226b65795f636f756e74223a31302c226c6172676573745f6b6579223a2230303030"
    "3030303133303330333966666666666666666666666566666666222c226d61785f65706f6368223a36353533362c"
    "226d6574615f6f6666736574223a3930302c226d696e5f65706f6368223a36353533362c22736d616c6c6573745f"
    "6b6579223a22303030303030303133303330333066666666666666666666666566666666222c227373745f696422"
    "3a322c227461626c655f696473223a5b315d2c22746f6d6273746f6e655f636f756e74223a307d5d2c227375625f"
    "6c6576656c5f6964223a327d2c226e6578745f7373745f6964223a342c22707265765f6964223a332c2272656d6f"
    "766564223a5b5d7d")


def golden_pair() -> tuple[HummockVersion, VersionDelta]:
    version = reserved(3, levels=2)                                       # version 1
    version = apply(version, VersionDelta.commit(version, EPOCH, [sst(1, 94, 99)]))
    version = apply(version, VersionDelta.move(version, [1], 1))          # version 2
    delta = VersionDelta.commit(version, 2 * EPOCH, [sst(2, 0, 9)])
    return apply(version, delta), delta


def test_golden_bytes():
    version, delta = golden_pair()
    assert encode_version(version).hex() == GOLDEN_VERSION
    assert encode_delta(delta).hex() == GOLDEN_DELTA
    assert decode_version(bytes.fromhex(GOLDEN_VERSION)) == version
    assert decode_delta(bytes.fromhex(GOLDEN_DELTA)) == delta
    assert bytes.fromhex(GOLDEN_VERSION)[:8] == VERSION_MAGIC == b"HUMKVER1"
    assert bytes.fromhex(GOLDEN_DELTA)[:8] == DELTA_MAGIC == b"HUMKDLT1"
    assert ENVELOPE.size == 24


# --- conflicts, rules, rebase -------------------------------------------------------------------

def test_conflicts_and_rebase():
    v = reserved(20)
    v = apply(v, VersionDelta.commit(v, EPOCH, [sst(1, 0, 10), sst(2, 5, 20)]))
    v = apply(v, VersionDelta.commit(v, 2 * EPOCH, [sst(3, 30, 40)], overlapping=False))
    compaction = VersionDelta.compaction(v, [1, 2], {1: [sst(4, 0, 20)]})
    later = apply(v, VersionDelta.commit(v, 3 * EPOCH, [sst(5, 50, 60)]))
    with pytest.raises(VersionConflictError, match="does not apply to version"):
        apply(later, compaction)
    rebased = compaction.rebase(later)
    assert (rebased.prev_id, rebased.id) == (later.id, later.id + 1)
    result = apply(later, rebased)
    result._check()
    assert level_sets(result)[1] == {4} and level_sets(result)[0] == {3, 5}
    moved = apply(later, VersionDelta.move(later, [1], 2))  # an input left L0: the rebase fails
    with pytest.raises(VersionConflictError, match="SST 1 is not in L0"):
        compaction.rebase(moved)
    with pytest.raises(InvalidArgumentError, match="rebased"):
        VersionDelta.commit(v, 9 * EPOCH, []).rebase(later)
    with pytest.raises(VersionConflictError, match="not in version"):
        VersionDelta.compaction(v, [99], {1: []})
    forged = dataclasses.replace(compaction, removed=((1, 1),))  # wrong level for SST 1
    with pytest.raises(VersionConflictError, match="not in L1"):
        apply(v, forged)


def test_epochs_must_increase_and_empty_commits_advance():
    v = reserved()
    v = apply(v, VersionDelta.commit(v, 5 * EPOCH, []))
    assert v.max_committed_epoch == 5 * EPOCH and v.l0 == ()
    for epoch in (5 * EPOCH, 4 * EPOCH, 0):
        with pytest.raises(InvalidArgumentError, match="strictly increase"):
            VersionDelta.commit(v, epoch, [sst(1, 0, 1)])
    for epoch in (-1, 2**64, 1.5, True):
        with pytest.raises(InvalidArgumentError):
            VersionDelta.commit(v, epoch, [])


@pytest.mark.parametrize("make,match", [
    (lambda v: VersionDelta.commit(v, 2 * EPOCH, [sst(1, 0, 1), sst(1, 2, 3)]), "twice"),
    (lambda v: VersionDelta.commit(v, 2 * EPOCH, [sst(200, 0, 1)]), "not reserved"),
    (lambda v: VersionDelta.commit(v, 2 * EPOCH, [sst(1, 0, 5), sst(2, 3, 9)], overlapping=False), "disjoint"),
    (lambda v: VersionDelta.commit(v, 2 * EPOCH, ["not an sst"]), "SstableInfo"),
    (lambda v: VersionDelta.commit(v, 2 * EPOCH, [sst(1, 5, 3)]), "smallest key > largest"),
    (lambda v: VersionDelta.compaction(v, [7], {1: [sst(1, 0, 5), sst(2, 3, 9)]}), "overlaps"),
    (lambda v: VersionDelta.compaction(v, [7], {9: [sst(1, 0, 5)]}), "levels are 1..6"),
    (lambda v: VersionDelta.compaction(v, [7], {1: [sst(8, 0, 5)]}), "already in version"),
    (lambda v: VersionDelta.compaction(v, [7], {1: [sst(7, 0, 5, size=1)]}), "different metadata"),
    (lambda v: VersionDelta.compaction(v, [], {1: [sst(1, 0, 5)]}), "at least one"),
    (lambda v: VersionDelta.reserve_sst_ids(v, 0), "count"),
    (lambda v: dataclasses.replace(VersionDelta.reserve_sst_ids(v, 1), id=v.id + 2), "prev_id"),
    (lambda v: dataclasses.replace(VersionDelta.reserve_sst_ids(v, 1), kind="drop"), "unknown kind"),
    (lambda v: dataclasses.replace(VersionDelta.reserve_sst_ids(v, 1), max_committed_epoch=9), "only a commit"),
    (lambda v: dataclasses.replace(VersionDelta.commit(v, 9 * EPOCH, []), next_sst_id=500), "next_sst_id"),
])
def test_malformed_deltas_are_rejected(make, match):
    v = reserved()
    v = apply(v, VersionDelta.commit(v, EPOCH, [sst(7, 0, 5), sst(8, 50, 60)]))
    with pytest.raises(InvalidArgumentError, match=match):
        apply(v, make(v))


def test_compaction_drops_emptied_sub_levels_and_keeps_partial_ones():
    v = reserved()
    v = apply(v, VersionDelta.commit(v, EPOCH, [sst(1, 0, 10), sst(2, 20, 30)]))
    v = apply(v, VersionDelta.commit(v, 2 * EPOCH, [sst(3, 0, 5)]))
    v = apply(v, VersionDelta.compaction(v, [3, 1], {1: [sst(4, 0, 10)]}))
    v._check()
    assert [(s.sub_level_id, [i.sst_id for i in s.ssts]) for s in v.l0] == [(1, [2])]
    assert v.level_sizes() == (1000, 1000, 0, 0, 0, 0, 0) and v.level_counts()[:2] == (1, 1)
    assert v.level_of(4) == 1 and v.level_of(3) is None and v.next_sub_level_id == 3
    assert [i.sst_id for i in v.all_ssts()] == [2, 4]


def test_intra_l0_merges_whole_consecutive_sub_levels_in_place():
    v = reserved()
    for n, epoch in enumerate((1, 2, 3, 4)):
        v = apply(v, VersionDelta.commit(v, epoch * EPOCH, [sst(2 * n + 1, 0, 10), sst(2 * n + 2, 5, 20)]))
    # sub-levels newest first: ids 4 (SSTs 7, 8), 3 (5, 6), 2 (3, 4), 1 (1, 2)
    merged = apply(v, VersionDelta.compaction(v, [3, 4, 5, 6], {0: [sst(20, 0, 9), sst(21, 10, 20)]}))
    merged._check()
    assert [(s.sub_level_id, s.overlapping, [i.sst_id for i in s.ssts]) for s in merged.l0] == [
        (4, True, [7, 8]), (3, False, [20, 21]), (1, True, [1, 2])]
    assert decode_delta(encode_delta(VersionDelta.compaction(v, [3, 4], {0: [sst(20, 0, 20)]}))).added[0][0] == 0
    with pytest.raises(VersionConflictError, match="not whole"):        # SST 6 of sub-level 3 left out
        VersionDelta.compaction(v, [3, 4, 5], {0: [sst(20, 0, 20)]})
    with pytest.raises(InvalidArgumentError, match="consecutive"):
        VersionDelta.compaction(v, [1, 2, 5, 6], {0: [sst(20, 0, 20)]})
    with pytest.raises(InvalidArgumentError, match="only L0"):
        VersionDelta.compaction(v, [1, 2], {0: [sst(20, 0, 20)], 1: [sst(21, 30, 40)]})
    with pytest.raises(InvalidArgumentError, match="overlap"):
        VersionDelta.compaction(v, [1, 2], {0: [sst(20, 0, 10), sst(21, 10, 20)]})
    with pytest.raises(VersionConflictError):   # inputs already compacted away
        VersionDelta.compaction(merged, [3, 4], {0: [sst(22, 0, 20)]})


def test_reserve_ids_are_never_reused():
    v = HummockVersion.empty()
    delta = VersionDelta.reserve_sst_ids(v, 5)
    assert delta.kind == "reserve_ids" and range(v.next_sst_id, delta.next_sst_id) == range(1, 6)
    v = apply(v, delta)
    v = apply(v, VersionDelta.commit(v, EPOCH, [sst(5, 0, 1)]))
    v = apply(v, VersionDelta.compaction(v, [5], {1: [sst(4, 0, 1)]}))
    assert v.next_sst_id == 6  # removal does not give ids back
    with pytest.raises(InvalidArgumentError, match="not reserved"):
        VersionDelta.commit(v, 2 * EPOCH, [sst(6, 0, 1)])


def test_check_finds_broken_invariants():
    a, b = sst(1, 0, 10), sst(2, 5, 20)
    good = HummockVersion(1, 0, (SubLevel(1, (a, b), True),), (Level(1, ()),), 3, 2)
    good._check()
    broken = [
        dataclasses.replace(good, levels=(Level(1, (a, b)),), l0=()),              # overlap in L1
        dataclasses.replace(good, levels=(Level(1, (sst(2, 50, 60), sst(3, 0, 5))),), l0=(), next_sst_id=4),
        dataclasses.replace(good, levels=(Level(1, (a,)),)),                          # duplicate id
        dataclasses.replace(good, next_sst_id=2),                                     # id >= next
        dataclasses.replace(good, l0=(SubLevel(1, (a, b), False),)),                 # disjoint sub-level
        dataclasses.replace(good, l0=(SubLevel(1, (a,), True), SubLevel(1, (b,), True))),
        dataclasses.replace(good, l0=(SubLevel(1, (), True),)),                       # empty sub-level
        dataclasses.replace(good, next_sub_level_id=1),
        dataclasses.replace(good, levels=(Level(2, ()),)),
    ]
    for version in broken:
        with pytest.raises(AssertionError, match="unsound"):
            version._check()
        with pytest.raises(CorruptionError, match="unsound"):
            decode_version(encode_version(version))


# --- corruption -------------------------------------------------------------------------------

def test_every_corrupted_byte_is_detected():
    version, delta = golden_pair()
    for data, decode in ((encode_version(version), decode_version),
                         (encode_delta(delta), decode_delta)):
        for pos in range(len(data)):
            bad = bytearray(data)
            bad[pos] ^= 0x5A
            with pytest.raises(CorruptionError) as info:
                decode(bytes(bad), object="manifest/x")
            assert info.value.object == "manifest/x"
        for cut in (0, 10, 23, 24, len(data) - 1):
            with pytest.raises(CorruptionError):
                decode(data[:cut])
        with pytest.raises(CorruptionError, match="length"):
            decode(data + b"\x00")


def test_corruption_details():
    version, delta = golden_pair()
    with pytest.raises(CorruptionError, match="magic") as info:
        decode_version(encode_delta(delta), object="manifest/checkpoint-1")
    assert (info.value.offset, info.value.expected, info.value.found) == (0, b"HUMKVER1", b"HUMKDLT1")
    data = bytearray(encode_version(version))
    data[8] = 2
    with pytest.raises(CorruptionError, match="format version") as info:
        decode_version(bytes(data))
    assert (info.value.offset, info.value.expected, info.value.found) == (8, 1, 2)
    data = bytearray(encode_version(version))
    data[-2] ^= 1
    with pytest.raises(CorruptionError, match="checksum") as info:
        decode_version(bytes(data))
    assert info.value.offset == 16


EMPTY = {"id": 1, "max_committed_epoch": 0, "l0": [], "levels": [], "next_sst_id": 1, "next_sub_level_id": 1}


@pytest.mark.parametrize("magic,payload", [
    (VERSION_MAGIC, {"id": 1}),
    (VERSION_MAGIC, [1, 2]),
    (VERSION_MAGIC, {**EMPTY, "id": -1}),
    (VERSION_MAGIC, {**EMPTY, "id": True}),
    (VERSION_MAGIC, {**EMPTY, "next_sst_id": 2**64}),
    (VERSION_MAGIC, {**EMPTY, "levels": [{"level": 1, "ssts": [{"sst_id": 1}]}]}),
    (DELTA_MAGIC, {"kind": "explode"}),
    (DELTA_MAGIC, {"kind": "commit", "prev_id": 0, "id": 1, "max_committed_epoch": 1, "next_sst_id": 1,
                   "removed": [[1]], "added": [], "new_sub_level": None}),
    (DELTA_MAGIC, {"kind": "commit", "prev_id": 0, "id": 1, "max_committed_epoch": 1, "next_sst_id": 1,
                   "removed": [], "added": []}),
])
def test_well_sealed_but_malformed_payloads(magic, payload):
    decode = decode_version if magic == VERSION_MAGIC else decode_delta
    with pytest.raises(CorruptionError, match="malformed|unsound"):
        decode(_seal(magic, payload))


def test_short_keys_in_a_payload_are_corruption():
    version, _ = golden_pair()
    text = encode_version(version)[ENVELOPE.size:].replace(b'"00000001303030', b'"', 1)
    with pytest.raises(CorruptionError, match="shorter than a full key"):
        decode_version(_seal(VERSION_MAGIC, json.loads(text)))
    with pytest.raises(CorruptionError, match="not JSON") as info:
        decode_version(ENVELOPE.pack(VERSION_MAGIC, 1, 3, checksum(b"{]x")) + b"{]x")
    assert info.value.offset == ENVELOPE.size + 1


def test_empty_version_and_repr():
    v = HummockVersion.empty(3)
    assert (v.id, v.max_committed_epoch, v.num_levels, v.next_sst_id, v.sst_ids()) == (0, 0, 3, 1, frozenset())
    assert "id=0" in repr(v) and "SstableInfo" not in repr(v)
    for bad in (0, 65, "6", True):
        with pytest.raises(InvalidArgumentError):
            HummockVersion.empty(bad)
