"""Sources (docs/sql.md "Sources"): CREATE SOURCE / CREATE TABLE ... WITH (connector = ...),
the datagen and nexmark connectors, exactly once across restarts; and the layering fix that
moved the Nexmark generator out of ``bench/`` (nothing in ``sql/`` or ``stream/`` imports it)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _imports(path: pathlib.Path) -> list:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("package", ["sql", "stream"])
def test_no_import_of_bench(package):
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in sorted((ROOT / package).rglob("*.py"))
                 for m in _imports(p) if m == "bench" or m.startswith("bench.")]
    assert offenders == []


def test_bench_nexmark_still_works_from_the_new_place():
    from bench.nexmark import feed, generator, queries, schema
    from sql import nexmark_feed, nexmark_queries
    from stream.sources import nexmark, nexmark_schema
    assert generator.NexmarkGenerator is nexmark.NexmarkGenerator and generator._uniforms is nexmark._uniforms
    assert schema.BID_SCHEMA is nexmark_schema.BID_SCHEMA
    assert queries.QUERIES is nexmark_queries.QUERIES and feed.feed is nexmark_feed.feed


# --- refusals -------------------------------------------------------------------------------------

import sql
from sql.errors import BindError, CatalogError, UnsupportedError


@pytest.fixture
def conn():
    c = sql.connect(":memory:", barrier_interval_ms=0)
    yield c
    c.close()


def _rows(c, q):
    return c.execute(q).fetchall()


def test_create_table_with_an_unknown_connector_is_refused_not_a_plain_table(conn):
    with pytest.raises(UnsupportedError, match=r"connector 'kafka' is not supported \(supported: "
                                               r"datagen, nexmark, posix_fs, push\)"):
        conn.execute("CREATE TABLE k (a INT) WITH (connector = 'kafka', topic = 'x')")
    assert conn.db.catalog.get("k") is None
    with pytest.raises(UnsupportedError, match="'kafka'"):
        conn.execute("CREATE SOURCE k (a INT) WITH (connector = 'kafka')")


@pytest.mark.parametrize("ddl, match", [
    ("CREATE SOURCE s (a INT) WITH (connector = 'datagen', foo = '1')", r"option 'foo' is not an option of "
                                                                        r"connector 'datagen' \(known: .*fields\.a\.kind"),
    ("CREATE SOURCE s (a INT) WITH (connector = 'datagen', fields.b.kind = 'random')", r"'fields\.b\.kind' names no "
                                                                                        r"column .*columns: a"),
    ("CREATE SOURCE s (a INT) WITH (connector = 'datagen', fields.a.colour = 'red')", r"'fields\.a\.colour' is not a "
                                                                                       r"datagen field option"),
    ("CREATE SOURCE s (a INT) WITH (connector = 'datagen', fields.a.kind = 'zigzag')", "sequence or random"),
    ("CREATE SOURCE s (a INT) WITH (connector = 'datagen', datagen.rows.per.second = 'fast')", "must be an integer"),
    ("CREATE TABLE t (a INT) WITH (connector = 'nexmark', nexmark.table.type = 'bid', nexmark.split.num = '2')",
     r"'nexmark\.split\.num' is not an option of connector 'nexmark' \(known: nexmark\.event\.num"),
    ("CREATE SOURCE s (auction BIGINT) WITH (connector = 'nexmark', nexmark.table.type = 'bids')",
     "nexmark.table.type must be one of person, auction, bid"),
    ("CREATE SOURCE s (colour VARCHAR) WITH (connector = 'nexmark', nexmark.table.type = 'bid')",
     "column colour is not a column of the Nexmark bid table"),
    ("CREATE SOURCE s (price INT) WITH (connector = 'nexmark', nexmark.table.type = 'bid')", "is BIGINT, not INT"),
    ("CREATE TABLE t (a INT) WITH (topic = 'x')", r"WITH options \(topic\) need a connector"),
    ("CREATE SOURCE s (a INT)", "CREATE SOURCE needs WITH"),
])
def test_unknown_or_malformed_options_are_refused_by_name(conn, ddl, match):
    with pytest.raises(BindError, match=match):
        conn.execute(ddl)
    assert conn.db.catalog.relations == {}


@pytest.mark.parametrize("ddl, match", [
    ("CREATE TABLE t WITH (connector = 'kafka') AS SELECT 1 AS a", r"WITH \(connector\) on CREATE TABLE ... AS"),
    ("CREATE SOURCE t AS SELECT 1 AS a", "CREATE SOURCE ... AS query is not supported"),
    ("CREATE MATERIALIZED VIEW v WITH (connector = 'kafka') AS SELECT a FROM base",
     r"WITH \(connector\) on CREATE MATERIALIZED VIEW is not supported"),
])
def test_with_options_where_no_connector_goes_are_refused_not_ignored(conn, ddl, match):
    conn.execute("CREATE TABLE base (a INT)")
    with pytest.raises(UnsupportedError, match=match):
        conn.execute(ddl)
    assert sorted(conn.db.catalog.relations) == ["base"]


def test_a_source_is_not_queried_written_or_dropped_as_a_table(conn):
    conn.execute("CREATE SOURCE s (a INT) WITH (connector = 'datagen', fields.a.kind = 'sequence')")
    with pytest.raises(UnsupportedError, match="s is a source: it stores no rows"):
        conn.execute("SELECT * FROM s")
    with pytest.raises(BindError, match="cannot insert into source"):
        conn.execute("INSERT INTO s VALUES (1)")
    with pytest.raises(CatalogError, match="table 's' does not exist"):
        conn.execute("DROP TABLE s")
    with pytest.raises(UnsupportedError, match="a source has no primary key"):
        conn.execute("CREATE SOURCE p (a INT PRIMARY KEY) WITH (connector = 'datagen')")
    conn.execute("DROP SOURCE s")
    assert conn.db.catalog.get("s") is None


# --- datagen --------------------------------------------------------------------------------------

DATAGEN = ("CREATE SOURCE s (a INT, b VARCHAR, x DOUBLE, f BOOLEAN) WITH (connector = 'datagen', "
           "fields.a.kind = 'sequence', fields.a.start = '1', fields.a.end = '25', fields.b.length = '4', "
           "fields.x.min = '-1', fields.x.max = '1', fields.x.seed = '7', datagen.rows.per.second = '10')")


def _datagen_rows(c):
    c.execute(DATAGEN)
    c.execute("CREATE MATERIALIZED VIEW m AS SELECT a, b, x, f FROM s")
    seen = [_rows(c, "SELECT count(*) FROM m")[0][0]]   # the DDL's own checkpoint took the first batch
    for _ in range(3):
        c.execute("FLUSH")
        seen.append(_rows(c, "SELECT count(*) FROM m")[0][0])
    return seen, _rows(c, "SELECT a, b, x, f FROM m ORDER BY a")


def test_datagen_feeds_an_mv_epoch_by_epoch_deterministically(conn):
    seen, rows = _datagen_rows(conn)
    assert seen == [10, 20, 25, 25]       # 10 a barrier, ending after the sequence's 25
    assert [r[0] for r in rows] == list(range(1, 26))
    assert all(len(b) == 4 and b.isalpha() for _, b, _, _ in rows)
    assert all(-1 <= x <= 1 for _, _, x, _ in rows) and {f for *_, f in rows} == {True, False}
    with sql.connect(":memory:", barrier_interval_ms=0) as other:
        assert _datagen_rows(other)[1] == rows   # the same options: the same rows


def test_a_table_with_a_connector_stores_its_rows_and_takes_dml(conn):
    conn.execute("CREATE TABLE t (a BIGINT, r INT) WITH (connector = 'datagen', fields.a.kind = 'sequence', "
                 "datagen.rows.total = '5', fields.r.min = '3', fields.r.max = '4')")
    conn.execute("FLUSH")
    conn.execute("INSERT INTO t VALUES (100, 0)")
    conn.execute("FLUSH")
    rows = _rows(conn, "SELECT a, r FROM t ORDER BY a")
    assert [a for a, _ in rows] == [0, 1, 2, 3, 4, 100] and all(r in (3, 4) for _, r in rows[:5])


# --- nexmark --------------------------------------------------------------------------------------

def test_nexmark_source_feeds_an_mv_with_the_generators_events(conn):
    from stream.sources.nexmark import NexmarkConfig, NexmarkGenerator
    conn.execute("CREATE SOURCE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP) WITH (connector = "
                 "'nexmark', nexmark.table.type = 'bid', nexmark.event.num = '700', "
                 "nexmark.events.per.second = '300', nexmark.seed = '3')")
    conn.execute("CREATE MATERIALIZED VIEW q AS SELECT auction, count(*) AS n, sum(price) AS total FROM bid "
                 "GROUP BY auction")
    for _ in range(3):
        conn.execute("FLUSH")
    bids = NexmarkGenerator(NexmarkConfig(seed=3)).generate(0, 700).bid.to_pydict()
    expected = {}
    for a, p in zip(bids["auction"], bids["price"]):
        n, t = expected.get(a, (0, 0))
        expected[a] = (n + 1, t + p)
    assert {a: (n, int(t)) for a, n, t in _rows(conn, "SELECT auction, n, total FROM q")} == expected


# --- restarts -------------------------------------------------------------------------------------

def test_restart_resumes_at_the_committed_offset_without_duplicates_or_gaps(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, barrier_interval_ms=0) as c:
        c.execute("CREATE SOURCE s (a BIGINT, b INT) WITH (connector = 'datagen', fields.a.kind = 'sequence', "
                  "datagen.rows.total = '300', datagen.rows.per.second = '20', fields.b.seed = '5')")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT a, b, count(*) AS n FROM s GROUP BY a, b")   # n: repeats
        c.execute("CREATE TABLE bid (auction BIGINT, bidder BIGINT) WITH (connector = 'nexmark', "
                  "nexmark.table.type = 'bid', nexmark.event.num = '400', nexmark.events.per.second = '150')")
        c.execute("CREATE MATERIALIZED VIEW bids AS SELECT count(*) AS n FROM bid")
        c.execute("FLUSH")
        before = _rows(c, "SELECT count(*) FROM m")[0][0]
        first = _rows(c, "SELECT a, b FROM m ORDER BY a")
    assert 0 < before < 300
    for _ in range(2):   # two restarts, each reading on from where the last stopped
        with sql.connect(url, barrier_interval_ms=0) as c:
            assert c.db.catalog.get("s").kind == "source"
            c.execute("FLUSH")
    with sql.connect(url, barrier_interval_ms=0) as c:
        for _ in range(15):   # 20 rows a barrier: at most 15 more barriers take the rest
            c.execute("FLUSH")
        rows = _rows(c, "SELECT a, b FROM m ORDER BY a")
        bids = _rows(c, "SELECT auction, bidder FROM bid")
        assert _rows(c, "SELECT DISTINCT n FROM m") == [(1,)]
        assert _rows(c, "SELECT n FROM bids") == [(len(bids),)]
    assert [a for a, _ in rows] == list(range(300)) and rows[:len(first)] == first
    with sql.connect(":memory:", barrier_interval_ms=0) as fresh:   # no restart: the same rows
        fresh.execute("CREATE SOURCE s (a BIGINT, b INT) WITH (connector = 'datagen', fields.a.kind = 'sequence', "
                      "datagen.rows.total = '300', datagen.rows.per.second = '100', fields.b.seed = '5')")
        fresh.execute("CREATE MATERIALIZED VIEW m AS SELECT a, b FROM s")
        for _ in range(10):
            fresh.execute("FLUSH")
        assert _rows(fresh, "SELECT a, b FROM m ORDER BY a") == rows
    from stream.sources.nexmark import NexmarkGenerator
    expected = NexmarkGenerator().generate(0, 400).bid.to_pydict()
    assert sorted(bids) == sorted(zip(expected["auction"], expected["bidder"]))   # each event once


# --- the catalog record ---------------------------------------------------------------------------

@pytest.mark.parametrize("connector, field, found", [("datagen", "properties.sql.connector", "datagen"),
                                                     ({"connector": 5}, "properties.sql.connector.connector", 5)])
def test_a_malformed_connector_record_is_corruption(tmp_path, connector, field, found):
    from hummock import HummockStorage
    from hummock.errors import CorruptionError
    from hummock.key import new_epoch
    from relational.catalog import CATALOG_TABLE_ID, Catalog
    path = str(tmp_path / "db")
    with sql.connect(path, barrier_interval_ms=0) as c:
        c.execute("CREATE SOURCE s (a INT) WITH (connector = 'datagen')")
        assert _rows(c, "SHOW SOURCES") == [("s",)] and _rows(c, "SHOW TABLES") == []
    with HummockStorage.open(path) as store:
        [desc] = [d for d in Catalog(store).list(store.max_committed_epoch) if d.name == "s"]
        obj = desc.to_json()
        assert obj["properties"]["sql"]["kind"] == "source"
        assert obj["properties"]["sql"]["connector"] == {"connector": "datagen"}
        obj["properties"]["sql"]["connector"] = connector
        epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
        record = _record(obj)
        store.ingest_batch(CATALOG_TABLE_ID, [(b"table/" + desc.table_id.to_bytes(4, "big"), record)], epoch)
        store.checkpoint(epoch)
    with pytest.raises(CorruptionError) as info:
        sql.connect(path)
    assert field in str(info.value) and info.value.found == found


def _record(obj) -> bytes:
    """A checksum-valid catalog record of JSON ``obj`` (docs/format.md; as tests/test_catalog.py)."""
    import json
    import struct

    import xxhash
    payload = json.dumps(obj).encode()
    return struct.pack("<8sIIQ", b"HUMKTBL1", 1, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload


def test_a_database_with_a_connector_is_refused_by_the_spark_runtime_not_run_without_it(conn):
    from sql.spark_pipeline.driver import SparkRuntime
    conn.execute("CREATE TABLE t (a INT) WITH (connector = 'datagen')")
    with pytest.raises(UnsupportedError, match="t: sources and tables with a connector run in the in-process"):
        SparkRuntime(conn.db.store, conn.db.catalog, conn.db.plan_of, None)   # refused before Spark is touched


# --- the connectors alone -------------------------------------------------------------------------

def test_connector_rows_do_not_depend_on_how_the_offsets_are_cut():
    import pyarrow as pa

    from relational.types import DataType as T
    from stream.sources.connector import make_connector
    cols = [("a", T.INT), ("b", T.VARCHAR), ("x", T.REAL), ("f", T.BOOLEAN), ("s", T.SMALLINT), ("_row_id", T.BIGINT)]
    datagen = make_connector({"connector": "datagen", "fields.a.kind": "sequence", "fields.a.start": "-3",
                              "fields.s.min": "-5", "fields.s.max": "5"}, cols, 5)
    nexmark = make_connector({"connector": "nexmark", "nexmark.table.type": "auction"},
                             [("id", T.BIGINT), ("seller", T.BIGINT), ("_row_id", T.BIGINT)], 2)
    for conn_ in (datagen, nexmark):
        whole = [pa.concat_arrays([c]) for c in conn_.columns_for(0, 120)]
        parts = [conn_.columns_for(lo, hi) for lo, hi in ((0, 1), (1, 57), (57, 57), (57, 120))]
        assert [pa.concat_arrays([p[i] for p in parts]) for i in range(len(whole))] == whole
    a, _, _, _, s, row_id = datagen.columns_for(0, 120)
    assert a.to_pylist()[:3] == [-3, -2, -1] and row_id.to_pylist() == list(range(120))
    assert set(s.to_pylist()) <= set(range(-5, 6)) and len(set(s.to_pylist())) > 5


def test_datagen_stays_inside_the_column_types():
    from relational.types import DataType as T
    from stream.sources.connector import make_connector
    seq = make_connector({"connector": "datagen", "fields.s.kind": "sequence", "fields.s.start": "32760"},
                         [("s", T.SMALLINT)], None)
    assert seq.total == 8 and seq.stop_at(5) == 8   # ends at SMALLINT's maximum rather than overflow
    wide = make_connector({"connector": "datagen", "fields.a.min": str(-(1 << 63)), "fields.a.max": str((1 << 63) - 1)},
                          [("a", T.BIGINT)], None)
    assert len(set(wide.columns_for(0, 50)[0].to_pylist())) == 50


def test_the_shell_lists_and_describes_a_source(conn):
    import io

    from cli.shell import Shell
    conn.execute("CREATE SOURCE s (a INT) WITH (connector = 'datagen')")
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(conn, out=out, err=err)
    for line in ("\\d", "\\d s"):
        shell.feed(line)
    assert err.getvalue() == "" and " s    | source " in out.getvalue() and 'Source "s"' in out.getvalue()



# --- posix_fs: a directory of files ---------------------------------------------------------------

def _write(directory, name, text):
    (directory / f".{name}").write_text(text)          # complete, then renamed in (the module docstring)
    (directory / f".{name}").rename(directory / name)


def test_a_directory_of_files_feeds_a_table_each_file_once_across_restarts(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    files = tmp_path / "in"
    files.mkdir()
    _write(files, "a.csv", "id,name\n1,x\n2,y\n")
    url = str(tmp_path / "db")
    ddl = (f"CREATE TABLE t (id INT, name VARCHAR) WITH (connector = 'posix_fs', posix_fs.root = '{files}', "
           "encode = 'csv', match_pattern = '*.csv')")
    with sql.connect(url, barrier_interval_ms=0) as c:
        c.execute(ddl)
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n, sum(id) AS s FROM t")
        c.execute("FLUSH")
        _write(files, "b.csv", "id,name\n3,z\n")
        _write(files, "ignored.json", '{"id": 100}\n')
        c.execute("FLUSH")
        assert _rows(c, "SELECT id, name FROM t ORDER BY id") == [(1, "x"), (2, "y"), (3, "z")]
    _write(files, "c.csv", "id,name\n4,w\n5,\n")                # arrives while the database is closed
    with sql.connect(url, barrier_interval_ms=0) as c:
        c.execute("FLUSH")
        assert _rows(c, "SELECT n, s FROM m") == [(5, 15)]           # a.csv and b.csv not read twice
        assert _rows(c, "SELECT name FROM t WHERE id = 5") == [(None,)]
    pq.write_table(pa.table({"id": pa.array([7], pa.int64()), "extra": ["e"]}), tmp_path / "p.parquet")
    pdir = tmp_path / "pq"
    pdir.mkdir()
    (tmp_path / "p.parquet").rename(pdir / "p.parquet")
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        c.execute(f"CREATE SOURCE s (id INT, name VARCHAR) WITH (connector = 'posix_fs', posix_fs.root = '{pdir}', "
                  "encode = 'parquet')")
        c.execute("CREATE MATERIALIZED VIEW v AS SELECT id, name FROM s")
        c.execute("FLUSH")
        assert _rows(c, "SELECT id, name FROM v") == [(7, None)]
        jdir = tmp_path / "js"
        jdir.mkdir()
        _write(jdir, "1.json", '{"id": 8, "name": "j"}\n{"id": 9}\n')
        c.execute(f"CREATE TABLE j (id BIGINT, name VARCHAR) WITH (connector = 'posix_fs', posix_fs.root = '{jdir}', "
                  "encode = 'json')")
        c.execute("FLUSH")
        assert _rows(c, "SELECT id, name FROM j ORDER BY id") == [(8, "j"), (9, None)]
        with pytest.raises(BindError, match="encode must be one of csv, parquet, json"):
            c.execute("CREATE SOURCE bad (a INT) WITH (connector = 'posix_fs', posix_fs.root = '/x', encode = 'xml')")
        with pytest.raises(BindError, match="needs option posix_fs.root"):
            c.execute("CREATE SOURCE bad (a INT) WITH (connector = 'posix_fs', encode = 'csv')")


def test_an_aggregate_over_a_source_is_append_only(conn):
    """A source only inserts (``P.inserts_only``): min/max over it keep one value per group
    (EXPLAIN says append_only) and still answer right."""
    conn.execute("CREATE SOURCE g (n BIGINT) WITH (connector = 'datagen', fields.n.kind = 'sequence', "
                 "fields.n.start = '1', fields.n.end = '100', datagen.rows.per.second = '30')")
    plan = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT n % 3 AS k, max(n) AS hi, min(n) AS lo FROM g GROUP BY 1"))
    assert "append_only" in plan, plan
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT n % 3 AS k, max(n) AS hi, min(n) AS lo FROM g GROUP BY 1")
    for _ in range(5):
        conn.execute("FLUSH")
    assert _rows(conn, "SELECT * FROM m ORDER BY k") == [(0, 99, 3), (1, 100, 1), (2, 98, 2)]
