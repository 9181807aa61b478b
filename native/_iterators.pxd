# cython: language_level=3
"""C-level view of ``native/_iterators.pyx`` for other native modules (the compaction core).

``_SstRunCursor`` walks an :class:`SstRun` forward block by block: after ``start(run)``,
``position()`` moves to the next entry if the current block is used up and says whether the
cursor is on an entry inside the run's bounds; the entry is then ``it.key_ptr``/``it.key_len``
and ``it.p[it.value_start:it.value_end]`` (borrowed: valid until the cursor moves). Move on with
``it.c_next()`` followed by ``position()``. ``load()``/``advance()`` do the same and also copy
the entry into ``key``/``value`` (what the read path's merge uses).
"""

cimport cython
from libc.stdint cimport uint64_t

from native._block cimport Block, BlockIterator
from native._lru cimport LruCache


cdef class _Cursor:
    cdef bint tagged
    cdef bytes key
    cdef object value

    cdef bint load(self) except -1
    cdef bint advance(self) except -1


@cython.final
cdef class SstRun:
    cdef readonly list readers
    cdef readonly object start
    cdef readonly object end


@cython.final
cdef class _SstRunCursor(_Cursor):
    cdef list readers
    cdef Py_ssize_t reader_index
    cdef list first_keys
    cdef object block_fn
    cdef LruCache cache     # the current SST's block cache when it is the native LruCache, else None
    cdef object sst_id      # the current SST's id (its blocks' cache keys are (sst_id, index))
    cdef Py_ssize_t block_index
    cdef Block block        # the block ``it`` reads
    cdef BlockIterator it
    cdef bytes end
    cdef bytes largest      # the current SST's last full key

    cdef int start(self, SstRun run) except -1
    cdef bint next_reader(self) except -1
    cdef int open_block(self, Py_ssize_t index) except -1
    cdef bint position(self) except -1


# Table watermarks (see _iterators.pyx): the key check and the unpacking of a resolved record.
cdef bint range_hides(dict ranges, const unsigned char* k, Py_ssize_t n) except -1
cdef object unpack_hide(object hide, bint* has_floor, uint64_t* floor)
