"""Statement execution: one parsed statement -> a :class:`Result` (rows + description, or a
row count), against a :class:`~sql.database.Database` and the session's variables.

Job: DDL (CREATE TABLE [AS query] / MATERIALIZED VIEW [IF NOT EXISTS], DROP [IF EXISTS]; ALTER TABLE
in :mod:`sql.alter`), DML (INSERT VALUES / SELECT / DEFAULT VALUES, UPDATE, DELETE: chunks written
into the table's source; column defaults from :mod:`sql.defaults`), queries (batch
SELECT over one pinned snapshot), FLUSH, SET/SHOW, SHOW TABLES / MATERIALIZED VIEWS,
DESCRIBE, EXPLAIN, COPY (:mod:`sql.copy`); on a read-only database every statement that writes
is a ``ReadOnlyError`` naming it (``_refuse_on_reader``); the subscription statements (CREATE/DROP SUBSCRIPTION, DECLARE ... SUBSCRIPTION
CURSOR, FETCH, CLOSE) live in :mod:`sql.subscription`. One function per statement kind, dispatched by ``execute_statement``; a new
statement adds a function and a line in ``_DISPATCH`` / ``_AST_DISPATCH``.

Invariants: DDL builds the new catalog as a copy and hands it to ``Database.apply_ddl``, so a
failed statement leaves catalog and data as they were. UPDATE/DELETE first flush, then read
the committed rows, so they see every earlier DML of this database.

Callers: :mod:`sql.session`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from relational.catalog import TableDesc
from relational.types import DataType, TypeKind
from stream.chunk import StreamChunk
from stream.expr import raising_errors
from stream.schema import Schema

from sql import subscription
from sql import types as T
from sql.batch.scan import SCAN_PROGRESS
from sql.batch.execute import _py_rows, execute as run_batch, from_arrow_values, to_arrow_values
from sql.bind.expr import ExprBinder, Scope, ScopeCol, _name, new_statement_clock, spelled
from sql.bind.select import QueryBinder, _conjuncts, relation_name
from sql.build import IdAllocator, allocate, count_state_tables, mv_desc
from sql.catalog import ROW_ID, Relation
from sql.defaults import declare_default, default_columns, is_default_marker, parse_default
from sql.index import attach_indexes, create_index, drop_index
from sql.errors import (BindError, CatalogError, ExecutionError, ReadOnlyError, SqlSyntaxError, UnsupportedError,
                        error_at, execution_error)
from sql.insert_batch import build_insert_chunks, parameter_slots
from sql.source import attach_connector, refuse_source_scans, refuse_with_options, kind_name, takes_inserts
from sql.watermark import declare_watermark
from sql.plan import nodes as P
from sql.plan.explain import explain_plan
from sql.plan import rules
from sql.plan.rules import optimize

SESSION_VARIABLES = {"rw_implicit_flush": "false", "rw_streaming_enable_delta_join": "false",
                     "streaming_parallelism": "0", "query_mode": "auto", "timezone": "UTC",
                     "search_path": "public", "application_name": "", "client_encoding": "UTF8",
                     "rw_enable_two_phase_agg": "true", "streaming_rate_limit": "0",
                     "batch_parallelism": "0", "extra_float_digits": "1", "datestyle": "ISO, MDY"}


@dataclass
class Result:
    columns: list = None      # [(name, DataType)] for a query
    table: pa.Table = None    # the rows of a query
    rowcount: int = -1


def execute_statement(db, stmt, params, variables) -> Result:
    new_statement_clock()   # now() is one time per statement (sql/bind/expr.py)
    if db.read_only:
        _refuse_on_reader(db, stmt)
    if stmt.kind != "ast":
        return _DISPATCH[stmt.kind](db, stmt, params, variables)
    node = stmt.ast
    _refuse_clauses(node)
    for cls, fn in _AST_DISPATCH:
        if isinstance(node, cls):
            return fn(db, node, params, variables, stmt)
    raise error_at(UnsupportedError, f"statement {spelled(node)} is not supported", node)


_READER_KINDS = ("flush", "set", "show", "describe", "explain", "declare_cursor", "fetch", "close")
_READER_NODES = (exp.Select, exp.Union, exp.Except, exp.Intersect, exp.Values)


def _refuse_on_reader(db, stmt) -> None:
    """A read-only connection runs queries, SHOW/DESCRIBE/EXPLAIN, SET, subscription cursors,
    FLUSH (a refresh there) and COPY ... TO; anything that writes is a ``ReadOnlyError``
    naming the statement."""
    if stmt.kind in _READER_KINDS or (stmt.kind == "ast" and isinstance(stmt.ast, _READER_NODES)):
        return
    if stmt.kind == "copy" and stmt.options.get("direction") == "to":
        return
    if stmt.kind == "ast":
        node = stmt.ast
        kind = (node.args.get("kind") or "") if isinstance(node, (exp.Create, exp.Drop)) else ""
        what = " ".join(w for w in (node.key.upper(), str(kind).upper()) if w)
        if isinstance(node, exp.Create) and kind.upper() == "VIEW":
            what = "CREATE MATERIALIZED VIEW"
        elif isinstance(node, exp.Drop) and node.args.get("materialized"):
            what = "DROP MATERIALIZED VIEW"
    else:
        what = {"copy": "COPY ... FROM", "create_subscription": "CREATE SUBSCRIPTION",
                "drop_subscription": "DROP SUBSCRIPTION"}.get(stmt.kind, stmt.kind.upper())
    err = ReadOnlyError(f"{what} is not allowed on a read-only connection (it reads {db.url} beside its writer; "
                        f"connect without read_only=True to change the database)", stmt.line, stmt.column)
    raise err


# DML clauses sqlglot parses that no statement here reads: refused, never silently ignored
_UNSUPPORTED_CLAUSES = ((exp.Insert, "conflict", "INSERT ... ON CONFLICT (use the table's ON CONFLICT)"),
                        (exp.Update, "from_", "UPDATE ... FROM"),
                        (exp.Update, "from", "UPDATE ... FROM"),
                        (exp.Delete, "using", "DELETE ... USING"))


def _refuse_clauses(node) -> None:
    # sqlglot accepts these incomplete statements; Postgres' parser does not (nothing may run)
    if isinstance(node, exp.Insert) and node.expression is None and not node.args.get("default"):
        raise error_at(SqlSyntaxError, "syntax error at end of input: INSERT needs VALUES, a query or DEFAULT "
                                       "VALUES", node)
    if isinstance(node, exp.Update) and not node.expressions:
        raise error_at(SqlSyntaxError, "syntax error: UPDATE ... SET needs an assignment", node)
    for cls, arg, what in _UNSUPPORTED_CLAUSES:
        if isinstance(node, cls) and node.args.get(arg):
            clause = node.args[arg]
            raise error_at(UnsupportedError, f"{what} is not supported",
                           clause if isinstance(clause, exp.Expression) else node)


# --- queries --------------------------------------------------------------------------------------

def bind_select(db, node, params, batch=True):
    """Bind a query and apply the rewrite rules (the one logical plan of batch and stream)."""
    binder = QueryBinder(db.catalog, params, batch=batch)
    plan = optimize(binder.bind_query(node))
    if batch:   # batch scans may read an index instead (sql/plan/key_range.py)
        refuse_source_scans(plan)   # a source stores no rows (sql/source.py)
        attach_indexes(plan, db.catalog)
    return plan, binder


def _select(db, node, params, variables, stmt) -> Result:
    plan, _ = bind_select(db, node, params)
    plan = P.visible(plan)
    with db.lock:
        epoch = db.store.max_committed_epoch
        snap = db.store.snapshot(epoch)
    token = SCAN_PROGRESS.set(getattr(db, "progress", None))   # long scans report (sql/batch/scan.py)
    try:
        table = run_batch(plan, db.store, epoch)
    except (ArithmeticError, ValueError) as exc:
        raise execution_error(exc) from None
    finally:
        SCAN_PROGRESS.reset(token)
        snap.release()
    return Result(list(zip(plan.names, plan.types)), table, table.num_rows)


# --- DDL ------------------------------------------------------------------------------------------

def _create(db, node, params, variables, stmt) -> Result:
    kind = (node.args.get("kind") or "").upper()
    if kind == "TABLE":
        return _create_table(db, node, stmt, params, variables)
    if kind == "VIEW":
        props = node.args.get("properties")
        materialized = props is not None and any(isinstance(p, exp.MaterializedProperty) for p in props.expressions)
        if not materialized:
            raise error_at(UnsupportedError, "CREATE VIEW (non-materialized) is not supported yet", node)
        return _create_mv(db, node, params, stmt)
    if kind == "INDEX":
        create_index(db, node, params, _new_relation_name)
        return Result()
    raise error_at(UnsupportedError, f"CREATE {kind} is not supported", node)


def _create_table(db, node, stmt, params=(), variables=None) -> Result:
    schema = node.this
    if node.expression is not None:
        refuse_with_options(node, stmt, "CREATE TABLE ... AS")   # sql/source.py
        return _create_table_as(db, node, stmt, params, variables or {})
    if not isinstance(schema, exp.Schema):
        raise error_at(UnsupportedError, "CREATE TABLE without columns is not supported", node)
    name = relation_name(schema.this)
    if db.catalog.get(name) is not None:
        if node.args.get("exists"):
            return Result()
        raise error_at(CatalogError, f"relation {name!r} already exists", schema.this)
    cols, pk, defaults, typmods, not_null = [], [], [], [], []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            cname = _name(item.this)
            if any(c == cname for c, _ in cols):
                raise error_at(CatalogError, f"column {cname!r} specified more than once", item)
            dtype, default, is_pk = column_definition(item)
            typmod, required = column_modifiers(item)   # enforced by sql/column_checks.py
            cols.append((cname, dtype))
            defaults.append(default)
            typmods.append(typmod)
            not_null.append(required)
            if is_pk:
                pk.append(cname)
        elif isinstance(item, exp.PrimaryKey):
            if pk:
                raise error_at(BindError, "multiple primary keys are not allowed", item)
            pk = [_name(e.this if isinstance(e, exp.Ordered) else e) for e in item.expressions]
        else:
            raise error_at(UnsupportedError, f"table element {item.sql()[:40]!r} is not supported", item)
    names = [c for c, _ in cols]
    for p in pk:
        if p not in names:
            raise BindError(f"primary key column {p!r} is not a column of {name}")
        if dict(cols)[p].kind == TypeKind.LIST:   # the executors key rows by hashable Python values
            raise error_at(UnsupportedError, f"an array ({dict(cols)[p].sql_name()}) as PRIMARY KEY column {p!r} "
                                             "is not supported", schema.this)
    new = db.catalog.copy()
    tid = new.allocate_id()
    row_id = not pk
    if row_id:
        columns = cols + [(ROW_ID, DataType.BIGINT)]
        pk_idx = (len(cols),)
    else:
        columns = cols
        pk_idx = tuple(names.index(p) for p in pk)
    conflict = stmt.options.get("on_conflict", "overwrite")
    if stmt.options.get("on_conflict") and row_id:
        raise UnsupportedError("ON CONFLICT needs a table with a primary key")
    desc = TableDesc(tid, name, tuple(columns), pk_idx)
    rel = Relation("table", desc, len(cols), row_id, conflict, bool(stmt.options.get("append_only")),
                   defaults=defaults if any(d is not None for d in defaults) else None,
                   typmods=typmods if any(typmods) else None, not_null=not_null if any(not_null) else None)
    attach_connector(db, new, rel, node, stmt)   # WITH (connector = ...): a source or a fed table
    declare_watermark(db, new, rel, stmt, node)   # WATERMARK FOR col AS expr (sql/watermark.py)
    new.add(rel)
    db.apply_ddl(new, changed=[rel])
    return Result()


def column_definition(item) -> tuple:
    """``(DataType, default text or None, primary key?)`` of a column definition (CREATE TABLE,
    ALTER TABLE ... ADD COLUMN); constraints other than PRIMARY KEY, NOT NULL and DEFAULT are
    refused by name."""
    cname = _name(item.this)
    if item.args.get("kind") is None:
        raise error_at(BindError, f"column {cname!r} needs a type", item)
    dtype = T.type_from_sqlglot(item.args["kind"])
    default, is_pk = None, False
    for c in item.constraints:
        if isinstance(c.kind, exp.PrimaryKeyColumnConstraint):
            is_pk = True
        elif isinstance(c.kind, exp.NotNullColumnConstraint):
            continue
        elif isinstance(c.kind, exp.DefaultColumnConstraint):
            if default is not None:
                raise error_at(BindError, f"multiple default values specified for column {cname!r}", c)
            default = declare_default(c.kind.this, dtype, cname)   # sql/defaults.py
        else:
            raise error_at(UnsupportedError, f"column constraint {c.sql()} is not supported", c)
    return dtype, default, is_pk


def column_modifiers(item) -> tuple:
    """``(typmod, not null?)`` of a column definition: ``(precision, scale)`` of a
    ``NUMERIC(p, s)`` type (None otherwise) and whether it says ``NOT NULL``."""
    nulls = {bool(c.kind.args.get("allow_null")) for c in item.constraints
             if isinstance(c.kind, exp.NotNullColumnConstraint)}
    if len(nulls) > 1:   # NOT NULL NULL
        raise error_at(BindError, f"conflicting NULL/NOT NULL declarations for column {_name(item.this)!r}", item)
    return T.typmod_from_sqlglot(item.args["kind"]), False in nulls


def _select_typmods(db, node, n: int) -> list | None:
    """The typmods of a query's output columns (CREATE TABLE AS keeps them, as Postgres does):
    a top-level ``CAST(x AS NUMERIC(p, s))`` / ``VARCHAR(n)``, and a plain column of the one
    table the query reads (``SELECT * FROM t``, ``SELECT a, b AS c FROM t``, no join), that
    table's; None when there is none."""
    if not isinstance(node, exp.Select):
        return None
    source = _single_table(db, node)
    out = []
    for item in node.expressions:
        item = item.this if isinstance(item, exp.Alias) else item
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, exp.Star) and source is not None:
            out.extend(source[1].typmod_of(i) for i in range(source[1].n_visible))
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and source is not None \
                and item.table in (source[0], ""):
            out.extend(source[1].typmod_of(i) for i in range(source[1].n_visible))
        elif isinstance(item, exp.Column) and source is not None and item.table in (source[0], "") \
                and item.name in source[2]:
            out.append(source[1].typmod_of(source[2][item.name]))
        else:
            out.append(T.typmod_from_sqlglot(item.to) if isinstance(item, exp.Cast) else None)
    return out if len(out) == n and any(out) else None


