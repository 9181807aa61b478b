"""Connectors: rows a relation gets from a generator, epoch by epoch, exactly once across restarts.

Two generating connectors, both deterministic functions of ``(options, row offset)`` -- never of the time or
of how the rows are cut into batches:

- ``datagen`` (RisingWave's options): per column ``fields.<col>.kind`` = ``sequence`` (``start``,
  ``end``: row ``i`` gets ``start + i``; the source ends after the shortest sequence) or
  ``random`` (the default; ``min``/``max`` for numbers, ``length`` for VARCHAR, ``seed``: row
  ``i`` gets a hash of ``(seed, column, i)``); ``datagen.rows.per.second`` rows per barrier (10;
  a rate at the default 1 s barrier interval) and ``datagen.rows.total`` (unbounded by default).
  Column types: SMALLINT, INT, BIGINT, REAL, DOUBLE, VARCHAR, BOOLEAN.
- ``nexmark``: ``nexmark.table.type`` = ``bid`` | ``auction`` | ``person`` (required): the rows of
  that kind among Nexmark events ``0, 1, ...`` (:mod:`stream.sources.nexmark`);
  ``nexmark.event.num`` (total events, unbounded by default), ``nexmark.events.per.second``
  (events per barrier, 1000), ``nexmark.seed`` (0). The relation's columns are any of that
  table's columns, by name, with Nexmark's types.

A third, ``posix_fs`` (a directory of files, each read once), has its own executor and state:
:mod:`stream.sources.files`. A fourth, ``push`` (:class:`Push`), generates nothing: a source
with it takes the rows its program pushes (INSERT, COPY FROM, ``Connection.insert_arrow``)
and stores none of them; it has no options, no offset and no executor (sql/source.py).

The offset is the connector's position: rows emitted (datagen) or events consumed (nexmark).
The hidden ``_row_id`` of a relation without a primary key is the row's ordinal (datagen) or
event number (nexmark), so it is deterministic too.

:class:`ConnectorSource` (an executor over the relation's table-source channel) emits, before
each barrier after the first, the rows ``[offset, offset + per barrier)`` (fewer at the end),
and writes the new offset into its one-row state table (``(id INT, offset BIGINT)``, pk ``id``,
the row ``(0, offset)``; docs/format.md "Connector offsets") in the same epoch: the rows and the
offset commit at the same checkpoint, so a restart resumes at the committed offset -- no row
twice, none lost. DML chunks on its channel (a table with a connector) pass through.

Errors: :class:`ConnectorError` (``what`` = ``"connector"`` for an unknown connector,
``"option"`` for an unknown or malformed option or a column the connector cannot fill); the SQL
layer turns it into UnsupportedError / BindError (sql/source.py).

Callers: :mod:`sql.source` (validation), :mod:`sql.build` (the executor).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hummock.errors import HummockError
from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.chunk import INSERT, StreamChunk
from stream.executor import UnaryExecutor
from stream.message import Pause

CONNECTORS = ("datagen", "nexmark", "posix_fs", "push")
OFFSET_COLUMNS = (("id", DataType.INT), ("offset", DataType.BIGINT))
_DATAGEN_FIELD_KEYS = ("kind", "start", "end", "min", "max", "length", "seed")
_DATAGEN_KEYS = ("datagen.rows.per.second", "datagen.rows.total")
_NEXMARK_KEYS = ("nexmark.table.type", "nexmark.event.num", "nexmark.events.per.second", "nexmark.seed")
_INTS = {TypeKind.SMALLINT: (-(1 << 15), (1 << 15) - 1), TypeKind.INT: (-(1 << 31), (1 << 31) - 1),
         TypeKind.BIGINT: (-(1 << 63), (1 << 63) - 1)}
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_U64 = np.uint64


class ConnectorError(HummockError):
    """A connector or option the connectors do not know (module docstring)."""

    def __init__(self, message: str, what: str):
        super().__init__(message)
        self.what = what


def _int_option(options: dict, key: str, default, low: int = 0):
    text = options.get(key)
    if text is None:
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConnectorError(f"option {key} must be an integer, got {text!r}", "option") from None
    if value < low:
        raise ConnectorError(f"option {key} must be >= {low}, got {value}", "option")
    return value


def _number_option(options: dict, key: str, default, floating: bool):
    text = options.get(key)
    if text is None:
        return default
    try:
        return float(text) if floating else int(str(text).strip())
    except ValueError:
        raise ConnectorError(f"option {key} must be a{' ' if floating else 'n integer '}number, got {text!r}",
                             "option") from None


def make_connector(options: dict, columns, row_id_index: int | None):
    """The connector ``options["connector"]`` names, for the relation's ``columns`` (every column,
    ``(name, DataType)``; ``row_id_index`` the hidden ``_row_id`` or None); ``ConnectorError``
    naming an unknown connector or option (and listing the known ones)."""
    name = str(options.get("connector", "")).lower()
    if name == "datagen":
        return Datagen(options, columns, row_id_index)
    if name == "nexmark":
        return Nexmark(options, columns, row_id_index)
    if name == "posix_fs":   # a directory of files (stream/sources/files.py)
        from stream.sources.files import PosixFs
        return PosixFs(options, columns, row_id_index)
    if name == "push":
        return Push(options)
    raise ConnectorError(f"connector {name!r} is not supported (supported: {', '.join(CONNECTORS)})", "connector")


def _refuse_unknown(options: dict, known) -> None:
    for key in options:
        if key != "connector" and key not in known:
            raise ConnectorError(f"option {key!r} is not an option of connector {options['connector']!r} "
                                 + (f"(known: {', '.join(sorted(known))})" if known else "(it takes none)"), "option")


def _hash_uniform(seed: int, salt: int, n: np.ndarray) -> np.ndarray:
    """Floats uniform in [0, 1), a pure function of ``(seed, salt, n)`` (splitmix64)."""
    from stream.sources.nexmark import _uniforms
    return _uniforms((seed * 1_000_003 + salt) % (1 << 64), n, 1)[0]


class Push:
    """The ``push`` connector: the rows come from DML, not from a generator (module docstring).
    Takes no option."""

    def __init__(self, options: dict):
        _refuse_unknown(options, ())


class Datagen:
    """The ``datagen`` connector (module docstring)."""

    def __init__(self, options: dict, columns, row_id_index: int | None):
        self.columns, self.row_id_index = list(columns), row_id_index
        names = [c for i, (c, _) in enumerate(self.columns) if i != row_id_index]
        known = set(_DATAGEN_KEYS) | {f"fields.{c}.{k}" for c in names for k in _DATAGEN_FIELD_KEYS}
        for key in options:
            if key.startswith("fields.") and key not in known:
                col = key[len("fields."):].rsplit(".", 1)[0]
                if col not in names:
                    raise ConnectorError(f"option {key!r} names no column of the relation "
                                         f"(columns: {', '.join(names)})", "option")
                raise ConnectorError(f"option {key!r} is not a datagen field option "
                                     f"(known: {', '.join(_DATAGEN_FIELD_KEYS)})", "option")
        _refuse_unknown(options, known)
        self.per_barrier = _int_option(options, "datagen.rows.per.second", 10, 1)
        total = _int_option(options, "datagen.rows.total", None)
        self.fields = []
        for i, (col, dtype) in enumerate(self.columns):
            if i == row_id_index:
                self.fields.append(None)
                continue
            f = {k: options.get(f"fields.{col}.{k}") for k in _DATAGEN_FIELD_KEYS}
            kind = (f["kind"] or "random").lower()
            if kind not in ("sequence", "random"):
                raise ConnectorError(f"option fields.{col}.kind must be sequence or random, got {f['kind']!r}",
                                     "option")
            tk = dtype.kind
            if tk not in _INTS and tk not in _FLOATS and tk not in (TypeKind.VARCHAR, TypeKind.BOOLEAN):
                raise ConnectorError(f"datagen cannot fill column {col} of type {dtype.sql_name()} (supported: "
                                     "SMALLINT, INT, BIGINT, REAL, DOUBLE, VARCHAR, BOOLEAN)", "option")
            floating = tk in _FLOATS
            spec = {"kind": kind, "type": dtype, "salt": i + 1,
                    "seed": _int_option(options, f"fields.{col}.seed", 0)}
            if kind == "sequence":
                if tk == TypeKind.BOOLEAN:
                    raise ConnectorError(f"fields.{col}.kind = sequence needs a number or VARCHAR column", "option")
                spec["start"] = _number_option(f, "start", 0, False)
                end = _number_option(f, "end", None, False)
                if end is not None:
                    if end < spec["start"]:
                        raise ConnectorError(f"option fields.{col}.end ({end}) is below fields.{col}.start "
                                             f"({spec['start']})", "option")
                    count = end - spec["start"] + 1
                    total = count if total is None else min(total, count)
                lo, hi = _INTS.get(tk, (None, None))
                if lo is not None and not (lo <= spec["start"] <= hi and (end is None or end <= hi)):
                    raise ConnectorError(f"the sequence of column {col} leaves {dtype.sql_name()}'s range", "option")
                if lo is not None and end is None:   # ends at the type's maximum rather than overflow
                    count = hi - spec["start"] + 1
                    total = count if total is None else min(total, count)
            else:
                lo, hi = _INTS.get(tk, (0, 32767))
                spec["min"] = _number_option(f, "min", 0 if tk != TypeKind.SMALLINT else 0, floating)
                spec["max"] = _number_option(f, "max", 32767 if tk not in _FLOATS else 32767.0, floating)
                spec["length"] = _int_option(f, "length", 10, 1)
                if spec["max"] < spec["min"]:
                    raise ConnectorError(f"option fields.{col}.max is below fields.{col}.min", "option")
                if tk in _INTS and not (lo <= spec["min"] and spec["max"] <= hi):
                    raise ConnectorError(f"fields.{col}.min/max leave {dtype.sql_name()}'s range", "option")
            self.fields.append(spec)
        self.total = total

    def stop_at(self, offset: int) -> int:
        """The offset after the next barrier's batch, from ``offset``."""
        end = offset + self.per_barrier
        return end if self.total is None else min(end, self.total)

    def columns_for(self, start: int, stop: int) -> list:
        """Arrow arrays of every column (of its declared type) for rows ``[start, stop)``."""
        return [c.cast(arrow_type(t)) if c.type != arrow_type(t) else c
                for c, (_, t) in zip(self._columns_for(start, stop), self.columns)]

    def _columns_for(self, start: int, stop: int) -> list:
        n = np.arange(start, stop, dtype=np.int64)
        out = []
        for spec, (_, dtype) in zip(self.fields, self.columns):
            if spec is None:
                out.append(pa.array(n, pa.int64()))
                continue
            tk = dtype.kind
            if spec["kind"] == "sequence":
                values = spec["start"] + n
                out.append(pa.array(values.astype(str) if tk == TypeKind.VARCHAR else values))
                continue
            u = _hash_uniform(spec["seed"], spec["salt"], n)
            if tk in _FLOATS:
                out.append(pa.array(spec["min"] + u * (spec["max"] - spec["min"])))
            elif tk == TypeKind.BOOLEAN:
                out.append(pa.array(u < 0.5))
            elif tk == TypeKind.VARCHAR:
                out.append(pa.array(_random_strings(spec["seed"], spec["salt"], n, spec["length"])))
            else:
                span = spec["max"] - spec["min"] + 1   # <= 2^64: the offset below is exact in uint64
                offset = np.minimum((u * float(span)).astype(np.float64), float(span - 1))
                values = [spec["min"] + min(int(x), span - 1) for x in offset.tolist()] if span > 1 << 53 else \
                    (offset.astype(np.int64) + spec["min"])
                out.append(pa.array(values, pa.int64()))
        return out


