"""TopN and GroupTopN: ``ORDER BY ... LIMIT n OFFSET m [WITH TIES]``, per group or over the
whole input, as a change stream whose materialization equals the batch query at every epoch.

Order. Rows of a group are ordered by the order key (several columns, each with its
:class:`~relational.memcomparable.OrderType`: ASC/DESC, NULLS FIRST/LAST) and then by the input
stream key (ascending): a total, deterministic order, so the rows at the boundary of the window
are always the same ones whatever the arrival order. The visible window of a group is positions
``[offset, offset + limit)`` of that order; ``with_ties`` adds every later row whose order key
equals the one at position ``offset + limit - 1``.

State layout (seed 000, top-n): one state table with the input's columns, keyed by
``group key | order key | input stream key`` (a column already in the key is not repeated),
the order columns in their OrderTypes and the rest ascending, distributed by the group key
(:func:`top_n_state_table` builds it). So a group's rows are one prefix range of the table in
window order, and ``iter_with_prefix(group, start=<last cached row>, limit=k)`` reads the next
``k`` rows of a group.

Retractable inputs (default): every input row is written to the table (``write_chunk``, one
batched call per chunk). Each group has a cache entry (a :class:`_Group`, in a
:class:`~stream.cache.StateCache` under the executor's :class:`~stream.cache.MemoryBudget`)
holding the group's *first* rows in order -- at least the window plus a few below it, unless
the group is smaller (``complete``). Invariant: the cached rows are exactly the group's smallest
``len(cache)`` rows, and ``complete`` means there are no others. A change to a row past the
last cached row of an incomplete group does not touch the cache; when deletes drain the cache
below the window, it refills from the table by one prefix scan starting after its last row.
A cache that grows past a high-water mark is trimmed back (and becomes incomplete).

Append-only inputs (``append_only=True``): rows pushed out of the window can never come back,
so the table holds only each group's window (with its ties); the cache is the whole group's
state. A non-insert op is an :class:`~stream.errors.ExecutorError`.

Output: the input's schema; stream key: the group key then the input's stream key (a row
that changes group is a delete in one group's actor and an insert in another's, which may reach
a downstream merge in either order: with the group in the key they are two keys). Per input
chunk, the window of every group the chunk changes is compared before and after: rows that left
are deletes, rows that entered are inserts, and a row whose stream key stays in the window with
other values is an update pair.
The chunk emits all deletes first, then the pairs, then the inserts, so a key that moves
between groups is deleted before it is inserted. Strict state tables turn an inconsistent input
row into :class:`~stream.errors.InconsistentStreamError` naming this executor and the key.
Watermarks are dropped: a delete can bring an old row back into the window.

:class:`RankedGroupTopN` appends the row's rank in its group (1-based, counting the OFFSET
rows) as a last BIGINT column: the windows compared before and after carry it, so a row whose
rank changes is an update pair (``ROW_NUMBER() OVER (...) AS rn ... WHERE rn <= n`` with rn
selected).

Callers: the planner (ORDER BY ... LIMIT, DISTINCT ON, row_number filters: sql/build.py),
tests, bench/stream_top_n.py.
"""

from __future__ import annotations

from bisect import bisect_left, insort

import pyarrow as pa
import pyarrow.compute as pc

from relational import StateTable
from relational.arrow import to_pylist
from relational.errors import InconsistentOpError
from relational.memcomparable import OrderType, encode_columns, encode_rows, vectorizable
from relational.types import DataType, TypeKind
from stream.cache import _ENTRY_OVERHEAD, default_budget, row_bytes
from stream.chunk import DELETE, INSERT, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor
from stream.schema import Schema

_INSERTS = (INSERT, UPDATE_INSERT)
_ROW_OVERHEAD = 100    # the key bytes' objects and the dict slot of one cached row, roughly


def top_n_layout(stream_key, order_by, group_key=()) -> tuple[list, list]:
    """``(pk_indices, order_types)`` of a top-N state table: group key (ASC), the order key
    (its OrderTypes), the stream key (ASC), each column once (module docstring)."""
    pk, orders = [], []
    for column, order in [(c, OrderType.ASC) for c in group_key] + list(order_by) + \
            [(c, OrderType.ASC) for c in stream_key]:
        if column not in pk:
            pk.append(column)
            orders.append(order)
    return pk, orders


