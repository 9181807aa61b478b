# cython: language_level=3
"""Native block builder and iterator; twin of ``hummock/sstable/_block_py.py``.

Same layout (docs/format.md section 4.1), same names, same exceptions and messages, identical
bytes. The build loop, the seek and the iteration run in C; every varint, length and offset read
from a block is checked against the entry area's end before use, so malformed content raises
``CorruptionError`` and never reads out of bounds.

A validated ``Block`` copies its content (and later its restart index) into the huge-page block
arena of ``_block_arena.pxi`` (included below), freed with the block; iterators keep their block
alive, a block's own shared iterator does not (no reference cycle, so an evicted block's memory
goes back at once).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsUnsignedLongLong, PyLong_FromUnsignedLongLong
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from native._filter cimport filter_key_hash
from native._xxh64 cimport xxh64
from native._keycmp cimport cmp_full_keys, cmp_mem, load_be64

import array

import numpy as np

from hummock.errors import CorruptionError, InvalidArgumentError

# part of the on-disk format, do not change (mirrored in the twin and hummock/key.py)
DEF EPOCH_LEN = 8
DEF MIN_FULL_KEY_LEN = 12
DEF TAG_PUT = 0x01
DEF TAG_DELETE = 0x02
DEF STORED_TRAILER_LEN = 13              # u8 compression tag, u32 content length, u64 xxh64 (format 4.2)
DEF MAX_STORED_CONTENT = 1073741824      # MAX_BLOCK_CONTENT, part of the format
# A C constant: compared with a bare literal this large, a C integer becomes a Python int
# (three PyLongs a key in c_add, one a varint in the iterator, before this was typed).
cdef Py_ssize_t U32_MAX = <Py_ssize_t>0xFFFFFFFFU


cdef inline uint32_t load_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0]) | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t load_u64_be(const unsigned char* p) noexcept nogil:
    """The 8 bytes at ``p``, big-endian: one load and a byte swap (``_keycmp.load_be64``)."""
    return load_be64(p)


cdef inline bytes bytes_arg(object value, str what):
    """``value`` (bytes, bytearray or memoryview) as bytes; anything else is InvalidArgumentError
    "``what`` must be bytes, got <type>" (the twins' message)."""
    if type(value) is bytes:
        return <bytes>value
    if not isinstance(value, (bytearray, memoryview)):
        raise InvalidArgumentError(f"{what} must be bytes, got {type(value).__name__}")
    return bytes(value)


cdef bytes as_key(object full_key):
    """Checked full key as bytes (same rules and messages as the twin's ``_check_key``)."""
    full_key = bytes_arg(full_key, "full key")
    if PyBytes_GET_SIZE(full_key) < MIN_FULL_KEY_LEN:
        raise InvalidArgumentError(f"full key of {PyBytes_GET_SIZE(full_key)} bytes is shorter than {MIN_FULL_KEY_LEN}")
    return <bytes>full_key


cdef inline int read_varint32(const unsigned char* p, Py_ssize_t limit, Py_ssize_t* ppos, uint32_t* out) noexcept:
    """A varint32 at ``ppos[0]`` before ``limit``: 0 and the value, or -1 (truncated, too long,
    over 32 bits; the same rules as ``BlockIterator.varint``)."""
    cdef Py_ssize_t pos = ppos[0]
    cdef uint64_t result = 0
    cdef int shift = 0, i
    cdef unsigned char byte
    for i in range(5):
        if pos >= limit:
            return -1
        byte = p[pos]
        pos += 1
        result |= (<uint64_t>(byte & 0x7F)) << shift
        if not (byte & 0x80):
            if result > <uint64_t>0xFFFFFFFFU:
                return -1
            out[0] = <uint32_t>result
            ppos[0] = pos
            return 0
        shift += 7
    return -1


cdef inline uint64_t word_at(const unsigned char* k, Py_ssize_t ulen, Py_ssize_t at) noexcept:
    """The 8 bytes of a user key (``ulen`` bytes at ``k``) from ``at``, big-endian, zero-padded
    past its end."""
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    if at + 8 <= ulen:
        return load_be64(k + at)
    for i in range(8):
        w <<= 8
        if at + i < ulen:
            w |= k[at + i]
    return w


cdef extern from *:
    int __builtin_clzll(unsigned long long) nogil   # GCC/Clang; REQUIRES a nonzero argument


cdef inline Py_ssize_t common_len(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    """How many leading bytes of ``a`` and ``b`` (``n`` each) are equal: 8 bytes at a time, the
    first differing byte of a word from its leading zero bits (big-endian loads)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t x
    while i + 8 <= n:
        x = load_be64(a + i) ^ load_be64(b + i)
        if x:
            return i + (__builtin_clzll(x) >> 3)
        i += 8
    while i < n and a[i] == b[i]:
        i += 1
    return i


cdef inline int memcmp_eq(const unsigned char* a, const unsigned char* b, Py_ssize_t n) noexcept:
    """1 if the first ``n`` bytes are equal, else 0 (8 bytes at a time)."""
    return common_len(a, b, n) == n


# --- builder ---------------------------------------------------------------------------------

cdef int _copy_key(unsigned char** buf, Py_ssize_t* cap, const unsigned char* k, Py_ssize_t n) except -1:
    """Copy ``k[:n]`` into ``*buf``, growing it (``*cap``) when needed."""
    cdef Py_ssize_t want
    cdef unsigned char* grown
    if n > cap[0]:
        want = 2 * cap[0]
        if want < n:
            want = n
        grown = <unsigned char*>realloc(buf[0], <size_t>want)
        if grown == NULL:
            raise MemoryError()
        buf[0] = grown
        cap[0] = want
    memcpy(buf[0], k, <size_t>n)
    return 0


cdef class BlockBuilder:
    """See the twin's docstring: one block at a time plus SST-wide accounting (attributes
    declared in ``_block.pxd``, where other native modules find ``c_add``)."""

    def __cinit__(self, restart_interval=16, prefix_lens=None):
        if type(restart_interval) is not int or not 1 <= restart_interval <= 65536:
            raise InvalidArgumentError(f"restart_interval must be in [1, 65536], got {restart_interval!r}")
        self.prefix_lens = check_prefix_lens(prefix_lens)
        self.restart_interval = restart_interval
        self.buf = <unsigned char*>malloc(4096)
        self.restarts = <uint32_t*>malloc(64 * sizeof(uint32_t))
        self.key_hash_buf = <uint64_t*>malloc(256 * sizeof(uint64_t))
        self.prefix_hash_buf = <uint64_t*>malloc(64 * sizeof(uint64_t))
        self.last_buf = <unsigned char*>malloc(64)
        self.first_buf = <unsigned char*>malloc(64)
        self.prefix_buf = <unsigned char*>malloc(64)
        if self.buf == NULL or self.restarts == NULL or self.key_hash_buf == NULL or self.prefix_hash_buf == NULL \
                or self.last_buf == NULL or self.first_buf == NULL or self.prefix_buf == NULL:
            raise MemoryError()
        self.last_cap = self.first_cap = self.prefix_cap = 64
        self.buf_cap = 4096
        self.restarts_cap = 64
        self.key_hash_cap = 256
        self.prefix_hash_cap = 64
        self.prefix_len = -1
        self.table_ids = []
        self.live_done = []
        self.reset_block()

    def __dealloc__(self):
        free(self.buf)
        free(self.restarts)
        free(self.key_hash_buf)
        free(self.prefix_hash_buf)
        free(self.last_buf)
        free(self.first_buf)
        free(self.prefix_buf)

    @property
    def last_key(self):
        """The last full key added (None before the first)."""
        return PyBytes_FromStringAndSize(<const char*>self.last_buf, self.last_len) if self.has_last else None

    @property
    def block_first_key(self):
        """The open block's first full key (None while it is empty)."""
        if not self.block_entry_count:
            return None
        return PyBytes_FromStringAndSize(<const char*>self.first_buf, self.first_len)

    @property
    def live_counts(self):
        """Per table id (``table_ids``' order), how many user keys added have a put as their
        newest version here (twin's docstring)."""
        return self.live_done + [self.live_cur] if self.key_count else []

    @property
    def key_hashes(self):
        """The filter hash (``hummock.sstable.filter.key_hash``) of each distinct user key
        added, in order, as an ``array.array('Q')`` (a copy)."""
        return _hash_array(self.key_hash_buf, self.key_hash_n)

    @property
    def prefix_hashes(self):
        """The filter hash of each distinct declared prefix (``filter.prefix_hashes`` of the
        user keys added), as an ``array.array('Q')`` (a copy)."""
        return _hash_array(self.prefix_hash_buf, self.prefix_hash_n)

    cdef int push_hash(self, bint prefix, uint64_t h) except -1:
        cdef uint64_t* buf = self.prefix_hash_buf if prefix else self.key_hash_buf
        cdef Py_ssize_t n = self.prefix_hash_n if prefix else self.key_hash_n
        cdef Py_ssize_t cap = self.prefix_hash_cap if prefix else self.key_hash_cap
        if n == cap:
            cap *= 2
            buf = <uint64_t*>realloc(buf, cap * sizeof(uint64_t))
            if buf == NULL:
                raise MemoryError()
            if prefix:
                self.prefix_hash_buf, self.prefix_hash_cap = buf, cap
            else:
                self.key_hash_buf, self.key_hash_cap = buf, cap
        buf[n] = h
        if prefix:
            self.prefix_hash_n = n + 1
        else:
            self.key_hash_n = n + 1
        return 0

    cdef void reset_block(self):
        self.buf_len = 0
        self.restarts[0] = 0
        self.n_restarts = 1
        self.counter = 0
        self.block_entry_count = 0

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap
        cdef unsigned char* grown
        if self.buf_len + extra <= self.buf_cap:
            return 0
        cap = self.buf_cap * 2
        if cap < self.buf_len + extra:
            cap = self.buf_len + extra
        grown = <unsigned char*>realloc(self.buf, cap)
        if grown == NULL:
            raise MemoryError()
        self.buf = grown
        self.buf_cap = cap
        return 0

    @property
    def block_size_estimate(self):
        return self.buf_len + 4 * self.n_restarts + 4

    @property
    def min_epoch(self):
        return None if self.key_count == 0 else self.min_ep

    @property
    def max_epoch(self):
        return None if self.key_count == 0 else self.max_ep

    def add(self, full_key, value):
        """Add a put (``value`` bytes) or a delete (``value is None``)."""
        cdef bytes payload
        if value is None:
            return self.c_add(as_key(full_key), TAG_DELETE, NULL, 0)
        if type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"value must be bytes or None, got {type(value).__name__}")
            value = bytes(value)
        payload = <bytes>value
        return self.c_add(as_key(full_key), TAG_PUT, <const unsigned char*>PyBytes_AS_STRING(payload),
                          PyBytes_GET_SIZE(payload))

    def add_tagged(self, full_key, tagged_value):
        """Add a value that already carries its tag byte (as read from another SST)."""
        cdef bytes tv
        cdef const unsigned char* t
        if not isinstance(tagged_value, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"tagged value must be bytes, got {type(tagged_value).__name__}")
        tv = bytes(tagged_value) if type(tagged_value) is not bytes else <bytes>tagged_value
        t = <const unsigned char*>PyBytes_AS_STRING(tv)
        if PyBytes_GET_SIZE(tv) == 0 or (t[0] != TAG_PUT and t[0] != TAG_DELETE) or \
                (t[0] == TAG_DELETE and PyBytes_GET_SIZE(tv) != 1):
            raise InvalidArgumentError("tagged value must be 0x01+payload or a lone 0x02")
        return self.c_add(as_key(full_key), t[0], t + 1, PyBytes_GET_SIZE(tv) - 1)

    def add_batch(self, list keys, list values, Py_ssize_t start, Py_ssize_t block_size):
        """Add ``keys[i], values[i]`` from ``start`` as :meth:`add` would, stopping before an
        entry of another table id or after the entry that brings the block estimate to
        ``block_size``; return the index of the first entry not added."""
        cdef Py_ssize_t i = start, n = len(keys)
        cdef bytes payload
        if len(values) != n:
            raise InvalidArgumentError("keys and values differ in length")
        while i < n:
            value = values[i]
            if value is None:
                added = self.c_add(as_key(keys[i]), TAG_DELETE, NULL, 0)
            else:
                if type(value) is not bytes:
                    if not isinstance(value, (bytes, bytearray, memoryview)):
                        raise InvalidArgumentError(f"value must be bytes or None, got {type(value).__name__}")
                    value = bytes(value)
                payload = <bytes>value
                added = self.c_add(as_key(keys[i]), TAG_PUT, <const unsigned char*>PyBytes_AS_STRING(payload),
                                   PyBytes_GET_SIZE(payload))
            if not added:
                return i
            i += 1
            if self.buf_len + 4 * self.n_restarts + 4 >= block_size:
                return i
        return i

    def add_packed(self, bytes prefix, epoch, bytes keys, Py_ssize_t width, bytes values, offsets,
                   Py_ssize_t start, Py_ssize_t block_size):
        """Add the puts of a packed batch from entry ``start`` as :meth:`add_batch` would (see
        the twin): entry ``i``'s full key is ``prefix + keys[i*width:(i+1)*width] + ~epoch``
        (big-endian), its value ``values[offsets[i]:offsets[i+1]]``. Every length and offset
        is checked before it is read."""
        cdef const int64_t[::1] offs
        cdef Py_ssize_t n, i = start, fn = width + 12, lo, hi, vn = PyBytes_GET_SIZE(values)
        cdef uint64_t inv
        cdef const unsigned char* kp = <const unsigned char*>PyBytes_AS_STRING(keys)
        cdef const unsigned char* vp = <const unsigned char*>PyBytes_AS_STRING(values)
        cdef unsigned char* w = NULL
        cdef int b
        # (called once per block: the checks below cost no numpy call when the arguments are
        # what a PackedColumns holds -- a C-contiguous int64 array and an int epoch)
        if not isinstance(offsets, np.ndarray):
            raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array")
        try:
            offs = offsets
        except ValueError:   # another dtype or shape, or strided
            if offsets.dtype != np.int64 or offsets.ndim != 1:
                raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array") from None
            offs = np.ascontiguousarray(offsets)   # strided: read from a C-order copy, as the twin reads it
        if type(epoch) is not int:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r:.40}")
        try:
            inv = ~(<uint64_t>PyLong_AsUnsignedLongLong(epoch))
        except OverflowError:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r:.40}") from None
        if PyBytes_GET_SIZE(prefix) != 4:
            raise InvalidArgumentError("prefix must be the 4-byte table id")
        if width < 1 or PyBytes_GET_SIZE(keys) % width:
            raise InvalidArgumentError(f"{PyBytes_GET_SIZE(keys)} key bytes are not keys of {width} bytes")
        n = PyBytes_GET_SIZE(keys) // width
        if offs.shape[0] != n + 1:
            raise InvalidArgumentError(f"{offs.shape[0]} value offsets for {n} keys")
        if start < 0 or start > n:
            raise InvalidArgumentError(f"start {start} outside [0, {n}]")
        if i == n:   # nothing to add (and a width no key has may be too large to allocate)
            return i
        w = <unsigned char*>malloc(<size_t>fn)   # each full key is built here, then copied by c_add_raw
        if w == NULL:
            raise MemoryError()
        try:
            memcpy(w, PyBytes_AS_STRING(prefix), 4)
            for b in range(8):
                w[4 + width + b] = <unsigned char>((inv >> (8 * (7 - b))) & 0xFF)
            # the call's first entry: every check and all the accounting (c_add_raw)
            lo = <Py_ssize_t>offs[i]
            hi = <Py_ssize_t>offs[i + 1]
            if lo < 0 or hi < lo or hi > vn:
                raise InvalidArgumentError(f"value {i} spans [{lo}, {hi}), outside [0, {vn}]")
            memcpy(w + 4, kp + i * width, <size_t>width)
            if not self.c_add_raw(w, fn, TAG_PUT, vp + lo, hi - lo):
                return i
            i += 1
            if self.buf_len + 4 * self.n_restarts + 4 >= block_size:
                return i
            # the others share its table id and epoch: what c_add_raw would find per entry is
            # known (a new user key, a put, the same table and epoch), so only the order, the
            # shared prefix, the filter hashes and the bytes remain (the same block bytes and
            # accounting); the last key is copied once, on the way out
            try:
                while i < n:
                    lo = <Py_ssize_t>offs[i]
                    hi = <Py_ssize_t>offs[i + 1]
                    if lo < 0 or hi < lo or hi > vn:
                        raise InvalidArgumentError(f"value {i} spans [{lo}, {hi}), outside [0, {vn}]")
                    self.c_add_packed_next(w, kp + (i - 1) * width, kp + i * width, width, vp + lo, hi - lo)
                    i += 1
                    if self.buf_len + 4 * self.n_restarts + 4 >= block_size:
                        return i
                return i
            finally:   # w holds the last entry added (a failed one was not copied into it)
                _copy_key(&self.last_buf, &self.last_cap, w, fn)
                self.last_len = fn
        finally:
            free(w)

    cdef int c_add_packed_next(self, unsigned char* w, const unsigned char* prev, const unsigned char* cur,
                               Py_ssize_t width, const unsigned char* payload, Py_ssize_t plen) except -1:
        """Add the packed entry ``cur`` (``width`` key bytes) right after ``prev``, the entry
        this call added last, into the open block (which holds entries: the call's first went
        through ``c_add_raw``). ``w`` holds ``prev``'s full key (table id, key, inverted epoch)
        and ``cur``'s once the entry is added (``prev``'s again if adding it fails). Leaves
        ``last_buf`` to the caller."""
        cdef Py_ssize_t shared = 0, n = width + 12
        if memcmp(prev, cur, <size_t>width) >= 0:
            raise InvalidArgumentError("keys must be added in strictly increasing full-key order")
        if plen + 1 > U32_MAX:
            raise InvalidArgumentError("key or value longer than 4 GiB")
        if self.counter < self.restart_interval:   # (the keys differ within ``width``: the epoch is never shared)
            shared = 4 + common_len(prev, cur, width)
        memcpy(w + 4, cur, <size_t>width)   # w: this entry's full key
        try:
            self.c_append(w, n, shared, TAG_PUT, payload, plen)
        except BaseException:
            memcpy(w + 4, prev, <size_t>width)   # not added: w names the last entry added again
            raise
        # account(): a new user key (the keys ascend), a put, the table id and epoch unchanged
        self.push_hash(False, filter_key_hash(w, <size_t>(n - EPOCH_LEN)))
        if self.prefix_len >= 0 and n - EPOCH_LEN >= 4 + self.prefix_len and (
                not self.has_prefix or not memcmp_eq(self.prefix_buf, w, 4 + self.prefix_len)):
            self.push_hash(True, filter_key_hash(w, <size_t>(4 + self.prefix_len)))
            _copy_key(&self.prefix_buf, &self.prefix_cap, w, 4 + self.prefix_len)
            self.has_prefix = True
        self.live_cur += 1
        self.key_count += 1
        return 0

    cdef bint c_add(self, bytes key, unsigned char tag, const unsigned char* payload, Py_ssize_t plen) except -1:
        return self.c_add_raw(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), tag, payload, plen)

    cdef bint c_add_raw(self, const unsigned char* k, Py_ssize_t n, unsigned char tag, const unsigned char* payload,
                        Py_ssize_t plen) except -1:
        """Add the full key ``k[:n]`` (REQUIRES ``n >= MIN_FULL_KEY_LEN``) with its tag and payload;
        False (nothing added) when the open block holds another table id. ``k`` is copied: the
        caller may reuse its memory at once."""
        cdef Py_ssize_t shared = 0, limit
        if n > U32_MAX or plen + 1 > U32_MAX:
            raise InvalidArgumentError("key or value longer than 4 GiB")
        if self.block_entry_count:
            if self.first_buf[0] != k[0] or self.first_buf[1] != k[1] or self.first_buf[2] != k[2] \
                    or self.first_buf[3] != k[3]:
                return False
        if self.has_last:
            if cmp_full_keys(self.last_buf, self.last_len, k, n) >= 0:
                raise InvalidArgumentError("keys must be added in strictly increasing full-key order")
        if self.counter < self.restart_interval and self.block_entry_count:
            limit = self.last_len if self.last_len < n else n   # shared with the block's last key
            shared = common_len(self.last_buf, k, limit)
        if not self.block_entry_count:
            _copy_key(&self.first_buf, &self.first_cap, k, n)
            self.first_len = n
        self.c_append(k, n, shared, tag, payload, plen)
        self.account(k, n, tag)
        return True

    cdef int c_append(self, const unsigned char* k, Py_ssize_t n, Py_ssize_t shared, unsigned char tag,
                      const unsigned char* payload, Py_ssize_t plen) except -1:
        """Write the entry ``k[:n]`` + tag + payload into the open block once its checks passed:
        a restart point first when one is due (nothing is shared then: the caller computes
        ``shared`` with the block's last key only when ``counter < restart_interval``), the
        three varints, the key bytes past ``shared``, the tag, the payload."""
        cdef uint32_t* grown
        if self.counter >= self.restart_interval:
            if self.n_restarts == self.restarts_cap:
                grown = <uint32_t*>realloc(self.restarts, 2 * self.restarts_cap * sizeof(uint32_t))
                if grown == NULL:
                    raise MemoryError()
                self.restarts = grown
                self.restarts_cap *= 2
            self.restarts[self.n_restarts] = <uint32_t>self.buf_len
            self.n_restarts += 1
            self.counter = 0
            shared = 0
        if self.buf_len + 15 + (n - shared) + 1 + plen > U32_MAX:
            raise InvalidArgumentError("block larger than 4 GiB")
        self.reserve(15 + (n - shared) + 1 + plen)
        self.put_varint(<uint32_t>shared)
        self.put_varint(<uint32_t>(n - shared))
        self.put_varint(<uint32_t>(1 + plen))
        memcpy(self.buf + self.buf_len, k + shared, n - shared)
        self.buf_len += n - shared
        self.buf[self.buf_len] = tag
        self.buf_len += 1
        if plen:
            memcpy(self.buf + self.buf_len, payload, plen)
            self.buf_len += plen
        self.counter += 1
        self.block_entry_count += 1
        return 0

    cdef int account(self, const unsigned char* k, Py_ssize_t n, unsigned char tag) except -1:
        cdef uint64_t epoch = ~load_u64_be(k + n - EPOCH_LEN)   # 2**64-1 - x in C (a literal would be a Python int)
        cdef uint32_t table_id = (<uint32_t>k[0] << 24) | (<uint32_t>k[1] << 16) | (<uint32_t>k[2] << 8) | k[3]
        cdef bint new_user_key = True
        if self.has_last:
            new_user_key = self.last_len != n or not memcmp_eq(self.last_buf, k, n - EPOCH_LEN)
        if new_user_key:
            self.push_hash(False, filter_key_hash(k, <size_t>(n - EPOCH_LEN)))
        if self.key_count == 0 or table_id != self.last_table_id:
            if self.key_count:
                self.live_done.append(self.live_cur)
                self.live_cur = 0
            self.table_ids.append(table_id)
            self.last_table_id = table_id
            found = self.prefix_lens.get(table_id) if self.prefix_lens else None
            self.prefix_len = -1 if found is None else <Py_ssize_t>found
            self.has_prefix = False
        if self.prefix_len >= 0 and n - EPOCH_LEN >= 4 + self.prefix_len and (
                not self.has_prefix or not memcmp_eq(self.prefix_buf, k, 4 + self.prefix_len)):
            self.push_hash(True, filter_key_hash(k, <size_t>(4 + self.prefix_len)))
            _copy_key(&self.prefix_buf, &self.prefix_cap, k, 4 + self.prefix_len)
            self.has_prefix = True
        if self.key_count == 0:
            self.min_ep = self.max_ep = epoch
            self.smallest_key = PyBytes_FromStringAndSize(<const char*>k, n)
        else:
            if epoch < self.min_ep:
                self.min_ep = epoch
            if epoch > self.max_ep:
                self.max_ep = epoch
        if new_user_key and tag != TAG_DELETE:   # the newest version of a user key comes first
            self.live_cur += 1
        _copy_key(&self.last_buf, &self.last_cap, k, n)
        self.last_len = n
        self.has_last = True
        self.key_count += 1
        if tag == TAG_DELETE:
            self.tombstone_count += 1
        return 0

    cdef int close_block(self, Py_ssize_t extra) except -1:
        """Append the restart offsets and their count (the block content is then
        ``buf[:buf_len]``), reserving ``extra`` bytes more behind them (a stored trailer)."""
        cdef Py_ssize_t i
        cdef uint32_t v
        cdef unsigned char* out
        if not self.block_entry_count:
            raise InvalidArgumentError("finish_block on an empty block")
        self.reserve(4 * self.n_restarts + 4 + extra)
        for i in range(self.n_restarts + 1):
            v = self.restarts[i] if i < self.n_restarts else <uint32_t>self.n_restarts
            out = self.buf + self.buf_len
            out[0] = v & 0xFF
            out[1] = (v >> 8) & 0xFF
            out[2] = (v >> 16) & 0xFF
            out[3] = (v >> 24) & 0xFF
            self.buf_len += 4
        return 0

    def finish_block(self):
        """The finished block content; resets the block (not the SST-wide accounting)."""
        self.close_block(0)
        content = PyBytes_FromStringAndSize(<const char*>self.buf, self.buf_len)
        self.reset_block()
        return content

    def finish_stored_block(self):
        """``(stored, content_len)``: the finished block in its stored form without compression
        -- the bytes ``encode_stored_block(self.finish_block(), COMPRESSION_NONE)`` gives
        (docs/format.md 4.2: content, tag 0, u32 content length, u64 xxh64 of all before it) --
        made in the builder's buffer and copied once, where that call copies the content three
        times; resets the block as :meth:`finish_block` does."""
        cdef Py_ssize_t i, content_len
        cdef uint32_t v
        cdef uint64_t h
        cdef unsigned char* out
        self.close_block(STORED_TRAILER_LEN)
        content_len = self.buf_len
        if content_len > MAX_STORED_CONTENT:
            self.reset_block()
            raise InvalidArgumentError(f"block content of {content_len} bytes exceeds {MAX_STORED_CONTENT}")
        out = self.buf + content_len
        out[0] = 0   # COMPRESSION_NONE
        v = <uint32_t>content_len
        out[1] = v & 0xFF
        out[2] = (v >> 8) & 0xFF
        out[3] = (v >> 16) & 0xFF
        out[4] = (v >> 24) & 0xFF
        h = xxh64(<const uint8_t*>self.buf, <size_t>(content_len + 5), 0)
        for i in range(8):
            out[5 + i] = <unsigned char>((h >> (8 * i)) & 0xFF)
        stored = PyBytes_FromStringAndSize(<const char*>self.buf, content_len + STORED_TRAILER_LEN)
        self.reset_block()
        return stored, content_len


