"""``HummockDataSource``: a PySpark data source (short name ``hummock``) over Hummock tables.

Register once per session -- ``spark.dataSource.register(HummockDataSource)`` or
:func:`register`; the Spark compaction runner's session registers it too once this module is
imported. docs/spark.md has the user's side.

**Read** ``spark.read.format("hummock").option("url", URL).option("table", NAME_OR_ID)
[.option("epoch", E)].load()``. The planning process opens the store read-only, takes version V
and epoch E (default: V's ``max_committed_epoch``; must be in ``[safe_epoch, max_committed]``),
and pins V with a *job pin* (``hummock/pinned_read.py``: a lease naming V, ``pin_ttl_s`` long,
never renewed) before its own lease goes. ``partitions()`` cuts the table's key ranges
(the whole table, or per vnode under pushdown) at SST block boundaries into partitions of about
``partition_bytes`` (``relational/table_scan.py``). Each task opens the object store (kept open
per worker), reads exactly version V at E (``VersionReader``) and yields Arrow record batches in
Spark's layout (``relational/spark_types.py``), simple columns decoded straight into Arrow
buffers (``relational/scan_columns.py``); it releases nothing -- the job pin expires.
Column pruning: a user ``.schema(...)`` naming a subset of the columns, or
``.option("columns", "a,b")``. Filter pushdown (``pushFilters``; opt in with
``.option("pushdown", "true")`` in a session with ``spark.sql.python.filterPushdown.enabled``):
equalities on a prefix of the pk and a range on the next pk column narrow the key ranges; every
filter is still evaluated by Spark. It is opt-in because Spark (4.3) keeps a DataFrame's scan
as narrowed by its last pushed filters and reuses it for a later query of that DataFrame
without filters, which would then miss rows: with pushdown on, build a DataFrame per query.

**Write (bulk load)** ``df.write.format("hummock").option("url", URL).option("table", NAME)
[.option("pk", "id")].mode("append").save()`` into an empty table (existing, or created from
the DataFrame's schema with the ``pk`` / ``dist_key`` / ``table_id`` options; without ``pk`` a
SQL table with a hidden ``_row_id`` pk, whose ids each task fills: ``bulk_load.task_columns``).
The planning process opens the store as its writer, picks the load's epoch (above ``max_committed_epoch``)
and reserves ``max_partitions * attempts * ids_per_task`` SST ids in one delta; task ``p``
attempt ``a`` sorts its rows and writes SSTs under its own id slice at ``epoch + p``
(``relational/bulk_load.py``); the commit opens the writer again and publishes every task's
SSTs -- and a new table's catalog record -- in one version delta (``ingest_ssts``), or nothing:
a failed job's ``abort`` deletes what it knows and vacuums. Every process that writes the store
must be this one at that moment (the store has one writer): close other writers first.
One catalog with SQL (docs/spark.md): a table that materialized views read is refused
(``ViewsWouldGoStaleError``); a new table's id comes from the allocator record SQL keeps
(``relational.catalog.claimed_table_ids`` / ``allocator_desc``; the commit moves it past the
id) and its record carries SQL's table properties, so SQL sees it.

**Streaming writes** ``df.writeStream.format("hummock")``: ``relational/spark_sink.py``.

Options (strings): ``url``, ``table``; reads: ``epoch``, ``columns``, ``partition_bytes``
(default 96 MiB), ``batch_rows`` (65,536), ``pin_ttl_s`` (3600), ``pushdown`` (true/false); writes: ``pk``,
``dist_key`` (default: the pk), ``table_id``, ``ids_per_task`` (1024), ``max_partitions``
(4096, at most 65536), ``attempts`` (4); any ``StorageOptions`` field (``s3_endpoint``,
``s3_access_key_id``, ``reader_lease_s``, ``target_sst_size``, ...). Bad options raise
:class:`~relational.errors.SchemaError` naming the option.

pyspark is imported here (users of this module run Spark); ``hummock`` never imports it back.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import fields

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, EqualTo,
                                    GreaterThan, GreaterThanOrEqual, InputPartition, LessThan,
                                    LessThanOrEqual, WriterCommitMessage)

from hummock import HummockStorage, StorageOptions
from hummock.errors import ExpiredEpochError
from hummock.key import EPOCH_SPILL_MASK, new_epoch
from hummock.version_codec import encode_version
from relational.bulk_load import ROW_ID_COLUMN, check_no_views, row_id_index, task_columns
from relational.catalog import ALLOCATOR_TABLE_ID, CATALOG_TABLE_ID, Catalog, TableDesc, claimed_table_ids
from relational.errors import SchemaError
from relational.spark_types import from_spark_type, same_type, spark_column, spark_schema
from relational.table_iter import pk_ranges
from relational.arrow import to_pylist
from relational.scan_columns import ColumnScan
from relational.table_scan import (DEFAULT_PARTITION_BYTES, block_weights, plan_partitions, scan_pairs, scan_rows,
                                   table_ssts)
from relational.types import DataType, TypeKind
from relational.vnode import Bitmap

SHORT_NAME = "hummock"
DEFAULT_PIN_TTL_S = 3600.0
DEFAULT_IDS_PER_TASK = 1024
DEFAULT_MAX_PARTITIONS = 4096
DEFAULT_ATTEMPTS = 4
EXECUTOR_BLOCK_CACHE_BYTES = 16 << 20
DEFAULT_BATCH_ROWS = 65536             # rows per Arrow batch a read task yields (fewer, larger batches cross to the JVM faster)
LOAD_MIN_AGE_S = StorageOptions().vacuum_min_age_s   # what a load's own writers spare at open
#: pk column kinds whose Spark filter values compare as our encodings do (pushdown narrows by them)
PUSHABLE_KINDS = frozenset((TypeKind.BOOLEAN, TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT,
                            TypeKind.VARCHAR, TypeKind.BYTEA, TypeKind.DATE))
_STORAGE_FIELDS = {f.name: f for f in fields(StorageOptions)}


# --- options ----------------------------------------------------------------------------------

def _option(options, name: str, required: bool = False):
    value = options.get(name)
    if value is None and required:
        raise SchemaError(f"the hummock data source needs .option({name!r}, ...)")
    return value


def _int_option(options, name: str, default: int, low: int = 0, high: int | None = None) -> int:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:], 1)
    try:
        number = int(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        raise SchemaError(f"option {name} must be an integer (k/m/g suffixes allowed), got {value!r}") from None
    if number < low or (high is not None and number > high):
        raise SchemaError(f"option {name} must be in [{low}, {high if high is not None else 'inf'}], got {value!r}")
    return number


def _names(options, name: str):
    value = options.get(name)
    if value is None:
        return None
    return [part.strip() for part in str(value).split(",") if part.strip()]


def storage_options(options) -> StorageOptions:
    """The ``StorageOptions`` the data source opens the store with: every option named like a
    field, parsed by the field's type; compaction off (the data source's processes are short)."""
    values = {}
    for name, value in options.items():
        f = _STORAGE_FIELDS.get(name.lower())
        if f is None or value is None:
            continue
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        try:
            values[f.name] = (int(value) if kind.startswith("int") else float(value) if kind.startswith("float")
                              else value)
        except ValueError:
            raise SchemaError(f"option {name} must be a {kind}, got {value!r}") from None
    values["compactor"] = "none"
    return StorageOptions(**values)


@dataclasses.dataclass(frozen=True)
class _Store:
    """Where the store is, picklable: URL + StorageOptions (S3 credentials travel with the task)."""

    url: str
    options: StorageOptions

    @classmethod
    def of(cls, options) -> _Store:
        url = str(_option(options, "url", required=True))
        if url.lower().startswith("memory:"):
            raise SchemaError("the hummock data source cannot use a memory:// store: Spark tasks run in "
                              "other processes; use a local directory or s3://")
        return cls(url, storage_options(options))

    def open(self, *, read_only: bool, spare_young: bool = False) -> HummockStorage:
        """Open the store. ``spare_young``: a writer whose vacuum at open spares objects younger
        than the default minimum age whatever the options say, so a load's own unpublished SSTs
        survive until its commit (``vacuum_min_age_s=0`` would delete them)."""
        options = self.options
        if spare_young and options.vacuum_min_age_s < LOAD_MIN_AGE_S:
            options = options.replace(vacuum_min_age_s=LOAD_MIN_AGE_S)
        return HummockStorage.open(self.url, options, read_only=read_only)


def find_table(storage, name_or_id, epoch: int) -> TableDesc | None:
    """The table named ``name_or_id`` (a name, or a decimal id) in the catalog at ``epoch``; a
    subscription's record (its change-log table, ``properties["subscription"]``) is not a table."""
    descs = [d for d in Catalog(storage).list(epoch) if "subscription" not in d.properties]
    text = str(name_or_id)
    for desc in descs:
        if desc.name == text:
            return desc
    if text.isdigit():
        for desc in descs:
            if desc.table_id == int(text):
                return desc
    return None


