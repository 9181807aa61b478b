"""Memcomparable encoding: order preservation against a model comparator, round trips,
prefix-freeness, malformed input, native/pure identity, golden bytes, and the vectorized path.

The model (:func:`model_cmp`) is SQL ordering written plainly: NULL placement per order,
NaN above every number and equal to itself, -0.0 == 0.0, Postgres interval totals, UTC
instants for TIMESTAMPTZ, structs field by field and lists lexicographically (NULLS LAST
inside composites).
"""

import datetime
import decimal
import json
import math
import os
import pathlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import twins
from relational import _memcomparable_py as pure
from relational import memcomparable as mc
from relational.errors import DecodeError, SchemaError, TypeMismatchError, ValueOutOfRangeError
from relational.memcomparable import OrderType
from relational.types import DataType as T
from relational.types import Interval, TypeKind
from strategies import SCALARS, data_types, rows, values

ORDERS = st.builds(OrderType, st.booleans(), st.one_of(st.none(), st.booleans()))


def implementations():
    return twins.implementations(pure, "_memcomparable")


# --- the model ---------------------------------------------------------------------------

def _cmp(a, b) -> int:
    return (a > b) - (a < b)


def _jsonb_model_key(text):
    """Postgres' jsonb order, written plainly: null < string < number < boolean < array <
    object; arrays and objects by size first, objects pair by pair in key order (UTF-8
    length, then bytes)."""
    def key(v):
        if v is None:
            return (0,)
        if isinstance(v, str):
            return (1, v.encode())
        if isinstance(v, bool):
            return (3, v)
        if isinstance(v, decimal.Decimal):   # by value, then scale (1 before 1.0: distinct keys)
            return (2, v, max(0, -v.as_tuple().exponent))
        if isinstance(v, list):
            return (4, len(v), [key(x) for x in v])
        items = sorted(v.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        return (5, len(items), [part for k, x in items for part in (k.encode(), key(x))])
    pairs_last = lambda pairs: dict(pairs)   # noqa: E731  (a duplicate key keeps its last value)
    top = json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal, object_pairs_hook=pairs_last)
    return (-1,) if top == [] else key(top)   # Postgres: a top-level empty array sorts below everything


def _scalar_cmp(kind, a, b) -> int:
    if kind == TypeKind.JSONB:
        return _cmp(_jsonb_model_key(a), _jsonb_model_key(b))
    if kind in (TypeKind.REAL, TypeKind.DOUBLE):
        if kind == TypeKind.REAL:
            a, b = (struct.unpack("<f", struct.pack("<f", x))[0] for x in (a, b))
        a_nan, b_nan = math.isnan(a), math.isnan(b)
        if a_nan or b_nan:
            return _cmp(a_nan, b_nan)
        return _cmp(a, b)
    if kind == TypeKind.DECIMAL:
        a_nan, b_nan = a.is_nan(), b.is_nan()
        if a_nan or b_nan:
            return _cmp(a_nan, b_nan)
        return _cmp(a, b)
    return _cmp(a, b)


def _value_cmp(dtype, a, b, nulls_first=False) -> int:
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (1 if a is None else -1) * (-1 if nulls_first else 1)
    if dtype.kind == TypeKind.STRUCT:
        for (_, ftype), x, y in zip(dtype.fields, a, b):
            c = _value_cmp(ftype, x, y)
            if c:
                return c
        return 0
    if dtype.kind == TypeKind.LIST:
        for x, y in zip(a, b):
            c = _value_cmp(dtype.elem, x, y)
            if c:
                return c
        return _cmp(len(a), len(b))
    return _scalar_cmp(dtype.kind, a, b)


def model_cmp(types, orders, a, b) -> int:
    for dtype, order, x, y in zip(types, orders, a, b):
        c = _value_cmp(dtype, x, y, order.nulls_first)
        if x is not None and y is not None and order.descending:
            c = -c
        if c:
            return c
    return 0


def model_equal(dtype, a, b) -> bool:
    return _value_cmp(dtype, a, b) == 0


schemas = st.lists(st.tuples(data_types(), ORDERS), min_size=1, max_size=3)


# --- properties ------------------------------------------------------------------------------

