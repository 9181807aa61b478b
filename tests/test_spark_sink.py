"""The streaming sink ``df.writeStream.format("hummock")`` (relational/spark_sink.py): each
micro-batch lands exactly once (its progress record and its data in one version delta), also
when Spark replays a batch whose commit landed; upsert overwrites, append into a pk table keeps
the stored row, append into a table without pk assigns row ids; a table views read is refused.

The commit rules are tested in-process (``HummockStreamWriter.write`` outside Spark is task 0,
``commit`` is the commit worker's call); the Spark tests run small file streams on the
session's local[2] Spark (fixture ``spark``).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import LongType, StringType, StructField, StructType

import sql
from hummock import HummockStorage
from relational.bulk_load import ViewsWouldGoStaleError
from relational.errors import SchemaError
from relational.progress import Progress, list_progress, read_progress
from relational.spark import register
from relational.spark_sink import HummockStreamWriter, query_name
from cli.inspection import verify

SCHEMA = StructType([StructField("id", LongType(), True), StructField("v", StringType(), True)])


def _sql(url, *statements):
    conn = sql.connect(url)
    try:
        out = [conn.execute(s).fetchall() if s.lstrip().upper().startswith("SELECT") else conn.execute(s)
               for s in statements]
    finally:
        conn.close()
    return [o for o in out if isinstance(o, list)]


def _batch(rows):
    return pa.RecordBatch.from_arrays([pa.array([r[0] for r in rows], pa.int64()),
                                       pa.array([r[1] for r in rows], pa.string())], names=["id", "v"])


def _micro_batch(url, batch_id, rows, **options):
    """One micro-batch as Spark runs it: a planned writer (pickled into the task), its one task,
    and the commit worker's own, unplanned writer."""
    import pickle

    opts = {"url": url, "table": "t", "query_name": "q", **{k: str(v) for k, v in options.items()}}
    task_writer = pickle.loads(pickle.dumps(HummockStreamWriter(opts, SCHEMA)))
    message = task_writer.write(iter([_batch(rows)]))
    HummockStreamWriter(opts, SCHEMA).commit([message], batch_id)
    return message


def _progress(url, query="q"):
    with HummockStorage.open(url, read_only=True) as store:
        return read_progress(store, query, store.max_committed_epoch)


# --- the commit rules, in-process ------------------------------------------------------------------

def test_upsert_newest_wins_and_a_replayed_batch_is_skipped(tmp_path):
    url = str(tmp_path / "db")
    _micro_batch(url, 0, [(1, "a"), (2, "b"), (1, "a2")], mode="upsert", pk="id")   # last in the batch wins
    _micro_batch(url, 1, [(2, "b2"), (3, "c")], mode="upsert", pk="id")
    assert _sql(url, "SELECT id, v FROM t ORDER BY id") == [[(1, "a2"), (2, "b2"), (3, "c")]]
    first = _progress(url)
    assert first.batch_id == 1
    _micro_batch(url, 1, [(2, "REPLAYED"), (9, "REPLAYED")], mode="upsert", pk="id")   # Spark replays batch 1
    assert _sql(url, "SELECT id, v FROM t ORDER BY id") == [[(1, "a2"), (2, "b2"), (3, "c")]]
    assert _progress(url) == first
    with pytest.raises(SchemaError, match="checkpoint was reset"):
        _micro_batch(url, 0, [(5, "x")], mode="upsert", pk="id")
    assert verify(url, show_progress=False).ok


def test_append_into_a_pk_table_keeps_stored_rows_and_the_first_of_a_batch(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)", "INSERT INTO t VALUES (1, 'sql')", "FLUSH")
    message = _micro_batch(url, 0, [(1, "dup"), (2, "b"), (2, "b-later"), (3, "c")])
    assert (message.rows, message.written) == (4, 2)
    _micro_batch(url, 1, [(3, "again"), (4, "d")])
    assert _sql(url, "SELECT id, v FROM t ORDER BY id") == [[(1, "sql"), (2, "b"), (3, "c"), (4, "d")]]


