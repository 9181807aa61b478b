"""The read side of :class:`~hummock.storage.HummockStorage`: read states, pins and reader leases.

``ReadSide`` is a base class of ``HummockStorage`` holding the methods that serve reads: it
builds each immutable read state (``_refresh_state``: imms, staging SSTs and the committed
version's SST readers, ``hummock/read_view.py``) and installs the stable native
``get``/``multi_get``/``iter`` over it (a :class:`~hummock.read_view.ReadHandle`), opens SSTs
through the block and meta caches, pins versions for snapshots, and keeps a read-only opener's
reader lease naming the oldest version it may still read (``hummock/leases.py``). It owns no
state: every attribute it reads is set up by ``HummockStorage.__init__``, and its callers hold
the engine lock where a method says so. :class:`Snapshot` (what ``HummockStorage.snapshot``
returns), :class:`ReaderSstStore` (a reader's SST view of the object store) and
:func:`open_pinned`/:func:`refresh_pinned` (a reader's manifest loads, timed against its lease)
live here too.

Callers: :mod:`hummock.storage` only (``Snapshot`` is re-exported there).
"""

from __future__ import annotations

import time

from hummock.errors import InvalidArgumentError
from hummock.leases import VersionExpiredError
from hummock.manifest import Manifest
from hummock.object_store import ObjectStore
from hummock.object_store.base import ObjectNotFoundError, ObjectStoreError
from hummock.options import StorageOptions
from hummock.read_view import ReadHandle, ReadState, SstReader
from hummock.row_count import count_rows
from hummock.scan_splits import split_keys
from hummock.sstable.reader import Sstable

PIN_ATTEMPTS = 5              # a reader's tries at loading a version and pinning it in time


