"""Column DEFAULT and ALTER TABLE (issue 29 item 4; sql/defaults.py, sql/alter.py).

DEFAULT: filled for columns an INSERT leaves out (VALUES, SELECT, executemany, DEFAULT VALUES,
``VALUES (DEFAULT, ...)``), by ``UPDATE ... SET c = DEFAULT``, COPY with a column list and
``insert_arrow``; now() is one time per statement, random() one value per row; refused at CREATE
when it does not assign or fit; kept in the catalog across a reopen and shown by DESCRIBE.

ALTER TABLE: ADD/DROP COLUMN re-encode the rows (old rows read an added column as its default,
as Postgres shows them) with indexes and MVs kept right; RENAME TO / RENAME COLUMN rewrite the
definitions of what reads the table; what is unsafe for a reader is refused naming it. A
hypothesis test checks random ADD/DROP/RENAME interleaved with DML and a reopen against a
model (a list of rows).
"""

import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from hummock.errors import CorruptionError
from sql.catalog import Relation
from sql.errors import BindError, CatalogError, ExecutionError, SqlError, UnsupportedError


def rows(conn, text):
    return conn.execute(text).fetchall()


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


# --- DEFAULT ----------------------------------------------------------------------------------------

def test_insert_fills_defaults_of_omitted_and_default_items(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 1 + 2, s VARCHAR DEFAULT 'x', "
                 "d DATE DEFAULT '2024-02-29', n NUMERIC DEFAULT 1.50, b BIGINT DEFAULT 7, z INT)")
    conn.execute("INSERT INTO t (id) VALUES (1)")
    conn.execute("INSERT INTO t VALUES (2, DEFAULT, 'y', DEFAULT, DEFAULT, 8, DEFAULT)")
    conn.execute("INSERT INTO t (id, s) SELECT 3, 'q'")
    conn.executemany("INSERT INTO t (id, z) VALUES (%s, %s)", [(4, 40), (5, 50)])
    got = rows(conn, "SELECT id, a, s, d::text, n::text, b, z FROM t ORDER BY id")
    assert got == [(1, 3, "x", "2024-02-29", "1.50", 7, None), (2, 3, "y", "2024-02-29", "1.50", 8, None),
                   (3, 3, "q", "2024-02-29", "1.50", 7, None), (4, 3, "x", "2024-02-29", "1.50", 7, 40),
                   (5, 3, "x", "2024-02-29", "1.50", 7, 50)]


def test_default_values_and_a_pk_with_a_default(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY DEFAULT 0, v VARCHAR DEFAULT 'v')")
    conn.execute("INSERT INTO t DEFAULT VALUES")
    assert rows(conn, "SELECT * FROM t") == [(0, "v")]
    conn.execute("CREATE TABLE h (v INT)")   # no default, hidden row id: a row of NULLs
    conn.execute("INSERT INTO h DEFAULT VALUES")
    assert rows(conn, "SELECT * FROM h") == [(None,)]


def test_now_is_one_time_per_statement_random_one_value_per_row(conn):
    conn.execute("CREATE TABLE t (id INT, at TIMESTAMPTZ DEFAULT now(), r DOUBLE PRECISION DEFAULT random())")
    conn.execute("INSERT INTO t (id) VALUES (1), (2), (3)")
    conn.execute("INSERT INTO t (id) VALUES (4)")
    got = rows(conn, "SELECT id, at, r FROM t ORDER BY id")
    assert got[0][1] == got[1][1] == got[2][1] < got[3][1]
    assert len({r for _, _, r in got}) == 4 and all(0 <= r < 1 for _, _, r in got)
    conn.executemany("INSERT INTO t (id) VALUES (%s)", [(i,) for i in range(10, 20)])   # the columnar path
    assert conn.execute("SELECT count(DISTINCT at), count(DISTINCT r), min(at) > %s FROM t WHERE id >= 10",
                        (got[3][1],)).fetchall() == [(1, 10, True)]


