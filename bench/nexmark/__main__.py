"""Nexmark q0-q8 as streaming-SQL MVs: events/s per query on one core, each MV checked against
its batch recomputation.

``python -m bench.nexmark --query q3 --events 1000000`` (or ``--query all``): for each query a
fresh database (a temporary directory, or ``--url``) gets the three tables and the query's MV;
the events ``[0, N)`` are generated first (one event stream: only the tables the query reads
are kept), then fed through ``Connection.insert_arrow`` with a FLUSH every ``--flush-every``
events; events/s is N over the time of the inserts and FLUSHes (the final FLUSH included), and
``fed_events_per_s`` beside it counts only the rows the query's tables received (a query that
reads persons and auctions only, q3 and q8, gets 8 % of the events: its events/s is 12.5x its
per-row rate, which is the figure to hold against RisingWave's per-core rates), and
``fed_per_cpu_s`` the fed rows over the process CPU time (every thread) of those inserts and
FLUSHes: on a shared machine the wall figures fall with the load beside the bench, this one
hardly moves (merges run in compaction worker processes are not in it). Then the MV is compared
with its query run in batch at the same committed epoch. ``--push``: the three relations are
push sources (``CREATE SOURCE ... WITH (connector = 'push')``, fed by the same ``insert_arrow``
calls and storing nothing), as RisingWave runs Nexmark over sources; the batch recomputation
then runs on a second, in-memory database fed the same events into tables (after the clock). A query that needs a feature not
built yet is reported and left out. The last line is one JSON object
``{"bench": "nexmark", "events_per_s": {...}, "checked": true, ...}``; ``checked`` is true when
every query that ran matched (``--no-check`` skips the comparison and reports false).

Reference (RisingWave, per core, other hardware): q0 118k, q1 119k, q2 127k, q3 97k, q4 13.9k,
q5 5.2k, q7 20.3k, q8 60.7k events/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import sql
from bench.harness import run_dir
from bench.nexmark import feed
from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
from bench.nexmark.queries import RISINGWAVE_PER_CORE, resolve


def run_query(query, events: int, url: str | None, *, batch_size: int, flush_every: int, seed: int,
              check: bool, push: bool = False) -> dict:
    """One query on a fresh database: ``{"query", "events_per_s", "seconds", "rows", "checked"}``
    or ``{"query", "unsupported": message}``."""
    with run_dir(f"nexmark-{query.name}-") as tmp:
        with sql.connect(url.replace("{query}", query.name) if url else tmp, barrier_interval_ms=0) as conn:
            try:
                feed.setup(conn, [query], push=push)
            except sql.SqlError as exc:
                return {"query": query.name, "unsupported": f"{type(exc).__name__}: {exc}"}
            stats = feed.feed(conn, events, generator=NexmarkGenerator(NexmarkConfig(seed=seed)),
                              batch_size=batch_size, flush_every=flush_every, tables=query.reads, pregenerate=True)
            result = {"query": query.name, "events": stats.events, "events_per_s": round(stats.events_per_s),
                      "fed_rows": stats.fed, "fed_events_per_s": round(stats.fed_per_s),
                      "fed_per_cpu_s": round(stats.fed_per_cpu_s), "cpu_seconds": round(stats.cpu_seconds, 3),
                      "seconds": round(stats.seconds, 3), "flushes": stats.flushes}
            if check:
                began = time.perf_counter()
                if push:   # the sources kept nothing: the same events into tables elsewhere
                    with sql.connect(":memory:", barrier_interval_ms=0) as tables:
                        feed.setup(tables)
                        feed.feed(tables, events, generator=NexmarkGenerator(NexmarkConfig(seed=seed)),
                                  batch_size=batch_size, flush_every=events, tables=query.reads)
                        ok, maintained, recomputed = feed.check_against(conn, tables, query)
                else:
                    ok, maintained, recomputed = feed.check(conn, query)
                result.update(rows=len(maintained), checked=ok, check_seconds=round(time.perf_counter() - began, 3))
                if not ok:
                    result["batch_rows"] = len(recomputed)
            else:
                result["rows"] = conn.execute(f"SELECT count(*) FROM {query.mv}").fetchone()[0]
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nexmark", description=__doc__.splitlines()[0])
    parser.add_argument("--query", nargs="+", default=["all"], metavar="QUERY",
                        help="q0 .. q8, or all (default)")
    parser.add_argument("--events", type=int, default=1_000_000, help="events per query (default 1,000,000)")
    parser.add_argument("--batch", type=int, default=10_000, help="events per generated batch (default 10,000)")
    parser.add_argument("--flush-every", type=int, default=100_000, help="events between FLUSHes (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", default=None,
                        help="a fresh database per query: a URL where {query} stands for the query's name, e.g. "
                             "'s3://bucket/nexmark-{query}?endpoint=...' (default: a temporary directory per query)")
    parser.add_argument("--no-check", action="store_true", help="skip the batch recomputation")
    parser.add_argument("--push", action="store_true",
                        help="feed push sources (stored nowhere, as RisingWave's Nexmark sources) instead of tables")
    args = parser.parse_args(argv)
    try:
        queries = resolve(args.query)
    except ValueError as exc:
        parser.error(str(exc))
    if args.url and len(queries) > 1 and "{query}" not in args.url:
        parser.error("--url needs {query} in it when several queries run (each needs a fresh database)")
    rates, fed_rates, cpu_rates, results, all_ok = {}, {}, {}, [], not args.no_check
    print(f"Nexmark, {args.events:,} events per query, one core (FLUSH every {args.flush_every:,} events), "
          f"{'push sources' if args.push else 'APPEND ONLY tables'}")
    for query in queries:
        result = run_query(query, args.events, args.url, batch_size=args.batch, flush_every=args.flush_every,
                           seed=args.seed, check=not args.no_check, push=args.push)
        results.append(result)
        if "unsupported" in result:
            print(f"  {query.name}: not supported yet -- {result['unsupported']}")
            continue
        rates[query.name] = result["events_per_s"]
        fed_rates[query.name] = result["fed_events_per_s"]
        cpu_rates[query.name] = result["fed_per_cpu_s"]
        ref = RISINGWAVE_PER_CORE.get(query.name)
        verdict = "" if args.no_check else ("  MV = batch" if result["checked"] else "  MISMATCH with batch")
        print(f"  {query.name}: {result['events_per_s']:>9,} events/s, {result['fed_events_per_s']:>9,} fed rows/s  "
              f"({result['seconds']:.2f} s, "
              f"{result['fed_per_cpu_s']:,} fed rows per CPU-s, {result['rows']:,} MV rows"
              f"{f'; RisingWave {ref:,}/core' if ref else ''}){verdict}")
        all_ok = all_ok and bool(result.get("checked"))
    from bench.harness import machine
    print(json.dumps({"bench": "nexmark", "events": args.events, "relations": "push" if args.push else "tables",
                      "events_per_s": rates,
                      "fed_events_per_s": fed_rates, "fed_per_cpu_s": cpu_rates, "checked": all_ok,
                      "unsupported": [r["query"] for r in results if "unsupported" in r],
                      "results": results, "machine": machine()}, sort_keys=True))
    return 0 if all_ok or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
