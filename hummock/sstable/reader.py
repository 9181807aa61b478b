"""Reads SSTs written by :mod:`hummock.sstable.builder`: point gets, seeks and scans.

:class:`Sstable` is an open SST: its decoded meta (one ranged read of meta + footer when the
``SstableInfo`` is known, shared through the meta cache) and its blocks, each fetched with one
ranged read, checked (checksum, lengths) and kept in the block cache as decompressed content.

Contracts:
- ``get(user_key, epoch)`` returns the newest version of ``user_key`` with epoch <= ``epoch`` held
  by this SST as ``(version_epoch, value_or_None)`` (``None`` = tombstone), or ``None`` when the SST
  holds no such version. The filter is probed first; at most one block is read, or two when the
  versions of the key straddle a block boundary.
- ``may_contain_prefix(table_id, prefix)`` answers from the meta alone (no block read): False
  only when no key of the table here starts with ``prefix`` (the optional prefix filter).
- Iterators and scans yield full keys in full-key order (reverse for ``reverse=True``) with their
  *tagged* values (``hummock.value``). Returned bytes are owned by the caller.
- Every corruption is reported as :class:`~hummock.errors.CorruptionError` naming the object.

Thread safety: an ``Sstable`` may be shared by threads (it holds immutable data and thread-safe
caches); an ``SstableIterator`` belongs to one thread.
Callers: the engine's read path and compaction.
"""

from __future__ import annotations

from hummock.errors import CorruptionError
from hummock.key import MAX_EPOCH, compare_full_keys
from hummock.object_store import ObjectRangeError
from hummock.sstable.block import (
    Block, BlockIterator, checksum, decode_stored_block, find_block_for_version, load_file_block,
)
from hummock.sstable.cache import LruCache
from hummock.sstable.filter import FilterReader
from hummock.sstable.meta import FOOTER_SIZE, SstableInfo, SstableMeta, decode_footer, sst_object_path



def _meta_charge(meta: SstableMeta) -> int:
    return meta.size_in_memory


