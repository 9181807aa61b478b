"""fsync errors the local object store must never lose (hummock/object_store/local.py: "Deferred
durability", directories).

Fault model, as tests/test_review_s38.py: Linux reports a write-back error to one fsync only;
afterwards an fsync of the same inode returns success although the data never reached the disk.
So every failed fsync -- of a deferred file, and of a directory holding a new entry -- must
fail everything that depends on it from then on, whichever thread or upload saw it. Each test
here is a sequence a review of 2026-11-29 found acknowledged a write whose file or directory
entry could be lost; each failed on the code before the fix.
"""

import errno
import os
import shutil
import threading
import time

import pytest

from hummock.manifest import Manifest, OutcomeUnknownError
from hummock.object_store import LocalObjectStore, ObjectStoreError
from hummock.object_store import local as local_mod
from hummock.object_store.spares import SpareFiles


class FsyncErrors:
    """``os.fsync`` with injected write-back errors: ``arm(inode)`` makes the next fsync of that
    inode raise EIO once; later ones succeed. ``hooks`` run before each fsync (fd, inode)."""

    def __init__(self, monkeypatch):
        self.real = os.fsync
        self.armed = set()
        self.hooks = []
        self.lock = threading.Lock()
        monkeypatch.setattr(os, "fsync", self.fsync)

    def arm(self, path_or_inode):
        self.armed.add(path_or_inode if isinstance(path_or_inode, int) else os.stat(path_or_inode).st_ino)

    def fsync(self, fd):
        inode = os.fstat(fd).st_ino
        for hook in self.hooks:
            hook(fd, inode)
        with self.lock:
            hit = inode in self.armed
            self.armed.discard(inode)
        if hit:
            raise OSError(errno.EIO, "injected write-back error")
        self.real(fd)


def _deferred(store, name, data=b"x" * 5000):
    with store.deferred_durability():
        with store.streaming_upload(name) as up:
            up.write(data)
    return os.path.join(store.root, *name.split("/"))


def _failing_dir_fsync(monkeypatch, directory, times=1):
    real = local_mod._fsync_dir
    calls = []

    def fsync_dir(d):
        calls.append(d)
        if d == directory and calls.count(directory) <= times:
            raise OSError(errno.EIO, f"injected: write-back of {d} failed")
        real(d)

    monkeypatch.setattr(local_mod, "_fsync_dir", fsync_dir)
    return calls


def test_a_failed_manifest_directory_fsync_after_the_link_is_never_acknowledged(tmp_path, monkeypatch):
    """The delta is linked, the directory's fsync fails: the retry finds the delta present and
    must not take it as committed -- its directory entry may not be on disk."""
    store = LocalObjectStore(tmp_path)
    manifest = Manifest.open(store)
    manifest_dir = os.path.join(store.root, "manifest")
    calls = _failing_dir_fsync(monkeypatch, manifest_dir)
    calls.clear()
    with pytest.raises(OutcomeUnknownError):
        manifest.reserve_sst_ids(3)
    assert calls.count(manifest_dir) == 1   # never "fsynced again" into a false success
    with pytest.raises(ObjectStoreError, match="earlier fsync of the directory"):
        store.upload_if_absent("manifest/other", b"d")


def test_a_concurrent_barrier_sees_the_error_another_barrier_took(tmp_path, monkeypatch):
    """Barrier A's fsync of a deferred file fails while A still waits for its own temporary
    file; barrier B, started meanwhile, must fail too: one fsync of the file is in flight, and
    both wait for it."""
    store = LocalObjectStore(tmp_path)
    store.early_fsync = False
    sst = _deferred(store, "sst/1.sst")
    errors = FsyncErrors(monkeypatch)
    errors.arm(sst)
    sst_failed = threading.Event()

    def slow_own_temp(fd, inode):
        if threading.current_thread().name == "A" and "/manifest/.tmp-" in os.readlink(f"/proc/self/fd/{fd}"):
            sst_failed.wait(5)
            time.sleep(0.3)

    errors.hooks.append(slow_own_temp)
    real_fsync_file = local_mod._fsync_file

    def fsync_file(file):
        try:
            real_fsync_file(file)
        except OSError:
            sst_failed.set()
            raise

    monkeypatch.setattr(local_mod, "_fsync_file", fsync_file)
    results = {}

    def barrier_a():
        try:
            results["A"] = store.upload_if_absent("manifest/a", b"delta A")
        except ObjectStoreError as exc:
            results["A"] = exc

    thread = threading.Thread(target=barrier_a, name="A")
    thread.start()
    assert sst_failed.wait(5)
    with pytest.raises(ObjectStoreError):
        store.upload_if_absent("manifest/b", b"delta B naming sst/1")
    thread.join()
    assert isinstance(results["A"], ObjectStoreError)
    assert not store.exists("manifest/a") and not store.exists("manifest/b")


