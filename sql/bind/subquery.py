"""Subquery binding: uncorrelated subqueries in expressions and WHERE -> plan nodes.

Job:
- a scalar subquery ``(SELECT ...)`` anywhere an expression is bound (WHERE, the select list,
  HAVING, ORDER BY): the subquery's plan joins the outer plan as a :class:`P.ScalarJoin` (one
  more column, the subquery's value) and the expression reads that column. ``EXISTS (q)`` is
  ``count(*) > 0`` over ``q``, the same way. :class:`Subqueries` collects them while an
  :class:`~sql.bind.expr.ExprBinder` binds, and ``attach`` adds the joins to the plan.
- WHERE conjuncts (:func:`where_conjunct`): ``x <op> (scalar subquery)`` with op ``< <= > >=``
  -> :class:`P.DynamicFilter`; ``x [NOT] IN (subquery)`` (also ``= ANY``, ``<> ALL``) -> a semi / anti
  :class:`P.Join` on ``x = y``. NOT IN follows SQL's three-valued logic: a row is kept when
  the anti join keeps it and the subquery has no NULL and either ``x`` is not NULL or the
  subquery is empty (a one-row count aggregate over the subquery, joined as a ScalarJoin).
  ``[NOT] EXISTS`` and ``IN`` with a subquery correlated by equalities, and correlated scalar
  aggregates: :mod:`sql.bind.correlated`.

Invariants: a materialized view only takes scalar subqueries that provably return at most one
row (a global aggregate below projections/filters), since a stream cannot fail later; in batch
a second row is an ExecutionError at run time (sql.batch.execute). A subquery naming a column
of the outer query (correlated) is an UnsupportedError unless :mod:`sql.bind.correlated`
decorrelates it.

Callers: :mod:`sql.bind.select` (``QueryBinder._select``).
"""

from __future__ import annotations

from sqlglot import exp

from relational.types import DataType, TypeKind
from stream import expr as E
from stream.expr_jsonb_cmp import equality_key

from sql import types as T
from sql.bind.expr import ExprBinder, Scope, ScopeCol
from sql.errors import BindError, UnsupportedError, error_at
from sql.plan import nodes as P
from sql.bind.correlated import correlated_scalar, correlated_semi, fromless, fromless_expression, try_bind

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_CMP = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}


def at_most_one_row(plan: P.Node) -> bool:
    """True when ``plan`` provably yields at most one row (a global aggregate under
    projections and filters, or a LIMIT 0/1: a Limit in batch, an ungrouped TopN anywhere)."""
    if isinstance(plan, P.Agg):
        return not plan.group
    if isinstance(plan, P.Limit) and plan.limit is not None and plan.limit <= 1:
        return True
    if isinstance(plan, P.TopN) and not plan.group and not plan.with_ties and plan.limit is not None \
            and plan.limit <= 1:
        return True
    if isinstance(plan, P.Values):
        return len(plan.rows) <= 1
    if isinstance(plan, P.Now):
        return True
    if isinstance(plan, (P.Project, P.Filter, P.Sort, P.Limit, P.DynamicFilter)):
        return at_most_one_row(plan.inputs[0])
    return False


def _is_subquery(node) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, (exp.Subquery, exp.Select))


def _unparen(node):
    while isinstance(node, exp.Paren):
        node = node.this
    return node


