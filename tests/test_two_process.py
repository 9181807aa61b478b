"""Writers and readers of one store in separate processes (or handles): leases and fencing.

a. ``test_reader_process_while_writer_compacts_and_vacuums``: tests/churn_writer.py commits,
   compacts (background compactor plus ``compact_all``) and vacuums (``vacuum_min_age_s=1``,
   ``reader_lease_s=2``, manifest checkpoints every 4 deltas) while tests/lease_reader.py, in
   another process, refreshes and reads in a loop, checking every row against the
   deterministic content of the epoch it read. 0 wrong rows; no error but
   ``VersionExpiredError`` (counted; a clear request to refresh). Local for
   ``HUMMOCK_TWO_PROCESS_SECONDS`` (default 30) seconds, S3 (moto) for 10 (or that variable).
   The figures are printed (``-s`` shows them).
b. ``test_writer_cut_off_past_its_lease_deletes_nothing``: writer A stops heart-beating
   (a pause, a partition); once its lock is stale writer B takes the store over, commits and
   compacts; A comes back: its ``vacuum``, ``compact_all`` and ``checkpoint`` raise
   ``ConcurrentWriterError`` and it deletes nothing; B's version is intact and reads exactly.
   On S3 (lock object, 3 s stale limit) and on a memory store (registry lock taken with
   ``force``). Not on a local store: its writer lock is an ``flock`` the kernel holds for as
   long as the holder process lives, so it cannot be taken over from a live writer at all.
c. ``test_pinned_reader_keeps_its_version_across_compaction_and_vacuum``: a read-only handle
   (its lease) keeps its version and a snapshot readable while the writer compacts and vacuums
   with ``vacuum_min_age_s=0``; once it refreshes, releases or closes, the writer's vacuum
   deletes those SSTs. Also: a scan left open across the reader's ``refresh()`` keeps reading
   (``iter``'s contract); a reader killed with SIGKILL holds nothing once its lease expires
   (and the writer removes the dead lease); a reader whose lease lapsed gets
   ``VersionExpiredError`` and reads exactly again after ``refresh()``.

``test_fenced_writer_never_publishes_again`` and
``test_reader_scan_open_across_refresh_keeps_reading`` fail on the engine as of this file's
first commit: both are engine bugs reported to the lead (a fenced writer's retried commit lands
on top of its successor's version; a reader's lease ignores the versions its open scans hold).
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.manifest import ConcurrentWriterError, WriterLock
from kv_model import KvModel

sys.path.insert(0, os.path.dirname(__file__))
from churn_writer import OPTIONS as CHURN_OPTIONS, TABLE, expected_state  # noqa: E402

HERE = os.path.dirname(__file__)
SECONDS = os.environ.get("HUMMOCK_TWO_PROCESS_SECONDS")


def _s3_location(request, prefix: str):
    from s3_server import CREDENTIALS, REGION, new_bucket_name
    server = request.getfixturevalue("s3_server")
    bucket = new_bucket_name()
    server.admin_client().create_bucket(Bucket=bucket)
    request.addfinalizer(lambda: server.drop_bucket(bucket))
    return (f"s3://{bucket}/{prefix}?endpoint={server.endpoint_url}&region={REGION}",
            {"s3_access_key_id": CREDENTIALS["access_key_id"],
             "s3_secret_access_key": CREDENTIALS["secret_access_key"]})


def sst_ids_on(store) -> set[int]:
    return {int(m.path.rsplit("/", 1)[-1][:-4]) for m in store._store.list("sst/")
            if m.path.endswith(".sst")}


def _summary(path: str) -> dict:
    with open(path) as f:
        lines = [line for line in f if line.startswith("SUMMARY ")]
    assert lines, f"no summary in {path}"
    return json.loads(lines[-1][len("SUMMARY "):])


def _wait_for_line(path: str, prefix: str, proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path) as f:
            if any(line.startswith(prefix) for line in f):
                return
        assert proc.poll() is None, f"child exited {proc.returncode} before printing {prefix!r}"
        time.sleep(0.1)
    raise AssertionError(f"child printed no {prefix!r} within {timeout} s")


# --- a. a reader process while the writer compacts and vacuums --------------------------------

@pytest.mark.parametrize("kind", ["local", "s3"])
def test_reader_process_while_writer_compacts_and_vacuums(kind, tmp_path, request):
    if kind == "local":
        url, extra = str(tmp_path / "store"), {}
        seconds, keys = float(SECONDS or 30), 2000
    else:   # fewer keys: every request goes to the moto server in this process
        url, extra = _s3_location(request, "two-process")
        seconds, keys = float(SECONDS or 10), 400
    stop = tmp_path / "stop"
    out_w, out_r = tmp_path / "writer.out", tmp_path / "reader.out"
    env = dict(os.environ, PYTHONUNBUFFERED="1", HUMMOCK_CHURN_KEYS=str(keys))
    with open(out_w, "w") as fw, open(tmp_path / "writer.err", "w") as ew:
        writer = subprocess.Popen([sys.executable, os.path.join(HERE, "churn_writer.py"), url,
                                   json.dumps(extra), str(stop)], stdout=fw, stderr=ew, env=env)
    try:
        _wait_for_line(out_w, "committed ", writer)   # the manifest exists and has commits
        with open(out_r, "w") as fr, open(tmp_path / "reader.err", "w") as er:
            reader = subprocess.run([sys.executable, os.path.join(HERE, "lease_reader.py"), url,
                                     json.dumps(extra), str(seconds)], stdout=fr, stderr=er,
                                    env=env, timeout=seconds + 120)
        stop.touch()
        writer.wait(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    err_r = (tmp_path / "reader.err").read_text()[-3000:]
    err_w = (tmp_path / "writer.err").read_text()[-3000:]
    assert reader.returncode == 0, err_r
    assert writer.returncode == 0, err_w
    r, w = _summary(out_r), _summary(out_w)
    errors = r["errors"]
    print(f"\n[{kind}, {seconds:g} s] reader: {r['cycles']} refresh+read cycles "
          f"({r.get('ok_cycles', 0)} clean), epochs {r['epochs_read'][0]}..{r['epochs_read'][1]}, "
          f"{r.get('rows_checked', 0)} rows checked, {r.get('wrong_rows', 0)} wrong, "
          f"{r.get('older_epoch_scans', 0)} older-epoch scans, "
          f"{r.get('snapshots_checked', 0)} held snapshots checked (reading "
          f"{r.get('lease_only_ssts', 0)} SSTs gone from the current version), errors {errors or 'none'}")
    print(f"[{kind}] writer: {w['epochs']} epochs in {w['seconds']} s, compaction "
          f"{w['background']}, compact_all tasks {w['compact_all_tasks']}, vacuumed "
          f"{w['vacuumed_ssts']} SSTs, write stalls {w['write_stalls']}")
    assert r.get("wrong_rows", 0) == 0
    assert set(errors) <= {"VersionExpiredError"}, r["error_samples"]
    assert r.get("ok_cycles", 0) > 0 and r.get("rows_checked", 0) > 0
    # the run was not vacuous: the writer compacted and deleted SSTs while the reader read
    assert w["vacuumed_ssts"] > 0 and w["background"]["tasks"] > 0
    assert r["epochs_read"][1] > r["epochs_read"][0]
    # afterwards: the durable version is whole and reads exactly
    with HummockStorage.open(url, CHURN_OPTIONS.replace(**extra), read_only=True) as check:
        assert check.version().sst_ids() <= sst_ids_on(check)
        epoch = check.max_committed_epoch
        assert epoch >> 16 == w["epochs"]
        assert dict(check.iter(TABLE, epoch)) == expected_state(epoch >> 16, keys)


# --- b. a writer cut off past its lease ------------------------------------------------------

E = 1 << 16
CUT_OPTIONS = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, checkpoint_interval=4,
                             reader_lease_s=2.0, vacuum_min_age_s=1.0)
STALE_S = 3.0


def _batch(i: int):
    return [(b"k%05d" % k, None if (k + i) % 11 == 0 else b"v%d-%d" % (i, k) + b"." * 40)
            for k in range(i % 5, 1500, 4)]


def _commit(store, model, i):
    store.ingest_batch(1, _batch(i), i * E)
    model.ingest(1, _batch(i), i * E)
    store.checkpoint(i * E)
    model.commit(i * E)


def _all_objects(store) -> set[str]:
    return {m.path for m in store._store.list("")}


def _cut_off_and_take_over(kind, request, monkeypatch):
    """Writer A commits, compacts (its inputs become garbage it would delete once 1 s old) and
    is cut off: no heartbeats from then on (a pause or a partition, not a crash). Once its lock
    is stale, writer B (vacuum_min_age_s=600: B itself deletes nothing) takes over, commits
    epochs 7..11 and compacts, so B's version holds SSTs A never heard of. Returns
    (a, b, model, url, options) with A's garbage older than A's vacuum age."""
    acquire = WriterLock.acquire.__func__
    force_next = []

    def patched(cls, store, owner, *, stale_after_seconds=STALE_S, force=False):
        return acquire(cls, store, owner, stale_after_seconds=stale_after_seconds,
                       force=force or bool(force_next))
    monkeypatch.setattr(WriterLock, "acquire", classmethod(patched))
    if kind == "s3":
        url, extra = _s3_location(request, "cutoff")
    else:
        url, extra = f"memory://cutoff-{uuid.uuid4().hex[:8]}", {}
    options = CUT_OPTIONS.replace(**extra)
    model = KvModel()
    a = HummockStorage.open(url, options)
    request.addfinalizer(a.close)
    for i in range(1, 5):
        _commit(a, model, i)
    a.compact_all()
    for i in range(5, 7):
        _commit(a, model, i)
    a_version = a.version()
    if kind == "s3":
        impl = a._writer_lock._impl
        impl._stop.set()
        impl._thread.join()
    with pytest.raises(ConcurrentWriterError):
        HummockStorage.open(url, options)       # A's lock is still fresh
    if kind == "memory":
        force_next.append(True)   # the registry lock never goes stale: an operator's force
    deadline = time.monotonic() + 30
    while True:
        try:
            b = HummockStorage.open(url, options.replace(vacuum_min_age_s=600.0))
            break
        except ConcurrentWriterError:
            assert time.monotonic() < deadline, "A's lock never went stale"
            time.sleep(0.5)
    force_next.clear()
    request.addfinalizer(b.close)
    for i in range(7, 11):
        _commit(b, model, i)
    b.compact_all()
    _commit(b, model, 11)
    assert b.version().sst_ids() - a_version.sst_ids()
    time.sleep(1.2)        # A's garbage is now older than A's vacuum_min_age_s
    return a, b, model, url, options


def _check_b_whole(b, model, before, last):
    """Nothing of ``before`` was deleted (pass ``None`` once B itself has written on: its
    manifest rotation deletes old deltas), B's version is on the store and reads exactly."""
    if before is not None:
        gone = before - _all_objects(b)
        assert not gone, f"the cut-off writer deleted {sorted(gone)}"
    assert b.version().sst_ids() <= sst_ids_on(b)
    for epoch in {11 * E, last * E}:
        if epoch >= b.min_readable_epoch:   # B's compaction dropped the versions below
            assert list(b.iter(1, epoch)) == model.items(1, epoch)


