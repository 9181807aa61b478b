"""The compaction core against a model: reads at every epoch >= the watermark are unchanged."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from hummock.compaction.core import CompactionStats, compact
from hummock.iterators import SstRun
from hummock.key import MAX_EPOCH, encode_full_key, full_key_sort_key
from hummock.object_store import MemoryObjectStore
from hummock.sstable.builder import SstableBuilderOptions, build_sstable
from hummock.sstable.reader import Sstable
from hummock.value import decode_value

OPTIONS = SstableBuilderOptions(block_size=256, restart_interval=4)
versions = st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from([b"", b"a", b"a\x00", b"b", b"c"]),
                              st.integers(1, 8), st.one_of(st.none(), st.binary(max_size=6))), min_size=1, max_size=40)


class _Reader:
    def __init__(self, sst):
        self.sst = sst


def read(entries, user_key, epoch):
    """The model: the newest version <= epoch, None for a tombstone or nothing."""
    visible = [(MAX_EPOCH - int.from_bytes(k[-8:], "big"), v) for k, v in entries
               if k[:-8] == user_key and MAX_EPOCH - int.from_bytes(k[-8:], "big") <= epoch]
    return max(visible)[1] if visible else None


def contents(store, infos):
    out = []
    for info in infos:
        out.extend((k, decode_value(v)) for k, v in Sstable.open(store, info).scan())
    return out


@given(versions, st.integers(1, 3), st.integers(0, 9), st.booleans(), st.sampled_from([64, 100_000]), st.data())
def test_reads_at_or_above_the_watermark_are_unchanged(raw, n_runs, watermark, bottom, target, data):
    unique = {}
    for table, key, epoch, value in raw:
        unique[encode_full_key(table, key, epoch)] = value
    store = MemoryObjectStore()
    ids = itertools.count(100)
    buckets = [[] for _ in range(n_runs)]
    for full_key, value in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append((full_key, value))
    runs = []
    for bucket in buckets:
        if bucket:
            blob, info = build_sstable(sorted(bucket, key=lambda kv: full_key_sort_key(kv[0])), next(ids), OPTIONS)
            store.upload(info.object_path, blob)
            runs.append(SstRun([_Reader(Sstable.open(store, info))], None, None))
    stats = CompactionStats()
    infos = compact(runs, watermark, bottom, store, OPTIONS, target, lambda: next(ids), stats)
    inputs = list(unique.items())
    outputs = contents(store, infos)
    # older data below the compacted level (none at the bottom): a dropped tombstone would unhide it
    lower = [] if bottom else [(encode_full_key(t, k, 0), b"old") for t, k in
                               data.draw(st.lists(st.tuples(st.sampled_from([1, 2]), st.sampled_from([b"", b"a", b"b"])),
                                                  unique=True))]
    before, after = inputs + lower, outputs + lower
    keys = [k for k, _ in outputs]
    assert keys == sorted(keys, key=full_key_sort_key) and len(set(keys)) == len(keys)
    for info in infos:
        assert len(info.table_ids) == 1, "outputs are split at table-id boundaries"
    for a, b in zip(infos, infos[1:]):
        assert a.largest_key[:-8] < b.smallest_key[:-8], "outputs do not overlap and never split a user key"
    for user_key in {k[:-8] for k, _ in before}:
        for epoch in range(watermark, 10):
            assert read(after, user_key, epoch) == read(before, user_key, epoch), (user_key, epoch)
    assert stats.input_entries == len(inputs) and stats.output_entries == len(outputs)
    if bottom:
        assert not any(v is None and MAX_EPOCH - int.from_bytes(k[-8:], "big") <= watermark for k, v in outputs)
    for user_key in {k[:-8] for k in unique}:
        below = [k for k in keys if k[:-8] == user_key and MAX_EPOCH - int.from_bytes(k[-8:], "big") <= watermark]
        assert len(below) <= 1, "at most one version at or below the watermark survives"


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
