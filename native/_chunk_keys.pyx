# cython: language_level=3, boundscheck=True, wraparound=False
"""Native chunk keys: a chunk's table keys from integer pk columns, sorted, in one call; twin of
``relational/_chunk_keys_py.py`` (the reference: same name, results and exceptions; see its
docstring for the contract and the key layout).

One pass writes every row's key into one C buffer (vnode, then per column the tag and the
big-endian value with its sign bit flipped, inverted when descending), a sort of row
references by the keys' bytes and then by row number (so the sort is stable;
``native/_keysort.pxd``) -- skipped when one pass finds the keys already in order, as an
``APPEND ONLY`` table's increasing row ids are (the sort's ~log2(n) comparisons per row were
half the call); else a counting sort by vnode first, after which each vnode's rows are usually
in order already (a pk that grows along the chunk, spread over vnodes by its hash: q1's MV
keyed by row id), so the comparison sort runs only on the vnodes that need it -- then one ``bytes`` object per key in that order (``sorted_int_keys``) or one
``bytes`` object of all the keys back to back (``sorted_int_key_buffer``, the packed insert path). It replaces a dozen
numpy/Arrow calls per chunk (the key matrix, an Arrow binary array, ``lexsort``, ``take``,
``to_pylist``).

Safety: the arguments are checked exactly as the twin checks them (``check_args``: dtypes,
dimensions, lengths, widths, value ranges) before any buffer is read; the key buffer is sized
``n * width`` with the width computed from the checked widths, and every write stays inside the
row's slot.

Callers: :meth:`relational.row_serde.RowSerde.encode_chunk` only, through ``hummock._twins.load``.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t, uint16_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy

from native._keycmp cimport HUMMOCK_LOAD_BE64
from native._keysort cimport KeyRef, sort_key_refs

import numpy as np

from relational._chunk_keys_py import check_args

cdef bint _in_order(const unsigned char* buf, Py_ssize_t n, Py_ssize_t width) noexcept:
    """Whether the ``n`` keys of ``width`` bytes in ``buf`` never decrease: the stable sort
    would then keep every row where it is (equal keys stay in row order)."""
    cdef Py_ssize_t i
    for i in range(1, n):
        if memcmp(buf + (i - 1) * width, buf + i * width, <size_t>width) > 0:
            return False
    return True


cdef int _sort_rows(KeyRef* rows, Py_ssize_t n, const uint16_t[::1] vn) except -1:
    """Put ``rows`` (built in row order; each key starts with its row's big-endian vnode) in
    ``sort_key_refs`` order: a stable counting sort by vnode, then each vnode's rows by their
    keys -- a pass finds them already in order when the pk grows along the chunk (row ids, a
    time), so no comparison sort runs at all. Same result as ``sort_key_refs`` over all rows
    (bytes, then row number: the vnode is the keys' first two bytes, and the counting sort
    keeps row order within a vnode). Small chunks go to ``sort_key_refs`` directly."""
    cdef Py_ssize_t i, v, top = 0, start, end
    cdef Py_ssize_t* starts = NULL
    cdef KeyRef* sorted_rows = NULL
    if n < 256:
        sort_key_refs(rows, n)
        return 0
    for i in range(n):
        if vn[i] > top:
            top = vn[i]
    try:
        starts = <Py_ssize_t*>calloc(<size_t>(top + 2), sizeof(Py_ssize_t))
        sorted_rows = <KeyRef*>malloc(<size_t>n * sizeof(KeyRef))
        if starts == NULL or sorted_rows == NULL:
            raise MemoryError()
        for i in range(n):
            starts[vn[i] + 1] += 1
        for v in range(top + 1):
            starts[v + 1] += starts[v]
        for i in range(n):   # (rows[i] is row i: the vnode of its key is vn[i])
            sorted_rows[starts[vn[i]]] = rows[i]
            starts[vn[i]] += 1
        start = 0
        for v in range(top + 1):   # starts[v] is now the end of vnode v's rows
            end = starts[v]
            for i in range(start + 1, end):
                if memcmp(sorted_rows[i - 1].p, sorted_rows[i].p, <size_t>sorted_rows[i].n) > 0:
                    sort_key_refs(sorted_rows + start, end - start)
                    break
            start = end
        memcpy(rows, sorted_rows, <size_t>n * sizeof(KeyRef))
    finally:
        free(starts)
        free(sorted_rows)
    return 0


def sorted_int_keys(vnodes, columns, widths, descending):
    """See the twin's docstring."""
    return _sorted_keys(vnodes, columns, widths, descending, False)


def sorted_int_key_buffer(vnodes, columns, widths, descending):
    """See the twin's docstring."""
    return _sorted_keys(vnodes, columns, widths, descending, True)


cdef _sorted_keys(vnodes, columns, widths, descending, bint packed):
    """``sorted_int_keys`` (``packed`` false) or ``sorted_int_key_buffer`` (true)."""
    cdef Py_ssize_t n = check_args(vnodes, columns, widths, descending)
    cdef list cols = list(columns), ws = list(widths), ds = list(descending)
    cdef Py_ssize_t ncol = len(cols), width = 2, i, j, b, pos, w
    for j in range(ncol):
        width += 1 + <Py_ssize_t>ws[j]
    cdef const uint16_t[::1] vn = np.ascontiguousarray(vnodes)
    cdef const int64_t[::1] col
    cdef unsigned char* buf = NULL
    cdef KeyRef* rows = NULL
    cdef unsigned char* row
    cdef uint64_t u, sign, mask
    cdef unsigned char flip
    cdef int64_t[::1] out_order
    cdef list keys = []
    cdef bytes packed_keys
    cdef unsigned char* out
    cdef bint distinct = True
    order = np.empty(n, dtype=np.int64)
    if n == 0:
        return (order, b"", width, True) if packed else (order, keys)
    out_order = order
    try:
        buf = <unsigned char*>malloc(<size_t>(n * width))
        rows = <KeyRef*>malloc(<size_t>n * sizeof(KeyRef))
        if buf == NULL or rows == NULL:
            raise MemoryError()
        for i in range(n):
            row = buf + i * width
            row[0] = (vn[i] >> 8) & 0xFF
            row[1] = vn[i] & 0xFF
            rows[i].p = row
            rows[i].n = width
            rows[i].i = i
        pos = 2
        for j in range(ncol):
            col = np.ascontiguousarray(cols[j])
            if col.shape[0] != n:
                raise ValueError(f"a pk column has {col.shape[0]} values, expected {n}")
            w = <Py_ssize_t>ws[j]
            sign = (<uint64_t>1) << (8 * w - 1)
            mask = <uint64_t>0xFFFFFFFFFFFFFFFF if w == 8 else (((<uint64_t>1) << (8 * w)) - 1)
            flip = 0xFF if ds[j] else 0
            for i in range(n):
                row = buf + i * width + pos
                row[0] = 0x01
                u = ((<uint64_t>col[i]) & mask) ^ sign
                if flip:
                    u = ~u & mask
                # big-endian: the low w bytes of the byte-swapped word are its last w bytes
                u = HUMMOCK_LOAD_BE64(u)
                memcpy(row + 1, (<unsigned char*>&u) + (8 - w), <size_t>w)
            pos += 1 + w
        if not _in_order(buf, n, width):
            _sort_rows(rows, n, vn)
        for i in range(n):
            out_order[i] = rows[i].i
        if packed:   # one bytes object of n keys of ``width`` bytes, in key order
            packed_keys = PyBytes_FromStringAndSize(NULL, n * width)
            out = <unsigned char*>PyBytes_AS_STRING(packed_keys)
            for i in range(n):
                memcpy(out + i * width, rows[i].p, <size_t>width)
                if i and distinct and memcmp(rows[i - 1].p, rows[i].p, <size_t>width) == 0:
                    distinct = False
            return order, packed_keys, width, distinct
        for i in range(n):
            keys.append(PyBytes_FromStringAndSize(<const char*>rows[i].p, width))
        return order, keys
    finally:
        free(buf)
        free(rows)
