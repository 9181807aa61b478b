# cython: language_level=3
"""Native memcomparable encoder/decoder; twin of ``relational/_memcomparable_py.py``.

Byte layout: docs/format.md section 1 (the twin is the reference implementation). This module
implements the hot types (integers, floats, BOOLEAN, VARCHAR, BYTEA, DATE, TIMESTAMP, nested
STRUCT/LIST framing) in C and calls the twin's shared helpers for the cold ones (DECIMAL,
INTERVAL, TIMESTAMPTZ offsets, decoding of temporal values), so both produce identical bytes.

Safety: every read checks ``pos + n <= end`` before touching the buffer and raises
``DecodeError`` otherwise. Every value that is not of an exact builtin fast-path type (or is out
of range) goes through ``DataType.validate``, so errors have the same class and message as in the
twin.
"""

from native._typekind cimport *
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
cimport cpython.datetime as cdt
from libc.math cimport isinf
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy

from relational import _memcomparable_py as _py
from relational.errors import DecodeError, SchemaError
from relational.types import DataType

cdt.import_datetime()

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL

# TypeKind numbers: native/_typekind.pxd (K_BOOLEAN ... K_LIST).

# Format constants, mirrored from the twin (tests compare both byte for byte).
cdef enum:
    TAG_NULL_FIRST = 0x00
    TAG_NOT_NULL = 0x01
    TAG_NULL_LAST = 0x02
    LIST_ELEMENT = 0x01
    LIST_END = 0x00
    UNIX_EPOCH_ORDINAL = 719163

cdef int64_t USECS_PER_DAY = 86400000000


# --- growable output buffer -------------------------------------------------------------------

cdef struct Buf:
    unsigned char* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int buf_init(Buf* b) except -1:
    b.data = <unsigned char*>malloc(256)
    if b.data == NULL:
        raise MemoryError()
    b.len = 0
    b.cap = 256
    return 0


cdef inline int buf_reserve(Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap
    cdef unsigned char* grown
    if need <= b.cap:
        return 0
    cap = b.cap * 2
    if cap < need:
        cap = need
    grown = <unsigned char*>realloc(b.data, cap)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.cap = cap
    return 0


cdef inline int buf_byte(Buf* b, unsigned char c) except -1:
    if b.len >= b.cap:
        buf_reserve(b, 1)
    b.data[b.len] = c
    b.len += 1
    return 0


cdef int buf_put(Buf* b, const unsigned char* src, Py_ssize_t n, unsigned char mask) except -1:
    cdef Py_ssize_t i
    buf_reserve(b, n)
    if mask:
        for i in range(n):
            b.data[b.len + i] = src[i] ^ mask
    else:
        memcpy(b.data + b.len, src, n)
    b.len += n
    return 0


cdef inline int buf_be(Buf* b, uint64_t value, int width, unsigned char mask) except -1:
    """Append the low ``width`` bytes of ``value`` big-endian, XOR ``mask``."""
    cdef int i
    buf_reserve(b, width)
    for i in range(width):
        b.data[b.len + i] = <unsigned char>((value >> (8 * (width - 1 - i))) & 0xFF) ^ mask
    b.len += width
    return 0


cdef int buf_pybytes(Buf* b, object raw, unsigned char mask) except -1:
    buf_put(b, <const unsigned char*>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), mask)
    return 0


# --- compiled schema ----------------------------------------------------------------------------

cdef class _Node:
    """One (possibly nested) type: its kind, the DataType, and children for STRUCT/LIST."""
    cdef int kind
    cdef object dtype
    cdef list children

    def __cinit__(self, dtype):
        if not isinstance(dtype, DataType):
            raise SchemaError(f"expected DataType, got {dtype!r}")
        self.dtype = dtype
        self.kind = int(dtype.kind)
        if self.kind == K_STRUCT:
            self.children = [_Node(t) for _, t in dtype.fields]
        elif self.kind == K_LIST:
            self.children = [_Node(dtype.elem)]
        else:
            self.children = []


