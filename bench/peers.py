"""Benchmark ``peers``: issue 30's streaming queries through Hummock SQL, through the same
executors driven directly and through Bytewax, in one run (issue 30 item 7).

Input (bench.sql_ingest's, built before any clock starts): 1M Nexmark-style bids ``(auction
BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP)``, auction ids
1000..10999 with half of the events on 100 hot auctions, fed in batches of 10,000 rows with one
checkpointed epoch (FLUSH) after each. Queries (bench.sql_ingest.QUERIES): ``q1`` project with
``price * 0.908::float8``, ``q2`` filter ``auction % 123 = 0``, ``qa`` ``count(*), sum(price),
max(price) GROUP BY auction``, ``qt`` ``ORDER BY price DESC LIMIT 10``.

Engines (each run on a fresh store in a temporary directory):

- ``hummock_sql``: ``sql.connect(path)``, an ``APPEND ONLY`` table and the MV, per batch
  ``insert_arrow`` + ``FLUSH`` (bench.sql_ingest.run_sql).
- ``hummock_push``: as ``hummock_sql``, but ``bids`` is ``CREATE SOURCE bids (...) WITH
  (connector = 'push')``: the same ``insert_arrow`` + ``FLUSH`` per batch, and nothing stores the
  input rows (a source keeps none; only the MV's rows are stored).
- ``hummock_source``: the MV over ``CREATE SOURCE bids (...) WITH (connector = 'posix_fs',
  encode = 'parquet')`` -- a source stores no rows. A source is fed by its connector, not by
  DML, so Python feeds it files: each batch is written to Parquet before the clock starts and,
  timed, renamed into the source's directory and FLUSHed (the connector reads it at that
  barrier: the Parquet decode is in the figure).
- ``hummock_stream``: the MV's executors as the planner builds them, fed the batches' chunks
  from a runtime source, one checkpoint barrier per batch (bench.sql_ingest.run_stream).
- ``bytewax``: a Bytewax 0.21 dataflow per query (``bytewax.testing.run_main``, one worker,
  this thread) over the rows as Python tuples (built before the clock starts; ``TestingSource``
  hands them on in batches of 10,000), no recovery configured -- no durable state, epochs at
  Bytewax's default 10 s. q1/q2 ``map``/``filter``; qa a keyed ``stateful_map`` emitting each
  group's new ``(count, sum, max)``; qt one ``stateful_flat_map`` holding the top 10, emitted
  when it changes. Bytewax is in the ``bench`` extra (``pip install -e '.[bench]'``); without
  it the bench says so, runs the others and exits 0.

Every result of every timed run is checked against a pandas reference of the same rows (q1, q2,
qa: the same multiset of rows, qa's sum compared exactly as an integer; qt: the 10 highest
prices, each row one of the input's rows with that price); a mismatch stops the bench
(``CheckError``, exit 1). Method: one warm-up run of every engine and query on two batches,
then ``--rounds`` rounds (>= 3 by default); in each round every query runs on every engine,
engines in a rotating order (interleaved, so each sees the same machine state), each timed run
after the previous run's result is dropped and ``gc.collect()`` -- so every run starts from the
same heap: a q1 result left alive is 1M tuples, which every collection during the next run
would traverse (Bytewax, allocating a tuple per row, measured 1.86M against 2.76M events/s on
q1 depending on what ran before it); the figure is
the median wall-clock events/s (CPU events/s of this process beside it: Hummock's compactor
worker process is in neither). Prints a table, the ratios hummock_sql / bytewax and hummock_push /
bytewax per query, and
one JSON line ``{"bench": "peers", "events_per_s": {engine: {query: ...}}, ...}`` with
``machine`` (bench.harness: build, environment, versions, load before and after) and
``batch_ms``: for hummock_sql and hummock_push, each batch's ``insert_arrow`` + FLUSH timed over
every round, as p50 / p90 / p99 / max / mean ms (also printed) -- the wall figure is the mean,
and on this shared disk a few fsyncs of 50-500 ms can move it while the p50 stays put.

Run: ``python -m bench.peers [--quick] [--rows N] [--batch B] [--rounds R] [--queries q1,qa]
[--engines hummock_sql,bytewax]``. ``--quick``: 100,000 rows, 3 rounds.

Callers: users, tests/test_bench_peers.py (tiny sizes; only the result checks).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from bench.harness import _fmt, machine, run_dir
from bench.sql_ingest import PUSH_SOURCE, QUERIES, make_batches, run_sql, run_stream

ENGINES = ("hummock_sql", "hummock_push", "hummock_source", "hummock_stream", "bytewax")
COLUMNS = ("auction", "bidder", "price", "channel", "date_time")
SOURCE = ("CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP) "
          "WITH (connector = 'posix_fs', posix_fs.root = '{root}', encode = 'parquet')")


class CheckError(AssertionError):
    """An engine's result differs from the pandas reference (names engine, query and how)."""


