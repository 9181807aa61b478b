"""COPY: loading files into tables and writing tables or queries to files (docs/sql.md "COPY").

Job: ``COPY t [(cols)] FROM 'path' [WITH (...)]`` and ``COPY {t [(cols)] | (query)} TO 'path'
[WITH (...)]`` (parsed by :mod:`sql.parse`, ``kind == "copy"``), and the readers behind the
table functions ``read_csv`` / ``read_parquet`` (:func:`read_file`). Options: ``format``
(``csv``, ``text``, ``parquet``, ``json``; default from the file's extension, else ``text`` as
in Postgres), ``header`` (csv/text: the first line names the columns and is skipped on input),
``delimiter`` (csv ``,``, text tab), ``null`` (csv: the empty *unquoted* field, so ``""`` is an
empty string; text: ``\\N``), ``quote`` (csv, ``"``).

Reading: the file becomes Arrow columns of text (CSV/text by ``pyarrow.csv``: Postgres' CSV
rules -- quoted fields may hold delimiters, quotes doubled, newlines; NULL is the unquoted null
string), then each column is converted to its column's type: a vectorized Arrow cast where it
is exact, else value by value with Postgres' input rules (``sql.types.parse_text``). A value
that does not convert is an :class:`~sql.errors.ExecutionError` naming the line (or row) and
column, and nothing is written. Parquet columns are matched by name (else by position) and
cast; JSON is one object per line, keys naming columns.

Writing the rows: a table nothing reads (no MV, no subscription) whose conflict rule is
overwrite (or that has no primary key) and no watermark is loaded by building SSTs directly
(``Database.bulk_load``): the fast path. Otherwise the rows are written through the table's source like any INSERT
(``sql.bulk.insert_arrow``), so its MVs see them.

Writing files: the rows of the query run as a batch SELECT at the committed epoch; CSV/text
values are Postgres' output text (``t``/``f``, ``Infinity``, ``\\x`` hex for BYTEA, intervals as
Postgres prints them), so COPY TO then COPY FROM gives the same values; Parquet keeps the Arrow
types of ``relational.arrow`` (INTERVAL as its text: Parquet writers take no Arrow interval);
JSON writes numbers and booleans as JSON, the rest as text.

Callers: :mod:`sql.statements` (dispatch), the binder's table functions (:func:`read_file`).
"""

from __future__ import annotations

import glob as _glob
import json
import math
import os
import re
import time

import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type, to_arrow, to_pylist
from relational.types import DataType, TypeKind

from sql import types as T
from sql.errors import BindError, CatalogError, ExecutionError, UnsupportedError
from sql.source import kind_name, takes_inserts

FORMATS = ("csv", "text", "parquet", "json")
_EXTENSIONS = {".csv": "csv", ".tsv": "text", ".txt": "text", ".parquet": "parquet", ".pq": "parquet",
               ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_OPTIONS = ("format", "header", "delimiter", "null", "quote", "escape")
_TRUE, _FALSE = ("true", "on", "1", "t", "yes"), ("false", "off", "0", "f", "no")
# types whose Arrow cast from text is exact where it succeeds (else: value by value)
_CAST = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DOUBLE, TypeKind.DATE, TypeKind.TIMESTAMP)
# types the CSV reader parses itself (integers range-checked, doubles, ISO dates)
_PARSE = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DOUBLE, TypeKind.DATE)


class CopyOptions:
    """The checked ``WITH (...)`` options of one COPY or table function call."""

    def __init__(self, path: str, given: dict, where: str):
        unknown = sorted(set(given) - set(_OPTIONS))
        if unknown:
            raise BindError(f"{where}: unknown option(s) {unknown}; COPY takes {list(_OPTIONS)}")
        fmt = (given.get("format") or _EXTENSIONS.get(os.path.splitext(path)[1].lower(), "text")).lower()
        if fmt not in FORMATS:
            raise UnsupportedError(f"{where}: format {fmt!r} is not supported (one of {', '.join(FORMATS)})")
        self.format = fmt
        header = str(given.get("header", "false")).lower()
        if header not in _TRUE + _FALSE + ("match",):
            raise BindError(f"{where}: header must be true or false, got {given['header']!r}")
        self.header = header not in _FALSE
        self.delimiter = given.get("delimiter", "," if fmt == "csv" else "\t")
        self.null = given.get("null", "" if fmt == "csv" else "\\N")
        self.quote = given.get("quote", '"')
        for name, value in (("delimiter", self.delimiter), ("quote", self.quote)):
            if len(value) != 1:
                raise BindError(f"{where}: {name} must be a single one-byte character, got {value!r}")
        if fmt in ("parquet", "json") and any(k in given for k in ("delimiter", "null", "quote", "header")):
            raise BindError(f"{where}: delimiter, null, quote and header apply to csv and text only")


