"""The stream oracle for TopN, GroupTopN and DynamicFilter (issue 12): random insert/delete/update
streams into the two base tables of tests/stream_graphs.py, random barriers, crashes, and a
memory budget that is sometimes tiny (caches evict and refill), with these MVs over them:

- ``mv_top``  = TopN(t1 ORDER BY a DESC NULLS LAST, b LIMIT 3 OFFSET 1);
- ``mv_gtop`` = t1 -> hash exchange by b (2 actors, each owning half the vnodes of the top-N
                state) -> GroupTopN(PARTITION BY b ORDER BY a NULLS FIRST LIMIT 2 WITH TIES) ->
                merge -> Materialize;
- ``mv_df``   = DynamicFilter(t1 WHERE a >= (SELECT a FROM t2 WHERE id = 0)), the right side a
                one-row stream (t2 filtered on id = 0).

After every checkpoint each MV read at the committed epoch equals the plain-Python computation
(tests/stream_topn_model.py) over the base tables at that epoch, and over the model; after a
crash (abort + reopen + rebuild) the same at ``max_committed_epoch``, and the stream goes on.
"""

import tempfile
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational import StateTable, StorageTable
from relational.memcomparable import OrderType
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import Dml, Filter, Materialize, Project
from stream.executors.dynamic_filter import DynamicFilter, dynamic_filter_left_table, dynamic_filter_right_table
from stream.executors.top_n import GroupTopN, TopN, top_n_state_table
from stream.expr import Cmp, Col, Lit
from stream.runtime import StreamRuntime
from stream.runtime.dispatch import vnode_bitmaps
from stream.schema import Schema
from stream_graphs import BASE, OPTIONS
from stream_topn_model import passes, top_n

T1, T2, MV_TOP, MV_GTOP, MV_DF = 1, 2, 11, 12, 13
TOP_ORDER = [(1, OrderType(True, False)), (2, OrderType.ASC)]
GTOP_ORDER = [(1, OrderType(False, True))]
RIGHT = Schema([("id", T.BIGINT), ("a", T.INT)])


def build(store, budget: MemoryBudget):
    rt = StreamRuntime(store, channel_capacity=4)

    def base(table_id, pk=(0,)):
        return StateTable(store, table_id, BASE.pairs(), list(pk), dist_key_indices=[0])

    s1, s2 = rt.source("t1", BASE, [0]), rt.source("t2", BASE, [0])
    a1 = rt.actor(Checked(Materialize(Dml(s1.executor, BASE, [0]), base(T1), identity="Materialize(t1)")))
    a2 = rt.actor(Checked(Materialize(Dml(s2.executor, BASE, [0]), base(T2), identity="Materialize(t2)")))
    [head] = rt.exchange([a1], 1, "simple")
    top = TopN(head, top_n_state_table(store, 21, BASE, [0], TOP_ORDER), TOP_ORDER, 3, offset=1, budget=budget,
               cache_extra=1)
    rt.actor(Materialize(Checked(top), base(MV_TOP)))
    groups = []
    for head, vnodes in zip(rt.exchange([a1], 2, "hash", key=[2]), vnode_bitmaps(2)):
        table = top_n_state_table(store, 22, BASE, [0], GTOP_ORDER, [2], vnodes=vnodes)
        groups.append(rt.actor(Checked(GroupTopN(head, table, GTOP_ORDER, 2, group_key=[2], with_ties=True,
                                                 budget=budget, cache_extra=1))))
    [merged] = rt.exchange(groups, 1, "simple")
    rt.actor(Materialize(merged, base(MV_GTOP, (2, 0))))   # keyed as GroupTopN's stream key
    [left] = rt.exchange([a1], 1, "simple")
    [t2] = rt.exchange([a2], 1, "simple")
    right = Project(Filter(t2, Cmp("=", Col(0, T.BIGINT), Lit(0, T.BIGINT))), [Col(0, T.BIGINT), Col(1, T.INT)],
                    names=["id", "a"])
    df = DynamicFilter(left, right, 1, ">=", dynamic_filter_left_table(store, 23, BASE, [0], 1),
                       dynamic_filter_right_table(store, 24, RIGHT), right_col=1)
    rt.actor(Materialize(Checked(df), base(MV_DF)))
    return rt, s1, s2


def expected(model) -> dict:
    t1, t2 = model
    value = t2[0][1] if 0 in t2 else None
    return {T1: sorted(t1.values()), T2: sorted(t2.values()),
            MV_TOP: sorted(top_n(t1.values(), TOP_ORDER, 3, 1)),
            MV_GTOP: sorted(top_n(t1.values(), GTOP_ORDER, 2, 0, [2], [0], True)),
            MV_DF: sorted(r for r in t1.values() if passes(">=", r[1], value))}


