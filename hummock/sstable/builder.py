"""Builds one SST from full keys added in order (docs/format.md section 4).

:class:`SstableBuilder` feeds a native :class:`~hummock.sstable.block.BlockBuilder`, cuts a block
when it reaches ``block_size`` (before compression) or when the table id changes (a block never
spans two table ids), compresses and checksums each block, writes it to a *sink* at once, and at
``finish`` writes the meta (block metas, filter over user keys, key range, epoch range, counts,
table ids, and -- for tables with a declared prefix length -- the prefix filter) and the footer.
Per-key work is one native call; per-block work is Python. The filters are built from hashes the
block builder took as keys came (``key_hashes``, ``prefix_hashes``): a 64 MiB SST of 2M keys kept
every user key as a bytes object until ``finish`` (~120 MB in a compaction worker).

After ``finish`` the builder's :attr:`SstableBuilder.meta` is the :class:`SstableMeta` it wrote
(equal to what a reader decodes from the file): the engine hands a flush's metas to its meta
cache, so the first open of a new SST reads and decodes nothing.

Sinks: anything with ``write(bytes)``, ``finish()`` and ``abort()`` -- :class:`BytesSink` keeps
the SST in memory; an object store's ``streaming_upload(path)`` uploads it as it is built.

REQUIRES: keys strictly increasing in full-key order (checked; ``InvalidArgumentError``).
Callers: the engine's sync (shared buffer -> SSTs) and compaction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hummock.errors import InvalidArgumentError
from hummock.sstable.block import (BLOCK_TRAILER_SIZE, COMPRESSION_LZ4, COMPRESSION_NONE, BlockBuilder,
                                   compression_tag, encode_stored_block)
from hummock.sstable.filter import build_filter_from_hashes
from hummock.sstable.meta import FOOTER_SIZE, MAX_PREFIX_LEN, BlockMeta, SstableInfo, SstableMeta, encode_footer, sst_object_path


LZ4_MAX_BACKOFF = 16   # most blocks stored without trying lz4 after blocks it could not shrink


def prefix_bits_per_key(bloom_bits_per_key: int) -> int:
    """Bits per distinct prefix of a prefix filter: twice the key filter's (capped at 64). A
    table has far fewer distinct prefixes than keys, and an absent-prefix probe meets every
    overlapping SST: at 20 bits (14 probes, ~0.01% false positives) a probe over 20 SSTs reads
    a block once in ~500 probes, where 10 bits would read one in ~6."""
    return min(64, 2 * bloom_bits_per_key)


@dataclass(frozen=True)
class SstableBuilderOptions:
    block_size: int = 64 * 1024       # target block content size before compression
    restart_interval: int = 16
    compression: str = "lz4"          # "lz4" or "none"
    bloom_bits_per_key: int = 10
    # per table id, the prefix length (bytes of table key) its prefix filter covers: a dict or
    # (table_id, n) pairs, kept as a sorted tuple of pairs (docs/engine.md "Prefix filters")
    prefix_lens: tuple = ()

    def __post_init__(self):
        if not 256 <= self.block_size <= (1 << 28):
            raise InvalidArgumentError(f"block_size must be in [256, 2**28], got {self.block_size}")
        if not 1 <= self.restart_interval <= 65536:
            raise InvalidArgumentError(f"restart_interval must be in [1, 65536], got {self.restart_interval}")
        compression_tag(self.compression)
        if not 1 <= self.bloom_bits_per_key <= 64:
            raise InvalidArgumentError(f"bloom_bits_per_key must be in [1, 64], got {self.bloom_bits_per_key}")
        object.__setattr__(self, "prefix_lens", check_prefix_lens(self.prefix_lens))

    def replace(self, **changes) -> SstableBuilderOptions:
        return replace(self, **changes)

    @property
    def prefix_len_map(self) -> dict:
        """``prefix_lens`` as a dict (table id -> prefix length)."""
        return dict(self.prefix_lens)


def check_prefix_lens(prefix_lens) -> tuple:
    """``prefix_lens`` (a dict or ``(table_id, n)`` pairs) as a sorted tuple of pairs;
    InvalidArgumentError unless table ids are u32s (each once) and lengths in [1, MAX_PREFIX_LEN]."""
    try:
        pairs = list(prefix_lens.items() if isinstance(prefix_lens, dict) else prefix_lens)
        pairs = [(table_id, n) for table_id, n in pairs]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"prefix_lens must be a dict or (table_id, prefix_len) pairs, "
                                   f"got {prefix_lens!r}") from None
    for table_id, n in pairs:
        if isinstance(table_id, bool) or not isinstance(table_id, int) or not 0 <= table_id <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"prefix_lens: table id must be an int in [0, 4294967295], got {table_id!r}")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PREFIX_LEN:
            raise InvalidArgumentError(f"prefix_lens: prefix length of table {table_id} must be an int in "
                                       f"[1, {MAX_PREFIX_LEN}], got {n!r}")
    if len({table_id for table_id, _ in pairs}) != len(pairs):
        raise InvalidArgumentError(f"prefix_lens names a table twice: {pairs!r}")
    return tuple(sorted(pairs))


class BytesSink:
    """Collects an SST in memory; :meth:`getvalue` returns it after ``finish``."""

    def __init__(self):
        self._parts = []
        self._value = None

    def write(self, data: bytes) -> None:
        self._parts.append(data)

    def finish(self) -> None:
        self._value = b"".join(self._parts)
        self._parts = []

    def abort(self) -> None:
        self._parts = []

    def getvalue(self) -> bytes:
        assert self._value is not None, "getvalue() before finish()"
        return self._value


class SstableBuilder:
    """Accumulates one SST. Not thread-safe: one builder per thread."""

    def __init__(self, sst_id: int, options: SstableBuilderOptions | None = None, sink=None):
        self.sst_id = sst_id
        self.options = options or SstableBuilderOptions()
        self._compression = compression_tag(self.options.compression)
        self._lz4_backoff = 0      # blocks to store without trying lz4 after the last miss
        self._lz4_skip = 0         # ... of which this many are left
        self._block_size = self.options.block_size
        self._blocks = BlockBuilder(self.options.restart_interval, self.options.prefix_len_map or None)
        self._sink = sink if sink is not None else BytesSink()
        self._metas: list[BlockMeta] = []
        self._prefix_lens = self.options.prefix_len_map
        self._offset = 0
        self._finished = False
        self.meta: SstableMeta | None = None   # the meta written, once finished

    @classmethod
    def to_store(cls, store, sst_id: int, options: SstableBuilderOptions | None = None) -> SstableBuilder:
        """A builder that streams its SST to ``store`` under the id's object path."""
        return cls(sst_id, options, store.streaming_upload(sst_object_path(sst_id)))

    @property
    def sink(self):
        return self._sink

    @property
    def key_count(self) -> int:
        return self._blocks.key_count

    @property
    def estimated_size(self) -> int:
        """Bytes written so far plus the open block (uncompressed): for splitting outputs."""
        return self._offset + self._blocks.block_size_estimate

    @property
    def last_key(self):
        return self._blocks.last_key

    def add(self, full_key: bytes, value: bytes | None) -> None:
        """Add a put (``value`` bytes) or a delete (``value is None``)."""
        blocks = self._blocks
        if not blocks.add(full_key, value):
            self._cut()
            blocks.add(full_key, value)
        if blocks.block_size_estimate >= self._block_size:
            self._cut()

    def add_batch(self, keys: list, values: list, start: int = 0, stop_at_size: int | None = None) -> int:
        """Add ``keys[start:]`` with their ``values`` (``None`` = delete) as :meth:`add` would, one
        native call per block. With ``stop_at_size``, stop at the first user-key boundary once
        :attr:`estimated_size` reaches it (to split outputs). Returns the index of the first
        entry not added."""
        blocks = self._blocks
        n = len(keys)
        i = start
        while i < n:
            if stop_at_size is not None and self.estimated_size >= stop_at_size:
                last = blocks.last_key
                while i < n and last is not None and keys[i][:-8] == last[:-8]:
                    self.add(keys[i], values[i])   # finish the versions of the last user key
                    i += 1
                return i
            i = blocks.add_batch(keys, values, i, self._block_size)
            if i < n or blocks.block_size_estimate >= self._block_size:
                self._cut()
        return i

    def add_packed(self, prefix: bytes, epoch: int, packed, start: int = 0, stop_at_size: int | None = None,
                   *, continued: bool = False) -> int:
        """Add the puts of ``packed`` (a checked ``PackedColumns``: distinct keys) from entry
        ``start``, every full key ``prefix`` (the table id) + key + ``epoch``, as
        :meth:`add_batch` would add them as lists, one native call per block. With
        ``stop_at_size``, stop once :attr:`estimated_size` reaches it (every entry is a user-key
        boundary), checked where :meth:`add_batch` checks it: on entry and after each block cut.
        ``continued``: these entries follow the previous call's in the one list
        :meth:`add_batch` would have been given (the next imm of a flush), so no check on entry
        while the open block holds entries -- else the SST would be cut at every imm boundary
        once full, where the list path cuts at block boundaries only. Returns the index of the
        first entry not added."""
        blocks = self._blocks
        keys, width, values, offsets = packed.keys, packed.key_width, packed.values, packed.offsets
        n = len(packed)
        i = start
        check = not continued or not blocks.block_entry_count
        while i < n:
            if check and stop_at_size is not None and self.estimated_size >= stop_at_size:
                return i
            check = True
            i = blocks.add_packed(prefix, epoch, keys, width, values, offsets, i, self._block_size)
            if i < n or blocks.block_size_estimate >= self._block_size:
                self._cut()
        return i

    def add_tagged(self, full_key: bytes, tagged_value: bytes) -> None:
        """Add a value that carries its tag byte (copying entries from other SSTs)."""
        blocks = self._blocks
        if not blocks.add_tagged(full_key, tagged_value):
            self._cut()
            blocks.add_tagged(full_key, tagged_value)
        if blocks.block_size_estimate >= self._block_size:
            self._cut()

    # --- for bulk feeders (the compaction core) ---------------------------------------------
    # A feeder may add entries to ``block_builder`` itself, provided it cuts exactly as
    # ``add_tagged`` does: ``cut_block()`` and add again when an add returns False (a new table
    # id), and ``cut_block()`` after an add that brings the block estimate to ``block_size``.

    @property
    def block_builder(self):
        """The (native or pure) ``BlockBuilder`` holding the open block."""
        return self._blocks

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def written(self) -> int:
        """Stored bytes of the finished blocks (``estimated_size`` minus the open block)."""
        return self._offset

    def cut_block(self) -> None:
        """Finish the open block, if it has entries, and write it to the sink."""
        self._cut()

    def _block_compression(self) -> int:
        """lz4 is tried on each block unless recent blocks of this SST did not compress well
        enough to keep it (random or encrypted values): after such a miss the next 1, 2, 4, ...
        ``LZ4_MAX_BACKOFF`` blocks are stored as they are, and a block that compresses resets
        the backoff. Any choice gives a valid SST; this only saves the futile attempts (~7% of
        a flush of random values)."""
        if self._lz4_skip:
            self._lz4_skip -= 1
            if self._lz4_skip:
                return COMPRESSION_NONE
        return self._compression

    def _cut(self) -> None:
        blocks = self._blocks
        if not blocks.block_entry_count:
            return
        first_key = blocks.block_first_key
        compression = self._block_compression()
        if compression == COMPRESSION_NONE:   # (one copy of the content instead of three)
            stored, content_len = blocks.finish_stored_block()
        else:
            content = blocks.finish_block()
            stored, content_len = encode_stored_block(content, compression), len(content)
        if self._compression == COMPRESSION_LZ4 and not self._lz4_skip:
            if stored[-BLOCK_TRAILER_SIZE] == COMPRESSION_LZ4:
                self._lz4_backoff = 0
            else:                  # lz4 did not pay off: skip 1, 2, 4, ... 16 blocks
                self._lz4_backoff = min(2 * self._lz4_backoff or 1, LZ4_MAX_BACKOFF)
                self._lz4_skip = self._lz4_backoff + 1
        self._sink.write(stored)
        self._metas.append(BlockMeta(self._offset, len(stored), content_len, first_key))
        self._offset += len(stored)

    def finish(self) -> SstableInfo:
        """Write the last block, the meta and the footer; finish the sink; describe the SST.

        REQUIRES: at least one key was added (an empty SST is not a thing: ``InvalidArgumentError``).
        """
        if self._finished:
            raise InvalidArgumentError("SstableBuilder.finish called twice")
        blocks = self._blocks
        if blocks.key_count == 0:
            raise InvalidArgumentError("cannot finish an SST without keys")
        self._cut()
        bits = self.options.bloom_bits_per_key
        prefix_lens = {t: self._prefix_lens[t] for t in blocks.table_ids if t in self._prefix_lens}
        # the filters from the hashes the block builder kept (not the keys: 8 bytes a key)
        meta = SstableMeta(self._metas, build_filter_from_hashes(blocks.key_hashes, bits),
                           blocks.smallest_key, blocks.last_key, blocks.min_epoch, blocks.max_epoch,
                           blocks.key_count, blocks.tombstone_count, blocks.table_ids, prefix_lens,
                           build_filter_from_hashes(blocks.prefix_hashes, prefix_bits_per_key(bits))
                           if prefix_lens else b"", blocks.live_counts)
        encoded = meta.encode()
        meta_offset = self._offset
        self._sink.write(encoded)
        self._sink.write(encode_footer(meta_offset, encoded))
        self._sink.finish()
        self._finished = True
        self.meta = meta
        file_size = meta_offset + len(encoded) + FOOTER_SIZE
        return SstableInfo(self.sst_id, meta.smallest_key, meta.largest_key, file_size, meta_offset,
                           meta.min_epoch, meta.max_epoch, meta.key_count, meta.tombstone_count, meta.table_ids,
                           meta.live_counts)

    def abort(self) -> None:
        """Give up: nothing becomes visible under the SST's name."""
        self._finished = True
        self._sink.abort()