def _single_table(db, node):
    """``(name in the query, Relation, {column: visible index})`` of a SELECT reading one table
    and nothing else (no join, no subquery in FROM), else None."""
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is None or node.args.get("joins") or not isinstance(from_.this, exp.Table) or from_.this.db:
        return None
    rel = db.catalog.get(from_.this.name)
    if rel is None or rel.kind != "table":
        return None
    return (from_.this.alias_or_name, rel, {c: i for i, (c, _) in enumerate(rel.visible_columns)})


def _create_table_as(db, node, stmt, params, variables) -> Result:
    """``CREATE TABLE t [(names)] AS query``: a table without a primary key (hidden row ids)
    holding the query's rows at the committed epoch, loaded as SSTs (``Database.bulk_load``:
    nothing reads the new table yet). Not atomic: if the load fails, the new table is dropped
    again. Returns the row count (Postgres' ``SELECT n``)."""
    target, aliases = node.this, None
    if isinstance(target, exp.Schema):
        if not all(isinstance(i, exp.Identifier) for i in target.expressions):
            raise error_at(UnsupportedError, "CREATE TABLE AS takes column names only (types come from the query)",
                           target)
        aliases = [_name(i) for i in target.expressions]
        target = target.this
    name = _new_relation_name(db, node, target)
    if name is None:
        return Result()
    if stmt.options.get("append_only") or stmt.options.get("on_conflict"):
        raise UnsupportedError("CREATE TABLE AS takes no APPEND ONLY or ON CONFLICT (the table has no primary key)")
    if stmt.options.get("watermark"):
        raise UnsupportedError("CREATE TABLE AS takes no WATERMARK (declare the table with its columns)")
    result = _select(db, node.expression, params, variables, stmt)
    names = [n for n, _ in result.columns]
    if aliases:
        if len(aliases) > len(names):
            raise error_at(BindError, "CREATE TABLE AS specifies too many column names", node.this)
        names[:len(aliases)] = aliases
    for i, n in enumerate(names):
        if n in names[:i]:
            raise error_at(BindError, f"column {n!r} specified more than once", node)
    types = [t for _, t in result.columns]
    new = db.catalog.copy()
    desc = TableDesc(new.allocate_id(), name, tuple(zip(names, types)) + ((ROW_ID, DataType.BIGINT),),
                     (len(names),))
    new.add(Relation("table", desc, len(names), True, "overwrite", False,
                     typmods=_select_typmods(db, node.expression, len(names))))
    db.apply_ddl(new, changed=[new.get(name)])
    rel = db.catalog.get(name)
    table = pa.table(list(result.table.columns), names=names) if names else None
    if table is not None and table.num_rows:
        try:
            if db.runtime == "in_process":
                db.bulk_load(rel, table)
            else:   # the Spark runtime's graph is not stopped and started here: through its source
                from sql.bulk import insert_arrow
                insert_arrow(db, rel.name, table, variables)
        except BaseException:
            dropped = db.catalog.copy()
            dropped.remove(name)
            db.apply_ddl(dropped, dropped=[rel])
            raise
        if variables.get("rw_implicit_flush") == "true":
            _checked_flush(db)
    return Result(rowcount=table.num_rows if table is not None else 0)


