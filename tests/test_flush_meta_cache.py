"""A flush hands each new SST's meta, as the builder wrote it, to the engine's meta cache: the
first open of the SST (a read, compaction planning) neither reads nor decodes its meta."""

import tempfile

from hummock import HummockStorage
from hummock.key import new_epoch
from hummock.sstable.builder import SstableBuilder
from hummock.sstable.meta import FOOTER_SIZE, SstableMeta, sst_object_path


def test_a_flushed_sst_meta_is_cached_as_written():
    with tempfile.TemporaryDirectory() as tmp, HummockStorage.open(tmp + "/db") as store:
        store.set_table_options(3, prefix_len=3)   # a prefix filter section too
        epoch = new_epoch()
        store.ingest_batch(3, [(b"k%04d" % i, b"v" * (i % 5) if i % 7 else None) for i in range(300)], epoch)
        store.ingest_batch(4, [(b"a", b"1")], epoch)
        store.checkpoint(epoch)
        infos = store.version().all_ssts()
        assert infos
        for info in infos:
            meta = store._meta_cache.get(info.sst_id)
            assert isinstance(meta, SstableMeta), f"SST {info.sst_id}'s meta is not cached after the flush"
            stored = store._store.read(sst_object_path(info.sst_id), info.meta_offset, info.file_size - FOOTER_SIZE)
            assert meta.encode() == stored
            decoded = SstableMeta.decode(stored, object="test")
            for name in SstableMeta.__slots__:
                assert getattr(decoded, name) == getattr(meta, name), name
        assert meta.prefix_lens == {3: 3}
        misses = store._meta_cache.stats()["misses"]
        assert store.get(3, b"k0008", epoch) == b"vvv" and store.get(3, b"k0007", epoch) is None
        assert store.get(4, b"a", epoch) == b"1"
        assert store._meta_cache.stats()["misses"] == misses   # the reads opened the cached metas


def test_builder_meta_is_what_it_wrote():
    builder = SstableBuilder(7)
    for i in range(50):
        builder.add(b"\x00\x00\x00\x01" + b"k%03d" % i + b"\xff" * 8, b"x" * i)
    assert builder.meta is None
    info = builder.finish()
    assert builder.meta.encode() == builder.sink.getvalue()[info.meta_offset:info.file_size - FOOTER_SIZE]
