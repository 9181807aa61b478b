"""Batch Scan: the rows of a table or MV at one epoch, as a whole table or as a stream of
batches in key order, reading only what the Scan's :class:`~sql.plan.key_range.KeyRange` names.

Job: :func:`scan_table` reads a Scan whole: every row (``StorageTable.to_arrow``), the point
lookups of a range binding the whole pk (``StorageTable.get_rows``, one ``multi_get``), or the key ranges of its
prefixes and bound (``StorageTable.batch_iter``; one vnode when the range pins it).
:func:`scan_batches` yields the same rows in key order (descending with ``scan.reverse``) in
batches of growing size, for a consumer that stops early (a TopN with ``early_stop``).

Only the columns ``scan.columns`` (when set: :func:`sql.plan.key_range.plan_batch` prunes
the others) are decoded; the rest are all-NULL placeholders of the right type.

A scan that runs longer than ``REPORT_AFTER`` seconds reports its rows to the connection's
``progress=`` callback (``SCAN_PROGRESS``, set by the statement running the query): a
:class:`sql.copy.Progress` of kind ``"SELECT"`` named after the relation, total unknown,
updated at most every ``REPORT_EVERY`` seconds and finished when the scan ends; short scans
report nothing.

Invariants: the rows are those of the plain full scan that the range may hold, in pk order; a
table built here has columns ``c0..`` typed ``arrow_type(scan.types[i])`` (what every batch
node returns). Callers: :mod:`sql.batch.execute`.
"""

from __future__ import annotations

import contextvars
import threading
import time

import pyarrow as pa

from relational.arrow import arrow_type, flat_array
from relational.scan_columns import DECODES_WITHOUT_GIL
from relational.parallel import usable_cores
from relational.storage_table import StorageTable
from relational.vnode import Bitmap

MAX_BATCH = 65536
#: rows per batch of a whole-table scan read in parts (``read_split``): each batch costs a round
#: of Python work under the GIL (Arrow arrays, the Filter), which the other part then waits for
SPLIT_BATCH = 262144
SCAN_PROGRESS = contextvars.ContextVar("batch_scan_progress", default=None)   # progress= callback or None
REPORT_AFTER = 0.5    # seconds a scan runs before it reports
REPORT_EVERY = 0.1


_ZEROS = [pa.allocate_buffer(0)]   # one zeroed buffer the placeholder columns share (grown on demand)


def _zeros(nbytes: int) -> pa.Buffer:
    if _ZEROS[0].size < nbytes:
        _ZEROS[0] = pa.py_buffer(bytes(max(nbytes, 2 * _ZEROS[0].size)))
    return _ZEROS[0].slice(0, nbytes)


