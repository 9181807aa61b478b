"""Child process of tests/test_crash.py: writes and commits epochs until it is killed.

Usage: ``python crash_writer.py STORE_PATH``. Resumes after the store's max_committed_epoch.
Each epoch i (epoch = i << 16) writes ``crash_batch(i)`` -- deterministic, so the parent can
rebuild the expected contents -- in two batches (the second one deletes and overwrites), syncs
every third epoch, and commits; after each commit it prints ``committed <i>`` and flushes.
"""

import sys

from hummock import HummockStorage, StorageOptions

OPTIONS = StorageOptions(shared_buffer_capacity=64 * 1024, block_size=1024, target_sst_size=16 * 1024,
                         checkpoint_interval=8, vacuum_min_age_s=0)


def crash_batch(i: int):
    """The two batches of epoch ``i``: ``(table, [(key, value_or_None)])`` each, keys sorted."""
    keys = sorted({b"k%05d" % ((i * 7919 + j * 104729) % 3000) for j in range(120)})
    first = [(k, b"v%d-" % i + k * 3) for k in keys]
    second = [(k, None if n % 5 == 0 else b"w%d" % i) for n, k in enumerate(keys[::4])]
    return [(1 + i % 2, first), (1 + i % 2, second)]


def main(path: str) -> None:
    store = HummockStorage.open(path, OPTIONS)
    i = (store.max_committed_epoch >> 16) + 1
    while True:
        for table, batch in crash_batch(i):
            store.ingest_batch(table, batch, i << 16)
        if i % 3 == 0:
            store.sync(i << 16)
        store.commit_epoch(i << 16)
        print(f"committed {i}", flush=True)
        i += 1


if __name__ == "__main__":
    main(sys.argv[1])