class Subqueries:
    """The scalar subqueries met while binding expressions over a plan ``base_width`` columns
    wide; :meth:`attach` joins them to that plan, each adding trailing columns (an uncorrelated
    one its value; a correlated one its probe columns, then its keys and value), so the value of
    each is a known column index at bind time. Pass the instance as an ExprBinder's
    ``subquery``. ``outer``: correlated subqueries may be decorrelated (False where the
    binder's scope is not the plan's columns, such as after an aggregation)."""

    def __init__(self, qb, base_width: int, outer: bool = True):
        self.qb, self.base_width, self.outer = qb, base_width, outer
        self.joins = []     # (right plan, outer key exprs or None)
        self.width = base_width

    def __call__(self, node, binder: ExprBinder) -> E.Expr:
        query = node.this if isinstance(node, exp.Exists) else node
        sub = self.qb.prebound.pop(id(query), None) or try_bind(self.qb, query, binder.scope)
        if sub is None:
            sel = fromless(query)
            rewritten = None if sel is None else fromless_expression(sel, isinstance(node, exp.Exists))
            if rewritten is not None:   # no FROM: an expression of the outer row, not a join
                return binder.bind(rewritten)
            if not self.outer:
                raise error_at(UnsupportedError, "correlated subqueries are not supported here (after GROUP BY)", node)
            right, keys, empty = correlated_scalar(self.qb, binder.scope, query, node,
                                                   exists=isinstance(node, exp.Exists))
            probes = len(keys) - len(_plain_keys(keys))
            at = self.width + probes + len(keys)
            self.joins.append((right, keys))
            self.width += probes + len(right.types)
            value = E.Col(at, right.types[len(keys)], "_value")
            if empty is not None:   # no inner row: the value over an empty group, not NULL
                matched = E.Col(at + 1, right.types[len(keys) + 1], "_matched")
                value = E.Case([(E.IsNull(matched), empty)], value, value.data_type)
            if isinstance(node, exp.Exists):
                return E.Cmp(">", value, E.Lit(0, value.data_type))
            return value
        if isinstance(node, exp.Exists):
            return E.Cmp(">", self.add(exists_count(sub)), E.Lit(0, DataType.BIGINT))
        one_column(sub, node)
        if not self.qb.batch and not at_most_one_row(sub):
            raise error_at(UnsupportedError, "a scalar subquery in a materialized view must provably return at most "
                                             "one row (such as a global aggregate); this one is not supported", node)
        return self.add(sub)

    def add(self, plan: P.Node) -> E.Col:
        self.joins.append((plan, None))
        self.width += 1
        return E.Col(self.width - 1, plan.types[0], plan.names[0])

    def attach(self, plan: P.Node) -> P.Node:
        assert len(plan.types) == self.base_width, (len(plan.types), self.base_width)
        for right, keys in self.joins:
            if keys is None:
                plan = P.ScalarJoin(plan, right)
                continue
            lkeys, probes = [], []
            plain = _plain_keys(keys)
            for i, k in enumerate(keys):
                if i in plain:
                    lkeys.append(k.index)
                else:
                    lkeys.append(len(plan.types) + len(probes))
                    probes.append(k)
            if probes:
                visible = plan.n_visible
                cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
                plan = P.Project(plan, cols + probes, list(plan.names) + [f"_probe{i}" for i in range(len(probes))])
                plan.n_visible = visible
            plan = P.Join(plan, right, "left", lkeys, list(range(len(keys))), None)
        assert len(plan.types) == self.width, (len(plan.types), self.width)
        return plan


def _plain_keys(keys) -> set:
    """Positions of the outer key expressions joined as the plan's own columns: a column
    reference met for the first time (a computed key, or a column repeated among the keys, is
    appended as a probe column: a join key names a column once)."""
    seen, plain = set(), set()
    for i, k in enumerate(keys):
        if isinstance(k, E.Col) and k.index not in seen:
            seen.add(k.index)
            plain.add(i)
    return plain


def one_column(plan: P.Node, where) -> P.Node:
    if plan.n_visible != 1:
        raise error_at(BindError, "subquery must return only one column", where)
    return plan


def exists_count(sub: P.Node) -> P.Node:
    """One row: ``count(*)`` of ``sub``'s rows (EXISTS is ``count > 0``)."""
    count = P.AggSpec("count", None, False, None, DataType.BIGINT, "count(*) /* exists */")
    return P.Agg(sub, [], [count], ["exists"])


def clone(plan: P.Node) -> P.Node:
    """A copy of ``plan``'s node tree (expressions and relations shared): a plan node is used at
    one place only, since its state tables are its own."""
    import copy
    node = copy.copy(plan)
    node.inputs = tuple(clone(i) for i in plan.inputs)
    for attr, at in (("input", 0), ("left", 0), ("right", 1)):
        if hasattr(node, attr):
            setattr(node, attr, node.inputs[at])
    return node


def has_subquery(node) -> bool:
    return any(True for _ in node.find_all(exp.Subquery, exp.Select, exp.Exists))


def _quantified(node):
    """``x = ANY (q)`` / ``x = SOME (q)`` as ``x IN (q)``, ``x <> ALL (q)`` as ``NOT x IN (q)``."""
    # (x = ANY (array) is no subquery: sql.bind.expr binds it as stream.expr_array.ArrayCompare)
    if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any) and _is_subquery(node.expression.this):
        return exp.In(this=node.this.copy(), query=node.expression.this.copy())
    if isinstance(node, exp.NEQ) and isinstance(node.expression, exp.All) and _is_subquery(node.expression.this):
        return exp.Not(this=exp.In(this=node.this.copy(), query=node.expression.this.copy()))
    return None


def _normalized(node):
    """``(negate, inner)``: ``node`` without parentheses and NOTs (counted), quantified
    comparisons as IN."""
    negate = False
    while True:
        node = _unparen(node)
        node = _quantified(node) or node
        if not isinstance(node, exp.Not):
            return negate, node
        negate, node = not negate, node.this


