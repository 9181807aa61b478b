"""Row value encoding: round trips over random schemas, native/pure identity (bytes, values,
exceptions, DecodeError offsets), truncated/flipped/garbage input, value checks, golden bytes.

Every property runs against each implementation in this run: the pure twin always, and the
native module too unless ``HUMMOCK_PURE_PYTHON=1``; a native module that fails to import is a
test failure in native mode, never a skip.
"""

import datetime
import decimal
import importlib
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hummock import _twins
from relational import _value_encoding_py as pure
from relational import value_encoding
from relational.errors import DecodeError, SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational.types import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from relational.types import DataType as T
from relational.types import Interval, TypeKind
from strategies import _SCALAR_VALUES as _SHARED_VALUES

D = decimal.Decimal
UTC = datetime.timezone.utc


def _load_native():
    try:
        return importlib.import_module("native._value_encoding"), None
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"


NATIVE, NATIVE_ERROR = _load_native()


def implementations():
    """Pure always; native too unless pure mode is forced (a missing build fails here)."""
    if _twins.pure_python_forced():
        return [pure]
    if NATIVE is None:
        pytest.fail(f"native._value_encoding does not import ({NATIVE_ERROR}); "
                    "build it or set HUMMOCK_PURE_PYTHON=1")
    return [pure, NATIVE]


def native_or_skip():
    if NATIVE is None:
        if _twins.pure_python_forced():
            pytest.skip("native cross-check skipped: HUMMOCK_PURE_PYTHON=1 and native module not built")
        pytest.fail(f"native._value_encoding does not import: {NATIVE_ERROR}")
    return NATIVE


# --- strategies ----------------------------------------------------------------------------
# Self-contained on purpose: the format's edge cases (every DECIMAL scale and special, zones with
# sub-minute offsets, long strings with 2-byte length varints, lists longer than one bitmap byte).

SCALARS = [T(kind) for kind in TypeKind if kind not in (TypeKind.STRUCT, TypeKind.LIST)]


def data_types(max_depth=2):
    scalar = st.sampled_from(SCALARS)
    if max_depth <= 0:
        return scalar
    inner = data_types(max_depth - 1)
    struct_type = st.lists(inner, max_size=3).map(lambda ts: T.struct([(f"f{i}", t) for i, t in enumerate(ts)]))
    return st.one_of(scalar, scalar, scalar, struct_type, inner.map(T.list))


_ZONES = st.one_of(
    st.just(UTC),
    st.timedeltas(min_value=datetime.timedelta(hours=-23, minutes=-59),
                  max_value=datetime.timedelta(hours=23, minutes=59)).map(datetime.timezone),
    st.timezones(),
)
_I32 = st.integers(INT32_MIN, INT32_MAX)
json_texts = _SHARED_VALUES[TypeKind.JSONB]
_SCALAR_VALUES = {
    TypeKind.BOOLEAN: st.booleans(),
    TypeKind.SMALLINT: st.integers(INT16_MIN, INT16_MAX) | st.sampled_from([INT16_MIN, INT16_MAX]),
    TypeKind.INT: _I32 | st.sampled_from([INT32_MIN, INT32_MAX]),
    TypeKind.BIGINT: st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([INT64_MIN, INT64_MAX]),
    TypeKind.DECIMAL: st.one_of(
        st.sampled_from([D(x) for x in ("NaN", "-NaN", "NaN123", "Infinity", "-Infinity", "0", "1.50", "-0",
                                        "-0.00", "0E+7", "0E-1000000", "1E+1073741800", "-9.99E-1073741800",
                                        "1" * 400)]),
        st.builds(lambda s, c, e: D((s, tuple(map(int, str(c))), e)),
                  st.integers(0, 1), st.integers(0, 2**200), st.integers(-40, 40) | st.integers(-(2**30) + 100, 2**30 - 200)),
        st.integers(-(2**70), 2**70)),                       # validate turns ints into Decimal
    TypeKind.REAL: st.floats(width=32) | st.integers(-(2**24), 2**24) | st.floats(min_value=-3e38, max_value=3e38),
    TypeKind.DOUBLE: st.floats() | st.sampled_from([-0.0, float("nan")]) | st.integers(-(2**53), 2**53),
    TypeKind.VARCHAR: st.text(max_size=12) | st.text(min_size=100, max_size=300),
    TypeKind.BYTEA: st.binary(max_size=12) | st.binary(min_size=128, max_size=300).map(bytearray),
    TypeKind.DATE: st.dates(),
    TypeKind.TIME: st.times(),
    TypeKind.TIMESTAMP: st.datetimes(),
    TypeKind.TIMESTAMPTZ: st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30),
                                       timezones=_ZONES),
    TypeKind.INTERVAL: st.one_of(st.builds(Interval, _I32, _I32, st.integers(INT64_MIN, INT64_MAX)),
                                 st.builds(Interval, st.integers(-2, 2), st.integers(-60, 60), st.integers(-2, 2)),
                                 st.timedeltas()),
    TypeKind.JSONB: json_texts,   # stored as its normal text (expected() normalises via validate)
}


