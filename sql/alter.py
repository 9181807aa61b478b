"""ALTER TABLE: ``ADD [COLUMN] [IF NOT EXISTS] c type [DEFAULT e]``, ``DROP [COLUMN] [IF EXISTS] c``,
``ALTER [COLUMN] c SET DEFAULT e`` / ``DROP DEFAULT`` / ``SET NOT NULL`` / ``DROP NOT NULL``,
``RENAME TO u``, ``RENAME [COLUMN] a TO b``;
``ALTER MATERIALIZED VIEW | INDEX | SOURCE name RENAME TO new`` (docs/sql.md "Column defaults and
ALTER TABLE"; Postgres' grammar, RisingWave's rules for what reads the table).

Job: build the altered catalog (as every DDL: a copy, swapped in by ``Database.apply_ddl`` once
committed) and, for ADD/DROP COLUMN, re-encode the table's rows.

Row layout (docs/format.md section 2, "Tables altered"): a table's value encoding holds exactly
its current columns, so ADD/DROP COLUMN rewrites every row -- the table's and those of its
indexes (same rows, another key) -- at the DDL's epoch, in the same commit as the new catalog
records (``apply_ddl(rewrite=...)``): each stored value is decoded with the old column types
and encoded again with the new ones (a dropped column left out, an added one holding its
DEFAULT evaluated for the ALTER statement -- NULL without one --, as Postgres shows existing
rows). Keys do not change (no pk column is added or dropped), so the rewrite is one put per row
under the same key, and the table and its indexes keep their table ids. The epoch of the
rewrite is recorded (``Relation.layout_epoch``): a time-travel read of an older epoch, whose
rows have the old layout, is refused by name (sql/bind/time_travel.py).

What reads the table (RisingWave's rule: a change is allowed when it is safe for downstream
MVs): every MV reading the table is planned again against the altered catalog and must keep
its output columns and the layout of each of its state tables (the types and keys its stateful
operators keep: :func:`_signature`); an MV that selects ``*`` / ``t.*`` from the table keeps the
columns it had (its definition is rewritten with the star expanded, as RisingWave does not pick
a new column up); an MV that reads a dropped column makes the ALTER fail naming the MV.

Frozen layouts: an MV whose state keeps the table's whole rows (a join or top-N straight over
the table) would change its state's layout with ADD/DROP COLUMN. Such an MV goes on reading the
table as it was: ``Relation.scan_layouts[table]`` records the columns it was planned with (by
their present names; None for one dropped since), :func:`reading_catalog` shows the binder a
copy of the table with exactly those columns, and :func:`thaw` turns each Scan of such a copy
into a Project from the table's rows to that layout (NULL for a dropped column, which the MV
never reads), so every runtime builds it as any plan. Its plan, state and output are then
those it had; the layout follows RENAME TO / RENAME COLUMN and later ADD/DROPs.

Constraints (sql/column_checks.py): an added column keeps its ``NUMERIC(p, s)`` typmod and ``NOT
NULL`` (``Relation.typmods`` / ``not_null`` follow every ADD/DROP/RENAME); its fill value is rounded
to the typmod (an overflow refuses the ALTER, also on an empty table, as Postgres evaluates the
default there), and ``ADD COLUMN c ... NOT NULL`` whose fill is NULL on a table holding rows is
refused ("column "c" of relation "t" contains null values").

Renames: RENAME TO rewrites the readers' definitions (``FROM t`` -> ``FROM u AS t``); RENAME
COLUMN rewrites those of readers that are one SELECT over plain tables, joins included
(:func:`_plain_select_aliases`; anything more involved that names the column is refused by
name). Indexes follow the table (their columns are the table's) -- a dropped column in an
index key is refused.

Refused by name: ALTER of an MV, index or source other than RENAME TO, ALTER VIEW, tables fed by a
connector or with subscriptions (for ADD/DROP: their logs hold the old layout), adding a
PRIMARY KEY column or a constraint other than DEFAULT / NOT NULL, dropping a primary-key
column or the last column, ALTER COLUMN ... TYPE, RENAME mixed with other actions, CASCADE.
``ALTER COLUMN c SET NOT NULL`` reads the table once (a NULL refuses it), ``DROP NOT NULL``
changes the catalog only (a primary-key column keeps its NOT NULL).

Callers: :mod:`sql.statements` (dispatch of ``exp.Alter``).
"""

