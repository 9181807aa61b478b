"""ORDER BY / LIMIT / OFFSET / FETCH, DISTINCT ON and window functions: binding onto Sort (a
batch SELECT's own result order), TopN (the rows a LIMIT keeps, in MVs, subqueries and batch
alike) and RowNumber.

Job:
- :func:`order_target` resolves one ORDER BY / DISTINCT ON item to a column of the select's
  projection (an output position, an output name, or a hidden extra column, shared by text).
- :func:`limit_of` reads ``LIMIT n | ALL`` and ``FETCH FIRST [n] ROWS ONLY | WITH TIES``.
- :func:`order_limit`: LIMIT/OFFSET is a TopN; ORDER BY is a Sort at the top of a batch SELECT
  (after the TopN: the rows are the ones its MV would hold, ties included) and is dropped
  anywhere else (an MV, a subquery), where it changes no rows.
- :func:`distinct_on`: ``DISTINCT ON (e...)`` is a TopN with group ``e...`` and LIMIT 1, ordered
  by the ORDER BY keys after the ones naming ``e...`` (Postgres requires those to come first).
- :func:`bind_windows`: each ``ROW_NUMBER() OVER (PARTITION BY .. ORDER BY ..)`` of a select
  list appends a RowNumber column, each ``count/sum/avg/min/max(x) OVER (...)`` and each of
  ``rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value`` an
  OverWindow column (frames: :func:`window_frame`; windows sharing PARTITION BY, ORDER BY and
  frame share one OverWindow; the ranking functions and lag/lead ignore the frame); any other
  window function is an UnsupportedError. Over a GROUP BY, the aggregate binder binds the
  windows' arguments (``sum(sum(x)) OVER ()``).
- :func:`rank_filter`: ``Filter(Project(RowNumber(x)), rn <= n AND ...)`` -- an outer WHERE on
  the rank of a FROM subquery -- becomes ``Filter(Project(TopN(x, group=partition, rank)), ...)``
  (group top-N), for ``rn`` compared with integer constants (<, <=, =, >=, >, BETWEEN);
  :func:`drop_unused_rank` then drops the rank when the outer select does not read it;
  :func:`push_rank_filter` does the same for a row-number subquery inner-joined to others.
- :func:`stream_row_numbers`: a RowNumber left in a stream plan becomes a ``row_number``
  OverWindow; :func:`check_streamable` then finds none left.

Invariants: a TopN's order is never empty (no ORDER BY: the input's stream key); ties are
broken by the input's stream key in stream and batch alike, so an MV and its SELECT agree.

Callers: :mod:`sql.bind.select` (``QueryBinder._select`` and set operations).
"""

from __future__ import annotations

from sqlglot import exp

from relational.types import DataType
from stream import expr as E
from stream.errors import ExecutorError
from stream.executors.agg_call import AggCall
from stream.executors.over_window import FRAMELESS, bind_call
from stream.schema import Schema

from sql.bind.expr import ExprBinder, _name, spelled
from sql.bind.frozen import kept, pg_text
from sql.errors import BindError, UnsupportedError, error_at
from sql.plan import nodes as P


def sort_key(ordered, column: int) -> tuple:
    """``(column, descending, nulls_first)`` of a sqlglot ``Ordered`` (Postgres NULL defaults)."""
    desc = bool(ordered.args.get("desc"))
    nulls_first = ordered.args.get("nulls_first")
    return column, desc, desc if nulls_first is None else bool(nulls_first)


def order_target(target, names, n_exprs: int, extra: list, extra_text: list, binder: ExprBinder,
                 clause: str = "ORDER BY") -> int:
    """The projection column of ORDER BY / DISTINCT ON item ``target``: a position (1-based) or
    a bare output name of the select list, else an expression bound into ``extra`` (hidden
    columns after the ``n_exprs`` visible ones; the same text is one column)."""
    if position_literal(target) is not None:
        return ordinal(target, n_exprs, clause)
    if isinstance(target, exp.Column) and target.args.get("table") is None and _name(target.this) in names:
        return names.index(_name(target.this))
    text = pg_text(target)
    if text in extra_text:
        return n_exprs + extra_text.index(text)
    extra.append(binder.bind(target))
    extra_text.append(text)
    return n_exprs + len(extra) - 1


