# cython: language_level=3
"""Native merge + user iterator of the read path; twin of ``hummock/_iterators_py.py`` (see its
docstring for the source contract and the results).

A binary heap of cursors, one per source, ordered by the full-key comparator (reversed for
reverse scans). A forward SST run is walked block by block in C (``_SstRunCursor``, reading each
SST through its ``ScanSst``: first keys, block loader and cache fetched once per SST, not per
scan); other sources walk Python lists of ``(full_key, value)`` entries and ask for the next
list only when one is used up. The merge compares cursors' keys in place: version resolution and
tag decoding run in C and only returned rows become Python objects (table key, value, pair). A
resolved table watermark (``hide``, see the twin) is applied in C: one epoch compare per entry
and, for tables with watermark ranges, one dict lookup per key returned (:func:`range_hides`,
shared with the read path and compaction). The read path builds its scans through the C entry
points ``scan_new``/``scan_add_run``/``scan_add_batches``/``scan_ready`` (``_iterators.pxd``).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from native._block cimport Block, BlockIterator
from native._lru cimport LruCache
from native._keycmp cimport cmp_full_keys, load_be64

from hummock.errors import CorruptionError, InvalidArgumentError

DEF TAG_PUT = 0x01
DEF TAG_DELETE = 0x02
DEF WALK_CONSUMED = 0   # walk_block: every entry through w.off is done
DEF WALK_STOP = 1       # walk_block: entry w.off is not done (next_raw takes it)


cdef inline int cmp_raw(const unsigned char* a, Py_ssize_t na, bytes b) noexcept:
    cdef Py_ssize_t nb = PyBytes_GET_SIZE(b)
    cdef int c = memcmp(a, PyBytes_AS_STRING(b), na if na < nb else nb)
    if c:
        return c
    return (na > nb) - (na < nb)


cdef bint range_hides(dict ranges, const unsigned char* k, Py_ssize_t n) except -1:
    """Whether table key ``k[:n]`` lies in its vnode's range of ``ranges`` (``{vnode: (lo,
    hi)}``, from ``TableWatermarks.resolve``: tuples of bytes and bytes-or-None, checked)."""
    cdef object rng, hi
    if n < 2:
        return False
    rng = ranges.get((k[0] << 8) | k[1])
    if rng is None:
        return False
    if type(rng) is not tuple or len(<tuple>rng) != 2 or type((<tuple>rng)[0]) is not bytes:
        raise InvalidArgumentError("a watermark range must be a (lo bytes, hi bytes or None) tuple")
    if cmp_raw(k + 2, n - 2, <bytes>(<tuple>rng)[0]) < 0:
        return False
    hi = (<tuple>rng)[1]
    if hi is None:
        return True
    if type(hi) is not bytes:
        raise InvalidArgumentError("a watermark range must be a (lo bytes, hi bytes or None) tuple")
    return cmp_raw(k + 2, n - 2, <bytes>hi) < 0


cdef object unpack_hide(object hide, bint* has_floor, uint64_t* floor):
    """Split a resolved table watermark (``None`` or ``(through or None, ranges or None)``):
    sets the truncation floor, returns the ranges dict (or None)."""
    has_floor[0] = False
    floor[0] = 0
    if hide is None:
        return None
    if type(hide) is not tuple or len(<tuple>hide) != 2:
        raise InvalidArgumentError("hide must be None or a (through, ranges) tuple")
    through, rng = hide
    if through is not None:
        if type(through) is not int or through < 0 or through > 0xFFFFFFFFFFFFFFFF:
            raise InvalidArgumentError(f"a truncation epoch must be an int in [0, 2**64), got {through!r}")
        has_floor[0] = True
        floor[0] = <uint64_t>through
    if rng is not None and type(rng) is not dict:
        raise InvalidArgumentError("watermark ranges must be a dict")
    return rng


cdef inline bint same_user_key(bytes a, bytes b) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(a)
    return n == PyBytes_GET_SIZE(b) and memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), n - 8) == 0


cdef class ScanSst:
    """An opened SST as native readers see it (``_iterators.pxd``). A plain ``ScanSst`` is
    filled by ``set_sst``; the read path's ``SstReader`` subclasses it and opens on first use."""

    cdef int ensure_open(self) except -1:
        if self.sst_obj is None:
            raise InvalidArgumentError("the SST is not open")
        return 0

    cdef int set_sst(self, sst) except -1:
        first_keys = sst.meta.first_keys
        if type(first_keys) is not list:
            raise InvalidArgumentError("an SST's first keys must be a list")
        self.first_keys = <list>first_keys
        self.largest = sst.meta.largest_key
        self.block_fn = sst.block
        cache = getattr(sst, "_block_cache", None)
        self.cache = <LruCache>cache if type(cache) is LruCache else None
        self.cache_ids = None
        self.sst_obj = sst
        return 0

    cdef object block_at(self, Py_ssize_t index):
        """Block ``index`` of the open SST: a hit in a native block cache is read in C (the
        cache counts it); anything else goes through the SST's ``block`` (which counts the
        miss, loads and caches). Cache keys are ``Sstable.block``'s ``(sst_id, index)``."""
        cdef Py_ssize_t n
        if self.cache is not None:
            if self.cache_ids is None:
                n = len(self.first_keys)
                sst_id = self.sst_obj.sst_id
                self.cache_ids = tuple([(sst_id, i) for i in range(n)])
            if 0 <= index < len(self.cache_ids):
                block = self.cache.c_peek(self.cache_ids[index])
                if block is not None:
                    return block
        return self.block_fn(index)


