"""Logical plan nodes: the one plan both a streaming MV and a batch SELECT execute.

Job: each node knows its output ``names``, ``types`` and ``stream_key`` (column indices that
identify a row of its output as a change stream: RisingWave's pk_indices), derived from its
inputs at construction. Expressions are :mod:`stream.expr` trees over the node's input columns.

Stream keys (seed 002 "Keys"):
- ``Scan``: the relation's pk (``_row_id`` for tables without one).
- ``Project``: the input key mapped through plain column references; key columns the
  projection drops are kept as hidden trailing columns (``n_visible`` counts the user's).
- ``Filter``: the input's. ``Agg``: the group columns (none for a global aggregate: one row).
- ``Join``: left key + right key (shifted); a superset of the minimal key is still a key.
  A FULL join's left input has a never-NULL key column (the binder appends a hidden TRUE one
  to its key otherwise: ``sql.bind.select.full_join_left``), so a left-only row and a
  right-only row never share a key.
  Semi/anti joins, ``ScalarJoin`` and ``DynamicFilter``: the left's (one output row per left
  row at most).
- ``Union``: a branch tag column plus every branch's key slots (the planner pads them).
- ``Sort``/``Limit``: batch only; the input's key.
- ``TopN``: the group columns then the input's key (what GroupTopN emits: a row that moves
  between groups is two keys). ``RowNumber``: batch only; the input's key.
- ``OverWindow``: the input's key (one output row per input row).
- ``Unnest``: the input's key plus its ordinality column.

Invariants: ``len(names) == len(types)``; every ``stream_key`` index < ``len(types)``;
``n_visible <= len(types)`` and hidden columns come last.

Callers: :mod:`sql.bind.select` builds them, :mod:`sql.build` (stream) and
:mod:`sql.batch.execute` (batch) execute them, :mod:`sql.plan.explain` prints them.
To add a node: subclass ``Node``, derive schema and key in ``__init__``, add an ``explain``
label, a ``build`` case in :mod:`sql.build` and a batch case in :mod:`sql.batch.execute`.
"""

from __future__ import annotations

from relational.types import DataType
from stream.expr import Col, Expr, Lit


class Node:
    inputs: tuple = ()
    names: list
    types: list
    stream_key: list
    n_visible: int

    def label(self) -> str:
        return type(self).__name__

    def _finish(self, names, types, stream_key, n_visible=None):
        self.names, self.types, self.stream_key = list(names), list(types), list(stream_key)
        self.n_visible = len(self.names) if n_visible is None else n_visible


class Scan(Node):
    """Every column of a table or MV (visible then hidden)."""

    def __init__(self, relation, alias: str | None = None):
        self.relation, self.alias = relation, alias or relation.name
        cols = relation.columns
        self._finish([n for n, _ in cols], [t for _, t in cols], relation.pk_indices, relation.n_visible)

    def label(self) -> str:
        as_of = getattr(self, "as_of", None)   # time travel (sql/bind/time_travel.py)
        return f"Scan({self.relation.name}, table_id={self.relation.table_id}" + \
            (f", as_of={as_of.text})" if as_of is not None else ")")


class Values(Node):
    """Constant rows (``SELECT`` without FROM): each row a tuple of Python values."""

    def __init__(self, rows, names, types):
        self.rows = [tuple(r) for r in rows]
        self._finish(names, types, [])

    def label(self) -> str:
        return f"Values({len(self.rows)} rows)"


class Project(Node):
    """``exprs`` over the input; key columns not projected are appended as hidden columns."""

    def __init__(self, input: Node, exprs, names):
        exprs, names = list(exprs), list(names)
        n_visible = len(exprs)
        out_of = {}
        for i, e in enumerate(exprs):
            if isinstance(e, Col):
                out_of.setdefault(e.index, i)
        key = []
        for k in input.stream_key:
            if k not in out_of:
                out_of[k] = len(exprs)
                exprs.append(Col(k, input.types[k], input.names[k]))
                names.append(f"_hidden{len(names)}")
            key.append(out_of[k])
        self.input, self.inputs, self.exprs = input, (input,), exprs
        self._finish(names, [e.data_type for e in exprs], key, n_visible)

    def label(self) -> str:
        return "Project(" + ", ".join(map(str, self.exprs)) + ")"


