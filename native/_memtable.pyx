# cython: language_level=3
"""Native batch checking and imm merging; twin of ``hummock/_memtable_py.py`` (same names, same
errors and messages, identical output).

The key and value lists ``check_batch`` and ``check_columns`` return -- an imm's lists, kept in
the shared buffer until they are flushed -- are untracked by CPython's cycle collector
(:func:`_untrack`): they hold only exact ``bytes`` and ``None``, which reference nothing, so
they cannot be part of a cycle (bytes-like keys and values are copied into exact bytes through a
memoryview: ``bytes(x)`` of a subclass whose ``__bytes__`` returns itself gives that instance,
which may reference anything), and a full collection then does not visit each of their items
(every item visit reads the item's header: one cache miss per entry; the 1:n join's imms of
~77k entries made full collections take ~80 ms each, 13 % of the run). The twin cannot untrack from Python;
nothing else differs. The lists must stay as they are (imms are never mutated): an untracked
list that later held a container would hide it from the collector.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import numpy as np

from hummock.errors import InvalidArgumentError

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object)

DEF ENTRY_OVERHEAD = 96   # = hummock/_memtable_py.py ENTRY_OVERHEAD (what CPython spends per entry)


cdef inline int cmp_bytes(bytes a, bytes b) noexcept:
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b)
    cdef int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), na if na < nb else nb)
    if c:
        return c
    return (na > nb) - (na < nb)


cdef inline bytes _entry_key(object key, Py_ssize_t i):
    """Batch item ``i``'s key as bytes; the twin's error."""
    if type(key) is not bytes:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"batch item {i}: key must be bytes, got {type(key).__name__}")
        key = bytes(memoryview(key))   # exact bytes: bytes() of a subclass whose __bytes__ returns
        #                                itself gives that instance, which merge_runs refuses
    return <bytes>key


cdef inline int _check_after(bytes k, bytes previous, Py_ssize_t i) except -1:
    """Batch item ``i``'s key ``k`` is above ``previous`` (None: the first); the twin's errors."""
    cdef int c
    if previous is not None:
        c = cmp_bytes(k, previous)
        if c <= 0:
            raise InvalidArgumentError(
                f"batch item {i}: {'duplicate key' if c == 0 else 'keys not sorted ascending'}")
    return 0


cdef inline object _entry_value(object value, Py_ssize_t i):
    """Batch item ``i``'s value as bytes or None; the twin's error."""
    if value is not None and type(value) is not bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"batch item {i}: value must be bytes or None, got {type(value).__name__}")
        value = bytes(memoryview(value))
    return value


def check_batch(kv_pairs):
    """Validate an ingest batch; return ``(keys, values, size_in_bytes)`` (see the twin)."""
    cdef list keys = [], values = []
    cdef Py_ssize_t size = 0, i = 0
    cdef bytes previous = None, k
    try:
        kv_pairs = iter(kv_pairs)
    except TypeError:
        raise InvalidArgumentError(
            f"a batch must be an iterable of (key, value) pairs, got {type(kv_pairs).__name__}") from None
    for pair in kv_pairs:
        if type(pair) is tuple and len(<tuple>pair) == 2:
            key = (<tuple>pair)[0]
            value = (<tuple>pair)[1]
        else:
            try:
                key, value = pair
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"batch item {i} is not a (key, value) pair") from None
        k = _entry_key(key, i)
        value = _entry_value(value, i)
        _check_after(k, previous, i)
        previous = k
        keys.append(k)
        values.append(value)
        size += PyBytes_GET_SIZE(k) + (PyBytes_GET_SIZE(value) if value is not None else 0) + ENTRY_OVERHEAD
        i += 1
    _untrack(keys)
    _untrack(values)
    return keys, values, size


cdef inline void _untrack(list checked) noexcept:
    """Stop the cycle collector from traversing ``checked``, a new list of exact bytes and
    ``None`` only (module docstring). Idempotent; the list is freed by reference counting as ever."""
    PyObject_GC_UnTrack(checked)


@cython.boundscheck(False)
@cython.wraparound(False)
def check_columns(keys, values):
    """``check_batch(zip(keys, values))`` of two lists, with no pair per entry (see the twin)."""
    cdef list ks, vs, out_keys, out_values
    cdef Py_ssize_t n, i, size = 0
    cdef bytes previous = None, k
    if not isinstance(keys, list) or not isinstance(values, list):
        raise InvalidArgumentError(f"keys and values must be lists, got {type(keys).__name__} "
                                   f"and {type(values).__name__}")
    ks, vs = <list>keys, <list>values
    n = len(ks)
    if len(vs) != n:
        raise InvalidArgumentError(f"{n} keys but {len(vs)} values")
    out_keys = [None] * n
    out_values = [None] * n
    for i in range(n):
        key = ks[i]
        value = vs[i]
        k = _entry_key(key, i)
        value = _entry_value(value, i)
        _check_after(k, previous, i)
        previous = k
        out_keys[i] = k
        out_values[i] = value
        size += PyBytes_GET_SIZE(k) + (PyBytes_GET_SIZE(value) if value is not None else 0) + ENTRY_OVERHEAD
    _untrack(out_keys)
    _untrack(out_values)
    return out_keys, out_values, size


def check_packed(keys, width, values, offsets):
    """See the twin's docstring (same checks, messages and result)."""
    cdef Py_ssize_t w, n, i, kn, vn
    cdef const int64_t[::1] offs
    cdef const unsigned char* kp
    cdef int c
    if type(keys) is not bytes or type(values) is not bytes:
        raise InvalidArgumentError(f"packed keys and values must be bytes, got {type(keys).__name__} "
                                   f"and {type(values).__name__}")
    kn = PyBytes_GET_SIZE(keys)
    vn = PyBytes_GET_SIZE(values)
    if type(width) is not int or width < 1 or kn % width:   # Python ints: a huge width is refused, not overflowed
        raise InvalidArgumentError(f"{kn} key bytes are not keys of {width!r:.20} bytes")
    n = kn // width
    w = width if n else 1
    if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
        raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array")
    if offsets.shape[0] != n + 1:
        raise InvalidArgumentError(f"{offsets.shape[0]} value offsets for {n} keys")
    offs = np.ascontiguousarray(offsets)
    if offs[0] != 0 or offs[n] != vn:
        raise InvalidArgumentError(f"value offsets must rise from 0 to {vn}")
    for i in range(n):
        if offs[i + 1] < offs[i]:
            raise InvalidArgumentError(f"value offsets must rise from 0 to {vn}")
    kp = <const unsigned char*>PyBytes_AS_STRING(keys)
    for i in range(1, n):
        c = memcmp(kp + i * w, kp + (i - 1) * w, <size_t>w)
        if c <= 0:
            raise InvalidArgumentError(f"batch item {i}: {'duplicate key' if c == 0 else 'keys not sorted ascending'}")
    return kn + vn + ENTRY_OVERHEAD * n


