"""The object store on a local directory: the default backend (DESIGN.md section 4).

Layout: the object ``a/b/c`` is the file ``<root>/a/b/c``; directories are created on demand and
never removed. Crash safety: every object is written to ``<dir>/.tmp-<random>`` (``.tmp-w-<random>``
once the handle holds the writer lock) in its final
directory, fsynced, renamed over the final name with ``os.replace`` (atomic on POSIX), and then
the directory is fsynced, so after a crash a path holds either its old object or its complete
new one, never a half-written file. Temporary files are invisible (``list`` skips every name
starting with '.', and object paths can never start a segment with '.'); leftovers of a crash
are removed by :meth:`LocalObjectStore.cleanup_temp` (a dead writer's at once when the next writer
opens: its lock proves no live writer owns them).

Limits: an object path may not be a directory of another (``a`` and ``a/b`` cannot coexist; the
second upload raises ObjectStoreError); on case-insensitive file systems paths differing only
in case collide. The engine builds paths from ids, so neither happens there. Deletes are not
fsynced: after a crash a deleted object may reappear, which vacuum tolerates.

Scratch objects (``upload_scratch``, the Spark pipeline's exchange files): written and renamed the
same way but never fsynced, so a crash may leave them missing or empty; nothing durable refers
to them.

Atomic create (``upload_if_absent``): the temporary file is written and fsynced as above, then
hard-linked to the final name with ``os.link``, which fails with ``EEXIST`` if the name exists
(the POSIX atomic create), and unlinked; the directory is fsynced. REQUIRES a file system with
hard links (every local POSIX one; not some FUSE or SMB mounts, where it raises ObjectStoreError).

Deferred durability (``deferred_durability()``, base.py invariant 4): a streaming upload the
thread starts inside it is written to its temporary file and renamed into place at ``finish``
without any fsync -- readers see it whole at once, as ever -- and its file is remembered. The
next ``upload_if_absent`` is the barrier: it fsyncs every remembered file and their directories
*concurrently* with its own temporary file (threads of a small pool; a journalling file system
commits the lot in one journal commit), and only then links its object. So a checkpoint (one
flush SST, one manifest delta) waits for two rounds of fsyncs instead of four: {SST, SST
directory, delta temp} and {manifest directory} (docs/performance.md has the figures). A crash
before the barrier may leave such an object missing or partial under its final name: the engine
uses it only for SSTs under fresh ids, which nothing durable names before that barrier; vacuum
removes them as orphans. A remembered file deleted before the barrier (an orphan vacuumed) is
skipped. A remembered file whose fsync (or its directory's) failed is lost for good: Linux
reports a writeback error to one fsync only and a retry returns success although the data never
reached the disk, so every later barrier of the handle fails (a delta naming it must never
become durable; before deferral the SST's own fsync failed its flush instead). Each deferred
file's write-back is started as it is published (``writeback_hint``: ``sync_file_range``, a
hint that neither waits nor touches the error state; ``writeback.py``), so the barrier's fsync
finds most of its pages written. The file's own fsync starts on the pool once the same handle
opens its next deferred upload (``early_fsync``, on by default): it runs while the next SST of
the flush is built, and the barrier waits for it instead of starting one -- the directories it
still fsyncs itself, after every rename. The last file before a barrier gets no early fsync: the
barrier comes right after it, and a pool thread started at its publication only competed for
the interpreter lock while the engine prepared the delta. docs/performance.md has the figures.
An early fsync that fails loses the file exactly as the barrier's would. A file has one fsync
in flight at a time (``_early``: its early fsync, or the one a barrier started), and every
barrier that needs the file waits for that one, so an error it reports reaches all of them.
A deferred file is never recycled while its durability is pending (``_recycle``), so the
error of a deleted file's fsync belongs to no live object and the barrier may skip it.

Directories (fsync errors): an entry -- a created file, a rename, a link, a new directory -- is
durable once its directory is fsynced. A directory whose fsync fails is lost for the handle
(``_lost_dirs``) for the reason a file is: every later upload into it or below it, and every
barrier whose files live there, fails (scratch uploads, never fsynced, excepted). An ``open``
of the directory that fails (``_OPEN_ERRNOS``: no such directory, no permission, out of
descriptors) ran no fsync and loses nothing. A directory fsync counts as a success once every
fsync of that directory still running when it ended has ended without failing
(``_fsync_dir_tracked``): one of those may have taken the error covering this caller's entry.
On a directory's first use the handle fsyncs the entry of every level below the root into its
parent (levels a racing thread or a crashed process made without that fsync included; nothing
above the root); the store fsyncs the root levels it creates (``_make_root``; a parent it may
not read stays unsynced, as before). All of this is per handle: an error another handle or
process took -- a failed root creation retried by a new handle included -- cannot be seen.
A forked child gets fresh locks and no fsync in flight (``_reset_after_fork``).

Spare files: a handle holding the writer lock takes each temporary file from a few it keeps
ready per directory, created ahead by a thread (``spares.py`` says why: a create can cost 0.8
ms here); the file is the same either way, and unused spares go at ``close``. Recycled files:
the same handle's deletes keep a few deleted files per directory it uploads to (renamed to
temporary names) and its next uploads there overwrite them and truncate them to size at
``finish``, before any fsync or rename (``spares.py``, "Recycled files"); a crash leaves them
as a dead writer's temporary files.

Writer lock hook: :meth:`LocalObjectStore.lock_file_path` is ``<root>/.writer-lock``, outside
the object namespace (no object path starts a segment with '.', ``list`` skips it and
``cleanup_temp`` only removes ``.tmp-`` names); ``hummock.manifest.WriterLock`` flocks it.

Thread and process safety: any number of threads or processes may use one root; concurrent
uploads of one path leave one of the complete objects (the last rename wins).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import functools
import os
import stat
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor

from hummock.errors import InvalidArgumentError
from hummock.killpoints import kill_point
from hummock.object_store.base import (
    MAX_PATH_LEN, ObjectMeta, ObjectNotFoundError, ObjectStore, ObjectStoreError, StreamingUploader,
    check_text, resolve_range,
)
from hummock.object_store.locks import FlockLock
from hummock.object_store.spares import SpareFiles
from hummock.object_store.writeback import start_writeback

__all__ = ["LocalObjectStore", "TEMP_PREFIX", "WRITER_TEMP_TAG", "LOCK_FILE_NAME", "MAX_ROOT_BYTES"]

TEMP_PREFIX = ".tmp-"
WRITER_TEMP_TAG = "w-"   # after TEMP_PREFIX: written by a handle holding the writer lock
LOCK_FILE_NAME = ".writer-lock"  # in the root; not an object (segments never start with '.')
PATH_MAX = 4096  # Linux's limit on a path handed to the kernel
# the root, a '/', the longest object path and a temporary file's name fit in PATH_MAX
MAX_ROOT_BYTES = PATH_MAX - 1 - MAX_PATH_LEN - 64
# errors meaning "no object at this path": missing, a directory, or a file used as a directory
_NOT_FOUND = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(file: str) -> None:
    """fsync the file at ``file`` (any descriptor of the inode flushes its data); a file
    deleted since (an orphan vacuum removed) needs nothing."""
    try:
        fd = os.open(file, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: ``os.open`` failures of a directory to fsync: no fsync ran, so no write-back error was taken
_OPEN_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EMFILE,
                          errno.ENFILE, errno.ELOOP, errno.ENAMETOOLONG})
_LIVE_STORES = weakref.WeakSet()   # every LocalObjectStore of the process (``_reset_after_fork``)


def _reset_stores_after_fork() -> None:
    for store in list(_LIVE_STORES):
        store._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_stores_after_fork)

_FSYNC_THREADS = 4
_fsync_pool_state: tuple[int, ThreadPoolExecutor] | None = None   # (pid that made it, pool)
_fsync_pool_lock = threading.Lock()


def _fsync_pool() -> ThreadPoolExecutor:
    """The process's pool for concurrent fsyncs (made again in a forked child, which inherits
    the parent's pool object but none of its threads)."""
    global _fsync_pool_state
    with _fsync_pool_lock:
        if _fsync_pool_state is None or _fsync_pool_state[0] != os.getpid():
            _fsync_pool_state = (os.getpid(), ThreadPoolExecutor(_FSYNC_THREADS, thread_name_prefix="hummock-fsync"))
        return _fsync_pool_state[1]


