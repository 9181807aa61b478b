"""``hummock inspect URL levels | sst ID | manifest | verify``: look inside any store, read-only.

- ``levels``: the LSM shape -- per level (L0 per sub-level) the SST count, bytes, key range and
  epochs; ``--ssts`` lists every SST.
- ``sst ID``: one SST's meta (sizes, counts, epochs, tables, filters), its blocks, and its
  entries decoded through the table catalog when the table is known (raw hex otherwise, or
  with ``--raw``).
- ``manifest``: the version history still stored (checkpoints and deltas, oldest first).
- ``verify``: every live object checked (``cli/verify.py``); a summary, and exit code 1
  naming each damaged object when any is.

Every subcommand takes ``--json`` (one JSON document on stdout instead of text). The store is
opened ``read_only`` (``cli/common.open_read_only``) and never modified. An SST id outside
``[0, 2**64)`` or a ``--limit`` below -1 is bad usage (exit code 2); epochs whose time is
beyond Python's datetime range print as such; names and decoded values are escaped for the
terminal (:func:`cli.common.printable`).

Callers: ``cli/main.py``.
"""

from __future__ import annotations

import argparse
import sys

from hummock import CorruptionError, HummockError, InvalidArgumentError
from hummock.manifest import MANIFEST_PREFIX
from hummock.object_store.base import ObjectNotFoundError
from hummock.sstable.block import BLOCK_TRAILER, BLOCK_TRAILER_SIZE
from hummock.sstable.filter import FilterReader
from hummock.sstable.meta import sst_object_path
from hummock.sstable.reader import Sstable
from hummock.version_codec import decode_delta, decode_version
from cli import verify as cli_verify
from cli.common import (EXIT_CORRUPT, EXIT_OK, add_url_argument, epoch_text, human_bytes,
                            key_text, open_objects, open_read_only, print_json, print_table, printable, progress)
from cli.decode import RowDecoder


def register(commands) -> None:
    parser = commands.add_parser("inspect", help="look inside a store (read-only): levels, an SST, "
                                 "the manifest, verify checksums",
                                 description="Inspect a Hummock store without modifying it.")
    add_url_argument(parser)
    what = parser.add_subparsers(dest="what", metavar="WHAT", required=True)

    levels = what.add_parser("levels", help="LSM shape: SSTs, bytes, key ranges, epochs per level")
    levels.add_argument("--ssts", action="store_true", help="list every SST, not only per-level totals")
    levels.set_defaults(func=run_levels)

    sst = what.add_parser("sst", help="one SST: meta, blocks and entries (decoded via the catalog)")
    sst.add_argument("sst_id", metavar="ID", type=_sst_id, help="the SST id (see 'inspect URL levels --ssts')")
    sst.add_argument("--limit", type=_limit, default=20, metavar="N",
                     help="entries to show (default 20; -1: all; 0: none)")
    sst.add_argument("--raw", action="store_true", help="show keys and values in hex, skip the catalog")
    sst.add_argument("--no-blocks", action="store_true", help="omit the block list")
    sst.set_defaults(func=run_sst)

    manifest = what.add_parser("manifest", help="the version history: checkpoints and deltas still stored")
    manifest.set_defaults(func=run_manifest)

    verify = what.add_parser("verify", help="check every live object (checksums, decoding, counts); "
                             "exit 1 on corruption")
    verify.set_defaults(func=run_verify)

    for sub in (levels, sst, manifest, verify):
        sub.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def _sst_id(text: str) -> int:
    """argparse type: an SST id, an integer in [0, 2**64)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"an SST id is an integer in [0, 2**64), got {value}")
    return value


def _limit(text: str) -> int:
    """argparse type: a number of entries, -1 (all) or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"--limit is -1 (all), 0 (none) or a number of entries, got {value}")
    return value


# --- levels ----------------------------------------------------------------------------------

def _sst_row(info, level: str) -> dict:
    return {"level": level, "sst": info.sst_id, "bytes": info.file_size, "keys": info.key_count,
            "tombstones": info.tombstone_count, "smallest": key_text(info.smallest_key),
            "largest": key_text(info.largest_key), "min_epoch": info.min_epoch, "max_epoch": info.max_epoch,
            "tables": list(info.table_ids)}