cdef class _Schema:
    cdef Py_ssize_t ncols
    cdef list nodes
    cdef bytes masks        # 0x00 or 0xFF per column
    cdef bytes null_tags    # the NULL tag per column
    cdef object keep_alive  # the types/orders the cache key's ids refer to

    def __cinit__(self, types, orders):
        types = tuple(types)
        self.nodes = [_Node(t) for t in types]
        self.ncols = len(types)
        if orders is None:
            self.masks = b"\x00" * self.ncols
            self.null_tags = bytes([TAG_NULL_LAST]) * self.ncols
        else:
            orders = tuple(orders)
            if len(orders) != self.ncols:
                raise SchemaError(f"{self.ncols} types but {len(orders)} orders")
            try:
                self.masks = bytes([0xFF if o.descending else 0 for o in orders])
                self.null_tags = bytes([TAG_NULL_FIRST if o.nulls_first else TAG_NULL_LAST for o in orders])
            except AttributeError:
                raise SchemaError(f"orders must be OrderType objects, got {orders!r}") from None
        self.keep_alive = (types, orders)


cdef dict _schemas = {}
cdef object _last_types = None
cdef object _last_orders = None
cdef _Schema _last_schema = None


cdef _Schema get_schema(object types, object orders):
    """Compiled schema for (types, orders), cached by the identity of the objects involved
    (the cache keeps them alive, so an id is never reused while its entry exists)."""
    global _last_types, _last_orders, _last_schema
    if types is _last_types and orders is _last_orders and _last_schema is not None:
        return _last_schema
    try:
        key = (tuple([id(t) for t in types]),
               None if orders is None else tuple([id(o) for o in orders]))
    except TypeError:
        raise SchemaError("types and orders must be sequences of DataType and OrderType") from None
    schema = _schemas.get(key)
    if schema is None:
        schema = _Schema(types, orders)
        if len(_schemas) > 4096:
            _schemas.clear()
        _schemas[key] = schema
    if type(types) is tuple and (orders is None or type(orders) is tuple):
        # only immutable sequences may be recognised by identity alone
        _last_types = types
        _last_orders = orders
        _last_schema = schema
    return <_Schema>schema


# --- encoding -------------------------------------------------------------------------------------

cdef inline int64_t days_from_civil(int64_t y, int64_t m, int64_t d):
    """Days since 1970-01-01 of a proleptic Gregorian date with year >= 1 (H. Hinnant)."""
    cdef int64_t era, yoe, doy, doe
    if m <= 2:
        y -= 1
    era = y // 400                     # y >= 0 here, so C division is floor division
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


cdef int enc_int(Buf* b, _Node node, object v, unsigned char mask) except -1:
    cdef int overflow = 0
    cdef long long x = 0
    cdef int width
    cdef long long lo, hi
    if node.kind == K_SMALLINT:
        width, lo, hi = 2, -32768, 32767
    elif node.kind == K_INT:
        width, lo, hi = 4, -2147483648, 2147483647
    else:
        width, lo, hi = 8, -9223372036854775807, 9223372036854775807
        lo -= 1
    if type(v) is int:
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if type(v) is not int or overflow or x < lo or x > hi:
        v = node.dtype.validate(v)     # raises TypeMismatchError / ValueOutOfRangeError
        x = v
    buf_be(b, (<uint64_t>x) ^ (<uint64_t>1 << (8 * width - 1)), width, mask)
    return 0


