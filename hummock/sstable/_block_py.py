"""Pure-Python twin of ``native/_block.pyx``: the block builder and block iterator.

Builds and reads the *content* of a data block (docs/format.md section 4.1): prefix-compressed
entries, restart offsets, restart count. Compression and checksums of the stored block are done
once for both implementations in :mod:`hummock.sstable.block`.

Keys are full keys (``hummock.key``) and are ordered by the full-key comparator (user key
ascending, then epoch descending). Values are stored tagged (``hummock.value``).
Callers: :mod:`hummock.sstable.block` only.
"""

from __future__ import annotations

import array
import bisect
import struct

import numpy as np
from xxhash import xxh64_intdigest

from hummock._key_py import compare_full_keys
from hummock.errors import CorruptionError, InvalidArgumentError

# part of the on-disk format, do not change (mirrored in native/_block.pyx and hummock/key.py)
_EPOCH_LEN = 8
_MIN_FULL_KEY_LEN = 12
_MAX_EPOCH = (1 << 64) - 1
_TAG_PUT = b"\x01"
_TAG_DELETE = b"\x02"
_TAG_LEN = struct.Struct("<BI")       # a stored block's compression tag and content length (format 4.2)
_U64 = struct.Struct("<Q")            # ... and its xxh64, seed 0, of everything before it
_MAX_STORED_CONTENT = 1 << 30         # MAX_BLOCK_CONTENT, part of the format
_U32 = struct.Struct("<I")
_HASH_SEED = 0x48554D4D4F434B00   # the filters' key-hash seed (hummock/sstable/_filter_py.py)


def _put_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _check_prefix_lens(prefix_lens) -> dict:
    """``BlockBuilder``'s ``prefix_lens``: None or a dict of table id -> length in [1, 65535]."""
    if prefix_lens is None:
        return {}
    if type(prefix_lens) is not dict:
        raise InvalidArgumentError(f"prefix_lens must be a dict, got {type(prefix_lens).__name__}")
    for table_id, n in prefix_lens.items():
        if type(table_id) is not int or not 0 <= table_id <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"prefix_lens: bad table id {table_id!r}")
        if type(n) is not int or not 1 <= n <= 0xFFFF:
            raise InvalidArgumentError(f"prefix_lens: bad prefix length {n!r} of table {table_id}")
    return prefix_lens


def _check_key(full_key) -> bytes:
    if not isinstance(full_key, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"full key must be bytes, got {type(full_key).__name__}")
    full_key = bytes(full_key)
    if len(full_key) < _MIN_FULL_KEY_LEN:
        raise InvalidArgumentError(f"full key of {len(full_key)} bytes is shorter than {_MIN_FULL_KEY_LEN}")
    return full_key