class Unnest(Node):
    """``unnest(a1, a2, ...)`` over each input row (Postgres' LATERAL unnest in FROM and its
    ProjectSet for a select list): the input's columns, one column per array expression (its
    element type), then the 1-based ordinality (BIGINT). An input row yields as many rows as its
    longest array, the shorter ones padded with NULL; a row whose arrays are all NULL or empty
    yields none, or with ``outer`` (``LEFT JOIN LATERAL ... ON TRUE``) one row of NULLs. Batch:
    sql/batch/execute.py; stream: stream/executors/project_set.py (stateless)."""

    def __init__(self, input: Node, arrays, names, outer: bool = False):
        self.input, self.inputs, self.arrays, self.outer = input, (input,), list(arrays), outer
        types = list(input.types) + [a.data_type.elem for a in self.arrays] + [DataType.BIGINT]
        names = list(input.names) + list(names) + ["ordinality"]
        self._finish(names, types, list(input.stream_key) + [len(types) - 1])

    def label(self) -> str:
        return ("Unnest(" if not self.outer else "Unnest(outer, ") + ", ".join(map(str, self.arrays)) + ")"


class Filter(Node):
    def __init__(self, input: Node, condition: Expr):
        self.input, self.inputs, self.condition = input, (input,), condition
        self._finish(input.names, input.types, input.stream_key, input.n_visible)

    def label(self) -> str:
        return f"Filter({self.condition})"


class AggSpec:
    """One aggregate call: ``kind`` (count/sum/avg/min/max/bool_and/bool_or), ``arg`` an input
    column (None for count(*)), ``distinct``, ``filter`` an input BOOLEAN column or None;
    ``return_type`` from ``stream.executors.AggCall.bind``."""

    def __init__(self, kind, arg, distinct, filter_col, return_type, text):
        self.kind, self.arg, self.distinct, self.filter_col = kind, arg, distinct, filter_col
        self.return_type, self.text = return_type, text


class Agg(Node):
    """Group by input columns ``group`` (indices); output: group columns then one per call."""

    def __init__(self, input: Node, group, calls, names):
        self.input, self.inputs, self.group, self.calls = input, (input,), list(group), list(calls)
        types = [input.types[g] for g in self.group] + [c.return_type for c in self.calls]
        self._finish(names, types, list(range(len(self.group))))

    def label(self) -> str:
        g = ", ".join(f"${i}" for i in self.group)
        return f"Agg(group=[{g}], calls=[{', '.join(c.text for c in self.calls)}])"


class Join(Node):
    """``kind`` inner/left/right/full, or semi/anti (the left rows with / without a match:
    output and key are the left's); ``left_keys``/``right_keys`` equi-join columns (empty: a
    nested-loop join, batch only); ``condition`` an extra expression over left columns then
    right columns (or None)."""

    def __init__(self, left: Node, right: Node, kind, left_keys, right_keys, condition):
        self.left, self.right, self.inputs = left, right, (left, right)
        self.kind, self.left_keys, self.right_keys, self.condition = kind, list(left_keys), list(right_keys), condition
        w = len(left.types)
        if kind in ("semi", "anti"):
            self._finish(left.names, left.types, left.stream_key, left.n_visible)
            return
        self._finish(left.names + right.names, left.types + right.types,
                     list(left.stream_key) + [w + k for k in right.stream_key])

    def label(self) -> str:
        keys = ", ".join(f"${a} = ${len(self.left.types) + b}" for a, b in zip(self.left_keys, self.right_keys))
        keys = keys or "nested loop"
        extra = f", condition={self.condition}" if self.condition is not None else ""
        return f"Join({self.kind}, {keys}{extra})"


class ScalarJoin(Node):
    """The left rows, each with the value of ``right``'s first column appended: ``right`` is an
    uncorrelated scalar subquery (at most one row; none gives NULL, several an ExecutionError in
    batch -- a materialized view only takes a ``right`` that provably has at most one row).
    Output: the left columns, then the value; stream key: the left's (one output row per left
    row). Stream: a left outer hash join on a constant key (sql/build.py)."""

    def __init__(self, left: Node, right: Node):
        self.left, self.right, self.inputs = left, right, (left, right)
        self._finish(left.names + [right.names[0]], left.types + [right.types[0]], left.stream_key)

    def label(self) -> str:
        return f"ScalarJoin(${len(self.left.types)} = scalar subquery)"