def _random_strings(seed: int, salt: int, n: np.ndarray, length: int) -> list:
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    cols = [(_hash_uniform(seed, salt * 1000 + k, n) * 26).astype(np.int64) for k in range(length)]
    grid = letters[np.stack(cols, axis=1)] if len(n) else np.zeros((0, length), np.uint8)
    return [row.tobytes().decode() for row in grid]


class Nexmark:
    """The ``nexmark`` connector (module docstring)."""

    def __init__(self, options: dict, columns, row_id_index: int | None):
        from stream.sources.nexmark import KIND_AUCTION, KIND_BID, KIND_PERSON, NexmarkConfig
        from stream.sources.nexmark_schema import AUCTION_COLUMNS, BID_COLUMNS, PERSON_COLUMNS
        _refuse_unknown(options, _NEXMARK_KEYS)
        tables = {"person": (KIND_PERSON, PERSON_COLUMNS), "auction": (KIND_AUCTION, AUCTION_COLUMNS),
                  "bid": (KIND_BID, BID_COLUMNS)}
        table = str(options.get("nexmark.table.type", "")).lower()
        if table not in tables:
            raise ConnectorError(f"option nexmark.table.type must be one of {', '.join(tables)}, got "
                                 f"{options.get('nexmark.table.type')!r}", "option")
        self.kind, source_columns = tables[table]
        self.total = _int_option(options, "nexmark.event.num", None)
        self.per_barrier = _int_option(options, "nexmark.events.per.second", 1000, 1)
        self.config = NexmarkConfig(seed=_int_option(options, "nexmark.seed", 0))
        self.table, self.row_id_index = table, row_id_index
        by_name = dict(source_columns)
        self.picks = []
        for i, (col, dtype) in enumerate(columns):
            if i == row_id_index:
                self.picks.append(None)
                continue
            if col not in by_name:
                raise ConnectorError(f"column {col} is not a column of the Nexmark {table} table (columns: "
                                     f"{', '.join(by_name)})", "option")
            if by_name[col] != dtype:
                raise ConnectorError(f"column {col} of the Nexmark {table} table is {by_name[col].sql_name()}, "
                                     f"not {dtype.sql_name()}", "option")
            self.picks.append([c for c, _ in source_columns].index(col))
        self._generator = None

    def stop_at(self, offset: int) -> int:
        end = offset + self.per_barrier
        return end if self.total is None else min(end, self.total)

    def columns_for(self, start: int, stop: int) -> list:
        from stream.sources.nexmark import NexmarkGenerator, event_kinds
        if self._generator is None:
            self._generator = NexmarkGenerator(self.config)
        events = self._generator.generate(start, stop)
        batch = {"person": events.person, "auction": events.auction, "bid": events.bid}[self.table]
        n = np.arange(start, stop, dtype=np.int64)
        ids = n[event_kinds(self.config, n) == self.kind]
        return [pa.array(ids, pa.int64()) if p is None else batch.column(p) for p in self.picks]


