"""``stream.cache``: executor caches under one memory budget, against an exact model.

The model keeps every live entry of every cache in one list, least recently used first; a
``put`` over the capacity drops from the front until usage is at most the low-water mark.
The caches must answer every ``get`` as the model does (a hit or an eviction), and
``_check`` must hold after every step.
"""

from __future__ import annotations

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from stream import _cache_py as pure_cache
from stream import cache as cache_module
from stream.cache import LOW_WATER, MemoryBudget, row_bytes
from twins import implementations

OVERHEAD = cache_module._ENTRY_OVERHEAD
CAPACITY = 4000


class CacheMachine(RuleBasedStateMachine):
    impl = None   # the StateCache class under test (the twin or the native module's)

    def __init__(self):
        super().__init__()
        self.budget = MemoryBudget(CAPACITY)
        self.caches = [self.impl(self.budget, f"c{i}") for i in range(3)]
        self.model: list = []          # [(cache index, key, value, charge)], least recent first

    def _find(self, c, key):
        for i, (mc, mk, _, _) in enumerate(self.model):
            if mc == c and mk == key:
                return i
        return None

    def _evict_model(self):
        used = sum(e[3] for e in self.model)
        if used <= CAPACITY:
            return
        target = int(CAPACITY * LOW_WATER)
        while used > target and self.model:
            used -= self.model.pop(0)[3]

    @rule(c=st.integers(0, 2), key=st.integers(0, 9), value=st.integers(), charge=st.integers(0, 1500))
    def put(self, c, key, value, charge):
        self.caches[c].put(key, value, charge)
        i = self._find(c, key)
        if i is not None:
            self.model.pop(i)
        self.model.append((c, key, value, charge + OVERHEAD))
        self._evict_model()

    @rule(c=st.integers(0, 2), key=st.integers(0, 9))
    def get(self, c, key):
        i = self._find(c, key)
        got = self.caches[c].get(key, "absent")
        if i is None:
            assert got == "absent"
        else:
            entry = self.model.pop(i)
            self.model.append(entry)
            assert got == entry[2]

    @rule(c=st.integers(0, 2), keys=st.lists(st.integers(0, 9), unique=True, max_size=6))
    def get_many(self, c, keys):
        found = {}
        missing = self.caches[c].get_many(keys, found)
        expected_found, expected_missing = {}, []
        for key in keys:
            i = self._find(c, key)
            if i is None:
                expected_missing.append(key)
            else:
                entry = self.model.pop(i)
                self.model.append(entry)
                expected_found[key] = entry[2]
        assert missing == expected_missing
        assert list(found.items()) == list(expected_found.items())

    @rule(c=st.integers(0, 2), items=st.lists(st.tuples(st.integers(0, 9), st.integers(), st.integers(0, 1500)),
                                               unique_by=lambda t: t[0], max_size=6))
    def put_many(self, c, items):
        self.caches[c].put_many(items)
        for key, value, charge in items:   # eviction once, after every item is in
            i = self._find(c, key)
            if i is not None:
                self.model.pop(i)
            self.model.append((c, key, value, charge + OVERHEAD))
        self._evict_model()

    @rule(c=st.integers(0, 2), key=st.integers(0, 9))
    def peek(self, c, key):
        i = self._find(c, key)
        assert self.caches[c].peek(key, "absent") == ("absent" if i is None else self.model[i][2])

    @rule(c=st.integers(0, 2), key=st.integers(0, 9))
    def pop(self, c, key):
        i = self._find(c, key)
        got = self.caches[c].pop(key, "absent")
        assert got == ("absent" if i is None else self.model.pop(i)[2])

    @rule(c=st.integers(0, 2))
    def clear(self, c):
        self.caches[c].clear()
        self.model = [e for e in self.model if e[0] != c]

    @invariant()
    def consistent(self):
        self.budget._check()
        assert self.budget.used == sum(e[3] for e in self.model)
        for c, cache in enumerate(self.caches):
            assert cache.keys() == [e[1] for e in self.model if e[0] == c]


@pytest.mark.parametrize("impl", implementations(pure_cache, "_state_cache"), ids=lambda m: m.__name__)
def test_caches_evict_the_globally_least_recently_used(impl):
    machine = type("Machine", (CacheMachine,), {"impl": impl.StateCache})
    run_state_machine_as_test(machine, settings=settings(max_examples=150, stateful_step_count=60, deadline=None))


