"""JSONB (issue 29, item 2) against a real PostgreSQL (tests/pg_server.py).

Random JSON documents (tests/strategies.py ``json_values``: nested arrays and objects, keys
sharing lengths and prefixes, numbers of several scales, escapes) written with random
whitespace and duplicate keys are cast to jsonb on both sides: the normal text must be the
same, and so must every operator and function of docs/sql.md's JSONB section (``->`` by key
and index, ``->>``, ``#>``/``#>>``, ``@>``/``<@``, ``?``, ``jsonb_typeof``,
``jsonb_array_length``, ``jsonb_build_object``, ``to_jsonb``, casts to text, numbers and
boolean, ``=``/``<`` between documents, ORDER BY) and the set-returning functions in FROM.
Verdicts as in tests/test_sql_pg_functions.py: both answer and agree, or Postgres raises a data
error (class 22) and Hummock an ``ExecutionError``, or both refuse. psycopg reads jsonb as
text here (not as Python objects), so the normal text itself is compared.

A materialized view of JSONB projections and filters stays equal to its batch recomputation
under random inserts, updates and deletes.
"""

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.string import TextLoader

import sql
from strategies import _json_text, json_values
from test_sql_pg_differential import norm, same_multiset, show
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

pytestmark = pytest.mark.postgres

DOCS = ['{"a": 1, "b": [1, 2, {"c": "x"}], "aa": null}', '[1, "two", 3.50, [4], {"a": true}]', '"str"', '12.30',
        'true', 'null', '{}', '[]', '{"a": {"b": {"c": [10, 20, 30]}}}', '{"b": 2, "a": 1}', '["a", "b"]',
        '{"a": [1, 2]}', '1e2', '-0', '{"é": "ü", "k\\"ey": "line\\nbreak"}']
EXPRS = [
    "j", "j::text", "j -> 'a'", "j -> 'b' -> 2", "j ->> 'a'", "j -> 0", "j -> -1", "j ->> 1", "j -> 10", "j -> -10",
    "j -> 'a' -> 'b' ->> 'c'", "j #> '{a,b,c}'", "j #>> '{a,b,c,1}'", "j #> '{b,2,c}'", "j #>> '{}'", "j #> '{0}'",
    "j @> '{\"a\": 1}'", "j @> '[1]'", "j @> '1'", "j @> '{\"b\": [2]}'", "'{\"a\": 1}' <@ j", "j @> '[[4]]'",
    "j ? 'a'", "j ? 'str'", "j ? 'b'", "jsonb_typeof(j)", "jsonb_typeof(j -> 'a')", "jsonb_typeof(j #> '{a,b}')",
    "jsonb_build_object('k', k, 'j', j, 't', j::text, 'n', NULL, 'f', k * 1.5, 'b', k > 3)",
    "to_jsonb(k)", "to_jsonb(j::text)", "to_jsonb(k > 2)", "to_jsonb(k::float8 / 3)", "to_jsonb(j)",
    "j = '{\"a\": 1, \"b\": 2}'", "j = '12.3'", "j <> '[]'", "j < '{}'", "j >= '\"str\"'",
    "j IS DISTINCT FROM 'null'",
    "j || '{\"z\": 0, \"a\": 5}'", "j || '[9]'", "'[0]' || j", "j || j", "j || '7'", "j::text || '!'",
    "jsonb_extract_path(j, 'a', 'b')", "jsonb_extract_path_text(j, 'b', '2', 'c')",
    "jsonb_contains(j, '[1]')", "jsonb_exists(j, 'a')", "jsonb_concat(j, '[1]')",
    "jsonb_build_array(k, j, j::text, NULL, k > 2, 1.50)", "jsonb_build_array()", "jsonb_strip_nulls(j)",
    "COALESCE(j, '{}')", "COALESCE(j -> 'zz', j -> 0, '\"none\"')", "CASE WHEN k > 3 THEN j ELSE '[ ]' END",
    "CASE k WHEN 1 THEN '{\"x\": 1}' ELSE j END", "NULLIF(j, '[]')", "j IN ('\"str\"', 'true', '12.3')",
]
DATA_ERRORS = ["jsonb_set(j, '{a}', '\"new\"')", "jsonb_set(j, '{b,1}', '[0]')", "jsonb_set(j, '{0}', '0', false)",
               "jsonb_set(j, '{-1}', 'null')", "jsonb_set(j, '{x,y}', '1')", "jsonb_set(j, '{99}', '1')",
               "jsonb_set(j, '{-99}', '1')", "jsonb_set(j, '{a,b,c}', to_jsonb(k))", "jsonb_array_length(j)", "j - 'a'", "j - 'two'", "j - 0", "j - -1", "j - 9", "(j -> 0)::int", "j::int", "j::float8", "j::bool", "j::numeric",
               "(j ->> 'a')::int"]


