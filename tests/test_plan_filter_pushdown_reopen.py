"""An MV planned before WHERE conjuncts were pushed below joins (sql/plan/rules.py
``push_filter_below_join``) keeps join state holding the rows those conjuncts reject; reopened,
it must be planned as it was (the catalog's ``pushed_filters`` flag, absent in older records):
otherwise the pushed Filter drops the delete half of an update that makes such a row pass, the
join's state keeps the old row and the new row's insert is an InconsistentStreamError."""

import pytest

import sql
from sql.plan import rules


@pytest.mark.parametrize("kind", ["JOIN", "LEFT JOIN", "RIGHT JOIN"])
def test_mv_planned_without_pushdown_keeps_its_plan_when_reopened(tmp_path, monkeypatch, kind):
    q = f"SELECT a.k, a.c, b.k AS bk, b.d FROM a {kind} b ON a.j = b.j WHERE a.c = 1 AND b.d = 2"
    path = str(tmp_path / "db")
    with monkeypatch.context() as m:   # as the code before the rule planned it
        m.setattr(rules, "RULES", tuple(r for r in rules.RULES if r is not rules.push_filter_below_join))
        with sql.connect(path) as conn:
            conn.execute("CREATE TABLE a (k INT PRIMARY KEY, j INT, c INT)")
            conn.execute("CREATE TABLE b (k INT PRIMARY KEY, j INT, d INT)")
            conn.execute("INSERT INTO a VALUES (1, 1, 0), (2, 1, 1)")
            conn.execute("INSERT INTO b VALUES (1, 1, 0), (2, 1, 2)")
            conn.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
            conn.execute("FLUSH")
        with sql.connect(path) as conn:   # an older record: no pushed_filters flag
            conn.execute("UPDATE a SET c = 1 WHERE k = 1")   # a row the conjunct rejected now passes
            conn.execute("FLUSH")
    with sql.connect(path) as conn:
        for stmt in ["UPDATE a SET c = 1 WHERE k = 2", "UPDATE b SET d = 2 WHERE k = 1",
                     "UPDATE a SET c = 5 WHERE k = 1", "UPDATE b SET d = 7 WHERE k = 2"]:
            conn.execute(stmt)
            conn.execute("FLUSH")
            got = sorted(conn.execute("SELECT * FROM m").fetchall(), key=repr)
            assert got == sorted(conn.execute(q).fetchall(), key=repr), stmt


def test_new_mv_is_planned_with_pushdown_when_reopened(tmp_path):
    path = str(tmp_path / "db")
    q = "SELECT a.k, b.k AS bk FROM a JOIN b ON a.j = b.j WHERE a.c = 1"
    with sql.connect(path) as conn:
        conn.execute("CREATE TABLE a (k INT PRIMARY KEY, j INT, c INT)")
        conn.execute("CREATE TABLE b (k INT PRIMARY KEY, j INT)")
        conn.execute(f"CREATE MATERIALIZED VIEW m AS {q}")
        conn.execute("INSERT INTO a VALUES (1, 1, 0), (2, 1, 1)")
        conn.execute("INSERT INTO b VALUES (1, 1)")
        conn.execute("FLUSH")
    with sql.connect(path) as conn:
        conn.execute("UPDATE a SET c = 1 WHERE k = 1")
        conn.execute("UPDATE a SET c = 0 WHERE k = 2")
        conn.execute("FLUSH")
        assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [(1, 1)]
