"""HashAgg and SimpleAgg: grouped (and ungrouped) aggregation with exact retractions.

Output: the group key columns then one column per :class:`~stream.executors.agg_call.AggCall`;
the stream key is the group key (SimpleAgg: empty, it has one row). Only groups that changed
in an epoch are emitted, before the barrier: a new group as ``+``, a changed one as ``U-``/``U+``
(old and new output), a HashAgg group whose row count drops to 0 as ``-`` (its state rows are
deleted). SimpleAgg always has its one row (``count`` 0, ``sum`` NULL when empty): it is
inserted in the first epoch and only updated afterwards. To bound memory an epoch that touches
more than ``max_dirty_groups`` groups flushes its changed groups early (emitting and writing
them), so a group may change twice in one epoch; every emitted change is exact.

State (seed 000, all through StateTables; ``table_ids``: the value state's, then one per table of
2., 3. and 4. in call order; :func:`agg_table_count`; docs/format.md section 8):

1. value state ``group key | row_count, slots of every call`` (pk: the group key; distribution
   key: the group key). ``row_count`` counts the group's input rows, so an empty group is
   deleted; the slots are agg_call's (for retractable min/max the current result).
2. per min/max call on a retractable input: the materialized input ``group key | value |
   input stream key`` (value ascending for min, descending for max, so the best value is the
   first row of the group's prefix; NULL values are not stored), owned with its cache by a
   :class:`~stream.executors.agg_extreme.RetractableExtreme`.
3. per DISTINCT call (``count``/``sum``/``avg``/``string_agg``/``array_agg``): the distinct dedup
   table ``group key | value -> count``, owned by a
   :class:`~stream.executors.agg_distinct.DistinctValues` (a value entering or leaving a group
   updates the call's slots; string_agg/array_agg are recomputed from it at the flush).
4. per ``string_agg``/``array_agg`` call (append-only inputs too): the ordered materialized
   input ``group key | ORDER BY columns | input stream key -> value``, owned by an
   :class:`~stream.executors.agg_ordered.OrderedInput`; a changed group's value is marked
   unknown and recomputed from its rows in order at the flush.

Caches (:class:`~stream.cache.StateCache` under one budget): group states (per chunk, the
groups not dirty are looked up with one ``get_many``; an evicted group is read again from the
value state, batched with ``get_rows``, and cached with one ``put_many``), and per min/max call the
best ``EXTREME_CACHE_ROWS`` values of a group (a sorted multiset; the invariant: it holds every
stored value strictly better than its worst one and at least one value equal to it, or it is
``complete`` and holds them all), refilled by ``iter_with_prefix(group, limit=...)`` when it
runs empty (:mod:`stream.executors.agg_extreme`). A group not in that cache keeps its current
extreme in the value state: inserts update it directly; a delete of the current extreme marks it
unknown and the barrier refills.
Append-only inputs (``append_only=True``: a delete raises; the planner sets it where the input
can only insert, ``sql.build.agg_append_only``) keep only the extreme itself: the value state is
then the whole state, one row per group. A group whose output did not change in an epoch is
neither emitted nor written, even if rows arrived (its row count is written only with a change
of its output, so there it lags the true count; it is never read but as ``> 0``, and an
append-only group is never deleted).

Per chunk the work is vectorized: one stable sort groups the rows (by an integer key column
itself, else by the key columns' dictionary codes), per-group sums are ``np.add.reduceat``
(append-only numeric extremes ``minimum/maximum.reduceat``), and one generated loop applies
them to the touched groups' states (those kernels: :mod:`stream.executors.agg_kernels`); a
NUMERIC sum is summed as scaled int64 coefficients while its values fit
(:func:`stream.decimal_vec.scaled_decimals`: each group's Decimal rebuilt with the exponent
exact addition gives), row by row in Python otherwise; Python runs per row only for
retractable min/max candidates, distinct values and NUMERIC values that do not fit. With one
integer group-key column the dirty groups are also found by their key value (``_dirty_values``,
a subset of the dirty set: an int-keyed dict is about twice as fast as one-tuple keys, and a
chunk whose groups are all dirty builds no key tuples unless min/max, DISTINCT or ordered
states need them).

Columnar groups: an append-only HashAgg over one SMALLINT/INT/BIGINT key whose calls are all
``count``, ``sum`` and ``min``/``max`` of integers (no DISTINCT) keeps its groups in numpy
columns instead (:mod:`stream.executors.agg_columnar`: no Python per group; the same changes, the
same value state); ``columnar=False`` keeps the per-group states described here.

Strict mode (``consistent=True``, the default): a delete that would take a group's row count,
or a distinct value's count, below zero raises
:class:`~stream.errors.InconsistentStreamError` naming the executor and group; the state tables
check each write against the stored rows too, except an append-only aggregation's value state
(its only writer is the executor and no delete reaches it: relaxed, no probe per update). A
relaxed value state is written each update pair as the insert of its new row, which replaces
the stored one (``_upserts``): half the rows to encode, and no per-record merge.

Representations: values equal but not identical (NUMERIC 1.5 and 1.50; the planner's keys use
Python equality, the state tables memcomparable keys) are one group. A stored group keeps the key
and slot representation it was first written with: ``_flush`` emits and writes its changes under
the stored key, and a state equal to the stored one only as a value is reset to it, so every
``U-``/``-`` (value state and output) is exactly the stored/emitted row.

Invariants (``_check``): a cached group state not changed in this epoch equals its value-state
row; an extreme cache is
sorted, at most ``EXTREME_CACHE_ROWS`` long, and a sub-multiset of the materialized input that
satisfies the invariant above.

Callers: the planner (GROUP BY), tests, bench/stream_agg.py.
"""

