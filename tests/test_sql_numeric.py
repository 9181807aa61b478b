"""NUMERIC values, LIKE ... ESCAPE and data errors end to end through SQL (issue 13): NUMERIC
literals and their typing next to integers and doubles, exact arithmetic in batch and in an MV
(the two agree), data errors raising a positioned ExecutionError in batch SELECT and DML but
turning into NULL (logged and counted) in a streaming MV, and CASE evaluating only the taken
branch."""

import decimal
import logging

import pytest

import sql
from sql.errors import BindError, ExecutionError
from stream.expr import error_counts

Dec = decimal.Decimal


@pytest.fixture
def conn():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, d DECIMAL, x DOUBLE, s VARCHAR)")
        c.execute("INSERT INTO t VALUES (1, 7, 1.5, 0.5, 'a%b'), (2, 0, -2.25, 2, 'a_b'), (3, NULL, NULL, NULL, NULL),"
                  " (4, 2147483647, 10, -1, 'ABC')")
        c.execute("FLUSH")
        yield c


def one(conn, query, params=()):
    cur = conn.execute(query, params)
    return cur.fetchall(), [d[1] for d in cur.description]


def test_literal_types_follow_postgres(conn):
    rows, types = one(conn, "SELECT 1.5, 1.5 + 1, 0.5 * x, 2 * 3, 1e3, 1.5::DOUBLE FROM t WHERE k = 1")
    assert rows == [(Dec("1.5"), Dec("2.5"), 0.25, 6, Dec("1000"), 1.5)]
    assert types == ["numeric", "numeric", "double precision", "integer", "numeric", "double precision"]


def test_numeric_arithmetic_comparisons_and_casts(conn):
    rows, types = one(conn, "SELECT k, d + a, d * d, d / 3, -d, d % 1, d > 1, d::INT, d::VARCHAR, "
                            "round(d, 1), abs(d) FROM t ORDER BY k")
    assert rows[0] == (1, Dec("8.5"), Dec("2.25"), Dec("0.50000000000000000000"), Dec("-1.5"), Dec("0.5"), True, 2,
                       "1.5", Dec("1.5"), Dec("1.5"))
    assert rows[1] == (2, Dec("-2.25"), Dec("5.0625"), Dec("-0.75000000000000000000"), Dec("2.25"), Dec("-0.25"),
                       False, -2, "-2.25", Dec("-2.3"), Dec("2.25"))
    assert rows[2] == (3,) + (None,) * 10
    assert rows[3][1] == Dec("2147483657")   # int + numeric is numeric: no int overflow
    assert types[1:5] == ["numeric"] * 4 and types[6:8] == ["boolean", "integer"]
    assert one(conn, "SELECT k FROM t WHERE d BETWEEN -3 AND 1.5 ORDER BY k")[0] == [(1,), (2,)]
    assert one(conn, "SELECT '2.50'::DECIMAL = 2.5, 0.1::DOUBLE::DECIMAL, 'NaN'::DECIMAL > 1e100")[0] == \
        [(True, Dec("0.1"), True)]


def test_mv_and_batch_agree_on_numeric_expressions(conn):
    query = "SELECT k, d * 2 + a AS e, d / 4 AS q, d::DOUBLE * x AS f FROM t WHERE d <> 0"
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {query}")
    conn.execute("INSERT INTO t VALUES (5, 1, 0.125, 4, 'z')")
    conn.execute("UPDATE t SET d = d + 1 WHERE k = 2")
    conn.execute("FLUSH")
    mv = sorted(conn.execute("SELECT * FROM m").fetchall())
    assert mv == sorted(conn.execute(query).fetchall())
    assert (2, Dec("-2.50"), Dec("-0.31250000000000000000"), -2.5) in mv
    agg = "SELECT sum(d), avg(d), min(d), max(d * 2) FROM t"
    conn.execute(f"CREATE MATERIALIZED VIEW ma AS {agg}")
    assert conn.execute("SELECT * FROM ma").fetchall() == conn.execute(agg).fetchall() == \
        [(Dec("10.375"), Dec("2.5937500000000000"), Dec("-1.25"), Dec("20"))]


def test_batch_data_errors_are_positioned_execution_errors(conn):
    with pytest.raises(ExecutionError, match="integer out of range") as info:
        conn.execute("SELECT k,\n       a + 1 FROM t").fetchall()
    assert (info.value.line, info.value.column) == (2, 8)
    with pytest.raises(ExecutionError, match="division by zero"):
        conn.execute("SELECT d / (a - a) FROM t").fetchall()
    with pytest.raises(ExecutionError, match="division by zero"):
        conn.execute("SELECT a % 0 FROM t").fetchall()
    with pytest.raises(ExecutionError, match="out of range"):
        conn.execute("SELECT (d * 1e10)::INT FROM t WHERE k = 4").fetchall()
    with pytest.raises(ExecutionError, match="division by zero") as info:
        conn.execute("UPDATE t SET d = d / 0 WHERE k = 1")
    assert (info.value.line, info.value.column) == (1, 18)
    with pytest.raises(ExecutionError):
        conn.execute("INSERT INTO t SELECT k + 10, a * 2, d, x, s FROM t")
    with pytest.raises(ExecutionError):
        conn.execute("DELETE FROM t WHERE 1 / (a - a) = 1")
    conn.execute("FLUSH")
    assert one(conn, "SELECT count(*), sum(d) FROM t")[0] == [(4, Dec("9.25"))]   # nothing changed


