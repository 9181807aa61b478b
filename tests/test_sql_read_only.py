"""Read-only SQL connections (issue 27 item 3): ``sql.connect(url, read_only=True)`` beside one
writer, in other processes.

The writer keeps an invariant -- ``sum(bal)`` over ``acc`` is constant -- through transfers (one
UPDATE moving an amount between two accounts: one chunk, one epoch), while it compacts
(``compact_all``) and vacuums with a short grace (``vacuum_min_age_s=1``, reader leases of 2 s)
and, midway, creates an MV over ``acc``. Reader processes (``READER`` below, run with
``python -c``) query in a loop, each statement at the newest committed epoch: every result must
show the invariant (table, MV, and the two together in one statement: one epoch), never raise,
and the MV created after they connected must show up. Also: DDL, DML and COPY FROM are refused
with ``ReadOnlyError`` naming the statement; ``pinned=True`` stays at its version.
"""

import json
import os
import random
import subprocess
import sys
import time

import pytest

import sql
from sql.errors import ReadOnlyError

ACCOUNTS = 40
START = 1000
TOTAL = ACCOUNTS * START
OPTIONS = {"vacuum_min_age_s": 1.0, "reader_lease_s": 2.0}

READER = r"""
import json, sys, time, traceback
import sql
url, seconds, total, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = {"queries": 0, "errors": [], "torn": [], "mv_reads": 0, "epochs": set()}
conn = sql.connect(url, read_only=True, reader_lease_s=2.0)
print("READY", flush=True)
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    try:
        got = conn.execute("SELECT sum(bal), count(*) FROM acc").fetchone()
        out["queries"] += 1
        if got != (total, n):
            out["torn"].append(["acc", str(got)])
        out["epochs"].add(conn.db.store.max_committed_epoch)
        if "total" in [r[0] for r in conn.execute("SHOW MATERIALIZED VIEWS").fetchall()]:
            got = conn.execute("SELECT s, c, (SELECT sum(bal) FROM acc) - s FROM total").fetchall()
            out["mv_reads"] += 1
            if got != [(total, n, 0)]:
                out["torn"].append(["total", str(got)])
    except Exception as exc:
        out["errors"].append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-800:]}")
out["epochs"] = len(out["epochs"])
conn.close()
print("SUMMARY " + json.dumps(out), flush=True)
"""


