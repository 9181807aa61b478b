# Included by native/_readpath.pyx (textually: it reads the read state's and readers' C fields).
#
# ``ReadState.scan_prefixes`` for a batch: the pairs of many key prefixes of one table in one
# pass per source, the way ``multi_get`` batches point gets -- a join probes the join keys of a
# chunk, most of them absent or in one SST. Three steps:
#
# 1. The prefixes are sorted (``sort_key_refs`` on table id || prefix) and every source is
#    walked forward once: each imm's keys, each staging and overlapping L0 SST, each sorted run
#    (L0 sub-level, level) with one position moving up its SSTs' upper bounds. A source joins a
#    prefix's list when its range meets the prefix's and no prefix filter (the imm's, the SST's)
#    rules the prefix out; an SST's filter bits for the prefix ``SCAN_FILTER_AHEAD`` places
#    ahead are prefetched, since the next prefixes most likely probe the same SST.
# 2. Each prefix, in sorted order, is read from its sources: none -- nothing (most absent
#    probes); one imm slice -- its live pairs copied; one SST -- ``scan_one_sst``, a block
#    iterator from the prefix's first key while keys keep the prefix, newest visible version per
#    key, no merge heap; anything else -- the merging ``UserScan`` over those sources only.
# 3. The pairs are laid out in the caller's prefix order (``ends`` as the API says).
#
# Every answer is the one ``iter(prefix=p)`` gives: the same visibility rules (read epoch, a
# truncation floor, watermark ranges, deletes) as ``UserScan``, and a source is skipped only
# for the reasons ``c_sources`` skips it. Tested against the per-prefix scan and a model in
# tests/test_prefix_scan_batch.py, in both modes (the twin scans per prefix).

DEF SCAN_FILTER_AHEAD = 8   # run_sources prefetches the filter bits of the prefix this many places ahead
DEF SCAN_WINDOW = 8         # read_prefixes' prefixes in flight at each of its two stages
DEF IMM_INDEX_MIN_KEYS = 64 # smaller imms are binary-searched (as shared_buffer.IMM_FILTER_MIN_KEYS)


