"""Pure-Python twin of ``native/_vnode.pyx``: XXH64 of keys, one at a time or in bulk.

The reference for the native module: same names, results and exceptions. XXH64 comes from the
``xxhash`` package (the reference implementation of the algorithm).

Callers: :mod:`relational.vnode` only, through ``hummock._twins.load``.
"""

from __future__ import annotations

import numpy as np
import xxhash

_xxh64 = xxhash.xxh64_intdigest


def hash_bytes(data, seed=0) -> int:
    """XXH64 of ``data`` (bytes-like) with ``seed``."""
    return _xxh64(bytes(data), seed)


def hash_list(keys, seed=0) -> np.ndarray:
    """``numpy.uint64`` array of XXH64 of each bytes object in ``keys``."""
    return np.fromiter((_xxh64(bytes(k), seed) for k in keys), dtype=np.uint64, count=len(keys))


def hash_offsets(offsets, data, seed=0) -> np.ndarray:
    """XXH64 of each slice ``data[offsets[i]:offsets[i + 1]]``, as a ``numpy.uint64`` array.

    Raises ``ValueError`` for offsets that decrease, are negative or point past ``data``.
    """
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if off.ndim != 1 or len(off) < 1:
        raise ValueError("offsets must hold at least one entry")
    buf = bytes(data)
    n = len(off) - 1
    if off[0] < 0 or off[n] > len(buf):
        raise ValueError(f"offsets [{off[0]}, {off[n]}] outside data of {len(buf)} bytes")
    steps = np.diff(off)
    if (steps < 0).any():
        i = int(np.argmax(steps < 0))
        raise ValueError(f"offsets decrease at {i}: {off[i]} > {off[i + 1]}")
    bounds = off.tolist()
    return np.fromiter((_xxh64(buf[bounds[i]:bounds[i + 1]], seed) for i in range(n)),
                       dtype=np.uint64, count=n)


def key_with_vnode(head, tail=b"", seed=0, count=256) -> bytes:
    """``u16be(XXH64(head, seed) % count) || head || tail``: a table key from the encoded
    distribution key ``head`` and the rest of the encoded pk ``tail`` (bytes-like), in one call.
    Raises ``ValueError`` unless ``1 <= count <= 65536``."""
    head, tail = bytes(head), bytes(tail)
    if not 1 <= count <= 65536:
        raise ValueError(f"count must be in [1, 65536], got {count}")
    return (_xxh64(head, seed) % count).to_bytes(2, "big") + head + tail


def _as_bytes(item) -> bytes:
    if type(item) is bytes:
        return item
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise TypeError(f"keys are bytes, got {type(item).__name__}")


def keys_with_vnodes(keys, hashed=None, seed=0, count=256) -> list:
    """``[u16be(XXH64(hashed[i], seed) % count) || keys[i] for each i]``: table keys from encoded
    pks ``keys`` and the encoded distribution keys ``hashed`` (``None``: the keys themselves,
    when the distribution key is the whole pk), in one call. Items are bytes, bytearray or
    memoryview (else ``TypeError``); ``ValueError`` unless ``1 <= count <= 65536`` and both
    lists have one length."""
    if not 1 <= count <= 65536:
        raise ValueError(f"count must be in [1, 65536], got {count}")
    keys = list(keys)
    hashes = keys if hashed is None else list(hashed)
    if len(hashes) != len(keys):
        raise ValueError(f"keys and hashed differ in length: {len(keys)} and {len(hashes)}")
    out = []
    for k, h in zip(keys, hashes):
        k = _as_bytes(k)
        h = k if hashed is None else _as_bytes(h)
        out.append((_xxh64(h, seed) % count).to_bytes(2, "big") + k)
    return out
