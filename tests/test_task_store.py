"""TaskStore (hummock/task_store.py): a Spark task's view of a pinned version plus its own writes.

A hypothesis model test: a writer commits data in several tables over several epochs (some
compacted, table 2 with watermarks); a TaskStore pinned at its version writes, deletes and
raises watermarks at its epoch ``e``; reads at every readable epoch (below, at and above
``e``; get, multi_get, iter both ways, bounded iter, scan_prefixes) equal a dict-of-versions
model. Then ``finish`` + ``commit_ssts`` (with a row of the driver's own at ``e``) and the
writer's reads at ``e`` equal the model, again after ``compact_all()`` and after a reopen.
Also: StateTable runs over a TaskStore unchanged; ``finish``'s spill offsets, id exhaustion,
output encoding; every bad argument raises a typed error. Both modes (native and pure).
"""

import pickle
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions
from hummock.errors import CorruptionError, ExpiredEpochError, HummockError, InvalidArgumentError
from hummock.task_store import TaskOutput, TaskStore
from hummock.version_codec import encode_version

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=4096, block_size=512)
TABLES = (1, 2, 3)
DRIVER_TABLE = 9
SUFFIXES = [b"", b"a", b"ab", b"b", b"c", b"ca"]
KEYS = sorted(v.to_bytes(2, "big") + s for v in range(3) for s in SUFFIXES)


# --- the model ---------------------------------------------------------------------------------

class Model:
    """Per table: key -> [(versioned epoch, value or None)]; watermarks: table -> [(epoch,
    {vnode: W})] (ranges ``(b"", W)``: the hull of two is the larger W)."""

    def __init__(self):
        self.versions = {}
        self.marks = {}

    def write(self, table, pairs, epoch):
        for key, value in pairs:
            self.versions.setdefault(table, {}).setdefault(key, []).append((epoch, value))

    def watermark(self, table, epoch, vnode, w):
        self.marks.setdefault(table, []).append((epoch, vnode, w))

    def _ranges(self, table, read):
        out = {}
        for epoch, vnode, w in self.marks.get(table, ()):
            if epoch <= read:
                out[vnode] = max(out.get(vnode, b""), w)
        return out

    def read(self, table, epoch) -> dict:
        read = epoch | 0xFFFF
        ranges = self._ranges(table, read)
        out = {}
        for key, versions in self.versions.get(table, {}).items():
            seen = [(e, v) for e, v in versions if e <= read]
            if not seen:
                continue
            value = max(seen, key=lambda ev: ev[0])[1]
            w = ranges.get(key[0] << 8 | key[1])
            if value is not None and not (w is not None and key[2:] < w):
                out[key] = value
        return dict(sorted(out.items()))


def check_reads(store, model, tables, epochs):
    for epoch in epochs:
        for table in tables:
            want = model.read(table, epoch)
            assert dict(store.iter(table, epoch)) == want, (table, epoch)
            assert list(store.iter(table, epoch, reverse=True)) == list(reversed(list(want.items())))
            assert [store.get(table, k, epoch) for k in KEYS] == [want.get(k) for k in KEYS]
            assert store.multi_get(table, KEYS, epoch) == [want.get(k) for k in KEYS]
            lo, hi = KEYS[3], KEYS[11]
            assert list(store.iter(table, epoch, lo, hi)) == [(k, v) for k, v in want.items() if lo <= k < hi]
            prefixes = [b"\x00\x01", b"\x00\x02c", b"\x00\x07"]
            keys, values, ends = store.scan_prefixes(table, epoch, prefixes)
            start = 0
            for p, end in zip(prefixes, ends):
                assert list(zip(keys[start:end], values[start:end])) == [
                    (k, v) for k, v in want.items() if k.startswith(p)]
                start = end


# --- strategies ------------------------------------------------------------------------------

