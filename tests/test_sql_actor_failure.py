"""A stream-graph failure that is not a data error (an actor that raises, a checkpoint the store
refuses) never silently drops acknowledged writes (sql/database.py, "Graph failures"; docs/sql.md,
"Errors"): the graph is rebuilt from the last checkpoint, every acknowledged statement not yet
committed is written again, and only statements whose own data fails the graph again are lost
-- named, to every session, once. The rebuilt graph never publishes the dead graph's partial
epochs (no duplicated rows, no MV torn from its tables), and a failed DDL leaves no catalog
record behind. Failures are injected into one MV's Project executor.
"""

import time

import pytest

import sql
from sql.errors import ExecutionError, LostWritesError
from sql.session import Connection
from stream.chunk import StreamChunk
from stream.errors import CheckpointFailedError
from stream.executors.project import Project
from stream.runtime import StreamRuntime
from stream.runtime.runtime import WriteTicket
from stream.schema import Schema
from relational.types import DataType as T


@pytest.fixture
def conn():
    c = sql.connect(":memory:", barrier_interval_ms=0)
    c.execute("CREATE TABLE t (a BIGINT, b INT)")
    c.execute("CREATE TABLE u (x INT)")
    c.execute("CREATE MATERIALIZED VIEW m AS SELECT a + 1 AS q FROM t")
    c.execute("INSERT INTO t VALUES (1, 1)")
    c.execute("FLUSH")
    yield c
    c.close()


def inject(monkeypatch, bad=666, times=None):
    """Project.on_chunk (only MV ``m`` has a Project) raises on a chunk holding ``bad`` in its
    first column: every time, or the first ``times`` times (a transient failure)."""
    orig = Project.on_chunk
    left = [times]

    def on_chunk(self, chunk):
        if bad in chunk.columns[0].to_pylist() and (left[0] is None or left[0] > 0):
            if left[0] is not None:
                left[0] -= 1
            raise RuntimeError("injected failure")
        return orig(self, chunk)
    monkeypatch.setattr(Project, "on_chunk", on_chunk)


def wait_failed(db, timeout=10.0):
    end = time.monotonic() + timeout
    while db.rt.failure is None:
        assert time.monotonic() < end, "the injected failure did not happen"
        time.sleep(0.01)


def rows(c, q):
    return sorted(c.execute(q).fetchall())


def test_a_transient_failure_keeps_every_acknowledged_row_of_every_table(conn, monkeypatch):
    inject(monkeypatch, times=1)
    conn.execute("INSERT INTO u VALUES (1)")
    conn.execute("INSERT INTO t VALUES (666, 2)")     # fails MV m's actor once
    wait_failed(conn.db)
    conn.execute("INSERT INTO u VALUES (2)")          # recovers first: nothing was lost
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM u") == [(1,), (2,)]
    assert rows(conn, "SELECT * FROM t") == [(1, 1), (666, 2)]
    assert rows(conn, "SELECT * FROM m") == [(2,), (667,)]
    assert conn.db.recoveries == 1


def test_a_failure_that_follows_a_statement_loses_only_it_and_every_session_is_told(conn, monkeypatch):
    other = Connection(conn.db)                       # a second session of the same database
    inject(monkeypatch)                               # every time: replaying 666 fails again
    conn.execute("INSERT INTO u VALUES (1)")
    other.execute("INSERT INTO t VALUES (2, 2)")
    other.execute("INSERT INTO u VALUES (7)")
    conn.execute("INSERT INTO t VALUES (666, 2)")
    wait_failed(conn.db)
    with pytest.raises(LostWritesError, match="666") as info:
        conn.execute("INSERT INTO u VALUES (3)")      # meets the failure: told, and not run
    assert info.value.statements == ["[session 1] INSERT INTO t VALUES (666, 2)"]
    assert "injected failure" in info.value.cause
    with pytest.raises(LostWritesError) as info2:     # the other session is told once ...
        other.execute("SELECT 1")
    assert info2.value.statements == info.value.statements
    assert other.execute("SELECT 1").fetchall() == [(1,)]   # ... and only once
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM u") == [(1,), (7,)]    # every other acknowledged row kept
    assert rows(conn, "SELECT * FROM t") == [(1, 1), (2, 2)]
    assert rows(conn, "SELECT * FROM m") == [(2,), (3,)]    # the MV agrees with its table
    conn.execute("INSERT INTO u VALUES (4)")                # the graph runs on
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM u") == [(1,), (4,), (7,)]