@given(st.data())
def test_order_is_preserved(data):
    schema = data.draw(schemas)
    types = tuple(t for t, _ in schema)
    orders = tuple(o for _, o in schema)
    a = data.draw(rows(types))
    b = data.draw(st.one_of(rows(types), st.just(a)))
    expected = model_cmp(types, orders, a, b)
    for impl in implementations():
        ea, eb = impl.encode_row(a, types, orders), impl.encode_row(b, types, orders)
        assert _cmp(ea, eb) == expected, (impl.__name__, a, b, ea.hex(), eb.hex())


@given(st.data())
def test_single_column_order_for_every_type(data):
    dtype = data.draw(data_types(max_depth=1))
    order = data.draw(ORDERS)
    xs = data.draw(st.lists(values(dtype), min_size=2, max_size=6))
    for impl in implementations():
        keys = [impl.encode_row((x,), (dtype,), (order,)) for x in xs]
        for x, kx in zip(xs, keys):
            for y, ky in zip(xs, keys):
                assert _cmp(kx, ky) == model_cmp((dtype,), (order,), (x,), (y,))


@given(st.data())
def test_round_trip(data):
    schema = data.draw(schemas)
    types = tuple(t for t, _ in schema)
    orders = tuple(o for _, o in schema)
    row = data.draw(rows(types))
    for impl in implementations():
        encoded = impl.encode_row(row, types, orders)
        decoded = impl.decode_row(encoded, types, orders)
        assert all(model_equal(t, x, y) for t, x, y in zip(types, row, decoded)), (row, decoded)
        assert impl.encode_row(decoded, types, orders) == encoded
        prefixed, end = impl.decode_row_prefix(b"xy" + encoded + b"z", types, orders, 2)
        assert end == 2 + len(encoded) and repr(prefixed) == repr(decoded)
        assert repr(impl.decode_rows([b"xy" + encoded], types, orders, 2)) == repr([decoded])


def test_decode_rows_offset_errors_name_the_offset():
    """``decode_rows(..., offset)`` rejects an offset outside a buffer and bytes after the row,
    with the same error in both implementations."""
    from relational.types import DataType as T
    seen = []
    for impl in implementations():
        key = b"\x00\x07" + impl.encode_row([5], [T.BIGINT])
        assert impl.decode_rows([key], [T.BIGINT], None, 2) == [(5,)]
        errors = []
        for datas, offset in (([key], len(key) + 1), ([key], -1), ([key + b"!"], 2), ([key], 3)):
            with pytest.raises(DecodeError) as info:
                impl.decode_rows(datas, [T.BIGINT], None, offset)
            errors.append(str(info.value))
        seen.append(errors)
    assert all(errors == seen[0] for errors in seen), seen
    assert "outside a buffer of 11 bytes" in seen[0][0] and "trailing" in seen[0][2]


@given(st.data())
def test_native_and_pure_agree(data):
    schema = data.draw(schemas)
    types = tuple(t for t, _ in schema)
    orders = tuple(o for _, o in schema)
    batch = data.draw(st.lists(rows(types), min_size=1, max_size=4))
    results = []
    prefix = data.draw(st.binary(max_size=3))
    for impl in implementations():
        encoded = impl.encode_rows(batch, types, orders)
        assert encoded == [impl.encode_row(r, types, orders) for r in batch]
        assert impl.encode_rows(batch, types, orders, prefix) == [prefix + e for e in encoded]
        results.append((encoded, repr(impl.decode_rows(encoded, types, orders))))
    assert all(r == results[0] for r in results)


def test_encode_rows_prefix_must_be_bytes():
    for impl in implementations():
        with pytest.raises(TypeError, match="prefix must be bytes, got str"):
            impl.encode_rows([(1,)], [T.BIGINT], None, "ab")


@given(st.data())
def test_prefix_free_and_truncation_raises(data):
    types = (data.draw(data_types()),)
    orders = (data.draw(ORDERS),)
    a, b = data.draw(rows(types)), data.draw(rows(types))
    for impl in implementations():
        ea, eb = impl.encode_row(a, types, orders), impl.encode_row(b, types, orders)
        if ea != eb:
            assert not eb.startswith(ea) and not ea.startswith(eb)
        for cut in range(len(ea)):
            with pytest.raises(DecodeError):
                impl.decode_row(ea[:cut], types, orders)
        with pytest.raises(DecodeError):
            impl.decode_row(ea + b"\x00", types, orders)


