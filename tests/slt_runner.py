"""A small sqllogictest runner for tests/sql/*.slt (the format RisingWave and DuckDB use).

Job: parse an .slt file into records, run each against a DB-API-like connection (anything with
``execute(sql) -> cursor`` whose cursor has ``fetchall()``), compare, and report the first
mismatch as ``file:line``. With ``HUMMOCK_SLT_REWRITE=1`` (or ``rewrite=True``) query records
get their expected output rewritten from the actual results instead (golden habit, STYLE.md 13);
statement records are never rewritten -- a statement that does not do what it says still fails.

Record kinds (records are separated by blank lines; ``#`` lines are comments):

- ``statement ok`` -- the SQL must succeed.
- ``statement error <regex>`` -- the SQL must raise a ``hummock.HummockError`` (``sql.SqlError``
  is one) whose message matches ``re.search(regex)``; an empty regex accepts any such error.
  Any other exception (TypeError, RecursionError, ...) is a crash and propagates as itself.
- ``query <types> [rowsort|valuesort|nosort] [label]`` then the SQL, ``----``, the expected rows,
  one per line, values separated by single spaces. ``query error <regex>`` works like
  ``statement error``. ``<types>`` is one letter per column (I integer, T text, R real,
  B boolean, D decimal, ...); the column count is checked, the letters are documentation.

Value rendering (:func:`render_value`): NULL -> ``NULL``; bool -> ``t``/``f``; ``""`` ->
``(empty)``; floats rounded to 3 decimals with trailing zeros trimmed (``1.5``, ``0.333``,
``2``), ``Infinity``/``-Infinity``/``NaN``; Decimal in plain notation with trailing fractional
zeros trimmed (``1.50`` -> ``1.5``, as RisingWave prints numerics: the value, not a declared
scale); dates/times ISO with a space and fractional seconds trimmed; aware datetimes in UTC with
``+00:00``; bytes as Postgres hex ``\\x0a0b``; Interval as Postgres prints it
(``1 year 2 mons 3 days 04:05:06``).

Callers: tests/test_sql_slt.py (real connections), tests/test_slt_runner.py (a fake one).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import math
import os
import re
from pathlib import Path

from hummock import HummockError

SORT_MODES = ("nosort", "rowsort", "valuesort")


class SltError(AssertionError):
    """A record did not behave as the file says; the message starts with ``path:line``."""


class SltFormatError(ValueError):
    """The .slt file itself is malformed (unknown record header, query without ``----``...)."""


@dataclasses.dataclass
class Record:
    kind: str                    # "statement" or "query"
    line: int                    # 1-based line of the header
    sql: str
    expect_error: str | None     # regex (possibly "") when an error is expected, else None
    types: str = ""
    sort: str = "nosort"
    expected: list[str] = dataclasses.field(default_factory=list)
    # 0-based line span [start, end) of the expected rows in the file, for rewriting
    result_span: tuple[int, int] | None = None


def parse(text: str, path: str = "<slt>") -> list[Record]:
    """Split ``text`` into records. Raises SltFormatError naming ``path:line`` on bad syntax."""
    lines = text.split("\n")
    records: list[Record] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        header_line = i
        words = stripped.split()
        kind = words[0]
        if kind in ("halt",):
            break
        if kind not in ("statement", "query"):
            raise SltFormatError(f"{path}:{i + 1}: unknown record header {stripped!r}")
        i += 1
        sql_lines = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            if not lines[i].lstrip().startswith("#") or sql_lines:
                sql_lines.append(lines[i])
            i += 1
        if not sql_lines:
            raise SltFormatError(f"{path}:{header_line + 1}: record has no SQL")
        sql = "\n".join(sql_lines).strip()
        rec = Record(kind=kind, line=header_line + 1, sql=sql, expect_error=None)
        if len(words) >= 2 and words[1] == "error":
            rec.expect_error = stripped.split(None, 2)[2] if len(words) > 2 else ""
        elif kind == "statement":
            if len(words) != 2 or words[1] != "ok":
                raise SltFormatError(f"{path}:{header_line + 1}: expected 'statement ok' or "
                                     f"'statement error <regex>', got {stripped!r}")
        else:
            if len(words) < 2:
                raise SltFormatError(f"{path}:{header_line + 1}: query needs column types")
            rec.types = words[1]
            if len(words) >= 3:
                if words[2] not in SORT_MODES:
                    raise SltFormatError(f"{path}:{header_line + 1}: unknown sort mode {words[2]!r}")
                rec.sort = words[2]
        if kind == "query" and rec.expect_error is None:
            if i >= len(lines) or lines[i].strip() != "----":
                raise SltFormatError(f"{path}:{header_line + 1}: query without '----'")
            i += 1
            start = i
            while i < len(lines) and lines[i].strip():
                rec.expected.append(lines[i].rstrip())
                i += 1
            rec.result_span = (start, i)
        elif i < len(lines) and lines[i].strip() == "----":
            raise SltFormatError(f"{path}:{header_line + 1}: only a query without 'error' has '----'")
        records.append(rec)
    return records


def _trim_fraction(text: str) -> str:
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _render_time(t: datetime.time | datetime.datetime) -> str:
    base = f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if t.microsecond:
        base += f".{t.microsecond:06d}".rstrip("0")
    return base


def _render_interval(iv) -> str:
    parts = []
    years, months = divmod(abs(iv.months), 12)
    sign = "-" if iv.months < 0 else ""
    if years:
        parts.append(f"{sign}{years} year{'s' if years != 1 else ''}")
    if months:
        parts.append(f"{sign}{months} mon{'s' if months != 1 else ''}")
    if iv.days:
        parts.append(f"{iv.days} day{'s' if abs(iv.days) != 1 else ''}")
    if iv.usecs or not parts:
        usecs = abs(iv.usecs)
        secs, frac = divmod(usecs, 1_000_000)
        mins, s = divmod(secs, 60)
        h, m = divmod(mins, 60)
        text = f"{'-' if iv.usecs < 0 else ''}{h:02d}:{m:02d}:{s:02d}"
        if frac:
            text += f".{frac:06d}".rstrip("0")
        parts.append(text)
    return " ".join(parts)


def render_value(value) -> str:
    """One value as the .slt files spell it (see the module docstring)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return _trim_fraction(f"{value:.3f}")
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return "NaN"
        if value.is_infinite():
            return "Infinity" if value > 0 else "-Infinity"
        return _trim_fraction(format(value, "f"))
    if isinstance(value, str):
        return value if value else "(empty)"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, datetime.datetime):
        text = f"{value.date().isoformat()} {_render_time(value)}"
        if value.tzinfo is not None:
            offset = value.utcoffset()
            if offset:
                value = (value - offset).replace(tzinfo=datetime.timezone.utc)
                text = f"{value.date().isoformat()} {_render_time(value)}"
            text += "+00:00"
        return text
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, datetime.time):
        return _render_time(value)
    if all(hasattr(value, a) for a in ("months", "days", "usecs")):
        return _render_interval(value)
    raise TypeError(f"slt cannot render a {type(value).__name__}: {value!r}")


