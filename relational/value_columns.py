"""Whole columns to value-encoded rows, without a Python value per cell.

Job: the fast path of :meth:`relational.row_serde.RowSerde.encode_chunk` for the value: a
chunk's value columns, given as Arrow arrays (or numpy arrays), are turned into raw buffers
(int64 values, or offsets into UTF-8/bytes data, plus NULL flags) with numpy and Arrow, and
the native ``encode_column_buffers`` (twin in ``relational/_value_encoding_py.py``) writes
each row's bytes in one loop.

Invariant: :func:`encode_columns` returns exactly ``value_encoding.encode_rows`` of the rows
the columns hold (``to_pylist`` of each column), byte for byte, or ``None`` when it cannot
promise that cheaply; the caller then takes the row path, which also raises the typed error
of a bad value. Columns it takes: Arrow or numpy columns of

=============  ==========================================================================
SMALLINT/INT/  any Arrow or numpy integer type whose values all fit the column's type
BIGINT
BOOLEAN        Arrow bool, numpy bool
DOUBLE         Arrow or numpy float16/32/64 (widened exactly; every NaN written canonical)
REAL           Arrow or numpy float32 (NaN canonical)
VARCHAR        Arrow string / large_string whose data is valid UTF-8 (checked)
BYTEA          Arrow binary / large_binary
DATE           Arrow date32 (days) within Python's date range
TIMESTAMP      Arrow timestamp[us] (naive) within Python's datetime range
TIMESTAMPTZ    Arrow timestamp[us, tz=UTC], same range
DECIMAL        Arrow string of plain numerals (``-12.50``) of at most 18 digits, encoded
               with numpy into the pre-encoded (-1) descriptor
=============  ==========================================================================

Anything else (another type, a Python sequence, a ChunkedArray of several chunks, a column of
the wrong length) gives ``None``.

:func:`describe_columns` then :func:`encode_described` give the same bytes as one buffer and
its offsets (the packed insert path: no ``bytes`` object per row).

Callers: :mod:`relational.row_serde` only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hummock import _twins
from relational._value_encoding_py import DECIMAL_FINITE
from relational.types import TypeKind

_impl = _twins.load("_value_encoding", "relational._value_encoding_py")

_INT_RANGES = {TypeKind.SMALLINT: (2, -(1 << 15), (1 << 15) - 1), TypeKind.INT: (4, -(1 << 31), (1 << 31) - 1),
               TypeKind.BIGINT: (8, -(1 << 63), (1 << 63) - 1)}
_FLOAT64_CANONICAL_NAN = np.int64(0x7FF8000000000000)
_FLOAT32_CANONICAL_NAN = np.int64(0x7FC00000)
_FIXED_KINDS = frozenset((*_INT_RANGES, TypeKind.BOOLEAN, TypeKind.DOUBLE, TypeKind.REAL))
_BYTES_TYPES = {TypeKind.VARCHAR: (pa.string(), pa.large_string()), TypeKind.BYTEA: (pa.binary(), pa.large_binary())}


def encode_columns(columns, types, num_rows: int, order=None):
    """``encode_rows`` of the rows held by ``columns`` (value order, one per type), or
    ``None`` when a column is not one the module docstring lists. ``order`` (a numpy int64
    array of row numbers, optional): the rows in that order instead of the columns' order."""
    descriptors = describe_columns(columns, types, num_rows)
    return None if descriptors is None else _impl.encode_column_buffers(descriptors, num_rows, order)


def encode_described(descriptors: list, num_rows: int, order=None):
    """:func:`encode_columns` packed, of columns :func:`describe_columns` took: ``(data,
    offsets)`` -- the rows' encodings back to back in one ``bytes`` object and a numpy
    ``int64`` array of ``num_rows + 1`` offsets, starting at 0."""
    return _impl.encode_column_buffer(descriptors, num_rows, order)


def describe_columns(columns, types, num_rows: int):
    """Each column's ``encode_column_buffers`` descriptor, or None when one is not listed."""
    if num_rows == 0:
        return None
    descriptors = []
    for column, dtype in zip(columns, types):
        descriptor = _describe(column, dtype, num_rows)
        if descriptor is None:
            return None
        descriptors.append(descriptor)
    return descriptors