cdef int enc_float(Buf* b, _Node node, object v, unsigned char mask) except -1:
    cdef double d
    cdef float f
    cdef uint64_t bits64
    cdef uint32_t bits32
    if type(v) is float:
        d = PyFloat_AS_DOUBLE(v)
        if node.kind == K_REAL and isinf(<float>d) and not isinf(d):
            node.dtype.validate(v)     # raises ValueOutOfRangeError for REAL overflow
    else:
        d = PyFloat_AS_DOUBLE(node.dtype.validate(v))
    if node.kind == K_DOUBLE:
        if d != d:
            bits64 = 0x7FF8000000000000ULL
        else:
            if d == 0.0:
                d = 0.0
            memcpy(&bits64, &d, 8)
        if bits64 >> 63:
            bits64 = ~bits64
        else:
            bits64 |= (<uint64_t>1 << 63)
        buf_be(b, bits64, 8, mask)
    else:
        f = <float>d
        if f != f:
            bits32 = 0x7FC00000U
        else:
            if f == 0.0:
                f = 0.0
            memcpy(&bits32, &f, 4)
        if bits32 >> 31:
            bits32 = ~bits32
        else:
            bits32 |= (<uint32_t>1 << 31)
        buf_be(b, bits32, 4, mask)
    return 0


cdef int enc_string_bytes(Buf* b, const unsigned char* s, Py_ssize_t n, unsigned char mask) except -1:
    cdef const unsigned char* zero
    cdef Py_ssize_t i, chunk
    while n > 0:
        zero = <const unsigned char*>memchr(s, 0, n)
        if zero == NULL:
            buf_put(b, s, n, mask)
            break
        chunk = zero - s
        buf_put(b, s, chunk, mask)
        buf_byte(b, 0x00 ^ mask)
        buf_byte(b, 0xFF ^ mask)
        s += chunk + 1
        n -= chunk + 1
    buf_byte(b, 0x00 ^ mask)
    buf_byte(b, 0x01 ^ mask)
    return 0


cdef int enc_value(Buf* b, _Node node, object v, unsigned char mask) except -1:
    """Append the ascending encoding of non-NULL ``v`` XOR ``mask``."""
    cdef int kind = node.kind
    cdef const char* utf8
    cdef Py_ssize_t n
    cdef int64_t usecs
    if kind == K_BIGINT or kind == K_INT or kind == K_SMALLINT:
        return enc_int(b, node, v, mask)
    if kind == K_DOUBLE or kind == K_REAL:
        return enc_float(b, node, v, mask)
    if kind == K_VARCHAR:
        if type(v) is str:
            try:
                utf8 = PyUnicode_AsUTF8AndSize(v, &n)
            except UnicodeError:
                node.dtype.validate(v)  # raises ValueOutOfRangeError naming the problem
                raise
        else:
            v = node.dtype.validate(v)
            utf8 = PyUnicode_AsUTF8AndSize(v, &n)
        return enc_string_bytes(b, <const unsigned char*>utf8, n, mask)
    if kind == K_BYTEA:
        if type(v) is not bytes:
            v = node.dtype.validate(v)
        return enc_string_bytes(b, <const unsigned char*>PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), mask)
    if kind == K_BOOLEAN:
        if v is not True and v is not False:
            v = node.dtype.validate(v)
        return buf_byte(b, (1 if v else 0) ^ mask)
    if kind == K_DATE:
        if not cdt.PyDate_CheckExact(v):
            v = node.dtype.validate(v)
        usecs = days_from_civil(cdt.date_year(v), cdt.date_month(v), cdt.date_day(v))
        return buf_be(b, <uint64_t>(usecs + 2147483648), 4, mask)
    if kind == K_TIMESTAMP:
        if not cdt.PyDateTime_CheckExact(v) or cdt.datetime_tzinfo(v) is not None:
            v = node.dtype.validate(v)
        usecs = (days_from_civil(cdt.datetime_year(v), cdt.datetime_month(v), cdt.datetime_day(v)) * USECS_PER_DAY
                 + ((cdt.datetime_hour(v) * 60 + cdt.datetime_minute(v)) * 60 + cdt.datetime_second(v)) * <int64_t>1000000
                 + cdt.datetime_microsecond(v))
        return buf_be(b, (<uint64_t>usecs) ^ (<uint64_t>1 << 63), 8, mask)
    if kind == K_TIME:
        v = node.dtype.validate(v)
        usecs = ((cdt.time_hour(v) * 60 + cdt.time_minute(v)) * 60 + cdt.time_second(v)) * <int64_t>1000000 \
            + cdt.time_microsecond(v)
        return buf_be(b, (<uint64_t>usecs) ^ (<uint64_t>1 << 63), 8, mask)
    if kind == K_TIMESTAMPTZ:
        v = node.dtype.validate(v)
        usecs = _py.timestamptz_usecs(v)
        return buf_be(b, (<uint64_t>usecs) ^ (<uint64_t>1 << 63), 8, mask)
    if kind == K_DECIMAL:
        return buf_pybytes(b, _py.decimal_body(node.dtype.validate(v)), mask)
    if kind == K_INTERVAL:
        return buf_pybytes(b, _py.interval_body(node.dtype.validate(v)), mask)
    if kind == K_JSONB:
        return buf_pybytes(b, _py.jsonb_body(node.dtype.validate(v)), mask)
    if kind == K_STRUCT:
        v = node.dtype.validate(v)
        for child, field in zip(node.children, v):
            enc_nested(b, <_Node>child, field, mask)
        return 0
    if kind == K_LIST:
        v = node.dtype.validate(v)
        for element in v:
            buf_byte(b, LIST_ELEMENT ^ mask)
            enc_nested(b, <_Node>node.children[0], element, mask)
        return buf_byte(b, LIST_END ^ mask)
    raise SchemaError(f"unknown type {node.dtype!r}")


