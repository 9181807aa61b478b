"""The manifest's byte encoding of versions and deltas: envelope plus JSON payload.

Job: turn a :class:`~hummock.version.HummockVersion` (a checkpoint) or a
:class:`~hummock.version.VersionDelta` into the bytes of one manifest object and back. The
layout is documented once, in ``docs/format.md`` section 6; the in-memory structures and their
rules live in ``hummock/version.py``, which knows nothing of bytes.

Invariants:
- the envelope (``ENVELOPE``: magic, format version, payload length, xxh64 of the payload) and
  the magics are frozen: part of the on-disk format, do not change;
- the payload is JSON with sorted keys and no spaces, so one object always encodes to the same
  bytes (golden bytes pinned by ``tests/test_version.py``);
- fields added after the first release are optional and written only when not their default,
  so stores written before them decode, and unchanged objects keep their bytes;
- decoders trust nothing: every field is type- and range-checked, nesting is bounded before
  ``json.loads`` recurses, a decoded checkpoint must pass ``HummockVersion.problems``; any
  defect raises ``CorruptionError`` naming the object and an offset (never a builtin error).

Pure functions, thread-safe. Callers: ``hummock/manifest.py`` (reads and writes the objects),
tests and tools that inspect manifest objects.
"""

from __future__ import annotations

import dataclasses
import json
import struct

from hummock._json_depth import MAX_JSON_DEPTH, json_depth_bound
from hummock.errors import CorruptionError, InvalidArgumentError
from hummock.key import MIN_FULL_KEY_LEN
from hummock.sstable.block import checksum
from hummock.sstable.builder import check_prefix_lens
from hummock.sstable.meta import FOOTER_SIZE, SstableInfo
from hummock.table_watermarks import TableWatermarks
from hummock.version import (
    BULK_LOAD_DIGEST_CHARS, KINDS, MAX_BULK_LOADS, HummockVersion, Level, SubLevel, VersionDelta,
)

__all__ = [
    "encode_version", "decode_version", "encode_delta", "decode_delta",
    "table_watermarks_json", "table_watermarks_from_json",
    "VERSION_MAGIC", "DELTA_MAGIC", "MANIFEST_FORMAT_VERSION", "ENVELOPE", "MAX_BULK_LOADS",
    "BULK_LOAD_DIGEST_CHARS",
]

VERSION_MAGIC = b"HUMKVER1"  # part of the on-disk format, do not change
DELTA_MAGIC = b"HUMKDLT1"  # part of the on-disk format, do not change
MANIFEST_FORMAT_VERSION = 1  # part of the on-disk format, do not change
ENVELOPE = struct.Struct("<8sIIQ")  # magic, format version, payload length, xxh64; frozen
_U64_MAX = 2**64 - 1


def encode_version(version: HummockVersion) -> bytes:
    """The checkpoint object of ``version`` (docs/format.md section 6)."""
    return _seal(VERSION_MAGIC, _version_json(version))


def decode_version(data: bytes, *, object: str = "<version buffer>") -> HummockVersion:
    """Decode ``encode_version`` output. Raises CorruptionError naming ``object`` on any defect,
    including a decoded version that breaks an invariant; InvalidArgumentError if ``data`` is
    not bytes-like."""
    payload = _open(data, VERSION_MAGIC, object)
    version = _decode_payload(payload, object, _version_from_json)
    problems = version.problems()
    if problems:
        raise CorruptionError(f"decoded version is unsound: {problems[0]}", object=object,
                              offset=ENVELOPE.size)
    return version


def encode_delta(delta: VersionDelta) -> bytes:
    """The delta object of ``delta`` (docs/format.md section 6)."""
    return _seal(DELTA_MAGIC, _delta_json(delta))


def decode_delta(data: bytes, *, object: str = "<delta buffer>") -> VersionDelta:
    """Decode ``encode_delta`` output. Raises CorruptionError naming ``object`` on any defect;
    InvalidArgumentError if ``data`` is not bytes-like. (Whether the delta fits a version is
    ``hummock.version.apply``'s business.)"""
    return _decode_payload(_open(data, DELTA_MAGIC, object), object, _delta_from_json)


# --- envelope --------------------------------------------------------------------------------

def _seal(magic: bytes, obj) -> bytes:
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    if len(payload) > 0xFFFFFFFF:
        raise InvalidArgumentError(f"manifest payload of {len(payload)} bytes exceeds 4 GiB")
    return ENVELOPE.pack(magic, MANIFEST_FORMAT_VERSION, len(payload), checksum(payload)) + payload


