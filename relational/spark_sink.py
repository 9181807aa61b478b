"""``df.writeStream.format("hummock")``: a plain Structured Streaming sink into one table, exactly once.

    (df.writeStream.format("hummock").option("url", URL).option("table", NAME)
       .option("mode", "append" | "upsert")[.option("pk", "id")]
       .option("checkpointLocation", DIR)[.option("query_name", Q)].start())

For tables that no materialized view reads (a table views read is refused with
``ViewsWouldGoStaleError``, as bulk loads are: the views would not see the rows). Each Spark
micro-batch ``b`` becomes one epoch ``e`` of the store:

1. **Planning** (the planner worker, per batch): Spark calls ``streamWriter()`` twice per batch --
   once where the writer is pickled into the batch's tasks, once in the commit worker -- and
   tells neither the batch id. :class:`HummockStreamWriter` therefore plans lazily, when it is
   pickled for the tasks: it opens the store as its writer, resolves the table (or describes a
   new one from the stream's schema, its id from the allocator it shares with SQL), picks ``e``
   above ``max_committed_epoch`` and reserves ``max_partitions * attempts * ids_per_task`` SST
   ids (``hold=False``). The commit worker's writer never plans.
2. **Tasks** (executors): task ``p`` attempt ``a`` of the batch builds SSTs of its rows at
   ``e`` under its own id slice (``relational.bulk_load.build_task_ssts``), reports them with
   the batch id it read from the local property ``streaming.sql.batchId``.
3. **Commit** (the commit worker, ``commit(messages, batchId)``): reopens the writer, reads the
   query's progress record (``relational/progress.py``; the query name is the ``query_name``
   option, else the checkpoint location). A batch the record already holds is skipped (a
   Spark replay after a crash between our commit and Spark's commit log); otherwise the
   progress record ``(query, b, e)``, a new table's catalog record (and the allocator moved
   past its id) and every task's SSTs are published in ONE version delta
   (``HummockStorage.commit_ssts``). So each batch lands exactly once across restarts and
   replays. A batch id BELOW the recorded one means the checkpoint was reset or another query
   uses the name: refused (``SchemaError``), never silently skipped.
4. ``abort`` publishes nothing; the batch's SSTs are orphans that vacuum deletes (at the next
   writer's open, once older than ``vacuum_min_age_s``).

Modes (``mode`` option, default ``append``):
- ``upsert`` (a table with a primary key): newest wins per pk -- a later batch overwrites an
  earlier one's row. Within one batch, rows repeating a pk: the last one wins -- the last in
  its task's input order, and across tasks the task of the higher partition (Spark gives rows
  of one micro-batch no order across partitions; ``repartition`` by the pk to make it the
  input order). No deletes (a stream of rows carries no op).
- ``append`` into a table with a primary key: as RisingWave's append-only table with a pk
  (``ON CONFLICT DO NOTHING``): a row whose pk the table already holds is dropped, the stored
  row kept; within a batch the first row of a pk wins (first in its task, and across tasks the
  lower partition). So an at-least-once source replaying rows never duplicates or changes one.
- ``append`` into a table without a primary key: every row is new; its hidden ``_row_id`` is
  filled from generator = the task's partition (``relational/row_id.py``; at most 1024 tasks).
A table that does not exist is created from the stream's schema: with ``pk`` a pk table, else
a SQL table with a hidden ``_row_id`` (``relational.spark.new_table_desc``).

Invariants: the progress record and the batch's data are in one delta (both or neither);
every batch commits a delta (also an empty one), so the record always names the last batch.
Spill offsets: upsert and row-id appends write task ``p`` at ``e + p``, pk appends at
``e + 0xFFFF - p`` (the newest version wins: higher resp. lower partitions win ties).
Tasks read the store (pk appends only) at the planned version: nothing else may commit to the
store while the query runs (the store has one writer; a commit whose epoch another writer
passed meanwhile is refused and Spark replays the batch after a restart).

Options: ``url``, ``table``, ``mode``, ``pk``, ``dist_key``, ``table_id``, ``query_name``,
``checkpointLocation``, ``ids_per_task`` (256), ``max_partitions`` (1024), ``attempts`` (4),
``StorageOptions`` fields as for ``relational/spark.py``; ``test_fail_after_commit`` (a batch id:
the commit raises after publishing it -- the crash the exactly-once test needs).

Callers: ``relational.spark.HummockDataSource.streamWriter``.
"""

