"""SST metadata: block metas, the meta section, the footer, and ``SstableInfo``.

Byte layout in docs/format.md section 4.3. An SST object is::

    data block 0 | ... | data block n-1 | meta | footer (32 bytes)

The footer locates and checksums the meta; :class:`SstableInfo` (what versions carry) records
``meta_offset`` and ``file_size`` so a reader fetches meta + footer in one ranged read.
Decoding checks every length against the buffer (``CorruptionError`` names object, offset,
expected and found) and never trusts a count.

Callers: the SST builder and reader, versions (issue: engine), compaction.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hummock.errors import CorruptionError
from hummock.sstable.block import checksum, find_block

SST_MAGIC = 0x31545353_4B4D5548  # b"HUMKSST1" little-endian; part of the on-disk format, do not change
SST_FORMAT_VERSION = 2            # written; part of the on-disk format, do not change
READABLE_FORMAT_VERSIONS = (1, 2)  # 1: no live-count section (docs/format.md 4.3)
LIVE_COUNTS_TAG = 0x564C4B48      # b"HKLV": opens the live-count section; part of the format
FOOTER = struct.Struct("<QIQIQ")  # meta_offset, meta_len, meta_xxh64, version, magic; part of the format
FOOTER_SIZE = FOOTER.size         # 32 bytes
_BLOCK_META = struct.Struct("<QIII")  # offset, stored_len, content_len, first_key_len
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PREFIX_ENTRY = struct.Struct("<II")  # table id, prefix length (bytes of table key); part of the format
MAX_PREFIX_LEN = 0xFFFF


def sst_object_path(sst_id: int) -> str:
    """Object-store path of an SST. Built from the id only (DESIGN.md section 4)."""
    if not isinstance(sst_id, int) or isinstance(sst_id, bool) or not 0 <= sst_id < 2**64:
        raise ValueError(f"sst id must be an int in [0, 2**64), got {sst_id!r}")
    return f"sst/{sst_id:020d}.sst"


@dataclass(frozen=True)
class BlockMeta:
    offset: int          # of the stored block in the SST object
    stored_len: int      # stored bytes, trailer included
    content_len: int     # bytes after decompression
    first_key: bytes     # first full key of the block


@dataclass(frozen=True)
class SstableInfo:
    """What a version records about an SST: enough to pick it for a read and to open it."""

    sst_id: int
    smallest_key: bytes  # first full key
    largest_key: bytes   # last full key
    file_size: int
    meta_offset: int
    min_epoch: int
    max_epoch: int
    key_count: int
    tombstone_count: int
    table_ids: tuple
    # per table id (``table_ids``' order): user keys whose newest version here is a put, i.e.
    # the rows of that table a read at or above ``max_epoch`` sees in this SST; None for SSTs
    # written before format version 2 (docs/format.md 4.3)
    live_counts: tuple | None = None

    @property
    def object_path(self) -> str:
        return sst_object_path(self.sst_id)

    def to_dict(self) -> dict:
        return {"sst_id": self.sst_id, "smallest_key": self.smallest_key.hex(), "largest_key": self.largest_key.hex(),
                "file_size": self.file_size, "meta_offset": self.meta_offset, "min_epoch": self.min_epoch,
                "max_epoch": self.max_epoch, "key_count": self.key_count, "tombstone_count": self.tombstone_count,
                "table_ids": list(self.table_ids),
                **({} if self.live_counts is None else {"live_counts": list(self.live_counts)})}

    @classmethod
    def from_dict(cls, d: dict) -> SstableInfo:
        live = d.get("live_counts")
        return cls(d["sst_id"], bytes.fromhex(d["smallest_key"]), bytes.fromhex(d["largest_key"]), d["file_size"],
                   d["meta_offset"], d["min_epoch"], d["max_epoch"], d["key_count"], d["tombstone_count"],
                   tuple(d["table_ids"]), None if live is None else tuple(live))


class SstableMeta:
    """The decoded meta section of one SST."""

    __slots__ = ("blocks", "filter", "smallest_key", "largest_key", "min_epoch", "max_epoch", "key_count",
                 "tombstone_count", "table_ids", "first_keys", "prefix_lens", "prefix_filter", "live_counts")

    def __init__(self, blocks, filter, smallest_key, largest_key, min_epoch, max_epoch, key_count,
                 tombstone_count, table_ids, prefix_lens=None, prefix_filter=b"", live_counts=None):
        self.blocks = list(blocks)
        self.filter = filter
        self.smallest_key = smallest_key
        self.largest_key = largest_key
        self.min_epoch = min_epoch
        self.max_epoch = max_epoch
        self.key_count = key_count
        self.tombstone_count = tombstone_count
        self.table_ids = tuple(table_ids)
        self.first_keys = [b.first_key for b in self.blocks]
        # the optional prefix-filter section: table id -> prefix length its filter covers
        self.prefix_lens = dict(prefix_lens or {})
        self.prefix_filter = prefix_filter
        # per table id, the rows a read at or above max_epoch sees here (None: a version-1 SST)
        self.live_counts = None if live_counts is None else tuple(live_counts)

    def block_for(self, full_key: bytes) -> int:
        """Index of the last block whose first key is <= ``full_key`` (0 if none is)."""
        return find_block(self.first_keys, full_key)

    @property
    def size_in_memory(self) -> int:
        """Approximate bytes held, for the meta cache's accounting."""
        return 200 + len(self.filter) + len(self.prefix_filter) + sum(120 + len(b.first_key) for b in self.blocks)

    def encode(self) -> bytes:
        out = bytearray(_U32.pack(len(self.blocks)))
        for b in self.blocks:
            out += _BLOCK_META.pack(b.offset, b.stored_len, b.content_len, len(b.first_key))
            out += b.first_key
        for blob in (self.filter, self.smallest_key, self.largest_key):
            out += _U32.pack(len(blob)) + blob
        out += struct.pack("<QQQQ", self.min_epoch, self.max_epoch, self.key_count, self.tombstone_count)
        out += _U32.pack(len(self.table_ids))
        for table_id in self.table_ids:
            out += _U32.pack(table_id)
        if self.live_counts is not None:   # format version 2's section (docs/format.md 4.3)
            if len(self.live_counts) != len(self.table_ids):
                raise ValueError("live_counts must have one count per table id")
            out += _U32.pack(LIVE_COUNTS_TAG)
            for count in self.live_counts:
                out += _U64.pack(count)
        if self.prefix_lens:   # optional section (docs/format.md 4.3): absent in older SSTs
            out += _U32.pack(len(self.prefix_lens))
            for table_id in sorted(self.prefix_lens):
                out += _PREFIX_ENTRY.pack(table_id, self.prefix_lens[table_id])
            out += _U32.pack(len(self.prefix_filter)) + self.prefix_filter
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes, *, object: str, base_offset: int = 0) -> SstableMeta:
        reader = _Reader(data, object, base_offset)
        count = reader.u32("block count")
        reader.check_count(count, _BLOCK_META.size, "block count")
        blocks = []
        for _ in range(count):
            offset, stored_len, content_len, key_len = reader.unpack(_BLOCK_META, "block meta")
            blocks.append(BlockMeta(offset, stored_len, content_len, reader.take(key_len, "block first key")))
        filter_data = reader.take(reader.u32("filter length"), "filter")
        smallest = reader.take(reader.u32("smallest key length"), "smallest key")
        largest = reader.take(reader.u32("largest key length"), "largest key")
        min_epoch, max_epoch, key_count, tombstones = reader.unpack(struct.Struct("<QQQQ"), "epochs and counts")
        table_count = reader.u32("table id count")
        reader.check_count(table_count, 4, "table id count")
        table_ids = [reader.u32("table id") for _ in range(table_count)]
        live_counts = None
        if not reader.at_end() and reader.peek_u32() == LIVE_COUNTS_TAG:   # no prefix count is this large
            reader.u32("live-count tag")
            reader.check_count(table_count, 8, "live counts")
            live_counts = [reader.unpack(_U64, "live count")[0] for _ in range(table_count)]
            if sum(live_counts) > key_count:
                reader.fail_value("live counts exceed the key count", f"<= {key_count}", sum(live_counts))
        prefix_lens, prefix_filter = {}, b""
        if not reader.at_end():
            prefix_lens = _decode_prefix_lens(reader)
            prefix_filter = reader.take(reader.u32("prefix filter length"), "prefix filter")
        reader.expect_end()
        return cls(blocks, filter_data, smallest, largest, min_epoch, max_epoch, key_count, tombstones, table_ids,
                   prefix_lens, prefix_filter, live_counts)


