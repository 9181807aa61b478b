"""The vectorized per-chunk kernels of :class:`~stream.executors.hash_agg.HashAgg`: grouping a
chunk's rows, append-only min/max per group, and the generated loop that adds per-group deltas
to the group states.

- :func:`group_ids` numbers a chunk's groups with one stable sort (by an integer key column
  itself, else by the key columns' dictionary codes); :func:`merge_equal_keys` then merges the
  groups whose keys Arrow tells apart but SQL calls equal (``1.0``/``1.00``, ``-0.0``/``0.0``).
- :func:`group_best` is the min or max of a column per group (``minimum``/``maximum.reduceat``
  for numeric types; NaN is the largest value, as in Postgres; DECIMAL and INTERVAL in Python,
  an INTERVAL ordered by its span as Postgres orders it).
- :func:`make_adder` generates ``add(keys, states, *deltas, *bests)``, the per-group loop that is
  an aggregation's hot path.

Invariant: pure functions of their arguments -- no state tables, caches or executor state
(``make_adder``'s function changes only the ``states`` lists it is given). Group ids are
dense, ``0..g-1``, numbered in key order.

Who may call: :mod:`stream.executors.hash_agg` only.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from relational.arrow import to_pylist
from relational.types import DataType
from stream.executors.agg_call import order_key


def group_ids(key_columns, n):
    """``(inverse, order, starts, uniq)``: each row's group id (groups numbered in key order),
    the rows sorted by group (stable; None without a group key), where each group starts in
    that order, and for one integer key column without NULLs the groups' key values (numpy;
    else None)."""
    if not key_columns:
        return np.zeros(n, np.int64), None, np.zeros(1, np.int64), None
    uniq = None
    if len(key_columns) == 1 and key_columns[0].null_count == 0 and pa.types.is_integer(key_columns[0].type):
        codes = key_columns[0].to_numpy()
        uniq = codes
    else:
        codes = None
        for col in key_columns:
            enc = col.dictionary_encode(null_encoding="encode")
            idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            codes = idx if codes is None else codes * len(enc.dictionary) + idx
            if len(key_columns) > 1:   # renumber densely so the next product cannot overflow
                codes = np.unique(codes, return_inverse=True)[1].astype(np.int64)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    boundary = np.empty(n, np.bool_)
    boundary[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=boundary[1:])
    starts = np.flatnonzero(boundary)
    inv = np.empty(n, np.int64)
    inv[order] = np.cumsum(boundary) - 1
    return inv, order, starts, (ordered[starts] if uniq is not None else None)


def merge_equal_keys(keys, inv):
    """Renumber groups whose keys are equal as values (one group each)."""
    ids: dict = {}
    remap = np.array([ids.setdefault(k, len(ids)) for k in keys], np.int64)
    inv = remap[inv]
    order = np.argsort(inv, kind="stable")
    ordered = inv[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return inv, order, starts, list(ids)


_NUMERIC_EXTREMES = {pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()}


def group_best(inv, order, starts, column, mask, g, call) -> list:
    """Per group, the min or max of ``column`` over the rows in ``mask`` (None: no such row)."""
    kind = call.kind
    if column.type in _NUMERIC_EXTREMES:
        # NULLs filled first: an integer column with NULLs would convert to float64 (inexact
        # beyond 2**53); the masked rows are replaced below anyway
        values = (column.fill_null(0) if column.null_count else column).to_numpy(zero_copy_only=False)
        if values.dtype.kind == "f":   # NaN is the largest value (Postgres): max keeps it, min skips it
            fill, reduce = (np.inf, np.fmin) if kind == "min" else (-np.inf, np.maximum)
        else:
            info = np.iinfo(values.dtype)
            fill, reduce = (info.max, np.minimum) if kind == "min" else (info.min, np.maximum)
        if not mask.all():
            values = np.where(mask, values, fill)
        if order is not None:
            values, mask = values[order], mask[order]
        best = reduce.reduceat(values, starts).tolist()
        if mask.all():
            return best
        present = np.add.reduceat(mask.astype(np.int64), starts).tolist()
        return [b if p else None for b, p in zip(best, present)]
    rows = np.flatnonzero(mask)
    out = [None] * g
    if not len(rows):
        return out
    # DECIMAL is text in Arrow; Arrow has no min/max kernel for INTERVAL (and would compare
    # its fields, not Postgres' span): both compare as Python values
    if call.arg_type in (DataType.DECIMAL, DataType.INTERVAL) or order is None:
        values = to_pylist(column.take(pa.array(rows)), call.arg_type)
        for gi, v in zip(inv[rows].tolist(), values):
            cur = out[gi]
            if cur is None or (order_key(v) < order_key(cur) if kind == "min" else order_key(v) > order_key(cur)):
                out[gi] = v
        return out
    table = pa.table({"g": pa.array(inv[rows]), "v": column.take(pa.array(rows))})
    res = table.group_by("g").aggregate([("v", kind)])
    for gi, v in zip(res.column("g").to_pylist(), to_pylist(res.column(f"v_{kind}"), call.arg_type)):
        out[gi] = v
    return out


def make_adder(slots, n_lists: int, extremes, check_negative: bool, on_negative):
    """A function ``add(keys, states, *deltas, *bests)`` doing ``states[g][at] += deltas[i][g]``
    for each ``(at, i)`` of ``slots`` and every group ``g``, in one loop (generated: the
    per-group loop is the hot path of an aggregation; slots whose deltas are the same list,
    such as count(*) and a row count, read one loop variable), then for each ``(at, kind[, plain])`` of
    ``extremes`` (an append-only min or max) keeping the better of ``states[g][at]`` and
    ``bests[i][g]`` (None: no value; ``plain``: the type has no NaN, so Python's ``<`` is its
    order and ``order_key`` is skipped). With ``check_negative`` it calls ``on_negative(key)``
    for a group whose row count (slot 0) went below zero."""
    names = [f"d{i}" for i in range(n_lists)] + [f"b{i}" for i in range(len(extremes))]
    lines = [f"def add(keys, states, {', '.join(names)}):",
             f"    for key, st, {', '.join(names)} in zip(keys, states, {', '.join(names)}):"]
    lines += [f"        st[{at}] += d{i}" for at, i in slots]
    for i, (at, kind, *plain) in enumerate(extremes):
        better = "<" if kind == "min" else ">"
        test = f"b{i} {better} cur" if plain and plain[0] else f"order_key(b{i}) {better} order_key(cur)"
        lines += [f"        if b{i} is not None:",
                  f"            cur = st[{at}]",
                  f"            if cur is None or {test}:",
                  f"                st[{at}] = b{i}"]
    if check_negative:
        lines.append("        if st[0] < 0: on_negative(key)")
    namespace = {"on_negative": on_negative, "order_key": order_key}
    exec("\n".join(lines), namespace)   # noqa: S102 -- generated from slot indices only
    return namespace["add"]
