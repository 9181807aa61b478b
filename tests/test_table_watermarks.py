"""Table watermarks and truncate_table (hummock/table_watermarks.py, HummockStorage).

The record structure against a model (merging, refusals, folding, JSON), then the store on
memory, local and S3: reads hide at once and older reads and snapshots stay exact; records are
durable with their commit, survive reopen and reach read-only openers; compaction (thread,
worker processes, Spark) drops what they hide -- checked in the SSTs' contents -- but only once
no reader needs it; truncation removes whole SSTs; bad arguments raise typed errors. Runs in
whichever mode (native / pure) the suite runs; the KV state machine (test_storage_stateful.py)
mixes both features with everything else.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, InvalidArgumentError, ReadOnlyError, StorageOptions, StoreClosedError
from hummock.errors import CorruptionError
from hummock.key import encode_full_key
from hummock.sstable.meta import SstableInfo
from hummock.sstable.reader import Sstable
from hummock.table_watermarks import TableWatermarks, check_ranges, hides, resolve_all
from hummock.version import HummockVersion, VersionDelta, apply
from hummock.version_codec import (
    decode_version, encode_version, table_watermarks_from_json, table_watermarks_json,
)
from table_stores import OPTIONS, location

E = 1 << 16


def key(vnode: int, i: int) -> bytes:
    return vnode.to_bytes(2, "big") + b"%04d" % i


def rows(vnodes=(0, 1, 2), n=20):
    return [(key(v, i), b"v%d.%d" % (v, i)) for v in vnodes for i in range(n)]


def raw_keys(store, table_id=None) -> list:
    """The user key of every version stored in the version's SSTs (tombstones included); only
    ``table_id``'s as table keys if given."""
    out = []
    for info in store.version().all_ssts():
        for full_key, _ in Sstable.open(store._store, info).scan():
            if table_id is None:
                out.append(full_key[:-8])
            elif int.from_bytes(full_key[:4], "big") == table_id:
                out.append(full_key[4:-8])
    return out


@pytest.fixture(params=["memory", "local", "s3"])
def kind(request):
    return request.param


@pytest.fixture
def where(kind, tmp_path, request):
    return location(kind, tmp_path, request, OPTIONS.replace(vacuum_min_age_s=0))


# --- the records ------------------------------------------------------------------------------

def test_ranges_merge_as_hulls_and_only_grow():
    r = TableWatermarks().with_watermarks(E, {0: (b"", b"c"), 1: (b"m", None)})
    assert r.latest == {0: (b"", b"c"), 1: (b"m", None)}
    same = r.with_watermarks(2 * E, {0: (b"", b"b"), 1: (b"x", None)})   # contained: ignored
    assert same is r
    r2 = r.with_watermarks(2 * E, {0: (b"a", b"d")})                      # overlapping: the hull
    assert r2.latest[0] == (b"", b"d") and r2.entries[-1] == (2 * E, ((0, b"", b"d"),))
    r3 = r2.with_watermarks(2 * E, {1: (b"c", b"m")})                     # touching; same epoch: one entry
    assert r3.entries[-1] == (2 * E, ((0, b"", b"d"), (1, b"c", None)))
    with pytest.raises(InvalidArgumentError, match="does not overlap"):
        r3.with_watermarks(3 * E, {0: (b"e", b"f")})
    with pytest.raises(InvalidArgumentError, match="epoch order"):
        r3.with_watermarks(E, {5: b"x"})
    assert r3.resolve(E | 0xFFFF) == (None, {0: (b"", b"c"), 1: (b"m", None)})
    assert r3.resolve(E - 1) is None
    assert r3.resolve(2**64 - 1) == (None, {0: (b"", b"d"), 1: (b"c", None)})


def test_check_ranges_refuses_bad_input_with_typed_errors():
    assert check_ranges({7: b"w", 8: (b"a", None), 9: [bytearray(b"a"), b"b"]}) == {
        7: (b"", b"w"), 8: (b"a", None), 9: (b"a", b"b")}
    for bad in ([(0, b"w")], {-1: b"w"}, {65536: b"w"}, {True: b"w"}, {0: "w"}, {0: (b"a",)},
                {0: (b"b", b"a")}, {0: (b"a", b"a")}, {0: (None, b"a")}, {0: (b"", b"")}):
        with pytest.raises(InvalidArgumentError):
            check_ranges(bad)


