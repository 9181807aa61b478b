"""Stored values: one tag byte, then the payload (DESIGN.md section 3; docs/format.md section 4).

A put is ``VALUE_TAG_PUT || payload``; a delete (tombstone) is the single byte
``VALUE_TAG_DELETE``. Block builders write these tags themselves from ``value`` / ``None``;
readers hand tagged values to :func:`decode_value`.

Callers: the SST builder and reader, iterators, the engine.
"""

from __future__ import annotations

from hummock.errors import CorruptionError

VALUE_TAG_PUT = 0x01     # part of the on-disk format, do not change
VALUE_TAG_DELETE = 0x02  # part of the on-disk format, do not change


def encode_value(value: bytes | None) -> bytes:
    """Tagged form of a user value; ``None`` means delete."""
    if value is None:
        return bytes((VALUE_TAG_DELETE,))
    return bytes((VALUE_TAG_PUT,)) + bytes(value)


def decode_value(tagged: bytes, *, object: str | None = None) -> bytes | None:
    """Inverse of :func:`encode_value`: the payload, or ``None`` for a tombstone.

    Raises :class:`CorruptionError` for an empty value, an unknown tag or a delete with payload.
    """
    if not tagged:
        raise CorruptionError("empty stored value", object=object)
    tag = tagged[0]
    if tag == VALUE_TAG_PUT:
        return bytes(tagged[1:])
    if tag == VALUE_TAG_DELETE and len(tagged) == 1:
        return None
    raise CorruptionError("bad value tag", object=object, expected="0x01 or lone 0x02", found=tagged[:2].hex())
