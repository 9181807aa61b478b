"""Chunk keys (native/_chunk_keys.pyx and its twin relational/_chunk_keys_py.py): integer pk
columns to sorted table keys in one call.

Both implementations against a model built from the row encoder (vnode prefix + memcomparable
``encode_row``, sorted stably), byte for byte, over every integer width, both orders and the
extreme values; bad arguments raise the same errors; and ``RowSerde.encode_chunk`` with
``sort=True`` on integer pks equals ``encode`` row by row in key order with its order array.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relational._chunk_keys_py as chunk_keys_py
from relational.memcomparable import OrderType
from relational.memcomparable import encode_row as mc_encode
from relational.row_serde import RowSerde
from relational.types import DataType as T
from twins import implementations

IMPLS = implementations(chunk_keys_py, "_chunk_keys")
KINDS = {2: T.SMALLINT, 4: T.INT, 8: T.BIGINT}


def _ints(width):
    lo, hi = -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1
    return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1, 255, -256]))


@st.composite
def chunks(draw):
    widths = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=3))
    desc = draw(st.lists(st.booleans(), min_size=len(widths), max_size=len(widths)))
    n = draw(st.integers(0, 12))
    rows = [tuple(draw(_ints(w)) for w in widths) for _ in range(n)]
    vnodes = draw(st.lists(st.sampled_from([0, 1, 255, 256, 65535]), min_size=n, max_size=n))
    return widths, desc, rows, vnodes


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__)
@given(chunks())
def test_sorted_int_keys_equal_the_row_encoder_sorted(impl, case):
    widths, desc, rows, vnodes = case
    types = [KINDS[w] for w in widths]
    orders = [OrderType.DESC if d else OrderType.ASC for d in desc]
    expected = [v.to_bytes(2, "big") + mc_encode(r, types, orders) for v, r in zip(vnodes, rows)]
    columns = [np.array([r[j] for r in rows], dtype=np.int64) for j in range(len(widths))]
    order, keys = impl.sorted_int_keys(np.array(vnodes, dtype=np.uint16), columns, widths, desc)
    positions = sorted(range(len(rows)), key=expected.__getitem__)
    assert order.dtype == np.int64 and order.tolist() == positions
    assert keys == [expected[i] for i in positions]
    # packed (the packed insert path): the same keys back to back, their width, no repeat
    order2, packed, width, distinct = impl.sorted_int_key_buffer(np.array(vnodes, dtype=np.uint16), columns,
                                                                 widths, desc)
    assert order2.tolist() == positions and packed == b"".join(keys)
    assert width == 2 + sum(1 + w for w in widths) and distinct == (len(set(keys)) == len(keys))


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__)
def test_sorted_int_keys_refuse_bad_arguments(impl):
    v = np.zeros(2, dtype=np.uint16)
    c = np.array([1, 2], dtype=np.int64)
    cases = [((v.astype(np.int64), [c], [8], [False]), TypeError),
             ((v, [c.astype(np.int32)], [4], [False]), TypeError),
             ((v, [c[:1]], [8], [False]), ValueError),
             ((v, [c], [3], [False]), ValueError),
             ((v, [c], [True], [False]), ValueError),
             ((v, [c], [8, 8], [False]), ValueError),
             ((v, [np.array([1 << 15, 0], dtype=np.int64)], [2], [False]), ValueError),
             ((v, [np.array([-(1 << 31) - 1, 0], dtype=np.int64)], [4], [False]), ValueError)]
    for args, exc in cases:
        with pytest.raises(exc):
            impl.sorted_int_keys(*args)
        with pytest.raises(exc):
            impl.sorted_int_key_buffer(*args)


def test_twins_agree_on_a_large_chunk():
    rng = np.random.default_rng(5)
    n = 5000
    vnodes = rng.integers(0, 256, n).astype(np.uint16)
    columns = [rng.integers(-50, 50, n).astype(np.int64), rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64)]
    results = [impl.sorted_int_keys(vnodes, columns, [4, 8], [True, False]) for impl in IMPLS]
    for order, keys in results[1:]:
        assert order.tolist() == results[0][0].tolist() and keys == results[0][1]



@given(st.integers(256, 1200), st.sampled_from([[0, 3], [0, 1, 2, 255], [7, 65535], [9]]),
       st.integers(0, 2 ** 32 - 1), st.integers(0, 6), st.booleans(), st.booleans())
def test_twins_agree_on_chunks_sorted_vnode_by_vnode(n, vnode_set, seed, swaps, repeats, desc):
    """Chunks of >= 256 rows take the native counting sort by vnode, then sort only the vnodes
    whose rows are out of order: a pk growing along the chunk (row ids) spread over vnodes,
    with a few rows swapped, repeated keys, a DESC column, vnodes up to 65535 -- the same order
    (bytes, then row number) and keys as the twin's stable sort."""
    rng = np.random.default_rng(seed)
    vnodes = rng.choice(np.array(vnode_set, dtype=np.uint16), n)
    ids = np.arange(n, dtype=np.int64) // (3 if repeats else 1)
    for _ in range(swaps):
        a, b = rng.integers(0, n, 2)
        ids[a], ids[b] = ids[b], ids[a]
    columns, widths, descending = [ids], [8], [desc]
    results = [impl.sorted_int_key_buffer(vnodes, columns, widths, descending) for impl in IMPLS]
    model = chunk_keys_py.sorted_int_key_buffer(vnodes, columns, widths, descending)
    for order, packed, width, distinct in results:
        assert order.tolist() == model[0].tolist() and packed == model[1]
        assert (width, distinct) == (model[2], model[3])


