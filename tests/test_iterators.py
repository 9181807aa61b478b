"""The read path's UserScan (merge + version resolution), native and pure, against a model."""


import pytest
from hypothesis import given
from hypothesis import strategies as st

import twins
from hummock import _iterators_py
from hummock.errors import CorruptionError
from hummock.key import MAX_EPOCH, encode_full_key, full_key_sort_key
from hummock.value import encode_value


def implementations():
    return twins.implementations(_iterators_py, "_iterators")


IMPLS = pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)

versions = st.lists(st.tuples(st.sampled_from([b"", b"a", b"a\x00", b"ab", b"b"]), st.integers(0, 6),
                              st.one_of(st.none(), st.binary(max_size=4))), max_size=40)


def split(entries, cuts):
    batches, start = [], 0
    for cut in sorted(cuts):
        batches.append(entries[start:cut])
        start = cut
    batches.append(entries[start:])
    return batches


@IMPLS
@given(versions, st.integers(1, 4), st.integers(0, 7), st.booleans(), st.data())
def test_user_scan_matches_model(impl, raw, n_sources, read_epoch, reverse, data):
    unique = {}
    for key, epoch, value in raw:
        unique[(key, epoch)] = value
    buckets = [[] for _ in range(n_sources)]
    for (key, epoch), value in unique.items():
        buckets[data.draw(st.integers(0, n_sources - 1))].append((encode_full_key(3, key, epoch), value))
    sources = []
    for i, bucket in enumerate(buckets):
        bucket.sort(key=lambda e: full_key_sort_key(e[0]), reverse=reverse)
        tagged = i % 2 == 1
        if tagged:
            bucket = [(k, encode_value(v)) for k, v in bucket]
        cuts = data.draw(st.lists(st.integers(0, len(bucket)), max_size=3))
        sources.append((iter(split(bucket, cuts)), tagged))
    expected = []
    for key in sorted({k for k, _ in unique}, reverse=reverse):
        visible = [(e, v) for (k, e), v in unique.items() if k == key and e <= read_epoch]
        if visible and max(visible)[1] is not None:
            expected.append((key, max(visible)[1]))
    assert list(impl.UserScan(sources, read_epoch, reverse)) == expected


@IMPLS
def test_bad_tags_and_sources(impl):
    key = encode_full_key(1, b"k", 1)
    with pytest.raises(CorruptionError):
        list(impl.UserScan([(iter([[(key, b"\x07x")]]), True)], MAX_EPOCH))
    assert list(impl.UserScan([], 5)) == []
    assert list(impl.UserScan([(iter([[], [(key, b"v")], []]), False)], MAX_EPOCH)) == [(b"k", b"v")]


@IMPLS
def test_close_stops_the_scan(impl):
    batch = [(encode_full_key(1, b"%d" % i, 1), b"v") for i in range(5)]
    scan = impl.UserScan([(iter([batch]), False)], MAX_EPOCH, False, owner=object())
    assert next(scan) == (b"0", b"v")
    scan.close()
    assert list(scan) == []


class _Reader:
    def __init__(self, sst):
        self.sst = sst


@IMPLS
@given(versions, st.integers(1, 3), st.integers(0, 7), st.booleans(), st.data())
def test_sst_runs_match_model(impl, raw, n_ssts, read_epoch, reverse, data):
    from hummock.object_store import MemoryObjectStore
    from hummock.read_view import SstReader
    from hummock.sstable.builder import SstableBuilderOptions, build_sstable
    from hummock.sstable.cache import LruCache
    from hummock.sstable.reader import Sstable
    unique = {}
    for key, epoch, value in raw:
        unique[(key, epoch)] = value
    entries = sorted(((encode_full_key(3, k, e), v) for (k, e), v in unique.items()),
                     key=lambda kv: full_key_sort_key(kv[0]))
    if not entries:
        return
    # split into SSTs at user-key boundaries: a run's SSTs have disjoint user-key ranges
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(entries)), max_size=n_ssts - 1))))
    pieces, start = [], 0
    for cut in cuts + [len(entries)]:
        while 0 < cut < len(entries) and entries[cut][0][:-8] == entries[cut - 1][0][:-8]:
            cut += 1
        if cut > start:
            pieces.append(entries[start:cut])
            start = cut
    store = MemoryObjectStore()
    readers = []
    # the read path's own readers (SstReader: per-SST scan state, block cache read in C) or any
    # object exposing ``.sst``: the same results
    cache = LruCache(1 << 20) if data.draw(st.booleans()) else None
    for i, piece in enumerate(pieces):
        blob, info = build_sstable(piece, i, SstableBuilderOptions(block_size=256, restart_interval=2))
        store.upload(info.object_path, blob)
        if cache is not None:
            readers.append(SstReader(info, lambda info: Sstable.open(store, info, block_cache=cache)))
        else:
            readers.append(_Reader(Sstable.open(store, info)))
    lo = data.draw(st.sampled_from([None, b"a", b"ab"]))
    start_full = None if lo is None else encode_full_key(3, lo, MAX_EPOCH)
    scan = impl.UserScan([impl.SstRun(readers, start_full, None)], read_epoch, reverse)
    expected = []
    for key in sorted({k for k, _ in unique}, reverse=reverse):
        if lo is not None and key < lo:
            continue
        visible = [(e, v) for (k, e), v in unique.items() if k == key and e <= read_epoch]
        if visible and max(visible)[1] is not None:
            expected.append((key, max(visible)[1]))
    assert list(scan) == expected