def test_update_set_default(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 5, b INT)")
    conn.execute("INSERT INTO t VALUES (1, 1, 1), (2, 2, 2)")
    assert conn.execute("UPDATE t SET a = DEFAULT, b = DEFAULT WHERE id = 2").rowcount == 1
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 1, 1), (2, 5, None)]


def test_copy_and_insert_arrow_fill_defaults(conn, tmp_path):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 9, s VARCHAR)")
    path = tmp_path / "in.csv"
    path.write_text("1,p\n2,q\n")
    assert conn.execute(f"COPY t (id, s) FROM '{path}' WITH (FORMAT csv)").rowcount == 2
    conn.insert_arrow("t", pa.table({"id": pa.array([3], pa.int32()), "s": ["r"]}))
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 9, "p"), (2, 9, "q"), (3, 9, "r")]


@pytest.mark.parametrize("ddl, error, match", [
    ("CREATE TABLE x (a INT DEFAULT 'abc')", ExecutionError, "invalid input syntax for type INT: 'abc' at line 1, "
                                                             "column 31$"),
    ("CREATE TABLE x (a BOOLEAN DEFAULT 1)", BindError, "default expression is of type INT"),
    ("CREATE TABLE x (a INT DEFAULT b)", BindError, "cannot use column reference"),
    ("CREATE TABLE x (a INT DEFAULT (SELECT 1))", UnsupportedError, "subqueries"),
    ("CREATE TABLE x (a INT DEFAULT count(*))", BindError, "aggregate"),
    ("CREATE TABLE x (a INT DEFAULT 1 DEFAULT 2)", BindError, "multiple default"),
])
def test_bad_defaults_are_refused_at_create(conn, ddl, error, match):
    with pytest.raises(error, match=match):
        conn.execute(ddl)
    assert conn.db.catalog.get("x") is None


def test_a_default_that_fails_fails_the_statement_that_uses_it(conn):
    """As Postgres: only untyped strings are converted at CREATE; the rest runs when used."""
    conn.execute("CREATE TABLE x (k INT PRIMARY KEY, a INT DEFAULT 1 / 0, b SMALLINT DEFAULT 100000)")
    conn.execute("INSERT INTO x VALUES (1, 1, 1)")
    with pytest.raises(ExecutionError, match="division by zero"):
        conn.execute("INSERT INTO x (k, b) VALUES (2, 2)")
    with pytest.raises(ExecutionError, match="out of range"):
        conn.execute("UPDATE x SET b = DEFAULT")
    assert rows(conn, "SELECT * FROM x") == [(1, 1, 1)]


def test_defaults_persist_and_show_in_describe(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 42, s VARCHAR DEFAULT 'it''s', "
                     "at TIMESTAMPTZ DEFAULT NOW())")
    with sql.connect(url, implicit_flush=True) as conn:
        assert rows(conn, "DESCRIBE t") == [("id", "integer", True, None), ("a", "integer", False, "42"),
                                            ("s", "character varying", False, "'it''s'"),
                                            ("at", "timestamp with time zone", False, "now()")]
        conn.execute("INSERT INTO t (id) VALUES (1)")
        assert rows(conn, "SELECT id, a, s, at IS NOT NULL FROM t") == [(1, 42, "it's", True)]


def test_psql_describe_over_pgwire_shows_the_default(conn):
    """psql's ``\\d t`` reads pg_attrdef's text through this query (sql/pgwire/pg_catalog.py)."""
    from sql.pgwire import pg_catalog
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 42, s VARCHAR)")
    oid = pg_catalog.OID_BASE + conn.db.catalog.get("t").table_id
    text = (f"SELECT a.attname,\n  pg_catalog.format_type(a.atttypid, a.atttypmod),\n  (SELECT pg_catalog."
            f"pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND "
            f"d.adnum = a.attnum AND a.atthasdef),\n  a.attnotnull\nFROM pg_catalog.pg_attribute a\n"
            f"WHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped\nORDER BY a.attnum;")
    ctx = pg_catalog.Context(conn.db.catalog, "u", "d", {}, 1)
    answer = pg_catalog.answer(text, (), ctx)
    assert [r[:3] for r in answer.rows] == [("id", "integer", None), ("a", "integer", "42"),
                                           ("s", "character varying", None)]


