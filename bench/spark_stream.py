"""Benchmark ``spark_stream``: Nexmark MVs maintained by the Spark runtime (``sql/spark_pipeline``)
against the in-process runtime, in the same run, on the same events.

Method:

- Events are generated once by ``bench/nexmark`` (seed ``--seed``): one small warm-up batch
  (``--warmup-events``, events ``[0, W)``) then ``--batches`` micro-batches of ``--events``
  events each (``[W, W + N*B)``), written as one Parquet file per table and batch under a temp
  directory, all OUTSIDE the timing. Only the tables a query reads are fed; events/s counts all
  N events of a batch (as ``bench.nexmark`` does).
- Each runtime runs in a child process of its own (``--child RUNTIME``): ``in_process`` and one
  per Spark master (``local[1]``, ``local[2]``; one SparkSession per process, made by
  ``hummock.compaction.spark.spark_session``: UI off, log level ERROR, workers running this
  interpreter). Per query a fresh database: ``feed.setup``, the warm-up batch (its time is
  reported as ``warmup_ms``, never in events/s: on Spark the first batch also starts the Python
  workers and ships the plan), then the timed batches:
  - in-process: ``insert_arrow`` of the batch's tables then ``FLUSH`` (one epoch per batch),
    the Parquet files read into Arrow outside the timing;
  - Spark, ``--feed sql`` (the default): the same as in-process -- the same Arrow tables through
    ``insert_arrow`` then ``FLUSH``, one epoch per batch (the driver routes the rows to their
    partitions), so both runtimes get the same input the same way;
  - Spark, ``--feed dataframe``: ``conn.db.rt.run_batch({table: spark.read.parquet(file)},
    batch_id, "bench")``, one epoch per batch (the Parquet read, Spark's rows crossing into the
    Python workers and their routing happen inside, as a streaming source's would: the cost a
    ``conn.feed`` of a file stream pays, which the in-process runtime has no equivalent of).
  After the last batch ``feed.check`` compares the MV with its batch recomputation; ``checked``
  is true iff every MV of every runtime and batch size equals it.
- Figures per runtime: events/s (N*B over the summed batch times); epoch latency p50/p99 over the
  per-batch times of all its queries (nearest rank: with few batches p99 is the slowest one); the
  per-stage overhead of Spark batches, each stage's wall time minus its slowest task's time
  (``BatchStats`` ``stageN`` - ``stageN_task_max``: scheduling, shuffle, serialisation,
  persisting the output, collecting the tasks' metas; stage 1's also holds reading the input
  and routing it, which run lazily inside its shuffle, so it is reported apart too), and the
  driver's ``route`` and ``commit`` times and SSTs per batch.
- ``--commit-cost`` measures the driver's one ``HummockStorage.commit_ssts`` with 0, 10, 100,
  1000 (``--commit-ssts``) small SSTs on a local directory (each SST built by its own
  ``TaskStore`` outside the timing; median of ``--commit-repeats`` commits, each its own epoch
  on a fresh store), split into reading every SST's meta back (``verify_objects``) and the rest.

Output: a table per batch size, then ONE JSON line, the last line of stdout::

    {"bench": "spark_stream", "events": N, "batches": B, "feed": "sql",
     "events_per_s": {"in_process": {"q0": ...}, "spark_local1": {...}, "spark_local2": {...}},
     "epoch_ms": {"p50": ..., "p99": ..., "runtime": "spark_local2"}, "checked": true,
     "by_batch": {"100000": {...}, ...}, "commit_cost": {...}, "machine": {...}}

``events_per_s`` and ``epoch_ms`` are the largest batch size's (``by_batch`` has every size);
``epoch_ms`` is the last Spark master's. Run: ``python -m bench.spark_stream`` (q0-q8, batches
of 100k and 1M events, 3 each: long); ``--quick`` is q0 and q4, 20k-event batches, 2 of them;
``--commit-cost`` alone (with ``--masters`` empty: ``--masters ''``) skips the pipeline.
Callers: users, ``bench/report.py`` reads the JSON line, tests/test_bench_spark_stream.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.harness import machine

DEFAULT_MASTERS = ("local[1]", "local[2]")
DEFAULT_EVENTS = (100_000, 1_000_000)
DEFAULT_BATCHES = 3
QUICK = {"events": (20_000,), "batches": 2, "queries": ("q0", "q4")}
COMMIT_SSTS = (10, 100, 1000)
IN_PROCESS = "in_process"


def runtime_name(master: str) -> str:
    """``local[2]`` -> ``spark_local2`` (the JSON key of a Spark master)."""
    return "spark_" + "".join(c for c in master if c.isalnum() or c == "_")


def percentile(values, p: float) -> float:
    """Nearest-rank percentile ``p`` (0..100) of ``values`` (non-empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


# --- events on disk ----------------------------------------------------------------------------------

def write_events(root: str, events: int, batches: int, warmup: int, seed: int) -> dict:
    """Generate the warm-up batch and ``batches`` batches of ``events`` events as Parquet files
    ``root/{batch}/{table}.parquet`` (batch ``w`` the warm-up); returns the manifest
    ``{"events", "batches", "rows": {batch: {table: rows}}}`` (also written as manifest.json)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.nexmark.generator import NexmarkConfig, NexmarkGenerator
    from bench.nexmark.queries import TABLES

    generator = NexmarkGenerator(NexmarkConfig(seed=seed))
    parts = [("w", generator.generate(0, warmup))] if warmup else []
    parts += [(str(b), e) for b, e in enumerate(generator.batches(events * batches, events, warmup))]
    rows = {}
    for name, evs in parts:
        os.makedirs(os.path.join(root, name), exist_ok=True)
        rows[name] = {}
        for table, batch in zip(TABLES, evs):
            pq.write_table(pa.Table.from_batches([batch]), os.path.join(root, name, f"{table}.parquet"))
            rows[name][table] = batch.num_rows
    manifest = {"events": events, "batches": batches, "warmup": warmup, "rows": rows}
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return manifest


# --- one runtime (a child process) -----------------------------------------------------------------

def _stage_overheads(stats: dict) -> list:
    """``[(stage, wall - slowest task)]`` seconds of one Spark batch's ``BatchStats.as_dict()``."""
    seconds = stats["seconds"]
    out = []
    for key, wall in seconds.items():
        if key.startswith("stage") and key[5:].isdigit() and f"{key}_task_max" in seconds:
            out.append((int(key[5:]), max(0.0, wall - seconds[f"{key}_task_max"])))
    return sorted(out)


FEEDS = ("sql", "dataframe")


def run_child(runtime: str, root: str, queries: list, feed_mode: str = "sql") -> dict:
    """Every query of ``queries`` on ``runtime`` (``in_process`` or a Spark master) over the
    events under ``root``, fed as ``feed_mode`` says (module docstring; in-process is always
    ``sql``): ``{"runtime", "master", "partitions", "session_s", "queries": {q: {...}}}``."""
    import pyarrow.parquet as pq

    import sql
    from bench.nexmark import feed
    from bench.nexmark.queries import QUERIES

    with open(os.path.join(root, "manifest.json")) as f:
        manifest = json.load(f)
    events, batches = manifest["events"], manifest["batches"]
    names = (["w"] if manifest["warmup"] else []) + [str(b) for b in range(batches)]
    spark, out = None, {"runtime": runtime, "queries": {}}
    if runtime != IN_PROCESS:
        from hummock.compaction.spark import spark_session

        spark, out["session_s"] = spark_session(runtime)
        out["master"] = runtime
        out["partitions"] = spark.sparkContext.defaultParallelism
    for qname in queries:
        q = QUERIES[qname]
        result = out["queries"][qname] = {"batch_s": [], "stats": []}
        path = tempfile.mkdtemp(prefix=f"spark-stream-{qname}-", dir=root)
        try:
            options = {"runtime": "spark", "spark": spark} if spark is not None else {}
            with sql.connect(path, barrier_interval_ms=0, **options) as conn:
                feed.setup(conn, [q])
                for b, name in enumerate(names):
                    tables = [t for t in q.reads if manifest["rows"][name][t]]
                    files = {t: os.path.join(root, name, f"{t}.parquet") for t in tables}
                    if spark is None or feed_mode == "sql":
                        data = {t: pq.read_table(p) for t, p in files.items()}   # outside the timing
                        began = time.perf_counter()
                        for t, table in data.items():
                            conn.insert_arrow(t, table)
                        conn.execute("FLUSH")
                        seconds = time.perf_counter() - began
                    else:
                        frames = {t: spark.read.parquet(p) for t, p in files.items()}
                        began = time.perf_counter()
                        conn.db.rt.run_batch(frames, b, "bench")
                        seconds = time.perf_counter() - began
                    if name == "w":
                        result["warmup_ms"] = round(seconds * 1000, 1)
                        continue
                    result["batch_s"].append(round(seconds, 4))
                    if spark is not None:
                        result["stats"].append(conn.db.rt.last.as_dict())
                ok, maintained, _ = feed.check(conn, q)
                result["checked"] = bool(ok)
                result["rows"] = len(maintained)
            result["events_per_s"] = round(events * batches / sum(result["batch_s"]))
        except Exception as exc:   # one query's failure is a figure, not the end of the run
            result.update(checked=False, error=f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            shutil.rmtree(path, ignore_errors=True)
    return out


# --- the parent ---------------------------------------------------------------------------------------

def _spawn(runtime: str, root: str, queries: list, feed_mode: str) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-m", "bench.spark_stream", "--child", runtime, "--root", root,
                           "--queries", ",".join(queries), "--feed", feed_mode], capture_output=True, text=True,
                          env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        return {"runtime": runtime, "error": f"child exited {done.returncode}: {done.stderr[-3000:]}", "queries": {}}
    return json.loads(lines[-1])


def summarize(events: int, batches: int, children: list, queries: list) -> dict:
    """One batch size's figures from its children's results."""
    rates, latency, overhead, warmup, extra, errors = {}, {}, {}, {}, {}, {}
    checked = True
    for child in children:
        name = IN_PROCESS if child["runtime"] == IN_PROCESS else runtime_name(child["runtime"])
        if "error" in child:
            errors[name] = child["error"]
            checked = False
            continue
        rates[name], warmup[name] = {}, {}
        totals, stages, firsts, routes, commits, ssts = [], [], [], [], [], []
        for q in queries:
            r = child["queries"].get(q, {})
            checked = checked and bool(r.get("checked"))
            if "error" in r:
                errors[f"{name}.{q}"] = r["error"]
            if "events_per_s" in r:
                rates[name][q] = r["events_per_s"]
            if "warmup_ms" in r:
                warmup[name][q] = r["warmup_ms"]
            totals += r.get("batch_s", [])
            for s in r.get("stats", []):
                overheads = _stage_overheads(s)
                stages += [o for _, o in overheads]
                firsts += [o for stage, o in overheads if stage == 1]
                routes.append(s["seconds"].get("route", 0.0))
                commits.append(s["seconds"].get("commit", 0.0))
                ssts.append(s["ssts"])
        if totals:
            latency[name] = {"p50": round(percentile(totals, 50) * 1000, 1),
                             "p99": round(percentile(totals, 99) * 1000, 1), "batches": len(totals)}
        if stages:
            later = sorted(stages)
            for o in firsts:
                later.remove(o)
            overhead[name] = {"stage_overhead_ms_mean": round(statistics.mean(stages) * 1000, 1),
                              "stage_overhead_ms_p50": round(percentile(stages, 50) * 1000, 1),
                              "stage_overhead_ms_max": round(max(stages) * 1000, 1), "stages": len(stages),
                              "stage1_overhead_ms_p50": round(percentile(firsts, 50) * 1000, 1) if firsts else None,
                              "later_stage_overhead_ms_p50": round(percentile(later, 50) * 1000, 1) if later else None,
                              "route_ms_mean": round(statistics.mean(routes) * 1000, 1),
                              "commit_ms_mean": round(statistics.mean(commits) * 1000, 1),
                              "ssts_per_batch_mean": round(statistics.mean(ssts), 1),
                              "session_s": round(child.get("session_s", 0.0), 2),
                              "partitions": child.get("partitions")}
            extra[name] = {q: [{"stages_run": s["stages_run"], "ssts": s["ssts"], "seconds": s["seconds"]}
                               for s in child["queries"].get(q, {}).get("stats", [])] for q in queries}
    base = rates.get(IN_PROCESS, {})
    ratio = {name: {q: round(v / base[q], 3) for q, v in qs.items() if base.get(q)}
             for name, qs in rates.items() if name != IN_PROCESS}
    out = {"events": events, "batches": batches, "events_per_s": rates, "ratio_to_in_process": ratio,
           "epoch_ms": latency, "spark": overhead, "warmup_ms": warmup, "batch_stats": extra, "checked": checked}
    if errors:
        out["errors"] = errors
    return out


def print_table(summary: dict, queries: list) -> None:
    names = list(summary["events_per_s"])
    print(f"# {summary['events']:,}-event micro-batches x {summary['batches']}; events/s (ratio to in-process)")
    print("query  " + "  ".join(f"{n:>22}" for n in names))
    for q in queries:
        cells = []
        for n in names:
            v = summary["events_per_s"][n].get(q)
            r = summary["ratio_to_in_process"].get(n, {}).get(q)
            cells.append(f"{'-' if v is None else f'{v:,}'}{'' if r is None else f' ({r:.2f}x)'}".rjust(22))
        print(f"{q:<6} " + "  ".join(cells))
    for n, lat in summary["epoch_ms"].items():
        sp = summary["spark"].get(n)
        more = (f"; stage overhead mean {sp['stage_overhead_ms_mean']} ms over {sp['stages']} stages, route "
                f"{sp['route_ms_mean']} ms, commit {sp['commit_ms_mean']} ms, {sp['ssts_per_batch_mean']} SSTs/batch"
                if sp else "")
        print(f"  {n}: epoch p50 {lat['p50']} ms, p99 {lat['p99']} ms{more}; warm-up "
              f"{summary['warmup_ms'].get(n)} ms")
    for k, v in summary.get("errors", {}).items():
        print(f"  ERROR {k}: {v[:500]}")
    sys.stdout.flush()


# --- the driver's commit cost ---------------------------------------------------------------------

def commit_cost(counts=COMMIT_SSTS, repeats: int = 3) -> dict:
    """Seconds of one ``commit_ssts`` publishing ``n`` small SSTs (one per producer, one table
    each) on a local directory, for each ``n`` in ``(0, *counts)``: ``{"n": {"commit_ms",
    "verify_ms", "bytes_per_sst"}, ..., "per_sst_ms": ...}`` (per SST: the slope between 0 and
    the largest ``n``)."""
    from hummock import HummockStorage, StorageOptions
    from hummock.external_ssts import verify_objects
    from hummock.task_store import TaskStore

    options = StorageOptions(compactor="none", vacuum_min_age_s=3600)
    step = 1 << 16
    out = {}
    for n in (0, *counts):
        commits, verifies, size = [], [], 0
        with tempfile.TemporaryDirectory(prefix="spark-stream-commit-") as tmp:
            with HummockStorage.open(os.path.join(tmp, "db"), options) as db:
                epoch = step
                db.ingest_batch(1, [(b"\x00\x00base", b"v")], epoch)
                db.checkpoint(epoch)
                for r in range(repeats):
                    epoch += step
                    version = db.version()
                    infos = []
                    for i in range(n):   # n producers, e.g. n Spark tasks, each one small SST
                        task = TaskStore(db._store, version, epoch, options=options)
                        vnode = i % 256
                        task.ingest_batch(100 + i // 256, [(vnode.to_bytes(2, "big") + b"key%06d" % j, b"x" * 32)
                                                           for j in range(20)], epoch)
                        infos += task.finish(db.reserve_sst_ids(4, hold=False)).ssts
                    size = sum(i.file_size for i in infos) // max(1, len(infos))
                    began = time.perf_counter()
                    verify_objects(db._store, infos)
                    verifies.append(time.perf_counter() - began)
                    db.ingest_batch(1, [(b"\x00\x00progress", b"%d" % r)], epoch)   # the progress record
                    began = time.perf_counter()
                    db.commit_ssts(epoch, infos)
                    commits.append(time.perf_counter() - began)
        out[str(n)] = {"commit_ms": round(statistics.median(commits) * 1000, 2),
                       "verify_ms": round(statistics.median(verifies) * 1000, 2), "bytes_per_sst": size}
    top = str(max(counts))
    out["per_sst_ms"] = round((out[top]["commit_ms"] - out["0"]["commit_ms"]) / max(counts), 4)
    out["repeats"] = repeats
    return out


