"""Subscriptions and subscription cursors: RisingWave's user surface over change logs.

Job: the statements ``CREATE SUBSCRIPTION s FROM rel [WITH (retention = '1 hour')]``, ``DROP
SUBSCRIPTION [IF EXISTS] s``, ``DECLARE c SUBSCRIPTION CURSOR FOR s [SINCE n | FULL]``, ``FETCH
[NEXT | n | ALL] FROM c`` and ``CLOSE c | ALL``, and the Python iterator
``Connection.subscribe(s, since=..., full=..., timeout=...)``. docs/sql.md "Subscriptions".

A subscription is a catalog record (sql/catalog.py ``Subscription``) plus a change-log table the
relation's Materialize writes (relational/change_log.py). ``CREATE`` runs under the database
lock: it flushes (committed epoch ``S``), then rebuilds the graph with the log writer in place,
so every change after ``S`` is logged and none before it is expected: ``start_epoch = S``.
``DROP`` rebuilds without the writer, truncates the log table and deletes its consumer pins.

A cursor has a *position* ``p``: it has returned every change of epochs ``<= p``. ``FETCH`` reads
the log at the committed epoch ``c`` for epochs in ``(p, c]`` (in windows of
:data:`READ_WINDOW_MS`, so a backlog is read a window at a time), buffers them in ``(epoch,
vnode, pk)`` order and returns up to ``n`` rows; it never waits (0 rows: nothing new yet).
Before each read the position is checked against the log's retention and the subscription's
``start_epoch`` (:class:`relational.change_log.ChangeLogExpiredError`, an ExecutionError in SQL):
a cursor never skips changes silently. ``SINCE n``: ``n`` at least 2^48 is an epoch (changes
after it: resume from the last epoch seen without duplicates); below, RisingWave's
``rw_timestamp`` in unix ms (changes at or after it); ``now()``/``proctime()`` (the default):
changes from now on; ``begin()``: the oldest retained. ``FULL``: the relation's rows at the
committed epoch (op ``Insert``, ``rw_timestamp`` NULL), then every change after it.

FETCH rows: the relation's visible columns, then ``op`` (VARCHAR: ``Insert``, ``Delete``,
``UpdateDelete``, ``UpdateInsert``) and ``rw_timestamp`` (BIGINT, the epoch's unix ms).
Cursors belong to the connection (closed with it); they hold no pin between statements except
a FULL cursor's snapshot until its rows are returned.

Callers: :mod:`sql.statements` (dispatch), :mod:`sql.session` (``subscribe``).
"""

from __future__ import annotations

import re
import time
from collections import deque

from hummock.errors import HummockError
from hummock.key import EPOCH_PHYSICAL_SHIFT
from relational.catalog import TableDesc
from relational.change_log import (OP_INSERT, OP_NAMES, Change, check_position, drop_pins, epoch_of_unix_ms,
                                   read_changes, retained_from)
from relational.row_serde import RowSerde
from relational.types import DataType

from sql.catalog import Subscription
from sql.errors import BindError, CatalogError, SqlSyntaxError

CURSORS = "__cursors__"            # the connection's cursors live in its variables under this key
DEFAULT_RETENTION_MS = 24 * 3600 * 1000
MAX_RETENTION_MS = 1000 * 365 * 86_400_000
READ_WINDOW_MS = 10_000            # epochs read per log scan when catching up
EPOCH_LIMIT = 1 << 48              # SINCE values at least this are epochs, below: unix ms
_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "secs": 1000, "second": 1000,
          "seconds": 1000, "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
          "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000,
          "days": 86_400_000, "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.I)
_OPTION = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*('(?:[^']|'')*'|[^,]+?)\s*(?:,|$)")


def parse_retention(text: str) -> int:
    """An interval text (``'1 hour'``, ``'1D'``, ``'30 minutes 10 s'``, ``'3600'`` seconds) in ms."""
    text = text.strip()
    total, at = 0, 0
    while at < len(text):
        m = _PART.match(text, at)
        if m is None or m.end() == at:
            raise BindError(f"invalid retention {text!r}: expected an interval such as '1 hour' or '1D'")
        unit = m.group(2).lower() or "s"
        if unit not in _UNITS:
            raise BindError(f"invalid retention {text!r}: unknown unit {m.group(2)!r}")
        total += int(float(m.group(1)) * _UNITS[unit])
        at = m.end()
    if not 0 < total < MAX_RETENTION_MS:
        raise BindError(f"invalid retention {text!r}: it must be positive and under 1,000 years")
    return total


def _with_options(text: str | None) -> dict:
    out, at = {}, 0
    text = text or ""
    while at < len(text.rstrip()):
        m = _OPTION.match(text, at)
        if m is None or m.end() == at:
            raise SqlSyntaxError(f"syntax error in WITH ({text.strip()}): expected name = 'value', ...")
        value = m.group(2)
        out[m.group(1).lower()] = value[1:-1].replace("''", "'") if value.startswith("'") else value
        at = m.end()
    return out


# --- DDL ------------------------------------------------------------------------------------------

