# cython: language_level=3
"""Native per-entry loop of the compaction core; twin of ``hummock/compaction/_compact_py.py``
(same function, same cuts, byte-identical SSTs, same errors).

The input runs are walked by the read path's SST-run cursors (``native/_iterators.pxd``), block by
block, in a binary heap ordered by the full-key comparator; the heap compares the cursors'
borrowed key pointers, so merging copies nothing. The retention rule runs on those pointers too
(the current user key is kept in a C buffer). A surviving entry costs one
``BlockBuilder.c_add_raw`` that copies its key and value straight from the input block (no
Python object). Python is called once per output block
(``SstableBuilder.cut_block``: compression, checksum, upload) and once per output SST.

Table watermarks (``hide``, see the twin): the table's resolved record is looked up when the
table id changes, the range check (``range_hides``) runs once per user key, the truncation
check once per entry.

Bounds: every key and value comes from a ``BlockIterator`` that checked it against its block; a
bad value tag raises ``CorruptionError`` before it is used.
Callers: :mod:`hummock.compaction.core` only (through ``_twins.load``).
"""

cimport cython
from cpython.long cimport PyLong_AsUnsignedLongLong
from cpython.ref cimport PyObject
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from native._block cimport BlockBuilder, BlockIterator
from native._iterators cimport SstRun, _SstRunCursor, range_hides, unpack_hide
from native._keycmp cimport cmp_full_keys

from hummock.errors import CorruptionError, InvalidArgumentError

# part of the on-disk format, do not change (mirrored in the twin and hummock/key.py)
DEF EPOCH_LEN = 8
DEF TAG_PUT = 0x01
DEF TAG_DELETE = 0x02


cdef inline uint64_t key_epoch(const unsigned char* k, Py_ssize_t n) noexcept:
    cdef const unsigned char* p = k + n - EPOCH_LEN
    cdef uint64_t x = 0
    cdef int i
    for i in range(EPOCH_LEN):
        x = (x << 8) | p[i]
    return ~x   # 2**64-1 - x in C (the literal would make it Python arithmetic)


cdef inline bint before(PyObject* a, PyObject* b) noexcept:
    cdef BlockIterator x = (<_SstRunCursor>a).it
    cdef BlockIterator y = (<_SstRunCursor>b).it
    return cmp_full_keys(x.key_ptr, x.key_len, y.key_ptr, y.key_len) < 0


