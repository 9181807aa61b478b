"""Executor caches under one memory budget (RisingWave's managed LRU caches).

Stateful executors keep hot state in memory -- aggregation groups, the rows of a join key,
top-N windows, min/max candidates -- but the state itself lives in state tables, so a cache
entry is always a copy that may be dropped and read again. Each such cache is a
:class:`StateCache`; all the caches of one runtime share one :class:`MemoryBudget`, which
is how memory stays bounded however many groups or keys a stream has: when the caches'
charges together exceed the budget, the globally least recently used entries go first (every
access stamps its entry from one counter of the budget) until usage is back under the
budget's low-water mark.

Charges are the caller's estimate of an entry's bytes (:func:`row_bytes` for a row of
scalars); a value changed in place is re-``put`` with its new charge.

Invariants (``_check``): a cache's entries are in ascending stamp order (least recent first);
its ``used`` is the sum of its entries' charges; the budget's ``used`` is the sum of its
caches'; after every ``put`` the budget's ``used`` is at most its capacity.

Who may call: executors, each on its own caches. A budget and its caches belong to one thread
(the runtime's event loop): eviction changes other executors' caches, so nothing here locks.
Eviction happens only inside ``put`` -- a value returned by ``get`` stays the caller's.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

DEFAULT_BUDGET_BYTES = 128 << 20   # a runtime's caches (docs/streaming.md: the 1 GiB split)
LOW_WATER = 0.9          # eviction frees down to this fraction of the capacity
_MISSING = object()

_ENTRY_OVERHEAD = 120    # dict slot + the [value, charge, stamp] list, roughly (CPython 3.11)


def row_bytes(row) -> int:
    """A rough byte charge for a tuple or list of scalars (ints, floats, str, bytes, None,
    Decimal, dates): the container plus each value's size."""
    size = sys.getsizeof(row)
    for value in row:
        if value is not None and value is not True and value is not False:
            size += sys.getsizeof(value)
    return size


class MemoryBudget:
    """The byte budget shared by a runtime's caches (module docstring)."""

    def __init__(self, capacity_bytes: int = DEFAULT_BUDGET_BYTES):
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be an int >= 0, got {capacity_bytes!r}")
        self.capacity = capacity_bytes
        self.used = 0
        self.evictions = 0
        self._stamp = 0
        self._caches: list[StateCache] = []

    def cache(self, name: str) -> StateCache:
        """A new cache charged to this budget."""
        return StateCache(self, name)

    def adopt(self, cache: StateCache) -> None:
        """Move ``cache`` (with its entries and their charges) from its budget to this one;
        this budget may then evict. A runtime adopts the caches of the executors built for it
        without a budget of their own (``Executor.use_budget``)."""
        if cache.budget is self:
            return
        old = cache.budget
        old._unregister(cache)
        cache.budget = self
        self._register(cache)
        for entry in cache._entries.values():   # stamps from this budget's counter, order kept
            entry[2] = self._next_stamp()
        self._charge(cache.used)

    def _register(self, cache: StateCache) -> None:
        self._caches.append(cache)

    def _unregister(self, cache: StateCache) -> None:
        if cache in self._caches:
            self._caches.remove(cache)
            self.used -= cache.used

    def _next_stamp(self) -> int:
        self._stamp += 1
        return self._stamp

    def _charge(self, delta: int) -> None:
        self.used += delta
        if self.used > self.capacity:
            self._evict(int(self.capacity * LOW_WATER))

    def _evict(self, target: int) -> None:
        """Drop least recently used entries across caches until ``used <= target``; each
        round takes from the cache holding the oldest entry, up to the next cache's oldest."""
        while self.used > target:
            heads = [(c._oldest_stamp(), c) for c in self._caches if c._entries]
            if not heads:
                return
            heads.sort(key=lambda h: h[0])
            cache = heads[0][1]
            limit = heads[1][0] if len(heads) > 1 else None
            freed, count = cache._evict_until(self.used - target, limit)
            self.used -= freed
            self.evictions += count

    def stats(self) -> dict:
        return {"capacity_bytes": self.capacity, "used_bytes": self.used, "evictions": self.evictions,
                "caches": {c.name: c.stats() for c in self._caches}}

    def _check(self) -> None:
        for c in self._caches:
            c._check()
        assert self.used == sum(c.used for c in self._caches), (self.used, [c.used for c in self._caches])
        assert self.used <= self.capacity or not any(c._entries for c in self._caches), self.used


