"""``hummock demo``: the README's main job -- streaming SQL over a live Nexmark event stream,
state in Hummock, compaction on Spark, and a self-check.

Steps: open a database (a temporary directory, or URL: a path or ``s3://...``); create the
Nexmark tables and MVs -- q1 (currency conversion), q2 (selection), q3 (join), q4 (join and
two aggregations), q7 (highest bid per tumbling window, once TUMBLE lands) and a live "top 5
bidders" MV (once ORDER BY ... LIMIT in MVs lands); an MV whose SQL feature is missing is named
and skipped. Then feed ``--events`` deterministic events (``--rate`` caps events/s) through the
bulk INSERT path with a FLUSH every ``--flush-every`` events, showing live figures after each
(events/s, committed epoch, MV rows, L0 and level sizes: cli/demo_live.py; each MV's rows come
from a one-row ``<mv>__rows`` counter MV over its change stream, not from a scan). Compaction runs
on PySpark ``local[*]`` by default when Java is found (the session starts before the stream, so
background compaction jobs run on Spark meanwhile; the demo says so when it falls back to the
in-process runner). Then one full compaction pass, the MVs' results,
and the self-check: each MV equals its query recomputed in batch from the base tables at the
same committed epoch. Exit code 0 when every MV checks, 1 when one differs.

Callers: ``cli/main.py``; tests run ``hummock demo --events 20000`` as a subprocess.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time

from cli.common import EXIT_CORRUPT, EXIT_ERROR, EXIT_OK, human_bytes

#: the demo's MVs: Nexmark queries by name, plus the live leaderboard below
DEMO_QUERIES = ("q1", "q2", "q3", "q4", "q7")


def top_bidders_query():
    """A live "top 5 bidders" MV (a streaming top-N over an aggregate). The ``bidder``
    tie-break makes the top 5 unique, so the self-check's batch recomputation picks the same rows."""
    from sql.nexmark_queries import Query
    return Query("top5_bidders", "SELECT bidder, count(*) AS bids, max(price) AS top_price FROM bid\n"
                                 "GROUP BY bidder ORDER BY bids DESC, bidder LIMIT 5", ("bid",),
                 about="the five most active bidders, live")


def register(commands) -> None:
    parser = commands.add_parser(
        "demo", help="streaming SQL over live Nexmark events, compaction on Spark, a self-check",
        description="Create the Nexmark tables and MVs (q1-q4, q7, top bidders), stream deterministic "
                    "events into them with live figures, compact on Spark (local[*]; in-process without "
                    "Java), print the MVs and check each against a batch recomputation.")
    parser.add_argument("url", metavar="URL", nargs="?", default=None,
                        help="the database: a path or s3://bucket/prefix?endpoint=... (default: a temporary "
                             "directory, deleted at the end)")
    parser.add_argument("--events", type=int, default=200_000, help="events to stream (default 200,000)")
    parser.add_argument("--rate", type=float, default=0, help="cap on events/s (default: as fast as it goes)")
    parser.add_argument("--flush-every", type=int, default=None,
                        help="events between FLUSHes (default: a twentieth of the events, 5,000 .. 50,000)")
    parser.add_argument("--compactor", choices=("spark", "local"), default=None,
                        help="spark (PySpark local[*], the default when Java is found) or local (in-process)")
    parser.add_argument("--spark-master", default="local[*]", help="the Spark master (default local[*])")
    parser.set_defaults(func=run_demo)


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") is not None or bool(home and os.path.exists(os.path.join(home, "bin", "java")))


