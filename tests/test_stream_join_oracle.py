"""The oracle for HashJoin through the runtime (issue 12): random insert/delete/update streams into
two base tables (tests/stream_graphs.py's ``BASE``: id, a INT, b VARCHAR; joined on ``a``, which
has NULLs and few values, so keys repeat on both sides), random barriers (checkpoint or not) and
crashes, and one MV per join:

- ``inner`` on a, run by two actors (both inputs hash-exchanged by a; each actor's state tables
  own half the vnodes), merged into one Materialize;
- ``left`` on a with the extra condition ``l.b IS NULL OR l.b <> r.b``;
- ``right`` on a;
- ``full`` on a with the same extra condition.

Each MV is a strict state table keyed by the join's stream key, so an inexact retraction fails
the graph. After every checkpoint each MV, read at the committed epoch, equals the join computed
in plain Python over the base-table models (and over the base tables as stored). A crash aborts
the runtime with uncommitted writes, reopens the store and rebuilds the graph at
``max_committed_epoch``: the MVs then equal the join of the models as of the last checkpoint.
Some examples give the joins a tiny MemoryBudget so their caches evict and refill.
"""

import tempfile
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational import StateTable, StorageTable
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import Dml, HashJoin, Materialize
from stream.expr import Cmp, Col, IsNull, Or
from stream.runtime import StreamRuntime
from stream.runtime.dispatch import vnode_bitmaps
from join_model import batch_join
from stream_graphs import BASE, OPTIONS, changes

T1, T2 = 1, 2
CONDITION = Or(IsNull(Col(2, T.VARCHAR)), Cmp("<>", Col(2, T.VARCHAR), Col(5, T.VARCHAR)))


def py_condition(lrow, rrow) -> bool:
    return lrow[2] is None or (rrow[2] is not None and lrow[2] != rrow[2])


JOINS = {   # mv table id: (join type, condition, parallel actors)
    10: ("inner", None, 2),
    20: ("left", CONDITION, 1),
    30: ("right", None, 1),
    40: ("full", CONDITION, 1),
}


def build(store, budget_bytes=None) -> tuple:
    """The graph of the module docstring; returns (runtime, source of t1, of t2, {mv id: (schema, pk)})."""
    rt = StreamRuntime(store, channel_capacity=4)
    budget = MemoryBudget(budget_bytes) if budget_bytes is not None else MemoryBudget()
    s1, s2 = rt.source("t1", BASE, [0]), rt.source("t2", BASE, [0])
    bases = []
    for src, table_id in ((s1, T1), (s2, T2)):
        table = StateTable(store, table_id, BASE.pairs(), [0], dist_key_indices=[0])
        bases.append(rt.actor(Checked(Materialize(Dml(src.executor, BASE, [0]), table))))
    layouts = {}
    for mv_id, (join_type, condition, parallel) in JOINS.items():
        if parallel == 1:
            heads = [tuple(rt.exchange([up], 1, "simple")[0] for up in bases)]
            vnode_sets = [None]
        else:
            lefts = rt.exchange([bases[0]], parallel, "hash", key=[1])
            rights = rt.exchange([bases[1]], parallel, "hash", key=[1])
            heads = list(zip(lefts, rights))
            vnode_sets = vnode_bitmaps(parallel)
        actors = []
        for (left, right), vnodes in zip(heads, vnode_sets):
            join = HashJoin(left, right, [1], [1], join_type, store=store,
                            table_ids=(mv_id + 1, mv_id + 2, mv_id + 3, mv_id + 4), condition=condition,
                            budget=budget, vnodes=vnodes)
            actors.append(rt.actor(Checked(join)))
        [head] = rt.exchange(actors, 1, "simple")
        table = StateTable(store, mv_id, head.schema.pairs(), head.stream_key)
        rt.actor(Materialize(Checked(head), table))
        layouts[mv_id] = (head.schema, head.stream_key)
    return rt, s1, s2, layouts


