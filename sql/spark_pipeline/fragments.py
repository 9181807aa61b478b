"""Cutting a catalog's stream plans into fragments and stages for the Spark runtime.

Job: turn every relation of a :class:`~sql.catalog.SqlCatalog` (a table: its DML into its
Materialize; an MV: its logical plan into its Materialize) into **fragments** -- executor
chains that run together in one Spark task over the rows of one partition -- joined by
**edges**, and give each fragment a **stage** (the Spark stage it runs in).

Distribution (RisingWave's, by hash of a key): every stateful executor needs the rows of one
key on one task -- HashAgg its group, HashJoin each side's join key, a grouped TopN its group,
OverWindow its partition, a Materialize the relation's pk -- and the executors without a
group (SimpleAgg, TopN/OverWindow without one, DynamicFilter, ScalarJoin) need every row on
one task (``single``: partition 0). A node *provides* the distribution its input rows were
routed by when it keeps the key's values in its output (Project through column references,
Filter, TUMBLE/HOP, an inner or semi join its left key, an Agg its group, ...). Where a node
needs a distribution its input does not provide, the input becomes a fragment of its own and an
edge routes its output rows by the needed key: ``vnode(key) -> partition``
(``stream.runtime.dispatch.vnode_mapping``), the same hash the state tables use. Routing is
per batch, so the partition count may change between batches: state is read from the pinned
version whatever task ran a key before.

Stages: a fragment reading the batch's input rows runs in stage 1 (stage 0 routes the input);
otherwise in the latest stage of its producers, plus one when an edge must move rows between
partitions (a distribution the producer does not provide). An edge between fragments of one
stage whose distributions agree is **local**: the consumer runs after the producer in the same
task, on its output. Every other edge is an exchange (a Spark shuffle before its consumer's
stage).

Invariants: each state table (a relation's or an internal one) belongs to exactly one fragment,
so two tasks never write one key; fragments are listed in topological order; a fragment's
plan leaves are :class:`EdgeScan` nodes, one per input edge.

Callers: :mod:`sql.spark_pipeline.driver` (planning on the driver); the plans travel to the
tasks pickled (:mod:`sql.spark_pipeline.pickling`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from sql.build import IdAllocator, allocate
from sql.errors import UnsupportedError
from sql.plan import nodes as P
from sql.plan.time_window import HopWindow, TumbleWindow

HASH, SINGLE = "hash", "single"


@dataclass(frozen=True)
class Dist:
    """How rows are routed to partitions: ``hash`` of columns ``cols`` or ``single``."""
    kind: str
    cols: tuple = ()

    @staticmethod
    def of_key(cols) -> Dist:
        cols = tuple(cols)
        return Dist(HASH, cols) if cols else Dist(SINGLE)


class EdgeRelation:
    """What a fragment's leaf reads: the rows of edge ``edge_id`` (a relation-like object, so
    the leaf is a ``Scan`` that :func:`sql.build.build_plan` hands to the task's builder)."""

    kind = "edge"
    table_id = -1

    def __init__(self, edge_id: int, names, types, stream_key, n_visible: int):
        self.edge_id = edge_id
        self.name = f"__edge{edge_id}"
        self.columns = list(zip(names, types))
        self.pk_indices = list(stream_key)
        self.n_visible = n_visible


class EdgeScan(P.Scan):
    """A fragment's leaf: the rows arriving on one edge."""

    def label(self) -> str:
        return f"Edge({self.relation.edge_id})"


@dataclass
class Edge:
    id: int
    producer: int | None        # fragment id; None: the batch's input of table ``table``
    consumer: int               # fragment id
    dist: Dist                  # routing of the rows (columns of the producer's output)
    fusible: bool               # the producer's output already has this distribution
    table: str | None = None    # source edges: the table whose input this is
    local: bool = False         # set by staging


@dataclass
class Fragment:
    id: int
    relation: str               # the table or MV it belongs to
    plan: P.Node                # leaves: EdgeScan
    materialize: object = None  # the Relation whose Materialize tops this fragment, or None
    inputs: list = field(default_factory=list)    # edge ids
    outputs: list = field(default_factory=list)   # edge ids
    dist: Dist = Dist(SINGLE)   # what its output provides
    stage: int = 1
    single: bool = False        # runs on partition 0 only
    change_logs: list = field(default_factory=list)   # its Materialize's change-log specs (subscriptions)


@dataclass
class PipelinePlan:
    fragments: list             # topological order
    edges: dict                 # id -> Edge
    source_edges: dict          # table name -> edge id (the batch's input rows of that table)
    relation_output: dict       # relation name -> fragment id producing its changes
    stages: int                 # the last stage number

    def fragments_of_stage(self, stage: int) -> list:
        return [f for f in self.fragments if f.stage == stage]


