"""Byte-bounded LRU caches shared by SST readers: the block cache and the meta cache.

Each entry has a *charge* (its size in bytes); the cache keeps the sum of charges at or below
its capacity by evicting least-recently-used entries. An entry larger than the whole capacity is
returned to the caller but not kept. Hit/miss/eviction counters are exposed by ``stats()``.

``LruCache`` is ``native/_lru.pyx`` when built (a dict plus an intrusive doubly-linked list in C,
atomic under the GIL), else the twin ``hummock/sstable/_cache_py.py`` (an ``OrderedDict`` under
a lock). Same API, same eviction order.

Thread safety: every method is safe to call from several threads. A loader passed to
``get_or_load`` runs outside any lock (two threads may load the same key at once; the second
insert replaces the first, which is harmless for immutable SST data). Keys must be hashable
builtins (tuples of ints, ints, bytes) so lookups run no Python-level code.

Callers: :class:`hummock.sstable.reader.Sstable` and the engine, which owns one of each.
"""

from hummock import _twins

_impl = _twins.load("_lru", "hummock.sstable._cache_py")
LruCache = _impl.LruCache
