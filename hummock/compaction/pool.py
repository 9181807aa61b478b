"""Worker-process runner: a compaction task's key-range splits run in worker processes.

With ``StorageOptions(compaction_workers=N)``, N >= 1, the in-process runner's background thread
still picks tasks and applies results, but the merge runs in a pool of N worker processes,
shared by every store of this process and started ahead of the first task
(``PoolRunner.warm``, when a writer opens) or on first use: plain child interpreters
(``python -m hummock.compaction.worker``) that read pickled splits on stdin and write results on
stdout, so nothing of the parent is forked and its main module is never re-imported. A task is cut into
up to N key-range splits (:mod:`hummock.compaction.splits`, as for Spark), SST ids for all of
them are reserved in one ``reserve_ids`` delta, each worker runs
:func:`hummock.compaction.remote.compact_split`, and the thread applies ONE delta. The point:
the native merge holds the interpreter lock while it runs, so a merge in a thread takes that
lock -- and the core it could have used -- from readers and writers; in a worker it takes
neither.

Invariants: a worker exits as soon as the process that started it dies, so no split outlives
the writer that reserved its ids: on Linux the kernel kills it (``PR_SET_PDEATHSIG``; workers
are started from one long-lived thread, since that signal follows the *thread* that started
them), elsewhere a lifeline pipe whose write end only the parent holds reaches EOF;
nothing is applied unless every split succeeded; while a task runs its reserved ids
are "unsettled" (vacuum spares them) and afterwards every one not in the version is an orphan
for the next vacuum. A worker that dies breaks the pool: the task fails (version unchanged)
and the next task starts a fresh pool.

Priority: the writer's own threads come first. A *background* split (one the compaction
thread picked by itself) runs in the worker on a thread of its own whose nice value is
``BACKGROUND_NICE`` (Linux keeps a nice value per thread; env ``HUMMOCK_COMPACTION_NICE``
overrides it, 0 turns it off); anything a caller waits for -- ``compact_all``,
``compact_range``, a task picked while L0 is deep enough to stall writers soon -- runs on the
worker's main thread at the process's own priority. Why per thread: an unprivileged process
can lower its priority but never raise it again, so one niced worker could not serve an urgent
split at full speed. On two cores the writer's threads and a merge otherwise share both: in
alternating runs of bench.peers' q1 and q2 through a push source, +24 % and +13 % with
background splits at nice 19 (docs/compaction.md, "Priority"). Only stores another process can open qualify (a local
directory, S3); a memory store compacts in the thread as before. Tasks of several stores take
turns on the pool.

Callers: :class:`~hummock.compaction.manager.CompactionManager` only.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback

from hummock.compaction.core import CompactionStats
from hummock.compaction.remote import StoreDescription, compact_split
from hummock.compaction.splits import plan_splits
from hummock.errors import HummockError
from hummock.sstable.meta import SstableInfo

WORKER_BLOCK_CACHE_BYTES = 8 << 20   # each split's private block cache in a worker
#: Test hook, shipped with each request: the split with this index raises after its first output
#: (or at its end). ``None`` (always, outside tests): off.
FAIL_SPLIT_FOR_TESTS: int | None = None

BACKGROUND_NICE = 19        # the nice value of a worker's background-split thread (module doc)
NICE_ENV = "HUMMOCK_COMPACTION_NICE"

_lock = threading.Lock()    # one task at a time on the pool
_workers: list = []         # the live _Worker processes
_lifeline: tuple | None = None   # (read fd, write fd): workers exit when the write end closes
LIFELINE_ENV = "HUMMOCK_COMPACTION_LIFELINE"
PARENT_ENV = "HUMMOCK_COMPACTION_PARENT"   # the writer's pid, checked by the worker at start
_spawn_requests: queue.SimpleQueue | None = None   # served by the "hummock-spawner" thread
_spawner_lock = threading.Lock()


class WorkerError(HummockError, RuntimeError):
    """A worker process failed a split (or died); nothing was applied."""


def can_use_workers(store) -> bool:
    """True if worker processes can open ``store`` (a local directory or S3)."""
    from hummock.object_store import LocalObjectStore

    if isinstance(store, LocalObjectStore):
        return True
    s3 = sys.modules.get("hummock.object_store.s3")   # an S3 store exists only once it is imported:
    return s3 is not None and isinstance(store, s3.S3ObjectStore)   # boto3 stays unloaded otherwise


class _Worker:
    """One child interpreter running :func:`_serve`; requests and replies are pickles on its pipes."""

    def __init__(self):
        global _lifeline
        if _lifeline is None:   # the write end stays in this process only (not inheritable)
            _lifeline = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env[LIFELINE_ENV] = str(_lifeline[0])
        env[PARENT_ENV] = str(os.getpid())
        self.proc = _spawn([sys.executable, "-m", "hummock.compaction.worker"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, env=env, pass_fds=(_lifeline[0],))

    def send(self, request) -> None:
        pickle.dump(request, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()

    def receive(self):
        try:
            status, payload = pickle.load(self.proc.stdout)
        except (EOFError, pickle.UnpicklingError, OSError) as exc:
            raise WorkerError(f"compaction worker process {self.proc.pid} died "
                              f"(exit code {self.proc.poll()})") from exc
        if status != "ok":
            raise WorkerError(f"a compaction split failed in worker {self.proc.pid}: {payload}")
        return payload

    def stop(self) -> None:
        """End the worker. Called under ``_lock``, so no split is in flight and the worker holds
        nothing: it is killed, not waited for -- an idle one would only read the end of its input
        and exit, and one still starting (a pool warmed by a short-lived writer) would make that
        writer's exit wait for an interpreter start it never used."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.kill()
        self.proc.wait()


