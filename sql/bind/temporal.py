"""Temporal joins in materialized views: ``l JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON ...``
(RisingWave's form) joins each new left row with table or MV ``t`` as it is when the row is
processed; later changes of ``t`` leave emitted rows alone (stream/executors/temporal_join.py).

What is admitted (anything else is refused by name): an INNER or LEFT join whose ON holds an
equality, column to column of the same type, for every primary-key column of ``t`` (a lookup
by the whole key: at most one match per left row), other conditions only on an INNER join
(checked on the joined rows), and a left input that only inserts (an APPEND ONLY table, a
source, or plans over them: ``P.inserts_only``), since the rows a left delete would retract
were joined with a right row that may have changed since. ``FOR SYSTEM_TIME AS OF PROCTIME()``
anywhere else in an MV is refused. In a batch query the clause is time travel to now, so the
same SELECT reads as an ordinary join.

Plan: a ``P.Join`` marked ``temporal`` whose right input is the bare ``P.Scan`` of ``t`` (no
stream is read from it: sql/build.py builds a TemporalJoin over a StorageTable), stream key the
left's; a Filter above it for the extra conditions.

Callers: :mod:`sql.bind.select`.
"""

from __future__ import annotations

from sql.errors import UnsupportedError, error_at
from sql.plan import nodes as P


def is_proctime(version) -> bool:
    """Whether a table's ``FOR SYSTEM_TIME AS OF`` clause is exactly ``PROCTIME()``."""
    expr = version.args.get("expression")
    return expr is not None and type(expr).__name__ == "Anonymous" and expr.name.lower() == "proctime" \
        and not expr.expressions


def temporal_join(left: P.Node, right: P.Node, right_own: P.Node, kind: str, lk, rk, cond, node) -> P.Node:
    """The plan of a temporal join (module docstring) or an UnsupportedError at ``node``."""
    scan = right_own
    if not isinstance(scan, P.Scan) or getattr(scan, "temporal", None) is None:
        raise error_at(UnsupportedError, "FOR SYSTEM_TIME AS OF PROCTIME() marks a table or materialized view "
                                         "joined directly (the right side of a temporal join)", node)
    name = scan.relation.name
    if kind not in ("inner", "left"):
        raise error_at(UnsupportedError, f"a temporal join is INNER or LEFT, not {kind.upper()}", node)
    if scan.relation.kind not in ("table", "mv") or getattr(scan.relation, "row_id", False):
        raise error_at(UnsupportedError, f"a temporal join looks {name!r} up by its primary key: it must be a "
                                         f"table or materialized view with one", node)
    pk = list(scan.relation.pk_indices)
    if right is not right_own or None in rk or sorted(rk) != sorted(pk) or len(set(rk)) != len(rk):
        raise error_at(UnsupportedError, f"a temporal join's ON needs an equality between a left column and each "
                                         f"primary-key column of {name!r} (same types), and no other key", node)
    if cond is not None and kind == "left":
        raise error_at(UnsupportedError, "a LEFT temporal join takes only the primary-key equalities in its ON "
                                         "(filter the joined rows in WHERE)", node)
    if not P.inserts_only(left):
        raise error_at(UnsupportedError, "a temporal join needs a left input that only inserts (an APPEND ONLY "
                                         "table or a source): a left delete could not retract what it joined", node)
    join = P.Join(left, scan, kind, lk, rk, None)
    join.temporal = True
    join.stream_key = list(left.stream_key)
    return join if cond is None else P.Filter(join, cond)


def check_temporal_scans(plan: P.Node) -> None:
    """Refuse a ``FOR SYSTEM_TIME AS OF PROCTIME()`` scan that is not a temporal join's right side."""
    rights = {id(n.right) for n in P.walk(plan) if isinstance(n, P.Join) and getattr(n, "temporal", False)}
    for n in P.walk(plan):
        version = getattr(n, "temporal", None) if isinstance(n, P.Scan) else None
        if version is not None and id(n) not in rights:
            raise error_at(UnsupportedError, "FOR SYSTEM_TIME AS OF PROCTIME() in a materialized view marks the "
                                             "right side of a temporal join (l JOIN t FOR SYSTEM_TIME AS OF "
                                             "PROCTIME() ON ...)", version)


__all__ = ["check_temporal_scans", "is_proctime", "temporal_join"]
