"""Change logs (relational/change_log.py) and subscriptions (sql/subscription.py).

Covers: the writer's net change per pk per epoch and the entry format (decoded back); a
hypothesis test of a table's and an aggregate MV's logs under random DML against a model (the
relation's rows after every epoch: replaying each epoch's changes onto the previous rows gives
the next, each pk at most once per epoch, every op consistent with the rows before it); cursor
semantics (default = from now, SINCE an epoch, SINCE a unix ms, SINCE begin(), FULL, FETCH
NEXT / n / ALL, live changes after a FLUSH, Connection.subscribe with a timeout and live);
retention (old entries hidden by the log's watermarks, a too-old position is a typed error,
begin() starts after the cutoff); DROP SUBSCRIPTION (log truncated, nothing logged after, the
relation droppable again, the cursor errors); restart keeps logs and the subscription; the
statements' errors; a consumer pin holds retention back until it expires and goes with DROP
SUBSCRIPTION. Runs in both modes (native and ``HUMMOCK_PURE_PYTHON=1``).
"""

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sql
from hummock import HummockStorage
from hummock.key import EPOCH_PHYSICAL_SHIFT, epoch_to_unix_ms, new_epoch
from relational.change_log import (OP_DELETE, OP_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT,
                                   TAG_INSERT, TAG_UPDATE, ChangeLogExpiredError, ChangeLogSpec, ChangeLogWriter,
                                   check_position, decode_entry, read_changes, retention_cutoff)
from relational.row_serde import RowSerde
from relational.types import DataType as T
from relational.vnode import Bitmap
from sql.errors import BindError, CatalogError, ExecutionError, SqlSyntaxError

SERDE = RowSerde([T.INT, T.VARCHAR], [0], None, [0])


def _writer(store, table_id=9, retention_ms=3_600_000):
    return ChangeLogWriter(store, ChangeLogSpec(table_id, retention_ms), SERDE, lambda: Bitmap.full())


def _store():
    return HummockStorage.open("memory://")


# --- the writer and the format --------------------------------------------------------------------

def test_net_change_per_pk_per_epoch_and_format():
    store = _store()
    w = _writer(store)
    e1 = new_epoch()
    w.record([OP_INSERT, OP_INSERT, OP_INSERT], [[1, 2, 3], ["a", "b", "c"]])
    w.record([OP_DELETE], [[3], ["c"]])                                   # insert then delete: nothing
    w.record([OP_UPDATE_DELETE, OP_UPDATE_INSERT], [[2, 2], ["b", "bb"]])  # insert then update: an insert
    w.commit(e1)
    store.checkpoint(e1)
    e2 = e1 + (5 << EPOCH_PHYSICAL_SHIFT)
    w.record([OP_UPDATE_DELETE, OP_UPDATE_INSERT, OP_UPDATE_DELETE, OP_UPDATE_INSERT],
             [[1, 1, 1, 1], ["a", "x", "x", "y"]])                         # two updates: one, a -> y
    w.record([OP_UPDATE_DELETE, OP_UPDATE_INSERT], [[2, 2], ["bb", "bb"]])  # same bytes: nothing
    w.record([OP_DELETE, OP_INSERT], [[4, 4], ["gone", "back"]], [False, True])   # visibility
    w.commit(e2)
    store.checkpoint(e2)
    raw = list(store.iter(9, e2))
    tags = [v[0] for _, v in raw]
    assert sorted(tags) == sorted([TAG_INSERT, TAG_INSERT, TAG_UPDATE, TAG_INSERT])
    for key, value in raw:
        epoch, _ = decode_entry(SERDE, key, value)
        assert key[2:10] == epoch.to_bytes(8, "big")   # vnode | epoch | pk
    got = [(c.epoch, c.op, c.row) for c in read_changes(store, 9, SERDE, e2, 0, e2)]
    entries = [(e1, [(OP_INSERT, (1, "a"))]), (e1, [(OP_INSERT, (2, "bb"))]),
               (e2, [(OP_UPDATE_DELETE, (1, "a")), (OP_UPDATE_INSERT, (1, "y"))]), (e2, [(OP_INSERT, (4, "back"))])]
    entries.sort(key=lambda e: (e[0], SERDE.encode(e[1][0][1])[0]))   # (epoch, vnode | pk)
    assert got == [(epoch, op, row) for epoch, changes in entries for op, row in changes]
    assert [c.epoch for c in read_changes(store, 9, SERDE, e2, e1, e2)] == [e2] * 3   # (after, upto]
    assert list(read_changes(store, 9, SERDE, e2, 0, e1 + 1)) == list(read_changes(store, 9, SERDE, e2, 0, e1))
    store.close()