def values(dtype, nullable=True):
    """Valid values of ``dtype`` (``None`` included when ``nullable``), at any depth."""
    if dtype.kind == TypeKind.STRUCT:
        base = st.tuples(*[values(t) for _, t in dtype.fields])
    elif dtype.kind == TypeKind.LIST:
        base = st.one_of(st.lists(values(dtype.elem), max_size=4),
                         st.lists(values(dtype.elem), min_size=8, max_size=12).map(tuple))
    else:
        base = _SCALAR_VALUES[dtype.kind]
    return st.one_of(st.none(), base) if nullable else base


schemas = st.lists(data_types(), max_size=10).map(tuple)
schema_and_row = schemas.flatmap(lambda ts: st.tuples(st.just(ts), st.tuples(*[values(t) for t in ts])))


# --- what a round trip must give back ------------------------------------------------------

def expected(dtype, value):
    """The decoded form of a valid ``value`` (docs/format.md section 2 normalisations)."""
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.STRUCT:
        return tuple(expected(t, v) for (_, t), v in zip(dtype.fields, value))
    if kind == TypeKind.LIST:
        return [expected(dtype.elem, v) for v in value]
    value = dtype.validate(value)
    if kind == TypeKind.REAL:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    if kind == TypeKind.TIMESTAMPTZ:
        return value.astimezone(UTC)
    if kind == TypeKind.DECIMAL and value.is_nan():
        return D("NaN")
    return value


def fingerprint(value):
    """A comparable picture of a decoded value that sees everything ``==`` hides: exact types,
    float bits (-0.0), DECIMAL digits and scale, INTERVAL fields, tzinfo; all NaNs alike."""
    if value is None:
        return None
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else struct.pack("<d", value))
    if isinstance(value, D):
        return ("decimal", value.as_tuple())
    if isinstance(value, Interval):
        return ("interval", value.months, value.days, value.usecs)
    if isinstance(value, (datetime.date, datetime.time)):
        return (type(value).__name__, value.isoformat(), value.tzinfo if hasattr(value, "tzinfo") else None)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(fingerprint(v) for v in value))
    return (type(value).__name__, value)


def outcome(impl, data, types):
    """What decoding gives: the fingerprint of the values, or the DecodeError's where and why."""
    try:
        return fingerprint(impl.decode_row(data, types))
    except DecodeError as exc:
        return ("DecodeError", exc.offset, exc.reason)


# --- round trips ---------------------------------------------------------------------------

@given(schema_and_row)
def test_round_trip(case):
    types, row = case
    want = fingerprint(tuple(expected(t, v) for t, v in zip(types, row)))
    for impl in implementations():
        data = impl.encode_row(row, types)
        assert fingerprint(impl.decode_row(data, types)) == want
        assert impl.encode_row(impl.decode_row(data, types), types) == data   # decoded is canonical


@given(schema_and_row)
def test_native_matches_pure(case):
    native = native_or_skip()
    types, row = case
    data = pure.encode_row(row, types)
    assert native.encode_row(row, types) == data
    assert outcome(native, data, types) == outcome(pure, data, types)


