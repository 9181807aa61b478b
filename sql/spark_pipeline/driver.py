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
   DataFrame. Then each stage ``s`` of :func:`~sql.spark_pipeline.fragments.plan_pipeline` runs as
   one Spark job: the records routed to stage ``s`` are shuffled to their partition
   (``partitionBy``), each task runs :func:`~sql.spark_pipeline.task.run_stage_task`, and the
   output is kept with ``localCheckpoint`` (a retried task's rows never mix with another
   attempt's; nothing is recomputed). A stage without input rows is not run.
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
import threading
import time

from hummock.compaction.remote import StoreDescription
from hummock.key import new_epoch
from hummock.killpoints import kill_point
from hummock.task_store import TaskOutput
from hummock.version_codec import encode_version
from relational.progress import read_progress, write_progress
from stream.errors import StreamError

from sql.spark_pipeline import pickling  # noqa: F401  (plans hold interval literals)
from sql.spark_pipeline.fragments import plan_pipeline
from sql.spark_pipeline.task import (DRIVER_GENERATOR, EPOCH_STEP, BatchContext, blobs, fill_row_ids,
                                     run_stage_task, table_chunks)

log = logging.getLogger("sql.spark_pipeline")

#: crash points of a batch (``HUMMOCK_KILL_POINT=name[:N]``, hummock/killpoints.py): crash tests
#: kill the driver between its tasks and its commit, and between its commit and Spark's log
PIPELINE_KILL_POINTS = ("pipeline.before_commit", "pipeline.after_commit")

DEFAULT_ATTEMPTS = 4          # Spark's spark.task.maxFailures default
DEFAULT_IDS_PER_TASK = 256


class BatchFailedError(StreamError):
    """A micro-batch could not be run or committed: nothing of it was published."""


class SourceRef:
    """``Database.builder.sources[name]``: which table a write goes to."""

    def __init__(self, rel):
        self.rel = rel
        self.name = rel.name


class BatchStats:
    """Figures of the last batch: epoch, rows in, stages run, tasks, SSTs, seconds per phase."""

    def __init__(self):
        self.epoch = 0
        self.rows_in = 0
        self.stages_run = 0
        self.fragments_run = 0
        self.ssts = 0
        self.seconds = {}

    def as_dict(self) -> dict:
        return {"epoch": self.epoch, "rows_in": self.rows_in, "stages_run": self.stages_run,
                "fragments_run": self.fragments_run, "ssts": self.ssts,
                "seconds": dict(self.seconds)}


class SparkRuntime:
    """A catalog's stream graph maintained by Spark micro-batches (module docstring)."""

    def __init__(self, store, catalog, plan_of, spark, *, partitions: int | None = None,
                 backfill=frozenset(), attempts: int = DEFAULT_ATTEMPTS, ids_per_task: int = DEFAULT_IDS_PER_TASK):
        self.store, self.catalog, self.spark = store, catalog, spark
        self.plan = plan_pipeline(catalog, plan_of)
        self.partitions = int(partitions or spark.sparkContext.defaultParallelism)
        if not 1 <= self.partitions <= 1000:
            raise StreamError(f"partitions must be in [1, 1000], got {self.partitions}")
        self.attempts, self.ids_per_task = attempts, ids_per_task
        self.sources = {rel.name: SourceRef(rel) for rel in catalog.ordered() if rel.kind == "table"}
        self.actors: dict = {}          # (Database folds per-actor data errors; none here)
        self.backfill = frozenset(backfill)
        self.failure: BaseException | None = None
        self.last = BatchStats()
        self.batches = 0
        self._pending: list = []        # (rel, chunk, ticket)
        self._lock = threading.RLock()
        self._epoch: int | None = None
        self._ticker: threading.Thread | None = None
        self._stop_ticker = threading.Event()
        self._store_description = StoreDescription.of(store._store, store.options)

    # --- the StreamRuntime surface Database uses ----------------------------------------------------

    def start(self) -> int:
        """Reserve the first batch's epoch (DDL writes its catalog records there) and return it."""
        with self._lock:
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
        return {}

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
                if done is not None and batch_id <= done.batch_id:
                    log.info("batch %s of %s is already committed (epoch %s): skipped", batch_id, query, done.epoch)
                    return committed
            pending, self._pending = self._pending, []
            epoch = self._epoch if self._epoch is not None and self._epoch > committed else \
                max(new_epoch(), committed + EPOCH_STEP)
            try:
                self._run(pending, frames, batch_id, query, committed, epoch)
            except BaseException as exc:
                failure = BatchFailedError(f"the micro-batch at epoch {epoch} failed: {type(exc).__name__}: {exc}")
                failure.__cause__ = exc
                self.failure = failure
                raise failure from exc
            for _, _, ticket in pending:
                if ticket is not None:
                    ticket.epoch = epoch
            self.batches += 1
            self.backfill = frozenset()
            self._epoch = max(new_epoch(), epoch + EPOCH_STEP)
            return epoch

    def _run(self, pending, frames, batch_id, query, committed, epoch) -> None:
        began = time.perf_counter()
        stats = BatchStats()
        stats.epoch = epoch
        sc = self.spark.sparkContext
        plan, n = self.plan, self.partitions
        stages = plan.stages
        with self.store.snapshot(committed):   # pins the version the tasks read
            version = encode_version(self.store.version())
            count = (stages + 1) * n * self.attempts * self.ids_per_task
            ids = self.store.reserve_sst_ids(count)
            ctx = BatchContext(self._store_description, self.store.options, version, committed, epoch, n,
                               ids.start, self.ids_per_task, self.attempts, self.backfill,
                               self._backfill_edges())
            records = self._route_on_driver(pending, epoch, stats)
            rdds = [sc.parallelize(records, max(1, min(n, len(records))))] if records else []
            for name, frame in frames.items():
                rdds.append(self._route_frame(name, frame, epoch))
            stats.seconds["route"] = round(time.perf_counter() - began, 4)
            outputs = []
            by_stage = _stage_of_edges(plan)
            inputs = rdds
            for stage in range(1, stages + 1):
                edges = {e for e, s in by_stage.items() if s == stage}
                stage_in = [r.filter(lambda rec, edges=edges: rec[1][0] in edges) for r in inputs]
                forced = self.backfill and any(f.relation in self.backfill for f in plan.fragments_of_stage(stage))
                if not stage_in and not forced:
                    continue
                t0 = time.perf_counter()
                source = sc.union(stage_in) if stage_in else sc.parallelize([], 1)
                shuffled = source.partitionBy(n, _identity)
                out = shuffled.mapPartitionsWithIndex(_StageFn(plan, ctx, stage))
                out.localCheckpoint()   # (marks it in place) the first action materializes it
                metas = out.filter(_is_meta).map(_meta_payload).collect()
                outputs += [TaskOutput.from_bytes(m) for _, m in metas]
                stats.fragments_run += sum(ran for (ran, _), _ in metas)
                if stage == 1 and frames:
                    stats.rows_in += sum(rows for (_, rows), _ in metas)
                blobs_out = out.filter(_is_blob).map(_blob_record)
                inputs = inputs + [blobs_out]
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
            self.store.release_sst_ids(ids)
            stats.ssts = len(infos)
            stats.seconds["commit"] = round(time.perf_counter() - t0, 4)
        stats.seconds["total"] = round(time.perf_counter() - began, 4)
        self.last = stats

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
        """Stage 0 for queued SQL writes: row ids, then ``(partition, (edge, payload))``."""
        by_table: dict = {}
        for rel, chunk, _ in pending:
            by_table.setdefault(rel.name, (rel, []))[1].append(chunk)
        records = []
        for name, (rel, chunks) in by_table.items():
            chunks = fill_row_ids(rel, chunks, DRIVER_GENERATOR, epoch)
            stats.rows_in += sum(c.cardinality for c in chunks)
            edge = self.plan.edges[self.plan.source_edges[name]]
            records += [(p, (e, payload)) for _, p, e, payload in blobs(chunks, edge.dist, self.partitions, edge.id)]
        return records

    def _route_frame(self, name: str, frame, epoch: int):
        """Stage 0 for a DataFrame of table ``name``'s rows: routed by Spark tasks."""
        rel = self.catalog.get(name)
        if rel is None or rel.kind != "table":
            raise StreamError(f"no table {name!r} to feed")
        edge = self.plan.edges[self.plan.source_edges[name]]
        route = _RouteFn(rel, edge, self.partitions, epoch)
        routed = frame.mapInArrow(route, "p int, e int, payload binary")
        return routed.rdd.map(_row_record)


def _stage_of_edges(plan) -> dict:
    return {e.id: plan.fragments[e.consumer].stage for e in plan.edges.values() if not e.local}


def _identity(key):
    return key


def _is_meta(rec) -> bool:
    return rec[0] == "m"


def _meta_payload(rec):
    return rec[2], rec[3]


def _is_blob(rec) -> bool:
    return rec[0] == "b"


def _blob_record(rec):
    return rec[1], (rec[2], rec[3])


def _row_record(row):
    return row[0], (row[1], bytes(row[2]))


class _StageFn:
    """``mapPartitionsWithIndex`` body of one stage (pickled into its tasks)."""

    def __init__(self, plan, ctx, stage):
        self.plan, self.ctx, self.stage = plan, ctx, stage

    def __call__(self, partition, records):
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        return run_stage_task(self.plan, self.ctx, self.stage, partition, attempt, records)


class _RouteFn:
    """``mapInArrow`` body of stage 0: a table's rows -> routed change chunks."""

    def __init__(self, rel, edge, partitions, epoch):
        self.rel, self.edge, self.partitions, self.epoch = rel, edge, partitions, epoch

    def __call__(self, batches):
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        generator = context.partitionId() % DRIVER_GENERATOR if context is not None else 0
        schema = pa.schema([("p", pa.int32()), ("e", pa.int32()), ("payload", pa.binary())])
        for batch in batches:
            if not batch.num_rows:
                continue
            chunks = table_chunks(self.rel, batch, generator, self.epoch)
            recs = list(blobs(chunks, self.edge.dist, self.partitions, self.edge.id))
            if recs:
                yield pa.RecordBatch.from_arrays([pa.array([r[1] for r in recs], pa.int32()),
                                                  pa.array([r[2] for r in recs], pa.int32()),
                                                  pa.array([r[3] for r in recs], pa.binary())], schema=schema)