def test_a_record_without_defaults_opens_and_a_malformed_one_is_corruption(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT 1)")
    desc = conn.db.catalog.get("t").to_desc()
    assert desc.properties["sql"]["defaults"] == [None, "1"]
    del desc.properties["sql"]["defaults"]   # as every record written before defaults existed
    assert Relation.from_desc(desc).default_of(1) is None
    for bad in (["1"], [None, 5], "1"):
        desc.properties["sql"]["defaults"] = bad
        with pytest.raises(CorruptionError, match="defaults"):
            Relation.from_desc(desc)
    conn.execute("CREATE TABLE o (k INT PRIMARY KEY)")
    conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.id FROM t JOIN o ON t.id = o.k")
    conn.execute("ALTER TABLE t ADD COLUMN b INT")   # j keeps t's rows: it reads t as before
    desc = conn.db.catalog.get("j").to_desc()
    assert desc.properties["sql"]["scan_layouts"] == {"t": [["id", {"kind": 3}], ["a", {"kind": 3}]]}
    assert Relation.from_desc(desc).scan_layouts == conn.db.catalog.get("j").scan_layouts
    for bad in ({"o2": []}, {"t": [["id"]]}, {"t": [[1, {"kind": 3}]]}, {"t": [["id", {"kind": 999}]]}, []):
        desc.properties["sql"]["scan_layouts"] = bad
        with pytest.raises(CorruptionError, match="scan_layouts"):
            Relation.from_desc(desc)


# --- ALTER TABLE --------------------------------------------------------------------------------------

def test_add_column_old_rows_read_its_default_new_rows_too(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
    conn.execute("ALTER TABLE t ADD COLUMN b VARCHAR DEFAULT 'd'")
    conn.execute("ALTER TABLE t ADD c INT")
    conn.execute("INSERT INTO t (id, a) VALUES (3, 30)")
    conn.execute("UPDATE t SET c = a + 1 WHERE id = 1")
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 10, "d", 11), (2, 20, "d", None), (3, 30, "d", None)]
    conn.execute("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT")   # exists: nothing happens
    with pytest.raises(CatalogError, match="already exists"):
        conn.execute("ALTER TABLE t ADD COLUMN c INT")