def bytewax_version():
    """Bytewax's version, or None when it is not installed."""
    try:
        from importlib import metadata
        import bytewax  # noqa: F401
        return metadata.version("bytewax")
    except ImportError:
        return None


def rebatch(batches: list, size: int) -> list:
    """The same rows in batches of ``size``."""
    whole = pa.concat_tables(batches)
    return [whole.slice(at, size) for at in range(0, whole.num_rows, size)]


# --- the engines ----------------------------------------------------------------------------


class Feed:
    """What every engine needs, built once before any clock: the Arrow batches, the Parquet
    files of the source engine, and the rows as Python tuples for Bytewax."""

    def __init__(self, batches: list, engines):
        self.batches = batches
        self.rows = sum(b.num_rows for b in batches)
        self.tmp = tempfile.mkdtemp(prefix="bench-peers-")
        self.files = []
        if "hummock_source" in engines:
            import pyarrow.parquet as pq
            for i, batch in enumerate(batches):
                path = os.path.join(self.tmp, f"b{i:06d}.parquet")
                pq.write_table(batch, path)
                self.files.append(path)
        self.tuples = []
        if "bytewax" in engines:
            for batch in batches:
                self.tuples.extend(zip(*(batch.column(c).to_pylist() for c in COLUMNS)))

    def head(self, n_batches: int) -> "Feed":
        """The first ``n_batches`` batches (warm-up), sharing the prepared inputs."""
        out = object.__new__(Feed)
        out.batches = self.batches[:n_batches]
        out.rows = sum(b.num_rows for b in out.batches)
        out.tmp, out.files, out.tuples = self.tmp, self.files[:n_batches], self.tuples[:out.rows]
        return out

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_hummock_sql(query: str, feed: Feed, batch_times: list | None = None):
    return run_sql(query, feed.batches, batch_times=batch_times)


def run_hummock_push(query: str, feed: Feed, batch_times: list | None = None):
    return run_sql(query, feed.batches, create=PUSH_SOURCE, batch_times=batch_times)


def run_hummock_stream(query: str, feed: Feed):
    return run_stream(query, feed.batches)


def run_hummock_source(query: str, feed: Feed):
    """(wall s, CPU s, the MV's rows) of the MV over a posix_fs source (module docstring)."""
    import sql
    with run_dir("bench-peers-source-") as tmp:
        root = os.path.join(tmp, "in")
        os.mkdir(root)
        staged = []
        for path in feed.files:   # hard links: the prepared files stay for the next run
            staged.append(os.path.join(tmp, "." + os.path.basename(path)))
            os.link(path, staged[-1])
        with sql.connect(os.path.join(tmp, "db")) as c:
            c.execute(SOURCE.format(root=root))
            c.execute(f"CREATE MATERIALIZED VIEW mv AS {QUERIES[query]}")
            wall, cpu = time.perf_counter(), time.process_time()
            for path in staged:
                os.rename(path, os.path.join(root, os.path.basename(path)[1:]))
                c.execute("FLUSH")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows = c.execute("SELECT * FROM mv").fetchall()
        return wall, cpu, rows


