"""Object stores: where SSTs and the version manifest live (DESIGN.md section 4).

``open_object_store(url, **options)`` picks the backend from a URL (``docs/object_store.md``):

- ``/abs/path``, ``rel/path`` or ``file:///abs/path`` → :class:`LocalObjectStore` (the default);
- ``memory://`` → a fresh private :class:`MemoryObjectStore`; ``memory://name`` → a handle on
  the process-wide table ``name`` (found again by a later ``memory://name`` in the process);
- ``s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1`` →
  :class:`S3ObjectStore`. Query keys: ``endpoint`` (or ``endpoint_url``), ``region``,
  ``max_attempts``, ``part_size``, ``addressing_style``. Credentials are never accepted in a URL
  (neither ``s3://key:secret@bucket`` nor a query key); pass them as options or use the AWS
  environment.

A URL or path is text: one holding a lone surrogate (``"\\ud800"``) is refused, and so is a URL
that ``urllib`` cannot split (``s3://[x]/y``: an invalid IPv6 host); a local path whose name is
not UTF-8 is given as ``bytes`` (or a ``PathLike`` of bytes).

``options`` are keyword arguments of the backend's constructor; an option set to ``None`` means
"not set" and is ignored by every backend, so callers may pass their S3 settings unconditionally.
A setting given both in the URL and in ``options`` must agree. Bad URLs and options raise
:class:`~hummock.errors.InvalidArgumentError`; error messages never repeat credentials.

The contract all backends share (atomic uploads, exact ranged reads, path rules, errors) is in
``base.py``. Callers: the storage engine's ``open``, tools and tests.
"""

from __future__ import annotations

import inspect
import os
import re
import urllib.parse

from hummock.errors import InvalidArgumentError
from hummock.object_store.base import (
    ObjectMeta, ObjectNotFoundError, ObjectRangeError, ObjectStore, ObjectStoreError,
    StreamingUploader, check_path, check_text,
)
from hummock.object_store.local import LocalObjectStore
from hummock.object_store.memory import MemoryObjectStore

# boto3 costs ~0.1 s to import: the S3 backend loads on first use (an s3:// URL, or an import
# of S3ObjectStore from here), never for a local or memory store
def __getattr__(name: str):
    if name == "S3ObjectStore":
        from hummock.object_store.s3 import S3ObjectStore
        return S3ObjectStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "open_object_store", "ObjectStore", "StreamingUploader", "ObjectMeta", "ObjectStoreError",
    "ObjectNotFoundError", "ObjectRangeError", "LocalObjectStore", "MemoryObjectStore",
    "S3ObjectStore", "check_path",
]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_MEMORY_NAME = re.compile(r"[A-Za-z0-9._-]+")
# URL query key -> S3ObjectStore argument and its parser
_S3_QUERY = {
    "endpoint": ("endpoint_url", str), "endpoint_url": ("endpoint_url", str),
    "region": ("region", str), "max_attempts": ("max_attempts", int),
    "part_size": ("part_size", int), "addressing_style": ("addressing_style", str),
}

def _s3_options() -> frozenset:
    from hummock.object_store.s3 import S3ObjectStore
    return frozenset(inspect.signature(S3ObjectStore).parameters) - {"bucket", "prefix"}



def open_object_store(url: str | os.PathLike, *, create: bool = True, **options) -> ObjectStore:
    """Open the object store ``url`` names (see the module doc for the forms and options).
    ``create=False`` (read-only openers) never creates anything: a missing local directory
    raises ObjectNotFoundError instead."""
    options = {name: value for name, value in options.items() if value is not None}
    if isinstance(url, os.PathLike):
        return _local(os.fspath(url), options, create)
    if not isinstance(url, str) or not url:
        raise InvalidArgumentError(f"object store URL must be a non-empty str, got {url!r}")
    check_text(url, "the object store URL")
    if "://" not in url:
        if _SCHEME.match(url):
            raise InvalidArgumentError(
                f"object store URL with scheme {url.split(':')[0]!r} but no '//'; use "
                f"file:///, memory:// or s3://, or start a relative path with ./")
        return _local(url, options, create)
    scheme = url.split("://", 1)[0].lower()
    # '@' marks user info; a secret may hold '/', so look before the query, not just the netloc
    if scheme != "file" and "@" in url.split("://", 1)[1].split("?", 1)[0]:
        raise InvalidArgumentError(
            f"{scheme}:// URLs must not contain credentials (user:secret@); pass the "
            f"access_key_id and secret_access_key options or use the AWS environment")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port   # parsed lazily: a bad port or IPv6 host fails here, not later in a backend
    except ValueError as exc:   # the URL is not repeated: it may carry user info
        raise InvalidArgumentError(f"{scheme}:// URL does not parse: {exc}") from None
    if scheme == "file":  # the URL is not repeated in errors: it may carry user info
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            raise InvalidArgumentError("file URL must look like file:///absolute/path")
        return _local(urllib.parse.unquote(parts.path), options, create)
    if scheme == "memory":
        return _memory(parts, options)
    if scheme == "s3":
        return _s3(parts, options)
    raise InvalidArgumentError(
        f"unknown object store scheme {scheme!r}; use a path, file:///, memory:// or s3://")


def _reject_options(kind: str, options: dict) -> None:
    if options:
        raise InvalidArgumentError(f"options {sorted(options)} do not apply to a {kind} store")


def _local(path: str, options: dict, create: bool = True) -> LocalObjectStore:
    _reject_options("local", options)
    if not path:
        raise InvalidArgumentError("local object store path is empty")
    return LocalObjectStore(path, create=create)


def _memory(parts: urllib.parse.SplitResult, options: dict) -> MemoryObjectStore:
    _reject_options("memory", options)
    name = parts.netloc
    if parts.path or parts.query or parts.fragment or (name and not _MEMORY_NAME.fullmatch(name)):
        raise InvalidArgumentError(
            "memory URL must be memory:// or memory://name with a name of [A-Za-z0-9._-]")
    return MemoryObjectStore.named(name) if name else MemoryObjectStore()


def _s3(parts: urllib.parse.SplitResult, options: dict) -> S3ObjectStore:
    from hummock.object_store.s3 import S3ObjectStore
    known = _s3_options()
    unknown = set(options) - known
    if unknown:
        raise InvalidArgumentError(
            f"unknown S3 options {sorted(unknown)}; known: {sorted(known)}")
    if parts.fragment:
        raise InvalidArgumentError("s3 URL must not have a #fragment")
    settings = {}
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key not in _S3_QUERY:
            hint = (" (credentials are not accepted in URLs; pass them as options or use the "
                    "AWS environment)" if re.search(r"key|secret|token|password|cred", key, re.I)
                    else "")
            raise InvalidArgumentError(f"unknown s3 URL query key {key!r}{hint}; known: "
                                       f"{sorted(_S3_QUERY)}")
        name, parse = _S3_QUERY[key]
        try:
            parsed = parse(value)
        except ValueError:
            raise InvalidArgumentError(f"s3 URL query key {key!r} needs an integer") from None
        if settings.get(name, parsed) != parsed:
            raise InvalidArgumentError(f"s3 URL sets {name!r} twice")
        settings[name] = parsed
    for name, value in settings.items():
        if options.get(name, value) != value:
            raise InvalidArgumentError(
                f"S3 setting {name!r} is given in the URL and as an option with different values")
    return S3ObjectStore(parts.netloc, parts.path, **{**options, **settings})