def test_a_directory_error_a_plain_upload_took_fails_the_next_barrier(tmp_path, monkeypatch):
    """A deferred SST's rename into ``sst/`` waits for the barrier; a plain upload's fsync of
    ``sst/`` fails first (and takes the error). The barrier must not link a delta naming it."""
    store = LocalObjectStore(tmp_path)
    sst = _deferred(store, "sst/1.sst")
    errors = FsyncErrors(monkeypatch)
    errors.arm(os.path.dirname(sst))
    with pytest.raises(ObjectStoreError):
        store.upload("sst/2.sst", b"a compaction output")
    with pytest.raises(ObjectStoreError, match="earlier fsync of the directory"):
        store.upload_if_absent("manifest/d", b"delta naming sst/1")
    assert not store.exists("manifest/d")


def test_a_pending_deferred_file_is_never_recycled(tmp_path, monkeypatch):
    """A deferred file deleted before its barrier (an orphan vacuumed) while its early fsync is
    still running: its inode must not take a new object's bytes, or the early fsync could report
    the new object's write-back error -- and the barrier skips a deleted file's error."""
    store = LocalObjectStore(tmp_path)
    store._temp_tag = local_mod.WRITER_TEMP_TAG
    store._spares = SpareFiles(local_mod.TEMP_PREFIX + local_mod.WRITER_TEMP_TAG, 4)
    try:
        store.upload("sst/0.sst", b"stocks the directory")
        errors = FsyncErrors(monkeypatch)
        first = _deferred(store, "sst/1.sst", b"A" * 8192)
        inode = os.stat(first).st_ino
        go, started = threading.Event(), threading.Event()

        def slow_early_fsync(fd, fd_inode):
            if fd_inode == inode and threading.current_thread().name.startswith("hummock-fsync"):
                started.set()
                go.wait(5)

        errors.hooks.append(slow_early_fsync)
        with store.deferred_durability():   # opening it starts sst/1's early fsync
            with store.streaming_upload("sst/9.sst") as up:
                up.write(b"next")
        assert started.wait(5)
        store.delete(["sst/1.sst"])
        second = _deferred(store, "sst/2.sst", b"B" * 4096)
        assert os.stat(second).st_ino != inode, "a pending deferred file was recycled"
        errors.arm(inode)   # the deleted file's pages fail: nothing names them any more
        go.set()
        assert store.upload_if_absent("manifest/d", b"delta naming sst/2") is True
        assert store.read("sst/2.sst") == b"B" * 4096
    finally:
        store._spares.close()


def test_a_failed_fsync_of_a_new_directorys_parent_fails_every_later_upload_below_it(tmp_path, monkeypatch):
    """``mkdir sst/`` and the root's fsync fails: a later upload into ``sst/`` finds it present
    and must not publish there -- the root's entry for it may not be on disk."""
    store = LocalObjectStore(tmp_path)
    store.upload_if_absent("manifest/checkpoint-0", b"as Manifest.open does first")
    _failing_dir_fsync(monkeypatch, store.root)
    with pytest.raises(ObjectStoreError):
        _deferred(store, "sst/1.sst")
    with pytest.raises(ObjectStoreError, match="earlier fsync of the directory"):
        _deferred(store, "sst/2.sst")
    with pytest.raises(ObjectStoreError):
        store.upload_if_absent("manifest/d", b"delta")


def test_a_directory_is_made_durable_on_its_first_use(tmp_path, monkeypatch):
    """A directory that exists already (made by a process that may have crashed before its
    fsync, or by a thread whose mkdir won the race) has its parent fsynced once by each handle,
    before the handle's first object in it; later uploads there fsync no parent."""
    os.makedirs(tmp_path / "sst")
    store = LocalObjectStore(tmp_path)
    calls = _failing_dir_fsync(monkeypatch, "/no-such-directory")
    calls.clear()
    store.upload("sst/1.sst", b"1")
    assert calls == [store.root, os.path.join(store.root, "sst")]
    store.upload("sst/2.sst", b"2")
    assert calls[2:] == [os.path.join(store.root, "sst")]


def test_a_new_root_is_made_durable_in_its_parents(tmp_path, monkeypatch):
    """Each directory level the store creates for its root is fsynced into its parent: a root
    made, used and then lost in a crash would lose every commit under it."""
    calls = _failing_dir_fsync(monkeypatch, "/no-such-directory")
    LocalObjectStore(tmp_path / "a" / "b")
    assert calls == [str(tmp_path), str(tmp_path / "a")]


# --- what the rules above must not break (a second review of 2026-11-29) ----------------------

