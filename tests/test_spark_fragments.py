"""Planning of the Spark runtime (sql/spark_pipeline/fragments.py), without Spark: the cut of
every catalog's plans into fragments, edges and stages keeps the invariants the driver and the
tasks rely on, for Nexmark q4/q5/q7 and the MVs of tests/test_spark_pipeline.py:

- every state table (a relation's, an MV's internal ones) belongs to exactly one fragment, so
  two tasks never write one key;
- a fragment's leaves are exactly its input edges; edges name their producer and consumer;
  fragments are in topological order;
- stages increase along every exchange; a local edge joins fragments of one stage and carries
  its producer's distribution; source edges feed stage 1;
- inside a fragment every stateful node gets its input in the distribution it needs (re-derived
  from the leaves' edges), a relation's Materialize is routed by its pk;
- ``describe()`` is deterministic (equal for two databases with the same DDL) and its format is
  pinned on a small catalog.

The catalogs are built by in-process databases (``:memory:``); ``plan_pipeline`` only reads them.
"""

from __future__ import annotations

from collections import Counter

import pytest

import sql
from sql.plan import nodes as P
from sql.spark_pipeline.fragments import (HASH, SINGLE, Dist, EdgeScan, _provided, _required, describe,
                                          plan_pipeline)
from test_spark_pipeline import DDL, MVS


def _nexmark(conn, names):
    from bench.nexmark import feed
    from bench.nexmark.queries import QUERIES
    feed.setup(conn, [QUERIES[n] for n in names])


def _workload(conn):
    for stmt in DDL:
        conn.execute(stmt)
    for name, select in MVS.items():
        conn.execute(f"CREATE MATERIALIZED VIEW {name} AS {select}")


