"""OverWindow (window aggregates over ROWS / RANGE UNBOUNDED frames): hand-written chunks, and a
hypothesis test driving the executor directly with random inserts, deletes and updates (also
moving rows between partitions), barriers and restarts from the state table: after every chunk
the materialized output (applied strictly) equals a Python model's recomputation."""

import decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.memcomparable import OrderType
from relational.types import DataType as T
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError
from stream.executors.agg_call import numeric_div
from stream.executors.over_window import OverWindow
from stream.executors.top_n import top_n_state_table
from stream.schema import Schema
from stream_harness import Epochs, ListSource
from stream_topn_model import apply_changes

S = Schema([("id", T.BIGINT), ("g", T.VARCHAR), ("v", T.INT), ("w", T.DOUBLE)])
ASC, DESC = OrderType.ASC, OrderType.DESC
CALLS = [("sum", 2), ("count", None), ("count", 2), ("avg", 2), ("min", 2), ("max", 2), ("avg", 3)]


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


def model(rows, frame, desc=False, partition=True):
    """Expected output rows: each input row plus its window values, computed directly."""
    kind, n = frame
    parts: dict = {}
    for r in rows:
        parts.setdefault(r[1] if partition else (), []).append(r)
    out = []
    for members in parts.values():
        # ORDER BY v [DESC] (Postgres: NULLs last ASC, first DESC), then id ascending
        if desc:
            members.sort(key=lambda r: r[0])
            members.sort(key=lambda r: (r[2] is None, r[2] if r[2] is not None else 0), reverse=True)
        else:
            members.sort(key=lambda r: (r[2] is None, r[2] if r[2] is not None else 0, r[0]))
        for i, r in enumerate(members):
            if kind == "range":
                j = i
                while j + 1 < len(members) and members[j + 1][2] == r[2]:
                    j += 1
                frame_rows = members[:j + 1]
            else:
                frame_rows = members[(0 if n is None else max(0, i - n)):i + 1]
            vs = [x[2] for x in frame_rows if x[2] is not None]
            ws = [x[3] for x in frame_rows if x[3] is not None]
            wsum = 0.0
            for w in ws:
                wsum += w
            out.append(r + (sum(vs) if vs else None, len(frame_rows), len(vs),
                            numeric_div(decimal.Decimal(sum(vs)), len(vs)) if vs else None,
                            min(vs) if vs else None, max(vs) if vs else None,
                            wsum / len(ws) if ws else None))
    return sorted(out, key=repr)


class Driver:
    def __init__(self, store, frame, desc=False, partition=True):
        self.store, self.frame, self.desc, self.partition = store, frame, desc, partition
        self.epochs = Epochs()
        self.mv: dict = {}
        self.rows: dict = {}
        self.start()

    def start(self):
        order = [(2, DESC if self.desc else ASC)]
        part = [1] if self.partition else []
        table = top_n_state_table(self.store, 7, S, [0], order, part)
        self.x = OverWindow(ListSource(S, [0], []), table, part, order, CALLS, self.frame)
        self.x.handle_barrier(self.epochs.barrier())

    def send(self, *items):
        chunk = StreamChunk.from_rows(S, items)
        out = self.x.on_chunk(chunk) or []
        apply_changes(self.mv, out, [0])
        for op, row in chunk.rows():
            if op in (INSERT, UPDATE_INSERT):
                self.rows[row[0]] = row
            else:
                del self.rows[row[0]]

    def check(self):
        assert sorted(self.mv.values(), key=repr) == model(list(self.rows.values()), self.frame, self.desc,
                                                           self.partition)


