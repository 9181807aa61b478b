"""JSONB aggregates, path edits and set-returning functions in a select list (issue 29, item 2)
against a real PostgreSQL (tests/pg_server.py), and their materialized views against batch.

- ``jsonb_agg([DISTINCT] x [ORDER BY ...]) [FILTER ...]`` of a column of every type (integers, NUMERIC
  with its scale, NaN and infinities, floats, text with escapes, booleans, dates, time stamps
  with and without a zone, times, intervals, bytea, arrays, JSONB, NULLs), and
  ``jsonb_object_agg(k, v)`` keyed by values of several types: the printed JSON must equal
  Postgres' byte for byte; a NULL or JSONB key is a data error on both sides.
- ``#-``, ``?|``, ``?&``, ``j - text[]``, ``jsonb_insert``, ``jsonb_set_lax``, ``jsonb_pretty``, ``jsonb_object``
  and ``jsonb_set``'s NULL path elements over fixed and random documents (each expression over
  all rows in one query; where Postgres raises a data error, row by row: both raise it or
  both answer alike).
- ``to_jsonb(t)`` / ``jsonb_agg(t)`` of a whole row (every column type above).
- ``jsonb_array_elements[_text]`` / ``jsonb_object_keys`` in a select list (zipped with each
  other and with ``unnest``, the shorter padded with NULL).
- ``jsonb_to_record[set](j) AS x(a int, ...)`` in FROM, over constants and a column.
- materialized views of all of these (and of ``FROM t, jsonb_each(t.j)``) under random inserts,
  updates and deletes equal their batch recomputation at every step.

Verdicts as in tests/test_sql_pg_jsonb.py (its ``check``).
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.string import TextLoader

import sql
from strategies import _json_text, json_values
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)
from test_sql_pg_jsonb import check, lit

pytestmark = pytest.mark.postgres

COLUMNS = ("k INT PRIMARY KEY, g INT, i INT, b BIGINT, n NUMERIC, f DOUBLE PRECISION, r REAL, s VARCHAR, "
           "bo BOOLEAN, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ, tm TIME, iv INTERVAL, ba BYTEA, a INT[], "
           "ta TEXT[], j JSONB")
#: per column (after k and g): SQL literals of edge values, the same text on both sides
POOLS = [
    ["NULL", "0", "-1", "2147483647", "42"],
    ["NULL", "-9223372036854775808", "7"],
    ["NULL", "1.50", "-0.001", "'NaN'", "123456789012345678901234567890.5", "1e2", "'-Infinity'", "0.000"],
    ["NULL", "1.5", "'-0'", "'NaN'", "'Infinity'", "1e-5", "1e300", "0.1", "123456789.125"],
    ["NULL", "1.5", "0.1", "3.4e38", "'NaN'", "'-Infinity'", "1e-30"],
    ["NULL", "''", "'a'", "'é\"\\'", "'line\nbreak\ttab'", "'x''y'", "'\x01'", "'1.50'"],
    ["NULL", "true", "false"],
    ["NULL", "'2024-02-29'", "'1999-12-31'", "'0044-03-15'"],
    ["NULL", "'2024-01-02 03:04:05'", "'2024-01-02 03:04:05.123456'", "'2000-01-01 00:00:00.5'"],
    ["NULL", "'2024-01-02 03:04:05+02'", "'2024-06-01 00:00:00.25-07:30'", "'1970-01-01 00:00:00+00'"],
    ["NULL", "'00:00:00'", "'23:59:59.999999'", "'12:30:00.5'"],
    ["NULL", "'1 day 02:00:00'", "'-1 mons +3 days -00:00:01.5'", "'1 year 2 mons'", "'00:00:00'",
     "'-00:00:00.000001'"],
    ["NULL", "'\\x0102ff'", "''"],
    ["NULL", "'{}'", "'{1,NULL,3}'", "'{5}'"],
    ["NULL", "'{a,\"b c\",NULL}'", "'{}'", "'{\"\\\\\"}'"],
    ["NULL", "'null'", "'{\"a\": [1, 2.50], \"b\": {}}'", "'\"s\"'", "'[]'", "'1e2'"],
]
NAMES = ["i", "b", "n", "f", "r", "s", "bo", "d", "ts", "tz", "tm", "iv", "ba", "a", "ta", "j"]


@pytest.fixture(scope="module")
def both(pg):  # noqa: F811
    pg.adapters.register_loader("jsonb", TextLoader)   # jsonb as Postgres' text, not Python objects
    pg.execute("SET IntervalStyle TO postgres")
    with sql.connect(":memory:", implicit_flush=True) as conn:
        yield conn, pg


def load_typed(conn, pg, rows) -> None:
    values = ", ".join("(" + ", ".join(map(str, row)) + ")" for row in rows)
    for side in (conn, pg):
        side.execute("DROP TABLE IF EXISTS t")
        side.execute(f"CREATE TABLE t ({COLUMNS})")
        side.execute(f"INSERT INTO t VALUES {values}")


def typed_rows(rng, n):
    return [[k, rng.randint(1, 3)] + [rng.choice(pool) for pool in POOLS] for k in range(n)]


AGGREGATES = [
    "SELECT g, " + ", ".join(f"jsonb_agg({c} ORDER BY k)" for c in NAMES) + " FROM t GROUP BY g ORDER BY g",
    "SELECT jsonb_agg(k ORDER BY k DESC), jsonb_agg(s ORDER BY s NULLS FIRST, k), "
    "jsonb_agg(j ORDER BY k) FILTER (WHERE k % 2 = 0), jsonb_agg(k) FILTER (WHERE false), "
    "jsonb_agg(a ORDER BY k DESC), jsonb_agg(k * 1.5 ORDER BY k), jsonb_agg(g ORDER BY g, k) FROM t",
    "SELECT jsonb_agg(k ORDER BY k) FROM t WHERE k < 0",
    "SELECT g, jsonb_object_agg(s, i ORDER BY k) FILTER (WHERE s IS NOT NULL), "
    "jsonb_object_agg(k, ts ORDER BY k), jsonb_object_agg(n, bo ORDER BY k) FILTER (WHERE n IS NOT NULL), "
    "jsonb_object_agg(f, iv ORDER BY k) FILTER (WHERE f IS NOT NULL), "
    "jsonb_object_agg(r, j ORDER BY k) FILTER (WHERE r IS NOT NULL), "
    "jsonb_object_agg(d, tz ORDER BY k) FILTER (WHERE d IS NOT NULL), "
    "jsonb_object_agg(bo, a ORDER BY k) FILTER (WHERE bo IS NOT NULL), "
    "jsonb_object_agg(tm, ba ORDER BY k) FILTER (WHERE tm IS NOT NULL), "
    "jsonb_object_agg(iv, ta ORDER BY k) FILTER (WHERE iv IS NOT NULL), "
    "jsonb_object_agg(tz, b ORDER BY k) FILTER (WHERE tz IS NOT NULL) FROM t GROUP BY g ORDER BY g",
    "SELECT g, jsonb_agg(i ORDER BY k) -> 0, jsonb_array_length(jsonb_agg(k)), "
    "jsonb_typeof(jsonb_object_agg(k, k)) FROM t GROUP BY g HAVING jsonb_agg(k) @> '[1]' OR count(*) > 2 ORDER BY g",
    "SELECT jsonb_object_agg('k', k ORDER BY k) FROM t",
    "SELECT g, jsonb_agg(DISTINCT i), jsonb_agg(DISTINCT s ORDER BY s DESC) FILTER (WHERE k > 1), "
    "jsonb_agg(DISTINCT d), jsonb_agg(DISTINCT bo), jsonb_agg(DISTINCT j), jsonb_agg(DISTINCT tz) FROM t "
    "GROUP BY g ORDER BY g",
    "SELECT k, to_jsonb(t) FROM t ORDER BY k",   # a whole row: an object of its columns
    "SELECT g, jsonb_agg(t ORDER BY k) FILTER (WHERE k > 2) FROM t GROUP BY g ORDER BY g",
    "SELECT to_jsonb(u) FROM (SELECT k, s AS \"S x\", j AS k2 FROM t) AS u ORDER BY u.k",
    "SELECT k, (SELECT jsonb_agg(u.k ORDER BY u.k DESC) FROM t AS u WHERE u.g = t.g), "
    "(SELECT jsonb_object_agg(u.k, u.d ORDER BY u.k) FROM t AS u WHERE u.g = t.g) FROM t ORDER BY k",
]
#: a NULL key (s), a key of a non-scalar type (j, a): data errors on both sides when a row has one
KEY_ERRORS = ["SELECT jsonb_object_agg(s, k) FROM t", "SELECT jsonb_object_agg(j, k) FROM t",
              "SELECT jsonb_object_agg(a, k) FROM t WHERE a IS NOT NULL"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_jsonb_aggregates_of_every_type_agree_with_postgres(both, seed):
    conn, pg = both
    load_typed(conn, pg, typed_rows(random.Random(seed), 10))
    for text in AGGREGATES:
        assert check(conn, pg, text, ordered=True) == "ok", text
    for text in KEY_ERRORS:
        assert check(conn, pg, text) in ("ok", "data"), text


def test_jsonb_aggregates_keep_every_value_alike(both):
    """Each pool value alone in jsonb_agg and as a jsonb_object_agg key (every edge value is
    compared, not only those the random rows drew)."""
    conn, pg = both
    rows = [[k, 1] + [pool[min(k, len(pool) - 1)] for pool in POOLS] for k in range(max(map(len, POOLS)))]
    load_typed(conn, pg, rows)
    for text in AGGREGATES[:2] + AGGREGATES[3:4]:
        assert check(conn, pg, text, ordered=True) == "ok", text


DOCS = ['{"a": 1, "b": [1, 2, {"c": "x"}], "aa": null}', '[1, "two", 3.50, [4], {"a": true}]', '{}', '[]',
        '{"a": {"b": {"c": [10, 20, 30]}}}', '["a", "b", "a"]', '{"a": [1, 2]}', '[[1, 2], {"b": 0}]',
        '{"b": 2, "a": 1, "two": 3}']
SCALARS = ['"str"', '12.30', 'true', 'null']
EDITS = [
    "j #- '{a}'", "j #- '{b,1}'", "j #- '{-1}'", "j #- '{0}'", "j #- '{x,y}'", "j #- '{}'", "j #- ARRAY['b', '-3']",
    "j #- '{a,b,c,1}'", "j #- '{1,0}'", "j #- '{9}'", "j #- '{-9}'", "j #- '{ +1}'",
    "j ?| ARRAY['a', 'x']", "j ?| '{x}'", "j ?| '{}'", "j ?| ARRAY[NULL, 'two']", "j ?& ARRAY['a', 'b']",
    "j ?& '{}'", "j ?& ARRAY['a', NULL]", "j ?& '{str}'",
    "j - ARRAY['a', 'two']", "j - '{a,b}'::text[]", "j - ARRAY[NULL]::text[]", "j - '{}'::text[]",
    "jsonb_insert(j, '{0}', '\"new\"')", "jsonb_insert(j, '{1}', '9', true)", "jsonb_insert(j, '{a}', '1')",
    "jsonb_insert(j, '{zz}', '[1]')", "jsonb_insert(j, '{b,-1}', '0', true)", "jsonb_insert(j, '{99}', '1')",
    "jsonb_insert(j, '{-99}', '1', true)", "jsonb_insert(j, '{a,b,c,0}', 'null')", "jsonb_insert(j, '{}', '1')",
    "jsonb_insert(j, ARRAY['-1'], to_jsonb(k))",
    "jsonb_set_lax(j, '{a}', NULL)", "jsonb_set_lax(j, '{a}', NULL, true, 'delete_key')",
    "jsonb_set_lax(j, '{0}', NULL, true, 'return_target')", "jsonb_set_lax(j, '{a}', NULL, false, 'use_json_null')",
    "jsonb_set_lax(j, '{zz}', '5')", "jsonb_set_lax(j, '{a}', NULL, true, 'raise_exception')",
    "jsonb_set_lax(j, '{a}', '1', NULL)", "jsonb_set_lax(j, '{a}', '2', true, NULL)",
    "jsonb_set_lax(j, '{a}', NULL, true, 'other')",
    "jsonb_set(j, '{a,NULL}', '1')", "jsonb_set(j, '{NULL}', '1')", "jsonb_set(j, '{b,NULL}', '1', false)",
    "jsonb_set(j, '{\" 1\"}', '1')", "jsonb_insert(j, '{\"1 \"}', '1')", "j #- '{a,NULL}'",
    "jsonb_set(j, '{99999999999}', '1')", "jsonb_pretty(j)", "jsonb_pretty(j -> 'b')",
    "jsonb_object(ARRAY['k', k::text, 'a', NULL, 'k', jsonb_typeof(j)])",
    "jsonb_object('{a,b}', ARRAY[j ->> 0, NULL])", "jsonb_object(ARRAY[j ->> 'a', 'v'])", "jsonb_object('{a,1,b}')",
    "jsonb_object('{a}', '{1,2}')", "jsonb_object('{}')",
    "jsonb_build_object(1e20::float8, 1, 1.5::real, 2, 'NaN'::float8, k)",
]


def check_rows(conn, pg, expr) -> set:
    """``expr`` over every row of ``t``: one query, or row by row where Postgres raises a data
    error (each row then answers alike or is a data error on both sides). Returns the verdicts."""
    text = f"SELECT k, {expr} FROM t"
    if run_pg(pg, text)[0] != "data":
        return {check(conn, pg, text)}
    keys = [r[0] for r in pg.execute("SELECT k FROM t").fetchall()]
    failing = [k for k in keys if run_pg(pg, f"{text} WHERE k = {k}")[0] == "data"]   # Postgres alone: cheap
    verdicts = {check(conn, pg, f"{text} WHERE k = {k}") for k in failing}
    rest = [k for k in keys if k not in failing]
    if rest:   # the rows Postgres answers, in one query
        verdicts.add(check(conn, pg, f"{text} WHERE k IN ({', '.join(map(str, rest))})"))
    return verdicts


def load_docs(conn, pg, docs) -> None:
    values = ", ".join(f"({k}, {lit(d)})" for k, d in enumerate(docs))
    for side in (conn, pg):
        side.execute("DROP TABLE IF EXISTS t")
        side.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        if docs:
            side.execute(f"INSERT INTO t VALUES {values}")


def test_path_edits_and_key_operators_agree_with_postgres(both):
    conn, pg = both
    load_docs(conn, pg, DOCS + [None])
    verdicts = {}
    for expr in EDITS:
        verdicts[expr] = check_rows(conn, pg, expr)
        assert verdicts[expr] <= {"ok", "data"}, expr
    # the data errors were reached (each of these raises for some document)
    for expr in ("jsonb_insert(j, '{a}', '1')", "j #- '{a}'", "jsonb_set_lax(j, '{a}', NULL, true, 'raise_exception')",
                 "jsonb_set(j, '{a,NULL}', '1')", "jsonb_set(j, '{99999999999}', '1')",
                 "jsonb_insert(j, '{\"1 \"}', '1')", "jsonb_object(ARRAY[j ->> 'a', 'v'])"):
        assert "data" in verdicts[expr], expr
    load_docs(conn, pg, SCALARS)   # a top-level scalar: each edit is a data error, the key operators answer
    for expr in ("j #- '{a}'", "j #- '{}'", "jsonb_insert(j, '{0}', '1')", "jsonb_set_lax(j, '{0}', NULL)",
                 "jsonb_set_lax(j, '{a}', NULL, true, 'return_target')", "j - ARRAY['a']", "j ?| '{str}'",
                 "j ?& '{str,x}'", "jsonb_pretty(j)"):
        assert check_rows(conn, pg, expr) <= {"ok", "data"}, expr


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(docs=st.lists(json_values, min_size=1, max_size=5), keys=st.lists(st.sampled_from(["a", "b", "0", "-1", "1"]),
                                                                          min_size=1, max_size=3))
def test_random_documents_edited_by_path_agree_with_postgres(both, docs, keys):
    conn, pg = both
    load_docs(conn, pg, [_json_text(d) for d in docs])
    path = "'{" + ",".join(keys) + "}'"
    for expr in (f"j #- {path}", f"jsonb_insert(j, {path}, '\"n\"')", f"jsonb_insert(j, {path}, '[0]', true)",
                 f"jsonb_set(j, {path}, '{{}}')", f"jsonb_set_lax(j, {path}, NULL, true, 'delete_key')",
                 f"j ?| {path}", f"j ?& {path}", f"j - {path}::text[]", "jsonb_pretty(j)"):
        assert check_rows(conn, pg, expr) <= {"ok", "data"}, expr


SRF_DOCS = ['[1, "a", {"b": 2}, [3], null]', '[]', None, '["x", "y"]', '[{"a": 1}]']
SRFS = [
    "SELECT k, jsonb_array_elements(j) FROM t",
    "SELECT k, jsonb_array_elements_text(j) AS v FROM t",
    "SELECT k, jsonb_array_elements(j), jsonb_array_elements_text(j2) FROM t",
    "SELECT k, jsonb_array_elements(j) ->> 'a', jsonb_typeof(jsonb_array_elements(j)) FROM t",
    "SELECT k, unnest(ARRAY[1, 2, 3]), jsonb_array_elements(j) FROM t",
    "SELECT k, jsonb_object_keys(o) FROM t",
    "SELECT k, jsonb_object_keys(o), jsonb_array_elements(j2) FROM t",
    "SELECT count(*), count(e) FROM (SELECT jsonb_array_elements(j) AS e FROM t) AS s",
    "SELECT jsonb_array_elements('[1, \"a\", null]'), 7",
    "SELECT jsonb_array_elements_text('[1, \"a\", null, {\"b\": [1]}]')",
    "SELECT jsonb_object_keys('{\"bb\": 1, \"a\": 2}')",
    "SELECT k, jsonb_array_elements(j) FROM t WHERE k IN (SELECT k FROM t WHERE j IS NOT NULL)",
]


def test_set_returning_functions_in_a_select_list_agree_with_postgres(both):
    conn, pg = both
    j2 = ['[true]', '[1, 2, 3, 4, 5, 6]', '[]', None, '[null, null]']
    objects = ['{"b": 1, "a": 2}', '{}', None, '{"a": null}', '{"x": [1]}']
    rows = ", ".join(f"({k}, {lit(a)}, {lit(b)}, {lit(c)})" for k, (a, b, c) in enumerate(zip(SRF_DOCS, j2, objects)))
    for side in (conn, pg):
        side.execute("DROP TABLE IF EXISTS t")
        side.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB, j2 JSONB, o JSONB)")
        side.execute(f"INSERT INTO t VALUES {rows}")
    for text in SRFS:
        assert check(conn, pg, text) == "ok", text
    for text in ("SELECT k, jsonb_array_elements(o) FROM t", "SELECT k, jsonb_object_keys(j) FROM t"):
        assert check(conn, pg, text) == "data", text
    names = [d[0] for d in conn.execute("SELECT jsonb_array_elements(j), jsonb_array_elements_text(j), "
                                        "jsonb_object_keys(o) FROM t LIMIT 0").description]
    assert names == ["jsonb_array_elements", "jsonb_array_elements_text", "jsonb_object_keys"]


RECORDS = [
    "SELECT * FROM jsonb_to_recordset('[{\"a\": 1, \"b\": \"x\"}, {\"a\": \"2\", \"b\": {\"c\": [1]}}, {}, "
    "{\"a\": null, \"b\": 1.50, \"z\": 0}]') AS x(a int, b text)",
    "SELECT x.* FROM jsonb_to_recordset('[{\"n\": 1.50, \"t\": \"2024-01-02T03:04:05\", \"f\": true, \"j\": \"s\", "
    "\"d\": \"2024-02-29\"}, {\"j\": [1, {}], \"f\": \"false\", \"n\": \"-0.5\"}]') "
    "AS x(n numeric, t timestamp, f boolean, j jsonb, d date, missing bigint)",
    "SELECT * FROM jsonb_to_record('{\"a\": 1.5, \"B\": true, \"b\": 7}') "
    "AS x(a numeric, \"B\" bool, b int, \"A\" text)",
    "SELECT * FROM jsonb_to_record(NULL) AS x(a int)", "SELECT * FROM jsonb_to_recordset(NULL) AS x(a int)",
    "SELECT * FROM jsonb_to_recordset('[]') AS x(a int)",
    "SELECT t.k, x.a, x.b FROM t, jsonb_to_recordset(t.j) AS x(a int, b jsonb) WHERE jsonb_typeof(t.j) = 'array'",
    "SELECT t.k, x.a FROM t LEFT JOIN LATERAL jsonb_to_recordset(t.j) AS x(a numeric) ON true "
    "WHERE jsonb_typeof(t.j) = 'array' OR t.j IS NULL",
    "SELECT t.k, r.a, r.b FROM t, jsonb_to_record(t.j -> 0) AS r(a text, b text)",
]
RECORD_ERRORS = ["SELECT * FROM jsonb_to_recordset('[1]') AS x(a int)",
                 "SELECT * FROM jsonb_to_recordset('{}') AS x(a int)",
                 "SELECT * FROM jsonb_to_record('[1]') AS x(a int)",
                 "SELECT * FROM jsonb_to_record('{\"a\": 1.5}') AS x(a int)",
                 "SELECT * FROM jsonb_to_recordset('[{\"a\": \"x\"}]') AS x(a int)"]


def test_jsonb_to_record_and_recordset_agree_with_postgres(both):
    conn, pg = both
    load_docs(conn, pg, ['[{"a": 1, "b": "x"}, {"a": "2", "b": {"c": 1}}]', '[]', None, '[{"j": "s", "b": null}]',
                         '{"a": 3}', '[{"b": [true]}, {"a": -4}]'])
    for text in RECORDS:
        assert check(conn, pg, text) == "ok", text
    for text in RECORD_ERRORS:
        assert check(conn, pg, text) == "data", text


MVS = [
    "SELECT g, jsonb_agg(x ORDER BY k) AS a, jsonb_agg(s ORDER BY s DESC, k) FILTER (WHERE x > 0) AS b, "
    "jsonb_object_agg(s, j ORDER BY k) FILTER (WHERE s IS NOT NULL) AS c, count(*) AS n FROM t GROUP BY g",
    "SELECT g, jsonb_agg(DISTINCT x) AS a, jsonb_agg(DISTINCT s ORDER BY s DESC) FILTER (WHERE x > 0) AS b FROM t "
    "GROUP BY g",
    "SELECT jsonb_agg(j ORDER BY k DESC) AS a, jsonb_object_agg(k, x ORDER BY k) AS b, jsonb_agg(k) AS c, "
    "jsonb_agg(t ORDER BY k) FILTER (WHERE g = 1) AS d FROM t",
    "SELECT k, jsonb_array_elements(j) AS e, jsonb_array_elements_text(j) AS f FROM t "
    "WHERE jsonb_typeof(j) = 'array'",
    "SELECT k, jsonb_object_keys(j) AS key FROM t WHERE jsonb_typeof(j) = 'object'",
    "SELECT t.k, e.key, e.value FROM t, jsonb_each(t.j) AS e WHERE jsonb_typeof(t.j) = 'object'",
    "SELECT t.k, e FROM t LEFT JOIN LATERAL jsonb_array_elements(t.j) AS e ON true WHERE jsonb_typeof(t.j) = 'array'",
    "SELECT k, j #- '{a}' AS d, j ?| '{a,b}' AS y, jsonb_insert(j, '{zz}', '1') AS i FROM t "
    "WHERE jsonb_typeof(j) = 'object'",
    "SELECT t.k, r.a, r.b FROM t, jsonb_to_recordset(t.j) AS r(a int, b jsonb) WHERE jsonb_typeof(t.j -> 0) = 'object'",
]
MV_DOCS = ['{"a": 1, "b": [1, 2]}', '[1, "two", null]', '"s"', '{}', '[]', 'null', '{"c": {"d": 2.50}}',
           '[{"a": 1}, {"b": [2]}]', '7', '[{"a": "3", "b": null}]']


def test_materialized_views_equal_their_batch_recomputation():
    rng = random.Random(2029)

    def doc():
        return lit(rng.choice(MV_DOCS + [None]))

    def text():
        return lit(rng.choice(["a", "b", "c", "dd", None]))

    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, g INT, x INT, s VARCHAR, j JSONB)")
        for i, q in enumerate(MVS):
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        for step in range(6):
            keys = rng.sample(range(24), 8)
            conn.execute(f"DELETE FROM t WHERE k IN ({', '.join(map(str, keys))})")
            conn.execute("INSERT INTO t VALUES " + ", ".join(
                f"({k}, {rng.randint(1, 3)}, {rng.choice(['NULL', rng.randint(-3, 9)])}, {text()}, {doc()})"
                for k in keys))
            conn.execute(f"UPDATE t SET j = {doc()}, s = {text()} WHERE k % 4 = {step % 4}")
            conn.execute(f"UPDATE t SET g = g % 3 + 1, x = x + 1 WHERE k % 5 = {step % 5}")
            conn.execute(f"DELETE FROM t WHERE k % 7 = {step}")
            conn.execute("FLUSH")
            for i, q in enumerate(MVS):
                mv = sorted(map(repr, conn.execute(f"SELECT * FROM m{i}").fetchall()))
                batch = sorted(map(repr, conn.execute(q).fetchall()))
                assert mv == batch, (q, step)
        assert conn.execute("SELECT count(*) FROM m2").fetchall()[0][0] > 0


def test_refusals_name_the_construct():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        for text, message in [
                ("SELECT k, jsonb_each(j) FROM t", "jsonb_each in a select list .* returns a record"),
                ("SELECT jsonb_path_query(j, '$.a') FROM t", "function jsonb_path_query is not supported"),
                ("SELECT j @? '$.a' FROM t", "not supported"),
                ("CREATE TABLE u (k INT PRIMARY KEY, j JSON)", "JSON")]:
            with pytest.raises(sql.errors.SqlError, match=message):
                conn.execute(text)
        for text, message in [   # no internal name in these messages
                ("SELECT jsonb_agg(k) OVER () FROM t", r"window function jsonb_agg\(\) is not supported"),
                ("SELECT jsonb_agg(jsonb_agg(k)) FROM t", "aggregate functions are not allowed in aggregate"),
                ("SELECT k, jsonb_array_elements(j), count(*) FROM t GROUP BY k, j",
                 "jsonb_array_elements in a select list is supported without GROUP BY"),
                ("SELECT jsonb_array_elements(k) FROM t", r"function jsonb_array_elements\(int\) does not exist"),
                ("SELECT * FROM jsonb_to_recordset('[]') AS x", "a column definition list is required"),
                ("SELECT * FROM jsonb_to_recordset('[]') AS x(a int[])", "array type is not supported")]:
            with pytest.raises(sql.errors.SqlError, match=message):
                conn.execute(text)
        with pytest.raises(sql.errors.BindError, match="jsonb_agg takes 1 argument"):
            conn.execute("SELECT jsonb_agg(k, k) FROM t")


def test_a_set_returning_function_over_an_operator_on_a_bare_column():
    """``FROM t, jsonb_array_elements(j -> 'y')``: sqlglot reads ``j -> 'y'`` inside a function's
    arguments as a lambda; over a bare (unqualified) column it is the operator, in batch and MVs
    (it was "column 'j' does not exist", while ``t.j -> 'y'`` worked)."""
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        c.execute("""INSERT INTO t VALUES (1, '{"y": [1, 2], "z": {"a": 1}}'), (2, '{"y": []}')""")
        q = "SELECT k, e FROM t, jsonb_array_elements(j -> 'y') AS e"
        c.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
        c.execute("FLUSH")
        assert sorted(c.execute(q).fetchall()) == [(1, "1"), (1, "2")]
        assert sorted(c.execute("SELECT * FROM m").fetchall()) == [(1, "1"), (1, "2")]
        assert c.execute("SELECT k, e.key FROM t, jsonb_each(j -> 'z') AS e").fetchall() == [(1, "a")]
