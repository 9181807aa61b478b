# Included by native/_block.pyx (one extension module: nothing else may include it).
#
# BlockIterator: seek, next/prev and the batched scans over one block's entries; every
# varint, length and offset it reads is checked against the entry area's end first.
# Twin: hummock/sstable/_block_py.py (BlockIterator). Callers: the read path (native/_readpath.pyx,
# native/_iterators.pyx, through _block.pxd) and hummock/sstable/reader.py.

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
