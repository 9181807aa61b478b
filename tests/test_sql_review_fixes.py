"""Review fixes to the JSONB and array SQL surface, each checked against Postgres' answers.

1. A JSONB equality as a join / ``IN`` / correlated ``EXISTS`` key matches as ``=`` does
   (``'1'::jsonb = '1.0'``): the key ignores numbers' scale (stream/expr_jsonb_cmp.py
   ``equality_key``), the joined rows keep their values; batch and MV agree. GROUP BY keeps
   ``1`` and ``1.0`` apart (docs/sql.md, a deliberate difference), untouched here.
2. ``LEFT JOIN LATERAL unnest(...) WITH ORDINALITY ... ON TRUE``: the padded row of an empty or
   NULL array has a NULL ordinality, in batch and in an MV (updates retract it).
3. JSONB set-returning functions in FROM: WHERE conjuncts over the items before them filter
   first; ``jsonb_array_elements(j) AS e`` reads ``e`` as its value.
4. ``min()`` / ``max()`` of arrays in batch (Postgres' array order); an MV refuses them by name.

The ``postgres``-marked tests run the same batch queries on the session's PostgreSQL
(tests/pg_server.py); the others pin the same answers for batch and materialized views.
"""

import pytest

import sql
from test_sql_pg_functions import pg, run_ours, run_pg  # noqa: F401  (pg: the fixture)

JSONB_SETUP = [
    "CREATE TABLE l (id INT PRIMARY KEY, j JSONB)",
    "CREATE TABLE r (id INT PRIMARY KEY, j JSONB)",
    """INSERT INTO l VALUES (1, '1'), (2, '{"a": 1.0}'), (3, '[1, 2.50]'), (4, NULL), (5, '0.00'), (6, '"x"'),
       (8, '{"a": [1.10, {"b": 100}]}')""",
    """INSERT INTO r VALUES (1, '1.0'), (2, '{"a": 1}'), (3, '[1.0, 2.5]'), (4, NULL), (5, '-0'), (7, '10'),
       (8, '{"a": [1.1, {"b": 1e2}]}'), (9, '[1, 2.5, 3]')""",
]
JSONB_PAIRS = [(1, 1), (2, 2), (3, 3), (5, 5), (8, 8)]
JSONB_QUERIES = {
    "SELECT l.id, r.id FROM l JOIN r ON l.j = r.j ORDER BY 1, 2": JSONB_PAIRS,
    "SELECT l.id, r.id FROM l, r WHERE l.j = r.j ORDER BY 1, 2": JSONB_PAIRS,
    "SELECT l.id, r.id FROM l JOIN r USING (j) ORDER BY 1, 2": JSONB_PAIRS,
    "SELECT l.id, r.id, l.j::text, r.j::text FROM l JOIN r ON l.j = r.j WHERE l.id = 3":
        [(3, 3, "[1, 2.50]", "[1.0, 2.5]")],
    "SELECT j::text, l.id FROM l JOIN r USING (j) WHERE l.id = 1": [("1", 1)],
    "SELECT l.id, r.id FROM l LEFT JOIN r ON l.j = r.j ORDER BY 1, 2": JSONB_PAIRS[:3] + [(4, None)] +
        JSONB_PAIRS[3:4] + [(6, None)] + JSONB_PAIRS[4:],
    "SELECT id FROM l WHERE j IN (SELECT j FROM r) ORDER BY 1": [(1,), (2,), (3,), (5,), (8,)],
    "SELECT id FROM l WHERE j NOT IN (SELECT j FROM r WHERE j IS NOT NULL) ORDER BY 1": [(6,)],
    "SELECT id FROM l WHERE EXISTS (SELECT 1 FROM r WHERE r.j = l.j) ORDER BY 1": [(1,), (2,), (3,), (5,), (8,)],
    "SELECT id FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.j = l.j) ORDER BY 1": [(4,), (6,)],
}


