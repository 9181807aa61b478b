"""SQL data types of the relational layer and the Python values that represent them.

Job: name every column type (DESIGN.md section 7), say which Python value stands for a value
of that type, and check values at the boundary (:meth:`DataType.validate`), so the encoders can
rely on well-formed input and users get a typed error naming what was wrong.

=============  =========================================================================
type           Python value (``None`` is NULL for every type)
=============  =========================================================================
BOOLEAN        ``bool``
SMALLINT       ``int`` in [-2**15, 2**15)      (overflow raises ValueOutOfRangeError)
INT            ``int`` in [-2**31, 2**31)
BIGINT         ``int`` in [-2**63, 2**63)
DECIMAL        ``decimal.Decimal`` of any scale, including NaN and +-Infinity (not sNaN)
REAL           ``float``, stored as float32 (finite values beyond float32 range raise)
DOUBLE         ``float``
VARCHAR        ``str`` (UTF-8 on disk; lone surrogates raise)
BYTEA          ``bytes``
DATE           ``datetime.date`` (not a ``datetime``)
TIME           ``datetime.time`` without tzinfo, microsecond precision
TIMESTAMP      ``datetime.datetime`` without tzinfo
TIMESTAMPTZ    ``datetime.datetime`` with tzinfo; decoded values are in UTC
INTERVAL       :class:`Interval` ``(months, days, usecs)``
STRUCT         ``tuple`` with one value per field
LIST           ``list`` (or tuple) of element values
JSONB          ``str``: the value's normal text as Postgres prints it (relational/jsonb.py);
               ``validate`` also takes any JSON text or a dict/list/number/bool to normalise
=============  =========================================================================

Invariants: ``DataType`` objects are immutable and compare by structure; the ``TypeKind``
numbers are part of the catalog format (do not change them). ``Interval`` compares like
Postgres: a month is 30 days and a day is 24 hours, so ``Interval(1, 0, 0) == Interval(0, 30, 0)``
and both hash alike; ``str()`` of an ``Interval`` is Postgres' text (``1 day 02:00:00``).

Callers: everyone above ``hummock`` (encoders, state tables, executors, the SQL binder).
"""

from __future__ import annotations

import datetime
import decimal
import enum
import math
import struct
from functools import total_ordering

from relational.errors import TypeMismatchError, ValueOutOfRangeError

USECS_PER_DAY = 86_400_000_000
#: Postgres interval arithmetic: one month counts as 30 days when comparing.
USECS_PER_MONTH = 30 * USECS_PER_DAY

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


class TypeKind(enum.IntEnum):
    """Type codes. Part of the catalog format: never renumber, only append."""

    BOOLEAN = 1
    SMALLINT = 2
    INT = 3
    BIGINT = 4
    DECIMAL = 5
    REAL = 6
    DOUBLE = 7
    VARCHAR = 8
    BYTEA = 9
    DATE = 10
    TIME = 11
    TIMESTAMP = 12
    TIMESTAMPTZ = 13
    INTERVAL = 14
    STRUCT = 15
    LIST = 16
    JSONB = 17


