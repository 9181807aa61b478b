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

from hummock import _twins

DEFAULT_BUDGET_BYTES = 128 << 20   # a runtime's caches (docs/streaming.md: the 1 GiB split)
LOW_WATER = 0.9          # eviction frees down to this fraction of the capacity


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
        self.stamp = 0
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
        old.unregister(cache)
        cache.budget = self
        self.register(cache)
        cache.restamp()   # stamps from this budget's counter, order kept
        self.charge(cache.used)

    # --- the caches' side: ``stamp`` is the last stamp handed out (a cache stamping a batch
    # advances it itself); ``charge`` reports a change of a cache's ``used`` and may evict

    def register(self, cache: StateCache) -> None:
        self._caches.append(cache)

    def unregister(self, cache: StateCache) -> None:
        if cache in self._caches:
            self._caches.remove(cache)
            self.used -= cache.used

    def next_stamp(self) -> int:
        self.stamp += 1
        return self.stamp

    def charge(self, delta: int) -> None:
        self.used += delta
        if self.used > self.capacity:
            self._evict(int(self.capacity * LOW_WATER))

    def _evict(self, target: int) -> None:
        """Drop least recently used entries across caches until ``used <= target``; each
        round takes from the cache holding the oldest entry, up to the next cache's oldest."""
        while self.used > target:
            heads = [(c.oldest_stamp(), c) for c in self._caches if len(c)]
            if not heads:
                return
            heads.sort(key=lambda h: h[0])
            cache = heads[0][1]
            limit = heads[1][0] if len(heads) > 1 else None
            freed, count = cache.evict_until(self.used - target, limit)
            self.used -= freed
            self.evictions += count

    def stats(self) -> dict:
        return {"capacity_bytes": self.capacity, "used_bytes": self.used, "evictions": self.evictions,
                "caches": {c.name: c.stats() for c in self._caches}}

    def _check(self) -> None:
        for c in self._caches:
            c._check()
        assert self.used == sum(c.used for c in self._caches), (self.used, [c.used for c in self._caches])
        assert self.used <= self.capacity or not any(len(c) for c in self._caches), self.used


_impl = _twins.load("_state_cache", "stream._cache_py")
#: ``StateCache(budget, name)``: the LRU mapping (native ``native/_state_cache.pyx`` or the twin
#: ``stream/_cache_py.py``, same API and behaviour; the twin's docstring has the contract).
StateCache = _impl.StateCache
_ENTRY_OVERHEAD = _impl.ENTRY_OVERHEAD   # bytes charged per entry on top of the caller's charge

_default_budget: MemoryBudget | None = None


def default_budget() -> MemoryBudget:
    """The process-wide budget (``DEFAULT_BUDGET_BYTES``) of executors built without one; a
    runtime or a SQL connection passes its own to every stateful executor it builds."""
    global _default_budget
    if _default_budget is None:
        _default_budget = MemoryBudget(DEFAULT_BUDGET_BYTES)
    return _default_budget
