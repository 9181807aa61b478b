"""TRUNCATE and multi-column ``UPDATE ... SET (a, b) = (...)`` (issue 29, item 4) against a
real PostgreSQL: the same random statements run on both, and after each one the table, and a
materialized view over it, equal Postgres' table (the MV through its maintenance: TRUNCATE
retracts every row). Refusals name the construct: several tables, CASCADE, a sub-SELECT source.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import SqlSyntaxError, UnsupportedError
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg  # noqa: F401  (the fixture)

pytestmark = pytest.mark.postgres

value = st.none() | st.integers(-3, 3)
statement = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 9), value, value),
    st.tuples(st.just("update"), st.integers(0, 9), value, value),
    st.tuples(st.just("update_expr"), st.integers(-1, 1), value, value),
    st.tuples(st.just("truncate"), st.just(0), st.none(), st.none()),
)


def lit(v):
    return "NULL" if v is None else str(v)


def text(stmt):
    kind, k, a, b = stmt
    if kind == "insert":
        return f"INSERT INTO t VALUES ({k}, {lit(a)}, {lit(b)})"
    if kind == "update":
        return f"UPDATE t SET (a, b) = ({lit(a)}, {lit(b)}) WHERE k = {k}"
    if kind == "update_expr":
        return f"UPDATE t SET (b, a) = (a, coalesce(b, 0) + {k}) WHERE k % 2 = 0"
    return "TRUNCATE t"


@settings(max_examples=10, deadline=None)
@given(stmts=st.lists(statement, min_size=1, max_size=12))
def test_truncate_and_multi_column_update_agree_with_postgres(pg, stmts):  # noqa: F811
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT)")
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, a, b, a + b AS s FROM t")
        for stmt in stmts:
            sql_text = text(stmt)
            if stmt[0] == "insert":   # Hummock's pk tables overwrite (RisingWave); Postgres upserts to match
                pg.execute(sql_text + " ON CONFLICT (k) DO UPDATE SET a = EXCLUDED.a, b = EXCLUDED.b")
            else:
                pg.execute(sql_text)
            conn.execute(sql_text)
            expected = [tuple(map(norm, r)) for r in pg.execute("SELECT k, a, b, a + b FROM t").fetchall()]
            for what, q in (("table", "SELECT k, a, b, a + b FROM t"), ("mv", "SELECT * FROM m")):
                got = [tuple(map(norm, r)) for r in conn.execute(q).fetchall()]
                assert same_multiset(got, expected), f"{what} after {sql_text}:\n  ours:   {show(sorted(got))}\n" \
                                                     f"  theirs: {show(sorted(expected))}"


@pytest.mark.parametrize("stmt, error, match", [
    ("TRUNCATE t, u", UnsupportedError, "TRUNCATE of several tables"),
    ("TRUNCATE t CASCADE", UnsupportedError, "CASCADE"),
    ("UPDATE t SET (a, b) = (SELECT 1, 2)", UnsupportedError, r"SET \(columns\) = \(SELECT"),
    ("UPDATE t SET (a, b) = (1, 2, 3)", SqlSyntaxError, "number of columns does not match number of values"),
])
def test_forms_not_supported_are_refused_by_name(stmt, error, match):
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT)")
        conn.execute("CREATE TABLE u (k INT PRIMARY KEY)")
        with pytest.raises(error, match=match):
            conn.execute(stmt)