def test_malformed_entry_is_a_typed_error():
    from relational.errors import SchemaError
    key = b"\x00\x01" + (1 << 16).to_bytes(8, "big") + SERDE.encode((1, "a"))[0][2:]
    for value in (b"", b"\x07abc", bytes([TAG_UPDATE]) + b"\x00\x00\x00\x09ab"):
        with pytest.raises(SchemaError):
            decode_entry(SERDE, key, value)


def test_retention_watermark_hides_old_entries_and_old_positions_error():
    store = _store()
    w = _writer(store, retention_ms=2000)
    e1 = new_epoch()
    w.record([OP_INSERT], [[1], ["a"]])
    w.commit(e1)
    store.checkpoint(e1)
    check_position("log", e1, 0, store.table_watermarks(9))    # nothing dropped yet
    e2 = e1 + (10_000 << EPOCH_PHYSICAL_SHIFT)                 # 10 s later, retention 2 s
    w.record([OP_INSERT], [[2], ["b"]])
    w.commit(e2)
    store.checkpoint(e2)
    assert [c.row for c in read_changes(store, 9, SERDE, e2, 0, e2)] == [(2, "b")]   # e1's entry hidden
    with pytest.raises(ChangeLogExpiredError) as info:
        check_position("log", e1, 0, store.table_watermarks(9))
    assert info.value.min_readable_epoch == retention_cutoff(e2, 2000) - (1 << EPOCH_PHYSICAL_SHIFT)
    check_position("log", info.value.min_readable_epoch, 0, store.table_watermarks(9))
    with pytest.raises(ChangeLogExpiredError):                # before the subscription's start
        check_position("log", e1, e1 + 1, None)
    store.compact_all()
    assert [c.row for c in read_changes(store, 9, SERDE, e2, 0, e2)] == [(2, "b")]
    store.close()


# --- SQL: the log against a model ---------------------------------------------------------------

def _connect(url=":memory:"):
    return sql.connect(url, barrier_interval_ms=0)


def _replay(state: dict, changes, key_of):
    """Apply one epoch's changes (rows with op names) onto ``state``, checking each op against
    it and that no pk changes twice in the epoch."""
    seen, pending = set(), None
    for *row, op in changes:
        row = tuple(row)
        k = key_of(row)
        if op == "UpdateInsert":
            assert pending is not None and key_of(pending) == k and pending != row
            state[k] = row
            pending = None
            continue
        assert pending is None, "an UpdateDelete without its UpdateInsert"
        assert k not in seen, f"pk {k} changes twice in one epoch"
        seen.add(k)
        if op == "Insert":
            assert k not in state
            state[k] = row
        elif op == "Delete":
            assert state.pop(k) == row
        else:
            assert op == "UpdateDelete" and state.get(k) == row
            pending = row
    assert pending is None


def _agg_model(rows: dict) -> dict:
    out = {}
    for k, v in rows.values():
        g = -(-v % 3) if v < 0 else v % 3   # SQL's %: the sign of the dividend
        n, s = out.get(g, (g, 0, 0))[1:]
        out[g] = (g, n + 1, s + k)
    return out


DML = st.lists(st.tuples(st.sampled_from(["insert", "update", "delete"]), st.integers(0, 7), st.integers(-5, 5)),
               max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(DML, min_size=1, max_size=5))
