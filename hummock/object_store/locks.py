"""Writer-lock mechanisms of the object stores: how each kind keeps a second writer off a store.

Every store class chooses its mechanism in ``ObjectStore.writer_lock(info, stale_after=,
force=)``; :class:`hummock.manifest.WriterLock` wraps the result. A mechanism has ``released``
and ``lost`` flags, ``confirm()`` (raise ``ConcurrentWriterError`` unless provably ours now) and
``release()`` (idempotent through WriterLock; never raises for I/O).

- :class:`FlockLock` (local directories): ``flock`` on ``<root>/.writer-lock``, released by the
  kernel when the process dies;
- :class:`RegistryLock` (memory stores): a process-wide registry keyed by the store's table;
- :class:`ObjectLock` (S3, any store with ``conditional_put``/``read_with_etag``): the lock
  object ``manifest/writer-lock`` with an owner and a heartbeat, taken and renewed by
  conditional writes (format: docs/format.md).

``info`` is the holder's JSON-able description (owner, host, pid, token). Callers:
``hummock/object_store/*`` (choosing) and ``hummock/manifest.py`` (WriterLock).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
import weakref

from hummock.errors import ConcurrentWriterError
from hummock.object_store.base import ObjectNotFoundError, ObjectStoreError

__all__ = ["FlockLock", "RegistryLock", "ObjectLock", "LOCK_OBJECT_PATH", "holder"]

log = logging.getLogger(__name__)

LOCK_OBJECT_PATH = "manifest/writer-lock"
_TAKE_ATTEMPTS = 3   # re-try taking the lock object when it vanished or changed under us


def holder(data: bytes) -> str:
    """Who holds a lock, from its JSON info (for error messages)."""
    try:
        info = json.loads(data)
        return f"{info['owner']!r} (host {info['host']}, pid {info['pid']})"
    except (ValueError, KeyError, TypeError):
        return "an unknown holder"


class FlockLock:
    """``flock(LOCK_EX | LOCK_NB)`` on ``<root>/.writer-lock``; the file holds the holder's info.

    flock locks belong to an open file description: a second ``open`` conflicts even in the same
    process, a forked child shares the parent's lock. On NFS Linux maps flock to POSIX locks.
    """

    def __init__(self, store, info: dict):
        self.released = self.lost = False
        path = store.lock_file_path()
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:   # e.g. a read-only file system: open read_only=True instead
            raise ObjectStoreError(f"cannot open the writer lock file {path!r} ({exc}); a writer "
                                   f"needs a writable store (readers: read_only=True)",
                                   ) from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = holder(os.pread(self._fd, 4096, 0))
            os.close(self._fd)
            raise ConcurrentWriterError(f"{store.root!r} already has a writer: {who}") from None
        except OSError:
            os.close(self._fd)
            raise
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(info).encode(), 0)

    def confirm(self) -> None:
        """The kernel holds an flock for as long as this process lives: nothing to check."""

    def release(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)


_registry: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # memory table -> info
_registry_lock = threading.Lock()


class RegistryLock:
    """A process-wide registry keyed by the memory store's table (``lock_key()``)."""

    def __init__(self, store, info: dict, force: bool):
        self.released = False
        self._key, self._info = store.lock_key(), info
        with _registry_lock:
            current = _registry.get(self._key)
            if current is not None and not force:
                raise ConcurrentWriterError(f"{store!r} already has a writer: "
                                            f"{holder(json.dumps(current).encode())}")
            _registry[self._key] = info

    @property
    def lost(self) -> bool:
        with _registry_lock:
            return _registry.get(self._key) is not self._info

    def confirm(self) -> None:
        """``lost`` is exact for the registry; ``WriterLock.confirm`` checks it."""

    def release(self) -> None:
        with _registry_lock:
            if _registry.get(self._key) is self._info:
                del _registry[self._key]


