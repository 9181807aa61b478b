"""The HashJoin workloads of ``python -m bench.stream`` (bench/stream.py calls :func:`build`).

Both sides come from the bench's one input table (``id BIGINT`` pk, ``a INT``, ``b INT``,
``s VARCHAR``; ids a random permutation of 0..n-1, so a row's partner arrives at a random
later or earlier moment of the run, not in the same chunk): a Filter routes each row to a side
and a Project gives it its join key ``k``; the join's output goes into a relaxed MV keyed by
the join's stream key. Every input row enters the join once; rows/s counts input rows.

- ``hash_join_1to1``: left = rows with even id, ``k = id / 2``; right = odd ids, ``k = id / 2``:
  every key has one row on each side. Neither side's stream key (``id``) is inside the join
  key, so no probe is answered by the side's own inserts: each row's probe of the other side
  is a cache hit, one batched prefix read, or -- when the partner has not come yet -- answered
  by the other side's key filter without a read (stream/executors/join_key_filter.py).
- ``hash_join_1ton``: left = ids divisible by 11, ``k = id / 11``; right = the others,
  ``k = id / 11``: each key has one left row and 10 right rows (output ~ 10/11 of the input).

Inner joins with default options (the runtime's ``MemoryBudget``, default 128 MiB, for the caches); with
``--chunks 2000`` (``--quick``) the 1:1 join has 1M keys.
"""

from __future__ import annotations


def build(workload: str, rt, store, src) -> None:
    """Add the workload's actors to ``rt`` after ``src`` (the table's source handle): the
    source's actor broadcasts to one actor running Filter/Project on both sides, the join and
    the MV."""
    from relational import StateTable
    from relational.types import DataType as T
    from stream.executors import Filter, HashJoin, Materialize, Project
    from stream.expr import Arith, Cmp, Col, Lit, Not

    fanout = {"hash_join_1to1": 2, "hash_join_1ton": 11}[workload]
    div = Lit(fanout, T.BIGINT)
    on_left = Cmp("=", Arith("%", Col(0, T.BIGINT), div), Lit(0, T.BIGINT))

    up = rt.actor(src.executor)
    heads = rt.exchange([up], 2, "broadcast")

    def side(head, cond, value_col, name):
        picked = Filter(head, cond)
        return Project(picked, [Col(0, T.BIGINT), Arith("/", Col(0, T.BIGINT), div), Col(value_col, T.INT)],
                       names=["id", "k", name])

    left = side(heads[0], on_left, 1, "a")
    right = side(heads[1], Not(on_left), 2, "b")
    join = HashJoin(left, right, [1], [1], "inner", store=store, table_ids=(11, 12))
    mv = StateTable(store, 13, join.schema.pairs(), join.stream_key, dist_key_indices=join.stream_key[:1],
                    consistent=False)
    rt.actor(Materialize(join, mv))
