"""Vectorized batch operators (sql/batch/vector.py) against the row path they replace: on random
tables with NULLs, NaN, infinities, -0.0, duplicates and empty inputs, random GROUP BY
aggregates (with FILTER and DISTINCT), joins of every kind (with extra conditions), ORDER BY and
top-N (OFFSET, WITH TIES, row-number filters) give the same rows in the same order, and the same
errors, with ``VECTORIZED`` on and off."""

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from sql.batch.execute import VECTORIZED

COLS = {"t1": [("k", "INT"), ("g", "INT"), ("b", "BIGINT"), ("s", "VARCHAR"), ("x", "DOUBLE"), ("f", "BOOLEAN"),
               ("d", "DECIMAL"), ("h", "SMALLINT")],
        "t2": [("k", "INT"), ("g", "BIGINT"), ("s", "VARCHAR"), ("y", "REAL")]}


@contextlib.contextmanager
def vectorized(on: bool):
    token = VECTORIZED.set(on)
    try:
        yield
    finally:
        VECTORIZED.reset(token)


def value(kind):
    base = {"INT": st.integers(-3, 3), "BIGINT": st.sampled_from([0, 1, -1, 2, 9223372036854775807,
                                                                     -9223372036854775808]),
            "VARCHAR": st.sampled_from(["", "a", "b", "ab", "é"]),
            "DOUBLE": st.sampled_from([0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), float("-inf"), 1e308]),
            "REAL": st.sampled_from([0.0, 1.5, -2.5, float("nan")]), "BOOLEAN": st.booleans(),
            "DECIMAL": st.sampled_from(["1.0", "1.00", "-2.5", "0"]), "SMALLINT": st.integers(-32768, 32767)}[kind]
    return st.one_of(st.none(), base)


AGGS = ["count(*)", "count({c})", "count(DISTINCT {c})", "sum({n})", "avg({n})", "min({c})", "max({c})",
        "bool_and(f)", "bool_or(f)", "count(*) FILTER (WHERE f)", "sum({n}) FILTER (WHERE {c} IS NOT NULL)"]


@st.composite
def agg_query(draw):
    group = draw(st.lists(st.sampled_from(["g", "s", "f", "k", "x", "d"]), max_size=2, unique=True))
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        a = draw(st.sampled_from(AGGS))
        calls.append(a.format(c=draw(st.sampled_from(["g", "b", "s", "x", "d", "h"])),
                              n=draw(st.sampled_from(["g", "b", "x", "h", "d"]))))
    sel = ", ".join(group + calls)
    where = draw(st.sampled_from(["", " WHERE g > 0", " WHERE k < 0"]))
    return f"SELECT {sel} FROM t1{where}" + (f" GROUP BY {', '.join(group)}" if group else "")


@st.composite
def join_query(draw):
    kind = draw(st.sampled_from(["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]))
    on = draw(st.sampled_from(["t1.g = t2.k", "t1.b = t2.g", "t1.s = t2.s", "t1.g = t2.k AND t1.s = t2.s",
                               "t1.x = t2.y"]))
    extra = draw(st.sampled_from(["", " AND t1.k < t2.k", " AND t2.y > 0"]))
    form = draw(st.sampled_from(["plain", "semi", "anti"]))
    if form == "semi":
        return f"SELECT * FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE {on}{extra})"
    if form == "anti":
        return f"SELECT * FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE {on}{extra})"
    return f"SELECT t1.k, t1.g, t2.k, t2.s FROM t1 {kind} t2 ON {on}{extra}"


@st.composite
def order_query(draw):
    keys = draw(st.lists(st.sampled_from(["g", "s", "x", "f", "b", "k"]), min_size=1, max_size=3, unique=True))
    order = ", ".join(k + draw(st.sampled_from(["", " DESC", " NULLS FIRST", " DESC NULLS LAST"])) for k in keys)
    tail = draw(st.sampled_from(["", " LIMIT 3", " LIMIT 2 OFFSET 1", " FETCH FIRST 2 ROWS WITH TIES", " OFFSET 2"]))
    q = f"SELECT k, g, s, x FROM t1 ORDER BY {order}{tail}"
    if draw(st.booleans()):
        q = (f"SELECT * FROM (SELECT k, g, ROW_NUMBER() OVER (ORDER BY {order}) AS rn FROM t1) "
             f"WHERE rn <= {draw(st.integers(1, 4))}")
    return q


def _answer(conn, q):
    try:
        return conn.execute(q).fetchall(), None
    except sql.SqlError as exc:
        return None, (type(exc).__name__, str(exc).split("\n")[0])


def _same(a, b) -> bool:
    return repr(a) == repr(b)   # NaN equals NaN, -0.0 differs from 0.0


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], deadline=None)
@given(data=st.data())
def test_vectorized_operators_answer_like_the_row_path(data):
    with sql.connect(":memory:") as conn:
        for name, cols in COLS.items():
            conn.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols)}, PRIMARY KEY (k))")
            rows = data.draw(st.lists(st.tuples(*[st.integers(-20, 20) if c == "k" else value(t) for c, t in cols]),
                                      max_size=25, unique_by=lambda r: r[0]))
            if rows:
                conn.executemany(f"INSERT INTO {name} VALUES ({', '.join(['%s'] * len(cols))})", rows)
        conn.execute("FLUSH")
        for _ in range(8):
            q = data.draw(st.one_of(agg_query(), join_query(), order_query()))
            got = _answer(conn, q)
            with vectorized(False):
                want = _answer(conn, q)
            if "ORDER BY" not in q or "ROW_NUMBER" in q:
                if got[0] is not None and want[0] is not None:
                    got, want = (sorted(got[0], key=repr), got[1]), (sorted(want[0], key=repr), want[1])
            assert _same(got, want), q