def test_append_without_pk_creates_a_row_id_table_and_every_row_lands(tmp_path):
    url = str(tmp_path / "db")
    _micro_batch(url, 0, [(1, "a"), (1, "a")])
    _micro_batch(url, 1, [(1, "a")])
    _micro_batch(url, 1, [(1, "a")])       # replay: skipped
    _micro_batch(url, 2, [])               # an empty batch still records its progress
    assert _sql(url, "SELECT id, v, count(*) FROM t GROUP BY id, v") == [[(1, "a", 3)]]
    assert _progress(url).batch_id == 2
    with pytest.raises(SchemaError, match="upsert needs one"):
        _micro_batch(url, 3, [(1, "a")], mode="upsert")


def test_a_table_views_read_is_refused(tmp_path):
    url = str(tmp_path / "db")
    _sql(url, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)",
         "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    with pytest.raises(ViewsWouldGoStaleError, match="materialized view"):
        _micro_batch(url, 0, [(1, "a")], mode="upsert")
    assert _sql(url, "SELECT n FROM m") == [[(0,)]] and _progress(url) is None


def test_query_names_and_options_are_checked(tmp_path):
    assert query_name({"query_name": "mine", "checkpointLocation": "/x"}) == "mine"
    assert query_name({"checkpointLocation": str(tmp_path) + "/"}) == f"checkpoint:{tmp_path}"
    long = query_name({"checkpointLocation": "/" + "d/" * 300})
    assert long.startswith("checkpoint:") and len(long.encode()) <= 200
    with pytest.raises(SchemaError, match="query_name"):
        HummockStreamWriter({"url": str(tmp_path / "db"), "table": "t"}, SCHEMA)
    with pytest.raises(SchemaError, match="mode"):
        _micro_batch(str(tmp_path / "db"), 0, [(1, "a")], mode="merge")


class _TaskContext:
    """What ``write`` asks of pyspark's TaskContext: partition, attempt, the batch id property."""

    def __init__(self, partition: int, batch_id: int):
        self.partition, self.batch_id = partition, batch_id

    def partitionId(self):
        return self.partition

    def attemptNumber(self):
        return 0

    def getLocalProperty(self, name):
        return str(self.batch_id) if name == "streaming.sql.batchId" else None


def _tasks_batch(url, batch_id, tasks, **options):
    """One micro-batch of several tasks (``tasks[p]``: partition p's rows, in input order)."""
    import pickle

    from pyspark import TaskContext

    opts = {"url": url, "table": "t", "query_name": "q", **{k: str(v) for k, v in options.items()}}
    planned = pickle.loads(pickle.dumps(HummockStreamWriter(opts, SCHEMA)))
    messages = []
    with pytest.MonkeyPatch.context() as patch:
        for p, rows in enumerate(tasks):
            patch.setattr(TaskContext, "get", staticmethod(lambda p=p: _TaskContext(p, batch_id)))
            messages.append(planned.write(iter([_batch(rows)])))
    HummockStreamWriter(opts, SCHEMA).commit(messages, batch_id)


def _table_rows(url) -> dict:
    from relational.spark import _serde, find_table

    with HummockStorage.open(url, read_only=True) as store:
        epoch = store.max_committed_epoch
        desc = find_table(store, "t", epoch)
        serde = _serde(desc)
        return dict(serde.decode(k, v)[:2] for k, v in store.iter(desc.table_id, epoch))


_batches = st.lists(st.lists(st.lists(st.tuples(st.integers(0, 6), st.text("ab", max_size=2)), max_size=6),
                             min_size=1, max_size=3), min_size=1, max_size=3)


@settings(max_examples=15)
@given(_batches, st.sampled_from(["upsert", "append"]), st.booleans())
def test_modes_match_a_model_across_tasks_batches_and_replays(tmp_path_factory, batches, mode, replay):
    """upsert: the last row of a pk wins (tasks in partition order, rows in input order);
    append: the first wins and a stored pk is never changed; a replayed batch changes nothing."""
    url = str(tmp_path_factory.mktemp("sink") / "db")
    model: dict = {}
    for batch_id, tasks in enumerate(batches):
        _tasks_batch(url, batch_id, tasks, mode=mode, pk="id")
        if replay:
            _tasks_batch(url, batch_id, [[(0, "REPLAY")]], mode=mode, pk="id")
        for rows in tasks:
            for pk, v in rows:
                if mode == "upsert" or pk not in model:
                    model[pk] = v
        assert _table_rows(url) == model


# --- on Spark ------------------------------------------------------------------------------------