CATALOGS = {
    "nexmark_q4_q5_q7": lambda conn: _nexmark(conn, ("q4", "q5", "q7")),
    "nexmark_all": lambda conn: _nexmark(conn, ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8")),
    "workload": _workload,
}


@pytest.fixture(params=sorted(CATALOGS))
def planned(request):
    conn = sql.connect(":memory:", barrier_interval_ms=0)
    try:
        CATALOGS[request.param](conn)
        yield request.param, conn.db.catalog, plan_pipeline(conn.db.catalog, conn.db.plan_of)
    finally:
        conn.close()


def _leaves(frag):
    return [n for n in P.walk(frag.plan) if isinstance(n, EdgeScan)]


def test_every_state_table_belongs_to_exactly_one_fragment(planned):
    _, catalog, plan = planned
    owner = Counter()
    for frag in plan.fragments:
        for node in P.walk(frag.plan):
            for tid in getattr(node, "_state_ids", None) or ():
                owner[tid] += 1
                assert tid in catalog.get(frag.relation).internal_ids, (frag.id, tid)
        if frag.materialize is not None:
            owner[frag.materialize.table_id] += 1
            assert frag.materialize.name == frag.relation
    expected = Counter()
    for rel in catalog.ordered():
        expected[rel.table_id] += 1
        for tid in getattr(rel, "internal_ids", None) or ():
            expected[tid] += 1
    assert owner == expected


def test_leaves_match_edges_and_order_is_topological(planned):
    _, catalog, plan = planned
    assert [f.id for f in plan.fragments] == list(range(len(plan.fragments)))
    for frag in plan.fragments:
        leaves = [leaf.relation.edge_id for leaf in _leaves(frag)]
        assert sorted(leaves) == sorted(frag.inputs) and len(set(leaves)) == len(leaves), frag.id
        for e in frag.inputs:
            edge = plan.edges[e]
            assert edge.consumer == frag.id
            if edge.producer is not None:
                assert edge.producer < frag.id and e in plan.fragments[edge.producer].outputs
        for e in frag.outputs:
            assert plan.edges[e].producer == frag.id
    for edge in plan.edges.values():   # every edge is read by exactly one leaf
        assert sum(e == edge.id for f in plan.fragments for e in f.inputs) == 1
    tables = {rel.name for rel in catalog.ordered() if rel.kind == "table"}
    assert set(plan.source_edges) == tables
    for name, e in plan.source_edges.items():
        edge = plan.edges[e]
        assert edge.producer is None and edge.table == name
        consumer = plan.fragments[edge.consumer]
        assert consumer.stage == 1 and consumer.materialize is not None and consumer.materialize.name == name
    assert set(plan.relation_output) == {rel.name for rel in catalog.ordered()}
    for name, fid in plan.relation_output.items():
        frag = plan.fragments[fid]
        assert frag.relation == name and frag.materialize is not None and frag.materialize.name == name


def test_stages_and_local_edges(planned):
    _, catalog, plan = planned
    assert plan.stages == max(f.stage for f in plan.fragments)
    assert sorted(f.id for s in range(1, plan.stages + 1) for f in plan.fragments_of_stage(s)) == \
        [f.id for f in plan.fragments]
    for edge in plan.edges.values():
        if edge.producer is None:
            assert not edge.local
            continue
        producer, consumer = plan.fragments[edge.producer], plan.fragments[edge.consumer]
        if edge.local:
            assert producer.stage == consumer.stage
            assert edge.fusible and edge.dist == producer.dist, edge
        else:
            assert consumer.stage > producer.stage, edge
        if not edge.fusible:   # rows the producer's output is not routed by always move
            assert not edge.local and consumer.stage == producer.stage + 1 or consumer.stage > producer.stage + 1
    for frag in plan.fragments:
        assert frag.single == (frag.dist is not None and frag.dist.kind == SINGLE)


def _derive(node, edges):
    """The distribution ``node``'s output has, checking every stateful node's inputs."""
    if isinstance(node, EdgeScan):
        return edges[node.relation.edge_id].dist
    got = [_derive(child, edges) for child in node.inputs]
    need = _required(node)
    if need is not None:
        assert got == need, (node.label(), got, need)
    return _provided(node, got)


def test_stateful_nodes_get_the_distribution_they_need(planned):
    _, catalog, plan = planned
    for frag in plan.fragments:
        out = _derive(frag.plan, plan.edges)
        assert out == frag.dist, (frag.id, out, frag.dist)
        if frag.materialize is not None:
            assert frag.dist == Dist.of_key(frag.materialize.pk_indices), frag.id
            if frag.dist.kind == HASH:
                assert all(0 <= c < len(frag.materialize.desc.columns) for c in frag.dist.cols)


def test_describe_is_deterministic(planned):
    name, catalog, plan = planned
    text = describe(plan)
    assert len(text.splitlines()) == len(plan.fragments)
    conn = sql.connect(":memory:", barrier_interval_ms=0)
    try:
        CATALOGS[name](conn)
        assert describe(plan_pipeline(conn.db.catalog, conn.db.plan_of)) == text
        assert describe(plan_pipeline(conn.db.catalog, conn.db.plan_of)) == text   # plan_of is cached
    finally:
        conn.close()


SMALL_DESCRIBE = """\
stage 1 fragment 0 [t] dist=hash[2] in=[0*] out=[2, 4] -> Materialize(t)
stage 1 fragment 1 [p] dist=hash[0] in=[1*] out=[6] -> Materialize(p)
stage 1 fragment 2 [m] dist=hash[2] in=[2] out=[3]
stage 2 fragment 3 [m] dist=hash[0] in=[3*] out=[8] -> Materialize(m)
stage 1 fragment 4 [g] dist=hash[0] in=[4] out=[5]
stage 2 fragment 5 [g] dist=single in=[5*] out=[] -> Materialize(g)
stage 1 fragment 6 [j] dist=hash[0] in=[6] out=[7]
stage 2 fragment 7 [j] dist=? in=[7*, 8] out=[9]
stage 3 fragment 8 [j] dist=hash[0, 2] in=[9*] out=[] -> Materialize(j)"""


def test_describe_of_a_small_catalog():
    """The format (stage, fragment, relation, distribution, inputs with ``*`` for exchanges,
    outputs, Materialize) on a grouped and a global aggregate and a join of a table with an MV."""
    with sql.connect(":memory:", barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (k INT, v INT)")
        conn.execute("CREATE TABLE p (id INT PRIMARY KEY, k INT)")
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k")
        conn.execute("CREATE MATERIALIZED VIEW g AS SELECT count(*) AS c FROM t")
        conn.execute("CREATE MATERIALIZED VIEW j AS SELECT p.id, m.c FROM p JOIN m ON p.k = m.k")
        plan = plan_pipeline(conn.db.catalog, conn.db.plan_of)
        # structure first (what the golden text says, independent of the format)
        assert plan.stages == 3
        j = plan.fragments[plan.relation_output["j"]]
        assert j.dist == Dist(HASH, (0, 2)) and j.stage == 3
        assert plan.fragments[plan.relation_output["g"]].single
        # the join reads m's output in m's own task (m is routed by k, the join key)
        m_out = plan.fragments[plan.relation_output["m"]].outputs
        assert [plan.edges[e].local for e in m_out] == [True]
        assert describe(plan) == SMALL_DESCRIBE