def position_literal(target) -> str | None:
    """The text of ``target`` when Postgres reads it as a select-list position: a numeric
    constant, also negated or parenthesized (``-1``, ``(2)``); None otherwise."""
    while isinstance(target, exp.Paren):
        target = target.this
    sign = ""
    if isinstance(target, exp.Neg):
        sign, target = "-", target.this
        while isinstance(target, exp.Paren):
            target = target.this
    if isinstance(target, exp.Literal) and not target.is_string:
        return sign + target.this
    return None


def ordinal(target, n_items: int, clause: str) -> int:
    """The 0-based select-list index of a GROUP BY / ORDER BY / DISTINCT ON position
    ``target`` (:func:`position_literal`), checked as Postgres does: a non-integer constant or
    a position outside 1..``n_items`` is a BindError naming the position."""
    text = position_literal(target)
    if not text.lstrip("-").isdigit():
        raise error_at(BindError, f"non-integer constant in {clause}", target)
    if not 1 <= int(text) <= n_items:
        raise error_at(BindError, f"{clause} position {text} is not in select list", target)
    return int(text) - 1


def default_order(plan: P.Node) -> list:
    """The order of a TopN without ORDER BY: its input's stream key (a single-row input with no
    key: its first column)."""
    return [(k, False, False) for k in plan.stream_key] or [(0, False, False)]


def limit_of(node, count) -> tuple:
    """``(limit, with_ties)`` of a query node's ``LIMIT n | LIMIT ALL | FETCH FIRST [n] ROWS
    ONLY | WITH TIES`` (limit None: no limit); ``count`` binds a constant count."""
    lim = node.args.get("limit")
    if lim is None:
        return None, False
    if isinstance(lim, exp.Fetch):
        opts = lim.args.get("limit_options")
        if opts is not None and opts.args.get("percent"):
            raise error_at(UnsupportedError, "FETCH ... PERCENT is not supported", lim)
        n = lim.args.get("count")
        return (1 if n is None else count(n)), bool(opts is not None and opts.args.get("with_ties"))
    e = lim.expression
    if isinstance(e, exp.Null) or isinstance(e, exp.Var) and e.name.upper() == "ALL":
        return None, False   # Postgres: LIMIT ALL and LIMIT NULL are no limit
    return count(e), False


def order_limit(plan: P.Node, sort_keys, limit, with_ties: bool, offset, batch_top: bool, node=None) -> P.Node:
    """``plan`` ordered and cut (module docstring). ``limit`` None: none; ``offset`` an int;
    ``with_ties`` (FETCH ... WITH TIES) needs an ORDER BY, as in Postgres."""
    if with_ties and not sort_keys:
        raise error_at(BindError, "WITH TIES cannot be specified without ORDER BY clause", node)
    if limit is not None or offset:   # batch too: the rows an MV of the query would hold, ties included
        plan = P.TopN(plan, sort_keys or default_order(plan), limit, offset, with_ties=with_ties and limit is not None)
    if batch_top and sort_keys:
        return P.Sort(plan, sort_keys)
    return plan


def distinct_on(plan: P.Node, on_cols, sort_keys, node) -> P.Node:
    """The TopN of ``DISTINCT ON (on_cols)`` over projection ``plan``
    (module docstring); ``node`` positions the error when ORDER BY does not start with them."""
    on = list(dict.fromkeys(on_cols))
    pending = set(on)
    for col, _, _ in sort_keys:
        if not pending:
            break
        if col not in on:
            raise error_at(BindError, "SELECT DISTINCT ON expressions must match initial ORDER BY expressions", node)
        pending.discard(col)
    order = [k for k in sort_keys if k[0] not in on]
    return P.TopN(plan, order or default_order(plan), 1, 0, on)


# --- window functions ---------------------------------------------------------------------------

def find_windows(nodes) -> list:
    """The window-function calls of ``nodes`` (not inside subqueries), in order; one that is
    not ``ROW_NUMBER() OVER (...)`` is an UnsupportedError naming it."""
    return [w for n in nodes if n is not None for w in kept(n, "hummock_windows", _windows_under)]


def _windows_under(root) -> list:
    found = []

    def visit(n):
        if isinstance(n, exp.Window):
            _check_window(n)
            found.append(n)
            return
        if isinstance(n, (exp.Subquery, exp.Select)):
            return
        for child in n.iter_expressions():
            visit(child)
    visit(root)
    return found