def test_a_flush_that_meets_the_failure_names_the_lost_statement_and_nothing_is_torn(conn, monkeypatch):
    """The FLUSH's checkpoint barrier passes the table actors (their epoch is in the store,
    uncommitted) while MV m fails: the rebuilt graph must not publish that epoch -- u's row
    would be there twice (once replayed) and t would hold 666 without m's 667."""
    inject(monkeypatch)
    conn.execute("INSERT INTO u VALUES (1)")
    conn.execute("INSERT INTO t VALUES (666, 2)")
    with pytest.raises(LostWritesError, match="666"):
        conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM u") == [(1,)]
    assert rows(conn, "SELECT * FROM t") == [(1, 1)]
    assert rows(conn, "SELECT * FROM m") == [(2,)]
    monkeypatch.undo()
    conn.execute("INSERT INTO t VALUES (666, 3)")   # the data itself was never the problem
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM m") == [(2,), (667,)]


def test_implicit_flush_keeps_the_statement_when_the_replay_succeeds(monkeypatch):
    c = sql.connect(":memory:", barrier_interval_ms=0, implicit_flush=True)
    try:
        c.execute("CREATE TABLE t (a BIGINT, b INT)")
        c.execute("CREATE TABLE u (x INT)")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT a + 1 AS q FROM t")
        inject(monkeypatch, times=1)
        c.execute("INSERT INTO t VALUES (666, 1)")      # its flush fails once, the replay commits
        assert rows(c, "SELECT * FROM m") == [(667,)]
        inject(monkeypatch)                              # now for good: the statement itself is lost
        with pytest.raises(LostWritesError, match=r"including this one"):
            c.execute("INSERT INTO t VALUES (666, 2)")
        c.execute("INSERT INTO u VALUES (5)")
        assert rows(c, "SELECT * FROM t") == [(666, 1)]
        assert rows(c, "SELECT * FROM u") == [(5,)]
    finally:
        c.close()


def _chunks(db, values, between=None):
    schema = Schema(list(db.catalog.get("t").desc.columns))
    for i, v in enumerate(values):
        if i and between is not None:
            between()
        yield StreamChunk.from_rows(schema, [("+", (v, 1) + (None,) * (len(schema.names) - 2))])


def test_a_write_that_meets_the_failure_goes_on_after_the_recovery(conn, monkeypatch):
    db = conn.db
    inject(monkeypatch, times=1)
    with db.statement(conn.session, "INSERT INTO t (a generator)"):
        db.write(db.catalog.get("t"), _chunks(db, [666, 10, 11], between=lambda: wait_failed(db) if
                                              db.rt.failure is None and db.recoveries == 0 else None))
    conn.execute("FLUSH")
    assert db.recoveries == 1
    assert sorted(r[0] for r in rows(conn, "SELECT * FROM t")) == [1, 10, 11, 666]
    assert rows(conn, "SELECT * FROM m") == [(2,), (11,), (12,), (667,)]


def test_a_write_whose_own_chunk_fails_again_is_lost_and_says_so(conn, monkeypatch):
    db = conn.db
    inject(monkeypatch)
    with pytest.raises(LostWritesError, match="including this one"):
        with db.statement(conn.session, "INSERT INTO t (a generator)"):
            db.write(db.catalog.get("t"), _chunks(db, [666, 10], between=lambda: wait_failed(db)))
    conn.execute("FLUSH")
    assert rows(conn, "SELECT * FROM t") == [(1, 1)]


def test_closing_a_failed_graph_keeps_the_acknowledged_rows(tmp_path, monkeypatch):
    url = str(tmp_path / "db")
    c = sql.connect(url, barrier_interval_ms=0)
    c.execute("CREATE TABLE t (a BIGINT, b INT)")
    c.execute("CREATE TABLE u (x INT)")
    c.execute("CREATE MATERIALIZED VIEW m AS SELECT a + 1 AS q FROM t")
    inject(monkeypatch, times=1)
    c.execute("INSERT INTO u VALUES (1)")
    c.execute("INSERT INTO t VALUES (666, 2)")
    wait_failed(c.db)
    c.close()   # recovers (the replay succeeds), then stops with a checkpoint
    c = sql.connect(url, barrier_interval_ms=0)
    try:
        assert rows(c, "SELECT * FROM u") == [(1,)]
        assert rows(c, "SELECT * FROM m") == [(667,)]
    finally:
        c.close()


