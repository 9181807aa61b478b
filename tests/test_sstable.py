"""SSTs: builder and reader against a sorted-list model on every object store, native vs pure
identical bytes, the golden SST file, and the corruption sweep.

Model: the list of ``(full_key, value_or_None)`` the SST was built from, sorted by
``full_key_sort_key``. ``get(user_key, epoch)`` must return the first model entry at or after
``user_key || inverted(epoch)`` when it has that user key.
"""

import bisect
import importlib
import os
import pathlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import _twins
from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import MAX_EPOCH, encode_full_key, full_key_sort_key
from hummock.object_store import MemoryObjectStore
from hummock.sstable import _block_py, _filter_py, builder as builder_module
from hummock.sstable.builder import SstableBuilder, SstableBuilderOptions, build_sstable
from hummock.sstable.cache import LruCache
from hummock.sstable.meta import SstableInfo, SstableMeta, sst_object_path
from hummock.sstable.reader import Sstable
from hummock.value import encode_value

from strategies import entry_lists

SMALL_BLOCKS = SstableBuilderOptions(block_size=256, restart_interval=4)
GOLDEN = pathlib.Path(__file__).parent / "golden" / "sst_v1.sst"
GOLDEN_V2 = pathlib.Path(__file__).parent / "golden" / "sst_v2.sst"


def model_get(entries, user_key, epoch):
    sort_keys = [full_key_sort_key(k) for k, _ in entries]
    pos = bisect.bisect_left(sort_keys, full_key_sort_key(user_key + (MAX_EPOCH - epoch).to_bytes(8, "big")))
    if pos < len(entries) and entries[pos][0][:-8] == user_key:
        return MAX_EPOCH - int.from_bytes(entries[pos][0][-8:], "big"), entries[pos][1]
    return None


def upload(store, entries, sst_id=1, options=SMALL_BLOCKS):
    data, info = build_sstable(entries, sst_id, options)
    store.upload(info.object_path, data)
    return data, info


def check_against_model(sst: Sstable, entries, rng: random.Random, probes: int = 30):
    keys = [k for k, _ in entries]
    tagged = [encode_value(v) for _, v in entries]
    assert list(sst.scan()) == list(zip(keys, tagged))
    assert list(sst.scan(reverse=True)) == list(zip(keys, tagged))[::-1]
    for _ in range(probes):
        uk = rng.choice(keys)[:-8] if rng.random() < 0.8 else encode_full_key(1, rng.randbytes(2), 0)[:-8]
        epoch = rng.choice([0, 1, 2, 3, 5, 2**16, MAX_EPOCH])
        assert sst.get(uk, epoch) == model_get(entries, uk, epoch)
        lo, hi = sorted(rng.sample(keys + [encode_full_key(1, rng.randbytes(3), 7)], 2), key=full_key_sort_key)
        start = None if rng.random() < 0.2 else lo
        end = None if rng.random() < 0.2 else hi
        sort_keys = [full_key_sort_key(k) for k in keys]
        i = 0 if start is None else bisect.bisect_left(sort_keys, full_key_sort_key(start))
        j = len(keys) if end is None else bisect.bisect_left(sort_keys, full_key_sort_key(end))
        expected = list(zip(keys, tagged))[i:max(i, j)]
        assert list(sst.scan(start, end)) == expected
        assert list(sst.scan(start, end, reverse=True)) == expected[::-1]
    it = sst.iter()
    it.seek_to_first()
    walked = []
    while it.is_valid():
        walked.append(it.key())
        it.next()
    assert walked == keys
    it.seek_to_last()
    walked = []
    while it.is_valid():
        walked.append(it.key())
        it.prev()
    assert walked == keys[::-1]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(entries=entry_lists(max_size=80), seed=st.integers(0, 2**32))
def test_sst_matches_model_on_every_store(object_store, entries, seed):
    data, info = upload(object_store, entries, sst_id=seed % 1000)
    assert info.key_count == len(entries) and info.file_size == len(data)
    assert info.smallest_key == entries[0][0] and info.largest_key == entries[-1][0]
    assert info.tombstone_count == sum(v is None for _, v in entries)
    assert list(info.table_ids) == sorted({int.from_bytes(k[:4], "big") for k, _ in entries})
    block_cache = LruCache(1 << 20)
    for opened in (Sstable.open(object_store, info, block_cache=block_cache),
                   Sstable.open(object_store, info.sst_id, meta_cache=LruCache(1 << 20))):
        check_against_model(opened, entries, random.Random(seed))
    block_cache._check()
    object_store.delete(info.object_path)


