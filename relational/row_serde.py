"""Row serde: how one row of a relational table becomes one key-value pair, and back.

Layout (docs/relational.md, section "Row format"; DESIGN.md section 7)::

    table key = vnode (u16 big-endian) || memcomparable(pk columns, with their order types)
    value     = value encoding (docs/format.md section 2) of the value columns, in value order

The hummock full key adds ``table_id`` in front and the epoch behind; this module never sees
them. The vnode is computed from the distribution key (:mod:`relational.vnode`), which must be
a subset of the pk so that a pk alone locates its row. ``value_indices`` defaults to every
column (the value then holds the whole row and decoding never touches the key); with a subset,
decoding rebuilds the row from the pk (decoded from the key) and the value columns, and a
column that is in neither comes back as ``None``.

Invariants: ``decode(*encode(row))`` equals the row up to the encoders' documented
normalisations (REAL to float32, TIMESTAMPTZ to UTC; pk columns outside the value also come
back in memcomparable's canonical form); ``encode_chunk`` gives exactly the bytes of
``encode`` row by row, and ``keys_of_pks`` those of ``key_of_pk`` pk by pk. Keys of one table sort like the rows' pks within a vnode.

Callers: :mod:`relational.state_table`, :mod:`relational.storage_table`.
"""

from __future__ import annotations

from operator import add, itemgetter

import numpy as np
import pyarrow as pa

from hummock import _twins
from hummock.packed_batch import PackedColumns
from relational import memcomparable, value_columns, value_encoding
from relational.arrow import as_arrow, to_pylist
from relational.errors import SchemaError
from relational.memcomparable import OrderType
from relational.types import DataType, TypeKind
from relational.vnode import (VNODE_BYTES, VNODE_COUNT, VNODE_SEED, compute_vnode, compute_vnodes, key_with_vnode,
                              keys_with_vnodes, vnode_prefix)

#: ``sorted_int_keys``: a chunk's integer-pk keys built and sorted in one call
#: (``native/_chunk_keys.pyx``, twin ``relational/_chunk_keys_py.py``)
_chunk_keys = _twins.load("_chunk_keys", "relational._chunk_keys_py")
_INT_WIDTHS = {TypeKind.SMALLINT: 2, TypeKind.INT: 4, TypeKind.BIGINT: 8}

#: the 2-byte prefix of each vnode, indexed by vnode
VNODE_PREFIXES = tuple(vnode_prefix(v) for v in range(VNODE_COUNT))
_SINGLETON_PREFIX = VNODE_PREFIXES[0]


def _check_indices(indices, n: int, what: str) -> tuple:
    out = []
    for i in indices:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < n:
            raise SchemaError(f"{what} must be column indices in [0, {n}), got {i!r}")
        out.append(int(i))
    if len(set(out)) != len(out):
        raise SchemaError(f"{what} repeat a column: {out}")
    return tuple(out)


