"""Row value encoding: the compact bytes a state table stores as the value of a row.

Job: turn a row of typed Python values into bytes and back. The layout is in docs/format.md
section 2 (tag, column count, null bitmap, non-NULL values; STRUCT and LIST nest the same
shape). It is compact, not order-preserving (keys use :mod:`relational.memcomparable`).

Invariants:
- ``decode_row(encode_row(row, types), types)`` equals the row after ``DataType.validate``,
  with these documented normalisations: REAL is rounded to float32, every float or DECIMAL NaN
  comes back as the plain NaN, TIMESTAMPTZ comes back as the same instant in
  ``datetime.timezone.utc``, a LIST comes back as a ``list``, ``timedelta`` as ``Interval``.
  DECIMAL keeps its exact digits, scale and sign (``Decimal('1.50')``, ``Decimal('-0')``);
  INTERVAL keeps its three fields as given (``Interval(1, 0, 0)`` is not turned into 30 days).
- Decoding never misreads: a truncated, malformed or over-long buffer, or one written for a
  different number of columns, raises :class:`~relational.errors.DecodeError` with the offset.
- The native module and the pure-Python twin (chosen once per process by
  :func:`hummock._twins.load`) produce identical bytes and raise identical exception classes.

Callers: state tables and the streaming executors (relational and stream layers).
"""

from __future__ import annotations

from hummock import _twins

_impl = _twins.load("_value_encoding", "relational._value_encoding_py")

#: ``encode_row(values, types) -> bytes``.
#: REQUIRES ``len(values) == len(types)``, each type a :class:`~relational.types.DataType`.
#: Raises ``SchemaError`` for a bad ``types`` or a row of the wrong length,
#: ``TypeMismatchError`` for a value of the wrong Python type and ``ValueOutOfRangeError`` for
#: one that does not fit (exactly as ``DataType.validate``; also a TIMESTAMPTZ whose instant is
#: outside Python's datetime range in UTC). The first bad value, depth first, decides.
encode_row = _impl.encode_row
#: ``encode_rows(rows, types) -> list[bytes]``: ``encode_row`` for each row, schema checked once.
encode_rows = _impl.encode_rows
#: ``decode_row(data, types) -> tuple``: ``data`` is bytes-like (else ``TypeMismatchError``);
#: raises ``DecodeError`` unless ``data`` is exactly one row encoded for ``len(types)`` columns.
#: The result holds no reference to ``data``; it stays valid after ``data`` is reused.
decode_row = _impl.decode_row
#: ``decode_rows(datas, types) -> list[tuple]``: ``decode_row`` for each buffer.
decode_rows = _impl.decode_rows

__all__ = ["encode_row", "encode_rows", "decode_row", "decode_rows"]
