"""SQL type names <-> relational ``DataType``; implicit casts, common supertypes, literal and
parameter typing (Postgres rules for the supported types).

Job: the binder asks this module every type question: what ``VARCHAR(10)`` or a sqlglot
``DataType`` node means, whether a value of one type may be used where another is expected
without an explicit cast (``can_implicit_cast``), the type two operands meet at
(``common_supertype``), the type of a literal, a bound parameter's Python value, and the names
``cursor.description`` shows (``description_name``).

Invariants: implicit casts only widen within a family (integers -> wider integers -> DECIMAL ->
REAL/DOUBLE; DATE -> TIMESTAMP -> TIMESTAMPTZ) or turn an untyped string literal into the other
side's type (done by the binder, which knows a literal); never numeric <-> text.

Callers: ``sql.bind``, ``sql.session`` (description names), ``sql.catalog`` (DESCRIBE).
"""

from __future__ import annotations

import datetime
import decimal

from relational.types import DataType, Interval, TypeKind
from stream import decimal_ops

from sql.errors import ExecutionError, UnsupportedError, error_at

_BY_NAME = {
    "boolean": DataType.BOOLEAN, "bool": DataType.BOOLEAN,
    "smallint": DataType.SMALLINT, "int2": DataType.SMALLINT,
    "integer": DataType.INT, "int": DataType.INT, "int4": DataType.INT,
    "bigint": DataType.BIGINT, "int8": DataType.BIGINT,
    "decimal": DataType.DECIMAL, "numeric": DataType.DECIMAL,
    "real": DataType.REAL, "float4": DataType.REAL,
    "double precision": DataType.DOUBLE, "double": DataType.DOUBLE, "float8": DataType.DOUBLE,
    "float": DataType.DOUBLE,
    "varchar": DataType.VARCHAR, "character varying": DataType.VARCHAR, "text": DataType.VARCHAR,
    "string": DataType.VARCHAR, "char": DataType.VARCHAR,
    "bytea": DataType.BYTEA, "date": DataType.DATE, "time": DataType.TIME,
    "timestamp": DataType.TIMESTAMP, "timestamptz": DataType.TIMESTAMPTZ,
    "interval": DataType.INTERVAL,
}

# sqlglot DType names -> ours
_SQLGLOT = {
    "BOOLEAN": DataType.BOOLEAN, "SMALLINT": DataType.SMALLINT, "INT": DataType.INT,
    "BIGINT": DataType.BIGINT, "DECIMAL": DataType.DECIMAL, "FLOAT": DataType.REAL,
    "DOUBLE": DataType.DOUBLE, "VARCHAR": DataType.VARCHAR, "TEXT": DataType.VARCHAR,
    "CHAR": DataType.VARCHAR, "NVARCHAR": DataType.VARCHAR, "NCHAR": DataType.VARCHAR,
    "VARBINARY": DataType.BYTEA, "BINARY": DataType.BYTEA, "DATE": DataType.DATE,
    "TIME": DataType.TIME, "TIMESTAMP": DataType.TIMESTAMP, "TIMESTAMPTZ": DataType.TIMESTAMPTZ,
    "INTERVAL": DataType.INTERVAL, "TINYINT": DataType.SMALLINT,
}

_DESCRIPTION = {
    TypeKind.BOOLEAN: "boolean", TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer",
    TypeKind.BIGINT: "bigint", TypeKind.DECIMAL: "numeric", TypeKind.REAL: "real",
    TypeKind.DOUBLE: "double precision", TypeKind.VARCHAR: "character varying", TypeKind.BYTEA: "bytea",
    TypeKind.DATE: "date", TypeKind.TIME: "time without time zone",
    TypeKind.TIMESTAMP: "timestamp without time zone", TypeKind.TIMESTAMPTZ: "timestamp with time zone",
    TypeKind.INTERVAL: "interval",
}

INTEGERS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
# the implicit-cast ladder of each family: a type converts implicitly to any later one
_LADDERS = (
    (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DECIMAL, TypeKind.REAL, TypeKind.DOUBLE),
    (TypeKind.DATE, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ),
)


def type_from_name(name: str) -> DataType:
    """``DataType`` of a SQL type name (``"integer"``, ``"varchar"``...); KeyError if unknown."""
    return _BY_NAME[name.strip().lower()]


