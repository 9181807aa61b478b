"""Bulk loads of relational tables: one task's rows into SSTs, and the all-or-nothing commit.

Job: what a bulk loader (the Spark writer in ``relational/spark.py``, or any other) does around
the engine's ``reserve_sst_ids`` / ``ingest_ssts`` (docs/engine.md "Bulk loads"):

1. :func:`build_task_ssts` (a task): encode the task's rows with the table's ``RowSerde``
   (``encode_chunk``, vectorized), sort them by key, refuse a repeated pk (:class:`DuplicateKeyError`;
   a streaming write keeps the first or last row of it instead, and may drop keys by a filter),
   and write SSTs of at most ``target_sst_size`` straight into the store under the task's slice
   of reserved ids, every version at ``epoch + spill_offset``. Returns the ``SstableInfo``\\ s.
2. :func:`commit_load` (the driver): in one commit delta at ``epoch``, publish every task's SSTs
   and -- for a new table -- its catalog record and the id allocator's record moved past its id
   (``relational.catalog.allocator_desc``, shared with the SQL catalog); or nothing.

A table without a primary key (SQL's hidden ``_row_id`` pk, :func:`row_id_index`) takes rows
without that column: :func:`task_columns` gives each task's rows fresh row ids (generator = the
task's partition id, time floor = the write's epoch; ``relational/row_id.py``).

The SQL catalog and loads share one catalog: :func:`check_no_views` refuses a load into a table
that materialized views read (``ViewsWouldGoStaleError``) -- the views would not see the rows --
at planning and again at the commit.

Invariants: a task's SSTs hold distinct user keys in ascending order and only the given table;
distinct tasks use distinct ids (the caller's slices) and distinct spill offsets, so two tasks
repeating a pk never make two entries with one full key: the higher offset (the later task)
wins, deterministically, in reads and in compaction. A task holds its rows in memory to sort them.

Callers: :mod:`relational.spark`, :mod:`relational.spark_sink` (streaming writes), tests.
"""

from __future__ import annotations

import numpy as np

from hummock.key import EPOCH_SPILL_MASK, encode_full_key
from hummock.sstable.builder import SstableOutputs
from relational.errors import SchemaError
from relational.types import DataType

ROW_ID_COLUMN = "_row_id"   # the hidden pk column of a SQL table without a primary key (sql.catalog.ROW_ID)


class DuplicateKeyError(SchemaError):
    """A bulk load's rows repeat a primary key within one task."""


class ViewsWouldGoStaleError(SchemaError):
    """A bulk load targets a table that materialized views read: they would not see the rows."""

    def __init__(self, table: str, views):
        self.table, self.views = table, list(views)
        super().__init__(f"table {table} is read by materialized view(s) or subscription(s) "
                         f"{', '.join(self.views)}: a bulk load does not feed views or change logs, so they would "
                         f"go stale; load through the views instead (a Spark-runtime connection's "
                         f"insert_dataframe), or drop them and create them again after the load (views backfill)")


def views_reading(descs, name: str) -> list:
    """Names of the SQL materialized views among the catalog records ``descs`` that read the
    relation called ``name`` (``properties["sql"]["depends_on"]``), and of the subscriptions
    logging its changes (``properties["subscription"]["relation"]``): a load reaches neither."""
    out = []
    for d in descs:
        sql = d.properties.get("sql")
        if isinstance(sql, dict) and isinstance(sql.get("depends_on"), list) and name in sql["depends_on"]:
            out.append(d.name)
        sub = d.properties.get("subscription")
        if isinstance(sub, dict) and sub.get("relation") == name:
            out.append(d.name)
    return out


def check_no_views(storage, desc, epoch: int) -> None:
    """Raise ``ViewsWouldGoStaleError`` when a materialized view reads ``desc``'s table at ``epoch``."""
    from relational.catalog import Catalog

    views = views_reading(Catalog(storage).list(epoch), desc.name)
    if views:
        raise ViewsWouldGoStaleError(desc.name, views)


def row_id_index(desc) -> int | None:
    """The position of ``desc``'s hidden row id column (a SQL table without a primary key:
    ``properties["sql"]["row_id"]``, the BIGINT ``_row_id`` that is its pk), or None."""
    sql = desc.properties.get("sql")
    if not (isinstance(sql, dict) and sql.get("row_id") is True and len(desc.pk_indices) == 1):
        return None
    index = desc.pk_indices[0]
    name, dtype = desc.columns[index]
    return index if name == ROW_ID_COLUMN and dtype == DataType.BIGINT else None


