"""The per-SST filter over user keys: lets a point ``get`` skip SSTs that cannot hold its key.

One filter per SST, over its **user keys** (``table_id || table_key``, the full key without its
epoch: ``hummock.key.user_key``), so one probe answers for every version of a key. It is a
standard Bloom filter: ``k = round(bits_per_key * ln 2)`` probes (7 at the default 10 bits per
key, about 0.8% false positives) derived by double hashing from one XXH64 of the key with a
frozen seed. The byte layout is written down once, in ``docs/format.md`` section 5; the
measurements behind the choice (against pybloom-live) are in ``docs/filter.md``.

Guarantees:
1. No false negatives: for every key ``k`` given to :func:`build_filter`,
   ``FilterReader(build_filter(keys)).may_contain(k)`` is ``True``.
2. Determinism: the bytes depend only on the *set* of key hashes and ``bits_per_key`` (not on
   the order of the keys, nor on duplicates, nor on the platform or implementation).
3. Duplicates are counted once: the filter is sized by the number of distinct key hashes.
4. The empty filter (from an empty key list) rejects every key.
5. A malformed buffer raises :class:`~hummock.errors.CorruptionError` (with object, offset,
   expected, found) from the :class:`FilterReader` constructor; after construction no probe
   can fail or read outside the buffer. Bad arguments raise ``InvalidArgumentError``.

API (both implementations, chosen by :func:`hummock._twins.load`: ``native/_filter.pyx`` or
the pure twin ``hummock/sstable/_filter_py.py``; same names, bytes, exceptions and messages):

- ``build_filter(user_keys, bits_per_key=10) -> bytes``: ``user_keys`` a list or tuple of
  bytes-like keys in any order; ``bits_per_key`` an int in ``[1, 64]``.
- ``build_filter_from_hashes(key_hashes, bits_per_key=10) -> bytes``: the same from
  :func:`key_hash` values (identical bytes).
- ``prefix_hashes(user_keys, prefix_lens) -> list[int]`` and ``build_prefix_filter(user_keys,
  prefix_lens, bits_per_key=10) -> bytes``: the *prefix filter* of an SST (docs/format.md
  section 4.3), the same Bloom layout over the distinct ``table_id || table_key[:n]`` of the
  keys whose table declares a prefix length ``n`` in ``prefix_lens`` (a dict of table id ->
  n in [1, 65535]); keys shorter than ``4 + n`` bytes add nothing (no probe of length >= n can
  match them). A probe hashes ``table_id || prefix[:n]`` with :func:`key_hash`.
- ``key_hash(user_key) -> int``: the 64-bit hash the filter uses, so ``multi_get`` can hash a
  key once and probe every candidate SST with ``FilterReader.may_contain_hash``.
- ``xxh64(data, seed=0) -> int``: plain XXH64, exposed for tests and tools.
- ``FilterReader(data, *, object_name="filter")``: parses and checks the header once;
  ``may_contain(user_key)``, ``may_contain_many(user_keys) -> list[bool]``,
  ``may_contain_hash(key_hash)``; read-only ``num_keys``, ``num_bits``, ``num_probes``,
  ``nbytes``, ``data``; ``_check()`` verifies every invariant (tests, ``hummock verify``).

Thread safety: all functions are pure; a ``FilterReader`` is immutable and may be shared.
Callers: the SST builder (build), the SST reader and the read path (probe), tools and tests.
"""

from __future__ import annotations

from hummock import _twins

__all__ = [
    "KIND_BLOOM", "FORMAT_VERSION", "HEADER_LEN", "HASH_SEED", "MIN_PROBES", "MAX_PROBES",
    "MIN_BITS", "MAX_BITS", "DEFAULT_BITS_PER_KEY", "MIN_BITS_PER_KEY", "MAX_BITS_PER_KEY",
    "build_filter", "build_filter_from_hashes", "key_hash", "xxh64", "FilterReader",
    "build_prefix_filter", "prefix_hashes",
    "IMPLEMENTATION",
]

KIND_BLOOM = 1  # header byte 0: a standard Bloom filter; part of the on-disk format, do not change
FORMAT_VERSION = 1  # header byte 1; part of the on-disk format, do not change
HEADER_LEN = 12  # kind, version, probes, reserved, num_keys u32le, num_bits u32le; do not change
# XXH64 seed of every key hash: b"HUMMOCK\0" read big-endian; part of the on-disk format, do
# not change (changing it silently turns every stored filter into garbage: false negatives)
HASH_SEED = 0x48554D4D4F434B00
MIN_PROBES = 1  # part of the on-disk format, do not change
MAX_PROBES = 30  # part of the on-disk format, do not change
MIN_BITS = 64  # smallest bit array of a non-empty filter; part of the on-disk format, do not change
MAX_BITS = 0xFFFF_FFF8  # largest bit array (u32, multiple of 8); part of the on-disk format
# Build-time choices (not stored; any value gives a readable filter):
DEFAULT_BITS_PER_KEY = 10  # ~0.8% false positives with 7 probes
MIN_BITS_PER_KEY = 1
MAX_BITS_PER_KEY = 64

_impl = _twins.load("_filter", "hummock.sstable._filter_py")

#: ``"native"`` or ``"pure"``: which implementation this process uses.
IMPLEMENTATION = "native" if _twins.LOADED["_filter"] else "pure"

build_filter = _impl.build_filter
build_filter_from_hashes = _impl.build_filter_from_hashes
key_hash = _impl.key_hash
xxh64 = _impl.xxh64
FilterReader = _impl.FilterReader
build_prefix_filter = _impl.build_prefix_filter
prefix_hashes = _impl.prefix_hashes
