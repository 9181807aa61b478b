"""``StorageOptions.flush_compression``: the L0 SSTs a sync or a spill uploads from the shared
buffer are built with it (default ``"none"``, RisingWave's L0 default), while compaction
outputs keep ``compression``; both kinds read back the same rows, also after a reopen."""

from __future__ import annotations

import pytest

from hummock import HummockStorage, InvalidArgumentError, StorageOptions
from hummock.key import new_epoch
from hummock.sstable.block import BLOCK_TRAILER, BLOCK_TRAILER_SIZE
from hummock.sstable.meta import sst_object_path
from hummock.sstable.reader import Sstable

ROWS = [(b"k%05d" % i, b"value-%d-" % i + b"x" * 40) for i in range(3000)]   # compressible


def _tags(store, info) -> set:
    """The compression tags (0 none, 1 lz4) of every block of the SST ``info``."""
    objects = store.object_store
    data = objects.read(sst_object_path(info.sst_id))
    sst = Sstable.open(objects, info)
    return {BLOCK_TRAILER.unpack(data[bm.offset + bm.stored_len - BLOCK_TRAILER_SIZE:
                                      bm.offset + bm.stored_len])[0] for bm in sst.meta.blocks}


def _write_epochs(store, n: int) -> int:
    epoch = 0
    for part in range(n):
        epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
        store.ingest_batch(7, ROWS[part::n], epoch)
        store.checkpoint(epoch)
    return epoch


@pytest.mark.parametrize("flush, tag", [(None, 0), ("none", 0), ("lz4", 1)])
def test_flushed_ssts_take_flush_compression_and_compaction_outputs_take_compression(tmp_path, flush, tag):
    options = StorageOptions(compactor="none", block_size=4096, vacuum_min_age_s=0)
    if flush is not None:
        options = options.replace(flush_compression=flush)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        _write_epochs(store, 3)
        flushed = store.version().all_ssts()
        assert len(flushed) == 3 and all(_tags(store, info) == {tag} for info in flushed)
        assert store.compact_all() >= 1
        compacted = store.version().all_ssts()
        assert compacted and all(_tags(store, info) == {1} for info in compacted)   # compression="lz4"
        assert list(store.iter(7, store.max_committed_epoch)) == sorted(ROWS)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        assert list(store.iter(7, store.max_committed_epoch)) == sorted(ROWS)


def test_a_spill_is_built_with_flush_compression(tmp_path):
    options = StorageOptions(compactor="none", block_size=4096, shared_buffer_capacity=64 * 1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        epochs = []
        for part in range(4):   # each epoch ~60 KiB: the buffer spills the older ones
            epochs.append(max(new_epoch(), (epochs[-1] if epochs else 0) + (1 << 16)))
            store.ingest_batch(7, [(k + b"-%d" % part, v) for k, v in ROWS[:1000]], epochs[-1])
        assert store.counters["spills"] >= 1
        store.checkpoint(epochs[-1])
        infos = store.version().all_ssts()
        assert infos and all(_tags(store, info) == {0} for info in infos)
        assert sum(1 for _ in store.iter(7, store.max_committed_epoch)) == 4000


@pytest.mark.parametrize("bad", ["zstd", "", None, 1])
def test_flush_compression_is_checked(bad):
    with pytest.raises(InvalidArgumentError, match="flush_compression"):
        StorageOptions(flush_compression=bad)
