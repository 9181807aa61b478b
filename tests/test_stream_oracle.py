"""The oracle test of the streaming engine (issue 12): random insert/delete/update streams into
two base tables, barriers (checkpoint or not) at random places, and a graph of materialized
views over them:

- ``mv_copy``  = Dml -> Materialize(t1) -> Materialize (a copy of t1);
- ``mv_pf``    = t1 -> hash exchange (2 actors, by id) -> Project(id, a*2+1, upper(b)) ->
                 Filter(a2 > 10 OR b IS NULL) -> Materialize (each actor owns half the vnodes);
- ``mv_union`` = Union(Project(0 AS tag, t1.*), Project(1 AS tag, t2.*)) -> Materialize(tag, id).

After every checkpoint each MV, read at the committed epoch through ``StorageTable``, equals the
same computation in plain Python over a model of the base tables (a dict per table) at that
point; so does each base table. Also across a crash: the runtime is aborted with writes after
the last checkpoint, the store closed and reopened, the same graph rebuilt at
``max_committed_epoch`` -- the MVs equal the computation over the model *as of the last
checkpoint* (the lost writes are gone from bases and MVs alike), and the stream goes on.
"""

import tempfile
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational import StateTable, StorageTable
from relational.types import DataType as T
from stream.chunk import StreamChunk
from stream.executors import Dml, Materialize
from stream.runtime import StreamRuntime
from stream.schema import Schema
from stream_graphs import BASE, MV_PF, OPTIONS, bases_of, build, changes, expected, read_all


def check(store, epoch, model) -> None:
    """Every table at ``epoch`` equals the model's computation, and every MV equals the
    computation over the base tables as stored at ``epoch``."""
    assert store.max_committed_epoch == epoch
    tables = read_all(store, epoch)
    assert tables == expected(model)
    assert tables == expected(bases_of(tables))


IDS = st.integers(0, 12)
VALUES = st.tuples(st.one_of(st.none(), st.integers(3, 6), st.integers(-20, 20)), st.one_of(st.none(), st.sampled_from(["x", "yy", "Zz"])))
STEP = st.one_of(
    st.tuples(st.just("write"), st.integers(0, 1), st.lists(st.tuples(IDS, VALUES), min_size=1, max_size=6)),
    st.tuples(st.just("barrier"), st.booleans()),
    st.tuples(st.just("crash")),
)


def run_steps(url, steps) -> None:
    model = ({}, {})
    committed = ({}, {})
    store = HummockStorage.open(url, OPTIONS)
    rt, *sources = build(store)
    rt.start()
    try:
        for step in steps:
            if step[0] == "write":
                rows = changes(model[step[1]], step[2])
                rt.write(sources[step[1]], StreamChunk.from_rows(BASE, rows))
            elif step[0] == "barrier":
                barrier = rt.barrier(checkpoint=step[1])
                if step[1]:
                    check(store, barrier.prev_epoch, model)
                    committed = tuple(dict(m) for m in model)
            else:   # crash: drop what is not committed, reopen, rebuild, resume
                rt.abort()
                store.close()
                store = HummockStorage.open(url, OPTIONS)
                model = tuple(dict(m) for m in committed)
                if store.max_committed_epoch:
                    check(store, store.max_committed_epoch, model)
                rt, *sources = build(store)
                rt.start()
        epoch = rt.flush()
        check(store, epoch, model)
        rt.stop()
    finally:
        rt.abort()
        store.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=40)
@given(st.lists(STEP, max_size=25))
def test_mvs_equal_the_batch_computation_after_every_checkpoint_and_crash(steps):
    run_steps(f"memory://oracle-{uuid.uuid4().hex[:10]}", steps)


def test_kill_and_reopen_on_a_local_store_resumes_at_the_committed_epoch():
    """Deterministic: three epochs, a crash with uncommitted writes, recovery, more writes."""
    steps = [("write", 0, [(1, (5, "x")), (2, (1, None)), (3, (7, "yy"))]), ("write", 1, [(1, (0, "q"))]),
             ("barrier", True),
             ("write", 0, [(1, (6, "x")), (2, (None, None))]), ("barrier", False),
             ("write", 0, [(4, (20, "Zz"))]), ("barrier", True),
             ("write", 0, [(3, (None, None)), (5, (9, None))]), ("write", 1, [(2, (3, "w"))]),
             ("crash",),
             ("write", 0, [(3, (None, None)), (6, (11, "x"))]), ("barrier", True), ("crash",), ("crash",),
             ("write", 1, [(1, (None, None))])]
    with tempfile.TemporaryDirectory() as tmp:
        run_steps(tmp + "/store", steps)


def test_a_table_without_pk_gets_row_ids_that_stay_unique_across_a_restart():
    schema = Schema([("v", T.VARCHAR), ("_row_id", T.BIGINT)])

    def graph(store):
        rt = StreamRuntime(store)
        src = rt.source("t", schema, [1])
        table = StateTable(store, 9, schema.pairs(), [1], dist_key_indices=[1])
        rt.actor(Materialize(Dml(src.executor, schema, [1], row_id_index=1), table))
        return rt, src

    def rows(store, epoch):
        reader = StorageTable(store, 9, schema.pairs(), [1], dist_key_indices=[1])
        return sorted((r["_row_id"], r["v"]) for b in reader.batch_iter(epoch) for r in b.to_pylist())

    with tempfile.TemporaryDirectory() as tmp:
        with HummockStorage.open(tmp + "/s", OPTIONS) as store:
            rt, src = graph(store)
            rt.start()
            rt.write(src, StreamChunk.from_rows(schema, [("+", ("a", None)), ("+", ("a", None))]))
            first = rows(store, rt.flush())
            rt.write(src, StreamChunk.from_rows(schema, [("-", ("a", first[0][0]))]))
            rt.stop()
        with HummockStorage.open(tmp + "/s", OPTIONS) as store:
            rt, src = graph(store)
            rt.start()
            rt.write(src, StreamChunk.from_rows(schema, [("+", ("b", None))] * 3))
            after = rows(store, rt.flush())
            rt.stop()
    assert [v for _, v in after] == ["a", "b", "b", "b"] and after[0] == first[1]
    assert len({i for i, _ in after}) == 4 and min(i for i, _ in after[1:]) > first[1][0]


@pytest.mark.parametrize("interval_ms", [5])
def test_the_barrier_loop_checkpoints_by_itself(interval_ms):
    import time
    with HummockStorage.open("memory://", OPTIONS) as store:
        rt, s1, _ = build(store, barrier_interval_ms=interval_ms, checkpoint_frequency=2)
        rt.start()
        model = ({}, {})
        rt.write(s1, StreamChunk.from_rows(BASE, changes(model[0], [(1, (9, "x"))])))
        deadline = time.monotonic() + 30
        while read_all(store, store.max_committed_epoch)[MV_PF] != expected(model)[MV_PF]:
            assert time.monotonic() < deadline, "no checkpoint came"
            time.sleep(0.01)
        epoch = store.max_committed_epoch   # later ticks may commit more (empty) epochs meanwhile
        assert read_all(store, epoch) == expected(model)
        rt.stop()
