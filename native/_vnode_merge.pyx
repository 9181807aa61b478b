# cython: language_level=3, boundscheck=True, wraparound=False
"""Native k-way merge of per-vnode streams into pk order; twin of ``relational/_vnode_merge_py.py``
(the reference: same name, results and exceptions; see its docstring for the contract).

A binary heap of stream slots ordered by ``key[skip:]`` compared with ``memcmp`` (then by slot,
so ties keep stream order), reversed for reverse scans. Each stream is read one pair ahead; the
pairs returned are the streams' own tuples, so a merged row costs one ``next`` on its stream and
about ``2 log2(k)`` comparisons, with no Python objects created.

Safety: every pair is checked (a 2-tuple with a ``bytes`` key) before its key is read, and a key
shorter than ``skip`` compares as empty, exactly like ``key[skip:]``.

Callers: :mod:`relational.table_iter` only, through ``hummock._twins.load``.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memcmp

cdef object _END = object()


cdef inline int cmp_tail(bytes a, bytes b, Py_ssize_t skip) noexcept:
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a) - skip, nb = PyBytes_GET_SIZE(b) - skip
    cdef int c
    if na < 0:
        na = 0
    if nb < 0:
        nb = 0
    if na and nb:
        c = memcmp(PyBytes_AS_STRING(a) + skip, PyBytes_AS_STRING(b) + skip, na if na < nb else nb)
        if c:
            return c
    return (na > nb) - (na < nb)


@cython.final
cdef class _Merge:
    """The iterator :func:`merge_by_tail` returns."""
    cdef list streams      # the caller's streams, until the first next()
    cdef list iters        # per slot: the stream's iterator
    cdef list heads        # per slot: the current pair
    cdef list keys         # per slot: the current pair's key
    cdef list heap         # slot numbers (ints), heap-ordered by before()
    cdef Py_ssize_t skip
    cdef bint reverse
    cdef bint started

    def __iter__(self):
        return self

    cdef inline bint before(self, Py_ssize_t a, Py_ssize_t b) noexcept:
        cdef int c = cmp_tail(<bytes>self.keys[a], <bytes>self.keys[b], self.skip)
        if c:
            return (c > 0) if self.reverse else (c < 0)
        return a < b

    cdef bint pull(self, Py_ssize_t slot) except -1:
        """Read the next pair of ``slot``; False when its stream is exhausted."""
        pair = next(self.iters[slot], _END)
        if pair is _END:
            return False
        if type(pair) is not tuple or len(<tuple>pair) != 2 or type((<tuple>pair)[0]) is not bytes:
            raise TypeError(f"merge_by_tail: stream {slot} yielded {pair!r:.80}, not a (bytes key, value) pair")
        self.heads[slot] = pair
        self.keys[slot] = (<tuple>pair)[0]
        return True

    cdef int sift_down(self, Py_ssize_t pos) except -1:
        cdef list heap = self.heap
        cdef Py_ssize_t n = len(heap), child, slot = heap[pos]
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            if child + 1 < n and self.before(<Py_ssize_t>heap[child + 1], <Py_ssize_t>heap[child]):
                child += 1
            if not self.before(<Py_ssize_t>heap[child], slot):
                break
            heap[pos] = heap[child]
            pos = child
        heap[pos] = slot
        return 0

    cdef int start(self) except -1:
        cdef Py_ssize_t i, n = len(self.streams)
        self.started = True
        self.iters = [iter(s) for s in self.streams]
        self.streams = None
        self.heads = [None] * n
        self.keys = [None] * n
        self.heap = []
        for i in range(n):
            if self.pull(i):   # empty streams never enter the heap
                self.heap.append(i)
        for i in range(len(self.heap) // 2 - 1, -1, -1):
            self.sift_down(i)
        return 0

    def __next__(self):
        cdef Py_ssize_t top
        if not self.started:
            self.start()
        if not self.heap:
            raise StopIteration
        top = self.heap[0]
        out = self.heads[top]
        if not self.pull(top):
            last = self.heap.pop()
            if not self.heap:
                return out
            self.heap[0] = last
        self.sift_down(0)
        return out


def merge_by_tail(streams, reverse=False, skip=2):
    """Merge ``streams`` by ``key[skip:]``; see the twin's docstring."""
    cdef Py_ssize_t s = int(skip)
    if s < 0:
        raise ValueError(f"skip must be >= 0, got {s}")
    cdef _Merge m = _Merge.__new__(_Merge)
    m.streams = list(streams)
    m.skip = s
    m.reverse = bool(reverse)
    m.started = False
    return m
