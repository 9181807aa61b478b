"""Review of the session's commits since 1399e5f (session 38): regressions found by review.

Deferred durability (dd15782, hummock/object_store/local.py): a flush SST is published unsynced
and fsynced at the next ``upload_if_absent`` (the barrier). On Linux an fsync that fails with
EIO reports the writeback error once: the failed pages are marked clean, and a later fsync of
the same file (another descriptor included) returns success although the data never reached the
disk (the 2018 "fsyncgate"; PostgreSQL now treats a failed fsync as fatal). So a barrier that
failed on a deferred file must never succeed later for that file: the manifest retries the
delta's upload, and a retry that "succeeded" would make durable a delta naming an SST whose
bytes may be lost. (Before dd15782 the SST's own fsync failed its flush, and no delta named it.)
"""

import errno
import os

import pytest

from hummock.object_store import LocalObjectStore, ObjectStoreError


def _deferred_sst(store, name="sst/1.sst"):
    with store.deferred_durability():
        with store.streaming_upload(name) as up:
            up.write(b"sst bytes")
    return os.path.join(store.root, *name.split("/"))


def _fail_fsync_once(monkeypatch, failing):
    """os.fsync raises EIO the first time it syncs ``failing`` and succeeds afterwards -- as
    Linux's does once the writeback error was reported (the data is lost all the same)."""
    real = os.fsync
    failed = []

    def fsync(fd):
        if not failed and os.readlink(f"/proc/self/fd/{fd}") == failing:
            failed.append(fd)
            raise OSError(errno.EIO, "injected I/O error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return failed


def test_a_deferred_file_whose_fsync_failed_is_never_declared_durable(tmp_path, monkeypatch):
    store = LocalObjectStore(tmp_path)
    sst = _deferred_sst(store)
    failed = _fail_fsync_once(monkeypatch, sst)
    with pytest.raises(ObjectStoreError, match="injected"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert failed and not store.exists("manifest/delta-1")
    # the manifest retries the same delta: its fsync of the SST would now "succeed"
    with pytest.raises(ObjectStoreError, match="fsync"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert not store.exists("manifest/delta-1")


def test_a_failed_directory_fsync_is_never_declared_durable_either(tmp_path, monkeypatch):
    store = LocalObjectStore(tmp_path)
    sst = _deferred_sst(store)
    _fail_fsync_once(monkeypatch, os.path.dirname(sst))   # the rename may be lost
    with pytest.raises(ObjectStoreError, match="injected"):
        store.upload_if_absent("manifest/delta-1", b"d")
    with pytest.raises(ObjectStoreError, match="fsync"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert not store.exists("manifest/delta-1")


def test_a_barrier_that_failed_on_its_own_temp_file_only_is_retried(tmp_path, monkeypatch):
    """The delta's own temporary file is written anew by the retry: that failure is not sticky,
    and the deferred SST synced by the failed barrier stays owed until a barrier succeeds."""
    store = LocalObjectStore(tmp_path)
    _deferred_sst(store)
    real = os.fsync
    failed = []

    def fsync(fd):
        if not failed and os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".tmp-"):
            failed.append(fd)
            raise OSError(errno.EIO, "injected I/O error")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(ObjectStoreError, match="injected"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    assert store._unsynced == set()


# --- d2a8a8c: the imm lists check_batch/check_columns return are untracked by the cycle collector


class _SelfBytes(bytes):
    """A bytes subclass whose ``bytes()`` is itself: ``bytes(x)`` then returns the subclass
    instance, which keeps a ``__dict__`` (so it can reference the list holding it)."""

    def __bytes__(self):
        return self


class _Marker:
    pass


@pytest.mark.parametrize("where", ["key", "value"])
@pytest.mark.parametrize("columns", [False, True])
def test_imm_lists_hold_exact_bytes_and_stay_collectable(where, columns):
    """The (native: untracked) lists hold exact bytes and None only, whatever bytes-like item
    came in: an untracked list is never traversed, so a cycle through it (list -> a subclass
    item -> its __dict__ -> list) would never be collected."""
    import gc
    import weakref

    from hummock.shared_buffer import KeyValueColumns, check_batch

    item = _SelfBytes(b"k")
    pair = (item, b"v") if where == "key" else (b"k", item)
    batch = KeyValueColumns([pair[0]], [pair[1]]) if columns else [pair]
    keys, values, _ = check_batch(batch)
    held = keys if where == "key" else values
    assert type(held[0]) is bytes and held[0] == b"k"
    marker = _Marker()
    item.cycle = (held, marker)   # the caller's item may reference the list: no cycle through it
    alive = weakref.ref(marker)
    del item, pair, batch, keys, values, held, marker
    gc.collect()
    assert alive() is None


def test_a_bytes_subclass_key_does_not_poison_the_store(tmp_path):
    """ingest_batch accepted a bytes subclass key unconverted (``bytes(x)`` returned it), and
    every later flush then failed in merge_runs ("run keys must be bytes"): no checkpoint of
    the store ever succeeded again."""
    from hummock import HummockStorage
    from hummock.key import new_epoch

    with HummockStorage.open(str(tmp_path / "db")) as store:
        epoch = new_epoch()
        store.ingest_batch(3, [(_SelfBytes(b"k1"), _SelfBytes(b"v1")), (b"k2", b"v2")], epoch)
        store.checkpoint(epoch)
        assert store.get(3, b"k1", epoch) == b"v1" and store.get(3, b"k2", epoch) == b"v2"