from __future__ import annotations

import decimal
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type, to_arrow, to_pylist
from relational.errors import InconsistentOpError
from relational.state_table import StateTable
from relational.types import DataType, TypeKind
from stream.cache import default_budget, row_bytes
from stream.chunk import DEFAULT_CHUNK_SIZE, DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor
from stream.message import Watermark
from stream.executors.agg_call import EXACT_SUMS, additive_weights, filter_mask, same_nan, valid_mask
from stream.decimal_vec import ScaledDecimals
from stream.executors.agg_extreme import UNKNOWN as _UNKNOWN
from stream.executors.agg_extreme import RetractableExtreme
from stream.executors.agg_ordered import OrderedInput
from stream.executors.agg_distinct import DistinctValues
from stream.executors.agg_columnar import ColumnarGroups, columnar_eligible
from stream.executors.agg_kernels import group_best as _group_best
from stream.executors.agg_kernels import group_ids as _group_ids
from stream.executors.agg_kernels import make_adder as _make_adder
from stream.executors.agg_kernels import merge_equal_keys as _merge_equal_keys
from stream.schema import Schema

EXTREME_CACHE_ROWS = 16
DEFAULT_MAX_DIRTY_GROUPS = 1 << 17   # ~400 B each with its old state: ~50 MiB at most; an epoch of
                                     # up to 128k groups emits each group once (at 1 << 14 a 100k-group
                                     # epoch flushed every 16k rows: 3.5x the CPU)
DEFAULT_FLUSH_BYTES = 16 << 20   # MemTable spill threshold of the state tables (real bytes: the
                                 # MemTable charges CPython's per-record overhead)
_STATE_OVERHEAD = 160   # bytes per cached group besides its key and state list (dict slots)
_UPDATE = (UPDATE_DELETE, UPDATE_INSERT)
_NAN_KEY_TYPES = (DataType.REAL, DataType.DOUBLE, DataType.DECIMAL)   # one NaN object per key/value


def agg_table_count(calls, append_only: bool = False) -> int:
    """How many state tables (table ids) an aggregation with ``calls`` needs."""
    return 1 + sum(1 for c in calls if (c.is_extreme and not append_only) or c.distinct or c.is_ordered)


