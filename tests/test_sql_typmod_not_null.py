"""NUMERIC(p, s) typmods and NOT NULL, enforced on every write path as PostgreSQL enforces them
(issue 29 item 4; sql/column_checks.py, stream/numeric_typmod.py).

Each write path (INSERT VALUES / SELECT, executemany, UPDATE, DEFAULT, COPY csv/json/parquet,
insert_arrow, ALTER TABLE ADD COLUMN, CREATE TABLE AS) rounds to the scale and refuses an
overflow or a NULL with an ExecutionError, writing nothing of the statement; casts to
``numeric(p, s)`` round in batch queries and MVs. A script runs on the real PostgreSQL server too
(the ``pg`` fixture) and must give the same rows and refuse the same statements; a hypothesis test
checks the rounding against Python's decimal model; the typmod survives a reopen.
"""

import decimal
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from hummock.errors import CorruptionError
from sql.catalog import Relation
from sql.errors import ExecutionError
from test_pgwire import server  # noqa: F401  (the pgwire server fixture)
from test_sql_pg_functions import pg  # noqa: F401,F811  (the fixture)

D = decimal.Decimal
OVERFLOW = "numeric field overflow"
NOT_NULL = 'null value in column "a" of relation "t" violates not-null constraint'


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT, a NUMERIC(5,2) NOT NULL, b DECIMAL(4), c NUMERIC)")
        yield c


def rows(c, table="t"):
    return [tuple(map(_text, r)) for r in c.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()]


def _text(v):
    return str(v) if isinstance(v, D) else v


def refused(c, text, message, params=None, table="t"):
    """``text`` raises an ExecutionError saying ``message`` and leaves ``table`` as it was."""
    before = rows(c, table)
    with pytest.raises(ExecutionError, match=message):
        c.execute(text, params) if params is not None else c.execute(text)
    assert rows(c, table) == before


# --- the write paths ------------------------------------------------------------------------------

def test_insert_values_rounds_half_away_from_zero_and_pads_the_scale(conn):
    conn.execute("INSERT INTO t VALUES (1, 1.005, 1.5, 1), (2, -1.005, -2.5, 2), (3, 5, 7, 3), (4, 'NaN', 0, 4),"
                 " (5, -0.001, 0.4, 5), (6, 999.994, 9999.4, 6)")
    assert rows(conn) == [(1, "1.01", "2", "1"), (2, "-1.01", "-3", "2"), (3, "5.00", "7", "3"), (4, "NaN", "0", "4"),
                          (5, "0.00", "0", "5"), (6, "999.99", "9999", "6")]


def test_overflow_infinity_and_null_are_refused_and_nothing_is_written(conn):
    conn.execute("INSERT INTO t VALUES (1, 1, 1, 1)")
    refused(conn, "INSERT INTO t VALUES (2, 2, 2, 2), (3, 999.995, 3, 3)",
            f"{OVERFLOW}: a field with precision 5, scale 2 must round to an absolute value less than 10\\^3")
    refused(conn, "INSERT INTO t VALUES (2, 2, 99999.5, 2)", "precision 4, scale 0 must round to .* 10\\^4")
    refused(conn, "INSERT INTO t VALUES (2, 'Infinity', 2, 2)", "precision 5, scale 2 cannot hold an infinite value")
    refused(conn, "INSERT INTO t VALUES (2, 2, 2, 2), (3, NULL, 3, 3)", NOT_NULL)
    refused(conn, "INSERT INTO t (k, b) VALUES (2, 2)", NOT_NULL)
    refused(conn, "INSERT INTO t (k, a) SELECT k + 1, CASE WHEN k = 1 THEN NULL END FROM t", NOT_NULL)
    conn.execute("INSERT INTO t VALUES (2, 2, 2, 'Infinity')")   # a column without typmod holds it
    assert rows(conn)[-1] == (2, "2.00", "2", "Infinity")