def test_drop_column_hidden_row_id_table_and_reopen(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (a INT, b VARCHAR, c INT)")
        conn.execute("INSERT INTO t VALUES (1, 'x', 10), (2, 'y', 20)")
        conn.execute("ALTER TABLE t DROP COLUMN b")
        conn.execute("ALTER TABLE t ADD COLUMN d INT DEFAULT 4")
        conn.execute("DELETE FROM t WHERE a = 1")
        conn.execute("INSERT INTO t VALUES (3, 30, 5)")
        conn.execute("ALTER TABLE t DROP IF EXISTS nosuch")
    with sql.connect(url, implicit_flush=True) as conn:
        assert rows(conn, "SELECT * FROM t ORDER BY a") == [(2, 20, 4), (3, 30, 5)]
        conn.execute("UPDATE t SET d = d + 1")
        assert rows(conn, "SELECT a, d FROM t ORDER BY a") == [(2, 5), (3, 6)]


def test_readers_keep_working_and_select_star_keeps_its_columns(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, s VARCHAR)")
        conn.execute("INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y')")
        conn.execute("CREATE INDEX ia ON t (a)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT a, count(*) AS n FROM t GROUP BY a")
        conn.execute("CREATE MATERIALIZED VIEW ms AS SELECT * FROM t")
        conn.execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 5")
        conn.execute("INSERT INTO t VALUES (3, 30, 'z', 6)")
        assert rows(conn, "SELECT * FROM ms ORDER BY id") == [(1, 10, "x"), (2, 20, "y"), (3, 30, "z")]
        assert rows(conn, "SELECT * FROM t WHERE a = 30") == [(3, 30, "z", 6)]   # through the index
        with pytest.raises(BindError, match="materialized view 'ms' reads it"):
            conn.execute("ALTER TABLE t DROP COLUMN s")
        with pytest.raises(BindError, match="index 'ia' is keyed by it"):
            conn.execute("ALTER TABLE t DROP COLUMN a")
        conn.execute("DROP MATERIALIZED VIEW ms")
        conn.execute("ALTER TABLE t DROP COLUMN s")
        conn.execute("ALTER TABLE t RENAME COLUMN a TO aa")
        conn.execute("ALTER TABLE t RENAME TO u")
        conn.execute("UPDATE u SET aa = 11 WHERE id = 1")
    with sql.connect(url, implicit_flush=True) as conn:
        assert rows(conn, "SELECT * FROM u ORDER BY id") == [(1, 11, 5), (2, 20, 5), (3, 30, 6)]
        assert rows(conn, "SELECT * FROM u WHERE aa = 20") == [(2, 20, 5)]
        assert rows(conn, "SELECT * FROM m ORDER BY a") == [(11, 1), (20, 1), (30, 1)]   # m keeps its names
        assert rows(conn, "SHOW INDEXES") == [("ia", "u", "aa")]
        conn.execute("INSERT INTO u VALUES (4, 11, 7)")
        assert rows(conn, "SELECT * FROM m WHERE a = 11") == [(11, 2)]
        with pytest.raises(BindError, match="'t' does not exist"):
            conn.execute("SELECT * FROM t")


def test_mvs_keeping_whole_rows_read_the_table_in_its_former_layout(tmp_path):
    """A join, a top-N: their state holds the table's rows as they were; after ADD/DROP COLUMN
    they read the table through a projection to that layout (scan_layouts), across a reopen."""
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, x VARCHAR)")
        conn.execute("CREATE TABLE o (k INT PRIMARY KEY, w INT)")
        conn.execute("CREATE TABLE h (v INT, q INT)")
        conn.execute("INSERT INTO t VALUES (1, 2, 'a'), (2, 3, 'b')")
        conn.execute("INSERT INTO o VALUES (1, 10), (2, 20)")
        conn.execute("INSERT INTO h VALUES (2, 5), (3, 6)")
        conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, v + w AS s FROM t JOIN o ON t.k = o.k")
        conn.execute("CREATE MATERIALIZED VIEW j2 AS SELECT t.*, o.w FROM t JOIN o ON t.k = o.k")
        conn.execute("CREATE MATERIALIZED VIEW jh AS SELECT h.v, h.q, t.k FROM h JOIN t ON h.v = t.v")
        conn.execute("CREATE MATERIALIZED VIEW top AS SELECT k, v FROM t ORDER BY v DESC LIMIT 2")
        conn.execute("ALTER TABLE t ADD COLUMN y INT DEFAULT 1")
        conn.execute("ALTER TABLE h ADD COLUMN r INT DEFAULT 9")
        with pytest.raises(BindError, match="materialized view 'jh' reads it"):
            conn.execute("ALTER TABLE h DROP COLUMN q")
        with pytest.raises(BindError, match="materialized view 'j2' reads it"):
            conn.execute("ALTER TABLE t DROP COLUMN x")
        conn.execute("ALTER TABLE h DROP COLUMN r")
        conn.execute("ALTER TABLE t RENAME TO tt")
        conn.execute("INSERT INTO tt VALUES (3, 2, 'c', 7)")
        conn.execute("INSERT INTO o VALUES (3, 30)")
        conn.execute("INSERT INTO h VALUES (2, 8)")
        conn.execute("DELETE FROM tt WHERE k = 1")
        conn.execute("UPDATE o SET w = 21 WHERE k = 2")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("ALTER TABLE tt DROP COLUMN y")
        conn.execute("INSERT INTO tt VALUES (4, 3, 'd')")
        conn.execute("INSERT INTO o VALUES (4, 40)")
        assert rows(conn, "SELECT * FROM j ORDER BY k") == [(2, 24), (3, 32), (4, 43)]
        assert rows(conn, "SELECT * FROM j2 ORDER BY k") == [(2, 3, "b", 21), (3, 2, "c", 30), (4, 3, "d", 40)]
        assert rows(conn, "SELECT * FROM jh ORDER BY 1, 2, 3") == [(2, 5, 3), (2, 8, 3), (3, 6, 2), (3, 6, 4)]
        assert rows(conn, "SELECT * FROM top ORDER BY k") == [(2, 3), (4, 3)]


