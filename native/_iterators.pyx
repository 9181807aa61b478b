# cython: language_level=3
"""Native merge + user iterator of the read path; twin of ``hummock/_iterators_py.py`` (see its
docstring for the source contract and the results).

A binary heap of cursors, one per batch source, ordered by the full-key comparator (reversed for
reverse scans); each cursor walks a Python list of ``(full_key, value)`` entries and asks its
source for the next list only when one is used up. Version resolution and tag decoding run in C;
only chosen values become new Python objects. A resolved table watermark (``hide``, see the
twin) is applied in C: one epoch compare per entry and, for tables with watermark ranges, one
dict lookup per key returned (:func:`range_hides`, shared with the read path and compaction).
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.string cimport memcmp

from native._block cimport Block, BlockIterator
from native._lru cimport LruCache
from native._keycmp cimport cmp_full_keys

from hummock.errors import CorruptionError, InvalidArgumentError

DEF TAG_PUT = 0x01
DEF TAG_DELETE = 0x02


cdef inline uint64_t key_epoch(bytes key) noexcept:
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(key) + PyBytes_GET_SIZE(key) - 8
    cdef uint64_t x = 0
    cdef int i
    for i in range(8):
        x = (x << 8) | p[i]
    return ~x   # 2**64-1 - x in C (the literal would make it Python arithmetic)


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
        has_floor[0] = True
        floor[0] = <uint64_t>through
    if rng is not None and type(rng) is not dict:
        raise InvalidArgumentError("watermark ranges must be a dict")
    return rng


cdef inline bint same_user_key(bytes a, bytes b) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(a)
    return n == PyBytes_GET_SIZE(b) and memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), n - 8) == 0


cdef class _Cursor:
    """One source of the merge: ``key``/``value``/``tagged`` describe its current entry
    (attributes declared in ``_iterators.pxd``)."""

    cdef bint load(self) except -1:
        """Position on the current entry; False when the source is exhausted."""
        return False

    cdef bint advance(self) except -1:
        return False


@cython.final
cdef class _BatchCursor(_Cursor):
    """Walks a Python iterator of ``(full_key, value)`` lists."""
    cdef object batches
    cdef list batch
    cdef Py_ssize_t pos

    cdef bint load(self) except -1:
        cdef object entry
        while self.batch is None or self.pos >= len(self.batch):
            try:
                batch = next(self.batches)
            except StopIteration:
                self.batch = None
                self.key = None
                self.value = None
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
        return True

    cdef bint advance(self) except -1:
        self.pos += 1
        return self.load()


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
    """Walks an :class:`SstRun` forward block by block in C: no per-entry Python calls
    (attributes and the ``position`` protocol in ``_iterators.pxd``)."""

    cdef int start(self, SstRun run) except -1:
        cdef bytes start = None
        cdef Py_ssize_t lo, hi, mid
        cdef bytes k
        self.tagged = True
        self.readers = run.readers
        if run.end is not None:
            self.end = as_full_key(run.end)
        if run.start is not None:
            start = as_full_key(run.start)
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
        self.reader_index += 1
        if self.reader_index >= len(self.readers):
            self.it = None
            return False
        sst = self.readers[self.reader_index].sst
        first_keys = sst.meta.first_keys
        if type(first_keys) is not list:
            raise InvalidArgumentError("an SST's first keys must be a list")
        self.first_keys = <list>first_keys   # shared, never mutated; keys checked where compared
        self.largest = checked_full_key(sst.meta.largest_key)
        self.block_fn = sst.block
        cache = getattr(sst, "_block_cache", None)
        self.cache = <LruCache>cache if type(cache) is LruCache else None
        self.sst_id = sst.sst_id if self.cache is not None else None
        return True

    cdef int open_block(self, Py_ssize_t index) except -1:
        """Open block ``index`` of the current SST: a hit in a native block cache is read in C
        (``c_peek`` counts it, as ``Sstable.block``'s lookup would); anything else goes through
        ``Sstable.block`` (which counts the miss, loads and caches). One Python call less per
        block a scan opens -- per source of every short scan."""
        block = None
        if self.cache is not None:
            block = self.cache.c_peek((self.sst_id, index))
        if block is None:
            block = self.block_fn(index)
        if type(block) is not Block:
            raise InvalidArgumentError("the block source must return native Blocks")
        self.block_index = index
        self.block = <Block>block
        self.it = BlockIterator(block)
        return 0

    cdef bint position(self) except -1:
        """Open the next block or SST if the current block is used up; False (and ``it`` None)
        once the run or its end bound is reached. Copies nothing."""
        while self.it is not None and not self.it.c_valid():
            if self.block_index + 1 < len(self.first_keys):
                self.open_block(self.block_index + 1)
            elif self.next_reader():
                self.open_block(0)
            else:
                break
            self.it.c_seek_to_first()
        if self.it is None or not self.it.c_valid():
            self.it = None
            return False
        if self.end is not None and cmp_full_keys(self.it.key_ptr, self.it.key_len,
                                                  <const unsigned char*>PyBytes_AS_STRING(self.end),
                                                  PyBytes_GET_SIZE(self.end)) >= 0:
            self.it = None
            return False
        return True

    cdef bint load(self) except -1:
        if not self.position():
            self.key = None
            self.value = None
            return False
        self.key = PyBytes_FromStringAndSize(<const char*>self.it.key_ptr, self.it.key_len)
        self.value = PyBytes_FromStringAndSize(<const char*>self.it.p + self.it.value_start,
                                               self.it.value_end - self.it.value_start)
        return True

    cdef bint advance(self) except -1:
        self.it.c_next()
        return self.load()


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


cdef object plain_value(object value, bint tagged):
    """The user value, or None for a delete (checks the tag of stored values)."""
    cdef const unsigned char* p
    cdef Py_ssize_t n
    if not tagged:
        return value
    if type(value) is not bytes:
        raise CorruptionError("stored value is not bytes", object="scan")
    p = <const unsigned char*>PyBytes_AS_STRING(value)
    n = PyBytes_GET_SIZE(value)
    if n >= 1 and p[0] == TAG_PUT:
        return PyBytes_FromStringAndSize(<const char*>p + 1, n - 1)
    if n == 1 and p[0] == TAG_DELETE:
        return None
    raise CorruptionError("bad value tag", object="scan", expected="0x01 or lone 0x02",
                          found=bytes(value[:2]).hex())


cdef inline object table_key(bytes full_key):
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(full_key) + 4, PyBytes_GET_SIZE(full_key) - 12)


@cython.final
cdef class UserScan:
    """Iterator of ``(table_key, value)``: merged sources, newest visible version per key."""

    cdef list heap
    cdef Py_ssize_t size
    cdef uint64_t read_epoch
    cdef bint reverse
    cdef bytes decided       # forward: full key of the version chosen for the current user key
    cdef bytes group         # reverse: a full key of the current user key
    cdef object best         # reverse: newest visible stored value of the group so far
    cdef bint best_tagged
    cdef bint have
    cdef bytes cur_key       # the entry pop_entry took
    cdef object cur_value
    cdef bint cur_tagged
    cdef object owner        # kept alive while the scan lives (the engine's read state)
    cdef bint has_floor      # hide: versions <= floor are ignored (a truncation)
    cdef uint64_t floor
    cdef dict ranges         # hide: {vnode: (lo, hi)} watermark ranges, or None

    def __cinit__(self, sources, read_epoch, bint reverse=False, owner=None, hide=None):
        cdef _Cursor c
        if type(read_epoch) is not int or read_epoch < 0 or read_epoch > 0xFFFFFFFFFFFFFFFF:
            raise InvalidArgumentError(f"read_epoch must be an int in [0, 2**64), got {read_epoch!r}")
        self.ranges = unpack_hide(hide, &self.has_floor, &self.floor)
        self.read_epoch = read_epoch
        self.reverse = reverse
        self.owner = owner
        self.heap = []
        cdef _BatchCursor bc
        cdef _SstRunCursor rc
        for source in sources:
            if type(source) is SstRun and not reverse:
                rc = _SstRunCursor()
                rc.start(<SstRun>source)
                c = rc
            else:
                bc = _BatchCursor()
                if type(source) is SstRun:
                    bc.batches = iter((<SstRun>source).batches(reverse))
                    bc.tagged = True
                else:
                    batches, tagged = source
                    bc.batches = iter(batches)
                    bc.tagged = bool(tagged)
                c = bc
            if (<_Cursor>c).load():
                self.heap.append(c)
        self.size = len(self.heap)
        cdef Py_ssize_t i
        for i in range(self.size // 2 - 1, -1, -1):
            self.sift_down(i)

    cdef inline bint before(self, _Cursor a, _Cursor b) noexcept:
        cdef int c = cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(a.key), PyBytes_GET_SIZE(a.key),
                                   <const unsigned char*>PyBytes_AS_STRING(b.key), PyBytes_GET_SIZE(b.key))
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

    cdef int pop_entry(self) except -1:
        """Take the smallest entry into cur_*; REQUIRES size > 0."""
        cdef _Cursor top = <_Cursor>self.heap[0]
        self.cur_key = top.key
        self.cur_value = top.value
        self.cur_tagged = top.tagged
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
        self.group = None
        self.best = None
        self.have = False
        self.owner = None

    def __next__(self):
        cdef bytes key
        cdef object value
        cdef bint tagged
        if not self.reverse:
            while self.size > 0:
                self.pop_entry()
                key, value, tagged = self.cur_key, self.cur_value, self.cur_tagged
                if self.decided is not None and same_user_key(self.decided, key):
                    continue
                if not self.visible(key):
                    continue
                self.decided = key
                value = plain_value(value, tagged)
                if value is not None and not (self.ranges is not None and self.in_range(key)):
                    return table_key(key), value
            raise StopIteration
        while self.size > 0:
            self.pop_entry()
            key, value, tagged = self.cur_key, self.cur_value, self.cur_tagged
            if self.group is not None and same_user_key(self.group, key):
                if self.visible(key):
                    self.best, self.best_tagged, self.have = value, tagged, True
                continue
            result = self.finish_group()
            self.group = key
            if self.visible(key):
                self.best, self.best_tagged, self.have = value, tagged, True
            if result is not None:
                return result
        result = self.finish_group()
        self.group = None
        if result is not None:
            return result
        raise StopIteration

    cdef inline bint visible(self, bytes key) noexcept:
        """The version ``key`` is readable: at or below the read epoch, above a truncation."""
        cdef uint64_t e = key_epoch(key)
        return e <= self.read_epoch and not (self.has_floor and e <= self.floor)

    cdef bint in_range(self, bytes full_key) except -1:
        return range_hides(self.ranges, <const unsigned char*>PyBytes_AS_STRING(full_key) + 4,
                           PyBytes_GET_SIZE(full_key) - 12)

    cdef object finish_group(self):
        """The output of the finished reverse group, or None; resets the group state."""
        result = None
        if self.have and not (self.ranges is not None and self.in_range(self.group)):
            value = plain_value(self.best, self.best_tagged)
            if value is not None:
                result = (table_key(self.group), value)
        self.best = None
        self.have = False
        return result
