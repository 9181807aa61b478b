"""TUMBLE and HOP window table functions (sql/plan/time_window.py).

The property: random inserts (new keys and overwrites), updates of the time and value columns,
deletes and NULL times, applied to a table read by MVs over TUMBLE and HOP (per-window
aggregates and plain rows, with and without an offset); after every FLUSH each MV, and a batch
SELECT of its query, equals a Python model of the windows over the table's current rows. An MV
created after some data exists backfills it. The rest: errors, names, EXPLAIN, reopening.
"""

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from sql.errors import BindError, UnsupportedError

BASE = datetime.datetime(2026, 1, 1, 10, 0, 0)
S = datetime.timedelta(seconds=1)
EPOCH = datetime.datetime(1970, 1, 1)   # windows align to the Unix epoch (plus the offset)


def tumble_windows(ts, size, offset=0):
    if ts is None:
        return [(None, None)]
    t = int((ts - EPOCH).total_seconds())
    start = (t - offset) // size * size + offset
    return [(EPOCH + start * S, EPOCH + (start + size) * S)]


def hop_windows(ts, slide, size, offset=0):
    if ts is None:
        return []
    t = int((ts - EPOCH).total_seconds())
    last = (t - offset) // slide * slide + offset
    return [(EPOCH + s * S, EPOCH + (s + size) * S) for s in range(last - size + slide, last + 1, slide)]


# name -> (query, model: rows {id: (ts, v)} -> list of result tuples)
def _agg(windows_of, with_end):
    def model(rows):
        groups = {}
        for ts, v in rows.values():
            for ws, we in windows_of(ts):
                key = (ws, we) if with_end else (ws,)
                n, total = groups.get(key, (0, None))
                groups[key] = (n + 1, v if total is None else (total + v if v is not None else total))
        return [k + g for k, g in groups.items()]
    return model


QUERIES = {
    "tumble_agg": ("SELECT window_start, window_end, count(*) AS n, sum(v) AS total "
                   "FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end",
                   _agg(lambda ts: tumble_windows(ts, 10), True)),
    "tumble_offset_agg": ("SELECT window_start, count(*) AS n, sum(v) AS total "
                          "FROM TUMBLE(ev, ts, INTERVAL '10' SECOND, INTERVAL '3' SECOND) GROUP BY window_start",
                          _agg(lambda ts: tumble_windows(ts, 10, 3), False)),
    "hop_agg": ("SELECT window_start, window_end, count(*) AS n, sum(v) AS total "
                "FROM HOP(ev, ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) GROUP BY window_start, window_end",
                _agg(lambda ts: hop_windows(ts, 5, 15), True)),
    "hop_offset_agg": ("SELECT window_start, count(*) AS n, sum(v) AS total "
                       "FROM HOP(ev, ts, INTERVAL '4' SECOND, INTERVAL '8' SECOND, INTERVAL '1' SECOND) "
                       "GROUP BY window_start",
                       _agg(lambda ts: hop_windows(ts, 4, 8, 1), False)),
    "tumble_rows": ("SELECT id, v, window_start, window_end FROM TUMBLE(ev, ts, INTERVAL '7' SECOND) WHERE v > 0",
                    lambda rows: [(i, v) + w for i, (ts, v) in rows.items() if v is not None and v > 0
                                  for w in tumble_windows(ts, 7)]),
    "hop_rows": ("SELECT h.id, h.window_start FROM HOP(ev, ts, INTERVAL '3' SECOND, INTERVAL '9' SECOND) AS h",
                 lambda rows: [(i, w[0]) for i, (ts, v) in rows.items() for w in hop_windows(ts, 3, 9)]),
}

KEYS = st.integers(0, 7)
TIMES = st.one_of(st.none(), st.integers(0, 40).map(lambda s: BASE + s * S))
VALUES = st.one_of(st.none(), st.integers(-5, 9))


def _lit(x):
    if x is None:
        return "NULL"
    if isinstance(x, datetime.datetime):
        return f"'{x.isoformat(sep=' ')}'"
    return str(x)