def special_form(node) -> bool:
    """Whether the WHERE conjunct ``node`` may be one of :func:`where_conjunct`'s forms."""
    negate, inner = _normalized(node)
    if isinstance(inner, exp.In) and inner.args.get("query") is not None or isinstance(inner, exp.Exists):
        return True
    return not negate and type(inner) in _CMP and (_is_subquery(inner.this) != _is_subquery(inner.expression)
                                                   or _has_now(inner.this) != _has_now(inner.expression))


def where_conjunct(qb, plan: P.Node, scope: Scope, node):
    """``plan`` filtered by the WHERE conjunct ``node`` when it is one of the special forms of
    the module docstring, else None."""
    negate, inner = _normalized(node)
    if isinstance(inner, exp.In) and inner.args.get("query") is not None:
        query = inner.args["query"]
        sub = try_bind(qb, query, scope)
        sel = fromless(query) if sub is None else None
        single = None if sel is None else fromless_expression(sel, exists=False)
        if single is not None:   # x IN (SELECT e [WHERE c]) over the outer row: c AND x = e, never NULL-less
            cond = ExprBinder(scope, qb.params, context="WHERE").bind(
                exp.Case(ifs=[exp.If(this=_fromless_where(sel), true=exp.EQ(this=inner.this.copy(), expression=single))],
                         default=exp.false()))
            return P.Filter(plan, E.Not(cond) if negate else cond)
        if sub is None:
            if negate:
                raise error_at(UnsupportedError, "NOT IN with a correlated subquery is not supported (use NOT EXISTS)",
                               node)
            return correlated_semi(qb, plan, scope, query, inner.this, False, node)
        return _in(qb, plan, scope, inner, one_column(sub, query), negate)
    if isinstance(inner, exp.Exists):
        sub = try_bind(qb, inner.this, scope)
        if sub is None and fromless(inner.this) is not None:
            return None     # an expression of the row: the plain filter binds it (Subqueries)
        if sub is None:
            return correlated_semi(qb, plan, scope, inner.this, None, negate, node)
        joined = P.ScalarJoin(plan, exists_count(sub))
        count = E.Col(len(plan.types), DataType.BIGINT)
        cond = E.Cmp("=" if negate else ">", count, E.Lit(0, DataType.BIGINT))
        return _prefix(P.Filter(joined, cond), plan)
    if not negate and type(inner) in _CMP and not qb.batch:
        out = _temporal_filter(qb, plan, scope, inner)
        if out is not None:
            return out
    if not negate and type(inner) in _CMP:
        op = _CMP[type(inner)]
        left, right = inner.this, inner.expression
        if _is_subquery(left) and not _is_subquery(right):
            left, right, op = right, left, _FLIP[op]
        if _is_subquery(right) and not has_subquery(left):
            sub = try_bind(qb, right, scope)
            if sub is not None:
                out = _dynamic_filter(qb, plan, scope, left, one_column(sub, right), op)
                if out is None:     # the general path takes this plan
                    qb.prebound[id(_subquery_node(right))] = sub
                return out
    return None


def _is_now(node) -> bool:
    return isinstance(node, exp.CurrentTimestamp) or (isinstance(node, exp.Anonymous) and node.name.lower() == "now")


def _has_now(node) -> bool:
    return any(_is_now(n) for n in node.walk())


def _temporal_filter(qb, plan, scope, inner):
    """A temporal filter in a materialized view -- ``x <op> now()`` or ``x <op> now() +/- <a
    constant interval>`` (either side, ``current_timestamp`` alike) with ``x`` free of now() --
    as a DynamicFilter against the Now clock (RisingWave's temporal filter: the rows passing
    follow the time, moved at each barrier); None for any other comparison. The now() nodes it
    takes are recorded in ``qb.temporal_ok``: the MV's volatile-function check passes them."""
    op = _CMP[type(inner)]
    left, right = inner.this, inner.expression
    if _has_now(left) and not _has_now(right):
        left, right, op = right, left, _FLIP[op]
    if not _has_now(right) or _has_now(left) or has_subquery(left):
        return None
    taken = [id(n) for n in right.walk() if _is_now(n)]
    clock = exp.column("now", table="__now__") if _is_now(right) else right.copy()
    for n in list(clock.walk()):
        if _is_now(n):
            n.replace(exp.column("now", table="__now__"))
    try:   # over the clock's one column only: a right side naming a row column is no temporal filter
        bound = ExprBinder(Scope([ScopeCol("__now__", "now", 0, DataType.TIMESTAMPTZ)]), qb.params,
                           context="WHERE").bind(clock)
    except (BindError, UnsupportedError):
        return None
    if bound.data_type.kind not in (TypeKind.TIMESTAMPTZ, TypeKind.TIMESTAMP):
        return None
    out = _dynamic_filter(qb, plan, scope, left, P.Project(P.Now(), [bound], ["now"]), op)
    if out is not None:
        qb.temporal_ok.update(taken)
    return out


