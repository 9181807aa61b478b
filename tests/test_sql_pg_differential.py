"""Differential test of the SQL frontend against a real PostgreSQL (issue 25, "the tests that stay").

Each example draws a random schema (2-3 tables ``t1..t3``, each ``k INT`` primary key, ``a INT``
and a random subset of typed columns whose name says the type, so equal names join: ``b1``
BIGINT, ``n1`` NUMERIC, ``f1``/``f2`` DOUBLE PRECISION, ``s1``/``s2`` VARCHAR, ``p1`` BOOLEAN,
``v1`` INTERVAL, ``ts1`` TIMESTAMP), NULL-heavy data, and a few queries from a typed grammar:
projections and filters, joins (inner/left/right/full with ON or USING, nested USING, comma
joins), aggregates (GROUP BY/HAVING, DISTINCT, FILTER, expressions over aggregates), scalar /
EXISTS / IN subqueries (uncorrelated, correlated, no-FROM), set operations
(UNION/INTERSECT/EXCEPT [ALL]), top-N (ORDER BY ... LIMIT/OFFSET, also as a subquery), group
top-N (ROW_NUMBER), FULL JOINs of aggregates, intervals and timestamps. Every query runs

  (a) as a batch SELECT through ``sql.connect(":memory:")``,
  (b) as a MATERIALIZED VIEW (created after the first data, then maintained under random
      INSERT/UPDATE/DELETE, compared after every FLUSH with ``SELECT * FROM mv``),
  (c) through PostgreSQL (tests/pg_server.py, fixture ``pg_server``),

and (a), (b) must equal (c) as multisets, compared type-normalised: integers, NUMERIC and
doubles as numbers with a relative tolerance of 1e-9, intervals by their span (a month of 30
days, as Postgres compares them), timestamps exactly. A top-N (ORDER BY ... LIMIT) compares
the ORDER BY columns only (the multiset of the first n sort keys does not depend on how ties
are broken); a batch SELECT with ORDER BY must also list those keys in Postgres' order.
Column names of a batch SELECT must be Postgres' (every computed item carries an alias).

Verdicts per statement:
- Postgres answers, Hummock answers: the answers must agree (else a failure).
- Postgres answers, Hummock refuses with a SQL error other than ``ExecutionError`` (unsupported,
  bind): the query is skipped and counted (``hypothesis.event``); the outer test requires most
  queries to be answered, so a generator drifting out of the supported subset fails.
- Postgres answers, Hummock raises ``ExecutionError`` or a non-SQL exception: a failure.
- Postgres raises a data error (class 22, e.g. overflow, division by zero): the batch SELECT
  and DML must raise ``ExecutionError`` (both leave the data unchanged); an MV is not compared at
  that point (it turns the failing value into NULL, RisingWave's non-strict mode) but must keep
  running.
- Postgres refuses (any other error): Hummock must refuse too (any ``SqlError``).

Generator features that main's code still answers wrongly are named in ``KNOWN_WRONG`` (each
one a finding in the project notes); the grammar leaves them out unless
``HUMMOCK_PG_ALL_FEATURES=1`` (``HUMMOCK_PG_SKIP=f1,f2`` leaves more out). Example counts follow
the hypothesis profile (tests/conftest.py): three times ``max_examples`` (180 under
``HYPOTHESIS_PROFILE=ci``, about a minute; each example is one small database and a few
queries). ``HUMMOCK_PG_SURVEY=path`` records every mismatch in that file instead of failing at
the first, to see all a change breaks at once.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import os
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sql
from relational.types import Interval
from stream.errors import ExpressionError

import psycopg  # noqa: E402  (test extras)

pytestmark = pytest.mark.postgres

# ---- features ----------------------------------------------------------------------------------

#: Every feature the grammar can switch. A query using a feature in KNOWN_WRONG is not generated
#: (unless HUMMOCK_PG_ALL_FEATURES=1); the rest always are.
FEATURES = (
    "using_outer",        # FULL/RIGHT JOIN ... USING: the merged column is COALESCE(l.a, r.a)
    "using_nested",       # SELECT * over nested JOIN ... USING: Postgres' column order
    "full_join_aggs",     # FULL JOIN of two single-row aggregates (in an MV)
    "corr_scalar_expr",   # correlated scalar subquery returning an expression over an aggregate
    "exists_no_from",     # EXISTS (SELECT outer_col) without FROM
    "interval_literals",  # INTERVAL literals with time parts, fractions, months
    "interval_ops",       # interval comparisons, unary minus, ts +/- interval, ts - ts
    "double_round",       # double -> integer casts and round(double): half to even
    "float_overflow",     # double arithmetic that overflows: an error, not inf
    "set_ops_all",        # INTERSECT ALL / EXCEPT ALL
    "numeric_set_ops",    # NUMERIC columns in EXCEPT/INTERSECT/UNION, where 1.5 and 1.50 meet
)
#: (finding 3 of the notes, NUMERIC 1.5 vs 1.50 in set operations, is fixed: numeric_set_ops is on)
KNOWN_WRONG: frozenset[str] = frozenset()
ALL_FEATURES = os.environ.get("HUMMOCK_PG_ALL_FEATURES", "") in ("1", "true", "yes")
#: HUMMOCK_PG_SKIP=feature,feature: leave more features out (to look past a known finding)
KNOWN_WRONG |= frozenset(f for f in os.environ.get("HUMMOCK_PG_SKIP", "").split(",") if f)


def on(feature: str) -> bool:
    assert feature in FEATURES, feature
    return ALL_FEATURES or feature not in KNOWN_WRONG


# ---- schema and data ---------------------------------------------------------------------------

#: optional columns: name -> type tag; a table takes a subset in this order
OPTIONAL = {"b1": "bigint", "n1": "numeric", "f1": "double", "s1": "text", "p1": "bool",
            "v1": "interval", "ts1": "timestamp", "f2": "double", "s2": "text", "h1": "smallint",
            "d1": "date"}
SQL_TYPE = {"int": "INT", "bigint": "BIGINT", "numeric": "NUMERIC", "double": "DOUBLE PRECISION",
            "text": "VARCHAR", "bool": "BOOLEAN", "interval": "INTERVAL", "timestamp": "TIMESTAMP",
            "smallint": "SMALLINT", "date": "DATE"}
NUMERIC_TYPES = ("int", "bigint", "numeric", "double")
ORDERABLE = ("int", "bigint", "numeric", "double", "text", "interval", "timestamp", "smallint", "date")
KEYS = range(0, 40)

SIMPLE_INTERVALS = ["1 day", "2 days", "-1 days", "0 days", "3 days", "10 days"]
RICH_INTERVALS = ["1 day 01:00:00", "1.5 days", "2 mons", "1 mon -2 days", "-3 hours", "00:30:00",
                  "36:00:00", "1 year 2 mons 3 days 04:05:06.5", "-1 days +02:00:00", "30 days",
                  "1 mon", "0.25 days", "90 minutes"]
DATES = ["2024-01-31", "2024-02-29", "2000-01-01", "1999-12-31", "2024-03-01"]
TIMESTAMPS = ["2024-01-31 12:00:00", "2024-02-29 00:00:00", "2023-12-31 23:59:59.5",
              "2000-01-01 00:00:00", "2024-03-01 06:30:00"]


@dataclasses.dataclass
class Table:
    name: str
    cols: list          # [(name, type tag)], k first

    def types(self):
        return dict(self.cols)

    def create_sql(self) -> str:
        body = ", ".join(f"{c} {SQL_TYPE[t]}" for c, t in self.cols)
        return f"CREATE TABLE {self.name} ({body}, PRIMARY KEY (k))"


def interval_texts():
    return SIMPLE_INTERVALS + (RICH_INTERVALS if on("interval_literals") else [])


def value_of(kind: str):
    base = {
        "int": st.one_of(st.integers(-4, 6), st.sampled_from([-20, 17, 100])),
        "bigint": st.sampled_from([0, 1, -1, 7, 10 ** 12, -(10 ** 12), 2 ** 40, 3_000_000_000]),
        "numeric": st.integers(-300, 300).map(lambda n: decimal.Decimal(n).scaleb(-2)),
        "double": st.one_of(st.integers(-20, 20).map(lambda n: n / 4),
                            st.sampled_from([3e9, -0.5, 2.5, 1e15 + 0.5])),
        "text": st.sampled_from(["", "a", "ab", "B", "ba", "abc", "a%b", "zz"]),
        "bool": st.booleans(),
        "interval": st.sampled_from(interval_texts()).map(lambda s: ("interval", s)),
        "timestamp": st.sampled_from(TIMESTAMPS).map(lambda s: ("timestamp", s)),
        "smallint": st.one_of(st.integers(-3, 3), st.sampled_from([32767, -32768, 200])),
        "date": st.sampled_from(DATES).map(lambda s: ("date", s)),
    }[kind]
    return st.one_of(st.none(), st.none(), base)      # NULL-heavy: about 1 in 3 when drawn


def literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, tuple):
        return f"{value[0].upper()} '{value[1]}'"
    if isinstance(value, float):
        return f"CAST({value!r} AS DOUBLE PRECISION)"
    return str(value)


@st.composite
def schemas(draw):
    tables = []
    for i in range(1, draw(st.integers(2, 3)) + 1):
        extra = draw(st.lists(st.sampled_from(sorted(OPTIONAL)), min_size=1, max_size=4, unique=True))
        cols = [("k", "int"), ("a", "int")] + [(c, OPTIONAL[c]) for c in OPTIONAL if c in extra]
        tables.append(Table(f"t{i}", cols))
    return tables


@st.composite
def insert_stmt(draw, table: Table, present: set):
    free = [k for k in KEYS if k not in present]
    if not free:
        return None
    keys = draw(st.lists(st.sampled_from(free), min_size=1, max_size=6, unique=True))
    present.update(keys)
    rows = []
    for k in keys:
        rows.append("(" + ", ".join([str(k)] + [literal(draw(value_of(t))) for _, t in table.cols[1:]]) + ")")
    return f"INSERT INTO {table.name} VALUES " + ", ".join(rows)


# ---- typed expressions ---------------------------------------------------------------------------

@dataclasses.dataclass
class Col:
    ref: str        # how the query refers to it
    type: str
    name: str       # its output name (for SELECT *)


def lit(draw, t: str) -> str:
    if t == "int":
        return str(draw(st.integers(-3, 5)))
    if t == "bigint":
        return f"CAST({draw(st.sampled_from([0, 2, 10 ** 12]))} AS BIGINT)"
    if t == "numeric":
        return draw(st.sampled_from(["1.5", "0.25", "-2.75", "100.0", "0.001"]))
    if t == "double":
        return f"CAST({draw(st.sampled_from(['0.5', '-1.25', '2', '0.1']))} AS DOUBLE PRECISION)"
    if t == "text":
        return literal(draw(st.sampled_from(["a", "b", "", "ab", "Z"])))
    if t == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if t == "interval":
        return f"INTERVAL '{draw(st.sampled_from(interval_texts()))}'"
    if t == "smallint":
        return f"CAST({draw(st.integers(-2, 3))} AS SMALLINT)"
    if t == "date":
        return f"DATE '{draw(st.sampled_from(DATES))}'"
    return f"TIMESTAMP '{draw(st.sampled_from(TIMESTAMPS))}'"


def expr(draw, scope, t: str, depth: int = 2) -> str:
    """A SQL expression of type tag ``t`` over the columns in ``scope``."""
    cols = [c.ref for c in scope if c.type == t]
    roll = draw(st.integers(0, 9))
    if depth <= 0:
        return draw(st.sampled_from(cols)) if cols and roll < 8 else lit(draw, t)
    if cols and roll < 4:
        return draw(st.sampled_from(cols))
    if roll < (5 if cols else 2):
        return lit(draw, t)
    return composite(draw, scope, t, depth)


def composite(draw, scope, t: str, depth: int) -> str:
    sub = lambda tt, d=depth - 1: expr(draw, scope, tt, d)  # noqa: E731
    return draw(st.sampled_from(_COMPOSITE[t](draw, sub)))()


def _int_ops(draw, sub):
    ops = [lambda: f"({sub('int')} + {sub('int')})", lambda: f"({sub('int')} - {sub('int')})",
           lambda: f"({sub('int')} * {sub('int')})", lambda: f"(- {sub('int')})",
           lambda: f"abs({sub('int')})", lambda: f"({sub('int')} / {draw(st.sampled_from(['2', '3', '-4']))})",
           lambda: f"({sub('int')} % 3)", lambda: f"length({sub('text')})",
           lambda: f"COALESCE({sub('int')}, {sub('int')})", lambda: f"NULLIF({sub('int')}, 0)",
           lambda: f"CASE WHEN {sub('bool')} THEN {sub('int')} ELSE {sub('int')} END",
           lambda: f"CAST({sub('numeric')} AS INT)",
           lambda: f"({sub('int')} / NULLIF({sub('int')}, 0))",
           lambda: f"({sub('smallint')} + {sub('int')})", lambda: f"({sub('date')} - {sub('date')})"]
    if on("double_round"):
        ops += [lambda: f"CAST({sub('double')} AS INT)", lambda: f"CAST(round({sub('double')}) AS INT)"]
    return ops


def _bigint_ops(draw, sub):
    return [lambda: f"({sub('bigint')} + {sub('int')})", lambda: f"({sub('bigint')} * 3)",
            lambda: f"CAST({sub('int')} AS BIGINT)", lambda: f"({sub('bigint')} - {sub('bigint')})",
            lambda: f"({sub('bigint')} % 7)", lambda: f"abs({sub('bigint')})"] + (
        [lambda: f"CAST({sub('double')} AS BIGINT)"] if on("double_round") else [])


def _numeric_ops(draw, sub):
    return [lambda: f"({sub('numeric')} + {sub('numeric')})", lambda: f"({sub('numeric')} * {sub('int')})",
            lambda: f"({sub('numeric')} - {sub('numeric')})", lambda: f"round({sub('numeric')}, 1)",
            lambda: f"round({sub('numeric')})", lambda: f"({sub('numeric')} / 4)",
            lambda: f"CAST({sub('int')} AS NUMERIC)", lambda: f"abs({sub('numeric')})",
            lambda: f"floor({sub('numeric')})", lambda: f"ceil({sub('numeric')})",
            lambda: f"({sub('numeric')} % 2)", lambda: f"COALESCE({sub('numeric')}, 0)",
            lambda: f"({sub('numeric')} / NULLIF({sub('numeric')}, 0))", lambda: f"round({sub('numeric')}, 2)",
            lambda: f"({sub('int')} / 3.0)"]


def _double_ops(draw, sub):
    ops = [lambda: f"({sub('double')} + {sub('double')})", lambda: f"({sub('double')} * {sub('double')})",
           lambda: f"({sub('double')} - {sub('int')})", lambda: f"({sub('double')} / 2)",
           lambda: f"CAST({sub('int')} AS DOUBLE PRECISION)", lambda: f"(- {sub('double')})",
           lambda: f"abs({sub('double')})", lambda: f"floor({sub('double')})",
           lambda: f"ceil({sub('double')})", lambda: f"({sub('double')} + {sub('numeric')})"]
    if on("double_round"):
        ops += [lambda: f"round({sub('double')})"]
    if on("float_overflow"):
        ops += [lambda: f"({sub('double')} * CAST(1e308 AS DOUBLE PRECISION))"]
    return ops


def _text_ops(draw, sub):
    return [lambda: f"({sub('text')} || {sub('text')})", lambda: f"upper({sub('text')})",
            lambda: f"lower({sub('text')})", lambda: f"substr({sub('text')}, {draw(st.integers(0, 2))}, 2)",
            lambda: f"COALESCE({sub('text')}, 'none')", lambda: f"CAST({sub('int')} AS VARCHAR)",
            lambda: f"concat({sub('text')}, {sub('int')})", lambda: f"replace({sub('text')}, 'a', 'xy')",
            lambda: f"CASE WHEN {sub('bool')} THEN {sub('text')} END",
            lambda: f"trim({sub('text')})", lambda: f"ltrim({sub('text')})", lambda: f"rtrim({sub('text')})",
            lambda: f"substr({sub('text')}, {draw(st.integers(-1, 3))})",
            lambda: f"CASE {sub('int')} WHEN 1 THEN 'one' WHEN 2 THEN {sub('text')} ELSE 'many' END"]


def _bool_ops(draw, sub):
    def compare():
        t = draw(st.sampled_from(ORDERABLE if on("interval_ops") else
                                 [x for x in ORDERABLE if x != "interval"]))
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return f"({sub(t)} {op} {sub(t)})"
    return [compare, compare, compare,
            lambda: f"({sub('int')} < {sub('double')})",
            lambda: f"({sub(draw(st.sampled_from(list(SQL_TYPE))))} IS NULL)",
            lambda: f"({sub(draw(st.sampled_from(list(SQL_TYPE))))} IS NOT NULL)",
            lambda: f"(NOT {sub('bool')})", lambda: f"({sub('bool')} AND {sub('bool')})",
            lambda: f"({sub('bool')} OR {sub('bool')})",
            lambda: f"({sub('int')} BETWEEN {sub('int')} AND {sub('int')})",
            lambda: f"({sub('int')} IN (1, 2, -3, NULL))", lambda: f"({sub('text')} LIKE 'a%')",
            lambda: f"({sub('text')} NOT LIKE '%b')", lambda: f"({sub('bool')} IS TRUE)",
            lambda: f"({sub('bool')} IS NOT FALSE)", lambda: f"({sub('text')} IN ('a', 'ab', 'zz'))",
            lambda: f"({sub('int')} NOT IN (1, NULL))", lambda: f"({sub('int')} NOT IN (0, 2))",
            lambda: f"({sub('text')} ILIKE 'A%')", lambda: f"({sub('text')} LIKE 'a!%%' ESCAPE '!')",
            lambda: f"({sub('int')} < {sub('numeric')})", lambda: f"({sub('bigint')} >= {sub('int')})",
            lambda: f"({sub('numeric')} = {sub('double')})"]


def _smallint_ops(draw, sub):
    return [lambda: f"({sub('smallint')} + {sub('smallint')})", lambda: f"({sub('smallint')} * {sub('smallint')})",
            lambda: f"(- {sub('smallint')})", lambda: f"abs({sub('smallint')})",
            lambda: f"CAST({sub('int')} AS SMALLINT)", lambda: f"({sub('smallint')} / 2)"]


def _date_ops(draw, sub):
    ops = [lambda: f"({sub('date')} + {sub('int')})", lambda: f"({sub('date')} - 3)",
           lambda: f"COALESCE({sub('date')}, DATE '2020-02-02')"]
    return ops


def _interval_ops(draw, sub):
    ops = [lambda: f"({sub('interval')} + {sub('interval')})", lambda: f"({sub('interval')} - {sub('interval')})",
           lambda: f"COALESCE({sub('interval')}, INTERVAL '0 days')"]
    if on("interval_ops"):
        ops += [lambda: f"(- {sub('interval')})", lambda: f"({sub('timestamp')} - {sub('timestamp')})"]
    return ops


def _timestamp_ops(draw, sub):
    ops = [lambda: f"COALESCE({sub('timestamp')}, TIMESTAMP '2020-01-01 00:00:00')"]
    if on("interval_ops"):
        ops += [lambda: f"({sub('timestamp')} + {sub('interval')})", lambda: f"({sub('timestamp')} - {sub('interval')})",
                lambda: f"({sub('date')} + {sub('interval')})", lambda: f"CAST({sub('date')} AS TIMESTAMP)"]
    return ops


_COMPOSITE = {"int": _int_ops, "bigint": _bigint_ops, "numeric": _numeric_ops, "double": _double_ops,
              "text": _text_ops, "bool": _bool_ops, "interval": _interval_ops, "timestamp": _timestamp_ops,
              "smallint": lambda draw, sub: _smallint_ops(draw, sub), "date": lambda draw, sub: _date_ops(draw, sub)}


def cond(draw, scope, depth: int = 2) -> str:
    """A boolean condition (never a bare literal)."""
    bools = [c.ref for c in scope if c.type == "bool"]
    if bools and not draw(st.integers(0, 5)):
        return draw(st.sampled_from(bools))
    return composite(draw, scope, "bool", depth)


# ---- aggregates ----------------------------------------------------------------------------------

def agg(draw, scope) -> str:
    num = [c for c in scope if c.type in NUMERIC_TYPES] or [c for c in scope if c.type == "int"]
    kind = draw(st.sampled_from(["count_star", "count", "count_distinct", "sum", "avg", "minmax",
                                 "minmax", "bool", "filter", "sum_distinct", "expr_over"]))
    if kind == "count_star":
        return "count(*)"
    if kind == "count":
        return f"count({expr(draw, scope, any_type(draw, scope), 1)})"
    if kind == "count_distinct":
        return f"count(DISTINCT {expr(draw, scope, any_type(draw, scope), 1)})"
    if kind in ("sum", "avg"):
        t = draw(st.sampled_from(sorted({c.type for c in num}) or ["int"]))
        return f"{kind}({expr(draw, scope, t, 1)})"
    if kind == "minmax":
        t = draw(st.sampled_from([x for x in ORDERABLE if x != "interval" or on("interval_ops")]))
        return f"{draw(st.sampled_from(['min', 'max']))}({expr(draw, scope, t, 1)})"
    if kind == "bool":
        return f"{draw(st.sampled_from(['bool_and', 'bool_or']))}({expr(draw, scope, 'bool', 1)})"
    if kind == "filter":
        inner = draw(st.sampled_from(["count(*)", f"sum({expr(draw, scope, 'int', 0)})",
                                      f"max({expr(draw, scope, 'text', 0)})"]))
        return f"{inner} FILTER (WHERE {cond(draw, scope, 1)})"
    if kind == "sum_distinct":          # refused today (UnsupportedError): must never answer wrongly
        return f"{draw(st.sampled_from(['sum', 'avg']))}(DISTINCT {expr(draw, scope, 'int', 0)})"
    return draw(st.sampled_from([f"COALESCE(max({expr(draw, scope, 'int', 0)}), -1)",
                                 f"(sum({expr(draw, scope, 'int', 0)}) + count(*))",
                                 "(count(*) * 2)"]))


# ---- FROM clauses ------------------------------------------------------------------------------

@dataclasses.dataclass
class From:
    sql: str
    scope: list         # Cols the query may reference
    star: list | None   # the Cols of SELECT *, in Postgres' order (None: do not use *)
    where: str = ""     # a conjunct the WHERE must carry (comma joins)


def table_scope(t: Table):
    return [Col(f"{t.name}.{c}", ty, c) for c, ty in t.cols]


def _join_eq(draw, t1: Table, t2: Table) -> str:
    if not draw(st.integers(0, 3)):
        return f"{t1.name}.a = {t2.name}.k"
    common = [c for c, _ in t1.cols if c in t2.types()]
    c = draw(st.sampled_from(common))
    return f"{t1.name}.{c} = {t2.name}.{c}"


def _using_columns(tables, usings):
    """Postgres' output columns of ``t1 JOIN t2 USING (..) [JOIN t3 USING (..)]``: (name, type)."""
    cols = list(tables[0].cols)
    for right, using in zip(tables[1:], usings):
        types = dict(cols)
        cols = ([(c, types[c]) for c in using] + [(c, t) for c, t in cols if c not in using]
                + [(c, t) for c, t in right.cols if c not in using])
    return cols


