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

Recycled files: a file the writer deletes in a stocked directory is renamed to a temporary
name and kept open here instead (at most ``RECYCLE_PER_DIRECTORY`` a directory holding at most
``RECYCLE_DIRECTORY_BYTES``, each at most ``RECYCLE_MAX_BYTES``), and the next upload there
overwrites it in place and truncates it to what it wrote (RocksDB's ``recycle_log_file_num``,
for every object); its modification time is set at the rename, as a spare's at its create, so
that ``cleanup_temp``'s age rule sees a temporary file of now. Overwriting blocks a
file already has skips the create, the page and block allocation of a new file, and most of its
fsync's metadata work: a 580 KB SST written and fsynced took 127 us of CPU and a 524 us fsync
into a recycled file against 243 us and 806 us into a new one on this project's VM. The engine
deletes an object only when nothing can read it any more (vacuum's rules), and every read opens
the file by name, so a recycled file is never read again under its old name.

Callers: :class:`~hummock.object_store.local.LocalObjectStore`, for a handle holding the
writer lock.
"""

from __future__ import annotations

import os
import threading
import uuid

__all__ = ["SpareFiles", "RECYCLE_MAX_BYTES", "RECYCLE_PER_DIRECTORY", "RECYCLE_DIRECTORY_BYTES"]

#: Largest deleted file kept for reuse: a flush SST's size (larger ones -- compaction outputs --
#: would be cut down by most reuses, which costs what the reuse saves).
RECYCLE_MAX_BYTES = 8 << 20
#: Recycled files kept a directory, and their bytes at most: a compaction frees its inputs --
#: a dozen flush SSTs at the default L0 trigger -- and a manifest rotation dozens of deltas at
#: once, which the next as many uploads reuse.
RECYCLE_PER_DIRECTORY = 32
RECYCLE_DIRECTORY_BYTES = 64 << 20


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
        self._recycled: dict[str, list] = {}   # directory -> [(fd, path, size)] of deleted files to overwrite
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
            spare = self._pop(self._ready, directory)
            if spare is not None and len(self._ready[directory]) <= self._per_directory // 2:
                self._wanted.notify()   # at the low-water mark: refill them all
        return spare

    def _pop(self, stock: dict, directory: str):
        """Under the lock: the last file ``stock`` keeps for ``directory``, or None (closed,
        or none kept)."""
        files = stock.get(directory)
        return None if self._closed or not files else files.pop()

    def accepts_recycled(self, directory: str, size: int = 0) -> bool:
        """Whether :meth:`recycle` would keep a file of ``size`` bytes in ``directory`` now (a
        stocked directory with room), so that a delete elsewhere does not rename in vain."""
        if os.getpid() != self._pid or size > RECYCLE_MAX_BYTES:
            return False
        with self._lock:
            return self._room(directory, size)

    def _room(self, directory: str, size: int) -> bool:
        recycled = self._recycled.get(directory, ())
        return (not self._closed and directory in self._ready and len(recycled) < RECYCLE_PER_DIRECTORY
                and sum(n for _, _, n in recycled) + size <= RECYCLE_DIRECTORY_BYTES)

    def recycle(self, directory: str, fd: int, path: str, size: int) -> bool:
        """Keep ``(fd, path)`` -- a deleted object's file of ``size`` bytes, renamed to a
        temporary name of this handle in ``directory`` and open for writing -- for
        :meth:`take_recycled`; False (the caller discards it) when closed, full, not this
        process's or not a stocked directory."""
        if os.getpid() != self._pid or size > RECYCLE_MAX_BYTES:
            return False
        with self._lock:
            if not self._room(directory, size):
                return False
            self._recycled.setdefault(directory, []).append((fd, path, size))
        return True

    def take_recycled(self, directory: str) -> tuple[int, str] | None:
        """A recycled ``(fd, path)`` in ``directory`` (old content: the caller overwrites it
        from offset 0 and truncates it to what it wrote), or None."""
        if os.getpid() != self._pid:
            return None
        with self._lock:
            recycled = self._pop(self._recycled, directory)
        return None if recycled is None else recycled[:2]

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
        """Stop refilling; close and unlink every unused spare and recycled file (in the process
        that made them)."""
        if os.getpid() != self._pid:
            return   # a forked child: the files are its parent's (and the lock may be held forever)
        with self._lock:
            self._closed = True
            spares = [spare for ready in self._ready.values() for spare in ready]
            spares += [(fd, path) for recycled in self._recycled.values() for fd, path, _ in recycled]
            self._ready.clear()
            self._recycled.clear()
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
