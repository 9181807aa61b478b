"""Subqueries through SQL (sql/bind/subquery.py): scalar subqueries in batch (evaluated once, no
row -> NULL, two rows -> ExecutionError) and in MVs (a dynamic filter for ``col <op>
(subquery)``, a join with the one-row side elsewhere), ``[NOT] IN (subquery)`` as semi / anti
joins with SQL's three-valued NOT IN, ``[NOT] EXISTS``, EXISTS / IN / scalar aggregates correlated
by equalities;
subqueries in UPDATE/DELETE; CTEs; batch nested-loop joins; what stays unsupported says so. A hypothesis test runs random changes to two tables against a Python model
of each query, as MVs (after every FLUSH) and as batch SELECTs, and reopens a local database
to check the MVs' plans rebuild onto their stored state.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from sql.errors import ExecutionError, UnsupportedError


@pytest.fixture
def conn():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
        c.execute("CREATE TABLE b (id INT PRIMARY KEY, y INT)")
        c.execute("INSERT INTO a VALUES (1, 1), (2, 2), (3, NULL), (4, 4)")
        c.execute("INSERT INTO b VALUES (1, 1), (2, 5)")
        c.execute("FLUSH")
        yield c


def rows(conn, query):
    return sorted(conn.execute(query).fetchall(), key=repr)


def test_a_scalar_subquery_with_two_rows_is_an_execution_error(conn):
    with pytest.raises(ExecutionError, match="more than one row returned by a subquery used as an expression"):
        conn.execute("SELECT (SELECT x FROM a) AS two_rows")
    with pytest.raises(ExecutionError, match="more than one row"):
        conn.execute("SELECT id FROM a WHERE x > (SELECT y FROM b)")


def test_a_scalar_subquery_without_rows_is_null_and_is_evaluated_once(conn):
    assert rows(conn, "SELECT (SELECT y FROM b WHERE y > 100) AS none") == [(None,)]
    assert rows(conn, "SELECT id FROM a WHERE x < (SELECT y FROM b WHERE y > 100)") == []
    assert rows(conn, "SELECT id, (SELECT max(y) FROM b), x + (SELECT min(y) FROM b) FROM a") == [
        (1, 5, 2), (2, 5, 3), (3, 5, None), (4, 5, 5)]
    assert rows(conn, "SELECT count(*), (SELECT max(y) FROM b) FROM a") == [(4, 5)]
    assert rows(conn, "SELECT x FROM a WHERE x + 0 = (SELECT min(y) FROM b)") == [(1,)]
    # several rows, but no outer row needs the value: Postgres does not fail either
    assert rows(conn, "SELECT id, (SELECT y FROM b) FROM a WHERE id > 10") == []


def test_in_not_in_and_exists_follow_three_valued_logic(conn):
    assert rows(conn, "SELECT id FROM a WHERE x IN (SELECT y FROM b)") == [(1,)]
    assert rows(conn, "SELECT id FROM a WHERE x NOT IN (SELECT y FROM b)") == [(2,), (4,)]
    assert rows(conn, "SELECT id FROM a WHERE x + 1 IN (SELECT y FROM b)") == [(4,)]
    assert rows(conn, "SELECT id FROM a WHERE x = ANY (SELECT y FROM b)") == [(1,)]
    assert rows(conn, "SELECT id FROM a WHERE x <> ALL (SELECT y FROM b)") == [(2,), (4,)]
    assert rows(conn, "SELECT id FROM a WHERE NOT NOT x IN (SELECT y FROM b)") == [(1,)]
    assert rows(conn, "SELECT id FROM a WHERE NOT EXISTS (SELECT y FROM b WHERE y > 4)") == []
    assert rows(conn, "SELECT id, EXISTS (SELECT 1 FROM b WHERE y > 4) FROM a WHERE id = 1") == [(1, True)]
    conn.execute("INSERT INTO b VALUES (3, NULL)")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT id FROM a WHERE x NOT IN (SELECT y FROM b)") == []       # a NULL: never TRUE
    assert rows(conn, "SELECT id FROM a WHERE x IN (SELECT y FROM b)") == [(1,)]
    conn.execute("DELETE FROM b")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT id FROM a WHERE x NOT IN (SELECT y FROM b)") == [(1,), (2,), (3,), (4,)]  # empty


def test_exists_and_in_correlated_by_equalities_are_semi_and_anti_joins(conn):
    conn.execute("INSERT INTO b VALUES (3, NULL)")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y = a.x)") == [(1,)]
    assert rows(conn, "SELECT id FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE y = x + 3)") == [(1,), (3,), (4,)]
    assert rows(conn, "SELECT id FROM a WHERE x IN (SELECT y FROM b WHERE b.id = a.id)") == [(1,)]
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.y = a.x)"))
    assert "StreamHashJoin(anti" in text


def test_correlated_scalar_aggregates_are_left_joins_with_a_grouped_subquery(conn):
    conn.execute("INSERT INTO b VALUES (3, 1), (4, NULL)")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT id, (SELECT max(id) FROM b WHERE b.y = a.x) FROM a") == [
        (1, 3), (2, None), (3, None), (4, None)]
    assert rows(conn, "SELECT id, (SELECT count(*) FROM b WHERE b.y = a.x) FROM a") == [
        (1, 2), (2, 0), (3, 0), (4, 0)]   # a count without rows is 0, not NULL
    assert rows(conn, "SELECT id FROM a WHERE id <= (SELECT sum(id) FROM b WHERE y = x)") == [(1,)]
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id, (SELECT max(id) FROM b WHERE b.y = a.x) FROM a"))
    assert "StreamHashJoin(left" in text and "StreamHashAgg" in text


def test_batch_joins_without_an_equality_are_nested_loops(conn):
    assert rows(conn, "SELECT a.id, b.id FROM a JOIN b ON a.x < b.y") == [(1, 2), (2, 2), (4, 2)]
    assert rows(conn, "SELECT count(*) FROM a, b") == [(8,)]
    assert rows(conn, "SELECT a.id, b.id FROM a LEFT JOIN b ON a.x > b.y") == [
        (1, None), (2, 1), (3, None), (4, 1)]


@pytest.mark.parametrize("query, match", [
    ("SELECT a.id FROM a JOIN b ON a.x < b.y", "equality"),
    ("SELECT id, (SELECT y FROM b) FROM a", "at most one row"),
    ("SELECT id FROM a WHERE x > (SELECT y FROM b WHERE b.id = a.id)", "must be an aggregate"),
    ("SELECT id, (SELECT max(y) FROM b WHERE b.id < a.id) FROM a", "equalities"),
    ("SELECT id FROM a WHERE x IN (SELECT y FROM b) OR id = 1", "IN \\(subquery\\)"),
    ("SELECT id FROM a WHERE x > ALL (SELECT y FROM b)", "ANY/SOME/ALL"),
    ("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y < a.x)", "equalities"),
    ("SELECT id FROM a WHERE x NOT IN (SELECT y FROM b WHERE b.id = a.id)", "NOT IN"),
])
def test_what_a_materialized_view_does_not_support_says_so(conn, query, match):
    with pytest.raises(UnsupportedError, match=match):
        conn.execute(f"CREATE MATERIALIZED VIEW nope AS {query}")
    assert conn.execute("SHOW MATERIALIZED VIEWS").fetchall() == []


def test_explain_names_the_dynamic_filter_and_the_semi_join(conn):
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id FROM a WHERE x > (SELECT max(y) FROM b)").fetchall())
    assert "StreamDynamicFilter" in text and "StreamSimpleAgg" in text
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id FROM a WHERE x IN (SELECT y FROM b)").fetchall())
    assert "StreamHashJoin(semi" in text
    text = "\n".join(r[0] for r in conn.execute(   # a BIGINT count: the compared INT expression is cast
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id FROM a WHERE x + 1 <= (SELECT count(*) FROM b)").fetchall())
    assert "StreamDynamicFilter" in text and "CAST((x + 1) AS BIGINT)" in text


# --- the model test ---------------------------------------------------------------------------------

def _not_in(x, ys):
    if not ys:
        return True
    if x is None:
        return None
    if x in ys:
        return False
    return None if None in ys else True


def _max(ys):
    vals = [y for y in ys if y is not None]
    return max(vals) if vals else None


QUERIES = {   # name: (SQL over a and b, model over ({id: x}, {id: y}) -> rows)
    "in": ("SELECT id, x FROM a WHERE x IN (SELECT y FROM b)",
           lambda A, B: [(i, x) for i, x in A.items() if x is not None and x in B.values()]),
    "not_in": ("SELECT id, x FROM a WHERE x NOT IN (SELECT y FROM b)",
               lambda A, B: [(i, x) for i, x in A.items() if _not_in(x, list(B.values())) is True]),
    "ne_all": ("SELECT id, x FROM a WHERE NOT (x = SOME (SELECT y FROM b WHERE y <> 3))",
               lambda A, B: [(i, x) for i, x in A.items() if _not_in(x, [y for y in B.values() if y is not None and y != 3]) is True]),
    "exists": ("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE y > 1)",
               lambda A, B: [(i,) for i in A if any(y is not None and y > 1 for y in B.values())]),
    "not_exists": ("SELECT id FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE y > 1)",
                   lambda A, B: [(i,) for i in A if not any(y is not None and y > 1 for y in B.values())]),
    "gt_max": ("SELECT id, x FROM a WHERE x > (SELECT max(y) FROM b)",
               lambda A, B: [(i, x) for i, x in A.items()
                             if x is not None and _max(B.values()) is not None and x > _max(B.values())]),
    "le_count": ("SELECT id FROM a WHERE x <= (SELECT count(*) FROM b)",
                 lambda A, B: [(i,) for i, x in A.items() if x is not None and x <= len(B)]),
    "corr_exists": ("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.y = a.x AND b.id > 1)",
                    lambda A, B: [(i,) for i, x in A.items()
                                  if any(x is not None and y == x and j > 1 for j, y in B.items())]),
    "corr_not_exists": ("SELECT id FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.y = a.x + 1)",
                        lambda A, B: [(i,) for i, x in A.items()
                                      if not any(x is not None and y == x + 1 for y in B.values())]),
    "corr_in": ("SELECT id FROM a WHERE x IN (SELECT y FROM b WHERE b.id = a.id)",
                lambda A, B: [(i,) for i, x in A.items() if x is not None and B.get(i, None) == x]),
    "expr_lt_max": ("SELECT id FROM a WHERE x * 2 < (SELECT max(y) FROM b)",
                    lambda A, B: [(i,) for i, x in A.items()
                                  if x is not None and _max(B.values()) is not None and x * 2 < _max(B.values())]),
    "in_count": ("SELECT id FROM a WHERE x IN (SELECT count(*) FROM b)",
                 lambda A, B: [(i,) for i, x in A.items() if x is not None and x == len(B)]),
    "not_in_max": ("SELECT id FROM a WHERE x NOT IN (SELECT max(y) FROM b)",
                   lambda A, B: [(i,) for i, x in A.items() if _not_in(x, [_max(B.values())]) is True]),
    "corr_count": ("SELECT id, (SELECT count(*) FROM b WHERE b.y = a.x) AS n FROM a",
                   lambda A, B: [(i, sum(1 for y in B.values() if x is not None and y == x)) for i, x in A.items()]),
    "corr_sum": ("SELECT id FROM a WHERE x < (SELECT sum(id) FROM b WHERE b.y = a.x AND b.id > 0)",
                 lambda A, B: [(i,) for i, x in A.items()
                               if x is not None and any(y == x and j > 0 for j, y in B.items())
                               and x < sum(j for j, y in B.items() if y == x and j > 0)]),
    "corr_exists_value": ("SELECT id, EXISTS (SELECT 1 FROM b WHERE b.y = a.x + 1) AS e FROM a",
                          lambda A, B: [(i, any(x is not None and y == x + 1 for y in B.values()))
                                        for i, x in A.items()]),
    "select_list": ("SELECT id, x - (SELECT max(y) FROM b) AS d FROM a",
                    lambda A, B: [(i, None if x is None or _max(B.values()) is None else x - _max(B.values()))
                                  for i, x in A.items()]),
}

VALUE = st.one_of(st.none(), st.integers(0, 4))
CHANGE = st.tuples(st.sampled_from("ab"), st.integers(0, 4), st.one_of(st.none(), VALUE.map(lambda v: (v,))))
STEPS = st.lists(st.one_of(st.lists(CHANGE, min_size=1, max_size=5), st.just("reopen")), min_size=1, max_size=8)


def _apply(conn, models, changes):
    for table, key, value in changes:
        model = models[table]
        col = "x" if table == "a" else "y"
        if value is None:
            conn.execute(f"DELETE FROM {table} WHERE id = $1", [key])
            model.pop(key, None)
        elif key in model:
            conn.execute(f"UPDATE {table} SET {col} = $1 WHERE id = $2", [value[0], key])
            model[key] = value[0]
        else:
            conn.execute(f"INSERT INTO {table} VALUES ($1, $2)", [key, value[0]])
            model[key] = value[0]


def _check(conn, models):
    for name, (query, model) in QUERIES.items():
        want = sorted(model(models["a"], models["b"]), key=repr)
        assert rows(conn, f"SELECT * FROM mv_{name}") == want, name
        assert rows(conn, query) == want, name


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_subquery_mvs_and_selects_equal_the_model(tmp_path_factory, steps):
    path = str(tmp_path_factory.mktemp("subq") / "db")
    models = {"a": {}, "b": {}}
    conn = sql.connect(path)
    try:
        conn.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
        conn.execute("CREATE TABLE b (id INT PRIMARY KEY, y INT)")
        for name, (query, _) in QUERIES.items():
            conn.execute(f"CREATE MATERIALIZED VIEW mv_{name} AS {query}")
        for step in steps:
            if step == "reopen":
                conn.execute("FLUSH")
                conn.close()
                conn = sql.connect(path)
            else:
                _apply(conn, models, step)
                conn.execute("FLUSH")
            _check(conn, models)
    finally:
        conn.close()


# --- CTEs ---------------------------------------------------------------------------------------------

def test_ctes_used_twice_shadowing_a_table_and_with_column_names(conn):
    # the slt's case: a CTE in both branches of a UNION ALL (recursed until "nests too deeply")
    q = "WITH e AS (SELECT id FROM a WHERE x > 1) SELECT id FROM e UNION ALL SELECT id + 10 FROM e"
    assert rows(conn, q) == sorted([(2,), (4,), (12,), (14,)], key=repr)
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == sorted([(2,), (4,), (12,), (14,)], key=repr)
    # a CTE's own name inside its body is the table (WITH is not recursive)
    assert rows(conn, "WITH a AS (SELECT id FROM a WHERE id > 2) SELECT * FROM a") == [(3,), (4,)]
    assert rows(conn, "WITH e(p, q) AS (SELECT id, x FROM a) SELECT p FROM e WHERE q = 2") == [(2,)]
    with pytest.raises(sql.BindError, match="does not exist"):   # a later CTE is not visible yet
        conn.execute("WITH e AS (SELECT id FROM f), f AS (SELECT id FROM a) SELECT * FROM e")
    with pytest.raises(sql.BindError, match="3 columns specified"):
        conn.execute("WITH e(p, q, r) AS (SELECT id, x FROM a) SELECT p FROM e")


def test_update_and_delete_take_subqueries_in_where(conn):
    assert conn.execute("DELETE FROM a WHERE x IN (SELECT y FROM b)").rowcount == 1
    assert conn.execute("UPDATE a SET x = 0 WHERE x > (SELECT min(y) FROM b) AND "
                        "NOT EXISTS (SELECT 1 FROM b WHERE b.id = a.id)").rowcount == 1
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM a") == [(2, 2), (3, None), (4, 0)]
    with pytest.raises(ExecutionError, match="more than one row"):
        conn.execute("DELETE FROM a WHERE x = (SELECT y FROM b)")


def test_nested_subqueries_bind_once_and_nest_in_correlated_ones(conn):
    # each subquery is bound once: 25 nested levels would be 2**25 bindings otherwise
    q = "SELECT id FROM a WHERE x >= " + "(SELECT min(x) FROM a WHERE x >= " * 25 + "0" + ")" * 25
    assert rows(conn, q) == [(1,), (2,), (4,)]
    q = "SELECT " + "(SELECT " * 25 + "max(y) FROM b" + ")" * 25
    assert rows(conn, q) == [(5,)]
    q = ("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.id = a.id AND "
         "b.y IN (SELECT x FROM a AS c WHERE c.x > 0))")
    assert rows(conn, q) == [(1,)]
    conn.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == [(1,)]
    with pytest.raises(UnsupportedError, match="nested in a correlated subquery"):
        conn.execute("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.id = a.id AND "
                     "EXISTS (SELECT 1 FROM a AS c WHERE c.x = a.x))")
