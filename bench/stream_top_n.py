"""The top-N workloads of ``python -m bench.stream`` (the graph-building code, kept apart from
bench/stream.py). Input: bench/stream.py's table (``id`` pk, ``a = id % 1000``, ``b = id % 77``,
``s``), 1,024 distinct-id inserts per chunk.

- ``top_n``: TableSource -> TopN(ORDER BY a DESC, id LIMIT 100) -> Materialize. The
  retractable path (the input has a pk, so a later delete could drain the window): every row is
  written to the top-N state table; a vectorized compare against the cache's last row keeps
  rows that cannot enter the window out of the per-row work.
- ``top_n_append_only``: the same with ``append_only=True`` (an append-only source): only the
  window is kept in state.
- ``group_top_n``: GroupTopN(PARTITION BY b ORDER BY a DESC LIMIT 10) over 77 groups.
"""

from __future__ import annotations

WORKLOADS = ["top_n", "top_n_append_only", "group_top_n"]


def build(workload: str, rt, src, store) -> None:
    """Add ``workload``'s actors to runtime ``rt`` reading source ``src`` (bench/stream.py)."""
    from relational import StateTable
    from relational.memcomparable import OrderType
    from stream.executors.materialize import Materialize
    from stream.executors.top_n import GroupTopN, TopN, top_n_state_table

    schema = src.executor.schema
    mv = StateTable(store, 2, schema.pairs(), [0], dist_key_indices=[0], consistent=False)
    if workload in ("top_n", "top_n_append_only"):
        order = [(1, OrderType.DESC)]
        table = top_n_state_table(store, 1, schema, [0], order, consistent=False)
        rt.actor(Materialize(TopN(src.executor, table, order, 100, append_only=workload == "top_n_append_only"),
                             mv))
    elif workload == "group_top_n":
        order = [(1, OrderType.DESC)]
        table = top_n_state_table(store, 1, schema, [0], order, [2], consistent=False)
        mv = StateTable(store, 2, schema.pairs(), [2, 0], dist_key_indices=[2], consistent=False)
        rt.actor(Materialize(GroupTopN(src.executor, table, order, 10, group_key=[2]), mv))
    else:
        raise SystemExit(f"unknown workload {workload!r}")
