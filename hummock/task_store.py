"""A Spark task's store: one pinned version read-only, plus the task's own writes at ONE epoch.

A distributed pipeline (``sql/spark_pipeline``) runs each step of a streaming job as Spark
tasks. A task gets the bytes of the version the driver pinned (``hummock/pinned_read.py``), the
epoch ``e`` it writes at and a block of reserved SST ids; it runs unchanged relational code
(:class:`~relational.state_table.StateTable`, and
:class:`~relational.storage_table.StorageTable` for snapshot reads) over a :class:`TaskStore`,
which answers every store call they make (``get``, ``multi_get``, ``iter``, ``scan_prefixes``,
``ingest_batch``, ``update_table_watermarks``, ``table_watermarks``, ``set_table_options``,
``table_options``, ``snapshot``, ``max_committed_epoch``, ``min_readable_epoch``). At the end :meth:`TaskStore.finish` builds the task's writes into SSTs
straight in the object store and returns a picklable :class:`TaskOutput` that travels to the
driver, which publishes every task's output in one delta (``HummockStorage.commit_ssts``,
``hummock/multi_commit.py``).

Reads are the engine's own merge path: the task's writes are imms of a
:class:`~hummock.shared_buffer.SharedBuffer` and every read goes through a
:class:`~hummock.read_view.ReadState` over those imms and a
:class:`~hummock.read_view.VersionView` of the pinned version, built as
:class:`~hummock.pinned_read.VersionReader` builds it (a vacuumed SST -- an expired job pin --
raises ``VersionExpiredError``).

Invariants:
- ``epoch`` (``e``) is a user epoch (low 16 bits zero) above the version's
  ``max_committed_epoch``; every write and watermark update is at ``e`` exactly.
- A read at epoch ``E`` sees the version's data at ``min(E, max_committed_epoch)`` (nothing in
  the version is newer) and, when ``E >= e``, the task's writes: newest wins per key, tombstones
  hide; reads below the version's ``safe_epoch`` raise ``ExpiredEpochError``. Watermarks -- the
  version's plus the task's updates at ``e`` (merged as ``HummockStorage.update_table_watermarks``
  merges them) -- hide keys for reads at ``E >= e`` exactly as the engine's reads do.
- Several batches of one table get spill offsets 0, 1, 2... (as the engine's shared buffer
  gives them); :meth:`finish` with ``spill_offset=s`` writes batch ``i`` at version
  ``e + s + i``: all must stay within ``[e, e | 0xFFFF]`` (else ``InvalidArgumentError``), and
  newest-wins holds inside the task. Deletes are written as tombstones, so they hide older
  versions in the pinned version's SSTs once committed.
- After a successful :meth:`finish` the store takes no more writes (reads go on).

Memory is the task's: every write stays in memory until :meth:`finish` (no spilling, no
``shared_buffer_capacity``); a task sized for one Spark partition's work keeps that in mind.
Nothing here takes a lock: one task, one thread.

Callers: ``sql/spark_pipeline`` (executor side), tests.
"""

from __future__ import annotations

import bisect
import dataclasses
import json

import numpy as np

from hummock.errors import CorruptionError, ExpiredEpochError, InvalidArgumentError
from hummock.flush import flush_imms
from hummock.key import EPOCH_SPILL_MASK, MAX_EPOCH
from hummock.options import StorageOptions
from hummock.pinned_read import _PinnedSstStore
from hummock.read_view import ReadHandle, ReadState, SstReader, VersionView, version_groups
from hummock.shared_buffer import SharedBuffer, check_batch
from hummock.sstable.builder import check_prefix_lens
from hummock.sstable.cache import LruCache
from hummock.sstable.meta import MAX_PREFIX_LEN, SstableInfo
from hummock.sstable.reader import Sstable
from hummock.table_watermarks import TableWatermarks, check_ranges
from hummock.version import HummockVersion
from hummock.version_codec import decode_version

__all__ = ["TaskStore", "TaskOutput", "TaskSnapshot"]

