# cython: language_level=3
"""Full-key comparison for native modules (``cimport`` only; no extension of its own).

Order (hummock/key.py, docs/format.md section 3): user key (all but the last 8 bytes) bytewise
ascending, then the 8-byte inverted-epoch suffix bytewise ascending (= epoch descending).
REQUIRES: both lengths >= 8 (callers check keys are at least MIN_FULL_KEY_LEN = 12 bytes).

The bytes are compared inline, 8 at a time as big-endian words (bytewise order), not through
``memcmp``: keys are short (tens of bytes) and a point get compares about thirty of them, so a
library call per comparison cost more than the comparing.
"""

from libc.stdint cimport uint64_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define HUMMOCK_BSWAP64(x) __builtin_bswap64(x)
    #else
    static inline unsigned long long HUMMOCK_BSWAP64(unsigned long long x) {
        x = ((x & 0x00000000FFFFFFFFULL) << 32) | (x >> 32);
        x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
        return ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    }
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define HUMMOCK_LOAD_BE64(v) (v)
    #else
    #define HUMMOCK_LOAD_BE64(v) HUMMOCK_BSWAP64(v)
    #endif
    """
    uint64_t HUMMOCK_LOAD_BE64(uint64_t v) nogil


cdef inline uint64_t load_be64(const unsigned char* p) noexcept nogil:
    """The 8 bytes at ``p`` as a big-endian number (any alignment)."""
    cdef uint64_t v
    memcpy(&v, p, 8)
    return HUMMOCK_LOAD_BE64(v)


cdef inline int cmp_mem(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept nogil:
    """``memcmp(a, b, n)``'s sign (-1, 0, 1), inline."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x, y
    while i + 8 <= n:
        x = load_be64(a + i)
        y = load_be64(b + i)
        if x != y:
            return -1 if x < y else 1
        i += 8
    while i < n:
        if a[i] != b[i]:
            return -1 if a[i] < b[i] else 1
        i += 1
    return 0


cdef inline int cmp_full_keys(const unsigned char* a, Py_ssize_t alen,
                              const unsigned char* b, Py_ssize_t blen) noexcept nogil:
    cdef Py_ssize_t ua = alen - 8
    cdef Py_ssize_t ub = blen - 8
    cdef int c = cmp_mem(a, b, ua if ua < ub else ub)
    cdef uint64_t x, y
    if c != 0:
        return c
    if ua != ub:
        return -1 if ua < ub else 1
    x = load_be64(a + ua)
    y = load_be64(b + ub)
    return 0 if x == y else (-1 if x < y else 1)