_AGG_WINDOW = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
_NAV_WINDOW = {exp.Rank: "rank", exp.DenseRank: "dense_rank", exp.PercentRank: "percent_rank",
               exp.CumeDist: "cume_dist", exp.Ntile: "ntile", exp.Lag: "lag", exp.Lead: "lead",
               exp.FirstValue: "first_value", exp.LastValue: "last_value", exp.NthValue: "nth_value"}


def _check_window(w) -> None:
    fn = w.this
    if isinstance(fn, exp.Identifier) or w.args.get("alias") is not None:   # inlined by sql/bind/named_windows.py
        raise error_at(UnsupportedError, "named windows (WINDOW w AS ...) are not supported here", w)
    if isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)):   # lag(x) IGNORE NULLS OVER (...): not Postgres
        raise error_at(UnsupportedError, f"{'IGNORE' if isinstance(fn, exp.IgnoreNulls) else 'RESPECT'} NULLS in a "
                                         "window function is not supported", w)
    if isinstance(fn, exp.RowNumber):
        return
    if isinstance(fn, exp.Filter):   # count/sum/avg/min/max: rewritten by sql/bind/window_filter.py
        if isinstance(fn.this, tuple(_AGG_WINDOW)) and isinstance(fn.this.this, exp.Distinct):
            raise error_at(UnsupportedError, "DISTINCT in a window aggregate is not supported", w)
        raise error_at(UnsupportedError, f"FILTER of the window function {spelled(fn.this)} is not supported "
                                         "(FILTER is taken by count/sum/avg/min/max OVER)", w)
    if type(fn) in _NAV_WINDOW:
        if fn.args.get("ignore_nulls") or isinstance(fn, (exp.IgnoreNulls, exp.RespectNulls)):
            raise error_at(UnsupportedError, "IGNORE/RESPECT NULLS in a window function is not supported", w)
        window_frame(w)
        return
    if type(fn) not in _AGG_WINDOW:
        name = spelled(fn)
        raise error_at(UnsupportedError, f"window function {name}() is not supported (ROW_NUMBER, RANK, "
                                         "DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG, LEAD, FIRST_VALUE, "
                                         "LAST_VALUE, NTH_VALUE and count/sum/avg/min/max OVER (...) are)", w)
    if isinstance(fn.this, exp.Distinct):
        raise error_at(UnsupportedError, "DISTINCT in a window aggregate is not supported", w)
    window_frame(w)


def window_frame(w) -> tuple:
    """The frame of window ``w`` as ``(kind, n)`` (:class:`sql.plan.nodes.OverWindow`):
    ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``, ``ROWS UNBOUNDED PRECEDING [AND CURRENT ROW]``,
    ``ROWS CURRENT ROW``, ``RANGE UNBOUNDED PRECEDING [AND CURRENT ROW]`` and the default frame
    (RANGE UNBOUNDED PRECEDING: with ORDER BY up to the row's last peer, without it the whole
    partition); any other frame is an UnsupportedError."""
    spec = w.args.get("spec")
    if spec is None:
        return "range", None
    kind, start, side = spec.args.get("kind"), spec.args.get("start"), spec.args.get("start_side")
    end, exclude = spec.args.get("end"), spec.args.get("exclude")
    kind = str(kind).lower() if kind is not None else ""
    end_ok = end is None or (isinstance(end, str) and end.upper() == "CURRENT ROW")
    start_text = start.upper() if isinstance(start, str) else None
    if isinstance(end, str) and end.upper() == "UNBOUNDED" and str(spec.args.get("end_side")).lower() == "following" \
            and start_text == "UNBOUNDED" and str(side).lower() == "preceding" and not exclude \
            and kind in ("rows", "range"):
        return "all", None
    if end_ok and not exclude and kind in ("rows", "range"):
        if start_text == "UNBOUNDED" and str(side).lower() == "preceding":
            return kind, None
        if start_text == "CURRENT ROW" and kind == "rows":
            return "rows", 0
        if kind == "rows" and isinstance(start, exp.Literal) and not start.is_string \
                and str(side).lower() == "preceding" and start.this.isdigit():
            return "rows", int(start.this)
    raise error_at(UnsupportedError, f"window frame {spec.sql(dialect='postgres')} is not supported (only ROWS "
                                     "BETWEEN n PRECEDING AND CURRENT ROW, ROWS/RANGE UNBOUNDED PRECEDING, ROWS/RANGE "
                                     "BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING and the default frame are)",
                   w)


