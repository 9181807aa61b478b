"""The Spark runtime (sql/spark_pipeline/): SQL tables and MVs maintained by Spark micro-batches
over Hummock state equal the in-process runtime's and their batch recomputation.

- a seeded DML workload (INSERT with ON CONFLICT OVERWRITE, UPDATE, DELETE on tables with and
  without a pk, FLUSH between batches) against an in-process database and a Spark one: after
  every FLUSH each MV -- grouped and global aggregates, inner/left/full joins (one on keys of
  two integer types), group top-N, ORDER BY LIMIT, a window aggregate, an MV on an MV,
  TUMBLE/HOP, a dynamic filter -- holds the same rows on both and equals its SELECT;
- a row whose routing key changes (it moves between partitions of an intermediate stage);
- more shapes (UNION ALL, semi/anti joins, scalar subqueries, DISTINCT over DECIMAL) and the
  conflict modes of tables with a pk (DO NOTHING, DO UPDATE IF NOT NULL);
- the partition count changing between batches (2 -> 3 -> 1);
- backfill of an MV created over tables with data, DROP, the first row of an aggregate without
  a group over an empty table;
- one database run by both runtimes in turn (state is keyed by vnode, not by process);
- a batch whose commit fails (before or after it landed): recovered without loss or duplicates;
- Nexmark q0-q8 against the in-process runtime and the batch recomputation.

All tests use the session's local[2] Spark (``spark`` fixture, tests/conftest.py); data is small
(each micro-batch costs Spark jobs, about a second each). Crash tests: test_spark_pipeline_crash.py;
planning without Spark: test_spark_fragments.py.
"""

from __future__ import annotations

import random

import pytest

import sql

DDL = [
    "CREATE TABLE a (id INT PRIMARY KEY, g INT, v BIGINT, ts TIMESTAMP) ON CONFLICT OVERWRITE",
    "CREATE TABLE b (k INT, w BIGINT, s VARCHAR)",
    "CREATE TABLE c (k BIGINT, x INT)",
]

MVS = {
    "m_agg": "SELECT g, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS av, "
             "count(DISTINCT v) AS dv FROM a GROUP BY g",
    "m_global": "SELECT count(*) AS n, sum(w) AS s, max(w) AS hi FROM b",
    "m_inner": "SELECT a.id, a.v, b.w FROM a JOIN b ON a.g = b.k",
    "m_left": "SELECT a.id, b.w FROM a LEFT JOIN b ON a.g = b.k",
    "m_full": "SELECT a.id, b.s FROM a FULL JOIN b ON a.g = b.k",
    "m_mixed": "SELECT b.w, c.x FROM b JOIN c ON b.k = c.k",      # INT = BIGINT keys
    "m_topn": "SELECT g, id, v FROM (SELECT g, id, v, ROW_NUMBER() OVER (PARTITION BY g ORDER BY v DESC, id) AS rn "
              "FROM a) x WHERE rn <= 2",
    "m_limit": "SELECT id, v FROM a ORDER BY v DESC, id LIMIT 3",
    "m_over": "SELECT id, g, sum(v) OVER (PARTITION BY g ORDER BY id) AS run FROM a",
    "m_mvmv": "SELECT n, count(*) AS groups FROM m_agg GROUP BY n",
    "m_tumble": "SELECT window_start, count(*) AS n, sum(v) AS s FROM TUMBLE(a, ts, INTERVAL '10' SECOND) "
                "GROUP BY window_start",
    "m_hop": "SELECT window_start, count(*) AS n FROM HOP(a, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) "
             "GROUP BY window_start",
    "m_dyn": "SELECT id, v FROM a WHERE v > (SELECT max(w) FROM b)",
}


def _spark_conn(path, spark, partitions=2):
    return sql.connect(str(path), barrier_interval_ms=0, runtime="spark", spark=spark, partitions=partitions)


def _rows(conn, query):
    return sorted(conn.execute(query).fetchall(), key=repr)


def _setup(conns, mvs=MVS, ddl=DDL):
    for conn in conns:
        for stmt in ddl:
            conn.execute(stmt)
        for name, select in mvs.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")


