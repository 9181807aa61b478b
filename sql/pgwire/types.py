"""Postgres type OIDs and value encodings for the pgwire server (docs/pgwire.md, "Types").

Job: the OID, name and size a result column of a Hummock ``DataType`` is described with; a
result column (Arrow) as wire cells (length-prefixed bytes, text or binary format); a bound
parameter's wire bytes as the Python value the binder takes (text: ``sql.types.parse_text`` of
the declared type, untyped text stays a ``str`` -- Postgres's ``unknown``, which the binder
types where it meets a column; binary: the common fixed-width types, text and bytea).

Invariants: the text format is Postgres's output text -- the same text COPY TO writes
(:func:`sql.copy.text_column`), so ``psql`` shows what ``COPY`` writes. A type with no binary
encoding here is refused by name (``UnsupportedFormat``), never sent wrong. A LIST (array)
column goes as its element's array type (``int4[]`` is OID 1007) in Postgres' array text
(``{1,2,NULL}``); a STRUCT column as ``text`` (OID 25) holding its Python text.

Callers: :mod:`sql.pgwire.server`, :mod:`sql.pgwire.pg_catalog` (type names and OIDs).
"""

from __future__ import annotations

import datetime
import decimal
import struct

import pyarrow as pa

from relational.arrow import to_pylist
from relational.types import DataType, Interval, TypeKind

from sql import types as T
from sql.errors import ParameterError, UnsupportedError


class UnsupportedFormat(UnsupportedError):
    """A format code or a binary value this server does not encode or decode."""

    sqlstate = "0A000"


#: TypeKind -> (oid, typname, typlen, format_type name, array oid)
PG_TYPES = {
    TypeKind.BOOLEAN: (16, "bool", 1, "boolean", 1000),
    TypeKind.SMALLINT: (21, "int2", 2, "smallint", 1005),
    TypeKind.INT: (23, "int4", 4, "integer", 1007),
    TypeKind.BIGINT: (20, "int8", 8, "bigint", 1016),
    TypeKind.DECIMAL: (1700, "numeric", -1, "numeric", 1231),
    TypeKind.REAL: (700, "float4", 4, "real", 1021),
    TypeKind.DOUBLE: (701, "float8", 8, "double precision", 1022),
    TypeKind.VARCHAR: (1043, "varchar", -1, "character varying", 1015),
    TypeKind.BYTEA: (17, "bytea", -1, "bytea", 1001),
    TypeKind.DATE: (1082, "date", 4, "date", 1182),
    TypeKind.TIME: (1083, "time", 8, "time without time zone", 1183),
    TypeKind.TIMESTAMP: (1114, "timestamp", 8, "timestamp without time zone", 1115),
    TypeKind.TIMESTAMPTZ: (1184, "timestamptz", 8, "timestamp with time zone", 1185),
    TypeKind.INTERVAL: (1186, "interval", 16, "interval", 1187),
    TypeKind.JSONB: (3802, "jsonb", -1, "jsonb", 3807),
}
TEXT_OID, UNKNOWN_OID, NAME_OID, OID_OID, CHAR_OID = 25, 705, 19, 26, 18
#: the other types a catalog answer or a client may name: oid -> (typname, typlen, array oid)
EXTRA_TYPES = {25: ("text", -1, 1009), 19: ("name", 64, 1003), 26: ("oid", 4, 1028), 18: ("char", 1, 1002),
               705: ("unknown", -2, 0), 2249: ("record", -1, 2287), 114: ("json", -1, 199),
               1042: ("bpchar", -1, 1014), 2950: ("uuid", 16, 2951)}
_BY_OID = {v[0]: k for k, v in PG_TYPES.items()}
_TYPNAME_ALIASES = {"integer": "int4", "int": "int4", "smallint": "int2", "bigint": "int8", "boolean": "bool",
                    "real": "float4", "double precision": "float8", "character varying": "varchar",
                    "decimal": "numeric", "timestamp without time zone": "timestamp",
                    "timestamp with time zone": "timestamptz", "time without time zone": "time"}


def type_oid(dtype: DataType) -> int:
    if dtype.kind == TypeKind.LIST and dtype.elem.kind in PG_TYPES:   # an array: its element's array type
        return PG_TYPES[dtype.elem.kind][4]
    entry = PG_TYPES.get(dtype.kind)
    return entry[0] if entry is not None else TEXT_OID


def type_size(dtype: DataType) -> int:
    entry = PG_TYPES.get(dtype.kind)
    return entry[2] if entry is not None else -1


