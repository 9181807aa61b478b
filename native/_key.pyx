# cython: language_level=3
"""Native fast path for the full-key functions; the twin of ``hummock/_key_py.py``.

Implements the layout written down in ``docs/format.md`` section 3 (constants in
``hummock/key.py``): ``table_id (u32be) || table_key || (2**64 - 1 - epoch) (u64be)``.
Same public names, signatures, exceptions and messages as the twin, byte-identical output;
``tests/test_key.py`` checks both against golden bytes and against each other.

Safety: input is never trusted. Every argument's type and range is checked before it is
converted; every full key's length is checked (at least 12 bytes) before any byte of it is
read, and every read and write below stays inside ``[0, len)`` of its buffer. Non-``bytes``
keys (``bytearray``, ``memoryview``) are first copied with ``bytes()``, exactly as the twin
does, so no buffer can change or be released under a raw pointer.

Callers: :mod:`hummock.key` (through :func:`hummock._twins.load`) and the tests only.
No global mutable state.
"""

from cpython.bool cimport PyBool_Check
from cpython.bytearray cimport PyByteArray_Check
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.list cimport PyList_Check
from cpython.long cimport PyLong_Check
from cpython.memoryview cimport PyMemoryView_Check
from cpython.tuple cimport PyTuple_Check
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from hummock.errors import InvalidArgumentError, KeyFormatError


cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    # Declared without an exception clause so that a failure (negative or too large) can be
    # turned into InvalidArgumentError here instead of propagating as OverflowError.
    unsigned long long _as_u64 "PyLong_AsUnsignedLongLong"(object) noexcept


# Mirrors of hummock.key's constants: part of the on-disk format, do not change.
cdef enum:
    TABLE_ID_LEN = 4       # part of the on-disk format, do not change
    EPOCH_LEN = 8          # part of the on-disk format, do not change
    MIN_FULL_KEY_LEN = 12  # TABLE_ID_LEN + EPOCH_LEN
cdef uint64_t MAX_TABLE_ID = 0xFFFFFFFFULL          # part of the on-disk format, do not change
cdef uint64_t MAX_EPOCH = 0xFFFFFFFFFFFFFFFFULL     # part of the on-disk format, do not change


# ---- argument checks (messages identical to the twin's) -----------------------------------

cdef inline bint _to_u64(object value, uint64_t limit, uint64_t* out) except -1:
    """Store ``value`` in ``*out`` and return True if it is an int (not bool) in [0, limit]."""
    cdef unsigned long long v
    if not PyLong_Check(value) or PyBool_Check(value):
        return False
    v = _as_u64(value)
    if v == <unsigned long long>-1 and PyErr_Occurred() != NULL:
        PyErr_Clear()  # OverflowError: negative or wider than 64 bits
        return False
    if v > limit:
        return False
    out[0] = v
    return True


cdef inline uint32_t _table_id(object table_id) except? 0xFFFFFFFF:
    cdef uint64_t v
    if not _to_u64(table_id, MAX_TABLE_ID, &v):
        raise InvalidArgumentError(f"table_id must be an int in [0, 4294967295], got {table_id!r}")
    return <uint32_t>v


cdef inline uint64_t _epoch(object epoch) except? 0xFFFFFFFFFFFFFFFF:
    cdef uint64_t v
    if not _to_u64(epoch, MAX_EPOCH, &v):
        raise InvalidArgumentError(
            f"epoch must be an int in [0, 18446744073709551615], got {epoch!r}")
    return v


cdef inline bytes _as_bytes(object value, str what):
    if PyBytes_Check(value):
        return <bytes>value
    if PyByteArray_Check(value) or PyMemoryView_Check(value):
        return bytes(value)
    raise InvalidArgumentError(
        f"{what} must be bytes-like (bytes, bytearray, memoryview), got {type(value).__name__}")


cdef inline bytes _full_key(object value, str what):
    cdef bytes data = _as_bytes(value, what)
    if PyBytes_GET_SIZE(data) < MIN_FULL_KEY_LEN:
        raise KeyFormatError(
            f"{what} must be at least 12 bytes (table id + epoch), got {PyBytes_GET_SIZE(data)}")
    return data


# ---- big-endian integers; callers guarantee the 4 or 8 bytes are inside the buffer ---------

cdef inline void _put_u32(unsigned char* p, uint32_t v) noexcept:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void _put_u64(unsigned char* p, uint64_t v) noexcept:
    cdef int i
    for i in range(8):
        p[i] = <unsigned char>(v >> (56 - 8 * i))