values = st.one_of(st.none(), st.binary(min_size=1, max_size=3))
batch = st.dictionaries(st.sampled_from(KEYS), values, min_size=1, max_size=8).map(lambda d: sorted(d.items()))
base_epoch = st.fixed_dictionaries({
    "writes": st.dictionaries(st.sampled_from(TABLES), batch, max_size=3),
    "mark": st.one_of(st.none(), st.tuples(st.integers(0, 2), st.sampled_from(SUFFIXES[1:]))),
    "compact": st.sampled_from([None, "all", "table1"]),
})
task_op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(TABLES), batch),
    st.tuples(st.just("mark"), st.sampled_from(TABLES), st.tuples(st.integers(0, 2), st.sampled_from(SUFFIXES[1:]))),
)


@settings(max_examples=30)
@given(st.lists(base_epoch, min_size=1, max_size=3), st.lists(task_op, max_size=8), st.integers(0, 3))
def test_task_store_reads_and_commit_equal_the_model(base, ops, spill_offset):
    url = f"memory://ts-{uuid.uuid4().hex}"
    model = Model()
    with HummockStorage.open(url, OPTIONS) as db:
        for n, step in enumerate(base, start=1):
            epoch = n * E
            for table, pairs in sorted(step["writes"].items()):
                db.ingest_batch(table, pairs, epoch)
                model.write(table, pairs, epoch)
            if step["mark"] is not None:
                vnode, w = step["mark"]
                db.update_table_watermarks(2, epoch, {vnode: w})
                model.watermark(2, epoch, vnode, w)
            db.checkpoint(epoch)
            if step["compact"] == "all":
                db.compact_all()
            elif step["compact"] == "table1":
                db.compact_range(1)
        version = db.version()
        committed = version.max_committed_epoch
        # a gap: reads between the version and e see the version. Above the store's committed epoch,
        # which an idle checkpoint (no writes) advances without a new version
        e = max(committed, db.max_committed_epoch) + 2 * E
        task = TaskStore(db._store, encode_version(version), e, options=OPTIONS)
        readable = sorted({max(x, version.safe_epoch) for x in (n * E for n in range(1, len(base) + 1))})
        check_reads(task, model, TABLES, readable)
        for op in ops:
            if op[0] == "write":
                _, table, pairs = op
                task.ingest_batch(table, pairs, e)
                model.write(table, pairs, e + spill_offset + _batches(task, table) - 1)
            else:
                _, table, (vnode, w) = op
                task.update_table_watermarks(table, e, {vnode: w})
                model.watermark(table, e, vnode, w)
        check_reads(task, model, TABLES, readable + [committed + E, e, e + E])
        assert task.max_committed_epoch == committed and task.epoch == e

        output = task.finish(db.reserve_sst_ids(64, hold=False), spill_offset=spill_offset)
        assert pickle.loads(pickle.dumps(output)) == output == TaskOutput.from_bytes(output.to_bytes())
        written = {}
        for op in ops:
            if op[0] == "write":
                written.setdefault(op[1], set()).update(k[0] << 8 | k[1] for k, _ in op[2])
        assert output.tables_written == {t: tuple(sorted(v)) for t, v in sorted(written.items())}
        for table, ranges in output.watermarks.items():   # the ranges a read applies now
            assert ranges == {v: task.table_watermarks(table).latest[v] for v in ranges}

        db.ingest_batch(DRIVER_TABLE, [(b"progress", b"%d" % e)], e)   # the driver's own row
        model.write(DRIVER_TABLE, [(b"progress", b"%d" % e)], e)
        db.commit_ssts(e, output.ssts, table_watermarks=output.watermarks)
        assert db.max_committed_epoch == e
        check_reads(db, model, TABLES + (DRIVER_TABLE,), [e])
        db.compact_all()
        check_reads(db, model, TABLES + (DRIVER_TABLE,), [e])
    with HummockStorage.open(url, OPTIONS) as db:
        check_reads(db, model, TABLES + (DRIVER_TABLE,), [e])


def _batches(task, table) -> int:
    """How many batches of ``table`` the task holds (the newest one's spill offset + 1)."""
    return sum(1 for imm in task._buffer.imms(table))


def _store_with_data(url=None):
    db = HummockStorage.open(url or f"memory://{uuid.uuid4().hex}", OPTIONS)
    db.ingest_batch(1, [(k, b"v1") for k in KEYS], E)
    db.update_table_watermarks(1, E, {0: b"a"})
    db.checkpoint(E)
    return db