def from_clause(draw, tables) -> From:
    kind = draw(st.sampled_from(["single", "single", "join", "join", "using", "using", "nested_using",
                                 "comma"]))
    t1, t2 = draw(st.permutations(tables))[:2]
    if kind == "single":
        return From(t1.name, table_scope(t1), table_scope(t1))
    both = table_scope(t1) + table_scope(t2)
    if kind == "comma":
        return From(f"{t1.name}, {t2.name}", both, both, where=_join_eq(draw, t1, t2))
    how = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]))
    if kind == "join":
        on_sql = _join_eq(draw, t1, t2)
        if not draw(st.integers(0, 2)):
            on_sql += " AND " + cond(draw, both, 1)
        return From(f"{t1.name} {how} {t2.name} ON {on_sql}", both, both)
    if how in ("RIGHT JOIN", "FULL JOIN") and not on("using_outer"):
        how = draw(st.sampled_from(["JOIN", "LEFT JOIN"]))
    common = [c for c, _ in t1.cols if c in t2.types()]
    picked = draw(st.lists(st.sampled_from(common), min_size=1, max_size=2, unique=True))
    usings = [[c for c in common if c in picked]]
    joined = [t1, t2]
    text = f"{t1.name} {how} {t2.name} USING ({', '.join(usings[0])})"
    if kind == "nested_using" and len(tables) == 3 and on("using_nested"):
        t3 = [t for t in tables if t not in (t1, t2)][0]
        names = Counter(c for c, _ in _using_columns(joined, usings))
        left_types = dict(_using_columns(joined, usings))
        candidates = [c for c, _ in t3.cols if names[c] == 1 and left_types[c] == t3.types()[c]]
        if candidates:
            outer = ["FULL JOIN", "RIGHT JOIN"] if on("using_outer") else []
            how2 = draw(st.sampled_from(["JOIN", "LEFT JOIN"] + outer))
            u2 = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2, unique=True))
            usings.append([c for c in candidates if c in u2])
            joined.append(t3)
            text = f"{text} {how2} {t3.name} USING ({', '.join(usings[1])})"
    merged = {c for u in usings for c in u}
    star = [Col(c, t, c) for c, t in _using_columns(joined, usings)]
    once = Counter(c.name for c in star)
    scope = [c for c in star if c.name in merged and once[c.name] == 1]     # unqualified: unambiguous
    scope += [Col(f"{t.name}.{c}", ty, c) for t in joined for c, ty in t.cols
              if c not in merged or draw(st.integers(0, 2)) == 0]          # a side's own copy, now and then
    return From(text, scope, star)


