# cython: language_level=3
"""Sorting batches of byte-string keys in C, for the native modules that sort before they walk
(``_readpath``'s ``multi_get`` batches, ``_chunk_keys``'s chunk keys).

``sort_key_refs`` orders :c:type:`KeyRef` records by their bytes (``memcmp`` order, a shorter key
first when it is a prefix of a longer one), then by position ``i``: a total order, so the sort
is stable and its result does not depend on the algorithm. How: every key gets a 64-bit *head*,
the 8 bytes after the batch's common prefix (big-endian, zero-padded past the key's end), and
compares by head first -- unequal heads order two keys as their bytes do (a zero-padded shorter
key differing within the head is below the longer there, as it is bytewise) -- and only equal
heads compare bytes. A quicksort with the comparison inline, insertion sort below 16 keys, and
libc's ``qsort`` for a range once the depth budget (2 log2 n) runs out, so a batch built against
the pivot rule stays O(n log n). Replaces a ``qsort`` whose comparison callback ran ``memcmp``
over shared prefixes (a table id, a vnode, a pk's high bytes) on every step.

Callers: native modules only (``cimport``); the Python twins sort with ``sorted``.
"""

from libc.stdint cimport uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp


cdef struct KeyRef:
    const unsigned char* p   # the key's bytes (kept alive by the caller)
    Py_ssize_t n             # how many bytes of it sort
    Py_ssize_t i             # its position in the caller's batch (breaks ties)
    uint64_t head            # set by sort_key_refs


cdef inline int cmp_key_refs(const void* a, const void* b) noexcept nogil:
    """Bytes order, then position (what ``sort_key_refs`` sorts by; heads are not used, so it
    also serves before they are set)."""
    cdef const KeyRef* x = <const KeyRef*>a
    cdef const KeyRef* y = <const KeyRef*>b
    cdef int c = memcmp(x.p, y.p, <size_t>(x.n if x.n < y.n else y.n))
    if c:
        return c
    if x.n != y.n:
        return -1 if x.n < y.n else 1
    return (x.i > y.i) - (x.i < y.i)


cdef inline bint _before(const KeyRef* x, const KeyRef* y) noexcept nogil:
    if x.head != y.head:
        return x.head < y.head
    return cmp_key_refs(x, y) < 0


cdef inline void _swap(KeyRef* a, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef KeyRef t = a[i]
    a[i] = a[j]
    a[j] = t


cdef inline void _quicksort(KeyRef* a, Py_ssize_t n, int depth) noexcept nogil:
    cdef Py_ssize_t i, j, mid
    cdef KeyRef pivot, t
    while n > 16:
        if depth == 0:
            qsort(a, <size_t>n, sizeof(KeyRef), cmp_key_refs)
            return
        depth -= 1
        mid = n >> 1
        if _before(&a[mid], &a[0]):
            _swap(a, mid, 0)
        if _before(&a[n - 1], &a[0]):
            _swap(a, n - 1, 0)
        if _before(&a[n - 1], &a[mid]):
            _swap(a, n - 1, mid)
        pivot = a[mid]                  # a[0] <= pivot <= a[n - 1]: both scans stop inside
        i, j = 0, n - 1
        while True:
            i += 1
            while _before(&a[i], &pivot):
                i += 1
            j -= 1
            while _before(&pivot, &a[j]):
                j -= 1
            if i >= j:
                break
            _swap(a, i, j)
        if j + 1 < n - j - 1:           # recurse into the smaller side, loop on the larger
            _quicksort(a, j + 1, depth)
            a, n = a + j + 1, n - j - 1
        else:
            _quicksort(a + j + 1, n - j - 1, depth)
            n = j + 1
    for i in range(1, n):
        t = a[i]
        j = i
        while j > 0 and _before(&t, &a[j - 1]):
            a[j] = a[j - 1]
            j -= 1
        a[j] = t


cdef inline void sort_key_refs(KeyRef* a, Py_ssize_t n) noexcept nogil:
    """Sort ``a[:n]`` by bytes, then position (module docstring); sets every ``head``."""
    cdef Py_ssize_t skip, i, j, end
    cdef uint64_t w
    cdef int depth = 2
    if n < 2:
        return
    skip = a[0].n
    for i in range(1, n):               # the bytes every key shares
        j = 0
        end = skip if skip < a[i].n else a[i].n
        while j < end and a[i].p[j] == a[0].p[j]:
            j += 1
        skip = j
    for i in range(n):
        w = 0
        end = a[i].n if a[i].n < skip + 8 else skip + 8
        for j in range(skip, end):
            w |= (<uint64_t>a[i].p[j]) << (8 * (skip + 7 - j))
        a[i].head = w
    j = n
    while j > 1:
        j >>= 1
        depth += 2
    _quicksort(a, n, depth)