cdef class _Cursor:
    """One source of the merge: ``kp``/``kn`` point at its current entry's full key
    (attributes declared in ``_iterators.pxd``)."""

    cdef bint load(self) except -1:
        """Position on the current entry; False when the source is exhausted."""
        return False

    cdef bint advance(self) except -1:
        return False

    cdef object user_value(self):
        """The current entry's user value (new bytes), or None for a delete."""
        return None

    cdef int value_view(self, const unsigned char** vp, Py_ssize_t* vn) except -1:
        """Point ``vp``/``vn`` at the current entry's user value (borrowed until the cursor
        moves) and return 1, or return 0 for a delete."""
        return 0


@cython.final
cdef class _BatchCursor(_Cursor):
    """Walks a Python iterator of ``(full_key, value)`` lists; ``key``/``value`` hold the
    current entry (``kp`` points into ``key``)."""
    cdef object batches
    cdef list batch
    cdef Py_ssize_t pos
    cdef bytes key
    cdef object value
    cdef object plain    # value_view's user value, kept alive until the cursor moves

    cdef bint load(self) except -1:
        cdef object entry
        while self.batch is None or self.pos >= len(self.batch):
            try:
                batch = next(self.batches)
            except StopIteration:
                self.batch = None
                self.key = None
                self.value = None
                self.kp = NULL
                self.kn = 0
                return False
            if type(batch) is not list:
                raise InvalidArgumentError(f"a batch source yielded {type(batch).__name__}, not a list")
            self.batch = <list>batch
            self.pos = 0
        entry = self.batch[self.pos]
        if type(entry) is not tuple or len(<tuple>entry) != 2:
            raise InvalidArgumentError("batch entries must be (full_key, value) tuples")
        key = (<tuple>entry)[0]
        if type(key) is not bytes or PyBytes_GET_SIZE(key) < 12:
            raise CorruptionError("entry key is not a full key", object="scan", expected=">= 12 bytes")
        self.key = <bytes>key
        self.value = (<tuple>entry)[1]
        self.kp = <const unsigned char*>PyBytes_AS_STRING(self.key)
        self.kn = PyBytes_GET_SIZE(self.key)
        return True

    cdef bint advance(self) except -1:
        self.pos += 1
        return self.load()

    cdef object user_value(self):
        return plain_value(self.value, self.tagged)

    cdef int value_view(self, const unsigned char** vp, Py_ssize_t* vn) except -1:
        self.plain = plain_value(self.value, self.tagged)
        if self.plain is None:
            return 0
        if type(self.plain) is not bytes:
            raise CorruptionError("stored value is not bytes", object="scan")
        vp[0] = <const unsigned char*>PyBytes_AS_STRING(self.plain)
        vn[0] = PyBytes_GET_SIZE(self.plain)
        return 1