# --- reading ------------------------------------------------------------------------------------

def read_file(path: str, options: CopyOptions, names, types, where: str) -> pa.Table:
    """The rows of the file(s) ``path`` (a glob for parquet/csv table functions) as a table of
    columns ``names`` of Arrow types ``arrow_type(types)``; ExecutionError naming the line and
    column of a value that does not convert."""
    paths = sorted(_glob.glob(path)) if any(ch in path for ch in "*?[") else [path]
    if not paths:
        raise ExecutionError(f"{where}: no file matches {path!r}")
    parts = []
    for p in paths:
        if not os.path.isfile(p):
            raise ExecutionError(f"{where}: could not open file {p!r} for reading: no such file")
        reader = {"csv": _read_text, "text": _read_text, "parquet": _read_parquet, "json": _read_json}[options.format]
        parts.append(reader(p, options, names, types, where))
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def _read_text(path, options, names, types, where) -> pa.Table:
    import pyarrow.csv as csv

    csv_mode = options.format == "csv"
    if not csv_mode:
        with open(path, "rb") as f:
            raw = f.read()
        if b"\\" + options.delimiter.encode() in raw:   # escaped delimiters: split here, not by Arrow
            return _read_escaped_text(raw, options, names, types, where, path)
    read = csv.ReadOptions(column_names=list(names), skip_rows=1 if options.header else 0,
                           block_size=8 << 20)
    parse = csv.ParseOptions(delimiter=options.delimiter, quote_char=options.quote if csv_mode else False,
                             double_quote=csv_mode, escape_char=False, newlines_in_values=csv_mode)
    first_line = 2 if options.header else 1
    typed = {n: arrow_type(t) if t.kind in _PARSE else pa.string() for n, t in zip(names, types)}
    if csv_mode and any(t != pa.string() for t in typed.values()):
        try:   # numbers and dates parsed by the reader itself; any doubt: the text path below decides
            table = csv.read_csv(path, read_options=read, parse_options=parse, convert_options=csv.ConvertOptions(
                column_types=typed, null_values=[options.null], strings_can_be_null=True,
                quoted_strings_can_be_null=False))
            if any(t.kind == TypeKind.DOUBLE and pc.any(pc.or_(pc.is_inf(table.column(n)),
                                                              pc.equal(table.column(n), 0.0))).as_py()
                   for n, t in zip(names, types)):   # '1e400', '1e-400' (Postgres refuses) or 0: the text decides
                raise pa.ArrowInvalid("an infinite or zero double: read as text")
            return pa.table([_from_text(table.column(i), t, n, where, lambda r: f"line {r + first_line}")
                             if typed[n] == pa.string() else table.column(i)
                             for i, (n, t) in enumerate(zip(names, types))], names=list(names))
        except pa.ArrowInvalid:
            pass
    convert = csv.ConvertOptions(column_types={n: pa.string() for n in names}, null_values=[options.null],
                                 strings_can_be_null=True, quoted_strings_can_be_null=False)
    try:
        table = csv.read_csv(path, read_options=read, parse_options=parse, convert_options=convert)
    except pa.ArrowInvalid as exc:
        raise ExecutionError(f"{where}: {path}: {_arrow_message(exc)}") from None
    columns = [table.column(i) for i in range(len(names))]
    if not csv_mode:   # text: backslash escapes (the null marker \N was matched before)
        columns = [_unescape(c) for c in columns]
    return pa.table([_from_text(c, t, n, where, lambda r: f"line {r + first_line}")
                     for c, n, t in zip(columns, names, types)], names=list(names))


