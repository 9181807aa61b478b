"""The PySpark compaction runner (``compactor="spark"``) on a local[2] session (fixture ``spark``).

Covers: split planning (pure, no Spark); real L0 -> bottom-level jobs over a local directory and
over the moto S3 server (same answers before and after; outputs equal the in-process core's);
a job failing midway (test hook ``FAIL_SPLIT_FOR_TESTS``) leaves the version's SSTs unchanged
and vacuum leaves no orphan; a task whose inputs changed while it ran is discarded; space is
reclaimed; executors use the same native/pure choice as the driver; and a metamorphic hypothesis
test: the same random history read at every pinned epoch with compactor "none", "local" and
"spark" gives the model's answers. Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``).
"""

import os
import pickle
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions, _twins
from hummock.compaction import spark as spark_runner
from hummock.compaction.core import compact
from hummock.compaction.picker import pick_all
from hummock.compaction.splits import bound, plan_splits, split_points
from hummock.errors import InvalidArgumentError
from hummock.iterators import SstRun
from hummock.key import encode_full_key
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.sstable.meta import SstableInfo
from hummock.sstable.reader import Sstable
from kv_model import KvModel

EPOCH = 1 << 16
OPTIONS = StorageOptions(compactor="spark", target_sst_size=4 * 1024, block_size=512,
                         shared_buffer_capacity=64 * 1024, block_cache_capacity=1 << 20,
                         meta_cache_capacity=1 << 20, vacuum_min_age_s=0)
KEYS = [b"k%04d" % i for i in range(600)]


# --- split planning (no Spark) ------------------------------------------------------------------

@given(st.lists(st.tuples(st.binary(max_size=3), st.integers(1, 1000)), max_size=60), st.integers(1, 9))
def test_split_points_ascend_and_balance(blocks, parts):
    points = split_points(blocks, parts)
    assert points == sorted(set(points)) and len(points) <= max(parts - 1, 0)
    if blocks:
        assert all(p > min(k for k, _ in blocks) for p in points)
    total = sum(size for _, size in blocks)
    sizes = [0] * (len(points) + 1)
    for key, size in blocks:
        sizes[sum(p <= key for p in points)] += size
    if blocks and len({k for k, _ in blocks}) == len(blocks) and parts > 1:
        # with distinct keys, no part exceeds its share by more than one block
        assert all(s <= total / parts + max(size for _, size in blocks) for s in sizes)


def _info(sst_id, low, high, table_ids=(1,)):
    return SstableInfo(sst_id, encode_full_key(1, low, 9), encode_full_key(1, high, 1), 100, 90, 1, 9, 3, 0,
                       table_ids)


def test_plan_splits_covers_the_key_space_without_splitting_a_user_key():
    runs = ((_info(1, b"a", b"f"), _info(2, b"g", b"p")), (_info(3, b"c", b"k"),))
    firsts = {1: [b"a", b"c", b"e"], 2: [b"g", b"j", b"m"], 3: [b"c", b"h"]}
    splits = plan_splits(runs, lambda info: [(encode_full_key(1, k, 5), 10) for k in firsts[info.sst_id]], 4)
    assert len(splits) == 4 and splits[0].start is None and splits[-1].end is None
    for left, right in zip(splits, splits[1:]):
        assert left.end == right.start and left.end[-8:] == b"\0" * 8   # newest version of a user key
    assert sum(s.input_bytes for s in splits) == 80
    for split in splits:   # each split lists exactly the SSTs meeting its range, runs in order
        low = split.start[:-8] if split.start else None
        high = split.end[:-8] if split.end else None
        for run in split.runs:
            for info in run:
                assert (low is None or info.largest_key[:-8] >= low) and (high is None or info.smallest_key[:-8] < high)
    assert bound(b"\x00\x00\x00\x01k") == b"\x00\x00\x00\x01k" + b"\0" * 8


def test_store_descriptions_and_refusals(tmp_path):
    described = spark_runner.StoreDescription.of(LocalObjectStore(tmp_path))
    assert pickle.loads(pickle.dumps(described)) == described and described.open().root == str(tmp_path)
    with pytest.raises(InvalidArgumentError, match="memory"):
        HummockStorage.open("memory://", OPTIONS)
    with pytest.raises(InvalidArgumentError, match="MemoryObjectStore"):
        HummockStorage.open(MemoryObjectStore(), OPTIONS)
    HummockStorage.open(MemoryObjectStore(), OPTIONS.replace(compactor="local")).close()