def test_insert_select_both_paths(conn):
    conn.execute("CREATE TABLE src (k INT, a NUMERIC, b NUMERIC, c NUMERIC)")
    conn.execute("INSERT INTO src VALUES (1, 1.234, 2.5, 3), (2, 2.345, 3.5, 4)")
    conn.execute("INSERT INTO t SELECT * FROM src")   # columns as they are: the Arrow path (sql/bulk.py)
    conn.execute("INSERT INTO t SELECT k + 10, a * 2, k, NULL FROM src")   # coerced row by row
    assert rows(conn) == [(1, "1.23", "3", "3"), (2, "2.35", "4", "4"), (11, "2.47", "1", None),
                          (12, "4.69", "2", None)]
    conn.execute("INSERT INTO src VALUES (3, 1000, 0, 0)")
    refused(conn, "INSERT INTO t SELECT * FROM src", OVERFLOW)
    conn.execute("INSERT INTO src VALUES (4, NULL, 0, 0)")
    refused(conn, "INSERT INTO t SELECT * FROM src WHERE k <> 3", NOT_NULL)


def test_executemany_and_parameters(conn):
    conn.executemany("INSERT INTO t VALUES ($1, $2, $3, $4)", [(1, D("1.235"), 2.5, 1), (2, 3, D("0.5"), None)])
    conn.execute("INSERT INTO t VALUES (%s, %s, %s, %s)", (3, "7.777", 1, 1))
    assert rows(conn) == [(1, "1.24", "3", "1"), (2, "3.00", "1", None), (3, "7.78", "1", "1")]
    refused(conn, "INSERT INTO t VALUES ($1, $2, 1, 1)", OVERFLOW, (4, D("1E+3")))
    with pytest.raises(ExecutionError, match=NOT_NULL):
        conn.executemany("INSERT INTO t VALUES ($1, $2, $3, $4)", [(5, 1, 1, 1), (6, None, 1, 1)])
    with pytest.raises(ExecutionError, match='null value in column "n"'):   # the columnar fast path
        conn.execute("CREATE TABLE ints (k INT, n INT NOT NULL)")
        conn.executemany("INSERT INTO ints VALUES ($1, $2)", [(1, 1), (2, None)])
    assert len(rows(conn)) == 3 and rows(conn, "ints") == []


def test_update_set(conn):
    conn.execute("INSERT INTO t VALUES (1, 1, 1, 1), (2, 2, 2, 2)")
    conn.execute("UPDATE t SET a = a / 3, b = b * 1.5")
    assert rows(conn) == [(1, "0.33", "2", "1"), (2, "0.67", "3", "2")]
    refused(conn, "UPDATE t SET a = a * 10000 WHERE k = 2", OVERFLOW)
    refused(conn, "UPDATE t SET a = NULL WHERE k = 2", NOT_NULL)
    refused(conn, "UPDATE t SET a = CASE WHEN k = 2 THEN NULL ELSE a END", NOT_NULL)
    conn.execute("DELETE FROM t WHERE k = 1")
    assert rows(conn) == [(2, "0.67", "3", "2")]


def test_defaults_round_and_a_default_that_overflows_fails_the_insert():
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT, a NUMERIC(5,2) NOT NULL DEFAULT 1.005, o NUMERIC(3,1) DEFAULT 100)")
        c.execute("INSERT INTO t (k, o) VALUES (1, 1.25)")
        assert rows(c) == [(1, "1.01", "1.3")]
        refused(c, "INSERT INTO t (k) VALUES (2)", "precision 3, scale 1 must round to an absolute value less than "
                                                  "10\\^2")
        refused(c, "INSERT INTO t VALUES (2, DEFAULT, DEFAULT)", OVERFLOW)
        refused(c, "UPDATE t SET o = DEFAULT", OVERFLOW)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_copy_from(conn, tmp_path, fmt):
    def write(name, data):
        path = tmp_path / f"{name}.{fmt}"
        if fmt == "csv":
            path.write_text("".join(",".join("" if v is None else str(v) for v in r) + "\n" for r in data))
        elif fmt == "json":
            path.write_text("".join(json.dumps(dict(zip("kabc", r))) + "\n" for r in data))
        else:
            pq.write_table(pa.table({n: pa.array([None if r[i] is None else str(r[i]) for r in data], pa.string())
                                     for i, n in enumerate("kabc")}), path)
        return path

    good = write("good", [(1, "1.005", "2.5", "1"), (2, "-3.14159", "0", None)])
    assert conn.execute(f"COPY t FROM '{good}'").rowcount == 2
    assert rows(conn) == [(1, "1.01", "3", "1"), (2, "-3.14", "0", None)]
    refused(conn, f"COPY t FROM '{write('over', [(3, '1', '1', '1'), (4, '1000', '1', '1')])}'", OVERFLOW)
    refused(conn, f"COPY t FROM '{write('null', [(3, '1', '1', '1'), (4, None, '1', '1')])}'", NOT_NULL)
    conn.execute("CREATE MATERIALIZED VIEW reader AS SELECT * FROM t")   # the dataflow path of COPY
    refused(conn, f"COPY t FROM '{write('over2', [(3, '1', '1', '1'), (4, '1000', '1', '1')])}'", OVERFLOW)
    conn.execute(f"COPY t FROM '{write('more', [(5, '0.125', '1', '1')])}'")
    assert rows(conn, "reader")[-1] == (5, "0.13", "1", "1")


