"""Multi-producer commits: ``HummockStorage.commit_ssts`` (hummock/multi_commit.py).

Two TaskStores write disjoint vnodes of the same three tables (which already hold data), the
driver writes a row of its own at the epoch, one ``commit_ssts`` publishes everything: all
visible at the epoch, nothing at older ones, also after compaction and a reopen. Atomicity: a
fault at the manifest write (failed or reply lost) publishes nothing -- not the SSTs, not the
driver's row, not the watermarks -- until a retry, which publishes exactly once and is a no-op
once landed (also after compaction rewrote the SSTs and vacuum deleted them). A missing or
forged object, bad epochs, bad SSTs and bad or disjoint watermarks are refused with nothing
published and the store still writable at the epoch. SSTs of a batch never committed are
orphans vacuum removes. The ``(None, epoch, digest)`` record round-trips through the codec
and old manifests keep their bytes. Both modes (native and pure).
"""

import json
import uuid

import pytest

from faults import Faults, memory_location
from hummock import HummockStorage, StorageOptions
from hummock.errors import CorruptionError, HummockError, InvalidArgumentError
from hummock.manifest import ConcurrentWriterError, Manifest
from hummock.task_store import TaskStore
from hummock.version import SubLevel, VersionDelta, apply, bulk_load_digest
from hummock.version_codec import ENVELOPE, VERSION_MAGIC, _seal, decode_delta, decode_version, encode_delta, \
    encode_version

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=4096, block_size=512)
TABLES = (11, 12, 13)
DRIVER = 99


def key(vnode: int, i: int) -> bytes:
    return vnode.to_bytes(2, "big") + b"k%04d" % i


def _base(db, epoch=E):
    """Committed data in every table, vnodes 0..3, and a watermark on table 13."""
    for t in TABLES:
        db.ingest_batch(t, [(key(v, i), b"old") for v in range(4) for i in range(30)], epoch)
    db.update_table_watermarks(13, epoch, {0: b"k0005"})
    db.checkpoint(epoch)


def _task(db, epoch, vnodes, tag, *, spill_offset=0, mark=None):
    """A task writing ``vnodes`` of every table (overwrites, deletes, new keys); returns its output."""
    task = TaskStore(db._store, encode_version(db.version()), epoch, options=OPTIONS)
    for t in TABLES:
        pairs = []
        for v in vnodes:
            pairs += [(key(v, i), None if i % 5 == 0 else tag) for i in range(0, 40, 2)]
        task.ingest_batch(t, sorted(pairs), epoch)
    if mark is not None:
        task.update_table_watermarks(*mark)
    return task.finish(db.reserve_sst_ids(16, hold=False), spill_offset=spill_offset)


def _expected(vnode_tags, marks=()):
    """table -> {key: value} after the base data and tasks writing ``vnode_tags`` {vnode: tag}."""
    out = {}
    for t in TABLES:
        rows = {key(v, i): b"old" for v in range(4) for i in range(30)}
        for v, tag in vnode_tags.items():
            for i in range(0, 40, 2):
                if i % 5 == 0:
                    rows.pop(key(v, i), None)
                else:
                    rows[key(v, i)] = tag
        hidden = [(13, 0, b"k0005")] + list(marks)
        for table, vnode, w in hidden:
            if table == t:
                rows = {k: val for k, val in rows.items() if not (k[:2] == vnode.to_bytes(2, "big") and k[2:] < w)}
        out[t] = dict(sorted(rows.items()))
    return out


def _reads(db, epoch):
    return {t: dict(db.iter(t, epoch)) for t in TABLES}


def _two_tasks(db, epoch):
    a = _task(db, epoch, [0, 1], b"A", mark=(11, epoch, {1: b"k0010"}))
    b = _task(db, epoch, [2, 3], b"B")
    return a, b, a.ssts + b.ssts, {**a.watermarks, **b.watermarks}


