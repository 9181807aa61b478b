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


RULES = (drop_true_filter, merge_filters)


def optimize(plan: P.Node) -> P.Node:
    """``plan`` rewritten by ``RULES`` (module docstring)."""
    new_inputs = tuple(optimize(i) for i in plan.inputs)
    if any(a is not b for a, b in zip(new_inputs, plan.inputs)):
        plan = _with_inputs(plan, new_inputs)
    changed = True
    while changed:
        changed = False
        for rule in RULES:
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
