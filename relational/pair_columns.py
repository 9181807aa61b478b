"""A state table's stored ``(key, value)`` pairs as Arrow columns, without a Python tuple per row.

Job: :meth:`StateTable.decode_columns` -- a join probing many keys at once turns the rows it
found into output columns; decoding every row into a tuple and building each column from
Python values again costs a tuple (and its garbage collection) per row. Here each column comes
from where it is stored:

- a column in the value (``value_indices``) of a kind ``relational.scan_columns`` can return:
  the native ``decode_columns`` (twin ``relational/_scan_columns_py.py``) copies it from every
  value into Arrow buffers in one pass;
- a pk column of an integer kind (SMALLINT, INT, BIGINT) that is not in the value: read from
  the keys with numpy, when every pk column has a fixed-width key encoding and every key has
  the full length (no NULL in the pk: a NULL's key is its tag byte alone, so its key is
  shorter): the column's big-endian bytes, inverted when descending, sign bit flipped.

Invariant: :meth:`PairColumns.decode` returns, for any pairs of the table, the arrays
``relational.arrow.to_arrow`` makes of ``RowSerde.decode_many``'s values (equal type and
values), or ``None`` when it cannot promise that for these pairs (then the caller takes the
row path). :meth:`PairColumns.of` gives ``None`` for a layout it never serves (a column neither
wantable in the value nor an integer pk column).

Callers: :meth:`relational.state_table.StateTable.decode_columns`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from relational.memcomparable import fixed_width
from relational.scan_columns import ColumnScan
from relational.scan_columns import _impl as _scan_impl   # WANTABLE: the kinds a value scan returns
from relational.types import TypeKind
from relational.vnode import VNODE_BYTES

_INT_KEYS = {TypeKind.SMALLINT: np.int16, TypeKind.INT: np.int32, TypeKind.BIGINT: np.int64}
_TAG_NOT_NULL = 0x01


class PairColumns:
    """Decodes one table's pairs into its columns (module docstring)."""

    def __init__(self, scan, from_value: list, from_key: list, key_len: int, width: int):
        self._scan = scan                # ColumnScan of the ``from_value`` columns, or None
        self._from_value = from_value    # schema positions, in the scan's order
        self._from_key = from_key        # [(schema position, key offset of its tag, numpy dtype, descending,
        #                                   its size, big-endian dtype, its minimum: the sign bit)]
        self._key_len = key_len
        self._width = width

    @classmethod
    def of(cls, serde) -> PairColumns | None:
        """The decoder of a table with ``serde`` (a :class:`~relational.row_serde.RowSerde`),
        or None (module docstring)."""
        in_value = set(serde.value_indices)
        value_kinds = dict(zip(serde.value_indices, (t.kind for t in serde.value_types)))
        from_value, from_key = [], []
        offsets, at = {}, VNODE_BYTES
        for c, t in zip(serde.pk_indices, serde.pk_types):
            w = fixed_width(t)
            if w is None:
                at = None
                break
            offsets[c] = at
            at += w
        key_len = at
        orders = dict(zip(serde.pk_indices, serde.order_types))
        for c, t in enumerate(serde.types):
            if c in in_value and value_kinds[c] in _scan_impl.WANTABLE:
                from_value.append(c)
            elif c in offsets and key_len is not None and t.kind in _INT_KEYS:
                dtype = np.dtype(_INT_KEYS[t.kind])
                from_key.append((c, offsets[c], dtype, orders[c].descending, dtype.itemsize,
                                 dtype.newbyteorder(">"), np.array(np.iinfo(dtype).min, dtype)))
            else:
                return None
        scan = None
        if from_value:
            scan = ColumnScan.of(serde, from_value)
            if scan is None:
                return None
        return cls(scan, from_value, from_key, key_len or 0, len(serde.types))

    def decode(self, keys: list, values: list):
        """The columns (schema order) of the rows of ``keys``/``values``, or None when a key is
        not of the full length (a NULL in the pk). Raises the ``DecodeError`` a malformed
        value raises on the row path."""
        n = len(keys)
        out = [None] * self._width
        if self._from_key:
            joined = b"".join(keys)
            if len(joined) != n * self._key_len:   # no key is longer: some is shorter (a NULL)
                return None
            grid = np.frombuffer(joined, np.uint8).reshape(n, self._key_len)
            for c, at, dtype, descending, size, big_endian, sign in self._from_key:
                if n and not (grid[:, at] == _TAG_NOT_NULL).all():
                    return None
                raw = np.ascontiguousarray(grid[:, at + 1:at + 1 + size])
                if descending:
                    raw = raw ^ np.uint8(0xFF)
                bits = raw.view(big_endian).reshape(n).astype(dtype)
                bits ^= sign   # flip the sign bit back
                out[c] = pa.array(bits)
        if self._scan is not None:
            _, arrays = self._scan.read(zip(keys, values), n)
            for c, array in zip(self._from_value, arrays):
                out[c] = array
        return out
