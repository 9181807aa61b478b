"""EXCEPT ALL and INTERSECT ALL (issue 29, item 4) against a real PostgreSQL: random multisets
with duplicates and NULLs on both sides, in a batch SELECT and in materialized views kept
through random inserts and deletes; after each FLUSH the MV, the batch SELECT and PostgreSQL
give the same multiset (a row m times on the left and n on the right: max(m - n, 0) times for
EXCEPT ALL, min(m, n) for INTERSECT ALL).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

QUERIES = [
    "SELECT a, b FROM l EXCEPT ALL SELECT a, b FROM r",
    "SELECT a, b FROM l INTERSECT ALL SELECT a, b FROM r",
    "SELECT a FROM r EXCEPT ALL SELECT a FROM l WHERE b IS NOT NULL",
    "SELECT b FROM l INTERSECT ALL SELECT b FROM r EXCEPT ALL SELECT b FROM r WHERE a = 1",
    "SELECT a FROM l EXCEPT ALL (SELECT a FROM r INTERSECT ALL SELECT a FROM l)",
]
row = st.tuples(st.none() | st.integers(0, 2), st.none() | st.sampled_from(["x", "y"]))
ops = st.lists(st.tuples(st.sampled_from(["l", "r"]), st.booleans(), row), min_size=1, max_size=10)


def lit(v):
    return "NULL" if v is None else repr(v)


@settings(max_examples=8, deadline=None)
@given(first=st.lists(st.tuples(st.sampled_from(["l", "r"]), row), max_size=12), steps=st.lists(ops, max_size=3))
def test_except_all_and_intersect_all_agree_with_postgres_in_batch_and_mvs(pg, first, steps):  # noqa: F811
    for t in ("l", "r"):
        pg.execute(f"DROP TABLE IF EXISTS {t}")
        pg.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR)")
    with sql.connect(":memory:", implicit_flush=True) as conn:
        for t in ("l", "r"):
            conn.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR)")
        next_id = 0

        def write(text):
            pg.execute(text)
            conn.execute(text)
        for t, (a, b) in first:
            write(f"INSERT INTO {t} VALUES ({next_id}, {lit(a)}, {lit(b)})")
            next_id += 1
        for i, q in enumerate(QUERIES):
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        for step in [[]] + steps:
            for t, insert, (a, b) in step:
                if insert:
                    write(f"INSERT INTO {t} VALUES ({next_id}, {lit(a)}, {lit(b)})")
                    next_id += 1
                else:
                    write(f"DELETE FROM {t} WHERE a IS NOT DISTINCT FROM {lit(a)} AND id % 2 = {next_id % 2}"
                          if a is not None else f"DELETE FROM {t} WHERE a IS NULL AND id % 3 = 0")
            conn.execute("FLUSH")
            for i, q in enumerate(QUERIES):
                status, theirs = run_pg(pg, q)
                assert status == "ok", theirs
                expected = [tuple(map(norm, r)) for r in theirs]
                for what, text in (("batch", q), ("mv", f"SELECT * FROM m{i}")):
                    got = [tuple(map(norm, r)) for r in conn.execute(text).fetchall()]
                    assert same_multiset(got, expected), f"{what}: {q}\n  ours:   {show(sorted(got))}\n" \
                                                         f"  theirs: {show(sorted(expected))}"