from __future__ import annotations

import dataclasses
import os

import pyarrow as pa
import xxhash
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from hummock.key import EPOCH_SPILL_MASK, new_epoch
from relational.bulk_load import build_task_ssts, check_no_views, row_id_index, task_columns
from relational.catalog import Catalog, TableDesc, allocator_desc, claimed_table_ids
from relational.errors import SchemaError
from relational.progress import MAX_QUERY_BYTES, read_progress, write_progress
from relational.row_id import MAX_GENERATOR

MODES = ("append", "upsert")
DEFAULT_IDS_PER_TASK = 256
DEFAULT_MAX_PARTITIONS = MAX_GENERATOR + 1    # row ids: one generator per task
DEFAULT_ATTEMPTS = 4


def query_name(options) -> str:
    """The progress record's query name: the ``query_name`` option, else ``checkpoint:`` and
    the checkpoint location (a long one shortened with its hash)."""
    name = options.get("query_name")
    if name:
        return str(name)
    location = options.get("checkpointLocation") or options.get("checkpointlocation")
    if not location:
        raise SchemaError("the hummock streaming sink needs .option('query_name', ...) or "
                          ".option('checkpointLocation', ...): its progress record is kept per query")
    location = str(location).rstrip("/") or "/"
    if "://" not in location:
        location = os.path.abspath(location)
    name = f"checkpoint:{location}"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:   # its hash and its end
        tail = location[-100:]
        while len(tail.encode("utf-8", "surrogatepass")) > 100:
            tail = tail[1:]
        name = f"checkpoint:{xxhash.xxh64_hexdigest(location.encode('utf-8', 'surrogatepass'))}:...{tail}"
    return name


@dataclasses.dataclass(frozen=True)
class _BatchPlan:
    """What every task of one micro-batch shares (pickled with the writer)."""

    store: object            # relational.spark._Store
    description: object      # StoreDescription
    desc: TableDesc
    new_table: bool
    mode: str
    version: bytes | None    # the planned version's bytes, for pk appends (their existence reads)
    epoch: int
    first_id: int
    ids_per_task: int
    attempts: int
    max_partitions: int


@dataclasses.dataclass
class SinkCommitMessage(WriterCommitMessage):
    partition: int
    batch_id: int | None
    epoch: int
    new_table: bool
    desc: bytes              # TableDesc.to_bytes() of the planned table
    infos: list              # SstableInfo dicts
    rows: int                # rows the task received
    written: int             # rows it wrote (pk appends drop existing pks; duplicates collapse)


def _check_mode(desc: TableDesc, mode: str) -> None:
    if mode == "upsert" and row_id_index(desc) is not None:
        raise SchemaError(f"table {desc.name} has no primary key: upsert needs one; use mode append (every row "
                          f"is a new row) or a table with a pk")
    sql = desc.properties.get("sql")
    if mode == "upsert" and isinstance(sql, dict) and sql.get("append_only") is True:
        raise SchemaError(f"table {desc.name} is APPEND ONLY: use mode append")


