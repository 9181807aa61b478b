"""Multi-producer commits: SSTs of many tasks, any tables, published in ONE commit delta.

A distributed pipeline (``sql/spark_pipeline``) runs each epoch's work as Spark tasks; each
task writes through a :class:`~hummock.task_store.TaskStore` and builds its writes into SSTs
under SST ids the driver reserved (``HummockStorage.reserve_sst_ids``). The driver collects the
tasks' ``TaskOutput``\\ s, writes its own rows at the epoch (a progress record, catalog rows) with
``ingest_batch`` and calls ``HummockStorage.commit_ssts(epoch, infos, table_watermarks=...)``,
which calls :func:`commit` here.

What :func:`commit` guarantees (the rules of ``hummock/external_ssts.py``'s ``ingest``, minus
its one-table, empty-table limits):
- **All or nothing.** The SSTs, this store's writes of epochs <= ``epoch`` (synced first, as
  ``commit_epoch`` does) and the watermark updates become visible in ONE commit delta of
  ``epoch`` (one new L0 sub-level, overlapping when key ranges meet), or none does. An unknown
  outcome of the manifest write (``OutcomeUnknownError``) leaves the delta pending; the next
  call on the store finishes it, and calling ``commit_ssts`` again with the same arguments is
  always safe: it returns at once if the commit landed -- also after compaction rewrote the
  SSTs and vacuum deleted them, or later epochs committed. The delta records the commit in the
  version's ``bulk_loads`` as ``(None, epoch, digest of the SST ids)`` (docs/format.md section
  6); :func:`landed` asks that record. A commit always writes a delta (also with no SST and
  nothing else to publish), so the record exists.
- **Any tables, with data or not.** SSTs may hold several tables each and overlap each other
  and the version's data; their versions lie in ``[epoch, epoch | 0xFFFF]`` above every
  committed one, so they are the newest versions of their keys. REQUIRES of the producers: two
  SSTs (or an SST and this store's own writes at ``epoch``) never hold the same key at the same
  version -- tasks write disjoint keys (vnodes), or take distinct spill offsets.
- **Watermarks at ``epoch``.** ``table_watermarks`` ``{table_id: {vnode: W or (lo, hi)}}`` is
  applied as ``update_table_watermarks(table_id, epoch, ...)`` would (merged into the current
  ranges; refused when disjoint from one) and published in the same delta; the store's reads
  apply them only once it is published (a failed commit leaves no trace in them).
- **A commit of a new epoch.** ``epoch`` is a user epoch above ``max_committed_epoch``; the
  store is sealed up to ``epoch`` afterwards.
- **Only what exists.** Each SST's meta is read back and must match its ``SstableInfo``
  (``external_ssts.verify_objects``): a lost or foreign object is refused before anything is
  published.

Orphans: ids reserved but never published are ordinary orphans for ``vacuum`` (held ids once
released, unheld ones once older than ``vacuum_min_age_s``: publish within that time).

Callers: :class:`~hummock.storage.HummockStorage` (``commit_ssts``, ``commit_ssts_landed``)
only; like :mod:`hummock.external_ssts` it uses the engine's private fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from hummock.errors import InvalidArgumentError
from hummock.external_ssts import _overlapping, check_sst_list, verify_objects
from hummock.key import EPOCH_SPILL_MASK
from hummock.sstable.meta import SstableInfo
from hummock.table_watermarks import TableWatermarks, check_ranges
from hummock.version import VersionDelta, bulk_load_digest

__all__ = ["commit", "landed", "check_infos", "check_watermarks"]

MAX_TABLE_ID = 0xFFFFFFFF


def check_infos(infos, epoch: int) -> tuple:
    """``infos`` as a tuple of :class:`SstableInfo` at versions in ``[epoch, epoch | 0xFFFF]``,
    ids unique (may be empty); ``InvalidArgumentError`` naming the first that is not."""
    return check_sst_list(infos, epoch, "commit", "a commit of")


def check_watermarks(table_watermarks) -> dict:
    """``{table_id: {vnode: (lo, hi)}}`` from the caller's ``{table_id: {vnode: W or (lo, hi)}}``
    (``None``: none); ``InvalidArgumentError`` for a bad table id or range."""
    if table_watermarks is None:
        return {}
    if not isinstance(table_watermarks, Mapping):
        raise InvalidArgumentError(f"table_watermarks must be a mapping {{table_id: {{vnode: W or (lo, hi)}}}}, "
                                   f"got {type(table_watermarks).__name__}")
    out = {}
    for table_id, ranges in table_watermarks.items():
        if isinstance(table_id, bool) or not isinstance(table_id, int) or not 0 <= table_id <= MAX_TABLE_ID:
            raise InvalidArgumentError(f"table_watermarks: table id must be an int in [0, {MAX_TABLE_ID}], "
                                       f"got {table_id!r}")
        checked = check_ranges(ranges)
        if checked:
            out[table_id] = checked
    return out


def _digest(infos) -> str:
    return bulk_load_digest(info.sst_id for info in infos)


def landed(storage, epoch: int, infos) -> bool:
    """Whether ``commit_ssts(epoch, infos, ...)`` was published (a retry after an unknown
    outcome asks). A pending manifest delta is finished first (raises while the store keeps
    failing). Decided from the version's durable record ``(None, epoch, digest)``, which
    compaction leaves alone."""
    record = (None, epoch, _digest(tuple(infos)))
    with storage._manifest_lock, storage._lock:
        storage._require_writer()
        storage._adopt_pending()
        return record in storage._version.bulk_loads


def _marks_with(storage, epoch: int, watermarks: dict) -> dict:
    """Under the lock: the watermark records the commit of ``epoch`` publishes -- this store's
    own uncommitted ones plus ``watermarks`` applied at ``epoch`` (``InvalidArgumentError`` as
    ``update_table_watermarks``). The store's read records are not changed here."""
    out = storage._marks_to_publish(epoch)
    if not watermarks:
        return out
    committed = storage._version.max_committed_epoch
    for table_id, ranges in watermarks.items():
        current = storage._marks.get(table_id, TableWatermarks())
        if current.entries and current.entries[-1][0] > epoch:
            raise InvalidArgumentError(f"table {table_id} has watermarks at epoch {current.entries[-1][0]}, "
                                       f"after the commit's {epoch}")
        records = current.with_watermarks(epoch, ranges)
        part = records.between(committed, epoch)
        if part:
            out[table_id] = part
    return out


