"""Batch execution: a logical plan -> a ``pyarrow.Table``, reading every Scan at one committed
epoch (the caller pins it with ``store.snapshot(epoch)`` for the whole query).

Job: the plan first gets its batch access paths (:func:`sql.plan.key_range.plan_batch`: key
ranges, point lookups, early stops); Scan reads through :mod:`sql.batch.scan` (the whole
table, or only its key ranges); a TopN with ``early_stop`` pulls batches in key order through
its Project/Filter chain (``_stream``) until it has its rows. Filter and Project evaluate the same
:mod:`stream.expr` trees the stream executors use (pyarrow compute); Agg, Join, Sort, Limit,
TopN and RowNumber work on Python rows with the stream executors' semantics
(``AggCall.result_column`` computes each aggregate's result exactly as HashAgg does: types,
NULLs, overflow, avg's scale; TopN/RowNumber order rows by the memcomparable key a GroupTopN
state table uses, so ties fall the same way as in an MV). A Join without keys is a nested
loop; semi/anti joins keep the left rows with/without a match. A ScalarJoin / DynamicFilter
evaluates its scalar subquery once; a second row is an ExecutionError
when the outer side has rows.

Invariants: every node returns a table whose columns are ``node.types`` in order; the result
of a plan equals the content its MV would have at the same epoch (the differential test).

Callers: :mod:`sql.statements` (SELECT, INSERT ... SELECT).
"""

from __future__ import annotations

import contextvars
import decimal
import functools
import math
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type, flat_array, to_arrow, to_pylist
from relational.memcomparable import OrderType, encode_rows
from stream.executors.agg_call import AggCall, group_key, order_key
from stream.executors.over_window import bind_call, window_values
from stream.executors.project_set import unnest_rows
from stream.executors.top_n import top_n_layout
from stream.schema import Schema
from stream.expr import Cmp, Col, Lit, raising_errors
from stream.expr_variance import variance_value

from sql.errors import ExecutionError

from sql.batch import vector
from sql.batch.scan import scan_batches, scan_row_count, scan_table
from sql.bind.time_travel import pin_scans
from sql.plan import nodes as P
from sql.plan import time_window
from sql.plan.key_range import plan_batch


VECTORIZED = contextvars.ContextVar("batch_vectorized", default=True)   # off: every operator on Python rows


def execute(plan: P.Node, store, epoch: int, profile: dict | None = None) -> pa.Table:
    """Data errors (overflow, division by zero) raise ExpressionError, as Postgres does.
    ``profile`` (EXPLAIN ANALYZE): a dict that gets ``"plan"``, the plan as run (key ranges
    chosen), and ``id(node) -> [rows out, seconds]`` of every node run as a node (seconds
    include its inputs'; a Project/Filter chain streamed into an early-stopping parent has none)."""
    plan = plan_batch(plan)   # key ranges and early stops (sql/plan/key_range.py)
    if profile is not None:
        profile["plan"] = plan
    with raising_errors(), pin_scans(plan, store, epoch) as as_of:   # time travel: each Scan's own epoch
        return _Exec(store, epoch, as_of, profile).run(plan)


def _take(column: pa.Array, indices) -> pa.Array:
    """``column.take(indices)``; a column of NULLs only (one the plan does not read: sql/batch/scan.py)
    is made as NULLs of the new length instead of gathered."""
    if column.null_count == len(column):
        return pa.nulls(len(indices), column.type)
    return column.take(indices)


def _table(columns, plan) -> pa.Table:
    fields = [pa.field(f"c{i}", arrow_type(t)) for i, t in enumerate(plan.types)]
    return pa.Table.from_arrays(list(columns), schema=pa.schema(fields))


def _rows_table(rows, plan) -> pa.Table:
    cols = list(zip(*rows)) if rows else [[] for _ in plan.types]
    return _table([to_arrow_values(c, t) for c, t in zip(cols, plan.types)], plan)


def to_arrow_values(values, dtype) -> pa.Array:
    """Python values of ``dtype`` as an Arrow array (DECIMAL as text, INTERVAL month_day_nano)."""
    return to_arrow(list(values), dtype)


def from_arrow_values(column, dtype) -> list:
    """The Python values of an Arrow column (the inverse of :func:`to_arrow_values`)."""
    return to_pylist(column, dtype)