cdef object scan_prefixes_batched(ReadState state, unsigned long tid, uint64_t read, list prefixes):
    """``(keys, values, ends)`` of checked ``prefixes`` (bytes) at ``read`` (epoch | spill mask)."""
    cdef Py_ssize_t n = len(prefixes), i, k, dn = -1
    cdef list lo_users = [None] * n     # table id || prefix: the first user key a prefix can hold
    cdef list starts = [None] * n       # lo_user || 8 zero bytes: the first full key it can hold
    cdef list hi_users = [None] * n     # the first user key above them (None: no bound)
    cdef list prefix_ends = [None] * n  # the table-key bound of a prefix (None: to the table's end)
    cdef list slices_of = [None] * n    # per prefix: its imm slices (imm, lo, hi), or None
    cdef list runs_of = [None] * n      # per prefix: its SST sources (lists of readers), or None
    cdef KeyRef* order = <KeyRef*>malloc(n * sizeof(KeyRef))
    cdef PrefixProbe* probes = <PrefixProbe*>malloc(n * sizeof(PrefixProbe))
    cdef uint64_t* imm_hashes = <uint64_t*>malloc(n * sizeof(uint64_t))
    cdef unsigned char* probing = <unsigned char*>malloc(n)
    cdef Py_ssize_t* spans = <Py_ssize_t*>malloc(2 * n * sizeof(Py_ssize_t))
    cdef bint ascending = True, has_floor = False
    cdef uint64_t floor = 0
    cdef bytes p, lo_user, start
    try:
        if order == NULL or probes == NULL or imm_hashes == NULL or probing == NULL or spans == NULL:
            raise MemoryError()
        if state.prefix_lens:
            declared = state.prefix_lens.get(tid)
            if declared is not None:
                dn = <Py_ssize_t>declared
        for i in range(n):
            p = <bytes>prefixes[i]
            p_end = key_prefix_end(p)
            lo_user = with_table(tid, p)
            start = full_key_from(tid, p)
            lo_users[i], starts[i], prefix_ends[i] = lo_user, start, p_end
            if p_end is not None:
                hi_users[i] = with_table(tid, <bytes>p_end)
            elif tid < <uint64_t>0xFFFFFFFFU:
                hi_users[i] = table_prefixed(tid + 1, None, 0)
            order[i].p, order[i].n, order[i].i = <const unsigned char*>PyBytes_AS_STRING(start), \
                PyBytes_GET_SIZE(lo_user), i   # sorts (and walks) by the user key lo_user
            if i and ascending and cmp_key_refs(&order[i - 1], &order[i]) > 0:
                ascending = False
            # the probe c_sources would build for this range (declared length, confined range)
            probing[i] = dn >= 0 and PyBytes_GET_SIZE(p) >= dn and confined(<PyObject*>p, <PyObject*>p_end, dn)
            probes[i].table_id, probes[i].start, probes[i].end = tid, <PyObject*>p, <PyObject*>p_end
            probes[i].lo_user, probes[i].start_len, probes[i].n = <PyObject*>lo_user, PyBytes_GET_SIZE(p), -1
            if probing[i]:
                probes[i].n, probes[i].ok = dn, True
                probes[i].h = filter_key_hash(<const unsigned char*>PyBytes_AS_STRING(lo_user), <size_t>(4 + dn))
                imm_hashes[i] = filter_key_hash(<const unsigned char*>PyBytes_AS_STRING(p), <size_t>dn)
        if not ascending:
            sort_key_refs(order, n)
        hide = ranges = None
        if state.marks:
            records = state.marks.get(tid)
            if records is not None:
                hide = records.resolve(read)
                ranges = unpack_hide(hide, &has_floor, &floor)
        # 1. every source, walked once in prefix order
        imms = state.imms.get(tid)
        if imms is not None:
            for imm in imms:
                if <uint64_t>imm.epoch <= read and not (has_floor and <uint64_t>imm.epoch <= floor):
                    imm_slices(imm, order, n, prefixes, prefix_ends, probing, imm_hashes, dn, slices_of)
        for obj in state.staging:
            overlapping_source(<SstReader>obj, order, n, lo_users, hi_users, probes, probing, read, has_floor,
                               floor, tid, dn, runs_of)
        for i in range(len(state.l0_readers)):
            if state.l0_overlapping[i]:
                for obj in <tuple>state.l0_readers[i]:
                    overlapping_source(<SstReader>obj, order, n, lo_users, hi_users, probes, probing, read,
                                       has_floor, floor, tid, dn, runs_of)
            else:
                run_sources(<tuple>state.l0_readers[i], <list>state.l0_his[i], order, n, hi_users, probes,
                            probing, read, has_floor, floor, tid, dn, runs_of)
        for i in range(len(state.levels)):
            run_sources(<tuple>state.levels[i], <list>state.level_his[i], order, n, hi_users, probes, probing,
                        read, has_floor, floor, tid, dn, runs_of)
        # 2. each prefix from its sources, in sorted order
        keys, values = [], []
        read_prefixes(state, tid, read, order, n, prefixes, starts, prefix_ends, slices_of, runs_of, hide,
                      has_floor, floor, ranges, keys, values, spans)
        # 3. the caller's order
        ends = []
        if ascending:
            for i in range(n):
                ends.append(spans[2 * i + 1])
            return keys, values, ends
        out_keys, out_values = [], []
        for i in range(n):
            for k in range(spans[2 * i], spans[2 * i + 1]):
                out_keys.append(keys[k])
                out_values.append(values[k])
            ends.append(len(out_keys))
        return out_keys, out_values, ends
    finally:
        free(order)
        free(probes)
        free(imm_hashes)
        free(probing)
        free(spans)


