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

Graph failures (docs/sql.md, "Errors"). A data error inside an MV is no failure (the value is
NULL, counted per MV: :meth:`data_errors`). Anything else that stops the graph -- an actor that
raises, a checkpoint the store refuses -- is recovered at once, by the statement that meets it
(a write, a FLUSH) or by the next statement of any session (:meth:`check`):

1. every acknowledged DML statement whose chunks are not yet committed is in the DML log
   (:meth:`write` keeps each chunk with the :class:`~stream.runtime.runtime.WriteTicket` of its
   epoch until ``max_committed_epoch`` covers it; past ``dml_log_limit_bytes`` a write
   checkpoints, so the log stays bounded);
2. the graph is rebuilt from the last checkpoint and the log written again, in the original
   order, then checkpointed: rows whose INSERT returned are kept, in every table;
3. if that fails again (the failure follows some statement's data), the log is split in halves
   and each replayed and checkpointed on its own, down to the single statements that fail
   (at most ``REPLAY_ATTEMPTS`` rebuilds): those statements alone are lost, and every session
   (:meth:`open_session`) gets one :class:`~sql.errors.LostWritesError` naming them -- the
   statement that met the failure at once, the others at their next statement.

Each recovery logs a warning (logger ``sql.database``) and counts in :attr:`recoveries`.

Read-only databases (``read_only=True``; docs/sql.md "Read-only connections"): the store opened
read-only -- its reader lease pins what it reads against the writer's vacuum, in any process --
and no stream graph. :meth:`check` (before every statement) calls :meth:`refresh`: the newest
committed version and the catalog of its epoch, so each statement reads one committed epoch
with the relations of that epoch (``pinned=True``: only an explicit ``refresh()`` moves it).
Writes (:meth:`write`, :meth:`apply_ddl`, :meth:`bulk_load`) raise ``ReadOnlyError``; FLUSH
refreshes; there is nothing to recover.

Bulk loads (:meth:`bulk_load`, COPY's fast path) take turns with the graph as DDL does: flush,
stop it at a checkpoint, commit SSTs built directly at an epoch above it, start it again.

Callers: :mod:`sql.session` (one Database per Connection), :mod:`sql.statements`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import uuid
from collections import Counter, deque

from hummock.errors import HummockError
from hummock.errors import InvalidArgumentError
from hummock.key import new_epoch
from hummock.options import StorageOptions
from hummock.storage import HummockStorage
from stream.runtime import StreamRuntime
from stream.runtime.runtime import WriteTicket

from sql.build import GraphBuilder
from sql.catalog import SqlCatalog
from sql.errors import LostWritesError, ReadOnlyError

log = logging.getLogger("sql.database")

REPLAY_ATTEMPTS = 40                  # graph rebuilds one recovery may spend isolating bad statements
DML_LOG_LIMIT_BYTES = 256 << 20       # uncommitted DML kept for replay before a write checkpoints


def _chunk_bytes(chunk) -> int:
    """An estimate (8 bytes a value): Arrow's exact ``nbytes`` costs more than the write."""
    return len(chunk.ops) * (8 * len(chunk.columns) + 1)


class _Pending:
    """One acknowledged (or in-progress) DML statement: its chunks not yet known committed."""

    __slots__ = ("seq", "label", "table", "writes", "nbytes")

    def __init__(self, seq: int, label: str, table: str):
        self.seq, self.label, self.table = seq, label, table
        self.writes: deque = deque()   # (WriteTicket, chunk), in write order
        self.nbytes = 0

    def add(self, ticket, chunk) -> int:
        size = _chunk_bytes(chunk)
        self.writes.append((ticket, chunk))
        self.nbytes += size
        return size

    def trim(self, committed: int) -> int:
        """Forget the leading chunks whose epoch is committed; returns the bytes freed."""
        freed = 0
        while self.writes and self.writes[0][0].durable(committed):
            freed += _chunk_bytes(self.writes.popleft()[1])
        self.nbytes -= freed
        return freed


class _Session:
    """A session's view of the lost-writes notices: ``seen`` is the last one it was told."""

    __slots__ = ("sid", "seen")

    def __init__(self, sid: int, seen: int):
        self.sid, self.seen = sid, seen


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
    def __init__(self, url: str, barrier_interval_ms=1000, *, runtime: str = "in_process", spark=None,
                 partitions: int | None = None, read_only: bool = False, pinned: bool = False,
                 progress=None, **store_options):
        if not isinstance(read_only, bool) or not isinstance(pinned, bool):
            raise InvalidArgumentError(f"read_only and pinned must be booleans, got {read_only!r}, {pinned!r}")
        if pinned and not read_only:
            raise InvalidArgumentError("pinned=True needs read_only=True (a writer always reads its newest epoch)")
        if read_only and runtime != "in_process":
            raise InvalidArgumentError("a read_only connection runs no stream graph: runtime must be 'in_process'")
        if progress is not None and not callable(progress):
            raise InvalidArgumentError(f"progress must be a callable taking a Progress, got {progress!r}")
        self.read_only, self.pinned, self.progress = read_only, pinned, progress
        if runtime not in ("in_process", "spark"):
            raise InvalidArgumentError(f"runtime must be 'in_process' or 'spark', got {runtime!r}")
        if runtime == "spark" and spark is None:
            raise InvalidArgumentError("runtime='spark' needs spark=<a SparkSession> (the driver's session)")
        if runtime == "spark":
            from sql.spark_pipeline.driver import check_worker_python
            check_worker_python(spark)
        self.runtime, self.spark, self.partitions = runtime, spark, partitions
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
        if self.read_only:
            self._open_read_only(url, store_options)
            return
        self.store = HummockStorage.open(url, _storage_options(store_options))
        if self.runtime == "spark":
            from sql.spark_pipeline.driver import store_description
            store_description(self.store)   # tasks in other processes must open it: not a memory store
        self.catalog = SqlCatalog.load(self.store, self.store.max_committed_epoch)
        self.lock = threading.RLock()
        self.rt = None
        self.builder = None
        self._plans: dict = {}
        self._init_failure_state()
        self._start(self.catalog, frozenset())
        self._tick()

    def _open_read_only(self, url: str, store_options) -> None:
        """A reader (module docstring, "Read-only databases"): the store opened read-only (its
        reader lease pins what it reads against the writer's vacuum), the catalog at its
        committed epoch, no stream graph."""
        if url.startswith("memory://"):
            raise InvalidArgumentError("read_only=True needs a store another process writes (a path, file:// or "
                                       "s3://...), not a memory store")
        self.store = HummockStorage.open(url, _storage_options(store_options), read_only=True)
        self.lock = threading.RLock()
        self.rt = self.builder = None
        self._plans = {}
        self._init_failure_state()
        self._catalog_epoch = self.store.max_committed_epoch
        self.catalog = SqlCatalog.load(self.store, self._catalog_epoch)

    def refresh(self) -> int:
        """Read-only databases: pick up what the writer committed since -- the newest version
        and the catalog at its epoch (tables and MVs created or dropped meanwhile); returns that
        epoch. A statement then reads at it. Writers: the committed epoch, nothing to do."""
        with self.lock:
            if not self.read_only:
                return self.store.max_committed_epoch
            epoch = self.store.refresh()
            if epoch != self._catalog_epoch:
                catalog = SqlCatalog.load(self.store, epoch)
                self.catalog, self._catalog_epoch = catalog, epoch
                self._plans.clear()
            return epoch

    def require_writer(self, what: str) -> None:
        """``ReadOnlyError`` naming ``what`` on a read-only database."""
        if self.read_only:
            raise ReadOnlyError(f"{what} is not allowed on a read-only connection (it reads the database "
                                f"{self.url} beside its writer; open it without read_only=True to change it)")

    def _init_failure_state(self) -> None:
        self.recoveries = 0
        self.dml_log_limit_bytes = DML_LOG_LIMIT_BYTES
        self._log: deque = deque()      # _Pending, in acknowledgement order
        self._log_bytes = 0
        self._seq = itertools.count(1)
        self._notices: list = []        # (number, LostWritesError message, statements, cause)
        self._session_ids = itertools.count(1)
        self._local = threading.local()  # the statement running on this thread: (session, label)
        self._errors_done: dict = {}    # data errors of graphs already stopped, by relation

    # --- sessions, statements, lost writes ------------------------------------------------------

    def open_session(self) -> _Session:
        """A new session: told about writes lost from now on (module docstring)."""
        with self.lock:
            return _Session(next(self._session_ids), len(self._notices))

    @contextlib.contextmanager
    def statement(self, session: _Session | None, text: str):
        """Run a statement of ``session`` (``text`` names it if a failure loses its writes)."""
        label = " ".join(text.split())
        if len(label) > 200:
            label = label[:197] + "..."
        if session is not None:
            label = f"[session {session.sid}] {label}"
        prev = getattr(self._local, "current", None)
        self._local.current = (session, label)
        try:
            yield
        finally:
            self._local.current = prev

    def check(self, session: _Session | None = None) -> None:
        """Before a statement: recover a failed graph, then tell ``session`` about statements
        a failure lost since it was last told (:class:`LostWritesError`, once per session).
        Takes the lock only when there is something to do (a SELECT does not wait for a write)."""
        if self.read_only:
            if not self.pinned:
                self.refresh()
            return
        if not self._needs_recovery() and (session is None or session.seen >= len(self._notices)):
            return
        with self.lock:
            if self._needs_recovery():
                self._recover(self.rt.failure if self.rt is not None else None)
            if session is not None and session.seen < len(self._notices):
                notices = self._notices[session.seen:]
                session.seen = len(self._notices)
                statements = [s for n in notices for s in n[1]]
                causes = "; ".join(dict.fromkeys(n[2] for n in notices))
                raise LostWritesError(_lost_message(statements, causes, None) + " (this statement was not run)",
                                      statements, causes)

    def _needs_recovery(self) -> bool:
        if self.read_only:
            return False
        rt = self.rt   # (read once: check() calls this without the lock)
        if rt is None:
            return bool(self.catalog.relations)
        return rt.failure is not None

    def _current(self):
        return getattr(self._local, "current", None) or (None, "(a statement outside a session)")

    def write(self, rel, chunks) -> None:
        """Hand ``chunks`` (any iterable) to table ``rel``'s source as one DML statement of the
        current :meth:`statement`, keeping them in the DML log until committed; a graph failure
        is recovered (module docstring) and the remaining chunks written after it. Raises
        :class:`LostWritesError` when the recovery lost this statement."""
        with self.lock:
            self.require_writer("a write")
            if self._needs_recovery():
                self._recover(self.rt.failure if self.rt is not None else None)
            session, label = self._current()
            entry = _Pending(next(self._seq), label, rel.name)
            self._log.append(entry)
            for chunk in chunks:
                while True:
                    ticket = WriteTicket()
                    self._log_bytes += entry.add(ticket, chunk)
                    try:
                        self.rt.write(self.builder.sources[rel.name], chunk, ticket)
                        break
                    except HummockError:   # the graph failed: recover, then go on writing
                        if self.rt is None or self.rt.failure is None:
                            raise
                        entry.writes.pop()   # the replay must not write this chunk twice:
                        entry.nbytes -= _chunk_bytes(chunk)   # it is written again after it
                        self._log_bytes -= _chunk_bytes(chunk)
                        lost = self._recover(self.rt.failure)
                        if entry in lost:
                            raise self._lost_error(session, label) from None
                        if entry not in self._log:   # replayed and committed: start a new part
                            self._log.append(entry)
                if self._log_bytes > self.dml_log_limit_bytes:
                    self._commit_log(session, entry)
            self._trim()

    def _commit_log(self, session, entry=None) -> None:
        """A checkpoint, so the DML log can be forgotten (it outgrew ``dml_log_limit_bytes``)."""
        self.flush()
        if entry is not None and entry not in self._log and entry.writes:
            self._log.append(entry)

    def unseen_rows(self) -> int:
        """Rows of acknowledged DML not committed yet: queries cannot see them until the next
        barrier (or FLUSH). 0 on a read-only database."""
        if self.store is None or getattr(self, "_log", None) is None:
            return 0
        with self.lock:
            committed = self.store.max_committed_epoch
            return sum(len(chunk.ops) for entry in self._log for ticket, chunk in entry.writes
                       if not ticket.durable(committed))

    def _trim(self) -> None:
        """Forget the log's committed prefix (cheap: acknowledged order is epoch order)."""
        committed = self.store.max_committed_epoch
        while self._log:
            head = self._log[0]
            self._log_bytes -= head.trim(committed)
            if head.writes:
                return
            self._log.popleft()

    def _lost_error(self, session, label) -> LostWritesError:
        """The error for the statement ``label`` that met the failure: it tells its session."""
        if session is not None:
            session.seen = len(self._notices)
        number, statements, cause = self._notices[-1]
        return LostWritesError(_lost_message(statements, cause, label), statements, cause)

    def _recover(self, failure) -> list:
        """Rebuild the failed graph and write the DML log again (module docstring); returns the
        statements lost (also filed as a notice for every session)."""
        cause = "the stream graph is not running" if failure is None else f"{type(failure).__name__}: {failure}"
        entries = list(self._log)
        self._log.clear()
        self._log_bytes = 0
        self.recoveries += 1
        lost: list = []
        try:
            # reopened first: after a checkpoint whose reply was lost, only the reopened store
            # knows whether it landed, and a landed epoch must not be written twice
            self._rebuild()
            committed = self.store.max_committed_epoch
            for e in entries:
                e.trim(committed)
            entries = [e for e in entries if e.writes]
            log.warning("the stream graph failed (%s): rebuilt it from epoch %d; writing %d uncommitted "
                        "statement(s) again", cause, committed, len(entries))
            self._replay(entries, lost)
        except BaseException:
            try:
                committed = self.store.max_committed_epoch
            except HummockError:
                committed = -1
            done = {id(e) for e in lost}
            for e in entries:
                e.trim(committed)
            lost += [e for e in entries if id(e) not in done and e.writes]
            raise
        finally:
            if lost:
                lost.sort(key=lambda e: e.seq)
                self._notices.append((len(self._notices) + 1, [e.label for e in lost], cause))
                log.error("%s", _lost_message([e.label for e in lost], cause, None))
            self._tick()
        return lost

    def _rebuild(self) -> None:
        if self.rt is not None:
            self._fold_errors()
            rt, self.rt = self.rt, None
            rt.abort()
        self._discard_uncommitted()
        self._start(self.catalog, frozenset())

    def _discard_uncommitted(self) -> None:
        """Drop what a dead graph wrote above the committed epoch: a checkpoint publishes every
        epoch up to its own, so the next graph's first one would otherwise commit the dead
        graph's partial epochs (a torn cut: one MV without rows its tables have). The store
        has no call for that, so it is closed and opened again (as after a crash; a SELECT
        running meanwhile on another thread fails with StoreClosedError)."""
        options = self.store.options
        self.store.close()
        self.store = HummockStorage.open(self.url, options)

    def _replay(self, entries, lost) -> None:
        """Write ``entries`` again and checkpoint; on a failure split them (module docstring).
        A replayed entry that commits is emptied (its chunks are durable)."""
        budget = REPLAY_ATTEMPTS
        todo = [list(entries)]
        while todo:
            group = todo.pop()
            if not group:
                continue
            if budget <= 0:
                lost += group
                continue
            try:
                for e in group:
                    src = self.builder.sources.get(e.table)
                    for _, chunk in (e.writes if src is not None else ()):
                        self.rt.write(src, chunk)
                self.rt.flush()
            except HummockError:
                if self.rt is None or self.rt.failure is None:
                    raise
                budget -= 1
                self._rebuild()
                if len(group) == 1:
                    lost += group
                else:
                    mid = len(group) // 2
                    todo += [group[mid:], group[:mid]]   # the first half first
                continue
            for e in group:
                e.writes.clear()
                e.nbytes = 0

    def data_errors(self) -> dict:
        """``{relation: {error kind: rows}}``: values set to NULL by data errors inside each
        MV (and table) since this database was opened (stream/expr_errors.py)."""
        with self.lock:
            out = {name: Counter(c) for name, c in self._errors_done.items()}
            if self.rt is not None and self.builder is not None:
                for name, actor in self.builder.actors.items():
                    if actor.data_errors:
                        out.setdefault(name, Counter()).update(actor.data_errors)
            return {name: dict(c) for name, c in out.items() if c}

    def _fold_errors(self) -> None:
        """Keep the counts of the graph about to stop."""
        if self.builder is not None:
            for name, actor in self.builder.actors.items():
                if actor.data_errors:
                    self._errors_done.setdefault(name, Counter()).update(actor.data_errors)
                    actor.data_errors.clear()

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
        if self.runtime == "spark":   # micro-batches on Spark (sql/spark_pipeline/driver.py)
            from sql.spark_pipeline.driver import SparkRuntime

            rt = SparkRuntime(self.store, catalog, self.plan_of, self.spark, partitions=self.partitions,
                              backfill=backfill)
            self.rt, self.builder = rt, rt
            return rt.start()
        rt = StreamRuntime(self.store)   # the ticker starts once the first epoch's records are in
        try:
            builder = GraphBuilder(rt, self.store, catalog, self.plan_of, backfill)
            builder.progress = self.progress   # backfills report their rows (sql/copy.py Progress)
            builder.build()
            epoch = rt.start()
        except BaseException:
            rt.abort()   # a runtime that started actors or its loop must not outlive the failure
            raise
        self.rt, self.builder = rt, builder
        return epoch

    def _stop(self) -> None:
        if self.rt is not None:
            self._fold_errors()
            rt, self.rt = self.rt, None
            if rt.failure is None:
                rt.stop()
            else:
                rt.abort()

    def recover(self) -> list:
        """After the graph failed: rebuild it and write the uncommitted DML again (module
        docstring, "Graph failures"); returns the statements lost (usually none)."""
        with self.lock:
            if not self._needs_recovery():
                return []
            return [e.label for e in self._recover(self.rt.failure if self.rt is not None else None)]

    def flush(self) -> int:
        """Checkpoint everything written so far; returns the committed epoch. A graph failure is
        recovered (module docstring); :class:`LostWritesError` if the recovery lost statements."""
        with self.lock:
            if self.read_only:   # nothing of ours to checkpoint: FLUSH on a reader refreshes
                return self.refresh()
            if self._needs_recovery():
                self._recover_for_current()
            if self.rt is None:
                return self.store.max_committed_epoch
            try:
                epoch = self.rt.flush()
            except HummockError:
                if self.rt is None or self.rt.failure is None:
                    raise
                self._recover_for_current()
                epoch = self.store.max_committed_epoch   # the replay checkpointed everything kept
            self._trim()
            return epoch

    def _recover_for_current(self) -> None:
        """Recover on behalf of the statement running here: it raises what was lost."""
        session, label = self._current()
        lost = self._recover(self.rt.failure if self.rt is not None else None)
        if lost:
            raise self._lost_error(session, label)

    def _quiesce(self, what: str) -> None:
        """Before DDL or a bulk load (under the lock): everything written is committed, the DML
        log is empty (nothing left to replay) and the graph is stopped."""
        self.require_writer(what)
        self.flush()
        self._log.clear()
        self._log_bytes = 0
        self._stop()

    def apply_ddl(self, new_catalog, changed=(), dropped=(), backfill=frozenset(), plans=None, rewrite=None) -> None:
        """Swap in ``new_catalog`` (module docstring); ``changed`` relations get records,
        ``dropped`` table ids (with their internal ids) lose records and data. ``rewrite``:
        ``rewrite(store, epoch)`` writes data at the DDL's epoch before the records are written
        (ALTER TABLE re-encoding a table's rows: sql/alter.py), so both commit together."""
        with self.lock:
            self._quiesce("DDL")
            old_plans = dict(self._plans)
            self._plans.update(plans or {})
            try:
                epoch = self._start(new_catalog, backfill)
                if epoch is None:
                    epoch = max(new_epoch(), self.store.max_committed_epoch + (1 << 16))
                    if rewrite is not None:
                        rewrite(self.store, epoch)
                    self._write(new_catalog, epoch, changed, dropped)
                    self.store.checkpoint(epoch)
                else:
                    if rewrite is not None:
                        rewrite(self.store, epoch)
                    self._write(new_catalog, epoch, changed, dropped)
                    self.rt.flush()
            except BaseException as exc:
                if self.rt is not None:
                    self.rt.abort()
                    self.rt = None
                self._plans = old_plans
                try:
                    self._discard_uncommitted()   # the new graph's first epoch: records, backfill
                    self._start(self.catalog, frozenset())
                    self._tick()
                except BaseException as again:   # the next statement tries again (check)
                    log.error("rebuilding the graph after a failed DDL failed: %s", again)
                    raise exc from again
                raise
            self.catalog = new_catalog
            self._tick()

    def bulk_load(self, rel, table) -> int:
        """Load ``table`` (a ``pyarrow.Table`` of ``rel``'s visible columns, by name, already
        of their Arrow types) into table ``rel`` as SSTs built directly -- no stream graph --
        committed in one delta (docs/sql.md "COPY"). The caller checked that nothing reads
        ``rel`` (no MV, no subscription) and that its conflict rule is overwrite (or it has
        no primary key): a repeated pk keeps the last row, and a row whose pk the table holds replaces
        it, as the table's Materialize would. Takes turns with the graph like DDL: flush, stop
        it, commit the load at an epoch above everything committed, start it again (its
        executors' caches then see the loaded rows). Returns the rows loaded."""
        from hummock.key import EPOCH_SPILL_MASK
        import pyarrow as pa

        from relational.bulk_load import build_task_ssts
        from relational.row_id import task_row_ids
        from relational.row_serde import RowSerde

        from sql.catalog import ROW_ID

        with self.lock:
            self._quiesce("COPY FROM")
            desc = rel.desc
            store = self.store
            reserved = None
            try:
                epoch = max(new_epoch(), (store.max_committed_epoch | EPOCH_SPILL_MASK) + 1)
                columns = []
                for name, _ in desc.columns:   # relational/arrow.py types; fresh row ids (generator 0)
                    if rel.row_id and name == ROW_ID:
                        columns.append(pa.array(task_row_ids(0, epoch, table.num_rows), pa.int64()))
                    else:
                        column = table.column(name)
                        columns.append(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
                serde = RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices,
                                 desc.value_indices)
                options = store.options
                estimate = table.nbytes + 24 * table.num_rows
                reserved = store.reserve_sst_ids(8 + 2 * estimate // options.target_sst_size)
                infos = build_task_ssts(store._store, serde, desc.table_id, columns, table.num_rows, epoch, 0,
                                        reserved, store._sst_builder_options(), options.target_sst_size,
                                        describe_pk=rel.name, on_duplicate="last")
                store.commit_ssts(epoch, infos)
                used = {i.sst_id for i in infos}
                store.release_sst_ids([i for i in reserved if i not in used])
                reserved = None
            except BaseException:
                try:
                    if reserved is not None:   # built but unpublished: orphans for vacuum
                        store.release_sst_ids(list(reserved))
                    self._discard_uncommitted()   # a commit whose outcome is unknown: as after a crash
                except HummockError as exc:
                    log.warning("cleaning up after a failed load: %s", exc)
                raise
            finally:   # a start that fails here is retried by the next statement (check)
                self._start(self.catalog, frozenset())
                self._tick()
            return table.num_rows

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
        """Stop the graph (a checkpointed Stop) and release the store. A failed graph is
        recovered first, so acknowledged writes are kept (what cannot be is logged)."""
        with self.lock:
            if self.read_only:
                self.store.close()
                return
            try:
                if self.rt is not None and self.rt.failure is not None:
                    try:
                        self._recover(self.rt.failure)
                    except HummockError as exc:
                        log.error("closing a failed stream graph: %s", exc)
                self._stop()
            finally:
                self.store.close()


def _lost_message(statements, cause: str, current: str | None) -> str:
    shown = "; ".join(statements[:20]) + (f"; ... and {len(statements) - 20} more" if len(statements) > 20 else "")
    own = " (including this one)" if current is not None and current in statements else ""
    return (f"{len(statements)} acknowledged statement(s) were lost{own}: the stream graph failed ({cause}) and "
            f"writing them again failed it again: {shown}")
