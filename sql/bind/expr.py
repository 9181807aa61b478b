"""Scalar expression binding: a sqlglot expression + a :class:`Scope` -> a typed
:mod:`stream.expr` tree (Postgres typing for the supported types).

Job: resolve column names (unknown -> BindError, ambiguous -> BindError), type literals and
``$n`` parameters (bound as values, never text), resolve untyped string literals and NULLs
against the other operand's type, and map each supported operator or function to a
``stream.expr`` node (``IN`` -> OR of ``=``, ``BETWEEN`` -> AND, ``NULLIF`` -> CASE, ``||`` ->
NULL-propagating concat; with an array operand ``array_cat``/``array_append``/``array_prepend``),
arrays (``ARRAY[...]``, ``a[i]`` / ``a[lo:hi]`` with sqlglot's 0-based shift undone, ``x op ANY /
ALL (array)``, ``@> <@ &&``, the array functions with their element arguments typed from the
array: :mod:`stream.expr_array`). Anything else raises UnsupportedError naming the construct and its
position. ``hook`` lets the aggregate binder replace GROUP BY expressions and aggregate calls
by columns of the Agg output before normal binding.

Invariants: every returned node has its ``data_type``; errors carry the node's position;
nesting deeper than ``MAX_DEPTH`` raises SqlError (never RecursionError); parentheses and
aliases do not count as levels (the parser bounds parentheses to ``MAX_DEPTH`` on its own).

Callers: :mod:`sql.bind.select`, :mod:`sql.statements` (INSERT values, UPDATE, DELETE).
"""

from __future__ import annotations

import contextvars
import datetime
import decimal
import difflib
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from relational.types import DataType, TypeKind
from stream.errors import ExpressionError
from stream import expr as E
from stream.expr_jsonb_cmp import JsonbCmp
from stream.expr_time import TimeArith, is_temporal

from sql import types as T
from sql.errors import BindError, SqlError, UnsupportedError, error_at

MAX_DEPTH = 200
_JSONB_NODES = (exp.JSONExtract, exp.JSONExtractScalar, exp.JSONBExtract, exp.JSONBExtractScalar,
                exp.JSONBContainsTopKey, exp.ArrayContainsAll, exp.ArrayContainedBy, exp.Lambda,
                exp.JSONBContainsAnyTopKeys, exp.JSONBContainsAllTopKeys, exp.JSONBDeleteAtPath,   # ?| ?& #-
                exp.JSONBPathExists)   # @? (refused: jsonpath)
#: JSONB functions whose leading arguments take these types (an untyped literal becomes one)
_JSONB_ARGS = {"jsonb_typeof": (DataType.JSONB,), "jsonb_array_length": (DataType.JSONB,),
               "jsonb_contains": (DataType.JSONB, DataType.JSONB), "jsonb_exists": (DataType.JSONB,),
               "jsonb_concat": (DataType.JSONB, DataType.JSONB), "jsonb_extract_path": (DataType.JSONB,),
               "jsonb_extract_path_text": (DataType.JSONB,), "jsonb_strip_nulls": (DataType.JSONB,),
               "jsonb_set": (DataType.JSONB, DataType.VARCHAR, DataType.JSONB, DataType.BOOLEAN),
               "jsonb_insert": (DataType.JSONB, DataType.VARCHAR, DataType.JSONB, DataType.BOOLEAN),
               "jsonb_set_lax": (DataType.JSONB, DataType.VARCHAR, DataType.JSONB, DataType.BOOLEAN, DataType.VARCHAR),
               "jsonb_pretty": (DataType.JSONB,),
               "jsonb_object": (DataType.list(DataType.VARCHAR), DataType.list(DataType.VARCHAR))}
#: set-returning JSONB functions: in FROM (sql/bind/jsonb_rows.py) and a select list (sql/bind/jsonb_select.py)
_JSONB_ROWS = ("jsonb_array_elements", "jsonb_array_elements_text", "jsonb_each", "jsonb_each_text",
               "jsonb_object_keys")


@dataclass
class ScopeCol:
    table: str | None
    name: str
    index: int
    dtype: DataType
    unqualified: bool = True   # False: reachable only as table.name (USING's right copy)


class Scope:
    """The columns an expression may name: ``(table alias, name) -> input column index``."""

    def __init__(self, cols=()):
        self.cols = list(cols)

    def shifted(self, offset: int) -> Scope:
        return Scope([ScopeCol(c.table, c.name, c.index + offset, c.dtype, c.unqualified) for c in self.cols])

    def __add__(self, other: Scope) -> Scope:
        return Scope(self.cols + other.cols)

    def resolve(self, name: str, table: str | None, node) -> ScopeCol:
        found = [c for c in self.cols if c.name == name and (c.table == table if table else c.unqualified)]
        if not found:
            full = f"{table}.{name}" if table else name
            raise error_at(BindError, f"column {full!r} does not exist", node)
        if len(found) > 1:
            raise error_at(BindError, f"column reference {name!r} is ambiguous", node)
        return found[0]

    def tables(self) -> set:
        return {c.table for c in self.cols}


_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(|$)")
_STATEMENT_HEAD = re.compile(r"\s*((?:[A-Z]+)(?:\s+(?:TABLE|INDEX|VIEW|MATERIALIZED\s+VIEW|SCHEMA|DATABASE|"
                             r"FUNCTION|SEQUENCE|TYPE|COLUMN))?)\b")