def test_hides_checks_truncation_epochs_and_ranges():
    resolved = (5 * E + 2, {1: (b"b", b"d")})
    assert hides(resolved, key(9, 1), 5 * E + 2) and not hides(resolved, key(9, 1), 5 * E + 3)
    assert hides(resolved, b"\x00\x01c", 6 * E) and not hides(resolved, b"\x00\x01d", 6 * E)
    assert not hides(resolved, b"\x00\x01a", 6 * E) and not hides(resolved, b"\x00", 6 * E)
    assert not hides(None, b"\x00\x01c", 0)


UPDATES = st.lists(st.one_of(
    st.tuples(st.just("w"), st.integers(1, 6), st.dictionaries(st.integers(0, 3), st.tuples(
        st.sampled_from([b"", b"b", b"d"]), st.sampled_from([b"c", b"e", b"f", None])), min_size=1)),
    st.tuples(st.just("t"), st.integers(1, 6), st.integers(0, 3))), max_size=12)


def _model_resolve(events, read):
    """What a read at ``read`` hides, from the accepted events (epoch order per kind)."""
    through, ranges = None, {}
    for kind, epoch, arg in events:
        if epoch > read:
            continue
        if kind == "t":
            through = arg if through is None else max(through, arg)
        else:
            for vnode, rng in arg.items():
                ranges[vnode] = rng
    return None if through is None and not ranges else (through, ranges or None)


@settings(max_examples=200, deadline=None)
@given(updates=UPDATES, safe=st.integers(0, 7))
def test_folding_splitting_and_json_keep_every_read_at_or_above_safe_epoch(updates, safe):
    records, events = TableWatermarks(), []
    for kind, n, arg in sorted(updates, key=lambda u: u[1]):
        epoch = n * E
        try:
            if kind == "w":
                records = records.with_watermarks(epoch, check_ranges(arg))
                events.append(("w", epoch, {v: records.latest[v] for v in arg}))
            else:
                records = records.with_truncation(epoch, epoch + arg - 1)
                events.append(("t", epoch, epoch + arg - 1))
        except InvalidArgumentError:
            continue
    assert records.problems() == []
    reads = [n * E + d for n in range(8) for d in (0, 0xFFFF)]
    for read in reads:
        assert records.resolve(read) == _model_resolve(events, read)
    folded = records.folded(safe * E)
    assert folded.problems() == []
    for read in reads:
        if read >= safe * E:
            assert folded.resolve(read) == records.resolve(read)
    rejoined = records.between(0, safe * E).extended(records.between(safe * E, 2**64 - 1))
    assert rejoined == records and rejoined.latest == records.latest
    assert table_watermarks_from_json(table_watermarks_json(7, records)) == (7, records)


def test_versions_carry_records_and_fold_them_when_safe_epoch_rises():
    v = HummockVersion.empty()
    v = apply(v, VersionDelta.reserve_sst_ids(v, 10))
    for n in (1, 2, 3):
        marks = {4: TableWatermarks().with_watermarks(n * E, {0: (b"", b"%d" % n)})}
        info = SstableInfo(n, encode_full_key(1, b"k", n * E), encode_full_key(1, b"k", n * E), 100, 50,
                           n * E, n * E, 1, 0, (1,))
        v = apply(v, VersionDelta.commit(v, n * E, [info], table_watermarks=marks))
    before = v.table_watermarks[4]
    assert len(before.entries) == 3 and decode_version(encode_version(v)) == v
    with pytest.raises(InvalidArgumentError, match="epochs in"):   # only epochs the commit publishes
        VersionDelta.commit(v, 4 * E, (), table_watermarks={
            4: TableWatermarks().with_watermarks(3 * E, {0: (b"", b"9")})})
    with pytest.raises(InvalidArgumentError, match="shrinks"):
        VersionDelta.commit(v, 4 * E, (), table_watermarks={
            4: TableWatermarks().with_watermarks(4 * E, {0: (b"", b"0")})})
    with pytest.raises(InvalidArgumentError, match="only a commit"):
        apply(v, dataclasses.replace(VersionDelta.compaction(v, [1], {}, watermark=2 * E),
                                     table_watermarks={4: before}))
    folded = apply(v, VersionDelta.compaction(v, [1], {}, watermark=2 * E))   # safe_epoch 2E
    after = folded.table_watermarks[4]
    assert len(after.entries) == 2 and all(after.resolve(r) == before.resolve(r) for r in (2 * E, 3 * E, 4 * E))
    assert decode_version(encode_version(folded)) == folded