class _Exec:
    def __init__(self, store, epoch, as_of=None, profile=None):
        self.store, self.epoch, self.as_of, self.profile = store, epoch, as_of or {}, profile

    def run(self, plan) -> pa.Table:
        if self.profile is None:
            return getattr(self, "_" + type(plan).__name__.lower())(plan)
        began = time.perf_counter()
        table = getattr(self, "_" + type(plan).__name__.lower())(plan)
        figures = self.profile.setdefault(id(plan), [0, 0.0])
        figures[0] += table.num_rows
        figures[1] += time.perf_counter() - began
        return table

    def _scan(self, plan: P.Scan):
        return scan_table(self.store, plan, self.as_of.get(id(plan), self.epoch))

    def _stream(self, plan):
        """Yield ``plan``'s rows as tables in its Scan's key order: a chain of Project and
        Filter over a Scan (a TopN with ``early_stop`` reads only what it needs)."""
        if isinstance(plan, P.Scan):
            yield from scan_batches(self.store, plan, self.as_of.get(id(plan), self.epoch))
            return
        for t in self._stream(plan.input):
            cols = self._columns(t)
            if isinstance(plan, P.Filter):
                t = t.filter(pc.fill_null(plan.condition.eval(cols, t.num_rows), False))
                if t.num_rows:
                    yield _table(self._columns(t), plan)
            else:
                yield _table([e.eval(cols, t.num_rows) for e in plan.exprs], plan)

    def _early_input(self, plan: P.TopN) -> pa.Table:
        """The first ``plan.early_stop`` rows of ``plan.input`` in key order and every later
        row tied with the last of them on the order columns: a superset of the TopN's rows."""
        need = plan.early_stop
        cols = [c for c, _, _ in plan.order]
        types = [plan.input.types[c] for c in cols]
        orders = [OrderType(d, n) for _, d, n in plan.order]
        parts, have, last = [], 0, None
        stream = self._stream(plan.input)
        try:
            for t in stream:
                if need == 0:
                    break
                if have >= need:   # past the need-th row: keep only its ties
                    vals = list(zip(*(from_arrow_values(t.column(c), dt) for c, dt in zip(cols, types))))
                    keys = encode_rows(vals, types, orders)
                    tied = next((i for i, k in enumerate(keys) if k != last), len(keys))
                    parts.append(t.slice(0, tied))
                    if tied < len(keys):
                        break
                    continue
                parts.append(t)
                have += t.num_rows
                if have >= need:
                    row = t.num_rows - 1 - (have - need)
                    vals = [tuple(from_arrow_values(t.column(c).slice(row, 1), dt)[0] for c, dt in zip(cols, types))]
                    last = encode_rows(vals, types, orders)[0]
                    rest = t.slice(row + 1)
                    if rest.num_rows:
                        rvals = list(zip(*(from_arrow_values(rest.column(c), dt) for c, dt in zip(cols, types))))
                        rkeys = encode_rows(rvals, types, orders)
                        tied = next((i for i, k in enumerate(rkeys) if k != last), len(rkeys))
                        if tied < len(rkeys):
                            parts[-1] = t.slice(0, row + 1 + tied)
                            break
        finally:
            stream.close()
        if not parts:
            return _table([pa.array([], arrow_type(dt)) for dt in plan.input.types], plan.input)
        return pa.concat_tables(parts)

    def _values(self, plan: P.Values):
        if getattr(plan, "arrow", None) is not None:   # a table function's columns (sql/copy.py)
            return plan.arrow
        return _rows_table(plan.rows, plan) if plan.types else pa.table({"_": pa.nulls(len(plan.rows))})

    def _unnest(self, plan: P.Unnest):
        """Each input row once per element of its longest array: the stream executor's
        :func:`stream.executors.project_set.unnest_rows` over the whole input."""
        t = self.run(plan.input)
        cols = self._columns(t)[:len(plan.input.types)]
        _, out = unnest_rows(cols, [a.eval(cols, t.num_rows) for a in plan.arrays], t.num_rows, plan.outer)
        return _table(out, plan)

    def _columns(self, t: pa.Table):
        return [flat_array(c) for c in t.columns]

    def _filter(self, plan: P.Filter):
        if isinstance(plan.input, P.Scan) and plan.types:   # filtered where each part is decoded
            return self._filtered_scan(plan)
        t = self.run(plan.input)
        mask = plan.condition.eval(self._columns(t), t.num_rows)
        if not plan.types:   # over a FROM-less Values (its placeholder column): keep the row count
            return t.filter(pc.fill_null(mask, False))
        return _table(self._columns(t.filter(pc.fill_null(mask, False))), plan)

    def _filtered_scan(self, plan: P.Filter):
        """A Filter over a Scan, applied to each batch in the thread that read it
        (``scan_table``'s ``each``): the rows filtering the whole gives, read on every core, and
        a dropped row's columns are not kept past its batch. The Scan's EXPLAIN ANALYZE
        figures are its rows read and the time of the two together."""
        scan = plan.input
        began, read = time.perf_counter(), []

        def keep(t: pa.Table) -> pa.Table:
            read.append(t.num_rows)   # from the parts' threads: append is atomic
            return t.filter(pc.fill_null(plan.condition.eval(self._columns(t), t.num_rows), False))
        t = scan_table(self.store, scan, self.as_of.get(id(scan), self.epoch), each=keep)
        if self.profile is not None:
            figures = self.profile.setdefault(id(scan), [0, 0.0])
            figures[0] += sum(read)
            figures[1] += time.perf_counter() - began
        return _table(self._columns(t), plan)

    def _project(self, plan: P.Project):
        t = self.run(plan.input)
        cols = self._columns(t)
        if not plan.types:   # no column left (count(*) over a FROM-less select): keep the row count
            return pa.table({"_": pa.nulls(t.num_rows)})
        return _table([e.eval(cols, t.num_rows) for e in plan.exprs], plan)

    def _metadata_count(self, plan: P.Agg) -> int | None:
        """The input rows of a ``count(*)``-only Agg without GROUP BY, when its input is a
        chain of column-only Projects over a whole-table Scan whose SST metadata decides the
        count (``StorageTable.row_count``); None: run the plan."""
        if plan.group or self.profile is not None or not all(
                c.kind == "count" and c.arg is None and c.filter_col is None and not c.distinct for c in plan.calls):
            return None
        node = plan.input
        while isinstance(node, P.Project) and all(isinstance(e, Col) for e in node.exprs):
            node = node.input
        if not isinstance(node, P.Scan) or getattr(node, "key_range", None) is not None:
            return None
        return scan_row_count(self.store, node, self.as_of.get(id(node), self.epoch))

    def _agg(self, plan: P.Agg):
        n = self._metadata_count(plan)
        if n is not None:
            return _table([pa.array([n], pa.int64()) for _ in plan.calls], plan)
        t = self.run(plan.input)
        if VECTORIZED.get() and not any(c.kind in BATCH_ONLY_AGGS for c in plan.calls):
            cols = vector.aggregate(plan, t)
            if cols is not None:
                return _table(cols, plan)
        schema = Schema(list(zip(plan.input.names, plan.input.types)))
        rows = _py_rows(t, plan.input.types) if t.num_columns else []
        groups: dict = {}
        firsts: dict = {}   # group key (every NaN one key, as Postgres) -> the first row's values
        for row in rows:
            values = tuple(row[g] for g in plan.group)
            key = tuple(map(_group_key, values))
            groups.setdefault(key, []).append(row)
            firsts.setdefault(key, values)
        if not plan.group and not groups:
            groups[()] = []
            firsts[()] = ()
        out_cols = [[] for _ in plan.calls]
        keys = list(groups)
        for j, spec in enumerate(plan.calls):
            if spec.kind in BATCH_ONLY_AGGS:
                out_cols[j] = [_batch_only_agg(spec, groups[key], plan.input) for key in keys]
                continue
            filt = None if spec.filter_col is None else Col(spec.filter_col, plan.input.types[spec.filter_col])
            call = AggCall(spec.kind, spec.arg, distinct=spec.distinct, filter=filt).bind(schema)
            slot_cols = [[] for _ in call.slot_types]
            for key in keys:
                vals = [r[spec.arg] if spec.arg is not None else 1 for r in groups[key]
                        if spec.filter_col is None or r[spec.filter_col] is True]
                vals = [v for v in vals if v is not None]
                for i, s in enumerate(_slots(call, vals)):
                    slot_cols[i].append(s)
            out_cols[j] = call.result_column(slot_cols, "batch aggregate", [firsts[k] for k in keys])
        out = [list(firsts[k]) + [col[i] for col in out_cols] for i, k in enumerate(keys)]
        return _rows_table(out, plan)

    def _join(self, plan: P.Join):
        left, right = self.run(plan.left), self.run(plan.right)
        pairs = vector.join_pairs(plan, left, right) if VECTORIZED.get() else None
        if pairs is not None:
            return self._join_vector(plan, left, right, *pairs)
        lrows = _py_rows(left, plan.left.types) if left.num_columns else []
        rrows = _py_rows(right, plan.right.types) if right.num_columns else []
        lw, rw = len(plan.left.types), len(plan.right.types)
        index: dict = {}
        for j, r in enumerate(rrows):
            key = tuple(group_key(r[k]) for k in plan.right_keys)
            if None not in key:
                index.setdefault(key, []).append(j)
        pairs = []
        for i, l in enumerate(lrows):
            key = tuple(group_key(l[k]) for k in plan.left_keys)
            for j in (index.get(key, []) if None not in key else []):
                pairs.append((i, j))
        if plan.condition is not None and pairs:
            cand = _rows_table([lrows[i] + rrows[j] for i, j in pairs], plan)
            ok = plan.condition.eval(self._columns(cand), cand.num_rows).to_pylist()
            pairs = [p for p, k in zip(pairs, ok) if k is True]
        if plan.kind in ("semi", "anti"):
            matched = {i for i, _ in pairs}
            keep = (lambda i: i in matched) if plan.kind == "semi" else (lambda i: i not in matched)
            return _rows_table([lrows[i] for i in range(len(lrows)) if keep(i)], plan)
        out = [lrows[i] + rrows[j] for i, j in pairs]
        if plan.kind in ("left", "full"):
            matched = {i for i, _ in pairs}
            out += [lrows[i] + (None,) * rw for i in range(len(lrows)) if i not in matched]
        if plan.kind in ("right", "full"):
            matched = {j for _, j in pairs}
            out += [(None,) * lw + rrows[j] for j in range(len(rrows)) if j not in matched]
        return _rows_table(out, plan)

    def _join_vector(self, plan: P.Join, left, right, li, ri):  # noqa: C901 -- one case per join kind
        """The row path's output from the matching pairs (``vector.join_pairs``): pairs in
        (left, right) order, then unmatched left rows, then unmatched right rows."""
        lcols, rcols = self._columns(left), self._columns(right)
        if plan.condition is not None and len(li):
            cand = [c.take(li) for c in lcols] + [c.take(ri) for c in rcols]
            ok = pc.fill_null(plan.condition.eval(cand, len(li)), False).to_numpy(zero_copy_only=False)
            li, ri = li[ok], ri[ok]
        matched = np.zeros(left.num_rows, dtype=bool)
        matched[li] = True
        if plan.kind in ("semi", "anti"):
            keep = matched if plan.kind == "semi" else ~matched
            return _table([c.filter(pa.array(keep)) for c in lcols], plan)
        n = left.num_rows   # every left row matched once, in order (a foreign key join): the left columns as they are
        whole = len(li) == n and (n == 0 or li[0] == 0 and li[-1] == n - 1 and bool((li[1:] > li[:-1]).all()))
        parts = [[c if whole else _take(c, li) for c in lcols] + [_take(c, ri) for c in rcols]]
        if plan.kind in ("left", "full"):
            lo = np.flatnonzero(~matched)
            parts.append([c.take(lo) for c in lcols] + [pa.nulls(len(lo), c.type) for c in rcols])
        if plan.kind in ("right", "full"):
            rmatched = np.zeros(right.num_rows, dtype=bool)
            rmatched[ri] = True
            ro = np.flatnonzero(~rmatched)
            parts.append([pa.nulls(len(ro), c.type) for c in lcols] + [c.take(ro) for c in rcols])
        if len(parts) == 1:
            return _table(parts[0], plan)
        return _table([pa.concat_arrays([p[i] for p in parts]) for i in range(len(plan.types))], plan)

    def _tumblewindow(self, plan):
        return _table(time_window.run_batch(plan, self.run(plan.input)), plan)

    _hopwindow = _tumblewindow

    def _scalar(self, sub: P.Node, n_left: int):
        """The value of the scalar subquery ``sub`` (evaluated once; None without rows). Postgres
        reports a second row only when the value is needed: here when the outer side has rows."""
        t = self.run(sub)
        if t.num_rows > 1 and n_left:
            raise ExecutionError("more than one row returned by a subquery used as an expression")
        return from_arrow_values(t.column(0), sub.types[0])[0] if t.num_rows == 1 and n_left else None

    def _scalarjoin(self, plan: P.ScalarJoin):
        t = self.run(plan.left)
        n = t.num_rows
        value = self._scalar(plan.right, n)
        cols = self._columns(t)[:len(plan.left.types)]
        return _table(cols + [to_arrow_values([value] * n, plan.types[-1])], plan)

    def _dynamicfilter(self, plan: P.DynamicFilter):
        t = self.run(plan.left)
        value = self._scalar(plan.right, t.num_rows)
        if value is None:
            return _table([c.slice(0, 0) for c in self._columns(t)], plan)
        mask = Cmp(plan.op, Col(plan.key, plan.types[plan.key]), Lit(value, plan.types[plan.key])).eval(
            self._columns(t), t.num_rows)
        return _table(self._columns(t.filter(pc.fill_null(mask, False))), plan)

    def _union(self, plan: P.Union):
        inputs = [self._columns(self.run(i)) for i in plan.inputs]   # each input once, not once per column
        return _table([pa.concat_arrays([cols[c] for cols in inputs]) for c in range(len(plan.types))], plan)

    def _sort(self, plan: P.Sort):   # JSONB keys (no vector path) compare in jsonb order below
        t = self.run(plan.input)
        idx = vector.sort_indices(self._columns(t), plan.input.types, plan.keys) \
            if VECTORIZED.get() and t.num_rows > 1 and t.num_columns else None
        if idx is not None:
            return _table([c.take(idx) for c in self._columns(t)], plan)
        rows = _py_rows(t, plan.input.types) if t.num_columns else []

        def cmp(a, b):
            for col, desc, nulls_first in plan.keys:
                x, y = a[col], b[col]
                if x is None or y is None:
                    if x is y:
                        continue
                    return (-1 if nulls_first else 1) * (1 if x is None else -1)
                if plan.input.types[col] == P.DataType.JSONB:   # Postgres' jsonb order, not the text's
                    from stream.expr_jsonb import order_key as jsonb_key
                    x, y = jsonb_key(x), jsonb_key(y)
                else:
                    x, y = _sort_key(x), _sort_key(y)   # NaN equals NaN, above every number
                if x == y:
                    continue
                r = -1 if x < y else 1
                return -r if desc else r
            return 0
        rows.sort(key=functools.cmp_to_key(cmp))
        return _rows_table(rows, plan)

    def _topn(self, plan: P.TopN):
        t = self._early_input(plan) if getattr(plan, "early_stop", None) is not None else self.run(plan.input)
        idx = vector.top_n_indices(plan, t) if VECTORIZED.get() and t.num_columns else None
        if idx is not None:
            cols = [c.take(idx) for c in self._columns(t)]
            if plan.rank:
                cols.append(pa.array(np.arange(plan.offset + 1, plan.offset + 1 + len(idx), dtype=np.int64)))
            return _table(cols, plan)
        rows = _py_rows(t, plan.input.types) if t.num_columns else []
        out = []
        for members in _ranked_groups(rows, plan.input, plan.group, plan.order):
            end = len(members) if plan.limit is None else plan.offset + plan.limit
            if plan.with_ties and plan.limit and end < len(members):
                okeys = _order_keys(members, plan.input, plan.order)
                while end < len(members) and okeys[end] == okeys[end - 1]:
                    end += 1
            for i, row in enumerate(members[plan.offset:end]):
                out.append(row + (plan.offset + i + 1,) if plan.rank else row)
        return _rows_table(out, plan)

    def _rownumber(self, plan: P.RowNumber):
        t = self.run(plan.input)
        rows = _py_rows(t, plan.input.types) if t.num_columns else []
        out = [row + (i + 1,) for members in _ranked_groups(rows, plan.input, plan.partition, plan.order)
               for i, row in enumerate(members)]
        return _rows_table(out, plan)

    def _overwindow(self, plan: P.OverWindow):
        t = self.run(plan.input)
        rows = _py_rows(t, plan.input.types) if t.num_columns else []
        schema = Schema(list(zip(plan.input.names, plan.input.types)))
        calls = [bind_call(c.kind, c.arg, c.params, schema) for c in plan.calls]
        cols = [c for c, _, _ in plan.order]
        types = [plan.input.types[c] for c in cols]
        orders = [OrderType(d, n) for _, d, n in plan.order]
        out = []
        for members in _ranked_groups(rows, plan.input, plan.partition, plan.order):
            values = window_values(members, calls, plan.frame, cols, types, orders, "batch window")
            out.extend(row + tuple(v) for row, v in zip(members, values))
        return _rows_table(out, plan)

    def _limit(self, plan: P.Limit):
        t = self.run(plan.input)
        end = None if plan.limit is None else plan.offset + plan.limit
        return t.slice(plan.offset, (end - plan.offset) if end is not None else None)