def test_rename_table_keeps_qualified_references_and_subscriptions(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    conn.execute("CREATE TABLE o (k INT PRIMARY KEY, w INT)")
    conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, t.v + o.w AS s FROM t JOIN o ON t.k = o.k")
    conn.execute("CREATE SUBSCRIPTION sub FROM t WITH (retention = '1h')")
    conn.execute("ALTER TABLE t RENAME TO t2")
    conn.execute("INSERT INTO t2 VALUES (1, 2)")
    conn.execute("INSERT INTO o VALUES (1, 3)")
    assert rows(conn, "SELECT * FROM j") == [(1, 5)]
    assert conn.db.catalog.subscriptions["sub"].relation == "t2"
    with pytest.raises(UnsupportedError, match="subscription 'sub'"):
        conn.execute("ALTER TABLE t2 ADD COLUMN x INT")
    with pytest.raises(CatalogError, match="already exists"):
        conn.execute("ALTER TABLE t2 RENAME TO o")


def test_rename_column_rewrites_plain_selects_and_refuses_the_rest_by_name(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, x INT)")
    conn.execute("CREATE TABLE o (k INT PRIMARY KEY, w INT)")
    conn.execute("INSERT INTO t VALUES (1, 2, 3)")
    conn.execute("INSERT INTO o VALUES (1, 10)")
    conn.execute("CREATE MATERIALIZED VIEW j AS SELECT t.k, v, v + w AS s FROM t JOIN o ON t.k = o.k WHERE v > 0")
    conn.execute("CREATE MATERIALIZED VIEW agg AS SELECT x, sum(v) AS sv, max(v) FILTER (WHERE v > 1) AS mv, "
                 "count(DISTINCT v) AS dv FROM t GROUP BY x")
    conn.execute("CREATE MATERIALIZED VIEW top AS SELECT k, v FROM t ORDER BY v DESC LIMIT 1")
    conn.execute("CREATE MATERIALIZED VIEW sub AS SELECT k FROM t WHERE v IN (SELECT w FROM o)")
    with pytest.raises(BindError, match="materialized view 'sub' reads it"):
        conn.execute("ALTER TABLE t RENAME COLUMN v TO vv")
    conn.execute("DROP MATERIALIZED VIEW sub")
    conn.execute("ALTER TABLE t RENAME COLUMN v TO vv")
    conn.execute("INSERT INTO t VALUES (2, 5, 6)")
    conn.execute("INSERT INTO o VALUES (2, 20)")
    assert rows(conn, "SELECT * FROM j ORDER BY k") == [(1, 2, 12), (2, 5, 25)]   # j keeps its column v
    assert rows(conn, "SELECT * FROM agg ORDER BY x") == [(3, 2, 2, 1), (6, 5, 5, 1)]
    assert rows(conn, "SELECT * FROM top") == [(2, 5)]
    assert "\"t\".\"vv\" AS \"v\"" in conn.db.catalog.get("j").definition
    conn.execute("ALTER TABLE t RENAME COLUMN x TO y")   # j does not read x
    conn.execute("ALTER TABLE t RENAME y TO z")   # COLUMN is optional, as in Postgres
    assert [r[0] for r in rows(conn, "DESCRIBE t")] == ["k", "vv", "z"]


def test_rename_a_materialized_view_an_index_and_a_source(conn):
    """RisingWave's ALTER MATERIALIZED VIEW / INDEX / SOURCE ... RENAME TO: what reads them follows."""
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    conn.execute("INSERT INTO t VALUES (1, 2)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, v FROM t")
    conn.execute("CREATE MATERIALIZED VIEW mm AS SELECT m.k, count(*) AS n FROM m GROUP BY m.k")
    conn.execute("CREATE INDEX im ON m (v)")
    conn.execute("CREATE SOURCE s (a INT) WITH (connector = 'datagen')")
    conn.execute("ALTER MATERIALIZED VIEW m RENAME TO m2")
    conn.execute("ALTER INDEX im RENAME TO im2")
    conn.execute("ALTER SOURCE s RENAME TO s2")
    conn.execute("ALTER INDEX IF EXISTS nosuch RENAME TO y")
    conn.execute("INSERT INTO t VALUES (2, 3)")
    assert rows(conn, "SELECT * FROM m2 ORDER BY k") == [(1, 2), (2, 3)]
    assert rows(conn, "SELECT * FROM mm ORDER BY k") == [(1, 1), (2, 1)]
    assert rows(conn, "SELECT * FROM m2 WHERE v = 3") == [(2, 3)]
    assert rows(conn, "SHOW INDEXES") == [("im2", "m2", "v")]
    assert rows(conn, "SHOW SOURCES") == [("s2",)]
    with pytest.raises(CatalogError, match="it is a table"):
        conn.execute("ALTER MATERIALIZED VIEW t RENAME TO y")


def test_alter_set_and_drop_default(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    conn.execute("ALTER TABLE t ALTER COLUMN a SET DEFAULT 3")
    conn.execute("INSERT INTO t (id) VALUES (1)")
    conn.execute("ALTER TABLE t ALTER COLUMN a DROP DEFAULT")
    conn.execute("INSERT INTO t (id) VALUES (2)")
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 3), (2, None)]


