"""A HashJoin side's fresh rows (stream/executors/join_fresh_rows.py): the rows inserted under a
key new to the side, kept column-wise, answer the other side's probe of that key without a
store read -- and only while the key's one stored row is that row. Every ``Driver.send`` checks
the join's output against the batch join of both inputs and ``HashJoin._check``, which checks
that every kept key's stored rows are exactly the row kept."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.executors.join_fresh_rows import FIRST_SLOTS, FreshRows, supported
from stream.executors.join_key_filter import hash_keys
from stream.schema import Schema
from test_stream_hash_join import Driver, _count_reads

R = Schema([("rid", T.BIGINT), ("k", T.INT), ("w", T.INT)])


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


def test_a_partner_inserted_under_a_new_key_is_taken_unread(store, monkeypatch):
    """Right inserts keys 0..4 (new to it), left's inserts of 0..4 take their rows from the
    right's fresh rows: no read. A key the right wrote twice (two rows in one chunk, or a
    second row later), a key deleted or deleted and inserted again are not kept: those probes
    read the store and get every row."""
    d = Driver(store, "inner")
    reads = _count_reads(monkeypatch, lambda: d.join.right.table)
    d.send(1, *[("+", (100 + k, k, k)) for k in range(5)], ("+", (110, 7, 1)), ("+", (111, 7, 2)))
    out = d.send(0, *[("+", (k, k, 0)) for k in range(5)])
    assert reads == [] and d.join.right.fresh.hits == 5 and len(out) == 5
    d.send(0, ("+", (7, 7, 0)))                                  # two rows in one chunk: read
    assert reads == [(7,)]
    d.send(1, ("+", (120, 3, 9)))                                # a second row of key 3
    d.send(1, ("-", (104, 4, 4)))                                # key 4 deleted ...
    d.send(0, ("+", (13, 3, 0)), ("+", (14, 4, 0)))
    assert sorted(reads[1:]) == [(3,), (4,)]
    d.send(1, ("+", (121, 4, 5)))                                # ... and inserted again: not new
    d.send(0, ("+", (24, 4, 0)))
    assert reads[3:] == [(4,)] and d.join.right.fresh.hits == 5
    d.send(1, ("-", (100, 0, 0)))                                # a delete of a kept key's row
    d.send(0, ("+", (30, 0, 0)))
    assert reads[4:] == [(0,)]


def test_nulls_outside_the_key_come_back_and_null_keys_are_not_kept(store, monkeypatch):
    d = Driver(store, "inner")
    reads = _count_reads(monkeypatch, lambda: d.join.right.table)
    d.send(1, ("+", (100, 1, None)), ("+", (101, 2, 5)), ("+", (102, None, 6)))
    out = d.send(0, ("+", (1, 1, 0)), ("+", (2, 2, None)), ("+", (3, None, 0)))
    assert reads == [] and d.join.right.fresh.hits == 2
    assert sorted(row for _, row in out) == [(1, 1, 0, 100, 1, None), (2, 2, None, 101, 2, 5)]


def test_a_restart_or_an_evicted_table_only_costs_reads(store, monkeypatch):
    """The fresh rows start empty after recovery; the budget may drop them at any time (a
    budget too small for them): the join answers alike, reading the store."""
    d = Driver(store, "inner")
    d.send(1, *[("+", (100 + k, k, k)) for k in range(4)])
    d.checkpointed_restart()
    reads = _count_reads(monkeypatch, lambda: d.join.right.table)
    d.send(0, *[("+", (k, k, 0)) for k in range(4)])
    assert sorted(reads) == [(k,) for k in range(4)] and d.join.right.fresh.hits == 0
    small = Driver(store, "inner", budget=MemoryBudget(64 << 10), ids=(5, 6, 7, 8))
    for i in range(3):
        small.send(1, *[("+", (1000 * i + k, 100 * i + k, k)) for k in range(50)])
        small.send(0, *[("+", (1000 * i + k, 100 * i + k, 0)) for k in range(0, 50, 3)])


def test_a_hash_shared_by_two_keys_answers_only_its_own_key():
    """The table finds keys by hash; a hash found is checked against the key's values, so a
    key that shares another's hash is not answered with that key's row."""
    fresh = FreshRows(list(R.types), [1], MemoryBudget().cache("t"), 1 << 12)
    columns = [pa.array([7], pa.int64()), pa.array([5], pa.int32()), pa.array([1], pa.int32())]
    h = np.array([12345], np.uint64)
    fresh.write(h, columns, np.array([True]), np.array([True]))
    found, slots, table = fresh.lookup(h)
    assert found.tolist() == [True]
    assert fresh.keys_equal(table, slots, [np.array([5])]).tolist() == [True]
    assert fresh.keys_equal(table, slots, [np.array([6])]).tolist() == [False]
    assert [c.to_pylist() for c in fresh.take(table, slots)] == [[7], [5], [1]]
    fresh.write(h, columns, np.array([False]), np.array([False]))   # the key written again: forgotten
    assert fresh.lookup(h)[0].tolist() == [False]
    assert supported(R.types) and not supported([T.BIGINT, T.VARCHAR])



def _fresh_with(hashes, slots=FIRST_SLOTS):
    """A table of ``slots`` slots that cannot grow, holding keys ``k`` = 0, 1, ... under the given
    hashes (one chunk each, in order)."""
    fresh = FreshRows(list(R.types), [1], MemoryBudget().cache("t"), slots)
    for k, h in enumerate(hashes):
        fresh.write(np.array([h], np.uint64), _row(k), np.array([True]), np.array([True]))
    return fresh


def _row(k):
    return [pa.array([100 + k], pa.int64()), pa.array([k], pa.int32()), pa.array([k], pa.int32())]


def _kept(fresh, h) -> bool:
    return bool(fresh.lookup(np.array([h], np.uint64))[0][0])


def test_a_row_a_probe_took_goes_before_a_row_still_waiting():
    """A new key whose two slots are full pushes out the key whose row a probe already took
    (in a 1:1 join never probed again), even when the waiting key came in earlier."""
    n = FIRST_SLOTS
    a, b = (2 << 32) | 1, (1 << 32) | 2          # a: slots 1, 2 (takes 1); b: slots 2, 1 (takes 2)
    fresh = _fresh_with([a, b])
    found, slots, table = fresh.lookup(np.array([b], np.uint64))
    fresh.taken(table, slots[found])
    c = (2 << 32) | (n + 1)                       # slots 1 and 2: a (waiting, older), b (taken)
    fresh.write(np.array([c], np.uint64), _row(2), np.array([True]), np.array([True]))
    assert _kept(fresh, a) and _kept(fresh, c) and not _kept(fresh, b)
    untaken = _fresh_with([a, b])                 # nothing taken: the older key goes
    untaken.write(np.array([c], np.uint64), _row(2), np.array([True]), np.array([True]))
    assert not _kept(untaken, a) and _kept(untaken, b) and _kept(untaken, c)


def test_keys_of_one_chunk_that_want_one_slot_all_go_in():
    """Two keys of a chunk whose first slot is the same empty one: one takes it, the other
    its own second slot (a table that grows re-slots its keys the same way)."""
    d, e = (7 << 32) | 9, (8 << 32) | 9
    fresh = FreshRows(list(R.types), [1], MemoryBudget().cache("t"), FIRST_SLOTS)
    columns = [pa.array([1, 2], pa.int64()), pa.array([5, 6], pa.int32()), pa.array([0, 0], pa.int32())]
    both = np.array([True, True])
    fresh.write(np.array([d, e], np.uint64), columns, both, both)
    assert _kept(fresh, d) and _kept(fresh, e)
    found, slots, table = fresh.lookup(np.array([d, e], np.uint64))
    assert sorted(slots.tolist()) == [7, 9]
    assert [c.to_pylist() for c in fresh.take(table, slots)] == [[1, 2], [5, 6], [0, 0]]

def test_the_table_grows_to_a_third_of_the_budget_it_is_charged_to():
    """The size limit follows the cache's budget, also after a runtime adopts the cache."""
    small, big = MemoryBudget(3 << 20), MemoryBudget(30 << 20)
    fresh = FreshRows(list(R.types), [1], small.cache("t"))
    assert fresh.slot_bytes == 12 + 8 + 4 + 4   # hash and age, BIGINT, INT, INT
    assert fresh.max_slots == (3 << 20) // (3 * 28)
    big.adopt(fresh.cache)
    assert fresh.max_slots == (30 << 20) // (3 * 28)
    ids = np.arange(200_000, dtype=np.int64)
    columns = [pa.array(ids), pa.array((ids // 2).astype(np.int32)), pa.array(ids.astype(np.int32))]
    fresh.write(hash_keys([columns[1]]), columns, ids % 2 == 0, np.ones(len(ids), np.bool_))
    assert FIRST_SLOTS < len(fresh.table().hashes) <= fresh.max_slots
    assert fresh.cache.used <= big.capacity


_OPS = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 11), st.booleans()), min_size=1, max_size=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_OPS, st.integers(1, 6))
def test_any_history_joins_as_the_batch_join(store, ops, chunk):
    """Inserts and deletes of few keys on both sides, in chunks, with a budget that keeps
    evicting: the output equals the batch join after every chunk, and every kept key is its
    one stored row (``Driver.send``)."""
    global _RUN
    _RUN += 1
    d = Driver(store, "inner", budget=MemoryBudget(48 << 10), ids=tuple(range(10 * _RUN, 10 * _RUN + 4)))
    live = ({}, {})          # per side: id -> key
    next_id = [0]
    pending = ([], [])
    for side, key, insert in ops:
        mine = live[side]
        gone = [i for i, k in mine.items() if k == key]
        if insert or not gone:
            next_id[0] += 1
            mine[next_id[0]] = key
            pending[side].append(("+", (next_id[0], key, next_id[0] % 3)))
        else:
            del mine[gone[0]]
            pending[side].append(("-", (gone[0], key, gone[0] % 3)))
        if len(pending[side]) >= chunk:
            d.send(side, *pending[side])
            pending[side].clear()
    for side in (0, 1):
        if pending[side]:
            d.send(side, *pending[side])


_RUN = 0


def test_a_table_s_slots_are_the_hash_modulo_its_size_masked_or_not():
    """A power-of-two table finds a hash's two slots with a mask, any other size (a table
    capped at ``max_slots``) by the modulo: both are ``h % size`` and ``(h >> 32) % size``."""
    from stream.executors.join_fresh_rows import _Table
    h = np.random.default_rng(3).integers(0, 2**63, 2000, dtype=np.int64).view(np.uint64) * np.uint64(3)
    for slots in (4096, 1 << 20, 5000, 12_345):
        table = _Table(slots, [np.int64])
        a, b = table.homes(h)
        assert (table.mask is not None) == (slots & (slots - 1) == 0)
        assert a.dtype == b.dtype == np.int64
        assert (a == (h % np.uint64(slots)).astype(np.int64)).all()
        assert (b == ((h >> np.uint64(32)) % np.uint64(slots)).astype(np.int64)).all()
