"""What every ``hummock`` subcommand shares: exit codes, error reporting, opening a store,
progress bars, and formatting of sizes, keys and epochs.

Progress bars (rich) go to stderr and only when stderr is a terminal, so piped output and
tests see plain text on stdout. Errors are one line on stderr: ``hummock: error: ...``.

Callers: the ``sql/cli_*.py`` modules only.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import sys

from hummock import CorruptionError, HummockError, HummockStorage, StorageOptions
from hummock.key import EPOCH_SPILL_MASK, epoch_to_unix_ms
from hummock.object_store import open_object_store

EXIT_OK = 0
EXIT_CORRUPT = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_SQL = 4        # ``run`` / ``sql``: a SQL statement failed (the error names it and its position)


def run_command(func, args) -> int:
    """Run a subcommand, turning the project's exceptions into a message and an exit code."""
    try:
        return func(args)
    except CorruptionError as exc:
        print(f"hummock: corruption: {exc}", file=sys.stderr)
        return EXIT_CORRUPT
    except HummockError as exc:
        print(f"hummock: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:   # the reader went away (``| head``): not an error of ours
        sys.stderr.close()
        return EXIT_OK
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
    """``epoch`` with its wall-clock time (UTC, ms) and spill offset when set."""
    if epoch == 0:
        return "0"
    when = datetime.datetime.fromtimestamp(epoch_to_unix_ms(epoch) / 1000, datetime.timezone.utc)
    text = f"{epoch} ({when.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]}Z"
    spill = epoch & EPOCH_SPILL_MASK
    return text + (f" +{spill})" if spill else ")")


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
    return "" if value is None else str(value)


def print_json(obj, out=None) -> None:
    print(json.dumps(obj, sort_keys=True, default=str), file=out or sys.stdout)