class ReadSide:
    """The read methods of ``HummockStorage`` (see the module docstring)."""

    # --- SST handles and read states ----------------------------------------------------------

    def _reader_for(self, info) -> SstReader:
        reader = self._readers.get(info.sst_id)
        if reader is None:
            reader = SstReader(info, self._open_sst)
            self._readers[info.sst_id] = reader
        return reader

    def _open_sst(self, info) -> Sstable:
        return Sstable.open(self._sst_store, info, meta_cache=self._meta_cache, block_cache=self._block_cache)

    def _refresh_state(self) -> None:
        """Swap in a new immutable read state (under the lock); gets in flight keep the old one."""
        if self._closed:
            return
        if self.read_only:
            state = ReadState({}, (), self._view)
        else:
            imms = self._buffer.frozen()
            staging = tuple(self._reader_for(info) for info in self._staging)
            state = ReadState(imms, staging, self._view, self._marks)
        old, self._state = self._state, state
        if self._handle is None:
            self._handle = ReadHandle(state)
            handle = self._handle
            self.get, self.multi_get, self.iter = handle.get, handle.multi_get, handle.iter
            self.scan_prefixes = handle.scan_prefixes
        else:
            self._handle.state = state
        if old is not None:
            self._retired_states.add(old)

    def _pin(self, version) -> None:
        self._pins[version.id] += 1
        self._pinned_versions[version.id] = version

    def _unpin(self, version, epoch: int) -> None:
        with self._lock:
            self._snapshot_epochs[epoch] -= 1
            if self._snapshot_epochs[epoch] <= 0:
                del self._snapshot_epochs[epoch]
            self._pins[version.id] -= 1
            if self._pins[version.id] <= 0:
                del self._pins[version.id]
                del self._pinned_versions[version.id]

    # --- reads ------------------------------------------------------------------------------

    def get(self, table_id: int, key: bytes, epoch: int):
        """The value of ``key`` in ``table_id`` at ``epoch`` (the newest version <= epoch), or
        ``None`` when absent or deleted. Sees this store's uncommitted writes.
        Raises ``InvalidArgumentError`` for a bad table id, key or epoch.

        (An open store replaces this method on the instance by its ``ReadHandle``'s native
        ``get``, which behaves the same and always reads the current state: a caller may keep
        ``g = store.get``.)"""
        return self._state.get(table_id, key, epoch)

    def multi_get(self, table_id: int, keys, epoch: int) -> list:
        """``[get(table_id, k, epoch) for k in keys]``, all from one read state."""
        return self._state.multi_get(table_id, keys, epoch)

    def iter(self, table_id: int, epoch: int, start: bytes | None = None, end: bytes | None = None, *,
             prefix: bytes | None = None, reverse: bool = False):
        """Yield ``(key, value)`` for keys in ``[start, end)`` (and with ``prefix``) at ``epoch``,
        ascending (descending with ``reverse=True``). The iterator reads the store as it was when
        ``iter`` was called, for as long as it is referenced; returned bytes are the caller's.
        (Replaced on an open store by its ``ReadHandle``'s ``iter``, like ``get``.)"""
        return self._state.iter(table_id, epoch, start, end, prefix=prefix, reverse=reverse)

    def scan_prefixes(self, table_id: int, epoch: int, prefixes) -> tuple[list, list, list]:
        """Every ``(key, value)`` at ``epoch`` whose key starts with each of ``prefixes``, in
        one call: ``(keys, values, ends)``, prefix i's pairs being ``keys[ends[i-1]:ends[i]]``
        (from 0 for the first), each prefix's ascending -- ``list(iter(table_id, epoch,
        prefix=p))`` for every ``p``, from one read state, without a Python iterator per prefix
        (a join probing the keys of a chunk). Prefix filters apply as for ``iter``. (Replaced
        on an open store by its ``ReadHandle``'s, like ``get``.)"""
        return self._state.scan_prefixes(table_id, epoch, prefixes)

    # --- versions and pins ----------------------------------------------------------------------

    def version(self):
        """The current committed :class:`~hummock.version.HummockVersion` (immutable)."""
        return self._version

    def refresh(self) -> int:
        """Read-only openers: pick up versions committed by the writer; returns max_committed_epoch."""
        self._require_open()
        with self._lock:
            if self._lease is not None:
                version = refresh_pinned(self._manifest, self._lease, self._oldest_pinned_id)
            else:
                version = self._manifest.refresh()
            if version is not self._version:
                self._set_version(version)
            return self._version.max_committed_epoch

    def _oldest_pinned_id(self, current_id: int) -> int:
        """The oldest version id this process may still read: ``current_id``, the version now
        installed, snapshots' versions and those of replaced read states a scan still holds.
        Call it under the engine lock (``refresh``, ``_publish_lease``, ``_lease_floor``):
        only there are the version and the retired states one consistent pair. It retries a
        collection that changed while it was read (the retired states are a weak set that
        shrinks as scans are collected)."""
        for _ in range(10):
            try:
                ids = [current_id, self._version.id, *self._pinned_versions]
                ids += [state.version.id for state in list(self._retired_states)
                        if state.version is not None]
                return min(ids)
            except RuntimeError:   # changed size during iteration: read again
                continue
        return min(current_id, self._lease.version_id if self._lease.version_id is not None else current_id)

    def _lease_floor(self) -> int:
        """What a lease renewal names (``ReaderLease.follow``): ``_oldest_pinned_id`` read
        under the engine lock, so the version and the retired read states are one consistent
        pair -- ``refresh()`` installs a new version and files the replaced state as retired
        under that lock, and a renewal in between would name the new version while a scan of
        the old one is still open."""
        with self._lock:
            return self._oldest_pinned_id(self._version.id)

    def _publish_lease(self) -> None:
        """Readers: re-publish the lease after a pin changed (under the lock)."""
        if self._lease is not None:
            oldest = self._oldest_pinned_id(self._version.id)
            if oldest != self._lease.version_id:
                self._lease.publish(oldest)


def open_pinned(store, options: StorageOptions, read_only: bool, lease) -> Manifest:
    """Open the manifest; a reader then publishes its lease, within half its lease time of
    starting to load (leases.py) -- or loads again."""
    for _ in range(PIN_ATTEMPTS):
        started = time.monotonic()
        manifest = Manifest.open(store, create=not read_only, read_only=read_only,
                                 checkpoint_interval=options.checkpoint_interval)
        if lease is None:
            return manifest
        lease.publish(manifest.current.id)
        if time.monotonic() - started <= lease.ttl_s / 2:
            return manifest
    raise ObjectStoreError(f"could not pin a version of {store!r}: loading the manifest and "
                           f"publishing the reader lease took over {lease.ttl_s / 2} s {PIN_ATTEMPTS} times")


