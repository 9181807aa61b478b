"""Fuzz every decoder of stored bytes with random and mutated-valid input (hypothesis).

Each property feeds garbage and near-valid bytes (valid encodings with bytes flipped, set,
inserted, deleted or cut; JSON payloads re-sealed with a correct checksum so they get past the
envelope) and asserts:

- only the documented errors come out: ``CorruptionError`` or another ``HummockError``
  (``DecodeError``, ``KeyFormatError``, ...), never ``RecursionError``, ``IndexError``,
  ``struct.error`` and the like;
- native and pure twins agree: the same result, or an exception of the same class, for every
  call (for blocks: a whole scripted session, including what the iterator says after it raised).

- memcomparable keys: a key that decodes is the key of its value (``encode(decode(b)) == b``),
  so one value has one key;
- bounded work: every example has a deadline (``FUZZ``'s ``deadline``), so an input that makes
  a decoder run away (a huge length trusted, a quadratic walk) fails the property; nothing is
  timed beyond that.

Formats: full keys, blocks (a whole scripted session), stored blocks, filters, SST meta and
footer, whole SSTs, value-encoded rows (row by row and column-wise: ``scan_columns``), tagged
values, memcomparable keys, version and delta objects (with every optional field: prefix
lengths, table watermarks and truncations, bulk load records), catalog records, reader leases.

Twins: the pure twin always, the native module too unless ``HUMMOCK_PURE_PYTHON=1`` (the suite
runs in both modes). Decoders without a native twin (SST meta and footer, manifest, catalog,
leases) are fuzzed for their error contract only. Pinned examples: test_hostile_decoders.py and
test_hostile_manifest.py. Every property stays within a few seconds under HYPOTHESIS_PROFILE=ci.
"""

from __future__ import annotations

import datetime
import json

import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import twins
from hummock import _key_py
from hummock.errors import HummockError
from hummock.key import MAX_EPOCH, encode_full_key
from hummock.leases import LEASE_PREFIX, MAX_LEASE_TTL_S, live_lease_floor, parse_lease
from hummock.object_store import MemoryObjectStore
from hummock.sstable import _block_py, _filter_py
from hummock.sstable.block import checksum, decode_stored_block, encode_stored_block
from hummock.sstable.builder import SstableBuilderOptions, build_sstable
from hummock.sstable.meta import FOOTER_SIZE, SstableInfo, SstableMeta, decode_footer, sst_object_path
from hummock.sstable.reader import Sstable
from hummock.table_watermarks import TableWatermarks
from hummock.value import decode_value
from hummock.version import HummockVersion, VersionDelta, apply, bulk_load_digest
from hummock.version_codec import (DELTA_MAGIC, ENVELOPE, MANIFEST_FORMAT_VERSION, VERSION_MAGIC, decode_delta,
                                   decode_version, encode_delta, encode_version)
from relational import _memcomparable_py, _scan_columns_py, _value_encoding_py
from relational.catalog import _ENVELOPE as RECORD_ENVELOPE
from relational.catalog import RECORD_MAGIC, RECORD_VERSION, TableDesc
from relational.memcomparable import OrderType
from relational.types import DataType as T
from strategies import SCALARS, data_types, entry_lists, rows

# bounded work per input: each example must finish well inside this (inputs are at most a few KiB;
# a decoder that trusts a length or walks quadratically blows it); generous for a loaded machine
FUZZ = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                deadline=datetime.timedelta(seconds=5))


def verdict(fn, *args, **kwargs):
    """``("ok", repr(result))`` or ``("error", exception class name)`` for documented errors;
    anything else propagates and fails the test."""
    try:
        return "ok", repr(fn(*args, **kwargs))
    except HummockError as exc:
        return "error", type(exc).__name__


def agree(verdicts: list) -> None:
    assert all(v == verdicts[0] for v in verdicts), verdicts


