"""Vectorized batch operators: hash aggregate, hash join, sort and ungrouped top-N over Arrow
tables with Arrow's C kernels (``Table.group_by``, ``Table.join``, ``sort_indices``), for the
types where Arrow's semantics are Postgres'; each function returns None when a column or call
is outside them, and the caller (:mod:`sql.batch.execute`) runs its row path instead.

Exactness, case by case (the row path is the reference, tests/test_batch_vector.py compares):
- Group and join keys: integers, VARCHAR, BYTEA, BOOLEAN, DATE, TIME, TIMESTAMP[TZ] (NULLs
  group together; NULL never joins). Not REAL/DOUBLE (NaN is one key, -0.0 = 0.0), not DECIMAL
  (stored as text: '1.0' = '1.00'), not INTERVAL/STRUCT/LIST.
- Aggregates: count(*), count(x), count(DISTINCT x) for key types; sum/avg of integers (BIGINT
  summed as decimal128, exact) and REAL/DOUBLE (the finite values' sum, NaN/+Inf/-Inf counted
  apart: the slots HashAgg holds); min/max of key types; bool_and/bool_or. Results go through
  ``AggCall.result_column`` (overflow, avg's scale, specials) exactly as the row path; only
  count, min, max and sum of SMALLINT/INT skip it (their slot is the result). DECIMAL and
  INTERVAL arguments take the row path.
- Sort / TopN order columns: key types and REAL/DOUBLE (NaN above every number, flags for
  NULL and NaN placement; -0.0 and 0.0 tie, as in the memcomparable key); Arrow's sort is
  stable, so ties keep the input order (Sort) or fall to the stream key (TopN), as the row path.
- Group order: first appearance (single-threaded grouping), as the row path's dict.

Callers: :mod:`sql.batch.execute` (``_agg``, ``_join``, ``_sort``, ``_topn``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import flat_array
from relational.parallel import in_pool, pool, usable_cores
from relational.types import DataType, TypeKind
from stream.executors.agg_call import AggCall
from stream.schema import Schema

KEY_KINDS = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.VARCHAR, TypeKind.BYTEA, TypeKind.BOOLEAN,
             TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ}
FLOAT_KINDS = {TypeKind.REAL, TypeKind.DOUBLE}
SMALL_INTS = {TypeKind.SMALLINT, TypeKind.INT}
INT_KINDS = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT}


_flat = flat_array   # one Array per column, no copy of a single chunk


# --- aggregate ----------------------------------------------------------------------------------

def _call_ok(spec, types) -> bool:
    if spec.arg is None:
        return spec.kind == "count" and not spec.distinct
    k = types[spec.arg].kind
    if spec.kind == "count":
        return not spec.distinct or k in KEY_KINDS
    if spec.distinct:
        return False
    if spec.kind in ("sum", "avg"):
        return k in INT_KINDS or k in FLOAT_KINDS
    if spec.kind in ("min", "max"):
        return k in KEY_KINDS
    return spec.kind in ("bool_and", "bool_or")


def aggregate(plan, t: pa.Table):
    """The output columns of Agg ``plan`` over input ``t`` (Arrow arrays), or None."""
    types = plan.input.types
    if t.num_columns != len(types):   # a FROM-less Values' placeholder column
        return None
    if any(types[g].kind not in KEY_KINDS for g in plan.group) or not all(_call_ok(c, types) for c in plan.calls):
        return None
    if not plan.group and t.num_rows == 0:
        return None   # one row over no input: the row path is instant
    cols = [_flat(c) for c in t.columns]
    n = t.num_rows
    data, aggs, slot_of = {}, [], []
    for g in plan.group:
        data[f"g{g}"] = cols[g]
    for j, spec in enumerate(plan.calls):
        mask = None
        if spec.filter_col is not None:
            mask = pc.fill_null(cols[spec.filter_col], False)
        arg = cols[spec.arg] if spec.arg is not None else None
        if arg is not None and mask is not None:
            arg = pc.if_else(mask, arg, pa.nulls(n, arg.type))
        names = []

        def add(name, column, fn, opts=None):
            data[name] = column
            aggs.append((name, fn, opts))
            names.append(f"{name}_{fn}")
        p = f"a{j}"
        if spec.kind == "count":
            if arg is None:
                add(p, mask.cast(pa.int64()) if mask is not None else pa.array(np.ones(n, dtype=np.int64)), "sum")
            elif spec.distinct:
                add(p, arg, "count_distinct", pc.CountOptions("only_valid"))
            else:
                add(p, arg, "count", pc.CountOptions("only_valid"))
        elif spec.kind in ("sum", "avg"):
            k = types[spec.arg].kind
            if k in FLOAT_KINDS:
                v = arg.cast(pa.float64())
                finite = pc.is_finite(v)
                if pc.all(finite).as_py() is not False:   # no NaN or infinity: their counts are zeros
                    add(p + "s", v, "sum")
                    add(p + "c", arg, "count", pc.CountOptions("only_valid"))
                else:
                    add(p + "s", pc.if_else(finite, v, 0.0), "sum")
                    add(p + "c", arg, "count", pc.CountOptions("only_valid"))
                    add(p + "n", pc.is_nan(v).cast(pa.int64()), "sum")
                    add(p + "p", pc.equal(v, float("inf")).cast(pa.int64()), "sum")
                    add(p + "m", pc.equal(v, float("-inf")).cast(pa.int64()), "sum")
            else:
                add(p + "s", arg.cast(pa.int64()) if k in SMALL_INTS else arg.cast(pa.decimal128(38, 0)), "sum")
                add(p + "c", arg, "count", pc.CountOptions("only_valid"))
        elif spec.kind in ("min", "max"):
            add(p, arg, spec.kind)
        else:
            add(p + "t", pc.fill_null(arg, False).cast(pa.int64()), "sum")
            add(p + "c", arg, "count", pc.CountOptions("only_valid"))
        slot_of.append(names)
    if plan.group:
        out = _group_by(pa.table(data), [f"g{g}" for g in plan.group], aggs)
    else:   # one group: each call over its whole column, no hash table
        out = pa.table({f"{name}_{fn}": _whole_column(data[name], fn, opts) for name, fn, opts in aggs})
    result = [_flat(out.column(f"g{g}")) for g in plan.group]
    schema = Schema(list(zip(plan.input.names, types)))
    for spec, names in zip(plan.calls, slot_of):
        slots = [_flat(out.column(nm)) for nm in names]
        result.append(_result(spec, slots, schema, types, _LazyKeys(out, plan, types)))
    return result


PARALLEL_ROWS = 1 << 18      # a GROUP BY over at least twice this many rows hashes row ranges side by side
SAMPLE_ROWS = 1 << 16        # ... unless this many first rows hold more than SAMPLE_GROUPS groups
SAMPLE_GROUPS = 1 << 12
_MERGE = {"sum": "sum", "count": "sum", "min": "min", "max": "max"}   # partial result -> how partials combine


def _group_by(table: pa.Table, keys: list, aggs: list) -> pa.Table:
    """``table.group_by(keys).aggregate(aggs)`` (columns named ``<name>_<fn>``, groups in order of
    first appearance). A large input with few groups is aggregated in two phases: its row
    ranges each hashed in a thread (Arrow's kernels release the GIL), then the partial results,
    concatenated in range order, grouped again with each call's merge (``_MERGE``: counts add,
    sums add, min of mins, max of maxes): the same groups and results (a float sum adds its
    ranges' sums; the groups' order, which SQL leaves open without ORDER BY, is Arrow's either
    way and may differ between the two). Many groups (the first ``SAMPLE_ROWS`` rows hold more than
    ``SAMPLE_GROUPS``) would make the merge as large as the input: one phase then, as for an
    aggregate without a merge (a DISTINCT count)."""
    spec = [(name, fn, opts) if opts else (name, fn) for name, fn, opts in aggs]
    parts = 1 if in_pool() else min(usable_cores(), table.num_rows // PARALLEL_ROWS)
    if parts >= 2 and all(fn in _MERGE for _, fn, _ in aggs):
        sample = table.select(keys).slice(0, SAMPLE_ROWS)
        if sample.group_by(keys, use_threads=False).aggregate([]).num_rows > SAMPLE_GROUPS:
            parts = 1
    if parts < 2 or not all(fn in _MERGE for _, fn, _ in aggs):
        return table.group_by(keys, use_threads=False).aggregate(spec)
    step = -(-table.num_rows // parts)
    ranges = [table.slice(i * step, step) for i in range(parts)]
    partials = list(pool().map(lambda t: t.group_by(keys, use_threads=False).aggregate(spec), ranges))
    merged = pa.concat_tables(partials).group_by(keys, use_threads=False).aggregate(
        [(f"{name}_{fn}", _MERGE[fn]) for name, fn, _ in aggs])
    return merged.rename_columns([c[:c.rindex("_")] if c not in keys else c for c in merged.column_names])


def _whole_column(column, fn: str, opts) -> pa.Array:
    """The one-row result of hash aggregate ``fn`` (sum / count / count_distinct / min / max)
    over all of ``column``, typed as ``group_by`` types it."""
    if fn == "count_distinct":
        value = pc.count_distinct(column, mode="only_valid")
    elif fn == "count":
        value = pc.count(column, mode="only_valid")
    elif fn == "sum":
        value = pc.sum(column, min_count=1)
    else:
        value = pc.min_max(column)[fn]
    return pa.array([value.as_py()], value.type)


def _result(spec, slots, schema, types, groups):
    """One call's output column from its slot columns (``AggCall.result_column`` but for the
    calls whose slot is the result)."""
    from sql.batch.execute import to_arrow_values
    if spec.kind == "count":
        return pc.fill_null(slots[0].cast(pa.int64()), 0)
    if spec.kind in ("min", "max"):
        return slots[0]
    if spec.kind == "sum" and types[spec.arg].kind in SMALL_INTS:
        return pc.if_else(pc.greater(slots[1], 0), slots[0], pa.scalar(None, pa.int64()))
    call = AggCall(spec.kind, spec.arg).bind(schema)
    if spec.kind in ("bool_and", "bool_or"):
        trues = slots[0].to_pylist()
        counts = slots[1].to_pylist()
        slot_cols = [trues, [c - (t or 0) for t, c in zip(trues, counts)]]
    else:
        total = slots[0].to_pylist()
        if types[spec.arg].kind == TypeKind.BIGINT:
            import decimal
            total = [decimal.Decimal(0) if v is None else v for v in total]
        else:
            total = [(0.0 if types[spec.arg].kind in FLOAT_KINDS else 0) if v is None else v for v in total]
        slot_cols = [total] + [s.to_pylist() for s in slots[1:]]
        if types[spec.arg].kind in FLOAT_KINDS and len(slots) == 2:   # all finite: no NaN/inf counts
            slot_cols += [[0] * len(total)] * 3
    values = call.result_column(slot_cols, "batch aggregate", groups)
    return to_arrow_values(values, spec.return_type)


class _LazyKeys:
    """The group keys of an aggregate's output, built only for the group an error names."""

    def __init__(self, out, plan, types):
        self.out, self.plan, self.types = out, plan, types

    def __getitem__(self, i):
        from sql.batch.execute import from_arrow_values
        return tuple(from_arrow_values(_flat(self.out.column(f"g{g}")).slice(i, 1), self.types[g])[0]
                     for g in self.plan.group)


