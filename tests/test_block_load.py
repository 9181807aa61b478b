"""The native block loader (``native/_block_load.pxi``, LZ4 in ``native/_lz4.pxd``) against the
store read + ``decode_stored_block`` path it stands in for.

Model: for any stored bytes, the loader returns either the Block whose content
``decode_stored_block`` gives (and the same restart-array error when that content is bad), or
None, on which the reader falls back to the store path; it may never return a Block where the
store path raises or returns other bytes. Through ``Sstable`` on a local store, every byte flip
of an SST must give the same observations or the same error with and without the loader.
"""

import importlib
import random

import lz4.block
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import _twins
from hummock.errors import CorruptionError
from hummock.object_store.base import ObjectStoreError
from hummock.key import MAX_EPOCH, encode_full_key
from hummock.object_store import LocalObjectStore, MemoryObjectStore
from hummock.sstable import reader as reader_module
from hummock.sstable.block import (BLOCK_TRAILER, COMPRESSION_LZ4, COMPRESSION_NONE, Block, checksum,
                                   decode_stored_block, encode_stored_block)
from hummock.sstable.builder import SstableBuilderOptions, build_sstable
from hummock.sstable.meta import sst_object_path
from hummock.sstable.reader import Sstable

NATIVE = None if _twins.pure_python_forced() else importlib.import_module("native._block")
native_only = pytest.mark.skipif(
    NATIVE is None, reason="HUMMOCK_PURE_PYTHON=1: the loader is native only; the pure twin reads every "
                           "block through the object store (the fallback these tests compare it with)")


def reseal(payload: bytes, tag: int, content_len: int) -> bytes:
    """A stored block with a valid checksum around any payload, so damage reaches the decoder."""
    head = payload + BLOCK_TRAILER.pack(tag, content_len, 0)[:5]
    return head + checksum(head).to_bytes(8, "little")


def block_content(rng: random.Random, entries: int) -> bytes:
    """A real block content (compressible: repeated value bytes, shared key prefixes)."""
    builder = NATIVE.BlockBuilder(rng.choice([1, 4, 16]))
    for i in range(entries):
        value = bytes([rng.randrange(4)]) * rng.randrange(0, 40) + rng.randbytes(rng.randrange(0, 6))
        builder.add(encode_full_key(1, b"key%08d" % (i * 3), 7), b"\x01" + value)
    return builder.finish_block()


def store_path_outcome(stored: bytes, content_len: int):
    """What the fallback path gives: ``("content", bytes)`` or ``("error", message)``."""
    try:
        content = decode_stored_block(stored, object="f", expected_content_len=content_len)
        Block(content, "f block 0")
    except CorruptionError as exc:
        return "error", str(exc).split(" (")[0]
    return "content", content


def loader_outcome(tmp_path, stored: bytes, content_len: int, pad: int = 0):
    """What the loader gives for ``stored`` at offset ``pad`` of a file."""
    path = tmp_path / "blk"
    path.write_bytes(b"\xaa" * pad + stored + b"\xbb" * 3)
    try:
        block = NATIVE.load_file_block(bytes(path), pad, len(stored), content_len, "f block 0")
    except CorruptionError as exc:      # the restart array of a content that decoded
        return "error", str(exc).split(" (")[0]
    return ("fallback", None) if block is None else ("content", block.content)


def extended(src: bytes, ip: int, length: int):
    """A 15 length plus its continuation bytes (255: another follows): (length, ip), or
    (None, ip) when the input ends first."""
    while True:
        if ip >= len(src):
            return None, ip
        length += src[ip]
        ip += 1
        if src[ip - 1] != 255:
            return length, ip


def lz4_model(src: bytes, cap: int):
    """The LZ4 block rules of native/_lz4.pxd in Python (its model): the decoded bytes, or None."""
    ip, out, n = 0, bytearray(), len(src)
    while True:
        if ip >= n:
            return None
        token = src[ip]
        ip += 1
        length = token >> 4
        if length == 15:
            length, ip = extended(src, ip, length)
            if length is None:
                return None
        if len(out) + length > cap - 12 or ip + length > n - 8:    # the last sequence
            if ip + length != n or len(out) + length > cap:
                return None
            return bytes(out + src[ip:ip + length])
        out += src[ip:ip + length]
        ip += length
        offset = src[ip] | src[ip + 1] << 8
        ip += 2
        if offset == 0 or offset > len(out):
            return None
        length = token & 15
        if length == 15:
            length, ip = extended(src, ip, length)
            if length is None:
                return None
        length += 4
        if len(out) + length > cap - 5:
            return None
        for _ in range(length):
            out.append(out[-offset])


