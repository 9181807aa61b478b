"""The change log as a Spark streaming source: ``spark.readStream.format("hummock")``.

``spark.readStream.format("hummock").option("url", URL).option("subscription", NAME).load()``
(or ``.option("table", REL)``: the relation's oldest subscription) streams the changes a
subscription's change log holds (relational/change_log.py, written by the relation's
Materialize whichever runtime runs it). Rows: the relation's visible columns, then ``op``
(string: ``Insert``, ``Delete``, ``UpdateDelete``, ``UpdateInsert``), ``epoch`` (long) and
``rw_timestamp`` (long, the epoch's unix ms). Within a micro-batch a partition's rows come in
``(epoch, vnode, pk)`` order; across partitions there is no order (sort by ``epoch`` if it
matters).

Offsets are ``{"epoch": E}``: a batch ``(start, end]`` holds every change of the epochs after
``start`` up to ``end``. ``initialOffset``: option ``startingOffsets`` -- ``latest`` (default:
the committed epoch when the query starts, so only later changes), ``earliest`` (the oldest
position the log still holds completely) or an epoch. ``latestOffset``: the store's
``max_committed_epoch`` (committed epochs only). ``partitions(start, end)`` runs in Spark's
long-lived planning worker: it opens the store read-only, checks that ``start`` is still held
(:class:`~relational.change_log.ChangeLogExpiredError` otherwise: retention dropped changes the
query has not read -- the query fails, never skips them), pins the current version with a job
pin (``hummock/pinned_read.py``, ``pin_ttl_s``, default 3600) -- a dropped subscription is
a SchemaError there too, never an empty stream -- and cuts the vnodes into
``partitions`` ranges (default 2). ``read`` (executors) reads the pinned version with a
``VersionReader`` at its ``max_committed_epoch`` -- log entries are written once and never
change, so a newer read epoch returns the same entries -- and yields Arrow batches.
With ``.option("consumer", NAME)`` the query's position is durable and holds the log's retention
back: ``initialOffset`` and every ``commit(end)`` write a consumer pin (relational/change_log.py)
at the position, alive ``consumer_ttl_s`` (default 7 days) after its last write, so the writer
keeps every change after the last committed batch however long the query stops (up to the
TTL). Spark calls ``commit(end)`` when it plans the next batch or restarts the query, so the
pin may lag one batch behind: it holds more, never less. Without a consumer only the
retention window keeps changes: a query stopped longer than it fails on restart with
ChangeLogExpiredError.

Options: ``url``, ``subscription`` or ``table`` (with ``stream`` = ``true``), ``startingOffsets``,
``consumer``, ``consumer_ttl_s``, ``partitions`` (1..256), ``pin_ttl_s``, ``batch_rows`` and any
StorageOptions field (S3 settings), as the batch source.

Callers: ``relational/spark.py`` ``HummockDataSource.streamReader``/``schema``.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from hummock.key import EPOCH_PHYSICAL_SHIFT, epoch_to_unix_ms
from relational.catalog import Catalog
from relational.change_log import (OP_NAMES, SUBSCRIPTION_PROPERTY, ChangeLogExpiredError, check_position,
                                   read_changes, retained_from, write_pin)
from relational.errors import SchemaError
from relational.types import DataType
from relational.vnode import VNODE_COUNT

DEFAULT_PARTITIONS = 2
DEFAULT_PIN_TTL_S = 3600
DEFAULT_BATCH_ROWS = 65536
DEFAULT_CONSUMER_TTL_S = 7 * 24 * 3600
EXTRA_COLUMNS = (("op", DataType.VARCHAR), ("epoch", DataType.BIGINT), ("rw_timestamp", DataType.BIGINT))

__all__ = ["HummockChangeLogStreamReader", "changelog_schema", "ChangeLogExpiredError"]


@dataclasses.dataclass(frozen=True)
class _Log:
    """One subscription's change log, as the catalog records it (picklable)."""

    name: str
    table_id: int
    desc: object             # the log's TableDesc: the relation's layout
    n_visible: int
    start_epoch: int


def _n_visible(rel_desc) -> int:
    sql = rel_desc.properties.get("sql") if isinstance(rel_desc.properties, dict) else None
    n = sql.get("n_visible") if isinstance(sql, dict) else None
    return n if isinstance(n, int) and 0 < n <= len(rel_desc.columns) else len(rel_desc.columns)


