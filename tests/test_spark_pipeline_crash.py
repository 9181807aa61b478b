"""Crashes of the Spark runtime's driver and tasks while it feeds a table from a file stream
(``Connection.feed``, tests/spark_pipeline_child.py in a child process with its own local[2,3]
SparkSession): after a restart every source row is counted exactly once -- the table (no pk:
a replayed batch would add rows with new row ids) holds each row once, the aggregate MVs equal
their batch recomputation and count every row.

- the driver SIGKILLed after the store committed batch 2 but before Spark's commit log
  (``pipeline.after_commit:2``): Spark replays batch 2, the progress record skips it;
- SIGKILLed before that commit (``pipeline.before_commit:2``): nothing of batch 2 was
  published, the replay runs it;
- SIGKILLed by one of its tasks in the middle of a stage;
- a task whose first attempt fails after building its SSTs: Spark retries it, the failed
  attempt's SSTs are never published.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import sql

pytestmark = pytest.mark.spark_integration   # child Spark drivers: the native run only (pyproject markers)

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "spark_pipeline_child.py")
FILES, ROWS = 3, 40
MVS = {"m": "SELECT g, count(*) AS c, sum(k) AS s FROM t GROUP BY g",
       "total": "SELECT count(*) AS c, count(DISTINCT k) AS d FROM t"}


@pytest.fixture
def pipeline(tmp_path):
    """``(db, run)``: a database with table ``t`` and its MVs, FILES JSON files of ROWS rows
    (``k`` unique, ``g = k % 7``), and ``run(**env)`` starting the child on them."""
    db, src, ckpt = tmp_path / "db", tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    for f in range(FILES):
        with open(src / f"part-{f:03d}.json", "w") as out:
            for j in range(ROWS):
                k = f * ROWS + j
                out.write(json.dumps({"k": k, "g": k % 7}) + "\n")
    with sql.connect(str(db), barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (k BIGINT, g BIGINT)")
        for name, select in MVS.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")

    def run(**env):
        full = {k: v for k, v in os.environ.items()
                if k not in ("HUMMOCK_KILL_POINT", "HUMMOCK_PIPELINE_FAIL_TASK") and not k.startswith("HUMMOCK_TEST_")}
        full.update(env)
        child = subprocess.Popen([sys.executable, CHILD, str(db), str(src), str(ckpt)], env=full, cwd=str(tmp_path),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = child.communicate(timeout=400)
        finally:
            try:   # the child's JVM and workers, if the kill left any
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return child.returncode, out, err

    return str(db), run


def _check_exactly_once(db, expected_rows):
    with sql.connect(db, barrier_interval_ms=0) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT k), min(k), max(k) FROM t").fetchall() == \
            [(expected_rows, expected_rows, 0, expected_rows - 1)]
        for name, select in MVS.items():
            got = sorted(conn.execute(f"SELECT * FROM {name}").fetchall())
            assert got == sorted(conn.execute(select).fetchall()), name
        assert conn.execute("SELECT sum(c) FROM m").fetchall() == [(expected_rows,)]
        assert conn.execute("SELECT * FROM total").fetchall() == [(expected_rows, expected_rows)]


def _rows_now(db):
    with sql.connect(db, barrier_interval_ms=0) as conn:
        _check_exactly_once_partial(conn)
        return conn.execute("SELECT count(*) FROM t").fetchall()[0][0]


def _check_exactly_once_partial(conn):
    """What a crash left: whole files only, each once, MVs consistent with the table."""
    n, d = conn.execute("SELECT count(*), count(DISTINCT k) FROM t").fetchall()[0]
    assert n == d and n % ROWS == 0, (n, d)
    for name, select in MVS.items():
        assert sorted(conn.execute(f"SELECT * FROM {name}").fetchall()) == sorted(conn.execute(select).fetchall())


def _finish(db, run):
    code, out, err = run()
    assert code == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["rows"] == result["distinct"] == FILES * ROWS
    _check_exactly_once(db, FILES * ROWS)


@pytest.mark.parametrize("point, committed", [("pipeline.after_commit:2", 2), ("pipeline.before_commit:2", 1)])
def test_driver_killed_around_the_commit(pipeline, point, committed):
    db, run = pipeline
    code, out, err = run(HUMMOCK_KILL_POINT=point)
    assert code == -signal.SIGKILL, (code, err[-3000:])
    assert _rows_now(db) == committed * ROWS     # batch 2 landed whole / not at all
    _finish(db, run)


def test_driver_killed_in_the_middle_of_a_stage(pipeline, tmp_path):
    db, run = pipeline
    marks = tmp_path / "marks"
    marks.mkdir()
    # stage 2 runs the aggregates (fragments after an exchange); its 3rd task is in batch 1 of 0..2
    code, out, err = run(HUMMOCK_TEST_KILL_DRIVER="2:3", HUMMOCK_TEST_MARKS=str(marks))
    assert code == -signal.SIGKILL, (code, err[-3000:])
    assert _rows_now(db) < FILES * ROWS
    _finish(db, run)


def test_failed_tasks_are_retried_and_published_once(pipeline, tmp_path):
    """In every batch, attempt 0 of two stage tasks fails: stage 1 partition 1 (the table's rows
    and the aggregates' first fragments) before it starts (the pipeline's own hook), stage 2
    partition 0 (the aggregates) after building and uploading its SSTs (the child's hook)."""
    db, run = pipeline
    marks = tmp_path / "marks"
    marks.mkdir()
    code, out, err = run(HUMMOCK_PIPELINE_FAIL_TASK="1:1", HUMMOCK_TEST_FAIL_TASK="2:0", HUMMOCK_TEST_MARKS=str(marks))
    assert code == 0, err[-3000:]
    failed = sorted(name.rsplit("-", 1)[1] for name in os.listdir(marks))   # the partition of each failure
    assert failed.count("0") >= 2 and failed.count("1") >= 2, failed
    _check_exactly_once(db, FILES * ROWS)