def _group_row(level: str, infos, sorted_run: bool) -> dict:
    infos = list(infos)
    row = {"level": level, "ssts": len(infos), "bytes": sum(i.file_size for i in infos),
           "keys": sum(i.key_count for i in infos), "sorted_run": sorted_run}
    if infos:
        row.update(smallest=key_text(min(infos, key=lambda i: (i.smallest_key[:-8], i.smallest_key[-8:])).smallest_key),
                   largest=key_text(max(infos, key=lambda i: (i.largest_key[:-8], i.largest_key[-8:])).largest_key),
                   min_epoch=min(i.min_epoch for i in infos), max_epoch=max(i.max_epoch for i in infos))
    return row


def levels_report(version) -> dict:
    groups, ssts = [], []
    for sub in version.l0:
        name = f"L0.{sub.sub_level_id}"
        groups.append(_group_row(name, sub.ssts, not sub.overlapping))
        ssts += [_sst_row(i, name) for i in sub.ssts]
    for level in version.levels:
        groups.append(_group_row(f"L{level.level}", level.ssts, True))
        ssts += [_sst_row(i, f"L{level.level}") for i in level.ssts]
    return {"version_id": version.id, "max_committed_epoch": version.max_committed_epoch,
            "safe_epoch": version.safe_epoch, "next_sst_id": version.next_sst_id,
            "level_bytes": list(version.level_sizes()), "level_ssts": list(version.level_counts()),
            "groups": groups, "ssts": ssts}


def run_levels(args) -> int:
    with open_read_only(args.url) as db:
        report = levels_report(db.version())
    if args.json:
        print_json(report)
        return EXIT_OK
    print(f"version {report['version_id']}, max_committed_epoch {epoch_text(report['max_committed_epoch'])}, "
          f"safe_epoch {report['safe_epoch']}")
    print(f"{sum(report['level_ssts'])} SSTs, {human_bytes(sum(report['level_bytes']))}; "
          f"L0: {len([g for g in report['groups'] if g['level'].startswith('L0.')])} sub-levels")
    rows = [dict(g, bytes=human_bytes(g["bytes"]), epochs=_epochs(g)) for g in report["groups"]]
    print_table(rows, ["level", "ssts", "bytes", "keys", "smallest", "largest", "epochs"])
    if args.ssts:
        print()
        rows = [dict(s, bytes=human_bytes(s["bytes"]), epochs=_epochs(s)) for s in report["ssts"]]
        print_table(rows, ["level", "sst", "bytes", "keys", "tombstones", "smallest", "largest", "epochs", "tables"])
    return EXIT_OK


def _epochs(row: dict) -> str:
    return f"{row['min_epoch']}..{row['max_epoch']}" if "min_epoch" in row else ""


# --- one SST ---------------------------------------------------------------------------------

def sst_report(db, objects, sst_id: int, limit: int, raw: bool) -> dict:
    version = db.version()
    info = next((i for i in version.all_ssts() if i.sst_id == sst_id), None)
    path = sst_object_path(sst_id)
    if info is None and not objects.exists(path):
        raise InvalidArgumentError(f"no SST {sst_id} in the store (its version {version.id} holds "
                                   f"{len(version.sst_ids())}; see 'inspect URL levels --ssts')")
    data = objects.read(path)   # one request, also on S3; SSTs are at most target_sst_size
    objects = cli_verify.OneObject(path, data)
    sst = Sstable.open(objects, info if info is not None else sst_id)   # an orphan opens by id
    meta = sst.meta
    level = version.level_of(sst_id)
    bloom = FilterReader(meta.filter, object_name=f"{path} filter")
    report = {"sst_id": sst_id, "object": path, "level": None if level is None else f"L{level}",
              "in_version": info is not None, "file_size": len(data),
              "blocks_count": len(meta.blocks), "key_count": meta.key_count,
              "tombstone_count": meta.tombstone_count, "min_epoch": meta.min_epoch, "max_epoch": meta.max_epoch,
              "smallest_key": key_text(meta.smallest_key, 64), "largest_key": key_text(meta.largest_key, 64),
              "table_ids": list(meta.table_ids),
              "filter": {"bytes": len(meta.filter), "keys": bloom.num_keys, "bits": bloom.num_bits,
                         "probes": bloom.num_probes},
              "prefix_lens": {str(t): n for t, n in meta.prefix_lens.items()}}
    blocks = []
    for index, bm in enumerate(meta.blocks):
        tag = data[bm.offset + bm.stored_len - BLOCK_TRAILER_SIZE:bm.offset + bm.stored_len]
        compression = {0: "none", 1: "lz4"}.get(BLOCK_TRAILER.unpack(tag)[0], "unknown")
        blocks.append({"block": index, "offset": bm.offset, "stored_len": bm.stored_len,
                       "content_len": bm.content_len, "compression": compression,
                       "first_key": key_text(bm.first_key, 40)})
    report["blocks"] = blocks
    decoder = RowDecoder(db, db.max_committed_epoch, raw=raw)
    report["tables"] = {str(t): decoder.table_name(t) for t in meta.table_ids}
    entries = []
    if limit != 0:
        for key, value in sst.scan():
            entries.append(decoder.entry(key, value))
            if 0 < limit <= len(entries):
                break
    report["entries"] = entries
    return report


