# Included by native/_block.pyx (it needs the block arena's state and Block's fields).
#
# The native block loader: read one stored block of an SST held in a local file, check it and
# unpack it into a Block, with the GIL released for the read, the checksum and the
# decompression (the costly parts: a parallel scan's threads then load blocks side by side).
#
# Contract: ``load_file_block(file_name, offset, stored_len, content_len, object_name)`` returns
# a checked Block equal to ``Block(decode_stored_block(<the stored bytes>), object_name)``, or
# None when anything is off: the file cannot be opened or read, it is shorter than the block,
# the checksum, tag or lengths are wrong, the lz4 payload does not decode to exactly
# ``content_len`` bytes. On None the caller (hummock/sstable/reader.py) loads the block through
# the object store and ``decode_stored_block``, which raise the canonical errors; so this fast
# path adds no error of its own and cannot report one differently. A content whose restart
# array is bad raises Block's own CorruptionError, as ``Block(content)`` would.
#
# Bounds: stored_len and content_len are checked against the format's limits before any
# allocation, the read fills exactly stored_len bytes or fails, and the decoder (native/_lz4.pxd)
# checks every read and write.

from libc.errno cimport errno, EINTR
from libc.stdint cimport uint8_t

from native._lz4 cimport lz4_decode
from native._xxh64 cimport xxh64

cdef extern from "<fcntl.h>" nogil:
    int c_open "open"(const char* path, int flags)
    int O_RDONLY
    int O_CLOEXEC

cdef extern from "<unistd.h>" nogil:
    ssize_t pread(int fd, void* buf, size_t count, long long offset)
    int close(int fd)


DEF TRAILER_LEN = 13             # u8 tag, u32 content length, u64 xxh64 (docs/format.md 4.2)
DEF LZ4_MAX_RATIO = 255          # as hummock/sstable/block.py: no decompression bombs
DEF MAX_CONTENT = 1073741824     # MAX_BLOCK_CONTENT, part of the format


cdef inline uint64_t load_u64_le(const unsigned char* p) noexcept nogil:
    cdef uint64_t x = 0
    cdef int i
    for i in range(7, -1, -1):
        x = (x << 8) | p[i]
    return x


cdef int read_and_unpack(const char* file_name, long long offset, unsigned char* buf, Py_ssize_t n,
                         unsigned char* dst, Py_ssize_t content_len) noexcept nogil:
    """Read ``n`` stored bytes at ``offset`` into ``buf`` and unpack them into ``dst``
    (``content_len`` bytes); 0 on success, a negative number on any failure."""
    cdef int fd = c_open(file_name, O_RDONLY | O_CLOEXEC)
    cdef Py_ssize_t got = 0, r, payload
    cdef uint32_t stored_content
    cdef unsigned char tag
    if fd < 0:
        return -1
    while got < n:
        r = pread(fd, buf + got, n - got, offset + got)
        if r < 0:
            if errno == EINTR:
                continue
            close(fd)
            return -1
        if r == 0:                    # the file ends first
            close(fd)
            return -1
        got += r
    close(fd)
    if xxh64(<const uint8_t*>buf, n - 8, 0) != load_u64_le(buf + n - 8):
        return -2
    tag = buf[n - TRAILER_LEN]
    stored_content = load_u32(buf + n - TRAILER_LEN + 1)
    if stored_content != content_len:
        return -3
    payload = n - TRAILER_LEN
    if tag == 0:
        if content_len != payload:
            return -3
        memcpy(dst, buf, payload)
        return 0
    if tag == 1:
        if content_len > LZ4_MAX_RATIO * payload + 16:
            return -3
        if lz4_decode(<const uint8_t*>buf, payload, <uint8_t*>dst, content_len) != content_len:
            return -4
        return 0
    return -5


def load_file_block(bytes file_name, Py_ssize_t offset, Py_ssize_t stored_len, Py_ssize_t content_len,
                    object object_name=None):
    """The block of ``stored_len`` stored bytes at ``offset`` of the file ``file_name``, checked
    and unpacked without the GIL, or None for the caller's fallback (see the comment above)."""
    cdef unsigned char* buf
    cdef unsigned char* dst
    cdef bytes owned = None
    cdef Block block
    cdef int status
    cdef const char* name_p = PyBytes_AS_STRING(file_name)
    if b"\0" in file_name:             # open() would stop at the NUL: another file
        return None
    if (offset < 0 or stored_len < TRAILER_LEN or content_len < 4 or content_len > MAX_CONTENT
            or stored_len - TRAILER_LEN > MAX_CONTENT):
        return None
    block = Block(_UNFILLED, object_name)
    block.arena_p = arena_alloc(content_len)
    if block.arena_p != NULL:
        block.size = content_len         # from here on the block frees its arena memory itself
        dst = block.arena_p
    else:
        owned = PyBytes_FromStringAndSize(NULL, content_len)   # nobody else sees it until filled
        dst = <unsigned char*>PyBytes_AS_STRING(owned)
    buf = <unsigned char*>malloc(stored_len)
    if buf == NULL:
        raise MemoryError()
    with nogil:
        status = read_and_unpack(name_p, offset, buf, stored_len, dst, content_len)
    free(buf)
    if status != 0:
        return None
    block.size = content_len
    if owned is not None:
        block.data = owned
    block.p = dst
    block.check_restarts()
    return block