class BlockBuilder:
    """Accumulates entries of one block at a time, plus SST-wide accounting across blocks.

    REQUIRES: keys added in strictly increasing full-key order across the whole SST.
    ``add`` returns False (adding nothing) when the key's table id differs from the current
    non-empty block's: the caller cuts the block (``finish_block``) and adds again.

    For the SST's filters the builder keeps hashes, not keys (8 bytes a key where a key object
    took ~60): ``key_hashes``, the filter hash (``filter.key_hash``) of each distinct user key,
    and, for tables with a length in ``prefix_lens`` (table id -> bytes of table key),
    ``prefix_hashes``, the hash of each distinct such prefix -- ``filter.prefix_hashes`` of the
    user keys -- both ``array.array('Q')`` in the order added.
    """

    def __init__(self, restart_interval: int = 16, prefix_lens: dict | None = None):
        if not isinstance(restart_interval, int) or not 1 <= restart_interval <= 65536:
            raise InvalidArgumentError(f"restart_interval must be in [1, 65536], got {restart_interval!r}")
        self._prefix_lens = _check_prefix_lens(prefix_lens)
        self._prefix_len = None      # the current table's declared prefix length
        self._prefix_last = None     # the key whose prefix was hashed last
        self.restart_interval = restart_interval
        self._reset_block()
        # SST-wide accounting
        self.key_count = 0
        self.tombstone_count = 0
        self.min_epoch = None
        self.max_epoch = None
        self.smallest_key = None
        self.last_key = None
        self.key_hashes = array.array("Q")      # filter hash of each distinct user key, in order
        self.prefix_hashes = array.array("Q")   # ... of each distinct declared prefix (below)
        self.table_ids = []
        self._live = []                         # per table id: user keys whose newest version is a put

    @property
    def live_counts(self) -> list:
        """Per table id (in ``table_ids``' order), how many of the user keys added have a put
        as their newest version in this SST: the rows a read at or above ``max_epoch`` sees of
        that table here (keys come newest version first, so a user key's first entry decides)."""
        return list(self._live)

    @property
    def block_size_estimate(self) -> int:
        return len(self._buf) + 4 * len(self._restarts) + 4

    def add(self, full_key, value) -> bool:
        """Add a put (``value`` bytes) or a delete (``value is None``)."""
        if value is None:
            return self._add(full_key, _TAG_DELETE, b"")
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"value must be bytes or None, got {type(value).__name__}")
        return self._add(full_key, _TAG_PUT, bytes(value))

    def add_batch(self, keys: list, values: list, start: int, block_size: int) -> int:
        """Add ``keys[i], values[i]`` from ``start`` as :meth:`add` would, stopping before an
        entry of another table id or after the entry that brings the block estimate to
        ``block_size``; return the index of the first entry not added."""
        if len(values) != len(keys):
            raise InvalidArgumentError("keys and values differ in length")
        i = start
        while i < len(keys):
            if not self.add(keys[i], values[i]):
                return i
            i += 1
            if self.block_size_estimate >= block_size:
                return i
        return i

    def add_packed(self, prefix: bytes, epoch: int, keys: bytes, width: int, values: bytes, offsets,
                   start: int, block_size: int) -> int:
        """Add the puts of a packed batch (``hummock.packed_batch.PackedColumns``) from entry
        ``start`` as :meth:`add_batch` would: entry ``i``'s full key is ``prefix`` (the 4-byte
        table id) + ``keys[i*width:(i+1)*width]`` + the inverted ``epoch`` (big-endian), its
        value ``values[offsets[i]:offsets[i+1]]``. Raises ``InvalidArgumentError`` for a prefix
        that is not 4 bytes, key bytes that are not whole keys, not ``n + 1`` offsets, a
        ``start`` outside ``[0, n]`` or a value span outside ``values`` (checked as reached),
        and first for ``offsets`` not a 1-D numpy int64 array or an epoch not in ``[0, 2**64)``."""
        if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
            raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array")
        if type(epoch) is not int or not 0 <= epoch <= _MAX_EPOCH:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r:.40}")
        if len(prefix) != 4:
            raise InvalidArgumentError("prefix must be the 4-byte table id")
        if width < 1 or len(keys) % width:
            raise InvalidArgumentError(f"{len(keys)} key bytes are not keys of {width} bytes")
        n = len(keys) // width
        if len(offsets) != n + 1:
            raise InvalidArgumentError(f"{len(offsets)} value offsets for {n} keys")
        if not 0 <= start <= n:
            raise InvalidArgumentError(f"start {start} outside [0, {n}]")
        suffix = (_MAX_EPOCH - epoch).to_bytes(8, "big")
        i = start
        while i < n:
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            if lo < 0 or hi < lo or hi > len(values):
                raise InvalidArgumentError(f"value {i} spans [{lo}, {hi}), outside [0, {len(values)}]")
            if not self.add(prefix + keys[i * width:(i + 1) * width] + suffix, values[lo:hi]):
                return i
            i += 1
            if self.block_size_estimate >= block_size:
                return i
        return i

    def add_tagged(self, full_key, tagged_value) -> bool:
        """Add a value that already carries its tag byte (as read from another SST)."""
        if not isinstance(tagged_value, (bytes, bytearray, memoryview)):
            raise InvalidArgumentError(f"tagged value must be bytes, got {type(tagged_value).__name__}")
        tagged_value = bytes(tagged_value)
        if not tagged_value or tagged_value[:1] not in (_TAG_PUT, _TAG_DELETE) or \
                (tagged_value[:1] == _TAG_DELETE and len(tagged_value) != 1):
            raise InvalidArgumentError("tagged value must be 0x01+payload or a lone 0x02")
        return self._add(full_key, tagged_value[:1], tagged_value[1:])

    def _add(self, full_key, tag: bytes, payload: bytes) -> bool:
        full_key = _check_key(full_key)
        table = full_key[:4]
        if self.block_entry_count and table != self._block_table:
            return False
        if self.last_key is not None and compare_full_keys(self.last_key, full_key) >= 0:
            raise InvalidArgumentError("keys must be added in strictly increasing full-key order")
        if self._counter >= self.restart_interval:
            self._restarts.append(len(self._buf))
            self._counter = 0
            shared = 0
        else:
            shared = _common_prefix(self._block_last, full_key)
        if not self.block_entry_count:
            self._block_table = table
            self.block_first_key = full_key
        _put_varint(self._buf, shared)
        _put_varint(self._buf, len(full_key) - shared)
        _put_varint(self._buf, 1 + len(payload))
        self._buf += full_key[shared:]
        self._buf += tag
        self._buf += payload
        self._counter += 1
        self._block_last = full_key
        self.block_entry_count += 1
        self._account(full_key, tag)
        return True

    def _account(self, full_key: bytes, tag: bytes) -> None:
        user_key = full_key[:-_EPOCH_LEN]
        new_user_key = self.last_key is None or self.last_key[:-_EPOCH_LEN] != user_key
        if new_user_key:
            self.key_hashes.append(xxh64_intdigest(user_key, _HASH_SEED))
        table_id = int.from_bytes(full_key[:4], "big")
        if not self.table_ids or self.table_ids[-1] != table_id:
            self.table_ids.append(table_id)
            self._live.append(0)
            self._prefix_len = self._prefix_lens.get(table_id)
            self._prefix_last = None
        n = self._prefix_len   # filter.prefix_hashes of the distinct user keys, as they come
        if n is not None and len(user_key) >= 4 + n and (
                self._prefix_last is None or self._prefix_last[:4 + n] != user_key[:4 + n]):
            self.prefix_hashes.append(xxh64_intdigest(user_key[:4 + n], _HASH_SEED))
            self._prefix_last = user_key
        epoch = _MAX_EPOCH - int.from_bytes(full_key[-_EPOCH_LEN:], "big")
        self.min_epoch = epoch if self.min_epoch is None else min(self.min_epoch, epoch)
        self.max_epoch = epoch if self.max_epoch is None else max(self.max_epoch, epoch)
        if self.smallest_key is None:
            self.smallest_key = full_key
        if new_user_key and tag != _TAG_DELETE:
            self._live[-1] += 1
        self.last_key = full_key
        self.key_count += 1
        if tag == _TAG_DELETE:
            self.tombstone_count += 1

    def finish_block(self) -> bytes:
        """The finished block content; resets the block (not the SST-wide accounting).

        REQUIRES: at least one entry in the block."""
        if not self.block_entry_count:
            raise InvalidArgumentError("finish_block on an empty block")
        out = self._buf
        for offset in self._restarts:
            out += _U32.pack(offset)
        out += _U32.pack(len(self._restarts))
        content = bytes(out)
        self._reset_block()
        return content

    def finish_stored_block(self) -> tuple[bytes, int]:
        """``(stored, content_len)``: the finished block stored without compression, the bytes
        ``encode_stored_block(self.finish_block(), COMPRESSION_NONE)`` gives (docs/format.md
        4.2; the native twin makes them with one copy); resets the block."""
        content = self.finish_block()
        if len(content) > _MAX_STORED_CONTENT:
            raise InvalidArgumentError(f"block content of {len(content)} bytes exceeds {_MAX_STORED_CONTENT}")
        head = content + _TAG_LEN.pack(0, len(content))
        return head + _U64.pack(xxh64_intdigest(head, 0)), len(content)

    def _reset_block(self) -> None:
        self._buf = bytearray()
        self._restarts = [0]
        self._counter = 0
        self._block_last = b""
        self._block_table = None
        self.block_first_key = None
        self.block_entry_count = 0