# --- reads ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _ReadPlan:
    """What every read task of one scan shares (pickled with the reader)."""

    store: object            # StoreDescription
    version: bytes           # the pinned version (HummockVersion.to_bytes)
    version_id: int
    epoch: int
    desc: TableDesc
    columns: tuple           # schema positions read, in output order


class HummockPartition(InputPartition):
    """One scan task: table-key ranges, ascending and disjoint."""

    def __init__(self, index: int, ranges):
        super().__init__(index)
        self.ranges = tuple(ranges)


def _read_epoch(options, version) -> int:
    text = options.get("epoch")
    epoch = version.max_committed_epoch if text is None else _int_option(options, "epoch", 0, 0, (1 << 64) - 1)
    if epoch & EPOCH_SPILL_MASK:
        raise SchemaError(f"option epoch {epoch} has its low 16 bits set; read at a committed epoch")
    if epoch > version.max_committed_epoch:
        raise SchemaError(f"option epoch {epoch} is above max_committed_epoch {version.max_committed_epoch}")
    if epoch < version.safe_epoch:
        raise ExpiredEpochError(epoch, version.safe_epoch)
    return epoch


class HummockReader(DataSourceReader):
    """Plans and reads one scan (module docstring). Built by :class:`HummockDataSource`."""

    def __init__(self, options, schema):
        store = _Store.of(options)
        self._partition_bytes = _int_option(options, "partition_bytes", DEFAULT_PARTITION_BYTES, 1 << 16)
        self._batch_rows = _int_option(options, "batch_rows", DEFAULT_BATCH_ROWS, 1, 1 << 22)
        pin_ttl = _int_option(options, "pin_ttl_s", int(DEFAULT_PIN_TTL_S), 1)
        with store.open(read_only=True) as storage:
            version = storage.version()
            epoch = _read_epoch(options, version)
            desc = find_table(storage, _option(options, "table", required=True), epoch)
            if desc is None:
                raise SchemaError(f"no table {options.get('table')!r} in the catalog at epoch {epoch}")
            from hummock.compaction.remote import StoreDescription
            from hummock.pinned_read import pin_version

            pin_version(storage._store, version.id, pin_ttl)   # while our own lease still holds it
            description = StoreDescription.of(storage._store, store.options)
            self._weights = block_weights(storage._store, table_ssts(version, desc.table_id), desc.table_id)
        names = [n for n, _ in desc.columns]
        columns = []
        for f in schema.fields:
            if f.name not in names:
                raise SchemaError(f"table {desc.name} has no column {f.name!r} (columns: {names})")
            i = names.index(f.name)
            if not same_type(f.dataType, desc.columns[i][1]):
                raise SchemaError(f"column {f.name} of table {desc.name} is {desc.columns[i][1].sql_name()}, read "
                                  f"as Spark {spark_schema([f.name], [desc.columns[i][1]]).simpleString()}; the "
                                  f"schema asked for {f.dataType.simpleString()}")
            columns.append(i)
        self._schema = schema
        self._plan = _ReadPlan(description, encode_version(version), version.id, epoch, desc, tuple(columns))
        self._ranges = [(b"", None)]

    def _narrow(self, pk_prefix, start, end, start_inclusive, end_inclusive) -> None:
        """Read only the key ranges of these pk bounds (``table_iter.pk_ranges``)."""
        self._ranges = [(lo, hi) for _, lo, hi in pk_ranges(_serde(self._plan.desc), Bitmap.full(), pk_prefix,
                                                            start, end, start_inclusive, end_inclusive)]

    def partitions(self):
        parts = plan_partitions(self._ranges, self._weights, self._partition_bytes)
        return [HummockPartition(i, ranges) for i, ranges in enumerate(parts)]

    def read(self, partition):
        from pyspark.sql.pandas.types import to_arrow_schema

        plan = self._plan
        desc = plan.desc
        target = to_arrow_schema(self._schema, timezone="UTC")
        reader = _version_reader(plan)
        serde = _serde(desc)
        types = desc.types
        scan = ColumnScan.of(serde, plan.columns)
        if scan is not None:   # straight into Arrow buffers; Spark's layout differs only for TIME
            pairs = scan_pairs(reader, desc.table_id, plan.epoch, partition.ranges)
            for n, arrays in scan.batches(pairs, self._batch_rows):
                arrays = [a if a.type == target.field(j).type else
                          spark_column(to_pylist(a, types[i]), types[i], target.field(j).type)
                          for j, (i, a) in enumerate(zip(plan.columns, arrays))]
                yield _record_batch(arrays, n, target)
            return
        for rows in scan_rows(reader, desc.table_id, plan.epoch, serde, partition.ranges, self._batch_rows):
            arrays = [spark_column([r[i] for r in rows], types[i], target.field(j).type)
                      for j, i in enumerate(plan.columns)]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)


