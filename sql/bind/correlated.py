"""Correlated subqueries, decorrelated when they refer to the outer query only through
equalities: ``[NOT] EXISTS (subquery)`` and ``x IN (subquery)`` as WHERE conjuncts -> a semi /
anti join (:func:`correlated_semi`); a scalar aggregate subquery, or EXISTS, anywhere else ->
a left join with the subquery grouped by its correlation keys (:func:`correlated_scalar`).

Job: ``EXISTS (SELECT ... FROM f WHERE f.k = outer.k AND p)`` -> ``outer SEMI JOIN (f WHERE p)
ON outer.k = f.k`` (NOT EXISTS: ANTI JOIN; ``x IN (SELECT y ...)`` adds ``x = y`` to the keys).
Each WHERE conjunct of the subquery is either inner-only (a filter of the subquery), or an
equality with an inner-only side and an outer-only side (a join key pair); a column resolves to
the subquery's own FROM first (SQL scoping), then to the outer query.

Invariants: NOT EXISTS needs no NULL care (an equality with NULL is never TRUE: the row has no
match, NOT EXISTS is TRUE, the anti join keeps it). A semi/anti subquery with GROUP BY, HAVING,
aggregates, DISTINCT, LIMIT, its own WITH or a correlated conjunct of another shape is an
UnsupportedError; so is correlated NOT IN (its NULL rules need a per-key count). A correlated
scalar subquery must be one expression over aggregates (one value per outer row); an outer
row without a group gets that expression over no rows (each count 0, each other aggregate
NULL: ``coalesce(max(x), -1)`` is -1), as Postgres does. A subquery without FROM is a single
row computed from the outer row (:func:`fromless`): bound as an expression, not a join.

Callers: :func:`sql.bind.subquery.where_conjunct`, :class:`sql.bind.subquery.Subqueries`.
"""

from __future__ import annotations

from sqlglot import exp

from stream import expr as E
from stream.expr_jsonb_cmp import equality_key

from sql import types as T
from sql.bind import jsonb_select
from sql.bind.expr import ExprBinder, Scope, _name
from sql.bind.expr import conjuncts as _conjuncts
from sql.bind.frozen import pg_text
from sql.errors import BindError, UnsupportedError, error_at
from sql.plan import nodes as P


def _select_of(node):
    while isinstance(node, (exp.Paren, exp.Subquery)):
        node = node.this
    return node


def references_outer(node, outer: Scope) -> bool:
    """True when a column of ``node`` resolves in ``outer``."""
    for col in node.find_all(exp.Column):
        if isinstance(col.this, exp.Star):
            continue
        try:
            outer.resolve(_name(col.this), _name(col.args.get("table")), col)
            return True
        except BindError:
            continue
    return False


def try_bind(qb, node, outer: Scope):
    """The plan of the subquery ``node`` when it binds alone (uncorrelated), None when it names
    columns of ``outer`` (correlated); its own BindError otherwise. Bind each subquery once:
    nested subqueries make repeated binding exponential in the nesting depth."""
    try:
        return qb.bind_query(_select_of(node), top=False)
    except BindError:
        if references_outer(_select_of(node), outer):
            return None
        raise


def _own_columns(node):
    """The columns of ``node`` outside its nested subqueries (those bind in their own scope)."""
    if isinstance(node, exp.Column):
        yield node
        return
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        return
    for child in node.iter_expressions():
        yield from _own_columns(child)


def _side(node, inner: Scope, outer: Scope):
    """'inner', 'outer', 'none' (no columns) or 'mixed' for an expression (nested subqueries
    aside: a conjunct with one is the subquery's own, bound with the subquery's scope)."""
    sides = set()
    for col in _own_columns(node):
        if isinstance(col.this, exp.Star):
            continue
        name, table = _name(col.this), _name(col.args.get("table"))
        try:
            inner.resolve(name, table, col)
            sides.add("inner")
        except BindError:
            outer.resolve(name, table, col)     # a BindError here: the name exists nowhere
            sides.add("outer")
    if not sides:
        return "none"
    return sides.pop() if len(sides) == 1 else "mixed"