cdef int imm_slices(object imm, KeyRef* order, Py_ssize_t n, list prefixes, list prefix_ends,
                    unsigned char* probing, uint64_t* imm_hashes, Py_ssize_t dn, list slices_of) except -1:
    """Step 1 for one imm of the table (readable at the scan's epoch): the slice of its keys
    each prefix holds. A prefix of at least the declared length ``dn`` is looked up in the
    imm's ``ImmPrefixIndex`` (built here on first use; small imms have none); any other is
    found by binary search from the previous prefix's place."""
    cdef list keys = imm.keys
    cdef Py_ssize_t k, i, lo = 0, hi, count = len(keys), first, pn
    cdef ImmPrefixIndex index = None
    cdef bytes p
    cdef const unsigned char* pp
    if dn >= 0 and count >= IMM_INDEX_MIN_KEYS:
        built = imm.prefix_index
        if built is None or (<tuple>built)[0] != dn:
            built = imm.prefix_index = (dn, ImmPrefixIndex(keys, dn))   # a racing reader builds the same
        index = <ImmPrefixIndex>(<tuple>built)[1]
    for k in range(n):
        i = order[k].i
        p = <bytes>prefixes[i]
        pp, pn = <const unsigned char*>PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p)
        if index is not None and probing[i]:
            if not index.find(pp, imm_hashes[i], &first):
                continue                # no key has the prefix's first dn bytes
            lo = first if pn == dn else gallop_lower_bound(keys, pp, pn, first)
            hi = prefix_run_end(keys, pp, pn, lo)
        else:
            lo = lower_bound_from(keys, pp, pn, lo)
            if lo >= count:
                break                   # every later prefix is above the imm's keys
            end = prefix_ends[i]
            hi = count if end is None else lower_bound_from(
                keys, <const unsigned char*>PyBytes_AS_STRING(<bytes>end), PyBytes_GET_SIZE(<bytes>end), lo)
        if lo < hi:
            if slices_of[i] is None:
                slices_of[i] = [(imm, lo, hi)]
            else:
                (<list>slices_of[i]).append((imm, lo, hi))
    return 0


@cython.final
cdef class ImmPrefixIndex:
    """Where each distinct ``n``-byte prefix's keys start in an imm's sorted keys (a scan
    confined to one prefix -- a join's probe -- finds them in one or two cache misses instead
    of a binary search over a large imm): an open-addressing table of the first key of each
    prefix group, by the prefix's filter hash (``filter_key_hash``, as the prefix filters).
    Exact: a slot found is checked against the key. Keys shorter than ``n`` have no prefix and
    no slot; the keys of one prefix are contiguous in sorted order. Kept on the imm
    (``Imm.prefix_index``) as ``(n, index)``; holds the imm's key list. 8 bytes a slot, at
    least two slots a prefix."""
    cdef list keys
    cdef Py_ssize_t n
    cdef uint64_t* slots     # 0: empty; else the hash's high 32 bits << 32 | (first key's index + 1)
    cdef uint64_t mask

    def __cinit__(self, list keys, Py_ssize_t n):
        cdef Py_ssize_t count = len(keys), i, distinct = 0, cap = 16
        cdef const unsigned char* prev = NULL
        cdef const unsigned char* kp
        cdef uint64_t h, at
        if n < 1:
            raise InvalidArgumentError(f"prefix length must be >= 1, got {n}")
        if count >= <Py_ssize_t>0xFFFFFFFFU:
            raise InvalidArgumentError(f"an imm of {count} keys is too large for a prefix index")
        self.keys, self.n = keys, n
        for i in range(count):
            k = keys[i]
            if type(k) is not bytes:
                raise InvalidArgumentError("imm keys must be bytes")
            if PyBytes_GET_SIZE(<bytes>k) < n:
                continue
            kp = <const unsigned char*>PyBytes_AS_STRING(<bytes>k)
            if prev == NULL or memcmp(prev, kp, n) != 0:
                distinct += 1
                prev = kp
        while cap < 2 * distinct:
            cap <<= 1
        self.slots = <uint64_t*>calloc(cap, sizeof(uint64_t))
        if self.slots == NULL:
            raise MemoryError()
        self.mask = cap - 1
        prev = NULL
        for i in range(count):
            k = keys[i]
            if PyBytes_GET_SIZE(<bytes>k) < n:
                continue
            kp = <const unsigned char*>PyBytes_AS_STRING(<bytes>k)
            if prev != NULL and memcmp(prev, kp, n) == 0:
                continue
            prev = kp
            h = filter_key_hash(kp, <size_t>n)
            at = h & self.mask
            while self.slots[at] != 0:
                at = (at + 1) & self.mask
            self.slots[at] = ((h >> 32) << 32) | <uint64_t>(i + 1)

    def __dealloc__(self):
        free(self.slots)

    cdef bint find(self, const unsigned char* p, uint64_t h, Py_ssize_t* first) except -1:
        """Whether a key starts with ``p[:n]`` (``h`` = its filter hash); ``first``: the first."""
        cdef uint64_t at = h & self.mask, s
        cdef Py_ssize_t j
        while True:
            s = self.slots[at]
            if s == 0:
                return False
            if (s >> 32) == (h >> 32):
                j = <Py_ssize_t>(s & <uint64_t>0xFFFFFFFFU) - 1
                k = <bytes>self.keys[j]
                if memcmp(PyBytes_AS_STRING(k), p, <size_t>self.n) == 0:
                    first[0] = j
                    return True
            at = (at + 1) & self.mask

    @property
    def prefix_count(self):
        """How many distinct prefixes have a slot (tests)."""
        cdef Py_ssize_t i, c = 0
        for i in range(self.mask + 1):
            c += self.slots[i] != 0
        return c