class Sstable:
    """An open SST. Create with :meth:`open`."""

    def __init__(self, store, sst_id: int, meta: SstableMeta, block_cache: LruCache | None = None):
        self.store = store
        self.sst_id = sst_id
        self.meta = meta
        self.path = sst_object_path(sst_id)
        self._block_cache = block_cache
        # the local file behind the SST, for the native loader (None: read through the store)
        local_file = getattr(store, "local_file", None) if load_file_block is not None else None
        self._file = local_file(self.path) if local_file is not None else None
        self._filter = FilterReader(meta.filter, object_name=self.path)
        self._may_contain = self._filter.may_contain
        self._first_keys = meta.first_keys
        # the optional prefix filter: table id -> prefix length it covers, and the filter
        self.prefix_lens = meta.prefix_lens
        self.prefix_filter = FilterReader(meta.prefix_filter, object_name=f"{self.path} prefix filter") \
            if meta.prefix_lens else None

    @classmethod
    def open(cls, store, sst: int | SstableInfo, *, meta_cache: LruCache | None = None,
             block_cache: LruCache | None = None) -> Sstable:
        """Open SST ``sst`` (an id, or the ``SstableInfo`` a version carries: one read fewer)."""
        info = sst if isinstance(sst, SstableInfo) else None
        sst_id = info.sst_id if info else sst
        if meta_cache is not None:
            meta = meta_cache.get_or_load(sst_id, lambda: cls._read_meta(store, sst_id, info), _meta_charge)
        else:
            meta = cls._read_meta(store, sst_id, info)
        return cls(store, sst_id, meta, block_cache)

    @staticmethod
    def _read_meta(store, sst_id: int, info: SstableInfo | None) -> SstableMeta:
        path = sst_object_path(sst_id)
        if info is not None:
            file_size = info.file_size
            tail = _read_exact(store, path, info.meta_offset, file_size)
            footer = tail[-FOOTER_SIZE:]
        else:
            file_size = store.size(path)
            if file_size < FOOTER_SIZE:
                raise CorruptionError("SST shorter than its footer", object=path, offset=0,
                                      expected=f">= {FOOTER_SIZE} bytes", found=file_size)
            footer = store.read(path, file_size - FOOTER_SIZE, file_size)
            tail = None
        meta_offset, meta_len, meta_sum = decode_footer(footer, object=path, file_size=file_size)
        if tail is None:
            meta_bytes = _read_exact(store, path, meta_offset, meta_offset + meta_len)
        else:
            if meta_offset != info.meta_offset:
                raise CorruptionError("meta offset differs from the SST info", object=path,
                                      offset=file_size - FOOTER_SIZE, expected=info.meta_offset, found=meta_offset)
            meta_bytes = tail[:meta_len]
        actual = checksum(meta_bytes)
        if actual != meta_sum:
            raise CorruptionError("SST meta checksum mismatch", object=path, offset=meta_offset,
                                  expected=f"{meta_sum:#018x}", found=f"{actual:#018x}")
        meta = SstableMeta.decode(meta_bytes, object=path, base_offset=meta_offset)
        _check_block_layout(meta, path, meta_offset)
        return meta

    # --- blocks ---

    def block(self, index: int) -> Block:
        """Validated, decompressed block ``index`` (through the block cache)."""
        cache = self._block_cache
        if cache is None:
            return self._load_block(index)
        key = (self.sst_id, index)
        block = cache.get(key)
        if block is None:
            block = self._load_block(index)
            cache.put(key, block, len(block))
        return block

    def _load_block(self, index: int) -> Block:
        bm = self.meta.blocks[index]
        if self._file is not None and not self.store.closed:
            # read, checked and unpacked in C without the GIL; None: anything off, and the
            # store's read below raises the canonical error (see native/_block_load.pxi)
            block = load_file_block(self._file, bm.offset, bm.stored_len, bm.content_len,
                                    f"{self.path} block {index}")
            if block is not None:
                return block
        stored = _read_exact(self.store, self.path, bm.offset, bm.offset + bm.stored_len)
        content = decode_stored_block(stored, object=self.path, offset=bm.offset, expected_content_len=bm.content_len)
        return Block(content, f"{self.path} block {index}")

    def _block_iter(self, index: int):
        return BlockIterator(self.block(index))

    @property
    def block_count(self) -> int:
        return len(self.meta.blocks)

    # --- reads ---

    def may_contain(self, user_key: bytes) -> bool:
        """False when the filter proves ``user_key`` has no version in this SST."""
        return self._filter.may_contain(user_key)

    def may_contain_prefix(self, table_id: int, prefix: bytes) -> bool:
        """False when the prefix filter proves that no key of ``table_id`` in this SST starts
        with the table-key prefix ``prefix``. Without a prefix filter for the table, or for a
        ``prefix`` shorter than the length the filter covers, the answer is True."""
        n = self.prefix_lens.get(table_id)
        if n is None or len(prefix) < n:
            return True
        return self.prefix_filter.may_contain(table_id.to_bytes(4, "big") + prefix[:n])

    def get(self, user_key: bytes, epoch: int = MAX_EPOCH):
        """Newest version of ``user_key`` at or below ``epoch``: ``(epoch, value_or_None)`` or ``None``.

        REQUIRES: ``user_key`` bytes of at least 4 bytes (the table id); ``epoch`` a u64 int.
        """
        if not self._may_contain(user_key):
            return None
        first_keys = self._first_keys
        index = find_block_for_version(first_keys, user_key, epoch)
        found = self.block(index).get(user_key, epoch)   # one cache lookup: a miss counts once
        if found is False:  # the block ended first: the versions may continue in the next block
            if index + 1 >= len(first_keys):
                return None
            return self.block(index + 1).first_version(user_key)
        return found

    def iter(self) -> SstableIterator:
        return SstableIterator(self)

    def scan(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False):
        """Yield ``(full_key, tagged_value)`` for full keys in ``[start, end)``, in order (or in
        reverse order). Bounds are full keys (``None``: unbounded)."""
        for batch in self.scan_batches(start, end, reverse=reverse):
            yield from batch

    def scan_batches(self, start: bytes | None = None, end: bytes | None = None, *, reverse: bool = False):
        """Like :meth:`scan`, but yields one list of entries per block (the read path's unit).
        A block that holds no key of ``[start, end)`` (its first keys and the next block's say
        so) is never read: damage past the range cannot fail the scan."""
        blocks = len(self.meta.blocks)
        first_keys = self.meta.first_keys
        if not reverse:
            index = self.meta.block_for(start) if start is not None else 0
            it = self._block_iter(index)
            it.seek(start) if start is not None else it.seek_to_first()
            limit = FIRST_BATCH
            while True:
                entries, hit_bound = it.collect_forward(end, limit)
                if entries:
                    yield entries
                if hit_bound:
                    return
                if it.is_valid():  # stopped at the limit: a seek-and-read-a-few stays cheap
                    limit = -1
                    continue
                index += 1
                if hit_bound or index >= blocks or (
                        end is not None and compare_full_keys(first_keys[index], end) >= 0):
                    return
                it = self._block_iter(index)
                it.seek_to_first()
        else:
            index = blocks - 1 if end is None else self.meta.block_for(end)
            if end is not None and index > 0 and compare_full_keys(first_keys[index], end) >= 0:
                index -= 1   # the block starts at the end: every key < end is in an earlier block
                end = None
            if end is None:
                it = self._block_iter(index)
                it.seek_to_last()
            else:
                it = self._block_iter(index)
                it.seek(end)
                if it.is_valid():
                    it.prev()        # last key < end
                else:
                    it.seek_to_last()
                if not it.is_valid():  # every key of this block is >= end
                    index -= 1
                    if index < 0:
                        return
                    it = self._block_iter(index)
                    it.seek_to_last()
            while True:
                entries, hit_bound = it.collect_backward(start)
                if entries:
                    yield entries
                # block index-1 holds keys below block index's first key: none >= start if that
                # first key is <= start
                if hit_bound or index == 0 or (
                        start is not None and compare_full_keys(first_keys[index], start) <= 0):
                    return
                index -= 1
                it = self._block_iter(index)
                it.seek_to_last()