def _write_files(directory, start, count, *, prefix="f", rows_per_file=10, offset=0):
    os.makedirs(directory, exist_ok=True)
    for f in range(start, start + count):
        with open(os.path.join(directory, f"{prefix}{f:03d}.json"), "w") as out:
            for i in range(f * rows_per_file, (f + 1) * rows_per_file):
                out.write(json.dumps({"id": i + offset, "v": f"{prefix}{i}"}) + "\n")


def _start(spark, source, url, checkpoint, trigger=None, **options):
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source)
    writer = df.writeStream.format("hummock").option("url", url).option("table", "t") \
        .option("checkpointLocation", checkpoint)
    for name, value in options.items():
        writer = writer.option(name, str(value))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


@pytest.fixture(scope="module")
def hummock_spark(spark):
    register(spark)
    return spark


def test_file_stream_upsert_with_available_now_then_updates(hummock_spark, tmp_path):
    source, url, checkpoint = str(tmp_path / "in"), str(tmp_path / "db"), str(tmp_path / "ckpt")
    _write_files(source, 0, 3)
    query = _start(hummock_spark, source, url, checkpoint, mode="upsert", pk="id")
    query.awaitTermination()
    assert query.exception() is None
    assert _sql(url, "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM t") == [[(30, 30, 0, 29)]]
    _write_files(source, 0, 1, prefix="g", offset=5)          # ids 5..14 again: overwritten
    query = _start(hummock_spark, source, url, checkpoint, mode="upsert", pk="id")
    query.awaitTermination()
    got = _sql(url, "SELECT count(*) FROM t", "SELECT id, v FROM t WHERE id IN (4, 5, 14, 15) ORDER BY id")
    assert got == [[(30,)], [(4, "f4"), (5, "g0"), (14, "g9"), (15, "f15")]]
    assert _progress(url, query_name({"checkpointLocation": checkpoint})).batch_id == 3
    assert verify(url, show_progress=False).ok


def test_crash_after_commit_before_sparks_commit_log_lands_each_row_once(hummock_spark, tmp_path):
    """Append into a table without pk: a batch applied twice would show its rows twice."""
    source, url, checkpoint = str(tmp_path / "in"), str(tmp_path / "db"), str(tmp_path / "ckpt")
    _write_files(source, 0, 4)
    query = _start(hummock_spark, source, url, checkpoint, test_fail_after_commit=1)
    with pytest.raises(Exception, match="injected failure after committing micro-batch 1"):
        query.awaitTermination()
    assert not os.path.exists(os.path.join(checkpoint, "commits", "1"))   # Spark never logged batch 1
    assert _sql(url, "SELECT count(*) FROM t") == [[(20,)]]              # ... but it landed
    query = _start(hummock_spark, source, url, checkpoint)                # restart: replays batch 1
    query.awaitTermination()
    assert query.exception() is None
    # and a lost commit-log entry of the last batch: Spark replays it, the progress record skips it
    last = max(int(n) for n in os.listdir(os.path.join(checkpoint, "commits")) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        path = os.path.join(checkpoint, "commits", name)
        if os.path.exists(path):
            os.remove(path)
    query = _start(hummock_spark, source, url, checkpoint)
    query.awaitTermination()
    assert query.exception() is None
    got = _sql(url, "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM t")
    assert got == [[(40, 40, 0, 39)]]
    with HummockStorage.open(url, read_only=True) as store:
        assert list_progress(store, store.max_committed_epoch)[0].batch_id == last == 3


def test_processing_time_trigger_and_a_table_with_views_is_refused(hummock_spark, tmp_path):
    source, url = str(tmp_path / "in"), str(tmp_path / "db")
    _write_files(source, 0, 2)
    query = _start(hummock_spark, source, url, str(tmp_path / "c1"), {"processingTime": "100 milliseconds"},
                   query_name="live", mode="upsert", pk="id")
    try:
        query.processAllAvailable()
        _write_files(source, 2, 2)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert _sql(url, "SELECT count(*), count(DISTINCT id) FROM t") == [[(40, 40)]]
    progress = _progress(url, "live")
    assert isinstance(progress, Progress) and progress.batch_id >= 3
    _sql(url, "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    query = _start(hummock_spark, source, url, str(tmp_path / "c2"), query_name="other", mode="upsert")
    with pytest.raises(Exception, match="ViewsWouldGoStaleError|read by materialized view"):
        query.awaitTermination()
    assert _sql(url, "SELECT n FROM m") == [[(40,)]] and _progress(url, "other") is None
