"""How the shell (``hummock sql``) prints a result: psql's aligned table, its expanded layout
(``\\x``), CSV (``--csv``) or JSON (``--json``), every value spelled as Postgres' output
function spells it (what psql shows).

Job: :func:`render` takes a finished cursor and the statement text and returns the text to
print: the rows in the chosen format, or the command tag of a statement without rows.
Values: :func:`cell_texts` turns each result column into Postgres' text through
:func:`sql.copy.text_column` (the same text ``COPY ... TO`` writes and psql displays:
``NaN``/``Infinity``, ``-0``, the shortest float that reads back, REAL at its own precision,
``01:02:03.5``, ``2024-01-02 03:04:05+00``, ``1 day 02:03:04``, ``t``/``f``, ``\\x``-hex BYTEA);
NULL is empty in the table layouts and CSV, ``null`` in JSON.

Invariants: aligned and expanded output pass every cell and header through
:func:`cli.common.printable` (control characters shown as escapes, never sent to the
terminal); CSV and JSON carry the text as it is (quoted / JSON-escaped: machine formats).
Numbers (integers, floats, NUMERIC) are right-aligned, as psql does.

Callers: :mod:`cli.shell`.
"""

from __future__ import annotations

import csv
import io
import json

from relational.types import TypeKind

from cli.common import printable
from cli.script import command_tag

FORMATS = ("aligned", "csv", "json")
_NUMBERS = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.REAL, TypeKind.DOUBLE, TypeKind.DECIMAL}
_JSON_NUMBERS = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT}


def cell_texts(table, types) -> list:
    """Each column of the Arrow ``table`` (of SQL ``types``) as a list of Postgres' text of
    its values (None for NULL)."""
    from relational.arrow import to_pylist
    from sql.copy import text_column

    out = []
    for column, dtype in zip(table.columns, types):
        if dtype.kind == TypeKind.LIST:   # Postgres' array_out: {1,2,NULL} (stream/expr_array.py)
            from stream.expr_array import array_text
            out.append(array_text(column, dtype))
            continue
        if dtype.kind == TypeKind.STRUCT:   # no COPY text form: Python's
            out.append([None if v is None else str(v) for v in to_pylist(column, dtype)])
            continue
        texts = text_column(column, dtype)
        out.append([None if v is None else str(v) for v in texts.to_pylist()])
    return out


def render(cursor, text: str, fmt: str = "aligned", expanded: bool = False) -> str:
    """What the shell prints for a finished statement (module docstring)."""
    if cursor.description is None:
        return command_tag(text, cursor.rowcount)
    names = [d[0] for d in cursor.description]
    types = cursor.result_types
    columns = cell_texts(cursor.fetch_arrow(), types)
    rows = [list(r) for r in zip(*columns)] if columns else []
    if fmt == "csv":
        return _csv(names, rows)
    if fmt == "json":
        return _json(names, rows, types)
    right = [t.kind in _NUMBERS for t in types]
    return expanded_table(names, rows) if expanded else aligned_table(names, rows, right)


def aligned_table(names, rows, right) -> str:
    """psql's aligned layout of text cells (None: NULL): header, rule, rows, ``(N rows)``."""
    cells = [["" if v is None else printable(v, single_line=True) for v in row] for row in rows]
    names = [printable(str(n), single_line=True) for n in names]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    lines = [" " + " | ".join(n.center(w) for n, w in zip(names, widths)).rstrip(),
             "-" + "-+-".join("-" * w for w in widths) + "-"]
    for r in cells:
        lines.append((" " + " | ".join(v.rjust(w) if rj else v.ljust(w)
                                       for v, w, rj in zip(r, widths, right))).rstrip())
    n = len(rows)
    lines.append(f"({n} row{'' if n == 1 else 's'})")
    return "\n".join(lines)


def expanded_table(names, rows) -> str:
    """psql's expanded layout (``\\x``): one ``-[ RECORD n ]`` block per row, a line per column."""
    if not rows:
        return "(0 rows)"
    names = [printable(str(n), single_line=True) for n in names]
    width = max(len(n) for n in names)
    cells = [["" if v is None else printable(v, single_line=True) for v in row] for row in rows]
    value_width = max((len(v) for r in cells for v in r), default=0)
    lines = []
    for i, r in enumerate(cells, 1):
        head = f"-[ RECORD {i} ]"
        lines.append(head + "-" * max(0, width + 3 + value_width - len(head)))
        lines.extend((f"{n.ljust(width)} | {v}").rstrip() for n, v in zip(names, r))
    return "\n".join(lines)


def _csv(names, rows) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue().rstrip("\n")


def _json(names, rows, types) -> str:
    """A JSON array with one object per row; integers as JSON numbers, everything else as its
    Postgres text (floats too: NaN and Infinity are not JSON), NULL as null."""
    objects = []
    for row in rows:
        obj = {}
        for n, v, t in zip(names, row, types):
            obj[n] = int(v) if v is not None and t.kind in _JSON_NUMBERS else v
        objects.append(json.dumps(obj, ensure_ascii=False))
    return "[" + ",\n".join(objects) + "]"
