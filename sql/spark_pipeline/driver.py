"""The Spark runtime's driver: RisingWave's meta service on Spark -- one epoch per micro-batch.

:class:`SparkRuntime` maintains a catalog's tables and MVs by running each batch of changes as
Spark stages over Hummock state, and stands in for :class:`stream.runtime.StreamRuntime` in
:class:`sql.database.Database` (``write``, ``flush``, ``stop``, ``abort``, ``failure``), so the
same SQL database runs in-process or on Spark (``sql.connect(url, runtime="spark",
spark=session)``) with the same catalog and state.

One batch (:meth:`SparkRuntime.run_batch`), the driver holding the store's one writer:

1. ``e*`` = ``max_committed_epoch``; with a ``query`` name, a batch the store's progress record
   (``relational/progress.py``) already covers is skipped (a replay after a driver crash: exactly
   once). The batch's epoch ``e`` is the one reserved after the previous commit (catalog records
   of a DDL are written there first).
2. The committed version is pinned (a snapshot: the driver's vacuum spares its SSTs) and sent to
   the tasks as bytes; SST ids are reserved for every (stage, partition, attempt).
3. Stage 0 routes the input rows: a table's rows get their row ids (Dml) and go to the partition of
   their pk's vnode -- on the driver for SQL writes, in Spark tasks (``mapInArrow``) for a
   DataFrame. Records carry payloads of at least ``inline_bytes`` as exchange files in the
   store's object store (:mod:`~sql.spark_pipeline.exchange`): Spark's shuffle moves only their
   paths. Then each stage ``s`` of :func:`~sql.spark_pipeline.fragments.plan_pipeline` runs as
   one Spark job: the records routed to stage ``s`` (Arrow IPC chunks in a DataFrame) are
   shuffled to their partition (``repartition(N, key)``, ``key`` an int Spark's hash sends to
   the planned partition), each task runs :func:`~sql.spark_pipeline.task.run_stage_task`
   (``mapInArrow``), and the output is persisted until the batch ends (a retried task's rows
   never mix with another attempt's: Spark keeps one attempt's output). A stage without input
   rows is not run.
4. One version delta (``HummockStorage.commit_ssts``) publishes every task's SSTs, their
   watermarks, the progress record and the driver's own writes at ``e``; or nothing: a failed
   batch leaves orphan SSTs for vacuum, and the runtime fails (the database recovers: its DML log
   is written again into a new runtime).

Backfill: a new MV's first batch feeds it its upstream relations' committed snapshots (read in
the tasks from the pinned version, each task keeping the rows routed to it) and runs its
singleton fragments even without input (an aggregate's first row).

Thread-safety: one batch at a time (a lock); ``write`` may come from any thread.
Callers: :mod:`sql.database`, :mod:`sql.spark_pipeline.feed`, tests.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from hummock.compaction.remote import StoreDescription, open_cached_store
from hummock.errors import HummockError
from hummock.key import new_epoch
from hummock.killpoints import kill_point
from hummock.version_codec import encode_version
from relational.progress import read_progress, write_progress
from stream.errors import StreamError

from sql.errors import UnsupportedError
from sql.spark_pipeline import exchange
from sql.spark_pipeline import pickling  # noqa: F401  (plans hold interval literals)
from sql.spark_pipeline.fragments import plan_pipeline
from sql.spark_pipeline.task import (DRIVER_GENERATOR, EPOCH_STEP, KIND_META, RECORD_DDL, BatchContext,
                                     batch_records, blob_chunks, blobs, encode_chunk, fill_row_ids, read_meta,
                                     record_batch, run_stage_task, table_chunks)
from sql.watermark import has_watermark

log = logging.getLogger("sql.spark_pipeline")

#: crash points of a batch (``HUMMOCK_KILL_POINT=name[:N]``, hummock/killpoints.py): crash tests
#: kill the driver between its tasks and its commit, and between its commit and Spark's log
PIPELINE_KILL_POINTS = ("pipeline.before_commit", "pipeline.after_commit")

DEFAULT_ATTEMPTS = 4          # Spark's spark.task.maxFailures default
ROUTE_THREADS = 4             # threads encoding and writing the driver's routed chunks
DEFAULT_IDS_PER_TASK = 256


class BatchFailedError(StreamError):
    """A micro-batch could not be run or committed: nothing of it was published."""


def check_worker_python(spark) -> None:
    """Spark's Python workers must run this interpreter (the project and its compiled modules
    are installed here): ``StreamError`` naming both when the session was made with another
    ``PYSPARK_PYTHON``. ``HUMMOCK_SPARK_WORKER_PYTHON=any`` skips the check (a cluster whose
    workers have the project installed at another path)."""
    if os.environ.get("HUMMOCK_SPARK_WORKER_PYTHON") == "any":
        return
    worker = getattr(spark.sparkContext, "pythonExec", None) or "python3"
    resolved = shutil.which(worker) or worker
    if os.path.realpath(resolved) != os.path.realpath(sys.executable):
        raise StreamError(f"the Spark session's Python workers run {worker!r}, not this interpreter "
                          f"({sys.executable}); set PYSPARK_PYTHON={sys.executable} before creating the session "
                          f"(or HUMMOCK_SPARK_WORKER_PYTHON=any when the workers have the project installed)")


#: what the runtime's Python workers run with (unless the session sets them): Arrow's allocator
#: (mimalloc) keeps the pages a task freed instead of handing them back to the OS, so the next
#: task of the worker reuses them. A task's peak is a few hundred MB at 1M-row batches; touching
#: fresh pages again each task made them 1.4-2x slower on a 2-vCPU VM (docs/spark.md, "Workers").
WORKER_ENV = {"MIMALLOC_PURGE_DELAY": "-1"}


def set_worker_env(spark) -> None:
    """Add :data:`WORKER_ENV` to the environment Spark gives the Python workers of functions
    shipped from now on (``SparkContext.environment``, the ``spark.executorEnv.*`` settings);
    a variable the session already sets is left alone."""
    environment = spark.sparkContext.environment
    for name, value in WORKER_ENV.items():
        environment.setdefault(name, value)


def store_description(store) -> StoreDescription:
    """How the tasks open ``store`` (a ``HummockStorage``); ``StreamError`` for a store other
    processes cannot open (a memory store)."""
    try:
        return StoreDescription.of(store._store, store.options)
    except HummockError as exc:
        raise StreamError(f"the Spark runtime needs a store its tasks can open (a local directory the workers "
                          f"share, or S3), not {type(store._store).__name__}: {exc}") from None


def task_attempts(spark) -> int:
    """How many attempts of one task Spark may run (each writes under its own SST ids): the
    session's ``spark.task.maxFailures`` (``local[N,F]``: F), doubled under speculation."""
    conf = spark.sparkContext.getConf()
    attempts = int(conf.get("spark.task.maxFailures", str(DEFAULT_ATTEMPTS)))
    match = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", spark.sparkContext.master or "")
    if match:
        attempts = max(attempts, int(match.group(1)))
    if conf.get("spark.speculation", "false").lower() == "true":
        attempts *= 2
    return max(1, attempts)


