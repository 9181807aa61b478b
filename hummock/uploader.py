"""The uploader: turns sealed or spilled imms into staging SSTs off the engine's write path.

RisingWave's Hummock uploads the shared buffer asynchronously: sealing an epoch hands its imms
to an uploader and writers go on with the next epoch while the SSTs are built and uploaded; a
``sync(e)`` waits only for the uploads of epochs ``<= e``. This module is that uploader: one
worker thread runs :class:`UploadTask`\\ s in submission order (FIFO, so the staging list and
the buffer change in the order the engine asked for), calling back into the engine for the
work itself (``run(task)``: build, upload, install). A caller that will wait for its task
anyway may reserve it (``submit(task, inline=True)``) and run it on its own thread when its
turn comes (:meth:`Uploader.run_inline`): ``sync`` does, so the FLUSH of a checkpoint per batch
pays no thread hand-off -- nor a wasted wake-up: a reserved task does not wake the worker, and
an inline run's end wakes it only if tasks wait. Which thread runs a task is thus fixed by its
kind, never by timing: seal and spill tasks on the worker, sync tasks on their caller.

Invariants:
- a task's imms stay in the shared buffer, visible to reads, until the engine installs the
  task's SSTs in the same locked step that removes the imms (a read sees one or the other);
- every submitted task ends ``done``: installed, failed (``error`` set, the imms handed back to
  the buffer for a later retry) or cancelled by :meth:`Uploader.close` (``error`` is the
  closed-store error), so no waiter hangs;
- the worker thread never holds the engine lock while it builds or uploads (nor does a caller
  running a task inline: it must hold neither engine lock);
- at most one task runs at a time, on the worker or inline, and tasks start in submission order
  (the worker stops at a reserved task at the head until its caller has run it or released
  it with :meth:`Uploader.release`).

Thread safety: ``submit``, ``close`` and :meth:`UploadTask.wait` may be called from any thread.
The worker exits after ``IDLE_EXIT_SECONDS`` without work and restarts on the next submit, so an
abandoned store does not keep a thread alive.
Callers: :mod:`hummock.storage` only.
"""

from __future__ import annotations

import collections
import threading

__all__ = ["UploadTask", "Uploader", "IDLE_EXIT_SECONDS"]

#: The worker thread exits after this long without a task (and restarts on the next submit).
IDLE_EXIT_SECONDS = 1.0


class UploadTask:
    """The imms of user epochs ``lowest..highest`` (one flush: their SSTs never overlap each
    other). ``done`` is set once it ended; then ``error`` is ``None`` (installed) or the
    exception that ended it."""

    __slots__ = ("imms", "lowest", "highest", "size", "kind", "done", "error", "submitted", "finished",
                 "reserved")

    def __init__(self, imms: list, lowest: int, highest: int, kind: str):
        self.imms = imms
        self.lowest = lowest          # lowest user epoch of the imms
        self.highest = highest        # highest user epoch of the imms
        self.size = sum(imm.size for imm in imms)
        self.kind = kind              # "seal", "sync" or "spill" (stats and the timeline)
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.submitted = 0.0          # perf_counter() at submit and at the end (the timeline)
        self.finished = 0.0
        self.reserved = None          # thread id of the submitter that runs it (Uploader.run_inline)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the task ended; raise its error if it failed."""
        self.done.wait(timeout)
        if self.error is not None:
            raise self.error

    def __repr__(self) -> str:
        state = "running" if not self.done.is_set() else ("failed" if self.error else "done")
        return (f"UploadTask({self.kind}, epochs {self.lowest}..{self.highest}, imms={len(self.imms)}, "
                f"bytes={self.size}, {state})")


class Uploader:
    """Runs tasks one at a time, in submission order, on a worker thread (reserved ones on
    their submitter's)."""

    def __init__(self, run, name: str = "hummock-uploader"):
        self._run = run                    # run(task): does the work; must end the task
        self._name = name
        self._cond = threading.Condition()
        self._queue: collections.deque[UploadTask] = collections.deque()
        self._thread: threading.Thread | None = None
        self._closed_error: BaseException | None = None
        self._running = False              # a task runs (on the worker or inline)

    def submit(self, task: UploadTask, *, inline: bool = False) -> None:
        """Queue ``task``. ``inline``: reserved for the caller, who then calls
        :meth:`run_inline` or :meth:`release` on every path (the worker never runs it else)."""
        with self._cond:
            if self._closed_error is not None:
                task.error = self._closed_error
                task.done.set()
                return
            task.reserved = threading.get_ident() if inline else None
            self._queue.append(task)
            if not inline:   # a reserved task is its caller's: the worker has nothing new to run
                self._wake()

    def run_inline(self, task: UploadTask) -> None:
        """Wait until the reserved ``task`` is at the head of the queue with nothing running,
        then run it on this thread (a task cancelled by ``close`` meanwhile is not run). Then
        ``task`` has ended. REQUIRES: ``task`` was submitted with ``inline=True`` by this
        thread; the caller holds no engine lock (the task takes them as the worker does)."""
        with self._cond:
            while task in self._queue and (self._running or self._queue[0] is not task):
                self._cond.wait()
            if task not in self._queue:
                return   # cancelled by close: ended with its error
            self._queue.popleft()
            self._running = True
        try:
            self._run_task(task)
        finally:
            with self._cond:
                self._running = False
                if self._queue:   # the worker, or another task's inline caller, may go on
                    self._wake()
                elif self._closed_error is not None:
                    self._cond.notify_all()   # close() waits for the running task
                # (else nobody waits: every waiter's condition involves a queued task)

    def release(self, task: UploadTask) -> None:
        """Hand a reserved task that its caller will not run (it stopped early) to the worker."""
        with self._cond:
            if task.reserved is not None and task in self._queue:
                task.reserved = None
                self._wake()
                self._cond.notify_all()

    def _wake(self) -> None:
        """Under the condition: start the worker if there is none, and notify it."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def close(self, error: BaseException) -> None:
        """End queued tasks with ``error`` and wait for the running one to end."""
        with self._cond:
            self._closed_error = error
            cancelled = list(self._queue)
            self._queue.clear()
            thread = self._thread
            self._cond.notify_all()
        for task in cancelled:
            task.error = error
            task.done.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:   # a task run inline by another thread
            while self._running:
                self._cond.wait()

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._running or not self._queue or self._queue[0].reserved is not None:
                    if not self._queue and self._closed_error is not None:
                        self._thread = None
                        return
                    if not self._cond.wait(IDLE_EXIT_SECONDS) and not self._queue and not self._running:
                        self._thread = None   # idle: a later submit starts a new worker
                        return
                task = self._queue.popleft()
                self._running = True
            try:
                self._run_task(task)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _run_task(self, task: UploadTask) -> None:
        try:
            self._run(task)
        except BaseException as exc:   # the engine ends tasks itself; this is a last resort
            if not task.done.is_set():
                task.error = exc
                task.done.set()
