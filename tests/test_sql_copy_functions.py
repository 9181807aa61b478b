"""Table functions ``read_parquet('glob')`` / ``read_csv('path', ...)`` and ``CREATE TABLE AS``
(issue 27 item 4; sql/copy.py ``table_function``, sql/statements.py ``_create_table_as``).

A file's rows in a FROM clause of a batch query (filtered, joined, inserted), typed from the
file; CREATE TABLE AS from them and from any query, loaded as SSTs, kept across a reopen; an MV
over a file is refused, as are unknown parameters and missing files.
"""

import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sql
from sql.errors import BindError, CatalogError, ExecutionError, UnsupportedError


@pytest.fixture
def files(tmp_path):
    pq.write_table(pa.table({"ID": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None],
                             "v": [1.5, 2.5, None]}), tmp_path / "p1.parquet")
    pq.write_table(pa.table({"ID": pa.array([4], pa.int64()), "name": ["d"], "v": [4.5]}), tmp_path / "p2.parquet")
    (tmp_path / "c.csv").write_text('k,day,s\n1,2020-01-02,x\n2,,""\n')
    (tmp_path / "raw.csv").write_text("1;one\n2;two\n")
    return tmp_path


@pytest.fixture
def conn(tmp_path):
    with sql.connect(str(tmp_path / "db"), implicit_flush=True) as c:
        yield c


def test_read_parquet_glob_in_a_query(conn, files):
    cur = conn.execute(f"SELECT id, name, v FROM read_parquet('{files}/p*.parquet') AS f WHERE f.id > 1 ORDER BY id")
    assert cur.fetchall() == [(2, "b", 2.5), (3, None, None), (4, "d", 4.5)]
    assert [d[1] for d in cur.description] == ["bigint", "character varying", "double precision"]


def test_read_csv_types_and_parameters(conn, files):
    cur = conn.execute(f"SELECT * FROM read_csv('{files}/c.csv')")
    assert cur.fetchall() == [(1, datetime.date(2020, 1, 2), "x"), (2, None, "")]
    assert [d[0] for d in cur.description] == ["k", "day", "s"]
    got = conn.execute(f"SELECT f0, f1 FROM read_csv('{files}/raw.csv', header => false, delim => ';') ORDER BY f0")
    assert got.fetchall() == [(1, "one"), (2, "two")]


def test_insert_select_from_a_file(conn, files):
    conn.execute("CREATE TABLE u (id BIGINT PRIMARY KEY, v DOUBLE PRECISION)")
    conn.execute("CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(v) AS s FROM u")
    assert conn.execute(f"INSERT INTO u SELECT id, v FROM read_parquet('{files}/*.parquet')").rowcount == 4
    assert conn.execute("SELECT * FROM u ORDER BY id").fetchall() == [(1, 1.5), (2, 2.5), (3, None), (4, 4.5)]
    assert conn.execute("SELECT n, s FROM total").fetchall() == [(4, 8.5)]


def test_create_table_as(tmp_path, files):
    url = str(tmp_path / "ctas")
    with sql.connect(url, implicit_flush=True) as conn:
        assert conn.execute(f"CREATE TABLE t AS SELECT id, name FROM read_parquet('{files}/*.parquet')").rowcount == 4
        conn.execute("CREATE TABLE w (x, y) AS SELECT k * 10, s FROM read_csv('" + str(files / "c.csv") + "')")
        assert conn.execute("SELECT * FROM w ORDER BY x").fetchall() == [(10, "x"), (20, "")]
        assert conn.execute("DESCRIBE w").fetchall() == [("x", "bigint", False, None),
                                                        ("y", "character varying", False, None)]
        conn.execute("CREATE TABLE IF NOT EXISTS w AS SELECT 1")   # exists: nothing happens
        with pytest.raises(CatalogError, match="already exists"):
            conn.execute("CREATE TABLE w AS SELECT 1")
        conn.execute("CREATE TABLE e AS SELECT id FROM t WHERE id > 100")   # no rows: an empty table
        conn.execute("INSERT INTO t VALUES (5, 'e')")   # a table like any other: DML, MVs
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
        assert conn.execute("SELECT n FROM m").fetchall() == [(5,)]
    with sql.connect(url) as conn:
        assert conn.execute("SELECT count(*), count(name) FROM t").fetchall() == [(5, 4)]
        assert conn.execute("SELECT count(*) FROM e").fetchall() == [(0,)]


def test_refusals(conn, files):
    with pytest.raises(UnsupportedError, match="materialized view cannot read it"):
        conn.execute(f"CREATE MATERIALIZED VIEW m AS SELECT * FROM read_csv('{files}/c.csv')")
    with pytest.raises(BindError, match="no parameter"):
        conn.execute(f"SELECT * FROM read_csv('{files}/c.csv', colour => 'red')")
    with pytest.raises(ExecutionError, match="no such file"):
        conn.execute(f"SELECT * FROM read_parquet('{files}/missing.parquet')")
    with pytest.raises(ExecutionError, match="no file matches"):
        conn.execute(f"SELECT * FROM read_parquet('{files}/none*.parquet')")


def test_insert_select_as_columns_equals_the_row_path(conn, files):
    """An INSERT ... SELECT whose columns fit the table as they are goes in as Arrow columns
    (sql.bulk), a Values of a file as Arrow columns (``plan.arrow``); the rows, the ON CONFLICT
    rule, a NULL key's error and the row path's assignment casts are unchanged."""
    from sql.plan import nodes as P
    from sql.statements import bind_select
    from sql.parse import parse_script

    [stmt] = parse_script(f"SELECT * FROM read_parquet('{files}/p1.parquet')")
    plan, _ = bind_select(conn.db, stmt.ast, ())
    [values] = [n for n in P.walk(plan) if isinstance(n, P.Values)]
    assert values.arrow.num_rows == 3 and len(values.rows) == 3 and list(values.rows)[2] == (3, None, None)
    conn.execute("CREATE TABLE a (id BIGINT PRIMARY KEY, name VARCHAR, v DOUBLE PRECISION)")   # as they are
    conn.execute("CREATE TABLE b (id INT PRIMARY KEY, name VARCHAR, v REAL)")                  # assignment casts
    conn.execute("INSERT INTO a VALUES (2, 'old', 0)")
    for t in ("a", "b"):
        assert conn.execute(f"INSERT INTO {t} SELECT * FROM read_parquet('{files}/*.parquet')").rowcount == 4
    want = [(1, "a", 1.5), (2, "b", 2.5), (3, None, None), (4, "d", 4.5)]   # id 2 overwritten
    assert conn.execute("SELECT * FROM a ORDER BY id").fetchall() == want
    assert conn.execute("SELECT * FROM b ORDER BY id").fetchall() == want
    with pytest.raises(ExecutionError, match='null value in column "id" of relation "a" violates not-null constraint'):
        conn.execute("INSERT INTO a SELECT NULL::BIGINT, 'x', 1.0::DOUBLE PRECISION")
    assert conn.execute("INSERT INTO a (name, id, v) SELECT name, id + 10, v FROM a").rowcount == 4
    assert conn.execute("SELECT count(*) FROM a WHERE id > 10").fetchall() == [(4,)]