def plan_batch(options, schema) -> _BatchPlan:
    """Planner side of one micro-batch (module docstring, step 1)."""
    from hummock.compaction.remote import StoreDescription
    from hummock.version_codec import encode_version
    from relational.spark import _check_schema, _int_option, _option, _Store, find_table, new_table_desc
    from relational.table_scan import table_ssts

    store = _Store.of(options)
    mode = str(options.get("mode") or "append").lower()
    if mode not in MODES:
        raise SchemaError(f"option mode must be append or upsert, got {options.get('mode')!r}")
    ids_per_task = _int_option(options, "ids_per_task", DEFAULT_IDS_PER_TASK, 1, 1 << 20)
    max_partitions = _int_option(options, "max_partitions", DEFAULT_MAX_PARTITIONS, 1, EPOCH_SPILL_MASK + 1)
    attempts = _int_option(options, "attempts", DEFAULT_ATTEMPTS, 1, 64)
    query_name(options)   # refused here already when missing
    with store.open(read_only=False, spare_young=True) as storage:
        committed = storage.max_committed_epoch
        name = _option(options, "table", required=True)
        desc = find_table(storage, name, committed)
        new_table = desc is None
        if new_table:
            if mode == "upsert" and not options.get("pk"):
                raise SchemaError(f"table {name} does not exist: an upsert stream creates it and needs "
                                  f".option('pk', 'col1,col2') naming its primary key")
            desc = new_table_desc(storage, options, schema, committed)
        else:
            check_no_views(storage, desc, committed)
            _check_schema(desc, schema)
        _check_mode(desc, mode)
        version = None
        if mode == "append" and row_id_index(desc) is None and not new_table and \
                table_ssts(storage.version(), desc.table_id):
            version = encode_version(storage.version())
        epoch = max(new_epoch(), (committed | EPOCH_SPILL_MASK) + 1)
        ids = storage.reserve_sst_ids(max_partitions * attempts * ids_per_task, hold=False)
        description = StoreDescription.of(storage._store, store.options)
    return _BatchPlan(store, description, desc, new_table, mode, version, epoch, ids.start, ids_per_task, attempts,
                      max_partitions)