cdef int enc_nested(Buf* b, _Node node, object v, unsigned char mask) except -1:
    if v is None:
        return buf_byte(b, TAG_NULL_LAST ^ mask)
    buf_byte(b, TAG_NOT_NULL ^ mask)
    return enc_value(b, node, v, mask)


cdef int enc_row(Buf* b, _Schema schema, object values) except -1:
    cdef Py_ssize_t i
    cdef const unsigned char* masks = <const unsigned char*>PyBytes_AS_STRING(schema.masks)
    cdef const unsigned char* null_tags = <const unsigned char*>PyBytes_AS_STRING(schema.null_tags)
    if len(values) != schema.ncols:
        raise SchemaError(f"row has {len(values)} values but the schema has {schema.ncols} columns")
    for i in range(schema.ncols):
        v = values[i]
        if v is None:
            buf_byte(b, null_tags[i])
        else:
            buf_byte(b, TAG_NOT_NULL)
            enc_value(b, <_Node>schema.nodes[i], v, masks[i])
    return 0


def encode_row(values, types, orders=None):
    """Memcomparable bytes of one row; see :func:`relational.memcomparable.encode_row`."""
    cdef _Schema schema = get_schema(types, orders)
    cdef Buf b
    buf_init(&b)
    try:
        enc_row(&b, schema, values)
        return PyBytes_FromStringAndSize(<char*>b.data, b.len)
    finally:
        free(b.data)


def encode_rows(rows, types, orders=None, prefix=b""):
    """:func:`encode_row` for many rows with one schema (one call, one buffer); each result
    starts with the bytes ``prefix`` (a table key's vnode)."""
    cdef _Schema schema = get_schema(types, orders)
    cdef Buf b
    cdef list out = []
    cdef Py_ssize_t pn
    if type(prefix) is not bytes:
        raise TypeError(f"prefix must be bytes, got {type(prefix).__name__}")
    pn = PyBytes_GET_SIZE(prefix)
    buf_init(&b)
    try:
        for values in rows:
            b.len = 0
            if pn:
                buf_put(&b, <const unsigned char*>PyBytes_AS_STRING(prefix), pn, 0)
            enc_row(&b, schema, values)
            out.append(PyBytes_FromStringAndSize(<char*>b.data, b.len))
        return out
    finally:
        free(b.data)


# --- decoding -------------------------------------------------------------------------------------

