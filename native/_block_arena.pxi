# Included by native/_block.pyx (its module state is this arena's state; nothing else may
# include it, or a second copy of the state would appear).
#
# A huge-page arena for block contents.
#
# Why: a point read into a warm block cache touches a random block: its restart index, one or
# two entries, the value. With 4 KiB pages each of those is a TLB miss, and on this host the
# TLB, not the cache, bounds `multi_get` (measured: 0.72-0.74 us a key with block contents in
# malloc'd bytes, 0.67-0.69 with the same contents in huge pages; docs/performance.md, seventh
# session). So a validated block copies its content into memory carved from 2 MiB chunks that
# ask the kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`; THP in `madvise` or
# `always` mode). Where the kernel has no THP, the chunks still work, with 4 KiB pages.
#
# Layout: a chunk is CHUNK_BYTES, aligned to CHUNK_BYTES, cut into UNIT_BYTES units; unit 0
# holds the chunk's header (ArenaChunk: a bitmap of used units, counts, list links). An
# allocation of n bytes takes ceil(n / UNIT_BYTES) contiguous units, found first-fit over the
# chunks in creation order (older chunks fill first, so younger ones can empty). Freeing
# clears the units' bits; a chunk left with no allocation is unmapped, except SPARE_CHUNKS kept
# empty as spares. A block cache at capacity evicts in about the order it loaded, so chunks
# drain one after another while new blocks need new ones: without spares each drained chunk
# would be unmapped and a fresh one mapped and zeroed (2 MiB) for the next ~30 loads.
#
# Invariants (checked by arena_check()): every chunk is aligned and in the list once; unit 0 of
# every chunk is marked used; a chunk's free_units is the count of its clear bits; its
# live_allocs is 0 exactly when only unit 0 is used; the arena's unit and allocation totals
# are the sums over its chunks; at most SPARE_CHUNKS chunks are empty; a chunk's max_run is at
# least its longest free run.
#
# Thread safety: every caller holds the GIL (Block construction and deallocation), and no
# function here releases it, so calls never interleave.
#
# Fallback: arena_alloc returns NULL when the request is outside [ARENA_MIN_BYTES,
# ARENA_MAX_BYTES], when the arena is disabled (HUMMOCK_BLOCK_ARENA=0), or when mmap fails;
# the Block then keeps its content as a bytes object, exactly as before.

from libc.stdint cimport uintptr_t

import os as _os


cdef extern from "<sys/mman.h>" nogil:
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void* addr, size_t length)
    int madvise(void* addr, size_t length, int advice)
    int PROT_READ, PROT_WRITE, MAP_PRIVATE, MAP_ANONYMOUS
    void* MAP_FAILED


cdef extern from *:
    """
    #include <sys/mman.h>
    #ifdef MADV_HUGEPAGE
    #define HUMMOCK_MADV_HUGEPAGE MADV_HUGEPAGE
    #else
    #define HUMMOCK_MADV_HUGEPAGE (-1)
    #endif
    static inline int arena_ctz64(unsigned long long x) { return __builtin_ctzll(x); }  /* x != 0 */
    """
    int HUMMOCK_MADV_HUGEPAGE
    int arena_ctz64(uint64_t x) noexcept nogil


DEF CHUNK_BYTES = 2097152       # one x86-64 huge page
DEF UNIT_BYTES = 1024
DEF UNITS = 2048                # CHUNK_BYTES // UNIT_BYTES
DEF WORDS = 32                  # UNITS // 64
DEF SPARE_CHUNKS = 4            # empty chunks kept mapped (8 MiB) instead of unmapped
DEF ARENA_MIN = 512             # smaller contents stay bytes (rounding would waste most of a unit)
DEF ARENA_MAX = 1048576         # larger ones too (half a chunk: first fit would strand the rest)
ARENA_MIN_BYTES = ARENA_MIN
ARENA_MAX_BYTES = ARENA_MAX


ctypedef struct ArenaChunk:
    uint64_t used[WORDS]        # bit u of used[u // 64]: unit u is allocated (unit 0: this header)
    uint32_t free_units
    uint32_t max_run            # no free run is longer (an upper bound; exact after a failed search)
    uint32_t live_allocs
    ArenaChunk* next
    ArenaChunk* prev


cdef ArenaChunk* arena_head = NULL
cdef ArenaChunk* arena_tail = NULL
cdef Py_ssize_t arena_chunks = 0
cdef Py_ssize_t arena_empty_chunks = 0
cdef Py_ssize_t arena_units_in_use = 0      # not counting headers
cdef Py_ssize_t arena_allocs = 0
cdef Py_ssize_t arena_huge_advised = 0      # chunks whose MADV_HUGEPAGE the kernel accepted
cdef Py_ssize_t arena_mmap_failures = 0
cdef bint arena_enabled = _os.environ.get("HUMMOCK_BLOCK_ARENA", "1").strip().lower() not in ("0", "false", "no", "off")