@pytest.mark.parametrize("kind", ["s3", "memory"])
def test_writer_cut_off_past_its_lease_deletes_nothing(kind, request, monkeypatch):
    a, b, model, url, options = _cut_off_and_take_over(kind, request, monkeypatch)
    before = _all_objects(b)
    # A comes back: its vacuum (would delete its own old garbage) and its compaction refuse
    with pytest.raises(ConcurrentWriterError):
        a.vacuum()
    with pytest.raises(ConcurrentWriterError):
        a.compact_all()
    with pytest.raises(ConcurrentWriterError):
        a.vacuum()
    _check_b_whole(b, model, before, 11)
    _commit(b, model, 12)      # B goes on as the only writer
    _check_b_whole(b, model, None, 12)
    b.close()
    a.close()
    with HummockStorage.open(url, options, read_only=True) as check:
        assert check.max_committed_epoch == 12 * E
        assert check.version().sst_ids() <= sst_ids_on(check)
        assert list(check.iter(1, 12 * E)) == model.items(1, 12 * E)


@pytest.mark.parametrize("kind", ["s3", "memory"])
def test_fenced_writer_never_publishes_again(kind, request, monkeypatch):
    """Once A learned it was fenced (ConcurrentWriterError), retrying must not let it publish on
    top of B's version: every later checkpoint / compact_all raises ConcurrentWriterError, the
    zombie's data never becomes durable, and B keeps committing."""
    a, b, model, url, options = _cut_off_and_take_over(kind, request, monkeypatch)
    before = _all_objects(b)
    a.ingest_batch(1, [(b"zombie", b"A")], 12 * E)
    with pytest.raises(ConcurrentWriterError):
        a.checkpoint(12 * E)
    for _ in range(2):   # a caller retrying the failed checkpoint, as checkpoint()'s doc invites
        with pytest.raises(ConcurrentWriterError):
            a.checkpoint(12 * E)
    with pytest.raises(ConcurrentWriterError):
        a.compact_all()
    _check_b_whole(b, model, before, 11)
    _commit(b, model, 13)      # raises ConcurrentWriterError if the zombie published
    _check_b_whole(b, model, None, 13)
    b.close()
    a.close()
    with HummockStorage.open(url, options, read_only=True) as check:
        assert check.max_committed_epoch == 13 * E
        assert check.get(1, b"zombie", 13 * E) is None
        assert list(check.iter(1, 13 * E)) == model.items(1, 13 * E)