def _qa_step(state, row):
    price = row[2]
    if state is None:
        state = (1, price, price)
    else:
        state = (state[0] + 1, state[1] + price, price if price > state[2] else state[2])
    return state, state


def _qt_step(heap, row):
    item = (row[2], row[0])
    if heap is None:
        heap = []
    if len(heap) < 10:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)
    else:
        return heap, ()
    return heap, (list(heap),)


def bytewax_flow(query: str, rows: list, out: list, batch: int):
    """The Bytewax dataflow of ``query`` over ``rows``, its output appended to ``out``."""
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource

    flow = Dataflow(f"peers_{query}")
    bids = op.input("bids", flow, TestingSource(rows, batch_size=batch))
    if query == "q1":
        result = op.map("project", bids, lambda r: (r[0], r[1], r[2] * 0.908, r[4]))
    elif query == "q2":
        result = op.map("project", op.filter("filter", bids, lambda r: r[0] % 123 == 0), lambda r: (r[0], r[2]))
    elif query == "qa":
        result = op.stateful_map("agg", op.key_on("by_auction", bids, lambda r: str(r[0])), _qa_step)
    elif query == "qt":
        result = op.stateful_flat_map("top10", op.key_on("all", bids, lambda r: ""), _qt_step)
    else:
        raise ValueError(f"unknown query {query!r}")
    op.output("out", result, TestingSink(out))
    return flow


def run_bytewax(query: str, feed: Feed):
    """(wall s, CPU s, the query's final rows) of the Bytewax dataflow."""
    from bytewax.testing import run_main
    out = []
    flow = bytewax_flow(query, feed.tuples, out, feed.batches[0].num_rows if feed.batches else 1)
    wall, cpu = time.perf_counter(), time.process_time()
    run_main(flow)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if query == "qa":   # the last update of each group
        rows = [(int(k), *v) for k, v in dict(out).items()]
    elif query == "qt":
        rows = [(a, p) for p, a in (out[-1][1] if out else [])]
    else:
        rows = out
    return wall, cpu, rows


RUNNERS = {"hummock_sql": run_hummock_sql, "hummock_push": run_hummock_push, "hummock_source": run_hummock_source,
           "hummock_stream": run_hummock_stream, "bytewax": run_bytewax}
#: Engines whose runs also time each batch (``insert_arrow`` + FLUSH): the JSON's ``batch_ms``
BATCH_TIMED = ("hummock_sql", "hummock_push")


# --- the pandas reference and the checks ----------------------------------------------------


def reference(query: str, batches: list):
    """The query's answer over ``batches`` computed by pandas."""
    df = pa.concat_tables(batches).select(list(COLUMNS)).to_pandas()
    df["date_time"] = df["date_time"].astype("datetime64[us]").astype(np.int64)
    if query == "q1":
        return _sorted(np.rec.fromarrays([df.auction.to_numpy(), df.bidder.to_numpy(),
                                          df.price.to_numpy() * 0.908, df.date_time.to_numpy()]))
    if query == "q2":
        kept = df[df.auction % 123 == 0]
        return _sorted(np.rec.fromarrays([kept.auction.to_numpy(), kept.price.to_numpy()]))
    if query == "qa":
        g = df.groupby("auction").price.agg(["count", "sum", "max"]).reset_index()
        return _sorted(np.rec.fromarrays([g.auction.to_numpy(), g["count"].to_numpy(),
                                          g["sum"].to_numpy(), g["max"].to_numpy()]))
    if query == "qt":
        top = sorted(df.price.nlargest(10).tolist(), reverse=True)
        candidates = set(zip(df.auction[df.price >= top[-1]].tolist(), df.price[df.price >= top[-1]].tolist())) \
            if top else set()
        return top, candidates
    raise ValueError(f"unknown query {query!r}")


