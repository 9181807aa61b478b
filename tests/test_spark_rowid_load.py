"""Spark bulk loads into tables without a primary key (issue 26, "One catalog"): a SQL table's
hidden ``_row_id`` is filled by the load (relational/row_id.py: generator = the task's partition,
time floor = the load's epoch), a load without a pk option creates such a table, and after the
load SQL selects, inserts into and builds views over the table as over any of its own.

Most tests run the load's writer in-process (``HummockWriter.write`` outside Spark is task 0 of
one partition); one runs the whole load on the session's local[2] Spark (fixture ``spark``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import sql
from hummock import HummockStorage
from hummock.key import EPOCH_PHYSICAL_SHIFT, new_epoch
from relational.bulk_load import row_id_index
from relational.errors import SchemaError
from relational.row_id import MAX_GENERATOR, RowIdGenerator, split_row_id, task_row_ids
from relational.spark import HummockWriter, _serde, plan_load, register
from sql.catalog import SqlCatalog
from cli.inspection import verify
from stream.errors import StreamError
from stream.row_id import RowIdGenerator as StreamRowIdGenerator

SCHEMA = StructType([StructField("a", IntegerType(), True), StructField("b", StringType(), True)])


def _sql(url, *statements):
    conn = sql.connect(url)
    try:
        out = [conn.execute(s).fetchall() if s.lstrip().upper().startswith("SELECT") else conn.execute(s)
               for s in statements]
    finally:
        conn.close()
    return [o for o in out if isinstance(o, list)]


def _load(url, table, rows, schema=SCHEMA, **extra):
    """The load's planning, its one task (partition 0) and its commit, as Spark runs them."""
    plan = plan_load({"url": url, "table": table, **{k: str(v) for k, v in extra.items()}}, schema)
    arrays = [pa.array([r[i] for r in rows], pa.int32() if i == 0 else pa.string()) for i in range(2)]
    batch = pa.RecordBatch.from_arrays(arrays, names=[f.name for f in schema.fields])
    writer = HummockWriter(plan)
    writer.commit([writer.write(iter([batch]))])
    return plan


def _row_ids(url, table) -> list:
    with HummockStorage.open(url, read_only=True) as store:
        epoch = store.max_committed_epoch
        desc = SqlCatalog.load(store, epoch).get(table).desc
        serde, rid = _serde(desc), row_id_index(desc)
        return [serde.decode(k, v)[rid] for k, v in store.iter(desc.table_id, epoch)]


# --- the id layout ------------------------------------------------------------------------------

@given(st.lists(st.integers(0, MAX_GENERATOR), min_size=1, max_size=6, unique=True), st.integers(1, 9000))
def test_task_row_ids_are_unique_across_tasks_and_above_the_epoch_floor(partitions, n):
    floor_ms = 10**9
    epoch = floor_ms << EPOCH_PHYSICAL_SHIFT
    now = [5]     # a clock far behind: the epoch floor decides; sleeping moves it on

    def sleep(seconds):
        now[0] = max(now[0] + 1, now[0] + int(seconds * 1000))

    all_ids = [task_row_ids(p, epoch, n, clock=lambda: now[0], sleep=sleep) for p in partitions]
    flat = np.concatenate(all_ids)
    assert len(np.unique(flat)) == len(flat) and (flat > 0).all()
    for p, ids in zip(partitions, all_ids):
        assert (np.diff(ids) > 0).all()
        ts, gen, _ = split_row_id(int(ids[0]))
        assert gen == p and ts >= floor_ms


def test_the_next_write_of_a_partition_never_repeats_an_id():
    """The task returns only after the clock passed its last id's millisecond, so the next
    micro-batch's epoch (taken later) floors the same generator above every id it issued."""
    now = [1000]

    def sleep(seconds):
        now[0] += 1

    first = task_row_ids(3, 1000 << EPOCH_PHYSICAL_SHIFT, 10, clock=lambda: now[0], sleep=sleep)
    assert now[0] > split_row_id(int(first[-1]))[0]
    following_epoch = now[0] << EPOCH_PHYSICAL_SHIFT          # the next batch's epoch is taken after
    second = task_row_ids(3, following_epoch, 10, clock=lambda: now[0], sleep=sleep)
    assert second[0] > first[-1]


def test_task_row_ids_refuse_a_partition_past_the_generators():
    with pytest.raises(SchemaError, match="coalesce"):
        task_row_ids(MAX_GENERATOR + 1, new_epoch(), 3)


def test_stream_layer_keeps_its_error_type():
    with pytest.raises(StreamError):
        StreamRowIdGenerator(MAX_GENERATOR + 1)
    with pytest.raises(SchemaError):
        RowIdGenerator(-1)