class RowSerde:
    """Encoder/decoder of one table's rows. Immutable; safe to share between threads.

    ``types``: the column types in schema order. ``pk_indices``: the pk columns, in key order.
    ``order_types``: one :class:`OrderType` per pk column (default ASC). ``dist_key_indices``:
    the distribution key columns (each also a pk column; empty = singleton, vnode 0).
    ``value_indices``: the columns stored in the value (default all). Raises
    :class:`SchemaError` for indices that do not fit.
    """

    def __init__(self, types, pk_indices, order_types=None, dist_key_indices=(), value_indices=None):
        self.types = tuple(types)
        for t in self.types:
            if not isinstance(t, DataType):
                raise SchemaError(f"column types must be DataType, got {t!r}")
        n = len(self.types)
        self.pk_indices = _check_indices(pk_indices, n, "pk_indices")
        if order_types is None:
            order_types = [OrderType.ASC] * len(self.pk_indices)
        self.order_types = tuple(order_types)
        if len(self.order_types) != len(self.pk_indices) or not all(isinstance(o, OrderType) for o in self.order_types):
            raise SchemaError(f"need one OrderType per pk column ({len(self.pk_indices)}), got {order_types!r}")
        self.dist_key_indices = _check_indices(dist_key_indices or (), n, "dist_key_indices")
        missing = [i for i in self.dist_key_indices if i not in self.pk_indices]
        if missing:
            raise SchemaError(f"distribution key columns {missing} are not in the pk {list(self.pk_indices)}")
        self.value_indices = tuple(range(n)) if value_indices is None else _check_indices(value_indices, n, "value_indices")
        self.pk_types = tuple(self.types[i] for i in self.pk_indices)
        self.dist_types = tuple(self.types[i] for i in self.dist_key_indices)
        self.value_types = tuple(self.types[i] for i in self.value_indices)
        #: positions of the distribution key columns inside the pk
        self.dist_in_pk = tuple(self.pk_indices.index(i) for i in self.dist_key_indices)
        self.full_value = self.value_indices == tuple(range(n))
        self.pk_vectorizable = all(memcomparable.vectorizable(t) for t in self.pk_types)
        #: the value widths of an all-integer pk (``_chunk_keys``), else None
        self._int_pk_widths = (tuple(_INT_WIDTHS[t.kind] for t in self.pk_types)
                               if self.pk_types and all(t.kind in _INT_WIDTHS for t in self.pk_types) else None)
        self._pk_descending = tuple(o.descending for o in self.order_types)
        # Single-row keys: when the distribution key is the pk's first k columns, all ASC NULLS
        # LAST, its memcomparable bytes (what the vnode hashes) are the first part of the pk's,
        # so a key is one encoder call per part and one native hash-and-join call.
        k = len(self.dist_in_pk)
        self._dist_head = k if k and self.dist_in_pk == tuple(range(k)) and all(
            o == OrderType.ASC for o in self.order_types[:k]) else 0
        self._head = (self.pk_types[:k], self.order_types[:k])
        self._tail = (self.pk_types[k:], self.order_types[k:])
        # when the value is not the whole row: where each column comes from
        self._sources = None
        if not self.full_value:
            in_value = {c: j for j, c in enumerate(self.value_indices)}
            in_pk = {c: j for j, c in enumerate(self.pk_indices)}
            self._sources = tuple(("v", in_value[c]) if c in in_value else ("k", in_pk[c]) if c in in_pk
                                  else (None, 0) for c in range(n))
            self._needs_pk = any(src == "k" for src, _ in self._sources)
            self._pick = self._row_picker(len(self.pk_indices) if self._needs_pk else 0)

    def __repr__(self):
        return (f"RowSerde(types={list(self.types)!r}, pk_indices={list(self.pk_indices)}, "
                f"order_types={list(self.order_types)!r}, dist_key_indices={list(self.dist_key_indices)}, "
                f"value_indices={list(self.value_indices)})")

    # --- one row ---------------------------------------------------------------------------

    def pk_of(self, row) -> tuple:
        return tuple(row[i] for i in self.pk_indices)

    def vnode_of_pk(self, pk) -> int:
        if not self.dist_in_pk:
            return 0
        return compute_vnode([pk[i] for i in self.dist_in_pk], self.dist_types)

    def key_of_pk(self, pk) -> bytes:
        """The table key of the row with primary key ``pk`` (a tuple in pk order)."""
        n = len(pk)
        if n != len(self.pk_indices):
            raise SchemaError(f"a pk has {len(self.pk_indices)} values, got {n}: {pk!r}")
        k = self._dist_head
        if k == n and k:
            return key_with_vnode(memcomparable.encode_row(pk, self.pk_types, self.order_types), b"",
                                  VNODE_SEED, VNODE_COUNT)
        if k:
            return key_with_vnode(memcomparable.encode_row(pk[:k], *self._head),
                                  memcomparable.encode_row(pk[k:], *self._tail), VNODE_SEED, VNODE_COUNT)
        if not self.dist_in_pk:
            return _SINGLETON_PREFIX + memcomparable.encode_row(pk, self.pk_types, self.order_types)
        return VNODE_PREFIXES[self.vnode_of_pk(pk)] + memcomparable.encode_row(pk, self.pk_types, self.order_types)

    def keys_of_pks(self, pks: list) -> list:
        """``[key_of_pk(pk) for pk in pks]`` with one encoder call for all the pks (plus one for
        the distribution keys when they are not the whole pk) and one hash-and-prefix call.

        REQUIRES: every pk is a tuple or list (the caller checks; a wrong width raises
        :class:`SchemaError`, a wrong value the encoder's typed error, naming that pk)."""
        width = len(self.pk_indices)
        try:   # (the encoder checks every pk's width; the loop below only names the first bad one)
            if not self.dist_in_pk:
                return memcomparable.encode_rows(pks, self.pk_types, self.order_types, _SINGLETON_PREFIX)
            encoded = memcomparable.encode_rows(pks, self.pk_types, self.order_types)
        except SchemaError:
            for pk in pks:
                if len(pk) != width:
                    raise SchemaError(f"a pk has {width} values, got {len(pk)}: {pk!r}") from None
            raise
        if self._dist_head == width:   # the vnode hashes the pk's own bytes
            return keys_with_vnodes(encoded, None, VNODE_SEED, VNODE_COUNT)
        where = self.dist_in_pk
        dist = memcomparable.encode_rows([[pk[i] for i in where] for pk in pks], self.dist_types,
                                         [OrderType.ASC] * len(where))
        return keys_with_vnodes(encoded, dist, VNODE_SEED, VNODE_COUNT)

    def keys_of_prefixes(self, prefixes: list, width: int):
        """The table-key prefixes (vnode || memcomparable of the first ``width`` pk columns) of
        pk prefixes of ``width`` values each, in one or two encoder calls and one
        hash-and-prefix call; ``None`` when such prefixes do not cover the distribution key (their
        rows then spread over vnodes and have no one key prefix).

        REQUIRES: every prefix is a tuple or list of ``width`` values, ``1 <= width <= pk width``
        (the caller checks); a wrong value raises the encoder's typed error."""
        where = self.dist_in_pk
        if where and max(where) >= width:
            return None
        if not where:
            return memcomparable.encode_rows(prefixes, self.pk_types[:width], self.order_types[:width],
                                             _SINGLETON_PREFIX)
        encoded = memcomparable.encode_rows(prefixes, self.pk_types[:width], self.order_types[:width])
        if self._dist_head == len(where) == width:   # the vnode hashes the prefix's own bytes
            return keys_with_vnodes(encoded, None, VNODE_SEED, VNODE_COUNT)
        dist = memcomparable.encode_rows([[p[i] for i in where] for p in prefixes], self.dist_types,
                                         [OrderType.ASC] * len(where))
        return keys_with_vnodes(encoded, dist, VNODE_SEED, VNODE_COUNT)

    def encode(self, row) -> tuple[bytes, bytes]:
        """``(table key, value)`` of one row (a sequence in schema order)."""
        if len(row) != len(self.types):
            raise SchemaError(f"a row has {len(self.types)} columns, got {len(row)}: {row!r:.200}")
        return self.key_of_pk(self.pk_of(row)), self.encode_value(row)

    def encode_value(self, row) -> bytes:
        if self.full_value:
            return value_encoding.encode_row(row, self.types)
        return value_encoding.encode_row([row[i] for i in self.value_indices], self.value_types)

    def decode_pk(self, key: bytes) -> tuple:
        """The pk values of a table key (memcomparable's canonical forms)."""
        return memcomparable.decode_row(key[VNODE_BYTES:], self.pk_types, self.order_types)

    def decode(self, key: bytes, value: bytes) -> tuple:
        """The full row (schema order) of a stored pair; raises ``DecodeError`` if malformed."""
        if self.full_value:
            return value_encoding.decode_row(value, self.types)
        return self._assemble(self.decode_pk(key) if self._needs_pk else None,
                              value_encoding.decode_row(value, self.value_types))

    def decode_many(self, keys, values) -> list:
        """``[decode(k, v) ...]`` in one call per encoder."""
        if self.full_value:
            return value_encoding.decode_rows(values, self.types)
        vals = value_encoding.decode_rows(values, self.value_types)
        if self._needs_pk:
            pks = memcomparable.decode_rows(keys, self.pk_types, self.order_types, VNODE_BYTES)
        else:
            pks = None
        pick = self._pick
        if pick is False:
            return [self._assemble(p, v) for p, v in zip(pks or [None] * len(vals), vals)]
        joined = list(map(add, pks, vals)) if pks is not None else vals
        return joined if pick is None else list(map(pick, joined))

    def _int_pk_columns(self, columns, num_rows: int):
        """The pk columns of a chunk as int64 numpy arrays (range-checked as ``encode_columns``
        checks them, raising its typed errors), or ``None`` when one holds a NULL."""
        out = []
        for i, dtype in zip(self.pk_indices, self.pk_types):
            values, nulls = memcomparable.column_values(as_arrow(columns[i], dtype), dtype)
            if nulls is not None and nulls.any():
                return None
            if len(values) != num_rows:
                raise SchemaError(f"the pk columns hold {len(values)} values, expected {num_rows}")
            out.append(values.astype(np.int64, copy=False))
        return out

    def _row_picker(self, pk_width: int):
        """The function making a row (schema order) from ``pk + vals`` (``vals`` alone when
        ``pk_width`` is 0): ``None`` when that concatenation already is the row, else a C-level
        ``itemgetter``; ``False`` when some column is in neither (rows built one by one)."""
        if any(src is None for src, _ in self._sources):
            return False
        perm = tuple(j if src == "k" else pk_width + j for src, j in self._sources)
        if perm == tuple(range(pk_width + len(self.value_indices))):
            return None
        if len(perm) == 1:
            return lambda t, i=perm[0]: (t[i],)
        return itemgetter(*perm)

    def _assemble(self, pk, vals) -> tuple:
        pick = self._pick
        if pick is False:
            return tuple(vals[j] if src == "v" else pk[j] if src == "k" else None for src, j in self._sources)
        joined = pk + vals if self._needs_pk else vals
        return joined if pick is None else pick(joined)

    # --- whole chunks ----------------------------------------------------------------------

    def encode_chunk(self, columns, num_rows: int, *, sort: bool = False, return_order: bool = False):
        """Encode a chunk given all its columns (schema order; Arrow, numpy or sequences).

        Returns ``(vnodes, keys, values)``: a ``numpy.uint16`` array and two lists of bytes,
        each exactly what :meth:`encode` gives row by row. Fixed-width pk columns are encoded
        with numpy (``memcomparable.encode_columns``), Arrow/numpy value columns of simple
        types from their buffers (:mod:`relational.value_columns`), the rest with one batch
        call per encoder.
        With ``sort=True`` the three come back in key order (a stable sort: equal keys keep
        their chunk order): pks of integer columns without NULLs are keyed and sorted in one
        native call (``_chunk_keys.sorted_int_keys``), other equal-width keys (fixed-width pks
        without NULLs) sort in numpy.
        ``return_order=True`` adds a fourth item: the chunk positions in the order returned (a
        ``numpy.int64`` array), or ``None`` when unsorted.
        """
        if len(columns) != len(self.types):
            raise SchemaError(f"a chunk has {len(self.types)} columns, got {len(columns)}")
        pylists = {}

        def values_of(i, perm=None):
            """Column ``i`` as Python values, in chunk order or permuted by ``perm``."""
            if (i, perm is None) not in pylists:
                column = columns[i] if perm is None else _take(columns[i], perm, num_rows, i)
                values = to_pylist(column, self.types[i])
                if len(values) != num_rows:
                    raise SchemaError(f"column {i} has {len(values)} values, expected {num_rows}")
                pylists[i, perm is None] = values
            return pylists[i, perm is None]

        dist_cols = [columns[i] for i in self.dist_key_indices]
        vnodes = compute_vnodes(dist_cols, self.dist_types, num_rows)
        perm = None       # the order the keys were sorted in (Arrow); the value columns follow it
        order = None      # the same as a numpy array
        int_pk = self._int_pk_columns(columns, num_rows) if sort and self._int_pk_widths else None
        if int_pk is not None:   # integer pks without NULLs: keys built and sorted in one native call
            order, keys = _chunk_keys.sorted_int_keys(vnodes, int_pk, self._int_pk_widths, self._pk_descending)
            vnodes = vnodes[order]
        elif self.pk_vectorizable:
            prefix = vnodes.astype(">u2").view(np.uint8).reshape(num_rows, VNODE_BYTES)
            encoded = memcomparable.encode_columns([as_arrow(columns[i], self.types[i]) for i in self.pk_indices],
                                                   self.pk_types, self.order_types, prefix=prefix)
            if len(encoded) != num_rows:
                raise SchemaError(f"the pk columns hold {len(encoded)} values, expected {num_rows}")
            if sort:
                order = _equal_width_order(encoded)
                if order is not None:   # sort in Arrow and numpy, before anything becomes a list
                    order = order.astype(np.int64, copy=False)
                    vnodes = vnodes[order]
                    perm = pa.array(order)   # (Arrow's take converts a numpy index on every call)
                    encoded = encoded.take(perm)
            keys = encoded.to_pylist()
        else:
            pk_rows = list(zip(*[values_of(i) for i in self.pk_indices])) if self.pk_indices else [()] * num_rows
            encoded = memcomparable.encode_rows(pk_rows, self.pk_types, self.order_types)
            keys = [VNODE_PREFIXES[v] + k for v, k in zip(vnodes.tolist(), encoded)]
        if len(keys) != num_rows:
            raise SchemaError(f"the pk columns hold {len(keys)} values, expected {num_rows}")
        # the values straight from the columns' buffers, in key order, when they allow it ...
        values = value_columns.encode_columns([columns[i] for i in self.value_indices], self.value_types,
                                              num_rows, order) if self.value_indices else None
        if values is None:   # ... else through Python values, taken in key order when sorted above
            if order is not None and perm is None:
                perm = pa.array(order)
            value_rows = (list(zip(*[values_of(i, perm) for i in self.value_indices])) if self.value_indices
                          else [()] * num_rows)
            values = value_encoding.encode_rows(value_rows, self.value_types)
        if sort and order is None:   # not sorted above
            positions = sorted(range(num_rows), key=keys.__getitem__)
            keys = list(map(keys.__getitem__, positions))
            values = list(map(values.__getitem__, positions))
            order = np.array(positions, dtype=np.int64)
            vnodes = vnodes[order] if num_rows else vnodes
        if return_order:
            return vnodes, keys, values, order
        return vnodes, keys, values


    def encode_chunk_packed(self, columns, num_rows: int):
        """The packed insert path's :meth:`encode_chunk` (``sort=True``) of a chunk whose pk
        columns are all integers without NULLs and whose value columns are all ones
        :mod:`relational.value_columns` encodes from buffers: ``(vnodes, batch, distinct)``
        with ``vnodes`` in key order, ``batch`` a ``hummock.packed_batch.PackedColumns`` of
        the same keys and values :meth:`encode_chunk` gives (its ``lists()`` equal them, byte
        for byte) and ``distinct`` whether no pk repeats. ``None`` for any other chunk (or no
        rows, or a table storing no value columns); nothing is encoded twice then beyond the
        pk check."""
        if num_rows == 0 or self._int_pk_widths is None or not self.value_indices:
            return None
        if len(columns) != len(self.types):
            raise SchemaError(f"a chunk has {len(self.types)} columns, got {len(columns)}")
        described = value_columns.describe_columns([columns[i] for i in self.value_indices], self.value_types,
                                                   num_rows)
        if described is None:
            return None
        int_pk = self._int_pk_columns(columns, num_rows)
        if int_pk is None:
            return None
        vnodes = compute_vnodes([columns[i] for i in self.dist_key_indices], self.dist_types, num_rows)
        order, keys, width, distinct = _chunk_keys.sorted_int_key_buffer(vnodes, int_pk, self._int_pk_widths,
                                                                        self._pk_descending)
        data, offsets = value_columns.encode_described(described, num_rows, order)
        return vnodes[order], PackedColumns(keys, width, data, offsets), distinct


