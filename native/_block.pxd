# cython: language_level=3
"""C-level view of ``native/_block.pyx`` for other native modules (SST and merge iterators, the
compaction core feeding ``BlockBuilder.c_add``).

Borrowed pointers: ``key_ptr``/``key_len`` and ``value_ptr()``/``value_len()`` stay valid only until
the iterator moves; copy them to keep them. A ``BlockIterator`` whose method raised is invalid
(``c_valid()`` false, ``key_len`` 0): read its key only while ``c_valid()``.
"""

cimport cython
from libc.stdint cimport uint32_t, uint64_t


cdef class BlockBuilder:
    cdef unsigned char* buf
    cdef Py_ssize_t buf_len, buf_cap
    cdef uint32_t* restarts
    cdef Py_ssize_t n_restarts, restarts_cap
    cdef int counter
    cdef readonly int restart_interval
    cdef readonly Py_ssize_t block_entry_count
    cdef readonly Py_ssize_t key_count
    cdef readonly Py_ssize_t tombstone_count
    cdef uint64_t min_ep, max_ep
    cdef readonly object smallest_key
    # the last full key added (the open block's last when it has entries), its open block's
    # first, and the full key whose declared prefix was hashed last: C copies, not bytes
    # objects, so adding an entry makes no Python object (``last_key``/``block_first_key``
    # are properties built from them)
    cdef unsigned char* last_buf
    cdef Py_ssize_t last_len, last_cap
    cdef bint has_last
    cdef unsigned char* first_buf
    cdef Py_ssize_t first_len, first_cap
    cdef unsigned char* prefix_buf
    cdef Py_ssize_t prefix_cap
    cdef bint has_prefix
    cdef uint64_t* key_hash_buf      # filter hash of each distinct user key, in order
    cdef Py_ssize_t key_hash_n, key_hash_cap
    cdef uint64_t* prefix_hash_buf   # filter hash of each distinct declared prefix (see the twin)
    cdef Py_ssize_t prefix_hash_n, prefix_hash_cap
    cdef dict prefix_lens            # table id -> declared prefix length (empty: none)
    cdef Py_ssize_t prefix_len       # the current table's declared length (-1: none)
    cdef readonly list table_ids
    cdef uint32_t last_table_id
    cdef list live_done              # live user keys of each finished table id (see live_counts)
    cdef Py_ssize_t live_cur         # ... of the current (last) table id

    cdef void reset_block(self)
    cdef int reserve(self, Py_ssize_t extra) except -1
    cdef int close_block(self, Py_ssize_t extra) except -1
    cdef inline void put_varint(self, uint32_t v) noexcept:
        """REQUIRES: 5 bytes reserved."""
        while v >= 0x80:
            self.buf[self.buf_len] = (v & 0x7F) | 0x80
            self.buf_len += 1
            v >>= 7
        self.buf[self.buf_len] = v
        self.buf_len += 1
    cdef bint c_add(self, bytes key, unsigned char tag, const unsigned char* payload, Py_ssize_t plen) except -1
    cdef int c_append(self, const unsigned char* k, Py_ssize_t n, Py_ssize_t shared, unsigned char tag,
                      const unsigned char* payload, Py_ssize_t plen) except -1
    cdef int c_add_packed_next(self, unsigned char* w, const unsigned char* prev, const unsigned char* cur,
                               Py_ssize_t width, const unsigned char* payload, Py_ssize_t plen) except -1
    cdef bint c_add_raw(self, const unsigned char* k, Py_ssize_t n, unsigned char tag, const unsigned char* payload,
                        Py_ssize_t plen) except -1
    cdef int account(self, const unsigned char* k, Py_ssize_t n, unsigned char tag) except -1
    cdef int push_hash(self, bint prefix, uint64_t h) except -1
    cdef inline Py_ssize_t c_size_estimate(self) noexcept:
        """``block_size_estimate`` without a Python call."""
        return self.buf_len + 4 * self.n_restarts + 4


cdef class Block   # defined below; BlockIterator.c_reset takes one


cdef struct PrevEntry:
    # one entry of the restart interval prev() decoded: where it is and where its key was kept
    Py_ssize_t offset, value_start, value_end, next_off, key_at, key_len


