"""Data errors of :mod:`stream.expr` evaluation: integer overflow, division or remainder by zero,
a cast that does not fit.

Two modes, per thread (a context variable): inside :func:`raising_errors` (the SQL layer's
batch queries and DML) a data error raises :class:`~stream.errors.ExpressionError` naming the
failing node, as Postgres does; otherwise (stream executors) the failing row's value is NULL,
the error is logged (logger ``stream.expr``, one warning per node and chunk with the row
count) and counted (:func:`error_counts`, by message), as RisingWave's streaming engine does,
so one bad row does not stop a materialized view.

Invariant: a row that does not fail evaluates exactly as without this module; a chunk where
nothing fails costs one try block. :func:`guarded` evaluates a node whose Arrow kernel failed
on the whole chunk again row by row (the node's compute function), so only the failing rows become NULL.

Callers: every node module behind :mod:`stream.expr` (``stream.expr_*``), :mod:`stream.decimal_ops` results via them,
``sql`` (``raising_errors``).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections import Counter

import pyarrow as pa

from relational.arrow import arrow_type
from stream.errors import ExpressionError

ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

log = logging.getLogger("stream.expr")

_STRICT = contextvars.ContextVar("stream_expr_strict", default=False)
_QUIET = contextvars.ContextVar("stream_expr_quiet", default=False)
_ERRORS: Counter = Counter()
_ERRORS_LOCK = threading.Lock()


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
    """Rows whose value became NULL because of a data error in streaming mode, by message
    (process-wide, since start)."""
    with _ERRORS_LOCK:
        return dict(_ERRORS)


def data_error(expr, message: str, rows: int = 1) -> None:
    """A data error in ``rows`` rows of ``expr``: raises in strict mode, else logs and counts."""
    if not rows:
        return
    if _STRICT.get():
        raise ExpressionError(message, expr)
    if not _QUIET.get():
        with _ERRORS_LOCK:
            _ERRORS[message] += rows
        log.warning("%s in %s: %d row(s) set to NULL", message, expr, rows)


def arrow_message(exc) -> str:
    text = str(exc)
    if "overflow" in text.lower():
        return "value out of range: overflow"
    return text


def wrap(fn, expr, *args):
    try:
        return fn(*args)
    except ARROW_ERRORS as exc:
        raise ExpressionError(arrow_message(exc), expr) from exc


def is_array(v) -> bool:
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def guarded(expr, columns, compute):
    """``compute(columns)`` (the node ``expr``'s whole-chunk evaluation); when it fails: strict
    mode raises, streaming mode calls ``compute`` row by row, failing rows NULL."""
    try:
        return compute(columns)
    except (ExpressionError, ArithmeticError, ValueError) + ARROW_ERRORS as exc:
        message = arrow_message(exc) if isinstance(exc, ARROW_ERRORS) else str(exc).split(" in ")[0]
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


def chunk_len(columns):
    for c in columns:
        if is_array(c):
            return len(c)
    return None