def plan_mv_definition(db, rel):
    """Plan a stored MV definition again (reopen / rebuild); names come from the record."""
    from sql.alter import plan_definition
    return plan_definition(db.catalog, rel.definition, rel)   # tables as the MV reads them (sql/alter.py)


def _new_relation_name(db, node, target) -> str | None:
    """The name a CREATE makes; None when it exists and the statement says IF NOT EXISTS
    (nothing to do), a CatalogError when it exists otherwise."""
    name = relation_name(target)
    if db.catalog.get(name) is None:
        return name
    if node.args.get("exists"):
        return None
    raise error_at(CatalogError, f"relation {name!r} already exists", target)


def _create_mv(db, node, params, stmt) -> Result:
    target = node.this
    aliases = None
    if isinstance(target, exp.Schema):
        aliases = [_name(i) for i in target.expressions]
        target = target.this
    name = _new_relation_name(db, node, target)
    if name is None:
        return Result()
    query = node.expression
    refuse_with_options(node, stmt, "CREATE MATERIALIZED VIEW")   # sql/source.py
    if params:
        raise UnsupportedError("parameters in CREATE MATERIALIZED VIEW are not supported")
    plan, binder = bind_select(db, query, (), batch=False)
    if any(isinstance(n, P.Values) for n in P.walk(plan)):
        raise error_at(UnsupportedError, "a materialized view needs a FROM clause", query)
    col_names = list(plan.names[:plan.n_visible])
    if aliases:
        if len(aliases) > len(col_names):
            raise error_at(BindError, f"too many column names for {name}", node.this)
        col_names[:len(aliases)] = aliases
    if len(set(col_names)) != len(col_names):
        dup = next(c for c in col_names if col_names.count(c) > 1)
        raise error_at(BindError, f"column {dup!r} specified more than once in {name}", query)
    new = db.catalog.copy()
    tid = new.allocate_id()
    ids = allocate(plan, IdAllocator(catalog=new))
    internal = [t for v in ids.values() for t in v]
    desc = mv_desc(plan, tid, name, col_names)
    definition = query.sql(dialect="postgres")
    rel = Relation("mv", desc, len(col_names), definition=definition, internal_ids=internal,
                   depends_on=list(binder.depends_on),
                   pushed_filters=rules.push_filter_below_join in rules.RULES)   # planned with it
    new.add(rel)
    db.apply_ddl(new, changed=[rel], backfill=frozenset([name]))
    return Result()