class HashAgg(UnaryExecutor):
    """Grouped aggregation (module docstring). ``group_key``: input column indices;
    ``calls``: AggCalls; ``table_ids``: ``agg_table_count(calls, append_only)`` ids."""

    keep_empty_group = False

    def __init__(self, input, group_key, calls, store, table_ids, *, append_only: bool = False,
                 vnodes=None, consistent: bool = True, budget=None, names=None,
                 max_dirty_groups: int = DEFAULT_MAX_DIRTY_GROUPS, extreme_cache_rows: int = EXTREME_CACHE_ROWS,
                 flush_threshold: int = DEFAULT_FLUSH_BYTES,
                 identity: str | None = None, columnar: bool = True):
        identity = identity or f"{type(self).__name__}({', '.join(map(repr, calls))})"
        in_schema = input.schema
        group_key = list(group_key)
        for i in group_key:
            if not 0 <= i < len(in_schema):
                raise ExecutorError(identity, f"group key column {i} is not in {in_schema!r}")
        calls = [c.bind(in_schema) for c in calls]
        if not calls:
            raise ExecutorError(identity, "an aggregation needs at least one call")
        table_ids = list(table_ids)
        if len(table_ids) != agg_table_count(calls, append_only):
            raise ExecutorError(identity, f"needs {agg_table_count(calls, append_only)} table ids, got {len(table_ids)}")
        if self.keep_empty_group and group_key:
            raise ExecutorError(identity, "SimpleAgg has no group key")
        key_pairs = [(in_schema.names[i], in_schema.types[i]) for i in group_key]
        names = list(names) if names is not None else [f"agg{j}" for j in range(len(calls))]
        out = Schema(key_pairs + [(n, c.return_type) for n, c in zip(names, calls)])
        super().__init__(input, out, list(range(len(group_key))), identity)
        self.group_key, self.calls, self.append_only = group_key, calls, append_only
        self.consistent = consistent
        self.max_dirty_groups = max_dirty_groups
        if extreme_cache_rows < 1:
            raise ExecutorError(identity, f"extreme_cache_rows must be >= 1, got {extreme_cache_rows}")
        self.extreme_cache_rows = extreme_cache_rows
        nk = len(group_key)
        dist = list(range(nk)) if nk else None
        # 1. value state: key | row_count | slots
        self.slots = []        # per call: (first slot index in the state list, width)
        state_cols = list(key_pairs) + [("_row_count", DataType.BIGINT)]
        at = 1
        for j, c in enumerate(calls):
            self.slots.append((at, len(c.slot_types)))
            state_cols += [(f"_s{j}_{k}", t) for k, t in enumerate(c.slot_types)]
            at += len(c.slot_types)
        self.width = at
        initial = [0]
        for c in calls:
            initial += c.initial_slots()
        self._initial = tuple(initial)
        self._adders: dict = {}   # which delta list each additive slot takes -> generated adder
        # DECIMAL slots holding integral sums (BIGINT, INTERVAL microseconds): kept as Python
        # ints, so ``_flush`` converts them to Arrow vectorized (``_column``)
        self._int_slots = [self.slots[j][0] for j, c in enumerate(calls) if c.kind in ("sum", "avg")
                           and c.arg_type.kind in (TypeKind.BIGINT, TypeKind.INTERVAL)]
        self._extreme_slots = [(self.slots[j][0], c.kind, c.arg_type not in _NAN_KEY_TYPES)
                               for j, c in enumerate(calls) if c.is_extreme and append_only]
        ids = iter(table_ids)
        self.budget = budget if budget is not None else default_budget()
        self.groups = self.budget.cache(f"{identity}.groups")
        # an append-only aggregation's value state is relaxed: no probe of the stored row per
        # update (its only writer is this executor, and no input delete can reach it)
        self.value_table = StateTable(store, next(ids), state_cols, list(range(nk)), dist_key_indices=dist,
                                      vnodes=vnodes, consistent=consistent and not append_only,
                                      flush_threshold=flush_threshold, name=f"{identity}.value",
                                      prefix_len_hint=nk or None)
        # 2./3. materialized inputs and distinct tables
        in_key = list(input.stream_key)
        self.extreme = {}      # call index -> RetractableExtreme (agg_extreme.py)
        self.distinct = {}     # call index -> DistinctValues (agg_distinct.py)
        self.ordered = {}      # call index -> OrderedInput (agg_ordered.py): string_agg/array_agg
        for j, c in enumerate(calls):
            # (an input without a stream key has at most one row -- a global aggregate's --, so
            # the materialized inputs' keys stay unique without it)
            if c.distinct:
                self.distinct[j] = DistinctValues(
                    store, next(ids), c, key_pairs, write=self._write, identity=identity, dist=dist, vnodes=vnodes,
                    consistent=consistent, flush_threshold=flush_threshold, name=f"{identity}.distinct{j}")
                continue
            if c.is_ordered:
                self.ordered[j] = OrderedInput(
                    store, next(ids), c, key_pairs, group_key, in_schema, in_key, write=self._write, dist=dist,
                    vnodes=vnodes, consistent=consistent, flush_threshold=flush_threshold, name=f"{identity}.ordered{j}")
                continue
            if c.is_extreme and not append_only:
                self.extreme[j] = RetractableExtreme(
                    store, next(ids), c, key_pairs, group_key, in_schema, in_key,
                    cache=self.budget.cache(f"{identity}.extreme{j}"), limit=extreme_cache_rows, write=self._write,
                    identity=identity, consistent=consistent, dist=dist, vnodes=vnodes,
                    flush_threshold=flush_threshold, name=f"{identity}.input{j}")
        self._dirty: dict = {}  # group key -> state list (changed this epoch)
        self._old: dict = {}    # group key -> its state tuple before this epoch (None: new)
        self._dirty_values: dict = {}   # one integer key column: key value -> the state list of
                                        # ``_dirty[(value,)]`` (a subset of ``_dirty``; ``_states_of``)
        self._key_types = [in_schema.types[i] for i in group_key]
        # a NUMERIC key has many representations of one value (1.5, 1.50): a stored group keeps the
        # one it was first written with, and every change of it (U-/U+/-) is emitted and written
        # with exactly that one (``_flush``), so the value state and downstream see one stable row
        self._scaled_key = DataType.DECIMAL in self._key_types
        # bytes charged per cached group: a key of small scalars, the state list, dict slots
        self._group_charge = row_bytes([None] * nk) + 32 * nk + row_bytes(self._initial) + 32 * self.width \
            + _STATE_OVERHEAD
        # append-only over one integer key with count/sum/min/max of integers: the groups'
        # states in numpy columns (stream/executors/agg_columnar.py); ``columnar=False`` keeps
        # the per-group states below (the tests' reference)
        self._columnar = ColumnarGroups(self) if columnar and columnar_eligible(self) else None

    # --- executor hooks ---------------------------------------------------------------------------

    def state_tables(self) -> list:
        return [self.value_table, *(e.table for e in self.extreme.values()), *(d.table for d in self.distinct.values()),
                *(o.table for o in self.ordered.values())]

    def on_init(self, barrier) -> None:
        self._reset()
        if self.keep_empty_group:
            row = self.value_table.get_row(())
            if row is None:   # the first epoch ever: the empty row is inserted at its barrier
                self._dirty[()] = self._new_state()
                self._old[()] = None

    def on_vnodes_changed(self, barrier) -> None:
        if barrier.mutation is not None:
            self._reset()

    def _reset(self) -> None:
        if self._columnar is not None:
            self._columnar.reset()
        self._dirty.clear()
        self._dirty_values.clear()
        self._old.clear()
        self.groups.clear()
        for extreme in self.extreme.values():
            extreme.cache.clear()

    def on_barrier(self, barrier):
        return self._flushed_then_watermarks(self._flush())

    def on_watermark(self, watermark):
        """A watermark on a group-key column is held, renumbered to its output column, until
        the next barrier's flush has emitted every group changed before it (a group below it
        changed earlier in the epoch is still to be emitted); a watermark on any other column
        is dropped (an aggregate's value has no event-time order)."""
        if watermark.column not in self.group_key:
            return None
        held = self.__dict__.setdefault("_held_watermarks", {})
        out = self.group_key.index(watermark.column)
        if out not in held or watermark.value > held[out]:
            held[out] = watermark.value
        return None

    def _flushed_then_watermarks(self, flushed):
        """``flushed`` (the flush's messages) followed by the held watermarks."""
        held = self.__dict__.get("_held_watermarks")
        if not held:
            return flushed
        out = [] if flushed is None else [flushed] if type(flushed) is StreamChunk else list(flushed)
        out += [Watermark(column, value) for column, value in sorted(held.items())]
        held.clear()
        return out

    def on_chunk(self, chunk: StreamChunk):
        with decimal.localcontext(EXACT_SUMS):   # NUMERIC sums are exact at any size
            return self._on_chunk(chunk)

    def _on_chunk(self, chunk: StreamChunk):
        chunk = chunk.compact()
        n = len(chunk)
        if not n:
            return None
        ops = chunk.ops
        negative = (ops == DELETE) | (ops == UPDATE_DELETE)
        if self.append_only and negative.any():
            raise ExecutorError(self.identity, "a delete reached an append-only aggregation")
        if self._columnar is not None:
            return self._columnar.on_chunk(chunk, n)
        sign = np.where(negative, -1, 1).astype(np.int64)
        columns = chunk.columns
        inv, order, starts, uniq = _group_ids([columns[i] for i in self.group_key], n)
        g = len(starts)
        values = None   # one integer key column without NULLs: the groups' key values, sorted
        if uniq is not None:
            values = uniq.tolist()
            keys = None     # built only when needed (``_states_of``)
        else:
            keys = self._keys(columns, order[starts] if order is not None else np.zeros(1, np.int64), g)
            if g > 1 and len(set(keys)) != g:   # Arrow-distinct, SQL-equal keys: 1.0 and 1.00, -0.0 and 0.0
                inv, order, starts, keys = _merge_equal_keys(keys, inv)
                g = len(keys)
        if g == 1:
            order = None

        memo = {}   # id(array) -> (array, per-group sums): count(*) and non-NULL counts share the signs

        def gsum(x):
            hit = memo.get(id(x))
            if hit is not None:
                return hit[1]
            out = _gsum(x)
            memo[id(x)] = (x, out)
            return out

        def _gsum(x):
            if isinstance(x, np.ndarray):   # a float sum may overflow: AggCall.result_column reports it
                with np.errstate(over="ignore", invalid="ignore"):
                    return [x.sum().item()] if order is None else np.add.reduceat(x[order], starts).tolist()
            if order is None:
                return [sum(x)]
            out = [0] * g
            for gi, v in zip(inv.tolist(), x):
                if type(v) is not int or v:   # a Decimal('0.0') counts: its scale is the sum's
                    out[gi] += v
            return out

        additive = [(0, gsum(sign))]   # (state index, per-group deltas)
        extreme_rows = []              # (call index, slot, row mask) of retractable extremes
        best_inserted = []             # (slot, per-group best, kind) of append-only extremes
        distinct_rows = []
        ordered_rows = []              # (call index, slot, row mask) of string_agg/array_agg
        for j, c in enumerate(self.calls):
            at, _ = self.slots[j]
            fmask = filter_mask(c, columns, n)
            if c.distinct:
                distinct_rows.append((j, at, self.distinct[j].row_mask(columns[c.arg], fmask)))
                continue
            if c.is_ordered:   # string_agg skips NULL values, array_agg keeps them
                mask = valid_mask(columns[c.arg]) if c.kind == "string_agg" else np.ones(n, np.bool_)
                ordered_rows.append((j, at, mask if fmask is None else mask & fmask))
                continue
            if c.arg is None:
                w = sign if fmask is None else sign * fmask
                additive.append((at, gsum(w)))
                continue
            col = columns[c.arg]
            mask = valid_mask(col)
            if fmask is not None:
                mask &= fmask
            if c.is_extreme:
                if j in self.extreme:
                    extreme_rows.append((j, at, mask))
                else:
                    best_inserted.append((at, _group_best(inv, order, starts, col, mask, g, c), c.kind))
                continue
            w = sign if fmask is None and col.null_count == 0 else sign * mask
            for k, d in enumerate(additive_weights(c, col, w)):
                if type(d) is tuple:   # a bigint sum's (high, low) halves
                    hi, lo = gsum(d[0]), gsum(d[1])
                    additive.append((at + k, [(h << 32) + l for h, l in zip(hi, lo)]))
                elif type(d) is ScaledDecimals:   # NUMERIC as scaled int64 halves, each group's scale
                    scales = [int(d.scales.max())] if order is None else \
                        np.maximum.reduceat(d.scales[order], starts).tolist()
                    additive.append((at + k, d.combine(gsum(d.hi), gsum(d.lo), scales)))
                else:
                    additive.append((at + k, gsum(d)))
        if values is None:
            states = self._load(keys)
        else:
            keys, states = self._states_of(values, bool(extreme_rows or distinct_rows or ordered_rows))
        self._apply(keys, states, additive, best_inserted)
        for j, at, mask in extreme_rows:
            self.extreme[j].apply(at, chunk, sign, mask, inv, keys, states)
        for j, at, mask in distinct_rows:
            self.distinct[j].apply(at, chunk, sign, mask, inv, keys, states)
        for j, at, mask in ordered_rows:
            self.ordered[j].apply(at, chunk, mask, inv, states)
        if len(self._dirty) > self.max_dirty_groups:
            return self._flush()
        return None

    def _additive_slots(self) -> list:
        """The state indices ``on_chunk`` adds deltas to, in the order it lists them."""
        ats = [0]
        for c, (at, width) in zip(self.calls, self.slots):
            if c.arg is None:
                ats.append(at)
            elif not c.is_extreme and not c.distinct and not c.is_ordered:
                ats += range(at, at + width)
        return ats

    # --- groups -----------------------------------------------------------------------------------

    def _keys(self, columns, first, g) -> list:
        if not self.group_key:
            return [()]
        idx = pa.array(first)
        cols = [to_pylist(columns[i].take(idx), t) for i, t in zip(self.group_key, self._key_types)]
        for i, t in enumerate(self._key_types):   # one NaN object: dict lookups then find the group
            if t in _NAN_KEY_TYPES:
                cols[i] = [same_nan(v) for v in cols[i]]
        if len(cols) == 1:
            return [(v,) for v in cols[0]]
        return list(zip(*cols))

    def _new_state(self) -> list:
        return list(self._initial)

    def _load(self, keys) -> list:
        """The state lists of ``keys`` (made dirty: their old state is remembered), reading the
        groups missing from the dirty set from the cache in one ``get_many`` and those missing
        there too with one ``get_rows`` (then cached with one ``put_many``)."""
        dirty = self._dirty
        states = list(map(dirty.get, keys))
        if None not in states:
            return states
        old, cache = self._old, self.groups
        found: dict = {}
        missing = cache.get_many([key for key, state in zip(keys, states) if state is None], found)
        for key, state in found.items():
            dirty[key] = state
            old[key] = tuple(state)
        if missing:   # read, then cache (a dirty group stays in ``dirty`` if the cache evicts it)
            nk = len(self.group_key)
            rows = self.value_table.get_rows(missing)
            charge, initial, int_slots = self._group_charge, self._initial, self._int_slots
            puts = []
            for key, row in zip(missing, rows):
                if row is None:
                    state = list(initial)
                    old[key] = None
                else:
                    state = list(row[nk:])
                    for at in int_slots:   # an integral sum read back as Decimal: an int again
                        v = state[at]
                        if type(v) is decimal.Decimal and v.is_finite() and v.as_tuple().exponent == 0:
                            state[at] = int(v)
                    old[key] = tuple(state)
                dirty[key] = state
                puts.append((key, state, charge))
            cache.put_many(puts)
        return list(map(dirty.get, keys))

    def _states_of(self, values, need_keys: bool) -> tuple:
        """``(keys, states)`` of the groups whose one integer key column holds ``values``: the
        states by ``_dirty_values`` (an int-keyed dict hashes and compares faster than one-tuple
        keys, and the tuples need not be built per chunk), those not dirty yet by ``_load``;
        ``keys`` are the ints themselves unless ``need_keys`` (the extreme, distinct and ordered
        states take key tuples)."""
        fast = self._dirty_values
        states = list(map(fast.get, values))
        if None in states:   # ``_load`` the others (made dirty), then remember them here
            miss = [i for i, state in enumerate(states) if state is None]
            miss_values = [values[i] for i in miss]
            loaded = self._load([(v,) for v in miss_values])
            for i, state in zip(miss, loaded):
                states[i] = state
            fast.update(zip(miss_values, loaded))
        return ([(v,) for v in values] if need_keys else values), states

    def _apply(self, keys, states, additive, best_inserted) -> None:
        lists, ids, sources = [], {}, []   # slots sharing one delta list (by identity) share a loop variable
        for _, deltas in additive:
            i = ids.get(id(deltas))
            if i is None:
                i = ids[id(deltas)] = len(lists)
                lists.append(deltas)
            sources.append(i)
        pattern = tuple(sources)
        add = self._adders.get(pattern)
        if add is None:
            add = self._adders[pattern] = _make_adder(list(zip(self._additive_slots(), sources)), len(lists),
                                                      self._extreme_slots, self.consistent, self._negative_group)
        add(keys, states, *lists, *[bests for _, bests, _ in best_inserted])

    def _negative_group(self, key):
        key = key if type(key) is tuple else (key,)   # ``_states_of``'s int keys
        raise InconsistentStreamError(self.identity, "a delete of a row the group does not have", key)

    def _write(self, table, ops, columns, visibility=None) -> None:
        try:
            table.write_chunk(ops, columns, visibility)
        except InconsistentOpError as exc:
            raise InconsistentStreamError(self.identity, f"{table.name}: {exc.reason}", exc.pk) from exc
        table.try_flush()   # spill a large epoch inside it (bounded memory)

    # --- output -------------------------------------------------------------------------------------

    def _flush(self):
        """Write every dirty group's state and return its changes (chunks of at most
        ``DEFAULT_CHUNK_SIZE`` rows, update pairs kept together). Column-wise: the changes are
        ``(op, key, state)`` triples whose ops are the same for the value state and the output."""
        if self._columnar is not None:
            out = self._columnar.flush()
            return None if out is None else _split(out)
        if not self._dirty:
            return None
        dirty, self._dirty = self._dirty, {}
        olds, self._old = self._old, {}
        self._dirty_values = {}
        keep_empty, append_only = self.keep_empty_group, self.append_only
        cache = self.groups
        extremes = [(j, self.slots[j][0]) for j in self.extreme]
        ordered = [(o, self.slots[j][0]) for j, o in self.ordered.items()] + \
            [(d, self.slots[j][0]) for j, d in self.distinct.items() if d.call.is_ordered]
        ops, keys, states = [], [], []
        hidden = []   # positions of update pairs whose output does not change (state only)
        stored = self._stored_keys(dirty, olds) if self._scaled_key else None
        for key, state in dirty.items():
            # out_key: the key as stored (its NUMERIC scale); lookups keep ``key`` itself (a NaN
            # in a key is only found in a dict by identity)
            out_key = stored.get(key, key) if stored is not None else key
            for j, at in extremes:
                if state[at] is _UNKNOWN:
                    state[at] = self.extreme[j].refill(key)
            for o, at in ordered:
                if state[at] is _UNKNOWN:
                    state[at] = o.value(key)
            new = tuple(state)
            old = olds[key]
            if new == old:   # equal as values; keep the stored representation (1.5, not 1.50)
                state[:] = old
                continue
            was = old is not None   # a stored HashAgg group always has rows
            if keep_empty or new[0] > 0:
                if was:
                    if old[1:] == new[1:]:   # only the row count changed: the same output
                        if append_only:      # nothing to emit or write (the row count lags:
                            state[:] = old   # module docstring)
                            continue
                        state[1:] = old[1:]  # the slots keep the representation emitted before
                        new = tuple(state)
                        hidden += (len(ops), len(ops) + 1)
                    ops += _UPDATE
                    keys += (out_key, out_key)
                    states += (old, new)
                else:
                    ops.append(INSERT)
                    keys.append(out_key)
                    states.append(new)
            else:
                cache.pop(key, None)
                for j, _ in extremes:
                    self.extreme[j].cache.pop(key, None)
                if was:
                    ops.append(DELETE)
                    keys.append(out_key)
                    states.append(old)
        if not ops:
            return None
        ops = np.array(ops, np.int8)
        nk = len(self.group_key)
        # columns by item getters, not ``zip(*rows)``: that builds an iterator per row (a burst
        # of GC-tracked objects) and tuples the next steps convert back to lists
        key_cols = [to_arrow(list(map(itemgetter(i), keys)), t) for i, t in enumerate(self._key_types)]
        slot_cols = [list(map(itemgetter(i), states)) for i in range(self.width)]
        state_cols = [_column(col, t) for col, t in zip(slot_cols, self.value_table.types[nk:])]
        self._write(self.value_table, *_upserts(self.value_table, ops, key_cols + state_cols))
        results = []
        for c, (at, width) in zip(self.calls, self.slots):
            if c.kind == "count" or c.is_extreme:   # the slot is the result, same type
                results.append(state_cols[at])
            elif _plain_sum(c):   # the total where the group has a value (count > 0), else NULL
                results.append(_where_counted(state_cols[at], state_cols[at + 1]))
            else:
                results.append(_column(c.result_column(slot_cols[at:at + width], self.identity, keys),
                                       c.return_type))
        out = StreamChunk(ops, key_cols + results, self.schema)
        if hidden:
            visible = np.ones(len(ops), np.bool_)
            visible[hidden] = False
            if not visible.any():
                return None
            out = out.with_visibility(visible).compact()
        return _split(out)


    def _stored_keys(self, dirty, olds) -> dict:
        """Group key -> the key as the value state stores it, for the dirty groups stored before
        this epoch (a NUMERIC key equal as a value may carry another scale than the stored one)."""
        was = [key for key in dirty if olds[key] is not None]
        if not was:
            return {}
        nk = len(self.group_key)
        out = {}
        for key, row in zip(was, self.value_table.get_rows(was)):
            if row is not None:
                out[key] = tuple(row[:nk])
        return out

    # --- checks -------------------------------------------------------------------------------------

    def _check(self) -> None:
        """Cached states equal the value state; extreme caches keep their invariant."""
        if self._columnar is not None:
            self._columnar._check()
            self.budget._check()
            return
        nk = len(self.group_key)
        for value, state in self._dirty_values.items():
            assert self._dirty[(value,)] is state, value
        for key in self.groups.keys():
            if key in self._dirty:
                continue
            row = self.value_table.get_row(key)
            assert row is not None and tuple(row[nk:]) == tuple(self.groups.peek(key)), (key, row)
        for extreme in self.extreme.values():
            extreme._check()
        self.budget._check()


