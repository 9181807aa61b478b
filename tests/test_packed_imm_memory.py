"""What a packed imm holds once it was read (hummock/shared_buffer.py ``PackedImm``).

A packed imm keeps its batch's two buffers until something reads it; the read builds the
batch's lists, which replace the buffers: from then on the imm holds what a list imm of the
same batch holds, which is what the shared buffer counted when the batch came in (its size
never changes). The flush of a table with such an imm then takes the list path
(``merge_runs`` + ``add_batch``), which writes the SSTs the packed path writes, byte for byte;
a reader dropping the buffers while a flush is adding them does not disturb the flush.
"""

import gc
import os

import numpy as np
import pytest

from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch
from hummock.packed_batch import PackedColumns
from hummock.shared_buffer import PackedImm
from hummock.sstable import builder as sst_builder


def packed_of(keys: list, values: list, width: int) -> PackedColumns:
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return PackedColumns(b"".join(keys), width, b"".join(values), offsets)


def _rows(lo, hi, width=8, salt=b""):
    keys = [i.to_bytes(width, "big") for i in range(lo, hi)]
    return keys, [salt + b"v%d" % i for i in range(lo, hi)]


def _ssts(path):
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith(".sst"):
                with open(os.path.join(root, f), "rb") as fh:
                    out[f] = fh.read()
    return out


def test_a_read_replaces_the_buffers_with_the_lists_and_the_size_stays(tmp_path):
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        epoch = new_epoch()
        keys, values = _rows(0, 3000)
        store.ingest_batch(1, packed_of(keys, values, 8), epoch)
        (imm,) = store._buffer.all_imms()
        batch = imm.packed
        size = store._buffer.size
        assert type(imm) is PackedImm and imm.size == size and len(imm) == 3000
        assert store.get(1, keys[1234], epoch) == values[1234]     # the read builds the lists
        assert imm.packed is None, "the imm still holds its buffers beside its lists"
        held = gc.get_referents(imm)
        assert not any(x is batch or x is batch.keys or x is batch.values for x in held)
        assert imm.keys == keys and imm.values == values and len(imm) == 3000
        assert store._buffer.size == size == imm.size   # counted once, held once
        store._buffer._check()
        del batch
        store.checkpoint(epoch)
        assert not store._buffer.all_imms() and store._buffer.size == 0
        assert list(store.iter(1, epoch)) == list(zip(keys, values))


CASES = {
    "one batch, several SSTs": [(1, 0, *_rows(0, 3000))],
    "spills of one table, disjoint": [(1, 0, *_rows(0, 300)), (1, 0, *_rows(300, 700)), (1, 0, *_rows(700, 900))],
    "spills out of key order": [(1, 0, *_rows(500, 900)), (1, 0, *_rows(0, 500))],
    "spills that overlap": [(1, 0, *_rows(0, 400)), (1, 0, *_rows(200, 600, salt=b"new"))],
    "two tables": [(2, 0, *_rows(0, 200, 90)), (1, 0, *_rows(0, 300, 12)), (2, 0, *_rows(200, 400, 90))],
}


def _write(path, batches, base, read):
    """Ingest ``batches`` packed, read the imms whose index is in ``read`` inside the epoch,
    checkpoint; the sizes seen, the rows after, and the SSTs written."""
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024)
    with HummockStorage.open(str(path), options) as store:
        for table, e, keys, values in batches:
            store.ingest_batch(table, packed_of(keys, values, len(keys[0])), base + (e << 16))
        imms = store._buffer.all_imms()
        sizes = [store._buffer.size]
        for i in read:
            imm = imms[i]
            assert store.get(imm.table_id, imm.keys[0], base) is not None
            assert imm.packed is None
        sizes.append(store._buffer.size)
        store._buffer._check()
        store.checkpoint(base)
        rows = {t: list(store.iter(t, base)) for t in sorted({b[0] for b in batches})}
    return sizes, rows, _ssts(path)


@pytest.mark.parametrize("name", list(CASES))
def test_the_flush_of_read_imms_writes_the_bytes_of_the_packed_flush(tmp_path, name):
    batches = CASES[name]
    base = new_epoch()
    unread = _write(tmp_path / "unread", batches, base, ())
    assert unread[0][0] == unread[0][1]
    for j, read in enumerate([(0,), tuple(range(len(batches)))]):
        seen = _write(tmp_path / f"read{j}", batches, base, read)
        assert seen[0] == unread[0]          # the shared buffer's size, before and after the reads
        assert seen[1] == unread[1]
        assert seen[2] and seen[2] == unread[2], f"{name}, imms {read} read: other SSTs"


def test_a_reader_dropping_the_buffers_during_the_flush_leaves_it_whole(tmp_path, monkeypatch):
    """The flush took the buffers of the table's imms; a read on another thread then replaces
    them with lists (here: from inside the first ``add_packed``). The flush goes on with the
    buffers it took and writes what it writes unread."""
    base = new_epoch()
    batches = CASES["spills of one table, disjoint"]
    unread = _write(tmp_path / "unread", batches, base, ())
    real = sst_builder.SstableBuilder.add_packed
    read = []

    def add_packed_then_read(self, *args, **kwargs):
        if not read:
            for imm in store._buffer.all_imms():
                read.append(imm.keys[0])
                assert imm.packed is None
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sst_builder.SstableBuilder, "add_packed", add_packed_then_read)
    path = tmp_path / "racing"
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024)
    with HummockStorage.open(str(path), options) as store:
        for table, e, keys, values in batches:
            store.ingest_batch(table, packed_of(keys, values, len(keys[0])), base + (e << 16))
        store.checkpoint(base)
        rows = {1: list(store.iter(1, base))}
    assert len(read) == 3
    assert rows == unread[1] and _ssts(path) == unread[2]


def test_a_task_store_copies_a_read_imm_as_a_list_imm():
    """``TaskStore.finish`` shifts its imms by the spill offset: a packed imm read before (its
    buffers gone) is copied as the lists it holds, and the task writes the same SSTs."""
    from hummock.object_store import MemoryObjectStore
    from hummock.task_store import TaskStore
    from hummock.version import HummockVersion

    outs = []
    for read in (False, True):
        object_store = MemoryObjectStore()
        epoch = 7 << 16
        task = TaskStore(object_store, HummockVersion.empty(), epoch,
                         options=StorageOptions(compactor="none", target_sst_size=4096, block_size=256))
        keys, values = _rows(0, 400, 10)
        for lo, hi in ((0, 150), (150, 400)):
            task.ingest_batch(3, packed_of(keys[lo:hi], values[lo:hi], 10), epoch)
        if read:
            assert list(task.iter(3, epoch)) == list(zip(keys, values))
            assert all(imm.packed is None for imm in task._buffer.all_imms())
        out = task.finish(range(1000, 1100), spill_offset=2)
        outs.append((out, sorted((m.path, object_store.read(m.path)) for m in object_store.list(""))))
    assert outs[0] == outs[1]