def split_packed(bytes keys, Py_ssize_t width, bytes values, offsets):
    """See the twin's docstring; bounds checked again (the batch may be any caller's)."""
    cdef const int64_t[::1] offs = offsets
    cdef Py_ssize_t n, i, lo, hi, vn = PyBytes_GET_SIZE(values)
    cdef const char* kp = PyBytes_AS_STRING(keys)
    cdef const char* vp = PyBytes_AS_STRING(values)
    cdef list out_keys, out_values
    if width < 1 or PyBytes_GET_SIZE(keys) % width:
        raise InvalidArgumentError(f"{PyBytes_GET_SIZE(keys)} key bytes are not keys of {width} bytes")
    n = PyBytes_GET_SIZE(keys) // width
    if offs.shape[0] != n + 1:
        raise InvalidArgumentError(f"{offs.shape[0]} value offsets for {n} keys")
    out_keys = [None] * n
    out_values = [None] * n
    for i in range(n):
        lo = <Py_ssize_t>offs[i]
        hi = <Py_ssize_t>offs[i + 1]
        if lo < 0 or hi < lo or hi > vn:
            raise InvalidArgumentError(f"value {i} spans [{lo}, {hi}), outside [0, {vn}]")
        out_keys[i] = PyBytes_FromStringAndSize(kp + i * width, width)
        out_values[i] = PyBytes_FromStringAndSize(vp + lo, hi - lo)
    _untrack(out_keys)
    _untrack(out_values)
    return out_keys, out_values


