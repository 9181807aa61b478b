"""Benchmark ``compaction``: the compaction core on overlapping L0 data, and write amplification.

Workloads:
- ``core``: :func:`build_dataset` writes ``--mib`` MiB (default 256) of L0 SSTs to a local-directory
  store under a temp dir: 16-byte table keys, 100-byte random values; of the writes 65% are new
  keys, 30% overwrite an earlier key and 5% delete one; the writes go, in time order, to
  ``SUB_LEVELS`` overlapping sub-levels (one epoch each, each sub-level one sorted run of SSTs of
  at most ``target_sst_size``). The task compacts every sub-level to the bottom level with the
  watermark at the newest epoch (no snapshot pinned), so overwritten versions and every tombstone
  are dropped. :func:`run_core` times ``hummock.compaction.core.compact`` on it, single-threaded,
  reading each block once (no block cache) and uploading the outputs to the same store (fsync
  included); reported: input MB/s (input = the SST files' bytes) on the wall clock and per CPU
  second, input keys/s, output bytes, dropped versions and tombstones; median of ``--repeats``
  runs after one warm-up run (outputs deleted after each run). For reference, one run of the
  same task with the pure-Python twin of the per-entry loop (``_compact_py``; blocks, SST
  reading and building stay native) unless ``--no-twin``.
- ``write_amp``: a fillrandom of ``--wa-keys`` keys (16-byte keys, 100-byte values, batches of
  1,000 keys, a checkpoint every ``--wa-batches-per-checkpoint`` batches) into a
  ``HummockStorage`` with the in-process background compactor, again with its merges in a worker
  process (``compaction_workers=1``), and with ``compactor="none"``;
  measured once the compactor has settled (no pending work): write amplification, L0 sub-levels,
  and 20,000 point gets of random written keys (reads stay fast while L0 stays bounded); the
  gets again after a final ``compact_all`` (everything in the last level). Write amplification =
  (bytes flushed + bytes written by compaction) / user bytes ingested (16 + 100 per key), from
  ``stats()``: ``flushed_bytes`` and ``compaction.output_bytes`` (trivial moves rewrite nothing).

- ``spark``: the same task as one Spark job (:func:`hummock.compaction.spark.run_task_on_spark`)
  on ``local[1]`` and ``local[2]``, each master in a child process of its own (one SparkSession
  per process). Reported separately: session start-up (JVM, Python workers, a warm-up job) and
  the median job time over ``--repeats`` runs, which excludes start-up but includes planning the
  key-range splits, reserving ids, shipping the task and gathering the outputs; and the speed-up
  over the in-process run above. ``--no-spark`` skips it.

:func:`build_dataset` returns ``(store_url, task)``, where the task (:class:`CoreTask`) holds only
plain data (SST infos per run, watermark, options), so a runner in another process can open the
store from the URL and run the same task; every section adds its figures to the ``results``
dict printed as one JSON line at the end.

Targets (issue 5): the core >= 100 MB/s of input per core; Spark ``local[2]`` >= 1.6x the
in-process single thread on the same task. Run: ``python -m bench.compaction [--mib 256] [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass

from bench.harness import compactor_options, machine, report
from hummock import _twins
from hummock.compaction import _compact_py
from hummock.compaction.core import CompactionStats, compact
from hummock.iterators import SstRun
from hummock.key import encode_full_keys
from hummock.object_store import open_object_store
from hummock.sstable.builder import SstableBuilderOptions, SstableOutputs
from hummock.sstable.meta import sst_object_path
from hummock.sstable.reader import Sstable

TABLE = 1
KEY_LEN = 16
VALUE_LEN = 100
SUB_LEVELS = 8
EPOCH_STEP = 1 << 16
OVERWRITE, DELETE = 0.30, 0.05
ENTRY_BYTES = 110     # input bytes per write: ~119 per stored entry, some writes collapse


@dataclass(frozen=True)
class CoreTask:
    """One compaction task over a store, as plain data (picklable)."""
    runs: tuple                   # tuple of runs, each a tuple of SstableInfo in key order
    watermark: int
    bottom: bool
    target_sst_size: int
    builder_options: SstableBuilderOptions
    first_output_id: int          # output SSTs get ids from here up
    input_bytes: int
    input_entries: int


class _Reader:
    """What an ``SstRun`` needs from a reader: the opened SST."""

    def __init__(self, sst):
        self.sst = sst


def build_dataset(root: str, mib: int, seed: int = 5, target_sst_size: int = 64 << 20) -> tuple[str, CoreTask]:
    """Write about ``mib`` MiB of overlapping L0 SSTs under ``root``; return ``(store_url, task)``."""
    url = os.path.join(root, "store")
    store = open_object_store(url)
    options = SstableBuilderOptions()
    rng = random.Random(seed)
    wanted = mib * (1 << 20)
    keys: list[bytes] = []
    ids = itertools.count(1)
    runs, input_bytes, input_entries = [], 0, 0
    for level in range(SUB_LEVELS):
        # writes still needed, spread over the sub-levels left (some collapse within a sub-level)
        per_level = max(1, (wanted - input_bytes) // ENTRY_BYTES // (SUB_LEVELS - level))
        writes: dict[bytes, bytes | None] = {}
        for _ in range(per_level):
            r = rng.random()
            if keys and r < OVERWRITE:
                writes[keys[rng.randrange(len(keys))]] = rng.randbytes(VALUE_LEN)
            elif keys and r < OVERWRITE + DELETE:
                writes[keys[rng.randrange(len(keys))]] = None
            else:
                key = rng.randbytes(KEY_LEN)
                keys.append(key)
                writes[key] = rng.randbytes(VALUE_LEN)
        table_keys = sorted(writes)
        full_keys = encode_full_keys(TABLE, table_keys, (level + 1) * EPOCH_STEP)
        values = [writes[k] for k in table_keys]
        with SstableOutputs(store, options, lambda: next(ids)) as outputs:
            i = 0
            while i < len(full_keys):
                i = outputs.current().add_batch(full_keys, values, i, stop_at_size=target_sst_size)
                if i < len(full_keys):
                    outputs.cut()
        runs.append(tuple(outputs.infos))
        input_bytes += sum(info.file_size for info in outputs.infos)
        input_entries += len(full_keys)
    task = CoreTask(tuple(runs[::-1]), SUB_LEVELS * EPOCH_STEP, True, target_sst_size, options,
                    1_000_000, input_bytes, input_entries)
    return url, task


def run_core(url: str, task: CoreTask, key_range=(None, None), loop=None) -> tuple[list, CompactionStats]:
    """Run the task's compaction once (runs bounded to ``key_range``, full keys); return
    ``(output infos, stats)``. The caller deletes the outputs. ``loop``: a module with
    ``compact_into`` (e.g. the pure twin) to run instead of the loaded core."""
    store = open_object_store(url)
    runs = [SstRun([_Reader(Sstable.open(store, info)) for info in run], *key_range) for run in task.runs]
    ids = itertools.count(task.first_output_id)
    stats = CompactionStats()
    if loop is None:
        infos = compact(runs, task.watermark, task.bottom, store, task.builder_options, task.target_sst_size,
                        lambda: next(ids), stats)
    else:
        with SstableOutputs(store, task.builder_options, lambda: next(ids)) as outputs:
            loop.compact_into(runs, task.watermark, task.bottom, outputs, task.target_sst_size, stats)
        infos = outputs.infos
    return infos, stats


def delete_outputs(url: str, infos) -> None:
    store = open_object_store(url)
    for info in infos:
        store.delete(sst_object_path(info.sst_id))


def bench_core(url: str, task: CoreTask, repeats: int, loop=None, warm_up: bool = True) -> dict:
    """Median wall and CPU time of the core on the task, after one warm-up run."""
    walls, cpus = [], []
    for attempt in range(repeats + warm_up):
        wall, cpu = time.perf_counter(), time.process_time()
        infos, stats = run_core(url, task, loop=loop)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        output_bytes = sum(info.file_size for info in infos)
        delete_outputs(url, infos)
        if attempt or not warm_up:
            walls.append(wall)
            cpus.append(cpu)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    mb = task.input_bytes / 1e6
    return {"input_bytes": task.input_bytes, "input_entries": stats.input_entries,
            "input_ssts": sum(len(run) for run in task.runs), "sub_levels": len(task.runs),
            "seconds": wall, "cpu_seconds": cpu, "input_mb_s": mb / wall, "input_mb_per_cpu_s": mb / cpu,
            "keys_s": stats.input_entries / wall, "output_bytes": output_bytes, "output_ssts": len(infos),
            "output_entries": stats.output_entries, "dropped_versions": stats.dropped_versions,
            "dropped_tombstones": stats.dropped_tombstones}


SPARK_MASTERS = ("local[1]", "local[2]")


def spark_child(task_file: str, master: str, repeats: int) -> None:
    """Child mode: run the pickled ``(url, CoreTask)`` as Spark jobs on ``master``; print JSON."""
    import pickle

    from hummock import StorageOptions
    from hummock.compaction.picker import CompactionTask
    from hummock.compaction.spark import run_task_on_spark, spark_session
    with open(task_file, "rb") as f:
        url, core = pickle.load(f)
    options = StorageOptions(spark_master=master, target_sst_size=core.target_sst_size,
                             block_size=core.builder_options.block_size,
                             restart_interval=core.builder_options.restart_interval,
                             compression=core.builder_options.compression,
                             bloom_bits_per_key=core.builder_options.bloom_bits_per_key)
    task = CompactionTask("compact", 0, 1, core.runs, core.bottom, "bench")
    ids = itertools.count(core.first_output_id, 10_000)

    def reserve_ids(count: int) -> range:
        start = next(ids)
        assert count <= 10_000
        return range(start, start + count)
    _, session_seconds = spark_session(master)
    jobs, result = [], None
    for attempt in range(repeats + 1):   # the first job warms up the Python workers
        result = run_task_on_spark(url, task, core.watermark, options, reserve_ids)
        delete_outputs(url, result.outputs)
        if attempt:
            jobs.append(result.job_seconds)
    if result.stats.input_entries != core.input_entries:
        raise SystemExit(f"spark read {result.stats.input_entries} entries, the task has {core.input_entries}")
    print(json.dumps({"master": master, "session_seconds": session_seconds, "job_seconds": statistics.median(jobs),
                      "splits": result.splits, "split_seconds": result.split_seconds,
                      "output_entries": result.stats.output_entries}))


def bench_spark(root: str, url: str, task: CoreTask, repeats: int, in_process_seconds: float) -> list:
    """Run the task on each of ``SPARK_MASTERS`` in a child process; rows for the report."""
    import pickle
    import subprocess
    task_file = os.path.join(root, "task.pickle")
    with open(task_file, "wb") as f:
        pickle.dump((url, task), f)
    rows = []
    for master in SPARK_MASTERS:
        out = subprocess.run([sys.executable, "-m", "bench.compaction", "--spark-child", master, "--task-file",
                              task_file, "--repeats", str(repeats)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        mb = task.input_bytes / 1e6
        row.update(runner=f"spark {master}", input_mb_s=mb / row["job_seconds"],
                   keys_s=task.input_entries / row["job_seconds"],
                   speedup_vs_in_process=in_process_seconds / row["job_seconds"])
        rows.append(row)
    return rows


def _write_amp(stats: dict, user_bytes: int) -> tuple[float, int, int]:
    """``(write amplification, flushed bytes, compaction bytes)`` from ``HummockStorage.stats()``."""
    compaction = stats["compaction"]
    flushed = stats["flushed_bytes"]
    return (flushed + compaction["output_bytes"]) / user_bytes, flushed, compaction["output_bytes"]


def _settle(db, timeout: float = 600.0) -> float:
    """Wait until the background compactor has nothing left to do; return the seconds waited."""
    start = time.perf_counter()
    last = None
    while time.perf_counter() - start < timeout:
        stats = db.stats()
        now = (stats["compaction"]["tasks"], stats["l0_sub_levels"], stats.get("compaction_pending_bytes", 0))
        if now == last and not now[2]:
            break
        last = now
        time.sleep(1.0)
    return time.perf_counter() - start


def _readrandom(db, keys: list, n: int = 20_000, seed: int = 3) -> float:
    """Point gets of ``n`` random written keys per second (the fill's last epoch), timed on a
    second pass so that the block cache holds their blocks (this measures the read path's
    probes -- one per L0 sub-level and level -- not the disk)."""
    rng = random.Random(seed)
    probes = [keys[rng.randrange(len(keys))] for _ in range(n)]
    epoch, get = db.max_committed_epoch, db.get
    for k in probes:
        get(TABLE, k, epoch)
    start = time.perf_counter()
    for k in probes:
        get(TABLE, k, epoch)
    return n / (time.perf_counter() - start)


def bench_write_amp(root: str, n_keys: int, batches_per_checkpoint: int, compactor: str = "local",
                    seed: int = 9) -> dict:
    """Write amplification of a fillrandom with the in-process compactor (module docstring):
    once the background compactor has settled after the fill, and after ``compact_all``; and
    point-read speed at those moments (with ``compactor="none"``: L0 left as the fill made it)."""
    from hummock import HummockStorage, StorageOptions
    rng = random.Random(seed)
    user_bytes = n_keys * (KEY_LEN + VALUE_LEN)
    written = []
    options = StorageOptions(**compactor_options(compactor))
    with HummockStorage.open(os.path.join(root, f"wa-{compactor}"), options) as db:
        epoch = db.max_committed_epoch
        max_l0 = 0
        start = time.perf_counter()
        for b in range(0, n_keys, 1000):
            batch = sorted({rng.randbytes(KEY_LEN): rng.randbytes(VALUE_LEN)
                            for _ in range(min(1000, n_keys - b))}.items())
            written.extend(k for k, _ in batch[::50])
            epoch += EPOCH_STEP
            db.ingest_batch(TABLE, batch, epoch)
            if (b // 1000 + 1) % batches_per_checkpoint == 0:
                db.checkpoint(epoch)
                max_l0 = max(max_l0, db.stats()["l0_sub_levels"])
        if epoch > db.max_committed_epoch:
            db.checkpoint(epoch)
        fill_seconds = time.perf_counter() - start
        settle_seconds = _settle(db) if compactor != "none" else 0.0
        settled = db.stats()
        reads_settled = _readrandom(db, written)
        db.compact_all()
        final = db.stats()
        reads_compacted = _readrandom(db, written)
    if compactor == "none":
        settled["compaction"] = final["compaction"] = {"output_bytes": 0, "tasks": 0, "moves": 0}
    amp, flushed, compacted = _write_amp(settled, user_bytes)
    return {"compactor": compactor, "keys": n_keys, "user_bytes": user_bytes, "flushed_bytes": flushed,
            "compaction_bytes": compacted, "write_amp": amp, "tasks": settled["compaction"]["tasks"],
            "moves": settled["compaction"]["moves"], "max_l0_sub_levels": max_l0,
            "l0_sub_levels_settled": settled["l0_sub_levels"], "fill_keys_s": n_keys / fill_seconds,
            "settle_seconds": settle_seconds, "level_sizes": list(settled["level_sizes"]),
            "readrandom_settled_ops_s": reads_settled, "readrandom_after_compact_all_ops_s": reads_compacted}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, help="MiB of L0 input for the core (default 256)")
    parser.add_argument("--repeats", type=int, help="timed runs of the core (default 3)")
    parser.add_argument("--wa-keys", type=int, help="keys of the write-amplification fill (default 2,000,000)")
    parser.add_argument("--wa-batches-per-checkpoint", type=int, default=50)
    parser.add_argument("--no-twin", dest="twin", action="store_false",
                        help="skip the reference run of the pure-Python per-entry loop")
    parser.add_argument("--quick", action="store_true", help="a small run (16 MiB, 200,000 keys, 1 repeat)")
    parser.add_argument("--no-spark", dest="spark", action="store_false", help="skip the Spark runs")
    parser.add_argument("--keep", help=argparse.SUPPRESS)  # a directory to build in and keep
    parser.add_argument("--spark-child", help=argparse.SUPPRESS)   # child mode: the master to run on
    parser.add_argument("--task-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.spark_child:
        spark_child(args.task_file, args.spark_child, args.repeats or 3)
        return {}
    for name, full, quick in (("mib", 256, 16), ("repeats", 3, 1), ("wa_keys", 2_000_000, 200_000)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    mode = "native" if _twins.LOADED and all(_twins.LOADED.values()) else "pure"
    root = args.keep or tempfile.mkdtemp(prefix="hummock-bench-compaction-")
    results = {"bench": "compaction", "mode": mode, "machine": machine()}
    try:
        start = time.perf_counter()
        url, task = build_dataset(root, args.mib)
        results["build_seconds"] = time.perf_counter() - start
        results["core"] = bench_core(url, task, args.repeats)
        if args.twin and mode == "native":   # the pure twin of the per-entry loop, for reference
            results["core_pure_loop"] = bench_core(url, task, 1, loop=_compact_py, warm_up=False)
        if args.spark:
            results["spark"] = bench_spark(root, url, task, args.repeats, results["core"]["seconds"])
        if args.wa_keys:
            results["write_amp"] = [bench_write_amp(root, args.wa_keys, args.wa_batches_per_checkpoint, compactor)
                                    for compactor in ("local", "workers", "none")]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    core = results["core"]
    print(f"# compaction core: {core['input_bytes'] / 2**20:,.0f} MiB of L0 in {core['sub_levels']} sub-levels, "
          f"mode={mode}, median of {args.repeats}")
    rows = [{"runner": "in-process, 1 thread", **core}]
    if "core_pure_loop" in results:
        rows.append({"runner": "same, pure-Python loop (1 run)", **results["core_pure_loop"]})
    report("compaction_core", rows,
           ["runner", "input_mb_s", "input_mb_per_cpu_s", "keys_s", "seconds", "output_bytes",
            "dropped_versions", "dropped_tombstones"])
    if "spark" in results:
        print("# the same task as one Spark job; job time excludes session start-up (reported apart)")
        report("compaction_spark", results["spark"], ["runner", "input_mb_s", "keys_s", "job_seconds", "splits",
                                                      "speedup_vs_in_process", "session_seconds"])
    if "write_amp" in results:
        wa = results["write_amp"]
        print(f"# fillrandom of {wa[0]['keys']:,} keys: write amplification and point reads, background "
              f"compactor vs none (reads once it settled, and after compact_all)")
        report("compaction_write_amp", wa, ["compactor", "fill_keys_s", "write_amp", "tasks", "max_l0_sub_levels",
                                            "l0_sub_levels_settled", "readrandom_settled_ops_s",
                                            "readrandom_after_compact_all_ops_s"])
    print(json.dumps(results, sort_keys=True))
    sys.stdout.flush()
    return results


if __name__ == "__main__":
    main()
