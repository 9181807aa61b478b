"""``executemany`` of an INSERT (sql/insert_batch.py's columnar fast path) against the model of
running the same INSERT once per parameter set: the same rows land, and a parameter set the
fast path cannot take as is (a string for an INT, an out-of-range int, a NULL key, a Decimal)
gives the same result or the same error class as the row-by-row statements."""

import decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from sql.errors import SqlError

SCHEMAS = {
    "pk": "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR, x DOUBLE, f BOOLEAN, b BIGINT, sm SMALLINT)",
    "nopk": "CREATE TABLE t (id INT, s VARCHAR, x DOUBLE, f BOOLEAN, b BIGINT, sm SMALLINT)",
}
MV = "CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n, sum(b) AS sb, count(s) AS cs FROM t"

values = {
    "id": st.one_of(st.integers(-5, 60), st.just(None), st.just("7"), st.just(2 ** 31)),
    "s": st.one_of(st.none(), st.text("ab\u00e9", max_size=3), st.just(5)),
    "x": st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False), st.integers(-9, 9),
                   st.just(decimal.Decimal("1.5"))),
    "f": st.one_of(st.none(), st.booleans(), st.just("true")),
    "b": st.one_of(st.none(), st.integers(-(2 ** 63), 2 ** 63 - 1), st.just(2 ** 63), st.just(1.0)),
    "sm": st.one_of(st.none(), st.integers(-40000, 40000)),
}


@st.composite
def statement_and_params(draw):
    cols = draw(st.lists(st.sampled_from(list(values)), min_size=1, max_size=6, unique=True))
    if "id" not in cols and draw(st.booleans()):
        cols.insert(0, "id")
    tuples = draw(st.integers(1, 2))
    width = len(cols)
    placeholders = ", ".join("(" + ", ".join(f"${t * width + i + 1}" for i in range(width)) + ")"
                             for t in range(tuples))
    stmt = f"INSERT INTO t ({', '.join(cols)}) VALUES {placeholders}"
    row = st.tuples(*[values[c] for c in cols * tuples])
    return stmt, draw(st.lists(row, min_size=1, max_size=12))


def run(schema, stmt, seq, many: bool):
    with sql.connect(":memory:") as conn:
        conn.execute(SCHEMAS[schema])
        conn.execute(MV)
        try:
            if many:
                conn.executemany(stmt, seq)
            else:
                for params in seq:
                    conn.execute(stmt, params)
            error = None
        except SqlError as exc:
            error = type(exc)
        conn.execute("FLUSH")
        rows = sorted(conn.execute("SELECT id, s, x, f, b, sm FROM t").fetchall(), key=repr)
        return error, rows, conn.execute("SELECT * FROM m").fetchall()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SCHEMAS)), statement_and_params())
def test_executemany_equals_one_statement_per_parameter_set(schema, case):
    stmt, seq = case
    many = run(schema, stmt, seq, many=True)
    one_by_one = run(schema, stmt, seq, many=False)
    if many[0] is None and one_by_one[0] is None:
        assert many == one_by_one
    else:
        # executemany is one statement: a bad set fails it whole (nothing lands), while the
        # model's earlier statements have landed; the error class is the same
        assert many[0] == one_by_one[0] and many[0] is not None
        assert many[1] == [] and many[2] == [(0, None, 0)]


def test_fast_path_rows_and_mv():
    with sql.connect(":memory:") as conn:
        conn.execute(SCHEMAS["pk"])
        conn.execute(MV)
        cur = conn.executemany("INSERT INTO t (id, b, s) VALUES (%s, %s, %s)",
                               [(i, i * 10, None if i % 2 else str(i)) for i in range(10_000)])
        assert cur.rowcount == 10_000
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM m").fetchall() == [(10_000, sum(range(0, 100_000, 10)), 5_000)]
        assert conn.execute("SELECT id, s, x, b FROM t WHERE id = 4").fetchall() == [(4, "4", None, 40)]


@pytest.mark.parametrize("stmt, bad, error", [
    ("INSERT INTO t (b, id) VALUES (%s, %s)", (3, None), 'null value in column "id" of relation "t" violates not-null'),
    ("INSERT INTO t (id, b) VALUES (%s, %s)", (2 ** 31, 3), "out of range|cannot store"),
    ("INSERT INTO t VALUES (%s, %s)", ("x", 3), "invalid input|cannot store"),
])
def test_fast_path_errors_name_the_problem(stmt, bad, error):
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, b BIGINT)")
        with pytest.raises(SqlError, match=error):
            conn.executemany(stmt, [(1, 1), (2, 2), bad])
        conn.execute("FLUSH")
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
