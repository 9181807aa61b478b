"""Key-range planning of batch queries (sql/plan/key_range.py, sql/batch/scan.py): on random
tables with composite keys, random predicates (equality, ranges, IN, BETWEEN, NULL, literals of
other numeric types, contradictions) and random ORDER BY / LIMIT / OFFSET, a query answers the
same rows, in the same order, with key ranges as with full scans (``key_ranges(False)``);
EXPLAIN shows a range where the predicate bounds the key; UPDATE/DELETE by key change the
same rows either way."""

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from relational.memcomparable import OrderType
from relational.types import DataType as T
from sql.plan import nodes as P
from sql.plan.key_range import key_ranges
from stream.expr import And, Cmp, Col, Lit

KEYS_A = range(-3, 4)
WORDS = ["", "a", "ab", "b", "ba", "zz"]
DAYS = [datetime.date(2024, 1, d) for d in (1, 2, 5)]

SHAPES = {   # name -> (create statement, columns in insert order, first pk column)
    "abc": ("CREATE TABLE t (a INT, b VARCHAR, c BIGINT, v INT, PRIMARY KEY (a, b, c))", "abcv", "a"),
    "ba": ("CREATE TABLE t (b VARCHAR, a INT, v INT, c BIGINT, PRIMARY KEY (b, a))", "abcv", "b"),
    "dc": ("CREATE TABLE t (d DATE, c BIGINT, a INT, v INT, PRIMARY KEY (d, c))", "dcav", "d"),
    "rowid": ("CREATE TABLE t (a INT, b VARCHAR, c BIGINT, v INT)", "abcv", "_row_id"),
}


def row_for(shape):
    cols = SHAPES[shape][1]
    gen = {"a": st.sampled_from(KEYS_A), "b": st.sampled_from(WORDS), "c": st.integers(-2, 3),
           "v": st.one_of(st.none(), st.integers(-5, 5)), "d": st.sampled_from(DAYS)}
    return st.tuples(*(gen[c] for c in cols))


def literal(col):
    if col in "acv":
        return st.one_of(st.integers(-4, 5).map(str), st.sampled_from(["2.5", "-0.5", "3.0", "1e10", "NULL",
                                                                        "9223372036854775808"]))
    if col == "b":
        return st.sampled_from(["''", "'a'", "'ab'", "'b'", "'c'", "'zz'", "'zzz'", "NULL"])
    return st.sampled_from(["DATE '2024-01-02'", "DATE '2023-12-31'", "DATE '2024-01-05'", "NULL"])


@st.composite
def predicate(draw, cols):
    col = draw(st.sampled_from(cols))
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "flip", "in", "between", "or", "any"]))
    lit = draw(literal(col))
    if kind == "cmp":
        return f"{col} {draw(st.sampled_from(['=', '<', '<=', '>', '>=', '=']))} {lit}"
    if kind == "flip":
        return f"{lit} {draw(st.sampled_from(['=', '<', '>=']))} {col}"
    if kind == "in":
        items = draw(st.lists(literal(col), min_size=1, max_size=4))
        return f"{col} IN ({', '.join(items)})"
    if kind == "any":   # no spaces around '=': the test's check for an equality on the key skips it
        items = draw(st.lists(literal(col), min_size=1, max_size=4))
        return f"{col}=ANY(ARRAY[{', '.join(items)}])"
    if kind == "between":
        return f"{col} BETWEEN {lit} AND {draw(literal(col))}"
    other = draw(st.sampled_from(cols))
    return f"({col} = {lit} OR {other} = {draw(literal(other))})"


@st.composite
def query(draw, shape):
    cols = list(SHAPES[shape][1])
    where = draw(st.lists(predicate(cols), max_size=3))
    if shape != "rowid" and draw(st.booleans()):   # equality on the first key column: EXPLAIN shows a range
        where.append(f"{SHAPES[shape][2]} = {draw(literal(SHAPES[shape][2]))}")
    text = "SELECT * FROM t" + (" WHERE " + " AND ".join(where) if where else "")
    if draw(st.booleans()):
        order = draw(st.lists(st.sampled_from(cols), min_size=1, max_size=3, unique=True))
        text += " ORDER BY " + ", ".join(f"{c}{draw(st.sampled_from(['', ' DESC', ' DESC', ' NULLS FIRST']))}"
                                         for c in order)
    if draw(st.booleans()):
        text += f" LIMIT {draw(st.integers(0, 6))}"
        if draw(st.booleans()):
            text += f" OFFSET {draw(st.integers(0, 4))}"
    return text