@pytest.fixture(scope="module")
def both(pg):  # noqa: F811
    pg.adapters.register_loader("jsonb", TextLoader)   # jsonb as Postgres' text, not Python objects
    with sql.connect(":memory:", implicit_flush=True) as conn:
        yield conn, pg


def load(conn, pg, docs):
    values = ", ".join(f"({k}, {lit(d)})" for k, d in enumerate(docs))
    for side in (conn, pg):
        side.execute("DROP TABLE IF EXISTS t")
        side.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        if docs:
            side.execute(f"INSERT INTO t VALUES {values}")


def lit(text):
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


def check(conn, pg, text, ordered=False):
    theirs, ours = run_pg(pg, text), run_ours(conn, text)
    where = f"{text}\n  postgres: {theirs[1] if theirs[0] != 'ok' else ''}\n  hummock: {ours[1] if ours[0] != 'ok' else ''}"
    if theirs[0] == "ok":
        assert ours[0] == "ok", where
        a = [tuple(norm(v) for v in r) for r in ours[1]]
        b = [tuple(norm(v) for v in r) for r in theirs[1]]
        assert same_multiset(a, b), f"{where}\n  ours:   {show(sorted(a))}\n  theirs: {show(sorted(b))}"
        if ordered:
            assert a == b, f"{where}\n  ours:   {show(a)}\n  theirs: {show(b)}"
    elif theirs[0] == "data":
        assert ours[0] == "data", where
    else:
        assert ours[0] != "ok", where
    return theirs[0]


@pytest.mark.parametrize("expr", EXPRS + DATA_ERRORS)
def test_operators_and_functions_agree_with_postgres(both, expr):
    conn, pg = both
    load(conn, pg, DOCS + [None])
    if expr in DATA_ERRORS:   # one row at a time: each document alone either answers or is a data error
        verdicts = {check(conn, pg, f"SELECT k, {expr} FROM t WHERE k = {k}") for k in range(len(DOCS))}
        assert "data" in verdicts, expr
    else:
        assert check(conn, pg, f"SELECT k, {expr} FROM t") == "ok", expr