def _conn(setup):
    conn = sql.connect(":memory:", barrier_interval_ms=0, implicit_flush=True)
    for q in setup:
        conn.execute(q)
    return conn


def test_jsonb_equality_join_keys_match_as_equals_in_batch():
    with _conn(JSONB_SETUP) as conn:
        for q, want in JSONB_QUERIES.items():
            assert conn.execute(q).fetchall() == want, q


def test_jsonb_equality_join_in_a_materialized_view_matches_as_equals():
    with _conn(JSONB_SETUP) as conn:
        conn.execute("CREATE MATERIALIZED VIEW mj AS SELECT l.id AS lid, r.id AS rid, l.j AS lj FROM l JOIN r ON l.j = r.j")
        conn.execute("CREATE MATERIALIZED VIEW ms AS SELECT id FROM l WHERE j IN (SELECT j FROM r)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT lid, rid FROM mj ORDER BY 1").fetchall() == JSONB_PAIRS
        assert conn.execute("SELECT lj::text FROM mj WHERE lid = 3").fetchall() == [("[1, 2.50]",)]
        assert conn.execute("SELECT id FROM ms ORDER BY 1").fetchall() == [(1,), (2,), (3,), (5,), (8,)]
        conn.execute("""INSERT INTO r VALUES (10, '1.000'), (11, '"x"')""")
        conn.execute("DELETE FROM r WHERE id = 1")
        conn.execute("FLUSH")
        assert conn.execute("SELECT lid, rid FROM mj ORDER BY 1, 2").fetchall() == \
            [(1, 10), (2, 2), (3, 3), (5, 5), (6, 11), (8, 8)]
        assert conn.execute("SELECT id FROM ms ORDER BY 1").fetchall() == [(1,), (2,), (3,), (5,), (6,), (8,)]
        # GROUP BY still keeps 1 and 1.0 apart (the documented difference)
        assert conn.execute("SELECT count(DISTINCT j) FROM r WHERE id IN (2, 10)").fetchall() == [(2,)]


@pytest.mark.postgres
def test_jsonb_equality_join_keys_agree_with_postgres(pg):  # noqa: F811
    for q in ("DROP TABLE IF EXISTS l", "DROP TABLE IF EXISTS r", *JSONB_SETUP):
        pg.execute(q)
    with _conn(JSONB_SETUP) as conn:
        for q, want in JSONB_QUERIES.items():
            theirs, ours = run_pg(pg, q), run_ours(conn, q)
            assert theirs == ("ok", want), q
            assert ours == theirs, q


# --- 2. LEFT JOIN LATERAL unnest(...) WITH ORDINALITY: the padded row's ordinality is NULL ----

UNNEST_SETUP = [
    "CREATE TABLE a (id INT PRIMARY KEY, t TEXT[])",
    "INSERT INTO a VALUES (1, ARRAY['a','b']), (3, ARRAY[]::text[]), (4, NULL)",
]
UNNEST_QUERIES = {
    "SELECT id, x, o FROM a LEFT JOIN LATERAL unnest(t) WITH ORDINALITY AS u(x, o) ON TRUE ORDER BY id, o":
        [(1, "a", 1), (1, "b", 2), (3, None, None), (4, None, None)],
    "SELECT id, o FROM a LEFT JOIN LATERAL unnest(t) WITH ORDINALITY AS u(x, o) ON TRUE WHERE o IS NULL ORDER BY id":
        [(3, None), (4, None)],
    # one array not empty: no padded row, every ordinality counts
    "SELECT id, x, y, o FROM a LEFT JOIN LATERAL unnest(t, ARRAY[1]) WITH ORDINALITY AS u(x, y, o) ON TRUE "
    "ORDER BY id, o": [(1, "a", 1, 1), (1, "b", None, 2), (3, None, 1, 1), (4, None, 1, 1)],
}


def test_left_lateral_unnest_padded_row_has_null_ordinality_in_batch():
    with _conn(UNNEST_SETUP) as conn:
        for q, want in UNNEST_QUERIES.items():
            assert conn.execute(q).fetchall() == want, q


