"""Storage under faults (issue 25, items 1-7): each test reproduces one fault timing that lost,
stranded or wrongly exposed data on the code before the fix, through the fault harness
(``tests/faults.py``: ``FaultyObjectStore``, scripted ``inject(...)``, ``list_lag``) where the
item is about object-store faults.

1. a listing that misses an SST (or a reader's lease) never shortens its grace or skips the
   lease floor: vacuum keeps what a live reader's version holds;
2. the lease renewal thread sees the version and the retired read states as one pair;
3. a commit adopted after a lost reply is in the commit log (``committed_epoch_at``);
4. retrying a bulk load that landed says "landed" also after compaction rewrote its SSTs;
5. hostile lease objects are ignored with a warning, never a raw exception in vacuum;
6. an idle database writes nothing;
7. temp files of a crashed writer are removed at open, whatever their age.
"""

from __future__ import annotations

import uuid

import pytest

from faults import Faults, memory_location
from hummock import HummockStorage, StorageOptions
from hummock.leases import LEASE_PREFIX, live_lease_floor
from hummock.sstable.meta import sst_object_path

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", vacuum_min_age_s=0, block_size=512, target_sst_size=4096)


def _fill(db, epochs, n=200, table=1):
    for i in epochs:
        db.ingest_batch(table, [(b"k%04d" % j, b"v%d" % i) for j in range(n)], i * E)
        db.checkpoint(i * E)


def _rows(n=200, last=4):
    return [(b"k%04d" % j, b"v%d" % last) for j in range(n)]


def _reread(reader):
    """Make a reader forget its open SST handles and caches: its next scan reads every SST of
    its version from the store again (a vacuumed one then raises VersionExpiredError)."""
    reader._block_cache.clear()
    reader._meta_cache.clear()
    reader._readers.clear()
    reader._set_version(reader.version())


def _location():
    return memory_location(f"i25-{uuid.uuid4().hex[:8]}", Faults(list_lag_ops=100_000))


# --- 1. vacuum and a lagging listing -----------------------------------------------------------

def test_an_sst_a_lagging_listing_missed_keeps_its_retirement_record():
    """Compaction retires the SSTs a reader's version holds; the vacuum right after lists
    ``sst/`` with a lag that hides them. The next vacuum (listing complete) must still see that
    they left the version *after* the reader's leased version, and keep them -- not take them
    for SSTs retired at open and delete them under the live lease."""
    location = _location()
    writer = location.open(OPTIONS)
    try:
        _fill(writer, range(1, 5))
        reader = location.open(OPTIONS, read_only=True)
        try:
            held = reader.version().sst_ids()
            location.faults.inject("list_lag", "list", path_prefix="sst/")   # the vacuum after compaction
            writer.compact_all()
            assert held.isdisjoint(writer.version().sst_ids())
            assert location.faults.omitted >= len(held)
            writer.vacuum()                          # a complete listing this time
            inner = location.inner()
            assert all(inner.exists(sst_object_path(i)) for i in held)
            _reread(reader)
            assert list(reader.iter(1, 4 * E)) == _rows()
        finally:
            reader.close()
        writer.vacuum()                              # the lease is gone: now they go
        assert not any(location.inner().exists(sst_object_path(i)) for i in held)
    finally:
        writer.close()


def test_a_lease_a_lagging_listing_missed_still_pins_its_version():
    """The writer's vacuum has seen a reader's lease; the reader renews it (a fresh upload)
    and the next listing of ``leases/`` lags behind that upload. The lease still counts: the
    SSTs of the reader's version stay."""
    location = _location()
    writer = location.open(OPTIONS)
    try:
        _fill(writer, range(1, 5))
        reader = location.open(OPTIONS, read_only=True)
        try:
            held = reader.version().sst_ids()
            writer.compact_all()                     # its vacuum sees the lease and keeps them
            assert all(location.inner().exists(sst_object_path(i)) for i in held)
            reader._lease.publish(reader._lease.version_id)   # a renewal: a recent upload
            location.faults.inject("list_lag", "list", path_prefix=LEASE_PREFIX)
            writer.vacuum()
            assert all(location.inner().exists(sst_object_path(i)) for i in held)
            _reread(reader)
            assert list(reader.iter(1, 4 * E)) == _rows()
        finally:
            reader.close()
        assert live_lease_floor(location.inner()) is None
        writer.vacuum()                              # released: forgotten, and they go
        assert not any(location.inner().exists(sst_object_path(i)) for i in held)
    finally:
        writer.close()