def _take(column, perm: pa.Array, num_rows: int, i: int):
    """``column`` (Arrow, numpy or a sequence of ``num_rows`` values) reordered by ``perm``
    (an Arrow integer array)."""
    if not isinstance(column, (pa.Array, pa.ChunkedArray, np.ndarray)):
        column = list(column)
    if len(column) != num_rows:
        raise SchemaError(f"column {i} has {len(column)} values, expected {num_rows}")
    if isinstance(column, list):
        return list(map(column.__getitem__, perm.to_pylist()))
    return column.take(perm) if not isinstance(column, np.ndarray) else column[perm.to_numpy()]


def _equal_width_order(keys: pa.Array):
    """The stable sorting permutation of a binary array whose entries all have one width > 0,
    or ``None`` for other arrays. The keys are cut into big-endian 8-byte words (zero-padded
    at the end, which keeps the order of equal-width keys) and sorted with ``numpy.lexsort``
    on the words as unsigned ints: bytewise order, several times faster than comparing
    ``S<width>`` items."""
    n = len(keys)
    if n == 0 or keys.null_count:
        return None
    _, offsets, data = keys.buffers()
    dtype = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    off = np.frombuffer(offsets, dtype=dtype)[keys.offset:keys.offset + n + 1]
    width = int(off[1] - off[0])
    if width <= 0 or int(off[-1] - off[0]) != n * width or (np.diff(off) != width).any():
        return None
    matrix = np.frombuffer(data, dtype=np.uint8, count=n * width, offset=int(off[0])).reshape(n, width)
    words = -(-width // 8)
    if words * 8 != width:
        padded = np.zeros((n, words * 8), dtype=np.uint8)
        padded[:, :width] = matrix
        matrix = padded
    else:
        matrix = np.ascontiguousarray(matrix)
    columns = matrix.view(">u8").astype(np.uint64)          # (n, words), native byte order
    if words == 1:
        return np.argsort(columns[:, 0], kind="stable")
    return np.lexsort(columns.T[::-1])                       # last key is the primary one
