"""``StorageOptions``: every tunable of a :class:`~hummock.storage.HummockStorage` in one place.

Names listed in DESIGN.md section 10 are stable; new ones may be added. Values are checked at
construction (``InvalidArgumentError`` naming the option). Sizes are bytes.

Callers: users (``HummockStorage.open(url, StorageOptions(...))``), the engine, compaction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace

from hummock.errors import InvalidArgumentError
from hummock.leases import MAX_LEASE_TTL_S
from hummock.sstable.builder import SstableBuilderOptions

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class StorageOptions:
    # --- SST format
    block_size: int = 64 * KiB              # target block size before compression
    restart_interval: int = 16              # entries between restart points in a block
    compression: str = "lz4"                # "lz4" or "none": compaction outputs (and bulk loads)
    flush_compression: str = "none"         # "lz4" or "none": the L0 SSTs a sync or spill uploads
    #                                         from the shared buffer (RisingWave's L0 default: they
    #                                         live until the next L0 compaction, which compresses)
    bloom_bits_per_key: int = 10
    target_sst_size: int = 64 * MiB         # sync and compaction cut outputs at this size
    # --- memory (real bytes: charges count CPython's per-object overhead; the defaults let a
    #     streaming process with default options stay under 1 GiB, docs/streaming.md)
    shared_buffer_capacity: int = 128 * MiB  # uncommitted imms; past it, data spills to staging SSTs
    block_cache_capacity: int = field(default_factory=lambda: default_block_cache_capacity())
    #                                         default: a sixteenth of the memory the process may use,
    #                                         128 MiB to 2 GiB (docs/streaming.md, the memory split)
    meta_cache_capacity: int = 32 * MiB
    # --- compaction (docs/compaction.md)
    compactor: str = "local"                # "local" (background thread), "spark" (PySpark jobs), "none"
    spark_master: str = "local[*]"          # used when this process makes the SparkSession (compactor="spark")
    compaction_workers: int = field(default_factory=lambda: default_compaction_workers())
    #                                         with "local": 0 merges in the background thread; N >= 1 in a
    #                                         pool of N worker processes (local or S3 stores; off the GIL).
    #                                         Default: 1 on a machine of 2+ cores, else 0 (docs/compaction.md)
    # --- manifest
    checkpoint_interval: int = 64            # deltas between manifest checkpoints
    # --- durability (docs/engine.md "What vacuum may delete")
    vacuum_min_age_s: float = 600.0          # vacuum never deletes an object younger than this, nor an
    #                                          SST that left the version less than this ago; 0 or >=
    #                                          reader_lease_s / 2 (0: at once -- tests, single process)
    reader_lease_s: float = 60.0             # a read-only opener's pin (lease object) lives this long
    #                                          unless renewed (it renews every third of it); readers
    #                                          and the writer of a store use the same value
    retention_seconds: float = 0.0           # keep every epoch committed in the last N seconds exactly
    #                                          readable (compaction keeps their versions)
    # --- S3 (also settable in the URL's query; credentials only here or in the environment)
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = field(default=None, repr=False)
    s3_secret_access_key: str | None = field(default=None, repr=False)
    s3_session_token: str | None = field(default=None, repr=False)
    s3_max_attempts: int | None = None
    s3_part_size: int | None = None
    s3_create_bucket_if_missing: bool = False   # a writer opening a bucket that does not exist creates it

    def __post_init__(self):
        self.sst_builder_options()  # checks block_size, restart_interval, compression, bloom bits
        if self.flush_compression not in ("lz4", "none"):
            raise InvalidArgumentError(f"StorageOptions.flush_compression must be 'lz4' or 'none', "
                                       f"got {self.flush_compression!r}")
        _at_least("target_sst_size", self.target_sst_size, 4 * KiB)
        _at_least("shared_buffer_capacity", self.shared_buffer_capacity, 64 * KiB)
        _at_least("block_cache_capacity", self.block_cache_capacity, 0)
        _at_least("meta_cache_capacity", self.meta_cache_capacity, 0)
        _at_least("checkpoint_interval", self.checkpoint_interval, 1)
        _at_least("compaction_workers", self.compaction_workers, 0)
        for name in ("vacuum_min_age_s", "retention_seconds"):
            _seconds(name, getattr(self, name), 0.0)
        _seconds("reader_lease_s", self.reader_lease_s, 0.001)
        if self.reader_lease_s > MAX_LEASE_TTL_S:   # a writer's vacuum would take the lease for malformed
            raise InvalidArgumentError(f"StorageOptions.reader_lease_s must be at most {MAX_LEASE_TTL_S} s "
                                       f"(30 days), got {self.reader_lease_s!r}")
        if 0 < self.vacuum_min_age_s < self.reader_lease_s / 2:
            raise InvalidArgumentError(
                f"StorageOptions.vacuum_min_age_s ({self.vacuum_min_age_s}) must be 0 or at least "
                f"reader_lease_s / 2 ({self.reader_lease_s / 2}): readers need that long to pin a "
                f"version they loaded (docs/engine.md)")
        if not isinstance(self.s3_create_bucket_if_missing, bool):
            raise InvalidArgumentError(f"StorageOptions.s3_create_bucket_if_missing must be a bool, got "
                                       f"{self.s3_create_bucket_if_missing!r}")
        if self.compactor not in ("local", "spark", "none"):
            raise InvalidArgumentError(f"compactor must be 'local', 'spark' or 'none', got {self.compactor!r}")

    def sst_builder_options(self) -> SstableBuilderOptions:
        return SstableBuilderOptions(block_size=self.block_size, restart_interval=self.restart_interval,
                                     compression=self.compression, bloom_bits_per_key=self.bloom_bits_per_key)

    def s3_options(self) -> dict:
        """The S3 settings as keyword options for ``open_object_store`` (unset ones omitted)."""
        names = {"s3_endpoint": "endpoint_url", "s3_region": "region", "s3_access_key_id": "access_key_id",
                 "s3_secret_access_key": "secret_access_key", "s3_session_token": "session_token",
                 "s3_max_attempts": "max_attempts", "s3_part_size": "part_size"}
        out = {names[f.name]: getattr(self, f.name) for f in fields(self)
               if f.name in names and getattr(self, f.name) is not None}
        if self.s3_create_bucket_if_missing:
            out["create_bucket_if_missing"] = True
        return out

    def replace(self, **changes) -> StorageOptions:
        return replace(self, **changes)


def _seconds(name: str, value, minimum: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not minimum <= value < float("inf"):
        raise InvalidArgumentError(f"StorageOptions.{name} must be a number of seconds >= {minimum}, got {value!r}")


def default_compaction_workers() -> int:
    """``StorageOptions.compaction_workers`` unless given: one worker process when the machine
    has a second core for it (a merge in the background thread holds the interpreter lock, so
    it runs serially with every reader and writer of the process), none on one core."""
    return 1 if (os.cpu_count() or 1) >= 2 else 0


BLOCK_CACHE_MIN = 128 * MiB
BLOCK_CACHE_MAX = 2048 * MiB


def default_block_cache_capacity() -> int:
    """``StorageOptions.block_cache_capacity`` unless given: 1/16 of :func:`usable_memory`,
    clamped to [128 MiB, 2 GiB]. A cache is a bound, not an allocation: it fills only with
    blocks that reads bring in. Why it scales: a whole-table scan larger than the cache gets no
    hit at all from an LRU cache (each pass evicts the blocks the next pass needs first), so
    every repeated query reads and decompresses the table again; 1/16 of a 24 GiB machine
    (1.5 GiB) holds a 10M-row table's blocks (~430 MiB). Databases size their caches from
    memory likewise (DuckDB's buffer pool takes 80% of it; RisingWave's docs suggest 30% of a
    serving node's memory for its block cache); 1/16 keeps a streaming process's split modest."""
    return min(max(usable_memory() // 16, BLOCK_CACHE_MIN), BLOCK_CACHE_MAX)


def usable_memory() -> int:
    """Physical memory, or the lowest memory limit of the process's cgroup and its ancestors
    when that is lower (:func:`cgroup_limit_files`); 0 when none of them can be read."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        total = 0
    for path in cgroup_limit_files():
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) and (total == 0 or int(text) < total):
            total = int(text)   # "max" (v2) or a huge number (v1): no limit
    return max(total, 0)


def cgroup_limit_files(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> list:
    """The memory-limit files of the process's cgroup and of each ancestor up to the root:
    v2's ``memory.max`` under the unified hierarchy (the ``0::<path>`` line of
    ``/proc/self/cgroup``), v1's ``memory.limit_in_bytes`` under the memory controller's. A limit
    on any of them bounds the process."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    files = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            base, name = root if os.path.exists(os.path.join(root, "cgroup.controllers")) \
                else os.path.join(root, "unified"), "memory.max"
        elif "memory" in controllers.split(","):
            base, name = os.path.join(root, "memory"), "memory.limit_in_bytes"
        else:
            continue
        segments = [s for s in path.split("/") if s and s not in (".", "..")]
        for i in range(len(segments), -1, -1):
            files.append(os.path.join(base, *segments[:i], name))
    return files


def _at_least(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgumentError(f"StorageOptions.{name} must be an int >= {minimum}, got {value!r}")
