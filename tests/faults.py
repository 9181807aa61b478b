"""Fault injection for object stores: ``FaultyObjectStore`` wraps any store and makes it fail.

Test helper (issue 10, "Durability under faults"). A :class:`Faults` plan -- a fault rate, a
seed, per-kind counters, an on/off switch -- is shared by every :class:`FaultyObjectStore` built
on one store location (a ``HummockStorage`` closes its store, so each reopen needs a new wrapper
over a new handle: :class:`Location` makes them). Fault kinds:

- ``error_before``: ``ObjectStoreError`` before the operation runs (any operation);
- ``error_after``: the operation **ran**, then ``ObjectStoreError`` as if the reply was lost
  (upload, upload_if_absent, streaming finish; a delete first removes a random non-empty part
  of its paths) -- the ambiguous outcome every caller must reconcile;
- ``stall``: a short sleep (``stall_seconds``, a few ms), then the operation runs normally;
- ``short_read``: a read either raises ``ObjectStoreError`` after reading or returns fewer
  bytes than asked (the contract's exact reads broken on purpose: the engine must turn that
  into a ``HummockError``, never into wrong data);
- ``list_lag``: ``list()`` omits the objects uploaded in the last ``list_lag_ops`` operations
  on the location (an eventually consistent listing).

Only ``ObjectStoreError`` is raised by injected faults (``FaultInjected``, a subclass that says
which kind and operation). ``rate`` is the probability that one operation gets some fault, split
evenly among the kinds that apply to it; ``rates={kind: p}`` sets per-kind probabilities instead
(each kind then fires with probability ``p`` on every operation it applies to);
``inject(kind, op, times=, path_prefix=)`` scripts faults for deterministic tests. Decisions come
from ``random.Random`` seeded with ``(seed, thread name)``, so a single-threaded run is
reproducible from its seed. ``with faults.paused():`` (or ``faults.enabled = False``) stops
faults; stall/list lag included. The writer lock is not faulted: ``lock_store()`` returns the
inner store's lock store.

:class:`ErrorLog` records exceptions logged by the engine's background threads (which swallow
them), so a test can assert that they were ``HummockError``\\ s too.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import Counter

from hummock.errors import HummockError
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.object_store.base import ObjectStore, ObjectStoreError, StreamingUploader

__all__ = ["KINDS", "OPS", "Faults", "FaultInjected", "FaultyObjectStore", "Location",
           "memory_location", "local_location", "s3_location", "ErrorLog"]

KINDS = ("error_before", "error_after", "stall", "short_read", "list_lag")

#: which fault kinds apply to which operation
OPS = {
    "upload": ("error_before", "error_after", "stall"),
    "upload_if_absent": ("error_before", "error_after", "stall"),
    "read": ("error_before", "short_read", "stall"),
    "size": ("error_before", "stall"),
    "exists": ("error_before", "stall"),
    "delete": ("error_before", "error_after", "stall"),
    "list": ("error_before", "list_lag", "stall"),
    "streaming_upload": ("error_before", "stall"),
    "stream_write": ("error_before", "stall"),
    "stream_finish": ("error_before", "error_after", "stall"),
}


class FaultInjected(ObjectStoreError):
    """An injected fault (an ``ObjectStoreError``, as the store contract allows)."""

    def __init__(self, kind: str, op: str, path: str | None):
        self.kind = kind
        self.op = op
        super().__init__(f"injected fault {kind} in {op}({path!r})", path=path)


class Faults:
    """A seeded fault plan with counters and a pause switch, shared by the wrappers of one
    location. Thread-safe."""

    def __init__(self, rate: float = 0.0, *, seed: int = 0, kinds=KINDS, rates: dict | None = None,
                 stall_seconds: tuple[float, float] = (0.001, 0.005), list_lag_ops: int = 8,
                 truncate_share: float = 0.5):
        unknown = set(rates or {}).union(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {rate}")
        self.rate = rate
        self.kinds = tuple(kinds)
        self.rates = dict(rates) if rates is not None else None
        self.seed = seed
        self.stall_seconds = stall_seconds
        self.list_lag_ops = list_lag_ops
        self.truncate_share = truncate_share  # short reads that return fewer bytes (rest raise)
        self.enabled = True
        self.counts: Counter = Counter()      # kind -> faults injected
        self.by_op: Counter = Counter()       # (op, kind) -> faults injected
        self.ops: Counter = Counter()         # op -> operations seen (faulted or not)
        self.omitted = 0                      # objects hidden from lists by list_lag
        self.truncated = 0                    # short reads that returned fewer bytes (not raised)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._op_no = 0
        self._recent: dict[str, int] = {}     # path -> op number of its last upload
        self._scripted: list[list] = []       # [kind, op, path prefix, times left]

    # --- switch ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def paused(self):
        """No faults inside the block (restores the previous state after it)."""
        before, self.enabled = self.enabled, False
        try:
            yield self
        finally:
            self.enabled = before

    # --- decisions ------------------------------------------------------------------------

    def _rng(self) -> random.Random:
        rng = getattr(self._local, "rng", None)
        if rng is None or self._local.seed != self.seed:
            rng = self._local.rng = random.Random(f"{self.seed}:{threading.current_thread().name}")
            self._local.seed = self.seed
        return rng

    def probability(self, kind: str, op: str) -> float:
        if kind not in OPS[op]:
            return 0.0
        if self.rates is not None:
            return self.rates.get(kind, 0.0)
        if kind not in self.kinds:
            return 0.0
        return self.rate / sum(1 for k in OPS[op] if k in self.kinds)

    def inject(self, kind: str, op: str, *, times: int = 1, path_prefix: str = "") -> None:
        """Script a fault: the next ``times`` operations ``op`` on a path starting with
        ``path_prefix`` get ``kind`` (while faults are enabled), before any random fault."""
        if kind not in OPS[op]:
            raise ValueError(f"fault {kind!r} does not apply to {op!r}")
        with self._lock:
            self._scripted.append([kind, op, path_prefix, times])

    def clear(self) -> None:
        """Drop the scripted faults not yet injected."""
        with self._lock:
            self._scripted.clear()

    def _count(self, kind: str, op: str) -> str:
        with self._lock:
            self.counts[kind] += 1
            self.by_op[(op, kind)] += 1
        return kind

    def decide(self, op: str, path: str | None = None) -> str | None:
        """Count the operation and return the fault kind to inject into it, or None."""
        with self._lock:
            self._op_no += 1
            self.ops[op] += 1
            if not self.enabled:
                return None
            for script in self._scripted:
                kind, scripted_op, prefix, _ = script
                if scripted_op == op and (path or "").startswith(prefix):
                    script[3] -= 1
                    if not script[3]:
                        self._scripted.remove(script)
                    break
            else:
                kind = None
        if kind is not None:
            return self._count(kind, op)
        u = self._rng().random()
        probabilities = [(kind, self.probability(kind, op)) for kind in OPS[op]]
        total = sum(p for _, p in probabilities)
        if total > 1.0:
            u *= total
        for kind, p in probabilities:
            if u < p:
                return self._count(kind, op)
            u -= p
        return None

    def uniform(self, low: float, high: float) -> float:
        return self._rng().uniform(low, high)

    def randint(self, low: int, high: int) -> int:
        return self._rng().randint(low, high)

    # --- listing lag ----------------------------------------------------------------------

    def uploaded(self, path: str) -> None:
        with self._lock:
            self._recent[path] = self._op_no
            if len(self._recent) > 4 * self.list_lag_ops + 64:
                horizon = self._op_no - self.list_lag_ops
                self._recent = {p: n for p, n in self._recent.items() if n > horizon}

    def lagging(self) -> set[str]:
        """Paths uploaded in the last ``list_lag_ops`` operations."""
        with self._lock:
            horizon = self._op_no - self.list_lag_ops
            return {p for p, n in self._recent.items() if n > horizon}

    # --- reporting ------------------------------------------------------------------------

    @property
    def injected(self) -> int:
        """Faults injected so far, every kind."""
        with self._lock:
            return sum(self.counts.values())

    @property
    def disruptions(self) -> int:
        """Faults that can make a caller fail (everything but stalls)."""
        with self._lock:
            return sum(n for kind, n in self.counts.items() if kind != "stall")

    def report(self) -> dict:
        with self._lock:
            return {"operations": sum(self.ops.values()), **{k: self.counts[k] for k in KINDS},
                    "short_read_truncated": self.truncated, "list_lag_omitted_objects": self.omitted}


class FaultyObjectStore(ObjectStore):
    """Any object store with injected faults (module doc). Closing it closes ``inner``."""

    def __init__(self, inner: ObjectStore, faults: Faults | None = None, **plan):
        super().__init__()
        if faults is not None and plan:
            raise ValueError("pass either a Faults plan or its settings, not both")
        self.inner = inner
        self.faults = faults if faults is not None else Faults(**plan)

    def __repr__(self) -> str:
        return f"FaultyObjectStore({self.inner!r})"

    # --- switch (delegates to the plan) -----------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.faults.enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self.faults.enabled = value

    def paused(self):
        return self.faults.paused()

    def lock_store(self) -> ObjectStore:
        return self.inner.lock_store()

    # --- hooks ------------------------------------------------------------------------------

    def _before(self, op: str, path: str | None) -> str | None:
        """Decide the fault of one operation; raise or stall now if it strikes before."""
        kind = self.faults.decide(op, path)
        if kind == "error_before":
            raise FaultInjected(kind, op, path)
        if kind == "stall":
            time.sleep(self.faults.uniform(*self.faults.stall_seconds))
        return kind

    def _upload(self, path, data):
        kind = self._before("upload", path)
        self.inner.upload(path, data)
        self.faults.uploaded(path)
        if kind == "error_after":
            raise FaultInjected(kind, "upload", path)

    def _upload_if_absent(self, path, data):
        kind = self._before("upload_if_absent", path)
        created = self.inner.upload_if_absent(path, data)
        if created:
            self.faults.uploaded(path)
        if kind == "error_after":
            raise FaultInjected(kind, "upload_if_absent", path)
        return created

    def _read(self, path, start, end):
        kind = self._before("read", path)
        data = self.inner.read(path, start, end)
        if kind == "short_read":
            if data and self.faults.uniform(0.0, 1.0) < self.faults.truncate_share:
                with self.faults._lock:
                    self.faults.truncated += 1
                return data[:self.faults.randint(0, len(data) - 1)]
            raise FaultInjected(kind, "read", path)
        return data

    def _size(self, path):
        self._before("size", path)
        return self.inner.size(path)

    def _exists(self, path):
        self._before("exists", path)
        return self.inner.exists(path)

    def _delete(self, paths):
        kind = self._before("delete", paths[0])
        if kind == "error_after":
            self.inner.delete(paths[:self.faults.randint(1, len(paths))])
            raise FaultInjected(kind, "delete", paths[0])
        self.inner.delete(paths)

    def _list(self, prefix):
        kind = self._before("list", prefix or None)
        metas = self.inner.list(prefix)
        if kind == "list_lag":
            hidden = self.faults.lagging()
            kept = [meta for meta in metas if meta.path not in hidden]
            with self.faults._lock:
                self.faults.omitted += len(metas) - len(kept)
            return kept
        return metas

    def _streaming_upload(self, path):
        self._before("streaming_upload", path)
        return _FaultyUploader(self, path, self.inner.streaming_upload(path))

    def _close(self):
        self.inner.close()


class _FaultyUploader(StreamingUploader):
    """The inner store's uploader with faults on ``write`` and ``finish`` (ambiguous after it)."""

    def __init__(self, store: FaultyObjectStore, path: str, inner: StreamingUploader):
        super().__init__(path)
        self._store = store
        self._inner = inner

    def _write(self, data):
        self._store._before("stream_write", self.path)
        self._inner.write(data)

    def _finish(self):
        kind = self._store._before("stream_finish", self.path)
        self._inner.finish()
        self._store.faults.uploaded(self.path)
        if kind == "error_after":   # published, but the caller hears a failure
            raise FaultInjected(kind, "stream_finish", self.path)

    def _abort(self):
        self._inner.abort()   # a no-op once the inner upload finished


