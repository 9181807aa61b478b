"""Pure-Python twin of ``native/_filter.pyx``: the per-SST Bloom filter over user keys.

The byte layout is written down once, in ``docs/format.md`` section 5, and its constants live
in :mod:`hummock.sstable.filter`; this module and ``native/_filter.pyx`` implement it with the
same names, signatures, exceptions (with the same messages) and byte-identical output.
``tests/test_filter.py`` checks both against golden bytes and against each other.

This is the reference implementation: short and plain, not fast. The hash is XXH64 from the
``xxhash`` package (``xxh64_intdigest``), which the native module re-implements in Cython.

Users import from :mod:`hummock.sstable.filter`, which picks the native module or this twin
(DESIGN.md section 2); only that facade and the tests import this module directly.
"""

from __future__ import annotations

import array
import struct

from xxhash import xxh64_intdigest

from hummock.errors import CorruptionError, InvalidArgumentError

# Mirrors of hummock.sstable.filter's frozen constants (that module loads this one, so they
# cannot be imported from there); tests/test_filter.py pins that they agree.
_KIND_BLOOM = 1                   # part of the on-disk format, do not change
_FORMAT_VERSION = 1               # part of the on-disk format, do not change
_HEADER_LEN = 12                  # part of the on-disk format, do not change
_HASH_SEED = 0x48554D4D4F434B00   # b"HUMMOCK\0" big-endian; part of the on-disk format
_MIN_PROBES = 1                   # part of the on-disk format, do not change
_MAX_PROBES = 30                  # part of the on-disk format, do not change
_MIN_BITS = 64                    # smallest non-empty bit array; part of the on-disk format
_MAX_BITS = 0xFFFFFFF8            # largest bit array (u32, multiple of 8); on-disk format
_MIN_BITS_PER_KEY = 1
_MAX_BITS_PER_KEY = 64
_MAX_U32 = 0xFFFFFFFF
_MAX_U64 = 0xFFFFFFFFFFFFFFFF

_HEADER = struct.Struct("<BBBBII")  # kind, version, probes, reserved, num_keys, num_bits


