"""Change logs under the Spark runtime (sql/spark_pipeline/, ``runtime="spark"``): its tasks run
the same Materialize for their vnodes and write one log per subscription, so a subscription
cursor on a Spark-maintained database returns, window by window, the same changes as on an
in-process database given the same statements (an aggregate MV, a join MV and the table).

Uses the session's local[2] Spark (``spark`` fixture); the data is small (each FLUSH is a
micro-batch). Runs in both modes.
"""

from __future__ import annotations

import random

import pytest

import sql

MVS = {"agg": "SELECT g, count(*) AS n, sum(v) AS s FROM a GROUP BY g",
       "joined": "SELECT a.id, a.v, b.w FROM a JOIN b ON a.g = b.k"}


@pytest.fixture(scope="module")
def spark_session(spark):
    return spark


def _statements(rnd: random.Random) -> list:
    out = []
    for _ in range(5):
        i = rnd.randrange(12)
        out.append(f"INSERT INTO a VALUES ({i}, {i % 3}, {rnd.randrange(-9, 9)})")   # OVERWRITE updates
    out.append(f"INSERT INTO b VALUES ({rnd.randrange(3)}, {rnd.randrange(100)})")
    if rnd.random() < 0.5:
        out.append(f"DELETE FROM a WHERE id = {rnd.randrange(12)}")
    out.append("FLUSH")
    return out


def test_spark_runtime_logs_the_same_changes_as_in_process(spark_session, tmp_path):
    conns = [sql.connect(str(tmp_path / "local"), barrier_interval_ms=0),
             sql.connect(str(tmp_path / "spark"), barrier_interval_ms=0, runtime="spark", spark=spark_session,
                         partitions=2)]
    try:
        for conn in conns:
            conn.execute("CREATE TABLE a (id INT PRIMARY KEY, g INT, v INT) ON CONFLICT OVERWRITE")
            conn.execute("CREATE TABLE b (k INT, w INT)")
            for name, select in MVS.items():
                conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
            for rel in ("a", *MVS):
                conn.execute(f"CREATE SUBSCRIPTION s_{rel} FROM {rel}")
                conn.execute(f"DECLARE c_{rel} SUBSCRIPTION CURSOR FOR s_{rel}")
        rnd = random.Random(7)
        seen = 0
        for _ in range(3):
            batch = _statements(rnd)
            for conn in conns:
                for stmt in batch:
                    conn.execute(stmt)
            for rel in ("a", *MVS):
                got = [sorted((r[:-1] for r in conn.execute(f"FETCH ALL FROM c_{rel}").fetchall()), key=repr)
                       for conn in conns]
                assert got[0] == got[1], rel
                seen += len(got[0])
        assert seen > 0
    finally:
        for conn in conns:
            conn.close()