def test_a_directory_removed_since_its_first_use_is_made_again(tmp_path):
    store = LocalObjectStore(tmp_path)
    store.upload("x/y/1", b"1")
    shutil.rmtree(tmp_path / "x")
    store.upload("x/y/2", b"2")
    assert store.read("x/y/2") == b"2"


def test_a_file_at_a_directorys_name_blocks_it_only_while_it_stands(tmp_path):
    store = LocalObjectStore(tmp_path)
    store.upload("a", b"file")
    with pytest.raises(ObjectStoreError):
        store.upload("a/b", b"x")
    store.delete(["a"])
    store.upload("a/b", b"x")
    assert store.read("a/b") == b"x"


def test_a_directory_that_cannot_be_opened_is_not_lost(tmp_path, monkeypatch):
    """``os.open`` of the directory fails (out of descriptors): no fsync ran and no write-back
    error was taken, so only that upload fails."""
    store = LocalObjectStore(tmp_path)
    store.upload("sst/0", b"0")
    real_open = os.open
    armed = [True]

    def open_(path, flags, *args, **kwargs):
        if armed[0] and flags == os.O_RDONLY and os.path.isdir(path):
            armed[0] = False
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    with pytest.raises(ObjectStoreError):
        store.upload("sst/1", b"1")
    monkeypatch.setattr(os, "open", real_open)
    store.upload("sst/2", b"2")
    assert store.read("sst/2") == b"2"


def test_an_object_at_the_root_fsyncs_nothing_above_the_root(tmp_path, monkeypatch):
    store = LocalObjectStore(tmp_path / "store")
    calls = _failing_dir_fsync(monkeypatch, "/no-such-directory")
    store.upload("top", b"x")
    assert calls == [store.root]


def test_every_level_of_a_directory_is_made_durable_on_its_first_use(tmp_path, monkeypatch):
    """A thread that finds ``a/b`` made by another thread (whose fsyncs may not have run) fsyncs
    the entry of every level itself before its first object there is acknowledged."""
    store = LocalObjectStore(tmp_path)
    os.makedirs(tmp_path / "a" / "b")   # as a racing thread or a crashed process left it
    calls = _failing_dir_fsync(monkeypatch, "/no-such-directory")
    store.upload("a/b/c/o", b"o")
    root = store.root
    assert calls == [root, os.path.join(root, "a"), os.path.join(root, "a", "b"),
                     os.path.join(root, "a", "b", "c")]


def test_a_directory_fsync_waits_only_for_the_fsyncs_running_as_it_ends(tmp_path, monkeypatch):
    """Steady overlapping fsyncs of one directory must not starve a caller: it waits for those
    running when its own ended, not for ones started later."""
    store = LocalObjectStore(tmp_path)
    store.upload("sst/0", b"0")
    directory = os.path.join(store.root, "sst")
    real = local_mod._fsync_dir

    def slow(d):
        time.sleep(0.05)
        real(d)

    monkeypatch.setattr(local_mod, "_fsync_dir", slow)
    stop = time.monotonic() + 1.5

    def traffic(offset):
        time.sleep(offset)
        while time.monotonic() < stop:
            store._fsync_dir_tracked(directory)

    threads = [threading.Thread(target=traffic, args=(offset,)) for offset in (0.0, 0.025)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    started = time.monotonic()
    store._fsync_dir_tracked(directory)
    waited = time.monotonic() - started
    for thread in threads:
        thread.join()
    assert waited < 0.5, f"a 50 ms directory fsync returned after {waited:.2f} s"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_does_not_wait_for_the_parents_fsyncs(tmp_path, monkeypatch):
    """Forked while a parent thread fsyncs ``sst/``: the child's own upload there must not wait
    for an fsync that runs only in the parent."""
    store = LocalObjectStore(tmp_path)
    store.upload("sst/0", b"0")
    real = local_mod._fsync_dir
    in_fsync = threading.Event()

    def slow(d):
        if threading.current_thread().name == "slow":
            in_fsync.set()
            time.sleep(1.0)
        real(d)

    monkeypatch.setattr(local_mod, "_fsync_dir", slow)
    thread = threading.Thread(target=store.upload, args=("sst/1", b"1"), name="slow")
    thread.start()
    assert in_fsync.wait(5)
    pid = os.fork()
    if pid == 0:   # the child: exits 0 once its upload returned
        try:
            store.upload("sst/child", b"c")
        finally:
            os._exit(0)
    deadline = time.monotonic() + 10
    status = None
    while time.monotonic() < deadline:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = code
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    thread.join()
    assert status == 0, "the forked child hung (or failed) on the parent's directory fsync"
    assert store.read("sst/child") == b"c"