FIXED = [
    "SELECT '{\"b\":1,  \"a\" : [1,2.50, 1e2, -0, 1E-3],\"b\":3}'::jsonb",
    "SELECT '  [ ]  '::jsonb, '{}'::jsonb, '\"\\u00e9\\n\\t\\u0001\"'::jsonb, '-0.0'::jsonb, '123456789012345678901234567890.5'::jsonb",
    "SELECT '{\"aaa\": 1, \"b\": 2, \"aa\": 3, \"ab\": 4}'::jsonb::text",
    "SELECT '{\"a\": 1'::jsonb", "SELECT 'NaN'::jsonb", "SELECT '01'::jsonb", "SELECT '[1,]'::jsonb",
    "SELECT '\"\\u0000\"'::jsonb", "SELECT '\"\\ud800\"'::jsonb", "SELECT ''::jsonb", "SELECT 'tru'::jsonb",
    "SELECT * FROM jsonb_array_elements('[1, \"a\", null, [2], {\"b\": 3}]')",
    "SELECT * FROM jsonb_array_elements_text('[1, \"a\", null, [2], {\"b\": 3}]')",
    "SELECT * FROM jsonb_each('{\"b\": 1, \"a\": [2], \"c\": null}')",
    "SELECT * FROM jsonb_each_text('{\"b\": 1, \"a\": \"x\", \"c\": null}')",
    "SELECT * FROM jsonb_object_keys('{\"bb\": 1, \"a\": 2}')",
    "SELECT value, value ->> 'x' FROM jsonb_array_elements('[{\"x\": 1}, {\"x\": \"y\"}]') AS e",
    "SELECT e.key, e.value FROM jsonb_each('{\"k\": [1]}') AS e",
    "SELECT k, v FROM jsonb_each('{\"k\": [1]}') AS e(k, v)",
    "SELECT * FROM jsonb_array_elements('{\"a\": 1}')", "SELECT * FROM jsonb_each('[1]')",
    "SELECT * FROM jsonb_array_elements(NULL)",
    "SELECT jsonb_build_object()", "SELECT jsonb_build_object('a', NULL::jsonb, 'b', '2024-01-31 12:34:56.5'::timestamp)",
    "SELECT jsonb_strip_nulls('{\"a\": null, \"b\": [null, {\"c\": null, \"d\": 1}]}'), jsonb_strip_nulls('null')",
    "SELECT jsonb_set('{\"a\": 1}', '{a}', NULL), jsonb_set('{\"a\": {\"b\": 1}}', ARRAY['a', 'b'], '\"x\"')",
    "SELECT jsonb_set('[1]', '{a}', '2')", "SELECT jsonb_set('{}', '{a,NULL}', '1')", "SELECT jsonb_set('[]', '{5}', '1')",
    "SELECT jsonb_build_object(NULL, 1)", "SELECT jsonb_build_object('a', 1, 'b')", "SELECT jsonb_build_object('a', 1, 'a', 2)",
    "SELECT to_jsonb('x'::text), to_jsonb(1.50), to_jsonb('NaN'::float8), to_jsonb(1e-5::float8), to_jsonb(NULL::int)",
    "SELECT '1.0'::jsonb = '1', '[1.0, {\"a\": 2.00}]'::jsonb = '[1, {\"a\": 2}]', '\"a\"'::jsonb < '1'",
    "SELECT '1.5'::jsonb::int, '2.5'::jsonb::int, '-2.5'::jsonb::bigint, '1e2'::jsonb::float8, '0.1'::jsonb::float8",
    "SELECT '\"x\"'::jsonb::text, '{\"a\":1}'::jsonb::varchar, ('{\"a\":\"q\"}'::jsonb ->> 'a') || '!'",
    "SELECT 'null'::jsonb ->> 0, '[null]'::jsonb ->> 0, '[null]'::jsonb -> 0, '{\"a\":null}'::jsonb ->> 'a'",
    "SELECT to_jsonb(ARRAY[1, 2]), to_jsonb(ARRAY['a', NULL]), to_jsonb(DATE '2024-01-02'), "
    "to_jsonb(TIMESTAMPTZ '2024-01-02 03:04:05.5+00'), to_jsonb(TIMESTAMP '2024-01-02 03:04:05'), to_jsonb(1e300::float8)",
    "SELECT jsonb_extract_path('{}'::jsonb)", "SELECT '[1]'::jsonb - true",
    "SELECT '99999'::jsonb::smallint", "SELECT 'true'::jsonb::int", "SELECT '[]'::jsonb::bool",
]


@pytest.mark.parametrize("text", FIXED)
def test_constants_agree_with_postgres(both, text):
    check(*both, text)


def test_order_by_and_comparisons_agree_with_postgres(both):
    conn, pg = both
    load(conn, pg, DOCS + [None, '{"a": 1, "b": 2}', '[1, "two"]', '"a"', '{"c": 0}', '{"a": 2}', '[[1], [0]]'])
    check(conn, pg, "SELECT j, k FROM t ORDER BY j, k", ordered=True)
    check(conn, pg, "SELECT j, k FROM t ORDER BY j DESC NULLS LAST, k", ordered=True)
    check(conn, pg, "SELECT k FROM t ORDER BY j DESC, k LIMIT 4", ordered=True)
    check(conn, pg, "SELECT a.k, b.k, a.j < b.j, a.j = b.j, a.j >= b.j FROM t a, t b")
    check(conn, pg, "SELECT max(k), count(*), j -> 'a' FROM t GROUP BY j -> 'a'")
    check(conn, pg, "SELECT count(DISTINCT j) FROM t")


settings_ci = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large])