def task_columns(table, desc, partition: int, epoch: int) -> list:
    """The columns of a write task's rows (a ``pyarrow.Table`` with Spark's layout) in
    ``desc``'s schema order, for ``RowSerde.encode_chunk``. A table with a hidden row id column
    that ``table`` lacks (or holds NULLs in) gets fresh ids for those rows from generator
    ``partition``, at or above ``epoch``'s physical time (``relational.row_id.task_row_ids``:
    numpy, unique across the tasks of one write and across writes)."""
    import numpy as np
    import pyarrow as pa

    from relational.row_id import task_row_ids
    from relational.spark_types import table_column

    rid = row_id_index(desc)
    names = set(table.column_names)
    columns = []
    for i, (name, dtype) in enumerate(desc.columns):
        if i != rid:
            columns.append(table_column(table.column(name), dtype))
            continue
        if name not in names:
            columns.append(pa.array(task_row_ids(partition, epoch, table.num_rows), pa.int64()))
            continue
        given = table.column(name).combine_chunks().cast(pa.int64())
        if given.null_count:
            ids = given.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=True)
            null = np.asarray(given.is_null().to_numpy(zero_copy_only=False))
            ids[null] = task_row_ids(partition, epoch, int(null.sum()))
            given = pa.array(ids, pa.int64())
        columns.append(given)
    return columns


def build_task_ssts(store, serde, table_id: int, columns, num_rows: int, epoch: int, spill_offset: int,
                    ids, builder_options, target_sst_size: int, *, describe_pk=None, on_duplicate: str = "error",
                    keep=None) -> list:
    """Write ``columns`` (schema order; Arrow arrays or value lists, ``num_rows`` each) as SSTs
    of ``table_id`` at ``epoch + spill_offset``, named from ``ids`` (an iterable of reserved ids;
    running out raises ``SchemaError``). Returns the SstableInfos in key order (empty for no rows).
    Rows repeating a pk: ``on_duplicate="error"`` raises DuplicateKeyError naming the pk;
    ``"last"`` / ``"first"`` keep the last / first of them in the rows' order (streaming upsert /
    append). ``keep``: an optional filter ``keys -> list of bool`` over the sorted, distinct
    keys (a streaming append drops keys the table holds); rows it rejects are not written."""
    if not 0 <= spill_offset <= EPOCH_SPILL_MASK:
        raise SchemaError(f"spill offset {spill_offset} outside [0, {EPOCH_SPILL_MASK}]")
    if on_duplicate not in ("error", "first", "last"):
        raise SchemaError(f"on_duplicate must be error, first or last, got {on_duplicate!r}")
    if num_rows == 0:
        return []
    _, keys, values = serde.encode_chunk(columns, num_rows, sort=True)   # stable: equal keys keep row order
    width = _fixed_width(keys)
    joined = None
    if width:   # equal-width keys (a fixed-width pk): compared in numpy, not per row in Python
        joined = np.frombuffer(b"".join(keys), f"V{width}")
        repeats = (np.flatnonzero(joined[1:] == joined[:-1]) + 1).tolist()
    else:
        repeats = [i for i in range(1, len(keys)) if keys[i] == keys[i - 1]]
    if repeats and on_duplicate == "error":
        pk = serde.decode_pk(keys[repeats[0]])
        raise DuplicateKeyError(f"table {describe_pk or table_id}: the load repeats primary key {pk!r:.200} "
                                f"within one task; a bulk load's primary keys must be unique")
    if repeats:   # drop all but the first (last) row of each run of equal keys
        joined = None
        doomed = set(repeats) if on_duplicate == "first" else {i - 1 for i in repeats}
        keys = [k for i, k in enumerate(keys) if i not in doomed]
        values = [v for i, v in enumerate(values) if i not in doomed]
    if keep is not None:
        wanted = keep(keys)
        joined = None
        keys = [k for k, w in zip(keys, wanted) if w]
        values = [v for v, w in zip(values, wanted) if w]
        if not keys:
            return []
    shell = encode_full_key(table_id, b"", epoch + spill_offset)
    prefix, suffix = shell[:4], shell[4:]
    if width and joined is None:   # rows were dropped since the keys were joined (still one width)
        joined = np.frombuffer(b"".join(keys), f"V{width}")
    if width:   # the full keys as one numpy buffer, split into bytes objects in C
        grid = np.empty((len(keys), 4 + width + len(suffix)), np.uint8)
        grid[:, :4] = np.frombuffer(prefix, np.uint8)
        grid[:, 4:4 + width] = joined.view(np.uint8).reshape(len(keys), width)
        grid[:, 4 + width:] = np.frombuffer(suffix, np.uint8)
        full = grid.view(f"V{grid.shape[1]}").ravel().tolist()
    else:
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


def _fixed_width(keys) -> int | None:
    """The common length of ``keys`` when they all have one (else None; None for no keys)."""
    if not keys:
        return None
    width = len(keys[0])
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    return width if width and bool((lengths == width).all()) else None


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
