"""StateTable's ``prefix_len_hint``: the byte length it declares to the store, and join-style
probes of absent keys that read no block (docs/relational.md, docs/engine.md "Prefix filters").
Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``)."""

from __future__ import annotations

import pytest

from hummock import HummockStorage
from hummock.key import new_epoch
from relational.errors import SchemaError
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.types import DataType as T
from table_stores import OPTIONS


def _open():
    return HummockStorage.open("memory://", OPTIONS)


@pytest.mark.parametrize("pk_types, hint, expected", [
    ((T.INT, T.BIGINT), 1, 2 + 5),
    ((T.INT, T.BIGINT), 2, 2 + 5 + 9),
    ((T.SMALLINT, T.VARCHAR), 1, 2 + 3),
    ((T.VARCHAR, T.INT), 1, None),        # variable width: nothing declared
    ((T.DOUBLE, T.DECIMAL), 2, None),
    ((T.DATE, T.TIMESTAMP, T.BOOLEAN), 3, 2 + 5 + 9 + 2),
])
def test_the_hint_becomes_a_byte_length_for_fixed_width_columns(pk_types, hint, expected):
    with _open() as store:
        schema = list(pk_types) + [T.VARCHAR]
        table = StateTable(store, 7, schema, list(range(len(pk_types))), dist_key_indices=[0],
                           prefix_len_hint=hint)
        assert table.prefix_len == expected
        assert store.table_options(7) == {"prefix_len": expected}


@pytest.mark.parametrize("hint", [0, 3, -1, True, 1.5, "1"])
def test_a_bad_hint_is_a_schema_error(hint):
    with _open() as store:
        with pytest.raises(SchemaError, match="prefix_len_hint"):
            StateTable(store, 7, [T.INT, T.INT], [0, 1], prefix_len_hint=hint)


def _block_lookups(store) -> int:
    stats = store.stats()["block_cache"]
    return stats["hits"] + stats["misses"]


def _join_state(store, hint):
    """A join side keyed by (join key, row id), distributed by the join key, descending row ids."""
    return StateTable(store, 9, [T.BIGINT, T.INT, T.VARCHAR], [0, 1], [OrderType.ASC, OrderType.DESC],
                      dist_key_indices=[0], prefix_len_hint=hint)


@pytest.mark.parametrize("hint", [1, None])
def test_absent_join_keys_read_no_block_with_the_hint(hint):
    with _open() as store:
        table = _join_state(store, hint)
        table.init_epoch(new_epoch())
        for sub in range(12):   # 12 committed epochs, each touching every even join key
            for k in range(0, 400, 2):
                table.insert((k, sub, f"r{sub}"))
            written = table.epoch
            table.commit(new_epoch())
            store.checkpoint(written)
        assert len(store.version().l0) >= 12
        rows = list(table.iter_with_prefix((10,)))
        assert [r[1] for r in rows] == list(range(11, -1, -1))
        before = _block_lookups(store)
        for k in range(1, 200, 2):
            assert list(table.iter_with_prefix((k,))) == []
            assert list(table.iter_with_prefix((k,), start=(3,), end_inclusive=True, end=(0,))) == []
        reads = _block_lookups(store) - before
        if hint is None:
            assert reads >= 12 * 100   # every SST opens a block per probe
        else:
            assert reads <= 2
        assert list(table.iter_with_prefix((None,))) == []   # NULL prefix: shorter, read as before