def test_two_tasks_and_the_driver_row_publish_in_one_delta(tmp_path):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, OPTIONS) as db:
        _base(db)
        a, b, infos, marks = _two_tasks(db, 2 * E)
        assert a.tables_written == {t: (0, 1) for t in TABLES} and b.tables_written == {t: (2, 3) for t in TABLES}
        assert marks == {11: {1: (b"", b"k0010")}}
        db.ingest_batch(DRIVER, [(b"progress", b"2")], 2 * E)
        before = db.version().id
        db.commit_ssts(2 * E, infos, table_watermarks=marks)
        assert db.version().id == before + 1          # one delta
        want = _expected({0: b"A", 1: b"A", 2: b"B", 3: b"B"}, [(11, 1, b"k0010")])
        assert _reads(db, 2 * E) == want
        assert _reads(db, E) == _expected({})         # older reads see none of it
        assert db.get(DRIVER, b"progress", 2 * E) == b"2"
        assert db.commit_ssts_landed(2 * E, infos) and not db.commit_ssts_landed(2 * E, infos[1:])
        with pytest.raises(InvalidArgumentError):     # sealed up to the commit's epoch
            db.ingest_batch(DRIVER, [(b"late", b"x")], 2 * E)
        db.compact_all()
        assert _reads(db, 2 * E) == want
    with HummockStorage.open(url, OPTIONS) as db:
        assert _reads(db, 2 * E) == want and db.get(DRIVER, b"progress", 2 * E) == b"2"
        assert db.commit_ssts_landed(2 * E, infos)


def test_tasks_ordered_by_spill_offsets_and_an_empty_commit():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        _base(db)
        a = _task(db, 2 * E, [0, 1], b"A", spill_offset=0)
        b = _task(db, 2 * E, [1, 2], b"B", spill_offset=1)     # overlaps a on vnode 1: newer
        db.commit_ssts(2 * E, a.ssts + b.ssts)
        assert _reads(db, 2 * E) == _expected({0: b"A", 1: b"B", 2: b"B"})
        db.commit_ssts(3 * E, [], table_watermarks={12: {2: b"k0020"}})   # watermarks only
        assert db.max_committed_epoch == 3 * E
        assert _reads(db, 3 * E) == _expected({0: b"A", 1: b"B", 2: b"B"}, [(12, 2, b"k0020")])
        assert _reads(db, 2 * E) == _expected({0: b"A", 1: b"B", 2: b"B"})
        db.commit_ssts(4 * E, [])                    # nothing at all: still a delta with the record
        assert db.max_committed_epoch == 4 * E and db.version().max_committed_epoch == 4 * E
        assert db.commit_ssts_landed(4 * E, []) and db.version().bulk_loads[-1][:2] == (None, 4 * E)
        db.commit_ssts(4 * E, [])                    # a retry: landed


