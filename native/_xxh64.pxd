# cython: language_level=3
"""XXH64 (the reference algorithm of xxHash) for native modules (``cimport`` only).

``xxh64(p, n, seed)`` reads exactly ``p[0 .. n)``; callers bounds-check ``n`` first. Results
equal the ``xxhash`` package's ``xxh64_intdigest`` (tests pin both). Used by
``native/_vnode.pyx`` (vnode hashes) and ``native/_filter.pyx`` (bloom filter key hashes).
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _load64(const uint8_t* p) noexcept nogil:
    return (<uint64_t>p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16)
            | (<uint64_t>p[3] << 24) | (<uint64_t>p[4] << 32) | (<uint64_t>p[5] << 40)
            | (<uint64_t>p[6] << 48) | (<uint64_t>p[7] << 56))


cdef inline uint32_t _load32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


cdef inline uint64_t _xround(uint64_t acc, uint64_t lane) noexcept nogil:
    acc += lane * 14029467366897019727ULL
    acc = _rotl64(acc, 31)
    return acc * 11400714785074694791ULL


cdef inline uint64_t _xmerge(uint64_t acc, uint64_t v) noexcept nogil:
    acc ^= _xround(0, v)
    return acc * 11400714785074694791ULL + 9650029242287828579ULL


cdef inline uint64_t xxh64(const uint8_t* p, size_t n, uint64_t seed) noexcept nogil:
    cdef uint64_t P1 = 11400714785074694791ULL
    cdef uint64_t P2 = 14029467366897019727ULL
    cdef uint64_t P3 = 1609587929392839161ULL
    cdef uint64_t P4 = 9650029242287828579ULL
    cdef uint64_t P5 = 2870177450012600261ULL
    cdef size_t left = n
    cdef uint64_t h, v1, v2, v3, v4
    if left >= 32:
        v1 = seed + P1 + P2
        v2 = seed + P2
        v3 = seed
        v4 = seed - P1
        while left >= 32:
            v1 = _xround(v1, _load64(p))
            v2 = _xround(v2, _load64(p + 8))
            v3 = _xround(v3, _load64(p + 16))
            v4 = _xround(v4, _load64(p + 24))
            p += 32
            left -= 32
        h = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
        h = _xmerge(h, v1)
        h = _xmerge(h, v2)
        h = _xmerge(h, v3)
        h = _xmerge(h, v4)
    else:
        h = seed + P5
    h += <uint64_t>n
    while left >= 8:
        h ^= _xround(0, _load64(p))
        h = _rotl64(h, 27) * P1 + P4
        p += 8
        left -= 8
    if left >= 4:
        h ^= <uint64_t>_load32(p) * P1
        h = _rotl64(h, 23) * P2 + P3
        p += 4
        left -= 4
    while left > 0:
        h ^= <uint64_t>p[0] * P5
        h = _rotl64(h, 11) * P1
        p += 1
        left -= 1
    h ^= h >> 33
    h *= P2
    h ^= h >> 29
    h *= P3
    h ^= h >> 32
    return h
