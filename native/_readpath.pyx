# cython: language_level=3
"""Native read states and point gets; twin of ``hummock/_readpath_py.py`` (see its docstring for
the contract and the search order).

The whole get runs in C: argument checks, the imm filter probes and binary searches, key-range
screening, the SST filter probes (the key is hashed once per get and every filter is probed in C
through ``native/_filter.pxd``), the block search over first keys, and the lookup
inside the cached block (a C call into ``native._block.Block``), and the block cache lookup of a
hit (``LruCache.c_peek``). Python-level work is a block-cache miss and, once per SST, opening it.
``multi_get`` runs the same search for a batch in ascending key order, one forward walk per
sorted run (``find_in_run``): a key passing its SST's filter is located (``SstReader.c_locate``),
its block's restart interval prefetched, and searched a few keys later (``c_finish``), so the
cache misses of several lookups overlap. ``scan_prefixes`` reads a batch of key prefixes the
same way (``native/_prefix_scan.pxi``, included at the end of this file: one walk per source for
the sorted batch, a prefix held by one SST read without a merge). ``iter`` checks its arguments and picks the scan's
sources in C (binary search per non-overlapping run), then hands them to the native ``UserScan``.
Table watermarks (``marks``): a get resolves its table's records (cached per version for reads
at the newest epochs) and checks the version it found in C; tables without records cost one
test of an empty dict.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_FromUnsignedLongLong
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

from native._block cimport Block, BlockIterator
from native._filter cimport FilterReader, filter_key_hash
from native._iterators cimport (ScanSst, UserScan, range_hides, scan_add_batches, scan_add_run, scan_new,
                                scan_ready, stored_value, unpack_hide)
from native._keycmp cimport cmp_full_keys, cmp_mem, load_be64
from native._keysort cimport KeyRef, cmp_key_refs, sort_key_refs
from native._lru cimport LruCache

from hummock import iterators as _iterators
from hummock.errors import ExpiredEpochError, InvalidArgumentError

cdef object imm_source = _iterators.imm_source
cdef object EMPTY = ()

DEF SPILL_MASK = 0xFFFF


cdef inline int cmp_bytes(const char* a, Py_ssize_t na, const char* b, Py_ssize_t nb) noexcept:
    cdef int c = cmp_mem(<const unsigned char*>a, <const unsigned char*>b, na if na < nb else nb)
    if c:
        return c
    return (na > nb) - (na < nb)


cdef inline int cmp_obj(bytes a, bytes b) noexcept:
    return cmp_bytes(PyBytes_AS_STRING(a), PyBytes_GET_SIZE(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


@cython.final
cdef class FindCursor:
    """Where the previous lookup of an ascending sequence of keys ended in one SST: its reader,
    block index and block (kept alive here). The next, larger key searches from that block on
    and reuses it when it lands there (``SstReader.c_find``). Used by one batch, never shared."""
    cdef object reader     # the SstReader of ``block`` (None: nothing yet)
    cdef Py_ssize_t index
    cdef object block


@cython.final
cdef class SstReader(ScanSst):
    """One SST as the read path sees it; opens the SST (``opener(info)``) on first use. As a
    ``ScanSst`` (``native/_iterators.pxd``) it hands scans its first keys, block loader and
    block cache without a Python attribute lookup per scan."""
    cdef readonly object info
    cdef readonly object sst_id
    cdef readonly bytes lo
    cdef readonly bytes hi
    cdef readonly uint64_t min_epoch
    cdef readonly uint64_t max_epoch
    cdef object opener
    cdef FilterReader filter
    cdef FilterReader prefix_filter   # None: the SST has no prefix filter
    cdef dict prefix_lens             # table id -> prefix length its prefix filter covers
    cdef long long one_table          # the only table of prefix_lens (-1: none or several)
    cdef Py_ssize_t one_len

    def __cinit__(self, info, opener):
        self.info = info
        self.sst_id = info.sst_id
        self.lo = info.smallest_key[:-8]
        self.hi = info.largest_key[:-8]
        self.min_epoch = info.min_epoch
        self.max_epoch = info.max_epoch
        self.opener = opener

    @property
    def sst(self):
        self.ensure_open()
        return self.sst_obj

    cdef int ensure_open(self) except -1:
        if self.sst_obj is None:
            sst = self.opener(self.info)
            flt = sst._filter
            if type(flt) is not FilterReader:
                raise InvalidArgumentError("the native read path needs the native FilterReader")
            self.set_prefix_filter(sst)
            self.filter = <FilterReader>flt
            self.set_sst(sst)   # first keys, block loader and cache; marks the SST open
        return 0

    cdef int set_prefix_filter(self, sst) except -1:
        flt = sst.prefix_filter
        self.one_table = -1
        if flt is None:
            return 0
        if type(flt) is not FilterReader:
            raise InvalidArgumentError("the native read path needs the native FilterReader")
        lens = sst.prefix_lens
        if type(lens) is not dict:
            raise InvalidArgumentError("an SST's prefix lengths must be a dict")
        self.prefix_lens = <dict>lens
        if len(self.prefix_lens) == 1:
            for table_id, n in self.prefix_lens.items():
                self.one_table, self.one_len = table_id, n
        self.prefix_filter = <FilterReader>flt
        return 0

    cdef int prefix_excludes(self, PrefixProbe* probe) except -1:
        """1 when the SST's prefix filter proves no key of the probe's range is here."""
        cdef Py_ssize_t n
        self.ensure_open()
        if self.prefix_filter is None:
            return 0
        if self.one_table >= 0:
            if self.one_table != <long long>probe.table_id:
                return 0
            n = self.one_len
        else:
            found = self.prefix_lens.get(probe.table_id)
            if found is None:
                return 0
            n = found
        if n > probe.start_len:
            return 0
        if n != probe.n:
            probe.n = n
            probe.ok = confined(probe.start, probe.end, n)
            if probe.ok:
                probe.h = filter_key_hash(<const unsigned char*>PyBytes_AS_STRING(<object>probe.lo_user), <size_t>(4 + n))
        return probe.ok and not self.prefix_filter.probe(probe.h)

    def get(self, user_key, read_epoch):
        """``(version_epoch, value_or_None)`` of the newest version <= ``read_epoch``, or None."""
        cdef bytes uk = user_key if type(user_key) is bytes else bytes(user_key)
        if PyBytes_GET_SIZE(uk) < 4:
            raise InvalidArgumentError("user key must hold at least the 4-byte table id")
        return self.c_get(uk, read_epoch, key_hash(uk))

    cdef object c_get(self, bytes uk, uint64_t read, uint64_t uk_hash):
        """``get`` for a checked user key whose filter hash is ``uk_hash``."""
        cdef Py_ssize_t un = PyBytes_GET_SIZE(uk), i
        cdef uint64_t inv = ~read   # 2**64-1 - read in C
        cdef unsigned char small[256]
        cdef unsigned char* target
        cdef int status = 0
        cdef uint64_t version = 0
        if un + 8 <= 256:
            target = &small[0]
        else:
            target = <unsigned char*>malloc(un + 8)
            if target == NULL:
                raise MemoryError()
        try:
            memcpy(target, PyBytes_AS_STRING(uk), un)
            for i in range(8):
                target[un + i] = (inv >> (8 * (7 - i))) & 0xFF
            value = self.c_find(target, un + 8, uk_hash, None, &status, &version)
        finally:
            if target != &small[0]:
                free(target)
        if status != 1:
            return None
        return PyLong_FromUnsignedLongLong(version), value

    cdef object c_find(self, const unsigned char* target, Py_ssize_t tn, uint64_t uk_hash, FindCursor cur,
                       int* status, uint64_t* version):
        """The lookup of ``c_get`` for a built full key ``target`` (user key || inverted read
        epoch, ``tn >= 12``) without a result tuple: ``status`` 1 with ``version`` set and the
        value returned (None: a tombstone) when the SST holds a version <= the read epoch, else
        0 (returns None). ``cur`` (or None): the cursor of an ascending batch of targets in
        this SST; the search starts at its block and keeps the block found."""
        cdef Py_ssize_t index
        status[0] = 0
        self.ensure_open()
        if not self.filter.probe(uk_hash):
            return None
        block = self.c_locate(target, tn, cur, &index)
        return self.c_finish(block, index, target, tn, status, version)

    cdef object c_locate(self, const unsigned char* target, Py_ssize_t tn, FindCursor cur, Py_ssize_t* found):
        """``c_find``'s block search, after its filter probe passed (REQUIRES the SST open): the
        native ``Block`` whose range holds ``target``, its index in ``found``; counts the block
        cache lookup and moves ``cur`` as ``c_find`` does."""
        cdef Py_ssize_t lo = 0, hi, mid, index, n
        cdef bytes k
        n = len(self.first_keys)
        hi = n
        if cur is not None and cur.reader is self:
            lo = cur.index + 1          # an ascending batch: the block is cur.index or later
            if lo < n:
                k = self.first_keys[lo]
                if type(k) is not bytes or PyBytes_GET_SIZE(k) < 12:
                    raise InvalidArgumentError("block first keys must be full keys")
                if cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), target, tn) > 0:
                    hi = lo             # still in the cursor's block
                else:
                    lo += 1
        while lo < hi:
            mid = (lo + hi) // 2
            k = self.first_keys[mid]
            if type(k) is not bytes or PyBytes_GET_SIZE(k) < 12:
                raise InvalidArgumentError("block first keys must be full keys")
            if cmp_full_keys(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), target, tn) <= 0:
                lo = mid + 1
            else:
                hi = mid
        index = lo - 1 if lo > 0 else 0
        if cur is not None and cur.reader is self and cur.index == index:
            block = cur.block
            if self.cache is not None:
                self.cache.hits += 1    # counted as the lookup it saves (stats match the twin's)
        else:
            block = self.block_at(index)
            if type(block) is not Block:
                raise InvalidArgumentError("the block source must return native Blocks")
            if cur is not None:
                cur.reader, cur.index, cur.block = self, index, block
        found[0] = index
        return block

    cdef object c_finish(self, object block, Py_ssize_t index, const unsigned char* target, Py_ssize_t tn,
                         int* status, uint64_t* version, Py_ssize_t restart=-1):
        """``c_find``'s lookup in ``block`` (what ``c_locate`` found at ``index``; ``restart``:
        the block's ``restart_for`` the target when known, else -1), and in the next block when
        the versions may continue there; sets ``status`` and ``version``."""
        cdef Py_ssize_t n = len(self.first_keys)
        value = (<Block>block).c_find_from(restart, target, tn, status, version)
        if status[0] != 2:
            return value
        status[0] = 0                   # the versions may continue in the next block
        if index + 1 >= n:
            return None
        found = self.block_at(index + 1).first_version(PyBytes_FromStringAndSize(<const char*>target, tn - 8))
        if found is None:
            return None
        version[0] = <uint64_t>found[0]
        status[0] = 1
        return found[1]


cdef struct PrefixProbe:
    # a scan whose range may lie within one key prefix: SSTs whose prefix filter rules it out are skipped
    unsigned long table_id
    PyObject* start       # the range's table-key start (bytes, kept alive by the scan's caller)
    PyObject* end         # its end (bytes or None)
    PyObject* lo_user     # table id || start
    Py_ssize_t start_len
    Py_ssize_t n          # the prefix length last checked (-1: none yet)
    bint ok               # every key of the range starts with start[:n]
    uint64_t h            # the filter hash of lo_user[:4 + n]


cdef bint confined(PyObject* start, PyObject* end, Py_ssize_t n) noexcept:
    """Every key of ``[start, end)`` starts with ``start[:n]``, i.e. ``end`` is at most
    ``prefix_end(start[:n])`` (REQUIRES ``len(start) >= n``; ``end`` bytes or None)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(<object>start)
    cdef const unsigned char* e
    cdef Py_ssize_t i = n - 1, en
    cdef int c
    while i >= 0 and p[i] == 0xFF:
        i -= 1
    if i < 0:
        return True        # start[:n] is all 0xFF: every key from start on has it
    if end == <PyObject*>None:
        return False
    e = <const unsigned char*>PyBytes_AS_STRING(<object>end)
    en = PyBytes_GET_SIZE(<object>end)
    # compare end with prefix_end(start[:n]) = start[:i] + (start[i] + 1)
    c = memcmp(e, p, <size_t>(en if en < i else i))
    if c != 0:
        return c < 0
    if en <= i:
        return True
    if e[i] != p[i] + 1:
        return e[i] < p[i] + 1
    return en == i + 1