from __future__ import annotations

import copy
import dataclasses

from sqlglot import exp

from relational import value_encoding

from sql.bind.expr import _name, spelled
from sql.bind.select import QueryBinder, relation_name
from sql.build import count_state_tables
from sql.catalog import ROW_ID
from sql.defaults import declare_default, default_values
from sql.errors import BindError, CatalogError, ExecutionError, UnsupportedError, error_at
from sql.plan.rules import optimize
from sql.watermark import refuse_watermarked_columns

REWRITE_BATCH = 4096   # rows re-encoded per store write


def alter_table(db, node, params, variables, stmt):
    """Run one ALTER TABLE statement (module docstring)."""
    from sql.statements import Result

    kind = (node.args.get("kind") or "").upper()
    if kind == "VIEW" and stmt.options.get("materialized"):
        want, what = "mv", "MATERIALIZED VIEW"
    elif kind == "TABLE" and stmt.options.get("source"):   # ALTER SOURCE (sql/parse.py)
        want, what = "source", "SOURCE"
    elif kind in ("TABLE", "INDEX"):
        want, what = kind.lower(), kind
    else:
        raise error_at(UnsupportedError, f"ALTER {kind or spelled(node)} is not supported (ALTER TABLE, ALTER "
                                         "MATERIALIZED VIEW, ALTER INDEX and ALTER SOURCE are)", node)
    if node.args.get("cascade"):
        raise error_at(UnsupportedError, f"ALTER {what} ... CASCADE is not supported", node)
    name = relation_name(node.this)
    rel = db.catalog.get(name)
    if rel is None or rel.kind != want:
        if node.args.get("exists") and rel is None:
            return Result()
        names = {"table": "table", "mv": "materialized view", "index": "index", "source": "source"}
        message = f"{names[want]} {name!r} does not exist" + (f" (it is a {names[rel.kind]})" if rel else "")
        raise error_at(CatalogError, message, node.this)
    actions = node.args.get("actions") or []
    if want != "table":   # RisingWave: a materialized view, index or source is only renamed
        if len(actions) != 1 or not isinstance(actions[0], exp.AlterRename) or node.args.get("options"):
            raise error_at(UnsupportedError, f"ALTER {what} supports RENAME TO only (create a new one to change "
                                             "its columns)", node)
        return _rename_table(db, rel, relation_name(actions[0].this), actions[0])
    renames = [a for a in actions if isinstance(a, (exp.AlterRename, exp.RenameColumn))]
    if renames and len(actions) > 1:
        raise error_at(UnsupportedError, "RENAME cannot be combined with other ALTER TABLE actions", node)
    if not actions:
        raise error_at(UnsupportedError, f"{spelled(node)} is not supported", node)
    refuse_watermarked_columns(rel, node, actions)   # sql/watermark.py
    action = actions[0]
    if isinstance(action, exp.AlterRename):
        options = node.args.get("options") or []
        if options and isinstance(options[0], exp.ToTableProperty):   # RENAME a TO b: a column
            return _rename_column(db, rel, _name(action.this.this), _name(options[0].this.this), action)
        return _rename_table(db, rel, relation_name(action.this), action)
    if isinstance(action, exp.RenameColumn):
        if action.args.get("exists"):
            raise error_at(UnsupportedError, "RENAME COLUMN IF EXISTS is not supported", action)
        return _rename_column(db, rel, _name(action.this), _name(action.args["to"]), action)
    return _change_columns(db, rel, actions)


# --- dependents -----------------------------------------------------------------------------------

