"""Data blocks: building, reading, and the stored form with compression and checksum.

Layout in docs/format.md section 4.1 (content) and 4.2 (stored block). Two layers:

- *content*: prefix-compressed entries + restart offsets, built by :class:`BlockBuilder` and
  read by :class:`BlockIterator` (native ``native/_block.pyx`` or the twin
  ``hummock/sstable/_block_py.py``; identical bytes, identical errors);
- *stored block*: ``payload || compression tag || u32 content length || u64 xxh64``, made by
  :func:`encode_stored_block` and checked and unpacked by :func:`decode_stored_block` (shared by
  both implementations).

Invariants: a stored block's checksum covers every byte before it; the content length is
bounded (``MAX_BLOCK_CONTENT``) and, for lz4, by the lz4 expansion limit, so a corrupted length
cannot make the decoder allocate without bound (no decompression bombs).
Callers: the SST builder and reader.
"""

from __future__ import annotations

import struct

import lz4.block
import xxhash

from hummock import _twins
from hummock.errors import CorruptionError, InvalidArgumentError

_impl = _twins.load("_block", "hummock.sstable._block_py")
BlockBuilder = _impl.BlockBuilder
BlockIterator = _impl.BlockIterator
#: A validated block content (what the block cache holds); ``Block.get`` is a point lookup.
Block = _impl.Block
#: ``find_block(first_keys, full_key) -> int``: last block whose first key is <= the key.
find_block = _impl.find_block
#: ``find_block_for_version(first_keys, user_key, epoch) -> int``
find_block_for_version = _impl.find_block_for_version
#: ``load_file_block(file_name, offset, stored_len, content_len, object_name) -> Block | None``:
#: the native loader (pread, checksum and lz4 without the GIL; native/_block_load.pxi), or None
#: in the pure-Python twin, whose blocks are always read through the object store.
load_file_block = getattr(_impl, "load_file_block", None)

COMPRESSION_NONE = 0  # part of the on-disk format, do not change
COMPRESSION_LZ4 = 1   # part of the on-disk format, do not change
COMPRESSIONS = {"none": COMPRESSION_NONE, "lz4": COMPRESSION_LZ4}
BLOCK_TRAILER = struct.Struct("<BIQ")  # tag, content length, xxh64; part of the on-disk format
BLOCK_TRAILER_SIZE = BLOCK_TRAILER.size  # 13 bytes
CHECKSUM_SEED = 0  # xxh64 seed for block and meta checksums; part of the on-disk format
#: Largest block content the format allows (a block holds at least one entry, so this also
#: bounds a single key + value). Part of the on-disk format, do not change.
MAX_BLOCK_CONTENT = 1 << 30
_LZ4_MAX_RATIO = 255  # lz4 cannot expand input more than ~255x


def checksum(data) -> int:
    """The xxh64 checksum used for blocks and metas."""
    return xxhash.xxh64_intdigest(data, CHECKSUM_SEED)


def compression_tag(name: str) -> int:
    try:
        return COMPRESSIONS[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown compression {name!r}; expected one of {sorted(COMPRESSIONS)}") from None


def encode_stored_block(content: bytes, compression: int = COMPRESSION_LZ4) -> bytes:
    """The stored form of a block content. lz4 is kept only when it saves at least an eighth
    (as RocksDB does): a block that barely shrinks is not worth decompressing on every read."""
    if len(content) > MAX_BLOCK_CONTENT:
        raise InvalidArgumentError(f"block content of {len(content)} bytes exceeds {MAX_BLOCK_CONTENT}")
    payload, tag = content, COMPRESSION_NONE
    if compression == COMPRESSION_LZ4:
        packed = lz4.block.compress(content, store_size=False)
        if len(packed) <= len(content) - len(content) // 8 and len(packed) < len(content):
            payload, tag = packed, COMPRESSION_LZ4
    elif compression != COMPRESSION_NONE:
        raise InvalidArgumentError(f"unknown compression tag {compression}")
    head = payload + BLOCK_TRAILER.pack(tag, len(content), 0)[:5]
    return head + struct.pack("<Q", checksum(head))


def decode_stored_block(stored: bytes, *, object: str = "block", offset: int = 0,
                        expected_content_len: int | None = None) -> bytes:
    """Check and unpack a stored block; return its content.

    ``object``/``offset`` name where the block lives, for errors. ``expected_content_len`` (from
    the block meta) is cross-checked when given. Raises :class:`CorruptionError` on a bad
    checksum, unknown compression tag, impossible length, or failed decompression.
    """
    n = len(stored)
    if n < BLOCK_TRAILER_SIZE:
        raise CorruptionError("block shorter than its trailer", object=object, offset=offset,
                              expected=f">= {BLOCK_TRAILER_SIZE} bytes", found=n)
    tag, content_len, stored_sum = BLOCK_TRAILER.unpack_from(stored, n - BLOCK_TRAILER_SIZE)
    actual = checksum(memoryview(stored)[:n - 8])
    if actual != stored_sum:
        raise CorruptionError("block checksum mismatch", object=object, offset=offset,
                              expected=f"{stored_sum:#018x}", found=f"{actual:#018x}")
    payload_len = n - BLOCK_TRAILER_SIZE
    if expected_content_len is not None and content_len != expected_content_len:
        raise CorruptionError("block content length differs from its meta", object=object, offset=offset,
                              expected=expected_content_len, found=content_len)
    if content_len > MAX_BLOCK_CONTENT:
        raise CorruptionError("block content length beyond the format's limit", object=object, offset=offset,
                              expected=f"<= {MAX_BLOCK_CONTENT}", found=content_len)
    if tag == COMPRESSION_NONE:
        if content_len != payload_len:
            raise CorruptionError("uncompressed block length mismatch", object=object, offset=offset,
                                  expected=payload_len, found=content_len)
        return bytes(memoryview(stored)[:payload_len])
    if tag == COMPRESSION_LZ4:
        if content_len > _LZ4_MAX_RATIO * payload_len + 16:
            raise CorruptionError("lz4 content length impossible for its payload", object=object, offset=offset,
                                  expected=f"<= {_LZ4_MAX_RATIO * payload_len + 16}", found=content_len)
        try:
            content = lz4.block.decompress(memoryview(stored)[:payload_len], uncompressed_size=content_len)
        except lz4.block.LZ4BlockError as exc:
            raise CorruptionError(f"lz4 decompression failed: {exc}", object=object, offset=offset) from None
        if len(content) != content_len:
            raise CorruptionError("lz4 content length mismatch", object=object, offset=offset,
                                  expected=content_len, found=len(content))
        return content
    raise CorruptionError("unknown block compression tag", object=object, offset=offset,
                          expected="0 (none) or 1 (lz4)", found=tag)
