"""Tests of the full-key encoding and the epoch helpers (``hummock/key.py``, docs/format.md §3).

- Golden bytes pin the on-disk layout and the epoch constants (both implementations).
- Property tests run against the facade ``hummock.key``, i.e. the native module by default and
  the pure twin under ``HUMMOCK_PURE_PYTHON=1``; CI runs this file in both modes.
- The metamorphic cross-check imports ``hummock._key_py`` and ``native._key`` directly and
  demands identical results, bytes and exceptions (with messages), valid input or not.
"""

from __future__ import annotations

import array
import functools
import threading
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hummock._key_py as pure_key
from hummock import _twins, key
from hummock.errors import HummockError, InvalidArgumentError, KeyFormatError

MAX_EPOCH = 2**64 - 1
MAX_TABLE_ID = 2**32 - 1

try:
    import native._key as native_key
    NATIVE_IMPORT_ERROR = None
except ImportError as exc:  # reported by test_native_and_pure_agree / test_facade_choice
    native_key = None
    NATIVE_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"


def _require_native():
    """Return ``native._key``; fail if it is missing, unless pure mode was forced (then skip)."""
    if native_key is not None:
        return native_key
    if _twins.pure_python_forced():
        pytest.skip("native._key is not built and HUMMOCK_PURE_PYTHON=1 forces the pure twin; "
                    "the native/pure cross-check needs both")
    pytest.fail(f"native._key failed to import ({NATIVE_IMPORT_ERROR}); build it with "
                "`cythonize -i -3 native/_key.pyx` or `pip install -e .`")


# ---- golden bytes: part of the on-disk format ----------------------------------------------

GOLDEN = [
    # (table_id, table_key, epoch, full key hex)
    (0, b"", 0, "00000000" "ffffffffffffffff"),
    (0, b"", MAX_EPOCH, "00000000" "0000000000000000"),
    (1, b"a", 1, "00000001" "61" "fffffffffffffffe"),
    (MAX_TABLE_ID, b"\x00a\x00", 1 << 16, "ffffffff" "006100" "fffffffffffeffff"),
    (42, b"\x00\x00", MAX_EPOCH - 1, "0000002a" "0000" "0000000000000001"),
    (0x01020304, b"key", 0x10003, "01020304" "6b6579" "fffffffffffefffc"),
    (7, b"\xff" * 3, 5_424_073_932_800_000, "00000007" "ffffff" "ffecbad55fffffff"),
]


def test_constants_golden():
    assert key.TABLE_ID_LEN == 4
    assert key.EPOCH_LEN == 8
    assert key.MIN_FULL_KEY_LEN == 12
    assert key.MAX_TABLE_ID == 0xFFFF_FFFF
    assert key.MAX_EPOCH == 0xFFFF_FFFF_FFFF_FFFF
    assert key.EPOCH_BASE_UNIX_MS == 1_617_235_200_000
    assert key.EPOCH_PHYSICAL_SHIFT == 16
    assert key.EPOCH_SPILL_MASK == 0xFFFF


def test_twin_mirrors_constants():
    assert pure_key._TABLE_ID_LEN == key.TABLE_ID_LEN
    assert pure_key._EPOCH_LEN == key.EPOCH_LEN
    assert pure_key._MIN_FULL_KEY_LEN == key.MIN_FULL_KEY_LEN
    assert pure_key._MAX_TABLE_ID == key.MAX_TABLE_ID
    assert pure_key._MAX_EPOCH == key.MAX_EPOCH


def test_epoch_golden():
    base = key.EPOCH_BASE_UNIX_MS
    assert key.epoch_from_unix_ms(base) == 0
    assert key.epoch_from_unix_ms(base + 1) == 1 << 16
    assert key.epoch_from_unix_ms(1_700_000_000_000) == 5_424_073_932_800_000
    assert key.epoch_to_unix_ms(5_424_073_932_800_000 | 0xABCD) == 1_700_000_000_000
    assert key.epoch_to_unix_ms((1 << 16) | 7) == base + 1
    assert key.spill_offset(5_424_073_932_800_000 | 0xABCD) == 0xABCD
    assert key.with_spill_offset(1 << 16, 0xFFFF) == 0x1FFFF
    assert key.epoch_from_unix_ms(base + (MAX_EPOCH >> 16)) == MAX_EPOCH - 0xFFFF


