"""COPY (issue 27 item 4; sql/copy.py): files into tables and tables or queries into files.

Round trips of every SQL type through every format, into a table nothing reads (the fast path:
SSTs built directly, ``Database.bulk_load``) and into a table an MV reads (the dataflow path,
the MV must see the rows); Postgres' CSV rules (NULL is the empty unquoted field, ``""`` an
empty string, quoted delimiters, quotes and newlines; HEADER) checked against the real
Postgres server of the test session; typed conversion errors naming the line and column, and
nothing written then; column lists, options, conflicts and hidden row ids.
"""

import datetime
import decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from relational.types import Interval
from sql.errors import BindError, CatalogError, ExecutionError, SqlSyntaxError, UnsupportedError

COLUMNS = [("b", "BOOLEAN"), ("i2", "SMALLINT"), ("i4", "INT"), ("i8", "BIGINT"), ("n", "NUMERIC"), ("r", "REAL"),
           ("d", "DOUBLE PRECISION"), ("s", "VARCHAR"), ("by", "BYTEA"), ("dt", "DATE"), ("tm", "TIME"),
           ("ts", "TIMESTAMP"), ("tz", "TIMESTAMPTZ"), ("iv", "INTERVAL")]
UTC = datetime.timezone.utc
ROWS = [
    (1, True, -32768, -2147483648, -9223372036854775808, decimal.Decimal("-123456789012345678901234.5678"), 1.5,
     -0.1, 'a,b "q" \t tab\nnewline \\ back', b"\x00\x01\xff,\"", datetime.date(2024, 2, 29),
     datetime.time(23, 59, 59, 999999), datetime.datetime(1999, 12, 31, 23, 59, 59, 500000),
     datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), Interval(14, 3, 4_000_500)),
    (2, False, 32767, 2147483647, 9223372036854775807, decimal.Decimal("0.000001"), float("inf"), float("nan"),
     "", b"", datetime.date(1, 1, 1), datetime.time(0, 0), datetime.datetime(2020, 1, 2),
     datetime.datetime(2000, 6, 1, 12, 0, 0, 1, tzinfo=UTC), Interval(-1, -2, -3)),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    (4, True, 0, 0, 0, decimal.Decimal("NaN"), float("-inf"), 1e300, "NULL", b"\\N", datetime.date(9999, 12, 31),
     datetime.time(12, 30, 0, 500), datetime.datetime(2020, 2, 29, 0, 0, 0, 1),
     datetime.datetime(1970, 1, 1, tzinfo=UTC), Interval(0, 0, 0)),
    (5, False, 7, 7, 7, decimal.Decimal("7"), 3.4028234663852886e38, 5e-324, " padded ", b"x",
     datetime.date(2000, 1, 1), datetime.time(1, 2, 3), datetime.datetime(2000, 1, 1, 0, 0, 0, 10),
     datetime.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC), Interval(1, 0, 0)),
]
DDL = ", ".join(f"{n} {t}" for n, t in COLUMNS)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, decimal.Decimal) and isinstance(b, decimal.Decimal) and a.is_nan() and b.is_nan():
        return True
    return a == b