@cython.final
cdef class SstRun:
    """A run of SSTs with disjoint key ranges, in key order, scanned within ``[start, end)``
    (full keys, ``None``: unbounded). ``readers`` expose ``.sst`` (an opened Sstable)."""

    def __cinit__(self, readers, start=None, end=None):
        self.readers = list(readers)
        self.start = start
        self.end = end

    def batches(self, bint reverse):
        """The run as lists of ``(full_key, tagged_value)`` (the generic source form)."""
        ordered = self.readers[::-1] if reverse else self.readers
        for reader in ordered:
            yield from reader.sst.scan_batches(self.start, self.end, reverse=reverse)


@cython.final
cdef class _SstRunCursor(_Cursor):
    """Walks an :class:`SstRun` forward block by block in C: no per-entry Python calls and no
    copy of an entry until its value is asked for (attributes and the ``position`` protocol in
    ``_iterators.pxd``)."""

    cdef int start(self, SstRun run) except -1:
        return self.start_at(run.readers, run.start, run.end)

    cdef int start_at(self, list readers, object start_key, object end_key) except -1:
        """Start on ``readers`` (a list the cursor may keep: never mutated) within the full-key
        bounds ``[start_key, end_key)`` (None: unbounded)."""
        cdef bytes start = None
        cdef Py_ssize_t lo, hi, mid
        cdef bytes k
        self.tagged = True
        self.readers = readers
        if end_key is not None:
            self.end = as_full_key(end_key)
        if start_key is not None:
            start = as_full_key(start_key)
        self.reader_index = -1
        if not self.next_reader():
            return 0
        while start is not None and cmp_full_keys(
                <const unsigned char*>PyBytes_AS_STRING(self.largest), PyBytes_GET_SIZE(self.largest),
                <const unsigned char*>PyBytes_AS_STRING(start), PyBytes_GET_SIZE(start)) < 0:
            if not self.next_reader():   # this SST ends before the start: skip it
                return 0
        if start is None:
            self.open_block(0)
            self.it.c_seek_to_first()
            return 0
        lo, hi = 0, len(self.first_keys)
        while lo < hi:
            mid = (lo + hi) // 2
            k = checked_full_key(self.first_keys[mid])
            if cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k),
                             <const unsigned char*>PyBytes_AS_STRING(start), PyBytes_GET_SIZE(start)) <= 0:
                lo = mid + 1
            else:
                hi = mid
        self.open_block(lo - 1 if lo > 0 else 0)
        seek_block(self.block, self.it, start)
        return 0

    cdef bint next_reader(self) except -1:
        cdef ScanSst src
        self.reader_index += 1
        if self.reader_index >= len(self.readers):
            self.it = None
            return False
        reader = self.readers[self.reader_index]
        if isinstance(reader, ScanSst):
            src = <ScanSst>reader
            src.ensure_open()
        else:   # any reader exposing ``.sst`` (the twin's, a benchmark's)
            src = ScanSst()
            src.set_sst(reader.sst)
        self.src = src
        self.first_keys = src.first_keys
        self.largest = checked_full_key(src.largest)
        return True

    cdef int open_block(self, Py_ssize_t index) except -1:
        """Open block ``index`` of the current SST (``ScanSst.block_at``: a native block-cache
        hit costs no Python call), reusing the block iterator."""
        block = self.src.block_at(index)
        if type(block) is not Block:
            raise InvalidArgumentError("the block source must return native Blocks")
        self.block_index = index
        self.block = <Block>block
        self.below_end = self.end is None or self.block_ends_below(index)
        if self.it is None:
            self.it = BlockIterator(block)
        else:
            self.it.c_reset(<Block>block)
        return 0

    cdef bint block_ends_below(self, Py_ssize_t index) except -1:
        """Every entry of block ``index`` of the current SST is below ``end``: the next block
        starts at or before it (entries are below the next block's first key), or this is the
        SST's last block and its last key is below it."""
        cdef bytes k
        if index + 1 < len(self.first_keys):
            k = checked_full_key(self.first_keys[index + 1])
            return cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k),
                                 <const unsigned char*>PyBytes_AS_STRING(self.end), PyBytes_GET_SIZE(self.end)) <= 0
        return cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(self.largest), PyBytes_GET_SIZE(self.largest),
                             <const unsigned char*>PyBytes_AS_STRING(self.end), PyBytes_GET_SIZE(self.end)) < 0

    cdef bint position(self) except -1:
        """Open the next block or SST if the current block is used up; False (and ``it`` None)
        once the run or its end bound is reached. Copies nothing."""
        cdef bytes k
        while self.it is not None and not self.it.c_valid():
            if self.block_index + 1 < len(self.first_keys):
                if self.end is not None:   # a block starting at or past the end is never read
                    k = checked_full_key(self.first_keys[self.block_index + 1])
                    if cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k),
                                     <const unsigned char*>PyBytes_AS_STRING(self.end),
                                     PyBytes_GET_SIZE(self.end)) >= 0:
                        self.it = None
                        return False
                self.open_block(self.block_index + 1)
            elif self.next_reader():
                self.open_block(0)
            else:
                break
            self.it.c_seek_to_first()
        if self.it is None or not self.it.c_valid():
            self.it = None
            return False
        if not self.below_end and cmp_full_keys(self.it.key_ptr, self.it.key_len,
                                                <const unsigned char*>PyBytes_AS_STRING(self.end),
                                                PyBytes_GET_SIZE(self.end)) >= 0:
            self.it = None
            return False
        return True

    cdef bint load(self) except -1:
        if not self.position():
            self.kp = NULL
            self.kn = 0
            return False
        self.kp = self.it.key_ptr
        self.kn = self.it.key_len
        return True

    cdef bint advance(self) except -1:
        self.it.c_next()
        return self.load()

    cdef object user_value(self):
        return stored_value(self.it.p + self.it.value_start, self.it.value_end - self.it.value_start)

    cdef int value_view(self, const unsigned char** vp, Py_ssize_t* vn) except -1:
        cdef const unsigned char* p = self.it.p + self.it.value_start
        cdef Py_ssize_t n = self.it.value_end - self.it.value_start
        if n >= 1 and p[0] == TAG_PUT:
            vp[0] = p + 1
            vn[0] = n - 1
            return 1
        stored_value(p, n)   # a delete (None), else the CorruptionError of a bad tag
        return 0