@given(st.data(), st.binary(max_size=40))
def test_arbitrary_bytes_never_crash(data, garbage):
    types = tuple(data.draw(st.lists(data_types(), min_size=1, max_size=3)))
    outcomes = []
    for impl in implementations():
        try:
            outcomes.append(repr(impl.decode_row(garbage, types)))
        except DecodeError as exc:
            outcomes.append(type(exc))
    assert all(o == outcomes[0] for o in outcomes)


@given(st.data())
def test_flipped_byte_never_crashes(data):
    types = tuple(data.draw(st.lists(data_types(), min_size=1, max_size=3)))
    row = data.draw(rows(types))
    for impl in implementations():
        encoded = bytearray(impl.encode_row(row, types))
        i = data.draw(st.integers(0, len(encoded) - 1))
        encoded[i] ^= data.draw(st.integers(1, 255))
        try:
            impl.decode_row(bytes(encoded), types)
        except DecodeError:
            pass


# --- specific cases -----------------------------------------------------------------------

@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_float_special_values(impl):
    def key(x, dtype=T.DOUBLE):
        return impl.encode_row((x,), (dtype,))
    for dtype in (T.DOUBLE, T.REAL):
        ordered = [-math.inf, -1e30, -1.0, -1e-30, 0.0, 1e-30, 1.0, 1e30, math.inf, math.nan]
        keys = [key(x, dtype) for x in ordered]
        assert keys == sorted(keys)
        assert key(-0.0, dtype) == key(0.0, dtype)
        assert key(float("nan"), dtype) == key(-float("nan"), dtype)


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_decimal_scales_and_specials(impl):
    D = decimal.Decimal

    def key(x):
        return impl.encode_row((D(x),), (T.DECIMAL,))
    assert key("1.0") == key("1.00") == key("1")
    assert key("-0") == key("0") == key("0.000")
    ordered = ["-Infinity", "-1e40", "-10", "-1.5", "-1.05", "-1", "-0.001", "0", "1e-40", "0.1", "0.105",
               "0.11", "1", "1.05", "1.5", "10", "1e40", "Infinity", "NaN"]
    keys = [key(x) for x in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert impl.decode_row(key("123.4500"), (T.DECIMAL,)) == (D("123.45"),)


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_strings_with_nul_bytes(impl):
    ordered = ["", "\x00", "\x00\x00", "\x00a", "a", "a\x00", "a\x00\x00", "a\x01", "ab", "b"]
    for order in (OrderType.ASC, OrderType.DESC):
        keys = [impl.encode_row((s,), (T.VARCHAR,), (order,)) for s in ordered]
        assert keys == sorted(keys, reverse=order.descending)
        assert [impl.decode_row(k, (T.VARCHAR,), (order,))[0] for k in keys] == ordered


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_null_placement(impl):
    for order, null_is_first in ((OrderType.ASC, False), (OrderType.DESC, True),
                                 (OrderType(False, True), True), (OrderType(True, False), False)):
        null_key = impl.encode_row((None,), (T.INT,), (order,))
        for x in (-(2**31), 0, 2**31 - 1):
            assert (null_key < impl.encode_row((x,), (T.INT,), (order,))) == null_is_first


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_interval_uses_postgres_totals(impl):
    assert impl.encode_row((Interval(1, 0, 0),), (T.INTERVAL,)) == impl.encode_row((Interval(0, 30, 0),), (T.INTERVAL,))
    assert impl.encode_row((Interval(0, 1, 0),), (T.INTERVAL,)) > impl.encode_row((Interval(0, 0, 86_399_999_999),), (T.INTERVAL,))
    assert impl.decode_row(impl.encode_row((Interval(0, 45, 3),), (T.INTERVAL,)), (T.INTERVAL,)) == (Interval(1, 15, 3),)


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_bad_values_raise_typed_errors(impl):
    cases = [
        (T.SMALLINT, 2**15, ValueOutOfRangeError), (T.SMALLINT, -(2**15) - 1, ValueOutOfRangeError),
        (T.INT, 2**31, ValueOutOfRangeError), (T.BIGINT, 2**63, ValueOutOfRangeError),
        (T.BIGINT, -(2**63) - 1, ValueOutOfRangeError), (T.INT, "1", TypeMismatchError),
        (T.INT, True, TypeMismatchError), (T.INT, 1.5, TypeMismatchError), (T.DOUBLE, "x", TypeMismatchError),
        (T.REAL, 1e39, ValueOutOfRangeError), (T.VARCHAR, b"x", TypeMismatchError),
        (T.VARCHAR, "\ud800", ValueOutOfRangeError), (T.BYTEA, "x", TypeMismatchError),
        (T.DATE, datetime.datetime(2020, 1, 1), TypeMismatchError),
        (T.TIMESTAMP, datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc), TypeMismatchError),
        (T.TIMESTAMPTZ, datetime.datetime(2020, 1, 1), TypeMismatchError),
        (T.DECIMAL, decimal.Decimal("sNaN"), ValueOutOfRangeError), (T.DECIMAL, 1.5, TypeMismatchError),
        (T.BOOLEAN, 1, TypeMismatchError), (T.INTERVAL, 5, TypeMismatchError),
        (T.struct([("a", T.INT)]), (1, 2), TypeMismatchError), (T.list(T.INT), [2**40], ValueOutOfRangeError),
    ]
    for dtype, value, error in cases:
        with pytest.raises(error):
            impl.encode_row((value,), (dtype,))
    with pytest.raises(SchemaError):
        impl.encode_row((1, 2), (T.INT,))
    with pytest.raises(SchemaError):
        impl.encode_row((1,), (T.INT,), (OrderType.ASC, OrderType.ASC))
    with pytest.raises(SchemaError):
        impl.encode_row((1,), ("INT",))


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_accepts_non_exact_python_types(impl):
    assert impl.encode_row((np.int64(5), np.float32(1.5), bytearray(b"x")), (T.BIGINT, T.DOUBLE, T.BYTEA)) == \
        impl.encode_row((5, 1.5, b"x"), (T.BIGINT, T.DOUBLE, T.BYTEA))
    assert impl.encode_row([1], [T.INT]) == impl.encode_row((1,), (T.INT,))