def _as_bytes(value, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(
        f"{what} must be bytes-like (bytes, bytearray, memoryview), got {type(value).__name__}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _u64(value, what: str) -> int:
    if _is_int(value) and 0 <= value <= _MAX_U64:
        return value
    raise InvalidArgumentError(f"{what} must be an int in [0, {_MAX_U64}], got {value!r}")


def _sequence(value, what: str, items: str) -> list | tuple:
    if isinstance(value, (list, tuple)):
        return value
    raise InvalidArgumentError(
        f"{what} must be a list or tuple of {items}, got {type(value).__name__}")


def _check_bits_per_key(bits_per_key) -> int:
    if _is_int(bits_per_key) and _MIN_BITS_PER_KEY <= bits_per_key <= _MAX_BITS_PER_KEY:
        return bits_per_key
    raise InvalidArgumentError(f"bits_per_key must be an int in [{_MIN_BITS_PER_KEY}, "
                               f"{_MAX_BITS_PER_KEY}], got {bits_per_key!r}")


# ---- hashing ------------------------------------------------------------------------------

def xxh64(data, seed=0) -> int:
    """Return XXH64 of ``data`` with ``seed`` (the reference algorithm, as ``xxhash`` has it).

    REQUIRES: ``data`` bytes-like, ``seed`` an int in [0, 2**64 - 1]; else InvalidArgumentError.
    """
    data = _as_bytes(data, "data")
    return xxh64_intdigest(data, _u64(seed, "seed"))


def key_hash(user_key) -> int:
    """Return the filter's 64-bit hash of ``user_key``: XXH64 with the frozen filter seed.

    Hash a key once and probe many filters with :meth:`FilterReader.may_contain_hash`.
    REQUIRES: ``user_key`` bytes-like; else InvalidArgumentError.
    """
    return xxh64_intdigest(_as_bytes(user_key, "user_key"), _HASH_SEED)


# ---- building -----------------------------------------------------------------------------

def _probes(bits_per_key: int) -> int:
    # round(bits_per_key * ln 2) in integer arithmetic, so both implementations agree exactly.
    return max(_MIN_PROBES, min(_MAX_PROBES, (bits_per_key * 693147 + 500000) // 1000000))


def _num_bits(num_keys: int, bits_per_key: int) -> int:
    if num_keys == 0:
        return 0
    bits = (num_keys * bits_per_key + 7) // 8 * 8
    return min(max(bits, _MIN_BITS), _MAX_BITS)


def _build(hashes: list[int], bits_per_key: int) -> bytes:
    num_keys = len(set(hashes))  # distinct hashes: duplicates do not grow the filter
    num_bits = _num_bits(num_keys, bits_per_key)
    probes = _probes(bits_per_key)
    bits = bytearray(num_bits // 8)
    if num_bits:
        for h in set(hashes):
            g = h & _MAX_U32
            delta = h >> 32
            for _ in range(probes):
                b = (g * num_bits) >> 32  # "fastrange": maps g in [0, 2**32) onto [0, num_bits)
                bits[b >> 3] |= 1 << (b & 7)
                g = (g + delta) & _MAX_U32
    header = _HEADER.pack(_KIND_BLOOM, _FORMAT_VERSION, probes, 0,
                          min(num_keys, _MAX_U32), num_bits)
    return header + bytes(bits)


def build_filter(user_keys, bits_per_key=10) -> bytes:
    """Return the serialized filter over ``user_keys`` (docs/format.md section 5).

    ``user_keys``: a list or tuple of bytes-like user keys, in any order; duplicates are
    counted once (the filter is sized by the number of distinct key hashes). An empty list
    gives an empty filter that rejects every key. ``bits_per_key``: an int in [1, 64].
    Raises InvalidArgumentError (naming the first bad key's index) on bad arguments.
    """
    user_keys = _sequence(user_keys, "user_keys", "bytes-like keys")
    bits_per_key = _check_bits_per_key(bits_per_key)
    hashes = [xxh64_intdigest(_as_bytes(k, f"user_keys[{i}]"), _HASH_SEED)
              for i, k in enumerate(user_keys)]
    return _build(hashes, bits_per_key)


def build_filter_from_hashes(key_hashes, bits_per_key=10) -> bytes:
    """Like :func:`build_filter`, from precomputed :func:`key_hash` values.

    ``key_hashes``: a list or tuple of ints in [0, 2**64 - 1], or an ``array.array('Q')`` (what
    the block builder collects). Same bytes as ``build_filter`` over the keys the hashes came
    from.
    """
    if isinstance(key_hashes, array.array) and key_hashes.typecode == "Q":
        return _build(list(key_hashes), _check_bits_per_key(bits_per_key))
    key_hashes = _sequence(key_hashes, "key_hashes", "ints")
    bits_per_key = _check_bits_per_key(bits_per_key)
    hashes = [_u64(h, f"key_hashes[{i}]") for i, h in enumerate(key_hashes)]
    return _build(hashes, bits_per_key)


_MAX_PREFIX_LEN = 0xFFFF


def _prefix_lens(prefix_lens) -> dict:
    if not isinstance(prefix_lens, dict):
        raise InvalidArgumentError(
            f"prefix_lens must be a dict of table id -> prefix length, got {type(prefix_lens).__name__}")
    for table_id, n in prefix_lens.items():
        if not (_is_int(table_id) and 0 <= table_id <= _MAX_U32):
            raise InvalidArgumentError(f"prefix_lens: table id must be an int in [0, {_MAX_U32}], got {table_id!r}")
        if not (_is_int(n) and 1 <= n <= _MAX_PREFIX_LEN):
            raise InvalidArgumentError(
                f"prefix_lens: prefix length of table {table_id} must be an int in [1, {_MAX_PREFIX_LEN}], got {n!r}")
    return prefix_lens


def prefix_hashes(user_keys, prefix_lens) -> list[int]:
    """The :func:`key_hash` of every distinct key prefix a prefix filter holds: for each user key
    (``table_id (4 bytes) || table_key``) whose table has a length ``n`` in ``prefix_lens`` and
    whose table key has at least ``n`` bytes, its first ``4 + n`` bytes. Consecutive equal
    prefixes are hashed once (keys usually arrive sorted); order otherwise does not matter.

    REQUIRES: ``user_keys`` a list or tuple of bytes-like keys of at least 4 bytes;
    ``prefix_lens`` a dict of table id (u32) -> prefix length in [1, 65535].
    """
    user_keys = _sequence(user_keys, "user_keys", "bytes-like keys")
    lens = _prefix_lens(prefix_lens)
    out = []
    table = plen = None
    last = None
    for i, k in enumerate(user_keys):
        if type(k) is not bytes:
            k = _as_bytes(k, f"user_keys[{i}]")
        if len(k) < 4:
            raise InvalidArgumentError(f"user_keys[{i}] is shorter than a table id (4 bytes)")
        if k[:4] != table:
            table = k[:4]
            plen = lens.get(int.from_bytes(table, "big"))
            last = None
        if plen is None or len(k) < 4 + plen:
            continue
        prefix = k[:4 + plen]
        if prefix != last:
            out.append(xxh64_intdigest(prefix, _HASH_SEED))
            last = prefix
    return out


def build_prefix_filter(user_keys, prefix_lens, bits_per_key=10) -> bytes:
    """The filter over :func:`prefix_hashes` ``(user_keys, prefix_lens)`` (same layout as
    :func:`build_filter`; the empty filter when no key has a declared prefix)."""
    bits_per_key = _check_bits_per_key(bits_per_key)
    return _build(prefix_hashes(user_keys, prefix_lens), bits_per_key)


# ---- reading ------------------------------------------------------------------------------

def _parse_header(data: bytes, name: str) -> tuple[int, int, int]:
    """Validate the header of ``data``; return ``(probes, num_keys, num_bits)``."""
    if len(data) < _HEADER_LEN:
        raise CorruptionError("filter is truncated: shorter than its header", object=name,
                              offset=0, expected=_HEADER_LEN, found=len(data))
    kind, version, probes, reserved, num_keys, num_bits = _HEADER.unpack_from(data, 0)
    if kind != _KIND_BLOOM:
        raise CorruptionError("unknown filter kind", object=name, offset=0,
                              expected=_KIND_BLOOM, found=kind)
    if version != _FORMAT_VERSION:
        raise CorruptionError("unknown filter format version", object=name, offset=1,
                              expected=_FORMAT_VERSION, found=version)
    if not _MIN_PROBES <= probes <= _MAX_PROBES:
        raise CorruptionError("filter probe count out of range", object=name, offset=2,
                              expected=f"{_MIN_PROBES}..{_MAX_PROBES}", found=probes)
    if reserved != 0:
        raise CorruptionError("filter reserved byte is not zero", object=name, offset=3,
                              expected=0, found=reserved)
    if num_bits != 8 * (len(data) - _HEADER_LEN):
        raise CorruptionError("filter bit count does not match its length", object=name,
                              offset=8, expected=8 * (len(data) - _HEADER_LEN), found=num_bits)
    if (num_keys == 0) != (num_bits == 0) or 0 < num_bits < _MIN_BITS:
        raise CorruptionError("filter key count and bit count disagree", object=name,
                              offset=4, expected=None, found=(num_keys, num_bits))
    return probes, num_keys, num_bits


class FilterReader:
    """A parsed filter: the header is validated once here, then probes do no parsing.

    ``FilterReader(data, *, object_name="filter")``: ``data`` bytes-like (copied to ``bytes``,
    so the reader never sees later changes); ``object_name`` names the buffer in errors (the
    SST reader passes its object path). Raises CorruptionError if the header is malformed,
    InvalidArgumentError if ``data`` is not bytes-like.

    Answers: ``False`` means the key is certainly absent; ``True`` means it may be present.
    Immutable after construction, so it is safe to share between threads.
    """

    __slots__ = ("_data", "_name", "_probes", "_num_keys", "_num_bits", "_bits")

    def __init__(self, data, *, object_name="filter"):
        if not isinstance(object_name, str):
            raise InvalidArgumentError(
                f"object_name must be a str, got {type(object_name).__name__}")
        self._data = _as_bytes(data, "data")
        self._name = object_name
        self._probes, self._num_keys, self._num_bits = _parse_header(self._data, object_name)
        self._bits = self._data[_HEADER_LEN:]

    @property
    def data(self) -> bytes:
        """The serialized filter."""
        return self._data

    @property
    def num_probes(self) -> int:
        """Bits probed per key (k)."""
        return self._probes

    @property
    def num_keys(self) -> int:
        """Distinct key hashes the filter was built from (saturates at 2**32 - 1)."""
        return self._num_keys

    @property
    def num_bits(self) -> int:
        """Size of the bit array; 0 for the empty filter."""
        return self._num_bits

    @property
    def nbytes(self) -> int:
        """Length of the serialized filter, header included."""
        return len(self._data)

    def __repr__(self) -> str:
        return (f"FilterReader(num_keys={self._num_keys}, num_bits={self._num_bits}, "
                f"num_probes={self._probes})")

    def may_contain_hash(self, key_hash) -> bool:
        """Probe with a :func:`key_hash` value. REQUIRES: an int in [0, 2**64 - 1]."""
        return self._probe(_u64(key_hash, "key_hash"))

    def may_contain(self, user_key) -> bool:
        """False if ``user_key`` is certainly not in the filter. REQUIRES: bytes-like."""
        return self._probe(xxh64_intdigest(_as_bytes(user_key, "user_key"), _HASH_SEED))

    def may_contain_many(self, user_keys) -> list[bool]:
        """:meth:`may_contain` of each key of a list or tuple, in order."""
        user_keys = _sequence(user_keys, "user_keys", "bytes-like keys")
        return [self._probe(xxh64_intdigest(_as_bytes(k, f"user_keys[{i}]"), _HASH_SEED))
                for i, k in enumerate(user_keys)]

    def _probe(self, h: int) -> bool:
        num_bits = self._num_bits
        if num_bits == 0:
            return False
        bits = self._bits
        g = h & _MAX_U32
        delta = h >> 32
        for _ in range(self._probes):
            b = (g * num_bits) >> 32
            if not bits[b >> 3] & (1 << (b & 7)):
                return False
            g = (g + delta) & _MAX_U32
        return True

    def _check(self) -> None:
        """Verify every structural invariant; raise CorruptionError naming the first broken one.

        Beyond the header checks of the constructor: the empty filter has no bit set; a
        non-empty one has between 1 and ``num_keys * num_probes`` bits set.
        """
        probes, num_keys, num_bits = _parse_header(self._data, self._name)
        if (probes, num_keys, num_bits) != (self._probes, self._num_keys, self._num_bits):
            raise CorruptionError("filter header changed after parsing", object=self._name,
                                  offset=0)
        popcount = int.from_bytes(self._bits, "little").bit_count()
        limit = min(num_bits, num_keys * probes)
        if not (popcount == 0 if num_keys == 0 else 1 <= popcount <= limit):
            raise CorruptionError("filter has an impossible number of bits set",
                                  object=self._name, offset=_HEADER_LEN,
                                  expected=f"1..{limit}" if num_keys else 0, found=popcount)
