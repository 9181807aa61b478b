# cython: language_level=3
"""LZ4 block-format decompression for native modules (``cimport`` only; runs without the GIL).

Why here: the ``lz4`` wheel exports no C symbols and the machine has no liblz4 headers, so a
native reader that must decompress blocks without the GIL (``native/_block.pyx``'s
``load_file_block``) decodes the format itself. Compression stays with the ``lz4`` package.

``lz4_decode(src, n, dst, cap)`` decodes the LZ4 *block* format (the layout ``lz4.block.compress``
writes with ``store_size=False``: sequences of a token, literals, a 2-byte offset and a match
length, the last sequence literals only). It returns the number of bytes written, or -1 when
``src[0 .. n)`` is not a block that decodes into ``cap`` bytes. Every read of ``src`` is checked
against ``n`` and every write of ``dst`` against ``cap`` before it happens, so any input is safe.

The end-of-block rules are the reference decoder's (``LZ4_decompress_safe``): a sequence whose
literals end within the last 12 output bytes (MFLIMIT), or that leaves fewer than 8 input bytes
after its literals, must be the last one and consume the input exactly; a match may not end
within the last 5 output bytes (LASTLITERALS); an offset may not reach before the output's start.
Stricter than the reference only where its output is undefined (an offset of 0). Callers that
must agree with ``lz4.block.decompress`` byte for byte treat -1 as "ask the Python path", which
then raises the canonical error (tests/test_block_load.py checks agreement on mutated blocks).
"""

from libc.stdint cimport uint8_t
from libc.string cimport memcpy

DEF MINMATCH = 4
DEF LASTLITERALS = 5
DEF MFLIMIT = 12


cdef inline Py_ssize_t _extended(const uint8_t* src, Py_ssize_t n, Py_ssize_t* ip, Py_ssize_t length,
                                 Py_ssize_t limit) noexcept nogil:
    """``length`` (15) plus the length bytes at ``ip[0]`` (each 255 continues), ``ip[0]`` moved
    past them; -1 when the input ends first or the length passes ``limit``."""
    cdef unsigned int b
    while True:
        if ip[0] >= n:
            return -1
        b = src[ip[0]]
        ip[0] += 1
        length += b
        if length > limit:
            return -1
        if b != 255:
            return length


cdef inline Py_ssize_t lz4_decode(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t cap) noexcept nogil:
    cdef Py_ssize_t ip = 0, op = 0, length, offset, end, chunk, start
    cdef unsigned int token
    if n <= 0 or cap < 0:
        return -1
    while True:
        if ip >= n:
            return -1
        token = src[ip]
        ip += 1
        length = token >> 4
        if length == 15:
            length = _extended(src, n, &ip, length, n)    # literals cannot be longer than the input
            if length < 0:
                return -1
        end = op + length
        if end > cap - MFLIMIT or ip + length > n - (2 + 1 + LASTLITERALS):
            # the last sequence: its literals end the input exactly and fit the output
            if ip + length != n or end > cap:
                return -1
            memcpy(dst + op, src + ip, length)
            return end
        if length <= 16 and ip + 16 <= n and op + 16 <= cap:
            # short literals: one fixed-size copy (the bytes past ``end`` are rewritten later;
            # the copy stays inside both buffers)
            memcpy(dst + op, src + ip, 16)
        else:
            memcpy(dst + op, src + ip, length)
        ip += length
        op = end
        # ip + 8 <= n here (the test above), so the offset's two bytes are in bounds
        offset = src[ip] | (<Py_ssize_t>src[ip + 1] << 8)
        ip += 2
        if offset == 0 or offset > op:
            return -1
        length = token & 15
        if length == 15:
            length = _extended(src, n, &ip, length, cap)
            if length < 0:
                return -1
        length += MINMATCH
        end = op + length
        if end > cap - LASTLITERALS:
            return -1
        start = op - offset
        if offset >= 8 and end + 8 <= cap:
            # 8 bytes at a time: each chunk reads bytes at least 8 back, all written already
            # (also by this copy's earlier chunks); the last chunk may pass ``end`` by up to 7
            # bytes, inside the output, rewritten later
            while op < end:
                memcpy(dst + op, dst + start, 8)
                op += 8
                start += 8
            op = end
        elif offset >= length:
            memcpy(dst + op, dst + start, length)
            op = end
        else:
            # overlapping: copy the period, then ever larger runs of what is already written
            # (the distance from start to op doubles; each copy reads only written bytes)
            while op < end:
                chunk = op - start
                if chunk > end - op:
                    chunk = end - op
                memcpy(dst + op, dst + start, chunk)
                op += chunk
