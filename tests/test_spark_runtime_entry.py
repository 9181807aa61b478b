"""The Spark runtime's entry points (issue 26): a static DataFrame inserted through a table's MVs,
a streaming DataFrame fed one micro-batch per epoch with replays skipped by the progress record,
and ``hummock sql --spark MASTER``. The runtime's semantics against the in-process runtime are
tests/test_spark_pipeline.py's; crashes are tests/test_spark_pipeline_crash.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sql
from relational.progress import read_progress
from sql.errors import SqlError
from stream.errors import StreamError


def _spark_conn(path, spark, **kw):
    return sql.connect(str(path), barrier_interval_ms=0, runtime="spark", spark=spark, **kw)


def test_insert_dataframe_reaches_the_views_of_the_table(spark, tmp_path):
    conn = _spark_conn(tmp_path / "db", spark)
    try:
        conn.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k")
        frame = spark.createDataFrame([(i % 5, i) for i in range(500)], "k long, v long")
        epoch = conn.insert_dataframe("t", frame)
        assert conn.db.store.max_committed_epoch == epoch
        assert conn.db.rt.last.rows_in == 500
        got = conn.execute("SELECT k, c, s FROM m ORDER BY k").fetchall()
        assert got == [(k, 100, sum(range(k, 500, 5))) for k in range(5)]
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(500,)]   # 500 distinct row ids
    finally:
        conn.close()


def test_insert_dataframe_needs_the_spark_runtime_and_a_table(spark, tmp_path):
    with sql.connect(str(tmp_path / "a"), barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (k BIGINT)")
        with pytest.raises(SqlError, match="runtime='spark'"):
            conn.insert_dataframe("t", spark.createDataFrame([(1,)], "k long"))
    conn = _spark_conn(tmp_path / "b", spark)
    try:
        conn.execute("CREATE TABLE t (k BIGINT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k FROM t")
        with pytest.raises(SqlError, match="does not exist"):
            conn.insert_dataframe("nope", spark.createDataFrame([(1,)], "k long"))
        with pytest.raises(SqlError, match="not a table"):
            conn.insert_dataframe("m", spark.createDataFrame([(1,)], "k long"))
    finally:
        conn.close()


def test_a_feed_commits_each_micro_batch_once_and_skips_a_replayed_one(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for f in range(3):
        with open(source / f"part{f}.json", "w") as out:
            for j in range(40):
                out.write(json.dumps({"k": j % 4, "v": f * 40 + j}) + "\n")
    conn = _spark_conn(tmp_path / "db", spark)
    try:
        conn.execute("CREATE TABLE t (k BIGINT, v BIGINT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, count(*) AS c FROM t GROUP BY k")
        stream = spark.readStream.schema("k long, v long").option("maxFilesPerTrigger", 1).json(str(source))
        query = conn.feed("t", stream, checkpoint_location=str(tmp_path / "ck"), query_name="load-t",
                          trigger={"availableNow": True})
        query.awaitTermination()
        assert conn.execute("SELECT k, c FROM m ORDER BY k").fetchall() == [(k, 30) for k in range(4)]
        done = read_progress(conn.db.store, "load-t", conn.db.store.max_committed_epoch)
        assert done is not None and done.batch_id == 2
        # Spark replays the last batch after a crash before its commit log: the store skips it
        committed = conn.db.store.max_committed_epoch
        replay = spark.read.schema("k long, v long").json(str(source / "part2.json"))
        assert conn.db.rt.run_batch({"t": replay}, 2, "load-t") == committed
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(120,)]
        # a new batch id goes through
        conn.db.rt.run_batch({"t": replay}, 3, "load-t")
        assert conn.execute("SELECT sum(c) FROM m").fetchall() == [(160,)]
        # an id below the recorded one: a reset checkpoint reusing the name, refused (never skipped)
        with pytest.raises(StreamError, match="below the batch 3"):
            conn.db.rt.run_batch({"t": replay}, 0, "load-t")
        assert conn.db.rt.failure is None and conn.execute("SELECT count(*) FROM t").fetchall() == [(160,)]
    finally:
        conn.close()


def test_feed_refuses_a_static_frame_and_the_in_process_runtime(spark, tmp_path):
    frame = spark.createDataFrame([(1,)], "k long")
    with sql.connect(str(tmp_path / "a"), barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (k BIGINT)")
        with pytest.raises(SqlError, match="runtime='spark'"):
            conn.feed("t", frame, checkpoint_location=str(tmp_path / "ck"))
    conn = _spark_conn(tmp_path / "b", spark)
    try:
        conn.execute("CREATE TABLE t (k BIGINT)")
        with pytest.raises(SqlError, match="streaming DataFrame"):
            conn.feed("t", frame, checkpoint_location=str(tmp_path / "ck"))
    finally:
        conn.close()


@pytest.mark.spark_integration   # a child process with its own Spark session
def test_the_sql_shell_runs_views_on_spark(tmp_path):
    script = ("CREATE TABLE t (k INT, v INT);\n"
              "CREATE MATERIALIZED VIEW m AS SELECT k, sum(v) AS s FROM t GROUP BY k;\n"
              "INSERT INTO t VALUES (1, 2), (1, 3), (2, 5);\nFLUSH;\nSELECT * FROM m ORDER BY k;\n")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-m", "cli", "sql", str(tmp_path / "db"), "--spark", "local[1]",
                           "--on-error-stop"], input=script, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "1 | 5" in lines and "2 | 5" in lines and "(2 rows)" in lines
    # the same database in-process: the view's state is the one Spark wrote
    with sql.connect(str(tmp_path / "db"), barrier_interval_ms=0) as conn:
        conn.execute("INSERT INTO t VALUES (2, 1)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM m ORDER BY k").fetchall() == [(1, 5), (2, 6)]


def test_workers_on_another_interpreter_are_refused(spark, tmp_path, monkeypatch):
    from sql.spark_pipeline.driver import check_worker_python

    monkeypatch.setattr(spark.sparkContext, "pythonExec", "/usr/bin/false")
    with pytest.raises(StreamError, match="PYSPARK_PYTHON"):
        sql.connect(str(tmp_path / "db"), barrier_interval_ms=0, runtime="spark", spark=spark)
    monkeypatch.setenv("HUMMOCK_SPARK_WORKER_PYTHON", "any")
    check_worker_python(spark)   # the override


def test_data_errors_in_spark_tasks_are_nulls_counted_per_view(spark, tmp_path):
    conn = _spark_conn(tmp_path / "db", spark)
    try:
        conn.execute("CREATE TABLE t (k INT, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, 10 / v AS q FROM t")
        conn.execute("INSERT INTO t VALUES (1, 0), (2, 5), (3, 0)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM m ORDER BY k").fetchall() == [(1, None), (2, 2), (3, None)]
        assert conn.data_errors() == {"m": {"division by zero": 2}}
    finally:
        conn.close()


def test_the_spark_runtime_on_s3_and_back_in_process(spark, s3_server):
    from s3_server import CREDENTIALS, REGION

    objects = s3_server.new_store()   # (makes the bucket)
    bucket = objects.bucket
    objects.close()
    url = f"s3://{bucket}/pipeline?endpoint={s3_server.endpoint_url}&region={REGION}"
    creds = {"s3_access_key_id": CREDENTIALS["access_key_id"], "s3_secret_access_key": CREDENTIALS["secret_access_key"]}
    try:
        with sql.connect(url, barrier_interval_ms=0, runtime="spark", spark=spark, **creds) as conn:
            conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT v % 3 AS g, count(*) AS c FROM t GROUP BY v % 3")
            conn.execute("INSERT INTO t VALUES " + ", ".join(f"({i}, {i})" for i in range(30)))
            conn.execute("FLUSH")
            assert conn.execute("SELECT g, c FROM m ORDER BY g").fetchall() == [(0, 10), (1, 10), (2, 10)]
        with sql.connect(url, barrier_interval_ms=0, **creds) as conn:
            conn.execute("DELETE FROM t WHERE k < 3")
            conn.execute("FLUSH")
            assert conn.execute("SELECT g, c FROM m ORDER BY g").fetchall() == [(0, 9), (1, 9), (2, 9)]
    finally:
        s3_server.drop_bucket(bucket)


def test_a_memory_store_cannot_run_on_spark(spark):
    with pytest.raises(StreamError, match="a store its tasks can open"):
        sql.connect(":memory:", barrier_interval_ms=0, runtime="spark", spark=spark)


def test_workers_get_the_allocator_setting_unless_the_session_has_one(spark, tmp_path):
    """The runtime's Python workers keep Arrow's freed pages (driver.WORKER_ENV); a session's
    own value is kept. A task reads its environment back."""
    from sql.spark_pipeline.driver import WORKER_ENV, set_worker_env

    class _Context:
        def __init__(self, environment):
            self.environment = environment

    class _Session:
        def __init__(self, environment):
            self.sparkContext = _Context(environment)

    mine = _Session({"MIMALLOC_PURGE_DELAY": "5000"})
    set_worker_env(mine)
    assert mine.sparkContext.environment == {"MIMALLOC_PURGE_DELAY": "5000"}
    conn = _spark_conn(tmp_path / "db", spark)
    try:
        conn.execute("CREATE TABLE t (k BIGINT)")
        for name, value in WORKER_ENV.items():
            assert spark.sparkContext.environment[name] == value
        seen = spark.range(2, numPartitions=2).rdd.map(lambda _: os.environ.get("MIMALLOC_PURGE_DELAY")).collect()
        assert seen == ["-1", "-1"]
    finally:
        conn.close()


@pytest.mark.spark_integration   # the index's own code runs in both modes (tests/test_sql_index.py)
def test_an_index_is_maintained_on_the_spark_runtime(spark, tmp_path):
    """CREATE INDEX under runtime='spark': its MV runs in the Spark tasks (keyed by the indexed
    column, placed by the table's stream key) and batch reads through it see every change."""
    conn = _spark_conn(tmp_path / "db", spark)
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i % 7) for i in range(60)])
        conn.execute("FLUSH")
        conn.execute("CREATE INDEX t_v ON t (v DESC)")
        conn.execute("UPDATE t SET v = 3 WHERE k < 10")
        conn.execute("INSERT INTO t VALUES (100, 3)")
        conn.execute("FLUSH")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT k FROM t WHERE v = 3").fetchall())
        assert "index=t_v" in plan, plan
        want = sorted([(k,) for k in range(60) if k < 10 or k % 7 == 3] + [(100,)])
        assert sorted(conn.execute("SELECT k FROM t WHERE v = 3").fetchall()) == want
        assert conn.execute("SELECT v FROM t ORDER BY v DESC LIMIT 2").fetchall() == [(6,), (6,)]
    finally:
        conn.close()
