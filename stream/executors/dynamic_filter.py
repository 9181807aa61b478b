"""DynamicFilter: ``left WHERE left.key <op> (scalar)`` where the scalar changes over time -- the
right input is a one-row stream, such as a SimpleAgg's ``max(...)`` -- and ``op`` is one of
``>``, ``>=``, ``<``, ``<=``.

Epochs. The scalar in force during an epoch is the right row committed at its start (None
while there is no right row, or its value is NULL: then no left row passes). Left chunks are
filtered against it as they come (a visibility mask; update pairs rewritten as ``Filter`` does)
and written to the left state table. Right changes during the epoch only update the pending
value; at the barrier, if the value moved, the left rows whose outcome differs between the old
and the new value are found by one range scan of the left table -- the rows between the two
values, or the whole passing range when one side is NULL -- and emitted as inserts (they
enter) or deletes (they leave) before the barrier. So the output always equals ``left WHERE
key <op> scalar`` for the scalar in force, and the rows added in an epoch are judged by the
value they were emitted under.

State layout: the left table holds the left input's columns keyed by ``key column | left
stream key`` (the key column ASC, so the passing rows of any scalar are one key range;
:func:`dynamic_filter_left_table` builds it); the right table holds the right row, keyed by
nothing (one row; :func:`dynamic_filter_right_table`). A left row with a NULL key never passes.
Both are committed on every barrier; recovery reads the right row back in ``on_init``.

Output: the left schema and stream key. Barrier-aligned over the two inputs
(:func:`stream.align.align_barriers`). Watermarks are dropped (a scalar that moves emits left
rows of any age).
Strict left tables raise :class:`~stream.errors.InconsistentStreamError` naming the key.

Callers: the planner (a comparison with a scalar subquery), tests.
"""

from __future__ import annotations

import pyarrow.compute as pc

from relational import StateTable
from relational.errors import InconsistentOpError
from stream.align import align_barriers
from stream.chunk import DELETE, INSERT, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import Executor
from stream.executors.filter import filter_chunk
from stream.expr import Cmp, Col, Lit