def _sorted(rec):
    return np.sort(rec, order=list(rec.dtype.names)) if len(rec) else rec


def _micros(value) -> int:
    import datetime
    if isinstance(value, datetime.datetime):
        return int((value - datetime.datetime(1970, 1, 1)) // datetime.timedelta(microseconds=1))
    return int(value)


def canonical(query: str, rows: list):
    """An engine's rows in the reference's shape (module docstring)."""
    if query == "qt":
        return sorted((int(p) for _, p in rows), reverse=True), {(int(a), int(p)) for a, p in rows}
    if not rows:
        return np.rec.fromarrays([np.array([], np.int64)] * {"q1": 4, "q2": 2, "qa": 4}[query])
    cols = list(zip(*rows))
    if query == "q1":
        arrays = [np.array(cols[0], np.int64), np.array(cols[1], np.int64), np.array(cols[2], np.float64),
                  np.array([_micros(v) for v in cols[3]], np.int64)]
    else:
        arrays = [np.array([int(v) for v in c], np.int64) for c in cols]
    return _sorted(np.rec.fromarrays(arrays))


def check(engine: str, query: str, rows: list, ref) -> None:
    """Raise :class:`CheckError` unless ``rows`` equal the reference ``ref`` of ``query``."""
    got = canonical(query, rows)
    if query == "qt":
        top, candidates = ref
        prices, pairs = got
        if prices != top or not pairs <= candidates or len(rows) != len(top):
            raise CheckError(f"{engine} {query}: top prices {prices} rows {sorted(pairs)}, expected the prices {top} "
                             f"from rows among {sorted(candidates)}")
        return
    if len(got) != len(ref):
        raise CheckError(f"{engine} {query}: {len(got)} rows, the reference has {len(ref)}")
    if len(ref) and [len(got.dtype.names)] != [len(ref.dtype.names)]:
        raise CheckError(f"{engine} {query}: {len(got.dtype.names)} columns, the reference has {len(ref.dtype.names)}")
    for name_got, name_ref in zip(got.dtype.names, ref.dtype.names):
        if not np.array_equal(got[name_got], ref[name_ref]):
            at = int(np.argmax(got[name_got] != ref[name_ref]))
            raise CheckError(f"{engine} {query}: column {name_ref} differs from the reference, first at sorted row "
                             f"{at}: {got[at]} vs {ref[at]}")


# --- the run --------------------------------------------------------------------------------


def measure(feed: Feed, queries, engines, rounds: int, warmup: bool = True) -> dict:
    """``{engine: {query: {"wall": [s...], "cpu": [s...]}}}``; every run's result checked."""
    refs = {q: reference(q, feed.batches) for q in queries}
    if warmup:
        small, small_refs = feed.head(2), {q: reference(q, feed.batches[:2]) for q in queries}
        for q in queries:
            for e in engines:
                check(e, q, RUNNERS[e](q, small)[2], small_refs[q])
    times = {e: {q: {"wall": [], "cpu": [], "batches": []} for q in queries} for e in engines}
    for r in range(rounds):
        order = list(engines[r % len(engines):]) + list(engines[:r % len(engines)])
        for q in queries:
            for e in order:
                rows = None   # every run starts from the same heap (below)
                gc.collect()
                if e in BATCH_TIMED:
                    wall, cpu, rows = RUNNERS[e](q, feed, batch_times=times[e][q]["batches"])
                else:
                    wall, cpu, rows = RUNNERS[e](q, feed)
                check(e, q, rows, refs[q])
                times[e][q]["wall"].append(wall)
                times[e][q]["cpu"].append(cpu)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="rows per batch, one checkpointed epoch each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 rows (3 rounds)")
    parser.add_argument("--queries", default=",".join(QUERIES))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up runs (tests)")
    args = parser.parse_args(argv)
    rows = 100_000 if args.quick and args.rows == 1_000_000 else args.rows
    queries = [q for q in args.queries.split(",") if q]
    for q in queries:
        if q not in QUERIES:
            parser.error(f"unknown query {q!r} (known: {', '.join(QUERIES)})")
    engines = [e for e in args.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES:
            parser.error(f"unknown engine {e!r} (known: {', '.join(ENGINES)})")
    notes = []
    version = bytewax_version()
    if "bytewax" in engines and version is None:
        engines.remove("bytewax")
        notes.append("bytewax is not installed (pip install -e '.[bench]'): its column is left out")
        print("note: " + notes[-1], file=sys.stderr)
    batches = rebatch(make_batches(rows), args.batch)
    feed = Feed(batches, engines)
    try:
        times = measure(feed, queries, engines, args.rounds, warmup=not args.no_warmup)
    except CheckError as exc:
        print(f"CHECK FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        feed.close()
    rates = {e: {q: round(rows / statistics.median(times[e][q]["wall"])) for q in queries} for e in engines}
    cpu_rates = {e: {q: round(rows / max(statistics.median(times[e][q]["cpu"]), 1e-9)) for q in queries}
                 for e in engines}
    ratio = ({q: round(rates["hummock_sql"][q] / rates["bytewax"][q], 3) for q in queries}
             if "hummock_sql" in rates and "bytewax" in rates else None)
    push_ratio = ({q: round(rates["hummock_push"][q] / rates["bytewax"][q], 3) for q in queries}
                  if "hummock_push" in rates and "bytewax" in rates else None)
    _table(queries, engines, rates, {"sql/bytewax": ratio, "push/bytewax": push_ratio})
    batch_ms = {e: {q: batch_percentiles(times[e][q]["batches"]) for q in queries}
                for e in engines if e in BATCH_TIMED}
    for e, per_query in batch_ms.items():
        print(f"{e} ms a batch (insert_arrow + FLUSH, every round), p50 / p99 / max: " + "; ".join(
            f"{q} {v['p50']} / {v['p99']} / {v['max']}" for q, v in per_query.items() if v))
    for note in notes:
        print("note: " + note)
    print(json.dumps({"bench": "peers", "events_per_s": rates, "cpu_events_per_s": cpu_rates, "batch_ms": batch_ms,
                      "ratio_hummock_sql_bytewax": ratio, "ratio_hummock_push_bytewax": push_ratio, "checked": True, "rows": rows, "batch": args.batch,
                      "rounds": args.rounds, "queries": {q: QUERIES[q] for q in queries}, "bytewax": version,
                      "notes": notes, "machine": machine()}))
    sys.stdout.flush()
    return 0


def batch_percentiles(seconds: list) -> dict:
    """``{"p50", "p90", "p99", "max", "mean"}`` in ms of the batches' times (empty: ``{}``). The
    wall figure is the mean; a p50 well below it says the time went to a few slow batches (an
    fsync the shared disk held up, a write stall), not to every batch."""
    if not seconds:
        return {}
    ms = sorted(s * 1000 for s in seconds)
    at = lambda f: round(ms[min(len(ms) - 1, int(f * len(ms)))], 2)   # noqa: E731
    return {"p50": round(statistics.median(ms), 2), "p90": at(0.9), "p99": at(0.99), "max": round(ms[-1], 2),
            "mean": round(statistics.fmean(ms), 2)}


def _table(queries, engines, rates, ratios: dict) -> None:
    ratios = {name: r for name, r in ratios.items() if r}
    cols = ["query", *(f"{e} ev/s" for e in engines), *ratios]
    body = [[q, *(_fmt(float(rates[e][q])) for e in engines), *(f"{r[q]:.2f}" for r in ratios.values())]
            for q in queries]
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in body:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))


if __name__ == "__main__":
    sys.exit(main())
