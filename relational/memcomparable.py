"""Memcomparable encoding of rows: keys whose byte order is the rows' SQL order.

Job: turn a row of typed values into bytes such that for two rows ``a`` and ``b`` of one schema
``a < b`` (column by column, each column in its :class:`OrderType`) exactly when
``encode_row(a) < encode_row(b)`` bytewise, and back. Used for primary keys and sort keys in
state tables (DESIGN.md sections 3 and 7). The byte layout is docs/format.md section 1.

Guarantees, for every type of :mod:`relational.types` and every order:
- order preservation, including NULLs (placed per ``nulls_first``), NaN above every number,
  ``-0.0 == 0.0``, decimals of any scale (``1.0`` and ``1.00`` encode alike), strings and bytes
  with embedded NUL bytes, nested STRUCT and LIST;
- equal values give equal bytes (so a key identifies a row), and encodings are prefix-free per
  schema: no row's encoding is a proper prefix of another's, so a prefix of the columns is a
  valid scan prefix;
- :func:`decode_row` returns values equal to the encoded ones (REAL rounds to float32,
  INTERVAL comes back in its canonical justified form, TIMESTAMPTZ in UTC, DECIMAL normalized)
  and raises :class:`~relational.errors.DecodeError` on malformed or truncated input.

The per-row functions come from ``native/_memcomparable.pyx`` when built, else from the twin
``relational/_memcomparable_py.py`` (identical bytes, identical exception classes).
:func:`encode_columns` is the vectorized path for whole Arrow/numpy columns.

Callers: relational tables, executors, the SQL layer; never the hummock layer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hummock import _twins
from relational.errors import SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational.types import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, DataType, TypeKind

_impl = _twins.load("_memcomparable", "relational._memcomparable_py")

#: ``encode_row(values, types, orders=None) -> bytes``
encode_row = _impl.encode_row
#: ``decode_row(data, types, orders=None) -> tuple``
decode_row = _impl.decode_row
#: ``encode_rows(rows, types, orders=None, prefix=b"") -> list[bytes]`` (one call for many rows,
#: each result after ``prefix``)
encode_rows = _impl.encode_rows
#: ``decode_rows(datas, types, orders=None, offset=0) -> list[tuple]`` (rows start ``offset`` bytes in)
decode_rows = _impl.decode_rows
#: ``decode_row_prefix(data, types, orders=None, offset=0) -> (tuple, end_offset)``
decode_row_prefix = _impl.decode_row_prefix

IMPLEMENTATION = "native" if _twins.LOADED.get("_memcomparable") else "pure"


class OrderType:
    """Sort order of one key column: direction and NULL placement.

    ``nulls_first=None`` means the Postgres default: NULLS LAST for ascending, NULLS FIRST for
    descending. Immutable and hashable.
    """

    __slots__ = ("descending", "nulls_first")

    ASC: OrderType
    DESC: OrderType

    def __init__(self, descending: bool = False, nulls_first: bool | None = None):
        object.__setattr__(self, "descending", bool(descending))
        object.__setattr__(self, "nulls_first", bool(descending) if nulls_first is None else bool(nulls_first))

    def __setattr__(self, name, value):
        raise AttributeError("OrderType is immutable")

    def __eq__(self, other):
        if not isinstance(other, OrderType):
            return NotImplemented
        return self.descending == other.descending and self.nulls_first == other.nulls_first

    def __hash__(self):
        return hash((self.descending, self.nulls_first))

    def __reduce__(self):
        return (OrderType, (self.descending, self.nulls_first))

    def __repr__(self):
        direction = "DESC" if self.descending else "ASC"
        nulls = "FIRST" if self.nulls_first else "LAST"
        return f"OrderType({direction} NULLS {nulls})"


OrderType.ASC = OrderType(False)
OrderType.DESC = OrderType(True)


# --- vectorized path ----------------------------------------------------------------------

# kind -> (numpy dtype of the value, big-endian unsigned view, bias applied before the flip)
_FIXED = {
    TypeKind.BOOLEAN: (np.uint8, ">u1", 1),
    TypeKind.SMALLINT: (np.int16, ">u2", 2),
    TypeKind.INT: (np.int32, ">u4", 4),
    TypeKind.BIGINT: (np.int64, ">u8", 8),
    TypeKind.REAL: (np.float32, ">u4", 4),
    TypeKind.DOUBLE: (np.float64, ">u8", 8),
}
_INT_RANGE = {TypeKind.SMALLINT: (INT16_MIN, INT16_MAX), TypeKind.INT: (INT32_MIN, INT32_MAX)}
_TAG_NOT_NULL, _TAG_NULL_FIRST, _TAG_NULL_LAST = 0x01, 0x00, 0x02


# bytes of a non-NULL value (tag included) of the types whose encoding has one length (section 1)
_KEY_WIDTH = {TypeKind.BOOLEAN: 2, TypeKind.SMALLINT: 3, TypeKind.INT: 5, TypeKind.BIGINT: 9,
              TypeKind.REAL: 5, TypeKind.DOUBLE: 9, TypeKind.DATE: 5, TypeKind.TIME: 9,
              TypeKind.TIMESTAMP: 9, TypeKind.TIMESTAMPTZ: 9, TypeKind.INTERVAL: 17}


def fixed_width(dtype: DataType) -> int | None:
    """The encoded length (tag included) of every non-NULL value of ``dtype``, for the types
    whose values all encode to one length (BOOLEAN, the integers and floats, DATE, TIME,
    TIMESTAMP[TZ], INTERVAL); ``None`` for the others (VARCHAR, BYTEA, DECIMAL, STRUCT, LIST).
    A NULL is its tag byte alone, whatever the type."""
    return _KEY_WIDTH.get(dtype.kind) if isinstance(dtype, DataType) else None


# the types whose decoding gives back the very value encoded, not only an equal one (the others:
# REAL/DOUBLE lose -0.0 and NaN payloads, DECIMAL its scale, INTERVAL and TIMESTAMPTZ their
# form, STRUCT/LIST may hold those)
_EXACT = frozenset({TypeKind.BOOLEAN, TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.VARCHAR,
                    TypeKind.BYTEA, TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP,
                    TypeKind.JSONB})   # JSONB: the key holds every number's scale


def decodes_exactly(dtype: DataType) -> bool:
    """True when :func:`decode_row` returns every value of ``dtype`` as it was encoded -- same
    type, same value, same repr (BOOLEAN, the integers, VARCHAR, BYTEA, DATE, TIME,
    TIMESTAMP): a key column of such a type need not be repeated in its row's value (a state
    table's ``value_indices``), as the row rebuilt from the key is the row written."""
    return isinstance(dtype, DataType) and dtype.kind in _EXACT


