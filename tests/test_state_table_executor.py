"""StateTable as stream executors use it (issue 11 part 5): ``write_chunk`` with a visibility
mask and mixed ops in one batch.

Every table test runs on a memory and a local store. The state machine against a dict model
(tests/test_state_table_stateful.py) covers the same calls in random sequences.
"""

import numpy as np
import pyarrow as pa
import pytest

from hummock.key import new_epoch
from relational.errors import InconsistentOpError, RowError, SchemaError
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.types import DataType as T
from table_stores import opener

SCHEMA = [("id", T.BIGINT), ("a", T.INT), ("s", T.VARCHAR)]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    s = opener(request.param, tmp_path, request)()
    yield s
    s.close()


def _table(store, schema=SCHEMA, pk=(0,), **kw):
    t = StateTable(store, 1, schema, list(pk), **kw)
    t.init_epoch(new_epoch())
    return t


def _commit(store, t):
    epoch = t.epoch
    t.commit(new_epoch())
    store.checkpoint(epoch)
    return epoch


def _cols(rows, types=(pa.int64(), pa.int32(), pa.string())):
    return [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)]


class CountingStore:
    """A store proxy counting point reads (``get`` calls and ``multi_get`` calls and keys)."""

    def __init__(self, store):
        self._store = store
        self.gets = self.multi_gets = self.multi_get_keys = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    def get(self, table_id, key, epoch):
        self.gets += 1
        return self._store.get(table_id, key, epoch)

    def multi_get(self, table_id, keys, epoch):
        keys = list(keys)
        self.multi_gets += 1
        self.multi_get_keys += len(keys)
        return self._store.multi_get(table_id, keys, epoch)


# --- write_chunk: visibility and the batched mixed path ---------------------------------------

@pytest.mark.parametrize("form", ["list", "numpy", "arrow", "arrow-nulls"])
def test_invisible_rows_are_skipped_entirely(store, form):
    t = _table(store)
    t.insert((1, 1, "one"))
    _commit(store, t)
    ops = [OP_INSERT, 9, OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, OP_DELETE]
    rows = [(2, 2, "two"), (3, 3, "bad op"), (1, 1, "one"), (1, 5, "again"), (4, 0, "missing"),
            (5, 0, "x"), (2, 2, "two")]
    visible = [True, False, True, False, False, False, True]
    vis = {"list": visible, "numpy": np.array(visible), "arrow": pa.array(visible),
           "arrow-nulls": pa.array([v or None for v in visible], pa.bool_())}[form]
    t.write_chunk(ops, _cols(rows), visibility=vis)
    assert list(t.iter_with_prefix()) == []                  # insert 2, delete 1, delete 2
    t.write_chunk([OP_INSERT], _cols([(6, 6, "six")]), visibility=[False])
    assert t.get_row((6,)) is None and len(t.mem) == 1          # only the delete of pk 1


def test_visibility_arguments_are_checked(store):
    t = _table(store)
    cols = _cols([(1, 1, "a"), (2, 2, "b")])
    with pytest.raises(SchemaError, match="visibility has 3 entries for 2 rows"):
        t.write_chunk([OP_INSERT] * 2, cols, visibility=[True] * 3)
    with pytest.raises(RowError, match="visibility must be a sequence of bools"):
        t.write_chunk([OP_INSERT] * 2, cols, visibility=[1, 0])
    with pytest.raises(SchemaError, match="column 2 has 1 values"):
        t.write_chunk([OP_INSERT] * 2, cols[:2] + [["a"]], visibility=[True, False])
    assert not t.mem


@pytest.mark.parametrize("consistent", [True, False])
@pytest.mark.parametrize("dist", [None, [0]])
def test_mixed_chunk_is_one_probe_and_equals_row_by_row(store, consistent, dist):
    counting = CountingStore(store)
    t = _table(counting, consistent=consistent, dist_key_indices=dist)
    ref = _table(store, consistent=consistent, dist_key_indices=dist)
    ref.table_id = t.table_id = 1
    rows = [(i, i, f"r{i}") for i in range(40)]
    t.write_chunk([OP_INSERT] * 40, _cols(rows))
    _commit(store, t)
    ref.init_epoch(new_epoch())
    t.insert((100, 0, "mem"))
    ref.insert((100, 0, "mem"))
    ops, chunk = [], []
    for i in range(0, 40, 4):                        # update pairs, deletes, inserts, repeats
        ops += [OP_UPDATE_DELETE, OP_UPDATE_INSERT, OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT]
        chunk += [rows[i], (i, -i, "upd"), rows[i + 1], (200 + i, 0, "new"), (i, -i, "upd"), (i, 7, "again")]
    ops += [OP_DELETE, OP_INSERT, OP_DELETE]
    chunk += [(100, 0, "mem"), (100, 1, "back"), (100, 1, "back")]
    counting.gets = counting.multi_gets = 0
    t.write_chunk(np.array(ops, np.int16), _cols(chunk))
    assert counting.gets == 0 and counting.multi_gets == (1 if consistent else 0)
    for op, row in zip(ops, chunk):                  # the reference: one row at a time
        (ref.insert if op in (OP_INSERT, OP_UPDATE_INSERT) else ref.delete)(row)
    assert t.mem.records == ref.mem.records
    t.mem._check()


def test_a_failing_mixed_chunk_names_its_first_bad_row_in_chunk_order(store):
    t = _table(store)
    t.write_chunk([OP_INSERT] * 10, _cols([(i, i, "x") for i in range(10)]))
    _commit(store, t)
    t.insert((50, 0, "mem"))
    before = dict(t.mem.records), t.mem.approx_bytes
    ops = [OP_UPDATE_DELETE, OP_UPDATE_INSERT, OP_DELETE, OP_INSERT, OP_DELETE]
    rows = [(8, 8, "x"), (8, 9, "y"), (7, 0, "wrong old row"), (1, 1, "exists"), (60, 0, "missing")]
    with pytest.raises(InconsistentOpError) as info:
        t.write_chunk(ops, _cols(rows))
    assert info.value.pk == (7,) and info.value.reason == "delete whose old row is not the stored row"
    assert (dict(t.mem.records), t.mem.approx_bytes) == before
    with pytest.raises(InconsistentOpError) as info:   # the all-insert path names it the same way
        t.write_chunk([OP_INSERT] * 3, _cols([(70, 0, "n"), (9, 0, "exists"), (3, 0, "exists")]))
    assert info.value.pk == (9,)
    assert (dict(t.mem.records), t.mem.approx_bytes) == before