@given(schemas.flatmap(lambda ts: st.tuples(st.just(ts), st.lists(st.tuples(*[values(t) for t in ts]), max_size=5))))
def test_batch_forms_match_single_rows(case):
    types, rows = case
    for impl in implementations():
        datas = impl.encode_rows(iter(rows), list(types))
        assert datas == [impl.encode_row(r, types) for r in rows]
        assert [fingerprint(r) for r in impl.decode_rows(datas, types)] == \
               [fingerprint(impl.decode_row(d, types)) for d in datas]


def test_facade_exports_the_chosen_implementation():
    impl = pure if _twins.pure_python_forced() else native_or_skip()
    assert value_encoding.encode_row is impl.encode_row
    assert value_encoding.decode_rows is impl.decode_rows
    assert _twins.LOADED["_value_encoding"] is (impl is not pure)


@pytest.mark.parametrize("value", [D("1.50"), D("-0"), D("-0.00"), D("0E+7"), D("-1E-28"), D("123456789" * 700),
                                   D("Infinity"), D("-Infinity")])
def test_decimal_is_exact(value):
    for impl in implementations():
        got = impl.decode_row(impl.encode_row((value,), [T.DECIMAL]), [T.DECIMAL])[0]
        assert got.as_tuple() == value.as_tuple()


def test_nan_is_canonical_and_interval_fields_kept():
    types = [T.REAL, T.DOUBLE, T.DECIMAL, T.INTERVAL, T.INTERVAL]
    for impl in implementations():
        a = impl.encode_row((float("nan"), float("nan"), D("NaN"), Interval(1, 0, 0), Interval(0, 30, 0)), types)
        b = impl.encode_row((-float("nan"), -float("nan"), D("-NaN7"), Interval(1, 0, 0), Interval(0, 30, 0)), types)
        assert a == b
        _, _, nan, month, days = impl.decode_row(a, types)
        assert nan.is_qnan() and not nan.is_signed()
        assert (month.months, month.days, days.months, days.days) == (1, 0, 0, 30)


def test_decode_accepts_bytes_like_only():
    for impl in implementations():
        data = impl.encode_row((7,), [T.INT])
        for wrapped in (bytearray(data), memoryview(data)):
            assert impl.decode_row(wrapped, [T.INT]) == (7,)
        with pytest.raises(TypeMismatchError):
            impl.decode_row(5, [T.INT])


def test_empty_schema_and_empty_struct():
    empty = T.struct([])
    for impl in implementations():
        assert impl.encode_row((), []) == b"\x01\x00"
        assert impl.decode_row(b"\x01\x00", ()) == ()
        data = impl.encode_row(([(), None, ()],), [T.list(empty)])
        assert data.hex() == "010100" + "03" + "02"
        assert impl.decode_row(data, [T.list(empty)]) == ([(), None, ()],)


# --- malformed input -----------------------------------------------------------------------

@given(schema_and_row)
def test_every_truncation_raises(case):
    types, row = case
    data = pure.encode_row(row, types)
    for end in range(len(data)):
        seen = set()
        for impl in implementations():
            with pytest.raises(DecodeError) as info:
                impl.decode_row(data[:end], types)
            seen.add((info.value.offset, info.value.reason))
        assert len(seen) == 1   # same offset and reason in both implementations


@given(schema_and_row, st.data())
def test_byte_flips_never_crash(case, data):
    types, row = case
    encoded = bytearray(pure.encode_row(row, types))
    for _ in range(data.draw(st.integers(1, 3))):
        encoded[data.draw(st.integers(0, len(encoded) - 1))] = data.draw(st.integers(0, 255))
    outcomes = {outcome(impl, bytes(encoded), types) for impl in implementations()}
    assert len(outcomes) == 1


@given(schemas, st.binary(max_size=64))
def test_garbage_never_crashes(types, garbage):
    outcomes = {outcome(impl, b"\x01" + garbage, types) for impl in implementations()}
    assert len(outcomes) == 1