def _read_escaped_text(raw: bytes, options, names, types, where, path) -> pa.Table:
    """Postgres' text format split in Python (a value holds an escaped delimiter)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExecutionError(f"{where}: {path} is not UTF-8: {exc}") from None
    token = re.compile(r"\\.|" + re.escape(options.delimiter), re.S)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = 1 if options.header else 0
    columns = [[] for _ in names]
    for number, line in enumerate(lines[first:], first + 1):
        line = line[:-1] if line.endswith("\r") else line
        fields, at = [], 0
        for m in token.finditer(line):
            if m.group(0) == options.delimiter:
                fields.append(line[at:m.start()])
                at = m.end()
        fields.append(line[at:])
        if len(fields) != len(names):
            raise ExecutionError(f"{where}: {path}: line {number}: the row has the wrong number of columns "
                                 f"(expected {len(names)}, got {len(fields)})")
        for out, field in zip(columns, fields):
            out.append(None if field == options.null else field)
    arrays = [_unescape(pa.array(c, pa.string())) for c in columns]
    return pa.table([_from_text(a, t, n, where, lambda r: f"line {r + first + 1}")
                     for a, n, t in zip(arrays, names, types)], names=list(names))


_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(col):
    """Postgres' text-format escapes (``\\t``, ``\\n``, ``\\\\``, ...) in the values holding a backslash."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pc.any(pc.match_substring(col, "\\")).as_py():
        return col
    pattern = re.compile(r"\\(.)", re.S)
    fix = lambda v: pattern.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(1)), v)   # noqa: E731
    return pa.array([None if v is None else fix(v) if "\\" in v else v for v in col.to_pylist()], pa.string())


def _arrow_message(exc) -> str:
    text = str(exc).strip()
    if "Expected" in text and "columns, got" in text:   # a row of the wrong width
        return "the row has the wrong number of columns (" + text.split("\n")[0] + ")"
    return text.split("\n")[0]


def _read_parquet(path, options, names, types, where) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ExecutionError(f"{where}: {path} is not a readable Parquet file: {exc}") from None
    return _match_columns(table, names, types, where, lambda r: f"row {r + 1}")


def _read_json(path, options, names, types, where) -> pa.Table:
    values = {n: [] for n in names}
    wanted = set(names)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise ExecutionError(f"{where}: {path}, line {lineno}: not a JSON object: {exc}") from None
            if not isinstance(obj, dict):
                raise ExecutionError(f"{where}: {path}, line {lineno}: a JSON object expected")
            extra = sorted(set(obj) - wanted)
            if extra:
                raise ExecutionError(f"{where}: {path}, line {lineno}: key(s) {extra} name no column")
            for n in names:
                values[n].append(obj.get(n))
    columns = []
    for n, t in zip(names, types):
        out = []
        for row, v in enumerate(values[n]):
            try:
                out.append(_json_value(v, t))
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise ExecutionError(f"{where}: {path}, line {row + 1}, column {n}: cannot read {v!r:.60} as "
                                     f"{t.sql_name()}: {exc}") from None
        columns.append(to_arrow(out, t))
    return pa.table(columns, names=list(names))


def _json_value(v, dtype):
    if v is None:
        return None
    if dtype.kind == TypeKind.VARCHAR and not isinstance(v, str):
        raise TypeError("a JSON string expected")
    if isinstance(v, float) and dtype.kind == TypeKind.DECIMAL:
        v = repr(v)
    return T.coerce_value(v, dtype)


def _match_columns(table: pa.Table, names, types, where, locate) -> pa.Table:
    """``table``'s columns for ``names``: by name (case-insensitive) when all are there, else by
    position when the counts agree; each cast to its type."""
    lower = {c.lower(): i for i, c in enumerate(table.column_names)}
    if all(n.lower() in lower for n in names):
        picked = [table.column(lower[n.lower()]) for n in names]
    elif table.num_columns == len(names):
        picked = list(table.columns)
    else:
        raise ExecutionError(f"{where}: the file has columns {table.column_names}, expected {list(names)}")
    out = []
    for col, n, t in zip(picked, names, types):
        target = arrow_type(t)
        if col.type == target:
            out.append(col)
        elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            out.append(_from_text(col.cast(pa.string()), t, n, where, locate))
        else:
            out.append(_cast_typed(col, t, n, where, locate))
    return pa.table(out, names=list(names))