@st.composite
def mutated(draw, valid: bytes, max_ops: int = 4) -> bytes:
    """``valid`` with 1..max_ops byte-level edits (or, sometimes, random bytes instead)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=max(16, 2 * len(valid))))
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, draw(st.integers(0, 255))]))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        elif op == "cut":
            del data[at:]
    return bytes(data)


# --- keys ----------------------------------------------------------------------------------------

KEY_IMPLS = twins.implementations(_key_py, "_key")


@FUZZ
@given(st.binary(max_size=40), st.binary(max_size=40))
def test_fuzz_key_decoding(a, b):
    for name in ("decode_full_key", "user_key", "epoch_of"):
        agree([verdict(getattr(impl, name), a) for impl in KEY_IMPLS])
    agree([verdict(impl.compare_full_keys, a, b) for impl in KEY_IMPLS])


# --- blocks ----------------------------------------------------------------------------------------

BLOCK_IMPLS = twins.implementations(_block_py, "_block")


def block_session(impl, content: bytes, targets: list) -> list:
    """Everything a reader may do with a block, each step's outcome and the iterator's state
    after it (kept going after errors: an iterator that raised must say it is invalid)."""
    try:
        block = impl.Block(content)
    except HummockError as exc:
        return [("block", type(exc).__name__)]
    it = block.iterator()
    trace = []

    def step(name, fn):
        trace.append((name,) + verdict(fn))
        trace.append(("valid", it.is_valid(), it.key() if it.is_valid() else None,
                      it.value() if it.is_valid() else None))

    def walk(first, move):
        first()
        for _ in range(300):
            if not it.is_valid():
                break
            move()

    step("forward", lambda: walk(it.seek_to_first, it.next))
    step("backward", lambda: walk(it.seek_to_last, it.prev))
    for target in targets:
        step("seek", lambda: it.seek(target))
        step("collect", lambda: it.collect_forward(target, 3) if it.is_valid() else None)
        step("seek_for_prev", lambda: it.seek_for_prev(target))
        step("back", lambda: it.collect_backward(target[:4] + b"\x00" * 8) if it.is_valid() else None)
        epoch = MAX_EPOCH - int.from_bytes(target[-8:], "big")
        step("get", lambda: block.get(target[:-8], epoch))
        step("first_version", lambda: block.first_version(target[:-8]))
    return trace


@st.composite
def block_inputs(draw):
    entries = draw(entry_lists(single_table=True, max_size=12))
    content = _block_py.BlockBuilder(draw(st.integers(1, 5)))
    for key, value in entries:
        content.add(key, value)
    valid = content.finish_block()
    keys = [k for k, _ in entries]
    targets = draw(st.lists(st.one_of(st.sampled_from(keys), st.builds(
        lambda t, e: encode_full_key(1, t, e), st.binary(max_size=4), st.sampled_from([0, 2, MAX_EPOCH]))),
        min_size=1, max_size=3))
    return draw(mutated(valid)), targets


@FUZZ
@given(block_inputs())
def test_fuzz_block_decode_seek_iterate(inputs):
    content, targets = inputs
    agree([block_session(impl, content, targets) for impl in BLOCK_IMPLS])


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([0, 1]), st.data())
def test_fuzz_stored_block(content, compression, data):
    stored = data.draw(mutated(encode_stored_block(content, compression)))
    result = verdict(decode_stored_block, stored, object="b", offset=0)
    assert result[0] == "ok" or result[1] == "CorruptionError"


FILTER_IMPLS = twins.implementations(_filter_py, "_filter")


@FUZZ
@given(st.lists(st.binary(max_size=8), max_size=20), st.data())
def test_fuzz_filter(keys, data):
    raw = data.draw(mutated(_filter_py.build_filter(keys, 10)))
    probes = keys[:5] + [b"absent"]

    def read(impl):
        reader = impl.FilterReader(raw)
        return [reader.may_contain(k) for k in probes], reader.num_keys, reader.num_bits
    agree([verdict(read, impl) for impl in FILTER_IMPLS])


# --- SST meta, footer and whole SSTs -------------------------------------------------------------

@st.composite
def sst_bytes(draw):
    entries = draw(entry_lists(max_size=15))
    data, info = build_sstable(entries, 1, SstableBuilderOptions(block_size=256, restart_interval=4))
    return data, info, entries


@FUZZ
@given(sst_bytes(), st.data())
def test_fuzz_sst_meta_and_footer(sst, data):
    raw, info, _ = sst
    meta = raw[info.meta_offset:len(raw) - FOOTER_SIZE]
    bad_meta = data.draw(mutated(meta))
    result = verdict(SstableMeta.decode, bad_meta, object="m", base_offset=info.meta_offset)
    assert result[0] == "ok" or result[1] == "CorruptionError"
    footer = data.draw(mutated(raw[-FOOTER_SIZE:]))
    result = verdict(decode_footer, footer, object="f", file_size=len(raw))
    assert result[0] == "ok" or result[1] == "CorruptionError"


@FUZZ
@given(sst_bytes(), st.data())
def test_fuzz_whole_sst(sst, data):
    raw, _, entries = sst
    store = MemoryObjectStore()
    store.upload(sst_object_path(1), data.draw(mutated(raw)))

    def read():
        table = Sstable.open(store, 1)
        scanned = list(table.scan())
        backward = list(table.scan(reverse=True))
        gets = [table.get(k[:-8], MAX_EPOCH - int.from_bytes(k[-8:], "big")) for k, _ in entries[:5]]
        return scanned, backward, gets
    verdict(read)


# --- relational encodings --------------------------------------------------------------------------

VALUE_IMPLS = twins.implementations(_value_encoding_py, "_value_encoding")
MC_IMPLS = twins.implementations(_memcomparable_py, "_memcomparable")


@st.composite
def value_rows(draw):
    types = draw(st.lists(data_types(), min_size=1, max_size=4))
    valid = _value_encoding_py.encode_row(draw(rows(types)), types)
    return types, draw(mutated(valid))


@FUZZ
@given(value_rows())
def test_fuzz_value_decoding(row):
    types, data = row
    agree([verdict(impl.decode_row, data, types) for impl in VALUE_IMPLS])
    agree([verdict(impl.decode_rows, [data, data[:-1]], types) for impl in VALUE_IMPLS])


@st.composite
def memcomparable_rows(draw):
    types = draw(st.lists(data_types(), min_size=1, max_size=4))
    orders = [OrderType(draw(st.booleans()), draw(st.sampled_from([None, True, False]))) for _ in types]
    valid = _memcomparable_py.encode_row(draw(rows(types)), types, orders)
    return types, orders, draw(mutated(valid))


@FUZZ
@given(memcomparable_rows(), st.integers(0, 6))
def test_fuzz_memcomparable_decoding(row, offset):
    types, orders, data = row
    agree([verdict(impl.decode_row, data, types, orders) for impl in MC_IMPLS])
    agree([verdict(impl.decode_row_prefix, data, types, orders, offset) for impl in MC_IMPLS])
    for impl in MC_IMPLS:   # one value, one key: what decodes re-encodes to the same bytes
        try:
            decoded = impl.decode_row(data, types, orders)
        except HummockError:
            continue
        assert impl.encode_row(list(decoded), types, orders) == data


SCAN_IMPLS = twins.implementations(_scan_columns_py, "_scan_columns")
SCAN_TYPES = [t for t in SCALARS if t.kind in _scan_columns_py.WANTABLE | _scan_columns_py.WALKABLE]


@st.composite
def scan_batches(draw):
    types = draw(st.lists(st.sampled_from(SCAN_TYPES), min_size=1, max_size=4))
    values = [draw(mutated(_value_encoding_py.encode_row(draw(rows(types)), types), max_ops=2))
              for _ in range(draw(st.integers(1, 4)))]
    wanted = [i for i, t in enumerate(types) if t.kind in _scan_columns_py.WANTABLE and draw(st.booleans())]
    return types, values, wanted


def _as_bytes(decode):
    """``decode_columns`` with its buffers as ``bytes`` (the native twin returns Arrow buffers
    holding the same bytes), so the verdicts' reprs compare."""
    def run(*args):
        n, columns = decode(*args)
        return n, [(None if valid is None else bytes(valid), nulls, bytes(data), None if ends is None else bytes(ends))
                   for valid, nulls, data, ends in columns]
    return run


