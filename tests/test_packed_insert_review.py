"""Review tests of the packed insert path and of the block builder's C key buffers (issue 30):
the corners tests/test_packed_insert.py does not reach.

Block builder: keys longer than its 64-byte buffers (growth), table ids that change inside a
block and between blocks with declared prefix lengths (prefix hashes), a refused add (another
table id) and a failed add (out of order) leaving ``last_key``/``block_first_key`` as they were,
native against the twin. Packed batches: ``add_packed`` of wide keys with prefix lengths against
``add_batch``; offsets that are not C-contiguous; a width too large for a C integer. Store:
several packed imms of one table in one flush (spills), a packed imm beside a list imm of the
same table, overlapping packed imms, the shared-buffer size and the SSTs equal to the list
path's; the task store's vnodes and SSTs of packed batches. Compaction of keys past 64 bytes
(the core hands the builder borrowed key pointers): the twin's output, byte for byte. State
tables: a packed chunk costs the MemTable and the shared buffer what the list path's does; a
chunk with a row of an unowned vnode is refused whole; a spilled table's SSTs equal the list
path's (one flush of several imms cuts where the list path cuts). ``add_packed`` answers odd
calls (bad epochs and offsets) as its twin; reader threads racing to a packed imm's first read.
"""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import twins
from hummock import HummockStorage, StorageOptions, _memtable_py
from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from hummock.packed_batch import PackedColumns
from hummock.shared_buffer import KeyValueColumns, PackedImm
from hummock.sstable import _block_py
from hummock.task_store import _packed_prefixes, _prefixes

MEMTABLES = twins.implementations(_memtable_py, "_memtable")
BLOCKS = twins.implementations(_block_py, "_block")
MAX = (1 << 64) - 1


def packed_of(keys: list, values: list, width: int) -> PackedColumns:
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return PackedColumns(b"".join(keys), width, b"".join(values), offsets)


def _state(b):
    return (b.last_key, b.block_first_key, b.block_entry_count, b.key_count, b.smallest_key,
            b.block_size_estimate, list(b.key_hashes), list(b.prefix_hashes), b.live_counts, list(b.table_ids))


@st.composite
def entry_plans(draw):
    """Full keys in order over tables 1..4 (user keys of 0..300 bytes, so past 64), each with
    one to three versions, puts and deletes."""
    out = []
    for table in sorted(draw(st.sets(st.integers(1, 4), min_size=1, max_size=4))):
        uks = sorted(set(draw(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=8))))
        for uk in uks:
            for epoch in sorted(draw(st.sets(st.integers(1, 1000), min_size=1, max_size=3)), reverse=True):
                value = draw(st.one_of(st.none(), st.binary(max_size=40)))
                out.append((table.to_bytes(4, "big") + uk + (MAX - epoch).to_bytes(8, "big"), value))
    return out


@settings(max_examples=60, deadline=None)
@given(entry_plans(), st.sampled_from([1, 2, 16]), st.sampled_from([64, 300, 4096]),
       st.sampled_from([None, {1: 1, 3: 40}, {2: 1, 4: 100}]))
def test_builder_state_after_every_add_equals_the_twin(plan, restart, block_size, prefix_lens):
    results = []
    for impl in BLOCKS:
        b = impl.BlockBuilder(restart, prefix_lens)
        trace, blocks = [], []
        for key, value in plan:
            if b.last_key is not None:   # a failed add changes nothing
                with pytest.raises(InvalidArgumentError):
                    b.add(b.last_key, b"x")
                trace.append(_state(b))
            if not b.add(key, value):   # another table id: nothing added
                trace.append(_state(b))
                blocks.append((b.block_first_key, b.finish_block()))
                assert b.add(key, value)
            trace.append(_state(b))
            if b.block_size_estimate >= block_size:
                blocks.append((b.block_first_key, b.finish_block()))
                trace.append(_state(b))
        if b.block_entry_count:
            blocks.append((b.block_first_key, b.finish_block()))
        results.append((trace, blocks))
    assert all(r == results[0] for r in results)


@settings(max_examples=40, deadline=None)
@given(st.integers(65, 200), st.lists(st.binary(max_size=30), min_size=1, max_size=30),
       st.sampled_from([None, {7: 3}, {7: 70}, {7: 500}]), st.sampled_from([100, 4096]))