class _ErrorCounts:
    """What ``Database.data_errors`` reads of an actor: ``data_errors`` (kind -> rows)."""

    def __init__(self):
        self.data_errors = Counter()


class SourceRef:
    """``Database.builder.sources[name]``: which table a write goes to."""

    def __init__(self, rel):
        self.rel = rel
        self.name = rel.name


class BatchStats:
    """Figures of the last batch: epoch, rows in, stages run, tasks, SSTs, exchange files,
    seconds per phase."""

    def __init__(self):
        self.epoch = 0
        self.rows_in = 0
        self.stages_run = 0
        self.fragments_run = 0
        self.ssts = 0
        self.exchange_files = 0   # payloads that crossed a stage as exchange files
        self.seconds = {}

    def as_dict(self) -> dict:
        return {"epoch": self.epoch, "rows_in": self.rows_in, "stages_run": self.stages_run,
                "fragments_run": self.fragments_run, "ssts": self.ssts, "exchange_files": self.exchange_files,
                "seconds": dict(self.seconds)}


class SparkRuntime:
    """A catalog's stream graph maintained by Spark micro-batches (module docstring)."""

    def __init__(self, store, catalog, plan_of, spark, *, partitions: int | None = None,
                 backfill=frozenset(), attempts: int = DEFAULT_ATTEMPTS, ids_per_task: int = DEFAULT_IDS_PER_TASK):
        self.store, self.catalog, self.spark = store, catalog, spark
        fed = [r.name for r in catalog.ordered() if getattr(r, "connector", None) is not None]
        if fed:   # connectors run in the in-process runtime only (sql/source.py): never ignored here
            raise UnsupportedError(f"{', '.join(fed)}: sources and tables with a connector run in the in-process "
                                   "runtime only, not on Spark")
        marked = has_watermark(catalog)
        if marked:   # the WatermarkFilter runs in the in-process runtime only (sql/watermark.py)
            raise UnsupportedError(f"{', '.join(marked)}: WATERMARK runs in the in-process runtime only, not on Spark")
        check_worker_python(spark)
        set_worker_env(spark)
        self.plan = plan_pipeline(catalog, plan_of)
        self.partitions = int(partitions or spark.sparkContext.defaultParallelism)
        if not 1 <= self.partitions <= 1000:
            raise StreamError(f"partitions must be in [1, 1000], got {self.partitions}")
        self.attempts, self.ids_per_task = max(attempts, task_attempts(spark)), ids_per_task
        self.sources = {rel.name: SourceRef(rel) for rel in catalog.ordered() if rel.kind == "table"}
        self.actors: dict = {}          # relation -> _ErrorCounts (Database reads actor.data_errors)
        self.backfill = frozenset(backfill)
        self.failure: BaseException | None = None
        self.last = BatchStats()
        self.batches = 0
        self._pending: list = []        # (rel, chunk, ticket)
        self._lock = threading.RLock()
        self._epoch: int | None = None
        self._ticker: threading.Thread | None = None
        self._stop_ticker = threading.Event()
        self._store_description = store_description(store)
        self._key_cache: dict = {}
        self._kept: list = []           # the running batch's persisted stage outputs
        #: payloads of at least this many bytes cross stages as exchange files (None: never)
        self.inline_bytes: int | None = exchange.INLINE_BYTES

    # --- the StreamRuntime surface Database uses ----------------------------------------------------

    def start(self) -> int:
        """Reserve the first batch's epoch (DDL writes its catalog records there) and return it."""
        with self._lock:
            cleared = exchange.clear(self.store.object_store)   # a crashed driver's batch (it held the writer)
            if cleared:
                log.info("removed %d exchange files a previous driver left", cleared)
            self._epoch = max(new_epoch(), self.store.max_committed_epoch + EPOCH_STEP)
            return self._epoch

    def write(self, source: SourceRef, chunk, ticket=None) -> None:
        """Queue a DML chunk for the next batch."""
        self._check()
        with self._lock:
            self._pending.append((source.rel, chunk, ticket))

    def flush(self) -> int:
        """Run a batch of everything queued (and the reserved epoch's catalog writes); returns
        the committed epoch."""
        self._check()
        return self.run_batch({})

    def stop(self) -> int:
        self._halt_ticker()
        return self.flush()

    def abort(self) -> None:
        self._halt_ticker()
        with self._lock:
            self._pending.clear()

    def data_errors(self) -> dict:
        """``{relation: {kind: rows}}``: values the tasks set to NULL (data errors) in published batches."""
        return {name: dict(c.data_errors) for name, c in self.actors.items() if c.data_errors}

    def start_ticker(self, barrier_interval_ms: int) -> None:
        """Run a batch every ``barrier_interval_ms`` while writes are queued."""
        if self._ticker is not None:
            return
        self._stop_ticker.clear()

        def tick():
            while not self._stop_ticker.wait(barrier_interval_ms / 1000):
                if self._pending and self.failure is None:
                    try:
                        self.run_batch({})
                    except Exception as exc:   # the failure is kept; the next statement recovers
                        log.warning("a periodic batch failed: %s", exc)
        self._ticker = threading.Thread(target=tick, name="spark-pipeline-ticker", daemon=True)
        self._ticker.start()

    def _halt_ticker(self) -> None:
        if self._ticker is not None:
            self._stop_ticker.set()
            self._ticker.join()
            self._ticker = None

    def _check(self) -> None:
        if self.failure is not None:
            raise self.failure

    # --- batches ------------------------------------------------------------------------------------

    def run_batch(self, frames: dict, batch_id: int | None = None, query: str | None = None) -> int:
        """One epoch: the queued writes plus ``frames`` (``{table name: Spark DataFrame}``) through
        every relation (module docstring). With ``query``, a ``batch_id`` the progress record
        already covers is skipped. Returns the committed epoch."""
        with self._lock:
            self._check()
            store = self.store
            committed = store.max_committed_epoch
            if query is not None:
                done = read_progress(store, query, committed)
                if done is not None and batch_id < done.batch_id:
                    raise StreamError(f"batch {batch_id} of {query!r} is below the batch {done.batch_id} the store "
                                      f"recorded: Spark replays at most the last one, so the query's checkpoint was "
                                      f"reset or another query uses this name; give it a new query_name")
                if done is not None and batch_id == done.batch_id:
                    log.info("batch %s of %s is already committed (epoch %s): skipped", batch_id, query, done.epoch)
                    return committed
            pending, self._pending = self._pending, []
            epoch = self._epoch if self._epoch is not None and self._epoch > committed else \
                max(new_epoch(), committed + EPOCH_STEP)
            for _, _, ticket in pending:   # before the commit: a commit that lands but raises is durable
                if ticket is not None:      # (a replay compares with the reopened store's epoch)
                    ticket.epoch = epoch
            try:
                try:
                    self._run(pending, frames, batch_id, query, committed, epoch)
                finally:
                    self._release()
                    files = self._clear_exchange(epoch)
            except BaseException as exc:
                failure = BatchFailedError(f"the micro-batch at epoch {epoch} failed: {type(exc).__name__}: {exc}")
                failure.__cause__ = exc
                self.failure = failure
                raise failure from exc
            self.last.exchange_files = files
            self.batches += 1
            self.backfill = frozenset()
            self._epoch = max(new_epoch(), epoch + EPOCH_STEP)
            return epoch

    def _run(self, pending, frames, batch_id, query, committed, epoch) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        began = time.perf_counter()
        stats = BatchStats()
        stats.epoch = epoch
        plan, n = self.plan, self.partitions
        keys = self._keys(n)
        with self.store.snapshot(committed):   # pins the version the tasks read
            pinned = self.store.version()
            version = encode_version(pinned)
            # the tasks read at the version's epoch: an idle checkpoint (no writes) may have moved
            # max_committed_epoch past it without a new version (the same data)
            committed = pinned.max_committed_epoch
            count = (plan.stages + 1) * n * self.attempts * self.ids_per_task
            ids = self.store.reserve_sst_ids(count)
            ctx = BatchContext(self._store_description, self.store.options, version, committed, epoch, n,
                               ids.start, self.ids_per_task, self.attempts, self.backfill,
                               self._backfill_edges(), self.inline_bytes)
            records = self._route_on_driver(pending, epoch, stats)
            inputs = []   # (the edges its records may carry, DataFrame of records)
            sources = frozenset(plan.source_edges.values())
            if records:
                inputs.append((sources, self.spark.createDataFrame(pa.Table.from_batches([record_batch(records, keys)]))))
            for name, frame in frames.items():
                inputs.append((sources, self._route_frame(name, frame, ctx, keys)))
            stats.seconds["route"] = round(time.perf_counter() - began, 4)
            outputs = []
            errors: dict = {}   # relation -> Counter: data errors of this batch's tasks
            by_stage = _stage_of_edges(plan)
            for stage in range(1, plan.stages + 1):
                edges = sorted(e for e, s in by_stage.items() if s == stage)
                forced = self.backfill and any(f.relation in self.backfill for f in plan.fragments_of_stage(stage))
                if not edges or (not any(c & set(edges) for c, _ in inputs) and not forced):
                    continue
                t0 = time.perf_counter()
                stage_in = [df.where(F.col("e").isin(edges)) for carried, df in inputs if carried & set(edges)]
                if forced:   # one no-op record per partition: every task runs (an empty shuffle runs none)
                    stage_in.append(self._ticks(n, keys))
                source = stage_in[0]
                for df in stage_in[1:]:
                    source = source.union(df)
                out = source.repartition(n, "key").mapInArrow(_StageFn(plan, ctx, stage, keys), RECORD_DDL)
                out = out.persist(StorageLevel.MEMORY_AND_DISK)   # one attempt's rows per task, not recomputed
                self._kept.append(out)
                metas = [read_meta(bytes(r[0])) for r in out.where(F.col("k") == KIND_META).select("payload").collect()]
                outputs += [m[3] for m in metas]
                for m in metas:
                    for relation, kinds in m[4].items():
                        errors.setdefault(relation, Counter()).update(kinds)
                stats.fragments_run += sum(m[0] for m in metas)
                if stage == 1 and frames:
                    stats.rows_in += sum(m[1] for m in metas)
                slowest = max((m[2] for m in metas), default=(0.0, 0.0, 0.0, 0.0))
                stats.seconds[f"stage{stage}_task_max"] = round(slowest[0], 4)
                stats.seconds[f"stage{stage}_task_max_parts"] = tuple(round(x, 3) for x in slowest[1:])
                carried = frozenset(e for f in plan.fragments_of_stage(stage) for e in f.outputs if e in by_stage)
                inputs.append((carried, out.where(F.col("k") != KIND_META)))
                stats.stages_run += 1
                stats.seconds[f"stage{stage}"] = round(time.perf_counter() - t0, 4)
            t0 = time.perf_counter()
            infos = [info for o in outputs for info in o.ssts]
            marks: dict = {}
            for o in outputs:
                for table_id, ranges in o.watermarks.items():
                    marks.setdefault(table_id, {}).update(ranges)
            if query is not None:
                write_progress(self.store, query, batch_id, epoch)
            kill_point("pipeline.before_commit")
            self.store.commit_ssts(epoch, infos, table_watermarks=marks or None)
            kill_point("pipeline.after_commit")
            for relation, kinds in errors.items():   # counted once the batch is published
                self.actors.setdefault(relation, _ErrorCounts()).data_errors.update(kinds)
            self.store.release_sst_ids(ids)
            stats.ssts = len(infos)
            stats.seconds["commit"] = round(time.perf_counter() - t0, 4)
        stats.seconds["total"] = round(time.perf_counter() - began, 4)
        self.last = stats

    def _release(self) -> None:
        """Drop the cached stage outputs of the batch (Spark's block manager keeps them otherwise)."""
        kept, self._kept = self._kept, []
        for frame in kept:
            try:
                frame.unpersist(blocking=False)
            except Exception as exc:   # the session went away: nothing left to free
                log.debug("unpersist failed: %s", exc)

    def _clear_exchange(self, epoch: int) -> int:
        """Delete the batch's exchange files (how many); a failure only leaves them for the next
        start (the batch may have committed: it must not fail now)."""
        try:
            return exchange.clear(self.store.object_store, epoch)
        except Exception as exc:
            log.warning("could not remove the exchange files of epoch %s: %s", epoch, exc)
            return 0

    def _ticks(self, n: int, keys: dict):
        return self.spark.createDataFrame(pa.Table.from_batches([record_batch([("b", t, -1, b"") for t in range(n)],
                                                                             keys)]))

    def _keys(self, n: int) -> dict:
        """``{partition: key}``: an int that Spark's hash partitioning into ``n`` partitions
        (``pmod(hash(key), n)``, Murmur3 seed 42) sends to that partition. Computed by Spark
        itself once per ``n``, so it is Spark's own hash whatever its version."""
        keys = self._key_cache.get(n)
        if keys is None:
            rows = self.spark.range(0, 64 * n).selectExpr("CAST(id AS INT) AS v",
                                                          f"pmod(hash(CAST(id AS INT)), {n}) AS t").collect()
            keys = {}
            for v, t in rows:
                keys.setdefault(t, v)
            if len(keys) != n:
                raise StreamError(f"found no partitioning key for some of {n} partitions")
            self._key_cache[n] = keys
        return keys

    def _backfill_edges(self) -> dict:
        """``{edge id: upstream TableDesc}``: the leaves of new MVs that read a snapshot."""
        out = {}
        for frag in self.plan.fragments:
            if frag.relation not in self.backfill:
                continue
            for e in frag.inputs:
                edge = self.plan.edges[e]
                if edge.producer is None:
                    continue
                producer = self.plan.fragments[edge.producer]
                if producer.relation != frag.relation:
                    out[e] = self.catalog.get(producer.relation).desc
        return out

    def _route_on_driver(self, pending, epoch: int, stats) -> list:
        """Stage 0 for queued SQL writes: row ids, then ``("b"|"r", partition, edge, payload)``
        records; the chunks are encoded (LZ4 releases the GIL) and written as exchange files by
        a few threads (the Spark tasks are not running yet: the cores are free)."""
        by_table: dict = {}
        for rel, chunk, _ in pending:
            by_table.setdefault(rel.name, (rel, []))[1].append(chunk)
        parts = []
        began = time.perf_counter()
        for name, (rel, chunks) in by_table.items():
            chunks = fill_row_ids(rel, chunks, DRIVER_GENERATOR, epoch)
            stats.rows_in += sum(c.cardinality for c in chunks)
            edge = self.plan.edges[self.plan.source_edges[name]]
            parts += list(blob_chunks(chunks, edge.dist, self.partitions, edge.id))
        stats.seconds["route_split"] = round(time.perf_counter() - began, 4)

        def encoded(part):
            p, edge_id, chunk = part
            return next(exchange.spill([("b", p, edge_id, encode_chunk(chunk))], self.store.object_store, epoch, "d",
                                       self.inline_bytes))
        if len(parts) <= 1:
            return [encoded(part) for part in parts]
        with ThreadPoolExecutor(max_workers=min(len(parts), ROUTE_THREADS)) as pool:
            return list(pool.map(encoded, parts))

    def _route_frame(self, name: str, frame, ctx: BatchContext, keys: dict):
        """Stage 0 for a DataFrame of table ``name``'s rows: routed by Spark tasks."""
        rel = self.catalog.get(name)
        if rel is None or rel.kind != "table":
            raise StreamError(f"no table {name!r} to feed")
        edge = self.plan.edges[self.plan.source_edges[name]]
        return frame.mapInArrow(_RouteFn(rel, edge, ctx, keys), RECORD_DDL)


