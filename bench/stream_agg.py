"""The aggregation workloads of ``bench/stream.py`` (issue 12): graph building only.

- ``hash_agg_1k``: TableSource -> HashAgg(GROUP BY a: 1,000 groups; count(*), sum(b), max(b);
  ``append_only=True``: the bench's input only inserts, so max keeps one value per group and
  needs no materialized input -- the issue's comparison, Bytewax's per-key count/sum/max
  without retractions) -> Materialize (relaxed). Its output still retracts: every changed
  group is emitted as an update pair, and the value state is checkpointed.
- ``hash_agg_1k_retractable``: the same on a retractable input (``append_only=False``): every
  row also goes into max's materialized-input state table (the cost of exact deletes).
- ``hash_agg_10k``: as ``hash_agg_1m`` below with ``id % 10,000``: ten thousand groups, all in
  the group cache (issue 30: it should approach ``hash_agg_1k``'s figure).
- ``hash_agg_1m``: TableSource -> Project(id % 1,000,000 AS g, id, b) -> HashAgg(GROUP BY g; the
  same calls, append-only) -> Materialize: a million groups, so the group cache (default
  budget) evicts and the state tables spill; peak RSS must stay <= 1 GiB.
- ``hash_agg_1m_retractable``: the same on a retractable input.
"""

from __future__ import annotations

AGG_WORKLOADS = ["hash_agg_1k", "hash_agg_1k_retractable", "hash_agg_10k", "hash_agg_1m", "hash_agg_1m_retractable"]
GROUPS = {"hash_agg_10k": 10_000, "hash_agg_1m": 1_000_000}   # a Project's ``id % n`` key


def build_agg(workload: str, rt, store, src) -> None:
    from relational import StateTable
    from relational.types import DataType as T
    from stream.executors import AggCall, HashAgg, Materialize, Project
    from stream.executors.hash_agg import agg_table_count
    from stream.expr import Arith, Col, Lit

    head = src.executor
    append_only = not workload.endswith("_retractable")
    groups = GROUPS.get(workload.removesuffix("_retractable"))
    if groups is not None:
        head = Project(head, [Arith("%", Col(0, T.BIGINT), Lit(groups, T.BIGINT)), Col(0, T.BIGINT),
                              Col(2, T.INT)], names=["g", "id", "b"], stream_key=[1])
        group, b = [0], 2
    else:
        group, b = [1], 2
    calls = [AggCall("count"), AggCall("sum", b), AggCall("max", b)]
    ids = list(range(10, 10 + agg_table_count(calls, append_only)))
    agg = HashAgg(head, group, calls, store, ids, append_only=append_only, consistent=False,
                  names=["cnt", "sum_b", "max_b"])
    table = StateTable(store, 1, agg.schema.pairs(), [0], dist_key_indices=[0], consistent=False)
    rt.actor(Materialize(agg, table))