def test_insert_arrow(conn):
    conn.insert_arrow("t", pa.table({"k": [1, 2], "a": ["1.005", "2"], "b": pa.array([D("1.5"), None],
                                                                                       pa.decimal128(5, 1))}))
    assert rows(conn) == [(1, "1.01", "2", None), (2, "2.00", None, None)]
    for data, message in [(pa.table({"k": [3, 4], "a": ["1", None]}), NOT_NULL),
                          (pa.table({"k": [3], "b": [1]}), NOT_NULL),
                          (pa.table({"k": [3, 4], "a": ["1", "-1000"]}), OVERFLOW)]:
        with pytest.raises(ExecutionError, match=message):
            conn.insert_arrow("t", data)
    assert len(rows(conn)) == 2


def test_alter_table_add_column():
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT)")
        c.execute("ALTER TABLE t ADD COLUMN e INT NOT NULL")   # no rows: nothing is NULL
        c.execute("ALTER TABLE t DROP COLUMN e")
        c.execute("INSERT INTO t VALUES (1), (2)")
        with pytest.raises(ExecutionError, match='column "n" of relation "t" contains null values'):
            c.execute("ALTER TABLE t ADD COLUMN n INT NOT NULL")
        with pytest.raises(ExecutionError, match=OVERFLOW):
            c.execute("ALTER TABLE t ADD COLUMN a NUMERIC(5,2) DEFAULT 1000")
        c.execute("ALTER TABLE t ADD COLUMN a NUMERIC(5,2) NOT NULL DEFAULT 1.234")
        c.execute("ALTER TABLE t ADD COLUMN x INT")
        assert rows(c) == [(1, "1.23", None), (2, "1.23", None)]
        refused(c, "UPDATE t SET a = NULL", NOT_NULL)
        refused(c, "INSERT INTO t (k, a) VALUES (3, 12345)", OVERFLOW)
        c.execute("ALTER TABLE t RENAME COLUMN a TO z")   # the constraints follow the column
        with pytest.raises(ExecutionError, match='null value in column "z"'):
            c.execute("UPDATE t SET z = NULL")
        with pytest.raises(ExecutionError, match='column "x" of relation "t" contains null values'):
            c.execute("ALTER TABLE t ALTER COLUMN x SET NOT NULL")
        c.execute("ALTER TABLE t ALTER COLUMN z DROP NOT NULL")
        c.execute("UPDATE t SET z = NULL WHERE k = 2")
        with pytest.raises(ExecutionError, match='column "z" of relation "t" contains null values'):
            c.execute("ALTER TABLE t ALTER COLUMN z SET NOT NULL")
        c.execute("DELETE FROM t WHERE k = 2")
        c.execute("ALTER TABLE t ALTER COLUMN z SET NOT NULL")
        refused(c, "INSERT INTO t (k, z) VALUES (5, NULL)", 'null value in column "z"')
        c.execute("ALTER TABLE t DROP COLUMN k")
        assert c.execute("DESCRIBE t").fetchall() == [("z", "numeric(5,2)", False, "1.234"),
                                                      ("x", "integer", False, None)]
        assert c.db.catalog.get("t").not_null == [True, False]