class BlockIterator:
    """Iterates the entries of one block content. Decodes "Decodes blocks built by BlockBuilder".

    Position contract (as LevelDB's ``Iterator``): after a ``seek*``/``next``/``prev`` the
    iterator is either valid (``key()``/``value()`` return the entry) or invalid (past either
    end). ``key()`` and ``value()`` return new ``bytes`` objects that stay valid forever.
    Malformed content raises :class:`CorruptionError` when the bad bytes are reached (the trailer
    is checked at construction); an iterator that raised is left invalid, whatever it was
    positioned on before (so both twins agree on every later call).

    ``prev()`` decodes the restart interval before the current entry once and keeps its entries,
    so walking back through an interval of k entries decodes each of them once (linear, not
    k*(k+1)/2 entries). ``decoded`` counts the entries this iterator has decoded (a work count
    for tests; the twins count alike for moves, not for seeks: the native seek compares restart
    keys in place).
    """

    def __init__(self, content, object: str | None = None):
        block = content if isinstance(content, Block) else Block(content, object)
        self._data = block.content
        self._object = block.object if object is None else object
        self._limit = block.limit
        self._restarts = block.restarts
        self._current = self._limit   # offset of the current entry; == limit means invalid
        self._next = self._limit
        self._key = b""
        self._value_start = self._value_end = 0
        self._prev_entries = []   # (offset, key, value_start, value_end, next) of one restart interval
        self._prev_at = -1        # the entry of _prev_entries the iterator was put on by prev()
        self.decoded = 0

    def _corrupt(self, message, offset, expected=None, found=None):
        """The error to raise; leaves the iterator invalid first."""
        self._invalidate()
        return CorruptionError(message, object=self._object or "block", offset=offset, expected=expected, found=found)

    def _varint(self, pos: int):
        result = shift = 0
        for i in range(5):
            if pos >= self._limit:
                raise self._corrupt("truncated varint", pos)
            byte = self._data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    raise self._corrupt("varint exceeds 32 bits", pos - 1 - i)
                return result, pos
            shift += 7
        raise self._corrupt("varint longer than 5 bytes", pos - 5)

    def _parse(self, offset: int, previous_key: bytes):
        """Decode the entry at ``offset`` given the previous key; position on it."""
        shared, pos = self._varint(offset)
        unshared, pos = self._varint(pos)
        value_len, pos = self._varint(pos)
        if shared > len(previous_key):
            raise self._corrupt("shared prefix longer than the previous key", offset, f"<= {len(previous_key)}", shared)
        if unshared > self._limit - pos or value_len > self._limit - pos - unshared:
            raise self._corrupt("entry overruns the block", offset, f"<= {self._limit - pos}", unshared + value_len)
        key = previous_key[:shared] + self._data[pos:pos + unshared]
        if len(key) < _MIN_FULL_KEY_LEN:
            raise self._corrupt("key shorter than a full key", offset, f">= {_MIN_FULL_KEY_LEN}", len(key))
        self.decoded += 1
        self._current = offset
        self._key = key
        self._value_start = pos + unshared
        self._value_end = self._value_start + value_len
        self._next = self._value_end

    def _restart_key(self, index: int) -> bytes:
        offset = self._restarts[index]
        shared, pos = self._varint(offset)
        if shared != 0:
            raise self._corrupt("restart entry with a shared prefix", offset, 0, shared)
        self._parse(offset, b"")
        return self._key

    def is_valid(self) -> bool:
        return self._current < self._limit

    def key(self) -> bytes:
        assert self.is_valid(), "key() on an invalid iterator"
        return self._key

    def value(self) -> bytes:
        assert self.is_valid(), "value() on an invalid iterator"
        return self._data[self._value_start:self._value_end]

    def _invalidate(self) -> None:
        self._current = self._next = self._limit
        self._key = b""
        self._value_start = self._value_end = 0

    def seek_to_first(self) -> None:
        self._parse(0, b"")

    def seek_to_last(self) -> None:
        self._restart_key(len(self._restarts) - 1)
        while self._next < self._limit:
            self._parse(self._next, self._key)

    def next(self) -> None:
        assert self.is_valid(), "next() on an invalid iterator"
        if self._next >= self._limit:
            self._invalidate()
        else:
            self._parse(self._next, self._key)

    def prev(self) -> None:
        assert self.is_valid(), "prev() on an invalid iterator"
        target = self._current
        entries, at = self._prev_entries, self._prev_at
        if 0 < at < len(entries) and entries[at][0] == target:   # still in the decoded interval
            self._prev_at = at - 1
            self._current, self._key, self._value_start, self._value_end, self._next = entries[at - 1]
            return
        self._prev_at = -1
        index = bisect.bisect_left(self._restarts, target) - 1   # restarts increase (checked)
        if index < 0:
            self._invalidate()
            return
        self._restart_key(index)
        entries = [(self._current, self._key, self._value_start, self._value_end, self._next)]
        while self._next < target:
            self._parse(self._next, self._key)
            entries.append((self._current, self._key, self._value_start, self._value_end, self._next))
        if self._next != target:
            raise self._corrupt("entries do not chain to the current entry", target)
        self._prev_entries, self._prev_at = entries, len(entries) - 1

    def seek(self, target) -> None:
        """Position on the first entry whose key is >= ``target`` (full-key order)."""
        self._seek_raw(_check_key(target))

    def _seek_raw(self, target: bytes) -> None:
        left, right = 0, len(self._restarts) - 1
        while left < right:
            mid = (left + right + 1) // 2
            if compare_full_keys(self._restart_key(mid), target) < 0:
                left = mid
            else:
                right = mid - 1
        self._restart_key(left)
        while compare_full_keys(self._key, target) < 0:
            if self._next >= self._limit:
                self._invalidate()
                return
            self._parse(self._next, self._key)

    def seek_for_prev(self, target) -> None:
        """Position on the last entry whose key is <= ``target`` (full-key order)."""
        self.seek(target)
        if not self.is_valid():
            self.seek_to_last()
        elif compare_full_keys(self._key, target) > 0:
            self.prev()

    def collect_forward(self, end=None, limit: int = -1):
        """Entries from the current one (inclusive) while ``key < end`` (all if ``end`` is None),
        at most ``limit`` of them (no limit if negative).

        Returns ``(entries, hit_bound)``: ``entries`` a list of ``(key, value)``; ``hit_bound``
        True when iteration stopped at a key >= ``end`` (the iterator is left there) rather than
        at the limit (left on the next entry) or at the end of the block (left invalid).
        """
        if end is not None:
            end = _check_key(end)
        out = []
        while self.is_valid() and limit != 0:
            limit -= 1
            if end is not None and compare_full_keys(self._key, end) >= 0:
                return out, True
            out.append((self._key, self._data[self._value_start:self._value_end]))
            self.next()
        return out, False

    def collect_backward(self, start=None):
        """Entries from the current one (inclusive) backwards while ``key >= start``, newest
        position first (descending order). Returns ``(entries, hit_bound)``: ``hit_bound`` True
        when entries before the first returned one exist in this block but are ``< start`` (so
        earlier blocks hold nothing >= ``start`` either). Leaves the iterator invalid.

        REQUIRES: a valid iterator.
        """
        assert self.is_valid(), "collect_backward() on an invalid iterator"
        target = self._current
        hit_bound = False
        if start is None:
            self.seek_to_first()
        else:
            self.seek(start)
            if not self.is_valid() or self._current > target:
                self._invalidate()
                return [], True
            hit_bound = self._current > 0
        out = []
        while self.is_valid() and self._current <= target:
            out.append((self._key, self._data[self._value_start:self._value_end]))
            self.next()
        self._invalidate()
        out.reverse()
        return out, hit_bound


