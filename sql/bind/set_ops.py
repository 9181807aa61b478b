"""EXCEPT and INTERSECT (distinct): bound onto the plan nodes UNION ALL already uses.

Job: ``L EXCEPT R`` / ``L INTERSECT R`` is the tagged UNION ALL of both sides (their columns
cast to common types, a branch tag: 0 left, 1 right), grouped by every column with two
counts -- the rows from the left, the rows from the right -- kept where the left count is
positive and the right one is zero (EXCEPT) or positive (INTERSECT), projected back to the
columns. Grouping treats NULLs as equal, as set operations must. So an MV of a set operation
is a HashAgg and a Filter: a row reappears in an EXCEPT when the right side loses its last copy.

``EXCEPT ALL`` / ``INTERSECT ALL`` (row multiplicities) are an UnsupportedError.

Callers: :mod:`sql.bind.select` (``QueryBinder.bind_query``).
"""

from __future__ import annotations

from sqlglot import exp

from relational.types import DataType
from stream import expr as E

from sql.errors import UnsupportedError, error_at
from sql.plan import nodes as P


def bind_except_intersect(binder, node) -> P.Node:
    """The plan of an ``exp.Except`` / ``exp.Intersect`` (module docstring)."""
    what = "EXCEPT" if isinstance(node, exp.Except) else "INTERSECT"
    if not node.args.get("distinct"):
        raise error_at(UnsupportedError, f"{what} ALL is not supported (only {what} [DISTINCT])", node)
    left = binder.bind_query(node.this, top=False)
    right = binder.bind_query(node.expression, top=False)
    union = binder.union_all([left, right], node, what)
    width = left.n_visible
    names = list(union.names[:width])
    tag = E.Col(width, union.types[width], "_union_tag")
    exprs = [E.Col(i, union.types[i], names[i]) for i in range(width)]
    exprs += [E.Cmp("=", tag, E.Lit(0, tag.data_type)), E.Cmp("=", tag, E.Lit(1, tag.data_type))]
    pre = P.Project(union, exprs, names + ["_from_left", "_from_right"])
    calls = [P.AggSpec("count", None, False, width + side, DataType.BIGINT, f"count(*) /* {what.lower()} {side} */")
             for side in (0, 1)]
    agg = P.Agg(pre, list(range(width)), calls, names + ["_left", "_right"])
    n_left, n_right = E.Col(width, DataType.BIGINT, "_left"), E.Col(width + 1, DataType.BIGINT, "_right")
    zero = E.Lit(0, DataType.BIGINT)
    keep = E.And(E.Cmp(">", n_left, zero), E.Cmp("=" if what == "EXCEPT" else ">", n_right, zero))
    kept = P.Filter(agg, keep)
    return P.Project(kept, [E.Col(i, agg.types[i], names[i]) for i in range(width)], names)
