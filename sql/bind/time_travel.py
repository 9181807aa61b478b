"""Time travel: ``FROM t FOR SYSTEM_TIME AS OF <time>`` and ``FROM t [FOR SYSTEM_TIME] AS OF
EPOCH <n>`` (RisingWave's spellings) read a table or MV as it was at an older committed epoch.

``<time>``: a TIMESTAMP/TIMESTAMPTZ literal or string (a time without a zone is UTC, the
session's only time zone), ``NOW()``/``CURRENT_TIMESTAMP``/``PROCTIME()``, either ``+``/``-`` a
constant INTERVAL, an integer (Unix seconds) or a ``$n`` parameter holding any of these.
``EPOCH <n>`` names a hummock epoch directly. (sqlglot has no EPOCH form: :mod:`sql.parse`
rewrites it to ``FOR VERSION <n>``, the same width, which sqlglot parses as a ``Version``.)

Time -> epoch: ``AS OF T`` reads what a SELECT at wall-clock time ``T`` would have read, the
epoch of the store's last commit at or before ``T`` (``HummockStorage.committed_epoch_at``, from
the commit log the retention window keeps). Not ``epoch_from_unix_ms(T)``: an epoch's physical
time (``hummock.key``) is when its barrier began it, and rows written after ``T`` can still belong
to the epoch open at ``T``. A query samples the latest committed epoch ``L`` and then the clock
``now`` (:func:`pin_scans`); a time at or after ``now`` reads ``L``, so ``AS OF NOW()`` sees every
commit before the statement.

Retention: the oldest readable point is the state current at ``now - retention_seconds``
(``StorageOptions.retention_seconds``, a ``connect`` option; 0 keeps only the present), or at
the start of the commit log when that is later (history before the store opened is not kept,
as hummock's retention counts earlier epochs as committed at open), and never below
``store.min_readable_epoch``. Older reads raise ``ExecutionError`` naming the oldest readable
time, caused by hummock's ``ExpiredEpochError``. Each distinct epoch is pinned with
``store.snapshot`` for the whole query, so compaction cannot take it away mid-read.

Invariants: time travel is a batch read -- the binder refuses it in a materialized view; the
catalog is today's (a relation created after the time reads empty; a table whose columns ALTER
TABLE ... ADD/DROP COLUMN changed after the time is refused by name: its rows then had another
layout).

Callers: :mod:`sql.bind.select` (``bind_as_of`` for a table with a ``version``),
:mod:`sql.batch.execute` (``pin_scans`` around a query).
"""

from __future__ import annotations

import contextlib
import datetime
import time

from sqlglot import exp

from hummock.errors import ExpiredEpochError
from hummock.key import epoch_to_unix_ms
from relational.types import DataType, Interval

from sql import types as T
from sql.errors import BindError, ExecutionError, UnsupportedError, error_at, position_of
from sql.plan import nodes as P

UTC = datetime.timezone.utc
_NOW_FUNCS = ("NOW", "PROCTIME", "CURRENT_TIMESTAMP", "TRANSACTION_TIMESTAMP", "STATEMENT_TIMESTAMP")


class AsOf:
    """One bound ``AS OF`` clause: ``epoch`` (an EPOCH n) or ``at`` (``now -> datetime``)."""

    def __init__(self, text: str, node, epoch: int | None = None, at=None):
        self.text, self.epoch, self.at = text, epoch, at
        self.line, self.column = position_of(node)

    def read_epoch(self, store, latest: int, now: datetime.datetime) -> int:
        """The epoch this clause reads, for latest committed epoch ``latest`` sampled before ``now``."""
        if self.epoch is not None:
            if self.epoch > latest:
                raise ExecutionError(f"AS OF EPOCH {self.epoch}: that epoch is not committed yet (the latest "
                                     f"committed epoch is {latest})", self.line, self.column)
            return self.epoch
        at = self.at(now)
        if at >= now:
            return latest
        epoch = store.committed_epoch_at(at.timestamp())
        return -1 if epoch is None else min(epoch, latest)   # -1: before the store's commit log


_UNITS = {u + s for u in ("second", "minute", "hour", "day", "week", "month", "year") for s in ("", "s")}


