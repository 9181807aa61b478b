"""Spare temporary files of the local store's writer (hummock/object_store/spares.py): uploads
take files created ahead, the objects are the same, nothing is left behind at close, the
writer's own temp cleanup does not break it, a forked child never touches its parent's spares,
and a directory where creates fail falls back to the upload's own create."""

import os
import time

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.object_store.local import TEMP_PREFIX, WRITER_TEMP_TAG, LocalObjectStore
from hummock.object_store.spares import SpareFiles

SPARE = TEMP_PREFIX + WRITER_TEMP_TAG


def spares_in(directory) -> set:
    return {name for name in os.listdir(directory) if name.startswith(SPARE)}


def wait_for(predicate, what: str):
    deadline = time.monotonic() + 30   # a bound for a loaded machine, not a timing
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def writer_store(root) -> LocalObjectStore:
    store = LocalObjectStore(root)
    store.writer_lock({"owner": "test"}, stale_after=30, force=False)
    return store


def test_uploads_take_the_spares_made_ahead_and_close_removes_the_rest(tmp_path):
    store = writer_store(tmp_path / "root")
    directory = tmp_path / "root" / "sst"
    store.upload("sst/a", b"first")          # creates its own file; the directory is stocked after
    full = LocalObjectStore.spare_files
    wait_for(lambda: len(spares_in(directory)) == full, "the directory stocked")
    ready = spares_in(directory)
    store.upload("sst/b", b"second")
    assert len(ready - spares_in(directory)) == 1, "the upload used one of the spares"
    assert store.upload_if_absent("sst/c", b"third") and not store.upload_if_absent("sst/c", b"other")
    assert [store.read(p) for p in ("sst/a", "sst/b", "sst/c")] == [b"first", b"second", b"third"]
    assert [m.path for m in store.list("sst/")] == ["sst/a", "sst/b", "sst/c"], "spares are not objects"
    # three takes (the failed upload_if_absent took one too) would leave 1: the refill ran
    wait_for(lambda: len(spares_in(directory)) > full // 2, "restocked")
    store.close()
    assert not spares_in(directory) and not any(n.startswith(TEMP_PREFIX) for n in os.listdir(directory))


def test_the_thread_refills_a_directory_once_half_of_its_spares_are_taken(tmp_path):
    spares = SpareFiles(SPARE, 4)
    spares.want(str(tmp_path))
    wait_for(lambda: len(spares_in(tmp_path)) == 4, "four spares")
    taken = [spares.take(str(tmp_path))]
    time.sleep(0.2)
    assert len(spares_in(tmp_path)) == 4 and len(spares._ready[str(tmp_path)]) == 3, "no refill above half"
    taken.append(spares.take(str(tmp_path)))   # two left: the thread tops the directory up
    wait_for(lambda: len(spares._ready[str(tmp_path)]) == 4, "refilled to four")
    assert len({path for _, path in taken}) == 2 and not {path for _, path in taken} & {
        path for _, path in spares._ready[str(tmp_path)]}, "a spare is handed out once"
    spares.close()
    for fd, _ in taken:
        os.close(fd)


def test_the_writers_temp_cleanup_at_open_keeps_its_uploads_working(tmp_path):
    store = writer_store(tmp_path / "root")
    store.upload("manifest/x", b"1")
    wait_for(lambda: spares_in(tmp_path / "root" / "manifest"), "a spare")
    store.cleanup_temp(writer_files=True)    # removes every writer temp file, this handle's spares too
    store.upload("manifest/y", b"2")
    assert store.upload_if_absent("manifest/z", b"3")
    assert store.read("manifest/y") == b"2" and store.read("manifest/z") == b"3"
    store.close()


def test_a_store_leaves_no_temp_file_after_close_and_reopens(tmp_path):
    options = StorageOptions(compactor="none", vacuum_min_age_s=0)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        for n in range(1, 6):
            store.ingest_batch(1, [(b"k%d" % n, b"v%d" % n)], n << 16)
            store.checkpoint(n << 16)
    leftovers = [name for _, _, files in os.walk(tmp_path / "db") for name in files if name.startswith(TEMP_PREFIX)]
    assert leftovers == []
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        assert store.get(1, b"k5", 5 << 16) == b"v5"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_never_takes_or_removes_its_parents_spares(tmp_path):
    spares = SpareFiles(SPARE, 2)
    spares.want(str(tmp_path))
    wait_for(lambda: len(spares_in(tmp_path)) == 2, "two spares")
    pid = os.fork()
    if pid == 0:   # the child: nothing to take, and its close leaves the files alone
        code = 0 if spares.take(str(tmp_path)) is None else 1
        spares.close()
        os._exit(code if len(spares_in(tmp_path)) == 2 else 2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    fd, path = spares.take(str(tmp_path))
    os.write(fd, b"mine")
    os.close(fd)
    assert open(path, "rb").read() == b"mine"
    spares.close()
    assert spares_in(tmp_path) == {os.path.basename(path)}, "a taken spare is the caller's; the rest go"


def test_a_directory_where_creates_fail_gets_no_spares(tmp_path, monkeypatch):
    spares = SpareFiles(SPARE, 2)
    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if os.fspath(path).startswith(str(tmp_path / "full")):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, "open", failing_open)
    (tmp_path / "full").mkdir()
    spares.want(str(tmp_path / "full"))
    spares.want(str(tmp_path))
    wait_for(lambda: len(spares_in(tmp_path)) == 2, "the healthy directory stocked")
    assert spares.take(str(tmp_path / "full")) is None and not spares_in(tmp_path / "full")
    spares.close()
    assert not spares_in(tmp_path)


def test_spares_are_off_when_the_class_says_zero(tmp_path, monkeypatch):
    monkeypatch.setattr(LocalObjectStore, "spare_files", 0)
    store = writer_store(tmp_path / "root")
    store.upload("sst/a", b"x")
    assert store._spares is None and not spares_in(tmp_path / "root" / "sst")
    store.close()

