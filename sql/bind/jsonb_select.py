"""The JSONB aggregates and the JSONB set-returning functions in a select list, as rewrites of
the query's syntax tree into forms the binder already plans in batch and in MVs.

Job: :func:`rewrite` returns the ``exp.Select`` (a copy when anything changed, so that
sql/bind/jsonb_rows.py's in-place rewrites of FROM never reach the statement's tree, whose text
an MV's definition keeps) with, in its own clauses (select list, HAVING, ORDER BY, FROM; not
its subqueries, which are rewritten when they are bound, nor window calls):

- ``jsonb_agg(x [ORDER BY ...]) [FILTER (WHERE ...)]`` ->
  ``"jsonb_agg final"(array_agg(to_jsonb(x) [ORDER BY ...]) [FILTER (WHERE ...)])``: the values
  as Postgres' ``to_jsonb`` makes them (a NULL stays an element, JSON null), collected in order
  by ``array_agg`` -- in an MV over its ordered materialized input
  (stream/executors/agg_ordered.py), so deletes and updates are exact -- then printed as one
  array (stream/expr_jsonb_edit.py). No row (or none passing the FILTER) gives NULL, as Postgres.
  ``jsonb_agg(DISTINCT x [ORDER BY x])`` -> ``to_jsonb(array_agg(DISTINCT x [ORDER BY x]))``:
  x's own equality and order (Postgres'), then the array as JSON.
- ``jsonb_object_agg(k, v [ORDER BY ...]) [FILTER ...]`` -> ``"jsonb_object_agg final"(
  array_agg("jsonb_object_agg pair"(k, v) ...))``: each row's ``[key, value]`` pair, then one
  object (a later duplicate key wins; a NULL or non-scalar key is Postgres' data error).
- a select item calling ``jsonb_array_elements``, ``jsonb_array_elements_text`` or
  ``jsonb_object_keys`` -> ``unnest`` of the internal JSONB -> LIST function
  (stream/expr_jsonb.py, the one FROM's lateral form uses), which the select list's ``unnest``
  plans as a ProjectSet (stream/executors/project_set.py): one row per element, several calls
  zipped, the shorter padded with NULL (Postgres 10+), a NULL or empty value no row; an
  unaliased item keeps Postgres' column name (the function's); refused next to GROUP BY,
  aggregates or window functions, as ``unnest`` there.
- a FROM item ``jsonb_to_recordset(j) AS x(a int, b text, ...)`` / ``jsonb_to_record(j) AS ...``
  (the column definition list is required, as Postgres) -> ``unnest`` of one list per column,
  ``CAST("jsonb_to_recordset texts"(j, 'a') AS int[])`` (the field's text: a string's own text,
  another value's JSON text, a missing field or JSON null NULL; cast as Postgres reads the text
  into the column's type) or, for a JSONB column, ``"... values"(j, 'b')`` (the value itself):
  one row per object of the array (``jsonb_to_record``: one row, a NULL document a row of
  NULLs); over another FROM item's column it is that ``unnest``'s implicit LATERAL. A non-array
  or an element that is not an object is Postgres' data error; array-typed columns are refused.

Also :func:`whole_row`: ``to_jsonb(t)`` of a FROM item's name (sql/bind/expr.py calls it).

Refused here by name: ``jsonb_each`` / ``jsonb_each_text`` in
a select list (they return a record; FROM takes them). The internal names hold a space, so no
SQL text calls them. Callers: :meth:`sql.bind.select.QueryBinder._select`,
:func:`sql.bind.correlated.correlated_scalar` (before it looks for the subquery's aggregates).
"""

from __future__ import annotations

from sqlglot import exp

from sql.bind.frozen import kept
from sql.errors import BindError, UnsupportedError, error_at

#: select-list set-returning functions -> the internal JSONB -> LIST function unnest expands
SRF_LISTS = {"jsonb_array_elements": "jsonb_array_elements list",
             "jsonb_array_elements_text": "jsonb_array_elements_text list",
             "jsonb_object_keys": "jsonb_object_keys list"}
_RECORDS = ("jsonb_each", "jsonb_each_text")
#: FROM functions of records whose columns a column definition list names and types
RECORD_FUNCTIONS = ("jsonb_to_record", "jsonb_to_recordset")


def _is_jsonb_agg(node) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "jsonb_agg"


