"""Pure-Python twin of ``native/_scan_columns.pyx``: value-encoded rows straight into column buffers.

The reference implementation of :func:`decode_columns`; the native module produces identical
buffers and raises the same exceptions (class, and for ``DecodeError`` the same offset and
reason), in the same order. Rows are in the value encoding of docs/format.md section 2.

``count_pairs(pairs, limit) -> n``: take at most ``limit`` (an int in ``[0, MAX_LIMIT]``) items
from the iterator ``pairs`` and return how many, decoding nothing (a count needs no column).

Contract of ``decode_columns(pairs, limit, codes, wanted) -> (n, columns)``:

- ``pairs``: an iterator of ``(key, value)`` tuples (``value`` a ``bytes`` row); at most
  ``limit`` (an int in ``[0, MAX_LIMIT]``) are taken from it, and no more. ``n`` is how many.
- ``codes``: one ``TypeKind`` number per column of the row, in value order. Kinds in
  :data:`WANTABLE` can be returned; DECIMAL and INTERVAL can only be walked over; anything else
  raises ``ValueError``.
- ``wanted``: distinct column positions to return, in the order returned; each must have a kind
  in :data:`WANTABLE` (else ``ValueError``).
- Every row is walked whole: its tag, column count, bitmap padding, every length and the absence
  of trailing bytes are checked (``DecodeError``, offsets within the row), and the values of
  wanted columns are checked as ``decode_row`` checks them (BOOLEAN 0/1, VARCHAR UTF-8, DATE /
  TIME / TIMESTAMP ranges). The values of columns not wanted are stepped over, not checked
  (DECIMAL: kind, sign byte and lengths only). A pair that is not a 2-tuple raises
  ``TypeError``, a value that is not ``bytes`` ``TypeMismatchError``.
- Each returned column is ``(validity, null_count, data, offsets)`` in Arrow's layout:
  ``validity`` is ``None`` when the column has no NULL, else ``ceil(n/8)`` bytes, bit ``j``
  (LSB first) set when row ``j`` is not NULL, padding bits zero; ``data`` is ``n * width``
  little-endian bytes for fixed-width kinds (zero for NULL rows; REAL/DOUBLE as stored,
  DATE as int32 days, TIME / TIMESTAMP / TIMESTAMPTZ as int64 microseconds), ``ceil(n/8)``
  bytes of bits for BOOLEAN (NULL rows 0), or the concatenated bytes of VARCHAR / BYTEA
  values, whose ``offsets`` are ``n + 1`` little-endian int32 (int64 when ``data`` is longer
  than 2**31 - 1 bytes; the caller tells by the length); ``offsets`` is ``None`` otherwise.

Callers: :mod:`relational.scan_columns` only (which chooses this or the native module).
"""

from __future__ import annotations

import struct
from itertools import islice

from relational._value_encoding_py import (FORMAT_TAG, MAX_DAYS, MAX_USECS, MIN_DAYS, MIN_USECS, USECS_PER_DAY,
                                           _error, get_varint, need)
from relational.errors import TypeMismatchError
from relational.types import TypeKind

#: most rows one call may take (bounds what a call allocates up front)
MAX_LIMIT = 1 << 24
#: bytes per value of the fixed-width kinds (BOOLEAN is bit-packed in the output, 1 byte stored)
WIDTHS = {TypeKind.BOOLEAN: 1, TypeKind.SMALLINT: 2, TypeKind.INT: 4, TypeKind.BIGINT: 8, TypeKind.REAL: 4,
          TypeKind.DOUBLE: 8, TypeKind.DATE: 4, TypeKind.TIME: 8, TypeKind.TIMESTAMP: 8, TypeKind.TIMESTAMPTZ: 8}
#: kinds a call can return
WANTABLE = frozenset((*WIDTHS, TypeKind.VARCHAR, TypeKind.BYTEA))
#: kinds a call can only step over
WALKABLE = frozenset((TypeKind.DECIMAL, TypeKind.INTERVAL))
_INT32_MAX = (1 << 31) - 1
_DECIMAL_KINDS = 4      # 0 finite, 1 NaN, 2 +Infinity, 3 -Infinity (docs/format.md section 2)
_INTERVAL_BYTES = 16


def _check_limit(limit) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an int in [0, {MAX_LIMIT}], got {limit!r:.40}")
    return limit


def _check_args(limit, codes, wanted) -> tuple:
    _check_limit(limit)
    if not isinstance(codes, tuple) or not isinstance(wanted, tuple):
        raise TypeError("codes and wanted must be tuples of ints")
    for code in codes:
        if type(code) is not int or (code not in WANTABLE and code not in WALKABLE):
            raise ValueError(f"column kind {code!r:.40} cannot be scanned into columns")
    seen = set()
    for position in wanted:
        if type(position) is not int or not 0 <= position < len(codes) or position in seen:
            raise ValueError(f"wanted must hold distinct column positions in [0, {len(codes)}), got {wanted!r:.80}")
        if codes[position] not in WANTABLE:
            raise ValueError(f"column {position} of kind {codes[position]} cannot be returned")
        seen.add(position)
    return codes, wanted


class _Out:
    """One wanted column being filled."""

    def __init__(self, code: int):
        self.code = code
        self.width = WIDTHS.get(code, 0)
        self.valid = []        # one bool per row
        self.values = []       # fixed: ints/raw bytes; var: bytes

    def buffers(self, n: int):
        null_count = self.valid.count(False)
        validity = None if null_count == 0 else _bits(self.valid, n)
        if self.code == TypeKind.BOOLEAN:
            return validity, null_count, _bits(self.values, n), None
        if self.width:
            return validity, null_count, b"".join(self.values), None
        data = b"".join(self.values)
        ends, total = [0], 0
        for v in self.values:
            total += len(v)
            ends.append(total)
        fmt = "<i" if len(data) <= _INT32_MAX else "<q"
        offsets = b"".join(struct.pack(fmt, e) for e in ends)
        return validity, null_count, data, offsets