def test_rows_frame_by_hand(store):
    d = Driver(store, ("rows", 1))
    d.send((INSERT, (1, "a", 10, 1.0)), (INSERT, (2, "a", 20, 2.0)), (INSERT, (3, "b", 5, None)))
    d.check()
    assert d.mv[(2,)][4:7] == (30, 2, 2)
    assert d.mv[(2,)][7] == decimal.Decimal("15.0000000000000000")
    d.send((INSERT, (4, "a", 15, 4.0)))          # between 1 and 2: 2's frame changes
    d.check()
    assert d.mv[(2,)][4] == 35
    d.send((UPDATE_DELETE, (4, "a", 15, 4.0)), (UPDATE_INSERT, (4, "b", 1, 4.0)))   # moves partition
    d.check()
    d.send((DELETE, (1, "a", 10, 1.0)))
    d.check()


def test_range_default_frame_peers(store):
    d = Driver(store, ("range", None))
    d.send((INSERT, (1, "a", 10, 1.0)), (INSERT, (2, "a", 10, 2.0)), (INSERT, (3, "a", 20, None)))
    d.check()
    assert d.mv[(1,)][4] == 20 and d.mv[(2,)][4] == 20 and d.mv[(3,)][4] == 40


def test_bad_frame_and_call(store):
    table = top_n_state_table(store, 7, S, [0], [(2, ASC)], [1])
    with pytest.raises(ExecutorError):
        OverWindow(ListSource(S, [0], []), table, [1], [(2, ASC)], [("sum", 2)], ("range", 3))
    with pytest.raises(ExecutorError):
        OverWindow(ListSource(S, [0], []), table, [1], [(2, ASC)], [("bool_and", 2)], ("rows", 3))


_row = st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(-5, 5)),
                 st.one_of(st.none(), st.sampled_from([0.5, 1.25, -2.0])))
_frame = st.sampled_from([("rows", 0), ("rows", 1), ("rows", 3), ("rows", None), ("range", None)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=_frame, desc=st.booleans(), partition=st.booleans(),
       steps=st.lists(st.tuples(st.sampled_from(["ins", "ins", "del", "upd", "barrier", "restart"]),
                                st.integers(0, 1000), _row), max_size=40))
def test_random_changes_match_model(frame, desc, partition, steps):
    s = HummockStorage.open("memory://")
    try:
        d = Driver(s, frame, desc, partition)
        next_id = 0
        for action, pick, (g, v, w) in steps:
            ids = sorted(d.rows)
            if action == "ins":
                d.send((INSERT, (next_id, g, v, w)), *([(INSERT, (next_id + 1, g, pick % 3, w))] if pick % 2 else []))
                next_id += 2
            elif action == "del" and ids:
                d.send((DELETE, d.rows[ids[pick % len(ids)]]))
            elif action == "upd" and ids:
                old = d.rows[ids[pick % len(ids)]]
                d.send((UPDATE_DELETE, old), (UPDATE_INSERT, (old[0], g, v, w)))
            elif action == "barrier":
                d.x.handle_barrier(d.epochs.barrier())
            elif action == "restart":
                d.x.handle_barrier(d.epochs.barrier())
                d.start()
            d.check()
    finally:
        s.close()


# --- SQL: an MV with window aggregates equals its batch SELECT --------------------------------

import random  # noqa: E402

import sql  # noqa: E402

WINDOW_MVS = {
    "w_rows": "SELECT id, g, avg(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS a, "
              "sum(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM t",
    "w_running": "SELECT id, count(*) OVER (ORDER BY d DESC ROWS UNBOUNDED PRECEDING) AS n, "
                 "max(v * 2) OVER (PARTITION BY g ORDER BY id ROWS UNBOUNDED PRECEDING) AS m FROM t",
    "w_default": "SELECT id, sum(d) OVER (PARTITION BY g ORDER BY v) AS s, min(v) OVER (PARTITION BY g) AS lo, "
                 "avg(d) OVER () AS ad FROM t",
    "w_on_agg": "SELECT g, avg(total) OVER (ORDER BY g ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS a "
                "FROM (SELECT g, sum(v) AS total FROM t GROUP BY g) AS q",
}


def _sorted(conn, query):
    return sorted(conn.execute(query).fetchall(), key=repr)


def _check_mvs(conn):
    for name, query in WINDOW_MVS.items():
        assert _sorted(conn, f"SELECT * FROM {name}") == _sorted(conn, query), name


def _churn(conn, rng, ids, n):
    for _ in range(n):
        action = rng.random()
        if action < 0.5 or not ids:
            i = rng.randrange(1000)
            if i not in ids:
                ids.add(i)
                v = rng.choice([None, rng.randrange(-3, 8)])
                conn.execute("INSERT INTO t VALUES ($1, $2, $3, $4)",
                             (i, rng.choice(["a", "b", "c"]), v, rng.choice([None, 0.5, 1.5, -2.25])))
        elif action < 0.8:
            i = rng.choice(sorted(ids))
            conn.execute("UPDATE t SET v = $1, g = $2 WHERE id = $3", (rng.randrange(-3, 8), rng.choice("abc"), i))
        else:
            i = rng.choice(sorted(ids))
            ids.discard(i)
            conn.execute("DELETE FROM t WHERE id = $1", (i,))


@pytest.mark.parametrize("seed", [1, 2])
def test_sql_window_mvs_equal_their_select_after_every_flush_and_reopen(tmp_path, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "db")
    ids: set = set()
    with sql.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g VARCHAR, v INT, d DOUBLE)")
        _churn(conn, rng, ids, 10)
        conn.execute("FLUSH")
        for name, query in WINDOW_MVS.items():   # backfilled from existing rows
            conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        for _ in range(4):
            _churn(conn, rng, ids, 15)
            conn.execute("FLUSH")
            _check_mvs(conn)
    with sql.connect(path) as conn:
        _check_mvs(conn)
        for _ in range(2):
            _churn(conn, rng, ids, 15)
            conn.execute("FLUSH")
            _check_mvs(conn)