class Now(Node):
    """The current time as a one-row relation that changes every barrier (stream only: the right
    side of a temporal filter's DynamicFilter; ``stream/executors/now.py``). Column ``now``
    TIMESTAMPTZ, no key (one row)."""

    def __init__(self):
        self._finish(["now"], [DataType.TIMESTAMPTZ], [])


class DynamicFilter(Node):
    """``left WHERE left[key] <op> (right's first column)``, ``right`` a one-row scalar subquery
    of the same type as the key (RisingWave's dynamic filter: the rows passing follow both
    inputs). Output and key: the left's."""

    def __init__(self, left: Node, right: Node, key: int, op: str):
        self.left, self.right, self.inputs, self.key, self.op = left, right, (left, right), key, op
        self._finish(left.names, left.types, left.stream_key, left.n_visible)

    def label(self) -> str:
        right = "now() expression" if any(isinstance(n, Now) for n in walk(self.right)) else "scalar subquery"
        return f"DynamicFilter(${self.key} {self.op} {right})"


class Union(Node):
    """UNION ALL of inputs already projected to one schema (tag + key slots: module docstring)."""

    def __init__(self, inputs, stream_key, n_visible):
        self.inputs = tuple(inputs)
        first = self.inputs[0]
        self._finish(first.names, first.types, stream_key, n_visible)

    def label(self) -> str:
        return f"Union({len(self.inputs)} inputs)"


class Sort(Node):
    """Batch ORDER BY: ``keys`` = [(column, descending, nulls_first)]."""

    def __init__(self, input: Node, keys):
        self.input, self.inputs, self.keys = input, (input,), list(keys)
        self._finish(input.names, input.types, input.stream_key, input.n_visible)

    def label(self) -> str:
        return "Sort(" + ", ".join(f"${c}{' DESC' if d else ''}" for c, d, _ in self.keys) + ")"


class Limit(Node):
    def __init__(self, input: Node, limit, offset):
        self.input, self.inputs, self.limit, self.offset = input, (input,), limit, offset
        self._finish(input.names, input.types, input.stream_key, input.n_visible)

    def label(self) -> str:
        return f"Limit({self.limit}, offset={self.offset})"


def _order_text(keys) -> str:
    out = []
    for c, desc, nulls_first in keys:
        text = f"${c}" + (" DESC" if desc else "")
        if nulls_first != desc:
            text += " NULLS FIRST" if nulls_first else " NULLS LAST"
        out.append(text)
    return ", ".join(out)


class TopN(Node):
    """``ORDER BY order LIMIT limit OFFSET offset`` per ``group`` (input columns; empty: the
    whole input), ties broken by the input's stream key ascending in stream and batch alike.
    ``order`` = [(column, descending, nulls_first)], never empty; ``limit`` None: no limit.
    ``rank``: a BIGINT column ``rank_name`` appended, the row's 1-based position in its group
    (ROW_NUMBER); the input must then have no hidden columns (hidden columns come last).
    ``with_ties``: also every row tied on the order columns with the last one of the window."""

    def __init__(self, input: Node, order, limit, offset=0, group=(), rank: bool = False, rank_name: str = "rn",
                 with_ties: bool = False):
        self.input, self.inputs = input, (input,)
        self.order, self.limit, self.offset, self.group = list(order), limit, offset, list(group)
        self.rank, self.with_ties = rank, with_ties
        assert not (rank and with_ties), "a ranked TopN WITH TIES"
        key = self.group + [k for k in input.stream_key if k not in self.group]
        names, types, n_visible = list(input.names), list(input.types), input.n_visible
        if rank:
            assert n_visible == len(types), "a ranked TopN over hidden columns"
            names.append(rank_name)
            types.append(DataType.BIGINT)
            n_visible += 1
        self._finish(names, types, key, n_visible)

    def label(self) -> str:
        group = f"group=[{', '.join(f'${g}' for g in self.group)}], " if self.group else ""
        limit = "ALL" if self.limit is None else self.limit
        rank = ", rank" if self.rank else ", with_ties" if self.with_ties else ""
        append = ", append_only" if inserts_only(self.input) else ""
        return f"TopN({group}order=[{_order_text(self.order)}], limit={limit}, offset={self.offset}{rank}{append})"


