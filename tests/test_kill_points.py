"""Crashes at the engine's named kill points (hummock/killpoints.py), one per test.

A child writer (tests/kill_writer.py, deterministic: commit, and compact_all every third epoch)
runs with ``HUMMOCK_KILL_POINT=name:N`` and SIGKILLs itself at the N-th hit. The parent checks
that the child died by SIGKILL at the phase the point belongs to, then reopens the store:

1. read-only first (no vacuum runs): every acknowledged commit is there and at most the one in
   flight more -- exactly which, from the phase the child was in; every epoch <= the recovered
   ``max_committed_epoch`` reads exactly as the model; every SST the durable version
   references exists;
2. then as the writer (its open vacuums, ``vacuum_min_age_s=0``): no orphan SST is left (the
   objects on the store are exactly the version's), the data still reads exactly, and the
   store takes a new commit.

Local directories for every point (memory stores die with the process), S3 on the session's
moto server for three. On S3 the dead child's writer-lock object stays behind with a fresh
heartbeat (a local store's flock died with the child): the parent, which saw the child die
by SIGKILL, takes the lock over with ``force`` -- what an operator does for a writer known
dead, instead of waiting 30 s for the lock to go stale (stale takeover: tests/test_manifest.py
and tests/test_two_process.py).
"""

import json
import os
import signal
import subprocess
import sys

import pytest

from hummock import HummockStorage
from hummock.killpoints import ENV_VAR, KILL_POINTS
from hummock.manifest import ConcurrentWriterError, WriterLock
from kv_model import KvModel

sys.path.insert(0, os.path.dirname(__file__))
from kill_writer import OPTIONS, TABLES, epoch_batches  # noqa: E402

WRITER = os.path.join(os.path.dirname(__file__), "kill_writer.py")
CHILD_TIMEOUT_S = 120

# (kill point, hit, the child's phase at the kill, acknowledged epochs by then). The phases are
# those of kill_writer.py's fixed workload: hit 7 of a delta write is the commit of epoch 5,
# hit 9 the compaction delta after epoch 6; compaction hit 2 and vacuum hit 10 are in the
# second compact_all (the flushed SSTs are uncompressed, StorageOptions.flush_compression, so
# the first one already deletes ~8 batches of inputs). Kill points fire in the phases listed in
# PHASES whatever the count.
CASES = [
    ("flush.after_sst_upload", 5, "syncing", 4),
    ("manifest.before_delta_write", 7, "committing", 4),
    ("manifest.after_delta_write", 7, "committing", 4),
    ("manifest.after_delta_write", 9, "compacting", 6),
    # the local store's barrier: the deferred flush SST and the delta's temp file are synced,
    # the delta not linked (hit 9: the commit of epoch 5; hit 11: a compaction delta)
    ("object_store.after_barrier", 9, "committing", 4),
    ("object_store.after_barrier", 11, "compacting", 6),
    ("compaction.after_outputs", 2, "compacting", 6),
    ("compaction.after_install", 2, "compacting", 6),
    ("vacuum.mid_delete", 10, "compacting", 6),
]
PHASES = {"flush.after_sst_upload": {"syncing"},
          "manifest.before_delta_write": {"syncing", "committing", "compacting"},
          "manifest.after_delta_write": {"syncing", "committing", "compacting"},
          "object_store.after_barrier": {"syncing", "committing", "compacting"},
          "compaction.after_outputs": {"compacting"},
          "compaction.after_install": {"compacting"},
          "vacuum.mid_delete": {"compacting"}}
S3_CASES = {("manifest.after_delta_write", 7), ("compaction.after_install", 2), ("vacuum.mid_delete", 10)}


def test_the_cases_cover_every_kill_point():
    assert {point for point, *_ in CASES} == set(KILL_POINTS) == set(PHASES)


def case_params(cases, s3_cases) -> list:
    """pytest params ``(kind, point, hit, phase, acked)``: every case on a local store, those
    in ``s3_cases`` on S3 too (shared with tests/test_packed_kill_points.py)."""
    out = []
    for point, hit, phase, acked in cases:
        out.append(pytest.param("local", point, hit, phase, acked, id=f"local-{point}:{hit}"))
        if (point, hit) in s3_cases:
            out.append(pytest.param("s3", point, hit, phase, acked, id=f"s3-{point}:{hit}"))
    return out


def model_up_to(last: int) -> KvModel:
    model = KvModel()
    for i in range(1, last + 1):
        for table, batch in epoch_batches(i):
            model.ingest(table, batch, i << 16)
        model.commit(i << 16)
    return model


def _location(kind, tmp_path, request):
    """(url, extra StorageOptions fields as JSON-able dict) of a fresh store of ``kind``."""
    if kind == "local":
        return str(tmp_path / "store"), {}
    from s3_server import CREDENTIALS, REGION, new_bucket_name
    server = request.getfixturevalue("s3_server")
    bucket = new_bucket_name()
    server.admin_client().create_bucket(Bucket=bucket)
    request.addfinalizer(lambda: server.drop_bucket(bucket))
    return (f"s3://{bucket}/kill?endpoint={server.endpoint_url}&region={REGION}",
            {"s3_access_key_id": CREDENTIALS["access_key_id"],
             "s3_secret_access_key": CREDENTIALS["secret_access_key"]})


