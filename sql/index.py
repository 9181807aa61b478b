"""Secondary indexes: ``CREATE INDEX [IF NOT EXISTS] i ON t (c [ASC|DESC] [NULLS FIRST|LAST], ...)``,
``DROP INDEX [IF EXISTS] i``, and handing a table's indexes to the batch planner.

Job: an index is built as RisingWave builds one -- a materialized view over ``SELECT * FROM t``
(maintained by the stream graph like any MV, backfilled from ``t``'s rows when created) whose
materialized table keeps every column of ``t`` in ``t``'s order but is keyed by the indexed
columns then ``t``'s own pk (so keys stay unique); like every SQL relation it has no
distribution key.
Batch plans read it in place of ``t`` when a filter bounds the indexed columns
(:mod:`sql.plan.key_range`); :func:`attach_indexes` gives every Scan of a batch plan its table's
indexes (``scan.indexes``) for that choice.

Invariants: an index's rows are exactly its table's rows at every committed epoch (same
barrier, same commit); indexes live in the relations' namespace (a name is a table, an MV or an
index, as in Postgres); queries never name an index; DROP TABLE / DROP MATERIALIZED VIEW drop
their indexes; a time-travel scan (``FOR SYSTEM_TIME AS OF``) never uses one (it may not have
existed then). Refused by name: UNIQUE, INCLUDE (every column is included), expressions as index keys, index methods (``USING``),
partial indexes (``WHERE``), CONCURRENTLY, indexes on indexes.

Callers: :mod:`sql.statements` (dispatch of CREATE / DROP INDEX, batch binding).
"""

from __future__ import annotations

from sqlglot import exp

from relational.catalog import TableDesc
from relational.memcomparable import OrderType
from relational.types import TypeKind

from sql.errors import BindError, CatalogError, UnsupportedError, error_at
from sql.plan import nodes as P

# Column types whose memcomparable order a key range can use (sql/plan/key_range.py); others
# can still be indexed (the index then serves no range, as in Postgres an index it cannot use).
_UNKEYABLE = {TypeKind.STRUCT, TypeKind.LIST}


def create_index(db, node, params, new_relation_name) -> None:
    """Run ``CREATE INDEX`` (module docstring); ``new_relation_name(db, node, target)`` is the
    statements module's name check (None: IF NOT EXISTS and it exists)."""
    from sql.bind.select import relation_name
    from sql.catalog import Relation
    from sql.parse import parse_script
    from sql.statements import bind_select

    index = node.this
    if not isinstance(index, exp.Index) or index.this is None:
        raise error_at(UnsupportedError, "CREATE INDEX needs a name (CREATE INDEX name ON table (columns))", node)
    for flag, what in (("unique", "CREATE UNIQUE INDEX"), ("concurrently", "CREATE INDEX CONCURRENTLY")):
        if node.args.get(flag):
            raise error_at(UnsupportedError, f"{what} is not supported", node)
    params_node = index.args.get("params")
    if params_node is None or not params_node.args.get("columns"):
        raise error_at(BindError, "CREATE INDEX needs a list of columns: ON table (column, ...)", node)
    for arg, what in (("using", "USING (index methods)"), ("where", "WHERE (partial indexes)"),
                      ("include", "INCLUDE (every column is included)"), ("partition_by", "PARTITION BY"),
                      ("with_storage", "WITH (storage parameters)"), ("tablespace", "TABLESPACE")):
        if params_node.args.get(arg):
            raise error_at(UnsupportedError, f"CREATE INDEX ... {what} is not supported", node)
    name = new_relation_name(db, node, index.this)
    if name is None:
        return
    table = index.args.get("table")
    table_name = relation_name(table)
    rel = db.catalog.get(table_name)
    if rel is None or rel.kind == "index":
        what = "is an index" if rel is not None else "does not exist"
        raise error_at(CatalogError, f"relation {table_name!r} {what}", table)
    key, orders = _index_key(rel, params_node.args["columns"])
    [query] = parse_script(f"SELECT * FROM {exp.to_identifier(table_name).sql(dialect='postgres')}")
    plan, binder = bind_select(db, query.ast, (), batch=False)
    names = [n for n, _ in rel.columns]
    if list(plan.types) != [t for _, t in rel.columns]:   # SELECT * is the table's columns, hidden ones too
        raise AssertionError(f"index plan of {table_name} has types {plan.types}, the table {rel.columns}")
    pk = key + [c for c in plan.stream_key if c not in key]
    order_types = orders + [OrderType.ASC] * (len(pk) - len(key))
    new = db.catalog.copy()
    tid = new.allocate_id()
    # no distribution key, as every SQL table and MV (singletons; the Spark runtime places
    # a relation's rows by its stream key)
    desc = TableDesc(tid, name, tuple(zip(names, plan.types)), tuple(pk), tuple(order_types))
    index_rel = Relation("index", desc, rel.n_visible, row_id=rel.row_id,
                         definition=query.ast.sql(dialect="postgres"), depends_on=[table_name],
                         index_columns=len(key))
    new.add(index_rel)
    db.apply_ddl(new, changed=[index_rel], backfill=frozenset([name]))


