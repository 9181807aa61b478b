"""The state of one ``min``/``max`` call of a HashAgg over a retractable input: the materialized
input and the cache of each group's best values (:class:`RetractableExtreme`).

A min or max cannot be retracted from its current value alone (deleting the minimum needs the
next one), so every input value is kept:

- **Materialized input** (state table 2. of docs/format.md section 8): ``group key | value |
  input stream key``, pk all columns, value ascending for min and descending for max (NULLs
  last, and not stored), so the best value is the first row of a group's prefix; distribution
  key: the group key.
- **Cache** (a :class:`~stream.cache.StateCache` under the executor's budget): per group
  ``[values, complete]``, the best ``limit`` stored values as a sorted multiset. Invariant: it
  holds every stored value strictly better than its worst one and at least one value equal to
  it, or it is ``complete`` and holds them all. It is refilled with
  ``iter_with_prefix(group, limit=...)`` (:meth:`RetractableExtreme.refill`) when it runs empty.

A group not in the cache keeps its current extreme in the aggregation's value state: an insert
updates it directly; a delete of the current extreme sets it to :data:`UNKNOWN`, and the
executor's barrier flush calls :meth:`~RetractableExtreme.refill` for it.

Who may call: :mod:`stream.executors.hash_agg` only (one instance per such call, driven from
its ``on_chunk``, flush and ``_check``); the group states it updates are the HashAgg's.
"""

from __future__ import annotations

import bisect

import numpy as np
import pyarrow as pa

from relational.arrow import to_pylist
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from stream.cache import row_bytes
from stream.errors import InconsistentStreamError
from stream.executors.agg_call import order_key

UNKNOWN = object()     # an extreme to be re-read from the materialized input


class RetractableExtreme:
    """Call ``call`` (a bound min/max AggCall) of an aggregation over ``group_key`` (input column
    indices, ``key_pairs`` their names and types) on an input whose stream key is ``in_key``:
    its materialized-input table (``table_id``) and best-values ``cache`` (module docstring).

    ``write(table, ops, columns, visibility)`` is the executor's state-table write (it maps
    inconsistent ops to :class:`~stream.errors.InconsistentStreamError` and spills);
    ``identity`` names the executor in errors. An empty ``in_key`` is an input of at most one
    row (a global aggregate's output): group key and value are then a unique key.
    """

    def __init__(self, store, table_id, call, key_pairs, group_key, in_schema, in_key, *, cache, limit: int,
                 write, identity: str, consistent: bool, dist, vnodes, flush_threshold: int, name: str):
        nk = len(group_key)
        cols = key_pairs + [("_v", call.arg_type)] + [(f"_k{i}", in_schema.types[i]) for i in in_key]
        desc = call.kind == "max"
        orders = [OrderType.ASC] * nk + [OrderType(desc, nulls_first=False)] + [OrderType.ASC] * len(in_key)
        self.table = StateTable(store, table_id, cols, list(range(len(cols))), orders, dist_key_indices=dist,
                                vnodes=vnodes, consistent=consistent, flush_threshold=flush_threshold, name=name,
                                prefix_len_hint=nk or None)
        self.columns = group_key + [call.arg] + in_key   # the input columns written, in table order
        self.desc = desc
        self.call, self.cache, self.limit, self.nk = call, cache, limit, nk
        self._write, self.identity, self.consistent = write, identity, consistent

    def apply(self, at, chunk, sign, mask, inv, keys, states) -> None:
        """Write the rows of ``chunk`` in ``mask`` to the materialized input and update each
        touched group's cached values and its extreme ``states[g][at]`` (``inv``: each row's
        group index into ``keys``/``states``; ``sign``: +1 insert, -1 delete per row)."""
        table, cols, desc = self.table, self.columns, self.desc
        self._write(table, chunk.ops, [chunk.columns[i] for i in cols], mask)
        rows = np.flatnonzero(mask)
        if not len(rows):
            return
        c = self.call
        values = to_pylist(chunk.columns[c.arg].take(pa.array(rows)), c.arg_type)
        cache = self.cache
        is_min = not desc
        limit = self.limit
        for gi, v, s in zip(inv[rows].tolist(), values, sign[rows].tolist()):
            key = keys[gi]
            entry = cache.peek(key)
            state = states[gi]
            kv = order_key(v)
            if entry is None:
                cur = state[at]
                if cur is UNKNOWN:
                    continue
                if s > 0:
                    if cur is None or (kv < order_key(cur) if is_min else kv > order_key(cur)):
                        state[at] = v
                elif kv == order_key(cur):
                    state[at] = UNKNOWN
                continue
            vals, complete = entry
            if s > 0:
                if complete or (kv < order_key(vals[-1]) if is_min else kv > order_key(vals[0])):
                    bisect.insort(vals, v, key=order_key)
                    if len(vals) > limit:
                        vals.pop() if is_min else vals.pop(0)
                        entry[1] = False
            else:
                i = bisect.bisect_left(vals, kv, key=order_key)
                if i < len(vals) and order_key(vals[i]) == kv:
                    del vals[i]
                    if not vals and not entry[1]:
                        cache.pop(key)
                        state[at] = UNKNOWN
                        continue
                elif complete and self.consistent:
                    raise InconsistentStreamError(self.identity, f"a delete of {c!r} value {v!r} the group does not have", key)
            state[at] = (vals[0] if is_min else vals[-1]) if vals else None

    def refill(self, key):
        """The best stored values of group ``key`` (cached); returns the extreme (None: the
        group has no non-NULL value)."""
        nk = self.nk
        limit = self.limit
        vals = [row[nk] for row in self.table.iter_with_prefix(key, limit=limit)]
        complete = len(vals) < limit
        best = vals[0] if vals else None
        vals.sort(key=order_key)
        charge = row_bytes(key) + 64 + limit * (row_bytes((best,)) - 48)
        self.cache.put(key, [vals, complete], charge)
        return best

    def _check(self) -> None:
        """Every cache entry is sorted, at most ``limit`` long, and a sub-multiset of the
        materialized input satisfying the invariant of the module docstring."""
        nk, desc, table = self.nk, self.desc, self.table
        for key in self.cache.keys():
            vals, complete = self.cache.peek(key)
            assert vals == sorted(vals) and len(vals) <= self.limit, (key, vals)
            stored = sorted(row[nk] for row in table.iter_with_prefix(key))
            if complete:
                assert vals == stored, (key, vals, stored)
                continue
            assert vals, key
            worst = vals[-1] if not desc else vals[0]
            better = [v for v in stored if (v < worst if not desc else v > worst)]
            assert sorted(v for v in vals if v != worst) == better, (key, vals, stored)
            assert vals.count(worst) <= stored.count(worst), (key, vals, stored)
