"""The compaction core against a model: reads at every epoch >= the watermark are unchanged.

Each property runs on both implementations of the per-entry loop (``native/_compact.pyx`` and
``hummock/compaction/_compact_py.py``); the native one must also write byte-identical SSTs.
"""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

import twins
from hummock.compaction import _compact_py
from hummock.compaction.core import CompactionStats, compact
from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.iterators import SstRun
from hummock.key import MAX_EPOCH, encode_full_key, full_key_sort_key
from hummock.object_store import MemoryObjectStore
from hummock.sstable.block import COMPRESSION_NONE, encode_stored_block
from hummock.sstable.builder import SstableBuilderOptions, SstableOutputs, build_sstable
from hummock.sstable.reader import Sstable
from hummock.value import decode_value

OPTIONS = SstableBuilderOptions(block_size=256, restart_interval=4)
RAW_OPTIONS = SstableBuilderOptions(block_size=256, restart_interval=4, compression="none")
KEYS = [b"", b"a", b"a\x00", b"b", b"c"]
versions = st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from(KEYS),
                              st.integers(1, 8), st.one_of(st.none(), st.binary(max_size=6))), min_size=1, max_size=40)
IMPLS = pytest.mark.parametrize("impl", twins.implementations(_compact_py, "_compact"), ids=lambda m: m.__name__)


class _Reader:
    def __init__(self, sst):
        self.sst = sst


def epoch_of(full_key):
    return MAX_EPOCH - int.from_bytes(full_key[-8:], "big")


def read(entries, user_key, epoch):
    """The model: the newest version <= epoch, None for a tombstone or nothing."""
    visible = [(epoch_of(k), v) for k, v in entries if k[:-8] == user_key and epoch_of(k) <= epoch]
    return max(visible)[1] if visible else None


def contents(store, infos):
    out = []
    for info in infos:
        out.extend((k, decode_value(v)) for k, v in Sstable.open(store, info).scan())
    return out


def run_core(impl, runs, watermark, bottom, store, options, target, ids, stats=None):
    """``compact`` with a chosen implementation of the per-entry loop."""
    stats = stats if stats is not None else CompactionStats()
    with SstableOutputs(store, options, lambda: next(ids)) as outputs:
        impl.compact_into(runs, watermark, bottom, outputs, target, stats)
    return outputs.infos


def make_runs(store, buckets, ids, options=OPTIONS, per_sst=None):
    """One SstRun per non-empty bucket of ``(full_key, value)``; ``per_sst`` entries per SST."""
    runs = []
    for bucket in buckets:
        entries = sorted(bucket, key=lambda kv: full_key_sort_key(kv[0]))
        if not entries:
            continue
        readers = []
        step = per_sst or len(entries)
        for i in range(0, len(entries), step):
            blob, info = build_sstable(entries[i:i + step], next(ids), options)
            store.upload(info.object_path, blob)
            readers.append(_Reader(Sstable.open(store, info)))
        runs.append(readers)
    return runs


def check_outputs(infos):
    for info in infos:
        assert len(info.table_ids) == 1, "outputs are split at table-id boundaries"
    for a, b in zip(infos, infos[1:]):
        assert a.largest_key[:-8] < b.smallest_key[:-8], "outputs do not overlap and never split a user key"


