"""Runs compaction tasks for one store: pick, compact, apply as one version delta.

:class:`CompactionManager` owns the in-process runner: a background thread (``compactor="local"``)
that wakes on every commit, asks the picker for a task whose inputs are not busy, merges them
with :func:`~hummock.compaction.core.compact` outside the store's lock, and applies the result
as one ``VersionDelta`` under the lock. A task whose inputs changed meanwhile (conflict) is
discarded; its outputs are orphans that vacuum removes. ``compact_all`` runs tasks in the
caller's thread until the picker has nothing left. With ``compactor="spark"`` the same thread
picks tasks and applies results, but each rewrite runs as one Spark job
(:class:`~hummock.compaction.spark.SparkRunner`; moves stay metadata-only here); with
``compaction_workers`` >= 1 (local or S3 stores) it runs in worker processes instead
(:class:`~hummock.compaction.pool.PoolRunner`), leaving the interpreter lock to readers and
writers.

Warm-up: the background thread starts the worker processes as the store opens, not when the
first task needs them: a worker's start (an interpreter importing the engine and numpy) takes
~0.4 s, long enough for a writer that checkpoints every few ms to fill L0 to the stall point
and wait 150-250 ms at its first compaction. A writer that writes at once after the open
still waits ~100 ms; one opened after any other writer of the process, not at all
(docs/compaction.md "Warm-up"). The pool is shared by the process's stores, so only the first
writer's open starts one; a reader starts none.

Watermark: the lowest epoch a snapshot pins, else ``max_committed_epoch``: every version a
reader at or above it can see survives; what table watermarks and truncations hide at it is
dropped (``HummockStorage._compaction_hide``, passed to every runner).

The manager, like the pool and Spark runners, talks to the engine only through a
:class:`~hummock.compaction.host.CompactionHost` (version, watermark, input readers, ids, apply).

Thread safety: the host's lock guards versions and ids; tasks run concurrently with reads and
writes. Callers: :class:`hummock.storage.HummockStorage` only.
"""

from __future__ import annotations

import logging
import threading
import time

from hummock.compaction.core import CompactionStats, compact
from hummock.compaction.picker import L0_STOP_FACTOR, PickerConfig, pick, pick_all, pick_bottom_rewrite, pick_range
from hummock.compaction.pool import PoolRunner, can_use_workers
from hummock.errors import HummockError
from hummock.iterators import SstRun
from hummock.killpoints import kill_point
from hummock.version import KIND_MOVE, VersionDelta

log = logging.getLogger(__name__)

#: Tasks in a row that conflicted with the version (each re-picked at once) before the runner
#: treats it as a failure: a task that can never apply must not be re-run forever.
CONFLICTS_IN_A_ROW = 20