def test_table_and_aggregate_logs_match_a_model(epochs):
    conn = _connect()
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT v % 3 AS g, count(*) AS n, sum(k) AS s FROM t "
                     "GROUP BY v % 3")
        conn.execute("INSERT INTO t VALUES (100, 1)")
        conn.execute("FLUSH")
        conn.execute("CREATE SUBSCRIPTION st FROM t")
        conn.execute("CREATE SUBSCRIPTION sm FROM m WITH (retention = '1 hour')")
        conn.execute("DECLARE ct SUBSCRIPTION CURSOR FOR st")
        conn.execute("DECLARE cm SUBSCRIPTION CURSOR FOR sm")
        model = {100: (100, 1)}
        t_state, m_state = dict((k, r) for k, r in model.items()), _agg_model(model)
        for ops in epochs:
            for kind, k, v in ops:
                if kind == "insert":
                    conn.execute("INSERT INTO t VALUES (%s, %s)", (k, v))   # ON CONFLICT overwrite
                    model[k] = (k, v)
                elif kind == "update":
                    conn.execute("UPDATE t SET v = %s WHERE k = %s", (v, k))
                    if k in model:
                        model[k] = (k, v)
                else:
                    conn.execute("DELETE FROM t WHERE k = %s", (k,))
                    model.pop(k, None)
            conn.execute("FLUSH")
            for cur, state, want, key_of in (("ct", t_state, model, lambda r: r[0]),
                                             ("cm", m_state, _agg_model(model), lambda r: r[0])):
                rows = conn.execute(f"FETCH ALL FROM {cur}").fetchall()
                by_epoch: dict = {}
                for r in rows:
                    by_epoch.setdefault(r[-1], []).append(r[:-1])
                assert list(by_epoch) == sorted(by_epoch)
                for stamp in by_epoch:
                    _replay(state, by_epoch[stamp], key_of)
                assert state == want
        assert conn.execute("FETCH ALL FROM ct").fetchall() == []
    finally:
        conn.close()


# --- cursors ---------------------------------------------------------------------------------------

@pytest.fixture
def db():
    conn = _connect()
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR)")
    conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    conn.execute("FLUSH")
    conn.execute("CREATE SUBSCRIPTION s FROM t WITH (retention = '1D')")
    yield conn
    conn.close()


def test_cursor_default_since_full_and_fetch_counts(db):
    start = db.db.catalog.subscriptions["s"].start_epoch
    db.execute("DECLARE now_c SUBSCRIPTION CURSOR FOR s")
    db.execute("DECLARE full_c SUBSCRIPTION CURSOR FOR s FULL")
    db.execute("INSERT INTO t VALUES (3, 'c')")
    db.execute("FLUSH")
    e1 = db.db.store.max_committed_epoch
    db.execute("DECLARE after_e1 SUBSCRIPTION CURSOR FOR s")      # from now: nothing of e1
    db.execute("UPDATE t SET v = 'z' WHERE k = 1")
    db.execute("FLUSH")
    e2 = db.db.store.max_committed_epoch
    db.execute(f"DECLARE since_start SUBSCRIPTION CURSOR FOR s SINCE {start}")
    db.execute(f"DECLARE since_e1 SUBSCRIPTION CURSOR FOR s SINCE {e1}")
    db.execute(f"DECLARE since_ms SUBSCRIPTION CURSOR FOR s SINCE {epoch_to_unix_ms(e2)}")
    db.execute("DECLARE since_begin SUBSCRIPTION CURSOR FOR s SINCE begin()")
    stamp1, stamp2 = epoch_to_unix_ms(e1), epoch_to_unix_ms(e2)
    log = [(3, "c", "Insert", stamp1), (1, "a", "UpdateDelete", stamp2), (1, "z", "UpdateInsert", stamp2)]
    assert db.execute("FETCH NEXT FROM now_c").fetchall() == log[:1]
    assert db.execute("FETCH 5 FROM now_c").fetchall() == log[1:]
    assert db.execute("FETCH NEXT FROM now_c").fetchall() == []
    assert db.execute("FETCH ALL FROM full_c").fetchall() == [(1, "a", "Insert", None), (2, "b", "Insert", None)] + log
    assert db.execute("FETCH ALL FROM after_e1").fetchall() == log[1:]
    assert db.execute("FETCH ALL FROM since_start").fetchall() == log
    assert db.execute("FETCH ALL FROM since_e1").fetchall() == log[1:]
    assert db.execute("FETCH ALL FROM since_ms").fetchall() == log[1:]   # at or after that ms
    assert db.execute("FETCH ALL FROM since_begin").fetchall() == log
    # live: a change committed after the cursor caught up
    db.execute("DELETE FROM t WHERE k = 2")
    assert db.execute("FETCH ALL FROM now_c").fetchall() == []        # not committed yet
    db.execute("FLUSH")
    [row] = db.execute("FETCH ALL FROM now_c").fetchall()
    assert row[:3] == (2, "b", "Delete")
    cur = db.execute("FETCH NEXT FROM now_c")
    assert [d[0] for d in cur.description] == ["k", "v", "op", "rw_timestamp"]
    db.execute("CLOSE now_c")
    with pytest.raises(CatalogError):
        db.execute("FETCH NEXT FROM now_c")
    db.execute("CLOSE ALL")
    with pytest.raises(CatalogError):
        db.execute("FETCH NEXT FROM full_c")