def _index_key(rel, columns) -> tuple:
    """``([column index], [OrderType])`` of the index key list ``columns`` (Ordered nodes)."""
    from sql.bind.expr import _name

    by_name = {n: i for i, (n, _) in enumerate(rel.visible_columns)}
    key, orders = [], []
    for item in columns:
        col = item.this if isinstance(item, exp.Ordered) else item
        if not isinstance(col, exp.Column) or col.table:
            raise error_at(UnsupportedError, "an index key must be a column of the table (expressions are not "
                                             "supported)", item)
        cname = _name(col)
        if cname not in by_name:
            raise error_at(BindError, f"column {cname!r} does not exist in {rel.name!r}", item)
        i = by_name[cname]
        if i in key:
            raise error_at(BindError, f"column {cname!r} appears twice in the index key", item)
        dtype = rel.columns[i][1]
        if dtype.kind in _UNKEYABLE:
            raise error_at(UnsupportedError, f"column {cname!r} of type {dtype} cannot be an index key", item)
        descending = bool(isinstance(item, exp.Ordered) and item.args.get("desc"))
        nulls_first = item.args.get("nulls_first") if isinstance(item, exp.Ordered) else None
        if nulls_first is None:   # Postgres: NULLs sort as the largest value
            nulls_first = descending
        key.append(i)
        orders.append(OrderType(descending, bool(nulls_first)))
    return key, orders


def drop_index(db, node) -> None:
    """Run ``DROP INDEX [IF EXISTS] name, ...``."""
    from sql.bind.select import relation_name

    if node.args.get("cascade"):
        raise error_at(UnsupportedError, "DROP ... CASCADE is not supported", node)
    if node.args.get("concurrently"):
        raise error_at(UnsupportedError, "DROP INDEX CONCURRENTLY is not supported", node)
    new = db.catalog.copy()
    dropped = []
    for t in (node.args.get("tables") or [node.this]):
        name = relation_name(t)
        rel = new.get(name)
        if rel is None or rel.kind != "index":
            if node.args.get("exists"):
                continue
            raise error_at(CatalogError, f"index {name!r} does not exist", t)
        dropped.append(new.remove(name))
    if dropped:
        db.apply_ddl(new, dropped=dropped)


def key_text(index) -> str:
    """The indexed columns of relation ``index`` as CREATE INDEX spelled them: ``c DESC, s``."""
    parts = []
    for col, order in zip(list(index.pk_indices)[:index.index_columns], index.desc.order_types):
        text = index.columns[col][0]
        if order.descending:
            text += " DESC" + ("" if order.nulls_first else " NULLS LAST")
        elif order.nulls_first:
            text += " NULLS FIRST"
        parts.append(text)
    return ", ".join(parts)


def attach_indexes(plan: P.Node, catalog) -> P.Node:
    """Give each Scan of batch plan ``plan`` its relation's indexes (``scan.indexes``; none for
    a time-travel scan); returns ``plan``."""
    for node in P.walk(plan):
        if isinstance(node, P.Scan):
            as_of = getattr(node, "as_of", None)
            node.indexes = [] if as_of is not None else catalog.indexes_of(node.relation.name)
    return plan
