"""Event-time watermarks: ``WATERMARK FOR ts AS expr`` on APPEND ONLY tables and sources
(sql/watermark.py), the WatermarkFilter's late-row drop and its persisted watermark
(stream/executors/watermark_filter.py), watermarks through HashAgg and the interval join's
output watermarks and state cleaning (stream/executors/join_watermark.py).

Every MV is checked against an independent Python model of which rows are late (a row is late
when its ts is below the largest ``ts - delay`` of its own INSERT and every earlier one) and
against the batch recomputation of its query over the table (which holds the non-late rows).
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings, strategies as st

import sql
from hummock import HummockStorage
from hummock.errors import CorruptionError
from relational.catalog import TableDesc
from relational.types import DataType as T
from sql.catalog import Relation, SqlCatalog
from sql.errors import BindError, SqlSyntaxError, UnsupportedError
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import AggCall, HashAgg, SimpleAgg, agg_table_count
from stream.executors.hash_join import HashJoin
from stream.executors.watermark_filter import WatermarkFilter
from stream.message import Watermark
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain

_OPEN = []


def _connect(*args, **kwargs):
    """``sql.connect`` whose connection the autouse fixture closes after the test (a runtime left
    running would count in later tests' ``gc_policy.active_runtimes()``)."""
    c = sql.connect(*args, **kwargs)
    _OPEN.append(c)
    return c


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    while _OPEN:
        _OPEN.pop().close()


BASE = datetime.datetime(2024, 1, 1)
DELAY = 5   # seconds
TABLE = ("CREATE TABLE {name} (k INT, ts TIMESTAMP, v INT, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') "
         "APPEND ONLY")
JOIN = ("SELECT a.v AS av, b.v AS bv, a.ts AS ats, b.ts AS bts FROM a JOIN b ON a.k = b.k "
        "AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10 seconds'")


def ts(seconds: int) -> datetime.datetime:
    return BASE + datetime.timedelta(seconds=seconds)


def insert(c, table: str, rows) -> None:
    """One INSERT of ``rows`` = ``[(k, seconds, v)]`` (one chunk: the WatermarkFilter's unit)."""
    values = ", ".join(f"({k}, '{ts(s)}', {v})" for k, s, v in rows)
    c.execute(f"INSERT INTO {table} VALUES {values}")


class LateModel:
    """Which rows a table keeps (RisingWave's WatermarkFilterExecutor): per INSERT, rows below the
    watermark the earlier INSERTs set are dropped; then the watermark becomes the largest
    ``ts - delay`` so far (this INSERT's rows included, late ones too)."""

    def __init__(self):
        self.watermark = None
        self.kept = []

    def insert(self, rows) -> None:
        self.kept += [r for r in rows if self.watermark is None or r[1] >= self.watermark]
        top = max(s for _, s, _ in rows) - DELAY
        if self.watermark is None or top > self.watermark:
            self.watermark = top


def join_model(left, right) -> list:
    return sorted((a[2], b[2], ts(a[1]), ts(b[1])) for a in left for b in right
                  if a[0] == b[0] and b[1] - 10 <= a[1] <= b[1] + 10)


def find(conn, mv, cls):
    stack = [conn.db.builder.actors[mv].executor]
    while stack:
        e = stack.pop()
        if isinstance(e, cls):
            return e
        stack.extend(e.inputs)
    return None


def state_rows(join: HashJoin) -> list:
    return [sum(1 for _ in t.iter_with_prefix(())) for t in join.state_tables()]


# --- DDL -------------------------------------------------------------------------------------------

def test_ddl_round_trip_and_reopen(tmp_path):
    c = _connect(str(tmp_path), implicit_flush=True)
    c.execute("CREATE TABLE t (id INT PRIMARY KEY, \"Ts\" TIMESTAMPTZ, "
              "WATERMARK FOR \"Ts\" AS \"Ts\" - INTERVAL '1' MINUTE) APPEND ONLY ON CONFLICT DO NOTHING")
    c.execute("CREATE TABLE u (x INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2 seconds') APPEND ONLY")
    t, u = c.db.catalog.get("t"), c.db.catalog.get("u")
    assert t.watermark == ("Ts", "\"Ts\" - INTERVAL '1 MINUTE'")
    assert u.watermark == ("ts", "ts - INTERVAL '2 seconds'")
    assert len(u.internal_ids) == 1
    c.close()
    c = _connect(str(tmp_path), implicit_flush=True)
    assert c.db.catalog.get("t").watermark == ("Ts", "\"Ts\" - INTERVAL '1 MINUTE'")
    assert c.db.catalog.get("u").internal_ids == u.internal_ids
    c.execute("DROP TABLE u")
    assert c.db.catalog.get("u") is None
    c.close()


def test_old_records_have_no_watermark_and_malformed_ones_are_corruption():
    desc = TableDesc(5, "t", (("ts", T.TIMESTAMP), ("_row_id", T.BIGINT)), (1,))
    rel = Relation("table", desc, 1, True, append_only=True)
    assert Relation.from_desc(rel.to_desc()).watermark is None
    rel.watermark, rel.internal_ids = ("ts", "ts - INTERVAL '1' SECOND"), [6]
    assert Relation.from_desc(rel.to_desc()).watermark == rel.watermark
    for bad, field in (({"column": "nope", "expr": "ts"}, "watermark.column"),
                       ({"column": "ts", "expr": 3}, "watermark.expr"), ("ts", "watermark")):
        d = rel.to_desc()
        d.properties["sql"]["watermark"] = bad
        with pytest.raises(CorruptionError, match=field):
            Relation.from_desc(d)
    d = rel.to_desc()
    d.properties["sql"]["internal_ids"] = []
    with pytest.raises(CorruptionError, match="watermark"):
        Relation.from_desc(d)
    assert SqlCatalog.from_descs([rel.to_desc()]).get("t").watermark == rel.watermark


@pytest.mark.parametrize("statement, error, message", [
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5 seconds')", UnsupportedError,
     "WATERMARK FOR ts needs an APPEND ONLY table"),
    ("CREATE TABLE b (ts INT, WATERMARK FOR ts AS ts - 5) APPEND ONLY", UnsupportedError,
     "the column is INT; a watermark needs a TIMESTAMP"),
    ("CREATE TABLE b (ts VARCHAR, WATERMARK FOR ts AS ts) APPEND ONLY", UnsupportedError, "the column is VARCHAR"),
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR x AS ts) APPEND ONLY", BindError, "column 'x' does not exist"),
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS ts::date) APPEND ONLY", BindError,
     "the expression is DATE, the column TIMESTAMP"),
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS now()) APPEND ONLY", UnsupportedError,
     "may not read the clock"),
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS ts, WATERMARK FOR ts AS ts) APPEND ONLY", SqlSyntaxError,
     "at most one WATERMARK"),
    ("CREATE TABLE b (ts TIMESTAMP, WATERMARK FOR ts AS ) APPEND ONLY", SqlSyntaxError, "needs an expression"),
])
def test_refusals_by_name(statement, error, message):
    c = _connect(":memory:")
    with pytest.raises(error, match=message):
        c.execute(statement)
    assert c.db.catalog.get("b") is None


