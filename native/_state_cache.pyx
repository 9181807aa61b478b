# cython: language_level=3
"""Native :class:`StateCache`; twin of ``stream/_cache_py.py`` (the contract is there; the
budget is ``stream.cache.MemoryBudget``).

Structure: a dict from key to ``_Entry`` plus a circular doubly-linked list through the entries
(least recently used right after the sentinel, most recent right before it). The budget's stamp
counter (``budget.stamp``) is read once per call and written back once. Values are released
only after the structure is consistent again (releasing a value may run arbitrary code), and
the budget is told about a change of ``used`` last, since it may evict from this cache.
"""

cimport cython
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

ENTRY_OVERHEAD = 120    # the twin's figure: both charge the same bytes per entry
cdef Py_ssize_t C_ENTRY_OVERHEAD = 120
cdef object _MISSING = object()


@cython.final
cdef class _Entry:
    cdef object key
    cdef object value
    cdef Py_ssize_t charge
    cdef object stamp          # a Python int: the budget's counter has no bound
    cdef _Entry prev
    cdef _Entry next


@cython.final
cdef class StateCache:
    """See the twin's docstring."""
    cdef public object budget
    cdef public str name
    cdef public Py_ssize_t used
    cdef public Py_ssize_t hits
    cdef public Py_ssize_t misses
    cdef public Py_ssize_t evictions
    cdef dict entries
    cdef _Entry head

    def __cinit__(self, budget, name):
        self.budget = budget
        self.name = name
        self.entries = {}
        self.head = _Entry()
        self.head.prev = self.head
        self.head.next = self.head

    def __init__(self, budget, name):
        budget.register(self)

    cdef inline void unlink(self, _Entry e) noexcept:
        e.prev.next = e.next
        e.next.prev = e.prev

    cdef inline void push_newest(self, _Entry e) noexcept:
        e.next = self.head
        e.prev = self.head.prev
        self.head.prev.next = e
        self.head.prev = e

    def __len__(self):
        return len(self.entries)

    def __contains__(self, key):
        return key in self.entries

    def get(self, key, default=None):
        """The value of ``key`` (now the most recently used), or ``default``."""
        cdef PyObject* p = PyDict_GetItem(self.entries, key)
        if p == NULL:
            self.misses += 1
            return default
        cdef _Entry e = <_Entry>p
        self.unlink(e)
        self.push_newest(e)
        budget = self.budget
        stamp = budget.stamp + 1
        budget.stamp = stamp
        e.stamp = stamp
        self.hits += 1
        return e.value

    def peek(self, key, default=None):
        """The value of ``key`` without touching its recency or the counters."""
        cdef PyObject* p = PyDict_GetItem(self.entries, key)
        return default if p == NULL else (<_Entry>p).value

    def peek_many(self, keys):
        """key -> value of those of ``keys`` that are cached (:meth:`peek` of each)."""
        cdef dict out = {}
        cdef PyObject* p
        for key in keys:
            p = PyDict_GetItem(self.entries, key)
            if p != NULL:
                out[key] = (<_Entry>p).value
        return out

    def get_many(self, keys, dict found):
        """:meth:`get` of each of ``keys`` (distinct): hits into ``found``, misses returned."""
        cdef list missing = []
        cdef PyObject* p
        cdef _Entry e
        cdef Py_ssize_t hits = 0
        budget = self.budget
        stamp = budget.stamp
        for key in keys:
            p = PyDict_GetItem(self.entries, key)
            if p == NULL:
                missing.append(key)
            else:
                e = <_Entry>p
                self.unlink(e)
                self.push_newest(e)
                stamp += 1
                e.stamp = stamp
                found[key] = e.value
                hits += 1
        self.hits += hits
        self.misses += len(missing)
        budget.stamp = stamp
        return missing

    cdef Py_ssize_t store(self, key, value, Py_ssize_t charge, object stamp, list released) except? -1:
        """Put one entry (no budget call); returns the change of ``used``."""
        cdef PyObject* p = PyDict_GetItem(self.entries, key)
        cdef _Entry e
        cdef Py_ssize_t delta
        if p == NULL:
            e = _Entry()
            e.key = key
            e.value = value
            e.charge = charge
            e.stamp = stamp
            self.entries[key] = e
            self.push_newest(e)
            return charge
        e = <_Entry>p
        released.append(e.value)
        delta = charge - e.charge
        e.value = value
        e.charge = charge
        e.stamp = stamp
        self.unlink(e)
        self.push_newest(e)
        return delta

    def put(self, key, value, charge):
        """Store ``value`` under ``key`` (most recently used) charged ``charge`` bytes plus the
        per-entry overhead; may evict entries of any cache of the budget, this one too."""
        cdef list released = []
        cdef Py_ssize_t c = <Py_ssize_t>int(charge) + C_ENTRY_OVERHEAD
        budget = self.budget
        stamp = budget.stamp + 1
        budget.stamp = stamp
        cdef Py_ssize_t delta = self.store(key, value, c, stamp, released)
        self.used += delta
        budget.charge(delta)

    def put_many(self, items):
        """:meth:`put` of each ``(key, value, charge)`` (distinct keys), one budget charge at
        the end (eviction once, after all are stored)."""
        cdef list released = []
        cdef Py_ssize_t delta = 0
        budget = self.budget
        stamp = budget.stamp
        for key, value, charge in items:
            stamp += 1
            delta += self.store(key, value, <Py_ssize_t>int(charge) + C_ENTRY_OVERHEAD, stamp, released)
        budget.stamp = stamp
        self.used += delta
        budget.charge(delta)

    def pop(self, key, default=_MISSING):
        """Remove ``key`` and return its value (``default`` if absent; ``KeyError`` without one)."""
        cdef PyObject* p = PyDict_GetItem(self.entries, key)
        if p == NULL:
            if default is _MISSING:
                raise KeyError(key)
            return default
        cdef _Entry e = <_Entry>p
        del self.entries[key]
        self.unlink(e)
        self.used -= e.charge
        self.budget.charge(-e.charge)
        return e.value

    cdef void drop_all(self):
        self.head.prev = self.head
        self.head.next = self.head

    def clear(self):
        """Drop every entry (recovery, a vnode change)."""
        cdef Py_ssize_t freed = self.used
        old = self.entries   # released after the structure is consistent
        self.entries = {}
        self.drop_all()
        self.used = 0
        self.budget.charge(-freed)
        del old

    def close(self):
        """Drop every entry and leave the budget (the executor is gone)."""
        old = self.entries
        self.entries = {}
        self.drop_all()
        self.budget.unregister(self)
        self.used = 0
        del old

    def keys(self):
        """The keys, least recently used first (a list)."""
        cdef list out = []
        cdef _Entry e = self.head.next
        while e is not self.head:
            out.append(e.key)
            e = e.next
        return out

    def stats(self):
        return {"entries": len(self.entries), "used_bytes": self.used, "hits": self.hits, "misses": self.misses,
                "evictions": self.evictions}

    # --- the budget's side ------------------------------------------------------------------------

    def restamp(self):
        """Give every entry a new stamp from the (new) budget's counter, in recency order."""
        cdef _Entry e = self.head.next
        budget = self.budget
        while e is not self.head:
            e.stamp = budget.next_stamp()
            e = e.next

    def charge_of(self, key):
        """The bytes ``key``'s entry is charged (with the per-entry overhead); KeyError if absent."""
        return (<_Entry>self.entries[key]).charge

    def oldest_stamp(self):
        if self.head.next is self.head:
            raise StopIteration
        return self.head.next.stamp

    def evict_until(self, Py_ssize_t need, limit):
        """Evict least recent entries until ``need`` bytes are freed or the oldest entry's
        stamp passes ``limit`` (None: no limit; at least one entry goes). Returns (bytes, count)."""
        cdef Py_ssize_t freed = 0, count = 0
        cdef _Entry e
        cdef list released = []
        while self.head.next is not self.head and freed < need:
            e = self.head.next
            if count and limit is not None and e.stamp > limit:
                break
            self.unlink(e)
            del self.entries[e.key]
            released.append(e)
            freed += e.charge
            count += 1
        self.used -= freed
        self.evictions += count
        return freed, count

    def _check(self):
        cdef _Entry e = self.head.next
        cdef Py_ssize_t total = 0, count = 0
        last = None
        while e is not self.head:
            assert e.next.prev is e, f"{self.name}: broken list"
            assert last is None or e.stamp >= last, f"{self.name}: entries out of recency order"
            assert self.entries.get(e.key) is e, f"{self.name}: list and dict disagree"
            last = e.stamp
            total += e.charge
            count += 1
            e = e.next
        assert count == len(self.entries), (self.name, count, len(self.entries))
        assert self.used == total, (self.name, self.used)
