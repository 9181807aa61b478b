"""A data error inside an MV never fails the graph (docs/sql.md, "Errors"; stream/expr_errors.py):
in every executor that evaluates expressions -- Project, Filter (the row does not pass), an
aggregate's argument and FILTER, a join key computed below the join, a GROUP BY key, a top-N
order key -- the failing row's value is NULL, the rest of the chunk is exact (the vectorized
kernel's failure falls back to row-by-row evaluation for that chunk only), the error is counted
per MV (``Connection.data_errors()``) by a bounded kind (never one counter per bad value) and
logged rate-limited; the graph keeps running. Batch SELECT of the same expression raises.
"""

import logging
from collections import Counter

import pyarrow as pa
import pytest

import sql
import stream.expr_errors as EE
from relational.types import DataType as T
from sql.errors import ExecutionError
from stream.expr import Arith, Cast, Col, error_counts
from stream.expr_errors import counting_into, error_kind

ROWS = "INSERT INTO t VALUES (10, 2), (10, 0), (5000000000, 1), (NULL, 3), (7, 7)"


@pytest.fixture
def conn():
    c = sql.connect(":memory:", barrier_interval_ms=0)
    c.execute("CREATE TABLE t (a BIGINT, b INT)")
    yield c
    c.close()


def rows(c, q):
    return sorted(c.execute(q).fetchall(), key=repr)


CASES = [
    ("SELECT a / b AS q, a::int AS n FROM t",
     [(1, 7), (5, 10), (5000000000, None), (None, 10), (None, None)]),
    ("SELECT a, b FROM t WHERE a / b > 1",                       # filter: error = not passing
     [(10, 2), (5000000000, 1)]),
    ("SELECT sum(a::int) AS s, count(*) AS c FROM t",            # aggregate argument
     [(27, 5)]),
    ("SELECT b, sum(a::int) AS s FROM t GROUP BY b",
     [(0, 10), (1, None), (2, 10), (3, None), (7, 7)]),
    ("SELECT count(*) FILTER (WHERE a / b > 0) AS c FROM t",     # aggregate FILTER
     [(3,)]),
    ("SELECT a / b AS q, count(*) AS c FROM t GROUP BY a / b",   # group key
     [(1, 1), (5, 1), (5000000000, 1), (None, 2)]),
    ("SELECT a, b FROM t ORDER BY a / b LIMIT 2",                # top-N order key
     [(7, 7), (10, 2)]),
]


@pytest.mark.parametrize("query, expected", CASES)
def test_a_data_error_in_an_mv_is_null_counted_and_the_graph_runs_on(conn, query, expected):
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {query}")
    conn.execute(ROWS)
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == sorted(expected, key=repr)
    counts = conn.data_errors()
    assert set(counts) == {"m"} and set(counts["m"]) <= {"division by zero", "integer out of range"}
    assert sum(counts["m"].values()) >= 1
    conn.execute("DELETE FROM t WHERE b IN (0, 1)")   # retracting the rows that failed works
    conn.execute("INSERT INTO t VALUES (30, 3)")      # and the graph still runs
    conn.execute("FLUSH")
    assert conn.db.rt.failure is None
    batch = rows(conn, query)
    assert rows(conn, "SELECT * FROM m") == sorted(batch, key=repr)


def test_a_join_key_that_fails_joins_nothing(conn):
    conn.execute("CREATE TABLE u (x INT, y INT)")
    conn.execute("INSERT INTO u VALUES (10, 1), (705032704, 2)")   # 5000000000 wrapped to int32
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT s.k, u.y FROM (SELECT a::int AS k FROM t) s "
                 "JOIN u ON s.k = u.x")
    conn.execute(ROWS)
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == [(10, 1), (10, 1)]
    assert conn.data_errors() == {"m": {"integer out of range": 1}}


@pytest.mark.parametrize("kind, expected", [
    ("JOIN", [(10, 1)]),
    ("LEFT JOIN", [(10, 1), (10, None), (5000000000, None), (None, None), (7, None)]),
])
def test_a_join_condition_that_fails_does_not_match(conn, kind, expected):
    conn.execute("CREATE TABLE w (x BIGINT, y INT)")
    conn.execute("INSERT INTO w VALUES (10, 1)")
    conn.execute(f"CREATE MATERIALIZED VIEW m AS SELECT t.a, w.y FROM t {kind} w ON t.a = w.x AND t.a / t.b > w.y")
    conn.execute(ROWS)   # (10, 0): the condition divides by zero -> the pair does not match
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == sorted(expected, key=repr)
    assert conn.data_errors() == {"m": {"division by zero": 1}}
    assert conn.db.rt.failure is None