def correlated_semi(qb, plan: P.Node, scope: Scope, query, probe, negate: bool, where) -> P.Node:
    """``plan`` semi (anti when ``negate``) joined with the decorrelated ``query``; ``probe`` the
    IN's left operand or None for EXISTS."""
    sel = _select_of(query)
    if not isinstance(sel, exp.Select):
        raise error_at(UnsupportedError, "a correlated set operation as a subquery is not supported", where)
    for key in ("group", "having", "distinct", "limit", "offset", "order", "with_", "with"):
        if sel.args.get(key):
            raise error_at(UnsupportedError, f"a correlated subquery with {key.rstrip('_').upper()} is not supported",
                           where)
    if any(True for _ in sel.find_all(exp.AggFunc)):
        raise error_at(UnsupportedError, "a correlated subquery with aggregates is not supported", where)
    where_node = sel.args.get("where")
    conjuncts = _conjuncts(where_node.this) if where_node is not None else []
    inner_plan, inner_scope, conjuncts = qb._from(sel, conjuncts)
    filters, pairs = [], []    # pairs: (outer node, inner node)
    for c in conjuncts:
        pair = _pair(c, inner_scope, scope)
        if pair is None:
            filters.append(c)
        else:
            pairs.append(pair)
    ib = ExprBinder(inner_scope, qb.params, context="WHERE")
    try:
        inner_plan = qb.bind_where(inner_plan, inner_scope, filters)   # nested subqueries too
    except BindError:
        if any(references_outer(f, scope) for f in filters):
            raise error_at(UnsupportedError, "a subquery nested in a correlated subquery may not refer to the outer "
                                             "query", where) from None
        raise
    ob = ExprBinder(scope, qb.params, context="WHERE")
    keys = [(ob.bind(o), ib.bind(i), o) for o, i in pairs]
    if probe is not None:
        items = sel.expressions
        if len(items) != 1 or isinstance(items[0], exp.Star):
            raise error_at(BindError, "subquery must return only one column", query)
        item = items[0].this if isinstance(items[0], exp.Alias) else items[0]
        keys.append((ob.bind(probe), ib.bind(item), probe))
    lexprs, rexprs = [], []
    for o, i, node in keys:
        if o.data_type != i.data_type:
            sup = T.common_supertype(o.data_type, i.data_type)
            if sup is None:
                raise error_at(BindError, f"operator does not exist: {o.data_type.sql_name()} = "
                                          f"{i.data_type.sql_name()}", node)
            o, i = ob.coerce(o, sup, node), ib.coerce(i, sup, node)
        lexprs.append(equality_key(o))   # JSONB: a key ignoring numbers' scale, as = does
        rexprs.append(equality_key(i))
    lkeys = []
    extra = []
    width = len(plan.types)
    for o in lexprs:
        if isinstance(o, E.Col) and o.index not in lkeys:   # a repeated column: a copy (keys name a column once)
            lkeys.append(o.index)
        else:
            lkeys.append(width + len(extra))
            extra.append(o)
    if extra:        # computed probe values as trailing left columns
        visible = plan.n_visible
        cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
        plan = P.Project(plan, cols + extra, list(plan.names) + [f"_probe{i}" for i in range(len(extra))])
        plan.n_visible = visible
    right = P.Project(inner_plan, rexprs, [f"_corr{i}" for i in range(len(rexprs))])
    return P.Join(plan, right, "anti" if negate else "semi", lkeys, list(range(len(rexprs))), None)


def correlated_scalar(qb, scope: Scope, query, where, exists: bool = False):
    """A scalar subquery correlated by equalities, decorrelated: ``(SELECT agg(...) FROM f WHERE
    f.k = outer.k AND p)`` -> ``(SELECT f.k, agg(...) FROM f WHERE p GROUP BY f.k)``, to be left
    outer joined on ``outer.k = f.k`` (one row per key: one value per outer row). ``exists``:
    ``EXISTS (...)`` as ``count(*)`` of that subquery. Returns ``(right plan, outer key exprs
    over scope, empty)``: the right plan's first ``len(keys)`` columns are the keys (cast to
    the outer keys' types), the next one the value, then a TRUE ``_matched`` column (NULL after
    the left join: no inner row); ``empty``: the constant value for an outer row without a
    match (:func:`_empty_value`), or None when that is NULL."""
    sel = _select_of(query)
    if not isinstance(sel, exp.Select):
        raise error_at(UnsupportedError, "a correlated set operation as a subquery is not supported", where)
    sel = jsonb_select.rewrite(sel)   # jsonb_agg(...): an expression over the array_agg it becomes
    for key in ("group", "having", "distinct", "limit", "offset", "order", "with_", "with"):
        if sel.args.get(key):
            raise error_at(UnsupportedError, f"a correlated scalar subquery with {key.rstrip('_').upper()} is not "
                                             "supported", where)
    if exists:
        item = exp.Count(this=exp.Star())
    else:
        items = sel.expressions
        if len(items) != 1 or isinstance(items[0], exp.Star):
            raise error_at(BindError, "subquery must return only one column", where)
        item = items[0].this if isinstance(items[0], exp.Alias) else items[0]
    aggs = list(item.find_all(exp.AggFunc))
    if not aggs:
        raise error_at(UnsupportedError, "a correlated scalar subquery must be an aggregate (one value per outer row); "
                                         "this one is not supported", where)
    where_node = sel.args.get("where")
    conjuncts = _conjuncts(where_node.this) if where_node is not None else []
    _, inner_scope, _ = qb._from(sel, list(conjuncts))
    keep, pairs = [], []
    for c in conjuncts:
        pair = _pair(c, inner_scope, scope)
        if pair is None:
            keep.append(c)
        else:
            pairs.append(pair)
    if not pairs:
        raise error_at(UnsupportedError, "a correlated subquery may refer to the outer query only in equalities "
                                         "(outer = inner) AND-ed in its WHERE", where)
    new = sel.copy()
    new.set("where", exp.Where(this=exp.and_(*[c.copy() for c in keep])) if keep else None)
    new.set("group", exp.Group(expressions=[i.copy() for _, i in pairs]))
    new.set("expressions", [exp.alias_(i.copy(), f"_corr{k}") for k, (_, i) in enumerate(pairs)] +
            [exp.alias_(item.copy(), "_value"), exp.alias_(exp.true(), "_matched")])
    try:
        right = qb.bind_query(new, top=False)
    except BindError:
        if references_outer(new, scope):
            raise error_at(UnsupportedError, "a correlated subquery may refer to the outer query only in equalities "
                                             "(outer = inner) AND-ed in its WHERE", where) from None
        raise
    ob = ExprBinder(scope, qb.params, context="a correlated subquery")
    outer, cast = [], False
    exprs = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(right.types, right.names))]
    for k, (o, _) in enumerate(pairs):
        e = ob.bind(o)
        it = right.types[k]
        if e.data_type != it:
            sup = T.common_supertype(e.data_type, it)
            if sup is None:
                raise error_at(BindError, f"operator does not exist: {e.data_type.sql_name()} = {it.sql_name()}", o)
            e = ob.coerce(e, sup, o)
            if it != sup:
                exprs[k], cast = E.Cast(exprs[k], sup), True
        outer.append(e)
    if cast:
        visible = right.n_visible
        right = P.Project(right, exprs, list(right.names))
        right.n_visible = visible
    return right, outer, _empty_value(qb, item, right, len(pairs), where)