def test_state_table_runs_over_a_task_store_unchanged():
    from relational.state_table import StateTable
    from relational.types import DataType as T

    schema = [("k", T.BIGINT), ("v", T.VARCHAR)]
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        table = StateTable(db, 5, schema, [0], prefix_len_hint=1)
        table.init_epoch(E)
        for i in range(50):
            table.insert([i, f"a{i}"])
        table.commit(2 * E)
        db.checkpoint(E)
        task = TaskStore(db._store, db.version(), 3 * E, options=OPTIONS)
        mine = StateTable(task, 5, schema, [0], prefix_len_hint=1)
        mine.init_epoch(3 * E)
        assert mine.get_row([7]) == (7, "a7")
        mine.delete((7, "a7"))
        mine.update([8, "a8"], [8, "b8"])
        mine.insert([100, "new"])
        assert mine.get_row([7]) is None
        mine.update_watermark(3)   # rows with k < 3 disappear at the commit
        assert [list(r) for r in mine.rows_with_prefixes([(9,), (100,)])[1]] == [[100, "new"]]
        mine.commit(4 * E)   # ingests at 3E, then the watermark at 3E
        assert task.table_options(5)["prefix_len"] == table.prefix_len
        expected = [[i, "b8" if i == 8 else f"a{i}"] for i in range(3, 50) if i != 7] + [[100, "new"]]
        assert [list(r) for r in mine.iter_with_prefix()] == expected
        output = task.finish(db.reserve_sst_ids(8, hold=False))
        assert output.ssts and output.watermarks[5]
        db.commit_ssts(3 * E, output.ssts, table_watermarks=output.watermarks)
        reader = StateTable(db, 5, schema, [0])
        reader.init_epoch(5 * E)
        assert [list(r) for r in reader.iter_with_prefix()] == expected


def test_finish_spill_offsets_ids_and_refusals():
    db = _store_with_data()
    try:
        task = TaskStore(db._store, db.version(), 2 * E, options=OPTIONS)
        for n in range(3):
            task.ingest_batch(1, [(KEYS[7], b"n%d" % n)], 2 * E)
        assert task.get(1, KEYS[7], 2 * E) == b"n2"
        with pytest.raises(InvalidArgumentError, match="versions"):
            task.finish(range(1000, 1010), spill_offset=0xFFFF - 1)
        with pytest.raises(InvalidArgumentError, match="sst_ids ran out"):
            task.finish([])
        with pytest.raises(InvalidArgumentError, match="sst_ids"):
            task.finish(["x"])
        with pytest.raises(InvalidArgumentError, match="spill_offset"):
            task.finish(range(10), spill_offset=-1)
        task.update_table_watermarks(1, 2 * E, {3: (b"x", None)})    # an open-ended range
        out = task.finish(db.reserve_sst_ids(4, hold=False), spill_offset=5)
        assert [(i.min_epoch, i.max_epoch) for i in out.ssts] == [(2 * E + 5, 2 * E + 7)]
        assert out.watermarks == {1: {3: (b"x", None)}} and out.tables_written == {1: (1,)}
        assert TaskOutput.from_bytes(out.to_bytes()) == out == pickle.loads(pickle.dumps(out))
        with pytest.raises(InvalidArgumentError, match="after finish"):
            task.ingest_batch(1, [(KEYS[1], b"x")], 2 * E)
        with pytest.raises(InvalidArgumentError, match="already"):
            task.finish(range(10))
        assert task.get(1, KEYS[7], 2 * E) == b"n2"    # reads go on
        empty = TaskStore(db._store, db.version(), 2 * E, options=OPTIONS).finish([])
        assert empty == TaskOutput()
    finally:
        db.close()