@FUZZ
@given(scan_batches(), st.integers(0, 5))
def test_fuzz_scan_columns_decoding(batch, limit):
    """Value-encoded rows decoded column-wise (``relational.scan_columns``): the same buffers or
    the same error class from both twins."""
    types, values, wanted = batch
    codes = tuple(int(t.kind) for t in types)
    pairs = [(b"k%d" % i, v) for i, v in enumerate(values)]
    agree([verdict(_as_bytes(impl.decode_columns), iter(pairs), limit, codes, tuple(wanted)) for impl in SCAN_IMPLS])
    agree([verdict(impl.count_pairs, iter(pairs), limit) for impl in SCAN_IMPLS])


@FUZZ
@given(st.binary(max_size=8), st.data())
def test_fuzz_tagged_value_decoding(payload, data):
    from hummock.value import encode_value
    raw = data.draw(mutated(encode_value(data.draw(st.sampled_from([payload, None])))))
    result = verdict(decode_value, raw, object="v")
    assert result[0] == "ok" or result[1] == "CorruptionError"
    if result[0] == "ok":
        assert encode_value(decode_value(raw)) == raw


# --- manifest and catalog JSON records ------------------------------------------------------------

def seal(magic: bytes, payload: bytes) -> bytes:
    return ENVELOPE.pack(magic, MANIFEST_FORMAT_VERSION, len(payload), checksum(payload)) + payload


