"""Deferred durability on the local store (docs/object_store.md, base.py invariant 4): flush SSTs
are published unsynced and made durable by the next ``upload_if_absent`` -- the manifest delta
naming them -- concurrently with the delta's own temporary file, before the delta is linked.

The crash-ordering claims are checked on a log of the file-system calls the store makes (every
``os`` call of ``hummock/object_store/local.py`` is recorded with a global sequence number; an
fsync is recorded when it starts and when it ends, whatever thread runs it), against the POSIX
worst case of a power cut: a name, a rename or a file's data survives only if an fsync that
started after it ended. A process crash (SIGKILL) at the new kill point is in
tests/test_kill_points.py (``object_store.after_barrier``).
"""

import errno
import os
import threading

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.manifest import delta_path
from hummock.object_store import LocalObjectStore, ObjectStoreError
from hummock.sstable.meta import sst_object_path
from hummock.version import apply
from hummock.version_codec import decode_delta, decode_version


class FsLog:
    """Records the ``os`` calls of the local store (and anything else in this process) in order."""

    def __init__(self, monkeypatch):
        self.events = []     # (seq, kind, detail...) in call order
        self._lock = threading.Lock()
        self._fd_path = {}   # open descriptor -> path
        real = {name: getattr(os, name) for name in ("open", "write", "fsync", "replace", "link", "unlink", "close")}
        self.real = real

        def note(*event):
            with self._lock:
                self.events.append((len(self.events),) + event)

        def open_(path, flags, *args, **kwargs):
            fd = real["open"](path, flags, *args, **kwargs)
            self._fd_path[fd] = os.fsdecode(path)
            if flags & os.O_CREAT:
                note("create", os.fsdecode(path))
            return fd

        def write(fd, data):
            n = real["write"](fd, data)
            note("write", self._fd_path.get(fd))
            return n

        def fsync(fd):
            path = self._fd_path.get(fd)
            note("fsync_start", path)
            real["fsync"](fd)
            note("fsync_end", path)

        def replace(src, dst):
            real["replace"](src, dst)
            note("rename", os.fsdecode(src), os.fsdecode(dst))

        def link(src, dst):
            note("link_start", os.fsdecode(src), os.fsdecode(dst))   # may be durable from here on
            real["link"](src, dst)

        def unlink(path):
            real["unlink"](path)
            note("unlink", os.fsdecode(path))

        for name, fn in (("open", open_), ("write", write), ("fsync", fsync), ("replace", replace),
                         ("link", link), ("unlink", unlink)):
            monkeypatch.setattr(os, name, fn)
        self.note = note

    def durable_before(self, seq_limit: int, path: str, since: int) -> bool:
        """Whether an fsync of ``path`` started after ``since`` and ended before ``seq_limit``."""
        started = {}
        for seq, kind, *detail in self.events:
            if seq >= seq_limit:
                break
            if kind == "fsync_start" and detail[0] == path and seq > since:
                started[path] = True
            if kind == "fsync_end" and detail[0] == path and started.get(path):
                return True
        return False


def _last(events, before: int, kind: str, index: int, path: str) -> int:
    """Sequence number of the last ``kind`` event with ``detail[index] == path`` before ``before``."""
    found = [seq for seq, k, *d in events if seq < before and k == kind and d[index] == path]
    assert found, (kind, path)
    return found[-1]