def reading_catalog(catalog, reader):
    """The catalog MV ``reader``'s definition binds against: ``catalog``, but each table of
    ``reader.scan_layouts`` seen with the columns the MV was planned with (module docstring,
    "frozen layouts"): a copy of its relation whose columns are the layout's (a dropped one
    named ``_dropped<i>``, never referenced) and whose ``frozen_sources`` maps each to its
    column in the table (None: dropped) for :func:`frozen_head`."""
    if not reader.scan_layouts:
        return catalog
    view = copy.copy(catalog)
    view.relations = dict(catalog.relations)
    for table, layout in reader.scan_layouts.items():
        real = catalog.get(table)
        if real is None:
            continue
        names = [n for n, _ in real.columns]
        frozen = copy.copy(real)
        columns = tuple((n if n is not None else f"_dropped{i}", t) for i, (n, t) in enumerate(layout))
        shown = [n for n, _ in columns]
        frozen.desc = dataclasses.replace(real.desc, columns=columns,
                                          pk_indices=tuple(shown.index(names[p]) for p in real.desc.pk_indices))
        frozen.n_visible = len(layout) - (1 if real.row_id else 0)
        frozen.defaults = frozen.typmods = frozen.not_null = None
        frozen.frozen_sources = [names.index(n) if n in names else None for n, _ in layout]
        frozen.frozen_real = real
        view.relations[table] = frozen
    return view


def thaw(plan):
    """``plan`` (bound against :func:`reading_catalog`) with each Scan of a frozen relation
    replaced by a Project of the table as it is to that layout (NULL for a dropped column): the
    Project's output is exactly the frozen Scan's (names, types, key), so the nodes above, and
    both runtimes, see what they saw before the ALTER."""
    from stream.expr import Col, Lit
    from sql.plan import nodes as P
    from sql.plan.rules import _with_inputs

    if isinstance(plan, P.Scan):
        rel = plan.relation
        if getattr(rel, "frozen_sources", None) is None:
            return plan
        scan = P.Scan(rel.frozen_real, plan.alias)
        exprs = [Col(src, scan.types[src], scan.names[src]) if src is not None else Lit(None, dtype)
                 for src, (_, dtype) in zip(rel.frozen_sources, rel.columns)]
        out = P.Project(scan, exprs, [n for n, _ in rel.columns])
        out.n_visible = plan.n_visible
        assert out.types == plan.types and out.stream_key == plan.stream_key, (out.types, plan.types)
        return out
    inputs = [thaw(i) for i in plan.inputs]
    if any(a is not b for a, b in zip(inputs, plan.inputs)):
        return _with_inputs(plan, inputs)
    return plan


def plan_definition(catalog, definition: str, reader=None):
    """The stream plan of an MV definition; ``reader``: the MV, whose frozen layouts apply."""
    from sql.parse import parse_script

    [parsed] = parse_script(definition)
    old = reader is not None and reader.kind == "mv" and not reader.pushed_filters   # its join state as planned
    if reader is not None:
        catalog = reading_catalog(catalog, reader)
    return optimize(thaw(QueryBinder(catalog, (), batch=False).bind_query(parsed.ast)), pushdown=not old)


_plan = plan_definition


def _signature(plan) -> tuple:
    """What an MV's stored state depends on: its output types and key, and for each stateful
    operator (in allocation order) its kind, its parameters (column positions, aggregate calls,
    conditions -- not the names columns go by, which a RENAME COLUMN changes), its input layouts
    and its own."""
    parts = [tuple(plan.types), tuple(plan.stream_key)]
    for n, k in count_state_tables(plan):
        parts.append((type(n).__name__, k, _fingerprint(n, top=True), tuple(n.types), tuple(n.stream_key),
                      tuple((tuple(i.types), tuple(i.stream_key)) for i in n.inputs)))
    return tuple(parts)


_NOT_PARAMETERS = {"input", "inputs", "left", "right", "relation", "alias", "names", "node"}


def _fingerprint(value, top: bool = False):
    """A comparable, name-free form of a plan node's parameters (:func:`_signature`)."""
    from stream.expr_base import Col, Expr
    from sql.plan import nodes as P

    if isinstance(value, Col):
        return ("col", value.index, value.data_type)
    if isinstance(value, P.Node) and not top:
        return ("node",)
    if isinstance(value, (list, tuple)):
        return tuple(_fingerprint(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _fingerprint(v)) for k, v in value.items()))
    if isinstance(value, (str, int, float, bool, type(None))) or not hasattr(value, "__dict__"):
        return value
    fields = {k: v for k, v in vars(value).items()
              if k not in _NOT_PARAMETERS and "name" not in k and k != "text" and not k.startswith("_scalar")}
    if isinstance(value, Expr):
        fields.pop("name", None)
    return (type(value).__name__,) + tuple((k, _fingerprint(v)) for k, v in sorted(fields.items()))