def spelled(node) -> str:
    """The construct ``node`` stands for as a user writes it in SQL -- never a sqlglot class
    name: a function's name in lower case as Postgres spells it (sqlglot's ``TimeToStr`` is
    ``to_char``, ``GroupConcat`` ``string_agg``, ``CurrentTimestamp`` ``current_timestamp``), a
    statement's (a node without parent) leading keywords (``TruncateTable`` is ``TRUNCATE
    TABLE``, ``Alter`` ``ALTER TABLE``), else the first words
    of the node's Postgres text."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    try:
        text = node.sql(dialect="postgres")
    except Exception:   # a node sqlglot cannot print: its key is the best name left
        return node.key.replace("_", " ").lower()
    if isinstance(node, (exp.Func, exp.Window, exp.WithinGroup)):
        m = _HEAD.match(text)   # NAME(...) or a bare keyword; an operator (->, @>) keeps its text
        bare = m is not None and not text[m.end() - 1:].startswith("(")
        if m and (bare or _closes_at(text, m.end() - 1) == len(text.rstrip()) - 1):
            return m.group(1).lower()
    elif node.parent is None:   # a statement
        m = _STATEMENT_HEAD.match(text.upper())
        return re.sub(r"\s+", " ", m.group(1)) if m else text[:40]
    return text if len(text) <= 40 else text[:37] + "..."


def refused_name(node) -> str:
    """:func:`spelled` for a refusal's message: when sqlglot read a function of another dialect
    (``count_if``, ``if``, ``date_diff``, ``array_contains``) and renders it as something else in
    Postgres (``SUM(CASE ...)``, ``CASE WHEN ...``, ``CAST(AGE(...))``), the function's own SQL
    name -- the one the user wrote, or its dialect's spelling -- not the rendering's head."""
    name = spelled(node)
    if not isinstance(node, exp.Func) or isinstance(node, exp.Anonymous):
        return name
    head = name if name.isidentifier() else None
    try:
        back = sqlglot.parse_one(f"SELECT {head}(1, 2)", read="postgres",
                                 error_level=ErrorLevel.IGNORE).expressions[0] if head else None
    except Exception:   # noqa: BLE001 -- the rendering's head is no function of Postgres
        back = None
    if back is not None and type(back) is type(node):
        return name
    return type(node).sql_name().lower()


def _closes_at(text: str, at: int) -> int:
    """The offset of the ``)`` closing the ``(`` at ``at`` (quoted text skipped), else -1."""
    depth, quote = 0, None
    for i in range(at, len(text)):
        c = text[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def near_names(name: str, known) -> str:
    """A hint naming the known names closest to ``name`` ("" when none is near)."""
    close = difflib.get_close_matches(name, sorted(k for k in known if k.isidentifier()), n=3, cutoff=0.7)   # not
    # an internal name (a space in it: "jsonb_each keys")
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _name(ident) -> str:
    if ident is None:
        return None
    if isinstance(ident, exp.Identifier):
        return ident.this if ident.quoted else ident.this.lower()
    return str(ident.name if hasattr(ident, "name") else ident).lower()


def conjuncts(node) -> list:
    """The AND-ed terms of a sqlglot condition (parenthesized ANDs flattened; None: none)."""
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        inner = node.this
        return conjuncts(inner) if isinstance(inner, exp.And) else [node]
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


class ExprBinder:
    """Binds expressions of one statement (``params``: the bound parameter values)."""

    def __init__(self, scope: Scope, params=(), hook=None, context: str = "expression", subquery=None):
        self.scope, self.params, self.hook, self.context = scope, list(params), hook, context
        self.subquery = subquery   # binds a scalar subquery / EXISTS (sql.bind.subquery), or None
        self.depth = 0

    def bind(self, node) -> E.Expr:
        # parentheses and aliases are no level of the tree (sql.parse already bounds parentheses
        # at MAX_DEPTH): SELECT ((...(a)...)) with MAX_DEPTH of them binds, as docs/sql.md says
        level = not isinstance(node, (exp.Paren, exp.Alias))
        self.depth += level
        if self.depth > MAX_DEPTH:
            self.depth -= level
            raise error_at(SqlError, f"expression nests deeper than {MAX_DEPTH} levels", node)
        try:
            if self.hook is not None:
                out = self.hook(node)
                if out is not None:
                    return out
            try:
                out = self._bind(node)
            except ExpressionError as exc:
                raise error_at(BindError, str(exc).split(" (in ")[0], node) from None
            if getattr(out, "node", None) is None:   # where a data error in it is reported
                out.node = node
            return out
        finally:
            self.depth -= level

    # --- literals -------------------------------------------------------------------------------

    def literal(self, node):
        """``(value, DataType, untyped)`` for a literal/parameter node, or None."""
        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Null):
            return None, None, True
        if isinstance(node, exp.Boolean):
            return bool(node.this), DataType.BOOLEAN, False
        if isinstance(node, exp.RawString):   # $$dollar-quoted$$ text: a string constant
            return node.this, DataType.VARCHAR, True
        if isinstance(node, exp.Literal):
            text = node.this
            if node.is_string:
                return text, DataType.VARCHAR, True
            if any(ch in text for ch in ".eE") or len(text.lstrip("0")) > 19:   # Postgres: a NUMERIC constant
                return _numeric_literal(text, node), DataType.DECIMAL, False
            value = int(text)   # at most 19 digits: never Python's 4,300-digit limit
            return value, T.literal_type(value), False
        if isinstance(node, exp.Parameter) and node.this is not None and node.this.name.isdigit():
            n = int(node.this.name)
            if not 1 <= n <= len(self.params):
                raise error_at(BindError, f"there is no parameter ${n} ({len(self.params)} given)", node)
            value = self.params[n - 1]
            if value is None:
                return None, None, True
            return value, T.literal_type(value), isinstance(value, str)
        if isinstance(node, exp.Neg):
            inner = self.literal(node.this)
            if inner is not None and inner[1] is not None and T.is_numeric(inner[1]) and not inner[2]:
                value = -inner[0]
                return value, T.literal_type(value) if isinstance(value, int) else inner[1], False
        return None

    def _lit(self, value, dtype, node) -> E.Lit:
        try:
            return E.Lit(value, dtype)
        except (ValueError, TypeError, OverflowError) as exc:
            raise error_at(BindError, f"invalid {dtype.sql_name()} value {value!r}: {exc}", node) from None

    def bind_as(self, node, dtype: DataType) -> E.Expr:
        """Bind ``node`` where a ``dtype`` is expected: untyped strings/NULLs take that type."""
        lit = self.literal(node)
        if lit is not None and lit[2]:
            value = lit[0]
            if value is None:
                return E.Lit(None, dtype)
            try:
                return self._lit(T.parse_text(value, dtype), dtype, node)
            except (ValueError, TypeError) as exc:
                if dtype.kind == TypeKind.JSONB:   # invalid JSON is a data error at the literal (22P02)
                    from sql.errors import ExecutionError
                    raise error_at(ExecutionError, str(exc), node) from None
                if isinstance(exc, (T.OutOfRange, T.IntervalOutOfRange)) or "overflows numeric" in str(exc):
                    raise error_at(BindError, str(exc), node) from None
                raise error_at(BindError, f"invalid input syntax for type {dtype.sql_name()}: {value!r}",
                               node) from None
        if dtype.kind == TypeKind.DECIMAL:
            number = _numeric_literal_text(node)
            if number is not None:  # Postgres: 0.25 is a NUMERIC constant, exact when stored
                try:
                    return self._lit(T.parse_text(number, dtype), dtype, node)
                except ValueError as exc:
                    raise error_at(BindError, str(exc), node) from None
        return self.bind(node)

    def bind_pair(self, left, right):
        """Both operands, an untyped side taking the typed side's type."""
        ll, rl = self.literal(left), self.literal(right)
        if ll is not None and ll[2] and not (rl is not None and rl[2]):
            r = self.bind(right)
            return self.bind_as(left, r.data_type), r
        if rl is not None and rl[2] and not (ll is not None and ll[2]):
            lft = self.bind(left)
            return lft, self.bind_as(right, lft.data_type)
        return self.bind(left), self.bind(right)

    def coerce(self, e: E.Expr, dtype: DataType, node) -> E.Expr:
        if e.data_type == dtype:
            return e
        if isinstance(e, E.Lit) and e.value is None:
            return E.Lit(None, dtype)
        if T.can_implicit_cast(e.data_type, dtype):
            return E.Cast(e, dtype)
        raise error_at(BindError, f"cannot use {e.data_type.sql_name()} where {dtype.sql_name()} is expected", node)

    def unify(self, exprs, nodes, what: str):
        """Cast ``exprs`` to their common supertype (CASE, COALESCE, IN)."""
        typed = [e for e in exprs if not (isinstance(e, E.Lit) and e.value is None and e.data_type == DataType.VARCHAR)]
        target = typed[0].data_type if typed else DataType.VARCHAR
        for e, n in zip(typed[1:], nodes):
            sup = T.common_supertype(target, e.data_type)
            if sup is None:
                raise error_at(BindError, f"{what} types {target.sql_name()} and {e.data_type.sql_name()} "
                                          "cannot be matched", n)
            target = sup
        return [self.coerce(e, target, n) for e, n in zip(exprs, nodes)], target

    # --- the dispatch -----------------------------------------------------------------------------

    def _bind(self, node) -> E.Expr:
        lit = self.literal(node)
        if lit is not None:
            value, dtype, untyped = lit
            if value is None:
                return E.Lit(None, DataType.VARCHAR)
            return self._lit(value, dtype, node)
        if isinstance(node, exp.Paren):
            return self.bind(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise error_at(UnsupportedError, "* is not allowed here", node)
            col = self.scope.resolve(_name(node.this), _name(node.args.get("table")), node)
            return E.Col(col.index, col.dtype, col.name)
        if isinstance(node, exp.Sub) and (jsonb := self._jsonb_binary(node, "-")) is not None:   # delete
            return jsonb
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}[type(node)]
            left, right = self.bind_pair(node.this, node.expression)
            if op in ("*", "/") and TypeKind.INTERVAL in (left.data_type.kind, right.data_type.kind):
                return E.IntervalScale(op, left, right)   # interval * / number (stream/expr_interval.py)
            if is_temporal(left.data_type, right.data_type):   # date/time arithmetic (stream/expr_time.py)
                return TimeArith(op, left, right)
            return E.Arith(op, left, right)
        if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            op = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}[type(node)]
            quantified = _array_quantifier(node.expression)
            if quantified is not None:   # x op ANY (array) / x op ALL (array)
                return self._quantified(op, node.this, *quantified, node)
            left, right = self.bind_pair(node.this, node.expression)
            return self._cmp(op, left, right, node)
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):   # IS [NOT] DISTINCT FROM: never NULL
            left, right = self.bind_pair(node.this, node.expression)
            same = E.Or(E.And(E.IsNull(left), E.IsNull(right)),
                        E.And(E.IsNull(left, True), E.IsNull(right, True), self._cmp("=", left, right, node)))
            return same if isinstance(node, exp.NullSafeEQ) else E.Not(same)
        if isinstance(node, exp.And):
            return E.And(self._bool(node.this), self._bool(node.expression))
        if isinstance(node, exp.Or):
            return E.Or(self._bool(node.this), self._bool(node.expression))
        if isinstance(node, exp.Not):
            return E.Not(self._bool(node.this))
        if isinstance(node, exp.Is):
            target = node.expression
            if isinstance(target, exp.Null):
                return E.IsNull(self.bind(node.this), bool(node.args.get("negate")))
            if isinstance(target, exp.Boolean):
                arg = self._bool(node.this)
                cond = E.Cmp("=", arg, E.Lit(bool(target.this), DataType.BOOLEAN))
                return E.And(E.IsNull(arg, True), cond) if not node.args.get("negate") else \
                    E.Not(E.And(E.IsNull(arg, True), cond))
            raise error_at(UnsupportedError, f"IS {target.sql()} is not supported", node)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            dtype = T.type_from_sqlglot(node.to)
            if dtype.kind == TypeKind.LIST and isinstance(node.this, exp.Array) and not node.this.expressions:
                return E.ArrayCtor([], dtype.elem)   # ARRAY[]::int[]
            typmod = T.typmod_from_sqlglot(node.to)   # NUMERIC(p, s): rounded and checked
            lit = self.literal(node.this)
            if lit is not None and lit[2]:
                bound = self.bind_as(node.this, dtype)
                return bound if typmod is None else E.Cast(bound, dtype, typmod)
            return E.Cast(self.bind(node.this), dtype, typmod)
        if isinstance(node, exp.Between):
            arg = node.this
            low = self._cmp(">=", *self.bind_pair(arg, node.args["low"]), node)
            high = self._cmp("<=", *self.bind_pair(arg, node.args["high"]), node)
            return E.And(low, high)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise error_at(UnsupportedError, "IN (subquery) is only supported as a WHERE condition "
                                                 "(alone or AND-ed with others)", node)
            items = node.expressions
            return E.Or(*(self._cmp("=", *self.bind_pair(node.this, item), item) for item in items))
        if isinstance(node, (exp.Like, exp.ILike)):
            return self._like(node, "\\")
        if isinstance(node, exp.Escape) and isinstance(node.this, (exp.Like, exp.ILike)):
            escape = self.literal(node.expression)
            if escape is None or (escape[0] is not None and escape[1] != DataType.VARCHAR):
                raise error_at(UnsupportedError, "LIKE ... ESCAPE needs a constant string", node.expression)
            return self._like(node.this, escape[0])
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.Coalesce):
            nodes = [node.this] + list(node.expressions)
            args, _ = self.unify(self._unknown_literals([self.bind(n) for n in nodes], nodes), nodes, "COALESCE")
            return E.Func("coalesce", *args)
        if isinstance(node, exp.Nullif):
            a, b = self.bind_pair(node.this, node.expression)
            return E.Case([(self._cmp("=", a, b, node), E.Lit(None, a.data_type))], a, a.data_type)
        if isinstance(node, exp.Neg):
            arg = self.bind(node.this)
            if arg.data_type.kind == TypeKind.INTERVAL:
                return E.Negate(arg)
            if not T.is_numeric(arg.data_type):
                raise error_at(BindError, f"operator does not exist: - {arg.data_type.sql_name()}", node)
            if arg.data_type.kind in (TypeKind.REAL, TypeKind.DOUBLE):   # -(0.0) is -0 in IEEE, not 0 - 0.0
                return E.Arith("*", E.Lit(-1.0, arg.data_type), arg)
            return E.Arith("-", E.Lit(0, arg.data_type), arg)
        if isinstance(node, exp.DPipe):   # Postgres' anytextcat: a non-text operand is its ::text
            array = self._array_concat(node)
            if array is not None:
                return array
            jsonb = self._jsonb_binary(node, "||")
            if jsonb is not None:
                return jsonb
            a, b = (e if e.data_type == DataType.VARCHAR else E.Cast(e, DataType.VARCHAR)
                    for e in (self.bind(node.this), self.bind(node.expression)))
            return E.Case([(E.Or(E.IsNull(a), E.IsNull(b)), E.Lit(None, DataType.VARCHAR))],
                          E.Func("concat", a, b), DataType.VARCHAR)
        if isinstance(node, exp.AggFunc) or (isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc)):
            raise error_at(BindError, f"aggregate functions are not allowed in {self.context}", node)
        if isinstance(node, exp.Array):
            return self._array(node)
        if isinstance(node, exp.Bracket):
            return self._subscript(node)
        if isinstance(node, (exp.Any, exp.All)):
            raise error_at(UnsupportedError, "ANY/SOME/ALL (subquery) is only supported as = ANY / <> ALL in a WHERE "
                                             "condition (alone or AND-ed)", node)
        if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
            if self.subquery is None:
                raise error_at(UnsupportedError, f"subqueries are not supported in {self.context}", node)
            return self.subquery(node, self)
        if isinstance(node, exp.Window):
            raise error_at(BindError, f"window functions are not allowed in {self.context}", node)
        if isinstance(node, _JSONB_NODES):   # ->, ->>, #>, #>>, @>, <@, ? (stream/expr_jsonb.py)
            bound = self._jsonb_op(node)
            if bound is not None:
                return bound
        if isinstance(node, (exp.ArrayContainsAll, exp.ArrayContainedBy, exp.ArrayOverlaps)):   # @> <@ && of arrays
            op = {exp.ArrayContainsAll: "@>", exp.ArrayContainedBy: "<@", exp.ArrayOverlaps: "&&"}[type(node)]
            left, right = self.bind_pair(node.this, node.expression)
            if left.data_type.kind == TypeKind.LIST and left.data_type != right.data_type:
                sup = T.common_supertype(left.data_type, right.data_type)
                if sup is not None:
                    left, right = self.coerce(left, sup, node), self.coerce(right, sup, node)
            return E.ArrayCompare(op, left, right)
        if isinstance(node, exp.Interval):
            return self._lit(interval_literal(node), DataType.INTERVAL, node)
        if isinstance(node, exp.Func):
            return self._func(node)
        if isinstance(node, exp.Filter):
            raise error_at(BindError, f"FILTER specified, but {spelled(node.this)} is not an aggregate function",
                           node)
        raise error_at(UnsupportedError, f"expression {spelled(node)!r} is not supported", node)

    def _jsonb_op(self, node):
        """A JSONB operator as its ``stream.expr_jsonb`` function; None when no operand is JSONB
        (``@>`` / ``<@`` of arrays are bound elsewhere). sqlglot reads ``j -> 'k'`` / ``j -> 1``
        as a JSON path of one key / subscript: turned back into the text / integer operand; inside
        a function's arguments it reads ``f(j -> 'k')`` as a lambda ``j -> 'k'``, turned back too."""
        if isinstance(node, exp.Lambda):
            if len(node.expressions) != 1 or not isinstance(node.expressions[0], exp.Identifier):
                return None
            node = exp.JSONExtract(this=exp.Column(this=node.expressions[0].copy()), expression=node.this.copy())
        if isinstance(node, (exp.ArrayContainsAll, exp.ArrayContainedBy)):
            left, right = self.bind_pair(node.this, node.expression)
            if DataType.JSONB not in (left.data_type, right.data_type):
                return None
            if isinstance(node, exp.ArrayContainedBy):
                left, right = right, left
            return self._jsonb_call("@>", [left, right], node)
        if isinstance(node, exp.JSONBPathExists):
            raise error_at(UnsupportedError, "operator @? is not supported (jsonpath is not: jsonb_path_* functions, "
                                             "@? and @@)", node)
        left = self.bind(node.this)
        if left.data_type != DataType.JSONB:
            return None
        operand = node.expression
        if isinstance(node, exp.JSONBContainsTopKey):
            return self._jsonb_call("?", [left, self.bind_as(operand, DataType.VARCHAR)], node)
        if isinstance(node, (exp.JSONBContainsAnyTopKeys, exp.JSONBContainsAllTopKeys, exp.JSONBDeleteAtPath)):
            name = {exp.JSONBContainsAnyTopKeys: "?|", exp.JSONBContainsAllTopKeys: "?&"}.get(type(node), "#-")
            return self._jsonb_call(name, [left, self.bind_as(operand, DataType.list(DataType.VARCHAR))], node)
        if isinstance(node, (exp.JSONBExtract, exp.JSONBExtractScalar)):
            name = "#>" if isinstance(node, exp.JSONBExtract) else "#>>"
            return self._jsonb_call(name, [left, self.bind_as(operand, DataType.VARCHAR)], node)
        if isinstance(operand, exp.JSONPath):
            parts = operand.expressions
            if len(parts) != 2 or not isinstance(parts[1], (exp.JSONPathKey, exp.JSONPathSubscript)) or \
                    not isinstance(parts[1].this, (str, int)):
                raise error_at(UnsupportedError, f"JSON operand {operand.sql(dialect='postgres')} is not supported",
                               operand)
            key = parts[1].this
            right = E.Lit(key, DataType.VARCHAR if isinstance(parts[1], exp.JSONPathKey) else DataType.INT)
        else:
            right = self.bind_as(operand, DataType.VARCHAR)
        name = "->" if isinstance(node, exp.JSONExtract) else "->>"
        return self._jsonb_call(name, [left, right], node)

    def _unknown_literals(self, exprs, nodes) -> list:
        """``exprs`` (bound from ``nodes``) with each untyped string literal read as the common
        type of the others (``COALESCE(ts, '2024-01-01')`` a TIMESTAMP, ``CASE ... THEN d ELSE
        '2024-01-01' END`` a DATE, ``COALESCE(j, '{}')`` a JSONB), as Postgres' select_common_type
        leaves unknown literals out of the choice and then reads them as the chosen type (text
        when every value is one; NULLs take any type). Types with no common one stay as they are:
        ``unify`` names them."""
        unknown = [_untyped(self, n) and self.literal(n)[0] is not None for n in nodes]
        typed = [e for e, u in zip(exprs, unknown)
                 if not u and not (isinstance(e, E.Lit) and e.value is None and e.data_type == DataType.VARCHAR)]
        if not typed or not any(unknown):
            return exprs
        target = typed[0].data_type
        for e in typed[1:]:
            target = T.common_supertype(target, e.data_type)
            if target is None:
                return exprs
        if target == DataType.VARCHAR:
            return exprs
        return [self.bind_as(n, target) if u else e for e, n, u in zip(exprs, nodes, unknown)]

    def _jsonb_binary(self, node, op):
        """``j || j2`` (an untyped literal beside a JSONB is one) and ``j - 'key'`` / ``j - n``;
        None when the left operand (``||``: neither) is not JSONB. Operands holding a subquery
        are left to the general path (they are bound once there)."""
        if node.find(exp.Select) is not None:
            return None
        left = None if _untyped(self, node.this) else self.bind(node.this)
        if op == "-":
            if left is None or left.data_type != DataType.JSONB:
                return None
            return self._jsonb_call(op, [left, self.bind_as(node.expression, DataType.VARCHAR)], node)
        right = None if _untyped(self, node.expression) else self.bind(node.expression)
        if DataType.JSONB not in (left and left.data_type, right and right.data_type):
            return None
        left = left if left is not None else self.bind_as(node.this, DataType.JSONB)
        right = right if right is not None else self.bind_as(node.expression, DataType.JSONB)
        if left.data_type != right.data_type:   # jsonb || text: Postgres' anytextcat, text
            return None
        return self._jsonb_call(op, [left, right], node)

    def _jsonb_call(self, name, args, node) -> E.Expr:
        try:
            return E.Func(name, *args)
        except ExpressionError:
            raise error_at(BindError, f"operator does not exist: {args[0].data_type.sql_name().lower()} {name} "
                                      f"{args[1].data_type.sql_name().lower()}", node) from None

    def _like(self, node, escape) -> E.Expr:
        pattern = self.literal(node.expression)
        if pattern is None or (pattern[0] is not None and pattern[1] != DataType.VARCHAR):
            raise error_at(UnsupportedError, "LIKE needs a constant string pattern", node.expression)
        arg = self.bind_as(node.this, DataType.VARCHAR)
        if arg.data_type != DataType.VARCHAR:
            raise error_at(BindError, f"operator does not exist: {arg.data_type.sql_name()} LIKE text", node)
        try:
            return E.Like(arg, pattern[0], bool(node.args.get("negate")), isinstance(node, exp.ILike), escape)
        except ExpressionError as exc:
            raise error_at(BindError, str(exc), node.expression) from None

    def _bool(self, node) -> E.Expr:
        e = self.bind_as(node, DataType.BOOLEAN)
        if e.data_type != DataType.BOOLEAN:
            raise error_at(BindError, f"argument must be BOOLEAN, not {e.data_type.sql_name()}", node)
        return e

    def _cmp(self, op, left, right, node) -> E.Expr:
        lt, rt = left.data_type, right.data_type
        if TypeKind.LIST in (lt.kind, rt.kind):   # array = array: element by element (stream/expr_array.py)
            if lt != rt:
                sup = T.common_supertype(lt, rt)
                if sup is None:
                    raise error_at(BindError, f"operator does not exist: {lt.sql_name()} {op} {rt.sql_name()}", node)
                left, right = self.coerce(left, sup, node), self.coerce(right, sup, node)
            return E.ArrayCompare(op, left, right)
        if lt != rt and not (E.is_numeric(lt) and E.is_numeric(rt)):
            sup = T.common_supertype(lt, rt)
            if sup is None:
                raise error_at(BindError, f"operator does not exist: {lt.sql_name()} {op} {rt.sql_name()}", node)
            left, right = self.coerce(left, sup, node), self.coerce(right, sup, node)
        if left.data_type == right.data_type == DataType.JSONB:   # Postgres' jsonb order (stream/expr_jsonb.py)
            return JsonbCmp(op, left, right)
        return E.Cmp(op, left, right)

    # --- arrays (stream/expr_array.py) -----------------------------------------------------------

    def _array(self, node) -> E.Expr:
        """``ARRAY[a, b, ...]``: the items unified to one element type (untyped literals and NULLs
        take the typed items' type; all untyped: text, as Postgres)."""
        items = list(node.expressions)
        if len(items) == 1 and isinstance(items[0], (exp.Select, exp.Subquery)):
            return self._array_subquery(items[0], node)
        if any(isinstance(i, (exp.Select, exp.Subquery)) for i in items):
            raise error_at(UnsupportedError, "ARRAY(subquery) is not supported here (use array_agg)", node)
        if not items:
            raise error_at(BindError, "cannot determine type of empty array (write ARRAY[]::int[])", node)
        typed = [self.bind(i) for i in items if not ((lit := self.literal(i)) is not None and lit[2])]
        bound = [self.bind_as(i, typed[0].data_type) if typed else self.bind(i) for i in items]
        bound, elem = self.unify(bound, items, "ARRAY")
        if elem.kind == TypeKind.LIST:
            raise error_at(UnsupportedError, "multidimensional arrays are not supported", node)
        return E.ArrayCtor(bound, elem)

    def _array_subquery(self, query, node) -> E.Expr:
        """``ARRAY(SELECT x FROM ... [WHERE ...] [ORDER BY ...])`` as Postgres: the rows' ``x`` in
        the subquery's order, ``{}`` when there is none -- bound as the scalar subquery
        ``(SELECT array_agg(x ORDER BY ...) FROM ...)`` with NULL read as ``{}``. Other shapes
        (LIMIT, DISTINCT, GROUP BY, aggregates, several columns) are refused by name."""
        sel = query.this if isinstance(query, exp.Subquery) else query
        item = sel.expressions[0] if isinstance(sel, exp.Select) and len(sel.expressions) == 1 else None
        value = item.this if isinstance(item, exp.Alias) else item
        plain = value is not None and not isinstance(value, exp.Star) and \
            not any(sel.args.get(k) for k in ("limit", "offset", "distinct", "group", "having", "with_", "with",
                                              "windows", "qualify", "fetch")) and \
            value.find(exp.AggFunc, exp.Window) is None
        if self.subquery is None or not plain:
            raise error_at(UnsupportedError, "ARRAY(subquery) is supported over one column of a plain SELECT [WHERE] "
                                             "[ORDER BY] (not with LIMIT, DISTINCT, GROUP BY or aggregates: use "
                                             "array_agg)", node)
        alias = _name(item.args["alias"]) if isinstance(item, exp.Alias) else None
        order = []
        for o in (sel.args.get("order").expressions if sel.args.get("order") else []):
            key = o.this
            if isinstance(key, exp.Literal) and not key.is_string and key.this == "1" or \
                    alias is not None and isinstance(key, exp.Column) and key.args.get("table") is None and \
                    _name(key.this) == alias:   # ORDER BY 1 / ORDER BY the alias: the value itself
                o = o.copy()
                o.set("this", value.copy())
            order.append(o.copy())
        arg = exp.Order(this=value.copy(), expressions=order) if order else value.copy()
        rewritten = sel.copy()
        rewritten.set("order", None)
        rewritten.set("expressions", [exp.ArrayAgg(this=arg)])
        bound = self.subquery(exp.Subquery(this=rewritten), self)
        if bound.data_type.kind != TypeKind.LIST:
            raise error_at(UnsupportedError, "ARRAY(subquery) is not supported here", node)
        return E.Func("coalesce", bound, E.ArrayCtor([], bound.data_type.elem))

    def _subscript(self, node) -> E.Expr:
        """``a[i]`` and ``a[lo:hi]``, 1-based as written. sqlglot's Postgres reader shifts an
        integer-typed subscript to 0-based (``a[1]`` arrives as ``a[0]``, ``a[n + 1]`` not at
        all, since ``n``'s type is unknown to it): :func:`_subscript_shifted` tells which, and
        the shift is undone here."""
        if len(node.expressions) != 1:
            raise error_at(UnsupportedError, "multidimensional subscripts are not supported", node)
        arr = self.bind(node.this)
        if arr.data_type.kind != TypeKind.LIST:
            raise error_at(BindError, f"cannot subscript type {arr.data_type.sql_name()} because it does not "
                                      "support subscripting", node)
        index = node.expressions[0]
        if isinstance(index, exp.Slice):
            lo, hi = (None if b is None else self.bind_as(b, DataType.INT)
                      for b in (index.this, index.expression))
            return E.ArraySlice(arr, lo, hi)
        i = self.bind_as(index, DataType.INT)
        if _subscript_shifted(node.this, index):
            i = E.Arith("+", i, E.Lit(1, i.data_type)) if not isinstance(i, E.Lit) else \
                E.Lit(None if i.value is None else i.value + 1, DataType.BIGINT if i.value is not None and
                      i.value + 1 >= 1 << 31 else i.data_type)
        return E.ArrayIndex(arr, i)

    def _array_concat(self, node):
        """``a || b`` with an array operand: ``array_cat`` (two arrays), ``array_append`` (array ||
        element) or ``array_prepend`` (element || array), as Postgres resolves ``||``; None when
        neither operand is an array (text concatenation)."""
        sides = [None if _untyped(self, n) else self.bind(n) for n in (node.this, node.expression)]
        kinds = [s.data_type.kind if s is not None else None for s in sides]
        if TypeKind.LIST not in kinds:
            return None
        if kinds[0] == kinds[1] or None in kinds:   # an untyped literal beside an array is an array
            return self._array_call("array_cat", [node.this, node.expression], node)
        if kinds[0] == TypeKind.LIST:
            return self._array_call("array_append", [node.this, node.expression], node)
        return self._array_call("array_prepend", [node.this, node.expression], node)

    def _quantified(self, op, left_node, quantifier, arr_node, node) -> E.Expr:
        """``x op ANY (array)`` / ``x op ALL (array)``: ``x`` and the elements meet at one type."""
        lit = self.literal(arr_node)
        if lit is not None and isinstance(lit[0], list) and all(v is None for v in lit[0]):
            left = self.bind(left_node)   # an empty or all-NULL array parameter has no element type: x's
            return E.ArrayCompare(op, left, self._lit(list(lit[0]), DataType.list(left.data_type), arr_node),
                                  quantifier)
        arr = self.bind(arr_node) if not _untyped(self, arr_node) else None
        if arr is None:   # x = ANY ('{1,2}'): the literal is an array of x's type
            left = self.bind(left_node)
            arr = self.bind_as(arr_node, DataType.list(left.data_type))
        else:
            if arr.data_type.kind != TypeKind.LIST:
                raise error_at(BindError, f"op ANY/ALL (array) requires array on right side, not "
                                          f"{arr.data_type.sql_name()}", arr_node)
            left = self.bind_as(left_node, arr.data_type.elem)
        elem, lt = arr.data_type.elem, left.data_type
        if lt != elem and not (E.is_numeric(lt) and E.is_numeric(elem)):
            sup = T.common_supertype(lt, elem)
            if sup is None:
                raise error_at(BindError, f"operator does not exist: {lt.sql_name()} {op} {elem.sql_name()}", node)
            left, arr = self.coerce(left, sup, node), self.coerce(arr, DataType.list(sup), node)
        return E.ArrayCompare(op, left, arr, quantifier)

    # array functions: name -> the role of each argument ("array", "elem" of the first array,
    # "int", "text")
    _ARRAY_ARGS = {
        "array_length": ("array", "int"), "array_lower": ("array", "int"), "array_upper": ("array", "int"),
        "cardinality": ("array",), "array_ndims": ("array",), "array_dims": ("array",),
        "array_position": ("array", "elem", "int"), "array_positions": ("array", "elem"),
        "array_append": ("array", "elem"), "array_prepend": ("elem", "array"), "array_cat": ("array", "array"),
        "array_remove": ("array", "elem"), "array_replace": ("array", "elem", "elem"),
        "array_to_string": ("array", "text", "text"), "string_to_array": ("text", "text", "text"),
        "regexp_match": ("text", "text", "text"), "regexp_split_to_array": ("text", "text", "text"),
    }

    def _array_call(self, name: str, arg_nodes, node) -> E.Expr:
        """An array function: the element arguments take the array's element type (or the array
        is widened to theirs, as Postgres resolves ``anyelement``); ``array_cat``'s two arrays
        meet at one type."""
        roles = self._ARRAY_ARGS[name]
        arg_nodes = [a for a in arg_nodes if a is not None]
        if len(arg_nodes) > len(roles):
            raise error_at(BindError, f"function {name} takes at most {len(roles)} arguments", node)
        bound = [None] * len(arg_nodes)
        arrays = [i for i, r in enumerate(roles[:len(arg_nodes)]) if r == "array"]
        typed_arrays = [i for i in arrays if not _untyped(self, arg_nodes[i])]
        for i in arrays:
            if _untyped(self, arg_nodes[i]) and typed_arrays and i not in typed_arrays:   # a || '{1,2}'
                bound[i] = self.bind_as(arg_nodes[i], self.bind(arg_nodes[typed_arrays[0]]).data_type)
                continue
            if _untyped(self, arg_nodes[i]):
                raise error_at(BindError, f"could not determine polymorphic type of {name}'s argument "
                                          "(cast it, e.g. '{1,2}'::int[])", arg_nodes[i])
            bound[i] = self.bind(arg_nodes[i])
            if bound[i].data_type.kind != TypeKind.LIST:
                raise error_at(BindError, f"function {name}({bound[i].data_type.sql_name().lower()}) does not "
                                          "exist (it takes an array)", arg_nodes[i])
        if len(arrays) == 2:
            both, _ = self.unify([bound[i] for i in arrays], [arg_nodes[i] for i in arrays], name)
            for i, b in zip(arrays, both):
                bound[i] = b
        for i, (a, role) in enumerate(zip(arg_nodes, roles)):
            if role == "int":
                bound[i] = self.bind_as(a, DataType.INT)
            elif role == "text":
                bound[i] = self.bind_as(a, DataType.VARCHAR)
            elif role == "elem":
                arr_at = arrays[0]
                elem = bound[arr_at].data_type.elem
                e = self.bind_as(a, elem)
                if e.data_type != elem:
                    sup = T.common_supertype(elem, e.data_type)
                    if sup is None:
                        raise error_at(BindError, f"function {name}({bound[arr_at].data_type.sql_name().lower()}, "
                                                  f"{e.data_type.sql_name().lower()}) does not exist", node)
                    e = self.coerce(e, sup, a)
                    bound[arr_at] = self.coerce(bound[arr_at], DataType.list(sup), arg_nodes[arr_at])
                bound[i] = e
        try:
            return E.Func(name, *bound)
        except ExpressionError as exc:
            raise error_at(BindError, exc.reason, node) from None

    def _case(self, node) -> E.Expr:
        subject = node.this
        conds, values, nodes = [], [], []
        for when in node.args.get("ifs") or []:
            if subject is not None:
                conds.append(self._cmp("=", *self.bind_pair(subject, when.this), when))
            else:
                conds.append(self._bool(when.this))
            values.append(self.bind(when.args["true"]))
            nodes.append(when)
        default = node.args.get("default")
        if default is not None:
            values.append(self.bind(default))
            nodes.append(default)
        value_nodes = [w.args["true"] for w in node.args.get("ifs") or []] + ([default] if default is not None else [])
        values, target = self.unify(self._unknown_literals(values, value_nodes), nodes, "CASE")
        else_ = values[len(conds)] if default is not None else None
        return E.Case(list(zip(conds, values[:len(conds)])), else_, target)

    def _call(self, name: str, arg_nodes, node) -> E.Expr:
        """``name(args)``: untyped literals take the first typed argument's type for
        ``greatest``/``least``/``age``, whose arguments are then unified to one type."""
        arg_nodes = [a for a in arg_nodes if a is not None]
        if name in self._UNIFIED:
            typed = [self.bind(a) for a in arg_nodes if not ((lit := self.literal(a)) is not None and lit[2])]
            if typed:
                bound = [self.bind_as(a, typed[0].data_type) for a in arg_nodes]
            else:
                bound = [self.bind(a) for a in arg_nodes]
            if name != "age":
                bound, _ = self.unify(bound, arg_nodes, name.upper())
        else:
            bound = [self.bind(a) for a in arg_nodes]
        if name == "trunc" and bound and bound[0].data_type.kind in T.INTEGERS:   # Postgres' implicit casts
            bound[0] = E.Cast(bound[0], DataType.DECIMAL if len(bound) == 2 else DataType.DOUBLE)
        if name in ("log", "sign", "ln", "log10", "exp") and bound and bound[0].data_type.kind in T.INTEGERS \
                and len(bound) == 1:
            bound[0] = E.Cast(bound[0], DataType.DOUBLE)
        if name in ("format", "concat_ws"):   # values as their text output (a boolean is t / f)
            bound = [b if b.data_type in (DataType.VARCHAR, DataType.BOOLEAN) else E.Cast(b, DataType.VARCHAR)
                     for b in bound]
        if name in ("log", "div") and len(bound) == 2:
            bound = [E.Cast(b, DataType.DECIMAL) if b.data_type.kind in T.INTEGERS else b for b in bound]
        try:
            return E.Func(name, *bound)
        except ExpressionError as exc:
            raise error_at(BindError, exc.reason, node) from None

    def _call_typed(self, name: str, bound, node) -> E.Expr:
        try:
            return E.Func(name, *bound)
        except ExpressionError as exc:
            raise error_at(BindError, exc.reason, node) from None

    def _volatile(self, node) -> E.Expr:
        """now() / current_timestamp / current_date / localtimestamp: the statement's clock, a
        constant of the statement; random(): a fresh double per row. Refused in a materialized
        view by the query binder (sql/bind/select.py), whose rows must not depend on when they
        are computed."""
        name = self._VOLATILE.get(type(node)) or node.name.lower()
        now = _statement_clock(node)
        if name in ("now", "statement_timestamp", "transaction_timestamp"):
            return E.Lit(now, DataType.TIMESTAMPTZ)
        if name == "localtimestamp":
            return E.Lit(now.replace(tzinfo=None), DataType.TIMESTAMP)
        if name == "current_date":
            return E.Lit(now.date(), DataType.DATE)
        if name == "random":
            return E.Func("random")
        raise error_at(UnsupportedError, f"{name} is not supported (TIME values are not supported; use now())", node)

    _FUNCS = {exp.Abs: "abs", exp.Round: "round", exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length",
              exp.Concat: "concat", exp.Substring: "substr", exp.Trim: "trim", exp.Ceil: "ceil",
              exp.Floor: "floor", exp.Sqrt: "sqrt", exp.Pow: "power"}

    # sqlglot classes whose Postgres name or argument order the generic path would miss:
    # class -> node -> (name, argument nodes)
    _SHAPES = {
        exp.Extract: lambda n: ("extract", [exp.Literal.string(n.this.name), n.expression]),
        exp.SplitPart: lambda n: ("split_part", [n.this, n.args.get("delimiter"), n.args.get("part_index")]),
        exp.Pad: lambda n: ("lpad" if n.args.get("is_left") else "rpad",
                            [n.this, n.expression] + ([n.args["fill_pattern"]] if n.args.get("fill_pattern") else [])),
        exp.RegexpReplace: lambda n: ("regexp_replace", [n.this, n.expression, n.args.get("replacement")]
                                      + ([n.args["modifiers"]] if n.args.get("modifiers") else [])),
        exp.RegexpCount: lambda n: ("regexp_count", [a for a in (n.this, n.expression, n.args.get("position"),
                                                                 n.args.get("parameters")) if a is not None]),
        exp.Initcap: lambda n: ("initcap", [n.this]),
        exp.Translate: lambda n: ("translate", [n.this, n.args.get("from_"), n.args.get("to")]),
        exp.StrPosition: lambda n: ("strpos", [n.this, n.args.get("substr")]),
        exp.Repeat: lambda n: ("repeat", [n.this, n.args.get("times")]),
        exp.Trunc: lambda n: ("trunc", [n.this] + ([n.args["decimals"]] if n.args.get("decimals") else [])),
        exp.Log: lambda n: ("log", [n.this] + ([n.expression] if n.expression is not None else [])),
        exp.Format: lambda n: ("format", [n.this] + list(n.expressions)),
        exp.Chr: lambda n: ("chr", list(n.expressions)),
        exp.ConcatWs: lambda n: ("concat_ws", list(n.expressions)),
    }
    # sqlglot's array function classes: class -> node -> (Postgres name, argument nodes)
    _ARRAY_SHAPES = {
        exp.ArraySize: lambda n: ("array_length", [n.this, n.expression]),
        exp.ArrayPosition: lambda n: ("array_position", [n.this, n.expression, n.args.get("zero_based")]),   # start
        exp.ArrayAppend: lambda n: ("array_append", [n.this, n.expression]),
        exp.ArrayPrepend: lambda n: ("array_prepend", [n.expression, n.this]),   # sqlglot: this is the array
        exp.ArrayConcat: lambda n: ("array_cat", [n.this] + list(n.expressions)),
        exp.ArrayRemove: lambda n: ("array_remove", [n.this, n.expression]),
        exp.StringToArray: lambda n: ("string_to_array", [n.this, n.expression, n.args.get("null")]),
        exp.ArrayToString: lambda n: ("array_to_string", [n.this, n.expression, n.args.get("null")]),
    }
    _VOLATILE = {exp.Rand: "random", exp.CurrentTimestamp: "now", exp.CurrentDate: "current_date",
                 exp.Localtimestamp: "localtimestamp", exp.CurrentTime: "current_time"}
    _UNIFIED = ("greatest", "least", "age")   # arguments of one type: untyped literals take it

    def _func(self, node) -> E.Expr:
        if type(node) in self._VOLATILE or (isinstance(node, exp.Anonymous) and node.name.lower() in
                                           ("now", "random", "statement_timestamp", "transaction_timestamp")):
            return self._volatile(node)
        if isinstance(node, (exp.ExplodingGenerateSeries, exp.Unnest, exp.Explode)) or \
                (isinstance(node, exp.Anonymous) and node.name.lower() in ("generate_series", "unnest")):
            name = spelled(node)
            where = "in a select list without aggregates or window functions" if name == "unnest" else \
                "alone in a select list without FROM"
            raise error_at(UnsupportedError, f"set-returning function {name} is supported in FROM "
                                             f"(FROM {name}(...) AS g(x)) and {where}, not here", node)
        shape = self._SHAPES.get(type(node))
        if isinstance(node, exp.Anonymous) and node.name.lower() in ("regexp_matches", "regexp_split_to_table"):
            raise error_at(UnsupportedError, f"set-returning function {node.name.lower()} is supported in FROM "
                                             "and in a select list (not with aggregates or window functions), not "
                                             "here (sql/bind/regexp_rows.py)", node)
        array_shape = self._ARRAY_SHAPES.get(type(node))
        if array_shape is not None:
            return self._array_call(*array_shape(node), node)
        if isinstance(node, exp.Anonymous) and node.name.lower() in self._ARRAY_ARGS:
            return self._array_call(node.name.lower(), list(node.expressions), node)
        if shape is not None or isinstance(node, (exp.Greatest, exp.Least)):
            name, args = shape(node) if shape is not None else \
                (spelled(node), [node.this] + list(node.expressions))
            return self._call(name, args, node)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "age" and len(node.expressions) == 1:
            # age(ts): from today's midnight (the statement's clock), as Postgres; batch only
            arg = self.bind_as(node.expressions[0], DataType.TIMESTAMP)
            midnight = datetime.datetime.combine(_statement_clock(node).date(), datetime.time())
            try:
                return E.Func("age", E.Lit(midnight, DataType.TIMESTAMP), arg)
            except ExpressionError as exc:
                raise error_at(BindError, exc.reason, node) from None
        if isinstance(node, exp.Anonymous) and node.name.lower() in self._UNIFIED:
            return self._call(node.name.lower(), list(node.expressions), node)
        if isinstance(node, (exp.JSONBContains, exp.JSONBExists)):   # sqlglot's nodes of these two calls
            contains = isinstance(node, exp.JSONBContains)
            second = node.expression if contains else node.args.get("path")
            if isinstance(second, exp.JSONPath) and len(second.expressions) == 2 and \
                    isinstance(second.expressions[1], exp.JSONPathKey):   # jsonb_exists(j, 'k'): a JSON path to it
                second = exp.Literal.string(str(second.expressions[1].this))
            return self._call_typed("jsonb_contains" if contains else "jsonb_exists",
                                    [self.bind_as(node.this, DataType.JSONB),
                                     self.bind_as(second, DataType.JSONB if contains else DataType.VARCHAR)], node)
        if isinstance(node, exp.Anonymous) and node.name.lower() == "to_jsonb" and len(node.expressions) == 1:
            from sql.bind.jsonb_select import whole_row   # to_jsonb(t) of a FROM item t: its row as an object
            row = whole_row(self, node.expressions[0])
            if row is not None:
                return row
        if isinstance(node, exp.Anonymous) and node.name.lower().startswith("jsonb_path_"):
            raise error_at(UnsupportedError, f"function {node.name.lower()} is not supported (jsonpath is not: "
                                             "jsonb_path_* functions, @? and @@)", node)
        if isinstance(node, exp.Anonymous) and node.name.lower() in _JSONB_ROWS:
            raise error_at(UnsupportedError, f"set-returning function {node.name.lower()} is supported in FROM "
                                             f"(FROM t, {node.name.lower()}(t.j) AS e) and as a select-list item, "
                                             "not here", node)
        if isinstance(node, exp.Anonymous) and node.name.lower() in _JSONB_ARGS:
            name, types = node.name.lower(), _JSONB_ARGS[node.name.lower()]
            return self._call_typed(name, [self.bind_as(a, t) for a, t in zip(node.expressions, types)]
                                    + [self.bind(a) for a in node.expressions[len(types):]], node)
        if isinstance(node, exp.Substring) and node.args.get("length") is None and \
                node.args.get("start") is not None and self.bind(node.args["start"]).data_type == DataType.VARCHAR:
            # substring(s FROM pattern) / substring(s, pattern): the first match's first group, else the
            # whole match (NULL without a match), as Postgres -- (regexp_match(s, pattern))[1]
            import sqlglot
            call = sqlglot.parse_one("SELECT (regexp_match(s, p))[1]", read="postgres").expressions[0]
            call.this.this.set("expressions", [node.this.copy(), node.args["start"].copy()])
            return self.bind(call)
        name = self._FUNCS.get(type(node))
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            args = list(node.expressions)
        else:
            args = [v for k, v in node.args.items() if v is not None and k not in ("safe", "coalesce")]
            flat = []
            for a in args:
                flat.extend(a if isinstance(a, list) else [a])
            args = flat
        if name is None:
            name = spelled(node)
            if not name.isidentifier():   # an operator sqlglot reads as a function (->, ->>, @>)
                own = refused_name(node) if re.match(r"(CASE|CAST)\b", name, re.I) else name
                if own.isidentifier():   # another dialect's function sqlglot rendered as CASE ... / CAST(...)
                    raise error_at(UnsupportedError, f"function {own} is not supported", node)
                raise error_at(UnsupportedError, f"expression {name!r} is not supported", node)
            if name not in E._FUNCS:
                name = refused_name(node)
                raise error_at(UnsupportedError, f"function {name} is not supported"
                                                 f"{near_names(name, E._FUNCS)}", node)
        if isinstance(node, exp.Trim):   # ltrim/rtrim/btrim and TRIM([LEADING|TRAILING|BOTH] c FROM s)
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(str(node.args.get("position") or "").upper(), "trim")
            args = [node.this] + ([node.expression] if node.expression is not None else [])
            if len(args) == 2 and not isinstance(self.bind(args[1]), E.Lit):
                raise error_at(UnsupportedError, "trim characters must be a constant", args[1])
        bound = [self.bind(a) for a in args if isinstance(a, exp.Expression)]
        if name == "round" and len(bound) == 2 and bound[0].data_type.kind in T.INTEGERS:
            bound[0] = E.Cast(bound[0], DataType.DECIMAL)   # Postgres: round(numeric, int)
        if name == "round" and len(bound) == 1 and bound[0].data_type.kind in T.INTEGERS:
            bound[0] = E.Cast(bound[0], DataType.DOUBLE)   # Postgres: round(integer) is round(double precision)
        try:
            return E.Func(name, *bound)
        except ExpressionError as exc:
            if "unknown function" in str(exc):
                raise error_at(UnsupportedError, f"function {name} is not supported{near_names(name, E._FUNCS)}",
                               node) from None
            raise error_at(BindError, exc.reason, node) from None