def _decode_prefix_lens(reader) -> dict:
    """The prefix-filter section's ``(table id, prefix length)`` entries: at least one, table
    ids strictly increasing, lengths in [1, 65535]."""
    count = reader.u32("prefix filter table count")
    reader.check_count(count, _PREFIX_ENTRY.size, "prefix filter table count")
    if count == 0:
        reader.fail_value("prefix filter section without tables", ">= 1", 0)
    out = {}
    for _ in range(count):
        table_id, prefix_len = reader.unpack(_PREFIX_ENTRY, "prefix filter entry")
        if out and table_id <= max(out):
            reader.fail_value("prefix filter table ids not increasing", f"> {max(out)}", table_id)
        if not 1 <= prefix_len <= MAX_PREFIX_LEN:
            reader.fail_value("prefix length out of range", f"1..{MAX_PREFIX_LEN}", prefix_len)
        out[table_id] = prefix_len
    return out


def encode_footer(meta_offset: int, meta: bytes) -> bytes:
    return FOOTER.pack(meta_offset, len(meta), checksum(meta), SST_FORMAT_VERSION, SST_MAGIC)


def decode_footer(footer: bytes, *, object: str, file_size: int) -> tuple[int, int, int]:
    """Check a footer; return ``(meta_offset, meta_len, meta_checksum)``."""
    offset = file_size - FOOTER_SIZE
    if len(footer) != FOOTER_SIZE:
        raise CorruptionError("SST shorter than its footer", object=object, offset=0,
                              expected=f">= {FOOTER_SIZE} bytes", found=len(footer))
    meta_offset, meta_len, meta_sum, version, magic = FOOTER.unpack(footer)
    if magic != SST_MAGIC:
        raise CorruptionError("bad SST magic", object=object, offset=offset + 24,
                              expected=f"{SST_MAGIC:#018x}", found=f"{magic:#018x}")
    if version not in READABLE_FORMAT_VERSIONS:
        raise CorruptionError("unknown SST format version", object=object, offset=offset + 20,
                              expected=" or ".join(map(str, READABLE_FORMAT_VERSIONS)), found=version)
    if meta_offset + meta_len != offset:
        raise CorruptionError("meta does not end at the footer", object=object, offset=offset,
                              expected=offset, found=meta_offset + meta_len)
    return meta_offset, meta_len, meta_sum