@given(schema_and_row, st.binary(min_size=1, max_size=4))
def test_trailing_bytes_raise(case, tail):
    types, row = case
    data = pure.encode_row(row, types)
    for impl in implementations():
        with pytest.raises(DecodeError, match="trailing") as info:
            impl.decode_row(data + tail, types)
        assert info.value.offset == len(data)


def test_wrong_column_count_and_tag_raise():
    data = pure.encode_row((1, "a"), [T.INT, T.VARCHAR])
    for impl in implementations():
        for types in ([T.INT], [T.INT, T.VARCHAR, T.INT]):
            with pytest.raises(DecodeError, match="2 columns") as info:
                impl.decode_row(data, types)
            assert info.value.offset == 1
        with pytest.raises(DecodeError, match="format tag") as info:
            impl.decode_row(b"\x02" + data[1:], [T.INT, T.VARCHAR])
        assert info.value.offset == 0


# (types, hex of a malformed row, offset of the error, words of the reason)
MALFORMED = [
    ([T.BOOLEAN], "01010002", 3, "BOOLEAN byte"),
    ([T.VARCHAR], "01010002c328", 4, "UTF-8"),
    ([T.VARCHAR], "01010002eda080", 4, "UTF-8"),                   # an encoded surrogate
    ([T.VARCHAR], "0101000a6162", 4, "need 10 bytes"),
    ([T.DATE], "010100" + struct.pack("<i", 2_932_897).hex(), 3, "DATE"),
    ([T.DATE], "010100" + struct.pack("<i", -719_163).hex(), 3, "DATE"),
    ([T.TIME], "010100" + struct.pack("<q", 86_400_000_000).hex(), 3, "TIME"),
    ([T.TIME], "010100" + struct.pack("<q", -1).hex(), 3, "TIME"),
    ([T.TIMESTAMP], "010100" + struct.pack("<q", pure.MAX_USECS + 1).hex(), 3, "TIMESTAMP"),
    ([T.TIMESTAMPTZ], "010100" + struct.pack("<q", pure.MIN_USECS - 1).hex(), 3, "TIMESTAMP"),
    ([T.INT], "0181" + "80" * 8, 1, "truncated varint"),
    ([T.INT], "01ffffffffffffffffff02", 1, "exceeds 64 bits"),
    ([T.INT, T.INT], "010204", 2, "padding bits"),
    ([T.list(T.INT)], "010100" + "ffffffffffffffffff01" + "00", 13, "need 2305843009213693952 bytes"),
    ([T.list(T.INT)], "010100" + "0300" + "01000000", 9, "need 4 bytes, 0 left"),
    ([T.list(T.INT)], "010100" + "0108", 4, "padding bits"),
    ([T.DECIMAL], "01010004", 3, "DECIMAL kind"),
    ([T.DECIMAL], "0101000002", 4, "sign byte"),
    ([T.DECIMAL], "010100000000", 6, "truncated varint"),
    ([T.DECIMAL], "01010000000003ff", 7, "need 3 bytes"),
    ([T.DECIMAL], "0101000000" + "feffffffffffffffff01" + "0101", 5, "exponent"),   # 2**63-1: beyond Decimal
    ([T.DECIMAL], "0101000000" + "8080808008" + "0101", 5, "exponent"),             # adjusted = 2**30
    ([T.struct([("a", T.INT)])], "01010001", 3, None),             # a NULL struct field is fine...
    ([T.struct([("a", T.INT)])], "01010002", 3, "padding bits"),  # ...a bit beyond its fields is not
]


@pytest.mark.parametrize("types, hexdata, offset, reason", MALFORMED)
def test_malformed_rows(types, hexdata, offset, reason):
    for impl in implementations():
        if reason is None:
            assert impl.decode_row(bytes.fromhex(hexdata), types) == ((None,),)
            continue
        with pytest.raises(DecodeError, match=reason) as info:
            impl.decode_row(bytes.fromhex(hexdata), types)
        assert info.value.offset == offset, info.value