class Block:
    """A block content whose trailer and restart array were checked once; what the block cache
    holds. Iterators made from it skip the checks; :meth:`get` is a point lookup."""

    def __init__(self, content, object: str | None = None):
        self.content = bytes(content)
        self.object = object
        data = self.content
        n = len(data)
        if n < 4:
            raise self._corrupt("block shorter than its trailer", 0, ">= 4 bytes", n)
        num = _U32.unpack_from(data, n - 4)[0]
        if num == 0 or num > (n - 4) // 4:
            raise self._corrupt("bad restart count", n - 4, f"1..{(n - 4) // 4}", num)
        self.limit = n - 4 - 4 * num
        self.restarts = [_U32.unpack_from(data, self.limit + 4 * i)[0] for i in range(num)]
        previous = -1
        for i, offset in enumerate(self.restarts):
            if offset <= previous or offset >= self.limit or (i == 0 and offset != 0):
                raise self._corrupt("bad restart offset", self.limit + 4 * i, f"increasing, < {self.limit}", offset)
            previous = offset

    def _corrupt(self, message, offset, expected=None, found=None):
        return CorruptionError(message, object=self.object or "block", offset=offset, expected=expected, found=found)

    def __len__(self):
        return len(self.content)

    def iterator(self, object=None):
        return BlockIterator(self, object)

    def get(self, user_key, epoch):
        """Point lookup; see the native twin: ``(version_epoch, value_or_None)``, ``None`` (another
        user key), or ``False`` (the block ends first: look at the next block)."""
        user_key = bytes(user_key)
        it = BlockIterator(self)
        it._seek_raw(user_key + (_MAX_EPOCH - _as_epoch(epoch)).to_bytes(_EPOCH_LEN, "big"))
        if not it.is_valid():
            return False
        return _entry_version(it, user_key)

    def first_version(self, user_key):
        it = BlockIterator(self)
        it.seek_to_first()
        return _entry_version(it, bytes(user_key))