# --- 2. lease renewal racing refresh() ---------------------------------------------------------

def test_a_renewal_during_refresh_never_names_a_version_above_an_open_scan():
    """A reader has a scan open on version V; ``refresh()`` installs a newer version and only
    then files the old read state as retired. A lease renewal running in that window must
    not advertise the new version (vacuum would then delete the scan's SSTs): it sees the
    version and the retired states as one pair, so it names V."""
    import threading

    location = _location()
    writer = location.open(OPTIONS)
    try:
        _fill(writer, range(1, 5))
        reader = location.open(OPTIONS, read_only=True)
        try:
            old = reader.version().id
            scan = reader.iter(1, 4 * E)
            first = next(scan)                      # the scan holds the read state of V
            _fill(writer, range(5, 7))
            writer.compact_all()
            renewals = []
            original = reader._refresh_state

            def refresh_state_with_a_renewal_racing():
                # the window: the new version is installed, the old state not yet retired
                racer = threading.Thread(target=lambda: renewals.append(reader._lease._source()))
                racer.start()
                racer.join(timeout=1.0)            # (blocks on the engine lock once fixed)
                original()
                renewals.append(racer)
            reader._refresh_state = refresh_state_with_a_renewal_racing
            try:
                reader.refresh()
            finally:
                del reader._refresh_state
            racer = renewals.pop()
            racer.join()
            assert reader.version().id > old
            assert renewals == [old]                # the renewal names the scan's version
            assert [first] + list(scan) == _rows()
        finally:
            reader.close()
    finally:
        writer.close()


# --- 3. a commit adopted after a lost reply is in the commit log ------------------------------