def _replan_readers(db, new, table: str, rewrite, reason: str, freeze=None) -> tuple:
    """``(changed relations, plans)``: every MV and index of ``new`` reading ``table``, with its
    definition passed through ``rewrite(ast, rel) -> ast | None`` (None: as it is), planned
    against ``new`` (:func:`reading_catalog`). An MV must keep its output and the layout of its
    state: when it would not and ``freeze(reader) -> layout`` is given (ADD/DROP COLUMN), it is
    planned again reading ``table`` as ``layout`` (its columns before the ALTER); a definition
    that no longer binds (it reads a dropped column) or a state that still changes is a
    ``BindError`` naming the MV and ``reason``."""
    from sql.parse import parse_script

    changed, plans = [], {}
    for reader in [r for r in new.ordered() if table in r.depends_on]:
        if freeze is not None and reader.scan_layouts and table in reader.scan_layouts:
            reader.scan_layouts = dict(reader.scan_layouts, **{table: freeze(reader)})   # dropped: no name
        definition = reader.definition
        [parsed] = parse_script(definition)
        ast = rewrite(parsed.ast.copy(), reader) if rewrite is not None else None   # (parses are cached)
        if ast is not None:
            definition = ast.sql(dialect="postgres")
        try:
            plan = _plan(new, definition, reader)
        except (BindError, CatalogError, UnsupportedError) as exc:
            raise BindError(f"cannot alter table {table!r}: {_what(reader)} {reader.name!r} reads it and {reason} "
                            f"({str(exc).rsplit(' at line ', 1)[0]})") from None
        if reader.kind != "index":
            old = _signature(db.plan_of(db.catalog.get(reader.name) or reader))
            if _signature(plan) != old and freeze is not None:
                reader.scan_layouts = dict(reader.scan_layouts or {}, **{table: freeze(reader)})
                plan = _plan(new, definition, reader)
            if _signature(plan) != old:
                raise BindError(f"cannot alter table {table!r}: materialized view {reader.name!r} reads it and its "
                                f"columns or state would change ({reason})")
        if definition != reader.definition:
            reader.definition = definition
        changed.append(reader)
        plans[reader.table_id] = plan
    return changed, plans


def _what(rel) -> str:
    return "index" if rel.kind == "index" else "materialized view"


def _ctes(ast) -> set:
    return {_name(c.args["alias"].this) for c in ast.find_all(exp.CTE) if c.args.get("alias") is not None}


def _tables_named(ast, name: str) -> list:
    ctes = _ctes(ast)
    return [t for t in ast.find_all(exp.Table) if isinstance(t.this, exp.Identifier) and _name(t.this) == name
            and name not in ctes and t.args.get("catalog") is None]


# --- RENAME ----------------------------------------------------------------------------------------

def _rename_table(db, rel, to: str, node):
    """RENAME TO of a table, MV, index or source: its record, its readers' definitions and
    depends_on, frozen layouts and subscriptions follow."""
    from sql.statements import Result

    if db.catalog.get(to) is not None:
        raise error_at(CatalogError, f"relation {to!r} already exists", node)
    if to == rel.name:
        return Result()
    old = rel.name
    new = db.catalog.copy()
    moved = new.relations.pop(old)
    moved.desc = dataclasses.replace(moved.desc, name=to)
    new.relations[to] = moved
    for other in new.relations.values():
        other.depends_on = [to if d == old else d for d in other.depends_on]
        if other.scan_layouts and old in other.scan_layouts:
            other.scan_layouts = {to if t == old else t: cols for t, cols in other.scan_layouts.items()}
    subs = new.subscriptions_of(old)
    for sub in subs:
        sub.relation = to

    def rewrite(ast, reader):
        for t in _tables_named(ast, old):
            t.set("this", exp.to_identifier(to, quoted=to != to.lower() or not to.isidentifier()))
            t.set("db", None)
            if t.args.get("alias") is None:   # qualified column references still name the old name
                t.set("alias", exp.TableAlias(this=exp.to_identifier(old, quoted=True)))
        return ast

    changed, plans = _replan_readers(db, new, to, rewrite, "its definition no longer binds")
    db.apply_ddl(new, changed=[moved] + changed + subs, plans=plans)
    return Result()


