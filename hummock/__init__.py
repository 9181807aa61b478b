"""Hummock: an LSM key-value store built for streaming checkpoints (DESIGN.md sections 3-6).

The bottom of the layering (sql -> stream -> relational -> hummock): nothing here imports a
higher layer. Public names: :class:`HummockStorage` and :class:`StorageOptions` (the KV API),
the error tree (:class:`HummockError`, :class:`CorruptionError`, ...), and ``hummock.key`` for
epochs (``new_epoch``) and full keys.
"""

from hummock._version import __version__
from hummock.errors import (
    CorruptionError, ExpiredEpochError, HummockError, InvalidArgumentError, KeyFormatError,
)
from hummock.manifest import ConcurrentWriterError, OutcomeUnknownError
from hummock.options import StorageOptions
from hummock.storage import HummockStorage, ReadOnlyError, Snapshot, StoreClosedError

__all__ = ["__version__", "HummockStorage", "StorageOptions", "Snapshot", "HummockError", "CorruptionError",
           "InvalidArgumentError", "KeyFormatError", "ConcurrentWriterError", "ReadOnlyError", "StoreClosedError",
           "ExpiredEpochError", "OutcomeUnknownError"]