cdef inline bint unit_used(ArenaChunk* c, Py_ssize_t u) noexcept:
    return (c.used[u >> 6] >> (u & 63)) & 1


cdef inline void mark_units(ArenaChunk* c, Py_ssize_t start, Py_ssize_t count, bint used) noexcept:
    cdef Py_ssize_t u
    for u in range(start, start + count):
        if used:
            c.used[u >> 6] |= (<uint64_t>1) << (u & 63)
        else:
            c.used[u >> 6] &= ~((<uint64_t>1) << (u & 63))


cdef Py_ssize_t chunk_find_run(ArenaChunk* c, Py_ssize_t need) noexcept:
    """The first unit of the first run of ``need`` free units in ``c``, or -1 (then
    ``c.max_run`` is set to the longest free run, so later requests longer than it skip
    ``c``). Word at a time: each step counts a run of free or used units with ctz."""
    cdef Py_ssize_t w, bit, z, run = 0, start = 0, longest = 0
    cdef uint64_t x, rest
    for w in range(WORDS):
        x = c.used[w]
        bit = 0
        while bit < 64:
            rest = x >> bit
            z = 64 - bit if rest == 0 else arena_ctz64(rest)     # free units from ``bit`` on
            if z:
                if run == 0:
                    start = w * 64 + bit
                run += z
                if run >= need:
                    return start
                bit += z
                if bit >= 64:
                    break
                rest = x >> bit
            if run > longest:
                longest = run
            run = 0
            z = 64 if ~rest == 0 else arena_ctz64(~rest)        # used units from ``bit`` on
            bit += z
    if run > longest:
        longest = run
    c.max_run = <uint32_t>longest
    return -1