def test_subscribe_iterator_catches_up_then_waits_for_live_changes(db):
    db.execute("INSERT INTO t VALUES (3, 'c')")
    db.execute("FLUSH")
    start = db.db.catalog.subscriptions["s"].start_epoch
    sub = db.subscribe("s", since=start, timeout=0)
    got = [(c.op_name, c.row) for c in sub]
    assert got == [("Insert", (3, "c"))]
    assert list(sub) == []                                            # timeout 0: caught up, stops
    live = db.subscribe("s", timeout=30)

    def writer():
        time.sleep(0.2)
        db.execute("INSERT INTO t VALUES (4, 'd')")
        db.execute("FLUSH")

    thread = threading.Thread(target=writer)
    thread.start()
    change = next(live)                                               # waits for the commit
    thread.join()
    assert (change.op_name, change.row) == ("Insert", (4, "d"))
    assert change.epoch <= db.db.store.max_committed_epoch and live.position >= change.epoch
    full = db.subscribe("s", full=True, timeout=0)
    assert sorted(c.row for c in full) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    live.close()


def test_retention_drops_old_changes_and_too_old_cursors_error():
    conn = _connect()
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.execute("CREATE SUBSCRIPTION s FROM t WITH (retention = '1 second')")
        start = conn.db.catalog.subscriptions["s"].start_epoch
        conn.execute("INSERT INTO t VALUES (1, 1)")
        conn.execute("FLUSH")
        time.sleep(2.2)
        conn.execute("FLUSH")   # the next epoch starts now (an epoch is the time its barrier was injected)
        conn.execute("INSERT INTO t VALUES (2, 2)")
        conn.execute("FLUSH")
        with pytest.raises(ExecutionError, match="older than what it keeps"):
            conn.execute(f"DECLARE c SUBSCRIPTION CURSOR FOR s SINCE {start}")
        with pytest.raises(ChangeLogExpiredError):
            conn.subscribe("s", since=start)
        conn.execute("DECLARE b SUBSCRIPTION CURSOR FOR s SINCE begin()")
        assert [r[:3] for r in conn.execute("FETCH ALL FROM b").fetchall()] == [(2, 2, "Insert")]
        log_id = conn.db.catalog.subscriptions["s"].table_id
        store = conn.db.store
        assert len(list(store.iter(log_id, store.max_committed_epoch))) == 1   # the first entry is hidden
        assert set(store.table_watermarks(log_id).latest) == {0}   # a singleton relation: one vnode marked
    finally:
        conn.close()