def check_damaged(tmp_path, payload: bytes, content_len: int):
    """The loader equals the model; what the model accepts, the lz4 package decodes the same."""
    stored = reseal(payload, COMPRESSION_LZ4, content_len)
    loaded = loader_outcome(tmp_path, stored, content_len)
    model = lz4_model(payload, content_len)
    if model is None or len(model) != content_len:
        assert loaded == ("fallback", None)
        return
    expected = store_path_outcome(stored, content_len)
    if expected[0] == "content":
        assert expected[1] == model
    else:   # the model's bytes decode, but the content's restart array is bad
        assert "lz4" not in expected[1]
    assert loaded == expected


@native_only
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # one file, rewritten each time
@given(st.integers(0, 2**32), st.integers(1, 300), st.sampled_from([COMPRESSION_NONE, COMPRESSION_LZ4]),
       st.integers(0, 5000))
def test_loader_equals_the_store_path(tmp_path, seed, entries, compression, pad):
    rng = random.Random(seed)
    content = block_content(rng, entries)
    stored = encode_stored_block(content, compression)
    loaded = loader_outcome(tmp_path, stored, len(content), pad)
    assert loaded == ("content", content)
    assert loaded == store_path_outcome(stored, len(content))


@native_only
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # one file, rewritten each time
@given(st.integers(0, 2**32), st.integers(1, 8), st.booleans())
def test_damaged_lz4_payloads_agree_with_lz4_package(tmp_path, seed, flips, keep_length):
    """Flip bytes of a real lz4 payload and reseal its checksum: the loader's LZ4 decoder follows
    its model exactly (falling back where the model rejects), and never accepts what
    ``lz4.block.decompress`` rejects or decodes it differently. (The model rejects one thing the
    package accepts: a match offset of 0, whose output is undefined; the fallback then reads the
    block through the package.)"""
    rng = random.Random(seed)
    content = block_content(rng, rng.randrange(20, 200))
    payload = bytearray(lz4.block.compress(content, store_size=False))
    for _ in range(flips):
        payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
    if not keep_length and rng.random() < 0.5:
        payload = payload[:rng.randrange(1, len(payload))]
    check_damaged(tmp_path, bytes(payload), len(content))


@native_only
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])   # one file, rewritten each time
@given(st.binary(min_size=1, max_size=300), st.integers(4, 2000))
def test_arbitrary_lz4_payloads_agree_with_lz4_package(tmp_path, payload, content_len):
    check_damaged(tmp_path, payload, content_len)


@native_only
def test_overlapping_matches_and_long_runs(tmp_path):
    """Runs LZ4 encodes as matches that overlap their source (offsets 1..7) and long lengths."""
    rng = random.Random(3)
    builder = NATIVE.BlockBuilder(16)
    for i in range(400):
        builder.add(encode_full_key(1, b"k%06d" % i, 1), b"\x01" + bytes([i % 7]) * rng.choice([1, 3, 300, 5000]))
    content = builder.finish_block()
    stored = encode_stored_block(content, COMPRESSION_LZ4)
    assert stored[-13] == COMPRESSION_LZ4
    assert loader_outcome(tmp_path, stored, len(content)) == ("content", content)


