"""StateTable (relational/state_table.py): seed 000's Get and Scan examples, strict-mode errors,
write_chunk, vnode-partitioned instances, watermarks, spills, ordering under ASC/DESC pks.

Every test runs on a memory and a local store; the seed examples also on S3. The state
machine against a dict model is tests/test_state_table_stateful.py.
"""

import functools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock.key import new_epoch
from relational.errors import EpochError, InconsistentOpError, RowError, SchemaError, TypeMismatchError, VnodeNotOwnedError
from relational.memcomparable import OrderType
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT, StateTable
from relational.types import DataType as T
from relational.vnode import Bitmap, compute_vnode
from table_stores import opener

INT3 = [T.INT, T.INT, T.INT]


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    s = opener(request.param, tmp_path, request)()
    yield s
    s.close()


@pytest.fixture(params=["memory", "local", "s3"])
def any_store(request, tmp_path):
    s = opener(request.param, tmp_path, request)()
    yield s
    s.close()


def _table(store, schema=INT3, pk=(0,), **kw):
    t = StateTable(store, 1, schema, list(pk), **kw)
    t.init_epoch(new_epoch())
    return t


# --- seed 000, "Get": reproduced exactly -----------------------------------------------------

def test_seed_get_example(any_store):
    """insert [1,11,111], [2,22,222]; delete [2,22,222]; insert [3,33,333]; commit;
    insert [3,3333,3333] -> Get(1) = [1,11,111], Get(2) = None, Get(3) = [3,3333,3333].
    The seed's second insert of pk 3 overwrites: that is relaxed mode's insert."""
    t = _table(any_store, consistent=False)
    t.insert((1, 11, 111))
    t.insert((2, 22, 222))
    t.delete((2, 22, 222))
    t.insert((3, 33, 333))
    t.commit(new_epoch())
    t.insert((3, 3333, 3333))
    assert t.get_row((1,)) == (1, 11, 111)
    assert t.get_row((2,)) is None
    assert t.get_row((3,)) == (3, 3333, 3333)


def test_seed_get_example_strict_mode(any_store):
    """In strict mode the same sequence refuses the second insert of pk 3 (naming it); written
    as an update it gives the seed's result."""
    t = _table(any_store)
    t.insert((1, 11, 111))
    t.insert((2, 22, 222))
    t.delete((2, 22, 222))
    t.insert((3, 33, 333))
    t.commit(new_epoch())
    with pytest.raises(InconsistentOpError, match=r"pk=\(3,\)"):
        t.insert((3, 3333, 3333))
    t.update((3, 33, 333), (3, 3333, 3333))
    assert [t.get_row((k,)) for k in (1, 2, 3)] == [(1, 11, 111), None, (3, 3333, 3333)]


# --- seed 000, "Scan": storage a=1, b=2, e=3; MemTable b=4, c=5, e=6 -> 1, 4, 5, 6 ---------

SCAN_SCHEMA = [("pk", T.VARCHAR), ("v", T.INT)]


@pytest.mark.parametrize("consistent", [False, True])
def test_seed_scan_example(any_store, consistent):
    t = _table(any_store, SCAN_SCHEMA, consistent=consistent)
    for row in [("a", 1), ("b", 2), ("e", 3)]:
        t.insert(row)
    t.commit(new_epoch())                     # shared storage: a->1, b->2, e->3
    if consistent:
        t.update(("b", 2), ("b", 4))
        t.insert(("c", 5))
        t.update(("e", 3), ("e", 6))
    else:
        t.insert(("b", 4))
        t.insert(("c", 5))
        t.insert(("e", 6))                    # MemTable: b->4, c->5, e->6
    assert [v for _, v in t.iter_with_prefix()] == [1, 4, 5, 6]
    assert list(t.iter_with_prefix()) == [("a", 1), ("b", 4), ("c", 5), ("e", 6)]
    assert [v for _, v in t.iter_with_prefix(reverse=True)] == [6, 5, 4, 1]


# --- strict mode ------------------------------------------------------------------------------

