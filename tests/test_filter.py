"""Tests of the per-SST filter (``hummock/sstable/filter.py``, docs/format.md section 5).

- Golden bytes pin the layout, the seed and the probe arithmetic (both implementations).
- XXH64 is checked against the ``xxhash`` package and published test vectors.
- Properties (no false negatives, order/duplicate independence, FP rate, corruption handling)
  run against every available implementation: pure always, native unless
  ``HUMMOCK_PURE_PYTHON=1``; CI runs this file in both modes.
- The metamorphic cross-check imports ``native._filter`` and ``hummock.sstable._filter_py``
  directly and demands identical bytes, answers and exceptions (with messages).
"""

from __future__ import annotations

import os
import random
import struct

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

import hummock.sstable._filter_py as pure
from hummock import _twins
from hummock.errors import CorruptionError, HummockError, InvalidArgumentError
from hummock.sstable import filter as facade

try:
    import native._filter as native
    NATIVE_IMPORT_ERROR = None
except ImportError as exc:  # reported by _require_native
    native = None
    NATIVE_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


def _require_native():
    """Return ``native._filter``; fail if it is missing, unless pure mode was forced (skip)."""
    if native is not None:
        return native
    if _twins.pure_python_forced():
        pytest.skip("native._filter is not built and HUMMOCK_PURE_PYTHON=1 forces the pure twin; "
                    "the native/pure cross-check needs both")
    pytest.fail(f"native._filter failed to import ({NATIVE_IMPORT_ERROR}); build it with "
                "`cythonize -i -3 native/_filter.pyx` or `pip install -e .`")


def _impls():
    """The implementations under test in this mode (native is absent only in pure mode)."""
    if _twins.pure_python_forced() or native is None:
        return [pure]
    return [pure, native]


IMPLS = pytest.mark.parametrize("impl", _impls(), ids=lambda m: m.__name__)

user_keys = st.builds(lambda tid, key: struct.pack(">I", tid) + key,
                      st.integers(0, 3), st.binary(max_size=12))
# Any bytes at all, including b"" (not a valid user key, but the filter must not care).
any_keys = st.one_of(user_keys, st.binary(max_size=40))


# ---- golden bytes: part of the on-disk format ----------------------------------------------

GOLDEN_KEYS = [b"\x00\x00\x00\x01a", b"\x00\x00\x00\x01b", b"\x00\x00\x00\x02",
               b"\x00\x00\x00\x01a"]  # the duplicate must not change anything
GOLDEN = [
    # (keys, bits_per_key, filter hex)
    (GOLDEN_KEYS, 10, "01010700" "03000000" "40000000" "10192408278108cb"),
    (GOLDEN_KEYS, 4, "01010300" "03000000" "40000000" "1019200005010800"),
    ([b""], 1, "01010100" "01000000" "40000000" "0200000000000000"),
    ([], 10, "01010700" "00000000" "00000000"),
    ([b"\x00\x00\x00\x07" + bytes([i]) for i in range(10)], 10,
     "01010700" "0a000000" "68000000" "d89630cae991769f219241a9b4"),
]


def test_constants_golden():
    assert facade.KIND_BLOOM == 1
    assert facade.FORMAT_VERSION == 1
    assert facade.HEADER_LEN == 12
    assert facade.HASH_SEED == 0x48554D4D4F434B00 == int.from_bytes(b"HUMMOCK\0", "big")
    assert (facade.MIN_PROBES, facade.MAX_PROBES) == (1, 30)
    assert (facade.MIN_BITS, facade.MAX_BITS) == (64, 0xFFFFFFF8)
    assert facade.DEFAULT_BITS_PER_KEY == 10


@pytest.mark.parametrize("module", [pure, native] if native is not None else [pure],
                         ids=lambda m: m.__name__)
def test_twins_mirror_constants(module):
    assert module._KIND_BLOOM == facade.KIND_BLOOM
    assert module._FORMAT_VERSION == facade.FORMAT_VERSION
    assert module._HEADER_LEN == facade.HEADER_LEN
    assert module._HASH_SEED == facade.HASH_SEED
    assert module._MIN_PROBES == facade.MIN_PROBES
    assert module._MAX_PROBES == facade.MAX_PROBES
    assert module._MIN_BITS == facade.MIN_BITS
    assert module._MAX_BITS == facade.MAX_BITS


@IMPLS
@pytest.mark.parametrize("keys, bits_per_key, expected", GOLDEN)
def test_filter_golden(impl, keys, bits_per_key, expected):
    data = impl.build_filter(keys, bits_per_key)
    assert data.hex() == expected
    reader = impl.FilterReader(bytes.fromhex(expected))
    assert all(reader.may_contain(k) for k in keys)
    reader._check()


