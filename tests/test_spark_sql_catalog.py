"""Spark bulk loads and SQL share one catalog (issue 26, "One catalog"): a load never leaves an
MV stale (it is refused naming the views), its table id never collides with an id the SQL
catalog handed out (and SQL never reuses the load's), ``inspect verify`` reports a catalog that
disagrees with the data, and a table loaded from Spark is a SQL table.

Most tests drive the load's driver and task steps (``plan_load``, ``build_task_ssts``,
``commit_load``) in-process, without a Spark session: the catalog decisions are all the
driver's; one test runs the whole load on the session's local[2] Spark (fixture ``spark``).
"""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import sql
from hummock import HummockStorage
from hummock.compaction.remote import open_cached_store
from relational.bulk_load import ViewsWouldGoStaleError, build_task_ssts, commit_load
from relational.catalog import Catalog, TableDesc
from relational.errors import SchemaError
from relational.spark import _serde, plan_load, register
from relational.types import DataType as T
from sql.catalog import SqlCatalog
from cli.inspection import verify

SCHEMA = StructType([StructField("id", LongType(), False), StructField("v", LongType(), True)])


def _sql(url, *statements):
    conn = sql.connect(url)
    try:
        out = [conn.execute(s).fetchall() if s.lstrip().upper().startswith("SELECT") else conn.execute(s)
               for s in statements]
    finally:
        conn.close()
    return [o for o in out if isinstance(o, list)]


def _plan(url, table, **extra):
    return plan_load({"url": url, "table": table, "pk": "id", **{k: str(v) for k, v in extra.items()}}, SCHEMA)


def _run(plan, rows):
    """The load's task (one partition) and its commit, as the Spark writer runs them."""
    ids = range(plan.first_id, plan.first_id + plan.ids_per_task)
    columns = [[r[0] for r in rows], [r[1] for r in rows]]
    infos = build_task_ssts(open_cached_store(plan.description), _serde(plan.desc), plan.desc.table_id, columns,
                            len(rows), plan.epoch, 0, ids, None, 1 << 26)
    with plan.store.open(read_only=False, spare_young=True) as storage:
        commit_load(storage, plan.desc, infos, plan.epoch, new_table=plan.new_table)


def _catalog(url) -> SqlCatalog:
    with HummockStorage.open(url, read_only=True) as store:
        return SqlCatalog.load(store, store.max_committed_epoch)


def _sql_ids(cat: SqlCatalog) -> set:
    return {t for r in cat.relations.values() for t in [r.table_id] + r.internal_ids}