def read(store, epoch, table_id, schema, pk, dist=()) -> list:
    reader = StorageTable(store, table_id, schema.pairs(), pk, dist_key_indices=list(dist))
    return sorted((tuple(r.values()) for b in reader.batch_iter(epoch) for r in b.to_pylist()), key=repr)


def expected(model) -> dict:
    left, right = (list(m.values()) for m in model)
    return {mv_id: batch_join(left, right, [1], [1], join_type, None if cond is None else py_condition, (3, 3))
            for mv_id, (join_type, cond, _) in JOINS.items()}


def check(store, epoch, model, layouts) -> None:
    assert store.max_committed_epoch == epoch
    bases = [read(store, epoch, t, BASE, [0], [0]) for t in (T1, T2)]
    assert bases == [sorted(m.values(), key=repr) for m in model]
    got = {mv_id: read(store, epoch, mv_id, *layouts[mv_id]) for mv_id in JOINS}
    assert got == expected(model)
    assert got == expected(tuple({r[0]: r for r in rows} for rows in bases))


IDS = st.integers(0, 5)
VALUES = st.tuples(st.one_of(st.none(), st.integers(0, 2)), st.one_of(st.none(), st.sampled_from(["x", "yy"])))
WRITE = st.tuples(st.just("write"), st.integers(0, 1), st.lists(st.tuples(IDS, VALUES), min_size=1, max_size=6))
STEP = st.one_of(WRITE, WRITE, WRITE, st.tuples(st.just("barrier"), st.booleans()), st.tuples(st.just("crash")))


def run_steps(url, steps, budget_bytes=None) -> None:
    model, committed = ({}, {}), ({}, {})
    store = HummockStorage.open(url, OPTIONS)
    rt, *sources, layouts = build(store, budget_bytes)
    rt.start()
    try:
        for step in steps:
            if step[0] == "write":
                rows = changes(model[step[1]], step[2])
                rt.write(sources[step[1]], StreamChunk.from_rows(BASE, rows))
            elif step[0] == "barrier":
                barrier = rt.barrier(checkpoint=step[1])
                if step[1]:
                    check(store, barrier.prev_epoch, model, layouts)
                    committed = tuple(dict(m) for m in model)
            else:   # crash: drop what is not committed, reopen, rebuild, resume
                rt.abort()
                store.close()
                store = HummockStorage.open(url, OPTIONS)
                model = tuple(dict(m) for m in committed)
                if store.max_committed_epoch:
                    check(store, store.max_committed_epoch, model, layouts)
                rt, *sources, layouts = build(store, budget_bytes)
                rt.start()
        check(store, rt.flush(), model, layouts)
        rt.stop()
    finally:
        rt.abort()
        store.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=50, deadline=None)
@given(st.lists(STEP, max_size=25), st.sampled_from([None, None, 0, 2000]))
def test_join_mvs_equal_the_batch_join_after_every_checkpoint_and_crash(steps, budget_bytes):
    run_steps(f"memory://join-oracle-{uuid.uuid4().hex[:10]}", steps, budget_bytes)


def test_kill_and_reopen_on_a_local_store_with_a_tiny_budget():
    """Deterministic: many-to-many keys, a crash with uncommitted writes, recovery, more writes."""
    w = "write"
    steps = [(w, 0, [(1, (1, "x")), (2, (1, None)), (3, (2, "yy")), (4, (None, "x"))]),
             (w, 1, [(1, (1, "yy")), (2, (1, "x")), (3, (None, None)), (4, (3, "x"))]),
             ("barrier", True),
             (w, 0, [(1, (3, "x")), (2, (None, None))]), ("barrier", False),
             (w, 1, [(5, (2, "x")), (1, (2, "x"))]), ("barrier", True),
             (w, 0, [(3, (None, None)), (5, (1, None))]), (w, 1, [(2, (3, "yy"))]),
             ("crash",),
             (w, 1, [(4, (None, None)), (6, (1, "x"))]), ("barrier", True), ("crash",), ("crash",),
             (w, 0, [(1, (None, None)), (7, (2, "yy"))])]
    with tempfile.TemporaryDirectory() as tmp:
        run_steps(tmp + "/store", steps, budget_bytes=500)
