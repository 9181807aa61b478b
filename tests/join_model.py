"""Helpers for the HashJoin tests (tests/test_stream_hash_join.py): the join computed in batch
in plain Python, and a model of a materialized view that applies a join's output changes by its
stream key, checking every retraction is exact.

``batch_join(left, right, left_keys, right_keys, join_type, condition)`` joins lists of row
tuples: equal non-NULL keys and ``condition(lrow, rrow)`` TRUE match; unmatched rows of an
outer side come NULL-padded; ``left_semi`` / ``left_anti`` give the left rows with / without a
match. ``KeyedView(key)`` applies ``(op, row)`` changes: an insert needs a
free key, a delete the very row stored under its key, an update pair both.
"""

from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT


def batch_join(left, right, left_keys, right_keys, join_type, condition=None, widths=None) -> list:
    lw, rw = widths if widths is not None else (len(left[0]) if left else 0, len(right[0]) if right else 0)
    out, matched = [], set()
    semi_anti = join_type in ("left_semi", "left_anti")
    for lrow in left:
        key = tuple(lrow[i] for i in left_keys)
        hit = False
        if None not in key:
            for j, rrow in enumerate(right):
                if tuple(rrow[i] for i in right_keys) == key and (condition is None or condition(lrow, rrow)):
                    if not semi_anti:
                        out.append(tuple(lrow) + tuple(rrow))
                    matched.add(j)
                    hit = True
        if semi_anti:     # the left row itself, once, when it has a match (semi) / none (anti)
            if hit == (join_type == "left_semi"):
                out.append(tuple(lrow))
            continue
        if not hit and join_type in ("left", "full"):
            out.append(tuple(lrow) + (None,) * rw)
    if join_type in ("right", "full"):
        out += [(None,) * lw + tuple(r) for j, r in enumerate(right) if j not in matched]
    return sorted(out, key=repr)


class KeyedView:
    """A materialized view of a change stream keyed by ``key`` (column indices)."""

    def __init__(self, key):
        self.key = list(key)
        self.rows: dict = {}

    def apply(self, changes) -> None:
        for op, row in changes:
            k = tuple(row[i] for i in self.key)
            if op in (INSERT, UPDATE_INSERT):
                assert k not in self.rows, f"insert of key {k} that has {self.rows[k]} (new {row})"
                self.rows[k] = tuple(row)
            else:
                assert op in (DELETE, UPDATE_DELETE)
                assert self.rows.get(k) == tuple(row), f"delete of {row}, the view has {self.rows.get(k)}"
                del self.rows[k]

    def sorted(self) -> list:
        return sorted(self.rows.values(), key=repr)