def test_left_lateral_unnest_padded_row_has_null_ordinality_in_an_mv():
    with _conn(UNNEST_SETUP) as conn:
        body = "FROM a LEFT JOIN LATERAL unnest(t) WITH ORDINALITY AS u(x, o) ON TRUE"
        conn.execute(f"CREATE MATERIALIZED VIEW m AS SELECT id, x, o {body}")
        conn.execute(f"CREATE MATERIALIZED VIEW m2 AS SELECT id, x {body}")   # the ordinality only in the key
        conn.execute("FLUSH")
        assert sorted(conn.execute("SELECT * FROM m").fetchall(), key=repr) == \
            [(1, "a", 1), (1, "b", 2), (3, None, None), (4, None, None)]
        # padded rows are retracted and replaced by updates and deletes
        conn.execute("UPDATE a SET t = ARRAY['z'] WHERE id = 3")
        conn.execute("UPDATE a SET t = NULL WHERE id = 1")
        conn.execute("INSERT INTO a VALUES (5, ARRAY[]::text[])")
        conn.execute("DELETE FROM a WHERE id = 4")
        conn.execute("FLUSH")
        want = [(1, None, None), (3, "z", 1), (5, None, None)]
        assert sorted(conn.execute("SELECT * FROM m").fetchall(), key=repr) == want
        assert sorted(conn.execute("SELECT * FROM m2").fetchall(), key=repr) == [w[:2] for w in want]
        assert conn.execute(f"SELECT id, x, o {body} ORDER BY id").fetchall() == want


@pytest.mark.postgres
def test_left_lateral_unnest_ordinality_agrees_with_postgres(pg):  # noqa: F811
    for q in ("DROP TABLE IF EXISTS a", *UNNEST_SETUP):
        pg.execute(q)
    with _conn(UNNEST_SETUP) as conn:
        for q, want in UNNEST_QUERIES.items():
            theirs, ours = run_pg(pg, q), run_ours(conn, q)
            assert theirs == ("ok", want), q
            assert ours == theirs, q


# --- 3. JSONB set-returning functions in FROM: WHERE guards first; an alias names the column --

SRF_SETUP = [
    "CREATE TABLE a (id INT PRIMARY KEY, j JSONB)",
    """INSERT INTO a VALUES (1, '{"a": 1, "b": [1, 2]}'), (2, '[1, "x", null]'), (3, NULL), (4, '"s"'), (5, '{}'),
       (6, '[]')""",
]
SRF_QUERIES = {
    # a WHERE conjunct over the left item filters before the function sees the row
    "SELECT id, k, v::text FROM a, jsonb_each(j) AS e(k, v) WHERE jsonb_typeof(j) = 'object' ORDER BY id, k":
        [(1, "a", "1"), (1, "b", "[1, 2]")],
    "SELECT id, key FROM a, jsonb_each(j) WHERE jsonb_typeof(j) = 'object' AND key <> 'b' ORDER BY id": [(1, "a")],
    "SELECT id, k FROM a LEFT JOIN LATERAL jsonb_object_keys(j) AS k ON TRUE WHERE jsonb_typeof(j) = 'object' "
    "ORDER BY id, k": [(1, "a"), (1, "b"), (5, None)],
    "SELECT count(*) FROM a CROSS JOIN LATERAL jsonb_array_elements(j) WHERE j @> '[1]' OR id = 6": [(3,)],
    # a single-column function's table alias names its value (e), e.value and * still say value
    "SELECT id, e::text FROM a, jsonb_array_elements(j) AS e WHERE jsonb_typeof(j) = 'array' AND e <> 'null' "
    "ORDER BY id, e": [(2, '"x"'), (2, "1")],
    "SELECT id, e.value::text FROM a, jsonb_array_elements(j) AS e WHERE jsonb_typeof(j) = 'array' ORDER BY e":
        [(2, "null"), (2, '"x"'), (2, "1")],
    "SELECT id, v FROM a, jsonb_array_elements_text(j) AS v WHERE j @> '[1]' ORDER BY id, v":
        [(2, "1"), (2, "x"), (2, None)],
    "SELECT e::text, e.value::text FROM jsonb_array_elements('[1, 2.0]') AS e": [("1", "1"), ("2.0", "2.0")],
    """SELECT k FROM jsonb_object_keys('{"a": 1}') AS k""": [("a",)],
}