@pytest.mark.parametrize("adopted_by", ["retry", "reservation", "vacuum", "next_checkpoint"])
def test_a_commit_adopted_after_lost_replies_is_in_the_commit_log(adopted_by):
    """Every reply of a checkpoint's delta upload is lost (the delta is stored): the call
    fails with an unknown outcome, and a later call adopts the stored delta. From then on,
    ``committed_epoch_at(now)`` -- what ``FOR SYSTEM_TIME AS OF`` reads -- is that epoch (or a
    later one), never the epoch before it."""
    import time

    from hummock.manifest import OutcomeUnknownError

    location = _location()
    with location.open(OPTIONS) as db:
        _fill(db, [1])
        db.ingest_batch(1, [(b"k0000", b"two")], 2 * E)
        location.faults.inject("error_after", "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(OutcomeUnknownError):
            db.checkpoint(2 * E)
        assert db.committed_epoch_at(time.time()) == E    # not known to be committed yet
        if adopted_by == "retry":
            db.checkpoint(2 * E)
        elif adopted_by == "reservation":
            db.reserve_sst_ids(1, hold=False)               # a manifest write finishes it first
        elif adopted_by == "vacuum":
            db.vacuum()
        else:
            db.ingest_batch(2, [(b"a", b"b")], 3 * E)
            db.checkpoint(3 * E)
        adopted = time.time()
        travel = db.committed_epoch_at(adopted)
        assert travel == db.max_committed_epoch == (3 * E if adopted_by == "next_checkpoint" else 2 * E)
        assert db.get(1, b"k0000", travel) == b"two"
        if adopted_by == "next_checkpoint":   # the adopted epoch has its own entry in the log
            assert [e for _, e in db._commit_times][-3:] == [E, 2 * E, 3 * E]


# --- 5. hostile lease objects ------------------------------------------------------------------

HOSTILE_LEASES = [
    b'{"version_id": 1e999, "ttl_s": 60}',          # json gives inf: int(inf) overflowed
    b'{"version_id": 7, "ttl_s": 1e999}',            # infinite life
    b'{"version_id": 7, "ttl_s": 1e300}',            # a huge one
    b'{"version_id": 7, "ttl_s": NaN}',
    b'{"version_id": "7", "ttl_s": 60}',             # wrong types
    b'{"version_id": true, "ttl_s": 60}',
    b'{"version_id": 7, "ttl_s": "60"}',
    b'{"version_id": {"a": 1}, "ttl_s": [1]}',
    b'{"version_id": -1, "ttl_s": 60}',
    b'{"version_id": 18446744073709551616, "ttl_s": 60}',
    b'[7, 60]',
    b'null',
    b'\xff\xfe{"version_id": 7}',                    # not UTF-8
    b'{not json',
    b'[' * 2000 + b']' * 2000,                       # nesting: RecursionError in json.loads
]


@pytest.mark.parametrize("body", HOSTILE_LEASES, ids=range(len(HOSTILE_LEASES)))
def test_a_hostile_lease_is_ignored_with_a_warning_and_vacuum_and_compaction_go_on(body, caplog):
    """A lease object is input from another process. A malformed one never stops vacuum or
    compaction with a raw exception: its content is ignored with a warning, and it counts as
    the documented damaged lease (pins every version for an hour, then is removed)."""
    import datetime
    import logging

    location = _location()
    with location.open(OPTIONS.replace(compactor="local")) as db:
        _fill(db, range(1, 5))
        db._store.upload(LEASE_PREFIX + "reader-hostile", body)
        with caplog.at_level(logging.WARNING, logger="hummock.leases"):
            assert db.compact_all() >= 1                      # its vacuum reads the lease
            db.vacuum()
            now = db._store.now()
            assert live_lease_floor(db._store, now) == 0     # pins everything, for safety
        assert any("malformed" in r.getMessage() and "reader-hostile" in r.getMessage()
                   for r in caplog.records)
        assert list(db.iter(1, 4 * E)) == _rows()
        later = now + datetime.timedelta(hours=11)
        assert live_lease_floor(db._store, later) is None    # long dead: removed
        assert not db._store.exists(LEASE_PREFIX + "reader-hostile")
        assert db.vacuum() >= 1                               # the compacted inputs go now


def test_lease_lifetimes_are_bounded_where_they_are_written():
    from hummock.errors import InvalidArgumentError
    from hummock.leases import MAX_LEASE_TTL_S
    from hummock.object_store import MemoryObjectStore
    from hummock.pinned_read import pin_version

    with pytest.raises(ValueError, match="reader_lease_s"):
        StorageOptions(reader_lease_s=MAX_LEASE_TTL_S * 2)
    for ttl in (float("inf"), float("nan"), 0, MAX_LEASE_TTL_S + 1, True):
        with pytest.raises(InvalidArgumentError):
            pin_version(MemoryObjectStore(), 1, ttl)
    store = MemoryObjectStore()
    pin_version(store, 5, MAX_LEASE_TTL_S)
    assert live_lease_floor(store) == 5


# --- 7. temp files of a crashed writer ---------------------------------------------------------

_CRASHING_WRITER = """
import os, sys
from hummock import HummockStorage, StorageOptions
db = HummockStorage.open(sys.argv[1], StorageOptions(compactor="none"))
upload = db._store.streaming_upload("sst/00000000000000999999.sst")   # an SST upload under way
upload.write(b"x" * 100_000)
os._exit(9)                                                          # the crash: no abort, no close
"""


def test_temp_files_of_a_crashed_writer_go_at_the_next_open_whatever_their_age(tmp_path):
    """A writer process dies in the middle of an upload: its temp file stays behind, young.
    The next writer holds the lock, which proves that writer dead, so it removes the file at
    open -- not only once it is older than vacuum_min_age_s. A young temp file of another,
    live process that holds no writer lock (a bulk loader's task, a reader's lease) stays."""
    import os
    import subprocess
    import sys

    from hummock.object_store import LocalObjectStore

    path = tmp_path / "db"
    with HummockStorage.open(str(path), OPTIONS) as db:
        _fill(db, [1])
    done = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(path)], cwd=os.getcwd(),
                          capture_output=True, timeout=120)
    assert done.returncode == 9, done.stderr.decode()[-2000:]
    crashed = [p for p in (path / "sst").iterdir() if p.name.startswith(".tmp-")]
    # the interrupted upload's file, and maybe the writer's empty spares (object_store/spares.py)
    sizes = sorted(p.stat().st_size for p in crashed)
    assert sizes[-1] == 100_000 and set(sizes[:-1]) <= {0}, sizes
    loader = LocalObjectStore(path)                   # a live non-writer upload, young too
    task = loader.streaming_upload("sst/00000000000000888888.sst")
    task.write(b"y" * 10)
    theirs = [p for p in (path / "sst").iterdir() if p.name.startswith(".tmp-") and p not in crashed]
    with HummockStorage.open(str(path), OPTIONS.replace(vacuum_min_age_s=3600)) as db:
        assert not any(p.exists() for p in crashed)   # the dead writer's: gone at open
        assert all(p.exists() for p in theirs)        # the live loader's: kept (age rule)
        assert list(db.iter(1, E)) == _rows(last=1)
    task.finish()                                     # and it still publishes
    assert loader.read("sst/00000000000000888888.sst") == b"y" * 10
    loader.close()