# --- golden bytes -----------------------------------------------------------------------------

GOLDEN_TYPES = (T.BOOLEAN, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.REAL, T.DOUBLE, T.VARCHAR, T.BYTEA,
                T.DATE, T.TIME, T.TIMESTAMP, T.TIMESTAMPTZ, T.INTERVAL,
                T.struct([("a", T.INT), ("b", T.VARCHAR)]), T.list(T.SMALLINT))
GOLDEN_ROWS = [
    (True, -2, 7, -(2**63), decimal.Decimal("-12.340"), 1.5, -0.0, "a\x00é", b"\x00\xff",
     datetime.date(2021, 4, 1), datetime.time(23, 59, 59, 999999), datetime.datetime(1970, 1, 1, 0, 0, 1),
     datetime.datetime(2021, 4, 1, 8, tzinfo=datetime.timezone(datetime.timedelta(hours=8))),
     Interval(1, 2, 3), (5, None), [1, None, -1]),
    (None,) * 16,
    (False, 32767, -(2**31), 2**63 - 1, decimal.Decimal("NaN"), float("-inf"), float("nan"), "", b"",
     datetime.date(1, 1, 1), datetime.time(0), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
     datetime.datetime(1, 1, 2, tzinfo=datetime.timezone.utc), Interval(-1, 0, 0), (None, ""), []),
]
GOLDEN_FILE = pathlib.Path(__file__).parent / "golden" / "memcomparable.txt"


def _golden_lines():
    lines = []
    for i, row in enumerate(GOLDEN_ROWS):
        for name, orders in (("asc", None), ("desc", tuple(OrderType.DESC for _ in GOLDEN_TYPES))):
            lines.append(f"row{i}-{name} {pure.encode_row(row, GOLDEN_TYPES, orders).hex()}")
    return lines


