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