@IMPLS
def test_xxh64_vectors(impl):
    # Published XXH64 test values.
    assert impl.xxh64(b"") == 0xEF46DB3751D8E999
    assert impl.xxh64(b"abc") == 0x44BC2CF5AD770999
    assert impl.key_hash(b"") == 0x5884C6E6047AFD3A
    assert impl.key_hash(b"\x00\x00\x00\x01a") == 0xB299A55FCD6EBFE7


@IMPLS
def test_xxh64_matches_xxhash_all_lengths(impl):
    rng = random.Random(20240401)
    for length in range(0, 101):
        for _ in range(5):
            data = rng.randbytes(length)
            seed = rng.choice([0, facade.HASH_SEED, 2**64 - 1, rng.getrandbits(64)])
            assert impl.xxh64(data, seed) == xxhash.xxh64_intdigest(data, seed), (length, seed)
        assert impl.key_hash(data) == xxhash.xxh64_intdigest(data, facade.HASH_SEED)
    big = rng.randbytes(10_000)
    assert impl.xxh64(big, 7) == xxhash.xxh64_intdigest(big, 7)


@IMPLS
@given(data=st.binary(max_size=300), seed=st.integers(0, 2**64 - 1))
def test_xxh64_matches_xxhash_property(impl, data, seed):
    assert impl.xxh64(data, seed) == xxhash.xxh64_intdigest(data, seed)
    assert impl.xxh64(bytearray(data), seed) == impl.xxh64(memoryview(data), seed)


# ---- properties ----------------------------------------------------------------------------

@IMPLS
@given(keys=st.lists(any_keys, max_size=60), bits_per_key=st.integers(1, 64))
def test_no_false_negatives(impl, keys, bits_per_key):
    # Prefix families (k, k + b"\x00", k[:-1]) are the classic trap for length-unaware hashing.
    keys = keys + [k + b"\x00" for k in keys[:5]] + [k[:-1] for k in keys[:5]]
    data = impl.build_filter(keys, bits_per_key)
    reader = impl.FilterReader(data)
    reader._check()
    assert all(reader.may_contain(k) for k in keys)
    assert all(reader.may_contain_many(keys))
    assert all(reader.may_contain_hash(impl.key_hash(k)) for k in keys)
    assert reader.num_keys == len(set(keys))
    assert impl.build_filter_from_hashes([impl.key_hash(k) for k in keys], bits_per_key) == data


@IMPLS
@given(keys=st.lists(any_keys, min_size=1, max_size=40), seed=st.integers(0, 2**32))
def test_bytes_depend_only_on_the_key_set(impl, keys, seed):
    shuffled = keys * 3
    random.Random(seed).shuffle(shuffled)
    assert impl.build_filter(shuffled) == impl.build_filter(sorted(set(keys)))
    assert impl.build_filter(tuple(keys)) == impl.build_filter(list(keys))
    assert impl.build_filter([bytearray(k) for k in keys]) == impl.build_filter(keys)


@IMPLS
def test_duplicates_do_not_inflate(impl):
    keys = [b"\x00\x00\x00\x01" + i.to_bytes(4, "big") for i in range(1000)]
    once = impl.build_filter(keys)
    many = impl.build_filter(keys * 20)
    assert once == many
    assert len(once) == facade.HEADER_LEN + 1000 * 10 // 8


@IMPLS
def test_empty_filter_rejects_everything(impl):
    reader = impl.FilterReader(impl.build_filter([]))
    assert (reader.num_keys, reader.num_bits, reader.nbytes) == (0, 0, facade.HEADER_LEN)
    assert not reader.may_contain(b"")
    assert not reader.may_contain(b"\x00\x00\x00\x01a")
    assert reader.may_contain_many([b"a", b""]) == [False, False]
    assert not reader.may_contain_hash(0)
    reader._check()