class SstableOutputs:
    """A sequence of SSTs written to a store, one at a time: what a flush or a compaction
    produces. ``current()`` is the open builder (started on demand with a fresh id), ``cut()``
    finishes it, ``infos`` lists the finished SSTs in order and ``metas`` their metas
    (:attr:`SstableBuilder.meta`), parallel to ``infos``. As a context manager it aborts the
    open builder when the block raises (finished SSTs stay: orphans until committed or vacuumed).
    """

    def __init__(self, store, options: SstableBuilderOptions, new_sst_id):
        self._store = store
        self._options = options
        self._new_sst_id = new_sst_id
        self._builder = None
        self.infos: list[SstableInfo] = []
        self.metas: list[SstableMeta] = []

    @property
    def is_open(self) -> bool:
        return self._builder is not None

    def current(self) -> SstableBuilder:
        if self._builder is None:
            self._builder = SstableBuilder.to_store(self._store, self._new_sst_id(), self._options)
        return self._builder

    def cut(self) -> None:
        """Finish the open SST, if any."""
        if self._builder is not None:
            builder, self._builder = self._builder, None
            self.infos.append(builder.finish())
            self.metas.append(builder.meta)

    def __enter__(self) -> SstableOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.cut()
        elif self._builder is not None:
            self._builder.abort()
            self._builder = None


def build_sstable(entries, sst_id: int = 0, options: SstableBuilderOptions | None = None):
    """Build an SST in memory from ``(full_key, value_or_None)`` pairs; return ``(bytes, info)``."""
    builder = SstableBuilder(sst_id, options)
    for full_key, value in entries:
        builder.add(full_key, value)
    info = builder.finish()
    return builder.sink.getvalue(), info
