# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""Native row value encoding: the fast path of ``relational/_value_encoding_py.py``.

Same names, signatures, bytes, decoded values and exceptions (classes, and ``DecodeError``
offsets and reasons) as the pure-Python twin, which is the reference; the byte layout is in
docs/format.md section 2. DECIMAL values go through the twin's shared helpers (cold path).

How it is fast: a schema is compiled once into a tree of ``_Node`` (a C int type code per
node) and cached per ``tuple(types)``; values of the exact builtin type take a C fast path and
anything else is handed to ``DataType.validate`` first, whose canonical result is then encoded,
so the accepted inputs and the exceptions are exactly the twin's. Output goes to one growable C
buffer (``native/_outbuf.pxd``, reused across the rows of ``encode_rows``).

Safety: every read is checked against the end of the buffer before it happens (``_need`` and
``_get_varint``); a LIST element count is bounded by its null bitmap, so nothing is allocated
beyond 8 slots per input byte. Lists being encoded are copied to tuples first, so user code run
during encoding (``__index__``, ``tzinfo.utcoffset``) cannot resize what is being walked.

Callers: :mod:`relational.value_encoding` only, through ``hummock._twins.load``.
"""

from native._typekind cimport *
from libc.stdint cimport (int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
                          INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX)
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from libc.math cimport isinf
from libc.stdio cimport snprintf
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AsDouble, PyFloat_FromDouble
from cpython.long cimport PyLong_FromLongLong
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_DecodeUTF8
cimport cpython.datetime as cdt
from native._outbuf cimport Buf as _Buf
from native._outbuf cimport grow as _grow
from native._outbuf cimport put_bytes as _put_bytes
from native._outbuf cimport put_le as _put_le
from native._outbuf cimport put_raw as _put_raw
from native._outbuf cimport put_u8 as _put_u8
from native._outbuf cimport put_varint as _put_varint

import datetime as _datetime

import numpy as np
import decimal as _decimal
import sys as _sys

from relational import _value_encoding_py as _twin
from relational.errors import DecodeError, SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational.types import DataType, Interval, TypeKind

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int *) except? -1
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)

cdt.import_datetime()

# TypeKind numbers: native/_typekind.pxd (K_BOOLEAN ... K_LIST).

assert [int(k) for k in TypeKind] == list(range(1, 18)), "TypeKind drifted from native codes"

# Constants of the format, defined once in the twin (part of the on-disk format).
cdef uint8_t FORMAT_TAG = _twin.FORMAT_TAG
cdef uint32_t FLOAT32_CANONICAL_NAN = _twin.FLOAT32_CANONICAL_NAN
cdef uint64_t FLOAT64_CANONICAL_NAN = _twin.FLOAT64_CANONICAL_NAN
cdef int64_t UNIX_EPOCH_ORDINAL = _twin.UNIX_EPOCH_ORDINAL
cdef int64_t USECS_PER_DAY = _twin.USECS_PER_DAY
cdef int64_t MIN_DAYS = _twin.MIN_DAYS
cdef int64_t MAX_DAYS = _twin.MAX_DAYS
cdef int64_t MIN_USECS = _twin.MIN_USECS
cdef int64_t MAX_USECS = _twin.MAX_USECS

cdef object _UTC = _datetime.timezone.utc
cdef object _put_decimal = _twin.put_decimal
cdef object _get_decimal = _twin.get_decimal
cdef object _Decimal = _decimal.Decimal
cdef uint8_t DECIMAL_FINITE = _twin.DECIMAL_FINITE
cdef type _date = _datetime.date
cdef type _time = _datetime.time
cdef type _datetime_t = _datetime.datetime
cdef type _Interval = Interval


# --- compiled schemas ----------------------------------------------------------------------

cdef class _Node:
    """One type of a compiled schema; a row is a STRUCT node over its columns."""
    cdef int kind
    cdef object dtype        # the DataType, for validate() and error messages
    cdef tuple children      # STRUCT: one _Node per field
    cdef Py_ssize_t n        # STRUCT: len(children)
    cdef _Node elem          # LIST: the element node


cdef _Node _compile_type(object dtype):
    if not isinstance(dtype, DataType):
        raise SchemaError(f"expected DataType, got {dtype!r:.80}")
    cdef _Node node = _Node.__new__(_Node)
    node.kind = int(dtype.kind)
    node.dtype = dtype
    node.children = ()
    node.n = 0
    if node.kind == K_STRUCT:
        node.children = tuple([_compile_type(ftype) for _, ftype in dtype.fields])
        node.n = len(node.children)
    elif node.kind == K_LIST:
        node.elem = _compile_type(dtype.elem)
    return node


cdef dict _SCHEMAS = {}
cdef tuple _last = (None, None)   # (types tuple, its _Node): one assignment, so thread-safe


cdef _Node _schema(object types):
    """The compiled row schema of ``types``, cached per ``tuple(types)``."""
    global _last
    cdef tuple last = _last
    if types is last[0] and last[1] is not None:   # (None, None) before the first schema
        return <_Node>last[1]
    try:
        key = types if type(types) is tuple else tuple(types)
        node = _SCHEMAS.get(key)
    except TypeError:
        raise SchemaError(f"types must be a sequence of DataType, got {types!r:.80}") from None
    if node is None:
        node = _Node.__new__(_Node)
        (<_Node>node).kind = K_STRUCT
        (<_Node>node).dtype = None
        (<_Node>node).children = tuple([_compile_type(t) for t in key])
        (<_Node>node).n = len(key)
        if len(_SCHEMAS) >= 256:
            _SCHEMAS.clear()
        _SCHEMAS[key] = node
    if type(types) is tuple:
        _last = (types, node)
    return <_Node>node


# --- calendar arithmetic (proleptic Gregorian, days since 1970-01-01) ----------------------

cdef inline int64_t _days_from_civil(int64_t y, int64_t m, int64_t d) noexcept:
    # Howard Hinnant's algorithm; y >= 1 here, so every division is of non-negatives.
    y -= m <= 2
    cdef int64_t era = y // 400
    cdef int64_t yoe = y - era * 400
    cdef int64_t doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    cdef int64_t doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef inline void _civil_from_days(int64_t z, int *y, int *m, int *d) noexcept:
    # Inverse of _days_from_civil; REQUIRES MIN_DAYS <= z <= MAX_DAYS (so z + 719468 > 0).
    z += 719468
    cdef int64_t era = z // 146097
    cdef int64_t doe = z - era * 146097
    cdef int64_t yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    cdef int64_t doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    cdef int64_t mp = (5 * doy + 2) // 153
    d[0] = <int>(doy - (153 * mp + 2) // 5 + 1)
    m[0] = <int>(mp + 3 if mp < 10 else mp - 9)
    y[0] = <int>(yoe + era * 400 + (m[0] <= 2))


# --- encoding ------------------------------------------------------------------------------

cdef int _invalid(_Node node, object value) except -1:
    """Raise what ``DataType.validate`` raises for ``value``; if it accepts the value, the
    value is out of range for a reason only the encoder sees."""
    node.dtype.validate(value)
    raise ValueOutOfRangeError(f"{node.dtype.sql_name()} out of range: {value!r:.80}")


cdef inline int64_t _as_int64(_Node node, object value, int64_t lo, int64_t hi) except? -1:
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or x < lo or x > hi:
        _invalid(node, value)
    return x


cdef inline int64_t _wall_usecs(object value) noexcept:
    """Microseconds from 1970-01-01T00:00 to a datetime's wall-clock fields."""
    cdef int64_t days = _days_from_civil(cdt.datetime_year(value), cdt.datetime_month(value),
                                         cdt.datetime_day(value))
    cdef int64_t secs = (cdt.datetime_hour(value) * 60 + cdt.datetime_minute(value)) * 60 \
        + cdt.datetime_second(value)
    return days * USECS_PER_DAY + secs * 1000000 + cdt.datetime_microsecond(value)


