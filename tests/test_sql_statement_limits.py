"""What one ``execute`` accepts (issue 25): nesting is counted as real nesting -- parentheses and
brackets outside quotes and comments, at most 200 levels as docs/sql.md says -- so a long VALUES
list or a string full of parentheses is no nesting; anything deeper is a SQL error at once (no
RecursionError, no runaway memory); and ``execute``/``executemany`` run exactly one statement,
refusing text with several before any of it runs (scripts are split by ``hummock run``)."""

import sys
import threading

import pytest

import sql
from sql.errors import SqlError, SqlSyntaxError
from sql.parse import MAX_DEPTH


@pytest.fixture
def conn():
    c = sql.connect(":memory:", implicit_flush=True)
    c.execute("CREATE TABLE t (a INT, b VARCHAR)")
    c.execute("INSERT INTO t VALUES (1, 'x')")
    yield c
    c.close()


def nested(depth: int, inner: str = "1") -> str:
    return "(" * depth + inner + ")" * depth


def test_the_documented_200_levels_of_parentheses_run(conn):
    assert MAX_DEPTH == 200
    assert conn.execute("SELECT " + nested(200)).fetchall() == [(1,)]
    query = "SELECT * FROM " + "(SELECT * FROM " * 200 + "t" + ") AS s" * 200
    assert conn.execute(query).fetchall() == [(1, "x")]
    assert conn.execute("SELECT a FROM t WHERE a IN " + nested(199, "1") + " AND b = 'x'").fetchall() == [(1,)]


@pytest.mark.parametrize("query, column", [
    ("SELECT " + nested(201), 8 + 200),
    ("SELECT " + nested(5000), 8 + 200),
    ("SELECT " + "ARRAY[" * 201 + "1" + "]" * 201, 8 + 200 * 6 + 5),
    ("SELECT * FROM " + "(SELECT * FROM " * 201 + "t" + ") AS s" * 201, 15 + 200 * 15),
], ids=["parens-201", "parens-5000", "array-201", "subquery-201"])
def test_deeper_parentheses_are_refused_at_the_first_level_too_deep(conn, query, column):
    with pytest.raises(SqlSyntaxError, match="nests deeper than 200 levels") as info:
        conn.execute(query)
    assert (info.value.line, info.value.column) == (1, column)


def test_text_that_is_no_nesting_is_not_counted(conn):
    values = ", ".join(f"({i}, 'v{i}')" for i in range(801))   # 801 "(" at depth 1
    conn.execute(f"INSERT INTO t VALUES {values}")
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(802,)]
    text = "(" * 900 + ")" * 3
    assert conn.execute(f"SELECT '{text}' AS s").fetchall() == [(text,)]
    assert conn.execute(f'SELECT 1 AS "{text}"').description[0][0] == text
    assert conn.execute(f"SELECT $q${text}$q$").fetchall() == [(text,)]
    assert conn.execute(f"SELECT 2 -- {text}\n").fetchall() == [(2,)]
    assert conn.execute(f"SELECT /* {text} */ 3").fetchall() == [(3,)]


def test_parentheses_around_columns_are_no_level_of_the_expression_tree(conn):
    """The binder counts the tree's real levels, not its Paren/Alias nodes: 200 parentheses
    around a column, a negation in each of 150 parentheses, a WHERE in 200 parentheses and an
    MV over them bind as the parser allows (they were "nests deeper than 200 levels")."""
    assert conn.execute("SELECT " + nested(200, "a") + " FROM t").fetchall() == [(1,)]
    assert conn.execute("SELECT " + nested(200, "a") + " AS x FROM t").fetchall() == [(1,)]
    assert conn.execute("SELECT " + "(-" * 150 + "a" + ")" * 150 + " FROM t").fetchall() == [(1,)]
    assert conn.execute("SELECT b FROM t WHERE " + nested(200, "a = 1")).fetchall() == [("x",)]
    conn.execute("CREATE MATERIALIZED VIEW mv AS SELECT " + nested(200, "a + 1") + " AS y FROM t")
    assert conn.execute("SELECT y FROM mv").fetchall() == [(2,)]


