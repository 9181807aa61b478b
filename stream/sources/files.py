"""The ``posix_fs`` connector: a directory of CSV, Parquet or JSON-lines files, each file once.

Options (RisingWave's ``posix_fs`` names): ``posix_fs.root`` (the directory, required),
``match_pattern`` (a glob on file names, ``*`` by default), ``encode`` = ``csv`` | ``parquet`` |
``json`` (required; CSV files have a header row, JSON files one object per line), and
``posix_fs.files.per.barrier`` (16). Columns are read by name and cast to the declared types (a
column missing from a file is NULL, as is an unquoted empty CSV field; a value that does not cast
fails the graph, naming the file).

Exactly once (docs/format.md "Connector offsets"): the state table ``(file VARCHAR, rows
BIGINT)``, pk ``file``, has one row per file read (its name relative to the root and its row
count) and a row ``('', n)`` counting every row emitted so far. Before each barrier
:class:`FileSource` lists the directory, reads up to ``files.per.barrier`` files it has no row
for (in name order), emits their rows and writes their rows in the same epoch -- a file appears
in the state exactly when its rows are committed, so a restart reads each file once. New files
are picked up at the next barrier; a file must be complete when it appears (write it elsewhere
and rename it in). The hidden ``_row_id`` is the running row count.

Callers: :mod:`stream.sources.connector` (``make_connector``), :mod:`sql.source`.
"""

from __future__ import annotations

import fnmatch
import os

import numpy as np
import pyarrow as pa

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.chunk import INSERT, StreamChunk
from stream.executor import UnaryExecutor
from stream.message import Pause, Resume

FILE_STATE_COLUMNS = (("file", DataType.VARCHAR), ("rows", DataType.BIGINT))
FILES_KEYS = ("posix_fs.root", "match_pattern", "encode", "posix_fs.files.per.barrier")
ENCODES = ("csv", "parquet", "json")


class PosixFs:
    """The ``posix_fs`` connector's options and reader (module docstring)."""

    state_columns = FILE_STATE_COLUMNS

    def __init__(self, options: dict, columns, row_id_index: int | None):
        from stream.sources.connector import ConnectorError, _int_option, _refuse_unknown
        _refuse_unknown(options, FILES_KEYS)
        self.root = options.get("posix_fs.root")
        if not self.root:
            raise ConnectorError("connector 'posix_fs' needs option posix_fs.root (the directory)", "option")
        self.encode = str(options.get("encode", "")).lower()
        if self.encode not in ENCODES:
            raise ConnectorError(f"option encode must be one of {', '.join(ENCODES)}, got {options.get('encode')!r}",
                                 "option")
        self.pattern = options.get("match_pattern", "*")
        self.per_barrier = _int_option(options, "posix_fs.files.per.barrier", 16, 1)
        self.columns, self.row_id_index = list(columns), row_id_index

    def new_files(self, seen) -> list:
        """Names (relative to the root) of files not in ``seen``, in name order, at most
        ``per_barrier``; a missing root is no file yet."""
        try:
            names = sorted(e.name for e in os.scandir(self.root) if e.is_file() and not e.name.startswith(".")
                           and fnmatch.fnmatch(e.name, self.pattern))
        except FileNotFoundError:
            return []
        return [n for n in names if n not in seen][:self.per_barrier]

    def read(self, name: str, first_row_id: int) -> list:
        """The columns of file ``name`` as Arrow arrays of the declared types (``_row_id`` from
        ``first_row_id``)."""
        from stream.errors import StreamError
        path = os.path.join(self.root, name)
        try:
            if self.encode == "parquet":
                import pyarrow.parquet as pq
                table = pq.read_table(path)
            elif self.encode == "csv":
                import pyarrow.csv as pcsv
                table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types={
                    n: arrow_type(t) for i, (n, t) in enumerate(self.columns) if i != self.row_id_index},
                    strings_can_be_null=True, quoted_strings_can_be_null=False))   # COPY's CSV: empty is NULL
            elif any(t.kind == TypeKind.JSONB for _, t in self.columns):   # any JSON value per row, not one schema
                from stream.jsonb_ingest import json_lines_table
                table = json_lines_table(path, self.columns)
            else:
                import pyarrow.json as pjson
                table = pjson.read_json(path)
            n = table.num_rows
            out = []
            for i, (col, dtype) in enumerate(self.columns):
                if i == self.row_id_index:
                    out.append(pa.array(np.arange(first_row_id, first_row_id + n, dtype=np.int64)))
                elif col in table.column_names and dtype.kind == TypeKind.JSONB:   # its normal text
                    from stream.jsonb_ingest import jsonb_column
                    out.append(jsonb_column(table.column(col)))
                elif col in table.column_names:
                    out.append(table.column(col).combine_chunks().cast(arrow_type(dtype)))
                else:
                    out.append(pa.nulls(n, arrow_type(dtype)))
            return out
        except (OSError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise StreamError(f"posix_fs source: file {path}: {exc}") from None   # ValueError: bad JSON of a JSONB


class FileSource(UnaryExecutor):
    """Emits the rows of new files before each barrier; the files read in ``state_table``
    (module docstring)."""

    def __init__(self, input, connector: PosixFs, state_table, identity: str | None = None):
        super().__init__(input, identity=identity or f"FileSource({connector.root})")
        self.connector, self.state_table = connector, state_table
        self.paused = False

    def state_tables(self) -> list:
        return [self.state_table]

    def on_init(self, barrier) -> None:
        self.seen = {row[0]: row[1] for row in self.state_table.iter_with_prefix()}
        self.counter_stored = "" in self.seen
        self.count = self.seen.pop("", 0)

    def on_chunk(self, chunk):
        return chunk

    def on_barrier(self, barrier):
        if isinstance(barrier.mutation, Pause) or self.paused:
            self.paused = not isinstance(barrier.mutation, Resume)
            return None
        out = []
        before = self.count
        for name in self.connector.new_files(self.seen):
            columns = self.connector.read(name, self.count)
            rows = len(columns[0]) if columns else 0
            self.state_table.insert((name, rows))
            self.seen[name] = rows
            self.count += rows
            if rows:
                out.append(StreamChunk(np.full(rows, INSERT, dtype=np.int8), columns, self.schema))
        if self.count != before:
            if self.counter_stored:
                self.state_table.update(("", before), ("", self.count))
            else:
                self.state_table.insert(("", self.count))
                self.counter_stored = True
        return out