class _FakeContext:
    def __init__(self, master, **conf):
        self.master, self._conf = master, conf

    def getConf(self):
        return self._conf   # .get(key, default), like SparkConf


@pytest.mark.parametrize("master, conf, attempts", [
    ("local[2]", {}, 1), ("local", {}, 1), ("local[*, 3]", {}, 3), ("local-cluster[2,1,512]", {}, 4),
    ("spark://host:7077", {"spark.task.maxFailures": "8"}, 8),
    ("yarn", {"spark.speculation": "true"}, 5)])
def test_ids_are_reserved_for_every_attempt_spark_may_make(master, conf, attempts):
    assert spark_runner._max_attempts(_FakeContext(master, **conf)) == attempts


def test_importing_hummock_does_not_load_pyspark():
    code = ("import sys, hummock, hummock.storage, hummock.compaction.spark; "
            "assert 'pyspark' not in sys.modules, 'pyspark was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- helpers ----------------------------------------------------------------------------------------

def write_history(store, model, epochs, rounds=1, start=1, keys=KEYS):
    """``epochs`` commits; each overwrites a stride of ``keys`` and deletes a few."""
    for e in range(start, start + epochs):
        epoch = e * EPOCH
        for r in range(rounds):
            pairs = [(k, None if i % 17 == e % 17 else b"v%d.%d." % (e, r) + k[:5] * 10)
                     for i, k in enumerate(keys) if i % (e % 3 + 1) == 0]
            store.ingest_batch(1, pairs, epoch)
            model.ingest(1, pairs, epoch)
        store.commit_epoch(epoch)
        model.commit(epoch)


def answers(store, epoch):
    return list(store.iter(1, epoch)), store.multi_get(1, KEYS[::7], epoch)


def sst_objects(store):
    return {int(m.path.rsplit("/", 1)[-1][:-4]) for m in store._store.list("sst/")}


def entries(store, infos):
    return [e for info in infos for e in Sstable.open(store._store, info).scan()]


@pytest.fixture(params=["local", "s3"])
def store_url(request, tmp_path):
    """``(url, options)`` for an empty store: a local directory, or a fresh bucket on moto S3."""
    if request.param == "local":
        yield str(tmp_path / "store"), OPTIONS
        return
    from s3_server import CREDENTIALS, REGION

    server = request.getfixturevalue("s3_server")
    bucket_maker = server.new_store()   # creates the bucket
    bucket = bucket_maker.bucket
    bucket_maker.close()
    yield f"s3://{bucket}/spark-{uuid.uuid4().hex[:6]}", OPTIONS.replace(
        s3_endpoint=server.endpoint_url, s3_region=REGION, s3_access_key_id=CREDENTIALS["access_key_id"],
        s3_secret_access_key=CREDENTIALS["secret_access_key"])
    server.drop_bucket(bucket)


# --- real jobs --------------------------------------------------------------------------------------

def test_the_runner_reuses_the_test_session(spark):
    session, startup = spark_runner.spark_session("local[1]")   # the master of a new one: ignored
    assert session.sparkContext is spark.sparkContext and session.sparkContext.master == "local[2]"
    assert spark_runner.spark_session()[1] == 0.0


def test_executors_use_the_drivers_choice_of_twins(spark):
    probe = spark.sparkContext.parallelize([0, 1], 2).map(
        lambda _: (__import__("hummock._twins", fromlist=["_"]).pure_python_forced(),
                   __import__("hummock.iterators", fromlist=["_"])._impl.__name__)).collect()
    from hummock import iterators
    assert set(probe) == {(_twins.pure_python_forced(), iterators._impl.__name__)}


def test_l0_to_bottom_level_job(spark, store_url):
    url, options = store_url
    model = KvModel()
    with HummockStorage.open(url, options) as store:
        write_history(store, model, 3)                    # 3 sub-levels: below the L0 trigger
        before = store.version()
        assert len(before.l0) == 3 and not any(lv.ssts for lv in before.levels)
        expected = {e: answers(store, e) for e in (1 * EPOCH, 3 * EPOCH)}
        assert expected[3 * EPOCH][0] == model.items(1, 3 * EPOCH)
        assert store.compact_all() == 1
        after = store.version()
        assert not after.l0 and len(after.levels[-1].ssts) > 1 and not before.sst_ids() & after.sst_ids()
        assert answers(store, 3 * EPOCH) == expected[3 * EPOCH]
        assert store.stats()["compaction"]["tasks"] == 1
        assert sst_objects(store) == after.sst_ids()      # the inputs were vacuumed
        write_history(store, model, 2, start=4)           # L0 again, on top of the bottom level
        expected = answers(store, 5 * EPOCH)
        assert store.compact_all() == 1
        assert answers(store, 5 * EPOCH) == expected == (model.items(1, 5 * EPOCH), expected[1])
        assert not store.version().l0
    with HummockStorage.open(url, options.replace(compactor="none")) as reopened:
        assert answers(reopened, 5 * EPOCH) == expected


def test_the_background_thread_runs_spark_jobs_at_the_l0_trigger(spark, tmp_path):
    model = KvModel()
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        write_history(store, model, 12)                  # reaches the L0 -> base trigger (12 sub-levels)
        deadline = time.monotonic() + 120                # a bound for a loaded machine, not a timing
        # wait for a merge (a Spark job): a trivial move may be applied first (no job, no bytes)
        while store.stats()["compaction"]["output_bytes"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = store.stats()["compaction"]
        assert stats["tasks"] - stats["moves"] >= 1 and stats["failures"] == 0 and stats["output_bytes"] > 0
        assert len(store.version().l0) < 5
        assert answers(store, 12 * EPOCH)[0] == model.items(1, 12 * EPOCH)


# each key a prefix of the next: split bounds (user key + 8 zero bytes) must order by full key
PREFIX_KEYS = [b"p" + b"\x00" * i for i in range(300)]


@pytest.mark.parametrize("keys", [KEYS, PREFIX_KEYS], ids=["plain", "prefixes"])
def test_spark_outputs_hold_what_the_in_process_core_writes(spark, tmp_path, keys):
    model = KvModel()
    with HummockStorage.open(str(tmp_path), OPTIONS.replace(compactor="none")) as store:
        write_history(store, model, 3, rounds=2, keys=keys)
        task = pick_all(store.version())
        watermark = store._watermark()
        ids = iter(range(10**6, 2 * 10**6))
        result = spark_runner.run_task_on_spark(str(tmp_path), task, watermark, store.options,
                                                store._manifest.reserve_sst_ids, max_splits=4)
        readers = [SstRun([store._reader_for(i) for i in run], None, None) for run in task.runs]
        local = compact(readers, watermark, task.bottom, store._store, store.options.sst_builder_options(),
                        store.options.target_sst_size, lambda: next(ids))
        assert result.splits == 4 and result.job_seconds > 0 and result.session_seconds >= 0
        assert entries(store, result.outputs) == entries(store, local)
        assert all(a.largest_key[:-8] < b.smallest_key[:-8] for a, b in zip(result.outputs, result.outputs[1:]))
        assert {i.sst_id for i in result.outputs} <= set(result.reserved)


def test_a_failed_job_leaves_the_version_unchanged_and_vacuum_removes_its_outputs(spark, tmp_path, monkeypatch):
    model = KvModel()
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        write_history(store, model, 3, rounds=2)
        before = store.version()
        expected = answers(store, 3 * EPOCH)
        monkeypatch.setattr(spark_runner, "FAIL_SPLIT_FOR_TESTS", (1, 1))
        with pytest.raises(spark_runner.SparkJobError, match="injected failure"):
            store.compact_all()
        after = store.version()
        assert (after.l0, after.levels) == (before.l0, before.levels)
        assert after.next_sst_id >= before.next_sst_id         # ids come from reserved blocks: never reused
        orphans = sst_objects(store) - after.sst_ids()
        assert orphans and not orphans & before.sst_ids()       # split 1's first output, at least
        assert store.vacuum() == len(orphans)
        assert sst_objects(store) == after.sst_ids()
        assert answers(store, 3 * EPOCH) == expected
        with pytest.raises(spark_runner.SparkJobError, match="injected failure"):
            store.compact_all()                              # fail again, then close: no vacuum
        assert sst_objects(store) - store.version().sst_ids()
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:   # the writer's open vacuums
        assert sst_objects(store) == store.version().sst_ids()
        assert (store.version().l0, store.version().levels) == (before.l0, before.levels)
        monkeypatch.setattr(spark_runner, "FAIL_SPLIT_FOR_TESTS", None)
        assert store.compact_all() == 1 and answers(store, 3 * EPOCH) == expected
        assert not orphans & store.version().sst_ids()          # a failed job's ids are not handed out again


def test_a_task_whose_inputs_changed_while_it_ran_is_discarded(spark, tmp_path, monkeypatch):
    model = KvModel()
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        write_history(store, model, 3)
        expected = answers(store, 3 * EPOCH)
        task = pick_all(store.version())
        real_job = spark_runner._run_job

        def job_then_someone_else_compacts(*args):
            results = real_job(*args)
            monkeypatch.setattr(spark_runner, "_run_job", real_job)
            assert store.compact_all() == 1                     # takes the same inputs first
            return results

        monkeypatch.setattr(spark_runner, "_run_job", job_then_someone_else_compacts)
        manager = store._compactor
        assert manager._run(task) == 0
        assert manager.stats["conflicts"] == 1 and manager.stats["tasks"] == 1
        winner = store.version()
        store.vacuum()
        assert sst_objects(store) == winner.sst_ids()           # the loser's outputs are gone
        assert answers(store, 3 * EPOCH) == expected


def test_versions_and_tombstones_are_dropped_and_space_reclaimed(spark, tmp_path):
    model = KvModel()
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        for e in range(1, 4):                                   # every key overwritten 3 x 4 times
            for r in range(4):
                pairs = [(k, b"%d.%d" % (e, r) * 20) for k in KEYS]
                store.ingest_batch(1, pairs, e * EPOCH)
                model.ingest(1, pairs, e * EPOCH)
            store.commit_epoch(e * EPOCH)
        deletes = [(k, None) for k in KEYS[::2]]
        store.ingest_batch(1, deletes, 4 * EPOCH)
        model.ingest(1, deletes, 4 * EPOCH)
        store.commit_epoch(4 * EPOCH)
        bytes_before = sum(meta.size for meta in store._store.list("sst/"))
        store.compact_all()
        bytes_after = sum(meta.size for meta in store._store.list("sst/"))
        assert bytes_after * 10 < bytes_before                  # 1/12 of the versions, half the keys
        stats = store.stats()["compaction"]
        assert stats["dropped_versions"] == len(KEYS) // 2 * (12 + 11) and stats["dropped_tombstones"] == len(KEYS) // 2
        infos = store.version().all_ssts()
        assert sum(i.key_count for i in infos) == len(KEYS) // 2 and sum(i.tombstone_count for i in infos) == 0
        assert list(store.iter(1, 4 * EPOCH)) == model.items(1, 4 * EPOCH)


# --- metamorphic: no compaction vs in-process vs Spark -----------------------------------------------

SMALL_KEYS = [b"", b"a", b"a\x00", b"ab", b"b", b"c", b"d\xff", b"e"]
BATCH = st.lists(st.tuples(st.sampled_from(SMALL_KEYS), st.one_of(st.none(), st.binary(max_size=6),
                                                                  st.binary(min_size=300, max_size=900))),
                 max_size=8, unique_by=lambda kv: kv[0])
HISTORY = st.lists(st.tuples(st.sampled_from([1, 2]), BATCH, st.booleans(), st.booleans()), min_size=1, max_size=7)


@settings(max_examples=max(3, settings().max_examples // 12))
@given(HISTORY)
def test_reads_agree_with_no_compaction_local_and_spark(spark, history):
    """Each history step: a batch for a table in a new epoch, committed; maybe pin a snapshot;
    maybe compact mid-history. At the end compact, then read every pinned epoch and the last."""
    with tempfile.TemporaryDirectory() as root:
        stores = {kind: HummockStorage.open(os.path.join(root, kind), OPTIONS.replace(compactor=kind))
                  for kind in ("none", "local", "spark")}
        model, snapshots = KvModel(), {kind: [] for kind in stores}
        try:
            for n, (table, batch, pin, compact_now) in enumerate(history, start=1):
                pairs = sorted(batch)
                model.ingest(table, pairs, n * EPOCH)
                model.commit(n * EPOCH)
                for kind, store in stores.items():
                    store.ingest_batch(table, pairs, n * EPOCH)
                    store.commit_epoch(n * EPOCH)
                    if pin:
                        snapshots[kind].append(store.snapshot())
                    if compact_now and kind != "none":
                        store.compact_all()
            for kind in ("local", "spark"):
                stores[kind].compact_all()
                assert not stores[kind].version().l0
            last = len(history) * EPOCH
            for kind, store in stores.items():
                for table in (1, 2):
                    assert list(store.iter(table, last)) == model.items(table, last), kind
                    for snap in snapshots[kind]:
                        assert list(snap.iter(table)) == model.items(table, snap.epoch), (kind, snap.epoch)
                        assert snap.multi_get(table, SMALL_KEYS) == [model.get(table, k, snap.epoch)
                                                                     for k in SMALL_KEYS]
        finally:
            for kind, store in stores.items():
                for snap in snapshots[kind]:
                    snap.release()
                store.close()