cdef int _put_value(_Buf *b, _Node node, object v) except -1:
    """Append non-NULL ``v`` (checked) in the encoding of ``node``'s type."""
    cdef int kind = node.kind
    cdef double d
    cdef float f
    cdef uint64_t bits64
    cdef uint32_t bits32
    cdef int64_t x
    if kind == K_BIGINT or kind == K_INT or kind == K_SMALLINT:
        if type(v) is not int:
            v = node.dtype.validate(v)
        if kind == K_BIGINT:
            _put_le(b, <uint64_t>_as_int64(node, v, INT64_MIN, INT64_MAX), 8)
        elif kind == K_INT:
            _put_le(b, <uint64_t>_as_int64(node, v, INT32_MIN, INT32_MAX), 4)
        else:
            _put_le(b, <uint64_t>_as_int64(node, v, INT16_MIN, INT16_MAX), 2)
    elif kind == K_DOUBLE or kind == K_REAL:
        if type(v) is not float:
            v = node.dtype.validate(v)
        d = PyFloat_AsDouble(v)
        if kind == K_DOUBLE:
            if d != d:
                bits64 = FLOAT64_CANONICAL_NAN
            else:
                memcpy(&bits64, &d, 8)
            _put_le(b, bits64, 8)
        else:
            f = <float>d
            if d != d:
                bits32 = FLOAT32_CANONICAL_NAN
            else:
                if isinf(f) and not isinf(d):
                    _invalid(node, v)
                memcpy(&bits32, &f, 4)
            _put_le(b, bits32, 4)
    elif kind == K_VARCHAR or kind == K_JSONB:
        if type(v) is not str or kind == K_JSONB:   # JSONB: its normal text, stored as VARCHAR is
            v = node.dtype.validate(v)
        if type(v) is str and PyUnicode_IS_COMPACT_ASCII(v):
            _put_raw(b, <const char *>PyUnicode_DATA(v), PyUnicode_GET_LENGTH(v))
        else:
            try:
                raw = PyUnicode_AsUTF8String(v)
            except UnicodeEncodeError:
                raw = None
            if raw is None:
                _invalid(node, v)
            _put_raw(b, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    elif kind == K_BYTEA:
        if type(v) is not bytes:
            v = node.dtype.validate(v)
            if type(v) is not bytes:
                v = bytes(memoryview(v))
        _put_raw(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
    elif kind == K_BOOLEAN:
        if v is not True and v is not False:
            v = node.dtype.validate(v)
        _put_u8(b, 1 if v is True else 0)
    elif kind == K_TIMESTAMP:
        if type(v) is not _datetime_t or cdt.datetime_tzinfo(v) is not None:
            v = node.dtype.validate(v)
        _put_le(b, <uint64_t>_wall_usecs(v), 8)
    elif kind == K_TIMESTAMPTZ:
        if type(v) is not _datetime_t or cdt.datetime_tzinfo(v) is None:
            v = node.dtype.validate(v)
        x = _wall_usecs(v)
        if cdt.datetime_tzinfo(v) is not _UTC:
            offset = v.utcoffset()
            if offset is None:
                _invalid(node, v)
            x -= (<int64_t>cdt.timedelta_days(offset) * 86400 + cdt.timedelta_seconds(offset)) \
                * 1000000 + cdt.timedelta_microseconds(offset)
        if x < MIN_USECS or x > MAX_USECS:
            raise ValueOutOfRangeError(f"TIMESTAMP WITH TIME ZONE out of range in UTC: {v!r:.80}")
        _put_le(b, <uint64_t>x, 8)
    elif kind == K_DATE:
        if type(v) is not _date:
            v = node.dtype.validate(v)
        x = _days_from_civil(cdt.date_year(v), cdt.date_month(v), cdt.date_day(v))
        _put_le(b, <uint64_t>x, 4)
    elif kind == K_TIME:
        if type(v) is not _time or cdt.time_tzinfo(v) is not None:
            v = node.dtype.validate(v)
        x = (<int64_t>(cdt.time_hour(v) * 60 + cdt.time_minute(v)) * 60 + cdt.time_second(v)) \
            * 1000000 + cdt.time_microsecond(v)
        _put_le(b, <uint64_t>x, 8)
    elif kind == K_INTERVAL:
        if type(v) is not _Interval:
            v = node.dtype.validate(v)
        _put_le(b, <uint64_t>_as_int64(node, v.months, INT32_MIN, INT32_MAX), 4)
        _put_le(b, <uint64_t>_as_int64(node, v.days, INT32_MIN, INT32_MAX), 4)
        _put_le(b, <uint64_t>_as_int64(node, v.usecs, INT64_MIN, INT64_MAX), 8)
    elif kind == K_DECIMAL:
        raw = bytearray()
        _put_decimal(raw, node.dtype.validate(v))
        raw = bytes(raw)
        _put_bytes(b, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    elif kind == K_STRUCT:
        if not isinstance(v, tuple) or len(v) != node.n:
            _invalid(node, v)
        _put_values(b, node, <tuple>v)
    elif kind == K_LIST:
        if not isinstance(v, (list, tuple)):
            _invalid(node, v)
        v = tuple(v)
        _put_varint(b, <uint64_t>len(<tuple>v))
        _put_values(b, node, <tuple>v)
    else:
        raise SchemaError(f"unknown type code {kind}")
    return 0


cdef int _put_values(_Buf *b, _Node node, tuple values) except -1:
    """Null bitmap then the non-NULL values; ``node`` is a STRUCT with ``len(values)`` fields
    or a LIST (every value has the element type)."""
    cdef Py_ssize_t n = len(values)
    cdef Py_ssize_t size = (n + 7) >> 3
    cdef Py_ssize_t bitmap = b.len
    cdef Py_ssize_t i
    cdef bint is_list = node.kind == K_LIST
    _grow(b, size)
    memset(b.data + bitmap, 0, size)
    b.len += size
    for i in range(n):
        v = values[i]
        if v is None:
            b.data[bitmap + (i >> 3)] |= <uint8_t>(1 << (i & 7))
        else:
            _put_value(b, node.elem if is_list else <_Node>node.children[i], v)
    return 0


cdef int _put_row(_Buf *b, _Node schema, object values) except -1:
    if type(values) is not tuple:
        try:
            values = tuple(values)
        except TypeError:
            raise SchemaError(f"a row must be a sequence of values, got {type(values).__name__}") from None
    if len(<tuple>values) != schema.n:
        raise SchemaError(f"row has {len(<tuple>values)} values but the schema has {schema.n} columns")
    _put_u8(b, FORMAT_TAG)
    _put_varint(b, <uint64_t>schema.n)
    _put_values(b, schema, <tuple>values)
    return 0


def encode_row(values, types):
    """Value-encode one row; see :func:`relational.value_encoding.encode_row`."""
    cdef _Node schema = _schema(types)
    cdef _Buf b
    b.data = NULL
    b.len = 0
    b.cap = 0
    try:
        _put_row(&b, schema, values)
        return PyBytes_FromStringAndSize(<char *>b.data, b.len)
    finally:
        free(b.data)


def encode_rows(rows, types):
    """:func:`encode_row` for every row of ``rows`` with one schema."""
    cdef _Node schema = _schema(types)
    cdef _Buf b
    cdef list out = []
    b.data = NULL
    b.len = 0
    b.cap = 0
    try:
        for values in rows:
            b.len = 0
            _put_row(&b, schema, values)
            out.append(PyBytes_FromStringAndSize(<char *>b.data, b.len))
    finally:
        free(b.data)
    return out


# --- decoding ------------------------------------------------------------------------------

cdef struct _Reader:
    const unsigned char *p
    Py_ssize_t pos
    Py_ssize_t end


cdef int _fail(str reason, Py_ssize_t offset) except -1:
    raise DecodeError(reason, offset, "value")


cdef inline int _need(_Reader *r, uint64_t n) except -1:
    if n > <uint64_t>(r.end - r.pos):
        _fail(f"truncated: need {n} bytes, {r.end - r.pos} left", r.pos)
    return 0


cdef inline uint64_t _get_le(_Reader *r, int width) except? 0xFFFFFFFFFFFFFFFF:
    """Read ``width`` bytes, little-endian (bounds checked)."""
    cdef uint64_t v = 0
    cdef int i
    _need(r, width)
    for i in range(width):
        v |= (<uint64_t>r.p[r.pos + i]) << (8 * i)
    r.pos += width
    return v


cdef uint64_t _get_varint(_Reader *r) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_ssize_t start = r.pos
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t byte
    while True:
        if r.pos >= r.end:
            _fail("truncated varint", start)
        byte = r.p[r.pos]
        if shift == 63 and byte > 1:
            _fail("varint exceeds 64 bits", start)
        r.pos += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            return result
        shift += 7


cdef inline bint _short_varint(const unsigned char *p, Py_ssize_t *ppos, Py_ssize_t end, int most,
                               uint64_t *out) noexcept:
    """The varint at ``ppos[0]`` if it ends within ``most`` bytes before ``end`` (True, value in
    ``out``, ``ppos`` past it); else False and nothing moved. For ``_decimal_fast`` only."""
    cdef Py_ssize_t pos = ppos[0]
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef uint8_t byte
    while True:
        if pos >= end or shift >= 7 * most:
            return False
        byte = p[pos]
        pos += 1
        value |= (<uint64_t>(byte & 0x7F)) << shift
        if byte < 0x80:
            out[0] = value
            ppos[0] = pos
            return True
        shift += 7


cdef object _decimal_fast(_Reader *r):
    """The DECIMAL at ``r.pos`` when it is finite, its exponent within +-10**6 and its
    coefficient at most 8 bytes once leading zero bytes are skipped (every value a BIGINT sum
    or a NUMERIC of up to 19 digits holds); else None, ``r.pos`` unchanged, and the caller asks
    the twin (``get_decimal``), which decodes the rest and raises every error. The value is
    the twin's: the same text, ``[-]<coefficient>E<exponent>``, goes to ``Decimal``. Such an
    exponent and coefficient pass the twin's range checks (adjusted exponent below 2**30)."""
    cdef const unsigned char *p = r.p
    cdef Py_ssize_t pos = r.pos, end = r.end, stop
    cdef uint64_t zigzag = 0, length = 0, coef = 0
    cdef int64_t exponent
    cdef int n
    cdef uint8_t sign
    cdef char text[64]
    if end - pos < 4 or p[pos] != DECIMAL_FINITE or p[pos + 1] > 1:
        return None
    sign = p[pos + 1]
    pos += 2
    if not _short_varint(p, &pos, end, 4, &zigzag):     # the zigzag exponent
        return None
    exponent = <int64_t>(zigzag >> 1) ^ -<int64_t>(zigzag & 1)
    if exponent > 1000000 or exponent < -1000000:
        return None
    if not _short_varint(p, &pos, end, 3, &length):     # the coefficient's length
        return None
    if length > <uint64_t>(end - pos):
        return None
    stop = pos + <Py_ssize_t>length
    while pos < stop and p[pos] == 0:
        pos += 1
    if stop - pos > 8:
        return None
    while pos < stop:
        coef = (coef << 8) | p[pos]
        pos += 1
    n = snprintf(text, sizeof(text), "%s%lluE%lld", <const char*>("-" if sign else ""),
                 <unsigned long long>coef, <long long>exponent)
    value = _Decimal(text[:n].decode("ascii"))
    r.pos = stop
    return value


cdef object _get_datetime(_Reader *r, object tz):
    cdef Py_ssize_t start = r.pos
    cdef int64_t usecs = <int64_t>_get_le(r, 8)
    cdef int64_t days, rest
    cdef int y, m, d
    if usecs < MIN_USECS or usecs > MAX_USECS:
        _fail(f"TIMESTAMP {usecs} usecs from 1970-01-01 is out of range", start)
    days = usecs // USECS_PER_DAY
    rest = usecs % USECS_PER_DAY
    if rest < 0:      # C division truncates; we want the floor
        days -= 1
        rest += USECS_PER_DAY
    _civil_from_days(days, &y, &m, &d)
    return cdt.datetime_new(y, m, d, <int>(rest // 3600000000), <int>(rest // 60000000 % 60),
                            <int>(rest // 1000000 % 60), <int>(rest % 1000000), tz)


cdef object _get_value(_Reader *r, _Node node, object data):
    """Decode one non-NULL value of ``node``'s type at ``r.pos``."""
    cdef int kind = node.kind
    cdef Py_ssize_t start = r.pos
    cdef uint64_t u, n
    cdef int64_t x
    cdef uint32_t bits32
    cdef float f
    cdef double dbl
    cdef int y, m, d
    if kind == K_BIGINT:
        return PyLong_FromLongLong(<int64_t>_get_le(r, 8))
    elif kind == K_INT:
        return PyLong_FromLongLong(<int32_t><uint32_t>_get_le(r, 4))
    elif kind == K_SMALLINT:
        return PyLong_FromLongLong(<int16_t><uint16_t>_get_le(r, 2))
    elif kind == K_DOUBLE:
        u = _get_le(r, 8)
        memcpy(&dbl, &u, 8)
        return PyFloat_FromDouble(dbl)
    elif kind == K_REAL:
        bits32 = <uint32_t>_get_le(r, 4)
        memcpy(&f, &bits32, 4)
        return PyFloat_FromDouble(<double>f)
    elif kind == K_VARCHAR or kind == K_BYTEA or kind == K_JSONB:
        n = _get_varint(r)
        _need(r, n)
        start = r.pos
        r.pos += <Py_ssize_t>n
        if kind == K_BYTEA:
            return PyBytes_FromStringAndSize(<const char *>(r.p + start), <Py_ssize_t>n)
        try:
            return PyUnicode_DecodeUTF8(<const char *>(r.p + start), <Py_ssize_t>n, NULL)
        except UnicodeDecodeError as exc:
            reason = exc.reason
        _fail(f"VARCHAR is not valid UTF-8: {reason}", start)
    elif kind == K_BOOLEAN:
        u = _get_le(r, 1)
        if u > 1:
            _fail(f"BOOLEAN byte must be 0 or 1, found 0x{u:02x}", start)
        return u == 1
    elif kind == K_TIMESTAMP:
        return _get_datetime(r, None)
    elif kind == K_TIMESTAMPTZ:
        return _get_datetime(r, _UTC)
    elif kind == K_DATE:
        x = <int32_t><uint32_t>_get_le(r, 4)
        if x < MIN_DAYS or x > MAX_DAYS:
            _fail(f"DATE {x} days from 1970-01-01 is out of range", start)
        _civil_from_days(x, &y, &m, &d)
        return cdt.date_new(y, m, d)
    elif kind == K_TIME:
        x = <int64_t>_get_le(r, 8)
        if x < 0 or x >= USECS_PER_DAY:
            _fail(f"TIME {x} usecs after midnight is out of range", start)
        return cdt.time_new(<int>(x // 3600000000), <int>(x // 60000000 % 60),
                            <int>(x // 1000000 % 60), <int>(x % 1000000), None)
    elif kind == K_INTERVAL:
        _need(r, 16)
        months = <int32_t><uint32_t>_get_le(r, 4)
        days = <int32_t><uint32_t>_get_le(r, 4)
        return _Interval(months, days, <int64_t>_get_le(r, 8))
    elif kind == K_DECIMAL:
        value = _decimal_fast(r)
        if value is None:   # anything else, and every error, as the twin decodes it
            value, pos = _get_decimal(data, r.pos)
            r.pos = pos
        return value
    elif kind == K_STRUCT:
        return _get_values(r, node, node.n, data)
    elif kind == K_LIST:
        n = _get_varint(r)
        _need(r, (n >> 3) + ((n & 7) != 0))   # so n <= 8 * remaining bytes fits Py_ssize_t
        return list(_get_values(r, node, <Py_ssize_t>n, data))
    raise SchemaError(f"unknown type code {kind}")


cdef tuple _get_values(_Reader *r, _Node node, Py_ssize_t n, object data):
    """Null bitmap for ``n`` values, then the non-NULL ones (see ``_put_values``)."""
    cdef Py_ssize_t size = (n + 7) >> 3
    cdef Py_ssize_t bitmap = r.pos
    cdef Py_ssize_t i
    cdef bint is_list = node.kind == K_LIST
    _need(r, size)
    if (n & 7) and (r.p[bitmap + size - 1] >> (n & 7)):
        _fail("nonzero padding bits in null bitmap", bitmap + size - 1)
    r.pos += size
    cdef tuple result = PyTuple_New(n)
    for i in range(n):
        if (r.p[bitmap + (i >> 3)] >> (i & 7)) & 1:
            v = None
        else:
            v = _get_value(r, node.elem if is_list else <_Node>node.children[i], data)
        Py_INCREF(v)
        PyTuple_SET_ITEM(result, i, v)
    return result


cdef tuple _decode(object data, _Node schema):
    cdef _Reader r
    cdef uint64_t count
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeMismatchError(f"encoded row must be bytes-like, got {type(data).__name__}")
        data = bytes(data)
    r.p = <const unsigned char *>PyBytes_AS_STRING(data)
    r.pos = 0
    r.end = PyBytes_GET_SIZE(data)
    _need(&r, 1)
    if r.p[0] != FORMAT_TAG:
        _fail(f"unknown format tag 0x{<int>r.p[0]:02x}", 0)
    r.pos = 1
    count = _get_varint(&r)
    if count != <uint64_t>schema.n:
        _fail(f"row has {count} columns, schema has {schema.n}", 1)
    values = _get_values(&r, schema, schema.n, data)
    if r.pos != r.end:
        _fail(f"{r.end - r.pos} trailing bytes after the row", r.pos)
    return values


def decode_row(data, types):
    """Decode one value-encoded row; see :func:`relational.value_encoding.decode_row`."""
    return _decode(data, _schema(types))


def decode_rows(datas, types):
    """:func:`decode_row` for every buffer of ``datas`` with one schema."""
    cdef _Node schema = _schema(types)
    return [_decode(data, schema) for data in datas]


# --- whole columns (no Python value per cell) ----------------------------------------------

COLUMN_WIDTHS = (-1, 0, 1, 2, 4, 8)   # -1: pre-encoded values (no length prefix)


cdef bint _LITTLE_ENDIAN = _sys.byteorder == "little"


cdef inline Py_ssize_t _varint_len(uint64_t v) noexcept:
    """Bytes of ``v`` as a varint (``put_varint``'s LEB128)."""
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char* _write_varint(unsigned char* w, uint64_t v) noexcept:
    """Write ``v`` as a varint at ``w`` (room checked by the caller); return the end."""
    while v >= 0x80:
        w[0] = <uint8_t>((v & 0x7F) | 0x80)
        w += 1
        v >>= 7
    w[0] = <uint8_t>v
    return w + 1


cdef struct _Col:
    int width                 # 1, 2, 4, 8: fixed little-endian; 0: varint length + bytes
    const int64_t* values     # n values, or n + 1 offsets (width 0)
    const unsigned char* data # width 0: the bytes the offsets point into
    const unsigned char* nulls  # NULL: no NULLs; else n flags, nonzero = NULL


def encode_column_buffers(cols, n, order=None):
    """See the twin's docstring: ``encode_rows`` of ``n`` rows given as raw column buffers.

    Every descriptor is checked before anything is written: widths, buffer lengths, and that
    the offsets of a bytes column never decrease and stay within its data, so the loop below
    reads only inside the buffers it holds (memoryviews keep them alive)."""
    return _encode_buffers(cols, n, order, False)


def encode_column_buffer(cols, n, order=None):
    """See the twin's docstring: :func:`encode_column_buffers` as one buffer and its offsets."""
    return _encode_buffers(cols, n, order, True)


cdef inline Py_ssize_t _row_size(_Col* cs, Py_ssize_t ncols, Py_ssize_t j, Py_ssize_t fixed) noexcept:
    """Bytes of row ``j``'s encoding (``fixed``: its header and bitmap)."""
    cdef Py_ssize_t i, total = fixed, length
    for i in range(ncols):
        if cs[i].nulls != NULL and cs[i].nulls[j]:
            continue
        if cs[i].width > 0:
            total += cs[i].width
        else:
            length = cs[i].values[j + 1] - cs[i].values[j]
            total += length + (_varint_len(<uint64_t>length) if cs[i].width == 0 else 0)
    return total


cdef inline unsigned char* _write_row(unsigned char* w, _Col* cs, Py_ssize_t ncols, Py_ssize_t j,
                                      Py_ssize_t size) noexcept:
    """Write row ``j``'s encoding at ``w`` (exactly ``_row_size`` bytes); return the end."""
    cdef Py_ssize_t i, k, start, end
    cdef uint64_t v
    cdef unsigned char* bitmap
    w[0] = FORMAT_TAG
    w = _write_varint(w + 1, <uint64_t>ncols)
    bitmap = w
    if size == 1:
        bitmap[0] = 0
    else:
        memset(bitmap, 0, size)
    w += size
    for i in range(ncols):
        if cs[i].nulls != NULL and cs[i].nulls[j]:
            bitmap[i >> 3] |= <uint8_t>(1 << (i & 7))
        elif cs[i].width > 0:
            v = <uint64_t>cs[i].values[j]
            if _LITTLE_ENDIAN:   # constant sizes: the compiler inlines the copy (no libc call)
                if cs[i].width == 8:
                    memcpy(w, &v, 8)
                elif cs[i].width == 4:
                    memcpy(w, &v, 4)
                else:
                    memcpy(w, &v, cs[i].width)
            else:
                for k in range(cs[i].width):
                    w[k] = <uint8_t>(v >> (8 * k))
            w += cs[i].width
        else:
            start = cs[i].values[j]
            end = cs[i].values[j + 1]
            if cs[i].width == 0:
                w = _write_varint(w, <uint64_t>(end - start))
            if end > start:
                memcpy(w, cs[i].data + start, end - start)
                w += end - start
    return w


cdef inline bint _all_fixed(_Col* cs, Py_ssize_t ncols) noexcept:
    """Whether every column is fixed-width (1, 2, 4 or 8 bytes) without NULL flags: then every
    row's encoding has one size and the same header (no bit of the null bitmap set)."""
    cdef Py_ssize_t i
    for i in range(ncols):
        if cs[i].width <= 0 or cs[i].nulls != NULL:
            return False
    return True


cdef tuple _write_fixed_rows(_Col* cs, Py_ssize_t ncols, Py_ssize_t rows, const int64_t* order, Py_ssize_t fixed):
    """``encode_column_buffer`` of rows whose columns are all fixed-width and never NULL
    (``_all_fixed``): the same bytes ``_write_row`` writes, with the row size computed once,
    the header (tag, column count, an all-zero bitmap) copied from one template, and each
    value copied by its constant width. REQUIRES: the descriptors and ``order`` checked."""
    cdef Py_ssize_t i, k, r, j, row_size = fixed
    cdef Py_ssize_t* at = <Py_ssize_t*>malloc(sizeof(Py_ssize_t) * (ncols if ncols else 1))
    cdef unsigned char header[32]   # 1 + varint(ncols) + bitmap: ncols < 2**31 as a list length
    cdef unsigned char* head_end
    cdef unsigned char* w
    cdef unsigned char* row_start
    cdef uint64_t v
    if at == NULL:
        raise MemoryError()
    try:
        for i in range(ncols):
            at[i] = row_size
            row_size += cs[i].width
        offsets = np.arange(0, (rows + 1) * row_size, row_size, dtype=np.int64) if rows else np.zeros(1, np.int64)
        out = PyBytes_FromStringAndSize(NULL, rows * row_size)
        w = <unsigned char*>PyBytes_AS_STRING(out)
        if fixed <= 32:
            header[0] = FORMAT_TAG
            head_end = _write_varint(header + 1, <uint64_t>ncols)
            memset(head_end, 0, fixed - (head_end - header))
        for r in range(rows):
            j = order[r] if order != NULL else r
            row_start = w + r * row_size
            if fixed <= 32:
                memcpy(row_start, header, fixed)
            else:   # (a row of more than ~200 columns: the general header writer)
                row_start[0] = FORMAT_TAG
                head_end = _write_varint(row_start + 1, <uint64_t>ncols)
                memset(head_end, 0, fixed - (head_end - row_start))
            for i in range(ncols):
                v = <uint64_t>cs[i].values[j]
                if _LITTLE_ENDIAN:
                    if cs[i].width == 8:
                        memcpy(row_start + at[i], &v, 8)
                    elif cs[i].width == 4:
                        memcpy(row_start + at[i], &v, 4)
                    elif cs[i].width == 2:
                        memcpy(row_start + at[i], &v, 2)
                    else:
                        row_start[at[i]] = <uint8_t>v
                else:
                    for k in range(cs[i].width):
                        row_start[at[i] + k] = <uint8_t>(v >> (8 * k))
    finally:
        free(at)
    return out, offsets


cdef _encode_buffers(cols, n, order, bint packed):
    """``encode_column_buffers`` (a list of rows) or, ``packed``, ``encode_column_buffer``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"the row count must be an int >= 0, got {n!r:.40}")
    if not isinstance(cols, (list, tuple)):
        raise TypeError(f"columns must be a list of descriptors, got {type(cols).__name__}")
    cdef Py_ssize_t rows = n, ncols = len(cols), i, j, previous, end
    cdef const int64_t[::1] values
    cdef const unsigned char[::1] data
    cdef const unsigned char[::1] nulls
    cdef list keep = []               # the memoryviews, alive while _Col points into them
    cdef const int64_t[::1] rows_order
    cdef bint ordered = order is not None
    cdef Py_ssize_t r
    cdef _Col* cs = <_Col*>malloc(sizeof(_Col) * (ncols if ncols else 1))
    cdef list out
    cdef Py_ssize_t size, fixed, total
    cdef bytes row
    cdef unsigned char* w
    cdef int64_t[::1] offs
    if cs == NULL:
        raise MemoryError()
    try:
        for i in range(ncols):
            col = cols[i]
            if type(col) is not tuple or len(<tuple>col) != 4:
                raise ValueError(f"column {i}: a descriptor is a (width, values, data, nulls) tuple")
            width, vals, raw, flags = <tuple>col
            if type(width) is not int or width not in COLUMN_WIDTHS:
                raise ValueError(f"column {i}: width must be one of {COLUMN_WIDTHS}, got {width!r:.40}")
            values = _int64_view(vals)
            if values.shape[0] != (rows + 1 if width <= 0 else rows):
                raise ValueError(f"column {i}: {values.shape[0]} values, expected {rows + 1 if width <= 0 else rows}")
            cs[i].width = width
            cs[i].values = &values[0] if values.shape[0] else NULL
            cs[i].data = NULL
            cs[i].nulls = NULL
            keep.append(values)
            if width <= 0:
                data = _byte_view(raw)
                keep.append(data)
                previous = 0
                for j in range(rows + 1):
                    end = values[j]
                    if end < previous or end > data.shape[0]:
                        raise ValueError(f"column {i}: offset {j} is {end}, outside [{previous}, {data.shape[0]}]")
                    previous = end
                cs[i].data = &data[0] if data.shape[0] else NULL
            if flags is not None:
                nulls = _byte_view(flags)
                if nulls.shape[0] != rows:
                    raise ValueError(f"column {i}: {nulls.shape[0]} null flags, expected {rows}")
                keep.append(nulls)
                cs[i].nulls = &nulls[0] if rows else NULL
        if ordered:
            rows_order = _int64_view(order)
            if rows_order.shape[0] != rows:
                raise ValueError(f"order has {rows_order.shape[0]} entries, expected {rows}")
            for j in range(rows):
                if rows_order[j] < 0 or rows_order[j] >= rows:
                    raise ValueError(f"order entry {j} is {rows_order[j]}, outside [0, {rows})")
        size = (ncols + 7) >> 3
        fixed = 1 + _varint_len(<uint64_t>ncols) + size
        if packed and _all_fixed(cs, ncols):   # every row one size: no per-row sizing
            return _write_fixed_rows(cs, ncols, rows, &rows_order[0] if ordered and rows else NULL, fixed)
        if packed:   # every row's size first (the offsets), then one buffer written in place
            offsets = np.empty(rows + 1, dtype=np.int64)
            offs = offsets
            offs[0] = 0
            total = 0
            for r in range(rows):
                total += _row_size(cs, ncols, rows_order[r] if ordered else r, fixed)
                offs[r + 1] = total
            row = PyBytes_FromStringAndSize(NULL, total)
            w = <unsigned char*>PyBytes_AS_STRING(row)
            for r in range(rows):
                w = _write_row(w, cs, ncols, rows_order[r] if ordered else r, size)
            return row, offsets
        out = PyList_New(rows)
        for r in range(rows):
            j = rows_order[r] if ordered else r
            # the row's exact size first, then its bytes written in place (no copy, no growth)
            row = PyBytes_FromStringAndSize(NULL, _row_size(cs, ncols, j, fixed))
            _write_row(<unsigned char*>PyBytes_AS_STRING(row), cs, ncols, j, size)
            Py_INCREF(row)
            PyList_SET_ITEM(out, r, row)
    finally:
        free(cs)
    return out


cdef const int64_t[::1] _int64_view(object obj):
    """``obj`` (a buffer) as contiguous int64s; TypeError otherwise."""
    try:
        return memoryview(obj).cast("B").cast("q")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"column values must be a contiguous int64 buffer: {exc}") from None


cdef const unsigned char[::1] _byte_view(object obj):
    try:
        return memoryview(obj).cast("B")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"column data must be a contiguous buffer: {exc}") from None
