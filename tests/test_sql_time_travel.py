"""Time travel (sql/bind/time_travel.py): ``FOR SYSTEM_TIME AS OF <time>`` and ``AS OF EPOCH n``.

The property: a history of FLUSHed random changes to a table read by an MV; after it, a read
AS OF the wall-clock time captured after each FLUSH -- and AS OF the epoch committed by that
FLUSH -- equals the model's state at that point, for the table and the MV, while plain reads
see the latest state. The rest: the retention window's edge (an error naming the oldest
readable time, caused by hummock's ExpiredEpochError), parameters, joins of two points in
time, and what is refused.
"""

import datetime
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from hummock import ExpiredEpochError
from sql.errors import BindError, ExecutionError, UnsupportedError

UTC = datetime.timezone.utc


def _now():
    return datetime.datetime.now(UTC)


def _at(when: datetime.datetime) -> str:
    return f"TIMESTAMPTZ '{when.isoformat(sep=' ')}'"


@st.composite
def changes(draw, rows):
    out = []
    for _ in range(draw(st.integers(1, 4))):
        k = draw(st.integers(0, 5))
        if draw(st.booleans()):
            v = draw(st.integers(-9, 9))
            out.append(f"INSERT INTO t VALUES ({k}, {v})")
            rows[k] = v
        else:
            out.append(f"DELETE FROM t WHERE id = {k}")
            rows.pop(k, None)
    return out


def _mv_rows(rows):
    return [(len(rows), sum(rows.values()) if rows else None)]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reads_as_of_each_flush_see_that_state(data):
    rows, points = {}, []
    with sql.connect(":memory:", retention_seconds=3600) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n, sum(v) AS s FROM t")
        for step in range(data.draw(st.integers(1, 4), label="flushes")):
            for stmt in data.draw(changes(rows), label=f"changes {step}"):
                conn.execute(stmt)
            conn.execute("FLUSH")
            epoch = conn.db.store.max_committed_epoch
            time.sleep(0.003)   # the next commit's epoch is in a later millisecond
            points.append((_now(), epoch, sorted(rows.items()), _mv_rows(rows)))
            time.sleep(0.003)
        for when, epoch, table, mv in points:
            assert sorted(conn.execute(f"SELECT * FROM t FOR SYSTEM_TIME AS OF {_at(when)}").fetchall()) == table
            assert conn.execute(f"SELECT * FROM mv FOR SYSTEM_TIME AS OF {_at(when)}").fetchall() == mv
            assert sorted(conn.execute(f"SELECT * FROM t AS OF EPOCH {epoch}").fetchall()) == table
            assert conn.execute(f"SELECT * FROM mv FOR SYSTEM_TIME AS OF EPOCH {epoch}").fetchall() == mv
        assert sorted(conn.execute("SELECT * FROM t").fetchall()) == sorted(rows.items())
        assert conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF NOW()").fetchall() == \
            conn.execute("SELECT * FROM t").fetchall()


def test_two_points_in_time_in_one_query_and_parameters():
    with sql.connect(":memory:", retention_seconds=3600) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        conn.execute("FLUSH")
        time.sleep(0.01)
        before = _now()
        # the NOW() - interval queries below land at `before` plus however long they run after
        # `ago` is taken: a second's margin before the update (10 ms failed under CI load)
        time.sleep(1.0)
        conn.execute("UPDATE t SET v = v + 1")
        conn.execute("FLUSH")
        q = ("SELECT old.id, old.v, new.v FROM t FOR SYSTEM_TIME AS OF %s AS old "
             "JOIN t AS new ON old.id = new.id ORDER BY old.id")
        assert conn.execute(q, (before,)).fetchall() == [(1, 10, 11), (2, 20, 21)]
        naive = before.replace(tzinfo=None)   # a time without a zone is UTC
        assert conn.execute(q, (naive,)).fetchall() == [(1, 10, 11), (2, 20, 21)]
        assert conn.execute(q, (before.isoformat(),)).fetchall() == [(1, 10, 11), (2, 20, 21)]
        # NOW() - an interval reaching back to `before`
        time.sleep(0.05)
        ago = _now() - before
        text = f"INTERVAL '{ago.total_seconds():.6f} seconds'"
        assert conn.execute(f"SELECT sum(v) FROM t FOR SYSTEM_TIME AS OF NOW() - {text}").fetchall() == [(30,)]
        # RisingWave's spelling NOW() - '<n>' <unit> (sqlglot reads the unit as a table alias)
        seconds = f"'{ago.total_seconds():.6f}'"
        assert conn.execute(f"SELECT sum(t.v) FROM t FOR SYSTEM_TIME AS OF NOW() - {seconds} SECOND").fetchall() \
            == [(30,)]
        assert conn.execute("SELECT sum(v) FROM t FOR SYSTEM_TIME AS OF NOW() + '1' HOUR").fetchall() == [(32,)]
        # an integer is a Unix time in seconds: a future one reads the present, 2001 is long expired
        assert conn.execute(f"SELECT sum(v) FROM t FOR SYSTEM_TIME AS OF {int(time.time()) + 60}").fetchall() \
            == [(32,)]
        with pytest.raises(ExecutionError, match="oldest"):
            conn.execute("SELECT sum(v) FROM t FOR SYSTEM_TIME AS OF 1000000000")
        # INSERT ... SELECT reads the old snapshot too
        conn.execute("CREATE TABLE copy (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO copy SELECT * FROM t FOR SYSTEM_TIME AS OF %s", (before,))
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM copy ORDER BY id").fetchall() == [(1, 10), (2, 20)]


