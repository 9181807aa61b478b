"""Pure-Python twin of ``native/_value_encoding.pyx``: the row value encoding.

The byte layout is specified in docs/format.md section 2; this module is its reference
implementation. The native module must produce identical bytes, decode to identical values and
raise the same exception classes (and the same ``DecodeError`` offsets and reasons); it reuses
the DECIMAL helpers marked "shared with native" below, so that cold path exists once.

Encoding in one paragraph: a row is a format tag, the column count, a null bitmap (bit i set =
column i is NULL) and then only the non-NULL values, each in a fixed-width little-endian or
length-prefixed form chosen by its column type. STRUCT values repeat the bitmap-then-values
shape for their fields, LIST values prefix it with an element count. Nothing is order-preserving;
the point is compactness and a decoder that detects any truncated or malformed row.

Checking order (the native module follows it exactly): values are checked and encoded one by
one, depth first, so the first bad value in that order decides which exception is raised.

Callers: :mod:`relational.value_encoding` only (which re-exports the chosen implementation).
"""

from __future__ import annotations

import datetime
import decimal
import struct

import numpy as np

from relational.errors import DecodeError, SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational.types import DataType, Interval, TypeKind

# --- frozen constants: part of the on-disk format, do not change -------------------------
FORMAT_TAG = 0x01              # first byte of every row

DECIMAL_FINITE = 0x00          # then: sign u8, zigzag-varint exponent, varint len, coefficient
DECIMAL_NAN = 0x01             # quiet NaN; sign and diagnostic payload are not kept
DECIMAL_POS_INF = 0x02
DECIMAL_NEG_INF = 0x03

UNIX_EPOCH_ORDINAL = 719163    # datetime.date(1970, 1, 1).toordinal()
FLOAT32_CANONICAL_NAN = 0x7FC00000          # every REAL NaN is written with these bits
FLOAT64_CANONICAL_NAN = 0x7FF8000000000000  # every DOUBLE NaN is written with these bits
MAX_VARINT_LEN = 10            # unsigned LEB128 of a u64
# -------------------------------------------------------------------------------------------

USECS_PER_DAY = 86_400_000_000
MIN_DAYS = 1 - UNIX_EPOCH_ORDINAL                 # 0001-01-01
MAX_DAYS = 3_652_059 - UNIX_EPOCH_ORDINAL         # 9999-12-31
MIN_USECS = MIN_DAYS * USECS_PER_DAY              # 0001-01-01T00:00:00
MAX_USECS = (MAX_DAYS + 1) * USECS_PER_DAY - 1    # 9999-12-31T23:59:59.999999
DECIMAL_MAX_ADJUSTED = 1 << 30                    # |adjusted exponent| bound of DataType.validate
#: Most digits a DECIMAL coefficient may have: Postgres' unconstrained NUMERIC (131072 digits
#: before the point, 16383 after). Encoders refuse more (ValueOutOfRangeError) and decoders call
#: more a DecodeError, so a hostile length cannot make a decoder convert a huge integer.
DECIMAL_MAX_PRECISION = 131072 + 16383
#: Bytes of the largest coefficient, 10**DECIMAL_MAX_PRECISION - 1 (pinned by a test).
DECIMAL_MAX_COEFFICIENT_BYTES = 61230

_UTC = datetime.timezone.utc
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_AWARE = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_DECIMAL_NAN = decimal.Decimal("NaN")
_DECIMAL_POS_INF = decimal.Decimal("Infinity")
_DECIMAL_NEG_INF = decimal.Decimal("-Infinity")

_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_INTERVAL = struct.Struct("<iiq")
_INT32_RANGE = range(-(1 << 31), 1 << 31)
_INT64_RANGE = range(-(1 << 63), 1 << 63)


def _error(reason: str, offset: int) -> DecodeError:
    return DecodeError(reason, offset, "value")


# --- varints and DECIMAL: shared with native ----------------------------------------------