class RowNumber(Node):
    """``ROW_NUMBER() OVER (PARTITION BY partition ORDER BY order)``: the input's columns then a
    BIGINT row number (batch only; in a stream plan only under a rank filter, which the binder
    turns into a ranked TopN). Ties broken by the input's stream key, like TopN. ``source`` is
    the sqlglot window node (error positions)."""

    def __init__(self, input: Node, partition, order, name: str = "row_number", source=None):
        self.input, self.inputs = input, (input,)
        self.partition, self.order, self.source = list(partition), list(order), source
        self._finish(list(input.names) + [name], list(input.types) + [DataType.BIGINT], input.stream_key)

    def label(self) -> str:
        part = ", ".join(f"${g}" for g in self.partition)
        return f"RowNumber(partition=[{part}], order=[{_order_text(self.order)}])"


class WindowCall:
    """One window call of an OverWindow: ``kind`` (count/sum/avg/min/max, or a window function
    of ``stream.executors.over_window.NAV_KINDS``), ``arg`` an input column (None: count(*) and
    the ranking functions), ``return_type``, ``text`` for EXPLAIN, ``params`` the constants of
    ntile / lag / lead / nth_value (``NavCall``)."""

    def __init__(self, kind, arg, return_type, text, params=()):
        self.kind, self.arg, self.return_type, self.text = kind, arg, return_type, text
        self.params = tuple(params)


class OverWindow(Node):
    """``call(x) OVER (PARTITION BY partition ORDER BY order <frame>)`` for each of ``calls``:
    the input's columns then one column per call (names ``names``); stream key: the input's.
    ``frame``: ``("rows", n)`` n PRECEDING AND CURRENT ROW, ``("rows", None)`` UNBOUNDED
    PRECEDING, ``("range", None)`` RANGE UNBOUNDED PRECEDING (peers included). Rows of a
    partition are ordered by ``order`` then the input's stream key, as TopN/RowNumber
    (stream: :class:`stream.executors.over_window.OverWindow`)."""

    def __init__(self, input: Node, partition, order, calls, frame, names, source=None):
        self.input, self.inputs = input, (input,)
        self.partition, self.order, self.calls, self.frame = list(partition), list(order), list(calls), tuple(frame)
        self.source = source
        self._finish(list(input.names) + list(names), list(input.types) + [c.return_type for c in self.calls],
                     input.stream_key)

    def label(self) -> str:
        part = ", ".join(f"${g}" for g in self.partition)
        kind, n = self.frame
        frame = "RANGE UNBOUNDED PRECEDING" if kind == "range" else \
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING" if kind == "all" else \
            f"ROWS {'UNBOUNDED' if n is None else n} PRECEDING"
        calls = ", ".join(c.text for c in self.calls)
        return f"OverWindow(calls=[{calls}], partition=[{part}], order=[{_order_text(self.order)}], frame={frame})"


def inserts_only(node: Node) -> bool:
    """Whether ``node``'s change stream can only insert: a Scan of a source or of an APPEND ONLY
    table whose Materialize never updates (no pk, or ON CONFLICT DO NOTHING), through Project, Filter,
    Union and other nodes marked ``row_wise`` (each input change maps to changes of its own op:
    TUMBLE/HOP). A TopN over such a stream keeps only its window (append-only GroupTopN)."""
    if isinstance(node, Scan):
        r = node.relation
        if r.kind == "source":   # a connector's rows, never stored, never updated (sql/source.py)
            return True
        return r.kind == "table" and r.append_only and (r.row_id or r.conflict == "ignore")
    if isinstance(node, (Project, Filter, Union)) or getattr(node, "row_wise", False):
        return all(inserts_only(i) for i in node.inputs)
    return False


def visible(node: Node) -> Node:
    """``node`` without its hidden columns (a batch result's shape)."""
    if node.n_visible == len(node.types):
        return node
    exprs = [Col(i, node.types[i], node.names[i]) for i in range(node.n_visible)]
    p = Project.__new__(Project)
    p.input, p.inputs, p.exprs = node, (node,), exprs
    p._finish(node.names[:node.n_visible], node.types[:node.n_visible], [])
    return p


def walk(node: Node):
    yield node
    for i in node.inputs:
        yield from walk(i)


__all__ = ["Agg", "AggSpec", "Col", "DataType", "DynamicFilter", "Filter", "Join", "Limit", "Lit", "Node", "Now",
           "OverWindow",
           "Project", "RowNumber", "ScalarJoin", "Scan", "Sort", "TopN", "Union", "Values", "WindowCall", "inserts_only", "visible",
           "walk"]