def create_subscription(db, stmt, params, variables):
    from sql.statements import Result
    name, opts = stmt.name, stmt.options
    parts = opts["relation"]
    if len(parts) == 2 and parts[0] != "public":
        raise CatalogError(f"schema {parts[0]!r} does not exist", stmt.line, stmt.column)
    options = _with_options(opts.get("with"))
    unknown = sorted(set(options) - {"retention"})
    if unknown:
        raise BindError(f"unknown subscription option(s) {unknown}: CREATE SUBSCRIPTION takes retention",
                        stmt.line, stmt.column)
    retention = parse_retention(options["retention"]) if "retention" in options else DEFAULT_RETENTION_MS
    with db.lock:   # no write between the start epoch and the graph that logs (module docstring)
        if name in db.catalog.subscriptions:
            if opts.get("if_not_exists"):
                return Result()
            raise CatalogError(f"subscription {name!r} already exists", stmt.line, stmt.column)
        rel = db.catalog.get(parts[-1])
        if rel is None or rel.kind == "index":
            what = "is an index" if rel is not None else "does not exist"
            raise CatalogError(f"table or materialized view {parts[-1]!r} {what}", stmt.line, stmt.column)
        start = db.flush()
        new = db.catalog.copy()
        d = rel.desc
        desc = TableDesc(new.allocate_id(), name, d.columns, d.pk_indices, d.order_types, d.dist_key_indices,
                         d.value_indices)
        sub = Subscription(desc, rel.name, retention, start)
        new.subscriptions[name] = sub
        db.apply_ddl(new, changed=[sub])
    return Result()


def drop_subscription(db, stmt, params, variables):
    from sql.statements import Result
    with db.lock:
        sub = db.catalog.subscriptions.get(stmt.name)
        if sub is None:
            if stmt.options.get("if_exists"):
                return Result()
            raise CatalogError(f"subscription {stmt.name!r} does not exist", stmt.line, stmt.column)
        new = db.catalog.copy()
        del new.subscriptions[stmt.name]
        db.apply_ddl(new, dropped=[sub])
        drop_pins(db.store._store, sub.table_id)   # consumers' pins of the log go with it
    return Result()


# --- cursors --------------------------------------------------------------------------------------

class _SnapshotReader:
    """``iter(table_id, epoch, start, end)`` over a store snapshot (what read_changes takes)."""

    def __init__(self, snap):
        self.snap = snap

    def iter(self, table_id, epoch, start=None, end=None):
        return self.snap.iter(table_id, start, end)


class ChangeCursor:
    """A position in one subscription's change log (module docstring). Not thread-safe."""

    def __init__(self, db, name: str, since=None, full: bool = False):
        self.db, self.name = db, name
        sub = self._subscription()
        self.table_id = sub.table_id
        rel = db.catalog.get(sub.relation)
        self.n_visible = rel.n_visible if rel is not None else len(sub.desc.columns)
        self.columns = list(sub.desc.columns[:self.n_visible])
        d = sub.desc
        self.serde = RowSerde(d.types, d.pk_indices, d.order_types, d.dist_key_indices, d.value_indices)
        self.buffer: deque = deque()   # Change, in order
        self._snapshot = None
        self.snapshot_epoch = None     # FULL: the epoch of the snapshot rows
        committed = db.store.max_committed_epoch
        if full:
            self.position = self.snapshot_epoch = committed
            self._snapshot = db.store.snapshot(committed)
            self._snapshot_rows = self._snapshot.iter(rel.table_id)
            self._snapshot_serde = self.serde   # the log's desc is the relation's layout
        else:
            self.position = self._since(since, sub, committed)
        self._check(sub)

    def _subscription(self) -> Subscription:
        sub = self.db.catalog.subscriptions.get(self.name)
        if sub is None or getattr(self, "table_id", sub.table_id) != sub.table_id:
            raise CatalogError(f"subscription {self.name!r} does not exist (dropped?)")
        return sub

    def _since(self, since, sub, committed) -> int:
        if since is None:
            return committed
        if isinstance(since, str):
            word = since.strip().lower().replace(" ", "")
            if word in ("now()", "proctime()"):
                return committed
            if word == "begin()":
                cutoff = retained_from(self.db.store.table_watermarks(sub.table_id))
                return max(sub.start_epoch, cutoff - (1 << EPOCH_PHYSICAL_SHIFT))
            try:
                since = int(word)
            except ValueError:
                raise BindError(f"SINCE takes now(), proctime(), begin(), an epoch or a unix ms timestamp, got "
                                f"{since!r}") from None
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise BindError(f"since must be a non-negative int (an epoch, or unix ms below 2^48), got {since!r}")
        if since >= EPOCH_LIMIT:
            return since
        return epoch_of_unix_ms(since) - 1   # changes at or after that millisecond

    def _check(self, sub) -> None:
        check_position(sub.name, self.position, sub.start_epoch, self.db.store.table_watermarks(sub.table_id))

    def _fill(self) -> None:
        """Buffer the next changes (module docstring): snapshot rows first, then log windows."""
        if self._snapshot is not None:
            for key, value in self._snapshot_rows:
                row = self._snapshot_serde.decode(key, value)
                self.buffer.append(Change(self.position, OP_INSERT, row))
                if len(self.buffer) >= 4096:
                    return
            self._close_snapshot()
            if self.buffer:
                return
        sub = self._subscription()
        store = self.db.store
        committed = store.max_committed_epoch
        while not self.buffer and self.position < committed:
            self._check(sub)
            upto = min(committed, self.position + (READ_WINDOW_MS << EPOCH_PHYSICAL_SHIFT))
            with store.snapshot(committed) as snap:
                self.buffer.extend(read_changes(_SnapshotReader(snap), sub.table_id, self.serde, committed,
                                                self.position, upto))
            self.position = upto

    def fetch(self, n: int | None) -> list:
        """Up to ``n`` (None: all available) :class:`Change`\\ s, never waiting."""
        out = []
        while n is None or len(out) < n:
            if not self.buffer:
                self._fill()
                if not self.buffer:
                    break
            out.append(self.buffer.popleft())
        return out

    def _close_snapshot(self) -> None:
        if self._snapshot is not None:
            snap, self._snapshot = self._snapshot, None
            self._snapshot_rows = None
            try:
                snap.release()
            except HummockError:   # the store was reopened meanwhile: the pin went with it
                pass

    def close(self) -> None:
        self._close_snapshot()
        self.buffer.clear()