def _empty_value(qb, item, right: P.Node, n_keys: int, where):
    """The subquery's value for an outer row with no matching inner row: ``item`` evaluated
    over no rows (Postgres runs the aggregate over an empty group), each aggregate replaced by
    its value over no rows -- 0 for count, NULL for the others -- as a constant expression of
    the value's type; None when that is NULL (the left join's NULL is already right)."""
    agg = next(n for n in P.walk(right) if isinstance(n, P.Agg))
    empty = {c.text: (E.Lit(0, c.return_type) if c.kind == "count" else E.Lit(None, c.return_type))
             for c in agg.calls}

    def hook(node):
        if isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc) or isinstance(node, exp.AggFunc):
            return empty.get(pg_text(node))
        return None
    try:
        value = ExprBinder(Scope(), qb.params, hook=hook, context="a correlated subquery").bind(item)
    except (BindError, UnsupportedError):
        raise error_at(UnsupportedError, "a correlated scalar subquery's value must be an expression over its "
                                         "aggregates; this one is not supported", where) from None
    vt = right.types[n_keys]
    if value.data_type != vt:
        value = E.Cast(value, vt)
    if isinstance(value, E.Lit) and value.value is None:
        return None
    return value


def fromless(query):
    """The SELECT of ``query`` when it is a single row computed without FROM (no aggregates,
    grouping, DISTINCT, ORDER BY, LIMIT/OFFSET or WITH): such a subquery correlated with the
    outer query is an expression of the outer row (``EXISTS (SELECT ... [WHERE c])`` is ``c IS
    TRUE``; a scalar one is its item where ``c``), not a join. None otherwise."""
    sel = _select_of(query)
    if not isinstance(sel, exp.Select) or sel.args.get("from_") or sel.args.get("from") or sel.args.get("joins"):
        return None
    for key in ("group", "having", "distinct", "limit", "offset", "order", "with_", "with", "qualify", "windows"):
        if sel.args.get(key):
            return None
    if any(True for _ in sel.find_all(exp.AggFunc, exp.Window)):
        return None
    return sel


def fromless_expression(sel, exists: bool):
    """The sqlglot expression over the outer row equal to the FROM-less subquery ``sel``
    (:func:`fromless`): EXISTS -> ``COALESCE(c, FALSE)`` (TRUE without WHERE); a scalar ->
    ``CASE WHEN c THEN item END`` (``item`` without WHERE); None when a scalar one does not
    have exactly one column."""
    where = sel.args.get("where")
    cond = exp.Paren(this=where.this.copy()) if where is not None else None
    if exists:
        return exp.true() if cond is None else exp.func("coalesce", cond, exp.false())
    items = sel.expressions
    if len(items) != 1 or isinstance(items[0], exp.Star):
        return None
    item = items[0].this if isinstance(items[0], exp.Alias) else items[0]
    item = exp.Paren(this=item.copy())
    return item if cond is None else exp.Case(ifs=[exp.If(this=cond, true=item)])


def _pair(c, inner: Scope, outer: Scope):
    """``(outer node, inner node)`` when the conjunct ``c`` is a correlation equality, None when
    it is the subquery's own; UnsupportedError for any other reference to the outer query."""
    side = _side(c, inner, outer)
    if side in ("inner", "none"):
        return None
    if isinstance(c, exp.EQ):
        a, b = _side(c.this, inner, outer), _side(c.expression, inner, outer)
        if (a, b) == ("outer", "inner"):
            return c.this, c.expression
        if (a, b) == ("inner", "outer"):
            return c.expression, c.this
    raise error_at(UnsupportedError, "a correlated subquery may refer to the outer query only in equalities "
                                     "(outer = inner) AND-ed in its WHERE", c)
