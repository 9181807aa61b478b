"""Row counts from SST metadata (hummock/row_count.py, the live-count section of SST format
version 2): whenever the metadata answers, it is the number of rows a scan yields."""

import pytest
from hypothesis import given, settings, strategies as st

from hummock import HummockStorage, StorageOptions
from hummock.sstable.meta import SstableInfo
from hummock.version_codec import _Bad, _info_from_json

E = 1 << 16
SMALL = StorageOptions(shared_buffer_capacity=64 * 1024, block_size=256, target_sst_size=4 * 1024,
                       vacuum_min_age_s=0)

# one epoch: a list of (table, key, value or None for a delete); steps also compact / pin
writes = st.lists(st.tuples(st.sampled_from((1, 2)), st.integers(0, 60), st.one_of(st.none(), st.binary(max_size=8))),
                  max_size=40)
steps = st.lists(st.tuples(writes, st.sampled_from(("none", "compact", "pin", "pin+compact"))), min_size=1,
                 max_size=6)


def _scan_count(snap, table):
    return sum(1 for _ in snap.iter(table))


@settings(max_examples=15, deadline=None)
@given(steps)
def test_count_rows_equals_scan_or_abstains(tmp_path_factory, history):
    path = str(tmp_path_factory.mktemp("rc") / "db")
    with HummockStorage.open(path, SMALL) as store:
        pinned = []
        for i, (batch, action) in enumerate(history):
            epoch = (i + 1) * E
            by_table = {}
            for table, key, value in batch:
                by_table.setdefault(table, {})[b"k%03d" % key] = value
            for table, kv in sorted(by_table.items()):
                store.ingest_batch(table, sorted(kv.items()), epoch)
            store.checkpoint(epoch)
            if "pin" in action:   # an old snapshot keeps older versions through compaction
                pinned.append(store.snapshot(epoch))
            if "compact" in action:
                store.compact_all()
            for snap in pinned + [store.snapshot()]:
                for table in (1, 2):
                    counted = snap.count_rows(table)
                    if counted is not None:
                        assert counted == _scan_count(snap, table), (snap.epoch, table)
            snap.release()
        for snap in pinned:
            snap.release()
        store.compact_all()   # nothing pinned: one sorted run per table, which the metadata decides
        with store.snapshot() as snap:
            for table in (1, 2):
                assert snap.count_rows(table) == _scan_count(snap, table)


def test_version_one_ssts_and_unflushed_rows_abstain(tmp_path):
    with HummockStorage.open(str(tmp_path / "db"), SMALL) as store:
        store.ingest_batch(1, [(b"a", b"1"), (b"b", b"2"), (b"c", None)], E)
        store.checkpoint(E)
        with store.snapshot() as snap:
            assert snap.count_rows(1) == 2 and snap.count_rows(9) == 0
        store.ingest_batch(1, [(b"b", None), (b"d", b"4")], 2 * E)
        store.checkpoint(2 * E)
        with store.snapshot() as snap:   # two L0 SSTs over the same keys: the metadata cannot decide
            assert snap.count_rows(1) is None and _scan_count(snap, 1) == 2
        store.compact_all()
        with store.snapshot() as snap:
            assert snap.count_rows(1) == 2


def test_a_snapshot_older_than_the_compacted_run_abstains(tmp_path):
    """Compaction under a pinned snapshot keeps epoch E's versions in the run, but the live
    counts describe the newest ones: a read at E over that run must scan."""
    with HummockStorage.open(str(tmp_path / "db"), SMALL) as store:
        store.ingest_batch(1, [(b"k%03d" % i, b"v") for i in range(50)], E)
        store.checkpoint(E)
        with store.snapshot(E) as old:
            store.ingest_batch(1, [(b"k%03d" % i, None) for i in range(0, 50, 2)], 2 * E)
            store.checkpoint(2 * E)
            store.compact_all()
            assert old.count_rows(1) == _scan_count(old, 1) == 50   # it reads the version it pinned
            with store.snapshot(E) as again:   # epoch E over the compacted run
                assert again.count_rows(1) is None and _scan_count(again, 1) == 50
            with store.snapshot() as new:
                assert new.count_rows(1) == _scan_count(new, 1) == 25


def _info_dict(**changes):
    d = SstableInfo(7, b"\0\0\0\1a" + bytes(8), b"\0\0\0\1z" + bytes(8), 100, 50, 1, 2, 10, 1, (1,), (9,)).to_dict()
    d.update(changes)
    return d


def test_live_counts_in_version_records():
    assert _info_from_json(_info_dict()).live_counts == (9,)
    old = _info_dict()
    del old["live_counts"]   # a version-1 SST's record: no counts, read as None
    assert _info_from_json(old).live_counts is None
    for bad in ([9, 1], [-1], [11], ["9"], [True]):   # one per table id, >= 0, at most key_count
        with pytest.raises(_Bad, match="live_counts"):
            _info_from_json(_info_dict(live_counts=bad))


def test_sql_count_star_equals_count_of_the_key_on_every_path(tmp_path):
    """``count(*)`` over a whole table -- from SST metadata after a compaction, by counting
    scanned pairs before it, and through the row path when a value column has a kind the
    columnar scan cannot step over (JSONB, arrays) -- equals ``count(k)``."""
    import sql
    from relational.storage_table import StorageTable

    with sql.connect(str(tmp_path / "db")) as c:
        for name, col in (("a", "v VARCHAR"), ("b", "v JSONB"), ("d", "v INT[]")):
            c.execute(f"CREATE TABLE {name} (k INT PRIMARY KEY, {col})")
            value = {"a": "'x'", "b": "'{\"n\": 1}'", "d": "ARRAY[1, 2]"}[name]
            c.execute(f"INSERT INTO {name} SELECT g, {value} FROM generate_series(1, 60) AS s(g)")
            c.execute(f"DELETE FROM {name} WHERE k % 7 = 0")
        c.execute("FLUSH")
        for compacted in (False, True):
            if compacted:
                c.db.store.compact_all()
            for name in ("a", "b", "d"):
                assert c.execute(f"SELECT count(*) FROM {name}").fetchall() == [(52,)], (name, compacted)
                assert c.execute(f"SELECT count(k) FROM {name}").fetchall() == [(52,)], (name, compacted)
        store = c.db.store
        table = StorageTable.from_desc(store, c.db.catalog.get("b").desc)
        assert table.row_count(store.max_committed_epoch) == 52   # after compact_all: the metadata decides
