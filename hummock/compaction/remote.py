"""Compaction in another process: what a Spark executor or a worker process runs for one split.

A split (:mod:`hummock.compaction.splits`) travels with a picklable :class:`StoreDescription`
of the store (URL + S3 settings), the watermark, what table watermarks hide at it and the
builder settings; the process opens the
store (kept open for later splits: :func:`open_cached_store`), opens the split's input SSTs with
a private block cache, runs the one compaction core (:func:`~hummock.compaction.core.compact`)
over the split's key range and returns plain data: the outputs' ``SstableInfo`` dicts, the
stats as a dict, and the seconds spent in the core. SST ids come from the caller (reserved in
the version before the split was sent); nothing here touches a version.

Callers: :mod:`hummock.compaction.spark` (executors) and :mod:`hummock.compaction.pool`
(worker processes).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time

from hummock.compaction.core import CompactionStats, compact
from hummock.errors import HummockError, InvalidArgumentError

CACHED_STORES = 4      # open object stores a process keeps between splits
_stores: dict = {}     # StoreDescription -> open ObjectStore (most recently used last)


@dataclasses.dataclass(frozen=True)
class StoreDescription:
    """A picklable recipe for opening the same object store elsewhere: ``open_object_store(url,
    **dict(options))``. Holds S3 credentials when the store's options do (never printed)."""

    url: str
    options: tuple = dataclasses.field(default=(), repr=False)

    @classmethod
    def of(cls, store, storage_options=None) -> StoreDescription:
        """Describe an open ``LocalObjectStore`` or ``S3ObjectStore``; credentials come from
        ``storage_options`` (a ``StorageOptions``), else executors use the AWS environment.
        Raises InvalidArgumentError for any other store (executors could not reach it)."""
        from hummock.object_store import LocalObjectStore

        if isinstance(store, LocalObjectStore):
            return cls(store.root)
        s3 = sys.modules.get("hummock.object_store.s3")   # (imported iff an S3 store exists: no boto3 else)
        if s3 is not None and isinstance(store, s3.S3ObjectStore):
            settings = {"endpoint_url": store.endpoint_url, "region": store.region,
                        "max_attempts": store.max_attempts, "part_size": store.part_size}
            if storage_options is not None:
                settings.update(storage_options.s3_options())
            settings = {k: v for k, v in settings.items() if v is not None}
            return cls(f"s3://{store.bucket}/{store.prefix}", tuple(sorted(settings.items())))
        raise InvalidArgumentError(
            f"compaction in other processes (compactor='spark', compaction_workers) needs a store "
            f"they can open (a local directory or S3), not {type(store).__name__}")

    def open(self):
        from hummock.object_store import open_object_store

        return open_object_store(self.url, **dict(self.options))


def open_cached_store(description: StoreDescription):
    """The worker process's open store for ``description``: reused by later tasks in the worker,
    the least recently used of more than ``CACHED_STORES`` closed. (A worker runs one task
    at a time.)"""
    store = _stores.pop(description, None)
    if store is None:
        store = description.open()
        while len(_stores) >= CACHED_STORES:
            _stores.pop(next(iter(_stores))).close()
    _stores[description] = store   # most recently used last
    return store


def compact_split(store: StoreDescription, split, ids: range, watermark: int, bottom: bool, builder_options,
                  target_sst_size: int, cache_bytes: int, *, error=HummockError,
                  fail_after: int | None = None, hide: dict | None = None) -> tuple[list, dict, float]:
    """Compact ``split`` (its runs, within its bounds); return ``(info dicts, stats dict, seconds
    in the core)``. Outputs are named from ``ids`` (reserved by the caller); running out raises
    ``error``. Test hook: with ``fail_after`` = k the split raises ``error`` when asked for its
    (k+1)-th id, or at its end if it makes fewer outputs. ``hide``: as for
    :func:`~hummock.compaction.core.compact`."""
    from hummock.iterators import SstRun
    from hummock.read_view import SstReader
    from hummock.sstable.cache import LruCache

    available = iter(ids)
    issued = 0

    def new_sst_id() -> int:
        nonlocal issued
        if fail_after is not None and issued >= fail_after:
            raise error(f"injected failure in split {split.index} after {issued} outputs (test hook)")
        issued += 1
        try:
            return next(available)
        except StopIteration:
            raise error(f"split {split.index} used up its {len(ids)} reserved SST ids") from None

    opened = open_cached_store(store)
    opener = functools.partial(_open_sst, opened, LruCache(cache_bytes, "split_block_cache"))
    runs = [SstRun([SstReader(info, opener) for info in run], split.start, split.end) for run in split.runs]
    stats = CompactionStats()
    began = time.perf_counter()
    outputs = compact(runs, watermark, bottom, opened, builder_options, target_sst_size, new_sst_id, stats, hide)
    if fail_after is not None:
        raise error(f"injected failure at the end of split {split.index} (test hook)")
    return [info.to_dict() for info in outputs], dataclasses.asdict(stats), time.perf_counter() - began


def _open_sst(store, cache, info):
    from hummock.sstable.reader import Sstable

    return Sstable.open(store, info, block_cache=cache)