def bind_as_of(version, params, alias: str | None = None) -> tuple:
    """Bind a sqlglot ``Version`` node (a table's ``FOR SYSTEM_TIME AS OF ...``): ``(AsOf, alias
    taken)``. RisingWave's ``NOW() - '10' SECOND`` reaches us as ``NOW() - '10'`` with the table
    aliased ``second``: a bare number string shifted by +/- and a unit-named ``alias`` form one
    interval, and ``alias taken`` tells the caller the table has no alias."""
    node = version.expression
    if alias in _UNITS and isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Literal) \
            and node.expression.is_string and _is_number(node.expression.this):
        iv = _interval_text(f"{node.expression.this} {alias}", node.expression)
        base = _time_fn(node.this, params)
        sign = 1 if isinstance(node, exp.Add) else -1
        text = f"{node.this.sql(dialect='postgres')} {'+' if sign > 0 else '-'} '{node.expression.this}' {alias}"
        return AsOf(text, node, at=lambda now: _shift(base(now), iv, sign)), True
    return _bind_as_of(version, params), False


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _bind_as_of(version, params) -> AsOf:
    kind = (version.args.get("kind") or "").upper()
    if kind != "AS OF":
        raise error_at(UnsupportedError, f"FOR SYSTEM_TIME {kind} is not supported (only AS OF)", version)
    node = version.expression
    text = node.sql(dialect="postgres")
    if str(version.this).upper() == "VERSION":   # AS OF EPOCH n (sql/parse.py rewrote it)
        value = _constant(node, params)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise error_at(BindError, f"AS OF EPOCH needs a non-negative integer epoch, not {text}", node)
        return AsOf(f"EPOCH {value}", node, epoch=value)
    return AsOf(text, node, at=_time_fn(node, params))


def _constant(node, params):
    if isinstance(node, exp.Paren):
        return _constant(node.this, params)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return float(text) if any(c in text for c in ".eE") else int(text)
    if isinstance(node, exp.Neg):
        inner = _constant(node.this, params)
        return -inner if isinstance(inner, (int, float)) else None
    if isinstance(node, exp.Parameter) and node.this is not None and node.this.name.isdigit():
        n = int(node.this.name)
        if not 1 <= n <= len(params):
            raise error_at(BindError, f"there is no parameter ${n} ({len(params)} given)", node)
        return params[n - 1]
    return None


def _time_fn(node, params):
    """``now -> aware datetime`` for a time expression; errors at bind time for bad shapes."""
    if isinstance(node, exp.Paren):
        return _time_fn(node.this, params)
    if isinstance(node, exp.CurrentTimestamp) or \
            (isinstance(node, exp.Anonymous) and node.name.upper() in _NOW_FUNCS and not node.expressions):
        return lambda now: now
    if isinstance(node, (exp.Add, exp.Sub)):
        base = _time_fn(node.this, params)
        iv = _interval(node.expression, params)
        sign = 1 if isinstance(node, exp.Add) else -1
        return lambda now: _shift(base(now), iv, sign)
    if isinstance(node, exp.Cast):
        dtype = T.type_from_sqlglot(node.to)
        if dtype not in (DataType.TIMESTAMP, DataType.TIMESTAMPTZ, DataType.DATE):
            raise error_at(BindError, f"FOR SYSTEM_TIME AS OF needs a timestamp, not {dtype.sql_name()}", node)
        value = _constant(node.this, params)
        if not isinstance(value, str):
            return _time_fn(node.this, params)
        fixed = _timestamp(value, node)
        return lambda now: fixed
    value = _constant(node, params)
    if isinstance(value, str):
        fixed = _timestamp(value, node)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:   # Unix seconds, as RisingWave reads an integer
            fixed = datetime.datetime.fromtimestamp(value, UTC)
        except (OverflowError, ValueError, OSError):
            raise error_at(BindError, f"FOR SYSTEM_TIME AS OF {value}: not a Unix time in seconds", node) from None
    elif isinstance(value, datetime.datetime):
        fixed = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    elif isinstance(value, datetime.date):
        fixed = datetime.datetime(value.year, value.month, value.day, tzinfo=UTC)
    else:
        raise error_at(UnsupportedError, f"FOR SYSTEM_TIME AS OF {node.sql(dialect='postgres')[:40]}: expected a "
                                         "timestamp, NOW() +/- an INTERVAL, Unix seconds, or EPOCH n", node)
    return lambda now: fixed


def _timestamp(text: str, node) -> datetime.datetime:
    try:
        return T.parse_text(text, DataType.TIMESTAMPTZ)
    except ValueError:
        raise error_at(BindError, f"FOR SYSTEM_TIME AS OF: invalid timestamp {text!r}", node) from None


def _interval(node, params) -> Interval:
    if isinstance(node, exp.Interval):
        text = f"{node.this.name} {node.unit.name if node.unit else ''}".strip()
    else:
        text = _constant(node, params)
        if isinstance(text, datetime.timedelta):
            return Interval.from_timedelta(text)
        if isinstance(text, Interval):
            return text
    if isinstance(text, str):
        return _interval_text(text, node)
    raise error_at(BindError, f"FOR SYSTEM_TIME AS OF: {node.sql(dialect='postgres')[:40]} is not a constant "
                              "INTERVAL", node)


