"""The ``hummock`` command line (console script declared in pyproject.toml): parser and dispatch.

Each subcommand lives in its own module ``sql/cli_<name>.py`` exposing ``register(commands)``,
which adds its argparse sub-parser and sets ``func`` (called with the parsed arguments,
returning the exit code). A new subcommand (the SQL shell, ``run``, the SQL demo) is one more
module in :data:`SUBCOMMANDS`; nothing else here changes.

Exit codes, the same for every subcommand (docs/cli.md): 0 success; 1 the store is corrupt
(``inspect verify`` found damage, or a command met a ``CorruptionError``); 2 bad usage
(argparse); 3 any other error (no store at the URL, I/O, another writer holds the store); 4 a
SQL statement failed (``run``, ``sql`` reading stdin).

Callers: users, from a shell; tests run it as ``python -m sql.cli``.
"""

from __future__ import annotations

import argparse
import sys

from hummock import __version__
from sql import cli_bench, cli_compact, cli_demo, cli_inspect, cli_run, cli_serve, cli_sql
from sql.cli_common import run_command
from sql.cli_demo import run_demo  # noqa: F401  (kept importable here: tests, README)

#: the subcommand modules, in the order ``--help`` lists them
SUBCOMMANDS = (cli_demo, cli_sql, cli_run, cli_serve, cli_inspect, cli_compact, cli_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hummock", description="Hummock: a streaming state store with streaming SQL. Run SQL, "
        "inspect, compact and benchmark stores; URLs are a path, file:///path or s3://bucket/prefix?endpoint=...",
        epilog="Run 'hummock COMMAND --help' for a command's options. Docs: docs/cli.md")
    parser.add_argument("--version", action="version", version=f"hummock {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(commands)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    return run_command(args.func, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
