"""``HummockStorage.compact_pending``: the background compactor's work on demand, in the
caller's thread (what ``hummock compact`` runs without ``--full``)."""

from hummock import HummockStorage, StorageOptions
from hummock.compaction.picker import PickerConfig, pick


def _commit_sub_levels(db, count: int) -> dict:
    model = {}
    for i in range(count):
        epoch = (i + 1) << 16
        batch = [(b"k%05d" % (i * 10 + j), b"v%d" % i) for j in range(10)] + [(b"shared", b"%d" % i)]
        batch.sort()
        db.ingest_batch(1, batch, epoch)
        db.checkpoint(epoch)
        model.update(batch)
    return model


def test_compact_pending_runs_what_is_due_until_the_picker_has_nothing():
    with HummockStorage.open("memory://compact-pending", StorageOptions(compactor="none")) as db:
        model = _commit_sub_levels(db, PickerConfig().l0_trigger + 1)
        assert len(db.version().l0) == PickerConfig().l0_trigger + 1
        assert pick(db.version(), PickerConfig(), frozenset(), {}) is not None
        tasks = db.compact_pending()
        assert tasks >= 1
        version = db.version()
        assert pick(version, PickerConfig(), frozenset(), {}) is None   # nothing left that is due
        assert len(version.l0) < PickerConfig().l0_trigger
        assert dict(db.iter(1, db.max_committed_epoch)) == model
        assert db.compact_pending() == 0   # idempotent once the shape is within its targets


def test_compact_pending_leaves_a_store_below_the_triggers_alone():
    with HummockStorage.open("memory://compact-pending-idle", StorageOptions(compactor="none")) as db:
        _commit_sub_levels(db, 2)
        before = db.version()
        assert db.compact_pending() == 0
        assert db.version() is before
