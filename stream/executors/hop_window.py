"""Time windows, stateless: ``HopWindow`` (hopping/sliding windows, ``HOP(t, slide, size)``) and
``TumbleWindow`` (``TUMBLE(t, size)``), each adding ``window_start`` and ``window_end`` columns.

Window arithmetic (both): the time column is a TIMESTAMP, TIMESTAMPTZ (microseconds) or an
integer column; ``size``, ``slide`` and ``offset`` are ``datetime.timedelta``s or ints (microseconds
for timestamps). A window ``[start, start + size)`` has ``start = offset + k * slide`` for an
integer ``k`` (``slide = size`` for tumbling windows). The work is a few numpy operations per
chunk (:func:`window_starts`).

- **TumbleWindow** is a projection: each row gets the one window that contains it; ops,
  visibility and the stream key pass through (NULL time: NULL window columns).
- A TIMESTAMP[TZ] window whose start or end falls outside 0001-01-01 .. 9999-12-31 (what a
  row of the type can hold) is a data error (:mod:`stream.expr_errors`): in a stream the
  TUMBLE window is NULL and the HOP window is dropped, the rows counted and logged; in strict
  mode (batch queries) it raises ``ExpressionError``.
- **HopWindow** expands every row into the ``size / slide`` windows that contain it (``size``
  must be a positive multiple of ``slide``): one output chunk with a row per (input row,
  window), in input order and a row's windows together, earliest first. A row whose time is
  NULL belongs to no window and is dropped. Stream key: the input's plus ``window_start``.
  Update pairs expand pairwise (the i-th window of the old row right before the i-th of the new
  one); a pair whose two windows differ, or where only one side has a window, is rewritten to
  ``-``/``+`` (a U-/U+ must keep its stream key; ``Filter``'s rule for the one-sided case), and
  then all the old row's windows are deleted before the new row's are inserted -- interleaved,
  a delete of a window the new row also has would remove the insert just made.

Callers: the planner (``HOP``/``TUMBLE`` table functions; Nexmark q5/q7/q8), tests.
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.executors.filter import filter_chunk
from stream.expr_errors import data_error
from stream.schema import Schema

_TIME_TYPES = (DataType.TIMESTAMP, DataType.TIMESTAMPTZ, DataType.SMALLINT, DataType.INT, DataType.BIGINT)


def _micros(value, what: str, identity: str) -> int:
    if isinstance(value, datetime.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExecutorError(identity, f"{what} must be a timedelta or an int, got {value!r}")
    return value


def window_starts(times: pa.Array, slide: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """``(start, null)``: for each time the latest window start ``offset + k * slide <= t``
    (int64; 0 where the time is NULL) and the NULL mask."""
    raw = pc.cast(times, pa.int64()) if times.type != pa.int64() else times
    null = raw.is_null().to_numpy(zero_copy_only=False)
    t = pc.fill_null(raw, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    start = (t - offset) // slide * slide + offset
    start[null] = 0
    return start, null


_MIN_US = -62_135_596_800_000_000           # 0001-01-01 00:00:00 in microseconds since the epoch
_MAX_US = 253_402_300_799_999_999           # 9999-12-31 23:59:59.999999
_OUT_OF_RANGE = "timestamp out of range"


def out_of_range(start: np.ndarray, size: int, null: np.ndarray, timestamps: bool, where) -> np.ndarray:
    """Rows whose window ``[start, start + size]`` a TIMESTAMP cannot hold (a data error of
    ``where``, module docstring); none for integer time columns."""
    if not timestamps or not len(start):
        return np.zeros(len(start), dtype=bool)
    bad = ((start < _MIN_US) | (start > _MAX_US - size)) & ~null
    data_error(where, _OUT_OF_RANGE, int(bad.sum()))
    return bad


def _name(input, column: int) -> str:
    return input.schema.names[column] if 0 <= column < len(input.schema) else str(column)


def _column(values: np.ndarray, null: np.ndarray, arrow_type) -> pa.Array:
    return pa.array(values, type=arrow_type, mask=null if null.any() else None)


class _Windowed(UnaryExecutor):
    """Shared checks: the time column, the window columns' schema."""

    def _setup(self, input, time_col: int, size, slide, offset, identity: str) -> Schema:
        if not 0 <= time_col < len(input.schema) or input.schema.types[time_col] not in _TIME_TYPES:
            raise ExecutorError(identity, f"column {time_col} must be a TIMESTAMP[TZ] or integer column")
        self.time_col = time_col
        self.size = _micros(size, "size", identity)
        self.slide = _micros(slide, "slide", identity)
        self.offset = _micros(offset, "offset", identity)
        if self.size <= 0 or self.slide <= 0 or self.size % self.slide:
            raise ExecutorError(identity, f"size ({self.size}) must be a positive multiple of slide ({self.slide})")
        dtype = input.schema.types[time_col]
        self._arrow = input.schema.arrow_types[time_col]
        self._timestamps = dtype in (DataType.TIMESTAMP, DataType.TIMESTAMPTZ)
        return Schema(input.schema.pairs() + [("window_start", dtype), ("window_end", dtype)])


