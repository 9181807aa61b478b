# cython: language_level=3
"""Native block builder and iterator; twin of ``hummock/sstable/_block_py.py``.

Same layout (docs/format.md section 4.1), same names, same exceptions and messages, identical
bytes. The build loop, the seek and the iteration run in C; every varint, length and offset read
from a block is checked against the entry area's end before use, so malformed content raises
``CorruptionError`` and never reads out of bounds.

A validated ``Block`` copies its content (and later its restart index) into the huge-page block
arena of ``_block_arena.pxi``, freed with the block; iterators keep their block alive, a block's
own shared iterator does not (no reference cycle, so an evicted block's memory goes back at
once).

Layout: this file holds the module's imports, the format's constants and the small inline
helpers every part uses; the parts are included at its end, one responsibility each --
``_block_builder.pxi`` (``BlockBuilder``), ``_block_iterator.pxi`` (``BlockIterator``),
``_block_arena.pxi``, ``_block_view.pxi`` (``Block`` and the first-key index search) and
``_block_load.pxi`` (a block read from a file). One extension module, one state: no part may
be included anywhere else. ``_block.pxd`` declares what other native modules cimport.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsUnsignedLongLong, PyLong_FromUnsignedLongLong
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from native._filter cimport filter_key_hash
from native._xxh64 cimport xxh64
from native._keycmp cimport cmp_full_keys, cmp_mem, load_be64

import array

import numpy as np

from hummock.errors import CorruptionError, InvalidArgumentError

# part of the on-disk format, do not change (mirrored in the twin and hummock/key.py)
DEF EPOCH_LEN = 8
DEF MIN_FULL_KEY_LEN = 12
DEF TAG_PUT = 0x01
DEF TAG_DELETE = 0x02
DEF STORED_TRAILER_LEN = 13              # u8 compression tag, u32 content length, u64 xxh64 (format 4.2)
DEF MAX_STORED_CONTENT = 1073741824      # MAX_BLOCK_CONTENT, part of the format
# A C constant: compared with a bare literal this large, a C integer becomes a Python int
# (three PyLongs a key in c_add, one a varint in the iterator, before this was typed).
cdef Py_ssize_t U32_MAX = <Py_ssize_t>0xFFFFFFFFU


cdef inline uint32_t load_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0]) | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t load_u64_be(const unsigned char* p) noexcept nogil:
    """The 8 bytes at ``p``, big-endian: one load and a byte swap (``_keycmp.load_be64``)."""
    return load_be64(p)


cdef inline bytes bytes_arg(object value, str what):
    """``value`` (bytes, bytearray or memoryview) as bytes; anything else is InvalidArgumentError
    "``what`` must be bytes, got <type>" (the twins' message)."""
    if type(value) is bytes:
        return <bytes>value
    if not isinstance(value, (bytearray, memoryview)):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(value).__name__}")
    return bytes(value)


cdef bytes as_key(object full_key):
    """Checked full key as bytes (same rules and messages as the twin's ``_check_key``)."""
    full_key = bytes_arg(full_key, "full key")
    if PyBytes_GET_SIZE(full_key) < MIN_FULL_KEY_LEN:
        raise InvalidArgumentError(f"full key of {PyBytes_GET_SIZE(full_key)} bytes is shorter than {MIN_FULL_KEY_LEN}")
    return <bytes>full_key


cdef inline int read_varint32(const unsigned char* p, Py_ssize_t limit, Py_ssize_t* ppos, uint32_t* out) noexcept:
    """A varint32 at ``ppos[0]`` before ``limit``: 0 and the value, or -1 (truncated, too long,
    over 32 bits; the same rules as ``BlockIterator.varint``)."""
    cdef Py_ssize_t pos = ppos[0]
    cdef uint64_t result = 0
    cdef int shift = 0, i
    cdef unsigned char byte
    for i in range(5):
        if pos >= limit:
            return -1
        byte = p[pos]
        pos += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not (byte & 0x80):
            if result > <uint64_t>0xFFFFFFFFU:
                return -1
            out[0] = <uint32_t>result
            ppos[0] = pos
            return 0
        shift += 7
    return -1


cdef inline uint64_t word_at(const unsigned char* k, Py_ssize_t ulen, Py_ssize_t at) noexcept:
    """The 8 bytes of a user key (``ulen`` bytes at ``k``) from ``at``, big-endian, zero-padded
    past its end."""
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    if at + 8 <= ulen:
        return load_be64(k + at)
    for i in range(8):
        w <<= 8
        if at + i < ulen:
            w |= k[at + i]
    return w


cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil   # GCC/Clang; REQUIRES a nonzero argument


cdef inline Py_ssize_t common_len(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    """How many leading bytes of ``a`` and ``b`` (``n`` each) are equal: 8 bytes at a time, the
    first differing byte of a word from its leading zero bits (big-endian loads)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x
    while i + 8 <= n:
        x = load_be64(a + i) ^ load_be64(b + i)
        if x:
            return i + (__builtin_clzll(x) >> 3)
        i += 8
    while i < n and a[i] == b[i]:
        i += 1
    return i


cdef inline int memcmp_eq(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    """1 if the first ``n`` bytes are equal, else 0 (8 bytes at a time)."""
    return common_len(a, b, n) == n


# The module's parts, one responsibility each (included: one extension module, one state):
include "_block_builder.pxi"    # BlockBuilder
include "_block_iterator.pxi"   # BlockIterator
include "_block_arena.pxi"      # the huge-page arena validated blocks live in
include "_block_view.pxi"       # Block (validated, cached) and the first-key index search
include "_block_load.pxi"       # reading a block from a file: pread, checksum, lz4 without the GIL
