"""Scanning one table's stored ``(key, value)`` pairs straight into Arrow columns.

Job: the fast path of full-table reads (the Spark data source's tasks, ``StorageTable``'s
record batches): instead of decoding every row into a Python tuple and building each Arrow
column from Python values, the native ``decode_columns`` (twin ``relational/_scan_columns_py.py``)
walks each value-encoded row once and copies the wanted columns' values into Arrow buffers;
this module wraps those buffers as ``pyarrow`` arrays. With no column wanted (a count) the
pairs are only counted, never decoded.

Invariant: :meth:`ColumnScan.read` returns the rows ``RowSerde.decode_many`` gives for the
same pairs, as the arrays ``relational.arrow.to_arrow`` makes of their values (same types and
values; REAL/DOUBLE keep the stored bits), or raises the same ``DecodeError`` a wanted column's
value would. Values of columns not read are stepped over (their structure checked, not their
contents). :meth:`ColumnScan.of` gives ``None`` for what it cannot promise that of: a column
that is not in the value (``value_indices``), a wanted DECIMAL / INTERVAL / STRUCT / LIST, or a
STRUCT / LIST anywhere in the value; the caller then takes the row path.

Callers: :mod:`relational.spark`, :mod:`relational.storage_table`.
"""

from __future__ import annotations

import pyarrow as pa

from hummock import _twins
from relational.arrow import arrow_type

_impl = _twins.load("_scan_columns", "relational._scan_columns_py")
# Native decoding walks a compacted table's blocks without the GIL (``UserScan.drain``): scans of
# disjoint key ranges in threads then run on separate cores. The twin holds the GIL throughout.
DECODES_WITHOUT_GIL = _impl.__name__.startswith("native.")
_SMALL_TO_LARGE = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}


class ColumnScan:
    """Reads pairs of one table into Arrow arrays of chosen columns (module docstring)."""

    def __init__(self, codes: tuple, wanted: tuple, types: list):
        self._codes = codes
        self._wanted = wanted
        self._types = [arrow_type(t) for t in types]

    @classmethod
    def of(cls, serde, columns) -> ColumnScan | None:
        """The scan of the schema positions ``columns`` (any order, no repeats) of a table with
        ``serde`` (a :class:`~relational.row_serde.RowSerde`), or ``None`` (module docstring)."""
        codes = tuple(int(t.kind) for t in serde.value_types)
        if any(c not in _impl.WANTABLE and c not in _impl.WALKABLE for c in codes):
            return None
        where = {c: j for j, c in enumerate(serde.value_indices)}
        if any(c not in where or codes[where[c]] not in _impl.WANTABLE for c in columns):
            return None
        return cls(codes, tuple(where[c] for c in columns), [serde.types[c] for c in columns])

    def read(self, pairs, limit: int) -> tuple[int, list]:
        """Take at most ``limit`` pairs from the iterator ``pairs``; return ``(rows, arrays)``,
        one array per wanted column. Raises ``DecodeError`` for a malformed row."""
        if not self._wanted:
            return _impl.count_pairs(pairs, limit), []
        n, buffers = _impl.decode_columns(pairs, limit, self._codes, self._wanted)
        return n, [_array(t, n, b) for t, b in zip(self._types, buffers)]

    def batches(self, pairs, batch_rows: int):
        """Yield ``(rows, arrays)`` of up to ``batch_rows`` rows until ``pairs`` runs out (no
        empty batch)."""
        while True:
            n, arrays = self.read(pairs, batch_rows)
            if n:
                yield n, arrays
            if n < batch_rows:
                return


def _array(dtype: pa.DataType, n: int, buffers) -> pa.Array:
    validity, nulls, data, offsets = buffers
    valid = None if validity is None else pa.py_buffer(validity)
    if offsets is None:
        return pa.Array.from_buffers(dtype, n, [valid, pa.py_buffer(data)], null_count=nulls)
    if len(offsets) == 4 * (n + 1):
        return pa.Array.from_buffers(dtype, n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)
    large = pa.Array.from_buffers(_SMALL_TO_LARGE[dtype], n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)],
                                  null_count=nulls)
    return large.cast(dtype)   # more than 2 GiB of data: Arrow refuses (ArrowInvalid), as for any batch


__all__ = ["ColumnScan"]