def seal_record(payload: bytes) -> bytes:
    return RECORD_ENVELOPE.pack(RECORD_MAGIC, RECORD_VERSION, len(payload),
                                xxhash.xxh64_intdigest(payload, 0)) + payload


def _sst(sst_id: int, lo: int) -> SstableInfo:
    return SstableInfo(sst_id, encode_full_key(1, b"%03d" % lo, 5), encode_full_key(1, b"%03d" % (lo + 5), 5),
                       1000, 900, 5, 5, 3, 0, (1,))


def _history():
    """A version and the deltas that built it, using every optional field of both (prefix
    lengths, table watermarks with a truncation, a bulk load record) so the JSON fuzz reaches
    their decoders too."""
    version = HummockVersion.empty()
    deltas = [VersionDelta.reserve_sst_ids(version, 10)]
    version = apply(version, deltas[0])
    for i in range(3):
        deltas.append(VersionDelta.commit(version, (i + 1) << 16, [_sst(1 + i, 10 * i)]))
        version = apply(version, deltas[-1])
    deltas.append(VersionDelta.compaction(version, [1, 2], {1: [_sst(4, 0)]}))
    version = apply(version, deltas[-1])
    deltas.append(VersionDelta.table_options(version, {1: 2, 7: 4}))
    version = apply(version, deltas[-1])
    epoch = 4 << 16
    marks = TableWatermarks(((epoch, epoch + 3),), ((epoch, ((3, b"ab", b"cd"), (9, b"x", None))),))
    assert not marks.problems(), marks.problems()
    deltas.append(VersionDelta.commit(version, epoch, [_sst(5, 60)], table_watermarks={1: marks},
                                      bulk_load=(1, bulk_load_digest([5]))))
    return apply(version, deltas[-1]), deltas


VERSION, DELTAS = _history()

# JSON-level edits: each keeps the payload close to valid so decoding gets past json.loads
_JSON_EDITS = [
    lambda p, x: p.replace(b"[", b"[" * (x % 100 + 1), 1).replace(b"]", b"]" * (x % 100 + 1), 1),
    lambda p, x: b"[" * (x * 37 % 5000) + p + b"]" * (x * 37 % 5000),
    lambda p, x: p.replace(b"1", b"%d" % (x * 2**61), 1),
    lambda p, x: p.replace(b"1", b"-1", 1),
    lambda p, x: p.replace(b"true", b"null", 1).replace(b"false", b"1", 1),
    lambda p, x: p.replace(b'"', b"", 2),
    lambda p, x: p.replace(b"[]", b"[[]]", 1).replace(b"{}", b"[]", 1),
    lambda p, x: p.replace(b":", b':{"x":', 1).replace(b"}", b"}}", 1),
    lambda p, x: p.replace(b'"', b'"\\u00', 1),
    lambda p, x: p[: x % max(1, len(p))],
]


@st.composite
def json_payloads(draw, valid: bytes):
    payload = valid
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from(_JSON_EDITS))
        payload = edit(payload, draw(st.integers(0, 10_000)))
    return payload


