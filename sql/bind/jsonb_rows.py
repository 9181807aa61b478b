"""The JSONB set-returning functions in FROM: ``jsonb_array_elements``,
``jsonb_array_elements_text``, ``jsonb_each``, ``jsonb_each_text`` and ``jsonb_object_keys``.

Job: bind one such call over a constant (``FROM jsonb_each('{"a": 1}') AS e(k, v)``) to
constant rows (:class:`sql.plan.nodes.Values`), as ``generate_series`` is bound
(sql/bind/select.py): the argument is evaluated once at bind time, and the rows are Postgres'
(column names ``value``, ``key`` /
``value``, ``jsonb_object_keys``; elements and pairs in stored order). A NULL argument gives no
rows; the wrong JSON type (elements of an object, each of an array) is a data error
(:class:`sql.errors.ExecutionError`), as in Postgres. Over a constant, batch queries only: a
materialized view refuses them by name.

Over another FROM item's column (``FROM t, jsonb_array_elements(t.j) AS e``, ``CROSS JOIN
LATERAL``, ``LEFT JOIN LATERAL ... ON TRUE``), in a batch query or an MV, the call is rewritten by
:func:`lateral_to_unnest` into ``unnest`` of internal JSONB -> LIST functions
(stream/expr_jsonb.py; ``jsonb_each`` zips its keys and values), which sql/bind/select.py binds
as an implicit LATERAL; a row whose value is of the wrong JSON type is a data error there too
(WHERE conjuncts over the items before it filter first: ``QueryBinder._filter_before_unnest``).
A table alias without column aliases names ``jsonb_object_keys``' column (Postgres: a function
of a bare type), and :func:`whole_row_references` reads ``e`` of ``jsonb_array_elements(j) AS e``
as ``e.value`` (Postgres' whole-row reference of a one-column function).

Callers: :meth:`sql.bind.select.QueryBinder._from_item` and ``_from``.
"""

from __future__ import annotations

from relational.types import DataType
from stream.errors import ExpressionError
from stream.expr import raising_errors
from stream import expr_jsonb as JF
from stream.expr_pg import RowError

from sql.bind.expr import ExprBinder, Scope
from sql.errors import BindError, ExecutionError, UnsupportedError, error_at, execution_error
from sql.plan import nodes as P

#: name -> (column names, column types)
FUNCTIONS = {
    "jsonb_array_elements": (["value"], [DataType.JSONB]),
    "jsonb_array_elements_text": (["value"], [DataType.VARCHAR]),
    "jsonb_each": (["key", "value"], [DataType.VARCHAR, DataType.JSONB]),
    "jsonb_each_text": (["key", "value"], [DataType.VARCHAR, DataType.VARCHAR]),
    "jsonb_object_keys": (["jsonb_object_keys"], [DataType.VARCHAR]),
}


#: name -> the internal list functions unnest zips (one per output column)
_LISTS = {"jsonb_array_elements": ["jsonb_array_elements list"],
          "jsonb_array_elements_text": ["jsonb_array_elements_text list"],
          "jsonb_each": ["jsonb_each keys", "jsonb_each values"],
          "jsonb_each_text": ["jsonb_each_text keys", "jsonb_each_text values"],
          "jsonb_object_keys": ["jsonb_object_keys list"]}


def lateral_to_unnest(select) -> None:
    """Rewrite, in place, each FROM item of ``select`` (a batch query's ``exp.Select``) that calls
    a function of ``FUNCTIONS`` over columns into the ``unnest`` of its lists, keeping the
    alias (table name; column names default to Postgres': ``value``, ``key``/``value``)."""
    from sqlglot import exp

    joins = select.args.get("joins") or []
    for item in [j.this for j in joins]:
        fn = item.this if isinstance(item, (exp.Table, exp.Lateral)) else None
        if isinstance(fn, exp.Anonymous) and len(fn.expressions) == 1:   # f(j -> 'k'): sqlglot reads a lambda
            arg = fn.expressions[0]
            if isinstance(arg, exp.Lambda) and len(arg.expressions) == 1 and \
                    isinstance(arg.expressions[0], exp.Identifier):
                fn.set("expressions", [exp.JSONExtract(this=exp.Column(this=arg.expressions[0].copy()),
                                                       expression=arg.this.copy())])
        if not isinstance(fn, exp.Anonymous) or fn.name.lower() not in FUNCTIONS or \
                len(fn.expressions) != 1 or fn.expressions[0].find(exp.Column) is None:
            continue
        name = fn.name.lower()
        alias = item.args.get("alias")
        table = alias.this.copy() if alias is not None and alias.this is not None else exp.to_identifier(name)
        given = [c.copy() for c in alias.columns] if alias is not None and alias.columns else []
        names = FUNCTIONS[name][0]
        if name == "jsonb_object_keys" and alias is not None and alias.this is not None and not given:
            names = [table.name]   # Postgres: a function returning a bare type names its column by the alias
        columns = given + [exp.to_identifier(n) for n in names[len(given):]]
        calls = [exp.Anonymous(this=inner, expressions=[fn.expressions[0].copy()]) for inner in _LISTS[name]]
        alias = exp.TableAlias(this=table, columns=columns)
        if isinstance(item, exp.Lateral):
            item.replace(exp.Lateral(this=exp.Unnest(expressions=calls), alias=alias))
        else:
            item.replace(exp.Unnest(expressions=calls, alias=alias))