# --- join ---------------------------------------------------------------------------------------

def join_pairs(plan, left: pa.Table, right: pa.Table):
    """``(li, ri)`` numpy int64 arrays of the matching row pairs of an equi-join (ordered by
    left row then right row, as the row path), or None for key types outside KEY_KINDS."""
    lt, rt = plan.left.types, plan.right.types
    if not plan.left_keys or left.num_columns != len(lt) or right.num_columns != len(rt):
        return None
    lcols, rcols = [_flat(c) for c in left.columns], [_flat(c) for c in right.columns]
    ldata, rdata = {}, {}
    for i, (a, b) in enumerate(zip(plan.left_keys, plan.right_keys)):
        ka, kb = lt[a].kind, rt[b].kind
        if ka not in KEY_KINDS or kb not in KEY_KINDS:
            return None
        x, y = lcols[a], rcols[b]
        if ka != kb:
            if not (ka in INT_KINDS and kb in INT_KINDS):
                return None
            x, y = x.cast(pa.int64()), y.cast(pa.int64())
        ldata[f"k{i}"], rdata[f"k{i}"] = x, y
    if len(ldata) == 1:
        pairs = _unique_right_pairs(ldata["k0"], rdata["k0"])
        if pairs is not None:
            return pairs
    ldata["__l"] = pa.array(np.arange(left.num_rows, dtype=np.int64))
    rdata["__r"] = pa.array(np.arange(right.num_rows, dtype=np.int64))
    keys = [f"k{i}" for i in range(len(plan.left_keys))]
    joined = pa.table(ldata).join(pa.table(rdata), keys, join_type="inner", use_threads=False)
    li = joined.column("__l").to_numpy()
    ri = joined.column("__r").to_numpy()
    nr = max(right.num_rows, 1)
    order = np.argsort(li * nr + ri, kind="stable") if left.num_rows * nr < (1 << 62) else np.lexsort((ri, li))
    return li[order], ri[order]