def put_varint(out: bytearray, n: int) -> None:
    """Append unsigned LEB128 of ``0 <= n < 2**64``."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def get_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Read a varint at ``pos``; return ``(value, new_pos)``. Raises DecodeError (offset = start)
    when it runs past the end or does not fit in 64 bits."""
    start = pos
    end = len(data)
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise _error("truncated varint", start)
        byte = data[pos]
        if shift == 63 and byte > 1:
            raise _error("varint exceeds 64 bits", start)
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def need(data: bytes, pos: int, n: int) -> None:
    """Raise DecodeError at ``pos`` unless ``n`` more bytes follow it."""
    left = len(data) - pos
    if n > left:
        raise _error(f"truncated: need {n} bytes, {left} left", pos)


def put_decimal(out: bytearray, value: decimal.Decimal) -> None:
    """Append the encoding of a DECIMAL already checked by ``DataType.validate``."""
    sign, digits, exponent = value.as_tuple()
    if exponent == "n":
        out.append(DECIMAL_NAN)
        return
    if exponent == "F":
        out.append(DECIMAL_NEG_INF if sign else DECIMAL_POS_INF)
        return
    if not isinstance(exponent, int) or not -(1 << 63) <= exponent < (1 << 63):
        raise ValueOutOfRangeError(f"DECIMAL exponent out of range: {value!r:.80}")
    if len(digits) > DECIMAL_MAX_PRECISION:
        raise ValueOutOfRangeError(f"DECIMAL of {len(digits)} digits exceeds the precision limit "
                                   f"{DECIMAL_MAX_PRECISION}: {value!r:.80}")
    # Decimal((0, digits, 0)) is exact whatever the context, and int() of it avoids str(int)
    coefficient = int(decimal.Decimal((0, digits, 0)))
    raw = coefficient.to_bytes((coefficient.bit_length() + 7) // 8, "big")
    out.append(DECIMAL_FINITE)
    out.append(sign)
    put_varint(out, exponent << 1 if exponent >= 0 else (-exponent << 1) - 1)  # zigzag
    put_varint(out, len(raw))
    out += raw


_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_POW256 = (decimal.Decimal(256),)   # _POW256[j] = 256 ** (2 ** j), exact; grown by replacement


def _coefficient_decimal(raw: bytes) -> decimal.Decimal:
    """The big-endian unsigned integer ``raw`` as an exact Decimal, divide and conquer: a plain
    ``Decimal(int)`` is quadratic in the length, this is as fast as decimal's multiplication."""
    if len(raw) <= 256:
        return decimal.Decimal(int.from_bytes(raw, "big"))
    global _POW256
    j = (len(raw) - 1).bit_length() - 1     # the low 2**j bytes, 2**j < len(raw) <= 2**(j+1)
    powers = _POW256
    if len(powers) <= j:                    # a new tuple, so concurrent callers never see a gap
        grown = list(powers)
        while len(grown) <= j:
            grown.append(_EXACT.multiply(grown[-1], grown[-1]))
        _POW256 = powers = tuple(grown)
    low = 1 << j
    high = _coefficient_decimal(raw[:-low])
    return _EXACT.add(_EXACT.multiply(high, powers[j]), _coefficient_decimal(raw[-low:]))


def get_decimal(data: bytes, pos: int) -> tuple[decimal.Decimal, int]:
    """Decode a DECIMAL at ``pos``; return ``(value, new_pos)`` or raise DecodeError."""
    start = pos
    need(data, pos, 1)
    kind = data[pos]
    pos += 1
    if kind == DECIMAL_NAN:
        return _DECIMAL_NAN, pos
    if kind == DECIMAL_POS_INF:
        return _DECIMAL_POS_INF, pos
    if kind == DECIMAL_NEG_INF:
        return _DECIMAL_NEG_INF, pos
    if kind != DECIMAL_FINITE:
        raise _error(f"unknown DECIMAL kind 0x{kind:02x}", start)
    need(data, pos, 1)
    sign = data[pos]
    if sign > 1:
        raise _error(f"DECIMAL sign byte must be 0 or 1, found 0x{sign:02x}", pos)
    exponent_pos = pos + 1
    zigzag, pos = get_varint(data, exponent_pos)
    exponent = (zigzag >> 1) ^ -(zigzag & 1)
    length_pos = pos
    length, pos = get_varint(data, pos)
    need(data, pos, length)
    raw = data[pos:pos + length].lstrip(b"\x00")   # coefficients need not be minimal
    pos += length
    if len(raw) > DECIMAL_MAX_COEFFICIENT_BYTES:
        raise _error(f"DECIMAL coefficient of {len(raw)} bytes exceeds {DECIMAL_MAX_PRECISION} digits",
                     length_pos)
    magnitude = None if len(raw) <= 64 else _coefficient_decimal(raw)
    if magnitude is not None and magnitude.adjusted() >= DECIMAL_MAX_PRECISION:
        raise _error(f"DECIMAL coefficient exceeds {DECIMAL_MAX_PRECISION} digits", length_pos)
    if not decimal.MIN_ETINY <= exponent <= decimal.MAX_EMAX:
        raise _error(f"DECIMAL exponent {exponent} out of range", exponent_pos)
    try:
        if magnitude is None:   # str() of at most 155 digits: well below any int_max_str_digits
            value = decimal.Decimal(f"{'-' if sign else ''}{int.from_bytes(raw, 'big')}E{exponent}")
        else:
            value = decimal.Decimal((sign, magnitude.as_tuple().digits, exponent))
    except (decimal.InvalidOperation, ValueError, OverflowError):
        raise _error(f"DECIMAL exponent {exponent} out of range", exponent_pos) from None
    if raw and not -DECIMAL_MAX_ADJUSTED < value.adjusted() < DECIMAL_MAX_ADJUSTED:
        raise _error(f"DECIMAL exponent {exponent} out of range", exponent_pos)
    return value, pos


# --- encoding ------------------------------------------------------------------------------

def _naive_usecs(value: datetime.datetime) -> int:
    """Microseconds from 1970-01-01T00:00 to ``value``'s wall-clock fields (tzinfo ignored)."""
    days = value.toordinal() - UNIX_EPOCH_ORDINAL
    seconds = (value.hour * 60 + value.minute) * 60 + value.second
    return days * USECS_PER_DAY + seconds * 1_000_000 + value.microsecond


def _put_boolean(out, dtype, value):
    out.append(1 if dtype.validate(value) else 0)


def _put_smallint(out, dtype, value):
    out += _I16.pack(dtype.validate(value))


def _put_int(out, dtype, value):
    out += _I32.pack(dtype.validate(value))


def _put_bigint(out, dtype, value):
    out += _I64.pack(dtype.validate(value))


def _put_decimal(out, dtype, value):
    put_decimal(out, dtype.validate(value))


def _put_real(out, dtype, value):
    value = dtype.validate(value)
    out += _U32.pack(FLOAT32_CANONICAL_NAN) if value != value else _F32.pack(value)


def _put_double(out, dtype, value):
    value = dtype.validate(value)
    out += _U64.pack(FLOAT64_CANONICAL_NAN) if value != value else _F64.pack(value)


def _put_varchar(out, dtype, value):
    raw = str.encode(dtype.validate(value), "utf-8")
    put_varint(out, len(raw))
    out += raw


def _put_bytea(out, dtype, value):
    raw = memoryview(dtype.validate(value))
    put_varint(out, raw.nbytes)
    out += raw


def _put_date(out, dtype, value):
    out += _I32.pack(dtype.validate(value).toordinal() - UNIX_EPOCH_ORDINAL)


def _put_time(out, dtype, value):
    value = dtype.validate(value)
    seconds = (value.hour * 60 + value.minute) * 60 + value.second
    out += _I64.pack(seconds * 1_000_000 + value.microsecond)


def _put_timestamp(out, dtype, value):
    out += _I64.pack(_naive_usecs(dtype.validate(value)))


def _put_timestamptz(out, dtype, value):
    value = dtype.validate(value)
    offset = value.utcoffset()
    usecs = _naive_usecs(value) - ((offset.days * 86_400 + offset.seconds) * 1_000_000 + offset.microseconds)
    if not MIN_USECS <= usecs <= MAX_USECS:
        raise ValueOutOfRangeError(f"TIMESTAMP WITH TIME ZONE out of range in UTC: {value!r:.80}")
    out += _I64.pack(usecs)


def _put_interval(out, dtype, value):
    value = dtype.validate(value)
    months, days, usecs = value.months, value.days, value.usecs
    if months not in _INT32_RANGE or days not in _INT32_RANGE or usecs not in _INT64_RANGE:
        raise ValueOutOfRangeError(f"INTERVAL field out of range: {value!r:.80}")
    out += _INTERVAL.pack(months, days, usecs)


def _put_struct(out, dtype, value):
    if not isinstance(value, tuple) or len(value) != len(dtype.fields):
        dtype.validate(value)  # raises the TypeMismatchError naming the problem
    _put_values(out, value, [ftype for _, ftype in dtype.fields])


def _put_list(out, dtype, value):
    if not isinstance(value, (list, tuple)):
        dtype.validate(value)  # raises TypeMismatchError
    value = tuple(value)
    put_varint(out, len(value))
    _put_values(out, value, [dtype.elem] * len(value))


_PUT = {
    TypeKind.BOOLEAN: _put_boolean,
    TypeKind.SMALLINT: _put_smallint,
    TypeKind.INT: _put_int,
    TypeKind.BIGINT: _put_bigint,
    TypeKind.DECIMAL: _put_decimal,
    TypeKind.REAL: _put_real,
    TypeKind.DOUBLE: _put_double,
    TypeKind.VARCHAR: _put_varchar,
    TypeKind.BYTEA: _put_bytea,
    TypeKind.DATE: _put_date,
    TypeKind.TIME: _put_time,
    TypeKind.TIMESTAMP: _put_timestamp,
    TypeKind.TIMESTAMPTZ: _put_timestamptz,
    TypeKind.INTERVAL: _put_interval,
    TypeKind.STRUCT: _put_struct,
    TypeKind.LIST: _put_list,
    TypeKind.JSONB: _put_varchar,   # the normal text (DataType.JSONB.validate), stored as VARCHAR is
}


def _put_values(out: bytearray, values: tuple, types) -> None:
    """Null bitmap of ``values`` then each non-NULL value; ``len(types) == len(values)``."""
    bitmap = len(out)
    out += bytes((len(values) + 7) >> 3)
    for i, (dtype, value) in enumerate(zip(types, values)):
        if value is None:
            out[bitmap + (i >> 3)] |= 1 << (i & 7)
        else:
            _PUT[dtype.kind](out, dtype, value)


def _compile(types) -> tuple:
    try:
        types = tuple(types)
    except TypeError:
        raise SchemaError(f"types must be a sequence of DataType, got {types!r:.80}") from None
    for dtype in types:
        if not isinstance(dtype, DataType):
            raise SchemaError(f"expected DataType, got {dtype!r:.80}")
    return types


def _encode(values, types: tuple) -> bytes:
    try:
        values = tuple(values)
    except TypeError:
        raise SchemaError(f"a row must be a sequence of values, got {type(values).__name__}") from None
    if len(values) != len(types):
        raise SchemaError(f"row has {len(values)} values but the schema has {len(types)} columns")
    out = bytearray((FORMAT_TAG,))
    put_varint(out, len(types))
    _put_values(out, values, types)
    return bytes(out)


def encode_row(values, types) -> bytes:
    """Value-encode one row; see :func:`relational.value_encoding.encode_row`."""
    return _encode(values, _compile(types))


def encode_rows(rows, types) -> list:
    """:func:`encode_row` for every row of ``rows`` with one schema."""
    types = _compile(types)
    return [_encode(values, types) for values in rows]


# --- decoding ------------------------------------------------------------------------------

def _get_fixed(codec: struct.Struct):
    def get(data, pos, dtype):
        need(data, pos, codec.size)
        return codec.unpack_from(data, pos)[0], pos + codec.size
    return get


_get_smallint = _get_fixed(_I16)
_get_int = _get_fixed(_I32)
_get_bigint = _get_fixed(_I64)
_get_real = _get_fixed(_F32)
_get_double = _get_fixed(_F64)
_get_i64 = _get_fixed(_I64)


def _get_boolean(data, pos, dtype):
    need(data, pos, 1)
    byte = data[pos]
    if byte > 1:
        raise _error(f"BOOLEAN byte must be 0 or 1, found 0x{byte:02x}", pos)
    return byte == 1, pos + 1


def _get_decimal(data, pos, dtype):
    return get_decimal(data, pos)


def _get_bytes(data, pos):
    length, pos = get_varint(data, pos)
    need(data, pos, length)
    return data[pos:pos + length], pos, pos + length


def _get_varchar(data, pos, dtype):
    raw, start, pos = _get_bytes(data, pos)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError as exc:
        raise _error(f"VARCHAR is not valid UTF-8: {exc.reason}", start) from None


def _get_bytea(data, pos, dtype):
    raw, _, pos = _get_bytes(data, pos)
    return raw, pos


def _get_date(data, pos, dtype):
    days, end = _get_int(data, pos, dtype)
    if not MIN_DAYS <= days <= MAX_DAYS:
        raise _error(f"DATE {days} days from 1970-01-01 is out of range", pos)
    return datetime.date.fromordinal(days + UNIX_EPOCH_ORDINAL), end


def _get_time(data, pos, dtype):
    usecs, end = _get_i64(data, pos, dtype)
    if not 0 <= usecs < USECS_PER_DAY:
        raise _error(f"TIME {usecs} usecs after midnight is out of range", pos)
    seconds, micro = divmod(usecs, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return datetime.time(hour, minute, second, micro), end


def _get_timestamp(data, pos, dtype):
    usecs, end = _get_i64(data, pos, dtype)
    if not MIN_USECS <= usecs <= MAX_USECS:
        raise _error(f"TIMESTAMP {usecs} usecs from 1970-01-01 is out of range", pos)
    base = _EPOCH_AWARE if dtype.kind == TypeKind.TIMESTAMPTZ else _EPOCH_NAIVE
    return base + datetime.timedelta(microseconds=usecs), end


def _get_interval(data, pos, dtype):
    need(data, pos, _INTERVAL.size)
    return Interval(*_INTERVAL.unpack_from(data, pos)), pos + _INTERVAL.size


def _get_struct(data, pos, dtype):
    return _get_values(data, pos, [ftype for _, ftype in dtype.fields])


def _get_list(data, pos, dtype):
    count, pos = get_varint(data, pos)
    need(data, pos, (count >> 3) + (count & 7 != 0))   # the bitmap bounds count by the input
    values, pos = _get_values(data, pos, [dtype.elem] * count)
    return list(values), pos


_GET = {
    TypeKind.BOOLEAN: _get_boolean,
    TypeKind.SMALLINT: _get_smallint,
    TypeKind.INT: _get_int,
    TypeKind.BIGINT: _get_bigint,
    TypeKind.DECIMAL: _get_decimal,
    TypeKind.REAL: _get_real,
    TypeKind.DOUBLE: _get_double,
    TypeKind.VARCHAR: _get_varchar,
    TypeKind.BYTEA: _get_bytea,
    TypeKind.DATE: _get_date,
    TypeKind.TIME: _get_time,
    TypeKind.TIMESTAMP: _get_timestamp,
    TypeKind.TIMESTAMPTZ: _get_timestamp,
    TypeKind.INTERVAL: _get_interval,
    TypeKind.STRUCT: _get_struct,
    TypeKind.LIST: _get_list,
    TypeKind.JSONB: _get_varchar,   # the stored text is already the normal text
}


def _get_values(data: bytes, pos: int, types) -> tuple[tuple, int]:
    """Read a null bitmap for ``len(types)`` values, then the non-NULL ones."""
    n = len(types)
    size = (n + 7) >> 3
    need(data, pos, size)
    bitmap = pos
    if n & 7 and data[bitmap + size - 1] >> (n & 7):
        raise _error("nonzero padding bits in null bitmap", bitmap + size - 1)
    pos += size
    values = []
    for i, dtype in enumerate(types):
        # one byte per test: a bitmap read as one big integer makes a long LIST quadratic
        if data[bitmap + (i >> 3)] >> (i & 7) & 1:
            values.append(None)
        else:
            value, pos = _GET[dtype.kind](data, pos, dtype)
            values.append(value)
    return tuple(values), pos


def _as_bytes(data) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeMismatchError(f"encoded row must be bytes-like, got {type(data).__name__}")


def _decode(data, types: tuple) -> tuple:
    data = _as_bytes(data)
    need(data, 0, 1)
    if data[0] != FORMAT_TAG:
        raise _error(f"unknown format tag 0x{data[0]:02x}", 0)
    count, pos = get_varint(data, 1)
    if count != len(types):
        raise _error(f"row has {count} columns, schema has {len(types)}", 1)
    values, pos = _get_values(data, pos, types)
    if pos != len(data):
        raise _error(f"{len(data) - pos} trailing bytes after the row", pos)
    return values


def decode_row(data, types) -> tuple:
    """Decode one value-encoded row; see :func:`relational.value_encoding.decode_row`."""
    return _decode(data, _compile(types))


def decode_rows(datas, types) -> list:
    """:func:`decode_row` for every buffer of ``datas`` with one schema."""
    types = _compile(types)
    return [_decode(data, types) for data in datas]


# --- whole columns (no Python value per cell) ----------------------------------------------

#: widths of ``encode_column_buffers``' fixed-width columns (0: length-prefixed bytes)
COLUMN_WIDTHS = (-1, 0, 1, 2, 4, 8)   # -1: pre-encoded values (no length prefix)


def _view(obj, fmt, what: str) -> memoryview:
    """``obj`` as a flat memoryview of bytes (``fmt`` None) or of int64s; TypeError otherwise."""
    try:
        view = memoryview(obj).cast("B")
        return view if fmt is None else view.cast(fmt)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: {exc}") from None


def _check_buffers(cols, n: int) -> list:
    """The column descriptors of ``encode_column_buffers``, checked (see its docstring)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"the row count must be an int >= 0, got {n!r:.40}")
    if not isinstance(cols, (list, tuple)):
        raise TypeError(f"columns must be a list of descriptors, got {type(cols).__name__}")
    out = []
    for i, col in enumerate(cols):
        if not isinstance(col, tuple) or len(col) != 4:
            raise ValueError(f"column {i}: a descriptor is a (width, values, data, nulls) tuple")
        width, values, data, nulls = col
        if type(width) is not int or width not in COLUMN_WIDTHS:
            raise ValueError(f"column {i}: width must be one of {COLUMN_WIDTHS}, got {width!r:.40}")
        values = _view(values, "q", "column values must be a contiguous int64 buffer")
        want = n + 1 if width <= 0 else n
        if len(values) != want:
            raise ValueError(f"column {i}: {len(values)} values, expected {want}")
        if width <= 0:
            data = _view(data, None, "column data must be a contiguous buffer")
            previous = 0
            for j in range(n + 1):
                end = values[j]
                if end < previous or end > len(data):
                    raise ValueError(f"column {i}: offset {j} is {end}, outside [{previous}, {len(data)}]")
                previous = end
        if nulls is not None:
            nulls = _view(nulls, None, "column data must be a contiguous buffer")
            if len(nulls) != n:
                raise ValueError(f"column {i}: {len(nulls)} null flags, expected {n}")
        out.append((width, values, data, nulls))
    return out


def encode_column_buffers(cols, n, order=None) -> list:
    """The value encoding of ``n`` rows given as columns of raw buffers: ``encode_rows`` of
    the rows whose values these buffers hold, without a Python value per cell.

    ``cols``: one ``(width, values, data, nulls)`` per column, in value order:
    - ``width`` 1, 2, 4 or 8: ``values`` holds ``n`` int64s; row ``j`` writes the low ``width``
      bytes of ``values[j]``, little-endian (the caller prepared them: integers checked to fit
      their type, floats as their bit patterns with NaNs canonical, booleans as 0/1);
    - ``width`` 0: length-prefixed bytes; ``values`` holds ``n + 1`` int64 offsets into the
      bytes-like ``data`` (non-decreasing, within ``data``), row ``j`` writes the varint length
      then ``data[values[j]:values[j + 1]]`` (VARCHAR as UTF-8, BYTEA as is);
    - ``width`` -1: pre-encoded values, as width 0 without the length (a DECIMAL's encoding,
      which delimits itself);
    - ``nulls``: ``None`` or ``n`` bytes, nonzero = NULL (the row's bitmap bit is set and
      nothing is written for it).

    ``order`` (optional): ``n`` int64s, a row number in ``[0, n)`` each; the rows are written in
    that order (row ``order[0]`` first), e.g. sorted by key.

    Raises ``ValueError`` for a descriptor that does not fit (width, lengths, an offset out of
    order or outside ``data``) or a bad ``order``, and ``TypeError`` for one that is not a
    buffer, before writing. Callers: :mod:`relational.value_columns` only (which prepares the
    buffers)."""
    cols = _check_buffers(cols, n)
    rows = range(n)
    if order is not None:
        rows = _view(order, "q", "column values must be a contiguous int64 buffer")
        if len(rows) != n:
            raise ValueError(f"order has {len(rows)} entries, expected {n}")
        for j, row in enumerate(rows):
            if not 0 <= row < n:
                raise ValueError(f"order entry {j} is {row}, outside [0, {n})")
    head = bytearray((FORMAT_TAG,))
    put_varint(head, len(cols))
    size = (len(cols) + 7) >> 3
    out = []
    for j in rows:
        row = bytearray(head)
        bitmap = len(row)
        row += bytes(size)
        for i, (width, values, data, nulls) in enumerate(cols):
            if nulls is not None and nulls[j]:
                row[bitmap + (i >> 3)] |= 1 << (i & 7)
            elif width > 0:
                row += (values[j] & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            else:
                start, end = values[j], values[j + 1]
                if width == 0:
                    put_varint(row, end - start)
                row += data[start:end]
        out.append(bytes(row))
    return out


def encode_column_buffer(cols, n, order=None) -> tuple:
    """:func:`encode_column_buffers` packed: ``(data, offsets)``, the rows' encodings back to
    back in one ``bytes`` object and a numpy ``int64`` array of ``n + 1`` offsets into it (row
    ``r`` is ``data[offsets[r]:offsets[r + 1]]``; ``offsets[0]`` is 0). Same arguments, checks
    and exceptions. Callers: :mod:`relational.value_columns` only (the packed insert path)."""
    rows = encode_column_buffers(cols, n, order)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    if rows:
        np.cumsum([len(row) for row in rows], out=offsets[1:])
    return b"".join(rows), offsets
