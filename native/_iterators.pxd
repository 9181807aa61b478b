# cython: language_level=3
"""C-level view of ``native/_iterators.pyx`` for other native modules (the read path, the
compaction core).

``ScanSst`` is an opened SST as native readers use it: its block first keys, last full key,
block loader and native block cache, read from the ``Sstable`` once (``set_sst``) instead of
per scan. The read path's ``SstReader`` is one (it opens its SST lazily, ``ensure_open``);
any other reader exposing ``.sst`` is wrapped in a plain ``ScanSst`` when a run starts.
``block_at(i)`` gives block ``i``: a hit in a native block cache is read in C (the cache counts
it), anything else goes through ``Sstable.block`` (which counts the miss, loads and caches).

``_SstRunCursor`` walks an :class:`SstRun` forward block by block: after ``start(run)``,
``position()`` moves to the next entry if the current block is used up and says whether the
cursor is on an entry inside the run's bounds; the entry is then ``it.key_ptr``/``it.key_len``
and ``it.p[it.value_start:it.value_end]`` (borrowed: valid until the cursor moves). Move on with
``it.c_next()`` followed by ``position()``. The ``BlockIterator`` ``it`` is reused from block to
block (re-read ``it`` after ``position()``; it is None once the run is done).

The merge's cursors (``_Cursor``): ``load()``/``advance()`` position on the current / next entry
and set ``kp``/``kn`` to its full key (borrowed: valid until the cursor moves); ``user_value()``
decodes that entry's value (a new bytes object, or None for a delete); ``value_view()`` points at
it instead (1) or says it is a delete (0), borrowed like the key. An SST cursor copies nothing
until ``user_value()``.

``UserScan.next_raw`` (forward scans) is ``__next__`` without Python objects: the next row's
table key and user value as borrowed pointers, valid until the scan moves on (the next call
to ``next_raw`` or ``__next__``, or ``close``); 0 at the end. Native consumers that only read
the bytes (``_scan_columns``: counts and column decoding) use it.

``UserScan.drain(sink, ctx, cap)`` (forward scans) hands the same rows as ``next_raw`` to a C
callback, ``sink(ctx, value, value_len)`` (the value borrowed for the call only), at most ``cap``
of them, and returns how many. While the scan reads a single SST run (one source and no watermark
ranges: a compacted table) it walks each block's entries in C *without the GIL*, so scans of other
key ranges run in other threads meanwhile; ``sink`` must then need no GIL (it may take it to raise).
An entry that walk does not take in its stride (a bad tag, a long varint, a key longer than the
iterator's buffer, the end bound) is handed to ``next_raw``, so rows, order and errors are
``next_raw``'s.

``UserScan`` is built either by its Python constructor (a list of sources) or, by the read path,
with ``scan_new`` + ``scan_add_run``/``scan_add_batches`` per source + ``scan_ready``: the
same scan without an ``SstRun`` object or argument parsing per source.
"""

cimport cython
from libc.stdint cimport uint64_t

from native._block cimport Block, BlockIterator
from native._lru cimport LruCache


ctypedef int (*row_sink)(void* ctx, const unsigned char* value, Py_ssize_t value_len) except -1 nogil


cdef struct BlockWalk:
    # one block walk of ``UserScan.drain`` (see ``_iterators.pyx``)
    const unsigned char* p        # the block's content
    Py_ssize_t limit              # its entries' end
    unsigned char* key            # the iterator's key buffer (holds the current entry's key)
    Py_ssize_t key_cap
    const unsigned char* end      # the scan's end bound (a full key), or NULL: the block is below it
    Py_ssize_t end_len
    Py_ssize_t off                # the current entry (parsed): its offset, value and next entry
    Py_ssize_t value_start, value_end, next_off, key_len
    Py_ssize_t rows               # out: rows handed to the sink
    Py_ssize_t parsed             # out: entries the walk decoded
    int status                    # out: WALK_CONSUMED or WALK_STOP (see ``_iterators.pyx``)


