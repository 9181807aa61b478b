"""What vacuum may delete (issue 10 parts 2, 3 and 6), in one process: young objects, other
writers' ids, a fenced or expired writer, SSTs a reader's lease pins, and crash temp files.

Cross-process runs (a reader refreshing while a writer compacts; a writer cut off past its
lease on S3) are in test_two_process.py.
"""

import datetime
import os
import time
import uuid

import pytest

from hummock import ConcurrentWriterError, HummockStorage, StorageOptions
from hummock.leases import LEASE_PREFIX, VersionExpiredError, live_lease_floor
from hummock.manifest import Manifest, WriterLock
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.sstable.meta import sst_object_path
from hummock.version import VersionDelta

E = 1 << 16
NOW = StorageOptions(compactor="none", vacuum_min_age_s=0, block_size=512, target_sst_size=4096)


def _fill(store, epochs, n=300, table=1):
    for i in epochs:
        store.ingest_batch(table, [(b"k%04d" % j, b"v%d" % i) for j in range(n)], i * E)
        store.checkpoint(i * E)


def _sst_ids(store) -> set:
    return {int(m.path.rsplit("/", 1)[-1][:-4]) for m in store.list("sst/")}


def test_young_orphans_survive_vacuum_until_old_enough(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path, NOW) as db:
        _fill(db, [1])
        db.ingest_batch(1, [(b"x", b"1")], 2 * E)
        db.sync(2 * E)                      # a staging SST that will never be committed
    slow = NOW.replace(vacuum_min_age_s=3600)
    with HummockStorage.open(path, slow) as db:
        assert db.stats().get("vacuumed_ssts", 0) == 0    # the orphan is younger than an hour
        orphans = _sst_ids(db._store) - db.version().sst_ids()
        assert len(orphans) == 1
        for sst_id in orphans:             # age it: its mtime two hours back
            file = os.path.join(path, *sst_object_path(sst_id).split("/"))
            past = time.time() - 7200
            os.utime(file, (past, past))
    with HummockStorage.open(path, slow) as db:
        # old enough, but it left no version this writer saw: it waits the grace after open
        assert _sst_ids(db._store) - db.version().sst_ids() == orphans
    with HummockStorage.open(path, NOW) as db:
        assert db.stats()["vacuumed_ssts"] == 1
        assert _sst_ids(db._store) == db.version().sst_ids()


def test_compacted_inputs_wait_the_grace_then_go(tmp_path):
    with HummockStorage.open(str(tmp_path / "db"), NOW.replace(vacuum_min_age_s=1.0, reader_lease_s=2.0)) as db:
        _fill(db, range(1, 5))
        before = db.version().sst_ids()
        db.compact_all()
        assert before <= _sst_ids(db._store)        # inputs kept: they left the version just now
        time.sleep(1.1)
        assert db.vacuum() == len(before - db.version().sst_ids())
        assert _sst_ids(db._store) == db.version().sst_ids()


def test_ids_at_or_above_next_sst_id_are_never_deleted():
    """An SST named from ids this writer never reserved belongs to another writer."""
    inner = MemoryObjectStore()
    with HummockStorage.open(inner, NOW) as db:
        _fill(db, [1])
        foreign = db.version().next_sst_id + 5
        inner.upload(sst_object_path(foreign), b"another writer's SST")
        db.vacuum()
        assert inner.exists(sst_object_path(foreign))


def test_a_writer_whose_lock_was_taken_over_deletes_nothing():
    name = f"vac-{uuid.uuid4().hex[:8]}"
    db = HummockStorage.open(f"memory://{name}", NOW)
    try:
        _fill(db, range(1, 4))
        db.ingest_batch(1, [(b"orphan", b"1")], 9 * E)
        db.sync(9 * E)                                  # an orphan-to-be
        db._staging.clear()                             # forgotten, as after a lost task
        db._unsettled_ids.clear()
        before = _sst_ids(MemoryObjectStore.named(name))
        rival = WriterLock.acquire(MemoryObjectStore.named(name), "rival", force=True)
        with pytest.raises(ConcurrentWriterError):
            db.vacuum()
        assert _sst_ids(MemoryObjectStore.named(name)) == before
        rival.release()
    finally:
        db.close()


def test_a_writer_behind_the_manifest_head_deletes_nothing():
    """Another writer committed past this one's version: fenced, even with a live lock."""
    name = f"vac-{uuid.uuid4().hex[:8]}"
    db = HummockStorage.open(f"memory://{name}", NOW)
    try:
        _fill(db, range(1, 4))
        db.ingest_batch(1, [(b"orphan", b"1")], 9 * E)
        db.sync(9 * E)                                  # garbage to be...
        db._staging.clear()
        db._unsettled_ids.clear()
        rival = Manifest.open(MemoryObjectStore.named(name))
        rival.commit(VersionDelta.reserve_sst_ids(rival.current, 4))   # ...but someone moved on
        before = _sst_ids(MemoryObjectStore.named(name))
        with pytest.raises(ConcurrentWriterError):
            db.vacuum()
        assert _sst_ids(MemoryObjectStore.named(name)) == before
    finally:
        db.close()


