# cython: language_level=3
"""Native fast path for the per-SST Bloom filter; the twin of ``hummock/sstable/_filter_py.py``.

Implements the layout written down in ``docs/format.md`` section 5 (constants in
``hummock/sstable/filter.py``), including XXH64 (the reference algorithm of Yann Collet's
xxHash, which the twin takes from the ``xxhash`` package). Same public names, signatures,
exceptions and messages as the twin, byte-identical output; ``tests/test_filter.py`` checks
both against golden bytes, against the ``xxhash`` package and against each other.

Safety: input is never trusted. Arguments are type- and range-checked before conversion;
non-``bytes`` keys (``bytearray``, ``memoryview``) are copied with ``bytes()`` first, exactly
as the twin does, so no buffer can change or be released under a raw pointer. A reader keeps
its own ``bytes`` object alive for as long as it holds a pointer into it, and accepts the
buffer only after the header check proved ``num_bits == 8 * (len - 12)``; every probe index
is ``(g * num_bits) >> 32`` with ``g < 2**32``, hence ``< num_bits``, hence its byte index is
``< len - 12``: no read leaves the buffer. The build writes only into a buffer it sized itself
by the same rule.

Callers: :mod:`hummock.sstable.filter` (through :func:`hummock._twins.load`) and the tests.
No global mutable state; a ``FilterReader`` is immutable and safe to share between threads.
"""

from cpython.bool cimport PyBool_Check
from cpython.bytearray cimport PyByteArray_Check
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.list cimport PyList_Check
from cpython.long cimport PyLong_Check
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.memoryview cimport PyMemoryView_Check
from cpython.tuple cimport PyTuple_Check
from libc.stdint cimport uint8_t, uint32_t, uint64_t

from native._xxh64 cimport _load32, xxh64 as _xxh64
from libc.string cimport memcmp, memset

import array

from hummock.errors import CorruptionError, InvalidArgumentError


cdef extern from "Python.h":
    # Declared without an exception clause so that a failure (negative or too large) can be
    # turned into InvalidArgumentError here instead of propagating as OverflowError.
    unsigned long long _as_u64 "PyLong_AsUnsignedLongLong"(object) noexcept


# Mirrors of hummock.sstable.filter's constants: part of the on-disk format, do not change.
cdef enum:
    KIND_BLOOM = 1          # part of the on-disk format, do not change
    FORMAT_VERSION = 1      # part of the on-disk format, do not change
    HEADER_LEN = 12         # part of the on-disk format, do not change
    MIN_PROBES = 1          # part of the on-disk format, do not change
    MAX_PROBES = 30         # part of the on-disk format, do not change
    MIN_BITS = 64           # part of the on-disk format, do not change
    MIN_BITS_PER_KEY = 1
    MAX_BITS_PER_KEY = 64
cdef uint64_t HASH_SEED = 0x48554D4D4F434B00ULL   # part of the on-disk format, do not change
cdef uint64_t MAX_BITS = 0xFFFFFFF8ULL            # part of the on-disk format, do not change
cdef uint64_t MAX_U32 = 0xFFFFFFFFULL

# The same constants for Python, so tests can pin that the three copies agree.
_KIND_BLOOM = KIND_BLOOM
_FORMAT_VERSION = FORMAT_VERSION
_HEADER_LEN = HEADER_LEN
_HASH_SEED = HASH_SEED
_MIN_PROBES = MIN_PROBES
_MAX_PROBES = MAX_PROBES
_MIN_BITS = MIN_BITS
_MAX_BITS = MAX_BITS


# ---- hashing (XXH64 from native/_xxh64.pxd, shared with native/_vnode.pyx) -----------

cdef uint64_t filter_key_hash(const uint8_t* p, size_t n) noexcept nogil:
    """The hash a filter stores for the user key ``p[:n]`` (XXH64 with the format's seed)."""
    return _xxh64(p, n, HASH_SEED)