def test_alter_table_with_a_watermark_is_rename_to_only():
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    for statement in ("ALTER TABLE a DROP COLUMN ts", "ALTER TABLE a ADD COLUMN z INT",
                      "ALTER TABLE a RENAME COLUMN ts TO t2"):
        with pytest.raises(UnsupportedError, match="has a WATERMARK FOR ts; only RENAME TO"):
            c.execute(statement)
    c.execute("ALTER TABLE a RENAME TO b")
    insert(c, "b", [(1, 20, 1), (1, 10, 2)])   # one chunk: its rows never make each other late
    insert(c, "b", [(1, 12, 3)])                # below the watermark of the first (20 - 5)
    assert sorted(c.execute("SELECT v FROM b").fetchall()) == [(1,), (2,)]


def test_watermark_refused_on_spark_and_create_table_as():
    from sql.spark_pipeline.driver import SparkRuntime
    from sql.watermark import declare_watermark
    c = _connect(":memory:")
    c.execute(TABLE.format(name="a"))
    with pytest.raises(UnsupportedError, match="WATERMARK runs in the in-process runtime only"):
        SparkRuntime(None, c.db.catalog, None, None)   # refused before Spark is touched

    class SparkDb:
        runtime = "spark"
    [stmt] = sql.parse.parse_script(TABLE.format(name="z"))
    with pytest.raises(UnsupportedError, match="not on Spark"):
        declare_watermark(SparkDb(), c.db.catalog.copy(), c.db.catalog.get("a"), stmt, stmt.ast)
    with pytest.raises(UnsupportedError, match="CREATE TABLE AS takes no WATERMARK"):
        c.execute("CREATE TABLE z (ts, WATERMARK FOR ts AS ts) AS SELECT now()::timestamp AS ts")