def check_power_cut_safety(log: FsLog, root: str, acks: list[tuple[int, int]]) -> None:
    """For every delta linked: its data and every SST of the version it makes are durable
    (data and name, POSIX worst case) before the link starts; every acknowledged commit's link
    is durable (its directory fsynced after it) before the acknowledgement."""
    store = LocalObjectStore(root, create=False)
    version = decode_version(store.read("manifest/checkpoint-00000000000000000000"))
    versions = {}
    while store.exists(delta_path(version.id + 1)):
        version = apply(version, decode_delta(store.read(delta_path(version.id + 1))))
        versions[version.id] = version
    assert versions, "no delta was written"
    manifest_dir = os.path.join(root, "manifest")
    links = {d[1]: seq for seq, kind, *d in log.events if kind == "link_start"}
    for vid, version in versions.items():
        link = links[os.path.join(root, *delta_path(vid).split("/"))]
        temp = next(d[0] for seq, k, *d in log.events if k == "link_start" and seq == link)
        assert log.durable_before(link, temp, _last(log.events, link, "write", 0, temp)), \
            f"delta {vid} linked before its data was fsynced"
        for sst_id in version.sst_ids():
            file = os.path.join(root, *sst_object_path(sst_id).split("/"))
            named = _last(log.events, link, "rename", 1, file)
            temp_of_sst = next(d[0] for seq, k, *d in log.events if seq == named)
            written = _last(log.events, named, "write", 0, temp_of_sst)
            # the data: an fsync of the file (by its temp name or its final name) after the write
            assert (log.durable_before(link, temp_of_sst, written)
                    or log.durable_before(link, file, named)), \
                f"SST {sst_id} of version {vid}: data not fsynced before the delta's link"
            assert log.durable_before(link, os.path.dirname(file), named), \
                f"SST {sst_id} of version {vid}: its name not fsynced before the delta's link"
    for vid, acked in acks:
        link = links[os.path.join(root, *delta_path(vid).split("/"))]
        assert log.durable_before(acked, manifest_dir, link), f"version {vid} acknowledged before durable"


def _epoch_rows(e: int, n: int = 200):
    return [(b"%06d-%06d" % (e, i), b"v%d" % e * 8) for i in range(n)]


@pytest.fixture
def fslog(monkeypatch):
    return FsLog(monkeypatch)


def test_checkpoints_are_durable_in_order_under_a_power_cut(tmp_path, fslog):
    root = str(tmp_path / "db")
    acks = []
    with HummockStorage.open(root, StorageOptions(compactor="none", checkpoint_interval=1000)) as store:
        for e in range(1, 6):
            store.ingest_batch(1, _epoch_rows(e), e << 16)
            store.checkpoint(e << 16)
            fslog.note("ack", e)
            acks.append((store.version().id, fslog.events[-1][0]))
        # a seal ahead of its commit: the upload runs while nothing waits, the commit later
        store.ingest_batch(1, _epoch_rows(6), 6 << 16)
        store.seal_epoch(6 << 16)
        store.ingest_batch(1, _epoch_rows(7), 7 << 16)
        store.commit_epoch(7 << 16)
        fslog.note("ack", 7)
        acks.append((store.version().id, fslog.events[-1][0]))
        assert store.get(1, b"000006-000003", 7 << 16) == b"v6" * 8
    check_power_cut_safety(fslog, root, acks)
    with HummockStorage.open(root, StorageOptions(compactor="none"), read_only=True) as reader:
        assert reader.max_committed_epoch == 7 << 16
        assert reader.get(1, b"000007-000199", 7 << 16) == b"v7" * 8


