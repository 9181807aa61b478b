"""A bounded, budget-charged set of join keys: how a HashJoin side remembers keys it learnt
something about without a cache entry per key (stream/executors/hash_join.py).

A :class:`KeySet` is one entry (key ``0`` -> a dict used as an insertion-ordered set) of its own
:class:`~stream.cache.StateCache`, charged ``KEY_BYTES`` a key, so the runtime's
:class:`~stream.cache.MemoryBudget` may drop the whole set like any other entry (the set then
reads as empty: what it held were hints, never state). It holds at most ``limit`` keys: past
that, the older half (insertion order) goes.

The join uses two per side: the keys known to have no rows (a probe of such a key needs no
read) and the keys read once with rows but not cached (a second read within the set's horizon
admits the key's entry into the cache: entries read once and never probed again -- every key
of a 1:1 join -- cost no cache entry and no eviction).

Invariants: ``len(keys()) <= limit``; the cache holds at most the one entry, charged
``KEY_BYTES * len(keys())``. Who may call: the side owning it, on the event-loop thread.
"""

from __future__ import annotations

from itertools import islice

KEY_BYTES = 120   # a key: its dict slot and key tuple, roughly
SHARE = 16        # a key set stays under 1/SHARE of its budget
_EMPTY: dict = {}  # what keys() returns for a dropped or empty set (never mutated)


class KeySet:
    """Bounded ordered set of keys charged to ``budget`` (module docstring)."""

    def __init__(self, budget, name: str):
        self.cache = budget.cache(name)
        self.limit = max(1024, budget.capacity // SHARE // KEY_BYTES)

    def keys(self) -> dict:
        """The keys (a dict; read-only: change it with :meth:`change`); empty when the budget
        dropped the set."""
        keys = self.cache.peek(0)
        return _EMPTY if keys is None else keys

    def change(self, add=(), remove=()) -> None:
        """Remove the keys of ``remove``, then add those of ``add`` (as the newest)."""
        keys = self.cache.peek(0)
        if keys is None:
            if not add:
                return
            keys = {}
        for key in remove:
            keys.pop(key, None)
        keys.update(dict.fromkeys(add))
        if len(keys) > self.limit:   # drop the older half (insertion order)
            for key in list(islice(keys, len(keys) - self.limit // 2)):
                del keys[key]
        if keys:
            self.cache.put(0, keys, len(keys) * KEY_BYTES)
        else:
            self.cache.pop(0, None)

    def clear(self) -> None:
        self.cache.clear()

    def close(self) -> None:
        self.cache.close()
