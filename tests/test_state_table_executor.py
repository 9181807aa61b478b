"""StateTable as stream executors use it (issue 11 part 5): ``get_rows``, bounded and limited
iteration, writes while iterating, ``write_chunk`` with a visibility mask and mixed ops in one
batch, ``update_vnode_bitmap``, ``iter_batches``; and the chunk encoder's key sort and
``keys_of_pks`` they rest on.

Every table test runs on a memory and a local store. The state machine against a dict model
(tests/test_state_table_stateful.py) covers the same calls in random sequences.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock.key import new_epoch
from relational.errors import InconsistentOpError, RowError, SchemaError, TypeMismatchError, VnodeNotOwnedError
from relational.memcomparable import OrderType
from relational.row_serde import RowSerde, _equal_width_order
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from relational.vnode import Bitmap
from table_stores import opener

SCHEMA = [("id", T.BIGINT), ("a", T.INT), ("s", T.VARCHAR)]
GROUPED = [("g", T.INT), ("k", T.INT), ("v", T.VARCHAR)]


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


# --- get_rows -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dist", [None, [0]])
def test_get_rows_reads_the_memtable_then_one_multi_get(store, dist):
    counting = CountingStore(store)
    t = _table(counting, dist_key_indices=dist)
    for i in range(10):
        t.insert((i, i, f"r{i}"))
    _commit(store, t)
    t.update((1, 1, "r1"), (1, 10, "new"))      # MemTable: UPDATE
    t.delete((2, 2, "r2"))                        # MemTable: DELETE
    t.insert((20, 20, "r20"))                     # MemTable: INSERT
    counting.gets = counting.multi_gets = counting.multi_get_keys = 0
    pks = [(1,), (2,), (3,), (20,), (99,), (3,), [4]]
    assert t.get_rows(pks) == [(1, 10, "new"), None, (3, 3, "r3"), (20, 20, "r20"), None, (3, 3, "r3"),
                               (4, 4, "r4")]
    assert counting.gets == 0 and counting.multi_gets == 1 and counting.multi_get_keys == 4
    assert t.get_rows([]) == [] and t.get_rows(iter([(5,)])) == [(5, 5, "r5")]
    assert t.get_rows(pks) == [t.get_row(pk) for pk in pks]


def test_get_rows_errors_name_the_bad_pk(store):
    t = _table(store, dist_key_indices=[0], vnodes=Bitmap.from_range(0, 128))
    with pytest.raises(RowError):
        t.get_rows(5)
    with pytest.raises(RowError):
        t.get_rows([(1,), 5])
    with pytest.raises(RowError):
        t.get_rows([(1,), "ab"])
    with pytest.raises(SchemaError, match="a pk has 1 values, got 2"):
        t.get_rows([(1,), (1, 2)])
    with pytest.raises(TypeMismatchError):
        t.get_rows([(1,), ("x",)])
    outside = next(i for i in range(100) if t.serde.vnode_of_pk((i,)) >= 128)
    with pytest.raises(VnodeNotOwnedError):
        t.get_rows([(outside,)])


PK_TYPES = st.sampled_from([T.INT, T.BIGINT, T.VARCHAR, T.DOUBLE, T.BOOLEAN])
ORDERS = st.sampled_from([OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])
_VALUES = {T.INT: st.integers(-2**31, 2**31 - 1), T.BIGINT: st.integers(-2**63, 2**63 - 1),
           T.VARCHAR: st.text(max_size=4), T.DOUBLE: st.floats(allow_nan=False), T.BOOLEAN: st.booleans()}


@st.composite
def layouts(draw):
    types = draw(st.lists(PK_TYPES, min_size=1, max_size=3))
    orders = [draw(ORDERS) for _ in types]
    dist = draw(st.sampled_from([[], [0], [len(types) - 1], list(range(len(types)))]))
    pks = draw(st.lists(st.tuples(*[st.one_of(st.none(), _VALUES[t]) for t in types]), max_size=20))
    return types, orders, dist, pks


@given(layouts())
def test_keys_of_pks_equals_key_of_pk(case):
    """The batched key path gives the bytes of the single-row path for every layout: singleton,
    distribution key = pk head (hashes the pk's bytes when ASC), another column, the whole pk."""
    types, orders, dist, pks = case
    serde = RowSerde(types, list(range(len(types))), orders, dist)
    assert serde.keys_of_pks(pks) == [serde.key_of_pk(pk) for pk in pks]


@given(st.lists(st.binary(min_size=13, max_size=13), max_size=50), st.integers(1, 20))
def test_equal_width_order_is_a_stable_bytewise_sort(keys, width):
    keys = [k[:width] for k in keys]
    order = _equal_width_order(pa.array(keys, pa.binary()))
    if not keys:
        assert order is None
        return
    assert order.tolist() == sorted(range(len(keys)), key=keys.__getitem__)   # sorted() is stable


# --- bounds and limit -----------------------------------------------------------------------

def _grouped(store, rows, **kw):
    t = _table(store, GROUPED, pk=(0, 1), **kw)
    for r in rows:
        t.insert(r)
    return t


ROWS = [(g, k, f"{g}/{k}") for g in range(3) for k in range(5)]


@pytest.mark.parametrize("dist", [None, [0]])
@pytest.mark.parametrize("committed", [False, True])
def test_inclusive_and_exclusive_bounds_and_limit(store, dist, committed):
    t = _grouped(store, ROWS, dist_key_indices=dist)
    if committed:
        _commit(store, t)

    def ks(**kw):
        return [r[1] for r in t.iter_with_prefix((1,), **kw)]
    assert ks(start=(1,), end=(3,)) == [1, 2]
    assert ks(start=(1,), end=(3,), start_inclusive=False) == [2]
    assert ks(start=(1,), end=(3,), end_inclusive=True) == [1, 2, 3]
    assert ks(start=(1,), end=(3,), start_inclusive=False, end_inclusive=True) == [2, 3]
    assert ks(start=(1,), end=(3,), start_inclusive=False, end_inclusive=True, reverse=True) == [3, 2]
    assert ks(start=(3,), end=(3,), end_inclusive=True) == [3]
    assert ks(start=(3,), end=(3,)) == [] and ks(start=(4,), end=(1,)) == []
    assert ks(limit=2) == [0, 1] and ks(limit=2, reverse=True) == [4, 3] and ks(limit=0) == []
    assert ks(start=(2,), limit=10) == [2, 3, 4]
    # partial bounds: on the first pk column, without a prefix
    gs = [(r[0], r[1]) for r in t.iter_with_prefix(start=(1,), end=(1,), end_inclusive=True)]
    assert gs == [(1, k) for k in range(5)]
    assert [r[0] for r in t.iter_with_prefix(start=(0,), start_inclusive=False, limit=6)] == [1] * 5 + [2]
    assert [r[:2] for r in t.iter_with_prefix(end=(1,), reverse=True, limit=2)] == [(0, 4), (0, 3)]
    with pytest.raises(SchemaError, match="limit"):
        t.iter_with_prefix((1,), limit=-1)
    with pytest.raises(SchemaError, match="limit"):
        t.iter_with_prefix((1,), limit=1.5)


def test_desc_pk_bounds_follow_the_pk_order(store):
    t = _table(store, GROUPED, pk=(0, 1), order_types=[OrderType.ASC, OrderType.DESC])
    for r in ROWS:
        t.insert(r)
    assert [r[1] for r in t.iter_with_prefix((2,), start=(3,), end=(1,))] == [3, 2]
    assert [r[1] for r in t.iter_with_prefix((2,), start=(3,), end=(1,), start_inclusive=False,
                                             end_inclusive=True)] == [2, 1]


def test_storage_table_takes_the_same_bounds_and_limit(store):
    t = _grouped(store, ROWS)
    epoch = _commit(store, t)
    reader = StorageTable(store, 1, GROUPED, [0, 1])
    rows = [r["k"] for b in reader.batch_iter(epoch, (1,), (1,), (3,), start_inclusive=False,
                                              end_inclusive=True, limit=1) for r in b.to_pylist()]
    assert rows == [2]
    assert list(reader.batch_iter(epoch, limit=0)) == []


# --- writes while iterating -----------------------------------------------------------------

@pytest.mark.parametrize("dist", [None, [0]])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_join_updates_the_rows_it_is_iterating(store, dist, reverse):
    """Probe a prefix with 600 rows (more than a decode batch, half in the MemTable), update
    every row found and insert and delete rows ahead of the iterator: it yields the rows as of
    its creation; afterwards a new read sees every change."""
    t = _table(store, GROUPED, pk=(0, 1), dist_key_indices=dist)
    t.write_chunk([OP_INSERT] * 300, _cols([(7, k, "old") for k in range(0, 600, 2)],
                                           (pa.int32(), pa.int32(), pa.string())))
    _commit(store, t)
    t.write_chunk([OP_INSERT] * 300, _cols([(7, k, "old") for k in range(1, 600, 2)],
                                           (pa.int32(), pa.int32(), pa.string())))
    expected = [(7, k, "old") for k in range(600)][::-1 if reverse else 1]
    got = []
    for row in t.iter_with_prefix((7,), reverse=reverse):
        got.append(row)
        t.update(row, (7, row[1], "degree+1"))        # the join's degree update
        if row[1] % 50 == 0:
            t.insert((7, 1000 + row[1], "new"))       # new rows in the range
            if (599 - row[1] > row[1]) != reverse:    # a row the iterator has not reached
                t.delete((7, 599 - row[1], "old"))
                t.insert((7, 599 - row[1], "old"))
        if len(got) == 100:
            t.flush_threshold = 0
            assert t.try_flush()                      # a spill in the middle of the scan
            t.flush_threshold = 1 << 30
        if len(got) == 300:
            t.commit(new_epoch())                     # and a commit
    assert got == expected
    after = list(t.iter_with_prefix((7,)))
    assert [r for r in after if r[1] < 1000] == [(7, k, "degree+1") for k in range(600)]
    assert len([r for r in after if r[1] >= 1000]) == 12


def test_an_iterator_survives_a_delete_of_the_rest_of_its_range(store):
    t = _table(store)
    t.write_chunk([OP_INSERT] * 500, _cols([(i, i, "x") for i in range(500)]))
    it = t.iter_with_prefix()
    first = [next(it) for _ in range(10)]
    t.write_chunk([OP_DELETE] * 490, _cols([(i, i, "x") for i in range(10, 500)]))
    assert first + list(it) == [(i, i, "x") for i in range(500)]
    assert list(t.iter_with_prefix()) == [(i, i, "x") for i in range(10)]


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
    with pytest.raises(SchemaError, match="unknown op 7 at row 1"):   # rows are named by chunk position
        t.write_chunk([OP_INSERT, 7], cols, visibility=[False, True])
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


def test_write_chunk_fresh_probes_only_the_rows_not_known_new(store):
    """``write_chunk_fresh``: rows marked fresh (the caller knows their pk has no row) are not
    probed in the store, on the all-insert path and on the mixed path; the others are, and
    their inconsistencies still raise with nothing applied; a fresh pk that has a MemTable
    record is still refused by the MemTable's own check. What is stored equals
    ``write_chunk``'s result."""
    counting = CountingStore(store)
    t = _table(counting)
    t.write_chunk([OP_INSERT] * 3, _cols([(1, 10, "a"), (2, 20, "b"), (3, 30, "c")]))
    _commit(store, t)
    counting.multi_get_keys = 0
    t.write_chunk_fresh([OP_INSERT] * 3, _cols([(4, 1, "d"), (5, 2, "e"), (6, 3, "f")]), [True, False, True])
    assert counting.multi_get_keys == 1                       # only 5 was probed
    t.write_chunk_fresh([OP_INSERT] * 2, _cols([(7, 1, "g"), (8, 2, "h")]), np.array([True, True]))
    assert counting.multi_get_keys == 1                       # nothing probed
    with pytest.raises(InconsistentOpError, match=r"pk=\(2,\)"):   # stored, not marked: probed, refused
        t.write_chunk_fresh([OP_INSERT] * 2, _cols([(9, 1, "i"), (2, 2, "j")]), [True, False])
    assert t.get_row((9,)) is None
    with pytest.raises(InconsistentOpError, match=r"pk=\(4,\)"):   # a MemTable record: still checked
        t.write_chunk_fresh([OP_INSERT] * 2, _cols([(10, 1, "k"), (4, 2, "l")]), [True, True])
    assert t.get_row((10,)) is None
    counting.multi_get_keys = 0   # the mixed path: a delete of a stored row and two inserts
    t.write_chunk_fresh([OP_DELETE, OP_INSERT, OP_INSERT], _cols([(1, 10, "a"), (11, 1, "m"), (12, 2, "n")]),
                        [False, True, False])
    assert counting.multi_get_keys == 2                       # 1 and 12, not 11
    with pytest.raises(SchemaError, match="fresh has 1 entries for 2 rows"):
        t.write_chunk_fresh([OP_INSERT] * 2, _cols([(13, 1, "o"), (14, 2, "p")]), [True])
    t.write_chunk_fresh([OP_INSERT, OP_INSERT], _cols([(15, 1, "q"), (16, 2, "r")]), [True, True],
                        visibility=[False, True])             # fresh is in chunk order, before visibility
    _commit(store, t)
    assert [r[0] for r in t.iter_with_prefix()] == [2, 3, 4, 5, 6, 7, 8, 11, 12, 16]


# --- update_vnode_bitmap ----------------------------------------------------------------------

def test_rescale_moves_vnodes_between_instances(store):
    """One instance owns everything, then the vnodes split between two (scale out), then one
    owns them all again (scale in); each reads exactly its vnodes' rows after the change."""
    a = _table(store, dist_key_indices=[0])
    a.write_chunk([OP_INSERT] * 200, _cols([(i, i, "x") for i in range(200)]))
    with pytest.raises(SchemaError, match="uncommitted writes"):
        a.update_vnode_bitmap(Bitmap.from_range(0, 128))
    assert a.vnodes == Bitmap.full()
    _commit(store, a)
    left, right = Bitmap.from_range(0, 128), Bitmap.from_range(128, 256)
    assert a.update_vnode_bitmap(left) == Bitmap.full()
    b = StateTable(store, 1, SCHEMA, [0], dist_key_indices=[0], vnodes=right)
    b.init_epoch(a.epoch)
    mine = {i for i in range(200) if a.serde.vnode_of_pk((i,)) < 128}
    assert [r[0] for r in a.iter_with_prefix()] == sorted(mine)
    assert [r[0] for r in b.iter_with_prefix()] == sorted(set(range(200)) - mine)
    assert a.get_rows([(i,) for i in sorted(mine)]) == [(i, i, "x") for i in sorted(mine)]
    with pytest.raises(VnodeNotOwnedError):
        a.insert((min(set(range(200)) - mine), 0, "not mine"))
    other = min(set(range(200)) - mine)
    b.delete((other, other, "x"))
    a.delete((min(mine), min(mine), "x"))
    epoch = a.epoch
    a.commit(new_epoch())
    b.commit(new_epoch())
    store.checkpoint(epoch)
    assert a.update_vnode_bitmap(Bitmap.full()) == left
    assert [r[0] for r in a.iter_with_prefix()] == sorted(set(range(200)) - {min(mine), other})
    with pytest.raises(SchemaError, match="takes a Bitmap"):
        a.update_vnode_bitmap([1, 2])


def test_singleton_table_without_vnode_zero_owns_nothing(store):
    t = _table(store)
    t.insert((1, 1, "x"))
    _commit(store, t)
    t.update_vnode_bitmap(Bitmap(range(1, 256)))
    with pytest.raises(VnodeNotOwnedError):
        t.get_rows([(1,)])
    with pytest.raises(VnodeNotOwnedError):
        t.iter_with_prefix()


# --- iter_batches -----------------------------------------------------------------------------

@pytest.mark.parametrize("dist", [None, [0]])
def test_iter_batches_equals_the_storage_tables_batches(store, dist):
    t = _table(store, dist_key_indices=dist)
    t.write_chunk([OP_INSERT] * 50, _cols([(i, i * 3, f"s{i}") for i in range(50)]))
    epoch = _commit(store, t)
    t.insert((60, 0, "mem"))
    batches = list(t.iter_batches(batch_size=16, columns=["s", 0], reverse=True))
    assert [b.num_rows for b in batches] == [16, 16, 16, 3]
    assert batches[0].schema == pa.schema([("s", pa.string()), ("id", pa.int64())])
    assert batches[0].to_pylist()[0] == {"s": "mem", "id": 60}
    reader = StorageTable(store, 1, SCHEMA, [0], dist_key_indices=dist)
    t.delete((60, 0, "mem"))
    mine = pa.Table.from_batches(list(t.iter_batches(start=(10,), end=(20,), end_inclusive=True, limit=5)))
    theirs = pa.Table.from_batches(list(reader.batch_iter(epoch, (), (10,), (20,), end_inclusive=True, limit=5)))
    assert mine.equals(theirs) and mine.num_rows == 5
    assert list(t.iter_batches(limit=0)) == []
    with pytest.raises(SchemaError, match="batch_size"):
        t.iter_batches(batch_size=0)
    with pytest.raises(SchemaError, match="no column"):
        t.iter_batches(columns=["nope"])


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_bounded_reads_agree_with_a_sorted_model(data):
    """Random rows (committed and in the MemTable), random prefix, bounds, flags and limit:
    iter_with_prefix equals filtering a sorted model; iter_batches and get_rows agree."""
    with opener("memory", None, None)() as store:
        _bounded_reads_case(store, data)


def _bounded_reads_case(store, data):
    rows = data.draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), unique=True, max_size=25))
    split = data.draw(st.integers(0, len(rows)))
    t = _table(store, GROUPED, pk=(0, 1), dist_key_indices=data.draw(st.sampled_from([None, [0]])))
    for g, k in rows[:split]:
        t.insert((g, k, "c"))
    t.commit(new_epoch())
    for g, k in rows[split:]:
        t.insert((g, k, "m"))
    model = sorted((g, k, "c" if i < split else "m") for i, (g, k) in enumerate(rows))
    prefix = data.draw(st.sampled_from([(), (0,), (2,)]))
    start = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, 6))))
    end = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, 6))))
    si, ei, rev = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    limit = data.draw(st.one_of(st.none(), st.integers(0, 5)))
    col = len(prefix)
    expected = [r for r in model if r[:col] == prefix
                and (start is None or (r[col] >= start[0] if si else r[col] > start[0]))
                and (end is None or (r[col] <= end[0] if ei else r[col] < end[0]))]
    expected = (expected[::-1] if rev else expected)[:limit]
    kw = dict(start=start, end=end, start_inclusive=si, end_inclusive=ei, reverse=rev, limit=limit)
    assert list(t.iter_with_prefix(prefix, **kw)) == expected
    got = [tuple(r.values()) for b in t.iter_batches(prefix, batch_size=2, **kw) for r in b.to_pylist()]
    assert got == expected
    assert t.get_rows([r[:2] for r in expected]) == expected