COMPARATORS = {">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}


def dynamic_filter_left_table(store, table_id: int, schema, stream_key, key_col: int, **kwargs) -> StateTable:
    """The left state table: ``schema`` keyed by ``key_col | stream_key`` (module docstring)."""
    pk = [key_col] + [c for c in stream_key if c != key_col]
    return StateTable(store, table_id, schema.pairs(), pk, **kwargs)


def dynamic_filter_right_table(store, table_id: int, schema, **kwargs) -> StateTable:
    """The right state table: the one right row, keyed by nothing."""
    return StateTable(store, table_id, schema.pairs(), [], **kwargs)


def _passes(op: str, x, v) -> bool:
    if x is None or v is None:
        return False
    return x > v if op == ">" else x >= v if op == ">=" else x < v if op == "<" else x <= v


class DynamicFilter(Executor):
    """``left.key_col <comparator> right.right_col`` with the right side a one-row stream
    (module docstring)."""

    def __init__(self, left, right, key_col: int, comparator: str, left_table, right_table, right_col: int = 0,
                 identity: str | None = None):
        identity = identity or f"DynamicFilter({left_table.name})"
        if comparator not in COMPARATORS:
            raise ExecutorError(identity, f"comparator must be one of {list(COMPARATORS)}, got {comparator!r}")
        if left.schema.types[key_col] != right.schema.types[right_col]:
            raise ExecutorError(identity, f"left column {key_col} and right column {right_col} differ in type")
        pk = [key_col] + [c for c in left.stream_key if c != key_col]
        if list(left_table.serde.pk_indices) != pk or list(left_table.types) != list(left.schema.types):
            raise ExecutorError(identity, f"the left table must have the left columns and pk {pk}")
        if list(right_table.serde.pk_indices) or list(right_table.types) != list(right.schema.types):
            raise ExecutorError(identity, "the right table must have the right columns and an empty pk")
        super().__init__([left, right], left.schema, left.stream_key, identity)
        self.left, self.right = left, right
        self.key_col, self.right_col, self.comparator = key_col, right_col, comparator
        self.left_table, self.right_table = left_table, right_table
        self._row = None          # the right row in force this epoch
        self._pending = None      # the right row as of the last right change

    def state_tables(self) -> list:
        return [self.left_table, self.right_table]

    @property
    def value(self):
        """The scalar in force this epoch (None: no row or NULL)."""
        return None if self._row is None else self._row[self.right_col]

    def on_init(self, barrier) -> None:
        self._row = self.right_table.get_row(())
        self._pending = self._row

    def on_left(self, chunk: StreamChunk):
        try:
            self.left_table.write_chunk(chunk.ops, chunk.columns, chunk.visibility)
        except InconsistentOpError as exc:
            raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
        self.left_table.try_flush()
        value = self.value
        if value is None:
            return None
        # stream.expr's comparison: SQL order for every type (NUMERIC is text in Arrow, NaN sorts
        # above every float), the order the range reads on a new bound use
        dtype = self.schema.types[self.key_col]
        passed = Cmp(self.comparator, Col(self.key_col, dtype), Lit(value, dtype)).eval(chunk.columns, len(chunk))
        passed = pc.fill_null(passed, False).to_numpy(zero_copy_only=False)
        return filter_chunk(chunk, passed)

    def on_right(self, chunk: StreamChunk) -> None:
        for op, row in chunk.rows():
            if op == INSERT or op == UPDATE_INSERT:
                self._pending = row
            elif self._pending is None or tuple(self._pending) != tuple(row):
                raise InconsistentStreamError(self.identity, "the right input deletes a row it does not hold", row)
            else:
                self._pending = None

    def on_barrier(self, barrier):
        old, new = self.value, None if self._pending is None else self._pending[self.right_col]
        if self._pending != self._row:
            if self._row is not None:
                self.right_table.delete(self._row)
            if self._pending is not None:
                self.right_table.insert(self._pending)
            self._row = self._pending
        if old == new:
            return None
        return self._changes(old, new)

    def _changes(self, old, new) -> list:
        """Deletes for the stored left rows that passed under ``old`` and fail under ``new``,
        inserts for the reverse, from one range scan."""
        op = self.comparator
        upward = op in (">", ">=")
        if old is None or new is None:    # everything passing under the non-NULL one changes
            v = new if old is None else old
            emit = INSERT if old is None else DELETE
            if upward:
                rows = self.left_table.iter_with_prefix(start=(v,), start_inclusive=op == ">=")
            else:
                rows = self.left_table.iter_with_prefix(end=(v,), end_inclusive=op == "<=")
        else:
            lo, hi = (old, new) if old < new else (new, old)
            # the rows between the two values: (lo, hi] for > and <=, [lo, hi) for >= and <
            open_lo = op in (">", "<=")
            rows = self.left_table.iter_with_prefix(start=(lo,), end=(hi,), start_inclusive=not open_lo,
                                                    end_inclusive=open_lo)
            emit = None
        builder = StreamChunkBuilder(self.schema)
        out = []
        k = self.key_col
        for row in rows:
            x = row[k]
            if x is None:
                continue
            if emit is None:
                before, after = _passes(op, x, old), _passes(op, x, new)
                if before == after:
                    continue
                out.append(builder.append(INSERT if after else DELETE, row))
            else:
                out.append(builder.append(emit, row))
        out.append(builder.take())
        return [c for c in out if c is not None]

    async def execute(self):
        async for i, msg in align_barriers([self.left.execute(), self.right.execute()], self.identity):
            if i is None:
                for m in self.handle_barrier(msg):
                    yield m
            elif type(msg) is StreamChunk:
                if i == 0:
                    out = self.on_left(msg)
                    if out is not None:
                        yield out
                else:
                    self.on_right(msg)
            # watermarks are dropped: a moving scalar emits old left rows

    def _check(self) -> None:
        """The right table holds the row in force (right changes reach it at the barrier)."""
        stored = self.right_table.get_row(())
        assert stored == (None if self._row is None else tuple(self._row)), (self.identity, stored, self._row)