# ---- argument checks (messages identical to the twin's) -----------------------------------

cdef inline bytes _as_bytes(object value, str what):
    if PyBytes_Check(value):
        return <bytes>value
    if PyByteArray_Check(value) or PyMemoryView_Check(value):
        return bytes(value)
    raise InvalidArgumentError(
        f"{what} must be bytes-like (bytes, bytearray, memoryview), got {type(value).__name__}")


cdef inline uint64_t _hash_key(object value, str what) except? 0:
    cdef bytes data = _as_bytes(value, what)
    return _xxh64(<const uint8_t*>PyBytes_AS_STRING(data), <size_t>PyBytes_GET_SIZE(data),
                  HASH_SEED)


cdef inline uint64_t _u64(object value, str what) except? 0:
    cdef unsigned long long v
    if PyLong_Check(value) and not PyBool_Check(value):
        v = _as_u64(value)
        if not (v == <unsigned long long>-1 and PyErr_Occurred() != NULL):
            return v
        PyErr_Clear()  # OverflowError: negative or wider than 64 bits
    raise InvalidArgumentError(f"{what} must be an int in [0, 18446744073709551615], got {value!r}")


cdef inline list _sequence(object value, str what, str items):
    # A private list copy: nothing can grow or shrink it while we index it.
    if PyList_Check(value) or PyTuple_Check(value):
        return list(value)
    raise InvalidArgumentError(
        f"{what} must be a list or tuple of {items}, got {type(value).__name__}")


cdef inline int _check_bits_per_key(object bits_per_key) except -1:
    if (PyLong_Check(bits_per_key) and not PyBool_Check(bits_per_key)
            and MIN_BITS_PER_KEY <= bits_per_key <= MAX_BITS_PER_KEY):
        return <int>bits_per_key
    raise InvalidArgumentError(f"bits_per_key must be an int in [{MIN_BITS_PER_KEY}, "
                               f"{MAX_BITS_PER_KEY}], got {bits_per_key!r}")


# ---- hashing ------------------------------------------------------------------------------

def xxh64(data, seed=0):
    """Return XXH64 of ``data`` with ``seed`` (the reference algorithm, as ``xxhash`` has it).

    REQUIRES: ``data`` bytes-like, ``seed`` an int in [0, 2**64 - 1]; else InvalidArgumentError.
    """
    cdef bytes b = _as_bytes(data, "data")
    cdef uint64_t s = _u64(seed, "seed")
    return _xxh64(<const uint8_t*>PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b), s)


def key_hash(user_key):
    """Return the filter's 64-bit hash of ``user_key``: XXH64 with the frozen filter seed.

    Hash a key once and probe many filters with :meth:`FilterReader.may_contain_hash`.
    REQUIRES: ``user_key`` bytes-like; else InvalidArgumentError.
    """
    return _hash_key(user_key, "user_key")


# ---- building -----------------------------------------------------------------------------

cdef inline int _probes(int bits_per_key) noexcept nogil:
    # round(bits_per_key * ln 2) in integer arithmetic, so both implementations agree exactly.
    cdef int k = (bits_per_key * 693147 + 500000) // 1000000
    return MIN_PROBES if k < MIN_PROBES else (MAX_PROBES if k > MAX_PROBES else k)