def _open(data, magic: bytes, object: str) -> bytes:
    """Check the envelope; return the payload."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < ENVELOPE.size:
        raise CorruptionError("manifest object shorter than its header", object=object, offset=0,
                              expected=f">= {ENVELOPE.size} bytes", found=len(data))
    found_magic, version, length, found_sum = ENVELOPE.unpack_from(data)
    if found_magic != magic:
        raise CorruptionError("bad manifest magic", object=object, offset=0, expected=magic,
                              found=found_magic)
    if version != MANIFEST_FORMAT_VERSION:
        raise CorruptionError("unknown manifest format version", object=object, offset=8,
                              expected=MANIFEST_FORMAT_VERSION, found=version)
    if length != len(data) - ENVELOPE.size:
        raise CorruptionError("manifest payload length mismatch", object=object, offset=12,
                              expected=len(data) - ENVELOPE.size, found=length)
    payload = data[ENVELOPE.size:]
    if checksum(payload) != found_sum:
        raise CorruptionError("manifest checksum mismatch", object=object, offset=16,
                              expected=f"{found_sum:#018x}", found=f"{checksum(payload):#018x}")
    return payload


# --- payload -----------------------------------------------------------------------------------

class _Bad(Exception):
    """A structural defect in a decoded payload (turned into CorruptionError)."""


def _decode_payload(payload: bytes, object: str, build):
    if json_depth_bound(payload) > MAX_JSON_DEPTH:   # refused before json.loads recurses into it
        raise CorruptionError("manifest payload nests too deeply", object=object, offset=ENVELOPE.size,
                              expected=f"<= {MAX_JSON_DEPTH} levels", found=f"> {MAX_JSON_DEPTH}")
    try:
        return build(json.loads(payload))
    except json.JSONDecodeError as exc:
        raise CorruptionError(f"manifest payload is not JSON: {exc.msg}", object=object,
                              offset=ENVELOPE.size + exc.pos) from None
    except (_Bad, InvalidArgumentError, ValueError, TypeError, KeyError) as exc:
        raise CorruptionError(f"malformed manifest payload: {exc}", object=object,
                              offset=ENVELOPE.size) from None


def _field(d, name: str, kind):
    if not isinstance(d, dict) or name not in d:
        raise _Bad(f"missing field {name!r}")
    value = d[name]
    if kind is int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _U64_MAX:
            raise _Bad(f"field {name!r} must be a u64, got {value!r}")
    elif not isinstance(value, kind):
        raise _Bad(f"field {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


_INFO_FIELDS = frozenset(f.name for f in dataclasses.fields(SstableInfo))
_OPTIONAL_INFO_FIELDS = frozenset({"live_counts"})   # absent for SSTs of format version 1


def _info_from_json(d) -> SstableInfo:
    if not isinstance(d, dict) or not _INFO_FIELDS - _OPTIONAL_INFO_FIELDS <= set(d) <= _INFO_FIELDS:
        raise _Bad(f"SST record must have the fields {sorted(_INFO_FIELDS - _OPTIONAL_INFO_FIELDS)} "
                   f"(and may have {sorted(_OPTIONAL_INFO_FIELDS)})")
    for name in _INFO_FIELDS - {"smallest_key", "largest_key", "table_ids", "live_counts"}:
        _field(d, name, int)
    table_ids = _field(d, "table_ids", list)
    for table_id in table_ids:
        if not isinstance(table_id, int) or isinstance(table_id, bool) or not 0 <= table_id < 2**32:
            raise _Bad(f"bad table id {table_id!r}")
    if "live_counts" in d:
        live = _field(d, "live_counts", list)
        if len(live) != len(table_ids) or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in live) or sum(live) > d["key_count"]:
            raise _Bad(f"bad live_counts {live!r:.200} for table ids {table_ids!r:.200}")
    info = SstableInfo.from_dict(d)
    if min(len(info.smallest_key), len(info.largest_key)) < MIN_FULL_KEY_LEN:
        raise _Bad(f"SST {info.sst_id} has a key shorter than a full key")
    if info.meta_offset + FOOTER_SIZE > info.file_size:   # the meta and footer lie inside the file
        raise _Bad(f"SST {info.sst_id}: meta_offset {info.meta_offset} + footer {FOOTER_SIZE} "
                   f"exceeds file_size {info.file_size}")
    return info


def _infos_from_json(items) -> tuple[SstableInfo, ...]:
    if not isinstance(items, list):
        raise _Bad("SST list expected")
    return tuple(_info_from_json(d) for d in items)


def _sub_level_json(sub: SubLevel) -> dict:
    return {"sub_level_id": sub.sub_level_id, "overlapping": sub.overlapping,
            "ssts": [info.to_dict() for info in sub.ssts]}


def _sub_level_from_json(d) -> SubLevel:
    return SubLevel(_field(d, "sub_level_id", int), _infos_from_json(_field(d, "ssts", list)),
                    _field(d, "overlapping", bool))


def _version_json(v: HummockVersion) -> dict:
    out = {"id": v.id, "max_committed_epoch": v.max_committed_epoch, "next_sst_id": v.next_sst_id,
           "next_sub_level_id": v.next_sub_level_id, "l0": [_sub_level_json(s) for s in v.l0],
           "levels": [{"level": lv.level, "ssts": [i.to_dict() for i in lv.ssts]} for lv in v.levels]}
    if v.safe_epoch:   # optional: absent in objects written before it existed (= 0)
        out["safe_epoch"] = v.safe_epoch
    if v.table_prefix_lens:   # optional: absent in objects written before it existed (= none)
        out["table_prefix_lens"] = [list(pair) for pair in v.table_prefix_lens]
    if v.table_watermarks:   # optional: absent = no table has watermarks
        out["table_watermarks"] = _marks_json(v.table_watermarks)
    if v.bulk_loads:   # optional: absent in objects written before it existed (= none)
        out["bulk_loads"] = [list(record) for record in v.bulk_loads]
    return out


def _bulk_loads_from_json(d) -> tuple:
    items = _optional(d, "bulk_loads", list, [])
    if len(items) > MAX_BULK_LOADS:
        raise _Bad(f"more than {MAX_BULK_LOADS} bulk load records")
    out = []
    for item in items:
        if not isinstance(item, list) or len(item) != 3:
            raise _Bad("bulk_loads entries are [table_id or null, epoch, digest]")
        table_id = None if item[0] is None else _field({"v": item[0]}, "v", int)   # null: commit_ssts
        record = (table_id, _field({"v": item[1]}, "v", int), _field({"v": item[2]}, "v", str))
        out.append(record)
    return tuple(out)   # the rest (table id, digest, order, count) is HummockVersion.problems'


def _bulk_load_from_json(d) -> tuple | None:
    if not isinstance(d, dict) or "bulk_load" not in d:
        return None
    item = d["bulk_load"]
    if not isinstance(item, list) or len(item) != 2:
        raise _Bad("bulk_load is [table_id or null, digest]")
    digest = _field({"v": item[1]}, "v", str)
    if len(digest) != BULK_LOAD_DIGEST_CHARS:
        raise _Bad(f"a bulk load digest has {BULK_LOAD_DIGEST_CHARS} hex digits")
    table_id = None if item[0] is None else _field({"v": item[0]}, "v", int)   # null: commit_ssts
    return table_id, digest   # the rest is checked by apply


def _marks_json(marks) -> list:
    return [table_watermarks_json(t, marks[t]) for t in sorted(marks)]


def _marks_from_json(d) -> dict:
    items = _optional(d, "table_watermarks", list, [])
    out = {}
    for item in items:
        table_id, records = table_watermarks_from_json(item)
        if table_id in out or not records:
            raise _Bad(f"table {table_id}: duplicate or empty watermark record")
        out[table_id] = records
    return out


def table_watermarks_json(table_id: int, records: TableWatermarks) -> dict:
    """One table's watermark and truncation records as the manifest stores them."""
    return {"table_id": table_id, "truncations": [list(t) for t in records.truncations],
            "watermarks": [[epoch, [[v, lo.hex(), None if hi is None else hi.hex()] for v, lo, hi in changes]]
                           for epoch, changes in records.entries]}