def _unique_right_pairs(lkey: pa.Array, rkey: pa.Array):
    """The pairs of a one-column equi-join whose right keys are distinct (a foreign key to a
    primary key, the usual join): each left row's one match by a hash lookup (``index_in``),
    already in (left, right) order -- or None when right keys repeat. NULL keys never match."""
    valid = rkey.drop_null() if rkey.null_count else rkey
    if pc.count_distinct(valid).as_py() != len(valid):
        return None
    if rkey.null_count:   # index_in would match NULL to NULL: look up among the non-NULL keys only
        positions = np.flatnonzero(~rkey.is_null().to_numpy(zero_copy_only=False))
    else:
        positions = None
    found = _index_in(lkey, valid)   # a NULL left key finds nothing (no NULL in the set)
    li = np.flatnonzero(~found.is_null().to_numpy(zero_copy_only=False))   # already int64: no copy
    ri = found.drop_null().to_numpy() if len(li) else np.zeros(0, np.int64)   # int32 positions: take() reads them
    if positions is not None:
        ri = positions[ri]
    return li, ri


def _index_in(lkey: pa.Array, valid: pa.Array) -> pa.Array:
    """``pc.index_in(lkey, value_set=valid)``, over row ranges side by side for a long ``lkey``
    (Arrow's kernel runs without the GIL; each range hashes ``valid`` again, small beside it)."""
    parts = 1 if in_pool() else min(usable_cores(), len(lkey) // PARALLEL_ROWS)
    if parts < 2:
        return pc.index_in(lkey, value_set=valid)
    step = -(-len(lkey) // parts)
    ranges = [lkey.slice(i, step) for i in range(0, len(lkey), step)]
    return pa.concat_arrays(list(pool().map(lambda r: pc.index_in(r, value_set=valid), ranges)))


# --- sort ---------------------------------------------------------------------------------------

def sort_indices(cols, types, keys, k_first=None):
    """Stable sort indices of the rows of ``cols`` by ``keys`` = [(column, desc, nulls_first)]
    (Postgres' order: NULLs where asked, NaN above every number), or None. ``k_first``: only
    the first that many are needed and ``keys`` order the rows totally (no ties), so a
    selection replaces the sort."""
    if len(cols) != len(types):
        return None
    data, sort_keys = {}, []
    for i, (c, desc, nulls_first) in enumerate(keys):
        k = types[c].kind
        if k not in KEY_KINDS and k not in FLOAT_KINDS:
            return None
        col = _flat(cols[c])
        direction = "descending" if desc else "ascending"
        if col.null_count:
            data[f"n{i}"] = pc.is_null(col)
            sort_keys.append((f"n{i}", "descending" if nulls_first else "ascending"))
        if k in FLOAT_KINDS:
            nan = pc.fill_null(pc.is_nan(col), False)
            if pc.any(nan).as_py():
                data[f"f{i}"] = nan
                sort_keys.append((f"f{i}", direction))
                col = pc.if_else(nan, pa.scalar(0.0, col.type), col)
        if k == TypeKind.BOOLEAN:
            col = col.cast(pa.int8())
        data[f"v{i}"] = col
        sort_keys.append((f"v{i}", direction))
    if not data:
        return None
    if k_first is not None and k_first < len(cols[0]) // 4:   # a total order's first k rows
        return pc.select_k_unstable(pa.table(data), k_first, sort_keys=sort_keys)
    return pc.sort_indices(pa.table(data), sort_keys=sort_keys)


def top_n_indices(top, t: pa.Table):
    """Indices of the rows of an ungrouped TopN ``top`` over ``t`` in output order (offset,
    limit and WITH TIES applied), or None. Order: the order columns, then the input's stream key
    ascending (``top_n_layout``), as the row path's memcomparable sort."""
    from stream.executors.top_n import top_n_layout
    from relational.memcomparable import OrderType
    if top.group:
        return None
    order_by = [(c, OrderType(d, nf)) for c, d, nf in top.order]
    pk, orders = top_n_layout(top.input.stream_key, order_by, ())
    keys = [(c, o.descending, o.nulls_first) for c, o in zip(pk, orders)]
    cols = [_flat(c) for c in t.columns]
    total = bool(top.input.stream_key) and top.limit is not None and not top.with_ties
    idx = sort_indices(cols, top.input.types, keys, top.offset + top.limit if total else None) \
        if t.num_rows else pa.array([], pa.uint64())
    if idx is None:
        return None
    end = len(idx) if top.limit is None else min(len(idx), top.offset + top.limit)
    if top.with_ties and top.limit and end < len(idx):   # the rows tied with the last one
        ocols = [c for c, _, _ in top.order]
        from sql.batch.execute import from_arrow_values
        sorted_cols = [from_arrow_values(pc.take(cols[c], idx.slice(end - 1, len(idx) - end + 1)),
                                         top.input.types[c]) for c in ocols]
        from relational.memcomparable import encode_rows
        rows = list(zip(*sorted_cols))
        enc = encode_rows(rows, [top.input.types[c] for c in ocols],
                          [OrderType(d, nf) for _, d, nf in top.order])
        extra = next((i for i in range(1, len(enc)) if enc[i] != enc[0]), len(enc)) - 1
        end += extra
    return idx.slice(top.offset, max(0, end - top.offset))


__all__ = ["aggregate", "join_pairs", "sort_indices", "top_n_indices", "DataType"]