class SimpleAgg(HashAgg):
    """Aggregation without a group key: one output row, present even when the input is empty
    (module docstring)."""

    keep_empty_group = True

    def __init__(self, input, calls, store, table_ids, **kwargs):
        super().__init__(input, [], calls, store, table_ids, **kwargs)


def _split(chunk: StreamChunk) -> list:
    """``chunk`` as chunks of at most ``DEFAULT_CHUNK_SIZE`` rows (one more to keep a pair)."""
    n = len(chunk)
    if n <= DEFAULT_CHUNK_SIZE:
        return [chunk]
    out, at = [], 0
    ops = chunk.ops
    while at < n:
        end = min(at + DEFAULT_CHUNK_SIZE, n)
        if end < n and ops[end - 1] == UPDATE_DELETE:
            end += 1
        out.append(StreamChunk(ops[at:end], [c.slice(at, end - at) for c in chunk.columns], chunk.schema))
        at = end
    return out


def _upserts(table, ops, columns) -> tuple:
    """``(ops, columns)`` to write into ``table`` for the changes ``ops``/``columns``, whose
    update pairs keep their key (U- and U+ of one group): a strict table takes them as they
    are (it checks each old row); a relaxed one, where an insert over a row replaces it
    (relational/mem_table.py), takes each pair as the insert of its new row -- half the rows
    to encode, and a chunk without deletes becomes an all-insert run (no merge per record)."""
    if table.consistent:
        return ops, columns
    keep = ops != UPDATE_DELETE
    if keep.all():
        return ops, columns
    at = np.flatnonzero(keep)
    new_ops = ops[at]
    new_ops[new_ops == UPDATE_INSERT] = INSERT
    idx = pa.array(at)
    return new_ops, [c.take(idx) for c in columns]


