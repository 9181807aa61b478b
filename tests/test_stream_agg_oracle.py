"""The aggregation oracle (issue 12): random insert/delete/update streams into a base table,
random barriers (checkpoint or not) and crashes, and three aggregation MVs over it:

- ``mv_by_b`` = t1 -> HashAgg(GROUP BY b: count(*), count(a), sum(a), avg(a), min(a), max(a),
  count(DISTINCT a), count(*) FILTER (WHERE a > 0)) -> Materialize (NULL b is a group);
- ``mv_by_a`` = t1 -> hash exchange by a (2 actors, each owning half the vnodes) ->
  HashAgg(GROUP BY a: count(*), min(b), max(b)) -> Materialize;
- ``mv_all``  = t1 -> SimpleAgg(count(*), sum(a), max(a), min(b)) -> Materialize (one row).

After every checkpoint each MV, read at the committed epoch, equals the same aggregation in
plain Python over the model of t1 at that point; after a crash (abort with uncommitted writes,
reopen, rebuild at ``max_committed_epoch``) it equals the aggregation over the model as of the
last checkpoint, and the stream goes on. Some examples give the executors a tiny memory budget
and min/max caches of one or two values, so groups and extremes are evicted and read again.
"""

import decimal
import tempfile
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational import StateTable, StorageTable
from relational.arrow import to_pylist
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import StreamChunk
from stream.executor import Checked
from stream.executors import AggCall, Dml, HashAgg, Materialize, SimpleAgg, agg_table_count
from stream.executors.agg_call import numeric_div
from stream.expr import Cmp, Col, Lit
from stream.runtime import StreamRuntime
from stream.runtime.dispatch import vnode_bitmaps
from stream_graphs import BASE, OPTIONS, changes

T1, MV_BY_B, MV_BY_A, MV_ALL = 1, 2, 3, 4


def by_b_calls():
    return [AggCall("count"), AggCall("count", 1), AggCall("sum", 1), AggCall("avg", 1), AggCall("min", 1),
            AggCall("max", 1), AggCall("count", 1, distinct=True),
            AggCall("count", filter=Cmp(">", Col(1, T.INT), Lit(0, T.INT)))]


def by_a_calls():
    return [AggCall("count"), AggCall("min", 2), AggCall("max", 2)]


def all_calls():
    return [AggCall("count"), AggCall("sum", 1), AggCall("max", 1), AggCall("min", 2)]


def build(store, tiny: bool):
    rt = StreamRuntime(store, channel_capacity=4)
    budget = MemoryBudget(3000 if tiny else 1 << 20)
    kw = {"budget": budget, "extreme_cache_rows": 1 if tiny else 3}
    src = rt.source("t1", BASE, [0])
    t1 = StateTable(store, T1, BASE.pairs(), [0], dist_key_indices=[0])
    base = rt.actor(Checked(Materialize(Dml(src.executor, BASE, [0]), t1, identity="Materialize(t1)")))

    def mv(agg, table_id, pk, vnodes=None):
        table = StateTable(store, table_id, agg.schema.pairs(), pk, dist_key_indices=pk or None, vnodes=vnodes)
        return Materialize(Checked(agg), table)

    [head] = rt.exchange([base], 1, "simple")
    calls = by_b_calls()
    rt.actor(mv(HashAgg(head, [2], calls, store, range(100, 100 + agg_table_count(calls)), **kw), MV_BY_B, [0]))
    for i, (head, vnodes) in enumerate(zip(rt.exchange([base], 2, "hash", key=[1]), vnode_bitmaps(2))):
        calls = by_a_calls()
        agg = HashAgg(head, [1], calls, store, range(200, 200 + agg_table_count(calls)), vnodes=vnodes, **kw)
        rt.actor(mv(agg, MV_BY_A, [0], vnodes))
    [head] = rt.exchange([base], 1, "simple")
    calls = all_calls()
    rt.actor(mv(SimpleAgg(head, calls, store, range(300, 300 + agg_table_count(calls)), **kw), MV_ALL, []))
    return rt, src


def _avg(values):
    return numeric_div(decimal.Decimal(sum(values)), len(values)) if values else None


