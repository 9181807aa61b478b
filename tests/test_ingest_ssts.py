"""Bulk loads at the engine level: ``reserve_sst_ids`` + SSTs built outside + ``ingest_ssts``.

Covers (hummock/external_ssts.py): a load is read back equal to a dict model through get, iter
and a reopen, also after compaction; SSTs of several "tasks" overlap and order by their spill
offsets; every refusal (non-empty table, old epoch, uncommitted writes below the epoch, foreign
tables, missing or mismatched objects) publishes nothing; an ambiguous manifest write (reply
lost) and a failed one end with the load published exactly once after a retry; a writer
committing other tables from another thread meanwhile loses nothing; a fenced writer publishes
nothing; unpublished SSTs are orphans that vacuum deletes. Runs in both native and pure modes.
"""

import random
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faults import Faults, memory_location
from hummock import HummockStorage, StorageOptions
from hummock.errors import HummockError, InvalidArgumentError
from hummock.external_ssts import TableNotEmptyError
from hummock.key import encode_full_key
from hummock.manifest import ConcurrentWriterError, Manifest
from hummock.sstable.builder import SstableBuilder
from hummock.version import VersionDelta

EPOCH = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=4096, block_size=512)
TABLE = 7


def build(store, ids, table_id, rows, epoch, per_sst=50):
    """SSTs of ``rows`` (sorted (key, value) pairs) cut every ``per_sst`` keys, named from ``ids``."""
    ids, infos = iter(ids), []
    for start in range(0, len(rows), per_sst):
        builder = SstableBuilder.to_store(store, next(ids))
        for key, value in rows[start:start + per_sst]:
            builder.add(encode_full_key(table_id, key, epoch), value)
        infos.append(builder.finish())
    return infos


def rows_of(n, seed=0):
    rng = random.Random(seed)
    keys = sorted({rng.randbytes(rng.randint(1, 6)) for _ in range(n)})
    return [(k, b"v" + k) for k in keys]


def test_load_reads_back_through_every_path_and_after_reopen_and_compaction(tmp_path):
    rows = rows_of(300)
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS) as db:
        db.ingest_batch(1, [(b"other", b"x")], EPOCH)
        db.checkpoint(EPOCH)
        ids = db.reserve_sst_ids(10)
        infos = build(db._store, ids, TABLE, rows, 2 * EPOCH)
        db.ingest_ssts(TABLE, infos, 2 * EPOCH)
        db.release_sst_ids(ids)
        assert db.max_committed_epoch == 2 * EPOCH
        assert list(db.iter(TABLE, 2 * EPOCH)) == rows
        assert db.get(TABLE, rows[5][0], 2 * EPOCH) == rows[5][1]
        assert list(db.iter(TABLE, EPOCH)) == []          # older reads never see the load
        assert db.get(1, b"other", 2 * EPOCH) == b"x"
        db.ingest_batch(TABLE, [(rows[0][0], None)], 3 * EPOCH)   # ordinary writes go on
        db.checkpoint(3 * EPOCH)
    with HummockStorage.open(url, OPTIONS) as db:
        assert list(db.iter(TABLE, 3 * EPOCH)) == rows[1:]
        db.compact_all()
        assert list(db.iter(TABLE, 3 * EPOCH)) == rows[1:]
        db.vacuum()
        assert list(db.iter(TABLE, 3 * EPOCH)) == rows[1:]


@settings(max_examples=25)
@given(st.lists(st.lists(st.tuples(st.binary(min_size=1, max_size=3), st.binary(max_size=4)),
                         min_size=1, max_size=30), min_size=1, max_size=4))
def test_overlapping_tasks_order_by_spill_offset(tasks):
    """Each "task" writes its rows at epoch + its index: where tasks repeat a key, the highest
    index wins, in reads before and after compaction (a dict model)."""
    model = {}
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        ids = iter(db.reserve_sst_ids(len(tasks) * 40))
        infos = []
        for offset, task in enumerate(tasks):
            rows = sorted(dict(task).items())
            model.update(rows)
            infos += build(db._store, ids, TABLE, rows, 2 * EPOCH + offset, per_sst=7)
        db.ingest_ssts(TABLE, infos, 2 * EPOCH)
        assert list(db.iter(TABLE, 2 * EPOCH)) == sorted(model.items())
        db.compact_all()
        assert list(db.iter(TABLE, 2 * EPOCH)) == sorted(model.items())


