"""The PySpark compaction runner (``compactor="spark"``): one compaction task as one Spark job.

The driver (the process holding the store) cuts a task into key-range splits
(:mod:`hummock.compaction.splits`: points from the inputs' block metas, about equal bytes each,
never between versions of one user key), reserves SST ids for all of them in one
``reserve_ids`` version delta, and runs one Spark partition per split. Each executor task opens
the same object store from a picklable :class:`StoreDescription` (URL + S3 settings), opens the
input SSTs with a small private block cache, runs the same
:func:`~hummock.compaction.core.compact` over its range and returns its ``SstableInfo`` s. The
driver gathers them in key order; the caller applies them as ONE version delta.

Invariants:
- SST ids are never reused: split ``k``'s attempt ``a`` names its outputs from its own slice of
  the reserved block (``ids_per_attempt`` ids per attempt, ``attempts`` slices per split), so
  a retried or speculative attempt never rewrites an object another attempt wrote. An attempt
  that runs out of ids fails (and with it the job).
- A failed or killed job raises :class:`SparkJobError` in the driver before anything is
  applied; the version is unchanged and the job's outputs are orphans. While a job runs, its
  reserved ids are "unsettled" (vacuum spares them); afterwards every id not in the version is
  an orphan that the next vacuum deletes.
- pyspark is imported only inside this module's functions: importing hummock never loads it.
- One SparkSession per process: an existing one (e.g. made by the application or a test
  fixture) is reused, whatever its master; otherwise one is made from ``spark_master``.

Only stores every executor can reach make sense: S3, or a local directory in local mode (or on
a file system mounted at the same path on every node). The memory store is refused at open.

Callers: :class:`~hummock.compaction.manager.CompactionManager` (through :class:`SparkRunner`),
benchmarks (:func:`run_task_on_spark`), tests.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import os
import re
import sys
import tempfile
import threading
import time
import uuid

from hummock.compaction.core import CompactionStats
from hummock.compaction.remote import StoreDescription, compact_split
from hummock.compaction.splits import plan_splits
from hummock.errors import HummockError, InvalidArgumentError
from hummock.sstable.meta import SstableInfo

log = logging.getLogger(__name__)

#: Test hook, read by the driver when it builds a job and shipped to the executors:
#: ``(split_index, outputs)`` makes that split's executor task raise once it has finished
#: ``outputs`` SSTs (or at its end if it makes fewer). ``None`` (always, outside tests): off.
FAIL_SPLIT_FOR_TESTS: tuple[int, int] | None = None

EXECUTOR_BLOCK_CACHE_BYTES = 8 << 20   # each executor task's private block cache
IDLE_WAIT_SECONDS = 30.0               # after a failed job, how long to wait for its tasks to stop

_session_lock = threading.Lock()
_session = None                        # the SparkSession this process uses
_session_hooks: list = []              # callables run on that session (on_session)


class SparkJobError(HummockError, RuntimeError):
    """A Spark compaction job failed or was killed; nothing was applied."""


# --- where the store is -----------------------------------------------------------------------

def check_spark_store(url) -> None:
    """Raise InvalidArgumentError if the store ``url`` (or ObjectStore) names cannot be used with
    ``compactor="spark"``: the memory store, or a store object other than local or S3."""
    from hummock.object_store import ObjectStore

    if isinstance(url, ObjectStore):
        StoreDescription.of(url)
    elif isinstance(url, str) and url.split("://", 1)[0].lower() == "memory" and "://" in url:
        raise InvalidArgumentError(
            "compactor='spark' cannot use a memory:// store: Spark executors run in other "
            "processes and cannot see it; use a local directory or s3://, or compactor='local'")


# --- the session ----------------------------------------------------------------------------

def spark_session(master: str = "local[*]"):
    """``(session, startup_seconds)``: this process's SparkSession, made on first use (then
    ``startup_seconds`` covers the JVM, the context and starting the Python workers) or reused
    (0.0). An active session made elsewhere is reused as is."""
    global _session
    with _session_lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            return _session, 0.0
        started = time.perf_counter()
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
        if session is None or session.sparkContext._jsc is None:
            session = _new_session(SparkSession, master)
        sc = session.sparkContext
        sc.parallelize(range(sc.defaultParallelism), sc.defaultParallelism).foreach(_warm_up)
        _session = session
        for hook in _session_hooks:
            hook(session)
        return session, time.perf_counter() - started


def on_session(hook) -> None:
    """Run ``hook(session)`` on the session this module uses: now if it exists, else once it is
    made or adopted. Upper layers register with it (``relational/spark.py`` registers its data
    source) without this layer knowing them."""
    with _session_lock:
        _session_hooks.append(hook)
        session = _session if _session is not None and _session.sparkContext._jsc is not None else None
    if session is not None:
        hook(session)


def _new_session(SparkSession, master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.master(master).appName("hummock-compaction")
               .config("spark.api.mode", "classic")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.python.worker.reuse", "true"))
    if "SPARK_CONF_DIR" not in os.environ:     # quiet from the start, not only after setLogLevel
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log_config()}")
    if "HUMMOCK_PURE_PYTHON" in os.environ:   # executors use the driver's choice of twins
        builder = builder.config("spark.executorEnv.HUMMOCK_PURE_PYTHON", os.environ["HUMMOCK_PURE_PYTHON"])
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


def _log_config() -> str:
    """A log4j2 file for the driver JVM: errors only, to stderr (a temp file, removed at exit).
    The two named loggers are the ones Spark compares with the root logger before printing
    "Setting default log level" (PySpark's gateway; the Scala shell)."""
    fd, path = tempfile.mkstemp(prefix="hummock-spark-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2)
    atexit.register(os.remove, path)
    return path


def _warm_up(_) -> None:
    """Executor side: import the runner (and hummock) once per Python worker."""
    import hummock.compaction.spark  # noqa: F401


# --- the job ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Job:
    """What every executor task of one job shares (pickled into each task)."""

    store: StoreDescription
    watermark: int
    bottom: bool
    builder_options: object
    target_sst_size: int
    attempts: int
    fail_hook: tuple | None
    hide: dict | None = None      # {table_id: resolved table watermark} at the watermark


@dataclasses.dataclass(frozen=True)
class _Work:
    """One split and the ids it may use: attempt ``a`` uses
    ``[first_id + a * ids_per_attempt, first_id + (a + 1) * ids_per_attempt)``."""

    split: object
    first_id: int
    ids_per_attempt: int


@dataclasses.dataclass
class SparkJobResult:
    """The outputs of one Spark compaction job (key order) and what it cost."""

    outputs: list
    stats: CompactionStats
    splits: int
    reserved: range                  # every id reserved for the job
    session_seconds: float           # starting the session (0.0 when it was reused)
    plan_seconds: float              # reading block metas, choosing splits, reserving ids
    job_seconds: float               # plan + the Spark job, session start-up excluded
    split_seconds: list              # per split, the executor's time in compact(), key order


def run_task_on_spark(store, task, watermark: int, options, reserve_ids, *, block_metas=None,
                      max_splits: int | None = None, builder_options=None,
                      hide: dict | None = None) -> SparkJobResult:
    """Run ``task`` (a ``CompactionTask`` of kind "compact") as one Spark job; return its outputs.

    ``store``: a :class:`StoreDescription` or a store URL (local path or ``s3://``, opened with
    ``options.s3_options()``). ``watermark``: the lowest epoch readers may still read at.
    ``options``: the store's ``StorageOptions`` (builder settings, ``target_sst_size``,
    ``spark_master``); ``builder_options`` overrides ``options.sst_builder_options()`` (the engine
    passes its own, which carry the version's declared prefix lengths). ``reserve_ids(count)`` must persist a reservation of ``count`` fresh SST
    ids and return them as a ``range`` before any is used. ``block_metas(info)`` returns an
    input SST's block metas (default: read from the store). ``max_splits`` defaults to Spark's
    default parallelism (splits are balanced by bytes; each extra split re-opens the inputs:
    on local[2] 4 splits took 0.98 s where 2 took 0.72-0.78 s), capped so a split holds at least
    a quarter of a target SST. ``hide``: what table watermarks hide at ``watermark``
    (``HummockStorage._compaction_hide``), dropped too.

    Nothing is applied to any version. Raises :class:`SparkJobError` if the job fails (its
    outputs are then orphans); the ids in ``reserve_ids``' range that are not in the returned
    outputs never hold live data.
    """
    if task.kind != "compact":
        raise InvalidArgumentError(f"only 'compact' tasks run on Spark, not {task.kind!r}")
    if not isinstance(store, StoreDescription):
        store = StoreDescription(os.fspath(store), tuple(sorted(options.s3_options().items())))
    session, session_seconds = spark_session(options.spark_master)
    sc = session.sparkContext
    started = time.perf_counter()
    if max_splits is None:
        max_splits = max(1, min(sc.defaultParallelism, task.input_bytes // max(1, options.target_sst_size // 4)))
    splits = _plan(store, task, block_metas, max_splits)
    attempts = _max_attempts(sc)
    quotas = [2 * -(-split.input_bytes // options.target_sst_size) + len(split.table_ids) + 2 for split in splits]
    reserved = reserve_ids(sum(quotas) * attempts)
    work, next_id = [], reserved.start
    for split, quota in zip(splits, quotas):
        work.append(_Work(split, next_id, quota))
        next_id += quota * attempts
    if next_id > reserved.stop:
        raise InvalidArgumentError(f"reserve_ids returned {len(reserved)} ids, {next_id - reserved.start} needed")
    if builder_options is None:
        builder_options = options.sst_builder_options()
    job = _Job(store, watermark, task.bottom, builder_options, options.target_sst_size, attempts,
               FAIL_SPLIT_FOR_TESTS, hide or None)
    plan_seconds = time.perf_counter() - started
    results = _run_job(sc, job, work, task)
    stats, outputs = CompactionStats(), []
    for infos, split_stats, _ in results:    # partition order is key order
        outputs.extend(SstableInfo.from_dict(d) for d in infos)
        for field in dataclasses.fields(CompactionStats):
            setattr(stats, field.name, getattr(stats, field.name) + split_stats[field.name])
    return SparkJobResult(outputs, stats, len(splits), reserved, session_seconds, plan_seconds,
                          time.perf_counter() - started, [seconds for _, _, seconds in results])


def _plan(store: StoreDescription, task, block_metas, max_splits: int) -> list:
    """The task's splits. A block weighs the larger of its stored and decompressed length, so the
    id quotas also cover outputs, which are cut by (partly uncompressed) size."""
    opened = None
    if block_metas is None:
        from hummock.sstable.reader import Sstable

        opened = store.open()
        block_metas = lambda info: Sstable.open(opened, info).meta.blocks  # noqa: E731
    try:
        return plan_splits(task.runs, lambda info: [(m.first_key, max(m.stored_len, m.content_len))
                                                    for m in block_metas(info)], max_splits)
    finally:
        if opened is not None:
            opened.close()


def _max_attempts(sc) -> int:
    """Attempts Spark may make per task: ``local[N,F]`` -> F, plain local -> 1, else
    ``spark.task.maxFailures``; plus speculation's extra copy when it is on."""
    master = sc.master
    conf = sc.getConf()
    found = re.fullmatch(r"local\[\s*(?:\d+|\*)\s*,\s*(\d+)\s*\]", master)
    if found:
        attempts = int(found.group(1))
    elif master == "local" or master.startswith("local["):
        attempts = 1
    else:
        attempts = int(conf.get("spark.task.maxFailures", "4"))
    if conf.get("spark.speculation", "false").lower() == "true":
        attempts += 1
    return max(1, attempts)


def _run_job(sc, job: _Job, work: list, task) -> list:
    group = f"hummock-compaction-{uuid.uuid4().hex[:12]}"
    sc.setJobGroup(group, f"compact {len(task.input_ids)} SSTs into L{task.target_level}", interruptOnCancel=True)
    try:
        return sc.parallelize(work, len(work)).map(functools.partial(_compact_split, job)).collect()
    except BaseException as exc:   # failed, or interrupted in the driver: stop what still runs
        with contextlib.suppress(Exception):
            sc.cancelJobGroup(group)
            _wait_until_idle(sc, group)
        if not isinstance(exc, Exception):
            raise
        raise SparkJobError(f"Spark compaction job into L{task.target_level} failed: {_root_cause(exc)}") from exc
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


def _wait_until_idle(sc, group: str) -> None:
    """Best effort: wait until no task of ``group``'s jobs still runs (so none uploads later)."""
    tracker = sc.statusTracker()
    deadline = time.monotonic() + IDLE_WAIT_SECONDS
    while time.monotonic() < deadline:
        active = 0
        for job_id in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job_id)
            for stage_id in (info.stageIds if info else ()):
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage else 0
        if not active:
            return
        time.sleep(0.05)


def _root_cause(exc: BaseException) -> str:
    """The last Python ``module.SomeError: message`` line of a (Java-wrapped) traceback, else the
    first line of the text."""
    text = str(exc)
    found = re.findall(r"^([\w.]*?)(\w+(?:Error|Exception)): (.*)$", text, re.MULTILINE)
    python = [f"{name}: {message}" for module, name, message in found
              if not module.startswith(("org.", "java.", "scala.", "py4j.", "pyspark."))
              and name not in ("PythonException", "Py4JJavaError")]
    lines = text.strip().splitlines()
    return python[-1] if python else lines[0][:500] if lines else type(exc).__name__


# --- executor side ------------------------------------------------------------------------------

def _compact_split(job: _Job, work: _Work):
    """Executor task: compact one split; return ``(info dicts, stats dict, seconds in compact)``."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else 0
    split = work.split
    if attempt >= job.attempts:
        raise SparkJobError(f"split {split.index}: attempt {attempt} has no reserved SST ids "
                            f"({job.attempts} attempts were planned)")
    first = work.first_id + attempt * work.ids_per_attempt
    fail_after = job.fail_hook[1] if job.fail_hook and job.fail_hook[0] == split.index else None
    return compact_split(job.store, split, range(first, first + work.ids_per_attempt), job.watermark, job.bottom,
                         job.builder_options, job.target_sst_size, EXECUTOR_BLOCK_CACHE_BYTES,
                         error=SparkJobError, fail_after=fail_after, hide=job.hide)


# --- the manager's runner -----------------------------------------------------------------------

class SparkRunner:
    """Runs one store's compaction tasks on Spark for :class:`CompactionManager`."""

    def __init__(self, host):
        self._host = host            # a CompactionHost (hummock/compaction/host.py)
        self._store = StoreDescription.of(host.store, host.options)

    def run(self, task, stats: CompactionStats, commit) -> int:
        """Compact ``task`` on Spark, then ``commit(outputs, watermark)`` (returns 1 if applied,
        0 if discarded). Raises SparkJobError if the job fails: nothing is applied."""
        host = self._host
        reserved: list[range] = []

        def reserve(count: int) -> range:
            ids = host.reserve_ids(count)   # held (vacuum spares them) while the job runs
            reserved.append(ids)
            return ids

        watermark = host.watermark()
        hide = host.hide(watermark)
        readers = {info.sst_id: host.input_reader(info, cached=True) for run in task.runs for info in run}
        try:
            result = run_task_on_spark(self._store, task, watermark, host.options, reserve,
                                       block_metas=lambda info: readers[info.sst_id].sst.meta.blocks,
                                       builder_options=host.builder_options(), hide=hide)
            stats.add(result.stats)
            outputs = {info.sst_id for info in result.outputs}
            for ids in reserved:     # anything a failed attempt wrote may be vacuumed now
                host.release_ids([i for i in ids if i not in outputs])
            return commit(result.outputs, watermark)
        finally:   # applied outputs are in the version; the rest are orphans (unless pending)
            for ids in reserved:
                host.release_ids(ids)