def type_from_sqlglot(node) -> DataType:
    """``DataType`` of a sqlglot ``exp.DataType`` node; UnsupportedError naming it otherwise."""
    name = node.this.name if hasattr(node.this, "name") else str(node.this)
    if name == "TIMESTAMPLTZ":
        name = "TIMESTAMPTZ"
    dtype = _SQLGLOT.get(name)
    if dtype is None:
        raise error_at(UnsupportedError, f"type {node.sql(dialect='postgres')} is not supported", node)
    return dtype


def description_name(dtype: DataType) -> str:
    """The Postgres name ``cursor.description`` and DESCRIBE show."""
    return _DESCRIPTION.get(dtype.kind, dtype.sql_name().lower())


def is_numeric(dtype: DataType) -> bool:
    return dtype.kind in INTEGERS or dtype.kind in FLOATS or dtype.kind == TypeKind.DECIMAL


def can_implicit_cast(source: DataType, target: DataType) -> bool:
    """Whether Postgres would convert ``source`` to ``target`` implicitly (module docstring)."""
    if source == target:
        return True
    for ladder in _LADDERS:
        if source.kind in ladder and target.kind in ladder:
            return ladder.index(source.kind) <= ladder.index(target.kind)
    return False


def can_assign(source: DataType, target: DataType) -> bool:
    """Whether Postgres stores a ``source`` value into a ``target`` column without an explicit
    cast (an assignment cast): the implicit casts plus any numeric -> numeric (rounded half away
    from zero and range-checked when it narrows)."""
    return can_implicit_cast(source, target) or (is_numeric(source) and is_numeric(target))


def common_supertype(a: DataType, b: DataType) -> DataType | None:
    """The type both implicitly cast to (Postgres' UNION/CASE/COALESCE resolution), or None."""
    if can_implicit_cast(a, b):
        return b
    if can_implicit_cast(b, a):
        return a
    return None


def literal_type(value) -> DataType:
    """The type of a Python value bound as a parameter (or a folded literal)."""
    if value is None:
        return DataType.VARCHAR   # an untyped NULL; the binder retypes it where it meets a type
    if isinstance(value, bool):
        return DataType.BOOLEAN
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return DataType.INT
        if -(1 << 63) <= value < (1 << 63):
            return DataType.BIGINT
        return DataType.DECIMAL
    if isinstance(value, float):
        return DataType.DOUBLE
    if isinstance(value, decimal.Decimal):
        if value.is_snan():
            raise ExecutionError("a signaling NaN is not a numeric value")
        try:
            decimal_ops.check(value)   # Postgres' numeric range: no billion-digit values
        except decimal_ops.RowError as exc:
            raise ExecutionError(str(exc)) from None
        return DataType.DECIMAL
    if isinstance(value, str):
        return DataType.VARCHAR
    if isinstance(value, (bytes, bytearray, memoryview)):
        return DataType.BYTEA
    if isinstance(value, datetime.datetime):
        return DataType.TIMESTAMP if value.tzinfo is None else DataType.TIMESTAMPTZ
    if isinstance(value, datetime.date):
        return DataType.DATE
    if isinstance(value, datetime.time):
        return DataType.TIME
    if isinstance(value, (Interval, datetime.timedelta)):
        return DataType.INTERVAL
    raise UnsupportedError(f"a parameter of Python type {type(value).__name__} is not supported")


