"""Data errors of :mod:`stream.expr` evaluation: integer overflow, division or remainder by zero,
a cast that does not fit, a date out of range -- any error a value (not the plan) causes.

Two modes, per thread (a context variable): inside :func:`raising_errors` (the SQL layer's
batch queries and DML) a data error raises :class:`~stream.errors.ExpressionError` naming the
failing node, as Postgres does; otherwise (stream executors) the failing row's value is NULL (a
Filter then drops the row), as RisingWave's non-strict streaming mode does, so one bad row never
stops a materialized view. Such an error is

- counted: process-wide by kind (:func:`error_counts`), and into the counter of the actor that
  evaluated it (:func:`count_into`, which the stream runtime calls in every actor's task, so the
  SQL layer reports counts per materialized view: ``Connection.data_errors()``). The kind is
  the message with its values taken out (:func:`error_kind`: "integer out of range", never one
  key per bad value), so the counters stay small however many rows fail;
- logged (logger ``stream.expr``, "... set to NULL"): one warning per node and chunk with the
  row count, rate-limited per kind and node (at most ``LOG_BURST`` warnings per ``LOG_WINDOW_S``
  seconds; the next one says how many were suppressed).

Invariant: a row that does not fail evaluates exactly as without this module; a chunk where
nothing fails costs one try block. :func:`guarded` evaluates a node whose Arrow kernel failed
on the whole chunk again row by row (the node's compute function), so only the failing rows
become NULL.

Callers: every node module behind :mod:`stream.expr` (``stream.expr_*``), :mod:`stream.decimal_ops`
results via them, aggregate results (:mod:`stream.executors.agg_call`), the stream runtime's
actors (``count_into``), ``sql`` (``raising_errors``).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import threading
import time
from collections import Counter

import pyarrow as pa

from relational.arrow import arrow_type
from stream.errors import ExpressionError

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

log = logging.getLogger("stream.expr")

_STRICT = contextvars.ContextVar("stream_expr_strict", default=False)
_QUIET = contextvars.ContextVar("stream_expr_quiet", default=False)
_SINK = contextvars.ContextVar("stream_expr_sink", default=None)
_ERRORS: Counter = Counter()
_ERRORS_LOCK = threading.Lock()

LOG_BURST = 10          # warnings per kind and node ...
LOG_WINDOW_S = 60.0     # ... per this many seconds; the rest are counted and summarized
_LOG_STATE: dict = {}   # (kind, node text) -> [window start, warnings in it, suppressed]
_LOG_STATE_MAX = 4096
_INT_NAMES = {"SMALLINT": "smallint", "INT": "integer", "BIGINT": "bigint"}
# values inside a message: quoted text, and numbers not part of a word ("int32" stays)
_VALUES = re.compile(r"'[^']*'|\"[^\"]*\"|(?<![\w.])[-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@contextlib.contextmanager
def raising_errors():
    """Evaluate inside this block with data errors raising :class:`ExpressionError` (batch
    queries and DML) instead of turning the row's value into NULL (module docstring)."""
    token = _STRICT.set(True)
    try:
        yield
    finally:
        _STRICT.reset(token)


def strict() -> bool:
    """Whether data errors raise here (inside :func:`raising_errors`)."""
    return _STRICT.get()


def error_counts() -> dict:
    """Rows whose value became NULL because of a data error in streaming mode, by kind
    (:func:`error_kind`; process-wide, since start)."""
    with _ERRORS_LOCK:
        return dict(_ERRORS)


def count_into(counter: Counter | None) -> None:
    """From now on, in this context (an asyncio task has its own: an actor's task calls this
    once), streaming data errors are also counted into ``counter`` (kind -> rows)."""
    _SINK.set(counter)


@contextlib.contextmanager
def counting_into(counter: Counter):
    """:func:`count_into` for the block only (tests, callers outside a task)."""
    token = _SINK.set(counter)
    try:
        yield counter
    finally:
        _SINK.reset(token)


def error_kind(message: str) -> str:
    """``message`` with its values replaced by ``?``: the key errors are counted by."""
    return _VALUES.sub("?", message)


def data_error(expr, message: str, rows: int = 1) -> None:
    """A data error in ``rows`` rows of ``expr``: raises in strict mode, else logs and counts."""
    if not rows:
        return
    if _STRICT.get():
        raise ExpressionError(message, expr)
    if not _QUIET.get():
        kind = error_kind(message)
        sink = _SINK.get()
        with _ERRORS_LOCK:
            _ERRORS[kind] += rows
            if sink is not None:
                sink[kind] += rows
        _log(kind, message, expr, rows)