def test_blocks_never_span_two_tables_and_respect_size():
    entries = [(encode_full_key(t, b"k%05d" % i, 9), b"x" * 50) for t in (1, 2, 3) for i in range(300)]
    data, info = build_sstable(entries, 5, SstableBuilderOptions(block_size=4096))
    store = MemoryObjectStore()
    store.upload(info.object_path, data)
    sst = Sstable.open(store, info)
    for i in range(sst.block_count):
        it = sst.block(i).iterator()
        it.seek_to_first()
        tables = set()
        while it.is_valid():
            tables.add(it.key()[:4])
            it.next()
        assert len(tables) == 1
        assert len(sst.block(i)) < 4096 + 100, "a block is cut once it reaches block_size"
    assert info.table_ids == (1, 2, 3)


def test_native_and_pure_build_identical_bytes(monkeypatch):
    if _twins.pure_python_forced():
        pytest.skip("HUMMOCK_PURE_PYTHON=1: only the twin is under test in this run (the golden file "
                    "test pins the bytes in both runs)")
    rng = random.Random(4)
    entries = sorted({(encode_full_key(rng.choice([1, 2]), rng.randbytes(rng.randrange(6)), rng.randrange(4)),
                       rng.choice([None, b"", rng.randbytes(rng.randrange(300))])) for _ in range(3000)},
                     key=lambda kv: full_key_sort_key(kv[0]))
    dedup = {}
    for k, v in entries:
        dedup.setdefault(k, v)
    entries = sorted(dedup.items(), key=lambda kv: full_key_sort_key(kv[0]))
    options = SstableBuilderOptions(block_size=1024, prefix_lens={1: 2})   # table 2: no prefix filter
    native_bytes, native_info = build_sstable(entries, 3, options)
    monkeypatch.setattr(builder_module, "BlockBuilder", _block_py.BlockBuilder)
    monkeypatch.setattr(builder_module, "build_filter_from_hashes", _filter_py.build_filter_from_hashes)
    pure_bytes, pure_info = build_sstable(entries, 3, options)
    assert native_bytes == pure_bytes and native_info == pure_info
    importlib.import_module("native._block")  # the native path really was the one compared


def test_builder_contract():
    builder = SstableBuilder(1)
    with pytest.raises(InvalidArgumentError):
        builder.finish()
    builder.add(encode_full_key(1, b"b", 1), b"v")
    with pytest.raises(InvalidArgumentError):
        builder.add(encode_full_key(1, b"a", 1), b"v")
    info = builder.finish()
    with pytest.raises(InvalidArgumentError):
        builder.finish()
    assert SstableInfo.from_dict(info.to_dict()) == info
    with pytest.raises(InvalidArgumentError):
        SstableBuilderOptions(compression="zstd")
    assert sst_object_path(7) == "sst/00000000000000000007.sst"


def test_streaming_to_store_and_abort(object_store):
    options = SstableBuilderOptions(block_size=512)
    builder = SstableBuilder.to_store(object_store, 42, options)
    entries = [(encode_full_key(1, b"%06d" % i, 3), b"v" * 40) for i in range(500)]
    for k, v in entries:
        builder.add(k, v)
    info = builder.finish()
    check_against_model(Sstable.open(object_store, info), entries, random.Random(1), probes=5)
    aborted = SstableBuilder.to_store(object_store, 43, options)
    aborted.add(entries[0][0], b"x")
    aborted.abort()
    assert not object_store.exists(sst_object_path(43))


# --- golden file ------------------------------------------------------------------------------

def golden_entries():
    out = []
    for table_id in (1, 7):
        for i in range(120):
            for epoch in (3 << 16, 1 << 16):
                value = None if i % 11 == 0 and epoch == 3 << 16 else b"value-%d-%d" % (table_id, i) * (1 + i % 5)
                out.append((encode_full_key(table_id, b"key\x00%04d" % i, epoch), value))
    return out


