"""Stream planning and building: the catalog -> a running ``StreamRuntime`` graph.

Job: for every table, a source actor ``TableSource -> Dml -> Materialize`` (conflict per ON
CONFLICT; ``_row_id`` filled by Dml for tables without a pk; a table with a connector has a
``ConnectorSource`` after its TableSource: sql/source.py; a table with a watermark has a
``WatermarkFilter`` after its Dml: sql/watermark.py); for every source read by some
relation, ``TableSource -> ConnectorSource -> Dml [-> WatermarkFilter]`` without a Materialize; for every MV, one actor running
its logical plan as executors (Project, Filter, HashAgg/SimpleAgg, HashJoin -- also for semi/anti
joins and, on a constant key, a ScalarJoin --, DynamicFilter, Union, (Ranked)GroupTopN, OverWindow) over
``Receiver`` heads fed by its upstream relations' Materialize actors (one simple dispatcher
per reader = broadcast), ending in its Materialize (which also writes the change log of each
subscription of the relation: ``SqlCatalog.change_logs_of``). A new MV (``backfill``) reads each
upstream through :class:`stream.executors.backfill.Backfill`.

Deterministic planning: internal state table ids are taken, in plan order (a depth-first walk,
inputs before their node), from an :class:`IdAllocator` -- fresh ids for a new MV, the stored
``internal_ids`` on a rebuild; a count mismatch is a CorruptionError naming the MV.

Callers: :mod:`sql.database` (rebuilds), :mod:`sql.statements` (planning a new MV, EXPLAIN).
"""

from __future__ import annotations

from hummock.errors import CorruptionError
from relational.catalog import TableDesc
from relational.state_table import StateTable
from stream.executors import Dml, Filter, HashAgg, HashJoin, Materialize, Project, SimpleAgg, Union
from stream.row_id import SQL_DML_WIDTH
from stream.executors.dynamic_filter import DynamicFilter, dynamic_filter_left_table, dynamic_filter_right_table
from stream.executors.now import NOW_SCHEMA, Now, now_state_table
from stream.executors.temporal_join import TemporalJoin
from relational.storage_table import StorageTable
from stream.executors import agg_table_count
from stream.executors.agg_call import AggCall
from stream.executors.backfill import Backfill
from stream.executors.over_window import OverWindow
from stream.executors.project_set import ProjectSet
from stream.executors.top_n import GroupTopN, RankedGroupTopN, top_n_state_table
from relational.memcomparable import OrderType
from relational.types import DataType
from stream.expr import Col, Lit
from stream.schema import Schema

from sql.errors import UnsupportedError
from sql.source import connector_source, is_push
from sql.watermark import watermark_filter
from sql.plan import nodes as P
from sql.plan.time_window import HopWindow, TumbleWindow, build_executor as build_window


class IdAllocator:
    """Internal state table ids in plan order (module docstring)."""

    def __init__(self, catalog=None, stored=None, mv_name: str = "?"):
        self.catalog, self.stored, self.mv_name = catalog, stored, mv_name
        self.ids: list = []

    def take(self, n: int) -> list:
        out = []
        for _ in range(n):
            if self.stored is not None:
                if len(self.ids) >= len(self.stored):
                    raise CorruptionError(f"materialized view {self.mv_name}: its plan needs more internal tables "
                                          f"than the {len(self.stored)} stored", object=self.mv_name)
                tid = self.stored[len(self.ids)]
            elif self.catalog is not None:
                tid = self.catalog.allocate_id()
            else:
                tid = -(len(self.ids) + 1)   # EXPLAIN of a plan not created: placeholder ids
            self.ids.append(tid)
            out.append(tid)
        return out

    def finish(self) -> None:
        if self.stored is not None and len(self.ids) != len(self.stored):
            raise CorruptionError(f"materialized view {self.mv_name}: its plan needs {len(self.ids)} internal tables, "
                                  f"{len(self.stored)} stored", object=self.mv_name)


def mv_desc(plan: P.Node, table_id: int, name: str, col_names) -> TableDesc:
    """The MV's materialized table: visible columns named ``col_names``, hidden ones after;
    storage pk = the plan's stream key."""
    names = list(col_names) + [f"_hidden{i}" for i in range(len(plan.types) - len(col_names))]
    return TableDesc(table_id, name, tuple(zip(names, plan.types)), tuple(plan.stream_key))