def test_bad_arguments_raise_typed_errors():
    db = _store_with_data()
    try:
        version = db.version()
        for epoch in (E, 0, E + 1, -1, "x", True, 2**64):
            with pytest.raises(InvalidArgumentError):
                TaskStore(db._store, version, epoch)
        with pytest.raises(InvalidArgumentError):
            TaskStore(db._store, {"not": "a version"}, 2 * E)
        with pytest.raises(HummockError):
            TaskStore(db._store, b"garbage", 2 * E)
        with pytest.raises(InvalidArgumentError):
            TaskStore(db._store, version, 2 * E, options={"target_sst_size": 1})
        task = TaskStore(db._store, version, 2 * E, options=OPTIONS)
        for call in (lambda: task.ingest_batch(1, [(b"a", b"1")], 3 * E),
                     lambda: task.ingest_batch(1, [(b"a", b"1")], float(2 * E)),
                     lambda: task.ingest_batch(1, [(b"b", b"1"), (b"a", b"1")], 2 * E),
                     lambda: task.ingest_batch(-1, [(b"a", b"1")], 2 * E),
                     lambda: task.ingest_batch(1, [("a", b"1")], 2 * E),
                     lambda: task.update_table_watermarks(1, 3 * E, {0: b"z"}),
                     lambda: task.update_table_watermarks(1, 2 * E, {70000: b"z"}),
                     lambda: task.update_table_watermarks(1, 2 * E, {0: (b"x", b"y")}),   # disjoint
                     lambda: task.set_table_options(1, prefix_len=0),
                     lambda: task.truncate_table(1, 2 * E),
                     lambda: task.get(1, "k", 2 * E),
                     lambda: task.iter(1, -1)):
            with pytest.raises(InvalidArgumentError):
                call()
        assert task.stats() == {"imms": 0, "buffered_bytes": 0}
        assert task.table_watermarks(1).latest == {0: (b"", b"a")}
        for junk in (b"", b"\x09junk", b"\x01junk", b"\x01{}", b'\x01{"ssts":[1],"watermarks":[],"tables_written":[]}',
                     b'\x01{"ssts":[],"watermarks":[[1,[[0,"zz",null]]]],"tables_written":[]}',
                     b'\x01{"ssts":[],"watermarks":[[1,[[0,"02","01"]]]],"tables_written":[]}',
                     b'\x01{"ssts":[],"watermarks":[],"tables_written":[[-1,[]]]}'):
            with pytest.raises(CorruptionError):
                TaskOutput.from_bytes(junk)
    finally:
        db.close()


def test_reads_below_the_safe_epoch_are_refused():
    db = _store_with_data()
    try:
        db.ingest_batch(1, [(KEYS[7], b"v2")], 2 * E)
        db.checkpoint(2 * E)
        db.compact_all()
        task = TaskStore(db._store, db.version(), 3 * E, options=OPTIONS)
        assert task.min_readable_epoch == 2 * E
        with pytest.raises(ExpiredEpochError):
            task.get(1, KEYS[7], E)
        assert task.get(1, KEYS[7], 2 * E) == b"v2"
    finally:
        db.close()


def test_storage_table_snapshot_reads_over_a_task_store():
    """``StorageTable`` (snapshot reads at committed epochs) runs over a TaskStore unchanged:
    it sees the pinned version, never the task's own uncommitted writes."""
    from relational.state_table import StateTable
    from relational.storage_table import StorageTable
    from relational.types import DataType as T

    schema = [("k", T.BIGINT), ("v", T.VARCHAR)]
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        table = StateTable(db, 5, schema, [0])
        table.init_epoch(E)
        for i in range(20):
            table.insert([i, f"a{i}"])
        table.commit(2 * E)
        db.checkpoint(E)
        task = TaskStore(db._store, db.version(), 3 * E, options=OPTIONS)
        task.ingest_batch(5, [(k, None) for k, _ in db.iter(5, E)], 3 * E)   # the task deletes all
        scan = StorageTable(task, 5, schema, [0])
        rows = [r for b in scan.batch_iter(E) for r in b.to_pylist()]
        assert rows == [{"k": i, "v": f"a{i}"} for i in range(20)]
        assert scan.get_row((3,), E) == (3, "a3")
        assert list(task.iter(5, 3 * E)) == []
        with task.snapshot() as snap:
            assert snap.epoch == E and len(list(snap.iter(5))) == 20
        with pytest.raises(InvalidArgumentError):
            snap.get(5, b"x")                      # released
        with pytest.raises(InvalidArgumentError):
            task.snapshot(3 * E)                   # not committed in the pinned version
