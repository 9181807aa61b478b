# Included by native/_block.pyx (one extension module: nothing else may include it).
#
# Block: a block content validated once (trailer, restart array) and copied into the arena
# (_block_arena.pxi); what the block cache holds, with point lookups in one call. Also
# find_block / find_block_for_version (the index search over first keys) and the prefix-length
# argument check. Twin: hummock/sstable/_block_py.py.

cdef object _UNFILLED = object()   # Block(_UNFILLED, name): an empty block for load_file_block to fill
#                                  (a C-level name: Python code cannot reach it and build an empty Block)


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
