"""Argument checks shared by the engine's public entry points (``HummockStorage`` and its
base classes): table ids and epochs, raising ``InvalidArgumentError`` naming the bad value.

Callers: :mod:`hummock.storage`, :mod:`hummock.marks_side`.
"""

from __future__ import annotations

from hummock.errors import InvalidArgumentError
from hummock.key import EPOCH_SPILL_MASK, MAX_EPOCH

MAX_TABLE_ID = 0xFFFFFFFF


def _check_table_id(table_id) -> int:
    if isinstance(table_id, bool) or not isinstance(table_id, int) or not 0 <= table_id <= MAX_TABLE_ID:
        raise InvalidArgumentError(f"table_id must be an int in [0, {MAX_TABLE_ID}], got {table_id!r}")
    return table_id


def _check_epoch(epoch) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
        raise InvalidArgumentError(f"epoch must be an int in [0, 2**64), got {epoch!r}")
    return epoch


def _check_user_epoch(epoch) -> int:
    """An epoch a writer seals, syncs or commits: its low 16 bits (spill offsets) are zero."""
    if _check_epoch(epoch) & EPOCH_SPILL_MASK:
        raise InvalidArgumentError(
            f"epoch {epoch} has low 16 bits set; those hold spill offsets (use "
            f"hummock.key.new_epoch() or multiples of 1 << 16)")
    return epoch


__all__ = ["MAX_TABLE_ID", "_check_epoch", "_check_table_id", "_check_user_epoch"]