# ---- queries -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Query:
    sql: str
    order: list | None = None   # output positions of the ORDER BY (0-based), when there is one
    limited: bool = False       # ORDER BY ... LIMIT/OFFSET: compare only the ORDER BY columns
    kind: str = ""
    pg_sql: str | None = None   # Postgres' text when it differs (an MV over an MV: a CTE)

    @property
    def pg_text(self) -> str:
        return self.pg_sql or self.sql


def _where(draw, f: From, extra: str | None = None, p: int = 2) -> str:
    parts = [x for x in (f.where, extra) if x]
    if draw(st.integers(0, p)):
        parts.append(cond(draw, f.scope))
    return f" WHERE {' AND '.join(parts)}" if parts else ""


def _items(draw, scope, n_min=1, n_max=4):
    out = []
    for i in range(draw(st.integers(n_min, n_max))):
        out.append(f"{expr(draw, scope, any_type(draw, scope), 2)} AS c{i}")
    return out


def any_type(draw, scope) -> str:
    present = sorted({c.type for c in scope})
    if present and draw(st.integers(0, 3)):
        return draw(st.sampled_from(present))
    return draw(st.sampled_from(list(SQL_TYPE)))


def _order_by(draw, n_cols: int, must: list | None = None):
    positions = draw(st.lists(st.integers(0, n_cols - 1), min_size=1, max_size=n_cols, unique=True))
    for m in must or []:
        if m not in positions:
            positions.append(m)
    parts = []
    for p in positions:
        d = draw(st.sampled_from(["", " DESC", " ASC NULLS FIRST", " DESC NULLS LAST"]))
        parts.append(f"{p + 1}{d}")
    return " ORDER BY " + ", ".join(parts), positions