def run_sst(args) -> int:
    with open_read_only(args.url) as db, open_objects(args.url) as objects:
        report = sst_report(db, objects, args.sst_id, args.limit, args.raw)
    if args.json:
        print_json(report)
        return EXIT_OK
    where = report["level"] or "not in the current version (an orphan vacuum will delete)"
    print(f"SST {report['sst_id']} ({report['object']}), {where}")
    print(f"  size {human_bytes(report['file_size'])}, {report['blocks_count']} blocks, "
          f"{report['key_count']} keys ({report['tombstone_count']} tombstones)")
    print(f"  epochs {epoch_text(report['min_epoch'])} .. {epoch_text(report['max_epoch'])}")
    print(f"  keys {report['smallest_key']} .. {report['largest_key']}")
    tables = ", ".join(f"{t} ({n})" if n else t for t, n in report["tables"].items())
    print(printable(f"  tables {tables}", single_line=True))
    f = report["filter"]
    print(f"  bloom filter {f['bytes']} bytes: {f['keys']} keys, {f['bits']} bits, {f['probes']} probes"
          + (f"; prefix filter for {report['prefix_lens']}" if report["prefix_lens"] else ""))
    if not args.no_blocks:
        print()
        print_table(report["blocks"], ["block", "offset", "stored_len", "content_len", "compression", "first_key"])
    if report["entries"]:
        print()
        for e in report["entries"]:
            value = "" if e["kind"] == "delete" else f" -> {e.get('value')}"
            note = f"  [{e['note']}]" if e.get("note") else ""
            print(printable(f"  t{e['table_id']} {e['key']} @{e['epoch']} {e['kind']}{value}{note}", single_line=True))
        if len(report["entries"]) < report["key_count"]:
            print(f"  ... {report['key_count'] - len(report['entries'])} more (--limit -1 shows all)")
    return EXIT_OK


# --- manifest --------------------------------------------------------------------------------

def manifest_report(db, objects) -> dict:
    items = []
    for meta in sorted(objects.list(MANIFEST_PREFIX), key=lambda m: m.path):
        name = meta.path[len(MANIFEST_PREFIX):]
        kind = name.split("-")[0]
        if kind not in ("checkpoint", "delta"):
            continue
        item = {"object": meta.path, "type": kind, "id": int(name.split("-")[1]), "bytes": meta.size}
        try:
            data = objects.read(meta.path)
            if kind == "checkpoint":
                v = decode_version(data, object=meta.path)
                item.update(max_committed_epoch=v.max_committed_epoch, safe_epoch=v.safe_epoch,
                            ssts=sum(v.level_counts()), l0_sub_levels=len(v.l0),
                            summary=f"{sum(v.level_counts())} SSTs, {len(v.l0)} L0 sub-levels, "
                                    f"per level {list(v.level_counts())}")
            else:
                d = decode_delta(data, object=meta.path)
                added = [i.sst_id for _, i in d.added] + \
                    ([i.sst_id for i in d.new_sub_level.ssts] if d.new_sub_level else [])
                removed = [sst for _, sst in d.removed]
                item.update(kind=d.kind, max_committed_epoch=d.max_committed_epoch, added=added,
                            removed=removed, next_sst_id=d.next_sst_id,
                            summary=_delta_summary(d, added, removed))
        except ObjectNotFoundError:
            item.update(summary="(vanished: rotated away meanwhile)")
        except CorruptionError as exc:
            item.update(corrupt=str(exc), summary=f"CORRUPT: {exc}")
        items.append(item)
    items.sort(key=lambda i: (i["id"], i["type"] == "checkpoint"))
    version = db.version() if db is not None else None
    return {"version_id": None if version is None else version.id,
            "max_committed_epoch": None if version is None else version.max_committed_epoch,
            "objects": items}