def test_a_reader_lease_pins_its_version_across_compaction_and_vacuum(tmp_path):
    path = str(tmp_path / "db")
    writer = HummockStorage.open(path, NOW)
    try:
        _fill(writer, range(1, 5))
        reader = HummockStorage.open(path, NOW, read_only=True)
        expected = list(reader.iter(1, 4 * E))
        assert live_lease_floor(writer._store) == reader.version().id
        writer.compact_all()
        writer.vacuum()
        reader._block_cache.clear()
        reader._meta_cache.clear()
        reader._readers.clear()
        reader._set_version(reader.version())          # forget open SST handles: re-read all
        assert list(reader.iter(1, 4 * E)) == expected  # the lease kept its SSTs
        old = reader.version().sst_ids()
        reader.close()                                  # lease deleted
        assert writer.vacuum() >= len(old - writer.version().sst_ids())
        assert _sst_ids(writer._store) == writer.version().sst_ids()
    finally:
        writer.close()


def test_a_reader_without_a_live_lease_gets_a_refresh_request(tmp_path):
    path = str(tmp_path / "db")
    writer = HummockStorage.open(path, NOW)
    try:
        _fill(writer, range(1, 5))
        reader = HummockStorage.open(path, NOW, read_only=True)
        reader._lease.close()                           # the reader stopped renewing: expired
        writer.compact_all()
        writer.vacuum()
        with pytest.raises(VersionExpiredError, match="refresh"):
            list(reader.iter(1, 4 * E))
        reader.refresh()
        assert len(list(reader.iter(1, 4 * E))) == 300
        reader.close()
    finally:
        writer.close()


def test_expired_and_damaged_leases():
    store = MemoryObjectStore()
    now = datetime.datetime.now(datetime.timezone.utc)
    assert live_lease_floor(store, now) is None
    store.upload(LEASE_PREFIX + "reader-a", b'{"version_id": 7, "ttl_s": 60}')
    store.upload(LEASE_PREFIX + "reader-b", b'{"version_id": 3, "ttl_s": 60}')
    assert live_lease_floor(store, now) == 3
    assert live_lease_floor(store, now + datetime.timedelta(seconds=61)) is None   # both expired
    assert store.exists(LEASE_PREFIX + "reader-a")
    live_lease_floor(store, now + datetime.timedelta(seconds=601))                  # long dead
    assert not store.list(LEASE_PREFIX)
    store.upload(LEASE_PREFIX + "reader-c", b"{not json")
    assert live_lease_floor(store, now) == 0    # unreadable: pins everything, for safety


def test_writer_open_removes_old_temp_files_only(tmp_path):
    path = tmp_path / "db"
    with HummockStorage.open(str(path), NOW) as db:
        _fill(db, [1])
    (path / "sst").mkdir(exist_ok=True)
    old, young = path / "sst" / ".tmp-old", path / "sst" / ".tmp-young"
    old.write_bytes(b"x" * 1024)
    young.write_bytes(b"y")
    past = time.time() - 7200
    os.utime(old, (past, past))
    with HummockStorage.open(str(path), NOW.replace(vacuum_min_age_s=3600)):
        pass
    assert not old.exists() and young.exists()


def test_options_validation_of_the_grace():
    with pytest.raises(ValueError, match="vacuum_min_age_s"):
        StorageOptions(vacuum_min_age_s=1.0, reader_lease_s=60.0)
    with pytest.raises(ValueError, match="reader_lease_s"):
        StorageOptions(reader_lease_s=0)
    StorageOptions(vacuum_min_age_s=0, reader_lease_s=60.0)


def test_local_temp_cleanup_helper_counts(tmp_path):
    store = LocalObjectStore(tmp_path / "objects")
    (tmp_path / "objects" / ".tmp-x").write_bytes(b"1")
    assert store.cleanup_temp(older_than_seconds=3600) == 0
    assert store.cleanup_temp() == 1


def test_a_writer_clock_far_ahead_does_not_expire_leases_on_s3(s3_server, monkeypatch):
    """Ages are measured on the store's clock (S3: the service's Date header), so a writer whose
    own clock runs 700 s ahead neither sees a live reader lease as expired nor a young object
    as old."""
    import hummock.object_store.base as base
    from s3_server import CREDENTIALS, REGION

    first = s3_server.new_store()
    url = f"s3://{first.bucket}/{first.prefix}?endpoint={s3_server.endpoint_url}&region={REGION}"
    options = NOW.replace(vacuum_min_age_s=30.0, reader_lease_s=60.0,
                          s3_access_key_id=CREDENTIALS["access_key_id"],
                          s3_secret_access_key=CREDENTIALS["secret_access_key"])
    with HummockStorage.open(url, options) as writer:
        _fill(writer, range(1, 5))
        reader = HummockStorage.open(url, options, read_only=True)

        real = datetime.datetime

        class Ahead(real):
            @classmethod
            def now(cls, tz=None):
                return real.now(tz) + datetime.timedelta(seconds=700)
        import types
        skewed = types.SimpleNamespace(datetime=Ahead, timezone=datetime.timezone,
                                       timedelta=datetime.timedelta)
        import hummock.leases as leases
        import hummock.storage as storage
        for module in (base, leases, storage):             # this process's clock, as hummock sees it
            if hasattr(module, "datetime"):
                monkeypatch.setattr(module, "datetime", skewed)
        assert base.ObjectStore.now(writer._store) - real.now(datetime.timezone.utc) > datetime.timedelta(seconds=600)
        writer.compact_all()
        writer._retired = {i: (v, t - 3600) for i, (v, t) in writer._retired.items()}  # left long ago
        assert writer.vacuum() == 0      # young by the service's clock, and leased
        monkeypatch.undo()
        reader._block_cache.clear()
        reader._meta_cache.clear()
        reader._readers.clear()
        reader._set_version(reader.version())
        assert len(list(reader.iter(1, 4 * E))) == 300
        reader.close()
    first.close()
    s3_server.drop_bucket(first.bucket)
