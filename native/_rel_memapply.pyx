# cython: language_level=3, boundscheck=True, wraparound=False
"""Native chunk merge of the MemTable; twin of ``relational/_rel_memapply_py.py`` (the reference:
same name, results and exceptions; see its docstring for the contract and the record format).

The same loop as the twin with typed locals: dictionary reads through the C API, records built
with ``PyTuple_Pack``-style tuple literals, no per-operation Python calls unless an operation
is refused (``error`` is called once, then its exception raised).

Safety: the three lists' lengths are checked before the loop, every key and value is checked to
be ``bytes`` before its length is read, and every record read from the dictionaries is checked
to be a 3-tuple before it is unpacked.

Garbage collector: the records it builds hold only an int, bytes and None, which cannot form a
reference cycle, so they are untracked at once (what the collector itself does to such tuples
at its next pass); a MemTable whose records are all untracked stays an untracked dict, which
the collector never traverses (an epoch's MemTable holds tens of thousands of records).

Callers: :meth:`relational.mem_table.MemTable.apply`, ``insert_many``, ``unrecorded``
(``probe_keys``), ``columns`` (``merge_insert_runs``, ``sorted_news``) and
``records_with_prefixes`` (``PrefixIndex``) only, through ``hummock._twins.load``.
"""

cimport cython

DEF RECORD_OVERHEAD = 192   # = relational/_rel_memapply_py.py RECORD_OVERHEAD
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy
from cpython.dict cimport PyDict_DelItem, PyDict_GetItem, PyDict_Next
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM

from native._keysort cimport KeyRef, sort_key_refs
from native._xxh64 cimport xxh64

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)
    PyObject* PyDict_SetDefault(object d, object key, object defaultobj)


cdef inline tuple _record(object op, object old, object new):
    """An ``(op, old, new)`` record, untracked when it holds only an int, bytes and None (module
    docstring, "Garbage collector")."""
    cdef tuple t = (op, old, new)
    if (type(op) is int and (old is None or type(old) is bytes) and (new is None or type(new) is bytes)):
        PyObject_GC_UnTrack(<void*>t)
    return t

INSERT, DELETE, UPDATE = 1, 2, 3
cdef object _INSERT = 1, _DELETE = 2, _UPDATE = 3


cdef inline tuple _check_record(object rec):
    if type(rec) is not tuple or len(<tuple>rec) != 3:
        raise ValueError(f"a MemTable record is an (op, old, new) tuple, got {rec!r:.80}")
    return <tuple>rec


def merge_ops(records, inserts, keys, values, stored, consistent, error):
    """See the twin's docstring."""
    if type(records) is not dict or not (stored is None or type(stored) is dict):
        raise TypeError(f"records and stored are dicts, got {type(records).__name__} and {type(stored).__name__}")
    return _merge(<dict>records, list(inserts), list(keys), list(values), {} if stored is None else <dict>stored,
                  bool(consistent), error)


