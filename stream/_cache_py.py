"""Pure-Python twin of ``native/_state_cache.pyx``: :class:`StateCache`, an executor cache's
least-recently-used mapping charged to a :class:`~stream.cache.MemoryBudget`.

Contract (both implementations, same results, counters and eviction order):
- entries are ``key -> (value, charge, stamp)`` in recency order (least recent first); every
  access that makes an entry most recent gives it the next stamp of its budget's counter
  (``budget.stamp``), so the budget can evict the globally least recent entries across caches;
- ``charge`` is the caller's charge plus :data:`ENTRY_OVERHEAD`; ``used`` is their sum; every
  change of ``used`` is reported to the budget (``budget.charge(delta)``), which may evict
  (only inside ``put``/``put_many``: a value returned by ``get`` stays the caller's);
- the budget calls ``oldest_stamp``, ``evict_until``, ``restamp`` and ``_check``; the cache
  calls the budget's ``register``, ``unregister``, ``next_stamp``, ``charge`` and advances its
  ``stamp`` counter itself when it stamps a batch (``get_many``/``put_many``).
Who may call: :mod:`stream.cache` (which loads one of the two) and, through it, executors; one
thread per budget (the runtime's event loop).
"""

from __future__ import annotations

from collections import OrderedDict

ENTRY_OVERHEAD = 120    # dict slot + the [value, charge, stamp] list, roughly (CPython 3.11)
_ENTRY_OVERHEAD = ENTRY_OVERHEAD
_MISSING = object()


class StateCache:
    """A least-recently-used mapping whose entries are charged to a :class:`MemoryBudget`."""

    def __init__(self, budget: MemoryBudget, name: str):
        self.budget = budget
        self.name = name
        self.used = 0
        self.hits = self.misses = self.evictions = 0
        self._entries: OrderedDict = OrderedDict()    # key -> [value, charge, stamp]
        budget.register(self)

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
        entry[2] = self.budget.next_stamp()
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
        stamp = self.budget.next_stamp()
        if old is None:
            entries[key] = [value, charge, stamp]
            delta = charge
        else:
            delta = charge - old[1]
            old[0], old[1], old[2] = value, charge, stamp
            entries.move_to_end(key)
        self.used += delta
        self.budget.charge(delta)

    def get_many(self, keys, found: dict) -> list:
        """:meth:`get` of each of ``keys`` (distinct) in one call: the hits go into ``found``
        (key -> value, each now the most recently used, in ``keys`` order); the misses are
        returned, in order. Counters as ``get``'s."""
        entries = self._entries
        lookup, touch = entries.get, entries.move_to_end
        budget = self.budget
        stamp = budget.stamp
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
        self.hits += stamp - budget.stamp
        self.misses += len(missing)
        budget.stamp = stamp
        return missing

    def put_many(self, items) -> None:
        """:meth:`put` of each ``(key, value, charge)`` of ``items`` (distinct keys), in order,
        with one charge to the budget at the end: eviction runs once, after all are stored
        (and may take some of them, as ``put`` may take its own entry)."""
        entries = self._entries
        lookup, touch = entries.get, entries.move_to_end
        budget = self.budget
        stamp = budget.stamp
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
        budget.stamp = stamp
        self.used += delta
        budget.charge(delta)

    def pop(self, key, default=_MISSING):
        """Remove ``key`` and return its value (``default`` if absent; ``KeyError`` without one)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self.used -= entry[1]
        self.budget.charge(-entry[1])
        return entry[0]

    def clear(self) -> None:
        """Drop every entry (recovery, a vnode change)."""
        freed = self.used
        self._entries.clear()
        self.used = 0
        self.budget.charge(-freed)

    def close(self) -> None:
        """Drop every entry and leave the budget (the executor is gone)."""
        self._entries.clear()
        self.budget.unregister(self)
        self.used = 0

    def keys(self):
        """The keys, least recently used first (a list: safe to change the cache while iterating)."""
        return list(self._entries)

    def stats(self) -> dict:
        return {"entries": len(self._entries), "used_bytes": self.used, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}

    # --- the budget's side ------------------------------------------------------------------------

    def restamp(self) -> None:
        """Give every entry a new stamp from the (new) budget's counter, in recency order."""
        for entry in self._entries.values():
            entry[2] = self.budget.next_stamp()

    def charge_of(self, key) -> int:
        """The bytes ``key``'s entry is charged (with the per-entry overhead); KeyError if absent."""
        return self._entries[key][1]

    def oldest_stamp(self) -> int:
        return next(iter(self._entries.values()))[2]

    def evict_until(self, need: int, limit) -> tuple[int, int]:
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