cdef inline uint64_t key_hash(bytes key) noexcept:
    return filter_key_hash(<const unsigned char*>PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key))


cdef object checked_bound(object key, str what):
    if key is None or type(key) is bytes:
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    raise InvalidArgumentError(f"{what} must be bytes, got {type(key).__name__}")


cdef bytes table_prefixed(unsigned long table_id, object key, Py_ssize_t zeros):
    """``table_id`` (4 bytes, big-endian) + ``key`` (bytes, or None for none) + ``zeros`` zero bytes."""
    cdef Py_ssize_t kn = 0 if key is None else PyBytes_GET_SIZE(<bytes>key)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, kn + 4 + zeros)
    cdef char* w = PyBytes_AS_STRING(out)
    w[0] = (table_id >> 24) & 0xFF
    w[1] = (table_id >> 16) & 0xFF
    w[2] = (table_id >> 8) & 0xFF
    w[3] = table_id & 0xFF
    if kn:
        memcpy(w + 4, PyBytes_AS_STRING(<bytes>key), kn)
    if zeros:
        memset(w + 4 + kn, 0, zeros)
    return out


cdef inline bytes with_table(unsigned long table_id, bytes key):
    """``table_id`` (4 bytes, big-endian) + ``key``."""
    return table_prefixed(table_id, key, 0)