def test_golden_sst_file():
    """The SST format is frozen: the committed file must decode to the known entries and be
    rebuilt byte for byte. HUMMOCK_UPDATE_GOLDEN=1 rewrites it after a deliberate format change
    (a new format version gets a new file; the older files stay, read as before)."""
    entries = golden_entries()
    data, info = build_sstable(entries, 9, SstableBuilderOptions(block_size=1024, restart_interval=8))
    if os.environ.get("HUMMOCK_UPDATE_GOLDEN") == "1":
        GOLDEN_V2.write_bytes(data)
    golden = GOLDEN_V2.read_bytes()
    assert data == golden, "the SST byte layout drifted from tests/golden/sst_v2.sst"
    # the live counts: per table, user keys whose newest version is a put (every 11th key of
    # the epoch-3 versions is a delete; each key has three versions)
    expected = tuple(sum(1 for k, v in entries if k[:4] == t.to_bytes(4, "big") and
                         MAX_EPOCH - int.from_bytes(k[-8:], "big") == 3 << 16 and v is not None)
                     for t in info.table_ids)
    assert info.live_counts == expected and all(expected)
    for path, live in ((GOLDEN, None), (GOLDEN_V2, expected)):   # version 1 files stay readable
        store = MemoryObjectStore()
        store.upload(sst_object_path(9), path.read_bytes())
        sst = Sstable.open(store, 9)
        assert [k for k, _ in sst.scan()] == [k for k, _ in entries]
        assert sst.get(encode_full_key(7, b"key\x000011", 0)[:-8], 3 << 16) == (3 << 16, None)
        assert sst.get(encode_full_key(7, b"key\x000011", 0)[:-8], 2 << 16) == (1 << 16, b"value-7-11" * 2)
        assert sst.meta.live_counts == live


# --- corruption sweep ---------------------------------------------------------------------------

def _read_everything(store, sst_id, entries):
    """Open and read the whole SST; return the observations (or raise CorruptionError)."""
    sst = Sstable.open(store, sst_id)
    scanned = list(sst.scan())
    gets = [sst.get(k[:-8], MAX_EPOCH - int.from_bytes(k[-8:], "big")) for k, _ in entries]
    return scanned, gets


