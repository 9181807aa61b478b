"""Pure-Python twin of ``native/_chunk_keys.pyx``: a chunk's table keys from integer pk columns,
sorted, in one call.

The reference for the native module: same name, results and exceptions.

``sorted_int_keys(vnodes, columns, widths, descending)``:

- ``vnodes``: the chunk's vnodes, a 1-D numpy ``uint16`` array of ``n`` entries;
- ``columns``: the pk columns in key order, each a 1-D numpy ``int64`` array of ``n`` values
  (no NULLs: the caller takes another path for those);
- ``widths``: each column's value width in bytes, 2 (SMALLINT), 4 (INT) or 8 (BIGINT); every
  value must fit it as a signed integer;
- ``descending``: each column's order (truthy: DESC).

Each row's key is ``vnode (u16 big-endian)`` then, per column, the memcomparable encoding of a
non-NULL integer (docs/format.md section 1): the tag ``0x01`` and the value with its sign bit
flipped, big-endian, every value byte inverted when descending -- exactly
``vnode_prefix(v) + memcomparable.encode_row(pk, types, orders)``.

Returns ``(order, keys)``: ``order`` the numpy ``int64`` array of row numbers in key order (a
stable sort: equal keys keep their chunk order), ``keys`` the list of the keys as ``bytes`` in
that order. Raises ``ValueError`` when lengths differ, a width is not 2, 4 or 8, a value does
not fit its width, or the lists of columns, widths and orders differ in length; ``TypeError``
when an array has another dtype or is not 1-D.

``sorted_int_key_buffer(vnodes, columns, widths, descending)``: the same keys packed, for the
packed insert path: ``(order, keys, width, distinct)`` with ``keys`` one ``bytes`` object of
the ``n`` keys of ``width`` bytes each back to back in key order (``b""`` when ``n`` is 0),
``width`` the key width (2 + the sum of 1 + each column's width) and ``distinct`` whether no two
keys are equal. Same checks and exceptions.

Callers: :meth:`relational.row_serde.RowSerde.encode_chunk` and ``encode_chunk_packed`` only, through ``hummock._twins.load``.
"""

from __future__ import annotations

import numpy as np

_WIDTHS = {2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">u8")}


def check_args(vnodes, columns, widths, descending) -> int:
    """The row count ``n`` of valid arguments; raises as the module docstring says."""
    if not isinstance(vnodes, np.ndarray) or vnodes.dtype != np.uint16 or vnodes.ndim != 1:
        raise TypeError("vnodes must be a 1-D numpy uint16 array")
    n = len(vnodes)
    columns, widths, descending = list(columns), list(widths), list(descending)
    if not len(columns) == len(widths) == len(descending):
        raise ValueError(f"columns, widths and orders differ in length: {len(columns)}, {len(widths)}, "
                         f"{len(descending)}")
    for column, width in zip(columns, widths):
        if not isinstance(column, np.ndarray) or column.dtype != np.int64 or column.ndim != 1:
            raise TypeError("pk columns must be 1-D numpy int64 arrays")
        if len(column) != n:
            raise ValueError(f"a pk column has {len(column)} values, expected {n}")
        if isinstance(width, bool) or width not in _WIDTHS:
            raise ValueError(f"a pk column width is 2, 4 or 8 bytes, got {width!r}")
        if width < 8 and n:
            lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
            if int(column.min()) < lo or int(column.max()) > hi:
                raise ValueError(f"a pk value does not fit {width} bytes")
    return n


def sorted_int_keys(vnodes, columns, widths, descending):
    """See the module docstring."""
    n = check_args(vnodes, columns, widths, descending)
    parts = [vnodes.astype(">u2").view(np.uint8).reshape(n, 2)]
    for column, width, desc in zip(columns, widths, descending):
        bits = 8 * width
        unsigned = (column.astype(np.int64).view(np.uint64) & np.uint64((1 << bits) - 1)) ^ np.uint64(1 << (bits - 1))
        body = unsigned.astype(_WIDTHS[width]).view(np.uint8).reshape(n, width)
        if desc:
            body = body ^ np.uint8(0xFF)
        parts.append(np.ones((n, 1), dtype=np.uint8))
        parts.append(body)
    matrix = np.ascontiguousarray(np.hstack(parts))
    width = matrix.shape[1]
    data = matrix.tobytes()
    keys = [data[i * width:(i + 1) * width] for i in range(n)]
    order = sorted(range(n), key=keys.__getitem__)   # stable
    return np.array(order, dtype=np.int64), [keys[i] for i in order]


def sorted_int_key_buffer(vnodes, columns, widths, descending):
    """See the module docstring."""
    order, keys = sorted_int_keys(vnodes, columns, widths, descending)
    width = 2 + sum(1 + int(w) for w in widths)
    distinct = all(a != b for a, b in zip(keys, keys[1:]))
    return order, b"".join(keys), width, distinct