def _record_batch(arrays, num_rows: int, schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``arrays``; with no column (a read of no columns), ``num_rows`` empty rows."""
    if arrays:
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    return pa.RecordBatch.from_struct_array(pa.StructArray.from_arrays([], fields=[], mask=None)
                                            if num_rows == 0 else pa.array([{}] * num_rows, pa.struct([])))


class HummockPushdownReader(HummockReader):
    """A :class:`HummockReader` that narrows its key ranges by pushed filters (module doc)."""

    def pushFilters(self, filters):
        desc = self._plan.desc
        names = [n for n, _ in desc.columns]
        by_column: dict = {}
        for f in filters:
            if isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) \
                    and len(f.attribute) == 1 and f.attribute[0] in names and f.value is not None:
                by_column.setdefault(names.index(f.attribute[0]), []).append(f)
        prefix, bounds = [], None
        for position, column in enumerate(desc.pk_indices):
            dtype = desc.columns[column][1]
            found = by_column.get(column, []) if dtype.kind in PUSHABLE_KINDS else []
            values = [_valid(dtype, f.value) for f in found]
            equal = [v for f, v in zip(found, values) if isinstance(f, EqualTo) and v is not _INVALID]
            if equal:
                prefix.append(equal[0])
                continue
            bounds = [(f, v) for f, v in zip(found, values) if v is not _INVALID]
            descending = desc.order_types[position].descending
            break
        if bounds:
            start = end = None
            start_inclusive, end_inclusive = True, False
            for f, v in bounds:
                lower = isinstance(f, (GreaterThan, GreaterThanOrEqual)) != descending   # in key order
                inclusive = isinstance(f, (GreaterThanOrEqual, LessThanOrEqual))
                if lower and start is None:
                    start, start_inclusive = (v,), inclusive
                elif not lower and end is None:
                    end, end_inclusive = (v,), inclusive
            self._narrow(tuple(prefix), start, end, start_inclusive, end_inclusive)
        elif prefix:
            self._narrow(tuple(prefix), None, None, True, False)
        return filters   # Spark still evaluates every filter: the ranges only narrow the scan


_INVALID = object()


def _valid(dtype, value):
    try:
        return dtype.validate(value)
    except Exception:   # noqa: BLE001 -- a value of another type is simply not pushed
        return _INVALID


# per worker process: pinned versions' readers, and serdes (a worker runs one task at a time)
_readers: dict = {}
_readers_lock = threading.Lock()
CACHED_READERS = 2


def _version_reader(plan: _ReadPlan):
    from hummock.compaction.remote import open_cached_store
    from hummock.pinned_read import VersionReader

    key = (plan.store, plan.version_id)
    with _readers_lock:
        reader = _readers.pop(key, None)
        if reader is None:
            reader = VersionReader(open_cached_store(plan.store), plan.version, EXECUTOR_BLOCK_CACHE_BYTES)
            while len(_readers) >= CACHED_READERS:
                _readers.pop(next(iter(_readers)))
        _readers[key] = reader
        return reader


def _serde(desc):
    from relational.row_serde import RowSerde

    return RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices)


# --- writes (bulk load) -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _LoadPlan:
    """What every write task of one load shares (pickled with the writer)."""

    store: _Store
    description: object      # StoreDescription
    desc: TableDesc
    new_table: bool
    epoch: int
    first_id: int
    ids_per_task: int
    attempts: int
    max_partitions: int
    fail_partition: int | None   # test hook: that partition's task fails after writing its SSTs


@dataclasses.dataclass
class HummockCommitMessage(WriterCommitMessage):
    partition: int
    infos: list              # SstableInfo dicts
    rows: int


def _new_desc(options, schema, table_id: int) -> TableDesc:
    name = str(_option(options, "table", required=True))
    columns = tuple((f.name, from_spark_type(f.dataType, f.name)) for f in schema.fields)
    names = [n for n, _ in columns]
    pk = _names(options, "pk")
    dist = _names(options, "dist_key")
    for col in (pk or []) + (dist or []):
        if col not in names:
            raise SchemaError(f"option pk/dist_key names {col!r}, not a column of the DataFrame ({names})")
    if not pk:   # a table without a primary key, as SQL's: a hidden BIGINT _row_id is its pk
        if ROW_ID_COLUMN in names:
            raise SchemaError(f"table {name}: without a pk option the table gets a hidden {ROW_ID_COLUMN} column; "
                              f"the DataFrame already has one (name the pk, or rename the column)")
        if _sql_properties(columns, False):
            return TableDesc(table_id, name, columns + ((ROW_ID_COLUMN, DataType.BIGINT),), (len(columns),),
                             dist_key_indices=tuple(names.index(c) for c in dist or ()),
                             properties=_sql_properties(columns, True))
        raise SchemaError(f"table {name} does not exist: a write creates it from the DataFrame's schema and, "
                          f"for a table with STRUCT or LIST columns, needs .option('pk', 'col1,col2') naming its "
                          f"primary key")
    return TableDesc(table_id, name, columns, tuple(names.index(c) for c in pk),
                     dist_key_indices=tuple(names.index(c) for c in (pk if dist is None else dist)),
                     properties=_sql_properties(columns, False))


def _sql_properties(columns, row_id: bool) -> dict:
    """What makes a loaded table a SQL table (``sql.catalog.Relation.to_desc``'s record format:
    a table with a user primary key, or with a hidden ``_row_id`` pk after the visible
    ``columns`` when ``row_id``; ON CONFLICT overwrite as CREATE TABLE's default); nothing for a
    table with a STRUCT or LIST column, which SQL has no type for."""
    if any(t.kind in (TypeKind.STRUCT, TypeKind.LIST) for _, t in columns):
        return {}
    return {"sql": {"kind": "table", "n_visible": len(columns), "row_id": row_id, "conflict": "overwrite",
                    "append_only": False, "definition": None, "internal_ids": [], "depends_on": []}}


def _check_schema(desc: TableDesc, schema) -> None:
    """The DataFrame has ``desc``'s columns (by name, any order); a hidden row id column may be
    left out (the write assigns ids)."""
    given = {f.name: f.dataType for f in schema.fields}
    names = [n for n, _ in desc.columns]
    rid = row_id_index(desc)
    if rid is not None and names[rid] not in given:
        names.pop(rid)
    if sorted(given) != sorted(names):
        raise SchemaError(f"the DataFrame's columns {sorted(given)} are not table {desc.name}'s {sorted(names)}")
    for name, dtype in desc.columns:
        if name in given and not same_type(given[name], dtype):
            raise SchemaError(f"column {name} of table {desc.name} is {dtype.sql_name()}; the DataFrame has "
                              f"{given[name].simpleString()}")


def new_table_desc(storage, options, schema, committed: int) -> TableDesc:
    """The description of a table a write creates from ``schema`` (options ``table``, ``pk``,
    ``dist_key``, ``table_id``), its id from the one allocator it shares with the SQL catalog:
    ids the catalog's records, its state tables (no record of their own) or its allocator record
    handed out, and ids holding data, are taken."""
    descs = Catalog(storage).list(committed)
    claimed, next_id = claimed_table_ids(descs)
    with_data = {t for i in storage.version().all_ssts() for t in i.table_ids} - {CATALOG_TABLE_ID}
    handed_out = next((d.properties.get("next_table_id") for d in descs
                       if d.table_id == ALLOCATOR_TABLE_ID), 1)
    default = max([next_id] + [t + 1 for t in with_data])
    table_id = _int_option(options, "table_id", default, 1, 0xFFFFFFFE)
    if table_id in claimed or table_id in with_data or \
            (isinstance(handed_out, int) and table_id < handed_out):
        raise SchemaError(f"table id {table_id} is already used (the catalog handed it out or it holds "
                          f"data); leave out the table_id option to take the next free id ({default})")
    return _new_desc(options, schema, table_id)


def plan_load(options, schema) -> _LoadPlan:
    """Driver side: resolve or describe the table, choose the epoch, reserve ids (module doc)."""
    store = _Store.of(options)
    ids_per_task = _int_option(options, "ids_per_task", DEFAULT_IDS_PER_TASK, 1, 1 << 20)
    max_partitions = _int_option(options, "max_partitions", DEFAULT_MAX_PARTITIONS, 1, EPOCH_SPILL_MASK + 1)
    attempts = _int_option(options, "attempts", DEFAULT_ATTEMPTS, 1, 64)
    fail = options.get("test_fail_partition")
    with store.open(read_only=False, spare_young=True) as storage:
        from hummock.compaction.remote import StoreDescription

        committed = storage.max_committed_epoch
        desc = find_table(storage, _option(options, "table", required=True), committed)
        new_table = desc is None
        if new_table:
            desc = new_table_desc(storage, options, schema, committed)
        else:
            check_no_views(storage, desc, committed)
            _check_schema(desc, schema)
            if table_ssts(storage.version(), desc.table_id):
                from hummock.external_ssts import TableNotEmptyError
                raise TableNotEmptyError(f"table {desc.name} is not empty: a bulk load goes into a new or "
                                         f"empty table")
        epoch = max(new_epoch(), (committed | EPOCH_SPILL_MASK) + 1)
        ids = storage.reserve_sst_ids(max_partitions * attempts * ids_per_task, hold=False)
        description = StoreDescription.of(storage._store, store.options)
    return _LoadPlan(store, description, desc, new_table, epoch, ids.start, ids_per_task, attempts,
                     max_partitions, None if fail is None else int(fail))


class HummockWriter(DataSourceArrowWriter):
    """One bulk load (module docstring): tasks build SSTs, the driver commits them in one delta."""

    def __init__(self, plan: _LoadPlan):
        self._plan = plan

    def write(self, iterator):
        from pyspark import TaskContext

        from hummock.compaction.remote import open_cached_store
        from relational.bulk_load import build_task_ssts

        plan = self._plan
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        if partition >= plan.max_partitions:
            raise SchemaError(f"the DataFrame has more than {plan.max_partitions} partitions; coalesce it or raise "
                              f"the max_partitions option (at most {EPOCH_SPILL_MASK + 1})")
        if attempt >= plan.attempts:
            raise SchemaError(f"task attempt {attempt} has no reserved SST ids (attempts={plan.attempts})")
        batches = list(iterator)
        rows = sum(b.num_rows for b in batches)
        infos = []
        if rows:
            table = pa.Table.from_batches(batches)
            desc = plan.desc
            columns = task_columns(table, desc, partition, plan.epoch)   # fresh row ids where the table has them
            first = plan.first_id + (partition * plan.attempts + attempt) * plan.ids_per_task
            infos = build_task_ssts(open_cached_store(plan.description), _serde(desc), desc.table_id, columns, rows,
                                    plan.epoch, partition, range(first, first + plan.ids_per_task),
                                    plan.store.options.sst_builder_options(), plan.store.options.target_sst_size,
                                    describe_pk=desc.name)
        if plan.fail_partition == partition:
            raise SchemaError(f"injected failure of partition {partition} after writing {len(infos)} SSTs (test hook)")
        return HummockCommitMessage(partition, [info.to_dict() for info in infos], rows)

    def commit(self, messages):
        from hummock.sstable.meta import SstableInfo
        from relational.bulk_load import commit_load

        plan = self._plan
        infos = [SstableInfo.from_dict(d) for m in messages if m is not None for d in m.infos]
        with plan.store.open(read_only=False, spare_young=True) as storage:
            commit_load(storage, plan.desc, infos, plan.epoch, new_table=plan.new_table)

    def abort(self, messages):
        """Delete the SSTs the finished tasks reported (never published), then vacuum: what
        failed tasks left is deleted by it once older than ``vacuum_min_age_s``."""
        from hummock.sstable.meta import sst_object_path

        ids = [d["sst_id"] for m in messages if m is not None for d in m.infos]
        with self._plan.store.open(read_only=False) as storage:
            referenced = storage.version().sst_ids()
            doomed = [sst_object_path(i) for i in ids if i not in referenced]
            if doomed:
                storage._store.delete(doomed)
            storage.vacuum()


# --- the data source ------------------------------------------------------------------------------

class HummockDataSource(DataSource):
    """``spark.read/write.format("hummock")`` (module docstring). Filter pushdown is off unless
    ``.option("pushdown", "true")`` (module docstring: it needs a session setting, and Spark
    4.3 reuses a DataFrame's narrowed scan for its later queries without filters)."""

    PUSHDOWN = False

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self):
        if self.options.get("subscription") is not None or self.options.get("stream") == "true":
            from relational.spark_changelog import changelog_schema   # a change-log stream's columns
            return changelog_schema(self.options)
        store = _Store.of(self.options)
        with store.open(read_only=True) as storage:
            epoch = _read_epoch(self.options, storage.version())
            desc = find_table(storage, _option(self.options, "table", required=True), epoch)
        if desc is None:
            raise SchemaError(f"no table {self.options.get('table')!r} in the catalog at epoch {epoch}")
        names, types = [n for n, _ in desc.columns], desc.types
        wanted = _names(self.options, "columns")
        if wanted is not None:
            missing = [c for c in wanted if c not in names]
            if missing:
                raise SchemaError(f"table {desc.name} has no columns {missing} (columns: {names})")
            types = [types[names.index(c)] for c in wanted]
            names = wanted
        return spark_schema(names, types)

    def reader(self, schema):
        text = str(self.options.get("pushdown", self.PUSHDOWN)).lower()
        return (HummockPushdownReader if text == "true" else HummockReader)(self.options, schema)

    def streamReader(self, schema):
        """``spark.readStream.format("hummock")``: a subscription's change log
        (relational/spark_changelog.py)."""
        from relational.spark_changelog import HummockChangeLogStreamReader
        return HummockChangeLogStreamReader(self.options, schema)

    def writer(self, schema, overwrite: bool):
        if overwrite:
            raise SchemaError("the hummock data source bulk-loads into a new or empty table: use "
                              "mode('append'), not overwrite")
        return HummockWriter(plan_load(self.options, schema))

    def streamWriter(self, schema, overwrite: bool):
        """``df.writeStream.format("hummock")``: relational/spark_sink.py."""
        from relational.spark_sink import HummockStreamWriter

        return HummockStreamWriter(self.options, schema, overwrite)


def register(spark) -> None:
    """Register the data source with ``spark`` under the short name ``hummock``."""
    spark.dataSource.register(HummockDataSource)


def _register_with_runner() -> None:
    from hummock.compaction import spark as runner

    runner.on_session(register)


_register_with_runner()

__all__ = ["HummockDataSource", "register", "SHORT_NAME", "find_table",
           "storage_options"]
