"""One open database: the store, the catalog, the running stream graph and the DDL lifecycle.

Job: open (or create) the store at a URL, load the catalog at the committed epoch, build and
start the graph (reopening resumes maintenance of every table and MV); apply DDL by rebuilding
(docs/sql.md, "DDL rebuilds the graph"): flush, stop the runtime (a checkpointed Stop), build
the new catalog's graph, start it (first epoch ``E``), write the catalog records -- and
truncate dropped tables -- at ``E``, then checkpoint ``E``. A new MV's Backfill emits its
snapshot in epoch ``E`` too, so its records and its backfilled state commit together.

Invariants: ``self.catalog`` changes only after the change committed; a failed DDL rebuilds the
old catalog's graph and re-raises (nothing of it was committed). With no relation there is no
runtime; catalog writes then use a fresh epoch and a direct checkpoint. A failed open (bad
options, a catalog that does not load, a graph that does not start) closes what it opened --
the graph and the store, so its writer lock and compactor thread go with the exception and the
URL can be opened again.

Callers: :mod:`sql.session` (one Database per Connection), :mod:`sql.statements`.
"""

from __future__ import annotations

import threading
import uuid

from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from hummock.options import StorageOptions
from hummock.storage import HummockStorage
from stream.runtime import StreamRuntime

from sql.build import GraphBuilder
from sql.catalog import SqlCatalog


def _storage_options(store_options: dict):
    """``StorageOptions`` of ``connect``'s keyword arguments (``None``: the defaults); an unknown
    name is an InvalidArgumentError naming the known ones, not a TypeError."""
    if not store_options:
        return None
    known = set(StorageOptions.__dataclass_fields__)
    unknown = sorted(set(store_options) - known)
    if unknown:
        raise InvalidArgumentError(f"unknown connect() option(s) {unknown}: connect(url, barrier_interval_ms=..., "
                                   f"implicit_flush=..., **store_options) takes the StorageOptions fields "
                                   f"{sorted(known)}")
    return StorageOptions(**store_options)


class Database:
    def __init__(self, url: str, barrier_interval_ms=1000, **store_options):
        if barrier_interval_ms is not None and (isinstance(barrier_interval_ms, bool) or not isinstance(
                barrier_interval_ms, (int, float)) or not 0 <= barrier_interval_ms < float("inf")):
            raise InvalidArgumentError(f"barrier_interval_ms must be a number >= 0 (0 or None: no periodic "
                                       f"barriers), got {barrier_interval_ms!r}")
        self.rt = self.store = None
        try:
            self._open(url, barrier_interval_ms, **store_options)
        except BaseException:
            self._close_partial()
            raise

    def _close_partial(self) -> None:
        """After a failed open: stop the graph if it started, close the store if it opened."""
        rt, self.rt = self.rt, None
        try:
            if rt is not None:
                rt.abort()
        finally:
            if self.store is not None:
                self.store.close()

    def _open(self, url: str, barrier_interval_ms, **store_options) -> None:
        if url in (":memory:", "memory://"):
            url = f"memory://sql-{uuid.uuid4().hex}"
        self.url = url
        self.barrier_interval_ms = barrier_interval_ms
        self.store = HummockStorage.open(url, _storage_options(store_options))
        self.catalog = SqlCatalog.load(self.store, self.store.max_committed_epoch)
        self.lock = threading.RLock()
        self.rt = None
        self.builder = None
        self._plans: dict = {}
        self._start(self.catalog, frozenset())
        self._tick()

    def _tick(self) -> None:
        """Start periodic barriers (after a (re)start's own writes to its first epoch)."""
        if self.rt is not None and self.barrier_interval_ms:
            self.rt.start_ticker(self.barrier_interval_ms)

    # --- the graph --------------------------------------------------------------------------------

    def plan_of(self, rel):
        """The logical plan of MV ``rel`` (cached; planned from its definition)."""
        plan = self._plans.get(rel.table_id)
        if plan is None:
            from sql.statements import plan_mv_definition
            plan = plan_mv_definition(self, rel)
            self._plans[rel.table_id] = plan
        return plan

    def _start(self, catalog, backfill) -> int | None:
        if not catalog.relations:
            self.rt, self.builder = None, None
            return None
        rt = StreamRuntime(self.store)   # the ticker starts once the first epoch's records are in
        try:
            builder = GraphBuilder(rt, self.store, catalog, self.plan_of, backfill)
            builder.build()
            epoch = rt.start()
        except BaseException:
            rt.abort()   # a runtime that started actors or its loop must not outlive the failure
            raise
        self.rt, self.builder = rt, builder
        return epoch

    def _stop(self) -> None:
        if self.rt is not None:
            rt, self.rt = self.rt, None
            if rt.failure is None:
                rt.stop()
            else:
                rt.abort()

    def recover(self) -> None:
        """After an actor failed: drop the graph (its uncommitted epochs are lost, as after a
        crash) and build it again from the committed state."""
        with self.lock:
            self._stop()
            self._start(self.catalog, frozenset())
            self._tick()

    def flush(self) -> int:
        with self.lock:
            if self.rt is None:
                return self.store.max_committed_epoch
            return self.rt.flush()

    def apply_ddl(self, new_catalog, changed=(), dropped=(), backfill=frozenset(), plans=None) -> None:
        """Swap in ``new_catalog`` (module docstring); ``changed`` relations get records,
        ``dropped`` table ids (with their internal ids) lose records and data."""
        with self.lock:
            self.flush()
            self._stop()
            old_plans = dict(self._plans)
            self._plans.update(plans or {})
            try:
                epoch = self._start(new_catalog, backfill)
                if epoch is None:
                    epoch = max(new_epoch(), self.store.max_committed_epoch + (1 << 16))
                    self._write(new_catalog, epoch, changed, dropped)
                    self.store.checkpoint(epoch)
                else:
                    self._write(new_catalog, epoch, changed, dropped)
                    self.rt.flush()
            except BaseException:
                if self.rt is not None:
                    self.rt.abort()
                self._plans = old_plans
                self._start(self.catalog, frozenset())
                self._tick()
                raise
            self.catalog = new_catalog
            self._tick()

    def _write(self, catalog, epoch, changed, dropped) -> None:
        all_dropped = []
        for rel in dropped:
            all_dropped += [rel.table_id] + list(rel.internal_ids)
        catalog.write(self.store, epoch, changed, [r.table_id for r in dropped])
        for tid in all_dropped:
            self.store.truncate_table(tid, epoch)
        for rel in dropped:
            self._plans.pop(rel.table_id, None)

    def close(self) -> None:
        with self.lock:
            try:
                self._stop()
            finally:
                self.store.close()
