"""EXCEPT and INTERSECT (distinct): bound onto the plan nodes UNION ALL already uses.

Job: ``L EXCEPT R`` / ``L INTERSECT R`` is the tagged UNION ALL of both sides (their columns
cast to common types, a branch tag: 0 left, 1 right), grouped by every column with two
counts -- the rows from the left, the rows from the right -- kept where the left count is
positive and the right one is zero (EXCEPT) or positive (INTERSECT), projected back to the
columns. Grouping treats NULLs as equal, as set operations must. So an MV of a set operation
is a HashAgg and a Filter: a row reappears in an EXCEPT when the right side loses its last copy.

``EXCEPT ALL`` / ``INTERSECT ALL`` keep row multiplicities (a row m times on the left and n
times on the right is kept max(m - n, 0) / min(m, n) times): each side's copies of a row are
first numbered 1, 2, ... (a ``row_number`` OverWindow partitioned by the columns and the branch
tag), and the numbered rows go through the distinct operation above: copy k of a row survives
EXCEPT when the right has fewer than k copies, INTERSECT when both have at least k. In an MV
the OverWindow renumbers a row's copies as they come and go.

``CORRESPONDING [BY (names)]`` (any set operation, as in RisingWave and the SQL standard;
sqlglot parses it as ``by_name`` with ``kind=INNER``): each side is first projected to the
columns whose names both sides have, in the left side's order (``BY``: the listed names, in
the listed order, each required on both sides); a name that is ambiguous on a side, or no
common name at all, is a BindError. DuckDB's ``UNION BY NAME`` (NULL-filling) is refused.

Callers: :mod:`sql.bind.select` (``QueryBinder.bind_query``).
"""

from __future__ import annotations

from sqlglot import exp

from relational.types import DataType
from stream import expr as E

from sql.errors import BindError, UnsupportedError, error_at
from sql.plan import nodes as P


def corresponding_sides(binder, node):
    """``(left plan, right plan)`` of a ``CORRESPONDING`` set operation, each projected to the
    corresponding columns (module docstring), or None when ``node`` is positional."""
    if not node.args.get("by_name"):
        return None
    what = type(node).__name__.upper()
    if (node.args.get("kind") or "").upper() != "INNER" or node.args.get("side"):
        raise error_at(UnsupportedError, f"{what} BY NAME is not supported (use {what} CORRESPONDING)", node)
    left = binder.bind_query(node.this, top=False)
    right = binder.bind_query(node.expression, top=False)
    lnames, rnames = (list(p.names[:p.n_visible]) for p in (left, right))
    by = node.args.get("on")
    if by:
        wanted = [_ident(c) for c in by]
        for name in wanted:
            if wanted.count(name) > 1:
                raise error_at(BindError, f"column {name!r} appears more than once in CORRESPONDING BY", node)
            if name not in lnames or name not in rnames:
                side = "left" if name not in lnames else "right"
                raise error_at(BindError, f"column {name!r} in CORRESPONDING BY is not in the {side} query "
                                          f"of {what}", node)
    else:
        wanted = [n for n in lnames if n in rnames]
        if not wanted:
            raise error_at(BindError, f"{what} CORRESPONDING: the two queries have no column name in common", node)
    out = []
    for plan, names in ((left, lnames), (right, rnames)):
        exprs = []
        for name in wanted:
            if names.count(name) > 1:
                raise error_at(BindError, f"column name {name!r} is ambiguous in a query of {what} CORRESPONDING",
                               node)
            i = names.index(name)
            exprs.append(E.Col(i, plan.types[i], name))
        out.append(P.Project(plan, exprs, list(wanted)))
    return out[0], out[1]


def _ident(col) -> str:
    ident = col.this if isinstance(col, exp.Column) else col
    if isinstance(ident, exp.Identifier):
        return ident.this if ident.quoted else ident.this.lower()
    return str(ident.name).lower()


def bind_except_intersect(binder, node) -> P.Node:
    """The plan of an ``exp.Except`` / ``exp.Intersect`` (module docstring)."""
    what = "EXCEPT" if isinstance(node, exp.Except) else "INTERSECT"
    every = not node.args.get("distinct")   # ALL: row multiplicities count
    sides = corresponding_sides(binder, node)
    if sides is not None:
        left, right = sides
    else:
        left = binder.bind_query(node.this, top=False)
        right = binder.bind_query(node.expression, top=False)
    union = binder.union_all([left, right], node, what)
    width = left.n_visible
    names = list(union.names[:width])
    tag = E.Col(width, union.types[width], "_union_tag")
    exprs = [E.Col(i, union.types[i], names[i]) for i in range(width)]
    keys = width
    if every:   # number the copies of each row on each side: (row, copy number) is then a set
        call = P.WindowCall("row_number", None, DataType.BIGINT, "row_number()")
        union = P.OverWindow(union, list(range(width + 1)), [], [call], ("range", None), ["_copy"])
        exprs.append(E.Col(len(union.types) - 1, DataType.BIGINT, "_copy"))
        keys = width + 1
    exprs += [E.Cmp("=", tag, E.Lit(0, tag.data_type)), E.Cmp("=", tag, E.Lit(1, tag.data_type))]
    pre = P.Project(union, exprs, names + (["_copy"] if every else []) + ["_from_left", "_from_right"])
    calls = [P.AggSpec("count", None, False, keys + side, DataType.BIGINT, f"count(*) /* {what.lower()} {side} */")
             for side in (0, 1)]
    agg = P.Agg(pre, list(range(keys)), calls, list(pre.names[:keys]) + ["_left", "_right"])
    n_left, n_right = E.Col(keys, DataType.BIGINT, "_left"), E.Col(keys + 1, DataType.BIGINT, "_right")
    zero = E.Lit(0, DataType.BIGINT)
    keep = E.And(E.Cmp(">", n_left, zero), E.Cmp("=" if what == "EXCEPT" else ">", n_right, zero))
    kept = P.Filter(agg, keep)
    return P.Project(kept, [E.Col(i, agg.types[i], names[i]) for i in range(width)], names)
