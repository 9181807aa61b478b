"""Whole-column value encoding (relational/value_columns.py, ``encode_column_buffers`` in
native/_value_encoding.pyx and its twin).

The reference is the row path: ``encode_columns`` must give exactly ``encode_rows`` of the
columns' Python values (``to_pylist``), or ``None``. The buffer encoder's twins agree byte for
byte on random buffers and raise the same exception classes for descriptors that do not fit.
"""

import datetime
import decimal
import math
import re

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational import _value_encoding_py as pure
from relational import value_columns
from relational.arrow import to_pylist
from relational.types import DataType as T
from relational.value_encoding import encode_rows
from twins import implementations

IMPLS = implementations(pure, "_value_encoding")


def encode_by_rows(columns, types):
    values = [to_pylist(c, t) for c, t in zip(columns, types)]
    return encode_rows(list(zip(*values)), types)


# --- the buffer encoder's twins -------------------------------------------------------------

@st.composite
def descriptors(draw):
    n = draw(st.integers(0, 12))
    cols = []
    for _ in range(draw(st.integers(0, 10))):
        width = draw(st.sampled_from([-1, 0, 1, 2, 4, 8]))
        nulls = draw(st.one_of(st.none(), st.lists(st.integers(0, 3), min_size=n, max_size=n).map(bytes)))
        if width > 0:
            values = np.array(draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=n, max_size=n)),
                              dtype=np.int64)
            cols.append((width, values, None, nulls))
        else:
            data = draw(st.binary(max_size=40))
            cuts = sorted(draw(st.lists(st.integers(0, len(data)), min_size=n + 1, max_size=n + 1)))
            cols.append((width, np.array(cuts, dtype=np.int64), data, nulls))
    return cols, n


@given(descriptors(), st.data())
def test_twins_agree_on_random_buffers(case, data):
    cols, n = case
    results = [impl.encode_column_buffers(cols, n) for impl in IMPLS]
    assert all(r == results[0] for r in results)
    assert len(results[0]) == n
    order = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
    for impl in IMPLS:   # rows written in a given order: the same rows, permuted
        assert impl.encode_column_buffers(cols, n, order) == [results[0][i] for i in order]
        # packed (the packed insert path): the same rows back to back, with their offsets
        data, offsets = impl.encode_column_buffer(cols, n, order)
        rows = [results[0][i] for i in order]
        assert data == b"".join(rows) and offsets.dtype == np.int64
        assert offsets.tolist() == [sum(map(len, rows[:i])) for i in range(n + 1)]


@st.composite
def fixed_descriptors(draw):
    """Columns that are all fixed-width and never NULL: the native encoder's one-row-size path
    (``_write_fixed_rows``); up to 300 of them, past the 32-byte header template."""
    n = draw(st.integers(0, 12))
    ncols = draw(st.one_of(st.integers(0, 12), st.integers(200, 300)))
    widths = draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=ncols, max_size=ncols))
    values = draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=n, max_size=n))
    return [(w, np.array(values[::-1] if i % 2 else values, dtype=np.int64), None, None)
            for i, w in enumerate(widths)], n


@given(fixed_descriptors(), st.data())
def test_fixed_width_rows_packed_equal_the_rows(case, data):
    cols, n = case
    rows = pure.encode_column_buffers(cols, n)
    order = data.draw(st.one_of(st.none(), st.permutations(range(n)).map(lambda p: np.array(p, dtype=np.int64))))
    expect = rows if order is None else [rows[i] for i in order]
    for impl in IMPLS:
        packed, offsets = impl.encode_column_buffer(cols, n, order)
        assert packed == b"".join(expect) and offsets.dtype == np.int64
        assert offsets.tolist() == [sum(map(len, expect[:i])) for i in range(n + 1)]


def test_buffers_equal_rows_spelled_out():
    ints = np.array([1, -2, 3], dtype=np.int64)
    offsets = np.array([0, 2, 2, 5], dtype=np.int64)
    cols = [(8, ints, None, None), (0, offsets, b"abxyz", bytes([0, 1, 0])), (4, ints, None, None)]
    rows = encode_rows([(1, "ab", 1), (-2, None, -2), (3, "xyz", 3)], [T.BIGINT, T.VARCHAR, T.INT])
    for impl in IMPLS:
        assert impl.encode_column_buffers(cols, 3) == rows