def _limit(draw) -> str:
    n, offset = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    return draw(st.sampled_from([f" LIMIT {n}", f" LIMIT {n}", f" LIMIT {n} OFFSET {offset}",
                                 f" OFFSET {offset}", f" OFFSET {offset} ROWS FETCH FIRST {n} ROWS ONLY"]))


def _project(draw, tables, distinct=False):
    f = from_clause(draw, tables)
    items = _items(draw, f.scope)
    return f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(items)} FROM {f.sql}{_where(draw, f)}", len(items)


def _aggregate(draw, tables, grouped=True):
    f = from_clause(draw, tables)
    groups = []
    if grouped:
        keyable = [c for c in f.scope if c.type != "double"]
        for _ in range(draw(st.integers(1, 2))):
            if keyable and draw(st.integers(0, 3)):
                groups.append(draw(st.sampled_from(keyable)).ref)
            else:            # an expression over a column (a constant would read as an ordinal)
                groups.append(group_expr(draw, draw(st.sampled_from(keyable or f.scope))))
        groups = list(dict.fromkeys(groups))
    aggs = [agg(draw, f.scope) for _ in range(draw(st.integers(1, 3)))]
    items = [f"{g} AS c{i}" for i, g in enumerate(groups)] + [f"{a} AS c{len(groups) + i}" for i, a in enumerate(aggs)]
    text = f"SELECT {', '.join(items)} FROM {f.sql}{_where(draw, f, p=1)}"
    if groups:
        by = (", ".join(str(i + 1) for i in range(len(groups))) if draw(st.booleans())
              else ", ".join(groups))
        text += f" GROUP BY {by}"
        if not draw(st.integers(0, 2)):
            text += draw(st.sampled_from([f" HAVING count(*) > {draw(st.integers(0, 2))}",
                                          f" HAVING {agg(draw, f.scope)} IS NOT NULL"]))
    return text, len(items), len(groups)


def group_expr(draw, c: Col) -> str:
    forms = {"int": ["({0} % 3)", "({0} / 2)", "abs({0})", "({0} IS NULL)"],
             "bigint": ["({0} % 5)", "({0} > 0)"],
             "numeric": ["round({0})", "floor({0})", "({0} < 0)"],
             "double": ["floor({0})", "({0} > 1)"],
             "text": ["upper({0})", "substr({0}, 1, 1)", "length({0})", "({0} || 'x')"],
             "bool": ["(NOT {0})", "({0} IS NULL)"],
             "interval": ["({0} IS NULL)"] + (["({0} > INTERVAL '1 day')"] if on("interval_ops") else []),
             "timestamp": ["({0} IS NULL)"] + (["({0} + INTERVAL '1 day')"] if on("interval_ops") else []),
             "smallint": ["({0} % 2)", "abs({0})"],
             "date": ["({0} + 1)", "({0} IS NULL)"]}
    return draw(st.sampled_from(forms[c.type])).format(c.ref)


def _set_op(draw, tables):
    t1, t2 = draw(st.permutations(tables))[:2]
    kinds = ["int", "text", "bool", "double"] + (["interval"] if on("interval_ops") else []) + (
        ["numeric"] if on("numeric_set_ops") else [])
    types = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=2))
    sides = []
    for t in (t1, t2):
        f = From(t.name, table_scope(t), None)
        items = ", ".join(f"{expr(draw, f.scope, ty, 1)} AS c{i}" for i, ty in enumerate(types))
        sides.append(f"SELECT {items} FROM {t.name}{_where(draw, f)}")
    ops = ["UNION", "UNION ALL", "INTERSECT", "EXCEPT"] + (["INTERSECT ALL", "EXCEPT ALL"] if on("set_ops_all") else [])
    return f"{sides[0]} {draw(st.sampled_from(ops))} {sides[1]}", len(types)


