"""A HashJoin side's key filter: a Bloom filter over every join key the side has written, so
a probe of a key the side never had is answered without a state read or a known-absent entry
(stream/executors/hash_join.py). In a 1:1 join half of all probes are such keys: the first
row of a key probes the other side before its partner has come.

Keys are hashed column-wise (numpy over the chunk's Arrow key columns, splitmix64 per column,
combined in column order), so only keys whose columns are all integer-like are filtered:
SMALLINT, INT, BIGINT, DATE, TIMESTAMP, TIMESTAMPTZ (:func:`supported`); a join on other key
types has no filter (``KeyFilter`` is not built). Both sides hash alike: the join's key types
are equal pairwise (HashJoin refuses others).

Shape: a scalable, blocked Bloom filter -- a list of bit arrays (uint64 words), each new one 4x
the size of the last, four bits of one word per key; the newest takes the adds until it holds
``bits // 16`` keys (~0.5 % false positives each, full; two bits a key gave 1.6 %: in a 1:1
join of 1M keys ~2.6 % of each side's rows then were not kept as fresh rows and as many
probes of absent keys read the store). A false positive costs one read, as before.
Deletes clear nothing (a deleted key's bits only cost reads). Memory: at most ``MAX_BITS``
bits together (16 MiB: arrays of 2^20 .. 2^26 bits, 10.6 MiB for ~5.5M keys); an add beyond
that turns the filter off for good (every key is then "maybe": the join reads as without it),
so a side's filter never grows past it.

Validity: the filter answers "absent" only for keys that have no rows in the side's state
table. A fresh executor (a new job or recovery) starts it from the state: :meth:`rebuild`
hashes the join keys of every stored row once (an empty table costs one read).

Invariants (``HashJoin._check``): while on, every join key with rows in the side's table
hashes to set bits in some array. Who may call: the side owning it, on the event-loop thread.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from relational.types import TypeKind

MAX_BITS = 1 << 27         # all arrays together at most 16 MiB: 2^20..2^26 bits (~10.6 MiB, ~5.5M keys)
FIRST_BITS = 1 << 20       # the first array: 128 KiB; each next one 4x the last
BITS_PER_KEY = 16          # an array is full at bits // 16 keys (~0.5 % false positives)
_KINDS = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DATE, TypeKind.TIMESTAMP,
          TypeKind.TIMESTAMPTZ}
_C1, _C2, _C3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S12, _S6 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(12), np.uint64(6)
_S52, _S58 = np.uint64(52), np.uint64(58)
_ONE, _63 = np.uint64(1), np.uint64(63)


def supported(types) -> bool:
    """Whether join keys of these types can be filtered (module docstring)."""
    return all(t.kind in _KINDS for t in types)


def _as_int64(column) -> np.ndarray:
    """An integer-like Arrow (or numpy) column as int64 values (NULL as 0: a NULL key is
    never probed, and an extra bit only costs a read)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, np.ndarray):
        return column.astype(np.int64, copy=False)
    t = column.type
    if pa.types.is_timestamp(t):
        column = column.view(pa.int64())
    elif pa.types.is_date32(t):
        column = column.view(pa.int32())
    elif pa.types.is_date64(t):
        column = column.view(pa.int64())
    if column.null_count:
        column = column.fill_null(0)
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def hash_keys(columns) -> np.ndarray:
    """One uint64 hash per row of the key ``columns`` (splitmix64 of each column, combined)."""
    h = np.zeros(len(columns[0]), np.uint64)
    for column in columns:
        z = _as_int64(column).view(np.uint64) + h + _C1
        z = (z ^ (z >> _S30)) * _C2
        z = (z ^ (z >> _S27)) * _C3
        h = z ^ (z >> _S31)
    return h


def probe_parts(h: np.ndarray) -> tuple:
    """What :func:`_probe` needs of each hash whatever the array's size: ``(h >> 12, the key's
    four bits)``. A chunk's key hashes probe several filters (the side's own, the other
    side's; every array of each): their parts are computed once (``KeyFilter``'s ``parts``)."""
    return h >> _S12, ((_ONE << (h & _63)) | (_ONE << ((h >> _S6) & _63))
                       | (_ONE << ((h >> _S52) & _63)) | (_ONE << (h >> _S58)))


def _probe(h: np.ndarray, wmask, parts=None):
    """(word index, the key's four bits in that word) of each hash: a blocked Bloom filter,
    one memory access a key (the bits from the hash's lowest 12 and highest 12 bits; the word
    from the bits above 12, at most 2^20 words). ``parts``: :func:`probe_parts` of ``h``."""
    shifted, bits = probe_parts(h) if parts is None else parts
    return (shifted & wmask).view(np.int64), bits   # (an int64 index gathers faster than a uint64 one)