cdef tuple _merge(dict records, list ins, list ks, list vs, dict st, bint consistent, error):
    cdef Py_ssize_t n = len(ks), i, added = 0
    cdef dict overlay = {}
    cdef PyObject* p
    cdef object key, value, rec, found, op, old, cur
    cdef tuple t
    cdef bint is_insert
    if len(ins) != n or len(vs) != n:
        raise ValueError(f"inserts, keys and values differ in length: {len(ins)}, {n}, {len(vs)}")
    for i in range(n):
        key = ks[i]
        value = vs[i]
        if type(key) is not bytes or type(value) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(key).__name__} and {type(value).__name__}")
        is_insert = bool(ins[i])
        p = PyDict_GetItem(overlay, key)
        if p == NULL:
            p = PyDict_GetItem(records, key)
        rec = None if p == NULL else <object>p
        if rec is None:
            if consistent:
                p = PyDict_GetItem(st, key)
                found = None if p == NULL else <object>p
                if is_insert:
                    if found is not None:
                        raise error("insert of a pk that already has a row", key)
                elif found is None:
                    raise error("delete of a pk that has no row", key)
                elif found != value:
                    raise error("delete whose old row is not the stored row", key)
            if is_insert:
                overlay[key] = _record(_INSERT, None, value)
            else:
                overlay[key] = _record(_DELETE, value, None)
            added += PyBytes_GET_SIZE(key) + PyBytes_GET_SIZE(value) + RECORD_OVERHEAD
            continue
        t = _check_record(rec)
        op, old, cur = t[0], t[1], t[2]
        if is_insert:
            if op == _DELETE:
                overlay[key] = _record(_UPDATE, old, value)
            elif consistent:
                raise error("insert of a pk that already has a row", key)
            else:
                overlay[key] = _record(op, old, value)
        elif op == _DELETE:
            if consistent:
                raise error("delete of a pk that has no row", key)
            overlay[key] = rec
        elif consistent and cur != value:
            raise error("delete whose old row is not the current row", key)
        elif op == _INSERT:
            overlay[key] = None if consistent else _record(_DELETE, cur, None)
        else:
            overlay[key] = _record(_DELETE, old, None)
    gone = [k for k, r in overlay.items() if r is None]
    for k in gone:
        del overlay[k]
    return overlay, gone, added


def insert_new(records, keys, values):
    """See the twin's docstring: ``records[k] = (INSERT, None, v)`` for each pair, untracked."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    cdef list ks = list(keys), vs = list(values)
    cdef Py_ssize_t n = len(ks), i
    cdef dict d = <dict>records
    if len(vs) != n:
        raise ValueError(f"keys and values differ in length: {n}, {len(vs)}")
    for i in range(n):
        if type(ks[i]) is not bytes or type(vs[i]) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(ks[i]).__name__} and {type(vs[i]).__name__}")
    for i in range(n):
        d[ks[i]] = _record(_INSERT, None, vs[i])


def insert_absent(records, keys, values):
    """See the twin. One dict probe a key (``PyDict_SetDefault``) where a check of every key
    and then ``insert_new`` took two: a key found with a record stops the run, and the keys
    this call added are deleted again (they were absent, so nothing else changed)."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    cdef list ks = list(keys), vs = list(values)
    cdef Py_ssize_t n = len(ks), i, j
    cdef dict d = <dict>records
    cdef tuple rec
    cdef PyObject* got
    if len(vs) != n:
        raise ValueError(f"keys and values differ in length: {n}, {len(vs)}")
    for i in range(n):
        if type(ks[i]) is not bytes or type(vs[i]) is not bytes:
            raise TypeError(f"keys and values are bytes, got {type(ks[i]).__name__} and {type(vs[i]).__name__}")
    for i in range(n):
        rec = _record(_INSERT, None, vs[i])
        got = PyDict_SetDefault(d, ks[i], rec)
        if got == NULL or got != <PyObject*>rec:   # a MemoryError, or the key had a record
            for j in range(i):
                PyDict_DelItem(d, ks[j])
            if got == NULL:
                raise MemoryError()
            return False
    return True


def probe_keys(records, keys):
    """See the twin's docstring. Keys that ascend (a sorted chunk's) are deduplicated by
    comparing neighbours; otherwise a set remembers the keys seen."""
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    cdef list ks = list(keys), out = []
    cdef Py_ssize_t n = len(ks), i
    cdef dict d = <dict>records
    cdef bint ascending = True
    cdef object key, prev = None
    cdef set seen
    for i in range(n):
        key = ks[i]
        if type(key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(key).__name__}")
        if ascending and prev is not None and <bytes>prev > <bytes>key:
            ascending = False
        prev = key
    if ascending:
        prev = None
        for i in range(n):
            key = ks[i]
            if prev is not None and PyBytes_GET_SIZE(<bytes>prev) == PyBytes_GET_SIZE(<bytes>key) and \
                    memcmp(PyBytes_AS_STRING(<bytes>prev), PyBytes_AS_STRING(<bytes>key),
                           <size_t>PyBytes_GET_SIZE(<bytes>key)) == 0:
                continue
            prev = key
            if PyDict_GetItem(d, key) == NULL:
                out.append(key)
        return out
    seen = set()
    for i in range(n):
        key = ks[i]
        if key in seen:
            continue
        seen.add(key)
        if PyDict_GetItem(d, key) == NULL:
            out.append(key)
    return out


