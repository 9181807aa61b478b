# cython: language_level=3
"""Full-key comparison for native modules (``cimport`` only; no extension of its own).

Order (hummock/key.py, docs/format.md section 3): user key (all but the last 8 bytes) bytewise
ascending, then the 8-byte inverted-epoch suffix bytewise ascending (= epoch descending).
REQUIRES: both lengths >= 8 (callers check keys are at least MIN_FULL_KEY_LEN = 12 bytes).
"""

from libc.string cimport memcmp


cdef inline int cmp_full_keys(const unsigned char* a, Py_ssize_t alen,
                              const unsigned char* b, Py_ssize_t blen) noexcept nogil:
    cdef Py_ssize_t ua = alen - 8
    cdef Py_ssize_t ub = blen - 8
    cdef int c = memcmp(a, b, ua if ua < ub else ub)
    if c != 0:
        return -1 if c < 0 else 1
    if ua != ub:
        return -1 if ua < ub else 1
    c = memcmp(a + ua, b + ub, 8)
    return 0 if c == 0 else (-1 if c < 0 else 1)