def test_a_damaged_record_in_a_checkpoint_is_corruption():
    v = HummockVersion.empty()
    marks = {4: TableWatermarks().with_watermarks(E, {0: (b"", b"x")})}
    v = apply(v, VersionDelta.commit(v, E, (), table_watermarks=marks))
    data = encode_version(v).replace(b'"78"', b'"7"')   # hi "x" -> odd-length hex
    from hummock.version_codec import ENVELOPE, checksum
    payload = data[ENVELOPE.size:]
    data = ENVELOPE.pack(b"HUMKVER1", 1, len(payload), checksum(payload)) + payload
    with pytest.raises(CorruptionError):
        decode_version(data)


# --- the store -------------------------------------------------------------------------------

def test_reads_hide_at_once_and_older_reads_stay_exact(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(), E)
        store.ingest_batch(2, rows(), E)
        store.commit_epoch(E)
        with store.snapshot(E) as snap:
            store.ingest_batch(1, [(key(0, 3), b"new"), (key(0, 15), b"new")], 2 * E)
            store.update_table_watermarks(1, 2 * E, {0: b"0010", 1: (b"0005", b"0007")})
            # uncommitted: hidden at once at 2E (also this epoch's writes), not at E
            assert store.get(1, key(0, 3), 2 * E) is None and store.get(1, key(0, 3), E) == b"v0.3"
            assert store.get(1, key(0, 15), 2 * E) == b"new"
            visible = {k for k, _ in store.iter(1, 2 * E)}
            expected = {k for k, _ in rows()} - {key(0, i) for i in range(10)} - {key(1, 5), key(1, 6)}
            assert visible == expected
            assert [k for k, _ in store.iter(1, 2 * E, reverse=True)] == sorted(expected, reverse=True)
            assert store.multi_get(1, [key(1, 4), key(1, 5), key(1, 7)], 2 * E) == [b"v1.4", None, b"v1.7"]
            assert len(list(store.iter(1, E))) == 60 and len(list(store.iter(2, 2 * E))) == 60
            store.commit_epoch(2 * E)
            store.ingest_batch(1, [(key(0, 1), b"late")], 3 * E)   # later writes below it: hidden
            assert store.get(1, key(0, 1), 3 * E) is None
            store.commit_epoch(3 * E)
            assert len(list(snap.iter(1))) == 60 and snap.get(1, key(0, 3)) == b"v0.3"
        assert {k for k, _ in store.iter(1, 3 * E)} == expected


def test_records_survive_reopen_and_reach_read_only_openers(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(), E)
        store.update_table_watermarks(1, E, {0: b"0010"})
        store.commit_epoch(E)
        with HummockStorage.open(url, options, read_only=True) as reader:
            assert len(list(reader.iter(1, E))) == 50
            store.update_table_watermarks(1, 2 * E, {1: b"0010"})
            store.commit_epoch(2 * E)
            assert len(list(reader.iter(1, 2 * E))) == 50          # before refresh: its version
            reader.refresh()
            assert len(list(reader.iter(1, 2 * E))) == 40 and reader.get(1, key(1, 3), 2 * E) is None
            store.truncate_table(1, 3 * E)
            store.update_table_watermarks(1, 4 * E, {2: b"0010"})   # uncommitted: lost on close
            store.commit_epoch(3 * E)
            reader.refresh()
            assert list(reader.iter(1, 3 * E)) == []
    with HummockStorage.open(url, options) as store:
        records = store.version().table_watermarks[1]
        assert records.latest == {0: (b"", b"0010"), 1: (b"", b"0010")}
        assert records.truncations == ((3 * E, 3 * E - 1),)
        assert list(store.iter(1, 3 * E)) == [] and store.get(1, key(2, 1), 5 * E) is None


def test_uncommitted_records_are_lost_with_a_crash_like_data(where):
    url, options = where
    store = HummockStorage.open(url, options)
    store.ingest_batch(1, rows(), E)
    store.commit_epoch(E)
    store.update_table_watermarks(1, 2 * E, {0: b"9999"})
    store.truncate_table(1, 2 * E)
    store.sync(2 * E)
    store.close()
    with HummockStorage.open(url, options) as store:
        assert len(list(store.iter(1, 2 * E))) == 60 and not store.table_watermarks(1)