def find_log(storage, options, epoch: int) -> _Log:
    """The change log ``options`` name (``subscription``, or ``table``: its oldest subscription)."""
    descs = Catalog(storage).list(epoch)
    subs = [d for d in descs if SUBSCRIPTION_PROPERTY in d.properties]
    by_name = {d.name: d for d in descs if SUBSCRIPTION_PROPERTY not in d.properties}
    wanted, table = options.get("subscription"), options.get("table")
    if wanted is not None:
        found = [d for d in subs if d.name == str(wanted)]
        if not found:
            raise SchemaError(f"no subscription {wanted!r} in the catalog at epoch {epoch} (CREATE SUBSCRIPTION "
                              f"{wanted} FROM relation first)")
    elif table is not None:
        found = sorted((d for d in subs if d.properties[SUBSCRIPTION_PROPERTY].get("relation") == str(table)),
                       key=lambda d: d.table_id)
        if not found:
            raise SchemaError(f"relation {table!r} has no subscription: a change-log stream reads one (CREATE "
                              f"SUBSCRIPTION name FROM {table} WITH (retention = '1 day'))")
    else:
        raise SchemaError("a hummock stream needs .option('subscription', NAME) or .option('table', NAME)")
    desc = found[0]
    props = desc.properties[SUBSCRIPTION_PROPERTY]
    rel = by_name.get(props.get("relation"))
    return _Log(desc.name, desc.table_id, desc, _n_visible(rel) if rel is not None else len(desc.columns),
                int(props.get("start_epoch", 0)))


def changelog_schema(options):
    """The Spark schema of the stream ``options`` name (module docstring)."""
    from relational.spark import _Store
    from relational.spark_types import spark_schema

    with _Store.of(options).open(read_only=True) as storage:
        log = find_log(storage, options, storage.max_committed_epoch)
    cols = list(log.desc.columns[:log.n_visible]) + list(EXTRA_COLUMNS)
    return spark_schema([n for n, _ in cols], [t for _, t in cols])


class ChangeLogPartition(InputPartition):
    """One read task: vnodes ``[lo, hi)`` of epochs ``(after, upto]`` of a pinned version."""

    def __init__(self, index: int, lo: int, hi: int, after: int, upto: int, version: bytes, version_id: int):
        super().__init__(index)
        self.lo, self.hi, self.after, self.upto = lo, hi, after, upto
        self.version, self.version_id = version, version_id


def _offset(value) -> int:
    epoch = value.get("epoch") if isinstance(value, dict) else None
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise SchemaError(f"a hummock stream offset is {{'epoch': E}}, got {value!r}")
    return epoch


