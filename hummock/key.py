"""Full keys and epochs: the key layout every SST, memtable and iterator of Hummock stores.

Layout (the one written source is ``docs/format.md`` section 3)::

    full key = table_id (u32 big-endian) || table_key (raw bytes, may be empty)
               || (MAX_EPOCH - epoch) (u64 big-endian, the "inverted epoch")
    user key = table_id || table_key = full_key[:-8]

Invariants:
1. Full keys order by user key bytewise ascending, then by epoch **descending** (newest
   version first). :func:`compare_full_keys` and :func:`full_key_sort_key` implement exactly
   this order. A plain comparison of whole full keys is *wrong* when one table key is a prefix
   of another (``b"a"`` vs ``b"a\\x00"``): the epoch suffix of the shorter key would be compared
   against key bytes of the longer one. Always compare the user keys first.
2. Epochs are unsigned 64-bit: ``(unix_ms - EPOCH_BASE_UNIX_MS) << EPOCH_PHYSICAL_SHIFT``; the
   low 16 bits are the spill offset (several flushes of one table inside one epoch).
   :func:`new_epoch` is strictly increasing within a process. Epochs are not dense: **never
   derive a previous (or next) epoch by arithmetic** such as ``epoch - 1`` or
   ``epoch - (1 << 16)``; carry the previous epoch explicitly (barriers hold prev/curr).
3. Every constant marked "part of the on-disk format" is frozen; ``tests/test_key.py`` pins it
   with golden bytes.

The hot functions (encode/decode/compare) come from ``native/_key.pyx`` or its pure-Python
twin ``hummock/_key_py.py`` (chosen by :func:`hummock._twins.load`); both raise the same
exceptions and produce identical bytes. Argument rules for all of them: ``table_id`` an ``int``
in ``[0, MAX_TABLE_ID]``, ``epoch`` an ``int`` in ``[0, MAX_EPOCH]`` (``bool`` is rejected),
keys ``bytes``/``bytearray``/``memoryview`` (results are always ``bytes``); bad arguments raise
:class:`~hummock.errors.InvalidArgumentError`, a full key shorter than ``MIN_FULL_KEY_LEN``
raises :class:`~hummock.errors.KeyFormatError`.

Thread safety: every function is pure except :func:`new_epoch`, which is guarded by a lock.
Callers: the whole storage engine (shared buffer, SST builder and reader, iterators,
compaction) and the layers above for :func:`new_epoch`.
"""

from __future__ import annotations

import threading
import time

from hummock import _twins
from hummock.errors import InvalidArgumentError, KeyFormatError

__all__ = [
    "TABLE_ID_LEN", "EPOCH_LEN", "MIN_FULL_KEY_LEN", "MAX_TABLE_ID", "MAX_EPOCH",
    "EPOCH_BASE_UNIX_MS", "EPOCH_PHYSICAL_SHIFT", "EPOCH_SPILL_MASK",
    "encode_full_key", "encode_full_keys", "decode_full_key", "user_key", "epoch_of",
    "compare_full_keys", "full_key_sort_key",
    "check_epoch", "new_epoch", "epoch_from_unix_ms", "epoch_to_unix_ms",
    "spill_offset", "with_spill_offset",
]

TABLE_ID_LEN = 4  # part of the on-disk format, do not change
EPOCH_LEN = 8  # part of the on-disk format, do not change
# the length of a full key with an empty table key; part of the on-disk format, do not change
MIN_FULL_KEY_LEN = TABLE_ID_LEN + EPOCH_LEN
MAX_TABLE_ID = 2**32 - 1  # part of the on-disk format, do not change
MAX_EPOCH = 2**64 - 1  # part of the on-disk format, do not change (suffix = MAX_EPOCH - epoch)
# 2021-04-01T00:00:00Z = epoch 0; part of the on-disk format, do not change
EPOCH_BASE_UNIX_MS = 1_617_235_200_000
EPOCH_PHYSICAL_SHIFT = 16  # part of the on-disk format, do not change
# 0xFFFF, the spill offset bits; part of the on-disk format, do not change
EPOCH_SPILL_MASK = (1 << EPOCH_PHYSICAL_SHIFT) - 1

_impl = _twins.load("_key", "hummock._key_py")

encode_full_key = _impl.encode_full_key
encode_full_keys = _impl.encode_full_keys
decode_full_key = _impl.decode_full_key
user_key = _impl.user_key
epoch_of = _impl.epoch_of
compare_full_keys = _impl.compare_full_keys