@pytest.mark.parametrize("early", [False, True])
def test_a_flush_sst_is_synced_by_the_commit_together_with_the_delta(tmp_path, fslog, early):
    """The point of deferring: the SST's fsyncs are not waited for one after the other before
    the delta's. Without ``early_fsync`` both start inside the delta's upload (after its
    temporary file is written), so the checkpoint waits for {SST, SST dir, delta temp} at once and
    then the manifest directory; with it the SST file's own fsync starts as soon as the SST is
    renamed into place and the barrier waits for it, its directory's fsync still starts in the
    barrier. Either way both end before the delta is linked, and there are four fsyncs."""
    root = str(tmp_path / "db")
    with HummockStorage.open(root, StorageOptions(compactor="none")) as store:
        store.object_store.early_fsync = early
        store.ingest_batch(1, _epoch_rows(1), 1 << 16)
        store.checkpoint(1 << 16)   # the first one also reserves SST ids and makes sst/
        start = len(fslog.events)
        store.ingest_batch(1, _epoch_rows(2), 2 << 16)
        store.checkpoint(2 << 16)
        events = fslog.events[start:]
    sst_file = next(d[1] for _, k, *d in events if k == "rename" and d[1].endswith(".sst"))
    delta_temp = next(d[0] for _, k, *d in events if k == "link_start" and "delta-" in d[1])
    # (the delta's temporary file may be a spare made earlier: its upload starts with its write)
    created = next(seq for seq, k, *d in events if k == "write" and d[0] == delta_temp)
    renamed = next(seq for seq, k, *d in events if k == "rename" and d[1] == sst_file)
    linked = next(seq for seq, k, *d in events if k == "link_start" and "delta-" in d[1])
    file_sync = [seq for seq, k, *d in events if k == "fsync_start" and d[0] == sst_file]
    dir_sync = [seq for seq, k, *d in events if k == "fsync_start" and d[0] == os.path.dirname(sst_file)]
    ends = [seq for seq, k, *d in events if k == "fsync_end" and d[0] in (sst_file, os.path.dirname(sst_file))]
    assert len(file_sync) == 1 and len(dir_sync) == 1 and len(ends) == 2
    assert dir_sync[0] > created, "the SST's directory was fsynced before the commit"
    if early:
        assert renamed < file_sync[0] < linked
    else:
        assert file_sync[0] > created, "the SST was fsynced before the commit"
    assert max(ends) < linked, "the delta was linked before the SST was durable"
    assert not any(k == "fsync_start" and ".tmp-" in d[0] and "/sst/" in d[0] for _, k, *d in events)
    assert sum(k == "fsync_start" for _, k, *d in events) == 4


@pytest.mark.parametrize("early", [False, True])
def test_deferred_upload_is_readable_at_once_and_durable_at_the_barrier(tmp_path, fslog, early):
    store = LocalObjectStore(tmp_path)
    store.early_fsync = early
    with store.deferred_durability():
        with store.streaming_upload("sst/1.sst") as up:
            up.write(b"one")
        store.upload("plain/x", b"x")     # upload() is never deferred
    assert store.read("sst/1.sst") == b"one"
    synced = [d[0] for _, k, *d in fslog.events if k == "fsync_end"]
    file = os.path.join(str(tmp_path), "sst", "1.sst")
    assert os.path.dirname(file) not in synced           # its directory: only in the barrier
    if not early:
        assert file not in synced and not any("/sst/" in p for p in synced)
    assert any("/plain/" in p for p in synced)            # the plain upload synced its own
    before = len(fslog.events)
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    linked = next(seq for seq, k, *d in fslog.events if k == "link_start" and "delta-1" in d[1])
    file_ends = [seq for seq, k, *d in fslog.events if k == "fsync_end" and d[0] == file]
    assert len(file_ends) == 1 and file_ends[0] < linked   # early or in the barrier, done before the link
    synced = [d[0] for _, k, *d in fslog.events[before:] if k == "fsync_end"]
    assert os.path.dirname(file) in synced and (early or file in synced)
    assert store._early == {}
    before = len(fslog.events)
    assert store.upload_if_absent("manifest/delta-2", b"d") is True   # nothing deferred any more
    assert not any(d[0] == file for _, k, *d in fslog.events[before:] if k == "fsync_end")


def test_deferral_is_per_thread(tmp_path, fslog):
    store = LocalObjectStore(tmp_path)
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        with store.streaming_upload("b/2") as up:   # another thread: durable as ever
            up.write(b"2")
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with store.deferred_durability():
        inside.set()
        done.wait()
    thread.join()
    synced = [d[0] for _, k, *d in fslog.events if k == "fsync_end"]
    assert any(p.startswith(os.path.join(str(tmp_path), "b", ".tmp-")) for p in synced)   # before its rename
    assert store._unsynced == set()


def _fsync_failing_for(failing: str):
    """``os.fsync`` that raises EIO for a descriptor of the file ``failing`` (any thread)."""
    real_fsync = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}") == failing:
            raise OSError(errno.EIO, "injected I/O error")
        real_fsync(fd)
    return fsync