def test_golden_bytes():
    """The format is frozen: these bytes were written once and must never change. Set
    HUMMOCK_UPDATE_GOLDEN=1 to rewrite the file after a deliberate, versioned format change."""
    lines = _golden_lines()
    if os.environ.get("HUMMOCK_UPDATE_GOLDEN") == "1":
        GOLDEN_FILE.parent.mkdir(exist_ok=True)
        GOLDEN_FILE.write_text("\n".join(lines) + "\n")
    assert GOLDEN_FILE.read_text().splitlines() == lines
    for impl in implementations():
        for line, (i, row) in zip(lines[::2], enumerate(GOLDEN_ROWS)):
            encoded = bytes.fromhex(line.split()[1])
            assert impl.encode_row(row, GOLDEN_TYPES) == encoded
            decoded = impl.decode_row(encoded, GOLDEN_TYPES)
            assert all(model_equal(t, x, y) for t, x, y in zip(GOLDEN_TYPES, row, decoded))


# --- vectorized path ----------------------------------------------------------------------------

FIXED_TYPES = [T.BOOLEAN, T.SMALLINT, T.INT, T.BIGINT, T.REAL, T.DOUBLE]


@given(st.data())
def test_encode_columns_matches_rows(data):
    types = data.draw(st.lists(st.sampled_from(FIXED_TYPES), min_size=1, max_size=3))
    orders = data.draw(st.lists(ORDERS, min_size=len(types), max_size=len(types)))
    n = data.draw(st.integers(0, 20))
    table = [data.draw(st.lists(values(t), min_size=n, max_size=n)) for t in types]
    arrow_type = {TypeKind.BOOLEAN: pa.bool_(), TypeKind.SMALLINT: pa.int16(), TypeKind.INT: pa.int32(),
                  TypeKind.BIGINT: pa.int64(), TypeKind.REAL: pa.float32(), TypeKind.DOUBLE: pa.float64()}
    columns = [pa.array(col, type=arrow_type[t.kind]) for col, t in zip(table, types)]
    prefix = np.array([[i % 256, 7] for i in range(n)], dtype=np.uint8).reshape(n, 2)
    got = mc.encode_columns(columns, types, orders, prefix=prefix).to_pylist()
    expected = [bytes(prefix[i]) + mc.encode_row(tuple(col[i] for col in table), types, orders) for i in range(n)]
    assert got == expected


TEMPORAL_TYPES = [T.DATE, T.TIME, T.TIMESTAMP, T.TIMESTAMPTZ]


@given(st.data())
def test_encode_columns_of_temporal_types_matches_rows(data):
    """DATE/TIME/TIMESTAMP[TZ] columns are encoded as their integers (days, microseconds):
    the same bytes as the per-row path, from Arrow arrays (also sliced, also of another unit),
    numpy datetime64 arrays and Python values, NULLs and both orders included."""
    from relational.arrow import to_arrow

    types = data.draw(st.lists(st.sampled_from(TEMPORAL_TYPES + [T.BIGINT]), min_size=1, max_size=3))
    orders = data.draw(st.lists(ORDERS, min_size=len(types), max_size=len(types)))
    n = data.draw(st.integers(0, 20))
    table = [data.draw(st.lists(values(t), min_size=n, max_size=n)) for t in types]
    expected = [mc.encode_row(tuple(col[i] for col in table), types, orders) for i in range(n)]
    cut = data.draw(st.integers(0, 2))
    arrow = [pa.concat_arrays([to_arrow(col[:1] * cut, t), to_arrow(col, t)]).slice(cut) for col, t in zip(table, types)]
    assert mc.encode_columns(arrow, types, orders).to_pylist() == expected
    python = [col if t.kind != TypeKind.BIGINT else a for col, t, a in zip(table, types, arrow)]
    assert mc.encode_columns(python, types, orders).to_pylist() == expected
    if all(t.kind == TypeKind.TIMESTAMP for t in types) and all(v is not None for col in table for v in col):
        as_numpy = [np.array(col, dtype="datetime64[us]") for col in table]
        assert mc.encode_columns(as_numpy, types, orders).to_pylist() == expected
        in_ns = [c.cast(pa.timestamp("ns"), safe=False) for c in arrow]
        # (back to us unchecked: a value past 2262 overflowed the ns cast and must only compare unequal)
        if all(c.cast(pa.timestamp("us"), safe=False).equals(a) for c, a in zip(in_ns, arrow)):
            assert mc.encode_columns(in_ns, types, orders).to_pylist() == expected