def test_add_packed_of_wide_keys_builds_what_add_batch_builds(width, values, prefix_lens, block_size):
    keys = [i.to_bytes(width, "big") for i in range(len(values))]
    b = packed_of(keys, values, width)
    prefix, epoch = (7).to_bytes(4, "big"), 5 << 16
    full = [prefix + k + (MAX - epoch).to_bytes(8, "big") for k in keys]
    results = []
    for impl in BLOCKS:
        for packed in (False, True):
            builder = impl.BlockBuilder(4, prefix_lens)
            builder.add(b"\x00\x00\x00\x06" + b"z" * 90 + (MAX - 1).to_bytes(8, "big"), b"v")  # another table first
            blocks, i = [], 0
            while i < len(keys):
                if packed:
                    i = builder.add_packed(prefix, epoch, b.keys, width, b.values, b.offsets, i, block_size)
                else:
                    i = builder.add_batch(full, list(values), i, block_size)
                blocks.append((builder.block_first_key, builder.finish_block()))
            results.append((blocks, _state(builder)))
    assert all(r == results[0] for r in results)


def test_offsets_that_are_not_contiguous_are_read_as_any_other(tmp_path):
    """A ``PackedColumns`` built on a strided offsets view: accepted at ingest, so its reads
    and its flush must work too (the native readers take C-contiguous offsets only)."""
    strided = np.array([0, 9, 2, 9, 4, 9, 6], np.int64)[::2]
    batch = PackedColumns(b"\x00\x01\x00\x02\x00\x03", 2, b"aabbcc", strided)
    assert batch.lists() == ([b"\x00\x01", b"\x00\x02", b"\x00\x03"], [b"aa", b"bb", b"cc"])
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        epoch = new_epoch()
        store.ingest_batch(1, PackedColumns(b"\x00\x01\x00\x02\x00\x03", 2, b"aabbcc", strided), epoch)
        store.checkpoint(epoch)
        assert list(store.iter(1, epoch)) == [(b"\x00\x01", b"aa"), (b"\x00\x02", b"bb"), (b"\x00\x03", b"cc")]


@pytest.mark.parametrize("impl", MEMTABLES, ids=lambda m: m.__name__)
def test_a_width_too_large_for_c_is_an_invalid_argument(impl):
    with pytest.raises(InvalidArgumentError, match="not keys of"):
        impl.check_packed(b"ab", 1 << 70, b"", np.array([0, 0], np.int64))
    assert impl.check_packed(b"", 1 << 70, b"", np.array([0], np.int64)) == 0


# --- store --------------------------------------------------------------------------------

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


def _write(path, batches, packed: bool, base: int, prefix_len=None, capacity=None):
    """Ingest ``batches`` -- ``(table, epoch_index, keys, values)`` -- packed or as lists;
    return the shared-buffer sizes seen, the rows read before and after the checkpoint, and
    the SSTs written."""
    options = StorageOptions(compactor="none") if capacity is None else \
        StorageOptions(compactor="none", shared_buffer_capacity=capacity)
    sizes, before = [], []
    with HummockStorage.open(str(path), options) as store:
        if prefix_len is not None:
            for t in {b[0] for b in batches}:
                store.set_table_options(t, prefix_len=prefix_len)
        epochs = sorted({b[1] for b in batches})
        for table, e, keys, values in batches:
            width = len(keys[0])
            batch = packed_of(keys, values, width) if packed else KeyValueColumns(list(keys), list(values))
            store.ingest_batch(table, batch, base + (e << 16))
            sizes.append(store._buffer.size)
        last = base + (epochs[-1] << 16)
        tables = sorted({b[0] for b in batches})
        before = {t: list(store.iter(t, last)) for t in tables}
        for e in epochs:
            store.checkpoint(base + (e << 16))
        after = {t: list(store.iter(t, last)) for t in tables}
    return sizes, before, after, _ssts(path)


CASES = {
    "spills of one table, disjoint": [(1, 0, *_rows(0, 300)), (1, 0, *_rows(300, 700)), (1, 0, *_rows(700, 900))],
    "spills out of key order": [(1, 0, *_rows(500, 900)), (1, 0, *_rows(0, 500))],
    "spills that overlap": [(1, 0, *_rows(0, 400)), (1, 0, *_rows(200, 600, salt=b"new"))],
    "two epochs, overlapping": [(1, 0, *_rows(0, 400)), (1, 1, *_rows(100, 300, salt=b"e1"))],
    "two tables, long keys": [(2, 0, *_rows(0, 200, 90)), (1, 0, *_rows(0, 300, 70)), (2, 0, *_rows(200, 400, 90))],
}