# --- iterator --------------------------------------------------------------------------------

@cython.final
cdef class BlockIterator:
    """See the twin's docstring. ``key()``/``value()`` return new bytes objects."""

    def __cinit__(self, content, object=None):
        cdef Block block
        self.key_cap = 64
        self.key_ptr = <unsigned char*>malloc(self.key_cap)
        if self.key_ptr == NULL:
            raise MemoryError()
        self.key_len = 0
        if isinstance(content, Block):
            block = <Block>content        # already validated: share it
        else:
            block = Block(content, object)
        self.owner = block
        self.p = block.p
        self.limit = block.limit
        self.num_restarts = block.num_restarts
        self.object_name = block.object_name if object is None else object
        self.current = self.limit
        self.next_off = self.limit
        self.prev_at = -1

    def __dealloc__(self):
        free(self.key_ptr)
        free(self.prev_ents)
        free(self.prev_keys)

    cdef object corrupt(self, message, offset, expected=None, found=None):
        """The error to raise; leaves the iterator invalid first (an iterator that raised never
        reads again: its key buffer may hold a half-decoded key)."""
        self.invalidate()
        return CorruptionError(message, object=self.object_name or "block", offset=offset,
                               expected=expected, found=found)

    cdef uint32_t restart_at(self, Py_ssize_t i) noexcept:
        return load_u32(self.p + self.limit + 4 * i)

    cdef int varint_slow(self, Py_ssize_t* ppos, uint32_t* out) except -1:
        cdef Py_ssize_t pos = ppos[0], start = ppos[0]
        cdef uint64_t result = 0
        cdef int shift = 0, i
        cdef unsigned char byte
        for i in range(5):
            if pos >= self.limit:
                raise self.corrupt("truncated varint", pos)
            byte = self.p[pos]
            pos += 1
            result |= (<uint64_t>(byte & 0x7F)) << shift
            if not (byte & 0x80):
                if result > <uint64_t>U32_MAX:
                    raise self.corrupt("varint exceeds 32 bits", start)
                out[0] = <uint32_t>result
                ppos[0] = pos
                return 0
            shift += 7
        raise self.corrupt("varint longer than 5 bytes", pos - 5)

    cdef int parse(self, Py_ssize_t offset, Py_ssize_t prev_len) except -1:
        """Decode the entry at ``offset``; the key buffer's first ``prev_len`` bytes hold the
        previous key (0 at a restart). Every check comes before the key buffer changes."""
        cdef Py_ssize_t pos = offset
        cdef uint32_t shared, unshared, value_len
        cdef Py_ssize_t need
        cdef unsigned char* grown
        self.varint(&pos, &shared)
        self.varint(&pos, &unshared)
        self.varint(&pos, &value_len)
        if shared > prev_len:
            raise self.corrupt("shared prefix longer than the previous key", offset, f"<= {prev_len}", shared)
        if unshared > self.limit - pos or value_len > self.limit - pos - unshared:
            raise self.corrupt("entry overruns the block", offset, f"<= {self.limit - pos}",
                               <uint64_t>unshared + value_len)
        need = <Py_ssize_t>shared + unshared
        if need < MIN_FULL_KEY_LEN:
            raise self.corrupt("key shorter than a full key", offset, f">= {MIN_FULL_KEY_LEN}", need)
        if need > self.key_cap:
            grown = <unsigned char*>realloc(self.key_ptr, need * 2)
            if grown == NULL:
                self.invalidate()
                raise MemoryError()
            self.key_ptr = grown
            self.key_cap = need * 2
        memcpy(self.key_ptr + shared, self.p + pos, unshared)
        self.key_len = need
        self.decoded += 1
        self.current = offset
        self.value_start = pos + unshared
        self.value_end = self.value_start + value_len
        self.next_off = self.value_end
        return 0

    cdef Py_ssize_t restart_entry(self, Py_ssize_t index, Py_ssize_t* key_len) except -1:
        """Check the restart entry ``index`` as :meth:`restart_key` would (same checks, same
        order, same messages) without moving; return the offset of its key, which lies in place
        (``shared == 0``), and store its length in ``key_len``."""
        cdef Py_ssize_t offset = self.restart_at(index), pos
        cdef uint32_t shared, unshared, value_len
        pos = offset
        self.varint(&pos, &shared)
        if shared != 0:
            raise self.corrupt("restart entry with a shared prefix", offset, 0, shared)
        self.varint(&pos, &unshared)
        self.varint(&pos, &value_len)
        if unshared > self.limit - pos or value_len > self.limit - pos - unshared:
            raise self.corrupt("entry overruns the block", offset, f"<= {self.limit - pos}",
                               <uint64_t>unshared + value_len)
        if unshared < MIN_FULL_KEY_LEN:
            raise self.corrupt("key shorter than a full key", offset, f">= {MIN_FULL_KEY_LEN}", unshared)
        key_len[0] = unshared
        return pos

    cdef int restart_key(self, Py_ssize_t index) except -1:
        cdef Py_ssize_t offset = self.restart_at(index), pos
        cdef uint32_t shared
        pos = offset
        self.varint(&pos, &shared)
        if shared != 0:
            raise self.corrupt("restart entry with a shared prefix", offset, 0, shared)
        return self.parse(offset, 0)

    cdef void invalidate(self) noexcept:
        self.current = self.limit
        self.next_off = self.limit
        self.key_len = 0
        self.value_start = self.value_end = 0

    cdef void c_reset(self, Block block) noexcept:
        """Read ``block`` from now on (invalid until positioned): what ``BlockIterator(block)``
        gives, reusing this iterator and its key buffer. A scan moving to its next block
        saves an allocation."""
        self.owner = block
        self.p = block.p
        self.limit = block.limit
        self.num_restarts = block.num_restarts
        self.object_name = block.object_name
        self.prev_n, self.prev_at = 0, -1   # prev()'s interval belonged to the old block
        self.invalidate()

    cdef int c_seek_to_first(self) except -1:
        return self.parse(0, 0)

    cdef int c_seek_to_last(self) except -1:
        self.restart_key(self.num_restarts - 1)
        while self.next_off < self.limit:
            self.parse(self.next_off, self.key_len)
        return 0

    cdef int c_next(self) except -1:
        if self.next_off >= self.limit:
            self.invalidate()
            return 0
        return self.parse(self.next_off, self.key_len)

    cdef int c_prev(self) except -1:
        """Step back: from prev()'s decoded interval while the iterator is still on one of its
        entries, else decode the restart interval before the current entry once (each entry
        and its key kept), so a backward walk decodes every entry once (see the twin)."""
        cdef Py_ssize_t target = self.current
        cdef Py_ssize_t at = self.prev_at, lo = 0, hi = self.num_restarts, mid
        cdef PrevEntry* e
        if 0 < at < self.prev_n and self.prev_ents[at].offset == target:
            e = &self.prev_ents[at - 1]
            # an interval's keys are no longer than the buffer that decoded them
            memcpy(self.key_ptr, self.prev_keys + e.key_at, e.key_len)
            self.key_len = e.key_len
            self.current, self.value_start, self.value_end, self.next_off = \
                e.offset, e.value_start, e.value_end, e.next_off
            self.prev_at = at - 1
            return 0
        self.prev_at = -1
        self.prev_n = 0
        self.prev_keys_len = 0
        while lo < hi:   # the last restart before the current entry (restarts increase: checked)
            mid = (lo + hi) // 2
            if self.restart_at(mid) < target:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            self.invalidate()
            return 0
        self.restart_key(lo - 1)
        self.prev_push()
        while self.next_off < target:
            self.parse(self.next_off, self.key_len)
            self.prev_push()
        if self.next_off != target:
            self.prev_n = 0
            raise self.corrupt("entries do not chain to the current entry", target)
        self.prev_at = self.prev_n - 1
        return 0

    cdef int prev_push(self) except -1:
        """Keep the current entry (and a copy of its key) as the next of prev()'s interval."""
        cdef PrevEntry* grown_e
        cdef unsigned char* grown_k
        cdef Py_ssize_t cap
        if self.prev_n == self.prev_cap:
            cap = 16 if self.prev_cap == 0 else 2 * self.prev_cap
            grown_e = <PrevEntry*>realloc(self.prev_ents, cap * sizeof(PrevEntry))
            if grown_e == NULL:
                self.prev_n = 0
                self.invalidate()
                raise MemoryError()
            self.prev_ents, self.prev_cap = grown_e, cap
        if self.prev_keys_len + self.key_len > self.prev_keys_cap:
            cap = 2 * (self.prev_keys_len + self.key_len)
            grown_k = <unsigned char*>realloc(self.prev_keys, cap)
            if grown_k == NULL:
                self.prev_n = 0
                self.invalidate()
                raise MemoryError()
            self.prev_keys, self.prev_keys_cap = grown_k, cap
        memcpy(self.prev_keys + self.prev_keys_len, self.key_ptr, self.key_len)
        self.prev_ents[self.prev_n] = PrevEntry(self.current, self.value_start, self.value_end, self.next_off,
                                                self.prev_keys_len, self.key_len)
        self.prev_keys_len += self.key_len
        self.prev_n += 1
        return 0

    cdef int c_seek(self, const unsigned char* target, Py_ssize_t n) except -1:
        cdef Py_ssize_t left = 0, right = self.num_restarts - 1, mid, pos, key_len
        while left < right:
            # restart entries have shared == 0, so their key lies in place: compare it there
            mid = (left + right + 1) // 2
            pos = self.restart_entry(mid, &key_len)
            if cmp_full_keys(self.p + pos, key_len, target, n) < 0:
                left = mid
            else:
                right = mid - 1
        return self.c_seek_from(left, target, n)

    cdef int c_seek_from(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t n) except -1:
        """Move to the first entry >= ``target``, scanning from restart ``restart`` (the last
        restart whose key is < ``target``, or 0: what ``c_seek``'s binary search finds)."""
        self.restart_key(restart)
        while cmp_full_keys(self.key_ptr, self.key_len, target, n) < 0:
            if self.next_off >= self.limit:
                self.invalidate()
                return 0
            self.parse(self.next_off, self.key_len)
        return 0

    # --- Python API (same as the twin) ---

    def is_valid(self):
        return self.current < self.limit

    def key(self):
        assert self.current < self.limit, "key() on an invalid iterator"
        return PyBytes_FromStringAndSize(<const char*>self.key_ptr, self.key_len)

    def value(self):
        assert self.current < self.limit, "value() on an invalid iterator"
        return PyBytes_FromStringAndSize(<const char*>self.p + self.value_start, self.value_end - self.value_start)

    def seek_to_first(self):
        self.c_seek_to_first()

    def seek_to_last(self):
        self.c_seek_to_last()

    def next(self):
        assert self.current < self.limit, "next() on an invalid iterator"
        self.c_next()

    def prev(self):
        assert self.current < self.limit, "prev() on an invalid iterator"
        self.c_prev()

    def seek(self, target):
        cdef bytes t = as_key(target)
        self.c_seek(<const unsigned char*>PyBytes_AS_STRING(t), PyBytes_GET_SIZE(t))

    def seek_for_prev(self, target):
        cdef bytes t = as_key(target)
        cdef const unsigned char* tp = <const unsigned char*>PyBytes_AS_STRING(t)
        self.c_seek(tp, PyBytes_GET_SIZE(t))
        if not self.c_valid():
            self.c_seek_to_last()
        elif cmp_full_keys(self.key_ptr, self.key_len, tp, PyBytes_GET_SIZE(t)) > 0:
            self.c_prev()

    def collect_forward(self, end=None, Py_ssize_t limit=-1):
        """Entries from the current one while ``key < end``, at most ``limit`` of them (no limit
        if negative); see the twin. Returns ``(entries, hit_bound)``."""
        cdef bytes e
        cdef const unsigned char* ep = NULL
        cdef Py_ssize_t en = 0
        cdef list out = []
        if end is not None:
            e = as_key(end)
            ep = <const unsigned char*>PyBytes_AS_STRING(e)
            en = PyBytes_GET_SIZE(e)
        while self.current < self.limit and limit != 0:
            limit -= 1
            if ep != NULL and cmp_full_keys(self.key_ptr, self.key_len, ep, en) >= 0:
                return out, True
            out.append((PyBytes_FromStringAndSize(<const char*>self.key_ptr, self.key_len),
                        PyBytes_FromStringAndSize(<const char*>self.p + self.value_start,
                                                  self.value_end - self.value_start)))
            self.c_next()
        return out, False

    def collect_backward(self, start=None):
        """Entries from the current one backwards while ``key >= start``; see the twin."""
        cdef Py_ssize_t target = self.current
        cdef bint hit_bound = False
        cdef bytes s
        cdef list out = []
        assert self.current < self.limit, "collect_backward() on an invalid iterator"
        if start is None:
            self.c_seek_to_first()
        else:
            s = as_key(start)
            self.c_seek(<const unsigned char*>PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s))
            if not self.c_valid() or self.current > target:
                self.invalidate()
                return [], True
            hit_bound = self.current > 0
        while self.current < self.limit and self.current <= target:
            out.append((PyBytes_FromStringAndSize(<const char*>self.key_ptr, self.key_len),
                        PyBytes_FromStringAndSize(<const char*>self.p + self.value_start,
                                                  self.value_end - self.value_start)))
            self.c_next()
        self.invalidate()
        out.reverse()
        return out, hit_bound