cdef int seek_block(Block block, BlockIterator it, bytes target) except -1:
    """Move ``it`` (reading ``block``) to the first entry >= the full key ``target``: through
    the block's restart index when it has one (built here on first use, as point gets build
    it; ``Block.restart_for`` finds the restart ``c_seek``'s binary search would, without
    decoding restart entries), else ``c_seek``."""
    cdef const unsigned char* t = <const unsigned char*>PyBytes_AS_STRING(target)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(target)
    if block.index_state == 0:
        block.build_index()
    if block.index_state == 1:
        it.c_seek_from(block.restart_for(t, n), t, n)
    else:
        it.c_seek(t, n)
    return 0


cdef inline bytes checked_full_key(object key):
    if type(key) is not bytes or PyBytes_GET_SIZE(key) < 12:
        raise CorruptionError("block first key is not a full key", object="scan")
    return <bytes>key


cdef bytes as_full_key(object key):
    if type(key) is not bytes or PyBytes_GET_SIZE(key) < 12:
        raise InvalidArgumentError("scan bounds must be full keys (bytes of at least 12)")
    return <bytes>key


cdef object stored_value(const unsigned char* p, Py_ssize_t n):
    """The user value of the stored value ``p[:n]`` (tag byte + payload), or None for a delete."""
    if n >= 1 and p[0] == TAG_PUT:
        return PyBytes_FromStringAndSize(<const char*>p + 1, n - 1)
    if n == 1 and p[0] == TAG_DELETE:
        return None
    raise CorruptionError("bad value tag", object="scan", expected="0x01 or lone 0x02",
                          found=PyBytes_FromStringAndSize(<const char*>p, n if n < 2 else 2).hex())