def _subquery_where(draw, tables):
    t1, t2 = draw(st.permutations(tables))[:2]
    outer, inner = table_scope(t1), table_scope(t2)
    common = [c for c, ty in t1.cols if c in t2.types() and ty in ("int", "text", "bigint")]
    c = draw(st.sampled_from(common))
    inner_where = f" WHERE {cond(draw, inner, 1)}" if draw(st.booleans()) else ""
    inner_and = f" AND {cond(draw, inner, 1)}" if draw(st.booleans()) else ""
    forms = [
        f"{t1.name}.{c} IN (SELECT {t2.name}.{c} FROM {t2.name}{inner_where})",
        f"{t1.name}.{c} NOT IN (SELECT {t2.name}.{c} FROM {t2.name}{inner_where})",
        f"EXISTS (SELECT 1 FROM {t2.name} WHERE {t2.name}.{c} = {t1.name}.{c}{inner_and})",
        f"NOT EXISTS (SELECT 1 FROM {t2.name} WHERE {t2.name}.{c} = {t1.name}.{c}{inner_and})",
        f"NOT EXISTS (SELECT 1 FROM {t2.name}{inner_where})",
        f"{t1.name}.a > (SELECT max({t2.name}.a) FROM {t2.name}{inner_where})",
        f"{t1.name}.a <= (SELECT min({t2.name}.a) FROM {t2.name}{inner_where})",
        f"{t1.name}.a IN (SELECT {t2.name}.a FROM {t2.name} WHERE {t2.name}.{c} = {t1.name}.{c})",
        f"{t1.name}.a < (SELECT sum({t2.name}.a) FROM {t2.name} WHERE {t2.name}.{c} = {t1.name}.{c})",
        # a correlation that is not an equality: refused today, never answered wrongly
        f"EXISTS (SELECT 1 FROM {t2.name} WHERE {t2.name}.a < {t1.name}.a)",
    ]
    if on("exists_no_from"):
        forms += [f"EXISTS (SELECT {t1.name}.a)", f"NOT EXISTS (SELECT {t1.name}.{c})"]
    pred = draw(st.sampled_from(forms))
    if draw(st.booleans()):
        pred += f" AND {cond(draw, outer, 1)}"
    items = _items(draw, outer, 1, 3)
    return f"SELECT {', '.join(items)} FROM {t1.name} WHERE {pred}", len(items)


def _scalar_subquery(draw, tables):
    t1, t2 = draw(st.permutations(tables))[:2]
    outer, inner = table_scope(t1), table_scope(t2)
    common = [c for c, ty in t1.cols if c in t2.types() and ty in ("int", "text", "bigint")]
    c = draw(st.sampled_from(common))
    corr = draw(st.booleans())
    where = f" WHERE {t2.name}.{c} = {t1.name}.{c}" if corr else ""
    if draw(st.booleans()):
        where += (" AND " if where else " WHERE ") + cond(draw, inner, 1)
    aggs = ["count(*)", f"max({t2.name}.a)", f"sum({t2.name}.a)", f"min({expr(draw, inner, 'text', 0)})",
            f"count({t2.name}.a)"]
    if on("corr_scalar_expr") or not corr:
        aggs += [f"COALESCE(max({t2.name}.a), -1)", "(count(*) + 1)", f"(max({t2.name}.a) * 2)"]
    sub = f"(SELECT {draw(st.sampled_from(aggs))} FROM {t2.name}{where})"
    items = [f"{t1.name}.k AS c0", f"{sub} AS c1"]
    if draw(st.booleans()):
        items.append(f"{expr(draw, outer, any_type(draw, outer), 1)} AS c2")
    return f"SELECT {', '.join(items)} FROM {t1.name}{_where(draw, From(t1.name, outer, None), p=3)}", len(items)


def _topn_subquery(draw, tables):
    t = draw(st.sampled_from(tables))
    scope = table_scope(t)
    items = _items(draw, scope, 1, 3)
    n = len(items)
    order, positions = _order_by(draw, n)
    order += f", {t.name}.k"                                        # a total order: no ties
    inner = f"SELECT {', '.join(items)}, {t.name}.k AS kk FROM {t.name}{order}{_limit(draw)}"
    q = [Col(f"q.c{i}", None, f"c{i}") for i in range(n)]
    outer_cond = draw(st.sampled_from(["q.c0 IS NOT NULL", "q.kk > 5", "q.kk % 2 = 0", "true"]))
    return f"SELECT {', '.join(c.ref for c in q)}, q.kk FROM ({inner}) AS q WHERE {outer_cond}", n + 1


def _group_topn(draw, tables):
    t = draw(st.sampled_from(tables))
    scope = table_scope(t)
    part = expr(draw, scope, draw(st.sampled_from(["int", "text", "bool"])), draw(st.integers(0, 1)))
    order_t = draw(st.sampled_from([x for x in ORDERABLE if x != "interval" or on("interval_ops")]))
    order = f"{expr(draw, scope, order_t, 1)}{draw(st.sampled_from(['', ' DESC']))}, {t.name}.k"
    items = _items(draw, scope, 1, 2)
    bound = draw(st.sampled_from(["rn <= 2", "rn = 1", "rn < 3", "rn BETWEEN 2 AND 3"]))
    sel_rn = ", q.rn" if draw(st.booleans()) else ""
    inner = (f"SELECT {', '.join(items)}, {t.name}.k AS kk, ROW_NUMBER() OVER (PARTITION BY {part} "
             f"ORDER BY {order}) AS rn FROM {t.name}")
    cols = ", ".join(f"q.c{i}" for i in range(len(items)))
    return f"SELECT {cols}, q.kk{sel_rn} FROM ({inner}) AS q WHERE {bound}", len(items) + 1 + bool(sel_rn)


def _full_join_aggs(draw, tables):
    t1, t2 = draw(st.permutations(tables))[:2]

    def side(t, alias):
        scope = table_scope(t)
        a = draw(st.sampled_from(["count(*)", f"count({t.name}.a)", f"sum({t.name}.a)", f"max({t.name}.k)"]))
        grouped = draw(st.integers(0, 2)) == 0
        where = f" WHERE {cond(draw, scope, 1)}" if draw(st.booleans()) else ""
        if grouped:
            return f"(SELECT {t.name}.a AS g, {a} AS v FROM {t.name}{where} GROUP BY {t.name}.a) AS {alias}", True
        return f"(SELECT {a} AS v FROM {t.name}{where}) AS {alias}", False

    (x, gx), (y, gy) = side(t1, "x"), side(t2, "y")
    how = draw(st.sampled_from(["FULL JOIN", "LEFT JOIN", "RIGHT JOIN", "JOIN"]))
    on_sql = "x.g = y.g" if gx and gy and draw(st.booleans()) else "CAST(x.v AS BIGINT) = CAST(y.v AS BIGINT)"
    items = ["x.v AS c0", "y.v AS c1"] + (["x.g AS c2"] if gx else [])
    return f"SELECT {', '.join(items)} FROM {x} {how} {y} ON {on_sql}", len(items)


def _cte(draw, tables):
    t1, t2 = draw(st.permutations(tables))[:2]
    a = agg(draw, table_scope(t1))
    cte = f"WITH q AS (SELECT {t1.name}.a AS g, {a} AS v FROM {t1.name} GROUP BY {t1.name}.a) "
    how = draw(st.sampled_from(["JOIN", "LEFT JOIN", "FULL JOIN"]))
    return f"{cte}SELECT q.g AS c0, q.v AS c1, {t2.name}.k AS c2 FROM q {how} {t2.name} ON q.g = {t2.name}.a", 3