@IMPLS
@given(versions, st.integers(1, 3), st.integers(0, 9), st.booleans(), st.sampled_from([64, 100_000]), st.data())
def test_reads_at_or_above_the_watermark_are_unchanged(impl, raw, n_runs, watermark, bottom, target, data):
    unique = {}
    for table, key, epoch, value in raw:
        unique[encode_full_key(table, key, epoch)] = value
    store = MemoryObjectStore()
    ids = itertools.count(100)
    buckets = [[] for _ in range(n_runs)]
    for full_key, value in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append((full_key, value))
    runs = [SstRun(readers, None, None) for readers in make_runs(store, buckets, ids)]
    stats = CompactionStats()
    infos = run_core(impl, runs, watermark, bottom, store, OPTIONS, target, ids, stats)
    inputs = list(unique.items())
    outputs = contents(store, infos)
    # older data below the compacted level (none at the bottom): a dropped tombstone would unhide it
    lower = [] if bottom else [(encode_full_key(t, k, 0), b"old") for t, k in
                               data.draw(st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from([b"", b"a", b"b"])),
                                                  unique=True))]
    before, after = inputs + lower, outputs + lower
    keys = [k for k, _ in outputs]
    assert keys == sorted(keys, key=full_key_sort_key) and len(set(keys)) == len(keys)
    check_outputs(infos)
    for user_key in {k[:-8] for k, _ in before}:
        for epoch in range(watermark, 10):
            assert read(after, user_key, epoch) == read(before, user_key, epoch), (user_key, epoch)
    assert stats.input_entries == len(inputs) and stats.output_entries == len(outputs)
    assert stats.input_entries == stats.output_entries + stats.dropped_versions + stats.dropped_tombstones
    if bottom:
        assert not any(v is None and epoch_of(k) <= watermark for k, v in outputs)
    for user_key in {k[:-8] for k in unique}:
        below = [k for k in keys if k[:-8] == user_key and epoch_of(k) <= watermark]
        assert len(below) <= 1, "at most one version at or below the watermark survives"


WM_KEYS = [b"a", b"ab", b"ab\x00", b"abc", b"abd", b"ba", b"bac"]   # vnodes 0x6162 ("ab") and 0x6261 ("ba")
WM_BOUNDS = [b"", b"\x00", b"c", b"d"]


def hides_strategy():
    """``hide`` for compact_into: per table, a truncation (versions <= through) and/or ranges."""
    rng = st.tuples(st.sampled_from(WM_BOUNDS), st.sampled_from(WM_BOUNDS + [None])).filter(
        lambda r: r[1] is None or r[0] < r[1])
    record = st.tuples(st.one_of(st.none(), st.integers(0, 9)),
                       st.one_of(st.none(), st.dictionaries(st.sampled_from([0x6162, 0x6261]), rng, min_size=1)))
    return st.dictionaries(st.sampled_from([1, 2]), record.filter(lambda r: r != (None, None)), max_size=2)


def visible(entries, hide, user_key, epoch):
    """The model read with ``hide`` applied: versions <= through ignored, range keys absent."""
    through, ranges = hide.get(int.from_bytes(user_key[:4], "big"), (None, None))
    table_key = user_key[4:]
    if ranges and len(table_key) >= 2:
        r = ranges.get(table_key[0] << 8 | table_key[1])
        if r is not None and r[0] <= table_key[2:] and (r[1] is None or table_key[2:] < r[1]):
            return None
    return read([(k, v) for k, v in entries if through is None or epoch_of(k) > through], user_key, epoch)


@IMPLS
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from(WM_KEYS), st.integers(1, 8),
                          st.one_of(st.none(), st.binary(max_size=6))), min_size=1, max_size=40),
       st.integers(1, 3), st.integers(0, 9), st.booleans(), hides_strategy(), st.data())
def test_versions_table_watermarks_hide_are_dropped_and_the_rest_read_as_before(impl, raw, n_runs, watermark,
                                                                                 bottom, hide, data):
    unique = {encode_full_key(t, k, e): v for t, k, e, v in raw}
    store, ids = MemoryObjectStore(), itertools.count(100)
    buckets = [[] for _ in range(n_runs)]
    for full_key, value in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append((full_key, value))
    runs = [SstRun(readers, None, None) for readers in make_runs(store, buckets, ids)]
    stats = CompactionStats()
    with SstableOutputs(store, OPTIONS, lambda: next(ids)) as outputs:
        impl.compact_into(runs, watermark, bottom, outputs, 64, stats, hide)
    after, before = contents(store, outputs.infos), list(unique.items())
    check_outputs(outputs.infos)
    for user_key in {k[:-8] for k in unique}:
        for epoch in range(watermark, 10):
            assert visible(after, hide, user_key, epoch) == visible(before, hide, user_key, epoch)
    hidden = [k for k, _ in before if visible([(k, b"x")], hide, k[:-8], 9) is None]
    assert not {k for k, _ in after} & set(hidden), "every hidden version is gone"
    assert stats.dropped_hidden == len(hidden)
    assert stats.input_entries == stats.output_entries + stats.dropped_versions + stats.dropped_tombstones + \
        stats.dropped_hidden