cdef object plain_value(object value, bint tagged):
    """The user value, or None for a delete (checks the tag of stored values)."""
    if not tagged:
        return value
    if type(value) is not bytes:
        raise CorruptionError("stored value is not bytes", object="scan")
    return stored_value(<const unsigned char*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))


cdef inline object table_key(bytes full_key):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(full_key) + 4, PyBytes_GET_SIZE(full_key) - 12)


cdef inline uint64_t ptr_epoch(const unsigned char* k, Py_ssize_t n) noexcept nogil:
    return ~load_be64(k + n - 8)   # 2**64-1 - x in C


cdef UserScan scan_new(uint64_t read_epoch, bint reverse, object owner, object hide):
    """An empty scan to fill with ``scan_add_run``/``scan_add_batches``, then ``scan_ready``."""
    cdef UserScan scan = UserScan.__new__(UserScan)
    scan.ranges = unpack_hide(hide, &scan.has_floor, &scan.floor)
    scan.read_epoch = read_epoch
    scan.reverse = reverse
    scan.owner = owner
    return scan


cdef int scan_add_run(UserScan scan, list readers, object start, object end) except -1:
    """Add a run of SSTs (``readers``, a list the scan may keep) within full-key bounds
    ``[start, end)``: walked block by block in C forward, through ``SstRun.batches`` reverse."""
    cdef _SstRunCursor rc
    cdef _BatchCursor bc
    if not scan.reverse:
        rc = _SstRunCursor.__new__(_SstRunCursor)
        rc.start_at(readers, start, end)
        return scan.add_cursor(rc)
    bc = _BatchCursor.__new__(_BatchCursor)
    bc.batches = iter(SstRun(readers, start, end).batches(True))
    bc.tagged = True
    return scan.add_cursor(bc)


cdef int scan_add_batches(UserScan scan, object batches, bint tagged) except -1:
    """Add a batch source: an iterable of lists of ``(full_key, value)`` entries."""
    cdef _BatchCursor bc = _BatchCursor.__new__(_BatchCursor)
    bc.batches = iter(batches)
    bc.tagged = tagged
    return scan.add_cursor(bc)