def _spaced(draw_ws, value) -> str:
    """JSON text of ``value`` with random whitespace around every token."""
    ws = lambda: draw_ws(st.sampled_from(["", " ", "\n", "\t ", "  "]))   # noqa: E731
    if isinstance(value, list):
        return "[" + ws() + ("," + ws()).join(_spaced(draw_ws, v) + ws() for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ws() + ",".join(ws() + json.dumps(k) + ws() + ":" + ws() + _spaced(draw_ws, v) + ws()
                                     for k, v in value.items()) + "}"
    return _json_text(value)


@settings_ci
@given(docs=st.lists(json_values, min_size=1, max_size=6), data=st.data())
def test_random_documents_agree_with_postgres(both, docs, data):
    conn, pg = both
    texts = [_spaced(data.draw, d) for d in docs]
    load(conn, pg, texts)
    check(conn, pg, "SELECT k, j, j::text, jsonb_typeof(j), j -> 'a', j ->> 'b', j -> 0, j ->> -1, j ? 'a', "
                    "j #> '{a,0}' FROM t")
    check(conn, pg, "SELECT a.k, b.k, a.j = b.j, a.j < b.j, a.j @> b.j, a.j <@ b.j, a.j || b.j FROM t a, t b")
    check(conn, pg, "SELECT k, j - 'a', j - 0 FROM t WHERE jsonb_typeof(j) IN ('object', 'array')")
    check(conn, pg, "SELECT k, jsonb_set(j, '{a}', '[7]'), jsonb_set(j, '{-1}', 'true', false), jsonb_strip_nulls(j) "
                    "FROM t WHERE jsonb_typeof(j) = 'object' OR jsonb_typeof(j) = 'array' AND j -> 0 IS NULL")
    check(conn, pg, "SELECT k FROM t ORDER BY j, k", ordered=True)


def test_normal_text_matches_the_python_json_model_in_both_directions():
    """Without Postgres: the normal text reads back (json.loads) to the document as Python's json
    model sees it, its keys in jsonb order, and is a fixed point; values survive a table."""
    rng = random.Random(7)
    from relational.jsonb import normalize

    def doc(depth=0):
        r = rng.random()
        if depth < 3 and r < 0.3:
            return {rng.choice(["a", "bb", "b", "é", "ab", ""]): doc(depth + 1) for _ in range(rng.randint(0, 4))}
        if depth < 3 and r < 0.5:
            return [doc(depth + 1) for _ in range(rng.randint(0, 4))]
        return rng.choice([None, True, False, 0, -7, 12345678901234567890, 1.5, -0.25, "x", "é\n\"\\", ""])

    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE d (k INT PRIMARY KEY, j JSONB)")
        for k in range(40):
            value = doc()
            text = json.dumps(value, indent=rng.choice([None, 1]))
            normal = normalize(text)
            assert json.loads(normal) == value
            assert normalize(normal) == normal
            keys = [list(o) for o in _objects(json.loads(normal))]
            assert all(ks == sorted(ks, key=lambda s: (len(s.encode()), s.encode())) for ks in keys)
            conn.execute("INSERT INTO d VALUES ($1, $2::jsonb)", (k, text))
            assert conn.execute("SELECT j, j::text FROM d WHERE k = $1", (k,)).fetchall() == [(normal, normal)]


def _objects(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from _objects(v)


def test_a_materialized_view_of_jsonb_equals_its_batch_recomputation():
    rng = random.Random(29)
    queries = ["SELECT k, j -> 'a' AS a, j ->> 'b' AS b, jsonb_typeof(j) AS t, j @> '{\"a\": 1}' AS c FROM t",
               "SELECT k, j FROM t WHERE j ? 'a' OR j -> 0 = '1'",
               "SELECT j -> 'a' AS a, count(*) AS n FROM t GROUP BY j -> 'a'"]
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        for i, q in enumerate(queries):
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        for step in range(4):
            keys = rng.sample(range(30), 6)
            conn.execute(f"DELETE FROM t WHERE k IN ({', '.join(map(str, keys))})")
            conn.execute("INSERT INTO t VALUES " + ", ".join(f"({k}, {lit(rng.choice(DOCS + [None]))})" for k in keys))
            conn.execute(f"DELETE FROM t WHERE k % 5 = {step}")
            conn.execute(f"UPDATE t SET j = {lit(rng.choice(DOCS))} WHERE k % 3 = {step % 3}")
            conn.execute("FLUSH")
            for i, q in enumerate(queries):
                mv = sorted(map(repr, conn.execute(f"SELECT * FROM m{i}").fetchall()))
                batch = sorted(map(repr, conn.execute(q).fetchall()))
                assert mv == batch, (q, step)


def test_refusals_name_the_construct():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB, s VARCHAR)")
        with pytest.raises(sql.errors.UnsupportedError, match="jsonb_each.*batch query only"):
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT * FROM jsonb_each('{}')")
        with pytest.raises(sql.errors.BindError, match="does not exist"):
            conn.execute("SELECT * FROM jsonb_array_elements(t.j)")
        with pytest.raises(sql.errors.BindError, match="cannot cast type integer to jsonb"):
            conn.execute("SELECT k::jsonb FROM t")
        with pytest.raises(sql.errors.UnsupportedError, match="set-returning function jsonb_each in a select list"):
            conn.execute("SELECT jsonb_each(j) FROM t")
        with pytest.raises(sql.errors.UnsupportedError, match="function jsonb_path_query is not supported") as info:
            conn.execute("SELECT jsonb_path_query(j, '$.a') FROM t")
        assert "->" not in str(info.value) and "#>" not in str(info.value)   # operators are not function names
        with pytest.raises(sql.errors.SqlError, match="->"):
            conn.execute("SELECT s -> 'a' FROM t")
        with pytest.raises(sql.errors.ExecutionError) as info:
            conn.execute("SELECT '{\"a\": }'::jsonb")
        assert "character 7" in str(info.value) and info.value.column is not None


def test_numbers_of_another_scale_are_distinct_keys_alike_in_batch_and_mv():
    """``'1.0'`` and ``'1'`` are equal under ``=`` (Postgres) but two values as grouping keys
    (GROUP BY, DISTINCT), in batch and in an MV alike; the MV's state holds both (it failed the
    stream graph when its keys merged what its groups kept apart). A join's equality matches
    them as ``=`` does (its key ignores the scale)."""
    queries = ["SELECT j, count(*) AS n FROM a GROUP BY j", "SELECT DISTINCT j -> 0 AS e FROM a",
               "SELECT a.k AS ak, b.k AS bk FROM a JOIN b ON a.j = b.j"]
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE a (k INT PRIMARY KEY, j JSONB)")
        conn.execute("CREATE TABLE b (k INT PRIMARY KEY, j JSONB)")
        for i, q in enumerate(queries):
            conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        conn.execute("INSERT INTO a VALUES (1, '1.0'), (2, '1'), (3, '[1.00]'), (4, '[1]'), (5, '1'), (6, '[1.0]')")
        conn.execute("INSERT INTO b VALUES (1, '1'), (2, '[1.0]'), (3, '1.00')")
        conn.execute("DELETE FROM a WHERE k = 5")
        assert conn.execute("SELECT count(*) FROM a WHERE j = '1' OR j = '[1]'").fetchall() == [(5,)]   # = is Postgres'
        for i, q in enumerate(queries):
            mv = sorted(map(repr, conn.execute(f"SELECT * FROM m{i}").fetchall()))
            assert mv == sorted(map(repr, conn.execute(q).fetchall())), q
        assert len(conn.execute("SELECT * FROM m0").fetchall()) == 5
        assert sorted(conn.execute("SELECT * FROM m2").fetchall()) == \
            [(1, 1), (1, 3), (2, 1), (2, 3), (3, 2), (4, 2), (6, 2)]


LATERAL = [
    "SELECT t.k, e.value FROM t, jsonb_array_elements(t.j) AS e",
    "SELECT t.k, value FROM t CROSS JOIN LATERAL jsonb_array_elements_text(t.j)",
    "SELECT t.k, e.x FROM t LEFT JOIN LATERAL jsonb_array_elements(t.j) AS e(x) ON true",
    "SELECT t.k, e.value ->> 'a', e.value FROM t, jsonb_array_elements(t.j) AS e WHERE e.value ? 'a'",
    "SELECT count(*), count(DISTINCT value) FROM t, jsonb_array_elements(t.j)",
]
EACH = [
    "SELECT o.k, key, value FROM o, jsonb_each(o.j)",
    "SELECT o.k, x.kk, x.vv FROM o CROSS JOIN LATERAL jsonb_each_text(o.j) AS x(kk, vv)",
    "SELECT o.k, jsonb_object_keys FROM o, jsonb_object_keys(o.j)",
    "SELECT o.k, e.key FROM o LEFT JOIN LATERAL jsonb_each(o.j) AS e ON true WHERE e.value IS NULL OR e.key = 'a'",
]


def test_set_returning_functions_over_a_column_agree_with_postgres(both):
    """``FROM t, jsonb_array_elements(t.j)`` and the like (an implicit LATERAL): rows, NULL
    inputs, empty arrays and objects, and a wrong JSON type (a data error on both sides)."""
    conn, pg = both
    load(conn, pg, ['[1, "a", {"a": 2}, [3]]', "[]", None, '[{"a": null}, {"b": 1}]', '["x"]'])
    for text in LATERAL:
        assert check(conn, pg, text) == "ok", text
    objects = ", ".join(f"({k}, {lit(d)})" for k, d in enumerate(['{"b": 1, "a": [2]}', "{}", None, '{"a": null}']))
    for side in (conn, pg):
        side.execute("DROP TABLE IF EXISTS o")
        side.execute("CREATE TABLE o (k INT PRIMARY KEY, j JSONB)")
        side.execute(f"INSERT INTO o VALUES {objects}")
    for text in EACH:
        assert check(conn, pg, text) == "ok", text
    assert check(conn, pg, "SELECT * FROM o, jsonb_array_elements(o.j)") == "data"
    assert check(conn, pg, "SELECT * FROM t, jsonb_each(t.j)") == "data"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(value=json_values, data=st.data())
def test_normalisation_against_the_python_json_model(value, data):
    """Without Postgres, for any document of the Python json model written with random
    whitespace: the normal text reads back to the same document, objects' keys in jsonb order
    (UTF-8 length, then bytes), every number with its own digits; it is a fixed point, and its
    memcomparable key (both implementations) and value encoding give it back."""
    from relational import _memcomparable_py as pure_keys
    from relational import memcomparable, value_encoding
    from relational.jsonb import normalize
    from relational.types import DataType

    import decimal
    normal = normalize(_spaced(data.draw, value))
    back = json.loads(normal, parse_float=decimal.Decimal, parse_int=decimal.Decimal,
                      object_pairs_hook=lambda pairs: (dict(pairs), [k for k, _ in pairs]))
    assert _model(back) == _model_of(value)
    assert normalize(normal) == normal
    for impl in (memcomparable, pure_keys):
        key = impl.encode_row((normal,), (DataType.JSONB,))
        assert impl.decode_row(key, (DataType.JSONB,)) == (normal,)
    row = value_encoding.encode_row((normal, 1), (DataType.JSONB, DataType.INT))
    assert value_encoding.decode_row(row, (DataType.JSONB, DataType.INT)) == (normal, 1)


def _model(back):
    """A document read back with its keys' order kept: (dict, keys) pairs -> comparable form."""
    if isinstance(back, tuple):
        obj, keys = back
        assert keys == sorted(keys, key=lambda s: (len(s.encode()), s.encode())), keys
        return {k: _model(v) for k, v in obj.items()}
    if isinstance(back, list):
        return [_model(v) for v in back]
    return _number_text(back)


def _model_of(value):
    if isinstance(value, dict):
        return {k: _model_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_model_of(v) for v in value]
    return _number_text(value)


def _number_text(v):
    """A number as its digits and scale (Postgres keeps 1.50's scale, prints 1e2 as 100)."""
    import decimal
    if isinstance(v, decimal.Decimal) and not isinstance(v, bool):
        return ("num", v, max(0, -v.as_tuple().exponent))
    return v


def test_explain_prints_operators_as_written_and_data_errors_name_postgres_functions():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, j JSONB)")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SELECT j -> 'a', j ->> 0 FROM t WHERE j ? 'x'"))
        assert "(j -> 'a')" in plan and "(j ->> 0)" in plan and "(j ? 'x')" in plan, plan
        with pytest.raises(sql.errors.ExecutionError, match="cannot delete from scalar in jsonb_delete"):
            conn.execute("SELECT '1'::jsonb - 'a'")
