"""Child process of tests/test_kill_points.py: a deterministic writer the parent kills at a
named kill point (``HUMMOCK_KILL_POINT=name[:N]`` in its environment, hummock/killpoints.py).

Usage: ``python kill_writer.py URL [OPTIONS_JSON]``. ``OPTIONS_JSON`` holds extra
``StorageOptions`` fields (the parent passes the S3 endpoint and the test credentials there).

Resumes after the store's ``max_committed_epoch``. Each epoch ``i`` (epoch ``i << 16``) writes
``epoch_batches(i)`` (a pure function of ``i``, so the parent rebuilds the expected contents),
then ``sync``, then ``commit_epoch`` -- so the commit call writes exactly one manifest delta (the
``reserve_ids`` deltas happen in ``sync``) -- and every third epoch ``compact_all()``, whose
every applied task runs a vacuum (``vacuum_min_age_s=0``: the inputs are deleted at once).
The vacuum deletes in batches of ``VACUUM_BATCH`` (2 here, 1000 in the engine), so a kill at
``vacuum.mid_delete`` really lands between two delete batches.

Progress lines (flushed), the phase the parent reads the in-flight operation from::

    opened <max_committed index>
    syncing <i>       sync(i): flushes SSTs, may reserve ids (a delta)
    committing <i>    commit_epoch(i): writes the commit delta of epoch i
    committed <i>     acknowledged
    compacting <i>    compact_all(): compaction deltas, then a vacuum after each task
    compacted <tasks>
    done              no kill point was hit (exit status 3)
"""

import json
import sys

import hummock.storage
from hummock import HummockStorage, StorageOptions

# retention keeps every committed epoch exactly readable (compaction keeps their versions), so
# the parent can check every epoch <= max_committed_epoch; the inputs still become garbage
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, retention_seconds=3600.0,
                         block_size=1024, target_sst_size=4096, checkpoint_interval=5,
                         block_cache_capacity=1 << 20, meta_cache_capacity=1 << 20)
TABLES = (1, 2)
MAX_EPOCHS = 12            # the cases kill by epoch 6; the run without a kill point ends here
COMPACT_EVERY = 3
TEST_VACUUM_BATCH = 2


def epoch_batches(i: int):
    """The batches of epoch ``i``: ``[(table, [(key, value_or_None), ...]), ...]``, keys sorted.
    Table 1 gets a second batch that deletes and overwrites part of the first (later batch wins)."""
    out = []
    for table in TABLES:
        keys = sorted({b"k%05d" % ((i * 7919 + j * 104729 + table * 31) % 2000) for j in range(150)})
        out.append((table, [(k, b"v%d-%d-" % (i, table) + k * 2) for k in keys]))
    keys = [k for k, _ in out[0][1]]
    out.append((1, [(k, None if n % 3 == 0 else b"w%d" % i) for n, k in enumerate(keys[::5])]))
    return out


def open_store(url: str, extra: dict) -> tuple[HummockStorage, int]:
    """(the store at ``url`` opened as the writer, the first epoch index to write), after
    printing ``opened``; deletes in batches of ``TEST_VACUUM_BATCH`` (module docstring)."""
    hummock.storage.VACUUM_BATCH = TEST_VACUUM_BATCH
    store = HummockStorage.open(url, OPTIONS.replace(**extra))
    first = (store.max_committed_epoch >> 16) + 1
    print(f"opened {first - 1}", flush=True)
    return store, first


def run_epochs(store: HummockStorage, first: int, write_epoch, before_sync=None) -> int:
    """The writers' protocol (module docstring) from epoch index ``first``: per epoch
    ``write_epoch(i)``, then ``before_sync()`` (a progress line of the caller's, if any), sync,
    commit, and every ``COMPACT_EVERY`` epochs ``compact_all()``, each step announced; then
    ``done``, the store closed, and exit status 3 returned."""
    for i in range(first, first + MAX_EPOCHS):
        write_epoch(i)
        if before_sync is not None:
            before_sync()
        print(f"syncing {i}", flush=True)
        store.sync(i << 16)
        print(f"committing {i}", flush=True)
        store.commit_epoch(i << 16)
        print(f"committed {i}", flush=True)
        if i % COMPACT_EVERY == 0:
            print(f"compacting {i}", flush=True)
            tasks = store.compact_all()
            print(f"compacted {tasks}", flush=True)
    print("done", flush=True)
    store.close()
    return 3


def main(url: str, extra: dict) -> int:
    store, first = open_store(url, extra)

    def write(i: int) -> None:
        for table, batch in epoch_batches(i):
            store.ingest_batch(table, batch, i << 16)
    return run_epochs(store, first, write)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}))