def _sort_key(value):
    """``order_key``, and for an array its elements' keys (a NULL element after every value), so
    arrays sort as Postgres' array_cmp orders them (a shorter prefix first)."""
    if isinstance(value, list):
        return (0, [(2,) if v is None else _sort_key(v) for v in value])
    return order_key(value)


def _group_key(value):
    """``group_key`` (every NaN one key) that also takes arrays: a list groups by its elements."""
    return tuple(map(_group_key, value)) if isinstance(value, list) else group_key(value)


BATCH_ONLY_AGGS = ("string_agg", "array_agg", "stddev_samp", "stddev_pop", "var_samp", "var_pop", "mode", "percentile_cont",
                   "percentile_disc", "array_min", "array_max")   # array_min/max: min()/max() of arrays
_EXACT = decimal.Context(prec=60)


def _batch_only_agg(spec, rows, input: P.Node):
    """One group's value of a batch-only aggregate (``BATCH_ONLY_AGGS``; sql/bind/select.py's
    ``_batch_agg``): ``mode`` / ``percentile_cont`` / ``percentile_disc`` read the non-NULL
    values in their WITHIN GROUP order (Postgres' definitions); ``string_agg`` joins the non-NULL texts with the separator (NULL: none) in
    the call's ORDER BY (else input) order, ``array_agg`` collects every value (NULLs too) in that order; the variance family is Postgres' -- exact in NUMERIC
    for integer and NUMERIC input, double precision for float input; NULL with no values (and
    for the sample forms with one value); ``array_min`` / ``array_max`` (``min()`` / ``max()`` of
    arrays) take the least / greatest non-NULL array in Postgres' array order (``_sort_key``)."""
    if spec.filter_col is not None:
        rows = [r for r in rows if r[spec.filter_col] is True]
    if spec.distinct:   # string_agg/array_agg(DISTINCT x): each value once (array_agg: NULL too),
        rows = _distinct_rows(rows, spec.arg, spec.kind == "array_agg")   # sorted by x below
    order = spec.extra.get("order") or []
    if order and rows:
        keys = _order_keys(rows, input, order)
        rows = [r for _, r in sorted(zip(keys, rows), key=lambda kr: kr[0])]
    if spec.kind == "array_agg":   # every value, NULLs too, in the ORDER BY (else input) order; no row: NULL
        return [r[spec.arg] for r in rows] if rows else None
    vals = [r[spec.arg] for r in rows if r[spec.arg] is not None]
    if spec.kind in ("array_min", "array_max"):   # min()/max() of arrays: Postgres' array order; none: NULL
        return (min if spec.kind == "array_min" else max)(vals, key=_sort_key) if vals else None
    if spec.kind == "mode":   # the most frequent value; ties: the first in the ORDER BY
        counts: dict = {}
        for v in vals:
            counts[_group_key(v)] = counts.get(_group_key(v), 0) + 1
        best = None
        for v in vals:
            if best is None or counts[_group_key(v)] > counts[_group_key(best)]:
                best = v
        return best
    if spec.kind in ("percentile_cont", "percentile_disc"):
        f = spec.extra["fraction"]
        if not vals or f is None:
            return None
        if spec.kind == "percentile_disc":   # the first value whose position reaches the fraction
            return vals[max(math.ceil(f * len(vals)) - 1, 0)]
        pos = f * (len(vals) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        a, b = float(vals[lo]), float(vals[hi])
        return a if lo == hi else a + (b - a) * (pos - lo)
    if spec.kind == "string_agg":
        return (spec.extra["sep"] or "").join(vals) if vals else None
    n = len(vals)
    sample = spec.kind in ("stddev_samp", "var_samp")
    if n == 0 or (sample and n == 1):
        return None
    floats = spec.return_type == P.DataType.DOUBLE
    if floats:
        if any(math.isnan(v) or math.isinf(v) for v in vals):
            return math.nan
        mean = math.fsum(vals) / n
        ss = math.fsum((v - mean) ** 2 for v in vals)
        var = ss / (n - 1 if sample else n)
        return math.sqrt(var) if spec.kind.startswith("stddev") else var
    with decimal.localcontext(_EXACT):
        ds = [decimal.Decimal(v) for v in vals]
        if any(not d.is_finite() for d in ds):
            return decimal.Decimal("NaN")
        # the final step an MV's stddev/variance takes too (stream/expr_variance.py): the same digits
        return variance_value(spec.kind, n, sum(ds), sum(d * d for d in ds), False)


def _ranked_groups(rows, input: P.Node, group, order) -> list:
    """``rows`` split by the ``group`` columns, each group sorted as a (Group)TopN executor
    orders it: by the memcomparable bytes of its state table key after the group (the order
    columns in their OrderTypes, then the input's stream key ascending)."""
    order_by = [(c, OrderType(desc, nulls_first)) for c, desc, nulls_first in order]
    pk, orders = top_n_layout(input.stream_key, order_by, group)
    tail, tail_orders = pk[len(group):], orders[len(group):]
    types = [input.types[c] for c in tail]
    groups: dict = {}
    for row in rows:
        groups.setdefault(tuple(_group_key(row[g]) for g in group), []).append(row)
    out = []
    for members in groups.values():
        keys = encode_rows([tuple(r[c] for c in tail) for r in members], types, tail_orders)
        out.append([r for _, r in sorted(zip(keys, members), key=lambda kr: kr[0])])
    return out


def _order_keys(rows, input: P.Node, order) -> list:
    """The memcomparable bytes of each row's order columns (equal bytes: tied, NULLs too)."""
    cols = [c for c, _, _ in order]
    return encode_rows([tuple(r[c] for c in cols) for r in rows], [input.types[c] for c in cols],
                       [OrderType(d, n) for _, d, n in order])


def _distinct_rows(rows, arg: int, keep_null: bool) -> list:
    """The first row of each distinct value of column ``arg`` (every NaN one value, ``-0.0``
    ``0.0``, arrays by their elements; a NULL value only when ``keep_null``)."""
    seen, out = set(), []
    for r in rows:
        v = r[arg]
        if v is None and not keep_null:
            continue
        k = _group_key(v)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _slots(call, vals) -> list:
    """The state slots HashAgg would hold for the non-NULL, filtered values ``vals``."""
    kind = call.kind
    if call.distinct:   # each value once, the first of equal ones (as HashAgg's dedup table enters it)
        vals = [r[0] for r in _distinct_rows([(v,) for v in vals], 0, False)]
    if kind == "count":
        return [len(vals)]
    if kind in ("sum", "avg"):
        return call.value_slots(vals)
    if kind == "min":
        return [min(vals, key=order_key) if vals else None]
    if kind == "max":
        return [max(vals, key=order_key) if vals else None]
    return [sum(1 for v in vals if v), sum(1 for v in vals if not v)]


def _py_rows(t: pa.Table, types) -> list:
    if not types:   # rows without columns (a placeholder column keeps their count)
        return [()] * t.num_rows
    cols = [from_arrow_values(c, dt) for c, dt in zip(t.columns, types)]
    return list(zip(*cols))
