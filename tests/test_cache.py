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