cdef int scan_ready(UserScan scan) except -1:
    """Order the sources added: the scan may be iterated from now on."""
    cdef Py_ssize_t i
    scan.size = len(scan.heap)
    for i in range(scan.size // 2 - 1, -1, -1):
        scan.sift_down(i)
    return 0


@cython.final
cdef class UserScan:
    """Iterator of ``(table_key, value)``: merged sources, newest visible version per key.

    Forward, the merge looks at each source's current entry in place (``_Cursor.kp``): an entry
    that is an older version, above the read epoch or truncated costs no Python object; a
    returned row costs its table key, its value and the pair."""

    def __cinit__(self):
        self.heap = []
        self.decided_len = -1

    def __init__(self, sources, read_epoch, bint reverse=False, owner=None, hide=None):
        if type(read_epoch) is not int or read_epoch < 0 or read_epoch > 0xFFFFFFFFFFFFFFFF:
            raise InvalidArgumentError(f"read_epoch must be an int in [0, 2**64), got {read_epoch!r}")
        self.ranges = unpack_hide(hide, &self.has_floor, &self.floor)
        self.read_epoch = read_epoch
        self.reverse = reverse
        self.owner = owner
        for source in sources:
            if type(source) is SstRun:
                scan_add_run(self, (<SstRun>source).readers, (<SstRun>source).start, (<SstRun>source).end)
            elif type(source) is tuple and len(<tuple>source) == 2:
                batches, tagged = source
                scan_add_batches(self, batches, bool(tagged))
            else:
                raise InvalidArgumentError("a scan source must be an SstRun or a (batches, tagged) pair")
        scan_ready(self)

    def __dealloc__(self):
        free(self.decided)

    cdef int add_cursor(self, _Cursor c) except -1:
        if c.load():
            self.heap.append(c)
        return 0

    cdef bint before(self, _Cursor a, _Cursor b) noexcept:
        cdef int c = cmp_full_keys(a.kp, a.kn, b.kp, b.kn)
        return c > 0 if self.reverse else c < 0

    cdef void sift_down(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t child
        cdef object t
        while True:
            child = 2 * i + 1
            if child >= self.size:
                return
            if child + 1 < self.size and self.before(<_Cursor>self.heap[child + 1], <_Cursor>self.heap[child]):
                child += 1
            if self.before(<_Cursor>self.heap[child], <_Cursor>self.heap[i]):
                t = self.heap[i]
                self.heap[i] = self.heap[child]
                self.heap[child] = t
                i = child
            else:
                return

    cdef int advance_top(self) except -1:
        """Move the smallest cursor past its entry and restore the heap; REQUIRES size > 0."""
        cdef _Cursor top = <_Cursor>self.heap[0]
        if not top.advance():
            self.size -= 1
            self.heap[0] = self.heap[self.size]
            self.heap.pop()
        if self.size > 1:
            self.sift_down(0)
        return 0

    def __iter__(self):
        return self

    def close(self):
        """Stop early: drop the sources and the state this scan was reading."""
        self.heap = []
        self.size = 0
        self.pending = False
        self.group = None
        self.best = None
        self.have = False
        self.owner = None

    cdef int next_raw(self, const unsigned char** kp, Py_ssize_t* kn, const unsigned char** vp,
                      Py_ssize_t* vn) except -1:
        """Forward only: the next row's table key and user value as borrowed pointers, valid
        until the scan moves on (``_iterators.pxd``); 1, or 0 at the end. The same rows, checks
        and order as ``__next__``."""
        cdef _Cursor top
        cdef const unsigned char* k
        cdef Py_ssize_t n, un
        cdef unsigned char* grown
        if self.reverse:
            raise InvalidArgumentError("next_raw reads forward scans only")
        if self.pending:
            self.pending = False
            self.advance_top()
        while self.size > 0:
            top = <_Cursor>self.heap[0]
            k, n = top.kp, top.kn
            un = n - 8
            # keys in order differ mostly in their last byte: test it before the whole key
            if self.decided_len == un and self.decided[un - 1] == k[un - 1] and memcmp(self.decided, k, un) == 0:
                self.advance_top()   # an older version of the key decided last
                continue
            if not self.visible(k, n):
                self.advance_top()
                continue
            if un > self.decided_cap:
                grown = <unsigned char*>realloc(self.decided, un)
                if grown == NULL:
                    raise MemoryError()
                self.decided, self.decided_cap = grown, un
            memcpy(self.decided, k, un)
            self.decided_len = un
            if top.value_view(vp, vn) and not (self.ranges is not None and range_hides(self.ranges, k + 4, n - 12)):
                kp[0] = k + 4
                kn[0] = n - 12
                self.pending = True   # the pointers borrow the top entry: move past it next time
                return 1
            self.advance_top()
        return 0

    cdef int walk_block(self, BlockWalk* w, row_sink sink, void* ctx, Py_ssize_t cap) except -1 nogil:
        """From the current (parsed) entry ``w.off`` to at most the block's end, do what
        ``next_raw`` does per entry -- skip older versions, versions above the read epoch or
        truncated, and deletes; hand each other value to ``sink`` -- without the GIL, until
        ``cap`` rows are handed or an entry needs ``next_raw`` (``_iterators.pxd``).

        Ends in one of two states, the key buffer holding the key of ``w.off``:
        ``WALK_CONSUMED``: every entry through ``w.off`` is done (the block ended, or ``cap``);
        ``WALK_STOP``: entry ``w.off`` is not done (``w.key_len``: the length of the key in the
        buffer, the previous entry's if ``w.off``'s header was not read): the caller re-reads
        it through the iterator (``parse``: its checks and errors) and hands it to ``next_raw``.
        Each header check below is ``BlockIterator.parse``'s, so an entry that fails one
        stops the walk and ``parse`` raises the iterator's error for it."""
        cdef const unsigned char* p = w.p
        cdef unsigned char* key = w.key
        cdef Py_ssize_t off = w.off, vs = w.value_start, ve = w.value_end, nxt = w.next_off
        cdef Py_ssize_t kn = w.key_len, un, pos, need, i
        cdef uint32_t fields[3]
        cdef uint64_t e = ptr_epoch(key, kn), x
        cdef unsigned char byte
        cdef unsigned char* grown
        cdef const unsigned char* v
        cdef bint put, bad
        cdef int f, shift
        w.rows = 0
        w.parsed = 0
        while True:
            # entry ``off`` is read: key ``key[:kn]``, stored value ``p[vs:ve]``, next entry at ``nxt``
            un = kn - 8
            if not (self.decided_len == un and self.decided[un - 1] == key[un - 1]
                    and memcmp(self.decided, key, un) == 0):
                if e <= self.read_epoch and not (self.has_floor and e <= self.floor):
                    v = p + vs
                    if ve - vs >= 1 and v[0] == TAG_PUT:
                        put = True
                    elif ve - vs == 1 and v[0] == TAG_DELETE:
                        put = False
                    else:   # a bad tag: next_raw raises its error
                        break
                    if un > self.decided_cap or self.decided_cap < 16:
                        grown = <unsigned char*>realloc(self.decided, un if un > 16 else 16)
                        if grown == NULL:
                            break   # next_raw raises MemoryError
                        self.decided, self.decided_cap = grown, (un if un > 16 else 16)
                    if un <= 16 and kn >= 16:   # a fixed 16-byte move, not a libc call per row
                        memcpy(self.decided, key, 16)
                    else:
                        memcpy(self.decided, key, un)
                    self.decided_len = un
                    if put:
                        sink(ctx, v + 1, ve - vs - 1)
                        w.rows += 1
                        if w.rows == cap:
                            w.status = WALK_CONSUMED
                            w.off, w.key_len = off, kn
                            return 0
            if nxt >= w.limit:   # the block is done
                w.status = WALK_CONSUMED
                w.off, w.key_len = off, kn
                return 0
            pos = nxt
            bad = False
            for f in range(3):   # shared, unshared, value length: varint32s
                x = 0
                shift = 0
                while True:
                    if pos >= w.limit or shift > 28:
                        bad = True
                        break
                    byte = p[pos]
                    pos += 1
                    x |= (<uint64_t>(byte & 0x7F)) << shift
                    if not (byte & 0x80):
                        break
                    shift += 7
                if bad or (x >> 32) != 0:
                    bad = True
                    break
                fields[f] = <uint32_t>x
            if bad:
                w.status = WALK_STOP
                w.off, w.key_len = nxt, kn
                return 0
            need = <Py_ssize_t>fields[0] + fields[1]
            if (fields[0] > kn or fields[1] > w.limit - pos or fields[2] > w.limit - pos - fields[1]
                    or need < 12 or need > w.key_cap):
                w.status = WALK_STOP
                w.off, w.key_len = nxt, kn
                return 0
            if fields[1] <= 16 and fields[0] + 16 <= w.key_cap and 16 <= w.limit - pos:
                # keys in order mostly differ in a few bytes: one fixed 16-byte move (inside the
                # key buffer and the entry area; bytes past the key are never read)
                memcpy(key + fields[0], p + pos, 16)
            else:
                memcpy(key + fields[0], p + pos, fields[1])
            if fields[1] >= 8:   # the epoch from the block, not from bytes just stored one by one
                e = ~load_be64(p + pos + fields[1] - 8)
            else:
                e = ptr_epoch(key, need)
            w.parsed += 1
            off, kn = nxt, need
            vs = pos + fields[1]
            ve = vs + fields[2]
            nxt = ve
            if w.end != NULL and cmp_full_keys(key, kn, w.end, w.end_len) >= 0:
                break   # at or past the end: position() ends the run
        w.status = WALK_STOP
        w.off, w.key_len = off, kn
        return 0

    cdef Py_ssize_t drain(self, row_sink sink, void* ctx, Py_ssize_t cap) except -1:
        """Forward only: hand at most ``cap`` rows' user values to ``sink`` -- ``next_raw``'s rows,
        order and errors -- and return how many (fewer than ``cap`` only at the end). One SST
        run is walked block by block without the GIL (``_iterators.pxd``, ``walk_block``)."""
        cdef Py_ssize_t n = 0, before
        cdef const unsigned char* kp
        cdef const unsigned char* vp
        cdef Py_ssize_t kn, vn
        cdef _SstRunCursor c
        cdef BlockIterator it
        cdef BlockWalk w
        if self.reverse:
            raise InvalidArgumentError("drain reads forward scans only")
        while n < cap:
            if self.pending:
                self.pending = False
                self.advance_top()
                continue
            if self.size == 1 and self.ranges is None and type(self.heap[0]) is _SstRunCursor:
                c = <_SstRunCursor>self.heap[0]
                it = c.it
                w.p, w.limit, w.key, w.key_cap = it.p, it.limit, it.key_ptr, it.key_cap
                if c.below_end:
                    w.end, w.end_len = NULL, 0
                else:
                    w.end = <const unsigned char*>PyBytes_AS_STRING(c.end)
                    w.end_len = PyBytes_GET_SIZE(c.end)
                w.off, w.value_start, w.value_end = it.current, it.value_start, it.value_end
                w.next_off, w.key_len = it.next_off, it.key_len
                with nogil:
                    self.walk_block(&w, sink, ctx, cap - n)
                n += w.rows
                before = it.decoded
                it.parse(w.off, w.key_len)   # the iterator on the walk's last entry (its checks)
                it.decoded = before + w.parsed
                if w.status == WALK_CONSUMED:
                    c.kp, c.kn = it.key_ptr, it.key_len
                    self.pending = True   # move past it next
                    continue
                if not c.load():   # the end bound: the run is done
                    self.size = 0
                    self.heap.pop()
                    continue
            if not self.next_raw(&kp, &kn, &vp, &vn):
                break
            sink(ctx, vp, vn)
            n += 1
        return n

    def __next__(self):
        cdef const unsigned char* kp
        cdef const unsigned char* vp
        cdef Py_ssize_t kn, vn
        cdef _BatchCursor bc
        cdef bytes key
        if not self.reverse:   # next_raw's row, copied (the top entry moves on at the next call)
            if self.next_raw(&kp, &kn, &vp, &vn):
                return (PyBytes_FromStringAndSize(<const char*>kp, kn), PyBytes_FromStringAndSize(<const char*>vp, vn))
            raise StopIteration
        while self.size > 0:
            bc = <_BatchCursor>self.heap[0]   # reverse scans read batch sources only
            key, value, tagged = bc.key, bc.value, bc.tagged
            self.advance_top()
            if self.group is not None and same_user_key(self.group, key):
                if self.visible(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)):
                    self.best, self.best_tagged, self.have = value, tagged, True
                continue
            result = self.finish_group()
            self.group = key
            if self.visible(<const unsigned char*>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)):
                self.best, self.best_tagged, self.have = value, tagged, True
            if result is not None:
                return result
        result = self.finish_group()
        self.group = None
        if result is not None:
            return result
        raise StopIteration

    cdef bint visible(self, const unsigned char* k, Py_ssize_t n) noexcept:
        """The version of full key ``k[:n]`` is readable: at or below the read epoch, above a
        truncation."""
        cdef uint64_t e = ptr_epoch(k, n)
        return e <= self.read_epoch and not (self.has_floor and e <= self.floor)

    cdef object finish_group(self):
        """The output of the finished reverse group, or None; resets the group state."""
        result = None
        if self.have and not (self.ranges is not None and range_hides(
                self.ranges, <const unsigned char*>PyBytes_AS_STRING(self.group) + 4,
                PyBytes_GET_SIZE(self.group) - 12)):
            value = plain_value(self.best, self.best_tagged)
            if value is not None:
                result = (table_key(self.group), value)
        self.best = None
        self.have = False
        return result