cdef inline bytes full_key_from(unsigned long table_id, object key):
    """``table_id`` + ``key`` (or none) + 8 zero bytes: the first full key of a user key (its
    newest version)."""
    return table_prefixed(table_id, key, 8)


cdef object key_prefix_end(bytes prefix):
    """``hummock.key.prefix_end``: the smallest key above every key with ``prefix`` (None: none)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(prefix)
    cdef Py_ssize_t i = PyBytes_GET_SIZE(prefix) - 1
    while i >= 0 and p[i] == 0xFF:
        i -= 1
    if i < 0:
        return None
    cdef bytes out = PyBytes_FromStringAndSize(NULL, i + 1)   # NULL: a new object (never a shared 1-byte one)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(out)
    memcpy(w, p, i)
    w[i] = p[i] + 1
    return out


cdef Py_ssize_t lower_bound(list keys, bytes key) except -1:
    """The first index whose key is >= ``key`` in sorted ``keys`` (all bytes: imm keys are
    checked at ingest, SST bounds come from decoded metas)."""
    cdef Py_ssize_t lo = 0, hi = len(keys), mid
    while lo < hi:
        mid = (lo + hi) // 2
        if cmp_obj(<bytes>keys[mid], key) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline bint wanted(SstReader r, uint64_t read, bytes lo_user, bytes hi_user):
    """``r`` holds an epoch <= ``read`` and meets the user-key range ``[lo_user, hi_user)``."""
    return r.min_epoch <= read and cmp_obj(r.hi, lo_user) >= 0 and (
        hi_user is None or cmp_obj(r.lo, hi_user) < 0)


cdef list run_from(tuple readers, list his, uint64_t read, bytes lo_user, bytes hi_user,
                   bint has_floor, uint64_t floor, PrefixProbe* probe=NULL):
    """The readers of a sorted, non-overlapping run that a scan of ``[lo_user, hi_user)`` needs
    (those holding a version <= ``read``, above ``floor`` if ``has_floor``, and -- with a
    ``probe`` -- not ruled out by their prefix filter); None for none."""
    cdef list chosen = None   # made on the first reader chosen
    cdef Py_ssize_t lo = lower_bound(his, lo_user)
    cdef SstReader r
    while lo < len(readers):
        r = <SstReader>readers[lo]
        if hi_user is not None and cmp_obj(r.lo, hi_user) >= 0:
            break
        if r.min_epoch <= read and not (has_floor and r.max_epoch <= floor) and (
                probe == NULL or not r.prefix_excludes(probe)):
            if chosen is None:
                chosen = [r]
            else:
                chosen.append(r)
        lo += 1
    return chosen


cdef inline object best_of(tuple readers, bytes uk, uint64_t read, object best, uint64_t uk_hash):
    """The newest hit among overlapping readers (``best``: a hit found elsewhere, or None)."""
    cdef SstReader r
    cdef uint64_t best_epoch = 0
    cdef bint have = best is not None
    if have:
        best_epoch = best[0]
    for obj in readers:
        r = <SstReader>obj
        if r.min_epoch > read or (have and r.max_epoch <= best_epoch):
            continue
        if cmp_obj(r.lo, uk) <= 0 and cmp_obj(uk, r.hi) <= 0:
            hit = r.c_get(uk, read, uk_hash)
            if hit is not None and (not have or <uint64_t>hit[0] > best_epoch):
                best, best_epoch, have = hit, hit[0], True
    return best


cdef inline object one_of(tuple readers, list his, bytes uk, uint64_t read, uint64_t uk_hash):
    """The hit in the one reader of a sorted, non-overlapping run whose range holds the key."""
    cdef Py_ssize_t lo = lower_bound(his, uk)
    cdef SstReader r
    if lo < len(readers):
        r = <SstReader>readers[lo]
        if cmp_obj(r.lo, uk) <= 0 and r.min_epoch <= read:
            return r.c_get(uk, read, uk_hash)
    return None


cdef Py_ssize_t lower_bound_from(list keys, const unsigned char* key, Py_ssize_t kn, Py_ssize_t lo) except -1:
    """``lower_bound`` of the user key ``key[:kn]`` in sorted ``keys``, knowing it is >= ``lo``
    (checks ``keys[lo]`` first: ascending batch keys often stay in one SST)."""
    cdef Py_ssize_t hi = len(keys), mid
    cdef bytes k
    if lo >= hi:
        return hi
    k = <bytes>keys[lo]
    if cmp_bytes(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), <const char*>key, kn) >= 0:
        return lo
    lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        k = <bytes>keys[mid]
        if cmp_bytes(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), <const char*>key, kn) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define HUMMOCK_PREFETCH(p) __builtin_prefetch((const void*)(p))
    #else
    #define HUMMOCK_PREFETCH(p) ((void)(p))
    #endif
    """
    void HUMMOCK_PREFETCH(const void* p) noexcept nogil