def _assert_rows(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert all(_same(x, y) for x, y in zip(g, w)), [(x, y) for x, y in zip(g, w) if not _same(x, y)]


@pytest.fixture
def conn(tmp_path):
    with sql.connect(str(tmp_path / "db"), implicit_flush=True) as c:
        yield c


def _source(conn):
    conn.execute(f"CREATE TABLE src (id INT PRIMARY KEY, {DDL})")
    conn.executemany(f"INSERT INTO src VALUES ({', '.join(['%s'] * (len(COLUMNS) + 1))})", ROWS)
    return conn.execute("SELECT * FROM src ORDER BY id").fetchall()


@pytest.mark.parametrize("fmt", ["csv", "text", "parquet", "json"])
@pytest.mark.parametrize("path_kind", ["fast", "dataflow"])
def test_round_trip_of_every_type(conn, tmp_path, fmt, path_kind):
    want = _source(conn)
    _assert_rows(want, ROWS)   # the values went in as given
    target = tmp_path / f"out.{fmt}"
    assert conn.execute(f"COPY src TO '{target}' WITH (format {fmt})").rowcount == len(ROWS)
    conn.execute(f"CREATE TABLE dst (id INT PRIMARY KEY, {DDL})")
    if path_kind == "dataflow":
        conn.execute("CREATE MATERIALIZED VIEW dst_count AS SELECT count(*) AS n, count(s) AS s FROM dst")
    assert conn.execute(f"COPY dst FROM '{target}' WITH (format {fmt})").rowcount == len(ROWS)
    _assert_rows(conn.execute("SELECT * FROM dst ORDER BY id").fetchall(), want)
    if path_kind == "dataflow":
        assert conn.execute("SELECT n, s FROM dst_count").fetchall() == [(len(ROWS), len(ROWS) - 1)]
    # and out of a query, with a header, back in by its header
    query = tmp_path / f"q.{fmt}"
    header = ", header true" if fmt in ("csv", "text") else ""
    conn.execute(f"COPY (SELECT * FROM src WHERE id > 1 ORDER BY id) TO '{query}' (format {fmt}{header})")
    conn.execute("DELETE FROM dst")
    conn.execute(f"COPY dst FROM '{query}' (format {fmt}{header})")
    _assert_rows(conn.execute("SELECT * FROM dst ORDER BY id").fetchall(), want[1:])


def test_csv_follows_postgres_rules(conn, tmp_path):
    path = tmp_path / "in.csv"
    path.write_text('id,s,n\n1,"a,b",10\n2,"",\n3,,30\n4,"say ""hi""\nthere",40\n')
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR, n INT)")
    assert conn.execute(f"COPY t FROM '{path}' WITH (format csv, header true)").rowcount == 4
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [
        (1, "a,b", 10), (2, "", None), (3, None, 30), (4, 'say "hi"\nthere', 40)]
    out = tmp_path / "out.csv"
    conn.execute(f"COPY t TO '{out}' (format csv, header true)")
    lines = out.read_text()
    assert lines.startswith('"id","s","n"\n') and '\n2,"",\n' in lines and "\n3,,30\n" in lines


def test_options_delimiter_null_and_the_older_syntax(conn, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("1|x|-\n2|-|5\n")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR, n INT)")
    conn.execute(f"COPY t FROM '{path}' CSV DELIMITER '|' NULL '-'")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [(1, "x", None), (2, None, 5)]


def test_column_list_leaves_the_other_columns_null(conn, tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("7,seven\n8,eight\n")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR)")
    conn.execute(f"COPY t (id, s) FROM '{path}' (format csv)")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [(7, None, "seven"), (8, None, "eight")]
    out = tmp_path / "out.csv"
    conn.execute(f"COPY t (s, id) TO '{out}' (format csv)")
    assert out.read_text() == '"seven",7\n"eight",8\n'


@pytest.mark.parametrize("text, message", [
    ("1,2\n2,x\n", r"line 2, column n: invalid input for type integer: 'x'"),
    ("1,2\n2,3\n3,99999999999\n", r"line 3, column n: invalid input for type integer"),
    ("1,2\n2,3,4\n", r"wrong number of columns"),
    ("1,2\n,3\n", r'row 2: null value in column "id" of relation "t" violates not-null constraint'),
])
def test_conversion_errors_name_line_and_column_and_write_nothing(conn, tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT)")
    with pytest.raises(ExecutionError, match=message):
        conn.execute(f"COPY t FROM '{path}' (format csv)")
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_statement_errors(conn, tmp_path):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT id FROM t")
    with pytest.raises(ExecutionError, match="no such file"):
        conn.execute(f"COPY t FROM '{tmp_path / 'missing.csv'}'")
    with pytest.raises(CatalogError, match="'nope' does not exist"):
        conn.execute("COPY nope FROM '/x.csv'")
    with pytest.raises(BindError, match="materialized view"):
        conn.execute("COPY m FROM '/x.csv'")
    with pytest.raises(BindError, match="column 'zz'"):
        conn.execute("COPY t (zz) FROM '/x.csv'")
    with pytest.raises(BindError, match="unknown option"):
        conn.execute("COPY t FROM '/x.csv' (format csv, colour 'red')")
    with pytest.raises(UnsupportedError, match="format 'xml'"):
        conn.execute("COPY t TO '/tmp/x.xml' (format xml)")
    with pytest.raises(UnsupportedError, match="STDIN"):
        conn.execute("COPY t FROM STDIN")
    with pytest.raises(SqlSyntaxError, match="COPY"):
        conn.execute("COPY t INTO '/x.csv'")
    with pytest.raises(ExecutionError, match="no directory"):
        conn.execute(f"COPY t TO '{tmp_path / 'no' / 'dir.csv'}'")