def _check_new_epoch(storage, epoch: int) -> None:
    if epoch <= storage.max_committed_epoch:   # (with one committed without a delta)
        raise InvalidArgumentError(f"commit epoch {epoch} is not above max_committed_epoch "
                                   f"{storage.max_committed_epoch} (and no commit_ssts of these SSTs "
                                   f"landed at it)")


def commit(storage, epoch: int, infos, table_watermarks=None) -> None:
    """Publish ``infos`` (SSTs already in the store, any tables), this store's writes of
    epochs <= ``epoch`` and ``table_watermarks`` at ``epoch`` in one commit delta (module
    docstring). Raises InvalidArgumentError, ConcurrentWriterError (fenced: nothing
    published), OutcomeUnknownError (pending: call again)."""
    infos = check_infos(infos, epoch)
    watermarks = check_watermarks(table_watermarks)
    if landed(storage, epoch, infos):
        return   # a retry after an unknown outcome whose commit landed (its SSTs may be compacted away)
    _check_new_epoch(storage, epoch)          # (again under the lock) before reading objects
    verify_objects(storage._store, infos)     # no lock: reads only
    record = (None, _digest(infos))
    while True:
        with storage._manifest_lock:
            with storage._lock:
                storage._require_writer()
                storage._check_ownership()
                storage._adopt_pending()
                version = storage._version
                if (None, epoch, record[1]) in version.bulk_loads:
                    return   # landed meanwhile (a concurrent retry)
                _check_new_epoch(storage, epoch)
                # checked before a sync seals the epoch: a refused call leaves the store as it was
                marks = _marks_with(storage, epoch, watermarks)
                staged = epoch <= storage._synced_epoch and not storage._has_imms_up_to(epoch)
                if staged:
                    ssts = storage._staged_up_to(epoch, "commit {highest} instead") + infos
                    delta = VersionDelta.commit(version, epoch, ssts, overlapping=_overlapping(ssts),
                                                table_watermarks=marks, bulk_load=record)
            if staged:
                storage._publish(delta)
                break
        storage.sync(epoch)   # seals epoch: later writes at <= epoch are refused
    if storage._compactor is not None:   # back-pressure on a full L0, as commit_epoch applies
        storage._stall_while_l0_is_full()