def table_watermarks_from_json(d) -> tuple[int, TableWatermarks]:
    """``(table_id, records)`` of a ``table_watermarks_json`` dict; ValueError on any defect,
    including records that break a ``TableWatermarks`` invariant."""
    if not isinstance(d, dict) or set(d) != {"table_id", "truncations", "watermarks"}:
        raise ValueError("a table watermark record has the fields table_id, truncations, watermarks")
    table_id = d["table_id"]
    if not isinstance(table_id, int) or isinstance(table_id, bool) or not 0 <= table_id <= 0xFFFFFFFF:
        raise ValueError(f"bad table id {table_id!r}")
    if not isinstance(d["truncations"], list) or not isinstance(d["watermarks"], list):
        raise ValueError("truncations and watermarks are lists")
    truncations = []
    for t in d["truncations"]:
        if not isinstance(t, list) or len(t) != 2:
            raise ValueError("a truncation is [epoch, through]")
        truncations.append(tuple(t))
    entries = []
    for e in d["watermarks"]:
        if not isinstance(e, list) or len(e) != 2 or not isinstance(e[1], list):
            raise ValueError("a watermark entry is [epoch, [[vnode, lo, hi], ...]]")
        changes = []
        for c in e[1]:
            if not isinstance(c, list) or len(c) != 3 or not isinstance(c[1], str) or not (
                    c[2] is None or isinstance(c[2], str)):
                raise ValueError("a watermark is [vnode, lo hex, hi hex or null]")
            changes.append((c[0], bytes.fromhex(c[1]), None if c[2] is None else bytes.fromhex(c[2])))
        entries.append((e[0], tuple(changes)))
    records = TableWatermarks(tuple(truncations), tuple(entries))
    problems = records.problems()
    if problems:
        raise ValueError(f"table {table_id}: {problems[0]}")
    return table_id, records