def parse_text(text: str, dtype: DataType):
    """The value of ``dtype`` a string literal spells (``'2020-01-02'::date``); ValueError if not."""
    kind = dtype.kind
    s = text.strip()
    if kind == TypeKind.VARCHAR:
        return text
    if kind in INTEGERS:
        return int(s)
    if kind in FLOATS:
        return float(s)
    if kind == TypeKind.DECIMAL:
        try:
            value = decimal.Decimal(s)
        except decimal.InvalidOperation:
            raise ValueError(f"invalid numeric {text!r}") from None
        if value.is_snan():
            raise ValueError(f"invalid numeric {text!r}")
        try:
            return decimal_ops.normalize(decimal_ops.check(value))
        except decimal_ops.RowError as exc:
            raise ValueError(f"{exc}: {text!r}") from None
    if kind == TypeKind.BOOLEAN:
        low = s.lower()
        if low in ("t", "true", "yes", "y", "on", "1"):
            return True
        if low in ("f", "false", "no", "n", "off", "0"):
            return False
        raise ValueError(f"invalid boolean {text!r}")
    if kind == TypeKind.DATE:
        return datetime.date.fromisoformat(s)
    if kind == TypeKind.TIME:
        return datetime.time.fromisoformat(s)
    if kind == TypeKind.TIMESTAMP:
        return datetime.datetime.fromisoformat(s).replace(tzinfo=None)
    if kind == TypeKind.TIMESTAMPTZ:
        value = datetime.datetime.fromisoformat(s)
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.astimezone(datetime.timezone.utc)
    if kind == TypeKind.BYTEA:
        if s.startswith("\\x"):
            return bytes.fromhex(s[2:])
        return text.encode()
    if kind == TypeKind.INTERVAL:
        return parse_interval(s)
    raise ValueError(f"cannot read {text!r} as {dtype.sql_name()}")


_UNITS = {"year": (12, 0, 0), "month": (1, 0, 0), "week": (0, 7, 0), "day": (0, 1, 0),
          "hour": (0, 0, 3_600_000_000), "minute": (0, 0, 60_000_000), "second": (0, 0, 1_000_000),
          "millisecond": (0, 0, 1000), "microsecond": (0, 0, 1)}


def parse_interval(text: str) -> Interval:
    """``'1 day'``, ``'2 hours 30 minutes'``, ``'01:02:03'`` -> Interval."""
    months = days = usecs = 0
    parts = text.lower().split()
    i = 0
    while i < len(parts):
        part = parts[i]
        if ":" in part:
            sign = -1 if part.startswith("-") else 1
            fields = part.lstrip("-+").split(":")
            h, m = int(fields[0]), int(fields[1])
            s = float(fields[2]) if len(fields) > 2 else 0.0
            usecs += sign * (h * 3_600_000_000 + m * 60_000_000 + round(s * 1_000_000))
            i += 1
            continue
        amount = float(part)
        unit = parts[i + 1].rstrip("s") if i + 1 < len(parts) else "second"
        if unit not in _UNITS:
            raise ValueError(f"invalid interval {text!r}")
        mo, d, us = _UNITS[unit]
        months += int(amount * mo)
        days += int(amount * d)
        usecs += round(amount * us)
        i += 2
    return Interval(months, days, usecs)


def coerce_value(value, dtype: DataType):
    """``value`` (a Python value of another SQL type) as ``dtype`` for storage, the way an
    assignment cast converts it (ints to floats/decimals, text to the type it spells); raises
    ValueError/TypeError when it does not convert."""
    if value is None:
        return None
    kind = dtype.kind
    if isinstance(value, bool) and kind != TypeKind.BOOLEAN:
        raise TypeError(f"cannot assign boolean to {dtype.sql_name()}")
    if kind in INTEGERS:   # half away from zero, then the range check of validate()
        if isinstance(value, float):
            return dtype.validate(int(decimal.Decimal(value).to_integral_value(decimal.ROUND_HALF_UP)))
        if isinstance(value, decimal.Decimal):
            return dtype.validate(int(value.to_integral_value(decimal.ROUND_HALF_UP)))
    if kind in FLOATS and isinstance(value, (int, decimal.Decimal)):
        return float(value)
    if kind == TypeKind.DECIMAL and isinstance(value, (int, float)):   # a float through 15 digits, as Postgres
        return decimal.Decimal(format(value, ".15g")) if isinstance(value, float) else decimal.Decimal(value)
    if kind == TypeKind.TIMESTAMPTZ and isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    if kind == TypeKind.TIMESTAMP and isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if kind == TypeKind.TIMESTAMP and type(value) is datetime.date:
        return datetime.datetime(value.year, value.month, value.day)
    if kind == TypeKind.INTERVAL and isinstance(value, datetime.timedelta):
        return Interval.from_timedelta(value)
    if isinstance(value, str) and kind != TypeKind.VARCHAR:
        return parse_text(value, dtype)
    return dtype.validate(value)