def test_long_values_and_many_columns_agree():
    """Lengths and a column count whose varints take 2 and 3 bytes (the native encoder sizes each
    row before it writes it), with NULLs, in a given order: the twins agree, and a long column
    alone encodes as its rows do."""
    data = bytes(range(256)) * 80   # 20,480 bytes
    cuts = np.array([0, 127, 127 + 128, 127 + 128 + 16384], dtype=np.int64)
    cols = [(0, cuts, data, None), (-1, cuts, data, bytes([0, 1, 0]))]
    cols += [(8 if i % 3 else 1, np.array([i, -i, 1 << 40], dtype=np.int64), None, bytes([i % 2, 0, i % 5 == 0]))
             for i in range(140)]
    order = np.array([2, 0, 1], dtype=np.int64)
    results = [impl.encode_column_buffers(cols, 3, order) for impl in IMPLS]
    assert all(r == results[0] for r in results) and len(results[0]) == 3
    rows = encode_rows([(data[0:127],), (data[127:255],), (data[255:255 + 16384],)], [T.BYTEA])
    for impl in IMPLS:
        assert impl.encode_column_buffers(cols[:1], 3) == rows

BAD = [
    ("n", [], -1, ValueError),
    ("n type", [], 1.0, ValueError),
    ("cols", "x", 0, TypeError),
    ("not a tuple", [[8, np.zeros(1, np.int64), None, None]], 1, ValueError),
    ("width", [(3, np.zeros(1, np.int64), None, None)], 1, ValueError),
    ("bool width", [(True, np.zeros(1, np.int64), None, None)], 1, ValueError),
    ("short values", [(8, np.zeros(1, np.int64), None, None)], 2, ValueError),
    ("offsets count", [(0, np.zeros(2, np.int64), b"", None)], 2, ValueError),
    ("offset beyond data", [(0, np.array([0, 4], np.int64), b"abc", None)], 1, ValueError),
    ("offset decreasing", [(0, np.array([2, 1], np.int64), b"abc", None)], 1, ValueError),
    ("negative offset", [(0, np.array([-1, 1], np.int64), b"abc", None)], 1, ValueError),
    ("null flags count", [(8, np.zeros(2, np.int64), None, b"\x00")], 2, ValueError),
    ("values not a buffer", [(8, [1], None, None)], 1, TypeError),
    ("values not int64-sized", [(8, b"abc", None, None)], 1, TypeError),
    ("values not contiguous", [(8, np.zeros(4, np.int64)[::2], None, None)], 2, TypeError),
    ("data not a buffer", [(0, np.array([0, 0], np.int64), "ab", None)], 1, TypeError),
]


@pytest.mark.parametrize("name, cols, n, error", BAD, ids=[b[0] for b in BAD])
def test_bad_descriptors_raise_the_same_class(name, cols, n, error):
    for impl in IMPLS:
        with pytest.raises(error):
            impl.encode_column_buffers(cols, n)
        with pytest.raises(error):
            impl.encode_column_buffer(cols, n)


ONE = [(8, np.array([1, 2], np.int64), None, None)]


@pytest.mark.parametrize("order, error", [
    (np.array([0], np.int64), ValueError),           # too short
    (np.array([0, 2], np.int64), ValueError),        # a row that does not exist
    (np.array([-1, 0], np.int64), ValueError),
    (np.array([0, 1, 1], np.int32), TypeError),      # not int64s (12 bytes)
    ([0, 1], TypeError),                             # not a buffer
])
def test_bad_order_raises_the_same_class(order, error):
    for impl in IMPLS:
        with pytest.raises(error):
            impl.encode_column_buffers(ONE, 2, order)
        with pytest.raises(error):
            impl.encode_column_buffer(ONE, 2, order)


# --- the facade against the row path -------------------------------------------------------

INT_TYPES = {T.SMALLINT: [pa.int8(), pa.int16(), pa.uint8()],
             T.INT: [pa.int16(), pa.int32(), pa.int64(), pa.uint32()],
             T.BIGINT: [pa.int32(), pa.int64(), pa.uint64()]}


