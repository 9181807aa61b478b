"""``hummock sql [URL]``: an interactive SQL shell (psql's look), or a script read from stdin.

On a terminal (:mod:`cli.terminal`: line editing, a history keeping a multi-line statement
as one entry, tab completion of keywords and names, a pager for tall results), statements
spanning lines until one ends with ``;`` (prompt ``hummock=>``, then
``hummock->``), results as aligned tables (or expanded with ``\\x``, CSV with ``--csv``, JSON
with ``--json``: :mod:`cli.format`). Meta commands (a line starting with ``\\``): ``\\d``
(tables and MVs), ``\\d NAME`` (columns; an MV's definition), ``\\dt``, ``\\dm``, ``\\di``, ``\\timing
[on|off]``, ``\\x [on|off]``, ``\\i FILE``, ``\\o [FILE]``, ``\\copy ...`` (psql's client-side COPY:
the rest of the line is a COPY statement, paths relative to the shell's directory), ``\\?``,
``\\q``; ``help``, ``quit`` and ``exit`` on an empty line. ``-c SQL`` / ``-f FILE`` run in order,
then exit. An error shows psql's ``LINE n:`` (within the statement) and a caret. Ctrl-C drops the statement being
typed; Ctrl-D quits. Long statements (COPY, a CREATE MATERIALIZED VIEW's backfill) show a
progress bar on a terminal (rich, on stderr).

``--read-only`` opens the database as a reader beside its writer (``connect(read_only=True)``:
each statement at the newest committed epoch; DDL and DML refused). When the database already
has a writer and ``--read-only`` was not given, an interactive shell offers to open it
read-only; a script gets the error and a hint.

With stdin not a terminal the same lines are read from stdin (no prompts); an error is printed
with its position and the script goes on, as psql does (``--on-error-stop`` stops it); the exit
code is then 4 (``EXIT_SQL``) when any statement failed. Input that is not UTF-8 stops the
script with a message naming the line (exit code 3).

Everything printed that comes from stored data or the input -- result cells and headers, error
messages, relation names, an MV's definition -- goes through :func:`cli.common.printable`:
control characters (``ESC[2J``, ``\r``) are shown as escapes, never sent raw to the terminal.

Callers: ``cli/main.py``. The statement splitting and rendering are :mod:`cli.script`'s.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from cli.common import EXIT_OK, EXIT_SQL, CommandError, printable
from cli.format import render
from cli.terminal import page
from cli.script import execute_at, is_complete, render_table, split_statements
from sql.errors import SqlError

HELP = """general:
  help           this help        quit / exit / \\q   leave the shell