DEF WINDOW = 8   # find_in_run's lookups in flight at each of its two stages
DEF FILTER_AHEAD = 16     # find_in_run prefetches the filter bits of the key this many places ahead
DEF PREFETCH_LINES = 24   # at most this many 64-byte lines of entries prefetched a lookup


cdef inline void prefetch_restart_search(Block b) noexcept:
    """Prefetch what ``b.restart_for`` reads first: the restarts' shared prefix and the
    restart index entries of its binary search's first three levels (a 64 KiB block has ~100
    restarts of 32 bytes: without this each level is a cache miss)."""
    cdef Py_ssize_t count = b.num_restarts, step
    HUMMOCK_PREFETCH(b.p + b.ridx[0].key_pos)
    if count < 4:
        HUMMOCK_PREFETCH(b.ridx)
        return
    step = count >> 1
    HUMMOCK_PREFETCH(b.ridx + step)
    HUMMOCK_PREFETCH(b.ridx + (step >> 1))
    HUMMOCK_PREFETCH(b.ridx + step + (step >> 1))
    HUMMOCK_PREFETCH(b.ridx + (step >> 2))
    HUMMOCK_PREFETCH(b.ridx + step - (step >> 2))
    HUMMOCK_PREFETCH(b.ridx + step + (step >> 2))
    HUMMOCK_PREFETCH(b.ridx + count - 1 - (step >> 2))


cdef inline Py_ssize_t prefetch_entries(Block b, const unsigned char* target, Py_ssize_t tn) noexcept:
    """``b.restart_for(target)`` (index built), prefetching that restart's entries: from its
    key to the next restart's key, at most ``PREFETCH_LINES`` lines."""
    cdef Py_ssize_t restart = b.restart_for(target, tn), at, end
    at = b.ridx[restart].key_pos
    end = b.ridx[restart + 1].key_pos + 32 if restart + 1 < b.num_restarts else b.limit
    if end > b.limit:
        end = b.limit
    if end > at + 64 * PREFETCH_LINES:
        end = at + 64 * PREFETCH_LINES
    while at < end:
        HUMMOCK_PREFETCH(b.p + at)
        at += 64
    return restart


cdef struct Lookup:
    # a located key of find_in_run waiting in one of its rings
    Py_ssize_t k          # its place in ``order``
    Py_ssize_t index      # its block's index in the SST
    Py_ssize_t restart    # the block's restart for it (-1: not known)


cdef Py_ssize_t find_in_run(tuple readers, list his, KeyRef* order, Py_ssize_t n, uint64_t read,
                            uint64_t* hashes, list out, uint64_t* versions, unsigned char* done,
                            bint newest=False) except -1:
    """``one_of`` for every key of a batch not yet ``done``, visiting them in ``order``
    (ascending): one forward walk over the run's SSTs, one ``FindCursor`` for block reuse.
    Records each hit in ``out``/``versions``/``done``; returns the number of hits.

    ``newest`` (``find_overlapping``, one SST of an overlapping sub-level at a time): a key
    hit by an earlier SST of the sub-level has ``done`` 2 and is still looked up here unless
    this SST's newest epoch is not above its hit's; a hit replaces it only when strictly newer
    (``best_of``'s rule); hits count keys newly found.

    A software pipeline, so the cache misses of several lookups overlap instead of following
    each other: a key passing its SST's filter is located (its block) and the block's restart
    search prefetched (ring ``a``); ``WINDOW`` keys later its restart is found and the
    restart's entries prefetched (ring ``b``); ``WINDOW`` keys after that it is searched
    (``SstReader.c_finish``). Each key's answer is the one ``c_find`` gives (the same calls,
    in a different order across keys)."""
    cdef Py_ssize_t k, i, pos = 0, count = len(readers), hits = 0, index, slot
    cdef Py_ssize_t head_a = 0, queued_a = 0, head_b = 0, queued_b = 0
    cdef SstReader r
    cdef FindCursor cur = FindCursor()
    cdef SstReader opened = None       # the reader last opened here (its filter is set)
    cdef Block b
    cdef Lookup ring_a[WINDOW]
    cdef Lookup ring_b[WINDOW]
    cdef Lookup moving
    cdef list held_a = [None] * (2 * WINDOW)   # per slot: its reader and block (kept alive)
    cdef list held_b = [None] * (2 * WINDOW)
    cur.reader = None
    for k in range(n):
        i = order[k].i
        if done[i] == 1:
            continue
        pos = lower_bound_from(his, order[k].p, order[k].n, pos)
        if pos >= count:
            break                                  # every later key is above the run
        r = <SstReader>readers[pos]
        if r.min_epoch > read or cmp_bytes(PyBytes_AS_STRING(r.lo), PyBytes_GET_SIZE(r.lo),
                                           <const char*>order[k].p, order[k].n) > 0:
            continue
        if done[i] and r.max_epoch <= versions[i]:
            continue                               # (newest: nothing here can be newer)
        if r is not opened:             # the filter first, inline: most keys miss most SSTs
            r.ensure_open()
            opened = r
        if k + FILTER_AHEAD < n:        # (a later key most likely falls in this SST too)
            r.filter.prefetch(hashes[order[k + FILTER_AHEAD].i])
        if not r.filter.probe(hashes[i]):
            continue
        block = r.c_locate(order[k].p, order[k].n + 8, cur, &index)
        b = <Block>block
        if b.index_state == 0:
            b.build_index()
        if b.index_state == 1:
            prefetch_restart_search(b)
        if queued_a == WINDOW:          # the oldest located key moves on to stage b
            moving = ring_a[head_a]
            b = <Block>held_a[2 * head_a + 1]
            if b.index_state == 1:
                moving.restart = prefetch_entries(b, order[moving.k].p, order[moving.k].n + 8)
            if queued_b == WINDOW:
                hits += finish_queued(order, &ring_b[head_b], held_b, 2 * head_b, out, versions, done, newest)
                head_b = (head_b + 1) % WINDOW
                queued_b -= 1
            slot = (head_b + queued_b) % WINDOW
            ring_b[slot] = moving
            held_b[2 * slot], held_b[2 * slot + 1] = held_a[2 * head_a], held_a[2 * head_a + 1]
            queued_b += 1
            head_a = (head_a + 1) % WINDOW
            queued_a -= 1
        slot = (head_a + queued_a) % WINDOW
        ring_a[slot].k, ring_a[slot].index, ring_a[slot].restart = k, index, -1
        held_a[2 * slot], held_a[2 * slot + 1] = r, block
        queued_a += 1
    while queued_b:
        hits += finish_queued(order, &ring_b[head_b], held_b, 2 * head_b, out, versions, done, newest)
        head_b = (head_b + 1) % WINDOW
        queued_b -= 1
    while queued_a:                     # (their restarts are found in c_finish)
        hits += finish_queued(order, &ring_a[head_a], held_a, 2 * head_a, out, versions, done, newest)
        head_a = (head_a + 1) % WINDOW
        queued_a -= 1
    return hits