@pytest.mark.parametrize("table_id, table_key, epoch, hex_", GOLDEN)
def test_encode_decode_golden(table_id, table_key, epoch, hex_):
    full = bytes.fromhex(hex_)
    impls = [key, pure_key] + ([native_key] if native_key is not None else [])
    for impl in impls:
        assert impl.encode_full_key(table_id, table_key, epoch) == full
        assert impl.encode_full_keys(table_id, [table_key], epoch) == [full]
        assert impl.decode_full_key(full) == (table_id, table_key, epoch)
        assert impl.user_key(full) == full[:-8]
        assert impl.epoch_of(full) == epoch


# ---- strategies -----------------------------------------------------------------------------

epochs = st.one_of(st.sampled_from([0, 1, 0xFF, 1 << 16, MAX_EPOCH - 1, MAX_EPOCH]),
                   st.integers(0, MAX_EPOCH))
table_ids = st.one_of(st.sampled_from([0, 1, 0xFF, 0x100, MAX_TABLE_ID]),
                      st.integers(0, MAX_TABLE_ID))
# A small alphabet makes keys that are prefixes of each other (b"a" vs b"a\x00") common.
prefixy_keys = st.lists(st.sampled_from([b"\x00", b"\x01", b"a", b"\xff"]),
                        max_size=4).map(b"".join)
table_keys = st.one_of(prefixy_keys, st.binary(max_size=40))
triples = st.tuples(st.sampled_from([0, 1, MAX_TABLE_ID]), prefixy_keys, epochs)


def model_order(t):
    """The specified order of (table_id, table_key, epoch): user key ascending, epoch descending."""
    table_id, table_key, epoch = t
    return (table_id, table_key, -epoch)


def sign(x):
    return (x > 0) - (x < 0)


# ---- properties (against the facade: native by default, twin under HUMMOCK_PURE_PYTHON) -----

@given(table_ids, table_keys, epochs)
def test_round_trip(table_id, table_key, epoch):
    full = key.encode_full_key(table_id, table_key, epoch)
    assert type(full) is bytes and len(full) == len(table_key) + 12
    assert key.decode_full_key(full) == (table_id, table_key, epoch)
    assert key.user_key(full) == table_id.to_bytes(4, "big") + table_key
    assert key.epoch_of(full) == epoch
    assert key.compare_full_keys(full, full) == 0


@given(triples, triples)
def test_compare_matches_model(x, y):
    a, b = key.encode_full_key(*x), key.encode_full_key(*y)
    ma, mb = model_order(x), model_order(y)
    expected = (ma > mb) - (ma < mb)
    assert key.compare_full_keys(a, b) == expected
    assert key.compare_full_keys(b, a) == -expected
    sa, sb = key.full_key_sort_key(a), key.full_key_sort_key(b)
    assert (sa > sb) - (sa < sb) == expected


@given(st.lists(triples, max_size=30))
def test_sorting_matches_model(items):
    fulls = [key.encode_full_key(*t) for t in items]
    expected = [key.encode_full_key(*t) for t in sorted(items, key=model_order)]
    assert sorted(fulls, key=key.full_key_sort_key) == expected
    assert sorted(fulls, key=functools.cmp_to_key(key.compare_full_keys)) == expected


def test_prefix_keys_are_not_memcmp_ordered():
    # b"a" < b"a\x00" as user keys, but the whole-key bytes compare the other way round.
    a = key.encode_full_key(0, b"a", 0)
    b = key.encode_full_key(0, b"a\x00", 0)
    assert a > b
    assert key.compare_full_keys(a, b) == -1
    assert key.full_key_sort_key(a) < key.full_key_sort_key(b)
    # Same user key: newer epoch first.
    assert key.compare_full_keys(key.encode_full_key(0, b"a", 9),
                                 key.encode_full_key(0, b"a", 8)) == -1


@given(table_ids, st.lists(table_keys, max_size=20), epochs)
def test_batch_matches_single(table_id, keys_, epoch):
    expected = [key.encode_full_key(table_id, k, epoch) for k in keys_]
    assert key.encode_full_keys(table_id, keys_, epoch) == expected
    assert key.encode_full_keys(table_id, tuple(keys_), epoch) == expected


@given(st.binary(max_size=11))
def test_short_full_keys_raise(short):
    good = key.encode_full_key(1, b"k", 1)
    for fn in (key.decode_full_key, key.user_key, key.epoch_of, key.full_key_sort_key,
               lambda k: key.compare_full_keys(k, good), lambda k: key.compare_full_keys(good, k)):
        for form in (short, bytearray(short), memoryview(short)):
            with pytest.raises(KeyFormatError):
                fn(form)


@given(table_ids, table_keys, epochs, st.data())
def test_truncated_full_keys_raise(table_id, table_key, epoch, data):
    full = key.encode_full_key(table_id, table_key, epoch)
    cut = data.draw(st.integers(0, 11))
    with pytest.raises(KeyFormatError, match="at least 12 bytes"):
        key.decode_full_key(full[:cut])