def _interval_text(text: str, node) -> Interval:
    try:
        return T.parse_interval(text)
    except (ValueError, IndexError):
        raise error_at(BindError, f"FOR SYSTEM_TIME AS OF: {text!r} is not a constant INTERVAL", node) from None


def _shift(at: datetime.datetime, iv: Interval, sign: int) -> datetime.datetime:
    months = at.year * 12 + at.month - 1 + sign * iv.months
    year, month = divmod(months, 12)
    day = min(at.day, _days_in(year, month + 1))
    at = at.replace(year=year, month=month + 1, day=day)
    return at + sign * datetime.timedelta(days=iv.days, microseconds=iv.usecs)


def _days_in(year: int, month: int) -> int:
    nxt = datetime.date(year + (month == 12), month % 12 + 1, 1)
    return (nxt - datetime.timedelta(days=1)).day


# --- execution ------------------------------------------------------------------------------------

def oldest_readable(store, latest: int, now: datetime.datetime) -> tuple:
    """``(epoch, unix_time)``: the oldest epoch a time-travel read may use and the wall-clock
    time from which on it was current (module docstring)."""
    horizon = now.timestamp() - store.options.retention_seconds
    start_time, start_epoch = store.commit_log_start
    if horizon < start_time:   # the window reaches back before the log: its start is the limit
        horizon, epoch = start_time, start_epoch
    else:
        epoch = store.committed_epoch_at(horizon)
    epoch = min(latest, epoch)
    if store.min_readable_epoch > epoch:   # compaction took what the window no longer holds
        return store.min_readable_epoch, None
    return epoch, horizon


def _time_of(epoch: int, unix_time: float | None) -> str:
    """The wall-clock time of ``epoch`` (or ``unix_time``) for a message; an epoch after year
    9999 (a damaged or hostile store) is said so instead of raising."""
    seconds = epoch_to_unix_ms(epoch) / 1000 if unix_time is None else unix_time
    try:
        return datetime.datetime.fromtimestamp(seconds, UTC).isoformat(sep=" ", timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return "a time beyond Python's datetime range"


def _expired(as_of: AsOf, epoch: int, oldest: tuple, retention: float) -> ExecutionError:
    at = f" (epoch {epoch})" if epoch >= 0 else ""
    return ExecutionError(
        f"FOR SYSTEM_TIME AS OF {as_of.text}{at} is past the retention window: the oldest readable time is "
        f"{_time_of(*oldest)} (epoch {oldest[0]}); this database keeps {retention:g} seconds of history since "
        "it opened (connect(..., retention_seconds=N))", as_of.line, as_of.column)


@contextlib.contextmanager
def pin_scans(plan: P.Node, store, latest: int):
    """Yield ``{id(scan): epoch}`` for every time-travel Scan of ``plan``, each epoch pinned by a
    snapshot until the block ends; ``latest`` is the committed epoch the query reads otherwise,
    sampled before this call (module docstring)."""
    scans = [n for n in P.walk(plan) if isinstance(n, P.Scan) and getattr(n, "as_of", None) is not None]
    if not scans:
        yield {}
        return
    now = datetime.datetime.fromtimestamp(time.time(), UTC)
    oldest = oldest_readable(store, latest, now)
    retention = store.options.retention_seconds
    epochs, snaps = {}, {}
    try:
        for scan in scans:
            epoch = scan.as_of.read_epoch(store, latest, now)
            if epoch < oldest[0]:
                raise _expired(scan.as_of, epoch, oldest, retention) from ExpiredEpochError(max(epoch, 0), oldest[0])
            altered = getattr(scan.relation, "layout_epoch", 0)   # ADD/DROP COLUMN re-encoded its rows (sql/alter.py)
            if altered and epoch < altered:
                raise ExecutionError(f"AS OF {scan.as_of.text}: the columns of {scan.relation.name!r} changed later "
                                     f"(ALTER TABLE ... ADD/DROP COLUMN at epoch {altered}); its older rows are not "
                                     f"readable with its present columns", scan.as_of.line, scan.as_of.column)
            if epoch not in snaps:
                try:
                    snaps[epoch] = store.snapshot(epoch)
                except ExpiredEpochError as exc:
                    floor = (exc.min_readable_epoch, None) if exc.min_readable_epoch > oldest[0] else oldest
                    raise _expired(scan.as_of, epoch, floor, retention) from exc
            epochs[id(scan)] = epoch
        yield epochs
    finally:
        for snap in snaps.values():
            snap.release()
