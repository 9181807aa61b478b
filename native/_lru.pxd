# cython: language_level=3
"""C-level view of ``native/_lru.pyx`` for other native modules: the read path's point gets
look blocks up with ``LruCache.c_peek`` (no Python call per lookup)."""


cdef class _Node:
    cdef object key
    cdef object value
    cdef Py_ssize_t charge
    cdef _Node prev
    cdef _Node next


cdef class LruCache:
    cdef readonly object name
    cdef readonly Py_ssize_t capacity
    cdef dict entries
    cdef _Node head          # sentinel: head.next is the most recently used
    cdef Py_ssize_t used_bytes
    cdef readonly Py_ssize_t hits, misses, evictions, inserts

    cdef void unlink(self, _Node node) noexcept
    cdef void push_front(self, _Node node) noexcept
    cdef object c_peek(self, key)