def test_bytes_like_accepted_bytes_returned():
    full = key.encode_full_key(3, b"xyz", 5)
    for form in (bytearray(b"xyz"), memoryview(b"xyz"), memoryview(b"__xyz__")[2:5]):
        assert key.encode_full_key(3, form, 5) == full
        assert key.encode_full_keys(3, [form], 5) == [full]
    for form in (bytearray(full), memoryview(full), memoryview(b"!" + full + b"!")[1:-1]):
        decoded = key.decode_full_key(form)
        assert decoded == (3, b"xyz", 5) and type(decoded[1]) is bytes
        assert type(key.user_key(form)) is bytes and key.user_key(form) == full[:-8]
        assert key.epoch_of(form) == 5
        assert key.compare_full_keys(form, full) == 0
        assert key.full_key_sort_key(form) == key.full_key_sort_key(full)


@pytest.mark.parametrize("bad", [-1, 2**32, 2**64, True, False, 1.0, "1", None, b"\x00"])
def test_bad_table_id(bad):
    with pytest.raises(InvalidArgumentError, match="table_id"):
        key.encode_full_key(bad, b"k", 1)
    with pytest.raises(InvalidArgumentError, match="table_id"):
        key.encode_full_keys(bad, [b"k"], 1)


@pytest.mark.parametrize("bad", [-1, 2**64, 2**100, -2**100, True, 1.0, "1", None])
def test_bad_epoch(bad):
    with pytest.raises(InvalidArgumentError, match="epoch"):
        key.encode_full_key(1, b"k", bad)
    with pytest.raises(InvalidArgumentError, match="epoch"):
        key.encode_full_keys(1, [b"k"], bad)
    with pytest.raises(InvalidArgumentError, match="epoch"):
        key.check_epoch(bad)


@pytest.mark.parametrize("bad", ["k", 1, None, [b"k"], bytes])
def test_bad_key_types(bad):
    with pytest.raises(InvalidArgumentError, match="table_key"):
        key.encode_full_key(1, bad, 1)
    with pytest.raises(InvalidArgumentError, match=r"table_keys\[1\]"):
        key.encode_full_keys(1, [b"ok", bad], 1)
    for fn in (key.decode_full_key, key.user_key, key.epoch_of, key.full_key_sort_key,
               lambda k: key.compare_full_keys(k, bytes(12))):
        with pytest.raises(InvalidArgumentError):
            fn(bad)


@pytest.mark.parametrize("bad", [b"abc", bytearray(b"ab"), "ab", {b"a"}, None, iter([b"a"])])
def test_bad_batch_container(bad):
    with pytest.raises(InvalidArgumentError, match="table_keys"):
        key.encode_full_keys(1, bad, 1)


def test_errors_are_in_the_tree():
    assert issubclass(KeyFormatError, HummockError) and issubclass(KeyFormatError, ValueError)
    assert issubclass(InvalidArgumentError, HummockError)


# ---- native vs pure: identical results, bytes and exceptions --------------------------------

def _outcome(fn, *args):
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the point is to compare whatever happens
        return ("raised", type(exc), str(exc))
    return ("returned", type(result), result)


def _bytes_forms(strategy):
    return st.one_of(strategy, strategy.map(bytearray), strategy.map(memoryview),
                     strategy.map(lambda b: memoryview(b"#" + b)[1:]))


wild_ints = st.one_of(st.integers(-2**70, 2**70), st.integers(0, MAX_EPOCH),
                      st.sampled_from([True, False, 1.5, "1", None, -1, 2**32, 2**64, 2**64 - 1]))
wild_keys = st.one_of(_bytes_forms(table_keys),
                      st.sampled_from(["k", 7, None, [b"a"]]),
                      st.builds(lambda: memoryview(array.array("H", [1, 0x0203]))))
wild_full_keys = st.one_of(_bytes_forms(st.binary(max_size=14)),
                           _bytes_forms(st.builds(pure_key.encode_full_key, st.sampled_from([0, 1]),
                                                  prefixy_keys, epochs)),
                           st.sampled_from(["x" * 12, 12, None]))


def test_native_and_pure_agree():
    """The cross-check; the only test that may skip (pure mode forced and native not built)."""
    native = _require_native()
    for table_id, table_key, epoch, hex_ in GOLDEN:
        assert native.encode_full_key(table_id, table_key, epoch) == \
            pure_key.encode_full_key(table_id, table_key, epoch) == bytes.fromhex(hex_)
    _check_agree(native)