def test_strict_errors_name_the_pk(store):
    t = _table(store, [("k", T.VARCHAR), ("v", T.INT)], name="orders")
    t.insert(("x", 1))
    t.commit(new_epoch())
    cases = [
        (lambda: t.insert(("x", 2)), "insert of a pk that already has a row", ("x",)),
        (lambda: t.delete(("y", 1)), "delete of a pk that has no row", ("y",)),
        (lambda: t.update(("y", 1), ("y", 2)), "update of a pk that has no row", ("y",)),
        (lambda: t.delete(("x", 9)), "delete whose old row is not the stored row", ("x",)),
        (lambda: t.update(("x", 9), ("x", 2)), "update whose old row is not the stored row", ("x",)),
        (lambda: t.write_chunk([OP_INSERT], [pa.array(["x"]), pa.array([5], pa.int32())]),
         "insert of a pk that already has a row", ("x",)),
    ]
    for call, reason, pk in cases:
        with pytest.raises(InconsistentOpError) as info:
            call()
        assert info.value.reason == reason and info.value.pk == pk
        assert "orders" in str(info.value) and repr(pk) in str(info.value)
    assert len(t.mem) == 0
    assert t.get_row(("x",)) == ("x", 1)


def test_relaxed_mode_accepts_what_strict_refuses(store):
    t = _table(store, consistent=False)
    t.insert((1, 1, 1))
    t.commit(new_epoch())
    t.insert((1, 2, 2))
    t.delete((5, 0, 0))
    t.update((6, 0, 0), (6, 1, 1))
    assert [t.get_row((k,)) for k in (1, 5, 6)] == [(1, 2, 2), None, (6, 1, 1)]


def test_update_that_changes_the_pk(store):
    t = _table(store)
    t.insert((1, 1, 1))
    t.commit(new_epoch())
    t.update((1, 1, 1), (2, 1, 1))
    assert t.get_row((1,)) is None and t.get_row((2,)) == (2, 1, 1)


def test_epochs_and_arguments(store):
    t = StateTable(store, 1, INT3, [0])
    with pytest.raises(SchemaError):
        t.insert((1, 1, 1))
    t.init_epoch(new_epoch())
    t.insert((1, 1, 1))
    with pytest.raises(SchemaError):
        t.init_epoch(new_epoch())          # uncommitted writes
    with pytest.raises(EpochError):
        t.commit(t.epoch)                  # not after the current epoch
    with pytest.raises(SchemaError):
        t.insert((1, 1))
    with pytest.raises(SchemaError):
        t.write_chunk([9], [[2], [2], [2]])
    with pytest.raises(SchemaError):
        StateTable(store, 1, ["INT"], [0])


def test_bad_arguments_raise_typed_errors_naming_them(store):
    """Rows, pks, prefixes, bounds and epochs of the wrong shape or type raise the relational
    errors (never a bare TypeError), say what was expected and change nothing."""
    with pytest.raises(SchemaError, match="pk_indices is required"):
        StateTable(store, 1, INT3, None)
    for bad in (0, "0"):
        with pytest.raises(SchemaError, match="pk_indices must be a sequence"):
            StateTable(store, 1, INT3, bad)
    with pytest.raises(SchemaError, match="dist_key_indices"):
        StateTable(store, 1, INT3, [0], dist_key_indices=0)
    with pytest.raises(SchemaError, match="order_types"):
        StateTable(store, 1, INT3, [0], order_types=OrderType.ASC)
    t = _table(store, name="orders")
    t.insert((1, 1, 1))
    before = dict(t.mem.records)
    for call in (lambda: t.insert(5), lambda: t.insert("abc"), lambda: t.insert({1, 2, 3}), lambda: t.insert(None),
                 lambda: t.delete(1), lambda: t.update((1, 1, 1), 7), lambda: t.get_row(1), lambda: t.get_row(None),
                 lambda: t.get_row("1"), lambda: t.iter_with_prefix(1), lambda: t.iter_with_prefix((), start=1),
                 lambda: t.iter_with_prefix((), end="x"), lambda: t.write_chunk(None, [[1], [1], [1]]),
                 lambda: t.write_chunk([OP_INSERT], None)):
        with pytest.raises(RowError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, SchemaError)
        assert "tuple" in str(info.value) or "sequence" in str(info.value) or "ints" in str(info.value)
    with pytest.raises(SchemaError, match="a row has 3 columns, got 2"):
        t.insert((2, 2))
    with pytest.raises(SchemaError, match="a pk has 1 values, got 2"):
        t.get_row((1, 2))
    with pytest.raises(TypeMismatchError, match="INT"):
        t.get_row(("x",))
    with pytest.raises(TypeMismatchError):
        t.insert((2, "x", 2))
    with pytest.raises(RowError, match="ops must be ints"):
        t.write_chunk([1.5], [[2], [2], [2]])
    for bad in (None, "1", 1.5):
        with pytest.raises(EpochError, match=repr(bad).replace("(", r"\(")) as info:
            t.commit(bad)
        assert info.value.epoch is bad and info.value.current == t.epoch
    assert dict(t.mem.records) == before
    assert t.get_row([1]) == (1, 1, 1)                # a list is a pk too
    t.insert([2, 2, 2])                               # and a row
    assert t.get_row((2,)) == (2, 2, 2) and len(t.mem) == 2


