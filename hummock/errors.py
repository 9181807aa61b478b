"""The exception tree of the whole project, rooted in :class:`HummockError`.

Every error the engine raises on purpose derives from ``HummockError``; each also inherits the
builtin exception a Python user would expect (``ValueError`` for bad arguments, ``OSError`` for
I/O), the way pyarrow's ``ArrowInvalid`` inherits ``ValueError``. Higher layers (relational,
stream, sql) root their own subtrees here so one ``except HummockError`` catches everything.

``assert`` is reserved for the engine's own bugs; user input and stored bytes are checked with
these exceptions instead.
"""

from __future__ import annotations


class HummockError(Exception):
    """Root of every error raised deliberately by this project."""


class InvalidArgumentError(HummockError, ValueError):
    """A caller passed a value the API does not accept (wrong order, out of range, bad type)."""


class KeyFormatError(HummockError, ValueError):
    """A full key or epoch is malformed (too short, out of range)."""


class CorruptionError(HummockError, ValueError):
    """Stored bytes fail a check: checksum, magic, version, length or bounds.

    Carries where the problem is and what was expected, so an operator can find the object:
    ``object`` (an object-store path or a description of the buffer), ``offset`` (byte offset
    within it, or ``None``), ``expected`` and ``found`` (values, or ``None`` when not a mismatch).
    """

    def __init__(self, message: str, *, object: str | None = None, offset: int | None = None,
                 expected=None, found=None):
        self.object = object
        self.offset = offset
        self.expected = expected
        self.found = found
        detail = []
        if object is not None:
            detail.append(f"object={object}")
        if offset is not None:
            detail.append(f"offset={offset}")
        if expected is not None or found is not None:
            detail.append(f"expected={expected!r}")
            detail.append(f"found={found!r}")
        super().__init__(f"{message} ({', '.join(detail)})" if detail else message)


class ExpiredEpochError(HummockError, ValueError):
    """A read asked for an epoch the store no longer keeps exactly: compaction may have dropped
    versions below ``min_readable_epoch``. Read at or above it, or pin the epoch first (a
    snapshot, or ``StorageOptions.retention_seconds``)."""

    def __init__(self, epoch: int, min_readable_epoch: int):
        self.epoch = epoch
        self.min_readable_epoch = min_readable_epoch
        super().__init__(f"epoch {epoch} has expired: the oldest epoch this store still reads "
                         f"exactly is {min_readable_epoch} (min_readable_epoch); hold a snapshot "
                         f"or set StorageOptions.retention_seconds to keep old epochs readable")


class ConcurrentWriterError(HummockError):
    """Another writer owns the store: its lock is held, or it committed the version we tried to."""
