"""Aggregates over append-only streams (issue 30 item 3): the planner runs a GROUP BY over an
input that can only insert (an APPEND ONLY table through Project/Filter) as an append-only
HashAgg -- min/max keep only their current value, so the value state (one row per group) is
the whole state -- and EXPLAIN says so; over a retractable input the plan keeps the
materialized input per min/max. An append-only group whose output did not change is neither
emitted nor written. MVs equal their batch recomputation under random inserts."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from relational.types import DataType as T
from sql.build import IdAllocator, allocate
from sql.plan import nodes as P
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, agg_table_count
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain

AGG_Q = ("SELECT g, count(*) AS n, sum(v) AS s, max(v) AS hi, min(w) AS lo, avg(v) AS a "
         "FROM t WHERE v % 7 <> 3 GROUP BY g")


def _rows(conn, q):
    return sorted(conn.execute(q).fetchall(), key=repr)


def _explain(conn, q):
    return [r[0] for r in conn.execute(f"EXPLAIN CREATE MATERIALIZED VIEW x AS {q}").fetchall()]


def _hash_agg(conn, mv):
    ex = conn.db.builder.actors[mv].executor
    while not isinstance(ex, HashAgg):
        ex = ex.input
    return ex


def _stored_rows(table) -> int:
    return sum(1 for _ in table.iter_with_prefix(()))


@pytest.mark.parametrize("table", ["CREATE TABLE t (g INT, v BIGINT, w VARCHAR) APPEND ONLY",
                                   "CREATE TABLE t (id INT PRIMARY KEY, g INT, v BIGINT, w VARCHAR) APPEND ONLY "
                                   "ON CONFLICT DO NOTHING"])
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None,
          max_examples=max(5, settings().max_examples // 5))
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5),
                                           st.one_of(st.none(), st.integers(-50, 50)),
                                           st.one_of(st.none(), st.sampled_from(["a", "b", "zz", ""]))),
                                 min_size=1, max_size=10), min_size=1, max_size=4))
def test_an_aggregate_over_an_append_only_table_equals_its_batch_recomputation(table, batches):
    with sql.connect(":memory:") as c:
        c.execute(table)
        c.execute(f"CREATE MATERIALIZED VIEW m AS {AGG_Q}")
        c.execute("CREATE MATERIALIZED VIEW tot AS SELECT max(v) AS hi, count(*) AS n FROM t")
        keyed = "PRIMARY KEY" in table
        for batch in batches:
            for id_, g, v, w in batch:
                if keyed:
                    c.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", (id_, g, v, w))
                else:
                    c.execute("INSERT INTO t VALUES (%s, %s, %s)", (g, v, w))
            c.execute("FLUSH")
            assert _rows(c, "SELECT * FROM m") == _rows(c, AGG_Q)
            assert _rows(c, "SELECT * FROM tot") == _rows(c, "SELECT max(v), count(*) FROM t")
        agg = _hash_agg(c, "m")
        assert agg.append_only and not agg.extreme   # no materialized input per min/max
        assert not agg.value_table.consistent        # relaxed: no stored-row probe per update
        agg._check()
        # the whole state: one value-state row per group
        assert _stored_rows(agg.value_table) == len(_rows(c, "SELECT DISTINCT g FROM t WHERE v % 7 <> 3"))


def test_explain_marks_the_aggregate_append_only_and_it_takes_one_state_table():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (g INT, v BIGINT, w VARCHAR) APPEND ONLY")
        c.execute("CREATE TABLE r (g INT, v BIGINT, w VARCHAR)")
        lines = _explain(c, AGG_Q)
        [agg] = [line for line in lines if "StreamHashAgg" in line]
        assert "append_only" in agg and agg.endswith("state_tables=['new0']"), agg
        [agg] = [line for line in _explain(c, AGG_Q.replace("FROM t", "FROM r")) if "StreamHashAgg" in line]
        assert "append_only" not in agg and agg.endswith("state_tables=['new0', 'new1', 'new2']"), agg
        # an aggregate over an aggregate: the lower one's output retracts
        q = "SELECT max(n) AS hi FROM (SELECT g, count(*) AS n FROM t GROUP BY g) x"
        [outer, inner] = [line for line in _explain(c, q) if "Agg" in line]
        assert "append_only" not in outer and "append_only" in inner, (outer, inner)


def test_a_retractable_input_keeps_the_retractable_path():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, v BIGINT, w VARCHAR)")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {AGG_Q.replace('id', 'id')}")
        c.execute("INSERT INTO t VALUES (1, 1, 10, 'a'), (2, 1, 20, 'b'), (3, 2, 5, 'c')")
        c.execute("FLUSH")
        c.execute("DELETE FROM t WHERE id = 2")
        c.execute("UPDATE t SET w = 'z' WHERE id = 1")
        c.execute("FLUSH")
        assert _rows(c, "SELECT * FROM m") == _rows(c, AGG_Q)
        agg = _hash_agg(c, "m")
        assert not agg.append_only and sorted(agg.extreme) == [2, 3]


def test_an_mv_stored_with_the_retractable_layout_is_rebuilt_retractable():
    """Ids stored before the planner chose append-only aggregates (a materialized input per
    min/max): the rebuild keeps that layout rather than failing on the id count."""
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (g INT, v BIGINT, w VARCHAR) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {AGG_Q}")
        plan = c.db.plan_of(c.db.catalog.get("m"))
    [agg] = [n for n in P.walk(plan) if isinstance(n, P.Agg)]
    fresh = allocate(plan, IdAllocator(stored=[101]))
    assert fresh[id(agg)] == [101] and agg._append_only
    agg._append_only = None
    legacy = allocate(plan, IdAllocator(stored=[101, 102, 103]))
    assert legacy[id(agg)] == [101, 102, 103] and not agg._append_only


S = Schema([("id", T.BIGINT), ("g", T.INT), ("v", T.INT)])


def test_an_append_only_group_whose_output_is_unchanged_is_neither_emitted_nor_written():
    calls = [AggCall("max", 2)]
    store, epochs = HummockStorage.open("memory://"), Epochs()
    rows = [[(1, 1, 5), (2, 2, 3)], [(3, 1, 4), (4, 2, 9)], [(5, 1, 5), (6, 1, 1)]]
    msgs = [epochs.barrier()]
    for batch in rows:
        msgs += [StreamChunk.from_rows(S, [("+", r) for r in batch]), epochs.barrier()]
    ex = HashAgg(ListSource(S, [0], msgs), [1], calls, store, range(10, 10 + agg_table_count(calls, True)),
                 append_only=True)
    written = []
    real = ex.value_table.write_chunk

    def spy(ops, columns, visibility=None):
        written.append(len(ops))
        return real(ops, columns, visibility)
    ex.value_table.write_chunk = spy
    out = [m.rows() for m in drain(Checked(ex)) if isinstance(m, StreamChunk)]
    assert out == [[(1, (1, 5)), (1, (2, 3))], [(3, (2, 3)), (4, (2, 9))]]
    # epoch 2: group 2's new row only (the relaxed value state takes its update pair as the
    # insert of the new row, which replaces the stored one); epoch 3: nothing
    assert written == [2, 1]
    assert _stored_rows(ex.value_table) == 2
    ex._check()


def test_an_append_only_aggregate_resumes_after_reopen(tmp_path):
    path = str(tmp_path / "db")
    with sql.connect(path) as c:
        c.execute("CREATE TABLE t (g INT, v BIGINT, w VARCHAR) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {AGG_Q}")
        c.execute("INSERT INTO t VALUES (1, 5, 'a'), (1, 9, 'b'), (2, -4, NULL), (3, 10, 'c')")
        c.execute("FLUSH")
        before = _rows(c, "SELECT * FROM m")
    with sql.connect(path) as c:
        assert _rows(c, "SELECT * FROM m") == before
        c.execute("INSERT INTO t VALUES (1, 2, 'z'), (2, 40, 'a'), (4, 1, 'q'), (3, 3, NULL)")
        c.execute("FLUSH")
        assert _rows(c, "SELECT * FROM m") == _rows(c, AGG_Q)
        assert _hash_agg(c, "m").append_only


def test_early_flushes_overwrite_a_group_within_an_epoch_and_a_restart_reads_the_last():
    """``max_dirty_groups=1``: every chunk flushes, so one group's row is written several times
    in one epoch (updates of the relaxed value state); a new executor reads the last."""
    calls = [AggCall("max", 2), AggCall("count"), AggCall("sum", 2)]
    store, epochs = HummockStorage.open("memory://"), Epochs()

    def run(batches):
        msgs = [epochs.barrier()]
        for chunks in batches:
            msgs += [StreamChunk.from_rows(S, [("+", r) for r in rows]) for rows in chunks] + [epochs.barrier()]
        ex = HashAgg(ListSource(S, [0], msgs), [1], calls, store, range(10, 10 + agg_table_count(calls, True)),
                     append_only=True, max_dirty_groups=1)
        out = [r for m in drain(Checked(ex)) if isinstance(m, StreamChunk) for r in m.rows()]
        ex._check()
        return ex, out

    run([[[(1, 1, 5), (2, 2, 1)], [(3, 1, 7)], [(4, 1, 2), (5, 2, 9)]]])
    ex, out = run([[[(6, 1, 1)], [(7, 2, 10)]]])
    assert out[-4:] == [(3, (1, 7, 3, 14)), (4, (1, 7, 4, 15)), (3, (2, 9, 2, 10)), (4, (2, 10, 3, 20))]
    assert {tuple(r) for r in ex.value_table.iter_with_prefix(())} == {(1, 4, 7, 4, 15, 4), (2, 3, 10, 3, 20, 3)}


def test_a_database_written_with_retractable_aggregates_reopens_and_goes_on(tmp_path, monkeypatch):
    """An MV created while aggregates over APPEND ONLY tables were planned retractable (its
    stored ids: a materialized input per min/max) reopens on the retractable layout and keeps
    equal to its batch recomputation."""
    import sql.build
    path = str(tmp_path / "db")
    monkeypatch.setattr(sql.build, "agg_append_only", lambda n: False)   # the planner before
    with sql.connect(path) as c:
        c.execute("CREATE TABLE t (g INT, v BIGINT, w VARCHAR) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW m AS {AGG_Q}")
        c.execute("INSERT INTO t VALUES (1, 5, 'a'), (1, 9, 'b'), (2, -4, NULL)")
        c.execute("FLUSH")
        assert len(c.db.catalog.get("m").internal_ids) == 3
    monkeypatch.undo()
    with sql.connect(path) as c:
        agg = _hash_agg(c, "m")
        assert not agg.append_only and len(agg.extreme) == 2
        c.execute("INSERT INTO t VALUES (1, 20, 'zz'), (2, 40, 'a'), (4, 1, 'q')")
        c.execute("FLUSH")
        assert _rows(c, "SELECT * FROM m") == _rows(c, AGG_Q)
        c.execute(f"CREATE MATERIALIZED VIEW m2 AS {AGG_Q}")   # a new MV is planned append-only
        assert _hash_agg(c, "m2").append_only and len(c.db.catalog.get("m2").internal_ids) == 1
        assert _rows(c, "SELECT * FROM m2") == _rows(c, AGG_Q)


@settings(deadline=None, max_examples=max(5, settings().max_examples // 5))
@given(epochs_ops=st.lists(st.lists(st.tuples(st.booleans(), st.integers(0, 4), st.integers(-9, 9)),
                                    min_size=1, max_size=12), min_size=1, max_size=5),
       max_dirty=st.sampled_from([1, 2, 1 << 14]))
def test_a_relaxed_value_state_ends_as_the_strict_one(epochs_ops, max_dirty):
    """A relaxed value state (``consistent=False``) takes each update pair as the insert of the
    new row: under inserts, deletes that empty groups and early flushes (``max_dirty_groups``)
    its output and stored rows are the strict aggregation's."""
    msgs, live, next_id, epochs = None, [], 0, Epochs()
    msgs = [epochs.barrier()]
    for batch in epochs_ops:
        changes = []
        for delete, g, v in batch:
            if delete and live:
                changes.append(("-", live.pop(v % len(live))))
            else:
                next_id += 1
                live.append((next_id, g, v))
                changes.append(("+", live[-1]))
        msgs += [StreamChunk.from_rows(S, changes), epochs.barrier()]
    calls = [AggCall("count"), AggCall("sum", 2), AggCall("max", 2)]
    results = []
    for consistent in (True, False):
        store = HummockStorage.open("memory://")
        ex = HashAgg(ListSource(S, [0], list(msgs)), [1], calls, store,
                     range(10, 10 + agg_table_count(calls)), consistent=consistent, max_dirty_groups=max_dirty)
        out = [m.rows() for m in drain(Checked(ex)) if isinstance(m, StreamChunk)]
        ex._check()
        results.append((out, list(ex.value_table.iter_with_prefix(()))))
    assert results[0] == results[1]
    assert sorted(r[0] for r in results[1][1]) == sorted({g for _, g, _ in live})
