"""Pure-Python twin of ``native/_memcomparable.pyx``: the memcomparable key encoding.

The byte layout is specified in docs/format.md section 1; this module is its reference
implementation. The native module must produce identical bytes and raise the same exception
classes; it reuses the cold-path helpers marked "shared with native" below.

Encoding in one paragraph: each column is a tag byte (``0x00`` NULL first / ``0x01`` not NULL /
``0x02`` NULL last) followed, when not NULL, by the value's ascending encoding XOR-ed with
``0xFF`` for a descending column. Every value encoding is prefix-free, so concatenations of
columns compare column by column, and complementing a prefix-free encoding reverses its order.

Callers: :mod:`relational.memcomparable` only (which re-exports the chosen implementation).
"""

from __future__ import annotations

import datetime
import decimal
import struct

from relational._value_encoding_py import DECIMAL_MAX_ADJUSTED, DECIMAL_MAX_PRECISION
from relational.errors import DecodeError, SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational import jsonb
from relational.types import DataType, Interval, TypeKind

# --- frozen constants: part of the on-disk format, do not change -------------------------
TAG_NULL_FIRST = 0x00
TAG_NOT_NULL = 0x01
TAG_NULL_LAST = 0x02

STRING_ESCAPE = 0x00     # 0x00 inside a string is written 0x00 0xFF
STRING_ESCAPED_ZERO = 0xFF
STRING_TERMINATOR = 0x01  # a string ends with 0x00 0x01

LIST_ELEMENT = 0x01       # before each list element
LIST_END = 0x00           # after the last one

DECIMAL_NEG_INF = 0x01
DECIMAL_NEGATIVE = 0x02
DECIMAL_ZERO = 0x03
DECIMAL_POSITIVE = 0x04
DECIMAL_POS_INF = 0x05
DECIMAL_NAN = 0x06
DECIMAL_EXPONENT_BIAS = 1 << 31   # exponent stored as u32be(E + bias)
DECIMAL_MANTISSA_END = 0x00       # digit-pair bytes are 1..100

UNIX_EPOCH_ORDINAL = 719163       # datetime.date(1970, 1, 1).toordinal()
FLOAT32_CANONICAL_NAN = 0x7FC00000
FLOAT64_CANONICAL_NAN = 0x7FF8000000000000
# -------------------------------------------------------------------------------------------

_UTC = datetime.timezone.utc
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_AWARE = datetime.datetime(1970, 1, 1, tzinfo=_UTC)


class CompiledSchema:
    """Types and orders checked once; what encode/decode iterate over per row."""

    __slots__ = ("types", "descending", "nulls_first")

    def __init__(self, types, orders):
        types = tuple(types)
        for t in types:
            if not isinstance(t, DataType):
                raise SchemaError(f"expected DataType, got {t!r}")
        if orders is None:
            orders = ()
            descending = (False,) * len(types)
            nulls_first = (False,) * len(types)
        else:
            orders = tuple(orders)
            if len(orders) != len(types):
                raise SchemaError(f"{len(types)} types but {len(orders)} orders")
            try:
                descending = tuple(bool(o.descending) for o in orders)
                nulls_first = tuple(bool(o.nulls_first) for o in orders)
            except AttributeError:
                raise SchemaError(f"orders must be OrderType objects, got {orders!r}") from None
        self.types = types
        self.descending = descending
        self.nulls_first = nulls_first


_SCHEMA_CACHE: dict = {}


def compile_schema(types, orders) -> CompiledSchema:
    """A cached :class:`CompiledSchema` for ``(types, orders)``."""
    try:
        key = (tuple(types), None if orders is None else tuple(orders))
        schema = _SCHEMA_CACHE.get(key)
    except TypeError:
        raise SchemaError("types and orders must be sequences of DataType and OrderType") from None
    if schema is None:
        schema = CompiledSchema(types, orders)
        if len(_SCHEMA_CACHE) > 4096:
            _SCHEMA_CACHE.clear()
        _SCHEMA_CACHE[key] = schema
    return schema


# --- cold-path helpers, shared with native -------------------------------------------------