def _spawn(args, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)`` run by one long-lived daemon thread. Linux sends a
    child's parent-death signal when the *thread* that forked it ends, so a worker started by a
    store's compaction thread would be killed when that store closed, under another store's task."""
    global _spawn_requests
    with _spawner_lock:
        if _spawn_requests is None:
            _spawn_requests = queue.SimpleQueue()
            threading.Thread(target=_serve_spawns, args=(_spawn_requests,), name="hummock-spawner",
                             daemon=True).start()
    done = concurrent.futures.Future()
    _spawn_requests.put((args, kwargs, done))
    return done.result()


def _serve_spawns(requests: queue.SimpleQueue) -> None:
    while True:
        args, kwargs, done = requests.get()
        try:
            done.set_result(subprocess.Popen(args, **kwargs))
        except BaseException as exc:   # handed to the caller, which raises it
            done.set_exception(exc)


def _pool(size: int) -> list:
    """The live workers, started or restarted up to ``size`` (under ``_lock``)."""
    for worker in [w for w in _workers if w.proc.poll() is not None]:
        _workers.remove(worker)
    while len(_workers) < size:
        _workers.append(_Worker())
    return _workers[:size]


@atexit.register
def _shutdown() -> None:
    with _lock:
        for worker in _workers:
            worker.stop()
        _workers.clear()


def _run_split(store, split, first_id: int, quota: int, watermark: int, bottom: bool, builder_options,
               target_sst_size: int, fail_split: int | None, hide: dict | None = None):
    """Worker side: compact ``split`` naming outputs from ``range(first_id, first_id + quota)``."""
    return compact_split(store, split, range(first_id, first_id + quota), watermark, bottom, builder_options,
                         target_sst_size, WORKER_BLOCK_CACHE_BYTES, error=WorkerError,
                         fail_after=1 if fail_split == split.index else None, hide=hide)


class PoolRunner:
    """Runs one store's compaction tasks on the shared worker pool for the manager."""

    def __init__(self, host, workers: int):
        self._host = host            # a CompactionHost (hummock/compaction/host.py)
        self._workers = workers
        background_nice()            # a bad HUMMOCK_COMPACTION_NICE fails here, not in a worker
        self._store = StoreDescription.of(host.store, host.options)

    def warm(self) -> None:
        """Start the pool's workers now, if none runs yet, so the first task does not wait for
        an interpreter to start (the manager's thread calls it as a writer opens). Never
        blocks on a running task: one holding the pool has started it already."""
        if not _lock.acquire(blocking=False):
            return
        try:
            _pool(self._workers)
        finally:
            _lock.release()

    def run(self, task, stats: CompactionStats, commit, *, background: bool = False) -> int:
        """Compact ``task`` in the workers, then ``commit(outputs, watermark)`` (1 if applied,
        0 if discarded); ``background``: at the workers' background priority (module doc).
        Raises WorkerError if a split fails: nothing is applied."""
        host = self._host
        options = host.options
        watermark = host.watermark()
        hide = host.hide(watermark)
        readers = {info.sst_id: host.input_reader(info, cached=True) for run in task.runs for info in run}
        builder_options = host.builder_options()
        splits = plan_splits(task.runs, lambda info: [(m.first_key, max(m.stored_len, m.content_len))
                                                      for m in readers[info.sst_id].sst.meta.blocks],
                             self._workers)
        quotas = [2 * -(-split.input_bytes // options.target_sst_size) + len(split.table_ids) + 2
                  for split in splits]
        reserved = host.reserve_ids(sum(quotas))   # held (vacuum spares them) while the task runs
        try:
            with _lock:
                workers = _pool(len(splits))
                first, sent, results, failure = reserved.start, [], [], None
                for worker, split, quota in zip(workers, splits, quotas):
                    try:
                        worker.send((background, (self._store, split, first, quota, watermark, task.bottom,
                                                  builder_options, options.target_sst_size,
                                                  FAIL_SPLIT_FOR_TESTS, hide or None)))
                        sent.append(worker)
                    except OSError as exc:
                        failure = failure or WorkerError(f"compaction worker {worker.proc.pid} is gone: {exc}")
                    first += quota
                for worker in sent:   # every reply read: no worker still writes when this returns
                    try:
                        results.append(worker.receive())
                    except WorkerError as exc:
                        failure = failure or exc
                if failure is not None:
                    raise failure
            outputs = [SstableInfo.from_dict(d) for infos, _, _ in results for d in infos]
            for _, split_stats, _ in results:
                stats.add(split_stats)
            return commit(outputs, watermark)
        finally:   # applied outputs are in the version; the rest are orphans (unless pending)
            host.release_ids(reserved)


def _bind_to_parent() -> None:
    """Worker side: die with the writer. A worker outliving its writer would go on uploading a
    split's outputs, which a restarted writer's vacuum may already have looked for: orphans it
    would miss (found by tests/test_crash.py). On Linux the kernel sends SIGKILL when the writer's
    spawning thread ends (even by SIGKILL) -- the only way that stops a worker inside the native
    merge, which holds the interpreter lock for a whole output; the pid check covers a writer
    that died before the request took effect. Elsewhere the lifeline thread is all there is."""
    parent = os.environ.get(PARENT_ENV)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass   # no prctl (an unusual libc): the lifeline thread still ends the worker
    if parent is not None and os.getppid() != int(parent):
        os._exit(70)
    _watch_lifeline()


def _watch_lifeline() -> None:
    """Worker side: exit when the parent process is gone (the lifeline pipe's write end, held
    only by the parent, closes when it dies, even by SIGKILL); the thread needs the interpreter
    lock to act, so it may lag a native merge by one output."""
    fd = os.environ.get(LIFELINE_ENV)
    if fd is None:
        return

    def watch():
        try:
            os.read(int(fd), 1)      # blocks until EOF: no one writes
        finally:
            os._exit(70)

    threading.Thread(target=watch, name="hummock-lifeline", daemon=True).start()


def background_nice() -> int:
    """The nice value background splits run at: ``HUMMOCK_COMPACTION_NICE`` if set (0..19),
    else ``BACKGROUND_NICE``."""
    value = os.environ.get(NICE_ENV)
    if value is None:
        return BACKGROUND_NICE
    try:
        nice = int(value)
    except ValueError:
        raise HummockError(f"{NICE_ENV} must be an integer in [0, 19], got {value!r}") from None
    if not 0 <= nice <= 19:
        raise HummockError(f"{NICE_ENV} must be an integer in [0, 19], got {value!r}")
    return nice


def _background_thread():
    """Worker side: the executor of background splits -- one thread that lowers its own
    priority to :func:`background_nice` as it starts -- or None where a nice value is not per
    thread (not Linux) or the value is 0: background splits then run on the main thread."""
    nice = background_nice()
    if nice == 0 or not sys.platform.startswith("linux"):
        return None

    def lower():   # (PRIO_PROCESS with a thread id: that thread only, on Linux)
        me = threading.get_native_id()
        try:   # never below the process's own value: raising a priority needs privilege
            os.setpriority(os.PRIO_PROCESS, me, max(nice, os.getpriority(os.PRIO_PROCESS, me)))
        except OSError:
            pass   # (a sandbox refusing it) the splits still run, at the process's priority
    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hummock-background-split",
                                                 initializer=lower)


def _serve() -> None:
    """Worker main loop: run each pickled ``(background, split arguments)`` from stdin -- a
    background one on the low-priority thread (module doc) -- and reply ``("ok", result)`` or
    ``("error", text)`` on stdout; exit at end of input, or at once when the parent dies
    (:func:`_bind_to_parent`)."""
    _bind_to_parent()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr    # a stray print must not corrupt the reply stream
    low_priority = _background_thread()
    while True:
        try:
            background, request = pickle.load(requests)
        except EOFError:
            return
        try:
            if background and low_priority is not None:
                reply = ("ok", low_priority.submit(_run_split, *request).result())
            else:
                reply = ("ok", _run_split(*request))
        except Exception as exc:   # reported to the parent, which fails the task
            reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()