# --- c. a pinned reader across the writer's compaction and vacuum ---------------------------

def test_pinned_reader_keeps_its_version_across_compaction_and_vacuum(tmp_path):
    path = str(tmp_path / "store")
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0)
    model = KvModel()
    with HummockStorage.open(path, options) as writer:
        for i in range(1, 6):
            _commit(writer, model, i)
        reader = HummockStorage.open(path, options, read_only=True)
        try:
            pinned = reader.version()
            pinned_epoch = reader.max_committed_epoch
            snap = reader.snapshot()
            for i in range(6, 9):
                _commit(writer, model, i)
            assert writer.compact_all() > 0
            writer.vacuum()
            gone = pinned.sst_ids() - writer.version().sst_ids()
            assert gone, "compaction should have retired SSTs of the pinned version"
            assert gone <= sst_ids_on(writer), "vacuum deleted SSTs a live reader lease pins"
            # the reader's version and snapshot read exactly, through the whole key space
            assert list(reader.iter(1, pinned_epoch)) == model.items(1, pinned_epoch)
            assert list(snap.iter(1)) == model.items(1, pinned_epoch)
            for i in (2, 4):      # older epochs of the pinned version, too
                assert list(reader.iter(1, i * E)) == model.items(1, i * E)

            # refreshing moves the reader on, but the snapshot still pins the old version
            assert reader.refresh() == 8 * E
            writer.vacuum()
            assert gone <= sst_ids_on(writer)
            assert list(snap.iter(1)) == model.items(1, pinned_epoch)
            assert list(reader.iter(1, 8 * E)) == model.items(1, 8 * E)
            snap.release()
        finally:
            reader.close()         # deletes the lease
        writer.vacuum()
        assert not gone & sst_ids_on(writer), "the released version's SSTs should be vacuumed"
        assert sst_ids_on(writer) == writer.version().sst_ids()
        assert list(writer.iter(1, 8 * E)) == model.items(1, 8 * E)