@pytest.mark.parametrize("query", [
    "SELECT " + "NOT " * 201 + "true",
    "SELECT " + "+".join(["a"] * 202) + " FROM t",
    "SELECT " + "CASE WHEN a = 1 THEN " * 201 + "1" + " END" * 201 + " FROM t",
    "SELECT " + "(- " * 100 + "- " * 101 + "a" + ")" * 100 + " FROM t",
], ids=["not-201", "plus-202", "case-201", "minus-201-in-parens"])
def test_expression_trees_deeper_than_200_real_levels_are_still_refused(conn, query):
    with pytest.raises(SqlError, match="nests deeper than 200 levels"):
        conn.execute(query).fetchall()
    assert conn.execute("SELECT " + nested(200, "a") + " FROM t").fetchall() == [(1,)]   # depth given back


@pytest.mark.parametrize("query", [
    "SELECT " + nested(100_000),                                     # refused before sqlglot
    "SELECT 1 WHERE " + "NOT " * 20_000 + "true",                    # nesting without parentheses
    "SELECT " + "CASE WHEN true THEN " * 5000 + "1" + " END" * 5000,
    "SELECT " + " + ".join(["a"] * 20_000) + " FROM t",
    "SELECT " + "- " * 20_000 + "1",
], ids=["parens-100000", "not-20000", "case-5000", "plus-20000", "minus-20000"])
def test_deep_nesting_is_a_sql_error_never_a_recursion_error(conn, query):
    limit = sys.getrecursionlimit()
    with pytest.raises(SqlError):
        conn.execute(query).fetchall()
    assert sys.getrecursionlimit() == limit          # the headroom is given back
    assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]


def test_concurrent_deep_statements_give_the_recursion_limit_back():
    limit = sys.getrecursionlimit()
    errors = []

    def work():
        try:
            with sql.connect(":memory:") as c:
                for _ in range(10):
                    assert c.execute("SELECT " + nested(200)).fetchall() == [(1,)]
                    with pytest.raises(SqlSyntaxError):
                        c.execute("SELECT " + nested(300))
        except BaseException as exc:   # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert sys.getrecursionlimit() == limit


# --- one statement per execute ---------------------------------------------------------------

@pytest.mark.parametrize("text, line, column", [
    ("SELECT 1; DROP TABLE t", 1, 11),
    ("SELECT 1;\n  DROP TABLE t;", 2, 3),
    ("INSERT INTO t VALUES (2, 'y'); SELEC garbage", 1, 32),   # refused before the second parses
    ("SELECT 1 /* ; */ ; -- x\nDROP TABLE t", 1, 20),      # the second begins with its comment
])
def test_execute_refuses_several_statements_before_running_any(conn, text, line, column):
    with pytest.raises(SqlSyntaxError, match=r"execute\(\) runs one statement, 2 were given") as info:
        conn.execute(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert conn.execute("SHOW TABLES").fetchall() == [("t",)]
    assert conn.execute("SELECT * FROM t").fetchall() == [(1, "x")]


def test_executemany_refuses_several_statements(conn):
    with pytest.raises(SqlSyntaxError, match=r"executemany\(\) runs one statement, 2 were given") as info:
        conn.executemany("INSERT INTO t VALUES (%s, 'p'); DROP TABLE t", [(2,), (3,)])
    assert (info.value.line, info.value.column) == (1, 33)
    assert conn.execute("SELECT * FROM t").fetchall() == [(1, "x")]
    assert conn.execute("SHOW TABLES").fetchall() == [("t",)]


@pytest.mark.parametrize("text", ["SELECT 1;", ";; SELECT 1 ;;", "SELECT 1; -- done", "SELECT 1 /* ; */",
                                  "SELECT $$;$$ IS NOT NULL", "SELECT ';' IS NOT NULL"])
def test_one_statement_with_semicolons_around_it_runs(conn, text):
    assert conn.execute(text).fetchall() in ([(1,)], [(True,)])