@st.composite
def dml(draw, rows):
    """A few statements; applies them to the model ``rows`` as drawn."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["insert", "insert", "update_ts", "update_v", "delete"]))
        k = draw(KEYS)
        if kind == "insert":   # a pk table overwrites an existing key (ON CONFLICT OVERWRITE)
            ts, v = draw(TIMES), draw(VALUES)
            out.append(f"INSERT INTO ev VALUES ({k}, {_lit(ts)}, {_lit(v)})")
            rows[k] = (ts, v)
        elif kind == "update_ts":
            ts = draw(TIMES)
            out.append(f"UPDATE ev SET ts = {_lit(ts)} WHERE id = {k}")
            if k in rows:
                rows[k] = (ts, rows[k][1])
        elif kind == "update_v":
            out.append(f"UPDATE ev SET v = v + 1 WHERE id = {k}")
            if k in rows and rows[k][1] is not None:
                rows[k] = (rows[k][0], rows[k][1] + 1)
        else:
            out.append(f"DELETE FROM ev WHERE id = {k}")
            rows.pop(k, None)
    return out


def _sorted(rows):
    return sorted(rows, key=lambda r: tuple((x is None, x if x is not None else 0) for x in r))


_PROFILE = settings()


@settings(max_examples=max(8, _PROFILE.max_examples // 2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_window_mvs_equal_the_model_after_every_flush(data):
    names = data.draw(st.lists(st.sampled_from(sorted(QUERIES)), min_size=1, max_size=3, unique=True),
                      label="mvs")
    batches = data.draw(st.integers(1, 4), label="batches")
    create_after = data.draw(st.integers(0, batches - 1), label="MVs created after batch")
    rows = {}
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMP, v INT)")
        for step in range(batches):
            for stmt in data.draw(dml(rows), label=f"dml {step}"):
                conn.execute(stmt)
            if step == create_after:
                for name in names:
                    conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {QUERIES[name][0]}")
            conn.execute("FLUSH")
            if step < create_after:
                continue
            for name in names:
                query, model = QUERIES[name]
                expected = _sorted(model(rows))
                assert _sorted(conn.execute(f"SELECT * FROM {name}").fetchall()) == expected, name
                assert _sorted(conn.execute(query).fetchall()) == expected, f"batch {name}"


# --- examples --------------------------------------------------------------------------------------

@pytest.fixture
def conn():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMP, tz TIMESTAMPTZ, v INT)")
        c.execute("CREATE TABLE nopk (ts TIMESTAMP, v INT)")
        c.execute("INSERT INTO ev VALUES (1, '2026-01-01 10:00:07', '2026-01-01 10:00:07+00', 1)")
        c.execute("INSERT INTO nopk VALUES ('2026-01-01 10:00:07', 1), ('2026-01-01 10:00:07', 1)")
        c.execute("FLUSH")
        yield c


def test_star_shows_the_relation_columns_then_the_window(conn):
    cur = conn.execute("SELECT * FROM TUMBLE(ev, tz, INTERVAL '5' SECOND)")
    assert [d[0] for d in cur.description] == ["id", "ts", "tz", "v", "window_start", "window_end"]
    assert cur.description[4][1] == "timestamp with time zone"
    utc = datetime.timezone.utc
    assert cur.fetchall()[0][4:] == (datetime.datetime(2026, 1, 1, 10, 0, 5, tzinfo=utc),
                                     datetime.datetime(2026, 1, 1, 10, 0, 10, tzinfo=utc))
    # a table without a pk: its hidden _row_id stays hidden, duplicates stay
    cur = conn.execute("SELECT * FROM HOP(nopk, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND)")
    assert [d[0] for d in cur.description] == ["ts", "v", "window_start", "window_end"]
    assert len(cur.fetchall()) == 4


def test_names_alias_and_column_aliases(conn):
    assert conn.execute("SELECT ev.id, t.id FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) AS t JOIN ev "
                        "ON t.id = ev.id").fetchall() == [(1, 1)]
    assert conn.execute("SELECT ev.window_start FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE)").fetchall() == \
        [(datetime.datetime(2026, 1, 1, 10, 0),)]
    assert conn.execute("SELECT k FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) AS w(k)").fetchall() == [(1,)]
    assert conn.execute("WITH c AS (SELECT id, ts FROM ev) SELECT id, window_end FROM "
                        "TUMBLE(c, ts, INTERVAL '10' SECOND)").fetchall() == [(1, datetime.datetime(2026, 1, 1, 10, 0, 10))]


@pytest.mark.parametrize("query, cls, what", [
    ("SELECT * FROM TUMBLE(ev, v, INTERVAL '5' SECOND)", BindError, "timestamp"),
    ("SELECT * FROM TUMBLE(ev, ts)", BindError, "arguments"),
    ("SELECT * FROM HOP(ev, ts, INTERVAL '5' SECOND)", BindError, "arguments"),
    ("SELECT * FROM TUMBLE(ev, ts, INTERVAL '1' MONTH)", UnsupportedError, "month"),
    ("SELECT * FROM TUMBLE(ev, ts, INTERVAL '0' SECOND)", BindError, "positive"),
    ("SELECT * FROM TUMBLE(ev, ts, 5)", BindError, "interval"),
    ("SELECT * FROM HOP(ev, ts, INTERVAL '3' SECOND, INTERVAL '10' SECOND)", BindError, "multiple"),
    ("SELECT * FROM TUMBLE(nosuch, ts, INTERVAL '1' SECOND)", BindError, "nosuch"),
    ("SELECT * FROM TUMBLE(ev, nocol, INTERVAL '1' SECOND)", BindError, "nocol"),
])
def test_bad_arguments_are_errors_with_position(conn, query, cls, what):
    with pytest.raises(cls, match=f"(?i){what}") as info:
        conn.execute(query)
    assert info.value.line == 1 and info.value.column is not None


def test_explain_names_the_window_executors(conn):
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN CREATE MATERIALIZED VIEW m AS SELECT window_start, count(*) AS n "
        "FROM HOP(ev, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY window_start").fetchall())
    assert "StreamHopWindow(slide=5s, time_col=$1, size=10s)" in text, text
    text = "\n".join(r[0] for r in conn.execute(
        "EXPLAIN SELECT * FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE, INTERVAL '2' SECOND)").fetchall())
    assert "TumbleWindow(time_col=$1, size=60s, offset=2s)" in text, text


def test_window_mvs_survive_reopening(tmp_path):
    path = str(tmp_path / "db")
    with sql.connect(path) as conn:
        conn.execute("CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMP, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT window_start, sum(v) AS s "
                     "FROM HOP(ev, ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) GROUP BY window_start")
        conn.execute("INSERT INTO ev VALUES (1, '2026-01-01 10:00:07', 1)")
        conn.execute("FLUSH")
    with sql.connect(path) as conn:   # replans the stored definition and keeps maintaining it
        conn.execute("INSERT INTO ev VALUES (2, '2026-01-01 10:00:12', 10)")
        conn.execute("FLUSH")
        t = lambda s: datetime.datetime(2026, 1, 1, 10, 0, s)  # noqa: E731
        assert sorted(conn.execute("SELECT * FROM m").fetchall()) == [(t(0), 1), (t(5), 11), (t(10), 10)]
