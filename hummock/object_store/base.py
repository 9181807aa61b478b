"""The object-store contract every backend implements: errors, paths, ``ObjectMeta``, the ABCs.

An object store maps paths to immutable byte strings (DESIGN.md section 4). Three backends
implement it (``memory.py``, ``local.py``, ``s3.py``); ``docs/object_store.md`` is the written
source of truth for the semantics, checked by ``tests/test_object_store.py`` on all three.

Invariants every backend keeps:
1. **Atomic publication.** ``upload`` and ``StreamingUploader.finish`` make a whole object
   visible under its final path, or nothing; readers never see a prefix of an object, and an
   overwrite replaces the old object in one step (readers see the old or the new bytes).
2. **Exact reads.** ``read(path, start, end)`` returns exactly ``end - start`` bytes or raises;
   a range past the end of the object raises :class:`ObjectRangeError`, never returns short data
   (the SST reader relies on exact lengths to detect truncation).
3. **Validated paths.** Every path passes :func:`check_path` before a backend sees it: relative,
   '/'-separated segments over ``[A-Za-z0-9._-]``, no empty segment, no segment starting with
   '.' (this rules out '.', '..' and the local store's ``.tmp-`` files). The engine builds paths
   from ids only; user-supplied names never reach a path.
4. **Atomic create.** ``upload_if_absent`` publishes an object only if none exists under its
   path, in one step: of two racing callers exactly one gets ``True``. The version manifest
   fences concurrent writers with it (``hummock/manifest.py``).
   **It is also a durability barrier**: before it publishes its object, every object this
   handle published under :meth:`ObjectStore.deferred_durability` is durable (a manifest delta
   never survives a crash that the SSTs it names did not).
5. **One error tree.** Backends raise :class:`ObjectStoreError` subclasses for I/O failures and
   :class:`~hummock.errors.InvalidArgumentError` for bad arguments; messages, reprs and logs never
   contain credentials.

The public methods live here as template methods: they validate arguments and the open state,
then call the backend's ``_``-prefixed hook, so validation is identical across backends.
Thread safety: a store may be shared by threads; a ``StreamingUploader`` belongs to one thread.
Callers: the SST builder/reader, the version manifest, vacuum, and ``open_object_store``.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import datetime
import errno
import re
from collections.abc import Iterable

from hummock.errors import HummockError, InvalidArgumentError

__all__ = [
    "ObjectStoreError", "ObjectNotFoundError", "ObjectRangeError", "ObjectMeta",
    "ObjectStore", "StreamingUploader", "check_path", "check_prefix", "check_text", "MAX_PATH_LEN",
]

MAX_PATH_LEN = 1024  # S3's key limit; the store prefix counts towards it on S3
MAX_SEGMENT_LEN = 255  # a file-name limit of common local file systems
_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


class ObjectStoreError(HummockError, OSError):
    """An object-store operation failed (I/O, network, service error, closed store).

    ``path`` is the object path involved, or ``None``. Also an ``OSError``, so code that treats
    storage failures as I/O errors keeps working.
    """

    def __init__(self, message: str, *, path: str | None = None):
        self.path = path
        super().__init__(message)


class ObjectNotFoundError(ObjectStoreError, FileNotFoundError):
    """The object does not exist. Also a ``FileNotFoundError`` (``errno`` is ``ENOENT``)."""

    def __init__(self, message: str, *, path: str | None = None):
        super().__init__(message, path=path)
        self.errno = errno.ENOENT


class ObjectRangeError(ObjectStoreError):
    """A ranged read asked for bytes past the end of the object.

    Carries ``start``, ``end`` (the requested half-open range, ``end`` ``None`` = to the end) and
    ``size`` (the object's size, ``None`` if the backend did not report it).
    """

    def __init__(self, message: str, *, path: str | None = None, start: int | None = None,
                 end: int | None = None, size: int | None = None):
        self.start = start
        self.end = end
        self.size = size
        super().__init__(message, path=path)


def range_error(path: str, start: int, end: int | None, size: int | None) -> ObjectRangeError:
    """The one wording of a range error, shared by the backends."""
    shown = "end" if end is None else end
    return ObjectRangeError(
        f"range [{start}, {shown}) is beyond the object {path!r} of size {size}",
        path=path, start=start, end=end, size=size)


def resolve_range(path: str, start: int, end: int | None, size: int) -> int:
    """Return the end of ``[start, end)`` within an object of ``size`` bytes, or raise."""
    if (start if end is None else end) > size:
        raise range_error(path, start, end, size)
    return size if end is None else end


@dataclasses.dataclass(frozen=True)
class ObjectMeta:
    """One entry of :meth:`ObjectStore.list`: the path, its size in bytes, the last write (UTC)."""

    path: str
    size: int
    last_modified: datetime.datetime


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(text: str, what: str) -> str:
    """Return ``text`` unless it holds a lone surrogate (``"\\ud800"``; text that no UTF-8
    file name, URL or S3 key can spell), else ``InvalidArgumentError`` naming ``what`` and
    where. A directory whose name is not UTF-8 is given as ``bytes`` instead."""
    m = _SURROGATE.search(text)
    if m is not None:
        raise InvalidArgumentError(f"{what} holds a lone surrogate {ascii(m.group(0))} at character {m.start()}: "
                                   "it is not valid Unicode text")
    return text


def check_path(path) -> str:
    """Return ``path`` if it is a valid object path, else raise ``InvalidArgumentError``.

    Valid: a non-empty ``str`` of at most ``MAX_PATH_LEN`` characters, '/'-separated segments
    matching ``[A-Za-z0-9_-][A-Za-z0-9._-]*`` of at most ``MAX_SEGMENT_LEN`` characters each (so
    no leading or trailing '/', no '//', no '.'/'..', no hidden names, no backslash or NUL).
    """
    if not isinstance(path, str):
        raise InvalidArgumentError(f"object path must be a str, got {type(path).__name__}")
    if not path or len(path) > MAX_PATH_LEN:
        raise InvalidArgumentError(
            f"object path must have 1 to {MAX_PATH_LEN} characters, got {len(path)}")
    for segment in path.split("/"):
        if not _SEGMENT.fullmatch(segment) or len(segment) > MAX_SEGMENT_LEN:
            raise InvalidArgumentError(
                f"invalid object path {path!r}: segment {segment!r} must be 1 to "
                f"{MAX_SEGMENT_LEN} characters of [A-Za-z0-9._-] not starting with '.'")
    return path


def check_prefix(prefix) -> str:
    """Return ``prefix`` if it may start an object path (``""`` or a path, '/' may end it)."""
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"list prefix must be a str, got {type(prefix).__name__}")
    if prefix:
        check_path(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


def _check_data(data) -> bytes | bytearray | memoryview:
    """Return ``data`` as bytes-like with ``len()`` in bytes (a memoryview is cast to bytes)."""
    if isinstance(data, memoryview):
        return data.cast("B") if data.c_contiguous else data.tobytes()
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgumentError(
            f"object data must be bytes, bytearray or memoryview, got {type(data).__name__}")
    return data


def _check_offset(name: str, value) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgumentError(f"read {name} must be None or an int >= 0, got {value!r}")
    return value


class StreamingUploader(abc.ABC):
    """Writes one object piece by piece; nothing is visible until :meth:`finish`.

    States: open → finished (``finish`` succeeded) or aborted (``abort``, or any failure in
    ``write``/``finish``, after which the backend has cleaned up its partial data). As a context
    manager it finishes on a clean exit and aborts when the block raises. One thread only.
    """

    def __init__(self, path: str):
        self.path = path
        self.bytes_written = 0
        self._state = "open"

    def write(self, data) -> None:
        """Append ``data`` (bytes-like). REQUIRES: open. Raises ObjectStoreError (then aborted)."""
        data = _check_data(data)
        self._require_open("write to")
        self._guarded(self._write, data)
        self.bytes_written += len(data)

    def finish(self) -> None:
        """Publish the object atomically. REQUIRES: open. Raises ObjectStoreError (then aborted)."""
        self._require_open("finish")
        self._guarded(self._finish)
        self._state = "finished"

    def abort(self) -> None:
        """Discard everything written; a no-op once finished or aborted. Never publishes."""
        if self._state == "open":
            self._state = "aborted"
            self._abort()

    def __enter__(self) -> StreamingUploader:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.abort()

    def _require_open(self, action: str) -> None:
        if self._state != "open":
            raise InvalidArgumentError(
                f"cannot {action} the upload of {self.path!r}: it is already {self._state}")

    def _guarded(self, step, *args) -> None:
        try:
            step(*args)
        except BaseException:
            self.abort()
            raise

    @abc.abstractmethod
    def _write(self, data) -> None: ...

    @abc.abstractmethod
    def _finish(self) -> None: ...

    @abc.abstractmethod
    def _abort(self) -> None:
        """Release partial data; must not raise (log instead)."""


class ObjectStore(abc.ABC):
    """A flat namespace of immutable objects addressed by validated paths (see module doc).

    Every method raises ``InvalidArgumentError`` for a bad path or argument and
    ``ObjectStoreError`` when the store is closed or the backend fails. Also a context manager
    that closes the store.
    """

    def __init__(self):
        self._closed = False

    def upload(self, path: str, data) -> None:
        """Store ``data`` (bytes-like) under ``path``, replacing any old object atomically."""
        path = check_path(path)
        data = _check_data(data)
        self._require_open()
        self._upload(path, data)

    def upload_scratch(self, path: str, data) -> None:
        """Store ``data`` under ``path`` like :meth:`upload`, for an object nobody needs after a
        crash (the Spark pipeline's exchange files): readers still see the complete object or
        none, but a backend may skip making it durable (the local store does not fsync)."""
        path = check_path(path)
        data = _check_data(data)
        self._require_open()
        self._upload_scratch(path, data)

    def deferred_durability(self):
        """A context manager: streaming uploads this thread *starts* inside it may be published
        (atomically, as ever: readers see the whole object or none) before they are durable;
        they become durable no later than the next :meth:`upload_if_absent` on this handle, and
        before that call publishes its own object (module invariant 4). After a crash such an
        object may be missing or partial: only for objects nothing durable names yet, whose
        path is never written twice (SSTs under fresh ids, which the manifest delta written by
        that ``upload_if_absent`` names). Backends whose uploads are durable when they return
        (memory, S3) and wrappers ignore it (the default here): the contract holds trivially.
        The engine's uploader thread wraps its flushes in it (``hummock/storage.py``), so a
        checkpoint pays its fsyncs once, together with the delta's (docs/object_store.md)."""
        return contextlib.nullcontext()

    def upload_if_absent(self, path: str, data) -> bool:
        """Store ``data`` under ``path`` only if no object is there; return whether it did.

        Atomic (module invariant 4): the check and the publication are one step, so of any
        number of racing callers (threads, processes, hosts) exactly one gets ``True``, and an
        existing object is never modified. ``False`` means the object already existed (its bytes
        may differ from ``data``). Raises ObjectStoreError on failure; then, as for ``upload``,
        the object may or may not have been created (on S3 a lost reply leaves it unknown).
        Whatever it returns, the uploads deferred under :meth:`deferred_durability` before the
        call are durable once it returns (a barrier, module invariant 4).
        """
        path = check_path(path)
        data = _check_data(data)
        self._require_open()
        return self._upload_if_absent(path, data)

    def read(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object (``None``: from its start / to its end).

        REQUIRES: ``0 <= start <= end``. Raises ObjectNotFoundError if the object is missing,
        ObjectRangeError if ``end`` (or ``start``) exceeds its size. The result has exactly
        ``end - start`` bytes and is the caller's to keep.
        """
        path = check_path(path)
        start = _check_offset("start", start) or 0
        end = _check_offset("end", end)
        if end is not None and start > end:
            raise InvalidArgumentError(f"read start {start} is after end {end}")
        self._require_open()
        return self._read(path, start, end)

    def size(self, path: str) -> int:
        """Return the object's size in bytes. Raises ObjectNotFoundError if it is missing."""
        path = check_path(path)
        self._require_open()
        return self._size(path)

    def local_file(self, path: str) -> bytes | None:
        """The name of the local file holding the object under ``path`` (``os.fsencode``d), for
        readers that ``pread`` it directly (the native block loader), or None when this backend
        keeps no such file (S3, memory, wrappers) or the store is closed. Whether the object
        exists is not checked: a reader of a missing file fails and falls back to :meth:`read`,
        which raises the store's own error."""
        path = check_path(path)
        return None if self._closed else self._local_file(path)

    def _local_file(self, path: str) -> bytes | None:
        return None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (every later call raises ``ObjectStoreError``)."""
        return self._closed

    def exists(self, path: str) -> bool:
        """Whether an object is stored under ``path``."""
        path = check_path(path)
        self._require_open()
        return self._exists(path)

    def delete(self, paths: str | Iterable[str]) -> None:
        """Delete one path or an iterable of paths; missing objects are not an error.

        Every path is validated before anything is deleted (``None``, a number or anything
        else that is neither a path nor an iterable of paths is ``InvalidArgumentError``). Not
        atomic across paths: on a failure some of them may be gone.
        """
        if isinstance(paths, str):
            paths = [paths]
        elif isinstance(paths, (bytes, bytearray, memoryview)) or not isinstance(paths, Iterable):
            raise InvalidArgumentError(f"delete takes an object path or an iterable of paths, got "
                                       f"{type(paths).__name__}")
        else:
            paths = list(paths)
        paths = [check_path(p) for p in paths]
        self._require_open()
        if paths:
            self._delete(paths)

    def list(self, prefix: str = "") -> list[ObjectMeta]:
        """Every object whose path starts with ``prefix`` (a plain string prefix), sorted by path.

        Temporary files of unfinished uploads are never listed; neither are foreign objects whose
        names are not valid paths.
        """
        prefix = check_prefix(prefix)
        self._require_open()
        return sorted(self._list(prefix), key=lambda meta: meta.path)

    def streaming_upload(self, path: str) -> StreamingUploader:
        """Start writing ``path`` piece by piece; it is published by ``finish()`` only.

        REQUIRES: the uploader is finished or aborted before the store is closed.
        """
        path = check_path(path)
        self._require_open()
        return self._streaming_upload(path)

    def now(self) -> datetime.datetime:
        """The store's clock (UTC), the one its ``last_modified`` times come from: ages are
        ``now() - last_modified``. Local and memory stores use this machine's clock; S3 uses the
        service's ``Date`` header, so a skewed client clock cannot age an object early."""
        return datetime.datetime.now(datetime.timezone.utc)

    def writer_lock(self, info: dict, *, stale_after: float, force: bool):
        """This store's writer-lock mechanism (``hummock/object_store/locks.py``), taken for
        the holder ``info``; raises ``ConcurrentWriterError`` if another writer holds it. Stores
        without a mechanism refuse writers (``InvalidArgumentError``)."""
        raise InvalidArgumentError(f"{self!r} offers no writer lock mechanism")

    def lock_store(self) -> ObjectStore:
        """The store whose writer-lock mechanism guards this one (``hummock.manifest.WriterLock``):
        the store itself; a wrapper (fault injection, metrics) returns the store it wraps."""
        return self

    def close(self) -> None:
        """Release connections and handles; later calls raise ObjectStoreError. Idempotent."""
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._closed:
            raise ObjectStoreError(f"{self!r} is closed")

    @abc.abstractmethod
    def _upload(self, path: str, data) -> None: ...

    def _upload_scratch(self, path: str, data) -> None:
        self._upload(path, data)

    def _upload_if_absent(self, path: str, data) -> bool:
        """Backend hook for :meth:`upload_if_absent`. Not abstract so that foreign subclasses
        keep working, but a backend must override it: there is no safe generic fallback."""
        raise ObjectStoreError(f"{type(self).__name__} does not support atomic create "
                               f"(upload_if_absent)", path=path)

    @abc.abstractmethod
    def _read(self, path: str, start: int, end: int | None) -> bytes: ...

    @abc.abstractmethod
    def _size(self, path: str) -> int: ...

    @abc.abstractmethod
    def _exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def _delete(self, paths: list[str]) -> None: ...

    @abc.abstractmethod
    def _list(self, prefix: str) -> Iterable[ObjectMeta]: ...

    @abc.abstractmethod
    def _streaming_upload(self, path: str) -> StreamingUploader: ...

    def _close(self) -> None:
        """Backend hook for :meth:`close`; the default holds nothing to release."""