@FUZZ
@given(st.data(), st.booleans())
def test_fuzz_version_and_delta_decoding(data, reseal):
    for magic, decode, valid in ([(VERSION_MAGIC, decode_version, encode_version(VERSION))] +
                                 [(DELTA_MAGIC, decode_delta, encode_delta(d)) for d in DELTAS]):
        if reseal:
            raw = seal(magic, data.draw(json_payloads(valid[ENVELOPE.size:])))
        else:
            raw = data.draw(mutated(valid))
        result = verdict(decode, raw, object="manifest/x")
        assert result[0] == "ok" or result[1] == "CorruptionError"


@st.composite
def table_records(draw):
    dtype = draw(data_types())
    desc = TableDesc(draw(st.integers(0, 1000)), draw(st.text(max_size=5)), [("k", T.INT), ("v", dtype)], [0],
                     properties=draw(st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
    return desc.to_bytes()


@FUZZ
@given(table_records(), st.data(), st.booleans())
def test_fuzz_catalog_record_decoding(record, data, reseal):
    if reseal:
        raw = seal_record(data.draw(json_payloads(record[RECORD_ENVELOPE.size:])))
    else:
        raw = data.draw(mutated(record))
    result = verdict(TableDesc.from_bytes, raw, "catalog record")
    assert result[0] == "ok" or result[1] == "CorruptionError"


def test_json_edits_produce_valid_json_sometimes():
    """The JSON edits must not all break the JSON: the structural checks behind json.loads are
    what they are for."""
    payload = encode_version(VERSION)[ENVELOPE.size:]
    parsed = 0
    for edit in _JSON_EDITS:
        try:
            json.loads(edit(payload, 3))
            parsed += 1
        except (ValueError, RecursionError):
            pass
    assert parsed >= 4


# --- reader leases: JSON objects written by other processes -------------------------------------

def _lease(version_id=7, ttl_s=30.0) -> bytes:
    return json.dumps({"version_id": version_id, "ttl_s": ttl_s, "pid": 123, "host": "h"}).encode()


_LEASE_EDITS = _JSON_EDITS + [
    lambda p, x: p.replace(b"7", (b"1e999", b"-7", b'"7"', b"true", b"7.5", b"%d" % 2**64, b"null")[x % 7], 1),
    lambda p, x: p.replace(b"30.0", (b"NaN", b"Infinity", b"1e300", b"0", b"-1", b'"30"', b"%d" % (x + 1))[x % 7], 1),
    lambda p, x: p * (x % 300 + 1),
]


@FUZZ
@given(st.integers(0, 2**64 - 1), st.floats(0.5, MAX_LEASE_TTL_S), st.data())
def test_fuzz_lease_parsing(version_id, ttl, data):
    """``parse_lease`` gives a u64 version and a TTL in (0, MAX_LEASE_TTL_S], or ValueError (its
    documented refusal, which vacuum turns into a warning); nothing else."""
    valid = _lease(version_id, ttl)
    if data.draw(st.booleans()):
        raw = data.draw(mutated(valid))
    else:
        raw = valid
        for _ in range(data.draw(st.integers(1, 3))):
            raw = data.draw(st.sampled_from(_LEASE_EDITS))(raw, data.draw(st.integers(0, 10_000)))
    try:
        got_version, got_ttl = parse_lease(raw)
    except ValueError:
        return
    assert type(got_version) is int and 0 <= got_version < 2**64
    assert type(got_ttl) is float and 0 < got_ttl <= MAX_LEASE_TTL_S


@FUZZ
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=3), st.data())
def test_fuzz_lease_floor_over_hostile_leases(garbage, data):
    """Vacuum's view of the leases (``live_lease_floor``) never raises for what a lease object
    holds: a good lease counts, a malformed one pins everything (version 0)."""
    store = MemoryObjectStore()
    store.upload(LEASE_PREFIX + "reader-good", _lease(9, 60.0))
    for i, raw in enumerate(garbage):
        if data.draw(st.booleans()):
            raw = data.draw(mutated(_lease(data.draw(st.integers(0, 50)), 60.0)))
        store.upload(LEASE_PREFIX + f"reader-{i}", raw)
    floor = live_lease_floor(store, remove_dead=True, seen={})
    assert floor is not None and 0 <= floor <= 9
