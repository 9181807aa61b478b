"""The state of one ``string_agg``/``array_agg`` call of a HashAgg/SimpleAgg: the group's
materialized input in the call's order (:class:`OrderedInput`).

Neither aggregate can be retracted from its current value (deleting a row from the middle of
a string needs the rest), and even over an append-only input the value grows with every row,
so every contributing input row is kept, as RisingWave keeps a "materialized input" state for
them:

- **Materialized input** (state table 4. of docs/format.md section 8): ``group key | ORDER BY
  columns | input stream key | value``, pk the columns before the value, in the call's order
  (each ORDER BY column ascending or descending with its NULLs first or last, then the stream
  key ascending: rows equal in the ORDER BY are in stream-key order, as the batch path's
  input order of a table scan); distribution key: the group key. Only the rows the call
  counts are stored: its FILTER passed and, for ``string_agg``, a non-NULL value
  (``array_agg`` keeps NULL elements, as Postgres).
- On a change the group's value in the aggregation's value state becomes :data:`UNKNOWN`; the
  barrier flush recomputes it from the group's rows in pk order (:meth:`OrderedInput.value`):
  the texts joined with the delimiter (a NULL delimiter joins with nothing), or the list of
  values; NULL when the group has no stored row. Cost: a changed group's rows are read once per
  flush (the value itself is that long).

Who may call: :mod:`stream.executors.hash_agg` only (one instance per such call).
"""

from __future__ import annotations

import numpy as np

from relational.memcomparable import OrderType
from relational.state_table import StateTable
from stream.executors.agg_extreme import UNKNOWN


class OrderedInput:
    """Call ``call`` (a bound string_agg/array_agg AggCall) of an aggregation over ``group_key``
    (input columns; ``key_pairs`` their names and types) on an input whose stream key is
    ``in_key``: its materialized-input table ``table_id`` (module docstring). ``write`` is the
    executor's state-table write. An empty ``in_key`` is an input of at most one row (a global
    aggregate's output): group key and ORDER BY columns are then a unique key."""

    def __init__(self, store, table_id, call, key_pairs, group_key, in_schema, in_key, *, write, dist, vnodes,
                 consistent: bool, flush_threshold: int, name: str):
        nk = len(group_key)
        order = call.order
        cols = key_pairs + [(f"_o{i}", in_schema.types[c]) for i, (c, _, _) in enumerate(order)] + \
            [(f"_k{i}", in_schema.types[i]) for i in in_key] + [("_v", call.arg_type)]
        orders = [OrderType.ASC] * nk + [OrderType(desc, nulls_first) for _, desc, nulls_first in order] + \
            [OrderType.ASC] * len(in_key)
        self.table = StateTable(store, table_id, cols, list(range(len(cols) - 1)), orders, dist_key_indices=dist,
                                vnodes=vnodes, consistent=consistent, flush_threshold=flush_threshold, name=name,
                                prefix_len_hint=nk or None)
        self.columns = list(group_key) + [c for c, _, _ in order] + list(in_key) + [call.arg]   # in table order
        self.call, self._write = call, write

    def apply(self, at, chunk, mask, inv, states) -> None:
        """Write the rows of ``chunk`` in ``mask`` (the rows the call counts) to the
        materialized input and mark each touched group's value ``states[g][at]`` for
        recomputation (``inv``: each row's group index into ``states``)."""
        self._write(self.table, chunk.ops, [chunk.columns[i] for i in self.columns], mask)
        for gi in np.unique(inv[mask]).tolist():
            states[gi][at] = UNKNOWN

    def value(self, key):
        """Group ``key``'s value from its stored rows in order (module docstring)."""
        vals = [row[-1] for row in self.table.iter_with_prefix(key)]
        if not vals:
            return None
        if self.call.kind == "array_agg":
            return vals
        return (self.call.sep or "").join(vals)
