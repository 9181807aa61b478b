"""Row ids borrowed ahead of the clock are waited for before the commit, not in the DML executor
(relational/row_id.py ``RowIdHorizon``, stream/runtime/barrier_loop.py): no committed id is ever
ahead of the wall clock, and the barrier is not held up in every DML executor meanwhile."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

import sql
from hummock.key import EPOCH_BASE_UNIX_MS
from relational.row_id import SEQUENCE_LIMIT, RowIdGenerator, RowIdHorizon, split_row_id


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000 - EPOCH_BASE_UNIX_MS


def test_horizon_keeps_the_latest_millisecond_and_measures_it_to_the_nanosecond():
    now = [(EPOCH_BASE_UNIX_MS + 1_000) * 1_000_000 + 250_000]   # 1,000.25 ms past the base
    h = RowIdHorizon(clock_ns=lambda: now[0])
    assert h.ahead_s() < 0   # nothing noted
    h.note(1_002)
    h.note(1_001)            # an older millisecond leaves it
    assert abs(h.ahead_s() - 0.00175) < 1e-9
    now[0] += 1_750_000
    assert h.ahead_s() == 0


def test_a_flush_commits_no_row_id_ahead_of_the_clock_and_the_dml_never_sleeps(monkeypatch):
    slept = []
    real = RowIdGenerator.catch_up

    def catch_up(self):
        slept.append(self.last_ms)
        return real(self)
    monkeypatch.setattr(RowIdGenerator, "catch_up", catch_up)
    n = SEQUENCE_LIMIT * 40   # 40 ms of ids in one statement: borrowed ahead of the clock
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        for create in ("CREATE TABLE t (v BIGINT) APPEND ONLY",
                       "CREATE SOURCE s (v BIGINT) WITH (connector = 'push')"):
            c.execute(create)
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT v FROM s")   # keyed by the source's row id
        for relation in ("t", "s"):
            c.insert_arrow(relation, pa.table({"v": pa.array(np.arange(n), pa.int64())}))
        c.execute("FLUSH")
        committed_at = _wall_ms()
        for name in ("t", "m"):
            ids = _row_ids(c, name)
            assert len(ids) == n == len(set(ids))
            assert split_row_id(max(ids))[0] <= committed_at   # the clock had reached every id
    assert slept == []   # the in-process runtime's DML executors left the wait to the commit



def test_a_tables_dml_owns_sql_dml_width_generator_numbers_and_its_ids_follow_insertion_order():
    """The SQL runtime's DML actor issues 16 x 4,096 ids a millisecond (relational/row_id.py):
    a 10k-row batch then borrows nothing from the clock for its commit to wait for. Its ids use
    only its generator numbers and still increase in the order the rows came."""
    from relational.row_id import SQL_DML_WIDTH
    n = SEQUENCE_LIMIT * SQL_DML_WIDTH * 2 + 5
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (v BIGINT) APPEND ONLY")
        c.insert_arrow("t", pa.table({"v": pa.array(np.arange(n), pa.int64())}))
        c.execute("FLUSH")
        desc = c.db.catalog.get("t").desc
        from relational.row_serde import RowSerde
        serde = RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices)
        rows = [serde.decode(k, v) for k, v in c.db.store.iter(desc.table_id, c.db.store.max_committed_epoch)]
    by_id = [row[0] for row in sorted(rows, key=lambda row: row[-1])]
    assert by_id == list(range(n))
    used = {split_row_id(row[-1])[1] for row in rows}   # a 16k chunk needs 4 numbers' sequences
    assert used <= set(range(SQL_DML_WIDTH)) and len(used) >= 4

def _row_ids(c, name) -> list:
    """The hidden row ids of relation ``name`` as stored (its pk), at the committed epoch."""
    from relational.row_serde import RowSerde
    desc = c.db.catalog.get(name).desc
    serde = RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices)
    store = c.db.store
    column = desc.pk_indices[-1]
    return [serde.decode(k, v)[column] for k, v in store.iter(desc.table_id, store.max_committed_epoch)]


def test_the_commit_waits_for_the_clock_to_reach_the_horizon():
    """A horizon 30 ms ahead (as ids borrowed by a large INSERT leave it): the checkpoint's
    commit starts only once the wall clock has reached that millisecond."""
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        c.execute("CREATE TABLE t (v BIGINT) APPEND ONLY")
        store, commits = c.db.store, []
        real = store.commit_epoch

        def commit_epoch(epoch):
            commits.append(time.time_ns())
            return real(epoch)
        store.commit_epoch = commit_epoch
        target = _wall_ms() + 30
        c.db.rt.row_id_horizon.note(target)
        c.execute("INSERT INTO t VALUES (1)")
        c.execute("FLUSH")
        assert commits and min(commits) >= (target + EPOCH_BASE_UNIX_MS) * 1_000_000
        assert c.execute("SELECT v FROM t").fetchall() == [(1,)]