def test_past_the_retention_window_names_the_oldest_readable_time():
    with sql.connect(":memory:", retention_seconds=1.0) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 10)")
        conn.execute("FLUSH")
        early = _now()
        time.sleep(0.05)
        conn.execute("INSERT INTO t VALUES (2, 20)")
        conn.execute("FLUSH")
        assert conn.execute(f"SELECT * FROM t FOR SYSTEM_TIME AS OF {_at(early)}").fetchall() == [(1, 10)]
        time.sleep(1.1)   # now `early` is older than the 1 s window
        with pytest.raises(ExecutionError, match="oldest readable time is 20") as info:
            conn.execute(f"SELECT * FROM t FOR SYSTEM_TIME AS OF {_at(early)}")
        assert isinstance(info.value.__cause__, ExpiredEpochError)
        assert info.value.line == 1 and info.value.column is not None
        # the window still holds the state current at its start: the latest one here
        assert sorted(conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF NOW() - INTERVAL '0.1' SECOND")
                      .fetchall()) == [(1, 10), (2, 20)]


def test_without_retention_only_the_present_is_readable():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 10)")
        conn.execute("FLUSH")
        epoch = conn.db.store.max_committed_epoch
        assert conn.execute(f"SELECT * FROM t AS OF EPOCH {epoch}").fetchall() == [(1, 10)]
        conn.execute("INSERT INTO t VALUES (2, 20)")
        conn.execute("FLUSH")
        with pytest.raises(ExecutionError, match="oldest"):
            conn.execute(f"SELECT * FROM t AS OF EPOCH {epoch}")


@pytest.mark.parametrize("query, cls, what", [
    ("SELECT * FROM t AS OF EPOCH 18446744073709551615", ExecutionError, "not committed yet"),
    ("SELECT * FROM t FOR SYSTEM_TIME AS OF 'yesterday-ish'", BindError, "invalid timestamp"),
    ("SELECT * FROM t FOR SYSTEM_TIME AS OF v", UnsupportedError, "expected a timestamp"),
    ("SELECT * FROM t FOR SYSTEM_TIME AS OF NOW() - 5", BindError, "INTERVAL"),
    ("SELECT * FROM t FOR SYSTEM_TIME AS OF CAST(1 AS INT)", BindError, "needs a timestamp"),
    ("WITH c AS (SELECT * FROM t) SELECT * FROM c FOR SYSTEM_TIME AS OF NOW()", UnsupportedError, "CTE"),
    ("CREATE MATERIALIZED VIEW m AS SELECT * FROM t AS OF EPOCH 1", UnsupportedError, "materialized view"),
])
def test_refused_forms_say_why(query, cls, what):
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        with pytest.raises(cls, match=what):
            conn.execute(query).fetchall()
        assert conn.execute("SHOW MATERIALIZED VIEWS").fetchall() == []


def test_explain_shows_the_as_of_clause():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        text = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT * FROM t AS OF EPOCH 5").fetchall())
        assert "as_of=EPOCH 5" in text, text


def test_snapshots_of_a_query_are_released():
    with sql.connect(":memory:", retention_seconds=60) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 10)")
        conn.execute("FLUSH")
        when = _now()
        assert conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF %s", (when,)).fetchall() == [(1, 10)]
        with pytest.raises(ExecutionError):
            conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF 1000000000")
        assert not +conn.db.store._snapshot_epochs   # no pin left behind (a private counter)


def test_history_before_the_store_opened_is_not_kept(tmp_path):
    """After reopening, the commit log starts at the open: an older time is refused (hummock's
    retention counts epochs committed before open as committed at open), a later one is exact."""
    path = str(tmp_path / "db")
    with sql.connect(path, retention_seconds=3600) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 10)")
        conn.execute("FLUSH")
        time.sleep(0.01)
        before = _now()
    with sql.connect(path, retention_seconds=3600) as conn:
        with pytest.raises(ExecutionError, match="oldest readable time") as info:
            conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF %s", (before,))
        assert isinstance(info.value.__cause__, ExpiredEpochError)
        time.sleep(0.01)
        opened = _now()
        conn.execute("INSERT INTO t VALUES (2, 20)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF %s", (opened,)).fetchall() == [(1, 10)]
