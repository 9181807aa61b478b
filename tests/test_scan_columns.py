"""Rows straight into column buffers (relational/scan_columns.py, ``decode_columns`` in
native/_scan_columns.pyx and its twin relational/_scan_columns_py.py).

The reference is the row path: ``ColumnScan.read`` must give the arrays ``to_arrow`` makes of
``decode_rows``' values, and with every column wanted it must raise exactly ``decode_row``'s
``DecodeError`` (offset and reason) on a malformed row. The twins agree byte for byte on every
output and on every exception, for valid rows, mutated and truncated rows and bad arguments.
"""

import math
from itertools import islice

import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from relational import _scan_columns_py as pure
from relational.arrow import to_arrow
from relational.errors import DecodeError
from relational.row_serde import RowSerde
from relational.scan_columns import ColumnScan
from relational.types import DataType as T
from relational.types import TypeKind
from relational.value_encoding import decode_row, decode_rows, encode_row
from strategies import SCALARS, rows
from twins import implementations

IMPLS = implementations(pure, "_scan_columns")
WANTABLE = [t for t in SCALARS if t.kind in pure.WANTABLE]
WALKABLE = [t for t in SCALARS if t.kind in pure.WALKABLE]


def _outcome(fn):
    """What ``fn()`` returns, or the identity of what it raises (class, and a DecodeError's
    offset and reason)."""
    try:
        return ("ok", fn())
    except DecodeError as exc:
        return ("DecodeError", exc.offset, exc.reason)
    except Exception as exc:   # noqa: BLE001 -- compared between twins
        return (type(exc).__name__,)


def _pairs(datas):
    return iter([(b"k%d" % i, d) for i, d in enumerate(datas)])


def _same_values(a: list, b: list) -> bool:
    def norm(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v
    return [norm(v) for v in a] == [norm(v) for v in b]


@st.composite
def tables(draw, walkable: bool = True):
    """``(types, encoded rows, wanted positions)`` over the kinds a scan reads or walks."""
    pool = WANTABLE + (WALKABLE if walkable else [])
    types = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=8))
    datas = [encode_row(r, types) for r in draw(st.lists(rows(types), max_size=20))]
    readable = [i for i, t in enumerate(types) if t.kind in pure.WANTABLE]
    wanted = draw(st.permutations(readable)) if readable else []
    wanted = tuple(wanted[:draw(st.integers(0, len(wanted)))])
    return types, datas, wanted


# --- the twins and the row path ----------------------------------------------------------------

@given(tables(), st.integers(0, 25))
def test_twins_agree_and_equal_the_row_path(table, limit):
    types, datas, wanted = table
    codes = tuple(int(t.kind) for t in types)
    results = [impl.decode_columns(_pairs(datas), limit, codes, wanted) for impl in IMPLS]
    assert all(r == results[0] for r in results)
    n, buffers = results[0]
    assert n == min(limit, len(datas)) and len(buffers) == len(wanted)
    serde = RowSerde(types, [0])
    scan = ColumnScan.of(serde, list(wanted))
    got_n, arrays = scan.read(_pairs(datas), limit)
    assert got_n == n
    decoded = decode_rows(datas[:n], types)
    for array, position in zip(arrays, wanted):
        array.validate(full=True)
        expected = to_arrow([r[position] for r in decoded], types[position])
        assert array.type == expected.type and array.null_count == expected.null_count
        assert _same_values(array.to_pylist(), expected.to_pylist())


