"""StreamChunk: a batch of changes to a relation, as Arrow columns plus one op per row.

Layout (DESIGN.md section 8): ``columns`` are ``pyarrow.Array``s of the schema's Arrow types
(:mod:`stream.schema`), ``ops`` a numpy ``int8`` array with one op per row, ``visibility`` an
optional numpy bool mask (``None``: every row visible). The ops are the relational layer's
(:data:`relational.state_table.OP_INSERT` ...), so a chunk goes into
``StateTable.write_chunk(ops, columns, visibility)`` as it is:

====  =====  ===============================================================
op    value  meaning
====  =====  ===============================================================
``+``   1    INSERT: the row enters the relation
``-``   2    DELETE: the row leaves the relation
``U-``  3    UPDATE_DELETE: the old row of an update; the next visible row is its U+
``U+``  4    UPDATE_INSERT: the new row of an update; the previous visible row is its U-
====  =====  ===============================================================

Invariants (checked by :meth:`StreamChunk.validate`, which raises :class:`InvalidChunkError`
naming the row):
- every column has ``len(ops)`` values and its schema's Arrow type; ops are 1..4;
- update pairs are adjacent among the visible rows: a U- is immediately followed by its U+
  and both are visible or both are not (an executor that hides one side rewrites the other,
  as ``Filter`` does: U- alone becomes ``-``, U+ alone ``+``);
- (optional, given the stream key) the two rows of a pair have the same stream key.
Chunks are immutable: every transformation returns a new chunk sharing the Arrow buffers.
Invisible rows are dropped by :meth:`compact`; consumers may also honour the mask directly.

Callers: every executor, the dispatchers, tests (``from_rows`` / ``rows`` / ``to_pretty``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import to_arrow, to_pylist
from relational.state_table import OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT
from stream.errors import InvalidChunkError
from stream.schema import Schema

INSERT, DELETE, UPDATE_DELETE, UPDATE_INSERT = OP_INSERT, OP_DELETE, OP_UPDATE_DELETE, OP_UPDATE_INSERT
OP_NAMES = {INSERT: "+", DELETE: "-", UPDATE_DELETE: "U-", UPDATE_INSERT: "U+"}
_OP_BY_NAME = {name: op for op, name in OP_NAMES.items()}
DEFAULT_CHUNK_SIZE = 1024


def as_op(op) -> int:
    """An op given as its number or its name (``"+"``, ``"-"``, ``"U-"``, ``"U+"``)."""
    if isinstance(op, str):
        try:
            return _OP_BY_NAME[op]
        except KeyError:
            raise InvalidChunkError(f"unknown op {op!r}; ops are +, -, U-, U+") from None
    if op not in OP_NAMES:
        raise InvalidChunkError(f"unknown op {op!r}; ops are 1 (+), 2 (-), 3 (U-), 4 (U+)")
    return int(op)


def _as_ops(ops) -> np.ndarray:
    if isinstance(ops, np.ndarray) and ops.dtype == np.int8:
        return ops
    if isinstance(ops, (pa.Array, pa.ChunkedArray)):
        ops = ops.to_numpy(zero_copy_only=False)
    arr = np.asarray(ops)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidChunkError(f"ops must be a 1-D sequence of ints, got {type(ops).__name__}")
    return arr.astype(np.int8)


def _as_column(column) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(column, pa.Array):
        return column
    raise InvalidChunkError(f"a column must be a pyarrow Array, got {type(column).__name__}")


class StreamChunk:
    """One batch of changes (module docstring). Construct with Arrow columns, or
    :meth:`from_rows` with Python values. Immutable."""

    __slots__ = ("ops", "columns", "schema", "visibility")

    def __init__(self, ops, columns, schema, visibility=None):
        self.ops = _as_ops(ops)
        self.columns = [_as_column(c) for c in columns]
        self.schema = schema if isinstance(schema, Schema) else Schema(schema)
        if visibility is not None:
            visibility = np.asarray(visibility, dtype=np.bool_)
            if visibility.ndim != 1 or len(visibility) != len(self.ops):
                raise InvalidChunkError(f"visibility has {visibility.size} entries for {len(self.ops)} rows")
            if visibility.all():
                visibility = None
        self.visibility = visibility

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_rows(cls, schema, rows) -> StreamChunk:
        """A chunk of ``rows``: ``(op, row)`` pairs, ``op`` a number or a name (``"+"``, ``"U-"``),
        ``row`` a tuple of Python values in schema order. Validated."""
        schema = schema if isinstance(schema, Schema) else Schema(schema)
        ops, values = [], [[] for _ in schema.types]
        for i, item in enumerate(rows):
            try:
                op, row = item
            except (TypeError, ValueError):
                raise InvalidChunkError(f"a row is an (op, row) pair, got {item!r:.100}", i) from None
            ops.append(as_op(op))
            if len(row) != len(schema):
                raise InvalidChunkError(f"a row has {len(row)} values for {len(schema)} columns", i)
            for column, value in zip(values, row):
                column.append(value)
        columns = [to_arrow(v, t) for v, t in zip(values, schema.types)]
        chunk = cls(np.array(ops, dtype=np.int8), columns, schema)
        chunk.validate()
        return chunk

    @classmethod
    def empty(cls, schema) -> StreamChunk:
        schema = schema if isinstance(schema, Schema) else Schema(schema)
        return cls(np.zeros(0, np.int8), [pa.array([], type=t) for t in schema.arrow_types], schema)

    @classmethod
    def concat(cls, chunks) -> StreamChunk:
        """One chunk of several (same schema), rows in order, invisible rows kept invisible."""
        chunks = list(chunks)
        if not chunks:
            raise InvalidChunkError("concat needs at least one chunk")
        schema = chunks[0].schema
        columns = [pa.concat_arrays([c.columns[i] for c in chunks]) for i in range(len(schema))]
        ops = np.concatenate([c.ops for c in chunks])
        vis = None
        if any(c.visibility is not None for c in chunks):
            vis = np.concatenate([c.visible_mask() for c in chunks])
        return cls(ops, columns, schema, vis)

    # --- shape --------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Rows, visible or not (the capacity)."""
        return len(self.ops)

    @property
    def cardinality(self) -> int:
        """Visible rows."""
        return len(self.ops) if self.visibility is None else int(self.visibility.sum())

    def visible_mask(self) -> np.ndarray:
        return np.ones(len(self.ops), np.bool_) if self.visibility is None else self.visibility

    # --- transformations (new chunks sharing buffers) ------------------------------------------

    def with_visibility(self, mask) -> StreamChunk:
        return StreamChunk(self.ops, self.columns, self.schema, mask)

    def with_ops(self, ops) -> StreamChunk:
        return StreamChunk(ops, self.columns, self.schema, self.visibility)

    def with_columns(self, columns, schema) -> StreamChunk:
        return StreamChunk(self.ops, columns, schema, self.visibility)

    def select(self, indices) -> StreamChunk:
        """The chunk with only the columns at ``indices`` (in that order)."""
        return StreamChunk(self.ops, [self.columns[i] for i in indices], self.schema.select(indices), self.visibility)

    def compact(self) -> StreamChunk:
        """The visible rows only (the chunk itself when every row is visible)."""
        if self.visibility is None:
            return self
        mask = pa.array(self.visibility)
        return StreamChunk(self.ops[self.visibility], [c.filter(mask) for c in self.columns], self.schema)

    # --- reading ------------------------------------------------------------------------------

    def rows(self) -> list:
        """The visible rows as ``(op, tuple of Python values)`` pairs, in order."""
        chunk = self.compact()
        columns = [to_pylist(c, t) for c, t in zip(chunk.columns, chunk.schema.types)]
        return list(zip(chunk.ops.tolist(), zip(*columns))) if columns else [(op, ()) for op in chunk.ops.tolist()]

    def to_record_batch(self, op_column: str | None = None) -> pa.RecordBatch:
        """The visible rows as a record batch; ``op_column`` (a name) adds the ops as int8."""
        chunk = self.compact()
        arrays, names = list(chunk.columns), list(chunk.schema.names)
        if op_column is not None:
            arrays.insert(0, pa.array(chunk.ops, pa.int8()))
            names.insert(0, op_column)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def to_pretty(self, max_rows: int = 50) -> str:
        """The visible rows as a text table with an ``op`` column (``+ - U- U+``)."""
        rows = self.rows()
        header = ["op", *self.schema.names]
        body = [[OP_NAMES[op], *("NULL" if v is None else str(v) for v in row)] for op, row in rows[:max_rows]]
        widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(header)]
        line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out = [line, "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |", line]
        out += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in body]
        out.append(line)
        hidden = len(self) - len(rows)
        if len(rows) > max_rows:
            out.append(f"({len(rows) - max_rows} more rows)")
        if hidden:
            out.append(f"({hidden} invisible rows)")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_pretty()

    def __repr__(self) -> str:
        return f"StreamChunk({self.cardinality} of {len(self)} rows, {self.schema!r})"

    # --- checks -------------------------------------------------------------------------------

    def validate(self, stream_key=None) -> StreamChunk:
        """Check the invariants of the module docstring; raise :class:`InvalidChunkError`
        naming the first bad row. ``stream_key`` (column indices): also check that the two
        rows of every update pair agree on it. Returns the chunk."""
        n = len(self.ops)
        if len(self.columns) != len(self.schema):
            raise InvalidChunkError(f"a chunk of {self.schema!r} has {len(self.columns)} columns")
        for i, (column, name, atype) in enumerate(zip(self.columns, self.schema.names, self.schema.arrow_types)):
            if len(column) != n:
                raise InvalidChunkError(f"column {name} has {len(column)} values for {n} ops")
            if column.type != atype:
                raise InvalidChunkError(f"column {name} is {column.type}, its type needs {atype}")
        bad = (self.ops < INSERT) | (self.ops > UPDATE_INSERT)
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidChunkError(f"unknown op {int(self.ops[row])}; ops are 1 (+), 2 (-), 3 (U-), 4 (U+)", row)
        positions = np.flatnonzero(self.visible_mask())
        ops = self.ops[positions]
        ud = ops == UPDATE_DELETE
        ui = ops == UPDATE_INSERT
        if self.visibility is not None:   # a hidden U- with a visible U+ (or the reverse)
            hidden = ~self.visibility
            pair_start = np.flatnonzero((self.ops[:-1] == UPDATE_DELETE) & (self.ops[1:] == UPDATE_INSERT))
            split = hidden[pair_start] != hidden[pair_start + 1]
            if split.any():
                raise InvalidChunkError("the visibility mask hides one row of an update pair",
                                        int(pair_start[np.argmax(split)]))
        followed = np.zeros(len(ops), np.bool_)
        followed[:-1] = ui[1:]
        preceded = np.zeros(len(ops), np.bool_)
        preceded[1:] = ud[:-1]
        orphan = (ud & ~followed) | (ui & ~preceded)
        if orphan.any():   # the first bad row in chunk order
            k = int(np.argmax(orphan))
            what = ("an update-delete (U-) is not immediately followed by its update-insert (U+)" if ud[k]
                    else "an update-insert (U+) does not follow an update-delete (U-)")
            raise InvalidChunkError(what, int(positions[k]))
        if stream_key and ud.any():
            old_at = pa.array(positions[np.flatnonzero(ud)])
            new_at = pa.array(positions[np.flatnonzero(ud)] + 1)
            for k in stream_key:
                old, new = self.columns[k].take(old_at), self.columns[k].take(new_at)
                same = pc.fill_null(pc.equal(old, new), False)
                same = pc.or_(same, pc.and_(pc.is_null(old), pc.is_null(new)))
                if not pc.all(same).as_py():
                    j = int(np.argmin(same.to_numpy(zero_copy_only=False)))
                    raise InvalidChunkError(f"an update pair changes the stream key column "
                                            f"{self.schema.names[k]}", int(old_at[j].as_py()))
        return self


