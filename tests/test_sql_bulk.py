"""``Connection.insert_arrow`` (sql/bulk.py): the bulk INSERT of Arrow data gives the same table
and MVs as INSERT VALUES of the same rows, casts safely, and refuses what INSERT refuses before
writing anything."""

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import sql
from sql.errors import BindError, CatalogError, ExecutionError


def _db():
    conn = sql.connect(":memory:", barrier_interval_ms=0)
    conn.execute("CREATE TABLE t (k INT, v BIGINT, s VARCHAR) APPEND ONLY")
    conn.execute("CREATE TABLE p (id BIGINT PRIMARY KEY, v INT)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, count(*) AS n, sum(v) AS total FROM t GROUP BY k")
    return conn


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-1000, 1000) | st.none(), st.text(max_size=3) | st.none()),
                max_size=60), st.integers(1, 7))
def test_insert_arrow_matches_executemany(rows, chunk_size):
    bulk, plain = _db(), _db()
    try:
        data = pa.table({"s": [r[2] for r in rows], "k": pa.array([r[0] for r in rows], pa.int8()),
                         "v": [r[1] for r in rows]})
        assert bulk.insert_arrow("t", data, chunk_size=chunk_size) == len(rows)
        if rows:
            plain.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)
        for conn in (bulk, plain):
            conn.execute("FLUSH")
        for q in ("SELECT k, v, s FROM t ORDER BY k, v, s", "SELECT * FROM m ORDER BY k"):
            assert bulk.execute(q).fetchall() == plain.execute(q).fetchall()
    finally:
        bulk.close()
        plain.close()


def test_insert_arrow_overwrites_by_primary_key_and_fills_missing_columns_with_null():
    with _db() as conn:
        conn.insert_arrow("p", pa.record_batch({"id": [1, 2], "v": [10, 20]}))
        conn.insert_arrow("P", pa.table({"id": [2, 3]}))
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM p ORDER BY id").fetchall() == [(1, 10), (2, None), (3, None)]


def test_insert_arrow_refuses_bad_input_and_writes_nothing():
    with _db() as conn:
        with pytest.raises(CatalogError):
            conn.insert_arrow("nope", pa.table({"k": [1]}))
        with pytest.raises(BindError, match="materialized view"):
            conn.insert_arrow("m", pa.table({"k": [1]}))
        with pytest.raises(BindError, match="do not match"):
            conn.insert_arrow("t", pa.table({"k": [1], "zz": [2]}))
        with pytest.raises(BindError, match="does not fit"):
            conn.insert_arrow("p", pa.table({"id": [1], "v": [2**40]}))
        with pytest.raises(ExecutionError, match='null value in column "id" of relation "p" violates not-null constraint'):
            conn.insert_arrow("p", pa.table({"id": [1, None], "v": [1, 2]}))
        with pytest.raises(BindError):
            conn.insert_arrow("t", [(1, 2, "x")])
        conn.execute("FLUSH")
        assert conn.execute("SELECT count(*) FROM p").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