# --- value checks --------------------------------------------------------------------------

_PLUS_1H = datetime.timezone(datetime.timedelta(hours=1))
TM, VR = TypeMismatchError, ValueOutOfRangeError
BAD_VALUES = [
    (T.INT, 2**31, VR), (T.INT, -(2**31) - 1, VR), (T.SMALLINT, -(2**15) - 1, VR), (T.SMALLINT, 2**15, VR),
    (T.BIGINT, 2**63, VR), (T.BIGINT, -(2**63) - 1, VR),
    (T.INT, "1", TM), (T.INT, 1.0, TM), (T.INT, True, TM), (T.BIGINT, D(1), TM),
    (T.BOOLEAN, 1, TM), (T.BOOLEAN, "t", TM),
    (T.REAL, 1e39, VR), (T.REAL, -(2**200), VR), (T.REAL, "1", TM),
    (T.DOUBLE, 10**400, VR), (T.DOUBLE, "1.0", TM), (T.DOUBLE, D("1"), TM), (T.DOUBLE, True, TM),
    (T.VARCHAR, b"x", TM), (T.VARCHAR, "a\ud800", VR), (T.VARCHAR, 5, TM),
    (T.BYTEA, "x", TM), (T.BYTEA, [1], TM),
    (T.DECIMAL, 1.5, TM), (T.DECIMAL, D("sNaN"), VR), (T.DECIMAL, D("1E+1073741824"), VR), (T.DECIMAL, True, TM),
    (T.DATE, datetime.datetime(2020, 1, 1), TM), (T.DATE, "2020-01-01", TM),
    (T.TIME, datetime.time(1, tzinfo=UTC), TM), (T.TIME, datetime.datetime(2020, 1, 1), TM),
    (T.TIMESTAMP, datetime.datetime(2020, 1, 1, tzinfo=UTC), TM), (T.TIMESTAMP, datetime.date(2020, 1, 1), TM),
    (T.TIMESTAMPTZ, datetime.datetime(2020, 1, 1), TM), (T.TIMESTAMPTZ, 0, TM),
    # an instant Python cannot represent in UTC: refused when writing, not discovered when reading
    (T.TIMESTAMPTZ, datetime.datetime(1, 1, 1, tzinfo=_PLUS_1H), VR),
    (T.TIMESTAMPTZ, datetime.datetime(9999, 12, 31, 23, 30, tzinfo=datetime.timezone(-datetime.timedelta(hours=1))), VR),
    (T.INTERVAL, 5, TM), (T.INTERVAL, (1, 2, 3), TM),
    (T.struct([("a", T.INT)]), (1, 2), TM), (T.struct([("a", T.INT)]), [1], TM),
    (T.struct([("a", T.INT)]), (2**31,), VR), (T.struct([("a", T.INT)]), ("x",), TM),
    (T.list(T.INT), 5, TM), (T.list(T.INT), {1}, TM), (T.list(T.INT), "ab", TM),
    (T.list(T.INT), [1, None, "x"], TM), (T.list(T.list(T.SMALLINT)), [[1], [2**15]], VR),
]


@pytest.mark.parametrize("dtype, value, error", BAD_VALUES)
def test_bad_values_raise_like_validate(dtype, value, error):
    for impl in implementations():
        with pytest.raises(error) as info:
            impl.encode_row((1, value), [T.INT, dtype])
        assert type(info.value) is error
        with pytest.raises(error):
            impl.encode_rows([(1, None), (1, value)], [T.INT, dtype])


def test_first_bad_value_decides():
    late_instant = datetime.datetime(1, 1, 1, tzinfo=_PLUS_1H)
    for impl in implementations():
        with pytest.raises(ValueOutOfRangeError):
            impl.encode_row((2**31, "x"), [T.INT, T.INT])
        with pytest.raises(ValueOutOfRangeError):
            impl.encode_row((late_instant, "x"), [T.TIMESTAMPTZ, T.INT])
        with pytest.raises(TypeMismatchError):
            impl.encode_row(((1, "x"), late_instant), [T.struct([("a", T.INT), ("b", T.INT)]), T.TIMESTAMPTZ])


