"""The ``hummock`` command line (console script declared in pyproject.toml).

Subcommands so far: ``demo`` (the README's main job: a short tour of what exists today — typed
rows, memcomparable keys, value encoding, full keys with epochs) and ``--version``. The SQL shell,
script runs, compaction and inspection arrive with the CLI issue.
Callers: users, from a shell.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import sys

from hummock import __version__
from hummock import _twins
from hummock.key import decode_full_key, encode_full_key, new_epoch
from relational import memcomparable, value_encoding
from relational.memcomparable import OrderType
from relational.types import DataType, Interval


def run_demo(out=sys.stdout) -> int:
    """Encode a small table of typed rows as Hummock would store them, sort by key, read back."""
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
    print(f"hummock {__version__}: encodings running in {mode} mode", file=out)
    epoch = new_epoch()
    table_id = 42
    stored = []
    for row in rows:
        key = memcomparable.encode_row([row[i] for i in pk], [types[i] for i in pk], pk_orders)
        stored.append((encode_full_key(table_id, key, epoch), value_encoding.encode_row(row, types)))
    stored.sort()  # same table and epoch here, so bytewise order of full keys is the key order
    print(f"{len(stored)} rows stored in table {table_id} at epoch {epoch}, in key order "
          "(city ASC, day DESC):", file=out)
    for full_key, value in stored:
        tid, table_key, ep = decode_full_key(full_key)
        city, day = memcomparable.decode_row(table_key, [types[i] for i in pk], pk_orders)
        row = value_encoding.decode_row(value, types)
        assert (city, day) == (row[0], row[1]), "key and value disagree"
        print(f"  key={full_key.hex()[:28]}... {len(full_key):2d}+{len(value):2d} bytes  {row}", file=out)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="hummock", description="Hummock streaming state store")
    parser.add_argument("--version", action="version", version=f"hummock {__version__}")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("demo", help="a short tour of the encodings that exist so far")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo()
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