class ConnectorSource(UnaryExecutor):
    """Emits the connector's next rows before each barrier; its offset in ``offset_table``
    (module docstring). ``input`` is the relation's table source (barriers, DML chunks)."""

    def __init__(self, input, connector, offset_table, identity: str | None = None):
        super().__init__(input, identity=identity or f"ConnectorSource({type(connector).__name__.lower()})")
        self.connector, self.offset_table = connector, offset_table
        self.offset = 0
        self.paused = False

    def state_tables(self) -> list:
        return [self.offset_table]

    def on_init(self, barrier) -> None:
        row = self.offset_table.get_row((0,))
        self.offset = 0 if row is None else int(row[1])
        self._stored = row

    def on_chunk(self, chunk):
        return chunk

    def on_barrier(self, barrier):
        if isinstance(barrier.mutation, Pause) or self.paused:
            self.paused = not _is_resume(barrier)
            return None
        start = self.offset
        stop = self.connector.stop_at(start)
        if stop <= start:
            return None
        columns = self.connector.columns_for(start, stop)
        new = (0, stop)
        if self._stored is None:
            self.offset_table.insert(new)
        else:
            self.offset_table.update(self._stored, new)
        self._stored, self.offset = new, stop
        rows = len(columns[0]) if columns else 0
        if rows == 0:
            return None
        columns = [c.cast(t) if c.type != t else c for c, t in zip(columns, self.schema.arrow_types)]
        return StreamChunk(np.full(rows, INSERT, dtype=np.int8), columns, self.schema)


def _is_resume(barrier) -> bool:
    from stream.message import Resume
    return isinstance(barrier.mutation, Resume)