def _start_reader(url, seconds):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen([sys.executable, "-c", READER, url, str(seconds), str(TOTAL), str(ACCOUNTS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _summary(proc) -> dict:
    out, err = proc.communicate(timeout=120)
    lines = [line for line in out.splitlines() if line.startswith("SUMMARY ")]
    assert lines, f"reader died: {err[-3000:]}"
    return json.loads(lines[-1][len("SUMMARY "):])


def test_readers_in_other_processes_see_whole_epochs_while_the_writer_commits_compacts_and_vacuums(tmp_path):
    url = str(tmp_path / "db")
    w = sql.connect(url, barrier_interval_ms=20, **OPTIONS)
    try:
        w.execute("CREATE TABLE acc (id INT PRIMARY KEY, bal BIGINT)")
        w.executemany("INSERT INTO acc VALUES (%s, %s)", [(i, START) for i in range(ACCOUNTS)])
        w.flush()
        readers = [_start_reader(url, 9.0) for _ in range(2)]
        for r in readers:   # connected: the MV below is created after they opened the database
            assert r.stdout.readline().strip() == "READY", r.stderr.read()[-3000:]
        rng = random.Random(7)
        started, created, vacuumed, step = time.monotonic(), False, 0, 0
        while time.monotonic() - started < 8.0:
            a, b = rng.sample(range(ACCOUNTS), 2)
            amount = rng.randint(1, 50)
            w.execute(f"UPDATE acc SET bal = CASE WHEN id = {a} THEN bal - {amount} ELSE bal + {amount} END "
                      f"WHERE id IN ({a}, {b})")
            step += 1
            if step % 15 == 0:
                w.flush()
                w.db.store.compact_all()
                vacuumed += w.db.store.vacuum()
            if not created and time.monotonic() - started > 3.0:
                w.execute("CREATE MATERIALIZED VIEW total AS SELECT sum(bal) AS s, count(*) AS c FROM acc")
                created = True
        w.flush()
        w.db.store.compact_all()
        time.sleep(1.2)   # past the grace: what left the version meanwhile goes now
        vacuumed += w.db.store.vacuum()
        assert w.execute("SELECT sum(bal) FROM acc").fetchone() == (TOTAL,)
        summaries = [_summary(r) for r in readers]
    finally:
        w.close()
    for s in summaries:
        assert s["errors"] == [], s["errors"][:3]
        assert s["torn"] == [], s["torn"][:5]
        assert s["queries"] > 10 and s["epochs"] > 3, s
        assert s["mv_reads"] > 0, s   # the MV created after the reader connected showed up
    assert vacuumed > 0, summaries   # the vacuum did delete SSTs the readers' older versions had used


@pytest.fixture
def db_url(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url) as w:
        w.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        w.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
        w.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
        w.flush()
    return url


@pytest.mark.parametrize("statement, named", [
    ("INSERT INTO t VALUES (3, 'z')", "INSERT"),
    ("UPDATE t SET b = 'q'", "UPDATE"),
    ("DELETE FROM t WHERE a = 1", "DELETE"),
    ("CREATE TABLE u (a INT)", "CREATE TABLE"),
    ("CREATE MATERIALIZED VIEW m2 AS SELECT a FROM t", "CREATE MATERIALIZED VIEW"),
    ("DROP MATERIALIZED VIEW m", "DROP MATERIALIZED VIEW"),
    ("DROP TABLE t", "DROP TABLE"),
    ("CREATE SUBSCRIPTION s FROM t", "CREATE SUBSCRIPTION"),
])
def test_writes_are_refused_naming_the_statement(db_url, statement, named):
    with sql.connect(db_url, read_only=True) as r:
        with pytest.raises(ReadOnlyError, match=f"^{named} is not allowed on a read-only connection"):
            r.execute(statement)
        assert r.execute("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, "x"), (2, "y")]


def test_insert_arrow_is_refused_and_queries_show_describe_explain_work(db_url):
    import pyarrow as pa
    with sql.connect(db_url, read_only=True) as r:
        with pytest.raises(ReadOnlyError):
            r.insert_arrow("t", pa.table({"a": [5], "b": ["v"]}))
        assert r.execute("SELECT n FROM m").fetchall() == [(2,)]
        assert r.execute("SHOW TABLES").fetchall() == [("t",)]
        assert [row[0] for row in r.execute("DESCRIBE t").fetchall()] == ["a", "b"]
        assert r.execute("EXPLAIN SELECT * FROM t").fetchall()
        r.execute("FLUSH")   # a refresh on a reader


def test_a_reader_follows_the_writer_and_a_pinned_reader_does_not(db_url):
    with sql.connect(db_url, implicit_flush=True) as w:
        follow = sql.connect(db_url, read_only=True)
        pinned = sql.connect(db_url, read_only=True, pinned=True)
        try:
            w.execute("INSERT INTO t VALUES (3, 'z')")
            w.execute("CREATE TABLE later (x INT)")
            w.execute("INSERT INTO later VALUES (7)")
            w.flush()
            assert follow.execute("SELECT n FROM m").fetchall() == [(3,)]
            assert follow.execute("SELECT x FROM later").fetchall() == [(7,)]
            assert pinned.execute("SELECT n FROM m").fetchall() == [(2,)]
            with pytest.raises(sql.BindError, match="does not exist"):   # created after its version
                pinned.execute("SELECT x FROM later")
            pinned.db.refresh()   # explicitly moved forward
            assert pinned.execute("SELECT n FROM m").fetchall() == [(3,)]
        finally:
            follow.close()
            pinned.close()


def test_bad_arguments_are_refused(tmp_path):
    from hummock import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="memory store"):
        sql.connect(":memory:", read_only=True)
    with pytest.raises(InvalidArgumentError, match="pinned=True needs read_only=True"):
        sql.connect(str(tmp_path / "x"), pinned=True)


def test_a_statement_without_new_commits_does_not_rewrite_the_lease(db_url, monkeypatch):
    """Each statement refreshes; only a refresh that moves to another version stores the lease
    again (hummock/read_side.py ``refresh_pinned``): a reader's queries cost no upload."""
    with sql.connect(db_url, read_only=True) as r:
        lease = r.db.store._lease
        published = []
        real = lease.publish
        monkeypatch.setattr(lease, "publish", lambda v: (published.append(v), real(v)))
        for _ in range(5):
            assert r.execute("SELECT n FROM m").fetchall() == [(2,)]
        assert published == []
        with sql.connect(db_url, implicit_flush=True) as w:   # a new version: published once
            w.execute("INSERT INTO t VALUES (3, 'z')")
            for _ in range(3):
                assert r.execute("SELECT n FROM m").fetchall() == [(3,)]
        assert published and published[-1] == r.db.store.version().id