def format_type(dtype: DataType) -> str:
    """``pg_catalog.format_type``'s name of ``dtype`` (psql's ``\\d`` Type column)."""
    if dtype.kind == TypeKind.LIST:
        return format_type(dtype.elem) + "[]"
    entry = PG_TYPES.get(dtype.kind)
    return entry[3] if entry is not None else dtype.sql_name().lower()


def all_types() -> list:
    """``(oid, typname, typlen, array oid)`` of every type a client may look up (pg_type)."""
    rows = [(oid, name, size, arr) for oid, name, size, _, arr in PG_TYPES.values()]
    rows += [(oid, name, size, arr) for oid, (name, size, arr) in EXTRA_TYPES.items()]
    for oid, name, size, arr in list(rows):
        if arr:
            rows.append((arr, "_" + name, -1, 0))
    return sorted(rows)


def lookup_type(name: str):
    """The ``all_types`` row named ``name`` (``int4``, ``integer``, ``text[]`` ...), or None."""
    name = name.strip().lower().strip('"')
    if name.startswith("pg_catalog."):
        name = name[len("pg_catalog."):]
    array = name.endswith("[]")
    base = _TYPNAME_ALIASES.get(name[:-2] if array else name, name[:-2] if array else name)
    target = "_" + base if array else base
    for row in all_types():
        if row[1] == target:
            return row
    return None


# --- results --------------------------------------------------------------------------------------

_NULL = b"\xff\xff\xff\xff"
_I32 = struct.Struct("!i")


def column_cells(col, dtype: DataType, binary: bool) -> list:
    """The wire cells (``int32 length + bytes``, or -1 for NULL) of one result column."""
    if binary:
        values = to_pylist(col, dtype) if isinstance(col, (pa.Array, pa.ChunkedArray)) else list(col)
        enc = _binary_encoder(dtype)
        out = []
        for v in values:
            if v is None:
                out.append(_NULL)
            else:
                b = enc(v)
                out.append(_I32.pack(len(b)) + b)
        return out
    pack = _I32.pack
    out = []
    for t in text_values(col, dtype):
        if t is None:
            out.append(_NULL)
        else:
            b = t.encode()
            out.append(pack(len(b)) + b)
    return out


def text_values(col, dtype: DataType) -> list:
    """Postgres's output text of each value of ``col`` (None for NULL)."""
    from sql.copy import text_column

    if dtype.kind == TypeKind.LIST:   # Postgres' array_out: {1,2,NULL} (stream/expr_array.py)
        from stream.expr_array import array_text
        return array_text(col, dtype)
    if dtype.kind == TypeKind.STRUCT:
        return [None if v is None else str(v) for v in to_pylist(col, dtype)]
    out = text_column(col, dtype, "pgwire")
    if dtype.kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
        out = out.cast(pa.string())
    return out.to_pylist()