@cython.final
cdef class _Heap:
    """A binary min-heap of positioned cursors (borrowed pointers; ``cursors`` owns them)."""
    cdef list cursors
    cdef PyObject** items
    cdef Py_ssize_t size

    def __cinit__(self, list cursors):
        cdef Py_ssize_t i
        self.cursors = cursors
        self.items = <PyObject**>malloc((len(cursors) + 1) * sizeof(PyObject*))
        if self.items == NULL:
            raise MemoryError()
        self.size = 0
        for cursor in cursors:
            if (<_SstRunCursor>cursor).position():
                self.items[self.size] = <PyObject*>cursor
                self.size += 1
        for i in range(self.size // 2 - 1, -1, -1):
            self.sift_down(i)

    def __dealloc__(self):
        free(self.items)

    cdef void sift_down(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t child
        cdef PyObject* t
        cdef PyObject** h = self.items
        while True:
            child = 2 * i + 1
            if child >= self.size:
                return
            if child + 1 < self.size and before(h[child + 1], h[child]):
                child += 1
            if not before(h[child], h[i]):
                return
            t = h[i]
            h[i] = h[child]
            h[child] = t
            i = child

    cdef int advance_top(self) except -1:
        """Move the smallest cursor to its next entry and restore the heap. REQUIRES size > 0."""
        cdef _SstRunCursor top = <_SstRunCursor>self.items[0]
        top.it.c_next()
        if not top.position():
            self.size -= 1
            self.items[0] = self.items[self.size]
        if self.size > 1:
            self.sift_down(0)
        return 0


cdef _SstRunCursor cursor_for(object run):
    cdef _SstRunCursor cursor = _SstRunCursor()
    if type(run) is not SstRun:   # e.g. the twin's SstRun: same fields
        run = SstRun(run.readers, run.start, run.end)
    cursor.start(<SstRun>run)
    return cursor


def compact_into(runs, watermark, bint bottom, outputs, Py_ssize_t target_sst_size, stats, hide=None):
    """Merge ``runs`` (``SstRun`` s) into ``outputs`` (an ``SstableOutputs``); see the twin."""
    cdef uint64_t wm
    cdef _Heap heap
    cdef BlockIterator it
    cdef const unsigned char* k
    cdef const unsigned char* v
    cdef Py_ssize_t n, vn, block_size = 0, written = 0
    cdef unsigned char* cur = NULL       # user key of the entry being looked at
    cdef Py_ssize_t cur_len = -1, cur_cap = 0
    cdef unsigned char last_table[4]     # table id of the last entry written
    cdef unsigned char* grown
    cdef bint settled = False, emitted = False, tombstone
    cdef BlockBuilder blocks = None
    cdef object builder = None
    cdef Py_ssize_t n_in = 0, n_out = 0, dropped_versions = 0, dropped_tombstones = 0, dropped_hidden = 0
    cdef unsigned char hide_table[4]     # table id whose record has_floor/floor/ranges hold
    cdef bint have_table = False, has_floor = False, in_range = False
    cdef uint64_t floor = 0
    cdef object ranges = None
    if type(watermark) is not int or watermark < 0 or watermark > 0xFFFFFFFFFFFFFFFF:
        raise InvalidArgumentError(f"watermark must be an int in [0, 2**64), got {watermark!r}")
    if hide is None:
        hide = {}
    elif type(hide) is not dict:
        raise InvalidArgumentError(f"hide must be a dict {{table_id: resolved}}, got {type(hide).__name__}")
    wm = PyLong_AsUnsignedLongLong(watermark)
    heap = _Heap([cursor_for(run) for run in runs])
    try:
        while heap.size > 0:
            it = (<_SstRunCursor>heap.items[0]).it
            k = it.key_ptr
            n = it.key_len
            v = it.p + it.value_start
            vn = it.value_end - it.value_start
            n_in += 1
            if cur_len != n - EPOCH_LEN or memcmp(cur, k, cur_len) != 0:
                if n > cur_cap:
                    grown = <unsigned char*>realloc(cur, 2 * n)
                    if grown == NULL:
                        raise MemoryError()
                    cur, cur_cap = grown, 2 * n
                memcpy(cur, k, n - EPOCH_LEN)
                cur_len = n - EPOCH_LEN
                settled = emitted = False
                if hide:
                    if not have_table or memcmp(hide_table, k, 4) != 0:
                        memcpy(hide_table, k, 4)
                        have_table = True
                        ranges = unpack_hide((<dict>hide).get((<unsigned long>k[0] << 24) | (<unsigned long>k[1] << 16)
                                                               | (<unsigned long>k[2] << 8) | <unsigned long>k[3]),
                                             &has_floor, &floor)
                    in_range = ranges is not None and range_hides(<dict>ranges, k + 4, cur_len - 4)
            if vn >= 1 and v[0] == TAG_PUT:
                tombstone = False
            elif vn == 1 and v[0] == TAG_DELETE:
                tombstone = True
            else:
                raise CorruptionError("bad value tag", object="compaction input", expected="0x01 or lone 0x02",
                                      found=bytes(v[:2 if vn >= 2 else vn]).hex())
            if in_range or (has_floor and key_epoch(k, n) <= floor):
                dropped_hidden += 1
                heap.advance_top()
                continue
            if key_epoch(k, n) <= wm:
                if settled:
                    dropped_versions += 1
                    heap.advance_top()
                    continue
                settled = True
                if bottom and tombstone:
                    dropped_tombstones += 1
                    heap.advance_top()
                    continue
            if not emitted:   # the first entry written of this user key: maybe start a new SST
                if builder is not None and (written + blocks.c_size_estimate() >= target_sst_size
                                            or memcmp(last_table, k, 4) != 0):
                    outputs.cut()
                    builder = None
                if builder is None:
                    builder = outputs.current()
                    block_builder = builder.block_builder
                    if type(block_builder) is not BlockBuilder:
                        raise InvalidArgumentError("the native compaction core needs the native BlockBuilder")
                    blocks = <BlockBuilder>block_builder
                    block_size = builder.block_size
                    written = builder.written
                memcpy(last_table, k, 4)
                emitted = True
            if not blocks.c_add_raw(k, n, v[0], v + 1, vn - 1):   # (copies the key: no bytes object)
                builder.cut_block()
                written = builder.written
                blocks.c_add_raw(k, n, v[0], v + 1, vn - 1)
            if blocks.c_size_estimate() >= block_size:
                builder.cut_block()
                written = builder.written
            n_out += 1
            heap.advance_top()
    finally:
        free(cur)
        stats.input_entries += n_in
        stats.output_entries += n_out
        stats.dropped_versions += dropped_versions
        stats.dropped_tombstones += dropped_tombstones
        stats.dropped_hidden += dropped_hidden