@st.composite
def int_columns(draw):
    dtype = draw(st.sampled_from(sorted(INT_TYPES, key=str)))
    atype = draw(st.sampled_from(INT_TYPES[dtype]))
    bits = atype.bit_width
    lo, hi = (0, (1 << bits) - 1) if atype in (pa.uint8(), pa.uint32(), pa.uint64()) else (-(1 << bits - 1),
                                                                                             (1 << bits - 1) - 1)
    values = draw(st.lists(st.one_of(st.none(), st.integers(lo, hi)), min_size=1, max_size=8))
    return dtype, pa.array(values, type=atype)


SOME_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(-0.0), st.just(math.nan))
FLOATS = st.one_of(st.none(), SOME_FLOATS)


@st.composite
def other_columns(draw):
    which = draw(st.sampled_from(["double", "double32", "real", "bool", "str", "large_str", "bin", "large_bin",
                                  "date", "ts", "tstz"]))
    n = draw(st.integers(1, 8))
    if which == "date":
        return T.DATE, pa.array(draw(st.lists(st.one_of(st.none(), st.dates()), min_size=n, max_size=n)),
                                type=pa.date32())
    if which in ("ts", "tstz"):
        tz = datetime.timezone.utc if which == "tstz" else None
        values = draw(st.lists(st.one_of(st.none(), st.datetimes().map(lambda d: d.replace(tzinfo=tz))),
                               min_size=n, max_size=n))
        return (T.TIMESTAMPTZ if tz else T.TIMESTAMP), pa.array(values, type=pa.timestamp("us", tz="UTC" if tz else None))
    if which in ("double", "double32", "real"):
        values = draw(st.lists(FLOATS, min_size=n, max_size=n))
        atype = pa.float64() if which == "double" else pa.float32()
        return (T.REAL if which == "real" else T.DOUBLE), pa.array(values, type=atype)
    if which == "bool":
        return T.BOOLEAN, pa.array(draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
                                   type=pa.bool_())
    if which in ("str", "large_str"):
        values = draw(st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=n, max_size=n))
        return T.VARCHAR, pa.array(values, type=pa.string() if which == "str" else pa.large_string())
    values = draw(st.lists(st.one_of(st.none(), st.binary(max_size=6)), min_size=n, max_size=n))
    return T.BYTEA, pa.array(values, type=pa.binary() if which == "bin" else pa.large_binary())


def _same_length(columns):
    n = min(len(c) for _, c in columns)
    return [(t, c.slice(len(c) - n)) for t, c in columns], n   # slices: a nonzero Arrow offset


@given(st.lists(st.one_of(int_columns(), other_columns()), min_size=1, max_size=5))
def test_arrow_columns_encode_as_their_rows(columns):
    columns, n = _same_length(columns)
    types = [t for t, _ in columns]
    arrays = [c for _, c in columns]
    got = value_columns.encode_columns(arrays, types, n)
    if got is None:   # only an integer that does not fit its column falls back here
        with pytest.raises(OverflowError):
            encode_by_rows(arrays, types)
        return
    assert got == encode_by_rows(arrays, types)
    chunked = [pa.chunked_array([c]) for c in arrays]
    assert value_columns.encode_columns(chunked, types, n) == got


@given(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=1, max_size=8),
       st.lists(SOME_FLOATS, min_size=8, max_size=8))
def test_numpy_columns_encode_as_their_rows(ints, floats):
    n = len(ints)
    with np.errstate(over="ignore"):   # doubles beyond float32's range become inf, on purpose
        real = np.array(floats[:n], dtype=np.float32)
    columns = [np.array(ints, dtype=np.int32), np.array(floats[:n], dtype=np.float64),
               real, np.array([i % 2 == 0 for i in ints])]
    types = [T.INT, T.DOUBLE, T.REAL, T.BOOLEAN]
    assert value_columns.encode_columns(columns, types, n) == encode_by_rows(columns, types)


