"""OverWindow: window aggregates ``agg(x) OVER (PARTITION BY .. ORDER BY .. <frame>)`` as a
change stream (RisingWave's OverWindow executor).

Output: every input row followed by one column per window call; stream key: the input's.
Calls: ``count`` (``arg`` None: count(*)), ``sum``, ``avg``, ``min``, ``max`` -- result types
and values exactly as the plain aggregate's (:class:`~stream.executors.agg_call.AggCall`:
``avg`` of integers is a NUMERIC with Postgres' division scale, ``sum(int)`` is BIGINT) -- and
the window functions of :class:`NavCall`: ``row_number`` (EXCEPT ALL / INTERSECT ALL number
the copies of a row with it), ``rank``, ``dense_rank``, ``percent_rank``,
``cume_dist``, ``ntile`` (peers: equal order keys; no ORDER BY: all rows are peers), ``lag`` /
``lead`` (by rows of the partition in window order, stream key breaking ties), ``first_value``,
``last_value``, ``nth_value`` (of the frame). A call is ``(kind, arg)`` or ``(kind, arg,
params)`` (NavCall's constants).

Frames (:data:`Frame`, shared by the calls of one executor):
- ``("rows", n)``: ``ROWS BETWEEN n PRECEDING AND CURRENT ROW`` (``n`` 0: the row alone);
- ``("rows", None)``: ``ROWS UNBOUNDED PRECEDING`` (the partition's rows up to this one);
- ``("range", None)``: ``RANGE UNBOUNDED PRECEDING`` (the default with ORDER BY: up to the
  row's last peer -- rows with equal order columns; no ORDER BY: the whole partition);
- ``("all", None)``: ``ROWS/RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING``.
An executor holding a frame-independent NavCall (ranking, lag/lead) recomputes whole partitions
whatever its frame (a row's rank depends on rows after it).

Order within a partition: the order columns in their OrderTypes, then the input stream key
ascending -- the memcomparable key of a top-N state table
(:func:`~stream.executors.top_n.top_n_state_table` builds this executor's table: partition |
order | stream key), so ties are broken identically in stream and batch.

State: the state table holds every input row (no cache). Per chunk, each partition the chunk
touches is read before and after the chunk's writes (one prefix scan each, rows in window
order), its outputs computed by :func:`window_values` both times, and the outputs compared by
stream key across all touched partitions: a changed row is an update pair, a vanished one a
delete, a new one an insert (deletes, then pairs, then inserts). Recovery needs nothing: the
state table is the whole state. Cost: per chunk, O(size of the touched partitions) -- except
for ``ROWS n PRECEDING``, where only the rows from the partition's first changed position to
``n`` rows past its last one (and the ``n`` rows before, their frames) are read, once, and the
chunk's changes applied to them in memory: a row's output depends only on its ``n``
predecessors, so rows before the first change and more than ``n`` after the last keep theirs.
Watermarks are dropped.

Callers: :mod:`sql.build` (plan node ``OverWindow``), :mod:`sql.batch.execute` (batch uses
:func:`window_values`), tests/test_stream_over_window.py.
"""

from __future__ import annotations

import decimal

from relational.errors import InconsistentOpError
from relational.memcomparable import OrderType, encode_rows
from stream.chunk import DELETE, INSERT, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import UnaryExecutor
from relational.types import DataType
from stream.executors.agg_call import EXACT_SUMS, AggCall
from stream.expr_errors import data_error
from stream.executors.top_n import top_n_layout
from stream.schema import Schema

WINDOW_KINDS = ("count", "sum", "avg", "min", "max")
#: window functions that are no aggregate: ranking (the frame does not matter), offsets into the
#: partition (lag/lead: neither does it) and values of the frame (first/last/nth_value)
NAV_KINDS = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
             "first_value", "last_value", "nth_value")
FRAMELESS = ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead")
_INSERTS = (INSERT, UPDATE_INSERT)


def check_frame(frame) -> tuple:
    kind, n = frame
    if kind not in ("rows", "range", "all") or (kind in ("range", "all") and n is not None) or \
            (n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0)):
        raise ExecutorError("OverWindow", f"unsupported frame {frame!r}")
    return kind, n