@IMPLS
def test_probe_count_and_size(impl):
    for bits_per_key, probes in [(1, 1), (2, 1), (3, 2), (5, 3), (10, 7), (16, 11), (20, 14),
                                 (43, 30), (64, 30)]:
        reader = impl.FilterReader(impl.build_filter([b"k%d" % i for i in range(100)],
                                                     bits_per_key))
        assert reader.num_probes == probes
        assert reader.num_bits == max(64, (100 * bits_per_key + 7) // 8 * 8)


def _random_user_keys(rng: random.Random, n: int) -> list[bytes]:
    return [b"\x00\x00\x00\x01" + rng.randbytes(12) for _ in range(n)]


@IMPLS
def test_false_positive_rate_at_10_bits_per_key(impl):
    # A property of the structure (not a timing): theory gives 0.82% for k=7 at 10 bits/key.
    n = 100_000 if impl is not pure else 20_000
    rng = random.Random(99)
    keys = _random_user_keys(rng, n)
    key_set = set(keys)
    others = [k for k in _random_user_keys(rng, n) if k not in key_set]
    reader = impl.FilterReader(impl.build_filter(keys, 10))
    assert all(reader.may_contain_many(keys))
    rate = sum(reader.may_contain_many(others)) / len(others)
    assert rate <= 0.015, rate
    reader._check()


# ---- native and pure agree -----------------------------------------------------------------

def _outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except HummockError as exc:
        return (type(exc).__name__, str(exc))


@given(keys=st.lists(any_keys, max_size=80), probes=st.lists(any_keys, max_size=30),
       bits_per_key=st.integers(1, 64))
def test_native_and_pure_agree(keys, probes, bits_per_key):
    nat = _require_native()
    data = pure.build_filter(keys, bits_per_key)
    assert nat.build_filter(keys, bits_per_key) == data
    a, b = pure.FilterReader(data), nat.FilterReader(data)
    assert (a.num_keys, a.num_bits, a.num_probes, a.nbytes, repr(a)) == \
           (b.num_keys, b.num_bits, b.num_probes, b.nbytes, repr(b))
    assert a.may_contain_many(probes + keys) == b.may_contain_many(probes + keys)
    assert [a.may_contain(k) for k in probes] == [b.may_contain(k) for k in probes]
    assert [pure.key_hash(k) for k in probes] == [nat.key_hash(k) for k in probes]


def test_native_and_pure_agree_large():
    nat = _require_native()
    rng = random.Random(5)
    keys = _random_user_keys(rng, 20_000)
    others = _random_user_keys(rng, 20_000)
    data = nat.build_filter(keys)
    assert pure.build_filter(keys) == data
    assert pure.FilterReader(data).may_contain_many(others) == \
        nat.FilterReader(data).may_contain_many(others)


BAD_ARGUMENTS = [
    ("build_filter", ("not a list",), {}),
    ("build_filter", ([b"a", "str"],), {}),
    ("build_filter", ([b"a", None],), {}),
    ("build_filter", ([b"a"], 0), {}),
    ("build_filter", ([b"a"], 65), {}),
    ("build_filter", ([b"a"], True), {}),
    ("build_filter", ([b"a"], 10.0), {}),
    ("build_filter_from_hashes", ([1, -1],), {}),
    ("build_filter_from_hashes", ([2**64],), {}),
    ("build_filter_from_hashes", ([True],), {}),
    ("build_filter_from_hashes", ({1, 2},), {}),
    ("key_hash", ("abc",), {}),
    ("key_hash", (None,), {}),
    ("xxh64", (b"a", -1), {}),
    ("xxh64", (b"a", 2**64), {}),
    ("xxh64", (123,), {}),
    ("FilterReader", ("01010700",), {}),
    ("FilterReader", (b"",), {"object_name": 3}),
]


@IMPLS
@pytest.mark.parametrize("name, args, kwargs", BAD_ARGUMENTS)
def test_bad_arguments_raise_invalid_argument(impl, name, args, kwargs):
    with pytest.raises(InvalidArgumentError):
        getattr(impl, name)(*args, **kwargs)


@pytest.mark.parametrize("name, args, kwargs", BAD_ARGUMENTS)
def test_bad_arguments_same_message(name, args, kwargs):
    nat = _require_native()
    assert _outcome(getattr(pure, name), *args, **kwargs) == \
        _outcome(getattr(nat, name), *args, **kwargs)


@IMPLS
def test_reader_bad_probe_arguments(impl):
    reader = impl.FilterReader(impl.build_filter([b"a"]))
    for call in (lambda: reader.may_contain("a"), lambda: reader.may_contain_many([b"a", 1]),
                 lambda: reader.may_contain_many(b"ab"), lambda: reader.may_contain_hash(-1),
                 lambda: reader.may_contain_hash(2**64)):
        with pytest.raises(InvalidArgumentError):
            call()
    assert reader.may_contain(bytearray(b"a")) and reader.may_contain(memoryview(b"a"))


# ---- corruption ----------------------------------------------------------------------------

SAMPLE = pure.build_filter([b"\x00\x00\x00\x01" + bytes([i]) for i in range(50)])


def _corruptions():
    """(name, bytes) pairs that every reader must reject with CorruptionError."""
    header = bytearray(SAMPLE)
    cases = [(f"truncated to {n}", SAMPLE[:n]) for n in
             (0, 1, 4, 11, 12, 13, len(SAMPLE) - 1)]
    cases.append(("one byte too long", SAMPLE + b"\x00"))
    cases.append(("kind 0", bytes([0]) + SAMPLE[1:]))
    cases.append(("kind 2", bytes([2]) + SAMPLE[1:]))
    cases.append(("version 2", SAMPLE[:1] + bytes([2]) + SAMPLE[2:]))
    cases.append(("probes 0", SAMPLE[:2] + bytes([0]) + SAMPLE[3:]))
    cases.append(("probes 31", SAMPLE[:2] + bytes([31]) + SAMPLE[3:]))
    cases.append(("probes 255", SAMPLE[:2] + bytes([255]) + SAMPLE[3:]))
    cases.append(("reserved 1", SAMPLE[:3] + bytes([1]) + SAMPLE[4:]))
    cases.append(("zero keys, some bits", SAMPLE[:4] + bytes(4) + SAMPLE[8:]))
    cases.append(("keys but no bits", SAMPLE[:8] + bytes(4)))
    cases.append(("tiny bit array", SAMPLE[:8] + struct.pack("<I", 8) + b"\xff"))
    for offset in (0, 1, 3, 8, 9, 10, 11):  # every bit of kind, version, reserved, num_bits
        for bit in range(8):
            flipped = bytearray(header)
            flipped[offset] ^= 1 << bit
            cases.append((f"flip byte {offset} bit {bit}", bytes(flipped)))
    return cases


CORRUPTIONS = _corruptions()


@IMPLS
@pytest.mark.parametrize("name, data", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_filter_raises(impl, name, data):
    with pytest.raises(CorruptionError) as info:
        impl.FilterReader(data, object_name="7.sst/filter")
    assert info.value.object == "7.sst/filter"
    assert info.value.offset is not None
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("name, data", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_filter_same_error(name, data):
    nat = _require_native()
    assert _outcome(pure.FilterReader, data) == _outcome(nat.FilterReader, data)


@IMPLS
def test_every_single_bit_flip_is_rejected_or_harmless(impl):
    """Flipping any header bit either raises CorruptionError or leaves a usable reader."""
    for offset in range(facade.HEADER_LEN):
        for bit in range(8):
            flipped = bytearray(SAMPLE)
            flipped[offset] ^= 1 << bit
            try:
                reader = impl.FilterReader(bytes(flipped))
            except CorruptionError:
                continue
            assert isinstance(reader.may_contain(b"\x00\x00\x00\x01\x05"), bool)


@IMPLS
def test_check_detects_impossible_bit_counts(impl):
    all_ones = SAMPLE[:facade.HEADER_LEN] + b"\xff" * (len(SAMPLE) - facade.HEADER_LEN)
    reader = impl.FilterReader(all_ones)  # header is fine, so the reader accepts it
    with pytest.raises(CorruptionError):
        reader._check()  # 50 keys * 7 probes cannot set all 504 bits
    all_zero = SAMPLE[:facade.HEADER_LEN] + bytes(len(SAMPLE) - facade.HEADER_LEN)
    with pytest.raises(CorruptionError):
        impl.FilterReader(all_zero)._check()


@IMPLS
@given(data=st.binary(max_size=64))
def test_garbage_never_crashes(impl, data):
    try:
        reader = impl.FilterReader(data)
    except CorruptionError:
        return
    assert isinstance(reader.may_contain(b"x"), bool)
    assert len(reader.may_contain_many([b"x", b""])) == 2
    try:
        reader._check()
    except CorruptionError:
        pass


@IMPLS
@given(prefix=st.sampled_from([b"\x01\x01", b"\x01\x01\x07\x00"]), rest=st.binary(max_size=40))
def test_near_valid_garbage_never_crashes(impl, prefix, rest):
    data = prefix + rest
    outcomes = []
    for module in _impls():
        outcomes.append(_outcome(lambda: module.FilterReader(data).may_contain_many([b"", b"a"])))
    assert all(o == outcomes[0] for o in outcomes)
    assert outcomes[0][0] in ("ok", "CorruptionError")


def test_facade_choice():
    if _twins.pure_python_forced():
        assert facade.IMPLEMENTATION == "pure"
        assert facade.FilterReader is pure.FilterReader
    else:
        nat = _require_native()
        assert facade.IMPLEMENTATION == "native"
        assert facade.build_filter is nat.build_filter


def test_reader_copies_mutable_input():
    for impl in _impls():
        buf = bytearray(impl.build_filter([b"k"]))
        reader = impl.FilterReader(buf)
        buf[facade.HEADER_LEN:] = bytes(len(buf) - facade.HEADER_LEN)
        assert reader.may_contain(b"k")
        assert reader.data == bytes(impl.build_filter([b"k"]))


@pytest.mark.skipif(
    not os.environ.get("HUMMOCK_SLOW_TESTS"),
    reason="a 1M-key filter build and probe run (tens of seconds, memory-heavy) kept out of CI; "
           "set HUMMOCK_SLOW_TESTS=1 to run it")
def test_million_keys_native():
    nat = _require_native()
    rng = random.Random(1)
    keys = _random_user_keys(rng, 1_000_000)
    reader = nat.FilterReader(nat.build_filter(keys))
    assert all(reader.may_contain_many(keys))
