"""``hummock run URL FILE.sql``: run a SQL script against a database and print each result.

Statements run in order, each printed as the shell prints it (aligned tables, command tags).
The first failing statement stops the script: stderr gets ``FILE:LINE:COLUMN: ERROR: <Type>:
<message>`` (the error's own position when it has one, else where the statement starts) and
the statement, and the exit code is 4 (``EXIT_SQL``, docs/cli.md). ``FILE`` may be ``-``
(stdin). A script that cannot be read (missing, a directory, no permission, not UTF-8) and a
store that cannot be opened are exit code 3, as for every command, with a message, checked
before the database opens. Results and errors are escaped for the terminal
(:func:`cli.common.printable`).

Callers: ``cli/main.py``.
"""

from __future__ import annotations

import sys
import time

from cli.common import EXIT_OK, EXIT_SQL, printable, read_script
from cli.script import execute_at, render_result, split_statements
from cli.shell import add_session_options, runtime_options
from sql.errors import SqlError


def register(commands) -> None:
    parser = commands.add_parser(
        "run", help="run a SQL script, stopping at the first error",
        description="Run the statements of FILE against the database at URL, printing each result. "
                    "Exit code 4 at the first failing statement, named with its line and column.")
    parser.add_argument("url", metavar="URL", help="a path, file:///path, s3://bucket/prefix?... or :memory:")
    parser.add_argument("file", metavar="FILE", help="the SQL script ('-' for stdin)")
    add_session_options(parser)
    parser.add_argument("--echo", action="store_true", help="print each statement before its result")
    parser.set_defaults(func=run_script)


def run_script(args) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    text = read_script(args.file)
    statements = split_statements(text)
    import sql
    with sql.connect(args.url, implicit_flush=args.implicit_flush, **runtime_options(args)) as conn:
        for stmt in statements:
            if args.echo:
                print(printable(stmt.text + ";"))
            started = time.perf_counter()
            try:
                cursor = execute_at(conn, stmt)
                print(render_result(cursor, stmt.text))
            except SqlError as exc:
                sys.stdout.flush()
                line, column = (exc.line, exc.column) if exc.line is not None else (stmt.line, stmt.column)
                print(printable(f"{name}:{line}:{column}: ERROR: {type(exc).__name__}: {exc}"), file=sys.stderr)
                print(f"STATEMENT (line {stmt.line}, column {stmt.column}):", file=sys.stderr)
                for text_line in stmt.text.splitlines():
                    print(printable(f"  {text_line}"), file=sys.stderr)
                return EXIT_SQL
            if args.timing:
                print(f"Time: {(time.perf_counter() - started) * 1000:.3f} ms")
    return EXIT_OK