def read_all(store, epoch) -> dict:
    out = {}
    for table_id in (T1, T2, MV_TOP, MV_GTOP, MV_DF):
        pk = [2, 0] if table_id == MV_GTOP else [0]
        reader = StorageTable(store, table_id, BASE.pairs(), pk, dist_key_indices=[0])
        out[table_id] = sorted(tuple(r.values()) for b in reader.batch_iter(epoch) for r in b.to_pylist())
    return out


def check(store, epoch, model) -> None:
    assert store.max_committed_epoch == epoch
    tables = read_all(store, epoch)
    assert tables == expected(model)
    assert tables == expected(({r[0]: r for r in tables[T1]}, {r[0]: r for r in tables[T2]}))


def changes(model: dict, items) -> list:
    """Consistent changes on ``model`` (updated in place): a new id is inserted, an existing one
    deleted when its item says so (a third of the time), else updated."""
    out = []
    for i, (a, b), *delete in items:
        old, new = model.get(i), (i, a, b)
        if old is None:
            out.append(("+", new))
            model[i] = new
        elif (delete and delete[0]) or (not delete and a is None and b is None):
            out.append(("-", old))
            del model[i]
        elif old != new:
            out += [("U-", old), ("U+", new)]
            model[i] = new
    return out


IDS = st.integers(0, 24)
DELETE = st.integers(0, 2).map(lambda k: k == 0)
VALUES = st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.one_of(st.none(), st.sampled_from(["x", "yy", "Zz"])))
STEP = st.one_of(
    st.tuples(st.just("write"), st.just(0), st.lists(st.tuples(IDS, VALUES, DELETE), min_size=1, max_size=12)),
    st.tuples(st.just("write"), st.just(1), st.lists(st.tuples(st.integers(0, 2), VALUES, DELETE), min_size=1,
                                                      max_size=3)),
    st.tuples(st.just("barrier"), st.booleans()),
    st.tuples(st.just("crash")),
)


def run_steps(url, steps, capacity: int) -> None:
    model, committed = ({}, {}), ({}, {})
    store = HummockStorage.open(url, OPTIONS)
    budget = MemoryBudget(capacity)
    rt, *sources = build(store, budget)
    rt.start()
    try:
        for step in steps:
            if step[0] == "write":
                rt.write(sources[step[1]], StreamChunk.from_rows(BASE, changes(model[step[1]], step[2])))
            elif step[0] == "barrier":
                barrier = rt.barrier(checkpoint=step[1])
                if step[1]:
                    check(store, barrier.prev_epoch, model)
                    committed = tuple(dict(m) for m in model)
            else:
                rt.abort()
                store.close()
                store = HummockStorage.open(url, OPTIONS)
                model = tuple(dict(m) for m in committed)
                if store.max_committed_epoch:
                    check(store, store.max_committed_epoch, model)
                budget = MemoryBudget(capacity)
                rt, *sources = build(store, budget)
                rt.start()
        check(store, rt.flush(), model)
        rt.stop()
        budget._check()
    finally:
        rt.abort()
        store.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=60, deadline=None)
@given(st.lists(STEP, max_size=25), st.sampled_from([0, 1500, 1 << 24]))
def test_top_n_and_dynamic_filter_mvs_equal_the_batch_computation(steps, capacity):
    run_steps(f"memory://topn-oracle-{uuid.uuid4().hex[:10]}", steps, capacity)


def test_kill_and_reopen_on_a_local_store():
    steps = [("write", 0, [(i, (i % 4, ["x", "yy", None][i % 3])) for i in range(12)]),
             ("write", 1, [(0, (2, "q"))]), ("barrier", True),
             ("write", 0, [(1, (None, None)), (2, (5, "x"))]), ("write", 1, [(0, (1, "q"))]), ("barrier", False),
             ("write", 0, [(13, (5, "Zz"))]), ("barrier", True),
             ("write", 0, [(3, (None, None)), (4, (0, None))]), ("write", 1, [(0, (None, None))]), ("crash",),
             ("write", 0, [(5, (None, None)), (6, (5, "x"))]), ("write", 1, [(0, (4, "q"))]), ("barrier", True),
             ("crash",), ("write", 0, [(7, (None, None))]), ("write", 1, [(0, (None, None))])]
    with tempfile.TemporaryDirectory() as tmp:
        run_steps(tmp + "/store", steps, 1500)
