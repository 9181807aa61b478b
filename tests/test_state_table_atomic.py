"""StateTable writes are all or nothing (relational/state_table.py, issue 10 part 5).

- A refused ingest (``ingest_batch`` raising: the store's own ``InvalidArgumentError``, a
  ``StoreClosedError``, an ``ObjectStoreError`` while it spills) at ``commit`` or ``try_flush``
  leaves the MemTable, the watermark and the table's epoch exactly as before; reads still see
  the rows; calling ``commit`` again retries, and after ``store.checkpoint`` a StorageTable
  reads exactly the model.
- ``init_epoch``/``commit`` refuse bad epochs with ``EpochError`` naming the values, changing
  nothing.
- Strict writes that raise change nothing: an ``update`` moving a row onto a pk written this
  epoch, a ``write_chunk`` whose 5th row is inconsistent (batched all-insert path and row path),
  a chunk with an unknown op, a chunk whose storage probe fails.

Faults come through seams the test owns: a store proxy refusing ``ingest_batch`` (or ``get``),
and an object store refusing SST uploads under a real spill.
"""

import numpy as np
import pyarrow as pa
import pytest

from hummock import HummockStorage, StoreClosedError
from hummock.errors import InvalidArgumentError
from hummock.key import EPOCH_SPILL_MASK, new_epoch
from hummock.object_store import MemoryObjectStore
from hummock.object_store.base import ObjectStoreError
from relational.errors import EpochError, InconsistentOpError, SchemaError
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from table_stores import OPTIONS, opener

SCHEMA = [("id", T.BIGINT), ("a", T.INT), ("s", T.VARCHAR)]


class FaultyStore:
    """A HummockStorage proxy: ``refuse_ingest(exc, times)`` makes the next ``times`` calls of
    ``ingest_batch`` raise ``exc`` without reaching the store (as the store itself refuses:
    nothing written); ``fail_get_after(n, exc)`` lets ``n`` point reads through (``get``s, or
    keys of ``multi_get`` calls, which fail whole), then raises."""

    def __init__(self, store):
        self._store = store
        self._ingest_faults = []
        self._gets_left = None
        self._get_exc = None
        self.ingest_calls = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def refuse_ingest(self, exc, times=1):
        self._ingest_faults += [exc] * times

    def fail_get_after(self, n, exc):
        self._gets_left, self._get_exc = n, exc

    def ingest_batch(self, table_id, kv_pairs, epoch):
        self.ingest_calls += 1
        if self._ingest_faults:
            raise self._ingest_faults.pop(0)
        return self._store.ingest_batch(table_id, kv_pairs, epoch)

    def get(self, table_id, key, epoch):
        if self._gets_left is not None:
            if self._gets_left == 0:
                raise self._get_exc
            self._gets_left -= 1
        return self._store.get(table_id, key, epoch)

    def multi_get(self, table_id, keys, epoch):
        keys = list(keys)
        if self._gets_left is not None:
            if self._gets_left < len(keys):   # one call: it fails as a whole
                self._gets_left = 0
                raise self._get_exc
            self._gets_left -= len(keys)
        return self._store.multi_get(table_id, keys, epoch)


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    s = opener(request.param, tmp_path, request)()
    yield s
    s.close()


def _table(store, **kw):
    t = StateTable(store, 1, SCHEMA, [0], **kw)
    t.init_epoch(new_epoch())
    return t


def _state(table):
    """Everything a refused operation must leave unchanged."""
    return table.epoch, dict(table.mem.records), table._watermark


def _stored_rows(store, epoch, **kw):
    reader = StorageTable(store, 1, SCHEMA, [0], **kw)
    return [tuple(r.values()) for b in reader.batch_iter(epoch) for r in b.to_pylist()]


REFUSALS = [InvalidArgumentError("refused by the store"), StoreClosedError("the store is closed"),
            ObjectStoreError("injected: upload failed during a spill", path="sst/1.sst")]


# --- refused ingest at commit and try_flush ----------------------------------------------------

