"""A ``sum(double precision)`` / ``sum(real)`` / ``avg(double precision)`` whose finite values'
sum overflows is "value out of range: overflow" as in PostgreSQL (``float8_accum``/``float4pl``),
not Infinity (issue 25): an error in a batch SELECT, that group's NULL (a counted data error) in
a materialized view; an infinite input is no overflow.
"""

import pytest

import sql
from sql.errors import ExecutionError


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


def test_a_float_sum_that_overflows_is_an_error_in_a_batch_and_a_counted_null_in_an_mv(conn):
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, d DOUBLE PRECISION, r REAL)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT g, sum(d) AS sd, avg(d) AS ad, sum(r) AS sr, "
                 "count(*) AS n FROM t GROUP BY g")
    conn.execute("INSERT INTO t VALUES (1, 1, 1e308, 3e38), (2, 1, 1e308, 3e38), (3, 2, 5, 1), "
                 "(4, 3, 'Infinity', 'Infinity'), (5, 3, 1e308, 1)")
    for query in ("SELECT sum(d) FROM t WHERE g = 1", "SELECT g, avg(d) FROM t GROUP BY g",
                  "SELECT sum(r) FROM t WHERE g = 1", "SELECT id, sum(d) OVER () FROM t WHERE g = 1"):
        with pytest.raises(ExecutionError, match="value out of range: overflow"):
            conn.execute(query).fetchall()
    # an infinite input is no overflow (Postgres: Infinity); avg(real) adds in double precision
    assert conn.execute("SELECT g, sum(d), sum(r) FROM t WHERE g <> 1 GROUP BY g ORDER BY g").fetchall() == \
        [(2, 5.0, 1.0), (3, float("inf"), float("inf"))]
    assert conn.execute("SELECT avg(r) FROM t WHERE g = 1").fetchall() == [(pytest.approx(3e38, rel=1e-6),)]
    assert conn.execute("SELECT * FROM m ORDER BY g").fetchall() == \
        [(1, None, None, None, 2), (2, 5.0, 5.0, 1.0, 1), (3, float("inf"), float("inf"), float("inf"), 2)]
    assert conn.data_errors()["m"] == {"value out of range: overflow": 3}
    conn.execute("INSERT INTO t VALUES (6, 2, 1.5, 2)")   # other groups go on
    assert conn.execute("SELECT sd, sr FROM m WHERE g = 2").fetchall() == [(6.5, 3.0)]