def full_key_sort_key(full_key) -> tuple[bytes, bytes]:
    """Return ``(user_key, inverted_epoch_suffix)``, for ``sorted(keys, key=full_key_sort_key)``.

    Tuples of these order exactly as :func:`compare_full_keys` does.
    REQUIRES: ``full_key`` bytes-like (else ``InvalidArgumentError``) and at least
    ``MIN_FULL_KEY_LEN`` bytes (else ``KeyFormatError``).
    """
    if not isinstance(full_key, bytes):
        if not isinstance(full_key, (bytearray, memoryview)):
            raise InvalidArgumentError(
                "full_key must be bytes-like (bytes, bytearray, memoryview), "
                f"got {type(full_key).__name__}")
        full_key = bytes(full_key)
    if len(full_key) < MIN_FULL_KEY_LEN:
        raise KeyFormatError(f"full_key must be at least {MIN_FULL_KEY_LEN} bytes "
                             f"(table id + epoch), got {len(full_key)}")
    return full_key[:-EPOCH_LEN], full_key[-EPOCH_LEN:]


# ---- epochs -------------------------------------------------------------------------------

def check_epoch(epoch) -> int:
    """Return ``epoch`` unchanged if it is an ``int`` (not ``bool``) in ``[0, MAX_EPOCH]``.

    Raises ``InvalidArgumentError`` otherwise.
    """
    if isinstance(epoch, int) and not isinstance(epoch, bool) and 0 <= epoch <= MAX_EPOCH:
        return epoch
    raise InvalidArgumentError(f"epoch must be an int in [0, {MAX_EPOCH}], got {epoch!r}")


def epoch_from_unix_ms(unix_ms: int) -> int:
    """Return the epoch of wall-clock time ``unix_ms`` with spill offset 0.

    REQUIRES: ``unix_ms`` an ``int`` with ``EPOCH_BASE_UNIX_MS <= unix_ms`` and a result
    ``<= MAX_EPOCH``; raises ``InvalidArgumentError`` otherwise.
    """
    if isinstance(unix_ms, int) and not isinstance(unix_ms, bool) and unix_ms >= EPOCH_BASE_UNIX_MS:
        epoch = (unix_ms - EPOCH_BASE_UNIX_MS) << EPOCH_PHYSICAL_SHIFT
        if epoch <= MAX_EPOCH:
            return epoch
    raise InvalidArgumentError(
        f"unix_ms must be an int in [{EPOCH_BASE_UNIX_MS}, "
        f"{EPOCH_BASE_UNIX_MS + (MAX_EPOCH >> EPOCH_PHYSICAL_SHIFT)}], got {unix_ms!r}")


def epoch_to_unix_ms(epoch: int) -> int:
    """Return the wall-clock milliseconds of ``epoch`` (its spill offset is ignored).

    REQUIRES: a valid epoch (see :func:`check_epoch`).
    """
    return (check_epoch(epoch) >> EPOCH_PHYSICAL_SHIFT) + EPOCH_BASE_UNIX_MS


def spill_offset(epoch: int) -> int:
    """Return the spill offset (low 16 bits) of ``epoch``. REQUIRES: a valid epoch."""
    return check_epoch(epoch) & EPOCH_SPILL_MASK


def with_spill_offset(epoch: int, offset: int) -> int:
    """Return ``epoch`` with its low 16 bits replaced by ``offset``.

    REQUIRES: a valid epoch and ``offset`` an ``int`` in ``[0, EPOCH_SPILL_MASK]``; raises
    ``InvalidArgumentError`` otherwise.
    """
    check_epoch(epoch)
    if not (isinstance(offset, int) and not isinstance(offset, bool)
            and 0 <= offset <= EPOCH_SPILL_MASK):
        raise InvalidArgumentError(
            f"spill offset must be an int in [0, {EPOCH_SPILL_MASK}], got {offset!r}")
    return (epoch & ~EPOCH_SPILL_MASK) | offset


_epoch_lock = threading.Lock()
_last_epoch = 0


def new_epoch() -> int:
    """Return a fresh epoch from the wall clock, with spill offset 0.

    Guarantees: strictly greater than every epoch this process returned before, from any
    thread. If the clock has not advanced (or went backwards) since the last call, the result
    is the last epoch plus ``1 << EPOCH_PHYSICAL_SHIFT`` (one logical millisecond). A clock set
    before ``EPOCH_BASE_UNIX_MS`` counts as the base. Raises ``KeyFormatError`` only if the
    64-bit epoch space is exhausted.
    """
    global _last_epoch
    physical = max(time.time_ns() // 1_000_000 - EPOCH_BASE_UNIX_MS, 0)
    candidate = physical << EPOCH_PHYSICAL_SHIFT
    with _epoch_lock:
        if candidate <= _last_epoch:
            candidate = _last_epoch + (1 << EPOCH_PHYSICAL_SHIFT)
        if candidate > MAX_EPOCH:
            raise KeyFormatError("epoch space exhausted: no epoch after "
                                 f"{_last_epoch} fits in 64 bits")
        _last_epoch = candidate
        return candidate


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (``None``: unbounded)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes((trimmed[-1] + 1,))


def clamp_bounds(start, end, prefix):
    """Intersect the table-key range ``[start, end)`` with the keys having ``prefix`` (``None``: no prefix)."""
    if prefix is None:
        return start, end
    p_start, p_end = prefix, prefix_end(prefix)
    start = p_start if start is None or start < p_start else start
    if p_end is not None and (end is None or end > p_end):
        end = p_end
    return start, end
