"""Clear, typed errors for what used to leak a raw exception or was accepted wrongly (issue 10
part 7, engine side). Each call raises a HummockError naming the problem and changes nothing."""

import errno
import os

import pytest

from hummock import HummockError, HummockStorage, InvalidArgumentError, StorageOptions
from hummock.object_store.base import ObjectStoreError

E = 1 << 16


@pytest.fixture
def db():
    with HummockStorage.open("memory://", StorageOptions(compactor="none")) as store:
        yield store


@pytest.mark.parametrize("batch", [5, None, 3.5, object()])
def test_non_iterable_batch(db, batch):
    with pytest.raises(InvalidArgumentError, match="iterable of \\(key, value\\) pairs"):
        db.ingest_batch(1, batch, E)
    assert db.stats()["imms"] == 0


@pytest.mark.parametrize("keys", [5, None, object()])
def test_non_iterable_key_list(db, keys):
    with pytest.raises(InvalidArgumentError, match="keys must be an iterable"):
        db.multi_get(1, keys, E)


def test_options_must_be_storage_options():
    with pytest.raises(InvalidArgumentError, match="StorageOptions"):
        HummockStorage.open("memory://", {"compactor": "none"})


@pytest.mark.parametrize("call", ["seal_epoch", "sync", "commit_epoch", "checkpoint"])
def test_epochs_with_spill_bits_are_refused(db, call):
    db.ingest_batch(1, [(b"a", b"1")], E)
    with pytest.raises(InvalidArgumentError, match="low 16 bits"):
        getattr(db, call)(E + 3)
    assert db.max_committed_epoch == 0
    db.checkpoint(E)
    assert db.get(1, b"a", E) == b"1"


def test_writer_on_a_read_only_file_system(tmp_path, monkeypatch):
    path = str(tmp_path / "db")
    with HummockStorage.open(path, StorageOptions(compactor="none")) as store:
        store.ingest_batch(1, [(b"a", b"1")], E)
        store.checkpoint(E)
    import hummock.manifest as manifest
    real_open = os.open

    def read_only_fs(file, flags, *args):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", file)
        return real_open(file, flags, *args)
    monkeypatch.setattr(manifest.os, "open", read_only_fs)
    with pytest.raises(ObjectStoreError, match="read_only=True") as info:
        HummockStorage.open(path, StorageOptions(compactor="none"))
    assert isinstance(info.value, HummockError)
    monkeypatch.undo()
    with HummockStorage.open(path, StorageOptions(compactor="none"), read_only=True) as reader:
        assert reader.get(1, b"a", E) == b"1"


def test_read_only_open_creates_nothing(tmp_path):
    from hummock.manifest import ManifestNotFoundError
    missing = tmp_path / "nowhere"
    for url in (str(missing), f"file://{missing}"):
        with pytest.raises(ManifestNotFoundError, match="read-only"):
            HummockStorage.open(url, read_only=True)
    assert not missing.exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestNotFoundError):
        HummockStorage.open(str(tmp_path / "empty"), read_only=True)
    assert list((tmp_path / "empty").iterdir()) == []