@pytest.fixture
def db():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, g INT, b BIGINT, x DOUBLE)")
        conn.executemany("INSERT INTO t VALUES (%s, %s, %s, %s)",
                         [(i, i % 3, 9223372036854775807, float(i)) for i in range(6)] + [(6, None, None, None)])
        conn.execute("FLUSH")
        yield conn


def test_aggregates_keep_postgres_types_and_overflow(db):
    with vectorized(True):
        rows = db.execute("SELECT g, count(*), sum(b), avg(g), sum(x) FROM t GROUP BY g ORDER BY g").fetchall()
    import decimal
    big = decimal.Decimal(9223372036854775807)
    assert rows == [(0, 2, 2 * big, decimal.Decimal(0), 3.0), (1, 2, 2 * big, decimal.Decimal(1), 5.0),
                    (2, 2, 2 * big, decimal.Decimal(2), 7.0), (None, 1, None, None, None)]
    assert db.execute("SELECT sum(g) FROM t WHERE k > 100").fetchall() == [(None,)]
    assert db.execute("SELECT count(*) FROM t WHERE k > 100").fetchall() == [(0,)]


def test_null_keys_never_join(db):
    q = "SELECT a.k, b.k FROM t a JOIN t b ON a.g = b.g WHERE a.k = 6 OR b.k = 6"
    assert db.execute(q).fetchall() == []
    q = "SELECT a.k, b.k FROM t a LEFT JOIN t b ON a.g = b.g AND b.k > a.k ORDER BY 1, 2"
    assert db.execute(q).fetchall()[-3:] == [(4, None), (5, None), (6, None)]


def test_count_over_rows_without_columns_counts_them():
    """A projection to no column (count(*) over a FROM-less select) kept no rows: count was 0."""
    with sql.connect(":memory:") as conn:
        for on in (True, False):
            with vectorized(on):
                assert conn.execute("SELECT count(*) FROM (SELECT 1) x").fetchall() == [(1,)]
                assert conn.execute("SELECT count(*) FROM (SELECT 1 WHERE false) x").fetchall() == [(0,)]
                assert conn.execute("SELECT count(*), sum(1) FROM (SELECT 1 UNION ALL SELECT 2) x").fetchall() == \
                    [(2, 2)]


def test_index_in_over_row_ranges_equals_one_call(monkeypatch):
    """A foreign-key join's lookup over ranges side by side gives ``index_in``'s answer (NULLs,
    misses, range edges), in order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from sql.batch import vector

    monkeypatch.setattr(vector, "PARALLEL_ROWS", 1000)
    monkeypatch.setattr(vector, "usable_cores", lambda: 3)
    rng = np.random.default_rng(1)
    value_set = pa.array(np.arange(0, 400))
    for n in (0, 1, 1999, 2000, 2001, 3001, 20000):
        keys = pa.array(rng.integers(-5, 500, n), mask=rng.random(n) < 0.1) if n else pa.array([], pa.int64())
        assert vector._index_in(keys, value_set).equals(pc.index_in(keys, value_set=value_set)), n