cdef inline bint starts_with(bytes k, const unsigned char* p, Py_ssize_t pn) noexcept:
    return PyBytes_GET_SIZE(k) >= pn and memcmp(PyBytes_AS_STRING(k), p, <size_t>pn) == 0


cdef Py_ssize_t gallop_lower_bound(list keys, const unsigned char* p, Py_ssize_t pn, Py_ssize_t lo) except -1:
    """The first index >= ``lo`` whose key is >= ``p[:pn]`` in sorted ``keys``, searching
    forward from ``lo`` in doubling steps (the answer is usually near)."""
    cdef Py_ssize_t count = len(keys), step = 1, hi, mid
    cdef bytes k
    while True:
        hi = lo + step
        if hi >= count:
            hi = count
            break
        k = <bytes>keys[hi]
        if cmp_bytes(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), <const char*>p, pn) >= 0:
            break
        lo = hi
        step <<= 1
    while lo < hi:              # keys[hi] (or the end) is >= p; the answer is in [lo, hi]
        mid = (lo + hi) // 2
        k = <bytes>keys[mid]
        if cmp_bytes(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), <const char*>p, pn) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef Py_ssize_t prefix_run_end(list keys, const unsigned char* p, Py_ssize_t pn, Py_ssize_t lo) except -1:
    """The end of the run of keys starting with ``p[:pn]`` that begins at ``lo`` (``lo`` itself
    if ``keys[lo]`` does not), in doubling steps then a binary search."""
    cdef Py_ssize_t count = len(keys), step = 1, hi, mid
    if lo >= count or not starts_with(<bytes>keys[lo], p, pn):
        return lo
    while True:                 # keys[lo] starts with p
        hi = lo + step
        if hi >= count:
            hi = count
            break
        if not starts_with(<bytes>keys[hi], p, pn):
            break
        lo = hi
        step <<= 1
    lo += 1
    while lo < hi:              # keys[lo - 1] starts with p; keys[hi] (or the end) does not
        mid = (lo + hi) // 2
        if starts_with(<bytes>keys[mid], p, pn):
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline int add_source(list runs_of, Py_ssize_t i, list readers) except -1:
    if runs_of[i] is None:
        runs_of[i] = [readers]
    else:
        (<list>runs_of[i]).append(readers)
    return 0


