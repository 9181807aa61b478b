"""``hummock inspect URL verify``: check every live object of a store, read-only.

What is checked (docs/format.md has each layout):

1. every manifest object (checkpoints and deltas still stored) decodes: envelope, checksum,
   JSON, fields (``decode_version`` / ``decode_delta``);
2. the store opens read-only (the manifest replays to a version) -- that version is pinned by
   the reader's lease for as long as the check runs, so a live writer's vacuum spares it;
3. every SST the version references, read whole: its size against the version's
   ``SstableInfo``, the footer, the meta checksum and layout, the Bloom and prefix filters'
   headers, every block's checksum, decompression and entries; the entries strictly
   ascending in full-key order, every user key present in the Bloom filter (no false
   negative), and the meta's key range, epochs, key and tombstone counts and table ids equal
   to what the entries hold and to what the version records;
4. every table description in the catalog decodes (``relational.catalog.decode_record``:
   envelope, checksum, the JSON's shape and types, the key's table id), and the SQL catalog
   they hold is sound (``SqlCatalog.from_descs``: kinds, column counts, ids, names,
   dependencies, one record per table id); in a store whose ids the catalog allocates (it has
   the allocator record SQL and bulk loads write), every table id holding data is claimed by a
   record or a relation's internal state tables (dropped tables, which hold a truncation,
   excepted). Stores used through the KV or relational API alone are not checked for that.

SST objects that no version references (orphans left for vacuum) are counted, not opened.
Nothing is written; a vanished object (a writer's rotation or vacuum meanwhile) is skipped.

Callers: ``cli/inspection.py``; tests.
"""

from __future__ import annotations

import dataclasses

from hummock import CorruptionError, HummockError
from hummock.key import MAX_EPOCH
from hummock.manifest import MANIFEST_PREFIX
from hummock.object_store.base import ObjectNotFoundError
from hummock.object_store.base import range_error
from hummock.sstable.block import BlockIterator
from hummock.sstable.filter import FilterReader
from hummock.sstable.meta import sst_object_path
from hummock.sstable.reader import Sstable
from hummock.value import VALUE_TAG_DELETE
from hummock.version_codec import decode_delta, decode_version
from relational.catalog import (ALLOCATOR_TABLE_ID, CATALOG_TABLE_ID, KEY_PREFIX, claimed_table_ids, decode_record,
                                record_name)
from sql.catalog import SqlCatalog


@dataclasses.dataclass
class VerifyReport:
    """What a verification saw; ``problems`` holds ``(object, message)`` pairs."""

    manifest_objects: int = 0
    ssts: int = 0
    sst_bytes: int = 0
    blocks: int = 0
    keys: int = 0
    catalog_records: int = 0
    orphan_ssts: int = 0
    vanished: int = 0
    version_id: int | None = None
    problems: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["problems"] = [{"object": o, "message": m} for o, m in self.problems]
        out["ok"] = self.ok
        return out


class OneObject:
    """A read-only view of one object already in memory, with the object store's read/size
    interface, so the engine's own SST reader checks it without reading it again."""

    def __init__(self, path: str, data: bytes):
        self._path, self._data = path, data

    def read(self, path: str, start=None, end=None) -> bytes:
        assert path == self._path, (path, self._path)
        start = 0 if start is None else start
        end = len(self._data) if end is None else end
        if end > len(self._data):
            raise range_error(path, start, end, len(self._data))
        return self._data[start:end]

    def size(self, path: str) -> int:
        return len(self._data)


def verify_manifest(objects, report: VerifyReport) -> None:
    """Decode every checkpoint and delta object still stored."""
    for meta in sorted(objects.list(MANIFEST_PREFIX), key=lambda m: m.path):
        name = meta.path[len(MANIFEST_PREFIX):]
        if not (name.startswith("checkpoint-") or name.startswith("delta-")):
            continue   # the writer lock and anything else that is not version state
        try:
            data = objects.read(meta.path)
        except ObjectNotFoundError:
            report.vanished += 1
            continue
        report.manifest_objects += 1
        try:
            if name.startswith("checkpoint-"):
                version = decode_version(data, object=meta.path)
                if version.id != int(name.split("-")[1]):
                    raise CorruptionError("checkpoint holds another version", object=meta.path,
                                          expected=int(name.split("-")[1]), found=version.id)
            else:
                decode_delta(data, object=meta.path)
        except CorruptionError as exc:
            report.problems.append((meta.path, str(exc)))


def verify_sst(objects, info, report: VerifyReport) -> None:
    """Check one SST of the version completely (module doc, point 3)."""
    path = sst_object_path(info.sst_id)
    try:
        data = objects.read(path)
    except ObjectNotFoundError:
        report.problems.append((path, "SST referenced by the version is missing"))
        return
    report.ssts += 1
    report.sst_bytes += len(data)
    try:
        if len(data) != info.file_size:
            raise CorruptionError("SST size differs from the version's record", object=path,
                                  expected=info.file_size, found=len(data))
        sst = Sstable.open(OneObject(path, data), info)
        _check_entries(sst, info, path, report)
    except CorruptionError as exc:
        report.problems.append((path, str(exc)))