def test_a_bad_hide_is_refused_by_both_implementations():
    for impl in twins.implementations(_compact_py, "_compact"):
        with SstableOutputs(MemoryObjectStore(), OPTIONS, lambda: 1) as outputs:
            with pytest.raises(InvalidArgumentError):
                impl.compact_into([], 0, True, outputs, 64, CompactionStats(), [(1, None)])


def test_compact_uses_the_loaded_implementation_and_matches_the_model():
    """The public entry point (whichever twin is loaded), on one fixed history."""
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(1, b"k%03d" % i, e), None if (i + e) % 7 == 0 else b"v%d" % e)
               for i in range(200) for e in (2, 4, 6)]
    runs = [SstRun(readers) for readers in make_runs(store, [entries[0::2], entries[1::2]], ids)]
    stats = CompactionStats()
    infos = compact(runs, 4, True, store, OPTIONS, 2048, lambda: next(ids), stats)
    after = contents(store, infos)
    for i in range(200):
        for epoch in (4, 5, 6, 7):
            user_key = encode_full_key(1, b"k%03d" % i, 0)[:-8]
            assert read(after, user_key, epoch) == read(entries, user_key, epoch)
    assert len(infos) > 1 and stats.input_entries == 600


# --- native vs pure: the same SSTs, byte for byte ----------------------------------------------

big_versions = st.lists(st.tuples(st.integers(1, 3), st.binary(min_size=0, max_size=3), st.integers(1, 12),
                                  st.one_of(st.none(), st.binary(max_size=40))), min_size=1, max_size=150)


@pytest.mark.skipif(len(twins.implementations(_compact_py, "_compact")) < 2,
                    reason="HUMMOCK_PURE_PYTHON=1: the native module is not loaded in this run")
@given(big_versions, st.integers(1, 4), st.integers(0, 13), st.booleans(), st.sampled_from([1, 300, 2000, 1 << 20]),
       st.sampled_from([OPTIONS, RAW_OPTIONS, SstableBuilderOptions(block_size=1024, restart_interval=1)]),
       st.data())
def test_native_and_pure_write_identical_ssts(raw, n_runs, watermark, bottom, target, options, data):
    """... also with table watermarks hiding versions (``hide``)."""
    pure, native = twins.implementations(_compact_py, "_compact")
    unique = {encode_full_key(t, k, e): v for t, k, e, v in raw}
    buckets = [[] for _ in range(n_runs)]
    for full_key, value in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append((full_key, value))
    # bounds: any full keys (a user key's first full key, or one of its versions)
    candidates = sorted(set(unique) | {k[:-8] + b"\x00" * 8 for k in unique}, key=full_key_sort_key)
    bounds = sorted(data.draw(st.lists(st.sampled_from(candidates), max_size=2, unique=True)), key=full_key_sort_key)
    start = bounds[0] if bounds else None
    end = bounds[1] if len(bounds) > 1 else None
    store = MemoryObjectStore()
    ids = itertools.count(1)
    readers = make_runs(store, buckets, ids, options, per_sst=data.draw(st.integers(1, 50)))
    results = []
    hide = data.draw(st.one_of(st.none(), st.dictionaries(st.integers(1, 3), st.tuples(
        st.one_of(st.none(), st.integers(0, 13)),
        st.one_of(st.none(), st.dictionaries(st.sampled_from(sorted({k[4] << 8 | k[5] for k in unique if len(k) >= 14}
                                                                   or {0})),
                                             st.tuples(st.binary(max_size=1), st.one_of(st.none(), st.binary(
                                                 min_size=1, max_size=2))).filter(
                                                 lambda r: r[1] is None or r[0] < r[1]), min_size=1))))))
    for impl in (pure, native):
        out_store, out_ids, stats = MemoryObjectStore(), itertools.count(1000), CompactionStats()
        with SstableOutputs(out_store, options, lambda: next(out_ids)) as outputs:
            impl.compact_into([SstRun(r, start, end) for r in readers], watermark, bottom, outputs, target, stats,
                              hide)
        infos = outputs.infos
        check_outputs(infos)
        results.append((infos, [out_store.read(info.object_path) for info in infos], stats))
    assert results[0] == results[1]