@pytest.mark.parametrize("column, dtype", [
    (pa.array([1, 2], pa.int64()), T.DATE),                       # a type it does not take
    ([1, 2], T.BIGINT),                                           # Python values
    (pa.chunked_array([[1], [2]], pa.int64()), T.BIGINT),         # several chunks
    (pa.array([1, 2, 3], pa.int64()), T.BIGINT),                  # the wrong length
    (pa.array([1.0, 2.0], pa.float64()), T.BIGINT),               # floats for an integer column
    (pa.array([1, 2], pa.int32()), T.DOUBLE),                     # integers for a float column
    (pa.array([1.0, 2.0], pa.float64()), T.REAL),                 # REAL takes float32 only
    (pa.array([40000, 1], pa.int32()), T.SMALLINT),               # a value out of range
    (pa.array(["a", "b"]), T.BYTEA),                              # strings for BYTEA
    (np.array([[1, 2]]), T.BIGINT),                               # not one-dimensional
    (pa.array([1, 2], pa.timestamp("ms")), T.TIMESTAMP),           # not microseconds
    (pa.array([1, 2], pa.timestamp("us", tz="UTC")), T.TIMESTAMP),  # an instant for a naive column
    (pa.array([1 << 62, 0], pa.int64()).view(pa.timestamp("us")), T.TIMESTAMP),  # past year 9999
])
def test_columns_it_does_not_take_give_none(column, dtype):
    assert value_columns.encode_columns([column], [dtype], 2) is None


DECIMAL_TEXT = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.integers(-(10 ** 20), 10 ** 20).flatmap(
        lambda c: st.integers(0, 20).map(lambda scale: str(decimal.Decimal(c).scaleb(-scale)))),
    st.sampled_from(["0", "-0", "-0.00", "007", "1.0", "255", "256", "65535", "65536", "999999999999999999",
                     "-999999999999999999", "1000000000000000000", "0.000000000000000001", "1E+3", "sNaN"]))


@given(st.lists(st.one_of(st.none(), DECIMAL_TEXT), min_size=1, max_size=8))
def test_decimal_text_columns_encode_as_their_rows(texts):
    """DECIMAL columns hold each value's text (relational.arrow): plain numerals of at most 18
    digits are encoded with numpy, byte for byte as the row path; other text falls back."""
    column = pa.array(texts, type=pa.string())
    got = value_columns.encode_columns([column], [T.DECIMAL], len(texts))
    plain = [t for t in texts if t is not None]
    takes = all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", t) and len(re.sub(r"[-.]", "", t)) <= 18 for t in plain)
    if not takes:
        assert got is None
        return
    assert got == encode_rows([(None if t is None else decimal.Decimal(t),) for t in texts], [T.DECIMAL])



# text near a plain numeral: a sign, a dot or a digit too many or misplaced, other bytes
NEAR_DECIMAL = st.text(alphabet="0123456789-.+ e", min_size=0, max_size=22)


@given(st.lists(st.one_of(st.none(), DECIMAL_TEXT, NEAR_DECIMAL), min_size=1, max_size=40),
       st.integers(0, 3), st.booleans())
def test_decimal_text_buffers_are_read_wherever_the_values_start(texts, skip, large):
    """The numerals are checked and parsed from the string buffers: a sliced column (its
    values start past the buffer's start) and large_string (int64 offsets) give the row
    path's bytes too, and any text that is no plain numeral of at most 18 digits -- '-' alone,
    '1.', '.5', '1-', '1..2', '' -- falls back."""
    column = pa.array(["9.5"] * skip + texts, type=pa.large_string() if large else pa.string()).slice(skip)
    got = value_columns.encode_columns([column], [T.DECIMAL], len(texts))
    plain = [t for t in texts if t is not None]
    takes = all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", t) and len(re.sub(r"[-.]", "", t)) <= 18 for t in plain)
    if not takes:
        assert got is None
        return
    assert got == encode_rows([(None if t is None else decimal.Decimal(t),) for t in texts], [T.DECIMAL])

def test_invalid_utf8_falls_back_to_the_row_path():
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32).tobytes()),
                                                 pa.py_buffer(b"\xff\xfe")])
    assert value_columns.encode_columns([bad], [T.VARCHAR], 1) is None


def test_nan_bits_are_canonical():
    weird = np.array([0x7FF0000000000001], dtype=np.int64).view(np.float64)   # a signalling NaN
    got = value_columns.encode_columns([pa.array(weird)], [T.DOUBLE], 1)
    assert got == encode_rows([(math.nan,)], [T.DOUBLE])