cdef inline Py_ssize_t finish_queued(KeyRef* order, Lookup* lookup, list held, Py_ssize_t at, list out,
                                     uint64_t* versions, unsigned char* done, bint newest) except -1:
    """Search a located key (``find_in_run``) whose reader and block are ``held[at]`` and
    ``held[at + 1]``; record a hit (``newest``: see ``find_in_run``); 1 if it hit a key not
    hit before."""
    cdef Py_ssize_t k = lookup.k, i = order[k].i
    cdef int status = 0
    cdef uint64_t version = 0
    cdef SstReader r = <SstReader>held[at]
    value = r.c_finish(held[at + 1], lookup.index, order[k].p, order[k].n + 8, &status, &version, lookup.restart)
    held[at] = held[at + 1] = None
    if status != 1:
        return 0
    if not newest:
        out[i], versions[i], done[i] = value, version, 1
        return 1
    if done[i] == 2 and version <= versions[i]:
        return 0                          # an earlier SST of the sub-level has it as new
    out[i], versions[i] = value, version
    if done[i] == 2:
        return 0
    done[i] = 2
    return 1


cdef Py_ssize_t find_overlapping(tuple readers, KeyRef* order, Py_ssize_t n, uint64_t read,
                                 uint64_t* hashes, list out, uint64_t* versions, unsigned char* done) except -1:
    """``best_of`` (overlapping SSTs: the newest hit wins, the first SST on equal epochs) for
    every key of a batch not yet ``done``; records hits as ``find_in_run`` does and returns
    their number. One SST at a time, each through ``find_in_run``'s pipeline (filter bits
    prefetched ahead, lookups overlapped) in ``newest`` mode: the keys hit so far are marked
    2 until the sub-level is done, so a later SST replaces a hit only when newer."""
    cdef Py_ssize_t i, hits = 0
    cdef SstReader r
    for obj in readers:
        r = <SstReader>obj
        hits += find_in_run((r,), [r.hi], order, n, read, hashes, out, versions, done, True)
    for i in range(n):
        if done[i] == 2:
            done[i] = 1
    return hits


@cython.final
cdef class VersionView:
    """See the twin's docstring: the committed version's part of a read state, built once."""
    cdef readonly tuple l0
    cdef readonly tuple levels
    cdef readonly object version
    cdef readonly uint64_t min_epoch
    cdef readonly dict marks
    cdef list l0_overlapping
    cdef list l0_readers
    cdef list l0_his
    cdef list level_his
    cdef dict prefix_lens   # the version's declared prefix lengths (table id -> n)

    def __cinit__(self, tuple l0, tuple levels, version=None, min_epoch=0, marks=None):
        lens = getattr(version, "prefix_len_map", None)
        self.prefix_lens = lens if type(lens) is dict else {}
        self.l0 = l0
        self.levels = levels
        self.version = version
        self.min_epoch = min_epoch
        self.marks = {} if marks is None else dict(marks)
        self.l0_overlapping, self.l0_readers, self.l0_his = [], [], []
        for overlapping, readers in l0:
            readers = tuple(readers)
            for r in readers:
                if type(r) is not SstReader:
                    raise InvalidArgumentError("L0 readers must be SstReader objects")
            self.l0_overlapping.append(bool(overlapping))
            self.l0_readers.append(readers)
            self.l0_his.append([(<SstReader>r).hi for r in readers])
        self.level_his = []
        for readers in levels:
            for r in readers:
                if type(r) is not SstReader:
                    raise InvalidArgumentError("level readers must be SstReader objects")
            self.level_his.append([(<SstReader>r).hi for r in readers])