def _check_entries(sst: Sstable, info, path: str, report: VerifyReport) -> None:
    meta = sst.meta
    FilterReader(meta.filter, object_name=f"{path} filter")._check()
    if sst.prefix_filter is not None:
        sst.prefix_filter._check()
    previous = None
    keys = tombstones = 0
    min_epoch, max_epoch = MAX_EPOCH, 0
    tables = set()
    live = {}   # table id -> user keys whose newest version here is a put (format version 2)
    may_contain = sst.may_contain
    for index in range(sst.block_count):
        it = BlockIterator(sst.block(index))   # checksum, length, decompression, restarts
        it.seek_to_first()
        entries, _ = it.collect_forward(None, -1)
        report.blocks += 1
        if not entries:
            raise CorruptionError(f"block {index} holds no entry", object=path, offset=meta.blocks[index].offset)
        if entries[0][0] != meta.blocks[index].first_key:
            raise CorruptionError(f"block {index} first key differs from its block meta", object=path,
                                  offset=meta.blocks[index].offset, expected=meta.blocks[index].first_key.hex(),
                                  found=entries[0][0].hex())
        for key, value in entries:
            order = (key[:-8], key[-8:])
            if previous is not None and order <= previous:
                raise CorruptionError(f"keys out of order in block {index}", object=path,
                                      offset=meta.blocks[index].offset, expected=f"> {previous[0].hex()}",
                                      found=key.hex())
            if previous is None or order[0] != previous[0]:
                if not may_contain(order[0]):
                    raise CorruptionError("Bloom filter misses a stored key", object=path,
                                          found=order[0].hex())
                table_id = int.from_bytes(key[:4], "big")
                tables.add(table_id)
                live[table_id] = live.get(table_id, 0) + (value[:1] != bytes((VALUE_TAG_DELETE,)))
            previous = order
            epoch = MAX_EPOCH - int.from_bytes(key[-8:], "big")
            min_epoch, max_epoch = min(min_epoch, epoch), max(max_epoch, epoch)
            keys += 1
            if value[:1] == bytes((VALUE_TAG_DELETE,)):
                tombstones += 1
        del entries
    report.keys += keys
    found = {"smallest_key": meta.blocks[0].first_key, "largest_key": previous[0] + previous[1],
             "min_epoch": min_epoch, "max_epoch": max_epoch, "key_count": keys,
             "tombstone_count": tombstones, "table_ids": tuple(sorted(tables)),
             "live_counts": tuple(live[t] for t in sorted(tables))}
    for name, value in found.items():
        for where, recorded in (("meta", getattr(meta, name)), ("version", getattr(info, name))):
            if recorded != value and not (name == "live_counts" and recorded is None):   # a version-1 SST
                raise CorruptionError(f"{name} in the {where} differs from the entries", object=path,
                                      expected=_show(recorded), found=_show(value))


def _show(value):
    return value.hex() if isinstance(value, bytes) else value


def verify_catalog(db, report: VerifyReport) -> None:
    """Decode every table description of the catalog at the committed epoch (envelope,
    checksum, the JSON's shape and types, the key's table id), then the SQL catalog they hold
    (``properties["sql"]``: kinds, counts, ids, names, dependencies)."""
    epoch = db.max_committed_epoch
    descs = []
    try:
        for key, value in db.iter(CATALOG_TABLE_ID, epoch, prefix=KEY_PREFIX):
            report.catalog_records += 1
            try:
                descs.append(decode_record(key, value))
            except CorruptionError as exc:
                report.problems.append((exc.object or record_name(key), str(exc)))
    except CorruptionError as exc:   # an SST the scan met; verify_sst names it too
        report.problems.append((exc.object or "catalog", str(exc)))
        return
    except HummockError as exc:
        report.problems.append(("catalog", f"{type(exc).__name__}: {exc}"))
        return
    try:
        SqlCatalog.from_descs(descs)
    except CorruptionError as exc:
        report.problems.append((exc.object or "SQL catalog", str(exc)))
    if any(d.table_id == ALLOCATOR_TABLE_ID for d in descs):   # ids are allocated: data needs a record
        claimed, _ = claimed_table_ids(descs)
        version = db.version()
        truncated = {t for t, w in version.table_watermarks.items() if w.truncations}   # dropped tables
        for tid in sorted({t for i in version.all_ssts() for t in i.table_ids}
                          - claimed - truncated - {CATALOG_TABLE_ID}):
            report.problems.append((f"table {tid}", f"table id {tid} holds data but no catalog record (nor a "
                                                    f"relation's internal state table) claims it"))


def count_orphans(objects, version, report: VerifyReport) -> None:
    live = {sst_object_path(i) for i in version.sst_ids()}
    prefix = sst_object_path(0).split("/")[0] + "/"
    report.orphan_ssts = sum(1 for meta in objects.list(prefix) if meta.path not in live)