def refresh_pinned(manifest: Manifest, lease, oldest_pinned) -> object:
    """A reader's refresh: reload, then publish the lease naming ``oldest_pinned(new id)``
    within half the lease time of starting, or reload again (leases.py). When the lease names
    that version already (nothing new was committed), it is not stored again: its renewal
    thread keeps it alive, and no version it does not protect is being read -- so a refresh
    per SQL statement costs a manifest read, not an upload."""
    for _ in range(PIN_ATTEMPTS):
        started = time.monotonic()
        version = manifest.refresh()
        oldest = oldest_pinned(version.id)
        if oldest == lease.version_id:
            return version
        lease.publish(oldest)
        if time.monotonic() - started <= lease.ttl_s / 2:
            return version
    raise ObjectStoreError(f"could not pin a version: refreshing and publishing the reader lease "
                           f"took over {lease.ttl_s / 2} s {PIN_ATTEMPTS} times")


class ReaderSstStore:
    """What a read-only opener reads SSTs through: a missing SST means the writer vacuumed it
    (this reader's lease lapsed, or its version is older than any lease protected), which
    becomes :class:`VersionExpiredError` telling the caller to ``refresh()``."""

    def __init__(self, store: ObjectStore):
        self._store = store

    def _expired(self, path: str, exc) -> VersionExpiredError:
        return VersionExpiredError(
            f"{path} of the version this reader holds was vacuumed by the writer (the reader's "
            f"lease lapsed or its version is too old); call refresh() and read again")

    def read(self, path: str, start=None, end=None) -> bytes:
        try:
            return self._store.read(path, start, end)
        except ObjectNotFoundError as exc:
            raise self._expired(path, exc) from exc

    def local_file(self, path: str) -> bytes | None:
        """The wrapped store's :meth:`~hummock.object_store.ObjectStore.local_file` (a vacuumed
        SST's file fails the native read, whose fallback to :meth:`read` raises as above)."""
        return self._store.local_file(path)

    @property
    def closed(self) -> bool:
        return self._store.closed

    def size(self, path: str) -> int:
        try:
            return self._store.size(path)
        except ObjectNotFoundError as exc:
            raise self._expired(path, exc) from exc


class Snapshot:
    """A pinned committed epoch: ``get``, ``multi_get`` and ``iter`` read it until ``release``."""

    def __init__(self, storage, epoch: int, state):
        self._storage = storage
        self.epoch = epoch
        self._state = state
        self._released = False

    def get(self, table_id: int, key: bytes):
        self._require_live()
        return self._state.get(table_id, key, self.epoch)

    def multi_get(self, table_id: int, keys) -> list:
        self._require_live()
        return self._state.multi_get(table_id, keys, self.epoch)

    def iter(self, table_id: int, start=None, end=None, *, prefix=None, reverse=False):
        self._require_live()
        return self._state.iter(table_id, self.epoch, start, end, prefix=prefix, reverse=reverse)

    def count_rows(self, table_id: int) -> int | None:
        """The rows a full scan of ``table_id`` yields here, from SST metadata alone, or
        ``None`` when the metadata cannot decide it (:mod:`hummock.row_count`)."""
        self._require_live()
        return count_rows(self._state, table_id, self.epoch)

    def split_keys(self, table_id: int, parts: int, start: bytes | None = None, end: bytes | None = None,
                   min_bytes: int = 4 << 20) -> list[bytes]:
        """Table keys cutting ``[start, end)`` of ``table_id`` into at most ``parts`` ranges of
        about equal stored bytes, each at least ``min_bytes``, from SST metadata alone
        (:mod:`hummock.scan_splits`); ascending, strictly inside the range; ``[]``: read it whole."""
        self._require_live()
        return split_keys(self._state, table_id, parts, start, end, min_bytes)

    def _require_live(self) -> None:
        if self._released:
            raise InvalidArgumentError("snapshot already released")
        self._storage._require_open()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._storage._unpin(self._state.version, self.epoch)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