def _state(db):
    return db.max_committed_epoch, db.version().sst_ids()


def test_refusals_publish_nothing():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        db.ingest_batch(1, [(b"a", b"1")], EPOCH)
        db.checkpoint(EPOCH)
        ids = db.reserve_sst_ids(20)
        good = build(db._store, ids[:10], TABLE, rows_of(200), 2 * EPOCH)
        before = _state(db)
        with pytest.raises(TableNotEmptyError):       # table 1 holds data
            db.ingest_ssts(1, build(db._store, ids[10:], 1, rows_of(5), 2 * EPOCH), 2 * EPOCH)
        with pytest.raises(InvalidArgumentError, match="not above"):
            db.ingest_ssts(TABLE, build(db._store, ids[11:], TABLE, rows_of(5), EPOCH), EPOCH)
        with pytest.raises(InvalidArgumentError, match="tables"):
            db.ingest_ssts(TABLE + 1, good, 2 * EPOCH)
        with pytest.raises(InvalidArgumentError, match="epochs"):
            db.ingest_ssts(TABLE, good, 3 * EPOCH)
        with pytest.raises(InvalidArgumentError, match="low 16 bits"):
            db.ingest_ssts(TABLE, good, 2 * EPOCH + 1)
        with pytest.raises(InvalidArgumentError):
            db.ingest_ssts(TABLE, [], 2 * EPOCH)
        db._store.delete([good[-1].object_path])
        with pytest.raises(InvalidArgumentError, match="does not exist"):
            db.ingest_ssts(TABLE, good, 2 * EPOCH)
        forged = [good[0].__class__(**{**good[0].__dict__, "key_count": good[0].key_count + 1})]
        with pytest.raises(InvalidArgumentError, match="does not match"):
            db.ingest_ssts(TABLE, forged, 2 * EPOCH)
        db.ingest_batch(TABLE + 1, [(b"b", b"2")], 3 * EPOCH)
        with pytest.raises(TableNotEmptyError, match="buffered"):
            db.ingest_ssts(TABLE + 1, build(db._store, ids[12:], TABLE + 1, rows_of(5), 2 * EPOCH), 2 * EPOCH)
        assert _state(db) == before
        db.ingest_batch(TABLE + 2, [(b"c", b"3")], 2 * EPOCH)   # an uncommitted write at the epoch
        db.ingest_ssts(TABLE, good[:-1], 2 * EPOCH)               # ... is committed with the load
        assert db.max_committed_epoch == 2 * EPOCH and db.get(TABLE + 2, b"c", 2 * EPOCH) == b"3"
        assert db.get(TABLE + 1, b"b", 2 * EPOCH) is None          # a later epoch's write is not
        with pytest.raises(InvalidArgumentError, match="not above"):
            db.ingest_ssts(TABLE + 3, build(db._store, ids[13:], TABLE + 3, rows_of(5), 2 * EPOCH), 2 * EPOCH)
        db.checkpoint(3 * EPOCH)
        assert db.get(TABLE + 1, b"b", 3 * EPOCH) == b"2"


def test_store_is_sealed_up_to_the_load_epoch():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        ids = db.reserve_sst_ids(4)
        db.ingest_ssts(TABLE, build(db._store, ids, TABLE, rows_of(20), 5 * EPOCH), 5 * EPOCH)
        with pytest.raises(InvalidArgumentError):
            db.ingest_batch(1, [(b"a", b"1")], 4 * EPOCH)
        db.ingest_batch(1, [(b"a", b"1")], 6 * EPOCH)
        db.checkpoint(6 * EPOCH)
        assert db.get(1, b"a", 6 * EPOCH) == b"1"