# --- write_chunk ------------------------------------------------------------------------------

BENCH_SCHEMA = [("id", T.BIGINT), ("a", T.INT), ("b", T.INT), ("s", T.VARCHAR)]


def _chunk(ids, start=0):
    ids = np.asarray(ids, dtype=np.int64)
    return [pa.array(ids), pa.array((ids % 7).astype(np.int32)), pa.array((ids * 3 % 1000).astype(np.int32)),
            pa.array([f"row-{i}" for i in ids.tolist()])]


@pytest.mark.parametrize("dist", [None, [0]])
def test_write_chunk_equals_row_by_row(store, dist):
    a = _table(store, BENCH_SCHEMA, dist_key_indices=dist)
    b = StateTable(store, 2, BENCH_SCHEMA, [0], dist_key_indices=dist)
    b.init_epoch(a.epoch)
    ids = np.random.default_rng(3).permutation(500)
    cols = _chunk(ids)
    a.write_chunk(np.full(len(ids), OP_INSERT), cols)
    rows = list(zip(*[c.to_pylist() for c in cols]))
    for r in rows:
        b.insert(r)
    assert list(a.iter_with_prefix()) == list(b.iter_with_prefix()) == sorted(rows)
    e = new_epoch()
    a.commit(e)
    b.commit(e)
    # a mixed chunk: delete 0, update 1 (U-, U+), insert 1000, delete then re-insert 2
    r0, r1, r2 = (next(r for r in rows if r[0] == k) for k in (0, 1, 2))
    new1 = (1, 9, 9, "changed")
    chunk_rows = [r0, r1, new1, (1000, 1, 1, "new"), r2, r2]
    ops = [OP_DELETE, OP_UPDATE_DELETE, OP_UPDATE_INSERT, OP_INSERT, OP_DELETE, OP_INSERT]
    a.write_chunk(pa.array(ops, pa.int8()), [list(c) for c in zip(*chunk_rows)])
    assert a.get_row((0,)) is None and a.get_row((1,)) == new1 and a.get_row((1000,)) == (1000, 1, 1, "new")
    assert a.get_row((2,)) == r2
    a.commit(new_epoch())
    expected = sorted([r for r in rows if r[0] not in (0, 1)] + [new1, (1000, 1, 1, "new")])
    assert list(a.iter_with_prefix()) == expected


def test_write_chunk_with_repeated_keys_takes_the_general_path(store):
    """Repeated keys in an all-insert chunk: applied in chunk order through the merge rules."""
    t = _table(store, BENCH_SCHEMA, consistent=False)
    t.write_chunk([OP_INSERT] * 3, [[1, 1, 2], [1, 2, 3], [0, 0, 0], ["a", "b", "c"]])
    assert list(t.iter_with_prefix()) == [(1, 2, 0, "b"), (2, 3, 0, "c")]
    s = _table(store, BENCH_SCHEMA)
    with pytest.raises(InconsistentOpError, match=r"pk=\(1,\)"):
        s.write_chunk([OP_INSERT] * 2, [[1, 1], [1, 2], [0, 0], ["a", "b"]])


