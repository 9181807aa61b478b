"""``sql.connect`` that fails closes what it opened (issue 25): bad options are refused before the
store opens, and a store whose catalog does not load or whose MVs no longer plan is closed again
-- its writer lock and compactor thread go with the exception, so the next ``connect`` or
``HummockStorage.open`` of the same path works."""

import json
import struct
import threading

import pytest
import xxhash

import sql
from hummock import HummockStorage, InvalidArgumentError
from hummock.errors import CorruptionError
from hummock.key import new_epoch
from relational.catalog import CATALOG_TABLE_ID, Catalog
from sql.errors import SqlError


def _damage(path, name: str, change) -> None:
    """Replace relation ``name``'s catalog record by ``change(its JSON)``, checksum-valid."""
    with HummockStorage.open(str(path)) as db:
        desc = next(d for d in Catalog(db).list(db.max_committed_epoch) if d.name == name)
        payload = json.dumps(change(desc.to_json())).encode()
        record = struct.pack("<8sIIQ", b"HUMKTBL1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload
        epoch = max(new_epoch(), db.max_committed_epoch + (1 << 16))
        db.ingest_batch(CATALOG_TABLE_ID, [(b"table/" + desc.table_id.to_bytes(4, "big"), record)], epoch)
        db.checkpoint(epoch)


@pytest.fixture
def db_path(tmp_path):
    path = tmp_path / "db"
    with sql.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a FROM t")
    return path


def _threads() -> set:
    return {t for t in threading.enumerate() if t.is_alive()}


def _set_definition(obj):
    obj["properties"]["sql"]["definition"] = "SELECT nosuch FROM t"
    return obj


@pytest.mark.parametrize("change, error", [
    (lambda obj: dict(obj, columns=[["a", {"kind": 77}]]), CorruptionError),   # the catalog does not load
    (_set_definition, SqlError),                                              # the graph does not build
], ids=["catalog", "graph"])
def test_a_failed_connect_closes_the_store_it_opened(db_path, change, error):
    _damage(db_path, "m", change)
    before = _threads()
    for _ in range(2):   # not ConcurrentWriterError the second time: the first let go of the lock
        with pytest.raises(error):
            sql.connect(str(db_path))
    assert _threads() <= before, "a compactor or runtime thread outlived the failed connect"
    with HummockStorage.open(str(db_path)) as db:   # the writer lock is free
        assert db.max_committed_epoch > 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(no_such_option=3), "unknown connect"),
    (dict(barrier_interval_ms="soon"), "barrier_interval_ms"),
    (dict(barrier_interval_ms=-1), "barrier_interval_ms"),
    (dict(barrier_interval_ms=float("nan")), "barrier_interval_ms"),
    (dict(compactor="nope"), "compactor"),
])
def test_bad_options_are_invalid_arguments_and_leave_nothing_open(db_path, kwargs, match):
    before = _threads()
    with pytest.raises(InvalidArgumentError, match=match):
        sql.connect(str(db_path), **kwargs)
    assert _threads() <= before
    with sql.connect(str(db_path)) as conn:
        assert conn.execute("SHOW TABLES").fetchall() == [("t",)]


def test_connect_creates_a_missing_bucket_only_when_asked(s3_server):
    """``s3_create_bucket_if_missing`` (a StorageOptions field, so also ``sql.connect``'s) makes
    the writer create the bucket its s3:// URL names; without it a missing bucket is an error,
    and a read-only connection never creates one."""
    from hummock import HummockError
    from s3_server import CREDENTIALS, REGION, new_bucket_name

    creds = dict(s3_endpoint=s3_server.endpoint_url, s3_region=REGION,
                 s3_access_key_id=CREDENTIALS["access_key_id"], s3_secret_access_key=CREDENTIALS["secret_access_key"])
    bucket = new_bucket_name()
    with pytest.raises(HummockError):
        sql.connect(f"s3://{bucket}/db", **creds)
    with pytest.raises(HummockError):
        sql.connect(f"s3://{bucket}/db", read_only=True, s3_create_bucket_if_missing=True, **creds)
    with sql.connect(f"s3://{bucket}/db", s3_create_bucket_if_missing=True, **creds) as conn:
        conn.execute("CREATE TABLE t (a INT)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("FLUSH")
    with sql.connect(f"s3://{bucket}/db", read_only=True, **creds) as reader:
        assert reader.execute("SELECT a FROM t").fetchall() == [(1,)]
    s3_server.drop_bucket(bucket)
