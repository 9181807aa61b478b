"""What ``hummock sql`` and ``hummock run`` share: cutting SQL text into statements, running one
with its position kept, and rendering results as aligned tables (psql's layout).

- :func:`split_statements` cuts a script at ``;`` outside quotes and comments (the parser's own
  scanner, so both agree) and gives each statement with its 1-based line and column.
- :func:`is_complete` says whether a buffer typed so far ends a statement (the shell's
  multi-line editing: a statement ends with ``;``).
- :func:`execute_at` runs one statement so that error positions are the script's, not the
  statement's (it is padded with the lines and columns before it).
- :func:`render_result` / :func:`render_table`: column headers, ``-+-`` rule, numbers right
  aligned, NULL empty, booleans ``t``/``f``, then ``(N rows)``; a statement without rows prints
  its command tag (``INSERT 0 3``, ``CREATE TABLE``). Cells and headers are stored data: their
  control characters are escaped (``\x1b``, ``\r``, ``\n``; :func:`cli.common.printable`),
  so a value can neither drive the terminal nor break the table's lines.

Invariant: nothing here prints; callers decide where text goes. Callers: :mod:`cli.shell`,
:mod:`cli.run`, tests.
"""

from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass

from cli.common import printable
from sql.parse import _only_comments, _scan


@dataclass(frozen=True)
class ScriptStatement:
    text: str      # the statement without its ';'
    line: int      # where it starts in the script (1-based)
    column: int


def _line_col(text: str, offset: int) -> tuple:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def split_statements(text: str) -> list:
    """Each non-empty statement of ``text`` (comments-only pieces skipped), in order."""
    cuts = [start for kind, start, _ in _scan(text) if kind == ";"]
    out, at = [], 0
    for cut in cuts + [len(text)]:
        body = text[at:cut]
        if body.strip() and not _only_comments(body):
            lead = len(body) - len(body.lstrip())
            line, column = _line_col(text, at + lead)
            out.append(ScriptStatement(body.strip(), line, column))
        at = cut + 1
    return out


def is_complete(buffer: str) -> bool:
    """True when ``buffer`` holds at least one statement and ends with ``;`` (then only blanks or
    comments): the shell runs it. Quotes and comments are respected."""
    cuts = [start for kind, start, _ in _scan(buffer) if kind == ";"]
    if not cuts:
        return False
    rest = buffer[cuts[-1] + 1:]
    if rest.strip() and not _only_comments(rest):
        return False
    return not _open_comment(rest)


def _open_comment(text: str) -> bool:
    """An unterminated ``/*`` in ``text`` (the scanner swallows it to the end)."""
    stripped = re.sub(r"--[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return "/*" in stripped


def execute_at(conn, stmt: ScriptStatement):
    """Run ``stmt`` on ``conn``; a ``SqlError``'s line/column refer to the script."""
    padded = "\n" * (stmt.line - 1) + " " * (stmt.column - 1) + stmt.text
    return conn.execute(padded)


# --- rendering -------------------------------------------------------------------------------------

_NUMERIC = (int, float, decimal.Decimal)


def cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    return printable(str(value), single_line=True)


def render_table(names, rows) -> str:
    """psql's aligned format: header, rule, rows, ``(N rows)``."""
    cells = [[cell_text(v) for v in row] for row in rows]
    names = [printable(str(n), single_line=True) for n in names]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    right = [bool(rows) and all(isinstance(r[i], _NUMERIC) and not isinstance(r[i], bool)
                                for r in rows if r[i] is not None) and any(r[i] is not None for r in rows)
             for i in range(len(names))]
    lines = [" " + " | ".join(n.center(w) for n, w in zip(names, widths)).rstrip(),
             "-" + "-+-".join("-" * w for w in widths) + "-"]
    for r in cells:
        parts = [v.rjust(w) if rj else v.ljust(w) for v, w, rj in zip(r, widths, right)]
        lines.append((" " + " | ".join(parts)).rstrip())
    n = len(rows)
    lines.append(f"({n} row{'' if n == 1 else 's'})")
    return "\n".join(lines)


def command_tag(text: str, rowcount: int) -> str:
    """The psql-style tag of a statement without rows: ``INSERT 0 3``, ``CREATE TABLE``, ``FLUSH``."""
    words = text.split(None, 4)
    verb = words[0].upper() if words else ""
    if verb == "INSERT":
        return f"INSERT 0 {max(rowcount, 0)}"
    if verb in ("UPDATE", "DELETE", "COPY"):
        return f"{verb} {max(rowcount, 0)}"
    if verb in ("CREATE", "DROP") and len(words) > 1:
        second = words[1].upper()
        if second == "MATERIALIZED" and len(words) > 2:
            return printable(f"{verb} MATERIALIZED {words[2].upper()}", single_line=True)
        return printable(f"{verb} {second}", single_line=True)
    return printable(verb, single_line=True)


def render_result(cursor, text: str) -> str:
    """A finished statement's output: its rows as a table, or its command tag."""
    if cursor.description is None:
        return command_tag(text, cursor.rowcount)
    names = [d[0] for d in cursor.description]
    return render_table(names, cursor.fetchall())
