"""Job pins and VersionReader (hummock/pinned_read.py): another process reads one pinned version.

A version pinned by a job pin reads exactly as it did (every epoch it can serve) after the
writer committed, compacted everything and vacuumed with no minimum age; without the pin the
same vacuum deletes its SSTs and the read raises VersionExpiredError (the test can fail); an
expired pin no longer protects; reads outside the version's epochs are refused. Both modes.
"""

import datetime
import json

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.errors import ExpiredEpochError, InvalidArgumentError
from hummock.leases import VersionExpiredError, live_lease_floor
from hummock.pinned_read import VersionReader, pin_version
from hummock.version_codec import encode_version

EPOCH = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=4096, block_size=512,
                         retention_seconds=3600)
KEYS = [b"k%03d" % i for i in range(200)]


def _commit(db, n):
    db.ingest_batch(1, [(k, b"e%d" % n) for k in KEYS], n * EPOCH)
    db.checkpoint(n * EPOCH)


def _pinned_version(url, ttl):
    with HummockStorage.open(url, OPTIONS, read_only=True) as reader:
        version = reader.version()
        if ttl:
            pin_version(reader._store, version.id, ttl)
        return version


@pytest.mark.parametrize("pinned", [True, False])
def test_a_pinned_version_reads_the_same_after_compaction_and_vacuum(tmp_path, pinned):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS) as db:
        for n in (1, 2, 3):
            _commit(db, n)
        version = _pinned_version(url, 600 if pinned else 0)
        for n in (4, 5):
            _commit(db, n)
        db.compact_all()
        db.vacuum()
        reader = VersionReader(db._store, encode_version(version))
        if pinned:
            for n in (1, 2, 3):
                assert list(reader.iter(1, n * EPOCH)) == [(k, b"e%d" % n) for k in KEYS]
            assert reader.get(1, KEYS[3], 2 * EPOCH) == b"e2"
        else:
            with pytest.raises(VersionExpiredError):
                list(reader.iter(1, 3 * EPOCH))
        with pytest.raises(InvalidArgumentError):
            reader.iter(1, 4 * EPOCH)


def test_a_pin_is_a_lease_that_expires_by_itself(tmp_path):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS) as db:
        _commit(db, 1)
        path = pin_version(db._store, db.version().id, 0.001)
        body = json.loads(db._store.read(path))
        assert body["version_id"] == db.version().id and body["job"] is True
        written = next(m.last_modified for m in db._store.list() if m.path == path)   # the store's clock
        assert live_lease_floor(db._store, written, remove_dead=False) == db.version().id   # within its TTL
        later = written + datetime.timedelta(seconds=1)
        assert live_lease_floor(db._store, later, remove_dead=False) is None   # expired by itself


def test_reads_below_the_safe_epoch_are_refused(tmp_path):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS.replace(retention_seconds=0)) as db:
        for n in (1, 2):
            _commit(db, n)
        db.compact_all()
        reader = VersionReader(db._store, db.version())
        with pytest.raises(ExpiredEpochError):
            reader.iter(1, EPOCH)
        assert dict(reader.iter(1, 2 * EPOCH))[KEYS[0]] == b"e2"
