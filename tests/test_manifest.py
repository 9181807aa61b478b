"""Tests of the persisted manifest and the writer lock (``hummock/manifest.py``).

Every manifest test takes the ``object_store`` fixture, so it runs on memory, local and S3
(moto). A fixed script of deltas (reserve / commit / compaction) gives reference versions; the
crash test fails the k-th store mutation (before or after it lands) for every k and checks that
reopening yields exactly the last version whose delta object exists. Then: rotation, corrupt
deltas and checkpoints, read-only refresh, racing writers, and the WriterLock on each backend
(local also across processes, since flock belongs to an open file description).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import encode_full_key
from hummock.manifest import (
    LOCK_OBJECT_PATH, ConcurrentWriterError, Manifest, ManifestNotFoundError, WriterLock,
    checkpoint_path, delta_path,
)
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.object_store.base import ObjectStoreError
from hummock.sstable.meta import SstableInfo
from hummock.version import HummockVersion, VersionConflictError, VersionDelta, apply

EPOCH = 1 << 16


def sst(sst_id: int, lo: int, hi: int) -> SstableInfo:
    return SstableInfo(sst_id, encode_full_key(1, b"%03d" % lo, EPOCH), encode_full_key(1, b"%03d" % hi, EPOCH),
                       1000, 900, EPOCH, EPOCH, 3, 0, (1,))


def script(n: int) -> tuple[list[VersionDelta], list[HummockVersion]]:
    """n deltas (reserve, commits, L0->L1 compactions) and the versions 0..n they produce."""
    versions, deltas, next_id, epoch = [HummockVersion.empty()], [], 1, 0
    for i in range(n):
        v = versions[-1]
        if v.next_sst_id - next_id < 2:
            delta = VersionDelta.reserve_sst_ids(v, 5)
        elif i % 5 == 4 and v.l0:
            inputs = [s.sst_id for s in v.all_ssts() if v.level_of(s.sst_id) in (0, 1)]
            delta = VersionDelta.compaction(v, inputs, {1: [sst(next_id, 0, 99)]})
            next_id += 1
        else:
            epoch += EPOCH
            delta = VersionDelta.commit(v, epoch, [sst(next_id, i, i + 10), sst(next_id + 1, i + 5, i + 20)])
            next_id += 2
        deltas.append(delta)
        versions.append(apply(v, delta))
    return deltas, versions


def manifest_names(store) -> list[str]:
    return [m.path for m in store.list("manifest/")]


def corrupt(store, path: str, position: int = -3) -> None:
    data = bytearray(store.read(path))
    data[position] ^= 0xFF
    store.upload(path, bytes(data))  # tests may overwrite; the manifest never does


# --- commit, reopen, rotation -------------------------------------------------------------------

def test_commit_and_reopen(object_store):
    deltas, versions = script(12)
    manifest = Manifest.open(object_store)
    assert manifest.current == HummockVersion.empty() and manifest_names(object_store) == [checkpoint_path(0)]
    for delta, expected in zip(deltas, versions[1:]):
        assert manifest.commit(delta) == expected
    assert manifest.current == versions[-1]
    reopened = Manifest.open(object_store, create=False)
    assert reopened.current == versions[-1]
    assert reopened.referenced_sst_ids() == versions[-1].sst_ids()
    assert manifest_names(object_store) == [checkpoint_path(0)] + [delta_path(i) for i in range(1, 13)]


def test_checkpoint_rotation(object_store):
    deltas, versions = script(20)
    manifest = Manifest.open(object_store, checkpoint_interval=4)
    for delta in deltas:
        manifest.commit(delta)
    # checkpoint 20 written; checkpoints < 16 and deltas <= 16 deleted; 16 + its chain stay
    assert manifest_names(object_store) == [checkpoint_path(0), checkpoint_path(16), checkpoint_path(20)] + [
        delta_path(i) for i in range(17, 21)]
    assert manifest.last_checkpoint_id == 20
    assert Manifest.open(object_store).current == versions[-1]
    manifest.checkpoint()  # forcing one at the same id is a no-op
    assert Manifest.open(object_store).current == versions[-1]


def test_background_rotation_deletes_the_same_objects_off_the_commit(object_store):
    """background_rotation (the engine's writer): the deletes run on the rotation thread, the
    same objects as a rotation in line; close() waits for them; a reopen sees the same."""
    deltas, versions = script(20)
    manifest = Manifest.open(object_store, checkpoint_interval=4)
    manifest.background_rotation = True
    deleting, real, release = [], object_store.delete, threading.Event()

    def delete(paths):
        deleting.append(threading.current_thread().name)
        release.wait(10)   # held: the commits go on without waiting for it
        real(paths)
    object_store.delete = delete
    try:
        for delta in deltas:
            manifest.commit(delta)
        assert manifest.current == versions[-1]
        release.set()
        manifest.close()
    finally:
        del object_store.delete
    assert deleting and all(name.startswith("hummock-rotation") for name in deleting)
    assert manifest_names(object_store) == [checkpoint_path(0), checkpoint_path(16), checkpoint_path(20)] + [
        delta_path(i) for i in range(17, 21)]
    assert Manifest.open(object_store).current == versions[-1]
    manifest.close()   # idempotent


def test_conflicting_delta_writes_nothing(object_store):
    deltas, versions = script(3)
    manifest = Manifest.open(object_store)
    for delta in deltas:
        manifest.commit(delta)
    before = manifest_names(object_store)
    with pytest.raises(VersionConflictError):
        manifest.commit(deltas[1])
    with pytest.raises(InvalidArgumentError, match="strictly increase"):
        manifest.commit(VersionDelta(3, 4, 0, manifest.current.next_sst_id, deltas[1].new_sub_level))
    assert manifest_names(object_store) == before and manifest.current == versions[3]


def test_reserve_sst_ids_persists(object_store):
    manifest = Manifest.open(object_store)
    assert manifest.reserve_sst_ids(10) == range(1, 11)
    assert manifest.reserve_sst_ids(5) == range(11, 16)
    assert Manifest.open(object_store).current.next_sst_id == 16


def test_empty_store_read_only_and_create_false(object_store):
    for kwargs in ({"create": False}, {"read_only": True}):
        with pytest.raises(ManifestNotFoundError):
            Manifest.open(object_store, **kwargs)
    assert object_store.list() == []
    Manifest.open(object_store, num_levels=3)
    reader = Manifest.open(object_store, read_only=True)
    assert reader.current.num_levels == 3
    with pytest.raises(InvalidArgumentError, match="read-only"):
        reader.commit(VersionDelta.reserve_sst_ids(reader.current, 1))
    with pytest.raises(InvalidArgumentError):
        Manifest.open(object_store, checkpoint_interval=0)


def test_lost_manifest_with_ssts_is_not_recreated(object_store):
    object_store.upload("sst/00000000000000000001.sst", b"an SST")
    with pytest.raises(CorruptionError, match="SST objects but no manifest"):
        Manifest.open(object_store)
    assert manifest_names(object_store) == []


# --- crashes ----------------------------------------------------------------------------------

class Crash(BaseException):
    """The process dies here: nothing after it runs (not even `except Exception`)."""


def crash_at(store, k: int, after: bool) -> list[int]:
    """Make the k-th mutation (upload_if_absent or delete) of ``store`` crash, before or after
    it lands; returns the live mutation counter."""
    count = [0]
    real = {"upload_if_absent": store.upload_if_absent, "delete": store.delete}

    def wrap(name):
        def call(*args):
            count[0] += 1
            if count[0] == k and not after:
                raise Crash(name)
            result = real[name](*args)
            if count[0] == k:
                raise Crash(name)
            return result
        return call
    store.upload_if_absent, store.delete = wrap("upload_if_absent"), wrap("delete")
    return count


@pytest.mark.parametrize("after", [False, True], ids=["before-write", "after-write"])
def test_crash_at_every_mutation(object_store, after):
    deltas, versions = script(14)
    k, clean_runs = 0, 0
    while clean_runs == 0:
        k += 1
        object_store.delete(manifest_names(object_store))
        count = crash_at(object_store, k, after)
        try:
            manifest = Manifest.open(object_store, checkpoint_interval=3)
            for delta in deltas:
                manifest.commit(delta)
            clean_runs += 1
        except Crash:
            pass
        del object_store.upload_if_absent, object_store.delete  # back to the class's methods
        names = manifest_names(object_store)
        committed = max((int(n.rsplit("-", 1)[1]) for n in names if "delta-" in n), default=0)
        if not names:
            with pytest.raises(ManifestNotFoundError):
                Manifest.open(object_store, create=False)
            continue
        reopened = Manifest.open(object_store, create=False)
        assert reopened.current == versions[committed], f"crash at mutation {k}"
        reopened.current._check()
    assert k > 20 and count[0] == k - 1  # every mutation of the full run was a crash point once


def test_failed_upload_outcome_is_learned_by_refresh(object_store):
    deltas, versions = script(4)
    manifest = Manifest.open(object_store)
    manifest.commit(deltas[0])
    real = object_store.upload_if_absent

    def lost_reply(path, data):
        real(path, data)
        raise ObjectStoreError("injected: reply lost", path=path)
    object_store.upload_if_absent = lost_reply
    with pytest.raises(ObjectStoreError, match="reply lost"):
        manifest.commit(deltas[1])
    del object_store.upload_if_absent
    assert manifest.current == versions[1]  # not known to have landed...
    assert manifest.refresh() == versions[2]  # ...until the manifest looks
    manifest.commit(deltas[2])
    assert Manifest.open(object_store).current == versions[3]


# --- corruption -------------------------------------------------------------------------------

def test_corrupt_delta_raises_naming_it(object_store):
    deltas, _ = script(6)
    manifest = Manifest.open(object_store)
    for delta in deltas:
        manifest.commit(delta)
    good = object_store.read(delta_path(4))
    corrupt(object_store, delta_path(4))
    with pytest.raises(CorruptionError, match="checksum") as info:
        Manifest.open(object_store)
    assert info.value.object == delta_path(4)
    object_store.upload(delta_path(4), good[:30])
    with pytest.raises(CorruptionError) as info:
        Manifest.open(object_store)
    assert info.value.object == delta_path(4)
    object_store.upload(delta_path(4), object_store.read(delta_path(3)))  # decodes, does not apply
    with pytest.raises(CorruptionError, match="does not apply") as info:
        Manifest.open(object_store)
    assert info.value.object == delta_path(4)
    object_store.upload(delta_path(4), good)
    object_store.delete(delta_path(3))  # a hole with later deltas: a lost commit, not the end
    with pytest.raises(CorruptionError, match="missing") as info:
        Manifest.open(object_store)
    assert info.value.object == delta_path(3)


def test_corrupt_newest_checkpoint_is_skipped_when_provably_safe(object_store, caplog):
    deltas, versions = script(10)
    manifest = Manifest.open(object_store, checkpoint_interval=4)
    for delta in deltas:
        manifest.commit(delta)
    assert checkpoint_path(4) in manifest_names(object_store) and checkpoint_path(8) in manifest_names(object_store)
    corrupt(object_store, checkpoint_path(8))
    with caplog.at_level(logging.WARNING, logger="hummock.manifest"):
        recovered = Manifest.open(object_store, checkpoint_interval=4)
    assert recovered.current == versions[10]
    assert any("corrupt manifest checkpoint" in r.getMessage() for r in caplog.records)
    more, more_versions = script(20)
    for delta in more[10:]:  # later rotations retire the corrupt checkpoint
        recovered.commit(delta)
    assert checkpoint_path(8) not in manifest_names(object_store)
    assert Manifest.open(object_store).current == more_versions[20]


def test_corrupt_checkpoint_without_a_safe_fallback_raises(object_store):
    deltas, _ = script(10)
    manifest = Manifest.open(object_store, checkpoint_interval=4)
    for delta in deltas:
        manifest.commit(delta)
    corrupt(object_store, checkpoint_path(8))
    corrupt(object_store, checkpoint_path(4))
    with pytest.raises(CorruptionError) as info:
        Manifest.open(object_store)
    assert info.value.object == checkpoint_path(8)
    object_store.upload(checkpoint_path(4), b"")  # unreadable as well
    with pytest.raises(CorruptionError):
        Manifest.open(object_store)


def test_only_checkpoint_corrupt_raises(object_store):
    deltas, _ = script(3)
    manifest = Manifest.open(object_store)
    for delta in deltas:
        manifest.commit(delta)
    corrupt(object_store, checkpoint_path(0), position=5)
    with pytest.raises(CorruptionError, match="magic") as info:
        Manifest.open(object_store)
    assert info.value.object == checkpoint_path(0)


# --- readers and racing writers ---------------------------------------------------------------

def test_refresh_from_a_read_only_handle(object_store):
    deltas, versions = script(30)
    writer = Manifest.open(object_store, checkpoint_interval=4)
    for delta in deltas[:3]:
        writer.commit(delta)
    reader = Manifest.open(object_store, read_only=True)
    assert reader.current == versions[3]
    assert reader.refresh() == versions[3]  # nothing new
    for delta in deltas[3:6]:
        writer.commit(delta)
    assert reader.refresh() == versions[6]
    for delta in deltas[6:30]:  # the reader lags behind rotations: its next deltas are gone
        writer.commit(delta)
    assert delta_path(7) not in manifest_names(object_store)
    assert reader.refresh() == versions[30] == reader.current


def test_second_writer_loses_the_race(object_store):
    deltas, versions = script(4)
    first = Manifest.open(object_store)
    second = Manifest.open(object_store)
    first.commit(deltas[0])
    rival = VersionDelta.reserve_sst_ids(second.current, 99)  # built on version 0, like deltas[0]
    with pytest.raises(ConcurrentWriterError, match="another writer committed version 1"):
        second.commit(rival)
    assert Manifest.open(object_store).current == versions[1]
    for retry in (rival, deltas[1]):   # a fenced handle never writes again, even a fitting delta
        with pytest.raises(ConcurrentWriterError, match="fenced"):
            second.commit(retry)
    with pytest.raises(ConcurrentWriterError, match="fenced"):
        second.reserve_sst_ids(4)
    assert second.fenced and not first.fenced
    third = Manifest.open(object_store)   # a new handle (a reopen) writes again
    third.commit(deltas[1])
    with pytest.raises(ConcurrentWriterError):
        first.commit(deltas[1])
    assert first.refresh() == versions[2]


def test_laggard_recreating_a_rotated_delta_is_fenced(object_store):
    deltas, versions = script(12)
    laggard = Manifest.open(object_store)
    writer = Manifest.open(object_store, checkpoint_interval=4)
    for delta in deltas:
        writer.commit(delta)
    assert delta_path(1) not in manifest_names(object_store)  # rotated away
    with pytest.raises(ConcurrentWriterError, match="void"):
        laggard.commit(deltas[0])  # re-creates delta-1, then sees two newer checkpoints
    assert Manifest.open(object_store).current == versions[12]
    assert laggard.refresh() == versions[12]


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_racing_writers_never_fork_the_history(kind, tmp_path):
    """Writers in threads commit reservations as fast as they can, rotating every 5 versions (so
    laggards try to re-create deleted deltas): no version is acknowledged twice, and every
    acknowledged version extends the previous acknowledged one."""
    store = MemoryObjectStore() if kind == "memory" else LocalObjectStore(tmp_path)
    Manifest.open(store)
    wins: dict[int, list] = {}
    barrier = threading.Barrier(4)
    errors = []

    def writer(n: int) -> None:
        manifest = Manifest.open(store, checkpoint_interval=5)
        barrier.wait()
        for _ in range(15):
            try:
                version = manifest.commit(VersionDelta.reserve_sst_ids(manifest.current, n + 1))
                wins.setdefault(version.id, []).append((n, version))
            except (ConcurrentWriterError, VersionConflictError):
                manifest.refresh()
            except Exception as exc:  # reported below: a thread's exception is otherwise lost
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(len(w) == 1 for w in wins.values()), "a version was acknowledged twice"
    final = Manifest.open(store, create=False).current
    assert max(wins) <= final.id and len(wins) >= final.id - 2
    for v in wins:
        if v - 1 in wins:
            (_, before), (n, after) = wins[v - 1][0], wins[v][0]
            assert after.next_sst_id == before.next_sst_id + n + 1
    if final.id in wins:
        assert wins[final.id][0][1] == final


# --- the writer lock --------------------------------------------------------------------------

def test_writer_lock_excludes_a_second_writer(object_store):
    first = WriterLock.acquire(object_store, "engine-1")
    assert first.held and not first.lost
    with pytest.raises(ConcurrentWriterError, match="engine-1"):
        WriterLock.acquire(object_store, "engine-2")
    first.release()
    first.release()  # idempotent
    assert not first.held
    with pytest.raises(ConcurrentWriterError, match="released"):
        first.check()
    with WriterLock.acquire(object_store, "engine-2") as second:
        second.check()
        assert object_store.list("manifest/checkpoint") == []  # no manifest object is touched
    with WriterLock.acquire(object_store, "engine-3"):
        pass
    for bad in ("", None, "x" * 201):
        with pytest.raises(InvalidArgumentError):
            WriterLock.acquire(object_store, bad)


def test_memory_lock_is_per_table():
    name = "writer-lock-test"
    try:
        a, b = MemoryObjectStore.named(name), MemoryObjectStore.named(name)
        lock = WriterLock.acquire(a, "one")
        with pytest.raises(ConcurrentWriterError):
            WriterLock.acquire(b, "two")
        with WriterLock.acquire(MemoryObjectStore(), "private"):  # another table: independent
            pass
        taker = WriterLock.acquire(b, "two", force=True)
        assert lock.lost and not lock.held and taker.held
        with pytest.raises(ConcurrentWriterError, match="lost"):
            lock.check()
        lock.release()  # must not drop the new holder's registration
        with pytest.raises(ConcurrentWriterError):
            WriterLock.acquire(a, "three")
        taker.release()
    finally:
        MemoryObjectStore.drop_named(name)


HOLDER = textwrap.dedent("""
    import sys, time
    from hummock.manifest import WriterLock, ConcurrentWriterError
    from hummock.object_store import LocalObjectStore
    try:
        lock = WriterLock.acquire(LocalObjectStore(sys.argv[1]), "child")
    except ConcurrentWriterError as exc:
        print("refused:", exc, flush=True)
        sys.exit(3)
    print("locked", flush=True)
    if sys.argv[2] == "hold":
        time.sleep(60)
    lock.release()
""")


def run_child(root, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HOLDER, str(root), mode], capture_output=True,
                          text=True, timeout=60)


def test_local_lock_across_processes(tmp_path):
    store = LocalObjectStore(tmp_path)
    with WriterLock.acquire(store, "parent"):
        child = run_child(tmp_path, "release")
        assert child.returncode == 3 and "parent" in child.stdout
    assert run_child(tmp_path, "release").stdout.strip() == "locked"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "hold"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConcurrentWriterError, match="child"):
            WriterLock.acquire(store, "parent")
        with pytest.raises(ConcurrentWriterError):
            WriterLock.acquire(store, "parent", force=True)  # a live process's flock stands
    finally:
        holder.kill()  # the process dies: the kernel releases its lock
        holder.wait()
        holder.stdout.close()
    with WriterLock.acquire(store, "parent"):
        pass
    assert store.list() == [] and os.path.exists(store.lock_file_path())


@pytest.fixture
def s3_store(s3_server):
    store = s3_server.new_store()
    yield store
    store.close()
    s3_server.drop_bucket(store.bucket)


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_s3_lock_object_heartbeat_and_release(s3_store):
    lock = WriterLock.acquire(s3_store, "engine-1", stale_after_seconds=0.6)
    first = s3_store.read_with_etag(LOCK_OBJECT_PATH)[1]
    assert wait_for(lambda: s3_store.read_with_etag(LOCK_OBJECT_PATH)[1] != first)  # heartbeats
    with pytest.raises(ConcurrentWriterError, match="engine-1"):
        WriterLock.acquire(s3_store, "engine-2", stale_after_seconds=3600)
    lock.release()
    assert not s3_store.exists(LOCK_OBJECT_PATH) and not lock.lost


def test_s3_forced_takeover_marks_the_old_holder_lost(s3_store, caplog):
    old = WriterLock.acquire(s3_store, "old", stale_after_seconds=0.6)
    with caplog.at_level(logging.WARNING, logger="hummock.manifest"):
        new = WriterLock.acquire(s3_store, "new", force=True)
    assert any("took over" in r.getMessage() for r in caplog.records)
    assert wait_for(lambda: old.lost)  # its next heartbeat's If-Match fails
    with pytest.raises(ConcurrentWriterError, match="lost"):
        old.check()
    old.release()  # must not delete the new holder's lock object
    assert b'"new"' in s3_store.read(LOCK_OBJECT_PATH)
    new.release()
    assert not s3_store.exists(LOCK_OBJECT_PATH)


def test_s3_stale_lock_is_taken_over(s3_store):
    dead = WriterLock.acquire(s3_store, "dead", stale_after_seconds=1)
    dead._impl._stop.set()  # the holder dies: no more heartbeats, no release
    dead._impl._thread.join()
    with pytest.raises(ConcurrentWriterError, match="dead"):
        WriterLock.acquire(s3_store, "next", stale_after_seconds=30)
    time.sleep(2.2)  # Date - Last-Modified has 1 s resolution
    with WriterLock.acquire(s3_store, "next", stale_after_seconds=1) as lock:
        assert lock.held
        assert b'"next"' in s3_store.read(LOCK_OBJECT_PATH)


def test_lock_rejects_a_store_without_a_mechanism():
    class Plain:
        pass
    with pytest.raises(InvalidArgumentError, match="no writer lock"):
        WriterLock.acquire(Plain(), "x")