def decimal_body(value: decimal.Decimal) -> bytes:
    """Ascending encoding of a validated DECIMAL value (tag byte included)."""
    if value.is_nan():
        return bytes((DECIMAL_NAN,))
    if value.is_infinite():
        return bytes((DECIMAL_NEG_INF if value < 0 else DECIMAL_POS_INF,))
    if value.is_zero():
        return bytes((DECIMAL_ZERO,))
    sign, digits, _ = value.as_tuple()
    if len(digits) > DECIMAL_MAX_PRECISION:   # the same limit as the value encoding
        raise ValueOutOfRangeError(f"DECIMAL of {len(digits)} digits exceeds the precision limit "
                                   f"{DECIMAL_MAX_PRECISION}: {value!r:.80}")
    exponent = value.adjusted() + 1          # value = 0.d1d2d3... * 10**exponent
    end = len(digits)
    while digits[end - 1] == 0:              # canonical: no trailing zeros (1.0 == 1.00)
        end -= 1
    digits = digits[:end]
    if len(digits) % 2:
        digits = digits + (0,)
    body = bytearray(struct.pack(">I", exponent + DECIMAL_EXPONENT_BIAS))
    body.extend(digits[i] * 10 + digits[i + 1] + 1 for i in range(0, len(digits), 2))
    body.append(DECIMAL_MANTISSA_END)
    if sign:
        return bytes((DECIMAL_NEGATIVE,)) + bytes(b ^ 0xFF for b in body)
    return bytes((DECIMAL_POSITIVE,)) + bytes(body)


