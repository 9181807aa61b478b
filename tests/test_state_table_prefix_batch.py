"""``StateTable.rows_with_prefixes``: the batched prefix read a join probes with equals
``[list(iter_with_prefix(p)) for p in prefixes]`` -- over committed rows, this epoch's MemTable
writes (inserts, deletes, updates over stored rows), NULL prefix values, descending pk columns,
distribution keys the prefix covers (the batched path) or does not (one read per prefix), and
instances owning some vnodes only. Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from hummock.key import new_epoch
from relational.errors import RowError, VnodeNotOwnedError
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.types import DataType as T
from relational.vnode import Bitmap
from table_stores import OPTIONS

SCHEMA = [T.INT, T.VARCHAR, T.BIGINT, T.INT]
LAYOUTS = {   # (pk, order types, distribution key)
    "dist=first": ([0, 1, 2], None, [0]),
    "dist=first two": ([0, 1, 2], None, [0, 1]),
    "dist=second": ([0, 1, 2], None, [1]),              # a 1-column prefix does not cover it
    "singleton": ([0, 1, 2], None, []),
    "desc": ([0, 2, 1], [OrderType.DESC, OrderType.ASC, OrderType.DESC], [0]),
}
KEY = st.one_of(st.none(), st.integers(0, 4))
NAME = st.one_of(st.none(), st.sampled_from(["a", "b", "cc"]))
ROW = st.tuples(KEY, NAME, st.integers(0, 5), st.integers(-3, 3))


def _table(store, layout, vnodes=None, consistent=True):
    pk, orders, dist = LAYOUTS[layout]
    return StateTable(store, 5, SCHEMA, pk, orders, dist, vnodes=vnodes, prefix_len_hint=1, consistent=consistent)


def _prefix_of(table, row, width):
    return tuple(row[i] for i in table.serde.pk_indices[:width])


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(sorted(LAYOUTS)), committed=st.lists(ROW, max_size=30),
       changes=st.lists(st.tuples(st.booleans(), ROW), max_size=15), width=st.integers(1, 3),
       probes=st.lists(st.tuples(KEY, NAME, st.integers(0, 5)), max_size=12), consistent=st.booleans(),
       inserts=st.lists(ROW, max_size=8))
def test_equals_one_iter_with_prefix_per_prefix(layout, committed, changes, width, probes, consistent, inserts):
    with HummockStorage.open("memory://", OPTIONS) as store:
        table = _table(store, layout, consistent=consistent)
        epoch = new_epoch()
        table.init_epoch(epoch)
        rows = {}
        for row in committed:
            rows[table.serde.pk_of(row)] = row
        for row in rows.values():
            table.insert(row)
        table.commit(new_epoch())
        store.checkpoint(epoch)
        prefixes = [_prefix_of(table, (k, n, i, 0), width) for k, n, i in probes]
        half = len(changes) // 2
        for n, part in enumerate((changes[:half], changes[half:])):   # the prefix index follows writes
            for delete, row in part:   # this epoch's writes, over the committed rows
                pk = table.serde.pk_of(row)
                if pk in rows and delete:
                    table.delete(rows.pop(pk))
                elif pk in rows:
                    table.update(rows[pk], row)
                    rows[pk] = row
                elif not delete:
                    table.insert(row)
                    rows[pk] = row
            if part:
                table.write_chunk([1, 2], [[4, 4], ["z", "z"], [9, 9], [0, 0]])   # a cancelled pair
            fresh = {table.serde.pk_of(r): r for r in inserts if table.serde.pk_of(r) not in rows}
            if fresh and n == 1:   # an all-insert chunk (a pending run when relaxed)
                table.write_chunk([1] * len(fresh), [list(c) for c in zip(*fresh.values())])
                rows.update(fresh)
            probe = prefixes + [_prefix_of(table, row, width) for row in rows.values()]
            expected = [list(table.iter_with_prefix(p)) for p in probe]
            assert table.rows_with_prefixes(probe) == expected
            assert table.rows_with_prefixes([list(p) for p in probe]) == expected
            table.mem._check()


def test_prefixes_in_owned_vnodes_read_and_others_raise_before_reading():
    with HummockStorage.open("memory://", OPTIONS) as store:
        full = _table(store, "dist=first")
        epoch = new_epoch()
        full.init_epoch(epoch)
        for k in range(40):
            full.insert((k, "a", 1, 0))
        full.commit(new_epoch())
        store.checkpoint(epoch)
        vnode = full.serde.vnode_of_pk((7, None, None))
        half = _table(store, "dist=first", Bitmap([vnode]))
        half.init_epoch(new_epoch())
        mine = [(k,) for k in range(40) if full.serde.vnode_of_pk((k, None, None)) == vnode]
        assert half.rows_with_prefixes(mine) == [[(k, "a", 1, 0)] for (k,) in mine]
        with pytest.raises(VnodeNotOwnedError, match="does not own"):
            half.rows_with_prefixes([(k,) for k in range(40)])


def test_bad_arguments():
    with HummockStorage.open("memory://", OPTIONS) as store:
        table = _table(store, "dist=first")
        table.init_epoch(new_epoch())
        assert table.rows_with_prefixes([]) == []
        with pytest.raises(RowError):
            table.rows_with_prefixes("ab")
        with pytest.raises(RowError):
            table.rows_with_prefixes([5])


@pytest.mark.parametrize("consistent", [True, False])
def test_rows_written_after_the_prefix_index_was_built_are_found(consistent):
    """The MemTable's prefix index follows every later write: single rows, an all-insert chunk
    (a pending run in relaxed mode, settled before the read), deletes."""
    with HummockStorage.open("memory://", OPTIONS) as store:
        table = _table(store, "dist=first", consistent=consistent)
        table.init_epoch(new_epoch())
        table.insert((1, "a", 1, 0))
        assert table.rows_with_prefixes([(1,), (2,)]) == [[(1, "a", 1, 0)], []]
        table.write_chunk([1, 1], [[1, 2], ["b", "b"], [2, 2], [0, 0]])
        table.insert((3, "c", 3, 0))
        table.delete((1, "a", 1, 0))
        expected = [[(1, "b", 2, 0)], [(2, "b", 2, 0)], [(3, "c", 3, 0)]]
        assert table.rows_with_prefixes([(1,), (2,), (3,)]) == expected
        table.mem._check()
