"""Publishing SSTs built outside the engine (bulk loads): checks and the one commit delta.

A bulk loader (``relational/spark.py``'s Spark writer, or any process) reserves SST ids with
``HummockStorage.reserve_sst_ids``, builds SSTs of ONE table straight into the store's object
namespace under those ids (``SstableBuilder.to_store``), and hands their ``SstableInfo``\\ s to
``HummockStorage.ingest_ssts(table_id, infos, epoch)``, which calls :func:`ingest` here.

What :func:`ingest` guarantees:
- **All or nothing.** Every SST becomes visible in ONE commit delta at ``epoch`` (a new L0
  sub-level, overlapping when their key ranges meet), or none does. An unknown outcome of the
  manifest write (``OutcomeUnknownError``) leaves the delta pending exactly like a commit's:
  the next call on the store finishes it, and calling ``ingest_ssts`` again with the same
  arguments is always safe: it returns at once if the load had landed (as ``checkpoint`` does),
  also after compaction rewrote its SSTs and vacuum deleted them, or later epochs committed:
  the commit delta records the load (``(table_id, epoch, digest of its SST ids)``, kept in the
  version's ``bulk_loads``), and :func:`landed` asks that record.
- **Only into an empty table.** The table must hold nothing at all: no SST of the version
  names it, no staging SST or buffered write of this store does, and it carries no watermark
  records (a watermark would hide loaded rows). Otherwise :class:`TableNotEmptyError`.
- **A commit of a new epoch.** ``epoch`` is a user epoch (low 16 bits zero) above
  ``max_committed_epoch``; the delta is the commit of ``epoch`` -- it also publishes this
  store's writes of epochs <= ``epoch`` (a catalog record of the loaded table, say), exactly as
  ``commit_epoch(epoch)`` would, syncing them first -- plus the loaded SSTs. The store is sealed
  up to ``epoch`` afterwards. Versions inside the SSTs must lie in ``[epoch, epoch | 0xFFFF]`` (a loader may
  use the spill offsets to order its tasks). Else ``InvalidArgumentError``.
- **Only what exists.** Each SST's meta is read back from the store and must describe exactly
  the ``SstableInfo`` given (id, key range, epochs, counts, table ids): a lost, partial or
  foreign object is refused before anything is published.

Orphans: ids reserved but never published (a failed task, an aborted load) are ordinary orphans
that ``vacuum`` deletes once older than ``vacuum_min_age_s``. Ids reserved with ``hold=False``
(for builders in other processes) are not held by this process: a load must be published
within ``vacuum_min_age_s`` of its SSTs being written if a writer vacuums meanwhile -- or the
existence check above refuses it.

Callers: :class:`~hummock.storage.HummockStorage` (``ingest_ssts``) only; it may use the
engine's private fields, as :mod:`hummock.compaction.host` does. :mod:`hummock.multi_commit`
(``commit_ssts``) reuses :func:`verify_objects` and the overlap test.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hummock.errors import HummockError, InvalidArgumentError
from hummock.key import EPOCH_SPILL_MASK
from hummock.object_store.base import ObjectNotFoundError
from hummock.sstable.meta import SstableInfo
from hummock.sstable.reader import Sstable
from hummock.version import VersionDelta, bulk_load_digest

__all__ = ["TableNotEmptyError", "ingest", "landed", "check_infos"]

MAX_EXTERNAL_SSTS = 1 << 20   # SSTs of one ingest (a sanity bound on a caller's list)


class TableNotEmptyError(HummockError, ValueError):
    """A bulk load targeted a table that already holds data (or watermark records)."""


def check_sst_list(infos, epoch: int, noun: str = "ingest", at: str = "an ingest at") -> tuple:
    """``infos`` as a tuple of :class:`SstableInfo` at versions in ``[epoch, epoch | 0xFFFF]``,
    ids unique, at most ``MAX_EXTERNAL_SSTS`` (may be empty); ``InvalidArgumentError`` naming
    the first that is not (``noun``/``at`` name the call: "ingest", "an ingest at"). Shared by
    ``ingest_ssts`` and ``commit_ssts`` (hummock/multi_commit.py)."""
    try:
        infos = tuple(infos)
    except TypeError:
        raise InvalidArgumentError(f"infos must be an iterable of SstableInfo, got {type(infos).__name__}") from None
    if len(infos) > MAX_EXTERNAL_SSTS:
        raise InvalidArgumentError(f"at most {MAX_EXTERNAL_SSTS} SSTs per {noun}, got {len(infos)}")
    seen = set()
    for info in infos:
        if not isinstance(info, SstableInfo):
            raise InvalidArgumentError(f"infos must hold SstableInfo, got {type(info).__name__}")
        if not epoch <= info.min_epoch <= info.max_epoch <= epoch | EPOCH_SPILL_MASK:
            raise InvalidArgumentError(f"SST {info.sst_id} holds epochs [{info.min_epoch}, {info.max_epoch}]; "
                                       f"{at} {epoch} takes [{epoch}, {epoch | EPOCH_SPILL_MASK}]")
        if info.sst_id in seen:
            raise InvalidArgumentError(f"SST {info.sst_id} is listed twice")
        seen.add(info.sst_id)
    return infos


def check_infos(table_id: int, infos, epoch: int) -> tuple:
    """``infos`` as a tuple of :class:`SstableInfo` of ``table_id`` only, at versions in
    ``[epoch, epoch | 0xFFFF]``, ids unique, at least one; ``InvalidArgumentError`` naming the
    first that is not."""
    infos = check_sst_list(infos, epoch)
    if not infos:
        raise InvalidArgumentError("ingest_ssts needs at least one SST (an empty load publishes nothing)")
    for info in infos:
        if tuple(info.table_ids) != (table_id,):
            raise InvalidArgumentError(f"SST {info.sst_id} holds tables {list(info.table_ids)}; an ingest "
                                       f"takes SSTs of table {table_id} only")
    return infos


VERIFY_THREADS = 16   # SST metas read back at once (an S3 GET each: one at a time, 256 SSTs took seconds)


def verify_objects(store, infos) -> None:
    """Read each SST's meta back (up to ``VERIFY_THREADS`` at once) and compare it with its
    info; ``InvalidArgumentError`` naming the first (in ``infos`` order) that is missing or
    describes something else (nothing is published then)."""
    infos = list(infos)
    if len(infos) <= 1:
        metas = [_read_meta(store, info) for info in infos]
    else:
        with ThreadPoolExecutor(min(VERIFY_THREADS, len(infos)), thread_name_prefix="verify-sst") as pool:
            metas = list(pool.map(lambda info: _read_meta(store, info), infos))
    for info, meta in zip(infos, metas):
        if meta is None:
            raise InvalidArgumentError(f"SST {info.sst_id} ({info.object_path}) does not exist in the store: "
                                       f"a lost upload, or vacuumed as an orphan before the load was "
                                       f"published")
        found = (meta.smallest_key, meta.largest_key, meta.min_epoch, meta.max_epoch, meta.key_count,
                 meta.tombstone_count, tuple(meta.table_ids))
        expected = (info.smallest_key, info.largest_key, info.min_epoch, info.max_epoch, info.key_count,
                    info.tombstone_count, tuple(info.table_ids))
        if info.live_counts is not None:   # a claimed row count must be the stored one (count(*) trusts it)
            found += (meta.live_counts,)
            expected += (info.live_counts,)
        if found != expected:
            raise InvalidArgumentError(f"SST {info.sst_id}: the stored object does not match its SstableInfo "
                                       f"(stored {found!r:.300}, given {expected!r:.300})")


def _read_meta(store, info):
    """The stored meta of SST ``info``, or None when its object does not exist."""
    try:
        return Sstable.open(store, info).meta
    except ObjectNotFoundError:
        return None


def _overlapping(infos) -> bool:
    ordered = sorted(infos, key=lambda i: i.smallest_key[:-8])
    return any(a.largest_key[:-8] >= b.smallest_key[:-8] for a, b in zip(ordered, ordered[1:]))


def _require_empty(storage, version, table_id: int) -> None:
    """Under the engine lock: TableNotEmptyError unless ``table_id`` holds nothing anywhere."""
    if any(table_id in info.table_ids for info in version.all_ssts()):
        raise TableNotEmptyError(f"table {table_id} is not empty: SSTs of version {version.id} hold it; "
                                 f"a bulk load goes into a new or empty table")
    if any(table_id in info.table_ids for info in storage._staging):
        raise TableNotEmptyError(f"table {table_id} has synced writes not yet committed")
    if any(imm.table_id == table_id for imm in storage._all_imms()):
        raise TableNotEmptyError(f"table {table_id} has buffered writes not yet committed")
    marks = storage._marks.get(table_id)
    if marks is not None and marks.entries:
        raise TableNotEmptyError(f"table {table_id} has watermark records: they would hide loaded rows")


def landed(storage, table_id: int, infos, epoch: int) -> bool:
    """Whether the bulk load of ``infos`` into ``table_id`` at ``epoch`` is published (a retry
    after an unknown outcome asks). A pending manifest delta is finished first (raises while
    the store keeps failing). Decided from the version's durable record of the load
    (``HummockVersion.bulk_loads``), which compaction leaves alone -- not from the SST ids,
    which it rewrites; a load published by a version before that record existed is still
    recognised while all its SSTs are in the version."""
    infos = tuple(infos)
    digest = bulk_load_digest(info.sst_id for info in infos)
    with storage._manifest_lock, storage._lock:
        storage._require_writer()
        storage._adopt_pending()
        version = storage._version
        if (table_id, epoch, digest) in version.bulk_loads:
            return True
        return (bool(infos) and epoch == version.max_committed_epoch
                and {info.sst_id for info in infos} <= version.sst_ids())


def ingest(storage, table_id: int, infos, epoch: int) -> None:
    """Publish ``infos`` (SSTs of ``table_id`` already in the store) at ``epoch`` in one commit
    delta with every write of this store at epochs <= ``epoch`` (module docstring). Raises
    TableNotEmptyError, InvalidArgumentError, ConcurrentWriterError (fenced: nothing
    published), OutcomeUnknownError (pending: call again)."""
    infos = check_infos(table_id, infos, epoch)
    if landed(storage, table_id, infos, epoch):
        return   # a retry after an unknown outcome whose commit landed (its SSTs may be compacted away)
    verify_objects(storage._store, infos)     # no lock: reads only
    digest = bulk_load_digest(info.sst_id for info in infos)
    while True:
        with storage._manifest_lock:
            with storage._lock:
                storage._require_writer()
                storage._check_ownership()
                storage._adopt_pending()
                version = storage._version
                if (table_id, epoch, digest) in version.bulk_loads:
                    return   # landed meanwhile (a concurrent retry)
                if epoch <= storage.max_committed_epoch:   # (with one committed without a delta)
                    raise InvalidArgumentError(f"ingest epoch {epoch} is not above max_committed_epoch "
                                               f"{storage.max_committed_epoch}")
                _require_empty(storage, version, table_id)
                staged = epoch <= storage._synced_epoch and not storage._has_imms_up_to(epoch)
                if staged:
                    ssts = storage._staged_up_to(epoch, "ingest at {highest} or later instead") + infos
                    delta = VersionDelta.commit(version, epoch, ssts, overlapping=_overlapping(ssts),
                                                table_watermarks=storage._marks_to_publish(epoch),
                                                bulk_load=(table_id, digest))
            if staged:
                storage._publish(delta)
                return
        storage.sync(epoch)   # seals epoch: later writes at <= epoch are refused
