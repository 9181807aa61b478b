"""Spark types for relational columns, and Arrow data in Spark's layout and back.

Job: the one mapping between :class:`~relational.types.DataType` and Spark SQL types used by the
Spark data source (``relational/spark.py``), and the conversions of column values between our
Python values and the Arrow types Spark exchanges with Python data sources
(``pyspark.sql.pandas.types.to_arrow_type``; TIME is ``time64[ns]``, lists name their item
``element``, every field nullable):

=============  ==========================================  ===================================
type           Spark type                                  note
=============  ==========================================  ===================================
BOOLEAN        BooleanType
SMALLINT/INT   ShortType / IntegerType
BIGINT         LongType
REAL / DOUBLE  FloatType / DoubleType
DECIMAL        StringType (``str(Decimal)``)                exact: any scale, NaN, +-Infinity;
                                                            loads also take DecimalType
VARCHAR        StringType
BYTEA          BinaryType
DATE           DateType
TIME           StringType (``HH:MM:SS.ffffff``)             Spark's TimeType needs
                                                            spark.sql.timeType.enabled; loads
                                                            take both
TIMESTAMP      TimestampNTZType
TIMESTAMPTZ    TimestampType                                (an instant; shown in session tz)
INTERVAL       STRUCT<months INT, days INT, microseconds BIGINT>   Spark's CalendarIntervalType
                                                            has no Arrow form; fields kept apart
STRUCT         StructType of the fields
LIST           ArrayType of the element
JSONB          StringType (the normal text)
=============  ==========================================  ===================================

Loads into a new table derive the reverse mapping (:func:`from_spark_type`): the types above,
plus DecimalType -> DECIMAL; ByteType, MapType, CalendarInterval and the ANSI interval types
and anything else are refused with :class:`~relational.errors.SchemaError` naming the column.

pyspark is imported inside the functions: importing this module is cheap.
Callers: :mod:`relational.spark`, tests.
"""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

from relational.arrow import to_pylist
from relational.errors import SchemaError
from relational.types import DataType, Interval, TypeKind

INTERVAL_FIELDS = ("months", "days", "microseconds")


def spark_type(dtype: DataType):
    """The Spark SQL type that holds values of ``dtype`` (module table)."""
    from pyspark.sql import types as T

    kind = dtype.kind
    if kind == TypeKind.STRUCT:
        return T.StructType([T.StructField(name, spark_type(t), True) for name, t in dtype.fields])
    if kind == TypeKind.LIST:
        return T.ArrayType(spark_type(dtype.elem), True)
    if kind == TypeKind.INTERVAL:
        return T.StructType([T.StructField("months", T.IntegerType(), True),
                             T.StructField("days", T.IntegerType(), True),
                             T.StructField("microseconds", T.LongType(), True)])
    simple = {
        TypeKind.BOOLEAN: T.BooleanType, TypeKind.SMALLINT: T.ShortType, TypeKind.INT: T.IntegerType,
        TypeKind.BIGINT: T.LongType, TypeKind.REAL: T.FloatType, TypeKind.DOUBLE: T.DoubleType,
        TypeKind.DECIMAL: T.StringType, TypeKind.VARCHAR: T.StringType, TypeKind.BYTEA: T.BinaryType,
        TypeKind.DATE: T.DateType, TypeKind.TIMESTAMP: T.TimestampNTZType,
        TypeKind.TIMESTAMPTZ: T.TimestampType, TypeKind.JSONB: T.StringType,
    }
    if kind == TypeKind.TIME:
        return T.StringType()
    return simple[kind]()


