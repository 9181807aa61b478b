"""Unit tests of the SQL foundation through sql.connect(): parse positions, parameters as
values, DDL lifecycle, MV maintenance (incl. backfill, MV on MV, reopen) against a plain-Python
model, batch SELECT, errors."""

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sql
from sql.parse import parse_script


def test_syntax_error_has_line_and_column():
    with pytest.raises(sql.SqlSyntaxError) as info:
        parse_script("SELECT 1;\nSELECT FROM WHERE (")
    assert (info.value.line, info.value.column) == (2, 13)
    assert "line 2, column 13" in str(info.value)


def test_percent_s_becomes_parameter_not_text():
    [stmt] = parse_script("SELECT a FROM t WHERE b = %s AND c = '%s'")
    assert stmt.n_params == 1
    assert "'%s'" in stmt.ast.sql()


@given(st.text(max_size=20))
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_parameters_are_values_never_spliced(value):
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        conn.execute("INSERT INTO t VALUES (1, %s)", (value,))
        conn.execute("FLUSH")
        assert conn.execute("SELECT b FROM t WHERE b = $1", (value,)).fetchall() == [(value,)]


def _mv_rows(conn, name):
    return sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)


def test_ddl_dml_mv_lifecycle_and_reopen():
    path = tempfile.mkdtemp()
    with sql.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, g VARCHAR, v INT)")
        conn.execute("INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20), (3, 'x', NULL)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s FROM t GROUP BY g")
        conn.execute("CREATE MATERIALIZED VIEW m2 AS SELECT g, n FROM m WHERE n > 1")
        assert _mv_rows(conn, "m") == [("x", 2, 10), ("y", 1, 20)]   # backfilled
        with pytest.raises(sql.CatalogError, match="depends on it"):
            conn.execute("DROP TABLE t")
        with pytest.raises(sql.CatalogError, match="already exists"):
            conn.execute("CREATE TABLE t (a INT)")
        conn.execute("CREATE TABLE IF NOT EXISTS t (a INT)")
        with pytest.raises(sql.ExecutionError, match="primary key"):
            conn.execute("UPDATE t SET a = 5 WHERE a = 1")
    with sql.connect(path) as conn:   # reopen resumes maintenance
        conn.execute("UPDATE t SET v = v + 1 WHERE g = 'x'")
        conn.execute("DELETE FROM t WHERE a = 2")
        conn.execute("FLUSH")
        assert _mv_rows(conn, "m") == [("x", 2, 11)]
        assert _mv_rows(conn, "m2") == [("x", 2)]
        assert conn.execute("SHOW MATERIALIZED VIEWS").fetchall() == [("m",), ("m2",)]
        conn.execute("DROP MATERIALIZED VIEW m2")
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS m2")
        conn.execute("DROP MATERIALIZED VIEW m")
        conn.execute("DROP TABLE t")
        assert conn.execute("SHOW TABLES").fetchall() == []


def test_errors_are_typed_and_leave_catalog_unchanged():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY)")
        with pytest.raises(sql.BindError, match="does not exist"):
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT nope FROM t")
        with pytest.raises(sql.UnsupportedError, match="now"):
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a, now() AS n FROM t")
        assert conn.execute("SHOW MATERIALIZED VIEWS").fetchall() == []
        with pytest.raises(sql.SqlError):
            conn.execute("SELECT " + "(" * 300 + "1" + ")" * 300)
        with pytest.raises(sql.CatalogError):
            conn.execute("SET no_such_variable = 1")
        conn.execute("SET RW_IMPLICIT_FLUSH TO true")
        assert conn.execute("SHOW rw_implicit_flush").fetchall() == [("true",)]
        conn.execute("INSERT INTO t VALUES (7)")
        assert conn.execute("SELECT a FROM t").fetchall() == [(7,)]   # implicit flush


ROWS = st.lists(st.tuples(st.integers(0, 20), st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(-50, 50))),
                max_size=12)


@given(ROWS, ROWS, st.lists(st.integers(0, 20), max_size=5))
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_mv_equals_python_model_over_random_dml(first, second, deletes):
    model = {}
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, g VARCHAR, v INT)")
        for k, g, v in first:
            conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (k, g, v))
            model[k] = (g, v)
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n, sum(v) AS s, max(v) AS mx "
                     "FROM t WHERE k > 2 GROUP BY g")
        conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, m.n FROM t JOIN m ON t.g = m.g")
        for k, g, v in second:
            conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (k, g, v))
            model[k] = (g, v)
        for k in deletes:
            conn.execute("DELETE FROM t WHERE k = %s", (k,))
            model.pop(k, None)
        conn.execute("FLUSH")
        groups = {}
        for k, (g, v) in model.items():
            if k > 2:
                groups.setdefault(g, []).append(v)
        expect = sorted(((g, len(vs), sum(x for x in vs if x is not None) if any(x is not None for x in vs) else None,
                          max((x for x in vs if x is not None), default=None)) for g, vs in groups.items()), key=repr)
        assert _mv_rows(conn, "m") == expect
        counts = {g: len(vs) for g, vs in groups.items()}
        assert _mv_rows(conn, "j") == sorted(((k, counts[g]) for k, (g, _) in model.items() if g in counts), key=repr)
        # batch SELECT of the same query agrees with the MV
        batch = conn.execute("SELECT g, count(*), sum(v), max(v) FROM t WHERE k > 2 GROUP BY g").fetchall()
        assert sorted(batch, key=repr) == expect


