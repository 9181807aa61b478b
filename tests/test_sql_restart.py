"""Restart tests of a local-directory SQL database (issue 13, item 6).

- Close and reopen: tables (with and without a pk), MVs and an MV on an MV come back with their
  data; maintenance resumes (new DML after reopen updates every MV, MV on MV included); a new MV
  after reopen backfills; drops survive a reopen; row ids of a pk-less table are not reused.
- Kill and reopen: a child process writes random DML and FLUSHes in a loop, printing what it
  FLUSHed, until it is killed with SIGKILL mid-stream (twice, the second run resuming the first
  one's database). After reopen every MV equals its recomputation over the base tables (a batch
  SELECT of its definition), every row FLUSHed before the kill is there, and new DML still
  updates the MVs.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import sql

REPO = Path(__file__).resolve().parent.parent


def rows(conn, query):
    return sorted(conn.execute(query).fetchall(), key=repr)


def names(conn, what):
    return sorted(r[0] for r in conn.execute(f"SHOW {what}").fetchall())


SCHEMA = [
    "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY, g INT, v INT)",
    "CREATE TABLE IF NOT EXISTS nopk (x INT, s VARCHAR)",
    "CREATE TABLE IF NOT EXISTS log (seq BIGINT PRIMARY KEY, note VARCHAR)",
]
MVS = {
    "m_agg": "SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g",
    "m_join": "SELECT t.id, t.v, nopk.s FROM t JOIN nopk ON t.g = nopk.x",
    "m_on_mv": "SELECT count(*) AS groups, sum(s) AS total FROM m_agg WHERE n > 0",
    "m_top": "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 3",
    "m_log": "SELECT count(*) AS n, max(seq) AS last FROM log",
    "m_dyn": "SELECT id, v FROM t WHERE v > (SELECT max(v) - 15 FROM t)",     # dynamic filter
    "m_semi": "SELECT id FROM t WHERE g NOT IN (SELECT x FROM nopk) AND "     # anti join + ScalarJoin
              "EXISTS (SELECT 1 FROM log WHERE log.seq = t.id)",              # semi join
}


def create_all(conn):
    for stmt in SCHEMA:
        conn.execute(stmt)
    for name, query in MVS.items():  # dict order: m_agg before m_on_mv
        conn.execute(f"CREATE MATERIALIZED VIEW IF NOT EXISTS {name} AS {query}")


def assert_mvs_match_recomputation(conn):
    for name, query in MVS.items():
        assert rows(conn, f"SELECT * FROM {name}") == rows(conn, query), name


def test_close_and_reopen_restores_everything_and_resumes_maintenance(tmp_path):
    path = str(tmp_path / "db")
    with sql.connect(path) as conn:
        create_all(conn)
        conn.execute("INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 5)")
        conn.execute("INSERT INTO nopk VALUES (1, 'one'), (1, 'one'), (2, 'two')")
        conn.execute("INSERT INTO log VALUES (1, 'a')")
        conn.execute("CREATE MATERIALIZED VIEW doomed AS SELECT id FROM t")
        conn.execute("FLUSH")
        conn.execute("DROP MATERIALIZED VIEW doomed")
        before = {name: rows(conn, f"SELECT * FROM {name}") for name in list(MVS) + ["t", "nopk", "log"]}
        tables, views = names(conn, "TABLES"), names(conn, "MATERIALIZED VIEWS")
    assert tables == ["log", "nopk", "t"]
    assert views == sorted(MVS)

    with sql.connect(path) as conn:
        assert names(conn, "TABLES") == tables
        assert names(conn, "MATERIALIZED VIEWS") == views
        for name, expected in before.items():
            assert rows(conn, f"SELECT * FROM {name}") == expected, name
        assert before["m_agg"] == [(1, 2, 30), (2, 1, 5)]
        assert before["m_on_mv"] == [(2, 35)]
        # maintenance resumes: every MV, the MV on an MV included, follows new DML
        conn.execute("INSERT INTO t VALUES (4, 2, 100)")
        conn.execute("UPDATE t SET v = 11 WHERE id = 1")
        conn.execute("DELETE FROM t WHERE id = 2")
        conn.execute("INSERT INTO nopk VALUES (2, 'two')")  # a fresh row id, not an overwrite
        conn.execute("FLUSH")
        assert rows(conn, "SELECT * FROM m_agg") == [(1, 1, 11), (2, 2, 105)]
        assert rows(conn, "SELECT * FROM m_on_mv") == [(2, 116)]
        assert rows(conn, "SELECT * FROM nopk") == [(1, "one"), (1, "one"), (2, "two"), (2, "two")]
        assert_mvs_match_recomputation(conn)
        # a new MV after reopen backfills, and the dropped MV's name is free
        conn.execute("CREATE MATERIALIZED VIEW doomed AS SELECT id, v FROM t WHERE v > 10")
        assert rows(conn, "SELECT * FROM doomed") == [(1, 11), (4, 100)]
        conn.execute("DROP MATERIALIZED VIEW m_on_mv")

    with sql.connect(path) as conn:  # a second reopen sees the second session's DDL and data
        assert names(conn, "MATERIALIZED VIEWS") == sorted(set(MVS) - {"m_on_mv"} | {"doomed"})
        assert rows(conn, "SELECT * FROM doomed") == [(1, 11), (4, 100)]
        conn.execute("UPDATE t SET v = 1 WHERE id = 4")
        conn.execute("FLUSH")
        assert rows(conn, "SELECT * FROM doomed") == [(1, 11)]
        assert rows(conn, "SELECT * FROM m_agg") == [(1, 1, 11), (2, 2, 6)]


def test_reopen_with_file_url(tmp_path):
    path = tmp_path / "db"
    with sql.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (7)")
        conn.execute("FLUSH")
    with sql.connect(path.as_uri()) as conn:
        assert conn.execute("SELECT * FROM t").fetchall() == [(7,)]


# The child writer: resumes from the database, then random DML forever, printing after each
# FLUSH the highest log sequence number it FLUSHed.
CHILD = r'''
import random, sys
import sql
sys.path.insert(0, sys.argv[3])
from test_sql_restart import create_all

path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
conn = sql.connect(path)
create_all(conn)
seq = conn.execute("SELECT COALESCE(max(seq), 0) FROM log").fetchone()[0]
print(f"resumed {seq}", flush=True)
while True:
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(5)
        if op == 0:
            conn.execute("INSERT INTO t VALUES (%s, %s, %s)",
                         (rng.randrange(10 ** 9), rng.randrange(5), rng.choice([None, rng.randrange(-50, 50)])))
        elif op == 1:
            conn.execute("UPDATE t SET v = %s WHERE g = %s", (rng.randrange(-50, 50), rng.randrange(5)))
        elif op == 2:
            conn.execute("DELETE FROM t WHERE v < %s", (rng.randrange(-60, 0),))
        elif op == 3:
            conn.execute("INSERT INTO nopk VALUES (%s, %s)", (rng.randrange(5), rng.choice(["a", "b", None])))
        else:
            conn.execute("DELETE FROM nopk WHERE x = %s AND s = %s", (rng.randrange(5), rng.choice(["a", "b"])))
        seq += 1
        conn.execute("INSERT INTO log VALUES (%s, %s)", (seq, f"op{op}"))
    conn.execute("FLUSH")
    print(f"flushed {seq}", flush=True)
'''


def run_child_until_killed(path, seed, flushes, log_dir):
    """Run the child until it has printed ``flushes`` FLUSHes, then SIGKILL it while it is
    writing the next batch; returns the last sequence number it reported FLUSHed."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(inherited + [str(REPO)]))
    stderr_path = Path(log_dir) / f"child-{seed}.stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, path, str(seed), str(REPO / "tests")],
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    last_flushed, seen = 0, 0
    try:
        for line in proc.stdout:
            parts = line.split()
            if parts[:1] == ["flushed"]:
                last_flushed, seen = int(parts[1]), seen + 1
                if seen >= flushes:
                    break
        else:
            raise AssertionError(f"child exited early ({proc.wait()}): {stderr_path.read_text()}")
    finally:
        proc.send_signal(signal.SIGKILL)  # mid-stream: it is already writing the next batch
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return last_flushed


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_and_reopen(tmp_path, seed):
    path = str(tmp_path / "db")
    flushed_first = run_child_until_killed(path, seed, 4, tmp_path)
    flushed = run_child_until_killed(path, seed + 100, 3, tmp_path)  # resumes, is killed again
    assert flushed > flushed_first
    with sql.connect(path) as conn:
        assert names(conn, "MATERIALIZED VIEWS") == sorted(MVS)
        logged = [r[0] for r in conn.execute("SELECT seq FROM log").fetchall()]
        assert set(range(1, flushed + 1)) <= set(logged), "a FLUSHed row is missing"
        assert sorted(logged) == list(range(1, len(logged) + 1)), "the log has a hole"
        assert_mvs_match_recomputation(conn)
        n, last = conn.execute("SELECT * FROM m_log").fetchone()
        assert (n, last) == (len(logged), max(logged))
        # maintenance resumes after the crash
        conn.execute("INSERT INTO t VALUES (-1, 4, 1000)")
        conn.execute("INSERT INTO log VALUES (%s, 'parent')", (max(logged) + 1,))
        conn.execute("FLUSH")
        assert_mvs_match_recomputation(conn)
        assert (-1, 1000) in rows(conn, "SELECT * FROM m_top")
        assert conn.execute("SELECT n FROM m_log").fetchone()[0] == len(logged) + 1