def whole_row_references(select) -> None:
    """Rewrite, in place, each bare reference ``e`` in ``select``'s own clauses (not its
    subqueries) to the single column of ``jsonb_array_elements[_text](...) AS e`` (no column
    aliases) as ``e.value``, a select item keeping the name ``e``: Postgres reads ``e`` as the
    item's whole row, which for a function of one OUT column (``value``) is that column's value,
    while ``*`` and ``e.value`` still name it ``value``. A column named ``e`` of another FROM item
    is not looked for (Postgres would prefer it)."""
    from sqlglot import exp

    from_ = select.args.get("from_") or select.args.get("from")
    items = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
    aliases = set()
    for item in items:
        fn = item.this if isinstance(item, (exp.Table, exp.Lateral)) else None
        alias = item.args.get("alias")
        if isinstance(fn, exp.Anonymous) and fn.name.lower() in ("jsonb_array_elements", "jsonb_array_elements_text") \
                and alias is not None and alias.this is not None and not alias.columns:
            aliases.add(alias.this.name)
    if not aliases:
        return

    def refs(node):   # bare columns named by an alias, outside nested queries
        if isinstance(node, (exp.Subquery, exp.Select)):
            return
        if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier) and \
                node.this.name in aliases:
            yield node
            return
        for child in node.iter_expressions():
            yield from refs(child)

    def value_of(col):
        return exp.column("value", table=col.this.name)

    for i, item in enumerate(select.expressions):
        if isinstance(item, exp.Column) and list(refs(item)) == [item]:
            select.expressions[i].replace(exp.alias_(value_of(item), item.this.name))
    clauses = list(select.expressions) + [select.args.get(k) for k in ("where", "group", "having", "order", "qualify")]
    clauses += [j.args.get("on") for j in select.args.get("joins") or []]
    for clause in clauses:
        if clause is not None:
            for col in list(refs(clause)):
                col.replace(value_of(col))


def bind_rows(fn, params, batch: bool) -> P.Values:
    """The rows of the set-returning call ``fn`` (an ``exp.Anonymous`` named in ``FUNCTIONS``)."""
    from sql.batch.execute import from_arrow_values   # the batch executor imports the binder's modules

    name = fn.name.lower()
    names, types = FUNCTIONS[name]
    if len(fn.expressions) != 1:
        raise error_at(BindError, f"{name} takes 1 argument", fn)
    if not batch:
        raise error_at(UnsupportedError, f"{name} is supported in a batch query only; a materialized view reads "
                                         "tables and materialized views", fn)
    binder = ExprBinder(Scope(), params, context=name)
    arg = binder.bind_as(fn.expressions[0], DataType.JSONB)   # a column here is one of no FROM item before
    if arg.data_type != DataType.JSONB:
        raise error_at(BindError, f"function {name}({arg.data_type.sql_name().lower()}) does not exist", fn)
    with raising_errors():
        try:
            value = from_arrow_values(arg.eval([], 1), DataType.JSONB)[0]
        except ExpressionError as exc:
            raise execution_error(exc, fn) from None
    if value is None:
        return P.Values([], names, types)
    as_text = name.endswith("_text")
    try:
        if name.startswith("jsonb_array_elements"):
            rows = [(v,) for v in JF.array_elements(value, as_text)]
        elif name == "jsonb_object_keys":
            rows = [(k,) for k in JF.object_keys(value)]
        else:
            rows = JF.each(value, as_text)
    except RowError as exc:
        raise error_at(ExecutionError, str(exc), fn) from None
    return P.Values(rows, names, types)