@pytest.mark.parametrize("dist", [None, [0]])
def test_strict_insert_chunk_checks_storage_and_memtable(store, dist):
    t = _table(store, BENCH_SCHEMA, dist_key_indices=dist)
    t.write_chunk(np.full(3, OP_INSERT), _chunk([5, 3, 9]))
    t.commit(new_epoch())
    t.write_chunk(np.full(2, OP_INSERT), _chunk([40, 7]))       # two chunks in one epoch
    with pytest.raises(InconsistentOpError, match=r"pk=\(9,\)"):
        t.write_chunk(np.full(3, OP_INSERT), _chunk([100, 9, 1]))   # 9 is stored: nothing applied
    assert t.get_row((100,)) is None and t.get_row((1,)) is None
    with pytest.raises(InconsistentOpError, match=r"pk=\(40,\)"):
        t.write_chunk(np.full(2, OP_INSERT), _chunk([2, 40]))        # 40 is in the MemTable: general path
    assert t.get_row((2,)) is None                                   # nothing applied
    t.write_chunk(np.full(2, OP_INSERT), _chunk([-1, 8]))
    t.commit(new_epoch())
    assert [r[0] for r in t.iter_with_prefix()] == [-1, 3, 5, 7, 8, 9, 40]


# --- vnodes -----------------------------------------------------------------------------------

def test_vnode_partitioned_instances_see_only_their_rows(store):
    left, right = Bitmap.from_range(0, 128), Bitmap.from_range(128, 256)
    e = new_epoch()
    tables = []
    for bm in (left, right):
        t = StateTable(store, 7, BENCH_SCHEMA, [0], dist_key_indices=[0], vnodes=bm)
        t.init_epoch(e)
        tables.append(t)
    rows = [(i, i % 7, i, f"r{i}") for i in range(300)]
    mine = [[r for r in rows if compute_vnode((r[0],), [T.BIGINT]) in bm] for bm in (left, right)]
    assert mine[0] and mine[1]
    for t, rs in zip(tables, mine):
        ids = np.array([r[0] for r in rs], dtype=np.int64)
        t.write_chunk(np.full(len(rs), OP_INSERT), _chunk(ids))
    with pytest.raises(VnodeNotOwnedError):
        tables[0].insert(mine[1][0])
    with pytest.raises(VnodeNotOwnedError):
        tables[0].write_chunk([OP_INSERT], _chunk([mine[1][0][0]]))
    with pytest.raises(VnodeNotOwnedError):
        tables[0].get_row((mine[1][0][0],))
    e2 = new_epoch()
    for t in tables:
        t.commit(e2)
    store.checkpoint(e)
    for t, rs in zip(tables, mine):
        got = list(t.iter_with_prefix())
        assert [r[0] for r in got] == sorted(r[0] for r in rs)   # pk order across vnodes
        assert [r[0] for r in t.iter_with_prefix(reverse=True)] == sorted((r[0] for r in rs), reverse=True)
        assert all(t.get_row((r[0],))[0] == r[0] for r in rs[:20])


def test_prefix_covering_the_dist_key_reads_one_vnode(store):
    schema = [("g", T.INT), ("k", T.INT), ("v", T.VARCHAR)]
    t = _table(store, schema, pk=(0, 1), dist_key_indices=[0])
    for g in range(5):
        for k in range(4):
            t.insert((g, k, f"{g}.{k}"))
    from relational.table_iter import pk_ranges
    assert len(pk_ranges(t.serde, t.vnodes, (3,))) == 1
    assert len(pk_ranges(t.serde, t.vnodes, ())) == 256
    assert [r[1] for r in t.iter_with_prefix((3,))] == [0, 1, 2, 3]
    t.commit(new_epoch())
    assert [r[1] for r in t.iter_with_prefix((3,), start=(1,), end=(3,))] == [1, 2]
    assert [r[1] for r in t.iter_with_prefix((3,), start=(1,), reverse=True)] == [3, 2, 1]
    assert [(r[0], r[1]) for r in t.iter_with_prefix(start=(3,))][:2] == [(3, 0), (3, 1)]