# --- 6. an idle database writes nothing --------------------------------------------------------

def _puts(faults) -> int:
    return sum(faults.ops[op] for op in ("upload", "upload_if_absent", "streaming_upload"))


def test_an_idle_sql_database_writes_nothing(tmp_path, monkeypatch):
    """An open SQL database (``sql.connect`` on a path) with a table and an MV, its barrier
    ticker running: once the inserted rows are committed, checkpoint barriers that carry no
    data put no object (a manifest delta per barrier before: one PUT per second on S3,
    forever). Reads and a reopen (MV recovery) stay exact."""
    import time
    from collections import Counter

    import sql
    from hummock.object_store import LocalObjectStore

    puts = Counter()
    for name in ("_upload", "_upload_if_absent", "_streaming_upload"):   # every PUT of the store
        def counted(self, path, *args, _put=getattr(LocalObjectStore, name)):
            puts[path.split("/")[0]] += 1
            return _put(self, path, *args)
        monkeypatch.setattr(LocalObjectStore, name, counted)
    path = str(tmp_path / "db")
    conn = sql.connect(path, barrier_interval_ms=20)
    try:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS c, sum(b) AS s FROM t")
        conn.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        conn.execute("FLUSH")
        loop = conn.db.rt.barrier_loop
        store = conn.db.store
        seen = len(loop.latencies)
        deadline = time.monotonic() + 60
        while len(loop.latencies) < seen + 3 and time.monotonic() < deadline:
            time.sleep(0.01)                   # let the barriers of the insert settle
        before, epoch, seen = dict(puts), store.max_committed_epoch, len(loop.latencies)
        while len(loop.latencies) < seen + 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(loop.latencies) >= seen + 10, "the barrier ticker stopped"
        assert dict(puts) == before            # ten idle checkpoints, no PUT
        assert store.max_committed_epoch > epoch   # the committed epoch still advances
        assert conn.execute("SELECT c, s FROM m").fetchall() == [(2, 30)]
    finally:
        conn.close()
    conn = sql.connect(path, barrier_interval_ms=20)
    try:
        assert conn.execute("SELECT c, s FROM m").fetchall() == [(2, 30)]
        conn.execute("INSERT INTO t VALUES (3, 30)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT c, s FROM m").fetchall() == [(3, 60)]
    finally:
        conn.close()


def test_a_checkpoint_with_nothing_to_publish_commits_in_memory_only():
    """The engine side: ``checkpoint(e)`` of an epoch without data, watermark or truncation
    writes no manifest delta; ``max_committed_epoch`` is ``e`` (snapshots and commits check
    against it), the next epoch with data is published as usual, and ``close()`` publishes
    the last idle epoch in one delta, so a clean reopen comes back at it."""
    from hummock.errors import InvalidArgumentError

    location = _location()
    with location.open(OPTIONS) as db:
        _fill(db, [1])
        puts = _puts(location.faults)
        for i in range(2, 6):
            db.checkpoint(i * E)
        assert _puts(location.faults) == puts
        assert db.max_committed_epoch == db.stats()["max_committed_epoch"] == 5 * E
        assert db.version().max_committed_epoch == E
        with db.snapshot() as snap:
            assert snap.epoch == 5 * E and list(snap.iter(1)) == _rows(last=1)
        db.checkpoint(5 * E)                              # a retry: already committed
        with pytest.raises(InvalidArgumentError):
            db.checkpoint(4 * E)
        with pytest.raises(InvalidArgumentError):
            db.ingest_batch(1, [(b"x", b"y")], 5 * E)    # sealed, as after any commit
        db.update_table_watermarks(1, 6 * E, {0: b"z"})  # a record is something to publish
        db.checkpoint(6 * E)
        assert db.version().max_committed_epoch == 6 * E and _puts(location.faults) > puts
        db.checkpoint(7 * E)
        assert db.version().max_committed_epoch == 6 * E
    with location.open(OPTIONS) as db:
        assert db.max_committed_epoch == db.version().max_committed_epoch == 7 * E
        _fill(db, [8])
        assert db.version().max_committed_epoch == 8 * E
        assert list(db.iter(1, 8 * E)) == _rows(last=8)


# --- 4. retrying a bulk load that landed -------------------------------------------------------

LOAD_TABLE = 7