def test_an_open_cursor_overtaken_by_retention_errors():
    conn = _connect()
    try:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        conn.execute("CREATE SUBSCRIPTION s FROM t WITH (retention = '1 second')")
        conn.execute("DECLARE c SUBSCRIPTION CURSOR FOR s")
        conn.execute("INSERT INTO t VALUES (1, 1)")
        conn.execute("FLUSH")
        time.sleep(2.2)
        conn.execute("FLUSH")   # the next epoch starts now (an epoch is the time its barrier was injected)
        conn.execute("INSERT INTO t VALUES (2, 2)")
        conn.execute("FLUSH")
        with pytest.raises(ExecutionError, match="older than what it keeps"):
            conn.execute("FETCH ALL FROM c")
    finally:
        conn.close()


def test_drop_subscription_stops_logging_and_frees_the_table(db):
    db.execute("DECLARE c SUBSCRIPTION CURSOR FOR s")
    db.execute("INSERT INTO t VALUES (3, 'c')")
    db.execute("FLUSH")
    log_id = db.db.catalog.subscriptions["s"].table_id
    store = db.db.store
    assert len(list(store.iter(log_id, store.max_committed_epoch))) == 1
    with pytest.raises(CatalogError, match="subscription 's' depends on it"):
        db.execute("DROP TABLE t")
    db.execute("DROP SUBSCRIPTION s")
    assert "s" not in db.db.catalog.subscriptions
    store = db.db.store
    assert list(store.iter(log_id, store.max_committed_epoch)) == []       # truncated
    db.execute("INSERT INTO t VALUES (4, 'd')")
    db.execute("FLUSH")
    store = db.db.store
    assert list(store.iter(log_id, store.max_committed_epoch)) == []       # nothing logged any more
    with pytest.raises(CatalogError, match="does not exist"):
        db.execute("FETCH NEXT FROM c")
    db.execute("DROP SUBSCRIPTION IF EXISTS s")
    with pytest.raises(CatalogError):
        db.execute("DROP SUBSCRIPTION s")
    db.execute("CREATE SUBSCRIPTION s FROM t")                             # a new log, a new id
    assert db.db.catalog.subscriptions["s"].table_id > log_id
    db.execute("DROP SUBSCRIPTION s")
    db.execute("DROP TABLE t")


def test_restart_keeps_logs_and_subscriptions(tmp_path):
    url = str(tmp_path / "db")
    conn = _connect(url)
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    conn.execute("CREATE SUBSCRIPTION sm FROM m")
    start = conn.db.catalog.subscriptions["sm"].start_epoch
    conn.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    conn.execute("FLUSH")
    conn.close()
    conn = _connect(url)
    try:
        assert conn.db.catalog.subscriptions["sm"].start_epoch == start
        conn.execute("INSERT INTO t VALUES (3, 3)")
        conn.execute("FLUSH")
        conn.execute(f"DECLARE c SUBSCRIPTION CURSOR FOR sm SINCE {start}")
        rows = [r[:2] for r in conn.execute("FETCH ALL FROM c").fetchall()]
        assert rows == [(0, "UpdateDelete"), (2, "UpdateInsert"), (2, "UpdateDelete"), (3, "UpdateInsert")]
    finally:
        conn.close()


