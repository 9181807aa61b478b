"""StorageTable: the batch, read-only view of a relational table at a committed epoch.

Job: serve point reads (``get_row``) and ordered range reads as Arrow record batches
(``batch_iter``) of a table written by state tables, at any committed epoch, without a
MemTable. Keys and values are decoded with the table's :class:`~relational.row_serde.RowSerde`
(docs/relational.md), so a StorageTable must be built with the schema the writers used
(``from_desc`` with the table's :class:`~relational.catalog.TableDesc` does that).

Contracts:
- Every read names its epoch: an ``int`` with ``epoch <= store.max_committed_epoch``. ``None``
  (there is no "latest" default), another type or an epoch above the committed one raises
  :class:`~relational.errors.EpochError` (an ``InvalidArgumentError``) at the call, before any
  read; below what the store retains the store raises ``ExpiredEpochError``.
- Every read pins its epoch with ``store.snapshot(epoch)``: ``batch_iter`` takes the snapshot
  at its first batch and holds it until it is exhausted or closed, so compaction cannot remove what it reads.
- ``batch_iter`` yields ``pyarrow.RecordBatch``es of at most ``batch_size`` rows (an ``int``
  >= 1, else ``SchemaError``), in pk order
  across the owned vnodes (descending with ``reverse``), with the requested ``columns`` (names
  or indices; default all) typed by :func:`relational.arrow.arrow_type`; the bounds and
  ``limit`` are those of ``StateTable.iter_with_prefix``.
- ``to_arrow(epoch)`` / ``to_parquet(path, epoch)`` export the whole table at a committed epoch
  (the same rows as ``batch_iter``), for users without Spark.
- Batches of simple columns are decoded straight into Arrow buffers
  (:mod:`relational.scan_columns`); other columns take the row path; both give the same batches.
Thread-safe as far as the store is: it keeps no mutable state.

Callers: the SQL layer's batch SELECT, library users.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import wait
from itertools import islice, repeat

import numpy as np
import pyarrow as pa

from relational.errors import EpochError, SchemaError
from relational.parallel import in_pool, pool
from relational.scan_columns import ColumnScan
from relational.state_table import table_layout
from relational.table_iter import (as_values, batch_schema, check_batch_size, check_limit, column_indices,
                                   decoded_rows, merge_vnodes, pk_ranges, record_batches)
from relational.vnode import VNODE_COUNT, Bitmap

DEFAULT_BATCH_SIZE = 1024
EXPORT_BATCH_SIZE = 65536
GROW_FIRST = 64


SPLIT_MIN_BYTES = 4 << 20   # a part of ``read_split`` holds at least this much stored data
def _grown(batch_size: int):
    """Batch sizes ``GROW_FIRST``, 8 times more each, up to ``batch_size`` (then repeated)."""
    size = min(GROW_FIRST, batch_size)
    while True:
        yield size
        size = min(size * 8, batch_size)


class StorageTable:
    """Read-only batch access to one table at committed epochs."""

    def __init__(self, store, table_id: int, schema, pk_indices, order_types=None, dist_key_indices=None,
                 value_indices=None, vnodes: Bitmap | None = None, *, name: str | None = None):
        self.store = store
        self.table_id = table_id
        self.names, self.serde = table_layout(schema, pk_indices, order_types, dist_key_indices, value_indices)
        self.vnodes = Bitmap.full() if vnodes is None else vnodes
        if not isinstance(self.vnodes, Bitmap):
            raise SchemaError(f"vnodes must be a Bitmap, got {vnodes!r}")
        self.name = name or f"#{table_id}"

    @classmethod
    def from_desc(cls, store, desc, vnodes: Bitmap | None = None) -> StorageTable:
        return cls(store, desc.table_id, desc.columns, desc.pk_indices, desc.order_types,
                   desc.dist_key_indices, desc.value_indices, vnodes, name=desc.name)

    def _column_indices(self, columns) -> list:
        return column_indices(self.names, columns, self.name)

    def arrow_schema(self, columns=None) -> pa.Schema:
        return batch_schema(self.names, self.serde.types, self._column_indices(columns))

    def _check_epoch(self, epoch) -> int:
        """``epoch`` as an int if it is a committed epoch; EpochError otherwise."""
        committed = self.store.max_committed_epoch
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
            raise EpochError(f"table {self.name}: a read needs the committed epoch to read at (an int), "
                             f"got {type(epoch).__name__} {epoch!r}", epoch, committed)
        if not 0 <= epoch <= committed:
            raise EpochError(f"table {self.name}: epoch {epoch!r} is not in [0, max_committed_epoch {committed}]",
                             epoch, committed)
        return int(epoch)

    def get_row(self, pk, epoch: int):
        """The row with primary key ``pk`` (tuple in pk order) at committed ``epoch``, or ``None``."""
        epoch = self._check_epoch(epoch)
        key = self.serde.key_of_pk(as_values(pk, "pk"))
        with self.store.snapshot(epoch) as snap:
            value = snap.get(self.table_id, key)
        return None if value is None else self.serde.decode(key, value)

    def get_rows(self, pks, epoch: int) -> list:
        """``[get_row(pk, epoch) for pk in pks]`` from one snapshot and one ``multi_get`` (a key
        holding a NULL matches no row: None)."""
        epoch = self._check_epoch(epoch)
        out = [None] * len(pks)
        at, keys = [], []
        for i, pk in enumerate(pks):
            pk = as_values(pk, "pk")
            if any(v is None for v in pk):
                continue
            at.append(i)
            keys.append(self.serde.key_of_pk(pk))
        if keys:
            with self.store.snapshot(epoch) as snap:
                values = snap.multi_get(self.table_id, keys)
            for i, key, value in zip(at, keys, values):
                if value is not None:
                    out[i] = self.serde.decode(key, value)
        return out

    def row_count(self, epoch: int) -> int | None:
        """The rows a full ``batch_iter`` at committed ``epoch`` yields, from the store's SST
        metadata without reading a block, or ``None`` when the metadata cannot decide it
        (:mod:`hummock.row_count`: e.g. the table is not one sorted run) or this instance owns
        only some vnodes."""
        epoch = self._check_epoch(epoch)
        if len(self.vnodes) != VNODE_COUNT:
            return None
        with self.store.snapshot(epoch) as snap:
            count = getattr(snap, "count_rows", None)   # stores without SST metadata: None
            return None if count is None else count(self.table_id)

    def batch_iter(self, epoch: int, pk_prefix=(), start=None, end=None, columns=None, *,
                   batch_size: int = DEFAULT_BATCH_SIZE, reverse: bool = False, start_inclusive: bool = True,
                   end_inclusive: bool = False, limit: int | None = None, grow: bool = False):
        """Yield record batches of the rows at committed ``epoch`` with ``pk_prefix``, the
        bounds and the ``limit`` of :meth:`StateTable.iter_with_prefix`, in pk order. With
        ``grow`` the batches start at ``GROW_FIRST`` rows and grow 8 times each up to
        ``batch_size`` (a reader that may stop early decodes few rows)."""
        batch_size = check_batch_size(batch_size, self.name)
        limit = check_limit(limit, self.name)
        epoch = self._check_epoch(epoch)    # checked now, not at the first next()
        idx = self._column_indices(columns)
        schema = batch_schema(self.names, self.serde.types, idx)
        ranges = pk_ranges(self.serde, self.vnodes, pk_prefix, start, end, start_inclusive, end_inclusive)
        sizes = _grown(batch_size) if grow else repeat(batch_size)
        return self._batches(epoch, ranges, idx, schema, sizes, reverse, limit)

    def _batches(self, epoch, ranges, idx, schema, sizes, reverse, limit):
        snap = self.store.snapshot(epoch)
        try:
            streams = [snap.iter(self.table_id, lo, hi, reverse=reverse) for v, lo, hi in ranges
                       if v in self.vnodes]
            pairs = merge_vnodes(streams, reverse) if streams and limit != 0 else ()
            if limit is not None:
                pairs = islice(pairs, limit)
            scan = ColumnScan.of(self.serde, idx)
            if scan is None:
                rows = decoded_rows(self.serde, pairs)
                for size in sizes:
                    got = list(record_batches(islice(rows, size), idx, self.serde.types, schema, size))
                    yield from got
                    if not got or got[0].num_rows < size:
                        return
            else:   # straight into Arrow buffers, no Python value per cell
                pairs = iter(pairs)
                for size in sizes:
                    n, arrays = scan.read(pairs, size)
                    if n:
                        yield (pa.RecordBatch.from_arrays(arrays, schema=schema) if arrays else   # no column: n rows
                               pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), n, [None],
                                                                                      children=[])))
                    if n < size:
                        return
        finally:
            snap.release()

    def read_split(self, epoch: int, columns=None, *, workers: int, batch_size: int = EXPORT_BATCH_SIZE,
                   min_part_bytes: int | None = None, each=None) -> list:
        """The record batches of a whole-table ``batch_iter`` at committed ``epoch`` (the same
        rows, in pk order), read in up to ``workers`` parts side by side: the key range is cut
        where the stored bytes split evenly (``Snapshot.split_keys``, parts of at least
        ``min_part_bytes``, default ``SPLIT_MIN_BYTES``) and each part is decoded in a thread of
        the shared pool (:mod:`relational.parallel`). A native scan walks a compacted table's
        blocks without the GIL, so the parts use separate cores. A table whose rows interleave
        several vnode ranges, a column the fast decoder does not read, a small table,
        ``workers < 2`` or a call from a pool thread reads as ``batch_iter`` does.

        ``each``: a callable applied to every batch where it is decoded (in the part's thread,
        under a copy of the caller's ``contextvars`` context); the list then holds its results
        instead of the batches, still in key order. An exception it or the read raises
        propagates (the first part's first) once every part has stopped (the parts after a
        failed one stop at their next batch): none reads on after the snapshot is released."""
        epoch = self._check_epoch(epoch)
        batch_size = check_batch_size(batch_size, self.name)
        min_part_bytes = SPLIT_MIN_BYTES if min_part_bytes is None else min_part_bytes
        idx = self._column_indices(columns)
        schema = batch_schema(self.names, self.serde.types, idx)
        ranges = pk_ranges(self.serde, self.vnodes)
        scan = ColumnScan.of(self.serde, idx)
        snap = self.store.snapshot(epoch)
        try:
            split = getattr(snap, "split_keys", None)
            cuts = (split(self.table_id, workers, ranges[0][1], ranges[0][2], min_part_bytes)
                    if workers > 1 and scan is not None and len(ranges) == 1 and split is not None
                    and not in_pool() else [])
            if not cuts:
                batches = self._batches(epoch, ranges, idx, schema, repeat(batch_size), False, None)
                return [b if each is None else each(b) for b in batches]
            bounds = list(zip([ranges[0][1], *cuts], [*cuts, ranges[0][2]]))
            failed = [len(bounds)]   # the lowest part that raised: the parts after it stop early

            def part(i, bound):
                out = []
                try:
                    for n, arrays in scan.batches(snap.iter(self.table_id, *bound), batch_size):
                        if failed[0] < i:   # its rows are not wanted: an earlier part's error is raised
                            break
                        b = (pa.RecordBatch.from_arrays(arrays, schema=schema) if arrays else
                             pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), n, [None],
                                                                                    children=[])))
                        out.append(b if each is None else each(b))
                except BaseException:
                    failed[0] = min(failed[0], i)
                    raise
                return out
            # one context per thread (a context runs in one at a time); every part has stopped
            # before the snapshot is released, also when one raised
            futures = [pool().submit(contextvars.copy_context().run, part, i, bound) for i, bound in enumerate(bounds)]
            wait(futures)
            return [b for f in futures for b in f.result()]
        finally:
            snap.release()

    def to_arrow(self, epoch: int, columns=None, *, batch_size: int = EXPORT_BATCH_SIZE) -> pa.Table:
        """The whole table (the owned vnodes) at committed ``epoch`` as one ``pyarrow.Table`` in
        pk order, typed as :meth:`arrow_schema` (no Spark needed)."""
        schema = self.arrow_schema(columns)
        return pa.Table.from_batches(list(self.batch_iter(epoch, columns=columns, batch_size=batch_size)),
                                     schema=schema)

    def to_parquet(self, path, epoch: int, columns=None, *, batch_size: int = EXPORT_BATCH_SIZE,
                   **write_options) -> None:
        """Write the table at committed ``epoch`` as Parquet files under the directory ``path``
        (``pyarrow.dataset.write_dataset``; ``write_options`` go to it, e.g.
        ``max_rows_per_file``), streaming batch by batch. Parquet has no month-day-microsecond
        interval: INTERVAL columns are written as ``struct<months, days, usecs>``; nested
        intervals (inside STRUCT or LIST) raise :class:`SchemaError`."""
        import pyarrow.dataset as ds

        batches = self.batch_iter(epoch, columns=columns, batch_size=batch_size)
        schema = self.arrow_schema(columns)
        positions = [i for i, f in enumerate(schema) if pa.types.is_interval(f.type)]
        for f in schema:
            if not pa.types.is_interval(f.type) and "month_day_nano_interval" in str(f.type):
                raise SchemaError(f"table {self.name}: column {f.name} nests an INTERVAL, which Parquet "
                                  f"cannot hold; leave it out with columns=")
        if positions:
            out_schema = pa.schema([pa.field(f.name, _INTERVAL_STRUCT) if i in positions else f
                                    for i, f in enumerate(schema)])
            batches = (pa.RecordBatch.from_arrays(
                [_interval_struct(b.column(i)) if i in positions else b.column(i) for i in range(b.num_columns)],
                schema=out_schema) for b in batches)
            schema = out_schema
        write_options.setdefault("existing_data_behavior", "error")
        ds.write_dataset(batches, path, schema=schema, format="parquet", **write_options)


_INTERVAL_STRUCT = pa.struct([("months", pa.int32()), ("days", pa.int32()), ("usecs", pa.int64())])


def _interval_struct(column: pa.Array) -> pa.Array:
    """A month_day_nano interval column as ``struct<months, days, usecs>`` (exact: our intervals
    hold whole microseconds)."""
    values = [None if v is None else {"months": v.months, "days": v.days, "usecs": v.nanoseconds // 1000}
              for v in column.to_pylist()]
    return pa.array(values, type=_INTERVAL_STRUCT)