#: Entries in the first batch of a forward scan: enough for a seek followed by a few nexts,
#: after which batches are whole blocks.
FIRST_BATCH = 16


def _read_exact(store, path: str, start: int, end: int) -> bytes:
    """A ranged read where a short object is corruption (an SST is never shorter than its meta
    says), not an I/O error."""
    try:
        return store.read(path, start, end)
    except ObjectRangeError as exc:
        raise CorruptionError("SST object shorter than its metadata says", object=path, offset=start,
                              expected=f"bytes [{start}, {end})", found=str(exc)) from None


def _check_block_layout(meta: SstableMeta, path: str, meta_offset: int) -> None:
    """Block metas must tile ``[0, meta_offset)`` exactly, in order, with sane first keys."""
    expected = 0
    for i, bm in enumerate(meta.blocks):
        if bm.offset != expected or bm.stored_len <= 0:
            raise CorruptionError(f"block {i} is not where the previous one ended", object=path,
                                  offset=bm.offset, expected=expected, found=bm.offset)
        if len(bm.first_key) < 12:
            raise CorruptionError(f"block {i} first key shorter than a full key", object=path,
                                  offset=bm.offset, expected=">= 12 bytes", found=len(bm.first_key))
        expected += bm.stored_len
    if expected != meta_offset:
        raise CorruptionError("blocks do not end where the meta starts", object=path, offset=meta_offset,
                              expected=meta_offset, found=expected)
    if not meta.blocks:
        raise CorruptionError("SST without blocks", object=path, offset=meta_offset)


class SstableIterator:
    """A positioned iterator over one SST (LevelDB's two-level iterator): valid or not after each
    move; ``key()`` is a full key, ``value()`` a tagged value."""

    def __init__(self, sst: Sstable):
        self._sst = sst
        self._index = -1
        self._it = None

    def _load(self, index: int) -> None:
        self._index = index
        self._it = self._sst._block_iter(index)

    def is_valid(self) -> bool:
        return self._it is not None and self._it.is_valid()

    def key(self) -> bytes:
        return self._it.key()

    def value(self) -> bytes:
        return self._it.value()

    def seek_to_first(self) -> None:
        self._load(0)
        self._it.seek_to_first()

    def seek_to_last(self) -> None:
        self._load(self._sst.block_count - 1)
        self._it.seek_to_last()

    def seek(self, full_key: bytes) -> None:
        """First entry >= ``full_key``."""
        self._load(self._sst.meta.block_for(full_key))
        self._it.seek(full_key)
        if not self._it.is_valid() and self._index + 1 < self._sst.block_count:
            self._load(self._index + 1)
            self._it.seek_to_first()

    def seek_for_prev(self, full_key: bytes) -> None:
        """Last entry <= ``full_key``."""
        self._load(self._sst.meta.block_for(full_key))
        self._it.seek_for_prev(full_key)

    def next(self) -> None:
        self._it.next()
        if not self._it.is_valid() and self._index + 1 < self._sst.block_count:
            self._load(self._index + 1)
            self._it.seek_to_first()

    def prev(self) -> None:
        self._it.prev()
        if not self._it.is_valid() and self._index > 0:
            self._load(self._index - 1)
            self._it.seek_to_last()