def _plain_select_aliases(ast, table: str) -> list | None:
    """The aliases ``table`` has in ``ast`` when ``ast`` is one SELECT over plain tables (no
    subquery, CTE, set operation or table function in FROM/JOIN), else None: then a column
    reference qualified by one of them, or an unqualified one while ``table`` is read once
    (the definition bound, so it was not ambiguous), names ``table``'s column."""
    if not isinstance(ast, exp.Select) or len(list(ast.find_all(exp.Select))) != 1 or \
            list(ast.find_all(exp.Subquery)):
        return None
    sources = [ast.args.get("from_") or ast.args.get("from")] + list(ast.args.get("joins") or [])
    if any(s is None or not isinstance(s.this, exp.Table) for s in sources):
        return None
    return [s.this.alias_or_name for s in sources if _name(s.this.this) == table]


def _rename_column(db, rel, old: str, to: str, node):
    from sql.statements import Result

    names = [n for n, _ in rel.visible_columns]
    if old not in names:
        raise error_at(BindError, f"column {old!r} of relation {rel.name!r} does not exist", node)
    if to in names or to == ROW_ID and rel.row_id:
        raise error_at(CatalogError, f"column {to!r} of relation {rel.name!r} already exists", node)
    new = db.catalog.copy()
    moved = new.get(rel.name)
    i = names.index(old)

    def renamed(r):
        cols = list(r.desc.columns)
        cols[i] = (to, cols[i][1])
        r.desc = dataclasses.replace(r.desc, columns=tuple(cols))

    renamed(moved)
    for other in new.relations.values():   # frozen layouts name the table's columns as they are now
        if other.scan_layouts and rel.name in other.scan_layouts:
            other.scan_layouts = dict(other.scan_layouts, **{
                rel.name: [(to if n == old else n, t) for n, t in other.scan_layouts[rel.name]]})
    indexes = new.indexes_of(rel.name)
    for index in indexes:   # an index's columns are its table's, by position
        renamed(index)

    def rewrite(ast, reader):
        if reader.kind == "index":
            return None
        refs = [c for c in ast.find_all(exp.Column) if _name(c.this) == old]
        aliases = _plain_select_aliases(ast, rel.name) if refs else None
        if not aliases:
            return None   # planned as it is: if it names the column, it no longer binds (refused)
        named = {e.alias for e in ast.expressions if isinstance(e, exp.Alias)}
        if old in named or to in named:
            return None   # ORDER BY / GROUP BY may mean the output column: not rewritten (refused)
        shown = any(isinstance(e, exp.Column) and _name(e.this) == old for e in ast.expressions)
        for c in refs:
            if not c.table and shown and c.find_ancestor(exp.Order) is not None:
                continue   # ORDER BY a: the output column a (which keeps its name)
            if c.table:
                if c.table not in aliases:
                    continue
                qualifier = c.args["table"].copy()
            elif len(aliases) == 1:
                qualifier = exp.to_identifier(aliases[0], quoted=True)
            else:
                continue
            ref = exp.Column(this=exp.to_identifier(to, quoted=True), table=qualifier)
            if c.parent is ast and c.arg_key == "expressions":   # SELECT a: the MV's column stays a
                c.replace(exp.alias_(ref, exp.to_identifier(old, quoted=True)))
            else:
                c.replace(ref)
        return ast

    changed, plans = _replan_readers(db, new, rel.name, rewrite, f"reads column {old!r}")
    db.apply_ddl(new, changed=[moved] + changed, plans=plans)
    return Result()


# --- ADD / DROP COLUMN, SET / DROP DEFAULT --------------------------------------------------------

