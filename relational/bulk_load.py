"""Bulk loads of relational tables: one task's rows into SSTs, and the all-or-nothing commit.

Job: what a bulk loader (the Spark writer in ``relational/spark.py``, or any other) does around
the engine's ``reserve_sst_ids`` / ``ingest_ssts`` (docs/engine.md "Bulk loads"):

1. :func:`build_task_ssts` (a task): encode the task's rows with the table's ``RowSerde``
   (``encode_chunk``, vectorized), sort them by key, refuse a repeated pk (:class:`DuplicateKeyError`),
   and write SSTs of at most ``target_sst_size`` straight into the store under the task's slice
   of reserved ids, every version at ``epoch + spill_offset``. Returns the ``SstableInfo``\\ s.
2. :func:`commit_load` (the driver): in one commit delta at ``epoch``, publish every task's SSTs
   and -- for a new table -- its catalog record and the id allocator's record moved past its id
   (``relational.catalog.allocator_desc``, shared with the SQL catalog); or nothing.

The SQL catalog and loads share one catalog: :func:`check_no_views` refuses a load into a table
that materialized views read (``ViewsWouldGoStaleError``) -- the views would not see the rows --
at planning and again at the commit.

Invariants: a task's SSTs hold distinct user keys in ascending order and only the given table;
distinct tasks use distinct ids (the caller's slices) and distinct spill offsets, so two tasks
repeating a pk never make two entries with one full key: the higher offset (the later task)
wins, deterministically, in reads and in compaction. A task holds its rows in memory to sort them.

Callers: :mod:`relational.spark`, tests.
"""

from __future__ import annotations

from hummock.key import EPOCH_SPILL_MASK, encode_full_key
from hummock.sstable.builder import SstableOutputs
from relational.errors import SchemaError


class DuplicateKeyError(SchemaError):
    """A bulk load's rows repeat a primary key within one task."""


class ViewsWouldGoStaleError(SchemaError):
    """A bulk load targets a table that materialized views read: they would not see the rows."""

    def __init__(self, table: str, views):
        self.table, self.views = table, list(views)
        super().__init__(f"table {table} is read by materialized view(s) {', '.join(self.views)}: a bulk load "
                         f"does not feed views, so they would go stale; drop the views and create them again "
                         f"after the load (they backfill), or load into a table no view reads")


def views_reading(descs, name: str) -> list:
    """Names of the SQL materialized views among the catalog records ``descs`` that read the
    relation called ``name`` (``properties["sql"]["depends_on"]``)."""
    out = []
    for d in descs:
        sql = d.properties.get("sql")
        if isinstance(sql, dict) and isinstance(sql.get("depends_on"), list) and name in sql["depends_on"]:
            out.append(d.name)
    return out


def check_no_views(storage, desc, epoch: int) -> None:
    """Raise ``ViewsWouldGoStaleError`` when a materialized view reads ``desc``'s table at ``epoch``."""
    from relational.catalog import Catalog

    views = views_reading(Catalog(storage).list(epoch), desc.name)
    if views:
        raise ViewsWouldGoStaleError(desc.name, views)


def build_task_ssts(store, serde, table_id: int, columns, num_rows: int, epoch: int, spill_offset: int,
                    ids, builder_options, target_sst_size: int, *, describe_pk=None) -> list:
    """Write ``columns`` (schema order; Arrow arrays or value lists, ``num_rows`` each) as SSTs
    of ``table_id`` at ``epoch + spill_offset``, named from ``ids`` (an iterable of reserved ids;
    running out raises ``SchemaError``). Returns the SstableInfos in key order (empty for no rows).
    Raises DuplicateKeyError naming the pk when the rows repeat one."""
    if not 0 <= spill_offset <= EPOCH_SPILL_MASK:
        raise SchemaError(f"spill offset {spill_offset} outside [0, {EPOCH_SPILL_MASK}]")
    if num_rows == 0:
        return []
    _, keys, values = serde.encode_chunk(columns, num_rows, sort=True)
    for i in range(1, len(keys)):
        if keys[i] == keys[i - 1]:
            pk = serde.decode_pk(keys[i])
            raise DuplicateKeyError(f"table {describe_pk or table_id}: the load repeats primary key {pk!r:.200} "
                                    f"within one task; a bulk load's primary keys must be unique")
    shell = encode_full_key(table_id, b"", epoch + spill_offset)
    prefix, suffix = shell[:4], shell[4:]
    full = [prefix + k + suffix for k in keys]
    available = iter(ids)

    def new_id() -> int:
        try:
            return next(available)
        except StopIteration:
            raise SchemaError("the task used up its reserved SST ids (raise the ids_per_task option)") from None

    with SstableOutputs(store, builder_options, new_id) as outputs:
        start = 0
        while start < len(full):
            start = outputs.current().add_batch(full, values, start, stop_at_size=target_sst_size)
            if start < len(full):
                outputs.cut()
    return outputs.infos


def commit_load(storage, desc, infos, epoch: int, *, new_table: bool) -> None:
    """Publish a load in one commit delta at ``epoch``: ``infos`` (every task's SSTs) and, when
    ``new_table``, ``desc``'s catalog record. An empty load of an existing table commits nothing.
    Raises ``TableNotEmptyError``, ``InvalidArgumentError`` (e.g. the store committed past
    ``epoch`` meanwhile) or ``ConcurrentWriterError``; nothing is published then.

    Calling it again after an error with the same arguments is safe: a load that had landed
    (its commit's reply lost) returns at once -- decided from the version's durable record of
    the load (``HummockStorage.bulk_load_landed``), so also after compaction rewrote its SSTs
    or later epochs committed -- instead of writing the catalog record again."""
    from relational.catalog import Catalog, allocator_desc, claimed_table_ids

    if infos and storage.bulk_load_landed(desc.table_id, infos, epoch):
        return
    if not infos and new_table and epoch <= storage.max_committed_epoch \
            and Catalog(storage).get(desc.table_id, epoch) == desc:
        return   # the catalog-only commit of an empty load had landed
    committed = storage.max_committed_epoch
    check_no_views(storage, desc, committed)
    if new_table:
        descs = Catalog(storage).list(committed)
        claimed, next_id = claimed_table_ids(descs)
        if desc.table_id in claimed:
            raise SchemaError(f"table id {desc.table_id} is already used (another writer claimed it meanwhile)")
        Catalog(storage).put([desc, allocator_desc(max(next_id, desc.table_id + 1))], epoch)
    if infos:
        storage.ingest_ssts(desc.table_id, infos, epoch)
    elif new_table:
        storage.checkpoint(epoch)
