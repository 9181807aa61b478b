"""The worker-process runner (``compaction_workers``): the same answers as no compaction and as
the in-thread runner, failures that apply nothing and leave only orphans for vacuum, dead
workers replaced, and the memory store falling back to the thread."""

import os
import random
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions
from hummock.compaction import pool
from hummock.compaction.picker import L0_STOP_FACTOR, PickerConfig, pick
from hummock.errors import HummockError

E = 1 << 16
OPTIONS = StorageOptions(block_size=512, target_sst_size=16 * 1024, shared_buffer_capacity=1 << 20, compactor="none",
                          vacuum_min_age_s=0)


def fill(store, seed: int, epochs: int = 6, keys: int = 300, first: int = 1):
    rng = random.Random(seed)
    for n in range(first, first + epochs):
        batch = {b"%05d" % rng.randrange(keys): (None if rng.random() < 0.2 else rng.randbytes(rng.randrange(1, 60)))
                 for _ in range(keys // 2)}
        store.ingest_batch(1 + n % 2, sorted(batch.items()), n * E)
        store.checkpoint(n * E)


def answers(store, epochs=range(1, 7)):
    return {(t, n): (list(store.iter(t, n * E)), store.multi_get(t, [b"%05d" % k for k in range(0, 300, 7)], n * E))
            for t in (1, 2) for n in epochs}


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), workers=st.sampled_from([1, 2]), pinned=st.integers(1, 6))
def test_workers_give_the_answers_of_no_compaction_and_of_the_thread(tmp_path_factory, seed, workers, pinned):
    results = {}
    for kind, opts in (("none", OPTIONS), ("thread", OPTIONS.replace(compactor="local")),
                       ("workers", OPTIONS.replace(compactor="local", compaction_workers=workers))):
        with HummockStorage.open(str(tmp_path_factory.mktemp(kind)), opts) as store:
            if store._compactor is not None:
                store._compactor.stop()   # only compact_all runs, under the pinned snapshot
            fill(store, seed)
            with store.snapshot(pinned * E):
                if kind != "none":
                    store.compact_all()
                    assert not store.version().l0
                results[kind] = answers(store, range(pinned, 7))
            if kind == "workers":
                assert store.stats()["compaction"]["tasks"] >= 1
    assert results["thread"] == results["none"] and results["workers"] == results["none"]


def test_a_failed_split_applies_nothing_and_vacuum_removes_its_outputs(tmp_path, monkeypatch):
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=2)) as store:
        store._compactor.stop()           # the test drives compaction itself
        fill(store, 7, keys=3000)
        before, expected = store.version(), answers(store)
        monkeypatch.setattr(pool, "FAIL_SPLIT_FOR_TESTS", 0)
        with pytest.raises(pool.WorkerError, match="injected failure"):
            store.compact_all()
        assert store.version().sst_ids() == before.sst_ids() and answers(store) == expected
        store.vacuum()
        live = {f"sst/{i:020d}.sst" for i in store.version().sst_ids()}
        assert {m.path for m in store._store.list("sst/")} == live, "no orphan survives vacuum"
        monkeypatch.setattr(pool, "FAIL_SPLIT_FOR_TESTS", None)
        assert store.compact_all() >= 1
        assert answers(store, [6]) == {k: v for k, v in expected.items() if k[1] == 6}


def test_a_dead_worker_is_replaced(tmp_path):
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1)) as store:
        store._compactor.stop()
        fill(store, 8)
        expected = answers(store)
        with pool._lock:
            for worker in pool._pool(1):
                worker.proc.kill()
                worker.proc.wait()
        assert store.compact_all() >= 1
        assert answers(store, [6]) == {k: v for k, v in expected.items() if k[1] == 6}
        assert all(w.proc.poll() is None for w in pool._workers)


def test_workers_outlive_the_thread_that_started_them(tmp_path):
    """Workers die with their writer *process*, not with the thread that happened to start
    them: Linux's parent-death signal follows the forking thread, so a pool started by one
    store's compaction thread must not die when that store closes under another's task."""
    with pool._lock:
        for worker in pool._pool(1):   # the next task starts fresh workers, from the thread below
            worker.proc.kill()
            worker.proc.wait()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1)) as store:
        store._compactor.stop()
        fill(store, 10)
        starter = threading.Thread(target=store.compact_all)
        starter.start()
        starter.join()
        pids = [w.proc.pid for w in pool._workers]
        assert pids
        time.sleep(0.3)   # the kernel's signal, had it been sent, has been delivered
        assert all(w.proc.poll() is None for w in pool._workers), "a worker died with its starting thread"
        for n in (7, 8):   # more L0 for a second task
            store.ingest_batch(1, [(b"%05d" % k, b"v%d" % n) for k in range(0, 300, n)], n * E)
            store.checkpoint(n * E)
        expected = answers(store, [8])
        assert store.compact_all() >= 1 and answers(store, [8]) == expected
        assert [w.proc.pid for w in pool._workers] == pids