def _answers(conn, q):
    """(rows, error text) of ``q``: an error must be the same error either way."""
    try:
        return conn.execute(q).fetchall(), None
    except sql.SqlError as exc:
        return None, type(exc).__name__


def _ordered(q: str) -> bool:
    return "ORDER BY" in q or "LIMIT" in q


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
          deadline=None)
@given(data=st.data())
def test_key_range_plans_answer_like_full_scans(data):
    shape = data.draw(st.sampled_from(sorted(SHAPES)))
    rows = data.draw(st.lists(row_for(shape), min_size=8, max_size=60))
    with sql.connect(":memory:") as conn:
        conn.execute(SHAPES[shape][0])
        cols = SHAPES[shape][1]
        if rows:   # a repeated key overwrites (the table's default ON CONFLICT)
            conn.executemany(f"INSERT INTO t ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})", rows)
        conn.execute("FLUSH")
        for _ in range(10):
            q = data.draw(query(shape))
            got, err = _answers(conn, q)
            with key_ranges(False):
                want, want_err = _answers(conn, q)
            assert err == want_err, q
            key = SHAPES[shape][2]
            if err is None and shape != "rowid" and (f" AND {key} = " in q or f"WHERE {key} = " in q):
                plan = _explain(conn, q)
                assert "BatchScan(t, table_id=1, ranges=" in plan or "BatchScan(t, table_id=1, points=" in plan, \
                    (q, plan)
            if got is not None:
                if not _ordered(q):
                    got, want = sorted(got, key=repr), sorted(want, key=repr)
                assert got == want, q


def _explain(conn, q) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + q).fetchall())


@pytest.fixture
def orders():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE o (cust INT, id BIGINT, amount INT, PRIMARY KEY (cust, id))")
        conn.executemany("INSERT INTO o VALUES (%s, %s, %s)", [(i % 7, i, i * 3) for i in range(300)])
        conn.execute("FLUSH")
        yield conn


def test_explain_shows_ranges_points_and_early_stops(orders):
    assert "points=[(3, 10)]" in _explain(orders, "SELECT * FROM o WHERE cust = 3 AND id = 10")
    assert "ranges=[(3, [10, 20))]" in _explain(orders, "SELECT * FROM o WHERE cust = 3 AND id >= 10 AND id < 20")
    assert "ranges=[(1), (2)]" in _explain(orders, "SELECT * FROM o WHERE cust IN (2, 1)")
    assert "ranges=[(1), (2)]" in _explain(orders, "SELECT * FROM o WHERE cust = ANY(ARRAY[2, NULL, 1])")
    plan = _explain(orders, "SELECT * FROM o WHERE cust = 3 AND id = ANY('{10, 17, 24}')")
    assert "points=[(3, 10), (3, 17), (3, 24)]" in plan
    assert "ranges=[]" in _explain(orders, "SELECT * FROM o WHERE cust = ANY(NULL::int[])")
    assert "ranges=" not in _explain(orders, "SELECT * FROM o WHERE cust = ANY(ARRAY[2.5])")   # floor/ceil: no points
    assert "ranges=[]" in _explain(orders, "SELECT * FROM o WHERE cust = NULL")
    assert "ranges=[([4, 5])]" in _explain(orders, "SELECT * FROM o WHERE cust = 4.5")
    plan = _explain(orders, "SELECT * FROM o LIMIT 5")
    assert "early_stop=5" in plan and "reverse" not in plan
    plan = _explain(orders, "SELECT * FROM o WHERE cust = 2 ORDER BY id DESC LIMIT 3 OFFSET 1")
    assert "early_stop=4" in plan and "ranges=[(2)], reverse" in plan
    # no range: a non-key column, an OR across columns, a key column under an expression
    for q in ("SELECT * FROM o WHERE amount = 3", "SELECT * FROM o WHERE cust = 1 OR id = 2",
              "SELECT * FROM o WHERE cust + 1 = 2", "SELECT * FROM o ORDER BY amount LIMIT 2"):
        plan = _explain(orders, q)
        assert "ranges=" not in plan and "points=" not in plan and "early_stop" not in plan, q
    with key_ranges(False):
        assert "points=" not in _explain(orders, "SELECT * FROM o WHERE cust = 3 AND id = 10")