cdef Py_ssize_t _count_distinct(const uint64_t* hashes, Py_ssize_t n) except -1:
    """Number of distinct values among ``hashes[0 .. n)`` (open addressing, linear probing)."""
    if n == 0:
        return 0
    cdef size_t cap = 16
    while cap < <size_t>n + <size_t>(n // 2):  # load factor <= 2/3
        cap <<= 1
    cdef size_t mask = cap - 1
    # Slot value 0 means "empty"; the hash 0 itself is tracked by a flag instead.
    cdef uint64_t* table = <uint64_t*>PyMem_Malloc(cap * sizeof(uint64_t))
    if table == NULL:
        raise MemoryError()
    memset(table, 0, cap * sizeof(uint64_t))
    cdef Py_ssize_t i, distinct = 0
    cdef bint seen_zero = False
    cdef uint64_t h
    cdef size_t slot
    with nogil:
        for i in range(n):
            h = hashes[i]
            if h == 0:
                if not seen_zero:
                    seen_zero = True
                    distinct += 1
                continue
            slot = <size_t>(h ^ (h >> 32)) & mask
            while table[slot] != 0 and table[slot] != h:
                slot = (slot + 1) & mask   # terminates: at most 2/3 of the slots are used
            if table[slot] == 0:
                table[slot] = h
                distinct += 1
    PyMem_Free(table)
    return distinct


cdef bytes _build(const uint64_t* hashes, Py_ssize_t n, int bits_per_key):
    cdef Py_ssize_t num_keys = _count_distinct(hashes, n)
    cdef int probes = _probes(bits_per_key)
    cdef uint64_t num_bits = 0
    if num_keys > 0:
        num_bits = (<uint64_t>num_keys * <uint64_t>bits_per_key + 7) // 8 * 8
        if num_bits < MIN_BITS:
            num_bits = MIN_BITS
        if num_bits > MAX_BITS:
            num_bits = MAX_BITS
    cdef uint64_t stored_keys = <uint64_t>num_keys if <uint64_t>num_keys < MAX_U32 else MAX_U32
    cdef Py_ssize_t size = HEADER_LEN + <Py_ssize_t>(num_bits // 8)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    memset(p, 0, <size_t>size)
    p[0] = KIND_BLOOM
    p[1] = FORMAT_VERSION
    p[2] = <uint8_t>probes
    p[3] = 0
    cdef int j
    for j in range(4):
        p[4 + j] = <uint8_t>(stored_keys >> (8 * j))
        p[8 + j] = <uint8_t>(num_bits >> (8 * j))
    cdef uint8_t* bits = p + HEADER_LEN
    cdef Py_ssize_t i
    cdef uint32_t g, delta
    cdef uint64_t b
    if num_bits:
        with nogil:
            for i in range(n):
                g = <uint32_t>hashes[i]
                delta = <uint32_t>(hashes[i] >> 32)
                for j in range(probes):
                    b = (<uint64_t>g * num_bits) >> 32   # < num_bits: g < 2**32
                    bits[b >> 3] |= <uint8_t>(1 << (b & 7))
                    g += delta                          # wraps modulo 2**32
    return out


def build_filter(user_keys, bits_per_key=10):
    """Return the serialized filter over ``user_keys`` (docs/format.md section 5).

    ``user_keys``: a list or tuple of bytes-like user keys, in any order; duplicates are
    counted once (the filter is sized by the number of distinct key hashes). An empty list
    gives an empty filter that rejects every key. ``bits_per_key``: an int in [1, 64].
    Raises InvalidArgumentError (naming the first bad key's index) on bad arguments.
    """
    cdef list keys = _sequence(user_keys, "user_keys", "bytes-like keys")
    cdef int bpk = _check_bits_per_key(bits_per_key)
    cdef Py_ssize_t n = len(keys), i
    cdef uint64_t* hashes = <uint64_t*>PyMem_Malloc(<size_t>(n if n > 0 else 1) * sizeof(uint64_t))
    if hashes == NULL:
        raise MemoryError()
    cdef object k
    try:
        for i in range(n):
            k = keys[i]
            if PyBytes_Check(k):
                hashes[i] = _xxh64(<const uint8_t*>PyBytes_AS_STRING(k),
                                   <size_t>PyBytes_GET_SIZE(k), HASH_SEED)
            else:
                hashes[i] = _hash_key(k, f"user_keys[{i}]")
        return _build(hashes, n, bpk)
    finally:
        PyMem_Free(hashes)


def build_filter_from_hashes(key_hashes, bits_per_key=10):
    """Like :func:`build_filter`, from precomputed :func:`key_hash` values.

    ``key_hashes``: a list or tuple of ints in [0, 2**64 - 1], or an ``array.array('Q')`` (what
    the block builder collects). Same bytes as ``build_filter`` over the keys the hashes came
    from.
    """
    cdef const uint64_t[::1] packed
    if isinstance(key_hashes, array.array) and key_hashes.typecode == "Q":
        packed = key_hashes
        if packed.shape[0] == 0:
            return _build(NULL, 0, _check_bits_per_key(bits_per_key))
        return _build(<uint64_t*>&packed[0], packed.shape[0], _check_bits_per_key(bits_per_key))
    cdef list values = _sequence(key_hashes, "key_hashes", "ints")
    cdef int bpk = _check_bits_per_key(bits_per_key)
    cdef Py_ssize_t n = len(values), i
    cdef uint64_t* hashes = <uint64_t*>PyMem_Malloc(<size_t>(n if n > 0 else 1) * sizeof(uint64_t))
    if hashes == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            hashes[i] = _u64(values[i], f"key_hashes[{i}]")
        return _build(hashes, n, bpk)
    finally:
        PyMem_Free(hashes)


DEF MAX_PREFIX_LEN = 0xFFFF


cdef dict _prefix_lens(object prefix_lens):
    if not isinstance(prefix_lens, dict):
        raise InvalidArgumentError(
            f"prefix_lens must be a dict of table id -> prefix length, got {type(prefix_lens).__name__}")
    for table_id, n in (<dict>prefix_lens).items():
        if not (PyLong_Check(table_id) and not PyBool_Check(table_id) and 0 <= table_id <= MAX_U32):
            raise InvalidArgumentError(f"prefix_lens: table id must be an int in [0, {MAX_U32}], got {table_id!r}")
        if not (PyLong_Check(n) and not PyBool_Check(n) and 1 <= n <= MAX_PREFIX_LEN):
            raise InvalidArgumentError(
                f"prefix_lens: prefix length of table {table_id} must be an int in [1, {MAX_PREFIX_LEN}], got {n!r}")
    return <dict>prefix_lens


cdef Py_ssize_t _prefix_hashes(list keys, dict lens, uint64_t* out) except -1:
    """Fill ``out`` (room for ``len(keys)``) with the twin's ``prefix_hashes``; return the count."""
    cdef Py_ssize_t n = len(keys), i, count = 0, kn
    cdef Py_ssize_t plen = -1, last_len = -1
    cdef uint32_t table = 0
    cdef bint have_table = False
    cdef const uint8_t* p
    cdef const uint8_t* last = NULL
    cdef bytes kb
    cdef bytes last_obj = None       # keeps ``last`` alive
    cdef object k
    cdef uint32_t t
    for i in range(n):
        k = keys[i]
        kb = <bytes>k if PyBytes_Check(k) else _as_bytes(k, f"user_keys[{i}]")
        kn = PyBytes_GET_SIZE(kb)
        if kn < 4:
            raise InvalidArgumentError(f"user_keys[{i}] is shorter than a table id (4 bytes)")
        p = <const uint8_t*>PyBytes_AS_STRING(kb)
        t = (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]
        if not have_table or t != table:
            have_table, table = True, t
            found = lens.get(t)
            plen = -1 if found is None else <Py_ssize_t>found
            last = NULL
        if plen < 0 or kn < 4 + plen:
            continue
        if last != NULL and memcmp(last, p, <size_t>(4 + plen)) == 0:
            continue
        out[count] = _xxh64(p, <size_t>(4 + plen), HASH_SEED)
        count += 1
        last, last_obj = p, kb
    return count


def prefix_hashes(user_keys, prefix_lens):
    """See the twin: the key hashes of the distinct declared prefixes of ``user_keys``."""
    cdef list keys = _sequence(user_keys, "user_keys", "bytes-like keys")
    cdef dict lens = _prefix_lens(prefix_lens)
    cdef Py_ssize_t n = len(keys), count, i
    cdef uint64_t* hashes = <uint64_t*>PyMem_Malloc(<size_t>(n if n > 0 else 1) * sizeof(uint64_t))
    if hashes == NULL:
        raise MemoryError()
    try:
        count = _prefix_hashes(keys, lens, hashes)
        return [hashes[i] for i in range(count)]
    finally:
        PyMem_Free(hashes)


def build_prefix_filter(user_keys, prefix_lens, bits_per_key=10):
    """See the twin: the filter over ``prefix_hashes(user_keys, prefix_lens)``."""
    cdef int bpk = _check_bits_per_key(bits_per_key)
    cdef list keys = _sequence(user_keys, "user_keys", "bytes-like keys")
    cdef dict lens = _prefix_lens(prefix_lens)
    cdef Py_ssize_t n = len(keys), count
    cdef uint64_t* hashes = <uint64_t*>PyMem_Malloc(<size_t>(n if n > 0 else 1) * sizeof(uint64_t))
    if hashes == NULL:
        raise MemoryError()
    try:
        count = _prefix_hashes(keys, lens, hashes)
        return _build(hashes, count, bpk)
    finally:
        PyMem_Free(hashes)


# ---- reading ------------------------------------------------------------------------------

cdef inline uint32_t _get_u32le(const uint8_t* p) noexcept nogil:
    return _load32(p)


cdef class FilterReader:
    """A parsed filter: the header is validated once here, then probes do no parsing.

    ``FilterReader(data, *, object_name="filter")``: ``data`` bytes-like (copied to ``bytes``,
    so the reader never sees later changes); ``object_name`` names the buffer in errors (the
    SST reader passes its object path). Raises CorruptionError if the header is malformed,
    InvalidArgumentError if ``data`` is not bytes-like.

    Answers: ``False`` means the key is certainly absent; ``True`` means it may be present.
    Immutable after construction, so it is safe to share between threads.
    """

    def __init__(self, data, *, object_name="filter"):
        if not isinstance(object_name, str):
            raise InvalidArgumentError(
                f"object_name must be a str, got {type(object_name).__name__}")
        cdef bytes b = _as_bytes(data, "data")
        cdef uint32_t probes, num_keys
        cdef uint64_t num_bits
        _parse_header(b, object_name, &probes, &num_keys, &num_bits)
        self._data = b
        self._name = object_name
        self._probes_n = <int>probes
        self._num_keys = num_keys
        self._num_bits = num_bits
        self._bits = <const uint8_t*>PyBytes_AS_STRING(b) + HEADER_LEN

    @property
    def data(self):
        """The serialized filter."""
        return self._data

    @property
    def num_probes(self):
        """Bits probed per key (k)."""
        return self._probes_n

    @property
    def num_keys(self):
        """Distinct key hashes the filter was built from (saturates at 2**32 - 1)."""
        return self._num_keys

    @property
    def num_bits(self):
        """Size of the bit array; 0 for the empty filter."""
        return self._num_bits

    @property
    def nbytes(self):
        """Length of the serialized filter, header included."""
        return PyBytes_GET_SIZE(self._data)

    def __repr__(self):
        return (f"FilterReader(num_keys={self._num_keys}, num_bits={self._num_bits}, "
                f"num_probes={self._probes_n})")

    def may_contain_hash(self, key_hash):
        """Probe with a :func:`key_hash` value. REQUIRES: an int in [0, 2**64 - 1]."""
        return self.probe(_u64(key_hash, "key_hash"))

    def may_contain(self, user_key):
        """False if ``user_key`` is certainly not in the filter. REQUIRES: bytes-like."""
        if PyBytes_Check(user_key):
            return self.probe(_xxh64(<const uint8_t*>PyBytes_AS_STRING(user_key),
                                      <size_t>PyBytes_GET_SIZE(user_key), HASH_SEED))
        return self.probe(_hash_key(user_key, "user_key"))

    def may_contain_many(self, user_keys):
        """:meth:`may_contain` of each key of a list or tuple, in order."""
        cdef list keys = _sequence(user_keys, "user_keys", "bytes-like keys")
        cdef Py_ssize_t n = len(keys), i
        cdef list out = [False] * n
        cdef object k
        cdef uint64_t h
        for i in range(n):
            k = keys[i]
            if PyBytes_Check(k):
                h = _xxh64(<const uint8_t*>PyBytes_AS_STRING(k), <size_t>PyBytes_GET_SIZE(k),
                           HASH_SEED)
            else:
                h = _hash_key(k, f"user_keys[{i}]")
            if self.probe(h):
                out[i] = True
        return out

    def _check(self):
        """Verify every structural invariant; raise CorruptionError naming the first broken one.

        Beyond the header checks of the constructor: the empty filter has no bit set; a
        non-empty one has between 1 and ``num_keys * num_probes`` bits set.
        """
        cdef uint32_t probes, num_keys
        cdef uint64_t num_bits
        _parse_header(self._data, self._name, &probes, &num_keys, &num_bits)
        if (probes != <uint32_t>self._probes_n or num_keys != self._num_keys
                or num_bits != self._num_bits):
            raise CorruptionError("filter header changed after parsing", object=self._name,
                                  offset=0)
        cdef uint64_t popcount = 0, i
        cdef uint8_t byte
        for i in range(num_bits // 8):
            byte = self._bits[i]
            while byte:
                popcount += byte & 1
                byte >>= 1
        cdef uint64_t limit = <uint64_t>num_keys * probes
        if num_bits < limit:
            limit = num_bits
        if not (popcount == 0 if num_keys == 0 else 1 <= popcount <= limit):
            raise CorruptionError("filter has an impossible number of bits set",
                                  object=self._name, offset=HEADER_LEN,
                                  expected=f"1..{limit}" if num_keys else 0, found=popcount)


cdef int _parse_header(bytes data, str name, uint32_t* probes_out, uint32_t* num_keys_out,
                       uint64_t* num_bits_out) except -1:
    """Validate the header of ``data`` (messages identical to the twin's ``_parse_header``)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    if n < HEADER_LEN:
        raise CorruptionError("filter is truncated: shorter than its header", object=name,
                              offset=0, expected=HEADER_LEN, found=n)
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(data)   # n >= 12 bytes
    cdef uint32_t num_keys = _get_u32le(p + 4)
    cdef uint64_t num_bits = _get_u32le(p + 8)
    cdef uint64_t expected_bits = 8 * <uint64_t>(n - HEADER_LEN)
    if p[0] != KIND_BLOOM:
        raise CorruptionError("unknown filter kind", object=name, offset=0,
                              expected=KIND_BLOOM, found=p[0])
    if p[1] != FORMAT_VERSION:
        raise CorruptionError("unknown filter format version", object=name, offset=1,
                              expected=FORMAT_VERSION, found=p[1])
    if not (MIN_PROBES <= p[2] <= MAX_PROBES):
        raise CorruptionError("filter probe count out of range", object=name, offset=2,
                              expected=f"{MIN_PROBES}..{MAX_PROBES}", found=p[2])
    if p[3] != 0:
        raise CorruptionError("filter reserved byte is not zero", object=name, offset=3,
                              expected=0, found=p[3])
    if num_bits != expected_bits:
        raise CorruptionError("filter bit count does not match its length", object=name,
                              offset=8, expected=expected_bits, found=num_bits)
    if (num_keys == 0) != (num_bits == 0) or 0 < num_bits < MIN_BITS:
        raise CorruptionError("filter key count and bit count disagree", object=name,
                              offset=4, expected=None, found=(num_keys, num_bits))
    probes_out[0] = p[2]
    num_keys_out[0] = num_keys
    num_bits_out[0] = num_bits
    return 0