def test_compaction_drops_hidden_keys_once_no_reader_needs_them(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(n=50), E)
        store.ingest_batch(2, rows(n=50), E)
        store.commit_epoch(E)
        snap = store.snapshot(E)
        store.update_table_watermarks(1, 2 * E, {v: b"0040" for v in (0, 1, 2)})
        store.commit_epoch(2 * E)
        store.compact_all()                     # the snapshot at E still reads them: kept
        assert len(raw_keys(store, 1)) == 150 and len(list(snap.iter(1))) == 150
        snap.release()
        store.ingest_batch(1, [(key(0, 45), b"x")], 3 * E)
        store.commit_epoch(3 * E)
        store.compact_all()
        assert sorted(raw_keys(store, 1)) == sorted(key(v, i) for v in (0, 1, 2) for i in range(40, 50))
        assert len(raw_keys(store, 2)) == 150
        assert {k for k, _ in store.iter(1, 3 * E)} == set(raw_keys(store, 1))
        assert store.get(1, key(0, 45), 3 * E) == b"x"


def test_truncate_drops_whole_ssts_and_keeps_later_writes(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(), E)
        store.commit_epoch(E)                          # an SST of table 1 only
        store.ingest_batch(1, rows(n=5), 2 * E)
        store.ingest_batch(2, rows(), 2 * E)           # an SST of both tables
        store.commit_epoch(2 * E)
        only_1 = [i.sst_id for i in store.version().all_ssts() if list(i.table_ids) == [1]]
        store.ingest_batch(1, [(key(0, 1), b"before")], 3 * E)
        store.truncate_table(1, 3 * E)
        store.ingest_batch(1, [(key(0, 2), b"after")], 3 * E)
        assert list(store.iter(1, 3 * E)) == [(key(0, 2), b"after")]
        assert store.get(1, key(0, 1), 3 * E) is None and store.get(1, key(0, 1), 2 * E) == b"v0.1"
        assert len(list(store.iter(1, 2 * E))) == 60
        store.commit_epoch(3 * E)
        ids = store.version().sst_ids()
        assert not ids & set(only_1) and store.min_readable_epoch == 3 * E
        assert store.stats()["truncated_ssts_dropped"] == len(only_1)
        assert list(store.iter(1, 3 * E)) == [(key(0, 2), b"after")]
        assert len(list(store.iter(2, 3 * E))) == 60
        store.compact_all()
        assert raw_keys(store, 1) == [key(0, 2)]


def test_a_snapshot_defers_the_removal_of_truncated_ssts(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(), E)
        store.commit_epoch(E)
        with store.snapshot(E) as snap:
            store.truncate_table(1, 2 * E)
            store.commit_epoch(2 * E)
            assert store.version().level_counts()[0] == 1 and len(list(snap.iter(1))) == 60
        store.commit_epoch(3 * E)                      # the next commit removes it
        assert store.version().level_counts()[0] == 0 and list(store.iter(1, 3 * E)) == []


def test_bad_arguments_raise_typed_errors_and_change_nothing(where):
    url, options = where
    with HummockStorage.open(url, options) as store:
        store.ingest_batch(1, rows(), 2 * E)
        store.update_table_watermarks(1, 5 * E, {0: (b"1", b"2")})
        store.seal_epoch(2 * E)
        before = store.table_watermarks(1)
        for args in [(-1, 4 * E, {0: b"a"}), (2**32, 4 * E, {0: b"a"}), (1, 4 * E + 1, {0: b"a"}),
                     (1, 2 * E, {0: b"a"}), (1, 4 * E, {0: (b"3", b"4")}), (1, 4 * E, {70000: b"a"}),
                     (1, 4 * E, {0: 5}), (1, 4 * E, [b"a"]), (1, E, {})]:
            with pytest.raises(InvalidArgumentError):
                store.update_table_watermarks(*args)
        with pytest.raises(InvalidArgumentError, match="epoch order"):
            store.update_table_watermarks(1, 4 * E, {5: b"a"})
        for args in [(1, 2 * E), ("1", 4 * E), (1, 4 * E + 7)]:
            with pytest.raises(InvalidArgumentError):
                store.truncate_table(*args)
        store.truncate_table(1, 6 * E)
        with pytest.raises(InvalidArgumentError, match="truncation epoch"):
            store.truncate_table(1, 4 * E)
        assert store.table_watermarks(1).entries == before.entries
    with HummockStorage.open(url, options, read_only=True) as reader:
        with pytest.raises(ReadOnlyError):
            reader.update_table_watermarks(1, 9 * E, {0: b"a"})
        with pytest.raises(ReadOnlyError):
            reader.truncate_table(1, 9 * E)
    store = HummockStorage.open(url, options)
    store.close()
    with pytest.raises(StoreClosedError):
        store.truncate_table(1, 9 * E)