def run_demo(args, out=None) -> int:
    out = out or sys.stdout
    import sql
    from sql import nexmark_feed as feed
    from sql.nexmark_queries import QUERIES, create_tables_sql
    from hummock import _twins, __version__
    from cli.demo_live import LiveFigures

    compactor = args.compactor or ("spark" if java_available() else "local")
    mode = "native" if all(_twins.LOADED.values()) else "pure-Python"
    say = lambda text="": print(text, file=out, flush=True)   # noqa: E731
    say(f"hummock {__version__} demo ({mode} mode): Nexmark events -> streaming SQL MVs -> Hummock")
    if compactor == "local" and args.compactor is None:
        say("Java was not found: compaction runs IN-PROCESS instead of on Spark (install Java 17 for Spark)")
    if compactor == "spark":   # the session first: compaction then runs on Spark during the stream
        compactor = _start_spark(args.spark_master, say)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(tempfile.TemporaryDirectory(prefix="hummock-demo-"))
        options = {"compactor": compactor}
        if compactor == "spark":
            options["spark_master"] = args.spark_master
        conn = stack.enter_context(sql.connect(url, barrier_interval_ms=0, **options))
        runner = f"Spark ({args.spark_master})" if compactor == "spark" else "in-process"
        say(f"database: {url}{' (temporary)' if args.url is None else ''}; compaction: {runner}")
        taken = [r.name for r in conn.db.catalog.ordered()]
        if taken:
            print(f"hummock: error: {url} already holds {', '.join(taken[:5])}; the demo needs a fresh database",
                  file=sys.stderr)
            return EXIT_ERROR
        for stmt in create_tables_sql():
            conn.execute(stmt)
        queries = []
        for q in [QUERIES[n] for n in DEMO_QUERIES] + [top_bidders_query()]:
            try:
                conn.execute(q.create_sql())
            except sql.SqlError as exc:
                say(f"  {q.mv}: skipped, needs {q.needs or 'a missing feature'} ({type(exc).__name__})")
                continue
            queries.append(q)
            say(f"  {q.mv}: {q.about}")
        reads = tuple(sorted({t for q in queries for t in q.reads}))
        live = stack.enter_context(LiveFigures(conn, queries, args.events, out, _row_counters(conn, queries)))
        pace = _Pacer(args.rate)
        flush_every = args.flush_every or min(max(args.events // 20, 5_000), 50_000)
        began, began_cpu = time.perf_counter(), time.process_time()
        stats = feed.feed(conn, args.events, batch_size=min(5_000, flush_every), flush_every=flush_every,
                          tables=reads or ("bid",), on_flush=lambda s: (live.update(s), pace.wait(s.events)))
        live.close()
        wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
        say(f"streamed {stats.events:,} events in {wall:.1f} s ({stats.events / wall:,.0f} events/s; "
            f"{stats.seconds:.1f} s in INSERT and FLUSH: {stats.events_per_s:,.0f} events/s), "
            f"{stats.flushes} checkpoints; {cpu:.1f} CPU-s in this process "
            f"({stats.events / cpu if cpu else 0:,.0f} events per CPU-second: the figure load beside it moves least)")
        _compact(conn.db.store, runner, say)
        _show_results(conn, queries, say)
        return _self_check(conn, queries, feed, say)


def _row_counters(conn, queries) -> dict:
    """``{mv: counter}``: per MV a one-row MV ``<mv>__rows`` maintaining ``count(*)`` of it from its
    change stream (an MV on the MV), so the live figures read one row per MV after a FLUSH
    instead of scanning every MV (which costs O(MV rows) per FLUSH: quadratic over a run). An MV
    whose counter cannot be created is left out (the live figures then count it by a scan)."""
    import sql
    counters = {}
    for q in queries:
        name = f"{q.mv}__rows"
        try:
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS SELECT count(*) AS n FROM {q.mv}")
        except sql.SqlError:
            continue
        counters[q.mv] = name
    return counters


def _start_spark(master: str, say) -> str:
    """Make the process's SparkSession (the compaction runner reuses it) before the stream, so
    compaction jobs run on Spark while events flow; ``"spark"``, or ``"local"`` when Spark does
    not start (said so)."""
    from hummock.compaction.spark import spark_session
    from cli.common import status
    try:
        with status(f"starting Spark ({master}) for compaction..."):
            _, seconds = spark_session(master)
    except Exception as exc:
        say(f"Spark did not start ({type(exc).__name__}: {str(exc)[:200]}): compaction runs IN-PROCESS instead")
        return "local"
    say(f"Spark ({master}) started in {seconds:.1f} s: compaction jobs run on it")
    return "spark"


class _Pacer:
    """Sleeps so the feed stays under ``rate`` events/s (0: no cap)."""

    def __init__(self, rate: float):
        self.rate, self.started = rate, time.perf_counter()

    def wait(self, events: int) -> None:
        if self.rate > 0:
            ahead = events / self.rate - (time.perf_counter() - self.started)
            if ahead > 0:
                time.sleep(ahead)


def _shape(store) -> str:
    version = store.version()
    levels = ", ".join(f"L{i} {n} SSTs {human_bytes(b)}" for i, (n, b) in
                       enumerate(zip(version.level_counts(), version.level_sizes())) if n)
    return f"{len(version.l0)} L0 sub-levels; {levels or 'empty'}"


def _compaction_tasks(store) -> int:
    return ((store.stats().get("compaction") or {}).get("tasks", 0)) or 0


def _compact(store, runner: str, say) -> None:
    """One ``compact_all()``; the tasks the background compactor finished meanwhile (a Spark job
    it started during the stream) count too, so the figure says what the pass saw happen."""
    say(f"compaction pass ({runner}): before {_shape(store)}; {_compaction_tasks(store)} task(s) so far "
        "in the background")
    started, before = time.perf_counter(), _compaction_tasks(store)
    try:
        tasks = store.compact_all()
    except Exception as exc:   # a failed Spark job changes nothing (docs/compaction.md): say so, go on
        say(f"  compaction on {runner} FAILED, nothing applied: {type(exc).__name__}: {exc}")
        return
    background = max(_compaction_tasks(store) - before - tasks, 0)
    extra = f" + {background} finished by the background compactor" if background else ""
    say(f"  {tasks} task(s){extra} in {time.perf_counter() - started:.1f} s: after {_shape(store)}")


_SHOW_ORDER = {"q4": "ORDER BY category", "top5_bidders": "ORDER BY bids DESC, bidder"}


def _show_results(conn, queries, say) -> None:
    from cli.script import render_table
    for q in queries:
        cursor = conn.execute(f"SELECT * FROM {q.mv} {_SHOW_ORDER.get(q.name, '')} LIMIT 5")
        rows = cursor.fetchall()
        total = conn.execute(f"SELECT count(*) FROM {q.mv}").fetchone()[0]
        say(f"\n{q.mv} ({total:,} row{'' if total == 1 else 's'}{', first 5' if total > 5 else ''}): {q.about}")
        say(render_table([d[0] for d in cursor.description], rows).rsplit("\n", 1)[0])


def _self_check(conn, queries, feed, say) -> int:
    epoch = conn.db.store.max_committed_epoch
    say(f"\nself-check at committed epoch {epoch}: each MV against its query recomputed in batch")
    failed = []
    for q in queries:
        ok, maintained, recomputed = feed.check(conn, q)
        say(f"  {q.mv}: {len(maintained):,} rows {'= batch  ok' if ok else f'!= batch ({len(recomputed):,} rows)  FAILED'}")
        if not ok:
            failed.append(q.mv)
    say(f"self-check {'passed' if not failed else 'FAILED: ' + ', '.join(failed)}")
    return EXIT_OK if not failed else EXIT_CORRUPT