def test_schema_errors():
    for impl in implementations():
        for bad_types in (None, [T.INT, "INT"], [[T.INT]], [T.list(T.INT), 3]):
            with pytest.raises(SchemaError):
                impl.encode_row((1, 1), bad_types)
            with pytest.raises(SchemaError):
                impl.decode_row(b"\x01\x02\x00", bad_types)
        with pytest.raises(SchemaError):
            impl.encode_row((1, 2), [T.INT])
        with pytest.raises(SchemaError):
            impl.encode_row(5, [T.INT])


# --- golden bytes: the format must not drift -------------------------------------------------

GOLDEN_TYPES = (T.BOOLEAN, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.REAL, T.DOUBLE, T.VARCHAR, T.BYTEA,
                T.DATE, T.TIME, T.TIMESTAMP, T.TIMESTAMPTZ, T.INTERVAL,
                T.struct([("a", T.INT), ("b", T.VARCHAR)]), T.list(T.BIGINT))
GOLDEN_ROWS = [
    (None,) * 16,
    (True, 1, -2, 3, D("1.50"), 1.5, -2.25, "héllo", b"\x00\xff", datetime.date(2024, 2, 29),
     datetime.time(12, 34, 56, 789), datetime.datetime(2024, 2, 29, 12, 0),
     datetime.datetime(2024, 2, 29, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
     Interval(1, -2, 3), (7, "x"), [1, -1]),
    (False, -(2**15), -(2**31), -(2**63), D("-0.00"), -float("inf"), float("nan"), "", b"",
     datetime.date(1, 1, 1), datetime.time(23, 59, 59, 999999), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
     datetime.datetime(1970, 1, 1, tzinfo=UTC), Interval(-1, 0, -(2**63)), (None, None), []),
    (None, None, None, None, D("NaN"), None, -0.0, None, None, None, None, None, None, None, None,
     [None, 2, None, None, None, None, None, None, 9]),
    (None, None, None, None, D("-Infinity"), None, None, None, None, None, None, None, None, None, None, None),
    (None, None, None, None, D("12345678901234567890E-5"), None, None, None, None, None, None, None, None, None, None, None),
]
GOLDEN_HEX = [
    "0110ffff",
    # tag, 16 columns, no NULLs, BOOLEAN 1, SMALLINT 1, INT -2, BIGINT 3, DECIMAL finite + zz(-2) len 1 150,
    # REAL, DOUBLE, "héllo", BYTEA, DATE 19782, TIME, TIMESTAMP, TIMESTAMPTZ (10:00 UTC), INTERVAL,
    # STRUCT (bitmap, 7, "x"), LIST (2 elements, bitmap, 1, -1)
    "0110" "0000" "01" "0100" "feffffff" "0300000000000000" "0000030196" "0000c03f" "00000000000002c0"
    "0668c3a96c6c6f" "0200ff" "464d0000" "151fda8b0a000000" "00f0afff83120600" "00a8885282120600"
    "01000000" "feffffff" "0300000000000000" "00" "07000000" "0178" "02" "00" "0100000000000000" "ffffffffffffffff",
    "0110" "0000" "00" "0080" "00000080" "0000000000000080" "00010300" "000080ff" "000000000000f87f" "00" "00"
    "c606f5ff" "ff5fd71d14000000" "ff5f73cc0c448403" "0000000000000000" "ffffffff" "00000000" "0000000000000080"
    "03" "00",
    "0110" "af7f" "01" "0000000000000080" "09" "fd00" "0200000000000000" "0900000000000000",
    "0110" "efff" "03",
    "0110" "efff" "00" "00" "09" "08" "ab54a98ceb1f0ad2",
]


def test_golden_bytes():
    for impl in implementations():
        assert [d.hex() for d in impl.encode_rows(GOLDEN_ROWS, GOLDEN_TYPES)] == GOLDEN_HEX
        decoded = impl.decode_rows([bytes.fromhex(h) for h in GOLDEN_HEX], GOLDEN_TYPES)
        assert [fingerprint(r) for r in decoded] == \
               [fingerprint(tuple(expected(t, v) for t, v in zip(GOLDEN_TYPES, r))) for r in GOLDEN_ROWS]


def test_golden_small_row_spelled_out():
    # tag 01 | count 03 | bitmap 0b010 (column 1 NULL) | INT 1 as i32le | VARCHAR len 2 "ab"
    for impl in implementations():
        assert impl.encode_row((1, None, "ab"), [T.INT, T.BIGINT, T.VARCHAR]).hex() == "0103020100000002" "6162"


# --- DECIMAL: the native fast path's edges ---------------------------------------------------
# The native decoder reads a finite DECIMAL with an exponent within +-10**6 and at most 8
# significant coefficient bytes itself, and hands everything else to the twin's get_decimal:
# values and errors on both sides of each limit must be the twin's.

def _varint(n: int, pad: int = 0) -> bytes:
    """``n`` as a varint, with ``pad`` redundant continuation bytes (non-canonical, still valid)."""
    out = bytearray()
    while True:
        out.append(n & 0x7F)
        n >>= 7
        if not n:
            break
        out[-1] |= 0x80
    if pad:
        out[-1] |= 0x80
        out.extend(b"\x80" * (pad - 1) + b"\x00")
    return bytes(out)


def _decimal_row(kind: int, sign: int, exponent: int, coefficient: bytes, pad: int = 0, length=None) -> bytes:
    zigzag = (exponent << 1) ^ (exponent >> 63) if exponent < 0 else exponent << 1
    length = len(coefficient) if length is None else length
    row_head = bytes([pure.FORMAT_TAG, 1, 0])   # the format tag, one column, no NULLs
    return row_head + bytes([kind, sign]) + _varint(zigzag & (2 ** 64 - 1), pad) + _varint(length, pad) + coefficient


@given(kind=st.sampled_from([pure.DECIMAL_FINITE, pure.DECIMAL_FINITE, pure.DECIMAL_FINITE, 0x01, 0x09]),
       sign=st.sampled_from([0, 1, 1, 2]),
       exponent=st.one_of(st.integers(-1_000_002, 1_000_002), st.integers(-2 ** 40, 2 ** 40),
                          st.sampled_from([-1_000_001, -1_000_000, 1_000_000, 1_000_001, 0])),
       zeros=st.integers(0, 3), significant=st.binary(max_size=10), pad=st.integers(0, 2),
       length_delta=st.sampled_from([0, 0, 0, -1, 1]))
def test_decimal_fast_path_edges_match_pure(kind, sign, exponent, zeros, significant, pad, length_delta):
    coefficient = b"\x00" * zeros + significant
    data = _decimal_row(kind, sign, exponent, coefficient, pad, max(0, len(coefficient) + length_delta))
    outcomes = {outcome(impl, data, [T.DECIMAL]) for impl in implementations()}
    assert len(outcomes) == 1, outcomes


def test_decimal_fast_path_limits_decode_exactly():
    cases = [(0, 0, b""), (1, 0, b""), (1, 5, b""), (0, -3, b"\x00\x00"),          # zeros keep sign and exponent
             (0, 0, b"\xff" * 8), (1, 1_000_000, b"\xff" * 8), (0, -1_000_000, b"\x01"),   # the fast path's limits
             (0, 0, b"\x01" + b"\x00" * 8), (0, 1_000_001, b"\x07"), (1, -1_000_001, b"\x07"),  # just past them
             (0, 2, b"\x00\x00\x00\x30\x39")]                                        # leading zero bytes
    for sign, exponent, coefficient in cases:
        want = D(f"{'-' if sign else ''}{int.from_bytes(coefficient, 'big')}E{exponent}")
        for pad in (0, 1):
            data = _decimal_row(pure.DECIMAL_FINITE, sign, exponent, coefficient, pad)
            for impl in implementations():
                assert fingerprint(impl.decode_row(data, [T.DECIMAL])) == ("tuple", (fingerprint(want),))
