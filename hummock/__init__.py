"""Hummock: an LSM key-value store built for streaming checkpoints (DESIGN.md sections 3-6).

The bottom of the layering (sql -> stream -> relational -> hummock): nothing here imports a
higher layer. Public so far: the error tree (:mod:`hummock.errors`), full keys and epochs
(:mod:`hummock.key`); the storage engine (``HummockStorage``) arrives with the engine issue.
"""

from hummock._version import __version__
from hummock.errors import CorruptionError, HummockError, InvalidArgumentError, KeyFormatError

__all__ = ["__version__", "HummockError", "CorruptionError", "InvalidArgumentError", "KeyFormatError"]