def _prefix_lens_from_json(items) -> tuple:
    if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
        raise _Bad("table_prefix_lens entries are [table_id, prefix_len]")
    lens = check_prefix_lens([tuple(p) for p in items])
    if [list(p) for p in lens] != items:
        raise _Bad("table_prefix_lens must be sorted by table id")
    return lens


def _optional(d, name: str, kind, default):
    return _field(d, name, kind) if isinstance(d, dict) and name in d else default


def _version_from_json(d) -> HummockVersion:
    levels = tuple(Level(_field(lv, "level", int), _infos_from_json(_field(lv, "ssts", list)))
                   for lv in _field(d, "levels", list))
    return HummockVersion(_field(d, "id", int), _field(d, "max_committed_epoch", int),
                          tuple(_sub_level_from_json(s) for s in _field(d, "l0", list)), levels,
                          _field(d, "next_sst_id", int), _field(d, "next_sub_level_id", int),
                          _optional(d, "safe_epoch", int, 0),
                          table_prefix_lens=_prefix_lens_from_json(_optional(d, "table_prefix_lens", list, [])),
                          table_watermarks=_marks_from_json(d), bulk_loads=_bulk_loads_from_json(d))


def _delta_json(delta: VersionDelta) -> dict:
    sub = delta.new_sub_level
    return {"kind": delta.kind, "prev_id": delta.prev_id, "id": delta.id,
            "max_committed_epoch": delta.max_committed_epoch, "next_sst_id": delta.next_sst_id,
            "new_sub_level": None if sub is None else _sub_level_json(sub),
            "removed": [[level, sst_id] for level, sst_id in delta.removed],
            "added": [[level, info.to_dict()] for level, info in delta.added],
            **({"safe_epoch": delta.safe_epoch} if delta.safe_epoch else {}),
            **({"writer": delta.writer} if delta.writer else {}),
            **({"table_prefix_lens": [list(p) for p in delta.table_prefix_lens]}
               if delta.table_prefix_lens is not None else {}),
            **({"table_watermarks": _marks_json(delta.table_watermarks)} if delta.table_watermarks else {}),
            **({"bulk_load": list(delta.bulk_load)} if delta.bulk_load is not None else {})}


def _delta_from_json(d) -> VersionDelta:
    kind = _field(d, "kind", str)
    if kind not in KINDS:
        raise _Bad(f"unknown delta kind {kind!r}")
    if "new_sub_level" not in d:
        raise _Bad("missing field 'new_sub_level'")
    sub = d["new_sub_level"]
    removed, added = [], []
    for pair in _field(d, "removed", list):
        if not isinstance(pair, list) or len(pair) != 2:
            raise _Bad("removed entries are [level, sst_id]")
        removed.append((_field({"v": pair[0]}, "v", int), _field({"v": pair[1]}, "v", int)))
    for pair in _field(d, "added", list):
        if not isinstance(pair, list) or len(pair) != 2:
            raise _Bad("added entries are [level, sst]")
        added.append((_field({"v": pair[0]}, "v", int), _info_from_json(pair[1])))
    return VersionDelta(_field(d, "prev_id", int), _field(d, "id", int),
                        _field(d, "max_committed_epoch", int), _field(d, "next_sst_id", int),
                        None if sub is None else _sub_level_from_json(sub), tuple(removed),
                        tuple(added), kind, _optional(d, "safe_epoch", int, 0),
                        _optional(d, "writer", str, ""),
                        table_prefix_lens=(_prefix_lens_from_json(d["table_prefix_lens"])
                                           if "table_prefix_lens" in d else None),
                        table_watermarks=_marks_from_json(d), bulk_load=_bulk_load_from_json(d))