cdef int overlapping_source(SstReader r, KeyRef* order, Py_ssize_t n, list lo_users, list hi_users,
                            PrefixProbe* probes, unsigned char* probing, uint64_t read, bint has_floor,
                            uint64_t floor, unsigned long tid, Py_ssize_t dn, list runs_of) except -1:
    """Step 1 for an SST that is a source of its own (staging, an overlapping L0 sub-level):
    every prefix tried against it in order, the prefix filter bits of the prefix
    ``SCAN_FILTER_AHEAD`` places on prefetched (as ``run_sources`` does)."""
    cdef Py_ssize_t k, i, ahead
    cdef int prefetching = -1           # not known before the SST is opened (by its first probe)
    cdef bint excluded
    if has_floor and r.max_epoch <= floor:
        return 0
    for k in range(n):
        i = order[k].i
        ahead = k + SCAN_FILTER_AHEAD
        if prefetching == 1 and ahead < n and probing[order[ahead].i]:
            r.prefix_filter.prefetch_all(probes[order[ahead].i].h)
        if not wanted(r, read, <bytes>lo_users[i], <bytes>hi_users[i]):
            continue
        if probing[i]:
            excluded = r.prefix_excludes(&probes[i])
            if prefetching < 0:
                prefetching = r.prefix_filter is not None and r.one_table == <long long>tid and r.one_len == dn
            if excluded:
                continue
        add_source(runs_of, i, [r])
    return 0


cdef int run_sources(tuple readers, list his, KeyRef* order, Py_ssize_t n, list hi_users, PrefixProbe* probes,
                     unsigned char* probing, uint64_t read, bint has_floor, uint64_t floor, unsigned long tid,
                     Py_ssize_t dn, list runs_of) except -1:
    """Step 1 for a sorted, non-overlapping run: ``run_from`` for every prefix, its start found
    by one forward walk up the SSTs' upper bounds."""
    cdef Py_ssize_t k, i, j, pos = 0, count = len(readers), ahead
    cdef SstReader r
    cdef list chosen
    for k in range(n):
        i = order[k].i
        pos = lower_bound_from(his, order[k].p, order[k].n, pos)
        if pos >= count:
            break                       # every later prefix is above the run
        hi_user = hi_users[i]
        chosen = None
        j = pos
        while j < count:
            r = <SstReader>readers[j]
            if hi_user is not None and cmp_obj(r.lo, <bytes>hi_user) >= 0:
                break
            if r.min_epoch <= read and not (has_floor and r.max_epoch <= floor):
                if probing[i]:
                    r.ensure_open()
                    ahead = k + SCAN_FILTER_AHEAD
                    if ahead < n and r.prefix_filter is not None and r.one_table == <long long>tid and \
                            r.one_len == dn and probing[order[ahead].i]:
                        r.prefix_filter.prefetch_all(probes[order[ahead].i].h)
                    if r.prefix_excludes(&probes[i]):
                        j += 1
                        continue
                if chosen is None:
                    chosen = [r]
                else:
                    chosen.append(r)
            j += 1
        if chosen is not None:
            add_source(runs_of, i, chosen)
    return 0


cdef struct PrefixRead:
    # a prefix of read_prefixes waiting in one of its rings
    Py_ssize_t k          # its place in ``order``
    Py_ssize_t index      # single SST: its block's index (-1: another kind of prefix)
    Py_ssize_t restart    # single SST: the block's restart for it (-1: not known)