cdef inline int need(Py_ssize_t pos, Py_ssize_t n, Py_ssize_t end, str what) except -1:
    if n > end - pos:
        raise DecodeError(f"truncated {what}: need {n} bytes, {end - pos} left", pos, "memcomparable")
    return 0


cdef inline uint64_t read_be(const unsigned char* p, Py_ssize_t pos, int width, unsigned char mask):
    """REQUIRES: the caller checked ``pos + width <= end``."""
    cdef uint64_t x = 0
    cdef int i
    for i in range(width):
        x = (x << 8) | (p[pos + i] ^ mask)
    return x


cdef object dec_string(bytes data, Py_ssize_t* ppos, int kind, unsigned char mask):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t start = ppos[0]
    cdef Py_ssize_t pos = start
    cdef const unsigned char* zero
    cdef unsigned char c, follow
    cdef Buf b
    if mask == 0:
        # fast path: no escaped NUL before the terminator -> decode straight from the input
        zero = <const unsigned char*>memchr(p + pos, 0, end - pos)
        if zero != NULL and (zero - p) + 1 < end and zero[1] == 0x01:
            ppos[0] = (zero - p) + 2
            return finish_string(p + start, (zero - p) - start, kind, start)
    buf_init(&b)
    try:
        while True:
            if pos >= end:
                raise DecodeError("unterminated string", start, "memcomparable")
            c = p[pos] ^ mask
            if c != 0x00:
                buf_byte(&b, c)
                pos += 1
                continue
            if pos + 1 >= end:
                raise DecodeError("truncated string escape", pos, "memcomparable")
            follow = p[pos + 1] ^ mask
            pos += 2
            if follow == 0x01:
                break
            if follow != 0xFF:
                raise DecodeError(f"bad string escape 0x00 0x{follow:02x}", pos - 2, "memcomparable")
            buf_byte(&b, 0)
        ppos[0] = pos
        return finish_string(b.data, b.len, kind, start)
    finally:
        free(b.data)


cdef object finish_string(const unsigned char* s, Py_ssize_t n, int kind, Py_ssize_t start):
    if kind == K_BYTEA:
        return PyBytes_FromStringAndSize(<const char*>s, n)
    try:
        return PyUnicode_DecodeUTF8(<const char*>s, n, "strict")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"VARCHAR is not valid UTF-8 ({exc.reason})", start, "memcomparable") from None


DEF DOUBLE_SIGN = 0x8000000000000000
DEF DOUBLE_EXP_MASK = 0x7FF0000000000000
DEF REAL_SIGN = 0x80000000
DEF REAL_EXP_MASK = 0x7F800000
DEF DOUBLE_CANONICAL_NAN = 0x7FF8000000000000   # the twin's FLOAT64_CANONICAL_NAN
DEF REAL_CANONICAL_NAN = 0x7FC00000             # the twin's FLOAT32_CANONICAL_NAN