def test_cursor_surface():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT, b VARCHAR)")
        cur = conn.executemany("INSERT INTO t VALUES (%s, %s)", [(1, "x"), (2, None), (3, "z")])
        assert cur.rowcount == 3
        conn.execute("FLUSH")
        cur = conn.execute("SELECT a, b, a * 2 AS d FROM t ORDER BY a DESC LIMIT 2 OFFSET 1")
        assert cur.description[0][:2] == ("a", "integer") and cur.description[1][1] == "character varying"
        assert cur.fetchone() == (2, None, 4)
        assert cur.fetch_arrow().column_names == ["a", "b", "d"]
        text = [r[0] for r in conn.execute("EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT b, count(*) FROM t GROUP BY b")]
        assert any("StreamHashAgg" in line and "state_tables" in line for line in text)


def test_every_type_round_trips_through_insert_select_and_an_mv():
    import datetime
    import decimal
    from relational.types import Interval
    row = (1, datetime.datetime(2024, 2, 1), decimal.Decimal("2.25"), False, 1.5, Interval(0, 1, 7),
           b"xy", datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc), datetime.time(1, 2), 4, 2 ** 40,
           datetime.date(2020, 5, 6), 2.5)
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (a INT, ts TIMESTAMP, d DECIMAL, b BOOLEAN, r REAL, iv INTERVAL, by BYTEA, "
                     "tz TIMESTAMPTZ, tm TIME, sm SMALLINT, bi BIGINT, dt DATE, f DOUBLE PRECISION)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT * FROM t")
        conn.execute("INSERT INTO t VALUES (" + ", ".join(["%s"] * len(row)) + ")", row)
        for name in ("t", "m"):
            [got] = conn.execute(f"SELECT * FROM {name}").fetchall()
            assert got == row
        conn.execute("INSERT INTO t (a, iv, d, ts) VALUES (2, '2 hours', '1.25', '2024-01-01 10:00:00')")
        assert conn.execute("SELECT iv, d, ts FROM m WHERE a = 2").fetchall() == [
            (Interval(0, 0, 7_200_000_000), decimal.Decimal("1.25"), datetime.datetime(2024, 1, 1, 10))]


def test_distinct_group_by_without_aggregates_and_union_agree_with_batch():
    queries = ["SELECT DISTINCT a, b FROM t", "SELECT a FROM t GROUP BY a",
               "SELECT a, b FROM t UNION SELECT a, b FROM u", "SELECT a FROM t UNION ALL SELECT a FROM u UNION SELECT b FROM u"]
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (a INT, b INT)")
        conn.execute("CREATE TABLE u (a INT, b INT)")
        conn.execute("INSERT INTO t VALUES (1, 1), (1, 1), (2, 2), (3, NULL), (3, NULL)")
        conn.execute("INSERT INTO u VALUES (1, 1), (5, 5)")
        for i, q in enumerate(queries):
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        assert _mv_rows(conn, "m0") == [(1, 1), (2, 2), (3, None)]
        conn.execute("DELETE FROM t WHERE a = 1")
        conn.execute("INSERT INTO u VALUES (2, 2)")
        for i, q in enumerate(queries):
            assert _mv_rows(conn, f"m{i}") == sorted(conn.execute(q).fetchall(), key=repr)
        assert _mv_rows(conn, "m2") == [(1, 1), (2, 2), (3, None), (5, 5)]


def test_placeholders_directly_followed_by_punctuation():
    """psycopg-style ``VALUES (%s,%s)`` and ``$1,$2`` (sqlglot alone reads ``$1,$`` as a
    dollar-quote tag); a ``$1`` inside a string stays text."""
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
        conn.execute("INSERT INTO t VALUES (%s,%s)", (1, 2))
        conn.execute("INSERT INTO t VALUES ($1,$2)", (3, 4))
        conn.executemany("INSERT INTO t VALUES(%s,%s)", [(5, 6), (7, 8)])
        conn.execute("FLUSH")
        assert conn.execute("SELECT a+$1,b FROM t WHERE a>=$2-1 ORDER BY a", (10, 5)).fetchall() == \
            [(15, 6), (17, 8)]
        assert conn.execute("SELECT '$1,$2' FROM t WHERE a=%s", (1,)).fetchall() == [("$1,$2",)]


def test_dollar_quoted_strings_are_text():
    """Postgres's ``$$...$$`` / ``$tag$...$tag$`` constants: a ``;``, ``%s`` or ``$1`` inside
    is text (neither a statement end nor a placeholder)."""
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, s VARCHAR)")
        conn.execute("INSERT INTO t VALUES (1, $$a;b %s $1$$), (%s, $q$x$$y$q$)", (2,))
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM t ORDER BY k").fetchall() == [(1, "a;b %s $1"), (2, "x$$y")]
        assert conn.execute("SELECT $$it's$$").fetchall() == [("it's",)]