def test_temporal_columns_outside_python_ranges_and_of_wrong_types_are_refused():
    with pytest.raises(ValueOutOfRangeError, match="TIMESTAMP out of range"):
        mc.encode_columns([pa.array([0, 300_000_000_000_000_000], pa.int64()).view(pa.timestamp("us"))], [T.TIMESTAMP])
    with pytest.raises(ValueOutOfRangeError, match="DATE out of range"):
        mc.encode_columns([pa.array([3_000_000], pa.int32()).view(pa.date32())], [T.DATE])
    with pytest.raises(ValueOutOfRangeError, match="TIME out of range"):
        mc.encode_columns([pa.array([86_400_000_000], pa.int64()).view(pa.time64("us"))], [T.TIME])
    with pytest.raises(ValueOutOfRangeError, match="microseconds"):
        mc.encode_columns([pa.array([1], pa.int64()).view(pa.timestamp("ns"))], [T.TIMESTAMP])
    with pytest.raises(TypeMismatchError):
        mc.encode_columns([pa.array([1], pa.int64())], [T.TIMESTAMP])
    with pytest.raises(TypeMismatchError):
        mc.encode_columns([np.array([1, 2])], [T.TIMESTAMP])


def test_encode_columns_from_numpy_and_errors():
    col = np.arange(-5, 5, dtype=np.int64)
    assert mc.encode_columns([col], [T.BIGINT]).to_pylist() == mc.encode_rows([(int(x),) for x in col], [T.BIGINT])
    with pytest.raises(ValueOutOfRangeError):
        mc.encode_columns([np.array([2**31], dtype=np.int64)], [T.INT])
    with pytest.raises(TypeMismatchError):
        mc.encode_columns([np.array([1.5])], [T.BIGINT])
    with pytest.raises(SchemaError):
        mc.encode_columns([["a"]], [T.VARCHAR])
    with pytest.raises(SchemaError):
        mc.encode_columns([col, col[:3]], [T.BIGINT, T.BIGINT])


def test_order_type_defaults():
    assert OrderType() == OrderType.ASC and not OrderType.ASC.nulls_first
    assert OrderType.DESC.nulls_first and OrderType(True, False) != OrderType.DESC
    assert {OrderType(), OrderType(False, False)} == {OrderType.ASC}


# --- which types decode to the very value (state tables store such key columns once) ---------

@given(st.data())
def test_types_that_decode_exactly_give_back_the_value_written(data):
    """``decodes_exactly``: for those types a key column need not be repeated in the row's
    value -- decoding the key gives back the same value (same type, same repr), NULLs and both
    orders included, in both implementations (a naive time's ``fold`` is not kept, by the value
    encoding either)."""
    dtype = data.draw(st.sampled_from([t for t in SCALARS if mc.decodes_exactly(t)]))
    order = data.draw(ORDERS)
    value = data.draw(values(dtype))
    if hasattr(value, "fold"):   # meaningless without a tzinfo; the value encoding drops it too
        value = value.replace(fold=0)
    if dtype.kind == TypeKind.JSONB:   # what is written is the normal text (DataType.validate)
        value = dtype.validate(value)
    for impl in implementations():
        [decoded] = impl.decode_row(impl.encode_row((value,), (dtype,), (order,)), (dtype,), (order,))
        assert type(decoded) is type(value) and repr(decoded) == repr(value), (dtype, value, decoded)


def test_types_that_do_not_decode_exactly_have_a_value_that_changes():
    """The other scalar types each have a value that comes back equal but not the same, so
    their key columns stay in the value; composites are never exact."""
    changed = {T.REAL: -0.0, T.DOUBLE: -0.0, T.DECIMAL: decimal.Decimal("1.50"),
               T.INTERVAL: Interval(0, 30, 0),
               T.TIMESTAMPTZ: datetime.datetime(2020, 1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))}
    assert {t for t in SCALARS if not mc.decodes_exactly(t)} == set(changed)
    for dtype, value in changed.items():
        for impl in implementations():
            [decoded] = impl.decode_row(impl.encode_row((value,), (dtype,)), (dtype,))
            assert repr(decoded) != repr(value), (dtype, value, decoded)
    assert not mc.decodes_exactly(T.struct([("a", T.INT)])) and not mc.decodes_exactly(T.list(T.INT))
    assert not mc.decodes_exactly("INT")


# --- one value, one key: a decoder accepts only what its encoder writes -------------------

ADJUSTED_LIMIT = 1 << 30   # DataType.validate: -2^30 < adjusted exponent < 2^30