# the temporal kinds whose key is an integer's key (section 1 of docs/format.md): DATE an INT of
# days since 1970-01-01, TIME / TIMESTAMP / TIMESTAMPTZ a BIGINT of microseconds; with the
# range a Python value of the kind can hold (the per-row path refuses what is outside it)
_DATETIME_MIN_US = -62_135_596_800_000_000    # 0001-01-01 00:00:00
_DATETIME_MAX_US = 253_402_300_799_999_999    # 9999-12-31 23:59:59.999999
_TEMPORAL = {
    TypeKind.DATE: (TypeKind.INT, pa.int32(), -719_162, 2_932_896),
    TypeKind.TIME: (TypeKind.BIGINT, pa.int64(), 0, 86_400_000_000 - 1),
    TypeKind.TIMESTAMP: (TypeKind.BIGINT, pa.int64(), _DATETIME_MIN_US, _DATETIME_MAX_US),
    TypeKind.TIMESTAMPTZ: (TypeKind.BIGINT, pa.int64(), _DATETIME_MIN_US, _DATETIME_MAX_US),
}
_TEMPORAL_ARROW = {TypeKind.DATE: pa.date32(), TypeKind.TIME: pa.time64("us"),
                   TypeKind.TIMESTAMP: pa.timestamp("us"), TypeKind.TIMESTAMPTZ: pa.timestamp("us", tz="UTC")}


def vectorizable(dtype: DataType) -> bool:
    """True when :func:`encode_columns` encodes columns of this type without per-row Python work."""
    return dtype.kind in _FIXED or dtype.kind in _TEMPORAL


