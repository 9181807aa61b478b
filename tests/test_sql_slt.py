"""Golden SQL tests: every tests/sql/*.slt file runs through tests/slt_runner.py, once over
``sql.connect(":memory:")`` and once over a database in a fresh local directory.

Rewrite expected output with ``HUMMOCK_SLT_REWRITE=1`` (then review the diff: a rewrite is a
claim that the new output is right by Postgres/RisingWave semantics; tests/test_slt_runner.py
re-checks the files against DuckDB wherever DuckDB's semantics are Postgres's).

Also here: what slt cannot express -- time travel at a timestamp captured at run time, and the
Python API behind the rendering (value types, cursor, rowcount, URL forms, implicit_flush=).
"""

from pathlib import Path

import pytest

import slt_runner
import sql
from hummock import HummockError

SLT_DIR = Path(__file__).parent / "sql"
SLT_FILES = sorted(SLT_DIR.glob("*.slt"))

# Files whose features are not built yet (none today: every file passes). Each entry is a strict
# xfail: the run fails the moment the feature works and the entry is not removed.
PENDING: dict[str, str] = {}


def _slt_param(path):
    reason = PENDING.get(path.stem)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, marks=marks, id=path.stem)


def test_slt_files_exist():
    assert len(SLT_FILES) >= 17, [p.name for p in SLT_FILES]


@pytest.mark.parametrize("store", ["memory", "local"])
@pytest.mark.parametrize("path", [_slt_param(p) for p in SLT_FILES])
def test_slt(path, store, tmp_path):
    url = ":memory:" if store == "memory" else str(tmp_path / "db")
    with sql.connect(url) as conn:
        slt_runner.run_file(conn, path)


def test_time_travel_reads_older_snapshots(tmp_path):
    """FOR SYSTEM_TIME AS OF a time captured between two FLUSHed changes reads the older data,
    for a table and an MV alike (the part of time_travel.slt whose timestamps are only known at
    run time). retention_seconds keeps the old epochs readable."""
    import datetime
    import time

    with sql.connect(str(tmp_path / "db"), retention_seconds=3600) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n, sum(v) AS s FROM t")
        conn.execute("INSERT INTO t VALUES (1, 10)")
        conn.execute("FLUSH")
        time.sleep(0.05)  # separates the commit times; nothing asserts on durations
        between = datetime.datetime.now(datetime.timezone.utc)
        time.sleep(0.05)
        conn.execute("UPDATE t SET v = 20 WHERE id = 1")
        conn.execute("INSERT INTO t VALUES (2, 5)")
        conn.execute("FLUSH")
        at = f"TIMESTAMPTZ '{between.isoformat(sep=' ')}'"
        assert conn.execute(f"SELECT * FROM t FOR SYSTEM_TIME AS OF {at}").fetchall() == [(1, 10)]
        assert conn.execute(f"SELECT * FROM mv FOR SYSTEM_TIME AS OF {at}").fetchall() == [(1, 10)]
        assert sorted(conn.execute("SELECT * FROM t").fetchall()) == [(1, 20), (2, 5)]
        assert conn.execute("SELECT * FROM mv").fetchall() == [(2, 25)]
        from hummock import ExpiredEpochError

        # the issue names the durability issue's ExpiredEpochError; a SqlError wrapping it is fine
        with pytest.raises((sql.SqlError, ExpiredEpochError), match="(?i)oldest"):
            conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF '2000-01-01 00:00:00+00'").fetchall()


# ---- the Python API behind the slt rendering: value types, cursors, URLs ------------------------

def test_python_values_have_the_documented_types():
    import datetime
    import decimal

    from relational.types import Interval

    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE v (k INT PRIMARY KEY, bo BOOLEAN, sm SMALLINT, bi BIGINT, de DECIMAL,"
                     " re REAL, db DOUBLE PRECISION, s VARCHAR, by_ BYTEA, da DATE, ti TIME,"
                     " ts TIMESTAMP, tz TIMESTAMPTZ, iv INTERVAL)")
        conn.execute("INSERT INTO v VALUES (1, true, 2, 3, 1.25, 0.5, 0.25, 's', '\\x01', '2026-01-02',"
                     " '03:04:05', '2026-01-02 03:04:05', '2026-01-02 03:04:05+00', INTERVAL '1 day')")
        conn.execute("INSERT INTO v (k) VALUES (2)")
        conn.execute("FLUSH")
        cur = conn.execute("SELECT * FROM v ORDER BY k")
        row, nulls = cur.fetchall()
        assert [type(x) for x in row] == [int, bool, int, int, decimal.Decimal, float, float, str, bytes,
                                          datetime.date, datetime.time, datetime.datetime,
                                          datetime.datetime, Interval]
        assert row[4] == decimal.Decimal("1.25") and row[8] == b"\x01"
        assert row[11].tzinfo is None
        assert row[12] == datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
        assert row[12].utcoffset() == datetime.timedelta(0)
        assert row[13] == Interval(0, 1, 0)
        assert nulls == (2,) + (None,) * 13
        assert [d[1] for d in cur.description[:4]] == ["integer", "boolean", "smallint", "bigint"]


def test_cursor_object_and_rowcount_of_select():
    with sql.connect("memory://") as conn:
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (a INT PRIMARY KEY)")
        assert cur.rowcount == -1
        cur.execute("INSERT INTO t VALUES (1), (2), (3)")
        assert cur.rowcount == 3
        cur.execute("FLUSH")
        cur.execute("SELECT a FROM t ORDER BY a")
        assert cur.fetchmany(2) == [(1,), (2,)]
        assert cur.fetchall() == [(3,)]
        assert cur.rowcount == 3
        cur.execute("SELECT a FROM t WHERE a > %s ORDER BY a", (1,))
        assert cur.fetch_arrow().column("a").to_pylist() == [2, 3]


def test_connect_implicit_flush_option():
    with sql.connect(":memory:", implicit_flush=True) as conn:
        assert conn.execute("SHOW RW_IMPLICIT_FLUSH").fetchall() == [("true",)]
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY)")
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
        for i in range(3):
            conn.execute("INSERT INTO t VALUES (%s)", (i,))
            assert conn.execute("SELECT n FROM mv").fetchall() == [(i + 1,)]  # no FLUSH needed


def test_closed_connection_refuses_statements():
    conn = sql.connect(":memory:")
    conn.close()
    with pytest.raises(HummockError):
        conn.execute("SELECT 1")
