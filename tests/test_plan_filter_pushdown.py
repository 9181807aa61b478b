"""WHERE conjuncts over one side of a join also filter that side before the join
(sql/plan/rules.py ``push_filter_below_join``): on random tables with NULLs, every join kind and
random WHERE clauses, batch queries and MVs answer the same rows with the rule as without it;
EXPLAIN shows the pushed Filter where the join kind allows it and not where it does not (the
null-padded side of an outer join, a full join, a volatile conjunct)."""

import random

import pytest

import sql
from sql.plan import rules

CONJUNCTS = ["a.c = 1", "a.c > 0 OR a.c IS NULL", "b.d <> 2", "b.d IS NULL", "a.c = b.d", "a.k + b.k > 3",
             "coalesce(b.d, 0) = 0", "a.c IN (0, 2)"]
JOINS = ["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]


def _rows(conn, q):
    return sorted(conn.execute(q).fetchall(), key=repr)


def _explain(conn, q) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + q).fetchall())


@pytest.fixture
def without_rule(monkeypatch):
    def off():
        monkeypatch.setattr(rules, "RULES", tuple(r for r in rules.RULES if r is not rules.push_filter_below_join))
    return off


def _fill(conn, rng):
    conn.execute("CREATE TABLE a (k INT PRIMARY KEY, j INT, c INT)")
    conn.execute("CREATE TABLE b (k INT PRIMARY KEY, j INT, d INT)")
    pick = [None, 0, 1, 2]
    conn.executemany("INSERT INTO a VALUES (%s, %s, %s)", [(k, rng.choice(pick), rng.choice(pick)) for k in range(12)])
    conn.executemany("INSERT INTO b VALUES (%s, %s, %s)", [(k, rng.choice(pick), rng.choice(pick)) for k in range(9)])
    conn.execute("FLUSH")


def _queries(rng, n):
    out = []
    for _ in range(n):
        where = " AND ".join(rng.sample(CONJUNCTS, rng.randint(1, 3)))
        out.append(f"SELECT a.k, a.c, b.k AS bk, b.d FROM a {rng.choice(JOINS)} b ON a.j = b.j WHERE {where}")
    return out


@pytest.mark.parametrize("seed", range(3))
def test_batch_and_mv_answers_do_not_change(seed, without_rule):
    rng = random.Random(seed)
    queries = _queries(rng, 8)
    with sql.connect(":memory:") as conn:
        _fill(conn, rng)
        for i, q in enumerate(queries):
            if "FULL JOIN" not in q:   # MVs: inner and one-sided outer joins
                conn.execute(f"CREATE MATERIALIZED VIEW m{i} AS {q}")
        conn.execute("UPDATE a SET c = 2 WHERE k % 3 = 0")
        conn.execute("DELETE FROM b WHERE k % 4 = 1")
        conn.execute("FLUSH")
        with_rule = [_rows(conn, q) for q in queries]
        views = {i: _rows(conn, f"SELECT * FROM m{i}") for i, q in enumerate(queries) if "FULL JOIN" not in q}
    with sql.connect(":memory:") as conn:
        without_rule()
        rng2 = random.Random(seed)
        _queries(rng2, 8)
        _fill(conn, rng2)
        conn.execute("UPDATE a SET c = 2 WHERE k % 3 = 0")
        conn.execute("DELETE FROM b WHERE k % 4 = 1")
        conn.execute("FLUSH")
        for q, got in zip(queries, with_rule):
            assert got == _rows(conn, q), q
    for i, got in views.items():
        assert got == with_rule[i], queries[i]


def _filters(plan: str, condition: str, table: str) -> bool:
    """Whether EXPLAIN ``plan`` has ``BatchFilter(condition)`` right over ``BatchScan(table``."""
    lines = [ln.strip() for ln in plan.splitlines()]
    return any(a == f"BatchFilter({condition})" and b.startswith(f"BatchScan({table}") for a, b in zip(lines, lines[1:]))


def test_explain_shows_where_each_conjunct_goes():
    with sql.connect(":memory:") as conn:
        _fill(conn, random.Random(0))
        inner = _explain(conn, "SELECT * FROM a JOIN b ON a.j = b.j WHERE a.c = 1 AND b.d = 2 AND a.k + b.k > 3")
        assert _filters(inner, "(c = 1)", "a") and _filters(inner, "(d = 2)", "b")
        left = _explain(conn, "SELECT * FROM a LEFT JOIN b ON a.j = b.j WHERE a.c = 1 AND b.d IS NULL")
        assert _filters(left, "(c = 1)", "a") and not _filters(left, "(d IS NULL)", "b")
        full = _explain(conn, "SELECT * FROM a FULL JOIN b ON a.j = b.j WHERE a.c = 1")
        assert not _filters(full, "(c = 1)", "a")
        volatile = _explain(conn, "SELECT * FROM a JOIN b ON a.j = b.j WHERE random() < 2")
        assert "BatchScan(a" in volatile and "random" not in volatile.split("BatchJoin")[1]
        keyed = _explain(conn, "SELECT * FROM a JOIN b ON a.j = b.j WHERE a.k = 3")
        assert "BatchScan(a, table_id=1, points=[(3)])" in keyed   # the pushed conjunct gives a key range


def test_a_conjunct_reading_a_column_twice_is_shifted_once(without_rule):
    """NULLIF(b.d, 0) binds as CASE WHEN d = 0 THEN NULL ELSE d with one shared ``d``: pushed to
    the right side its column is shifted by the left's width once (twice it read a column of
    another type, or none: a batch SchemaError, an MV's actor failing)."""
    queries = ["SELECT b.k, b.d FROM a, b WHERE a.j = b.j AND 0 >= NULLIF(b.d, 0)",
               "SELECT a.k AS ak, b.k AS bk FROM a JOIN b ON a.j = b.j WHERE NULLIF(b.d, 1) IS NULL"]
    got = {}
    for rule in (True, False):
        if not rule:
            without_rule()
        with sql.connect(":memory:") as conn:
            _fill(conn, random.Random(7))
            for i, q in enumerate(queries):
                conn.execute(f"CREATE MATERIALIZED VIEW mv{i} AS {q}")
            conn.execute("INSERT INTO b VALUES (100, 1, 0), (101, 2, -3), (102, NULL, 1)")
            conn.execute("FLUSH")
            got[rule] = [(_rows(conn, q), _rows(conn, f"SELECT * FROM mv{i}")) for i, q in enumerate(queries)]
    assert got[True] == got[False]
    for batch, mv in got[True]:
        assert batch == mv and batch