def _own_nodes(root):
    """Nodes under ``root`` outside nested queries and window calls (pre-order)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Window) or isinstance(node, (exp.Select, exp.Subquery)) and node is not root:
            continue   # a window's call is not an aggregate here; a subquery is rewritten when bound
        yield node
        stack.extend(reversed(list(node.iter_expressions())))


def _from_items(select) -> list:
    from_ = select.args.get("from_") or select.args.get("from")
    return ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]


def _from_call(item):
    """The function call of FROM item ``item`` (``f(...) AS x``, ``LATERAL f(...)``), else None."""
    fn = item.this if isinstance(item, (exp.Table, exp.Lateral)) else None
    return fn if isinstance(fn, exp.Anonymous) else None


def _walk(root):
    """Nodes under ``root`` outside nested queries (window calls included)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Select, exp.Subquery)) and node is not root:
            continue
        yield node
        stack.extend(node.iter_expressions())


def _needs(select) -> bool:
    for item in _from_items(select):   # FROM t, jsonb_each(t.j): rewritten in place by jsonb_rows
        fn = _from_call(item)
        if fn is not None and fn.name.lower() in (*SRF_LISTS, *_RECORDS, *RECORD_FUNCTIONS):
            return True
    for clause in _clauses(select):
        for n in _own_nodes(clause):
            if _is_jsonb_agg(n) or isinstance(n, exp.JSONBObjectAgg):
                return True
    for item in select.expressions:
        for n in _own_nodes(item):
            if isinstance(n, exp.Anonymous) and n.name.lower() in (*SRF_LISTS, *_RECORDS):
                return True
    return False


def _clauses(select) -> list:
    return list(select.expressions) + [select.args.get(k) for k in ("having", "order") if select.args.get(k)]


def rewrite(select):
    """``select`` with its JSONB aggregates and select-list set-returning functions rewritten
    (module docstring); the same object when it has none."""
    if not isinstance(select, exp.Select) or not kept(select, "hummock_jsonb_select", _needs):
        return select
    select = select.copy()
    for item in _from_items(select):
        fn = _from_call(item)
        if fn is not None and fn.name.lower() in RECORD_FUNCTIONS:
            _record_item(item, fn)
    items = []
    for item in select.expressions:
        name = _srf_name(item) or _agg_name(item)
        items.append(exp.alias_(item, name) if name else item)   # Postgres' column name, kept
    select.set("expressions", items)
    for clause in _clauses(select):
        for node in reversed(list(_own_nodes(clause))):   # inner calls first (a nested one stays nested)
            if _is_jsonb_agg(node) or isinstance(node, exp.JSONBObjectAgg):
                _rewrite_agg(node)
    grouped = select.args.get("group") is not None or any(
        isinstance(n, (exp.AggFunc, exp.Window)) for c in _clauses(select) for n in _walk(c))
    for item in select.expressions:
        for node in list(_own_nodes(item)):
            if isinstance(node, exp.Anonymous) and node.name.lower() in _RECORDS:
                raise error_at(UnsupportedError, f"set-returning function {node.name.lower()} in a select list is not "
                                                 "supported (it returns a record): use FROM t, "
                                                 f"{node.name.lower()}(t.j) AS e(key, value)", node)
            if isinstance(node, exp.Anonymous) and node.name.lower() in SRF_LISTS:
                if grouped:
                    raise error_at(UnsupportedError, f"set-returning function {node.name.lower()} in a select list is "
                                                     "supported without GROUP BY, aggregates or window functions "
                                                     f"(FROM t, {node.name.lower()}(t.j) AS e takes them)", node)
                if len(node.expressions) != 1:
                    raise error_at(BindError, f"function {node.name.lower()} takes 1 argument", node)
                arg = node.expressions[0].copy()
                if isinstance(arg, exp.Literal) and arg.is_string:   # an untyped constant is JSONB here
                    arg = exp.cast(arg, "jsonb")
                inner = exp.Anonymous(this=SRF_LISTS[node.name.lower()], expressions=[arg])
                node.replace(exp.Explode(this=inner))
    return select


def _srf_name(item):
    return item.name.lower() if isinstance(item, exp.Anonymous) and item.name.lower() in SRF_LISTS else None


def _agg_name(item):
    call = item.this if isinstance(item, exp.Filter) else item
    if _is_jsonb_agg(call):
        return "jsonb_agg"
    return "jsonb_object_agg" if isinstance(call, exp.JSONBObjectAgg) else None


