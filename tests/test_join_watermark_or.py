"""An interval join whose condition has an OR is not cleaned by the OR's comparisons: ``Or``
is a subclass of ``And`` in stream/expr_ops.py, and stream/executors/join_watermark.py split
it into conjuncts, so ``a.ts >= b.ts OR a.v < 0`` was read as the bound ``b.ts <= a.ts``: b's
rows below a's watermark were deleted from the state and a later a row matching them through
the other disjunct lost its joined rows."""

import datetime

from test_sql_watermark import _close_connections, _connect  # noqa: F401  (the autouse fixture closes them)


TABLE = ("CREATE TABLE {name} (k INT, ts TIMESTAMP, v INT, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') "
         "APPEND ONLY")
Q = "SELECT a.v AS av, b.v AS bv FROM a JOIN b ON a.k = b.k AND (a.ts <= b.ts OR a.v < 0)"


def _ts(seconds: int) -> datetime.datetime:
    return datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=seconds)


def _insert(c, table, rows):
    c.execute(f"INSERT INTO {table} VALUES " + ", ".join(f"({k}, '{_ts(s)}', {v})" for k, s, v in rows))


def test_an_or_in_the_condition_is_no_bound():
    c = _connect(":memory:", implicit_flush=True)
    c.execute(TABLE.format(name="a"))
    c.execute(TABLE.format(name="b"))
    c.execute(f"CREATE MATERIALIZED VIEW m AS {Q}")
    _insert(c, "b", [(1, 0, 100)])
    for t in range(0, 60, 6):   # a's and b's watermarks move on
        _insert(c, "a", [(2, t, t)])
        _insert(c, "b", [(2, t, t)])
    _insert(c, "a", [(1, 60, -1)])   # matches b's row at 0 s through a.v < 0
    got = sorted(c.execute("SELECT * FROM m").fetchall())
    assert (-1, 100) in got
    assert got == sorted(c.execute(Q).fetchall())
