"""Arrow types for relational columns, and conversion between Arrow columns and Python values.

Job: one mapping from :class:`~relational.types.DataType` to an Arrow type, used wherever rows
become Arrow data (``StorageTable.batch_iter``) or Arrow data becomes rows
(``StateTable.write_chunk``), so every layer agrees on it:

=============  ================================  =============================================
type           Arrow type                        note
=============  ================================  =============================================
BOOLEAN        bool
SMALLINT/INT   int16 / int32
BIGINT         int64
REAL / DOUBLE  float32 / float64
DECIMAL        string (``str(Decimal)``)          exact, keeps scale, NaN and +-Infinity
VARCHAR        string (large_string accepted)
BYTEA          binary (large_binary accepted)
DATE           date32
TIME           time64[us]
TIMESTAMP      timestamp[us]
TIMESTAMPTZ    timestamp[us, tz=UTC]
INTERVAL       month_day_nano_interval            usecs must fit as nanoseconds (|usecs| < 2**63/1000)
STRUCT         struct of the fields' types
LIST           list of the element type
JSONB          string                            the normal text (relational/jsonb.py)
=============  ================================  =============================================

Input columns may also be decimal128/256 for DECIMAL and any integer/float Arrow type numpy
can cast without loss is left to the encoders to range-check. Invariants: ``to_pylist`` returns
values that ``DataType.validate`` accepts (STRUCT as tuples, INTERVAL as ``Interval``);
``to_arrow(to_pylist(c))`` round-trips every value the table above can hold.

Callers: :mod:`relational.state_table`, :mod:`relational.storage_table`, the stream layer.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa

from relational.errors import TypeMismatchError, ValueOutOfRangeError
from relational.types import DataType, Interval, TypeKind

_SIMPLE = {
    TypeKind.BOOLEAN: pa.bool_(),
    TypeKind.SMALLINT: pa.int16(),
    TypeKind.INT: pa.int32(),
    TypeKind.BIGINT: pa.int64(),
    TypeKind.REAL: pa.float32(),
    TypeKind.DOUBLE: pa.float64(),
    TypeKind.DECIMAL: pa.string(),
    TypeKind.VARCHAR: pa.string(),
    TypeKind.BYTEA: pa.binary(),
    TypeKind.DATE: pa.date32(),
    TypeKind.TIME: pa.time64("us"),
    TypeKind.TIMESTAMP: pa.timestamp("us"),
    TypeKind.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    TypeKind.INTERVAL: pa.month_day_nano_interval(),
    TypeKind.JSONB: pa.string(),
}
_NANOS_LIMIT = (1 << 63) // 1000


def arrow_type(dtype: DataType) -> pa.DataType:
    """The Arrow type that holds values of ``dtype`` (table in the module docstring)."""
    if dtype.kind == TypeKind.STRUCT:
        return pa.struct([(name, arrow_type(t)) for name, t in dtype.fields])
    if dtype.kind == TypeKind.LIST:
        return pa.list_(arrow_type(dtype.elem))
    return _SIMPLE[dtype.kind]


def flat_array(column):
    """``column`` as one ``pa.Array``: a ChunkedArray of one chunk is that chunk (no copy:
    ``combine_chunks`` copies even one chunk), of several their concatenation; an Array as is."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def arrow_schema(names, types) -> pa.Schema:
    return pa.schema([(name, arrow_type(t)) for name, t in zip(names, types)])


# --- Arrow -> Python ----------------------------------------------------------------------

def _needs_fixup(dtype: DataType) -> bool:
    return dtype.kind in (TypeKind.DECIMAL, TypeKind.INTERVAL, TypeKind.STRUCT, TypeKind.LIST)


def _from_arrow_value(value, dtype: DataType):
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.DECIMAL:
        if isinstance(value, str):
            try:
                return decimal.Decimal(value)
            except decimal.InvalidOperation:
                raise TypeMismatchError(f"DECIMAL column holds a non-number string {value!r:.40}") from None
        return value
    if kind == TypeKind.INTERVAL:
        months, days, nanos = value
        usecs = nanos // 1000 if nanos >= 0 else -((-nanos) // 1000)
        return Interval(months, days, usecs)
    if kind == TypeKind.STRUCT:
        if isinstance(value, dict):
            return tuple(_from_arrow_value(value.get(name), t) for name, t in dtype.fields)
        return tuple(_from_arrow_value(v, t) for v, (_, t) in zip(value, dtype.fields))
    if kind == TypeKind.LIST:
        return [_from_arrow_value(v, dtype.elem) for v in value]
    return value


def to_pylist(column, dtype: DataType) -> list:
    """The Python values of one column (pyarrow Array/ChunkedArray, numpy array or a sequence
    of Python values, which is taken as it is)."""
    if isinstance(column, (pa.Array, pa.ChunkedArray)):
        values = column.to_pylist()
        if _needs_fixup(dtype):
            values = [_from_arrow_value(v, dtype) for v in values]
        return values
    if isinstance(column, np.ndarray):
        return column.tolist()
    return list(column)


def as_arrow(column, dtype: DataType):
    """``column`` as an Arrow array (or numpy array, left as it is) that the vectorized encoders
    read: a sequence of Python values becomes ``to_arrow(column, dtype)``."""
    if isinstance(column, (pa.Array, pa.ChunkedArray, np.ndarray)):
        return column
    return to_arrow(list(column), dtype)


# --- Python -> Arrow ----------------------------------------------------------------------

def _to_arrow_value(value, dtype: DataType):
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.DECIMAL:
        return str(value)
    if kind == TypeKind.INTERVAL:
        if not -_NANOS_LIMIT <= value.usecs <= _NANOS_LIMIT:   # (2**63 // 1000) * 1000 still fits
            raise ValueOutOfRangeError(f"{value!r} does not fit Arrow's month_day_nano interval")
        return (value.months, value.days, value.usecs * 1000)
    if kind == TypeKind.STRUCT:
        return {name: _to_arrow_value(v, t) for v, (name, t) in zip(value, dtype.fields)}
    if kind == TypeKind.LIST:
        return [_to_arrow_value(v, dtype.elem) for v in value]
    return value


def to_arrow(values, dtype: DataType) -> pa.Array:
    """An Arrow array of ``arrow_type(dtype)`` holding ``values`` (Python values, None = NULL)."""
    if _needs_fixup(dtype):
        values = [_to_arrow_value(v, dtype) for v in values]
    return pa.array(values, type=arrow_type(dtype))