def _with_inputs(node: P.Node, inputs) -> P.Node:
    out = copy.copy(node)
    out.inputs = tuple(inputs)
    if hasattr(node, "left"):
        out.left, out.right = inputs
    elif hasattr(node, "input"):
        (out.input,) = inputs
    return out


def _through_columns(dist: Dist | None, mapping: dict) -> Dist | None:
    """``dist`` over a node's input as a distribution of its output, where ``mapping`` maps
    input columns to the output columns holding the same values."""
    if dist is None or dist.kind == SINGLE:
        return dist
    cols = tuple(mapping.get(c) for c in dist.cols)
    return None if None in cols else Dist(HASH, cols)


def _required(node: P.Node) -> list | None:
    """The distribution each input of ``node`` must have, or None (stateless)."""
    if isinstance(node, P.Agg):
        return [Dist.of_key(node.group)]
    if isinstance(node, P.Join):
        if not node.left_keys:
            raise UnsupportedError("a join without an equality (nested loop) is not supported in streaming")
        return [Dist(HASH, tuple(node.left_keys)), Dist(HASH, tuple(node.right_keys))]
    if isinstance(node, (P.ScalarJoin, P.DynamicFilter)):
        return [Dist(SINGLE), Dist(SINGLE)]
    if isinstance(node, P.TopN):
        return [Dist.of_key(node.group)]
    if isinstance(node, P.OverWindow):
        return [Dist.of_key(node.partition)]
    return None


def _provided(node: P.Node, inputs: list) -> Dist | None:
    """The distribution of ``node``'s output given its inputs' (``inputs``, as routed)."""
    if isinstance(node, P.Project):
        mapping = {}
        for i, e in enumerate(node.exprs):
            if isinstance(e, P.Col):
                mapping.setdefault(e.index, i)
        return _through_columns(inputs[0], mapping)
    if isinstance(node, (P.Filter, TumbleWindow, HopWindow)):
        return inputs[0]   # every input column keeps its index
    if isinstance(node, P.Agg):
        return Dist.of_key(range(len(node.group)))
    if isinstance(node, P.Join):
        if node.kind in ("inner", "semi", "anti"):
            return Dist(HASH, tuple(node.left_keys))
        return None        # an outer join's NULL-extended rows are not routed by the left key
    if isinstance(node, (P.ScalarJoin, P.DynamicFilter)):
        return Dist(SINGLE)
    if isinstance(node, (P.TopN, P.OverWindow)):
        return inputs[0]   # routed by the group/partition, whose columns stay at their indices
    return None            # Union, anything else: not known


