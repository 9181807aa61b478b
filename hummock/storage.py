"""``HummockStorage``: the KV API of the engine (DESIGN.md sections 3, 5 and 10).

Write path: ``ingest_batch`` checks a sorted batch and adds it to the shared buffer as an imm,
visible at once to reads on this store. ``seal_epoch`` ends writes at <= epoch and hands the
imms of those epochs to the uploader (``hummock/uploader.py``), which builds and uploads them as
staging SSTs on its own thread while writers go on with later epochs; ``sync`` waits for the
uploads of epochs <= epoch (starting any not yet started), ``commit_epoch`` publishes the staging
SSTs in one version delta (the commit point) and advances ``max_committed_epoch``;
``checkpoint`` does all three. Past ``shared_buffer_capacity`` the oldest epochs' imms are
spilled early, one epoch per upload so a commit never publishes a later epoch's data; the writer
that crossed the capacity waits for the spill (back-pressure), never the engine lock's holders.
No SST is built or uploaded under the engine lock.

Read path: every change swaps in a new immutable :class:`~hummock.read_view.ReadState` (imms,
staging SSTs, the committed version's SST readers); ``get``/``multi_get`` read the current one
without taking the lock (native code end to end), ``iter`` pins its version for the scan's
lifetime (the scan holds its state), ``snapshot`` pins an epoch and its version. Vacuum spares
every SST that the version, a snapshot, the staging list or a still-referenced state reads.
The read-side methods (read states, SST handles, pins, snapshots' reads, a reader's lease)
live in ``hummock/read_side.py``, a base class of ``HummockStorage``.

Table watermarks (``update_table_watermarks``, ``truncate_table``; ``hummock/table_watermarks.py``):
records that make reads at epochs >= theirs hide keys at once, published with the commit of
their epoch in its version delta, applied by compaction; a truncation's whole SSTs leave the
version after the commit (``_drop_truncated_ssts``). These methods live in
``hummock/marks_side.py``, another base class of ``HummockStorage``; the argument checks in
``hummock/arg_checks.py``.

Recovery: opening replays the manifest; anything not committed is gone, and the writer's first
vacuum removes SSTs a crash left behind. A second writer on the same URL fails with
``ConcurrentWriterError``; read-only openers see committed epochs and ``refresh()`` to newer ones.

Thread safety: every public method may be called from several threads; mutations are serialized
by one lock; reads run concurrently. Contracts are on each method (REQUIRES / raises).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import uuid
import weakref
from collections import Counter

from hummock.compaction.host import EngineHost
from hummock.compaction.manager import CompactionManager
from hummock.compaction.picker import L0_STOP_FACTOR, PickerConfig, pending_bytes
from hummock.arg_checks import MAX_TABLE_ID, _check_epoch, _check_table_id, _check_user_epoch
from hummock.compaction.spark import check_spark_store
from hummock.errors import ExpiredEpochError, HummockError, InvalidArgumentError
from hummock.flush import flush_imms
from hummock.killpoints import kill_point
from hummock.leases import ReaderLease, live_lease_floor
from hummock.manifest import ConcurrentWriterError, Manifest, ManifestNotFoundError, WriterLock
from hummock.object_store import LocalObjectStore, ObjectStore, open_object_store
from hummock.object_store.base import ObjectNotFoundError, ObjectStoreError
from hummock.options import StorageOptions
from hummock.marks_side import MarksSide
from hummock.read_side import ReaderSstStore, ReadSide, Snapshot, open_pinned
from hummock.read_view import ReadState, VersionView, version_groups
from hummock.shared_buffer import ENTRY_OVERHEAD, SharedBuffer, check_batch
from hummock.sstable.cache import LruCache
from hummock.sstable.meta import MAX_PREFIX_LEN, sst_object_path
from hummock.uploader import Uploader, UploadTask
from hummock.table_watermarks import with_pending
from hummock.version import VersionDelta

COMMIT_LOG_LIMIT = 65536    # commit-log entries kept without a retention window (committed_epoch_at)
log = logging.getLogger(__name__)


class StoreClosedError(HummockError, ValueError):
    """The store was closed; open it again to use it."""


class ReadOnlyError(HummockError, PermissionError):
    """A write was attempted on a store opened with ``read_only=True``."""


class HummockStorage(ReadSide, MarksSide):
    """An open store. Create with :meth:`open`; close with :meth:`close` or a ``with`` block."""

    def __init__(self, store: ObjectStore, options: StorageOptions, manifest: Manifest, lock, read_only: bool,
                 lease: ReaderLease | None = None):
        self._store = store
        self._lease = lease   # read-only openers: the lease object pinning their oldest version
        # SSTs are read through a view that turns a vacuumed SST into VersionExpiredError for readers
        self._sst_store = ReaderSstStore(store) if read_only else store
        self.options = options
        self.read_only = read_only
        self._manifest = manifest
        manifest.background_rotation = not read_only   # a commit never waits for its deletes
        self._writer_lock = lock
        self._lock = threading.RLock()
        # serializes changes of the manifest (commits, compactions, id reservations, vacuum);
        # always taken before self._lock, never while holding it, so manifest I/O happens
        # without the engine lock and writers go on meanwhile
        self._manifest_lock = threading.RLock()
        self._buffer = SharedBuffer()
        self._staging: list = []              # SstableInfos synced but not committed, oldest first
        self._staging_epochs: dict = {}       # sst id -> (lowest, highest) user epoch it holds
        self._block_cache = LruCache(options.block_cache_capacity, "block_cache")
        self._meta_cache = LruCache(options.meta_cache_capacity, "meta_cache")
        self._readers: dict = {}  # sst id -> SstReader, for the version and staging
        self._pins: Counter = Counter()       # version id -> snapshots pinning it
        self._pinned_versions: dict = {}
        # replaced read states that a get or a scan still holds: vacuum spares their SSTs
        self._retired_states: weakref.WeakSet = weakref.WeakSet()
        self._reserved_ids: list[int] = []
        self._unsettled_ids: set[int] = set()  # handed out, not yet in a version: vacuum spares them
        self._fate_unknown_ids: set[int] = set()  # released while a manifest delta was pending
        self._snapshot_epochs: Counter = Counter()
        # vacuum bookkeeping: sst id -> (id of the version it left, monotonic time it left)
        self._retired: dict[int, tuple[int, float]] = {}
        self._opened = (manifest.current.id, time.monotonic())   # retirement of unknown SSTs
        self._last_vacuum = self._opened[1]   # when the last vacuum listed the SSTs (_vacuum_due)
        self._leases_seen: dict = {}   # vacuum's memory of reader leases (leases.live_lease_floor)
        # retention: (monotonic time, epoch) of commits, oldest first; epochs committed before
        # open count as committed at open
        self._commit_times = collections.deque([(time.monotonic(), manifest.current.max_committed_epoch)])
        self._unpublished_epoch = 0   # the newest epoch committed without a delta (commit_epoch)
        self._compactor = None
        self._host = EngineHost(self)   # what compaction runners see of the engine
        self._uploader = Uploader(self._upload)
        self._uploading: list[UploadTask] = []   # submitted, not ended, in submission order
        self._uploading_imms: set[int] = set()   # id() of the imms of those tasks
        self._upload_log = None   # a list collecting (kind, lowest, highest, submitted, finished)
        self._builder_options = None   # cache of _sst_builder_options()
        self._flush_options = None     # cache of _flush_builder_options(): (its base, it)
        self._closed = False
        self._state = None
        self._handle = None   # the stable get/multi_get/iter (ReadHandle) over self._state
        # table id -> TableWatermarks the reads apply: the version's plus uncommitted ones
        self._marks = {}
        # tables whose truncated SSTs may still be removed whole (_drop_truncated_ssts)
        self._truncated_tables = set() if read_only else {
            t for t, r in manifest.current.table_watermarks.items() if r.truncations}
        self._set_version(manifest.current)
        self._synced_epoch = self._version.max_committed_epoch
        self._buffer.seal(self._version.max_committed_epoch)
        self.counters = Counter()

    # --- lifecycle -----------------------------------------------------------------------

    @classmethod
    def open(cls, url, options: StorageOptions | None = None, *, read_only: bool = False) -> HummockStorage:
        """Open (creating if needed, unless ``read_only``) the store at ``url``: a path,
        ``file:///path``, ``s3://bucket/prefix?endpoint=...`` or ``memory://[name]``.

        Raises ``ConcurrentWriterError`` if another writer holds the store, ``CorruptionError`` if
        the manifest is damaged (naming the object).
        """
        if options is None:
            options = StorageOptions()
        elif not isinstance(options, StorageOptions):
            raise InvalidArgumentError(
                f"options must be a StorageOptions, got {type(options).__name__} (for a dict d, "
                f"pass StorageOptions(**d))")
        if options.compactor == "spark" and not read_only:
            check_spark_store(url)   # Spark executors must reach the store: not memory://
        if isinstance(url, ObjectStore):
            store = url
        else:
            try:
                s3 = options.s3_options()
                if read_only:   # a reader never creates what it opens
                    s3.pop("create_bucket_if_missing", None)
                store = open_object_store(url, create=not read_only, **s3)
            except ObjectNotFoundError as exc:   # a reader never creates the store it asks for
                raise ManifestNotFoundError(f"no store at {url!r} to open read-only: {exc}") from None
        lock = lease = None
        try:
            if not read_only:
                lock = WriterLock.acquire(store, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
            lease = ReaderLease(store, options.reader_lease_s) if read_only else None
            manifest = open_pinned(store, options, read_only, lease)
            storage = cls(store, options, manifest, lock, read_only, lease)
            if lease is not None:   # renewals move the lease forward once old scans end
                lease.follow(storage._lease_floor)
        except BaseException:
            if lock is not None:
                lock.release()
            if lease is not None:
                lease.close()
            if not isinstance(url, ObjectStore):
                store.close()
            raise
        if not read_only:
            local = store.lock_store()
            if isinstance(local, LocalObjectStore):   # temp files of uploads a crash cut short
                try:   # a dead writer's at once (our lock proves it dead), others' once old
                    local.cleanup_temp(older_than_seconds=options.vacuum_min_age_s, writer_files=True)
                except OSError as exc:   # best effort: leftovers only cost space
                    log.warning("could not remove temporary files under %r: %s", local.root, exc)
            try:
                storage.vacuum()   # the last crash's orphans; best effort, the next vacuum retries
            except ConcurrentWriterError:
                storage.close()    # another writer moved on right after our lock: not ours
                raise
            except HummockError as exc:
                log.warning("vacuum at open failed (retried later): %s", exc)
            except BaseException:
                storage.close()
                raise
            if options.compactor in ("local", "spark"):
                storage._compactor = CompactionManager(storage._host)
                storage._compactor.start()
        return storage

    def close(self) -> None:
        """Release the store. Uncommitted data is dropped (it was never durable); a running
        compaction task finishes first (its result is applied or discarded). An epoch committed
        without a delta (nothing to publish, ``commit_epoch``) is published now, in one delta,
        so a clean reopen comes back at it (best effort: else at the last published epoch,
        whose data is the same)."""
        if self._compactor is not None:
            self._compactor.stop()
        # queued uploads end with StoreClosedError; a running one finishes (and is dropped)
        self._uploader.close(StoreClosedError("the store was closed before this upload ran"))
        if self._lease is not None:   # before the lock: its renewal thread may wait for it
            self._lease.close()
        with self._manifest_lock, self._lock:
            if self._closed:
                return
            if self._manifest.pending:   # finish a commit whose outcome is unknown, if we can
                try:
                    self._manifest.resolve_pending()
                except HummockError as exc:
                    log.warning("closing with a manifest delta of unknown outcome (a reopen "
                                "sees whether it landed): %s", exc)
            self._publish_unpublished_epoch()
            self._manifest.close()   # the deletes of a background rotation end under the lock
            self._closed = True
            self._handle.closed_error = StoreClosedError
            self._buffer.clear()
            if self._writer_lock is not None:
                self._writer_lock.release()
            self._block_cache.clear()
            self._meta_cache.clear()
            self._store.close()

    def __enter__(self) -> HummockStorage:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store is closed")

    def _require_writer(self) -> None:
        self._require_open()
        if self.read_only:
            raise ReadOnlyError("the store was opened read_only=True")

    # --- writes -------------------------------------------------------------------------------

    def ingest_batch(self, table_id: int, kv_pairs, epoch: int) -> None:
        """Write a batch at ``epoch``: ``(key, value)`` pairs sorted strictly ascending by key,
        value ``None`` = delete. Visible at once to reads on this store at epochs >= ``epoch``.

        When the batch would take the shared buffer past ``shared_buffer_capacity``, the oldest
        epochs are spilled first and this call waits for those uploads (back-pressure); if one
        fails, its error is raised and nothing was written.

        REQUIRES: ``epoch`` > the sealed epoch, with its low 16 bits zero (``new_epoch()``).
        Raises ``InvalidArgumentError`` (a ``ValueError``) for anything else; nothing is written then.
        """
        self._require_writer()
        table_id = _check_table_id(table_id)
        epoch = _check_epoch(epoch)
        keys, values, size = check_batch(kv_pairs)
        if not keys:
            return
        spilled = False
        while True:
            with self._lock:
                self._require_writer()
                if not spilled and self._buffer.size + size > self.options.shared_buffer_capacity:
                    self._buffer.check_add(table_id, epoch)
                    waits = self._start_spill()
                else:
                    self._buffer.add(table_id, epoch, keys, values, size)
                    self.counters["ingested_keys"] += len(keys)
                    self.counters["ingested_bytes"] += size - ENTRY_OVERHEAD * len(keys)   # keys + values
                    self._refresh_state()
                    return
            for task in waits:   # outside the lock: uploads install themselves under it
                task.wait()      # a failed spill raises here, before the add
            spilled = True

    def seal_epoch(self, epoch: int) -> None:
        """No more writes at epochs <= ``epoch``; their imms start uploading in the background
        (``sync`` waits for them). REQUIRES: not below the sealed epoch."""
        self._require_writer()
        epoch = _check_user_epoch(epoch)
        with self._lock:
            if epoch < self._buffer.sealed_epoch:
                raise InvalidArgumentError(f"cannot seal epoch {epoch}: already sealed up to {self._buffer.sealed_epoch}")
            self._buffer.seal(epoch)
            self._start_upload(epoch, "seal")

    def sync(self, epoch: int) -> None:
        """Seal ``epoch`` and wait until the imms of epochs <= ``epoch`` are staging SSTs (still
        uncommitted: a crash loses them); uploads of later epochs go on meanwhile. Raises the
        error of a failed upload (its imms stay buffered: syncing again retries them). Syncing
        an epoch already synced does nothing."""
        self._require_writer()
        epoch = _check_user_epoch(epoch)
        me, waits = threading.get_ident(), []
        try:
            with self._lock:
                self._buffer.seal(epoch)
                waits = self._start_upload(epoch, "sync")   # its task reserved for this thread
            for task in waits:
                if task.reserved == me:
                    self._uploader.run_inline(task)   # on this thread, in its turn: no hand-offs
                task.wait()
        finally:
            for task in waits:
                if task.reserved == me:   # not run here (an earlier task failed): the worker's
                    self._uploader.release(task)
        with self._lock:
            self._require_writer()
            # every task waited for succeeded; imms <= epoch left over can only be those of a
            # task that failed before this call and that another thread's sync resubmitted
            again = self._has_imms_up_to(epoch)
            if not again:
                self._synced_epoch = max(self._synced_epoch, epoch)
        if again:
            self.sync(epoch)

    def commit_epoch(self, epoch: int) -> None:
        """Publish every write of epochs <= ``epoch`` atomically (one version delta) and make
        ``epoch`` the ``max_committed_epoch``. Syncs first if needed (waiting for the uploads
        of epochs <= ``epoch`` without holding the engine lock).

        An epoch with nothing to publish -- no SST, no watermark or truncation record (an idle
        barrier) -- writes no delta: ``max_committed_epoch`` advances in memory only, reads and
        snapshots at it see exactly the last published state (nothing changed since), and an
        idle store writes nothing. ``close()`` publishes that epoch in one delta; after a crash
        the reopen's ``max_committed_epoch`` is the last epoch that published something, whose
        data is the same.

        REQUIRES: ``epoch`` > ``max_committed_epoch``, and no ``sync`` of a later epoch put data
        of ``epoch`` and of later epochs into the same SSTs (commit the synced epoch instead).
        Raises ``InvalidArgumentError`` otherwise; nothing is published then.
        """
        self._require_writer()
        epoch = _check_user_epoch(epoch)
        while True:
            with self._manifest_lock:
                with self._lock:
                    self._check_ownership()
                    self._adopt_pending()
                    committed = self.max_committed_epoch
                    if epoch == committed:
                        return   # already committed (a retry after an error whose commit landed)
                    if epoch < committed:
                        raise InvalidArgumentError(
                            f"epoch {epoch} is not above max_committed_epoch {committed}")
                    staged = epoch <= self._synced_epoch and not self._has_imms_up_to(epoch)
                    delta = self._commit_delta(epoch) if staged else None
                    if delta is not None and delta.new_sub_level is None and not delta.table_watermarks:
                        self._commit_in_memory(epoch)   # nothing to publish: no delta
                        break
                if delta is not None:
                    self._publish(delta)
                    break
            self.sync(epoch)
        if self._compactor is not None:
            self._stall_while_l0_is_full()

    def _commit_in_memory(self, epoch: int) -> None:
        """Commit ``epoch``, which publishes nothing, without a delta (under both locks;
        ``commit_epoch``): the committed epoch advances, the commit is logged (time travel),
        reads go on from the same version."""
        self._unpublished_epoch = epoch
        self._log_commit(epoch)
        self.counters["commits_without_delta"] += 1
        self._drop_truncated_ssts()

    def _publish_unpublished_epoch(self) -> None:
        """At close (under both locks): write the delta of the newest epoch committed without
        one, if any; best effort (a failure is logged: a reopen then comes back at the last
        published epoch, with the same data)."""
        epoch = self._unpublished_epoch
        if self.read_only or epoch <= self._version.max_committed_epoch or self._manifest.pending:
            return
        try:
            self._check_ownership()
            if self._has_imms_up_to(epoch) or self._staged_up_to(epoch, "{highest}"):
                return   # (cannot happen: nothing of those epochs is left unpublished)
            version = self._manifest.commit(VersionDelta.commit(self._version, epoch, ()))
            self._set_version(version)
        except HummockError as exc:
            log.warning("closing without publishing committed epoch %d (it held no data; a reopen "
                        "comes back at epoch %d, with the same data): %s", epoch,
                        self._version.max_committed_epoch, exc)

    def _commit_delta(self, epoch: int) -> VersionDelta:
        """The commit delta of ``epoch`` (under both locks; everything of epochs <= ``epoch``
        is staged): the staging SSTs holding only epochs <= ``epoch``."""
        chosen = self._staged_up_to(epoch, "commit {highest} instead")
        return VersionDelta.commit(self._version, epoch, chosen, overlapping=len(chosen) > 1,
                                   table_watermarks=self._marks_to_publish(epoch))

    def _staged_up_to(self, epoch: int, advice: str) -> tuple:
        """Under the locks: the staging SSTs a commit of ``epoch`` publishes; an SST that also
        holds later epochs raises ``InvalidArgumentError`` ending with ``advice`` (formatted
        with ``highest``, the SST's newest epoch)."""
        chosen = []
        for info in self._staging:
            lowest, highest = self._staging_epochs[info.sst_id]
            if highest <= epoch:
                chosen.append(info)
            elif lowest <= epoch:
                raise InvalidArgumentError(f"epoch {epoch} was synced together with later epochs (up to "
                                           f"{highest}); " + advice.format(highest=highest))
        return tuple(chosen)

    def _publish(self, delta: VersionDelta) -> None:
        """Write the commit delta (under the manifest lock only: reads, writes and uploads go
        on), then install the version under the engine lock."""
        try:
            version = self._manifest.commit(delta)
        except BaseException:   # on an unknown outcome the delta is pending: the staging SSTs stay
            with self._lock:
                self._set_version(self._manifest.current)
            raise
        with self._lock:
            self._set_version(version)   # drops the committed staging SSTs; logs the commit
            self.counters["commits"] += 1
            self._drop_truncated_ssts()
            if self._compactor is not None:
                self._compactor.notify()   # (its condition shares the engine lock)

    def checkpoint(self, epoch: int) -> None:
        """``seal_epoch`` + ``sync`` + ``commit_epoch``. After an error the commit's outcome
        may be unknown; calling ``checkpoint(epoch)`` again is safe (it finishes or retries
        the commit, and returns at once if it had landed)."""
        self.commit_epoch(epoch)

    # --- bulk loads: SSTs built elsewhere (hummock/external_ssts.py) ---------------------------

    def reserve_sst_ids(self, count: int, *, hold: bool = True) -> range:
        """Persist a reservation of ``count`` fresh SST ids (a ``reserve_ids`` delta) and return
        them; objects may be written under them (``SstableBuilder.to_store``) once this returns.
        ``hold=True``: this store's vacuum spares them until ``ingest_ssts`` publishes them or
        ``release_sst_ids``; ``hold=False`` (builders in other processes): only the age rule does.
        Raises ``InvalidArgumentError`` for a bad count, ``ReadOnlyError``, ``ConcurrentWriterError``."""
        self._require_writer()
        with self._manifest_lock, self._lock:
            if not hold:
                self._check_ownership()
                try:
                    return self._manifest.reserve_sst_ids(count)
                finally:
                    self._set_version(self._manifest.current)
            return self._reserve_ids(count)

    def release_sst_ids(self, ids) -> None:
        """Stop holding ``ids`` (from ``reserve_sst_ids``): unpublished ones become orphans for vacuum."""
        self._release_ids(ids)

    def ingest_ssts(self, table_id: int, infos, epoch: int) -> None:
        """``commit_epoch(epoch)`` that also publishes SSTs of ``table_id`` built outside the
        engine under reserved ids: all of them and this store's writes of epochs <= ``epoch`` in
        one commit delta, or nothing (docs/engine.md "Bulk loads"). REQUIRES: the table is empty
        (else ``TableNotEmptyError``); ``epoch`` a user epoch above ``max_committed_epoch``;
        each SST exists and matches its info, at versions in ``[epoch, epoch | 0xFFFF]`` (else
        ``InvalidArgumentError``; nothing is published). After an error, calling it again with
        the same arguments is safe, as for ``checkpoint``."""
        from hummock.external_ssts import ingest

        self._require_writer()
        ingest(self, _check_table_id(table_id), infos, _check_user_epoch(epoch))

    def bulk_load_landed(self, table_id: int, infos, epoch: int) -> bool:
        """Whether ``ingest_ssts(table_id, infos, epoch)`` was published -- for a loader that
        must not redo work around a retry (a catalog record, say) after an unknown outcome.
        Answered from the version's durable record of the load, so it stays true after
        compaction rewrote the SSTs and after later commits (for the newest
        ``hummock.version.MAX_BULK_LOADS`` loads). Finishes a pending manifest delta first
        (raises while the store keeps failing)."""
        from hummock.external_ssts import landed

        self._require_writer()
        return landed(self, _check_table_id(table_id), infos, _check_user_epoch(epoch))

    def commit_ssts(self, epoch: int, infos, *, table_watermarks: dict | None = None) -> None:
        """``commit_epoch(epoch)`` that also publishes SSTs built elsewhere under reserved ids
        -- any tables, several producers (Spark tasks' ``TaskStore.finish``), tables that hold
        data already -- and ``table_watermarks`` ``{table_id: {vnode: W or (lo, hi)}}`` applied
        at ``epoch`` as ``update_table_watermarks`` would: all of it and this store's writes of
        epochs <= ``epoch`` in one commit delta, or nothing (docs/engine.md "Task stores and
        multi-producer commits"; ``infos`` may be empty). REQUIRES: ``epoch`` a user epoch
        above ``max_committed_epoch``; each SST exists and matches its info, at versions in
        ``[epoch, epoch | 0xFFFF]`` (else ``InvalidArgumentError``; nothing is published).
        After an error, calling it again with the same arguments is safe, as for ``checkpoint``."""
        from hummock.multi_commit import commit

        self._require_writer()
        commit(self, _check_user_epoch(epoch), infos, table_watermarks)

    def commit_ssts_landed(self, epoch: int, infos) -> bool:
        """Whether ``commit_ssts(epoch, infos, ...)`` was published, from the version's durable
        record of it (true after compaction rewrote the SSTs and after later commits, for the
        newest ``hummock.version.MAX_BULK_LOADS`` bulk loads and multi-producer commits).
        Finishes a pending manifest delta first (raises while the store keeps failing)."""
        from hummock.multi_commit import check_infos, landed

        self._require_writer()
        epoch = _check_user_epoch(epoch)
        return landed(self, epoch, check_infos(infos, epoch))

    def _check_ownership(self) -> None:
        """Raise ConcurrentWriterError if this writer was fenced: its lock was taken over or
        released, or another writer committed past it. A fenced store never publishes again."""
        self._writer_lock.check()
        if self._manifest.fenced:
            raise ConcurrentWriterError("another writer committed to this store since it was "
                                        "opened; this handle is fenced -- reopen it to write")

    def _adopt_pending(self) -> None:
        """Finish a manifest delta left pending by an earlier error and adopt the version
        (under the lock). Raises while the store keeps failing."""
        if self._manifest.pending:
            try:
                self._manifest.resolve_pending()
            finally:
                self._set_version(self._manifest.current)

    # --- flushing ----------------------------------------------------------------------------

    def _all_imms(self):
        return self._buffer.all_imms()

    def _start_upload(self, epoch: int, kind: str) -> list:
        """Hand the buffered imms of user epochs <= ``epoch`` that no task holds yet to the
        uploader -- one task per epoch for a seal, one task for a sync (under the lock); return every unfinished task holding epochs
        <= ``epoch``, oldest first -- what a ``sync(epoch)`` waits for."""
        imms = [m for m in self._all_imms() if m.user_epoch <= epoch and id(m) not in self._uploading_imms]
        if imms and kind == "seal":   # one task per epoch: each stays committable on its own
            for group in _by_user_epoch(imms):
                self._submit(group, kind)
        elif imms:                    # a sync merges its epochs into as few SSTs as it can
            self._submit(imms, kind)
        return [task for task in self._uploading if task.lowest <= epoch]

    def _start_spill(self) -> list:
        """Hand the oldest epochs' imms to the uploader, one epoch per task, until what is not
        uploading fits in half the capacity (under the lock); return the unfinished tasks."""
        target = self.options.shared_buffer_capacity // 2
        idle = [m for m in self._all_imms() if id(m) not in self._uploading_imms]
        idle_size = sum(m.size for m in idle)
        for imms in _by_user_epoch(idle):
            if idle_size <= target:
                break
            self._submit(imms, "spill")
            idle_size -= sum(m.size for m in imms)
            self.counters["spills"] += 1
        return list(self._uploading)

    def _has_imms_up_to(self, epoch: int) -> bool:
        """Whether the buffer still holds writes of user epochs <= ``epoch`` (under the lock)."""
        return any(m.user_epoch <= epoch for m in self._all_imms())

    def _submit(self, imms: list, kind: str) -> None:
        epochs = [m.user_epoch for m in imms]
        task = UploadTask(imms, min(epochs), max(epochs), kind)
        task.submitted = time.perf_counter()
        self._uploading.append(task)
        self._uploading_imms.update(id(m) for m in imms)
        self._uploader.submit(task, inline=kind == "sync")   # sync() runs it or releases it

    def _upload(self, task: UploadTask) -> None:
        """The uploader thread's work: build and upload ``task``'s SSTs without the engine lock,
        then, under it, make them staging SSTs and drop the imms in one step. On error the ids
        handed out are released (their objects are orphans for vacuum) and the imms stay
        buffered for a retry. Always ends the task."""
        handed_out = []

        def new_sst_id():
            handed_out.append(self._new_sst_id_locked())
            return handed_out[-1]
        infos, error, metas = None, None, []
        try:
            if self._closed:
                raise StoreClosedError("the store was closed before this upload ran")
            # published unsynced: the commit delta's upload_if_absent syncs them together
            # with itself (ObjectStore.deferred_durability; uncommitted SSTs need no durability)
            with self._store.deferred_durability():
                infos = flush_imms(task.imms, self._store, self._flush_builder_options(),
                                   self.options.target_sst_size, new_sst_id, metas)
            kill_point("flush.after_sst_upload")
        except BaseException as exc:   # noqa: BLE001 -- handed to the waiters
            error = exc
        with self._lock:
            self._uploading.remove(task)
            self._uploading_imms.difference_update(id(m) for m in task.imms)
            if error is None and self._closed:
                error = StoreClosedError("the store was closed while this upload ran")
            if error is not None:
                self._release_ids(handed_out)   # never in a delta: an orphan for vacuum
            else:
                for info, meta in zip(infos, metas):
                    self._unsettled_ids.discard(info.sst_id)
                    self._staging.append(info)
                    self._staging_epochs[info.sst_id] = (task.lowest, task.highest)
                    # the meta as built: the SST's first open (a read, compaction planning)
                    # neither reads nor decodes it
                    self._meta_cache.put(info.sst_id, meta, meta.size_in_memory)
                taken = {id(m) for m in task.imms}
                self._buffer.remove(lambda imm: id(imm) in taken)
                self.counters["flushed_ssts"] += len(infos)
                self.counters["flushed_bytes"] += sum(info.file_size for info in infos)
                self._refresh_state()
            task.finished = time.perf_counter()
            if self._upload_log is not None:
                self._upload_log.append((task.kind, task.lowest, task.highest, task.submitted, task.finished))
        task.error = error
        task.done.set()

    def _new_sst_id(self) -> int:
        """A fresh SST id (under the lock), held until published or released: taken from a
        block of 256 reserved in the manifest first, never reused."""
        if not self._reserved_ids:
            self._reserved_ids = list(self._reserve_ids(256))
        return self._reserved_ids.pop(0)

    def _new_sst_id_locked(self) -> int:
        """``_new_sst_id`` for callers holding no lock (the uploader): the manifest lock first."""
        with self._manifest_lock, self._lock:
            return self._new_sst_id()

    def _hand_out_ids(self, count: int) -> range:
        """``count`` consecutive fresh ids, held (under the lock; a compaction's outputs): the
        front of the block ``_new_sst_id`` takes from when it holds enough -- already
        persisted as reserved, so no manifest write -- else a reservation of their own."""
        self._check_ownership()
        block = self._reserved_ids
        if 0 < count <= len(block):   # the block is one ascending run of ids (a range's list)
            ids = range(block[0], block[0] + count)
            del block[:count]
            return ids
        return self._reserve_ids(count)

    def _reserve_ids(self, count: int) -> range:
        """Persist a ``reserve_ids`` delta for ``count`` fresh ids and hold them (vacuum spares
        held ids until ``_release_ids`` or a version holds them). Under the lock; the one place
        ids are reserved (uploads, compaction in-process, in workers and on Spark)."""
        self._check_ownership()
        try:
            ids = self._manifest.reserve_sst_ids(count)
        finally:   # a pending delta may have been finished on the way
            self._set_version(self._manifest.current)
        self._unsettled_ids.update(ids)
        return ids

    def _release_ids(self, ids) -> None:
        """Let vacuum delete the objects of ``ids`` (handed out, never published), unless a
        manifest delta is pending: it may name them, so they wait for its resolution."""
        with self._lock:
            if self._manifest.pending:
                self._fate_unknown_ids.update(ids)
            else:
                self._unsettled_ids.difference_update(ids)

    def _stall_while_l0_is_full(self) -> None:
        """Slow (never fail) a writer while L0 has L0_STOP_FACTOR x the trigger's sub-levels."""
        stop = self._compactor.config.l0_trigger * L0_STOP_FACTOR
        waited = 0.0
        with self._lock:   # the wait releases it
            while len(self._version.l0) >= stop and waited < L0_STALL_LIMIT_SECONDS and not self._closed:
                self.counters["write_stalls"] += 1
                self._compactor._wake.wait(timeout=0.1)
                waited += 0.1

    def _watermark(self) -> int:
        """The epoch compaction may drop versions below (under the lock): the lowest of the
        oldest snapshot, the retention window's floor and the committed epoch. Every read at or
        above it stays exact; a compaction using it raises the version's ``safe_epoch`` to it."""
        watermark = self._version.max_committed_epoch
        if self._snapshot_epochs:
            watermark = min(watermark, min(self._snapshot_epochs))
        retention = self.options.retention_seconds
        if retention:
            horizon = time.monotonic() - retention
            times = self._commit_times
            while len(times) > 1 and times[1][0] <= horizon:   # the state current at the horizon
                times.popleft()
            watermark = min(watermark, times[0][1] if times[0][0] <= horizon else self._version.safe_epoch)
        return watermark

    def _log_commit(self, epoch: int) -> None:
        """Append to the commit log (under the lock; ``_set_version`` calls it whenever the
        committed epoch rises, whoever installed the version). The retention window trims it in
        ``_watermark``; without one, entries whose epoch compaction has made unreadable go, and
        at most ``COMMIT_LOG_LIMIT`` stay, so a long-running writer's log is bounded."""
        times = self._commit_times
        times.append((time.monotonic(), epoch))
        if not self.options.retention_seconds:
            safe = self._version.safe_epoch
            while len(times) > 1 and (times[1][1] <= safe or len(times) > COMMIT_LOG_LIMIT):
                times.popleft()

    def committed_epoch_at(self, unix_time: float) -> int | None:
        """The ``max_committed_epoch`` a read at wall-clock time ``unix_time`` (seconds) saw: the
        epoch of the last commit at or before it, from the commit log the retention window keeps
        (commits of this process, including one adopted after a lost reply, logged when it was
        adopted; a read-only opener logs the epochs its ``refresh()`` brought in; epochs
        committed before open count as committed at open).
        None when ``unix_time`` is before the log (before open, or past the retention window).
        Time travel (sql/bind/time_travel.py) maps a time to the state committed by then, so data
        written after it in an epoch that began earlier stays out."""
        with self._lock:
            at = unix_time - (time.time() - time.monotonic())   # wall clock -> the log's monotonic clock
            for when, epoch in reversed(self._commit_times):   # recent times are the usual question
                if when <= at:
                    return epoch
            return None

    @property
    def commit_log_start(self) -> tuple:
        """``(unix_time, epoch)`` of the oldest entry of the commit log ``committed_epoch_at``
        reads: the open (with the epoch committed before it) or the state current at the start of
        the retention window. Earlier times have no known state."""
        with self._lock:
            when, epoch = self._commit_times[0]
            return when + (time.time() - time.monotonic()), epoch

    @property
    def min_readable_epoch(self) -> int:
        """Reads at epochs below this raise ``ExpiredEpochError``: compaction may have dropped
        the versions they need (``HummockVersion.safe_epoch``). It only rises, and only when a
        compaction is applied; a snapshot or ``retention_seconds`` holds it back."""
        return self._version.safe_epoch

    def _after_compaction(self) -> None:
        """Delete what the last compaction made unreachable (called holding no lock), when
        something may be due (:meth:`_vacuum_due`). Best effort: the compaction is applied
        either way, and the next vacuum retries."""
        if not self._vacuum_due():
            self.counters["vacuums_not_due"] += 1
            return
        try:
            self.vacuum()
        except HummockError as exc:
            log.warning("vacuum after compaction failed (retried by the next one): %s", exc)

    def _vacuum_due(self) -> bool:
        """Whether a vacuum now may delete anything: with ``vacuum_min_age_s`` = 0 always;
        else when the SST that left the version first (``_retired`` is in leaving order) left
        it that long ago, or, once that long passed since the open, when the last vacuum was
        that long ago (orphans: an object is deleted only when older than that). A compaction
        retires SSTs only ``vacuum_min_age_s`` (600 s) after it ran, so listing and
        statting every SST after each compaction (one per few epochs) deleted nothing; an
        orphan waits at most one more such interval."""
        grace = self.options.vacuum_min_age_s
        if grace == 0:
            return True
        now = time.monotonic()
        with self._lock:
            first = next(iter(self._retired.values()), None)
            if first is not None and now - first[1] >= grace:
                return True
            return now - self._opened[1] >= grace and now - self._last_vacuum >= grace

    def compact_all(self) -> int:
        """Compact until all data is in the last level (space reclaimed, reads from one run);
        returns the number of tasks applied. Runs in the caller's thread, next to any background
        compaction."""
        self._require_writer()
        manager = self._compactor or CompactionManager(self._host)
        return manager.compact_all()

    def compact_pending(self) -> int:
        """Run, in the caller's thread, the tasks the background compactor would pick now (L0
        triggers, level targets) until the picker has none; returns the number of tasks
        applied. For a store opened with ``compactor="none"`` (``hummock compact``): the same
        work the background thread does, on demand."""
        self._require_writer()
        manager = self._compactor or CompactionManager(self._host)
        return manager.compact_pending()

    def compact_range(self, table_id: int, start: bytes | None = None, end: bytes | None = None) -> int:
        """Compact the keys ``[start, end)`` of ``table_id`` (``None``: open-ended) into the last
        level, dropping what no reader can see (tombstones included); returns the number of tasks
        applied. Like ``compact_all``, in the caller's thread; SSTs reaching outside the range
        move with it."""
        self._require_writer()
        table_id = _check_table_id(table_id)
        prefix = table_id.to_bytes(4, "big")
        for name, key in (("start", start), ("end", end)):
            if key is not None and not isinstance(key, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"{name} must be bytes, got {type(key).__name__}")
        low = prefix + bytes(start or b"")
        if end is not None:
            high = prefix + bytes(end)
        else:
            high = None if table_id == MAX_TABLE_ID else (table_id + 1).to_bytes(4, "big")
        if high is not None and low >= high:
            return 0
        manager = self._compactor or CompactionManager(self._host)
        return manager.compact_range(low, high)

    # --- versions, pins and SST handles --------------------------------------------------

    def _set_version(self, version) -> None:
        """Install a new committed version (under the lock) and rebuild the read state.
        Staging SSTs the version now holds (a commit, maybe one finished late) leave staging."""
        old = getattr(self, "_version", None)
        self._version = version
        if old is not None and version.max_committed_epoch > self._commit_times[-1][1]:
            # every way a commit is installed logs it: a normal one, and one adopted after a
            # lost reply (by a retry, by the next call's _adopt_pending, or inside the next
            # manifest write), which reached the log before only if it was the normal path
            self._log_commit(version.max_committed_epoch)
        in_version = version.sst_ids()
        if old is not None and not self.read_only:
            now = time.monotonic()
            for sst_id in old.sst_ids() - in_version:
                self._retired.setdefault(sst_id, (version.id, now))
        self._unsettled_ids -= in_version
        if self._fate_unknown_ids and not self._manifest.pending:
            self._unsettled_ids -= self._fate_unknown_ids
            self._fate_unknown_ids.clear()
        if any(info.sst_id in in_version for info in self._staging):
            for info in self._staging:
                if info.sst_id in in_version:
                    del self._staging_epochs[info.sst_id]
            self._staging = [info for info in self._staging if info.sst_id not in in_version]
        if self._buffer.sealed_epoch >= version.max_committed_epoch:
            self._buffer.forget_offsets(version.max_committed_epoch)
        self._marks = with_pending(version.table_watermarks, self._marks, version.max_committed_epoch)
        l0, levels = version_groups(version, self._reader_for)
        self._view = VersionView(l0, levels, version, version.safe_epoch, version.table_watermarks)
        live = version.sst_ids() | {info.sst_id for info in self._staging}
        for sst_id in [i for i in self._readers if i not in live]:
            del self._readers[sst_id]
        self._refresh_state()

    # --- table options (prefix filters) --------------------------------------------------------

    def set_table_options(self, table_id: int, *, prefix_len: int | None) -> None:
        """Declare (``prefix_len`` an int in [1, 65535]) or drop (``None``) the key-prefix
        length of ``table_id``: the number of leading table-key bytes (after the 4-byte table
        id; for a state table, its 2-byte vnode and the first pk columns) that SSTs built from
        now on -- flushes and compactions, in every process -- index in a prefix filter, so an
        ``iter`` whose range lies within one prefix of at least that length skips SSTs without
        it, reading no block (docs/engine.md "Prefix filters"). Persisted in the version (one
        ``table_options`` delta; nothing is written when the declaration does not change).
        Reads stay exact whatever is declared. Raises ``InvalidArgumentError``, ``ReadOnlyError``.
        """
        self._require_writer()
        table_id = _check_table_id(table_id)
        if prefix_len is not None and (isinstance(prefix_len, bool) or not isinstance(prefix_len, int)
                                       or not 1 <= prefix_len <= MAX_PREFIX_LEN):
            raise InvalidArgumentError(f"prefix_len must be None or an int in [1, {MAX_PREFIX_LEN}], "
                                       f"got {prefix_len!r}")
        with self._manifest_lock, self._lock:   # (a manifest write: the manifest lock first)
            self._require_writer()
            self._check_ownership()
            self._adopt_pending()
            lens = dict(self._version.prefix_len_map)
            if lens.get(table_id) == prefix_len:
                return
            if prefix_len is None:
                del lens[table_id]
            else:
                lens[table_id] = prefix_len
            try:
                version = self._manifest.commit(VersionDelta.table_options(self._version, lens))
            finally:   # on an unknown outcome the delta is pending
                self._set_version(self._manifest.current)
            self._set_version(version)

    def table_options(self, table_id: int) -> dict:
        """The declared options of ``table_id``: ``{"prefix_len": n or None}``."""
        return {"prefix_len": self._version.prefix_len_map.get(_check_table_id(table_id))}

    def _sst_builder_options(self):
        """The SST builder settings of flushes and compactions: the options' plus the prefix
        lengths the current version declares (one object per declaration set)."""
        lens = self._version.table_prefix_lens
        cached = self._builder_options
        if cached is None or cached.prefix_lens != lens:
            cached = self._builder_options = self.options.sst_builder_options().replace(prefix_lens=lens)
        return cached

    def _flush_builder_options(self):
        """The SST builder settings of the L0 SSTs a sync or spill uploads: the compaction ones
        (:meth:`_sst_builder_options`) with ``flush_compression`` (default none: an L0 SST lives
        until the next L0 compaction rewrites it compressed, and lz4 was half of a flush's CPU)."""
        options = self._sst_builder_options()
        cached = self._flush_options
        if cached is None or cached[0] is not options:
            cached = self._flush_options = (options, options.replace(compression=self.options.flush_compression))
        return cached[1]

    @property
    def object_store(self):
        """The object store this storage keeps its SSTs and manifest in (for callers that stage
        their own objects beside them, e.g. the Spark pipeline's exchange files)."""
        return self._store

    @property
    def max_committed_epoch(self) -> int:
        """Every epoch <= it is committed: the version's, or above it an epoch committed
        without a delta because it had nothing to publish (``commit_epoch``)."""
        return max(self._version.max_committed_epoch, self._unpublished_epoch)

    def snapshot(self, epoch: int | None = None) -> Snapshot:
        """Pin committed ``epoch`` (default: ``max_committed_epoch``) and its version; use as a
        context manager. Compaction and vacuum keep everything the snapshot can read.

        REQUIRES: ``epoch`` <= ``max_committed_epoch``.
        """
        with self._lock:
            self._require_open()
            committed = self.max_committed_epoch
            epoch = committed if epoch is None else _check_epoch(epoch)
            if epoch > committed:
                raise InvalidArgumentError(f"snapshot epoch {epoch} is above max_committed_epoch {committed}")
            if epoch < self._version.safe_epoch:
                raise ExpiredEpochError(epoch, self._version.safe_epoch)
            self._pin(self._version)
            self._publish_lease()
            self._snapshot_epochs[epoch] += 1
            return Snapshot(self, epoch, ReadState({}, (), self._view))

    def stats(self) -> dict:
        with self._lock:
            version = self._version
            return {
                "max_committed_epoch": max(version.max_committed_epoch, self._unpublished_epoch),
                "version_id": version.id,
                "shared_buffer_bytes": self._buffer.size,
                "imms": len(self._buffer),
                "upload_tasks": len(self._uploading),
                "uploading_bytes": sum(task.size for task in self._uploading),
                "staging_ssts": len(self._staging),
                "l0_sub_levels": len(version.l0),
                "level_sizes": version.level_sizes(),
                "pinned_versions": dict(self._pins),
                "block_cache": self._block_cache.stats(),
                "meta_cache": self._meta_cache.stats(),
                "compaction": dict(self._compactor.stats) if self._compactor is not None else None,
                "compaction_pending_bytes": pending_bytes(
                    version, self._compactor.config if self._compactor is not None else PickerConfig()),
                "write_amplification": self._write_amplification(),
                **dict(self.counters),
            }

    def _write_amplification(self) -> float | None:
        """Bytes written to SSTs (flushes + compaction outputs) per byte ingested (keys +
        values) since open; ``None`` before anything was ingested."""
        ingested = self.counters["ingested_bytes"]
        if not ingested:
            return None
        compacted = self._compactor.stats["output_bytes"] if self._compactor is not None else 0
        return (self.counters["flushed_bytes"] + compacted) / ingested

    # --- vacuum -------------------------------------------------------------------------------

    def vacuum(self) -> int:
        """Delete SST objects nothing can read any more; return how many were deleted. Writers only.

        Deleted: SSTs that no version this process pins, staging list, running task or retired
        read state references, that are older than ``vacuum_min_age_s`` (a slow uploader, a
        paused process or a Spark task may still be writing a young one), and that left the
        version at least as long ago with no live reader lease naming an older version
        (readers in other processes, ``hummock/leases.py``). Only ids this writer could have
        handed out (below ``next_sst_id``) are candidates. Before each delete batch the writer
        confirms its lease and that no other writer committed past its version; a fenced or
        expired writer raises ``ConcurrentWriterError`` and deletes nothing more. A pending
        manifest delta is finished first (its SSTs must stay); raises if that fails.
        """
        self._require_writer()
        with self._manifest_lock:   # no version change meanwhile; writers and reads go on
            with self._lock:
                self._adopt_pending()
                self._last_vacuum = time.monotonic()
                version = self._version
                keep = set(version.sst_ids())
                for pinned in self._pinned_versions.values():
                    keep |= pinned.sst_ids()
                keep |= {info.sst_id for info in self._staging}
                keep |= self._unsettled_ids       # held ids: uploads and compactions in flight
                keep |= self._fate_unknown_ids
                keep.update(self._reserved_ids)
                for state in list(self._retired_states):
                    keep |= state.version.sst_ids() | {r.sst_id for r in state.staging}
                retired = dict(self._retired)
            # Ids handed out from now on are either held above (reserved before) or reserved
            # after -- at or above version.next_sst_id, never candidates.
            now = time.monotonic()
            grace = min_age = self.options.vacuum_min_age_s
            candidates, listed = [], set()
            metas = self._store.list("sst/")
            wall = self._store.now()   # the store's clock: no client skew in object ages
            for meta in metas:
                sst_id = _sst_id_of(meta.path)
                if sst_id is None:
                    continue
                listed.add(sst_id)
                if sst_id in keep or sst_id >= version.next_sst_id:
                    continue   # referenced, or reserved by another writer: never ours to delete
                if (wall - meta.last_modified).total_seconds() < min_age:
                    continue
                left_at, left_time = retired.get(sst_id, self._opened)
                if now - left_time < grace:
                    continue   # a reader may have loaded a version holding it just before it left
                candidates.append((left_at, sst_id, meta.path))
            self._forget_retired(retired, listed)
            if not candidates:
                return 0
            # listed after the grace check (leases.py); leases seen before and missing from a
            # lagging listing still count (self._leases_seen)
            floor = live_lease_floor(self._store, seen=self._leases_seen)
            doomed = [(sst_id, path) for left_at, sst_id, path in candidates
                      if floor is None or floor >= left_at]
            deleted = 0
            for start in range(0, len(doomed), VACUUM_BATCH):
                batch = doomed[start:start + VACUUM_BATCH]
                self._confirm_lease()
                self._store.delete([path for _, path in batch])
                with self._lock:
                    for sst_id, _ in batch:
                        self._retired.pop(sst_id, None)
                    self.counters["vacuumed_ssts"] += len(batch)
                deleted += len(batch)
                kill_point("vacuum.mid_delete")
            return deleted

    def _forget_retired(self, retired: dict, listed: set) -> None:
        """Drop the retirement records of SSTs that are gone (deleted earlier, or a crash's
        lost upload): not in the listing ``listed`` *and* absent when asked one by one. A
        listing may lag behind recent uploads (an eventually consistent store, or one that
        pages): an SST it misses keeps its record, so the next vacuum still measures its
        grace and its lease floor from the version it really left -- a lagging listing only
        delays deletion. A failed check keeps the record too."""
        for sst_id in [i for i in retired if i not in listed]:
            try:
                gone = not self._store.exists(sst_object_path(sst_id))
            except ObjectStoreError as exc:
                log.warning("vacuum could not check SST %d (its record stays): %s", sst_id, exc)
                continue
            if gone:
                with self._lock:
                    self._retired.pop(sst_id, None)

    def _confirm_lease(self) -> None:
        """Raise ConcurrentWriterError unless this writer still owns the store right now: its
        lock is live (not taken over, not expired) and no one committed past its version."""
        self._writer_lock.confirm()
        self._manifest.confirm_head()


def _by_user_epoch(imms) -> list[list]:
    """``imms`` grouped by user epoch, oldest epoch first (each group keeps the imms' order)."""
    groups: dict[int, list] = {}
    for imm in imms:
        groups.setdefault(imm.user_epoch, []).append(imm)
    return [groups[e] for e in sorted(groups)]


def _sst_id_of(path: str) -> int | None:
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(".sst") or not name[:-4].isdigit():
        return None
    return int(name[:-4])


VACUUM_BATCH = 1000           # objects deleted between two lease confirmations
L0_STALL_LIMIT_SECONDS = 30.0  # writers stall (L0_STOP_FACTOR) for at most this long per commit

__all__ = ["HummockStorage", "StorageOptions", "Snapshot", "StoreClosedError", "ReadOnlyError"]