@dataclasses.dataclass
class _Column:
    name: str
    dtype: object
    default: str | None     # the column's DEFAULT from now on
    source: int | None      # its index among the old visible columns; None: added
    fill: str | None = None  # an added column: the default its existing rows take
    typmod: tuple | None = None   # NUMERIC(p, s): (p, s) (sql/column_checks.py)
    not_null: bool = False        # declared NOT NULL


def _change_columns(db, rel, actions):
    from sql.statements import Result, column_definition, column_modifiers

    cols = [_Column(n, t, rel.default_of(i), i, None, rel.typmod_of(i), bool(rel.not_null and rel.not_null[i]))
            for i, (n, t) in enumerate(rel.visible_columns)]
    layout = False   # ADD / DROP: the rows are rewritten
    for action in actions:
        if isinstance(action, exp.ColumnDef):
            cname = _name(action.this)
            if any(c.name == cname for c in cols) or (cname == ROW_ID and rel.row_id):
                if action.args.get("exists"):   # ADD COLUMN IF NOT EXISTS: nothing to do
                    continue
                raise error_at(CatalogError, f"column {cname!r} of relation {rel.name!r} already exists", action)
            for c in action.constraints:
                if isinstance(c.kind, exp.PrimaryKeyColumnConstraint):
                    raise error_at(UnsupportedError, "ALTER TABLE ... ADD COLUMN cannot add a primary key column "
                                                     "(the primary key is fixed: create a new table)", c)
            dtype, default, _ = column_definition(action)
            typmod, required = column_modifiers(action)
            value = None
            if default is not None:   # Postgres evaluates it once here, for the rows the table holds
                [value] = default_values(default, dtype, 1, cname)
                if typmod is not None and value is not None:   # and rounds it to the typmod (or refuses it)
                    _fill_values([value], typmod)
            if required and value is None and _has_rows(db, rel):
                raise error_at(ExecutionError, f'column "{cname}" of relation "{rel.name}" contains null values',
                               action)
            cols.append(_Column(cname, dtype, default, None, default, typmod, required))
            layout = True
        elif isinstance(action, exp.Drop) and (action.args.get("kind") or "").upper() == "COLUMN":
            if action.args.get("cascade"):
                raise error_at(UnsupportedError, "DROP COLUMN ... CASCADE is not supported", action)
            for target in action.args.get("tables") or [action.this]:
                cname = _name(target.this if isinstance(target, exp.Column) else target)
                at = next((k for k, c in enumerate(cols) if c.name == cname), None)
                if at is None:
                    if action.args.get("exists"):
                        continue
                    raise error_at(BindError, f"column {cname!r} of relation {rel.name!r} does not exist", target)
                src = cols[at].source
                if src is not None and rel.user_pk and src in rel.pk_indices:
                    raise error_at(UnsupportedError, f"cannot drop column {cname!r}: it is in the primary key of "
                                                     f"{rel.name!r}", target)
                for index in db.catalog.indexes_of(rel.name):
                    if src is not None and src in list(index.pk_indices)[:index.index_columns]:
                        raise error_at(BindError, f"cannot drop column {cname!r}: index {index.name!r} is keyed "
                                                  f"by it (DROP INDEX {index.name} first)", target)
                cols.pop(at)
                layout = True
        elif isinstance(action, exp.AlterColumn):
            cname = _name(action.this)
            col = next((c for c in cols if c.name == cname), None)
            if col is None:
                raise error_at(BindError, f"column {cname!r} of relation {rel.name!r} does not exist", action)
            if action.args.get("default") is not None:
                col.default = declare_default(action.args["default"], col.dtype, cname)
            elif action.args.get("drop") and not action.args.get("allow_null") and _drops_default(action):
                col.default = None
            elif action.args.get("allow_null") is False and not action.args.get("drop"):   # SET NOT NULL
                if not col.not_null and col.source is not None and _column_has_null(db, rel, col.source):
                    raise error_at(ExecutionError, f'column "{cname}" of relation "{rel.name}" contains null '
                                                   'values', action)
                col.not_null = True
            elif action.args.get("drop") and action.args.get("allow_null"):   # DROP NOT NULL
                if col.source is not None and rel.user_pk and col.source in rel.pk_indices:
                    raise error_at(ExecutionError, f'column "{cname}" is in a primary key', action)
                col.not_null = False
            else:
                raise error_at(UnsupportedError, f"ALTER TABLE ... {spelled(action)} is not supported (SET DEFAULT, "
                                                 "DROP DEFAULT, SET NOT NULL and DROP NOT NULL are)", action)
        else:
            raise error_at(UnsupportedError, f"ALTER TABLE ... {spelled(action)} is not supported", action)
    if not cols:
        raise error_at(UnsupportedError, f"cannot drop every column of {rel.name!r} (a table keeps at least one)",
                       actions[0])
    if layout:
        if rel.connector is not None:
            raise error_at(UnsupportedError, f"ALTER TABLE ... ADD/DROP COLUMN of {rel.name!r} is not supported: a "
                                             "connector feeds it", actions[0])
        subs = db.catalog.subscriptions_of(rel.name)
        if subs:
            raise error_at(UnsupportedError, f"ALTER TABLE ... ADD/DROP COLUMN of {rel.name!r} is not supported: "
                                             f"subscription {subs[0].name!r} logs its rows in their present layout "
                                             f"(DROP SUBSCRIPTION first)", actions[0])
    return _apply_columns(db, rel, cols, layout, Result, actions)