cdef class ReadState:
    """See the twin's docstring."""
    cdef readonly dict imms
    cdef readonly tuple staging
    cdef readonly VersionView view
    cdef readonly tuple l0
    cdef readonly tuple levels
    cdef readonly object version
    cdef readonly Py_ssize_t active
    cdef readonly uint64_t min_epoch
    cdef readonly dict marks
    cdef list l0_overlapping
    cdef list l0_readers
    cdef list l0_his
    cdef list level_his
    cdef dict prefix_lens
    cdef object __weakref__

    def __cinit__(self, dict imms, tuple staging, VersionView view not None, marks=None):
        self.imms = imms
        self.staging = staging
        self.view = view
        self.marks = view.marks if marks is None else (marks if type(marks) is dict else dict(marks))
        self.l0 = view.l0
        self.levels = view.levels
        self.version = view.version
        self.min_epoch = view.min_epoch
        self.l0_overlapping = view.l0_overlapping   # shared with the view, never mutated
        self.l0_readers = view.l0_readers
        self.l0_his = view.l0_his
        self.level_his = view.level_his
        self.prefix_lens = view.prefix_lens
        for r in staging:
            if type(r) is not SstReader:
                raise InvalidArgumentError("staging readers must be SstReader objects")

    def get(self, table_id, key, epoch):
        """The value of ``key`` at ``epoch``, or ``None`` (absent or deleted)."""
        return self.c_get(table_id, key, epoch)

    def multi_get(self, table_id, keys, epoch):
        """``[get(table_id, k, epoch) for k in keys]`` in one native call."""
        return self.c_multi_get(table_id, keys, epoch)

    def iter(self, table_id, epoch, start=None, end=None, *, prefix=None, reverse=False):
        """``(key, value)`` of ``table_id`` for keys in ``[start, end)`` with ``prefix`` at
        ``epoch``, ascending (descending with ``reverse``); an iterator holding this state."""
        return self.c_iter(table_id, epoch, start, end, prefix, reverse)

    def scan_prefixes(self, table_id, epoch, prefixes):
        """See the twin: every ``(key, value)`` of each prefix, as ``(keys, values, ends)``."""
        return self.c_scan_prefixes(table_id, epoch, prefixes)

    cdef int check_read(self, table_id, epoch) except -1:
        """A read's table id and epoch: ints in range, the epoch not below ``min_epoch``."""
        if type(table_id) is not int or table_id < 0 or table_id > 0xFFFFFFFF:
            raise InvalidArgumentError(f"table_id must be an int in [0, 4294967295], got {table_id!r}")
        if type(epoch) is not int or epoch < 0 or epoch > 0xFFFFFFFFFFFFFFFF:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
        if <uint64_t>epoch < self.min_epoch:
            raise ExpiredEpochError(epoch, self.min_epoch)
        return 0

    cdef object c_scan_prefixes(self, table_id, epoch, prefixes):
        self.check_read(table_id, epoch)
        try:
            checked = list(prefixes)
        except TypeError:
            raise InvalidArgumentError(f"prefixes must be an iterable of bytes, got {type(prefixes).__name__}") from None
        cdef Py_ssize_t i, n = len(checked)
        for i in range(n):
            p = checked[i]
            if type(p) is not bytes:
                if p is None:
                    raise InvalidArgumentError("prefix must be bytes, got NoneType")
                checked[i] = checked_bound(p, "prefix")
        if n == 0:
            return [], [], []
        return scan_prefixes_batched(self, <unsigned long>table_id, <uint64_t>epoch | SPILL_MASK, checked)

    cdef object c_get(self, table_id, key, epoch):
        cdef bytes k
        cdef uint64_t e
        if type(table_id) is not int or table_id < 0 or table_id > 0xFFFFFFFF:
            raise InvalidArgumentError(f"table_id must be an int in [0, 4294967295], got {table_id!r}")
        if type(key) is bytes:
            k = <bytes>key
        elif isinstance(key, (bytearray, memoryview)):
            k = bytes(key)
        else:
            raise InvalidArgumentError(f"key must be bytes, got {type(key).__name__}")
        if type(epoch) is not int or epoch < 0 or epoch > 0xFFFFFFFFFFFFFFFF:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
        e = epoch
        if e < self.min_epoch:
            raise ExpiredEpochError(epoch, self.min_epoch)
        self.active += 1
        try:
            found = self.c_get_version(table_id, k, e | SPILL_MASK)
        finally:
            self.active -= 1
        if found is None:
            return None
        if self.marks and self.c_hidden(table_id, k, e | SPILL_MASK, found[0]):
            return None
        return found[1]

    cdef bint c_hidden(self, table_id, bytes key, uint64_t read, version_epoch) except -1:
        """Whether the table's watermark records hide ``key``'s version at ``version_epoch``."""
        cdef bint has_floor
        cdef uint64_t floor
        cdef dict ranges
        records = self.marks.get(table_id)
        if records is None:
            return False
        ranges = unpack_hide(records.resolve(read), &has_floor, &floor)
        if has_floor and <uint64_t>version_epoch <= floor:
            return True
        return ranges is not None and range_hides(ranges, <const unsigned char*>PyBytes_AS_STRING(key),
                                                  PyBytes_GET_SIZE(key))

    cdef object c_multi_get(self, table_id, keys, epoch):
        cdef list out = []
        cdef uint64_t read
        self.check_read(table_id, epoch)
        read = <uint64_t>epoch | SPILL_MASK
        checked = []
        try:
            keys = iter(keys)
        except TypeError:
            raise InvalidArgumentError(f"keys must be an iterable of bytes, got {type(keys).__name__}") from None
        for key in keys:
            if type(key) is bytes:
                checked.append(key)
            elif isinstance(key, (bytearray, memoryview)):
                checked.append(bytes(key))
            else:
                raise InvalidArgumentError(f"key must be bytes, got {type(key).__name__}")
        cdef bint marked = bool(self.marks) and table_id in self.marks
        if not checked:
            return out
        self.active += 1
        try:
            return self.c_find_many(<unsigned long>table_id, checked, read, marked)
        finally:
            self.active -= 1

    cdef list c_find_many(self, unsigned long table_id, list keys, uint64_t read, bint marked):
        """``multi_get``'s answers for checked ``keys``: each key's newest version <= ``read``
        as ``c_get_version`` finds it, in one pass per source. The keys are visited in
        ascending order (sorted here unless they come sorted), so each sorted run of SSTs is
        walked forward once and keys landing in one block share its lookup (``FindCursor``);
        results come back in the callers' order."""
        cdef Py_ssize_t n = len(keys), i, j, left = n, tn
        cdef list out = [None] * n
        cdef list targets = [None] * n
        cdef KeyRef* order = <KeyRef*>malloc(n * sizeof(KeyRef))
        cdef uint64_t* hashes = <uint64_t*>malloc(n * sizeof(uint64_t))
        cdef uint64_t* versions = <uint64_t*>malloc(n * sizeof(uint64_t))
        cdef unsigned char* done = <unsigned char*>malloc(n)
        cdef unsigned char* w
        cdef uint64_t inv = ~read, ahead_h
        cdef bint ascending = True
        cdef bytes t
        cdef list flts
        try:
            if order == NULL or hashes == NULL or versions == NULL or done == NULL:
                raise MemoryError()
            for i in range(n):
                t = table_prefixed(table_id, keys[i], 8)
                tn = PyBytes_GET_SIZE(t)
                w = <unsigned char*>PyBytes_AS_STRING(t)
                for j in range(8):
                    w[tn - 8 + j] = (inv >> (8 * (7 - j))) & 0xFF
                targets[i] = t
                order[i].p, order[i].n, order[i].i = w, tn - 8, i   # the user key sorts
                hashes[i] = filter_key_hash(w, <size_t>(tn - 8))
                done[i] = 0
                if i and ascending and cmp_key_refs(&order[i - 1], &order[i]) > 0:
                    ascending = False
            if not ascending:
                sort_key_refs(order, n)
            imms = self.imms.get(table_id)
            if imms is not None or self.staging:
                # the imm filters' bits of the key FILTER_AHEAD places on are prefetched (an imm of
                # an epoch being uploaded holds ~500k keys: its filter is far larger than the cache)
                flts = [imm.filter for imm in imms if type(imm.filter) is FilterReader
                        and <uint64_t>imm.epoch <= read] if imms is not None else None
                for i in range(n):
                    if flts and i + FILTER_AHEAD < n:
                        ahead_h = key_hash(<bytes>keys[i + FILTER_AHEAD])
                        for flt in flts:
                            (<FilterReader>flt).prefetch(ahead_h)
                    uk = None if not self.staging else (<bytes>targets[i])[:PyBytes_GET_SIZE(<bytes>targets[i]) - 8]
                    best = self.c_memory_version(keys[i], uk, read, hashes[i], imms)
                    if best is not None:
                        out[i], versions[i], done[i] = best[1], <uint64_t>best[0], 1
                        left -= 1
            for i in range(len(self.l0_readers)):
                if left == 0:
                    break
                if self.l0_overlapping[i]:
                    left -= find_overlapping(<tuple>self.l0_readers[i], order, n, read, hashes, out, versions, done)
                else:
                    left -= find_in_run(<tuple>self.l0_readers[i], <list>self.l0_his[i], order, n, read, hashes,
                                        out, versions, done)
            for i in range(len(self.levels)):
                if left == 0:
                    break
                left -= find_in_run(<tuple>self.levels[i], <list>self.level_his[i], order, n, read, hashes,
                                    out, versions, done)
            if marked:
                for i in range(n):
                    if done[i] and out[i] is not None and self.c_hidden(
                            table_id, <bytes>keys[i], read, PyLong_FromUnsignedLongLong(versions[i])):
                        out[i] = None
            return out
        finally:
            free(order)
            free(hashes)
            free(versions)
            free(done)

    cdef object c_iter(self, table_id, epoch, start, end, prefix, reverse):
        self.check_read(table_id, epoch)
        start = checked_bound(start, "start")
        end = checked_bound(end, "end")
        if prefix is not None:   # hummock.key.clamp_bounds, in C
            prefix = checked_bound(prefix, "prefix")
            p_end = key_prefix_end(<bytes>prefix)
            if start is None or cmp_obj(<bytes>start, <bytes>prefix) < 0:
                start = prefix
            if p_end is not None and (end is None or cmp_obj(<bytes>end, <bytes>p_end) > 0):
                end = p_end
        if start is not None and end is not None and cmp_obj(<bytes>start, <bytes>end) >= 0:
            return iter(EMPTY)
        return self.c_scan(table_id, <uint64_t>epoch | SPILL_MASK, start, end, bool(reverse))

    cdef object c_scan(self, unsigned long table_id, uint64_t read, object start, object end, bint reverse):
        cdef list slices = []
        cdef list runs = []
        hide = self.c_sources(table_id, read, start, end, slices, runs)
        if not slices and not runs:
            return iter(EMPTY)
        return self.c_user_scan(table_id, read, reverse, hide, slices, runs)

    cdef UserScan c_user_scan(self, unsigned long table_id, uint64_t read, bint reverse, object hide, list slices,
                              list runs):
        """The merging scan over ``c_sources``' imm slices and SST runs (at least one)."""
        cdef UserScan scan = scan_new(read, reverse, self, hide)
        for imm, lo, hi in slices:
            batches, tagged = imm_source(imm, table_id, lo, hi, reverse)
            scan_add_batches(scan, batches, tagged)
        for readers, start_full, end_full in runs:
            scan_add_run(scan, readers, start_full, end_full)
        scan_ready(scan)
        return scan

    cdef object c_sources(self, unsigned long table_id, uint64_t read, object start, object end, list slices,
                          list runs):
        """The sources of a scan: ``(imm, lo, hi)`` slices into ``slices`` and SST runs as
        ``(readers, start_full, end_full)`` into ``runs``, in merge order; returns the table
        watermarks' ``hide`` (None: nothing hidden)."""
        cdef bytes lo_user = with_table(table_id, b"" if start is None else <bytes>start)
        cdef bytes hi_user = None if end is None else with_table(table_id, <bytes>end)
        cdef bytes start_full = full_key_from(table_id, start)   # the newest version of the first key
        cdef bytes end_full
        cdef list chosen
        cdef Py_ssize_t i, j, n, lo, hi
        cdef SstReader r
        cdef PrefixProbe probe
        cdef PrefixProbe* pp = NULL
        if self.prefix_lens and start is not None:
            declared = self.prefix_lens.get(table_id)
            if declared is not None and PyBytes_GET_SIZE(<bytes>start) >= <Py_ssize_t>declared and \
                    confined(<PyObject*>start, <PyObject*>end, <Py_ssize_t>declared):
                probe.table_id, probe.start, probe.end = table_id, <PyObject*>start, <PyObject*>end
                probe.lo_user, probe.start_len, probe.n = <PyObject*>lo_user, PyBytes_GET_SIZE(<bytes>start), -1
                pp = &probe
        cdef bint has_floor = False
        cdef uint64_t floor = 0
        hide = None
        if self.marks:
            records = self.marks.get(table_id)
            if records is not None:
                hide = records.resolve(read)
                unpack_hide(hide, &has_floor, &floor)
        if hi_user is not None:
            end_full = full_key_from(table_id, end)
        elif table_id == <uint64_t>0xFFFFFFFFU:
            end_full = None
        else:
            end_full = full_key_from(table_id + 1, None)
            # the table's end: an SST starting in a later table is no source (never opened)
            hi_user = with_table(table_id + 1, b"")
        imms = self.imms.get(table_id)
        cdef uint64_t imm_h = 0
        cdef Py_ssize_t imm_n = -1   # >= 0: screen imms by their prefix filter (Imm docstring)
        if imms is not None:
            if pp != NULL:
                imm_n = <Py_ssize_t>declared
                imm_h = filter_key_hash(<const unsigned char*>PyBytes_AS_STRING(<bytes>start), <size_t>imm_n)
            for imm in imms:
                if <uint64_t>imm.epoch > read or (has_floor and <uint64_t>imm.epoch <= floor):
                    continue
                if imm_n >= 0:
                    pf = imm.prefix_filter
                    flt = (<tuple>pf)[1] if pf is not None and (<tuple>pf)[0] == imm_n else \
                        imm.build_prefix_filter(imm_n)
                    if type(flt) is FilterReader and not (<FilterReader>flt).probe(imm_h):
                        continue
                keys = imm.keys
                lo = 0 if start is None else lower_bound(keys, <bytes>start)
                hi = len(keys) if end is None else lower_bound(keys, <bytes>end)
                if lo < hi:
                    slices.append((imm, lo, hi))
        for obj in self.staging:   # staging SSTs may overlap: one source each
            r = <SstReader>obj
            if wanted(r, read, lo_user, hi_user) and not (has_floor and r.max_epoch <= floor) and (
                    pp == NULL or not r.prefix_excludes(pp)):
                runs.append(([r], start_full, end_full))
        n = len(self.l0_readers)
        for i in range(n):
            if self.l0_overlapping[i]:
                for obj in <tuple>self.l0_readers[i]:
                    r = <SstReader>obj
                    if wanted(r, read, lo_user, hi_user) and not (has_floor and r.max_epoch <= floor) and (
                            pp == NULL or not r.prefix_excludes(pp)):
                        runs.append(([r], start_full, end_full))
            else:
                chosen = run_from(<tuple>self.l0_readers[i], <list>self.l0_his[i], read, lo_user, hi_user,
                                  has_floor, floor, pp)
                if chosen:
                    runs.append((chosen, start_full, end_full))
        for j in range(len(self.levels)):
            chosen = run_from(<tuple>self.levels[j], <list>self.level_his[j], read, lo_user, hi_user,
                              has_floor, floor, pp)
            if chosen:
                runs.append((chosen, start_full, end_full))
        return hide

    cdef object c_memory_version(self, bytes key, bytes uk, uint64_t read, uint64_t uk_hash, imms):
        """The newest version <= ``read`` of ``key`` among the table's imms (``imms``: its list
        or None) and the staging SSTs, as ``(epoch, value_or_None)``, or None. ``uk``: table id
        || key, hashing to ``uk_hash`` (may be None when there are no staging SSTs)."""
        cdef Py_ssize_t lo, i
        cdef list ks
        cdef uint64_t key_h = 0
        cdef bint have_hash = False
        best = None
        if imms is not None:
            for i in range(len(imms) - 1, -1, -1):
                imm = imms[i]
                if <uint64_t>imm.epoch > read:
                    continue
                flt = imm.filter
                if flt is None:
                    flt = imm.build_filter()
                if type(flt) is FilterReader:
                    if not have_hash:
                        key_h, have_hash = key_hash(key), True
                    if not (<FilterReader>flt).probe(key_h):
                        continue
                ks = imm.keys
                lo = lower_bound(ks, key)
                if lo < len(ks) and cmp_obj(<bytes>ks[lo], key) == 0:
                    best = (imm.epoch, imm.values[lo])
                    break
        if self.staging:
            best = best_of(self.staging, uk, read, best, uk_hash)
        return best

    cdef object c_get_version(self, unsigned long table_id, bytes key, uint64_t read):
        cdef Py_ssize_t n, i
        cdef bytes uk = with_table(table_id, key)
        cdef uint64_t uk_h = key_hash(uk)
        imms = self.imms.get(table_id)
        if imms is not None or self.staging:
            best = self.c_memory_version(key, uk, read, uk_h, imms)
            if best is not None:
                return best
        n = len(self.l0_readers)
        for i in range(n):
            if self.l0_overlapping[i]:
                best = best_of(<tuple>self.l0_readers[i], uk, read, None, uk_h)
            else:
                best = one_of(<tuple>self.l0_readers[i], <list>self.l0_his[i], uk, read, uk_h)
            if best is not None:
                return best
        for i in range(len(self.levels)):
            best = one_of(<tuple>self.levels[i], <list>self.level_his[i], uk, read, uk_h)
            if best is not None:
                return best
        return None


cdef class ReadHandle:
    """See the twin's docstring: stable read methods over the installed ``state``.

    Each method reads ``state`` into a local first: a cdef method called on ``self.state``
    directly would get a *borrowed* reference, and another thread installing a new state while
    the read runs Python code (a scan's set-up does) would free the old one under it."""
    cdef public ReadState state
    cdef public object closed_error

    def __cinit__(self, ReadState state not None):
        self.state = state
        self.closed_error = None

    def get(self, table_id, key, epoch):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        cdef ReadState state = self.state   # a strong reference for the whole read
        return state.c_get(table_id, key, epoch)

    def multi_get(self, table_id, keys, epoch):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        cdef ReadState state = self.state
        return state.c_multi_get(table_id, keys, epoch)

    def iter(self, table_id, epoch, start=None, end=None, *, prefix=None, reverse=False):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        cdef ReadState state = self.state
        return state.c_iter(table_id, epoch, start, end, prefix, reverse)

    def scan_prefixes(self, table_id, epoch, prefixes):
        if self.closed_error is not None:
            raise self.closed_error("the store is closed")
        cdef ReadState state = self.state
        return state.c_scan_prefixes(table_id, epoch, prefixes)


include "_prefix_scan.pxi"