@pytest.mark.parametrize("impl", IMPLS, ids=lambda m: m.__name__)
def test_chunks_already_in_key_order_and_nearly_so(impl):
    """Chunks whose keys already ascend (an APPEND ONLY table's row ids; equal keys in row
    order; a DESC column given descending values) come back as they are; one inversion
    anywhere, the last pair included, still sorts (the native encoder skips its sort only
    when every pair is in order)."""
    n = 300
    ids = np.arange(10, 10 + n, dtype=np.int64)
    vnodes = np.zeros(n, dtype=np.uint16)
    cases = [([ids], [8], [False]), ([np.repeat(ids[:100], 3)], [8], [False]), ([ids[::-1].copy()], [8], [True]),
             ([np.zeros(n, np.int64), ids], [4, 8], [False, False])]
    for at in (0, n // 2, n - 2):
        swapped = ids.copy()
        swapped[at], swapped[at + 1] = swapped[at + 1], swapped[at]
        cases.append(([swapped], [8], [False]))
    for columns, widths, desc in cases:
        order, keys = impl.sorted_int_keys(vnodes, columns, widths, desc)
        model = chunk_keys_py.sorted_int_keys(vnodes, columns, widths, desc)
        assert order.tolist() == model[0].tolist() and keys == model[1]
        assert keys == sorted(keys) and len(set(order.tolist())) == n
    stepped_vnodes = np.full(n, 7, dtype=np.uint16)
    stepped_vnodes[0] = stepped_vnodes[-1] = 0   # in order but for the last row's vnode
    order, keys = impl.sorted_int_keys(stepped_vnodes, [ids], [8], [False])
    assert order.tolist() == [0, n - 1] + list(range(1, n - 1)) and keys == sorted(keys)


@given(st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), _ints(8), st.text(max_size=4)), max_size=10),
       st.sampled_from([None, [0], [1], [0, 1]]), st.booleans())
def test_encode_chunk_on_integer_pks_equals_rows_in_key_order(rows, dist, desc):
    serde = RowSerde([T.INT, T.BIGINT, T.VARCHAR], [1, 0], [OrderType.DESC if desc else OrderType.ASC, OrderType.ASC],
                     dist)
    pairs = [serde.encode(r) for r in rows]
    cols = [pa.array([r[0] for r in rows], pa.int32()), pa.array([r[1] for r in rows], pa.int64()),
            pa.array([r[2] for r in rows], pa.string())]
    for columns in (cols, [[r[c] for r in rows] for c in range(3)]):
        vnodes, keys, values, order = serde.encode_chunk(columns, len(rows), sort=True, return_order=True)
        positions = sorted(range(len(rows)), key=lambda i: pairs[i][0])
        assert list(zip(keys, values)) == [pairs[i] for i in positions]
        assert order.tolist() == positions
        assert vnodes.tolist() == [int.from_bytes(k[:2], "big") for k in keys]