MAX_TABLE_ID = 0xFFFFFFFF
TASK_OUTPUT_FORMAT = 1     # TaskOutput.to_bytes's leading tag


def _table_id(table_id) -> int:
    if isinstance(table_id, bool) or not isinstance(table_id, int) or not 0 <= table_id <= MAX_TABLE_ID:
        raise InvalidArgumentError(f"table_id must be an int in [0, {MAX_TABLE_ID}], got {table_id!r}")
    return table_id


def _prefixes(keys) -> set:
    """The distinct 2-byte prefixes (vnodes) of ``keys``, sorted ascending: one bisect per
    prefix, not a Python step per key."""
    out = set()
    i, n = 0, len(keys)
    while i < n:
        key = keys[i]
        if len(key) < 2:
            i += 1
            continue
        prefix = key[:2]
        out.add(prefix)
        if prefix == b"\xff\xff":
            break
        upper = (int.from_bytes(prefix, "big") + 1).to_bytes(2, "big")
        i = bisect.bisect_left(keys, upper, i + 1)
    return out


def _packed_prefixes(batch) -> set:
    """:func:`_prefixes` of a checked ``PackedColumns``' keys (one numpy pass)."""
    width = batch.key_width
    if width < 2:
        return set()
    heads = np.frombuffer(batch.keys, dtype=np.uint8).reshape(-1, width)[:, :2]
    return {bytes(row) for row in np.unique(heads, axis=0)}


@dataclasses.dataclass(frozen=True)
class TaskOutput:
    """What a task hands the driver: its SSTs (in the object store, under reserved ids), its
    watermark updates ``{table_id: {vnode: (lo, hi)}}`` (the form
    ``update_table_watermarks`` / ``commit_ssts(table_watermarks=...)`` take) and
    ``{table_id: sorted tuple of vnodes it wrote}`` (keys shorter than a vnode add none).
    Plain data: picklable, and :meth:`to_bytes` / :meth:`from_bytes` give a checked encoding
    (Spark ships it from executors to the driver)."""

    ssts: tuple = ()
    watermarks: dict = dataclasses.field(default_factory=dict)
    tables_written: dict = dataclasses.field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """A self-contained encoding (``from_bytes`` reads it back): a tag byte, then UTF-8
        JSON ``{"ssts": [SstableInfo.to_dict()...], "watermarks": [[table_id, [[vnode, lo hex,
        hi hex or null], ...]], ...], "tables_written": [[table_id, [vnode, ...]], ...]}``.
        Transient (executor to driver), not stored."""
        body = {"ssts": [info.to_dict() for info in self.ssts],
                "watermarks": [[t, [[v, lo.hex(), None if hi is None else hi.hex()]
                                    for v, (lo, hi) in sorted(r.items())]]
                               for t, r in sorted(self.watermarks.items())],
                "tables_written": [[t, list(v)] for t, v in sorted(self.tables_written.items())]}
        return bytes([TASK_OUTPUT_FORMAT]) + json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data) -> TaskOutput:
        """Decode ``to_bytes``'s output; ``CorruptionError`` for anything else."""
        data = bytes(data)
        if not data or data[0] != TASK_OUTPUT_FORMAT:
            raise CorruptionError("not a TaskOutput encoding", object="TaskOutput", offset=0,
                                  expected=TASK_OUTPUT_FORMAT, found=data[0] if data else None)
        try:
            body = json.loads(data[1:])
            ssts = tuple(SstableInfo.from_dict(d) for d in body["ssts"])
            marks = {}
            for table_id, ranges in body["watermarks"]:
                marks[_table_id(table_id)] = {v: (bytes.fromhex(lo), None if hi is None else bytes.fromhex(hi))
                                              for v, lo, hi in ranges}
                check_ranges(marks[table_id])
            written = {_table_id(t): tuple(int(v) for v in vnodes) for t, vnodes in body["tables_written"]}
            for info in ssts:
                if not isinstance(info.sst_id, int) or not isinstance(info.smallest_key, bytes):
                    raise TypeError("bad SstableInfo")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptionError(f"malformed TaskOutput: {type(exc).__name__}: {exc}"[:300],
                                  object="TaskOutput") from None
        return cls(ssts, marks, written)


