"""Hostile bytes against the decoders: pinned examples of lengths that must be bounded, of costs
that must stay linear, and of states a decoder must not be left in after it raised.

Each test runs every twin of this run (pure always, native too unless HUMMOCK_PURE_PYTHON=1)
and expects the same verdict from each. Costs are never timed: a hostile length must be refused
before it is used, and a linear decoder is recognised by what it does (e.g. the width of the
integers it builds), not by a clock. The random counterparts live in test_fuzz_decoders.py.
"""

import decimal

import pytest

import twins
from hummock.errors import CorruptionError
from hummock.key import encode_full_key
from hummock.sstable import _block_py
from relational import _memcomparable_py as mc_pure
from relational import _value_encoding_py as ve_pure
from relational.errors import DecodeError, ValueOutOfRangeError
from relational.memcomparable import OrderType
from relational.types import DataType as T

D = decimal.Decimal
MAX_DIGITS = ve_pure.DECIMAL_MAX_PRECISION


def value_impls():
    return twins.implementations(ve_pure, "_value_encoding")


def mc_impls():
    return twins.implementations(mc_pure, "_memcomparable")


def _row(*parts: bytes) -> bytes:
    """A value-encoded row of one non-NULL column whose value bytes are ``parts``."""
    return b"\x01\x01\x00" + b"".join(parts)


def _varint(n: int) -> bytes:
    out = bytearray()
    ve_pure.put_varint(out, n)
    return bytes(out)


def _decimal_row(coefficient: bytes, exponent_zigzag: int = 0, sign: int = 0) -> bytes:
    return _row(bytes((ve_pure.DECIMAL_FINITE, sign)), _varint(exponent_zigzag), _varint(len(coefficient)),
                coefficient)


# --- value encoding: DECIMAL coefficients are bounded by the type's precision ----------------

def test_decimal_precision_constants_agree():
    assert MAX_DIGITS == 131072 + 16383   # Postgres' unconstrained NUMERIC
    largest = 10 ** MAX_DIGITS - 1
    assert ve_pure.DECIMAL_MAX_COEFFICIENT_BYTES == (largest.bit_length() + 7) // 8
    assert mc_pure.DECIMAL_MAX_PRECISION == MAX_DIGITS


def test_huge_decimal_coefficient_is_refused_before_conversion():
    # 256 KiB of coefficient: converting it took seconds; its length alone says it is corrupt
    data = _decimal_row(b"\xff" * (256 * 1024))
    for impl in value_impls():
        with pytest.raises(DecodeError, match="exceeds 147455 digits") as info:
            impl.decode_row(data, [T.DECIMAL])
        assert info.value.offset == 6   # the coefficient length varint


def test_decimal_coefficient_at_the_precision_limit():
    largest = 10 ** MAX_DIGITS - 1
    raw = largest.to_bytes(ve_pure.DECIMAL_MAX_COEFFICIENT_BYTES, "big")
    one_more = (largest + 1).to_bytes(ve_pure.DECIMAL_MAX_COEFFICIENT_BYTES, "big")
    for impl in value_impls():
        (value,) = impl.decode_row(_decimal_row(raw, sign=1), [T.DECIMAL])
        assert value.as_tuple() == (1, (9,) * MAX_DIGITS, 0)
        with pytest.raises(DecodeError, match="exceeds 147455 digits"):
            impl.decode_row(_decimal_row(one_more), [T.DECIMAL])


def test_decimal_coefficient_may_carry_leading_zero_bytes():
    # "coefficients are not required to be minimal": zero padding does not count as digits
    raw = b"\x00" * (ve_pure.DECIMAL_MAX_COEFFICIENT_BYTES + 1000) + b"\x01\x2c"
    for impl in value_impls():
        assert impl.decode_row(_decimal_row(raw, exponent_zigzag=3), [T.DECIMAL]) == (D("300E-2"),)


@pytest.mark.parametrize("digits", [70, 700, 7000])
def test_long_decimals_round_trip_exactly(digits):
    value = D((1, tuple((i * 7 + 3) % 10 for i in range(digits - 1)) + (1,), -5))
    for impl in value_impls():
        (back,) = impl.decode_row(impl.encode_row([value], [T.DECIMAL]), [T.DECIMAL])
        assert back.as_tuple() == value.as_tuple()


def test_encoders_refuse_decimals_beyond_the_precision():
    too_long = D((0, (1,) * (MAX_DIGITS + 1), 0))
    fits = D((0, (1,) * 2000, -1000))
    for impl in value_impls():
        with pytest.raises(ValueOutOfRangeError, match="precision"):
            impl.encode_row([too_long], [T.DECIMAL])
        assert impl.decode_row(impl.encode_row([fits], [T.DECIMAL]), [T.DECIMAL]) == (fits,)
    for impl in mc_impls():
        with pytest.raises(ValueOutOfRangeError, match="precision"):
            impl.encode_row([too_long], [T.DECIMAL])
        assert impl.decode_row(impl.encode_row([fits], [T.DECIMAL]), [T.DECIMAL]) == (fits,)


