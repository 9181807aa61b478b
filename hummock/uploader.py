"""The uploader: turns sealed or spilled imms into staging SSTs off the engine's write path.

RisingWave's Hummock uploads the shared buffer asynchronously: sealing an epoch hands its imms
to an uploader and writers go on with the next epoch while the SSTs are built and uploaded; a
``sync(e)`` waits only for the uploads of epochs ``<= e``. This module is that uploader: one
worker thread runs :class:`UploadTask`\\ s in submission order (FIFO, so the staging list and
the buffer change in the order the engine asked for), calling back into the engine for the
work itself (``run(task)``: build, upload, install).

Invariants:
- a task's imms stay in the shared buffer, visible to reads, until the engine installs the
  task's SSTs in the same locked step that removes the imms (a read sees one or the other);
- every submitted task ends ``done``: installed, failed (``error`` set, the imms handed back to
  the buffer for a later retry) or cancelled by :meth:`Uploader.close` (``error`` is the
  closed-store error), so no waiter hangs;
- the worker thread never holds the engine lock while it builds or uploads.

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

    __slots__ = ("imms", "lowest", "highest", "size", "kind", "done", "error", "submitted", "finished")

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
    """Runs tasks one at a time, in submission order, on a worker thread."""

    def __init__(self, run, name: str = "hummock-uploader"):
        self._run = run                    # run(task): does the work; must end the task
        self._name = name
        self._cond = threading.Condition()
        self._queue: collections.deque[UploadTask] = collections.deque()
        self._thread: threading.Thread | None = None
        self._closed_error: BaseException | None = None

    def submit(self, task: UploadTask) -> None:
        with self._cond:
            if self._closed_error is not None:
                task.error = self._closed_error
                task.done.set()
                return
            self._queue.append(task)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

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

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._queue and self._closed_error is None:
                    self._cond.wait(IDLE_EXIT_SECONDS)
                if not self._queue:
                    self._thread = None
                    return
                task = self._queue.popleft()
            try:
                self._run(task)
            except BaseException as exc:   # the engine ends tasks itself; this is a last resort
                if not task.done.is_set():
                    task.error = exc
                    task.done.set()
