# cython: language_level=3
"""Native byte-bounded LRU cache; twin of ``hummock/sstable/_cache_py.py`` (see
``hummock/sstable/cache.py`` for the contract).

Structure: a dict from key to ``_Node`` plus a circular doubly-linked list through the nodes
(most recently used right after the sentinel). Every operation runs in C while holding the GIL
and calls no Python-level code (keys are builtin tuples/ints/bytes), so no other thread can
observe a half-done update; values evicted by ``put`` are released only after the structure is
consistent again, because releasing a value may run arbitrary code.
"""

cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject


@cython.final
cdef class _Node:
    pass   # fields in native/_lru.pxd


@cython.final
cdef class LruCache:
    # fields in native/_lru.pxd (key -> _Node dict, sentinel, byte count, counters)

    def __cinit__(self, capacity_bytes, name="cache"):
        if capacity_bytes < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity_bytes}")
        self.name = name
        self.capacity = capacity_bytes
        self.entries = {}
        self.head = _Node()
        self.head.prev = self.head
        self.head.next = self.head
        self.used_bytes = 0

    cdef void unlink(self, _Node node) noexcept:
        node.prev.next = node.next
        node.next.prev = node.prev

    cdef void push_front(self, _Node node) noexcept:
        node.prev = self.head
        node.next = self.head.next
        self.head.next.prev = node
        self.head.next = node

    def get(self, key):
        """The cached value or ``None``; counts a hit or a miss."""
        value = self.c_peek(key)
        if value is None:
            self.misses += 1
        return value

    cdef object c_peek(self, key):
        """:meth:`get` for other native modules, counting a hit only: ``None`` on a miss, which
        the caller then reports through :meth:`get` or counts itself."""
        cdef PyObject* p = PyDict_GetItem(self.entries, key)
        if p == NULL:
            return None
        node = <_Node>p
        self.unlink(node)
        self.push_front(node)
        self.hits += 1
        return node.value

    def put(self, key, value, Py_ssize_t charge):
        cdef _Node node
        cdef list released = []
        old = self.entries.pop(key, None)
        if old is not None:
            self.unlink(<_Node>old)
            self.used_bytes -= (<_Node>old).charge
            released.append(old)
        if charge > self.capacity:
            return
        node = _Node()
        node.key = key
        node.value = value
        node.charge = charge
        self.entries[key] = node
        self.push_front(node)
        self.used_bytes += charge
        self.inserts += 1
        while self.used_bytes > self.capacity:
            victim = self.head.prev
            self.unlink(<_Node>victim)
            del self.entries[(<_Node>victim).key]
            self.used_bytes -= (<_Node>victim).charge
            self.evictions += 1
            released.append(victim)
        # ``released`` (and the values it holds) is dropped here, after the update is complete

    def get_or_load(self, key, loader, charge_of=len):
        """The cached value, or ``loader()`` inserted with charge ``charge_of(value)``."""
        value = self.get(key)
        if value is None:
            value = loader()
            self.put(key, value, charge_of(value))
        return value

    def erase(self, key):
        old = self.entries.pop(key, None)
        if old is not None:
            self.unlink(<_Node>old)
            self.used_bytes -= (<_Node>old).charge

    def erase_if(self, predicate):
        """Drop every entry whose key satisfies ``predicate``; return how many were dropped."""
        doomed = [k for k in list(self.entries) if predicate(k)]
        cdef Py_ssize_t dropped = 0
        for k in doomed:
            old = self.entries.pop(k, None)
            if old is not None:
                self.unlink(<_Node>old)
                self.used_bytes -= (<_Node>old).charge
                dropped += 1
        return dropped

    def clear(self):
        nodes = self.entries
        self.entries = {}
        self.head.prev = self.head
        self.head.next = self.head
        self.used_bytes = 0
        # break the reference cycles of the old list
        for node in nodes.values():
            (<_Node>node).prev = None
            (<_Node>node).next = None

    @property
    def used(self):
        return self.used_bytes

    def __len__(self):
        return len(self.entries)

    def stats(self):
        lookups = self.hits + self.misses
        return {"name": self.name, "capacity_bytes": self.capacity, "used_bytes": self.used_bytes,
                "entries": len(self.entries), "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions, "inserts": self.inserts,
                "hit_rate": self.hits / lookups if lookups else 0.0}

    def keys_lru_order(self):
        """Keys from least to most recently used (for tests of eviction order)."""
        out = []
        node = self.head.prev
        while node is not self.head:
            out.append((<_Node>node).key)
            node = (<_Node>node).prev
        return out

    def _check(self):
        """Invariant checker for tests: list and dict agree, charges add up, capacity holds."""
        cdef Py_ssize_t total = 0, count = 0
        node = self.head.next
        while node is not self.head:
            assert self.entries.get((<_Node>node).key) is node
            assert (<_Node>node).next.prev is node
            total += (<_Node>node).charge
            count += 1
            node = (<_Node>node).next
        assert count == len(self.entries)
        assert total == self.used_bytes <= self.capacity

    def __dealloc__(self):
        # break the cycles of the linked list so the nodes can be freed
        if self.entries is not None:
            for node in self.entries.values():
                (<_Node>node).prev = None
                (<_Node>node).next = None
        if self.head is not None:
            self.head.prev = None
            self.head.next = None
