"""Dedup (append-only): passes the first row of every dedup key and drops every later one
(``SELECT DISTINCT ON (key) ...`` / ``ROW_NUMBER() ... = 1`` over an append-only input in
arrival order).

State layout: one state table with the input's columns keyed by the dedup key (the first row
seen for each key; :func:`dedup_state_table` builds it, distributed by the key). A cache (a
:class:`~stream.cache.StateCache` under the executor's :class:`~stream.cache.MemoryBudget`)
remembers keys known to be present; a key it does not hold is probed in the table, with one
batched ``get_rows`` per chunk for all of them.

Invariants: a key is passed at most once over the whole history (across restarts: the table is
committed with the barrier that follows the row's epoch); within a chunk the first visible row
of a key wins. The input must be append-only: a delete or update raises
:class:`~stream.errors.ExecutorError` (a retractable input needs a GroupTopN with limit 1).
Output: the input's schema, stream key = the dedup key; only inserts; the input's columns are
shared, only the visibility mask narrows.

Callers: the planner (append-only DISTINCT / dedup), tests.
"""

from __future__ import annotations

import numpy as np

from relational import StateTable
from relational.arrow import to_pylist
from relational.errors import InconsistentOpError
from stream.cache import default_budget, row_bytes
from stream.chunk import INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor


def dedup_state_table(store, table_id: int, schema, dedup_key, **kwargs) -> StateTable:
    """The state table of a :class:`AppendOnlyDedup` on ``dedup_key`` (column indices)."""
    return StateTable(store, table_id, schema.pairs(), list(dedup_key), dist_key_indices=list(dedup_key), **kwargs)


class AppendOnlyDedup(UnaryExecutor):
    """Keeps the first row per ``dedup_key`` of an append-only input (module docstring)."""

    def __init__(self, input, table, dedup_key, budget=None, identity: str | None = None):
        identity = identity or f"AppendOnlyDedup({table.name})"
        dedup_key = [int(c) for c in dedup_key]
        if not dedup_key or list(table.serde.pk_indices) != dedup_key or list(table.types) != list(input.schema.types):
            raise ExecutorError(identity, f"the state table must have the input's columns and pk {dedup_key}")
        super().__init__(input, stream_key=dedup_key, identity=identity)
        self.table = table
        self.dedup_key = dedup_key
        self.budget = budget if budget is not None else default_budget()
        self.cache = self.budget.cache(identity)

    def state_tables(self) -> list:
        return [self.table]

    def on_init(self, barrier) -> None:
        self.cache.clear()

    def on_chunk(self, chunk: StreamChunk):
        vis = chunk.visible_mask()
        if not (chunk.ops[vis] == INSERT).all():
            raise ExecutorError(self.identity, "an append-only dedup got a delete or update")
        types = chunk.schema.types
        keys = list(zip(*[to_pylist(chunk.columns[c], types[c]) for c in self.dedup_key]))
        positions = np.flatnonzero(vis).tolist()
        first: dict = {}
        for i in positions:
            first.setdefault(keys[i], i)
        cache = self.cache
        present = {k for k in first if cache.get(k) is not None}   # local: puts below may evict
        unknown = [k for k in first if k not in present]
        passed = np.zeros(len(chunk), np.bool_)
        if unknown:
            for key, row in zip(unknown, self.table.get_rows(unknown)):
                if row is None:   # new: pass it
                    passed[first[key]] = True
                cache.put(key, True, row_bytes(key))
        if not passed.any():
            return None
        try:
            self.table.write_chunk(chunk.ops, chunk.columns, passed)
        except InconsistentOpError as exc:   # only if the table changed under us: a bug
            raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
        self.table.try_flush()
        return StreamChunk(chunk.ops, chunk.columns, chunk.schema, passed)

    def _check(self) -> None:
        """Every cached key is in the table."""
        self.cache._check()
        keys = self.cache.keys()
        assert None not in self.table.get_rows(keys), self.identity
