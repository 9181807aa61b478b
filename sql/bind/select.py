"""Query binding: a sqlglot SELECT / UNION ALL -> a logical plan (:mod:`sql.plan.nodes`).

Job: FROM (tables, MVs, CTEs, subqueries, comma and explicit equi-joins -- keys may be
expressions of one side or of different numeric types, computed below the join --, ``USING``
with Postgres's merged columns, ``NATURAL``), WHERE, GROUP BY with aggregates (+ FILTER), HAVING, the select
list (``*``, ``t.*``, ``* EXCEPT (cols)``, aliases), UNION [ALL] [CORRESPONDING]; ORDER BY /
LIMIT / OFFSET, DISTINCT ON and ROW_NUMBER() through :mod:`sql.bind.order`, EXCEPT / INTERSECT
through :mod:`sql.bind.set_ops`; ``unnest(...)`` in FROM (an implicit LATERAL over the FROM items
before it, ``[LEFT] JOIN LATERAL``, ``WITH ORDINALITY``) and in the select list (one ``Unnest``
node zipping every call). The plan's first ``n_visible`` columns are the query's output, named by
``plan.names``.

Invariants: every name is resolved here (BindError otherwise); constructs outside the
supported subset raise UnsupportedError naming the construct and position (so does a schema
other than ``public``: :func:`relation_name`); a join in a
materialized view needs at least one equality between its sides unless one side has at most one
row (then a constant key: batch joins without one are nested loops), and a temporal join
(``FOR SYSTEM_TIME AS OF PROCTIME()``) is planned by :mod:`sql.bind.temporal`; an array is never a grouping, partitioning or join key (refused by name).
Subqueries in expressions and WHERE: :mod:`sql.bind.subquery`.

Callers: :mod:`sql.statements` (CREATE MATERIALIZED VIEW, SELECT, INSERT ... SELECT, EXPLAIN).
"""

from __future__ import annotations

from sqlglot import exp

from relational.types import DataType, TypeKind
from stream import expr as E
from stream.errors import ExpressionError
from stream.expr import raising_errors
from stream.expr_jsonb_cmp import equality_key
from stream.expr_time import add_interval
from stream.expr_variance import ExactDecimal, VarianceFinal
from stream.executors.agg_call import AggCall
from stream.errors import ExecutorError
from stream.schema import Schema

from sql import types as T
from sql.bind import jsonb_rows, jsonb_select, named_windows, regexp_rows, time_travel, window_filter
from sql.bind import order as O
from sql.bind.expr import ExprBinder, Scope, ScopeCol, _name, near_names, refused_name, spelled
from sql.bind.expr import conjuncts as _conjuncts   # re-exported: sql.statements imports it from here
from sql.bind.frozen import kept, pg_text
from sql.bind.set_ops import bind_except_intersect, corresponding_sides
from sql.bind.subquery import Subqueries, at_most_one_row, special_form, where_conjunct
from sql.bind.temporal import check_temporal_scans, is_proctime, temporal_join
from sql.batch.execute import from_arrow_values
from sql.errors import BindError, ExecutionError, SqlSyntaxError, UnsupportedError, error_at, execution_error
from sql.plan import nodes as P
from sql.plan import time_window

_AGGS = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
         exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or"}
_BATCH_AGGS = {exp.GroupConcat: "string_agg", exp.ArrayAgg: "array_agg", exp.Stddev: "stddev_samp",
               exp.StddevSamp: "stddev_samp",
               exp.StddevPop: "stddev_pop", exp.Variance: "var_samp", exp.VariancePop: "var_pop",
               exp.Mode: "mode", exp.PercentileCont: "percentile_cont", exp.PercentileDisc: "percentile_disc"}
_ORDERED_SET = ("mode", "percentile_cont", "percentile_disc")   # WITHIN GROUP (ORDER BY x)
_VARIANCE = ("stddev_samp", "stddev_pop", "var_samp", "var_pop")   # in an MV: sum, sum of squares, count
_AGG_NAMES = ("count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg", "array_agg",
              "stddev",
              "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop")


def _is_series(n) -> bool:
    return isinstance(n, exp.ExplodingGenerateSeries) or \
        (isinstance(n, exp.Anonymous) and n.name.lower() == "generate_series")


def _srf_from(node):
    """``SELECT generate_series(...) [AS x], <constants>`` without FROM as Postgres runs it (one
    row per value): the same select reading ``FROM generate_series(...)``. A set-returning
    function anywhere else in a select list is refused by name (ExprBinder)."""
    if (node.args.get("from_") or node.args.get("from")) is not None:
        return node
    items = node.expressions
    found = [i for i, e in enumerate(items) if _is_series(e.this if isinstance(e, exp.Alias) else e)]
    if len(found) != 1:
        return node
    node = node.copy()
    i = found[0]
    item = node.expressions[i]
    call = item.this if isinstance(item, exp.Alias) else item
    name = _name(item.args["alias"]) if isinstance(item, exp.Alias) else "generate_series"
    column = exp.Column(this=exp.Identifier(this="generate_series", quoted=True),
                        table=exp.Identifier(this="*srf*", quoted=True))
    node.expressions[i] = exp.Alias(this=column, alias=exp.Identifier(this=name, quoted=True))
    node.set("from_", exp.From(this=exp.Table(this=call.copy(), alias=exp.TableAlias(
        this=exp.Identifier(this="*srf*", quoted=True),
        columns=[exp.Identifier(this="generate_series", quoted=True)]))))
    return node


MAX_SERIES = 10_000_000   # rows generate_series may make (it is materialized)
_VOLATILE_NAMES = ("now", "random", "statement_timestamp", "transaction_timestamp", "clock_timestamp")


def _refuse_volatile(node, temporal_ok=frozenset()) -> None:
    """UnsupportedError for now() / current_timestamp / current_date / random() in a
    materialized view: its rows would depend on when each was computed. As in RisingWave, now()
    is allowed in a temporal filter (``temporal_ok``: the ids of the now() nodes the binder took
    as one, sql/bind/subquery.py), which a DynamicFilter against the Now clock maintains."""
    for n in node.walk():
        if id(n) in temporal_ok:
            continue
        if isinstance(n, (exp.Rand, exp.CurrentTimestamp, exp.CurrentDate, exp.Localtimestamp, exp.CurrentTime)) \
                or (isinstance(n, exp.Anonymous) and n.name.lower() in _VOLATILE_NAMES) \
                or (isinstance(n, exp.Anonymous) and n.name.lower() == "age" and len(n.expressions) == 1):
            name = spelled(n)
            name = name if name.startswith(("current", "local")) else name + "()"
            hint = "; now() may appear only in a temporal filter: WHERE col > now() - INTERVAL '...'" \
                if name in ("now()", "current_timestamp") else ""
            raise error_at(UnsupportedError, f"{name} is not allowed in a materialized view (its value "
                                             f"depends on when a row is computed; a batch SELECT may use it{hint})", n)


