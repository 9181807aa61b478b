"""What the binder keeps on the nodes of a cached statement (sql/bind/frozen.py) is never stale:
re-running a statement generates no SQL text, a kept text follows any sqlglot mutation, a copy
never reads its original's text, and answers follow parameters, DDL and catalog changes."""

import pickle

import sqlglot
from sqlglot import exp

import sql
from sql.bind import frozen
from sql.bind.frozen import freeze, kept, pg_text
from sql.parse import _parse_cached, parse_script

GROUPED = "SELECT g, count(*), sum(x) AS s FROM t GROUP BY g HAVING sum(x) > %s ORDER BY sum(x) DESC, g"

# statement shapes whose binding takes texts (aggregates, FILTER, windows, ORDER BY, DISTINCT ON,
# subqueries) or runs the rewrites whose need is kept (named windows, window FILTER, jsonb, regexp)
CORPUS = [
    GROUPED.replace("%s", "0"),
    "SELECT g % 2 AS h, count(*) FILTER (WHERE x > 1), max(x), avg(x) FROM t GROUP BY 1 ORDER BY 1",
    "SELECT g, string_agg(CAST(x AS VARCHAR), ',' ORDER BY x DESC) FROM t GROUP BY g ORDER BY g",
    "SELECT g, sum(x) OVER w, row_number() OVER (PARTITION BY g ORDER BY x) FROM t WINDOW w AS (PARTITION BY g) "
    "ORDER BY g, x",
    "SELECT g, count(x) FILTER (WHERE x > 1) OVER (PARTITION BY g) FROM t ORDER BY g, x",
    "SELECT DISTINCT ON (g) g, x FROM t ORDER BY g, x DESC",
    "SELECT g, x FROM t WHERE x > (SELECT avg(x) FROM t) ORDER BY x + g, g",
    "SELECT g, (SELECT count(*) FROM t t2 WHERE t2.g = t.g) FROM t ORDER BY 1, 2",
    "SELECT g, stddev_samp(x), percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t GROUP BY g ORDER BY g",
    "SELECT regexp_split_to_table('a,b', ',') AS part, g FROM t ORDER BY g, part",
    "SELECT jsonb_agg(x ORDER BY x) FROM t",
]


def _table(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, x BIGINT)")
    conn.execute("INSERT INTO t VALUES (1, 1, 5), (2, 1, 7), (3, 2, 1), (4, 3, 2), (5, 3, 2)")
    conn.execute("FLUSH")


def _count_generations(monkeypatch) -> list:
    calls = []
    real = exp.Expression.sql

    def counted(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(exp.Expression, "sql", counted)
    return calls


def test_a_cached_statement_generates_no_text_when_run_again(monkeypatch):
    with sql.connect(":memory:") as conn:
        _table(conn)
        first = conn.execute(GROUPED, (0,)).fetchall()
        calls = _count_generations(monkeypatch)
        for _ in range(3):
            assert conn.execute(GROUPED, (0,)).fetchall() == first
        assert calls == []
    assert first == [(1, 2, 12), (3, 2, 4), (2, 1, 1)]


def test_answers_follow_parameters_ddl_and_catalog_changes():
    with sql.connect(":memory:") as conn:
        _table(conn)
        assert conn.execute(GROUPED, (0,)).fetchall() == [(1, 2, 12), (3, 2, 4), (2, 1, 1)]
        assert conn.execute(GROUPED, (3,)).fetchall() == [(1, 2, 12), (3, 2, 4)]
        assert conn.execute(GROUPED, (100,)).fetchall() == []
        # the same text over a table of the same name with other types and rows
        conn.execute("DROP TABLE t")
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, x DOUBLE, g VARCHAR)")
        conn.execute("INSERT INTO t VALUES (1, 0.5, 'a'), (2, 1.5, 'a'), (3, 4.0, 'b')")
        conn.execute("FLUSH")
        cur = conn.execute(GROUPED, (0,))
        assert cur.fetchall() == [("b", 1, 4.0), ("a", 2, 2.0)]
        assert [d[1] for d in cur.description] == ["character varying", "bigint", "double precision"]
        # a column added: SELECT * and a grouped query over it see it
        conn.execute("ALTER TABLE t ADD COLUMN y INT")
        conn.execute("INSERT INTO t VALUES (4, 1.0, 'b', 7)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM t ORDER BY id").fetchall()[-1] == (4, 1.0, "b", 7)
        assert conn.execute("SELECT g, sum(y) FROM t GROUP BY g ORDER BY g").fetchall() == [("a", None), ("b", 7)]
        # a column dropped: the statement that named it now fails, every time (errors are not kept)
        conn.execute("ALTER TABLE t DROP COLUMN y")
        for _ in range(2):
            try:
                conn.execute("SELECT g, sum(y) FROM t GROUP BY g ORDER BY g")
            except sql.BindError as exc:
                assert "y" in str(exc)
            else:
                raise AssertionError("sum(y) over a dropped column bound")