class StreamChunkBuilder:
    """Builds chunks of at most ``capacity`` rows from single rows (executors that emit row by
    row: aggregations, joins, conflict handling). An update pair is never split across chunks:
    a U- that would take the last free slot first finishes the current chunk.

    ``append(op, row)`` and ``append_update(old, new)`` return a finished chunk when one is
    full (else None); ``take()`` returns what is left (None when empty)."""

    def __init__(self, schema, capacity: int = DEFAULT_CHUNK_SIZE):
        if capacity < 3:   # an update pair plus the row before it: append_update finishes <= 1 chunk
            raise InvalidChunkError("a chunk builder needs a capacity of at least 3")
        self.schema = schema if isinstance(schema, Schema) else Schema(schema)
        self.capacity = capacity
        self._ops: list[int] = []
        self._rows: list[tuple] = []

    def __len__(self) -> int:
        return len(self._ops)

    def append(self, op: int, row) -> StreamChunk | None:
        done = None
        if op == UPDATE_DELETE and len(self._ops) >= self.capacity - 1:
            done = self.take()
        elif op == UPDATE_INSERT and (not self._ops or self._ops[-1] != UPDATE_DELETE):
            raise InvalidChunkError("an update-insert (U+) must follow its update-delete (U-)")
        self._ops.append(op)
        self._rows.append(row)
        if done is None and len(self._ops) >= self.capacity and op != UPDATE_DELETE:
            done = self.take()
        return done

    def append_update(self, old, new) -> StreamChunk | None:
        first = self.append(UPDATE_DELETE, old)
        second = self.append(UPDATE_INSERT, new)
        return first or second   # at most one of them finished a chunk

    def take(self) -> StreamChunk | None:
        if not self._ops:
            return None
        ops, rows = self._ops, self._rows
        self._ops, self._rows = [], []
        columns = [to_arrow(list(col), t) for col, t in zip(zip(*rows), self.schema.types)] if rows[0] else []
        return StreamChunk(np.array(ops, dtype=np.int8), columns, self.schema)