@cython.final
cdef class BlockIterator:
    cdef Block owner              # keeps the content p points into alive
    cdef const unsigned char* p
    cdef Py_ssize_t limit
    cdef uint32_t num_restarts
    cdef Py_ssize_t current
    cdef Py_ssize_t next_off
    cdef unsigned char* key_ptr
    cdef Py_ssize_t key_len
    cdef Py_ssize_t key_cap
    cdef Py_ssize_t value_start
    cdef Py_ssize_t value_end
    cdef object object_name
    cdef readonly Py_ssize_t decoded   # entries decoded (a work count; see the twin)
    # prev()'s decoded restart interval: its entries and their keys (key bytes in prev_keys)
    cdef PrevEntry* prev_ents
    cdef Py_ssize_t prev_n, prev_cap, prev_at
    cdef unsigned char* prev_keys
    cdef Py_ssize_t prev_keys_len, prev_keys_cap

    cdef object corrupt(self, message, offset, expected=*, found=*)
    cdef uint32_t restart_at(self, Py_ssize_t i) noexcept
    cdef int varint_slow(self, Py_ssize_t* ppos, uint32_t* out) except -1
    cdef inline int varint(self, Py_ssize_t* ppos, uint32_t* out) except -1:
        cdef Py_ssize_t pos = ppos[0]
        if pos < self.limit and self.p[pos] < 0x80:
            out[0] = self.p[pos]
            ppos[0] = pos + 1
            return 0
        return self.varint_slow(ppos, out)
    cdef int parse(self, Py_ssize_t offset, Py_ssize_t prev_len) except -1
    cdef Py_ssize_t restart_entry(self, Py_ssize_t index, Py_ssize_t* key_len) except -1
    cdef int restart_key(self, Py_ssize_t index) except -1
    cdef void invalidate(self) noexcept
    cdef void c_reset(self, Block block) noexcept
    cdef int c_seek(self, const unsigned char* target, Py_ssize_t n) except -1
    cdef int c_seek_from(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t n) except -1
    cdef int c_seek_to_first(self) except -1
    cdef int c_seek_to_last(self) except -1
    cdef int c_next(self) except -1
    cdef int c_prev(self) except -1
    cdef int prev_push(self) except -1
    cdef inline bint c_valid(self) noexcept:
        return self.current < self.limit


cdef struct RestartEntry:
    # a restart of a block's point-lookup index (Block.build_index); 32 bytes, one cache line
    # holds two, so the binary search's last probes bring in the chosen restart's place
    uint64_t w0          # 16 user-key bytes after the prefix every restart key shares,
    uint64_t w1          # big-endian, zero-padded past the key's end
    uint32_t key_pos     # offset of its key (in place: shared == 0)
    uint32_t key_len     # its full-key length
    uint32_t next        # offset of the entry after it (its value's end)
    uint32_t unused


@cython.final
cdef class Block:
    cdef bytes data                 # the content, unless it was copied into the arena (then None)
    cdef unsigned char* arena_p     # the content in the block arena (_block_arena.pxi), or NULL
    cdef Py_ssize_t size            # content bytes
    cdef const unsigned char* p     # data's buffer or arena_p
    cdef Py_ssize_t limit
    cdef uint32_t num_restarts
    cdef object object_name
    cdef object shared_iter
    cdef bint busy
    # restart index of point lookups (built on the first get; see Block.build_index)
    cdef int index_state            # 0: not built, 1: built, 2: not usable (search the entries)
    cdef RestartEntry* ridx         # one per restart
    cdef bint ridx_in_arena         # ridx came from arena_alloc (else malloc)
    cdef Py_ssize_t cp_len          # bytes every restart's user key shares
    cdef object corrupt(self, message, offset, expected=*, found=*)
    cdef int check_restarts(self) except -1
    cdef object c_get(self, bytes uk, uint64_t epoch)
    cdef object c_find(self, const unsigned char* target, Py_ssize_t tn, int* status, uint64_t* version)
    cdef object c_find_from(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t tn, int* status,
                            uint64_t* version)
    cdef object find_in_place(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t tn,
                              int* status, uint64_t* version, bint* done)
    cdef int build_index(self) except -1
    cdef Py_ssize_t restart_for(self, const unsigned char* target, Py_ssize_t n) noexcept