@pytest.mark.parametrize("early", [False, True])
def test_barrier_skips_a_deleted_deferred_file_and_keeps_a_failed_one(tmp_path, monkeypatch, early):
    """Without ``early_fsync`` the barrier's own fsync of the file fails; with it, the fsync
    started when the file was published fails, and the barrier reports it the same way."""
    store = LocalObjectStore(tmp_path)
    store.early_fsync = early
    real_fsync = os.fsync
    failing = os.path.join(str(tmp_path), "sst", "2.sst")
    fsync = _fsync_failing_for(failing)
    if early:
        monkeypatch.setattr(os, "fsync", fsync)
    with store.deferred_durability():
        for name in ("sst/1.sst", "sst/2.sst"):
            with store.streaming_upload(name) as up:
                up.write(b"x")
    store.delete("sst/1.sst")   # an orphan vacuumed before the barrier: nothing to sync
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(ObjectStoreError, match="injected"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert not store.exists("manifest/delta-1")   # never linked without the barrier
    assert failing in store._unsynced             # still owed
    monkeypatch.setattr(os, "fsync", real_fsync)
    # lost for good: a retried fsync would return success without the data (tests/test_review_s38.py)
    with pytest.raises(ObjectStoreError, match="earlier fsync"):
        store.upload_if_absent("manifest/delta-1", b"d")
    assert not store.exists("manifest/delta-1")


def test_a_file_whose_early_fsync_failed_is_skipped_once_deleted(tmp_path, monkeypatch):
    """An early fsync that failed, of a file vacuumed before the barrier: nothing can name the
    file any more, so the barrier skips it (as it skips a deleted file it would fsync itself)
    instead of making every later commit fail."""
    store = LocalObjectStore(tmp_path)
    failing = os.path.join(str(tmp_path), "sst", "3.sst")
    fsync = _fsync_failing_for(failing)
    monkeypatch.setattr(os, "fsync", fsync)
    with store.deferred_durability():
        with store.streaming_upload("sst/3.sst") as up:
            up.write(b"x")
        with store.streaming_upload("sst/4.sst") as up:   # its open starts 3.sst's early fsync
            up.write(b"y")
    store._early[failing].exception()   # the early fsync has run (and failed)
    store.delete("sst/3.sst")
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    assert store._unsynced == set() and store._lost == set() and store._early == {}


def test_early_fsync_starts_when_the_next_deferred_upload_opens(tmp_path, fslog):
    """A deferred file's early fsync starts as the handle opens its next deferred upload (the
    flush goes on with another SST), never for the last file before the barrier: the barrier
    fsyncs that one itself, together with the delta's temporary file. Each file is fsynced
    once, and all before the link."""
    store = LocalObjectStore(tmp_path)
    files = [os.path.join(str(tmp_path), "sst", f"{i}.sst") for i in (1, 2, 3)]
    with store.deferred_durability():
        for i, file in enumerate(files, 1):
            with store.streaming_upload(f"sst/{i}.sst") as up:
                up.write(b"x" * i)
            assert set(store._early) == set(files[:i - 1]), "an early fsync started at publish"
            assert store._early_due == [file]
        store.upload("plain/x", b"x")   # not deferred: starts none
        assert set(store._early) == set(files[:2])
    for future in list(store._early.values()):
        future.result()
    before = len(fslog.events)
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    linked = next(seq for seq, k, *d in fslog.events if k == "link_start" and "delta-1" in d[1])
    barrier = [d[0] for _, k, *d in fslog.events[before:] if k == "fsync_start"]
    assert files[2] in barrier and files[0] not in barrier and files[1] not in barrier
    for file in files:
        ends = [seq for seq, k, *d in fslog.events if k == "fsync_end" and d[0] == file]
        assert len(ends) == 1 and ends[0] < linked
    assert store._early == {} and store._early_due == [] and store._unsynced == set()
    with store.deferred_durability():   # a barrier left nothing due: the next open starts none
        with store.streaming_upload("sst/4.sst") as up:
            up.write(b"4")
    assert store._early == {}


def test_other_stores_ignore_deferral(tmp_path):
    from hummock.object_store import MemoryObjectStore
    store = MemoryObjectStore()
    with store.deferred_durability():
        with store.streaming_upload("a") as up:
            up.write(b"a")
    assert store.read("a") == b"a" and store.upload_if_absent("b", b"b") is True
