"""Arrays (issue 29, item 3) against a real PostgreSQL (tests/pg_server.py): array columns
(``INT[]``, ``TEXT[]``), ``ARRAY[...]``, subscripts and slices, ``= ANY`` / ``<> ALL``, the array
functions, ``||`` on arrays, array comparison, ``@>`` / ``<@`` / ``&&``, ``unnest`` in FROM (implicit LATERAL, ``CROSS
JOIN LATERAL``, ``LEFT JOIN LATERAL ... ON TRUE``, ``WITH ORDINALITY``) and in the select list,
and ``array_agg`` with ORDER BY.

Each example draws a small NULL-heavy table (arrays with NULL elements, empty arrays, NULL
arrays; text elements that need quoting: empty, ``NULL``, commas, quotes, backslashes, braces,
spaces), loads it into both, and runs every call as ``SELECT k, (call)::text FROM t`` -- the
array text itself is compared, so ``array_out``'s quoting is checked too. Verdicts as in
tests/test_sql_pg_functions.py: same rows; or Postgres a data error and Hummock an
``ExecutionError``; or both refuse.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import lit, pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

COLUMNS = "k INT PRIMARY KEY, a INT[], b INT[], s TEXT[], x INT, w TEXT"
ELEMS = [0, 1, 2, 3, -1, 7]
TEXTS = ["", "a", "NULL", "null", "a,b", 'q"t', "b\\s", "{x}", "two words", "ÄÖ", "x"]
STRINGS = ["a,b,,c", "", "a", "1,2,3", "x-y", "foo123bar", "ab", "NULL,a"]

CALLS = [
    "a", "s", "b", "a[1]", "a[x]", "a[0]", "a[x + 1]", "s[2]", "a[2:3]", "a[:2]", "a[x:]", "s[2:]",
    "a[CAST(x AS INT)]", "a[x::bigint - 1]", "a[1 + 1]", "a[-1]", "a[2147483647]", "a[NULL]", "a[x:x + 1]",
    "array_length(a, 1)", "array_length(a, 2)", "cardinality(a)", "cardinality(s)", "array_lower(a, 1)",
    "array_upper(a, 1)", "array_ndims(a)", "array_dims(s)",
    "x = ANY(a)", "x <> ALL(a)", "x < ANY(a)", "x >= ALL(a)", "w = ANY(s)", "x = ANY('{1,2,NULL}')",
    "x = SOME(b)", "NULL = ANY(a)", "x <> ALL('{1,2,NULL}')", "x = ANY(ARRAY[1, 7]::bigint[])",
    "x::bigint <> ALL(a)",
    "array_position(a, x)", "array_position(a, NULL)", "array_position(s, w)", "array_position(a, 1, 2)",
    "array_positions(a, x)", "array_append(a, x)", "array_prepend(x, a)", "array_cat(a, b)", "array_remove(a, x)",
    "array_remove(s, NULL)", "array_replace(a, x, 0)", "a || b", "a || x", "x || a", "a || '{5,6}'", "s || w",
    "array_to_string(a, ',')", "array_to_string(a, ',', '*')", "array_to_string(s, '|')",
    "array_to_string(s, '|', 'nil')", "string_to_array(w, ',')", "string_to_array(w, ',', '')",
    "string_to_array(w, NULL)", "string_to_array(w, '')", "regexp_match(w, '(\\w)(\\w)')", "regexp_match(w, 'b+')",
    "ARRAY[x, k]", "ARRAY[x, NULL]", "ARRAY[w, 'q']", "ARRAY[1.5, x]", "ARRAY[]::int[]",
    "a = b", "a < b", "a >= b", "a IS DISTINCT FROM b", "a = '{1,2}'", "a::bigint[]", "s::text",
    "array_length(string_to_array(w, ','), 1)", "(string_to_array(w, ','))[2]",
    "(ARRAY[x, 2 * x])[2]", "cardinality(array_remove(a, NULL))",
    "regexp_split_to_array(w, ',')", "regexp_split_to_array(w, '')", "regexp_split_to_array(w, ',*')",
    "regexp_split_to_array(w, '[ab]', 'i')", "regexp_split_to_array(w, '\\s*')",
    "a @> b", "a <@ b", "a && b", "s @> ARRAY[w]", "b <@ ARRAY[x, 1]", "a && '{1,NULL}'",
]


def arrays(elems):
    return st.none() | st.lists(st.none() | st.sampled_from(elems), max_size=4)


def rows():
    def row(k):
        return st.tuples(st.just(k), arrays(ELEMS), arrays(ELEMS), arrays(TEXTS), st.none() | st.sampled_from(ELEMS),
                         st.none() | st.sampled_from(STRINGS + TEXTS))
    return st.lists(st.integers(0, 30), min_size=1, max_size=6, unique=True).flatmap(
        lambda ks: st.tuples(*[row(k) for k in ks]))


def array_lit(v, typ):
    if v is None:
        return "NULL"
    return f"ARRAY[{', '.join(lit(e) for e in v)}]::{typ}[]"


def insert_sql(rs):
    return "INSERT INTO t VALUES " + ", ".join(
        f"({k}, {array_lit(a, 'int')}, {array_lit(b, 'int')}, {array_lit(s, 'text')}, {lit(x)}, {lit(w)})"
        for k, a, b, s, x, w in rs)


def agree(conn, pg, text, where=""):
    theirs, ours = run_pg(pg, text), run_ours(conn, text)
    where = f"{text}\n  postgres: {theirs[1] if theirs[0] != 'ok' else ''}\n  hummock: " \
            f"{ours[1] if ours[0] != 'ok' else ''}{where}"
    if theirs[0] == "ok":
        assert ours[0] == "ok", where
        a = [tuple(norm(v) for v in r) for r in ours[1]]
        b = [tuple(norm(v) for v in r) for r in theirs[1]]
        assert same_multiset(a, b), f"{where}\n  ours:   {show(sorted(a))}\n  theirs: {show(sorted(b))}"
        if "ORDER BY" in text.split("FROM")[-1]:
            assert a == b, f"{where}\n  ours:   {show(a)}\n  theirs: {show(b)}"
    elif theirs[0] == "data":
        assert ours[0] == "data", where
    else:
        assert ours[0] != "ok", where


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=rows())
def test_array_expressions_agree_with_postgres(pg, data):
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute(f"CREATE TABLE t ({COLUMNS})")
    pg.execute(insert_sql(data))
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        conn.execute(insert_sql(data))
        for call in CALLS:
            agree(conn, pg, f"SELECT k, CAST(({call}) AS TEXT) FROM t", f"\n  data: {data}")


FIXED_ROWS = [(1, [1, 2, None], [2], ["x", "y z"], 2, "a,b"), (2, [3, 4], None, ['a"b', None, ""], 9, ""),
              (3, None, [], [], None, None), (4, [], [5, 5], ["NULL"], 5, "q"), (5, [4, 3, 4], [2], None, 4, "r"),
              (6, [1, None], [], None, 1, "r"), (7, [1, 2], [2, None], ["a\"b", "c"], 2, "")]

QUERIES = [
    # unnest in FROM: implicit LATERAL, CROSS JOIN LATERAL, LEFT JOIN LATERAL, ordinality, constants
    "SELECT k, x FROM t, unnest(t.a) AS u(x)",
    "SELECT k, u FROM t, unnest(a) u",
    "SELECT k, u.v, u.n FROM t CROSS JOIN LATERAL unnest(t.s) WITH ORDINALITY AS u(v, n)",
    "SELECT k, v FROM t LEFT JOIN LATERAL unnest(t.b) AS v ON TRUE",
    "SELECT * FROM unnest(ARRAY[3, NULL, 1]) WITH ORDINALITY",
    "SELECT * FROM unnest(ARRAY['a', 'b']) AS x",
    "SELECT * FROM unnest(ARRAY[1, 2], ARRAY['a', 'b', 'c']) AS u(i, s)",
    "SELECT * FROM unnest('{}'::int[])",
    "SELECT sum(x), count(*) FROM t, unnest(a) AS u(x) WHERE x > 1",
    # unnest in the select list (several zip, shorter ones padded with NULL)
    "SELECT k, unnest(a) FROM t",
    "SELECT k, unnest(a) AS e, unnest(s) AS f FROM t",
    "SELECT unnest(ARRAY[1, 2]) + 10 AS v",
    "SELECT k, unnest(a) FROM t WHERE k > 1 ORDER BY k, 2",
    # array_agg
    "SELECT k, CAST(array_agg(x ORDER BY x DESC) AS TEXT) FROM t, unnest(a) AS u(x) GROUP BY k",
    "SELECT CAST(array_agg(w ORDER BY k) AS TEXT) FROM t",
    "SELECT CAST(array_agg(x ORDER BY k) AS TEXT) FROM t WHERE k > 100",
    "SELECT x > 3, CAST(array_agg(k ORDER BY k) AS TEXT) FROM t GROUP BY x > 3",
    "SELECT CAST(array_agg(a[1] ORDER BY k DESC) FILTER (WHERE k < 5) AS TEXT) FROM t",
    # WHERE with arrays
    "SELECT k FROM t WHERE 4 = ANY(a)",
    "SELECT k FROM t WHERE x <> ALL(b)",
    "SELECT k FROM t WHERE a = ARRAY[3, 4]",
    "SELECT k FROM t WHERE cardinality(a) > 1 AND a[1] < a[2]",
    "SELECT k, CAST(a AS TEXT) FROM t ORDER BY a, k",
    "SELECT k FROM t WHERE k = ANY(SELECT x FROM t)",
    # ORDER BY arrays: prefixes first, NULL elements after values, NaN above numbers
    "SELECT k, CAST(s AS TEXT) FROM t ORDER BY s, k",
    "SELECT k FROM t ORDER BY b DESC, k",
    "SELECT k FROM t ORDER BY a DESC NULLS LAST, k LIMIT 4",
    "SELECT CAST(v AS TEXT) AS w FROM (VALUES ('{NaN}'::float8[]), ('{1}'), ('{1,NULL}'), ('{}'), (NULL), "
    "('{-1,NaN}'), ('{NULL}')) AS q(v) ORDER BY v DESC",
    "SELECT CAST(v AS TEXT) AS w FROM (VALUES ('{NaN}'::float8[]), ('{1}'), ('{1,NULL}'), ('{}'), ('{NULL}')) AS q(v) "
    "ORDER BY v",
    "SELECT k FROM t ORDER BY a, k",
    # ARRAY(subquery): the rows in the subquery's order, {} for none, correlated too
    "SELECT CAST(ARRAY(SELECT x FROM t ORDER BY k DESC) AS TEXT)",
    "SELECT CAST(ARRAY(SELECT w FROM t WHERE k > 100) AS TEXT)",
    "SELECT k, CAST(ARRAY(SELECT t2.k FROM t AS t2 WHERE t2.x = t.x ORDER BY t2.k DESC) AS TEXT) FROM t",
    "SELECT cardinality(ARRAY(SELECT k FROM t WHERE x IS NOT NULL)), CAST(ARRAY(SELECT x * 2 AS y FROM t "
    "ORDER BY y) AS TEXT)",
    # arrays as grouping keys (batch)
    "SELECT CAST(b AS TEXT), count(*) FROM t GROUP BY b",
    "SELECT DISTINCT CAST(b AS TEXT) FROM t",
    "SELECT CAST(x AS TEXT) FROM (SELECT b AS x FROM t UNION SELECT a FROM t) AS u",
    "SELECT count(DISTINCT b), count(DISTINCT a) FROM t",
    "SELECT cardinality(b), CAST(array_agg(k ORDER BY k) AS TEXT) FROM t GROUP BY b",
]


@pytest.fixture(scope="module")
def loaded(pg):  # noqa: F811
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute(f"CREATE TABLE t ({COLUMNS})")
    pg.execute(insert_sql(FIXED_ROWS))
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        conn.execute(insert_sql(FIXED_ROWS))
        yield conn, pg


@pytest.mark.parametrize("call", CALLS)
def test_each_array_call_on_fixed_rows(loaded, call):
    conn, pg = loaded
    agree(conn, pg, f"SELECT k, CAST(({call}) AS TEXT) FROM t")


@pytest.mark.parametrize("text", QUERIES)
def test_array_queries_agree_with_postgres(loaded, text):
    conn, pg = loaded
    agree(conn, pg, text)
    if "unnest" in text and text.startswith("SELECT k, unnest"):   # column names as Postgres names them
        assert [d[0] for d in conn.execute(text).description] == [d.name for d in pg.execute(text).description]