def _kill_pool():
    with pool._lock:
        for worker in pool._pool(1):
            worker.proc.kill()
            worker.proc.wait()
        pool._workers.clear()


def test_a_writer_starts_the_workers_as_it_opens(tmp_path):
    """The pool is warmed when a writer opens (manager docstring "Warm-up"), before any task:
    a writer that checkpoints at once must not wait for an interpreter to start at its first
    compaction. A reader starts none."""
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1)) as store:
        store.ingest_batch(1, [(b"k", b"v")], E)
        store.checkpoint(E)
    _kill_pool()
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1),
                             read_only=True) as reader:
        assert reader._compactor is None and list(reader.iter(1, E)) == [(b"k", b"v")]
    assert pool._workers == [], "a reader started a compaction worker"
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1)) as store:
        deadline = time.monotonic() + 60
        while not pool._workers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [w.proc.poll() for w in pool._workers] == [None], "no worker started as the writer opened"
        assert store.stats()["compaction"]["tasks"] == 0
        pids = [w.proc.pid for w in pool._workers]
        fill(store, 11, epochs=13, first=2)
        assert store.compact_all() >= 1
        assert [w.proc.pid for w in pool._workers] == pids, "the first task started another worker"


def test_a_writer_whose_workers_cannot_start_still_opens_and_writes(tmp_path, monkeypatch):
    """A failed warm-up is logged, not fatal: the background thread lives on and the first task
    tries again (and fails as a task does, version unchanged)."""
    _kill_pool()

    def no_worker():
        raise OSError("no processes left")
    monkeypatch.setattr(pool, "_Worker", no_worker)
    opts = OPTIONS.replace(compactor="local", compaction_workers=1)
    with HummockStorage.open(str(tmp_path / "db"), opts) as store:
        fill(store, 12, epochs=3)
        assert store._compactor._thread.is_alive()
        with pytest.raises(OSError, match="no processes left"):
            store.compact_all()
        expected = answers(store, [3])
        monkeypatch.undo()
        assert store.compact_all() >= 1 and answers(store, [3]) == expected


def test_stopping_a_worker_that_is_still_starting_kills_it():
    """``_shutdown`` (under the pool lock: nothing in flight) does not wait for a worker that
    has not read its input yet -- a short-lived writer's warmed pool -- it kills it."""
    worker = object.__new__(pool._Worker)
    worker.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE)
    worker.stop()
    assert worker.proc.returncode == -9


def test_the_memory_store_compacts_in_the_thread():
    opts = OPTIONS.replace(compactor="local", compaction_workers=2)
    with HummockStorage.open("memory://", opts) as store:
        assert store._compactor._pool is None
        store._compactor.stop()
        fill(store, 9)
        expected = answers(store, [6])
        assert store.compact_all() >= 1 and answers(store, [6]) == expected


