"""What every ``hummock`` subcommand shares: exit codes, error reporting, opening a store,
progress bars, and formatting of sizes, keys and epochs.

Progress bars (rich) go to stderr and only when stderr is a terminal, so piped output and
tests see plain text on stdout. Errors are one line on stderr: ``hummock: error: ...``, never a
traceback for a failure the user can cause (a missing or unreadable file, a store that is not
there, a value out of range): :class:`CommandError` carries its own exit code, any other
``OSError`` is exit code 3. Text that comes from stored data or from the user (values, names,
paths) goes through :func:`printable` before it reaches a terminal, so control characters
(``ESC[2J``, ``\r``) are shown as escapes, never interpreted.

Callers: the modules of this package (``cli/``) only.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import sys

from hummock import CorruptionError, HummockError, HummockStorage, StorageOptions
from hummock.key import EPOCH_SPILL_MASK, epoch_to_unix_ms
from hummock.object_store import open_object_store

EXIT_OK = 0
EXIT_CORRUPT = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_SQL = 4        # ``run`` / ``sql``: a SQL statement failed (the error names it and its position)


class CommandError(HummockError):
    """A command cannot go on, for a reason its message states completely (a script that cannot
    be read, a store that is not there); ``code`` is the exit code (docs/cli.md)."""

    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


def run_command(func, args) -> int:
    """Run a subcommand, turning the project's exceptions into a message and an exit code."""
    try:
        return func(args)
    except CorruptionError as exc:
        print(printable(f"hummock: corruption: {exc}"), file=sys.stderr)
        return EXIT_CORRUPT
    except CommandError as exc:
        print(printable(f"hummock: error: {exc}"), file=sys.stderr)
        return exc.code
    except HummockError as exc:
        print(printable(f"hummock: error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:   # the reader went away (``| head``): not an error of ours
        sys.stderr.close()
        return EXIT_OK
    except OSError as exc:    # a file or device the command uses failed: I/O, exit code 3
        print(printable(f"hummock: error: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("hummock: interrupted", file=sys.stderr)
        return 130


# --- opening stores ------------------------------------------------------------------------

def add_url_argument(parser) -> None:
    parser.add_argument("url", metavar="URL",
                        help="the store: a path, file:///path or s3://bucket/prefix?endpoint=...&region=... "
                             "(S3 credentials from the AWS environment)")


def open_read_only(url: str) -> HummockStorage:
    """Open ``url`` read-only: the store is never modified (its reader lease aside, which keeps
    the writer's vacuum off the version we read; docs/engine.md)."""
    return HummockStorage.open(url, StorageOptions(), read_only=True)


def open_objects(url: str):
    """The object store under ``url``, for raw reads (listing, whole objects); never created."""
    return open_object_store(url, create=False, **StorageOptions().s3_options())


# --- scripts -------------------------------------------------------------------------------

def decode_script(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a leading BOM dropped), else :class:`CommandError` naming where
    the first byte that is not UTF-8 is (line and column), exit code 3."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CommandError(f"{printable(name)} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, "
                           f"column {column} ({exc.reason})") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_script(path: str) -> str:
    """The SQL script at ``path`` (``-``: stdin) as text; a file that is missing, unreadable, a
    directory or not UTF-8 is a :class:`CommandError` (exit code 3), not a traceback."""
    if path == "-":
        return decode_script(sys.stdin.buffer.read(), "<stdin>")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CommandError(f"cannot read the script {printable(repr(path))}: {exc.strerror or exc}") from None
    return decode_script(data, f"the script {path!r}")


# --- progress --------------------------------------------------------------------------------

@contextlib.contextmanager
def progress(description: str, total: float | None, *, enabled: bool = True):
    """A progress bar on stderr (a terminal only); yields ``advance(amount)``."""
    if not enabled or not sys.stderr.isatty():
        yield lambda amount=1: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
               TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda amount=1: bar.advance(task, amount)


@contextlib.contextmanager
def status(message: str):
    """A spinner with elapsed time on stderr (a terminal only) around work without steps."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console
    with Console(stderr=True).status(message):
        yield


# --- formatting ------------------------------------------------------------------------------

def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def epoch_text(epoch: int) -> str:
    """``epoch`` with its wall-clock time (UTC, ms) and spill offset when set. An epoch whose
    time Python's datetime cannot hold (after 9999-12-31: a hostile or damaged store) or that is
    no epoch at all is shown as such, never an exception."""
    if epoch == 0:
        return "0"
    try:
        when = datetime.datetime.fromtimestamp(epoch_to_unix_ms(epoch) / 1000, datetime.timezone.utc)
    except (OverflowError, ValueError, OSError, TypeError):   # InvalidArgumentError is a ValueError
        return f"{epoch} (time out of range)"
    text = f"{epoch} ({when.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}Z"
    spill = epoch & EPOCH_SPILL_MASK
    return text + (f" +{spill})" if spill else ")")


# C0 and C1 controls, DEL, and the bidirectional overrides/isolates that reorder what a
# terminal shows (U+202A..U+202E, U+2066..U+2069); U+2028/U+2029 break lines.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_CELL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match) -> str:
    c = match.group(0)
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str, *, single_line: bool = False) -> str:
    """``text`` safe for a terminal: control characters (ESC, CR, BEL, ... and bidi overrides)
    as ``\\xNN``/``\\uNNNN`` escapes (``\\r``, ``\\t``, ``\\n`` by name); newlines and tabs are
    kept unless ``single_line`` (table cells, names). Lone surrogates become ``\\udcNN``."""
    if not isinstance(text, str):
        text = str(text)
    text = (_UNPRINTABLE_CELL if single_line else _UNPRINTABLE).sub(_escape, text)
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = "".join(f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def key_text(full_key: bytes, width: int = 24) -> str:
    """A full key as ``table:<id> <table key hex, cut to width> @<epoch>``."""
    table = int.from_bytes(full_key[:4], "big")
    table_key = full_key[4:-8].hex()
    if len(table_key) > width:
        table_key = table_key[:width] + ".."
    epoch = (2**64 - 1) - int.from_bytes(full_key[-8:], "big")
    return f"{table}:{table_key}@{epoch}"


def print_table(rows: list[dict], columns: list[str], out=None) -> None:
    """``rows`` as left-aligned columns with a header line."""
    out = out or sys.stdout
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip(), file=out)


def _cell(value) -> str:
    return "" if value is None else printable(str(value), single_line=True)


def print_json(obj, out=None) -> None:
    print(json.dumps(obj, sort_keys=True, default=str), file=out or sys.stdout)