class _Planner:
    def __init__(self, catalog, plan_of):
        self.catalog, self.plan_of = catalog, plan_of
        self.fragments: list = []
        self.edges: dict = {}
        self.source_edges: dict = {}
        self.relation_output: dict = {}   # relation name -> (fragment id, Dist)

    def _edge(self, producer, consumer, dist, fusible, table=None) -> Edge:
        edge = Edge(len(self.edges), producer, consumer, dist, fusible, table)
        self.edges[edge.id] = edge
        if producer is not None:
            self.fragments[producer].outputs.append(edge.id)
        return edge

    def _leaf(self, edge: Edge, like: P.Node) -> EdgeScan:
        return EdgeScan(EdgeRelation(edge.id, like.names, like.types, like.stream_key, like.n_visible))

    def _fragment(self, relation: str, plan, leaves, dist, materialize=None) -> Fragment:
        """A new fragment over ``plan`` whose leaves ``leaves`` are ``[(edge, leaf)]`` with the
        edge's consumer still unset (-1)."""
        frag = Fragment(len(self.fragments), relation, plan, materialize, dist=dist)
        self.fragments.append(frag)
        for edge, _ in leaves:
            edge.consumer = frag.id
            frag.inputs.append(edge.id)
        return frag

    def _cut(self, node: P.Node, relation: str):
        """``(node', provided Dist, leaves)`` for the part of ``node`` that stays in the
        current fragment; inputs needing another distribution become fragments of their own."""
        if isinstance(node, P.Scan):
            producer, dist = self.relation_output[node.relation.name]
            edge = self._edge(producer, -1, dist, True)
            return self._leaf(edge, node), dist, [(edge, None)]
        if isinstance(node, P.Join) and getattr(node, "temporal", False):
            raise UnsupportedError("a temporal join (FOR SYSTEM_TIME AS OF PROCTIME()) in a materialized view runs "
                                   "on the in-process runtime only, not yet on the Spark runtime")
        if isinstance(node, P.Now):
            raise UnsupportedError("now() in a materialized view (a temporal filter) runs on the in-process runtime "
                                   "only, not yet on the Spark runtime")
        if isinstance(node, P.Values):
            raise UnsupportedError("a constant row source (SELECT without FROM) in a materialized view is not "
                                   "supported on the Spark runtime")
        need = _required(node)
        new_inputs, provided, leaves = [], [], []
        for i, child in enumerate(node.inputs):
            sub, dist, sub_leaves = self._cut(child, relation)
            want = need[i] if need is not None else None
            if want is not None and dist != want:
                frag = self._fragment(relation, sub, sub_leaves, dist)
                edge = self._edge(frag.id, -1, want, False)
                sub, dist, sub_leaves = self._leaf(edge, child), want, [(edge, None)]
            new_inputs.append(sub)
            provided.append(dist)
            leaves += sub_leaves
        out = _with_inputs(node, new_inputs) if node.inputs else node
        return out, _provided(node, provided), leaves

    def table(self, rel) -> None:
        dist = Dist.of_key(rel.pk_indices)
        edge = self._edge(None, -1, dist, False, table=rel.name)
        scan = P.Scan(rel)
        frag = self._fragment(rel.name, self._leaf(edge, scan), [(edge, None)], dist, materialize=rel)
        frag.change_logs = self.catalog.change_logs_of(rel.name)
        self.source_edges[rel.name] = edge.id
        self.relation_output[rel.name] = (frag.id, dist)

    def mv(self, rel) -> None:
        plan = self.plan_of(rel)
        for node, table_ids in _state_ids(plan, rel).items():
            node._state_ids = table_ids
        want = Dist.of_key(plan.stream_key)
        sub, dist, leaves = self._cut(plan, rel.name)
        if dist != want:
            frag = self._fragment(rel.name, sub, leaves, dist)
            edge = self._edge(frag.id, -1, want, False)
            sub, leaves = self._leaf(edge, plan), [(edge, None)]
        frag = self._fragment(rel.name, sub, leaves, want, materialize=rel)
        frag.change_logs = self.catalog.change_logs_of(rel.name)
        self.relation_output[rel.name] = (frag.id, want)

    def finish(self) -> PipelinePlan:
        for frag in self.fragments:   # topological: producers were made first
            stage = 1
            for e in frag.inputs:
                edge = self.edges[e]
                if edge.producer is not None:
                    prod = self.fragments[edge.producer]
                    stage = max(stage, prod.stage + (0 if edge.fusible else 1))
            frag.stage = stage
            frag.single = frag.dist is not None and frag.dist.kind == SINGLE
        for edge in self.edges.values():
            if edge.producer is not None:
                edge.local = edge.fusible and self.fragments[edge.producer].stage == self.fragments[edge.consumer].stage
        last = max((f.stage for f in self.fragments), default=0)
        return PipelinePlan(self.fragments, self.edges, self.source_edges,
                            {name: fid for name, (fid, _) in self.relation_output.items()}, last)


def _state_ids(plan: P.Node, rel) -> dict:
    """``{node: [table ids]}`` for the stateful nodes of MV ``rel``'s plan (its stored ids)."""
    by_id = allocate(plan, IdAllocator(stored=rel.internal_ids, mv_name=rel.name))
    return {n: by_id[id(n)] for n in P.walk(plan) if id(n) in by_id}


def plan_pipeline(catalog, plan_of) -> PipelinePlan:
    """Fragments, edges and stages of every relation of ``catalog`` (module docstring);
    ``plan_of(rel)`` gives an MV's logical plan (``Database.plan_of``)."""
    planner = _Planner(catalog, plan_of)
    for rel in catalog.ordered():
        if rel.kind == "table":
            planner.table(rel)
        else:
            planner.mv(rel)
    return planner.finish()


def describe(plan: PipelinePlan) -> str:
    """One line per fragment: stage, relation, distribution, edges (EXPLAIN-like, for docs and
    debugging)."""
    lines = []
    for f in plan.fragments:
        ins = ", ".join(f"{e}{'' if plan.edges[e].local else '*'}" for e in f.inputs)
        outs = ", ".join(str(e) for e in f.outputs)
        top = f" -> Materialize({f.materialize.name})" if f.materialize is not None else ""
        d = f.dist.kind + (str(list(f.dist.cols)) if f.dist and f.dist.kind == HASH else "") if f.dist else "?"
        lines.append(f"stage {f.stage} fragment {f.id} [{f.relation}] dist={d} in=[{ins}] out=[{outs}]{top}")
    return "\n".join(lines)