cdef struct _KRef:
    const unsigned char* p
    Py_ssize_t n
    Py_ssize_t src      # index into the flat key and value lists


cdef inline int _kcmp(const _KRef* a, const _KRef* b) noexcept nogil:
    cdef Py_ssize_t m = a.n if a.n < b.n else b.n
    cdef int c = memcmp(a.p, b.p, <size_t>m)
    if c:
        return c
    return (a.n > b.n) - (a.n < b.n)


def merge_insert_runs(runs):
    """See the twin's docstring. Runs are merged pairwise in C (about log2(runs) passes over
    C references to the keys; equal keys keep run order), then the last of each equal key --
    the latest run's -- is emitted. Every key and value is checked to be bytes and every run to
    ascend before any pointer is taken."""
    cdef list flat_keys = [], flat_values = [], bounds = [0]
    cdef Py_ssize_t n, i, j, k, nseg, lo, mid, hi, a, b, out_pos
    cdef _KRef* cur = NULL
    cdef _KRef* nxt = NULL
    cdef _KRef* tmp
    cdef Py_ssize_t* seg = NULL
    cdef bytes key, prev
    for keys, values in runs:
        ks, vs = list(keys), list(values)
        if len(ks) != len(vs):
            raise ValueError(f"a run's keys and values differ in length: {len(ks)}, {len(vs)}")
        prev = None
        for i in range(len(ks)):
            if type(ks[i]) is not bytes or type(vs[i]) is not bytes:
                raise TypeError(f"keys and values are bytes, got {type(ks[i]).__name__} and {type(vs[i]).__name__}")
            key = <bytes>ks[i]
            if prev is not None and prev >= key:
                raise ValueError(f"a run's keys must strictly ascend (at {i})")
            prev = key
        flat_keys.extend(ks)
        flat_values.extend(vs)
        bounds.append(len(flat_keys))
    n = len(flat_keys)
    nseg = len(bounds) - 1
    if nseg <= 1:
        return flat_keys, flat_values
    try:
        cur = <_KRef*>malloc(n * sizeof(_KRef))
        nxt = <_KRef*>malloc(n * sizeof(_KRef))
        seg = <Py_ssize_t*>malloc((nseg + 1) * sizeof(Py_ssize_t))
        if cur == NULL or nxt == NULL or seg == NULL:
            raise MemoryError()
        for i in range(n):
            key = <bytes>flat_keys[i]
            cur[i].p = <const unsigned char*>PyBytes_AS_STRING(key)
            cur[i].n = PyBytes_GET_SIZE(key)
            cur[i].src = i
        for i in range(nseg + 1):
            seg[i] = bounds[i]
        while nseg > 1:                      # merge segments 2j and 2j+1 into j
            k = 0
            for j in range(0, nseg, 2):
                lo = seg[j]
                if j + 1 >= nseg:            # an odd last segment is copied
                    hi = seg[j + 1]
                    memcpy(&nxt[lo], &cur[lo], <size_t>(hi - lo) * sizeof(_KRef))
                    seg[k] = lo
                    k += 1
                    continue
                mid, hi = seg[j + 1], seg[j + 2]
                a, b, out_pos = lo, mid, lo
                while a < mid and b < hi:
                    if _kcmp(&cur[b], &cur[a]) < 0:   # ties take the earlier run first
                        nxt[out_pos] = cur[b]
                        b += 1
                    else:
                        nxt[out_pos] = cur[a]
                        a += 1
                    out_pos += 1
                while a < mid:
                    nxt[out_pos] = cur[a]
                    a += 1
                    out_pos += 1
                while b < hi:
                    nxt[out_pos] = cur[b]
                    b += 1
                    out_pos += 1
                seg[k] = lo
                k += 1
            seg[k] = n
            nseg = k
            tmp = cur
            cur = nxt
            nxt = tmp
        out_keys, out_values = [], []
        for i in range(n):
            if i + 1 < n and _kcmp(&cur[i], &cur[i + 1]) == 0:
                continue                     # a later run wrote this key too
            out_keys.append(flat_keys[cur[i].src])
            out_values.append(flat_values[cur[i].src])
        return out_keys, out_values
    finally:
        free(cur)
        free(nxt)
        free(seg)