def render_rows(rows, sort: str) -> list[str]:
    """Rendered result lines for ``rows`` under the record's sort mode."""
    rendered = [[render_value(v) for v in row] for row in rows]
    if sort == "valuesort":
        return sorted(v for row in rendered for v in row)
    lines = [" ".join(row) for row in rendered]
    return sorted(lines) if sort == "rowsort" else lines


def _expected_lines(rec: Record) -> list[str]:
    if rec.sort == "valuesort":
        return sorted(v for line in rec.expected for v in line.split(" "))
    return sorted(rec.expected) if rec.sort == "rowsort" else list(rec.expected)


def _run_error(conn, rec: Record, where: str) -> None:
    try:
        cur = conn.execute(rec.sql)
        if rec.kind == "query":
            cur.fetchall()
    except HummockError as exc:
        if rec.expect_error and not re.search(rec.expect_error, str(exc)):
            raise SltError(f"{where}: error message {str(exc)!r} does not match "
                           f"/{rec.expect_error}/\n  sql: {rec.sql}") from exc
        return
    raise SltError(f"{where}: expected an error matching /{rec.expect_error}/, "
                   f"but the statement succeeded\n  sql: {rec.sql}")


def run_record(conn, rec: Record, path: str = "<slt>") -> list[str] | None:
    """Run one record; returns the actual rendered lines of a query, None for a statement."""
    where = f"{path}:{rec.line}"
    if rec.expect_error is not None:
        _run_error(conn, rec, where)
        return None
    try:
        cur = conn.execute(rec.sql)
        rows = cur.fetchall() if rec.kind == "query" else None
    except HummockError as exc:
        raise SltError(f"{where}: unexpected error {type(exc).__name__}: {exc}\n  sql: {rec.sql}") from exc
    if rows is None:
        return None
    rows = [tuple(r) for r in rows]
    if rows and any(len(r) != len(rec.types) for r in rows):
        raise SltError(f"{where}: query declares {len(rec.types)} columns ({rec.types}) but "
                       f"returned rows of {len(rows[0])}\n  sql: {rec.sql}")
    return render_rows(rows, rec.sort)


def run_text(conn, text: str, path: str = "<slt>", rewrite: bool | None = None) -> str:
    """Run every record of ``text``; returns the (possibly rewritten) file text.

    Without rewrite, the first mismatch raises SltError with ``path:line`` and a diff-like
    message. With rewrite, query results replace the expected rows and nothing is raised for
    result mismatches (statement failures still raise).
    """
    if rewrite is None:
        rewrite = os.environ.get("HUMMOCK_SLT_REWRITE", "") not in ("", "0")
    records = parse(text, path)
    lines = text.split("\n")
    replacements: list[tuple[tuple[int, int], list[str]]] = []
    for rec in records:
        actual = run_record(conn, rec, path)
        if actual is None:
            continue
        if rewrite:
            replacements.append((rec.result_span, actual))
            continue
        expected = _expected_lines(rec)
        if actual != expected:
            raise SltError(_mismatch(f"{path}:{rec.line}", rec, expected, actual))
    for (start, end), actual in reversed(replacements):
        lines[start:end] = actual
    return "\n".join(lines)


def _mismatch(where: str, rec: Record, expected: list[str], actual: list[str]) -> str:
    out = [f"{where}: query result mismatch ({rec.sort})", f"  sql: {rec.sql}", "  expected:"]
    out += [f"    {line}" for line in expected] or ["    (no rows)"]
    out.append("  actual:")
    out += [f"    {line}" for line in actual] or ["    (no rows)"]
    return "\n".join(out)


def run_file(conn, path: str | os.PathLike, rewrite: bool | None = None) -> None:
    """Run an .slt file; in rewrite mode write the new expected output back to it."""
    path = Path(path)
    text = path.read_text()
    if rewrite is None:
        rewrite = os.environ.get("HUMMOCK_SLT_REWRITE", "") not in ("", "0")
    new_text = run_text(conn, text, str(path), rewrite=rewrite)
    if rewrite and new_text != text:
        path.write_text(new_text)