def test_the_twins_count_and_order_alike():
    """The same calls on the native cache and the twin: same keys, counters and charges."""
    runs = []
    for impl in implementations(pure_cache, "_state_cache"):
        budget = MemoryBudget(3000)
        a, b = impl.StateCache(budget, "a"), impl.StateCache(budget, "b")
        a.put_many([(k, str(k), 10 * k) for k in range(8)])
        found = {}
        missing = a.get_many([3, 99, 1], found)
        b.put(("x",), 1, 400)
        a.put(5, "five", 0)
        a.pop(2)
        b.put_many([(("y", i), i, 300) for i in range(3)])
        runs.append((a.keys(), b.keys(), found, missing, a.stats(), b.stats(), budget.used, budget.evictions,
                     a.peek_many([1, 3, 4, 77]), a.charge_of(5)))
        budget._check()
    assert all(run == runs[0] for run in runs)


def test_a_cold_cache_is_evicted_before_a_hot_one():
    budget = MemoryBudget(6_000)       # 40 entries of 220 bytes do not fit
    cold, hot = budget.cache("cold"), budget.cache("hot")
    for k in range(20):
        cold.put(k, k, 100)
    for k in range(200):
        hot.put(k % 20, k, 100)     # 20 hot keys, touched again and again
    assert budget.used <= budget.capacity
    assert len(hot) == 20 and len(cold) < 20
    budget._check()


def test_an_entry_larger_than_the_budget_does_not_stay():
    budget = MemoryBudget(1000)
    cache = budget.cache("c")
    cache.put("small", 1, 10)
    cache.put("huge", 2, 5000)
    assert "huge" not in cache and "small" not in cache and budget.used == 0
    budget._check()


def test_close_leaves_the_budget_and_stats_count():
    budget = MemoryBudget(10_000)
    a, b = budget.cache("a"), budget.cache("b")
    a.put(1, "x", 50)
    b.put(1, "y", 50)
    assert a.get(1) == "x" and a.get(2) is None
    assert a.stats()["hits"] == 1 and a.stats()["misses"] == 1
    a.close()
    assert budget.used == b.used and set(budget.stats()["caches"]) == {"b"}
    budget._check()
    with pytest.raises(KeyError):
        b.pop(2)


def test_bad_capacity_is_refused():
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError):
            MemoryBudget(bad)


def test_row_bytes_grows_with_the_values():
    assert row_bytes((1, "a" * 100)) > row_bytes((1, "a")) > row_bytes(())
    assert row_bytes((None, True)) == row_bytes((None, False))


def test_adopt_moves_a_cache_with_its_charges_and_recency():
    old, new = MemoryBudget(10_000), MemoryBudget(1_000)
    moved, stays = old.cache("moved"), old.cache("stays")
    for k in range(5):
        moved.put(k, k, 50)       # 5 x 170 bytes with the per-entry overhead
    stays.put("s", 1, 50)
    resident = new.cache("resident")
    resident.put("r", 0, 10)      # older than every moved entry once they are re-stamped
    new.adopt(moved)
    assert moved.budget is new and old.used == stays.used and set(old.stats()["caches"]) == {"stays"}
    # 850 + 130 = 980 fits; the next put goes over and evicts the least recent: "r", then 0, 1...
    assert new.used == moved.used + resident.used == 980
    old._check()
    new._check()
    moved.put(5, 5, 50)
    assert "r" not in resident and moved.keys()[-1] == 5 and new.used <= int(new.capacity * LOW_WATER)
    assert moved.keys() == sorted(moved.keys())   # the moved entries kept their order
    new._check()
    new.adopt(moved)              # already there: nothing changes
    new._check()


def test_adopting_into_a_small_budget_evicts_at_once():
    old, new = MemoryBudget(100_000), MemoryBudget(500)
    c = old.cache("c")
    for k in range(10):
        c.put(k, k, 100)
    new.adopt(c)
    assert new.used <= new.capacity and len(c) < 10 and new.evictions == 10 - len(c)
    assert c.keys() == list(range(10 - len(c), 10))   # the most recent stayed
    old._check()
    new._check()