def _distinct_on(draw, tables):
    t = draw(st.sampled_from(tables))
    scope = table_scope(t)
    key = draw(st.sampled_from([c for c in scope if c.type != "double"]))
    items = _items(draw, scope, 1, 2)
    order = f"{draw(st.sampled_from(scope)).ref}{draw(st.sampled_from(['', ' DESC', ' DESC NULLS LAST']))}"
    return (f"SELECT DISTINCT ON ({key.ref}) {key.ref} AS d, {', '.join(items)} FROM {t.name}"
            f"{_where(draw, From(t.name, scope, None), p=3)} ORDER BY {key.ref}, {order}, {t.name}.k")


def _window(draw, tables):
    """Window aggregates whose result does not depend on how ties are broken."""
    t = draw(st.sampled_from(tables))
    scope = table_scope(t)
    part = draw(st.sampled_from(["", f"PARTITION BY {draw(st.sampled_from([c.ref for c in scope if c.type != 'double']))} "]))
    fn = draw(st.sampled_from(["count(*)", f"sum({t.name}.a)", f"max({t.name}.a)", f"min({expr(draw, scope, 'text', 0)})",
                               f"avg({t.name}.a)", f"count({t.name}.a)"]))
    frame = draw(st.sampled_from([
        f"ORDER BY {t.name}.k",
        f"ORDER BY {t.name}.k ROWS BETWEEN {draw(st.integers(1, 2))} PRECEDING AND CURRENT ROW",
        f"ORDER BY {t.name}.a",                                  # RANGE: peers share the value
        f"ORDER BY {t.name}.a DESC RANGE UNBOUNDED PRECEDING",
        f"ORDER BY {t.name}.k ROWS UNBOUNDED PRECEDING",
        "",                                                       # the whole partition
    ]))
    items = _items(draw, scope, 1, 2)
    return (f"SELECT {t.name}.k AS k0, {', '.join(items)}, {fn} OVER ({part}{frame}) AS w FROM {t.name}"
            f"{_where(draw, From(t.name, scope, None), p=3)}")


@st.composite
def queries(draw, tables):
    kind = draw(st.sampled_from(["project", "project", "star", "distinct", "agg", "agg", "global_agg",
                                 "top_n", "top_n", "order", "set_op", "set_op", "subquery_where",
                                 "subquery_where", "scalar_subquery", "topn_subquery", "group_topn",
                                 "full_join_aggs", "cte", "distinct_on", "window"]))
    if kind in ("project", "distinct"):
        text, _ = _project(draw, tables, distinct=kind == "distinct")
        return Query(text, kind=kind)
    if kind == "star":
        f = from_clause(draw, tables)
        return Query(f"SELECT * FROM {f.sql}{_where(draw, f)}", kind=kind)
    if kind in ("agg", "global_agg"):
        text, _, _ = _aggregate(draw, tables, grouped=kind == "agg")
        return Query(text, kind=kind)
    if kind in ("top_n", "order"):
        if draw(st.booleans()):
            text, n, g = _aggregate(draw, tables)
            must = list(range(g))                       # the group keys make the order total
        else:
            text, n = _project(draw, tables)
            must = []
        order, positions = _order_by(draw, n, must if draw(st.booleans()) else [])
        if kind == "order":
            return Query(text + order, order=positions, kind=kind)
        if not draw(st.integers(0, 4)):   # WITH TIES: the whole rows are determined
            return Query(text + order + f" FETCH FIRST {draw(st.integers(1, 4))} ROWS WITH TIES",
                         order=positions, kind=kind)
        return Query(text + order + _limit(draw), order=positions, limited=True, kind=kind)
    if kind == "distinct_on":
        return Query(_distinct_on(draw, tables), kind=kind)
    if kind == "window":
        return Query(_window(draw, tables), kind=kind)
    maker = {"set_op": _set_op, "subquery_where": _subquery_where, "scalar_subquery": _scalar_subquery,
             "topn_subquery": _topn_subquery, "group_topn": _group_topn, "cte": _cte}.get(kind)
    if kind == "full_join_aggs":
        maker = _full_join_aggs if on("full_join_aggs") else _cte
    text, n = maker(draw, tables)
    if kind == "set_op" and not draw(st.integers(0, 3)):
        order, positions = _order_by(draw, n, list(range(n)))
        return Query(text + order + _limit(draw), order=positions, limited=True, kind=kind)
    return Query(text, kind=kind)


# ---- DML ---------------------------------------------------------------------------------------

@st.composite
def dml_batch(draw, tables, present):
    """1-4 statements; ``present`` (table name -> keys ever inserted) keeps INSERT keys new."""
    stmts = []
    for _ in range(draw(st.integers(1, 4))):
        t = draw(st.sampled_from(tables))
        scope = [Col(c, ty, c) for c, ty in t.cols]
        op = draw(st.sampled_from(["insert", "insert", "update", "update", "delete"]))
        if op == "insert":
            stmt = draw(insert_stmt(t, present[t.name]))
            if stmt:
                stmts.append(stmt)
            continue
        where = draw(st.one_of(st.just(None), st.sampled_from([f"k = {k}" for k in KEYS])))
        where = where or cond(draw, scope, 1)
        if op == "delete":
            stmts.append(f"DELETE FROM {t.name} WHERE {where}")
            continue
        col, ty = draw(st.sampled_from(t.cols[1:]))
        src = ty
        if ty in ("int", "bigint") and on("double_round") and not draw(st.integers(0, 3)):
            src = "double"           # an assignment cast: Postgres rounds half to even
        stmts.append(f"UPDATE {t.name} SET {col} = {expr(draw, scope, src, 1)} WHERE {where}")
    return stmts


# ---- results -------------------------------------------------------------------------------------

class PgInterval(str):
    """An interval as Postgres prints it (IntervalStyle postgres); compared by its span."""


class _IntervalLoader(psycopg.adapt.Loader):
    def load(self, data):
        return PgInterval(bytes(data).decode())


_UNITS = {"year": 12 * 30 * 86_400_000_000, "mon": 30 * 86_400_000_000, "day": 86_400_000_000}


def pg_interval_usecs(text: str) -> int:
    total = 0
    for n, unit in re.findall(r"([+-]?\d+) (year|mon|day)s?", text):
        total += int(n) * _UNITS[unit]
    m = re.search(r"([+-])?(\d+):(\d\d):(\d\d)(?:\.(\d+))?$", text)
    if m:
        sign, h, mi, sec, frac = m.groups()
        us = ((int(h) * 60 + int(mi)) * 60 + int(sec)) * 1_000_000 + int((frac or "0").ljust(6, "0")[:6])
        total += -us if sign == "-" else us
    return total