# --- key-range-bounded runs (what the Spark runner's partitions do) -------------------------------

@IMPLS
@given(big_versions, st.integers(1, 3), st.integers(0, 13), st.booleans(), st.data())
def test_key_range_partitions_together_equal_one_compaction(impl, raw, n_runs, watermark, bottom, data):
    unique = {encode_full_key(t, k, e): v for t, k, e, v in raw}
    buckets = [[] for _ in range(n_runs)]
    for full_key, value in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append((full_key, value))
    store = MemoryObjectStore()
    ids = itertools.count(1)
    readers = make_runs(store, buckets, ids, per_sst=data.draw(st.integers(1, 30)))
    user_keys = sorted({k[:-8] for k in unique})
    splits = sorted(data.draw(st.lists(st.sampled_from(user_keys), max_size=4, unique=True)))
    bounds = [None] + [u + b"\x00" * 8 for u in splits] + [None]   # the first full key of a user key
    whole = contents(store, run_core(impl, [SstRun(r) for r in readers], watermark, bottom, store, OPTIONS,
                                     1 << 20, ids))
    parts, total = [], CompactionStats()
    for lo, hi in zip(bounds, bounds[1:]):
        infos = run_core(impl, [SstRun(r, lo, hi) for r in readers], watermark, bottom, store, OPTIONS,
                         1 << 20, ids, total)
        part = contents(store, infos)
        assert all((lo is None or k >= lo[:-8]) and (hi is None or k[:-8] < hi[:-8]) for k, _ in part), \
            "a partition writes only keys of its range"
        parts.extend(part)
    assert parts == whole
    assert total.input_entries == len(unique)


@IMPLS
def test_bounds_inside_an_sst_and_between_runs(impl):
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(1, b"%03d" % i, 5), b"x") for i in range(100)]
    readers = make_runs(store, [entries], ids, per_sst=30)[0]
    lo, hi = encode_full_key(1, b"017", MAX_EPOCH), encode_full_key(1, b"071", MAX_EPOCH)
    infos = run_core(impl, [SstRun(readers, lo, hi)], 9, True, store, OPTIONS, 1 << 20, ids)
    assert [k for k, _ in contents(store, infos)] == [k for k, _ in entries[17:71]]
    assert run_core(impl, [SstRun(readers, hi, hi)], 9, True, store, OPTIONS, 1 << 20, ids) == []


@IMPLS
def test_runs_of_either_sstrun_class_are_accepted(impl):
    """A runner may hand the twin's SstRun to the native loop (it copies readers and bounds)."""
    from hummock import _iterators_py
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(1, b"%03d" % i, 5), b"x") for i in range(50)]
    readers = make_runs(store, [entries], ids, per_sst=20)[0]
    lo = encode_full_key(1, b"010", MAX_EPOCH)
    infos = run_core(impl, [_iterators_py.SstRun(readers, lo, None)], 9, True, store, OPTIONS, 1 << 20, ids)
    assert [k for k, _ in contents(store, infos)] == [k for k, _ in entries[10:]]


# --- output cuts ---------------------------------------------------------------------------------

@IMPLS
def test_outputs_are_cut_at_table_id_boundaries(impl):
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(t, b"k%d" % i, 3), b"v") for t in (1, 2, 7) for i in range(10)]
    runs = [SstRun(r) for r in make_runs(store, [entries[::2], entries[1::2]], ids)]
    infos = run_core(impl, runs, 9, False, store, OPTIONS, 1 << 30, ids)
    assert [list(info.table_ids) for info in infos] == [[1], [2], [7]]
    assert [info.key_count for info in infos] == [10, 10, 10]


@IMPLS
def test_outputs_are_cut_at_the_target_size_between_user_keys(impl):
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(1, b"key%05d" % i, e), b"v" * 30) for i in range(400) for e in (3, 4, 5)]
    runs = [SstRun(r) for r in make_runs(store, [entries], ids)]
    target = 2000
    infos = run_core(impl, runs, 0, False, store, RAW_OPTIONS, target, ids)   # watermark 0: keep all
    assert len(infos) > 10
    check_outputs(infos)
    for info in infos[:-1]:
        # cut once the SST reached the target, at the next user key: at most one key's versions over
        assert target <= info.meta_offset <= target + 3 * 60 + 13
    assert sum(info.key_count for info in infos) == len(entries)


