"""Child process of tests/test_two_process.py: a writer that commits and compacts hard until told
to stop, so that SSTs keep leaving the version and vacuum keeps deleting them while a reader in
another process (tests/lease_reader.py) reads.

Usage: ``python churn_writer.py URL OPTIONS_JSON STOP_FILE``. ``OPTIONS_JSON`` holds extra
``StorageOptions`` fields (S3 endpoint and test credentials). Commits epochs ``i = 1, 2, ...``
(epoch ``i << 16``) of ``epoch_batch(i)``, runs ``compact_all()`` every ``COMPACT_EVERY`` epochs and
``vacuum()`` every ``VACUUM_EVERY``, next to the background compactor, until ``STOP_FILE`` exists;
then prints ``SUMMARY <json>`` and closes the store. Progress: ``opened``, ``committed <i>``
every ten epochs (the parent polls a file, so nothing blocks on a pipe).

The content of every epoch is a pure function of its number (``expected_state``), so a reader
checks any committed epoch it reads without replaying the log. Key ``k`` (of ``KEYS``, from
``HUMMOCK_CHURN_KEYS``, default 2000) is
written at the epochs ``j`` with ``(k + j) % STRIDE == 0``, deleted there when
``(k * 31 + j) % DELETE_EVERY == 0``, else given ``value(k, j)``.
"""

import json
import os
import sys
import time

from hummock import HummockStorage, StorageOptions

TABLE = 1
KEYS = int(os.environ.get("HUMMOCK_CHURN_KEYS", "2000"))   # the parent sets it for both children
STRIDE = 5
DELETE_EVERY = 7
COMPACT_EVERY = 8
VACUUM_EVERY = 3
PAUSE_S = 0.01
# small SSTs, the background compactor plus compact_all, frequent manifest checkpoints (each
# rotation deletes old deltas under the reader), a short vacuum age and reader lease
OPTIONS = StorageOptions(compactor="local", target_sst_size=4096, block_size=1024, compression="none",
                         checkpoint_interval=4, vacuum_min_age_s=1.0, reader_lease_s=2.0,
                         block_cache_capacity=4 << 20, meta_cache_capacity=4 << 20)


def key(k: int) -> bytes:
    return b"key%06d" % k


def value(k: int, j: int) -> bytes:
    return b"v%d-%d:" % (j, k) + b"%08x" % ((k * 2654435761 + j * 40503) & 0xFFFFFFFF) * 5


def epoch_batch(i: int):
    """The one sorted batch of epoch ``i``."""
    ks = [k for k in range(KEYS) if (k + i) % STRIDE == 0]
    return [(key(k), None if (k * 31 + i) % DELETE_EVERY == 0 else value(k, i)) for k in ks]


def expected_value(k: int, i: int):
    """The value of key ``k`` at epoch ``i`` (None: absent)."""
    j = i - (k + i) % STRIDE   # the last epoch <= i that wrote k
    if j < 1 or (k * 31 + j) % DELETE_EVERY == 0:
        return None
    return value(k, j)


def expected_state(i: int, keys: int | None = None) -> dict:
    """``{key: value}`` of the table at epoch ``i`` (``i = 0``: empty) over ``keys`` keys
    (default ``KEYS``)."""
    out = {}
    for k in range(KEYS if keys is None else keys):
        v = expected_value(k, i)
        if v is not None:
            out[key(k)] = v
    return out


def main(url: str, extra: dict, stop_file: str) -> int:
    store = HummockStorage.open(url, OPTIONS.replace(**extra))
    print("opened", flush=True)
    i = store.max_committed_epoch >> 16
    compact_all_tasks = vacuumed_by_hand = 0
    started = time.monotonic()
    while not os.path.exists(stop_file):
        i += 1
        store.ingest_batch(TABLE, epoch_batch(i), i << 16)
        store.checkpoint(i << 16)
        if i % 10 == 0:
            print(f"committed {i}", flush=True)
        if i % COMPACT_EVERY == 0:
            compact_all_tasks += store.compact_all()
        if i % VACUUM_EVERY == 0:
            vacuumed_by_hand += store.vacuum()
        time.sleep(PAUSE_S)
    stats = store.stats()
    summary = {"epochs": i, "seconds": round(time.monotonic() - started, 1),
               "compact_all_tasks": compact_all_tasks, "background": stats["compaction"],
               "vacuumed_ssts": stats.get("vacuumed_ssts", 0), "vacuumed_by_hand": vacuumed_by_hand,
               "version_id": stats["version_id"], "ssts_in_version": len(store.version().sst_ids()),
               "write_stalls": stats.get("write_stalls", 0)}
    store.close()
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]))
