"""Progress records of streaming writers (relational/progress.py): round trips, damage raises
CorruptionError naming the record, names are validated, records persist in the catalog table
with the epoch's data, and the table-record readers (Catalog, SQL catalog, inspect verify)
never see them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from hummock.errors import CorruptionError
from hummock.key import new_epoch
from hummock.pinned_read import VersionReader
from relational.catalog import CATALOG_TABLE_ID, Catalog
from relational.errors import SchemaError
from relational.progress import (MAX_QUERY_BYTES, PROGRESS_PREFIX, Progress, decode_progress, encode_progress,
                                 list_progress, progress_key, read_progress, write_progress)
from sql.catalog import SqlCatalog
from cli.inspection import verify
from table_stores import opener

# names that encode as UTF-8 (no lone surrogates) within the byte limit
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=50).filter(
    lambda s: len(s.encode()) <= MAX_QUERY_BYTES)


@given(names, st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 64) - 1))
def test_round_trip(query, batch_id, epoch):
    value = encode_progress(query, batch_id, epoch)
    assert value[:8] == b"HUMKPRG1"
    assert decode_progress(progress_key(query), value) == Progress(query, batch_id, epoch)


def test_golden_record():
    value = encode_progress("q", 3, 65536)
    assert value[24:] == b'{"batch_id":3,"epoch":65536,"query":"q"}'
    assert value[8:16].hex() == "01000000" + f"{len(value) - 24:02x}000000"
    assert progress_key("q") == b"progress/q"


@given(names, st.integers(0, 100), st.data())
def test_any_damage_raises_corruption_naming_the_record(query, batch_id, data):
    value = bytearray(encode_progress(query, batch_id, 1 << 16))
    choice = data.draw(st.sampled_from(["flip", "cut", "append"]))
    if choice == "flip":
        i = data.draw(st.integers(0, len(value) - 1))
        value[i] ^= 1 << data.draw(st.integers(0, 7))
    elif choice == "cut":
        value = value[:data.draw(st.integers(0, len(value) - 1))]
    else:
        value += data.draw(st.binary(min_size=1, max_size=4))
    key = progress_key(query)
    with pytest.raises(CorruptionError) as info:
        decode_progress(key, bytes(value))
    assert "progress record" in info.value.object and repr(key) in info.value.object


def _envelope(payload: bytes) -> bytes:
    import struct

    import xxhash
    return struct.pack("<8sIIQ", b"HUMKPRG1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload


@pytest.mark.parametrize("payload", [
    b'{"batch_id":1,"epoch":2}',                        # a field missing
    b'{"batch_id":true,"epoch":2,"query":"q"}',         # a bool is no integer
    b'{"batch_id":-1,"epoch":2,"query":"q"}',
    b'{"batch_id":1,"epoch":"2","query":"q"}',
    b'{"batch_id":1,"epoch":2,"query":7}',
    b'[1,2,3]',
    b'\xff\xfe',
    b'{"batch_id":1,"epoch":2,"query":"other"}',        # checksum holds, but the key names q
])
def test_well_checksummed_but_malformed_payloads_raise(payload):
    with pytest.raises(CorruptionError) as info:
        decode_progress(b"progress/q", _envelope(payload))
    assert info.value.object.startswith("progress record b'progress/q'")


@pytest.mark.parametrize("bad", ["", "x" * (MAX_QUERY_BYTES + 1), "\u00e9" * 101, "\ud800", None, 7])
def test_bad_query_names_are_refused(bad):
    with pytest.raises(SchemaError):
        progress_key(bad)


def test_name_limit_counts_utf8_bytes():
    assert progress_key("\u00e9" * 100) == PROGRESS_PREFIX + ("\u00e9" * 100).encode()


@pytest.mark.parametrize("batch_id,epoch", [(-1, 0), (True, 0), (0, 1 << 64), (0, -1), (1 << 63, 0)])
def test_bad_numbers_are_refused(batch_id, epoch):
    with pytest.raises(SchemaError):
        encode_progress("q", batch_id, epoch)


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_records_persist_with_the_epoch_and_read_through_pinned_versions(kind, tmp_path, request):
    open_store = opener(kind, tmp_path, request)
    store = open_store()
    e1 = new_epoch()
    write_progress(store, "q1", 0, e1)
    write_progress(store, "zz", 5, e1)
    store.checkpoint(e1)
    e2 = e1 + (1 << 16)
    write_progress(store, "q1", 1, e2)
    assert read_progress(store, "q1", e2) == Progress("q1", 1, e2)   # own writes before the commit
    store.checkpoint(e2)
    assert read_progress(store, "q1", e1) == Progress("q1", 0, e1)
    assert read_progress(store, "nope", e2) is None
    assert list_progress(store, e2) == [Progress("q1", 1, e2), Progress("zz", 5, e1)]
    reader = VersionReader(store._store, store.version())
    assert read_progress(reader, "q1", e2) == Progress("q1", 1, e2)
    assert list_progress(reader, e2) == list_progress(store, e2)
    if kind == "local":
        store.close()
        store = open_store()
        assert read_progress(store, "q1", store.max_committed_epoch) == Progress("q1", 1, e2)
    store.close()


def test_damaged_stored_record_names_itself(tmp_path):
    store = HummockStorage.open(str(tmp_path / "db"))
    e = new_epoch()
    store.ingest_batch(CATALOG_TABLE_ID, [(b"progress/q", b"garbage")], e)
    store.checkpoint(e)
    with pytest.raises(CorruptionError, match="progress record") as info:
        read_progress(store, "q", e)
    assert "progress/q" in info.value.object
    with pytest.raises(CorruptionError):
        list_progress(store, e)
    store.close()


def test_table_record_readers_ignore_progress_records(tmp_path):
    url = str(tmp_path / "db")
    conn = sql.connect(url)
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
    conn.execute("INSERT INTO t VALUES (1, 2)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT sum(v) AS s FROM t")
    conn.close()
    with HummockStorage.open(url) as store:
        e = max(new_epoch(), store.max_committed_epoch + (1 << 16))
        write_progress(store, "my-query", 3, e)
        write_progress(store, "\u00fcber/x", 4, e)
        store.checkpoint(e)
        names = sorted(d.name for d in Catalog(store).list(e))
        assert "t" in names and "m" in names
        cat = SqlCatalog.load(store, e)
        assert {"t", "m"} <= set(cat.relations)
        assert [p.query for p in list_progress(store, e)] == ["my-query", "\u00fcber/x"]
    report = verify(url)
    assert report.ok, report.problems
    conn = sql.connect(url)
    assert conn.execute("SELECT s FROM m").fetchall() == [(2,)]
    conn.execute("INSERT INTO t VALUES (2, 5)")
    conn.execute("FLUSH")
    assert conn.execute("SELECT s FROM m").fetchall() == [(7,)]
    conn.close()
    with HummockStorage.open(url, read_only=True) as store:
        assert read_progress(store, "my-query", store.max_committed_epoch) == Progress("my-query", 3, e)
