"""HummockStorage API contracts: bad input, lifecycle, readers and writers, snapshots, vacuum."""

import os
import subprocess
import sys
import textwrap

import pytest

from hummock import (ConcurrentWriterError, CorruptionError, HummockStorage, InvalidArgumentError,
                     ReadOnlyError, StorageOptions, StoreClosedError)
from hummock import _twins
from hummock.key import new_epoch
from hummock.manifest import delta_path

E = 1 << 16
SMALL = StorageOptions(shared_buffer_capacity=64 * 1024, block_size=512, target_sst_size=8 * 1024,
                       vacuum_min_age_s=0)


@pytest.fixture
def store(tmp_path):
    with HummockStorage.open(str(tmp_path / "db"), SMALL) as s:
        yield s


def test_readme_example(tmp_path):
    with HummockStorage.open(str(tmp_path / "db")) as db:
        epoch = new_epoch()
        db.ingest_batch(1, [(b"apple", b"red"), (b"kiwi", b"green")], epoch)
        db.checkpoint(epoch)
        assert db.get(1, b"apple", epoch) == b"red"
        assert list(db.iter(1, epoch, prefix=b"k")) == [(b"kiwi", b"green")]


def test_bad_batches_write_nothing(store):
    for bad in ([(b"b", b"1"), (b"a", b"2")], [(b"a", b"1"), (b"a", b"2")], [(b"a", 1)], [("a", b"1")], [b"a"]):
        with pytest.raises(InvalidArgumentError):
            store.ingest_batch(1, [(b"0", b"x")] + bad, E)
    assert store.get(1, b"0", E) is None and list(store.iter(1, E)) == []
    with pytest.raises(InvalidArgumentError, match="low 16 bits"):
        store.ingest_batch(1, [(b"a", b"1")], E + 1)
    for table in (-1, 2**32, "1", True):
        with pytest.raises(InvalidArgumentError):
            store.ingest_batch(table, [(b"a", b"1")], E)
        with pytest.raises(InvalidArgumentError):
            store.get(table, b"a", E)
    with pytest.raises(InvalidArgumentError):
        store.get(1, "a", E)
    with pytest.raises(InvalidArgumentError):
        store.get(1, b"a", -1)


def test_epochs_never_go_backwards(store):
    store.ingest_batch(1, [(b"a", b"1")], 3 * E)
    store.checkpoint(3 * E)
    with pytest.raises(InvalidArgumentError, match="sealed"):
        store.ingest_batch(1, [(b"a", b"2")], 2 * E)
    store.commit_epoch(3 * E)   # a retried commit of the committed epoch is a no-op
    assert store.max_committed_epoch == 3 * E
    with pytest.raises(InvalidArgumentError):
        store.commit_epoch(2 * E)
    with pytest.raises(InvalidArgumentError):
        store.seal_epoch(2 * E)
    store.ingest_batch(1, [(b"b", b"1")], 4 * E)
    store.ingest_batch(1, [(b"c", b"1")], 5 * E)
    store.sync(5 * E)
    with pytest.raises(InvalidArgumentError, match="commit"):
        store.commit_epoch(4 * E)
    store.commit_epoch(5 * E)
    assert store.max_committed_epoch == 5 * E


def test_later_batch_in_one_epoch_wins(store):
    store.ingest_batch(1, [(b"a", b"1"), (b"b", b"1")], E)
    store.ingest_batch(1, [(b"a", None)], E)
    store.ingest_batch(1, [(b"b", b"2")], E)
    assert store.get(1, b"a", E) is None and store.get(1, b"b", E) == b"2"
    store.checkpoint(E)
    assert store.get(1, b"a", E) is None and store.get(1, b"b", E) == b"2"
    assert list(store.iter(1, E)) == [(b"b", b"2")]


def test_iter_arguments_are_checked(store):
    store.ingest_batch(1, [(b"a", b"1"), (b"b", b"2"), (b"c\xff", b"3"), (b"d", b"4")], E)
    for bad in (dict(table_id=-1), dict(table_id=1 << 32), dict(table_id=True), dict(table_id="1"),
                dict(epoch=-1), dict(epoch=1 << 64), dict(epoch=1.0), dict(start="a"), dict(end=1),
                dict(prefix="c")):
        args = dict(table_id=1, epoch=E) | bad
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            store.iter(args.pop("table_id"), args.pop("epoch"), **args)
    assert list(store.iter(1, E, bytearray(b"b"), memoryview(b"d"))) == [(b"b", b"2"), (b"c\xff", b"3")]
    assert list(store.iter(1, E, b"c", b"b")) == [] and list(store.iter(1, E, b"b", b"b")) == []
    assert list(store.iter(1, E, prefix=b"c")) == [(b"c\xff", b"3")]
    assert list(store.iter(1, E, b"a", b"c\xff\x00", prefix=b"c", reverse=True)) == [(b"c\xff", b"3")]
    assert list(store.iter(1, E, prefix=b"")) == list(store.iter(1, E))
    assert list(store.iter(1, E, prefix=b"\xff")) == [] and list(store.iter(2, E)) == []


