"""Pure-Python twin of ``native/_key.pyx``: the hot full-key functions.

The byte layout is written down once, in ``docs/format.md`` section 3, and its constants live
in :mod:`hummock.key`; this module and ``native/_key.pyx`` implement it with the same names,
the same signatures, the same exceptions (with the same messages) and byte-identical output.
``tests/test_key.py`` checks both against golden bytes and against each other.

Users import these functions from :mod:`hummock.key`, which picks the native module or this
twin (DESIGN.md section 2); only that facade and the tests import this module directly.

Argument rules shared by every function here:
- ``table_id``: an ``int`` (``bool`` rejected) in ``[0, 2**32 - 1]``, else ``InvalidArgumentError``;
- ``epoch``: an ``int`` (``bool`` rejected) in ``[0, 2**64 - 1]``, else ``InvalidArgumentError``;
- keys: ``bytes``, ``bytearray`` or ``memoryview`` (copied with ``bytes()``), else
  ``InvalidArgumentError``; returned keys are always ``bytes``;
- a full key shorter than 12 bytes raises ``KeyFormatError``.
"""

from __future__ import annotations

import struct

from hummock.errors import InvalidArgumentError, KeyFormatError

# Mirrors of hummock.key's frozen constants. They cannot be imported from there without an
# import cycle (hummock.key loads this module); tests/test_key.py pins that they agree.
_TABLE_ID_LEN = 4
_EPOCH_LEN = 8
_MIN_FULL_KEY_LEN = _TABLE_ID_LEN + _EPOCH_LEN
_MAX_TABLE_ID = 2**32 - 1
_MAX_EPOCH = 2**64 - 1

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def _table_id(table_id) -> int:
    if ((type(table_id) is int or (isinstance(table_id, int) and not isinstance(table_id, bool)))
            and 0 <= table_id <= _MAX_TABLE_ID):
        return table_id
    raise InvalidArgumentError(f"table_id must be an int in [0, {_MAX_TABLE_ID}], got {table_id!r}")


def _epoch(epoch) -> int:
    if ((type(epoch) is int or (isinstance(epoch, int) and not isinstance(epoch, bool)))
            and 0 <= epoch <= _MAX_EPOCH):
        return epoch
    raise InvalidArgumentError(f"epoch must be an int in [0, {_MAX_EPOCH}], got {epoch!r}")


def _as_bytes(value, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(
        f"{what} must be bytes-like (bytes, bytearray, memoryview), got {type(value).__name__}")


def _full_key(value, what: str) -> bytes:
    data = _as_bytes(value, what)
    if len(data) < _MIN_FULL_KEY_LEN:
        raise KeyFormatError(
            f"{what} must be at least {_MIN_FULL_KEY_LEN} bytes (table id + epoch), "
            f"got {len(data)}")
    return data


def encode_full_key(table_id, table_key, epoch) -> bytes:
    """Return ``table_id (u32be) || table_key || (2**64 - 1 - epoch) (u64be)``.

    REQUIRES: ``table_id`` in ``[0, 2**32 - 1]``, ``table_key`` bytes-like (may be empty),
    ``epoch`` in ``[0, 2**64 - 1]``. Raises ``InvalidArgumentError`` otherwise.
    """
    tid = _table_id(table_id)
    key = _as_bytes(table_key, "table_key")
    inverted = _MAX_EPOCH - _epoch(epoch)
    return _U32.pack(tid) + key + _U64.pack(inverted)


def encode_full_keys(table_id, table_keys, epoch) -> list:
    """Batch :func:`encode_full_key`: one full key per table key, same table id and epoch.

    REQUIRES: ``table_keys`` is a ``list`` or ``tuple`` of bytes-like keys; the other arguments
    as for :func:`encode_full_key`. Raises ``InvalidArgumentError`` (naming the index of the
    first bad key) and returns nothing on any bad argument.
    """
    tid = _U32.pack(_table_id(table_id))
    if not isinstance(table_keys, (list, tuple)):
        raise InvalidArgumentError(
            "table_keys must be a list or tuple of bytes-like keys, "
            f"got {type(table_keys).__name__}")
    suffix = _U64.pack(_MAX_EPOCH - _epoch(epoch))
    out = []
    for i, table_key in enumerate(table_keys):
        out.append(tid + _as_bytes(table_key, f"table_keys[{i}]") + suffix)
    return out


def decode_full_key(full_key) -> tuple:
    """Split a full key made by :func:`encode_full_key` into ``(table_id, table_key, epoch)``.

    REQUIRES: ``full_key`` bytes-like. Raises ``KeyFormatError`` if shorter than 12 bytes.
    """
    data = _full_key(full_key, "full_key")
    return (_U32.unpack_from(data)[0], data[_TABLE_ID_LEN:-_EPOCH_LEN],
            _MAX_EPOCH - _U64.unpack_from(data, len(data) - _EPOCH_LEN)[0])


def user_key(full_key) -> bytes:
    """Return the user key ``table_id || table_key`` (the full key without its epoch suffix).

    REQUIRES: ``full_key`` bytes-like. Raises ``KeyFormatError`` if shorter than 12 bytes.
    """
    return _full_key(full_key, "full_key")[:-_EPOCH_LEN]


def epoch_of(full_key) -> int:
    """Return the epoch stored in a full key's suffix.

    REQUIRES: ``full_key`` bytes-like. Raises ``KeyFormatError`` if shorter than 12 bytes.
    """
    data = _full_key(full_key, "full_key")
    return _MAX_EPOCH - _U64.unpack_from(data, len(data) - _EPOCH_LEN)[0]


def compare_full_keys(a, b) -> int:
    """Return -1, 0 or 1 as full key ``a`` sorts before, equal to, or after ``b``.

    Order: user key bytewise ascending, then epoch descending. The user keys are compared on
    their own first, because a plain comparison of whole full keys is wrong when one table key
    is a prefix of the other (the epoch suffix would be compared against key bytes).
    REQUIRES: both bytes-like. Raises ``KeyFormatError`` if either is shorter than 12 bytes.
    """
    a = _full_key(a, "a")
    b = _full_key(b, "b")
    ua = a[:-_EPOCH_LEN]
    ub = b[:-_EPOCH_LEN]
    if ua != ub:
        return -1 if ua < ub else 1
    sa = a[-_EPOCH_LEN:]
    sb = b[-_EPOCH_LEN:]
    return (sa > sb) - (sa < sb)