@pytest.mark.parametrize("runner", ["thread", "workers"])
def test_every_runner_drops_what_watermarks_hide(tmp_path, runner):
    options = StorageOptions(compactor="none", vacuum_min_age_s=0, target_sst_size=4096, block_size=512,
                             compaction_workers=1 if runner == "workers" else 0)
    with HummockStorage.open(str(tmp_path), options.replace(compactor="local")) as store:
        _watermarked_history(store)
        store.compact_all()
        _check_compacted(store)


def test_spark_drops_what_watermarks_hide(spark, tmp_path):
    options = StorageOptions(compactor="spark", vacuum_min_age_s=0, target_sst_size=4096, block_size=512)
    with HummockStorage.open(str(tmp_path), options) as store:
        _watermarked_history(store)
        store.compact_all()
        _check_compacted(store)


def _watermarked_history(store):
    for n in range(1, 5):
        store.ingest_batch(1, rows(n=100), n * E)
        store.ingest_batch(2, rows(n=100), n * E)
        store.commit_epoch(n * E)
    store.update_table_watermarks(1, 5 * E, {0: b"0050", 1: (b"0020", None)})
    store.truncate_table(2, 5 * E)
    store.ingest_batch(2, [(key(2, 7), b"kept")], 5 * E)
    store.commit_epoch(5 * E)


def _check_compacted(store):
    left = sorted(set(raw_keys(store)))
    expected = sorted({b"\x00\x00\x00\x01" + key(0, i) for i in range(50, 100)}
                      | {b"\x00\x00\x00\x01" + key(1, i) for i in range(20)}
                      | {b"\x00\x00\x00\x01" + key(2, i) for i in range(100)} | {b"\x00\x00\x00\x02" + key(2, 7)})
    assert left == expected
    assert [k for k, _ in store.iter(1, 5 * E)] == [k[4:] for k in expected[:-1]]
    assert list(store.iter(2, 5 * E)) == [(key(2, 7), b"kept")]


def test_resolve_all_is_plain_data_for_other_processes():
    records = TableWatermarks().with_watermarks(E, {0: b"x"}).with_truncation(2 * E, 2 * E + 3)
    import pickle
    hide = resolve_all({3: records, 4: TableWatermarks()}, 2 * E | 0xFFFF)
    assert pickle.loads(pickle.dumps(hide)) == {3: (2 * E + 3, {0: (b"", b"x")})}
    assert resolve_all({3: records}, E - 1) == {}


JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**65), st.text(max_size=4),
                        st.sampled_from(["00", "ff", "zz", "0"]))
JSON_VALUES = st.recursive(JSON_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                   st.dictionaries(st.text(max_size=3), inner,
                                                                                   max_size=3)), max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(path=st.lists(st.integers(0, 5), max_size=6), value=JSON_VALUES)
def test_hostile_records_in_a_checkpoint_decode_or_raise_corruption(path, value):
    """A checksummed checkpoint whose watermark records were replaced anywhere by any JSON value
    either decodes to a sound version or raises CorruptionError -- nothing else."""
    import json

    from hummock.version_codec import ENVELOPE, checksum
    v = HummockVersion.empty()
    records = TableWatermarks().with_watermarks(E, {0: (b"", b"x"), 3: (b"a", None)}).with_truncation(E, E + 1)
    v = apply(v, VersionDelta.commit(v, E, (), table_watermarks={4: records}))
    payload = json.loads(encode_version(v)[ENVELOPE.size:])
    node, parent, slot = payload["table_watermarks"], payload, "table_watermarks"
    for step in path:
        if isinstance(node, list) and node:
            parent, slot, node = node, step % len(node), node[step % len(node)]
        elif isinstance(node, dict) and node:
            k = sorted(node)[step % len(node)]
            parent, slot, node = node, k, node[k]
    parent[slot] = value
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    data = ENVELOPE.pack(b"HUMKVER1", 1, len(raw), checksum(raw)) + raw
    try:
        decoded = decode_version(data)
    except CorruptionError:
        return
    assert decoded.problems() == []
