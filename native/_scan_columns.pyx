# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""Native twin of ``relational/_scan_columns_py.py``: value-encoded rows straight into column buffers.

Same name, signature, output bytes and exceptions (classes, and ``DecodeError`` offsets and
reasons, checked in the same order) as the pure-Python twin, which is the reference and holds
the contract, except that the buffers come back as ``pyarrow.Buffer`` objects holding the same
bytes (equal to the twin's ``bytes`` under ``==``). How it is fast: one C loop per row walks the
row (docs/format.md section 2) and copies each wanted value straight into its column's Arrow
buffer -- fixed-width values by ``memcpy`` into a buffer sized for ``limit`` rows up front,
VARCHAR/BYTEA bytes into a resizable buffer plus an offsets buffer -- so no Python object is made
per value and nothing is copied afterwards; the buffers come from Arrow's memory pool, which
keeps freed memory for the next batch (fresh ``calloc`` blocks of this size were mapped, faulted
in and zeroed by the kernel at every call). VARCHAR is checked for UTF-8 in C for ASCII values
and by Python's strict decoder (whose reason the error carries) otherwise.

Safety: every read is checked against the end of the row before it happens (``_need``,
``_varint``); ``limit`` is bounded (``MAX_LIMIT``), so the up-front buffers are too; the growable
buffer checks its size arithmetic; the buffers are Python objects, released on every exit.

Callers: :mod:`relational.scan_columns` only, through ``hummock._twins.load``.
"""

from native._typekind cimport *
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
from libc.stdlib cimport calloc, free, malloc
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy, memset
from cpython.ref cimport PyObject
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8

from native._iterators cimport UserScan, row_sink

import pyarrow as _pa

from relational import _scan_columns_py as _twin
from relational import _value_encoding_py as _encoding
from relational.errors import DecodeError, TypeMismatchError
from relational.types import TypeKind

assert [int(k) for k in TypeKind] == list(range(1, 18)), "TypeKind drifted from native codes"

MAX_LIMIT = _twin.MAX_LIMIT
WIDTHS = _twin.WIDTHS
WANTABLE = _twin.WANTABLE
WALKABLE = _twin.WALKABLE

cdef uint8_t FORMAT_TAG = _encoding.FORMAT_TAG
cdef int64_t USECS_PER_DAY = _encoding.USECS_PER_DAY
cdef int64_t MIN_DAYS = _encoding.MIN_DAYS
cdef int64_t MAX_DAYS = _encoding.MAX_DAYS
cdef int64_t MIN_USECS = _encoding.MIN_USECS
cdef int64_t MAX_USECS = _encoding.MAX_USECS
cdef object _check_args = _twin._check_args
cdef object _check_limit = _twin._check_limit



cdef struct _Reader:
    const unsigned char *p
    Py_ssize_t pos
    Py_ssize_t end


cdef struct _Out:
    int code
    int width                 # bytes stored per value; 0: VARCHAR/BYTEA
    unsigned char *valid      # ceil(limit/8) bytes, bit j set = row j not NULL
    Py_ssize_t nulls
    unsigned char *data       # fixed: limit*width; BOOLEAN: ceil(limit/8) bits; var: growable
    Py_ssize_t len            # var: bytes used
    Py_ssize_t cap            # var: bytes allocated
    int64_t *offsets          # var: limit + 1 ends (in the offsets buffer, narrowed to int32 at the end)
    PyObject *data_buffer     # var: the resizable Arrow buffer behind ``data`` (owned by decode_columns)


cdef object _allocate(Py_ssize_t size, unsigned char **p, bint zero):
    """A mutable buffer of ``size`` bytes from Arrow's memory pool, its address in ``p``; zeroed
    when ``zero`` (the bitmaps, whose bits are or-ed in). The pool keeps freed memory for the
    next batch, so the output pages are not faulted in and zeroed by the kernel at every call as
    fresh ``calloc`` blocks of this size were. Value and offset buffers are sized for ``limit``
    rows but not zeroed: every row decoded writes its slot (a NULL's fixed-width slot is zeroed
    by ``_zero_null_slots`` once the rows are in), and zeroing megabytes for a scan that finds
    a few rows was most of a small scan's cost."""
    buf = _pa.allocate_buffer(size)
    p[0] = <unsigned char *><uintptr_t>buf.address
    if zero:
        memset(p[0], 0, <size_t>size)
    return buf


cdef void _zero_null_slots(_Out *o, Py_ssize_t n) noexcept:
    """Zero the value slot of each NULL among the first ``n`` rows of a fixed-width column (the
    decoder skips them; the output holds zeros there, as the twin's does)."""
    cdef Py_ssize_t j
    if o.nulls == 0 or o.width == 0 or o.code == K_BOOLEAN:
        return
    for j in range(n):
        if not ((o.valid[j >> 3] >> (j & 7)) & 1):
            memset(o.data + j * o.width, 0, <size_t>o.width)


cdef int _fail(str reason, Py_ssize_t offset) except -1:
    raise DecodeError(reason, offset, "value")


cdef int _truncated(_Reader *r, uint64_t n) except -1 with gil:
    _fail(f"truncated: need {n} bytes, {r.end - r.pos} left", r.pos)


cdef inline int _need(_Reader *r, uint64_t n) except -1 nogil:
    if n > <uint64_t>(r.end - r.pos):   # the error out of line: this stays small enough to inline
        return _truncated(r, n)
    return 0


cdef inline uint64_t _varint(_Reader *r) except? 0xFFFFFFFFFFFFFFFF nogil:
    """The varint at ``r.pos`` (one byte inline: the common case of counts and short lengths)."""
    cdef uint8_t byte
    if r.pos < r.end:
        byte = r.p[r.pos]
        if byte < 0x80:
            r.pos += 1
            return byte
    return _varint_long(r)


cdef uint64_t _varint_long(_Reader *r) except? 0xFFFFFFFFFFFFFFFF nogil:
    cdef Py_ssize_t start = r.pos
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t byte
    while True:
        if r.pos >= r.end:
            with gil:
                _fail("truncated varint", start)
        byte = r.p[r.pos]
        if shift == 63 and byte > 1:
            with gil:
                _fail("varint exceeds 64 bits", start)
        r.pos += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            return result
        shift += 7


cdef inline int64_t _signed_le(const unsigned char *p, int width) noexcept nogil:
    """The ``width``-byte little-endian signed integer at ``p`` (width 4 or 8)."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(width):
        v |= (<uint64_t>p[i]) << (8 * i)
    if width == 4:
        return <int32_t><uint32_t>v
    return <int64_t>v


cdef int _walk(_Reader *r, int code) except -1 nogil:
    """Step over one non-NULL value of a column that is not wanted (twin's ``_walk``)."""
    cdef int width = _fixed_width(code)
    cdef uint64_t n
    cdef Py_ssize_t start
    cdef uint8_t kind
    if width:
        _need(r, width)
        r.pos += width
    elif code == K_VARCHAR or code == K_BYTEA:
        n = _varint(r)
        _need(r, n)
        r.pos += <Py_ssize_t>n
    elif code == K_INTERVAL:
        _need(r, 16)
        r.pos += 16
    else:   # K_DECIMAL
        start = r.pos
        _need(r, 1)
        kind = r.p[r.pos]
        r.pos += 1
        if kind >= 4:
            with gil:
                _fail(f"unknown DECIMAL kind 0x{kind:02x}", start)
        if kind != 0:
            return 0
        _need(r, 1)
        if r.p[r.pos] > 1:
            with gil:
                _fail(f"DECIMAL sign byte must be 0 or 1, found 0x{r.p[r.pos]:02x}", r.pos)
        r.pos += 1
        _varint(r)
        n = _varint(r)
        _need(r, n)
        r.pos += <Py_ssize_t>n
    return 0


cdef inline int _fixed_width(int code) noexcept nogil:
    if code == K_BOOLEAN:
        return 1
    if code == K_SMALLINT:
        return 2
    if code == K_INT or code == K_REAL or code == K_DATE:
        return 4
    if code == K_BIGINT or code == K_DOUBLE or code == K_TIME or code == K_TIMESTAMP or code == K_TIMESTAMPTZ:
        return 8
    return 0


cdef int _check_utf8(_Reader *r, Py_ssize_t n) except -1 nogil:
    """Raise the row decoder's DecodeError unless the ``n`` bytes at ``r.pos`` are UTF-8."""
    cdef const unsigned char *p = r.p + r.pos
    cdef Py_ssize_t i
    cdef unsigned char high = 0
    for i in range(n):
        high |= p[i]
    if high < 0x80:
        return 0
    with gil:
        return _check_utf8_text(r, n)


cdef int _check_utf8_text(_Reader *r, Py_ssize_t n) except -1:
    """:func:`_check_utf8` of bytes that are not all ASCII: Python's strict decoder decides."""
    cdef const unsigned char *p = r.p + r.pos
    try:
        PyUnicode_DecodeUTF8(<const char *>p, n, NULL)
    except UnicodeDecodeError as exc:
        reason = exc.reason
    else:
        return 0
    _fail(f"VARCHAR is not valid UTF-8: {reason}", r.pos)


cdef inline int _grow(_Out *o, Py_ssize_t n) except -1 nogil:
    """Room for ``n`` more bytes in a VARCHAR/BYTEA column's data."""
    if n <= o.cap - o.len:
        return 0
    with gil:
        return _grow_buffer(o, n)


cdef int _grow_buffer(_Out *o, Py_ssize_t n) except -1:
    """:func:`_grow` when the column's buffer is full: Arrow's pool resizes it."""
    cdef Py_ssize_t cap
    if n > PY_SSIZE_T_MAX // 2 - o.len:
        raise MemoryError()
    cap = o.cap * 2 if o.cap <= PY_SSIZE_T_MAX // 4 else PY_SSIZE_T_MAX // 2
    if cap < o.len + n:
        cap = o.len + n
    if cap < 4096:
        cap = 4096
    buf = <object>o.data_buffer
    buf.resize(cap)   # Arrow's pool: copies the bytes used, may move them
    o.data = <unsigned char *><uintptr_t>buf.address
    o.cap = cap
    return 0


cdef int _get(_Reader *r, _Out *o, Py_ssize_t j) except -1 nogil:
    """Read one non-NULL value into row ``j`` of ``o`` (twin's ``_get``)."""
    cdef int width = o.width
    cdef const unsigned char *p
    cdef int64_t x
    cdef uint64_t n
    cdef Py_ssize_t i
    if width:
        _need(r, width)
        p = r.p + r.pos
        if o.code == K_BOOLEAN:
            if p[0] > 1:
                with gil:
                    _fail(f"BOOLEAN byte must be 0 or 1, found 0x{p[0]:02x}", r.pos)
            if p[0]:
                o.data[j >> 3] |= <unsigned char>(1 << (j & 7))
            r.pos += 1
            return 0
        if o.code == K_DATE:
            x = _signed_le(p, 4)
            if x < MIN_DAYS or x > MAX_DAYS:
                with gil:
                    _fail(f"DATE {x} days from 1970-01-01 is out of range", r.pos)
        elif o.code == K_TIME:
            x = _signed_le(p, 8)
            if x < 0 or x >= USECS_PER_DAY:
                with gil:
                    _fail(f"TIME {x} usecs after midnight is out of range", r.pos)
        elif o.code == K_TIMESTAMP or o.code == K_TIMESTAMPTZ:
            x = _signed_le(p, 8)
            if x < MIN_USECS or x > MAX_USECS:
                with gil:
                    _fail(f"TIMESTAMP {x} usecs from 1970-01-01 is out of range", r.pos)
        if width == 8:   # constant sizes: the compiler inlines the copy (no libc call per value)
            memcpy(o.data + j * 8, p, 8)
        elif width == 4:
            memcpy(o.data + j * 4, p, 4)
        else:
            memcpy(o.data + j * width, p, width)
        r.pos += width
        return 0
    n = _varint(r)
    _need(r, n)
    if o.code == K_VARCHAR:
        _check_utf8(r, <Py_ssize_t>n)
    _grow(o, <Py_ssize_t>n)
    if n <= 16:   # short text: no libc call
        for i in range(<Py_ssize_t>n):
            o.data[o.len + i] = r.p[r.pos + i]
    else:
        memcpy(o.data + o.len, r.p + r.pos, <size_t>n)
    o.len += <Py_ssize_t>n
    o.offsets[j + 1] = o.len
    r.pos += <Py_ssize_t>n
    return 0


cdef int _row(object data, const int *codes, const Py_ssize_t *slots, _Out *outs, Py_ssize_t ncols,
              Py_ssize_t j) except -1:
    """Walk one row into row ``j`` of the wanted columns (``slots[i]``: column i's output or -1)."""
    if type(data) is not bytes:
        raise TypeMismatchError(f"encoded row must be bytes, got {type(data).__name__}")
    return _row_at(<const unsigned char *>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), codes, slots, outs,
                   ncols, j)


cdef int _row_at(const unsigned char *p, Py_ssize_t n, const int *codes, const Py_ssize_t *slots, _Out *outs,
                 Py_ssize_t ncols, Py_ssize_t j) except -1 nogil:
    """:func:`_row` of the encoded row ``p[:n]``.

    The position lives in the local ``pos`` (a register), not in the ``_Reader``: the common
    values -- fixed widths copied or stepped over, VARCHAR/BYTEA with a one-byte length and
    ASCII text -- are read here; anything else syncs ``r.pos`` and goes through the reader
    functions (``_get``, ``_walk``, ``_need``), which raise the errors at the same offsets. (With
    the reader's address passed to calls on every value, each access to its position was a
    store and a load: ~16 ns a row for the walk of five columns.)"""
    cdef _Reader r
    cdef uint64_t count
    cdef Py_ssize_t size, bitmap, i, pos, vlen, k
    cdef int width, code
    cdef unsigned char high
    cdef _Out *o
    r.p = p
    r.pos = 0
    r.end = n
    _need(&r, 1)
    if p[0] != FORMAT_TAG:
        with gil:
            _fail(f"unknown format tag 0x{<int>p[0]:02x}", 0)
    if n > 1 and p[1] < 0x80:
        count = p[1]
        pos = 2
    else:
        r.pos = 1
        count = _varint(&r)
        pos = r.pos
    if count != <uint64_t>ncols:
        with gil:
            _fail(f"row has {count} columns, schema has {ncols}", 1)
    size = (ncols + 7) >> 3
    if size > n - pos:
        r.pos = pos
        _need(&r, size)
    bitmap = pos
    if (ncols & 7) and (p[bitmap + size - 1] >> (ncols & 7)):
        with gil:
            _fail("nonzero padding bits in null bitmap", bitmap + size - 1)
    pos += size
    for i in range(ncols):
        if slots[i] < 0:
            if not ((p[bitmap + (i >> 3)] >> (i & 7)) & 1):
                code = codes[i]
                width = _fixed_width(code)
                if width:   # a fixed-width value not wanted: stepped over here, not by a call
                    if width > n - pos:
                        r.pos = pos
                        _need(&r, width)
                    pos += width
                elif (code == K_VARCHAR or code == K_BYTEA) and pos < n and p[pos] < 0x80 \
                        and p[pos] < n - pos:
                    pos += 1 + p[pos]
                else:
                    r.pos = pos
                    _walk(&r, code)
                    pos = r.pos
            continue
        o = &outs[slots[i]]
        if (p[bitmap + (i >> 3)] >> (i & 7)) & 1:
            o.nulls += 1
            if o.width == 0:
                o.offsets[j + 1] = o.len
            continue
        o.valid[j >> 3] |= <unsigned char>(1 << (j & 7))
        code = o.code
        if code == K_BIGINT or code == K_DOUBLE:    # copied as stored: no check of the value
            if 8 > n - pos:
                r.pos = pos
                _need(&r, 8)
            memcpy(o.data + j * 8, p + pos, 8)
            pos += 8
        elif code == K_INT or code == K_REAL:
            if 4 > n - pos:
                r.pos = pos
                _need(&r, 4)
            memcpy(o.data + j * 4, p + pos, 4)
            pos += 4
        elif (code == K_VARCHAR or code == K_BYTEA) and pos < n and p[pos] < 0x80 and p[pos] < n - pos:
            vlen = p[pos]            # a one-byte length, and the text is there
            high = 0
            if code == K_VARCHAR:
                for k in range(vlen):
                    high |= p[pos + 1 + k]
            if high >= 0x80:         # not ASCII: the reader's UTF-8 check decides
                r.pos = pos
                _get(&r, o, j)
                pos = r.pos
                continue
            _grow(o, vlen)
            for k in range(vlen):
                o.data[o.len + k] = p[pos + 1 + k]
            o.len += vlen
            o.offsets[j + 1] = o.len
            pos += 1 + vlen
        else:
            r.pos = pos
            _get(&r, o, j)
            pos = r.pos
    if pos != n:
        with gil:
            _fail(f"{n - pos} trailing bytes after the row", pos)
    return 0


cdef object _offsets_out(_Out *o, object buf, Py_ssize_t n):
    """The ``n + 1`` offsets in ``buf`` (where ``o.offsets`` points), little-endian int32 (int64
    past 2**31 - 1 bytes of data): narrowed in place, front to back, when int32."""
    cdef int32_t *narrow = <int32_t *>o.offsets
    cdef Py_ssize_t j
    if o.len > INT32_MAX:
        return buf.slice(0, (n + 1) * 8)
    for j in range(n + 1):   # element j's 4 bytes never overlap a later int64 read
        narrow[j] = <int32_t>o.offsets[j]
    return buf.slice(0, (n + 1) * 4)


cdef tuple _buffers(_Out *o, Py_ssize_t n, list held):
    """The twin's ``(validity, nulls, data, offsets)`` of one column, as slices of the Arrow
    buffers ``held`` (validity, data, offsets-or-None) it was decoded into: no copy."""
    cdef Py_ssize_t bits = (n + 7) >> 3
    valid_buf, data_buf, offsets_buf = held
    validity = None if o.nulls == 0 else valid_buf.slice(0, bits)
    if o.code == K_BOOLEAN:
        return (validity, o.nulls, data_buf.slice(0, bits), None)
    if o.width:
        return (validity, o.nulls, data_buf.slice(0, n * o.width), None)
    return (validity, o.nulls, data_buf.slice(0, o.len), _offsets_out(o, offsets_buf, n))


cdef struct _Decode:
    # what ``_decode_sink`` needs: the schema's codes, the wanted columns' slots and outputs
    const int *kinds
    const Py_ssize_t *slots
    _Out *outs
    Py_ssize_t ncols
    Py_ssize_t n              # rows decoded so far (the next row's index)


cdef int _decode_sink(void *ctx, const unsigned char *value, Py_ssize_t value_len) except -1 nogil:
    """``UserScan.drain``'s sink of :func:`decode_columns`: the row into row ``n``."""
    cdef _Decode *d = <_Decode *>ctx
    _row_at(value, value_len, d.kinds, d.slots, d.outs, d.ncols, d.n)
    d.n += 1
    return 0


cdef int _count_sink(void *ctx, const unsigned char *value, Py_ssize_t value_len) except -1 nogil:
    """``UserScan.drain``'s sink of :func:`count_pairs`: nothing to decode."""
    return 0


def count_pairs(pairs, limit):
    """How many items (at most ``limit``) the iterator ``pairs`` yields (twin's docstring)."""
    cdef Py_ssize_t cap = _check_limit(limit)
    cdef Py_ssize_t n = 0
    cdef const unsigned char *kp
    cdef const unsigned char *vp
    cdef Py_ssize_t kn, vn
    if cap and type(pairs) is UserScan and not (<UserScan>pairs).reverse:   # rows in place: no objects
        return (<UserScan>pairs).drain(_count_sink, NULL, cap)
    if cap:
        for _ in pairs:
            n += 1
            if n == cap:
                break
    return n


def decode_columns(pairs, limit, codes, wanted):
    """Decode at most ``limit`` rows of ``pairs`` into the ``wanted`` columns (twin's docstring)."""
    codes, wanted = _check_args(limit, codes, wanted)
    cdef Py_ssize_t cap = limit
    cdef Py_ssize_t ncols = len(codes)
    cdef Py_ssize_t nwanted = len(wanted)
    cdef Py_ssize_t i, n = 0
    cdef const unsigned char *kp
    cdef const unsigned char *vp
    cdef Py_ssize_t kn, vn
    cdef int *kinds = <int *>malloc(sizeof(int) * (ncols + 1))
    cdef Py_ssize_t *slots = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * (ncols + 1))
    cdef _Out *outs = <_Out *>calloc(nwanted + 1, sizeof(_Out))
    cdef _Out *o
    cdef unsigned char *p
    cdef list held = []   # per wanted column: [validity, data, offsets or None] Arrow buffers
    cdef _Decode ctx
    try:
        if kinds == NULL or slots == NULL or outs == NULL:
            raise MemoryError()
        for i in range(ncols):
            kinds[i] = codes[i]
            slots[i] = -1
        for i in range(nwanted):
            slots[<Py_ssize_t>wanted[i]] = i
            o = &outs[i]
            o.code = codes[wanted[i]]
            o.width = _fixed_width(o.code)
            column = [_allocate(((cap + 7) >> 3) + 1, &o.valid, True), None, None]
            if o.code == K_BOOLEAN:
                column[1] = _allocate(((cap + 7) >> 3) + 1, &o.data, True)
            elif o.width:
                column[1] = _allocate(cap * o.width + 1, &o.data, False)
            else:
                column[1] = _pa.allocate_buffer(0, resizable=True)
                o.data_buffer = <PyObject *>column[1]
                o.data = <unsigned char *><uintptr_t>column[1].address
                column[2] = _allocate((cap + 1) * <Py_ssize_t>sizeof(int64_t), &p, False)
                o.offsets = <int64_t *>p
                o.offsets[0] = 0   # every row writes its end, NULLs too
            held.append(column)
        if cap and type(pairs) is UserScan and not (<UserScan>pairs).reverse:   # rows in place, blocks without the GIL
            ctx.kinds, ctx.slots, ctx.outs, ctx.ncols, ctx.n = kinds, slots, outs, ncols, 0
            n = (<UserScan>pairs).drain(_decode_sink, &ctx, cap)
        elif cap:
            for pair in pairs:
                if type(pair) is not tuple or len(<tuple>pair) != 2:
                    raise TypeError(f"pairs must yield (key, value) tuples, got {type(pair).__name__}")
                _row((<tuple>pair)[1], kinds, slots, outs, ncols, n)
                n += 1
                if n == cap:
                    break
        for i in range(nwanted):
            _zero_null_slots(&outs[i], n)
        return n, [_buffers(&outs[i], n, <list>held[i]) for i in range(nwanted)]
    finally:   # the column memory belongs to the Arrow buffers in ``held``
        free(outs)
        free(slots)
        free(kinds)
