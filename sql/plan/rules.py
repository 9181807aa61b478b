"""Logical rewrite rules, applied in one ordered tuple (``RULES``) to every plan before it is
built (stream) or executed (batch).

Job: simplify plans without changing their results or their stateful nodes: the set and order
of stateful nodes (Agg, Join, TopN) must stay as the binder made them, because an MV's internal
state table ids are assigned in plan order and reopening replans the stored SQL (sql/build.py).

A rule is ``fn(node) -> node | None`` (None: no change), applied bottom-up until no rule
changes the node. To add one: write it here and put it in ``RULES`` at the right place.

Callers: :mod:`sql.statements` (``optimize`` after binding).
"""

from __future__ import annotations

from stream.expr import And, Lit

from sql.plan import nodes as P


def merge_filters(node):
    """``Filter(Filter(x, a), b)`` -> ``Filter(x, a AND b)``."""
    if isinstance(node, P.Filter) and isinstance(node.input, P.Filter):
        return P.Filter(node.input.input, And(node.input.condition, node.condition))
    return None


def drop_true_filter(node):
    """``Filter(x, TRUE)`` -> ``x``."""
    if isinstance(node, P.Filter) and isinstance(node.condition, Lit) and node.condition.value is True:
        return node.input
    return None


# which sides' rows a WHERE conjunct over one side may filter before the join, by join kind
_PUSHABLE = {"inner": ("left", "right"), "left": ("left",), "right": ("right",), "semi": ("left",),
             "anti": ("left",), "full": ()}
_VOLATILE_FUNCS = ("random", "clock_timestamp")


def push_filter_below_join(node):
    """``Filter(Join(l, r), c1 AND c2 ...)``: each conjunct that reads one side's columns only
    (and nothing volatile) also filters that side before the join, where the join kind allows it
    (an inner join both sides; a left join its left, a right join its right; semi / anti their
    left; a full join neither): the join then matches and keeps fewer rows (Nexmark q3's WHERE
    over auctions and persons), and a batch Scan below gets key ranges from it. The Filter above
    stays, marked ``pushed``: an MV planned before this rule existed keeps join state holding
    rows the conjunct rejects, and the Filter above still removes what they join. Temporal
    joins' right side stays a bare table (its lookup reads it by key)."""
    if not isinstance(node, P.Filter) or getattr(node, "pushed", False) or not isinstance(node.input, P.Join):
        return None
    join = node.input
    sides = _PUSHABLE.get(join.kind, ())
    if getattr(join, "temporal", False):
        sides = tuple(s for s in sides if s != "right")
    if not sides:
        return None
    width = len(join.left.types)
    to_left, to_right = [], []
    for c in _conjuncts(node.condition):
        refs = c.column_refs()
        if not refs or _volatile(c):
            continue
        if "left" in sides and max(refs) < width:
            to_left.append(c)
        elif "right" in sides and min(refs) >= width:
            to_right.append(_shifted(c, -width))
    if not to_left and not to_right:
        return None
    left = P.Filter(join.left, _and(to_left)) if to_left else join.left
    right = P.Filter(join.right, _and(to_right)) if to_right else join.right
    kept = P.Filter(_with_inputs(join, (left, right)), node.condition)
    kept.pushed = True
    return kept


def _conjuncts(e) -> list:
    from stream.expr import Or
    if isinstance(e, And) and not isinstance(e, Or):
        return [c for a in e.args for c in _conjuncts(a)]
    return [e]


def _and(conds):
    return conds[0] if len(conds) == 1 else And(*conds)


def _volatile(e) -> bool:
    from stream.expr import Func
    if isinstance(e, Func) and e.name in _VOLATILE_FUNCS:
        return True
    return any(_volatile(c) for c in e.children())


def _shifted(e, delta: int):
    """A copy of the expression ``e`` reading column ``i + delta`` wherever it read ``i``. A
    subexpression may appear twice in ``e`` (NULLIF(a, b) is CASE WHEN a = b THEN NULL ELSE a,
    with one ``a``), and the copy keeps that sharing: each node is shifted once."""
    import copy
    from stream.expr import Col
    out = copy.deepcopy(e)
    stack, seen = [out], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Col):
            x.index += delta
        stack.extend(x.children())
    return out


RULES = (drop_true_filter, merge_filters, push_filter_below_join)


def optimize(plan: P.Node, pushdown: bool = True) -> P.Node:
    """``plan`` rewritten by ``RULES`` (module docstring); ``pushdown=False`` leaves out
    push_filter_below_join (an MV planned before it: its join state keeps the rows the
    conjuncts reject, which a pushed Filter would not let it delete)."""
    rules = RULES if pushdown else tuple(r for r in RULES if r is not push_filter_below_join)
    new_inputs = tuple(optimize(i, pushdown) for i in plan.inputs)
    if any(a is not b for a, b in zip(new_inputs, plan.inputs)):
        plan = _with_inputs(plan, new_inputs)
    changed = True
    while changed:
        changed = False
        for rule in rules:
            out = rule(plan)
            if out is not None:
                plan, changed = out, True
    return plan


def _with_inputs(node, inputs):
    """A shallow copy of ``node`` reading ``inputs`` (schema and key are unchanged by rules)."""
    import copy
    clone = copy.copy(node)
    clone.inputs = tuple(inputs)
    for attr, value in (("input", 0), ("left", 0), ("right", 1)):
        if hasattr(clone, attr):
            setattr(clone, attr, inputs[value])
    return clone
