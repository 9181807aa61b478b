"""The write path off the upload (issue 11 part 1): sealing an epoch hands its imms to the
uploader; writes, reads and seals of later epochs go on while it uploads; ``sync(e)`` waits only
for uploads of epochs <= e; a failed upload keeps its data buffered and a retry finishes it.

Slow uploads are scripted with ``ScriptedStore.hold`` (a gate that blocks SST uploads until the
test opens it), so every interleaving here is deterministic.
"""

import threading
import time

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.object_store import MemoryObjectStore
from hummock.object_store.base import ObjectStoreError
from hummock.storage import StoreClosedError
from scripted_store import ScriptedStore

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0)


def _rows(tag: bytes, n: int = 20):
    return [(b"k%03d" % i, tag + b"%d" % i) for i in range(n)]


def _run(fn):
    """Run ``fn`` on a thread; return (thread, box) where box holds its result or error."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:   # noqa: BLE001 -- inspected by the test
            box["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


@pytest.fixture()
def scripted():
    inner = MemoryObjectStore()
    faulty = ScriptedStore(inner)
    store = HummockStorage.open(faulty, OPTIONS)
    yield faulty, store
    for gate in faulty.gates:
        gate.open()
    store.close()


def test_writes_reads_and_seals_of_the_next_epoch_go_on_while_an_epoch_uploads(scripted):
    faulty, store = scripted
    gate = faulty.hold("upload", "sst/")
    store.ingest_batch(1, _rows(b"a"), E)
    store.seal_epoch(E)                           # the upload starts and blocks at the gate
    assert gate.entered.wait(10)
    # nothing below waits for the upload: each call would hang here if it held the engine lock
    store.ingest_batch(1, _rows(b"b", 5), 2 * E)
    assert store.get(1, b"k000", E) == b"a0"      # the uploading imm is still read
    assert store.get(1, b"k000", 2 * E) == b"b0"
    assert store.stats()["imms"] == 2 and store.stats()["staging_ssts"] == 0
    syncer, box = _run(lambda: store.sync(E))
    syncer.join(0.3)
    assert syncer.is_alive(), "sync(E) returned before E's SSTs were uploaded"
    store.ingest_batch(2, _rows(b"c", 3), 2 * E)  # writers are not blocked by a waiting sync either
    gate.open()
    syncer.join(10)
    assert not syncer.is_alive() and "error" not in box
    stats = store.stats()
    assert stats["staging_ssts"] >= 1 and stats["imms"] == 2   # E uploaded, 2E still buffered
    store.commit_epoch(E)
    assert store.max_committed_epoch == E
    assert store.get(1, b"k000", E) == b"a0" and store.get(1, b"k000", 2 * E) == b"b0"
    store.checkpoint(2 * E)
    assert dict(store.iter(2, 2 * E)) == dict(_rows(b"c", 3))


def test_sync_waits_only_for_epochs_up_to_its_own(scripted):
    faulty, store = scripted
    store.ingest_batch(1, _rows(b"a"), E)
    store.seal_epoch(E)
    store.sync(E)                                 # E is staged
    gate = faulty.hold("upload", "sst/")
    store.ingest_batch(1, _rows(b"b"), 2 * E)
    store.seal_epoch(2 * E)                       # 2E's upload blocks at the gate
    assert gate.entered.wait(10)
    store.commit_epoch(E)                         # neither waits for 2E's upload
    assert store.max_committed_epoch == E
    committer, box = _run(lambda: store.commit_epoch(2 * E))
    committer.join(0.3)
    assert committer.is_alive(), "commit_epoch(2E) published before 2E was uploaded"
    gate.open()
    committer.join(10)
    assert "error" not in box and store.max_committed_epoch == 2 * E


def test_epochs_sealed_one_by_one_commit_one_by_one(scripted):
    _, store = scripted
    for i in (1, 2, 3):
        store.ingest_batch(1, _rows(b"%d" % i), i * E)
        store.seal_epoch(i * E)                   # one upload per sealed epoch
    store.sync(3 * E)
    for i in (1, 2, 3):                           # so each can be committed alone
        store.commit_epoch(i * E)
        assert store.get(1, b"k001", i * E) == b"%d1" % i
    assert store.version().max_committed_epoch == 3 * E


def _wait_for_uploads(store):
    deadline = time.monotonic() + 10
    while store.stats()["upload_tasks"]:
        assert time.monotonic() < deadline, "uploads never ended"
        time.sleep(0.01)


def test_a_failed_background_upload_keeps_its_data_and_the_next_sync_retries_it(scripted):
    faulty, store = scripted
    faulty.fail("upload", "sst/")
    store.ingest_batch(1, _rows(b"a"), E)
    store.seal_epoch(E)                           # this upload fails; nobody waits for it
    _wait_for_uploads(store)
    assert faulty.injected == 1
    assert store.stats()["imms"] == 1 and store.stats()["staging_ssts"] == 0
    assert store.get(1, b"k005", E) == b"a5"      # still buffered and read
    store.checkpoint(E)                           # the sync retries the upload, then commits
    assert store.max_committed_epoch == E and store.stats()["imms"] == 0
    assert dict(store.iter(1, E)) == dict(_rows(b"a"))


def test_a_failing_upload_is_raised_by_the_sync_waiting_for_it(scripted):
    faulty, store = scripted
    gate = faulty.hold("upload", "sst/")
    faulty.fail("upload", "sst/")
    store.ingest_batch(1, _rows(b"a"), E)
    store.seal_epoch(E)
    assert gate.entered.wait(10)
    syncer, box = _run(lambda: store.sync(E))
    syncer.join(0.2)
    gate.open()                                   # the held upload now fails
    syncer.join(10)
    assert isinstance(box.get("error"), ObjectStoreError)
    store.checkpoint(E)                           # the retry succeeds
    assert dict(store.iter(1, E)) == dict(_rows(b"a"))


def test_a_full_buffer_makes_the_writer_wait_for_the_spill_and_a_failed_spill_writes_nothing():
    faulty = ScriptedStore(MemoryObjectStore())
    options = OPTIONS.replace(shared_buffer_capacity=64 * 1024)
    with HummockStorage.open(faulty, options) as store:
        store.ingest_batch(1, [(b"k%04d" % i, b"x" * 400) for i in range(100)], E)
        faulty.fail("upload", "sst/")
        big = [(b"m%04d" % i, b"y" * 40) for i in range(600)]
        with pytest.raises(ObjectStoreError, match="injected"):
            store.ingest_batch(1, big, 2 * E)     # the spill it waits for fails: not written
        assert store.get(1, b"m0000", 2 * E) is None and store.get(1, b"k0000", E) == b"x" * 400
        store.ingest_batch(1, big, 2 * E)         # the spill is retried and succeeds
        assert store.stats()["spills"] >= 2 and store.stats()["staging_ssts"] >= 1
        assert store.get(1, b"m0000", 2 * E) == b"y" * 40
        store.checkpoint(2 * E)
        assert len(list(store.iter(1, 2 * E))) == 700


def test_close_ends_waiting_syncs_and_queued_uploads(scripted):
    faulty, store = scripted
    gate = faulty.hold("upload", "sst/")
    store.ingest_batch(1, _rows(b"a"), E)
    store.seal_epoch(E)
    assert gate.entered.wait(10)
    store.ingest_batch(1, _rows(b"b"), 2 * E)
    store.seal_epoch(2 * E)                       # queued behind E's upload
    syncer, box = _run(lambda: store.sync(2 * E))
    syncer.join(0.2)
    closer, _ = _run(store.close)
    closer.join(0.2)
    gate.open()                                   # E's upload ends; 2E's never runs
    closer.join(10)
    syncer.join(10)
    assert not closer.is_alive() and not syncer.is_alive()
    assert isinstance(box.get("error"), StoreClosedError)


def test_upload_errors_of_a_closed_store_leave_nothing_committed(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path, OPTIONS) as store:
        store.ingest_batch(1, _rows(b"a"), E)
        store.checkpoint(E)
        store.ingest_batch(1, _rows(b"b"), 2 * E)
        store.seal_epoch(2 * E)                   # uploads, never committed
    with HummockStorage.open(path, OPTIONS) as store:
        assert store.max_committed_epoch == E
        assert dict(store.iter(1, 2 * E)) == dict(_rows(b"a"))


def test_a_commit_writing_the_manifest_blocks_no_writer_or_reader(scripted):
    faulty, store = scripted
    store.ingest_batch(1, _rows(b"a"), E)
    store.sync(E)
    gate = faulty.hold("upload_if_absent", "manifest/delta-")
    committer, box = _run(lambda: store.commit_epoch(E))
    assert gate.entered.wait(10)                  # the commit is writing its delta
    store.ingest_batch(1, _rows(b"b"), 2 * E)     # would hang if the commit held the engine lock
    store.seal_epoch(2 * E)
    assert store.get(1, b"k001", E) == b"a1" and store.get(1, b"k001", 2 * E) == b"b1"
    assert store.max_committed_epoch == 0
    gate.open()
    committer.join(10)
    assert "error" not in box and store.max_committed_epoch == E
    store.checkpoint(2 * E)
    assert dict(store.iter(1, 2 * E)) == dict(_rows(b"b"))


def test_a_vacuum_deleting_blocks_no_writer(scripted):
    faulty, store = scripted
    for i in (1, 2, 3):
        store.ingest_batch(1, _rows(b"%d" % i), i * E)
        store.checkpoint(i * E)
    gate = faulty.hold("delete", "sst/")
    compactor, box = _run(store.compact_all)      # applies, then vacuums the inputs
    assert gate.entered.wait(10)
    store.ingest_batch(1, _rows(b"x"), 4 * E)     # would hang if vacuum held the engine lock
    assert store.get(1, b"k002", 4 * E) == b"x2" and store.get(1, b"k002", 3 * E) == b"32"
    gate.open()
    compactor.join(10)
    assert "error" not in box and store.stats()["vacuumed_ssts"] >= 3
    store.checkpoint(4 * E)
    assert dict(store.iter(1, 4 * E)) == dict(_rows(b"x"))


def test_reads_racing_uploads_that_install_new_states_are_exact():
    """Reads in one thread while the uploader (another thread) installs new read states. The
    native read handle once called into its state through a borrowed reference, so a state
    replaced mid-scan was freed under the reader: a segfault within seconds here."""
    options = OPTIONS.replace(shared_buffer_capacity=64 * 1024)
    with HummockStorage.open(MemoryObjectStore(), options) as store:
        stop = threading.Event()
        committed = []

        def writer():
            i = 1
            while not stop.is_set():
                store.ingest_batch(1, [(b"k%03d" % j, b"%d" % i) for j in range(50)], i * E)
                store.seal_epoch(i * E)       # the upload installs a new state in its thread
                if i % 4 == 0:
                    store.commit_epoch(i * E)
                    committed.append(i * E)
                i += 1
        thread, box = _run(writer)
        deadline = time.monotonic() + 2.0
        scans = 0
        while time.monotonic() < deadline:
            rows = list(store.iter(1, 2**64 - 1))
            assert len(rows) in (0, 50) and len({v for _, v in rows}) <= 1   # one epoch's batch
            store.multi_get(1, [b"k000", b"k049"], 2**64 - 1)
            scans += 1
        stop.set()
        thread.join(10)
        assert "error" not in box and scans > 10 and committed


def test_a_sync_runs_the_next_upload_on_its_own_thread_when_the_uploader_is_idle(monkeypatch):
    """``sync`` (a FLUSH's checkpoint) builds the SST itself instead of handing it to the worker
    and sleeping until it is done: two thread hand-offs fewer per checkpoint."""
    threads = []
    real = HummockStorage._upload

    def upload(self, task):
        threads.append((task.kind, threading.current_thread().name))
        real(self, task)
    monkeypatch.setattr(HummockStorage, "_upload", upload)
    store = HummockStorage.open(MemoryObjectStore(), OPTIONS)
    try:
        store.ingest_batch(1, _rows(b"a"), E)
        store.checkpoint(E)
        assert threads == [("sync", threading.current_thread().name)]
        assert store.get(1, b"k003", E) == b"a3"
    finally:
        store.close()


def test_a_reserved_task_runs_on_its_caller_in_its_turn_and_a_released_one_on_the_worker():
    from hummock.uploader import Uploader, UploadTask
    started, release, ran = threading.Event(), threading.Event(), []

    def run(task):
        ran.append((task.lowest, threading.current_thread().name))
        if task.lowest == 1:
            started.set()
            release.wait(10)
        task.done.set()

    uploader = Uploader(run, name="test-uploader")
    first, second, third, fourth = (UploadTask([], e, e, "sync") for e in (1, 2, 3, 4))
    uploader.submit(first)
    assert started.wait(10)
    queued = threading.Event()

    def caller():
        uploader.submit(second, inline=True)
        queued.set()
        uploader.run_inline(second)     # waits for the first one, then runs here
    thread = threading.Thread(target=caller, name="the-caller")
    thread.start()
    assert queued.wait(10)
    uploader.submit(third)              # behind the reserved one: the worker must wait for it
    release.set()
    thread.join(10)
    third.wait(10)
    assert ran == [(1, "test-uploader"), (2, "the-caller"), (3, "test-uploader")]
    uploader.submit(fourth, inline=True)
    uploader.release(fourth)            # its caller gave up on it: the worker runs it
    fourth.wait(10)
    assert ran[-1] == (4, "test-uploader")
    uploader.close(RuntimeError("closed"))


def test_close_waits_for_a_task_run_inline():
    from hummock.uploader import Uploader, UploadTask
    inside, release = threading.Event(), threading.Event()

    def run(task):
        inside.set()
        release.wait(10)
        task.done.set()

    uploader = Uploader(run)
    task = UploadTask([], 1, 1, "sync")

    def caller():
        uploader.submit(task, inline=True)
        uploader.run_inline(task)
    runner, _ = _run(caller)
    assert inside.wait(10)
    closer, box = _run(lambda: uploader.close(RuntimeError("closed")))
    closer.join(0.2)
    assert closer.is_alive(), "close returned while a task ran inline"
    release.set()
    closer.join(10)
    runner.join(10)
    assert not closer.is_alive() and "error" not in box and task.done.is_set()