def top_n_state_table(store, table_id: int, schema, stream_key, order_by, group_key=(), **kwargs) -> StateTable:
    """The state table of a (Group)TopN over an input of ``schema`` and ``stream_key``:
    the layout of :func:`top_n_layout`, distributed by the group key, with a prefix hint on it."""
    pk, orders = top_n_layout(stream_key, order_by, group_key)
    kwargs.setdefault("prefix_len_hint", len(group_key) or None)
    return StateTable(store, table_id, schema.pairs(), pk, orders, dist_key_indices=list(group_key), **kwargs)


def encode_keys(columns, types, orders, num_rows: int) -> list:
    """The memcomparable bytes of each of the ``num_rows`` rows of ``columns`` (Arrow arrays) in
    ``orders``: vectorized when every type allows it, else one ``encode_rows`` call."""
    if not columns:
        return [b""] * num_rows
    if all(vectorizable(t) for t in types):
        return encode_columns(columns, types, orders).to_pylist()
    values = [to_pylist(c, t) for c, t in zip(columns, types)]
    return encode_rows(list(zip(*values)), list(types), list(orders))


class _Group:
    """The cached first rows of one group: ``keys`` (sorted sort-key bytes = the table key
    after the group), ``rows`` (key -> (row, order-key bytes)), ``complete`` (no other rows)."""

    __slots__ = ("keys", "rows", "complete", "charge")

    def __init__(self, complete: bool):
        self.keys: list = []
        self.rows: dict = {}
        self.complete = complete
        self.charge = 0

    def add(self, key: bytes, row: tuple, okey: bytes) -> None:
        if not self.keys or key > self.keys[-1]:
            self.keys.append(key)
        else:
            insort(self.keys, key)
        self.rows[key] = (row, okey)
        self.charge += row_bytes(row) + len(key) + len(okey) + _ROW_OVERHEAD

    def remove(self, key: bytes) -> tuple:
        row, okey = self.rows.pop(key)
        del self.keys[bisect_left(self.keys, key)]
        self.charge -= row_bytes(row) + len(key) + len(okey) + _ROW_OVERHEAD
        return row

    def okey(self, i: int) -> bytes:
        return self.rows[self.keys[i]][1]


