"""Column defaults: ``DEFAULT expr`` of CREATE TABLE and ALTER TABLE ... ADD COLUMN.

Job: check a default where it is declared (:func:`declare_default`), keep it as SQL text in the
table's catalog record (``Relation.defaults``: one entry per visible column, ``None`` where the
column has no default), and evaluate the defaults a statement needs (:func:`default_columns`):
INSERT of a column list that leaves columns out, ``VALUES (DEFAULT, ...)``, ``INSERT ... DEFAULT
VALUES``, ``UPDATE ... SET c = DEFAULT``, ``COPY t (cols) FROM`` and ALTER TABLE ... ADD COLUMN
(the value the existing rows take).

Semantics (Postgres'): a default is an expression without column references, subqueries,
aggregates, window functions or parameters, of a type that assigns to the column (an assignment
cast: ``DEFAULT 1`` into a BIGINT or DOUBLE column; ``DEFAULT 1`` into a BOOLEAN column is a
``BindError`` at CREATE, as Postgres refuses it); an untyped string takes the column's type
when declared (``DEFAULT '2024-01-01'`` into a DATE; ``DEFAULT 'abc'`` into an INT is an
``ExecutionError`` at CREATE, Postgres' data error). Anything else is evaluated only when used,
as in Postgres: ``DEFAULT 1/0`` or ``DEFAULT 100000`` for a SMALLINT is accepted by CREATE and
fails the INSERT that needs it. ``now()`` / ``current_timestamp`` / ``current_date`` read the
statement's clock (one time per statement: :func:`sql.bind.expr.new_statement_clock`, what
Postgres' transaction time stamp is for a statement in autocommit); ``random()`` gives every
row its own value. A column without a default defaults to NULL.

Invariants: the stored text parses back (``SELECT <text>``) to the same expression; evaluating
it never reads a table.

Callers: :mod:`sql.statements` (CREATE TABLE, INSERT, UPDATE, DESCRIBE), :mod:`sql.alter`,
:mod:`sql.copy`.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from stream.expr import raising_errors

from sql import types as T
from sql.errors import BindError, ExecutionError, UnsupportedError, error_at, execution_error


def is_default_marker(node) -> bool:
    """Whether ``node`` is the keyword ``DEFAULT`` standing for a value (VALUES, UPDATE SET)."""
    if isinstance(node, exp.Var):
        return node.name.upper() == "DEFAULT"
    if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier):
        return not node.this.quoted and node.this.name.upper() == "DEFAULT"
    return False


def _bind(node, dtype, column: str):
    from sql.bind.expr import ExprBinder, Scope

    e = ExprBinder(Scope(), (), context="DEFAULT").bind_as(node, dtype)
    if e.data_type != dtype and not T.can_assign(e.data_type, dtype):
        raise error_at(BindError, f"column {column!r} is of type {dtype.sql_name()} but default expression is of "
                                  f"type {e.data_type.sql_name()} (rewrite or cast the expression)", node)
    return e


def declare_default(node, dtype, column: str) -> str:
    """The stored text of default ``node`` for a column ``column`` of type ``dtype``; a
    ``BindError`` / ``UnsupportedError`` / ``ExecutionError`` when it is no valid default
    (module docstring)."""
    if is_default_marker(node):
        raise error_at(BindError, f"DEFAULT is not allowed in the default of column {column!r}", node)
    if isinstance(node, exp.Placeholder) or any(isinstance(n, (exp.Placeholder, exp.Parameter))
                                                for n in node.walk()):
        raise error_at(UnsupportedError, f"parameters are not allowed in the default of column {column!r}", node)
    for n in node.walk():
        if isinstance(n, exp.Column) and not is_default_marker(n):
            raise error_at(BindError, f"cannot use column reference in DEFAULT expression (column {column!r})", n)
    try:
        _bind(node, dtype, column)   # the type assigns, names resolve: evaluated only when used
    except BindError as exc:
        from sql.bind.expr import ExprBinder, Scope
        lit = ExprBinder(Scope(), ()).literal(node)
        if lit is not None and lit[2]:   # a string that does not spell the type: a data error, as in Postgres
            message = str(exc).rsplit(" at line ", 1)[0] if exc.line is not None else str(exc)
            raise ExecutionError(message, exc.line, exc.column) from None
        raise
    return node.sql(dialect="postgres", normalize_functions="lower")   # now(), as Postgres shows it


def parse_default(text: str):
    """The sqlglot expression of a stored default ``text``."""
    from sql.parse import parse_script

    [stmt] = parse_script(f"SELECT {text}")
    return stmt.ast.expressions[0]


def _evaluate(e, dtype, n_rows: int, node) -> list:
    try:
        with raising_errors():
            # one placeholder column of n_rows: per-row functions (random()) give each row a value
            values = e.eval([pa.nulls(n_rows)], n_rows)
        from sql.batch.execute import from_arrow_values
        values = from_arrow_values(values, e.data_type)
    except (ArithmeticError, ValueError) as exc:
        raise execution_error(exc, node) from None
    if not isinstance(values, list):
        values = list(values)
    if len(values) == 1 and n_rows != 1:
        values = values * n_rows
    try:
        return [T.coerce_value(v, dtype) for v in values]
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise ExecutionError(f"{dtype.sql_name()} cannot hold it: {exc}") from None


def default_values(text: str | None, dtype, n_rows: int, column: str = "?") -> list:
    """``n_rows`` values of the default ``text`` (None: no default, NULLs) as ``dtype``."""
    if text is None:
        return [None] * n_rows
    node = parse_default(text)
    try:
        return _evaluate(_bind(node, dtype, column), dtype, n_rows, node)
    except ExecutionError as exc:   # positions in the stored text mean nothing to the statement
        message = str(exc).rsplit(" at line ", 1)[0] if exc.line is not None else str(exc)
        raise ExecutionError(f"the default of column {column!r} ({text}): {message}") from None


def default_columns(rel, indices, n_rows: int) -> dict:
    """``{column index: [n_rows values]}`` of visible columns ``indices`` of table ``rel``
    (NULLs for a column without a default), evaluated for one statement."""
    out = {}
    for i in indices:
        name, dtype = rel.visible_columns[i]
        out[i] = default_values(rel.default_of(i), dtype, n_rows, name)
    return out
