# cython: language_level=3
"""C-level view of ``native/_filter.pyx`` for other native modules: hash a user key once
(:func:`filter_key_hash`) and probe any number of filters with it (``FilterReader.probe``), with
no Python call per probe. Used by the read path's point gets (imm and SST filters)."""

from libc.stdint cimport uint8_t, uint32_t, uint64_t


cdef uint64_t filter_key_hash(const uint8_t* p, size_t n) noexcept nogil


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define HUMMOCK_FILTER_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define HUMMOCK_FILTER_PREFETCH(p) ((void)(p))
    #endif
    """
    void HUMMOCK_FILTER_PREFETCH(const void* p) noexcept nogil


cdef class FilterReader:
    cdef bytes _data          # owns the buffer _bits points into
    cdef str _name
    cdef const uint8_t* _bits
    cdef uint64_t _num_bits   # == 8 * (len(_data) - HEADER_LEN), checked in __init__
    cdef uint32_t _num_keys
    cdef int _probes_n

    cdef inline bint probe(self, uint64_t h) noexcept nogil:
        """False if no key with hash ``h`` was added (see the module docstring of the pyx)."""
        if self._num_bits == 0:
            return False
        cdef uint32_t g = <uint32_t>h
        cdef uint32_t delta = <uint32_t>(h >> 32)
        cdef uint64_t b
        cdef int j
        for j in range(self._probes_n):
            b = (<uint64_t>g * self._num_bits) >> 32   # < num_bits
            if not (self._bits[b >> 3] & (1 << (b & 7))):
                return False
            g += delta                                  # wraps modulo 2**32
        return True

    cdef inline void prefetch(self, uint64_t h) noexcept nogil:
        """Start loading the bytes of ``probe(h)``'s first two bits (a batch probing keys in
        turn prefetches a later key's while it probes the current one)."""
        if self._num_bits == 0:
            return
        cdef uint32_t g = <uint32_t>h
        HUMMOCK_FILTER_PREFETCH(self._bits + (((<uint64_t>g * self._num_bits) >> 32) >> 3))
        g += <uint32_t>(h >> 32)
        HUMMOCK_FILTER_PREFETCH(self._bits + (((<uint64_t>g * self._num_bits) >> 32) >> 3))

    cdef inline void prefetch_all(self, uint64_t h) noexcept nogil:
        """Start loading the bytes of every bit ``probe(h)`` may test: for a batch whose keys
        are mostly present, where a probe reads them all (``prefetch`` covers the first two,
        enough where most probes stop early)."""
        if self._num_bits == 0:
            return
        cdef uint32_t g = <uint32_t>h
        cdef uint32_t delta = <uint32_t>(h >> 32)
        cdef int j
        for j in range(self._probes_n):
            HUMMOCK_FILTER_PREFETCH(self._bits + (((<uint64_t>g * self._num_bits) >> 32) >> 3))
            g += delta