@pytest.mark.parametrize("stmt, error, match", [
    ("ALTER TABLE t DROP COLUMN id", UnsupportedError, "primary key"),
    ("ALTER TABLE t ADD COLUMN z INT PRIMARY KEY", UnsupportedError, "primary key"),
    ("ALTER TABLE t ALTER COLUMN a TYPE BIGINT", UnsupportedError, "SET DEFAULT"),
    ("ALTER TABLE t ADD COLUMN z INT DEFAULT 'no'", ExecutionError, "invalid input syntax"),
    ("ALTER TABLE m ADD COLUMN z INT", CatalogError, "it is a materialized view"),
    ("ALTER MATERIALIZED VIEW m ADD COLUMN z INT", UnsupportedError, "RENAME TO only"),
    ("ALTER VIEW m RENAME TO n", UnsupportedError, "ALTER VIEW is not supported"),
    ("ALTER TABLE nosuch ADD COLUMN z INT", CatalogError, "does not exist"),
    ("ALTER TABLE t DROP COLUMN nosuch", BindError, "does not exist"),
    ("ALTER TABLE t RENAME COLUMN nosuch TO y", BindError, "does not exist"),
    ("ALTER TABLE t RENAME COLUMN a TO id", CatalogError, "already exists"),
    ("ALTER TABLE t ADD PRIMARY KEY (a)", UnsupportedError, "not supported"),
    ("ALTER TABLE t DROP COLUMN a, DROP COLUMN s, DROP COLUMN id", UnsupportedError, "primary key"),
])
def test_refusals_name_the_reason_and_change_nothing(conn, stmt, error, match):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT, s VARCHAR)")
    conn.execute("INSERT INTO t VALUES (1, 2, 'x')")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT id FROM t")
    with pytest.raises(error, match=match):
        conn.execute(stmt)
    assert rows(conn, "SELECT * FROM t") == [(1, 2, "x")]
    assert [r[0] for r in rows(conn, "DESCRIBE t")] == ["id", "a", "s"]
    conn.execute("ALTER TABLE IF EXISTS nosuch ADD COLUMN z INT")   # IF EXISTS: nothing to do


