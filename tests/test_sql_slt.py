"""Golden SQL tests: every tests/sql/*.slt file runs through tests/slt_runner.py, once over
``sql.connect(":memory:")`` and once over a database in a fresh local directory.

Rewrite expected output with ``HUMMOCK_SLT_REWRITE=1`` (then review the diff: a rewrite is a
claim that the new output is right by Postgres/RisingWave semantics).
"""

from pathlib import Path

import pytest

import sql
import slt_runner

if not hasattr(sql, "connect"):
    pytest.skip("SQL frontend not merged yet", allow_module_level=True)

SLT_DIR = Path(__file__).parent / "sql"
SLT_FILES = sorted(SLT_DIR.glob("*.slt"))


def test_slt_files_exist():
    assert len(SLT_FILES) >= 17, [p.name for p in SLT_FILES]


@pytest.mark.parametrize("store", ["memory", "local"])
@pytest.mark.parametrize("path", SLT_FILES, ids=[p.stem for p in SLT_FILES])
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
        with pytest.raises(sql.SqlError, match="(?i)oldest"):
            conn.execute("SELECT * FROM t FOR SYSTEM_TIME AS OF '2000-01-01 00:00:00+00'").fetchall()