# --- late rows ---------------------------------------------------------------------------------------

def test_late_rows_are_dropped_and_the_watermark_survives_reopen(tmp_path):
    c = _connect(str(tmp_path), implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute("CREATE MATERIALIZED VIEW m AS SELECT v, ts FROM a WHERE v >= 0")
    model = LateModel()
    for rows in ([(1, 10, 1), (1, 20, 2)], [(1, 14, 3), (1, 16, 4)], [(1, 30, 5)], [(2, 24, 6), (2, 26, 7)]):
        insert(c, "a", rows)
        model.insert(rows)
    assert [r[2] for r in model.kept] == [1, 2, 4, 5, 7]
    expected = sorted((v, ts(s)) for _, s, v in model.kept)
    assert sorted(c.execute("SELECT v, ts FROM a").fetchall()) == expected
    assert sorted(c.execute("SELECT * FROM m").fetchall()) == expected
    c.close()
    c = _connect(str(tmp_path), implicit_flush=True)   # the watermark (25 s) is back
    rows = [(1, 24, 8), (1, 25, 9)]
    insert(c, "a", rows)
    model.insert(rows)
    assert model.kept[-1][2] == 9 and all(r[2] != 8 for r in model.kept)
    expected = sorted((v, ts(s)) for _, s, v in model.kept)
    assert sorted(c.execute("SELECT * FROM m").fetchall()) == expected
    c.execute("CREATE MATERIALIZED VIEW m2 AS SELECT v, ts FROM a")   # a backfilled reader
    insert(c, "a", [(1, 1, 10)])
    assert sorted(c.execute("SELECT * FROM m2").fetchall()) == expected
    c.close()


def _write(directory, name, text):
    (directory / f".{name}").write_text(text)   # complete, then renamed in (stream/sources/files.py)
    (directory / f".{name}").rename(directory / name)


def test_a_source_with_a_watermark_drops_late_rows(tmp_path):
    files = tmp_path / "in"
    files.mkdir()
    _write(files, "1.csv", f"id,ts\n1,{ts(20)}\n2,{ts(10)}\n")
    with sql.connect(str(tmp_path / "db"), barrier_interval_ms=0) as c:
        c.execute(f"CREATE SOURCE s (id INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') WITH ("
                  f"connector = 'posix_fs', posix_fs.root = '{files}', encode = 'csv')")
        rel = c.db.catalog.get("s")
        assert rel.kind == "source" and len(rel.internal_ids) == 2 and rel.watermark[0] == "ts"
        c.execute("CREATE MATERIALIZED VIEW v AS SELECT id, ts FROM s")
        c.execute("FLUSH")
        _write(files, "2.csv", f"id,ts\n3,{ts(14)}\n4,{ts(30)}\n")
        c.execute("FLUSH")
        assert sorted(c.execute("SELECT id FROM v").fetchall()) == [(1,), (2,), (4,)]
    with sql.connect(str(tmp_path / "db"), barrier_interval_ms=0) as c:   # offset and watermark both back
        _write(files, "3.csv", f"id,ts\n5,{ts(24)}\n6,{ts(26)}\n")
        c.execute("FLUSH")
        assert sorted(c.execute("SELECT id FROM v").fetchall()) == [(1,), (2,), (4,), (6,)]


def test_copy_into_a_table_with_a_watermark_drops_late_rows(tmp_path):
    """COPY's fast path (SSTs built directly, for a table nothing reads) would skip the filter."""
    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text(f"k,ts,v\n1,{ts(20)},1\n")
    second.write_text(f"k,ts,v\n1,{ts(10)},2\n1,{ts(16)},3\n")
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute(f"COPY a FROM '{first}' WITH (format csv, header true)")
    c.execute(f"COPY a FROM '{second}' WITH (format csv, header true)")   # 10 is below 20 - 5
    assert sorted(c.execute("SELECT v FROM a").fetchall()) == [(1,), (3,)]


def test_watermark_filter_emits_after_the_chunk_and_on_recovery():
    store = HummockStorage.open("memory://")
    schema = Schema([("ts", T.TIMESTAMP)])
    from stream.expr import Col, Lit
    from stream.expr_time import TimeArith
    from stream.executors.watermark_filter import watermark_state_table
    from stream.interval_text import parse_interval
    expr = TimeArith("-", Col(0, T.TIMESTAMP), Lit(parse_interval("5 seconds"), T.INTERVAL))

    def run(messages):
        f = WatermarkFilter(ListSource(schema, [], messages), 0, expr, watermark_state_table(store, 9, T.TIMESTAMP))
        return f, drain(Checked(f))
    epochs = Epochs()
    b0 = epochs.barrier()
    f, out = run([b0, StreamChunk.from_rows(schema, [(1, (ts(20),)), (1, (ts(10),))]),
                  StreamChunk.from_rows(schema, [(1, (ts(12),)), (1, (None,))]), epochs.barrier()])
    # the first chunk's rows are all kept (RisingWave: a chunk is filtered by the watermark before
    # it; 10 is below the 15 it raises); the second chunk (12, NULL) is all late
    assert [type(m).__name__ for m in out] == ["Barrier", "StreamChunk", "Watermark", "Barrier"]
    assert out[1].rows() == [(1, (ts(20),)), (1, (ts(10),))] and out[2] == Watermark(0, ts(15))
    assert f.dropped == 2
    _, again = run([epochs.barrier(), epochs.barrier()])
    assert again[1] == Watermark(0, ts(15))


# --- watermarks through HashAgg --------------------------------------------------------------------------

def test_hash_agg_holds_group_watermarks_until_its_flush_and_drops_others():
    store = HummockStorage.open("memory://")
    schema = Schema([("v", T.BIGINT), ("g", T.TIMESTAMP)])
    calls = [AggCall("sum", 0)]
    epochs = Epochs()
    msgs = [epochs.barrier(), StreamChunk.from_rows(schema, [(1, (1, ts(0))), (1, (2, ts(10)))]),
            Watermark(1, ts(5)), Watermark(0, 3), epochs.barrier()]
    agg = HashAgg(ListSource(schema, [], msgs), [1], calls, store, range(10, 10 + agg_table_count(calls, False)))
    out = drain(Checked(agg))
    kinds = [type(m).__name__ for m in out]
    assert kinds == ["Barrier", "StreamChunk", "Watermark", "Barrier"], kinds
    assert out[2] == Watermark(0, ts(5))   # group column 1 is output column 0
    msgs = [epochs.barrier(), StreamChunk.from_rows(schema, [(1, (1, ts(0)))]), Watermark(1, ts(5)),
            epochs.barrier()]
    simple = SimpleAgg(ListSource(schema, [], msgs), calls, store, range(30, 30 + agg_table_count(calls, False)))
    assert not any(isinstance(m, Watermark) for m in drain(Checked(simple)))


def test_mv_grouped_by_window_start_over_a_watermarked_table():
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute("CREATE MATERIALIZED VIEW w AS SELECT window_start, count(*) AS n, sum(v) AS s "
              "FROM TUMBLE(a, ts, INTERVAL '10 seconds') GROUP BY window_start")
    model = LateModel()
    for rows in ([(1, 3, 1), (1, 12, 2)], [(1, 9, 3), (1, 25, 4)], [(1, 18, 5), (1, 21, 6)], [(1, 40, 7)]):
        insert(c, "a", rows)
        model.insert(rows)
    got = sorted(c.execute("SELECT * FROM w").fetchall())
    batch = sorted(c.execute("SELECT window_start, count(*), sum(v) FROM TUMBLE(a, ts, INTERVAL '10 seconds') "
                             "GROUP BY window_start").fetchall())
    expected = {}
    for _, s, v in model.kept:
        start = ts(s - s % 10)
        n, total = expected.get(start, (0, 0))
        expected[start] = (n + 1, total + v)
    assert got == batch == sorted((k, n, s) for k, (n, s) in expected.items())


# --- the interval join --------------------------------------------------------------------------------

def test_interval_join_state_is_cleaned_and_the_mv_stays_exact():
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute(TABLE.format(name="b"))
    c.execute(f"CREATE MATERIALIZED VIEW m AS {JOIN}")
    join = find(c, "m", HashJoin)
    la, lb = LateModel(), LateModel()
    n = 0
    for t in range(0, 120, 6):
        for table, model, rows in (("a", la, [(1, t, n), (2, t + 1, n + 1)]), ("b", lb, [(1, t + 3, n), (2, t - 2, n + 1)])):
            insert(c, table, rows)
            model.insert(rows)
        n += 2
    got = sorted(c.execute("SELECT * FROM m").fetchall())
    assert got == join_model(la.kept, lb.kept) == sorted(c.execute(JOIN).fetchall())
    assert len(got) > 40
    rows = state_rows(join)
    assert sum(rows) <= 16, rows   # a few seconds of rows per side and key, not all 80
    assert all(cleaned >= 30 for cleaned in join._join_watermarks.cleaned), join._join_watermarks.cleaned
    # the output watermark on a.ts: min(a's watermark, b's watermark - 10 s)
    assert join._join_watermarks.emitted == {1: min(ts(max(la.watermark, 0)), ts(lb.watermark - 10))}


def test_a_one_sided_bound_cleans_one_side():
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute(TABLE.format(name="b"))
    c.execute("CREATE MATERIALIZED VIEW m AS SELECT a.v, b.v AS bv FROM (SELECT k, ts + INTERVAL '0' SECOND AS ts, "
              "v FROM a WHERE v >= 0) a JOIN (SELECT * FROM b WHERE v < 1000) b ON a.k = b.k AND a.ts >= b.ts")
    join = find(c, "m", HashJoin)   # the watermarks reach it through the Filters (a's ts is no longer one)
    for t in range(0, 60, 6):
        insert(c, "a", [(1, t, t)])
        insert(c, "b", [(1, t, t)])
    # a row of a below b's watermark matches no later b (b.ts <= a.ts), but a's projected ts has
    # no watermark (a computed column) and its rows are kept: none can be shown untouchable
    assert state_rows(join) == [10, 10]
    c.execute("CREATE MATERIALIZED VIEW m2 AS SELECT a.v, b.v AS bv FROM (SELECT * FROM a WHERE v >= 0) a "
              "JOIN (SELECT * FROM b WHERE v < 1000) b ON a.k = b.k AND a.ts >= b.ts")
    join = find(c, "m2", HashJoin)
    for t in range(60, 90, 6):
        insert(c, "a", [(1, t, t)])
        insert(c, "b", [(1, t, t)])
    assert state_rows(join)[0] <= 2 and state_rows(join)[1] == 15   # b's rows match later a's
    for mv in ("m", "m2"):
        assert sorted(c.execute(f"SELECT * FROM {mv}").fetchall()) == sorted(
            c.execute("SELECT a.v, b.v FROM a JOIN b ON a.k = b.k AND a.ts >= b.ts").fetchall())


def test_bounds_near_the_ends_of_time_count_no_data_errors_of_their_own():
    """The join evaluates ``b.ts - 10 s`` at watermarks and over its state to clean it; out of
    range there is no bound (nothing cleaned), and no data error is charged to the MV for it."""
    c = _connect(":memory:", implicit_flush=True)
    for name in ("a", "b"):
        c.execute(TABLE.format(name=name))
        c.execute(f"CREATE TABLE {name}2 (k INT, ts TIMESTAMP, v INT) APPEND ONLY")
    c.execute(f"CREATE MATERIALIZED VIEW m AS {JOIN}")
    c.execute(f"CREATE MATERIALIZED VIEW m2 AS {JOIN.replace(' a ', ' a2 a ').replace(' b ', ' b2 b ')}")
    for name, rows in (("a", "(1, '0001-01-01 00:00:05', 1), (1, '0001-01-01 00:00:08', 2)"),
                       ("b", "(1, '0001-01-01 00:00:07', 1)"), ("a", "(1, '9999-12-31 23:59:58', 3)"),
                       ("b", "(1, '9999-12-31 23:59:59', 4)")):
        c.execute(f"INSERT INTO {name} VALUES {rows}")
        c.execute(f"INSERT INTO {name}2 VALUES {rows}")
    errors = c.data_errors()
    assert errors.get("m") == errors.get("m2") and errors.get("m")
    assert sorted(c.execute("SELECT * FROM m").fetchall()) == sorted(c.execute("SELECT * FROM m2").fetchall())


@settings(max_examples=8)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60)),
                                                           min_size=1, max_size=3)), min_size=1, max_size=14))
def test_interval_join_equals_its_model_under_random_event_times(batches):
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute(TABLE.format(name="b"))
    c.execute(f"CREATE MATERIALIZED VIEW m AS {JOIN}")
    models = {"a": LateModel(), "b": LateModel()}
    v = 0
    for table, events in batches:
        rows = []
        for k, s in events:
            rows.append((k, s, v))
            v += 1
        insert(c, table, rows)
        models[table].insert(rows)
    expected = join_model(models["a"].kept, models["b"].kept)
    assert sorted(c.execute("SELECT * FROM m").fetchall()) == expected
    assert sorted(c.execute(JOIN).fetchall()) == expected
    join = find(c, "m", HashJoin)
    assert sum(state_rows(join)) <= len(models["a"].kept) + len(models["b"].kept)
    c.close()