def run_child(url: str, extra: dict, kill: str | None, writer: str = WRITER) -> tuple[int, list[str], str]:
    """(exit status, progress lines, stderr) of the child ``writer`` on ``url``, killed at
    ``kill`` (``point:hit``; None: runs to the end)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(ENV_VAR, None)
    if kill:
        env[ENV_VAR] = kill
    child = subprocess.run([sys.executable, writer, url, json.dumps(extra)], capture_output=True,
                           text=True, env=env, timeout=CHILD_TIMEOUT_S)
    return child.returncode, child.stdout.splitlines(), child.stderr


def sst_ids_on(store) -> set[int]:
    return {int(m.path.rsplit("/", 1)[-1][:-4]) for m in store._store.list("sst/")
            if m.path.endswith(".sst")}


def check_reads(store, model: KvModel, committed: int) -> None:
    """Every epoch 1..committed reads exactly as the model, both tables (retention keeps them)."""
    assert store.min_readable_epoch == 0
    for i in range(1, committed + 1):
        for table in TABLES:
            assert list(store.iter(table, i << 16)) == model.items(table, i << 16), (i, table)
    top = store.max_committed_epoch
    for table in TABLES:
        keys = [k for k, _ in model.items(table, top)][::7] + [b"k99999", b"k00000"]
        assert store.multi_get(table, keys, top) == [model.get(table, k, top) for k in keys]


def open_writer(url, options, monkeypatch):
    """Open as the writer. On S3 the killed child's lock object is still fresh: take it over
    with ``force`` (the child is known dead). A local store needs nothing: the flock died."""
    if url.startswith("s3://"):
        with pytest.raises(ConcurrentWriterError):
            HummockStorage.open(url, options)     # the dead writer's lock is still fresh
        acquire = WriterLock.acquire.__func__

        def forced(cls, store, owner, *, stale_after_seconds=30.0, force=False):
            return acquire(cls, store, owner, stale_after_seconds=stale_after_seconds, force=True)
        monkeypatch.setattr(WriterLock, "acquire", classmethod(forced))
    return HummockStorage.open(url, options)


@pytest.mark.parametrize("kind, point, hit, phase, acked_at_kill", case_params(CASES, S3_CASES))
def test_kill_at_point_then_recover(kind, point, hit, phase, acked_at_kill, tmp_path, request,
                                    monkeypatch):
    url, extra = _location(kind, tmp_path, request)
    options = OPTIONS.replace(**extra)
    code, lines, err = run_child(url, extra, f"{point}:{hit}")
    assert code == -signal.SIGKILL, f"child exited {code}, not by SIGKILL at {point}:{hit}\n{err[-3000:]}"
    assert lines and lines[-1].split()[0] != "done"
    acked = max([int(line.split()[1]) for line in lines if line.startswith("committed ")], default=0)
    last_phase, in_flight = lines[-1].split()[0], int(lines[-1].split()[1])
    assert last_phase in PHASES[point], (point, lines[-3:])
    # got as far as intended: the expected phase, after the expected acknowledged commits
    assert (last_phase, acked) == (phase, acked_at_kill), (point, hit, lines[-4:])
    print(f"\n{kind} {point}:{hit}: killed (SIGKILL) in '{lines[-1]}' after {acked} acknowledged commits")

    # 1. read-only: nothing is vacuumed, so the store is exactly what the crash left
    with HummockStorage.open(url, options, read_only=True) as reader:
        committed = reader.max_committed_epoch >> 16
        assert acked <= committed <= acked + 1, (acked, committed)
        if last_phase == "committing" and point == "manifest.after_delta_write":
            assert committed == in_flight == acked + 1   # the delta is the commit point
        elif last_phase == "committing" and point == "manifest.before_delta_write":
            assert committed == acked                     # never written: not committed
        else:
            assert committed == acked                     # no commit was in flight
        referenced = reader.version().sst_ids()
        missing = referenced - sst_ids_on(reader)
        assert not missing, f"SSTs the durable version references are gone: {sorted(missing)}"
        model = model_up_to(committed)
        check_reads(reader, model, committed)
        if point in ("compaction.after_install", "vacuum.mid_delete") or (point, hit) == (
                "manifest.after_delta_write", 9):
            # the compaction delta landed: its inputs left the version
            assert len(reader.version().l0) == 0, "the killed compaction's delta should be durable"
        leftovers = sst_ids_on(reader) - referenced

    # 2. the writer: its open vacuums the crash's leftovers
    with open_writer(url, options, monkeypatch) as store:
        assert store.max_committed_epoch >> 16 == committed
        on_store = sst_ids_on(store)
        assert on_store == store.version().sst_ids(), \
            f"orphan SSTs survived the writer's vacuum: {sorted(on_store - store.version().sst_ids())}"
        check_reads(store, model, committed)
        nxt = committed + 1
        for table, batch in epoch_batches(nxt):
            store.ingest_batch(table, batch, nxt << 16)
            model.ingest(table, batch, nxt << 16)
        store.checkpoint(nxt << 16)
        model.commit(nxt << 16)
        store.compact_all()
        check_reads(store, model, nxt)
    print(f"  recovered epoch {committed} (acknowledged {acked}); {len(leftovers)} leftover SSTs "
          f"vacuumed at reopen")
    if point in ("flush.after_sst_upload", "compaction.after_outputs", "compaction.after_install",
                 "vacuum.mid_delete", "object_store.after_barrier"):
        assert leftovers, f"a kill at {point} should leave unreferenced SSTs for the reopen's vacuum"


def test_child_without_kill_point_runs_to_the_end(tmp_path):
    """The harness itself: without HUMMOCK_KILL_POINT the child completes (exit 3, 'done')."""
    code, lines, err = run_child(str(tmp_path / "store"), {}, None)
    assert code == 3 and lines[-1] == "done", err[-2000:]