cdef object dec_value(bytes data, Py_ssize_t* ppos, _Node node, unsigned char mask):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = ppos[0]
    cdef int kind = node.kind
    cdef uint64_t x
    cdef double d
    cdef float f
    cdef uint32_t x32
    if kind == K_BIGINT:
        need(pos, 8, end, "BIGINT")
        ppos[0] = pos + 8
        return PyLong_FromLongLong(<int64_t>(read_be(p, pos, 8, mask) ^ (<uint64_t>1 << 63)))
    if kind == K_INT:
        need(pos, 4, end, "INT")
        ppos[0] = pos + 4
        return PyLong_FromLongLong(<int64_t>read_be(p, pos, 4, mask) - 2147483648)
    if kind == K_SMALLINT:
        need(pos, 2, end, "SMALLINT")
        ppos[0] = pos + 2
        return PyLong_FromLongLong(<int64_t>read_be(p, pos, 2, mask) - 32768)
    if kind == K_DOUBLE:
        need(pos, 8, end, "DOUBLE")
        x = read_be(p, pos, 8, mask)
        x = (x ^ (<uint64_t>1 << 63)) if (x >> 63) else ~x
        # one value, one key: the NaN and zero forms the encoder never writes are refused
        if (x & DOUBLE_EXP_MASK) == DOUBLE_EXP_MASK and (x & ~(DOUBLE_SIGN | DOUBLE_EXP_MASK)) != 0 and \
                x != DOUBLE_CANONICAL_NAN:
            raise DecodeError("non-canonical DOUBLE NaN", pos, "memcomparable")
        if x == DOUBLE_SIGN:
            raise DecodeError("non-canonical DOUBLE zero", pos, "memcomparable")
        memcpy(&d, &x, 8)
        ppos[0] = pos + 8
        return d
    if kind == K_REAL:
        need(pos, 4, end, "REAL")
        x32 = <uint32_t>read_be(p, pos, 4, mask)
        x32 = (x32 ^ (<uint32_t>1 << 31)) if (x32 >> 31) else ~x32
        if (x32 & REAL_EXP_MASK) == REAL_EXP_MASK and (x32 & ~(REAL_SIGN | REAL_EXP_MASK)) != 0 and \
                x32 != REAL_CANONICAL_NAN:
            raise DecodeError("non-canonical REAL NaN", pos, "memcomparable")
        if x32 == REAL_SIGN:
            raise DecodeError("non-canonical REAL zero", pos, "memcomparable")
        memcpy(&f, &x32, 4)
        ppos[0] = pos + 4
        return <double>f
    if kind == K_VARCHAR or kind == K_BYTEA:
        return dec_string(data, ppos, kind, mask)
    if kind == K_BOOLEAN:
        need(pos, 1, end, "BOOLEAN")
        x = p[pos] ^ mask
        if x > 1:
            raise DecodeError(f"bad BOOLEAN byte 0x{x:02x}", pos, "memcomparable")
        ppos[0] = pos + 1
        return x == 1
    if kind == K_DATE:
        need(pos, 4, end, "DATE")
        ppos[0] = pos + 4
        return _py.days_to_date(<int64_t>read_be(p, pos, 4, mask) - 2147483648, pos)
    if kind == K_TIME:
        need(pos, 8, end, "TIME")
        ppos[0] = pos + 8
        return _py.usecs_to_time(<int64_t>(read_be(p, pos, 8, mask) ^ (<uint64_t>1 << 63)), pos)
    if kind == K_TIMESTAMP or kind == K_TIMESTAMPTZ:
        need(pos, 8, end, "TIMESTAMPTZ" if kind == K_TIMESTAMPTZ else "TIMESTAMP")
        ppos[0] = pos + 8
        return _py.usecs_to_datetime(<int64_t>(read_be(p, pos, 8, mask) ^ (<uint64_t>1 << 63)),
                                     kind == K_TIMESTAMPTZ, pos)
    if kind == K_DECIMAL:
        value, newpos = _py.decode_decimal(data, pos, mask)
        ppos[0] = newpos
        return value
    if kind == K_JSONB:
        value, newpos = _py.decode_jsonb(data, pos, mask)
        ppos[0] = newpos
        return value
    if kind == K_INTERVAL:
        need(pos, 16, end, "INTERVAL")
        raw = bytes([p[pos + i] ^ mask for i in range(16)])
        ppos[0] = pos + 16
        try:
            return _py.decode_interval(raw)
        except (ValueError, OverflowError):
            raise DecodeError("INTERVAL out of range", pos, "memcomparable") from None
    if kind == K_STRUCT:
        fields = PyTuple_New(len(node.children))
        for i, child in enumerate(node.children):
            value = dec_nested(data, ppos, <_Node>child, mask)
            Py_INCREF(value)
            PyTuple_SET_ITEM(fields, i, value)
        return fields
    if kind == K_LIST:
        elements = []
        while True:
            pos = ppos[0]
            need(pos, 1, end, "LIST marker")
            x = p[pos] ^ mask
            ppos[0] = pos + 1
            if x == LIST_END:
                return elements
            if x != LIST_ELEMENT:
                raise DecodeError(f"bad LIST marker 0x{x:02x}", pos, "memcomparable")
            elements.append(dec_nested(data, ppos, <_Node>node.children[0], mask))
    raise SchemaError(f"unknown type {node.dtype!r}")


