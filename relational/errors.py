"""Errors of the relational layer, all under :class:`hummock.errors.HummockError`.

- :class:`TypeMismatchError` (``TypeError``): a Python value of the wrong kind for its column.
- :class:`ValueOutOfRangeError` (``OverflowError``): a value that does not fit its type
  (SMALLINT/INT/BIGINT overflow, REAL overflow, a DECIMAL exponent beyond the format).
- :class:`DecodeError` (``ValueError``): encoded bytes that are truncated or malformed. Carries
  ``offset`` (where decoding stopped) and ``reason``; never a misread value.
- :class:`InconsistentOpError` (``ValueError``): a state-table write that contradicts the table in
  strict mode (insert of an existing pk, delete or update of a missing one, wrong old row).
- :class:`VnodeNotOwnedError` (``ValueError``): a row outside the vnodes a table instance owns.
- :class:`SchemaError` (``ValueError``): a schema argument that makes no sense (orders and types
  of different lengths, unknown type codes, a missing ``pk_indices``), or a row or chunk of the
  wrong width.
- :class:`RowError` (a ``SchemaError``, also ``TypeError``): a row, pk, pk prefix or bound that
  is not a sequence of values (an int, a str, ``None`` where a tuple belongs).
- :class:`EpochError` (an :class:`~hummock.errors.InvalidArgumentError`, so ``ValueError``): an
  epoch a table refuses (not an int, low 16 bits set, not above the current epoch, above the
  committed epoch for a read); carries ``epoch`` and ``current``.

Callers: the relational encoders (pure and native raise the same classes), state tables and the
layers above, which may subclass :class:`RelationalError` for their own errors.
"""

from __future__ import annotations

from hummock.errors import HummockError, InvalidArgumentError


class RelationalError(HummockError):
    """Root of the relational layer's errors."""


class TypeMismatchError(RelationalError, TypeError):
    """A value of the wrong Python type for its column type."""


class ValueOutOfRangeError(RelationalError, OverflowError):
    """A value outside the range its column type can store."""


class SchemaError(RelationalError, ValueError):
    """Types, orders or indices that do not fit together."""


class RowError(SchemaError, TypeError):
    """A row, pk, pk prefix or bound that is not a sequence of column values."""


class EpochError(RelationalError, InvalidArgumentError):
    """An epoch argument a table refuses. Carries ``epoch`` (as given) and ``current`` (the
    table's epoch, or the store's ``max_committed_epoch`` for reads; ``None`` if unknown)."""

    def __init__(self, message: str, epoch=None, current=None):
        self.epoch = epoch
        self.current = current
        super().__init__(message)


class DecodeError(RelationalError, ValueError):
    """Encoded bytes that cannot be decoded: truncated, malformed, or trailing garbage."""

    def __init__(self, reason: str, offset: int | None = None, encoding: str = "row"):
        self.reason = reason
        self.offset = offset
        self.encoding = encoding
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"malformed {encoding} encoding{where}: {reason}")


class InconsistentOpError(RelationalError, ValueError):
    """A write that contradicts the table's contents in strict (consistent) mode: an insert of an
    existing pk, a delete or update of a missing pk, or an old row that is not the stored row.
    Carries ``pk`` (the primary key values, when known) and ``reason``."""

    def __init__(self, reason: str, pk=None, table: str | None = None):
        self.reason = reason
        self.pk = pk
        self.table = table
        where = f" in table {table}" if table else ""
        super().__init__(f"{reason}{where}: pk={pk!r}")


class VnodeNotOwnedError(RelationalError, ValueError):
    """A row whose vnode the table instance does not own (its ``vnodes`` bitmap)."""