include "_block_arena.pxi"

cdef object _UNFILLED = object()   # Block(_UNFILLED, name): an empty block for load_file_block to fill
#                                  (a C-level name: Python code cannot reach it and build an empty Block)


# --- validated block, shared by iterators; native point lookups -------------------------------

@cython.final
cdef class Block:
    """A block content whose trailer and restart array were checked once; what the block cache
    holds. Iterators made from it skip the checks; :meth:`get` is a point lookup in one call,
    through a restart index built on the first one (:meth:`build_index`)."""

    def __cinit__(self, content, object=None):
        cdef Py_ssize_t n
        cdef bytes data
        self.object_name = object
        self.shared_iter = None
        self.busy = False
        if content is _UNFILLED:           # load_file_block fills the content, then checks it
            return
        data = content if type(content) is bytes else bytes(content)
        n = PyBytes_GET_SIZE(data)
        self.size = n
        self.arena_p = arena_alloc(n)
        if self.arena_p != NULL:           # huge pages: see _block_arena.pxi
            memcpy(self.arena_p, PyBytes_AS_STRING(data), n)
            self.p = self.arena_p
        else:
            self.data = data
            self.p = <const unsigned char*>PyBytes_AS_STRING(data)
        self.check_restarts()

    cdef int check_restarts(self) except -1:
        """Check the trailer and the restart array of the content at ``p`` (``size`` bytes)."""
        cdef Py_ssize_t n = self.size, i
        cdef uint32_t num, offset, previous = 0
        if n < 4:
            raise self.corrupt("block shorter than its trailer", 0, ">= 4 bytes", n)
        num = load_u32(self.p + n - 4)
        if num == 0 or num > (n - 4) // 4:
            raise self.corrupt("bad restart count", n - 4, f"1..{(n - 4) // 4}", num)
        self.num_restarts = num
        self.limit = n - 4 - 4 * <Py_ssize_t>num
        for i in range(num):
            offset = load_u32(self.p + self.limit + 4 * i)
            if (i > 0 and offset <= previous) or offset >= self.limit or (i == 0 and offset != 0):
                raise self.corrupt("bad restart offset", self.limit + 4 * i, f"increasing, < {self.limit}", offset)
            previous = offset
        return 0

    cdef object corrupt(self, message, offset, expected=None, found=None):
        return CorruptionError(message, object=self.object_name or "block", offset=offset,
                               expected=expected, found=found)

    def __dealloc__(self):
        if self.ridx_in_arena:
            arena_free(<unsigned char*>self.ridx, self.num_restarts * sizeof(RestartEntry))
        else:
            free(self.ridx)
        if self.arena_p != NULL:
            arena_free(self.arena_p, self.size)

    cdef int build_index(self) except -1:
        """Index the restart keys for point lookups, one ``RestartEntry`` each: 16 bytes of
        its user key after the prefix they all share, as two big-endian numbers, its key's place
        and length, and where the next entry starts. A lookup then binary-searches those pairs in
        one small array instead of decoding restart entries spread over the block (fewer cache
        misses), compares whole keys only on ties (16 bytes cover the rest of most table keys, so
        ties are rare: 8 left a run of restarts of one vnode and one high half of a BIGINT pk to
        compare in the block), and ``find_in_place`` starts at the restart's key without reading
        the restart array at the block's end or the entry's header.

        Built only if every restart entry passes the checks ``restart_entry`` makes and the
        restart keys strictly increase; otherwise (``index_state`` 2) lookups keep searching the
        entries, so a damaged block raises or answers exactly as before. Not charged to the
        block cache (32 bytes a restart, ~2-6% of a 64 KiB block)."""
        cdef Py_ssize_t n = self.num_restarts, i, pos, cp = 0, first_u, last_u
        cdef uint32_t shared, unshared, value_len
        cdef RestartEntry* idx
        cdef bint in_arena
        self.index_state = 2
        idx = <RestartEntry*>arena_alloc(n * sizeof(RestartEntry))
        in_arena = idx != NULL
        if idx == NULL:
            idx = <RestartEntry*>malloc(n * sizeof(RestartEntry))
            if idx == NULL:
                return 0
        for i in range(n):
            pos = load_u32(self.p + self.limit + 4 * i)
            if (read_varint32(self.p, self.limit, &pos, &shared) or shared != 0
                    or read_varint32(self.p, self.limit, &pos, &unshared)
                    or read_varint32(self.p, self.limit, &pos, &value_len)
                    or unshared > self.limit - pos or value_len > self.limit - pos - unshared
                    or unshared < MIN_FULL_KEY_LEN
                    or (i > 0 and cmp_full_keys(self.p + idx[i - 1].key_pos, idx[i - 1].key_len, self.p + pos,
                                                unshared) >= 0)):
                if in_arena:
                    arena_free(<unsigned char*>idx, n * sizeof(RestartEntry))
                else:
                    free(idx)
                return 0
            idx[i].key_pos = <uint32_t>pos
            idx[i].key_len = unshared
            idx[i].next = <uint32_t>(pos + unshared + value_len)   # <= limit, checked above
            idx[i].unused = 0
        first_u = idx[0].key_len - EPOCH_LEN
        last_u = idx[n - 1].key_len - EPOCH_LEN
        while cp < first_u and cp < last_u and self.p[idx[0].key_pos + cp] == self.p[idx[n - 1].key_pos + cp]:
            cp += 1
        for i in range(n):
            idx[i].w0 = word_at(self.p + idx[i].key_pos, idx[i].key_len - EPOCH_LEN, cp)
            idx[i].w1 = word_at(self.p + idx[i].key_pos, idx[i].key_len - EPOCH_LEN, cp + 8)
        self.ridx, self.cp_len, self.ridx_in_arena = idx, cp, in_arena
        self.index_state = 1
        return 0

    cdef Py_ssize_t restart_for(self, const unsigned char* target, Py_ssize_t n) noexcept:
        """With the index built: the last restart whose key is < the full key ``target``, or 0
        if none is (exactly what ``BlockIterator.c_seek``'s binary search finds, since the
        restart keys strictly increase). Restart user keys all start with the ``cp_len`` bytes
        ``P``; their number pairs (the next 16 bytes, zero-padded) never decrease with the keys,
        a smaller pair means a smaller key and a larger one a larger key (a zero-padded shorter
        key is a prefix), so only restarts with the target's own pair need whole-key comparisons."""
        cdef Py_ssize_t count = self.num_restarts, tu = n - EPOCH_LEN, cp = self.cp_len, lo = 0, hi, mid, ties
        cdef const unsigned char* prefix = self.p + self.ridx[0].key_pos
        cdef int c = cmp_mem(target, prefix, tu if tu < cp else cp)
        cdef uint64_t tw, tw2, w
        if c < 0 or (c == 0 and tu < cp):
            return 0                      # below every restart key
        if c > 0:
            return count - 1              # above every restart key
        tw = word_at(target, tu, cp)
        tw2 = word_at(target, tu, cp + 8)
        hi = count
        while lo < hi:                    # first restart whose pair is >= (tw, tw2)
            mid = (lo + hi) >> 1
            w = self.ridx[mid].w0
            if w < tw or (w == tw and self.ridx[mid].w1 < tw2):
                lo = mid + 1
            else:
                hi = mid
        ties = lo
        hi = count
        while ties < hi:                  # first restart whose pair is > (tw, tw2)
            mid = (ties + hi) >> 1
            w = self.ridx[mid].w0
            if w < tw or (w == tw and self.ridx[mid].w1 <= tw2):
                ties = mid + 1
            else:
                hi = mid
        hi = ties
        while lo < hi:                    # among the ties: first restart whose key is >= target
            mid = (lo + hi) >> 1
            if cmp_full_keys(self.p + self.ridx[mid].key_pos, self.ridx[mid].key_len, target, n) < 0:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1 if lo > 0 else 0

    def __len__(self):
        return self.size

    @property
    def content(self):
        if self.data is None:
            return PyBytes_FromStringAndSize(<const char*>self.p, self.size)
        return self.data

    def iterator(self, object=None):
        """A new :class:`BlockIterator` over this block."""
        return BlockIterator(self, object)

    def get(self, user_key, epoch):
        """Point lookup: the first entry >= ``user_key || inverted(epoch)``.

        Returns ``(version_epoch, value_or_None)`` when that entry has ``user_key`` (``None`` for a
        tombstone), ``None`` when it has another user key, and ``False`` when the block ends
        before such an entry (the caller looks at the next block's first entry).
        """
        cdef bytes uk = user_key if type(user_key) is bytes else bytes(user_key)
        return self.c_get(uk, as_epoch(epoch))

    cdef object c_get(self, bytes uk, uint64_t epoch):
        """:meth:`get` for other native modules (no argument conversion)."""
        cdef Py_ssize_t un = PyBytes_GET_SIZE(uk), i
        cdef uint64_t inv = ~epoch   # the inverted epoch, in C
        cdef unsigned char small[256]
        cdef unsigned char* target
        cdef int status = 0
        cdef uint64_t version = 0
        if un + EPOCH_LEN <= 256:
            target = &small[0]
        else:
            target = <unsigned char*>malloc(un + EPOCH_LEN)
        if target == NULL:
            raise MemoryError()
        try:
            memcpy(target, PyBytes_AS_STRING(uk), un)
            for i in range(EPOCH_LEN):
                target[un + i] = (inv >> (8 * (EPOCH_LEN - 1 - i))) & 0xFF
            value = self.c_find(target, un + EPOCH_LEN, &status, &version)
        finally:
            if target != &small[0]:
                free(target)
        if status == 1:
            return PyLong_FromUnsignedLongLong(version), value
        return False if status == 2 else None

    cdef object c_find(self, const unsigned char* target, Py_ssize_t tn, int* status, uint64_t* version):
        """The point lookup of :meth:`get` for a full key ``target`` (user key || inverted read
        epoch; REQUIRES ``tn >= MIN_FULL_KEY_LEN``), without building a result tuple: the first
        entry >= ``target`` with ``target``'s user key sets ``status`` 1 and ``version`` and
        returns its value (None for a tombstone); an entry of another user key sets ``status`` 0,
        the block ending first sets 2 (both return None)."""
        return self.c_find_from(-1, target, tn, status, version)

    cdef object c_find_from(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t tn, int* status,
                            uint64_t* version):
        """``c_find`` given ``restart_for(target, tn)`` when the caller has it (a batch that
        prefetched the restart's entries), or -1 to compute it here."""
        cdef BlockIterator it
        cdef bint shared = not self.busy
        cdef Py_ssize_t un = tn - EPOCH_LEN, vn
        cdef const unsigned char* v
        cdef bint done = False
        if self.index_state == 0:
            self.build_index()
        if self.index_state == 1:
            if restart < 0:
                restart = self.restart_for(target, tn)
            value = self.find_in_place(restart, target, tn, status, version, &done)
            if done:
                return value
        try:
            if shared:
                if self.shared_iter is None:
                    it = BlockIterator(self)
                    it.owner = None        # this block owns it: no cycle that would delay freeing the block
                    self.shared_iter = it
                it = <BlockIterator>self.shared_iter
                self.busy = True
            else:
                it = BlockIterator(self)
            if self.index_state == 0:
                self.build_index()
            if self.index_state == 1:
                it.c_seek_from(restart if restart >= 0 else self.restart_for(target, tn), target, tn)
            else:
                it.c_seek(target, tn)
            if not it.c_valid():
                status[0] = 2
                return None
            if it.key_len != tn or not memcmp_eq(it.key_ptr, target, un):
                status[0] = 0
                return None
            v = it.p + it.value_start
            vn = it.value_end - it.value_start
            if vn >= 1 and v[0] == TAG_PUT:
                value = PyBytes_FromStringAndSize(<const char*>v + 1, vn - 1)
            elif vn == 1 and v[0] == TAG_DELETE:
                value = None
            else:
                raise it.corrupt("bad value tag", it.value_start, "0x01 or lone 0x02",
                                 bytes(v[:2 if vn >= 2 else vn]).hex())
            version[0] = ~load_u64_be(it.key_ptr + un)   # 2**64-1 - x in C
            status[0] = 1
            return value
        finally:
            if shared:
                self.busy = False

    cdef object find_in_place(self, Py_ssize_t restart, const unsigned char* target, Py_ssize_t tn,
                              int* status, uint64_t* version, bint* done):
        """``c_find``'s scan from restart ``restart`` (what ``restart_for`` gave) without decoding
        keys: sets ``done`` and answers as ``c_find`` does when every entry it reads has a key of
        ``tn`` bytes and passes ``BlockIterator.parse``'s checks and the answer's value has a good
        tag; else leaves ``done`` false, having changed nothing, and ``c_find`` takes the
        iterator (which raises for a damaged entry as before). REQUIRES the restart index built.

        Keys of one length order as plain bytes, and an entry's key is the previous key's first
        ``shared`` bytes then its own bytes in place, so the scan only tracks ``c``, how many
        leading bytes the current key shares with ``target``: while the key is below ``target``
        it differs from it first at ``c``, so a next key sharing more than ``c`` bytes with it is
        below ``target`` too (nothing read), and one sharing at most ``c`` bytes is compared in
        place from its ``shared``-th byte on. No key is copied."""
        cdef const unsigned char* p = self.p
        cdef Py_ssize_t limit = self.limit, pos, c, s = 0, un = tn - EPOCH_LEN, i, vpos
        cdef uint32_t shared, unshared, value_len
        cdef unsigned char suffix[EPOCH_LEN]
        cdef const RestartEntry* e = &self.ridx[restart]   # its header passed parse's checks (build_index)
        if e.key_len != tn:
            return None
        pos, unshared, value_len = e.key_pos, e.key_len, e.next - e.key_pos - e.key_len
        c = common_len(p + pos, target, tn)
        while c < tn and p[pos + c - s] < target[c]:      # the key at pos is below target
            while True:                                   # the next entry sharing at most c bytes
                pos += unshared + value_len
                if pos >= limit:                          # the block ends below target
                    status[0] = 2
                    done[0] = True
                    return None
                if (read_varint32(p, limit, &pos, &shared) or read_varint32(p, limit, &pos, &unshared)
                        or read_varint32(p, limit, &pos, &value_len) or shared > tn or shared + unshared != tn
                        or unshared > limit - pos or value_len > limit - pos - unshared):
                    return None
                if shared <= c:
                    break
            s = shared
            c = s + common_len(p + pos, target + s, unshared)
        # the key at pos (own bytes from s on) is the first >= target; it shares c >= s bytes with it
        if c < un:
            status[0] = 0
            done[0] = True
            return None
        vpos = pos + unshared
        if value_len >= 1 and p[vpos] == TAG_PUT:
            value = PyBytes_FromStringAndSize(<const char*>p + vpos + 1, value_len - 1)
        elif value_len == 1 and p[vpos] == TAG_DELETE:
            value = None
        else:
            return None                                   # c_find's iterator raises "bad value tag"
        for i in range(EPOCH_LEN):                        # bytes before s are target's (s <= c)
            suffix[i] = target[un + i] if un + i < s else p[pos + un + i - s]
        version[0] = ~load_u64_be(suffix)                 # 2**64-1 - x in C
        status[0] = 1
        done[0] = True
        return value

    def first_version(self, user_key):
        """``(version_epoch, value_or_None)`` of the block's first entry if it has ``user_key``,
        else ``None`` (for versions that continue from the previous block)."""
        cdef BlockIterator it = BlockIterator(self)
        cdef bytes uk = user_key if type(user_key) is bytes else bytes(user_key)
        it.c_seek_to_first()
        return entry_version(it, <const unsigned char*>PyBytes_AS_STRING(uk), PyBytes_GET_SIZE(uk))