# --- spills, watermarks -----------------------------------------------------------------------

def test_try_flush_spills_inside_the_epoch(store):
    t = _table(store, BENCH_SCHEMA, flush_threshold=10_000)
    t.write_chunk(np.full(300, OP_INSERT), _chunk(np.arange(300)))
    assert t.try_flush() and len(t.mem) == 0
    assert not t.try_flush()
    t.delete((5, 5, 15, "row-5"))                      # checked against the spilled rows
    with pytest.raises(InconsistentOpError):
        t.insert((6, 6, 18, "row-6"))
    assert len(list(t.iter_with_prefix())) == 299
    t.commit(new_epoch())
    assert t.get_row((5,)) is None and t.get_row((6,)) == (6, 6, 18, "row-6")


@pytest.mark.parametrize("order", [OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])
def test_watermark_cleans_rows_below_it(store, order):
    schema = [("ts", T.INT), ("k", T.INT)]
    t = _table(store, schema, pk=(0, 1), order_types=[order, OrderType.ASC])
    rows = [(ts, k) for ts in [None, 1, 2, 3, 4, 5] for k in range(2)]
    for r in rows[:6]:
        t.insert(r)
    t.commit(new_epoch())
    for r in rows[6:]:
        t.insert(r)
    t.update_watermark(3)
    assert len(list(t.iter_with_prefix())) == len(rows)     # lazily: still there until commit
    t.commit(new_epoch())
    left = sorted(t.iter_with_prefix(), key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    assert left == [r for r in rows if r[0] is None or r[0] >= 3][2:] + rows[:2]


def test_watermark_cleaning_writes_no_tombstones_and_keeps_older_epochs_readable(store):
    from relational.storage_table import StorageTable
    t = _table(store, [("ts", T.INT), ("k", T.INT)], pk=(0, 1), dist_key_indices=[1])
    for ts in range(10):
        for k in range(4):
            t.insert((ts, k))
    first = t.epoch
    t.commit(new_epoch())
    store.checkpoint(first)
    ingested = store.stats()["ingested_keys"]
    t.update_watermark(5)
    t.update_watermark(7)       # several per epoch: the highest wins
    t.update_watermark(6)
    t.insert((2, 9))            # written in the epoch that carries the watermark: cleaned too
    second = t.epoch
    t.commit(new_epoch())
    store.checkpoint(second)
    assert store.stats()["ingested_keys"] == ingested + 1      # the insert; no tombstones
    assert sorted(t.iter_with_prefix()) == [(ts, k) for ts in (7, 8, 9) for k in range(4)]
    reader = StorageTable(store, 1, [("ts", T.INT), ("k", T.INT)], [0, 1], dist_key_indices=[1])
    assert len([r for b in reader.batch_iter(first) for r in b.to_pylist()]) == 40   # older epoch: exact
    t.update_watermark(3)       # below an earlier epoch's: changes nothing, never goes back
    t.insert((4, 0))            # written later below the watermark: hidden once committed
    assert t.get_row((4, 0)) == (4, 0)                            # until then, in the MemTable
    t.commit(new_epoch())
    assert t.get_row((4, 0)) is None and len(list(t.iter_with_prefix())) == 12
    assert t.watermark_records.latest[0][1] == t.watermark_records.latest[255][1]


def test_watermarks_publish_only_the_owned_vnodes(store):
    schema = [("ts", T.INT), ("k", T.INT)]
    owned = Bitmap.from_range(0, 128)
    t = StateTable(store, 1, schema, [0, 1], dist_key_indices=[1], vnodes=owned)
    t.init_epoch(new_epoch())
    rows = [(ts, k) for ts in range(4) for k in range(40) if compute_vnode((k,), [T.INT]) in owned]
    for r in rows:
        t.insert(r)
    t.update_watermark(2)
    t.commit(new_epoch())
    assert set(t.watermark_records.latest) == set(owned)
    assert sorted(t.iter_with_prefix()) == sorted(r for r in rows if r[0] >= 2)


def test_a_null_watermark_is_refused(store):
    t = _table(store, [("ts", T.INT), ("k", T.INT)], pk=(0, 1))
    with pytest.raises(SchemaError, match="NULL"):
        t.update_watermark(None)
    with pytest.raises(TypeMismatchError):
        t.update_watermark("x")
    assert t._watermark is None


def test_truncate_empties_every_vnode_from_this_epoch_on(store):
    t = _table(store, INT3, dist_key_indices=[0])
    for i in range(50):
        t.insert((i, i, i))
    first = t.epoch
    t.commit(new_epoch())
    t.insert((100, 1, 1))
    t.truncate()                 # the MemTable's rows and the stored ones
    t.insert((7, 7, 7))          # written after it: kept
    assert list(t.iter_with_prefix()) == [(7, 7, 7)]
    second = t.epoch
    t.commit(new_epoch())
    store.checkpoint(second)
    assert list(t.iter_with_prefix()) == [(7, 7, 7)] and t.get_row((3,)) is None
    key = t.serde.key_of_pk((3,))
    assert store.get(1, key, first) == t.serde.encode((3, 3, 3))[1]     # older epochs: exact


# --- ordering under ASC/DESC pks, against a Python sort ---------------------------------------

SORTABLE = [T.BIGINT, T.INT, T.VARCHAR, T.BOOLEAN, T.DOUBLE]
ORDERS = st.sampled_from([OrderType.ASC, OrderType.DESC, OrderType(False, True), OrderType(True, False)])


def _value(dtype):
    base = {T.BIGINT: st.integers(-3, 3), T.INT: st.integers(-3, 3), T.VARCHAR: st.sampled_from(["", "a", "a\x00", "ab", "b"]),
            T.BOOLEAN: st.booleans(), T.DOUBLE: st.sampled_from([-1.5, 0.0, 2.0, float("inf")])}[dtype]
    return st.one_of(st.none(), base)


def _cmp_values(a, b, order):
    if a is None or b is None:
        if a is None and b is None:
            return 0
        first = -1 if order.nulls_first else 1
        return first if a is None else -first
    c = (a > b) - (a < b)
    return -c if order.descending else c


def pk_sort_key(orders):
    def cmp(x, y):
        for a, b, o in zip(x, y, orders):
            c = _cmp_values(a, b, o)
            if c:
                return c
        return 0
    return functools.cmp_to_key(cmp)


@st.composite
def ordered_cases(draw):
    types = draw(st.lists(st.sampled_from(SORTABLE), min_size=1, max_size=3))
    orders = [draw(ORDERS) for _ in types]
    rows = draw(st.lists(st.tuples(*[_value(t) for t in types]), max_size=25, unique=True))
    dist = draw(st.sampled_from([None, [0]]))
    return types, orders, rows, dist, draw(st.integers(0, len(rows)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=ordered_cases(), reverse=st.booleans())
def test_iteration_order_is_the_pk_order(store, case, reverse):
    types, orders, rows, dist, split = case
    t = StateTable(store, 99, types + [T.INT], list(range(len(types))), orders, dist)
    t.init_epoch(new_epoch())
    for r in rows[:split]:
        t.insert(r + (1,))
    t.commit(new_epoch())
    for r in rows[split:]:
        t.insert(r + (2,))
    expected = sorted(rows, key=pk_sort_key(orders), reverse=reverse)
    assert [r[:-1] for r in t.iter_with_prefix(reverse=reverse)] == expected
    if rows:
        first = rows[0][0]
        assert [r[:-1] for r in t.iter_with_prefix((first,), reverse=reverse)] == \
            [r for r in expected if r[0] == first]
    # clean the table for the next example (same store, same table id)
    for r in list(t.iter_with_prefix()):
        t.delete(r)
    t.commit(new_epoch())