@cython.boundscheck(False)
def merge_runs(bytes prefix, runs):
    """Merge ``(versioned_epoch, keys, values)`` runs of one table into ``(full_keys, values)``
    in full-key order (see the twin). Runs with disjoint key ranges (sequential writes) are just
    concatenated; otherwise a loser tree of runs (about log2(k) comparisons per entry) keeps each
    run's head key as a C pointer and length, so comparisons touch no Python object."""
    cdef list run_list = list(runs)
    cdef Py_ssize_t n = len(run_list), i, top, total = 0
    cdef _Runs r
    cdef list keys_of = [], values_of = []
    cdef list out_keys, out_values
    cdef bytes full
    cdef char* w
    cdef Py_ssize_t kn, j
    cdef uint64_t inv
    if PyBytes_GET_SIZE(prefix) != 4:
        raise InvalidArgumentError("prefix must be the 4-byte table id")
    if n == 0:
        return [], []
    r = _Runs(n)
    for i in range(n):
        epoch, ks, vs = run_list[i]
        if type(ks) is not list:   # an imm's lists: no copy on the concatenating path (below)
            ks = list(ks)
        if type(vs) is not list:
            vs = list(vs)
        if len(ks) != len(vs):
            _check_key_types(keys_of)   # an earlier run's bad key is reported first, as the twin does
            raise InvalidArgumentError("a run's keys and values differ in length")
        if ks and (type((<list>ks)[0]) is not bytes or type((<list>ks)[len(<list>ks) - 1]) is not bytes):
            raise InvalidArgumentError("run keys must be bytes")
        keys_of.append(ks)
        values_of.append(vs)
        r.inv[i] = ~(<uint64_t>epoch)   # 2**64-1 - epoch in C
        r.pos[i] = 0
        r.length[i] = len(ks)
        r.done[i] = r.length[i] == 0
        total += r.length[i]
    out_keys = [None] * total
    out_values = [None] * total
    order = disjoint_order(keys_of)   # (reads each run's first and last key: checked above)
    if order is not None:   # e.g. sequential batches: concatenate, no comparisons
        j = 0
        for i in order:
            ks = <list>keys_of[i]
            vs = <list>values_of[i]
            inv = r.inv[i]
            with cython.boundscheck(True):   # the caller's lists: every index checked
                for top in range(len(ks)):
                    k = (<list>ks)[top]
                    if type(k) is not bytes:   # checked as it is read: one pass over the keys
                        raise InvalidArgumentError("run keys must be bytes")
                    out_keys[j] = full_key(prefix, <bytes>k, inv)
                    out_values[j] = (<list>vs)[top]
                    j += 1
        return out_keys, out_values
    # the loser tree keeps C pointers into the keys: its own lists hold them, all checked first
    keys_of = [list(ks) for ks in keys_of]
    values_of = [list(vs) for vs in values_of]
    _check_key_types(keys_of)
    for i in range(n):
        if not r.done[i]:
            r.load_head(i, <list>keys_of[i])
    r.build()
    for j in range(total):
        top = r.tree[0]
        kn = r.head_len[top]
        full = PyBytes_FromStringAndSize(NULL, kn + 12)
        w = PyBytes_AS_STRING(full)
        memcpy(w, PyBytes_AS_STRING(prefix), 4)
        memcpy(w + 4, r.head[top], kn)
        inv = r.inv[top]
        for i in range(8):
            w[4 + kn + i] = <char>((inv >> (8 * (7 - i))) & 0xFF)
        out_keys[j] = full
        out_values[j] = (<list>values_of[top])[r.pos[top]]
        r.pos[top] += 1
        if r.pos[top] >= r.length[top]:
            r.done[top] = True
        else:
            r.load_head(top, <list>keys_of[top])
        r.replay(top)
    return out_keys, out_values


cdef int _check_key_types(list keys_of) except -1:
    """The twin's error unless every key of every run in ``keys_of`` is bytes."""
    for ks in keys_of:
        for k in <list>ks:
            if type(k) is not bytes:
                raise InvalidArgumentError("run keys must be bytes")
    return 0