cdef object entry_version(BlockIterator it, const unsigned char* uk, Py_ssize_t un):
    cdef const unsigned char* v
    cdef Py_ssize_t vn
    if it.key_len != un + EPOCH_LEN or not memcmp_eq(it.key_ptr, uk, un):
        return None
    version = PyLong_FromUnsignedLongLong(~load_u64_be(it.key_ptr + un))   # 2**64-1 - x in C
    v = it.p + it.value_start
    vn = it.value_end - it.value_start
    if vn >= 1 and v[0] == TAG_PUT:
        return version, PyBytes_FromStringAndSize(<const char*>v + 1, vn - 1)
    if vn == 1 and v[0] == TAG_DELETE:
        return version, None
    raise it.corrupt("bad value tag", it.value_start, "0x01 or lone 0x02", bytes(v[:2 if vn >= 2 else vn]).hex())


cdef bytes checked_first_key(object first_keys, Py_ssize_t index):
    """``first_keys[index]`` as bytes of a full key (the twin's ``_first_key``: same checks,
    same errors and messages); never cast unchecked, as a ``None`` or a short key would be read
    as bytes it does not have."""
    k = first_keys[index]
    if type(k) is not bytes:   # (the name is formatted only off the hot path)
        k = bytes_arg(k, f"first key {index}")
    if PyBytes_GET_SIZE(k) < MIN_FULL_KEY_LEN:
        raise InvalidArgumentError(f"first key {index} of {PyBytes_GET_SIZE(k)} bytes is shorter than {MIN_FULL_KEY_LEN}")
    return <bytes>k