class NavCall:
    """One ranking / offset / frame-value window function (``NAV_KINDS``): ``arg`` the input
    column (None for the ranking functions), ``params`` its constants -- ``ntile``: (buckets,);
    ``lag``/``lead``: (offset, default); ``nth_value``: (n,) -- and ``return_type``: BIGINT for
    rank/dense_rank, DOUBLE for percent_rank/cume_dist, INT for ntile, else the argument's type.
    A NULL constant makes every value NULL; ntile's and nth_value's must be > 0 (a data error
    otherwise, as Postgres)."""

    def __init__(self, kind: str, arg, params, schema):
        if kind not in NAV_KINDS:
            raise ExecutorError("OverWindow", f"window function {kind} is not supported")
        self.kind, self.arg, self.params = kind, arg, tuple(params)
        if kind in ("row_number", "rank", "dense_rank"):
            self.return_type = DataType.BIGINT
        elif kind in ("percent_rank", "cume_dist"):
            self.return_type = DataType.DOUBLE
        elif kind == "ntile":
            self.return_type = DataType.INT
        else:
            if arg is None:
                raise ExecutorError("OverWindow", f"{kind} needs an argument")
            self.return_type = schema.types[arg]

    def values(self, rows, okeys, lo, hi, executor) -> list:
        """The call's value for each of ``rows`` (a partition in window order): ``okeys`` the
        rows' order keys (equal: peers), ``lo``/``hi`` each row's frame bounds."""
        n, kind = len(rows), self.kind
        if kind == "row_number":   # the position in window order (the stream key breaks ties)
            return list(range(1, n + 1))
        if kind in ("rank", "dense_rank", "percent_rank", "cume_dist"):
            out, rank, dense = [], 0, 0
            for i in range(n):
                if i == 0 or okeys[i] != okeys[i - 1]:
                    rank, dense = i + 1, dense + 1
                if kind == "rank":
                    out.append(rank)
                elif kind == "dense_rank":
                    out.append(dense)
                elif kind == "percent_rank":
                    out.append((rank - 1) / (n - 1) if n > 1 else 0.0)
                else:
                    last = i
                    while last + 1 < n and okeys[last + 1] == okeys[i]:
                        last += 1
                    out.append((last + 1) / n)
            return out
        if kind == "ntile":
            buckets = self.params[0]
            if buckets is None:
                return [None] * n
            if buckets <= 0:
                data_error(executor, "argument of ntile must be greater than zero", n)
                return [None] * n
            size, extra = divmod(n, buckets)
            out = []
            for b in range(min(buckets, n)):
                out.extend([b + 1] * (size + (1 if b < extra else 0)))
            return out
        vals = [r[self.arg] for r in rows]
        if kind in ("lag", "lead"):
            offset, default = self.params
            if offset is None:
                return [None] * n
            step = -offset if kind == "lag" else offset
            return [vals[i + step] if 0 <= i + step < n else default for i in range(n)]
        if kind == "first_value":
            return [vals[lo[i]] if lo[i] <= hi[i] else None for i in range(n)]
        if kind == "last_value":
            return [vals[hi[i]] if lo[i] <= hi[i] else None for i in range(n)]
        nth = self.params[0]   # nth_value
        if nth is None:
            return [None] * n
        if nth <= 0:
            data_error(executor, "argument of nth_value must be greater than zero", n)
            return [None] * n
        return [vals[lo[i] + nth - 1] if lo[i] + nth - 1 <= hi[i] else None for i in range(n)]


def bind_call(kind: str, arg, params, schema):
    """The bound call of one window function: an :class:`AggCall` (``WINDOW_KINDS``) or a
    :class:`NavCall` (``NAV_KINDS``)."""
    if kind in NAV_KINDS:
        return NavCall(kind, arg, params, schema)
    if kind not in WINDOW_KINDS:
        raise ExecutorError("OverWindow", f"window function {kind} is not supported")
    return AggCall(kind, arg).bind(schema)


def _slots(call: AggCall, vals) -> list:
    """The AggCall state slots of the non-NULL values ``vals`` (what HashAgg would hold)."""
    kind = call.kind
    if kind == "count":
        return [len(vals)]
    if kind in ("sum", "avg"):
        return call.value_slots(vals)
    if kind == "min":
        return [min(vals) if vals else None]
    return [max(vals) if vals else None]


