"""Window functions of issue 29 (item 1) against a real PostgreSQL (tests/pg_server.py), and
as materialized views equal to their batch recomputation under random DML.

Each example draws a small NULL-heavy table ``w (k INT PRIMARY KEY, g INT, a INT, f DOUBLE
PRECISION)`` and runs every query of ``QUERIES`` on Hummock and on PostgreSQL: ``rank``,
``dense_rank``, ``percent_rank``, ``cume_dist`` and ``first_value``/``last_value`` of the order
column (all the same whatever order ties take), and ``ntile``, ``lag``, ``lead``,
``first_value``, ``last_value``, ``nth_value`` ordered by the unique ``k`` under each supported
frame, with and without PARTITION BY, and windows over GROUP BY's groups. Answers must agree
as multisets (tests/test_sql_pg_differential.py's comparison); Postgres' data errors must be
Hummock's ``ExecutionError``.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

COLUMNS = "k INT PRIMARY KEY, g INT, a INT, f DOUBLE PRECISION"
FRAMES = ["", " ROWS UNBOUNDED PRECEDING", " ROWS 1 PRECEDING", " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
          " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
          " RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"]
QUERIES = [
    "SELECT k, rank() OVER (ORDER BY a), dense_rank() OVER (ORDER BY a), percent_rank() OVER (ORDER BY a), "
    "cume_dist() OVER (ORDER BY a) FROM w",
    "SELECT k, rank() OVER (PARTITION BY g ORDER BY a DESC), dense_rank() OVER (PARTITION BY g ORDER BY f), "
    "cume_dist() OVER (PARTITION BY g ORDER BY a NULLS FIRST), percent_rank() OVER (PARTITION BY g) FROM w",
    "SELECT k, first_value(a) OVER (PARTITION BY g ORDER BY a), last_value(a) OVER (PARTITION BY g ORDER BY a), "
    "rank() OVER () FROM w",
    "SELECT k, ntile(3) OVER (ORDER BY k), ntile(2) OVER (PARTITION BY g ORDER BY k DESC), ntile(10) OVER "
    "(ORDER BY k) FROM w",
    "SELECT k, lag(a) OVER (ORDER BY k), lag(a, 2, -1) OVER (ORDER BY k), lead(f) OVER (PARTITION BY g ORDER BY k), "
    "lead(a, 3) OVER (PARTITION BY g ORDER BY k), lag(a, 0) OVER (ORDER BY k), lead(a, -1) OVER (ORDER BY k) FROM w",
    "SELECT k, lag(f, 1, 0.5) OVER (PARTITION BY g ORDER BY k DESC), lead(g, 1, 99) OVER (ORDER BY k) FROM w",
    "SELECT k, row_number() OVER (PARTITION BY g ORDER BY k), row_number() OVER (ORDER BY k DESC) FROM w",
    "SELECT k, ntile(0) OVER (ORDER BY k) FROM w",
    "SELECT k, nth_value(a, 0) OVER (ORDER BY k) FROM w",
    "SELECT g, sum(a), rank() OVER (ORDER BY sum(a) DESC NULLS LAST), lag(g) OVER (ORDER BY g), "
    "count(*) OVER () FROM w GROUP BY g",
    "SELECT g, count(*), dense_rank() OVER (ORDER BY count(*)), sum(count(*)) OVER (ORDER BY g) FROM w "
    "GROUP BY g HAVING count(*) > 1",
] + [f"SELECT k, first_value(a) OVER (PARTITION BY g ORDER BY k{fr}), last_value(a) OVER (ORDER BY k{fr}), "
     f"nth_value(a, 2) OVER (PARTITION BY g ORDER BY k{fr}), sum(a) OVER (ORDER BY k{fr}) FROM w" for fr in FRAMES]


def rows():
    row = st.tuples(st.none() | st.integers(0, 2), st.none() | st.integers(-2, 3),
                    st.none() | st.sampled_from([0.5, -1.0, 2.25, 0.0]))
    return st.dictionaries(st.integers(0, 30), row, min_size=1, max_size=12)


def lit(v):
    return "NULL" if v is None else repr(v)


def insert_sql(data):
    return "INSERT INTO w VALUES " + ", ".join(f"({k}, {lit(g)}, {lit(a)}, {lit(f)})"
                                                for k, (g, a, f) in sorted(data.items()))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=rows())
def test_window_functions_agree_with_postgres(pg, data):  # noqa: F811
    pg.execute("DROP TABLE IF EXISTS w")
    pg.execute(f"CREATE TABLE w ({COLUMNS})")
    pg.execute(insert_sql(data))
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute(f"CREATE TABLE w ({COLUMNS})")
        conn.execute(insert_sql(data))
        for text in QUERIES:
            theirs, ours = run_pg(pg, text), run_ours(conn, text)
            where = f"{text}\n  postgres: {theirs[1] if theirs[0] != 'ok' else ''}\n  hummock: " \
                    f"{ours[1] if ours[0] != 'ok' else ''}\n  data: {data}"
            if theirs[0] == "ok":
                assert ours[0] == "ok", where
                a = [tuple(norm(v) for v in r) for r in ours[1]]
                b = [tuple(norm(v) for v in r) for r in theirs[1]]
                assert same_multiset(a, b), f"{where}\n  ours:   {show(sorted(a))}\n  theirs: {show(sorted(b))}"
            elif theirs[0] == "data":
                assert ours[0] == "data", where
            else:
                assert ours[0] != "ok", where


def test_window_functions_in_materialized_views_equal_their_batch_recomputation():
    queries = [q for q in QUERIES if "(0)" not in q and ", 0)" not in q]
    rng = random.Random(29)
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute(f"CREATE TABLE w ({COLUMNS})")
        conn.execute(insert_sql({k: (rng.choice([None, 0, 1]), rng.randint(-2, 3), 0.5) for k in range(6)}))
        for i, q in enumerate(queries):
            cols = ", ".join(f"c{j}" for j in range(len(conn.execute(q).description)))
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} ({cols}) AS {q}")
        for step in range(6):
            live = [r[0] for r in conn.execute("SELECT k FROM w").fetchall()]
            for k in rng.sample(range(30), 3):
                g, a, f = rng.choice([None, 0, 1, 2]), rng.choice([None, -2, 0, 1, 3]), rng.choice([None, 0.5, 2.25])
                conn.execute(f"INSERT INTO w VALUES ({k}, {lit(g)}, {lit(a)}, {lit(f)})")
            for k in rng.sample(live, min(2, len(live))):
                conn.execute(f"DELETE FROM w WHERE k = {k}")
            conn.execute(f"UPDATE w SET a = {rng.randint(-2, 3)}, g = {rng.choice([0, 1])} WHERE k % 4 = {step % 4}")
            conn.execute("FLUSH")
            for i, q in enumerate(queries):
                mv = [tuple(norm(v) for v in r) for r in conn.execute(f"SELECT * FROM m{i}").fetchall()]
                batch = [tuple(norm(v) for v in r) for r in conn.execute(q).fetchall()]
                assert same_multiset(mv, batch), f"{q} at step {step}:\n  mv:    {show(sorted(mv))}\n" \
                                                 f"  batch: {show(sorted(batch))}"