def _delta_summary(d, added, removed) -> str:
    levels = sorted({lv for lv, _ in d.added})
    target = f" -> L{'/L'.join(map(str, levels))}" if levels else ""
    if d.kind == "commit":
        return f"commit epoch {d.max_committed_epoch}: +{len(added)} SSTs in a new L0 sub-level"
    if d.kind in ("compaction", "move"):
        return f"{d.kind}: -{len(removed)} +{len(added)} SSTs{target}"
    if d.kind == "reserve_ids":
        return f"reserve ids up to {d.next_sst_id - 1}"
    return d.kind


def run_manifest(args) -> int:
    with open_objects(args.url) as objects:
        try:
            db = open_read_only(args.url)
        except CorruptionError as exc:   # still list what is stored: that is how to find the damage
            print(f"hummock: corruption: {exc}", file=sys.stderr)
            db = None
        try:
            report = manifest_report(db, objects)
        finally:
            if db is not None:
                db.close()
    if args.json:
        print_json(report)
    else:
        if report["version_id"] is not None:
            print(f"current version {report['version_id']}, max_committed_epoch "
                  f"{epoch_text(report['max_committed_epoch'])}")
        print(f"{len(report['objects'])} manifest objects (older ones were rotated away):")
        print_table(report["objects"], ["id", "type", "bytes", "summary"])
    corrupt = db is None or any("corrupt" in i for i in report["objects"])
    return EXIT_CORRUPT if corrupt else EXIT_OK


# --- verify ----------------------------------------------------------------------------------

def verify(url: str, *, show_progress: bool = True) -> cli_verify.VerifyReport:
    report = cli_verify.VerifyReport()
    with open_objects(url) as objects:
        cli_verify.verify_manifest(objects, report)
        try:
            db = open_read_only(url)
        except CorruptionError as exc:
            if not any(obj == exc.object for obj, _ in report.problems):   # not named already
                report.problems.append((exc.object or "manifest", f"the store does not open: {exc}"))
            return report
        with db:
            version = db.version()
            report.version_id = version.id
            infos = version.all_ssts()
            with progress("verifying SSTs", sum(i.file_size for i in infos), enabled=show_progress) as advance:
                for info in infos:
                    cli_verify.verify_sst(objects, info, report)
                    advance(info.file_size)
            cli_verify.verify_catalog(db, report)
            try:
                cli_verify.count_orphans(objects, version, report)
            except HummockError:   # a listing failure hides nothing that was checked
                report.orphan_ssts = -1
    return report


def run_verify(args) -> int:
    report = verify(args.url, show_progress=not args.json)
    if args.json:
        print_json(report.to_json())
    else:
        for obj, message in report.problems:
            print(printable(f"CORRUPT {obj}: {message}", single_line=True))
        print(f"verified version {report.version_id}: {report.manifest_objects} manifest objects, "
              f"{report.ssts} SSTs ({human_bytes(report.sst_bytes)}, {report.blocks} blocks, {report.keys} keys), "
              f"{report.catalog_records} catalog records; {report.orphan_ssts} unreferenced SSTs left for vacuum")
        print(f"{len(report.problems)} problem(s): " + ("store is consistent" if report.ok else "store is CORRUPT"))
    return EXIT_OK if report.ok else EXIT_CORRUPT

