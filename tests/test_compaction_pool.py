"""The worker-process runner (``compaction_workers``): the same answers as no compaction and as
the in-thread runner, failures that apply nothing and leave only orphans for vacuum, dead
workers replaced, and the memory store falling back to the thread."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions
from hummock.compaction import pool

E = 1 << 16
OPTIONS = StorageOptions(block_size=512, target_sst_size=16 * 1024, shared_buffer_capacity=1 << 20, compactor="none",
                          vacuum_min_age_s=0)


def fill(store, seed: int, epochs: int = 6, keys: int = 300):
    rng = random.Random(seed)
    for n in range(1, epochs + 1):
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


def test_the_memory_store_compacts_in_the_thread():
    opts = OPTIONS.replace(compactor="local", compaction_workers=2)
    with HummockStorage.open("memory://", opts) as store:
        assert store._compactor._pool is None
        store._compactor.stop()
        fill(store, 9)
        expected = answers(store, [6])
        assert store.compact_all() >= 1 and answers(store, [6]) == expected
