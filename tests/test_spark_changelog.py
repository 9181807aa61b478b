"""The change-log Spark streaming source (relational/spark_changelog.py) on the session's
local[2] Spark (fixture ``spark``).

An aggregate MV maintained by the in-process SQL runtime gets a subscription; its change log is
read with ``spark.readStream.format("hummock")`` and ``trigger(availableNow=True)`` into
``foreachBatch``, in two runs of one checkpointed query (the second run reads only the epochs
committed after the first), and compared with a SQL subscription cursor's output over the
same epochs; the query's consumer pin follows its committed batches (Spark calls commit(end)
when it plans the next batch or restarts, so the pin may lag one batch: it holds more, never
less). A stream whose start position fell out of the retention fails with
``ChangeLogExpiredError`` in the message. The reader's methods are also called directly (no
Spark job) for offsets, partitions, pins and errors. Runs in both modes.
"""

import threading

import pytest

import sql
from hummock import HummockStorage
from relational.change_log import ChangeLogWriter, ChangeLogSpec, pinned_position, retention_cutoff
from relational.row_serde import RowSerde
from relational.spark import register


@pytest.fixture(scope="module")
def hummock_spark(spark):
    register(spark)
    return spark


def _run_stream(spark, url, checkpoint, **options):
    got, lock = [], threading.Lock()

    def sink(df, batch_id):
        rows = [tuple(r) for r in df.collect()]
        with lock:
            got.extend(rows)

    reader = spark.readStream.format("hummock").option("url", url)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return got


def _normalize(rows):
    """Order-free comparison: (epoch, op, row) sorted (partitions carry no order among them)."""
    return sorted(rows, key=repr)


def test_mv_change_log_as_a_stream_equals_the_cursor(hummock_spark, tmp_path):
    url = str(tmp_path / "db")
    conn = sql.connect(url, barrier_interval_ms=0)
    try:
        conn.execute("CREATE TABLE bids (id INT PRIMARY KEY, auction INT, price INT)")
        conn.execute("CREATE MATERIALIZED VIEW q AS SELECT auction, count(*) AS n, max(price) AS top "
                     "FROM bids GROUP BY auction")
        conn.execute("INSERT INTO bids VALUES (1, 10, 5), (2, 11, 7)")
        conn.execute("FLUSH")
        conn.execute("CREATE SUBSCRIPTION qs FROM q WITH (retention = '1 day')")
        start = conn.db.store.max_committed_epoch
        conn.execute(f"DECLARE c SUBSCRIPTION CURSOR FOR qs SINCE {start}")
        conn.execute("INSERT INTO bids VALUES (3, 10, 9), (4, 12, 1)")
        conn.execute("FLUSH")
        conn.execute("UPDATE bids SET price = 2 WHERE id = 3")
        conn.execute("DELETE FROM bids WHERE id = 2")
        conn.execute("FLUSH")
        checkpoint = str(tmp_path / "ckpt")
        first = _run_stream(hummock_spark, url, checkpoint, subscription="qs", startingOffsets=start, consumer="q1")
        conn.execute("INSERT INTO bids VALUES (5, 12, 20)")
        conn.execute("FLUSH")
        second = _run_stream(hummock_spark, url, checkpoint, subscription="qs", startingOffsets=start, consumer="q1")
        cursor = conn.execute("FETCH ALL FROM c").fetchall()
        stream = [(r[0], r[1], r[2], r[3], r[5]) for r in first + second]
        assert len(cursor) >= 6 and len(first) > 0 and len(second) > 0
        assert _normalize(stream) == _normalize(cursor)
        assert all(r[4] > start for r in first + second)                     # epochs after the start
        assert max(r[4] for r in first) < min(r[4] for r in second)          # no epoch read twice
        log_id = conn.db.catalog.subscriptions["qs"].table_id                # the consumer's durable position
        pin = pinned_position(conn.db.store._store, log_id)
        assert max(r[4] for r in first) <= pin <= max(r[4] for r in second)   # Spark commits a batch late
    finally:
        conn.close()