class KeyFilter:
    """A scalable, blocked Bloom filter of join-key hashes (module docstring)."""

    def __init__(self):
        self.arrays: list = []      # [words (uint64), word mask, capacity, count]
        self.on = True
        self.bits = 0
        self._grow()

    def _grow(self) -> None:
        bits = FIRST_BITS if not self.arrays else 4 * (len(self.arrays[-1][0]) << 6)
        if self.bits + bits > MAX_BITS:
            self.off()
            return
        self.bits += bits
        self.arrays.append([np.zeros(bits >> 6, np.uint64), np.uint64((bits >> 6) - 1), bits // BITS_PER_KEY, 0])

    def off(self) -> None:
        """Every key is "maybe" from now on (the memory cap)."""
        self.on = False
        self.arrays = []
        self.bits = 0

    def add(self, h: np.ndarray, parts=None) -> None:
        """Record the key hashes ``h`` (a chunk's keys; repeats are fine); ``parts``: their
        :func:`probe_parts`, when the caller has them."""
        if parts is None and self.on and len(h):
            parts = probe_parts(h)
        while self.on and len(h):
            entry = self.arrays[-1]
            room = entry[2] - entry[3]
            if room <= 0:
                self._grow()
                continue
            part, h = h[:room], h[room:]
            at, bits = _probe(part, entry[1], (parts[0][:room], parts[1][:room]))
            parts = (parts[0][room:], parts[1][room:])
            np.bitwise_or.at(entry[0], at, bits)
            entry[3] += len(part)

    def may_contain(self, h: np.ndarray, parts=None):
        """A bool array: False where the key surely has no rows; None when the filter is off
        (every key may have rows). ``parts``: :func:`probe_parts` of ``h``, when the caller
        has them."""
        if not self.on:
            return None
        out = None
        for words, wmask, _, count in self.arrays:
            if not count:
                continue
            if parts is None:
                parts = probe_parts(h)
            at, bits = _probe(h, wmask, parts)
            hit = (words[at] & bits) == bits
            out = hit if out is None else out | hit
        return np.zeros(len(h), bool) if out is None else out

    def rebuild(self, table, key_indices, batch_size: int = 65536) -> None:
        """Start from the keys of every row stored in ``table`` (a fresh executor: module
        docstring)."""
        self.__init__()
        for batch in table.iter_batches(columns=list(key_indices), batch_size=batch_size):
            if not self.on:
                return
            self.add(hash_keys(batch.columns))


class SeenFilter:
    """The keys a side read recently, by key hash (:func:`hash_keys`): the column-wise probe's
    admission test (``_Side.probe_columns``: a key read with rows is cached on its second read
    within the horizon). Two generations of a blocked Bloom filter (as :class:`KeyFilter`'s
    arrays, four bits of one word a key): the newest takes the adds until it holds ``horizon //
    2`` keys, then becomes the older one and a cleared array the newest -- so a key is
    remembered for between ``horizon // 2`` and ``horizon`` later adds (as a
    :class:`~stream.executors.join_key_set.KeySet` drops its older half). A false positive
    (about 1 % with both arrays full, less on average) admits a key on its first read: one
    cache entry more, nothing else; the test never changes what the join outputs. Memory: ``nbytes`` (2 x 16 bits a key of the horizon,
    rounded up to a power of two), charged to the budget by the side."""

    def __init__(self, horizon: int):
        self.capacity = max(512, horizon // 2)
        bits = 1 << max(10, (self.capacity * BITS_PER_KEY - 1).bit_length())
        self.arrays = [np.zeros(bits >> 6, np.uint64), np.zeros(bits >> 6, np.uint64)]   # newest, older
        self.wmask = np.uint64((bits >> 6) - 1)
        self.count = 0
        self.nbytes = 2 * (bits >> 3)

    def contains(self, h: np.ndarray) -> np.ndarray:
        """A bool array: which of the key hashes ``h`` were added within the horizon (no add)."""
        at, bits = _probe(h, self.wmask)
        return ((self.arrays[0][at] & bits) == bits) | ((self.arrays[1][at] & bits) == bits)

    def seen_then_add(self, h: np.ndarray) -> np.ndarray:
        """A bool array: which of the key hashes ``h`` (distinct) were added within the
        horizon; then adds them all (as the newest)."""
        at, bits = _probe(h, self.wmask)
        newest, older = self.arrays
        seen = ((newest[at] & bits) == bits) | ((older[at] & bits) == bits)
        if self.count + len(h) > self.capacity:   # the newest is full: it becomes the older one
            older[:] = 0
            self.arrays = [older, newest]
            newest = older
            self.count = 0
        np.bitwise_or.at(newest, at, bits)
        self.count += len(h)
        return seen
