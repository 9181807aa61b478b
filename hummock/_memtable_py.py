"""Pure-Python twin of ``native/_memtable.pyx``: checking ingest batches and merging imms.

- :func:`check_batch` validates a batch (sorted strictly ascending, bytes keys, bytes-or-None
  values) and splits it into parallel key and value lists; :func:`check_columns` does the same
  for a batch given as those two lists;
- :func:`merge_runs` merges the imms of one table into full keys in full-key order (table key
  ascending, versioned epoch descending), for flushing them into SSTs.

Callers: :mod:`hummock.shared_buffer` and :mod:`hummock.flush` (through their facades).
"""

from __future__ import annotations

import heapq

import numpy as np

from hummock.errors import InvalidArgumentError

#: bytes charged per entry on top of its key and value: what CPython 3.11 spends besides the
#: payload (two list slots, two bytes headers of 33 B, pymalloc's 16-byte rounding); measured
#: 97-99 B per entry of an imm (RSS of 1M entries), so ``shared_buffer_capacity`` bounds real memory
ENTRY_OVERHEAD = 96
_MAX_EPOCH = (1 << 64) - 1


def check_batch(kv_pairs):
    """Validate an ingest batch; return ``(keys, values, size_in_bytes)``.

    REQUIRES: an iterable of ``(key, value)`` pairs, keys bytes-like, strictly ascending and
    unique, values bytes-like or ``None``. Raises ``InvalidArgumentError`` (a ``ValueError``)
    naming the first offending position; nothing is kept on error.
    """
    keys, values = [], []
    size = 0
    previous = None
    try:
        kv_pairs = iter(kv_pairs)
    except TypeError:
        raise InvalidArgumentError(
            f"a batch must be an iterable of (key, value) pairs, got {type(kv_pairs).__name__}") from None
    for i, pair in enumerate(kv_pairs):
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"batch item {i} is not a (key, value) pair") from None
        if type(key) is not bytes:
            if not isinstance(key, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"batch item {i}: key must be bytes, got {type(key).__name__}")
            key = bytes(memoryview(key))   # exact bytes (bytes() of a subclass may return it)
        if value is not None and type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentError(f"batch item {i}: value must be bytes or None, got {type(value).__name__}")
            value = bytes(memoryview(value))
        if previous is not None and key <= previous:
            problem = "duplicate key" if key == previous else "keys not sorted ascending"
            raise InvalidArgumentError(f"batch item {i}: {problem}")
        previous = key
        keys.append(key)
        values.append(value)
        size += len(key) + (len(value) if value is not None else 0) + ENTRY_OVERHEAD
    return keys, values, size


def check_columns(keys, values):
    """:func:`check_batch` of ``zip(keys, values)`` given as two lists of one length (what a
    state table's MemTable hands over), without making a pair per entry: the same checks, errors
    and messages, and new lists (the caller's are not kept)."""
    if not isinstance(keys, list) or not isinstance(values, list):
        raise InvalidArgumentError(f"keys and values must be lists, got {type(keys).__name__} "
                                   f"and {type(values).__name__}")
    if len(keys) != len(values):
        raise InvalidArgumentError(f"{len(keys)} keys but {len(values)} values")
    return check_batch(zip(keys, values))


def check_packed(keys, width, values, offsets) -> int:
    """Validate a packed batch (``hummock.packed_batch.PackedColumns``: ``n`` keys of ``width``
    bytes back to back in ``keys``, their values ``values[offsets[i]:offsets[i+1]]``); return
    its size as :func:`check_batch` counts it (keys + values + ``ENTRY_OVERHEAD`` per entry).
    ``InvalidArgumentError`` for: ``keys``/``values`` not bytes, a width below 1 or key bytes
    that are not whole keys, ``offsets`` not a 1-D int64 numpy array of ``n + 1`` entries
    starting at 0, decreasing or ending elsewhere than ``len(values)``, and keys not strictly
    ascending (:func:`check_batch`'s messages)."""
    if type(keys) is not bytes or type(values) is not bytes:
        raise InvalidArgumentError(f"packed keys and values must be bytes, got {type(keys).__name__} "
                                   f"and {type(values).__name__}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1 or len(keys) % width:
        raise InvalidArgumentError(f"{len(keys)} key bytes are not keys of {width!r:.20} bytes")
    n = len(keys) // width
    if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
        raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array")
    if len(offsets) != n + 1:
        raise InvalidArgumentError(f"{len(offsets)} value offsets for {n} keys")
    if int(offsets[0]) != 0 or int(offsets[-1]) != len(values) or (n and bool((offsets[1:] < offsets[:-1]).any())):
        raise InvalidArgumentError(f"value offsets must rise from 0 to {len(values)}")
    for i in range(1, n):
        previous, key = keys[(i - 1) * width:i * width], keys[i * width:(i + 1) * width]
        if key <= previous:
            raise InvalidArgumentError(f"batch item {i}: {'duplicate key' if key == previous else 'keys not sorted ascending'}")
    return len(keys) + len(values) + ENTRY_OVERHEAD * n


def split_packed(keys: bytes, width: int, values: bytes, offsets) -> tuple[list, list]:
    """A packed batch checked by :func:`check_packed` as ``(keys, values)``, two lists of bytes."""
    if width < 1 or len(keys) % width:
        raise InvalidArgumentError(f"{len(keys)} key bytes are not keys of {width} bytes")
    n = len(keys) // width
    if len(offsets) != n + 1:
        raise InvalidArgumentError(f"{len(offsets)} value offsets for {n} keys")
    bounds = offsets.tolist()
    for i in range(n):
        lo, hi = bounds[i], bounds[i + 1]
        if lo < 0 or hi < lo or hi > len(values):
            raise InvalidArgumentError(f"value {i} spans [{lo}, {hi}), outside [0, {len(values)}]")
    return ([keys[i * width:(i + 1) * width] for i in range(n)],
            [values[bounds[i]:bounds[i + 1]] for i in range(n)])


def merge_runs(prefix: bytes, runs):
    """Merge ``runs`` -- ``(versioned_epoch, keys, values)`` of one table, distinct epochs -- into
    ``(full_keys, values)`` in full-key order. ``prefix`` is the 4-byte table id."""
    def entries(epoch, keys, values):
        suffix = (_MAX_EPOCH - epoch).to_bytes(8, "big")
        for key, value in zip(keys, values):
            yield key, suffix, value
    runs = list(runs)
    for _, keys, values in runs:
        if len(keys) != len(values):
            raise InvalidArgumentError("a run's keys and values differ in length")
        if any(type(k) is not bytes for k in keys):
            raise InvalidArgumentError("run keys must be bytes")
    merged = heapq.merge(*(entries(*run) for run in runs), key=lambda e: (e[0], e[1]))
    if len(prefix) != 4:
        raise InvalidArgumentError("prefix must be the 4-byte table id")
    full_keys, out_values = [], []
    for key, suffix, value in merged:
        full_keys.append(prefix + key + suffix)
        out_values.append(value)
    return full_keys, out_values
