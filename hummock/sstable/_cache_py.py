"""Pure-Python twin of ``native/_lru.pyx``: the byte-bounded LRU cache (see :mod:`hummock.sstable.cache`).

Each entry has a *charge* (its size in bytes); the cache keeps the sum of charges at or below
its capacity by evicting least-recently-used entries. An entry larger than the whole capacity is
returned to the caller but not kept. Hit/miss/eviction counters are exposed by :meth:`stats`.

Thread safety: every method takes the cache's lock; a loader passed to :meth:`get_or_load` runs
outside the lock (two threads may load the same key at once; the second insert replaces the
first, which is harmless for immutable SST data).

Callers: :mod:`hummock.sstable.cache` only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class LruCache:
    """A byte-bounded LRU map from hashable keys to immutable values."""

    def __init__(self, capacity_bytes: int, name: str = "cache"):
        if capacity_bytes < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity_bytes}")
        self.name = name
        self.capacity = capacity_bytes
        self._entries: OrderedDict = OrderedDict()  # key -> (value, charge)
        self._used = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = self.inserts = 0

    def get(self, key):
        """The cached value or ``None``; counts a hit or a miss."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key, value, charge: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._used -= old[1]
            if charge > self.capacity:
                return
            self._entries[key] = (value, charge)
            self._used += charge
            self.inserts += 1
            while self._used > self.capacity:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._used -= evicted
                self.evictions += 1

    def get_or_load(self, key, loader, charge_of=len):
        """The cached value, or ``loader()`` inserted with charge ``charge_of(value)``."""
        value = self.get(key)
        if value is None:
            value = loader()
            self.put(key, value, charge_of(value))
        return value

    def erase(self, key) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._used -= old[1]

    def erase_if(self, predicate) -> int:
        """Drop every entry whose key satisfies ``predicate``; return how many were dropped."""
        with self._lock:
            doomed = [k for k in self._entries if predicate(k)]
            for k in doomed:
                self._used -= self._entries.pop(k)[1]
            return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._used = 0

    @property
    def used(self) -> int:
        return self._used

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict:
        with self._lock:
            lookups = self.hits + self.misses
            return {"name": self.name, "capacity_bytes": self.capacity, "used_bytes": self._used,
                    "entries": len(self._entries), "hits": self.hits, "misses": self.misses,
                    "evictions": self.evictions, "inserts": self.inserts,
                    "hit_rate": self.hits / lookups if lookups else 0.0}

    def keys_lru_order(self) -> list:
        """Keys from least to most recently used (for tests of eviction order)."""
        with self._lock:
            return list(self._entries)

    def _check(self) -> None:
        """Invariant checker for tests: charges add up and never exceed the capacity."""
        with self._lock:
            assert self._used == sum(charge for _, charge in self._entries.values())
            assert self._used <= self.capacity
            assert all(charge <= self.capacity for _, charge in self._entries.values())