def _batch(rnd: random.Random) -> list:
    """One batch of DML. ``a.g`` is a function of ``a.id`` and ``b.k`` is never updated, so no
    row changes its join/partition key here (that case: test_row_moving_between_partitions)."""
    out = []
    for _ in range(6):   # OVERWRITE: an id seen before updates v and ts
        i = rnd.randrange(30)
        out.append(f"INSERT INTO a VALUES ({i}, {i % 4}, {rnd.randrange(-20, 20)}, "
                   f"TIMESTAMP '2024-01-01 00:00:{rnd.randrange(60):02d}')")
    out.append(f"INSERT INTO b VALUES ({rnd.randrange(5)}, {rnd.randrange(-20, 20)}, 's{rnd.randrange(5)}'), "
               f"({rnd.randrange(5)}, {rnd.randrange(-20, 20)}, NULL)")
    out.append(f"INSERT INTO c VALUES ({rnd.randrange(5)}, {rnd.randrange(9)})")
    out.append(f"UPDATE a SET v = v + 7 WHERE id % 5 = {rnd.randrange(5)}")
    out.append(f"UPDATE b SET w = w - 3 WHERE w % 3 = {rnd.randrange(3)}")
    out.append(f"DELETE FROM b WHERE w % 7 = {rnd.randrange(7)}")
    out.append(f"DELETE FROM a WHERE id = {rnd.randrange(30)}")
    return out


def _assert_same(reference, conn, mvs, where=""):
    for name, select in mvs.items():
        expected = _rows(reference, f"SELECT * FROM {name}")
        got = _rows(conn, f"SELECT * FROM {name}")
        assert got == expected, f"{where}{name}: spark {got} != in-process {expected}"
        assert got == _rows(conn, select), f"{where}{name}: the MV differs from its SELECT"


@pytest.mark.spark_integration   # the long differential runs: native only (pyproject markers)
def test_workload_equals_in_process_runtime(spark, tmp_path):
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark)
    try:
        _setup([ref, conn])
        rnd = random.Random(20261127)
        for batch in range(3):
            statements = _batch(rnd)
            for c in (ref, conn):
                for stmt in statements:
                    c.execute(stmt)
                c.execute("FLUSH")
            _assert_same(ref, conn, MVS, f"batch {batch}: ")
        # the workload reached every MV: none stayed empty
        assert all(_rows(conn, f"SELECT * FROM {name}") for name in MVS)
    finally:
        ref.close()
        conn.close()


MOVING = {
    "lj": "SELECT a.id, b.w FROM a LEFT JOIN b ON a.g = b.k",
    "ow": "SELECT id, g, count(*) OVER (PARTITION BY g ORDER BY id) AS n FROM a",
    "fj": "SELECT a.id, b.w FROM a FULL JOIN b ON a.g = b.k",
}


@pytest.mark.parametrize("inline_bytes", [None, 0], ids=["in-records", "exchange-files"])
def test_row_moving_between_partitions(spark, tmp_path, inline_bytes):
    """Every row of ``a`` (and ``b``) changes its join/partition key in one batch: its delete
    and its insert come from tasks of two partitions, and must still reach the MV in order.
    Run with every payload inside Spark's records and with every payload in an exchange file
    (sql/spark_pipeline/exchange.py: the driver's, the route's and every stage's outputs)."""
    ddl = ["CREATE TABLE a (id INT PRIMARY KEY, g INT) ON CONFLICT OVERWRITE", "CREATE TABLE b (k INT, w INT)"]
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark)
    try:
        _setup([ref, conn], MOVING, ddl)
        conn.db.rt.inline_bytes = inline_bytes
        for c in (ref, conn):
            c.execute("INSERT INTO a VALUES " + ", ".join(f"({i}, {i % 6})" for i in range(24)))
            c.execute("INSERT INTO b VALUES " + ", ".join(f"({10 + k}, {k})" for k in range(6)))
            c.execute("FLUSH")
        _assert_same(ref, conn, MOVING, "before the move: ")
        for c in (ref, conn):
            c.execute("INSERT INTO a VALUES " + ", ".join(f"({i}, {(i + 1 + i % 3) % 6})" for i in range(24)))
            c.execute("UPDATE b SET k = k + 1")
            c.execute("FLUSH")
        _assert_same(ref, conn, MOVING, "after the move: ")
        files = conn.db.rt.last.exchange_files
        assert (files > 0) if inline_bytes == 0 else (files == 0), files
        assert not conn.db.store.object_store.list("pipeline-exchange/")   # removed with the batch
    finally:
        ref.close()
        conn.close()