def test_jsonb_set_returning_functions_in_from_match_postgres_forms():
    with _conn(SRF_SETUP) as conn:
        for q, want in SRF_QUERIES.items():
            assert conn.execute(q).fetchall() == want, q
        cur = conn.execute("SELECT * FROM a, jsonb_array_elements(j) AS e WHERE id = 2")
        assert [d[0] for d in cur.description] == ["id", "j", "value"]
        # a conjunct over the function's columns still runs after it; a RIGHT join keeps the WHERE above
        with pytest.raises(sql.errors.ExecutionError, match="non-object"):
            conn.execute("SELECT id FROM a, jsonb_each(j) AS e(k, v) WHERE k = 'a'").fetchall()


@pytest.mark.postgres
def test_jsonb_set_returning_functions_in_from_agree_with_postgres(pg):  # noqa: F811
    for q in ("DROP TABLE IF EXISTS a", *SRF_SETUP):
        pg.execute(q)
    with _conn(SRF_SETUP) as conn:
        for q, want in SRF_QUERIES.items():
            theirs, ours = run_pg(pg, q), run_ours(conn, q)
            assert theirs == ("ok", want), q
            assert ours == theirs, q


# --- 4. min()/max() of arrays: Postgres' array order in batch; an MV refuses them by name ------

ARRAY_SETUP = [
    "CREATE TABLE a (id INT PRIMARY KEY, arr INT[], t TEXT[])",
    """INSERT INTO a VALUES (1, ARRAY[1,2], ARRAY['a','b']), (2, ARRAY[1,NULL], ARRAY['a',NULL]), (3, NULL, NULL),
       (4, ARRAY[]::int[], ARRAY[]::text[]), (5, ARRAY[2,1], ARRAY['b']), (6, ARRAY[1], ARRAY['a','b','c'])""",
]
ARRAY_QUERIES = {
    "SELECT max(arr), min(t), max(t), min(arr) FROM a": [([2, 1], [], ["b"], [])],
    "SELECT id % 2, min(arr), max(t) FROM a GROUP BY 1 ORDER BY 1": [(0, [], ["a", None]), (1, [1, 2], ["b"])],
    "SELECT max(arr) FILTER (WHERE id IN (2, 6)), min(t) FILTER (WHERE id <> 4) FROM a": [([1, None], ["a", "b"])],
    "SELECT max(arr), min(t) FROM a WHERE id = 3": [(None, None)],
    "SELECT id FROM a GROUP BY id HAVING max(arr) > ARRAY[1, 5] ORDER BY id": [(2,), (5,)],
}


def test_min_max_of_arrays_in_batch():
    with _conn(ARRAY_SETUP) as conn:
        for q, want in ARRAY_QUERIES.items():
            assert conn.execute(q).fetchall() == want, q
        with pytest.raises(sql.errors.UnsupportedError, match=r"max\(\) of an array .* batch query only"):
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT max(arr) AS m FROM a")


@pytest.mark.postgres
def test_min_max_of_arrays_agree_with_postgres(pg):  # noqa: F811
    for q in ("DROP TABLE IF EXISTS a", *ARRAY_SETUP):
        pg.execute(q)
    with _conn(ARRAY_SETUP) as conn:
        for q, want in ARRAY_QUERIES.items():
            theirs, ours = run_pg(pg, q), run_ours(conn, q)
            assert theirs == ("ok", want), q
            assert ours == theirs, q