def window_values(rows, calls, frame, order_cols=(), order_types=(), order_orders=(), executor="OverWindow") -> list:
    """The window columns (a tuple per row) of one partition's ``rows``, already in window
    order; ``calls`` bound AggCalls; ``order_*`` the order columns, their DataTypes and
    OrderTypes (peers of a RANGE frame: equal memcomparable bytes)."""
    n = len(rows)
    if not n:
        return []
    kind, preceding = frame
    okeys = None
    if kind == "range" or any(isinstance(c, NavCall) for c in calls):
        if order_cols:
            okeys = encode_rows([tuple(r[c] for c in order_cols) for r in rows], list(order_types),
                                list(order_orders))
        else:
            okeys = [b""] * n
    if kind == "range":
        hi = [0] * n
        end = n - 1
        for i in range(n - 1, -1, -1):
            if i < n - 1 and okeys[i] != okeys[i + 1]:
                end = i
            hi[i] = end
    elif kind == "all":
        hi = [n - 1] * n
    else:
        hi = list(range(n))
    out_cols = []
    for call in calls:
        if isinstance(call, NavCall):
            lo = [0] * n if preceding is None else [max(0, i - preceding) for i in range(n)]
            out_cols.append(call.values(rows, okeys, lo, hi, executor))
            continue
        vals = [1 if call.arg is None else r[call.arg] for r in rows]
        slot_cols = [[] for _ in call.slot_types]
        if preceding is None:    # lo is 0: running slots, each row reads those at its hi
            running = []
            for v in vals:
                running.append(_running_step(call, running[-1] if running else None, v))
            per_row = [running[h] for h in hi]
        else:
            per_row = []
            for i in range(n):
                window = [v for v in vals[max(0, i - preceding):i + 1] if v is not None]
                per_row.append(_slots(call, window))
        for s in per_row:
            for j, x in enumerate(s):
                slot_cols[j].append(x)
        out_cols.append(call.result_column(slot_cols, executor, [None] * n))
    return list(zip(*out_cols))


def _running_step(call: AggCall, prev, v) -> list:
    """The slots after adding value ``v`` (None: skipped) to slots ``prev`` (None: empty);
    the same left-to-right accumulation as :func:`_slots`."""
    if prev is None:
        prev = _slots(call, [])
    if v is None:
        return prev
    kind = call.kind
    if kind == "count":
        return [prev[0] + 1]
    if kind in ("sum", "avg"):
        with decimal.localcontext(EXACT_SUMS):
            return [a + b for a, b in zip(prev, call.value_slots([v]))]
    if prev[0] is None:
        return [v]
    return [min(prev[0], v)] if kind == "min" else [max(prev[0], v)]