MORE_DDL = [
    "CREATE TABLE p (id INT PRIMARY KEY, g VARCHAR, v DECIMAL(10,2))",
    "CREATE TABLE q (a VARCHAR, b INT, x INT, PRIMARY KEY (a, b)) ON CONFLICT DO UPDATE IF NOT NULL",
    "CREATE TABLE r (k INT, w INT)",
    "CREATE TABLE n (id INT PRIMARY KEY, k INT) ON CONFLICT DO NOTHING",
]
MORE_EARLY = {
    "u": "SELECT k AS key, w FROM r UNION ALL SELECT id, k FROM n",
    "semi": "SELECT id, g FROM p WHERE id IN (SELECT k FROM r)",
    "anti": "SELECT id FROM p WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.k = p.id)",
    "sc": "SELECT id, (SELECT count(*) FROM r) AS cnt FROM p",
    "gs": "SELECT g, count(DISTINCT v) AS dv, sum(v) AS s, count(*) AS n FROM p GROUP BY g",
}
MORE_LATE = {   # created after the first batch's DML, before its FLUSH
    "qa": "SELECT a, sum(x) AS sx, count(x) AS cx FROM q GROUP BY a",
    "nj": "SELECT r.k, r.w, n.id FROM r JOIN n ON r.k = n.k",
    "nagg": "SELECT k, count(*) AS c FROM n GROUP BY k",
    "rk": "SELECT k, w FROM (SELECT k, w, ROW_NUMBER() OVER (PARTITION BY k ORDER BY w) AS rn FROM r) x WHERE rn = 1",
}
MORE_BATCHES = [
    ["INSERT INTO p VALUES (1, 'a', 1.50), (2, NULL, 2.25), (3, 'b', NULL), (4, 'a', 1.50)",
     "INSERT INTO q VALUES ('x', 1, 10), ('x', 2, NULL), ('y', 1, 5)",
     "INSERT INTO r VALUES (1, 5), (NULL, 7), (3, 1), (1, 2)",
     "INSERT INTO n VALUES (1, 1), (2, NULL), (3, 3)",
     "INSERT INTO r VALUES (9, 9)", "DELETE FROM r WHERE k = 9"],
    ["INSERT INTO q VALUES ('x', 1, NULL), ('x', 2, 7)", "INSERT INTO n VALUES (1, 99), (4, 1)",
     "UPDATE r SET k = 3 WHERE w = 5", "INSERT INTO p VALUES (5, 'c', 0.01)", "DELETE FROM p WHERE id = 5"],
    ["DELETE FROM r WHERE k IS NULL", "UPDATE n SET k = 3 WHERE id = 1", "INSERT INTO p VALUES (6, 'z', 9.99)",
     "DELETE FROM q WHERE a = 'y'"],
]


