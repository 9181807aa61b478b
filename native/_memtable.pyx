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
    in full-key order (see the twin). A binary heap of run indices; each run's head key is kept
    as a C pointer and length, so comparisons touch no Python object."""
    cdef list run_list = list(runs)
    cdef Py_ssize_t n = len(run_list), i, top, size = 0
    cdef _Runs r = _Runs(n)
    cdef list keys_of = [], values_of = []
    cdef list out_keys = [], out_values = []
    cdef bytes key, full
    cdef char* w
    cdef Py_ssize_t kn, j
    cdef uint64_t inv
    if PyBytes_GET_SIZE(prefix) != 4:
        raise InvalidArgumentError("prefix must be the 4-byte table id")
    for i in range(n):
        epoch, ks, vs = run_list[i]
        ks = list(ks)
        vs = list(vs)
        if len(ks) != len(vs):
            raise InvalidArgumentError("a run's keys and values differ in length")
        for k in ks:
            if type(k) is not bytes:
                raise InvalidArgumentError("run keys must be bytes")
        keys_of.append(ks)
        values_of.append(vs)
        r.inv[i] = 0xFFFFFFFFFFFFFFFF - <uint64_t>epoch
        r.pos[i] = 0
        r.length[i] = len(ks)
        if r.length[i]:
            r.load_head(i, <list>ks)
            r.heap[size] = i
            size += 1
            r.sift_up(size - 1)
    while size:
        top = r.heap[0]
        kn = r.head_len[top]
        full = PyBytes_FromStringAndSize(NULL, kn + 12)
        w = PyBytes_AS_STRING(full)
        memcpy(w, PyBytes_AS_STRING(prefix), 4)
        memcpy(w + 4, r.head[top], kn)
        inv = r.inv[top]
        for j in range(8):
            w[4 + kn + j] = <char>((inv >> (8 * (7 - j))) & 0xFF)
        out_keys.append(full)
        out_values.append((<list>values_of[top])[r.pos[top]])
        r.pos[top] += 1
        if r.pos[top] >= r.length[top]:
            size -= 1
            r.heap[0] = r.heap[size]
        else:
            r.load_head(top, <list>keys_of[top])
        r.sift_down(size)
    return out_keys, out_values


@cython.final
cdef class _Runs:
    """C arrays describing the runs being merged (freed with the object)."""
    cdef Py_ssize_t* pos
    cdef Py_ssize_t* length
    cdef Py_ssize_t* heap
    cdef uint64_t* inv
    cdef const char** head
    cdef Py_ssize_t* head_len

    def __cinit__(self, Py_ssize_t n):
        n += 1
        self.pos = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.length = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.heap = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.inv = <uint64_t*>malloc(n * sizeof(uint64_t))
        self.head = <const char**>malloc(n * sizeof(const char*))
        self.head_len = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        if not (self.pos and self.length and self.heap and self.inv and self.head and self.head_len):
            raise MemoryError()

    def __dealloc__(self):
        free(self.pos); free(self.length); free(self.heap); free(self.inv); free(self.head); free(self.head_len)

    cdef inline void load_head(self, Py_ssize_t i, list keys) noexcept:
        cdef bytes k = <bytes>keys[self.pos[i]]
        self.head[i] = PyBytes_AS_STRING(k)
        self.head_len[i] = PyBytes_GET_SIZE(k)

    cdef inline bint less(self, Py_ssize_t a, Py_ssize_t b) noexcept:
        """Run a's head sorts before run b's: table key ascending, then epoch descending."""
        cdef Py_ssize_t na = self.head_len[a], nb = self.head_len[b]
        cdef int c = memcmp(self.head[a], self.head[b], na if na < nb else nb)
        if c:
            return c < 0
        if na != nb:
            return na < nb
        return self.inv[a] < self.inv[b]

    cdef void sift_up(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t parent, t
        while i > 0:
            parent = (i - 1) // 2
            if self.less(self.heap[i], self.heap[parent]):
                t = self.heap[i]; self.heap[i] = self.heap[parent]; self.heap[parent] = t
                i = parent
            else:
                break

    cdef void sift_down(self, Py_ssize_t size) noexcept:
        cdef Py_ssize_t i = 0, child, t
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            if child + 1 < size and self.less(self.heap[child + 1], self.heap[child]):
                child += 1
            if self.less(self.heap[child], self.heap[i]):
                t = self.heap[i]; self.heap[i] = self.heap[child]; self.heap[child] = t
                i = child
            else:
                break
