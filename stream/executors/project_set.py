"""ProjectSet: ``unnest`` of array expressions over each row (RisingWave's ``project_set.rs``
for one set-returning function kind): the input's columns, one column per array (its elements),
then the 1-based ordinality (BIGINT). A row yields as many rows as its longest array, the shorter
ones padded with NULL; a row whose arrays are all NULL or empty yields none, or with ``outer``
(``LEFT JOIN LATERAL unnest(...) ON TRUE``) one row of NULLs, its ordinality NULL as well (as
Postgres); that row is its input row's only output, so the key (input key, NULL) stays unique.

Retraction rules: each output row carries its input row's op, so a delete retracts exactly the
rows its insert produced (the expressions are deterministic). An update pair becomes a DELETE of
the old row's rows then an INSERT of the new row's: their counts may differ, so no pair survives.
Stream key: the input's key plus the ordinality column. Watermarks on input columns pass on
unchanged (the input columns keep their positions).

The per-chunk work is :func:`unnest_rows` (a plain function; the batch engine,
``sql/batch/execute.py``, calls it too): one evaluation of each array expression over the chunk
and numpy index arithmetic, no Python loop over rows.

Callers: the planner (``sql/build.py``, plan node ``sql.plan.nodes.Unnest``), the batch engine, tests.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError
from stream.executor import UnaryExecutor
from stream.message import Watermark
from stream.schema import Schema


def unnest_rows(columns, arrays, n: int, outer: bool = False):
    """``(rows, out)``: for ``n`` input rows of ``columns`` and the evaluated list ``arrays``,
    the input row of each output row (numpy int64) and the output columns -- the input columns
    taken by those rows, each array's elements (NULL past its end), the ordinality."""
    lens = [np.asarray(pc.fill_null(pc.list_value_length(a), 0), dtype=np.int64) for a in arrays]
    reps = np.maximum.reduce(lens) if lens else np.zeros(n, np.int64)
    padded = None
    if outer:   # a row of no elements: one padded row, its ordinality NULL too (Postgres)
        padded = reps == 0
        reps = np.maximum(reps, 1)
    total = int(reps.sum())
    rows = np.repeat(np.arange(n, dtype=np.int64), reps)
    ordinal = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)   # 0-based in a row
    take = pa.array(rows)
    out = [c.take(take) for c in columns]
    for a, length in zip(arrays, lens):
        flat = a.flatten()
        valid = ordinal < np.repeat(length, reps)
        if len(flat) == 0 or not valid.any():
            out.append(pa.nulls(total, flat.type))
            continue
        at = np.repeat(np.cumsum(length) - length, reps) + ordinal
        out.append(flat.take(pa.array(np.where(valid, at, 0), mask=~valid)))
    if padded is not None and padded.any():
        out.append(pa.array(ordinal + 1, pa.int64(), mask=np.repeat(padded, reps)))
    else:
        out.append(pa.array(ordinal + 1, pa.int64()))
    return rows, out


class ProjectSet(UnaryExecutor):
    """``unnest(arrays...)`` over the input (module docstring); ``names`` name the element columns."""

    def __init__(self, input, arrays, names, outer: bool = False, identity: str | None = None):
        identity = identity or f"ProjectSet(unnest({', '.join(map(str, arrays))}))"
        for a in arrays:
            if a.data_type.kind != TypeKind.LIST:
                raise ExecutorError(identity, f"unnest needs an array, got {a.data_type.sql_name()} {a}")
        fields = list(zip(input.schema.names, input.schema.types))
        fields += [(name, a.data_type.elem) for name, a in zip(names, arrays)] + [("ordinality", DataType.BIGINT)]
        schema = Schema(fields)
        super().__init__(input, schema, list(input.stream_key) + [len(fields) - 1], identity)
        self.arrays, self.outer = list(arrays), outer
        self._types = [arrow_type(t) for t in schema.types]

    def on_chunk(self, chunk: StreamChunk):
        if chunk.visibility is not None:
            keep = pa.array(np.flatnonzero(chunk.visibility))
            columns, ops = [c.take(keep) for c in chunk.columns], chunk.ops[chunk.visibility]
        else:
            columns, ops = chunk.columns, chunk.ops
        n = len(ops)
        if not n:
            return None
        arrays = [a.eval(columns, n) for a in self.arrays]
        rows, out = unnest_rows(columns, arrays, n, self.outer)
        if not len(rows):
            return None
        ops = ops[rows].copy()
        ops[ops == UPDATE_DELETE] = DELETE
        ops[ops == UPDATE_INSERT] = INSERT
        out = [c if c.type == t else c.cast(t) for c, t in zip(out, self._types)]
        return StreamChunk(ops, out, self.schema)

    def on_watermark(self, watermark: Watermark):
        return watermark   # input columns keep their positions
