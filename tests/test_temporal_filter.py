"""Temporal filters (now() in a materialized view, issue 29 item 2): the Now executor's clock
row follows the barriers' epochs and survives a restart; a DynamicFilter against it keeps
``ts > now() - INTERVAL '1 hour'`` true at every barrier as the time moves (executors driven
with chosen epochs); the SQL forms bind to that plan, equal their batch recomputation, survive
a reopen, and every other use of now() in an MV stays refused by name."""

import datetime

import pytest

import sql
from hummock import HummockStorage
from hummock.key import EPOCH_BASE_UNIX_MS, epoch_from_unix_ms
from relational.types import DataType as T
from stream.chunk import INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.executor import Checked
from stream.executors.dynamic_filter import DynamicFilter, dynamic_filter_left_table, dynamic_filter_right_table
from stream.executors.now import Now, epoch_time, now_state_table
from stream.message import Barrier
from stream.schema import Schema
from stream_harness import ListSource, drain, visible_rows
from stream_topn_model import apply_changes

MINUTE = 60_000
START = EPOCH_BASE_UNIX_MS + 10 ** 9   # ms; any time after the epoch base
L = Schema([("id", T.BIGINT), ("ts", T.TIMESTAMPTZ)])


def _barriers(minutes):
    """Barriers whose epochs are at START + m minutes for each m (the first chains from 0)."""
    out, prev = [], 0
    for m in minutes:
        curr = epoch_from_unix_ms(START + int(m * MINUTE))
        out.append(Barrier(prev, curr))
        prev = curr
    return out


def _at(minutes) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + \
        datetime.timedelta(milliseconds=START + int(minutes * MINUTE))


@pytest.fixture
def store(tmp_path):
    with HummockStorage.open(str(tmp_path / "db")) as s:
        yield s


def test_the_clock_row_follows_the_barriers_and_survives_a_restart(store):
    bs = _barriers([0, 5, 5.5, 9])
    out = drain(Checked(Now(ListSource(Schema([]), [], bs[:3]), now_state_table(store, 7))))
    assert visible_rows(out) == [(INSERT, (_at(5),)), (UPDATE_DELETE, (_at(5),)), (UPDATE_INSERT, (_at(5.5),))]
    store.checkpoint(bs[2].curr_epoch)
    # rebuilt after the commit: the stored row is updated, never inserted twice
    middle = epoch_from_unix_ms(START + 7 * MINUTE)
    again = [Barrier(bs[2].curr_epoch, middle), Barrier(middle, bs[3].curr_epoch)]
    out = drain(Checked(Now(ListSource(Schema([]), [], again), now_state_table(store, 7))))
    assert visible_rows(out) == [(UPDATE_DELETE, (_at(5.5),)), (UPDATE_INSERT, (_at(9),))]
    assert epoch_time(bs[3].curr_epoch) == _at(9)


def test_a_filter_against_the_clock_moves_with_the_time(store):
    """Rows every 10 minutes; ``ts > now()`` at barriers 0, 25, 55 and 130 minutes in: after
    each barrier the output is exactly the rows still ahead of it."""
    rows = [(i, _at(10 * i)) for i in range(12)]
    minutes = [0, 25, 55, 130]
    bs = _barriers(minutes)
    left = ListSource(L, [0], [bs[0], StreamChunk.from_rows(L, [("+", r) for r in rows])] + bs[1:])
    clock = Now(ListSource(Schema([]), [], bs), now_state_table(store, 3))
    lt = dynamic_filter_left_table(store, 1, L, [0], 1)
    rt = dynamic_filter_right_table(store, 2, clock.schema)
    out = drain(Checked(DynamicFilter(left, clock, 1, ">", lt, rt)))
    mv, seen = {}, []
    for msg in out:
        if type(msg) is StreamChunk:
            apply_changes(mv, [msg], [0])
        else:
            seen.append(sorted(mv))
    # the first barrier sets no clock yet: nothing passes until the second
    assert seen[0] == []
    for m, ids in zip(minutes[1:], seen[1:]):
        assert ids == [(i,) for i, ts in rows if ts > _at(m)], m


def _rows(c, q):
    return sorted(c.execute(q).fetchall())


def test_sql_temporal_filters_bind_maintain_and_reopen(tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    # hours away from the window's edges: the MV's clock (the last barrier) and the batch
    # query's now() differ by the test's own run time only
    rows = [(i, now + datetime.timedelta(hours=h)) for i, h in enumerate([-30, -5, -1.5, -0.5, 0.5, 3, 50])]
    path = str(tmp_path / "db")
    views = {"recent": "SELECT id FROM t WHERE ts > now() - INTERVAL '1 hour'",
             "recent_flipped": "SELECT id, ts FROM t WHERE now() - INTERVAL '2 hours' <= ts AND id > 0",
             "due": "SELECT id FROM t WHERE ts + INTERVAL '1 day' < current_timestamp",
             "naive": "SELECT id FROM u WHERE ts >= now() - INTERVAL '1 hour'"}
    with sql.connect(path) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ)")
        c.execute("CREATE TABLE u (id INT PRIMARY KEY, ts TIMESTAMP)")
        c.executemany("INSERT INTO t VALUES (%s, %s)", rows[:4])
        c.executemany("INSERT INTO u VALUES (%s, %s)", [(i, ts.replace(tzinfo=None)) for i, ts in rows])
        for name, q in views.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        plan = "\n".join(r[0] for r in c.execute(f"EXPLAIN CREATE MATERIALIZED VIEW x AS {views['recent']}"))
        assert "StreamNow" in plan and "StreamDynamicFilter" in plan
        c.executemany("INSERT INTO t VALUES (%s, %s)", rows[4:])
        c.execute("FLUSH")
        for name, q in views.items():
            assert _rows(c, f"SELECT * FROM {name}") == _rows(c, q), name
        assert _rows(c, "SELECT * FROM recent") == [(3,), (4,), (5,), (6,)]
    with sql.connect(path) as c:   # rebuilt: the clock continues from its stored row
        c.execute("DELETE FROM t WHERE id = 4")
        c.execute("FLUSH")
        for name, q in views.items():
            assert _rows(c, f"SELECT * FROM {name}") == _rows(c, q), name


@pytest.mark.parametrize("q", ["SELECT id, now() FROM t",
                               "SELECT id FROM t WHERE ts > now() OR id = 1",
                               "SELECT id FROM t WHERE ts > now() - (ts - ts)",
                               "SELECT id FROM t WHERE id > random()"])
def test_other_volatile_uses_stay_refused_by_name(q):
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ)")
        with pytest.raises(sql.errors.UnsupportedError, match="not allowed in a materialized view"):
            c.execute(f"CREATE MATERIALIZED VIEW m AS {q}")


def test_the_spark_pipeline_planner_refuses_a_temporal_filter_by_name():
    from sql.spark_pipeline.fragments import plan_pipeline
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ)")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT id FROM t WHERE ts > now() - INTERVAL '1 hour'")
        with pytest.raises(sql.errors.UnsupportedError, match="temporal filter.*Spark runtime"):
            plan_pipeline(c.db.catalog, c.db.plan_of)