def _describe(column, dtype, n: int):
    """``(width, values, data, nulls)`` of one column for ``encode_column_buffers``, or None."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks != 1:
            return None
        column = column.chunk(0)
    if len(column) != n:
        return None
    kind = dtype.kind
    if isinstance(column, np.ndarray):
        if column.ndim != 1:
            return None
        values, nulls = column, None
    elif isinstance(column, pa.Array):
        if kind in _BYTES_TYPES:
            return _bytes_column(column, kind, n)
        if kind in _TEMPORAL:
            return _temporal_column(column, kind)
        if kind == TypeKind.DECIMAL:
            return _decimal_column(column, n)
        if kind not in _FIXED_KINDS or not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                                            or pa.types.is_boolean(column.type)):
            return None
        nulls = None
        if column.null_count:
            nulls = column.is_null().to_numpy(zero_copy_only=False).view(np.uint8)
            column = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
        values = column.to_numpy(zero_copy_only=False)
    else:
        return None
    fixed = _fixed(values, kind)
    return None if fixed is None else (fixed[0], fixed[1], None, nulls)


def _fixed(values: np.ndarray, kind):
    """``(width, int64 values)`` of a numpy column for ``kind``, or None."""
    dt = values.dtype
    if kind in _INT_RANGES:
        if dt.kind not in "iu":
            return None
        width, lo, hi = _INT_RANGES[kind]
        dt_lo, dt_hi = _dtype_range(dt)
        if dt_lo < lo or dt_hi > hi:   # a wider type: check the values
            if len(values) and (int(values.min()) < lo or int(values.max()) > hi):
                return None
        return width, np.ascontiguousarray(values, dtype=np.int64)
    if kind == TypeKind.BOOLEAN:
        return (1, values.astype(np.int64)) if dt == np.bool_ else None
    if kind == TypeKind.DOUBLE:
        if dt.kind != "f":
            return None
        floats = np.ascontiguousarray(values, dtype=np.float64)
        bits = floats.view(np.int64).copy()
        bits[np.isnan(floats)] = _FLOAT64_CANONICAL_NAN
        return 8, bits
    if kind == TypeKind.REAL:
        if dt != np.float32:
            return None
        floats = np.ascontiguousarray(values)
        bits = floats.view(np.int32).astype(np.int64)
        bits[np.isnan(floats)] = _FLOAT32_CANONICAL_NAN
        return 4, bits
    return None


def _temporal_column(column: pa.Array, kind):
    """DATE (Arrow date32: i32 days) and TIMESTAMP[TZ] (Arrow timestamp[us], naive or UTC:
    i64 microseconds) as the integers the value encoding stores, when every value lies in
    Python's date/datetime range (the row path refuses the others), else None."""
    arrow_type, width, lo, hi = _TEMPORAL[kind]
    if column.type != arrow_type:
        return None
    nulls = None
    if column.null_count:
        nulls = column.is_null().to_numpy(zero_copy_only=False).view(np.uint8)
    ints = column.view(pa.int32() if width == 4 else pa.int64())
    if column.null_count:
        ints = ints.fill_null(0)
    values = ints.to_numpy(zero_copy_only=False)
    if len(values) and (int(values.min()) < lo or int(values.max()) > hi):
        return None
    return width, np.ascontiguousarray(values, dtype=np.int64), None, nulls


_POW256 = np.array([1 << (8 * k) for k in range(8)], dtype=np.int64)   # the byte-length thresholds
_OFFSET_TYPES = {pa.string(): np.int32, pa.large_string(): np.int64}


def _decimal_column(column: pa.Array, n: int):
    """A DECIMAL column (Arrow strings, ``relational.arrow``'s layout) of plain numerals
    (``-12.50``: no exponent, NaN or Infinity) with at most 18 digits, as each value's encoding
    (``_value_encoding_py.put_decimal``: class byte, sign, zigzag exponent, coefficient length,
    big-endian coefficient) built with numpy -- the -1 (pre-encoded) descriptor; else None."""
    if column.type not in _OFFSET_TYPES:
        return None
    nulls = None
    text = column
    if column.null_count:
        nulls = column.is_null().to_numpy(zero_copy_only=False).view(np.uint8)
        text = column.fill_null("0")
    parsed = _plain_numerals(text, n)
    if parsed is None:
        return None
    negative, scale, coefficient = parsed
    nbytes = np.searchsorted(_POW256, coefficient, side="right")   # minimal big-endian length
    # each row's 12 candidate bytes: class, sign, zigzag exponent (< 128: one byte), length and
    # the coefficient's 8 big-endian bytes, of which the last ``nbytes`` are kept
    cells = np.empty((n, 12), np.uint8)
    cells[:, 0] = DECIMAL_FINITE
    cells[:, 1] = negative
    cells[:, 2] = 2 * scale - (scale > 0)
    cells[:, 3] = nbytes
    cells[:, 4:] = coefficient.astype(">u8").view(np.uint8).reshape(n, 8)
    keep = np.empty((n, 12), np.bool_)
    keep[:, :4] = True
    keep[:, 4:] = np.arange(8) >= (8 - nbytes)[:, None]
    sizes = 4 + nbytes
    if nulls is not None:
        keep[nulls.view(np.bool_)] = False
        sizes[nulls.view(np.bool_)] = 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return -1, offsets, cells[keep], nulls


