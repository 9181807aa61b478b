"""Intra-L0 and manual range compaction end to end.

Intra-L0: sub-levels of several commits merge into one in their place,
reads at every pinned epoch are unchanged, the merged sub-level survives a reopen (the delta's
level-0 outputs replay from the manifest), and the task's reads bypass the block cache. A
range compaction takes L0 down whole, rewrites the range's bottom SSTs without tombstones and
changes no read."""

import random

import pytest

from hummock import HummockStorage, InvalidArgumentError, StorageOptions
from hummock.compaction.manager import CompactionManager
from hummock.compaction.picker import PickerConfig, pick

E = 1 << 16
OPTIONS = StorageOptions(block_size=512, target_sst_size=4096, shared_buffer_capacity=1 << 20, compactor="none",
                          vacuum_min_age_s=0)


def answers(store, epoch):
    return list(store.iter(1, epoch)), [store.get(1, b"%04d" % k, epoch) for k in range(0, 400, 7)]


def test_intra_l0_merges_commits_and_keeps_every_pinned_read(tmp_path):
    rng = random.Random(3)
    path = str(tmp_path / "db")
    with HummockStorage.open(path, OPTIONS) as store:
        # a base level under L0's keys: intra-L0 then saves rewriting it (picker rule 2)
        store.ingest_batch(1, [(b"%04d" % k, b"base") for k in range(0, 400, 3)], E)
        store.checkpoint(E)
        store.compact_all()
        for n in range(2, 7):
            batch = {b"%04d" % rng.randrange(400): (None if rng.random() < 0.2 else b"v%d" % n) for _ in range(60)}
            store.ingest_batch(1, sorted(batch.items()), n * E)
            store.checkpoint(n * E)
        before = {n: answers(store, n * E) for n in range(2, 7)}
        snapshots = [store.snapshot(n * E) for n in (3, 5)]    # the watermark is epoch 3
        ids_before = {s.sst_id for sub in store.version().l0 for s in sub.ssts}
        manager = CompactionManager(store._host)
        task = pick(store.version(), manager.config)
        assert task is not None and task.input_level == task.target_level == 0 and not task.bottom
        cached = store.stats()["block_cache"]["inserts"]
        assert manager._run(task) == 1
        l0 = store.version().l0
        outputs = {s.sst_id for s in l0[0].ssts}
        base_ids = {s.sst_id for level in store.version().levels for s in level.ssts}
        in_cache = [key for key in store._block_cache.keys_lru_order() if key[0] not in base_ids]
        assert {sst_id for sst_id, _ in in_cache} <= outputs, "an input's block stayed in the block cache"
        # the merge read its inputs around the cache: every insert is an output block the
        # refill loaded in place of the inputs' warm ones (hummock/cache_refill.py)
        assert store.stats()["block_cache"]["inserts"] - cached == len(in_cache) > 0, \
            "compaction inputs bypass the block cache"
        assert len(l0) == 1 and not l0[0].overlapping
        assert not ids_before & {s.sst_id for s in l0[0].ssts}
        store.version()._check()
        for n in range(3, 7):
            assert answers(store, n * E) == before[n], f"epoch {n}"
        for s in snapshots:
            assert list(s.iter(1)) == before[s.epoch // E][0]
            s.release()
        assert store.vacuum() >= len(ids_before)
    with HummockStorage.open(path, OPTIONS, read_only=True) as reopened:
        assert [sub.overlapping for sub in reopened.version().l0] == [False]
        assert answers(reopened, 6 * E) == before[6]


def test_a_discarded_task_leaves_orphans_that_vacuum_deletes_at_once(tmp_path, monkeypatch):
    import hummock.compaction.manager as manager_module
    rng = random.Random(4)
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as store:
        for n in range(1, 6):
            batch = {b"%04d" % rng.randrange(400): b"v%d" % n for _ in range(60)}
            store.ingest_batch(1, sorted(batch.items()), n * E)
            store.checkpoint(n * E)
        expected = answers(store, 5 * E)
        real_compact = manager_module.compact

        def compact_then_lose_the_race(*args, **kwargs):
            outputs = real_compact(*args, **kwargs)
            monkeypatch.setattr(manager_module, "compact", real_compact)
            assert store.compact_all() >= 1          # another task takes the same inputs first
            return outputs
        monkeypatch.setattr(manager_module, "compact", compact_then_lose_the_race)
        manager = CompactionManager(store._host)
        task = pick(store.version(), PickerConfig(l0_trigger=5))   # L0 -> base
        assert manager._run(task) == 0 and manager.stats["conflicts"] == 1
        assert store.vacuum() >= 1, "the discarded task's outputs are orphans now, not at the next open"
        live = {f"sst/{i:020d}.sst" for i in store.version().sst_ids()}
        assert {m.path for m in store._store.list("sst/")} == live
        assert answers(store, 5 * E) == expected


def test_compact_range_moves_the_range_down_and_drops_its_tombstones(tmp_path):
    rng = random.Random(5)
    with HummockStorage.open(str(tmp_path / "db"), OPTIONS) as store:
        for n in range(1, 4):
            for table in (1, 2):
                batch = {b"%04d" % rng.randrange(400): (None if rng.random() < 0.3 else b"v%d" % n)
                         for _ in range(80)}
                store.ingest_batch(table, sorted(batch.items()), n * E)
            store.checkpoint(n * E)
        expected = {t: list(store.iter(t, 3 * E)) for t in (1, 2)}
        assert store.compact_range(1, b"0100", b"0200") >= 1
        version = store.version()
        version._check()
        assert not version.l0, "L0 goes down whole once it meets the range"
        last = version.levels[-1].ssts
        assert last and all(not lv.ssts for lv in version.levels[:-1])
        in_range = [s for s in last if s.largest_key[:-8] >= b"\0\0\0\x010100" and s.smallest_key[:-8] < b"\0\0\0\x010200"]
        assert in_range and all(s.tombstone_count == 0 for s in in_range)
        assert {t: list(store.iter(t, 3 * E)) for t in (1, 2)} == expected
        assert store.compact_range(1, b"0200", b"0100") == 0 and store.compact_range(7) == 0
        with store.snapshot(3 * E):                            # pins the tombstones written next
            store.ingest_batch(1, [(b"%04d" % k, None) for k in range(0, 400, 3)], 4 * E)
            store.checkpoint(4 * E)
            store.compact_all()
            assert sum(s.tombstone_count for s in store.version().levels[-1].ssts) > 0
        expected = list(store.iter(1, 4 * E))
        assert store.compact_range(1) == 1, "only the bottom rewrite is left to do"
        assert sum(s.tombstone_count for s in store.version().levels[-1].ssts) == 0
        assert list(store.iter(1, 4 * E)) == expected
        with pytest.raises(InvalidArgumentError):
            store.compact_range(1, "0100")
        with pytest.raises(InvalidArgumentError):
            store.compact_range(-1)