@pytest.mark.parametrize("landed", [False, True])
def test_a_failed_checkpoint_is_recovered_without_loss_or_duplicates(conn, monkeypatch, landed):
    """The store refuses a checkpoint (or its reply is lost after it landed): the graph fails,
    is rebuilt over what the reopened store says is committed, and the rest is written again."""
    store = conn.db.store
    real = store.checkpoint

    def checkpoint(epoch):
        monkeypatch.setattr(store, "checkpoint", real)   # once
        if landed:
            real(epoch)
        raise OSError("the object store is down")
    monkeypatch.setattr(store, "checkpoint", checkpoint)
    conn.execute("INSERT INTO u VALUES (1)")
    conn.execute("INSERT INTO t VALUES (5, 5)")
    conn.execute("FLUSH")   # meets the failure, recovers, and commits everything
    assert conn.db.recoveries == 1
    assert rows(conn, "SELECT * FROM u") == [(1,)]
    assert rows(conn, "SELECT * FROM t") == [(1, 1), (5, 5)]
    assert rows(conn, "SELECT * FROM m") == [(2,), (6,)]


def test_the_dml_log_is_bounded_by_checkpoints(conn):
    conn.db.dml_log_limit_bytes = 1   # every write checkpoints: nothing waits in the log
    conn.execute("INSERT INTO u VALUES (1)")
    assert rows(conn, "SELECT * FROM u") == [(1,)]   # committed without a FLUSH
    assert not conn.db._log


def test_a_failed_create_leaves_no_catalog_record(tmp_path, monkeypatch):
    url = str(tmp_path / "db")
    c = sql.connect(url, barrier_interval_ms=0)
    try:
        c.execute("CREATE TABLE t (a BIGINT, b INT)")
        c.execute("INSERT INTO t VALUES (666, 1)")
        c.execute("FLUSH")
        inject(monkeypatch)   # the new MV's backfill fails on the existing row
        with pytest.raises(ExecutionError):
            c.execute("CREATE MATERIALIZED VIEW m AS SELECT a + 1 AS q FROM t")
        monkeypatch.undo()
        c.execute("INSERT INTO t VALUES (2, 2)")
        c.execute("FLUSH")   # must not publish the failed CREATE's epoch
        assert c.execute("SHOW MATERIALIZED VIEWS").fetchall() == []
    finally:
        c.close()
    c = sql.connect(url, barrier_interval_ms=0)
    try:
        assert c.execute("SHOW MATERIALIZED VIEWS").fetchall() == []
        assert rows(c, "SELECT * FROM t") == [(2, 2), (666, 1)]
    finally:
        c.close()


# --- the runtime's part ---------------------------------------------------------------------------

def _runtime_with_table(store):
    from stream.executors import Dml, Materialize
    from relational.state_table import StateTable
    schema = Schema([("k", T.BIGINT), ("v", T.INT)])
    rt = StreamRuntime(store)
    src = rt.source("t", schema, stream_key=[0])
    table = StateTable(store, 1, list(schema.types), [0], name="t", consistent=False)
    rt.actor(Materialize(Dml(src.executor, schema, [0]), table, "overwrite"))
    return rt, src, schema


def test_a_write_ticket_names_the_epoch_its_chunk_joined():
    from hummock import HummockStorage
    store = HummockStorage.open("memory://actor-failure-ticket")
    rt, src, schema = _runtime_with_table(store)
    try:
        rt.start()
        ticket = WriteTicket()
        rt.write(src, StreamChunk.from_rows(schema, [("+", (1, 1))]), ticket)
        committed = rt.flush()
        assert ticket.epoch is not None and ticket.durable(committed)
        assert not ticket.durable(ticket.epoch - 1)
        later = WriteTicket()
        rt.write(src, StreamChunk.from_rows(schema, [("+", (2, 1))]), later)
        rt.barrier(checkpoint=False)
        assert later.epoch > committed and not later.durable(store.max_committed_epoch)
        rt.stop()
    finally:
        rt.abort()
        store.close()


def test_a_failed_checkpoint_fails_the_graph(monkeypatch):
    from hummock import HummockStorage
    from hummock.errors import HummockError
    store = HummockStorage.open("memory://actor-failure-checkpoint")
    rt, src, schema = _runtime_with_table(store)
    try:
        rt.start()

        def refuse(epoch):
            raise HummockError("the object store is down")
        monkeypatch.setattr(store, "checkpoint", refuse)
        rt.write(src, StreamChunk.from_rows(schema, [("+", (1, 1))]))
        with pytest.raises(CheckpointFailedError, match="object store is down"):
            rt.flush()
        assert isinstance(rt.failure, CheckpointFailedError)
        with pytest.raises(CheckpointFailedError):   # writes no longer vanish into a dead graph
            rt.write(src, StreamChunk.from_rows(schema, [("+", (2, 1))]))
    finally:
        rt.abort()
        monkeypatch.undo()
        store.close()