def expected(model: dict) -> dict:
    rows = list(model.values())
    by_b, by_a = {}, {}
    for r in rows:
        by_b.setdefault(r[2], []).append(r)
        by_a.setdefault(r[1], []).append(r)
    mv_b = []
    for b, group in by_b.items():
        a = [r[1] for r in group if r[1] is not None]
        mv_b.append((b, len(group), len(a), sum(a) if a else None, _avg(a), min(a, default=None),
                     max(a, default=None), len(set(a)), sum(1 for v in a if v > 0)))
    mv_a = []
    for a, group in by_a.items():
        b = [r[2] for r in group if r[2] is not None]
        mv_a.append((a, len(group), min(b, default=None), max(b, default=None)))
    a = [r[1] for r in rows if r[1] is not None]
    b = [r[2] for r in rows if r[2] is not None]
    mv_all = [(len(rows), sum(a) if a else None, max(a, default=None), min(b, default=None))]
    return {MV_BY_B: sorted(mv_b, key=repr), MV_BY_A: sorted(mv_a, key=repr), MV_ALL: mv_all}


def read_all(store, epoch) -> dict:
    out = {}
    for table_id, calls, key in ((MV_BY_B, by_b_calls(), [("b", T.VARCHAR)]), (MV_BY_A, by_a_calls(), [("a", T.INT)]),
                                 (MV_ALL, all_calls(), [])):
        schema = key + [(f"agg{j}", c.bind(BASE).return_type) for j, c in enumerate(calls)]
        pk = [0] if key else []
        reader = StorageTable(store, table_id, schema, pk, dist_key_indices=pk or None)
        types = [t for _, t in schema]
        rows = [row for batch in reader.batch_iter(epoch)
                for row in zip(*[to_pylist(batch.column(i), t) for i, t in enumerate(types)])]
        out[table_id] = sorted(rows, key=repr) if key else rows
    return out


def check(store, epoch, model) -> None:
    assert read_all(store, epoch) == expected(model)


IDS = st.integers(0, 12)
VALUES = st.tuples(st.one_of(st.none(), st.integers(3, 6), st.integers(-20, 20)),
                   st.one_of(st.none(), st.sampled_from(["x", "yy", "Zz"])))
STEP = st.one_of(
    st.tuples(st.just("write"), st.lists(st.tuples(IDS, VALUES), min_size=1, max_size=8)),
    st.tuples(st.just("barrier"), st.booleans()),
    st.tuples(st.just("crash")),
)


def run_steps(url, steps, tiny: bool) -> None:
    model, committed = {}, {}
    store = HummockStorage.open(url, OPTIONS)
    rt, src = build(store, tiny)
    rt.start()
    try:
        for step in steps:
            if step[0] == "write":
                rt.write(src, StreamChunk.from_rows(BASE, changes(model, step[1])))
            elif step[0] == "barrier":
                barrier = rt.barrier(checkpoint=step[1])
                if step[1]:
                    check(store, barrier.prev_epoch, model)
                    committed = dict(model)
            else:
                rt.abort()
                store.close()
                store = HummockStorage.open(url, OPTIONS)
                model = dict(committed)
                if store.max_committed_epoch:
                    check(store, store.max_committed_epoch, model)
                rt, src = build(store, tiny)
                rt.start()
        check(store, rt.flush(), model)
        rt.stop()
    finally:
        rt.abort()
        store.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=40, deadline=None)
@given(st.lists(STEP, max_size=25), st.booleans())
def test_aggregation_mvs_equal_the_batch_computation_after_every_checkpoint_and_crash(steps, tiny):
    run_steps(f"memory://agg-oracle-{uuid.uuid4().hex[:10]}", steps, tiny)


def test_aggregations_survive_a_kill_and_reopen_on_a_local_store():
    steps = [("write", [(1, (5, "x")), (2, (1, None)), (3, (7, "yy")), (4, (5, "x"))]), ("barrier", True),
             ("write", [(1, (6, "x")), (2, (None, None))]), ("barrier", False),
             ("write", [(4, (20, "Zz")), (5, (-3, "x"))]), ("barrier", True),
             ("write", [(3, (None, None)), (5, (9, None))]), ("crash",),
             ("write", [(3, (None, None)), (6, (11, "x")), (1, (None, None))]), ("barrier", True), ("crash",),
             ("write", [(4, (None, None)), (6, (None, None)), (5, (None, None))])]
    with tempfile.TemporaryDirectory() as tmp:
        run_steps(tmp + "/store", steps, tiny=True)
