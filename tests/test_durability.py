"""Durability under scripted faults (issue 10 part 1): manifest writes whose outcome is unknown.

Each test scripts one failure with ``ScriptedStore`` -- before an operation, or *after* it was
applied (the reply lost) -- and checks that no committed epoch is lost, no SST a durable version
references is deleted, and the writer is never wedged: a retried ``checkpoint(e)`` is safe.
"""

import uuid

import pytest

from hummock import HummockStorage, OutcomeUnknownError, StorageOptions
from hummock.manifest import Manifest, delta_path
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.object_store.base import ObjectStoreError
from hummock.version import VersionDelta
from hummock.version_codec import decode_delta
from kv_model import KvModel
from scripted_store import ScriptedStore

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, shared_buffer_capacity=64 * 1024,
                         block_size=1024, target_sst_size=8 * 1024)


@pytest.fixture(params=["memory", "local", "s3"])
def handle(request, tmp_path):
    """``handle()`` -> a new ObjectStore handle on one fresh location of each kind."""
    if request.param == "memory":
        name = f"durability-{uuid.uuid4().hex[:8]}"
        yield lambda: MemoryObjectStore.named(name)
    elif request.param == "local":
        yield lambda: LocalObjectStore(tmp_path / "store")
    else:
        server = request.getfixturevalue("s3_server")
        first = server.new_store()
        yield lambda: server.new_store(bucket=first.bucket, prefix=first.prefix)
        first.close()
        server.drop_bucket(first.bucket)


def _batch(i: int, n: int = 50):
    return [(b"k%04d" % j, b"v%d-%d" % (i, j)) for j in range(i % 7, n, 3)]


def _check_against(store, model, epochs=None):
    for epoch in epochs or [store.max_committed_epoch]:
        assert list(store.iter(1, epoch)) == model.items(1, epoch)


def _referenced_exist(handle):
    with handle() as inner:
        on_store = {int(m.path.rsplit("/", 1)[-1][:-4]) for m in inner.list("sst/")}
    with HummockStorage.open(handle(), OPTIONS, read_only=True) as reader:
        missing = reader.version().sst_ids() - on_store
    assert not missing, f"SSTs referenced by the durable version were deleted: {sorted(missing)}"


def test_commit_whose_reply_was_lost_is_adopted_in_line(handle):
    faulty = ScriptedStore(handle())
    model = KvModel()
    with HummockStorage.open(faulty, OPTIONS) as store:
        faulty.fail("upload_if_absent", "manifest/delta-", when="after")
        store.ingest_batch(1, _batch(1), E)
        model.ingest(1, _batch(1), E)
        store.checkpoint(E)            # the lost reply is recognised: our bytes are stored
        model.commit(E)
        assert faulty.injected == 1 and store.max_committed_epoch == E
        store.ingest_batch(1, _batch(2), 2 * E)
        model.ingest(1, _batch(2), 2 * E)
        store.checkpoint(2 * E)
        model.commit(2 * E)
    with HummockStorage.open(handle(), OPTIONS) as store:
        _check_against(store, model, [E, 2 * E])


def test_commit_with_unknown_outcome_then_retried_checkpoint(handle):
    """The delta landed but every attempt to learn it failed: the caller sees an error, and a
    retried checkpoint(e) finishes it (no VersionConflictError, no 'SST id already in version')."""
    faulty = ScriptedStore(handle())
    model = KvModel()
    with HummockStorage.open(faulty, OPTIONS) as store:
        store.ingest_batch(1, _batch(1), E)
        model.ingest(1, _batch(1), E)
        faulty.fail("upload_if_absent", "manifest/delta-", when="after")
        faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=2)
        with pytest.raises(OutcomeUnknownError):
            store.checkpoint(E)
        assert store.max_committed_epoch == 0      # not known to be committed yet
        assert store.get(1, b"k0001", E) == b"v1-1"  # still readable by the writer
        store.checkpoint(E)                          # the retry adopts the stored delta
        model.commit(E)
        assert store.max_committed_epoch == E and store.stats()["staging_ssts"] == 0
        for i in range(2, 5):                        # later epochs commit normally
            store.ingest_batch(1, _batch(i), i * E)
            model.ingest(1, _batch(i), i * E)
            store.checkpoint(i * E)
            model.commit(i * E)
        _check_against(store, model, [E, 4 * E])
    _referenced_exist(handle)
    with HummockStorage.open(handle(), OPTIONS) as store:
        assert store.max_committed_epoch == 4 * E
        _check_against(store, model, [E, 2 * E, 4 * E])