class ObjectLock:
    """The lock object ``manifest/writer-lock`` (JSON: owner, host, pid, token, heartbeat).

    Created with ``If-None-Match: *``; refreshed every ``stale_after / 3`` s by a daemon thread
    with ``If-Match: <our etag>``, so a heartbeat never overwrites a rival's takeover (it marks
    the lock lost instead); taken over, once its age (the service's ``Date`` minus its
    ``Last-Modified``: no client clock involved) reaches ``stale_after``, by an ``If-Match`` write
    on the stale ETag, so of two racing takers exactly one wins. Release deletes the object
    after checking it is still ours (a read-then-delete: a takeover in between is lost, which
    only happens to a holder that was already stale).
    """

    def __init__(self, store, info: dict, stale_after: float, force: bool):
        self.released = self.lost = False
        self._store, self._info, self._stale_after = store, info, stale_after
        self._etag = self._take(force)
        self._beat_lock = threading.Lock()   # a heartbeat's put and its new ETag are one step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"writer-lock-{info['owner']}",
                                        daemon=True)
        self._thread.start()

    def _body(self) -> bytes:
        return json.dumps({**self._info, "heartbeat": time.time(),
                           "stale_after_seconds": self._stale_after}).encode()

    def _take(self, force: bool) -> str:
        for _ in range(_TAKE_ATTEMPTS):
            etag = self._store.conditional_put(LOCK_OBJECT_PATH, self._body())
            if etag is not None:
                return etag
            try:
                data, old_etag, age = self._store.read_with_etag(LOCK_OBJECT_PATH)
            except ObjectNotFoundError:
                continue  # released meanwhile: try to create it again
            if age is None:
                age = _heartbeat_age(data)
            if not force and age < self._stale_after:
                raise ConcurrentWriterError(
                    f"{self._store!r} already has a writer: {holder(data)}, heartbeat {age:.1f} s "
                    f"ago (stale after {self._stale_after} s; force=True takes over a dead one)")
            etag = self._store.conditional_put(LOCK_OBJECT_PATH, self._body(), if_match=old_etag)
            if etag is not None:
                log.warning("took over the writer lock of %r from %s (heartbeat %.1f s ago%s)",
                            self._store, holder(data), age, ", forced" if force else "")
                return etag
        raise ConcurrentWriterError(f"the writer lock of {self._store!r} keeps changing hands")

    def _beat(self) -> None:
        while not self._stop.wait(self._stale_after / 3):
            try:
                with self._beat_lock:
                    etag = self._store.conditional_put(LOCK_OBJECT_PATH, self._body(), if_match=self._etag)
                    if etag is not None:
                        self._etag = etag
            except ObjectStoreError as exc:
                if self._stop.is_set() or getattr(self._store, "_closed", False):
                    return
                log.warning("writer lock heartbeat on %r failed (retrying): %s", self._store, exc)
                continue
            if etag is None:
                self.lost = True
                log.error("writer lock of %r lost: another writer took it over", self._store)
                return

    def confirm(self) -> None:
        """Read the lock object: it must still carry our ETag (else lost) and be younger than
        the stale limit by the service's clock (else expired: a rival may take it any moment)."""
        with self._beat_lock:
            try:
                _, etag, age = self._store.read_with_etag(LOCK_OBJECT_PATH)
            except ObjectNotFoundError:
                etag, age = None, None
            if etag != self._etag:
                self.lost = True
                raise ConcurrentWriterError(f"writer lock of {self._store!r} was taken over or removed")
        if age is not None and age >= self._stale_after:
            raise ConcurrentWriterError(
                f"writer lock of {self._store!r} has not been renewed for {age:.1f} s (stale after "
                f"{self._stale_after} s): this writer's lease expired and it must not delete")

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        if self.lost:
            return
        try:
            _, etag, _ = self._store.read_with_etag(LOCK_OBJECT_PATH)
            if etag == self._etag:
                self._store.delete(LOCK_OBJECT_PATH)
        except ObjectStoreError as exc:
            log.warning("cannot delete the writer lock object of %r (it goes stale): %s",
                        self._store, exc)


def _heartbeat_age(data: bytes) -> float:
    """Age from the holder's own timestamp (client clocks) when the service gave no dates."""
    try:
        return time.time() - float(json.loads(data)["heartbeat"])
    except (ValueError, KeyError, TypeError):
        return float("inf")  # unreadable: treat as stale