@pytest.mark.parametrize("order", [OrderType(), OrderType(descending=True)], ids=["asc", "desc"])
def test_memcomparable_mantissa_is_bounded_by_the_precision(order):
    mask = 0xFF if order.descending else 0x00
    exponent = (1 << 31).to_bytes(4, "big")
    head = bytes((0x01, 0x04)) + exponent
    pairs = b"\x0c" * (MAX_DIGITS // 2)          # "11" per byte: 147454 digits
    fits = head + pairs + b"\x0b\x00"             # + "1" and its padding zero: 147455 digits
    too_long = [head + pairs + b"\x0c\x00",       # + "11": 147456 digits
                head + pairs + b"\x0c" * 1000 + b"\x00"]

    def masked(data):
        return data[:1] + bytes(b ^ mask for b in data[1:])
    for impl in mc_impls():
        (value,) = impl.decode_row(masked(fits), [T.DECIMAL], [order])
        assert len(value.as_tuple().digits) == MAX_DIGITS
        for data in too_long:
            with pytest.raises(DecodeError, match="longer than 147455 digits"):
                impl.decode_row(masked(data), [T.DECIMAL], [order])


# --- value encoding: a long LIST's null bitmap is read a byte at a time ----------------------

def _list_row(n: int, bitmap_byte: int) -> bytes:
    """LIST<INT> of ``n`` elements whose null bitmap repeats ``bitmap_byte`` (padding cleared)."""
    bitmap = bytearray([bitmap_byte]) * ((n + 7) // 8)
    if n & 7:
        bitmap[-1] &= (1 << (n & 7)) - 1
    present = sum(not bitmap[i >> 3] >> (i & 7) & 1 for i in range(n))
    return _row(_varint(n), bytes(bitmap), b"\x07\x00\x00\x00" * present)


def test_long_list_with_nulls_decodes_alike():
    n = 8 * 128 * 1024 + 3   # a 128 KiB bitmap
    data = _list_row(n, 0b10110101)
    expected = [None if 0b10110101 >> (i & 7) & 1 else 7 for i in range(n)]
    for impl in value_impls():
        assert impl.decode_row(data, [T.list(T.INT)]) == (expected,)


def test_null_bitmap_is_never_one_big_integer(monkeypatch):
    """The pure twin used to turn the bitmap into one integer and shift it once per element:
    quadratic in the list length. Recognise the linear decoder by the integers it builds."""
    widths = []

    class RecordingInt(int):
        @classmethod
        def from_bytes(cls, raw, *args, **kwargs):
            widths.append(len(raw))
            return int.from_bytes(raw, *args, **kwargs)

    monkeypatch.setattr(ve_pure, "int", RecordingInt, raising=False)
    n = 8 * 4096
    assert ve_pure.decode_row(_list_row(n, 0xFF), [T.list(T.INT)]) == ([None] * n,)
    assert max(widths, default=0) <= 8


def test_list_bitmap_padding_bits_still_checked():
    data = _row(_varint(3), b"\x0f", b"")   # bit 3 is padding for 3 elements
    for impl in value_impls():
        with pytest.raises(DecodeError, match="padding") as info:
            impl.decode_row(data, [T.list(T.INT)])
        assert info.value.offset == 4


# --- blocks: a native iterator agrees with the twin and is invalid once it raised ------------

def block_impls():
    return twins.implementations(_block_py, "_block")


ENTRIES = [(encode_full_key(1, b"key%03d" % i, 5), b"v%d" % i) for i in range(6)]


def _block(restart_interval: int = 2):
    """Content of a block of ENTRIES (same bytes from either builder) and its entry offsets."""
    builder = _block_py.BlockBuilder(restart_interval)
    for key, value in ENTRIES:
        builder.add(key, value)
    content = builder.finish_block()
    it = _block_py.BlockIterator(content)
    it.seek_to_first()
    offsets = []
    while it.is_valid():
        offsets.append(it._current)
        it.next()
    assert len(offsets) == len(ENTRIES)
    return bytearray(content), offsets


def test_seek_checks_every_restart_entry_it_compares():
    """Native seek compared restart keys in place without checking their value lengths, and
    returned a key where the twin (which parses each restart entry) raised."""
    content, offsets = _block()
    # entry 2 starts restart 1 (one-byte varints): its value length now runs past the block
    content[offsets[2] + 2] = 0x7F
    for impl in block_impls():
        block = impl.Block(bytes(content))
        with pytest.raises(CorruptionError, match="entry overruns the block") as info:
            block.iterator().seek(ENTRIES[0][0])
        assert info.value.offset == offsets[2]
        with pytest.raises(CorruptionError, match="entry overruns the block"):
            block.get(ENTRIES[0][0][:-8], 5)


def test_seek_reports_a_short_restart_key_alike():
    content, offsets = _block()
    content[offsets[2] + 1] = 5   # restart 1's key: 5 bytes, shorter than a full key
    for impl in block_impls():
        with pytest.raises(CorruptionError, match="key shorter than a full key") as info:
            impl.Block(bytes(content)).iterator().seek(ENTRIES[0][0])
        assert info.value.offset == offsets[2]


def test_iterator_that_raised_on_reposition_is_invalid():
    """A failed seek_to_first used to leave the native iterator "valid" on its old entry with
    a zero-length key, which a later bounded scan passed to memcmp as a negative length."""
    content, offsets = _block()
    content[offsets[0] + 2] = 0x7F   # entry 0's value overruns; seek_to_last never reads it
    for impl in block_impls():
        it = impl.Block(bytes(content)).iterator()
        it.seek_to_last()
        assert it.key() == ENTRIES[-1][0]
        with pytest.raises(CorruptionError):
            it.seek_to_first()
        assert not it.is_valid()
        with pytest.raises(AssertionError):
            it.key()
        assert it.collect_forward(ENTRIES[-1][0]) == ([], False)
        it.seek_to_last()                        # a fresh positioning works again
        assert (it.key(), it.value()) == (ENTRIES[-1][0], b"\x01" + ENTRIES[-1][1])


def test_iterator_that_raised_on_next_is_invalid():
    content, offsets = _block(restart_interval=16)
    content[offsets[3]] = 0   # entry 3 shares nothing now: its 9-byte suffix alone is its key
    for impl in block_impls():
        it = impl.Block(bytes(content)).iterator()
        it.seek_to_first()
        it.next(), it.next()
        assert it.key() == ENTRIES[2][0]
        with pytest.raises(CorruptionError, match="key shorter than a full key"):
            it.next()
        assert not it.is_valid()
        assert it.collect_forward() == ([], False)
        with pytest.raises(CorruptionError, match="key shorter than a full key"):
            it.seek(ENTRIES[3][0])
        assert not it.is_valid()


# --- manifest: an SST record whose meta lies outside its file is corrupt at decode -------------

@pytest.mark.parametrize("file_size,meta_offset", [(100, 200), (100, 69), (0, 0), (31, 0)])
def test_sst_record_with_meta_past_its_file_is_corrupt_at_decode(file_size, meta_offset):
    """``file_size < meta_offset`` used to decode, and the first read of the SST failed with
    InvalidArgumentError (a ranged read from meta_offset to file_size); the record itself is
    the corruption, so decoding a version or a delta holding it raises CorruptionError."""
    from hummock.sstable.meta import SstableInfo
    from hummock.version import HummockVersion, VersionDelta, apply
    from hummock.version_codec import decode_delta, decode_version, encode_delta, encode_version

    version = HummockVersion.empty()
    version = apply(version, VersionDelta.reserve_sst_ids(version, 10))

    def info(size, offset):
        return SstableInfo(1, encode_full_key(1, b"a", 5), encode_full_key(1, b"b", 5), size, offset,
                           5, 5, 2, 0, (1,))
    good = VersionDelta.commit(version, 1 << 16, [info(1000, 968)])   # meta_offset + 32 == file_size
    assert decode_delta(encode_delta(good)) == good
    assert decode_version(encode_version(apply(version, good))) == apply(version, good)
    bad = VersionDelta.commit(version, 1 << 16, [info(file_size, meta_offset)])
    with pytest.raises(CorruptionError, match="exceeds file_size") as raised:
        decode_delta(encode_delta(bad), object="manifest/d")
    assert raised.value.object == "manifest/d"
    with pytest.raises(CorruptionError, match="exceeds file_size"):
        decode_version(encode_version(apply(version, bad)), object="manifest/v")


# --- the schema argument: None before any schema was compiled -----------------------------------

def test_types_none_as_the_first_call_is_refused_alike():
    """The native value encoding cached its last schema as ``(types, node)``, starting from
    ``(None, None)``: ``types=None`` as the very first call matched the empty cache and read
    ``None`` as a compiled schema (an unchecked cast: garbage column counts). Run in a fresh
    interpreter, so no schema is cached yet."""
    import subprocess
    import sys
    code = ("from relational import _value_encoding_py as p\n"
            "import twins\n"
            "from relational.errors import SchemaError\n"
            "for impl in twins.implementations(p, '_value_encoding'):\n"
            "    for call in (lambda: impl.decode_row(b'\\x01\\x01\\x00\\x01', None),\n"
            "                 lambda: impl.encode_row([1], None)):\n"
            "        try:\n"
            "            call()\n"
            "        except SchemaError:\n"
            "            continue\n"
            "        raise SystemExit(f'{impl.__name__}: no SchemaError')\n")
    import os
    import pathlib
    tests = pathlib.Path(__file__).parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests), str(tests.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