cdef inline uint32_t _get_u32(const unsigned char* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t _get_u64(const unsigned char* p) noexcept:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return v


cdef bytes _encode(uint32_t table_id, bytes key, uint64_t inverted_epoch):
    cdef Py_ssize_t n = PyBytes_GET_SIZE(key)
    if n > PY_SSIZE_T_MAX - MIN_FULL_KEY_LEN:  # C overflow guard; unreachable in practice
        raise InvalidArgumentError(f"table_key is too long ({n} bytes)")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n + MIN_FULL_KEY_LEN)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    _put_u32(p, table_id)
    memcpy(p + TABLE_ID_LEN, PyBytes_AS_STRING(key), <size_t>n)
    _put_u64(p + TABLE_ID_LEN + n, inverted_epoch)
    return out


# ---- public functions (documented in hummock/_key_py.py and hummock/key.py) ----------------

def encode_full_key(table_id, table_key, epoch):
    """Return ``table_id (u32be) || table_key || (2**64 - 1 - epoch) (u64be)``.

    REQUIRES: table_id in [0, 2**32 - 1], table_key bytes-like, epoch in [0, 2**64 - 1];
    raises InvalidArgumentError otherwise.
    """
    cdef uint32_t tid = _table_id(table_id)
    cdef bytes key = _as_bytes(table_key, "table_key")
    cdef uint64_t e = _epoch(epoch)
    return _encode(tid, key, MAX_EPOCH - e)


def encode_full_keys(table_id, table_keys, epoch):
    """Batch encode_full_key over a list or tuple of table keys (one table id, one epoch).

    Raises InvalidArgumentError, naming the index of the first bad key, on any bad argument.
    """
    cdef uint32_t tid = _table_id(table_id)
    if not (PyList_Check(table_keys) or PyTuple_Check(table_keys)):
        raise InvalidArgumentError(
            "table_keys must be a list or tuple of bytes-like keys, "
            f"got {type(table_keys).__name__}")
    cdef uint64_t inverted = MAX_EPOCH - _epoch(epoch)
    cdef list out = []
    cdef Py_ssize_t i
    cdef object table_key
    # Index by position on every step: len() is re-read, so a list cannot shrink under us.
    i = 0
    while i < len(table_keys):
        table_key = table_keys[i]
        if not PyBytes_Check(table_key):
            table_key = _as_bytes(table_key, f"table_keys[{i}]")
        out.append(_encode(tid, <bytes>table_key, inverted))
        i += 1
    return out


def decode_full_key(full_key):
    """Split a full key into ``(table_id, table_key, epoch)``.

    REQUIRES: full_key bytes-like; raises KeyFormatError if shorter than 12 bytes.
    """
    cdef bytes data = _full_key(full_key, "full_key")
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    return (_get_u32(p),
            PyBytes_FromStringAndSize(<const char*>p + TABLE_ID_LEN, n - MIN_FULL_KEY_LEN),
            MAX_EPOCH - _get_u64(p + n - EPOCH_LEN))


def user_key(full_key):
    """Return ``table_id || table_key`` (the full key without its epoch suffix).

    REQUIRES: full_key bytes-like; raises KeyFormatError if shorter than 12 bytes.
    """
    cdef bytes data = _full_key(full_key, "full_key")
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data) - EPOCH_LEN)


def epoch_of(full_key):
    """Return the epoch stored in a full key's suffix.

    REQUIRES: full_key bytes-like; raises KeyFormatError if shorter than 12 bytes.
    """
    cdef bytes data = _full_key(full_key, "full_key")
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    return MAX_EPOCH - _get_u64(p + PyBytes_GET_SIZE(data) - EPOCH_LEN)


def compare_full_keys(a, b):
    """Return -1, 0 or 1: user key bytewise ascending, then epoch descending.

    The user keys are compared on their own first (a memcmp of whole full keys is wrong when
    one table key is a prefix of the other). REQUIRES: both bytes-like; raises KeyFormatError
    if either is shorter than 12 bytes.
    """
    cdef bytes da = _full_key(a, "a")
    cdef bytes db = _full_key(b, "b")
    cdef Py_ssize_t ua = PyBytes_GET_SIZE(da) - EPOCH_LEN
    cdef Py_ssize_t ub = PyBytes_GET_SIZE(db) - EPOCH_LEN
    cdef const char* pa = PyBytes_AS_STRING(da)
    cdef const char* pb = PyBytes_AS_STRING(db)
    cdef int c = memcmp(pa, pb, <size_t>(ua if ua < ub else ub))
    if c == 0:
        if ua != ub:
            return -1 if ua < ub else 1
        # Same user key: the suffix holds the inverted epoch, so ascending = epoch descending.
        c = memcmp(pa + ua, pb + ub, EPOCH_LEN)
    return (c > 0) - (c < 0)
