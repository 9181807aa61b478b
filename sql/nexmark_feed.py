"""Feeds Nexmark events into a SQL database: the generator's Arrow batches go through
``Connection.insert_arrow`` (the SQL layer's bulk INSERT, sql/bulk.py) into the person,
auction and bid tables, with a ``FLUSH`` (a checkpoint) every ``flush_every`` events.

:func:`setup` creates the tables -- or push sources, which store nothing -- (and the MVs asked
for); :func:`feed` inserts events ``[start, start + count)``; :func:`check` compares each MV
with a batch recomputation of its query at the same committed epoch (after a FLUSH, nothing
changes between the two SELECTs); :func:`check_against` recomputes it on another database
holding the same events in tables (an MV over push sources).

Invariant: the events are the generator's, cut into ranges of ``batch_size``; a table the
caller leaves out of ``tables`` gets none of its events (a query's unread streams cost
nothing, as with a source). It lives in ``sql/`` for the demo; ``bench/nexmark/feed.py`` re-exports
it. Callers: ``bench/nexmark/__main__.py``, ``cli/demo.py``, tests.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import time

import pyarrow as pa
import pyarrow.compute as pc

from stream.sources.nexmark import NexmarkEvents, NexmarkGenerator
from sql.nexmark_queries import TABLES, Query, create_tables_sql


def setup(conn, queries=(), push: bool = False) -> None:
    """Create the three tables (``push``: push sources, which store nothing) and each query's MV
    (``UnsupportedError`` from a query that needs a missing feature propagates)."""
    for stmt in create_tables_sql(push):
        conn.execute(stmt)
    for q in queries:
        conn.execute(q.create_sql())


@dataclasses.dataclass
class FeedStats:
    events: int = 0
    rows: dict = dataclasses.field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    flushes: int = 0
    seconds: float = 0.0     # time inside insert and FLUSH (generation excluded)
    cpu_seconds: float = 0.0  # process CPU time (every thread) inside insert and FLUSH: on a shared
    #                           machine the figure that does not move with other processes' load

    @property
    def events_per_s(self) -> float:
        """Every generated event over the time (also those of tables the query does not read)."""
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def fed(self) -> int:
        """The rows the fed tables received (what the query's MVs actually process)."""
        return sum(self.rows.values())

    @property
    def fed_per_s(self) -> float:
        """The fed rows over the time: the honest per-row rate of a query that reads only some
        of the tables (q3 and q8 read persons and auctions, 8 % of the events)."""
        return self.fed / self.seconds if self.seconds else 0.0

    @property
    def fed_per_cpu_s(self) -> float:
        """The fed rows over the process CPU time of the inserts and FLUSHes (all threads:
        executors, upload, background compaction)."""
        return self.fed / self.cpu_seconds if self.cpu_seconds else 0.0


def insert_events(conn, events: NexmarkEvents, tables=tuple(TABLES), stats: FeedStats | None = None) -> None:
    for name, batch in zip(TABLES, events):
        if name in tables and batch.num_rows:
            conn.insert_arrow(name, batch)
            if stats is not None:
                stats.rows[name] += batch.num_rows


def feed(conn, count: int, *, generator: NexmarkGenerator | None = None, start: int = 0,
         batch_size: int = 10_000, flush_every: int = 100_000, tables=tuple(TABLES),
         pregenerate: bool = False, on_flush=None) -> FeedStats:
    """Insert events ``[start, start + count)``; FLUSH every ``flush_every`` events and at the
    end; ``on_flush(stats)`` after each FLUSH. With ``pregenerate`` every batch is generated
    before the clock starts (benchmarks); else generation is only kept out of ``seconds``."""
    generator = generator or NexmarkGenerator()
    stats = FeedStats()
    batches = ((e.num_events, _only(e, tables)) for e in generator.batches(count, batch_size, start))
    if pregenerate:
        batches = list(batches)
    since_flush = 0
    for n, events in batches:
        began, began_cpu = time.perf_counter(), time.process_time()
        insert_events(conn, events, tables, stats)
        stats.events += n
        since_flush += n
        if since_flush >= flush_every or stats.events == count:
            conn.execute("FLUSH")
            stats.flushes += 1
            since_flush = 0
        stats.seconds += time.perf_counter() - began
        stats.cpu_seconds += time.process_time() - began_cpu
        if on_flush is not None and since_flush == 0:
            on_flush(stats)
    return stats


def _only(events: NexmarkEvents, tables) -> NexmarkEvents:
    """``events`` with the batches of tables not in ``tables`` dropped (emptied)."""
    return NexmarkEvents(*(b if name in tables else b.slice(0, 0) for name, b in zip(TABLES, events)))


# --- checking an MV against its batch recomputation ------------------------------------------------

def _norm(value):
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else value
    if isinstance(value, decimal.Decimal):
        return round(float(value), 6)
    return value


def normalized(rows) -> list:
    """Rows as a sorted multiset with floats rounded to 6 places (sum orders differ in the last bit)."""
    return sorted((tuple(_norm(v) for v in r) for r in rows), key=lambda r: tuple((v is None, str(v)) for v in r))


def _arrow_sorted(table: pa.Table) -> pa.Table:
    """``table`` with plain column names, doubles rounded to 6 places, rows sorted by every column."""
    columns = [pc.round(c, 6) if pa.types.is_floating(c.type) else c for c in table.columns]
    names = [f"c{i}" for i in range(len(columns))]
    table = pa.table(columns, names=names)
    return table.take(pc.sort_indices(table, [(n, "ascending") for n in names])) if names else table


def check(conn, query: Query) -> tuple:
    """``(ok, mv_rows, batch_rows)``: the MV and its query run in batch, read after a FLUSH (so at
    the same committed epoch), as sorted Arrow tables. Equal tables are equal results; tables
    that differ are compared again as Python values (a DECIMAL kept as text may print its scale
    differently), which decides."""
    return check_against(conn, conn, query)


def check_against(conn, tables_conn, query: Query) -> tuple:
    """:func:`check` with the batch query run on ``tables_conn`` (holding the same events in
    tables) -- for an MV over push sources, which keep no rows to recompute from."""
    conn.execute("FLUSH")
    tables_conn.execute("FLUSH")
    maintained = _arrow_sorted(conn.execute(f"SELECT * FROM {query.mv}").fetch_arrow())
    recomputed = _arrow_sorted(tables_conn.execute(query.select).fetch_arrow())
    ok = maintained.equals(recomputed)
    if not ok and maintained.num_rows == recomputed.num_rows:
        ok = normalized(conn.execute(f"SELECT * FROM {query.mv}").fetchall()) == \
            normalized(tables_conn.execute(query.select).fetchall())
    return ok, maintained, recomputed