def test_reader_refresh_releases_its_old_version_to_vacuum(tmp_path):
    """Without a snapshot or a scan holding it, a refreshed reader's lease soon names the new
    version (at the refresh or at a renewal): the writer then deletes what only the old version
    used, while the reader stays open and exact."""
    path = str(tmp_path / "store")
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0,
                             reader_lease_s=1.0)
    model = KvModel()
    with HummockStorage.open(path, options) as writer:
        for i in range(1, 6):
            _commit(writer, model, i)
        with HummockStorage.open(path, options, read_only=True) as reader:
            old = reader.version()
            writer.compact_all()
            writer.vacuum()
            gone = old.sst_ids() - writer.version().sst_ids()
            assert gone and gone <= sst_ids_on(writer)
            reader.refresh()
            deadline = time.monotonic() + 30
            while gone & sst_ids_on(writer):
                assert time.monotonic() < deadline, "the refreshed reader's lease kept its old version"
                writer.vacuum()
                time.sleep(0.1)
            assert list(reader.iter(1, 5 * E)) == model.items(1, 5 * E)


def test_reader_scan_open_across_refresh_keeps_reading(tmp_path):
    """``iter`` reads the store as it was when called, for as long as the iterator is
    referenced (its docstring). On a read-only handle a scan still open when the handle
    refreshes must keep its version pinned (the lease), not fail with VersionExpiredError."""
    path = str(tmp_path / "store")
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0,
                             block_cache_capacity=0, meta_cache_capacity=0)
    model = KvModel()
    with HummockStorage.open(path, options) as writer:
        for i in range(1, 4):
            _commit(writer, model, i)
        writer.compact_all()
        with HummockStorage.open(path, options, read_only=True) as reader:
            epoch = reader.max_committed_epoch
            scan = reader.iter(1, epoch)
            head = [next(scan) for _ in range(5)]
            for i in range(4, 6):
                _commit(writer, model, i)
            writer.compact_all()
            reader.refresh()
            writer.vacuum()
            assert head + list(scan) == model.items(1, epoch)