def _fsync_concurrently(jobs: list) -> None:
    """Run every fsync job at once (the first on this thread, the others on the pool) and wait
    for all; raise the first OSError after every job ended (none is left running)."""
    futures = [_fsync_pool().submit(job) for job in jobs[1:]]
    error = None
    try:
        jobs[0]()
    except OSError as exc:
        error = exc
    for future in futures:
        try:
            future.result()
        except OSError as exc:
            error = error or exc
    if error is not None:
        raise error


def _io_error(action: str, path: str, exc: OSError) -> ObjectStoreError:
    return ObjectStoreError(f"cannot {action} object {path!r}: {exc}", path=path)


class LocalObjectStore(ObjectStore):
    """Objects as files under ``root`` (created, with its parents, if missing)."""

    #: Start a deferred upload's own fsync when the next deferred upload opens (module doc); an
    #: instance may turn it off (tests, benchmarks).
    early_fsync = True
    #: Start a deferred upload's write-back as it is published (``writeback.py``; module doc);
    #: an instance may turn it off (tests, benchmarks).
    writeback_hint = True
    #: Empty temporary files a writer handle keeps ready per directory (``spares.py``: a
    #: create off the upload's path, refilled once half are gone); 0 turns it off.
    spare_files = 4

    def __init__(self, root: str | os.PathLike, *, create: bool = True):
        """Raises InvalidArgumentError for a root that is no path, holds a NUL byte (no file
        system accepts one) or a lone surrogate (no UTF-8 name spells it; pass ``bytes`` for a
        name that is not UTF-8), or is longer than ``MAX_ROOT_BYTES`` once absolute;
        ObjectStoreError if the root cannot be created -- or, with ``create=False`` (read-only
        openers), ObjectNotFoundError if it does not exist: nothing is created then."""
        super().__init__()
        self._temp_tag = ""   # WRITER_TEMP_TAG once this handle holds the writer lock
        self._spares: SpareFiles | None = None   # made with the writer lock (module doc)
        self._deferring = threading.local()   # .on: this thread is inside deferred_durability()
        self._unsynced: set[str] = set()      # files of deferred uploads the barrier has not synced
        self._lost: set[str] = set()          # deferred files whose fsync failed: never durable
        self._early: dict = {}                # deferred file -> its fsync's Future in flight (module doc)
        self._early_due: list[str] = []       # deferred files whose early fsync the next open starts
        self._unsynced_lock = threading.Lock()
        self._lost_dirs: set[str] = set()     # directories whose fsync failed: nothing in them is durable
        self._dir_fsyncs: dict[str, set] = {}   # directory -> tickets of its fsyncs running
        self._dir_ticket = 0
        self._dirs_settled = threading.Condition(self._unsynced_lock)
        self._ready_dirs: set[str] = set()    # directories this handle made durable (``_make_dirs``)
        _LIVE_STORES.add(self)
        try:
            root = os.fspath(root)
        except TypeError:
            raise InvalidArgumentError(f"local object store root must be a path (str, bytes or "
                                       f"PathLike), got {type(root).__name__}") from None
        if ("\0" if isinstance(root, str) else b"\0") in root:
            raise InvalidArgumentError("local object store path contains a NUL byte, which no "
                                       "file name may hold")
        if isinstance(root, str):
            check_text(root, "the local object store path")
        else:   # bytes: any name, also one that is not UTF-8 (kept as surrogate escapes, as os does)
            root = os.fsdecode(root)
        self.root = os.path.abspath(root)
        if len(os.fsencode(self.root)) > MAX_ROOT_BYTES:
            raise InvalidArgumentError(
                f"local object store path is {len(os.fsencode(self.root))} bytes long once absolute; at most "
                f"{MAX_ROOT_BYTES}, so that it and any object path fit in PATH_MAX ({PATH_MAX})")
        if not create:
            if not os.path.isdir(self.root):
                raise ObjectNotFoundError(f"local object store root {self.root!r} does not exist")
            return
        try:
            _make_root(self.root)
        except OSError as exc:
            raise ObjectStoreError(f"cannot create object store root {self.root!r}: {exc}") from exc

    def __repr__(self) -> str:
        return f"LocalObjectStore(root={self.root!r})"

    def _file(self, path: str) -> str:
        return os.path.join(self.root, *path.split("/"))

    def _make_dirs(self, directory: str) -> None:
        """Create ``directory`` and missing parents below root (iteratively: an object path may
        have hundreds of levels) and, on the directory's first use by this handle, make the
        entry of every level below the root durable in its parent, from the top: a level made
        by a racing thread whose fsync has not happened yet, or by a process that crashed before
        it, is covered too. A failed fsync loses the parent (``_fsync_dir_tracked``). Later
        calls cost a set lookup and a stat; a directory removed since (tests, an operator) is
        made again."""
        if directory in self._ready_dirs:
            if os.path.isdir(directory):
                return
            self._ready_dirs.discard(directory)
        missing = []
        level = directory
        while not os.path.isdir(level):
            missing.append(level)
            level = os.path.dirname(level)
        for level in reversed(missing):
            try:
                os.mkdir(level)
            except FileExistsError:
                pass  # created concurrently, or a file stands there: the open of the temp fails
        levels = []
        level = directory
        while level != self.root and level.startswith(self.root + os.sep):   # never above the root
            levels.append(level)
            level = os.path.dirname(level)
        for level in reversed(levels):
            self._fsync_dir_tracked(os.path.dirname(level))
        if os.path.isdir(directory):
            self._ready_dirs.add(directory)

    def _check_dir(self, directory: str) -> None:
        """Raise ``OSError(EIO)`` when ``directory`` or one above it had a failed fsync in this
        handle: Linux reports a directory's write-back error to one fsync only, so no later
        fsync can tell whether an entry made in it reached the disk (module doc)."""
        if not self._lost_dirs:
            return
        with self._unsynced_lock:
            for lost in self._lost_dirs:
                if directory == lost or directory.startswith(lost.rstrip(os.sep) + os.sep):
                    raise OSError(errno.EIO, f"an earlier fsync of the directory {lost!r} failed: "
                                             f"entries made in it may be lost, and no later fsync can tell")

    def _fsync_dir_tracked(self, directory: str) -> None:
        """fsync ``directory`` for this handle. A failed fsync loses it for good
        (``_check_dir``); an ``open`` of it that fails (no such directory, no permission, out
        of descriptors: ``_OPEN_ERRNOS``) ran no fsync and consumed no error, so it only fails
        this call. A success counts once every fsync of the directory still running when this
        one ended has ended too without losing it: one of them may have taken the error that
        covered this caller's entries (later ones cannot have)."""
        with self._dirs_settled:
            self._dir_ticket += 1
            ticket = self._dir_ticket
            self._dir_fsyncs.setdefault(directory, set()).add(ticket)
        try:
            _fsync_dir(directory)
        except OSError as exc:
            if exc.errno not in _OPEN_ERRNOS:
                with self._dirs_settled:
                    self._lost_dirs.add(directory)
            raise
        finally:
            with self._dirs_settled:
                running = self._dir_fsyncs[directory]
                running.discard(ticket)
                if not running:
                    del self._dir_fsyncs[directory]
                self._dirs_settled.notify_all()
        with self._dirs_settled:
            earlier = set(self._dir_fsyncs.get(directory, ()))
            while earlier and earlier & self._dir_fsyncs.get(directory, set()):
                self._dirs_settled.wait()
        self._check_dir(directory)

    def _reset_after_fork(self) -> None:
        """In a forked child: the parent's locks may have been held by threads the child does
        not have, and its fsync futures and running directory fsyncs never finish here. Fresh
        locks and no fsync in flight; the deferred files stay remembered (``_unsynced``), so the
        child's next barrier fsyncs them itself."""
        self._unsynced_lock = threading.Lock()
        self._dirs_settled = threading.Condition(self._unsynced_lock)
        self._dir_fsyncs = {}
        self._early = {}

    def _open_temp(self, path: str) -> tuple[int, str, bool]:
        """Open a temporary file for writing in the directory of ``path``: ``(fd, temp,
        recycled)``. A writer handle's is a recycled file when one is kept there (``recycled``:
        it holds old bytes -- the caller writes from offset 0 and truncates to what it wrote),
        else one of its spares, when one is ready; anything else is created here."""
        directory = os.path.dirname(self._file(path))
        self._check_dir(directory)
        if self._spares is not None:
            recycled = self._spares.take_recycled(directory)
            if recycled is not None:
                return (*recycled, True)
            spare = self._spares.take(directory)
            if spare is not None:
                return (*spare, False)
        self._make_dirs(directory)
        temp = os.path.join(directory, f"{TEMP_PREFIX}{self._temp_tag}{uuid.uuid4().hex}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        if self._spares is not None:
            self._spares.want(directory)
        return fd, temp, False

    def _recycle(self, file: str) -> bool:
        """Keep the file of a deleted object for reuse (``spares.py``, "Recycled files") instead
        of unlinking it; False if it is not kept (the caller unlinks it). A file already gone
        counts as deleted."""
        directory = os.path.dirname(file)
        with self._unsynced_lock:
            if file in self._unsynced or file in self._early:
                # a deferred file not yet durable: an fsync of it may still report an error,
                # which must not reach a new object written into the same inode
                return False
        if not self._spares.accepts_recycled(directory):
            return False
        try:
            fd = os.open(file, os.O_WRONLY)
        except _NOT_FOUND:
            return True
        except OSError:
            return False   # (not writable, say: the unlink decides)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or not self._spares.accepts_recycled(directory, info.st_size):
                os.close(fd)
                return False
            temp = os.path.join(directory, f"{TEMP_PREFIX}{self._temp_tag}{uuid.uuid4().hex}")
            os.rename(file, temp)
            os.utime(fd)   # a temporary file of now: ``cleanup_temp``'s age rule sees a fresh one
        except BaseException:
            os.close(fd)
            raise
        if not self._spares.recycle(directory, fd, temp, info.st_size):
            os.close(fd)
            _remove_quietly(temp)
        return True

    def _publish(self, fd: int, temp: str, path: str) -> None:
        """fsync and close ``fd``, rename ``temp`` to ``path``'s file, fsync the directory."""
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        final = self._file(path)
        os.replace(temp, final)
        self._fsync_dir_tracked(os.path.dirname(final))

    def _upload(self, path, data):
        with self._open_uploader(path, deferred=False) as uploader:
            uploader.write(data)

    @contextlib.contextmanager
    def deferred_durability(self):
        """Streaming uploads this thread starts inside are published unsynced; the next
        ``upload_if_absent`` makes them durable first (module doc)."""
        before = getattr(self._deferring, "on", False)
        self._deferring.on = True
        try:
            yield
        finally:
            self._deferring.on = before

    def _publish_deferred(self, fd: int, temp: str, path: str) -> None:
        """Close ``fd`` and rename ``temp`` to ``path``'s file without an fsync; the next
        barrier (``_sync_deferred``) makes it durable; its write-back starts now (module doc)."""
        if self.writeback_hint:
            start_writeback(fd)
        os.close(fd)
        final = self._file(path)
        os.replace(temp, final)
        with self._unsynced_lock:
            self._unsynced.add(final)
            if self.early_fsync:
                self._early_due.append(final)

    def _start_early_fsyncs(self) -> None:
        """Start the early fsync of every deferred file published since the last open or barrier
        (a deferred upload is opening: the flush goes on with another SST; module doc)."""
        with self._unsynced_lock:
            if not self._early_due:
                return
            due, self._early_due = self._early_due, []
            for file in due:
                self._early[file] = _fsync_pool().submit(_fsync_file, file)

    def _sync_deferred(self, fd: int, own_dir: str) -> None:
        """fsync ``fd`` (a temporary file about to be published in ``own_dir``) together with
        every deferred upload's file and directory, concurrently; forget those files once all
        succeeded. A file stays remembered until a barrier that started after its publication
        ends, so concurrent barriers never skip one another's files; each file has one fsync in
        flight at a time (``_early``: an early fsync, or one a barrier started), which every
        barrier needing the file waits for, so an error it reports reaches each of them (Linux
        reports it to that one fsync only)."""
        # one section: a file a concurrent barrier found failed is in ``lost`` by now, or its
        # failed future is still in ``_early`` and becomes this barrier's too
        with self._unsynced_lock:
            files = list(self._unsynced)
            lost = sorted(self._lost)
            self._early_due.clear()   # each one is in ``files``: synced by this barrier
            if not lost:
                for file in files:
                    if file not in self._early:
                        self._early[file] = _fsync_pool().submit(_fsync_file, file)
            pending = {file: self._early[file] for file in files} if not lost else {}
        if lost:
            # Linux reports a writeback error to one fsync only: a retry returns success though
            # the data never reached the disk, so nothing naming this file may become durable
            raise OSError(errno.EIO, f"an earlier fsync of the deferred upload {lost[0]!r} failed: "
                                     f"its data may be lost, and no later fsync can tell")
        directories = sorted({os.path.dirname(file) for file in files})
        for directory in [own_dir, *directories]:
            self._check_dir(directory)
        if not files:
            os.fsync(fd)
            return
        error = None
        try:   # this file and the directories here, the files' fsyncs on the pool meanwhile
            _fsync_concurrently([functools.partial(os.fsync, fd)]
                                + [functools.partial(self._fsync_dir_tracked, directory) for directory in directories])
        except OSError as exc:
            error = exc
        failed = []
        for file, future in pending.items():
            try:
                future.result()
            except OSError as exc:
                if not os.path.lexists(file):
                    continue   # deleted since (an orphan vacuumed; never recycled while pending: nothing names it)
                failed.append(file)
                error = error or exc
        with self._unsynced_lock:
            if failed:
                self._lost.update(failed)
            for file, future in pending.items():   # (a concurrent barrier may have dropped it already)
                if self._early.get(file) is future:
                    del self._early[file]
            if error is None:
                self._unsynced.difference_update(files)
        if error is not None:
            raise error

    def _upload_scratch(self, path, data):
        """A temporary file renamed into place, neither fsynced nor its directory (module doc:
        after a crash the object may be gone or empty, which its callers accept)."""
        final = self._file(path)
        temp = os.path.join(os.path.dirname(final), f"{TEMP_PREFIX}{self._temp_tag}{uuid.uuid4().hex}")
        try:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.replace(temp, final)
        except OSError as exc:
            _remove_quietly(temp)
            raise _io_error("upload", path, exc) from exc

    def _upload_if_absent(self, path, data):
        try:
            fd, temp, recycled = self._open_temp(path)
        except OSError as exc:
            raise _io_error("start the upload of", path, exc) from exc
        final = self._file(path)
        try:
            try:
                _write_all(fd, data)
                if recycled:
                    os.ftruncate(fd, len(memoryview(data).cast("B")))
                self._sync_deferred(fd, os.path.dirname(final))   # the barrier: deferred uploads durable before we link
            finally:
                os.close(fd)
            kill_point("object_store.after_barrier")
            try:
                os.link(temp, final)  # atomic create: EEXIST if anything is at final
            except FileExistsError:
                if os.path.isdir(final):
                    raise ObjectStoreError(f"cannot create object {path!r}: a directory of other "
                                           f"objects has its name", path=path) from None
                return False
            self._fsync_dir_tracked(os.path.dirname(final))
            return True
        except OSError as exc:
            raise _io_error("create", path, exc) from exc
        finally:
            _remove_quietly(temp)

    def writer_lock(self, info: dict, *, stale_after: float, force: bool):
        """An ``flock`` on :meth:`lock_file_path` (``force`` cannot break a live process's
        lock, and a dead one's is already gone)."""
        lock = FlockLock(self, info)
        self._temp_tag = WRITER_TEMP_TAG   # this handle's temp files are now a writer's
        if self.spare_files and self._spares is None:
            self._spares = SpareFiles(TEMP_PREFIX + WRITER_TEMP_TAG, self.spare_files)
        return lock

    def _close(self) -> None:
        if self._spares is not None:
            self._spares.close()

    def lock_file_path(self) -> str:
        """The file ``hummock.manifest.WriterLock`` flocks: ``<root>/.writer-lock`` (see module doc)."""
        return os.path.join(self.root, LOCK_FILE_NAME)

    def _read(self, path, start, end):
        try:
            with open(self._file(path), "rb", buffering=0) as f:
                end = resolve_range(path, start, end, os.fstat(f.fileno()).st_size)
                data = os.pread(f.fileno(), end - start, start) if end > start else b""
        except _NOT_FOUND as exc:
            raise ObjectNotFoundError(f"object {path!r} not found under {self.root!r}",
                                      path=path) from exc
        except ObjectStoreError:
            raise
        except OSError as exc:
            raise _io_error("read", path, exc) from exc
        if len(data) != end - start:  # the file shrank under us: not an object we published
            raise ObjectStoreError(f"short read of object {path!r}: [{start}, {end}) gave "
                                   f"{len(data)} bytes", path=path)
        return data

    def _local_file(self, path: str) -> bytes:
        return os.fsencode(self._file(path))

    def _stat(self, path: str) -> os.stat_result | None:
        try:
            st = os.stat(self._file(path))
        except _NOT_FOUND:
            return None
        except OSError as exc:
            raise _io_error("stat", path, exc) from exc
        return st if stat.S_ISREG(st.st_mode) else None

    def _size(self, path):
        st = self._stat(path)
        if st is None:
            raise ObjectNotFoundError(f"object {path!r} not found under {self.root!r}", path=path)
        return st.st_size

    def _exists(self, path):
        return self._stat(path) is not None

    def _delete(self, paths):
        for path in paths:
            try:
                if self._spares is not None and self._recycle(self._file(path)):
                    continue
                os.unlink(self._file(path))
            except _NOT_FOUND:
                pass
            except OSError as exc:
                raise _io_error("delete", path, exc) from exc

    def _list(self, prefix):
        # start in the deepest directory the prefix names (``manifest/checkpoint`` lists only
        # ``manifest/``): the engine lists the manifest's checkpoints after every commit
        rel = prefix[:prefix.rfind("/") + 1]
        try:
            return list(self._walk(os.path.join(self.root, rel) if rel else self.root, rel, prefix))
        except OSError as exc:
            raise ObjectStoreError(f"cannot list {self.root!r} (prefix {prefix!r}): {exc}") from exc

    def _walk(self, directory: str, rel: str, prefix: str):
        """Yield metas of the files below ``directory`` (path ``rel``) that start with prefix.
        REQUIRES: ``rel`` starts the prefix or the prefix starts ``rel`` (so does every
        directory recursed into).

        Names come from ``os.listdir`` (about half the cost of ``os.scandir``'s entries) and
        only those that can match are ``lstat``-ed: the engine lists the manifest's checkpoints
        after every commit, in a directory of up to ~130 deltas."""
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return  # removed concurrently, or the prefix's directory part names a file (no object below)
        if len(prefix) > len(rel):
            # what a name must start, or be a start of (a directory on the prefix's way), to
            # match: everything else is dropped in one pass, before any path is built
            rest = prefix[len(rel):]
            names = [name for name in names if name.startswith(rest) or rest.startswith(name)]
        for name in names:
            if name.startswith("."):
                continue  # temporary files (and nothing else: object segments never start so)
            path = rel + name
            if not (path.startswith(prefix) or prefix.startswith(path)):
                continue  # neither this name nor anything below it (path + "/...") can match
            full = os.path.join(directory, name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue  # deleted between the listing and the stat: not listed
            if stat.S_ISDIR(st.st_mode):
                path += "/"
                if path.startswith(prefix) or prefix.startswith(path):
                    yield from self._walk(full, path, prefix)
            elif stat.S_ISREG(st.st_mode) and path.startswith(prefix):
                modified = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
                yield ObjectMeta(path, st.st_size, modified)

    def _streaming_upload(self, path):
        return self._open_uploader(path, deferred=getattr(self._deferring, "on", False))

    def _open_uploader(self, path: str, *, deferred: bool) -> _LocalUploader:
        if deferred and self._early_due:
            self._start_early_fsyncs()
        try:
            fd, temp, recycled = self._open_temp(path)
        except OSError as exc:
            raise _io_error("start the upload of", path, exc) from exc
        return _LocalUploader(self, path, fd, temp, deferred, recycled)

    def cleanup_temp(self, older_than_seconds: float = 0.0, *, writer_files: bool = False) -> int:
        """Remove temporary files older than ``older_than_seconds``; return how many. With
        ``writer_files``, also every temporary file a writer's handle made
        (``.tmp-w-<random>``: a handle names its temp files so once it holds the writer lock),
        whatever its age.

        REQUIRES: no upload that is still running (in any process sharing the root) has a
        temporary file older than ``older_than_seconds``; with the default 0 that means no
        upload is running at all, e.g. when the engine opens the store after a crash. For
        ``writer_files``: the caller holds the writer lock of this root and has no upload of
        its own running -- the flock then proves every writer that made such a file is dead
        (the kernel released its lock) or closed, so none is still writing it. Other
        processes' uploads (readers' leases, bulk loaders) keep the age rule.
        """
        self._require_open()
        if self._spares is not None:   # this handle's spares are writer files too: made again after
            self._spares.close()
            self._spares = SpareFiles(TEMP_PREFIX + WRITER_TEMP_TAG, self.spare_files)
        cutoff = time.time() - older_than_seconds
        dead_writers = TEMP_PREFIX + WRITER_TEMP_TAG if writer_files else None
        removed = 0
        for directory, _, files in os.walk(self.root):
            for name in files:
                temp = os.path.join(directory, name)
                try:
                    if dead_writers is not None and name.startswith(dead_writers):
                        os.unlink(temp)
                        removed += 1
                    elif name.startswith(TEMP_PREFIX) and os.stat(temp).st_mtime <= cutoff:
                        os.unlink(temp)
                        removed += 1
                except FileNotFoundError:
                    pass  # finished or removed concurrently
        return removed


class _LocalUploader(StreamingUploader):
    """Appends to an open temporary file that ``finish`` publishes (``upload`` is one write);
    ``deferred``: published without an fsync, synced by the store's next barrier (module doc)."""

    def __init__(self, store: LocalObjectStore, path: str, fd: int, temp: str, deferred: bool = False,
                 recycled: bool = False):
        super().__init__(path)
        self._store = store
        self._fd: int | None = fd
        self._temp = temp
        self._deferred = deferred
        self._recycled = recycled   # the file holds an old object's bytes past what is written

    def _write(self, data):
        try:
            _write_all(self._fd, data)
        except OSError as exc:
            raise _io_error("write", self.path, exc) from exc

    def _finish(self):
        fd, self._fd = self._fd, None
        try:
            if self._recycled:   # (writes are sequential from offset 0: the offset is the size)
                try:
                    os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_CUR))
                except OSError:
                    os.close(fd)
                    _remove_quietly(self._temp)
                    raise
            if self._deferred:
                self._store._publish_deferred(fd, self._temp, self.path)
            else:
                self._store._publish(fd, self._temp, self.path)
        except OSError as exc:
            raise _io_error("publish", self.path, exc) from exc

    def _abort(self):
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass
        _remove_quietly(self._temp)


def _make_root(directory) -> None:
    """``os.makedirs(directory, exist_ok=True)`` without its recursion (one frame per missing
    level: a root of a thousand levels would overflow the stack), each level it made fsynced
    into its parent (a root made and then lost in a crash would lose every commit under it)."""
    missing = []
    while not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
    for directory in reversed(missing):   # each new entry durable in its parent
        try:
            _fsync_dir(os.path.dirname(directory))
        except OSError as exc:
            if exc.errno not in _OPEN_ERRNOS:
                raise   # (a parent this process cannot open for reading: as before, unsynced)


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view):]


def _remove_quietly(temp: str) -> None:
    try:
        os.unlink(temp)
    except OSError:
        pass  # never published; cleanup_temp removes it later if it is still there