def test_fast_path_overwrites_and_keeps_the_last_of_a_repeated_key(conn, tmp_path):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT)")
    conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
    path = tmp_path / "in.csv"
    path.write_text("2,21\n3,30\n3,31\n")
    conn.execute(f"COPY t FROM '{path}' (format csv)")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [(1, 10), (2, 21), (3, 31)]
    conn.execute("INSERT INTO t VALUES (4, 40)")   # the graph runs again after the load
    conn.execute("UPDATE t SET n = n + 1 WHERE id = 3")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [(1, 10), (2, 21), (3, 32), (4, 40)]


def test_do_nothing_table_keeps_its_rows(conn, tmp_path):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT) ON CONFLICT DO NOTHING")
    conn.execute("INSERT INTO t VALUES (1, 10)")
    path = tmp_path / "in.csv"
    path.write_text("1,11\n2,20\n")
    conn.execute(f"COPY t FROM '{path}' (format csv)")
    assert conn.execute("SELECT * FROM t ORDER BY id").fetchall() == [(1, 10), (2, 20)]


def test_table_without_primary_key_gets_fresh_row_ids(conn, tmp_path):
    conn.execute("CREATE TABLE t (n INT, s VARCHAR)")
    conn.execute("INSERT INTO t VALUES (0, 'before')")
    path = tmp_path / "in.csv"
    path.write_text("".join(f"{i},r{i}\n" for i in range(1, 5001)))
    conn.execute(f"COPY t FROM '{path}' (format csv)")
    conn.execute(f"COPY t FROM '{path}' (format csv)")   # the same rows again: new rows, not replaced
    conn.execute("INSERT INTO t VALUES (-1, 'after')")
    assert conn.execute("SELECT count(*), count(DISTINCT n), sum(n) FROM t").fetchall() == [
        (10002, 5002, 2 * sum(range(1, 5001)) - 1)]


def test_reopen_keeps_loaded_rows(tmp_path):
    path = tmp_path / "in.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"id": list(range(1000)), "v": [f"v{i}" for i in range(1000)]}), path)
    url = str(tmp_path / "db")
    with sql.connect(url) as c:
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
        assert c.execute(f"COPY t FROM '{path}'").rowcount == 1000
    with sql.connect(url) as c:
        assert c.execute("SELECT count(*), min(v), max(id) FROM t").fetchall() == [(1000, "v0", 999)]


def test_read_only_connection_copies_out_but_not_in(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as w:
        w.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        w.execute("INSERT INTO t VALUES (1), (2)")
        with sql.connect(url, read_only=True) as r:
            out = tmp_path / "out.csv"
            assert r.execute(f"COPY t TO '{out}' (format csv)").rowcount == 2
            assert out.read_text() == "1\n2\n"
            with pytest.raises(sql.errors.ReadOnlyError, match=r"^COPY \.\.\. FROM is not allowed"):
                r.execute(f"COPY t FROM '{out}' (format csv)")


def test_progress_callback_is_called_and_monotone(tmp_path):
    seen = []
    path = tmp_path / "in.csv"
    path.write_text("".join(f"{i},{i}\n" for i in range(200_000)))
    with sql.connect(str(tmp_path / "db"), progress=lambda p: seen.append((p.kind, p.done, p.total,
                                                                          p.finished))) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT)")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS c FROM t")   # the dataflow path: slices
        c.execute(f"COPY t FROM '{path}' (format csv)")
    copies = [s for s in seen if s[0] == "COPY"]
    assert copies[-1] == ("COPY", 200_000, 200_000, True)
    done = [s[1] for s in copies]
    assert done == sorted(done) and len(set(done)) > 2


def test_a_long_select_reports_its_scan_and_a_short_one_does_not(tmp_path, monkeypatch):
    """A scan running past REPORT_AFTER reports SELECT progress (rows read, monotone, finished
    with the total); a scan that ends sooner reports nothing."""
    import pyarrow as pa

    import sql.batch.scan as scan

    seen = []
    with sql.connect(str(tmp_path / "db"), progress=lambda p: seen.append((p.kind, p.relation, p.done, p.total,
                                                                          p.finished))) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT)")
        c.insert_arrow("t", pa.table({"id": pa.array(range(300_000), pa.int32()),
                                      "n": pa.array(range(300_000), pa.int32())}))
        c.execute("FLUSH")
        seen.clear()
        assert c.execute("SELECT sum(n) FROM t WHERE id < 1000").fetchall() == [(499500,)]
        assert seen == []   # over before REPORT_AFTER
        monkeypatch.setattr(scan, "REPORT_AFTER", 0.0)
        monkeypatch.setattr(scan, "REPORT_EVERY", 0.0)
        # (a whole-table count(*) reads no row: SST metadata answers it, tests/test_row_count.py)
        for q in ("SELECT sum(n) FROM t", "SELECT count(n) FROM t", "SELECT count(*) FROM t WHERE id > 100"):
            seen.clear()
            c.execute(q).fetchall()
            assert {s[:2] for s in seen} == {("SELECT", "t")}, q
            done = [s[2] for s in seen]
            assert done == sorted(done) and len(done) > 2, q
            assert seen[-1][2:] == (seen[-1][2], seen[-1][2], True) and seen[-1][2] >= 299_899, q


