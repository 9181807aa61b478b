"""Push sources (sql/source.py, docs/sql.md "Sources"): ``CREATE SOURCE s (...) WITH (connector =
'push')`` takes INSERT, COPY FROM, ``executemany`` and ``insert_arrow``, feeds the MVs over it and
stores none of its rows.

The oracle is the same statements against an ``APPEND ONLY`` table: every MV over the source must
equal the same MV over the table, after every FLUSH and across a reopen.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import sql
from sql.errors import BindError, UnsupportedError

COLUMNS = "(k BIGINT, v BIGINT, s VARCHAR)"
PUSH = f"CREATE SOURCE src {COLUMNS} WITH (connector = 'push')"
TABLE = f"CREATE TABLE tab {COLUMNS} APPEND ONLY"
QUERIES = {
    "project": "SELECT k, v * 2 AS w, s FROM {r}",
    "filter": "SELECT k, v FROM {r} WHERE v % 3 = 0",
    "agg": "SELECT k, count(*) AS n, sum(v) AS total, min(v) AS lo, max(v) AS hi FROM {r} GROUP BY k",
    "top": "SELECT k, v FROM {r} ORDER BY v DESC, k LIMIT 3",
    "count": "SELECT count(*) AS n, count(s) AS ns FROM {r}",
    "join": "SELECT {r}.k, {r}.v, dim.name FROM {r} JOIN dim ON {r}.k = dim.k",
}


def _rows(c, q):
    return sorted(c.execute(q).fetchall(), key=repr)


def _setup(c, queries=QUERIES):
    c.execute(PUSH)
    c.execute(TABLE)
    c.execute("CREATE TABLE dim (k BIGINT PRIMARY KEY, name VARCHAR)")
    c.execute("INSERT INTO dim VALUES (0, 'zero'), (1, 'one'), (2, 'two'), (5, 'five')")
    for name, q in queries.items():
        c.execute(f"CREATE MATERIALIZED VIEW {name}_src AS {q.format(r='src')}")
        c.execute(f"CREATE MATERIALIZED VIEW {name}_tab AS {q.format(r='tab')}")


def _check_same(c, queries=QUERIES):
    for name in queries:
        assert _rows(c, f"SELECT * FROM {name}_src") == _rows(c, f"SELECT * FROM {name}_tab"), name


def _push(c, relation, how, rows):
    if how == "values":
        values = ", ".join("(%s, %s, %s)" for _ in rows)
        c.execute(f"INSERT INTO {relation} VALUES {values}", [x for row in rows for x in row])
    elif how == "executemany":
        c.executemany(f"INSERT INTO {relation} VALUES (%s, %s, %s)", rows)
    else:
        k, v, s = zip(*rows)
        c.insert_arrow(relation, pa.table({"k": pa.array(k, pa.int64()), "v": pa.array(v, pa.int64()),
                                           "s": pa.array(s, pa.string())}))


row = st.tuples(st.integers(0, 6), st.integers(-1000, 1000), st.one_of(st.none(), st.text("abc", max_size=3)))
batches = st.lists(st.tuples(st.sampled_from(["values", "executemany", "arrow"]),
                             st.lists(row, min_size=1, max_size=12)), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(batches=batches)
def test_mvs_over_a_push_source_equal_the_same_mvs_over_an_append_only_table(batches):
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        _setup(c)
        for how, rows in batches:
            _push(c, "src", how, rows)
            _push(c, "tab", how, rows)
            c.execute("FLUSH")
            _check_same(c)


def test_the_source_stores_no_rows_and_the_mvs_survive_a_reopen(tmp_path):
    path = str(tmp_path / "db")
    rows = [(i % 7, i, f"s{i}") for i in range(500)]
    with sql.connect(path, barrier_interval_ms=0) as c:
        _setup(c)
        _push(c, "src", "arrow", rows)
        _push(c, "tab", "arrow", rows)
        c.execute("FLUSH")
        _check_same(c)
        src, tab = c.db.catalog.get("src"), c.db.catalog.get("tab")
        store, epoch = c.db.store, c.db.store.max_committed_epoch
        assert list(store.iter(src.desc.table_id, epoch)) == []   # nothing of the source is stored
        assert len(list(store.iter(tab.desc.table_id, epoch))) == 500
    with sql.connect(path, barrier_interval_ms=0) as c:
        _check_same(c)
        # row ids made after the reopen never repeat earlier ones: the projection keeps every row
        _push(c, "src", "values", rows[:50])
        _push(c, "tab", "values", rows[:50])
        c.execute("FLUSH")
        _check_same(c)
        assert _rows(c, "SELECT n FROM count_src") == [(550,)]


def test_copy_from_and_insert_select_feed_a_push_source(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text("k,v,s\n1,10,a\n2,20,\n1,30,c\n")
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        _setup(c, {"agg": QUERIES["agg"]})
        for relation in ("src", "tab"):
            assert c.execute(f"COPY {relation} FROM '{csv}' WITH (format csv, header true)").rowcount == 3
            c.execute(f"INSERT INTO {relation} SELECT k, k * 100, name FROM dim")
        c.execute("FLUSH")
        _check_same(c, {"agg": QUERIES["agg"]})
        assert _rows(c, "SELECT k, n FROM agg_src") == [(0, 1), (1, 3), (2, 2), (5, 1)]


def test_rows_pushed_while_nothing_reads_the_source_reach_no_later_mv():
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        c.execute(PUSH)
        c.execute("INSERT INTO src VALUES (1, 1, 'early')")
        c.execute("FLUSH")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT k, v, s FROM src")
        c.execute("INSERT INTO src VALUES (2, 2, 'late')")
        c.execute("FLUSH")
        assert _rows(c, "SELECT * FROM m") == [(2, 2, "late")]   # a source keeps nothing to backfill from


def test_a_push_source_refuses_what_needs_stored_rows_and_options():
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        c.execute(PUSH)
        with pytest.raises(UnsupportedError, match="src is a source: it stores no rows to query .* an APPEND ONLY table"):
            c.execute("SELECT * FROM src")
        with pytest.raises(BindError, match="cannot change push source"):
            c.execute("UPDATE src SET v = 1")
        with pytest.raises(BindError, match="cannot change push source"):
            c.execute("DELETE FROM src WHERE k = 1")
        with pytest.raises(BindError, match=r"option 'x' is not an option of connector 'push' \(it takes none\)"):
            c.execute("CREATE SOURCE bad (a INT) WITH (connector = 'push', x = '1')")
        with pytest.raises(UnsupportedError, match="connector 'push' feeds a SOURCE"):
            c.execute("CREATE TABLE bad (a INT) WITH (connector = 'push')")
        with pytest.raises(UnsupportedError, match="a source has no primary key"):
            c.execute("CREATE SOURCE bad (a INT PRIMARY KEY) WITH (connector = 'push')")
        assert sorted(c.db.catalog.relations) == ["src"]
        # a source with a generating connector still refuses every kind of insert
        c.execute("CREATE SOURCE gen (a INT) WITH (connector = 'datagen')")
        with pytest.raises(BindError, match="cannot insert into source"):
            c.execute("INSERT INTO gen VALUES (1)")
        with pytest.raises(BindError, match="cannot insert into source"):
            c.insert_arrow("gen", pa.table({"a": pa.array([1], pa.int32())}))
        c.execute("DROP SOURCE src")
        assert c.db.catalog.get("src") is None


def test_explain_insert_into_a_push_source_and_a_watermark_on_it():
    with sql.connect(":memory:", barrier_interval_ms=0) as c:
        mark = "(ts TIMESTAMP, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
        c.execute(f"CREATE SOURCE ev {mark} WITH (connector = 'push')")
        c.execute(f"CREATE TABLE evt {mark} APPEND ONLY")
        for r in ("ev", "evt"):
            c.execute(f"CREATE MATERIALIZED VIEW m_{r} AS SELECT window_start, count(*) AS n, sum(v) AS total "
                      f"FROM TUMBLE({r}, ts, INTERVAL '10' SECOND) GROUP BY window_start")
        plan = "\n".join(r[0] for r in c.execute("EXPLAIN INSERT INTO ev VALUES ('2026-01-01 00:00:00', 1)").fetchall())
        assert "BatchValues(1 rows)" in plan
        for values in ("('2026-01-01 00:00:05', 1), ('2026-01-01 00:00:15', 2)",
                       "('2026-01-01 00:00:03', 3)",   # late: below the watermark, dropped
                       "('2026-01-01 00:00:16', 4), ('2026-01-01 00:00:25', 5)"):
            for r in ("ev", "evt"):
                c.execute(f"INSERT INTO {r} VALUES {values}")
            c.execute("FLUSH")
            assert _rows(c, "SELECT * FROM m_ev") == _rows(c, "SELECT * FROM m_evt")
        assert 3 not in [total for _, _, total in _rows(c, "SELECT * FROM m_ev")]
