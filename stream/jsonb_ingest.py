"""JSON text arriving in Arrow columns or files for a JSONB column: normalised before it reaches a
table's stream, so every executor and every key sees one spelling of each value.

Job: :func:`normal_column` (a string column -> normal texts; ``insert_arrow``, COPY and INSERT ...
SELECT's Arrow path, sql/bulk.py), :func:`jsonb_column` (a source file's column: text, or
values a JSON reader parsed) and :func:`json_lines_table` (a ``json``-encoded file read line by
line when it feeds JSONB columns: Arrow's reader wants one type per column). Invalid JSON
raises :class:`relational.jsonb.JsonbSyntaxError` (a ``ValueError``) naming the row or line.

Callers: :mod:`sql.bulk`, :mod:`stream.sources.files`.
"""

from __future__ import annotations

import decimal

import pyarrow as pa

from relational import jsonb as J
from relational.types import TypeKind



def normal_column(column) -> pa.Array:
    """A string column of JSON texts as their normal texts (what a JSONB column stores); raises
    :class:`relational.jsonb.JsonbSyntaxError` naming the first row that is not JSON. For the
    bulk paths (insert_arrow, COPY) that hand Arrow columns straight to a table's stream."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    out = []
    for row, text in enumerate(column.to_pylist()):
        try:
            out.append(None if text is None else J.normalize(text))
        except J.JsonbSyntaxError as exc:
            raise J.JsonbSyntaxError(f"row {row + 1}: {exc}", exc.position) from None
    return pa.array(out, pa.string())


def jsonb_column(column) -> pa.Array:
    """A source file's column for a JSONB column: JSON text (normalised, :func:`normal_column`),
    or values a JSON reader already parsed (structs, lists, numbers: their JSON); raises
    :class:`relational.jsonb.JsonbSyntaxError` (a ``ValueError``) naming the row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return normal_column(column)
    out = []
    for row, value in enumerate(column.to_pylist()):
        try:
            out.append(None if value is None else J.to_text(J.from_python(value)))
        except (TypeError, ValueError) as exc:
            raise J.JsonbSyntaxError(f"row {row + 1}: {exc}") from None
    return pa.array(out, pa.string())


def json_lines_table(path: str, columns) -> pa.Table:
    """A file of one JSON object per line as an Arrow table of ``columns`` (``(name, DataType)``)
    whose JSONB columns hold each row's value as normal text, whatever its JSON type (Arrow's
    JSON reader wants one type per column; a missing key or JSON null is NULL, as for the other
    columns); numbers keep their digits. Other columns are
    strings, numbers and booleans for the caller's cast. Raises ``ValueError`` (bad JSON, a
    line that is not an object) naming the line."""
    import json as _json

    wanted = {name: dtype for name, dtype in columns}
    values = {name: [] for name in wanted}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = _json.loads(line, parse_float=decimal.Decimal)
            except ValueError as exc:
                raise ValueError(f"line {number}: {exc}") from None
            if not isinstance(obj, dict):
                raise ValueError(f"line {number}: not a JSON object")
            for name, dtype in wanted.items():
                v = obj.get(name)
                if dtype.kind == TypeKind.JSONB:
                    v = None if v is None else J.to_text(J.from_python(v))   # JSON null: NULL, as elsewhere
                elif isinstance(v, decimal.Decimal):
                    v = str(v) if dtype.kind == TypeKind.DECIMAL else float(v)
                values[name].append(v)
    return pa.table({name: pa.array(vs, pa.string() if wanted[name].kind in (TypeKind.JSONB, TypeKind.DECIMAL)
                                    else None) for name, vs in values.items()})
