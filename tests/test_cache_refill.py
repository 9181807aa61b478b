"""Block-cache refill after compaction (``hummock/cache_refill.py``): the outputs' blocks replace
the inputs' warm ones, only where the inputs were warm, never changing an answer, and never
failing a compaction."""

import random

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.cache_refill import refill_after_compaction

E = 1 << 16
TABLE = 7


def _options(workers: int) -> StorageOptions:
    return StorageOptions(block_size=1024, target_sst_size=64 * 1024, compactor="local", compaction_workers=workers,
                          vacuum_min_age_s=0, block_cache_capacity=64 << 20)


def _fill(store, rng) -> dict:
    model = {}
    for n in range(1, 4):     # three L0 sub-levels over the same keys
        batch = {b"k%06d" % rng.randrange(6000): rng.randbytes(40) for _ in range(3000)}
        store.ingest_batch(TABLE, sorted(batch.items()), n * E)
        store.checkpoint(n * E)
        model.update(batch)
    return model


def _misses(store) -> int:
    return store.stats()["block_cache"]["misses"]


@pytest.mark.parametrize("workers", [0, 1])
def test_reads_after_compaction_find_the_warm_blocks_cached(tmp_path, workers):
    rng = random.Random(3)
    with HummockStorage.open(str(tmp_path / "db"), _options(workers)) as store:
        model = _fill(store, rng)
        keys = sorted(model)
        assert store.multi_get(TABLE, keys, store.max_committed_epoch) == [model[k] for k in keys]   # warm
        assert store.compact_all() >= 1
        before = _misses(store)
        assert store.multi_get(TABLE, keys, store.max_committed_epoch) == [model[k] for k in keys]
        assert _misses(store) == before, "the compaction's outputs were not in the block cache"
        cached_ssts = {key[0] for key in store._block_cache.keys_lru_order()}
        live = {info.sst_id for level in store._version.levels for info in level.ssts}
        assert cached_ssts <= live, "blocks of compacted-away SSTs stayed in the cache"


def test_nothing_is_loaded_where_the_inputs_were_cold(tmp_path):
    rng = random.Random(4)
    with HummockStorage.open(str(tmp_path / "db"), _options(0)) as store:
        model = _fill(store, rng)
        keys = sorted(model)
        warm = [k for k in keys if k < b"k001000"]          # reads touch the low keys only
        store.multi_get(TABLE, warm, store.max_committed_epoch)
        store.compact_all()
        cached = store._block_cache.keys_lru_order()
        cold_before = _misses(store)
        assert store.multi_get(TABLE, warm, store.max_committed_epoch) == [model[k] for k in warm]
        assert _misses(store) == cold_before
        # blocks of the untouched high keys were not loaded: reading them now misses
        high = [k for k in keys if k >= b"k003000"]
        assert store.multi_get(TABLE, high, store.max_committed_epoch) == [model[k] for k in high]
        assert _misses(store) > cold_before
        assert 0 < len(cached) < len(store._block_cache.keys_lru_order())


def test_a_bulk_load_compacts_without_loading_blocks(tmp_path):
    rng = random.Random(5)
    with HummockStorage.open(str(tmp_path / "db"), _options(0)) as store:
        _fill(store, rng)
        assert len(store._block_cache) == 0
        store.compact_all()
        assert len(store._block_cache) == 0 and _misses(store) == 0


def test_refill_gives_up_quietly_when_an_input_cannot_be_read(tmp_path):
    """Best effort: an input whose meta is gone ends the refill; nothing raises."""
    rng = random.Random(6)
    with HummockStorage.open(str(tmp_path / "db"), _options(0).replace(compactor="none")) as store:
        model = _fill(store, rng)
        keys = sorted(model)
        store.multi_get(TABLE, keys, store.max_committed_epoch)
        inputs = [info for sub in store._version.l0 for info in sub.ssts]
        outputs = [inputs[0]]                                    # any SST stands for an output here

        def broken_open(info):
            from hummock.errors import CorruptionError
            raise CorruptionError("gone", object=f"{info.sst_id}.sst", offset=0)
        assert refill_after_compaction(store._block_cache, broken_open, inputs, outputs) == 0
        assert refill_after_compaction(None, store._open_sst, inputs, outputs) == 0
        assert refill_after_compaction(store._block_cache, store._open_sst, inputs, []) == 0
