"""NUMERIC values equal but of different scales (1.5, 1.50, 1.500) in group keys, DISTINCT, set
operations, join keys and top-N partitions of a materialized view (issue 25, Postgres finding 3).

Postgres compares NUMERIC by value: 1.5 and 1.50 are one group, one DISTINCT row, one set-op row.
Hummock keys such state by the memcomparable encoding (scale-free) while rows carry the value with
its scale; a stored group must keep one representation and every retraction of it must be the
stored row byte for byte, or the stream graph fails (``InconsistentStreamError``) and loses the
acknowledged write. Each case checks that the MV equals the same query in batch after INSERTs,
UPDATEs and DELETEs that mix scales, and that no write is lost. Both modes run it (the suite runs
with native code and with ``HUMMOCK_PURE_PYTHON=1``).
"""

import decimal
from collections import Counter

import pytest

import sql

Dec = decimal.Decimal


def _rows(conn, query):
    return Counter(conn.execute(query).fetchall())


QUERIES = {
    "finding3_except": "SELECT round(1.5, 1) AS c0 FROM t2 EXCEPT SELECT t1.n1 AS c0 FROM t1",
    "except_rev": "SELECT t1.n1 AS c0 FROM t1 EXCEPT SELECT round(1.5, 1) AS c0 FROM t2",
    "intersect": "SELECT t1.n1 AS c0 FROM t1 INTERSECT SELECT 1.500 AS c0 FROM t2",
    "union": "SELECT t1.n1 AS c0 FROM t1 UNION SELECT 1.5 AS c0 FROM t2",
    "group_by": "SELECT n1, count(*) AS c, sum(k) AS s FROM t1 GROUP BY n1",
    "group_by_coalesce": "SELECT coalesce(n1, 1.5) AS g, count(*) AS c, max(k) AS m FROM t1 GROUP BY coalesce(n1, 1.5)",
    "distinct": "SELECT DISTINCT n1 FROM t1",
    "count_distinct": "SELECT count(DISTINCT n1) AS c FROM t1",
    "min_max_per_group": "SELECT n1, min(k) AS lo, max(k) AS hi FROM t1 GROUP BY n1",
    "join_key": "SELECT t1.k, t3.k AS k3 FROM t1 JOIN t3 ON t1.n1 = t3.n3",
    "top_n_partition": "SELECT k, n1 FROM (SELECT k, n1, row_number() OVER (PARTITION BY n1 ORDER BY k) AS rn "
                       "FROM t1) s WHERE rn <= 1",
}

STEPS = [
    "INSERT INTO t1 VALUES (1, 1.50)",
    "INSERT INTO t1 VALUES (2, 1.5)",
    "INSERT INTO t1 VALUES (3, 1.500), (4, 2.0), (5, NULL)",
    "UPDATE t1 SET n1 = 2.00 WHERE k = 1",
    "DELETE FROM t1 WHERE k = 2",
    "UPDATE t1 SET n1 = 1.5000 WHERE k = 4",
    "DELETE FROM t1 WHERE k = 3",
    "UPDATE t1 SET n1 = 2 WHERE k = 1",
    "DELETE FROM t1 WHERE k = 4",
    "INSERT INTO t1 VALUES (6, 1.5), (7, 2.000)",
    "DELETE FROM t1",
]


def _setup(conn):
    for s in ("CREATE TABLE t1 (k INT PRIMARY KEY, n1 NUMERIC)",
              "CREATE TABLE t2 (k INT PRIMARY KEY)",
              "CREATE TABLE t3 (k INT PRIMARY KEY, n3 NUMERIC)",
              "INSERT INTO t2 VALUES (1)",
              "INSERT INTO t3 VALUES (10, 1.5), (11, 2.00)"):
        conn.execute(s)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_mv_equals_batch_across_scales(name):
    query = QUERIES[name]
    with sql.connect(":memory:") as conn:
        _setup(conn)
        try:
            conn.execute(f"CREATE MATERIALIZED VIEW mv AS {query}")
        except sql.errors.HummockError as exc:   # a query shape the MV planner refuses is no finding
            if "window" in name or "top_n" in name:
                pytest.skip(f"not supported in an MV: {exc}")
            raise
        expected_t1 = {}
        for step in STEPS:
            conn.execute(step)
            conn.execute("FLUSH")
            assert _rows(conn, "SELECT * FROM mv") == _rows(conn, query), (name, step)
        # no write was lost on the way: t1 is empty after the final DELETE, and a fresh row lands
        conn.execute("INSERT INTO t1 VALUES (8, 1.50)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM t1").fetchall() == [(8, Dec("1.50"))]
        assert _rows(conn, "SELECT * FROM mv") == _rows(conn, query), name


def test_finding3_keeps_the_write_and_empties_the_except():
    with sql.connect(":memory:") as conn:
        _setup(conn)
        conn.execute("CREATE MATERIALIZED VIEW mv AS " + QUERIES["finding3_except"])
        assert conn.execute("SELECT * FROM mv").fetchall() == [(Dec("1.5"),)]
        conn.execute("INSERT INTO t1 VALUES (1, 1.50)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM mv").fetchall() == []
        assert conn.execute("SELECT * FROM t1").fetchall() == [(1, Dec("1.50"))]


def test_group_keeps_its_stored_scale():
    """A group first stored as 1.50 is shown and retracted as 1.50 whatever scale later rows have."""
    with sql.connect(":memory:") as conn:
        _setup(conn)
        conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT n1, count(*) AS c FROM t1 GROUP BY n1")
        conn.execute("INSERT INTO t1 VALUES (1, 1.50)")
        conn.execute("FLUSH")
        conn.execute("INSERT INTO t1 VALUES (2, 1.5)")
        conn.execute("FLUSH")
        rows = conn.execute("SELECT * FROM mv").fetchall()
        assert rows == [(Dec("1.5"), 2)] and str(rows[0][0]) == "1.50"
        conn.execute("DELETE FROM t1 WHERE k = 1")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM mv").fetchall() == [(Dec("1.5"), 1)]
        conn.execute("DELETE FROM t1")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM mv").fetchall() == []
