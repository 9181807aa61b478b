"""Reader leases: how read-only openers in other processes pin what they read against vacuum.

A read-only :class:`~hummock.storage.HummockStorage` writes ``leases/reader-<token>``, a small
JSON object naming the **oldest version id it may still read** (its current version or an older
one a snapshot holds) and its time to live. It rewrites the object every third of the TTL from a
daemon thread and deletes it on close; a reader that dies simply stops renewing and its lease
expires. The writer's vacuum (``HummockStorage.vacuum``) honours every live lease:

- an SST that left the writer's version at version ``R`` is kept while a live lease names a
  version ``< R`` (that reader's version may still reference it);
- and, whatever the leases say, for a grace period after it left the version (the
  ``vacuum_min_age_s`` option, at least half the lease time), so a reader that loaded the
  manifest just before the SST left has time to publish its lease.

The reader keeps its side of that bargain in :meth:`ReaderLease.pin`: it measures from the start
of the manifest read to the moment its lease is stored, and if that took more than half the
grace it reloads and pins again (the first lease keeps protecting it meanwhile).

A lease is *live* while its object's age (now minus the store's last-modified time) is below its
TTL; expired leases older than ``DEAD_AFTER`` TTLs are deleted by the writer's vacuum. A reader
whose lease lapsed (paused, cut off) may find SSTs gone; its reads then raise
:class:`VersionExpiredError`, which says to ``refresh()``.

Callers: ``hummock/storage.py`` only. Format of the object: docs/format.md ("Reader leases").
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import socket
import threading
import uuid

from hummock._json_depth import json_depth_bound
from hummock.errors import HummockError
from hummock.object_store.base import ObjectNotFoundError, ObjectStoreError

__all__ = ["ReaderLease", "VersionExpiredError", "live_lease_floor", "parse_lease", "LEASE_PREFIX",
           "MAX_LEASE_TTL_S"]

log = logging.getLogger(__name__)

LEASE_PREFIX = "leases/"
DEAD_AFTER = 10          # an expired lease this many TTLs old is removed by the writer
DAMAGED_TTL_S = 3600     # a malformed lease counts as naming version 0 for this long
MAX_LEASE_TTL_S = 30 * 86400   # a lease claiming a longer life is malformed (reader_lease_s, pin_ttl_s)
_MAX_LEASE_BYTES = 4096  # a lease object larger than this is not ours: ignored (and kept)


class VersionExpiredError(HummockError):
    """A read-only opener's version lost SSTs to the writer's vacuum (its lease lapsed, or it
    held no lease for that version): call ``refresh()`` and read again."""


class ReaderLease:
    """One reader's lease object (module doc). Thread-safe; ``close`` is idempotent."""

    def __init__(self, store, ttl_s: float):
        self._store = store
        self.ttl_s = float(ttl_s)
        self.path = f"{LEASE_PREFIX}reader-{uuid.uuid4().hex}"
        self.version_id: int | None = None
        self._source = None   # () -> the oldest version id the reader holds now (follow)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        return json.dumps({"version_id": self.version_id, "ttl_s": self.ttl_s, "pid": os.getpid(),
                           "host": socket.gethostname()}).encode()

    def publish(self, version_id: int) -> None:
        """Store the lease naming ``version_id`` (the oldest version this reader may read).
        Raises ObjectStoreError if the store refuses; starts the renewal thread on first use."""
        with self._lock:
            self.version_id = version_id
            self._store.upload(self.path, self._body())
            if self._thread is None:
                self._thread = threading.Thread(target=self._renew, name="hummock-reader-lease",
                                                daemon=True)
                self._thread.start()

    def follow(self, source) -> None:
        """Each renewal names ``source()`` -- the oldest version the reader still holds -- so the
        lease moves forward once scans of older versions are gone. ``source`` must read the
        reader's version and its retired read states as one consistent pair (the storage
        takes its engine lock, under which ``refresh()`` installs a version and files the
        replaced state as retired in one step); it is called without this lease's lock held,
        so it may wait for a ``refresh()`` that publishes this lease meanwhile."""
        self._source = source

    def renew(self) -> None:
        """One renewal: re-store the lease, naming ``source()`` if ``follow`` set one. A value
        computed before a concurrent ``publish`` may be stored after it; it is then lower or
        equal (versions a reader holds only get newer), which only pins more for one tick.
        Raises ObjectStoreError."""
        source = self._source
        version_id = source() if source is not None else None
        with self._lock:
            if self._stop.is_set():
                return
            if version_id is not None:
                self.version_id = version_id
            self._store.upload(self.path, self._body())

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.renew()
            except ObjectStoreError as exc:   # retried at the next tick; reads may then expire
                log.warning("reader lease %s not renewed (retrying): %s", self.path, exc)

    def close(self) -> None:
        """Stop renewing and delete the lease (best effort: an undeleted one just expires)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self._store.delete(self.path)
        except ObjectStoreError as exc:
            log.warning("reader lease %s not deleted (it expires by itself): %s", self.path, exc)


def live_lease_floor(store, now: datetime.datetime | None = None, *, remove_dead: bool = True,
                     seen: dict | None = None) -> int | None:
    """The lowest version id any live reader lease names, or ``None`` when none is live.

    Reads every lease object under ``leases/``; one that is malformed (:func:`parse_lease`
    refuses it: not JSON, wrong types, ``version_id: 1e999``, a TTL over ``MAX_LEASE_TTL_S``
    ...) is input from another process, never trusted: its content is ignored with a warning
    (never an exception) and it counts as live with version 0 (pins everything) for an hour
    (and is removed after ``DEAD_AFTER`` hours) -- a damaged lease must not let vacuum delete
    what a reader may hold. With ``remove_dead``, leases expired for ``DEAD_AFTER`` TTLs are
    deleted. Raises ObjectStoreError for I/O, nothing else.

    ``seen`` (a dict the caller keeps between calls; the writer's vacuum does) remembers each
    live lease: ``path -> (version id, expiry on the store's clock)``. A remembered lease that a
    listing misses -- a listing may lag behind recent uploads, and a renewal *is* a recent
    upload -- still counts while it exists: it is read again (its renewal may name a newer
    version; the lower of the two counts) or, if that read fails, its remembered version counts
    until its remembered expiry. It is forgotten once the store says it is gone or it expired
    unseen. So a lagging listing only delays deletion, never skips a lease it showed before.
    """
    metas = store.list(LEASE_PREFIX)
    now = now or store.now()   # the store's clock, which stamped last_modified
    floor, dead, listed = None, [], set()
    for meta in metas:
        listed.add(meta.path)
        age = (now - meta.last_modified).total_seconds()
        try:
            if meta.size > _MAX_LEASE_BYTES:
                raise ValueError(f"{meta.size} bytes, over {_MAX_LEASE_BYTES}")
            version_id, ttl = parse_lease(store.read(meta.path))
        except ObjectNotFoundError:
            continue   # released meanwhile
        except ValueError as exc:   # hostile or damaged: its content is ignored
            _warn_malformed(meta, exc)
            version_id, ttl = 0, DAMAGED_TTL_S
        if age < ttl:
            floor = version_id if floor is None else min(floor, version_id)
            if seen is not None:
                seen[meta.path] = (version_id, meta.last_modified + datetime.timedelta(seconds=ttl))
        else:
            if seen is not None:
                seen.pop(meta.path, None)
            if age > DEAD_AFTER * ttl:
                dead.append(meta.path)
    for path in [p for p in (seen or ()) if p not in listed]:
        remembered = _remembered(store, path, *seen[path], now)
        if remembered is None:
            del seen[path]
        else:
            floor = remembered if floor is None else min(floor, remembered)
    if remove_dead and dead:
        store.delete(dead)
    return floor


def _remembered(store, path: str, version_id: int, expiry, now) -> int | None:
    """The version a lease seen earlier but missing from this listing still pins, or ``None``
    once it is gone (``live_lease_floor``'s ``seen``)."""
    try:
        data = store.read(path)
    except ObjectNotFoundError:
        return None   # released (or removed): forget it
    except ObjectStoreError:
        return version_id if now < expiry else None
    try:
        renewed = parse_lease(data)[0]
    except ValueError:
        renewed = 0   # damaged now: pins everything, as in the listing
    return min(version_id, renewed)


def parse_lease(data: bytes) -> tuple[int, float]:
    """``(version_id, ttl_s)`` of a lease object's bytes (docs/format.md "Reader leases").
    The object comes from another process, so nothing is trusted: ``ValueError`` for bytes
    over ``_MAX_LEASE_BYTES``, nesting (refused before ``json.loads`` recurses), non-UTF-8 or
    non-JSON bytes, anything but an object, a ``version_id`` that is not a JSON integer in
    u64 (``1e999``, ``"7"``, ``true``), a ``ttl_s`` that is not a number in
    ``(0, MAX_LEASE_TTL_S]`` (``NaN``, ``1e999``, ``1e300``)."""
    if len(data) > _MAX_LEASE_BYTES:
        raise ValueError(f"{len(data)} bytes, over {_MAX_LEASE_BYTES}")
    if json_depth_bound(data, 2) > 2:
        raise ValueError("nests deeper than a lease does")
    info = json.loads(data)   # UnicodeDecodeError and JSONDecodeError are ValueErrors
    if not isinstance(info, dict):
        raise ValueError(f"a JSON object expected, got {type(info).__name__}")
    version_id, ttl = info.get("version_id"), info.get("ttl_s")
    if isinstance(version_id, bool) or not isinstance(version_id, int) or not 0 <= version_id < 2**64:
        raise ValueError(f"version_id must be an integer in u64, got {version_id!r:.40}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_LEASE_TTL_S:
        raise ValueError(f"ttl_s must be a number in (0, {MAX_LEASE_TTL_S}], got {ttl!r:.40}")
    return version_id, float(ttl)


_warned: dict = {}   # path -> last_modified of the malformed lease objects already logged


def _warn_malformed(meta, exc) -> None:
    """Log a malformed lease once per object version (vacuum lists leases often)."""
    if _warned.get(meta.path) == meta.last_modified:
        return
    if len(_warned) > 1024:
        _warned.clear()
    _warned[meta.path] = meta.last_modified
    log.warning("reader lease %s is malformed (%s): its content is ignored; it pins every version "
                "until it is %d s old and is deleted after %d s", meta.path, exc, DAMAGED_TTL_S,
                DEAD_AFTER * DAMAGED_TTL_S)
