# Included by native/_block.pyx (one extension module: nothing else may include it).
#
# BlockBuilder: one block at a time plus the SST-wide accounting (key range, epochs, counts,
# table ids, live counts, filter and prefix hashes); the entry writers (c_add, c_add_raw, the
# packed path) and the block's close (restart array, the stored form's trailer and checksum).
# Twin: hummock/sstable/_block_py.py (BlockBuilder). Callers: hummock/sstable/builder.py, the
# compaction core (native/_compact.pyx, through _block.pxd).

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
