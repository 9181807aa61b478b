"""Table catalog records (relational/catalog.py): round trips, corruption, and persistence in
the store's catalog table, committed atomically with the epoch's data."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hummock.errors import CorruptionError
from hummock.key import new_epoch
from relational.catalog import CATALOG_TABLE_ID, Catalog, TableDesc
from relational.errors import SchemaError
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.types import DataType as T
from strategies import data_types
from table_stores import opener


@st.composite
def descs(draw):
    types = draw(st.lists(data_types(), min_size=1, max_size=5))
    n = len(types)
    pk = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    orders = [OrderType(draw(st.booleans()), draw(st.booleans())) for _ in pk]
    dist = draw(st.lists(st.sampled_from(pk), unique=True)) if pk else []
    value = draw(st.one_of(st.none(), st.lists(st.integers(0, n - 1), unique=True, max_size=n)))
    return TableDesc(draw(st.integers(0, CATALOG_TABLE_ID - 1)), draw(st.text(max_size=10)),
                     [(f"col{i}", t) for i, t in enumerate(types)], pk, orders, dist, value,
                     draw(st.booleans()), draw(st.one_of(st.none(), st.integers(0, 10**9))),
                     draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)))


@given(descs())
def test_round_trip(desc):
    data = desc.to_bytes()
    assert data[:8] == b"HUMKTBL1"
    assert TableDesc.from_bytes(data) == desc
    assert TableDesc.from_json(desc.to_json()) == desc


def test_golden_record():
    desc = TableDesc(7, "t", [("a", T.INT), ("b", T.VARCHAR)], [0], [OrderType.DESC])
    assert desc.to_bytes()[:24].hex() == b"HUMKTBL1".hex() + "01000000" + "dc000000" + "8d175b2f6ff4a3ef"
    assert desc.to_bytes()[24:] == (
        b'{"append_only":false,"columns":[["a",{"kind":3}],["b",{"kind":8}]],"dist_key_indices":[],'
        b'"name":"t","order_types":[[true,true]],"pk_indices":[0],"properties":{},'
        b'"retention_seconds":null,"table_id":7,"value_indices":null}')


@pytest.mark.parametrize("mutate,offset", [
    (lambda b: b[:10], 0),
    (lambda b: b"X" + b[1:], 0),
    (lambda b: b[:8] + b"\x02" + b[9:], 8),
    (lambda b: b + b"x", 12),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), 16),
])
def test_damaged_records_raise(mutate, offset):
    data = TableDesc(1, "t", [("a", T.INT)], [0]).to_bytes()
    with pytest.raises(CorruptionError) as info:
        TableDesc.from_bytes(mutate(data), "rec")
    assert info.value.offset == offset and info.value.object == "rec"


def test_invalid_json_with_a_valid_checksum_raises():
    import struct

    import xxhash
    payload = b'{"table_id": 1}'
    data = struct.pack("<8sIIQ", b"HUMKTBL1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload
    with pytest.raises(CorruptionError) as info:
        TableDesc.from_bytes(data)
    assert info.value.offset == 24


@pytest.mark.parametrize("kwargs", [
    dict(table_id=CATALOG_TABLE_ID), dict(table_id=-1), dict(name=5), dict(pk_indices=[3]),
    dict(columns=[("a", T.INT), ("a", T.INT)]), dict(retention_seconds=-1),
])
def test_bad_descriptions(kwargs):
    args = dict(table_id=1, name="t", columns=[("a", T.INT)], pk_indices=[0])
    args.update(kwargs)
    with pytest.raises(SchemaError):
        TableDesc(**args)


@pytest.mark.parametrize("kind", ["memory", "local", "s3"])
def test_catalog_commits_with_the_epoch(kind, tmp_path, request):
    open_store = opener(kind, tmp_path, request)
    store = open_store()
    desc = TableDesc(1, "orders", [("id", T.BIGINT), ("v", T.VARCHAR)], [0], dist_key_indices=[0])
    other = TableDesc(2, "other", [("k", T.INT)], [0], append_only=True, retention_seconds=60)
    e1 = new_epoch()
    Catalog(store).put([desc, other], e1)
    table = StateTable.from_desc(store, desc)
    table.init_epoch(e1)
    table.insert((1, "one"))
    table.commit(new_epoch())
    store.checkpoint(e1)                       # catalog and rows: one commit
    e2 = table.epoch
    Catalog(store).drop(2, e2)
    Catalog(store).put(TableDesc(3, "lost", [("k", T.INT)], [0]), e2)
    assert [d.name for d in Catalog(store).list(e2)] == ["orders", "lost"]
    store.close()                              # e2 never committed
    store = open_store()
    try:
        catalog = Catalog(store)
        epoch = store.max_committed_epoch
        assert epoch == e1
        assert catalog.list(epoch) == [desc, other]
        assert catalog.get(3, epoch) is None
        got = catalog.get(1, epoch)
        table = StateTable.from_desc(store, got)
        table.init_epoch(new_epoch())
        assert table.get_row((1,)) == (1, "one")
    finally:
        store.close()
