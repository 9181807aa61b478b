"""Durable progress records of streaming writers: which micro-batch a query committed last.

Job: make a streaming writer exactly once across restarts and replays. A writer that turns
Spark micro-batch ``b`` of query ``q`` into epoch ``e`` writes the record ``(q, b, e)`` with
:func:`write_progress` at ``e`` and commits it in the SAME version delta as the batch's data;
before writing a batch it reads the record (:func:`read_progress` at the committed epoch) and
skips ``b`` when the record already says ``b`` (or a later batch) -- so the record and the data
are either both published or neither, and a replayed batch is never applied twice.

Format (docs/relational.md "Catalog records" style; frozen: changing it needs a new version)::

    stored as: table id CATALOG_TABLE_ID (0xFFFFFFFF), key b"progress/" || UTF-8(query)
    record   = magic "HUMKPRG1" || u32le format_version (1) || u32le payload_len
               || u64le xxh64(payload, seed 0) || payload
    payload  = UTF-8 JSON {"batch_id": int >= 0, "epoch": int in [0, 2^64), "query": str},
               keys sorted, no whitespace

The catalog's table records live under ``b"table/"``; every reader of table records
(``Catalog.get/list``, ``sql.catalog``, ``inspect verify``) scans that prefix only, so progress
records never reach them.

Invariants: ``decode_progress(key, encode(...))`` round-trips; a damaged record -- short, wrong
magic or version, length or checksum mismatch, not JSON, fields of the wrong type, a query that
is not the one its key names -- raises ``CorruptionError`` naming the record. Query names are
non-empty and at most :data:`MAX_QUERY_BYTES` bytes of UTF-8 (``SchemaError`` otherwise).

Callers: the Spark pipeline driver (``sql/spark_pipeline``), the streaming sink
(``relational/spark_sink.py``), tests.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import xxhash

from hummock.errors import CorruptionError
from relational.catalog import CATALOG_TABLE_ID
from relational.errors import SchemaError

# --- frozen constants: part of the record format, do not change ---------------------------------
PROGRESS_PREFIX = b"progress/"
RECORD_MAGIC = b"HUMKPRG1"
RECORD_VERSION = 1
_ENVELOPE = struct.Struct("<8sIIQ")
# -------------------------------------------------------------------------------------------------
MAX_QUERY_BYTES = 200
_MAX_U64 = (1 << 64) - 1
_PREFIX_END = PROGRESS_PREFIX[:-1] + bytes([PROGRESS_PREFIX[-1] + 1])   # b"progress0": end of the prefix


@dataclass(frozen=True)
class Progress:
    """Query ``query`` committed micro-batch ``batch_id`` as epoch ``epoch``."""

    query: str
    batch_id: int
    epoch: int


def progress_key(query: str) -> bytes:
    """The catalog key of ``query``'s record; ``SchemaError`` for a name that is not a string,
    is empty, or is longer than ``MAX_QUERY_BYTES`` bytes of UTF-8."""
    if not isinstance(query, str):
        raise SchemaError(f"a streaming query name is a str, got {query!r:.80}")
    try:
        raw = query.encode("utf-8")
    except UnicodeEncodeError:
        raise SchemaError(f"streaming query name {query!r:.80} is not valid UTF-8 (lone surrogates)") from None
    if not raw:
        raise SchemaError("a streaming query name must not be empty")
    if len(raw) > MAX_QUERY_BYTES:
        raise SchemaError(f"streaming query name {query[:40]!r}... is {len(raw)} bytes of UTF-8; at most "
                          f"{MAX_QUERY_BYTES}")
    return PROGRESS_PREFIX + raw


def _check_int(value, name: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise SchemaError(f"progress {name} must be an int in [0, {high}], got {value!r:.80}")
    return value


def encode_progress(query: str, batch_id: int, epoch: int) -> bytes:
    """The record's value (format above)."""
    progress_key(query)
    _check_int(batch_id, "batch_id", _MAX_U64 >> 1)
    _check_int(epoch, "epoch", _MAX_U64)
    payload = json.dumps({"batch_id": batch_id, "epoch": epoch, "query": query}, sort_keys=True,
                         separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _ENVELOPE.pack(RECORD_MAGIC, RECORD_VERSION, len(payload), xxhash.xxh64_intdigest(payload, 0)) + payload


def record_name(key: bytes) -> str:
    """How errors name the progress record stored under ``key``."""
    return f"progress record {bytes(key)!r} (table {CATALOG_TABLE_ID})"


def decode_progress(key: bytes, value: bytes) -> Progress:
    """The progress stored under catalog ``key``; ``CorruptionError`` (naming the record) when
    the value is damaged or describes another query than the key names."""
    key, data = bytes(key), bytes(value)
    what = record_name(key)
    if len(data) < _ENVELOPE.size:
        raise CorruptionError("progress record too short", object=what, offset=0,
                              expected=f">= {_ENVELOPE.size} bytes", found=len(data))
    magic, version, length, checksum = _ENVELOPE.unpack_from(data)
    if magic != RECORD_MAGIC:
        raise CorruptionError("not a progress record", object=what, offset=0, expected=RECORD_MAGIC, found=magic)
    if version != RECORD_VERSION:
        raise CorruptionError("unknown progress record version", object=what, offset=8, expected=RECORD_VERSION,
                              found=version)
    payload = data[_ENVELOPE.size:]
    if length != len(payload):
        raise CorruptionError("progress record length mismatch", object=what, offset=12, expected=len(payload),
                              found=length)
    found = xxhash.xxh64_intdigest(payload, 0)
    if found != checksum:
        raise CorruptionError("progress record checksum mismatch", object=what, offset=16, expected=checksum,
                              found=found)
    try:
        obj = json.loads(payload.decode("utf-8"))
    except ValueError as exc:   # not UTF-8, not JSON (a flat object: no depth to bound)
        raise CorruptionError(f"progress record payload is not JSON: {exc}", object=what,
                              offset=_ENVELOPE.size) from None
    if not isinstance(obj, dict) or sorted(obj) != ["batch_id", "epoch", "query"]:
        raise CorruptionError("progress record payload has the wrong fields", object=what, offset=_ENVELOPE.size,
                              expected="an object of batch_id, epoch, query",
                              found=sorted(obj) if isinstance(obj, dict) else type(obj).__name__)
    query, batch_id, epoch = obj["query"], obj["batch_id"], obj["epoch"]
    for name, ok in (("query", isinstance(query, str)),
                     ("batch_id", isinstance(batch_id, int) and not isinstance(batch_id, bool)
                      and 0 <= batch_id <= _MAX_U64 >> 1),
                     ("epoch", isinstance(epoch, int) and not isinstance(epoch, bool) and 0 <= epoch <= _MAX_U64)):
        if not ok:
            raise CorruptionError(f"invalid progress record field {name}", object=what, offset=_ENVELOPE.size,
                                  expected="a string" if name == "query" else "a non-negative integer",
                                  found=repr(obj[name])[:80])
    if key != PROGRESS_PREFIX + query.encode("utf-8", "surrogatepass"):
        raise CorruptionError("progress record names another query than its key", object=what,
                              offset=_ENVELOPE.size, expected=key[len(PROGRESS_PREFIX):], found=query[:80])
    return Progress(query, batch_id, epoch)


def read_progress(store, query: str, epoch: int) -> Progress | None:
    """``query``'s progress at ``epoch`` (None: the query never committed a batch). ``store``:
    anything with ``get(table_id, key, epoch)`` (``HummockStorage``, ``VersionReader``)."""
    key = progress_key(query)
    value = store.get(CATALOG_TABLE_ID, key, epoch)
    return None if value is None else decode_progress(key, value)


def write_progress(store, query: str, batch_id: int, epoch: int) -> None:
    """Write ``query``'s record ``(batch_id, epoch)`` at ``epoch`` (``store.ingest_batch``); the
    caller commits it in the same version delta as the batch's data."""
    store.ingest_batch(CATALOG_TABLE_ID, [(progress_key(query), encode_progress(query, batch_id, epoch))], epoch)


def list_progress(store, epoch: int) -> list:
    """Every query's progress at ``epoch``, by key (UTF-8 order of the names); ``store``:
    anything with ``iter(table_id, epoch, start, end)``."""
    return [decode_progress(k, v) for k, v in store.iter(CATALOG_TABLE_ID, epoch, PROGRESS_PREFIX, _PREFIX_END)]


__all__ = ["Progress", "PROGRESS_PREFIX", "MAX_QUERY_BYTES", "progress_key", "encode_progress", "decode_progress",
           "read_progress", "write_progress", "list_progress"]