def test_sql_window_explain_and_frames(tmp_path):
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, g VARCHAR, v INT, d DOUBLE)")
        conn.execute("INSERT INTO t VALUES (1, 'a', 1, 1.0), (2, 'a', 1, 2.0), (3, 'a', 3, NULL)")
        conn.execute("FLUSH")
        # default frame (RANGE): peers included; ROWS: not; avg of INT is NUMERIC like avg()
        got = _sorted(conn, "SELECT id, sum(v) OVER (ORDER BY v) AS r, sum(v) OVER (ORDER BY v ROWS UNBOUNDED "
                            "PRECEDING) AS w, avg(v) OVER (ORDER BY v ROWS CURRENT ROW) AS a FROM t")
        assert [(i, r, w) for i, r, w, _ in got] == [(1, 2, 1), (2, 2, 2), (3, 5, 5)]
        assert str(got[2][3]) == "3.0000000000000000"
        plan = [r[0] for r in conn.execute("EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT id, avg(v) OVER "
                                           "(PARTITION BY g ORDER BY id ROWS BETWEEN 10 PRECEDING AND "
                                           "CURRENT ROW) FROM t").fetchall()]
        assert any(line.strip().startswith("StreamOverWindow(") and "state_tables" in line for line in plan), plan
        # calls sharing PARTITION BY, ORDER BY and frame share one OverWindow (one state table)
        shared = [r[0] for r in conn.execute(f"EXPLAIN CREATE MATERIALIZED VIEW m AS {WINDOW_MVS['w_rows']}")]
        assert sum("StreamOverWindow(calls=[avg($2), sum($2)]" in line for line in shared) == 1, shared
        assert sum("OverWindow" in line for line in shared) == 1, shared
        assert _sorted(conn, "SELECT id, sum(v) OVER (ORDER BY id ROWS 1 PRECEDING), row_number() OVER (ORDER BY id) "
                             "FROM t") == [(1, 1, 1), (2, 2, 2), (3, 4, 3)]
        for bad in ("ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "RANGE BETWEEN 2 PRECEDING AND CURRENT ROW",
                    "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING"):
            with pytest.raises(sql.errors.UnsupportedError, match="window frame"):
                conn.execute(f"SELECT sum(v) OVER (ORDER BY id {bad}) FROM t")
