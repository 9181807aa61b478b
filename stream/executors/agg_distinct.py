"""The state of one ``DISTINCT`` aggregate call of a HashAgg/SimpleAgg (``count``, ``sum``,
``avg``, ``string_agg``, ``array_agg`` with ``DISTINCT``): the group's distinct dedup table
(:class:`DistinctValues`), as RisingWave keeps one per distinct aggregate.

- **Distinct dedup** (state table 3. of docs/format.md section 8): ``group key | _v | _count``,
  pk the group key and the value, distribution key the group key; a row exists while the value's
  multiplicity in the group (``_count``) is above zero. Only the rows the call counts are kept:
  its FILTER passed and a non-NULL value, except ``array_agg``, which keeps NULL as one distinct
  element, as Postgres. Every NaN is one value and ``-0.0`` is ``0.0`` (``same_nan``).
- A value whose multiplicity goes from 0 to positive *enters* the call, one that drops back to 0
  *leaves* it; other changes only rewrite the count. ``count`` adds +-1 to its slot; ``sum`` /
  ``avg`` add +- the value's slot deltas (:meth:`AggCall.value_slots` of that one value, the
  stored representation on leaving, so a NUMERIC 1.50 entered as 1.50 leaves as 1.50);
  ``string_agg`` / ``array_agg`` mark the group's value :data:`UNKNOWN`, and the barrier flush
  recomputes it from the group's rows in pk order (:meth:`DistinctValues.value`): Postgres sorts a
  DISTINCT aggregate's input by its argument, so ``_v`` is ASC NULLS LAST, or the direction of the
  call's ORDER BY (which may only name the argument).
- Strict mode (``consistent``): a delete that takes a value's count below zero raises
  :class:`~stream.errors.InconsistentStreamError` naming the group.

Who may call: :mod:`stream.executors.hash_agg` only (one instance per DISTINCT call).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from relational.arrow import to_arrow, to_pylist
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.types import DataType, TypeKind
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT
from stream.errors import InconsistentStreamError
from stream.executors.agg_call import same_nan
from stream.executors.agg_extreme import UNKNOWN

_NAN_KEY_TYPES = (DataType.REAL, DataType.DOUBLE, DataType.DECIMAL)   # one NaN object per value
_UPDATE = (UPDATE_DELETE, UPDATE_INSERT)


class DistinctValues:
    """The distinct dedup table ``table_id`` of DISTINCT call ``call`` (bound) of an aggregation
    whose group key columns are ``key_pairs`` (module docstring); ``write`` is the executor's
    state-table write, ``identity`` names it in errors."""

    def __init__(self, store, table_id, call, key_pairs, *, write, identity: str, dist, vnodes,
                 consistent: bool, flush_threshold: int, name: str):
        nk = len(key_pairs)
        cols = list(key_pairs) + [("_v", call.arg_type), ("_count", DataType.BIGINT)]
        orders = None
        if call.is_ordered:   # the value in the call's order (its ORDER BY names only the argument)
            desc, nulls_first = (call.order[0][1], call.order[0][2]) if call.order else (False, False)
            orders = [OrderType.ASC] * nk + [OrderType(desc, nulls_first)]
        self.table = StateTable(store, table_id, cols, list(range(nk + 1)), orders, dist_key_indices=dist,
                                vnodes=vnodes, consistent=consistent, flush_threshold=flush_threshold, name=name,
                                prefix_len_hint=nk or None)
        self.call, self.identity, self.consistent, self._write = call, identity, consistent, write
        self._integral_sum = call.kind in ("sum", "avg") and call.arg_type.kind in (TypeKind.BIGINT,)

    def row_mask(self, column: pa.Array, fmask) -> np.ndarray:
        """The rows of a chunk the call counts: non-NULL values (``array_agg``: all) where its
        FILTER (``fmask``, or None) passed."""
        if self.call.kind == "array_agg" or column.null_count == 0:
            mask = np.ones(len(column), np.bool_)
        else:
            mask = column.is_valid().to_numpy(zero_copy_only=False)
        return mask if fmask is None else mask & fmask

    def apply(self, at, chunk, sign, mask, inv, keys, states) -> None:
        """Count the values of ``chunk``'s rows in ``mask`` (``sign``: +1/-1 per row; ``inv``:
        each row's group index into ``keys``/``states``) and apply the values that enter or
        leave a group to its state slots from ``at`` (module docstring)."""
        rows = np.flatnonzero(mask)
        if not len(rows):
            return
        c = self.call
        values = to_pylist(chunk.columns[c.arg].take(pa.array(rows)), c.arg_type)
        if c.arg_type in _NAN_KEY_TYPES:   # one NaN, one zero: one distinct value, one state-table key
            values = [None if v is None else same_nan(v) for v in values]
        deltas: dict = {}
        for gi, v, s in zip(inv[rows].tolist(), values, sign[rows].tolist()):
            k = (gi, v)
            deltas[k] = deltas.get(k, 0) + s
        items = [(k, d) for k, d in deltas.items() if d]
        if not items:
            return
        pks = [(*keys[gi], v) for (gi, v), _ in items]
        stored = self.table.get_rows(pks)
        ops, out = [], []
        for ((gi, v), d), pk, row in zip(items, pks, stored):
            old = 0 if row is None else row[-1]
            new = old + d
            if new < 0:
                if self.consistent:
                    raise InconsistentStreamError(self.identity, f"a delete of {c!r} value the group does not have",
                                                  keys[gi])
                new = 0
            if old == 0 and new > 0:
                self._enter(states[gi], at, v, 1)
                ops.append(INSERT)
                out.append((*pk, new))
            elif old > 0 and new == 0:
                self._enter(states[gi], at, row[-2], -1)
                ops.append(DELETE)
                out.append(row)
            elif old != new:
                ops += _UPDATE
                out += [row, (*pk, new)]
        if ops:
            self._write(self.table, np.array(ops, np.int8),
                        [to_arrow(list(col), t) for col, t in zip(zip(*out), self.table.types)])

    def _enter(self, state, at, value, sign: int) -> None:
        """Value ``value`` enters (``sign`` 1) or leaves (-1) the group whose state is ``state``."""
        kind = self.call.kind
        if kind == "count":
            state[at] += sign
        elif kind in ("sum", "avg"):   # (HashAgg runs chunks in the exact NUMERIC context)
            slots = self.call.value_slots([value])
            if self._integral_sum:   # a BIGINT sum's slot holds a Python int (hash_agg ``_int_slots``)
                slots[0] = int(slots[0])
            for k, d in enumerate(slots):
                state[at + k] += d if sign > 0 else -d
        else:
            state[at] = UNKNOWN

    def value(self, key):
        """``string_agg`` / ``array_agg``: group ``key``'s value from its distinct values in
        order (NULL when it has none)."""
        nk = len(key)
        vals = [row[nk] for row in self.table.iter_with_prefix(key)]
        if not vals:
            return None
        if self.call.kind == "array_agg":
            return vals
        return (self.call.sep or "").join(vals)