class OverWindow(UnaryExecutor):
    """Window calls over partitions of the input (module docstring).

    ``partition``: input column indices; ``order_by``: ``[(column, OrderType)]``; ``calls``:
    ``[(kind, arg)]`` (arg None only for count); ``frame``: see the module docstring;
    ``table``: laid out by ``top_n_state_table(store, id, input.schema, input.stream_key,
    order_by, partition)`` (checked); ``names``: the window columns' names."""

    def __init__(self, input, table, partition, order_by, calls, frame, names=None, identity: str | None = None):
        identity = identity or f"OverWindow({table.name})"
        self.partition = [int(c) for c in partition]
        self.order_by = [(int(c), o) for c, o in order_by]
        self.frame = check_frame(frame)
        bound = []
        for call in calls:
            kind, arg, params = (tuple(call) + ((),))[:3]
            if kind not in WINDOW_KINDS + NAV_KINDS:
                raise ExecutorError(identity, f"window function {kind} is not supported")
            bound.append(bind_call(kind, arg, params, input.schema))
        self.calls = bound
        names = list(names) if names is not None else [f"{c[0]}_{i}" for i, c in enumerate(calls)]
        schema = Schema(input.schema.pairs() + [(nm, c.return_type) for nm, c in zip(names, bound)])
        super().__init__(input, schema=schema, stream_key=list(input.stream_key), identity=identity)
        pk, orders = top_n_layout(input.stream_key, self.order_by, self.partition)
        if (list(table.types) != list(input.schema.types) or list(table.serde.pk_indices) != pk
                or list(table.serde.order_types) != orders):
            raise ExecutorError(identity, f"the state table must have the input's columns and pk {pk} in {orders}")
        self.table = table
        self._plen = len(self.partition)
        self._tail = pk[self._plen:]                  # the window order: the table pk after the partition
        self._tail_types = [input.schema.types[c] for c in self._tail]
        self._tail_orders = orders[self._plen:]
        self._order_cols = [c for c, _ in self.order_by]
        self._order_types = [input.schema.types[c] for c in self._order_cols]
        self._order_orders = [o for _, o in self.order_by]

    def state_tables(self) -> list:
        return [self.table]

    def on_watermark(self, watermark):
        return None

    def _outputs(self, partitions, into: dict) -> None:
        key = self.stream_key
        for p in partitions:
            rows = list(self.table.iter_with_prefix(p))
            values = window_values(rows, self.calls, self.frame, self._order_cols, self._order_types,
                                   self._order_orders, self.identity)
            for r, v in zip(rows, values):
                into[tuple(r[i] for i in key)] = tuple(r) + tuple(v)

    def _bounded(self, changes: dict, old: dict, new: dict) -> None:
        """``ROWS n PRECEDING``: for each partition, read only the rows whose outputs can change
        -- from the first changed position to n rows past the last -- plus the n rows before
        them (their frames), apply the partition's ``changes`` in memory, and put both
        versions' outputs of the rows from the first changed position on into ``old``/``new``."""
        n, tail, key = self.frame[1], self._tail, self.stream_key
        for p, ops_rows in changes.items():
            ckeys = encode_rows([tuple(r[c] for c in tail) for _, r in ops_rows], self._tail_types, self._tail_orders)
            lo = tuple(ops_rows[ckeys.index(min(ckeys))][1][c] for c in tail)
            hi = tuple(ops_rows[ckeys.index(max(ckeys))][1][c] for c in tail)
            before = list(self.table.iter_with_prefix(p, end=lo, reverse=True, limit=n)) if n else []
            before.reverse()
            rows = before + list(self.table.iter_with_prefix(p, start=lo, end=hi, end_inclusive=True))
            if n:
                rows += list(self.table.iter_with_prefix(p, start=hi, start_inclusive=False, limit=n))
            keys = encode_rows([tuple(r[c] for c in tail) for r in rows], self._tail_types, self._tail_orders)
            state = dict(zip(keys, rows))
            for (op, row), k in zip(ops_rows, ckeys):
                if op in _INSERTS:
                    state[k] = row
                else:
                    state.pop(k, None)
            after = [state[k] for k in sorted(state)]
            skip = len(before)
            for slice_rows, into in ((rows, old), (after, new)):
                values = window_values(slice_rows, self.calls, self.frame, self._order_cols, self._order_types,
                                       self._order_orders, self.identity)
                for r, v in zip(slice_rows[skip:], values[skip:]):
                    into[tuple(r[i] for i in key)] = tuple(r) + tuple(v)

    def on_chunk(self, chunk: StreamChunk):
        chunk = chunk.compact()
        if not len(chunk):
            return None
        changes: dict = {}
        for op, row in chunk.rows():
            changes.setdefault(tuple(row[c] for c in self.partition), []).append((op, row))
        old: dict = {}
        new: dict = {}
        bounded = self.frame[0] == "rows" and self.frame[1] is not None and \
            not any(isinstance(c, NavCall) and c.kind in FRAMELESS for c in self.calls)
        if bounded:
            self._bounded(changes, old, new)
        else:
            self._outputs(changes, old)
        try:
            self.table.write_chunk(chunk.ops, chunk.columns)
        except InconsistentOpError as exc:
            raise InconsistentStreamError(self.identity, exc.reason, exc.pk) from exc
        self.table.try_flush()
        if not bounded:
            self._outputs(changes, new)
        builder = StreamChunkBuilder(self.schema)
        out = []
        for k, row in old.items():
            if k not in new:
                out.append(builder.append(DELETE, row))
        for k, row in new.items():
            was = old.get(k)
            if was is not None and was != row:
                out.append(builder.append_update(was, row))
        for k, row in new.items():
            if k not in old:
                out.append(builder.append(INSERT, row))
        out.append(builder.take())
        return [c for c in out if c is not None] or None


__all__ = ["FRAMELESS", "NAV_KINDS", "NavCall", "OverWindow", "WINDOW_KINDS", "OrderType", "bind_call", "check_frame",
           "window_values"]