class DataType:
    """A column type. Scalars are the class attributes (``DataType.INT``); composites come from
    :meth:`struct` and :meth:`list`. Immutable, hashable, compared by structure."""

    __slots__ = ("kind", "fields", "elem", "_hash")

    # Scalar singletons, assigned below the class body.
    BOOLEAN: DataType
    SMALLINT: DataType
    INT: DataType
    BIGINT: DataType
    DECIMAL: DataType
    REAL: DataType
    DOUBLE: DataType
    VARCHAR: DataType
    BYTEA: DataType
    DATE: DataType
    TIME: DataType
    TIMESTAMP: DataType
    TIMESTAMPTZ: DataType
    INTERVAL: DataType
    JSONB: DataType

    def __init__(self, kind: TypeKind, fields: tuple = (), elem: DataType | None = None):
        object.__setattr__(self, "kind", TypeKind(kind))
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "elem", elem)
        object.__setattr__(self, "_hash", hash((self.kind, self.fields, elem)))

    def __setattr__(self, name, value):
        raise AttributeError("DataType is immutable")

    @staticmethod
    def struct(fields) -> DataType:
        """A STRUCT of named fields: ``DataType.struct([("a", DataType.INT), ...])``."""
        checked = []
        names = set()
        for item in fields:
            try:
                name, dtype = item
            except (TypeError, ValueError):
                raise TypeMismatchError(f"struct field must be a (name, DataType) pair, got {item!r}") from None
            if not isinstance(name, str) or not isinstance(dtype, DataType):
                raise TypeMismatchError(f"struct field must be a (str, DataType) pair, got {item!r}")
            if name in names:
                raise TypeMismatchError(f"duplicate struct field name {name!r}")
            names.add(name)
            checked.append((name, dtype))
        return DataType(TypeKind.STRUCT, fields=tuple(checked))

    @staticmethod
    def list(elem: DataType) -> DataType:
        """A LIST whose elements all have type ``elem``."""
        if not isinstance(elem, DataType):
            raise TypeMismatchError(f"list element type must be a DataType, got {elem!r}")
        return DataType(TypeKind.LIST, elem=elem)

    @property
    def is_composite(self) -> bool:
        return self.kind in (TypeKind.STRUCT, TypeKind.LIST)

    def __eq__(self, other):
        if not isinstance(other, DataType):
            return NotImplemented
        return self.kind == other.kind and self.fields == other.fields and self.elem == other.elem

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (DataType, (self.kind, self.fields, self.elem))

    def __repr__(self):
        if self.kind == TypeKind.STRUCT:
            return f"DataType.struct({list(self.fields)!r})"
        if self.kind == TypeKind.LIST:
            return f"DataType.list({self.elem!r})"
        return f"DataType.{self.kind.name}"

    def sql_name(self) -> str:
        """The type as SQL spells it, e.g. ``STRUCT<a INT, b VARCHAR>`` or ``INT[]``."""
        if self.kind == TypeKind.STRUCT:
            return "STRUCT<" + ", ".join(f"{n} {t.sql_name()}" for n, t in self.fields) + ">"
        if self.kind == TypeKind.LIST:
            return self.elem.sql_name() + "[]"
        if self.kind == TypeKind.TIMESTAMPTZ:
            return "TIMESTAMP WITH TIME ZONE"
        return self.kind.name

    def validate(self, value):
        """Return ``value`` in its canonical Python form for this type, or raise.

        Raises :class:`TypeMismatchError` (a ``TypeError``) when the value has the wrong
        Python type and :class:`ValueOutOfRangeError` (an ``OverflowError``) when it does not
        fit (integer overflow, REAL overflow, sNaN). ``None`` (NULL) is always valid.
        """
        if value is None:
            return None
        return _VALIDATORS[self.kind](self, value)


for _kind in TypeKind:
    if _kind not in (TypeKind.STRUCT, TypeKind.LIST):
        setattr(DataType, _kind.name, DataType(_kind))
del _kind