def print_commit_cost(cost: dict) -> None:
    print("# the driver's commit_ssts on a local directory (median of "
          f"{cost['repeats']}); verify = reading each SST's meta back (also inside commit)")
    for n, v in cost.items():
        if isinstance(v, dict):
            print(f"  {int(n):>5} SSTs: commit {v['commit_ms']:>9.2f} ms  (verify {v['verify_ms']:.2f} ms), "
                  f"{v['bytes_per_sst']} bytes/SST")
    print(f"  per SST: {cost['per_sst_ms']} ms")
    sys.stdout.flush()


# --- entry --------------------------------------------------------------------------------------------

def _csv(text: str) -> list:
    return [x.strip() for x in text.split(",") if x.strip()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_stream", description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default=None, help="comma-separated Nexmark queries (default all: q0-q8)")
    parser.add_argument("--events", default=None,
                        help="events per micro-batch, comma-separated sizes (default 100000,1000000)")
    parser.add_argument("--batches", type=int, default=None,
                        help=f"timed batches per query (default {DEFAULT_BATCHES})")
    parser.add_argument("--masters", default=None, help="comma-separated Spark masters (default local[1],local[2])")
    parser.add_argument("--warmup-events", type=int, default=2_000, help="events of the untimed first batch")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="q0,q4; 20,000-event batches x 2")
    parser.add_argument("--commit-cost", action="store_true", help="also time commit_ssts with many small SSTs")
    parser.add_argument("--commit-ssts", default=None, help="SST counts of --commit-cost (default 10,100,1000)")
    parser.add_argument("--commit-repeats", type=int, default=3)
    parser.add_argument("--feed", choices=FEEDS, default="sql",
                        help="how the Spark runtime gets the events: sql (insert_arrow + FLUSH, as in-process; "
                             "default) or dataframe (spark.read.parquet into run_batch)")
    parser.add_argument("--child", help=argparse.SUPPRESS)   # child mode: in_process or a Spark master
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from bench.nexmark.queries import resolve
    queries = [q.name for q in resolve(_csv(args.queries) if args.queries else
                                       (list(QUICK["queries"]) if args.quick else ["all"]))]
    if args.child:
        print(json.dumps(run_child(args.child, args.root, queries, args.feed)))
        return {}
    sizes = [int(x) for x in _csv(args.events)] if args.events else \
        list(QUICK["events"] if args.quick else DEFAULT_EVENTS)
    batches = args.batches or (QUICK["batches"] if args.quick else DEFAULT_BATCHES)
    masters = _csv(args.masters) if args.masters is not None else list(DEFAULT_MASTERS)
    if min(sizes) < 1 or batches < 1 or args.warmup_events < 0:
        parser.error("--events and --batches must be >= 1, --warmup-events >= 0")

    result = {"bench": "spark_stream", "queries": queries, "masters": masters, "batches": batches,
              "feed": args.feed, "machine": machine()}
    by_batch = {}
    if masters:
        for size in sizes:
            root = tempfile.mkdtemp(prefix=f"hummock-bench-spark-stream-{size}-")
            try:
                write_events(root, size, batches, args.warmup_events, args.seed)
                children = [_spawn(rt, root, queries, args.feed) for rt in (IN_PROCESS, *masters)]
                by_batch[str(size)] = summarize(size, batches, children, queries)
                print(f"# the Spark runtime fed by {args.feed} (--feed)")
                print_table(by_batch[str(size)], queries)
            finally:
                shutil.rmtree(root, ignore_errors=True)
        head = by_batch[str(max(sizes))]
        last = runtime_name(masters[-1])
        result.update(events=max(sizes), events_per_s=head["events_per_s"],
                      epoch_ms=dict(head["epoch_ms"].get(last, {"p50": None, "p99": None}), runtime=last),
                      checked=all(s["checked"] for s in by_batch.values()), by_batch=by_batch)
    if args.commit_cost:
        counts = [int(x) for x in _csv(args.commit_ssts)] if args.commit_ssts else list(COMMIT_SSTS)
        result["commit_cost"] = commit_cost(counts, args.commit_repeats)
        print_commit_cost(result["commit_cost"])
    print(json.dumps(result, sort_keys=True))
    sys.stdout.flush()
    return result


if __name__ == "__main__":
    main()