cdef ArenaChunk* arena_new_chunk() noexcept:
    """Map one aligned chunk, advise huge pages, append it to the list; NULL if mmap fails."""
    global arena_head, arena_tail, arena_chunks, arena_empty_chunks, arena_huge_advised, arena_mmap_failures
    cdef void* m = mmap(NULL, 2 * CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    cdef uintptr_t base, aligned
    cdef ArenaChunk* c
    if m == MAP_FAILED:
        arena_mmap_failures += 1
        return NULL
    base = <uintptr_t>m
    aligned = (base + CHUNK_BYTES - 1) & ~(<uintptr_t>CHUNK_BYTES - 1)
    if aligned > base:
        munmap(m, aligned - base)
    munmap(<void*>(aligned + CHUNK_BYTES), base + 2 * CHUNK_BYTES - aligned - CHUNK_BYTES)
    if HUMMOCK_MADV_HUGEPAGE >= 0 and madvise(<void*>aligned, CHUNK_BYTES, HUMMOCK_MADV_HUGEPAGE) == 0:
        arena_huge_advised += 1
    c = <ArenaChunk*>aligned                  # fresh anonymous memory reads as zeros
    c.used[0] = 1                             # unit 0: the header
    c.free_units = UNITS - 1
    c.max_run = UNITS - 1
    c.live_allocs = 0
    c.next = NULL
    c.prev = arena_tail
    if arena_tail != NULL:
        arena_tail.next = c
    else:
        arena_head = c
    arena_tail = c
    arena_chunks += 1
    arena_empty_chunks += 1
    return c


cdef unsigned char* arena_alloc(Py_ssize_t n) noexcept:
    """``n`` bytes in a huge-page chunk, or NULL (see the fallback above)."""
    global arena_units_in_use, arena_allocs, arena_empty_chunks
    cdef Py_ssize_t need, start
    cdef ArenaChunk* c
    if not arena_enabled or n < ARENA_MIN or n > ARENA_MAX:
        return NULL
    need = (n + UNIT_BYTES - 1) // UNIT_BYTES
    c = arena_head
    start = -1
    while c != NULL:
        if c.max_run >= need and c.free_units >= need:
            start = chunk_find_run(c, need)
            if start >= 0:
                break
        c = c.next
    if c == NULL:
        c = arena_new_chunk()
        if c == NULL:
            return NULL
        start = 1
    mark_units(c, start, need, True)
    c.free_units -= need
    if c.live_allocs == 0:
        arena_empty_chunks -= 1
    c.live_allocs += 1
    arena_units_in_use += need
    arena_allocs += 1
    return (<unsigned char*>c) + start * UNIT_BYTES


cdef void arena_free(unsigned char* p, Py_ssize_t n) noexcept:
    """Give back what ``arena_alloc(n)`` returned as ``p``."""
    global arena_head, arena_tail, arena_chunks, arena_empty_chunks, arena_units_in_use, arena_allocs
    cdef ArenaChunk* c = <ArenaChunk*>(<uintptr_t>p & ~(<uintptr_t>CHUNK_BYTES - 1))
    cdef Py_ssize_t need = (n + UNIT_BYTES - 1) // UNIT_BYTES
    cdef Py_ssize_t start = (<uintptr_t>p - <uintptr_t>c) // UNIT_BYTES
    mark_units(c, start, need, False)
    c.free_units += need
    c.max_run = c.free_units                  # an upper bound again
    c.live_allocs -= 1
    arena_units_in_use -= need
    arena_allocs -= 1
    if c.live_allocs != 0:
        return
    if arena_empty_chunks < SPARE_CHUNKS:
        arena_empty_chunks += 1               # keep this one as a spare
        return
    if c.prev != NULL:
        c.prev.next = c.next
    else:
        arena_head = c.next
    if c.next != NULL:
        c.next.prev = c.prev
    else:
        arena_tail = c.prev
    arena_chunks -= 1
    munmap(<void*>c, CHUNK_BYTES)


def arena_stats():
    """What the block arena holds: ``chunks`` mapped (``huge_advised`` of them accepted
    ``MADV_HUGEPAGE``), ``mapped_bytes``, ``live_bytes`` (units allocated, rounded up to
    UNIT_BYTES), ``allocations``, ``empty_chunks`` (at most ``spare_chunks``),
    ``mmap_failures``, ``enabled``."""
    return {"chunks": arena_chunks, "huge_advised": arena_huge_advised, "mapped_bytes": arena_chunks * CHUNK_BYTES,
            "live_bytes": arena_units_in_use * UNIT_BYTES, "allocations": arena_allocs,
            "empty_chunks": arena_empty_chunks, "mmap_failures": arena_mmap_failures, "enabled": bool(arena_enabled),
            "unit_bytes": UNIT_BYTES, "chunk_bytes": CHUNK_BYTES, "spare_chunks": SPARE_CHUNKS}


def arena_check():
    """Raise AssertionError unless every invariant in this file's header holds."""
    cdef ArenaChunk* c = arena_head
    cdef ArenaChunk* prev = NULL
    cdef Py_ssize_t count = 0, units = 0, allocs = 0, empty = 0, free, u, run, longest
    while c != NULL:
        assert <uintptr_t>c % CHUNK_BYTES == 0, "chunk not aligned"
        assert c.prev == prev, "broken back link"
        assert unit_used(c, 0), "header unit not marked used"
        free = run = longest = 0
        for u in range(UNITS):
            if not unit_used(c, u):
                free += 1
                run += 1
                longest = max(longest, run)
            else:
                run = 0
        assert c.max_run >= longest, f"max_run {c.max_run} below a free run of {longest}"
        assert free == c.free_units, f"chunk free_units {c.free_units} but {free} clear bits"
        assert (c.live_allocs == 0) == (free == UNITS - 1), "live_allocs disagrees with the bitmap"
        units += UNITS - 1 - free
        allocs += c.live_allocs
        empty += c.live_allocs == 0
        count += 1
        prev = c
        c = c.next
    assert prev == arena_tail, "tail is not the last chunk"
    assert count == arena_chunks, f"{count} chunks listed, {arena_chunks} counted"
    assert units == arena_units_in_use, f"{units} units marked, {arena_units_in_use} counted"
    assert allocs == arena_allocs, f"{allocs} allocations in chunks, {arena_allocs} counted"
    assert empty == arena_empty_chunks and empty <= SPARE_CHUNKS, f"{empty} empty chunks, {arena_empty_chunks} counted"


@cython.final
cdef class ArenaSpan:
    """One arena allocation as a Python object, for tests of the allocator (the blocks use the
    functions directly): ``ArenaSpan(n)`` allocates, ``write``/``read`` fill and read it back,
    and it is freed with the object. ``in_arena`` is False when the allocator declined."""
    cdef unsigned char* p
    cdef readonly Py_ssize_t size

    def __cinit__(self, Py_ssize_t n):
        self.size = n
        self.p = arena_alloc(n)

    def __dealloc__(self):
        if self.p != NULL:
            arena_free(self.p, self.size)

    @property
    def in_arena(self):
        return self.p != NULL

    @property
    def address(self):
        return <uintptr_t>self.p

    def write(self, bytes data):
        assert self.p != NULL and PyBytes_GET_SIZE(data) == self.size
        memcpy(self.p, PyBytes_AS_STRING(data), self.size)

    def read(self):
        assert self.p != NULL
        return PyBytes_FromStringAndSize(<const char*>self.p, self.size)