def _bits(flags, n: int) -> bytes:
    out = bytearray((n + 7) >> 3)
    for j, flag in enumerate(flags):
        if flag:
            out[j >> 3] |= 1 << (j & 7)
    return bytes(out)


def _walk(data: bytes, pos: int, code: int) -> int:
    """Step over one non-NULL value of a column that is not wanted; return the position after it."""
    width = WIDTHS.get(code)
    if width is not None:
        need(data, pos, width)
        return pos + width
    if code == TypeKind.VARCHAR or code == TypeKind.BYTEA:
        length, pos = get_varint(data, pos)
        need(data, pos, length)
        return pos + length
    if code == TypeKind.INTERVAL:
        need(data, pos, _INTERVAL_BYTES)
        return pos + _INTERVAL_BYTES
    # DECIMAL: kind, then for a finite value sign, zigzag exponent, length, coefficient
    start = pos
    need(data, pos, 1)
    kind = data[pos]
    pos += 1
    if kind >= _DECIMAL_KINDS:
        raise _error(f"unknown DECIMAL kind 0x{kind:02x}", start)
    if kind != 0:
        return pos
    need(data, pos, 1)
    if data[pos] > 1:
        raise _error(f"DECIMAL sign byte must be 0 or 1, found 0x{data[pos]:02x}", pos)
    _, pos = get_varint(data, pos + 1)
    length, pos = get_varint(data, pos)
    need(data, pos, length)
    return pos + length


def _get(data: bytes, pos: int, out: _Out) -> int:
    """Read one non-NULL value of a wanted column into ``out``; return the position after it."""
    code = out.code
    width = out.width
    if width:
        need(data, pos, width)
        raw = data[pos:pos + width]
        if code == TypeKind.BOOLEAN:
            if raw[0] > 1:
                raise _error(f"BOOLEAN byte must be 0 or 1, found 0x{raw[0]:02x}", pos)
            out.values.append(raw[0] == 1)
            return pos + 1
        if code == TypeKind.DATE:
            days = int.from_bytes(raw, "little", signed=True)
            if not MIN_DAYS <= days <= MAX_DAYS:
                raise _error(f"DATE {days} days from 1970-01-01 is out of range", pos)
        elif code == TypeKind.TIME:
            usecs = int.from_bytes(raw, "little", signed=True)
            if not 0 <= usecs < USECS_PER_DAY:
                raise _error(f"TIME {usecs} usecs after midnight is out of range", pos)
        elif code == TypeKind.TIMESTAMP or code == TypeKind.TIMESTAMPTZ:
            usecs = int.from_bytes(raw, "little", signed=True)
            if not MIN_USECS <= usecs <= MAX_USECS:
                raise _error(f"TIMESTAMP {usecs} usecs from 1970-01-01 is out of range", pos)
        out.values.append(raw)
        return pos + width
    length, pos = get_varint(data, pos)
    need(data, pos, length)
    raw = data[pos:pos + length]
    if code == TypeKind.VARCHAR:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error(f"VARCHAR is not valid UTF-8: {exc.reason}", pos) from None
    out.values.append(raw)
    return pos + length


def _null(out: _Out) -> None:
    if out.code == TypeKind.BOOLEAN:
        out.values.append(False)
    elif out.width:
        out.values.append(bytes(out.width))
    else:
        out.values.append(b"")


def _row(data, outs: list) -> None:
    """Walk one row, filling the wanted columns' outputs (``outs[i]``: column i's, or None)."""
    if type(data) is not bytes:
        raise TypeMismatchError(f"encoded row must be bytes, got {type(data).__name__}")
    need(data, 0, 1)
    if data[0] != FORMAT_TAG:
        raise _error(f"unknown format tag 0x{data[0]:02x}", 0)
    ncols = len(outs)
    count, pos = get_varint(data, 1)
    if count != ncols:
        raise _error(f"row has {count} columns, schema has {ncols}", 1)
    size = (ncols + 7) >> 3
    need(data, pos, size)
    bitmap = pos
    if ncols & 7 and data[bitmap + size - 1] >> (ncols & 7):
        raise _error("nonzero padding bits in null bitmap", bitmap + size - 1)
    pos += size
    for i, out in enumerate(outs):
        is_null = data[bitmap + (i >> 3)] >> (i & 7) & 1
        if type(out) is int:            # not wanted: its kind
            if not is_null:
                pos = _walk(data, pos, out)
        elif is_null:
            out.valid.append(False)
            _null(out)
        else:
            out.valid.append(True)
            pos = _get(data, pos, out)
    if pos != len(data):
        raise _error(f"{len(data) - pos} trailing bytes after the row", pos)


def count_pairs(pairs, limit) -> int:
    """How many items (at most ``limit``) the iterator ``pairs`` yields; nothing is decoded."""
    n = 0
    for _ in islice(pairs, _check_limit(limit)):
        n += 1
    return n


def decode_columns(pairs, limit, codes, wanted):
    """Decode at most ``limit`` rows of ``pairs`` into the ``wanted`` columns (module docstring)."""
    codes, wanted = _check_args(limit, codes, wanted)
    outs = list(codes)
    for position in wanted:
        outs[position] = _Out(codes[position])
    n = 0
    for pair in islice(pairs, limit):
        if type(pair) is not tuple or len(pair) != 2:
            raise TypeError(f"pairs must yield (key, value) tuples, got {type(pair).__name__}")
        _row(pair[1], outs)
        n += 1
    return n, [outs[position].buffers(n) for position in wanted]