@total_ordering
class Interval:
    """A Postgres interval: ``months``, ``days`` and ``usecs`` kept apart (int32, int32, int64).

    Comparison and hashing use the total span with a month of 30 days and a day of 24 hours,
    as Postgres does, so ``Interval(1, 0, 0) == Interval(0, 30, 0)``. The fields themselves are
    preserved (the value encoding stores them exactly; memcomparable keys store the canonical
    :meth:`justified` form, which compares equal).
    """

    __slots__ = ("months", "days", "usecs")

    def __init__(self, months: int = 0, days: int = 0, usecs: int = 0):
        for name, value, lo, hi in (("months", months, INT32_MIN, INT32_MAX),
                                    ("days", days, INT32_MIN, INT32_MAX),
                                    ("usecs", usecs, INT64_MIN, INT64_MAX)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeMismatchError(f"Interval.{name} must be an int, got {type(value).__name__}")
            if not lo <= value <= hi:
                raise ValueOutOfRangeError(f"Interval.{name}={value} is out of range [{lo}, {hi}]")
        object.__setattr__(self, "months", int(months))
        object.__setattr__(self, "days", int(days))
        object.__setattr__(self, "usecs", int(usecs))

    def __setattr__(self, name, value):
        raise AttributeError("Interval is immutable")

    @classmethod
    def from_timedelta(cls, delta: datetime.timedelta) -> Interval:
        return cls(0, delta.days, delta.seconds * 1_000_000 + delta.microseconds)

    def total_usecs(self) -> int:
        """The span in microseconds with 30-day months: the value Postgres compares."""
        return self.months * USECS_PER_MONTH + self.days * USECS_PER_DAY + self.usecs

    @classmethod
    def from_total_usecs(cls, total: int) -> Interval:
        """The canonical interval with this total (Postgres' ``justify_interval``): all fields
        share the sign of ``total``, ``|usecs| < 1 day`` and ``|days| < 30`` -- except when the
        month count would not fit an int32, where the excess spills into days, then usecs.

        Every total of a valid ``Interval`` has such a form; larger totals raise.
        """
        negative = total < 0
        rest = -total if negative else total
        month_limit = -INT32_MIN if negative else INT32_MAX
        day_limit = -INT32_MIN if negative else INT32_MAX
        usec_limit = -INT64_MIN if negative else INT64_MAX
        months = min(rest // USECS_PER_MONTH, month_limit)
        rest -= months * USECS_PER_MONTH
        days = rest // USECS_PER_DAY if months < month_limit else min(rest // USECS_PER_DAY, day_limit)
        rest -= days * USECS_PER_DAY
        if rest > usec_limit:
            raise ValueOutOfRangeError(f"interval of {total} microseconds is out of range")
        if negative:
            return cls(-months, -days, -rest)
        return cls(months, days, rest)

    def justified(self) -> Interval:
        return Interval.from_total_usecs(self.total_usecs())

    def __eq__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return self.total_usecs() == other.total_usecs()

    def __lt__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return self.total_usecs() < other.total_usecs()

    def __hash__(self):
        return hash(("Interval", self.total_usecs()))

    def __neg__(self):
        return Interval(-self.months, -self.days, -self.usecs)

    def __add__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return Interval(self.months + other.months, self.days + other.days, self.usecs + other.usecs)

    def __sub__(self, other):
        if not isinstance(other, Interval):
            return NotImplemented
        return self + (-other)

    def __reduce__(self):
        return (Interval, (self.months, self.days, self.usecs))

    def __repr__(self):
        return f"Interval(months={self.months}, days={self.days}, usecs={self.usecs})"

    def __str__(self):
        """Postgres' text (``interval_out``, ``IntervalStyle = postgres``; EncodeInterval):
        years and months from the month count, days, then a signed ``hh:mm:ss[.ffffff]`` when
        there is time (or nothing else): ``1 year 2 mons 3 days 04:05:06.5``, ``-1 days
        +02:03:00`` (a field after a negative one carries an explicit ``+``), ``00:00:00``."""
        parts, is_zero, is_before = [], True, False
        years = -(-self.months // 12) if self.months < 0 else self.months // 12   # toward zero, as C
        for value, unit in ((years, "year"), (self.months - years * 12, "mon"), (self.days, "day")):
            if value:
                parts.append(f"{'+' if is_before and value > 0 else ''}{value} {unit}{'' if value == 1 else 's'}")
                is_before, is_zero = value < 0, False
        if is_zero or self.usecs:
            hours, rest = divmod(abs(self.usecs), 3_600_000_000)
            minutes, rest = divmod(rest, 60_000_000)
            seconds, micros = divmod(rest, 1_000_000)
            sign = "-" if self.usecs < 0 else ("+" if is_before else "")
            text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
            parts.append(text + (f".{micros:06d}".rstrip("0") if micros else ""))
        return " ".join(parts)


# --- validators: one per kind -------------------------------------------------------------

def _type_error(dtype: DataType, value) -> TypeMismatchError:
    return TypeMismatchError(f"{dtype.sql_name()} expects a different Python value, got {type(value).__name__}: {value!r:.80}")


def _check_bool(dtype, value):
    if isinstance(value, bool):
        return value
    # numpy.bool_ and similar expose __bool__ but are not ints we would silently accept
    if type(value).__name__ == "bool_":
        return bool(value)
    raise _type_error(dtype, value)


def _int_checker(lo: int, hi: int):
    def check(dtype, value):
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise _type_error(dtype, value)
        value = value.__index__()
        if not lo <= value <= hi:
            raise ValueOutOfRangeError(f"{dtype.sql_name()} out of range: {value}")
        return value
    return check


def _check_decimal(dtype, value):
    if isinstance(value, bool):
        raise _type_error(dtype, value)
    if isinstance(value, int):
        value = decimal.Decimal(value)
    if not isinstance(value, decimal.Decimal):
        raise _type_error(dtype, value)
    if value.is_snan():
        raise ValueOutOfRangeError("DECIMAL does not store signaling NaN")
    if value.is_finite() and not value.is_zero():
        adjusted = value.adjusted()
        if not -(1 << 30) < adjusted < (1 << 30):
            raise ValueOutOfRangeError(f"DECIMAL exponent out of range: {value!r:.80}")
    return value


def _check_real(dtype, value):
    value = _check_double(dtype, value)
    if math.isfinite(value) and abs(value) > FLOAT32_MAX:
        # values that round to FLOAT32_MAX are fine; struct.pack raises on true overflow
        try:
            struct.pack("<f", value)
        except OverflowError:
            raise ValueOutOfRangeError(f"REAL out of range: {value!r}") from None
    return value


def _check_double(dtype, value):
    if isinstance(value, float):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise _type_error(dtype, value)
    if isinstance(value, (str, bytes, decimal.Decimal)):
        raise _type_error(dtype, value)
    try:
        return float(value)
    except OverflowError:
        raise ValueOutOfRangeError(f"{dtype.sql_name()} out of range: {value!r:.80}") from None


def _check_varchar(dtype, value):
    if not isinstance(value, str):
        raise _type_error(dtype, value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueOutOfRangeError(f"VARCHAR is not valid UTF-8 text: {exc}") from None
    return value


def _check_bytea(dtype, value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise _type_error(dtype, value)


def _check_date(dtype, value):
    if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
        raise _type_error(dtype, value)
    return value


def _check_time(dtype, value):
    if not isinstance(value, datetime.time):
        raise _type_error(dtype, value)
    if value.tzinfo is not None:
        raise TypeMismatchError("TIME does not carry a time zone; got an aware time")
    return value


def _check_timestamp(dtype, value):
    if not isinstance(value, datetime.datetime):
        raise _type_error(dtype, value)
    if value.tzinfo is not None:
        raise TypeMismatchError("TIMESTAMP is naive; use TIMESTAMPTZ for an aware datetime")
    return value


def _check_timestamptz(dtype, value):
    if not isinstance(value, datetime.datetime):
        raise _type_error(dtype, value)
    if value.tzinfo is None or value.utcoffset() is None:
        raise TypeMismatchError("TIMESTAMPTZ needs an aware datetime (tzinfo set)")
    try:
        value.astimezone(datetime.timezone.utc)
    except OverflowError:
        raise ValueOutOfRangeError(f"TIMESTAMPTZ out of range once converted to UTC: {value!r}") from None
    return value


def _check_interval(dtype, value):
    if isinstance(value, Interval):
        return value
    if isinstance(value, datetime.timedelta):
        return Interval.from_timedelta(value)
    raise _type_error(dtype, value)


def _check_struct(dtype, value):
    if not isinstance(value, tuple):
        raise _type_error(dtype, value)
    if len(value) != len(dtype.fields):
        raise TypeMismatchError(f"{dtype.sql_name()} expects {len(dtype.fields)} fields, got {len(value)}")
    return tuple(ftype.validate(v) for (_, ftype), v in zip(dtype.fields, value))


def _check_list(dtype, value):
    if not isinstance(value, (list, tuple)):
        raise _type_error(dtype, value)
    return [dtype.elem.validate(v) for v in value]


def _check_jsonb(dtype, value):
    from relational import jsonb   # imported here: jsonb needs nothing of this module, keep it light
    try:
        tree = jsonb.parse(value) if isinstance(value, str) else jsonb.from_python(value)
    except jsonb.JsonbSyntaxError as exc:
        raise ValueOutOfRangeError(f"JSONB: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise TypeMismatchError(f"JSONB expects JSON text or a JSON-model value: {exc}") from None
    return jsonb.to_text(tree)


_VALIDATORS = {
    TypeKind.BOOLEAN: _check_bool,
    TypeKind.SMALLINT: _int_checker(INT16_MIN, INT16_MAX),
    TypeKind.INT: _int_checker(INT32_MIN, INT32_MAX),
    TypeKind.BIGINT: _int_checker(INT64_MIN, INT64_MAX),
    TypeKind.DECIMAL: _check_decimal,
    TypeKind.REAL: _check_real,
    TypeKind.DOUBLE: _check_double,
    TypeKind.VARCHAR: _check_varchar,
    TypeKind.BYTEA: _check_bytea,
    TypeKind.DATE: _check_date,
    TypeKind.TIME: _check_time,
    TypeKind.TIMESTAMP: _check_timestamp,
    TypeKind.TIMESTAMPTZ: _check_timestamptz,
    TypeKind.INTERVAL: _check_interval,
    TypeKind.STRUCT: _check_struct,
    TypeKind.LIST: _check_list,
    TypeKind.JSONB: _check_jsonb,
}