def test_closed_store_raises(tmp_path):
    db = HummockStorage.open(str(tmp_path / "db"))
    db.close()
    db.close()  # idempotent
    for call in (lambda: db.get(1, b"a", E), lambda: db.multi_get(1, [b"a"], E), lambda: db.iter(1, E),
                 lambda: db.ingest_batch(1, [(b"a", b"1")], E), lambda: db.snapshot()):
        with pytest.raises(StoreClosedError):
            call()


def test_second_writer_fails_and_readers_refresh(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path) as writer:
        with pytest.raises(ConcurrentWriterError):
            HummockStorage.open(path)
        writer.ingest_batch(1, [(b"a", b"1")], E)
        writer.checkpoint(E)
        reader = HummockStorage.open(path, read_only=True)
        assert reader.get(1, b"a", E) == b"1"
        with pytest.raises(ReadOnlyError):
            reader.ingest_batch(1, [(b"b", b"1")], 2 * E)
        writer.ingest_batch(1, [(b"b", b"2")], 2 * E)
        assert reader.get(1, b"b", 2 * E) is None, "uncommitted writes are private to the writer"
        writer.checkpoint(2 * E)
        assert reader.get(1, b"b", 2 * E) is None
        assert reader.refresh() == 2 * E
        assert reader.get(1, b"b", 2 * E) == b"2"
        reader.close()