def test_time_travel_before_a_layout_change_is_refused():
    with sql.connect(":memory:", implicit_flush=True, retention_seconds=3600) as conn:
        _time_travel_before_a_layout_change(conn)


def _time_travel_before_a_layout_change(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    conn.execute("INSERT INTO t VALUES (1, 2)")
    before = conn.db.store.max_committed_epoch
    conn.execute("ALTER TABLE t ADD COLUMN b INT")
    with pytest.raises(ExecutionError, match="columns of 't' changed later"):
        conn.execute(f"SELECT * FROM t FOR SYSTEM_TIME AS OF EPOCH {before}")
    conn.execute("ALTER TABLE t RENAME COLUMN a TO c")   # no layout change: reads after the ADD work
    after = conn.db.store.max_committed_epoch
    assert rows(conn, f"SELECT * FROM t FOR SYSTEM_TIME AS OF EPOCH {after}") == [(1, 2, None)]


def test_a_failed_rewrite_leaves_table_and_catalog_as_they_were(tmp_path, monkeypatch):
    """ADD COLUMN's re-encoding fails half way (after one table's rows are written at the DDL's
    epoch): nothing of it commits -- the rows, the records and the graph are the old ones."""
    import sql.alter as alter

    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
        conn.execute("CREATE INDEX ia ON t (a)")
        conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        real = alter._rewrite_rows
        calls = []

        def failing(*args):
            calls.append(args[1])
            real(*args)
            if len(calls) == 2:   # the table's rows and the index's are written: fail now
                raise OSError("disk full")
        monkeypatch.setattr(alter, "_rewrite_rows", failing)
        with pytest.raises(OSError, match="disk full"):
            conn.execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 7")
        monkeypatch.setattr(alter, "_rewrite_rows", real)
        assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 10), (2, 20)]
        assert rows(conn, "SELECT * FROM t WHERE a = 20") == [(2, 20)]
        conn.execute("INSERT INTO t VALUES (3, 30)")
    with sql.connect(url, implicit_flush=True) as conn:
        assert rows(conn, "SELECT * FROM t ORDER BY id") == [(1, 10), (2, 20), (3, 30)]
        conn.execute("ALTER TABLE t ADD COLUMN b INT DEFAULT 7")
        assert rows(conn, "SELECT * FROM t WHERE a = 30") == [(3, 30, 7)]


def test_read_only_connection_refuses_alter(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (a INT)")
        with sql.connect(url, read_only=True) as reader:
            with pytest.raises(SqlError, match="read-only"):
                reader.execute("ALTER TABLE t ADD COLUMN b INT")


# --- model test -------------------------------------------------------------------------------------

NAMES = ["c1", "c2", "c3", "c4"]
op = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 6), st.integers(-5, 5)),
    st.tuples(st.just("update"), st.integers(0, 6), st.integers(-5, 5)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("add"), st.sampled_from(NAMES), st.sampled_from(["INT", "VARCHAR"]),
              st.one_of(st.none(), st.integers(-3, 3))),
    st.tuples(st.just("drop"), st.integers(0, 3)),
    st.tuples(st.just("rename"), st.integers(0, 3), st.sampled_from(NAMES)),
    st.tuples(st.just("rename_table"),),
    st.tuples(st.just("reopen"),),
)


