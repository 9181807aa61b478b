# cython: language_level=3
"""A growable C byte buffer that native encoders append to (``cimport`` only; no extension of
its own, like ``_keycmp.pxd``).

``Buf`` is ``data[0:len]`` written, ``cap`` allocated; a zeroed ``Buf`` (``data`` NULL, ``len``
and ``cap`` 0) is empty and valid. Every ``put_*`` makes room first (:func:`grow`, doubling, at
least 64 bytes), so it never writes past ``cap``; ``grow`` raises ``MemoryError`` when
``realloc`` fails and leaves the buffer as it was. The owner frees ``data`` (``free``) when done,
also on error, and may reuse a buffer by setting ``len`` back to 0. Varints are LEB128 (7 bits a
byte, low group first, at most 10 bytes), little-endian integers are the low ``width`` bytes;
the layouts they serve are docs/format.md section 2.

Callers: ``native/_value_encoding.pyx`` (row and column encoding).
"""

from libc.stdint cimport uint8_t, uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcpy


cdef struct Buf:
    unsigned char *data
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int grow(Buf *b, Py_ssize_t n) except -1:
    """Make room for ``n`` more bytes."""
    cdef Py_ssize_t cap
    cdef unsigned char *data
    if n <= b.cap - b.len:
        return 0
    cap = b.cap * 2
    if cap < b.len + n:
        cap = b.len + n
    if cap < 64:
        cap = 64
    data = <unsigned char *>realloc(b.data, cap)
    if data == NULL:
        raise MemoryError()
    b.data = data
    b.cap = cap
    return 0


cdef inline int put_u8(Buf *b, uint8_t v) except -1:
    if b.len >= b.cap:
        grow(b, 1)
    b.data[b.len] = v
    b.len += 1
    return 0


cdef inline int put_le(Buf *b, uint64_t v, int width) except -1:
    """Append the low ``width`` bytes of ``v``, little-endian."""
    cdef int i
    grow(b, width)
    for i in range(width):
        b.data[b.len + i] = <uint8_t>(v >> (8 * i))
    b.len += width
    return 0


cdef inline int put_varint(Buf *b, uint64_t v) except -1:
    grow(b, 10)
    while v >= 0x80:
        b.data[b.len] = <uint8_t>((v & 0x7F) | 0x80)
        b.len += 1
        v >>= 7
    b.data[b.len] = <uint8_t>v
    b.len += 1
    return 0


cdef inline int put_bytes(Buf *b, const char *p, Py_ssize_t n) except -1:
    grow(b, n)
    memcpy(b.data + b.len, p, n)
    b.len += n
    return 0


cdef inline int put_raw(Buf *b, const char *p, Py_ssize_t n) except -1:
    """Append a varint length, then the bytes."""
    put_varint(b, <uint64_t>n)
    return put_bytes(b, p, n)
