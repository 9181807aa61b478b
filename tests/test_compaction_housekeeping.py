"""What a compaction costs the writer besides its merge: its output ids come from the block of
ids the writer already reserved (no ``reserve_ids`` manifest delta when the block holds enough),
and the vacuum after it runs only when something may be due (``HummockStorage._vacuum_due``):
with ``vacuum_min_age_s`` > 0 the inputs it retires cannot be deleted before that long, so the
listing of every SST after each compaction is skipped until then -- and then they go."""

from __future__ import annotations

import os
import time

from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch


def _fill(store, epochs: int = 5) -> dict:
    """``epochs`` committed epochs of overlapping keys (each one L0 sub-level); the expected rows."""
    model = {}
    epoch = store.max_committed_epoch
    for e in range(epochs):
        epoch = max(new_epoch(), epoch + (1 << 16))
        batch = [(b"k%04d" % (i * 7 % 300), b"v%d-%d" % (e, i)) for i in range(200)]
        batch = sorted(dict(batch).items())
        store.ingest_batch(3, batch, epoch)
        store.checkpoint(epoch)
        model.update(batch)
    return model


def _rows(store) -> dict:
    return dict(store.iter(3, store.max_committed_epoch))


def test_compaction_outputs_take_ids_from_the_reserved_block(tmp_path):
    # a worker process merges (compaction_workers=1): its outputs' ids are reserved up front
    options = StorageOptions(compactor="local", compaction_workers=1, vacuum_min_age_s=0,
                             target_sst_size=8192, block_size=1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        model = _fill(store)
        before = store.version()
        assert store.compact_all() >= 1
        after = store.version()
        assert after.next_sst_id == before.next_sst_id   # no reservation of their own
        new_ids = set(after.sst_ids()) - set(before.sst_ids())
        assert new_ids and max(new_ids) < after.next_sst_id
        assert _rows(store) == model
        model.update(_fill(store, 2))   # flushes after the compaction take fresh ids still
        assert len(set(store.version().sst_ids())) == len(store.version().all_ssts())
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        assert _rows(store) == model


def test_the_vacuum_after_a_compaction_waits_until_something_is_due(tmp_path):
    options = StorageOptions(compactor="none", vacuum_min_age_s=600, target_sst_size=8192, block_size=1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        listed = []
        objects = store.object_store
        real_list = objects.list
        objects.list = lambda prefix="": listed.append(prefix) or real_list(prefix)
        model = _fill(store)
        inputs = set(store.version().sst_ids())
        assert store.compact_all() >= 1
        assert "sst/" not in listed and store.counters["vacuums_not_due"] >= 1
        assert not store._vacuum_due()
        sst_dir = str(tmp_path / "db" / "sst")
        assert all(os.path.exists(os.path.join(sst_dir, f"{i:020d}.sst")) for i in inputs)
        # 600 s later (the retirements and the files aged by hand): the next compaction vacuums
        with store._lock:
            store._retired = {i: (at, t - 601) for i, (at, t) in store._retired.items()}
        old = time.time() - 1000
        for name in os.listdir(sst_dir):
            os.utime(os.path.join(sst_dir, name), (old, old))
        assert store._vacuum_due()
        model.update(_fill(store))
        assert store.compact_all() >= 1
        assert "sst/" in listed
        assert not any(os.path.exists(os.path.join(sst_dir, f"{i:020d}.sst")) for i in inputs)
        assert _rows(store) == model


def test_with_vacuum_min_age_0_every_compaction_vacuums(tmp_path):
    options = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=8192, block_size=1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        _fill(store)
        inputs = set(store.version().sst_ids())
        assert store.compact_all() >= 1
        assert store.counters["vacuums_not_due"] == 0
        assert not any(os.path.exists(str(tmp_path / "db" / "sst" / f"{i:020d}.sst")) for i in inputs)