class TaskSnapshot:
    """A committed epoch of a task store's pinned version (:meth:`TaskStore.snapshot`)."""

    def __init__(self, state, epoch: int):
        self._state = state
        self.epoch = epoch
        self._released = False

    def _live(self):
        if self._released:
            raise InvalidArgumentError("snapshot already released")
        return self._state

    def get(self, table_id: int, key: bytes):
        return self._live().get(table_id, key, self.epoch)

    def multi_get(self, table_id: int, keys) -> list:
        return self._live().multi_get(table_id, keys, self.epoch)

    def iter(self, table_id: int, start=None, end=None, *, prefix=None, reverse=False):
        return self._live().iter(table_id, self.epoch, start, end, prefix=prefix, reverse=reverse)

    def release(self) -> None:
        self._released = True

    def __enter__(self) -> TaskSnapshot:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class TaskStore:
    """Reads one pinned version plus the task's writes at epoch ``e``; :meth:`finish` builds
    the writes into SSTs. See the module docstring for the read and write rules."""

    read_only = False   # StateTable declares prefix lengths on stores that can take them

    def __init__(self, object_store, version, epoch: int, *, options: StorageOptions | None = None,
                 block_cache_bytes: int = 64 << 20):
        if isinstance(version, (bytes, bytearray, memoryview)):
            version = decode_version(bytes(version), object="pinned version")
        if not isinstance(version, HummockVersion):
            raise InvalidArgumentError(f"version must be a HummockVersion or its bytes, got {type(version).__name__}")
        if options is None:
            options = StorageOptions()
        elif not isinstance(options, StorageOptions):
            raise InvalidArgumentError(f"options must be a StorageOptions, got {type(options).__name__}")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
            raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
        if epoch & EPOCH_SPILL_MASK:
            raise InvalidArgumentError(f"epoch {epoch} has low 16 bits set; a task writes at a user epoch")
        if epoch <= version.max_committed_epoch:
            raise InvalidArgumentError(f"task epoch {epoch} is not above the version's max_committed_epoch "
                                       f"{version.max_committed_epoch}")
        self.version = version
        self.options = options
        self._store = object_store
        self._epoch = epoch
        ssts = _PinnedSstStore(object_store)
        cache = LruCache(block_cache_bytes, "task_block_cache")
        meta_cache = LruCache(4 << 20, "task_meta_cache")
        opener = lambda info: Sstable.open(ssts, info, meta_cache=meta_cache, block_cache=cache)  # noqa: E731
        l0, levels = version_groups(version, lambda info: SstReader(info, opener))
        self._view = VersionView(l0, levels, version, version.safe_epoch, version.table_watermarks)
        self._buffer = SharedBuffer()
        self._buffer.seal(version.max_committed_epoch)
        self._marks = dict(version.table_watermarks)
        self._own_marks: dict[int, dict] = {}      # table id -> {vnode: (lo, hi)} set at e
        self._prefix_lens = dict(version.prefix_len_map)
        self._vnodes: dict[int, set] = {}           # table id -> 2-byte vnode prefixes written
        self._finished = False
        self._handle = ReadHandle(self._new_state())
        self.get, self.multi_get = self._handle.get, self._handle.multi_get
        self.iter, self.scan_prefixes = self._handle.iter, self._handle.scan_prefixes

    # --- properties -------------------------------------------------------------------------

    @property
    def max_committed_epoch(self) -> int:
        """The pinned version's ``max_committed_epoch``."""
        return self.version.max_committed_epoch

    @property
    def epoch(self) -> int:
        """The task's write epoch ``e``."""
        return self._epoch

    @property
    def min_readable_epoch(self) -> int:
        """Reads below it raise ``ExpiredEpochError`` (the version's ``safe_epoch``)."""
        return self.version.safe_epoch

    def stats(self) -> dict:
        """Buffered writes: imm count and bytes (the task's memory)."""
        return {"imms": len(self._buffer), "buffered_bytes": self._buffer.size}

    # --- reads (get / multi_get / iter / scan_prefixes are the ReadHandle's, set in __init__) ----

    def snapshot(self, epoch: int | None = None) -> TaskSnapshot:
        """Reads of committed ``epoch`` (default: ``max_committed_epoch``) of the pinned
        version, shaped as ``HummockStorage.snapshot``'s (what ``StorageTable`` reads through):
        ``get``/``multi_get``/``iter`` without an epoch argument, ``release``, a context
        manager. The version is pinned for the task already: releasing frees nothing.
        REQUIRES ``safe_epoch <= epoch <= max_committed_epoch`` (else ``ExpiredEpochError`` /
        ``InvalidArgumentError``)."""
        committed = self.version.max_committed_epoch
        if epoch is None:
            epoch = committed
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= committed:
            raise InvalidArgumentError(f"snapshot epoch {epoch!r} is not a committed epoch of the pinned "
                                       f"version (max_committed_epoch {committed})")
        if epoch < self.version.safe_epoch:
            raise ExpiredEpochError(epoch, self.version.safe_epoch)
        return TaskSnapshot(self._handle.state, epoch)

    def _new_state(self) -> ReadState:
        return ReadState(self._buffer.frozen(), (), self._view, self._marks)

    def _refresh(self) -> None:
        self._handle.state = self._new_state()

    # --- writes -----------------------------------------------------------------------------

    def _check_write(self, epoch, what: str) -> None:
        if self._finished:
            raise InvalidArgumentError(f"{what} after finish(): the task's SSTs are built")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch != self._epoch:
            raise InvalidArgumentError(f"{what} at epoch {epoch!r}: this task writes at epoch {self._epoch} only")

    def ingest_batch(self, table_id: int, kv_pairs, epoch: int) -> None:
        """Write a batch at ``epoch`` (must be ``e``): ``(key, value)`` pairs sorted strictly
        ascending by key, value ``None`` = delete; visible at once to reads at epochs >= ``e``.
        Raises ``InvalidArgumentError`` (nothing written) as ``HummockStorage.ingest_batch``."""
        table_id = _table_id(table_id)
        self._check_write(epoch, "ingest_batch")
        keys, values, size = check_batch(kv_pairs)
        if not keys:
            return
        self._buffer.add(table_id, epoch, keys, values, size)
        if values is None:   # a PackedColumns: the prefixes straight from its key buffer
            prefixes = _packed_prefixes(keys)
        else:
            prefixes = _prefixes(keys)
        self._vnodes.setdefault(table_id, set()).update(prefixes)
        self._refresh()

    def update_table_watermarks(self, table_id: int, epoch: int, watermarks) -> None:
        """From ``e`` on, hide keys of ``table_id`` below a watermark per vnode (``{vnode: W or
        (lo, hi)}``), merged into each vnode's current range as the engine merges them
        (``HummockStorage.update_table_watermarks``). ``epoch`` must be ``e``. Raises
        ``InvalidArgumentError`` (nothing changes) for bad ranges or a range disjoint from its
        vnode's current one."""
        table_id = _table_id(table_id)
        self._check_write(epoch, "update_table_watermarks")
        ranges = check_ranges(watermarks)
        if not ranges:
            return
        records = self._marks.get(table_id, TableWatermarks()).with_watermarks(epoch, ranges)
        latest = records.latest
        own = dict(self._own_marks.get(table_id, {}))
        for vnode in ranges:
            own[vnode] = latest[vnode]
        marks = dict(self._marks)
        marks[table_id] = records
        self._marks = marks
        self._own_marks[table_id] = own
        self._refresh()

    def table_watermarks(self, table_id: int) -> TableWatermarks:
        """The records this store's reads apply: the version's plus the task's at ``e``."""
        return self._marks.get(_table_id(table_id), TableWatermarks())

    def set_table_options(self, table_id: int, *, prefix_len: int | None) -> None:
        """Declare (or drop, ``None``) ``table_id``'s key-prefix length for the SSTs
        :meth:`finish` builds (their prefix filters), as ``HummockStorage.set_table_options``
        does for flushes. Task-local: the driver declares it on the writer for the version
        (``StateTable`` does so when built there). Reads stay exact either way."""
        table_id = _table_id(table_id)
        if prefix_len is not None and (isinstance(prefix_len, bool) or not isinstance(prefix_len, int)
                                       or not 1 <= prefix_len <= MAX_PREFIX_LEN):
            raise InvalidArgumentError(f"prefix_len must be None or an int in [1, {MAX_PREFIX_LEN}], "
                                       f"got {prefix_len!r}")
        if prefix_len is None:
            self._prefix_lens.pop(table_id, None)
        else:
            self._prefix_lens[table_id] = prefix_len

    def table_options(self, table_id: int) -> dict:
        """``{"prefix_len": n or None}`` as this task declares it."""
        return {"prefix_len": self._prefix_lens.get(_table_id(table_id))}

    def truncate_table(self, table_id: int, epoch: int) -> None:
        """Not supported: a truncation is DDL, run by the driver on the writer
        (``HummockStorage.truncate_table``). Raises ``InvalidArgumentError``."""
        raise InvalidArgumentError(f"truncate_table({table_id!r}) in a task store: truncations are the "
                                   f"driver's (HummockStorage.truncate_table on the writer)")

    # --- the end of the task --------------------------------------------------------------

    def finish(self, sst_ids, *, spill_offset: int = 0) -> TaskOutput:
        """Build every write of the task into SSTs in the object store, named from the
        iterable ``sst_ids`` (reserved by the driver), at versions ``e + spill_offset + i``
        (``i``: the batch's offset within its table), cut at ``options.target_sst_size``;
        return the :class:`TaskOutput`. Raises ``InvalidArgumentError`` if ``sst_ids`` runs
        out or the versions leave ``[e, e | 0xFFFF]``; on any error the SSTs written so far are
        orphans (vacuum removes them) and the store is unchanged, so ``finish`` may be called
        again with fresh ids. After success the store takes no more writes."""
        if self._finished:
            raise InvalidArgumentError("finish() was already called on this task store")
        if isinstance(spill_offset, bool) or not isinstance(spill_offset, int) or spill_offset < 0:
            raise InvalidArgumentError(f"spill_offset must be an int >= 0, got {spill_offset!r}")
        imms = self._buffer.all_imms()
        if imms:
            top = max(imm.epoch for imm in imms) - self._epoch + spill_offset
            if top > EPOCH_SPILL_MASK:
                raise InvalidArgumentError(
                    f"spill_offset {spill_offset} plus the task's {top - spill_offset + 1} batches of one "
                    f"table pass the epoch's {EPOCH_SPILL_MASK + 1} versions")
        try:
            available = iter(sst_ids)
        except TypeError:
            raise InvalidArgumentError(f"sst_ids must be an iterable of ints, got {type(sst_ids).__name__}") from None

        def new_sst_id() -> int:
            try:
                sst_id = next(available)
            except StopIteration:
                raise InvalidArgumentError("sst_ids ran out: the task needs more reserved SST ids") from None
            if isinstance(sst_id, bool) or not isinstance(sst_id, int) or not 0 <= sst_id < 2**64:
                raise InvalidArgumentError(f"sst_ids must hold ints in [0, 2**64), got {sst_id!r}")
            return sst_id

        shifted = [imm.at_epoch(imm.epoch + spill_offset) for imm in imms]
        builder_options = self.options.sst_builder_options().replace(
            prefix_lens=check_prefix_lens(self._prefix_lens))
        infos = flush_imms(shifted, self._store, builder_options, self.options.target_sst_size, new_sst_id) \
            if shifted else []
        self._finished = True
        written = {t: tuple(sorted(int.from_bytes(v, "big") for v in vnodes)) for t, vnodes in self._vnodes.items()}
        return TaskOutput(tuple(infos), {t: dict(r) for t, r in self._own_marks.items()},
                          dict(sorted(written.items())))
