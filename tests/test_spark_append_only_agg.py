"""The Spark runtime's tasks build an aggregate over an append-only input exactly as the local
runtime does (without Spark: planning and building only). The planner decides append-only-ness
once per Agg node, at id allocation over the whole plan; a fragment's copy of the node, whose
input is an edge, keeps that decision, so the executor takes the ids the allocation counted
(one per append-only max, not the retractable layout's two)."""

from hummock import HummockStorage
import sql
from sql.plan import nodes as P
from sql.spark_pipeline.fragments import plan_pipeline
from sql.spark_pipeline.task import TaskBuilder, fragment_executor
from stream.executors import HashAgg


def _aggs(ex):
    out, todo = [], [ex]
    while todo:
        e = todo.pop()
        if isinstance(e, HashAgg):
            out.append(e)
        todo += list(getattr(e, "inputs", ())) or ([e.input] if hasattr(e, "input") else [])
    return out


def test_fragments_build_append_only_aggregates_with_the_allocated_ids():
    from bench.nexmark import feed
    from bench.nexmark.queries import QUERIES
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        feed.setup(conn, [QUERIES["q7"], QUERIES["q4"]])
        plan = plan_pipeline(conn.db.catalog, conn.db.plan_of)
        store = HummockStorage.open("memory://")
        built = []
        for frag in plan.fragments:
            aggs_in_plan = [n for n in P.walk(frag.plan) if isinstance(n, P.Agg)]
            executors = _aggs(fragment_executor(frag, TaskBuilder(store, {}, [])))
            assert len(executors) == len(aggs_in_plan)
            for node, ex in zip(sorted(aggs_in_plan, key=lambda n: len(n._state_ids)),
                                sorted(executors, key=lambda e: len(e.state_tables()))):
                assert ex.append_only == node._append_only
                assert len(ex.state_tables()) == len(node._state_ids)
                built.append((frag.relation, ex.append_only))
    # q7's max(price) per TUMBLE window reads bids through the window: append-only; q4's
    # max(price) per auction reads a join (retractable), and its avg reads that aggregate
    assert ("nexmark_q7", True) in built and ("nexmark_q4", False) in built, built
