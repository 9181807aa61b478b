"""Reading one pinned version from other processes: job pins and version readers.

A distributed reader (``relational/spark.py``) plans on one process and reads on many. The
planner pins the version it planned against with a **job pin** (:func:`pin_version`): a reader
lease object (the format of ``hummock/leases.py``, docs/format.md "Reader leases") naming that
version, with its own time to live and *never renewed*: it keeps the version's SSTs from the
writer's vacuum for ``ttl_s`` after it was written, whether or not the planner still runs, and
then simply expires (the writer's vacuum removes it later). No one releases it early; executors
never touch it -- they release nothing they did not pin.

Executors read exactly that version with :class:`VersionReader`: given the version (its bytes
travel with the task) and the object store, it reads at any epoch in ``[safe_epoch,
max_committed_epoch]`` of that version -- the same answer the planner would get, however far the
writer has moved on (committed, compacted) since. A read below ``safe_epoch`` raises
``ExpiredEpochError``; an SST missing because the pin expired raises ``VersionExpiredError``.
Nothing here writes except :func:`pin_version`.

Callers: ``relational/spark.py``; tests.
"""

from __future__ import annotations

import json
import os
import socket
import uuid

from hummock.errors import InvalidArgumentError
from hummock.leases import LEASE_PREFIX, MAX_LEASE_TTL_S, VersionExpiredError
from hummock.object_store.base import ObjectNotFoundError
from hummock.read_view import ReadState, SstReader, VersionView, version_groups
from hummock.sstable.cache import LruCache
from hummock.sstable.reader import Sstable
from hummock.version_codec import decode_version

__all__ = ["pin_version", "VersionReader"]


def pin_version(store, version_id: int, ttl_s: float) -> str:
    """Write a job pin naming ``version_id`` on ``store`` (an ``ObjectStore``), alive for
    ``ttl_s`` seconds from now; return its object path. REQUIRES: the caller already holds
    ``version_id`` by some other lease (its read-only opener's) while this is written, so there
    is no moment the version is unprotected. Raises ObjectStoreError; InvalidArgumentError
    for a ``ttl_s`` outside ``(0, MAX_LEASE_TTL_S]`` (a writer's vacuum would take such a pin for malformed)."""
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, (int, float)) or not 0 < ttl_s <= MAX_LEASE_TTL_S:
        raise InvalidArgumentError(f"ttl_s must be a number of seconds in (0, {MAX_LEASE_TTL_S}], got {ttl_s!r}")
    path = f"{LEASE_PREFIX}reader-job-{uuid.uuid4().hex}"
    body = {"version_id": int(version_id), "ttl_s": float(ttl_s), "pid": os.getpid(),
            "host": socket.gethostname(), "job": True}
    store.upload(path, json.dumps(body).encode())
    return path


class _PinnedSstStore:
    """SST reads of a pinned version: a missing SST means the pin expired."""

    def __init__(self, store):
        self._store = store

    def _expired(self, path: str) -> VersionExpiredError:
        return VersionExpiredError(f"{path} of the pinned version was vacuumed: the job pin expired "
                                   f"before this read (raise the pin's time to live and read again)")

    def read(self, path: str, start=None, end=None) -> bytes:
        try:
            return self._store.read(path, start, end)
        except ObjectNotFoundError:
            raise self._expired(path) from None

    def size(self, path: str) -> int:
        try:
            return self._store.size(path)
        except ObjectNotFoundError:
            raise self._expired(path) from None


class VersionReader:
    """Reads one version of a store: ``iter``/``get`` as ``HummockStorage``'s, committed data only.

    ``version``: a ``HummockVersion`` or its bytes (``version_codec.encode_version``). ``block_cache_bytes``: a
    private block cache. Not thread-safe to build; reads are as thread-safe as the store's.
    """

    def __init__(self, store, version, block_cache_bytes: int = 16 << 20):
        if isinstance(version, (bytes, bytearray, memoryview)):
            version = decode_version(bytes(version), object="pinned version")
        self.version = version
        ssts = _PinnedSstStore(store)
        cache = LruCache(block_cache_bytes, "pinned_block_cache")
        meta_cache = LruCache(4 << 20, "pinned_meta_cache")
        opener = lambda info: Sstable.open(ssts, info, meta_cache=meta_cache, block_cache=cache)  # noqa: E731
        l0, levels = version_groups(version, lambda info: SstReader(info, opener))
        view = VersionView(l0, levels, version, version.safe_epoch, version.table_watermarks)
        self._state = ReadState({}, (), view, version.table_watermarks)

    @property
    def max_committed_epoch(self) -> int:
        return self.version.max_committed_epoch

    def _check(self, epoch) -> None:
        if isinstance(epoch, int) and epoch > self.version.max_committed_epoch:
            raise InvalidArgumentError(f"epoch {epoch} is above the pinned version's max_committed_epoch "
                                       f"{self.version.max_committed_epoch}")

    def get(self, table_id: int, key: bytes, epoch: int):
        self._check(epoch)
        return self._state.get(table_id, key, epoch)

    def iter(self, table_id: int, epoch: int, start: bytes | None = None, end: bytes | None = None):
        """``(key, value)`` of ``table_id`` in ``[start, end)`` at ``epoch``, ascending.
        REQUIRES ``safe_epoch <= epoch <= max_committed_epoch`` of the version (else
        ``ExpiredEpochError`` / ``InvalidArgumentError``)."""
        self._check(epoch)
        return self._state.iter(table_id, epoch, start, end)
