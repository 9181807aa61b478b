# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""Native key hashing for vnodes: the fast path of ``relational/_vnode_py.py``.

Same names, signatures, results and exceptions as the pure-Python twin (the reference). The
hash is XXH64 (``native/_xxh64.pxd``); what is hashed and how a hash becomes a vnode is
:mod:`relational.vnode` and docs/relational.md.

Safety: ``key_with_vnode`` reads its two bytes objects whole and writes exactly their lengths
plus two; ``hash_offsets`` checks every offset before reading: offsets must be non-decreasing,
start at >= 0 and end within ``data``; a bad array raises ``ValueError``, never reads outside.

Callers: :mod:`relational.vnode` only, through ``hummock._twins.load``.
"""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

from native._xxh64 cimport xxh64


def hash_bytes(data, seed=0):
    """XXH64 of ``data`` (bytes-like) with ``seed``."""
    cdef bytes b = data if type(data) is bytes else bytes(data)
    cdef uint64_t s = seed
    return xxh64(<const uint8_t*>PyBytes_AS_STRING(b), <size_t>PyBytes_GET_SIZE(b), s)


def hash_list(keys, seed=0):
    """``numpy.uint64`` array of XXH64 of each bytes object in the list ``keys``."""
    cdef Py_ssize_t n = len(keys), i
    cdef uint64_t s = seed
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] view = out
    cdef object k
    for i in range(n):
        k = keys[i]
        if type(k) is not bytes:
            k = bytes(k)
        view[i] = xxh64(<const uint8_t*>PyBytes_AS_STRING(k), <size_t>PyBytes_GET_SIZE(k), s)
    return out


def hash_offsets(offsets, data, seed=0):
    """XXH64 of each slice ``data[offsets[i]:offsets[i + 1]]``, as a ``numpy.uint64`` array.

    ``offsets`` is a 1-d int64 array of ``n + 1`` entries (an Arrow binary array's offsets);
    ``data`` any contiguous bytes-like object. Raises ``ValueError`` for offsets that decrease,
    are negative or point past ``data``.
    """
    cdef const int64_t[::1] off = np.ascontiguousarray(offsets, dtype=np.int64)
    cdef const uint8_t[::1] buf
    if len(data) == 0:
        buf = np.zeros(1, dtype=np.uint8)
        limit = 0
    else:
        buf = np.frombuffer(data, dtype=np.uint8)
        limit = buf.shape[0]
    cdef Py_ssize_t size = limit
    cdef Py_ssize_t n = off.shape[0] - 1, i
    if n < 0:
        raise ValueError("offsets must hold at least one entry")
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] view = out
    cdef uint64_t s = seed
    cdef int64_t lo, hi
    if off[0] < 0 or off[n] > size:
        raise ValueError(f"offsets [{off[0]}, {off[n]}] outside data of {size} bytes")
    for i in range(n):
        lo = off[i]
        hi = off[i + 1]
        if hi < lo:
            raise ValueError(f"offsets decrease at {i}: {lo} > {hi}")
    with nogil:
        for i in range(n):
            lo = off[i]
            hi = off[i + 1]
            view[i] = xxh64(&buf[0] + lo, <size_t>(hi - lo), s)
    return out


def key_with_vnode(head, tail=b"", seed=0, count=256):
    """``u16be(XXH64(head, seed) % count) || head || tail``: a table key from the encoded
    distribution key ``head`` and the rest of the encoded pk ``tail`` (bytes-like), in one call.
    Raises ``ValueError`` unless ``1 <= count <= 65536``."""
    cdef bytes h = head if type(head) is bytes else bytes(head)
    cdef bytes t = tail if type(tail) is bytes else bytes(tail)
    cdef uint64_t s = seed
    if not 1 <= count <= 65536:
        raise ValueError(f"count must be in [1, 65536], got {count}")
    cdef uint64_t c = count
    cdef Py_ssize_t nh = PyBytes_GET_SIZE(h), nt = PyBytes_GET_SIZE(t)
    cdef uint64_t v = xxh64(<const uint8_t*>PyBytes_AS_STRING(h), <size_t>nh, s) % c
    cdef bytes out = PyBytes_FromStringAndSize(NULL, nh + nt + 2)
    cdef char* w = PyBytes_AS_STRING(out)
    w[0] = <char>((v >> 8) & 0xFF)
    w[1] = <char>(v & 0xFF)
    memcpy(w + 2, PyBytes_AS_STRING(h), nh)
    memcpy(w + 2 + nh, PyBytes_AS_STRING(t), nt)
    return out


def keys_with_vnodes(keys, hashed=None, seed=0, count=256):
    """``[u16be(XXH64(hashed[i], seed) % count) || keys[i] for each i]``: table keys from encoded
    pks ``keys`` and the encoded distribution keys ``hashed`` (``None``: the keys themselves,
    when the distribution key is the whole pk), in one call. Items are bytes, bytearray or
    memoryview (else ``TypeError``); ``ValueError`` unless ``1 <= count <= 65536`` and both
    lists have one length."""
    if not 1 <= count <= 65536:
        raise ValueError(f"count must be in [1, 65536], got {count}")
    cdef list ks = list(keys)
    cdef list hs = ks if hashed is None else list(hashed)
    cdef Py_ssize_t n = len(ks), i, nk
    if len(hs) != n:
        raise ValueError(f"keys and hashed differ in length: {n} and {len(hs)}")
    cdef uint64_t s = seed, c = count, v
    cdef list out = []
    cdef bytes k, h, key
    cdef char* w
    for i in range(n):
        k = _as_bytes(ks[i])
        h = k if hashed is None else _as_bytes(hs[i])
        v = xxh64(<const uint8_t*>PyBytes_AS_STRING(h), <size_t>PyBytes_GET_SIZE(h), s) % c
        nk = PyBytes_GET_SIZE(k)
        key = PyBytes_FromStringAndSize(NULL, nk + 2)
        w = PyBytes_AS_STRING(key)
        w[0] = <char>((v >> 8) & 0xFF)
        w[1] = <char>(v & 0xFF)
        memcpy(w + 2, PyBytes_AS_STRING(k), nk)
        out.append(key)
    return out


cdef bytes _as_bytes(object item):
    if type(item) is bytes:
        return <bytes>item
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise TypeError(f"keys are bytes, got {type(item).__name__}")