def _drop(db, node, params, variables, stmt) -> Result:
    kind = (node.args.get("kind") or "").upper()
    if kind == "VIEW" and node.args.get("materialized"):
        want = "mv"
    elif kind == "TABLE":
        want = "source" if stmt.options.get("source") else "table"   # DROP SOURCE (sql/parse.py)
    elif kind == "INDEX":
        drop_index(db, node)
        return Result()
    else:
        raise error_at(UnsupportedError, f"DROP {kind} is not supported", node)
    new = db.catalog.copy()
    dropped = []
    for t in (node.args.get("tables") or [node.this]):
        name = relation_name(t)
        rel = new.get(name)
        if rel is None or rel.kind != want:
            if node.args.get("exists"):
                continue
            what = {"table": "table", "source": "source"}.get(want, "materialized view")
            raise error_at(CatalogError, f"{what} {name!r} does not exist", t)
        if node.args.get("cascade"):
            raise error_at(UnsupportedError, "DROP ... CASCADE is not supported", node)
        indexes = new.indexes_of(name)
        dropped.append(new.remove(name))   # and its indexes
        dropped.extend(indexes)
    if dropped:
        db.apply_ddl(new, dropped=dropped)
    return Result()


# --- DML ------------------------------------------------------------------------------------------

def _write_rows(db, rel, ops_rows, variables) -> None:
    if not ops_rows:
        return
    schema = Schema(list(rel.desc.columns))
    chunks = [StreamChunk.from_rows(schema, ops_rows[at:at + 4096]) for at in range(0, len(ops_rows), 4096)]
    write_chunks(db, rel, chunks, variables)


def write_chunks(db, rel, chunks, variables) -> None:
    """Hand ``chunks`` (any iterable) to ``rel``'s source as one statement (``Database.write``:
    kept until committed, written again if the graph fails); with implicit flush, waits for the
    checkpoint."""
    from sql.column_checks import check_chunks
    db.write(rel, check_chunks(rel, chunks))   # typmods and NOT NULL: every chunk before the first is written
    if variables.get("rw_implicit_flush") == "true":
        _checked_flush(db)


def _checked_flush(db) -> int:
    """``Database.flush``: a graph failure is recovered there (LostWritesError if it lost writes)."""
    return db.flush()


def _insert(db, node, params, variables, stmt) -> Result:
    query = None
    returning = node.args.get("returning")
    if node.expression is not None and not isinstance(node.expression, exp.Values):   # INSERT ... SELECT
        rel, cols = _insert_target(db, node)
        query = _insert_query(db, node, params, cols)
        cols = _narrow(node, cols, len(query[0].types))
        if returning is None and _columns_as_they_are(rel, cols, query[0]):
            from sql.bulk import insert_arrow_into
            table = query[1]
            n = insert_arrow_into(db, rel, pa.table(table.columns if table.num_columns else [], names=cols),
                                  variables)
            return Result(rowcount=n)
    rel, full = _insert_rows(db, node, params, query)
    if returning is not None:   # bound before anything is written: a wrong RETURNING writes nothing
        returning = _bind_returning(rel, returning, params)
    _write_rows(db, rel, full, variables)
    if returning is not None:
        return _returning_result(rel, returning, [r for _, r in full])
    return Result(rowcount=len(full))