def _cursors(variables) -> dict:
    return variables.setdefault(CURSORS, {})


def declare_cursor(db, stmt, params, variables):
    from sql.statements import Result
    cursors = _cursors(variables)
    if stmt.name in cursors:
        raise CatalogError(f"cursor {stmt.name!r} already exists", stmt.line, stmt.column)
    if stmt.options["subscription"] not in db.catalog.subscriptions:
        raise CatalogError(f"subscription {stmt.options['subscription']!r} does not exist", stmt.line, stmt.column)
    cursors[stmt.name] = ChangeCursor(db, stmt.options["subscription"], stmt.options.get("since"),
                                      stmt.options.get("full", False))
    return Result()


def fetch(db, stmt, params, variables):
    from sql.statements import _rows_result
    cur = _cursors(variables).get(stmt.name)
    if cur is None:
        raise CatalogError(f"cursor {stmt.name!r} does not exist", stmt.line, stmt.column)
    n = 1 if stmt.value == "NEXT" else None if stmt.value == "ALL" else int(stmt.value)
    rows = []
    for ch in cur.fetch(n):
        stamp = None if ch.epoch == cur.snapshot_epoch else ch.rw_timestamp   # FULL's snapshot rows: NULL
        rows.append(tuple(ch.row[:cur.n_visible]) + (OP_NAMES[ch.op], stamp))
    return _rows_result(cur.columns + [("op", DataType.VARCHAR), ("rw_timestamp", DataType.BIGINT)], rows)


def close(db, stmt, params, variables):
    from sql.statements import Result
    cursors = _cursors(variables)
    if stmt.name is None:
        for cur in cursors.values():
            cur.close()
        cursors.clear()
        return Result()
    cur = cursors.pop(stmt.name, None)
    if cur is None:
        raise CatalogError(f"cursor {stmt.name!r} does not exist", stmt.line, stmt.column)
    cur.close()
    return Result()


def close_all(variables) -> None:
    """Close the connection's cursors (``Connection.close``)."""
    for cur in variables.pop(CURSORS, {}).values():
        cur.close()


# --- the Python iterator --------------------------------------------------------------------------

class Subscriber:
    """``Connection.subscribe``: iterate :class:`~relational.change_log.Change`\\ s (``row``: the
    visible columns) of a subscription, then live ones as epochs commit. ``timeout``: seconds to
    wait for a new change before the iteration ends (None: forever; 0: stop once caught up).
    ``position``: every change of an epoch at or below it was returned (resume with
    ``since=position``; that may repeat changes of the next epoch already returned, and during a
    FULL cursor's snapshot rows it is the snapshot's epoch: resume with ``full=True`` then)."""

    def __init__(self, db, name: str, since=None, full: bool = False, timeout: float | None = None,
                 poll_interval: float = 0.05):
        self._cursor = ChangeCursor(db, name, since, full)
        self.timeout, self.poll_interval = timeout, poll_interval

    @property
    def position(self) -> int:
        return self._cursor.position if not self._cursor.buffer else self._cursor.buffer[0].epoch - 1

    def __iter__(self):
        return self

    def __next__(self) -> Change:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            got = self._cursor.fetch(1)
            if got:
                ch = got[0]
                return Change(ch.epoch, ch.op, tuple(ch.row[:self._cursor.n_visible]))
            if deadline is not None and time.monotonic() >= deadline:
                raise StopIteration
            time.sleep(self.poll_interval if deadline is None else
                       max(0.0, min(self.poll_interval, deadline - time.monotonic())))

    def fetch(self, n: int | None = None) -> list:
        """Up to ``n`` changes available now (never waits)."""
        return [Change(c.epoch, c.op, tuple(c.row[:self._cursor.n_visible])) for c in self._cursor.fetch(n)]

    def close(self) -> None:
        self._cursor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