@pytest.mark.parametrize("kind", ["error_after", "error_before"])
def test_ambiguous_or_failed_manifest_write_publishes_exactly_once(kind):
    faults = Faults()
    location = memory_location(uuid.uuid4().hex, faults)
    rows = rows_of(100)
    db = location.open(OPTIONS)
    try:
        ids = db.reserve_sst_ids(5)
        infos = build(db._store, ids, TABLE, rows, 2 * EPOCH)
        faults.inject(kind, "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(HummockError):
            db.ingest_ssts(TABLE, infos, 2 * EPOCH)
        faults.clear()
        db.ingest_ssts(TABLE, infos, 2 * EPOCH)     # the retry: landed -> no-op; else publishes
        assert db.max_committed_epoch == 2 * EPOCH
        assert list(db.iter(TABLE, 2 * EPOCH)) == rows
        assert db.vacuum() == 0                      # nothing published was deleted
    finally:
        db.close()
    with location.open(OPTIONS) as db:
        assert list(db.iter(TABLE, 2 * EPOCH)) == rows
        assert sum(1 for sub in db.version().l0 for _ in sub.ssts) == len(infos)


def test_a_writer_committing_other_tables_meanwhile_loses_nothing():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        errors, committed = [], []
        stop = threading.Event()

        def writer():
            epoch = EPOCH
            try:
                while not stop.is_set():
                    epoch += EPOCH
                    try:
                        db.ingest_batch(1, [(b"k%020d" % epoch, b"x")], epoch)
                    except InvalidArgumentError:     # a load sealed past it: take a later one
                        continue
                    committed.append(epoch)
                    try:
                        db.checkpoint(epoch)
                    except InvalidArgumentError:     # a load committed past it (and it with it)
                        continue
            except Exception as exc:   # noqa: BLE001 -- reported below
                errors.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        loaded = []
        try:
            for n in range(5):
                rows = rows_of(60, seed=n)
                ids = db.reserve_sst_ids(3)
                for _ in range(50):
                    epoch = (db.max_committed_epoch | 0xFFFF) + 1 + 1000 * EPOCH
                    infos = build(db._store, ids, TABLE + n, rows, epoch)
                    try:
                        db.ingest_ssts(TABLE + n, infos, epoch)
                    except InvalidArgumentError:     # the writer committed past it: again
                        db.release_sst_ids(ids)
                        ids = db.reserve_sst_ids(3)
                        continue
                    loaded.append((TABLE + n, epoch, rows))
                    break
        finally:
            stop.set()
            thread.join()
        assert not errors and len(loaded) == 5 and committed
        last = db.max_committed_epoch
        for table, epoch, rows in loaded:
            assert list(db.iter(table, last)) == rows
        assert [k for k, _ in db.iter(1, last)] == sorted(b"k%020d" % e for e in committed)


def test_fenced_writer_publishes_nothing():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        ids = db.reserve_sst_ids(3)
        infos = build(db._store, ids, TABLE, rows_of(30), 2 * EPOCH)
        rival = Manifest.open(db._store)      # another writer commits behind this one's back
        rival.commit(VersionDelta.reserve_sst_ids(rival.current, 1))
        with pytest.raises(ConcurrentWriterError):
            db.ingest_ssts(TABLE, infos, 2 * EPOCH)
        assert db.max_committed_epoch == 0
        assert all(TABLE not in i.table_ids for i in Manifest.open(db._store).current.all_ssts())


def test_unpublished_ssts_are_orphans_for_vacuum(tmp_path):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS) as db:
        ids = db.reserve_sst_ids(5)
        infos = build(db._store, ids, TABLE, rows_of(100), 2 * EPOCH)
        assert db.vacuum() == 0                       # held: spared
        db.release_sst_ids(ids)
        assert db.vacuum() == len(infos)
        assert db._store.list("sst/") == []
    with HummockStorage.open(url, OPTIONS) as db:    # unheld ids (other processes): only age protects
        ids = db.reserve_sst_ids(5, hold=False)
        build(db._store, ids, TABLE, rows_of(100), 2 * EPOCH)
        assert db.vacuum() == len(infos)


def test_reserve_arguments_and_read_only():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        with pytest.raises(InvalidArgumentError):
            db.reserve_sst_ids(0)
        first, second = db.reserve_sst_ids(3), db.reserve_sst_ids(2, hold=False)
        assert first.stop <= second.start
