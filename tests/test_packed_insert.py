"""The packed insert path (issue 30): a relaxed state table's all-insert chunks of integer pks
go to the store as one packed batch (``hummock.packed_batch.PackedColumns``) and are flushed
straight from its buffers.

Twins: ``check_packed``/``split_packed`` (native/_memtable.pyx) and ``BlockBuilder.add_packed``
(native/_block.pyx) against their twins and against the list path they replace (the same size
and errors as ``check_columns``; the same SST as ``add_batch`` of the full keys, byte for byte).
End to end: a hypothesis model of a relaxed table (a dict of pk -> row) fed random epochs of
insert chunks (pks repeating across and inside chunks), deletes, mid-epoch reads and spills,
against a second table written through the list path only: same rows after every checkpoint,
the same SST entries; the shared buffer holds packed imms whose lists are never built by a
write-only epoch.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import twins
from hummock import HummockStorage, StorageOptions, _memtable_py
from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from hummock.packed_batch import PackedColumns
from hummock.shared_buffer import PackedImm
from hummock.sstable import _block_py
from relational.state_table import StateTable
from relational.types import DataType as T

MEMTABLES = twins.implementations(_memtable_py, "_memtable")
BLOCKS = twins.implementations(_block_py, "_block")


def packed_of(keys: list, values: list, width: int) -> PackedColumns:
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    return PackedColumns(b"".join(keys), width, b"".join(values), offsets)


@st.composite
def sorted_batches(draw):
    width = draw(st.integers(1, 6))
    keys = sorted(set(draw(st.lists(st.binary(min_size=width, max_size=width), max_size=30))))
    values = draw(st.lists(st.binary(max_size=20), min_size=len(keys), max_size=len(keys)))
    return keys, values, width


@pytest.mark.parametrize("impl", MEMTABLES, ids=lambda m: m.__name__)
@given(sorted_batches())
def test_check_packed_counts_as_check_columns_and_splits_back(impl, case):
    keys, values, width = case
    b = packed_of(keys, values, width)
    _, _, size = impl.check_columns(list(keys), list(values))
    assert impl.check_packed(b.keys, b.key_width, b.values, b.offsets) == size
    assert impl.split_packed(b.keys, b.key_width, b.values, b.offsets) == (keys, values)


def _bad_batches():
    ok = np.array([0, 1, 2], dtype=np.int64)
    return [
        ("keys not bytes", (bytearray(b"ab"), 1, b"xy", ok), "must be bytes"),
        ("width 0", (b"ab", 0, b"xy", ok), "not keys of"),
        ("width bool", (b"ab", True, b"xy", ok), "not keys of"),
        ("partial key", (b"abc", 2, b"xy", ok), "not keys of"),
        ("offsets not numpy", (b"ab", 1, b"xy", [0, 1, 2]), "int64 array"),
        ("offsets int32", (b"ab", 1, b"xy", ok.astype(np.int32)), "int64 array"),
        ("offsets count", (b"ab", 1, b"xy", ok[:2]), "value offsets for"),
        ("offsets start", (b"ab", 1, b"xy", np.array([1, 1, 2], np.int64)), "rise from 0"),
        ("offsets end", (b"ab", 1, b"xyz", ok), "rise from 0"),
        ("offsets decrease", (b"abc", 1, b"xy", np.array([0, 2, 1, 2], np.int64)), "rise from 0"),
        ("duplicate", (b"aa", 1, b"xy", ok), "batch item 1: duplicate key"),
        ("unsorted", (b"ba", 1, b"xy", ok), "batch item 1: keys not sorted ascending"),
    ]


@pytest.mark.parametrize("name, args, message", _bad_batches(), ids=[b[0] for b in _bad_batches()])
def test_bad_packed_batches_raise_the_same_error_in_both(name, args, message):
    for impl in MEMTABLES:
        with pytest.raises(InvalidArgumentError, match=message):
            impl.check_packed(*args)


@pytest.mark.parametrize("impl", MEMTABLES, ids=lambda m: m.__name__)
def test_split_packed_bounds_checks_every_value(impl):
    with pytest.raises(InvalidArgumentError, match="outside"):
        impl.split_packed(b"ab", 1, b"xy", np.array([0, 3, 2], np.int64))
    with pytest.raises(InvalidArgumentError, match="outside"):
        impl.split_packed(b"ab", 1, b"xy", np.array([0, -1, 2], np.int64))


def _build(impl, add, block_size):
    """An SST-like byte string of every block a builder makes with ``add``, plus its accounting."""
    builder = impl.BlockBuilder(4)
    blocks = []
    add(builder, blocks, block_size)
    if builder.block_entry_count:
        blocks.append(builder.finish_block())
    return blocks, builder.key_count, builder.smallest_key, builder.last_key, list(builder.key_hashes)


@given(sorted_batches(), st.integers(0, 1 << 40), st.sampled_from([40, 200, 4096]))
def test_add_packed_builds_what_add_batch_builds(case, epoch, block_size):
    keys, values, width = case
    b = packed_of(keys, values, width)
    prefix = (7).to_bytes(4, "big")
    full = [prefix + k + ((1 << 64) - 1 - epoch).to_bytes(8, "big") for k in keys]

    def by_batch(builder, blocks, size):
        i = 0
        while i < len(full):
            i = builder.add_batch(full, list(values), i, size)
            blocks.append(builder.finish_block())

    def by_packed(builder, blocks, size):
        i = 0
        while i < len(b):
            i = builder.add_packed(prefix, epoch, b.keys, b.key_width, b.values, b.offsets, i, size)
            blocks.append(builder.finish_block())

    results = [_build(impl, add, block_size) for impl in BLOCKS for add in (by_batch, by_packed)]
    assert all(r == results[0] for r in results)


@st.composite
def long_sorted_batches(draw):
    """Up to 120 keys sharing long prefixes (restart points, shared lengths up to the width)."""
    width = draw(st.integers(1, 10))
    stem = draw(st.binary(min_size=width, max_size=width))
    cut = draw(st.integers(0, width))
    tails = draw(st.lists(st.binary(min_size=width - cut, max_size=width - cut), max_size=120))
    keys = sorted({stem[:cut] + t for t in tails})
    values = draw(st.lists(st.binary(max_size=12), min_size=len(keys), max_size=len(keys)))
    return keys, values, width


@given(long_sorted_batches(), st.integers(0, 1 << 40), st.sampled_from([60, 300, 4096]), st.sampled_from([1, 2, 3, 16]),
       st.sampled_from([None, 1, 3, 9]), st.booleans())
def test_add_packed_accounts_as_add_does(case, epoch, block_size, restart_interval, prefix_len, earlier):
    """The packed path (its first entry checked and accounted in full, the rest as known
    continuations of it) against one ``add`` per entry in both twins: the same blocks and the
    same SST-wide accounting -- filter and prefix hashes, live counts, table ids, epochs,
    first and last keys -- over restart intervals, declared prefixes and a builder already
    holding an entry of the table (so the packed call continues its block)."""
    keys, values, width = case
    b = packed_of(keys, values, width)
    prefix = (7).to_bytes(4, "big")
    inverted = ((1 << 64) - 1 - epoch).to_bytes(8, "big")
    full = [prefix + k + inverted for k in keys]
    lens = None if prefix_len is None else {7: prefix_len}
    first_full = prefix + ((1 << 64) - 1 - (epoch + 1)).to_bytes(8, "big")   # the bare table id: below them all

    def run(impl, packed):
        builder, blocks = impl.BlockBuilder(restart_interval, lens), []
        if earlier:
            builder.add(first_full, b"e")
        if packed:
            i = 0
            while i < len(b):
                i = builder.add_packed(prefix, epoch, b.keys, b.key_width, b.values, b.offsets, i, block_size)
                if builder.block_entry_count and (i < len(b) or builder.block_size_estimate >= block_size):
                    blocks.append(builder.finish_block())
        else:
            for key, value in zip(full, values):
                if builder.block_entry_count and builder.block_size_estimate >= block_size:
                    blocks.append(builder.finish_block())
                builder.add(key, value)
        if builder.block_entry_count:
            blocks.append(builder.finish_block())
        return (b"".join(blocks), builder.key_count, builder.tombstone_count, builder.smallest_key, builder.last_key,
                list(builder.key_hashes), list(builder.prefix_hashes), builder.live_counts, list(builder.table_ids),
                builder.min_epoch, builder.max_epoch)

    for impl in BLOCKS:
        packed, listed = run(impl, True), run(impl, False)
        assert packed[1:] == listed[1:]
        assert packed == run(BLOCKS[0], True)


@pytest.mark.parametrize("impl", BLOCKS, ids=lambda m: m.__name__)
def test_add_packed_refuses_keys_out_of_order_and_keeps_the_last_added(impl):
    """A packed batch whose keys stop ascending (equal or smaller) raises where they do; the
    entries before it stay added and ``last_key`` names the last of them."""
    prefix, epoch = (7).to_bytes(4, "big"), 5
    inverted = ((1 << 64) - 1 - epoch).to_bytes(8, "big")
    for bad in (b"c", b"b"):   # a repeat, then a smaller key
        b = packed_of([b"a", b"c", bad, b"d"], [b"1", b"2", b"3", b"4"], 1)
        builder = impl.BlockBuilder(16)
        with pytest.raises(InvalidArgumentError, match="strictly increasing"):
            builder.add_packed(prefix, epoch, b.keys, 1, b.values, b.offsets, 0, 4096)
        assert builder.key_count == 2 and builder.last_key == prefix + b"c" + inverted
        assert builder.block_entry_count == 2


@pytest.mark.parametrize("impl", BLOCKS, ids=lambda m: m.__name__)
def test_add_packed_refuses_what_it_cannot_read(impl):
    ok = np.array([0, 1, 2], dtype=np.int64)
    cases = [((b"abc", 1, b"ab", 1, b"xy", ok, 0, 100), "4-byte table id"),
             ((b"tttt", 1, b"abc", 2, b"xy", ok, 0, 100), "not keys of"),
             ((b"tttt", 1, b"ab", 1, b"xy", ok[:2], 0, 100), "value offsets for"),
             ((b"tttt", 1, b"ab", 1, b"xy", ok, 3, 100), "start"),
             ((b"tttt", 1, b"ab", 1, b"xy", np.array([0, 5, 2], np.int64), 0, 100), "outside")]
    for args, message in cases:
        with pytest.raises(InvalidArgumentError, match=message):
            impl.BlockBuilder(4).add_packed(*args)


# --- end to end --------------------------------------------------------------------------

SCHEMA = [("id", T.BIGINT), ("grp", T.INT), ("price", T.BIGINT), ("name", T.VARCHAR), ("score", T.DOUBLE)]


def _chunk(rows):
    cols = list(zip(*rows)) if rows else [[] for _ in SCHEMA]
    return [pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.int32()), pa.array(cols[2], pa.int64()),
            pa.array(cols[3], pa.string()), pa.array(cols[4], pa.float64())]


def _row(pk, draw):
    return (pk, draw(st.integers(-5, 5)), draw(st.one_of(st.none(), st.integers(-(1 << 63), (1 << 63) - 1))),
            draw(st.one_of(st.none(), st.text(max_size=6))), draw(st.one_of(st.none(), st.floats(allow_nan=False))))


@st.composite
def epochs(draw):
    out = []
    for _ in range(draw(st.integers(1, 4))):
        steps = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["insert", "insert", "insert", "delete", "read", "spill"]))
            if kind == "insert":
                pks = draw(st.lists(st.integers(-20, 60), min_size=1, max_size=12))
                steps.append(("insert", [_row(pk, draw) for pk in pks]))
            elif kind == "delete":
                steps.append(("delete", draw(st.lists(st.integers(-20, 60), min_size=1, max_size=4, unique=True))))
            else:
                steps.append((kind, draw(st.integers(-20, 60))))
        out.append(steps)
    return out


def _scan(table):
    return [tuple(r) for r in table.iter_with_prefix(())]


@settings(max_examples=40, deadline=None)
@given(epochs())
def test_packed_table_equals_the_model_and_the_list_path(tmp_path_factory, plan):
    path = tmp_path_factory.mktemp("packed")
    with HummockStorage.open(str(path), StorageOptions(compactor="none")) as store:
        packed = StateTable(store, 1, SCHEMA, [0], consistent=False, flush_threshold=1 << 30)
        listed = StateTable(store, 2, SCHEMA, [0], consistent=False, flush_threshold=1 << 30)
        listed._packed_insert = lambda columns, n: False   # the list path only
        epoch = new_epoch()
        for t in (packed, listed):
            t.init_epoch(epoch)
        model = {}
        for steps in plan:
            for kind, arg in steps:
                if kind == "insert":
                    rows = list(arg)
                    for t in (packed, listed):
                        t.write_chunk(np.ones(len(rows), np.int16), _chunk(rows))
                    for r in rows:   # relaxed: a repeated pk keeps its last row
                        model[r[0]] = r
                elif kind == "delete":
                    rows = [model[pk] for pk in arg if pk in model]
                    if rows:
                        for t in (packed, listed):
                            t.write_chunk(np.full(len(rows), 2, np.int16), _chunk(rows))
                        for r in rows:
                            del model[r[0]]
                elif kind == "read":   # read-after-write inside the epoch turns packed runs into records
                    assert packed.get_row((arg,)) == listed.get_row((arg,)) == model.get(arg)
                else:                  # a spill inside the epoch
                    for t in (packed, listed):
                        t.flush_threshold = 0
                        t.try_flush()
                        t.flush_threshold = 1 << 30
            nxt = epoch + (1 << 16)
            for t in (packed, listed):
                t.commit(nxt)
            store.checkpoint(epoch)
            epoch = nxt
            expected = [model[k] for k in sorted(model)]
            assert _scan(packed) == _scan(listed) == expected


def test_a_write_only_epoch_is_flushed_from_its_buffers(tmp_path):
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        table = StateTable(store, 1, SCHEMA, [0], consistent=False)
        epoch = new_epoch()
        table.init_epoch(epoch)
        rows = [(i, i % 3, i * 10, f"n{i}", i / 2) for i in range(1000)]
        table.write_chunk(np.ones(500, np.int16), _chunk(rows[:500]))
        table.write_chunk(np.ones(500, np.int16), _chunk(rows[500:]))
        table.commit(epoch + (1 << 16))
        (imm,) = store._buffer.all_imms()
        assert type(imm) is PackedImm and len(imm) == 1000   # two runs that follow: one batch
        store.checkpoint(epoch)
        assert imm.packed._lists is None   # flushed without a bytes object per entry
        assert _scan(table) == rows


def test_chunks_it_cannot_pack_take_the_list_path(tmp_path):
    """A pk that repeats inside a chunk, a NULL-free pk that is not an integer, a value column
    from a Python list: all still written, through the general path."""
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        table = StateTable(store, 1, SCHEMA, [0], consistent=False)
        texts = StateTable(store, 2, [("k", T.VARCHAR), ("v", T.BIGINT)], [0], consistent=False)
        epoch = new_epoch()
        table.init_epoch(epoch)
        texts.init_epoch(epoch)
        table.write_chunk([1, 1], _chunk([(5, 1, 1, "a", 1.0), (5, 2, 2, "b", 2.0)]))
        table.write_chunk([1], [[6], [1], [2], ["c"], [3.0]])
        texts.write_chunk([1, 1], [pa.array(["x", "y"]), pa.array([1, 2])])
        for t in (table, texts):
            t.commit(epoch + (1 << 16))
        assert not any(type(imm) is PackedImm for imm in store._buffer.all_imms())
        store.checkpoint(epoch)
        assert _scan(table) == [(5, 2, 2, "b", 2.0), (6, 1, 2, "c", 3.0)]
        assert _scan(texts) == [("x", 1), ("y", 2)]


def test_a_table_read_while_written_stops_packing(tmp_path):
    """An upsert table reads its pks every chunk: once a packed run had to be turned back into
    records, the table writes lists (packing would pay for the lists twice); answers unchanged."""
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        table = StateTable(store, 1, SCHEMA, [0], consistent=False)
        epoch = new_epoch()
        table.init_epoch(epoch)
        first = [(i, 0, i, "a", 0.5) for i in range(10)]
        table.write_chunk(np.ones(10, np.int16), _chunk(first))
        assert table.mem.packed_settled == 0
        assert table.get_row((3,)) == first[3]          # the read settles the packed run
        assert table.mem.packed_settled == 1
        second = [(i, 1, i, "b", 1.5) for i in range(10, 20)]
        table.write_chunk(np.ones(10, np.int16), _chunk(second))
        assert not any(type(run) is not tuple for run in table.mem._runs)   # a list run now
        table.commit(epoch + (1 << 16))
        assert not any(type(imm) is PackedImm for imm in store._buffer.all_imms())
        store.checkpoint(epoch)
        assert _scan(table) == first + second
        assert table.mem.packed_settled == 1            # kept across the commit
