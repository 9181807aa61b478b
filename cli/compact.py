"""``hummock compact URL [--spark MASTER] [--full]``: compact a store now, as its writer.

Without ``--full`` it runs what the background compactor would (``compact_pending``: the
picker's L0 triggers and level targets) until nothing is due; with ``--full`` everything goes
to the last level (``compact_all``: one sorted run, tombstones and old versions dropped that no
reader can see). In-process by default; ``--spark MASTER`` (``local[*]``, ``spark://...``)
runs every rewrite as a PySpark job (docs/compaction.md "Spark runner"), which needs Java and
a store Spark executors can reach (a local path in local mode, or S3).

The command takes the store's writer lock: it fails with ``ConcurrentWriterError`` (exit 3)
while another process writes the store. It compacts existing stores only: a URL holding no
store (no manifest checkpoint) is exit code 3 and nothing is created there. Superseded SSTs are deleted by vacuum only once older
than ``--vacuum-min-age`` seconds (default 600, the engine's), so readers in other processes
are never cut off.

Callers: ``cli/main.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

from hummock import HummockStorage, StorageOptions
from hummock.manifest import MANIFEST_PREFIX, ManifestNotFoundError
from cli.common import (EXIT_ERROR, EXIT_OK, add_url_argument, human_bytes, open_objects, print_json,
                            status)


def register(commands) -> None:
    parser = commands.add_parser("compact", help="compact a store now (in-process or on Spark)",
                                 description="Run compaction on a store as its writer, in-process or "
                                             "as PySpark jobs; prints the LSM shape before and after.")
    add_url_argument(parser)
    parser.add_argument("--full", action="store_true",
                        help="compact everything into the last level (default: only what is due)")
    parser.add_argument("--spark", metavar="MASTER", default=None,
                        help="run rewrites as PySpark jobs on this master, e.g. 'local[*]'")
    parser.add_argument("--vacuum-min-age", type=float, default=None, metavar="SECONDS",
                        help="delete superseded SSTs once older than this (default: 600; 0 only "
                             "when no other process reads the store)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.set_defaults(func=run_compact)


def _shape(version) -> dict:
    return {"version_id": version.id, "l0_sub_levels": len(version.l0),
            "level_ssts": list(version.level_counts()), "level_bytes": list(version.level_sizes())}


def run_compact(args) -> int:
    changes = {"compactor": "spark" if args.spark else "none"}
    if args.spark:
        if shutil.which("java") is None and not _java_home():
            print("hummock: error: --spark needs Java (java on PATH or JAVA_HOME); run without --spark "
                  "to compact in-process", file=sys.stderr)
            return EXIT_ERROR
        changes["spark_master"] = args.spark
    if args.vacuum_min_age is not None:
        changes["vacuum_min_age_s"] = args.vacuum_min_age
    options = StorageOptions().replace(**changes)
    runner = f"Spark ({args.spark})" if args.spark else "in-process"
    _require_store(args.url)
    started = time.perf_counter()
    with HummockStorage.open(args.url, options) as db:
        before = _shape(db.version())
        with status(f"compacting {'everything' if args.full else 'what is due'} ({runner})..."):
            tasks = db.compact_all() if args.full else db.compact_pending()
        after = _shape(db.version())
    report = {"runner": runner, "full": args.full, "tasks": tasks, "seconds": round(time.perf_counter() - started, 3),
              "before": before, "after": after}
    if args.json:
        print_json(report)
        return EXIT_OK
    print(f"{tasks} compaction task(s) applied {runner} in {report['seconds']:.2f} s")
    for name, shape in (("before", before), ("after", after)):
        levels = ", ".join(f"L{i} {n} SSTs {human_bytes(b)}" for i, (n, b) in
                           enumerate(zip(shape["level_ssts"], shape["level_bytes"])) if n)
        print(f"  {name}: version {shape['version_id']}, {shape['l0_sub_levels']} L0 sub-levels; {levels or 'empty'}")
    return EXIT_OK


def _require_store(url: str) -> None:
    """Raise ``ManifestNotFoundError`` (exit 3) unless ``url`` holds a store: opening it as a
    writer would create an empty one. Looks without creating anything (``open_objects``)."""
    with open_objects(url) as objects:
        if not any(m.path.startswith(f"{MANIFEST_PREFIX}checkpoint-") for m in objects.list(MANIFEST_PREFIX)):
            raise ManifestNotFoundError(f"no store at {url!r} to compact (compact does not create one)")


def _java_home() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home) and os.path.exists(os.path.join(home, "bin", "java"))