@pytest.mark.postgres
def test_csv_agrees_with_postgres(conn, tmp_path, pg_server):
    import psycopg
    cols = [c for c in COLUMNS if c[0] not in ("iv", "by")]   # text of these differs by design below
    ddl = ", ".join(f"{n} {t}" for n, t in cols)
    names = ", ".join(n for n, _ in cols)
    idx = [0] + [1 + i for i, c in enumerate(COLUMNS) if c in cols]
    rows = [tuple(r[i] for i in idx) for r in ROWS if r[0] != 4]   # NUMERIC NaN, float extremes: Postgres differs
    pg = psycopg.connect(pg_server.dsn, autocommit=True)
    try:
        pg.execute("DROP TABLE IF EXISTS copy_t")
        pg.execute(f"CREATE TABLE copy_t (id INT PRIMARY KEY, {ddl})")
        conn.execute(f"CREATE TABLE t (id INT PRIMARY KEY, {ddl})")
        conn.executemany(f"INSERT INTO t VALUES ({', '.join(['%s'] * len(idx))})", rows)
        # Hummock's CSV into Postgres
        ours = tmp_path / "ours.csv"
        conn.execute(f"COPY t TO '{ours}' (format csv, header true)")
        with pg.cursor() as cur:
            with cur.copy(f"COPY copy_t (id, {names}) FROM STDIN WITH (FORMAT csv, HEADER true)") as cp:
                cp.write(ours.read_bytes())
            got_pg = cur.execute(f"SELECT id, {names} FROM copy_t ORDER BY id").fetchall()
        want = conn.execute(f"SELECT id, {names} FROM t ORDER BY id").fetchall()
        real = 1 + [n for n, _ in cols].index("r")   # psycopg reads float4 text as a double: compare as float4
        f4 = lambda r: tuple(float(np.float32(v)) if i == real and v is not None else   # noqa: E731
                             v.replace(tzinfo=UTC) if isinstance(v, datetime.datetime) and v.tzinfo else v
                             for i, v in enumerate(r))
        _assert_rows([f4(r) for r in got_pg], [f4(r) for r in want])
        # Postgres' CSV into Hummock
        theirs = tmp_path / "theirs.csv"
        with pg.cursor() as cur:
            with cur.copy(f"COPY (SELECT id, {names} FROM copy_t ORDER BY id) TO STDOUT WITH (FORMAT csv, "
                          f"HEADER true)") as cp:
                theirs.write_bytes(b"".join(bytes(chunk) for chunk in cp))
        conn.execute("DELETE FROM t")
        conn.execute(f"COPY t FROM '{theirs}' (format csv, header true)")
        _assert_rows(conn.execute(f"SELECT id, {names} FROM t ORDER BY id").fetchall(), want)
    finally:
        pg.execute("DROP TABLE IF EXISTS copy_t")
        pg.close()


@pytest.mark.parametrize("value, expected", [("1e400", None), ("Infinity", float("inf")), (" 7 ", 7.0),
                                             ("1e-400", None), ("-0", -0.0)])
def test_csv_doubles_follow_postgres_range_rules(conn, tmp_path, value, expected):
    path = tmp_path / "in.csv"
    path.write_text(f"1,{value}\n")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, d DOUBLE PRECISION)")
    if expected is None:   # float8in: out of range, not Infinity or zero
        with pytest.raises(ExecutionError, match="line 1, column d"):
            conn.execute(f"COPY t FROM '{path}' (format csv)")
    else:
        conn.execute(f"COPY t FROM '{path}' (format csv)")
        assert conn.execute("SELECT d FROM t").fetchall() == [(expected,)]


@pytest.mark.parametrize("pk_type, keys", [("VARCHAR", ["b", "a", "bb", "a", ""]),   # keys of varying width
                                           ("BIGINT", [5, -1, 5, 0, 7])])             # of one width
