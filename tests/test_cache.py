"""The byte-bounded LRU cache (native and twin) against an OrderedDict model."""

from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

import twins
from hummock.sstable import _cache_py


def implementations():
    return twins.implementations(_cache_py, "_lru")


IMPLS = pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)

operations = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 12), st.integers(0, 40)),
    st.tuples(st.just("get"), st.integers(0, 12), st.just(0)),
    st.tuples(st.just("erase"), st.integers(0, 12), st.just(0)),
), max_size=80)


@IMPLS
@given(st.integers(0, 100), operations)
def test_lru_matches_model(impl, capacity, ops):
    cache = impl.LruCache(capacity)
    model = OrderedDict()  # key -> charge, least recently used first
    hits = misses = 0
    for op, key, charge in ops:
        if op == "put":
            model.pop(key, None)
            if charge <= capacity:
                model[key] = charge
                while sum(model.values()) > capacity:
                    model.popitem(last=False)
            cache.put(key, ("v", key), charge)
        elif op == "get":
            expected = ("v", key) if key in model else None
            if key in model:
                model.move_to_end(key)
                hits += 1
            else:
                misses += 1
            assert cache.get(key) == expected
        else:
            model.pop(key, None)
            cache.erase(key)
        cache._check()
        assert cache.keys_lru_order() == list(model)
        assert cache.used == sum(model.values()) and len(cache) == len(model)
    stats = cache.stats()
    assert (stats["hits"], stats["misses"]) == (hits, misses)


@IMPLS
def test_get_or_load_erase_if_clear(impl):
    cache = impl.LruCache(100, name="blocks")
    loads = []
    assert cache.get_or_load((1, 0), lambda: loads.append(1) or b"x" * 10) == b"x" * 10
    assert cache.get_or_load((1, 0), lambda: loads.append(1) or b"y") == b"x" * 10
    assert loads == [1]
    cache.put((2, 0), b"z", 5)
    assert cache.erase_if(lambda k: k[0] == 1) == 1 and cache.used == 5
    cache.put((3, 0), b"big", 101)  # larger than the capacity: not kept
    assert cache.get((3, 0)) is None
    cache.clear()
    assert len(cache) == 0 and cache.used == 0 and cache.stats()["name"] == "blocks"
    with pytest.raises(ValueError):
        impl.LruCache(-1)


def test_point_gets_count_one_block_cache_lookup_each(tmp_path):
    """Point gets read blocks through the store's block cache (the native read path looks hits
    up in C): one miss and one insert the first time a block is read, one hit per get after,
    a miss counted once; the same counts in both modes."""
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    store = HummockStorage.open(str(tmp_path / "store"), StorageOptions(block_size=1024, compactor="none"))
    try:
        epoch = new_epoch()
        keys = [b"k%05d" % i for i in range(400)]
        store.ingest_batch(1, [(k, b"v" * 20) for k in keys], epoch)
        store.checkpoint(epoch)
        store._block_cache.clear()    # the upload may have cached blocks

        def counts():
            s = store.stats()["block_cache"]
            return s["hits"], s["misses"], s["inserts"]

        before = counts()
        assert store.get(1, keys[0], epoch) == b"v" * 20
        hits, misses, inserts = (a - b for a, b in zip(counts(), before))
        assert (hits, misses, inserts) == (0, 1, 1)
        before = counts()
        assert store.multi_get(1, keys[:3], epoch) == [b"v" * 20] * 3   # the same first block
        assert tuple(a - b for a, b in zip(counts(), before)) == (3, 0, 0)
        store._block_cache._check()
    finally:
        store.close()


def test_short_scans_count_one_block_cache_lookup_per_block_opened(tmp_path):
    """A scan opens each block through the block cache (the native scan cursor looks hits up
    in C, then falls back to ``Sstable.block``, which counts the miss): a seek into a cold
    block is one miss and one insert, the same seek again one hit; the same counts and rows
    in both modes, from every seek position (the restart-index seek finds the entry the
    restart binary search finds)."""
    from hummock import HummockStorage, StorageOptions
    from hummock.key import new_epoch
    store = HummockStorage.open(str(tmp_path / "store"), StorageOptions(block_size=1024, compactor="none"))
    try:
        epoch = new_epoch()
        keys = [b"k%05d" % i for i in range(0, 800, 2)]
        store.ingest_batch(1, [(k, b"v" * 20) for k in keys], epoch)
        store.checkpoint(epoch)
        store._block_cache.clear()

        def counts():
            s = store.stats()["block_cache"]
            return s["hits"], s["misses"], s["inserts"]

        def seek(start):
            it = store.iter(1, epoch, start=start)
            return [k for k, _ in (next(it, (None, None)) for _ in range(3)) if k is not None]

        before = counts()
        assert seek(b"k00001") == [b"k00002", b"k00004", b"k00006"]
        assert tuple(a - b for a, b in zip(counts(), before)) == (0, 1, 1)
        before = counts()
        assert seek(b"k00001") == [b"k00002", b"k00004", b"k00006"]
        assert tuple(a - b for a, b in zip(counts(), before)) == (1, 0, 0)
        for i in range(0, 801, 7):   # between keys, on keys, past the end
            start = b"k%05d" % i
            expected = [k for k in keys if k >= start][:3]
            assert seek(start) == expected, start
        store._block_cache._check()
    finally:
        store.close()