class HummockStreamWriter(DataSourceStreamArrowWriter):
    """One micro-batch's write (module docstring). Plans when pickled into the tasks."""

    def __init__(self, options, schema, overwrite: bool = False):
        if overwrite:
            raise SchemaError("the hummock streaming sink appends or upserts (option mode); the complete output "
                              "mode (overwrite) is not supported")
        self._options = {str(k): (None if v is None else str(v)) for k, v in dict(options).items()}
        self._schema = schema
        self._plan: _BatchPlan | None = None
        self.query = query_name(self._options)

    def _planned(self) -> _BatchPlan:
        if self._plan is None:
            self._plan = plan_batch(self._options, self._schema)
        return self._plan

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_plan"] = self._planned()   # the tasks' copy carries the batch's plan
        return state

    # --- executors ---------------------------------------------------------------------------

    def write(self, iterator):
        from pyspark import TaskContext

        from hummock.compaction.remote import open_cached_store
        from relational.spark import _serde

        plan = self._planned()
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        if partition >= plan.max_partitions:
            raise SchemaError(f"the stream's micro-batch has more than {plan.max_partitions} partitions; coalesce "
                              f"it or raise the max_partitions option")
        if attempt >= plan.attempts:
            raise SchemaError(f"task attempt {attempt} has no reserved SST ids (attempts={plan.attempts})")
        batches = [b for b in iterator if b.num_rows]
        rows = sum(b.num_rows for b in batches)
        infos, written = [], 0
        if rows:
            desc = plan.desc
            table = pa.Table.from_batches(batches)
            columns = task_columns(table, desc, partition, plan.epoch)
            store = open_cached_store(plan.description)
            keep, spill, on_duplicate = None, partition, "last"
            if plan.mode == "append" and row_id_index(desc) is None:
                spill, on_duplicate = EPOCH_SPILL_MASK - partition, "first"
                if plan.version is not None:
                    keep = _absent_in(store, plan, desc.table_id)
            counted = []

            def counting(keys):
                wanted = keep(keys) if keep is not None else [True] * len(keys)
                counted.append(sum(wanted))
                return wanted

            first = plan.first_id + (partition * plan.attempts + attempt) * plan.ids_per_task
            infos = build_task_ssts(store, _serde(desc), desc.table_id, columns, rows, plan.epoch, spill,
                                    range(first, first + plan.ids_per_task), plan.store.options.sst_builder_options(),
                                    plan.store.options.target_sst_size, describe_pk=desc.name,
                                    on_duplicate=on_duplicate, keep=counting)
            written = counted[0] if counted else 0
        return SinkCommitMessage(partition, None if batch is None else int(batch), plan.epoch, plan.new_table,
                                 plan.desc.to_bytes(), [info.to_dict() for info in infos], rows, written)

    # --- the commit worker ---------------------------------------------------------------------

    def commit(self, messages, batchId: int) -> None:
        """Publish the batch exactly once (module docstring, step 3)."""
        from hummock.sstable.meta import SstableInfo
        from relational.spark import _Store, find_table

        messages = [m for m in messages if m is not None]
        for m in messages:
            if m.batch_id is not None and m.batch_id != batchId:
                raise SchemaError(f"a task of micro-batch {m.batch_id} reported to the commit of batch {batchId}")
        epochs = {m.epoch for m in messages}
        if len(epochs) > 1:
            raise SchemaError(f"the tasks of micro-batch {batchId} wrote at different epochs {sorted(epochs)}")
        infos = [SstableInfo.from_dict(d) for m in messages for d in m.infos]
        store = _Store.of(self._options)
        with store.open(read_only=False, spare_young=True) as storage:
            committed = storage.max_committed_epoch
            done = read_progress(storage, self.query, committed)
            if done is not None and done.batch_id == batchId:
                return    # a replay of a batch that landed: its SSTs (if any) are orphans for vacuum
            if done is not None and done.batch_id > batchId:
                raise SchemaError(f"streaming query {self.query!r} committed micro-batch {done.batch_id} (epoch "
                                  f"{done.epoch}), Spark now sends batch {batchId}: its checkpoint was reset or "
                                  f"another query uses this name; give it a new query_name (or checkpoint) to "
                                  f"write again")
            epoch = epochs.pop() if epochs else max(new_epoch(), (committed | EPOCH_SPILL_MASK) + 1)
            if epoch <= committed:
                raise SchemaError(f"micro-batch {batchId} was planned at epoch {epoch}, but the store committed "
                                  f"{committed} meanwhile (another writer?): restart the query to replay it")
            if messages:
                desc = TableDesc.from_bytes(messages[0].desc)
                new_table = messages[0].new_table
                current = find_table(storage, desc.name, committed)
                if new_table:
                    if current is not None:
                        raise SchemaError(f"table {desc.name} was created by another writer meanwhile: restart the "
                                          f"query to replay the batch into it")
                    claimed, next_id = claimed_table_ids(Catalog(storage).list(committed))
                    if desc.table_id in claimed:
                        raise SchemaError(f"table id {desc.table_id} was claimed by another writer meanwhile: "
                                          f"restart the query")
                    Catalog(storage).put([desc, allocator_desc(max(next_id, desc.table_id + 1))], epoch)
                elif current != desc:
                    raise SchemaError(f"table {desc.name} changed or was dropped while micro-batch {batchId} was "
                                      f"written: restart the query")
                check_no_views(storage, desc, committed)
            write_progress(storage, self.query, batchId, epoch)
            storage.commit_ssts(epoch, infos)
        fail = self._options.get("test_fail_after_commit")
        if fail is not None and int(fail) == batchId:
            raise SchemaError(f"injected failure after committing micro-batch {batchId} (test hook)")

    def abort(self, messages, batchId: int) -> None:
        """Publish nothing: the finished tasks' SSTs are orphans; the next writer's vacuum at
        open deletes them once older than ``vacuum_min_age_s``."""


def _absent_in(store, plan: _BatchPlan, table_id: int):
    """``keys -> [bool]``: whether each key is absent from the table at the planned version."""
    from hummock.task_store import TaskStore

    reader = TaskStore(store, plan.version, plan.epoch, block_cache_bytes=8 << 20)
    committed = reader.max_committed_epoch

    def absent(keys):
        return [v is None for v in reader.multi_get(table_id, keys, committed)]

    return absent


__all__ = ["HummockStreamWriter", "SinkCommitMessage", "plan_batch", "query_name", "MODES"]
