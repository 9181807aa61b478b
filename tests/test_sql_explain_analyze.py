"""EXPLAIN ANALYZE (issue 27 item 6): the query runs and the plan as it ran shows each node's
rows and time. The rows are checked against the same query's parts run as SELECTs; a node's
time includes its inputs' (so it is at least theirs); the parse forms (``EXPLAIN ANALYZE``,
``EXPLAIN (ANALYZE[, ...])``, ``ANALYZE false``), a chain streamed into an early-stopping
parent, and the refusal of statements that write.
"""

from __future__ import annotations

import re

import pytest

import sql
from sql.errors import UnsupportedError

FIGURES = re.compile(r"\(actual rows=(\d+) time=([0-9.]+) ms\)$")


@pytest.fixture
def conn(tmp_path):
    c = sql.connect(str(tmp_path / "db"), barrier_interval_ms=0)
    c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g INT, v DOUBLE)")
    c.execute("INSERT INTO t VALUES " + ", ".join(f"({i}, {i % 7}, {i * 0.5})" for i in range(500)))
    c.execute("FLUSH")
    yield c
    c.close()


def _plan(conn, query):
    return [row[0] for row in conn.execute(query).fetchall()]


def _figures(line):
    m = FIGURES.search(line)
    return (int(m.group(1)), float(m.group(2))) if m else None


def test_rows_and_times_per_node(conn):
    lines = _plan(conn, "EXPLAIN ANALYZE SELECT g, count(*) AS n FROM t WHERE v > 10 GROUP BY g")
    nodes = [ln for ln in lines if ln.lstrip().startswith("Batch")]
    figures = [_figures(ln) for ln in nodes]
    assert all(f is not None for f in figures), lines
    by_kind = {ln.strip().split("(")[0]: f for ln, f in zip(nodes, figures)}
    assert by_kind["BatchScan"][0] == 500
    assert by_kind["BatchFilter"][0] == conn.execute("SELECT count(*) FROM t WHERE v > 10").fetchall()[0][0]
    assert by_kind["BatchAgg"][0] == 7
    assert figures[0][0] == 7 and lines[-2] == "Rows: 7"
    times = [f[1] for f in figures]
    assert times == sorted(times, reverse=True)   # each node's time holds its input's
    assert re.fullmatch(r"Execution Time: [0-9.]+ ms", lines[-1])


def test_parse_forms(conn):
    point = "SELECT * FROM t WHERE id = 5"
    for text in (f"EXPLAIN ANALYZE {point}", f"EXPLAIN ANALYSE {point}", f"EXPLAIN (ANALYZE) {point}",
                 f"EXPLAIN (ANALYZE true, VERBOSE) {point}", f"explain (verbose, analyze on) {point}"):
        lines = _plan(conn, text)
        assert "points=[(5)]" in lines[-3] and _figures(lines[-3])[0] == 1
        assert lines[-2] == "Rows: 1", text
    for text in (f"EXPLAIN {point}", f"EXPLAIN (ANALYZE false) {point}", f"EXPLAIN (VERBOSE) {point}"):
        lines = _plan(conn, text)
        assert not any("actual rows" in ln or ln.startswith("Rows:") for ln in lines), text


def test_streamed_chain_under_an_early_stop(conn):
    lines = _plan(conn, "EXPLAIN ANALYZE SELECT * FROM t LIMIT 3")
    assert "early_stop=3" in lines[0] and _figures(lines[0])[0] == 3
    assert all(ln.endswith("(streamed into its parent)") for ln in lines[1:-2])


def test_statements_that_write_are_refused(conn):
    for text in ("EXPLAIN ANALYZE DELETE FROM t", "EXPLAIN ANALYZE INSERT INTO t VALUES (1000, 1, 1.0)",
                 "EXPLAIN ANALYZE CREATE MATERIALIZED VIEW m AS SELECT * FROM t"):
        with pytest.raises(UnsupportedError, match="EXPLAIN ANALYZE supports SELECT only"):
            conn.execute(text)
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(500,)]