def _insert_query(db, node, params, cols) -> tuple:
    """``(plan, table)``: an INSERT's query planned and run at the newest committed epoch."""
    source = node.expression
    plan, _ = bind_select(db, source, params)
    plan = P.visible(plan)
    _check_width(len(plan.types), _narrow(node, cols, len(plan.types)), source)
    with db.lock:
        epoch = db.store.max_committed_epoch
    return plan, run_batch(plan, db.store, epoch)


def _columns_as_they_are(rel, cols, plan) -> bool:
    """An INSERT ... SELECT's columns go into ``rel`` as Arrow columns (``sql.bulk``) when the
    query fills every visible column with exactly its type (no assignment cast to apply) and
    the type's Arrow form is the stored one."""
    from sql.copy import _ARROW_AS_IS
    types = dict(rel.visible_columns)
    return (len(cols) == len(types) and plan.n_visible == len(plan.types) and
            all(t == types[c] and t.kind in _ARROW_AS_IS for c, t in zip(cols, plan.types)))


def insert_many(db, stmt, seq_of_params, variables) -> Result | None:
    """``executemany`` of one INSERT: every parameter set's rows go out as one batch of chunks
    (None when ``stmt`` is not an INSERT; the caller then runs the statements one by one)."""
    if stmt.kind != "ast" or not isinstance(stmt.ast, exp.Insert):
        return None
    _refuse_clauses(stmt.ast)
    if stmt.ast.args.get("returning"):
        raise error_at(UnsupportedError, "RETURNING in executemany is not supported (execute each statement)",
                       stmt.ast.args["returning"])
    if isinstance(stmt.ast.expression, exp.Values) and seq_of_params:
        rel, cols = _insert_target(db, stmt.ast)
        slots = parameter_slots(stmt.ast.expression, len(cols))
        chunks = build_insert_chunks(rel, cols, slots, seq_of_params) if slots is not None else None
        if chunks is not None:
            write_chunks(db, rel, chunks, variables)
            return Result(rowcount=sum(len(c.ops) for c in chunks))
    rows, rel = [], None
    for params in seq_of_params:
        rel, full = _insert_rows(db, stmt.ast, list(params or ()))
        rows += full
    if rel is not None:
        _write_rows(db, rel, rows, variables)
    return Result(rowcount=len(rows))


def _insert_target(db, node):
    """The INSERT's table and its target column names (all visible columns when not named)."""
    target = node.this
    cols = None
    if isinstance(target, exp.Schema):
        cols = [_name(i) for i in target.expressions]
        target = target.this
    name = relation_name(target)
    rel = db.catalog.get(name)
    if rel is None or not takes_inserts(rel):
        raise error_at(CatalogError if rel is None else BindError,
                       f"table {name!r} does not exist" if rel is None else f"cannot insert into {_kind_name(rel)} {name!r}",
                       target)
    visible = rel.visible_columns
    vis_names = [n for n, _ in visible]
    cols = cols or vis_names
    if isinstance(node.expression, exp.Values) and node.expression.expressions:
        first = node.expression.expressions[0]
        cols = _narrow(node, cols, len(first.expressions) if isinstance(first, exp.Tuple) else 1)
    for i, c in enumerate(cols):
        if c not in vis_names:
            raise error_at(BindError, f"column {c!r} of relation {name!r} does not exist", node)
        if c in cols[:i]:
            raise error_at(BindError, f"column {c!r} specified more than once", node)
    return rel, cols


def _narrow(node, cols: list, width: int) -> list:
    """The target columns of an INSERT without a column list whose source has only ``width``
    columns: the first ``width`` of the table's (the others take their defaults, as Postgres)."""
    return cols[:width] if not isinstance(node.this, exp.Schema) and width < len(cols) else cols


def _check_width(width: int, cols: list, node) -> None:
    """Postgres' errors for a source row wider or narrower than the target column list."""
    if width > len(cols):
        raise error_at(BindError, "INSERT has more expressions than target columns", node)
    if width < len(cols):
        raise error_at(BindError, "INSERT has more target columns than expressions", node)


def _insert_rows(db, node, params, query=None):
    """``(rel, [("+", row)])``: the full rows an INSERT adds (``query``: its SELECT's
    ``(plan, table)`` when already run)."""
    rel, cols = _insert_target(db, node)
    name, visible = rel.name, rel.visible_columns
    vis_names = [n for n, _ in visible]
    source = node.expression
    if source is None:   # INSERT ... DEFAULT VALUES: one row of defaults
        cols, rows = [], [[]]
    elif isinstance(source, exp.Values):
        binder = ExprBinder(Scope(), params, context="VALUES")
        rows = []
        for tup in source.expressions:
            items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
            if rows and len(items) != len(rows[0]):
                raise error_at(BindError, "VALUES lists must all be the same length", tup)
            _check_width(len(items), cols, tup)
            row = []
            for item, c in zip(items, cols):
                dtype = visible[vis_names.index(c)][1]
                if is_default_marker(item):   # VALUES (DEFAULT, ...): the column's default
                    row.append(_DEFAULT)
                    continue
                lit = binder.literal(item)
                if lit is not None and not (lit[2] and lit[0] is not None and dtype.kind != DataType.VARCHAR.kind):
                    row.append(_coerce(lit[0], dtype, item))   # fast path: a constant or parameter
                else:
                    row.append(_const_value(binder.bind_as(item, dtype), dtype, item))
            rows.append(row)
    else:
        plan, table = query or _insert_query(db, node, params, cols)
        cols = _narrow(node, cols, len(plan.types))
        rows = []
        for r in (_py_rows(table, plan.types) if table.num_columns else []):
            rows.append([_coerce(v, visible[vis_names.index(c)][1], source) for v, c in zip(r, cols)])
    # defaults (sql/defaults.py): columns left out of the list, and DEFAULT items, evaluated once
    # for the statement (n values: random() differs per row)
    needed = {i for i, n in enumerate(vis_names) if n not in cols and rel.default_of(i) is not None}
    needed |= {vis_names.index(c) for row in rows for c, v in zip(cols, row) if v is _DEFAULT}
    defaults = default_columns(rel, sorted(needed), len(rows))
    full = []
    for r, row in enumerate(rows):
        values = dict(zip(cols, row))
        out = [values.get(n) for n in vis_names]
        for i in needed:
            if vis_names[i] not in values or out[i] is _DEFAULT:
                out[i] = defaults[i][r]
        if rel.row_id:
            out.append(None)
        for i in rel.pk_indices:
            if out[i] is None and not rel.row_id:
                from sql.column_checks import not_null_error
                raise not_null_error(rel, rel.desc.columns[i][0])   # a pk column is NOT NULL
        full.append(("+", tuple(out)))
    return rel, full