class GroupTopN(UnaryExecutor):
    """``ORDER BY order_by LIMIT limit OFFSET offset [WITH TIES]`` per ``group_key`` (empty:
    one group, i.e. TopN) over the input, state in ``table`` (module docstring).

    ``order_by``: ``[(column index, OrderType)]``. ``table``: a state table laid out as
    :func:`top_n_state_table` builds it (checked). ``budget``: the MemoryBudget of the group
    cache (None: the process-wide default). ``cache_extra``: rows cached below the window
    after a refill (at least ``limit // 2``), so a few retractions do not each cost a scan."""

    def __init__(self, input, table, order_by, limit: int, offset: int = 0, group_key=(), with_ties: bool = False,
                 append_only: bool = False, budget=None, cache_extra: int = 8, identity: str | None = None):
        identity = identity or f"{'GroupTopN' if group_key else 'TopN'}({table.name})"
        for name, value, low in (("limit", limit, 0), ("offset", offset, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ExecutorError(identity, f"{name} must be an int >= {low}, got {value!r}")
        order_by = [(int(c), o) for c, o in order_by]
        if not order_by or any(not isinstance(o, OrderType) or not 0 <= c < len(input.schema) for c, o in order_by):
            raise ExecutorError(identity, f"order_by must be (column, OrderType) pairs of the input, got {order_by!r}")
        group_key = [int(c) for c in group_key]
        stream_key = group_key + [c for c in input.stream_key if c not in group_key]
        super().__init__(input, stream_key=stream_key, identity=identity)
        pk, orders = top_n_layout(input.stream_key, order_by, group_key)
        if (list(table.types) != list(input.schema.types) or list(table.serde.pk_indices) != pk
                or list(table.serde.order_types) != orders):
            raise ExecutorError(identity, f"the state table must have the input's columns and pk {pk} in "
                                          f"{orders} (top_n_state_table builds it)")
        self.table = table
        self.limit, self.offset, self.with_ties, self.append_only = limit, offset, with_ties, append_only
        self.group_key = group_key
        self._glen = len(group_key)
        self._tail = pk[self._glen:]                  # the sort key: table pk after the group
        self._tail_types = [input.schema.types[c] for c in self._tail]
        self._tail_orders = orders[self._glen:]
        self._order = [c for c in self._tail if c in dict(order_by)]   # order columns in the sort key
        self._order_types = [input.schema.types[c] for c in self._order]
        self._order_orders = self._tail_orders[:len(self._order)]
        self._need = offset + limit
        extra = max(1, cache_extra, limit // 2)
        self._fill = self._need + extra                     # rows a refill brings the cache to
        self._high = self._fill + max(2 * extra, limit)     # trim back to _fill above this
        self.budget = budget if budget is not None else default_budget()
        self.cache = self.budget.cache(identity)

    def state_tables(self) -> list:
        return [self.table]

    def on_init(self, barrier) -> None:
        self.cache.clear()

    def on_watermark(self, watermark):
        return None   # a deletion can bring an old row back into the window: no order to promise

    # --- the group cache ----------------------------------------------------------------------

    def _scan(self, group: tuple, g: _Group, limit: int) -> None:
        """Append the next ``limit`` rows of ``group`` after the cached ones (one prefix scan)."""
        start = None
        if g.keys:
            last = g.rows[g.keys[-1]][0]
            start = tuple(last[c] for c in self._tail)
        rows = list(self.table.iter_with_prefix(group, start=start, start_inclusive=False, limit=limit))
        if len(rows) < limit:
            g.complete = True
        if rows:
            keys = encode_rows([tuple(r[c] for c in self._tail) for r in rows], self._tail_types, self._tail_orders)
            okeys = encode_rows([tuple(r[c] for c in self._order) for r in rows], self._order_types,
                                self._order_orders)
            for key, row, okey in zip(keys, rows, okeys):
                g.add(key, row, okey)

    def _load(self, group: tuple) -> _Group:
        g = self.cache.get(group)
        if g is None:
            g = _Group(False)
            self._scan(group, g, self._fill if not self.append_only else (1 << 62))
            self.cache.put(group, g, g.charge)
        return g

    def _ensure(self, group: tuple, g: _Group) -> bool:
        """Refill ``g`` until it holds the window and, WITH TIES, the row after the last tie;
        True if it read anything (its charge changed)."""
        read = False
        while not g.complete:
            n = len(g.keys)
            if n >= self._need:
                if not self.with_ties or self.limit == 0 or g.okey(n - 1) != g.okey(self._need - 1):
                    break
            self._scan(group, g, max(self._fill - n, self._fill - self._need))
            read = True
        return read

    def _window_end(self, g: _Group) -> int:
        end = min(self._need, len(g.keys))
        if self.with_ties and self.limit and end == self._need:
            boundary = g.okey(end - 1)
            while end < len(g.keys) and g.okey(end) == boundary:
                end += 1
        return end

    def _window(self, g: _Group) -> dict:
        rows = g.rows
        return {k: rows[k][0] for k in g.keys[self.offset:self._window_end(g)]}

    def _trim(self, g: _Group) -> None:
        if len(g.keys) > self._high:
            for key in g.keys[self._fill:]:
                g.remove(key)
            g.complete = False

    # --- chunks -------------------------------------------------------------------------------

    def on_chunk(self, chunk: StreamChunk):
        chunk = chunk.compact()
        n = len(chunk)
        if not n:
            return None
        columns, schema, ops = chunk.columns, chunk.schema, chunk.ops
        if self.append_only and not (ops == INSERT).all():
            raise ExecutorError(self.identity, "an append-only top-N got a delete or update")
        if self._glen:
            groups = list(zip(*[to_pylist(columns[c], schema.types[c]) for c in self.group_key]))
        else:
            groups = None
        # 1. every touched group cached and holding its window, read before this chunk's writes
        touched: dict = {}
        for group in (dict.fromkeys(groups) if groups is not None else ((),)):
            g = self._load(group)
            if self._ensure(group, g):
                self.cache.put(group, g, g.charge)
            touched[group] = g
        # 2. one group: only rows that may sort at or before its last cached row (the window's
        #    last, append-only) can change the cache -- one Arrow compare on the first sort column
        candidates = self._candidates(columns, touched[()]) if groups is None else None
        # 3. the state: every row (retractable), or later only the window (append-only)
        if not self.append_only:
            try:
                self.table.write_chunk(ops, columns)
            except InconsistentOpError as exc:
                raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
            self.table.try_flush()
        if candidates is not None and len(candidates) < n:
            if not candidates:
                g = touched[()]
                self.cache.put((), g, g.charge)   # keep it recent (and back if evicted)
                return None
            at = pa.array(candidates, pa.int64())
            chunk = StreamChunk(ops[candidates], [c.take(at) for c in columns], schema)
        return self._apply(chunk, groups, touched)

    def _candidates(self, columns, g: _Group):
        """Positions of the rows whose first sort column is at or before that of the row that
        bounds what can matter: the last cached row of an incomplete cache (retractable), the
        window's last row of a full window (append-only). None: every row. A superset (ties
        on the first column pass); :meth:`_apply` decides exactly, by the whole key."""
        if self.append_only:
            if len(g.keys) < self._need or not self._need:
                return None
            bound = g.rows[g.keys[self._need - 1]][0]
        else:
            if g.complete:
                return None
            if not g.keys:
                return []
            bound = g.rows[g.keys[-1]][0]
        column, order = self._tail[0], self._tail_orders[0]
        value, values = bound[column], columns[column]
        if self._tail_types[0].kind not in _ARROW_ORDERED_KINDS:
            return None         # NUMERIC is text in Arrow, and NaN compares false there: all rows
        if value is None:
            if not order.nulls_first:
                return None     # NULLs last: every row sorts at or before a NULL
            mask = values.is_null()
        else:
            compare = pc.greater_equal if order.descending else pc.less_equal
            mask = pc.fill_null(compare(values, pa.scalar(value, values.type)), order.nulls_first)
        return mask.to_numpy(zero_copy_only=False).nonzero()[0].tolist()

    def _apply(self, chunk: StreamChunk, groups, touched: dict):
        """Apply the rows of ``chunk`` (their groups ``groups``; None: all in the one group) to
        the cached groups ``touched`` and return the windows' changes."""
        columns, schema, n = chunk.columns, chunk.schema, len(chunk)
        keys = encode_keys([columns[c] for c in self._tail], self._tail_types, self._tail_orders, n)
        if groups is None:
            groups = [()] * n
        pick = [i for i, (key, group) in enumerate(zip(keys, groups)) if self._may_change(touched[group], key)]
        if not pick:
            return None
        ops = chunk.ops
        if len(pick) < n:     # only these rows become Python values
            at = pa.array(pick, pa.int64())
            columns, ops = [c.take(at) for c in columns], ops[pick]
            keys, groups = [keys[i] for i in pick], [groups[i] for i in pick]
        okeys = encode_keys([columns[c] for c in self._order], self._order_types, self._order_orders, len(pick))
        rows = list(zip(*[to_pylist(c, t) for c, t in zip(columns, schema.types)]))
        before: dict = {}      # group -> its window before the chunk, for the groups that change
        state_adds: dict = {}
        state_drops: dict = {}
        for op, key, okey, row, group in zip(ops.tolist(), keys, okeys, rows, groups):
            g = touched[group]
            if group not in before:
                before[group] = self._window(g)
            if self.append_only:
                self._append(g, group, key, okey, row, state_adds, state_drops)
            elif op in _INSERTS:
                if g.complete or (g.keys and key < g.keys[-1]):
                    g.add(key, row, okey)
            elif key in g.rows:
                g.remove(key)
        if self.append_only:
            for row in state_drops.values():
                self.table.delete(row)
            for row in state_adds.values():
                self.table.insert(row)
        deletes, pairs, inserts = [], [], []
        stream_key = self.stream_key     # the group and the input key: pairs stay in a group
        for group, old in before.items():
            g = touched[group]
            if not self.append_only:
                self._trim(g)
                self._ensure(group, g)
            new = self._window(g)
            self.cache.put(group, g, g.charge)   # its new charge (and back, if evicted meanwhile)
            if old == new:
                continue
            gone = {tuple(r[i] for i in stream_key): r for k, r in old.items() if new.get(k) != r}
            came = [r for k, r in new.items() if old.get(k) != r]
            for r in came:
                old_row = gone.pop(tuple(r[i] for i in stream_key), None)
                if old_row is None:
                    inserts.append(r)
                else:
                    pairs.append((old_row, r))
            deletes.extend(gone.values())
        return self._emit(deletes, pairs, inserts)

    def _may_change(self, g: _Group, key: bytes) -> bool:
        """Whether a row with sort key ``key`` can change cached group ``g``: it sorts at or
        before the last cached row or the cache is complete (retractable); it sorts before the
        window's last row, the window is not full, or ties may join (append-only)."""
        if self.append_only:
            return self.with_ties or len(g.keys) < self._need or bool(self._need and key < g.keys[self._need - 1])
        return g.complete or bool(g.keys and key <= g.keys[-1])

    def _append(self, g: _Group, group, key, okey, row, adds: dict, drops: dict) -> None:
        """Append-only: admit ``row`` if it falls inside the window (or ties with its last row),
        then drop what it pushed out, from the cache and (recorded) from the table. ``adds`` and
        ``drops`` are keyed by ``(group, key)``: one input row may sit in several groups (HOP)."""
        n = len(g.keys)
        if n >= self._need:
            last = g.keys[self._need - 1] if self._need else None
            if last is None or not (key < last or (self.with_ties and okey == g.rows[last][1])):
                return
        g.add(key, row, okey)
        adds[group, key] = row
        for gone in g.keys[self._window_end(g):]:
            dropped = g.remove(gone)
            if adds.pop((group, gone), None) is None:
                drops[group, gone] = dropped

    def _emit(self, deletes, pairs, inserts) -> list:
        builder = StreamChunkBuilder(self.schema)
        out = []
        for row in deletes:
            out.append(builder.append(DELETE, row))
        for old, new in pairs:
            out.append(builder.append_update(old, new))
        for row in inserts:
            out.append(builder.append(INSERT, row))
        out.append(builder.take())
        return [c for c in out if c is not None]

    # --- checks -------------------------------------------------------------------------------

    def _check(self) -> None:
        """Every cached group is the prefix of its rows in the table, in order; a complete one
        is all of them; an append-only table holds exactly each cached group's window."""
        self.cache._check()
        for group in self.cache.keys():
            g = self.cache.peek(group)
            assert g.keys == sorted(g.keys) and set(g.keys) == set(g.rows), group
            stored = list(self.table.iter_with_prefix(group))
            cached = [g.rows[k][0] for k in g.keys]
            assert stored[:len(cached)] == cached, (self.identity, group, stored[:len(cached)], cached)
            if g.complete:
                assert len(stored) == len(cached), (self.identity, group, len(stored), len(cached))
            assert g.charge == sum(row_bytes(r) + len(k) + len(o) + _ROW_OVERHEAD for k, (r, o) in g.rows.items())
            assert self.cache.charge_of(group) == g.charge + _ENTRY_OVERHEAD, (self.identity, group)


class TopN(GroupTopN):
    """``ORDER BY ... LIMIT ... OFFSET ...`` over the whole input: a :class:`GroupTopN` with no
    group key (its table is keyed by order key | stream key, in one vnode)."""

    def __init__(self, input, table, order_by, limit: int, offset: int = 0, with_ties: bool = False,
                 append_only: bool = False, budget=None, cache_extra: int = 8, identity: str | None = None):
        super().__init__(input, table, order_by, limit, offset, (), with_ties, append_only, budget, cache_extra,
                         identity)


class RankedGroupTopN(GroupTopN):
    """A :class:`GroupTopN` whose output rows end with their rank in the group (``offset`` +
    position in the window + 1), a BIGINT column named ``rank_name`` (module docstring). Its
    state table is a GroupTopN's (the input's columns); only the output carries the rank."""

    def __init__(self, input, table, order_by, limit: int, offset: int = 0, group_key=(), rank_name: str = "rank",
                 **kwargs):
        super().__init__(input, table, order_by, limit, offset, group_key, **kwargs)
        self.schema = Schema(input.schema.pairs() + [(rank_name, DataType.BIGINT)])

    def _window(self, g: _Group) -> dict:
        rows, first = g.rows, self.offset + 1
        return {k: rows[k][0] + (first + i,) for i, k in enumerate(g.keys[self.offset:self._window_end(g)])}



#: kinds whose Arrow ``<=``/``>=`` is the SQL (memcomparable) order: not REAL/DOUBLE (NaN sorts
#: last in SQL but compares false in Arrow) nor DECIMAL (its values are text in Arrow)
_ARROW_ORDERED_KINDS = frozenset((TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.BOOLEAN,
                                  TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ,
                                  TypeKind.VARCHAR))
