"""Virtual nodes: which of the 256 vnodes a row belongs to, and the set a table instance owns.

Job: ``vnode = XXH64(memcomparable(distribution key values, all ASC), seed 0) mod 256``. The
distribution key is encoded with :mod:`relational.memcomparable` in ascending order, NULLS LAST
(whatever the table's pk orders are), because that encoding is canonical: values that compare
equal (``-0.0`` and ``0.0``, ``1.0`` and ``1.00``, equal intervals, every NaN) get equal bytes
and so the same vnode. A table without a distribution key (a singleton) puts every row in
vnode 0. Layout and golden values: docs/relational.md; ``tests/test_vnode.py`` pins them.

Invariants: the hash is stable across processes, platforms and versions (not Python's
``hash``); :func:`compute_vnodes` over columns equals :func:`compute_vnode` row by row;
vnodes are ``0 <= v < VNODE_COUNT``. :class:`Bitmap` is an immutable set of vnodes.

Callers: state and storage tables, executors that route rows (the stream layer).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hummock import _twins
from relational import memcomparable
from relational.arrow import as_arrow, to_pylist
from relational.errors import SchemaError

_impl = _twins.load("_vnode", "relational._vnode_py")

#: Part of the storage format: never change (keys start with the vnode as u16 big-endian).
VNODE_COUNT = 256
VNODE_SEED = 0
VNODE_BYTES = 2
SINGLETON_VNODE = 0

hash_bytes = _impl.hash_bytes
hash_list = _impl.hash_list
hash_offsets = _impl.hash_offsets
#: ``key_with_vnode(head, tail=b"", seed=0, count=256)``: ``u16be(XXH64(head) % count) || head
#: || tail`` in one native call (the single-row key path of a distribution key that is a pk prefix)
key_with_vnode = _impl.key_with_vnode
#: ``keys_with_vnodes(keys, hashed=None, seed=0, count=256)``: ``[u16be(XXH64(hashed[i]) % count)
#: || keys[i] ...]`` in one native call (``hashed`` None: the keys themselves; the batch key path)
keys_with_vnodes = _impl.keys_with_vnodes


def _asc(types):
    return [memcomparable.OrderType.ASC] * len(types)


def compute_vnode(dist_values, dist_types) -> int:
    """The vnode of one row given the values of its distribution key columns (in key order).

    An empty distribution key gives :data:`SINGLETON_VNODE`. Raises the encoders' typed errors
    for values that do not fit their types.
    """
    if not dist_types:
        return SINGLETON_VNODE
    key = memcomparable.encode_row(dist_values, dist_types, _asc(dist_types))
    return _impl.hash_bytes(key, VNODE_SEED) % VNODE_COUNT


def _binary_offsets(array: pa.Array):
    """(int64 offsets of n + 1 entries, data buffer) of a binary/large_binary Arrow array."""
    if array.null_count:
        raise SchemaError("encoded keys cannot be NULL")
    _, offsets, data = array.buffers()
    dtype = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    off = np.frombuffer(offsets, dtype=dtype)[array.offset:array.offset + len(array) + 1]
    return off.astype(np.int64, copy=False), (data if data is not None else b"")


def compute_vnodes(columns, dist_types, num_rows: int | None = None) -> np.ndarray:
    """Vnodes of many rows at once: ``columns`` are the distribution key columns (Arrow arrays,
    numpy arrays or sequences). Returns a ``numpy.uint16`` array, equal to :func:`compute_vnode`
    row by row. ``num_rows`` is needed only when there are no columns (singleton tables)."""
    dist_types = list(dist_types)
    if not dist_types:
        if num_rows is None:
            raise SchemaError("num_rows is required for a table without a distribution key")
        return np.zeros(num_rows, dtype=np.uint16)
    if len(dist_types) == 1 and memcomparable.vectorizable(dist_types[0]):
        # one fixed-width column (most distribution keys): its byte matrix hashed row by row,
        # without building the keys as an Arrow binary array (4x less per call)
        matrix, keep = memcomparable.fixed_matrix(as_arrow(columns[0], dist_types[0]), dist_types[0], None)
        if keep is None:
            n, width = matrix.shape
            hashes = _impl.hash_offsets(np.arange(0, n * width + 1, width, dtype=np.int64), matrix.reshape(-1),
                                        VNODE_SEED)
            return (hashes % np.uint64(VNODE_COUNT)).astype(np.uint16)
    if all(memcomparable.vectorizable(t) for t in dist_types):
        columns = [as_arrow(c, t) for c, t in zip(columns, dist_types)]
        keys = memcomparable.encode_columns(columns, dist_types, _asc(dist_types))
        offsets, data = _binary_offsets(keys)
        hashes = _impl.hash_offsets(offsets, data, VNODE_SEED)
    else:
        values = [to_pylist(c, t) for c, t in zip(columns, dist_types)]
        keys = memcomparable.encode_rows(list(zip(*values)), dist_types, _asc(dist_types))
        hashes = _impl.hash_list(keys, VNODE_SEED)
    return (hashes % np.uint64(VNODE_COUNT)).astype(np.uint16)


def vnode_prefix(vnode: int) -> bytes:
    """The 2-byte big-endian prefix every table key of ``vnode`` starts with."""
    return vnode.to_bytes(VNODE_BYTES, "big")


_FULL: dict = {}   # Bitmap.full()'s instance, per class


class Bitmap:
    """An immutable set of vnodes (``0 <= v < 256``): the vnodes one table instance owns.

    Build with ``Bitmap(iterable_of_vnodes)``, :meth:`full`, :meth:`from_range` or
    :meth:`from_bytes`. ``v in bitmap``, ``iter(bitmap)`` (ascending), ``len(bitmap)``,
    ``bitmap.mask`` (a read-only numpy bool array of 256 entries, for vectorized checks).
    """

    __slots__ = ("_mask", "_vnodes")

    def __init__(self, vnodes=()):
        mask = np.zeros(VNODE_COUNT, dtype=bool)
        for v in vnodes:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < VNODE_COUNT:
                raise SchemaError(f"vnode must be an int in [0, {VNODE_COUNT}), got {v!r}")
            mask[int(v)] = True
        mask.flags.writeable = False
        self._mask = mask
        self._vnodes = tuple(int(v) for v in np.flatnonzero(mask))

    @classmethod
    def full(cls) -> Bitmap:
        """Every vnode: one shared instance (a bitmap is immutable), as every table without a
        vnode split asks for it -- each query's StorageTable, each StateTable -- and building
        it checks 256 ints (~0.5 ms, a third of a small SELECT)."""
        full = _FULL.get(cls)
        if full is None:
            full = _FULL[cls] = cls(range(VNODE_COUNT))
        return full

    @classmethod
    def from_range(cls, start: int, stop: int) -> Bitmap:
        return cls(range(start, stop))

    @classmethod
    def from_bytes(cls, data: bytes) -> Bitmap:
        """Inverse of :meth:`to_bytes` (32 bytes, bit ``v`` = byte ``v // 8``, bit ``v % 8``)."""
        if len(data) != VNODE_COUNT // 8:
            raise SchemaError(f"a vnode bitmap is {VNODE_COUNT // 8} bytes, got {len(data)}")
        bits = np.unpackbits(np.frombuffer(bytes(data), dtype=np.uint8), bitorder="little")
        return cls(np.flatnonzero(bits).tolist())

    def to_bytes(self) -> bytes:
        return np.packbits(self._mask, bitorder="little").tobytes()

    @property
    def mask(self) -> np.ndarray:
        return self._mask

    def is_full(self) -> bool:
        return len(self._vnodes) == VNODE_COUNT

    def __contains__(self, vnode) -> bool:
        return 0 <= vnode < VNODE_COUNT and bool(self._mask[vnode])

    def __iter__(self):
        return iter(self._vnodes)

    def __len__(self) -> int:
        return len(self._vnodes)

    def __eq__(self, other) -> bool:
        return isinstance(other, Bitmap) and self._vnodes == other._vnodes

    def __hash__(self) -> int:
        return hash(self._vnodes)

    def __and__(self, other: Bitmap) -> Bitmap:
        return Bitmap(np.flatnonzero(self._mask & other._mask).tolist())

    def __or__(self, other: Bitmap) -> Bitmap:
        return Bitmap(np.flatnonzero(self._mask | other._mask).tolist())

    def __repr__(self) -> str:
        if self.is_full():
            return "Bitmap.full()"
        return f"Bitmap({list(self._vnodes)!r})"