# --- locations: a new wrapper over a new handle for every (re)open ---------------------------

class Location:
    """One store location with one fault plan. ``store()`` is a new ``FaultyObjectStore`` over
    a new inner handle; ``inner()`` a new plain handle (for checks behind the engine's back);
    ``open(options)`` a ``HummockStorage`` on ``store()``."""

    def __init__(self, make_inner, faults: Faults, description: str):
        self._make_inner = make_inner
        self.faults = faults
        self.description = description

    def __repr__(self) -> str:
        return f"Location({self.description})"

    def inner(self) -> ObjectStore:
        return self._make_inner()

    def store(self) -> FaultyObjectStore:
        return FaultyObjectStore(self._make_inner(), self.faults)

    def open(self, options, *, read_only: bool = False):
        from hummock import HummockStorage

        store = self.store()
        try:
            return HummockStorage.open(store, options, read_only=read_only)
        except BaseException:
            store.close()   # the engine closes only the stores it opened itself
            raise


def memory_location(name: str, faults: Faults) -> Location:
    return Location(lambda: MemoryObjectStore.named(name), faults, f"memory://{name}")


def local_location(path, faults: Faults) -> Location:
    return Location(lambda: LocalObjectStore(path), faults, f"local {path}")


def s3_location(server, faults: Faults, bucket: str | None = None, prefix: str = "faults") -> Location:
    """A location on the moto server (fixture ``s3_server``): a new bucket unless given."""
    from s3_server import new_bucket_name

    bucket = bucket or new_bucket_name()
    server.admin_client().create_bucket(Bucket=bucket)
    return Location(lambda: server.new_store(bucket=bucket, prefix=prefix, create_bucket_if_missing=False),
                    faults, f"s3://{bucket}/{prefix}")


# --- exceptions swallowed by background threads ----------------------------------------------

class ErrorLog(logging.Handler):
    """Collects log records with exception info from the ``hummock`` loggers (background
    compaction logs and swallows its failures). ``foreign()`` lists those whose exception is
    not a ``HummockError``. Use as a context manager."""

    def __init__(self, logger: str = "hummock"):
        super().__init__(logging.WARNING)
        self._logger = logging.getLogger(logger)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.records.append(record)

    def foreign(self) -> list[BaseException]:
        return [r.exc_info[1] for r in self.records if not isinstance(r.exc_info[1], HummockError)]

    def __enter__(self) -> ErrorLog:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
