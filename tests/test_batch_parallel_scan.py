"""Whole-table batch scans read in parts side by side (``StorageTable.read_split``, one thread
per part) and a Filter applied to each part's batches where they are decoded
(``_Exec._filtered_scan``): the answers, their key order, the errors and EXPLAIN ANALYZE's
figures are those of reading and filtering the whole table once. Parts are forced here (every
block a cut candidate, three workers) in both the native and the pure-Python run."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import sql
import sql.batch.scan as batch_scan
from relational import storage_table
from sql.errors import SqlError

ROWS = 20_000


@pytest.fixture
def conn(tmp_path):
    c = sql.connect(str(tmp_path / "db"), barrier_interval_ms=0)
    c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, x INT, s VARCHAR, d DOUBLE)")
    ids = np.arange(ROWS, dtype=np.int64)[::-1].copy()   # inserted out of key order
    c.insert_arrow("t", pa.table({"id": ids, "x": (ids * 7919 % 1000).astype(np.int32),
                                  "s": pa.array([None if i % 11 == 0 else f"{'ab'[i % 2]}{i}" for i in ids]),
                                  "d": (ids % 97) / 97.0}))
    c.execute("FLUSH")
    c.db.store.compact_all()
    yield c
    c.close()


def model():
    rows = []
    for i in range(ROWS):
        rows.append((i, i * 7919 % 1000, None if i % 11 == 0 else f"{'ab'[i % 2]}{i}", (i % 97) / 97.0))
    return rows


@pytest.fixture
def parts(monkeypatch):
    """Force the parallel read: every block may be a cut, three parts, in both runs."""
    monkeypatch.setattr(storage_table, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(batch_scan, "DECODES_WITHOUT_GIL", True)
    monkeypatch.setattr(batch_scan, "usable_cores", lambda: 3)


def test_the_table_is_read_in_parts(conn, parts):
    store = conn.db.store
    rel = conn.db.catalog.get("t")
    with store.snapshot(store.max_committed_epoch) as snap:
        assert len(snap.split_keys(rel.desc.table_id, 3, min_bytes=1)) == 2


def test_filtered_and_plain_scans_in_parts_equal_the_model(conn, parts):
    rows = model()
    got = conn.execute("SELECT id, s FROM t WHERE x % 7 = 3 AND d > 0.5").fetchall()
    assert got == [(i, s) for i, x, s, d in rows if x % 7 == 3 and d > 0.5]   # key order, no ORDER BY
    assert conn.execute("SELECT id FROM t WHERE s LIKE 'a%'").fetchall() == \
        [(i,) for i, _, s, _ in rows if s is not None and s.startswith("a")]   # NULL s: dropped
    assert conn.execute("SELECT count(*), sum(x) FROM t WHERE d < 0.25").fetchall() == \
        [(sum(1 for r in rows if r[3] < 0.25), sum(r[1] for r in rows if r[3] < 0.25))]
    assert conn.execute("SELECT id FROM t WHERE x > 2000").fetchall() == []
    assert conn.execute("SELECT id, x, s, d FROM t").fetchall() == rows


def test_an_error_in_the_filter_is_the_whole_tables(conn, parts, monkeypatch):
    query = "SELECT count(*) FROM t WHERE 100 / (x - 500) > 0"
    with pytest.raises(SqlError) as in_parts:
        conn.execute(query).fetchall()
    monkeypatch.setattr(batch_scan, "usable_cores", lambda: 1)
    with pytest.raises(SqlError) as whole:
        conn.execute(query).fetchall()
    assert type(in_parts.value) is type(whole.value) and str(in_parts.value) == str(whole.value)
    assert "division by zero" in str(whole.value)


def test_explain_analyze_counts_the_rows_the_scan_read(conn, parts):
    text = "\n".join(r[0] for r in conn.execute("EXPLAIN ANALYZE SELECT id FROM t WHERE x < 10").fetchall())
    expected = sum(1 for r in model() if r[1] < 10)
    assert "BatchFilter(" in text and f"actual rows={expected} " in text
    assert "BatchScan(t, " in text and f"actual rows={ROWS} " in text


def test_a_group_by_in_two_phases_equals_the_model(conn, parts, monkeypatch):
    """Row ranges hashed side by side, then their partial results merged (sql/batch/vector.py
    ``_group_by``): the groups and every call's result are those of one pass; NULL keys form
    one group; a DISTINCT count (no merge) and a many-group input take one pass."""
    from sql.batch import vector
    monkeypatch.setattr(vector, "PARALLEL_ROWS", 3000)
    monkeypatch.setattr(vector, "usable_cores", lambda: 3)
    two_phase = []   # one entry per GROUP BY that hashed its row ranges side by side
    real_pool = vector.pool
    monkeypatch.setattr(vector, "pool", lambda: two_phase.append(1) or real_pool())
    rows = model()
    got = conn.execute("SELECT x % 10 AS k, count(*), count(s), sum(x), min(s), max(x), avg(x), bool_and(d > 0.1) "
                       "FROM t GROUP BY 1 ORDER BY 1").fetchall()
    expected = []
    for k in range(10):
        g = [r for r in rows if r[1] % 10 == k]
        ss = [r[2] for r in g if r[2] is not None]
        expected.append((k, len(g), len(ss), sum(r[1] for r in g), min(ss), max(r[1] for r in g),
                         sum(r[1] for r in g) / len(g), all(r[3] > 0.1 for r in g)))
    assert len(got) == 10 and len(two_phase) == 1
    for a, b in zip(got, expected):
        assert a[:6] == b[:6] and abs(float(a[6]) - b[6]) < 1e-9 and a[7] == b[7]
    nulls = conn.execute("SELECT s IS NULL, count(*) FROM t GROUP BY s IS NULL ORDER BY 1").fetchall()
    assert nulls == [(False, sum(1 for r in rows if r[2] is not None)), (True, sum(1 for r in rows if r[2] is None))]
    by_null_key = conn.execute("SELECT CASE WHEN x < 100 THEN NULL ELSE x % 3 END AS k, count(*) FROM t "
                               "GROUP BY 1 ORDER BY 1 NULLS FIRST").fetchall()
    assert by_null_key == [(None, sum(1 for r in rows if r[1] < 100))] + [
        (k, sum(1 for r in rows if r[1] >= 100 and r[1] % 3 == k)) for k in range(3)]
    assert len(two_phase) == 3
    assert conn.execute("SELECT count(DISTINCT x) FROM t GROUP BY x % 2 ORDER BY 1").fetchall() == [(500,), (500,)]
    assert conn.execute("SELECT count(*) FROM (SELECT id, count(*) FROM t GROUP BY id) q").fetchall() == [(ROWS,)]
    assert len(two_phase) == 3   # a DISTINCT count and 20,000 groups: one pass each
