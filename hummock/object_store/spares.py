"""Spare temporary files, created ahead of need for the local object store's writer.

Job: creating a file is the one step of an upload whose cost the engine does not control. On
most file systems a create takes 10-30 us, but not everywhere: on an ext4 without a journal
(this project's CI machines) every create scans the inodes of its block group freed in the
last 60-360 s (``recently_deleted()`` in fs/ext4/ialloc.c) -- 0.8 ms a create under ``/tmp``
while other processes churn files there, against 14 us in a quiet directory -- and on network
file systems a create is a round trip. A checkpoint creates two files (its SST and its manifest
delta) on the path of every FLUSH. :class:`SpareFiles` keeps a few empty temporary files open
in each directory the writer uploads to, made by a daemon thread ahead of need (as PostgreSQL
preallocates WAL segments), so taking one is a list pop.

Invariants: a spare is an empty file created exclusively (``O_EXCL``) under a temporary name
of its handle (``.tmp-w-<random>``: ``list`` never shows it), open for writing, in the
directory it is handed out for; each is handed out at most once, and only in the process that
made it (a forked child gets none and never unlinks its parent's); after :meth:`close` none is
handed out and every unused one is closed and unlinked. A directory where a create failed gets
no more spares (the caller's own create then reports the error). A crash leaves the unused
spares as temporary files of a dead writer, which the next writer's open removes
(``cleanup_temp(writer_files=True)``).

Callers: :class:`~hummock.object_store.local.LocalObjectStore`, for a handle holding the
writer lock.
"""

from __future__ import annotations

import os
import threading
import uuid

__all__ = ["SpareFiles"]


class SpareFiles:
    """Up to ``per_directory`` ready temporary files per directory named ``prefix<random>``.
    The thread is woken when a take leaves a directory at half of them or fewer, and then
    tops up every directory: one wake-up per ``per_directory // 2`` takes, not one a take (a
    wake-up costs this process a thread switch and a turn of the GIL on the writer's path)."""

    def __init__(self, prefix: str, per_directory: int = 4):
        self._prefix = prefix
        self._per_directory = per_directory
        self._lock = threading.Lock()
        self._wanted = threading.Condition(self._lock)
        self._ready: dict[str, list] = {}   # directory -> [(fd, path)], refilled by the thread
        self._failed: set[str] = set()
        self._pid = os.getpid()
        self._closed = False
        self._thread: threading.Thread | None = None

    def take(self, directory: str) -> tuple[int, str] | None:
        """A ready ``(fd, path)`` in ``directory``, or None (none ready, closed, or another
        process than the one that made them); a take starts the directory's refill."""
        if os.getpid() != self._pid:
            return None
        with self._lock:
            ready = self._ready.get(directory)
            if self._closed or not ready:
                return None
            spare = ready.pop()
            if len(ready) <= self._per_directory // 2:   # at the low-water mark: refill them all
                self._wanted.notify()
        return spare

    def want(self, directory: str) -> None:
        """Keep ``directory`` (which exists) stocked from now on."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            if self._closed or directory in self._ready:
                return
            self._ready[directory] = []
            if self._thread is None:
                self._thread = threading.Thread(target=self._refill, name="hummock-spares", daemon=True)
                self._thread.start()
            self._wanted.notify()

    def close(self) -> None:
        """Stop refilling; close and unlink every unused spare (in the process that made them)."""
        if os.getpid() != self._pid:
            return   # a forked child: the files are its parent's (and the lock may be held forever)
        with self._lock:
            self._closed = True
            spares = [spare for ready in self._ready.values() for spare in ready]
            self._ready.clear()
            self._wanted.notify_all()
            thread = self._thread
        for fd, path in spares:
            _discard(fd, path)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _short(self) -> str | None:
        for directory, ready in self._ready.items():
            if len(ready) < self._per_directory and directory not in self._failed:
                return directory
        return None

    def _refill(self) -> None:
        while True:
            with self._lock:
                while not self._closed and (directory := self._short()) is None:
                    self._wanted.wait()
                if self._closed:
                    return
            path = os.path.join(directory, f"{self._prefix}{uuid.uuid4().hex}")
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except OSError:
                with self._lock:
                    self._failed.add(directory)
                continue
            with self._lock:
                if not self._closed:
                    self._ready[directory].append((fd, path))
                    continue
            _discard(fd, path)   # closed while it was made
            return


def _discard(fd: int, path: str) -> None:
    try:
        os.close(fd)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass   # a temporary file: the next writer's open removes it