@pytest.mark.spark_integration   # the long differential runs: native only (pyproject markers)
def test_more_shapes_and_conflict_modes(spark, tmp_path):
    """UNION ALL, semi/anti joins, a scalar subquery in the select list, DISTINCT over DECIMAL,
    a VARCHAR composite pk with DO UPDATE IF NOT NULL, DO NOTHING, NULL keys, a row inserted
    and deleted in one batch, MVs created while DML waits for its FLUSH; on 3 partitions."""
    mvs = {**MORE_EARLY, **MORE_LATE}
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark, 3)
    try:
        _setup([ref, conn], MORE_EARLY, MORE_DDL)
        for batch, statements in enumerate(MORE_BATCHES):
            for c in (ref, conn):
                for stmt in statements:
                    c.execute(stmt)
                if batch == 0:
                    for name, select in MORE_LATE.items():
                        c.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
                c.execute("FLUSH")
            _assert_same(ref, conn, mvs, f"batch {batch}: ")
            for table in ("p", "q", "r", "n"):
                assert _rows(conn, f"SELECT * FROM {table}") == _rows(ref, f"SELECT * FROM {table}"), table
        assert _rows(conn, "SELECT * FROM q") == [("x", 1, 10), ("x", 2, 7)]
        assert _rows(conn, "SELECT * FROM n WHERE id = 1") == [(1, 3)]
    finally:
        ref.close()
        conn.close()


SMALL = {k: MVS[k] for k in ("m_agg", "m_global", "m_inner", "m_topn", "m_over")}


def test_partition_count_changes_between_batches(spark, tmp_path):
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark)
    try:
        _setup([ref, conn], SMALL)
        rnd = random.Random(7)
        for batch, n in enumerate((2, 3, 1, 3)):
            conn.db.partitions = n        # a runtime rebuilt by DDL keeps it
            conn.db.rt.partitions = n
            statements = _batch(rnd)
            for c in (ref, conn):
                for stmt in statements:
                    c.execute(stmt)
                c.execute("FLUSH")
            assert conn.db.rt.partitions == n
            _assert_same(ref, conn, SMALL, f"batch {batch} on {n} partitions: ")
        # reopening with another count reads the same state
        conn.close()
        conn = _spark_conn(tmp_path / "b", spark, partitions=3)
        statements = _batch(rnd)
        for c in (ref, conn):
            for stmt in statements:
                c.execute(stmt)
            c.execute("FLUSH")
        _assert_same(ref, conn, SMALL, "reopened on 3 partitions: ")
    finally:
        ref.close()
        conn.close()


def test_backfill_drop_and_first_row(spark, tmp_path):
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark)
    late = {"m_agg": MVS["m_agg"], "m_inner": MVS["m_inner"], "m_mvmv": MVS["m_mvmv"],
            "m_empty": "SELECT count(*) AS n, sum(x) AS s, min(x) AS lo FROM e"}
    try:
        _setup([ref, conn], {}, DDL + ["CREATE TABLE e (x INT)"])
        rnd = random.Random(3)
        for _ in range(2):
            statements = _batch(rnd)
            for c in (ref, conn):
                for stmt in statements:
                    c.execute(stmt)
                c.execute("FLUSH")
        for c in (ref, conn):   # MVs created over tables with data: backfilled
            for name, select in late.items():
                c.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")
        _assert_same(ref, conn, late, "after the backfill: ")
        assert _rows(conn, "SELECT * FROM m_empty") == [(0, None, None)]
        assert _rows(conn, "SELECT * FROM m_agg")
        statements = _batch(rnd) + ["INSERT INTO e VALUES (5), (NULL), (-2)"]
        for c in (ref, conn):
            for stmt in statements:
                c.execute(stmt)
            c.execute("FLUSH")
        _assert_same(ref, conn, late, "a batch after the backfill: ")
        for c in (ref, conn):
            c.execute("DROP MATERIALIZED VIEW m_mvmv")
            c.execute("DROP MATERIALIZED VIEW m_inner")
        with pytest.raises(sql.SqlError):
            conn.execute("SELECT * FROM m_inner")
        statements = _batch(rnd)
        for c in (ref, conn):
            for stmt in statements:
                c.execute(stmt)
            c.execute("FLUSH")
        kept = {k: late[k] for k in ("m_agg", "m_empty")}
        _assert_same(ref, conn, kept, "after DROP: ")
        assert "m_inner" not in {f.relation for f in conn.db.rt.plan.fragments}
    finally:
        ref.close()
        conn.close()