def _rewrite_agg(node) -> None:
    """Replace ``node`` (a ``jsonb_agg`` / ``jsonb_object_agg`` call; a FILTER around it stays
    around the ``array_agg``) by its final step over ``array_agg`` (module docstring)."""
    if _is_jsonb_agg(node):
        name = "jsonb_agg"
        if len(node.expressions) != 1:
            raise error_at(BindError, f"function jsonb_agg takes 1 argument, got {len(node.expressions)}", node)
        arg = node.expressions[0]
        order = arg if isinstance(arg, exp.Order) else None
        value = order.this if order is not None else arg
        if isinstance(value, exp.Distinct):   # to_jsonb(array_agg(DISTINCT x ...)): x's own equality and order
            _replace_call(node, exp.Anonymous(this="to_jsonb", expressions=[exp.ArrayAgg(this=arg.copy())]))
            return
        element = exp.Anonymous(this="to_jsonb", expressions=[value.copy()])
    else:
        name = "jsonb_object_agg"
        order = node.expression if isinstance(node.expression, exp.Order) else None
        key, value = node.this, (order.this if order is not None else node.expression)
        _no_distinct(key, name, node)
        if key is None or value is None:
            raise error_at(BindError, "function jsonb_object_agg takes 2 arguments", node)
        element = exp.Anonymous(this="jsonb_object_agg pair", expressions=[key.copy(), value.copy()])
    if order is not None:
        element = exp.Order(this=element, expressions=[o.copy() for o in order.expressions])
    _replace_call(node, exp.Anonymous(this=f"{name} final", expressions=[exp.ArrayAgg(this=element)]))


def _replace_call(node, final) -> None:
    """Put ``final`` (a call over one ``array_agg``) where ``node`` is; a FILTER around ``node``
    moves onto the ``array_agg``."""
    parent = node.parent
    if isinstance(parent, exp.Filter) and parent.this is node:   # agg(...) FILTER (WHERE ...)
        collected = final.expressions[0]
        collected.replace(exp.Filter(this=collected.copy(), expression=parent.expression.copy()))
        node = parent
    node.replace(final)


def _no_distinct(arg, name, node) -> None:
    if isinstance(arg, exp.Distinct):
        raise error_at(UnsupportedError, f"{name}(DISTINCT ...) is not supported", node)


def _record_item(item, fn) -> None:
    """Replace FROM item ``item`` calling ``jsonb_to_record[set](j) AS x(a int, b text, ...)`` by
    ``unnest`` of one list per column: the field's text cast to the column's type (a JSONB
    column: the value itself), one item per object (module docstring)."""
    name = fn.name.lower()
    alias = item.args.get("alias")
    columns = list(alias.columns) if alias is not None else []
    if not columns or not all(isinstance(c, exp.ColumnDef) and c.args.get("kind") is not None for c in columns):
        raise error_at(BindError, f"a column definition list is required for {name}: "
                                  f"{name}(j) AS x(a int, b text)", fn)
    if len(fn.expressions) != 1:
        raise error_at(BindError, f"function {name} takes 1 argument", fn)
    arg = fn.expressions[0]
    if isinstance(arg, exp.Null) or isinstance(arg, exp.Literal) and arg.is_string:   # untyped: JSONB here
        arg = exp.cast(arg, "jsonb")
    calls = []
    for c in columns:
        kind = c.args["kind"]
        field = c.this.name if c.this.quoted else c.this.name.lower()   # Postgres folds unquoted names
        if kind.this == exp.DataType.Type.ARRAY or kind.args.get("nested"):
            raise error_at(UnsupportedError, f"{name} column {field} of an array type is not supported", c)
        if kind.this == exp.DataType.Type.JSONB:
            calls.append(exp.Anonymous(this=f"{name} values", expressions=[arg.copy(), exp.Literal.string(field)]))
            continue
        texts = exp.Anonymous(this=f"{name} texts", expressions=[arg.copy(), exp.Literal.string(field)])
        calls.append(exp.Cast(this=texts, to=exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[kind.copy()],
                                                          nested=True)))
    new_alias = exp.TableAlias(this=alias.this.copy() if alias.this is not None else exp.to_identifier(name),
                               columns=[exp.Identifier(this=c.this.name, quoted=c.this.quoted) for c in columns])
    unnest = exp.Unnest(expressions=calls, alias=new_alias)
    item.replace(exp.Lateral(this=unnest, alias=new_alias.copy()) if isinstance(item, exp.Lateral) else unnest)


def whole_row(binder, arg):
    """``to_jsonb(t)`` (and so ``jsonb_agg(t)``) of a FROM item ``t`` of ``binder``'s scope --
    a bare name that is no column there (a column of that name wins, as in Postgres) -- as
    ``jsonb_build_object('c1', t.c1, ...)`` over the item's columns (Postgres' composite to
    jsonb); None when ``arg`` is not such a name."""
    from relational.types import DataType
    from stream import expr as E

    if not isinstance(arg, exp.Column) or arg.args.get("table") is not None or not isinstance(arg.this, exp.Identifier):
        return None
    name = arg.this.name if arg.this.quoted else arg.this.name.lower()
    cols = binder.scope.cols
    if any(c.name == name and c.unqualified for c in cols):
        return None
    row = [c for c in cols if c.table == name]
    if not row:
        return None
    args = []
    for c in row:
        args += [E.Lit(c.name, DataType.VARCHAR), E.Col(c.index, c.dtype, c.name)]
    return E.Func("jsonb_build_object", *args)