def test_load_into_a_table_views_read_is_refused_naming_them(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n, sum(v) AS s FROM t")
    with pytest.raises(ViewsWouldGoStaleError, match=r"materialized view\(s\) or subscription\(s\) m") as info:
        _plan(url, "t")
    assert info.value.views == ["m"] and isinstance(info.value, SchemaError)
    assert _sql(url, "SELECT n, s FROM m") == [[(0, None)]]


def test_load_into_a_subscribed_table_is_refused_its_change_log_would_miss_the_rows(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE SUBSCRIPTION s FROM t WITH (retention = '1 hour')")
    with pytest.raises(ViewsWouldGoStaleError, match=r"subscription\(s\) s") as info:
        _plan(url, "t")
    assert info.value.views == ["s"]
    assert _plan(url, "s").new_table   # a subscription's record is no table: "s" names a new one
    _run(_plan(url, "t2"), [(1, 10)])   # a table nothing subscribes to loads
    assert _sql(url, "SELECT * FROM t2") == [[(1, 10)]]


def test_a_view_created_between_planning_and_commit_refuses_the_commit(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
    plan = _plan(url, "t")      # no view reads t yet
    _sql(url, "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    with pytest.raises(ViewsWouldGoStaleError):
        _run(plan, [(1, 10), (2, 20)])
    assert _sql(url, "SELECT n FROM m", "SELECT count(*) FROM t") == [[(0,)], [(0,)]]   # nothing published


def test_load_into_an_empty_table_no_view_reads_still_works(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE TABLE other (id BIGINT PRIMARY KEY)",
         "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM other")
    _run(_plan(url, "t"), [(1, 10), (2, 20)])
    assert _sql(url, "SELECT id, v FROM t ORDER BY id") == [[(1, 10), (2, 20)]]


def test_default_table_id_never_collides_with_sql_state_tables(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE MATERIALIZED VIEW m AS SELECT v, count(*) AS n FROM t GROUP BY v")
    before = _catalog(url)
    assert before.get("m").internal_ids, "the test needs an MV with internal state tables"
    plan = _plan(url, "x")
    assert plan.desc.table_id not in _sql_ids(before)
    assert plan.desc.table_id >= before.next_table_id
    _run(plan, [(1, 1)])
    _sql(url, "CREATE TABLE y (id BIGINT PRIMARY KEY)", "INSERT INTO t VALUES (5, 7)", "FLUSH")
    after = _catalog(url)
    assert after.get("y").table_id > plan.desc.table_id
    with HummockStorage.open(url, read_only=True) as store:
        assert Catalog(store).get(plan.desc.table_id, store.max_committed_epoch).name == "x"
    assert _sql(url, "SELECT v, n FROM m") == [[(7, 1)]]
    assert verify(url, show_progress=False).ok


def test_explicit_table_id_is_never_reused_by_sql_and_handed_out_ids_are_refused(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE MATERIALIZED VIEW m AS SELECT v, count(*) AS n FROM t GROUP BY v")
    before = _catalog(url)
    for taken in sorted(_sql_ids(before)) + [before.next_table_id - 1]:
        with pytest.raises(SchemaError, match=f"table id {taken} is already used"):
            _plan(url, "x", table_id=taken)
    wanted = before.next_table_id    # the id SQL would hand out next
    _run(_plan(url, "x", table_id=wanted), [(1, 1), (2, 2)])
    _sql(url, "CREATE TABLE y (id BIGINT PRIMARY KEY)")
    after = _catalog(url)
    assert after.get("y").table_id != wanted
    with HummockStorage.open(url, read_only=True) as store:
        assert Catalog(store).get(wanted, store.max_committed_epoch).name == "x"   # not overwritten
    assert verify(url, show_progress=False).ok


def test_verify_reports_data_without_a_record_and_two_records_for_one_id(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE MATERIALIZED VIEW m AS SELECT v, count(*) AS n FROM t GROUP BY v",
         "INSERT INTO t VALUES (1, 2)", "FLUSH")
    assert verify(url, show_progress=False).ok
    internal = _catalog(url).get("m").internal_ids[0]
    with HummockStorage.open(url) as store:
        epoch = store.max_committed_epoch + (1 << 16)
        store.ingest_batch(4000, [(b"k", b"v")], epoch)          # data, no record
        Catalog(store).put(TableDesc(internal, "intruder", (("a", T.BIGINT),), (0,)), epoch)
        store.checkpoint(epoch)
    problems = verify(url, show_progress=False).problems
    text = "\n".join(f"{obj}: {msg}" for obj, msg in problems)
    assert "table id 4000 holds data but no catalog record" in text
    assert f"table id {internal}" in text and "intruder" in text


def test_a_spark_load_into_a_table_views_read_is_refused(spark, tmp_path):
    register(spark)
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
         "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    df = spark.createDataFrame([(i, i) for i in range(100)], SCHEMA)
    with pytest.raises(Exception, match="ViewsWouldGoStaleError|read by materialized view"):
        df.write.format("hummock").mode("append").option("url", url).option("table", "t").save()
    assert _sql(url, "SELECT n FROM m", "SELECT count(*) FROM t") == [[(0,)], [(0,)]]


def test_a_loaded_table_is_a_sql_table_with_its_schema(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    _run(_plan(url, "x"), [(1, 10), (2, 20), (3, None)])
    cat = _catalog(url)
    rel = cat.get("x")
    assert rel is not None and rel.kind == "table" and rel.user_pk
    assert [(n, t.sql_name()) for n, t in rel.visible_columns] == [("id", "BIGINT"), ("v", "BIGINT")]
    got = _sql(url, "SELECT id, v FROM x ORDER BY id",
               "CREATE MATERIALIZED VIEW s AS SELECT count(*) AS n, sum(v) AS total FROM x",
               "INSERT INTO x VALUES (2, 25), (4, 40)", "FLUSH",
               "SELECT id, v FROM x ORDER BY id", "SELECT n, total FROM s")
    assert got == [[(1, 10), (2, 20), (3, None)], [(1, 10), (2, 25), (3, None), (4, 40)], [(4, 75)]]
    assert verify(url, show_progress=False).ok


def test_a_loaded_table_sql_has_no_type_for_stays_out_of_sql(tmp_path):
    from pyspark.sql.types import ArrayType
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY)")
    schema = StructType([StructField("id", LongType(), False), StructField("tags", ArrayType(LongType()), True)])
    plan = plan_load({"url": url, "table": "arr", "pk": "id"}, schema)
    assert "sql" not in plan.desc.properties
    with plan.store.open(read_only=False, spare_young=True) as storage:
        commit_load(storage, plan.desc, [], plan.epoch, new_table=True)
    assert _catalog(url).get("arr") is None and _sql(url, "SELECT count(*) FROM t") == [[(0,)]]
    _sql(url, "CREATE TABLE y (id BIGINT PRIMARY KEY)")
    assert _catalog(url).get("y").table_id > plan.desc.table_id
