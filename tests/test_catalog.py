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


# --- checksum-valid records with malformed content (issue 25) -----------------------------------

def _record(obj) -> bytes:
    import json
    import struct

    import xxhash
    payload = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack("<8sIIQ", b"HUMKTBL1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload


_GOOD = TableDesc(7, "t", [("a", T.INT), ("b", T.VARCHAR)], [0]).to_json()


@pytest.mark.parametrize("obj, field, found", [
    ([], "the description", []),
    (dict(_GOOD, columns="nope"), "columns", "nope"),
    (dict(_GOOD, columns=[["a", {"kind": 3}, 1]]), "columns[0]", ["a", {"kind": 3}, 1]),
    (dict(_GOOD, columns=[[1, {"kind": 3}]]), "columns[0][0]", 1),
    (dict(_GOOD, columns=[["a", {"kind": "INT"}]]), "columns[0][1].kind", "INT"),       # a type name
    (dict(_GOOD, columns=[["a", {"kind": 99}]]), "columns[0][1].kind", 99),             # unknown code
    (dict(_GOOD, columns=[["a", {"kind": True}]]), "columns[0][1].kind", True),
    (dict(_GOOD, columns=[["a", [3]]]), "columns[0][1]", [3]),
    (dict(_GOOD, columns=[["a", {"kind": 15, "fields": 3}]]), "columns[0][1].fields", 3),
    (dict(_GOOD, columns=[["a", {"kind": 15, "fields": [["x"]]}]]), "columns[0][1].fields[0]", ["x"]),
    (dict(_GOOD, columns=[["a", {"kind": 16}]]), "columns[0][1].elem", None),
    (dict(_GOOD, pk_indices=["0"]), "pk_indices[0]", "0"),
    (dict(_GOOD, pk_indices=[True]), "pk_indices[0]", True),
    (dict(_GOOD, order_types=[[1, 0]]), "order_types[0][0]", 1),
    (dict(_GOOD, order_types=[[True]]), "order_types[0]", [True]),
    (dict(_GOOD, append_only="no"), "append_only", "no"),
    (dict(_GOOD, retention_seconds=1.5), "retention_seconds", 1.5),
    (dict(_GOOD, properties=[]), "properties", []),
    (dict(_GOOD, table_id=7.0), "table_id", 7.0),
    (dict(_GOOD, value_indices="all"), "value_indices", "all"),
    ({k: v for k, v in _GOOD.items() if k != "name"}, "name", None),
])
def test_malformed_content_with_a_valid_checksum_is_corruption(obj, field, found):
    with pytest.raises(CorruptionError) as info:
        TableDesc.from_bytes(_record(obj), "rec")
    err = info.value
    assert (err.object, err.offset, err.found) == ("rec", 24, found)
    assert f"invalid table description: {field}" in str(err) and err.expected


@pytest.mark.parametrize("obj", [dict(_GOOD, pk_indices=[9]), dict(_GOOD, table_id=2**40), b"\xff\xfe",
                                 b'{"table_id": ' + b"9" * 5000 + b"}"])
def test_well_typed_nonsense_and_non_json_are_corruption(obj):
    with pytest.raises(CorruptionError) as info:
        TableDesc.from_bytes(_record(obj), "rec")
    assert (info.value.object, info.value.offset) == ("rec", 24)


def test_a_record_under_another_tables_key_is_corruption():
    from relational.catalog import decode_record
    data = TableDesc(7, "t", [("a", T.INT)], [0]).to_bytes()
    assert decode_record(b"table/" + (7).to_bytes(4, "big"), data).table_id == 7
    with pytest.raises(CorruptionError) as info:
        decode_record(b"table/" + (8).to_bytes(4, "big"), data)
    assert (info.value.expected, info.value.found) == (8, 7)
    with pytest.raises(CorruptionError):
        decode_record(b"table/\x00\x07", data)


def _store_with_record(path, mutate):
    """A SQL database at ``path`` (table t, MV m), then one catalog record replaced by
    ``mutate(descs) -> (table_id, json)``, written checksum-valid."""
    import sql
    with sql.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a FROM t")
        conn.execute("CREATE INDEX i ON t (b)")
    from hummock import HummockStorage
    with HummockStorage.open(str(path)) as db:
        descs = {d.name: d for d in Catalog(db).list(db.max_committed_epoch)}
        table_id, obj = mutate(descs)
        epoch = max(new_epoch(), db.max_committed_epoch + (1 << 16))
        db.ingest_batch(CATALOG_TABLE_ID, [(b"table/" + table_id.to_bytes(4, "big"), _record(obj))], epoch)
        db.checkpoint(epoch)


def _sql_props(name, **changes):
    def mutate(descs):
        obj = descs[name].to_json()
        obj["properties"]["sql"].update(changes)
        return descs[name].table_id, obj
    return mutate


SQL_DAMAGE = {
    "kind": (_sql_props("m", kind="view"), "properties.sql.kind", "view"),
    "n_visible type": (_sql_props("m", n_visible="1"), "properties.sql.n_visible", "1"),
    "n_visible range": (_sql_props("m", n_visible=9), "properties.sql.n_visible", 9),
    "conflict": (_sql_props("t", conflict="explode"), "properties.sql.conflict", "explode"),
    "internal id": (_sql_props("m", internal_ids=["x"]), "properties.sql.internal_ids[0]", "x"),
    "depends_on": (_sql_props("m", depends_on=["nosuch"]), "properties.sql.depends_on", ["nosuch"]),
    "definition": (_sql_props("m", definition=5), "properties.sql.definition", 5),
    "index columns": (_sql_props("i", index_columns=3), "properties.sql.index_columns", 3),
    "index table": (_sql_props("i", depends_on=["t", "m"]), "properties.sql.depends_on", ["t", "m"]),
    "sql not an object": (lambda d: (d["m"].table_id, dict(d["m"].to_json(), properties={"sql": []})),
                          "properties.sql", []),
    "duplicate name": (lambda d: (d["m"].table_id, dict(d["m"].to_json(), name="t")), "named 't'", "t"),
    "meta": (lambda d: (0, dict(d["__sql_meta__"].to_json(), properties={"next_table_id": "x"})),
             "properties.next_table_id", "x"),
    "type code": (lambda d: (d["m"].table_id, dict(d["m"].to_json(), columns=[["a", {"kind": 77}]])),
                  "columns[0][1].kind", 77),
}


@pytest.mark.parametrize("damage", list(SQL_DAMAGE))
def test_a_malformed_sql_catalog_record_fails_connect_cleanly(tmp_path, damage):
    import threading

    import sql
    from hummock import HummockStorage
    mutate, what, found = SQL_DAMAGE[damage]
    path = tmp_path / "db"
    _store_with_record(path, mutate)
    threads = set(threading.enumerate())
    for _ in range(2):   # the failed connect closed its store: the second meets the same damage
        with pytest.raises(CorruptionError) as info:
            sql.connect(str(path))
        assert what in str(info.value) and info.value.found == found
        assert info.value.object.startswith("catalog record b'table/")
    left = {t for t in threading.enumerate() if t.name != "hummock-spawner"}   # a process-wide singleton
    assert left <= threads   # no compactor or runtime thread left behind
    HummockStorage.open(str(path)).close()          # nor the writer lock