meta commands:
  \\d            list tables and materialized views
  \\d NAME       columns of a table or MV (and an MV's definition)
  \\dt           list tables
  \\dm           list materialized views
  \\di           list indexes
  \\timing [on|off]  print each statement's time
  \\x [on|off]  expanded display: one block per row, a line per column
  \\i FILE      run the statements of FILE
  \\o [FILE]    send query results to FILE (none: back to the terminal)
  \\copy ...     COPY ... FROM/TO a file (same options as COPY)
  \\?            this help
  \\q            quit
SQL statements end with ';' and may span lines."""


def register(commands) -> None:
    parser = commands.add_parser(
        "sql", help="an interactive SQL shell (or a script on stdin)",
        description="Open the database at URL (default: a fresh in-memory one) and run SQL typed at "
                    "the prompt, or read from stdin when it is not a terminal. Type \\? for meta commands.")
    parser.add_argument("url", metavar="URL", nargs="?", default=":memory:",
                        help="a path, file:///path, s3://bucket/prefix?endpoint=..., or :memory: (default)")
    add_session_options(parser)
    parser.add_argument("--read-only", action="store_true",
                        help="open as a reader beside the database's writer (another process): queries see "
                             "each newest committed epoch; DDL and DML are refused")
    parser.add_argument("--on-error-stop", action="store_true",
                        help="stdin scripts: stop at the first failed statement")
    parser.add_argument("-c", "--command", dest="actions", action=_Ordered, metavar="SQL",
                        help="run SQL (or one meta command), then exit; repeatable, run in order with -f")
    parser.add_argument("-f", "--file", dest="actions", action=_Ordered, metavar="FILE",
                        help="run the statements of FILE, then exit; repeatable")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--csv", dest="format", action="store_const", const="csv", default="aligned",
                     help="print query results as CSV (a header line, then rows)")
    out.add_argument("--json", dest="format", action="store_const", const="json",
                     help="print query results as a JSON array of objects")
    parser.set_defaults(func=run_shell)


class _Ordered(argparse.Action):
    """``-c`` and ``-f`` into one list of ``(option, value)`` in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        actions = list(getattr(namespace, self.dest, None) or [])
        actions.append(("-c" if option_string in ("-c", "--command") else "-f", values))
        setattr(namespace, self.dest, actions)


def add_session_options(parser) -> None:
    parser.add_argument("--implicit-flush", action="store_true",
                        help="each DML waits for its checkpoint (SET RW_IMPLICIT_FLUSH = true)")
    parser.add_argument("--spark", metavar="MASTER", default=None,
                        help="maintain the MVs on Spark (the Spark runtime: one micro-batch per FLUSH), e.g. "
                             "local[2] or spark://host:7077; default: in-process")
    parser.add_argument("--partitions", type=int, default=None,
                        help="with --spark: tasks per stage (default: Spark's default parallelism)")
    parser.add_argument("--timing", action="store_true", help="print each statement's time")


class Shell:
    """Feeds lines; runs each complete statement; handles meta commands."""

    def __init__(self, conn, out=sys.stdout, err=sys.stderr, timing: bool = False, stop_on_error: bool = False,
                 fmt: str = "aligned"):
        self.conn, self.out, self.err = conn, out, err
        self.timing, self.stop_on_error = timing, stop_on_error
        self.fmt, self.expanded = fmt, False   # --csv / --json; \x
        self.results = None                    # \o FILE: query results go there
        self.including = 0                     # \i depth (a file including itself stops)
        self.pager = None                      # on a terminal: the pager command (cli/terminal.py)
        self.buffer = ""
        self.failures = 0
        self.done = False
        self.line_no = 0          # lines fed so far: error positions are the input's
        self.buffer_line = 1      # the input line the buffer starts on

    @property
    def continuing(self) -> bool:
        return bool(self.buffer.strip())

    def feed(self, line: str) -> None:
        self.line_no += 1
        if not self.continuing and line.lstrip().startswith("\\"):
            self.meta(line.strip())
            return
        if not self.continuing and line.strip().rstrip(";").lower() in ("help", "quit", "exit"):
            self.meta({"help": "\\?", "quit": "\\q", "exit": "\\q"}[line.strip().rstrip(";").lower()])
            return
        if not self.continuing:
            self.buffer_line = self.line_no
            self.buffer = ""
        self.buffer += line + "\n"
        if is_complete(self.buffer):
            text, self.buffer = self.buffer, ""
            self.run_text(text, self.buffer_line)

    def finish(self) -> None:
        """End of input: a last statement without ``;`` still runs (psql drops it; scripts
        often omit the final semicolon)."""
        if self.continuing and not self.done:
            text, self.buffer = self.buffer, ""
            self.run_text(text, self.buffer_line)

    def run_text(self, text: str, first_line: int) -> None:
        for stmt in split_statements(text):
            if self.done:
                return
            stmt = type(stmt)(stmt.text, stmt.line + first_line - 1, stmt.column)
            started = time.perf_counter()
            try:
                cursor = execute_at(self.conn, stmt)
                shown = render(cursor, stmt.text, self.fmt, self.expanded)
                if self.results is not None:
                    print(shown, file=self.results)
                elif not (self.pager and page(shown, self.pager)):
                    print(shown, file=self.out)
                if cursor.description is not None:
                    self._unseen_notice()
            except SqlError as exc:
                self.failures += 1
                print(error_text(exc, stmt), file=self.err)
                if self.stop_on_error:
                    self.done = True
            if self.timing:
                print(f"Time: {(time.perf_counter() - started) * 1000:.3f} ms", file=self.out)
            self.out.flush()

    def _unseen_notice(self) -> None:
        """After a query: say why rows this shell wrote may be missing from it (not committed
        yet: the next barrier or FLUSH makes them visible)."""
        db = self.conn.db
        unseen = db.unseen_rows()
        if not unseen:
            return
        interval = getattr(db, "barrier_interval_ms", None)
        when = (f"with the next barrier (every {int(interval) if float(interval).is_integer() else interval} ms)"
                if interval
                else "at FLUSH (barrier_interval_ms=0: no periodic barriers)")
        print(f"NOTICE:  {unseen} written row(s) are not visible to queries yet: they commit {when}; "
              f"run FLUSH to commit them now", file=self.err)

    # --- meta commands ---

    def meta(self, line: str) -> None:
        word, _, arg = line.partition(" ")
        arg = arg.strip().rstrip(";")
        if word in ("\\q", "\\quit"):
            self.done = True
        elif word == "\\?":
            print(HELP, file=self.out)
        elif word == "\\timing":
            self.timing = {"on": True, "off": False}.get(arg.lower(), not self.timing)
            print(f"Timing is {'on' if self.timing else 'off'}.", file=self.out)
        elif word == "\\x":
            self.expanded = {"on": True, "off": False}.get(arg.lower(), not self.expanded)
            print(f"Expanded display is {'on' if self.expanded else 'off'}.", file=self.out)
        elif word == "\\i" and arg:
            self.include(arg)
        elif word == "\\o":
            self.redirect(arg)
        elif word in ("\\d", "\\d+") and arg:
            self.describe(arg)
        elif word == "\\copy":
            self.run_text(line.strip()[1:].rstrip(";") + ";", self.line_no)
        elif word in ("\\d", "\\dt", "\\dm", "\\di"):
            self.list_relations({"\\d": ("table", "mv", "source"), "\\dt": ("table",), "\\dm": ("mv",),
                                 "\\di": ("index",)}[word])
        else:
            self.failures += 1
            print(printable(f"invalid command {word}; try \\? for help"), file=self.err)

    def include(self, path: str) -> None:
        """``\\i FILE``: feed the file's lines as if typed (a statement left open runs at its end)."""
        if self.including >= 16:
            self.failures += 1
            print(printable(f"\\i {path}: files include each other more than 16 deep"), file=self.err)
            return
        try:
            text = pathlib.Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.failures += 1
            print(printable(f"\\i {path}: {exc}"), file=self.err)
            return
        saved = self.buffer, self.line_no, self.buffer_line
        self.buffer, self.line_no = "", 0   # error positions: the file's lines
        self.including += 1
        try:
            for line in text.splitlines():
                self.feed(line)
                if self.done:
                    break
            self.finish()
        finally:
            self.including -= 1
            self.buffer, self.line_no, self.buffer_line = saved

    def redirect(self, path: str) -> None:
        """``\\o FILE``: query results (tables, tags) go to FILE, truncated; ``\\o``: back."""
        if self.results is not None:
            self.results.close()
            self.results = None
        if not path:
            return
        try:
            self.results = open(pathlib.Path(path).expanduser(), "w", encoding="utf-8")
        except OSError as exc:
            self.failures += 1
            print(printable(f"\\o {path}: {exc}"), file=self.err)

    def list_relations(self, kinds) -> None:
        self._refresh()
        catalog = self.conn.db.catalog
        rows = [(r.name, _KIND_NAMES[r.kind], len(r.visible_columns))
                for r in catalog.ordered() if r.kind in kinds]
        rows.sort()
        if not rows:
            print("Did not find any relations.", file=self.out)
            return
        print("List of relations", file=self.out)
        print(render_table(["Name", "Type", "Columns"], rows), file=self.out)

    def _refresh(self) -> None:
        """A read-only shell's meta commands see what the writer committed since (as statements do)."""
        db = self.conn.db
        if db.read_only and not db.pinned:
            db.refresh()

    def describe(self, name: str) -> None:
        from sql.parse import _ident_parts
        parts = _ident_parts(name)   # as DESCRIBE reads it: quoted parts keep their case
        if len(parts) == 2 and parts[0] == "public":
            parts = parts[1:]
        self._refresh()
        rel = self.conn.db.catalog.get(parts[0]) if len(parts) == 1 else None
        if rel is None:
            self.failures += 1
            print(printable(f"Did not find any relation named {name!r}."), file=self.err)
            return
        from sql.index import key_text
        print(printable(f'{_KIND_NAMES[rel.kind].capitalize()} "{rel.name}"'), file=self.out)
        if rel.kind == "index":
            print(printable(f'  on "{rel.depends_on[0]}" ({key_text(rel)})'), file=self.out)
            return
        cursor = self.conn.execute(f'DESCRIBE "{rel.name.replace(chr(34), chr(34) * 2)}"')
        print(render_table([d[0] for d in cursor.description], cursor.fetchall()), file=self.out)
        indexes = self.conn.db.catalog.indexes_of(rel.name)
        if indexes:
            print("Indexes:", file=self.out)
            for index in indexes:
                print(printable(f'    "{index.name}" ({key_text(index)})'), file=self.out)
        if rel.kind == "mv" and rel.definition:
            print(printable(f"View definition:\n  {rel.definition};"), file=self.out)
        elif rel.append_only:
            print("APPEND ONLY", file=self.out)


_KIND_NAMES = {"table": "table", "mv": "materialized view", "index": "index", "source": "source"}


def error_text(exc: SqlError, stmt) -> str:
    """``ERROR: <Type>: <message>``; then, as psql shows it, the statement's line holding the
    error's position (``LINE n:``, counted within the statement) with a caret under the
    column -- or, when the error has no position, where the statement starts and its first line."""
    lines = stmt.text.splitlines() or [""]
    at = None if exc.line is None else exc.line - stmt.line
    if at is not None and 0 <= at < len(lines):
        column = exc.column - (stmt.column - 1 if at == 0 else 0)
        text = printable(lines[at], single_line=True)
        prefix = f"LINE {at + 1}: "
        caret = " " * (len(prefix) + len(printable(lines[at][:max(column - 1, 0)], single_line=True))) + "^"
        return printable(f"ERROR: {type(exc).__name__}: {exc}") + f"\n{prefix}{text}\n{caret}"
    where = "" if exc.line is not None else f" (statement at line {stmt.line}, column {stmt.column})"
    more = " ..." if len(lines) > 1 else ""
    return printable(f"ERROR: {type(exc).__name__}: {exc}{where}\nSTATEMENT: {lines[0]}{more}")


def run_shell(args) -> int:
    with _connect(args) as conn:
        shell = Shell(conn, timing=args.timing, stop_on_error=args.on_error_stop, fmt=args.format)
        if args.actions:   # -c / -f: run them in order, then exit (psql's way)
            for option, value in args.actions:
                if option == "-c" and value.lstrip().startswith("\\"):
                    shell.meta(value.strip())
                elif option == "-c":
                    shell.run_text(value, 1)
                else:
                    shell.include(value)
                if shell.done:
                    break
            shell.redirect("")
            return EXIT_SQL if shell.failures else EXIT_OK
        if sys.stdin.isatty():
            from cli.terminal import interactive
            interactive(shell, args.url)
        else:
            for number, raw in enumerate(sys.stdin.buffer, 1):
                line = _decode_line(raw, number)   # CommandError (exit 3) for bytes that are not UTF-8
                shell.feed(line.rstrip("\r\n") if line.endswith("\r\n") else line.rstrip("\n"))
                if shell.done:
                    break
            shell.finish()
            shell.redirect("")
            return EXIT_SQL if shell.failures else EXIT_OK
        shell.redirect("")
    return EXIT_OK


def _connect(args):
    """``sql.connect`` for the shell's options; a database that already has a writer is
    offered read-only on a terminal (module docstring)."""
    import sql
    from hummock.errors import ConcurrentWriterError

    interactive = sys.stdin.isatty()
    progress = _progress_bar() if interactive and sys.stderr.isatty() else None
    extra = {"progress": progress} if progress is not None else {}
    if getattr(args, "read_only", False):
        if getattr(args, "spark", None) is not None:
            raise CommandError("--read-only runs no stream graph: it does not take --spark")
        return sql.connect(args.url, read_only=True, **extra)
    try:
        return sql.connect(args.url, implicit_flush=args.implicit_flush, **runtime_options(args), **extra)
    except ConcurrentWriterError as exc:
        if not interactive:
            raise CommandError(f"{exc}; run with --read-only to query it beside its writer") from None
        print(printable(f"{exc}."), file=sys.stderr)
        answer = input("Open it read-only (queries see each newest committed epoch)? [Y/n] ").strip().lower()
        if answer not in ("", "y", "yes"):
            raise CommandError("not opened: the database has a writer") from None
        return sql.connect(args.url, read_only=True, **extra)


def _progress_bar():
    """A ``progress=`` callback drawing one rich progress bar per long statement, or None
    when rich is missing."""
    try:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:
        return None
    state = {}

    def show(p) -> None:
        bar = state.get("bar")
        if bar is None:
            if p.finished:
                return   # over before it needed a bar
            bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,.0f}/"
                           "{task.total:,.0f} rows" if p.total else "{task.completed:,.0f} rows"),
                           TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), transient=True,
                           console=None)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(printable(f"{p.kind} {p.relation}"), total=p.total,
                                                            rate="")
        bar.update(state["task"], completed=p.done, total=p.total, rate=f"{p.rate:,.0f} rows/s")
        if p.finished:
            bar.stop()
            state.clear()

    return show


def runtime_options(args) -> dict:
    """``sql.connect`` keywords for ``--spark MASTER`` (a session made here, its workers on this
    interpreter) or ``{}`` (the in-process runtime)."""
    if getattr(args, "spark", None) is None:
        return {}
    from sql.spark_pipeline.session import spark_session

    return {"runtime": "spark", "spark": spark_session(args.spark), "partitions": args.partitions}


def _decode_line(raw: bytes, number: int) -> str:
    """Line ``number`` of stdin as text (a BOM opening the first line dropped)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"<stdin> is not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {number}, column "
                           f"{exc.start + 1} ({exc.reason}); the statements before it ran") from None
    return line[1:] if number == 1 and line.startswith("\ufeff") else line