def _temporal_as_integers(column, kind: TypeKind):
    """``(Arrow integer array, integer kind)`` of a DATE/TIME/TIMESTAMP[TZ] column (an Arrow
    array of the kind's type or another unit of it, a numpy datetime64 array, or a sequence of
    Python values) whose memcomparable key equals the column's; values outside the range a
    Python value of the kind holds raise :class:`ValueOutOfRangeError`."""
    int_kind, int_type, lo, hi = _TEMPORAL[kind]
    target = _TEMPORAL_ARROW[kind]
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if isinstance(column, np.ndarray):
        if not np.issubdtype(column.dtype, np.datetime64) or kind in (TypeKind.DATE, TypeKind.TIME):
            raise TypeMismatchError(f"{kind.name} column needs {target} values, got numpy {column.dtype}")
        column = pa.array(column.astype("datetime64[us]"))
    elif not isinstance(column, pa.Array):   # Python values: converted as every chunk's are
        from relational.arrow import to_arrow

        column = to_arrow(list(column), DataType(kind))
    same_family = ((kind == TypeKind.DATE and pa.types.is_date(column.type))
                   or (kind == TypeKind.TIME and pa.types.is_time(column.type))
                   or (kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ) and pa.types.is_timestamp(column.type)))
    if not same_family:
        raise TypeMismatchError(f"{kind.name} column needs {target} values, got {column.type}")
    if kind == TypeKind.TIMESTAMPTZ or column.type != target:
        try:   # another unit (exact only); a zone is only a label: the values are UTC instants
            column = column.cast(pa.timestamp("us", tz="UTC") if kind == TypeKind.TIMESTAMPTZ else target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueOutOfRangeError(f"{kind.name} column does not fit microseconds: {exc}") from None
    integers = column.view(int_type)
    if len(integers) - integers.null_count:
        bounds = pc.min_max(integers)
        if bounds["min"].as_py() < lo or bounds["max"].as_py() > hi:
            raise ValueOutOfRangeError(f"{kind.name} out of range in column")
    return integers, int_kind


def _values_and_nulls(column, kind: TypeKind):
    """Split a column (pyarrow Array/ChunkedArray, numpy array, or sequence) into a numpy array of
    the kind's value dtype and a boolean null mask (or ``None`` when nothing is NULL)."""
    np_type = _FIXED[kind][0]
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not isinstance(column, (pa.Array, np.ndarray)):
        try:
            column = pa.array(column)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeMismatchError(f"cannot read a {kind.name} column from {type(column).__name__}: {exc}") from None
    nulls = None
    if isinstance(column, pa.Array):
        if column.null_count:
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
        column = column.to_numpy(zero_copy_only=False)
    values = np.asarray(column)
    if values.ndim != 1:
        raise TypeMismatchError(f"a column must be one-dimensional, got shape {values.shape}")
    floating = kind in (TypeKind.REAL, TypeKind.DOUBLE)
    if kind == TypeKind.BOOLEAN:
        if values.dtype != np.bool_:
            raise TypeMismatchError(f"BOOLEAN column needs bool values, got {values.dtype}")
    elif floating:
        if not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)):
            raise TypeMismatchError(f"{kind.name} column needs numbers, got {values.dtype}")
        if kind == TypeKind.REAL and values.dtype != np.float32:
            finite = values[np.isfinite(values)] if values.size else values
            if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
                # match the per-row path: only true overflow raises, rounding to max is fine
                with np.errstate(over="ignore"):
                    rounded = finite.astype(np.float32)
                if np.isinf(rounded).any():
                    raise ValueOutOfRangeError("REAL out of range in column")
    else:
        if not np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_:
            raise TypeMismatchError(f"{kind.name} column needs integers, got {values.dtype}")
        if kind in _INT_RANGE and values.size:
            lo, hi = _INT_RANGE[kind]
            if values.min() < lo or values.max() > hi:
                raise ValueOutOfRangeError(f"{kind.name} out of range in column")
        if kind == TypeKind.BIGINT and values.dtype == np.uint64 and values.size and values.max() > (1 << 63) - 1:
            raise ValueOutOfRangeError("BIGINT out of range in column")
    return values.astype(np_type, copy=False), nulls


def column_values(column, dtype: DataType):
    """``(values, nulls)`` of a column of a :func:`vectorizable` type as :func:`encode_columns`
    reads it: a numpy array of the type's value dtype (NULLs as 0) and a bool NULL mask (or
    ``None``); raises its typed errors for values of the wrong type or range."""
    return _values_and_nulls(column, dtype.kind)