def _fromless_where(sel):
    where = sel.args.get("where")
    return exp.Paren(this=where.this.copy()) if where is not None else exp.true()


def _subquery_node(node):
    """The node an ExprBinder hands to :class:`Subqueries` for the subquery ``node``."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _prefix(plan: P.Node, like: P.Node) -> P.Node:
    """``plan``'s first ``len(like.types)`` columns, shaped as ``like`` (names, visibility)."""
    out = P.Project(plan, [E.Col(i, t, n) for i, (t, n) in enumerate(zip(like.types, like.names))], list(like.names))
    out.n_visible = like.n_visible
    return out


def _dynamic_filter(qb, plan, scope, left, sub, op):
    x = ExprBinder(scope, qb.params, context="WHERE").bind(left)
    if not plan.stream_key or not at_most_one_row(sub):
        return None     # the general path: a ScalarJoin and a Filter
    vt = sub.types[0]
    sup = x.data_type if vt == x.data_type else T.common_supertype(x.data_type, vt)
    if sup is None:
        return None     # the general path reports the type error
    if vt != sup:
        sub = P.Project(sub, [E.Cast(E.Col(0, vt), sup)], [sub.names[0]])
    if x.data_type != sup:
        x = E.Cast(x, sup)
    if isinstance(x, E.Col):
        return P.DynamicFilter(plan, sub, x.index, op)
    # the compared value as a trailing left column (kept: later nodes read the columns before it)
    visible = plan.n_visible
    cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
    probe = P.Project(plan, cols + [x], list(plan.names) + ["_compared"])
    probe.n_visible = visible
    return P.DynamicFilter(probe, sub, len(cols), op)


def _in(qb, plan, scope, node, sub, negate):
    binder = ExprBinder(scope, qb.params, context="WHERE")
    x = binder.bind(node.this)
    xt, yt = x.data_type, sub.types[0]
    target = xt
    if xt != yt:
        if isinstance(x, E.Lit) and x.value is None:
            target = yt
        else:
            target = T.common_supertype(xt, yt)
            if target is None:
                raise error_at(BindError, f"operator does not exist: {xt.sql_name()} = {yt.sql_name()}", node)
    if x.data_type != target:
        x = E.Lit(None, target) if isinstance(x, E.Lit) and x.value is None else E.Cast(x, target)
    x = equality_key(x)   # JSONB: a key ignoring numbers' scale, as = does
    if isinstance(x, E.Col):
        key = x.index
    else:                                   # the probe value as one more left column
        width, visible = len(plan.types), plan.n_visible
        plan = P.Project(plan, [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))] + [x],
                         list(plan.names) + ["_in_probe"])
        plan.n_visible = visible
        key = width

    def right_side(sub):
        if sub.types[0] == target != DataType.JSONB:
            return sub
        col = E.Col(0, yt, sub.names[0])
        return P.Project(sub, [equality_key(col if yt == target else E.Cast(col, target))], [sub.names[0]])
    if not negate:
        return P.Join(plan, right_side(sub), "semi", [key], [0], None)
    anti = P.Join(plan, right_side(sub), "anti", [key], [0], None)
    # NOT IN's NULLs: one row (n, nulls) over the subquery -> CASE WHEN nulls > 0 THEN -1 ELSE n.
    # A copy of the subquery's plan: a plan node is never shared (its state tables are its own)
    again = right_side(clone(sub))
    flagged = P.Project(again, [E.Col(0, target), E.IsNull(E.Col(0, target))], ["y", "y_null"])
    counts = P.Agg(flagged, [], [P.AggSpec("count", None, False, None, DataType.BIGINT, "count(*)"),
                                 P.AggSpec("count", None, False, 1, DataType.BIGINT, "count(*) FILTER (y IS NULL)")],
                   ["n", "n_null"])
    n, nulls = E.Col(0, DataType.BIGINT), E.Col(1, DataType.BIGINT)
    zero = E.Lit(0, DataType.BIGINT)
    state = P.Project(counts, [E.Case([(E.Cmp(">", nulls, zero), E.Lit(-1, DataType.BIGINT))], n, DataType.BIGINT)],
                      ["not_in_state"])
    joined = P.ScalarJoin(anti, state)
    v = E.Col(len(anti.types), DataType.BIGINT)
    keep = E.Or(E.Cmp("=", v, zero), E.And(E.Cmp(">", v, zero), E.IsNull(E.Col(key, target), True)))
    filtered = P.Filter(joined, keep)
    out = P.Project(filtered, [E.Col(i, t, nm) for i, (t, nm) in enumerate(zip(anti.types, anti.names))],
                    list(anti.names))
    out.n_visible = anti.n_visible
    return out