def count_state_tables(plan: P.Node) -> list:
    """``[(node, n_ids)]`` in plan order (what :func:`build_plan` takes from the allocator)."""
    out = []

    def visit(n):
        for i in n.inputs:
            visit(i)
        if isinstance(n, P.Agg):
            out.append((n, agg_table_count(_calls(n), agg_append_only(n))))
        elif isinstance(n, (P.Join, P.ScalarJoin)) and not getattr(n, "temporal", False):
            out.append((n, 4))
        elif isinstance(n, (P.TopN, P.OverWindow)):
            out.append((n, 1))
        elif isinstance(n, P.DynamicFilter):
            out.append((n, 2))
        elif isinstance(n, P.Now):
            out.append((n, 1))
    visit(plan)
    return out


def _calls(n: P.Agg) -> list:
    return [AggCall(c.kind, c.arg, distinct=c.distinct,
                    filter=None if c.filter_col is None else Col(c.filter_col, n.input.types[c.filter_col]),
                    order=getattr(c, "extra", {}).get("order", ()), sep=getattr(c, "extra", {}).get("sep"))
            for c in n.calls]


def agg_append_only(n: P.Agg) -> bool:
    """Whether Agg ``n`` runs as an append-only HashAgg (its input can only insert:
    ``P.inserts_only``; min/max then keep only the current value, no materialized input).
    Decided once per node and kept on it (``_append_only``), so a Spark fragment's copy of the
    node, whose input is an edge, builds the same executor as the allocation counted."""
    flag = getattr(n, "_append_only", None)
    if flag is None:
        flag = n._append_only = P.inserts_only(n.input)
    return flag


def allocate(plan: P.Node, ids: IdAllocator) -> dict:
    """``{id(node): [table ids]}`` for every stateful node, in plan order. An MV stored before
    aggregates over append-only inputs were planned append-only has ids for the retractable
    layout (a materialized input per min/max): when the stored count matches only that, its
    aggregates are built retractable (the value state is the same in both layouts)."""
    counts = count_state_tables(plan)
    if ids.stored is not None and sum(k for _, k in counts) != len(ids.stored):
        aggs = [n for n, _ in counts if isinstance(n, P.Agg) and n._append_only]
        for n in aggs:
            n._append_only = False
        legacy = count_state_tables(plan)
        if sum(k for _, k in legacy) == len(ids.stored):
            counts = legacy
        else:   # neither layout fits: let ``take``/``finish`` name the mismatch
            for n in aggs:
                n._append_only = True
    out = {id(n): ids.take(k) for n, k in counts}
    ids.finish()
    return out