def bind_windows(plan: P.Node, scope, params, windows, binder=None) -> tuple:
    """``(plan, hook)``: ``plan`` with one RowNumber per distinct ``ROW_NUMBER()`` window of
    ``windows`` and one OverWindow per distinct window specification (PARTITION BY, ORDER BY,
    frame) of the window aggregates, holding all of its calls (its columns kept at their
    indices, so ``scope`` still resolves), and an ExprBinder hook that binds each window node
    to its column. ``binder``: binds the windows' arguments, PARTITION BY and ORDER BY instead
    of a binder over ``scope`` -- the aggregate binder when the windows run over a GROUP BY's
    output (its hook maps group expressions and aggregates to the Agg's columns)."""
    given_binder = binder
    columns: dict = {}
    specs: dict = {}     # (partition, order, frame) text -> the aggregate windows sharing it
    for w in windows:
        text = pg_text(w)
        if text in columns:
            continue
        columns[text] = None
        if isinstance(w.this, exp.RowNumber):
            specs[("row_number", text)] = [w]
            continue
        order_node = w.args.get("order")
        frame = ("range", None) if _NAV_WINDOW.get(type(w.this)) in FRAMELESS else window_frame(w)
        key = (tuple(pg_text(p) for p in w.args.get("partition_by") or []),
               pg_text(order_node) if order_node is not None else "", frame)
        specs.setdefault(key, []).append(w)
    frame_of = {id(group[0]): key[2] if key[0] != "row_number" else None for key, group in specs.items()}
    for group in specs.values():
        w = group[0]
        binder = given_binder or ExprBinder(scope, params, context="window definitions")
        width = len(plan.types)
        exprs = [E.Col(i, plan.types[i], plan.names[i]) for i in range(width)]
        def column(node):   # a plain column is used in place; anything else is computed once more
            e = binder.bind(node)
            if isinstance(e, E.Col):
                return e.index
            exprs.append(e)
            return len(exprs) - 1
        partition = [column(p) for p in w.args.get("partition_by") or []]
        order_node = w.args.get("order")
        order = [sort_key(o, column(o.this)) for o in (order_node.expressions if order_node is not None else [])]
        if isinstance(w.this, exp.RowNumber):
            pre = _pre(plan, exprs, width)
            plan = P.RowNumber(pre, partition, order, source=w)
            columns[pg_text(w)] = len(plan.types) - 1
            continue
        args = [_window_arg(x.this, column) for x in group]
        pre = _pre(plan, exprs, width)
        schema = Schema(list(zip(pre.names, pre.types)))
        calls = []
        for x, arg in zip(group, args):
            if type(x.this) in _NAV_WINDOW:
                calls.append(_nav_call(x, arg, schema, binder))
                continue
            kind = _AGG_WINDOW[type(x.this)]
            try:
                ret = AggCall(kind, arg).bind(schema).return_type
            except ExecutorError as e:
                raise error_at(UnsupportedError, f"{kind}() OVER: {e}", x) from None
            calls.append(P.WindowCall(kind, arg, ret, f"{kind}({'*' if arg is None else f'${arg}'})"))
        plan = P.OverWindow(pre, partition, order, calls, frame_of[id(w)], [c.kind for c in calls], source=w)
        for i, x in enumerate(group):
            columns[pg_text(x)] = len(pre.types) + i
    final = plan

    def hook(node):
        if isinstance(node, exp.Window):
            i = columns[pg_text(node)]
            return E.Col(i, final.types[i], final.names[i])
        return None
    return plan, hook


def _window_arg(fn, column):
    """The input column of window call ``fn``: None for count(*) and the ranking functions."""
    if type(fn) in _NAV_WINDOW:
        return None if _NAV_WINDOW[type(fn)] in ("rank", "dense_rank", "percent_rank", "cume_dist", "ntile") \
            else column(fn.this)
    return None if isinstance(fn.this, exp.Star) else column(fn.this)