_EPOCH_DATE = datetime.date(2000, 1, 1)
_EPOCH_TS = datetime.datetime(2000, 1, 1)
_EPOCH_TSTZ = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(delta: datetime.timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _binary_encoder(dtype: DataType):
    kind = dtype.kind
    if kind == TypeKind.BOOLEAN:
        return lambda v: b"\x01" if v else b"\x00"
    if kind == TypeKind.SMALLINT:
        return struct.Struct("!h").pack
    if kind == TypeKind.INT:
        return struct.Struct("!i").pack
    if kind == TypeKind.BIGINT:
        return struct.Struct("!q").pack
    if kind == TypeKind.REAL:
        return struct.Struct("!f").pack
    if kind == TypeKind.DOUBLE:
        return struct.Struct("!d").pack
    if kind == TypeKind.VARCHAR:
        return str.encode
    if kind == TypeKind.BYTEA:
        return bytes
    if kind == TypeKind.DATE:
        return lambda v: _I32.pack((v - _EPOCH_DATE).days)
    if kind == TypeKind.TIMESTAMP:
        return lambda v: struct.pack("!q", _micros(v - _EPOCH_TS))
    if kind == TypeKind.TIMESTAMPTZ:
        return lambda v: struct.pack("!q", _micros(v - _EPOCH_TSTZ))
    if kind == TypeKind.TIME:
        return lambda v: struct.pack("!q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)
    if kind == TypeKind.INTERVAL:
        return lambda v: struct.pack("!qii", v.usecs, v.days, v.months)
    if kind == TypeKind.DECIMAL:
        return numeric_binary
    if kind == TypeKind.JSONB:   # Postgres' jsonb_send: a version byte (1), then the text
        return lambda v: b"\x01" + v.encode()
    raise UnsupportedFormat(f"binary output of {dtype.sql_name()} is not supported: ask for text format "
                            "(e.g. psycopg's default, binary=False)")


def numeric_binary(v) -> bytes:
    """Postgres's binary NUMERIC: ndigits, weight, sign, dscale (int16 each), then base-10000
    digits (int16), the first of weight ``weight``."""
    v = decimal.Decimal(v)
    if v.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if v.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xD000 if v > 0 else 0xF000, 0)
    sign, digits, exp = v.as_tuple()
    text = "".join(map(str, digits))
    if exp > 0:
        text, exp = text + "0" * exp, 0
    scale = -exp
    if scale >= len(text):
        int_part, frac_part = "", "0" * (scale - len(text)) + text
    else:
        int_part, frac_part = text[:len(text) - scale], text[len(text) - scale:]
    int_part = int_part.lstrip("0")
    int_part = int_part.zfill((len(int_part) + 3) // 4 * 4) if int_part else ""
    frac_part += "0" * (-len(frac_part) % 4)
    groups = [int(int_part[i:i + 4]) for i in range(0, len(int_part), 4)]
    groups += [int(frac_part[i:i + 4]) for i in range(0, len(frac_part), 4)]
    weight = len(int_part) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack("!hhHh", len(groups), weight, 0x4000 if sign else 0, scale) + \
        b"".join(struct.pack("!H", g) for g in groups)


def check_binary(dtype: DataType) -> None:
    """Raise ``UnsupportedFormat`` now (before any row is sent) if ``dtype`` has no binary form."""
    _binary_encoder(dtype)


# --- parameters -----------------------------------------------------------------------------------

def decode_param(data: bytes | None, oid: int, binary: bool):
    """The Python value of one Bind parameter (module docstring)."""
    if data is None:
        return None
    kind = _BY_OID.get(oid)
    if binary:
        return _decode_binary(data, oid, kind)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise ParameterError(f"parameter of type oid {oid} is not valid UTF-8") from None
    if kind is None or kind == TypeKind.VARCHAR:   # unknown/text/varchar/others: untyped text
        return text
    dtype = DataType(kind)
    try:
        return T.parse_text(text, dtype)
    except (ValueError, ArithmeticError) as exc:
        raise ParameterError(f"invalid input for a {dtype.sql_name()} parameter: {text!r:.80} ({exc})") from None


def _decode_binary(data: bytes, oid: int, kind):
    try:
        if oid in (TEXT_OID, UNKNOWN_OID, NAME_OID) or kind == TypeKind.VARCHAR:
            return data.decode()
        if kind == TypeKind.BYTEA:
            return bytes(data)
        if kind == TypeKind.JSONB and data[:1] == b"\x01":   # jsonb_recv: version 1, then the text
            return T.parse_text(data[1:].decode(), DataType.JSONB)
        if kind == TypeKind.BOOLEAN:
            return data != b"\x00"
        if kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
            return int.from_bytes(data, "big", signed=True)
        if kind == TypeKind.REAL and len(data) == 4:
            return struct.unpack("!f", data)[0]
        if kind == TypeKind.DOUBLE and len(data) == 8:
            return struct.unpack("!d", data)[0]
        if kind == TypeKind.DATE and len(data) == 4:
            return _EPOCH_DATE + datetime.timedelta(days=_I32.unpack(data)[0])
        if kind == TypeKind.TIMESTAMP and len(data) == 8:
            return _EPOCH_TS + datetime.timedelta(microseconds=struct.unpack("!q", data)[0])
        if kind == TypeKind.TIMESTAMPTZ and len(data) == 8:
            return _EPOCH_TSTZ + datetime.timedelta(microseconds=struct.unpack("!q", data)[0])
        if kind == TypeKind.TIME and len(data) == 8:
            micros = struct.unpack("!q", data)[0]
            seconds, micro = divmod(micros, 1_000_000)
            return datetime.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micro)
        if kind == TypeKind.INTERVAL and len(data) == 16:
            usecs, days, months = struct.unpack("!qii", data)
            return Interval(months, days, usecs)
    except (UnicodeDecodeError, struct.error, OverflowError, ValueError) as exc:
        raise ParameterError(f"invalid binary parameter of type oid {oid}: {exc}") from None
    raise UnsupportedFormat(f"binary input of type oid {oid} ({len(data)} bytes) is not supported: send it as text")