def _stage_of_edges(plan) -> dict:
    return {e.id: plan.fragments[e.consumer].stage for e in plan.edges.values() if not e.local}


class _StageFn:
    """``mapInArrow`` body of one stage (pickled into its tasks)."""

    def __init__(self, plan, ctx, stage, keys):
        self.plan, self.ctx, self.stage, self.keys = plan, ctx, stage, keys

    def __call__(self, batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.attemptNumber()
        objects = open_cached_store(self.ctx.store)
        out = run_stage_task(self.plan, self.ctx, self.stage, partition, attempt,
                             batch_records(batches, partition, objects))
        src = self.stage * self.ctx.partitions + partition   # the producer of these records
        pending = []
        for rec in exchange.spill(out, objects, self.ctx.epoch, f"s{src}", self.ctx.inline_bytes):
            pending.append(rec)
            if len(pending) >= 16:
                yield record_batch(pending, self.keys, src)
                pending = []
        if pending:
            yield record_batch(pending, self.keys, src)


class _RouteFn:
    """``mapInArrow`` body of stage 0: a table's rows -> routed change chunks."""

    def __init__(self, rel, edge, ctx, keys):
        self.rel, self.edge, self.ctx, self.keys = rel, edge, ctx, keys

    def __call__(self, batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        generator = part % DRIVER_GENERATOR
        objects = open_cached_store(self.ctx.store)
        for batch in _coalesced(batches, ROUTE_ROWS):
            chunks = table_chunks(self.rel, batch, generator, self.ctx.epoch)
            recs = list(exchange.spill(blobs(chunks, self.edge.dist, self.ctx.partitions, self.edge.id), objects,
                                       self.ctx.epoch, f"r{part}", self.ctx.inline_bytes))
            if recs:
                yield record_batch(recs, self.keys, -1 - generator)


ROUTE_ROWS = 65536   # rows routed at once (Spark hands mapInArrow 10,000-row batches by default)


def _coalesced(batches, rows: int):
    """``batches`` (Arrow record batches of one schema) regrouped into batches of about ``rows``."""
    pending, count = [], 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