def test_batch_select_still_raises(conn):
    conn.execute(ROWS)
    conn.execute("FLUSH")
    with pytest.raises(ExecutionError, match="division by zero"):
        conn.execute("SELECT a / b FROM t").fetchall()
    with pytest.raises(ExecutionError, match="integer out of range"):
        conn.execute("SELECT a::int FROM t").fetchall()


def test_counts_are_per_mv_and_survive_a_rebuild(conn):
    conn.execute("CREATE MATERIALIZED VIEW m1 AS SELECT a / b AS q FROM t")
    conn.execute("CREATE MATERIALIZED VIEW m2 AS SELECT a::int AS n FROM t")
    conn.execute(ROWS)
    conn.execute("FLUSH")
    assert conn.data_errors() == {"m1": {"division by zero": 1}, "m2": {"integer out of range": 1}}
    conn.execute("CREATE TABLE other (x INT)")   # DDL rebuilds the graph: the counts stay
    conn.execute("INSERT INTO t VALUES (1, 0)")
    conn.execute("FLUSH")
    assert conn.data_errors() == {"m1": {"division by zero": 2}, "m2": {"integer out of range": 1}}


def test_rows_a_filter_dropped_raise_no_error_in_the_project_above(conn):
    """``10 / b`` under ``WHERE b <> 0``: the Project sees only the Filter's visible rows, so
    the hidden b = 0 row neither divides by zero nor counts as a data error (as Postgres, which
    never evaluates the select list of a row WHERE rejected)."""
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a, 10 / b AS q FROM t WHERE b <> 0")
    conn.execute(ROWS)
    conn.execute("UPDATE t SET b = 0 WHERE a = 7")   # an update pair whose new row is filtered out
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == sorted(rows(conn, "SELECT a, 10 / b FROM t WHERE b <> 0"), key=repr)
    assert conn.data_errors() == {}


def test_many_distinct_bad_values_make_one_kind(conn):
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a::int AS n FROM t")
    conn.execute("INSERT INTO t VALUES " + ", ".join(f"({5000000000 + i}, 1)" for i in range(50)))
    conn.execute("FLUSH")
    assert conn.data_errors() == {"m": {"integer out of range": 50}}
    assert not any("5000000" in k for k in error_counts())


def test_error_kind_takes_the_values_out():
    assert error_kind("Integer value 5000000000 not in range: -2147483648 to 2147483647") == \
        "Integer value ? not in range: ? to ?"
    assert error_kind("Failed to parse string: '12x' as a scalar of type int32") == \
        "Failed to parse string: ? as a scalar of type int32"
    assert error_kind("division by zero") == "division by zero"


def test_only_the_failing_rows_become_null_and_are_counted_once():
    expr = Cast(Col(0, T.BIGINT, "a"), T.INT)
    col = pa.array([1, 2 ** 40, None, -5, -(2 ** 40)], pa.int64())
    counted = Counter()
    with counting_into(counted):
        assert expr.eval([col], 5).to_pylist() == [1, None, None, -5, None]
        out = Arith("/", Col(0, T.INT, "x"), Col(1, T.INT, "y")).eval(
            [pa.array([6, 1, 8], pa.int32()), pa.array([3, 0, 0], pa.int32())], 3)
        assert out.to_pylist() == [2, None, None]
    assert counted == {"integer out of range": 2, "division by zero": 2}


def test_the_warnings_are_rate_limited(caplog, monkeypatch):
    monkeypatch.setattr(EE, "LOG_BURST", 3)
    monkeypatch.setattr(EE, "_LOG_STATE", {})
    expr = Arith("/", Col(0, T.INT, "x"), Col(1, T.INT, "zero_rate_limit_test"))
    cols = [pa.array([1, 2], pa.int32()), pa.array([0, 0], pa.int32())]
    with caplog.at_level(logging.WARNING, logger="stream.expr"):
        for _ in range(20):
            expr.eval(cols, 2)
    warnings = [r.getMessage() for r in caplog.records if "zero_rate_limit_test" in r.getMessage()]
    assert len(warnings) == 3 and all("set to NULL" in w for w in warnings)
    monkeypatch.setattr(EE, "_LOG_STATE", {k: [v[0] - EE.LOG_WINDOW_S, v[1], v[2]] for k, v in EE._LOG_STATE.items()})
    with caplog.at_level(logging.WARNING, logger="stream.expr"):
        expr.eval(cols, 2)   # a new window: one warning, saying how many rows were not logged
    last = [r.getMessage() for r in caplog.records if "zero_rate_limit_test" in r.getMessage()][-1]
    assert "and 34 more row(s)" in last
