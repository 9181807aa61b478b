"""The object store on S3 (or any S3-compatible service) through boto3.

The object ``p`` lives under the key ``<prefix>/<p>`` of ``bucket`` (``<p>`` if the prefix is
empty). S3 itself gives the atomicity the contract needs: a PUT or a completed multipart upload
is published whole, and reads are strongly consistent.

Retries (``docs/object_store.md``): botocore's own retries are switched off
(``total_max_attempts=1``) and every operation runs in :meth:`S3ObjectStore._call`, which retries
throttling codes, HTTP 429/5xx, connection errors and errors while *reading the body* up to
``max_attempts`` times with capped exponential backoff and full jitter, then raises
:class:`ObjectStoreError`. One loop instead of botocore's because botocore retries only the
request, not the download of a GET body nor our own check that a ranged GET returned exactly the
bytes asked for; stacking both would multiply the attempts. Every retried request is idempotent
(PUT of the same bytes, part uploads, deletes); a retried ``CompleteMultipartUpload`` whose first
attempt did succeed is recognised by the object's size.

Conditional writes: ``upload_if_absent`` is one ``PutObject`` with ``If-None-Match: *`` (S3
answers 412 PreconditionFailed if the key exists, atomically; moto supports it too), and
:meth:`S3ObjectStore.conditional_put` adds ``If-Match: <etag>`` (compare-and-swap, used by the
writer lock's heartbeat and takeover). A 409 ConditionalRequestConflict (a racing conditional
write) is retried. A retried conditional PUT that fails its precondition may be failing on our
own earlier attempt whose reply was lost; it counts as a success when the stored bytes equal
ours (for the manifest, equal bytes are the same commit). REQUIRES a service that honours these
headers; one that ignores them silently turns the atomic create into a plain PUT (the
manifest's writer lock then is the only guard; AWS S3 and MinIO honour them).

Credentials come from the options or the standard AWS chain (environment, config files, instance
role); they are handed to a private boto3 session and never kept, printed or logged. botocore
itself logs signed requests at DEBUG (the Authorization header with the access key id, the
session token): creating a store installs :class:`_RedactCredentials` on the botocore, boto3,
s3transfer and urllib3 loggers, which rewrites such records before any handler sees them.
``create_bucket_if_missing=True`` creates the bucket at construction; otherwise the store never
creates buckets. Abandoned multipart uploads (a crash mid-upload) are left to a bucket lifecycle
rule (AbortIncompleteMultipartUpload).

Thread safety: the boto3 client is thread-safe, so the store may be shared; one uploader per
thread. Callers: ``open_object_store`` (``s3://`` URLs) and tests.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import logging
import random
import re
import threading
import time
import urllib.parse

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError, ClientError, ConnectionError, HTTPClientError, IncompleteReadError,
)

from hummock.errors import InvalidArgumentError
from hummock.object_store.base import (
    ObjectMeta, ObjectNotFoundError, ObjectStore, ObjectStoreError, StreamingUploader,
    _check_data, check_path, check_text, range_error,
)
from hummock.object_store.locks import ObjectLock

__all__ = ["S3ObjectStore", "S3_MIN_PART_SIZE", "DEFAULT_PART_SIZE"]

log = logging.getLogger(__name__)

MiB = 1024 * 1024
S3_MIN_PART_SIZE = 5 * MiB  # S3 rule: every part but the last has at least 5 MiB
S3_MAX_PART_SIZE = 5 * 1024 * MiB
S3_MAX_PARTS = 10_000
S3_MAX_PUT_SIZE = 5 * 1024 * MiB  # larger objects go through a multipart upload
DELETE_BATCH = 1000  # DeleteObjects accepts at most 1000 keys
DEFAULT_PART_SIZE = 8 * MiB
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?")   # botocore's own rule
_ADDRESSING_STYLES = ("auto", "path", "virtual")
_MISSING_CODES = frozenset({"NoSuchKey", "NotFound", "404"})  # "404": a HEAD has no error body
_RANGE_CODES = frozenset({"InvalidRange", "416"})
_TRANSIENT_CODES = frozenset({
    "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottled",
    "RequestLimitExceeded", "TooManyRequests", "TooManyRequestsException",
    "ProvisionedThroughputExceededException", "RequestTimeout", "RequestTimeoutException",
    "InternalError", "ServiceUnavailable", "BandwidthLimitExceeded",
    "ConditionalRequestConflict",  # 409: a racing conditional write; retry to learn who won
})
_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412"})
_TRANSIENT_ERRORS = (ConnectionError, HTTPClientError, IncompleteReadError)
_shared_loader: botocore.loaders.Loader | None = None
_loader_lock = threading.Lock()


# --- log redaction ---------------------------------------------------------------------------

# A credential-bearing name (header, query parameter or signing field), its separator (as in a
# dict repr "'X-Amz-Security-Token': b'...'", a canonical request "x-amz-security-token:...", a
# query "X-Amz-Credential=..." or "Credential=AKID/..." inside Authorization), and its value.
_SECRET_FIELD = re.compile(
    r"""(?P<name>authorization|x-amz-security-token|(?:x-amz-)?credential|(?:x-amz-)?signature)"""
    r"""(?P<sep>['"]?\s*[:=]\s*)(?P<value>b?'[^']*'|b?"[^"]*"|[^\s&,;'"}\]]+)""",
    re.IGNORECASE)
# AWS access key ids, wherever they appear (AKIA: long-term, ASIA: temporary, ...).
_ACCESS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AIPA|ANPA|ANVA|AGPA|ABIA|ACCA)[A-Z0-9]{16}\b")
_REDACTED = "<redacted>"
_LOGGER_ROOTS = ("botocore", "boto3", "s3transfer", "urllib3")


def redact_credentials(text: str) -> str:
    """``text`` with credential values (Authorization, X-Amz-Security-Token, X-Amz-Credential,
    signatures, AWS access key ids) replaced by ``<redacted>``."""
    text = _SECRET_FIELD.sub(lambda m: m.group("name") + m.group("sep") + _REDACTED, text)
    return _ACCESS_KEY_ID.sub(_REDACTED, text)


class _RedactCredentials(logging.Filter):
    """Rewrites a log record's message so it holds no credentials (see :func:`redact_credentials`).

    Attached to each logger of botocore & co. (a logger's filters see only the records logged at
    that logger, not those of its children). Costs nothing unless the logger is enabled."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:   # a malformed record: leave it to logging's own error report
            return True
        redacted = redact_credentials(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


_REDACTOR = _RedactCredentials()
_redaction_lock = threading.Lock()


def _install_log_redaction() -> None:
    """Put the redacting filter on every botocore/boto3/s3transfer/urllib3 logger that exists
    (modules create theirs when imported, so each new store looks again). Idempotent."""
    with _redaction_lock:
        names = [name for name in list(logging.root.manager.loggerDict)
                 if name in _LOGGER_ROOTS or name.startswith(tuple(r + "." for r in _LOGGER_ROOTS))]
        for name in ("botocore.auth", "botocore.endpoint", "botocore.awsrequest", *names):
            logger = logging.getLogger(name)
            if _REDACTOR not in logger.filters:
                logger.addFilter(_REDACTOR)


class _Transient(Exception):
    """A condition this module detects itself and retries (short body, per-key delete error)."""


def _error_code(exc: ClientError) -> tuple[str, int]:
    code = exc.response.get("Error", {}).get("Code", "")
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return str(code), status


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        code, status = _error_code(exc)
        return code in _TRANSIENT_CODES or status == 429 or (status >= 500 and status != 501)
    return isinstance(exc, (_Transient, *_TRANSIENT_ERRORS))


class S3ObjectStore(ObjectStore):
    """Objects under ``s3://bucket/prefix``; see the module doc for retries and credentials.

    Raises InvalidArgumentError for bad options (bucket name, region, part size, half a key pair,
    an endpoint with user info) and ObjectStoreError if ``create_bucket_if_missing`` fails.
    """

    def __init__(self, bucket: str, prefix: str = "", *, endpoint_url: str | None = None,
                 region: str | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None, session_token: str | None = None,
                 max_attempts: int = 6, retry_base_delay: float = 0.1,
                 retry_max_delay: float = 5.0, part_size: int = DEFAULT_PART_SIZE,
                 connect_timeout: float = 10.0, read_timeout: float = 60.0,
                 max_pool_connections: int = 32, addressing_style: str | None = None,
                 create_bucket_if_missing: bool = False):
        super().__init__()
        if not isinstance(bucket, str) or not _BUCKET.fullmatch(bucket):
            raise InvalidArgumentError(f"invalid S3 bucket name {bucket!r}")
        prefix = (prefix or "").strip("/")
        self.bucket, self.prefix = bucket, check_path(prefix) if prefix else ""
        self._key_prefix = f"{self.prefix}/" if self.prefix else ""
        self.endpoint_url = _check_endpoint(endpoint_url)
        if region is not None and (not isinstance(region, str) or not _REGION.fullmatch(region)):
            raise InvalidArgumentError(f"invalid S3 region {ascii(region)}")
        _check_int("max_attempts", max_attempts, 1, 100)
        _check_int("part_size", part_size, S3_MIN_PART_SIZE, S3_MAX_PART_SIZE)
        if (access_key_id is None) != (secret_access_key is None) or (
                session_token is not None and access_key_id is None):
            raise InvalidArgumentError(
                "pass access_key_id and secret_access_key together (session_token only with "
                "them), or none of them to use the AWS environment")
        if addressing_style is not None and addressing_style not in _ADDRESSING_STYLES:
            raise InvalidArgumentError(f"addressing_style must be one of {', '.join(_ADDRESSING_STYLES)} "
                                       f"(or None), got {addressing_style!r}")
        self.max_attempts, self.part_size = max_attempts, part_size
        self._server_clock = None   # (the service's Date of the last listing, monotonic then)
        self._clock_lock = threading.Lock()
        self._base_delay, self._max_delay = retry_base_delay, retry_max_delay
        _install_log_redaction()
        config = Config(
            retries={"total_max_attempts": 1, "mode": "standard"},  # retried by _call
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            max_pool_connections=max_pool_connections,
            s3={"addressing_style": addressing_style or ("path" if endpoint_url else "auto")})
        try:
            session = boto3.session.Session(
                aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
                aws_session_token=session_token, region_name=region,
                botocore_session=_botocore_session())
            self._client = session.client("s3", endpoint_url=self.endpoint_url, config=config)
        except BotoCoreError as exc:
            raise ObjectStoreError(
                f"cannot create an S3 client for bucket {bucket!r}: {exc}") from exc
        _install_log_redaction()   # again: making the client imported more of botocore
        self.region = self._client.meta.region_name
        if create_bucket_if_missing:
            self._call("create bucket", None, self._create_bucket)

    def __repr__(self) -> str:
        return (f"S3ObjectStore(bucket={self.bucket!r}, prefix={self.prefix!r}, "
                f"endpoint_url={self.endpoint_url!r}, region={self.region!r})")

    def _key(self, path: str) -> str:
        return self._key_prefix + path

    def _call(self, op: str, path: str | None, fn):
        """Run ``fn()`` with the retry policy; translate botocore errors to ObjectStoreError."""
        what = f"S3 {op}" + ("" if path is None else f" of {path!r}")
        attempt = 1
        while True:
            try:
                return fn()
            except ObjectStoreError:
                raise
            except (BotoCoreError, ClientError, _Transient) as exc:
                if isinstance(exc, ClientError) and _error_code(exc)[0] in _MISSING_CODES:
                    raise ObjectNotFoundError(
                        f"object {path!r} not found in s3://{self.bucket}/{self.prefix}",
                        path=path) from exc
                if not _is_transient(exc):
                    raise ObjectStoreError(
                        f"{what} in bucket {self.bucket!r} failed: {exc}", path=path) from exc
                if attempt >= self.max_attempts:
                    raise ObjectStoreError(
                        f"{what} in bucket {self.bucket!r} failed after {attempt} attempts: "
                        f"{exc}", path=path) from exc
                delay = random.uniform(0, min(self._max_delay,
                                              self._base_delay * 2 ** (attempt - 1)))
                log.warning("%s failed (attempt %d of %d), retrying in %.3f s: %s",
                            what, attempt, self.max_attempts, delay, exc)
                time.sleep(delay)
                attempt += 1

    def _create_bucket(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.bucket)
            return
        except ClientError as exc:
            if _error_code(exc)[0] not in ("404", "NoSuchBucket"):
                raise
        kwargs = {}
        if self.region and self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self._client.create_bucket(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            if _error_code(exc)[0] != "BucketAlreadyOwnedByYou":
                raise

    def _put(self, path: str, data: bytes) -> None:
        self._call("upload", path, lambda: self._client.put_object(
            Bucket=self.bucket, Key=self._key(path), Body=data))

    def _upload(self, path, data):
        if len(data) <= S3_MAX_PUT_SIZE:
            self._put(path, data if isinstance(data, bytes) else bytes(data))
        else:
            with self._streaming_upload(path) as uploader:
                uploader.write(data)

    def _upload_if_absent(self, path, data):
        return self._conditional_put(path, data, None) is not None

    def writer_lock(self, info: dict, *, stale_after: float, force: bool):
        """The lock object ``manifest/writer-lock``, taken and renewed by conditional writes
        (``force`` takes over a live holder's)."""
        return ObjectLock(self, info, stale_after, force)

    def conditional_put(self, path: str, data, *, if_match: str | None = None) -> str | None:
        """PUT ``data`` if the object is absent (``if_match`` None) or its ETag is ``if_match``.

        Returns the new object's ETag, or ``None`` when the precondition failed (the object
        exists, resp. is missing or has another ETag). REQUIRES ``len(data) <= 5 GiB`` (one
        PUT; else InvalidArgumentError). Raises ObjectStoreError as ``upload`` does.
        """
        path = check_path(path)
        data = _check_data(data)
        if if_match is not None and (not isinstance(if_match, str) or not if_match):
            raise InvalidArgumentError(f"if_match must be a non-empty ETag str, got {if_match!r}")
        self._require_open()
        return self._conditional_put(path, data, if_match)

    def _conditional_put(self, path: str, data, if_match: str | None) -> str | None:
        if len(data) > S3_MAX_PUT_SIZE:
            raise InvalidArgumentError(
                f"a conditional upload is one PUT of at most {S3_MAX_PUT_SIZE} bytes; "
                f"{path!r} has {len(data)}")
        body = data if isinstance(data, bytes) else bytes(data)
        condition = {"IfNoneMatch": "*"} if if_match is None else {"IfMatch": if_match}
        attempts = 0

        def put():
            nonlocal attempts
            attempts += 1
            try:
                return self._client.put_object(Bucket=self.bucket, Key=self._key(path),
                                               Body=body, **condition)["ETag"]
            except ClientError as exc:
                code, status = _error_code(exc)
                if status == 412 or code in _PRECONDITION_CODES or (
                        if_match is not None and code in _MISSING_CODES):
                    return None
                raise
        etag = self._call("conditional upload", path, put)
        if etag is None and attempts > 1:  # maybe our own lost first attempt: look
            with contextlib.suppress(ObjectNotFoundError):
                stored, stored_etag, _ = self.read_with_etag(path)
                if stored == body:
                    return stored_etag
        return etag

    def read_with_etag(self, path: str) -> tuple[bytes, str, float | None]:
        """Return ``(data, etag, age_seconds)`` of the whole object.

        ``age_seconds`` is the server's ``Date`` minus the object's ``Last-Modified`` (both the
        service's clock, so client clock skew does not matter; 1 s resolution), or ``None`` if
        the reply lacks them. Raises ObjectNotFoundError if the object is missing.
        """
        path = check_path(path)
        self._require_open()
        return self._call("read", path, lambda: self._get_with_etag(path))

    def _get_with_etag(self, path: str) -> tuple[bytes, str, float | None]:
        response = self._client.get_object(Bucket=self.bucket, Key=self._key(path))
        with contextlib.closing(response["Body"]) as body:
            data = body.read()
        if len(data) != response["ContentLength"]:
            raise _Transient(f"GET returned {len(data)} bytes, expected {response['ContentLength']}")
        return data, response["ETag"], _server_age(response)

    def _read(self, path, start, end):
        if end == start:  # S3 has no empty ranges: only check the bound
            size = self._size(path)
            if end > size:
                raise range_error(path, start, end, size)
            return b""
        return self._call("read", path, lambda: self._get(path, start, end))

    def _get(self, path: str, start: int, end: int | None) -> bytes:
        kwargs = {}
        if start or end is not None:
            kwargs["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self._key(path), **kwargs)
        except ClientError as exc:
            if _error_code(exc)[0] not in _RANGE_CODES and _error_code(exc)[1] != 416:
                raise
            size = _int_or_none(exc.response.get("Error", {}).get("ActualObjectSize"))
            if end is None and (size if size is not None else self._size(path)) == start:
                return b""  # [size, end of object) is empty, not out of range
            raise range_error(path, start, end, size) from exc
        with contextlib.closing(response["Body"]) as body:
            data = body.read()
        wanted = response["ContentLength"] if end is None else end - start
        if len(data) != wanted:
            total = _content_range_total(response.get("ContentRange"))
            if end is not None and total is not None and total < end:
                raise range_error(path, start, end, total)
            raise _Transient(f"ranged GET returned {len(data)} bytes, expected {wanted}")
        return data

    def _size(self, path):
        response = self._call("size", path, lambda: self._client.head_object(
            Bucket=self.bucket, Key=self._key(path)))
        return response["ContentLength"]

    def _exists(self, path):
        try:
            self._size(path)
        except ObjectNotFoundError:
            return False
        return True

    def _delete(self, paths):
        keys = list(dict.fromkeys(self._key(p) for p in paths))
        for i in range(0, len(keys), DELETE_BATCH):
            batch = keys[i:i + DELETE_BATCH]
            self._call(f"delete of {len(batch)} objects", None, lambda: self._delete_batch(batch))

    def _delete_batch(self, keys: list[str]) -> None:
        response = self._client.delete_objects(Bucket=self.bucket, Delete={
            "Objects": [{"Key": key} for key in keys], "Quiet": True})
        errors = response.get("Errors") or []
        if any(e.get("Code") in _TRANSIENT_CODES for e in errors):
            raise _Transient(f"{len(errors)} keys not deleted, e.g. {errors[0].get('Code')}")
        if errors:
            first = errors[0]
            raise ObjectStoreError(
                f"S3 delete failed for {len(errors)} objects in bucket {self.bucket!r}, e.g. "
                f"{first.get('Key')!r}: {first.get('Code')}: {first.get('Message')}")

    def _list(self, prefix):
        return self._call("list", prefix, lambda: list(self._list_pages(prefix)))

    def now(self) -> datetime.datetime:
        """The service's clock: the ``Date`` of the last listing, plus the local monotonic time
        elapsed since (1 s resolution, as S3's Last-Modified); the local clock before any."""
        with self._clock_lock:
            if self._server_clock is None:
                return super().now()
            date, at = self._server_clock
        return date + datetime.timedelta(seconds=time.monotonic() - at)

    def _list_pages(self, prefix: str):
        paginator = self._client.get_paginator("list_objects_v2")
        skip = len(self._key_prefix)
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key_prefix + prefix):
            date = page.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
            with contextlib.suppress(TypeError, ValueError):
                stamp = email.utils.parsedate_to_datetime(date)
                if stamp.tzinfo is not None:
                    with self._clock_lock:
                        self._server_clock = (stamp, time.monotonic())
            for obj in page.get("Contents", ()):
                path = obj["Key"][skip:]
                with contextlib.suppress(InvalidArgumentError):  # a foreign object: not ours
                    yield ObjectMeta(check_path(path), obj["Size"],
                                     obj["LastModified"].astimezone(datetime.timezone.utc))

    def _streaming_upload(self, path):
        return _S3Uploader(self, path)

    def _close(self):
        self._client.close()


class _S3Uploader(StreamingUploader):
    """Buffers up to one part; a single PUT on finish if the object is smaller than a part,
    otherwise a multipart upload of ``part_size`` parts (the last one smaller)."""

    def __init__(self, store: S3ObjectStore, path: str):
        super().__init__(path)
        self._store = store
        self._key = store._key(path)
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict] = []
        self._complete_tried = False

    def _write(self, data):
        view, size = memoryview(data), self._store.part_size
        while view:
            taken = size - len(self._buffer)
            self._buffer += view[:taken]
            view = view[taken:]
            if len(self._buffer) == size:
                self._upload_part(bytes(self._buffer))
                self._buffer = bytearray()

    def _upload_part(self, chunk: bytes) -> None:
        store, client = self._store, self._store._client
        if self._upload_id is None:
            self._upload_id = store._call("start multipart upload", self.path, lambda: (
                client.create_multipart_upload(Bucket=store.bucket, Key=self._key)["UploadId"]))
        number = len(self._parts) + 1
        if number > S3_MAX_PARTS:
            raise ObjectStoreError(f"upload of {self.path!r} needs more than {S3_MAX_PARTS} "
                                   f"parts; raise part_size", path=self.path)
        etag = store._call(f"upload of part {number}", self.path, lambda: client.upload_part(
            Bucket=store.bucket, Key=self._key, UploadId=self._upload_id, PartNumber=number,
            Body=chunk)["ETag"])
        self._parts.append({"ETag": etag, "PartNumber": number})

    def _finish(self):
        if self._upload_id is None:
            self._store._put(self.path, bytes(self._buffer))
        else:
            if self._buffer:
                self._upload_part(bytes(self._buffer))
            self._store._call("complete multipart upload", self.path, self._complete)
        self._buffer = bytearray()

    def _complete(self) -> None:
        store = self._store
        try:
            store._client.complete_multipart_upload(
                Bucket=store.bucket, Key=self._key, UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts})
        except ClientError as exc:
            # a retry after a lost reply to a successful completion finds no upload any more
            if not (self._complete_tried and _error_code(exc)[0] == "NoSuchUpload"
                    and store._size(self.path) == self.bytes_written):
                raise
        finally:
            self._complete_tried = True

    def _abort(self):
        self._buffer = bytearray()
        if self._upload_id is None:
            return
        store, upload_id, self._upload_id = self._store, self._upload_id, None
        try:
            store._call("abort multipart upload", self.path, lambda: (
                store._client.abort_multipart_upload(
                    Bucket=store.bucket, Key=self._key, UploadId=upload_id)))
        except ObjectStoreError as exc:
            log.warning("cannot abort the multipart upload of %r (a bucket lifecycle rule "
                        "will): %s", self.path, exc)