class GraphBuilder:
    """Builds the whole graph of one catalog onto ``rt`` (module docstring)."""

    def __init__(self, rt, store, catalog, plan_of, backfill=frozenset()):
        self.rt, self.store, self.catalog, self.plan_of = rt, store, catalog, plan_of
        self.backfill = backfill
        self.progress = None      # connect(progress=...): told of each backfill's rows (sql/copy.py Progress)
        self.actors: dict = {}    # relation name -> its Materialize actor
        self.sources: dict = {}   # table name -> SourceHandle

    def build(self) -> None:
        for rel in self.catalog.ordered():
            if rel.kind == "table":
                self._table(rel)
            elif rel.kind == "source":
                self._source(rel)
            else:
                self._mv(rel)

    def _state_table(self, desc, consistent=True):
        return StateTable(self.store, desc.table_id, desc.columns, desc.pk_indices, desc.order_types,
                          desc.dist_key_indices, desc.value_indices, name=desc.name, consistent=consistent)

    def _table(self, rel) -> None:
        schema = Schema(list(rel.desc.columns))
        src = self.rt.source(rel.name, schema, stream_key=rel.pk_indices)
        head = src.executor if rel.connector is None else connector_source(self, rel, src)
        dml = Dml(head, schema, rel.pk_indices, row_id_index=len(rel.desc.columns) - 1 if rel.row_id else None,
                  horizon=self.rt.row_id_horizon, generator_width=SQL_DML_WIDTH)
        dml = watermark_filter(self.store, rel, dml)   # WATERMARK FOR: late rows dropped (sql/watermark.py)
        conflict = rel.conflict if rel.user_pk else "no_check"
        self.actors[rel.name] = self.rt.actor(Materialize(dml, self._state_table(rel.desc, False), conflict,
                                                          change_logs=self.catalog.change_logs_of(rel.name)))
        self.sources[rel.name] = src

    def _source(self, rel) -> None:
        """A source's actor ``TableSource -> ConnectorSource -> Dml``, no Materialize (it stores
        no rows). A source no relation reads runs without its connector (barriers only), so its
        offset moves only while something reads its rows. A push source has no connector
        executor: its INSERTs come down its channel (``sources``) as a table's do."""
        schema = Schema(list(rel.desc.columns))
        src = self.rt.source(rel.name, schema, stream_key=rel.pk_indices)
        if is_push(rel):   # its rows are INSERTs (sql/source.py): written to its channel as a table's
            head = src.executor
            self.sources[rel.name] = src
        else:
            head = connector_source(self, rel, src) if self.catalog.dependents(rel.name) else src.executor
        dml = Dml(head, schema, rel.pk_indices, row_id_index=len(rel.desc.columns) - 1, horizon=self.rt.row_id_horizon,
                  generator_width=SQL_DML_WIDTH)
        self.actors[rel.name] = self.rt.actor(watermark_filter(self.store, rel, dml))

    def _mv(self, rel) -> None:
        plan = self.plan_of(rel)
        ids = allocate(plan, IdAllocator(stored=rel.internal_ids, mv_name=rel.name))
        root = build_plan(plan, self, ids, rel.name in self.backfill)
        self.actors[rel.name] = self.rt.actor(Materialize(root, self._state_table(rel.desc, False), "no_check",
                                                          change_logs=self.catalog.change_logs_of(rel.name)))

    def now_source(self, table_id: int):
        """A temporal filter's clock (``P.Now``): a barrier-only source of its own feeding a
        :class:`~stream.executors.now.Now` whose state table is ``table_id``."""
        src = self.rt.source(f"__now__{table_id}", NOW_SCHEMA)
        return Now(src.executor, now_state_table(self.store, table_id))

    def head(self, relation, backfill: bool):
        [head] = self.rt.exchange([self.actors[relation.name]], 1, "simple")
        if not backfill:
            return head
        return Backfill(head, relation.desc, self.store, on_rows=self._backfill_progress(relation.name))

    def _backfill_progress(self, name: str):
        """``on_rows`` of a Backfill reading ``name``: reports to ``self.progress`` (or None)."""
        if self.progress is None:
            return None
        from sql.copy import Progress
        tracker = Progress("BACKFILL", name, self.progress)

        def on_rows(done: int, finished: bool) -> None:
            if finished:
                tracker.finish(done, done)
            else:
                tracker.update(done)
        return on_rows