def test_default_is_one_worker_on_a_machine_with_a_second_core(monkeypatch):
    """Unless given, ``compaction_workers`` is 1 where a second core can run the merges beside
    the readers and writers, 0 on one core (or when the core count is unknown); a value given
    is kept, 0 included."""
    from hummock import options
    for cores, expected in ((None, 0), (1, 0), (2, 1), (64, 1)):
        monkeypatch.setattr(options.os, "cpu_count", lambda cores=cores: cores)
        assert StorageOptions().compaction_workers == expected, cores
        assert StorageOptions(compaction_workers=0).compaction_workers == 0
        assert StorageOptions(compaction_workers=3).compaction_workers == 3


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie no one reaps yet counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc (Linux)")
def test_workers_exit_when_the_writer_is_killed(tmp_path):
    """A writer killed with SIGKILL in the middle of a worker's split takes the worker with
    it, and no SST is written after it died: a worker left running went on uploading the
    split's outputs after a restarted writer's vacuum had looked for orphans (tests/test_crash.py
    found SSTs that survived it). The split writes a 256 KiB SST every few milliseconds, so a
    worker that outlives its writer shows at once."""
    db = tmp_path / "db"
    script = f"""
import os, random, sys, threading, time
from hummock import HummockStorage, StorageOptions
from hummock.compaction import pool
from hummock.compaction.picker import L0_STOP_FACTOR, PickerConfig, pick
from hummock.errors import HummockError
store = HummockStorage.open({str(db)!r}, StorageOptions(compactor="local", compaction_workers=1,
                                                       target_sst_size=256 * 1024))
rng = random.Random(5)
for n in range(1, 5):
    store.ingest_batch(1, [(b"%08d" % k, rng.randbytes(100)) for k in range(n, 400_000, 4)], n << 16)
    store.checkpoint(n << 16)
threading.Thread(target=store.compact_all, daemon=True).start()
while not pool._workers:
    time.sleep(0.01)
first = set(os.listdir({str(db / "sst")!r}))
while set(os.listdir({str(db / "sst")!r})) == first:   # the worker's first output: inside the split
    time.sleep(0.005)
print(" ".join(str(w.proc.pid) for w in pool._workers), flush=True)
sys.stdin.read()
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
    finally:
        proc.kill()
        proc.wait()
    at_death = {p.name for p in (db / "sst").iterdir() if p.suffix == ".sst"}
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(_alive(p) for p in pids), "a compaction worker outlived its killed writer"
    after = {p.name for p in (db / "sst").iterdir() if p.suffix == ".sst"}
    assert after <= at_death, f"SSTs written after the writer died: {sorted(after - at_death)}"


# --- priority: the writer's threads first (pool module doc) ---------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_background_splits_get_a_niced_thread_and_the_main_thread_keeps_its_priority(monkeypatch):
    monkeypatch.delenv(pool.NICE_ENV, raising=False)
    me = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, me)
    executor = pool._background_thread()
    try:
        niced = executor.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    finally:
        executor.shutdown()
    assert niced == max(pool.BACKGROUND_NICE, before)
    assert os.getpriority(os.PRIO_PROCESS, me) == before   # only that thread was lowered
    monkeypatch.setenv(pool.NICE_ENV, "0")
    assert pool._background_thread() is None   # off: background splits run on the main thread


def test_the_nice_setting_is_checked_when_the_store_opens(tmp_path, monkeypatch):
    monkeypatch.setenv(pool.NICE_ENV, "7")
    assert pool.background_nice() == 7
    for bad in ("-1", "20", "low"):
        monkeypatch.setenv(pool.NICE_ENV, bad)
        with pytest.raises(HummockError, match=pool.NICE_ENV):
            HummockStorage.open(str(tmp_path / f"db{bad}"), OPTIONS.replace(compactor="local", compaction_workers=1))


def test_picked_tasks_run_in_the_background_and_waited_for_ones_in_front(tmp_path, monkeypatch):
    seen = []
    run = pool.PoolRunner.run

    def recording(self, task, stats, commit, *, background=False):
        seen.append((task.target_level, background))
        return run(self, task, stats, commit, background=background)
    monkeypatch.setattr(pool.PoolRunner, "run", recording)
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS.replace(compactor="local", compaction_workers=1)) as store:
        manager = store._compactor
        manager.stop()   # this test picks and runs the loop's tasks itself
        fill(store, 5, epochs=3)
        with store.snapshot(E):   # every epoch stays readable across the compactions
            expected = answers(store, range(1, 4))
            store.compact_all()                 # a caller waits: in front
            assert seen and not any(background for _, background in seen)
            assert answers(store, range(1, 4)) == expected and not store.version().l0
            fill(store, 6, epochs=4, first=4)
            expected = answers(store, range(1, 8))
            task = pick(store.version(), PickerConfig(l0_trigger=2, l0_intra_trigger=2), frozenset(), {})
            assert task is not None and task.kind == "compact"
            assert manager._background(task)   # L0 is shallow: the loop would run it in the background
            manager._run(task, background=True)   # through a worker's niced thread: same answers
            assert seen[-1][1] is True and answers(store, range(1, 8)) == expected

    class Deep:   # a version whose L0 is half-way to stalling writers
        l0 = [()] * (manager.config.l0_trigger * L0_STOP_FACTOR // 2)
    monkeypatch.setattr(manager._host, "version", lambda: Deep)
    assert not manager._background(task)
