"""The left semi / left anti join of :class:`~stream.executors.hash_join.HashJoin`: the left
rows that have at least one match (semi) or none (anti) on the right -- equal non-NULL join keys
and the extra condition TRUE. ``x IN (subquery)`` and ``NOT EXISTS``-style plans use them.

State: HashJoin's, with the left side kept like an outer side: its rows table and a degree
table (the number of matching right rows of each left row). A left row is in the output
exactly when ``(degree > 0) == semi``, so:
- a left insert / delete emits the row itself when its current match count shows it;
  an update pair stays a pair when both rows show, else becomes the one op that shows;
- a right insert that takes a left row's degree 0 -> 1 emits it (semi) or retracts it (anti);
  a right delete taking it 1 -> 0 does the reverse. A left row with a NULL key matches
  nothing: always in an anti join's output, never in a semi join's.

Output: the left schema and stream key (rows are emitted at most once: the output is a set
over the left stream key). Callers: :meth:`HashJoin.on_side_chunk` (``join_type`` left_semi /
left_anti); the planner plans ``IN (subquery)`` and NOT IN (sql/bind/subquery.py).
"""

from __future__ import annotations

from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunkBuilder


def semi_anti_chunk(join, s, o, chunk, s_left: bool) -> list:
    """The output of ``chunk`` of side ``s`` (already written into ``s``'s rows table)."""
    semi = join.join_type == "left_semi"
    rows = chunk.rows()
    keys, entries, passes = join._probe(s, o, rows, s_left)
    builder = StreamChunkBuilder(join.schema, join.chunk_size)
    out = []

    def emit(op, row):
        done = builder.append(op, row)
        if done is not None:
            out.append(done)

    def matches(i) -> list:
        key = keys[i]
        if None in key:
            return []
        items = list(entries[key].rows.items())
        return items if passes is None else [item for item, p in zip(items, passes[i]) if p]

    touched: dict = {}
    if s_left:
        _left_rows(s, rows, keys, matches, semi, emit, builder, out, touched, join.identity)
    else:
        _right_rows(s, o, rows, keys, entries, matches, semi, emit, touched, join.identity)
    if touched:
        s.put_back(touched)
    for table in s.tables():
        table.try_flush()
    last = builder.take()
    if last is not None:
        out.append(last)
    return out


def _left_rows(s, rows, keys, matches, semi, emit, builder, out, touched, identity) -> None:
    pk_of = s.pk_of
    deg_ops, deg_rows = [], []

    def shown(n) -> bool:
        return (n > 0) == semi

    n, i = len(rows), 0
    while i < n:
        op, row = rows[i]
        if op == UPDATE_DELETE and i + 1 < n and rows[i + 1][0] == UPDATE_INSERT and keys[i + 1] == keys[i] \
                and pk_of(rows[i + 1][1]) == pk_of(row):
            new = rows[i + 1][1]
            a, b = len(matches(i)), len(matches(i + 1))
            if shown(a) and shown(b):
                done = builder.append_update(row, new)
                if done is not None:
                    out.append(done)
            elif shown(a):
                emit(DELETE, row)
            elif shown(b):
                emit(INSERT, new)
            if a != b:
                deg_ops += [UPDATE_DELETE, UPDATE_INSERT]
                deg_rows += [pk_of(row) + (a,), pk_of(new) + (b,)]
            mine = s.own(keys[i], touched)
            if mine is not None:
                mine.remove(pk_of(row))
                mine.add(pk_of(new), new, b)
            i += 2
            continue
        found = len(matches(i))
        insert = op == INSERT or op == UPDATE_INSERT
        if shown(found):
            emit(INSERT if insert else DELETE, row)
        deg_ops.append(INSERT if insert else DELETE)
        deg_rows.append(pk_of(row) + (found,))
        mine = s.own(keys[i], touched)
        if mine is not None:
            if insert:
                mine.add(pk_of(row), row, found)
            else:
                mine.remove(pk_of(row))
        i += 1
    s.write_rows(s.degree, deg_ops, deg_rows, identity)


def _right_rows(s, o, rows, keys, entries, matches, semi, emit, touched, identity) -> None:
    pk_of = s.pk_of
    changed: dict = {}     # left state pk -> (entry, degree before this chunk)
    for i, (op, row) in enumerate(rows):
        insert = op == INSERT or op == UPDATE_INSERT
        found = matches(i)
        if found:
            entry = entries[keys[i]]
            degrees = entry.degrees
            for opk, orow in found:
                before = degrees[opk]
                if opk not in changed:
                    changed[opk] = (entry, before)
                if insert:
                    degrees[opk] = before + 1
                    if before == 0:
                        emit(INSERT if semi else DELETE, orow)
                else:
                    degrees[opk] = before - 1
                    if before == 1:
                        emit(DELETE if semi else INSERT, orow)
        mine = s.own(keys[i], touched)
        if mine is not None:
            if insert:
                mine.add(pk_of(row), row, None)
            else:
                mine.remove(pk_of(row))
    if changed:
        ops, deg_rows = [], []
        for opk, (entry, before) in changed.items():
            after = entry.degrees[opk]
            if after != before:
                ops += [UPDATE_DELETE, UPDATE_INSERT]
                deg_rows += [opk + (before,), opk + (after,)]
        o.write_rows(o.degree, ops, deg_rows, identity)
        o.degree.try_flush()
