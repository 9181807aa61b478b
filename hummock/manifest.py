"""The version manifest: ``HummockVersion``\\ s persisted in an object store as write-once objects.

Layout (``docs/format.md`` section 6 has the bytes)::

    manifest/checkpoint-<id:020d>   a whole version (version_codec.encode_version)
    manifest/delta-<id:020d>        the VersionDelta that produced version <id>
    manifest/writer-lock            the S3 writer lock (WriterLock); other stores lock elsewhere

Invariants:
1. **Write-once.** No manifest object is ever overwritten (S3 has no rename): every object is
   created with ``upload_if_absent``. **The commit point of version N is the moment
   ``delta-N`` exists**; a crash at any point leaves the store at the last version whose delta
   object exists, never at a mix.
2. **Fencing.** Two writers that both try to create ``delta-N`` cannot both succeed: the loser
   gets :class:`ConcurrentWriterError` and writes nothing. Rotation (4) deletes old deltas, so
   a writer far behind could re-create a deleted ``delta-N``. A delta is deleted only by a
   rotation whose previous checkpoint is >= N, after its new checkpoint exists, and a rotation
   never deletes its previous or new checkpoint; so once ``delta-N`` has been deleted, two
   checkpoints >= N exist for good. After creating ``delta-N`` the writer lists the checkpoints
   and treats a second-newest one >= N as a lost race (ConcurrentWriterError; the stray delta
   is never read, since recovery starts at or after that checkpoint, and rotation deletes it).
   (A legitimate commit is misreported so only if other writers built and checkpointed twice
   on top of it between its upload and that list: the failure is then ambiguous, as any
   failed commit is.) This holds even when the writer lock (below) is wrongly taken over; the
   lock only makes the error come early and clear.
3. **Recovery.** ``open`` loads the newest readable checkpoint and replays ``delta-(c+1)``,
   ``delta-(c+2)``, ... up to the first missing id. A delta that exists but does not decode or
   apply raises ``CorruptionError`` naming it (it may be a commit a client saw acknowledged). A
   corrupt checkpoint is skipped (with a warning) only when an older checkpoint and the complete
   delta chain up to and past it reproduce it; otherwise ``CorruptionError``.
4. **Rotation.** Every ``checkpoint_interval`` versions the writer stores a checkpoint, then
   deletes checkpoints older than the *previous* checkpoint and deltas up to it: one older
   checkpoint plus its delta chain stays, so invariant 3 can skip a corrupt newest checkpoint.
   ``checkpoint-0`` is never deleted: it anchors the store, so a listing that lags behind
   (shows no checkpoint) is recognised as such and never mistaken for an empty store -- which
   would start a second chain reusing SST ids.
   A failed checkpoint or delete is logged and retried later; it never fails a commit.
   With ``background_rotation`` (the storage engine's writer) the deletes run on a thread of
   their own after the commit returns: they are the same objects, chosen by the same listing
   after the new checkpoint exists, so invariants 2-4 hold as they are; a commit no longer
   waits for up to ``checkpoint_interval`` deletes (about 150 ms a rotation on a busy disk,
   docs/performance.md). :meth:`close` waits for them; a crash leaves them to the next rotation.
5. **Unknown outcomes.** A failed upload of ``delta-N`` may still have stored it (the reply
   was lost). It is never taken as a failure: the delta stays *pending* and every later call
   on the handle first publishes it again idempotently (``upload_if_absent``; existing bytes
   equal to ours are our own upload) -- so a pending delta ends up committed, or the handle
   learns it was fenced. Its SST ids therefore stay referenced while it is pending.

:class:`WriterLock` keeps a second writer off a store: an ``flock`` on the local store's
``<root>/.writer-lock`` (released by the kernel when the process dies), a process-wide registry
for memory stores, and on S3 a lock object with an owner and a heartbeat, refreshed by a daemon
thread with compare-and-swap writes (``If-Match``) and taken over once stale. Each store
chooses its mechanism (``ObjectStore.writer_lock``); the mechanisms are in
``hummock/object_store/locks.py``.

Thread safety: a ``Manifest`` may be shared by threads (one internal lock). One process should
write a store; any number may open it ``read_only`` and ``refresh()``.
Callers: the storage engine (``hummock/storage.py``): acquire the WriterLock, open the Manifest,
commit deltas; readers open read-only.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from hummock.errors import ConcurrentWriterError, CorruptionError, HummockError, InvalidArgumentError
from hummock.killpoints import kill_point
from hummock.object_store import ObjectStore
from hummock.object_store.base import ObjectNotFoundError, ObjectStoreError
from hummock.object_store.locks import LOCK_OBJECT_PATH
from hummock.sstable.meta import sst_object_path
from hummock.version import (
    DEFAULT_NUM_LEVELS, HummockVersion, VersionConflictError, VersionDelta, apply,
)
from hummock.version_codec import decode_delta, decode_version, encode_delta, encode_version

__all__ = ["Manifest", "WriterLock", "ConcurrentWriterError", "ManifestNotFoundError", "OutcomeUnknownError",
           "checkpoint_path", "delta_path", "MANIFEST_PREFIX", "LOCK_OBJECT_PATH"]

log = logging.getLogger(__name__)

MANIFEST_PREFIX = "manifest/"
_NAME = re.compile(r"manifest/(checkpoint|delta)-(\d{20})")
_SST_PREFIX = sst_object_path(0).split("/")[0] + "/"
_LOAD_ATTEMPTS = 3  # re-list when an object vanished under us (a concurrent rotation)
_RESOLVE_ATTEMPTS = 3  # in-line tries of a manifest write before it is left pending
_RESOLVE_BACKOFF = 0.05  # seconds, doubled per try


class OutcomeUnknownError(ObjectStoreError):
    """A manifest write failed after it may have been applied (a lost reply); the delta stays
    pending on the handle, which finishes it on its next call (module invariant 5)."""


class ManifestNotFoundError(HummockError, FileNotFoundError):
    """The store holds no manifest and the caller did not ask to create one."""


def checkpoint_path(version_id: int) -> str:
    return f"{MANIFEST_PREFIX}checkpoint-{version_id:020d}"


def delta_path(version_id: int) -> str:
    return f"{MANIFEST_PREFIX}delta-{version_id:020d}"


class _Vanished(Exception):
    """An object listed a moment ago is gone (rotation by the writer): list again."""


class Manifest:
    """The current version of one store and the log that persists it (module doc)."""

    def __init__(self, store: ObjectStore, version: HummockVersion, checkpoint_id: int, *,
                 checkpoint_interval: int, read_only: bool):
        """Private: use :meth:`open`."""
        self.store = store
        self.checkpoint_interval = checkpoint_interval
        self.read_only = read_only
        self._current = version
        self._checkpoint_id = checkpoint_id
        self._fenced = False  # lost a race to another writer: this handle never writes again
        self._pending = None  # (version, delta bytes) whose upload had an unknown outcome
        self._token = uuid.uuid4().hex[:16]   # stamped on our deltas (VersionDelta.writer)
        self._lock = threading.RLock()
        # rotation deletes on a thread of their own (module doc, invariant 4); the executor is
        # made on the first rotation with something to delete
        self.background_rotation = False
        self._deleter = None

    @classmethod
    def open(cls, store: ObjectStore, *, create: bool = True, read_only: bool = False,
             checkpoint_interval: int = 64, num_levels: int = DEFAULT_NUM_LEVELS) -> Manifest:
        """Load the store's current version (module doc, invariant 3).

        An empty store gets ``HummockVersion.empty(num_levels)`` as checkpoint 0 when ``create``
        and not ``read_only``, else ManifestNotFoundError; a store with SST objects but no
        manifest raises CorruptionError (starting over would reuse SST ids). Raises CorruptionError (naming the
        object) for an unreadable delta or an unrecoverable checkpoint, ObjectStoreError for I/O.
        """
        if not isinstance(checkpoint_interval, int) or checkpoint_interval < 1:
            raise InvalidArgumentError(f"checkpoint_interval must be an int >= 1, got {checkpoint_interval!r}")
        loaded = _load(store)
        if loaded is None:
            if store.exists(checkpoint_path(0)):   # the anchor (invariant 4): never rotated away
                raise _inconsistent_listing(store)
            if read_only or not create:
                raise ManifestNotFoundError(f"no manifest in {store!r}")
            if store.list(_SST_PREFIX):  # a lost manifest: a new one would reuse SST ids
                raise CorruptionError("store holds SST objects but no manifest; refusing to "
                                      "start a new one", object=MANIFEST_PREFIX)
            version = HummockVersion.empty(num_levels)
            if not store.upload_if_absent(checkpoint_path(0), encode_version(version)):
                loaded = _load(store)  # created concurrently: use that one
                if loaded is None:
                    raise _inconsistent_listing(store)
            else:
                loaded = (version, 0)
        return cls(store, loaded[0], loaded[1], checkpoint_interval=checkpoint_interval,
                   read_only=read_only)

    @property
    def current(self) -> HummockVersion:
        """The newest version this handle knows (immutable; safe to keep)."""
        return self._current

    @property
    def last_checkpoint_id(self) -> int:
        return self._checkpoint_id

    def referenced_sst_ids(self) -> frozenset[int]:
        """Ids of the SSTs the current version references (vacuum must also keep pinned ones)."""
        return self._current.sst_ids()

    def commit(self, delta: VersionDelta) -> HummockVersion:
        """Apply ``delta`` and persist it as ``delta-<id>``; return the new current version.

        REQUIRES: not read-only (InvalidArgumentError). Raises VersionConflictError or
        InvalidArgumentError from :func:`apply` (nothing written); ConcurrentWriterError if
        another writer already created ``delta-<id>``; :class:`OutcomeUnknownError` if the
        upload failed in a way that may have stored it (module invariant 5): the delta then
        stays *pending*, and the next call on this handle (or :meth:`resolve_pending`) finishes
        it -- adopts it if it landed, uploads it again if not -- before anything else. A
        pending delta is never dropped, so its SST ids stay referenced.
        """
        with self._lock:
            if self.read_only:
                raise InvalidArgumentError("this manifest was opened read-only")
            self._resolve_pending()
            self._require_unfenced()
            version = apply(self._current, delta)
            # the handle's token makes our bytes unique: found stored, they are our own upload
            self._pending = (version, encode_delta(dataclasses.replace(delta, writer=self._token)))
            self._resolve_pending()
            if version.id - self._checkpoint_id >= self.checkpoint_interval:
                self._write_checkpoint()
            return version

    def _require_unfenced(self) -> None:
        if self._fenced:
            raise ConcurrentWriterError(
                "another writer committed to this store after this handle opened it (fenced); "
                "this handle refuses every write -- reopen the store to write again")

    @property
    def fenced(self) -> bool:
        """Whether another writer took the store over: the handle refuses every write."""
        return self._fenced

    @property
    def pending(self) -> bool:
        """Whether a delta whose upload had an unknown outcome still waits to be resolved."""
        return self._pending is not None

    def resolve_pending(self) -> HummockVersion:
        """Finish a pending delta (see :meth:`commit`); return the current version. Raises
        OutcomeUnknownError while the store keeps failing, ConcurrentWriterError if another
        writer stored a different delta under its id."""
        with self._lock:
            self._resolve_pending()
            return self._current

    def _resolve_pending(self) -> None:
        """Publish ``self._pending`` idempotently: create ``delta-<id>`` if absent, else accept
        it only if the stored bytes are ours (our own earlier, unacknowledged upload)."""
        if self._pending is None:
            return
        version, data = self._pending
        path = delta_path(version.id)
        for attempt in range(_RESOLVE_ATTEMPTS):
            try:
                kill_point("manifest.before_delta_write")
                if not self.store.upload_if_absent(path, data):
                    try:
                        stored = self.store.read(path)
                    except ObjectNotFoundError:
                        stored = None   # deleted by a rotation: only another writer rotates past it
                    if stored is not None and stored != data and not _decodes(stored, path):
                        # a short or damaged read of the object, not a rival's delta: read again
                        raise ObjectStoreError(f"{path} read back damaged ({len(stored)} bytes)",
                                               path=path)
                    if stored != data:
                        self._pending, self._fenced = None, True
                        raise ConcurrentWriterError(
                            f"another writer committed version {version.id} ({path} exists); "
                            f"this handle is stale")
                kill_point("manifest.after_delta_write")
                checkpoints = _ids(self.store, "checkpoint")[0]
            except ObjectStoreError as exc:
                if attempt + 1 == _RESOLVE_ATTEMPTS:
                    raise OutcomeUnknownError(
                        f"the upload of {path} failed and its outcome is unknown ({exc}); the "
                        f"delta stays pending and the next call on this store retries it",
                        path=path) from exc
                log.warning("manifest write of %s failed (attempt %d of %d, retrying): %s",
                            path, attempt + 1, _RESOLVE_ATTEMPTS, exc)
                time.sleep(_RESOLVE_BACKOFF * 2 ** attempt)
                continue
            if len(checkpoints) >= 2 and checkpoints[-2] >= version.id:  # invariant 2
                self._pending, self._fenced = None, True
                raise ConcurrentWriterError(
                    f"another writer committed version {version.id} and checkpointed version "
                    f"{checkpoints[-1]}; this handle is stale and its {path} is void")
            self._pending = None
            self._current = version
            return

    def confirm_head(self) -> None:
        """Raise ConcurrentWriterError unless this handle's version is still the newest in the
        store: no ``delta-<id+1>`` and no checkpoint above it (another writer took over).
        Vacuum calls it before deleting anything. Raises ObjectStoreError for I/O."""
        with self._lock:
            self._resolve_pending()
            head = self._current.id
            if self.store.exists(delta_path(head + 1)) or max(
                    _ids(self.store, "checkpoint")[0], default=-1) > head:
                self._fenced = True
                raise ConcurrentWriterError(
                    f"another writer committed past version {head} of this handle; it is fenced "
                    f"and must not delete anything")

    def reserve_sst_ids(self, count: int) -> range:
        """Persist a ``reserve_ids`` delta and return the ids it reserves (version module doc).

        Raises as :meth:`commit`. The ids are safe to use only after this returns.
        """
        with self._lock:
            self._resolve_pending()
            self._require_unfenced()
            before = self._current.next_sst_id
            return range(before, self.commit(VersionDelta.reserve_sst_ids(self._current, count)).next_sst_id)

    def refresh(self) -> HummockVersion:
        """Replay what other processes committed since; return the new current version.

        Raises CorruptionError for an unreadable delta, ObjectStoreError for I/O.
        """
        with self._lock:
            self._resolve_pending()
            self._reload()
            return self._current

    def checkpoint(self) -> None:
        """Write a checkpoint of the current version now (and rotate). Raises ObjectStoreError."""
        with self._lock:
            if self.read_only:
                raise InvalidArgumentError("this manifest was opened read-only")
            self._write_checkpoint(raise_errors=True)

    def _reload(self) -> None:
        version = _replay(self.store, self._current)
        # the chain may stop early when a rotation deleted the deltas we lag behind
        if max(_ids(self.store, "checkpoint")[0], default=-1) > version.id:
            loaded = _load(self.store)
            if loaded is not None and loaded[0].id > version.id:
                version, self._checkpoint_id = loaded
        self._current = version

    def _write_checkpoint(self, raise_errors: bool = False) -> None:
        version, previous = self._current, self._checkpoint_id
        data, path = encode_version(version), checkpoint_path(version.id)
        try:
            if not self.store.upload_if_absent(path, data) and self.store.read(path) != data:
                # never rotate onto a checkpoint we did not write (it may be the corrupt one
                # open() skipped): the older checkpoint and its deltas must stay
                log.warning("manifest %s exists with other bytes; not rotating", path)
                return
            self._checkpoint_id = version.id
            checkpoints, deltas = _ids(self.store)
            doomed = ([checkpoint_path(c) for c in checkpoints if 0 < c < previous]
                      + [delta_path(d) for d in deltas if d <= previous])
            if doomed and self.background_rotation and not raise_errors:
                if self._deleter is None:
                    self._deleter = ThreadPoolExecutor(1, thread_name_prefix="hummock-rotation")
                try:
                    self._deleter.submit(self._delete_rotated, version.id, doomed)
                except RuntimeError:   # interpreter shutdown, or no thread: delete in line
                    self.store.delete(doomed)
            elif doomed:
                self.store.delete(doomed)
        except ObjectStoreError as exc:
            if raise_errors:
                raise
            log.warning("manifest checkpoint of version %d in %r failed (retried later): %s",
                        version.id, self.store, exc)

    def _delete_rotated(self, version_id: int, paths: list[str]) -> None:
        """The deletes of the rotation at ``version_id``, on the rotation thread."""
        try:
            self.store.delete(paths)
        except Exception as exc:   # (a closed store too) the next rotation lists them again
            log.warning("manifest rotation at version %d in %r failed to delete old objects "
                        "(retried later): %s", version_id, self.store, exc)

    def close(self) -> None:
        """Wait for the deletes of background rotations (module doc, invariant 4). The handle
        stays usable; idempotent."""
        with self._lock:
            deleter, self._deleter = self._deleter, None
        if deleter is not None:
            deleter.shutdown(wait=True)


def _decodes(data: bytes, path: str) -> bool:
    try:
        decode_delta(data, object=path)
        return True
    except CorruptionError:
        return False


def _inconsistent_listing(store: ObjectStore) -> ObjectStoreError:
    return ObjectStoreError(
        f"the manifest of {store!r} exists (checkpoint 0 is stored) but listing it shows no "
        f"checkpoint: the store's listing lags behind its writes; not opening an empty version "
        f"over it -- try again")


def _ids(store: ObjectStore, kind: str = "") -> tuple[list[int], list[int]]:
    """(checkpoint ids, delta ids) in the store, ascending; unknown names are ignored.
    ``kind`` ("checkpoint" or "delta") lists only that kind."""
    checkpoints, deltas = [], []
    for meta in store.list(MANIFEST_PREFIX + kind):
        match = _NAME.fullmatch(meta.path)
        if match:
            (checkpoints if match.group(1) == "checkpoint" else deltas).append(int(match.group(2)))
    return sorted(checkpoints), sorted(deltas)


def _load(store: ObjectStore) -> tuple[HummockVersion, int] | None:
    """(current version, id of the checkpoint it grew from), or None for an empty store."""
    for _ in range(_LOAD_ATTEMPTS):
        checkpoints, deltas = _ids(store)
        if not checkpoints:
            if deltas:
                raise CorruptionError("manifest deltas without any checkpoint",
                                      object=delta_path(deltas[0]))
            return None
        try:
            return _load_listed(store, checkpoints, deltas)
        except _Vanished:
            continue
    raise ObjectStoreError(f"manifest of {store!r} kept changing while it was loaded "
                           f"({_LOAD_ATTEMPTS} attempts); is a rotation stuck?")


def _load_listed(store, checkpoints: list[int], deltas: list[int]) -> tuple[HummockVersion, int]:
    skipped: list[CorruptionError] = []
    for c in reversed(checkpoints):
        path = checkpoint_path(c)
        try:
            base = decode_version(_read(store, path), object=path)
            if base.id != c:
                raise CorruptionError("checkpoint holds another version", object=path,
                                      expected=c, found=base.id)
        except CorruptionError as exc:
            skipped.append(exc)
            continue
        version = _replay(store, base)
        if any(d > version.id for d in deltas):
            if version.id + 1 in deltas:
                raise _Vanished()
            if skipped:   # a fallback whose chain was rotated away (checkpoint 0): the cause
                raise skipped[0]
            raise CorruptionError("manifest delta missing while later deltas exist",
                                  object=delta_path(version.id + 1))
        if skipped:
            if version.id < checkpoints[-1]:  # the chain does not reach the corrupt checkpoint
                raise skipped[0]
            log.warning("skipped %d corrupt manifest checkpoint(s) (newest: %s); version %d "
                        "rebuilt from checkpoint %d and its deltas", len(skipped), skipped[0], version.id, c)
        return version, c
    raise skipped[0]


def _read(store: ObjectStore, path: str) -> bytes:
    try:
        return store.read(path)
    except ObjectNotFoundError:
        raise _Vanished() from None


def _replay(store: ObjectStore, version: HummockVersion) -> HummockVersion:
    """Apply delta-(id+1), delta-(id+2), ... up to the first missing one."""
    while True:
        path = delta_path(version.id + 1)
        try:
            data = store.read(path)
        except ObjectNotFoundError:
            return version
        delta = decode_delta(data, object=path)
        try:
            version = apply(version, delta)
        except (VersionConflictError, InvalidArgumentError) as exc:
            raise CorruptionError(f"manifest delta does not apply: {exc}", object=path,
                                  expected=version.id, found=delta.prev_id) from exc


# --- the single-writer lock ------------------------------------------------------------------

class WriterLock:
    """Keeps a second writer off one store (module doc). A context manager that releases.

    ``lost`` becomes True if another process took the (S3) lock over; :meth:`check` raises then.
    Delta fencing (invariant 2) still guards the manifest in that case.
    """

    def __init__(self, impl, owner: str):
        """Private: use :meth:`acquire`."""
        self._impl = impl
        self.owner = owner

    @classmethod
    def acquire(cls, store: ObjectStore, owner: str, *, stale_after_seconds: float = 30.0,
                force: bool = False) -> WriterLock:
        """Take the writer lock of ``store`` for ``owner`` (a description shown to rivals).

        Raises ConcurrentWriterError if another holder has it: an flock (local; ``force`` cannot
        break a live process's lock, and a dead one's is already gone), a registered writer
        (memory; ``force`` takes it over), or an S3 lock object refreshed less than
        ``stale_after_seconds`` ago (``force`` takes it over regardless). InvalidArgumentError
        for a bad owner or a store without a lock mechanism.
        """
        if not isinstance(owner, str) or not owner or len(owner) > 200:
            raise InvalidArgumentError(f"owner must be a str of 1 to 200 characters, got {owner!r}")
        if not isinstance(stale_after_seconds, (int, float)) or stale_after_seconds <= 0:
            raise InvalidArgumentError(f"stale_after_seconds must be > 0, got {stale_after_seconds!r}")
        info = {"owner": owner, "host": socket.gethostname(), "pid": os.getpid(),
                "token": uuid.uuid4().hex}
        store = store.lock_store() if hasattr(store, "lock_store") else store
        # each store knows how it locks (hummock/object_store/locks.py)
        if not callable(getattr(store, "writer_lock", None)):
            raise InvalidArgumentError(f"{store!r} offers no writer lock mechanism")
        impl = store.writer_lock(info, stale_after=float(stale_after_seconds), force=force)
        return cls(impl, owner)

    @property
    def lost(self) -> bool:
        return self._impl.lost

    @property
    def held(self) -> bool:
        return not self._impl.released and not self._impl.lost

    def check(self) -> None:
        """Raise ConcurrentWriterError if the lock was released or taken over."""
        if not self.held:
            raise ConcurrentWriterError(f"writer lock of {self.owner!r} is "
                                        f"{'released' if self._impl.released else 'lost to another writer'}")

    def confirm(self) -> None:
        """Raise ConcurrentWriterError unless the lock is provably ours *now*: held, not taken
        over, and (S3) our last heartbeat younger than the stale limit -- a writer that was cut
        off or paused past its lease must not act on it (vacuum calls this before each delete
        batch). Raises ObjectStoreError if the lock object cannot be read."""
        self.check()
        self._impl.confirm()
        self.check()

    def release(self) -> None:
        """Give the lock up; idempotent. Never raises for I/O (logs instead)."""
        if not self._impl.released:
            self._impl.released = True
            self._impl.release()

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()