cdef object disjoint_order(list keys_of):
    """The non-empty runs' indexes in key order if their key ranges are disjoint (each run's last
    key below the next run's first key), else ``None``."""
    cdef list order = sorted([i for i in range(len(keys_of)) if keys_of[i]], key=lambda i: keys_of[i][0])
    cdef Py_ssize_t a
    cdef list before, after
    for a in range(1, len(order)):
        before, after = <list>keys_of[order[a - 1]], <list>keys_of[order[a]]
        if cmp_bytes(<bytes>before[len(before) - 1], <bytes>after[0]) >= 0:
            return None
    return order


cdef inline bytes full_key(bytes prefix, bytes key, uint64_t inv):
    """``prefix`` (table id) | ``key`` | ``inv`` big-endian (the inverted epoch)."""
    cdef Py_ssize_t kn = PyBytes_GET_SIZE(key), i
    cdef bytes full = PyBytes_FromStringAndSize(NULL, kn + 12)
    cdef char* w = PyBytes_AS_STRING(full)
    memcpy(w, PyBytes_AS_STRING(prefix), 4)
    memcpy(w + 4, PyBytes_AS_STRING(key), kn)
    for i in range(8):
        w[4 + kn + i] = <char>((inv >> (8 * (7 - i))) & 0xFF)
    return full


@cython.final
cdef class _Runs:
    """C arrays describing the runs being merged, and their loser tree (freed with the object).
    ``tree[0]`` is the current winner; ``tree[1..k-1]`` hold the loser of each internal node;
    run ``i`` is the leaf at position ``k + i``. Exhausted runs lose to every other run."""
    cdef Py_ssize_t k
    cdef Py_ssize_t* pos
    cdef Py_ssize_t* length
    cdef Py_ssize_t* tree
    cdef uint64_t* inv
    cdef const char** head
    cdef Py_ssize_t* head_len
    cdef bint* done

    def __cinit__(self, Py_ssize_t n):
        self.k = n
        n += 1
        self.pos = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.length = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.tree = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.inv = <uint64_t*>malloc(n * sizeof(uint64_t))
        self.head = <const char**>malloc(n * sizeof(const char*))
        self.head_len = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.done = <bint*>malloc(n * sizeof(bint))
        if not (self.pos and self.length and self.tree and self.inv and self.head and self.head_len and self.done):
            raise MemoryError()

    def __dealloc__(self):
        free(self.pos); free(self.length); free(self.tree); free(self.inv); free(self.head)
        free(self.head_len); free(self.done)

    cdef inline void load_head(self, Py_ssize_t i, list keys) noexcept:
        cdef bytes k = <bytes>keys[self.pos[i]]
        self.head[i] = PyBytes_AS_STRING(k)
        self.head_len[i] = PyBytes_GET_SIZE(k)

    cdef inline bint less(self, Py_ssize_t a, Py_ssize_t b) noexcept:
        """Run a's head sorts before run b's: table key ascending, then epoch descending."""
        cdef Py_ssize_t na, nb
        cdef int c
        if self.done[a]:
            return False
        if self.done[b]:
            return True
        na = self.head_len[a]
        nb = self.head_len[b]
        c = memcmp(self.head[a], self.head[b], na if na < nb else nb)
        if c:
            return c < 0
        if na != nb:
            return na < nb
        return self.inv[a] < self.inv[b]

    cdef void build(self) noexcept:
        cdef Py_ssize_t i, node, winner, t
        for i in range(self.k):
            self.tree[i] = -1
        for i in range(self.k):
            winner = i
            node = (i + self.k) // 2
            while node >= 1:
                if self.tree[node] == -1:
                    self.tree[node] = winner   # the first player to arrive waits here
                    winner = -1
                    break
                if self.less(self.tree[node], winner):
                    t = self.tree[node]; self.tree[node] = winner; winner = t
                node //= 2
            if winner != -1:
                self.tree[0] = winner

    cdef inline void replay(self, Py_ssize_t run) noexcept:
        cdef Py_ssize_t node = (run + self.k) // 2, t, winner = run
        while node >= 1:
            if self.less(self.tree[node], winner):
                t = self.tree[node]; self.tree[node] = winner; winner = t
            node //= 2
        self.tree[0] = winner
