"""Vnode hashing (relational/vnode.py, native/_vnode.pyx and its twin) and the vnode Bitmap.

Golden values pin the hash across versions and platforms; a child process with another
PYTHONHASHSEED must agree; the vectorized path must equal the per-row path for every type.
"""

import decimal
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

import relational._vnode_py as vnode_py
from relational.arrow import to_arrow
from relational.errors import SchemaError, ValueOutOfRangeError
from relational.types import DataType as T
from relational.vnode import VNODE_COUNT, Bitmap, compute_vnode, compute_vnodes
from strategies import data_types, rows, values
from twins import implementations

IMPLS = implementations(vnode_py, "_vnode")

# (distribution key values, types) -> vnode. Part of the storage format: never change.
GOLDEN = [
    ((1,), [T.BIGINT], 31),
    ((2,), [T.BIGINT], 81),
    ((None,), [T.BIGINT], 231),
    (("a",), [T.VARCHAR], 252),
    (("b",), [T.VARCHAR], 163),
    ((7, "x"), [T.INT, T.VARCHAR], None),   # filled in below from the hash definition
    ((), [], 0),
]


def _definition(values_, types):
    """The documented definition, spelled out with the reference xxhash package."""
    from relational.memcomparable import OrderType, encode_row
    if not types:
        return 0
    key = encode_row(values_, types, [OrderType.ASC] * len(types))
    return xxhash.xxh64_intdigest(key, 0) % 256


@pytest.mark.parametrize("vals,types,expected", GOLDEN)
def test_golden_vnodes(vals, types, expected):
    got = compute_vnode(vals, types)
    assert got == _definition(vals, types)
    if expected is not None:
        assert got == expected


def test_golden_composite_key_bytes():
    # the memcomparable bytes of (7, 'x') and their XXH64, so a change of either encoder shows
    from relational.memcomparable import OrderType, encode_row
    key = encode_row((7, "x"), [T.INT, T.VARCHAR], [OrderType.ASC] * 2)
    assert key.hex() == "0180000007" + "017800" + "01"
    assert compute_vnode((7, "x"), [T.INT, T.VARCHAR]) == xxhash.xxh64_intdigest(key, 0) % 256


def test_stable_across_processes():
    code = ("from relational.vnode import compute_vnode; from relational.types import DataType as T;"
            "print([compute_vnode((i,), [T.BIGINT]) for i in range(20)],"
            " [compute_vnode((s,), [T.VARCHAR]) for s in ('a', 'bb', '')])")
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True, cwd=os.path.dirname(os.path.dirname(__file__))).stdout)
    here = str([compute_vnode((i,), [T.BIGINT]) for i in range(20)]) + " " + \
        str([compute_vnode((s,), [T.VARCHAR]) for s in ("a", "bb", "")]) + "\n"
    assert outs == {here}


def test_equal_values_share_a_vnode():
    assert compute_vnode((0.0,), [T.DOUBLE]) == compute_vnode((-0.0,), [T.DOUBLE])
    assert compute_vnode((decimal.Decimal("1.0"),), [T.DECIMAL]) == compute_vnode((decimal.Decimal("1.00"),), [T.DECIMAL])


def test_vnodes_spread_over_all_256():
    vn = compute_vnodes([pa.array(range(20_000), pa.int64())], [T.BIGINT])
    counts = np.bincount(vn, minlength=VNODE_COUNT)
    assert len(counts) == VNODE_COUNT and counts.min() > 20 and counts.max() < 140


@given(st.lists(data_types(max_depth=1), min_size=1, max_size=3).flatmap(
    lambda ts: st.tuples(st.just(ts), st.lists(rows(ts), max_size=8))))
def test_vectorized_equals_per_row(case):
    types, rows_ = case
    expected = [compute_vnode(r, types) for r in rows_]
    columns = [[r[i] for r in rows_] for i in range(len(types))]
    assert compute_vnodes(columns, types, len(rows_)).tolist() == expected
    try:
        arrow_columns = [to_arrow(c, t) for c, t in zip(columns, types)]
    except ValueOutOfRangeError:
        return   # an INTERVAL Arrow cannot hold
    assert compute_vnodes(arrow_columns, types, len(rows_)).tolist() == expected


@given(st.lists(values(T.BIGINT), max_size=50), st.integers(0, 5))
def test_vectorized_on_sliced_arrow_arrays(vals, cut):
    arr = pa.array(vals, pa.int64()).slice(min(cut, len(vals)))
    assert compute_vnodes([arr], [T.BIGINT]).tolist() == [compute_vnode((v,), [T.BIGINT]) for v in arr.to_pylist()]
    sarr = pa.array([None if v is None else str(v) for v in vals]).slice(min(cut, len(vals)))
    assert compute_vnodes([sarr], [T.VARCHAR]).tolist() == [compute_vnode((v,), [T.VARCHAR]) for v in sarr.to_pylist()]