_INT_OR_NONE = frozenset((int, type(None)))


def _plain_sum(call) -> bool:
    """Whether ``call``'s result is its total slot where its count slot is > 0, else NULL, of
    the slot's own type (``AggCall.result_column`` computes the same): a sum whose slots are
    ``[total, count]`` (no NaN/Infinity counters), not of floats (overflow is an error there)
    or intervals, returning the total's type."""
    return call.kind == "sum" and len(call.slot_types) == 2 and call.return_type == call.slot_types[0] \
        and call.arg_type.kind not in (TypeKind.REAL, TypeKind.DOUBLE, TypeKind.INTERVAL)


def _where_counted(totals: pa.Array, counts: pa.Array) -> pa.Array:
    """``totals`` with NULL where ``counts`` is 0 (the state column as it was built)."""
    present = counts.to_numpy(zero_copy_only=False) > 0
    if present.all():
        return totals
    return pc.if_else(pa.array(present), totals, pa.nulls(len(totals), totals.type))


def _column(values, dtype: DataType) -> pa.Array:
    """``to_arrow(values, dtype)``, vectorized for a DECIMAL column of Python ints (a BIGINT or
    INTERVAL sum: the text of an int is its NUMERIC text) that fit int64: Arrow infers int64
    only when every value is an int or None (a Decimal, float or bool makes it infer another
    type or fail), and its int-to-string cast is ``str``'s."""
    if dtype.kind == TypeKind.DECIMAL:
        values = values if isinstance(values, list) else list(values)
        first = next((v for v in values if v is not None), None)
        if type(first) is int and _INT_OR_NONE.issuperset(map(type, values)):
            try:   # typed (no inference pass: the types are checked above, as a typed
                arr = pa.array(values, pa.int64())   # conversion truncates a Decimal or float)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
                arr = None   # beyond int64
            if arr is not None:
                return arr.cast(pa.string())
        # Decimals (or ints beyond int64): each value's own text, as ``to_arrow`` writes it
        return pa.array([None if v is None else str(v) for v in values], arrow_type(dtype))
    return to_arrow(list(values), dtype)