@given(tables(walkable=False), st.data())
def test_malformed_rows_raise_the_row_decoders_error_when_every_column_is_read(table, data):
    types, datas, _ = table
    assume(datas)
    row = bytearray(data.draw(st.sampled_from(datas)))
    for _ in range(data.draw(st.integers(1, 3))):
        edit = data.draw(st.sampled_from(["flip", "cut", "grow"]))
        if edit == "flip" and row:
            row[data.draw(st.integers(0, len(row) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        elif edit == "cut":
            del row[data.draw(st.integers(0, len(row))):]
        else:
            row += data.draw(st.binary(min_size=1, max_size=3))
    row = bytes(row)
    codes = tuple(int(t.kind) for t in types)
    every = tuple(range(len(types)))
    outcomes = [_outcome(lambda impl=impl: impl.decode_columns(_pairs([row]), 1, codes, every)) for impl in IMPLS]
    assert all(o == outcomes[0] for o in outcomes)
    reference = _outcome(lambda: decode_row(row, types))
    assert outcomes[0][0] == reference[0]
    if reference[0] == "DecodeError":
        assert outcomes[0] == reference


@given(tables(), st.data())
def test_twins_agree_on_mutated_rows_when_some_columns_are_skipped(table, data):
    types, datas, wanted = table
    assume(datas)
    rows_ = [bytearray(d) for d in datas]
    victim = rows_[data.draw(st.integers(0, len(rows_) - 1))]
    if victim:
        victim[data.draw(st.integers(0, len(victim) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(victim)))
    del victim[cut:cut + data.draw(st.integers(0, 2))]
    codes = tuple(int(t.kind) for t in types)
    outcomes = [_outcome(lambda impl=impl: impl.decode_columns(_pairs([bytes(r) for r in rows_]), 30, codes, wanted))
                for impl in IMPLS]
    assert all(o == outcomes[0] for o in outcomes)


def test_a_decimal_or_interval_column_is_walked_not_decoded():
    types = [T.DECIMAL, T.INT, T.INTERVAL, T.VARCHAR]
    from decimal import Decimal

    from relational.types import Interval
    datas = [encode_row((Decimal("-1.50"), 7, Interval(1, 2, 3), "x"), types),
             encode_row((Decimal("NaN"), None, None, None), types)]
    for impl in IMPLS:
        n, cols = impl.decode_columns(_pairs(datas), 10, tuple(int(t.kind) for t in types), (3, 1))
        assert n == 2
        assert cols[0] == (b"\x01", 1, b"x", b"\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00")
        assert cols[1] == (b"\x01", 1, (7).to_bytes(4, "little") + bytes(4), None)
        bad = bytearray(datas[0])
        bad[3] = 0x07   # the DECIMAL's kind byte
        with pytest.raises(DecodeError, match="unknown DECIMAL kind 0x07"):
            impl.decode_columns(_pairs([bytes(bad)]), 1, tuple(int(t.kind) for t in types), (1,))


# --- limits, counts and arguments ----------------------------------------------------------------

def test_no_more_than_limit_pairs_are_taken():
    types = [T.BIGINT]
    datas = [encode_row((i,), types) for i in range(10)]
    for impl in IMPLS:
        pairs = _pairs(datas)
        n, cols = impl.decode_columns(pairs, 4, (int(TypeKind.BIGINT),), (0,))
        assert n == 4 and cols[0][2] == b"".join(i.to_bytes(8, "little") for i in range(4))
        assert next(pairs)[1] == datas[4]
        pairs = iter(range(10))
        assert impl.count_pairs(pairs, 3) == 3 and next(pairs) == 3
        assert impl.count_pairs(iter(range(2)), 3) == 2
        assert impl.decode_columns(_pairs(datas), 0, (int(TypeKind.BIGINT),), (0,)) == (0, [(None, 0, b"", None)])


@pytest.mark.parametrize("args, error", [
    ((-1, (4,), (0,)), ValueError), ((1 << 30, (4,), (0,)), ValueError), ((True, (4,), (0,)), ValueError),
    ((1, [4], (0,)), TypeError), ((1, (4,), [0]), TypeError), ((1, (15,), ()), ValueError),
    ((1, (99,), ()), ValueError), ((1, (4,), (1,)), ValueError), ((1, (4, 4), (0, 0)), ValueError),
    ((1, (5,), (0,)), ValueError), ((1, (4,), (True,)), ValueError),
])
def test_bad_arguments_raise_the_same_class_in_both_twins(args, error):
    for impl in IMPLS:
        with pytest.raises(error):
            impl.decode_columns(_pairs([encode_row((1,), [T.BIGINT])]), *args)


def test_bad_pairs_raise_the_same_class_in_both_twins():
    from relational.errors import TypeMismatchError
    for impl in IMPLS:
        with pytest.raises(TypeError):
            impl.decode_columns(iter([b"not a pair"]), 1, (4,), (0,))
        with pytest.raises(TypeError):
            impl.decode_columns(iter([(b"k", b"v", b"x")]), 1, (4,), (0,))
        with pytest.raises(TypeMismatchError):
            impl.decode_columns(iter([(b"k", bytearray(encode_row((1,), [T.BIGINT])))]), 1, (4,), (0,))
        with pytest.raises(ValueError):
            impl.count_pairs(iter(()), -1)


# --- ColumnScan -----------------------------------------------------------------------------------

def test_column_scan_declines_what_it_cannot_read_and_counts_without_decoding():
    assert ColumnScan.of(RowSerde([T.INT, T.DECIMAL], [0]), [1]) is None                 # DECIMAL wanted
    assert ColumnScan.of(RowSerde([T.INT, T.list(T.INT)], [0]), [0]) is None             # a LIST in the value
    assert ColumnScan.of(RowSerde([T.INT, T.VARCHAR], [0], value_indices=[1]), [0]) is None   # pk-only column
    assert ColumnScan.of(RowSerde([T.INT, T.DECIMAL], [0]), [0]) is not None
    scan = ColumnScan.of(RowSerde([T.INT, T.VARCHAR], [0], value_indices=[1]), [])
    garbage = iter([(b"k", b"not a row")] * 5)
    assert list(scan.batches(garbage, 2)) == [(2, []), (2, []), (1, [])]


def test_column_scan_batches_cover_every_row_once():
    types = [T.BIGINT, T.VARCHAR]
    datas = [encode_row((i, None if i % 3 == 0 else f"v{i}"), types) for i in range(10)]
    scan = ColumnScan.of(RowSerde(types, [0]), [1, 0])
    got = list(scan.batches(_pairs(datas), 4))
    assert [n for n, _ in got] == [4, 4, 2]
    table = pa.Table.from_batches([pa.RecordBatch.from_arrays(a, names=["s", "id"]) for _, a in got])
    assert table.column("id").to_pylist() == list(range(10))
    assert table.column("s").to_pylist() == [None if i % 3 == 0 else f"v{i}" for i in range(10)]
    assert list(scan.batches(_pairs(datas), 5))[-1][0] == 5 and len(list(scan.batches(_pairs(datas), 5))) == 2
    assert list(islice(scan.batches(_pairs([]), 5), 3)) == []


def test_null_slots_and_offsets_do_not_show_what_the_memory_held_before():
    """The native decoder does not zero its value and offset buffers up front (sized for
    ``limit`` rows, most of a small scan's cost): a NULL's fixed-width slot must still read
    zero and every offset be written, also when Arrow's pool hands back memory that held other
    values. Each round first decodes rows of all-ones values into big buffers, then rows with
    NULLs, and compares with the twin (which builds its buffers from Python values)."""
    import datetime
    types = [T.BIGINT, T.INT, T.SMALLINT, T.DOUBLE, T.REAL, T.DATE, T.TIMESTAMP, T.BOOLEAN, T.VARCHAR]
    codes = tuple(int(t.kind) for t in types)
    wanted = tuple(range(len(types)))
    full = encode_row([-1, -1, -1, -1.0, -1.0, datetime.date(2020, 1, 1),
                       datetime.datetime(2020, 1, 1, 1, 1, 1), True, "x" * 40], types)
    holes = [encode_row([None if (i + c) % 3 == 0 else v for c, v in enumerate(
        [i, -i, i % 100, i / 3, 1.5, datetime.date(2021, 1, 1 + i % 28), datetime.datetime(2021, 1, 1, i % 24),
         i % 2 == 0, "v%d" % i])], types) for i in range(300)]
    for _ in range(3):
        for impl in IMPLS:
            impl.decode_columns(_pairs([full] * 3000), 4096, codes, wanted)
        results = [impl.decode_columns(_pairs(holes), 4096, codes, wanted) for impl in IMPLS]
        assert all(r == results[0] for r in results)
        n, buffers = results[0]
        assert n == 300
        for (validity, nulls, data, offsets), t in zip(buffers, types):
            assert nulls == 100
            if t.kind not in (TypeKind.BOOLEAN, TypeKind.VARCHAR):
                width = len(data) // n
                bits = bytes(validity)
                raw = bytes(data)
                for j in range(n):
                    if not (bits[j >> 3] >> (j & 7)) & 1:
                        assert raw[j * width:(j + 1) * width] == bytes(width)