cdef class ScanSst:
    cdef object sst_obj      # the opened Sstable (None until opened)
    cdef list first_keys     # its blocks' first full keys (shared, never mutated; checked where compared)
    cdef object largest      # its last full key (checked where used)
    cdef object block_fn     # sst.block
    cdef LruCache cache      # its block cache when it is the native LruCache, else None
    cdef tuple cache_ids     # (sst_id, index) keys of that cache, built on first use

    cdef int ensure_open(self) except -1
    cdef int set_sst(self, sst) except -1
    cdef object block_at(self, Py_ssize_t index)


cdef class _Cursor:
    cdef bint tagged
    cdef const unsigned char* kp   # the current entry's full key (borrowed, see above)
    cdef Py_ssize_t kn

    cdef bint load(self) except -1
    cdef bint advance(self) except -1
    cdef object user_value(self)
    cdef int value_view(self, const unsigned char** vp, Py_ssize_t* vn) except -1


@cython.final
cdef class SstRun:
    cdef readonly list readers
    cdef readonly object start
    cdef readonly object end


@cython.final
cdef class _SstRunCursor(_Cursor):
    cdef list readers
    cdef Py_ssize_t reader_index
    cdef ScanSst src        # the current SST
    cdef list first_keys    # src.first_keys
    cdef Py_ssize_t block_index
    cdef Block block        # the block ``it`` reads
    cdef BlockIterator it
    cdef bytes end
    cdef bytes largest      # the current SST's last full key
    cdef bint below_end     # every entry of the current block is below ``end`` (no per-entry check)

    cdef int start(self, SstRun run) except -1
    cdef int start_at(self, list readers, object start, object end) except -1
    cdef bint next_reader(self) except -1
    cdef int open_block(self, Py_ssize_t index) except -1
    cdef bint block_ends_below(self, Py_ssize_t index) except -1
    cdef bint position(self) except -1


@cython.final
cdef class UserScan:
    cdef list heap
    cdef Py_ssize_t size
    cdef uint64_t read_epoch
    cdef bint reverse
    cdef unsigned char* decided   # forward: user key of the version chosen for the current key
    cdef Py_ssize_t decided_len   # -1: none yet
    cdef Py_ssize_t decided_cap
    cdef bytes group         # reverse: a full key of the current user key
    cdef object best         # reverse: newest visible stored value of the group so far
    cdef bint best_tagged
    cdef bint have
    cdef object owner        # kept alive while the scan lives (the engine's read state)
    cdef bint has_floor      # hide: versions <= floor are ignored (a truncation)
    cdef uint64_t floor
    cdef dict ranges         # hide: {vnode: (lo, hi)} watermark ranges, or None
    cdef bint pending        # next_raw returned the top entry in place: advance before going on

    cdef int add_cursor(self, _Cursor c) except -1
    cdef bint before(self, _Cursor a, _Cursor b) noexcept
    cdef int advance_top(self) except -1
    cdef void sift_down(self, Py_ssize_t i) noexcept
    cdef bint visible(self, const unsigned char* k, Py_ssize_t n) noexcept
    cdef object finish_group(self)
    cdef int next_raw(self, const unsigned char** kp, Py_ssize_t* kn, const unsigned char** vp,
                      Py_ssize_t* vn) except -1
    cdef int walk_block(self, BlockWalk* w, row_sink sink, void* ctx, Py_ssize_t cap) except -1 nogil
    cdef Py_ssize_t drain(self, row_sink sink, void* ctx, Py_ssize_t cap) except -1


cdef UserScan scan_new(uint64_t read_epoch, bint reverse, object owner, object hide)
cdef int scan_add_run(UserScan scan, list readers, object start, object end) except -1
cdef int scan_add_batches(UserScan scan, object batches, bint tagged) except -1
cdef int scan_ready(UserScan scan) except -1


# Table watermarks (see _iterators.pyx): the key check and the unpacking of a resolved record.
cdef bint range_hides(dict ranges, const unsigned char* k, Py_ssize_t n) except -1
cdef object unpack_hide(object hide, bint* has_floor, uint64_t* floor)

# The user value of a stored value (tag byte + payload), None for a delete; CorruptionError else.
cdef object stored_value(const unsigned char* p, Py_ssize_t n)