def _load_ssts(db, epoch, n=300, per_sst=60):
    """SSTs of LOAD_TABLE built outside the engine under reserved ids (as a bulk loader)."""
    from hummock.key import encode_full_key
    from hummock.sstable.builder import SstableBuilder

    ids, infos = iter(db.reserve_sst_ids(n // per_sst + 1)), []
    rows = [(b"r%05d" % j, b"load%d" % j) for j in range(n)]
    for start in range(0, n, per_sst):
        builder = SstableBuilder.to_store(db._store, next(ids))
        for key, value in rows[start:start + per_sst]:
            builder.add(encode_full_key(LOAD_TABLE, key, epoch), value)
        infos.append(builder.finish())
    return infos, rows


@pytest.mark.parametrize("later_commits", [False, True])
def test_a_bulk_load_retried_after_compaction_rewrote_it_says_landed(later_commits):
    """``ingest_ssts`` loses every reply of its delta (it landed). Before the retry, the load
    is adopted, compaction rewrites its SSTs and vacuum deletes them (and, in one variant, later
    epochs commit). The retry with the same arguments must say "landed" (return, publish
    nothing more) -- not refuse it because its SST ids left the version or its objects are gone."""
    from hummock.errors import HummockError

    location = _location()
    with location.open(OPTIONS) as db:
        _fill(db, [1])
        infos, rows = _load_ssts(db, 2 * E)
        location.faults.inject("error_after", "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(HummockError):
            db.ingest_ssts(LOAD_TABLE, infos, 2 * E)
        if later_commits:
            _fill(db, [3, 4])                        # adopts the load first, then commits on
        assert db.compact_all() >= 1                 # (adopts it, if not yet)
        assert not {i.sst_id for i in infos} & db.version().sst_ids()
        db.vacuum()
        assert not any(location.inner().exists(i.object_path) for i in infos)
        version = db.version().id
        db.ingest_ssts(LOAD_TABLE, infos, 2 * E)     # the retry: landed
        assert db.version().id == version            # published nothing more
        assert db.bulk_load_landed(LOAD_TABLE, infos, 2 * E)
        assert list(db.iter(LOAD_TABLE, db.max_committed_epoch)) == rows
        assert not db.bulk_load_landed(LOAD_TABLE, infos[:-1], 2 * E)   # another load: no
    with location.open(OPTIONS) as db:               # the record is durable: replayed
        assert db.bulk_load_landed(LOAD_TABLE, infos, 2 * E)
        db.ingest_ssts(LOAD_TABLE, infos, 2 * E)


def test_a_relational_bulk_load_commit_retried_after_compaction_says_landed():
    """The same through ``relational.bulk_load.commit_load`` (what the Spark writer's driver
    calls): a retry after the load landed and was compacted returns, instead of failing to
    write the new table's catalog record again at an already committed epoch."""
    from hummock.errors import HummockError
    from relational.bulk_load import build_task_ssts, commit_load
    from relational.catalog import Catalog, TableDesc
    from relational.row_serde import RowSerde
    from relational.types import DataType as T

    location = _location()
    desc = TableDesc(LOAD_TABLE, "loaded", [("a", T.BIGINT), ("b", T.VARCHAR)], [0])
    serde = RowSerde(desc.types, desc.pk_indices, desc.order_types, desc.dist_key_indices, desc.value_indices)
    with location.open(OPTIONS) as db:
        _fill(db, [1])
        columns = [list(range(500)), [f"v{i}" for i in range(500)]]
        infos = build_task_ssts(db._store, serde, LOAD_TABLE, columns, 500, 2 * E, 0, db.reserve_sst_ids(8),
                                db.options.sst_builder_options(), 4096)
        location.faults.inject("error_after", "upload_if_absent", times=3, path_prefix="manifest/delta-")
        with pytest.raises(HummockError):
            commit_load(db, desc, infos, 2 * E, new_table=True)
        db.compact_all()
        db.vacuum()
        commit_load(db, desc, infos, 2 * E, new_table=True)   # the retry: landed
        assert Catalog(db).get(LOAD_TABLE, db.max_committed_epoch) == desc
        assert len(list(db.iter(LOAD_TABLE, db.max_committed_epoch))) == 500


def test_the_bulk_load_record_round_trips_and_old_manifests_keep_their_bytes():
    """docs/format.md section 6: ``bulk_loads`` in a checkpoint, ``bulk_load`` in a commit
    delta, both optional (a version without loads encodes as before); ``apply`` keeps the
    newest MAX_BULK_LOADS; a malformed record is corruption, a misplaced one refused."""
    import dataclasses
    import json

    from hummock.errors import CorruptionError, InvalidArgumentError
    from hummock.version import MAX_BULK_LOADS, HummockVersion, SubLevel, VersionDelta, apply, bulk_load_digest
    from hummock.version_codec import (ENVELOPE, VERSION_MAGIC, _seal, decode_delta, decode_version, encode_delta,
                                       encode_version)

    location = _location()
    with location.open(OPTIONS) as db:
        _fill(db, [1])
        before = db.version()
        infos, _ = _load_ssts(db, 2 * E)
        db.ingest_ssts(LOAD_TABLE, infos, 2 * E)
        version = db.version()
    assert b"bulk_loads" not in encode_version(before)
    digest = bulk_load_digest(i.sst_id for i in infos)
    assert len(digest) == 32 and digest == bulk_load_digest(reversed([i.sst_id for i in infos]))
    assert version.bulk_loads == ((LOAD_TABLE, 2 * E, digest),)
    assert decode_version(encode_version(version)) == version
    delta = VersionDelta(version.id, version.id + 1, 3 * E, version.next_sst_id,
                         SubLevel(version.next_sub_level_id, tuple(infos[:1]), True),
                         bulk_load=(LOAD_TABLE, digest))
    assert decode_delta(encode_delta(delta)) == delta
    plain = VersionDelta.commit(version, 3 * E, ())
    assert b"bulk_load" not in encode_delta(plain)

    v = HummockVersion.empty()
    for n in range(MAX_BULK_LOADS + 3):          # the record keeps the newest loads
        v = dataclasses.replace(v, max_committed_epoch=(n + 1) * E,
                                bulk_loads=(v.bulk_loads + ((1, (n + 1) * E, "0" * 32),))[-MAX_BULK_LOADS:])
    assert len(v.bulk_loads) == MAX_BULK_LOADS and v.bulk_loads[0][1] == 4 * E
    assert decode_version(encode_version(v)) == v

    def corrupt(loads):
        payload = json.loads(encode_version(version)[ENVELOPE.size:])
        payload["bulk_loads"] = loads
        return _seal(VERSION_MAGIC, payload)
    for loads in ([[7, 2 * E, "zz"]], [[7, 9 * E, digest]], [[7, 2 * E, digest], [7, E, digest]],
                  [[7, 2 * E]], [["7", 2 * E, digest]], [[7, 2 * E, 5]], "x",
                  [[7, E, digest]] * (MAX_BULK_LOADS + 1)):
        with pytest.raises(CorruptionError):
            decode_version(corrupt(loads))
    with pytest.raises(InvalidArgumentError, match="bulk load"):   # only a commit publishing SSTs
        apply(version, dataclasses.replace(plain, bulk_load=(LOAD_TABLE, digest)))
    with pytest.raises(InvalidArgumentError, match="bulk_load must be"):
        apply(version, dataclasses.replace(delta, bulk_load=(LOAD_TABLE, "not hex!" * 4)))


_IDLE_THEN_CRASH = """
import os, sys
from hummock import HummockStorage, StorageOptions
E = 1 << 16
db = HummockStorage.open(sys.argv[1], StorageOptions(compactor="none"))
db.ingest_batch(1, [(b"k", b"v")], E)
db.checkpoint(E)
for i in range(2, 6):
    db.checkpoint(i * E)           # idle: committed in memory only
assert db.max_committed_epoch == 5 * E
os._exit(9)                        # a crash: no close
"""


def test_after_a_crash_a_reopen_falls_back_to_the_last_published_epoch_with_the_same_data(tmp_path):
    """Idle epochs committed in memory are lost by a crash; the reopen comes back at the last
    epoch that published something, which reads exactly the same, and writes go on above it."""
    import os
    import subprocess
    import sys

    path = str(tmp_path / "db")
    done = subprocess.run([sys.executable, "-c", _IDLE_THEN_CRASH, path], cwd=os.getcwd(),
                          capture_output=True, timeout=120)
    assert done.returncode == 9, done.stderr.decode()[-2000:]
    with HummockStorage.open(path, OPTIONS) as db:
        assert db.max_committed_epoch == E
        assert db.get(1, b"k", E) == db.get(1, b"k", 5 * E) == b"v"
        db.ingest_batch(1, [(b"k", b"w")], 3 * E)   # above the recovered epoch: accepted
        db.checkpoint(3 * E)
        assert db.get(1, b"k", 3 * E) == b"w"