def sorted_news(records):
    """See the twin. The keys are sorted in C (``_keysort.pxd``: 8-byte heads after the common
    prefix), and each record's new value is taken in the dict's own order before the sort, so
    the records are read sequentially and only the output is gathered by position. Everything
    is checked before any pointer is taken, and no Python code runs from then on until the
    output lists hold their references, so the dict cannot change underneath."""
    cdef dict d
    cdef Py_ssize_t pos = 0, n, i = 0, at
    cdef PyObject* key
    cdef PyObject* rec
    cdef KeyRef* refs = NULL
    cdef PyObject** objs = NULL      # per dict position: its key, then its new value
    cdef list out_keys, out_news
    if type(records) is not dict:
        raise TypeError(f"records is a dict, got {type(records).__name__}")
    d = <dict>records
    while PyDict_Next(d, &pos, &key, &rec):
        if type(<object>key) is not bytes:
            raise TypeError(f"keys are bytes, got {type(<object>key).__name__}")
        _check_record(<object>rec)
    n = len(d)
    refs = <KeyRef*>malloc((n if n else 1) * sizeof(KeyRef))
    objs = <PyObject**>malloc((2 * n if n else 1) * sizeof(PyObject*))
    try:
        if refs == NULL or objs == NULL:
            raise MemoryError()
        pos = 0
        while PyDict_Next(d, &pos, &key, &rec):
            refs[i].p = <const unsigned char*>PyBytes_AS_STRING(<object>key)
            refs[i].n = PyBytes_GET_SIZE(<object>key)
            refs[i].i = i
            objs[2 * i] = key                                   # borrowed: the dict holds both
            objs[2 * i + 1] = PyTuple_GET_ITEM(<object>rec, 2)
            i += 1
        sort_key_refs(refs, n)
        out_keys = PyList_New(n)
        out_news = PyList_New(n)
        for i in range(n):
            at = 2 * refs[i].i
            Py_INCREF(<object>objs[at])
            PyList_SET_ITEM(out_keys, i, <object>objs[at])
            Py_INCREF(<object>objs[at + 1])
            PyList_SET_ITEM(out_news, i, <object>objs[at + 1])
        return out_keys, out_news
    finally:
        free(refs)
        free(objs)