def test_statement_errors(db):
    with pytest.raises(CatalogError, match="already exists"):
        db.execute("CREATE SUBSCRIPTION s FROM t")
    db.execute("CREATE SUBSCRIPTION IF NOT EXISTS s FROM t")
    with pytest.raises(CatalogError, match="does not exist"):
        db.execute("CREATE SUBSCRIPTION s2 FROM nope")
    with pytest.raises(BindError, match="unknown subscription option"):
        db.execute("CREATE SUBSCRIPTION s2 FROM t WITH (retain = '1h')")
    for bad in ("soon", "0 s", "99999999999999 weeks"):
        with pytest.raises(BindError, match="invalid retention"):
            db.execute(f"CREATE SUBSCRIPTION s2 FROM t WITH (retention = '{bad}')")
    from sql.subscription import parse_retention
    assert [parse_retention(t) for t in ("1 hour", "1D", "30 minutes 10 s", "90", "1.5h")] == [
        3_600_000, 86_400_000, 1_810_000, 90_000, 5_400_000]
    with pytest.raises(SqlSyntaxError):
        db.execute("DECLARE c SUBSCRIPTION CURSOR s")
    with pytest.raises(SqlSyntaxError):
        db.execute("FETCH FROM FROM c")
    with pytest.raises(CatalogError, match="subscription 'x' does not exist"):
        db.execute("DECLARE c SUBSCRIPTION CURSOR FOR x")
    with pytest.raises(BindError, match="SINCE"):
        db.execute("DECLARE c SUBSCRIPTION CURSOR FOR s SINCE yesterday")
    db.execute("DECLARE c SUBSCRIPTION CURSOR FOR s")
    with pytest.raises(CatalogError, match="cursor 'c' already exists"):
        db.execute("DECLARE c SUBSCRIPTION CURSOR FOR s")
    with pytest.raises(ExecutionError, match="older than what it keeps"):   # before the subscription
        db.execute("DECLARE d SUBSCRIPTION CURSOR FOR s SINCE 1")


def test_a_consumer_pin_holds_retention_back_until_it_expires():
    from relational.change_log import pinned_position, write_pin
    store = _store()
    w = _writer(store, retention_ms=2000)
    e1 = new_epoch()
    w.record([OP_INSERT], [[1], ["a"]])
    w.commit(e1)
    store.checkpoint(e1)
    write_pin(store._store, 9, "spark-query", e1 - (1 << EPOCH_PHYSICAL_SHIFT), ttl_s=0.5)
    assert pinned_position(store._store, 9) == e1 - (1 << EPOCH_PHYSICAL_SHIFT)
    e2 = e1 + (10_000 << EPOCH_PHYSICAL_SHIFT)                 # 10 s later, retention 2 s: pinned
    w.record([OP_INSERT], [[2], ["b"]])
    w.commit(e2)
    store.checkpoint(e2)
    check_position("log", e1 - (1 << EPOCH_PHYSICAL_SHIFT), 0, store.table_watermarks(9))
    assert [c.row for c in read_changes(store, 9, SERDE, e2, 0, e2)] == [(1, "a"), (2, "b")]
    store._store.upload("changelog-pins/9/garbage.json", b"{not json")   # ignored, with a warning
    assert pinned_position(store._store, 9) == e1 - (1 << EPOCH_PHYSICAL_SHIFT)
    time.sleep(1.2)                                            # the pin expires (store clock)
    assert pinned_position(store._store, 9) is None
    e3 = e2 + (10_000 << EPOCH_PHYSICAL_SHIFT)
    w.commit(e3)
    store.checkpoint(e3)
    with pytest.raises(ChangeLogExpiredError):
        check_position("log", e1, 0, store.table_watermarks(9))
    assert list(read_changes(store, 9, SERDE, e3, 0, e3)) == []
    store.close()


def test_drop_subscription_deletes_consumer_pins(db):
    from relational.change_log import PIN_PREFIX, write_pin
    sub = db.db.catalog.subscriptions["s"]
    write_pin(db.db.store._store, sub.table_id, "q", sub.start_epoch, 60)
    assert db.db.store._store.list(PIN_PREFIX)
    db.execute("DROP SUBSCRIPTION s")
    assert db.db.store._store.list(PIN_PREFIX) == []


def test_golden_entries():
    """The layout of docs/format.md section 9, frozen: these bytes must decode the same forever."""
    golden = [("007500000000000100000180000002", "02010200020000000162", [(OP_DELETE, (2, "b"))]),
              ("00a700000000000100000180000001", "01010200010000000161", [(OP_INSERT, (1, "a"))]),
              ("00b500000000000100000180000003", "0300000009010200030000000163010200030000000164",
               [(OP_UPDATE_DELETE, (3, "c")), (OP_UPDATE_INSERT, (3, "d"))])]
    w = _writer(None)
    w.record([OP_INSERT, OP_DELETE, OP_UPDATE_DELETE, OP_UPDATE_INSERT], [[1, 2, 3, 3], ["a", "b", "c", "d"]])
    assert [(k.hex(), v.hex()) for k, v in w.entries(1 << 16)] == [(k, v) for k, v, _ in golden]
    for key, value, changes in golden:
        assert decode_entry(SERDE, bytes.fromhex(key), bytes.fromhex(value)) == (1 << 16, changes)


