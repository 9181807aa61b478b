"""VALUES and generate_series (issue 29, item 3) against a real PostgreSQL (tests/pg_server.py):
VALUES as a query and in FROM (column names ``column1...``, types resolved per column, NULLs,
ORDER BY/LIMIT), ``generate_series`` over integers, NUMERIC and time stamps (steps of months
clamp the day as Postgres does, one step after the other), in FROM with aliases and alone in a
select list without FROM; random bounds and steps, zero steps and NULL arguments included.
Both must give the same rows (and column names), or Postgres a data error and Hummock an
``ExecutionError``. In a materialized view both are refused by name.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import UnsupportedError
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

FIXED = [
    "VALUES (1, 'a'), (2, NULL), (NULL, 'c')",
    "VALUES (1, 2.5), (2, 3)",
    "VALUES (1) ORDER BY 1 DESC",
    "VALUES ('x', 1), ('y', 2) ORDER BY column2 DESC LIMIT 1",
    "SELECT * FROM (VALUES (1, 'one'), (2, 'two')) AS v(n, name) WHERE n > 1",
    "SELECT v.n * 10, t.b FROM (VALUES (1), (2), (3)) AS v(n) JOIN t ON t.a = v.n",
    "SELECT count(*), sum(column1) FROM (VALUES (1), (2), (NULL)) AS v",
    "VALUES (1), ('2')",
    "VALUES (1, 2), (3)",
    "VALUES (2147483647 + 1)",
    "SELECT * FROM generate_series(1, 5)",
    "SELECT * FROM generate_series(5, 1)",
    "SELECT * FROM generate_series(5, 1, -2) AS g",
    "SELECT x * 2 FROM generate_series(1, 10, 3) AS g(x)",
    "SELECT * FROM generate_series(1.5, 4, 0.75)",
    "SELECT * FROM generate_series(1, NULL)",
    "SELECT * FROM generate_series(1, 3, 0)",
    "SELECT * FROM generate_series(2147483640, 2147483647, 3)",
    "SELECT * FROM generate_series(TIMESTAMP '2024-01-31', TIMESTAMP '2024-06-01', INTERVAL '1 month')",
    "SELECT * FROM generate_series(TIMESTAMP '2024-01-01 10:00', TIMESTAMP '2024-01-01 08:00', INTERVAL '-30 minutes')",
    "SELECT generate_series(1, 3)",
    "SELECT generate_series(1, 3) AS x, 'a' AS y",
    "SELECT g.generate_series FROM generate_series(1, 2) AS g",
    "SELECT count(*) FROM generate_series(1, 1000) AS g(x) WHERE x % 7 = 0",
]


@pytest.fixture(scope="module")
def both(pg):  # noqa: F811
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
    pg.execute("INSERT INTO t VALUES (1, 'p'), (3, 'q'), (4, NULL)")
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        conn.execute("INSERT INTO t VALUES (1, 'p'), (3, 'q'), (4, NULL)")
        yield conn, pg


def check(conn, pg, text, names=True):
    theirs, ours = run_pg(pg, text), run_ours(conn, text)
    where = f"{text}\n  postgres: {theirs[1] if theirs[0] != 'ok' else ''}\n  hummock: {ours[1] if ours[0] != 'ok' else ''}"
    if theirs[0] == "ok":
        assert ours[0] == "ok", where
        a = [tuple(norm(v) for v in r) for r in ours[1]]
        b = [tuple(norm(v) for v in r) for r in theirs[1]]
        assert same_multiset(a, b), f"{where}\n  ours:   {show(sorted(a))}\n  theirs: {show(sorted(b))}"
        if names:
            ours_names = [d[0] for d in conn.execute(text).description]
            theirs_names = [d.name for d in pg.execute(text).description]
            assert ours_names == theirs_names, where
        if "ORDER BY" in text:
            assert [tuple(map(norm, r)) for r in ours[1]] == [tuple(map(norm, r)) for r in theirs[1]], where
    elif theirs[0] == "data":
        assert ours[0] == "data", where
    else:
        assert ours[0] != "ok", where


@pytest.mark.parametrize("text", FIXED)
def test_values_and_generate_series_agree_with_postgres(both, text):
    check(*both, text)


@settings(max_examples=25, deadline=None)
@given(start=st.integers(-20, 20), stop=st.integers(-20, 20), step=st.none() | st.integers(-7, 7),
       items=st.lists(st.tuples(st.none() | st.integers(-5, 5), st.none() | st.sampled_from(["a", "", "b c"])),
                      min_size=1, max_size=5))
def test_random_series_and_values_agree_with_postgres(both, start, stop, step, items):
    conn, pg = both
    args = f"{start}, {stop}" + ("" if step is None else f", {step}")
    check(conn, pg, f"SELECT * FROM generate_series({args}) AS g(x)")
    check(conn, pg, f"SELECT * FROM generate_series({args}::numeric / 2, {stop}) AS g(x)", names=False)
    rows = ", ".join(f"({'NULL' if a is None else a}, {'NULL' if b is None else repr(b)})" for a, b in items)
    check(conn, pg, f"VALUES {rows}")
    check(conn, pg, f"SELECT column1 + 1, column2 FROM (VALUES {rows}) AS v WHERE column1 IS NOT NULL", names=False)


@pytest.mark.parametrize("query", ["SELECT * FROM (VALUES (1)) AS v(x)", "SELECT * FROM generate_series(1, 3)",
                                   "VALUES (1)"])
def test_a_materialized_view_refuses_values_and_series_by_name(query):
    with sql.connect(":memory:") as conn:
        with pytest.raises(UnsupportedError, match="VALUES|generate_series|FROM"):
            conn.execute(f"CREATE MATERIALIZED VIEW m AS {query}")