def test_refusals_are_raised_on_every_run():
    with sql.connect(":memory:") as conn:
        _table(conn)
        for _ in range(3):
            try:
                conn.execute("SELECT s1.t.g FROM t")
            except sql.SqlError as exc:
                assert "schema" in str(exc)
            else:
                raise AssertionError("a schema-qualified column bound")


def test_no_cached_tree_is_changed_by_running_its_statement():
    """Every text kept on a cached tree still equals a fresh generation, and every tree still
    prints as it did before it ran: no bind step mutates a statement the parse cache holds."""
    with sql.connect(":memory:") as conn:
        _table(conn)
        before = {q: [s.ast.sql(dialect="postgres") for s in parse_script(q)] for q in CORPUS}
        answers = {q: conn.execute(q).fetchall() for q in CORPUS}
        for q in CORPUS:
            assert conn.execute(q).fetchall() == answers[q], q
            assert [s.ast.sql(dialect="postgres") for s in parse_script(q)] == before[q], q
    checked = 0
    for q in CORPUS:
        for stmt in _parse_cached(q):
            for node in stmt.ast.walk():
                got = node.meta_get(frozen._TEXT)
                if got is not None:
                    assert got.owner == id(node) and node._hash is not None
                    assert got.value == node.sql(dialect="postgres")
                    checked += 1
    assert checked > len(CORPUS)


def _frozen_call():
    root = sqlglot.parse_one("SELECT sum(x + 1), count(*) FROM t", read="postgres")
    freeze(root)
    return root, root.expressions[0]


def test_a_kept_text_follows_a_mutation():
    root, call = _frozen_call()
    assert pg_text(call) == "SUM(x + 1)"
    assert call.meta_get(frozen._TEXT) is not None   # kept
    call.this.set("expression", exp.Literal.number(2))   # a descendant changed through sqlglot
    assert pg_text(call) == "SUM(x + 2)"
    call.this.replace(exp.column("y"))
    assert pg_text(call) == "SUM(y)"
    assert pg_text(call) == call.sql(dialect="postgres")


def test_a_copy_never_reads_its_originals_text():
    root, call = _frozen_call()
    assert pg_text(call) == "SUM(x + 1)"
    twin = call.copy()   # meta is copied with it, without the kept text
    assert twin.meta_get(frozen._TEXT) is None
    twin.meta[frozen._TEXT] = call.meta[frozen._TEXT]   # even if it were: another node's
    hash(twin)
    twin.args["this"] = exp.column("z")   # changed behind sqlglot's back: its hash stays set
    assert pg_text(twin) == "SUM(z)"
    whole = root.copy()   # a copied root is not frozen: nothing is kept on it
    assert not frozen.frozen(whole.expressions[1])
    assert pg_text(whole.expressions[1]) == "COUNT(*)"
    assert whole.expressions[1].meta_get(frozen._TEXT) is None
    assert pickle.loads(pickle.dumps(call)).meta_get(frozen._TEXT) is None


def test_nothing_is_kept_outside_a_frozen_tree():
    root = sqlglot.parse_one("SELECT max(x) FROM t", read="postgres")
    call = root.expressions[0]
    assert pg_text(call) == "MAX(x)"
    assert call.meta_get(frozen._TEXT) is None
    seen = []
    assert kept(call, "hummock_test", lambda n: seen.append(n) or len(seen)) == 1
    assert kept(call, "hummock_test", lambda n: seen.append(n) or len(seen)) == 2


def test_kept_facts_are_computed_once_per_frozen_node():
    root, call = _frozen_call()
    seen = []
    for _ in range(3):
        assert kept(call, "hummock_test", lambda n: seen.append(n) or "fact") == "fact"
    assert seen == [call]
    call.set("this", exp.column("w"))   # changed: computed again
    assert kept(call, "hummock_test", lambda n: seen.append(n) or "new") == "new"