def _log(kind: str, message: str, expr, rows: int) -> None:
    """The warning of :func:`data_error`, rate-limited per kind and node (module docstring)."""
    where = str(expr)
    now = time.monotonic()
    with _ERRORS_LOCK:
        state = _LOG_STATE.get((kind, where))
        if state is None:
            if len(_LOG_STATE) >= _LOG_STATE_MAX:
                _LOG_STATE.clear()
            state = _LOG_STATE[(kind, where)] = [now, 0, 0]
        elif now - state[0] >= LOG_WINDOW_S:
            state[0], state[1] = now, 0
        if state[1] >= LOG_BURST:
            state[2] += rows
            return
        state[1] += 1
        suppressed, state[2] = state[2], 0
    log.warning("%s in %s: %d row(s) set to NULL%s", message, where, rows,
                f" (and {suppressed} more row(s) since the last warning)" if suppressed else "")


# Postgres' names of types in "invalid input syntax for type ..." (by Arrow's type in its message)
_PARSE_NAMES = {"int16": "smallint", "int32": "integer", "int64": "bigint", "bool": "boolean", "date32[day]": "date",
                "time64[us]": "time", "timestamp[us]": "timestamp", "timestamp[us, tz=UTC]": "timestamp with time zone"}
_PARSE_FAILED = re.compile(r"Failed to parse string: '(.*)' as a scalar of type ([^:]+)(?::.*)?$", re.S)
_PARSE_BOOL = re.compile(r"Failed to parse value: (.*)$", re.S)   # Arrow's string -> bool cast


def arrow_message(exc, data_type=None) -> str:
    """The SQL message of an Arrow kernel's failure (an overflow, a cast out of range: "integer
    out of range" for an integer ``data_type``, as Postgres says; text a cast cannot read:
    'invalid input syntax for type integer: "x"')."""
    text = str(exc)
    low = text.lower()
    if "overflow" in low or "not in range" in low or "out of bounds" in low:
        name = _INT_NAMES.get(data_type.sql_name()) if data_type is not None else None
        return f"{name} out of range" if name else "value out of range: overflow"
    parsed = _PARSE_FAILED.match(text)
    if parsed and parsed.group(2) in _PARSE_NAMES:
        return f'invalid input syntax for type {_PARSE_NAMES[parsed.group(2)]}: "{parsed.group(1)}"'
    parsed = _PARSE_BOOL.match(text)
    if parsed and data_type is not None and data_type.sql_name() == "BOOLEAN":
        return f'invalid input syntax for type boolean: "{parsed.group(1)}"'
    return text


def wrap(fn, expr, *args):
    try:
        return fn(*args)
    except ARROW_ERRORS as exc:
        raise ExpressionError(arrow_message(exc, getattr(expr, "data_type", None)), expr) from exc


def is_array(v) -> bool:
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def guarded(expr, columns, compute):
    """``compute(columns)`` (the node ``expr``'s whole-chunk evaluation); when it fails: strict
    mode raises, streaming mode calls ``compute`` row by row, failing rows NULL."""
    try:
        return compute(columns)
    except (ExpressionError, ArithmeticError, ValueError) + ARROW_ERRORS as exc:
        message = _message(exc, expr)
        if _STRICT.get():
            raise (exc if isinstance(exc, ExpressionError) else ExpressionError(message, expr)) from exc
        n = chunk_len(columns)
        if n is None:
            data_error(expr, message)
            return pa.scalar(None, arrow_type(expr.data_type))
        pieces, failed = [], 0
        token = _QUIET.set(True)
        try:
            for i in range(n):
                try:
                    v = compute([c.slice(i, 1) if is_array(c) else c for c in columns])
                    pieces.append(v if is_array(v) else
                                  (pa.repeat(v, 1) if v.is_valid else pa.nulls(1, arrow_type(expr.data_type))))
                except (ExpressionError, ArithmeticError, ValueError) + ARROW_ERRORS:
                    pieces.append(pa.nulls(1, arrow_type(expr.data_type)))
                    failed += 1
        finally:
            _QUIET.reset(token)
        data_error(expr, message, failed)
        return pa.concat_arrays([p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in pieces]) \
            if pieces else pa.array([], arrow_type(expr.data_type))


def _message(exc, expr) -> str:
    if isinstance(exc, ExpressionError):
        return exc.reason
    if isinstance(exc, ARROW_ERRORS):
        return arrow_message(exc, getattr(expr, "data_type", None))
    return str(exc) or type(exc).__name__


def chunk_len(columns):
    for c in columns:
        if is_array(c):
            return len(c)
    return None