def test_create_table_as_keeps_cast_typmods_and_casts_round_in_batch_and_mvs(conn):
    conn.execute("INSERT INTO t VALUES (1, 1.25, 1, 1.25), (2, -1.25, 2, 1000), (3, 'NaN', 3, 'NaN')")
    conn.execute("CREATE TABLE c AS SELECT k, c::numeric(3,1) AS r FROM t WHERE k <> 2")
    assert rows(conn, "c") == [(1, "1.3"), (3, "NaN")]
    assert conn.execute("DESCRIBE c").fetchall()[1][:2] == ("r", "numeric(3,1)")
    refused(conn, "INSERT INTO c VALUES (4, 100)", OVERFLOW, table="c")
    assert conn.execute("SELECT 12.345::numeric(4,2), CAST('0.5' AS DECIMAL(1)), '-0.004'::numeric(3,2)"
                        ).fetchall() == [(D("12.35"), D("1"), D("0.00"))]
    with pytest.raises(ExecutionError, match=OVERFLOW):
        conn.execute("SELECT k, c::numeric(3,1) FROM t").fetchall()
    with pytest.raises(ExecutionError, match="infinite"):
        conn.execute("SELECT 'Infinity'::numeric(3,1)").fetchall()
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, c::numeric(3,1) AS r FROM t")
    # in a stream a value that does not fit is NULL and counted, as every data error there
    assert rows(conn, "m") == [(1, "1.3"), (2, None), (3, "NaN")]
    assert "NUMERIC(3, 1)" in "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT c::numeric(3,1) FROM t"))


def test_typmod_validity_and_reopen(tmp_path):
    path = str(tmp_path / "db")
    with sql.connect(path, implicit_flush=True) as c:
        for bad in ["NUMERIC(0)", "NUMERIC(1001, 2)", "NUMERIC(5, 1001)"]:
            with pytest.raises(ExecutionError, match="must be between"):
                c.execute(f"CREATE TABLE bad (a {bad})")
        with pytest.raises(sql.BindError, match="conflicting NULL/NOT NULL declarations"):
            c.execute("CREATE TABLE bad (a INT NOT NULL NULL)")
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a NUMERIC(5,2) NOT NULL, b NUMERIC(4), c NUMERIC NULL)")
        c.execute("INSERT INTO t VALUES (1, 1.005, 1.5, 1)")
    with sql.connect(path, implicit_flush=True) as c:
        assert c.execute("DESCRIBE t").fetchall() == [
            ("k", "integer", True, None), ("a", "numeric(5,2)", False, None), ("b", "numeric(4,0)", False, None),
            ("c", "numeric", False, None)]
        refused(c, "INSERT INTO t VALUES (2, NULL, 1, 1)", NOT_NULL)
        c.execute("INSERT INTO t VALUES (2, 2.499, 2.5, NULL)")
        assert rows(c) == [(1, "1.01", "2", "1"), (2, "2.50", "3", None)]
        rel = c.db.catalog.get("t")
        assert rel.typmods == [None, (5, 2), (4, 0), None] and rel.not_null == [False, True, False, False]


def test_catalog_records_old_and_malformed():
    from relational.catalog import TableDesc
    from relational.types import DataType

    cols = (("k", DataType.INT), ("a", DataType.DECIMAL))
    old = Relation.from_desc(TableDesc(5, "t", cols, (0,), properties={"sql": {"kind": "table", "n_visible": 2}}))
    assert old.typmods is None and old.not_null is None and not old.checked
    new = Relation("table", old.desc, 2, typmods=[None, (5, 2)], not_null=[False, True])
    assert Relation.from_desc(new.to_desc()).typmods == [None, (5, 2)]
    for field, value in [("typmods", [None, [0, 2]]), ("typmods", [[5, 2], None]), ("typmods", [None]),
                         ("not_null", [False, 1]), ("typmods", [None, [5, True]])]:
        desc = new.to_desc()
        desc.properties["sql"][field] = value
        with pytest.raises(CorruptionError, match=field):
            Relation.from_desc(desc)


# --- PostgreSQL: the same script, the same rows and refusals ----------------------------------------