cdef int read_prefixes(ReadState state, unsigned long tid, uint64_t read, KeyRef* order, Py_ssize_t n,
                       list prefixes, list starts, list prefix_ends, list slices_of, list runs_of, object hide,
                       bint has_floor, uint64_t floor, object ranges, list keys, list values,
                       Py_ssize_t* spans) except -1:
    """Step 2: each prefix's pairs appended to ``keys``/``values`` in sorted prefix order;
    ``spans[2i:2i+2]``: where prefix i's pairs lie. A prefix whose one source is an SST goes
    through two stages before it is read, as ``find_in_run``'s lookups do: its block located
    and the block's restart search prefetched; ``SCAN_WINDOW`` prefixes later the restart found
    and its entries prefetched; ``SCAN_WINDOW`` after that read. Other prefixes pass the same
    rings untouched, so prefixes finish in sorted order."""
    cdef Py_ssize_t k, slot, index
    cdef Py_ssize_t head_a = 0, queued_a = 0, head_b = 0, queued_b = 0
    cdef PrefixRead ring_a[SCAN_WINDOW]
    cdef PrefixRead ring_b[SCAN_WINDOW]
    cdef PrefixRead moving
    cdef list held_a = [None] * SCAN_WINDOW   # per slot: the single SST's block (kept alive)
    cdef list held_b = [None] * SCAN_WINDOW
    cdef list runs
    cdef SstReader r
    cdef Block b
    cdef bytes start
    cdef ScanContext ctx = ScanContext()
    ctx.state, ctx.tid, ctx.read, ctx.hide, ctx.has_floor, ctx.floor, ctx.ranges = \
        state, tid, read, hide, has_floor, floor, ranges
    ctx.order, ctx.prefixes, ctx.starts, ctx.prefix_ends = order, prefixes, starts, prefix_ends
    ctx.slices_of, ctx.runs_of, ctx.keys, ctx.values, ctx.spans = slices_of, runs_of, keys, values, spans
    for k in range(n + 2 * SCAN_WINDOW):
        if k < n:
            slot = (head_a + queued_a) % SCAN_WINDOW
            ring_a[slot].k, ring_a[slot].index, ring_a[slot].restart = k, -1, -1
            held_a[slot] = None
            runs = runs_of[order[k].i]
            if slices_of[order[k].i] is None and runs is not None and len(runs) == 1 and \
                    len(<list>runs[0]) == 1:   # one SST: locate its block, prefetch the restart search
                r = <SstReader>(<list>runs[0])[0]
                r.ensure_open()
                start = <bytes>starts[order[k].i]
                block = r.c_locate(<const unsigned char*>PyBytes_AS_STRING(start), PyBytes_GET_SIZE(start),
                                   None, &index)
                b = <Block>block
                if b.index_state == 0:
                    b.build_index()
                if b.index_state == 1:
                    prefetch_restart_search(b)
                ring_a[slot].index = index
                held_a[slot] = block
            queued_a += 1
        if queued_a == SCAN_WINDOW or (k >= n and queued_a):   # the oldest moves on to stage b
            moving = ring_a[head_a]
            block = held_a[head_a]
            held_a[head_a] = None
            head_a = (head_a + 1) % SCAN_WINDOW
            queued_a -= 1
            if block is not None and (<Block>block).index_state == 1:
                start = <bytes>starts[order[moving.k].i]
                moving.restart = prefetch_entries(<Block>block, <const unsigned char*>PyBytes_AS_STRING(start),
                                                  PyBytes_GET_SIZE(start))
            slot = (head_b + queued_b) % SCAN_WINDOW
            ring_b[slot] = moving
            held_b[slot] = block
            queued_b += 1
        if queued_b == SCAN_WINDOW or (k >= n and queued_b and not queued_a):   # the oldest is read
            ctx.read_one(&ring_b[head_b], held_b[head_b])
            held_b[head_b] = None
            head_b = (head_b + 1) % SCAN_WINDOW
            queued_b -= 1
    return 0


