"""``StateTable.pairs_with_prefixes`` and ``decode_columns`` (relational/pair_columns.py): the
encoded pairs of a batched prefix read, decoded, are what ``rows_with_prefixes`` returns, and
their Arrow columns equal ``to_arrow`` of the decoded rows' values -- for layouts whose integer
pk columns come from the keys (ascending and descending, a join's deduped layout), layouts
read wholly from the value, layouts the column path does not serve (a VARCHAR pk column not in
the value), NULLs in the pk (the row path), over committed rows and this epoch's MemTable.
Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from hummock.key import new_epoch
from relational.arrow import to_arrow
from relational.memcomparable import OrderType
from relational.pair_columns import PairColumns
from relational.state_table import StateTable
from relational.types import DataType as T
from table_stores import OPTIONS

DESC = OrderType.DESC
ASC = OrderType.ASC
LAYOUTS = {   # schema, pk, order types, dist key, value indices, whether the column path serves it
    "join": ([T.BIGINT, T.BIGINT, T.INT], [1, 0], None, [1], [2], True),
    "desc": ([T.SMALLINT, T.INT, T.VARCHAR, T.DOUBLE], [1, 0], [DESC, ASC], [1], [2, 3], True),
    "value": ([T.INT, T.VARCHAR, T.BIGINT], [0, 1], None, [0], None, True),
    "varchar key": ([T.VARCHAR, T.BIGINT, T.INT], [0, 1], None, [0], [2], False),
}
SMALL = st.one_of(st.none(), st.integers(-3, 3))
ROW = st.tuples(SMALL, st.integers(-40000, 40000), st.one_of(st.none(), st.integers(-9, 9)),
                st.one_of(st.none(), st.floats(allow_nan=False, width=32)))


def _row(layout, r):
    """A row of ``layout`` from a drawn tuple (the pk's first column may be NULL)."""
    a, b, c, d = r
    if layout == "join":
        return (b, a, c)
    if layout == "desc":
        return (b % 30000, a, None if c is None else f"s{c}", d)
    if layout == "value":
        return (a, f"n{b % 5}", c)
    return (None if a is None else f"k{a}", b, c)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(sorted(LAYOUTS)), committed=st.lists(ROW, max_size=25),
       later=st.lists(ROW, max_size=10), deletes=st.integers(0, 5), probes=st.lists(SMALL, max_size=8))
def test_pairs_decoded_equal_rows_with_prefixes_and_their_columns(layout, committed, later, deletes, probes):
    schema, pk, orders, dist, value, served = LAYOUTS[layout]
    with HummockStorage.open("memory://", OPTIONS) as store:
        table = StateTable(store, 5, schema, pk, orders, dist, value, prefix_len_hint=1, consistent=False)
        assert (PairColumns.of(table.serde) is not None) == served
        table.init_epoch(new_epoch())
        rows = {}
        for r in committed:
            row = _row(layout, r)
            rows[table.serde.pk_of(row)] = row
        for row in rows.values():
            table.insert(row)
        epoch = table.epoch
        table.commit(new_epoch())
        store.checkpoint(epoch)
        for row in list(rows.values())[:deletes]:   # this epoch: deletes and inserts in the MemTable
            table.delete(row)
            del rows[table.serde.pk_of(row)]
        for r in later:
            row = _row(layout, r)
            if table.serde.pk_of(row) not in rows:
                rows[table.serde.pk_of(row)] = row
                table.insert(row)
        first = pk[0]
        prefixes = [(_row(layout, (p, 0, 0, 0.0))[first],) for p in probes]
        keys, values, ends = table.pairs_with_prefixes(prefixes)
        decoded = table.serde.decode_many(keys, values)
        assert [decoded[a:b] for a, b in zip([0, *ends], ends)] == table.rows_with_prefixes(prefixes)
        columns = table.decode_columns(keys, values)
        for c, t in enumerate(schema):
            expected = to_arrow([row[c] for row in decoded], t)
            assert columns[c].type == expected.type and columns[c].equals(expected), (c, columns[c], expected)


def test_the_column_path_decodes_integer_keys_and_falls_back_on_a_null_pk():
    """A NULL in an integer pk column makes its key short: the column path declines (None)
    and ``decode_columns`` takes the rows; extreme values of each width round-trip."""
    with HummockStorage.open("memory://", OPTIONS) as store:
        schema = [T.SMALLINT, T.INT, T.BIGINT, T.VARCHAR]
        table = StateTable(store, 6, schema, [0, 1, 2], [ASC, DESC, ASC], [0], [3])
        table.init_epoch(new_epoch())
        extremes = [(-32768, -2 ** 31, -2 ** 63, "a"), (32767, 2 ** 31 - 1, 2 ** 63 - 1, None), (0, 0, 0, "")]
        for row in extremes:
            table.insert(row)
        keys, values, _ = table.pairs_with_prefixes([(-32768,), (32767,), (0,)])
        decoder = PairColumns.of(table.serde)
        assert decoder is not None and decoder.decode(keys, values) is not None
        columns = table.decode_columns(keys, values)
        assert [tuple(c[i].as_py() for c in columns) for i in range(3)] == extremes
        table.insert((1, None, 5, "x"))
        keys, values, _ = table.pairs_with_prefixes([(1,)])
        assert decoder.decode(keys, values) is None
        assert [c.to_pylist() for c in table.decode_columns(keys, values)] == [[1], [None], [5], ["x"]]
        assert [c.to_pylist() for c in table.decode_columns([], [])] == [[], [], [], []]


def test_pairs_with_prefixes_of_mixed_widths_read_one_by_one():
    with HummockStorage.open("memory://", OPTIONS) as store:
        table = StateTable(store, 7, [T.INT, T.INT, T.INT], [0, 1], None, [0], [2])
        table.init_epoch(new_epoch())
        for row in [(1, 1, 10), (1, 2, 20), (2, 1, 30)]:
            table.insert(row)
        keys, values, ends = table.pairs_with_prefixes([(1,), (1, 2), (3,), (2,)])
        assert ends == [2, 3, 3, 4]
        assert table.serde.decode_many(keys, values) == [(1, 1, 10), (1, 2, 20), (1, 2, 20), (2, 1, 30)]
        assert table.pairs_with_prefixes([]) == ([], [], [])


if __name__ == "__main__":
    pytest.main([__file__])
