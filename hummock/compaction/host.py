"""The engine as compaction runners see it: one small interface instead of its private fields.

:class:`CompactionHost` is everything a runner (the in-process manager, the worker pool, the
Spark runner) needs from the store it compacts: the current version, the watermark a merge may
drop versions below, the options outputs are built with, readers for input SSTs, SST ids, and applying a finished task as one
version delta. The engine implements it (:class:`EngineHost`, made by
:class:`~hummock.storage.HummockStorage`); tests may implement it to drive a runner alone.

Id contract: ids from :meth:`reserve_ids` and :meth:`new_sst_id` are *held* -- vacuum spares
their objects -- until :meth:`release_ids` (never published: their objects become orphans)
or until a version holds them (published). A runner releases every id it did not publish,
also on failure; releasing a published id is harmless.

Thread safety: every method may be called from any thread. Methods that change the manifest
(ids, :meth:`apply`) take the engine's manifest lock first, then its engine lock only around
in-memory steps: no manifest I/O blocks the store's readers and writers. Callers: ``hummock/compaction/`` only.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from hummock.cache_refill import refill_after_compaction
from hummock.read_view import SstReader
from hummock.sstable.reader import Sstable
from hummock.version import VersionConflictError

__all__ = ["CompactionHost", "EngineHost"]


class CompactionHost(ABC):
    """What a compaction runner may ask of the store it compacts (module docstring)."""

    #: the store's ``StorageOptions`` and ``ObjectStore``
    options = None
    store = None

    @abstractmethod
    def version(self):
        """The current committed ``HummockVersion`` (immutable)."""

    @abstractmethod
    def condition(self) -> threading.Condition:
        """A condition on the engine's lock, notified after every version change."""

    @abstractmethod
    def watermark(self) -> int:
        """The epoch a merge may drop versions below: every read the store still serves
        exactly (snapshots, the retention window, the committed epoch) stays exact."""

    @abstractmethod
    def hide(self, watermark: int) -> dict:
        """What table watermarks and truncations let a merge at ``watermark`` drop (table id ->
        resolved records; empty when none): ``compact(..., hide)``, passed on to workers and
        Spark. Safe to ask after :meth:`watermark`: watermarks only grow."""

    @abstractmethod
    def builder_options(self):
        """The ``SstableBuilderOptions`` outputs are built with now (the store's options plus
        the tables' declared prefix lengths, for prefix filters)."""

    @abstractmethod
    def input_reader(self, info, *, cached: bool = False) -> SstReader:
        """A reader of an input SST. ``cached=False`` bypasses the block cache (a merge reads
        each block once; caching would evict the blocks reads need); metas stay cached."""

    @abstractmethod
    def new_sst_id(self) -> int:
        """One fresh SST id, held (module docstring)."""

    @abstractmethod
    def reserve_ids(self, count: int) -> range:
        """``count`` consecutive fresh SST ids, persisted as reserved first and held."""

    @abstractmethod
    def release_ids(self, ids) -> None:
        """Stop holding ``ids``: the ones no version holds become orphans for vacuum (unless a
        manifest delta of unknown outcome may name them: those wait for its resolution)."""

    @abstractmethod
    def apply(self, make_delta):
        """Build ``make_delta(current_version)`` and publish it as the next version; return
        the delta, or ``None`` if it conflicts (its inputs changed: the task is discarded).
        Raises ``ConcurrentWriterError`` when this writer was fenced (nothing is published)."""

    @abstractmethod
    def after_apply(self) -> None:
        """Delete what the applied delta made unreachable (best effort: vacuum)."""

    def refill_cache(self, inputs, outputs) -> None:
        """A compaction that replaced ``inputs`` by ``outputs`` (SstableInfos) was applied: warm
        the read caches for the outputs where the inputs were warm (best effort). Default: no
        caches, nothing to do."""

    @abstractmethod
    def check_ownership(self) -> None:
        """Raise ``ConcurrentWriterError`` if this writer was fenced."""


class EngineHost(CompactionHost):
    """:class:`CompactionHost` over a :class:`~hummock.storage.HummockStorage` (the engine's
    own side of the interface: it may use the engine's private fields; runners may not)."""

    def __init__(self, storage):
        self._storage = storage
        self.options = storage.options
        self.store = storage._store
        self._condition = threading.Condition(storage._lock)

    def version(self):
        return self._storage._version

    def condition(self) -> threading.Condition:
        return self._condition

    def watermark(self) -> int:
        with self._storage._lock:
            return self._storage._watermark()

    def hide(self, watermark: int) -> dict:
        with self._storage._lock:
            return self._storage._compaction_hide(watermark)

    def builder_options(self):
        with self._storage._lock:
            return self._storage._sst_builder_options()

    def input_reader(self, info, *, cached: bool = False) -> SstReader:
        storage = self._storage
        if cached:
            with storage._lock:
                return storage._reader_for(info)
        return SstReader(info, lambda i: Sstable.open(storage._store, i, meta_cache=storage._meta_cache))

    def new_sst_id(self) -> int:
        return self._storage._new_sst_id_locked()

    def reserve_ids(self, count: int) -> range:
        storage = self._storage
        with storage._manifest_lock, storage._lock:
            return storage._hand_out_ids(count)

    def release_ids(self, ids) -> None:
        self._storage._release_ids(ids)

    def apply(self, make_delta):
        storage = self._storage
        with storage._manifest_lock:   # the manifest write holds no engine lock
            with storage._lock:
                storage._check_ownership()   # a fenced writer publishes nothing
                try:
                    delta = make_delta(storage._version)
                except VersionConflictError:   # its inputs are gone
                    return None
            try:
                version = storage._manifest.commit(delta)
            except VersionConflictError:
                return None
            finally:   # a delta finished late (pending) may have come with this call
                with storage._lock:
                    storage._set_version(storage._manifest.current)
            with storage._lock:
                storage._set_version(version)
                self._condition.notify_all()
            return delta

    def after_apply(self) -> None:
        self._storage._after_compaction()

    def refill_cache(self, inputs, outputs) -> None:
        storage = self._storage
        refill_after_compaction(storage._block_cache, storage._open_sst, inputs, outputs)

    def check_ownership(self) -> None:
        with self._storage._lock:
            self._storage._check_ownership()