def decode_decimal(data: bytes, pos: int, mask: int):
    """Decode a DECIMAL at ``pos`` (bytes XOR ``mask``); return ``(value, new_pos)``."""
    end = len(data)
    if pos >= end:
        raise DecodeError("truncated DECIMAL", pos, "memcomparable")
    tag = data[pos] ^ mask
    pos += 1
    if tag == DECIMAL_NAN:
        return decimal.Decimal("NaN"), pos
    if tag == DECIMAL_POS_INF:
        return decimal.Decimal("Infinity"), pos
    if tag == DECIMAL_NEG_INF:
        return decimal.Decimal("-Infinity"), pos
    if tag == DECIMAL_ZERO:
        return decimal.Decimal(0), pos
    if tag not in (DECIMAL_POSITIVE, DECIMAL_NEGATIVE):
        raise DecodeError(f"bad DECIMAL tag 0x{tag:02x}", pos - 1, "memcomparable")
    inner = mask ^ (0xFF if tag == DECIMAL_NEGATIVE else 0x00)
    if pos + 4 > end:
        raise DecodeError("truncated DECIMAL exponent", pos, "memcomparable")
    exponent = struct.unpack(">I", bytes(b ^ inner for b in data[pos:pos + 4]))[0] - DECIMAL_EXPONENT_BIAS
    if not -DECIMAL_MAX_ADJUSTED < exponent - 1 < DECIMAL_MAX_ADJUSTED:   # what DataType.validate refuses
        raise DecodeError(f"DECIMAL exponent {exponent - 1} out of range", pos, "memcomparable")
    pos += 4
    digits = []
    start = pos
    while True:
        if pos >= end:
            raise DecodeError("unterminated DECIMAL mantissa", pos, "memcomparable")
        byte = data[pos] ^ inner
        pos += 1
        if byte == DECIMAL_MANTISSA_END:
            break
        if byte > 100:
            raise DecodeError(f"bad DECIMAL digit byte 0x{byte:02x}", pos - 1, "memcomparable")
        if len(digits) > DECIMAL_MAX_PRECISION:   # the last pair may hold one padding zero
            raise DecodeError(f"DECIMAL mantissa longer than {DECIMAL_MAX_PRECISION} digits", start,
                              "memcomparable")
        pair = byte - 1
        digits.append(pair // 10)
        digits.append(pair % 10)
    if not digits or digits[0] == 0 or (digits[-1] == 0 and digits[-2] == 0):
        raise DecodeError("non-canonical DECIMAL mantissa", start, "memcomparable")
    if digits[-1] == 0:
        digits.pop()
    if len(digits) > DECIMAL_MAX_PRECISION:
        raise DecodeError(f"DECIMAL mantissa longer than {DECIMAL_MAX_PRECISION} digits", start,
                          "memcomparable")
    value = decimal.Decimal((1 if tag == DECIMAL_NEGATIVE else 0, tuple(digits), exponent - len(digits)))
    return value, pos


def jsonb_body(value: str) -> bytes:
    """Ascending encoding of a validated JSONB value (its normal text) in Postgres' jsonb order
    (relational/jsonb.py; docs/format.md section 1): a top-level empty array is the one byte 0x00
(it sorts first); otherwise a type byte (``jsonb.NULL`` 0x01 <
    STRING < NUMBER < BOOLEAN < ARRAY < OBJECT 0x06), then a string's escaped bytes and
    terminator, a number's DECIMAL encoding and its scale (u16be digits after the point: ``1.0``
    and ``1`` are equal jsonb values but distinct keys, the lesser scale first), a boolean's
    byte, or an array's/object's u32be count and its elements (an object's key string then
    value, keys in stored order)."""
    tree = jsonb.parse(value)
    if tree == [] and isinstance(tree, list):   # a top-level [] sorts below everything (jsonb.EMPTY_TOP)
        return bytes((jsonb.EMPTY_TOP,))
    out = bytearray()
    _jsonb_tree(out, tree)
    return bytes(out)


def _jsonb_tree(out: bytearray, tree) -> None:
    kind = jsonb.kind_of(tree)
    out.append(kind)
    if kind == jsonb.STRING:
        out += tree.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01"
    elif kind == jsonb.NUMBER:   # the value, then its scale: 1.0 and 1 are equal values but two keys
        out += decimal_body(tree)
        out += jsonb.scale_of(tree).to_bytes(2, "big")
    elif kind == jsonb.BOOLEAN:
        out.append(1 if tree else 0)
    elif kind == jsonb.ARRAY:
        out += len(tree).to_bytes(4, "big")
        for item in tree:
            _jsonb_tree(out, item)
    elif kind == jsonb.OBJECT:
        out += len(tree).to_bytes(4, "big")
        for key, item in tree.items():
            out += key.encode("utf-8") + b"\x00\x01"   # a key holds no NUL (jsonb refuses \u0000)
            _jsonb_tree(out, item)


def decode_jsonb(data, pos: int, mask: int):
    """Decode a JSONB key part at ``pos`` (bytes XOR ``mask``); return ``(normal text, new_pos)``,
    the very text encoded (a number's scale is in the key)."""
    _need(data, pos, 1, "JSONB type")
    if data[pos] ^ mask == jsonb.EMPTY_TOP:
        return "[]", pos + 1
    start = pos
    try:   # a damaged number (an exponent no JSON text has) fails in decimal's arithmetic
        tree, pos = _jsonb_decode_tree(data, pos, mask, 0)
        if tree == [] and isinstance(tree, list):   # one value, one key: [] is written EMPTY_TOP only
            raise DecodeError("non-canonical JSONB empty array", pos - 5, "memcomparable")
        return jsonb.to_text(tree), pos
    except decimal.DecimalException:
        raise DecodeError("JSONB number out of range", start, "memcomparable") from None


def _jsonb_decode_tree(data, pos: int, mask: int, depth: int):
    if depth > jsonb.MAX_DEPTH:
        raise DecodeError("JSONB key nests too deep", pos, "memcomparable")
    _need(data, pos, 1, "JSONB type")
    kind = data[pos] ^ mask
    pos += 1
    if kind == jsonb.NULL:
        return None, pos
    if kind == jsonb.STRING:
        return _decode_string(data, pos, mask, TypeKind.VARCHAR)
    if kind == jsonb.NUMBER:
        start = pos
        value, pos = decode_decimal(data, pos, mask)
        if not value.is_finite():
            raise DecodeError("JSONB number is not finite", start, "memcomparable")
        scale = _fixed(data, pos, 2, mask, "JSONB number scale")
        if scale > jsonb.MAX_SCALE or (not value.is_zero() and -value.as_tuple().exponent > scale):
            raise DecodeError(f"JSONB number scale {scale} does not fit its value", pos, "memcomparable")
        if scale:
            value = value.quantize(decimal.Decimal(1).scaleb(-scale),
                                   context=decimal.Context(prec=len(value.as_tuple().digits) + scale + 1))
        return value, pos + 2
    if kind == jsonb.BOOLEAN:
        byte = _fixed(data, pos, 1, mask, "JSONB boolean")
        if byte > 1:
            raise DecodeError(f"bad JSONB boolean byte 0x{byte:02x}", pos, "memcomparable")
        return byte == 1, pos + 1
    if kind in (jsonb.ARRAY, jsonb.OBJECT):
        count = _fixed(data, pos, 4, mask, "JSONB count")
        pos += 4
        if count > len(data) - pos:   # every item takes at least one byte: never trust a count
            raise DecodeError(f"JSONB count {count} exceeds the key", pos - 4, "memcomparable")
        if kind == jsonb.ARRAY:
            items = []
            for _ in range(count):
                item, pos = _jsonb_decode_tree(data, pos, mask, depth + 1)
                items.append(item)
            return items, pos
        pairs = []
        for _ in range(count):
            key, pos = _decode_string(data, pos, mask, TypeKind.VARCHAR)
            item, pos = _jsonb_decode_tree(data, pos, mask, depth + 1)
            pairs.append((key, item))
        return dict(pairs), pos
    raise DecodeError(f"bad JSONB type byte 0x{kind:02x}", pos - 1, "memcomparable")


def interval_body(value: Interval) -> bytes:
    """Ascending encoding of an INTERVAL: its Postgres total as a sign-flipped i128."""
    return (value.total_usecs() + (1 << 127)).to_bytes(16, "big")


def decode_interval(raw: bytes) -> Interval:
    return Interval.from_total_usecs(int.from_bytes(raw, "big") - (1 << 127))


def timestamptz_usecs(value: datetime.datetime) -> int:
    delta = (value.replace(tzinfo=None) - _EPOCH_NAIVE) - value.utcoffset()
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def timestamp_usecs(value: datetime.datetime) -> int:
    delta = value - _EPOCH_NAIVE
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def usecs_to_datetime(usecs: int, aware: bool, pos: int) -> datetime.datetime:
    try:
        base = _EPOCH_AWARE if aware else _EPOCH_NAIVE
        return base + datetime.timedelta(microseconds=usecs)
    except OverflowError:
        raise DecodeError(f"timestamp {usecs} out of range", pos, "memcomparable") from None


def days_to_date(days: int, pos: int) -> datetime.date:
    try:
        return datetime.date.fromordinal(days + UNIX_EPOCH_ORDINAL)
    except (ValueError, OverflowError):
        raise DecodeError(f"date {days} out of range", pos, "memcomparable") from None


def usecs_to_time(usecs: int, pos: int) -> datetime.time:
    if not 0 <= usecs < 86_400_000_000:
        raise DecodeError(f"time {usecs} out of range", pos, "memcomparable")
    seconds, micro = divmod(usecs, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return datetime.time(hour, minute, second, micro)


def float_bits(value: float, double: bool) -> int:
    """Order-preserving unsigned bits of a float (-0.0 == 0.0, NaN above +Infinity)."""
    if value != value:
        bits = FLOAT64_CANONICAL_NAN if double else FLOAT32_CANONICAL_NAN
    else:
        if value == 0.0:
            value = 0.0
        bits = struct.unpack(">Q", struct.pack(">d", value))[0] if double else \
            struct.unpack(">I", struct.pack(">f", value))[0]
    width = 64 if double else 32
    sign = 1 << (width - 1)
    return (bits ^ ((1 << width) - 1)) if bits & sign else bits | sign


def bits_float(bits: int, double: bool, pos: int = 0) -> float:
    """Inverse of :func:`float_bits`. Refuses the bit patterns ``float_bits`` never writes (a
    NaN other than the canonical one, negative zero): one value, one key."""
    width = 64 if double else 32
    sign = 1 << (width - 1)
    bits = bits ^ sign if bits & sign else bits ^ ((1 << width) - 1)
    exponent_mask = (0x7FF << 52) if double else (0xFF << 23)
    if bits & exponent_mask == exponent_mask and bits & ~(sign | exponent_mask) and bits != (
            FLOAT64_CANONICAL_NAN if double else FLOAT32_CANONICAL_NAN):
        raise DecodeError(f"non-canonical {'DOUBLE' if double else 'REAL'} NaN", pos, "memcomparable")
    if bits == sign:
        raise DecodeError(f"non-canonical {'DOUBLE' if double else 'REAL'} zero", pos, "memcomparable")
    return struct.unpack(">d", struct.pack(">Q", bits))[0] if double else \
        struct.unpack(">f", struct.pack(">I", bits))[0]


# --- encoding --------------------------------------------------------------------------------

_INT_WIDTH = {TypeKind.SMALLINT: 2, TypeKind.INT: 4, TypeKind.BIGINT: 8}


def _encode_value(out: bytearray, dtype: DataType, value, mask: int) -> None:
    """Append the ascending encoding of non-NULL ``value`` XOR ``mask``."""
    kind = dtype.kind
    start = len(out)
    if kind in _INT_WIDTH:
        width = _INT_WIDTH[kind]
        out += (value + (1 << (8 * width - 1))).to_bytes(width, "big")
    elif kind == TypeKind.BOOLEAN:
        out.append(1 if value else 0)
    elif kind == TypeKind.DOUBLE:
        out += float_bits(value, True).to_bytes(8, "big")
    elif kind == TypeKind.REAL:
        out += float_bits(value, False).to_bytes(4, "big")
    elif kind in (TypeKind.VARCHAR, TypeKind.BYTEA):
        raw = value.encode("utf-8") if kind == TypeKind.VARCHAR else value
        out += raw.replace(b"\x00", b"\x00\xff")
        out += b"\x00\x01"
    elif kind == TypeKind.DECIMAL:
        out += decimal_body(value)
    elif kind == TypeKind.DATE:
        out += (value.toordinal() - UNIX_EPOCH_ORDINAL + (1 << 31)).to_bytes(4, "big")
    elif kind == TypeKind.TIME:
        usecs = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        out += (usecs + (1 << 63)).to_bytes(8, "big")
    elif kind == TypeKind.TIMESTAMP:
        out += (timestamp_usecs(value) + (1 << 63)).to_bytes(8, "big")
    elif kind == TypeKind.TIMESTAMPTZ:
        out += (timestamptz_usecs(value) + (1 << 63)).to_bytes(8, "big")
    elif kind == TypeKind.INTERVAL:
        out += interval_body(value)
    elif kind == TypeKind.JSONB:
        out += jsonb_body(value)
    elif kind == TypeKind.STRUCT:
        for (_, ftype), fvalue in zip(dtype.fields, value):
            _encode_nested(out, ftype, fvalue, mask)
        return  # nested parts applied the mask themselves
    elif kind == TypeKind.LIST:
        for element in value:
            out.append(LIST_ELEMENT ^ mask)
            _encode_nested(out, dtype.elem, element, mask)
        out.append(LIST_END ^ mask)
        return
    else:  # pragma: no cover - every TypeKind is handled above
        raise SchemaError(f"unknown type {dtype!r}")
    if mask:
        for i in range(start, len(out)):
            out[i] ^= 0xFF


def _encode_nested(out: bytearray, dtype: DataType, value, mask: int = 0) -> None:
    """A struct field or list element: NULLS LAST tag, then the value, all XOR ``mask``."""
    if value is None:
        out.append(TAG_NULL_LAST ^ mask)
    else:
        out.append(TAG_NOT_NULL ^ mask)
        _encode_value(out, dtype, value, mask)


def _encode_into(out: bytearray, schema: CompiledSchema, values) -> None:
    if len(values) != len(schema.types):
        raise SchemaError(f"row has {len(values)} values but the schema has {len(schema.types)} columns")
    for dtype, desc, nulls_first, value in zip(schema.types, schema.descending, schema.nulls_first, values):
        if value is None:
            out.append(TAG_NULL_FIRST if nulls_first else TAG_NULL_LAST)
            continue
        value = dtype.validate(value)
        out.append(TAG_NOT_NULL)
        _encode_value(out, dtype, value, 0xFF if desc else 0)


def encode_row(values, types, orders=None) -> bytes:
    """Memcomparable bytes of one row; see :func:`relational.memcomparable.encode_row`."""
    schema = compile_schema(types, orders)
    out = bytearray()
    _encode_into(out, schema, values)
    return bytes(out)


def encode_rows(rows, types, orders=None, prefix=b"") -> list:
    """:func:`encode_row` for many rows with one schema; each result starts with the bytes
    ``prefix`` (a table key's vnode)."""
    if type(prefix) is not bytes:
        raise TypeError(f"prefix must be bytes, got {type(prefix).__name__}")
    schema = compile_schema(types, orders)
    result = []
    for values in rows:
        out = bytearray(prefix)
        _encode_into(out, schema, values)
        result.append(bytes(out))
    return result


# --- decoding --------------------------------------------------------------------------------

def _need(data, pos: int, n: int, what: str) -> None:
    if pos + n > len(data):
        raise DecodeError(f"truncated {what}: need {n} bytes, {len(data) - pos} left", pos, "memcomparable")


def _fixed(data, pos: int, n: int, mask: int, what: str) -> int:
    _need(data, pos, n, what)
    raw = data[pos:pos + n]
    if mask:
        raw = bytes(b ^ 0xFF for b in raw)
    return int.from_bytes(raw, "big")


def _decode_string(data, pos: int, mask: int, kind):
    out = bytearray()
    end = len(data)
    start = pos
    while True:
        if pos >= end:
            raise DecodeError("unterminated string", start, "memcomparable")
        byte = data[pos] ^ mask
        if byte != STRING_ESCAPE:
            out.append(byte)
            pos += 1
            continue
        if pos + 1 >= end:
            raise DecodeError("truncated string escape", pos, "memcomparable")
        follow = data[pos + 1] ^ mask
        pos += 2
        if follow == STRING_TERMINATOR:
            break
        if follow != STRING_ESCAPED_ZERO:
            raise DecodeError(f"bad string escape 0x00 0x{follow:02x}", pos - 2, "memcomparable")
        out.append(0)
    if kind == TypeKind.BYTEA:
        return bytes(out), pos
    try:
        return out.decode("utf-8"), pos
    except UnicodeDecodeError as exc:
        raise DecodeError(f"VARCHAR is not valid UTF-8 ({exc.reason})", start, "memcomparable") from None


def _decode_value(data, pos: int, dtype: DataType, mask: int):
    kind = dtype.kind
    if kind in _INT_WIDTH:
        width = _INT_WIDTH[kind]
        return _fixed(data, pos, width, mask, kind.name) - (1 << (8 * width - 1)), pos + width
    if kind == TypeKind.BOOLEAN:
        byte = _fixed(data, pos, 1, mask, "BOOLEAN")
        if byte > 1:
            raise DecodeError(f"bad BOOLEAN byte 0x{byte:02x}", pos, "memcomparable")
        return byte == 1, pos + 1
    if kind == TypeKind.DOUBLE:
        return bits_float(_fixed(data, pos, 8, mask, "DOUBLE"), True, pos), pos + 8
    if kind == TypeKind.REAL:
        return bits_float(_fixed(data, pos, 4, mask, "REAL"), False, pos), pos + 4
    if kind in (TypeKind.VARCHAR, TypeKind.BYTEA):
        return _decode_string(data, pos, mask, kind)
    if kind == TypeKind.DECIMAL:
        return decode_decimal(data, pos, mask)
    if kind == TypeKind.DATE:
        return days_to_date(_fixed(data, pos, 4, mask, "DATE") - (1 << 31), pos), pos + 4
    if kind == TypeKind.TIME:
        return usecs_to_time(_fixed(data, pos, 8, mask, "TIME") - (1 << 63), pos), pos + 8
    if kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        usecs = _fixed(data, pos, 8, mask, kind.name) - (1 << 63)
        return usecs_to_datetime(usecs, kind == TypeKind.TIMESTAMPTZ, pos), pos + 8
    if kind == TypeKind.INTERVAL:
        _need(data, pos, 16, "INTERVAL")
        raw = bytes(b ^ mask for b in data[pos:pos + 16])
        try:
            return decode_interval(raw), pos + 16
        except (ValueError, OverflowError):
            raise DecodeError("INTERVAL out of range", pos, "memcomparable") from None
    if kind == TypeKind.JSONB:
        return decode_jsonb(data, pos, mask)
    if kind == TypeKind.STRUCT:
        fields = []
        for _, ftype in dtype.fields:
            value, pos = _decode_nested(data, pos, ftype, mask)
            fields.append(value)
        return tuple(fields), pos
    if kind == TypeKind.LIST:
        elements = []
        while True:
            _need(data, pos, 1, "LIST marker")
            marker = data[pos] ^ mask
            pos += 1
            if marker == LIST_END:
                return elements, pos
            if marker != LIST_ELEMENT:
                raise DecodeError(f"bad LIST marker 0x{marker:02x}", pos - 1, "memcomparable")
            value, pos = _decode_nested(data, pos, dtype.elem, mask)
            elements.append(value)
    raise SchemaError(f"unknown type {dtype!r}")  # pragma: no cover


def _decode_nested(data, pos: int, dtype: DataType, mask: int):
    _need(data, pos, 1, "null tag")
    tag = data[pos] ^ mask
    if tag == TAG_NULL_LAST:
        return None, pos + 1
    if tag != TAG_NOT_NULL:
        raise DecodeError(f"bad nested null tag 0x{tag:02x}", pos, "memcomparable")
    return _decode_value(data, pos + 1, dtype, mask)


def _decode_from(data, pos: int, schema: CompiledSchema):
    row = []
    for dtype, desc, nulls_first in zip(schema.types, schema.descending, schema.nulls_first):
        _need(data, pos, 1, "null tag")
        tag = data[pos]
        if tag == (TAG_NULL_FIRST if nulls_first else TAG_NULL_LAST):
            row.append(None)
            pos += 1
            continue
        if tag != TAG_NOT_NULL:
            raise DecodeError(f"bad null tag 0x{tag:02x}", pos, "memcomparable")
        value, pos = _decode_value(data, pos + 1, dtype, 0xFF if desc else 0)
        row.append(value)
    return tuple(row), pos


def _as_key_bytes(data) -> bytes:
    """An encoded key as bytes; anything not bytes-like is refused (``bytes(5)`` would be five
    zero bytes, ``bytes([1, 2])`` a key)."""
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeMismatchError(f"encoded key must be bytes-like, got {type(data).__name__}")


def decode_row(data, types, orders=None) -> tuple:
    """Inverse of :func:`encode_row`; the whole buffer must be one row."""
    schema = compile_schema(types, orders)
    data = _as_key_bytes(data)
    row, pos = _decode_from(data, 0, schema)
    if pos != len(data):
        raise DecodeError(f"{len(data) - pos} trailing bytes after the row", pos, "memcomparable")
    return row


def decode_row_prefix(data, types, orders=None, offset=0):
    """Decode one row starting at ``offset``; return ``(row, end_offset)``. Bytes after the row
    are left alone (for keys that carry more after the encoded columns)."""
    schema = compile_schema(types, orders)
    data = _as_key_bytes(data)
    if not 0 <= offset <= len(data):
        raise DecodeError(f"offset {offset} outside a buffer of {len(data)} bytes", offset, "memcomparable")
    return _decode_from(data, offset, schema)


def decode_rows(datas, types, orders=None, offset=0) -> list:
    """:func:`decode_row` for many buffers with one schema; with ``offset``, each row starts
    that many bytes in (a table key after its vnode) and must end its buffer."""
    if not offset:
        return [decode_row(d, types, orders) for d in datas]
    schema = compile_schema(types, orders)
    out = []
    for data in datas:
        data = _as_key_bytes(data)
        if not 0 <= offset <= len(data):
            raise DecodeError(f"offset {offset} outside a buffer of {len(data)} bytes", offset, "memcomparable")
        row, pos = _decode_from(data, offset, schema)
        if pos != len(data):
            raise DecodeError(f"{len(data) - pos} trailing bytes after the row", pos, "memcomparable")
        out.append(row)
    return out


