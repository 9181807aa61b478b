# cython: language_level=3
"""Native batch checking and imm merging; twin of ``hummock/_memtable_py.py`` (same names, same
errors and messages, identical output)."""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

from hummock.errors import InvalidArgumentError

DEF ENTRY_OVERHEAD = 48


cdef inline int cmp_bytes(bytes a, bytes b) noexcept:
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b)
    cdef int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), na if na < nb else nb)
    if c:
        return c
    return (na > nb) - (na < nb)


def check_batch(kv_pairs):
    """Validate an ingest batch; return ``(keys, values, size_in_bytes)`` (see the twin)."""
    cdef list keys = [], values = []
    cdef Py_ssize_t size = 0, i = 0
    cdef bytes previous = None, k
    cdef int c
    for pair in kv_pairs:
        if type(pair) is tuple and len(<tuple>pair) == 2:
            key = (<tuple>pair)[0]
            value = (<tuple>pair)[1]
        else:
            try:
                key, value = pair
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"batch item {i} is not a (key, value) pair") from None
        if type(key) is not bytes:
            if not isinstance(key, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"batch item {i}: key must be bytes, got {type(key).__name__}")
            key = bytes(key)
        if value is not None and type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"batch item {i}: value must be bytes or None, got {type(value).__name__}")
            value = bytes(value)
        k = <bytes>key
        if previous is not None:
            c = cmp_bytes(k, previous)
            if c <= 0:
                raise InvalidArgumentError(
                    f"batch item {i}: {'duplicate key' if c == 0 else 'keys not sorted ascending'}")
        previous = k
        keys.append(k)
        values.append(value)
        size += PyBytes_GET_SIZE(k) + (PyBytes_GET_SIZE(value) if value is not None else 0) + ENTRY_OVERHEAD
        i += 1
    return keys, values, size


@cython.boundscheck(False)
def merge_runs(bytes prefix, runs):
    """Merge ``(versioned_epoch, keys, values)`` runs of one table into ``(full_keys, values)``
    in full-key order (see the twin). A binary heap of run indices, compared in C."""
    cdef list run_list = list(runs)
    cdef Py_ssize_t n = len(run_list), total = 0, i, child, top, size
    cdef Py_ssize_t* pos = NULL
    cdef Py_ssize_t* heap = NULL
    cdef uint64_t* inv = NULL
    cdef list keys_of = [], values_of = []
    cdef list out_keys = [], out_values = []
    cdef bytes key, full
    cdef char* w
    cdef Py_ssize_t kn, j
    if PyBytes_GET_SIZE(prefix) != 4:
        raise InvalidArgumentError("prefix must be the 4-byte table id")
    pos = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    heap = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    inv = <uint64_t*>malloc((n + 1) * sizeof(uint64_t))
    if pos == NULL or heap == NULL or inv == NULL:
        free(pos); free(heap); free(inv)
        raise MemoryError()
    try:
        size = 0
        for i in range(n):
            epoch, ks, vs = run_list[i]
            ks = list(ks)
            if len(ks) != len(vs):
                raise InvalidArgumentError("a run's keys and values differ in length")
            for k in ks:
                if type(k) is not bytes:
                    raise InvalidArgumentError("run keys must be bytes")
            keys_of.append(ks)
            values_of.append(list(vs))
            inv[i] = 0xFFFFFFFFFFFFFFFF - <uint64_t>epoch
            pos[i] = 0
            total += len(ks)
            if len(ks):
                heap[size] = i
                size += 1
                sift_up(heap, size - 1, keys_of, pos, inv)
        while size:
            top = heap[0]
            key = <bytes>(<list>keys_of[top])[pos[top]]
            kn = PyBytes_GET_SIZE(key)
            full = PyBytes_FromStringAndSize(NULL, kn + 12)
            w = PyBytes_AS_STRING(full)
            memcpy(w, PyBytes_AS_STRING(prefix), 4)
            memcpy(w + 4, PyBytes_AS_STRING(key), kn)
            for j in range(8):
                w[4 + kn + j] = <char>((inv[top] >> (8 * (7 - j))) & 0xFF)
            out_keys.append(full)
            out_values.append((<list>values_of[top])[pos[top]])
            pos[top] += 1
            if pos[top] >= len(<list>keys_of[top]):
                size -= 1
                heap[0] = heap[size]
            sift_down(heap, size, keys_of, pos, inv)
        return out_keys, out_values
    finally:
        free(pos)
        free(heap)
        free(inv)


cdef inline bint run_less(Py_ssize_t a, Py_ssize_t b, list keys_of, Py_ssize_t* pos, uint64_t* inv):
    """Run a's head sorts before run b's: table key ascending, then epoch descending."""
    cdef int c = cmp_bytes(<bytes>(<list>keys_of[a])[pos[a]], <bytes>(<list>keys_of[b])[pos[b]])
    if c:
        return c < 0
    return inv[a] < inv[b]


cdef void sift_up(Py_ssize_t* heap, Py_ssize_t i, list keys_of, Py_ssize_t* pos, uint64_t* inv):
    cdef Py_ssize_t parent, t
    while i > 0:
        parent = (i - 1) // 2
        if run_less(heap[i], heap[parent], keys_of, pos, inv):
            t = heap[i]; heap[i] = heap[parent]; heap[parent] = t
            i = parent
        else:
            break


cdef void sift_down(Py_ssize_t* heap, Py_ssize_t size, list keys_of, Py_ssize_t* pos, uint64_t* inv):
    cdef Py_ssize_t i = 0, child, t
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and run_less(heap[child + 1], heap[child], keys_of, pos, inv):
            child += 1
        if run_less(heap[child], heap[i], keys_of, pos, inv):
            t = heap[i]; heap[i] = heap[child]; heap[child] = t
            i = child
        else:
            break
