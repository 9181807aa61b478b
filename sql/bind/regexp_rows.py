"""The set-returning regular-expression functions ``regexp_split_to_table(s, re [, flags])`` and
``regexp_matches(s, re [, flags])``, as rewrites of the query's syntax tree into ``unnest``, which
the binder plans in batch queries and MVs (P.Unnest; in an MV stream/executors/project_set.py).

Job: :func:`rewrite` returns the ``exp.Select`` (a copy when anything changed) with

- each FROM item calling one (``FROM regexp_split_to_table('a,b', ',') AS x``, ``FROM t,
  regexp_matches(t.s, re, 'g') AS m``, ``CROSS JOIN LATERAL ...``, ``LEFT JOIN LATERAL ... ON
  TRUE``) replaced by ``unnest`` of its list, keeping the alias: the column is named by a column
  alias, else by the table alias, else by the function (Postgres' naming of a function returning a
  bare type);
- each call in the select list (its own clauses, not subqueries) replaced by ``unnest`` of the
  list (one row per element, several set-returning calls zipped, the shorter padded with NULL,
  as Postgres 10+), an unaliased item keeping the function's name as its column name; with
  aggregates, GROUP BY or window functions in the select it is refused by name (as ``unnest``).

The lists: ``regexp_split_to_table`` is ``regexp_split_to_array`` unnested (the same splits);
``regexp_matches`` is the internal ``"regexp_matches list"`` (stream/expr_array.py): one text[]
per match -- the first only, or every match with the ``g`` flag -- so no match (or a NULL
argument) gives no row. The internal name holds a space, so no SQL text calls it.

Callers: :meth:`sql.bind.select.QueryBinder._select`.
"""

from __future__ import annotations

from sqlglot import exp

from sql.bind.frozen import kept
from sql.errors import BindError, UnsupportedError, error_at

#: set-returning function -> the list function its rows come from
LISTS = {"regexp_split_to_table": "regexp_split_to_array", "regexp_matches": "regexp_matches list"}


def _call(node):
    return node if isinstance(node, exp.Anonymous) and node.name.lower() in LISTS else None


def _own_nodes(root):
    """Nodes under ``root`` outside nested queries and window calls (pre-order)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Select, exp.Subquery, exp.Window)) and node is not root:
            continue
        yield node
        stack.extend(reversed(list(node.iter_expressions())))


def _from_items(select) -> list:
    from_ = select.args.get("from_") or select.args.get("from")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def _list_of(fn):
    name = fn.name.lower()
    if not 2 <= len(fn.expressions) <= 3:
        raise error_at(BindError, f"function {name} takes 2 or 3 arguments", fn)
    return exp.Anonymous(this=LISTS[name], expressions=[e.copy() for e in fn.expressions])


def _needs(select) -> bool:
    if any(_call(item.this if isinstance(item, (exp.Table, exp.Lateral)) else None) for item in _from_items(select)):
        return True
    return any(_call(n) for item in select.expressions for n in _own_nodes(item))


def rewrite(select):
    """``select`` with its regexp set-returning calls as ``unnest`` (module docstring); the same
    object when it has none."""
    if not isinstance(select, exp.Select) or not kept(select, "hummock_regexp_rows", _needs):
        return select
    select = select.copy()
    for item in _from_items(select):
        fn = _call(item.this if isinstance(item, (exp.Table, exp.Lateral)) else None)
        if fn is None:
            continue
        name = fn.name.lower()
        alias = item.args.get("alias")
        table = alias.this.copy() if alias is not None and alias.this is not None else exp.to_identifier(name)
        given = [c.copy() for c in alias.columns] if alias is not None and alias.columns else []
        if len(given) > 1:
            raise error_at(BindError, f"too many column aliases specified for function {name}", item)
        columns = given or [table.copy()]
        alias = exp.TableAlias(this=table, columns=columns)
        if isinstance(item, exp.Lateral):
            item.replace(exp.Lateral(this=exp.Unnest(expressions=[_list_of(fn)]), alias=alias))
        else:
            item.replace(exp.Unnest(expressions=[_list_of(fn)], alias=alias))
    calls = [n for item in select.expressions for n in _own_nodes(item) if _call(n)]
    if calls and (select.args.get("group") or select.args.get("having") or any(
            isinstance(n, (exp.AggFunc, exp.Window)) for item in select.expressions for n in _own_nodes(item))):
        raise error_at(UnsupportedError, f"set-returning function {calls[0].name.lower()} in a select list with "
                                         "aggregates, GROUP BY or window functions is not supported (use FROM t, "
                                         f"{calls[0].name.lower()}(t.s, ...) AS x)", calls[0])
    items = []
    for item in select.expressions:
        fn = _call(item)
        items.append(exp.alias_(item, fn.name.lower()) if fn is not None else item)   # Postgres' column name
    select.set("expressions", items)
    for item in select.expressions:
        for node in list(_own_nodes(item)):
            if _call(node):
                node.replace(exp.Explode(this=_list_of(node)))
    return select