def _decimal_key(exponent: int, mantissa: bytes, negative: bool = False, descending: bool = False) -> bytes:
    """A one-DECIMAL-column key (null flag + class + body) built by hand: ``exponent`` is the
    format's E (value = 0.d1d2... * 10**E), ``mantissa`` the digit-pair bytes."""
    body = struct.pack(">I", (exponent + pure.DECIMAL_EXPONENT_BIAS) & 0xFFFFFFFF) + mantissa + b"\x00"
    if negative:
        body = bytes(b ^ 0xFF for b in body)
    value = bytes((pure.DECIMAL_NEGATIVE if negative else pure.DECIMAL_POSITIVE,)) + body
    if descending:
        value = bytes(b ^ 0xFF for b in value)
    return b"\x01" + value


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_decimal_decoder_refuses_exponents_the_encoder_refuses(impl, descending):
    """The decoder took any u32 exponent: ``1E+1073741824`` decoded from a key no encoder
    writes (the encoder refuses that value), so a value could have a key it never gets."""
    order = [OrderType(descending=descending)]
    for negative in (False, True):
        for exponent, ok in ((ADJUSTED_LIMIT, True), (ADJUSTED_LIMIT + 1, False), (-ADJUSTED_LIMIT + 2, True),
                             (-ADJUSTED_LIMIT + 1, False), (2**31 - 1, False), (-2**31, False)):
            key = _decimal_key(exponent, b"\x0b", negative, descending)   # digits "1", "0" padding
            value = decimal.Decimal((int(negative), (1,), exponent - 1))
            if ok:
                assert impl.decode_row(key, [T.DECIMAL], order) == (value,)
                assert impl.encode_row([value], [T.DECIMAL], order) == key
            else:
                with pytest.raises(DecodeError, match="DECIMAL exponent .* out of range") as info:
                    impl.decode_row(key, [T.DECIMAL], order)
                assert info.value.offset == 2
                with pytest.raises(ValueOutOfRangeError):
                    impl.encode_row([value], [T.DECIMAL], order)


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
def test_every_nan_and_zero_has_one_key(impl):
    """Every NaN (quiet, negative, with a payload) and both zeros encode to one key each, and
    the decoder refuses the NaN and zero bit patterns the encoder never writes."""
    D = decimal.Decimal
    assert len({impl.encode_row([D(x)], [T.DECIMAL]) for x in ("NaN", "-NaN", "NaN123")}) == 1
    with pytest.raises(ValueOutOfRangeError):
        impl.encode_row([D("sNaN")], [T.DECIMAL])
    for dtype, width, canonical in ((T.DOUBLE, 8, pure.FLOAT64_CANONICAL_NAN), (T.REAL, 4, pure.FLOAT32_CANONICAL_NAN)):
        sign = 1 << (8 * width - 1)

        def key(bits):   # the encoder's transform of IEEE bits, as a one-column key
            return b"\x01" + (bits ^ ((1 << 8 * width) - 1) if bits & sign else bits | sign).to_bytes(width, "big")
        assert impl.encode_row([math.nan], [dtype]) == key(canonical)
        assert math.isnan(impl.decode_row(key(canonical), [dtype])[0])
        assert impl.encode_row([-0.0], [dtype]) == impl.encode_row([0.0], [dtype]) == key(0)
        quiet = canonical & -canonical   # the canonical NaN's lowest set bit: the quiet bit
        others = [canonical | 1, canonical | sign, (canonical ^ quiet) | 1]   # payload, negative, signaling
        for bits in others + [sign]:   # other NaNs, then -0.0
            with pytest.raises(DecodeError, match=f"non-canonical {dtype.kind.name}") as info:
                impl.decode_row(key(bits), [dtype])
            assert info.value.offset == 1
        assert impl.decode_row(key(0x1), [dtype]) == impl.decode_row(key(0x1), [dtype])   # a subnormal is fine