def _botocore_session() -> botocore.session.Session:
    """A fresh session (its own credentials) sharing one model loader with every other store:
    parsing the S3 service model anew costs 50-200 ms per client."""
    global _shared_loader
    with _loader_lock:
        if _shared_loader is None:
            _shared_loader = botocore.loaders.create_loader()
    session = botocore.session.Session()
    session.register_component("data_loader", _shared_loader)
    return session


def _check_endpoint(url: str | None) -> str | None:
    if url is None:
        return None
    try:
        parts = urllib.parse.urlsplit(check_text(url, "the S3 endpoint")) if isinstance(url, str) else None
        if parts is not None:
            parts.port   # parsed lazily: "http://h:abc" or "http://[x]" fails here
    except ValueError:   # the endpoint is not repeated: it may carry user info
        raise InvalidArgumentError("S3 endpoint must be an http:// or https:// URL with a host (it does not "
                                   "parse)") from None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgumentError("S3 endpoint must be an http:// or https:// URL with a host")
    if "@" in url:  # user info; a secret may hold '/', which would hide it from urlsplit
        raise InvalidArgumentError(
            "S3 endpoint must not contain credentials; pass access_key_id/secret_access_key "
            "options or use the AWS environment")
    return url


def _check_int(name: str, value, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an int in [{low}, {high}], got {value!r}")


def _server_age(response: dict) -> float | None:
    """Seconds between the object's Last-Modified and the reply's Date header (server clock)."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    modified = response.get("LastModified")
    try:
        now = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError):
        return None
    if modified is None or now.tzinfo is None:
        return None
    return (now - modified).total_seconds()


def _int_or_none(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _content_range_total(header: str | None) -> int | None:
    """The total size in a ``Content-Range: bytes a-b/total`` header, if present."""
    return _int_or_none(header.rpartition("/")[2]) if header else None