def _nav_call(w, arg, schema, binder) -> P.WindowCall:
    """The WindowCall of a ranking / offset / value window function: its constants bound and
    checked (ntile's buckets, lag/lead's offset and default, nth_value's n must be constants;
    lag/lead's default takes the argument's type)."""
    fn = w.this
    kind = _NAV_WINDOW[type(fn)]

    def const(node, dtype, what):
        e = binder.bind_as(node, dtype)
        if not isinstance(e, E.Lit):
            raise error_at(UnsupportedError, f"{kind}'s {what} must be a constant", node)
        if e.data_type != dtype:
            e = binder.coerce(e, dtype, node)
            if not isinstance(e, E.Lit):
                value = e.eval([], 1)
                return value[0].as_py() if hasattr(value, "__len__") else value.as_py()
        return e.value

    params = ()
    if kind == "ntile":
        params = (const(fn.this, DataType.INT, "bucket count"),)
    elif kind in ("lag", "lead"):
        offset = fn.args.get("offset")
        default = fn.args.get("default")
        arg_type = schema.types[arg]
        params = (1 if offset is None else const(offset, DataType.INT, "offset"),
                  None if default is None else const(default, arg_type, "default"))
    elif kind == "nth_value":
        params = (const(fn.args.get("offset"), DataType.INT, "n"),)
    try:
        ret = bind_call(kind, arg, params, schema).return_type
    except ExecutorError as e:
        raise error_at(UnsupportedError, f"{kind}() OVER: {e}", w) from None
    return P.WindowCall(kind, arg, ret, f"{kind}({'' if arg is None else f'${arg}'})", params)


def _pre(plan: P.Node, exprs, width: int) -> P.Node:
    """``plan``, or a Project of it adding the computed window inputs ``exprs[width:]`` (and
    making hidden columns visible, so the window columns come after all of them)."""
    if len(exprs) == width and plan.n_visible == width:
        return plan
    return P.Project(plan, exprs, list(plan.names) + [f"_w{i}" for i in range(len(exprs) - width)])


def rank_filter(plan: P.Node) -> P.Node:
    """A Filter on the rank of a row-number subquery as a ranked group TopN (module docstring);
    any other plan unchanged."""
    if not (isinstance(plan, P.Filter) and isinstance(plan.input, P.Project)
            and isinstance(plan.input.input, P.RowNumber)):
        return plan
    proj, rn = plan.input, plan.input.input
    rn_col = len(rn.types) - 1
    rn_at = {i for i, e in enumerate(proj.exprs) if isinstance(e, E.Col) and e.index == rn_col}
    lo, hi, rest, found = 1, None, [], False
    for c in _conjuncts(plan.condition):
        bound = _rank_bound(c, rn_at)
        if bound is None:
            rest.append(c)
            continue
        found = True
        op, v = bound
        if op in ("<", "<="):
            v = v - 1 if op == "<" else v
            hi = v if hi is None else min(hi, v)
        elif op in (">", ">="):
            lo = max(lo, v + 1 if op == ">" else v)
        else:
            lo, hi = max(lo, v), v if hi is None else min(hi, v)
    if not found:
        return plan
    limit = None if hi is None else max(0, hi - lo + 1)
    top = P.TopN(rn.input, rn.order or default_order(rn.input), limit, lo - 1, rn.partition, rank=True,
                 rank_name=rn.names[-1])
    out = P.Project(top, proj.exprs[:proj.n_visible], proj.names[:proj.n_visible])
    if rest:
        out = P.Filter(out, rest[0] if len(rest) == 1 else E.And(*rest))
    return out


def push_rank_filter(plan: P.Node, scope, conjuncts, params) -> tuple:
    """``(plan, remaining conjuncts)``: a FROM item ``plan`` (a row-number subquery, resolved by
    ``scope``) of a FROM whose joins are all inner, with the WHERE conjuncts that name only its
    columns, qualified by its alias (so never ambiguous), applied to it first -- as
    :func:`rank_filter` over it when they bound its rank. Filtering one side below an inner
    join keeps the join's result, and a rank filter is only a group top-N on the subquery
    itself. Anything else: unchanged."""
    if not (isinstance(plan, P.Project) and isinstance(plan.input, P.RowNumber)):
        return plan, conjuncts
    tables = scope.tables()
    taken, rest = [], []
    for c in conjuncts:
        cols = list(c.find_all(exp.Column))
        if cols and not any(True for _ in c.find_all(exp.Subquery, exp.Select, exp.Exists, exp.Window)) and \
                all(_name(col.args.get("table")) in tables for col in cols):
            try:
                taken.append((c, ExprBinder(scope, params, context="WHERE")._bool(c)))
                continue
            except (BindError, UnsupportedError):
                pass   # the normal WHERE reports it
        rest.append(c)
    if not taken:
        return plan, conjuncts
    bound = [b for _, b in taken]
    out = rank_filter(P.Filter(plan, bound[0] if len(bound) == 1 else E.And(*bound)))
    if isinstance(out, P.Filter) and out.input is plan:
        return plan, conjuncts   # no rank bound among them
    return out, rest


