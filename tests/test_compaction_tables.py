"""Several tables through real flushes and the compaction picker's tasks with tiny triggers: a large
table with growing keys (flush SSTs of its own, L0 beside its base level), a small one with
growing keys and a small one of upserts and deletes sharing flush SSTs. The per-table L0 -> base
picks (hummock/compaction/picker.py ``_base_below``) must keep every level valid and every read
equal to a dict of the writes."""

import random
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions
from hummock import flush as flush_module
from hummock.compaction import picker
from hummock.compaction.manager import CONFLICTS_IN_A_ROW
from hummock.compaction.picker import PickerConfig
from hummock.errors import HummockError

E = 1 << 16


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), workers=st.sampled_from([0, 1]))
def test_tables_with_own_and_shared_flush_ssts_read_back_after_background_compaction(
        tmp_path_factory, seed, workers):
    with mock.patch.object(flush_module, "TABLE_OWN_SST_BYTES", 2048):
        run(tmp_path_factory.mktemp("db"), seed, workers)


def run(path, seed: int, workers: int) -> None:
    rng = random.Random(seed)
    options = StorageOptions(block_size=512, target_sst_size=8 * 1024, compactor="local",
                             compaction_workers=workers, vacuum_min_age_s=0)
    model = {1: {}, 2: {}, 3: {}}
    with HummockStorage.open(str(path), options) as store:
        store._compactor.stop()   # every pick runs below, in this thread, and raises if it fails
        store._compactor.config = PickerConfig(l0_trigger=3, l0_intra_trigger=2)
        next_id = {1: 0, 2: 0}
        for n in range(1, 41):
            big = [(b"%08d" % (next_id[1] + i), rng.randbytes(rng.randrange(20, 80))) for i in range(60)]
            next_id[1] += 60
            small = [(b"%08d" % (next_id[2] + i), b"s%d" % n) for i in range(rng.randrange(1, 4))]
            next_id[2] += len(small)
            upserts = {b"u%03d" % rng.randrange(50): (None if rng.random() < 0.25 else b"%d" % n)
                       for _ in range(rng.randrange(1, 8))}
            for table_id, rows in ((1, big), (2, small), (3, sorted(upserts.items()))):
                store.ingest_batch(table_id, rows, n * E)
                for key, value in rows:
                    if value is None:
                        model[table_id].pop(key, None)
                    else:
                        model[table_id][key] = value
            store.checkpoint(n * E)
            store.compact_pending()
            store.version()._check()
        stats = store.stats()["compaction"]
        assert stats["tasks"] >= 1 and stats["failures"] == 0 and stats["conflicts"] == 0, stats
        last = 40 * E
        for table_id, rows in model.items():
            assert list(store.iter(table_id, last)) == sorted(rows.items())
            keys = sorted(rows)[::7] + [b"absent", b"u999"]
            assert store.multi_get(table_id, keys, last) == [rows.get(k) for k in keys]


def test_a_task_that_can_never_apply_raises_instead_of_running_forever(tmp_path):
    """A picked task whose outputs always conflict (here: the picker leaves out a base SST the
    output must replace) is re-picked at once after a conflict; after CONFLICTS_IN_A_ROW in a
    row, compact_pending raises and the version is unchanged."""
    options = StorageOptions(compactor="local", compaction_workers=0, vacuum_min_age_s=0)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        store._compactor.stop()
        store._compactor.config = PickerConfig(l0_trigger=2, l0_intra_trigger=9)
        for n in (1, 2):
            store.ingest_batch(1, [(b"k%03d" % i, b"%d" % n) for i in range(0, 100, n)], n * E)
            store.checkpoint(n * E)
        store.compact_all()                     # a base level under every key
        for n in (3, 4):
            store.ingest_batch(1, [(b"k%03d" % i, b"%d" % n) for i in range(0, 100, 3)], n * E)
            store.checkpoint(n * E)
        before = store.version()
        with mock.patch.object(picker, "_base_below", lambda base, l0: []), \
                pytest.raises(HummockError, match="conflicted with the version"):
            store.compact_pending()
        assert store.version().id == before.id and store._compactor.stats["conflicts"] == CONFLICTS_IN_A_ROW
        assert store.compact_pending() >= 1     # the real picker's task applies
        assert list(store.iter(1, 4 * E))[:3] == [(b"k000", b"4"), (b"k001", b"1"), (b"k002", b"2")]