def test_fast_path_repeated_keys_of_any_width_keep_the_last(conn, tmp_path, pk_type, keys):
    path = tmp_path / "in.csv"
    path.write_text("".join(f'"{k}",{i}\n' for i, k in enumerate(keys)))
    conn.execute(f"CREATE TABLE t (k {pk_type} PRIMARY KEY, n INT)")
    conn.execute(f"COPY t FROM '{path}' (format csv)")
    last = {k: i for i, k in enumerate(keys)}
    assert conn.execute("SELECT k, n FROM t ORDER BY k").fetchall() == sorted(last.items())


def test_backfill_reports_progress_as_the_mv_takes_the_rows(tmp_path):
    seen = []
    with sql.connect(str(tmp_path / "db"), implicit_flush=True,
                     progress=lambda p: seen.append((p.kind, p.relation, p.done, p.total, p.finished))) as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT)")
        c.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i % 10) for i in range(5000)])
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT g, count(*) AS n FROM t GROUP BY g")
        assert c.execute("SELECT sum(n) FROM m").fetchall() == [(5000,)]
    backfill = [s for s in seen if s[0] == "BACKFILL"]
    assert backfill[-1] == ("BACKFILL", "t", 5000, 5000, True)
    done = [s[2] for s in backfill]
    assert done == sorted(done) and len(set(done)) > 2   # reported along the way, never backwards


TEXTS = st.one_of(st.none(), st.text(alphabet=st.sampled_from(list('ab ,;|"\'\\\t\n\r\u00e9\u4e2dN')), max_size=8))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(TEXTS, st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))), max_size=12),
       fmt=st.sampled_from(["csv", "text"]), delimiter=st.sampled_from([",", ";", "|", "\t"]))
def test_text_round_trip_of_awkward_strings(tmp_path_factory, rows, fmt, delimiter):
    """Any text -- quotes, delimiters, backslashes, newlines, the letter N, empty -- and NULL
    come back as they were, through csv and text, whatever the delimiter."""
    tmp = tmp_path_factory.mktemp("rt")
    with sql.connect(str(tmp / "db"), implicit_flush=True) as c:
        c.execute("CREATE TABLE src (id INT PRIMARY KEY, s VARCHAR, n BIGINT)")
        c.execute("CREATE TABLE dst (id INT PRIMARY KEY, s VARCHAR, n BIGINT)")
        if rows:
            c.executemany("INSERT INTO src VALUES (%s, %s, %s)", [(i, s, n) for i, (s, n) in enumerate(rows)])
        path = tmp / f"out.{fmt}"
        opts = f"format {fmt}, delimiter '{delimiter}', header true"
        c.execute(f"COPY src TO '{path}' ({opts})")
        c.execute(f"COPY dst FROM '{path}' ({opts})")
        assert c.execute("SELECT * FROM dst ORDER BY id").fetchall() == \
            c.execute("SELECT * FROM src ORDER BY id").fetchall()


@pytest.mark.parametrize("delimiter", [";", "|", ","])
def test_text_format_escapes_the_delimiter(conn, tmp_path, delimiter):
    values = [f"a{delimiter}b", "N", "\\N", None, f"x\\{delimiter}y", "", f"{delimiter}"]
    conn.execute("CREATE TABLE src (id INT PRIMARY KEY, s VARCHAR)")
    conn.execute("CREATE TABLE dst (id INT PRIMARY KEY, s VARCHAR)")
    conn.executemany("INSERT INTO src VALUES (%s, %s)", list(enumerate(values)))
    path = tmp_path / "out.txt"
    conn.execute(f"COPY src TO '{path}' (format text, delimiter '{delimiter}')")
    assert f"0\ta\\{delimiter}b\n".replace("\t", delimiter) in path.read_text()   # as Postgres escapes it
    conn.execute(f"COPY dst FROM '{path}' (format text, delimiter '{delimiter}')")
    assert conn.execute("SELECT s FROM dst ORDER BY id").fetchall() == [(v,) for v in values]


@pytest.mark.parametrize("conflict, expected", [
    ("ON CONFLICT DO NOTHING", [(1, 10, "a")]),                     # the first row of a repeated key
    ("ON CONFLICT DO UPDATE IF NOT NULL", [(1, 11, "a")]),          # later non-NULL values merged in
])
def test_repeated_keys_in_a_file_follow_the_tables_conflict_rule(conn, tmp_path, conflict, expected):
    path = tmp_path / "in.csv"
    path.write_text("1,10,a\n1,11,\n")
    conn.execute(f"CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR) {conflict}")
    conn.execute(f"COPY t FROM '{path}' (format csv)")
    assert conn.execute("SELECT * FROM t").fetchall() == expected