@settings(max_examples=int(os.environ.get("ALTER_MODEL_EXAMPLES", "8")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=10))
def test_alter_interleaved_with_dml_matches_a_model(tmp_path_factory, ops):
    url = str(tmp_path_factory.mktemp("alter") / "db")
    table = ["t0"]
    cols = [("k", "INT", None), ("v", "INT", None)]   # (name, type, default)
    model: dict = {}                                   # k -> {column: value}
    conn = sql.connect(url, implicit_flush=True)
    try:
        conn.execute("CREATE TABLE t0 (k INT PRIMARY KEY, v INT)")
        conn.execute("CREATE TABLE o (k INT PRIMARY KEY, w INT)")
        conn.execute("INSERT INTO o VALUES " + ", ".join(f"({k}, {k * 10})" for k in range(0, 7, 2)))
        conn.execute("CREATE MATERIALIZED VIEW agg AS SELECT count(*) AS n, sum(k) AS s FROM t0")
        # a join keeps t0's whole rows in its state: ALTER reads t0 for it in its former layout
        conn.execute("CREATE MATERIALIZED VIEW jm AS SELECT t0.k, o.w FROM t0 JOIN o ON t0.k = o.k")
        for o in ops:
            t = table[0]
            kind = o[0]
            if kind == "insert":
                row = {c: (d if d is None or ty == "INT" else str(d)) for c, ty, d in cols}
                row.update(k=o[1], v=o[2]) if "v" in row else row.update(k=o[1])
                conn.execute(f"INSERT INTO {t} (k{', v' if 'v' in row else ''}) VALUES ({o[1]}"
                             f"{', ' + str(o[2]) if 'v' in row else ''})")
                model[o[1]] = row   # overwrite on a repeated key (ON CONFLICT default)
            elif kind == "update" and len(cols) > 1:
                name, ty, _ = cols[-1]
                value = o[2] if ty == "INT" else str(o[2])
                conn.execute(f"UPDATE {t} SET {name} = {value if ty == 'INT' else repr(value)} WHERE k = {o[1]}")
                if o[1] in model:
                    model[o[1]][name] = value
            elif kind == "delete":
                conn.execute(f"DELETE FROM {t} WHERE k = {o[1]}")
                model.pop(o[1], None)
            elif kind == "add" and o[1] not in [c for c, _, _ in cols]:
                default = None if o[3] is None else (o[3] if o[2] == "INT" else str(o[3]))
                text = "" if default is None else f" DEFAULT {default if o[2] == 'INT' else repr(default)}"
                conn.execute(f"ALTER TABLE {t} ADD COLUMN {o[1]} {o[2]}{text}")
                cols.append((o[1], o[2], default))
                for row in model.values():
                    row[o[1]] = default
            elif kind == "drop" and 1 <= o[1] < len(cols):
                name = cols.pop(o[1])[0]
                conn.execute(f"ALTER TABLE {t} DROP COLUMN {name}")
                for row in model.values():
                    row.pop(name)
            elif kind == "rename" and 1 <= o[1] < len(cols) and o[2] not in [c for c, _, _ in cols]:
                old = cols[o[1]][0]
                conn.execute(f"ALTER TABLE {t} RENAME COLUMN {old} TO {o[2]}")
                cols[o[1]] = (o[2],) + cols[o[1]][1:]
                for row in model.values():
                    row[o[2]] = row.pop(old)
            elif kind == "rename_table":
                table[0] = "t1" if t == "t0" else "t0"
                conn.execute(f"ALTER TABLE {t} RENAME TO {table[0]}")
            elif kind == "reopen":
                conn.close()
                conn = sql.connect(url, implicit_flush=True)
            names = [c for c, _, _ in cols]
            expect = [tuple(model[k][c] for c in names) for k in sorted(model)]
            assert rows(conn, f"SELECT {', '.join(names)} FROM {table[0]} ORDER BY k") == expect, o
            assert rows(conn, "SELECT n, s FROM agg") == [(len(model), sum(model) if model else None)]
            assert rows(conn, "SELECT * FROM jm ORDER BY k") == [(k, k * 10) for k in sorted(model) if k % 2 == 0]
    finally:
        conn.close()
