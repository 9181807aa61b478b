"""Row serde (relational/row_serde.py): key = vnode || memcomparable(pk), value = value encoding.

Random schemas over every type, random pk / distribution key / value columns and orders: a row
round-trips, ``encode_chunk`` equals ``encode`` row by row (Arrow and Python columns), the key
starts with the row's vnode, and bad schemas raise ``SchemaError``.
"""

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational.arrow import to_arrow
from relational.errors import SchemaError, ValueOutOfRangeError
from relational.memcomparable import OrderType
from relational.memcomparable import encode_row as mc_encode
from relational.row_serde import RowSerde
from relational.types import DataType as T
from relational.value_encoding import encode_row as ve_encode
from relational.vnode import compute_vnode
from strategies import data_types, rows

ORDERS = st.sampled_from([OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])


@st.composite
def schemas(draw, max_columns=5):
    types = draw(st.lists(data_types(max_depth=1), min_size=1, max_size=max_columns))
    n = len(types)
    pk = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    orders = [draw(ORDERS) for _ in pk]
    dist = draw(st.lists(st.sampled_from(pk), unique=True)) if pk else []
    value = draw(st.one_of(st.none(), st.lists(st.integers(0, n - 1), unique=True, max_size=n)))
    return RowSerde(types, pk, orders, dist, value)


@given(schemas().flatmap(lambda s: st.tuples(st.just(s), st.lists(rows(s.types), max_size=6))))
def test_roundtrip_and_chunk_equals_rows(case):
    serde, rows_ = case
    pairs = [serde.encode(r) for r in rows_]
    for row, (key, value) in zip(rows_, pairs):
        pk = serde.pk_of(row)
        vnode = compute_vnode([pk[i] for i in serde.dist_in_pk], serde.dist_types)
        assert key == vnode.to_bytes(2, "big") + mc_encode(pk, serde.pk_types, serde.order_types)
        assert value == ve_encode([row[i] for i in serde.value_indices], serde.value_types)
        back = serde.decode(key, value)
        assert serde.encode(back) == (key, value)
        for c in range(len(serde.types)):
            if c not in serde.value_indices and c not in serde.pk_indices:
                assert back[c] is None
    decoded = serde.decode_many([k for k, _ in pairs], [v for _, v in pairs])
    assert [serde.encode(r) for r in decoded] == pairs   # bytes: NaN != NaN as values
    columns = [[r[c] for r in rows_] for c in range(len(serde.types))]
    vnodes, keys, values = serde.encode_chunk(columns, len(rows_))
    assert list(zip(keys, values)) == pairs
    assert vnodes.tolist() == [int.from_bytes(k[:2], "big") for k in keys]
    try:
        arrow_columns = [to_arrow(c, t) for c, t in zip(columns, serde.types)]
    except ValueOutOfRangeError:
        return
    _, keys2, values2 = serde.encode_chunk(arrow_columns, len(rows_))
    assert list(zip(keys2, values2)) == pairs
    for cols in (columns, arrow_columns):    # sort=True: stable key order, vnodes follow
        vnodes3, keys3, values3 = serde.encode_chunk(cols, len(rows_), sort=True)
        assert list(zip(keys3, values3)) == sorted(pairs, key=lambda kv: kv[0])
        assert vnodes3.tolist() == [int.from_bytes(k[:2], "big") for k in keys3]


@st.composite
def dist_prefix_schemas(draw):
    """Schemas whose distribution key is the pk's first k columns (the single-row fast path when
    those are ASC NULLS LAST; other orders take the general path)."""
    types = draw(st.lists(data_types(max_depth=1), min_size=1, max_size=4))
    n = len(types)
    pk = draw(st.permutations(range(n)).map(lambda p: p[:draw(st.integers(1, n))]))
    k = draw(st.integers(1, len(pk)))
    orders = [draw(st.sampled_from([OrderType.ASC, OrderType.ASC, OrderType.DESC, OrderType(False, True)]))
              for _ in pk]
    return RowSerde(types, pk, orders, list(pk[:k]))


@given(dist_prefix_schemas().flatmap(lambda s: st.tuples(st.just(s), st.lists(rows(s.types), max_size=4))))
def test_key_of_pk_with_distribution_key_as_pk_prefix(case):
    serde, rows_ = case
    for row in rows_:
        pk = serde.pk_of(row)
        vnode = compute_vnode([pk[i] for i in serde.dist_in_pk], serde.dist_types)
        expected = vnode.to_bytes(2, "big") + mc_encode(pk, serde.pk_types, serde.order_types)
        assert serde.key_of_pk(pk) == expected
        assert serde.key_of_pk(list(pk)) == expected


def test_sorted_chunk_of_fixed_width_keys_orders_like_bytes():
    # BIGINT pks whose keys hold 0x00 and 0xFF bytes anywhere; the numpy sort must agree with bytes
    serde = RowSerde([T.BIGINT, T.INT], [0], dist_key_indices=[0])
    ids = [0, -1, 1, 255, -256, 2**63 - 1, -2**63, 256, 65280, 7, 7]
    vals = list(range(len(ids)))
    for cols in ([ids, vals], [pa.array(ids, pa.int64()), pa.array(vals, pa.int32())]):
        _, keys, values = serde.encode_chunk(cols, len(ids), sort=True)
        pairs = [serde.encode(r) for r in zip(ids, vals)]
        assert list(zip(keys, values)) == sorted(pairs, key=lambda kv: kv[0])


def test_vectorized_pk_with_nulls_and_desc():
    serde = RowSerde([T.BIGINT, T.INT, T.VARCHAR], [1, 0], [OrderType.DESC, OrderType.ASC], dist_key_indices=[0])
    rows_ = [(1, None, "a"), (None, 5, None), (-3, 2**31 - 1, "x")]
    cols = [pa.array([r[0] for r in rows_], pa.int64()), pa.array([r[1] for r in rows_], pa.int32()),
            pa.array([r[2] for r in rows_])]
    _, keys, values = serde.encode_chunk(cols, 3)
    assert list(zip(keys, values)) == [serde.encode(r) for r in rows_]


def test_pk_only_table_decodes_from_key():
    serde = RowSerde([T.VARCHAR, T.INT], [0, 1], value_indices=[])
    key, value = serde.encode(("k", 3))
    assert value == b"\x01\x00"
    assert serde.decode(key, value) == ("k", 3)
    assert serde.decode_pk(key) == ("k", 3)


@pytest.mark.parametrize("kwargs", [
    dict(types=[T.INT], pk_indices=[1]),
    dict(types=[T.INT], pk_indices=[0, 0]),
    dict(types=[T.INT, T.INT], pk_indices=[0], dist_key_indices=[1]),
    dict(types=[T.INT], pk_indices=[0], order_types=[]),
    dict(types=[T.INT], pk_indices=[0], value_indices=[2]),
    dict(types=["INT"], pk_indices=[0]),
])
def test_bad_schemas(kwargs):
    with pytest.raises(SchemaError):
        RowSerde(**kwargs)


def test_wrong_widths_raise():
    serde = RowSerde([T.INT, T.INT], [0])
    with pytest.raises(SchemaError):
        serde.encode((1,))
    with pytest.raises(SchemaError):
        serde.key_of_pk((1, 2))
    with pytest.raises(SchemaError):
        serde.encode_chunk([[1, 2], [3]], 2)
    with pytest.raises(SchemaError):
        serde.encode_chunk([[1]], 1)