@native_only
def test_loader_falls_back_on_anything_off(tmp_path):
    content = block_content(random.Random(1), 50)
    stored = encode_stored_block(content, COMPRESSION_LZ4)
    path = tmp_path / "blk"
    path.write_bytes(stored)
    name = bytes(path)
    load = NATIVE.load_file_block
    assert load(name, 0, len(stored), len(content)).content == content
    assert load(name, 1, len(stored), len(content)) is None                 # runs past the end
    assert load(name, 0, len(stored), len(content) + 1) is None             # meta's length differs
    assert load(name, 0, len(stored) - 1, len(content)) is None             # checksum
    assert load(bytes(tmp_path / "missing"), 0, len(stored), len(content)) is None
    assert load(name + b"\0x", 0, len(stored), len(content)) is None        # NUL: another file
    assert load(name, -1, len(stored), len(content)) is None
    assert load(name, 0, 12, len(content)) is None                          # shorter than a trailer
    assert load(name, 0, len(stored), 1 << 31) is None                      # over the format's limit
    assert load(bytes(tmp_path), 0, len(stored), len(content)) is None      # a directory
    bad_tag = bytearray(stored)
    bad_tag[-13] = 7
    path.write_bytes(reseal(bytes(bad_tag[:-13]), 7, len(content)))
    assert load(name, 0, len(stored), len(content)) is None


# --- through Sstable on a local store ------------------------------------------------------------

ENTRIES = [(encode_full_key(1 + i // 900, b"k%06d" % i, 5), None if i % 9 == 0 else b"v%d" % i * 5)
           for i in range(1200)]


def read_everything(store):
    sst = Sstable.open(store, 1)
    scanned = list(sst.scan())
    gets = [sst.get(k[:-8], MAX_EPOCH - int.from_bytes(k[-8:], "big")) for k, _ in ENTRIES[::7]]
    return scanned, gets


def outcome(store, monkeypatch, native: bool):
    with monkeypatch.context() as m:
        if not native:
            m.setattr(reader_module, "load_file_block", None)
        try:
            return "ok", read_everything(store)
        except CorruptionError as exc:
            return "error", (str(exc), exc.object, exc.offset, exc.expected, exc.found)


def test_local_sst_reads_use_the_loader_when_native(tmp_path, monkeypatch):
    data, info = build_sstable(ENTRIES, 1, SstableBuilderOptions(block_size=1024))
    store = LocalObjectStore(tmp_path / "objects")
    store.upload(sst_object_path(1), data)
    calls = []
    if NATIVE is not None:
        real = reader_module.load_file_block
        monkeypatch.setattr(reader_module, "load_file_block",
                            lambda *args: calls.append(args[1]) or real(*args))
    sst = Sstable.open(store, 1)
    assert list(sst.scan()) == [(k, b"\x02" if v is None else b"\x01" + v) for k, v in ENTRIES]
    if NATIVE is None:
        assert reader_module.load_file_block is None and sst._file is None
    else:
        assert sst._file == store.local_file(sst_object_path(1))
        assert open(sst._file, "rb").read() == data
        assert calls == [bm.offset for bm in sst.meta.blocks]
    mem = MemoryObjectStore()
    mem.upload(sst_object_path(1), data)
    assert Sstable.open(mem, 1)._file is None          # no local file: read through the store


@native_only
def test_byte_flips_read_the_same_with_and_without_the_loader(tmp_path, monkeypatch):
    """Flip sampled bytes of the SST's block area: with the loader every read gives what the
    store path gives, or the same CorruptionError (message, object, offset, expected, found)."""
    data, info = build_sstable(ENTRIES, 1, SstableBuilderOptions(block_size=1024))
    store = LocalObjectStore(tmp_path / "objects")
    rng = random.Random(11)
    blocks_end = info.meta_offset
    differing = 0
    for i in rng.sample(range(blocks_end), 150):
        damaged = bytearray(data)
        damaged[i] ^= 1 << rng.randrange(8)
        store.upload(sst_object_path(1), bytes(damaged))
        with_loader = outcome(store, monkeypatch, True)
        without = outcome(store, monkeypatch, False)
        differing += with_loader != without
        assert with_loader == without, f"flip at byte {i}"
    assert differing == 0


def test_closed_store_reads_fail_as_before(tmp_path):
    data, info = build_sstable(ENTRIES[:100], 1, SstableBuilderOptions(block_size=1024))
    store = LocalObjectStore(tmp_path / "objects")
    store.upload(sst_object_path(1), data)
    sst = Sstable.open(store, 1)
    store.close()
    assert store.local_file(sst_object_path(1)) is None
    with pytest.raises(ObjectStoreError, match="closed"):
        list(sst.scan())