def drop_unused_rank(plan: P.Node, exprs) -> P.Node:
    """``plan`` (a select's FROM/WHERE, which ``exprs`` read) with a ranked TopN from
    :func:`rank_filter` made unranked when nothing reads its rank: the rank column of the
    Project above it becomes a NULL constant (its index stays), and a row entering or leaving
    the top of a group no longer updates the rank of every row below it."""
    filt = plan if isinstance(plan, P.Filter) else None
    proj = filt.input if filt is not None else plan
    if not (isinstance(proj, P.Project) and isinstance(proj.input, P.TopN) and proj.input.rank):
        return plan
    top = proj.input
    rank_col = len(top.types) - 1
    at = {i for i, e in enumerate(proj.exprs) if rank_col in e.column_refs()}
    used = set().union(*[e.column_refs() for e in exprs]) if exprs else set()
    if filt is not None:
        used |= filt.condition.column_refs()
    if at & used:
        return plan
    plain = P.TopN(top.input, top.order, top.limit, top.offset, top.group)
    new_exprs = [E.Lit(None, e.data_type) if i in at else e for i, e in enumerate(proj.exprs[:proj.n_visible])]
    out = P.Project(plain, new_exprs, proj.names[:proj.n_visible])
    return P.Filter(out, filt.condition) if filt is not None else out


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


def _rank_bound(cond, rn_at) -> tuple | None:
    """``(op, n)`` if ``cond`` is ``rn op n`` (or ``n op rn``) for an integer constant ``n``."""
    if not isinstance(cond, E.Cmp) or cond.op not in _FLIP:
        return None
    left, right = _strip(cond.left), _strip(cond.right)
    if isinstance(left, E.Col) and left.index in rn_at and _int_lit(right):
        return cond.op, right.value
    if isinstance(right, E.Col) and right.index in rn_at and _int_lit(left):
        return _FLIP[cond.op], left.value
    return None


_INTS = (DataType.SMALLINT, DataType.INT, DataType.BIGINT)


def _strip(e):
    """``e`` without casts between integer types (they keep a rank's value)."""
    while isinstance(e, E.Cast) and e.data_type in _INTS and e.arg.data_type in _INTS:
        e = e.arg
    return e


def _int_lit(e) -> bool:
    return isinstance(e, E.Lit) and isinstance(e.value, int) and not isinstance(e.value, bool)


def _conjuncts(cond) -> list:
    if type(cond) is E.And:
        return [c for a in cond.args for c in _conjuncts(a)]
    return [cond]


def stream_row_numbers(plan: P.Node) -> P.Node:
    """``plan`` with each RowNumber a rank filter did not turn into a TopN made an OverWindow
    computing ``row_number`` (same columns, same tie order: the input's stream key), so an MV
    may select ``ROW_NUMBER() OVER (...)`` itself; the nodes above are rewired in place."""
    done: dict = {}

    def convert(n):   # once per node: a parent's ``input`` and ``inputs`` must name the same one
        if id(n) not in done:
            call = P.WindowCall("row_number", None, DataType.BIGINT, "row_number()")
            out = P.OverWindow(n.input, n.partition, n.order, [call], ("range", None), [n.names[-1]],
                               source=n.source)
            out.n_visible = n.n_visible
            done[id(n)] = out
        return done[id(n)]
    if isinstance(plan, P.RowNumber):
        plan = convert(plan)
    for node in P.walk(plan):
        for attr, value in list(vars(node).items()):
            if isinstance(value, P.RowNumber):
                setattr(node, attr, convert(value))
            elif isinstance(value, (tuple, list)) and any(isinstance(v, P.RowNumber) for v in value):
                setattr(node, attr, type(value)(convert(v) if isinstance(v, P.RowNumber) else v for v in value))
    return plan


def check_streamable(plan: P.Node) -> None:
    """UnsupportedError for what a stream plan cannot run: a RowNumber (module docstring)."""
    for n in P.walk(plan):
        if isinstance(n, P.RowNumber):
            raise error_at(UnsupportedError, "the window function ROW_NUMBER() OVER is supported in a materialized "
                                             "view only as a group top-N: selected in a FROM subquery whose rank "
                                             "an outer WHERE bounds (WHERE rn <= N)", n.source)