def _plain_numerals(text: pa.Array, n: int):
    """``(negative, scale, coefficient)`` (numpy bool, int64, int64) of a string array whose
    every value matches ``-?[0-9]+(\\.[0-9]+)?`` with at most 18 digits, or None when some value
    does not: the bytes are checked with numpy, and the digits alone (a copy without the '-'
    and '.' bytes, when there are any) are cast to int64 by Arrow."""
    dtype = _OFFSET_TYPES[text.type]
    _, offset_buf, data_buf = text.buffers()
    ends = np.frombuffer(offset_buf, dtype, n + 1, text.offset * np.dtype(dtype).itemsize).astype(np.int64)
    lengths = np.diff(ends)
    if not n or int(lengths.min()) < 1:   # (an empty string is no numeral)
        return None
    base = int(ends[0])
    ends -= base
    starts = ends[:-1]
    data = np.frombuffer(data_buf, np.uint8, int(ends[-1]), base)
    is_digit = (data - np.uint8(48)) <= 9   # '0'..'9' (any other byte wraps above 9)
    if is_digit.all():                     # integers: the text is the digits
        if int(lengths.max()) > 18:        # the coefficient must fit an int64
            return None
        return np.zeros(n, np.bool_), np.zeros(n, np.int64), \
            pc.cast(text, pa.int64()).to_numpy(zero_copy_only=False)
    is_minus = data == 45
    is_dot = data == 46
    if not (is_digit | is_minus | is_dot).all():
        return None
    negative = data[starts] == 45          # a '-' only as a value's first byte
    if int(is_minus.sum()) != int(negative.sum()):
        return None
    stripped = negative.astype(np.int64)   # per value: its bytes that are not digits
    scale = np.zeros(n, np.int64)
    dots = np.flatnonzero(is_dot)
    if len(dots):                          # at most one '.' a value, with digits on both sides
        rows = np.searchsorted(starts, dots, side="right") - 1
        if len(rows) > 1 and not (np.diff(rows) > 0).all():
            return None
        ends_of = ends[rows + 1]
        if ((dots <= starts[rows] + negative[rows]) | (dots >= ends_of - 1)).any():
            return None
        scale[rows] = ends_of - 1 - dots
        stripped[rows] += 1
    ndigits = lengths - stripped
    if int(ndigits.min()) < 1 or int(ndigits.max()) > 18:   # '-' alone; past an int64
        return None
    digit_ends = np.zeros(n + 1, np.int64)
    np.cumsum(ndigits, out=digit_ends[1:])
    digits = pa.Array.from_buffers(pa.large_string(), n,
                                   [None, pa.py_buffer(digit_ends), pa.py_buffer(data[is_digit])])
    return negative, scale, pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)


_USECS_MIN, _USECS_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999   # 0001-01-01 .. 9999-12-31
_TEMPORAL = {TypeKind.DATE: (pa.date32(), 4, -719_162, 2_932_896),
             TypeKind.TIMESTAMP: (pa.timestamp("us"), 8, _USECS_MIN, _USECS_MAX),
             TypeKind.TIMESTAMPTZ: (pa.timestamp("us", tz="UTC"), 8, _USECS_MIN, _USECS_MAX)}

_DTYPE_RANGES: dict = {}


def _dtype_range(dt: np.dtype) -> tuple[int, int]:
    """``(min, max)`` of an integer numpy dtype (``np.iinfo`` builds an object per call: cached)."""
    found = _DTYPE_RANGES.get(dt)
    if found is None:
        info = np.iinfo(dt)
        found = _DTYPE_RANGES[dt] = (int(info.min), int(info.max))
    return found


def _bytes_column(column: pa.Array, kind, n: int):
    """The offsets, data and NULL flags of a VARCHAR or BYTEA Arrow column, or None."""
    if column.type not in _BYTES_TYPES[kind]:
        return None
    try:
        column.validate(full=True)    # offsets in bounds; VARCHAR: UTF-8, as to_pylist would decode it
    except pa.ArrowInvalid:
        return None
    _, offsets, data = column.buffers()
    dtype = np.int64 if column.type in (pa.large_string(), pa.large_binary()) else np.int32
    offsets = np.frombuffer(offsets, dtype=dtype)[column.offset:column.offset + n + 1].astype(np.int64)
    nulls = column.is_null().to_numpy(zero_copy_only=False).view(np.uint8) if column.null_count else None
    return 0, offsets, b"" if data is None else data, nulls