def test_two_runtimes_one_database(spark, tmp_path):
    """The same directory run on Spark, then in-process, then on Spark again (against a database
    that stays in-process): the MVs' state carries over whichever runtime wrote it."""
    mvs = {k: MVS[k] for k in ("m_agg", "m_global", "m_left", "m_topn", "m_limit", "m_mvmv")}
    ref = sql.connect(str(tmp_path / "ref"), barrier_interval_ms=0)
    path = tmp_path / "db"
    rnd = random.Random(11)
    conn = _spark_conn(path, spark)
    try:
        _setup([ref, conn], mvs)
        for phase, opener in enumerate((None, lambda: sql.connect(str(path), barrier_interval_ms=0),
                                        lambda: _spark_conn(path, spark, partitions=3))):
            if opener is not None:
                conn.close()
                conn = opener()
                _assert_same(ref, conn, mvs, f"phase {phase} reopened: ")
            for batch in range(2):
                statements = _batch(rnd)
                for c in (ref, conn):
                    for stmt in statements:
                        c.execute(stmt)
                    c.execute("FLUSH")
                _assert_same(ref, conn, mvs, f"phase {phase} batch {batch}: ")
        assert conn.db.runtime == "spark"
        # the table without a pk holds no row twice (row ids of both runtimes are distinct)
        assert _rows(conn, "SELECT count(*) FROM b") == _rows(ref, "SELECT count(*) FROM b")
    finally:
        ref.close()
        conn.close()


@pytest.mark.parametrize("landed", [False, True])
def test_failed_commit_recovers_exactly(spark, tmp_path, landed):
    """The store refuses a batch's commit (or its reply is lost after it landed): the runtime
    fails, the database rebuilds it and writes the uncommitted statements again -- no row lost,
    none twice (as tests/test_sql_actor_failure.py checks for the in-process runtime)."""
    conn = _spark_conn(tmp_path, spark)
    try:
        conn.execute("CREATE TABLE t (a BIGINT, b INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT b, count(*) AS c FROM t GROUP BY b")
        conn.execute("INSERT INTO t VALUES (1, 1)")
        conn.execute("FLUSH")
        store = conn.db.store
        real = store.commit_ssts

        def commit_ssts(*args, **kwargs):
            store.commit_ssts = real   # once
            if landed:
                real(*args, **kwargs)
            raise OSError("the object store is down")
        store.commit_ssts = commit_ssts
        conn.execute("INSERT INTO t VALUES (5, 5)")
        conn.execute("FLUSH")   # meets the failure, recovers, commits the rest
        assert conn.db.recoveries == 1
        assert _rows(conn, "SELECT * FROM t") == [(1, 1), (5, 5)]
        assert _rows(conn, "SELECT * FROM m") == [(1, 1), (5, 1)]
        assert conn.db.runtime == "spark" and conn.db.rt.failure is None
    finally:
        conn.close()


@pytest.mark.spark_integration   # the long differential runs: native only (pyproject markers)
def test_nexmark_q0_q8_equal_in_process_and_batch(spark, tmp_path):
    from bench.nexmark import feed
    from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
    from bench.nexmark.queries import EXPECTED_TO_WORK, QUERIES

    queries = [QUERIES[name] for name in EXPECTED_TO_WORK]
    ref, conn = sql.connect(str(tmp_path / "a"), barrier_interval_ms=0), _spark_conn(tmp_path / "b", spark)
    try:
        for c in (ref, conn):
            feed.setup(c, queries)
            stats = feed.feed(c, 3_000, generator=NexmarkGenerator(NexmarkConfig(seed=3)), batch_size=500,
                              flush_every=1_000)
            assert stats.flushes == 3
        assert conn.db.rt.batches >= 3
        for q in queries:
            ok, maintained, recomputed = feed.check(conn, q)
            assert ok, (q.name, maintained.slice(0, 5).to_pylist(), recomputed.slice(0, 5).to_pylist())
            assert feed.normalized(conn.execute(f"SELECT * FROM {q.mv}").fetchall()) == \
                feed.normalized(ref.execute(f"SELECT * FROM {q.mv}").fetchall()), q.name
        assert sum(1 for q in queries if _rows(conn, f"SELECT * FROM {q.mv}")) >= 8
    finally:
        ref.close()
        conn.close()