def _drops_default(action) -> bool:
    # sqlglot: ALTER COLUMN c DROP DEFAULT has drop=True and no other argument set
    return not any(action.args.get(k) for k in ("dtype", "default", "comment", "allow_null", "visible"))


def _apply_columns(db, rel, cols, layout: bool, Result, actions):
    new = db.catalog.copy()
    moved = new.get(rel.name)
    old_columns = list(rel.desc.columns)
    old_n = rel.n_visible
    # old column index -> new index (visible then the hidden _row_id)
    position = {c.source: k for k, c in enumerate(cols) if c.source is not None}
    if rel.row_id:
        position[old_n] = len(cols)
    columns = tuple((c.name, c.dtype) for c in cols) + (tuple(old_columns[old_n:]) if rel.row_id else ())
    moved.desc = dataclasses.replace(rel.desc, columns=columns,
                                     pk_indices=tuple(position[i] for i in rel.desc.pk_indices))
    moved.n_visible = len(cols)
    defaults = [c.default for c in cols]
    moved.defaults = defaults if any(d is not None for d in defaults) else None
    typmods, not_null = [c.typmod for c in cols], [c.not_null for c in cols]
    moved.typmods = typmods if any(typmods) else None
    moved.not_null = not_null if any(not_null) else None
    indexes = new.indexes_of(rel.name)
    for index in indexes:
        index.desc = dataclasses.replace(index.desc, columns=columns,
                                         pk_indices=tuple(position[i] for i in index.desc.pk_indices))
        index.n_visible = len(cols)
    if not layout:
        db.apply_ddl(new, changed=[moved])
        return Result()
    old_names = [n for n, _ in rel.visible_columns]

    def expand_stars(ast, reader):
        """``*`` / ``t.*`` over the table -> its columns before the ALTER (RisingWave: an MV
        does not pick a new column up); None when there is none."""
        if reader.kind == "index":
            return None
        found = False
        for select in list(ast.find_all(exp.Select)):
            sources = [select.args.get("from_") or select.args.get("from")] + list(select.args.get("joins") or [])
            tables = [s.this for s in sources if s is not None and isinstance(s.this, exp.Table)]
            aliases = {t.alias_or_name for t in tables if _name(t.this) == rel.name}
            if not aliases:
                continue
            items = []
            for item in select.expressions:
                star_of = (None if isinstance(item, exp.Star) else
                           item.table if isinstance(item, exp.Column) and isinstance(item.this, exp.Star) else False)
                if star_of is None and len(sources) == 1 and len(aliases) == 1:
                    star_of = next(iter(aliases))
                if star_of and star_of in aliases:
                    found = True
                    qualifier = exp.to_identifier(star_of, quoted=True)
                    items += [exp.Column(this=exp.to_identifier(n, quoted=True), table=qualifier.copy())
                              for n in old_names]
                else:
                    items.append(item)
            select.set("expressions", items)
        return ast if found else None

    kept = {c.source for c in cols if c.source is not None}
    if rel.row_id:
        kept.add(old_n)

    def freeze(reader):
        """The layout ``reader`` reads the table as: the one it had (a column dropped now
        becomes None), else the table's columns before this ALTER."""
        names = [n for n, _ in old_columns]
        layout = (reader.scan_layouts or {}).get(rel.name) or list(old_columns)
        return [(n if n is not None and names.index(n) in kept else None, t) for n, t in layout]

    what = "a column it reads is dropped" if any(not isinstance(a, exp.ColumnDef) for a in actions) else \
        "its state keeps the table's rows"
    changed, plans = _replan_readers(db, new, rel.name, expand_stars, what, freeze)
    new_types = [t for _, t in columns]
    old_types = [t for _, t in old_columns]
    fills = [(k, c) for k, c in enumerate(cols) if c.source is None]
    sources = [c.source for c in cols] + ([old_n] if rel.row_id else [])

    def rewrite(store, epoch):
        moved.layout_epoch = epoch
        for index in indexes:
            index.layout_epoch = epoch
        committed = store.max_committed_epoch
        for table_id in [rel.table_id] + [i.table_id for i in indexes]:
            _rewrite_rows(store, table_id, committed, epoch, old_types, new_types, sources, fills)

    db.apply_ddl(new, changed=[moved] + indexes + [c for c in changed if c.kind != "index"], plans=plans,
                 rewrite=rewrite)
    return Result()


