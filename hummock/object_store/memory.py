"""An in-process object store backed by a dict: for tests and ``memory://`` URLs.

Each :class:`MemoryObjectStore` is a handle on a :class:`_Objects` table. ``MemoryObjectStore()``
(and ``open_object_store("memory://")``) gets a fresh private table; ``MemoryObjectStore.named(n)``
(``"memory://n"``) gets the process-wide table called ``n``, so a test can close a store and
"reopen" it to find its data. Closing a handle never drops the table; ``drop_named`` does.

Guarantees: the contract of ``base.py``; every table operation holds the table's lock, so
uploads, reads and lists are atomic with respect to each other. Stored bytes are copies, so a
caller may reuse its buffer after ``upload``. Nothing survives the process.
"""

from __future__ import annotations

import datetime
import threading

from hummock.object_store.base import (
    ObjectMeta, ObjectNotFoundError, ObjectStore, StreamingUploader, resolve_range,
)
from hummock.object_store.locks import RegistryLock

__all__ = ["MemoryObjectStore"]


class _Objects:
    """One table of objects: path -> (bytes, last_modified), guarded by ``lock``."""

    def __init__(self):
        self.lock = threading.Lock()
        self.data: dict[str, tuple[bytes, datetime.datetime]] = {}

    def get(self, path: str) -> bytes:
        with self.lock:
            entry = self.data.get(path)
        if entry is None:
            raise ObjectNotFoundError(f"object {path!r} not found in memory store", path=path)
        return entry[0]

    def put(self, path: str, data: bytes) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        with self.lock:
            self.data[path] = (data, now)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        now = datetime.datetime.now(datetime.timezone.utc)
        with self.lock:
            if path in self.data:
                return False
            self.data[path] = (data, now)
            return True


_named: dict[str, _Objects] = {}
_named_lock = threading.Lock()


class MemoryObjectStore(ObjectStore):
    """A dict-backed store; see the module doc for private and named tables."""

    def __init__(self, *, _objects: _Objects | None = None, _name: str | None = None):
        super().__init__()
        self._objects = _objects if _objects is not None else _Objects()
        self._name = _name

    @classmethod
    def named(cls, name: str) -> MemoryObjectStore:
        """A new handle on the process-wide table ``name`` (created empty on first use)."""
        with _named_lock:
            objects = _named.setdefault(name, _Objects())
        return cls(_objects=objects, _name=name)

    @staticmethod
    def drop_named(name: str) -> None:
        """Forget the process-wide table ``name``; open handles keep their data until closed."""
        with _named_lock:
            _named.pop(name, None)

    def __repr__(self) -> str:
        return f"MemoryObjectStore(name={self._name!r})"

    def _upload(self, path, data):
        self._objects.put(path, bytes(data))

    def _upload_if_absent(self, path, data):
        return self._objects.put_if_absent(path, bytes(data))

    def writer_lock(self, info: dict, *, stale_after: float, force: bool):
        """A process-wide registry entry keyed by :meth:`lock_key` (``force`` takes it over)."""
        return RegistryLock(self, info, force)

    def lock_key(self) -> object:
        """An opaque token naming this handle's table: the same object for every handle on the
        same table (``named``), so ``hummock.manifest.WriterLock`` can key its registry on it."""
        return self._objects

    def _read(self, path, start, end):
        data = self._objects.get(path)
        end = resolve_range(path, start, end, len(data))
        return data[start:end]

    def _size(self, path):
        return len(self._objects.get(path))

    def _exists(self, path):
        with self._objects.lock:
            return path in self._objects.data

    def _delete(self, paths):
        with self._objects.lock:
            for path in paths:
                self._objects.data.pop(path, None)

    def _list(self, prefix):
        with self._objects.lock:
            items = list(self._objects.data.items())
        return [ObjectMeta(path, len(data), modified)
                for path, (data, modified) in items if path.startswith(prefix)]

    def _streaming_upload(self, path):
        return _MemoryUploader(path, self._objects)


class _MemoryUploader(StreamingUploader):
    """Buffers the pieces and stores the joined bytes on ``finish``."""

    def __init__(self, path: str, objects: _Objects):
        super().__init__(path)
        self._objects = objects
        self._parts: list[bytes] = []

    def _write(self, data):
        self._parts.append(bytes(data))

    def _finish(self):
        self._objects.put(self.path, b"".join(self._parts))
        self._parts = []

    def _abort(self):
        self._parts = []