cdef class PrefixIndex:
    """See the twin. The keys are kept in a list (in the order added); per entry the xxh64 of
    its prefix (``key[:prefix_len]``) and the next entry of its chain, in C arrays, with a
    table of chain heads by hash (power-of-two size, at least the number of entries): an add
    is one hash and three stores, no ``bytes`` object for the prefix and no dict insert. A
    lookup walks one chain and compares each hash-equal entry's prefix bytes."""
    cdef readonly Py_ssize_t prefix_len
    cdef list _keys
    cdef uint64_t* _hashes
    cdef int64_t* _next
    cdef int64_t* _heads
    cdef Py_ssize_t _n, _cap
    cdef uint64_t _mask

    def __cinit__(self, prefix_len):
        if type(prefix_len) is not int or prefix_len < 0:
            raise ValueError(f"prefix_len is an int >= 0, got {prefix_len!r}")
        self.prefix_len = prefix_len
        self._keys = []
        self._n = 0
        self._cap = 0
        self._hashes = NULL
        self._next = NULL
        self._heads = NULL
        self._resize(64)

    def __dealloc__(self):
        free(self._hashes)
        free(self._next)
        free(self._heads)

    cdef int _resize(self, Py_ssize_t cap) except -1:
        """Room for ``cap`` entries and a head table of ``cap`` slots, the chains rebuilt."""
        cdef uint64_t* hashes = <uint64_t*>realloc(self._hashes, cap * sizeof(uint64_t))
        if hashes == NULL:
            raise MemoryError()
        self._hashes = hashes
        cdef int64_t* nxt = <int64_t*>realloc(self._next, cap * sizeof(int64_t))
        if nxt == NULL:
            raise MemoryError()
        self._next = nxt
        cdef int64_t* heads = <int64_t*>malloc(cap * sizeof(int64_t))
        if heads == NULL:
            raise MemoryError()
        free(self._heads)
        self._heads = heads
        self._cap = cap
        self._mask = <uint64_t>(cap - 1)
        cdef Py_ssize_t i
        cdef uint64_t b
        for i in range(cap):
            heads[i] = -1
        for i in range(self._n):
            b = hashes[i] & self._mask
            nxt[i] = heads[b]
            heads[b] = i
        return 0

    def add(self, keys):
        """See the twin."""
        cdef list ks = list(keys)
        cdef Py_ssize_t n = len(ks), i, at, plen = self.prefix_len, kn
        cdef uint64_t h, b
        cdef object key
        for i in range(n):
            if type(ks[i]) is not bytes:
                raise TypeError(f"MemTable keys must be bytes, got {type(ks[i]).__name__}")
        if self._n + n > self._cap:
            at = self._cap
            while self._n + n > at:
                at *= 2
            self._resize(at)
        for i in range(n):
            key = ks[i]
            kn = PyBytes_GET_SIZE(<bytes>key)
            if kn > plen:
                kn = plen
            h = xxh64(<const uint8_t*>PyBytes_AS_STRING(<bytes>key), <size_t>kn, 0)
            at = self._n
            self._hashes[at] = h
            b = h & self._mask
            self._next[at] = self._heads[b]
            self._heads[b] = at
            self._n = at + 1
        self._keys.extend(ks)

    cdef list _find(self, bytes prefix):
        """The keys added under ``prefix`` (may repeat, newest first), or None for none."""
        cdef Py_ssize_t pn = PyBytes_GET_SIZE(prefix), kn, plen = self.prefix_len
        cdef const char* pp = PyBytes_AS_STRING(prefix)
        cdef uint64_t h
        cdef int64_t i
        cdef object key
        cdef list found = None
        if pn > plen:
            return None
        h = xxh64(<const uint8_t*>pp, <size_t>pn, 0)
        i = self._heads[h & self._mask]
        while i >= 0:
            if self._hashes[i] == h:
                key = <object>PyList_GET_ITEM(self._keys, i)
                kn = PyBytes_GET_SIZE(<bytes>key)
                if kn > plen:
                    kn = plen
                if kn == pn and memcmp(PyBytes_AS_STRING(<bytes>key), pp, <size_t>pn) == 0:
                    if found is None:
                        found = [key]
                    else:
                        found.append(key)
            i = self._next[i]
        return found

    def find(self, prefix):
        """See the twin."""
        if type(prefix) is not bytes:
            raise TypeError(f"a key prefix is bytes, got {type(prefix).__name__}")
        found = self._find(<bytes>prefix)
        return [] if found is None else sorted(set(found))

    def records(self, records, prefixes):
        """See the twin."""
        if type(records) is not dict:
            raise TypeError(f"records is a dict, got {type(records).__name__}")
        cdef dict d = <dict>records
        cdef list out = [], found, found_list
        cdef PyObject* record
        for prefix in prefixes:
            if type(prefix) is not bytes:
                raise TypeError(f"a key prefix is bytes, got {type(prefix).__name__}")
            found = self._find(<bytes>prefix)
            if found is None:
                out.append(None)
            elif len(found) == 1:
                record = PyDict_GetItem(d, found[0])
                out.append(None if record == NULL else [(found[0], <object>record)])
            else:
                found_list = []
                for key in sorted(set(found)):
                    record = PyDict_GetItem(d, key)
                    if record != NULL:
                        found_list.append((key, <object>record))
                out.append(found_list or None)
        return out
