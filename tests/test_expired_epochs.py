"""Reads at old epochs are exact or refused (issue 10 part 4): ``min_readable_epoch``,
``ExpiredEpochError``, snapshots and the ``retention_seconds`` window; persisted across reopen
and seen by read-only openers."""

import time

import pytest

from hummock import ExpiredEpochError, HummockError, HummockStorage, StorageOptions
from hummock.version import HummockVersion, VersionDelta
from hummock.version_codec import decode_version, encode_version
from kv_model import KvModel

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, block_size=512, target_sst_size=4096)


def _write_history(db, model, epochs=range(1, 6)):
    """Every epoch overwrites k0..k9 and deletes the key written two epochs before."""
    for i in epochs:
        batch = [(b"k%d" % j, b"v%d-%d" % (i, j)) for j in range(10)]
        batch += [(b"x%d" % i, b"born-%d" % i)]
        if i >= 3:
            batch.append((b"x%d" % (i - 2), None))
        batch.sort()
        db.ingest_batch(1, batch, i * E)
        model.ingest(1, batch, i * E)
        db.checkpoint(i * E)
        model.commit(i * E)


def test_old_epochs_are_exact_until_compaction_then_refused(tmp_path):
    model = KvModel()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as db:
        _write_history(db, model)
        assert db.min_readable_epoch == 0
        for i in range(1, 6):
            assert list(db.iter(1, i * E)) == model.items(1, i * E)
        db.compact_all()
        assert db.min_readable_epoch == 5 * E
        for read in (lambda e: db.get(1, b"k1", e), lambda e: db.multi_get(1, [b"k1"], e),
                     lambda e: list(db.iter(1, e)), lambda e: db.snapshot(e)):
            with pytest.raises(ExpiredEpochError) as info:
                read(4 * E)
            assert info.value.epoch == 4 * E and info.value.min_readable_epoch == 5 * E
            assert isinstance(info.value, HummockError) and "min_readable_epoch" in str(info.value)
        assert list(db.iter(1, 5 * E)) == model.items(1, 5 * E)
        assert db.get(1, b"k3", 2**64 - 1) == b"v5-3"
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as db:     # persisted in the version
        assert db.min_readable_epoch == 5 * E
        with pytest.raises(ExpiredEpochError):
            db.get(1, b"k1", 3 * E)
        with HummockStorage.open(str(tmp_path / "db"), OPTIONS, read_only=True) as reader:
            assert reader.min_readable_epoch == 5 * E
            with pytest.raises(ExpiredEpochError):
                list(reader.iter(1, 2 * E))


def test_a_snapshot_holds_the_floor_at_its_epoch(tmp_path):
    model = KvModel()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as db:
        _write_history(db, model, range(1, 4))
        with db.snapshot(2 * E) as snap:
            _write_history(db, model, range(4, 7))
            db.compact_all()
            assert db.min_readable_epoch == 2 * E
            for i in range(2, 7):
                assert list(db.iter(1, i * E)) == model.items(1, i * E)
            assert list(snap.iter(1)) == model.items(1, 2 * E)
            with pytest.raises(ExpiredEpochError):
                db.get(1, b"k1", E)
        db.compact_all()                      # nothing left to merge: the floor stays
        assert db.min_readable_epoch == 2 * E
        assert list(db.iter(1, 3 * E)) == model.items(1, 3 * E)
        _write_history(db, model, [7])
        db.compact_all()                      # released: the next merge drops old versions
        assert db.min_readable_epoch == 7 * E


def test_retention_window_keeps_recent_epochs_exact(tmp_path):
    model = KvModel()
    options = OPTIONS.replace(retention_seconds=3600)
    with HummockStorage.open(str(tmp_path / "db"), options) as db:
        _write_history(db, model)
        db.compact_all()
        assert db.min_readable_epoch == 0        # nothing is older than an hour
        for i in range(1, 6):
            assert list(db.iter(1, i * E)) == model.items(1, i * E)


def test_retention_window_expires_what_fell_out_of_it(tmp_path):
    model = KvModel()
    options = OPTIONS.replace(retention_seconds=0.5)
    with HummockStorage.open(str(tmp_path / "db"), options) as db:
        _write_history(db, model, range(1, 4))
        time.sleep(0.6)                          # epochs 1..3 leave the window
        _write_history(db, model, range(4, 7))
        db.compact_all()
        floor = db.min_readable_epoch
        assert 3 * E <= floor <= 4 * E           # the state at the window's start stays exact
        for i in range(1, 7):
            if i * E >= floor:
                assert list(db.iter(1, i * E)) == model.items(1, i * E)
            else:
                with pytest.raises(ExpiredEpochError):
                    list(db.iter(1, i * E))


def test_committed_epoch_at_maps_wall_clock_times_to_commits(tmp_path):
    """The commit log behind SQL time travel: a time sees the last commit at or before it."""
    model = KvModel()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(retention_seconds=3600)) as db:
        opened = time.time()
        assert db.committed_epoch_at(opened - 60) is None          # before the log: unknown
        times = []
        for i in range(1, 4):
            _write_history(db, model, [i])
            time.sleep(0.01)
            times.append(time.time())
            time.sleep(0.01)
        assert [db.committed_epoch_at(t) for t in times] == [E, 2 * E, 3 * E]
        assert db.committed_epoch_at(opened) in (None, 0)          # the epoch the store opened with
        assert db.committed_epoch_at(time.time() + 60) == 3 * E
        start, epoch = db.commit_log_start
        assert epoch == 0 and start <= opened + 0.05
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(retention_seconds=3600)) as db:
        assert db.commit_log_start[1] == 3 * E                      # reopened: the log starts at open
        assert db.committed_epoch_at(times[1]) is None


def test_version_safe_epoch_rules():
    version = HummockVersion.empty()
    commit = VersionDelta.commit(version, 5 * E, ())
    from hummock.version import apply
    v1 = apply(version, commit)
    assert v1.safe_epoch == 0
    import dataclasses
    with pytest.raises(ValueError, match="safe_epoch"):
        apply(v1, dataclasses.replace(VersionDelta.reserve_sst_ids(v1, 1), safe_epoch=E))
    with pytest.raises(ValueError, match="safe_epoch"):
        apply(version, dataclasses.replace(commit, safe_epoch=6 * E))
    again = decode_version(encode_version(dataclasses.replace(v1, safe_epoch=3 * E)))
    assert again.safe_epoch == 3 * E
    assert decode_version(encode_version(v1)).safe_epoch == 0


def test_commit_log_stays_bounded_without_a_retention_window(tmp_path, monkeypatch):
    """Without retention_seconds the commit log keeps only what time travel can still read:
    entries compaction made unreadable go, and at most COMMIT_LOG_LIMIT stay (it grew by one
    entry per commit for the life of the process)."""
    import hummock.storage as storage

    monkeypatch.setattr(storage, "COMMIT_LOG_LIMIT", 4)
    model = KvModel()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as db:
        _write_history(db, model, range(1, 9))
        assert [e for _, e in db._commit_times] == [5 * E, 6 * E, 7 * E, 8 * E]
        assert db.committed_epoch_at(time.time()) == 8 * E
        db.compact_all()                       # safe_epoch = 8E: older entries are unreadable
        _write_history(db, model, [9])
        assert [e for _, e in db._commit_times] == [8 * E, 9 * E]
        assert db.commit_log_start[1] == 8 * E