@pytest.mark.parametrize("size, positions", [("small", None), ("large", 2000)])
def test_corruption_sweep(size, positions):
    """Flip every byte of a small SST (or 2,000 sampled bytes of a large one): each flip is
    detected (CorruptionError) or provably harmless (every read still matches the model)."""
    count = 40 if size == "small" else 4000
    entries = [(encode_full_key(1 + i // 3000, b"k%06d" % i, 5), None if i % 9 == 0 else b"v%d" % i * 3)
               for i in range(count)]
    data, info = build_sstable(entries, 1, SstableBuilderOptions(block_size=512 if size == "small" else 4096))
    store = MemoryObjectStore()
    expected = _read_everything(_single(store, data), 1, entries)
    where = range(len(data)) if positions is None else random.Random(7).sample(range(len(data)), positions)
    detected = harmless = 0
    for i in where:
        corrupted = bytearray(data)
        corrupted[i] ^= 0xFF if i % 2 else 0x01
        try:
            observed = _read_everything(_single(store, bytes(corrupted)), 1, entries)
        except CorruptionError:
            detected += 1
            continue
        assert observed == expected, f"flip at byte {i} changed what reads return without being detected"
        harmless += 1
    assert detected + harmless == len(where) and detected > 0


def _single(store, data):
    store.upload(sst_object_path(1), data)
    return store


def test_specific_corruptions_name_object_and_offset():
    entries = [(encode_full_key(1, b"k%03d" % i, 5), b"v") for i in range(50)]
    data, info = build_sstable(entries, 1, SMALL_BLOCKS)
    store = MemoryObjectStore()
    path = sst_object_path(1)

    def open_with(blob, *, use_info=False):
        store.upload(path, blob)
        return Sstable.open(store, info if use_info else 1)

    cases = {
        "truncated": data[:-1],
        "shorter than footer": data[:20],
        "bad magic": data[:-1] + bytes([data[-1] ^ 1]),
        "unknown version": data[:-12] + (3).to_bytes(4, "little") + data[-8:],
    }
    for name, blob in cases.items():
        with pytest.raises(CorruptionError) as raised:
            open_with(blob)
        assert raised.value.object == path, name
    with pytest.raises(CorruptionError, match="version") as raised:
        open_with(cases["unknown version"])
    assert raised.value.expected == "1 or 2" and raised.value.found == 3
    with pytest.raises(CorruptionError, match="magic"):
        open_with(cases["bad magic"])
    with pytest.raises(CorruptionError, match="shorter"):
        open_with(data[:-1], use_info=True)
    store.upload(path, data)
    wrong = SstableInfo(**{**info.__dict__, "meta_offset": info.meta_offset + 1})
    with pytest.raises(CorruptionError):
        Sstable.open(store, wrong)
    live_tag = data.index((0x564C4B48).to_bytes(4, "little"), info.meta_offset)
    for bad_counts in ((51).to_bytes(8, "little"), b"\xff" * 4):   # over key_count; cut short
        meta = data[info.meta_offset:live_tag + 4] + bad_counts
        with pytest.raises(CorruptionError, match="live count") as raised:
            SstableMeta.decode(meta, object=path, base_offset=info.meta_offset)
        assert raised.value.object == path
    block_flip = bytearray(data)
    block_flip[5] ^= 0x10
    store.upload(path, bytes(block_flip))
    sst = Sstable.open(store, 1)
    with pytest.raises(CorruptionError, match="checksum") as raised:
        list(sst.scan())
    assert raised.value.offset == 0 and raised.value.object == path


@given(entries=entry_lists(max_size=80), stop=st.sampled_from([None, 600, 5000]))
def test_add_batch_equals_add(entries, stop):
    keys = [k for k, _ in entries]
    values = [v for _, v in entries]
    one = SstableBuilder(1, SMALL_BLOCKS)
    for k, v in entries:
        one.add(k, v)
    batched = SstableBuilder(1, SMALL_BLOCKS)
    i = batched.add_batch(keys, values, 0, stop_at_size=stop)
    if stop is None:
        assert i == len(keys)
    else:
        assert i == len(keys) or (batched.estimated_size >= stop and keys[i][:-8] != keys[i - 1][:-8])
    for k, v in entries[i:]:
        batched.add(k, v)
    assert one.finish() == batched.finish()
    assert one.sink.getvalue() == batched.sink.getvalue()


def test_outputs_abort_the_open_sst_on_error(object_store):
    from hummock.sstable.builder import SstableOutputs
    ids = iter(range(70, 80))
    try:
        with SstableOutputs(object_store, SMALL_BLOCKS, lambda: next(ids)) as outputs:
            outputs.current().add(encode_full_key(1, b"a", 1), b"v")
            outputs.cut()
            outputs.current().add(encode_full_key(1, b"b", 1), b"v")
            raise RuntimeError("injected")
    except RuntimeError:
        pass
    assert [info.sst_id for info in outputs.infos] == [70]
    assert object_store.exists(sst_object_path(70)) and not object_store.exists(sst_object_path(71))


def test_lz4_backs_off_on_incompressible_blocks_and_resumes(monkeypatch):
    """Random values make lz4 futile: the builder then tries it on fewer blocks (backoff up to
    16), and data that compresses again is compressed again within that window."""
    import lz4.block
    tries = []
    real = lz4.block.compress
    monkeypatch.setattr(lz4.block, "compress", lambda data, **kw: tries.append(1) or real(data, **kw))
    rng = random.Random(1)
    options = SstableBuilderOptions(block_size=1024)
    keys = [encode_full_key(1, b"%06d" % i, 1 << 16) for i in range(4000)]
    values = [rng.randbytes(100) for _ in range(2000)] + [b"a" * 100 for _ in range(2000)]
    builder = SstableBuilder(1, options)
    builder.add_batch(keys, values)
    builder_info = builder.finish()
    tags = [builder.sink.getvalue()[m.offset + m.stored_len - 13] for m in builder._metas]
    random_blocks = next(i for i, m in enumerate(builder._metas) if m.first_key >= keys[2000]) - 1
    assert set(tags[:random_blocks]) == {0}, "random values never compress"
    assert len(tries) < random_blocks // 3 + (len(tags) - random_blocks), "most futile attempts are skipped"
    first_lz4 = tags.index(1)
    assert random_blocks < first_lz4 <= random_blocks + 1 + 16 and set(tags[first_lz4:]) == {1}
    store = MemoryObjectStore()
    store.upload(sst_object_path(1), builder.sink.getvalue())
    assert [k for k, _ in Sstable.open(store, builder_info).scan()] == keys