_DEFAULT = object()   # a VALUES item that is the keyword DEFAULT


def _coerce(value, dtype, node):
    try:
        return T.coerce_value(value, dtype)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise error_at(ExecutionError, f"cannot store {value!r} as {dtype.sql_name()}: {exc}", node) from None


def _const_value(e, dtype, node):
    try:
        with raising_errors():
            value = from_arrow_values(e.eval([], 1), e.data_type)[0]
    except (ArithmeticError, ValueError) as exc:
        raise execution_error(exc, node) from None
    return _coerce(value, dtype, node)


def _table_for_dml(db, node, what):
    name = relation_name(node.this)
    rel = db.catalog.get(name)
    if rel is None:
        raise error_at(CatalogError, f"table {name!r} does not exist", node.this)
    if rel.kind != "table":
        raise error_at(BindError, f"cannot change {_kind_name(rel)} {name!r}", node.this)
    if rel.append_only:
        raise error_at(ExecutionError, f"{what} is not allowed on the append-only table {name!r}", node.this)
    return rel


def _kind_name(rel) -> str:
    """What DML refuses to write, named (sql/source.py ``kind_name``)."""
    return kind_name(rel)


def _dml_plan(db, rel, where, params):
    """``(plan, scope, scan)``: the rows of ``rel`` matching ``where`` (an UPDATE/DELETE's input)."""
    scan = P.Scan(rel)
    scope = Scope([ScopeCol(rel.name, n, i, t) for i, (n, t) in enumerate(rel.visible_columns)])
    plan = scan
    if where is not None:   # the query binder's WHERE: subqueries too (the scan's columns stay first)
        binder = QueryBinder(db.catalog, params, batch=True)
        plan = binder.bind_where(scan, scope, _conjuncts(where.this))
    return attach_indexes(plan, db.catalog), scope, scan


def _current_rows(db, rel, where, params):
    """Committed rows of ``rel`` (flushed first) matching ``where``, full width."""
    _checked_flush(db)
    plan, scope, scan = _dml_plan(db, rel, where, params)
    table = run_batch(plan, db.store, db.store.max_committed_epoch)
    return [tuple(r) for r in _py_rows(table, scan.types)] if table.num_rows else [], scope


def _delete(db, node, params, variables, stmt) -> Result:
    rel = _table_for_dml(db, node, "DELETE")
    rows, _ = _current_rows(db, rel, node.args.get("where"), params)
    returning = node.args.get("returning")
    if returning is not None:
        returning = _bind_returning(rel, returning, params)
    _write_rows(db, rel, [("-", r) for r in rows], variables)
    if returning is not None:   # the deleted rows
        return _returning_result(rel, returning, rows)
    return Result(rowcount=len(rows))


def _bind_returning(rel, returning, params) -> list:
    """``RETURNING`` items as ``(name, bound expression)`` over ``rel``'s stored row (``*``:
    every visible column); names as Postgres gives them (a column's, a function's, else
    ``?column?``)."""
    scope = Scope([ScopeCol(rel.name, n, i, t) for i, (n, t) in enumerate(rel.visible_columns)])
    binder = ExprBinder(scope, params, context="RETURNING")
    out = []
    for item in returning.expressions:
        if isinstance(item, exp.Star) or isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            out += [(n, binder.bind(exp.column(n, quoted=True))) for n, _ in rel.visible_columns]
            continue
        if isinstance(item, exp.Alias):
            name, item = item.alias, item.this
        elif isinstance(item, exp.Column):
            name = item.name
        else:
            name = spelled(item) if isinstance(item, exp.Func) and "(" not in spelled(item) else "?column?"
        out.append((name, binder.bind(item)))
    return out


def _returning_result(rel, returning, rows) -> Result:
    """The RETURNING items over ``rows`` (full stored rows, typmods applied as written)."""
    from sql.column_checks import check_columns
    cols = check_columns(rel, [to_arrow_values([r[i] for r in rows], t) for i, (_, t) in enumerate(rel.columns)])
    arrays = []
    with raising_errors():
        for _, e in returning:
            arrays.append(e.eval(cols, len(rows)))
    table = pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
    return Result([(n, e.data_type) for n, e in returning], table, len(rows))