def _nulls(n: int, dtype: pa.DataType) -> pa.Array:
    """``pa.nulls(n, dtype)`` for a column the plan does not read, with no allocation per call:
    flat types share one zeroed buffer (Arrow arrays are immutable), others take ``pa.nulls``."""
    bits = (n + 7) >> 3
    if pa.types.is_boolean(dtype):
        return pa.Array.from_buffers(dtype, n, [_zeros(bits), _zeros(bits)], null_count=n)
    if pa.types.is_string(dtype) or pa.types.is_binary(dtype):
        return pa.Array.from_buffers(dtype, n, [_zeros(bits), _zeros(4 * (n + 1)), _zeros(0)], null_count=n)
    if pa.types.is_primitive(dtype) or pa.types.is_decimal(dtype):
        return pa.Array.from_buffers(dtype, n, [_zeros(bits), _zeros(n * dtype.bit_width // 8)], null_count=n)
    return pa.nulls(n, dtype)


class _ScanReport:
    """One scan's progress (module docstring): ``add(rows)`` per batch read (from any of the
    scan's threads: the callback is called in the one that passes the report's interval),
    ``finish()``."""

    __slots__ = ("callback", "name", "started", "last", "done", "progress", "lock")

    def __init__(self, name: str):
        self.callback, self.name = SCAN_PROGRESS.get(), name
        self.started = self.last = time.monotonic()
        self.done, self.progress = 0, None
        self.lock = threading.Lock()

    def add(self, rows: int) -> None:
        if self.callback is None:
            self.done += rows   # read only at finish(), after the threads are done
            return
        with self.lock:
            self._add(rows)

    def _add(self, rows: int) -> None:
        self.done += rows
        now = time.monotonic()
        if now - self.started < REPORT_AFTER or now - self.last < REPORT_EVERY:
            return
        if self.progress is None:
            from sql.copy import Progress
            self.progress = Progress("SELECT", self.name, self.callback)
            self.progress.started = self.started
        self.last = now
        self.progress.update(self.done)

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.finish(self.done, self.done)


def _reported(batches, name: str):
    """Yield ``batches`` (record batches) reporting their rows (:class:`_ScanReport`)."""
    report = _ScanReport(name)
    for b in batches:
        report.add(b.num_rows)
        yield b
    report.finish()


def plan_table(columns, types) -> pa.Table:
    """``columns`` (Arrow arrays) as a batch node's table: ``c0..`` typed by ``types``."""
    fields = [pa.field(f"c{i}", arrow_type(t)) for i, t in enumerate(types)]
    return pa.Table.from_arrays(list(columns), schema=pa.schema(fields))


def _storage(store, scan):
    rng = getattr(scan, "key_range", None)
    vnodes = Bitmap([rng.vnode]) if rng is not None and rng.vnode is not None else None
    return StorageTable.from_desc(store, scan.relation.desc, vnodes)


def _flat(t) -> list:
    return [flat_array(c) for c in t.columns]


def _empty(scan) -> pa.Table:
    return plan_table([pa.array([], arrow_type(t)) for t in scan.types], scan.types)


def _bounds(rng, order):
    """``(start, end, start_inclusive, end_inclusive)`` of ``batch_iter`` for the bound of a
    range on the pk column after its prefix, whose OrderType is ``order`` (a DESCENDING column
    holds the high values first: the SQL bounds swap)."""
    lo, hi = rng.lo, rng.hi
    if order.descending:
        lo, hi = hi, lo
    start = None if lo is None else (lo[0],)
    end = None if hi is None else (hi[0],)
    return start, end, True if lo is None else lo[1], False if hi is None else hi[1]


def _range_iters(table, scan, epoch, batch_size, reverse, grow=False):
    rng = scan.key_range
    orders = list(scan.relation.desc.order_types)
    n = rng.prefix_len
    start, end, s_inc, e_inc = _bounds(rng, orders[n]) if n < len(orders) else (None, None, True, False)
    points = rng.points or [()]
    if reverse:
        points = points[::-1]
    for p in points:
        yield table.batch_iter(epoch, pk_prefix=p, start=start, end=end, start_inclusive=s_inc,
                               columns=getattr(scan, "columns", None),
                               end_inclusive=e_inc, batch_size=batch_size, reverse=reverse, grow=grow)


def _widened(scan, columns: list) -> list:
    """The arrays of ``scan.columns`` (read) widened to every column: NULLs in the others."""
    wanted = getattr(scan, "columns", None)
    if wanted is None:
        return columns
    n = len(columns[0]) if columns else 0
    out = [_nulls(n, arrow_type(t)) for t in scan.types]
    for i, c in zip(wanted, columns):
        out[i] = c
    return out


def scan_row_count(store, scan, epoch: int) -> int | None:
    """The rows a whole-table ``scan`` reads at ``epoch``, from SST metadata alone, or None
    (``StorageTable.row_count``)."""
    return _storage(store, scan).row_count(epoch)


def scan_table(store, scan, epoch: int, each=None) -> pa.Table:
    """Every row ``scan`` reads at ``epoch`` (module docstring), in key order. ``each``: a
    row-wise step applied to what is read (a Filter's, :func:`sql.batch.execute._Exec._filter`)
    -- table in, table out, with no effect across rows -- so that a whole-table read applies it
    to each batch in the thread that decoded it, and the batches it drops are never kept; the
    result is ``each`` of the whole."""
    rng = getattr(scan, "key_range", None)
    if each is not None and not (rng is None and getattr(scan, "columns", None) != []):
        return each(scan_table(store, scan, epoch))
    table = _storage(store, scan)
    wanted = getattr(scan, "columns", None)
    name = scan.relation.name
    if rng is None:
        if wanted == []:   # no column read (count(*)): the row count alone, from SST metadata if it decides
            n = table.row_count(epoch)
            if n is None:
                n = sum(b.num_rows for b in _reported(table.batch_iter(epoch, columns=[], batch_size=MAX_BATCH),
                                                      name))
            return plan_table([_nulls(n, arrow_type(t)) for t in scan.types], scan.types)
        workers = usable_cores() if DECODES_WITHOUT_GIL else 1   # parts side by side (read_split)
        report = _ScanReport(name)

        def read(b):   # in the part's thread: progress while the parts are read
            report.add(b.num_rows)
            return b if each is None else each(plan_table(_widened(scan, b.columns), scan.types))
        got = table.read_split(epoch, columns=wanted, workers=workers, batch_size=SPLIT_BATCH, each=read)
        report.finish()
        if each is not None:
            return pa.concat_tables(got) if got else each(_empty(scan))
        whole = pa.Table.from_batches(got, schema=table.arrow_schema(wanted))
        return plan_table(_widened(scan, _flat(whole)), scan.types)
    if rng.empty:
        return _empty(scan)
    if rng.is_point():
        rows = [r for r in table.get_rows(rng.points, epoch) if r is not None]   # one multi_get
        if not rows:
            return _empty(scan)
        from sql.batch.execute import to_arrow_values
        return plan_table([to_arrow_values([r[i] for r in rows], t) for i, t in enumerate(scan.types)], scan.types)
    batches = list(_reported((b for it in _range_iters(table, scan, epoch, MAX_BATCH, False) for b in it), name))
    if not batches or not sum(b.num_rows for b in batches):
        return _empty(scan)
    if wanted == []:
        n = sum(b.num_rows for b in batches)
        return plan_table([_nulls(n, arrow_type(t)) for t in scan.types], scan.types)
    return plan_table(_widened(scan, _flat(pa.Table.from_batches(batches))), scan.types)


def scan_batches(store, scan, epoch: int):
    """Yield ``scan``'s rows at ``epoch`` as tables in key order (``scan.reverse``: descending),
    in batches that grow (``StorageTable.batch_iter(grow=True)``) up to ``MAX_BATCH`` rows."""
    rng = getattr(scan, "key_range", None)
    if rng is not None and (rng.empty or rng.is_point()):
        t = scan_table(store, scan, epoch)
        if t.num_rows:
            yield t
        return
    table = _storage(store, scan)
    wanted = getattr(scan, "columns", None)
    reverse = getattr(scan, "reverse", False)
    if rng is None:
        iters = [table.batch_iter(epoch, batch_size=MAX_BATCH, reverse=reverse, grow=True, columns=wanted)]
    else:
        iters = _range_iters(table, scan, epoch, MAX_BATCH, reverse, grow=True)
    for it in iters:
        try:
            for b in it:
                yield plan_table(_widened(scan, b.columns) if wanted != [] else
                                 [_nulls(b.num_rows, arrow_type(t)) for t in scan.types], scan.types)
        finally:
            it.close()   # a reader that stopped early releases the snapshot now
