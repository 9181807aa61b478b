"""Event-time watermarks of tables and sources: ``WATERMARK FOR col AS expr`` (RisingWave's).

Job: check the clause at CREATE TABLE / CREATE SOURCE (:func:`declare_watermark`), keep it in
the catalog record (``Relation.watermark``: the column name and the expression's SQL text; the
state table of the current watermark is the relation's last ``internal_ids`` entry), and build
its :class:`~stream.executors.watermark_filter.WatermarkFilter` into the relation's actor
(:func:`watermark_filter`: between the Dml and the Materialize of a table, after the Dml of a
source), so late rows never reach the table or any MV and every reader gets the watermarks.

Rules (RisingWave's): the column is a visible TIMESTAMP or TIMESTAMPTZ column; the expression
has the column's type and reads only the relation's visible columns (no subqueries, aggregates,
parameters or volatile functions); a table with a watermark is APPEND ONLY (its rows are never
updated or deleted, so a row dropped as late is never needed to retract one); a source is
append-only anyway. Each refusal names the clause.

ALTER TABLE of a table with a watermark is RENAME TO only (its column changes are refused by
name: the stored expression names the columns).

Callers: :mod:`sql.statements` (CREATE TABLE / SOURCE), :mod:`sql.build`, :mod:`sql.alter`,
:mod:`sql.spark_pipeline` (refused there: watermarks run in the in-process runtime only).
"""

from __future__ import annotations

from sqlglot import exp

from stream.executors.watermark_filter import WATERMARK_KINDS, WatermarkFilter, watermark_state_table

from sql.errors import BindError, UnsupportedError, error_at

_VOLATILE = ("now", "random", "current_timestamp", "clock_timestamp", "proctime")


def _bind(rel_columns, column: str, node):
    """``(column index, bound stream expression)`` of a watermark over ``rel_columns`` (the
    visible ``(name, DataType)`` pairs)."""
    from sql.bind.expr import ExprBinder, Scope, ScopeCol

    names = [c for c, _ in rel_columns]
    if column not in names:
        raise error_at(BindError, f"WATERMARK FOR {column}: column {column!r} does not exist", node)
    index = names.index(column)
    dtype = rel_columns[index][1]
    if dtype.kind not in WATERMARK_KINDS:
        raise error_at(UnsupportedError, f"WATERMARK FOR {column}: the column is {dtype.sql_name()}; a watermark "
                                         "needs a TIMESTAMP or TIMESTAMPTZ column", node)
    scope = Scope([ScopeCol(None, n, i, t) for i, (n, t) in enumerate(rel_columns)])
    e = ExprBinder(scope, (), context="WATERMARK").bind(node)
    if e.data_type != dtype:
        raise error_at(BindError, f"WATERMARK FOR {column}: the expression is {e.data_type.sql_name()}, the column "
                                  f"{dtype.sql_name()} (they must be of one type)", node)
    return index, e


def declare_watermark(db, new, rel, stmt, node) -> None:
    """Check ``stmt.options["watermark"]`` of a CREATE TABLE / SOURCE of relation ``rel`` (not
    yet in catalog ``new`` of database ``db``) and record it: ``rel.watermark`` and a fresh
    state table id last in ``rel.internal_ids``. Call after the connector took its ids."""
    found = stmt.options.get("watermark")
    if found is None:
        return
    column, expr = found
    if getattr(db, "runtime", "in_process") == "spark":
        raise error_at(UnsupportedError, f"WATERMARK FOR {column}: watermarks run in the in-process runtime only, "
                                         "not on Spark", expr)
    if rel.kind == "table" and not rel.append_only:
        raise error_at(UnsupportedError, f"WATERMARK FOR {column} needs an APPEND ONLY table (a watermark drops "
                                         "late rows; a table that updates or deletes rows cannot)", expr)
    for n in expr.walk():
        if isinstance(n, (exp.Subquery, exp.Select, exp.Placeholder, exp.Parameter, exp.AggFunc, exp.Window)):
            raise error_at(UnsupportedError, f"WATERMARK FOR {column}: the expression may only compute on the row "
                                             f"(found {n.sql()[:40]})", n)
        name = n.name.lower() if isinstance(n, exp.Anonymous) else type(n).__name__.lower()
        if isinstance(n, (exp.Anonymous, exp.CurrentTimestamp, exp.Rand)) and any(v in name for v in _VOLATILE):
            raise error_at(UnsupportedError, f"WATERMARK FOR {column}: the expression may not read the clock or "
                                             "random numbers", n)
    _bind(rel.visible_columns, column, expr)
    rel.watermark = (column, expr.sql(dialect="postgres"))
    rel.internal_ids = list(rel.internal_ids) + [new.allocate_id()]


def parse_watermark(text: str):
    """The sqlglot expression of a stored watermark ``text``."""
    from sql.parse import parse_script

    [stmt] = parse_script(f"SELECT {text}")
    return stmt.ast.expressions[0]


def watermark_filter(store, rel, head):
    """``head`` (the relation's Dml) followed by the WatermarkFilter of ``rel``'s watermark, or
    ``head`` itself when ``rel`` has none."""
    if rel.watermark is None:
        return head
    column, text = rel.watermark
    index, e = _bind(rel.visible_columns, column, parse_watermark(text))
    dtype = rel.visible_columns[index][1]
    table = watermark_state_table(store, rel.internal_ids[-1], dtype, name=f"{rel.name}_watermark")
    return WatermarkFilter(head, index, e, table, identity=f"WatermarkFilter({rel.name}.{column})")


def refuse_watermarked_columns(rel, node, actions) -> None:
    """ALTER TABLE of a table with a watermark: only RENAME TO (the table) passes; a column
    change is refused by name (the watermark's stored expression names the columns)."""
    if getattr(rel, "watermark", None) is None:
        return
    options = node.args.get("options") or []
    for action in actions:
        if not isinstance(action, exp.AlterRename) or (options and isinstance(options[0], exp.ToTableProperty)):
            raise error_at(UnsupportedError, f"ALTER TABLE {rel.name}: the table has a WATERMARK FOR "
                                             f"{rel.watermark[0]}; only RENAME TO changes it (create a new table "
                                             "to change its columns)", action)


def has_watermark(catalog) -> list:
    """The names of the relations of ``catalog`` that declare a watermark."""
    return [r.name for r in catalog.ordered() if getattr(r, "watermark", None) is not None]


__all__ = ["declare_watermark", "has_watermark", "parse_watermark", "watermark_filter"]