def _bind_assignments(rel, node, scope, params) -> list:
    """UPDATE's ``SET`` list as ``(column index, bound expression, column type, node)``: an
    unknown column, a column set twice, a pk column or a type that does not assign is an error."""
    binder = ExprBinder(scope, params, context="UPDATE")
    names = [n for n, _ in rel.visible_columns]
    sets = []
    for assign in node.expressions:
        if isinstance(assign.this, exp.Bracket):
            raise error_at(UnsupportedError, "assigning to an array element or slice (SET a[i] = ...) is not "
                                             "supported: SET the whole array", assign.this)
        col = _name(assign.this.this)
        if col not in names:
            raise error_at(BindError, f"column {col!r} of relation {rel.name!r} does not exist", assign.this)
        idx = names.index(col)
        if any(idx == done[0] for done in sets):
            raise error_at(BindError, f"multiple assignments to column {col!r}", assign.this)
        if rel.user_pk and idx in rel.pk_indices:
            raise error_at(ExecutionError, f"cannot update primary key column {col!r}", assign.this)
        dtype = rel.visible_columns[idx][1]
        value = assign.expression
        if is_default_marker(value):   # SET c = DEFAULT: the column's default (NULL without one)
            text = rel.default_of(idx)
            value = exp.Null() if text is None else parse_default(text)
        e = binder.bind_as(value, dtype)
        if e.data_type != dtype and not T.can_assign(e.data_type, dtype):
            raise error_at(BindError, f"column {col!r} is {dtype.sql_name()} but the expression is "
                                      f"{e.data_type.sql_name()}", assign.expression)
        sets.append((idx, e, dtype, assign.expression))
    return sets


def _update(db, node, params, variables, stmt) -> Result:
    rel = _table_for_dml(db, node, "UPDATE")
    rows, scope = _current_rows(db, rel, node.args.get("where"), params)
    sets = _bind_assignments(rel, node, scope, params)
    returning = node.args.get("returning")
    if returning is not None:
        returning = _bind_returning(rel, returning, params)
    if not rows:
        return _returning_result(rel, returning, []) if returning is not None else Result(rowcount=0)
    cols = [to_arrow_values([r[i] for r in rows], t) for i, (_, t) in enumerate(rel.columns)]
    new_rows = [list(r) for r in rows]
    for idx, e, dtype, n in sets:
        try:
            with raising_errors():
                values = from_arrow_values(e.eval(cols, len(rows)), e.data_type)
        except (ArithmeticError, ValueError) as exc:
            raise execution_error(exc, n) from None
        for r, v in zip(new_rows, values):
            r[idx] = _coerce(v, dtype, n)
    changes = []
    for old, new in zip(rows, new_rows):
        changes += [("U-", old), ("U+", tuple(new))]
    _write_rows(db, rel, changes, variables)
    if returning is not None:   # the new rows
        return _returning_result(rel, returning, [tuple(r) for r in new_rows])
    return Result(rowcount=len(rows))


def _arrow(t):
    from relational.arrow import arrow_type
    return arrow_type(t)


# --- utility statements -------------------------------------------------------------------------------

def _flush(db, stmt, params, variables) -> Result:
    _checked_flush(db)
    return Result()


def _set(db, stmt, params, variables) -> Result:
    name = stmt.name
    if name not in SESSION_VARIABLES:
        raise CatalogError(f"unrecognized configuration parameter {name!r}", stmt.line, stmt.column)
    value = stmt.value.strip().strip("'\"")
    if name == "rw_implicit_flush":
        low = value.lower()
        if low not in ("true", "false", "on", "off", "t", "f", "1", "0", "default"):
            raise BindError(f"invalid value for {name}: {value!r}", stmt.line, stmt.column)
        value = "true" if low in ("true", "on", "t", "1") else "false"
    variables[name] = value
    return Result()


def _show(db, stmt, params, variables) -> Result:
    name = stmt.name
    if name == "tables":
        names = [r.name for r in db.catalog.tables()]
    elif name == "materialized views":
        names = [r.name for r in db.catalog.mvs()]
    elif name == "sources":   # sql/source.py
        names = [r.name for r in db.catalog.ordered() if r.kind == "source"]
    elif name == "indexes":   # RisingWave's SHOW INDEXES: name, table, key
        from sql.index import key_text
        rows = sorted((r.name, r.depends_on[0], key_text(r)) for r in db.catalog.indexes())
        return _rows_result([("Name", DataType.VARCHAR), ("On", DataType.VARCHAR), ("Key", DataType.VARCHAR)], rows)
    elif name in SESSION_VARIABLES:
        return _rows_result([(name, DataType.VARCHAR)], [(variables.get(name, SESSION_VARIABLES[name]),)])
    else:
        raise CatalogError(f"unrecognized configuration parameter {name!r}", stmt.line, stmt.column)
    return _rows_result([("Name", DataType.VARCHAR)], [(n,) for n in sorted(names)])


def _describe(db, stmt, params, variables) -> Result:
    name, qualifiers = stmt.name, stmt.qualifiers   # case-folded by sql.parse as Postgres does
    if len(qualifiers) > 1:
        raise UnsupportedError(f"cross-database references are not supported: {'.'.join(qualifiers + [name])!r}",
                               stmt.line, stmt.column)
    if qualifiers and qualifiers[0] != "public":
        raise UnsupportedError(f"schema {qualifiers[0]!r} does not exist (schemas other than public are not "
                               "supported)", stmt.line, stmt.column)
    rel = db.catalog.get(name)
    if rel is None:
        raise CatalogError(f"relation {stmt.name!r} does not exist", stmt.line, stmt.column)
    # the relation's real primary key: a table's declared pk (none for a hidden _row_id), an
    # MV's stream key (its group columns, its input's pk, ...) where those columns are visible
    pk = set(rel.pk_indices) if rel.kind == "mv" or rel.user_pk else set()
    typmod = rel.typmod_of if rel.kind == "table" else (lambda i: None)
    rows = [(n, T.type_text(t, typmod(i)), i in pk, rel.default_of(i)) for i, (n, t) in enumerate(rel.visible_columns)]
    return _rows_result([("Name", DataType.VARCHAR), ("Type", DataType.VARCHAR), ("Primary Key", DataType.BOOLEAN),
                         ("Default", DataType.VARCHAR)], rows)


