"""Errors of the relational layer, all under :class:`hummock.errors.HummockError`.

- :class:`TypeMismatchError` (``TypeError``): a Python value of the wrong kind for its column.
- :class:`ValueOutOfRangeError` (``OverflowError``): a value that does not fit its type
  (SMALLINT/INT/BIGINT overflow, REAL overflow, a DECIMAL exponent beyond the format).
- :class:`DecodeError` (``ValueError``): encoded bytes that are truncated or malformed. Carries
  ``offset`` (where decoding stopped) and ``reason``; never a misread value.
- :class:`SchemaError` (``ValueError``): a schema argument that makes no sense (orders and types
  of different lengths, unknown type codes).

Callers: the relational encoders (pure and native raise the same classes), state tables and the
layers above, which may subclass :class:`RelationalError` for their own errors.
"""

from __future__ import annotations

from hummock.errors import HummockError


class RelationalError(HummockError):
    """Root of the relational layer's errors."""


class TypeMismatchError(RelationalError, TypeError):
    """A value of the wrong Python type for its column type."""


class ValueOutOfRangeError(RelationalError, OverflowError):
    """A value outside the range its column type can store."""


class SchemaError(RelationalError, ValueError):
    """Types, orders or indices that do not fit together."""


class DecodeError(RelationalError, ValueError):
    """Encoded bytes that cannot be decoded: truncated, malformed, or trailing garbage."""

    def __init__(self, reason: str, offset: int | None = None, encoding: str = "row"):
        self.reason = reason
        self.offset = offset
        self.encoding = encoding
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"malformed {encoding} encoding{where}: {reason}")