def test_stream_from_a_position_retention_dropped_fails(hummock_spark, tmp_path):
    url = str(tmp_path / "db")
    conn = sql.connect(url, barrier_interval_ms=0)
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.execute("CREATE SUBSCRIPTION ts FROM t WITH (retention = '1 s')")
        start = conn.db.store.max_committed_epoch
        conn.execute("INSERT INTO t VALUES (1, 1)")
        conn.execute("FLUSH")
        sub = conn.db.catalog.subscriptions["ts"]
    finally:
        conn.close()
    # an epoch far enough after the first that the retention hides it, written through the log
    # writer directly (no sleeping): a later epoch's commit advances the watermark
    with HummockStorage.open(url) as store:
        later = retention_cutoff(store.max_committed_epoch, -5000)
        serde = RowSerde(sub.desc.types, sub.desc.pk_indices)
        writer = ChangeLogWriter(store, ChangeLogSpec(sub.table_id, 1000), serde, lambda: range(256))
        writer.commit(later)
        store.checkpoint(later)
    with pytest.raises(Exception, match="older than what it keeps"):
        _run_stream(hummock_spark, url, str(tmp_path / "ckpt"), subscription="ts", startingOffsets=start)


# --- the reader's methods called directly (no Spark job: what the planning worker and the
# executors run), so the offsets, the position checks and the consumer pin are cheap to test

def _reader(url, **options):
    from relational.spark_changelog import HummockChangeLogStreamReader, changelog_schema
    options = {"url": url, **{k: str(v) for k, v in options.items()}}
    return HummockChangeLogStreamReader(options, changelog_schema(options))


def _read_all(reader, start, end):
    rows = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            rows += [tuple(r.values()) for r in batch.to_pylist()]
    return rows


def test_reader_offsets_partitions_and_pins_without_spark(tmp_path):
    from relational.change_log import ChangeLogExpiredError
    from relational.errors import SchemaError
    url = str(tmp_path / "db")
    conn = sql.connect(url, barrier_interval_ms=0)
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR)")
        conn.execute("CREATE SUBSCRIPTION ts FROM t WITH (retention = '1 hour')")
        start = conn.db.catalog.subscriptions["ts"].start_epoch
        conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        conn.execute("FLUSH")
        conn.execute("UPDATE t SET v = 'z' WHERE k = 2")
        conn.execute("FLUSH")
        committed = conn.db.store.max_committed_epoch
        by_sub = _reader(url, subscription="ts", partitions=3, consumer="c1", startingOffsets="earliest")
        by_table = _reader(url, table="t", stream="true")
        assert by_sub.initialOffset() == {"epoch": start}                     # earliest: the subscription's start
        assert by_table.initialOffset() == {"epoch": committed}               # latest
        assert by_sub.latestOffset({"epoch": start}, None) == {"epoch": committed}
        rows = _read_all(by_sub, {"epoch": start}, {"epoch": committed})
        assert sorted(r[:3] for r in rows) == [(1, "a", "Insert"), (2, "b", "Insert"), (2, "b", "UpdateDelete"),
                                               (2, "z", "UpdateInsert")]
        assert all(start < r[3] <= committed for r in rows)
        assert len(by_sub.partitions({"epoch": start}, {"epoch": committed})) == 3
        assert by_sub.partitions({"epoch": committed}, {"epoch": committed}) == []
        assert sorted(_read_all(by_table, {"epoch": start}, {"epoch": committed})) == sorted(rows)
        log_id = conn.db.catalog.subscriptions["ts"].table_id
        assert pinned_position(conn.db.store._store, log_id) == start         # initialOffset pinned it
        by_sub.commit({"epoch": committed})
        assert pinned_position(conn.db.store._store, log_id) == committed
        with pytest.raises(ChangeLogExpiredError):                            # before the subscription
            by_sub.partitions({"epoch": start - (1 << 16)}, {"epoch": committed})
        with pytest.raises(SchemaError, match="no subscription"):
            _reader(url, subscription="nope")
        conn.execute("DROP SUBSCRIPTION ts")
        with pytest.raises(SchemaError, match="was dropped"):
            by_sub.partitions({"epoch": committed}, {"epoch": conn.db.store.max_committed_epoch})
        with pytest.raises(SchemaError, match="has no subscription"):
            conn.execute("CREATE TABLE u (k INT PRIMARY KEY)")
            _reader(url, table="u", stream="true")
    finally:
        conn.close()
