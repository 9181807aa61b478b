"""Prefix filters (docs/engine.md "Prefix filters", docs/format.md sections 4.3 and 6).

- The builder twins (``prefix_hashes``, ``build_prefix_filter``) agree byte for byte and never
  drop a key's prefix; bad arguments raise the same ``InvalidArgumentError`` in both.
- The SST meta's optional section round-trips, is absent when nothing is declared (older SSTs
  decode with no prefix filter) and is checked on decode (``CorruptionError``).
- The declaration lives in the version (``table_options`` delta, optional JSON field).
- On every store kind: an absent-prefix probe over 20 L0 sub-levels reads no block with a
  declaration and reads blocks without one; the declaration survives reopen; compaction outputs
  (thread, worker processes, Spark) carry the filter.
- Property: scans with filters return exactly what a model dict returns, whatever the
  declarations were when each SST was built; a filter says "no" only for SSTs truly lacking
  the prefix.
Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hummock.sstable._filter_py as pure_filter
from hummock import HummockStorage, StorageOptions
from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import prefix_end
from hummock.sstable.builder import SstableBuilderOptions, build_sstable, prefix_bits_per_key
from hummock.sstable.filter import FilterReader, key_hash
from hummock.sstable.meta import SstableMeta
from hummock.version import HummockVersion, VersionDelta, apply
from hummock.version_codec import decode_delta, decode_version, encode_delta, encode_version
from table_stores import opener
from twins import implementations

EPOCH = 1 << 16
SMALL = StorageOptions(compactor="none", block_size=1024, target_sst_size=64 * 1024,
                       block_cache_capacity=4 << 20, meta_cache_capacity=4 << 20, vacuum_min_age_s=0)
FILTER_IMPLS = implementations(pure_filter, "_filter")


def table(t: int) -> bytes:
    return t.to_bytes(4, "big")


# --- the builder twins ------------------------------------------------------------------------

user_keys = st.lists(st.tuples(st.integers(0, 3), st.binary(max_size=6)), max_size=80).map(
    lambda pairs: sorted(table(t) + k for t, k in pairs))
lens = st.dictionaries(st.integers(0, 3), st.integers(1, 4), max_size=4)


@given(user_keys, lens, st.integers(1, 64))
def test_twins_agree_and_hold_every_declared_prefix(keys, prefix_lens, bits):
    outputs = {impl.__name__: (tuple(impl.prefix_hashes(keys, prefix_lens)),
                               impl.build_prefix_filter(keys, prefix_lens, bits)) for impl in FILTER_IMPLS}
    assert len(set(outputs.values())) == 1
    hashes, data = next(iter(outputs.values()))
    reader = FilterReader(data)
    expected = []
    for k in keys:   # the distinct prefixes, in order: consecutive duplicates hashed once
        n = prefix_lens.get(int.from_bytes(k[:4], "big"))
        if n is not None and len(k) >= 4 + n and (not expected or expected[-1] != k[:4 + n]):
            expected.append(k[:4 + n])
    assert list(hashes) == [key_hash(p) for p in expected]
    assert all(reader.may_contain(p) for p in expected)   # no false negative
    assert reader.num_keys == len(set(hashes))


@pytest.mark.parametrize("args", [
    ("not a list", {}), ([b"\0\0\0\1a"], []), ([b"\0\0\0\1a"], {1: 0}), ([b"\0\0\0\1a"], {1: 65536}),
    ([b"\0\0\0\1a"], {-1: 2}), ([b"\0\0\0\1a"], {1: True}), ([b"abc"], {1: 1}), ([b"\0\0\0\1a", "s"], {1: 1}),
])
def test_twins_refuse_bad_arguments_alike(args):
    messages = set()
    for impl in FILTER_IMPLS:
        for fn in (impl.prefix_hashes, impl.build_prefix_filter):
            with pytest.raises(InvalidArgumentError) as err:
                fn(*args)
            messages.add(str(err.value))
    assert len(messages) == 1


# --- the SST format ---------------------------------------------------------------------------

def entries(t: int, keys, epoch=EPOCH):
    return [(table(t) + k + struct.pack(">Q", 2**64 - 1 - epoch), b"v") for k in sorted(keys)]


def test_meta_carries_prefix_lens_of_its_tables_only_and_round_trips():
    opts = SstableBuilderOptions(block_size=256, prefix_lens={1: 2, 9: 3})
    data, info = build_sstable(entries(1, [b"aa1", b"aa2", b"ab", b"c"]) + entries(2, [b"zz"]), options=opts)
    meta = SstableMeta.decode(data[info.meta_offset:-32], object="t")
    assert meta.prefix_lens == {1: 2}   # table 9 holds no key here; table 2 declares nothing
    assert SstableMeta.decode(meta.encode(), object="t").prefix_lens == {1: 2}
    reader = FilterReader(meta.prefix_filter)
    assert reader.num_keys == 2   # aa, ab ("c" is shorter than the prefix)
    assert reader.may_contain(table(1) + b"aa") and reader.may_contain(table(1) + b"ab")
    assert FilterReader(meta.prefix_filter).num_bits == 64   # the minimum at 2 prefixes x 20 bits
    assert prefix_bits_per_key(10) == 20 and prefix_bits_per_key(40) == 64


def test_without_a_declaration_the_sst_is_byte_identical_to_the_old_format():
    rows = entries(1, [b"a", b"b"])
    plain, _ = build_sstable(rows)
    other, _ = build_sstable(rows, options=SstableBuilderOptions(prefix_lens={7: 1}))
    assert plain == other
    data, info = build_sstable(rows)
    meta = SstableMeta.decode(data[info.meta_offset:-32], object="t")
    assert meta.prefix_lens == {} and meta.prefix_filter == b""


def _meta_with_section(section: bytes) -> bytes:
    data, info = build_sstable(entries(1, [b"a"]))
    return data[info.meta_offset:-32] + section


@pytest.mark.parametrize("section, message", [
    (struct.pack("<I", 0), "without tables"),
    (struct.pack("<III", 2, 5, 1) + struct.pack("<II", 4, 1), "not increasing"),
    (struct.pack("<III", 1, 5, 0), "out of range"),
    (struct.pack("<III", 1, 5, 70000), "out of range"),
    (struct.pack("<III", 1, 5, 2) + struct.pack("<I", 99), "truncated"),
    (struct.pack("<I", 1000), "larger than the meta"),
    (b"\x01", "truncated"),
])
def test_a_damaged_prefix_section_is_corruption(section, message):
    with pytest.raises(CorruptionError, match=message):
        SstableMeta.decode(_meta_with_section(section), object="t")


def test_builder_options_check_prefix_lens():
    assert SstableBuilderOptions(prefix_lens={3: 1, 1: 2}).prefix_lens == ((1, 2), (3, 1))
    for bad in ({1: 0}, {1: 1 << 16}, {2**32: 1}, [(1, 1), (1, 2)], [1], "x", {1: 1.5}):
        with pytest.raises(InvalidArgumentError):
            SstableBuilderOptions(prefix_lens=bad)


# --- the version --------------------------------------------------------------------------------

def test_the_declaration_is_a_version_delta_and_an_optional_json_field():
    v0 = HummockVersion.empty()
    assert b"table_prefix_lens" not in encode_version(v0)   # older readers' layout when nothing is declared
    delta = VersionDelta.table_options(v0, {5: 7, 2: 3})
    v1 = apply(v0, delta)
    assert v1.table_prefix_lens == ((2, 3), (5, 7)) and v1.prefix_len_map == {2: 3, 5: 7}
    assert decode_version(encode_version(v1)) == v1
    assert decode_delta(encode_delta(delta)) == delta
    v2 = apply(v1, VersionDelta.reserve_sst_ids(v1, 4))   # other deltas carry it forward
    assert v2.table_prefix_lens == v1.table_prefix_lens
    assert apply(v2, VersionDelta.table_options(v2, {})).table_prefix_lens == ()
    with pytest.raises(InvalidArgumentError):
        VersionDelta.table_options(v0, {5: 0})
    import dataclasses
    with pytest.raises(InvalidArgumentError):   # only a table_options delta may carry it
        apply(v0, dataclasses.replace(VersionDelta.reserve_sst_ids(v0, 1), table_prefix_lens=((1, 1),)))


def test_a_damaged_json_declaration_is_corruption():
    import json
    from hummock.version_codec import VERSION_MAGIC, _seal, _version_json
    v = apply(HummockVersion.empty(), VersionDelta.table_options(HummockVersion.empty(), {1: 2}))
    for bad in ([[1, 0]], [[2, 1], [1, 1]], [[1]], "x", [[1, 2, 3]]):
        payload = _version_json(v)
        payload["table_prefix_lens"] = bad
        with pytest.raises(CorruptionError):
            decode_version(_seal(VERSION_MAGIC, json.loads(json.dumps(payload))))


# --- the engine, on every store -----------------------------------------------------------------

PLEN = 4


def _fill(store, sub_levels: int = 20, rows: int = 300) -> int:
    """``sub_levels`` commits of one SST each over the whole key range of table 1 (even 4-byte
    prefixes, two rows each); returns the read epoch."""
    epoch = EPOCH
    for sub in range(sub_levels):
        keys = sorted((2 * i).to_bytes(PLEN, "big") + bytes((sub, j)) for i in range(rows) for j in range(2))
        store.ingest_batch(1, [(k, b"v%d" % sub) for k in keys], epoch)
        store.checkpoint(epoch)
        epoch += EPOCH
    return epoch - EPOCH


def _block_lookups(store) -> int:
    stats = store.stats()["block_cache"]
    return stats["hits"] + stats["misses"]


@pytest.mark.parametrize("kind", ["memory", "local", "s3"])
def test_an_absent_prefix_over_20_sub_levels_reads_no_block(kind, tmp_path, request):
    open_store = opener(kind, tmp_path, request, SMALL)
    with open_store() as store:
        store.set_table_options(1, prefix_len=PLEN)
        epoch = _fill(store)
        assert len(store.version().l0) == 20
        assert [list(store.iter(1, epoch, prefix=(2 * i).to_bytes(PLEN, "big")))[:1] for i in range(3)] == [
            [((2 * i).to_bytes(PLEN, "big") + bytes((0, 0)), b"v0")] for i in range(3)]
        before = _block_lookups(store)
        for i in range(200):   # odd prefixes are absent; also as start/end ranges and reversed
            p = (2 * i + 1).to_bytes(PLEN, "big")
            assert list(store.iter(1, epoch, prefix=p)) == []
            assert list(store.iter(1, epoch, p + b"\x00", prefix_end(p), reverse=True)) == []
        assert _block_lookups(store) - before <= 1   # at most a rare false positive (~0.01% per SST)
        store.set_table_options(1, prefix_len=None)   # control: without it every SST opens a block
        before = _block_lookups(store)
        assert list(store.iter(1, epoch, prefix=(1).to_bytes(PLEN, "big"))) == []
        assert _block_lookups(store) - before >= 20
    with open_store() as store:   # the declaration was dropped, and that too is persisted
        assert store.table_options(1) == {"prefix_len": None}


def test_the_declaration_survives_reopen_and_reaches_readers(tmp_path):
    url = str(tmp_path / "db")
    with HummockStorage.open(url, SMALL) as store:
        store.set_table_options(1, prefix_len=PLEN)
        store.set_table_options(2, prefix_len=1)
        version_id = store.version().id
        store.set_table_options(2, prefix_len=1)   # unchanged: no delta
        assert store.version().id == version_id
        epoch = _fill(store, sub_levels=3)
    with HummockStorage.open(url, SMALL) as store, HummockStorage.open(url, SMALL, read_only=True) as reader:
        assert store.table_options(1) == {"prefix_len": PLEN} and store.table_options(2) == {"prefix_len": 1}
        before = _block_lookups(reader)
        assert list(reader.iter(1, epoch, prefix=(3).to_bytes(PLEN, "big"))) == []
        assert _block_lookups(reader) == before
        with pytest.raises(Exception, match="read_only"):
            reader.set_table_options(1, prefix_len=2)


@pytest.mark.parametrize("bad", [0, 1 << 16, -1, True, 1.5, "4"])
def test_set_table_options_refuses_bad_lengths(bad):
    with HummockStorage.open("memory://", SMALL) as store:
        with pytest.raises(InvalidArgumentError):
            store.set_table_options(1, prefix_len=bad)
        with pytest.raises(InvalidArgumentError):
            store.set_table_options(-1, prefix_len=4)


def test_staging_and_spilled_ssts_are_skipped_too():
    with HummockStorage.open("memory://", SMALL.replace(shared_buffer_capacity=64 * 1024)) as store:
        store.set_table_options(1, prefix_len=PLEN)
        for n in range(1, 6):
            keys = sorted((2 * i).to_bytes(PLEN, "big") + bytes((n,)) for i in range(400))
            store.ingest_batch(1, [(k, bytes(40)) for k in keys], n * EPOCH)
            store.sync(n * EPOCH)   # staging SSTs, not committed
        assert store.stats()["staging_ssts"] >= 5
        before = _block_lookups(store)
        assert list(store.iter(1, 5 * EPOCH, prefix=(5).to_bytes(PLEN, "big"))) == []
        assert _block_lookups(store) == before
        assert len(list(store.iter(1, 5 * EPOCH, prefix=(6).to_bytes(PLEN, "big")))) == 5


def _prefix_lens_of_outputs(store) -> list:
    version = store.version()
    return [store._open_sst(info).prefix_lens for level in version.levels for info in level.ssts]


def _compacted_probe_reads(store, epoch) -> int:
    before = _block_lookups(store)
    for i in range(50):
        assert list(store.iter(1, epoch, prefix=(2 * i + 1).to_bytes(PLEN, "big"))) == []
    return _block_lookups(store) - before


@pytest.mark.parametrize("workers", [0, 1])
def test_compaction_outputs_carry_the_filter(tmp_path, workers):
    options = SMALL.replace(compactor="local", compaction_workers=workers, target_sst_size=4 * 1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        store.set_table_options(1, prefix_len=PLEN)
        epoch = _fill(store, sub_levels=6)
        store.compact_all()
        assert not store.version().l0
        lens = _prefix_lens_of_outputs(store)
        assert len(lens) > 1 and all(x == {1: PLEN} for x in lens)
        assert _compacted_probe_reads(store, epoch) <= 1
        assert len(list(store.iter(1, epoch, prefix=(8).to_bytes(PLEN, "big")))) == 12


def test_spark_compaction_outputs_carry_the_filter(spark, tmp_path):
    options = SMALL.replace(compactor="spark", target_sst_size=4 * 1024)
    with HummockStorage.open(str(tmp_path / "db"), options) as store:
        store.set_table_options(1, prefix_len=PLEN)
        epoch = _fill(store, sub_levels=4)
        store.compact_all()
        assert not store.version().l0
        lens = _prefix_lens_of_outputs(store)
        assert lens and all(x == {1: PLEN} for x in lens)
        assert _compacted_probe_reads(store, epoch) <= 1


# --- property: filters only ever skip SSTs that lack the prefix ------------------------------------

small_keys = st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\xff"]), max_size=5).map(b"".join)
write = st.tuples(st.just("write"), st.sampled_from([1, 1, 2]),
                 st.lists(st.tuples(small_keys, st.one_of(st.none(), st.binary(max_size=2))), min_size=4, max_size=16))
_STEPS = {"write": write,
          "declare": st.tuples(st.just("declare"), st.sampled_from([1, 2]), st.one_of(st.none(), st.integers(1, 3))),
          "compact": st.tuples(st.just("compact"), st.none(), st.none())}
step = st.sampled_from(["write"] * 6 + ["declare", "compact"]).flatmap(_STEPS.__getitem__)
probe_prefix = st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\xff"]), min_size=1, max_size=5).map(b"".join)
probe = st.tuples(st.sampled_from([1, 1, 2]), probe_prefix, st.one_of(st.none(), small_keys),
                  st.one_of(st.none(), small_keys), st.booleans())


def _model_scan(model: dict, t: int, start, end, prefix, reverse):
    rows = sorted((k, v) for (tt, k), v in model.items() if tt == t and v is not None
                  and (start is None or k >= start) and (end is None or k < end)
                  and (prefix is None or k.startswith(prefix)))
    return rows[::-1] if reverse else rows


@settings(max_examples=40)
@given(st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(1, 3))).map(lambda d: {1: d[0], 2: d[1]}),
       st.lists(step, min_size=6, max_size=16),
       st.lists(probe, min_size=1, max_size=30))
def test_prefix_scans_match_a_model_dict(declared, steps, probes):
    """Declarations (initial, then changed between writes), writes (one L0 sub-level each) and
    compactions; then scans by prefix and by range agree with the model. The probes' SST skips
    are what is under test (``test_the_model_test_skips_ssts`` checks they happen)."""
    model: dict = {}
    with HummockStorage.open("memory://", SMALL.replace(block_size=256)) as store:
        for t, n in declared.items():
            store.set_table_options(t, prefix_len=n)   # n None: none
        epoch = 0
        for kind, t, arg in steps:
            if kind == "write":
                epoch += EPOCH
                batch = dict(arg)
                store.ingest_batch(t, sorted(batch.items()), epoch)
                store.checkpoint(epoch)
                model.update({(t, k): v for k, v in batch.items()})
            elif kind == "declare":
                store.set_table_options(t, prefix_len=arg)
            else:
                store.compact_all()
        read = max(epoch, EPOCH)
        for t, prefix, start, end, reverse in probes:
            got = list(store.iter(t, read, start, end, prefix=prefix, reverse=reverse))
            assert got == _model_scan(model, t, start, end, prefix, reverse)
            got = list(store.iter(t, read, prefix, prefix_end(prefix), reverse=reverse))
            assert got == _model_scan(model, t, None, None, prefix, reverse)
            low = prefix + (start or b"")   # a range that may or may not lie within one prefix
            got = list(store.iter(t, read, low, end, reverse=reverse))
            assert got == _model_scan(model, t, low, end, None, reverse)
        for t in (1, 2):   # the batched form: every probe's prefix in one call
            wanted = [prefix for tt, prefix, *_ in probes if tt == t] + [b""]
            keys, values, ends = store.scan_prefixes(t, read, wanted)
            got, begin = [], 0
            for end in ends:
                got.append(list(zip(keys[begin:end], values[begin:end])))
                begin = end
            assert got == [_model_scan(model, t, None, None, prefix, False) for prefix in wanted]
        for info in store.version().all_ssts():   # "no" only where no key has the prefix
            sst = store._open_sst(info)
            present = {k for k, _ in sst.scan()}
            for t, prefix, *_ in probes:
                if not sst.may_contain_prefix(t, prefix):
                    assert not any(k[:4] == table(t) and k[4:-8].startswith(prefix) for k in present)


def test_the_model_test_skips_ssts(monkeypatch):
    """The property above is only as good as its probes: most runs must drop SSTs by filter."""
    import hummock._readpath_py as pure_readpath
    counts = {"asked": 0, "skipped": 0}
    original = pure_readpath.SstReader.prefix_excludes

    def counting(self, probe):
        skipped = original(self, probe)
        counts["asked"] += 1
        counts["skipped"] += skipped
        return skipped
    monkeypatch.setattr(pure_readpath.SstReader, "prefix_excludes", counting)
    monkeypatch.setattr("hummock.read_view.ReadState", pure_readpath.ReadState)
    monkeypatch.setattr("hummock.storage.ReadState", pure_readpath.ReadState)
    monkeypatch.setattr("hummock.storage.VersionView", pure_readpath.VersionView)
    monkeypatch.setattr("hummock.read_side.ReadState", pure_readpath.ReadState)
    monkeypatch.setattr("hummock.read_side.SstReader", pure_readpath.SstReader)
    monkeypatch.setattr("hummock.read_side.ReadHandle", pure_readpath.ReadHandle)
    test_prefix_scans_match_a_model_dict()
    assert counts["skipped"] >= 10 and counts["asked"] > counts["skipped"]


# --- imms: the shared buffer's batches screened by a prefix filter (native scans) ----------------

imm_key = st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\xff"]), max_size=4).map(b"".join)
imm_batch = st.lists(st.tuples(imm_key, st.one_of(st.none(), st.binary(max_size=2))), min_size=40, max_size=120)


@settings(max_examples=40)
@given(st.integers(1, 3), st.integers(1, 3), st.lists(imm_batch, min_size=1, max_size=4),
       st.lists(probe_prefix, min_size=1, max_size=20))
def test_imm_prefix_filters_only_skip_imms_without_the_prefix(first, second, batches, prefixes):
    """Batches of one epoch stay imms (spill offsets, nothing synced); prefix scans agree with
    the model under one declared length, then under another (the imms' filters are rebuilt
    for it), and a scan that is not confined to one prefix is never screened."""
    model: dict = {}
    with HummockStorage.open("memory://", SMALL) as store:
        store.set_table_options(1, prefix_len=first)
        for batch in batches:
            batch = dict(batch)
            store.ingest_batch(1, sorted(batch.items()), EPOCH)
            model.update({(1, k): v for k, v in batch.items()})
        for n in (first, second):
            store.set_table_options(1, prefix_len=n)
            for prefix in prefixes:
                assert list(store.iter(1, EPOCH, prefix=prefix)) == _model_scan(model, 1, None, None, prefix, False)
                assert list(store.iter(1, EPOCH, prefix, prefix_end(prefix), reverse=True)) == \
                    _model_scan(model, 1, None, None, prefix, True)
                assert list(store.iter(1, EPOCH, prefix[:1], None)) == _model_scan(model, 1, prefix[:1], None,
                                                                                  None, False)
            keys, values, ends = store.scan_prefixes(1, EPOCH, prefixes)   # batched, fast paths included
            begin = 0
            for prefix, end in zip(prefixes, ends):
                assert list(zip(keys[begin:end], values[begin:end])) == _model_scan(model, 1, None, None, prefix,
                                                                                    False)
                begin = end


def test_a_confined_native_scan_builds_and_uses_the_imm_prefix_filter():
    with HummockStorage.open("memory://", SMALL) as store:
        store.set_table_options(1, prefix_len=PLEN)
        keys = sorted((2 * i).to_bytes(PLEN, "big") + bytes((j,)) for i in range(200) for j in range(2))
        store.ingest_batch(1, [(k, b"v") for k in keys], EPOCH)
        assert list(store.iter(1, EPOCH, prefix=(3).to_bytes(PLEN, "big"))) == []
        assert len(list(store.iter(1, EPOCH, prefix=(4).to_bytes(PLEN, "big")))) == 2
        [imm] = store._state.imms[1]
        if type(store._state).__module__.startswith("native."):
            n, flt = imm.prefix_filter
            assert n == PLEN and flt.may_contain((4).to_bytes(PLEN, "big"))
            assert flt.num_keys == 200   # distinct prefixes, not keys
        else:   # the pure read path does not screen imms (a pure hash costs more than the search)
            assert imm.prefix_filter is None


def test_scan_prefixes_checks_every_argument_before_reading():
    with HummockStorage.open("memory://", SMALL) as store:
        store.ingest_batch(1, [(b"ab", b"1"), (b"ac", b"2"), (b"b", b"3")], EPOCH)
        assert store.scan_prefixes(1, EPOCH, [b"a", bytearray(b"b"), b"c", b""]) == (
            [b"ab", b"ac", b"b", b"ab", b"ac", b"b"], [b"1", b"2", b"3", b"1", b"2", b"3"], [2, 3, 3, 6])
        assert store.scan_prefixes(1, EPOCH, iter([])) == ([], [], [])
        for args, message in [((1, EPOCH, [b"a", None]), "prefix must be bytes, got NoneType"),
                              ((1, EPOCH, [b"a", "b"]), "prefix must be bytes, got str"),
                              ((1, EPOCH, 5), "prefixes must be an iterable of bytes, got int"),
                              ((-1, EPOCH, [b"a"]), "table_id must be an int"),
                              ((1, -1, [b"a"]), "epoch must be an int")]:
            with pytest.raises(InvalidArgumentError, match=message):
                store.scan_prefixes(*args)
        kept = store.scan_prefixes
    with pytest.raises(Exception, match="closed"):
        kept(1, EPOCH, [b"a"])


def test_scan_prefixes_of_imm_only_keys_honours_deletes_and_watermarks():
    """A prefix found in one imm alone is copied straight out by the native path: its deletes
    are no rows, and a table watermark over the imm's keys still hides them."""
    with HummockStorage.open("memory://", SMALL) as store:
        store.set_table_options(1, prefix_len=3)
        vnode0 = [b"\x00\x00" + bytes((i,)) + b"k" for i in range(100)]
        store.ingest_batch(1, [(k, None if k[2] % 3 == 0 else b"v") for k in vnode0], EPOCH)
        got = store.scan_prefixes(1, EPOCH, [k[:3] for k in vnode0])
        live = [k for k in vnode0 if k[2] % 3]
        assert got[0] == live and got[1] == [b"v"] * len(live)
        store.update_table_watermarks(1, EPOCH, {0: b"\x32"})   # hide vnode 0's keys below 0x32
        keys, _, ends = store.scan_prefixes(1, EPOCH, [k[:3] for k in vnode0])
        assert keys == [k for k in live if k[2] >= 0x32]
        assert keys == [k for k, _ in store.iter(1, EPOCH, b"\x00\x00", b"\x00\x01")]