def test_unsupported_cursor_forms_are_refused_by_name(db):
    from sql.errors import UnsupportedError
    for text in ("DECLARE c CURSOR FOR SELECT * FROM t", "FETCH PRIOR FROM c", "FETCH BACKWARD 2 FROM c",
                 "ALTER SUBSCRIPTION s RENAME TO s2"):
        with pytest.raises(UnsupportedError):
            db.execute(text)


def test_writers_of_disjoint_vnodes_share_an_epoch():
    """The Spark runtime's shape: several tasks run Materialize for disjoint vnodes of one
    relation and write the same epoch into one log; keys never collide, each task's retention
    watermark covers its own vnodes, and a reader merges them in (epoch, vnode, pk) order."""
    from relational.vnode import compute_vnode
    serde = RowSerde([T.INT, T.VARCHAR], [0], None, [0])
    store = _store()
    halves = [Bitmap.from_range(0, 128), Bitmap.from_range(128, 256)]
    writers = [ChangeLogWriter(store, ChangeLogSpec(9, 2000), serde, lambda b=b: b) for b in halves]
    rows = [(k, f"v{k}") for k in range(40)]
    e1 = new_epoch()
    for w, owned in zip(writers, halves):
        mine = [r for r in rows if compute_vnode([r[0]], [T.INT]) in owned]
        assert mine
        w.record([OP_INSERT] * len(mine), [[r[0] for r in mine], [r[1] for r in mine]])
        w.commit(e1)
    store.checkpoint(e1)
    got = list(read_changes(store, 9, serde, e1, 0, e1))
    assert sorted(c.row for c in got) == rows
    assert [serde.encode(c.row)[0] for c in got] == sorted(serde.encode(r)[0] for r in rows)
    e2 = e1 + (10_000 << EPOCH_PHYSICAL_SHIFT)
    writers[0].commit(e2)                      # only the first task advances its retention
    store.checkpoint(e2)
    left = [c.row for c in read_changes(store, 9, serde, e2, 0, e2)]
    assert sorted(left) == sorted(r for r in rows if compute_vnode([r[0]], [T.INT]) in halves[1])
    assert sorted(c.row for c in read_changes(store, 9, serde, e2, 0, e2, range(128, 256))) == sorted(left)
    store.close()


@pytest.mark.parametrize("props, field", [
    ({"subscription": []}, "properties.subscription"),
    ({"subscription": {"relation": 3, "retention_ms": 1, "start_epoch": 0}}, "relation"),
    ({"subscription": {"relation": "t", "retention_ms": -1, "start_epoch": 0}}, "retention_ms"),
    ({"subscription": {"relation": "t", "retention_ms": 1, "start_epoch": True}}, "start_epoch"),
    ({"subscription": {"relation": "nope", "retention_ms": 1, "start_epoch": 0}}, "relation"),
])
def test_a_malformed_subscription_record_is_corruption(props, field):
    from hummock import CorruptionError
    from relational.catalog import TableDesc
    from sql.catalog import SqlCatalog
    table = TableDesc(1, "t", (("k", T.INT),), (0,), properties={"sql": {"kind": "table", "n_visible": 1}})
    sub = TableDesc(2, "s", (("k", T.INT),), (0,), properties=props)
    with pytest.raises(CorruptionError, match=field):
        SqlCatalog.from_descs([table, sub])
    ok = TableDesc(2, "s", (("k", T.INT),), (0,),
                   properties={"subscription": {"relation": "t", "retention_ms": 1, "start_epoch": 0}})
    assert SqlCatalog.from_descs([table, ok]).subscriptions["s"].relation == "t"