def find_block(first_keys, full_key):
    """Index of the last block whose first key is <= ``full_key`` in full-key order (0 if none).

    ``first_keys``: a list or tuple of full keys in order (the ones the search compares are
    checked: ``InvalidArgumentError`` for a non-bytes or short one, as in the twin)."""
    cdef bytes t = as_key(full_key)
    cdef const unsigned char* tp = <const unsigned char*>PyBytes_AS_STRING(t)
    cdef Py_ssize_t tn = PyBytes_GET_SIZE(t)
    cdef Py_ssize_t lo = 0, hi, mid
    cdef bytes k
    if type(first_keys) is not list and type(first_keys) is not tuple:
        raise InvalidArgumentError(f"first keys must be a list or tuple, got {type(first_keys).__name__}")
    hi = len(first_keys)
    while lo < hi:
        mid = (lo + hi) // 2
        k = checked_first_key(first_keys, mid)
        if cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), tp, tn) <= 0:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1 if lo > 0 else 0


def find_block_for_version(first_keys, user_key, epoch):
    """:func:`find_block` for the full key ``user_key || inverted(epoch)``."""
    cdef bytes uk
    cdef Py_ssize_t un, i
    uk = bytes_arg(user_key, "user key")
    un = PyBytes_GET_SIZE(uk)
    cdef uint64_t inv = ~as_epoch(epoch)
    cdef bytes target = PyBytes_FromStringAndSize(NULL, un + EPOCH_LEN)
    cdef unsigned char* t = <unsigned char*>PyBytes_AS_STRING(target)
    memcpy(t, PyBytes_AS_STRING(uk), un)
    for i in range(EPOCH_LEN):
        t[un + i] = (inv >> (8 * (EPOCH_LEN - 1 - i))) & 0xFF
    return find_block(first_keys, target)


