"""The Spark data source (relational/spark.py) on the session's local[2] Spark (fixture ``spark``).

Covers: every DataType maps to a Spark type, and back where a load creates a table; reads equal
``StorageTable`` at the same epoch (as encoded rows) for random schemas over every type, on a
local store and on S3 (moto); a read at a pinned epoch stays exact while the writer keeps
committing, compacting and vacuuming (the job pin keeps the version's SSTs); column pruning and
pk pushdown; a bulk load reopens and reads the same through KV, StateTable, StorageTable and
Spark; a load with an injected task failure publishes nothing and leaves no orphan after vacuum;
duplicate pks and non-empty tables are refused. Hypothesis runs few examples here (each is a
Spark job). Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``).
"""

import datetime
import decimal
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from hummock.key import new_epoch
from relational.arrow import to_pylist
from relational.catalog import Catalog, TableDesc
from relational.errors import SchemaError
from relational.spark import HummockPushdownReader, register
from relational.spark_types import from_spark_type, spark_column, spark_type, table_column
from relational.state_table import StateTable
from relational.storage_table import StorageTable
from relational.types import DataType as T
from relational.types import Interval
from strategies import SCALARS, data_types, rows
from table_stores import OPTIONS, location

SPARK_EXAMPLES = settings(max_examples=4, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def hummock_spark(spark):
    register(spark)
    return spark


def _spark_options(url, options):
    out = {"url": url}
    for name in ("s3_access_key_id", "s3_secret_access_key"):
        if getattr(options, name):
            out[name] = getattr(options, name)
    return out


def _read(spark, url, options, table, **extra):
    reader = spark.read.format("hummock")
    for name, value in {**_spark_options(url, options), "table": table, **extra}.items():
        reader = reader.option(name, str(value))
    return reader


def _encoded(desc, table: pa.Table):
    """Sorted (key, value) encodings of the rows of an Arrow table in Spark's layout."""
    serde = StorageTable.from_desc(None, desc).serde
    columns = []
    for name, dtype in desc.columns:
        column = table_column(table.column(name), dtype)
        columns.append(to_pylist(column, dtype) if isinstance(column, (pa.Array, pa.ChunkedArray)) else column)
    return sorted(serde.encode(row) for row in zip(*columns)) if columns and table.num_rows else []


def _expected(store, desc, epoch):
    """The table's stored (key, value) pairs at ``epoch``: what StorageTable reads, taken
    straight from the store (an Arrow batch cannot hold every INTERVAL the strategy draws)."""
    return sorted(store.iter(desc.table_id, epoch))


def _write_table(store, desc, rows_):
    epoch = new_epoch()
    Catalog(store).put(desc, epoch)
    table = StateTable.from_desc(store, desc)
    table.init_epoch(epoch)
    seen = set()
    for row in rows_:
        key = table.serde.key_of_pk(table.serde.pk_of(row))
        if key not in seen:
            seen.add(key)
            table.insert(row)
    table.commit(new_epoch())
    store.checkpoint(epoch)
    return epoch


# --- types (no Spark job) -------------------------------------------------------------------------

def test_every_type_maps_to_spark_and_loads_map_back():
    for dtype in SCALARS + [T.struct([("a", T.INT), ("b", T.list(T.VARCHAR))]), T.list(T.INTERVAL)]:
        stype = spark_type(dtype)
        assert stype.simpleString()
    back = {T.DECIMAL: T.VARCHAR, T.TIME: T.VARCHAR, T.JSONB: T.VARCHAR, T.INTERVAL: T.struct(
        [("months", T.INT), ("days", T.INT), ("microseconds", T.BIGINT)])}
    for dtype in SCALARS:
        assert from_spark_type(spark_type(dtype), "c") == back.get(dtype, dtype)
    from pyspark.sql import types as ST
    assert from_spark_type(ST.DecimalType(10, 2), "c") == T.DECIMAL
    for refused in (ST.ByteType(), ST.MapType(ST.StringType(), ST.IntegerType()), ST.CalendarIntervalType()):
        with pytest.raises(SchemaError, match="column c"):
            from_spark_type(refused, "c")


def test_to_arrow_and_to_parquet_without_spark(tmp_path):
    import pyarrow.dataset as ds

    url, options = location("local", tmp_path, None)
    desc = TableDesc(4, "t", (("id", T.BIGINT), ("iv", T.INTERVAL), ("s", T.VARCHAR)), (0,), dist_key_indices=(0,))
    with HummockStorage.open(url, options) as store:
        epoch = _write_table(store, desc, [(i, Interval(i, 2, 3), f"s{i}") for i in range(500)])
        reader = StorageTable.from_desc(store, desc)
        table = reader.to_arrow(epoch)
        assert table.num_rows == 500 and table.schema == reader.arrow_schema()
        assert sorted(table.column("id").to_pylist()) == list(range(500))
        reader.to_parquet(tmp_path / "out", epoch, max_rows_per_file=200, max_rows_per_group=200)
        back = ds.dataset(tmp_path / "out", format="parquet").to_table()
        assert back.num_rows == 500
        assert sorted((r["id"], r["iv"]["months"], r["iv"]["usecs"], r["s"]) for r in back.to_pylist()) == \
            [(i, i, 3, f"s{i}") for i in range(500)]


# --- reads ------------------------------------------------------------------------------------------

@SPARK_EXAMPLES
@given(data=st.data())
def test_reads_equal_storage_table_on_local_and_s3(hummock_spark, tmp_path_factory, request, data):
    kind = data.draw(st.sampled_from(["local", "s3"]), label="store")
    types = list(data.draw(st.permutations(SCALARS), label="scalars"))   # every type, every example
    types += data.draw(st.lists(data_types(2).filter(lambda t: t.is_composite), max_size=2), label="composites")
    columns = tuple((f"c{i}", t) for i, t in enumerate(types))
    pk = data.draw(st.lists(st.sampled_from(range(len(types))), min_size=1, max_size=3, unique=True), label="pk")
    desc = TableDesc(5, "random", columns, tuple(pk), dist_key_indices=(pk[0],))
    rows_ = data.draw(st.lists(rows(types), max_size=30), label="rows")
    url, options = location(kind, tmp_path_factory.mktemp("read"), request)
    with HummockStorage.open(url, options) as store:
        epoch = _write_table(store, desc, rows_)
        expected = _expected(store, desc, epoch)
    got = _read(hummock_spark, url, options, "random", partition_bytes="64k").load().toArrow()
    assert _encoded(desc, got) == expected


SIMPLE = [t for t in SCALARS if t not in (T.DECIMAL, T.INTERVAL)]


@SPARK_EXAMPLES
@given(data=st.data())
def test_column_path_reads_equal_the_stored_rows(hummock_spark, tmp_path_factory, request, data):
    """Simple columns are read straight into Arrow buffers (relational/scan_columns.py; TIME then
    becomes Spark's string): every value equals the stored row's, converted as the row path
    converts it; a DECIMAL or INTERVAL column not read is stepped over."""
    import math

    types = list(data.draw(st.permutations(SIMPLE), label="simple")) + [T.DECIMAL, T.INTERVAL]
    columns = tuple((f"c{i}", t) for i, t in enumerate(types))
    pk = data.draw(st.sampled_from(range(len(SIMPLE))), label="pk")
    desc = TableDesc(9, "simple", columns, (pk,), dist_key_indices=(pk,))
    rows_ = data.draw(st.lists(rows(types), max_size=30), label="rows")
    url, options = location("local", tmp_path_factory.mktemp("simple"), request)
    with HummockStorage.open(url, options) as store:
        epoch = _write_table(store, desc, rows_)
        serde = StorageTable.from_desc(store, desc).serde
        stored = [serde.decode(k, v) for k, v in _expected(store, desc, epoch)]   # in key order
    names = [f"c{i}" for i in range(len(SIMPLE))]
    got = _read(hummock_spark, url, options, "simple", partition_bytes="64k", columns=",".join(names)).load().toArrow()

    def norm(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v
    assert got.num_rows == len(stored)
    for i, name in enumerate(names):
        field = got.schema.field(name)
        want = spark_column([r[i] for r in stored], types[i], field.type)
        assert [norm(v) for v in got.column(name).to_pylist()] == [norm(v) for v in want.to_pylist()], name


def test_read_at_a_pinned_epoch_stays_exact_while_the_writer_commits_compacts_and_vacuums(
        hummock_spark, tmp_path, request):
    """Every commit rewrites every row with its epoch; a read at epoch E returns exactly E's rows
    while a writer thread commits, compacts everything and vacuums with the least grace the
    lease protocol allows (1 s: half the 2 s reader lease; with none, a reader loading the
    manifest while an SST leaves the version may lose it before its lease is published --
    options.py, leases.py -- which a loaded host showed): the executors read the pinned
    version, whose SSTs the job pin keeps."""
    url, options = location("local", tmp_path, request, OPTIONS.replace(
        vacuum_min_age_s=1.0, reader_lease_s=2.0, retention_seconds=300, compactor="local"))
    desc = TableDesc(6, "moving", (("id", T.INT), ("e", T.BIGINT)), (0,), dist_key_indices=(0,))
    store = HummockStorage.open(url, options)
    stop, errors = threading.Event(), []
    try:
        epoch = new_epoch()
        Catalog(store).put(desc, epoch)
        table = StateTable.from_desc(store, desc)
        table.init_epoch(epoch)
        for i in range(300):
            table.insert((i, epoch))
        pinned = epoch
        table.commit(new_epoch())
        store.checkpoint(pinned)

        def writer():
            try:
                while not stop.is_set():
                    current = table.epoch
                    for i in range(300):
                        table.update((i, prev_epochs[-1]), (i, current))
                    prev_epochs.append(current)
                    table.commit(new_epoch())
                    store.checkpoint(current)
                    store.compact_all()
                    store.vacuum()
            except Exception as exc:   # noqa: BLE001 -- reported by the test
                errors.append(exc)

        prev_epochs = [pinned]
        thread = threading.Thread(target=writer)
        df = _read(hummock_spark, url, options, "moving", epoch=pinned, partition_bytes="64k",
                   pin_ttl_s=600).load()
        thread.start()
        time.sleep(0.5)
        got = sorted(tuple(r) for r in df.collect())
        stop.set()
        thread.join()
        assert not errors
        assert len(prev_epochs) > 1                       # the writer did move on meanwhile
        assert got == [(i, pinned) for i in range(300)]
        latest = sorted(tuple(r) for r in _read(hummock_spark, url, options, "moving").load().collect())
        assert latest == [(i, prev_epochs[-1]) for i in range(300)]
    finally:
        stop.set()
        store.close()


def test_column_pruning_and_pk_pushdown(hummock_spark, tmp_path, request):
    url, options = location("local", tmp_path, request)
    desc = TableDesc(8, "pairs", (("g", T.INT), ("id", T.BIGINT), ("s", T.VARCHAR)), (0, 1),
                     dist_key_indices=(0,))
    with HummockStorage.open(url, options) as store:
        _write_table(store, desc, [(i % 7, i, f"s{i}") for i in range(700)])
    pruned = _read(hummock_spark, url, options, "pairs", columns="s,id").load()
    assert pruned.columns == ["s", "id"] and pruned.count() == 700
    by_schema = hummock_spark.read.format("hummock").schema("id BIGINT").option("url", url).option("table", "pairs")
    assert sorted(r.id for r in by_schema.load().collect()) == list(range(700))
    with pytest.raises(Exception, match="no column"):
        hummock_spark.read.format("hummock").schema("nope INT").option("url", url).option("table", "pairs") \
            .load().collect()
    # the reader itself: g = 3 pins one vnode; 100 <= id < 200 narrows within it
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan
    schema = _read(hummock_spark, url, options, "pairs").load().schema
    reader = HummockPushdownReader({"url": url, "table": "pairs"}, schema)
    filters = [EqualTo(("g",), 3), GreaterThanOrEqual(("id",), 100), LessThan(("id",), 200)]
    assert list(reader.pushFilters(filters)) == filters      # Spark still checks every filter
    ranges = [r for p in reader.partitions() for r in p.ranges]
    assert len(ranges) == 1 and ranges[0][0][:2] == ranges[0][1][:2]   # one vnode, one pk range
    hummock_spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = _read(hummock_spark, url, options, "pairs", pushdown="true").load()
        got = sorted(r.id for r in df.filter("g = 3 and id >= 100 and id < 200").collect())
        assert got == [i for i in range(100, 200) if i % 7 == 3]
    finally:
        hummock_spark.conf.unset("spark.sql.python.filterPushdown.enabled")


# --- bulk loads -------------------------------------------------------------------------------------

LOAD_SCHEMA = "id BIGINT, name STRING, score DOUBLE, d DECIMAL(10,2), tags ARRAY<INT>, day DATE"


def _load_rows(n):
    return [(i, f"n{i}", i / 3, decimal.Decimal(i) / 4, [i, i + 1], datetime.date(2024, 1, 1 + i % 28))
            for i in range(n)]


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_bulk_load_then_reopen_reads_the_same_through_every_path(hummock_spark, tmp_path, request, kind):
    url, options = location(kind, tmp_path, request)
    with HummockStorage.open(url, options):
        pass   # the store exists; nothing holds its writer lock during the load
    data = _load_rows(2000)
    df = hummock_spark.createDataFrame(data, LOAD_SCHEMA).repartition(3)
    writer = df.write.format("hummock").mode("append")
    for name, value in {**_spark_options(url, options), "table": "loaded", "pk": "id"}.items():
        writer = writer.option(name, value)
    writer.save()
    expected = sorted((i, f"n{i}", i / 3, decimal.Decimal(i) / 4, [i, i + 1], datetime.date(2024, 1, 1 + i % 28))
                      for i in range(2000))
    with HummockStorage.open(url, options) as store:
        epoch = store.max_committed_epoch
        desc = [d for d in Catalog(store).list(epoch) if d.name == "loaded"][0]
        assert [n for n, _ in desc.columns] == ["id", "name", "score", "d", "tags", "day"]
        storage_rows = sorted(r for b in StorageTable.from_desc(store, desc).batch_iter(epoch)
                              for r in zip(*[to_pylist(b.column(i), t) for i, (_, t) in enumerate(desc.columns)]))
        assert storage_rows == expected
        state = StateTable.from_desc(store, desc)
        state.init_epoch(new_epoch())
        assert state.get_row((7,)) == expected[7]
        key = state.serde.key_of_pk((7,))
        assert state.serde.decode(key, store.get(desc.table_id, key, epoch)) == expected[7]   # KV
        store.compact_all()
        assert sorted(r for b in StorageTable.from_desc(store, desc).batch_iter(store.max_committed_epoch)
                      for r in zip(*[to_pylist(b.column(i), t) for i, (_, t) in enumerate(desc.columns)])) == expected
    got = _read(hummock_spark, url, options, "loaded").load().collect()
    assert sorted((r.id, r.name, r.score, decimal.Decimal(r.d), r.tags, r.day) for r in got) == expected


def test_failed_load_publishes_nothing_and_leaves_no_orphan(hummock_spark, tmp_path, request):
    url, options = location("local", tmp_path, request, OPTIONS.replace(vacuum_min_age_s=0))
    with HummockStorage.open(url, options):
        pass
    df = hummock_spark.createDataFrame(_load_rows(600), LOAD_SCHEMA).repartition(2)
    writer = df.write.format("hummock").mode("append").option("url", url).option("table", "broken") \
        .option("pk", "id").option("vacuum_min_age_s", "0").option("test_fail_partition", "1")
    with pytest.raises(Exception, match="injected failure"):
        writer.save()
    with HummockStorage.open(url, options) as store:
        store.vacuum()
        assert Catalog(store).list(store.max_committed_epoch) == []
        listed = {m.path for m in store._store.list("sst/")}
        assert listed == {info.object_path for info in store.version().all_ssts()}


def test_loads_refuse_duplicates_and_non_empty_tables(hummock_spark, tmp_path, request):
    url, options = location("local", tmp_path, request)
    with HummockStorage.open(url, options):
        pass
    rows_ = _load_rows(50) + _load_rows(1)
    dup = hummock_spark.createDataFrame(rows_, LOAD_SCHEMA).coalesce(1)
    with pytest.raises(Exception, match="repeats primary key"):
        dup.write.format("hummock").mode("append").option("url", url).option("table", "d").option("pk", "id").save()
    ok = hummock_spark.createDataFrame(_load_rows(50), LOAD_SCHEMA).coalesce(1)
    ok.write.format("hummock").mode("append").option("url", url).option("table", "d").option("pk", "id") \
        .option("vacuum_min_age_s", "0").save()   # the load's own opens spare its young SSTs
    with pytest.raises(Exception, match="not empty"):
        ok.write.format("hummock").mode("append").option("url", url).option("table", "d").save()
    assert _read(hummock_spark, url, options, "d").load().count() == 50