def _array_quantifier(node):
    """``("any" | "all", array node)`` when ``node`` is ``ANY (array)`` / ``SOME`` / ``ALL (array)``
    (sqlglot reads ``ALL (x)`` as a call to a function ``all``), None otherwise (a subquery's
    ``= ANY`` is sql.bind.subquery's)."""
    if isinstance(node, exp.Any) and not _is_query(node.this):
        return "any", node.this
    if isinstance(node, exp.All) and not _is_query(node.this):
        return "all", node.this
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("all", "some", "any") and len(node.expressions) == 1:
        return ("all" if node.name.lower() == "all" else "any"), node.expressions[0]
    return None


def _is_query(node) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, (exp.Select, exp.Subquery))


def _untyped(binder, node) -> bool:
    lit = binder.literal(node)
    return lit is not None and lit[2]


def _subscript_shifted(this, index) -> bool:
    """Whether sqlglot's Postgres reader moved the subscript ``index`` of ``this`` to 0-based:
    it does so when ``this`` may be an array and ``index`` is of an integer type by its own
    reading (constants and their arithmetic), by adding -1 and folding; an expression it cannot
    type (a column, a parameter) is left as written."""
    from sqlglot.optimizer.annotate_types import annotate_types
    target = annotate_types(this.copy(), dialect="postgres").type
    if target is not None and target.this not in (exp.DataType.Type.UNKNOWN, exp.DataType.Type.ARRAY):
        return False
    typed = annotate_types(index.copy(), dialect="postgres").type
    return typed is not None and typed.this in exp.DataType.INTEGER_TYPES


