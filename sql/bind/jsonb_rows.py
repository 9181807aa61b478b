"""The JSONB set-returning functions in FROM: ``jsonb_array_elements``,
``jsonb_array_elements_text``, ``jsonb_each``, ``jsonb_each_text`` and ``jsonb_object_keys``.

Job: bind one such call (``FROM jsonb_each('{"a": 1}') AS e(k, v)``) to constant rows
(:class:`sql.plan.nodes.Values`), as ``generate_series`` is bound (sql/bind/select.py): the
argument may not read columns (LATERAL over a table's JSONB column is not supported yet), it is
evaluated once at bind time, and the rows are Postgres' (column names ``value``, ``key`` /
``value``, ``jsonb_object_keys``; elements and pairs in stored order). A NULL argument gives no
rows; the wrong JSON type (elements of an object, each of an array) is a data error
(:class:`sql.errors.ExecutionError`), as in Postgres. Batch queries only: a materialized view
refuses them by name.

Callers: :meth:`sql.bind.select.QueryBinder._from_item`.
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
    try:
        arg = binder.bind_as(fn.expressions[0], DataType.JSONB)
    except BindError as exc:
        if "does not exist" in str(exc):
            raise error_at(UnsupportedError, f"{name} over columns of another FROM item (LATERAL) is not "
                                             "supported; its argument must be a constant", fn) from None
        raise
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