def fixed_matrix(column, dtype: DataType, order):
    """The (n, 1 + width) uint8 matrix of one :func:`vectorizable` column's keys (pyarrow
    array, numpy array or sequence; ``order`` an ``OrderType`` or None for ascending) and its
    "bytes kept" mask: None when no value is NULL (row ``i`` is then ``encode_row([column[i]],
    [dtype], [order])``), else a bool matrix of the same shape (a NULL keeps its tag byte only)."""
    kind = dtype.kind
    if kind in _TEMPORAL:
        column, kind = _temporal_as_integers(column, kind)
    np_type, be_type, width = _FIXED[kind]
    values, nulls = _values_and_nulls(column, kind)
    n = len(values)
    if kind == TypeKind.BOOLEAN:
        bits = values.view(np.uint8)
    elif kind in (TypeKind.REAL, TypeKind.DOUBLE):
        floats = values + 0.0  # -0.0 + 0.0 == +0.0: canonical zero; also copies
        utype = np.uint32 if kind == TypeKind.REAL else np.uint64
        raw = floats.view(utype)
        nan = np.isnan(floats)
        if nan.any():
            raw[nan] = 0x7FC00000 if kind == TypeKind.REAL else 0x7FF8000000000000
        sign = utype(1 << (8 * width - 1))
        negative = (raw & sign) != 0
        bits = np.where(negative, ~raw, raw | sign)
    else:
        utype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
        bits = values.view(utype) ^ utype(1 << (8 * width - 1))
    matrix = np.empty((n, 1 + width), dtype=np.uint8)
    matrix[:, 0] = _TAG_NOT_NULL
    matrix[:, 1:] = bits.astype(be_type).view(np.uint8).reshape(n, width)
    if order is not None and order.descending:
        matrix[:, 1:] ^= 0xFF
    keep = None
    if nulls is not None and nulls.any():
        nulls_first = order.nulls_first if order is not None else False
        matrix[nulls, 0] = _TAG_NULL_FIRST if nulls_first else _TAG_NULL_LAST
        keep = np.ones(matrix.shape, dtype=bool)
        keep[nulls, 1:] = False
    return matrix, keep


def encode_columns(columns, types, orders=None, prefix=None) -> pa.BinaryArray:
    """Encode whole columns at once: element ``i`` of the result equals
    ``(prefix[i] if prefix else b"") + encode_row([c[i] for c in columns], types, orders)``.

    REQUIRES: every type is :func:`vectorizable` (BOOLEAN, SMALLINT, INT, BIGINT, REAL, DOUBLE,
    DATE, TIME, TIMESTAMP, TIMESTAMPTZ) and all columns have the same length. ``columns`` are pyarrow arrays (NULLs allowed), numpy
    arrays or sequences. ``prefix``, if given, is an ``(n, k)`` uint8 array prepended to each
    key (the relational layer passes vnodes). Raises :class:`TypeMismatchError`,
    :class:`ValueOutOfRangeError` or :class:`SchemaError` as the per-row path would.
    """
    types = list(types)
    columns = list(columns)
    if len(columns) != len(types):
        raise SchemaError(f"{len(columns)} columns but {len(types)} types")
    if orders is not None and len(orders) != len(types):
        raise SchemaError(f"{len(types)} types but {len(orders)} orders")
    for dtype in types:
        if not isinstance(dtype, DataType) or not vectorizable(dtype):
            raise SchemaError(f"encode_columns has no vectorized path for {dtype!r}; use encode_rows")
    parts, keeps = [], []
    if prefix is not None:
        prefix = np.ascontiguousarray(prefix, dtype=np.uint8)
        parts.append(prefix)
    for i, (column, dtype) in enumerate(zip(columns, types)):
        matrix, keep = fixed_matrix(column, dtype, orders[i] if orders is not None else None)
        parts.append(matrix)
        keeps.append(keep)
    n = len(parts[0])
    if any(len(p) != n for p in parts):
        raise SchemaError("columns (and prefix) must all have the same length")
    matrix = parts[0] if len(parts) == 1 else np.hstack(parts)
    width = matrix.shape[1]
    if all(k is None for k in keeps):
        data = matrix.reshape(-1)
        offsets = np.arange(0, n * width + 1, width, dtype=np.int64)
    else:
        keep_parts = [np.ones(prefix.shape, dtype=bool)] if prefix is not None else []
        keep_parts += [np.ones(p.shape, dtype=bool) if k is None else k
                       for p, k in zip(parts[len(keep_parts):], keeps)]
        keep = np.hstack(keep_parts)
        data = matrix[keep]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(keep.sum(axis=1), out=offsets[1:])
    if offsets[-1] < 2**31:
        binary_type, offsets = pa.binary(), offsets.astype(np.int32, copy=False)
    else:
        binary_type, offsets = pa.large_binary(), offsets.astype(np.int64, copy=False)
    return pa.Array.from_buffers(binary_type, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