# --- loads into SQL tables without a pk -----------------------------------------------------------

def test_load_into_a_sql_table_without_pk_assigns_row_ids_and_sql_keeps_working(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (a INT, b TEXT)")
    rows = [(i % 3, f"r{i}") for i in range(201)] + [(None, None)]   # repeated rows: no pk to repeat
    _load(url, "t", rows)
    ids = _row_ids(url, "t")
    assert len(ids) == len(set(ids)) == 202
    got = _sql(url, "SELECT count(*), count(a), count(DISTINCT b) FROM t",
               "CREATE MATERIALIZED VIEW m AS SELECT a, count(*) AS n FROM t GROUP BY a",
               "INSERT INTO t VALUES (1, 'later'), (1, 'later')", "FLUSH",
               "SELECT a, n FROM m ORDER BY a NULLS LAST", "SELECT * FROM t WHERE b = 'later'")
    assert got[0] == [(202, 201, 201)]
    assert got[1] == [(0, 67), (1, 69), (2, 67), (None, 1)]
    assert got[2] == [(1, "later"), (1, "later")]    # SELECT * hides _row_id
    ids = _row_ids(url, "t")
    assert len(ids) == len(set(ids)) == 204
    assert verify(url, show_progress=False).ok


def test_load_that_gives_row_ids_keeps_them(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (a INT, b TEXT)")
    schema = StructType(SCHEMA.fields + [StructField("_row_id", LongType(), True)])
    plan = plan_load({"url": url, "table": "t"}, schema)
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2, 3], pa.int32()), pa.array(["x", "y", "z"]),
                                        pa.array([7, None, 9], pa.int64())], names=["a", "b", "_row_id"])
    writer = HummockWriter(plan)
    writer.commit([writer.write(iter([batch]))])
    ids = sorted(_row_ids(url, "t"))
    assert ids[:2] == [7, 9] and ids[2] > 1 << 40   # the NULL got a fresh id
    assert _sql(url, "SELECT a FROM t ORDER BY a") == [[(1,), (2,), (3,)]]


def test_load_without_pk_creates_a_sql_table_with_a_hidden_row_id(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE other (id BIGINT PRIMARY KEY)")
    plan = _load(url, "fresh", [(1, "a"), (1, "a"), (2, None)])
    assert row_id_index(plan.desc) == 2 and plan.new_table
    with HummockStorage.open(url, read_only=True) as store:
        rel = SqlCatalog.load(store, store.max_committed_epoch).get("fresh")
    assert rel.row_id and not rel.user_pk
    assert [(n, t.sql_name()) for n, t in rel.visible_columns] == [("a", "INT"), ("b", "VARCHAR")]
    got = _sql(url, "SELECT * FROM fresh ORDER BY a, b",
               "CREATE MATERIALIZED VIEW c AS SELECT a, count(*) AS n FROM fresh GROUP BY a",
               "INSERT INTO fresh VALUES (2, 'b')", "FLUSH", "SELECT a, n FROM c ORDER BY a")
    assert got == [[(1, "a"), (1, "a"), (2, None)], [(1, 2), (2, 2)]]
    assert verify(url, show_progress=False).ok


def test_a_dataframe_with_its_own_row_id_column_needs_a_pk(tmp_path):
    url = str(tmp_path / "db")
    schema = StructType([StructField("_row_id", LongType(), True)])
    with pytest.raises(SchemaError, match="_row_id"):
        plan_load({"url": url, "table": "x"}, schema)


def test_a_spark_load_into_a_sql_table_without_pk(spark, tmp_path):
    register(spark)
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (a INT, b TEXT)")
    df = spark.createDataFrame([(i % 5, f"v{i}") for i in range(1000)], SCHEMA).repartition(3)
    df.write.format("hummock").mode("append").option("url", url).option("table", "t").save()
    ids = _row_ids(url, "t")
    assert len(ids) == len(set(ids)) == 1000
    assert {split_row_id(i)[1] for i in ids} == {0, 1, 2}     # one generator per task
    got = _sql(url, "SELECT count(*), count(DISTINCT b), sum(a) FROM t",
               "CREATE MATERIALIZED VIEW m AS SELECT a, count(*) AS n FROM t GROUP BY a",
               "INSERT INTO t VALUES (9, 'x')", "FLUSH", "SELECT a, n FROM m ORDER BY a")
    assert got == [[(1000, 1000, 2000)], [(0, 200), (1, 200), (2, 200), (3, 200), (4, 200), (9, 1)]]
    assert _sql(url, "SELECT b FROM t WHERE a = 9") == [[("x",)]]
    assert verify(url, show_progress=False).ok
