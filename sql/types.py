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
import re

from relational import jsonb
from relational.types import DataType, Interval, TypeKind
from sqlglot import exp

from stream import decimal_ops, interval_text, numeric_typmod
from stream.expr_array import parse_array_text

from sql.errors import BindError, ExecutionError, UnsupportedError, error_at, position_of

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
    "jsonb": DataType.JSONB,
}

# sqlglot DType names -> ours
_SQLGLOT = {
    "BOOLEAN": DataType.BOOLEAN, "SMALLINT": DataType.SMALLINT, "INT": DataType.INT,
    "BIGINT": DataType.BIGINT, "DECIMAL": DataType.DECIMAL, "FLOAT": DataType.REAL,
    "DOUBLE": DataType.DOUBLE, "VARCHAR": DataType.VARCHAR, "TEXT": DataType.VARCHAR,
    "CHAR": DataType.VARCHAR, "NVARCHAR": DataType.VARCHAR, "NCHAR": DataType.VARCHAR,
    "VARBINARY": DataType.BYTEA, "BINARY": DataType.BYTEA, "DATE": DataType.DATE,
    "TIME": DataType.TIME, "TIMESTAMP": DataType.TIMESTAMP, "TIMESTAMPTZ": DataType.TIMESTAMPTZ,
    "INTERVAL": DataType.INTERVAL, "TINYINT": DataType.SMALLINT, "JSONB": DataType.JSONB,
}

