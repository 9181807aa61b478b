"""JSONB in and out of Hummock: COPY (csv / text / json files), parameters, DESCRIBE, and the
pgwire server (type oid 3802; psycopg's own jsonb loader reads the values, text and binary).

The pgwire test carries the native-only ``server_integration`` marker, as tests/test_pgwire.py
(the server has no pure-Python twin); the rest runs in both modes.
"""

from __future__ import annotations

import json

import psycopg
import pytest

import sql
from sql.pgwire import PgServer, ServerOptions

DOCS = {1: '{"b": [1, 2.50], "a": "x,y \\"q\\""}', 2: "[]", 3: None, 4: '"tab\\there"', 5: "12.30"}


def _filled(conn):
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
    for k, d in DOCS.items():
        conn.execute("INSERT INTO t VALUES ($1, $2::jsonb)", (k, d))


def test_copy_round_trips_jsonb_through_csv_text_and_json(tmp_path):
    with sql.connect(":memory:", implicit_flush=True) as conn:
        _filled(conn)
        want = conn.execute("SELECT k, j FROM t ORDER BY k").fetchall()
        assert want[0][1] == '{"a": "x,y \\"q\\"", "b": [1, 2.50]}'
        for fmt in ("csv", "text", "json"):
            path = tmp_path / f"out.{fmt}"
            conn.execute(f"COPY t TO '{path}' (FORMAT {fmt})")
            conn.execute(f"CREATE TABLE back_{fmt} (k INT PRIMARY KEY, j JSONB)")
            conn.execute(f"COPY back_{fmt} FROM '{path}' (FORMAT {fmt})")
            assert conn.execute(f"SELECT k, j FROM back_{fmt} ORDER BY k").fetchall() == want, fmt
        csv_text = (tmp_path / "out.csv").read_text()
        assert '"{""a"": ""x,y \\""q\\"""", ""b"": [1, 2.50]}"' in csv_text   # Postgres' csv quoting of the text


def test_copy_from_normalises_and_rejects_bad_json(tmp_path):
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        good = tmp_path / "in.csv"
        good.write_text('1,"{""b"":1,  ""a"":2}"\n2,"[ 1 ,2 ]"\n')
        conn.execute(f"COPY t FROM '{good}' (FORMAT csv)")
        assert conn.execute("SELECT k, j FROM t ORDER BY k").fetchall() == [(1, '{"a": 2, "b": 1}'), (2, "[1, 2]")]
        bad = tmp_path / "bad.csv"
        bad.write_text('3,"{oops"\n')
        with pytest.raises(sql.errors.SqlError, match="json"):
            conn.execute(f"COPY t FROM '{bad}' (FORMAT csv)")


def test_parameters_and_description():
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        conn.execute("INSERT INTO t VALUES (1, $1)", ({"z": [1, 2.5, None, True], "a": "é"},))
        row = conn.execute("SELECT j, j -> 'z' ->> 1 FROM t WHERE j @> $1", ({"a": "é"},)).fetchall()
        assert row == [('{"a": "é", "z": [1, 2.5, null, true]}', "2.5")]
        assert json.loads(row[0][0]) == {"z": [1, 2.5, None, True], "a": "é"}
        cur = conn.execute("SELECT j FROM t")
        assert cur.description[0][1] == "jsonb"
        with pytest.raises(sql.errors.UnsupportedError, match="(?i)json.*jsonb"):
            conn.execute("CREATE TABLE u (j JSON)")


@pytest.mark.server_integration
def test_pgwire_sends_jsonb_as_oid_3802(tmp_path):
    server = PgServer(str(tmp_path / "db"), ServerOptions(port=0, barrier_interval_ms=0)).start_in_thread()
    try:
        with psycopg.connect(host="127.0.0.1", port=server.port, user="t", dbname="db", autocommit=True) as c:
            c.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
            c.execute("INSERT INTO t VALUES (1, '{\"b\": 1, \"a\": [true, null]}'), (2, NULL)")
            c.execute("FLUSH")
            for binary in (False, True):
                cur = c.execute("SELECT j, j -> 'a' FROM t ORDER BY k", binary=binary)
                assert [d.type_code for d in cur.description] == [3802, 3802]
                assert cur.fetchall() == [({"a": [True, None], "b": 1}, [True, None]), (None, None)]
            got = c.execute("SELECT %s::jsonb ->> 'x'", [psycopg.types.json.Jsonb({"x": "y"})]).fetchall()
            assert got == [("y",)]
    finally:
        server.stop()


def test_insert_arrow_stores_the_normal_text_so_an_mv_groups_spellings_together():
    """Arrow columns of JSON text go to the table's stream as their normal text: two spellings
    of one document are one group in an MV (the MV's executor grouped the raw texts apart while
    its state keys merged them, and the stream graph failed); bad JSON writes nothing."""
    import pyarrow as pa
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        conn.execute("CREATE MATERIALIZED VIEW g AS SELECT j, count(*) AS n FROM t GROUP BY j")
        conn.insert_arrow("t", pa.table({"k": pa.array([1, 2, 3], pa.int32()),
                                         "j": pa.array(['{"b":1,"a":2}', '{ "a" : 2, "b" : 1 }', None])}))
        assert sorted(conn.execute("SELECT * FROM g").fetchall(), key=repr) == [('{"a": 2, "b": 1}', 2), (None, 1)]
        with pytest.raises(sql.errors.ExecutionError, match="row 2: invalid input syntax for type json"):
            conn.insert_arrow("t", pa.table({"k": pa.array([4, 5], pa.int32()), "j": pa.array(["[1]", "[1,"])}))
        assert conn.execute("SELECT k FROM t ORDER BY k").fetchall() == [(1,), (2,), (3,)]


def test_a_posix_fs_source_fills_jsonb_columns_from_csv_text_and_json_values(tmp_path):
    """A file source's JSONB column holds the normal text: from CSV text, and from a JSON
    file's nested values (which the JSON reader parsed already)."""
    csv_dir, json_dir = tmp_path / "csv", tmp_path / "json"
    csv_dir.mkdir(), json_dir.mkdir()
    (csv_dir / "a.csv").write_text('id,doc\n1,"{""b"":1, ""a"":[1,2.50]}"\n2,\n')
    (json_dir / "a.json").write_text('{"id": 1, "doc": {"b": 1, "a": [1, 2.50, null, "x"]}}\n{"id": 2, "doc": "s"}\n'
                                     '{"id": 3, "doc": null}\n{"id": 4}\n')
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        for encode, root in (("csv", csv_dir), ("json", json_dir)):
            conn.execute(f"CREATE TABLE t_{encode} (id INT, doc JSONB) WITH (connector = 'posix_fs', "
                         f"posix_fs.root = '{root}', encode = '{encode}')")
            conn.execute(f"CREATE MATERIALIZED VIEW m_{encode} AS SELECT id, doc -> 'a' AS a, doc FROM t_{encode}")
        conn.execute("FLUSH")
        assert sorted(conn.execute("SELECT * FROM m_csv").fetchall(), key=repr) == \
            [(1, "[1, 2.50]", '{"a": [1, 2.50], "b": 1}'), (2, None, None)]
        assert sorted(conn.execute("SELECT * FROM m_json").fetchall(), key=repr) == \
            [(1, '[1, 2.50, null, "x"]', '{"a": [1, 2.50, null, "x"], "b": 1}'), (2, None, '"s"'), (3, None, None),
             (4, None, None)]