@pytest.mark.parametrize("exc", REFUSALS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("consistent", [True, False])
def test_refused_commit_keeps_the_epoch_and_a_retry_commits_it(store, exc, consistent):
    faulty = FaultyStore(store)
    t = _table(faulty, consistent=consistent)
    for i in range(10):
        t.insert((i, i, f"r{i}"))
    e1 = t.epoch
    t.commit(new_epoch())
    store.checkpoint(e1)
    model = {i: (i, i, f"r{i}") for i in range(10)}
    # the epoch under test: inserts, updates, deletes (also of rows written in this epoch)
    t.insert((20, 20, "new"))
    t.update(model[3], (3, 33, "changed"))
    t.delete(model[5])
    t.write_chunk([OP_INSERT] * 3, [[30, 31, 32], [0, 1, 2], ["c30", "c31", "c32"]])
    t.delete((31, 1, "c31"))
    model.update({20: (20, 20, "new"), 3: (3, 33, "changed"), 30: (30, 0, "c30"), 32: (32, 2, "c32")})
    del model[5]
    before = _state(t)
    faulty.refuse_ingest(exc)
    with pytest.raises(type(exc)):
        t.commit(new_epoch())
    assert _state(t) == before
    assert [t.get_row((k,)) for k in range(40)] == [model.get(k) for k in range(40)]
    assert list(t.iter_with_prefix()) == sorted(model.values())
    e2 = t.epoch
    t.commit(new_epoch())                   # the retry
    assert len(t.mem) == 0 and t.epoch > e2
    store.checkpoint(e2)
    assert _stored_rows(store, e2) == sorted(model.values())
    assert _stored_rows(store, e1) == [(i, i, f"r{i}") for i in range(10)]


@pytest.mark.parametrize("exc", REFUSALS, ids=lambda e: type(e).__name__)
def test_refused_try_flush_keeps_the_rows(store, exc):
    faulty = FaultyStore(store)
    t = _table(faulty, flush_threshold=1)
    t.write_chunk([OP_INSERT] * 50, [list(range(50)), [1] * 50, ["x"] * 50])
    before = _state(t)
    faulty.refuse_ingest(exc)
    with pytest.raises(type(exc)):
        t.try_flush()
    assert _state(t) == before
    assert len(list(t.iter_with_prefix())) == 50
    with pytest.raises(InconsistentOpError):      # strict checks still see the rows
        t.insert((7, 0, "again"))
    assert t.try_flush() and len(t.mem) == 0
    assert [r[0] for r in t.iter_with_prefix()] == list(range(50))
    e = t.epoch
    t.commit(new_epoch())
    store.checkpoint(e)
    assert len(_stored_rows(store, e)) == 50


def test_refused_commit_keeps_the_watermark_cleaning_for_the_retry(store):
    faulty = FaultyStore(store)
    t = _table(faulty)
    for i in range(10):
        t.insert((i, 0, "old"))
    t.commit(new_epoch())
    t.insert((10, 0, "new"))
    t.insert((11, 0, "new"))
    t.update((1, 0, "old"), (1, 1, "updated"))    # a MemTable record below the watermark
    t.update_watermark(5)
    before = _state(t)
    faulty.refuse_ingest(InvalidArgumentError("refused"))
    with pytest.raises(InvalidArgumentError):
        t.commit(new_epoch())
    assert _state(t) == before
    assert [r[0] for r in t.iter_with_prefix()] == list(range(12))   # nothing cleaned yet
    e = t.epoch
    t.commit(new_epoch())
    assert [r[0] for r in t.iter_with_prefix()] == [5, 6, 7, 8, 9, 10, 11]
    store.checkpoint(e)
    assert [r[0] for r in _stored_rows(store, e)] == [5, 6, 7, 8, 9, 10, 11]


def test_the_stores_own_refusal_keeps_the_rows(store):
    """A real refusal: the epoch was sealed under the table (another writer's barrier)."""
    t = _table(store)
    t.insert((1, 1, "a"))
    t.insert((2, 2, "b"))
    store.seal_epoch(t.epoch)
    before = _state(t)
    with pytest.raises(InvalidArgumentError):
        t.commit(new_epoch())
    assert _state(t) == before
    assert t.get_row((1,)) == (1, 1, "a") and t.get_row((2,)) == (2, 2, "b")


def test_a_closed_store_keeps_the_rows(tmp_path, request):
    store = opener("memory", tmp_path, request)()
    t = _table(store)
    t.insert((1, 1, "a"))
    store.close()
    before = _state(t)
    with pytest.raises(StoreClosedError):
        t.commit(new_epoch())
    assert _state(t) == before
    assert t.get_row((1,)) == (1, 1, "a")     # served by the MemTable


class FailingUploads(MemoryObjectStore):
    """A memory object store whose SST uploads fail (before writing) while ``failing``."""

    failing = False

    def _refuse(self, path):
        if self.failing and path.startswith("sst/"):
            raise ObjectStoreError("injected: SST upload refused", path=path)

    def _upload(self, path, data):
        self._refuse(path)
        return super()._upload(path, data)

    def _upload_if_absent(self, path, data):
        self._refuse(path)
        return super()._upload_if_absent(path, data)

    def _streaming_upload(self, path):
        self._refuse(path)
        return super()._streaming_upload(path)


def test_an_object_store_error_during_a_spill_keeps_the_rows():
    """Each epoch holds ~42 KiB in a 64 KiB shared buffer: the second commit's ingest spills
    the first epoch to an SST first, and that upload fails."""
    objects = FailingUploads()
    store = HummockStorage.open(objects, OPTIONS.replace(shared_buffer_capacity=64 * 1024))
    try:
        t = _table(store)
        rows = [(i, i, "v" * 400) for i in range(300)]
        epochs = []
        for part in range(3):              # three epochs, none checkpointed
            for r in rows[part * 100:(part + 1) * 100]:
                t.insert(r)
            if part == 1:
                objects.failing = True
                before = _state(t)
                with pytest.raises(ObjectStoreError, match="injected"):
                    t.commit(new_epoch())
                assert _state(t) == before
                assert t.get_row((199,)) == rows[199] and t.get_row((0,)) == rows[0]
                objects.failing = False
            epochs.append(t.epoch)
            t.commit(new_epoch())
        store.checkpoint(epochs[-1])
        assert _stored_rows(store, epochs[-1]) == rows
        assert _stored_rows(store, epochs[1]) == rows[:200]
    finally:
        store.close()


# --- epochs ------------------------------------------------------------------------------------

def test_bad_epochs_are_refused_and_change_nothing(store):
    t = StateTable(store, 1, SCHEMA, [0])
    for bad in (None, "1", 1.0 * (1 << 16), True, -(1 << 16), 1 << 64, (1 << 16) + 1):
        with pytest.raises(EpochError) as info:
            t.init_epoch(bad)
        assert repr(bad) in str(info.value) and info.value.epoch is bad
        assert t.epoch is None
    e = new_epoch()
    t.init_epoch(e)
    t.insert((1, 1, "a"))
    before = _state(t)
    for bad in (None, "x", float(e + (1 << 16)), True, e, e - (1 << 16), e + 1, e + (1 << 16) + 7):
        with pytest.raises(EpochError) as info:
            t.commit(bad)
        assert isinstance(info.value, InvalidArgumentError) and isinstance(info.value, ValueError)
        assert repr(bad) in str(info.value) and info.value.current == e
        assert _state(t) == before
    with pytest.raises(EpochError, match="spill"):
        t.commit(e + (1 << 16) + 1)
    with pytest.raises(EpochError, match=str(e)):
        t.commit(e)
    assert EPOCH_SPILL_MASK == (1 << 16) - 1
    t.commit(e + (1 << 16))
    assert t.epoch == e + (1 << 16) and t.get_row((1,)) == (1, 1, "a")
    with pytest.raises(EpochError):      # epochs only grow, also through init_epoch
        t.init_epoch(e)
    assert t.epoch == e + (1 << 16)


# --- strict writes that fail change nothing ----------------------------------------------------

def test_failed_update_onto_a_pk_written_this_epoch_changes_nothing(store):
    t = _table(store)
    t.insert((1, 1, "one"))
    t.commit(new_epoch())
    t.insert((2, 2, "two"))                  # pk 2 written this epoch
    before = _state(t)
    with pytest.raises(InconsistentOpError) as info:
        t.update((1, 1, "one"), (2, 9, "moved"))
    assert info.value.pk == (2,)
    assert _state(t) == before
    assert t.get_row((1,)) == (1, 1, "one") and t.get_row((2,)) == (2, 2, "two")
    with pytest.raises(InconsistentOpError) as info:   # the old row deleted this epoch
        t.delete((1, 1, "one"))
        t.update((1, 1, "one"), (3, 1, "moved"))
    assert info.value.pk == (1,) and t.get_row((3,)) is None


def _cols(ids, a=0):
    return [list(ids), [a] * len(ids), [f"s{i}" for i in ids]]


@pytest.mark.parametrize("where", ["storage", "memtable"])
def test_all_insert_chunk_with_a_bad_fifth_row_applies_nothing(store, where):
    """The batched path (the bad pk stored) and its row-path fallback (the bad pk in the MemTable)."""
    t = _table(store)
    t.insert((104, 0, "s104"))
    if where == "storage":
        t.commit(new_epoch())
    t.insert((500, 0, "s500"))
    before = _state(t)
    ids = [100, 101, 102, 103, 104, 105, 106, 107]
    with pytest.raises(InconsistentOpError) as info:
        t.write_chunk(np.full(8, OP_INSERT), _cols(ids))
    assert info.value.pk == (104,)
    assert _state(t) == before
    assert [t.get_row((i,)) for i in ids] == [None] * 4 + [(104, 0, "s104")] + [None] * 3


@pytest.mark.parametrize("bad", ["delete missing", "delete wrong old", "update wrong old", "insert existing"])
def test_mixed_chunk_with_a_bad_fifth_row_applies_nothing(store, bad):
    t = _table(store)
    for i in range(10):
        t.insert((i, 0, f"s{i}"))
    t.commit(new_epoch())
    t.insert((50, 0, "s50"))
    before = _state(t)
    rows = [(0, 0, "s0"), (60, 1, "n"), (1, 0, "s1"), (1, 5, "u")]
    ops = [OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT]
    fifth = {"delete missing": (OP_DELETE, (70, 0, "x")), "delete wrong old": (OP_DELETE, (2, 9, "s2")),
             "update wrong old": (OP_UPDATE_DELETE, (3, 9, "s3")), "insert existing": (OP_INSERT, (50, 1, "y"))}[bad]
    ops.append(fifth[0])
    rows.append(fifth[1])
    ops += [OP_INSERT, OP_DELETE]
    rows += [(61, 1, "n"), (4, 0, "s4")]
    cols = [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows], pa.int32()),
            pa.array([r[2] for r in rows])]
    with pytest.raises(InconsistentOpError) as info:
        t.write_chunk(pa.array(ops, pa.int8()), cols)
    assert info.value.pk == (fifth[1][0],)
    assert _state(t) == before
    assert t.get_row((0,)) == (0, 0, "s0") and t.get_row((1,)) == (1, 0, "s1") and t.get_row((60,)) is None


@pytest.mark.parametrize("consistent", [True, False])
def test_chunk_with_an_unknown_op_applies_nothing(store, consistent):
    t = _table(store, consistent=consistent)
    before = _state(t)
    with pytest.raises(SchemaError, match="unknown op 9 at row 4"):
        t.write_chunk([OP_INSERT] * 4 + [9, OP_INSERT], _cols(range(6)))
    assert _state(t) == before


def test_chunk_whose_storage_probe_fails_applies_nothing(store):
    faulty = FaultyStore(store)
    t = _table(faulty)
    for i in range(10):
        t.insert((i, 0, f"s{i}"))
    t.commit(new_epoch())
    before = _state(t)
    faulty.fail_get_after(3, StoreClosedError("the store is closed"))
    with pytest.raises(StoreClosedError):
        t.write_chunk([OP_DELETE] * 6, _cols(range(6)))
    assert _state(t) == before
    faulty.fail_get_after(None, None)
    t.write_chunk([OP_DELETE] * 6, _cols(range(6)))
    assert [r[0] for r in t.iter_with_prefix()] == [6, 7, 8, 9]