@pytest.mark.parametrize("prefix_len", [None, 3, 80])
@pytest.mark.parametrize("name", list(CASES))
def test_packed_imms_flush_to_the_list_path_sst(tmp_path, name, prefix_len):
    batches = CASES[name]
    base = new_epoch()
    packed = _write(tmp_path / "packed", batches, True, base, prefix_len)
    listed = _write(tmp_path / "listed", batches, False, base, prefix_len)
    assert packed[0] == listed[0]        # the shared buffer's size, batch by batch
    assert packed[1] == listed[1] and packed[2] == listed[2] == packed[1]
    assert packed[3] and packed[3] == listed[3]   # the same SSTs, byte for byte


def test_a_packed_imm_beside_a_list_imm_of_the_same_table(tmp_path):
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        epoch = new_epoch()
        keys, values = _rows(0, 100)
        store.ingest_batch(1, packed_of(keys, values, 8), epoch)
        store.ingest_batch(1, KeyValueColumns(keys[10:20], [None] * 10), epoch)   # deletes, a list imm
        store.ingest_batch(1, packed_of(keys[15:30], [b"again"] * 15, 8), epoch)
        kinds = [type(imm) for imm in store._buffer.all_imms()]
        assert kinds.count(PackedImm) == 2 and len(kinds) == 3
        expected = [(k, v) for k, v in zip(keys, values) if not 10 <= int.from_bytes(k, "big") < 30] + \
            [(k, b"again") for k in keys[15:30]]
        expected.sort()
        assert list(store.iter(1, epoch)) == expected
        store.checkpoint(epoch)
        assert list(store.iter(1, epoch)) == expected


def test_task_store_vnodes_of_a_packed_batch_are_the_list_paths():
    for width in (1, 2, 3, 9):
        keys = sorted({bytes([a, b]) + bytes(width - 2) if width >= 2 else bytes([a])
                       for a in (0, 1, 255) for b in (0, 7, 255)})
        batch = packed_of(keys, [b"v"] * len(keys), width)
        assert _packed_prefixes(batch) == _prefixes(keys)


# --- compaction: the core passes borrowed key pointers to c_add_raw ------------------------

@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=200), st.integers(1, 8),
                          st.one_of(st.none(), st.binary(max_size=30))), min_size=1, max_size=60),
       st.integers(1, 3), st.booleans(), st.sampled_from([(), ((1, 2),), ((1, 70), (2, 1))]), st.data())
def test_compaction_of_long_keys_writes_the_twins_bytes(raw, n_runs, bottom, prefix_lens, data):
    import itertools

    from hummock.compaction import _compact_py
    from hummock.compaction.core import CompactionStats
    from hummock.iterators import SstRun
    from hummock.key import encode_full_key, full_key_sort_key
    from hummock.object_store import MemoryObjectStore
    from hummock.sstable.builder import SstableBuilderOptions, SstableOutputs, build_sstable
    from hummock.sstable.reader import Sstable

    class _Reader:
        def __init__(self, sst):
            self.sst = sst

    options = SstableBuilderOptions(block_size=256, restart_interval=4, prefix_lens=prefix_lens)
    unique = {encode_full_key(t, k, e): v for t, k, e, v in raw}
    buckets = [[] for _ in range(n_runs)]
    for kv in unique.items():
        buckets[data.draw(st.integers(0, n_runs - 1))].append(kv)
    outputs_of = []
    for impl in twins.implementations(_compact_py, "_compact"):
        store, ids = MemoryObjectStore(), itertools.count(100)
        runs = []
        for bucket in buckets:
            if bucket:
                entries = sorted(bucket, key=lambda kv: full_key_sort_key(kv[0]))
                blob, info = build_sstable(entries, next(ids), options)
                store.upload(info.object_path, blob)
                runs.append(SstRun([_Reader(Sstable.open(store, info))], None, None))
        with SstableOutputs(store, options, lambda: next(ids)) as outputs:
            impl.compact_into(runs, 3, bottom, outputs, 2048, CompactionStats())
        outputs_of.append([(info, store.read(info.object_path)) for info in outputs.infos])
    assert all(o == outputs_of[0] for o in outputs_of)


# --- state tables ---------------------------------------------------------------------------