_DESCRIPTION = {
    TypeKind.BOOLEAN: "boolean", TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer",
    TypeKind.BIGINT: "bigint", TypeKind.DECIMAL: "numeric", TypeKind.REAL: "real",
    TypeKind.DOUBLE: "double precision", TypeKind.VARCHAR: "character varying", TypeKind.BYTEA: "bytea",
    TypeKind.DATE: "date", TypeKind.TIME: "time without time zone",
    TypeKind.TIMESTAMP: "timestamp without time zone", TypeKind.TIMESTAMPTZ: "timestamp with time zone",
    TypeKind.INTERVAL: "interval", TypeKind.JSONB: "jsonb",
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
    if name == "ARRAY" and len(node.expressions) == 1:   # INT[], VARCHAR ARRAY: a one-dimensional array
        elem = type_from_sqlglot(node.expressions[0])
        if elem.kind == TypeKind.LIST:
            raise error_at(UnsupportedError, f"type {node.sql(dialect='postgres')} is not supported "
                                             "(multidimensional arrays are not supported)",
                           node.parent if position_of(node)[0] is None and node.parent is not None else node)
        return DataType.list(elem)
    if name == "TIMESTAMPLTZ":
        name = "TIMESTAMPTZ"
    dtype = _SQLGLOT.get(name)
    if dtype is None:
        hint = " (jsonb is: JSON text is stored in its normal form)" if name == "JSON" else ""
        raise error_at(UnsupportedError, f"type {node.sql(dialect='postgres')} is not supported{hint}", node)
    return dtype


def typmod_from_sqlglot(node) -> tuple | None:
    """``(precision, scale)`` of a ``NUMERIC(p, s)`` / ``DECIMAL(p)`` type node (``NUMERIC(p)``
    is scale 0), ``(n,)`` of a ``VARCHAR(n)`` one, None for a plain NUMERIC or another type; an ``ExecutionError`` (Postgres'
    22023) for a precision outside 1..1000 or a scale outside 0..1000 (stream/numeric_typmod.py)."""
    name = node.this.name if hasattr(node.this, "name") else str(node.this)
    if name == "VARCHAR" and node.expressions:
        return (varchar_length(node),)
    if name != "DECIMAL" or not node.expressions:
        return None
    params = []
    for param in node.expressions:
        value = param.this if isinstance(param, exp.DataTypeParam) else param
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise error_at(BindError, f"invalid NUMERIC type modifier {param.sql(dialect='postgres')}", node)
        params.append(int(value.this))
    if len(params) > 2:
        raise error_at(BindError, "invalid NUMERIC type modifier", node)
    precision, scale = params[0], params[1] if len(params) == 2 else 0
    message = numeric_typmod.check_typmod(precision, scale)
    if message is not None:
        raise error_at(ExecutionError, message, node)
    return precision, scale


VARCHAR_MAX_LENGTH = 10485760   # Postgres' MaxAttrSize limit on a varchar(n) length


def varchar_length(node) -> int:
    """``n`` of a ``VARCHAR(n)`` type node, as Postgres' ``anychar_typmodin`` checks it (1 ..
    10485760, else a ``BindError`` with its message)."""
    if len(node.expressions) != 1:
        raise error_at(BindError, "invalid type modifier", node)
    param = node.expressions[0]
    value = param.this if isinstance(param, exp.DataTypeParam) else param
    if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
        raise error_at(BindError, f"invalid VARCHAR type modifier {param.sql(dialect='postgres')}", node)
    n = int(value.this)
    if n < 1:
        raise error_at(BindError, "length for type varchar must be at least 1", node)
    if n > VARCHAR_MAX_LENGTH:
        raise error_at(BindError, f"length for type varchar cannot exceed {VARCHAR_MAX_LENGTH}", node)
    return n


def type_text(dtype: DataType, typmod: tuple | None = None) -> str:
    """The Postgres name DESCRIBE / ``\\d`` / information_schema show: ``numeric(5,2)`` for
    a column with a typmod, else :func:`description_name`."""
    if typmod is not None and dtype.kind == TypeKind.VARCHAR:
        return f"character varying({typmod[0]})"
    if typmod is not None and dtype.kind == TypeKind.DECIMAL:
        return numeric_typmod.type_text(*typmod)
    return description_name(dtype)


def description_name(dtype: DataType) -> str:
    """The Postgres name ``cursor.description`` and DESCRIBE show."""
    if dtype.kind == TypeKind.LIST:
        return description_name(dtype.elem) + "[]"
    return _DESCRIPTION.get(dtype.kind, dtype.sql_name().lower())


def is_numeric(dtype: DataType) -> bool:
    return dtype.kind in INTEGERS or dtype.kind in FLOATS or dtype.kind == TypeKind.DECIMAL


def can_implicit_cast(source: DataType, target: DataType) -> bool:
    """Whether Postgres would convert ``source`` to ``target`` implicitly (module docstring)."""
    if source == target:
        return True
    if source.kind == TypeKind.LIST and target.kind == TypeKind.LIST:   # Postgres' array coercion
        return can_implicit_cast(source.elem, target.elem)
    for ladder in _LADDERS:
        if source.kind in ladder and target.kind in ladder:
            return ladder.index(source.kind) <= ladder.index(target.kind)
    return False


def can_assign(source: DataType, target: DataType) -> bool:
    """Whether Postgres stores a ``source`` value into a ``target`` column without an explicit
    cast (an assignment cast): the implicit casts plus any numeric -> numeric (range-checked when it
    narrows; to an integer a NUMERIC rounds half away from zero, a REAL/DOUBLE half to even)."""
    if source.kind == TypeKind.LIST and target.kind == TypeKind.LIST:
        return can_assign(source.elem, target.elem)
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
    if isinstance(value, dict):   # a JSON object (a list is an array parameter)
        return DataType.JSONB
    if isinstance(value, list):   # an array parameter: its first non-NULL element's type (text if none)
        first = next((v for v in value if v is not None), None)
        elem = literal_type(first)
        if elem.kind == TypeKind.LIST:
            raise UnsupportedError("a parameter holding a multidimensional array is not supported")
        return DataType.list(elem)
    raise UnsupportedError(f"a parameter of Python type {type(value).__name__} is not supported")


def parse_text(text: str, dtype: DataType):
    """The value of ``dtype`` a string literal spells (``'2020-01-02'::date``); ValueError if not."""
    kind = dtype.kind
    s = text.strip()
    if kind == TypeKind.VARCHAR:
        return text
    if kind in INTEGERS:
        if _INTEGER_TEXT.fullmatch(s) and len(s.lstrip("+-0")) > 19:   # never Python's 4,300-digit limit
            raise OutOfRange(f"value {text!r:.60} is out of range for type {description_name(dtype)}")
        return int(s)
    if kind in FLOATS:
        return _float_text(s, dtype)
    if kind == TypeKind.DECIMAL:
        return numeric_constant(s, text)
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
    if kind == TypeKind.JSONB:   # Postgres' jsonb_in: the normal text (relational/jsonb.py)
        return jsonb.normalize(text)
    if kind == TypeKind.INTERVAL:
        return parse_interval(s)
    if kind == TypeKind.LIST:   # '{1,2,NULL}': Postgres' array_in (stream/expr_array.py)
        return [None if item is None else parse_text(item, dtype.elem) for item in parse_array_text(text)]
    raise ValueError(f"cannot read {text!r} as {dtype.sql_name()}")


_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_FLOAT_SPECIAL = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan", "+nan", "-nan")
_REAL_MIN = 1.401298464324817e-45   # the smallest positive REAL (a denormal)


class OutOfRange(ValueError):
    """Text that spells a value of the type, but one outside its range (Postgres' "out of
    range" errors, as opposed to "invalid input syntax")."""


def _float_text(s: str, dtype: DataType) -> float:
    """REAL/DOUBLE text as Postgres' ``float8in``/``float4in``: out of range (overflow to
    Infinity, underflow to zero) is an error, ``'Infinity'``/``'NaN'`` are values."""
    if "_" in s:   # Python's float() reads 1_000; Postgres' float8in does not
        raise ValueError(f"invalid input syntax for type {description_name(dtype)}: {s!r:.60}")
    value = float(s)
    if s.lower() in _FLOAT_SPECIAL:
        return value
    name = description_name(dtype)
    if value in (float("inf"), float("-inf")) or (dtype.kind == TypeKind.REAL and abs(value) > 3.4028235677973366e38):
        raise OutOfRange(f"{s!r:.60} is out of range for type {name}")
    mantissa = s.lower().split("e")[0]
    if any(ch in "123456789" for ch in mantissa) and (
            value == 0 or (dtype.kind == TypeKind.REAL and abs(value) < _REAL_MIN / 2)):
        raise OutOfRange(f"{s!r:.60} is out of range for type {name}")
    return value


def numeric_constant(s: str, text: str | None = None) -> decimal.Decimal:
    """The NUMERIC ``s`` spells (a literal or text), range-checked from its exponent before any
    digit is expanded (``stream.decimal_ops.check``: ``1e1000000000`` is never built); ValueError
    when it is not a number, OutOfRange ("value overflows numeric format") beyond Postgres'
    131072 digits before the point or 16383 after it."""
    text = s if text is None else text
    try:
        value = decimal.Decimal(s)
    except decimal.InvalidOperation:
        raise ValueError(f"invalid numeric {text!r:.60}") from None
    if value.is_snan():
        raise ValueError(f"invalid numeric {text!r:.60}")
    try:
        return decimal_ops.normalize(decimal_ops.check(value))
    except decimal_ops.RowError as exc:
        raise OutOfRange(f"{exc}: {text!r:.60}") from None


# interval text lives in stream.interval_text (the stream layer casts VARCHAR <-> INTERVAL too)
INTERVAL_FIELDS, IntervalOutOfRange = interval_text.INTERVAL_FIELDS, interval_text.IntervalOutOfRange
parse_interval, format_interval = interval_text.parse_interval, interval_text.format_interval


def coerce_value(value, dtype: DataType):
    """``value`` (a Python value of another SQL type) as ``dtype`` for storage, the way an
    assignment cast converts it (ints to floats/decimals, text to the type it spells); raises
    ValueError/TypeError when it does not convert."""
    if value is None:
        return None
    kind = dtype.kind
    if isinstance(value, bool) and kind != TypeKind.BOOLEAN:
        raise TypeError(f"cannot assign boolean to {dtype.sql_name()}")
    if kind in INTEGERS:   # Postgres: a float rint()s (half to even), a numeric half away from zero
        if isinstance(value, float):
            if value != value or abs(value) >= 2.0 ** 63:   # NaN, +-Infinity and what no integer type holds
                raise ValueError(f"{description_name(dtype)} out of range")
            return dtype.validate(int(decimal.Decimal(value).to_integral_value(decimal.ROUND_HALF_EVEN)))
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
    if kind == TypeKind.LIST and isinstance(value, (list, tuple)):
        return [coerce_value(v, dtype.elem) for v in value]
    return dtype.validate(value)
