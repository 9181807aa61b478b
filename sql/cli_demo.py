"""``hummock demo``: the README's main job for now -- a short tour of what exists today: typed
rows encoded as memcomparable keys and values, written to a Hummock store, committed, reopened
read-only and read back in key order. The streaming-SQL demo (Nexmark MVs, compaction on Spark)
replaces it once the SQL frontend lands (issue 14).

Callers: ``sql/cli.py``; tests call :func:`run_demo` directly.
"""

from __future__ import annotations

import datetime
import decimal
import sys
import tempfile

from hummock import HummockStorage, __version__
from hummock import _twins
from hummock.key import new_epoch
from relational import memcomparable, value_encoding
from relational.memcomparable import OrderType
from relational.types import DataType, Interval


def register(commands) -> None:
    parser = commands.add_parser("demo", help="a short tour: typed rows -> keys and values -> a Hummock store",
                                 description="Store a small table of typed rows in a temporary Hummock "
                                             "store, commit, reopen read-only and read it back in key order.")
    parser.set_defaults(func=lambda args: run_demo())


def run_demo(out=sys.stdout) -> int:
    """Store a small table of typed rows in Hummock (one row = one KV pair), commit, reopen,
    and read it back in primary-key order."""
    schema = [("city", DataType.VARCHAR), ("day", DataType.DATE), ("temp", DataType.DOUBLE),
              ("rain_mm", DataType.DECIMAL), ("window", DataType.INTERVAL)]
    types = [t for _, t in schema]
    pk, pk_orders = [0, 1], (OrderType.ASC, OrderType.DESC)   # city ASC, day DESC (newest first)
    rows = [
        ("Zürich", datetime.date(2026, 11, 20), 4.5, decimal.Decimal("1.20"), Interval(0, 0, 3_600_000_000)),
        ("Amsterdam", datetime.date(2026, 11, 21), 7.0, decimal.Decimal("0"), Interval(0, 1, 0)),
        ("Zürich", datetime.date(2026, 11, 21), float("nan"), None, Interval(1, 0, 0)),
        ("Amsterdam", datetime.date(2026, 11, 19), -0.0, decimal.Decimal("12.5"), Interval(0, 0, 0)),
    ]
    mode = "native" if all(_twins.LOADED.values()) else "pure-Python"
    print(f"hummock {__version__}: encodings and storage running in {mode} mode", file=out)
    table_id = 42
    key_types, key_orders = [types[i] for i in pk], pk_orders
    pairs = sorted((memcomparable.encode_row([row[i] for i in pk], key_types, key_orders),
                    value_encoding.encode_row(row, types)) for row in rows)
    with tempfile.TemporaryDirectory(prefix="hummock-demo-") as path:
        with HummockStorage.open(path) as db:
            epoch = new_epoch()
            db.ingest_batch(table_id, pairs, epoch)
            db.checkpoint(epoch)
            print(f"{len(pairs)} rows written to table {table_id} and committed at epoch {epoch}", file=out)
        with HummockStorage.open(path, read_only=True) as db:  # reopened: what a crash would keep
            print(f"reopened read-only at max_committed_epoch={db.max_committed_epoch}; rows in key "
                  "order (city ASC, day DESC):", file=out)
            for key, value in db.iter(table_id, db.max_committed_epoch):
                city, day = memcomparable.decode_row(key, key_types, key_orders)
                row = value_encoding.decode_row(value, types)
                assert (city, day) == (row[0], row[1]), "key and value disagree"
                print(f"  key={key.hex()[:24]}... {len(key):2d}+{len(value):2d} bytes  {row}", file=out)
            stats = db.stats()
            print(f"store: {stats['l0_sub_levels']} L0 sub-level, level bytes {stats['level_sizes'][0]}", file=out)
    return 0