def test_second_writer_in_another_process_fails(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path):
        code = textwrap.dedent(f"""
            from hummock import HummockStorage, ConcurrentWriterError
            try:
                HummockStorage.open({path!r})
            except ConcurrentWriterError as exc:
                print("refused:", exc)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.stdout.startswith("refused:"), out.stderr


def test_snapshot_pins_an_epoch(store):
    store.ingest_batch(1, [(b"a", b"1")], E)
    store.checkpoint(E)
    with store.snapshot() as snap:
        store.ingest_batch(1, [(b"a", b"2"), (b"b", b"2")], 2 * E)
        store.checkpoint(2 * E)
        assert snap.get(1, b"a") == b"1" and list(snap.iter(1)) == [(b"a", b"1")]
        assert store.stats()["pinned_versions"]
    with pytest.raises(InvalidArgumentError):
        snap.get(1, b"a")
    with pytest.raises(InvalidArgumentError):
        store.snapshot(3 * E)
    assert not store.stats()["pinned_versions"]


def test_spills_keep_memory_bounded_and_reads_correct(store):
    value = b"x" * 1000
    for i in range(200):
        store.ingest_batch(2, [(b"k%05d" % i, value)], E * (i + 1))
        assert store.stats()["shared_buffer_bytes"] <= SMALL.shared_buffer_capacity
    assert store.stats()["spills"] > 0 and store.stats()["staging_ssts"] > 0
    assert store.get(2, b"k00007", E * 200) == value and store.get(2, b"k00007", E * 7) is None
    store.commit_epoch(E * 200)
    assert len(list(store.iter(2, E * 200))) == 200


def test_vacuum_removes_orphans_but_not_live_ssts(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path, SMALL) as db:
        db.ingest_batch(1, [(b"a", b"1")], E)
        db.checkpoint(E)
        db.ingest_batch(1, [(b"b", b"1")], 2 * E)
        db.sync(2 * E)                     # a staging SST that will never be committed
        assert db.vacuum() == 0            # staging SSTs are live
    with HummockStorage.open(path, SMALL) as db:  # reopening vacuums the orphan
        assert db.stats()["vacuumed_ssts"] == 1
        assert db.get(1, b"a", 2 * E) == b"1" and db.get(1, b"b", 2 * E) is None


def test_corrupted_manifest_names_the_object(tmp_path):
    path = str(tmp_path / "db")
    with HummockStorage.open(path) as db:
        db.ingest_batch(1, [(b"a", b"1")], E)
        db.checkpoint(E)
        version_id = db.version().id
    delta = os.path.join(path, delta_path(version_id))
    data = bytearray(open(delta, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(delta, "wb").write(bytes(data))
    with pytest.raises(CorruptionError) as raised:
        HummockStorage.open(path)
    assert delta_path(version_id) in str(raised.value)


def test_read_only_opener_in_another_process_refreshes(tmp_path):
    path = str(tmp_path / "db")
    code = textwrap.dedent(f"""
        import sys
        from hummock import HummockStorage
        with HummockStorage.open({path!r}, read_only=True) as db:
            print(db.get(1, b"a", 2 << 16), flush=True)
            sys.stdin.readline()              # the writer commits epoch 2 meanwhile
            db.refresh()
            print(db.get(1, b"a", 2 << 16), db.max_committed_epoch, flush=True)
    """)
    with HummockStorage.open(path) as writer:
        writer.ingest_batch(1, [(b"a", b"1")], E)
        writer.checkpoint(E)
        reader = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        assert reader.stdout.readline().strip() == "b'1'"
        writer.ingest_batch(1, [(b"a", b"2")], 2 * E)
        writer.checkpoint(2 * E)
        out, _ = reader.communicate("go\n", timeout=60)
    assert out.strip() == f"b'2' {2 * E}"


def test_multi_get_checks_every_key_first(store):
    store.ingest_batch(1, [(b"a", b"1")], E)
    assert store.multi_get(1, [b"a", bytearray(b"b"), b"a"], E) == [b"1", None, b"1"]
    with pytest.raises(InvalidArgumentError):
        store.multi_get(1, [b"a", "b"], E)


def test_stats_count_ingested_and_flushed_bytes(store):
    assert store.stats()["write_amplification"] is None
    store.ingest_batch(1, [(b"ab", b"xyz"), (b"c", None)], E)
    store.checkpoint(E)
    stats = store.stats()
    assert stats["ingested_keys"] == 2 and stats["ingested_bytes"] == 2 + 3 + 1
    assert stats["flushed_bytes"] == sum(info.file_size for info in store.version().all_ssts()) > 0
    assert stats["compaction_pending_bytes"] == 0
    assert stats["write_amplification"] == stats["flushed_bytes"] / 6


def test_point_reads_over_large_imms_use_their_filters(tmp_path):
    # A shared buffer large enough to keep both imms (1,000 entries are charged ~110 KiB).
    with HummockStorage.open(str(tmp_path / "db"), SMALL.replace(shared_buffer_capacity=1 << 20)) as store:
        _check_imm_filters(store)


def _check_imm_filters(store):
    present = [b"k%05d" % i for i in range(0, 2000, 2)]
    store.ingest_batch(1, [(k, k) for k in present], E)
    store.ingest_batch(1, [(b"k00000", None)], 2 * E)         # a small imm: no filter
    assert len(store._buffer.imms(1)) == 2, "neither imm may have spilled"
    absent = [b"k%05d" % i for i in range(1, 2000, 2)]
    assert store.multi_get(1, present, 2 * E) == [None] + present[1:]
    assert store.multi_get(1, absent, 2 * E) == [None] * len(absent)
    assert store.get(1, b"k00000", E) == b"k00000"
    filters = [imm.filter for imm in store._buffer.imms(1)]
    if _twins.LOADED.get("_readpath"):
        assert filters[1] is False and filters[0] is not None and filters[0] is not False
    else:
        assert filters == [None, None], "the pure read path never builds imm filters"


def test_read_methods_are_stable_objects(tmp_path):
    """``g = db.get`` kept by a caller reads the current store, not the state of when it was
    taken (and so pins nothing); a write's new read state reuses the version's view."""
    with HummockStorage.open(str(tmp_path / "db"), SMALL.replace(compactor="none")) as db:
        get, multi_get, scan = db.get, db.multi_get, db.iter
        view = db._state.view
        db.ingest_batch(1, [(b"a", b"1")], E)
        assert get(1, b"a", E) == b"1" and multi_get(1, [b"a"], E) == [b"1"]
        assert list(scan(1, E)) == [(b"a", b"1")]
        assert db._state.view is view          # built once per version, not per write
        db.checkpoint(E)
        assert db._state.view is not view
        assert db.get is get or db.get == get
    with pytest.raises(StoreClosedError):
        get(1, b"a", E)
