"""Snowflake-style row ids for tables without a primary key (RisingWave's RowIdGenerator).

Layout of one id (a positive BIGINT; part of the stored data of every such table, do not change):

    bit 63: 0 | 41 bits: ms since 2021-04-01 (the epoch base) | 10 bits: generator | 12 bits: sequence

- ``generator`` (0..1023) tells apart the generators that run at the same time: one per DML
  actor of a table (RisingWave puts the vnode there), one per Spark task (its partition id) of
  a bulk load or a streaming sink batch. Two generators never issue the same id.
- Within one generator ids strictly increase: the sequence counts up to 4,095 within one
  millisecond; a chunk that needs more takes the next milliseconds ahead of the clock and the
  generator then sleeps until the clock has caught up, so no issued id is ever ahead of the
  wall clock when the call returns (at most 4,096 ids per ms per generator: 4M rows/s). A
  generator may own several consecutive generator numbers (``width``; RisingWave's DML actor
  owns all its vnodes the same way): it fills one number's sequences, then the next one's, in
  the same millisecond, so its ids still increase. The SQL runtime's table and source DML
  actors own ``SQL_DML_WIDTH`` numbers from 0: 65,536 ids a millisecond, so a 10k-row chunk
  borrows no time from the clock that the commit would then wait for. The
  DML executor defers that wait (``next_ids(n, wait=False)``): to its next barrier
  (:meth:`RowIdGenerator.catch_up`), or, in the in-process runtime, to the commit itself -- it
  notes its last id's millisecond in the runtime's :class:`RowIdHorizon` at each barrier, and
  the runtime's barrier loop waits for the clock to pass the horizon before it commits the
  epoch (building the epoch's SSTs meanwhile). Either way the work between a chunk and the
  commit lets the clock catch up instead of a sleep on the stream's thread, and no id is ahead
  of the clock when the epoch holding it commits.
- Across restarts: a new generator starts at the later of the wall clock and the physical time
  of its first epoch (which is above the store's ``max_committed_epoch``). Every id of an
  earlier run was issued at an earlier wall-clock time, so ids stay unique as long as the clock
  does not go back across a restart; the epoch floor covers a clock that went back to before
  the committed epoch. The same argument covers writers that take turns on one table (the SQL
  runtime's generator 0, then a Spark load's task generators, then SQL again): each writer's
  ids were issued before its commit returned, and the next writer's epoch is above that commit.
Vectorized: ``next_ids(n)`` builds the ids with numpy, no Python per row.

Callers: :mod:`stream.row_id` (re-exports it for the DML executor), :mod:`relational.spark`
and :mod:`relational.spark_sink` (:func:`task_row_ids`).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from hummock.key import EPOCH_BASE_UNIX_MS, EPOCH_PHYSICAL_SHIFT
from relational.errors import SchemaError

TS_BITS, GENERATOR_BITS, SEQUENCE_BITS = 41, 10, 12
MAX_GENERATOR = (1 << GENERATOR_BITS) - 1
SEQUENCE_LIMIT = 1 << SEQUENCE_BITS
SQL_DML_WIDTH = 16   # generator numbers the SQL runtime's DML actor of a table owns (above)
MAX_LEAD_MS = 50   # how far ``next_ids(wait=False)`` may run ahead of the clock
_TS_SHIFT = GENERATOR_BITS + SEQUENCE_BITS


def _wall_ms() -> int:
    return max(time.time_ns() // 1_000_000 - EPOCH_BASE_UNIX_MS, 0)


def split_row_id(row_id: int) -> tuple[int, int, int]:
    """``(ms since the epoch base, generator, sequence)`` of an id."""
    return row_id >> _TS_SHIFT, (row_id >> SEQUENCE_BITS) & MAX_GENERATOR, row_id & (SEQUENCE_LIMIT - 1)


class RowIdGenerator:
    """Issues row ids for the generator ids ``generator`` .. ``generator + width - 1`` (module
    docstring): within a millisecond it uses up the first one's sequences, then the next one's,
    so its ids still increase and it issues ``width`` x 4,096 a millisecond. Not thread-safe.
    ``error``: the class raised for a generator out of range or an exhausted timestamp space
    (each layer raises its own)."""

    error = SchemaError

    def __init__(self, generator: int = 0, clock=_wall_ms, sleep=time.sleep, *, width: int = 1):
        if not 0 <= generator <= MAX_GENERATOR:
            raise self.error(f"a row id generator is in [0, {MAX_GENERATOR}], got {generator}")
        if not 1 <= width <= MAX_GENERATOR + 1 - generator:
            raise self.error(f"generators {generator}.. {width} wide do not fit in [0, {MAX_GENERATOR}]")
        self.generator, self.width = generator, width
        self._clock, self._sleep = clock, sleep
        self._per_ms = width * SEQUENCE_LIMIT   # ids a millisecond: generator numbers x sequences
        self._ts = -1      # ms of the last id issued
        self._seq = self._per_ms   # position in the millisecond: generator offset << 12 | sequence

    def start_at_epoch(self, epoch: int) -> None:
        """Never issue ids below the physical time of ``epoch`` (the first epoch of a run)."""
        floor = epoch >> EPOCH_PHYSICAL_SHIFT
        if floor > self._ts:
            self._ts, self._seq = floor, 0

    def next_ids(self, n: int, wait: bool = True) -> np.ndarray:
        """``n`` new ids, increasing, as a numpy int64 array. ``wait=False``: ids borrowed ahead
        of the clock are not waited for here (at most ``MAX_LEAD_MS`` ahead); the caller calls
        :meth:`catch_up` before anything makes them durable (the DML executor, at each barrier)."""
        now = self._clock()
        if now > self._ts:
            self._ts, self._seq = now, 0
        out = np.empty(n, dtype=np.int64)
        base = self.generator << SEQUENCE_BITS   # (the generators are consecutive: base + position)
        filled = 0
        while filled < n:
            if self._seq == self._per_ms:
                self._ts, self._seq = self._ts + 1, 0
            take = min(n - filled, self._per_ms - self._seq)
            high = (self._ts << _TS_SHIFT) | base
            out[filled:filled + take] = np.arange(self._seq, self._seq + take, dtype=np.int64) + high
            self._seq += take
            filled += take
        if self._ts >= 1 << TS_BITS:
            raise self.error("row id timestamp space exhausted")
        if wait:
            self.catch_up()
        else:
            ahead = self._ts - self._clock()
            if ahead > MAX_LEAD_MS:
                self._sleep((ahead - MAX_LEAD_MS) / 1000)
        return out

    def catch_up(self) -> None:
        """Wait until the clock has caught up with the ids issued (borrowed milliseconds)."""
        ahead = self._ts - self._clock()
        if ahead > 0:
            self._sleep(ahead / 1000)

    @property
    def last_ms(self) -> int:
        """The millisecond of the last id issued (-1 before the first)."""
        return self._ts


class RowIdHorizon:
    """The latest millisecond of the ids that generators deferring their wait to a commit have
    issued (module docstring): ``note(ms)`` from each DML executor at each barrier, any thread;
    ``ahead_s()`` is how long until the wall clock reaches that millisecond (> 0: wait before
    committing; to the nanosecond, not rounded up to whole milliseconds)."""

    def __init__(self, clock_ns=time.time_ns):
        self._clock_ns = clock_ns
        self._ms = -1
        self._lock = threading.Lock()

    def note(self, ms: int) -> None:
        with self._lock:
            if ms > self._ms:
                self._ms = ms

    def ahead_s(self) -> float:
        return ((self._ms + EPOCH_BASE_UNIX_MS) * 1_000_000 - self._clock_ns()) / 1e9


def task_row_ids(partition: int, epoch: int, n: int, *, clock=_wall_ms, sleep=time.sleep) -> np.ndarray:
    """``n`` fresh row ids for the rows of one write task: generator ``partition`` (each task of
    one load or batch has its own), never below the physical time of the write's ``epoch``.
    Returns once the wall clock has passed the last id's millisecond, so the epoch of any later
    write (chosen after this task finished) floors its ids above these: the same partition's
    task in the next micro-batch cannot repeat one. ``SchemaError`` for a partition past
    ``MAX_GENERATOR`` (coalesce the DataFrame)."""
    if not 0 <= partition <= MAX_GENERATOR:
        raise SchemaError(f"task {partition}: a table without a primary key gets row ids from one generator per "
                          f"task, at most {MAX_GENERATOR + 1} tasks; coalesce the DataFrame to fewer partitions")
    generator = RowIdGenerator(partition, clock, sleep)
    generator.start_at_epoch(epoch)
    ids = generator.next_ids(n)
    while clock() <= generator._ts:   # past the last id's millisecond: any later epoch floors above it
        sleep(0.001)
    return ids