def test_key_range_answers(orders):
    assert orders.execute("SELECT * FROM o WHERE cust = 3 AND id = 10").fetchall() == [(3, 10, 30)]
    assert orders.execute("SELECT * FROM o WHERE cust = 3 AND id = 11").fetchall() == []
    assert orders.execute("SELECT id FROM o WHERE cust = 2 ORDER BY id DESC LIMIT 3 OFFSET 1").fetchall() == \
        [(289,), (282,), (275,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust = 4.5").fetchall() == [(0,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust = 4.0").fetchall() == [(43,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust > 4.5").fetchall() == [(85,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust = 1e12").fetchall() == [(0,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust < 1e12").fetchall() == [(300,)]
    assert orders.execute("SELECT * FROM o LIMIT 2").fetchall() == [(0, 0, 0), (0, 7, 21)]
    got = orders.execute("SELECT id FROM o WHERE cust = 3 AND id = ANY(%s) ORDER BY id", ([10, 17, 11, None],))
    assert got.fetchall() == [(10,), (17,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust = ANY(%s)", ([],)).fetchall() == [(0,)]


def test_update_and_delete_by_key_change_the_same_rows(orders):
    assert "points=[(3, 10)]" in _explain(orders, "UPDATE o SET amount = 0 WHERE cust = 3 AND id = 10")
    assert "points=[(3, 10)]" in _explain(orders, "DELETE FROM o WHERE cust = 3 AND id = 10")
    assert orders.execute("UPDATE o SET amount = -1 WHERE cust = 3 AND id = 10").rowcount == 1
    assert orders.execute("UPDATE o SET amount = -1 WHERE cust = 3 AND id = 11").rowcount == 0
    assert orders.execute("DELETE FROM o WHERE cust = 5 AND id BETWEEN 0 AND 40").rowcount == 6
    orders.execute("FLUSH")
    assert orders.execute("SELECT amount FROM o WHERE cust = 3 AND id = 10").fetchall() == [(-1,)]
    assert orders.execute("SELECT count(*) FROM o WHERE cust = 5").fetchall() == [(37,)]
    with key_ranges(False):
        assert orders.execute("SELECT count(*) FROM o").fetchall() == [(294,)]


# --- below SQL: growing batches, DESC keys, distribution keys ------------------------------------

def _state_rows(store, orders, dist):
    """A table (g INT, id BIGINT, s VARCHAR) with pk (g, id) in ``orders``, ``dist`` its
    distribution key, 200 rows, committed; (TableDesc, epoch)."""
    from hummock.key import new_epoch
    from relational.catalog import TableDesc
    from relational.state_table import StateTable
    from relational.types import DataType as T
    schema = [("g", T.INT), ("id", T.BIGINT), ("s", T.VARCHAR)]
    t = StateTable(store, 7, schema, [0, 1], orders, dist_key_indices=dist or None)
    e1 = new_epoch()
    t.init_epoch(e1)
    for i in range(200):
        t.insert((i % 4, i, f"s{i}"))
    t.commit(new_epoch())
    store.checkpoint(e1)
    return TableDesc(7, "st", tuple(schema), (0, 1), tuple(orders), tuple(dist)), e1


@pytest.fixture
def store(tmp_path, request):
    from table_stores import opener
    s = opener("memory", tmp_path, request)()
    yield s
    s.close()


def _scan(desc):
    from types import SimpleNamespace
    rel = SimpleNamespace(name=desc.name, table_id=desc.table_id, desc=desc, columns=list(desc.columns),
                          pk_indices=list(desc.pk_indices), n_visible=len(desc.columns), kind="mv")
    return P.Scan(rel)


def _both(plan, store, epoch):
    """(rows with access paths, rows without, the batch EXPLAIN text)."""
    from sql.batch.execute import execute
    from sql.plan.explain import explain_plan
    got = execute(plan, store, epoch).to_pylist()
    text = explain_plan(plan, {}, stream=False)
    with key_ranges(False):
        want = execute(plan, store, epoch).to_pylist()
    return got, want, text


def test_batch_iter_grow_gives_the_same_rows_in_growing_batches(store):
    from relational.storage_table import StorageTable
    desc, e1 = _state_rows(store, [OrderType.ASC, OrderType.ASC], [])
    table = StorageTable.from_desc(store, desc)
    grown = list(table.batch_iter(e1, batch_size=600, grow=True))
    plain = list(table.batch_iter(e1, batch_size=600))
    assert [b.num_rows for b in grown] == [64, 136] and [b.num_rows for b in plain] == [200]
    assert [r for b in grown for r in b.to_pylist()] == [r for b in plain for r in b.to_pylist()]
    assert [b.num_rows for b in table.batch_iter(e1, batch_size=100, grow=True, columns=[])] == [64, 100, 36]


@pytest.mark.parametrize("first", [OrderType.ASC, OrderType.DESC, OrderType(True, False)])
def test_descending_keys_swap_bounds_and_scan_direction(store, first):
    desc, e1 = _state_rows(store, [first, OrderType.ASC], [])
    scan = _scan(desc)
    g, i = Col(0, T.INT), Col(1, T.BIGINT)
    cond = And(Cmp(">=", g, Lit(1, T.INT)), Cmp("<", g, Lit(3, T.INT)))
    got, want, text = _both(P.Filter(scan, cond), store, e1)
    assert got == want and len(got) == 100 and "ranges=[([1, 3))]" in text
    for d, nf in ((False, False), (True, True), (False, True)):
        top = P.TopN(P.Filter(scan, Cmp(">", i, Lit(150, T.BIGINT))), [(0, d, nf)], 3, 1)
        got, want, text = _both(top, store, e1)
        assert got == want and len(got) == 3, (d, nf)
        same = OrderType(d, nf) == first
        inverse = OrderType(d, nf) == OrderType(not first.descending, not first.nulls_first)
        assert ("early_stop=4" in text) == (same or inverse), (d, nf, text)
        assert ("reverse" in text) == inverse, (d, nf, text)


def test_equality_on_the_distribution_key_reads_only_its_vnode(store):
    desc, e1 = _state_rows(store, [OrderType.ASC, OrderType.ASC], [1])   # distributed by id, pk (g, id)
    scan = _scan(desc)
    got, want, text = _both(P.Filter(scan, Cmp("=", Col(1, T.BIGINT), Lit(57, T.BIGINT))), store, e1)
    assert got == want == [{"c0": 1, "c1": 57, "c2": "s57"}]
    from relational.vnode import compute_vnode
    assert f"vnode={compute_vnode([57], [T.BIGINT])}" in text


def test_scans_read_only_the_columns_their_consumers_use(orders):
    """Column pruning (``_prune``): through joins, aggregates, sorts and top-Ns each Scan reads
    the columns used above it (and its stream key); the answers equal full-width scans'."""
    from sql.parse import parse_script
    from sql.plan.key_range import plan_batch
    from sql.statements import bind_select

    orders.execute("CREATE TABLE c (cust INT PRIMARY KEY, name VARCHAR, region INT, note VARCHAR)")
    orders.executemany("INSERT INTO c VALUES (%s, %s, %s, %s)", [(i, f"n{i}", i % 3, "x" * i) for i in range(7)])
    orders.execute("FLUSH")
    queries = {
        "SELECT c.region, count(*), sum(o.amount) FROM o JOIN c ON o.cust = c.cust GROUP BY c.region":
            {"o": None, "c": [0, 2]},   # o: its key and amount are all its columns
        "SELECT name FROM c WHERE cust IN (SELECT cust FROM o WHERE amount > 600)": {"o": None, "c": [0, 1]},
        "SELECT o.id, c.note FROM o LEFT JOIN c ON o.cust = c.cust AND c.region = 1 ORDER BY o.id DESC LIMIT 3":
            {"o": [0, 1], "c": [0, 2, 3]},
        "SELECT region, max(name) FROM c GROUP BY region ORDER BY 2": {"c": [1, 2]},
    }
    for q, want in queries.items():
        [stmt] = parse_script(q)
        plan, _ = bind_select(orders.db, stmt.ast, ())
        scans = [n for n in P.walk(plan_batch(plan)) if isinstance(n, P.Scan)]
        assert {s.relation.name: getattr(s, "columns", None) for s in scans} == want, q
        got = orders.execute(q).fetchall()
        with key_ranges(False):
            assert got == orders.execute(q).fetchall() or sorted(got) == sorted(orders.execute(q).fetchall()), q
