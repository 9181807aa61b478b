"""Plain-Python references for the top-N and dynamic-filter tests (tests/test_stream_top_n.py,
tests/test_stream_topn_oracle.py): no memcomparable, no state tables -- sorted() with a
comparator written from the SQL rules -- and ``apply_changes``, a strict materialization of
an executor's output into a dict by stream key."""

from functools import cmp_to_key

from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT


def order_cmp(order_by, stream_key):
    """A comparator: the order columns (DESC flips, NULLs first/last as the OrderType says),
    then the stream key ascending."""
    def cmp(a, b):
        for c, o in order_by:
            x, y = a[c], b[c]
            if x == y:
                continue
            if x is None:
                return -1 if o.nulls_first else 1
            if y is None:
                return 1 if o.nulls_first else -1
            r = -1 if x < y else 1
            return -r if o.descending else r
        ka, kb = tuple(a[c] for c in stream_key), tuple(b[c] for c in stream_key)
        return (ka > kb) - (ka < kb)
    return cmp


def top_n(rows, order_by, limit, offset=0, group_key=(), stream_key=(0,), with_ties=False) -> list:
    """``ORDER BY .. LIMIT .. OFFSET .. [WITH TIES]`` per group of ``rows``, sorted."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in group_key), []).append(r)
    out = []
    for members in groups.values():
        members.sort(key=cmp_to_key(order_cmp(order_by, stream_key)))
        end = offset + limit
        if with_ties and limit and len(members) >= end:
            last = tuple(members[end - 1][c] for c, _ in order_by)
            while end < len(members) and tuple(members[end][c] for c, _ in order_by) == last:
                end += 1
        out += members[offset:end]
    return sorted(out, key=repr)


def passes(op, x, v) -> bool:
    if x is None or v is None:
        return False
    return {">": x > v, ">=": x >= v, "<": x < v, "<=": x <= v}[op]


def apply_changes(mv: dict, chunks, stream_key) -> None:
    """Apply chunks to ``mv`` (stream key -> row), strictly: an insert of a present key or a
    delete of an absent or different row fails the test."""
    for chunk in chunks:
        chunk.validate(stream_key)
        for op, row in chunk.rows():
            key = tuple(row[c] for c in stream_key)
            if op in (INSERT, UPDATE_INSERT):
                assert key not in mv, f"insert of present key {key}: {row}"
                mv[key] = row
            else:
                assert op in (DELETE, UPDATE_DELETE)
                assert mv.get(key) == row, f"delete of {row}, holds {mv.get(key)}"
                del mv[key]