def test_commit_that_never_landed_is_retried(handle):
    faulty = ScriptedStore(handle())
    with HummockStorage.open(faulty, OPTIONS) as store:
        store.ingest_batch(1, _batch(1), E)
        faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=3)
        with pytest.raises(OutcomeUnknownError):
            store.checkpoint(E)
        store.checkpoint(E)
        assert store.max_committed_epoch == E
    with HummockStorage.open(handle(), OPTIONS) as store:
        assert store.get(1, b"k0001", E) == b"v1-1"


def test_a_pending_commit_is_finished_by_the_next_write_path_call(handle):
    """An unknown commit is finished by whatever call comes next (here a later epoch's commit),
    not forgotten: the later commit publishes on top of it."""
    faulty = ScriptedStore(handle())
    model = KvModel()
    with HummockStorage.open(faulty, OPTIONS) as store:
        store.ingest_batch(1, _batch(1), E)
        model.ingest(1, _batch(1), E)
        faulty.fail("upload_if_absent", "manifest/delta-", when="after")
        faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=2)
        with pytest.raises(OutcomeUnknownError):
            store.checkpoint(E)
        store.ingest_batch(1, _batch(2), 2 * E)
        model.ingest(1, _batch(2), 2 * E)
        store.checkpoint(2 * E)
        model.commit(2 * E)
        assert store.version().id >= 2
        _check_against(store, model, [E, 2 * E])
    with HummockStorage.open(handle(), OPTIONS) as store:
        _check_against(store, model, [E, 2 * E])


def test_compaction_whose_delta_reply_was_lost_keeps_its_outputs(handle):
    """The compaction delta is stored but reported failed: its outputs must survive every vacuum
    (the durable version references them), and the writer goes on."""
    faulty = ScriptedStore(handle())
    model = KvModel()
    with HummockStorage.open(faulty, OPTIONS) as store:
        for i in range(1, 6):
            store.ingest_batch(1, _batch(i, 400), i * E)
            model.ingest(1, _batch(i, 400), i * E)
            store.checkpoint(i * E)
            model.commit(i * E)
        faulty.fail("upload_if_absent", "manifest/delta-", when="after")
        faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=2)
        with pytest.raises(OutcomeUnknownError):
            store.compact_all()
        with pytest.raises(ObjectStoreError):
            # the pending delta is finished first; here that fails too, and nothing is deleted
            faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=3)
            store.vacuum()
        _referenced_exist(handle)
        store.vacuum()       # finishes the pending compaction, then deletes only its inputs
        _referenced_exist(handle)
        store.ingest_batch(1, _batch(9), 9 * E)
        model.ingest(1, _batch(9), 9 * E)
        store.checkpoint(9 * E)
        model.commit(9 * E)
        _check_against(store, model)
    _referenced_exist(handle)
    with HummockStorage.open(handle(), OPTIONS) as store:
        _check_against(store, model)


def test_reserve_ids_with_unknown_outcome_never_reuses_ids(handle):
    faulty = ScriptedStore(handle())
    manifest = Manifest.open(faulty)
    faulty.fail("upload_if_absent", "manifest/delta-", when="after")
    faulty.fail("upload_if_absent", "manifest/delta-", when="before", times=2)
    with pytest.raises(OutcomeUnknownError):
        manifest.reserve_sst_ids(10)
    assert manifest.pending
    ids = manifest.reserve_sst_ids(5)   # the pending reservation lands first: no overlap
    assert ids.start == 11 and not manifest.pending
    assert Manifest.open(handle()).current.next_sst_id == 16


def test_equal_deltas_of_two_writers_never_pass_for_each_other():
    """Deltas carry the writer's token: a rival's identical-looking delta is not 'ours'."""
    store = MemoryObjectStore()
    first, second = Manifest.open(store), Manifest.open(store)
    delta = VersionDelta.reserve_sst_ids(first.current, 8)
    first.commit(delta)
    from hummock.manifest import ConcurrentWriterError
    with pytest.raises(ConcurrentWriterError):
        second.commit(delta)
    assert decode_delta(store.read(delta_path(1))).writer