@given(table_id=wild_ints, table_key=wild_keys, epoch=wild_ints, fa=wild_full_keys,
       fb=wild_full_keys, batch=st.one_of(st.lists(wild_keys, max_size=5),
                                          st.lists(wild_keys, max_size=5).map(tuple), wild_keys))
def _check_agree(native, table_id, table_key, epoch, fa, fb, batch):
    for name, args in [("encode_full_key", (table_id, table_key, epoch)),
                       ("encode_full_keys", (table_id, batch, epoch)),
                       ("decode_full_key", (fa,)),
                       ("user_key", (fa,)),
                       ("epoch_of", (fa,)),
                       ("compare_full_keys", (fa, fb))]:
        expected = _outcome(getattr(pure_key, name), *args)
        assert _outcome(getattr(native, name), *args) == expected, name


def test_facade_choice():
    forced = _twins.pure_python_forced()
    if not forced and native_key is None:
        pytest.fail(f"native._key failed to import ({NATIVE_IMPORT_ERROR}); the facade would "
                    "silently use the pure twin")
    expected = pure_key if forced else native_key
    for name in ("encode_full_key", "encode_full_keys", "decode_full_key", "user_key",
                 "epoch_of", "compare_full_keys"):
        assert getattr(key, name) is getattr(expected, name), name


# ---- epochs ----------------------------------------------------------------------------------

def test_new_epoch_strictly_increasing():
    before_ms = key.EPOCH_BASE_UNIX_MS + 1  # sanity lower bound, not a timing assertion
    previous = key.new_epoch()
    for _ in range(20_000):
        current = key.new_epoch()
        assert current > previous
        assert key.spill_offset(current) == 0
        previous = current
    assert key.epoch_to_unix_ms(previous) >= before_ms


def test_new_epoch_threads():
    per_thread, results = 3_000, []
    start = threading.Barrier(8)

    def worker():
        start.wait()
        results.append([key.new_epoch() for _ in range(per_thread)])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    for seq in results:
        assert all(a < b for a, b in zip(seq, seq[1:]))
    assert len({e for seq in results for e in seq}) == 8 * per_thread


def test_new_epoch_survives_clock_going_backwards(monkeypatch):
    clock = iter([2_000_000_000_000, 2_000_000_000_000, 1_900_000_000_000, 1_000,
                  2_000_000_000_005])
    fake_time = types.SimpleNamespace(time_ns=lambda: next(clock) * 1_000_000)
    monkeypatch.setattr(key, "time", fake_time)
    monkeypatch.setattr(key, "_last_epoch", 0)
    got = [key.new_epoch() for _ in range(5)]
    first = key.epoch_from_unix_ms(2_000_000_000_000)
    assert got == [first, first + (1 << 16), first + (2 << 16), first + (3 << 16),
                   key.epoch_from_unix_ms(2_000_000_000_005)]


def test_new_epoch_exhaustion(monkeypatch):
    monkeypatch.setattr(key, "_last_epoch", MAX_EPOCH - 0xFFFF)
    with pytest.raises(KeyFormatError, match="exhausted"):
        key.new_epoch()


@given(st.integers(0, MAX_EPOCH), st.integers(0, 0xFFFF))
def test_spill_offset_helpers(epoch, offset):
    spilled = key.with_spill_offset(epoch, offset)
    assert key.spill_offset(spilled) == offset
    assert spilled >> 16 == epoch >> 16
    assert key.epoch_to_unix_ms(spilled) == key.epoch_to_unix_ms(epoch)
    assert key.check_epoch(spilled) == spilled


@pytest.mark.parametrize("bad", [-1, 0x10000, True, 1.0, None])
def test_bad_spill_offset(bad):
    with pytest.raises(InvalidArgumentError, match="spill offset"):
        key.with_spill_offset(1 << 16, bad)


@pytest.mark.parametrize("bad", [key.EPOCH_BASE_UNIX_MS - 1, -5, True, 1.7e12, None,
                                 key.EPOCH_BASE_UNIX_MS + (MAX_EPOCH >> 16) + 1])
def test_bad_unix_ms(bad):
    with pytest.raises(InvalidArgumentError, match="unix_ms"):
        key.epoch_from_unix_ms(bad)


@given(st.integers(key.EPOCH_BASE_UNIX_MS, key.EPOCH_BASE_UNIX_MS + (MAX_EPOCH >> 16)))
def test_unix_ms_round_trip(ms):
    assert key.epoch_to_unix_ms(key.epoch_from_unix_ms(ms)) == ms
    assert key.spill_offset(key.epoch_from_unix_ms(ms)) == 0
