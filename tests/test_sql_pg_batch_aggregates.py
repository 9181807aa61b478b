"""``string_agg``, the ``stddev``/``variance`` family and the ordered-set aggregates ``mode`` /
``percentile_cont`` / ``percentile_disc`` (issue 29, item 2) against a real
PostgreSQL: random groups of NULL-heavy integers, NUMERICs, doubles and texts; ``string_agg``
ordered by the unique key (its order is otherwise Postgres' whim), with FILTER and NULL values
skipped; the variance family exact in NUMERIC for integer and NUMERIC input (compared to a
relative 1e-12), double precision for float input; NULL with no rows (and the sample forms with
one). The same queries as materialized views (but the ordered-set ones) are checked too, built
before the rows arrive; a materialized view refuses the ordered-set aggregates by name (string_agg,
array_agg and the variance family in MVs under DML: tests/test_sql_mv_stats_aggregates.py).
"""

import pytest
import sqlglot
from sqlglot import exp
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import UnsupportedError
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

COLUMNS = "k INT PRIMARY KEY, g INT, a INT, n NUMERIC, f DOUBLE PRECISION, s VARCHAR"
QUERIES = [
    "SELECT g, string_agg(s, ',' ORDER BY k), string_agg(s, '' ORDER BY k DESC) FROM t GROUP BY g",
    "SELECT g, string_agg(a::varchar, '; ' ORDER BY a NULLS FIRST, k) FILTER (WHERE a > 0) FROM t GROUP BY g",
    "SELECT string_agg(s || '!', '-' ORDER BY s, k) FROM t",
    "SELECT g, stddev(a), variance(a), stddev_pop(a), var_pop(a), stddev_samp(n), var_samp(n) FROM t GROUP BY g",
    "SELECT g, stddev(f), variance(f), stddev_pop(f), var_pop(f), count(*) FROM t GROUP BY g",
    "SELECT stddev(a), var_pop(n), stddev(f) FROM t WHERE k > 20",
    "SELECT g, stddev(a) FILTER (WHERE s IS NOT NULL), sum(a) FROM t GROUP BY g HAVING count(*) > 1",
    "SELECT g, mode() WITHIN GROUP (ORDER BY a), mode() WITHIN GROUP (ORDER BY s DESC), "
    "percentile_disc(0.5) WITHIN GROUP (ORDER BY n) FROM t GROUP BY g",
    "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY a), percentile_cont(0.1) WITHIN GROUP (ORDER BY f DESC), "
    "percentile_cont(1) WITHIN GROUP (ORDER BY n), percentile_disc(0) WITHIN GROUP (ORDER BY s) FROM t GROUP BY g",
    "SELECT percentile_disc(0.75) WITHIN GROUP (ORDER BY a DESC), percentile_cont(0.33) WITHIN GROUP (ORDER BY a) "
    "FROM t",
]
rows = st.dictionaries(st.integers(0, 30), st.tuples(
    st.none() | st.integers(0, 2), st.none() | st.integers(-100, 100),
    st.none() | st.sampled_from(["0", "1.5", "-2.25", "100.125", "3"]),
    st.none() | st.sampled_from([0.5, -1.25, 1e10, 3.0]), st.none() | st.sampled_from(["a", "", "xy", "B"])),
    min_size=0, max_size=12)


def _aliased(q):
    """``q`` with its select items named c0, c1, ... (an MV's columns need distinct names)."""
    tree = sqlglot.parse_one(q, read="postgres")
    tree.set("expressions", [exp.alias_(e, f"c{i}") for i, e in enumerate(tree.expressions)])
    return tree.sql(dialect="postgres")


def lit(v):
    return "NULL" if v is None else repr(v)


@settings(max_examples=10, deadline=None)
@given(data=rows)
def test_string_agg_and_the_variance_family_agree_with_postgres(pg, data):  # noqa: F811
    insert = "INSERT INTO t VALUES " + ", ".join(
        f"({k}, {lit(g)}, {lit(a)}, {'NULL' if n is None else n}, {lit(f)}, {lit(s)})"
        for k, (g, a, n, f, s) in sorted(data.items()))
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute(f"CREATE TABLE t ({COLUMNS})")
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        mvs = {q: f"mv{i}" for i, q in enumerate(QUERIES) if "WITHIN GROUP" not in q}   # maintained as rows arrive
        for q, name in mvs.items():
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {_aliased(q)}")
        if data:
            pg.execute(insert)
            conn.execute(insert)
        for q in QUERIES + [f"SELECT * FROM {name}" for name in mvs.values()]:
            theirs = run_pg(pg, next((k for k, v in mvs.items() if q.endswith(f" {v}")), q))
            ours = run_ours(conn, q)
            where = f"{q}\n  postgres: {theirs[1] if theirs[0] != 'ok' else ''}\n  hummock: " \
                    f"{ours[1] if ours[0] != 'ok' else ''}\n  data: {data}"
            assert theirs[0] == "ok", where
            assert ours[0] == "ok", where
            a = [tuple(map(norm, r)) for r in ours[1]]
            b = [tuple(map(norm, r)) for r in theirs[1]]
            assert same_multiset(a, b), f"{where}\n  ours:   {show(sorted(a))}\n  theirs: {show(sorted(b))}"


@pytest.mark.parametrize("call", ["mode() WITHIN GROUP (ORDER BY a)", "percentile_cont(0.5) WITHIN GROUP (ORDER BY a)"])
def test_a_materialized_view_refuses_them_by_name(call):
    with sql.connect(":memory:") as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        with pytest.raises(UnsupportedError, match=f"aggregate {call.split('(')[0]} is supported in a batch query only"):
            conn.execute(f"CREATE MATERIALIZED VIEW m AS SELECT g, {call} AS x FROM t GROUP BY g")