SCRIPT = [
    "CREATE TABLE t (k INT, a NUMERIC(5,2) NOT NULL, b DECIMAL(4), c NUMERIC(3,3), d NUMERIC(1) DEFAULT 9.5)",
    "INSERT INTO t VALUES (1, 1.005, 1.5, 0.0005, 0), (2, -1.005, -2.5, -0.9994, 1)",
    "INSERT INTO t VALUES (3, 999.995, 1, 0, 0)",
    "INSERT INTO t VALUES (3, 'NaN', 'NaN', 'NaN', 'NaN')",
    "INSERT INTO t VALUES (4, 'Infinity', 1, 0, 0)",
    "INSERT INTO t VALUES (4, 1, 1, 0.9995, 0)",
    "INSERT INTO t VALUES (4, 1, 1, 0.9994, 0), (5, NULL, 1, 0, 0)",
    "INSERT INTO t (k, a) VALUES (6, 0.125)",
    "INSERT INTO t (k, a, d) VALUES (7, -0.125, -9.4)",
    "INSERT INTO t (k, b) VALUES (8, 1)",
    "INSERT INTO t SELECT k + 10, a * 3.3333, b * 2.5, c, d FROM t WHERE k < 3",
    "UPDATE t SET a = a * 100 WHERE k = 11",
    "UPDATE t SET a = a / 7, b = b * 1.49 WHERE k <= 2",
    "UPDATE t SET a = NULL WHERE k = 1",
    "ALTER TABLE t ADD COLUMN e NUMERIC(6,3) DEFAULT 3.14159",
    "ALTER TABLE t ADD COLUMN f INT NOT NULL",
    "ALTER TABLE t ADD COLUMN f NUMERIC(2,1) DEFAULT 10",
    "ALTER TABLE t ADD COLUMN g NUMERIC(4,1) NOT NULL DEFAULT -12.25",
    "INSERT INTO t (k, a, g) VALUES (20, 5, 999.95)",
    "INSERT INTO t (k, a, g) VALUES (20, 5, 999.94)",
    "ALTER TABLE t ALTER COLUMN b SET NOT NULL",
    "ALTER TABLE t ALTER COLUMN k SET NOT NULL",
    "INSERT INTO t (k, a, g) VALUES (NULL, 1, 1)",
    "ALTER TABLE t ALTER COLUMN k DROP NOT NULL",
    "INSERT INTO t (k, a, g) VALUES (NULL, 1, 1)",
    "CREATE TABLE u AS SELECT k, (a * 1.5)::numeric(6,1) AS x FROM t",
    "INSERT INTO u VALUES (30, 12345.67)",
    "INSERT INTO u VALUES (30, 123456.7)",
]
QUERIES = ["SELECT * FROM t ORDER BY k", "SELECT * FROM u ORDER BY k",
           "SELECT k, a::numeric(4,1), c::numeric(4,4), b::numeric(2,1) FROM t WHERE k < 3 ORDER BY k",
           "SELECT k, (a * 1000)::numeric(6,2) FROM t ORDER BY k",
           "SELECT '0.0049'::numeric(3,2), 1e-20::numeric(3,2), 0.5::numeric(1,0), (-0.5)::numeric(1,0)"]


def _pg(pg, text):
    import psycopg
    try:
        cur = pg.execute(text)
        return "ok", cur.fetchall() if cur.description else []
    except psycopg.Error as exc:   # 22: data exception, 23: integrity (NOT NULL)
        return ("data" if (exc.sqlstate or "")[:2] in ("22", "23") else "refused"), f"{exc.sqlstate}: {exc}"


def _ours(c, text):
    try:
        cur = c.execute(text)
        return "ok", cur.fetchall() if cur.description else []
    except ExecutionError as exc:
        return "data", str(exc)
    except sql.SqlError as exc:
        return "refused", f"{type(exc).__name__}: {exc}"


def _outcome(result):
    kind, value = result
    return (kind, [tuple(str(v) if isinstance(v, D) else v for v in r) for r in value]) if kind == "ok" else kind


def test_script_agrees_with_postgres(pg):
    pg.execute("DROP TABLE IF EXISTS t, u")
    with sql.connect(":memory:", implicit_flush=True) as c:
        for text in SCRIPT + QUERIES:
            theirs, ours = _pg(pg, text), _ours(c, text)
            assert _outcome(ours) == _outcome(theirs), f"{text}\n  postgres: {theirs}\n  hummock: {ours}"
            if theirs[0] == "data":   # Postgres' message and ours mean the same
                assert ("overflow" in theirs[1]) == ("overflow" in ours[1]), (text, theirs, ours)
                assert ("null value" in theirs[1]) == ("null value" in ours[1]), (text, theirs, ours)
    pg.execute("DROP TABLE IF EXISTS t, u")


# --- the rounding against Python's decimal model --------------------------------------------------