def _fill_values(values: list, typmod) -> list:
    """An added column's fill values rounded to its ``NUMERIC(p, s)`` (ExecutionError when one
    does not fit: Postgres refuses the ALTER)."""
    if typmod is None:
        return values
    from relational.arrow import to_arrow, to_pylist
    from relational.types import DataType
    from sql.column_checks import round_column
    if len(typmod) == 1:   # VARCHAR(n) (sql/column_checks.py)
        return to_pylist(round_column(to_arrow(values, DataType.VARCHAR), typmod), DataType.VARCHAR)
    return to_pylist(round_column(to_arrow(values, DataType.DECIMAL), typmod), DataType.DECIMAL)


def _column_has_null(db, rel, i: int) -> bool:
    """Whether visible column ``i`` of table ``rel`` holds a NULL in a committed row (after a
    flush): ALTER COLUMN ... SET NOT NULL reads the table once, as Postgres does."""
    db.flush()
    committed = db.store.max_committed_epoch
    types = [t for _, t in rel.desc.columns]
    batch = []
    for _, value in db.store.iter(rel.table_id, committed):
        batch.append(value)
        if len(batch) >= REWRITE_BATCH:
            if any(row[i] is None for row in value_encoding.decode_rows(batch, types)):
                return True
            batch.clear()
    return bool(batch) and any(row[i] is None for row in value_encoding.decode_rows(batch, types))


def _has_rows(db, rel) -> bool:
    """Whether table ``rel`` holds a row (committed, after a flush of pending writes)."""
    db.flush()
    committed = db.store.max_committed_epoch
    return next(iter(db.store.iter(rel.table_id, committed)), None) is not None


def _rewrite_rows(store, table_id, committed, epoch, old_types, new_types, sources, fills) -> None:
    """Re-encode every row of ``table_id`` (module docstring, "Row layout")."""
    batch_keys, batch_values = [], []

    def flush():
        rows = value_encoding.decode_rows(batch_values, old_types)
        filled = {k: _fill_values(default_values(c.fill, c.dtype, len(rows), c.name), c.typmod) for k, c in fills}
        out = []
        for r, row in enumerate(rows):
            out.append(tuple(row[s] if s is not None else filled[k][r] for k, s in enumerate(sources)))
        store.ingest_batch(table_id, list(zip(batch_keys, value_encoding.encode_rows(out, new_types))), epoch)
        batch_keys.clear()
        batch_values.clear()

    for key, value in store.iter(table_id, committed):
        batch_keys.append(key)
        batch_values.append(value)
        if len(batch_keys) >= REWRITE_BATCH:
            flush()
    if batch_keys:
        flush()