def test_singleton_needs_row_count():
    assert compute_vnodes([], [], 3).tolist() == [0, 0, 0]
    with pytest.raises(SchemaError):
        compute_vnodes([], [])


# --- twins ----------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", IMPLS)
@given(keys=st.lists(st.binary(max_size=70), max_size=20), seed=st.sampled_from([0, 1, 2**64 - 1]))
def test_hashes_match_xxhash(impl, keys, seed):
    expected = [xxhash.xxh64_intdigest(k, seed) for k in keys]
    assert [impl.hash_bytes(k, seed) for k in keys] == expected
    assert impl.hash_list(keys, seed).tolist() == expected
    offsets = np.cumsum([0] + [len(k) for k in keys])
    assert impl.hash_offsets(offsets, b"".join(keys), seed).tolist() == expected


@pytest.mark.parametrize("impl", IMPLS)
@given(head=st.binary(max_size=40), tail=st.binary(max_size=20), seed=st.sampled_from([0, 7]),
       count=st.sampled_from([1, 2, 256, 65536]))
def test_key_with_vnode(impl, head, tail, seed, count):
    vnode = xxhash.xxh64_intdigest(head, seed) % count
    assert impl.key_with_vnode(head, tail, seed, count) == vnode.to_bytes(2, "big") + head + tail
    assert impl.key_with_vnode(bytearray(head), memoryview(tail), seed, count) == impl.key_with_vnode(head, tail, seed, count)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("count", [0, -1, 65537])
def test_key_with_vnode_bad_count(impl, count):
    with pytest.raises(ValueError):
        impl.key_with_vnode(b"k", b"", 0, count)


@pytest.mark.parametrize("impl", IMPLS)
@given(keys=st.lists(st.binary(max_size=30), max_size=12), hashed=st.booleans(), seed=st.sampled_from([0, 7]),
       count=st.sampled_from([1, 256, 65536]))
def test_keys_with_vnodes_is_key_with_vnode_per_key(impl, keys, hashed, seed, count):
    dists = [k[:3] for k in keys] if hashed else None
    got = impl.keys_with_vnodes(keys, dists, seed, count)
    heads = dists if hashed else keys
    assert got == [impl.key_with_vnode(h, b"", seed, count)[:2] + k for h, k in zip(heads, keys)]
    assert got == vnode_py.keys_with_vnodes(keys, dists, seed, count)
    assert impl.keys_with_vnodes([bytearray(k) for k in keys], dists and [memoryview(d) for d in dists],
                                 seed, count) == got


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("keys, hashed, count, error", [
    ([b"a"], None, 0, ValueError),              # count out of range
    ([b"a"], None, 65537, ValueError),
    ([b"a", b"b"], [b"a"], 256, ValueError),    # lengths differ
    ([b"a", 5], None, 256, TypeError),          # not bytes
    ([b"a"], ["a"], 256, TypeError),
])
def test_keys_with_vnodes_bad_input(impl, keys, hashed, count, error):
    with pytest.raises(error):
        impl.keys_with_vnodes(keys, hashed, 0, count)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("offsets,data", [
    ([0, 5], b"abc"),          # past the end
    ([-1, 2], b"abc"),         # negative
    ([0, 2, 1, 3], b"abc"),    # decreasing
    ([], b""),                 # no entries at all
])
def test_bad_offsets_raise(impl, offsets, data):
    with pytest.raises(ValueError):
        impl.hash_offsets(np.array(offsets, dtype=np.int64), data)


# --- Bitmap ---------------------------------------------------------------------------------

@given(st.sets(st.integers(0, 255)))
def test_bitmap_roundtrip(vnodes):
    bm = Bitmap(vnodes)
    assert list(bm) == sorted(vnodes) and len(bm) == len(vnodes)
    assert Bitmap.from_bytes(bm.to_bytes()) == bm
    assert all((v in bm) == (v in vnodes) for v in range(256))
    assert bm.mask.sum() == len(vnodes)


def test_bitmap_ops_and_errors():
    a, b = Bitmap.from_range(0, 10), Bitmap(range(5, 20))
    assert list(a & b) == list(range(5, 10)) and list(a | b) == list(range(20))
    assert Bitmap.full().is_full() and len(Bitmap.full()) == 256 and not a.is_full()
    assert -1 not in a and 300 not in a
    for bad in (256, -1, "a", True):
        with pytest.raises(SchemaError):
            Bitmap([bad])
    with pytest.raises(SchemaError):
        Bitmap.from_bytes(b"\x00")
    with pytest.raises(ValueError):
        a.mask[0] = False
