"""Intra-L0 compaction end to end: sub-levels of several commits merge into one in their place,
reads at every pinned epoch are unchanged, the merged sub-level survives a reopen (the delta's
level-0 outputs replay from the manifest), and the task's reads bypass the block cache."""

import random

from hummock import HummockStorage, StorageOptions
from hummock.compaction.manager import CompactionManager
from hummock.compaction.picker import pick

E = 1 << 16
OPTIONS = StorageOptions(block_size=512, target_sst_size=4096, shared_buffer_capacity=1 << 20, compactor="none")


def answers(store, epoch):
    return list(store.iter(1, epoch)), [store.get(1, b"%04d" % k, epoch) for k in range(0, 400, 7)]


def test_intra_l0_merges_commits_and_keeps_every_pinned_read(tmp_path):
    rng = random.Random(3)
    path = str(tmp_path / "db")
    with HummockStorage.open(path, OPTIONS) as store:
        for n in range(1, 6):
            batch = {b"%04d" % rng.randrange(400): (None if rng.random() < 0.2 else b"v%d" % n) for _ in range(60)}
            store.ingest_batch(1, sorted(batch.items()), n * E)
            store.checkpoint(n * E)
        before = {n: answers(store, n * E) for n in range(1, 6)}
        snapshots = [store.snapshot(n * E) for n in (2, 4)]    # the watermark is epoch 2
        ids_before = {s.sst_id for sub in store.version().l0 for s in sub.ssts}
        manager = CompactionManager(store)
        task = pick(store.version(), manager.config)
        assert task is not None and task.input_level == task.target_level == 0 and not task.bottom
        cached = store.stats()["block_cache"]["inserts"]
        assert manager._run(task) == 1
        assert store.stats()["block_cache"]["inserts"] == cached, "compaction inputs bypass the block cache"
        l0 = store.version().l0
        assert len(l0) == 1 and not l0[0].overlapping
        assert not ids_before & {s.sst_id for s in l0[0].ssts}
        store.version()._check()
        for n in range(2, 6):
            assert answers(store, n * E) == before[n], f"epoch {n}"
        for s in snapshots:
            assert list(s.iter(1)) == before[s.epoch // E][0]
            s.release()
        assert store.vacuum() >= len(ids_before)
    with HummockStorage.open(path, OPTIONS, read_only=True) as reopened:
        assert [sub.overlapping for sub in reopened.version().l0] == [False]
        assert answers(reopened, 5 * E) == before[5]