def test_killed_reader_lease_expires_and_vacuum_goes_on(tmp_path):
    """A reader process killed with SIGKILL stops renewing its lease: the writer's vacuum keeps
    what the reader's version holds only until the lease expires, then deletes it, and
    removes the dead lease object itself after leases.DEAD_AFTER lease times."""
    from hummock.leases import DEAD_AFTER, LEASE_PREFIX

    path = str(tmp_path / "store")
    lease_s = 0.5
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0,
                             reader_lease_s=lease_s)
    model = KvModel()
    code = ("import sys, time; from hummock import HummockStorage, StorageOptions; "
            f"s = HummockStorage.open(sys.argv[1], StorageOptions(reader_lease_s={lease_s}), read_only=True); "
            "print('pinned', s.version().id, flush=True); time.sleep(120)")
    with HummockStorage.open(path, options) as writer:
        for i in range(1, 5):
            _commit(writer, model, i)
        child = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline()
            assert line.startswith("pinned "), line
            pinned = int(line.split()[1])
            assert pinned == writer.version().id
            held = writer.version().sst_ids()
            writer.compact_all()
            writer.vacuum()
            gone = held - writer.version().sst_ids()
            assert gone and gone <= sst_ids_on(writer), "vacuum deleted SSTs a live reader lease pins"
            assert writer._store.list(LEASE_PREFIX)
        finally:
            child.kill()
            child.wait()
        deadline = time.monotonic() + 30 + DEAD_AFTER * lease_s
        i = 5
        while gone & sst_ids_on(writer) or writer._store.list(LEASE_PREFIX):
            assert time.monotonic() < deadline, "the dead reader's lease never expired"
            time.sleep(0.2)
            _commit(writer, model, i)   # fresh garbage: vacuum lists leases only when it has some
            writer.compact_all()
            writer.vacuum()
            i += 1
        assert sst_ids_on(writer) == writer.version().sst_ids()
        assert list(writer.iter(1, (i - 1) * E)) == model.items(1, (i - 1) * E)


def test_reader_whose_lease_lapsed_gets_a_clear_refresh_request(tmp_path):
    """A reader that stopped renewing (a pause past its lease) may find its SSTs vacuumed: its
    reads raise VersionExpiredError (a HummockError saying to refresh), never wrong rows, and
    after refresh() it reads the new version exactly."""
    from hummock import HummockError
    from hummock.leases import VersionExpiredError

    path = str(tmp_path / "store")
    lease_s = 0.5
    options = StorageOptions(compactor="none", target_sst_size=4096, block_size=1024, vacuum_min_age_s=0,
                             reader_lease_s=lease_s, block_cache_capacity=0, meta_cache_capacity=0)
    model = KvModel()
    with HummockStorage.open(path, options) as writer:
        for i in range(1, 5):
            _commit(writer, model, i)
        with HummockStorage.open(path, options, read_only=True) as reader:
            old_epoch = reader.max_committed_epoch
            reader._lease._stop.set()       # the reader pauses: no renewals from now on
            reader._lease._thread.join()
            held = reader.version().sst_ids()
            _commit(writer, model, 5)
            writer.compact_all()
            deadline = time.monotonic() + 30
            while held & sst_ids_on(writer):   # kept until the lease has expired
                assert time.monotonic() < deadline, "the lapsed lease still protects its version"
                time.sleep(0.1)
                writer.vacuum()
            with pytest.raises(VersionExpiredError, match="refresh") as info:
                list(reader.iter(1, old_epoch))
            assert isinstance(info.value, HummockError)
            assert reader.refresh() == 5 * E
            assert list(reader.iter(1, 5 * E)) == model.items(1, 5 * E)