class HummockChangeLogStreamReader(DataSourceStreamReader):
    """Streams a subscription's change log (module docstring)."""

    def __init__(self, options, schema):
        from relational.spark import _int_option, _Store

        self._store = _Store.of(options)
        self._options = {k: v for k, v in options.items()}
        self._partitions = _int_option(options, "partitions", DEFAULT_PARTITIONS, 1, VNODE_COUNT)
        self._pin_ttl = _int_option(options, "pin_ttl_s", DEFAULT_PIN_TTL_S, 1)
        self._batch_rows = _int_option(options, "batch_rows", DEFAULT_BATCH_ROWS, 1, 1 << 22)
        self._consumer = options.get("consumer")
        self._consumer_ttl = _int_option(options, "consumer_ttl_s", DEFAULT_CONSUMER_TTL_S, 1)
        self._schema = schema
        with self._store.open(read_only=True) as storage:
            self._log = find_log(storage, options, storage.max_committed_epoch)
            from hummock.compaction.remote import StoreDescription
            self._description = StoreDescription.of(storage._store, self._store.options)
        names = [n for n, _ in self._log.desc.columns[:self._log.n_visible]] + [n for n, _ in EXTRA_COLUMNS]
        if [f.name for f in schema.fields] != names:
            raise SchemaError(f"the change-log stream of {self._log.name} has the columns {names}; the schema "
                              f"asked for {[f.name for f in schema.fields]}")

    # --- planning (Spark's long-lived planning worker) ---------------------------------------

    def _oldest(self, storage) -> int:
        cutoff = retained_from(storage.version().table_watermarks.get(self._log.table_id))
        return max(self._log.start_epoch, cutoff - (1 << EPOCH_PHYSICAL_SHIFT))

    def initialOffset(self) -> dict:
        start = str(self._options.get("startingOffsets", self._options.get("startingoffsets", "latest"))).lower()
        with self._store.open(read_only=True) as storage:
            if start == "latest":
                epoch = storage.max_committed_epoch
            elif start == "earliest":
                epoch = self._oldest(storage)
            else:
                try:
                    epoch = int(start)
                except ValueError:
                    raise SchemaError(f"option startingOffsets is latest, earliest or an epoch, got {start!r}") \
                        from None
            self._pin(storage, epoch)   # then check: a cutoff published before the pin is seen
            check_position(self._log.name, epoch, self._log.start_epoch,
                           storage.version().table_watermarks.get(self._log.table_id))
            return {"epoch": epoch}

    def _pin(self, storage, epoch: int) -> None:
        if self._consumer is not None:
            write_pin(storage._store, self._log.table_id, str(self._consumer), epoch, self._consumer_ttl)

    def latestOffset(self, start=None, limit=None) -> dict:
        with self._store.open(read_only=True) as storage:
            return {"epoch": storage.max_committed_epoch}

    def partitions(self, start: dict, end: dict):
        from hummock.pinned_read import pin_version
        from hummock.version_codec import encode_version

        after, upto = _offset(start), _offset(end)
        if upto <= after:
            return []
        with self._store.open(read_only=True) as storage:
            version = storage.version()
            self._require_log(storage, version.max_committed_epoch)
            check_position(self._log.name, after, self._log.start_epoch,
                           version.table_watermarks.get(self._log.table_id))
            if version.max_committed_epoch < upto:
                raise SchemaError(f"offset {upto} is above the store's max_committed_epoch "
                                  f"{version.max_committed_epoch}")
            pin_version(storage._store, version.id, self._pin_ttl)   # while our own lease holds it
            data = encode_version(version)
        n = self._partitions
        cuts = [VNODE_COUNT * i // n for i in range(n + 1)]
        return [ChangeLogPartition(i, cuts[i], cuts[i + 1], after, upto, data, version.id) for i in range(n)]

    def _require_log(self, storage, epoch: int) -> None:
        """SchemaError if the subscription is gone (dropped: its log was truncated and would
        read as empty, silently)."""
        if not any(d.table_id == self._log.table_id and SUBSCRIPTION_PROPERTY in d.properties
                   for d in Catalog(storage).list(epoch)):
            raise SchemaError(f"subscription {self._log.name} (change log table {self._log.table_id}) was dropped "
                              f"at or before epoch {epoch}: its changes are gone")

    def commit(self, end: dict) -> None:
        """With a consumer: move its pin to ``end`` (module docstring); else nothing."""
        if self._consumer is not None:
            with self._store.open(read_only=True) as storage:
                self._pin(storage, _offset(end))

    # --- reading (executors) ------------------------------------------------------------------

    def read(self, partition: ChangeLogPartition):
        from hummock.compaction.remote import open_cached_store
        from hummock.pinned_read import VersionReader
        from pyspark.sql.pandas.types import to_arrow_schema
        from relational.row_serde import RowSerde
        from relational.spark_types import spark_column

        log = self._log
        d = log.desc
        serde = RowSerde(d.types, d.pk_indices, d.order_types, d.dist_key_indices, d.value_indices)
        reader = VersionReader(open_cached_store(self._description), partition.version, 16 << 20)
        target = to_arrow_schema(self._schema, timezone="UTC")
        types = list(d.types[:log.n_visible]) + [t for _, t in EXTRA_COLUMNS]
        rows = []

        def batch():
            cols = list(zip(*rows)) if rows else [[] for _ in types]
            arrays = [spark_column(list(c), t, target.field(j).type) for j, (c, t) in enumerate(zip(cols, types))]
            return pa.RecordBatch.from_arrays(arrays, schema=target)

        for ch in read_changes(reader, log.table_id, serde, reader.max_committed_epoch, partition.after,
                               partition.upto, range(partition.lo, partition.hi)):
            rows.append(tuple(ch.row[:log.n_visible]) + (OP_NAMES[ch.op], ch.epoch, epoch_to_unix_ms(ch.epoch)))
            if len(rows) >= self._batch_rows:
                yield batch()
                rows = []
        if rows:
            yield batch()