class CompactionManager:
    def __init__(self, host, config: PickerConfig | None = None):
        self._host = host            # a CompactionHost (hummock/compaction/host.py)
        self.config = config or PickerConfig()
        self._busy: set[int] = set()
        self._cursor: dict = {}
        self._wake = host.condition()
        self._stopping = False
        self._thread = None
        self._spark = None
        self._pool = None   # a PoolRunner when compaction_workers > 0 and workers can open the store
        workers = host.options.compaction_workers
        if workers and host.options.compactor == "local" and can_use_workers(host.store):
            self._pool = PoolRunner(host, workers)   # the Spark runner (compactor="spark"), made on first use
        self.stats = {"tasks": 0, "moves": 0, "conflicts": 0, "failures": 0, "input_bytes": 0,
                      "output_bytes": 0, "dropped_versions": 0, "dropped_tombstones": 0,
                      "dropped_hidden": 0}

    # --- background runner ---------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="hummock-compactor", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """Called under the store's lock after a version change."""
        self._wake.notify_all()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        if self._pool is not None:   # here, not on the opening thread: a spawn takes a few ms
            try:
                self._pool.warm()
            except Exception:   # the first task starts the pool again and fails as a task does
                log.warning("could not start the compaction workers ahead of the first task", exc_info=True)
        failed_in_a_row = conflicts = 0
        while True:
            with self._wake:
                if self._stopping:
                    return
                task = pick(self._host.version(), self.config, frozenset(self._busy), self._cursor)
                if task is None:
                    self._wake.wait(timeout=5.0)
                    continue
                self._busy |= task.input_ids
            back_off = False
            try:
                if self._run(task, background=self._background(task)):
                    failed_in_a_row = conflicts = 0
                else:   # a conflict (the version moved): picked again at once, unless it keeps on
                    conflicts += 1
                    if conflicts >= CONFLICTS_IN_A_ROW:
                        conflicts, failed_in_a_row, back_off = 0, failed_in_a_row + 1, True
                        log.error("%d compaction tasks in a row conflicted with the version, the last "
                                  "(%s) against version %d; backing off", CONFLICTS_IN_A_ROW, task.reason,
                                  self._host.version().id)
            except Exception:  # a failed task leaves the version untouched
                self.stats["failures"] += 1
                failed_in_a_row, conflicts, back_off = failed_in_a_row + 1, 0, True
                log.exception("compaction task failed; the version is unchanged")
            finally:
                with self._wake:
                    self._busy -= task.input_ids
                    self._wake.notify_all()
            # after a failure back off 1 s, 2 s, ... 60 s: a retry reserves ids (on Spark: runs a job)
            if back_off and self._pause(min(60.0, 2.0 ** (failed_in_a_row - 1))):
                return

    def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` (commits do not cut it short) unless stopped; True if stopping."""
        deadline = time.monotonic() + seconds
        with self._wake:
            while not self._stopping and deadline - time.monotonic() > 0:
                self._wake.wait(timeout=deadline - time.monotonic())
            return self._stopping

    # --- running a task ---------------------------------------------------------------------

    def compact_all(self) -> int:
        """Compact until every SST is in the last level; returns the number of tasks applied."""
        return self._run_until_done(pick_all)

    def compact_pending(self) -> int:
        """Run the tasks the background loop would pick (the picker's triggers) until it picks
        none; returns the number of tasks applied."""
        return self._run_until_done(lambda version, busy: pick(version, self.config, busy, self._cursor))

    def compact_range(self, low: bytes, high: bytes | None) -> int:
        """Move every SST holding user keys in ``[low, high)`` to the last level, then rewrite the
        last level's SSTs there that hold tombstones; returns the number of tasks applied."""
        applied = self._run_until_done(lambda version, busy: pick_range(version, low, high, busy))
        rewritten = []   # rewrite each bottom SST once: pinned snapshots may keep its tombstones

        def bottom_once(version, busy):
            if rewritten:
                return None
            task = pick_bottom_rewrite(version, low, high, busy)
            if task is not None:
                rewritten.append(task)
            return task
        return applied + self._run_until_done(bottom_once)

    def _run_until_done(self, pick_task) -> int:
        """Run ``pick_task(version, busy)``'s tasks in this thread until it has none and no
        background task holds inputs; returns the number applied. Raises HummockError after
        ``CONFLICTS_IN_A_ROW`` tasks in a row conflicted with the version (a task that cannot
        apply would else be picked and run again forever)."""
        applied = conflicts = 0
        while True:
            with self._wake:
                task = pick_task(self._host.version(), frozenset(self._busy))
                if task is None:
                    if not self._busy:
                        return applied
                    self._wake.wait(timeout=1.0)   # a background task holds inputs: wait for it
                    continue
                self._busy |= task.input_ids
            try:
                done = self._run(task)
            finally:
                with self._wake:
                    self._busy -= task.input_ids
                    self._wake.notify_all()
            applied += done
            conflicts = 0 if done else conflicts + 1
            if conflicts >= CONFLICTS_IN_A_ROW:
                raise HummockError(
                    f"{conflicts} compaction tasks in a row conflicted with the version, the last "
                    f"({task.reason}; input SSTs {sorted(task.input_ids)[:8]}) against version "
                    f"{self._host.version().id}: the tasks picked cannot apply")

    def _background(self, task) -> bool:
        """Whether a task the loop picked may run at the workers' background priority
        (``hummock.compaction.pool``): yes unless L0 already holds half the sub-levels at
        which writers stall -- compaction is then behind, and a writer will soon wait on it."""
        return len(self._host.version().l0) < self.config.l0_trigger * L0_STOP_FACTOR // 2

    def _run(self, task, *, background: bool = False) -> int:
        host = self._host
        if task.kind == "move":
            return self._apply(lambda v: VersionDelta.move(v, task.input_ids, task.target_level))
        stats = CompactionStats()
        if host.options.compactor == "spark":
            return self._spark_runner().run(
                task, stats, lambda outputs, watermark: self._commit(task, outputs, stats, watermark))
        if self._pool is not None:
            return self._pool.run(
                task, stats, lambda outputs, watermark: self._commit(task, outputs, stats, watermark),
                background=background)
        watermark = host.watermark()
        hide = host.hide(watermark)
        runs = [SstRun([host.input_reader(info) for info in run], None, None) for run in task.runs]
        handed_out = []

        def new_sst_id():
            sst_id = host.new_sst_id()
            handed_out.append(sst_id)
            return sst_id
        applied = 0
        try:
            outputs = compact(runs, watermark, task.bottom, host.store, host.builder_options(),
                              host.options.target_sst_size, new_sst_id, stats, hide)
            kill_point("compaction.after_outputs")
            applied = self._commit(task, outputs, stats, watermark)
        finally:
            if not applied:   # failed or discarded: its outputs are orphans for the next vacuum
                host.release_ids(handed_out)   # (kept while a delta naming them is pending)
        return applied

    def _spark_runner(self):
        if self._spark is None:
            from hummock.compaction.spark import SparkRunner   # pyspark itself loads on the first job

            self._spark = SparkRunner(self._host)
        return self._spark

    def _commit(self, task, outputs, stats: CompactionStats, watermark: int) -> int:
        """Apply a compaction's outputs as one delta; 1 if applied, 0 if discarded. The delta
        raises the version's safe_epoch to the ``watermark`` the merge used."""
        applied = self._apply(lambda v: VersionDelta.compaction(
            v, task.input_ids, {task.target_level: outputs}, watermark=watermark))
        if applied:   # the one place a task's counters reach the manager's stats
            self._host.refill_cache([info for run in task.runs for info in run], outputs)
            self.stats["input_bytes"] += task.input_bytes
            self.stats["output_bytes"] += sum(info.file_size for info in outputs)
            self.stats["dropped_versions"] += stats.dropped_versions
            self.stats["dropped_tombstones"] += stats.dropped_tombstones
            self.stats["dropped_hidden"] += stats.dropped_hidden
        return applied

    def _apply(self, make_delta) -> int:
        """Apply one delta built against the current version; 1 if applied, 0 on a conflict."""
        delta = self._host.apply(make_delta)
        if delta is None:
            self.stats["conflicts"] += 1
            return 0
        kill_point("compaction.after_install")
        self.stats["tasks"] += 1
        if delta.kind == KIND_MOVE:
            self.stats["moves"] += 1
        self._host.after_apply()
        return 1