def norm(v):
    """A value as a comparable, type-normalised tag."""
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float, decimal.Decimal)):
        return ("num", v)
    if isinstance(v, PgInterval):
        return ("interval", pg_interval_usecs(v))
    if isinstance(v, Interval):
        return ("interval", v.total_usecs())
    if isinstance(v, datetime.timedelta):
        return ("interval", (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds)
    if isinstance(v, str):
        return ("text", v)
    if isinstance(v, (datetime.datetime, datetime.date)):
        return ("ts", v.isoformat())
    return ("other", repr(v))


def _sort_key(tag):
    if tag[0] == "num":
        x = tag[1]
        f = float(x)
        if f != f:
            return ("num", float("inf"), 1)
        return ("num", float(f"{f:.6g}"), 0)
    return tag


def close(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] != "num":
        return a == b
    x, y = a[1], b[1]
    if isinstance(x, float) or isinstance(y, float):
        x, y = float(x), float(y)
        if x != x or y != y:
            return x != x and y != y
        if x in (float("inf"), float("-inf")) or y in (float("inf"), float("-inf")):
            return x == y
    else:
        x, y = decimal.Decimal(x), decimal.Decimal(y)
        if x.is_nan() or y.is_nan():
            return x.is_nan() and y.is_nan()
    return abs(x - y) <= max(abs(x), abs(y), 1) * (1e-9 if isinstance(x, float) else decimal.Decimal("1e-12"))


def rows_close(r1, r2) -> bool:
    return len(r1) == len(r2) and all(close(a, b) for a, b in zip(r1, r2))


def same_multiset(ours, theirs) -> bool:
    a = sorted(ours, key=lambda r: tuple(map(_sort_key, r)))
    b = sorted(theirs, key=lambda r: tuple(map(_sort_key, r)))
    if len(a) != len(b):
        return False
    if all(rows_close(x, y) for x, y in zip(a, b)):
        return True
    rest = list(b)                        # rounding put near-equal values apart: match greedily
    for x in a:
        for i, y in enumerate(rest):
            if rows_close(x, y):
                del rest[i]
                break
        else:
            return False
    return True


def shape(rows, positions=None):
    out = [tuple(norm(v) for v in r) for r in rows]
    if positions is not None:
        out = [tuple(r[p] for p in positions) for r in out]
    return out


def show(rows, limit=12):
    return "[" + ", ".join("(" + ", ".join(repr(v[1]) if len(v) > 1 else "NULL" for v in r) + ")"
                           for r in rows[:limit]) + (", ..." if len(rows) > limit else "") + "]"


# ---- running statements ----------------------------------------------------------------------------

SURVEY = os.environ.get("HUMMOCK_PG_SURVEY")   # a path: record mismatches there, do not fail
STATS: Counter = Counter()
REFUSALS: Counter = Counter()                   # what Hummock refused, by kind (printed at the end)


class Mismatch(AssertionError):
    pass


def mismatch(message: str):
    if SURVEY:
        with open(SURVEY, "a") as f:
            f.write(message.rstrip() + "\n----\n")
        STATS["mismatch"] += 1
        return
    raise Mismatch(message)


@dataclasses.dataclass
class Outcome:
    rows: list | None = None
    names: list | None = None
    data_error: str | None = None      # a runtime data error (Postgres class 21/22; ExecutionError)
    refused: str | None = None         # refused at planning (any other error)
    rowcount: int = -1                 # DML: rows affected


def run_pg(pg, text: str) -> Outcome:
    try:
        cur = pg.execute(text)
        if cur.description is None:
            return Outcome(rows=[])
        return Outcome(rows=cur.fetchall(), names=[d.name for d in cur.description])
    except psycopg.Error as exc:
        state = getattr(exc, "sqlstate", None) or ""
        if state[:2] in ("21", "22"):
            return Outcome(data_error=f"{state} {exc}".strip())
        return Outcome(refused=f"{state} {exc}".strip())


def run_hummock(conn, text: str) -> Outcome:
    try:
        cur = conn.execute(text)
        if cur.description is None:
            return Outcome(rows=[], rowcount=cur.rowcount)
        return Outcome(rows=cur.fetchall(), names=[d[0] for d in cur.description])
    except sql.ExecutionError as exc:
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, (sql.SqlError, ExpressionError)):
            mismatch(f"Hummock fails inside: {exc}\n  SQL: {text}")   # a raw exception, wrapped
            return Outcome(refused=f"internal {type(cause).__name__}")
        return Outcome(data_error=str(exc))
    except sql.SqlError as exc:
        return Outcome(refused=f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 -- a raw exception is itself the finding
        mismatch(f"raw {type(exc).__name__} from Hummock: {exc}\n  SQL: {text}")
        return Outcome(refused=f"raw {type(exc).__name__}")


def _refusal_kind(message: str) -> str:
    return re.sub(r"\d+|'[^']*'|\"[^\"]*\"| at line.*", "_", message)[:70]


def compare(what: str, q: Query, ours: Outcome, pg: Outcome, names: bool) -> bool:
    """Checks one answer against Postgres'; False when it tells nothing (refused / not comparable)."""
    if pg.refused is not None:
        if ours.refused is None and ours.data_error is None:
            mismatch(f"{what}: Postgres refuses ({pg.refused}) but Hummock answers {show(shape(ours.rows))}\n  SQL: {q.sql}")
        return False
    if ours.refused is not None:
        STATS["refused"] += 1
        REFUSALS[f"SELECT: {_refusal_kind(ours.refused)}"] += 1
        event(f"refused: {_refusal_kind(ours.refused)}")
        return False
    if pg.data_error is not None:
        if what.startswith("batch") and ours.data_error is None and ours.rows and same_rows_evaluated(q.pg_text):
            mismatch(f"{what}: Postgres raises {pg.data_error!r} but Hummock answers "
                     f"{show(shape(ours.rows))}\n  SQL: {q.sql}")
        STATS["data_error"] += 1
        return False
    if ours.data_error is not None:
        if same_rows_evaluated(q.pg_text):
            mismatch(f"{what}: Hummock raises {ours.data_error!r}, Postgres answers "
                     f"{show(shape(pg.rows))}\n  SQL: {q.sql}")
        else:       # Postgres may skip an expression (qual order, CASE, short cuts): not a verdict
            STATS["data_error_order"] += 1
            event("Hummock data error where Postgres answers (evaluation order)")
        return False
    STATS["answered"] += 1
    STATS["answered, not empty"] += bool(pg.rows)
    positions = q.order if q.limited else None
    a, b = shape(ours.rows, positions), shape(pg.rows, positions)
    if not same_multiset(a, b):
        mismatch(f"{what}: different rows\n  SQL: {q.sql}\n  hummock  ({len(a)}): {show(sorted(a, key=lambda r: tuple(map(_sort_key, r))), 30)}"
                 f"\n  postgres ({len(b)}): {show(sorted(b, key=lambda r: tuple(map(_sort_key, r))), 30)}")
        return True
    if names and ours.names != pg.names:
        mismatch(f"{what}: column names {ours.names}, Postgres {pg.names}\n  SQL: {q.sql}")
    if what.startswith("batch") and q.order is not None:
        ka, kb = shape(ours.rows, q.order), shape(pg.rows, q.order)
        if not all(rows_close(x, y) for x, y in zip(ka, kb)):
            mismatch(f"{what}: ORDER BY order differs\n  SQL: {q.sql}\n  hummock : {show(ka, 30)}\n  postgres: {show(kb, 30)}")
    return True


_LAZY = ("CASE", "COALESCE(", "NULLIF(", " AND ", " OR ", " BETWEEN ", "FILTER", "(SELECT")
_BLOCKING = (" JOIN ", ", t", " GROUP BY ", " LIMIT ", " HAVING ", " UNION ", " INTERSECT ", " EXCEPT ", "WITH ")


def same_rows_evaluated(text: str) -> bool:
    """Whether Postgres and Hummock evaluate every expression of ``text`` on the same rows, so a
    data error must show in both: one table, no join, grouping, limit or set operation, and no
    construct that may skip an operand (CASE, COALESCE, AND/OR, BETWEEN, FILTER, subqueries).
    Elsewhere Postgres may legitimately evaluate more rows (a filter pushed below a join) or
    fewer (quals reordered by cost) than Hummock."""
    if not text.startswith(("SELECT ", "UPDATE ", "DELETE ")):
        return False
    return not any(x in text for x in _LAZY + _BLOCKING)


class _Rollback(Exception):
    pass


def apply_dml(conn, pg, stmt: str) -> bool:
    """Runs one DML statement on both: both apply it, or both refuse it and change nothing.
    Returns whether the two databases still hold the same data.

    Hummock runs first; Postgres runs in a transaction rolled back when Hummock did not apply
    the statement, so a data error that only Hummock hit (evaluation order) keeps the two equal.
    """
    ours = run_hummock(conn, stmt)
    theirs = Outcome()
    try:
        with pg.transaction():
            theirs = run_pg(pg, stmt)
            if ours.refused is not None or ours.data_error is not None:
                raise _Rollback
    except _Rollback:
        pass
    applied = ours.refused is None and ours.data_error is None
    if theirs.refused is not None:
        if applied:
            mismatch(f"DML: Postgres refuses ({theirs.refused}), Hummock applies it\n  SQL: {stmt}")
        return not applied
    if theirs.data_error is not None:
        if applied:        # (a constant that fails is folded by Postgres: an error with no row)
            if same_rows_evaluated(stmt) and ours.rowcount > 0:
                mismatch(f"DML: Postgres raises {theirs.data_error!r}, Hummock applies it\n  SQL: {stmt}")
            event("DML: Postgres data error where Hummock applies it (evaluation order): example ends")
        return not applied
    if ours.refused is not None:
        mismatch(f"DML: Hummock refuses ({ours.refused}), Postgres applies it\n  SQL: {stmt}")
    elif ours.data_error is not None:
        if same_rows_evaluated(stmt):
            mismatch(f"DML: Hummock raises {ours.data_error!r}, Postgres applies it\n  SQL: {stmt}")
        event("DML: Hummock data error where Postgres applies it (evaluation order)")
    return True          # Postgres was rolled back when Hummock did not apply it


# ---- the property ------------------------------------------------------------------------------------

def reset_pg(pg):
    pg.execute("DROP SCHEMA IF EXISTS hx CASCADE")
    pg.execute("CREATE SCHEMA hx")
    pg.execute("SET search_path TO hx")


#: MVs over an MV of the example (Postgres reads the lower query as a CTE): (template, ORDER BY)
STACKED = [
    ("SELECT c0 AS s0, count(*) AS s1 FROM {mv} GROUP BY c0", None),
    ("SELECT count(*) AS s0, count(c0) AS s1, count(DISTINCT c0) AS s2 FROM {mv}", None),
    ("SELECT * FROM {mv} WHERE c0 IS NOT NULL", None),
    ("SELECT c0 AS s0 FROM {mv} ORDER BY 1 DESC LIMIT 2", [0]),
    ("SELECT DISTINCT c0 AS s0 FROM {mv}", None),
]


def run_example(data, pg):
    tables = data.draw(schemas(), label="schema")
    reset_pg(pg)
    present = {t.name: set() for t in tables}
    with sql.connect(":memory:") as conn:
        for t in tables:
            conn.execute(t.create_sql())
            pg.execute(t.create_sql())
        empty = not data.draw(st.integers(0, 4), label="MVs created over empty tables")
        for t in tables if not empty else []:
            stmt = data.draw(insert_stmt(t, present[t.name]), label=f"rows of {t.name}")
            assert apply_dml(conn, pg, stmt), stmt
        conn.execute("FLUSH")
        qs = data.draw(st.lists(queries(tables), min_size=1, max_size=4), label="queries")
        mvs = []
        stack = data.draw(st.lists(st.sampled_from(STACKED), max_size=2), label="MVs over MVs")
        for i, q in enumerate(qs):
            theirs = run_pg(pg, q.pg_text)
            compare("batch SELECT", q, run_hummock(conn, q.sql), theirs, names=True)
            created = run_hummock(conn, f"CREATE MATERIALIZED VIEW mv{i} AS {q.sql}")
            if created.data_error is not None:
                mismatch(f"CREATE MATERIALIZED VIEW fails: {created.data_error}\n  SQL: {q.sql}")
            elif created.refused is not None:
                STATS["mv_refused"] += 1
                REFUSALS[f"MV: {_refusal_kind(created.refused)}"] += 1
                event(f"MV refused: {_refusal_kind(created.refused)}")
            else:
                mvs.append((f"mv{i}", q))
                compare(f"MV mv{i} after backfill", q, run_hummock(conn, f"SELECT * FROM mv{i}"), theirs,
                        names=False)
                names = theirs.names or []
                if stack and not q.limited and names[:1] == ["c0"] and len(set(names)) == len(names):
                    template, order = stack.pop()       # an MV reading this MV
                    upper = Query(template.format(mv=f"mv{i}"), order=order, limited=order is not None,
                                  kind="stacked", pg_sql=f"WITH mv{i} AS ({q.pg_text}) " + template.format(mv=f"mv{i}"))
                    qs.append(upper)
        for step in range(data.draw(st.integers(1, 3), label="DML steps")):
            for stmt in data.draw(dml_batch(tables, present), label=f"DML {step}"):
                if not apply_dml(conn, pg, stmt):
                    return
            conn.execute("FLUSH")
            for t in tables:
                q = Query(f"SELECT * FROM {t.name}")
                compare(f"table {t.name} after DML {step}", q, run_hummock(conn, q.sql), run_pg(pg, q.sql), names=True)
            for name, q in mvs:
                theirs = run_pg(pg, q.pg_text)
                compare(f"MV {name} after DML {step}", q, run_hummock(conn, f"SELECT * FROM {name}"), theirs,
                        names=False)
                compare(f"batch SELECT after DML {step}", q, run_hummock(conn, q.sql), theirs, names=True)


@pytest.fixture(scope="module")
def pg(pg_server):
    conn = psycopg.connect(pg_server.dsn, autocommit=True, prepare_threshold=None)  # schemas change
    conn.adapters.register_loader("interval", _IntervalLoader)
    conn.execute("SET IntervalStyle TO postgres")
    conn.execute("SET extra_float_digits TO 1")
    yield conn
    conn.close()


_PROFILE = settings()
N_EXAMPLES = 3 * _PROFILE.max_examples   # ci: 180 examples, about a minute


def test_pg_server_is_postgres(pg):
    """The oracle is a real PostgreSQL with the settings the comparison relies on."""
    version, collation, tz = pg.execute(
        "SELECT version(), (SELECT datcollate FROM pg_database WHERE datname = current_database()), "
        "current_setting('TimeZone')").fetchone()
    assert version.startswith("PostgreSQL ") and collation == "C" and tz == "UTC"
    assert pg.execute("SELECT INTERVAL '1 day 01:00:00.5'").fetchone()[0] == "1 day 01:00:00.5"
    assert pg_interval_usecs("-1 days +02:00:00") == -22 * 3_600_000_000
    assert pg_interval_usecs("1 year 2 mons -3 days -04:05:06.25") == (
        14 * 30 * 86_400_000_000 - 3 * 86_400_000_000 - (4 * 3600 + 5 * 60 + 6) * 1_000_000 - 250_000)


def test_queries_agree_with_postgres(pg):
    STATS.clear()
    REFUSALS.clear()

    @settings(max_examples=N_EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(st.data())
    def check(data):
        run_example(data, pg)

    check()
    print(f"postgres differential: {dict(STATS)}")
    for kind, n in REFUSALS.most_common(12):
        print(f"  {n:5d} refused {kind}")
    total = STATS["answered"] + STATS["refused"]
    # the grammar must stay inside what Hummock answers, or the test checks nothing
    assert total and STATS["answered"] >= 0.7 * total, dict(STATS)


def test_grammar_runs_on_postgres(pg):
    """The grammar stays inside what Postgres accepts (guards the oracle and the generator)."""
    refused = Counter()

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        tables = data.draw(schemas())
        reset_pg(pg)
        present = {t.name: set() for t in tables}
        for t in tables:
            pg.execute(t.create_sql())
            pg.execute(data.draw(insert_stmt(t, present[t.name])))
        for q in data.draw(st.lists(queries(tables), min_size=3, max_size=6)):
            out = run_pg(pg, q.sql)
            assert out.refused is None, \
                f"Postgres refuses a generated query: {out.refused}\n  SQL: {q.sql}"
            refused[out.refused is None] += 1
        for stmt in data.draw(dml_batch(tables, present)):
            out = run_pg(pg, stmt)
            assert out.refused is None, f"Postgres refuses generated DML: {out.refused}\n  SQL: {stmt}"

    check()