def _cast_typed(col, dtype, name, where, locate):
    if dtype.kind == TypeKind.DECIMAL and (pa.types.is_decimal(col.type) or pa.types.is_integer(col.type)):
        return pc.cast(col, pa.string())
    try:
        return pc.cast(col, arrow_type(dtype), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values = col.to_pylist()
    out = []
    for row, v in enumerate(values):
        try:
            out.append(T.coerce_value(v, dtype))
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ExecutionError(f"{where}: {locate(row)}, column {name}: cannot store {v!r:.60} as "
                                 f"{dtype.sql_name()}: {exc}") from None
    return to_arrow(out, dtype)


def _from_text(col, dtype: DataType, name: str, where: str, locate):
    """A text column as ``dtype`` (module docstring): a vectorized cast where exact, else value
    by value; ExecutionError naming ``locate(row)`` and the column of the first bad value."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    kind = dtype.kind
    if kind == TypeKind.VARCHAR:
        return col
    if kind == TypeKind.STRUCT:
        raise UnsupportedError(f"{where}: column {name} is {dtype.sql_name()}: composite types are read from "
                               f"parquet only")
    if kind in _CAST:
        try:
            out = pc.cast(col, arrow_type(dtype))
            if kind == TypeKind.DOUBLE:   # '1e400' and '1e-400' read as inf and 0: Postgres refuses them
                doubtful = pc.or_(pc.is_inf(out), pc.equal(out, 0.0))
                rows = pc.indices_nonzero(pc.fill_null(doubtful, False)).to_pylist()
                for row in rows:
                    _parse_one(col[row].as_py(), dtype, name, where, locate, row)
            return out
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass   # the rows decide: Postgres' spellings Arrow does not read, or a bad value
    elif kind == TypeKind.DECIMAL:
        from stream import decimal_ops
        try:
            return decimal_ops.stored_texts(col)
        except decimal_ops.RowError:
            pass
    values = col.to_pylist()
    out = [None] * len(values)
    for row, v in enumerate(values):
        if v is not None:
            out[row] = _parse_one(v, dtype, name, where, locate, row)
    try:
        return to_arrow(out, dtype)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ExecutionError(f"{where}: column {name}: {exc}") from None


def _parse_one(v: str, dtype, name, where, locate, row):
    """One text value as ``dtype`` by Postgres' input rules; ExecutionError naming row and column."""
    try:
        value = T.parse_text(v, dtype)
        return dtype.validate(value) if dtype.kind in T.INTEGERS else value
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ExecutionError(f"{where}: {locate(row)}, column {name}: invalid input for type "
                             f"{T.description_name(dtype)}: {v!r:.60} ({exc})") from None


# --- COPY FROM ------------------------------------------------------------------------------------

def copy_from(db, stmt, variables) -> int:
    """``COPY t [(cols)] FROM 'path'``: returns the rows loaded (module docstring)."""
    from sql.bulk import insert_arrow

    opts = stmt.options
    name = opts["table"][-1]
    where = f"COPY {name}"
    rel = db.catalog.get(name)
    if rel is None:
        raise CatalogError(f"relation {name!r} does not exist", stmt.line, stmt.column)
    if not takes_inserts(rel):
        raise BindError(f"cannot copy to {kind_name(rel)} {name!r}", stmt.line, stmt.column)
    visible = rel.visible_columns
    cols = opts["columns"] or [n for n, _ in visible]
    vis = dict(visible)
    for i, c in enumerate(cols):
        if c not in vis:
            raise BindError(f"column {c!r} of relation {name!r} does not exist", stmt.line, stmt.column)
        if c in cols[:i]:
            raise BindError(f"column {c!r} specified more than once", stmt.line, stmt.column)
    options = CopyOptions(opts["path"], opts["with"], where)
    progress = Progress.start(db, "COPY", name)
    table = read_file(opts["path"], options, cols, [vis[c] for c in cols], where)
    n = table.num_rows
    defaulted = [i for i, (c, _) in enumerate(visible) if c not in cols and rel.default_of(i) is not None]
    if defaulted and table.num_rows:   # columns left out of the list take their DEFAULT (sql/defaults.py)
        from sql.defaults import default_columns
        values = default_columns(rel, defaulted, table.num_rows)
        for i in defaulted:
            c, t = visible[i]
            table = table.append_column(c, to_arrow(values[i], t))
        cols = cols + [visible[i][0] for i in defaulted]
    if rel.user_pk:   # a pk column is NOT NULL
        from sql.column_checks import not_null_error
        for i in rel.pk_indices:
            pk = visible[i][0]
            if pk not in cols:
                if not n:   # Postgres refuses a row, not the column list: nothing to copy is fine
                    continue
                raise ExecutionError(f"{where}: {not_null_error(rel, pk)}")
            column = table.column(pk)
            if column.null_count:
                row = pc.index(pc.is_null(column), True).as_py()
                raise ExecutionError(f"{where}: row {row + 1}: {not_null_error(rel, pk)}")
    from sql.column_checks import check_table
    table = check_table(rel, table, f"{where}: ")   # NUMERIC(p, s) and NOT NULL, before anything is written
    if n == 0:
        progress.finish(0, 0)
        return 0
    progress.total = n
    fast = (rel.kind == "table" and not db.catalog.dependents(rel.name) and not db.catalog.subscriptions_of(rel.name)
            and db.runtime == "in_process" and (rel.conflict == "overwrite" or rel.row_id)
            and getattr(rel, "watermark", None) is None)   # a watermark drops late rows: through the graph
    if fast:
        full = pa.table([table.column(c) if c in cols else pa.nulls(n, arrow_type(t)) for c, t in visible],
                        names=[c for c, _ in visible])
        db.bulk_load(rel, full)
        if variables.get("rw_implicit_flush") == "true":
            db.flush()
        progress.finish(n, n)
        return n
    done = 0
    step = max(65536, n // 100)
    for at in range(0, n, step):   # the dataflow path: one statement per slice, progress between
        part = table.slice(at, step)
        done += insert_arrow(db, rel.name, part, variables)
        progress.update(done)
    progress.finish(done, n)
    return n


# --- COPY TO --------------------------------------------------------------------------------------

def copy_to(db, stmt, params, variables) -> int:
    """``COPY {t [(cols)] | (query)} TO 'path'``: returns the rows written."""
    from sqlglot import exp

    from sql.statements import _select

    opts = stmt.options
    if opts["query"] is not None:
        inner = opts["query"]
        if not isinstance(inner.ast, (exp.Select, exp.Union, exp.Except, exp.Intersect)):
            raise UnsupportedError("COPY (query) TO takes a SELECT", inner.line, inner.column)
        where, node = "COPY (query)", inner.ast
    else:
        name = opts["table"][-1]
        where = f"COPY {name}"
        rel = db.catalog.get(name)
        if rel is None:
            raise CatalogError(f"relation {name!r} does not exist", stmt.line, stmt.column)
        cols = opts["columns"] or [n for n, _ in rel.visible_columns]
        node = exp.select(*[exp.column(c, quoted=True) for c in cols]).from_(exp.table_(name, quoted=True))
        inner = stmt
    options = CopyOptions(opts["path"], opts["with"], where)
    result = _select(db, node, params, variables, inner)
    names = [n for n, _ in result.columns]
    types = [t for _, t in result.columns]
    table = result.table
    path = opts["path"]
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ExecutionError(f"{where}: could not open file {path!r} for writing: no directory {directory!r}")
    write_file(table, names, types, path, options, where)
    return table.num_rows


def write_file(table: pa.Table, names, types, path: str, options: CopyOptions, where: str) -> None:
    """Write the rows (module docstring, "Writing files"), through a temporary file renamed in
    place, so a failed COPY TO leaves no half file under ``path``."""
    tmp = f"{path}.tmp-{os.getpid()}-{time.monotonic_ns()}"
    try:
        if options.format == "parquet":
            import pyarrow.parquet as pq
            columns = [text_column(c, t, where) if t.kind == TypeKind.INTERVAL else c   # Parquet has no
                       for c, t in zip(table.columns, types)]                              # Arrow interval
            pq.write_table(pa.table(columns, names=list(names)), tmp)
        elif options.format == "json":
            _write_json(table, names, types, tmp)
        else:
            _write_text(table, names, types, tmp, options, where)
        os.replace(tmp, path)
    except OSError as exc:
        raise ExecutionError(f"{where}: could not write {path!r}: {exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _write_text(table, names, types, path, options, where) -> None:
    import pyarrow.csv as csv

    escape = options.format == "text" and (options.delimiter if options.delimiter not in "\t\n\r\\" else True)
    columns = [text_column(c, t, where, escape=escape) for c, t in zip(table.columns, types)]
    out = pa.table(columns, names=[str(n) for n in names]) if columns else pa.table({})
    if options.format == "csv":
        write = csv.WriteOptions(include_header=options.header, delimiter=options.delimiter,
                                 null_string=options.null, quoting_style="needed")
        csv.write_csv(out, path, write)
        return
    with open(path, "w", encoding="utf-8", newline="") as f:   # text: no quoting, backslash escapes
        if options.header:
            f.write(options.delimiter.join(names) + "\n")
        rows = zip(*[c.to_pylist() for c in columns]) if columns else ()
        null = options.null
        for row in rows:
            f.write(options.delimiter.join(null if v is None else str(v) for v in row) + "\n")


_TEXT_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def text_column(col, dtype: DataType, where: str = "COPY", escape=False):
    """Postgres' output text of an Arrow column of ``dtype`` (module docstring); ``escape``
    (text format): ``True`` for the backslash escapes, or the delimiter to escape as well."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    kind = dtype.kind
    if kind == TypeKind.STRUCT:
        raise UnsupportedError(f"{where}: {dtype.sql_name()} columns are written to parquet or json only")
    if kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
        return col   # written as numbers (unquoted)
    if kind == TypeKind.DATE:
        out = pc.cast(col, pa.string())
    elif kind in (TypeKind.VARCHAR, TypeKind.DECIMAL):
        out = col.cast(pa.string())
    elif kind == TypeKind.BOOLEAN:
        out = pc.if_else(col, "t", "f")
    elif kind == TypeKind.LIST:   # Postgres' array_out: {1,2,NULL} (stream/expr_array.py)
        from stream.expr_array import array_text
        out = pa.array(array_text(col, dtype), pa.string())
    elif kind in (TypeKind.REAL, TypeKind.DOUBLE):   # shortest round-trip text, Postgres' spellings
        out = pc.cast(col, pa.string())
        for arrow_text, pg in (("inf", "Infinity"), ("-inf", "-Infinity"), ("nan", "NaN")):
            out = pc.if_else(pc.equal(out, arrow_text), pg, out)
    elif kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ) and _plain_years(col):
        out = pc.cast(col.cast(pa.timestamp("us")), pa.string())   # 2020-01-02 03:04:05.500000
        out = pc.replace_substring_regex(out, r"\.?0+$|(\.\d*?)0+$", r"\1")
        if kind == TypeKind.TIMESTAMPTZ:
            out = pc.binary_join_element_wise(out, "+00", "")
    else:
        out = pa.array([None if v is None else _text(v, kind) for v in to_pylist(col, dtype)], pa.string())
    if escape and pa.types.is_string(out.type):   # text format: backslash escapes, the delimiter too
        table = _TEXT_ESCAPES if escape is True else {**_TEXT_ESCAPES, ord(escape): "\\" + escape}
        out = pa.array([None if v is None else v.translate(table) for v in out.to_pylist()], pa.string())
    return out


def _plain_years(col) -> bool:
    """Whether every timestamp of ``col`` falls in years 1..9999 (Arrow's text is then ISO)."""
    lo, hi = pc.min_max(col.cast(pa.timestamp("us")).cast(pa.int64())).values()
    return lo.as_py() is None or (-62135596800_000_000 <= lo.as_py() and hi.as_py() < 253402300800_000_000)


def _text(v, kind) -> str:
    if kind in (TypeKind.REAL, TypeKind.DOUBLE):
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        if math.isnan(v):
            return "NaN"
        return repr(v) if kind == TypeKind.DOUBLE else _real_text(v)
    if kind == TypeKind.BYTEA:
        return "\\x" + v.hex()
    if kind == TypeKind.INTERVAL:
        return T.format_interval(v)
    if kind == TypeKind.TIMESTAMPTZ:
        return _FRACTION_ZEROS.sub(r"\1", v.isoformat(sep=" ")).replace("+00:00", "+00")
    if kind in (TypeKind.TIMESTAMP, TypeKind.TIME):   # Postgres: 01:02:03.5, no trailing zeros
        return _FRACTION_ZEROS.sub(r"\1", v.isoformat(sep=" ") if kind == TypeKind.TIMESTAMP else v.isoformat())
    return str(v)


_FRACTION_ZEROS = re.compile(r"(?:\.0+|(\.\d*?)0+)(?=$|[+-]\d\d:\d\d$)")   # .500000 -> .5, .000000 -> ""


def _real_text(v: float) -> str:
    """The shortest text that reads back as the same REAL (float32)."""
    import numpy as np
    return str(np.float32(v))


def _write_json(table, names, types, path) -> None:
    cols = [to_pylist(c, t) for c, t in zip(table.columns, types)]
    with open(path, "w", encoding="utf-8") as f:
        for row in zip(*cols) if cols else ():
            f.write(json.dumps({n: _json_out(v, t) for n, v, t in zip(names, row, types)}) + "\n")


def _json_out(v, dtype):
    if v is None:
        return None
    kind = dtype.kind
    if kind in (TypeKind.BOOLEAN, TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.VARCHAR):
        return v
    if kind in (TypeKind.REAL, TypeKind.DOUBLE) and math.isfinite(v):
        return v if kind == TypeKind.DOUBLE else float(_real_text(v))
    if kind == TypeKind.DECIMAL:
        return str(v)
    if kind == TypeKind.STRUCT:
        return {f: _json_out(x, t) for (f, t), x in zip(dtype.fields, v)}
    if kind == TypeKind.LIST:
        return [_json_out(x, dtype.elem) for x in v]
    return _text(v, kind)


# --- progress -------------------------------------------------------------------------------------

class Progress:
    """One long statement's progress (``connect(..., progress=callback)``): ``callback(self)``
    with ``kind`` (``"COPY"``, ``"BACKFILL"``), ``relation``, ``done`` rows, ``total`` (None
    when unknown), ``rate`` (rows/s since the start), ``finished``. ``done`` never decreases."""

    __slots__ = ("kind", "relation", "done", "total", "started", "finished", "_callback")

    def __init__(self, kind: str, relation: str, callback):
        self.kind, self.relation, self._callback = kind, relation, callback
        self.done, self.total, self.finished = 0, None, False
        self.started = time.monotonic()

    @classmethod
    def start(cls, db, kind: str, relation: str) -> "Progress":
        p = cls(kind, relation, getattr(db, "progress", None))
        p._call()
        return p

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def update(self, done: int) -> None:
        self.done = max(self.done, done)
        self._call()

    def finish(self, done: int, total: int) -> None:
        self.total = total if self.total is None else self.total
        self.done = max(self.done, done)
        self.finished = True
        self._call()

    def _call(self) -> None:
        if self._callback is not None:
            self._callback(self)

    def __repr__(self) -> str:
        return (f"Progress({self.kind} {self.relation}: {self.done}/{self.total if self.total is not None else '?'} "
                f"rows, {self.rate:,.0f} rows/s{', finished' if self.finished else ''})")


# --- table functions ------------------------------------------------------------------------------

def table_function(node, batch: bool):
    """The rows of ``read_parquet('glob')`` or ``read_csv('path' [, header => bool] [, delim =>
    'c'] [, nullstr => 's'])`` in a FROM clause, as a :class:`~sql.plan.nodes.Values` plan: the
    file is read when the query is bound, columns named as in the file (lowercased) and typed
    from it (Parquet's schema; CSV: Arrow's inference -- integers BIGINT, decimals DOUBLE,
    ISO dates DATE, timestamps TIMESTAMP, the rest VARCHAR). Batch queries only (an MV cannot
    follow a file)."""
    from sqlglot import exp

    from sql.plan import nodes as P

    name = "read_parquet" if isinstance(node, exp.ReadParquet) else "read_csv"
    if not batch:
        raise UnsupportedError(f"{name}() reads a file once, in a batch query (SELECT, INSERT ... SELECT, CREATE "
                               f"TABLE AS); a materialized view cannot read it")
    args = ([node.this] if node.this is not None else []) + list(node.expressions)
    positional = [a for a in args if not isinstance(a, exp.Kwarg)]
    named = {a.this.name.lower(): a.expression for a in args if isinstance(a, exp.Kwarg)}
    if len(positional) != 1 or not isinstance(positional[0], exp.Literal) or not positional[0].is_string:
        raise BindError(f"{name}() takes the file path as one string literal")
    path = positional[0].this
    allowed = {"read_csv": ("header", "delim", "delimiter", "nullstr", "null"), "read_parquet": ()}[name]
    unknown = sorted(set(named) - set(allowed))
    if unknown:
        raise BindError(f"{name}() has no parameter(s) {unknown}" + (f"; it takes {list(allowed)}" if allowed else ""))
    where = f"{name}({path!r})"
    paths = sorted(_glob.glob(path)) if any(ch in path for ch in "*?[") else [path]
    if not paths or not all(os.path.isfile(p) for p in paths):
        raise ExecutionError(f"{where}: no such file" if paths else f"{where}: no file matches")
    try:
        if name == "read_parquet":
            import pyarrow.parquet as pq
            table = pa.concat_tables([pq.read_table(p) for p in paths], promote_options="permissive")
        else:
            import pyarrow.csv as csv
            header = _kwarg_bool(named.get("header"), True, where)
            delim = _kwarg_text(named.get("delim", named.get("delimiter")), ",", where)
            null = _kwarg_text(named.get("nullstr", named.get("null")), "", where)
            parts = []
            for p in paths:
                read = csv.ReadOptions(autogenerate_column_names=not header)
                parts.append(csv.read_csv(p, read_options=read, parse_options=csv.ParseOptions(delimiter=delim),
                                          convert_options=csv.ConvertOptions(
                                              null_values=[null], strings_can_be_null=True,
                                              quoted_strings_can_be_null=False)))
            table = pa.concat_tables(parts, promote_options="permissive")
    except (pa.ArrowInvalid, OSError) as exc:
        raise ExecutionError(f"{where}: {_arrow_message(exc)}") from None
    names = [c.lower() for c in table.column_names]
    types = [_sql_type(f.type, f.name, where) for f in table.schema]
    arrays = [_cast_typed(c, t, n, where, lambda r: f"row {r + 1}") for c, n, t in zip(table.columns, names, types)]
    if arrays and all(t.kind in _ARROW_AS_IS and a.type == arrow_type(t) for a, t in zip(arrays, types)):
        # the batch engine's own column form: handed over as it is
        plan = P.Values([], names, types)
        plan.arrow = pa.table([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                              names=[f"c{i}" for i in range(len(arrays))])
        plan.rows = _ArrowRows(plan.arrow, types)
    else:
        columns = [to_pylist(a, t) for a, t in zip(arrays, types)]
        plan = P.Values(list(zip(*columns)) if columns else [], names, types)
    plan.function = name
    return plan


# Column types whose Arrow form from _cast_typed is the one batch plans carry (relational.arrow):
# a table function's Values hands those columns over as they are (``plan.arrow``).
_ARROW_AS_IS = {TypeKind.BOOLEAN, TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.REAL, TypeKind.DOUBLE,
                TypeKind.VARCHAR, TypeKind.BYTEA, TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP,
                TypeKind.TIMESTAMPTZ}


class _ArrowRows:
    """The rows of an Arrow-backed Values (``plan.arrow``) as tuples, made only when a row path
    asks (``len`` costs nothing)."""

    def __init__(self, table: pa.Table, types):
        self._table, self._types, self._rows = table, types, None

    def _all(self) -> list:
        if self._rows is None:
            cols = [to_pylist(c, t) for c, t in zip(self._table.columns, self._types)]
            self._rows = list(zip(*cols)) if cols else []
        return self._rows

    def __len__(self) -> int:
        return self._table.num_rows

    def __iter__(self):
        return iter(self._all())

    def __getitem__(self, i):
        return self._all()[i]


def _kwarg_bool(node, default: bool, where: str) -> bool:
    if node is None:
        return default
    text = node.sql().strip("'").lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise BindError(f"{where}: header must be true or false, got {node.sql()}")


def _kwarg_text(node, default: str, where: str) -> str:
    from sqlglot import exp
    if node is None:
        return default
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise BindError(f"{where}: a string literal expected, got {node.sql()}")
    return node.this


def _sql_type(atype, name: str, where: str) -> DataType:
    """The SQL type a file column of Arrow type ``atype`` becomes."""
    t = pa.types
    if t.is_boolean(atype):
        return DataType.BOOLEAN
    if t.is_int8(atype) or t.is_int16(atype) or t.is_uint8(atype):
        return DataType.SMALLINT
    if t.is_int32(atype) or t.is_uint16(atype):
        return DataType.INT
    if t.is_integer(atype):
        return DataType.BIGINT
    if t.is_float16(atype) or t.is_float32(atype):
        return DataType.REAL
    if t.is_float64(atype):
        return DataType.DOUBLE
    if t.is_decimal(atype):
        return DataType.DECIMAL
    if t.is_string(atype) or t.is_large_string(atype) or t.is_null(atype):
        return DataType.VARCHAR
    if t.is_binary(atype) or t.is_large_binary(atype) or t.is_fixed_size_binary(atype):
        return DataType.BYTEA
    if t.is_date(atype):
        return DataType.DATE
    if t.is_time(atype):
        return DataType.TIME
    if t.is_timestamp(atype):
        return DataType.TIMESTAMPTZ if atype.tz else DataType.TIMESTAMP
    if t.is_interval(atype):
        return DataType.INTERVAL
    raise UnsupportedError(f"{where}: column {name!r} has Arrow type {atype}, which no SQL type here holds")