@pytest.mark.parametrize("kind", ["error_before", "error_after"])
def test_a_fault_at_the_manifest_write_publishes_nothing_then_the_retry_exactly_once(kind):
    location = memory_location(f"cs-{uuid.uuid4().hex[:8]}", Faults())
    db = location.open(OPTIONS)
    try:
        _base(db)
        _, _, infos, marks = _two_tasks(db, 2 * E)
        db.ingest_batch(DRIVER, [(b"progress", b"2")], 2 * E)
        version = db.version()
        location.faults.inject(kind, "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(HummockError):
            db.commit_ssts(2 * E, infos, table_watermarks=marks)
        if kind == "error_before":                   # nothing published, nothing pending
            assert db.version() is version and db.max_committed_epoch == E
            assert _reads(db, 2 * E) == _expected({}) and db.table_watermarks(11).latest == {}
            with HummockStorage.open(location.inner(), OPTIONS, read_only=True) as reader:
                assert reader.version().id == version.id and reader.max_committed_epoch == E
        location.faults.clear()
        db.commit_ssts(2 * E, infos, table_watermarks=marks)   # the retry
        want = _expected({0: b"A", 1: b"A", 2: b"B", 3: b"B"}, [(11, 1, b"k0010")])
        assert _reads(db, 2 * E) == want and db.get(DRIVER, b"progress", 2 * E) == b"2"
        published = db.version().id
        db.commit_ssts(2 * E, infos, table_watermarks=marks)   # landed: a no-op
        assert db.version().id == published
        assert db.vacuum() == 0
    finally:
        db.close()
    with location.open(OPTIONS) as db:
        assert _reads(db, 2 * E) == want
        task_ids = {i.sst_id for i in infos}
        assert task_ids <= db.version().sst_ids()
        assert sum(1 for sub in db.version().l0 for i in sub.ssts if i.sst_id in task_ids) == len(infos)


def test_a_retry_after_compaction_and_vacuum_says_landed():
    location = memory_location(f"cs-{uuid.uuid4().hex[:8]}", Faults())
    with location.open(OPTIONS) as db:
        _base(db)
        _, _, infos, marks = _two_tasks(db, 2 * E)
        location.faults.inject("error_after", "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(HummockError):
            db.commit_ssts(2 * E, infos, table_watermarks=marks)
        location.faults.clear()
        db.ingest_batch(DRIVER, [(b"later", b"3")], 3 * E)
        db.checkpoint(3 * E)                         # adopts the landed commit, commits on
        db.compact_all()
        db.vacuum()
        assert not {i.sst_id for i in infos} & db.version().sst_ids()
        assert not any(location.inner().exists(i.object_path) for i in infos)
        version = db.version().id
        db.commit_ssts(2 * E, infos, table_watermarks=marks)   # landed: returns
        assert db.version().id == version and db.commit_ssts_landed(2 * E, infos)
        assert _reads(db, 3 * E) == _expected({0: b"A", 1: b"A", 2: b"B", 3: b"B"}, [(11, 1, b"k0010")])
        with pytest.raises(InvalidArgumentError, match="not above"):   # another batch at that epoch
            db.commit_ssts(2 * E, infos[1:])


def test_refusals_publish_nothing_and_leave_the_epoch_writable():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        _base(db)
        _, _, infos, marks = _two_tasks(db, 2 * E)
        db.ingest_batch(DRIVER, [(b"progress", b"2")], 2 * E)
        version = db.version()
        forged = [infos[0].__class__(**{**infos[0].__dict__, "key_count": infos[0].key_count + 1})]
        refusals = [
            (lambda: db.commit_ssts(E, []), "not above"),
            (lambda: db.commit_ssts(2 * E + 1, infos), "low 16 bits"),
            (lambda: db.commit_ssts(3 * E, infos), "epochs"),
            (lambda: db.commit_ssts(2 * E, infos + infos[:1]), "twice"),
            (lambda: db.commit_ssts(2 * E, [b"x"]), "SstableInfo"),
            (lambda: db.commit_ssts(2 * E, 5), "iterable"),
            (lambda: db.commit_ssts(2 * E, forged), "does not match"),
            (lambda: db.commit_ssts(2 * E, infos, table_watermarks=[1]), "mapping"),
            (lambda: db.commit_ssts(2 * E, infos, table_watermarks={-1: {0: b"a"}}), "table id"),
            (lambda: db.commit_ssts(2 * E, infos, table_watermarks={11: {0: (b"b", b"a")}}), "empty"),
            (lambda: db.commit_ssts(2 * E, infos, table_watermarks={13: {0: (b"x", b"y")}}), "grows"),
            (lambda: db.commit_ssts_landed(2 * E, [1]), "SstableInfo"),
        ]
        for call, match in refusals:
            with pytest.raises(InvalidArgumentError, match=match):
                call()
        gone = infos[-1]
        db._store.delete([gone.object_path])
        with pytest.raises(InvalidArgumentError, match="does not exist"):
            db.commit_ssts(2 * E, infos, table_watermarks=marks)
        assert db.version() is version and db.max_committed_epoch == E
        assert db.table_watermarks(11).latest == {}
        db.ingest_batch(DRIVER, [(b"more", b"m")], 2 * E)       # not sealed: still writable
        db.commit_ssts(2 * E, infos[:-1], table_watermarks=marks)
        assert db.get(DRIVER, b"more", 2 * E) == b"m" and db.get(DRIVER, b"progress", 2 * E) == b"2"


def test_fenced_writer_publishes_nothing():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        _base(db)
        _, _, infos, _ = _two_tasks(db, 2 * E)
        rival = Manifest.open(db._store)
        rival.commit(VersionDelta.reserve_sst_ids(rival.current, 1))
        with pytest.raises(ConcurrentWriterError):
            db.commit_ssts(2 * E, infos)
        assert Manifest.open(db._store).current.max_committed_epoch == E


def test_ssts_of_a_batch_never_committed_are_orphans_for_vacuum():
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        _base(db)
        kept = db._store.list("sst/")
        _, _, infos, _ = _two_tasks(db, 2 * E)       # ids reserved hold=False (executors)
        assert all(db._store.exists(i.object_path) for i in infos)
        assert db.vacuum() == len(infos)
        assert db._store.list("sst/") == kept
        held = db.reserve_sst_ids(8)                 # held ids: spared until released
        task = TaskStore(db._store, db.version(), 2 * E, options=OPTIONS)
        task.ingest_batch(11, [(key(0, 1), b"x")], 2 * E)
        out = task.finish(held)
        assert db.vacuum() == 0
        db.release_sst_ids(held)
        assert db.vacuum() == len(out.ssts)
        with pytest.raises(InvalidArgumentError, match="does not exist"):
            db.commit_ssts(2 * E, out.ssts)


def test_the_record_round_trips_and_is_checked():
    """docs/format.md section 6: a multi-producer commit's record is ``[null, epoch, digest]``
    in ``bulk_loads`` and ``[null, digest]`` in its delta (also one without a sub-level)."""
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS) as db:
        _base(db)
        before = db.version()
        _, _, infos, _ = _two_tasks(db, 2 * E)
        db.commit_ssts(2 * E, infos)
        version = db.version()
    digest = bulk_load_digest(i.sst_id for i in infos)
    assert b"bulk_loads" not in encode_version(before)        # old versions keep their bytes
    assert version.bulk_loads == ((None, 2 * E, digest),)
    assert decode_version(encode_version(version)) == version
    empty = VersionDelta.commit(version, 3 * E, (), bulk_load=(None, bulk_load_digest([])))
    assert decode_delta(encode_delta(empty)) == empty
    assert apply(version, empty).bulk_loads[-1] == (None, 3 * E, bulk_load_digest([]))
    with pytest.raises(InvalidArgumentError, match="bulk load"):   # a table's load needs SSTs
        VersionDelta.commit(version, 3 * E, (), bulk_load=(7, digest))
    with pytest.raises(InvalidArgumentError, match="bulk_load"):
        VersionDelta.commit(version, 3 * E, (), bulk_load=("7", digest))
    delta = VersionDelta(version.id, version.id + 1, 3 * E, version.next_sst_id,
                         SubLevel(version.next_sub_level_id, tuple(infos[:1]), True), bulk_load=(None, digest))
    assert decode_delta(encode_delta(delta)) == delta

    def corrupt(loads):
        payload = json.loads(encode_version(version)[ENVELOPE.size:])
        payload["bulk_loads"] = loads
        return _seal(VERSION_MAGIC, payload)
    assert decode_version(corrupt([[None, 2 * E, digest]])) == version
    for loads in ([["x", 2 * E, digest]], [[None, 2 * E, "zz"]], [[None, 9 * E, digest]], [[None, digest]]):
        with pytest.raises(CorruptionError):
            decode_version(corrupt(loads))


_SCENARIO = r'''
import hashlib, sys
sys.path.insert(0, "tests")
import test_commit_ssts as t
from hummock import HummockStorage
from hummock.version_codec import encode_version
with HummockStorage.open("memory://scenario", t.OPTIONS) as db:
    t._base(db)
    a, b, infos, marks = t._two_tasks(db, 2 * t.E)
    db.ingest_batch(t.DRIVER, [(b"progress", b"2")], 2 * t.E)
    db.commit_ssts(2 * t.E, infos, table_watermarks=marks)
    digest = hashlib.sha256()
    for info in infos:
        digest.update(db._store.read(info.object_path))
    digest.update(a.to_bytes() + b.to_bytes())
    digest.update(repr(sorted(t._reads(db, 2 * t.E).items())).encode())
    db.compact_all()
    digest.update(repr(sorted(t._reads(db, 2 * t.E).items())).encode())
    from hummock import _twins
    print(digest.hexdigest(), sum(1 for native in _twins.LOADED.values() if native))
'''


def test_native_and_pure_build_the_same_ssts_and_read_the_same():
    """The scenario of the first test, run once with the native modules and once with
    ``HUMMOCK_PURE_PYTHON=1``: the tasks' SST objects, outputs and reads are byte-identical."""
    import os
    import subprocess
    import sys

    outputs = []
    for pure in ("0", "1"):
        env = {**os.environ, "HUMMOCK_PURE_PYTHON": pure}
        if pure == "0":
            env.pop("HUMMOCK_PURE_PYTHON")
        done = subprocess.run([sys.executable, "-c", _SCENARIO], env=env, capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout.split())
    (native, native_modules), (pure, pure_modules) = outputs
    assert int(native_modules) > 0 and int(pure_modules) == 0   # both paths really ran
    assert native == pure


_CRASH = r'''
import sys
sys.path.insert(0, "tests")
import test_commit_ssts as t
from hummock import HummockStorage, killpoints
with HummockStorage.open(sys.argv[1], t.OPTIONS) as db:
    t._base(db)
    _, _, infos, marks = t._two_tasks(db, 2 * t.E)
    db.ingest_batch(t.DRIVER, [(b"progress", b"2")], 2 * t.E)
    db.sync(2 * t.E)                     # the driver's row is a staging SST: the next delta is the commit's
    killpoints._target, killpoints._remaining = sys.argv[2], 1
    db.commit_ssts(2 * t.E, infos, table_watermarks=marks)
'''


@pytest.mark.parametrize("point", ["manifest.before_delta_write", "manifest.after_delta_write"])
def test_a_crash_at_the_commit_publishes_all_or_nothing(tmp_path, point):
    """The driver process is SIGKILLed just before / just after the commit's manifest delta is
    stored: a reopen sees nothing of the batch (not the tasks' SSTs, the driver's row or the
    watermarks; its vacuum removes the orphans) or all of it."""
    import os
    import signal
    import subprocess
    import sys

    url = str(tmp_path / "db")
    done = subprocess.run([sys.executable, "-c", _CRASH, url, point], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    landed = point == "manifest.after_delta_write"
    with HummockStorage.open(url, OPTIONS, read_only=True) as reader:
        assert reader.max_committed_epoch == (2 * E if landed else E)
        assert _reads(reader, reader.max_committed_epoch) == (
            _expected({0: b"A", 1: b"A", 2: b"B", 3: b"B"}, [(11, 1, b"k0010")]) if landed else _expected({}))
        assert reader.get(DRIVER, b"progress", reader.max_committed_epoch) == (b"2" if landed else None)
    with HummockStorage.open(url, OPTIONS) as db:   # its open vacuums the crash's orphans
        objects = {m.path for m in db._store.list("sst/")}
        assert objects == {i.object_path for i in db.version().all_ssts()}
        assert db.table_watermarks(11).latest == ({1: (b"", b"k0010")} if landed else {})


def test_commits_wait_while_l0_is_full_as_commit_epoch_does(monkeypatch):
    """With a compactor configured and L0 at its stop size (the compactor stopped, so L0 only
    grows), each commit_ssts waits for compaction (bounded) like commit_epoch: a stall is counted."""
    import hummock.storage as storage_module

    monkeypatch.setattr(storage_module, "L0_STALL_LIMIT_SECONDS", 0.2)
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", OPTIONS.replace(compactor="local")) as db:
        db._compactor.stop()                          # nothing drains L0
        db._compactor.config = db._compactor.config.__class__(l0_trigger=1)
        for n in range(1, 5):
            task = TaskStore(db._store, db.version(), n * E, options=OPTIONS)
            task.ingest_batch(11, [(key(0, n), b"x")], n * E)
            db.commit_ssts(n * E, task.finish(db.reserve_sst_ids(2, hold=False)).ssts)
        assert len(db.version().l0) == 4 and db.counters["write_stalls"] > 0
