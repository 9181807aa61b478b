"""Data types and value checks: range checks, Postgres interval semantics, composites."""

import datetime
import decimal
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hummock.errors import HummockError
from relational.errors import TypeMismatchError, ValueOutOfRangeError
from relational.types import (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, DataType, Interval, TypeKind,
                              USECS_PER_DAY)


def test_type_identity_and_names():
    assert DataType.INT == DataType(TypeKind.INT) and DataType.INT != DataType.BIGINT
    s = DataType.struct([("a", DataType.INT), ("b", DataType.list(DataType.VARCHAR))])
    assert s == DataType.struct([("a", DataType.INT), ("b", DataType.list(DataType.VARCHAR))])
    assert hash(s) == hash(pickle.loads(pickle.dumps(s)))
    assert s.sql_name() == "STRUCT<a INT, b VARCHAR[]>"
    with pytest.raises(AttributeError):
        DataType.INT.kind = TypeKind.BIGINT
    with pytest.raises(TypeMismatchError):
        DataType.struct([("a", DataType.INT), ("a", DataType.INT)])
    with pytest.raises(TypeMismatchError):
        DataType.list("INT")


@pytest.mark.parametrize("dtype, good, bad", [
    (DataType.SMALLINT, [-(2**15), 2**15 - 1], [2**15, -(2**15) - 1]),
    (DataType.INT, [INT32_MIN, INT32_MAX], [INT32_MAX + 1, INT32_MIN - 1]),
    (DataType.BIGINT, [INT64_MIN, INT64_MAX], [INT64_MAX + 1, INT64_MIN - 1]),
    (DataType.REAL, [3.4028234663852886e38, float("inf"), float("nan")], [3.5e38, -1e39]),
])
def test_range_checks(dtype, good, bad):
    for value in good:
        dtype.validate(value)
    for value in bad:
        with pytest.raises(ValueOutOfRangeError) as info:
            dtype.validate(value)
        assert isinstance(info.value, (OverflowError, HummockError))


def test_type_mismatches():
    for dtype, value in [(DataType.INT, True), (DataType.INT, "1"), (DataType.BOOLEAN, 0),
                         (DataType.DATE, datetime.datetime(2020, 1, 1)), (DataType.VARCHAR, b"x"),
                         (DataType.TIME, datetime.time(1, tzinfo=datetime.timezone.utc)),
                         (DataType.TIMESTAMPTZ, datetime.datetime(2020, 1, 1)),
                         (DataType.struct([("a", DataType.INT)]), [1])]:
        with pytest.raises(TypeMismatchError) as info:
            dtype.validate(value)
        assert isinstance(info.value, TypeError)


def test_decimal_values():
    D = decimal.Decimal
    for value in (D("NaN"), D("Infinity"), D("-Infinity"), D("1.000"), D("-0"), 5):
        DataType.DECIMAL.validate(value)
    with pytest.raises(ValueOutOfRangeError):
        DataType.DECIMAL.validate(D("sNaN"))
    with pytest.raises(ValueOutOfRangeError):
        DataType.DECIMAL.validate(D("1e2000000000"))
    assert DataType.DECIMAL.validate(5) == D(5)


def test_interval_postgres_semantics():
    assert Interval(1, 0, 0) == Interval(0, 30, 0)
    assert hash(Interval(1, 0, 0)) == hash(Interval(0, 30, 0))
    assert Interval(0, 1, 0) == Interval(0, 0, USECS_PER_DAY)
    assert Interval(0, 0, 1) > Interval(0, 0, 0) > Interval(0, 0, -1)
    assert Interval(1, 0, 0) < Interval(0, 31, 0)
    assert sorted([Interval(0, 31, 0), Interval(1, 0, 1), Interval(1, 0, 0)]) == \
        [Interval(1, 0, 0), Interval(1, 0, 1), Interval(0, 31, 0)]
    assert Interval(1, 2, 3) + Interval(-1, -2, -3) == Interval()
    assert Interval.from_timedelta(datetime.timedelta(days=2, seconds=1)) == Interval(0, 2, 1_000_000)
    with pytest.raises(ValueOutOfRangeError):
        Interval(INT32_MAX + 1, 0, 0)
    with pytest.raises(TypeMismatchError):
        Interval(1.5, 0, 0)


@given(st.integers(INT32_MIN, INT32_MAX), st.integers(INT32_MIN, INT32_MAX), st.integers(INT64_MIN, INT64_MAX))
def test_interval_justified_is_equal_and_canonical(months, days, usecs):
    iv = Interval(months, days, usecs)
    j = iv.justified()
    assert j == iv and j.total_usecs() == iv.total_usecs()
    assert j.justified().months == j.months and j.justified().days == j.days
