"""The ``hummock`` command line (console script declared in pyproject.toml): parser and dispatch.

Each subcommand lives in its own module of this package (``cli/<name>.py``, named in
:data:`SUBCOMMANDS`) exposing ``register(commands)``,
which adds its argparse sub-parser and sets ``func`` (called with the parsed arguments,
returning the exit code). A new subcommand (the SQL shell, ``run``, the SQL demo) is one more
entry in :data:`SUBCOMMANDS`; nothing else here changes. Only the module of the command being
run is imported (the others appear in ``hummock --help`` by their one-line help here, which a
test keeps equal to the module's own): ``hummock --help`` costs no store, SQL or stream import
(not even the version, read by ``--version`` alone).

Exit codes, the same for every subcommand (docs/cli.md): 0 success; 1 the store is corrupt
(``inspect verify`` found damage, or a command met a ``CorruptionError``); 2 bad usage
(argparse); 3 any other error (no store at the URL, I/O, another writer holds the store); 4 a
SQL statement failed (``run``, ``sql`` reading stdin).

Callers: users, from a shell; tests run it as ``python -m cli``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: ``(command, module, one-line help)``, in the order ``--help`` lists them
SUBCOMMANDS = (
    ("demo", "cli.demo", "streaming SQL over live Nexmark events, compaction on Spark, a self-check"),
    ("sql", "cli.shell", "an interactive SQL shell (or a script on stdin)"),
    ("run", "cli.run", "run a SQL script, stopping at the first error"),
    ("serve", "cli.serve", "serve the database to Postgres clients (psql, psycopg, JDBC ...)"),
    ("inspect", "cli.inspection", "look inside a store (read-only): levels, an SST, the manifest, verify checksums"),
    ("compact", "cli.compact", "compact a store now (in-process or on Spark)"),
    ("bench", "cli.benchmarks", "run a named benchmark of bench/ (see 'hummock bench --help')"),
)


class _Version(argparse.Action):
    """``--version``: imports the version only when asked (importing ``hummock._version`` runs
    the ``hummock`` package's ``__init__``, the whole store: ``--help`` need not pay for it)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from hummock._version import __version__
        print(f"hummock {__version__}")   # on stdout, as argparse's own version action
        parser.exit()


def build_parser(load=None) -> argparse.ArgumentParser:
    """The ``hummock`` parser; ``load``: the commands whose modules register their full
    sub-parsers (None: all of them), the others are listed by name and help only."""
    parser = argparse.ArgumentParser(
        prog="hummock", description="Hummock: a streaming state store with streaming SQL. Run SQL, "
        "inspect, compact and benchmark stores; URLs are a path, file:///path or s3://bucket/prefix?endpoint=...",
        epilog="Run 'hummock COMMAND --help' for a command's options. Docs: docs/cli.md")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, help_text in SUBCOMMANDS:
        if load is None or name in load:
            importlib.import_module(module).register(commands)
        else:
            commands.add_parser(name, help=help_text)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    names = {name for name, _, _ in SUBCOMMANDS}
    chosen = next((a for a in argv if not a.startswith("-")), None)   # the first word names the command
    parser = build_parser(load={chosen} & names)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    from cli.common import run_command
    return run_command(args.func, args)


def run_demo(*args, **kwargs):
    """``cli.demo.run_demo`` (kept importable here: tests, README)."""
    from cli.demo import run_demo as demo
    return demo(*args, **kwargs)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