def _explain(db, stmt, params, variables) -> Result:
    inner = stmt.inner
    if inner.kind != "ast":
        raise UnsupportedError(f"EXPLAIN {inner.kind.upper()} is not supported", stmt.line, stmt.column)
    node = inner.ast
    if stmt.analyze:
        if not isinstance(node, (exp.Select, exp.Union, exp.Except, exp.Intersect)):
            raise error_at(UnsupportedError, "EXPLAIN ANALYZE supports SELECT only (it runs the statement)", node)
        return _explain_analyze(db, node, params)
    if isinstance(node, exp.Create) and (node.args.get("kind") or "").upper() == "VIEW":
        plan, _ = bind_select(db, node.expression, params, batch=False)
        ids, taken = {}, 0   # placeholder ids numbered across the plan, as they would be allocated
        for n, k in count_state_tables(plan):
            ids[id(n)] = [f"new{taken + i}" for i in range(k)]
            taken += k
        text = explain_plan(plan, ids, stream=True)
    elif isinstance(node, (exp.Select, exp.Union, exp.Except, exp.Intersect)):
        plan, _ = bind_select(db, node, params)
        text = explain_plan(plan, {}, stream=False)
    elif isinstance(node, (exp.Insert, exp.Update, exp.Delete)):
        text = _explain_dml(db, node, params)
    else:
        raise error_at(UnsupportedError, "EXPLAIN supports SELECT, CREATE MATERIALIZED VIEW, INSERT, UPDATE and "
                                         "DELETE", node)
    return _rows_result([("QUERY PLAN", DataType.VARCHAR)], [(line,) for line in text.splitlines()])


def _explain_analyze(db, node, params) -> Result:
    """EXPLAIN ANALYZE SELECT: the query runs as a SELECT would (at the newest committed epoch),
    its rows are dropped, and the plan as it ran is shown with each node's rows and time."""
    plan, _ = bind_select(db, node, params)
    plan = P.visible(plan)
    with db.lock:
        epoch = db.store.max_committed_epoch
        snap = db.store.snapshot(epoch)
    profile: dict = {}
    began = time.perf_counter()
    try:
        table = run_batch(plan, db.store, epoch, profile)
    except (ArithmeticError, ValueError) as exc:
        raise execution_error(exc) from None
    finally:
        snap.release()
    total = time.perf_counter() - began
    lines = explain_plan(plan, {}, stream=False, profile=profile).splitlines()
    lines += [f"Rows: {table.num_rows}", f"Execution Time: {total * 1000:.3f} ms"]
    return _rows_result([("QUERY PLAN", DataType.VARCHAR)], [(line,) for line in lines])


def _explain_dml(db, node, params) -> str:
    """EXPLAIN of INSERT / UPDATE / DELETE: the batch plan of the rows it would write, bound
    (so a wrong name is the statement's error) but not run."""
    if isinstance(node, exp.Insert):
        target = node.this.this if isinstance(node.this, exp.Schema) else node.this
        rel = db.catalog.get(relation_name(target))
        if rel is None or not takes_inserts(rel):
            raise error_at(CatalogError if rel is None else BindError,
                           f"table {relation_name(target)!r} does not exist" if rel is None else
                           f"cannot insert into {_kind_name(rel)} {rel.name!r}", target)
        source = node.expression
        if source is None:   # DEFAULT VALUES
            child = "BatchValues(1 rows)"
        elif isinstance(source, exp.Values):
            child = f"BatchValues({len(source.expressions)} rows)"
        else:
            plan, _ = bind_select(db, source, params)
            child = explain_plan(P.visible(plan), {}, stream=False)
        return f"BatchInsert(table={rel.name})\n" + "\n".join("  " + line for line in child.splitlines())
    what = "DELETE" if isinstance(node, exp.Delete) else "UPDATE"
    rel = _table_for_dml(db, node, what)
    plan, scope, _ = _dml_plan(db, rel, node.args.get("where"), params)
    label = f"Batch{what.title()}(table={rel.name})"
    if what == "UPDATE":
        sets = [f"{rel.visible_columns[idx][0]} = {e}" for idx, e, _, _ in _bind_assignments(rel, node, scope, params)]
        label = f"BatchUpdate(table={rel.name}, set=[{', '.join(sets)}])"
    child = explain_plan(plan, {}, stream=False)
    return label + "\n" + "\n".join("  " + line for line in child.splitlines())


def _copy(db, stmt, params, variables) -> Result:
    """COPY (sql/copy.py): the row count, as Postgres' ``COPY n``."""
    from sql.copy import copy_from, copy_to
    if stmt.options["direction"] == "from":
        return Result(rowcount=copy_from(db, stmt, variables))
    return Result(rowcount=copy_to(db, stmt, params, variables))


def _rows_result(columns, rows) -> Result:
    arrays = [to_arrow_values([r[i] for r in rows], t) for i, (_, t) in enumerate(columns)]
    table = pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(columns))])
    return Result(columns, table, len(rows))


_DISPATCH = {"flush": _flush, "set": _set, "show": _show, "describe": _describe, "explain": _explain,
             "create_subscription": subscription.create_subscription,
             "drop_subscription": subscription.drop_subscription, "declare_cursor": subscription.declare_cursor,
             "fetch": subscription.fetch, "close": subscription.close, "copy": _copy}
def _alter(db, node, params, variables, stmt) -> Result:
    from sql.alter import alter_table
    return alter_table(db, node, params, variables, stmt)


_AST_DISPATCH = ((exp.Alter, _alter), (exp.Create, _create), (exp.Drop, _drop), (exp.Insert, _insert),
                 (exp.Update, _update),
                 (exp.Delete, _delete), (exp.Select, _select), (exp.Union, _select),
                 (exp.Except, _select), (exp.Intersect, _select), (exp.Values, _select))