def model(value: D, precision: int, scale: int):
    """Postgres' apply_typmod in Python decimals: the rounded value, or None for an overflow."""
    if value.is_nan():
        return D("NaN")   # Postgres has one NaN
    if value.is_infinite():
        return None
    with decimal.localcontext() as ctx:
        ctx.prec = 2000
        out = value.quantize(D(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
    if abs(out) >= D(10) ** (precision - scale):
        return None
    return abs(out) if out == 0 else out


_DECIMALS = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True).filter(lambda d: not d.is_snan() and
                                                            (not d.is_finite() or abs(d.adjusted()) < 40)),
    st.builds(lambda n, e: D(n).scaleb(-e), st.integers(-10 ** 8, 10 ** 8), st.integers(0, 8)))   # near the edges


@pytest.fixture(scope="module")
def shared():
    with sql.connect(":memory:") as c:
        yield c


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(values=st.lists(_DECIMALS, min_size=1, max_size=8), precision=st.integers(1, 14), scale=st.integers(0, 10))
def test_rounding_matches_the_decimal_model(shared, values, precision, scale):
    from stream.numeric_typmod import apply_column

    scale = min(scale, precision + 2)   # scale > precision is allowed (numeric(2,3)); keep it near
    expected = [model(v, precision, scale) for v in values]
    for v, want in zip(values, expected):   # the cast of a parameter (the binder's Cast with a typmod)
        text = f"SELECT $1::numeric({precision}, {scale})"
        if want is None:
            with pytest.raises(ExecutionError, match=OVERFLOW):
                shared.execute(text, (v,)).fetchall()
        else:
            assert str(shared.execute(text, (v,)).fetchall()[0][0]) == str(want), (v, precision, scale)
    # the column path (vectorized and row by row, mixed) agrees value by value
    out, _, failed = apply_column(pa.array([str(v) for v in values]), precision, scale)
    assert failed == sum(e is None for e in expected)
    assert out.to_pylist() == [None if e is None else str(e) for e in expected]   # the stored text itself


# --- where types are shown: psql's \d, pg_attribute, information_schema (pgwire) ----------------------

@pytest.mark.server_integration   # the pgwire server and psql: native only (pyproject markers)
def test_pgwire_shows_typmods_and_not_null(server):   # noqa: F811  (the fixture of test_pgwire)
    from test_pgwire import connect, run_psql

    with connect(server) as c:
        c.execute("CREATE TABLE typmods (k INT PRIMARY KEY, a NUMERIC(5,2) NOT NULL, b NUMERIC)")
        attrs = {r[0]: r[1:] for r in c.execute("SELECT attname, atttypmod, attnotnull FROM pg_attribute")}
        assert attrs["a"] == (str((5 << 16 | 2) + 4), "t") and attrs["b"] == ("-1", "f")   # Postgres' typmod
        columns = c.execute("SELECT column_name, is_nullable FROM information_schema.columns "
                            "WHERE table_name = 'typmods'").fetchall()
        assert columns == [("k", "NO"), ("a", "NO"), ("b", "YES")]
    out = run_psql(server, "\\d typmods\n").stdout
    assert " a      | numeric(5,2) |           | not null |" in out and " b      | numeric      |           |" in out


def test_create_table_as_keeps_the_typmods_of_plain_columns_of_one_table():
    """As Postgres: ``CREATE TABLE c AS SELECT * FROM t`` (and named, aliased or ``t.*``
    columns) keeps ``numeric(5,2)`` / ``varchar(3)``, so later writes into ``c`` are rounded and
    checked; an expression over a column does not (``n + 1`` is plain numeric)."""
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, n NUMERIC(5,2), v VARCHAR(3))")
        c.execute("INSERT INTO t VALUES (1, 1.234, 'ab')")
        c.execute("FLUSH")
        c.execute("CREATE TABLE c2 AS SELECT * FROM t")
        c.execute("CREATE TABLE c3 AS SELECT x.v, x.n + 1 AS n1 FROM t AS x")
        assert [r[1] for r in c.execute("DESCRIBE c2").fetchall()] == ["integer", "numeric(5,2)", "character varying(3)"]
        assert [r[1] for r in c.execute("DESCRIBE c3").fetchall()] == ["character varying(3)", "numeric"]
        with pytest.raises(ExecutionError, match="numeric field overflow"):
            c.execute("INSERT INTO c2 VALUES (2, 1234.5, 'x')")