class TumbleWindow(_Windowed):
    """``TUMBLE(time_col, size [, offset])``: adds the row's window (module docstring)."""

    def __init__(self, input, time_col: int, size, offset=0, identity: str | None = None):
        identity = identity or f"TumbleWindow({_name(input, time_col)})"
        schema = self._setup(input, time_col, size, size, offset, identity)
        super().__init__(input, schema, input.stream_key, identity)

    def on_chunk(self, chunk: StreamChunk):
        start, null = window_starts(chunk.columns[self.time_col], self.slide, self.offset)
        null = null | out_of_range(start, self.size, null, self._timestamps, self.identity)
        return chunk.with_columns(chunk.columns + [_column(start, null, self._arrow),
                                                   _column(start + self.size, null, self._arrow)], self.schema)


class HopWindow(_Windowed):
    """``HOP(time_col, slide, size [, offset])``: each row once per window containing it
    (module docstring)."""

    def __init__(self, input, time_col: int, slide, size, offset=0, identity: str | None = None):
        identity = identity or f"HopWindow({_name(input, time_col)})"
        schema = self._setup(input, time_col, size, slide, offset, identity)
        super().__init__(input, schema, list(input.stream_key) + [len(input.schema)], identity)
        self.units = self.size // self.slide

    def on_chunk(self, chunk: StreamChunk):
        last, null = window_starts(chunk.columns[self.time_col], self.slide, self.offset)
        base = filter_chunk(chunk, ~null)   # no window for a NULL time; one-sided pairs become -/+
        if base is None:
            return None
        ops = base.ops
        n, units = len(ops), self.units
        group = np.arange(n)                # rows of one group interleave their windows
        pair_at = np.flatnonzero((ops[:-1] == UPDATE_DELETE) & (ops[1:] == UPDATE_INSERT))
        if len(pair_at):
            vis = base.visible_mask()
            pair_at = pair_at[vis[pair_at]]
            same = last[pair_at] == last[pair_at + 1]   # then the window index k is the same for both rows
            moved = pair_at[~same]
            if len(moved):
                ops = ops.copy()
                ops[moved] = DELETE
                ops[moved + 1] = INSERT
            group[pair_at[same] + 1] = pair_at[same]
        # one row per (input row, window), in input order: a row's windows together (a delete of
        # an old row's windows before the insert of its new ones, whatever windows they share),
        # an update pair's i-th windows adjacent as a U-/U+ pair; earliest window first
        row = np.repeat(np.arange(n), units)
        k = np.tile(np.arange(units - 1, -1, -1), n)
        if len(pair_at):   # without an update pair each row is its own group: already in order
            order = np.lexsort((row, -k, group[row]))
            row, k = row[order], k[order]
        start = last[row] - k * self.slide
        visible = base.visible_mask()[row]
        visibility = None if base.visibility is None else visible
        ops = ops[row]
        bad = out_of_range(start, self.size, ~visible, self._timestamps, self.identity)
        if bad.any():   # a dropped window may leave one side of a U-/U+ alone: all pairs become -/+
            visibility = visible & ~bad
            ops[ops == UPDATE_DELETE] = DELETE
            ops[ops == UPDATE_INSERT] = INSERT
            start = np.where(bad, 0, start)
        take = pa.array(row)
        columns = [c.take(take) for c in base.columns]
        columns += [_column(start, null[row], self._arrow), _column(start + self.size, null[row], self._arrow)]
        return StreamChunk(ops, columns, self.schema, visibility)