_CLOCK: contextvars.ContextVar = contextvars.ContextVar("hummock_statement_clock", default=None)


def new_statement_clock() -> None:
    """Start a statement's clock: the next now() reads a fresh time. ``sql.statements``'
    ``execute_statement`` calls this once per execution; until the next call every now() of
    the thread's statement (its WHERE, SET, VALUES, subqueries) is the same time."""
    _CLOCK.set(None)


def _statement_clock(node) -> datetime.datetime:
    """now(): one time for the whole statement (as Postgres' transaction time stamp is for a
    statement outside a transaction block): the first now() of an execution reads the clock,
    the others reuse it."""
    current = _CLOCK.get()
    if current is None:
        current = datetime.datetime.now(datetime.timezone.utc)
        _CLOCK.set(current)
    return current


def _numeric_literal(text: str, node) -> decimal.Decimal:
    """The NUMERIC a literal spells, range-checked before any digit is expanded (``1e1000000000``
    is refused here, never built): BindError "value overflows numeric format" at the literal
    beyond Postgres' 131072 digits before the point or 16383 after it."""
    try:
        return T.numeric_constant(text)
    except ValueError as exc:
        raise error_at(BindError, str(exc), node) from None


def _numeric_literal_text(node) -> str | None:
    """The text of a (possibly negated, parenthesized) numeric literal, else None."""
    sign = ""
    while isinstance(node, (exp.Paren, exp.Neg)):
        if isinstance(node, exp.Neg):
            sign = "" if sign else "-"
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return sign + node.this
    return None


def interval_literal(node: exp.Interval):
    """The Interval an ``INTERVAL '...' [field [TO field]]`` node spells (Postgres' reading,
    :func:`sql.types.parse_interval`); BindError at the literal when it does not."""
    unit = node.unit
    if unit is None:
        fields = None
    elif isinstance(unit, exp.IntervalSpan):
        fields = (unit.this.name.upper(), unit.expression.name.upper())
    elif isinstance(unit, exp.Var):
        fields = (unit.name.upper(),)
    else:
        raise error_at(UnsupportedError, f"interval field {unit.sql(dialect='postgres')} is not supported", node)
    if fields and not all(f in T.INTERVAL_FIELDS for f in fields):
        raise error_at(BindError, f"invalid interval field {' TO '.join(fields)}", node)
    text = node.this.name
    try:
        return T.parse_interval(text, fields)
    except ValueError as exc:
        raise error_at(BindError, str(exc), node) from None