class _Reader:
    """Bounds-checked little-endian reads over a meta buffer."""

    def __init__(self, data: bytes, object: str, base_offset: int):
        self.data, self.pos, self.object, self.base = data, 0, object, base_offset

    def _fail(self, what, need):
        raise CorruptionError(f"truncated SST meta reading {what}", object=self.object, offset=self.base + self.pos,
                              expected=f"{need} bytes", found=f"{len(self.data) - self.pos} left")

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            self._fail(what, n)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, layout: struct.Struct, what: str):
        return layout.unpack(self.take(layout.size, what))

    def u32(self, what: str) -> int:
        return _U32.unpack(self.take(4, what))[0]

    def peek_u32(self) -> int | None:
        """The next u32 without moving (None when fewer than 4 bytes are left)."""
        return _U32.unpack_from(self.data, self.pos)[0] if len(self.data) - self.pos >= 4 else None

    def check_count(self, count: int, min_size: int, what: str) -> None:
        if count * min_size > len(self.data) - self.pos:
            raise CorruptionError(f"SST meta {what} larger than the meta", object=self.object,
                                  offset=self.base + self.pos - 4,
                                  expected=f"<= {(len(self.data) - self.pos) // min_size}", found=count)

    def at_end(self) -> bool:
        return self.pos == len(self.data)

    def fail_value(self, what: str, expected, found):
        raise CorruptionError(f"bad SST meta: {what}", object=self.object, offset=self.base + self.pos,
                              expected=expected, found=found)

    def expect_end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptionError("trailing bytes in SST meta", object=self.object, offset=self.base + self.pos,
                                  expected=len(self.data), found=self.pos)