@cython.final
cdef class ScanContext:
    """What reading one prefix of a ``scan_prefixes`` batch needs (step 2)."""
    cdef ReadState state
    cdef unsigned long tid
    cdef uint64_t read
    cdef object hide
    cdef bint has_floor
    cdef uint64_t floor
    cdef object ranges
    cdef KeyRef* order
    cdef list prefixes, starts, prefix_ends, slices_of, runs_of, keys, values
    cdef Py_ssize_t* spans
    cdef BlockIterator it       # one iterator for every single-SST prefix (made on first use)

    cdef int read_one(self, PrefixRead* pr, object block) except -1:
        """Append the pairs of the prefix ``pr`` to ``keys``/``values``; record its span."""
        cdef Py_ssize_t i = self.order[pr.k].i, j, lo, hi
        cdef list slices = self.slices_of[i], runs = self.runs_of[i], ks, vs
        cdef list keys = self.keys, values = self.values
        self.spans[2 * i] = len(keys)
        if block is not None:
            self.scan_one_sst(<SstReader>(<list>runs[0])[0], <Block>block, pr.index, pr.restart, <bytes>self.starts[i])
        elif slices is None and runs is None:
            pass
        elif runs is None and len(slices) == 1 and self.hide is None:
            # one imm slice alone (a key written this epoch, not yet synced): its live pairs are
            # the scan's (an imm holds one version per key), no merge needed
            imm, lo, hi = <tuple>slices[0]
            ks, vs = imm.keys, imm.values
            for j in range(lo, hi):
                v = vs[j]
                if v is not None:
                    keys.append(ks[j])
                    values.append(v)
        else:
            end = self.prefix_ends[i]
            if end is not None:
                end_full = full_key_from(self.tid, end)
            elif self.tid == <uint64_t>0xFFFFFFFFU:
                end_full = None
            else:
                end_full = full_key_from(self.tid + 1, None)
            sources = [(readers, self.starts[i], end_full) for readers in runs] if runs is not None else []
            for kv in self.state.c_user_scan(self.tid, self.read, False, self.hide,
                                             slices if slices is not None else [], sources):
                keys.append((<tuple>kv)[0])
                values.append((<tuple>kv)[1])
        self.spans[2 * i + 1] = len(keys)
        return 0

    cdef int scan_one_sst(self, SstReader r, Block b, Py_ssize_t index, Py_ssize_t restart,
                          bytes start) except -1:
        """The pairs of the keys with the prefix when ``r`` is its only source and ``b`` (block
        ``index``) the block ``start`` (table id || prefix || 8 zero bytes: the prefix's first
        full key) falls in (``restart``: its restart there, -1 unknown): from there, block
        after block while the keys keep the prefix, the newest version <= ``read`` (above
        ``floor``) of each key, deletes and watermark-hidden keys left out -- ``UserScan``'s
        rules over one source."""
        cdef const unsigned char* target = <const unsigned char*>PyBytes_AS_STRING(start)
        cdef Py_ssize_t tn = PyBytes_GET_SIZE(start), ln = tn - 8, nblocks, un, kn
        cdef unsigned char small_decided[256]
        cdef unsigned char* decided = small_decided
        cdef unsigned char* grown
        cdef Py_ssize_t decided_len = -1, decided_cap = 256
        cdef const unsigned char* kp
        cdef uint64_t e, read = self.read, floor = self.floor
        cdef bint has_floor = self.has_floor
        cdef object ranges = self.ranges
        cdef list keys = self.keys, values = self.values
        cdef BlockIterator it = self.it
        if it is None:
            it = self.it = BlockIterator(b)
        else:
            it.c_reset(b)
        try:
            if b.index_state == 1:
                it.c_seek_from(restart if restart >= 0 else b.restart_for(target, tn), target, tn)
            else:
                it.c_seek(target, tn)
            nblocks = len(r.first_keys)
            while True:
                if not it.c_valid():
                    index += 1
                    if index >= nblocks:
                        break
                    block = r.block_at(index)
                    if type(block) is not Block:
                        raise InvalidArgumentError("the block source must return native Blocks")
                    it.c_reset(<Block>block)
                    it.c_seek_to_first()
                    continue
                kp, kn = it.key_ptr, it.key_len
                un = kn - 8
                if un < ln or memcmp(kp, target, ln) != 0:
                    break                   # past the prefix
                if decided_len == un and memcmp(decided, kp, un) == 0:
                    it.c_next()             # an older version of the key decided last
                    continue
                e = ~load_be64(kp + un)
                if e > read or (has_floor and e <= floor):
                    it.c_next()
                    continue
                if un > decided_cap:
                    grown = <unsigned char*>(malloc(un) if decided == small_decided else realloc(decided, un))
                    if grown == NULL:
                        raise MemoryError()
                    decided, decided_cap = grown, un
                memcpy(decided, kp, un)
                decided_len = un
                value = stored_value(it.p + it.value_start, it.value_end - it.value_start)
                if value is not None and not (ranges is not None and range_hides(<dict>ranges, kp + 4, kn - 12)):
                    keys.append(PyBytes_FromStringAndSize(<const char*>kp + 4, kn - 12))
                    values.append(value)
                it.c_next()
        finally:
            if decided != small_decided:
                free(decided)
        return 0