# --- errors --------------------------------------------------------------------------------------

def sst_with_bad_tag(store, sst_id):
    """An SST whose checksums are right but one value tag is 0x07 (a writer bug, not bit rot)."""
    entries = [(encode_full_key(1, b"a", 2), b"fine"), (encode_full_key(1, b"b", 2), b"PAYLOAD")]
    blob, info = build_sstable(entries, sst_id, RAW_OPTIONS)
    table = Sstable.open(_Single(info.object_path, blob), info)
    content = table.block(0).content
    bad = content.replace(b"\x01PAYLOAD", b"\x07PAYLOAD")
    stored = encode_stored_block(bad, COMPRESSION_NONE)
    assert len(stored) == table.meta.blocks[0].stored_len
    store.upload(info.object_path, stored + blob[len(stored):])
    return info


class _Single(MemoryObjectStore):
    def __init__(self, path, blob):
        super().__init__()
        self.upload(path, blob)


@IMPLS
def test_a_bad_value_tag_raises_corruption(impl):
    store = MemoryObjectStore()
    info = sst_with_bad_tag(store, 1)
    run = SstRun([_Reader(Sstable.open(store, info))])
    with pytest.raises(CorruptionError, match="bad value tag"):
        run_core(impl, [run], 9, True, store, RAW_OPTIONS, 1 << 20, itertools.count(10))
    assert [o.path for o in store.list("sst/")] == [info.object_path], "the aborted output left nothing"


@IMPLS
@pytest.mark.parametrize("where", ["first block", "last block"])
def test_a_corrupt_input_block_raises_corruption(impl, where):
    store = MemoryObjectStore()
    ids = itertools.count(1)
    entries = [(encode_full_key(1, b"k%04d" % i, 3), b"v" * 20) for i in range(300)]
    other = [(encode_full_key(1, b"k%04d" % i, 4), b"w" * 20) for i in range(0, 300, 3)]
    blob, info = build_sstable(entries, next(ids), OPTIONS)
    meta = Sstable.open(_Single(info.object_path, blob), info).meta
    block = meta.blocks[0] if where == "first block" else meta.blocks[-1]
    flipped = bytearray(blob)
    flipped[block.offset + block.stored_len // 2] ^= 0x40
    store.upload(info.object_path, bytes(flipped))
    readers = make_runs(store, [other], ids)[0]
    runs = [SstRun([_Reader(Sstable.open(store, info))]), SstRun(readers)]
    with pytest.raises(CorruptionError):
        run_core(impl, runs, 9, True, store, OPTIONS, 1 << 30, ids)


@IMPLS
@pytest.mark.parametrize("watermark", [-1, 1 << 64, 1.5, None])
def test_a_bad_watermark_is_refused(impl, watermark):
    with pytest.raises(InvalidArgumentError):
        run_core(impl, [], watermark, True, MemoryObjectStore(), OPTIONS, 1 << 20, itertools.count(1))


@IMPLS
def test_no_runs_and_empty_ranges_write_nothing(impl):
    assert run_core(impl, [], 5, True, MemoryObjectStore(), OPTIONS, 1 << 20, itertools.count(1)) == []


def test_space_is_reclaimed():
    store = MemoryObjectStore()
    entries = [(encode_full_key(1, b"k%04d" % i, e), None if e == 9 else b"v" * 50)
               for i in range(300) for e in (9, 5, 3, 1)]
    entries.sort(key=lambda kv: full_key_sort_key(kv[0]))
    blob, info = build_sstable(entries, 1, OPTIONS)
    store.upload(info.object_path, blob)
    ids = itertools.count(2)
    run = SstRun([_Reader(Sstable.open(store, info))], None, None)
    infos = compact([run], 10, True, store, OPTIONS, 1 << 20, lambda: next(ids))
    assert infos == []  # every key's newest version is a tombstone at the bottom: nothing remains
    run = SstRun([_Reader(Sstable.open(store, info))], None, None)
    infos = compact([run], 6, True, store, OPTIONS, 1 << 20, lambda: next(ids))
    assert sum(i.file_size for i in infos) < info.file_size / 2