def _int_schema():
    from relational.types import DataType as T
    return [("a", T.BIGINT), ("b", T.INT), ("v", T.BIGINT), ("s", T.VARCHAR)]


def _int_chunk(rows):
    import pyarrow as pa
    cols = list(zip(*rows))
    return [pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.int32()), pa.array(cols[2], pa.int64()),
            pa.array(cols[3], pa.string())]


def _table_pair(store, **kw):
    from relational.state_table import StateTable
    packed = StateTable(store, 1, _int_schema(), [0, 1], consistent=False, flush_threshold=1 << 30, **kw)
    listed = StateTable(store, 2, _int_schema(), [0, 1], consistent=False, flush_threshold=1 << 30, **kw)
    listed._packed_insert = lambda columns, n: False   # the list path only
    return packed, listed


def test_memtable_and_shared_buffer_count_a_packed_chunk_as_the_list_path(tmp_path):
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        packed, listed = _table_pair(store)
        epoch = new_epoch()
        rows = [(i // 3, i % 3, i * 7, "x" * (i % 5)) for i in range(300)]
        for t in (packed, listed):
            t.init_epoch(epoch)
            t.write_chunk(np.ones(150, np.int16), _int_chunk(rows[:150]))
            t.write_chunk(np.ones(150, np.int16), _int_chunk(rows[150:]))
        assert packed.mem.approx_bytes == listed.mem.approx_bytes
        packed.commit(epoch + (1 << 16))
        packed_size = store._buffer.size
        listed.commit(epoch + (1 << 16))
        imms = store._buffer.all_imms()
        assert [type(imm) for imm in imms].count(PackedImm) == 1
        assert store._buffer.size == 2 * packed_size
        assert sorted(imm.size for imm in imms)[0] == sorted(imm.size for imm in imms)[1]


def test_a_chunk_with_an_unowned_vnode_is_refused_whole_on_the_packed_path(tmp_path):
    from relational.errors import VnodeNotOwnedError
    from relational.state_table import StateTable
    from relational.vnode import Bitmap
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        tables = [StateTable(store, t, _int_schema(), [0, 1], dist_key_indices=[0], consistent=False,
                             vnodes=Bitmap.from_range(0, 128)) for t in (1, 2)]
        tables[1]._packed_insert = lambda columns, n: False
        epoch = new_epoch()
        rows = [(i, 0, i, "r") for i in range(64)]   # some of these hash to vnodes >= 128
        for t in tables:
            t.init_epoch(epoch)
            before = t.mem.approx_bytes
            with pytest.raises(VnodeNotOwnedError):
                t.write_chunk(np.ones(len(rows), np.int16), _int_chunk(rows))
            assert t.mem.approx_bytes == before and not t.mem._runs
            t.commit(epoch + (1 << 16))
        assert not store._buffer.all_imms()


def _sst_bytes_of_tables(path, base, packed: bool, prefix_len_hint):
    from relational.state_table import StateTable
    with HummockStorage.open(str(path), StorageOptions(compactor="none", target_sst_size=4096, block_size=8192)) as store:
        t = StateTable(store, 5, _int_schema(), [0, 1], consistent=False, flush_threshold=3000,
                       prefix_len_hint=prefix_len_hint)
        if not packed:
            t._packed_insert = lambda columns, n: False
        t.init_epoch(base)
        for step in range(6):   # a spill between chunks (flush_threshold), then the commit
            rows = [(step * 1000 + i // 2, i % 2, i, "v" * (i % 7)) for i in range(120)]
            t.write_chunk(np.ones(len(rows), np.int16), _int_chunk(rows))
            t.try_flush()
        t.commit(base + (1 << 16))
        store.checkpoint(base)
        scanned = [tuple(r) for r in t.iter_with_prefix(())]
    return scanned, _ssts(path)


@pytest.mark.parametrize("prefix_len_hint", [None, 1])
def test_a_spilled_relaxed_table_writes_the_list_paths_ssts(tmp_path, prefix_len_hint):
    base = new_epoch()
    packed = _sst_bytes_of_tables(tmp_path / "p", base, True, prefix_len_hint)
    listed = _sst_bytes_of_tables(tmp_path / "l", base, False, prefix_len_hint)
    assert len(packed[0]) == 720 and packed[0] == listed[0]
    assert len(packed[1]) > 1 and packed[1] == listed[1]


def test_a_task_store_flushes_a_packed_batch_as_the_list_path():
    from hummock.object_store import MemoryObjectStore
    from hummock.task_store import TaskStore
    from hummock.version import HummockVersion

    outs = []
    for packed in (True, False):
        object_store = MemoryObjectStore()
        epoch = 7 << 16
        task = TaskStore(object_store, HummockVersion.empty() if hasattr(HummockVersion, "empty") else HummockVersion(),
                         epoch, options=StorageOptions(compactor="none", target_sst_size=4096, block_size=256))
        keys, values = _rows(0, 400, 10)
        keys = [bytes([i % 3, 0]) + k for i, k in enumerate(keys)]
        keys, values = zip(*sorted(zip(keys, values)))
        for lo, hi in ((0, 150), (150, 400)):
            batch = packed_of(list(keys[lo:hi]), list(values[lo:hi]), 12) if packed else \
                KeyValueColumns(list(keys[lo:hi]), list(values[lo:hi]))
            task.ingest_batch(3, batch, epoch)
        assert list(task.iter(3, epoch)) == list(zip(keys, values))
        out = task.finish(range(1000, 1100))
        outs.append((out, sorted((m.path, object_store.read(m.path)) for m in object_store.list(""))))
    assert outs[0] == outs[1]


def _odd_add_packed_calls():
    ok = np.array([0, 1, 2], np.int64)
    return {
        "empty, width past memory": ((b"tttt", 1, b"", 1 << 62, b"", np.array([0], np.int64), 0, 100), 0),
        "negative epoch": ((b"tttt", -1, b"ab", 1, b"xy", ok, 0, 100), "epoch must be"),
        "epoch past 2**64": ((b"tttt", 1 << 64, b"ab", 1, b"xy", ok, 0, 100), "epoch must be"),
        "epoch a float": ((b"tttt", 1.0, b"ab", 1, b"xy", ok, 0, 100), "epoch must be"),
        "strided offsets": ((b"tttt", 1, b"ab", 1, b"xy", np.array([0, 9, 1, 9, 2], np.int64)[::2], 0, 100), 2),
        "offsets a list": ((b"tttt", 1, b"ab", 1, b"xy", [0, 1, 2], 0, 100), "int64 array"),
        "offsets int32": ((b"tttt", 1, b"ab", 1, b"xy", ok.astype(np.int32), 0, 100), "int64 array"),
        "offsets 2-D": ((b"tttt", 1, b"ab", 1, b"xy", ok.reshape(1, 3), 0, 100), "int64 array"),
    }


@pytest.mark.parametrize("name", list(_odd_add_packed_calls()))
def test_add_packed_answers_odd_calls_as_the_twin(name):
    """Each implementation returns the same index or raises ``InvalidArgumentError`` with the
    same message (native raised MemoryError, OverflowError, ValueError or TypeError here)."""
    args, expected = _odd_add_packed_calls()[name]
    for impl in BLOCKS:
        if isinstance(expected, int):
            assert impl.BlockBuilder(4).add_packed(*args) == expected
        else:
            with pytest.raises(InvalidArgumentError, match=expected):
                impl.BlockBuilder(4).add_packed(*args)


def test_readers_on_other_threads_build_a_packed_imms_lists_once_and_all_see_its_rows(tmp_path):
    """Reader threads racing to the first read of a packed imm (its lists are built lazily):
    every get and scan sees every row and every reader gets equal lists (two may build them)."""
    import threading

    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        epoch = new_epoch()
        keys, values = _rows(0, 20000)
        store.ingest_batch(1, packed_of(keys, values, 8), epoch)
        (imm,) = store._buffer.all_imms()
        assert type(imm) is PackedImm and imm.packed._lists is None
        start, errors, seen = threading.Barrier(4), [], []

        def reader(j):
            try:
                start.wait()
                for i in range(j, 20000, 997):
                    assert store.get(1, keys[i], epoch) == values[i]
                assert list(store.iter(1, epoch, keys[100 * j], keys[100 * j + 50])) == \
                    list(zip(keys[100 * j:100 * j + 50], values[100 * j:100 * j + 50]))
                seen.append((imm.keys, imm.values))
            except BaseException as e:   # noqa: BLE001 - handed to the main thread
                errors.append(e)

        threads = [threading.Thread(target=reader, args=(j,)) for j in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert imm.packed is None   # the lists replaced the buffers (tests/test_packed_imm_memory.py)
        assert all(s == (keys, values) for s in seen)
        assert imm.keys == keys and imm.values == values