cdef uint64_t as_epoch(object epoch) except? 0:
    """A checked u64 epoch (same rule and message as the twin)."""
    if type(epoch) is not int or epoch < 0 or epoch > 0xFFFFFFFFFFFFFFFF:
        raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
    return PyLong_AsUnsignedLongLong(epoch)


cdef object _hash_array(const uint64_t* buf, Py_ssize_t n):
    out = array.array("Q")
    out.frombytes(PyBytes_FromStringAndSize(<const char*>buf, n * <Py_ssize_t>sizeof(uint64_t)))
    return out


cdef dict check_prefix_lens(object prefix_lens):
    """``BlockBuilder``'s ``prefix_lens``: None or a dict of table id -> length in [1, 65535]
    (the twin's checks and messages)."""
    if prefix_lens is None:
        return {}
    if type(prefix_lens) is not dict:
        raise InvalidArgumentError(f"prefix_lens must be a dict, got {type(prefix_lens).__name__}")
    for table_id, n in (<dict>prefix_lens).items():
        if type(table_id) is not int or not 0 <= table_id <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"prefix_lens: bad table id {table_id!r}")
        if type(n) is not int or not 1 <= n <= 0xFFFF:
            raise InvalidArgumentError(f"prefix_lens: bad prefix length {n!r} of table {table_id}")
    return <dict>prefix_lens


include "_block_load.pxi"