def _entry_version(it: BlockIterator, user_key: bytes):
    key = it._key
    if len(key) != len(user_key) + _EPOCH_LEN or key[:-_EPOCH_LEN] != user_key:
        return None
    version = _MAX_EPOCH - int.from_bytes(key[-_EPOCH_LEN:], "big")
    value = it.value()
    if value[:1] == _TAG_PUT:
        return version, value[1:]
    if value == _TAG_DELETE:
        return version, None
    raise it._corrupt("bad value tag", it._value_start, "0x01 or lone 0x02", value[:2].hex())


def _first_key(first_keys, index: int) -> bytes:
    """``first_keys[index]`` as bytes of a full key, checked before it is compared."""
    key = first_keys[index]
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"first key {index} must be bytes, got {type(key).__name__}")
    key = bytes(key)
    if len(key) < _MIN_FULL_KEY_LEN:
        raise InvalidArgumentError(f"first key {index} of {len(key)} bytes is shorter than {_MIN_FULL_KEY_LEN}")
    return key


def find_block(first_keys, full_key) -> int:
    """Index of the last block whose first key is <= ``full_key`` in full-key order (0 if none).

    ``first_keys``: a list or tuple of full keys in order (the ones the search compares are
    checked: ``InvalidArgumentError`` for a non-bytes or short one)."""
    full_key = _check_key(full_key)
    if type(first_keys) is not list and type(first_keys) is not tuple:
        raise InvalidArgumentError(f"first keys must be a list or tuple, got {type(first_keys).__name__}")
    lo, hi = 0, len(first_keys)
    while lo < hi:
        mid = (lo + hi) // 2
        if compare_full_keys(_first_key(first_keys, mid), full_key) <= 0:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1 if lo > 0 else 0


def find_block_for_version(first_keys, user_key, epoch) -> int:
    """:func:`find_block` for the full key ``user_key || inverted(epoch)``."""
    if not isinstance(user_key, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"user key must be bytes, got {type(user_key).__name__}")
    return find_block(first_keys, bytes(user_key) + (_MAX_EPOCH - _as_epoch(epoch)).to_bytes(_EPOCH_LEN, "big"))


def _as_epoch(epoch) -> int:
    if type(epoch) is not int or not 0 <= epoch <= _MAX_EPOCH:
        raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
    return epoch