def build_plan(plan: P.Node, builder: GraphBuilder, ids: dict, backfill: bool):
    """Executors for ``plan`` (module docstring)."""
    def go(n):
        if isinstance(n, P.Scan):
            return builder.head(n.relation, backfill)
        if isinstance(n, P.Project):
            return Project(go(n.input), n.exprs, names=n.names)
        if isinstance(n, P.Filter):
            return Filter(go(n.input), n.condition)
        if isinstance(n, P.Agg):
            cls = HashAgg if n.group else SimpleAgg
            args = (n.group,) if n.group else ()
            return cls(go(n.input), *args, _calls(n), builder.store, ids[id(n)], names=n.names[len(n.group):],
                       append_only=agg_append_only(n))
        if isinstance(n, P.Join) and getattr(n, "temporal", False):   # sql/bind/temporal.py: no right stream
            rel = n.right.relation
            key_of_pk = [n.left_keys[n.right_keys.index(p)] for p in rel.pk_indices]
            return TemporalJoin(go(n.left), StorageTable.from_desc(builder.store, rel.desc), key_of_pk, n.kind)
        if isinstance(n, P.Join):
            if not n.left_keys:
                raise UnsupportedError("a join without an equality (nested loop) is not supported in streaming")
            kind = {"semi": "left_semi", "anti": "left_anti"}.get(n.kind, n.kind)
            return HashJoin(go(n.left), go(n.right), n.left_keys, n.right_keys, kind, store=builder.store,
                            table_ids=tuple(ids[id(n)]), condition=n.condition)
        if isinstance(n, P.ScalarJoin):
            return _scalar_join(n, go(n.left), go(n.right), builder, ids[id(n)])
        if isinstance(n, P.DynamicFilter):
            left, right = go(n.left), go(n.right)
            right = Project(right, [Col(0, n.right.types[0], n.right.names[0])], names=[n.right.names[0]],
                            stream_key=[])
            lt, rt = ids[id(n)]
            return DynamicFilter(left, right, n.key, n.op,
                                 dynamic_filter_left_table(builder.store, lt, left.schema, left.stream_key, n.key),
                                 dynamic_filter_right_table(builder.store, rt, right.schema))
        if isinstance(n, P.Union):
            return Union([go(i) for i in n.inputs], stream_key=n.stream_key)
        if isinstance(n, (TumbleWindow, HopWindow)):
            return build_window(n, go(n.input))
        if isinstance(n, P.TopN):
            return _top_n(n, go(n.input), builder.store, ids[id(n)][0])
        if isinstance(n, P.OverWindow):
            return _over_window(n, go(n.input), builder.store, ids[id(n)][0])
        if isinstance(n, P.Now):
            if not hasattr(builder, "now_source"):
                raise UnsupportedError("now() in a materialized view (a temporal filter) runs on the in-process "
                                       "runtime only, not yet on the Spark runtime")
            return builder.now_source(ids[id(n)][0])
        if isinstance(n, P.Unnest):   # stateless: each input row's elements (stream/executors/project_set.py)
            w = len(n.input.types)
            return ProjectSet(go(n.input), n.arrays, n.names[w:w + len(n.arrays)], n.outer)
        raise TypeError(f"{n.label()} has no stream executor")
    return go(plan)


NO_LIMIT = 1 << 62   # OFFSET without LIMIT: a window no group reaches the end of


def _top_n(n: P.TopN, input, store, table_id: int):
    """The (Ranked)GroupTopN of plan node ``n`` over executor ``input``, its state table laid
    out by :func:`top_n_state_table` (group | order | input stream key)."""
    order_by = [(c, OrderType(desc, nulls_first)) for c, desc, nulls_first in n.order]
    table = top_n_state_table(store, table_id, input.schema, input.stream_key, order_by, n.group,
                              name=f"top_n_{table_id}")
    limit = NO_LIMIT if n.limit is None else n.limit
    append_only = P.inserts_only(n.input)   # then the state holds only each group's window
    if n.rank:
        return RankedGroupTopN(input, table, order_by, limit, n.offset, n.group, rank_name=n.names[-1],
                               append_only=append_only)
    return GroupTopN(input, table, order_by, limit, n.offset, n.group, with_ties=n.with_ties, append_only=append_only)


def _over_window(n: P.OverWindow, input, store, table_id: int):
    """The OverWindow executor of plan node ``n``, its state table a top-N's (partition | order |
    input stream key)."""
    order_by = [(c, OrderType(desc, nulls_first)) for c, desc, nulls_first in n.order]
    table = top_n_state_table(store, table_id, input.schema, input.stream_key, order_by, n.partition,
                              name=f"over_window_{table_id}")
    return OverWindow(input, table, n.partition, order_by, [(c.kind, c.arg, c.params) for c in n.calls], n.frame,
                      names=n.names[len(n.input.types):])


def _scalar_join(n: P.ScalarJoin, left, right, builder, table_ids):
    """A ScalarJoin as a left outer HashJoin of ``left`` and the one-row ``right`` on a constant
    key column added to both, projected back to the left columns and the value."""
    w = len(n.left.types)
    one = Lit(0, DataType.INT)
    cols = [Col(i, t, nm) for i, (t, nm) in enumerate(zip(n.left.types, n.left.names))]
    lkey = list(left.stream_key) or [w]     # a one-row left (a global aggregate): the constant
    left = Project(left, cols + [one], names=list(left.schema.names) + ["_scalar_k"], stream_key=lkey)
    value = Col(0, n.right.types[0], n.right.names[0])
    right = Project(right, [value, one], names=["_scalar_v", "_scalar_k"], stream_key=[1])
    join = HashJoin(left, right, [w], [1], "left", store=builder.store, table_ids=tuple(table_ids))
    return Project(join, cols + [Col(w + 1, value.data_type, "_scalar_v")], names=list(n.names),
                   stream_key=list(n.stream_key))