class StateCache:
    """A least-recently-used mapping whose entries are charged to a :class:`MemoryBudget`."""

    def __init__(self, budget: MemoryBudget, name: str):
        self.budget = budget
        self.name = name
        self.used = 0
        self.hits = self.misses = self.evictions = 0
        self._entries: OrderedDict = OrderedDict()    # key -> [value, charge, stamp]
        budget._register(self)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(self, key, default=None):
        """The value of ``key`` (now the most recently used), or ``default``."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return default
        self._entries.move_to_end(key)
        entry[2] = self.budget._next_stamp()
        self.hits += 1
        return entry[0]

    def peek_many(self, keys) -> dict:
        """key -> value of those of ``keys`` that are cached, without touching their recency
        or the counters (:meth:`peek` of each)."""
        entries = self._entries
        return {key: entries[key][0] for key in keys if key in entries}

    def peek(self, key, default=None):
        """The value of ``key`` without touching its recency or the counters."""
        entry = self._entries.get(key)
        return default if entry is None else entry[0]

    def put(self, key, value, charge: int) -> None:
        """Store ``value`` under ``key`` (most recently used) charged ``charge`` bytes plus a
        fixed per-entry overhead; may evict entries of any cache of the budget, this one too
        (even this entry, when it alone exceeds the budget)."""
        charge = int(charge) + _ENTRY_OVERHEAD
        entries = self._entries
        old = entries.get(key)
        stamp = self.budget._next_stamp()
        if old is None:
            entries[key] = [value, charge, stamp]
            delta = charge
        else:
            delta = charge - old[1]
            old[0], old[1], old[2] = value, charge, stamp
            entries.move_to_end(key)
        self.used += delta
        self.budget._charge(delta)

    def get_many(self, keys, found: dict) -> list:
        """:meth:`get` of each of ``keys`` (distinct) in one call: the hits go into ``found``
        (key -> value, each now the most recently used, in ``keys`` order); the misses are
        returned, in order. Counters as ``get``'s."""
        entries = self._entries
        lookup, touch = entries.get, entries.move_to_end
        budget = self.budget
        stamp = budget._stamp
        missing = []
        for key in keys:
            entry = lookup(key)
            if entry is None:
                missing.append(key)
            else:
                touch(key)
                stamp += 1
                entry[2] = stamp
                found[key] = entry[0]
        self.hits += stamp - budget._stamp
        self.misses += len(missing)
        budget._stamp = stamp
        return missing

    def put_many(self, items) -> None:
        """:meth:`put` of each ``(key, value, charge)`` of ``items`` (distinct keys), in order,
        with one charge to the budget at the end: eviction runs once, after all are stored
        (and may take some of them, as ``put`` may take its own entry)."""
        entries = self._entries
        lookup, touch = entries.get, entries.move_to_end
        budget = self.budget
        stamp = budget._stamp
        delta = 0
        for key, value, charge in items:
            charge = int(charge) + _ENTRY_OVERHEAD
            stamp += 1
            old = lookup(key)
            if old is None:
                entries[key] = [value, charge, stamp]
                delta += charge
            else:
                delta += charge - old[1]
                old[0], old[1], old[2] = value, charge, stamp
                touch(key)
        budget._stamp = stamp
        self.used += delta
        budget._charge(delta)

    def pop(self, key, default=_MISSING):
        """Remove ``key`` and return its value (``default`` if absent; ``KeyError`` without one)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self.used -= entry[1]
        self.budget._charge(-entry[1])
        return entry[0]

    def clear(self) -> None:
        """Drop every entry (recovery, a vnode change)."""
        freed = self.used
        self._entries.clear()
        self.used = 0
        self.budget._charge(-freed)

    def close(self) -> None:
        """Drop every entry and leave the budget (the executor is gone)."""
        self._entries.clear()
        self.budget._unregister(self)
        self.used = 0

    def keys(self):
        """The keys, least recently used first (a list: safe to change the cache while iterating)."""
        return list(self._entries)

    def stats(self) -> dict:
        return {"entries": len(self._entries), "used_bytes": self.used, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}

    # --- the budget's side ------------------------------------------------------------------------

    def _oldest_stamp(self) -> int:
        return next(iter(self._entries.values()))[2]

    def _evict_until(self, need: int, limit) -> tuple[int, int]:
        """Evict least recent entries until ``need`` bytes are freed or the oldest entry's
        stamp passes ``limit`` (None: no limit; at least one entry goes). Returns (bytes, count)."""
        entries = self._entries
        pop = entries.popitem
        freed = count = 0
        while entries and freed < need:
            key, entry = pop(last=False)
            if count and limit is not None and entry[2] > limit:
                entries[key] = entry          # not this one: back to the front
                entries.move_to_end(key, last=False)
                break
            freed += entry[1]
            count += 1
        self.used -= freed
        self.evictions += count
        return freed, count

    def _check(self) -> None:
        stamps = [e[2] for e in self._entries.values()]
        assert stamps == sorted(stamps), f"{self.name}: entries out of recency order"
        assert self.used == sum(e[1] for e in self._entries.values()), (self.name, self.used)


_default_budget: MemoryBudget | None = None


def default_budget() -> MemoryBudget:
    """The process-wide budget (``DEFAULT_BUDGET_BYTES``) of executors built without one; a
    runtime or a SQL connection passes its own to every stateful executor it builds."""
    global _default_budget
    if _default_budget is None:
        _default_budget = MemoryBudget(DEFAULT_BUDGET_BYTES)
    return _default_budget