cdef object dec_nested(bytes data, Py_ssize_t* ppos, _Node node, unsigned char mask):
    cdef Py_ssize_t pos = ppos[0]
    cdef unsigned char tag
    need(pos, 1, PyBytes_GET_SIZE(data), "null tag")
    tag = (<const unsigned char*>PyBytes_AS_STRING(data))[pos] ^ mask
    if tag == TAG_NULL_LAST:
        ppos[0] = pos + 1
        return None
    if tag != TAG_NOT_NULL:
        raise DecodeError(f"bad nested null tag 0x{tag:02x}", pos, "memcomparable")
    ppos[0] = pos + 1
    return dec_value(data, ppos, node, mask)


cdef tuple dec_row(bytes data, Py_ssize_t* ppos, _Schema schema):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef const unsigned char* masks = <const unsigned char*>PyBytes_AS_STRING(schema.masks)
    cdef const unsigned char* null_tags = <const unsigned char*>PyBytes_AS_STRING(schema.null_tags)
    cdef Py_ssize_t i, pos
    cdef unsigned char tag
    row = PyTuple_New(schema.ncols)
    for i in range(schema.ncols):
        pos = ppos[0]
        need(pos, 1, end, "null tag")
        tag = p[pos]
        if tag == null_tags[i]:
            value = None
            ppos[0] = pos + 1
        elif tag != TAG_NOT_NULL:
            raise DecodeError(f"bad null tag 0x{tag:02x}", pos, "memcomparable")
        else:
            ppos[0] = pos + 1
            value = dec_value(data, ppos, <_Node>schema.nodes[i], masks[i])
        Py_INCREF(value)
        PyTuple_SET_ITEM(row, i, value)
    return <tuple>row


cdef tuple dec_whole(object data, _Schema schema, Py_ssize_t offset=0):
    cdef Py_ssize_t pos = offset
    if type(data) is not bytes:
        data = _py._as_key_bytes(data)
    if offset and (offset < 0 or offset > PyBytes_GET_SIZE(data)):
        raise DecodeError(f"offset {offset} outside a buffer of {len(data)} bytes", offset, "memcomparable")
    row = dec_row(<bytes>data, &pos, schema)
    if pos != PyBytes_GET_SIZE(data):
        raise DecodeError(f"{PyBytes_GET_SIZE(data) - pos} trailing bytes after the row", pos, "memcomparable")
    return row


def decode_row(data, types, orders=None):
    """Inverse of :func:`encode_row`; the whole buffer must be one row."""
    return dec_whole(data, get_schema(types, orders))


def decode_rows(datas, types, orders=None, Py_ssize_t offset=0):
    """:func:`decode_row` for many buffers with one schema; with ``offset``, each row starts
    that many bytes in (a table key after its vnode) and must end its buffer."""
    cdef _Schema schema = get_schema(types, orders)
    return [dec_whole(d, schema, offset) for d in datas]


def decode_row_prefix(data, types, orders=None, Py_ssize_t offset=0):
    """Decode one row starting at ``offset``; return ``(row, end_offset)``."""
    cdef _Schema schema = get_schema(types, orders)
    cdef Py_ssize_t pos = offset
    if type(data) is not bytes:
        data = _py._as_key_bytes(data)
    if offset < 0 or offset > PyBytes_GET_SIZE(data):
        raise DecodeError(f"offset {offset} outside a buffer of {len(data)} bytes", offset, "memcomparable")
    row = dec_row(<bytes>data, &pos, schema)
    return row, pos