@st.composite
def _decimal_keys(draw):
    """Hand-built DECIMAL keys around the edges: exponents near and past the bounds, mantissas
    with and without leading, trailing and padding zeros, the special classes."""
    descending = draw(st.booleans())
    if draw(st.integers(0, 5)) == 0:
        value = bytes((draw(st.integers(0, 7)),))
        return (b"\x01" + (bytes(b ^ 0xFF for b in value) if descending else value)), descending
    exponent = draw(st.one_of(st.integers(-5, 5), st.integers(ADJUSTED_LIMIT - 2, ADJUSTED_LIMIT + 2),
                              st.integers(-ADJUSTED_LIMIT - 2, -ADJUSTED_LIMIT + 3), st.integers(-2**31, 2**31 - 1)))
    mantissa = bytes(draw(st.lists(st.one_of(st.integers(1, 101), st.sampled_from([1, 2, 10, 11, 100, 101])),
                                   max_size=5)))
    return _decimal_key(exponent, mantissa, draw(st.booleans()), descending), descending


@given(_decimal_keys())
def test_a_decimal_key_that_decodes_is_the_key_of_its_value(case):
    """decode(b) succeeds => encode(decode(b)) == b, in every twin, and the twins agree."""
    key, descending = case
    order = [OrderType(descending=descending)]
    verdicts = []
    for impl in implementations():
        try:
            row = impl.decode_row(key, [T.DECIMAL], order)
        except DecodeError as exc:
            verdicts.append(("error", exc.reason))
            continue
        assert impl.encode_row(list(row), [T.DECIMAL], order) == key
        verdicts.append(("ok", repr(row)))
    assert all(v == verdicts[0] for v in verdicts), verdicts


@given(st.data())
def test_a_float_key_that_decodes_is_the_key_of_its_value(data):
    dtype, width = data.draw(st.sampled_from([(T.DOUBLE, 8), (T.REAL, 4)]))
    order = [data.draw(ORDERS)]
    key = b"\x01" + data.draw(st.one_of(st.binary(min_size=width, max_size=width),
                                        st.sampled_from([b"\xff" * width, b"\x7f" + b"\xff" * (width - 1),
                                                         b"\x80" + b"\x00" * (width - 1), b"\x00" * width])))
    if order[0].descending:
        key = key[:1] + bytes(b ^ 0xFF for b in key[1:])
    verdicts = []
    for impl in implementations():
        try:
            row = impl.decode_row(key, [dtype], order)
        except DecodeError as exc:
            verdicts.append(("error", exc.reason))
            continue
        assert impl.encode_row(list(row), [dtype], order) == key
        verdicts.append(("ok", struct.pack(">d", row[0])))
    assert all(v == verdicts[0] for v in verdicts), verdicts


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("data", [5, None, "ab", [1, 1]], ids=["int", "none", "str", "list"])
def test_decoders_refuse_what_is_not_bytes(impl, data):
    """``bytes(data)`` made five zero bytes of ``5`` and a key of ``[1, 1]`` (decoded as TRUE),
    and a raw TypeError of None or a str: every decoder entry point refuses them alike."""
    with pytest.raises(TypeMismatchError, match="encoded key must be bytes-like"):
        impl.decode_row(data, [T.BOOLEAN])
    with pytest.raises(TypeMismatchError, match="encoded key must be bytes-like"):
        impl.decode_row_prefix(data, [T.BOOLEAN])
    for offset in (0, 1):
        with pytest.raises(TypeMismatchError, match="encoded key must be bytes-like"):
            impl.decode_rows([b"\x00" * offset + b"\x01\x01", data], [T.BOOLEAN], None, offset)
    assert impl.decode_row(bytearray(b"\x01\x01"), [T.BOOLEAN]) == impl.decode_row(memoryview(b"\x01\x01"), [T.BOOLEAN]) \
        == (True,)


@pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("text", ["[1.0]", '{"k": [0.50, 12]}'])
def test_every_flipped_byte_of_a_jsonb_key_is_a_decode_error_or_a_value(impl, text):
    """A damaged JSONB number (an exponent no JSON text has) made decimal's quantize raise
    InvalidOperation; each one-bit (and each all-bits) change of the key decodes or raises
    DecodeError."""
    types = (T.struct([("f0", T.JSONB)]), T.BOOLEAN)
    encoded = impl.encode_row(((text,), None), types)
    for i in range(len(encoded)):
        for x in [1 << b for b in range(8)] + [0xFF]:
            flipped = bytearray(encoded)
            flipped[i] ^= x
            try:
                impl.decode_row(bytes(flipped), types)
            except DecodeError:
                pass