def test_case_evaluates_only_the_taken_branch(conn):
    rows, _ = one(conn, "SELECT k, CASE WHEN a = 0 THEN NULL WHEN a > 100 THEN -1 ELSE 14 / a END, "
                        "CASE WHEN a <> 0 THEN d / a END FROM t ORDER BY k")
    assert rows == [(1, 2, Dec("0.21428571428571428571")), (2, None, None), (3, None, None),
                    (4, -1, Dec("0.0000000046566128752457969241"))]
    assert one(conn, "SELECT CASE WHEN false THEN 1 / 0 ELSE 1 END")[0] == [(1,)]


def test_integer_edge_cases(conn):
    assert one(conn, "SELECT (-2147483648) % (-1), -2147483648, 7 % -2, -7 / 2")[0] == [(0, -2147483648, 1, -3)]
    with pytest.raises(ExecutionError, match="integer out of range"):
        conn.execute("SELECT (-2147483648) / (-1)").fetchall()
    with pytest.raises(ExecutionError, match="smallint out of range"):
        conn.execute("SELECT 200::SMALLINT * 200::SMALLINT").fetchall()


def test_streaming_data_errors_become_null_and_are_counted(conn, caplog):
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, a + 1 AS a1, 10 / a AS q, d / (a - a) AS z FROM t")
    assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [
        (1, 8, 1, None), (2, 1, None, None), (3, None, None, None), (4, None, 0, None)]
    before = error_counts()
    with caplog.at_level(logging.WARNING, logger="stream.expr"):
        conn.execute("INSERT INTO t VALUES (6, 0, 1, 1, 'q'), (7, 2147483647, 1, 1, 'q')")
        conn.execute("FLUSH")
    after = error_counts()
    assert after.get("division by zero", 0) - before.get("division by zero", 0) == 3   # 10/0, and z twice
    assert after.get("integer out of range", 0) - before.get("integer out of range", 0) == 1
    assert any("set to NULL" in r.getMessage() for r in caplog.records)
    assert (6, 1, None, None) in conn.execute("SELECT * FROM m").fetchall()
    conn.execute("DELETE FROM t WHERE k IN (6, 7)")   # retracting the NULL rows works
    conn.execute("FLUSH")
    assert len(conn.execute("SELECT * FROM m").fetchall()) == 4


def test_like_escape_not_like_and_ilike(conn):
    rows, _ = one(conn, "SELECT k, s LIKE 'a!%b' ESCAPE '!', s NOT LIKE 'a\\_b', s ILIKE 'abc', "
                        "s NOT ILIKE 'a%', s LIKE 'a%b' ESCAPE '' FROM t ORDER BY k")
    assert rows == [(1, True, True, False, False, True), (2, False, False, False, False, True),
                    (3, None, None, None, None, None), (4, False, True, True, False, False)]
    with pytest.raises(BindError, match="escape"):
        conn.execute("SELECT s LIKE 'ab!' ESCAPE '!' FROM t").fetchall()
    conn.execute("CREATE MATERIALIZED VIEW ml AS SELECT k FROM t WHERE s LIKE '%!_%' ESCAPE '!'")
    assert conn.execute("SELECT * FROM ml").fetchall() == [(2,)]


def test_update_assigns_numeric_values_like_postgres(conn):
    conn.execute("UPDATE t SET a = d * 3, d = x / 4 WHERE k IN (1, 2)")   # numeric -> int, double -> numeric
    conn.execute("FLUSH")
    assert one(conn, "SELECT k, a, d FROM t WHERE k <= 2 ORDER BY k")[0] == [(1, 5, Dec("0.125")), (2, -7, Dec("0.5"))]
    with pytest.raises(ExecutionError, match="out of range"):
        conn.execute("UPDATE t SET a = d * 1e10 WHERE k = 4")
    with pytest.raises(BindError):
        conn.execute("UPDATE t SET a = s WHERE k = 4")


def test_numeric_parameters_and_inserts(conn):
    conn.execute("INSERT INTO t (k, d, x, a) VALUES (%s, %s, 0.1, 2.5)", (9, Dec("3.000")))
    conn.execute("FLUSH")
    assert one(conn, "SELECT d, x, a FROM t WHERE k = 9")[0] == [(Dec("3.000"), 0.1, 3)]
    assert one(conn, "SELECT d + %s FROM t WHERE k = 9", (Dec("0.5"),))[0] == [(Dec("3.500"),)]