def spark_schema(names, types):
    """A Spark ``StructType`` of the columns (every field nullable)."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(n, spark_type(t), True) for n, t in zip(names, types)])


def from_spark_type(stype, column: str) -> DataType:
    """The DataType a new table gets for a Spark column of type ``stype``; SchemaError if none."""
    from pyspark.sql import types as T

    pairs = [(T.BooleanType, DataType.BOOLEAN), (T.ShortType, DataType.SMALLINT), (T.IntegerType, DataType.INT),
             (T.LongType, DataType.BIGINT), (T.FloatType, DataType.REAL), (T.DoubleType, DataType.DOUBLE),
             (T.DecimalType, DataType.DECIMAL), (T.StringType, DataType.VARCHAR), (T.BinaryType, DataType.BYTEA),
             (T.DateType, DataType.DATE), (T.TimestampNTZType, DataType.TIMESTAMP),
             (T.TimestampType, DataType.TIMESTAMPTZ)]
    if isinstance(stype, T.TimeType):
        return DataType.TIME
    for cls, dtype in pairs:
        if type(stype) is cls or (cls is T.DecimalType and isinstance(stype, T.DecimalType)):
            return dtype
    if isinstance(stype, T.ArrayType):
        return DataType.list(from_spark_type(stype.elementType, column))
    if isinstance(stype, T.StructType):
        return DataType.struct([(f.name, from_spark_type(f.dataType, f"{column}.{f.name}")) for f in stype.fields])
    raise SchemaError(f"column {column}: Spark type {stype.simpleString()} has no relational type "
                      f"(supported: boolean, smallint, int, bigint, float, double, decimal, string, binary, "
                      f"date, time, timestamp_ntz, timestamp, struct, array)")


def same_type(stype, dtype: DataType) -> bool:
    """Whether a Spark column of type ``stype`` holds values of ``dtype`` as loads and reads
    exchange them (nullability ignored; DECIMAL also accepts DecimalType)."""
    from pyspark.sql import types as T

    if dtype.kind == TypeKind.DECIMAL and isinstance(stype, T.DecimalType):
        return True
    if dtype.kind == TypeKind.TIME and isinstance(stype, T.TimeType):
        return True
    if dtype.kind == TypeKind.STRUCT and isinstance(stype, T.StructType):
        return [f.name for f in stype.fields] == [n for n, _ in dtype.fields] and all(
            same_type(f.dataType, t) for f, (_, t) in zip(stype.fields, dtype.fields))
    if dtype.kind == TypeKind.LIST and isinstance(stype, T.ArrayType):
        return same_type(stype.elementType, dtype.elem)
    try:
        return stype.simpleString() == spark_type(dtype).simpleString()
    except KeyError:
        return False


# --- our values -> Spark's Arrow -----------------------------------------------------------

def _needs_fixup(dtype: DataType) -> bool:
    return dtype.kind in (TypeKind.DECIMAL, TypeKind.TIME, TypeKind.INTERVAL, TypeKind.STRUCT, TypeKind.LIST)


def _to_spark_value(value, dtype: DataType):
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.DECIMAL:
        return str(value)
    if kind == TypeKind.TIME:
        return value.isoformat(timespec="microseconds")
    if kind == TypeKind.INTERVAL:
        return {"months": value.months, "days": value.days, "microseconds": value.usecs}
    if kind == TypeKind.STRUCT:
        return {name: _to_spark_value(v, t) for v, (name, t) in zip(value, dtype.fields)}
    if kind == TypeKind.LIST:
        return [_to_spark_value(v, dtype.elem) for v in value]
    return value


def spark_column(values: list, dtype: DataType, arrow_type: pa.DataType) -> pa.Array:
    """An Arrow array of Spark's ``arrow_type`` for ``dtype`` holding our Python ``values``."""
    if _needs_fixup(dtype):
        values = [_to_spark_value(v, dtype) for v in values]
    return pa.array(values, type=arrow_type)


# --- Spark's Arrow -> our columns ------------------------------------------------------------

def _from_spark_value(value, dtype: DataType):
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.DECIMAL:
        return decimal.Decimal(value) if isinstance(value, str) else value
    if kind == TypeKind.TIME:
        return datetime.time.fromisoformat(value) if isinstance(value, str) else value
    if kind == TypeKind.INTERVAL:
        return Interval(value["months"] or 0, value["days"] or 0, value["microseconds"] or 0)
    if kind == TypeKind.STRUCT:
        return tuple(_from_spark_value(value.get(name), t) for name, t in dtype.fields)
    if kind == TypeKind.LIST:
        return [_from_spark_value(v, dtype.elem) for v in value]
    return value


def table_column(array, dtype: DataType):
    """A column for ``RowSerde.encode_chunk`` from a Spark Arrow array of ``dtype``'s Spark type:
    the array itself where the encoders read it (simple types), else Python values."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = dtype.kind
    if kind == TypeKind.TIME and pa.types.is_time(array.type):
        return array.cast(pa.time64("us"), safe=False).to_pylist()   # Spark keeps nanoseconds
    if kind in (TypeKind.TIME, TypeKind.INTERVAL, TypeKind.STRUCT, TypeKind.LIST) or (
            kind == TypeKind.DECIMAL and pa.types.is_string(array.type)):
        return [_from_spark_value(v, dtype) for v in array.to_pylist()]
    if kind == TypeKind.DECIMAL:
        return to_pylist(array, dtype)
    return array