class QueryBinder:
    """Binds the queries of one statement. ``batch``: ORDER BY/LIMIT allowed (a SELECT)."""

    def __init__(self, catalog, params=(), batch: bool = False):
        self.catalog, self.params, self.batch = catalog, list(params), batch
        self.ctes: dict = {}
        self.depends_on: list = []
        self.prebound: dict = {}   # id(subquery node) -> its plan, bound once (sql.bind.subquery)
        self.temporal_ok: set = set()   # ids of now() nodes bound as temporal filters (sql.bind.subquery)

    def bind_query(self, node, top: bool = True) -> P.Node:
        if isinstance(node, exp.Subquery):
            return self.bind_query(node.this, top)
        with_ = node.args.get("with_") or node.args.get("with")
        saved = dict(self.ctes)
        if with_ is not None:
            if with_.args.get("recursive"):
                raise error_at(UnsupportedError, "WITH RECURSIVE is not supported", node)
            for cte in with_.expressions:   # a CTE sees the CTEs before it, not itself (not recursive)
                alias = cte.args["alias"]
                cols = [_name(c) for c in alias.columns] if alias.columns else None
                self.ctes[_name(alias.this)] = (cte.this, dict(self.ctes), cols)
        try:
            if isinstance(node, exp.Union):
                plan = self._set_order_limit(self._union(node), node, top)
            elif isinstance(node, (exp.Except, exp.Intersect)):
                plan = self._set_order_limit(bind_except_intersect(self, node), node, top)
            elif isinstance(node, exp.Select):
                plan = self._select(node, top)
            elif isinstance(node, exp.Values):
                plan = self._set_order_limit(self.values(node), node, top)
            else:
                raise error_at(UnsupportedError, f"query {spelled(node)} is not supported", node)
            if top:
                _refuse_array_keys(plan, node, self.batch)
            if top and not self.batch:
                plan = O.stream_row_numbers(plan)
                O.check_streamable(plan)
                _refuse_volatile(node, self.temporal_ok)
                check_temporal_scans(plan)
            return plan
        finally:
            self.ctes = saved

    # --- UNION ALL ------------------------------------------------------------------------------

    def _union(self, node) -> P.Node:
        distinct = bool(node.args.get("distinct"))
        branches = []

        def flatten(n, root=False):   # a chain of the same kind of UNION is one n-ary union
            if root or isinstance(n, exp.Union) and bool(n.args.get("distinct")) == distinct and \
                    not any(n.args.get(k) for k in ("with_", "with", "order", "limit", "offset", "by_name")):
                flatten(n.this)
                flatten(n.expression)
            else:
                branches.append(self.bind_query(n, top=False))
        sides = corresponding_sides(self, node)   # CORRESPONDING: the two sides, matched by name
        if sides is not None:
            branches.extend(sides)
        else:
            flatten(node, root=True)
        union = self.union_all(branches, node, "UNION")
        return distinct_all(union) if distinct else union

    def union_all(self, branches, node, what: str) -> P.Union:
        """UNION ALL of bound ``branches``: each cast to the common column types, with a branch
        tag column (``width``) and every branch's key slots after the visible columns."""
        width = branches[0].n_visible
        for b in branches[1:]:
            if b.n_visible != width:
                raise error_at(BindError, f"each {what} query must have the same number of columns", node)
        def null_column(b, i):   # an untyped NULL takes the other branches' type (Postgres)
            return isinstance(b, P.Project) and isinstance(b.exprs[i], E.Lit) and b.exprs[i].value is None

        types = []
        for i in range(width):
            typed = [b for b in branches if not null_column(b, i)] or branches[:1]
            t = typed[0].types[i]
            for b in typed[1:]:
                sup = T.common_supertype(t, b.types[i])
                if sup is None:
                    raise error_at(BindError, f"{what} types {t.sql_name()} and {b.types[i].sql_name()} cannot be "
                                              "matched", node)
                t = sup
            types.append(t)
        slots = [(bi, k) for bi, b in enumerate(branches) for k in b.stream_key]
        projected = []
        for bi, b in enumerate(branches):
            exprs = [E.Col(i, b.types[i]) if b.types[i] == types[i] else
                     E.Lit(None, types[i]) if null_column(b, i) else E.Cast(E.Col(i, b.types[i]), types[i])
                     for i in range(width)]
            exprs.append(E.Lit(bi, DataType.INT))
            for sj, k in slots:
                kt = branches[sj].types[k]
                exprs.append(E.Col(k, kt) if sj == bi else E.Lit(None, kt))
            names = branches[0].names[:width] + ["_union_tag"] + [f"_union_k{i}" for i in range(len(slots))]
            projected.append(P.Project(b, exprs, names))
        return P.Union(projected, list(range(width, width + 1 + len(slots))), width)

    def _set_order_limit(self, plan, node, top: bool) -> P.Node:
        """ORDER BY / LIMIT / OFFSET of a set operation: keys name its output columns (by
        name or position, as in Postgres)."""
        order, limit, offset = node.args.get("order"), node.args.get("limit"), node.args.get("offset")
        if order is None and limit is None and offset is None:
            return plan
        names = list(plan.names[:plan.n_visible])
        sort_keys = []
        for o in (order.expressions if order is not None else []):
            target = o.this
            if O.position_literal(target) is None and not (
                    isinstance(target, exp.Column) and target.args.get("table") is None
                    and _name(target.this) in names):
                raise error_at(BindError, "ORDER BY of a set operation must name one of its output columns",
                               target)
            sort_keys.append(O.sort_key(o, O.order_target(target, names, len(names), [], [], None)))
        return O.order_limit(plan, sort_keys, *O.limit_of(node, self._count),
                             self._count(offset.expression if offset is not None else None) or 0,
                             self.batch and top, node)

    # --- FROM -----------------------------------------------------------------------------------

    def values(self, node) -> P.Node:
        """``VALUES (...), (...)`` as a query: its rows, computed now (each item an expression
        without columns: constants, parameters, functions of them), columns named ``column1,
        column2, ...`` and typed as Postgres resolves them -- an untyped literal takes the type
        of the column's first typed item, then the items are unified (UNION's rules)."""
        if not self.batch:
            raise error_at(UnsupportedError, "VALUES is supported in a batch query only; a materialized view reads "
                                             "tables and materialized views (put the rows in a table)", node)
        rows = [t.expressions if isinstance(t, exp.Tuple) else [t] for t in node.expressions]
        width = len(rows[0]) if rows else 0
        for r, t in zip(rows, node.expressions):
            if len(r) != width:
                raise error_at(SqlSyntaxError, "VALUES lists must all be the same length", t)
        binder = ExprBinder(Scope(), self.params, context="a VALUES list")
        columns, types = [], []
        for c in range(width):
            items = [r[c] for r in rows]
            typed = [binder.bind(i) for i in items if not ((lit := binder.literal(i)) is not None and lit[2])]
            bound = [binder.bind_as(i, typed[0].data_type) if typed else binder.bind(i) for i in items]
            bound, dtype = binder.unify(bound, items, "VALUES")
            columns.append(bound)
            types.append(dtype)
        out = []
        with raising_errors():
            for i in range(len(rows)):
                row = []
                for c in range(width):
                    e = columns[c][i]
                    try:
                        row.append(from_arrow_values(e.eval([], 1), types[c])[0])
                    except ExpressionError as exc:
                        raise execution_error(exc, rows[i][c]) from None
                out.append(tuple(row))
        return P.Values(out, [f"column{c + 1}" for c in range(width)], types)

    def generate_series(self, fn) -> P.Node:
        """``generate_series(start, stop [, step])`` as constant rows (its arguments may not read
        columns: LATERAL is not supported): integers (INT, or BIGINT when an argument is),
        NUMERIC, or time stamps stepped by an INTERVAL, as Postgres; a NULL argument gives no
        rows, a zero step is a data error; at most ``MAX_SERIES`` rows."""
        if isinstance(fn, exp.Anonymous):
            nodes = list(fn.expressions)
        else:
            nodes = [a for a in (fn.args.get("start"), fn.args.get("end"), fn.args.get("step")) if a is not None]
        if len(nodes) not in (2, 3):
            raise error_at(BindError, "generate_series takes 2 or 3 arguments", fn)
        if not self.batch:
            raise error_at(UnsupportedError, "generate_series is supported in a batch query only; a materialized "
                                             "view reads tables and materialized views", fn)
        binder = ExprBinder(Scope(), self.params, context="generate_series")
        try:
            first = [binder.bind(n) for n in nodes]
        except BindError as exc:
            if "does not exist" in str(exc):
                raise error_at(UnsupportedError, "generate_series over columns of another FROM item (LATERAL) is "
                                                 "not supported; its arguments must be constants", fn) from None
            raise
        nulls = [isinstance(e, E.Lit) and e.value is None for e in first]
        if any(nulls):   # Postgres: no rows (a NULL argument of a strict function)
            return P.Values([], ["generate_series"], [next((e.data_type for e, z in zip(first, nulls)
                                                                if not z and e.data_type.kind != TypeKind.INTERVAL),
                                                               DataType.INT)])
        kinds = [e.data_type.kind for e in first]
        typed = [e.data_type for e in first[:2] if e.data_type.kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)]
        if typed:   # generate_series(timestamp, timestamp, interval)
            dtype = typed[0]
            bound = [binder.bind_as(nodes[0], dtype), binder.bind_as(nodes[1], dtype)]
            if len(nodes) != 3:
                raise error_at(BindError, "generate_series of time stamps needs an INTERVAL step", fn)
            bound.append(binder.bind_as(nodes[2], DataType.INTERVAL))
            if bound[2].data_type.kind != TypeKind.INTERVAL or bound[1].data_type != dtype:
                raise error_at(BindError, "generate_series(timestamp, timestamp, interval) does not take these "
                                          "arguments", fn)
        else:
            if not all(T.is_numeric(t) and k not in (TypeKind.REAL, TypeKind.DOUBLE)
                       for t, k in zip((e.data_type for e in first), kinds)):
                raise error_at(BindError, "function generate_series(" + ", ".join(e.data_type.sql_name().lower()
                                                                            for e in first) + ") does not exist", fn)
            dtype = DataType.DECIMAL if TypeKind.DECIMAL in kinds else \
                DataType.BIGINT if TypeKind.BIGINT in kinds else DataType.INT
            bound = [binder.coerce(e, dtype, n) for e, n in zip(first, nodes)]
        with raising_errors():
            try:
                values = [from_arrow_values(e.eval([], 1), e.data_type)[0] for e in bound]
            except ExpressionError as exc:
                raise execution_error(exc, fn) from None
        start, stop = values[0], values[1]
        step = values[2] if len(values) == 3 else 1
        out = []
        if None not in (start, stop, step):
            if typed:
                if step.months == 0 and step.days == 0 and step.usecs == 0:
                    raise error_at(ExecutionError, "step size cannot equal zero", fn)
                forward = step.total_usecs() > 0
                at = start   # each value the previous one plus the step (months clamp, as Postgres)
                while (at <= stop if forward else at >= stop):
                    out.append((at,))
                    try:
                        at = add_interval(at, step.months, step.days, step.usecs)
                    except (OverflowError, ValueError, ExpressionError):
                        break
                    if len(out) > MAX_SERIES:
                        break
            else:
                if step == 0:
                    raise error_at(ExecutionError, "step size cannot equal zero", fn)
                count = (stop - start) // step + 1 if (stop - start) * step >= 0 else 0
                if count <= MAX_SERIES:
                    out = [(start + step * i,) for i in range(int(count))]
            if len(out) > MAX_SERIES or (not typed and count > MAX_SERIES):
                raise error_at(ExecutionError, f"generate_series would make more than {MAX_SERIES} rows", fn)
        return P.Values(out, ["generate_series"], [dtype])

    def _from_item(self, node):
        """``(plan, scope)`` of one FROM item."""
        alias = node.args.get("alias")
        alias_name = _name(alias.this) if alias is not None and alias.this is not None else None
        col_aliases = [_name(c) for c in alias.columns] if alias is not None and alias.columns else None
        if isinstance(node, exp.Values):   # (VALUES ...) AS v(a, b)
            plan = self.values(node)
            return plan, self._scope_of(plan, alias_name or "*VALUES*", col_aliases)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.ExplodingGenerateSeries) or \
                isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous) and \
                node.this.name.lower() == "generate_series":
            plan = self.generate_series(node.this)
            if alias_name is not None and not col_aliases:
                col_aliases = [alias_name]   # Postgres: FROM generate_series(...) AS x names the column x
            return plan, self._scope_of(plan, alias_name or "generate_series", col_aliases)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous) and \
                node.this.name.lower() in jsonb_rows.FUNCTIONS:   # jsonb_each(...) and the like: constant rows
            plan = jsonb_rows.bind_rows(node.this, self.params, self.batch)
            if alias_name is not None and not col_aliases and node.this.name.lower() == "jsonb_object_keys":
                col_aliases = [alias_name]   # Postgres: a function returning a bare type names its column by the alias
            return plan, self._scope_of(plan, alias_name or node.this.name.lower(), col_aliases)
        if time_window.is_window_table(node):
            return time_window.bind_window_table(self, node, alias_name, col_aliases)
        if isinstance(node, exp.Table) and isinstance(node.this, (exp.ReadCSV, exp.ReadParquet)):
            from sql.copy import table_function   # read_csv / read_parquet: a file's rows (sql/copy.py)
            plan = table_function(node.this, self.batch)
            return plan, self._scope_of(plan, alias_name or plan.function, col_aliases)
        if isinstance(node, exp.Table):
            name = relation_name(node)
            version = node.args.get("version")
            temporal = None   # in an MV, FOR SYSTEM_TIME AS OF PROCTIME(): a temporal join's right side
            if version is not None and not self.batch and name not in self.ctes and is_proctime(version):
                temporal, version = version, None
            if version is not None and (not self.batch or name in self.ctes):
                raise error_at(UnsupportedError, "time travel (FOR SYSTEM_TIME AS OF) reads a table or materialized "
                                                 "view in a batch query; it is not allowed " +
                               ("on a CTE" if self.batch else "in a materialized view"), version)
            if name in self.ctes:
                body, visible, cte_cols = self.ctes[name]
                saved, self.ctes = self.ctes, visible
                try:
                    plan = self.bind_query(body, top=False)
                finally:
                    self.ctes = saved
                if cte_cols and len(cte_cols) > plan.n_visible:
                    raise error_at(BindError, f"WITH query {name!r} has {plan.n_visible} columns available but "
                                              f"{len(cte_cols)} columns specified", node)
                col_aliases = col_aliases or cte_cols
            else:
                rel = self.catalog.get(name)
                if rel is None:
                    raise error_at(BindError, f"table or materialized view {name!r} does not exist", node)
                if rel.kind == "index":   # read through its table (sql/index.py)
                    raise error_at(BindError, f"{name!r} is an index; query its table {rel.depends_on[0]!r}", node)
                if rel.name not in self.depends_on:
                    self.depends_on.append(rel.name)
                as_of = None
                if version is not None:
                    as_of, unit_alias = time_travel.bind_as_of(version, self.params, alias_name)
                    alias_name = None if unit_alias else alias_name
                plan = P.Scan(rel, alias_name)
                plan.as_of = as_of
                plan.temporal = temporal
            return plan, self._scope_of(plan, alias_name or name, col_aliases)
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Table):
            return self._paren_join(node.this, alias_name, col_aliases)
        if isinstance(node, exp.Subquery):
            if alias_name is None:
                alias_name = "subquery"
            plan = self.bind_query(node.this, top=False)
            return plan, self._scope_of(plan, alias_name, col_aliases)
        if isinstance(node, exp.Unnest) or isinstance(node, exp.Lateral) and isinstance(node.this, exp.Unnest):
            return self.unnest_item(node, P.Values([()], [], []), Scope())
        if isinstance(node, exp.Lateral):
            raise error_at(UnsupportedError, "LATERAL is supported with unnest(...) only, not with "
                                             f"{spelled(node.this)!r}", node)
        if node.find(exp.Anonymous) is not None:
            raise error_at(UnsupportedError, f"{node.sql(dialect='postgres')[:40]!r} in FROM is not supported "
                                             "(of the table functions only TUMBLE and HOP are)", node)
        raise error_at(UnsupportedError, f"FROM item {spelled(node)!r} is not supported", node)

    # --- unnest (P.Unnest; in an MV stream/executors/project_set.py) -----------------------------

    def unnest_item(self, node, plan, scope, outer: bool = False):
        """``(plan, scope)``: ``plan`` with the columns of ``unnest(a, ...)`` [WITH ORDINALITY]
        [AS u(x, ...)] appended; the arrays may read ``scope`` (an implicit LATERAL, as Postgres)."""
        lateral = node if isinstance(node, exp.Lateral) else None
        fn = node.this if lateral is not None else node
        alias = (lateral or fn).args.get("alias")
        binder = ExprBinder(scope, self.params, context="unnest")
        arrays = [binder.bind(a) for a in fn.expressions]
        for a, n in zip(arrays, fn.expressions):
            if a.data_type.kind != TypeKind.LIST:
                raise error_at(BindError, f"function unnest({a.data_type.sql_name().lower()}) does not exist "
                                          "(it takes an array)", n)
        table = _name(alias.this) if alias is not None and alias.this is not None else "unnest"
        names = [_name(c) for c in alias.columns] if alias is not None and alias.columns else []
        offset = fn.args.get("offset")
        if isinstance(offset, exp.Expression) and not isinstance(offset, exp.Boolean):
            names = names + [None] * (len(arrays) - len(names)) + [_name(offset)]
        if len(names) > len(arrays) + bool(offset):
            raise error_at(BindError, f"table {table!r} has {len(arrays) + bool(offset)} columns available but "
                                      f"{len(names)} columns specified", node)
        default = [table if alias is not None and alias.this is not None and len(arrays) == 1 else "unnest"] \
            * len(arrays) + ["ordinality"]
        names = [n if n is not None else d for n, d in zip(names + [None] * len(default), default)]
        out = P.Unnest(plan, arrays, names[:len(arrays)], outer)
        width = len(plan.types)
        cols = [ScopeCol(table, names[i], width + i, arrays[i].data_type.elem) for i in range(len(arrays))]
        if offset:
            cols.append(ScopeCol(table, names[len(arrays)], width + len(arrays), DataType.BIGINT))
        return out, scope + Scope(cols)

    def _filter_before_unnest(self, plan, scope, where_conjuncts, pushed):
        """``plan`` filtered by the WHERE conjuncts that read only its columns (``scope``), so a
        lateral ``jsonb_each(t.j)`` / ``unnest`` after it sees only the rows the WHERE keeps, as
        Postgres pushes them down (``WHERE jsonb_typeof(j) = 'object'`` guards jsonb_each's data
        error). Each stays in the WHERE too (bound again over the whole FROM: an ambiguous name
        is still refused there; filtering twice keeps the same rows). Subqueries, aggregates,
        windows and random() stay above; the caller skips FROMs with a RIGHT or FULL join."""
        conds = []
        for c in where_conjuncts:
            if id(c) in pushed or special_form(c) or c.find(exp.Subquery, exp.Select, exp.AggFunc, exp.Window,
                                                             exp.Rand, exp.CurrentTimestamp) is not None or \
                    any(a.name.lower() in ("random", "clock_timestamp", "now") for a in c.find_all(exp.Anonymous)):
                continue
            try:
                bound = ExprBinder(scope, self.params, context="WHERE")._bool(c)
            except (BindError, UnsupportedError):
                continue   # it reads a later FROM item (or is refused where the WHERE is bound)
            pushed.add(id(c))
            conds.append(bound)
        if not conds:
            return plan
        return P.Filter(plan, conds[0] if len(conds) == 1 else E.And(*conds))

    def _unnest_join(self, join, plan, scope):
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        on = join.args.get("on")
        trivially = on is None or isinstance(on, exp.Boolean) and on.this
        if join.args.get("using") or not trivially or side not in ("", "LEFT") or kind not in ("", "CROSS", "INNER"):
            raise error_at(UnsupportedError, "unnest in a join is supported as FROM t, unnest(...), CROSS JOIN "
                                             "[LATERAL] unnest(...) or [LEFT] JOIN LATERAL unnest(...) ON TRUE", join)
        return self.unnest_item(join.this, plan, scope, outer=side == "LEFT")

    def select_unnest(self, plan, scope, items):
        """``SELECT unnest(a), ... FROM ...``: every unnest call of the select list becomes a
        column of one P.Unnest over ``plan`` (several zip, as Postgres' ProjectSet); returns
        ``(plan, hook)``, the hook mapping each call to its column (None: no unnest)."""
        calls = [n for e, _ in items for n in e.find_all(exp.Explode)
                 if not any(isinstance(p, (exp.Select, exp.Subquery)) for p in _ancestors(n, e))]
        if not calls:
            return plan, None
        binder = ExprBinder(scope, self.params, context="unnest")
        arrays = []
        for c in calls:
            a = binder.bind(c.this)
            if a.data_type.kind != TypeKind.LIST or c.expressions:
                raise error_at(BindError, f"function unnest({a.data_type.sql_name().lower()}) does not exist "
                                          "(it takes one array in a select list)", c)
            arrays.append(a)
        width = len(plan.types)
        out = P.Unnest(plan, arrays, ["unnest"] * len(arrays))
        columns = {id(c): E.Col(width + i, a.data_type.elem, "unnest") for i, (c, a) in enumerate(zip(calls, arrays))}
        return out, lambda n: columns.get(id(n))

    def _paren_join(self, table, alias_name, col_aliases):
        """``(a JOIN b ...)`` in FROM: bound as a FROM clause of its own. Unaliased, its tables'
        names stay visible (``a.x``); with an alias (Postgres's join alias) the columns ``*``
        lists are reachable as ``alias.col`` only, renamed by any column aliases."""
        base = table.copy()
        joins = [j.copy() for j in (base.args.get("joins") or [])]
        base.set("joins", None)
        fake = exp.Select(expressions=[exp.Star()], from_=exp.From(this=base), joins=joins)
        plan, scope, _ = self._from(fake, [])
        if alias_name is None:
            if col_aliases:
                raise error_at(BindError, "column aliases need a table alias", table)
            return plan, scope
        cols = [c for c in scope.cols if c.unqualified]
        if col_aliases and len(col_aliases) > len(cols):
            raise error_at(BindError, f"table {alias_name!r} has {len(cols)} columns available but "
                                      f"{len(col_aliases)} columns specified", table)
        names = [c.name for c in cols]
        if col_aliases:
            names[:len(col_aliases)] = col_aliases
        return plan, Scope([ScopeCol(alias_name, n, c.index, c.dtype) for n, c in zip(names, cols)])

    def _scope_of(self, plan, table, col_aliases) -> Scope:
        names = list(plan.names[:plan.n_visible])
        if col_aliases:
            names[:len(col_aliases)] = col_aliases
        return Scope([ScopeCol(table, names[i], i, plan.types[i]) for i in range(plan.n_visible)])

    def _from(self, node, where_conjuncts):
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:
            return P.Values([()], [], []), Scope(), where_conjuncts
        joins = node.args.get("joins") or []
        inner = bool(joins) and all(not j.side and (j.kind or "").upper() in ("", "INNER", "CROSS") for j in joins)
        # FROM t, jsonb_each(t.j): unnest of its lists, and SELECT e reading e.value of
        # jsonb_array_elements(t.j) AS e (sql/bind/jsonb_rows.py; in place: jsonb_select.rewrite copied node)
        jsonb_rows.whole_row_references(node)
        if joins:
            jsonb_rows.lateral_to_unnest(node)
        plan, scope = self._from_item(from_.this)
        pushed = set()   # ids of WHERE conjuncts already filtering below an unnest
        if inner:   # a rank filter on one inner-joined row-number subquery: a group top-N below the join
            plan, where_conjuncts = O.push_rank_filter(plan, scope, where_conjuncts, self.params)
        for join, group in _comma_groups(joins):
            if group:   # Postgres: JOIN binds tighter than a comma (``a, b LEFT JOIN c USING (k)``)
                fake = exp.Select(expressions=[exp.Star()], from_=exp.From(this=join.this.copy()),
                                  joins=[j.copy() for j in group])
                right, rscope, _ = self._from(fake, [])
            elif _is_unnest(join.this):   # FROM t, unnest(t.a) / [LEFT] JOIN LATERAL unnest(...) ON TRUE
                if not any((j.side or "").upper() in ("RIGHT", "FULL") for j in joins):
                    plan = self._filter_before_unnest(plan, scope, where_conjuncts, pushed)
                plan, scope = self._unnest_join(join, plan, scope)
                continue
            else:
                right, rscope = self._from_item(join.this)
            if inner:
                right, where_conjuncts = O.push_rank_filter(right, rscope, where_conjuncts, self.params)
            side = (join.side or "").lower()
            kind = {"": "inner", "left": "left", "right": "right", "full": "full"}[side]
            method = str(join.args.get("method") or "").upper()
            if (join.kind or "").upper() in ("SEMI", "ANTI") or method not in ("", "NATURAL"):
                raise error_at(UnsupportedError, f"{join.kind or method} JOIN is not supported", join)
            on, using = join.args.get("on"), join.args.get("using")
            natural = method == "NATURAL"
            if natural:   # Postgres: USING (the names both sides have, in the left's order)
                using = _natural_using(scope, rscope, join)
            if kind == "full":
                plan = full_join_left(plan)
            if using:
                plan, scope = self._join_using(plan, scope, right, rscope, kind, using)
                continue
            rscope_own, right_own = rscope, right
            rscope = rscope.shifted(len(plan.types))
            both = scope + rscope
            if on is not None:
                conds = _conjuncts(on)
            elif natural and kind != "inner":   # no common column: every pair matches (ON TRUE)
                conds = []
            elif kind == "inner":   # comma / CROSS join: equalities come from WHERE
                conds, where_conjuncts = _take_equalities(where_conjuncts, scope, rscope)
            else:
                raise error_at(BindError, f"{kind.upper()} JOIN needs an ON condition", join)
            binder = ExprBinder(both, self.params, context="JOIN conditions")
            lk, rk, extra, extra_nodes = [], [], [], []
            lexprs, rexprs = [], []   # computed keys: (key slot, expression over one side)
            width = len(plan.types)
            for c in conds:
                bound = binder.bind(c)
                if isinstance(bound, E.Cmp) and bound.op == "=" and isinstance(bound.left, E.Col) and \
                        isinstance(bound.right, E.Col) and bound.left.data_type == bound.right.data_type and \
                        bound.left.data_type != DataType.JSONB:   # JSONB: a computed key (_key_equality)
                    a, b = bound.left.index, bound.right.index
                    if b < width <= a:
                        a, b = b, a
                    # a column already among the keys (ON l.a = r.a AND l.a = r.id): the
                    # equality is checked on the matches instead (a key names a column once)
                    if a < width <= b and a not in lk and b - width not in rk:
                        lk.append(a), rk.append(b - width)
                        continue
                key = self._key_equality(c, bound, width, scope, rscope_own)
                if key is not None:   # keys of different types or expressions: computed below the join
                    lexprs.append((len(lk), key[0])), rexprs.append((len(rk), key[1]))
                    lk.append(None), rk.append(None)
                    continue
                extra.append(bound)
                extra_nodes.append(c)
            if not lk and not self.batch and (at_most_one_row(right) or at_most_one_row(plan)):
                # a join to a side of at most one row (a comma join to a global aggregate): a
                # hash join on a constant key, whose state is the other side (sql/build.py's
                # ScalarJoin does the same); any other keyless join stays refused below
                lexprs.append((0, E.Lit(1, DataType.INT))), rexprs.append((0, E.Lit(1, DataType.INT)))
                lk.append(None), rk.append(None)
            if lexprs:
                plan, lat = _with_columns(plan, [e for _, e in lexprs], "_jkey")
                right, rat = _with_columns(right, [e for _, e in rexprs], "_jkey")
                for (slot, _), i in zip(lexprs, lat):
                    lk[slot] = i
                for (slot, _), i in zip(rexprs, rat):
                    rk[slot] = i
                # the left grew: the other conditions are bound again over the shifted right
                rscope = rscope_own.shifted(len(plan.types))
                both = scope + rscope
                binder = ExprBinder(both, self.params, context="JOIN conditions")
                extra = [binder.bind(c) for c in extra_nodes]
            if not lk and not self.batch:
                raise error_at(UnsupportedError, "a join in a materialized view needs an equality between its two "
                                                 "sides (nested-loop joins are not supported in streaming)", join)
            cond = None if not extra else (extra[0] if len(extra) == 1 else E.And(*extra))
            if getattr(right_own, "temporal", None) is not None:
                plan = temporal_join(plan, right, right_own, kind, lk, rk, cond, join)
                scope = both
                continue
            plan = P.Join(plan, right, kind, lk, rk, cond)
            scope = both
        return plan, scope, where_conjuncts

    def _key_equality(self, node, bound, width, lscope, rscope):
        """``(left key, right key)`` of a join condition ``bound`` (over left columns then
        right columns at ``width``) that is an equality between an expression of the left's
        columns only and one of the right's only, each cast to their common type (Postgres
        compares ``bigint = int`` or ``int = numeric`` in it) and bound over its own side's
        columns; None for any other condition. The join then hashes on the two computed
        columns (RisingWave's project below the join), in an MV and in batch alike."""
        if not isinstance(bound, E.Cmp) or bound.op != "=":
            return None
        while isinstance(node, exp.Paren):
            node = node.this
        if not isinstance(node, exp.EQ):
            return None
        lrefs, rrefs = bound.left.column_refs(), bound.right.column_refs()
        sides = (node.this, node.expression)
        if lrefs and rrefs and max(rrefs) < width <= min(lrefs):
            sides = sides[::-1]
        elif not (lrefs and rrefs and max(lrefs) < width <= min(rrefs)):
            return None
        lt, rt = bound.left.data_type, bound.right.data_type
        if lrefs and min(lrefs) >= width:
            lt, rt = rt, lt
        sup = lt if lt == rt else T.common_supertype(lt, rt)
        if sup is None:
            return None
        left = ExprBinder(lscope, self.params, context="JOIN conditions").bind(sides[0])
        right = ExprBinder(rscope, self.params, context="JOIN conditions").bind(sides[1])
        # the comparison's own casts (a DATE against a TIMESTAMP) are the sides' bound alone, cast
        left = left if left.data_type == lt else E.Cast(left, lt)
        right = right if right.data_type == rt else E.Cast(right, rt)
        # JSONB: the key ignores numbers' scale, as ``=`` does (stream/expr_jsonb_cmp.py)
        return (equality_key(left if lt == sup else E.Cast(left, sup)),
                equality_key(right if rt == sup else E.Cast(right, sup)))

    def _join_using(self, plan, scope, right, rscope, kind, using):
        """``plan JOIN right USING (names)`` as Postgres: each name is one merged column --
        the left's for INNER/LEFT, the right's for RIGHT, ``COALESCE(l, r)`` for FULL, in
        their common type -- reachable unqualified; ``l.name`` / ``r.name`` still reach each
        side's own column. Scope order (what ``*`` lists): the merged columns in USING
        order, then the left's other columns, then the right's (applied at every level of
        nested joins). Keys of different types are joined on casts to their common type."""
        pairs, seen = [], set()
        for ident in using:
            name = _name(ident)
            if name in seen:
                raise error_at(BindError, f"column name {name!r} appears more than once in USING clause", ident)
            seen.add(name)
            pairs.append((name, scope.resolve(name, None, ident), rscope.resolve(name, None, ident), ident))
        lcasts, rcasts, types = [], [], []
        for name, l_col, r_col, ident in pairs:
            sup = l_col.dtype if l_col.dtype == r_col.dtype else T.common_supertype(l_col.dtype, r_col.dtype)
            if sup is None:
                raise error_at(BindError, f"JOIN/USING types {l_col.dtype.sql_name()} and {r_col.dtype.sql_name()} "
                                          f"cannot be matched", ident)
            types.append(sup)
            if sup == DataType.JSONB:   # both JSONB: keys ignoring numbers' scale, as = (the merged value below is the column's)
                lcasts.append(equality_key(E.Col(l_col.index, sup, name)))
                rcasts.append(equality_key(E.Col(r_col.index, sup, name)))
                continue
            lcasts.append(None if l_col.dtype == sup else E.Cast(E.Col(l_col.index, l_col.dtype, name), sup))
            rcasts.append(None if r_col.dtype == sup else E.Cast(E.Col(r_col.index, r_col.dtype, name), sup))

        def extended(p, casts):   # p with the cast keys as trailing columns; the key indices
            extra = [c for c in casts if c is not None]
            if not extra:
                return p, None
            out, at = _with_columns(p, extra, "_using")
            it = iter(at)
            return out, [next(it) if c is not None else None for c in casts]
        plan, lcast_at = extended(plan, lcasts)
        right, rcast_at = extended(right, rcasts)
        width = len(plan.types)
        lk = [(lcast_at[i] if lcast_at and lcast_at[i] is not None else l.index) for i, (_, l, _, _) in enumerate(pairs)]
        rk = [(rcast_at[i] if rcast_at and rcast_at[i] is not None else r.index) for i, (_, _, r, _) in enumerate(pairs)]
        plan = P.Join(plan, right, kind, lk, rk, None)
        # the merged columns' table: a name no query can write (SELECT * names them by it)
        self.using_joins = getattr(self, "using_joins", 0) + 1
        tag = f" using {self.using_joins}"
        merged_exprs = []
        for i, (name, l_col, r_col, _) in enumerate(pairs):
            if types[i] == DataType.JSONB:   # the values themselves, not their keys
                lcol, rcol = E.Col(l_col.index, types[i], name), E.Col(width + r_col.index, types[i], name)
            else:
                lcol, rcol = E.Col(lk[i], types[i], name), E.Col(width + rk[i], types[i], name)
            merged_exprs.append(lcol if kind in ("inner", "left") else rcol if kind == "right" else
                                E.Func("coalesce", lcol, rcol))
        if any(not isinstance(e, E.Col) for e in merged_exprs):   # FULL: the COALESCEs as trailing columns
            cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
            at = len(cols)
            plan = P.Project(plan, cols + merged_exprs, list(plan.names) + [f"_merged{i}" for i in range(len(pairs))])
            merged = [ScopeCol(tag, name, at + i, types[i]) for i, (name, _, _, _) in enumerate(pairs)]
        else:
            merged = [ScopeCol(tag, name, e.index, types[i]) for i, ((name, _, _, _), e) in
                      enumerate(zip(pairs, merged_exprs))]
        used = {id(l) for _, l, _, _ in pairs} | {id(r) for _, _, r, _ in pairs}
        rest = [ScopeCol(c.table, c.name, c.index, c.dtype, c.unqualified and id(c) not in used) for c in scope.cols]
        rshift = rscope.shifted(width)
        rest += [ScopeCol(c.table, c.name, c.index, c.dtype, c.unqualified and id(r) not in used)
                 for c, r in zip(rshift.cols, rscope.cols)]
        return plan, Scope(merged + rest)

    # --- SELECT ---------------------------------------------------------------------------------

    def _select(self, node, top: bool) -> P.Node:
        node = _srf_from(node)
        node = jsonb_select.rewrite(node)   # jsonb_agg, jsonb_object_agg, jsonb_array_elements(j) in a select list
        node = regexp_rows.rewrite(node)    # regexp_split_to_table / regexp_matches as unnest
        node = named_windows.rewrite(node)  # WINDOW w AS (...), OVER w: inlined
        node = window_filter.rewrite(node)  # agg(x) FILTER (WHERE c) OVER: agg(CASE WHEN c THEN x END) OVER
        kept(node, "hummock_select_checked", _refuse_unsupported)
        distinct = node.args.get("distinct")
        distinct_on_node = distinct.args.get("on") if distinct is not None else None
        where = node.args.get("where")
        conjuncts = _conjuncts(where.this) if where is not None else []
        plan, scope, conjuncts = self._from(node, conjuncts)
        plan = self.bind_where(plan, scope, conjuncts)
        items = self._expand_star(node.expressions, scope)
        having = node.args.get("having")
        group = node.args.get("group")
        order = node.args.get("order")
        agg_nodes = _find_aggs([e for e, _ in items] + ([having] if having is not None else [])
                               + ([order] if order is not None else []))
        windows = O.find_windows([e for e, _ in items] + [order])
        having_cond = None
        if windows and (group is not None or agg_nodes):
            # Postgres' order: group and aggregate, HAVING, then the windows over the groups (their
            # arguments, PARTITION BY and ORDER BY read group expressions and aggregates)
            plan, agg_binder = self._aggregate(plan, scope, items, group, agg_nodes)
            if having is not None:
                plan = P.Filter(plan, agg_binder._bool(having.this))
            plan, window_hook = O.bind_windows(plan, scope, self.params, windows, binder=agg_binder)
            agg_hook = agg_binder.hook

            def hook(node):
                out = window_hook(node)
                return out if out is not None else agg_hook(node)
            subs = Subqueries(self, len(plan.types), outer=False)
            binder = ExprBinder(Scope(), self.params, hook=hook, context="SELECT", subquery=subs)
        elif windows:
            if having is not None:
                raise error_at(BindError, "HAVING needs GROUP BY or an aggregate", having)
            plan, hook = O.bind_windows(plan, scope, self.params, windows)
            subs = Subqueries(self, len(plan.types))
            binder = ExprBinder(scope, self.params, hook=hook, context="SELECT", subquery=subs)
        elif group is not None or agg_nodes:
            plan, binder = self._aggregate(plan, scope, items, group, agg_nodes)
            binder.subquery = subs = Subqueries(self, len(plan.types), outer=False)
            if having is not None:
                having_cond = binder._bool(having.this)
        else:
            if having is not None:
                raise error_at(BindError, "HAVING needs GROUP BY or an aggregate", having)
            plan, unnest_hook = self.select_unnest(plan, scope, items)
            subs = Subqueries(self, len(plan.types))
            binder = ExprBinder(scope, self.params, hook=unnest_hook, context="SELECT", subquery=subs)
        exprs = [binder.bind(e) for e, _ in items]
        names = [n for _, n in items]
        extra, extra_text, sort_keys = [], [], []
        for o in (order.expressions if order is not None else []):
            idx = O.order_target(o.this, names, len(exprs), extra, extra_text, binder)
            sort_keys.append(O.sort_key(o, idx))
        on_cols = [O.order_target(e, names, len(exprs), extra, extra_text, binder, "DISTINCT ON")
                   for e in (distinct_on_node.expressions if distinct_on_node is not None else [])]
        plan = O.drop_unused_rank(plan, exprs + extra)
        plan = subs.attach(plan)
        if having_cond is not None:
            plan = P.Filter(plan, having_cond)
        proj = P.Project(plan, exprs + extra, names + [f"_order{i}" for i in range(len(extra))])
        proj.n_visible = len(exprs)
        plan = proj
        if distinct_on_node is not None:
            plan = O.distinct_on(plan, on_cols, sort_keys, distinct_on_node)
        elif distinct is not None:
            if extra:
                raise error_at(BindError, "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                               order)
            plan = distinct_all(plan)
        offset = node.args.get("offset")
        return O.order_limit(plan, sort_keys, *O.limit_of(node, self._count),
                             self._count(offset.expression if offset is not None else None) or 0,
                             self.batch and top, node)

    def bind_where(self, plan, scope, conjuncts) -> P.Node:
        """``plan`` filtered by the WHERE conjuncts: the plain ones first, as one Filter (scalar
        subqueries in it joined first, as trailing columns), then the subquery forms of
        :func:`sql.bind.subquery.where_conjunct` as their own nodes over the filtered rows (they
        keep the plan's columns in place); a form that turns out plain is filtered last."""
        plain = [c for c in conjuncts if not special_form(c)]
        plan = self._filter(plan, scope, plain)
        late = []
        for c in conjuncts:
            if special_form(c):
                out = where_conjunct(self, plan, scope, c)
                if out is None:
                    late.append(c)
                else:
                    plan = out
        return self._filter(plan, scope, late)

    def _filter(self, plan, scope, conjuncts) -> P.Node:
        if not conjuncts:
            return plan
        subs = Subqueries(self, len(plan.types))
        binder = ExprBinder(scope, self.params, context="WHERE", subquery=subs)
        conds = [binder._bool(c) for c in conjuncts]
        return O.rank_filter(P.Filter(subs.attach(plan), conds[0] if len(conds) == 1 else E.And(*conds)))

    def _count(self, node):
        if node is None:
            return None
        lit = ExprBinder(Scope(), self.params).literal(node)
        if lit is None or not isinstance(lit[0], int) or lit[0] < 0:
            raise error_at(BindError, "LIMIT/OFFSET must be a non-negative integer constant", node)
        return lit[0]

    def _expand_star(self, expressions, scope):
        items = []
        for e in expressions:
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                table = _name(e.args.get("table")) if isinstance(e, exp.Column) else None
                cols = [c for c in scope.cols if (c.table == table if table else True)]
                if table and not cols:
                    raise error_at(BindError, f"missing FROM-clause entry for table {table!r}", e)
                if table is None:
                    cols = [c for c in cols if c.unqualified]
                star = e.this if isinstance(e, exp.Column) else e
                for key, what in (("replace", "REPLACE"), ("rename", "RENAME"), ("ilike", "ILIKE")):
                    if star.args.get(key):
                        raise error_at(UnsupportedError, f"SELECT * {what} (...) is not supported", e)
                excluded = star.args.get("except_") or star.args.get("except") or []
                for x in excluded:   # RisingWave's SELECT * EXCEPT (cols): those columns left out
                    if not isinstance(x, exp.Column) or isinstance(x.this, exp.Star):
                        raise error_at(BindError, "SELECT * EXCEPT takes a list of column names", x)
                    xname, xtable = _name(x.this), _name(x.args.get("table"))
                    if xtable is not None and table is not None and xtable != table:
                        raise error_at(BindError, f"column {xtable}.{xname} in SELECT {table}.* EXCEPT is not one "
                                                  f"of {table}'s columns", x)
                    drop = [c for c in cols if c.name == xname and (xtable is None or c.table == xtable)]
                    if not drop:
                        full = f"{xtable}.{xname}" if xtable else xname
                        raise error_at(BindError, f"column {full!r} in SELECT * EXCEPT does not exist", x)
                    cols = [c for c in cols if c not in drop]
                if excluded and not cols:
                    raise error_at(BindError, "SELECT * EXCEPT leaves no columns", e)
                for c in cols:
                    col = exp.column(c.name, table=c.table, quoted=True)
                    items.append((col, c.name))
                continue
            if isinstance(e, exp.Alias):
                items.append((e.this, _name(e.args["alias"])))
            elif isinstance(e, exp.Column):
                items.append((e, _name(e.this)))
            else:
                items.append((e, kept(e, "hummock_default_name", _default_name)))
        return items

    # --- GROUP BY / aggregates --------------------------------------------------------------------

    def _ordered_set_agg(self, kind, name, fnode, filt, node, pre, binder) -> P.AggSpec:
        """``mode() / percentile_cont(f) / percentile_disc(f) WITHIN GROUP (ORDER BY x)``
        (batch only): ``x`` and its order key go to ``pre``, the fraction (a constant between 0
        and 1) to the spec's ``extra``. ``percentile_cont`` of a number is double precision;
        the others return ``x``'s type."""
        ordered = fnode.expression.expressions if isinstance(fnode.expression, exp.Order) else []
        if len(ordered) != 1:
            raise error_at(UnsupportedError, f"{name}() WITHIN GROUP takes one ORDER BY expression", fnode)
        value = binder.bind(ordered[0].this)
        extra = {}
        if kind == "mode":
            if fnode.this.this is not None:
                raise error_at(BindError, "function mode takes no arguments", fnode)
            ret = value.data_type
        else:
            f = binder.bind_as(fnode.this.this, DataType.DOUBLE) if fnode.this.this is not None else None
            if not isinstance(f, E.Lit) or not T.is_numeric(f.data_type):
                raise error_at(UnsupportedError, f"{name}'s fraction must be a constant number", fnode)
            fraction = None if f.value is None else float(f.value)
            if fraction is not None and not 0 <= fraction <= 1:
                raise error_at(ExecutionError, f"percentile value {f.value} is not between 0 and 1", fnode)
            extra["fraction"] = fraction
            if kind == "percentile_cont" and not T.is_numeric(value.data_type):
                raise error_at(BindError, f"function percentile_cont with ORDER BY "
                                          f"{value.data_type.sql_name().lower()} does not exist", fnode)
            ret = DataType.DOUBLE if kind == "percentile_cont" else value.data_type
        pre.append(value)
        arg_idx = len(pre) - 1
        extra["order"] = [O.sort_key(ordered[0], arg_idx)]
        filt_idx = None
        if filt is not None:
            pre.append(binder._bool(filt.this if isinstance(filt, exp.Where) else filt))
            filt_idx = len(pre) - 1
        spec = P.AggSpec(kind, arg_idx, False, filt_idx, ret, pg_text(node))
        spec.extra = extra
        return spec

    def _variance_calls(self, fnode, filt, node, pre, binder, derived) -> list:
        """``stddev``/``variance`` (and their _samp/_pop forms) in a materialized view, as
        RisingWave plans them: ``sum(x)``, ``sum(x * x)`` and ``count(x)`` (x as NUMERIC; a
        float exactly, :class:`~stream.expr_variance.ExactDecimal`), maintained by HashAgg/SimpleAgg, whose outputs the select
        list reads through :class:`~stream.expr_variance.VarianceFinal` (``derived`` maps the
        call's text to its kind, float-ness and the three calls' texts). Returns those three
        calls as ``_aggregate``'s plain-call tuples."""
        kind, name = _BATCH_AGGS[type(fnode)], spelled(fnode)
        arg = fnode.this
        if isinstance(arg, exp.Order):
            raise error_at(UnsupportedError, f"{name}(... ORDER BY ...) is not supported", fnode)
        if isinstance(arg, exp.Distinct) or arg is None or isinstance(arg, exp.Star):
            raise error_at(UnsupportedError, f"{name}({'DISTINCT ...' if arg is not None else ''}) is not supported",
                           fnode)
        value = binder.bind(arg)
        if not T.is_numeric(value.data_type):
            raise error_at(BindError, f"function {name}({value.data_type.sql_name().lower()}) does not exist", fnode)
        floats = value.data_type.kind in (TypeKind.REAL, TypeKind.DOUBLE)
        if floats:   # summed exactly as NUMERIC (stream/expr_variance.py: float sums cancel catastrophically)
            x = value if value.data_type == DataType.DOUBLE else E.Cast(value, DataType.DOUBLE)
            pre.extend([ExactDecimal(x), ExactDecimal(x, square=True)])
        else:
            x = E.Cast(value, DataType.DECIMAL)
            pre.extend([x, E.Arith("*", x, x)])
        x_idx, sq_idx = len(pre) - 2, len(pre) - 1
        filt_idx = None
        if filt is not None:
            pre.append(binder._bool(filt.this if isinstance(filt, exp.Where) else filt))
            filt_idx = len(pre) - 1
        text = pg_text(node)
        a = pg_text(arg)
        parts = [f"{k} /* {text} */" for k in (f"sum({a})", f"sum({a} * {a})", f"count({a})")]
        derived[text] = (kind, floats, parts)
        return [("sum", x_idx, False, filt_idx, parts[0], node), ("sum", sq_idx, False, filt_idx, parts[1], node),
                ("count", x_idx, False, filt_idx, parts[2], node)]

    def _batch_agg(self, fnode, filt, node, pre, binder) -> P.AggSpec:
        """``string_agg(x, sep [ORDER BY ...])``, ``array_agg(x [ORDER BY ...])``, the batch
        ``stddev``/``variance`` family and the ordered-set aggregates (sql/batch/execute.py
        computes them in a batch query). In a materialized view string_agg/array_agg run in
        HashAgg over an ordered materialized input (stream/executors/agg_ordered.py), the variance
        family is ``_variance_calls``, and the ordered-set aggregates are refused by name (as
        RisingWave, batch only). The argument, ORDER BY keys and filter are appended to ``pre``;
        the spec's ``extra`` holds the separator and the order (input column, desc, nulls first)."""
        inner = fnode.this if isinstance(fnode, exp.WithinGroup) else fnode
        kind = _BATCH_AGGS.get(type(inner)) if isinstance(fnode, exp.WithinGroup) else _BATCH_AGGS[type(fnode)]
        name = spelled(inner)
        if kind is None or (kind in _ORDERED_SET) != isinstance(fnode, exp.WithinGroup):
            raise error_at(UnsupportedError, f"aggregate {name} is not supported"
                                             f"{' with WITHIN GROUP' if kind else ''}", fnode)
        if not self.batch and kind not in ("string_agg", "array_agg"):   # ordered-set aggregates: as RisingWave
            raise error_at(UnsupportedError, f"aggregate {name} is supported in a batch query only, not in a "
                                             "materialized view", fnode)
        if kind in _ORDERED_SET:
            return self._ordered_set_agg(kind, name, fnode, filt, node, pre, binder)
        arg, order, distinct = fnode.this, [], False
        if isinstance(arg, exp.Order):
            order, arg = list(arg.expressions), arg.this
        if isinstance(arg, exp.Distinct) and kind in ("string_agg", "array_agg"):
            if len(arg.expressions) != 1:
                raise error_at(UnsupportedError, "DISTINCT over several arguments is not supported", fnode)
            distinct, arg = True, arg.expressions[0]
        if isinstance(arg, exp.Distinct) or arg is None or isinstance(arg, exp.Star):
            raise error_at(UnsupportedError, f"{name}({'DISTINCT ...' if arg is not None else ''}) is not supported",
                           fnode)
        value = binder.bind_as(arg, DataType.VARCHAR) if kind == "string_agg" else binder.bind(arg)
        if kind == "string_agg":
            if value.data_type != DataType.VARCHAR:
                raise error_at(BindError, f"function string_agg({value.data_type.sql_name().lower()}, text) does "
                                          "not exist", fnode)
            if fnode.args.get("separator") is None:
                raise error_at(BindError, "function string_agg(text) does not exist (it takes a delimiter: "
                                          "string_agg(x, ','))", fnode)
            sep = binder.bind_as(fnode.args.get("separator"), DataType.VARCHAR)
            if not isinstance(sep, E.Lit) or sep.data_type != DataType.VARCHAR:
                raise error_at(UnsupportedError, "string_agg's delimiter must be a constant text", fnode)
            ret, extra = DataType.VARCHAR, {"sep": sep.value}
        elif kind == "array_agg":
            if value.data_type.kind == TypeKind.LIST:
                raise error_at(UnsupportedError, "array_agg of arrays is not supported (multidimensional arrays "
                                                 "are not)", fnode)
            ret, extra = DataType.list(value.data_type), {}
        else:
            if not T.is_numeric(value.data_type):
                raise error_at(BindError, f"function {name}({value.data_type.sql_name().lower()}) does not exist",
                               fnode)
            ret = DataType.DOUBLE if value.data_type.kind in (TypeKind.REAL, TypeKind.DOUBLE) else DataType.DECIMAL
            extra = {}
        pre.append(value)
        arg_idx = len(pre) - 1
        keys = []
        if distinct:   # Postgres sorts a DISTINCT aggregate's input by its argument (ASC NULLS LAST)
            sep_text = pg_text(fnode.args["separator"]) if kind == "string_agg" else None
            for o in order:
                if pg_text(o.this) not in (pg_text(arg), sep_text):
                    raise error_at(BindError, "in an aggregate with DISTINCT, ORDER BY expressions must appear in "
                                              "argument list", o)
            first = next((o for o in order if pg_text(o.this) == pg_text(arg)), None)
            keys.append(O.sort_key(first, arg_idx) if first is not None else (arg_idx, False, False))
        for o in ([] if distinct else order):
            pre.append(binder.bind(o.this))
            keys.append(O.sort_key(o, len(pre) - 1))
        extra["order"] = keys
        filt_idx = None
        if filt is not None:
            pre.append(binder._bool(filt.this if isinstance(filt, exp.Where) else filt))
            filt_idx = len(pre) - 1
        spec = P.AggSpec(kind, arg_idx, distinct, filt_idx, ret, pg_text(node))
        spec.extra = extra
        return spec

    def _aggregate(self, plan, scope, items, group, agg_nodes):
        binder = ExprBinder(scope, self.params, context="GROUP BY")
        group_nodes = []
        for g in (group.expressions if group is not None else []):
            if O.position_literal(g) is not None:
                group_nodes.append(items[O.ordinal(g, len(items), "GROUP BY")][0])
            elif isinstance(g, exp.Column) and g.args.get("table") is None and \
                    not any(c.name == _name(g.this) for c in scope.cols) and \
                    _name(g.this) in [n for _, n in items]:
                group_nodes.append(items[[n for _, n in items].index(_name(g.this))][0])
            else:
                group_nodes.append(g)
        pre = [binder.bind(g) for g in group_nodes]
        calls_pre = []   # (kind, arg idx, distinct, filter idx, text, node)
        derived = {}     # an MV's stddev/variance text -> (kind, floats, its sum/sum of squares/count texts)
        arg_binder = ExprBinder(scope, self.params, context="aggregate arguments")
        for a in agg_nodes:
            fnode, filt = (a.this, a.expression) if isinstance(a, exp.Filter) else (a, None)
            kind = _AGGS.get(type(fnode))
            if kind is None and not self.batch and _BATCH_AGGS.get(type(fnode)) in _VARIANCE:
                calls_pre.extend(self._variance_calls(fnode, filt, a, pre, arg_binder, derived))
                continue
            if kind is None and (type(fnode) in _BATCH_AGGS or isinstance(fnode, exp.WithinGroup)):
                calls_pre.append(self._batch_agg(fnode, filt, a, pre, arg_binder))
                continue
            if kind is None:
                name = refused_name(fnode)
                raise error_at(UnsupportedError, f"aggregate {name} is not supported"
                                                 f"{near_names(name, _AGG_NAMES)}", fnode)
            arg, distinct = fnode.this, False
            if isinstance(arg, exp.Distinct):
                distinct = True
                if len(arg.expressions) != 1:
                    raise error_at(UnsupportedError, "DISTINCT over several arguments is not supported", fnode)
                arg = arg.expressions[0]
            arg_idx = None
            if not isinstance(arg, exp.Star) and arg is not None:
                pre.append(arg_binder.bind(arg))
                arg_idx = len(pre) - 1
            elif kind != "count":
                raise error_at(BindError, f"{kind}(*) is not valid", fnode)
            filt_idx = None
            if filt is not None:
                cond = filt.this if isinstance(filt, exp.Where) else filt
                pre.append(arg_binder._bool(cond))
                filt_idx = len(pre) - 1
            if distinct and kind in ("min", "max", "bool_and", "bool_or"):
                distinct = False   # DISTINCT does not change these
            calls_pre.append((kind, arg_idx, distinct, filt_idx, pg_text(a), a))
        project = P.Project(plan, pre, [f"_g{i}" for i in range(len(pre))])
        schema = Schema(list(zip(project.names, project.types)))
        specs = []
        for pre_call in calls_pre:
            if isinstance(pre_call, P.AggSpec):   # a batch-only aggregate (_batch_agg), already typed
                specs.append(pre_call)
                continue
            kind, arg_idx, distinct, filt_idx, text, anode = pre_call
            if kind in ("min", "max") and arg_idx is not None and project.types[arg_idx].kind == TypeKind.LIST:
                # arrays in Postgres' array order (sql/batch/execute.py's _sort_key), a batch-only form
                if not self.batch:
                    raise error_at(UnsupportedError, f"{kind}() of an array is supported in a batch query only, "
                                                     "not in a materialized view", anode)
                spec = P.AggSpec(f"array_{kind}", arg_idx, False, filt_idx, project.types[arg_idx], text)
                spec.extra = {}
                specs.append(spec)
                continue
            filt = None if filt_idx is None else E.Col(filt_idx, DataType.BOOLEAN)
            try:
                call = AggCall(kind, arg_idx, distinct=distinct, filter=filt).bind(schema)
            except ExecutorError:   # as Postgres says it, at the call (not AggCall's "max($0): ...")
                arg = "*" if arg_idx is None else T.description_name(project.types[arg_idx])
                raise error_at(BindError, f"function {kind}({arg}) does not exist", anode) from None
            specs.append(P.AggSpec(kind, arg_idx, distinct, filt_idx, call.return_type, text))
        if not specs:   # GROUP BY without aggregates: a hidden count(*) keeps each group's row count
            specs.append(P.AggSpec("count", None, False, None, DataType.BIGINT, "count(*) /* hidden */"))
        # a batch aggregate's ORDER BY columns, read by hidden count()s after the visible calls, so
        # that column pruning (which reads each call's argument and filter) keeps them
        for c in sorted({c for spec in specs for c, _, _ in getattr(spec, "extra", {}).get("order", ())
                         if self.batch}):   # (an MV's string_agg/array_agg keep their ORDER BY columns themselves)
            specs.append(P.AggSpec("count", c, False, None, DataType.BIGINT, f"count(${c}) /* order key */"))
        k = len(group_nodes)
        agg = P.Agg(project, list(range(k)), specs, [f"_g{i}" for i in range(k)] + [f"_a{i}" for i in range(len(specs))])
        group_text = {pg_text(g): i for i, g in enumerate(group_nodes)}
        agg_text = {s.text: k + j for j, s in enumerate(specs)}
        group_plain = {}
        for i, g in enumerate(group_nodes):
            if isinstance(g, exp.Column):
                try:
                    c = scope.resolve(_name(g.this), _name(g.args.get("table")), g)
                    group_plain[c.index] = i
                except BindError:
                    pass

        def hook(node):
            text = pg_text(node)
            if text in derived:   # stddev/variance in an MV: its final step over sum, sum of squares, count
                kind, floats, parts = derived[text]
                return VarianceFinal(kind, *(E.Col(agg_text[t], agg.types[agg_text[t]], t) for t in parts), floats)
            if text in agg_text:
                i = agg_text[text]
                return E.Col(i, agg.types[i], text)
            if text in group_text:
                i = group_text[text]
                return E.Col(i, agg.types[i], text)
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                c = scope.resolve(_name(node.this), _name(node.args.get("table")), node)
                if c.index in group_plain:
                    i = group_plain[c.index]
                    return E.Col(i, agg.types[i], c.name)
                raise error_at(BindError, f"column {c.name!r} must appear in the GROUP BY clause or be used in an "
                                          "aggregate function", node)
            return None
        return agg, ExprBinder(Scope(), self.params, hook=hook, context="SELECT")


def _refuse_unsupported(node) -> bool:
    """UnsupportedError for what a SELECT may spell but no plan runs: a schema other than public
    in a column, QUALIFY, TABLESAMPLE, PIVOT (never silently ignored: they change the rows);
    True when there is none (kept per frozen node: sql/bind/frozen.py)."""
    for col in node.find_all(exp.Column):   # s1.t.a: only the public schema exists
        if col.args.get("catalog") is not None or \
                col.args.get("db") is not None and _name(col.args["db"]) != "public":
            raise error_at(UnsupportedError, f"schema-qualified column {col.sql(dialect='postgres')!r}: schemas "
                                             "other than public are not supported", col)
    if node.args.get("qualify"):
        raise error_at(UnsupportedError, "QUALIFY is not supported yet", node)
    for item in node.find_all(exp.Table, exp.Subquery):
        if item.find_ancestor(exp.Select) is node:
            if item.args.get("sample") is not None:
                raise error_at(UnsupportedError, "TABLESAMPLE is not supported", item.args["sample"])
            if item.args.get("pivots"):
                raise error_at(UnsupportedError, "PIVOT / UNPIVOT is not supported", item.args["pivots"][0])
    return True


def _natural_using(left: Scope, right: Scope, join) -> list:
    """The USING list of a NATURAL join: the column names ``*`` lists on both sides, in the
    left's order (none: a cross join); a name twice on one side is ambiguous, as in Postgres."""
    rnames = [c.name for c in right.cols if c.unqualified]
    common = []
    for c in left.cols:
        if c.unqualified and c.name in rnames and c.name not in common:
            common.append(c.name)
    for name in common:
        for side, names in (("left", [c.name for c in left.cols if c.unqualified]), ("right", rnames)):
            if names.count(name) > 1:
                raise error_at(BindError, f"common column name {name!r} appears more than once in {side} table",
                               join)
    return [exp.Identifier(this=name, quoted=True) for name in common]


def _with_columns(plan: P.Node, exprs, prefix: str):
    """``plan`` with ``exprs`` (over its columns) appended as hidden columns, and their indices."""
    cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
    out = P.Project(plan, cols + list(exprs), list(plan.names) + [f"{prefix}{i}" for i in range(len(exprs))])
    out.n_visible = plan.n_visible
    return out, list(range(len(plan.types), len(plan.types) + len(exprs)))


def full_join_left(plan: P.Node) -> P.Node:
    """The left input of a FULL join, such that the join's stream key (left key + right key)
    tells a left row without a match from a right row without one: those are (left key,
    NULLs) and (NULLs, right key), the same key when every left key column may be NULL (a
    single-row aggregate's empty key, a GROUP BY's NULL group; the MV kept one row of two).
    Then a constant TRUE column is appended to the left, hidden, and made part of its key:
    it is NULL exactly in the right-only rows."""
    if key_has_non_null(plan):
        return plan
    cols = [E.Col(i, t, n) for i, (t, n) in enumerate(zip(plan.types, plan.names))]
    out = P.Project(plan, cols + [E.Lit(True, DataType.BOOLEAN)], list(plan.names) + ["_full_left"])
    out.n_visible = plan.n_visible
    out.stream_key = list(out.stream_key) + [len(cols)]   # a superset of a key is a key
    return out


def key_has_non_null(plan: P.Node) -> bool:
    """Whether some column of ``plan``'s stream key is never NULL (a table's pk or _row_id, a
    union's branch tag), judged through the nodes that keep their input's key columns."""
    if isinstance(plan, P.Scan):
        return plan.relation.kind == "table" and bool(plan.stream_key)
    if isinstance(plan, P.Union):
        return True
    if isinstance(plan, P.Join):
        if plan.kind == "inner":
            return key_has_non_null(plan.left) or key_has_non_null(plan.right)
        if plan.kind in ("left", "semi", "anti"):
            return key_has_non_null(plan.left)
        if plan.kind == "right":
            return key_has_non_null(plan.right)
        return False
    if isinstance(plan, (P.Filter, P.Sort, P.Limit, P.TopN, P.RowNumber, P.OverWindow, P.DynamicFilter,
                         P.ScalarJoin)):
        return key_has_non_null(plan.inputs[0])
    if isinstance(plan, P.Project):   # its key columns are its input's key columns
        return len(plan.stream_key) == len(plan.inputs[0].stream_key) and key_has_non_null(plan.inputs[0])
    return False


def relation_name(table) -> str:
    """The relation name of a sqlglot ``Table`` reference (FROM, CREATE, INSERT, UPDATE,
    DELETE, DROP): only the ``public`` schema exists, so ``public.t`` is ``t`` and any other
    schema or a database qualifier is an UnsupportedError (never silently ``public.t``)."""
    if table.args.get("catalog") is not None:
        raise error_at(UnsupportedError, f"cross-database references are not supported: "
                                         f"{table.sql(dialect='postgres')!r}", table)
    schema = table.args.get("db")
    if schema is not None and _name(schema) != "public":
        raise error_at(UnsupportedError, f"schema {_name(schema)!r} does not exist (schemas other than public are not "
                                         "supported)", table)
    return _name(table.this)


def distinct_all(plan: P.Node) -> P.Node:
    """``plan``'s visible rows without duplicates: GROUP BY every visible column (with a hidden
    count(*), an aggregation needs a call), projected back to those columns."""
    n = plan.n_visible
    count = P.AggSpec("count", None, False, None, DataType.BIGINT, "count(*) /* distinct */")
    agg = P.Agg(plan, list(range(n)), [count], list(plan.names[:n]) + ["_count"])
    return P.Project(agg, [E.Col(i, agg.types[i], agg.names[i]) for i in range(n)], list(plan.names[:n]))


def _refuse_array_keys(plan: P.Node, node, batch: bool) -> None:
    """UnsupportedError when an array is a partitioning or equi-join key anywhere in ``plan``, or
    (in a materialized view) a grouping key: the stream executors key their hash tables and state
    by Python values / Arrow dictionary encoding, which arrays (lists) are not (GROUP BY, DISTINCT,
    UNION, PARTITION BY, JOIN ON); the batch Agg groups arrays by their elements."""
    todo = [plan]
    while todo:
        n = todo.pop()
        todo.extend(n.inputs)
        keys = []
        if isinstance(n, P.Agg) and not batch:
            keys = [(n.input.types[g], "GROUP BY / DISTINCT / UNION in a materialized view") for g in n.group]
        elif isinstance(n, P.Join):
            keys = [(n.left.types[k], "a join key") for k in n.left_keys] + \
                [(n.right.types[k], "a join key") for k in n.right_keys]
        elif isinstance(n, (P.TopN, P.RowNumber, P.OverWindow)):
            keys = [(n.input.types[g], "PARTITION BY") for g in (getattr(n, "group", None) or
                                                                  getattr(n, "partition", None) or [])]
        for t, what in keys:
            if t.kind == TypeKind.LIST:
                raise error_at(UnsupportedError, f"an array ({t.sql_name()}) as {what} is not supported", node)


def _is_unnest(node) -> bool:
    return isinstance(node, exp.Unnest) or isinstance(node, exp.Lateral) and isinstance(node.this, exp.Unnest)


def _ancestors(node, top):
    """The nodes between ``node`` (excluded) and ``top`` (included)."""
    out, p = [], node.parent
    while p is not None and node is not top:
        out.append(p)
        if p is top:
            break
        p = p.parent
    return out


def _comma_groups(joins):
    """``(join, group)`` pairs in order: a comma item followed by outer or USING joins comes
    with those joins as its ``group`` (they join it before the comma does, as in Postgres);
    every other join comes alone (``group`` empty). Inner ON joins after a comma stay in the
    left-to-right chain: for them the grouping changes nothing."""
    out, i = [], 0
    while i < len(joins):
        j = joins[i]
        group = []
        if _is_comma(j):
            k = i + 1
            while k < len(joins) and not _is_comma(joins[k]):
                k += 1
            if any(x.side or x.args.get("using") for x in joins[i + 1:k]):
                group = joins[i + 1:k]
        out.append((j, group))
        i += 1 + len(group)
    return out


def _is_comma(join) -> bool:
    return not join.kind and not join.side and not join.args.get("method") and \
        join.args.get("on") is None and not join.args.get("using")


def _column_side(node, left: Scope, right: Scope):
    """"l" / "r" when every column ``node`` reads is the left's / the right's (at least one,
    no subquery, no aggregate or window), else None."""
    if isinstance(node, (exp.Subquery, exp.Select)) or node.find(exp.Subquery, exp.Select, exp.AggFunc,
                                                                  exp.Window) is not None:
        return None
    sides = set()
    for col in ([node] if isinstance(node, exp.Column) else list(node.find_all(exp.Column))):
        if isinstance(col.this, exp.Star):
            return None
        name, table = _name(col.this), _name(col.args.get("table"))
        def has(scope):
            return any(c.name == name and (c.table == table if table else c.unqualified) for c in scope.cols)
        in_l, in_r = has(left), has(right)
        if in_l == in_r:
            return None
        sides.add("l" if in_l else "r")
    return sides.pop() if len(sides) == 1 else None


def _take_equalities(conjuncts, left: Scope, right: Scope):
    taken, rest = [], []
    for c in conjuncts:
        if isinstance(c, exp.EQ):
            sides = {_column_side(c.this, left, right), _column_side(c.expression, left, right)}
            if sides == {"l", "r"}:
                taken.append(c)
                continue
        rest.append(c)
    return taken, rest


def _find_aggs(nodes) -> list:
    """The aggregate calls of ``nodes`` (not inside subqueries or as window calls), in order,
    one per text."""
    found, seen = [], set()
    for n in nodes:
        for a in kept(n, "hummock_aggs", _aggs_under):
            text = pg_text(a)
            if text not in seen:
                seen.add(text)
                found.append(a)
    return found


def _aggs_under(root) -> list:
    found = []

    def visit(n):
        if isinstance(n, exp.Filter) and isinstance(n.this, (exp.AggFunc, exp.WithinGroup)) or \
                isinstance(n, exp.AggFunc) or isinstance(n, exp.WithinGroup):   # WITHIN GROUP: one aggregate
            found.append(n)
            return
        if isinstance(n, exp.Window):   # a window's call is not an aggregate; its arguments may hold some
            fn = n.this.this if isinstance(n.this, exp.Filter) else n.this
            for child in list(fn.iter_expressions()) + list(n.args.get("partition_by") or []) + \
                    ([n.args["order"]] if n.args.get("order") is not None else []):
                visit(child)
            return
        if isinstance(n, (exp.Subquery, exp.Select)):
            return
        for child in n.iter_expressions():
            visit(child)
    visit(root)
    return found


def _default_name(e) -> str:
    if isinstance(e, exp.Paren):
        return _default_name(e.this)
    if isinstance(e, exp.Subquery) and isinstance(e.this, exp.Select) and len(e.this.expressions) == 1:
        inner = e.this.expressions[0]   # Postgres: a scalar subquery is named by its column
        if isinstance(inner, exp.Alias):
            return _name(inner.args["alias"])
        if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star):
            return _name(inner.this)
        return _default_name(inner)
    if isinstance(e, exp.Window):   # Postgres: named by its function
        return _default_name(e.this)
    if isinstance(e, exp.Filter):
        e = e.this
    if isinstance(e, (exp.Cast, exp.TryCast)):
        inner = e.this
        if isinstance(inner, exp.Column):
            return _name(inner.this)
        return _default_name(inner) if not isinstance(inner, exp.Literal) else {
            "DOUBLE": "float8", "INT": "int4", "BIGINT": "int8"}.get(e.to.this.name, e.to.this.name.lower())
    if isinstance(e, exp.WithinGroup):   # an ordered-set aggregate: named by its function, as Postgres
        return _default_name(e.this)
    if isinstance(e, exp.AggFunc):   # Postgres' names, not sqlglot's (var_samp parses as variance: its name)
        return {exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or", exp.GroupConcat: "string_agg",
                exp.VariancePop: "var_pop"}.get(type(e), e.sql_name().lower())
    if isinstance(e, exp.Case):
        return "case"
    if isinstance(e, exp.Explode):
        return "unnest"
    if type(e) in ExprBinder._ARRAY_SHAPES:   # sqlglot's array classes: the Postgres function's name
        return ExprBinder._ARRAY_SHAPES[type(e)](e)[0]
    if isinstance(e, exp.Array):
        return "array"
    if isinstance(e, exp.Bracket):   # Postgres: a[1] is named by the array
        return _default_name(e.this) if not isinstance(e.this, exp.Column) else _name(e.this.this)
    if isinstance(e, exp.Func):
        return e.sql_name().lower() if not isinstance(e, exp.Anonymous) else e.name.lower()
    return "?column?"
