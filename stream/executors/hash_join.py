"""HashJoin: the equi-join of two change streams -- inner, left outer, right outer or full outer
-- on equality join keys, plus an optional extra (non-equi) condition over the joined row; also
the left semi / left anti join (``left_semi`` / ``left_anti``: :mod:`stream.executors.semi_join`,
the left side kept like an outer side, with degrees; output the left schema and stream key).

State (seed 000, "join"), per input side, all through state tables:

- rows: the side's rows, keyed ``join key | input stream key`` (the stream-key columns that
  are already join-key columns are not repeated: RisingWave's deduped pk), distributed by the
  join key, with ``prefix_len_hint`` = the join key, so a probe of an absent key is answered by
  the SSTs' prefix filters when the join key has a fixed-width encoding. The value holds the
  row's other columns: a key column is stored once, in the key, when its memcomparable
  decoding gives back the very value (``memcomparable.decodes_exactly``: integers, strings,
  dates, ...; a DOUBLE or DECIMAL key column is repeated in the value, which keeps ``-0.0`` and
  a decimal's scale). Smaller rows are more rows per cached block: a 1:1 join of 2.56M keys
  has ~31 B a row instead of ~47, so its probes mostly hit the block cache instead of
  decompressing a 64 KiB block for one row (docs/performance.md);
- degree (only for an outer side, whose unmatched rows are emitted NULL-padded): ``join key |
  input stream key -> _degree`` (the value: ``_degree`` and the key columns the rows table
  repeats in its value), the number of rows of the other side that match the row (equal
  key and the extra condition TRUE). A row's NULL-padded output exists exactly when its degree
  is 0: a degree going 0 -> 1 retracts the padded row before the first joined row, 1 -> 0
  emits it after the last joined row is retracted. So outer joins retract exactly.

A row with a NULL in its join key matches nothing (SQL ``=``); it is still stored, and on an
outer side it is emitted NULL-padded (degree 0).

Caches: per side, a :class:`~stream.cache.StateCache` (charged to the runtime's
:class:`~stream.cache.MemoryBudget`) of join key -> every row of that key on that side (and
their degrees). A chunk of one side probes the other side's cache for its distinct keys; the
missing keys are read in one batched prefix read (``StateTable.rows_with_prefixes``). A key
read with rows is cached on its second read only: the first puts it in the side's *seen keys*
(an admission test, as TinyLFU's doorkeeper: an entry read once and never probed again -- every
key of a 1:1 join, every many-side key of a 1:n one -- costs no cache entry and no eviction;
a key probed again within the seen keys' horizon costs one read more). Keys found without rows
go into the side's *known-absent keys*, so a key probed again while absent costs no read and no
cache entry of its own. Both are :class:`~stream.executors.join_key_set.KeySet` s: bounded
ordered sets charged to the budget as one entry each, at most 1/16 of the budget (the older half
goes when full). A key's entry is always the complete set of the side's rows with that key
as of the state table (read-after-write), so evicting an entry loses nothing. A side whose stream key lies inside its join key has at most one row per key; its
own inserts and deletes then create the key's entry without a read. A side whose join key
columns are all integer-like also keeps a *key filter* (:mod:`stream.executors.join_key_filter`:
a Bloom filter of every join key it ever wrote, rebuilt from its rows by ``on_init``, at most
~10 MiB): an inner join's column-wise probe skips the keys outside the other side's filter --
no cache lookup, no read, no known-absent entry (half of a 1:1 join's probes: a key's first
row comes before its partner); the row-by-row probe reads none of them either. So a side's
cached and known-absent keys all lie inside its filter, and its own rows of keys the filter
proves new need no lookup of either.

Processing one chunk of side S (the other side O), in order:
1. write the chunk into S's rows table (strict mode: all or nothing; a delete of a missing
   row or an insert of an existing one raises :class:`InconsistentStreamError` naming this
   executor and the state key, before any output);
2. fetch O's entries for the chunk's distinct non-NULL keys; evaluate the extra condition once,
   vectorized, over every (row, candidate) pair;
3. walk the rows: an insert emits ``+`` of each match (O-degree 0 -> 1 first retracts O's padded
   row), a delete ``-`` (O-degree 1 -> 0 then emits O's padded row); on an outer S the row's
   own padded row when it has no match. An update pair whose join key does not change stays
   an update pair for every match that both rows have (and for the padded row when neither has
   one); otherwise it becomes deletes and inserts;
4. write S's degrees and O's changed degrees (``write_chunk`` each), update S's cached entries.
An inner join without an extra condition does steps 3-4 column-wise for a chunk of inserts
and deletes (no update pairs; ``_inner_chunk``): each row's output is its own op with every O
row of its key, so S's output columns are one ``take`` of the row positions repeated by their
match counts and O's are built from the matched rows -- the same rows in the same order as the
row walk (tests/test_stream_hash_join.py compares the two). Its probe (``_Side.probe_columns``)
reads the missing keys' stored pairs in one call (``StateTable.pairs_with_prefixes``) and
decodes them straight into Arrow columns (``StateTable.decode_columns``), O's output columns
being one ``take`` of those: no tuple per O row read, no list per key. A strict side is told
which of its inserts have a join key its own key filter never saw (``_Side.write``,
``StateTable.write_chunk_fresh``): such a pk cannot have a row, so it is not probed. Such an
insert, its key once in its chunk, is also kept column-wise in the side's *fresh rows*
(:mod:`stream.executors.join_fresh_rows`: an inner join without an extra condition, every
column integer-like; a table under the budget, at most a third of it) until the side writes
that key again: the other side's probe of a key found there takes its one row from there, with
no cache lookup and no read -- in a 1:1 join most probes that find a partner.

Cache charges: an entry costs a fixed overhead plus, per row, the side's ``row_charge`` -- a
moving average of ``row_bytes`` over one or two sampled rows per chunk -- so rows are added and
removed without sizing each. A side adding rows to a known-absent key takes the key out of
the known-absent keys without making an entry (write-around: in a 1:1 join the key is never
probed again, and the entry would only be evicted); a cached key whose last row is deleted
moves the other way.

Output: the left columns then the right columns. Stream key: the left stream key then the
right one, except that on an inner or left join a right stream-key column that is a join key
paired with a left stream-key column is dropped (always equal to it on every output row; on a
left join the right side is NULL-padded as a whole), symmetrically on a right join. An input
without a stream key is a one-row stream (a global aggregate: ``x IN (SELECT max(...))``); the
other side's key alone then identifies an output row. Watermarks: an input's watermarks go to
:class:`~stream.executors.join_watermark.JoinWatermarks`, which derives the output watermarks
of equality keys and interval conditions (``l.ts BETWEEN r.ts - a AND r.ts + b``) and, in an
inner join, deletes the state rows no future row can match (state cleaning); a semi/anti join
drops them.

Invariants (``_check``): every cached entry equals its key's rows (and degrees) in the state
tables; every known-absent key has no rows and no cached entry (and, while the side's key
filter is on, lies inside it); every stored degree equals the
number of matching rows of the other side.

Callers: the planner (``FROM a [LEFT|RIGHT|FULL] JOIN b ON ...``), tests, bench/stream_join.py.
Both inputs must be hash-distributed by their join keys when several actors run the join
(``vnodes``: the vnodes this actor's state tables own).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational import StateTable
from relational.arrow import to_arrow, to_pylist
from relational.errors import InconsistentOpError
from relational.memcomparable import decodes_exactly
from relational.types import DataType, TypeKind
from stream.align import align_barriers
from stream.cache import default_budget, row_bytes
from stream.chunk import (DEFAULT_CHUNK_SIZE, DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk,
                          StreamChunkBuilder)
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import Executor
from stream.message import Barrier
from stream.schema import Schema
from stream.executors import join_fresh_rows
from stream.executors.join_fresh_rows import FreshRows
from stream.executors.join_key_filter import KeyFilter, SeenFilter, _as_int64, hash_keys, probe_parts, supported
from stream.executors.join_key_set import KeySet
from stream.executors.join_watermark import JoinWatermarks
from stream.executors.semi_join import semi_anti_chunk

JOIN_TYPES = ("inner", "left", "right", "full", "left_semi", "left_anti")
SEMI_ANTI = ("left_semi", "left_anti")
# Cache charges (bytes, measured with tracemalloc on CPython 3.11): an entry's object, its key
# tuple and dicts (the cache adds its own per-entry overhead); the first row's dict tables; per
# row its dict slots and pk tuple, besides the row itself (the side's ``row_charge``: a moving
# average of ``row_bytes`` over sampled rows, one or two per chunk).
_ENTRY_BYTES = 300
_FIRST_ROW_BYTES = 150
_ROW_OVERHEAD = 100
#: a join state table spills its MemTable into the store past this many (estimated) bytes: the
#: store's shared buffer holds spilled rows more compactly than the MemTable's Python objects,
#: and keeps them under its own capacity (bench: a 1M-key join under 1 GiB)
JOIN_FLUSH_BYTES = 16 << 20


def _getter(indices):
    """A function returning the tuple of a row's values at ``indices``."""
    if not indices:
        return lambda row: ()
    if len(indices) == 1:
        i = indices[0]
        return lambda row: (row[i],)
    return itemgetter(*indices)


_INT_KINDS = frozenset((TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT))


def _key_values(column, dtype: DataType, rows=None) -> list:
    """``to_pylist`` of a key column (of its positions ``rows``, an int64 numpy array, when
    given); an integer Arrow column without NULLs goes through numpy (the same ints, without
    Arrow's per-call overhead)."""
    if dtype.kind in _INT_KINDS and isinstance(column, pa.Array) and not column.null_count:
        values = column.to_numpy()
        return (values if rows is None else values[rows]).tolist()
    return to_pylist(column if rows is None else column.take(pa.array(rows, pa.int64())), dtype)


def _take(column, rows: np.ndarray, at=None):
    """``column.take`` of positions ``rows`` (int64 numpy; ``at``: the same as an Arrow array,
    made when needed): an integer Arrow column without NULLs is gathered by numpy (equal
    values and type, no validity buffer)."""
    if isinstance(column, pa.Array) and not column.null_count and pa.types.is_integer(column.type):
        return pa.Array.from_buffers(column.type, len(rows), [None, pa.py_buffer(column.to_numpy()[rows])])
    return column.take(pa.array(rows) if at is None else at)


class _KeyRows:
    """A cache entry: every row of one join key on one side (state pk -> row) and their degrees
    (state pk -> int; outer sides only). Its byte charge is :meth:`_Side.charge_of`: a per-row
    estimate of the side times the row count, so adding or removing rows needs no sizing."""

    __slots__ = ("rows", "degrees")

    def __init__(self, outer: bool, rows: dict | None = None, degrees: dict | None = None):
        self.rows: dict = {} if rows is None else rows
        self.degrees: dict | None = ({} if degrees is None else degrees) if outer else None

    def add(self, pk, row, degree) -> None:
        self.rows[pk] = row
        if self.degrees is not None:
            self.degrees[pk] = degree

    def remove(self, pk) -> None:
        self.rows.pop(pk, None)
        if self.degrees is not None:
            self.degrees.pop(pk, None)


#: the shared entries of keys without rows (inner / outer side) that ``entries`` hands out;
#: never mutated or cached (such keys are kept in the side's known-absent keys instead)
_ABSENT = (_KeyRows(False), _KeyRows(True))


class _Side:
    """One input's state tables, key layout and cache (module docstring)."""

    def __init__(self, label: str, input: Executor, keys, outer: bool, store, table_id, degree_table_id,
                 budget, vnodes, consistent: bool, identity: str, flush_threshold: int):
        self.label = label
        self.input = input
        self.schema = input.schema
        self.width = len(input.schema)
        self.keys = list(keys)
        self.stream_key = list(input.stream_key)
        self.state_pk = self.keys + [c for c in self.stream_key if c not in self.keys]
        self.unique = set(self.stream_key) <= set(self.keys)   # at most one row per join key
        self.outer = outer
        self.null_row = (None,) * self.width
        self.key_of = _getter(self.keys)
        self.pk_of = _getter(self.state_pk)
        n_keys = len(self.keys)
        types = input.schema.types
        in_key = {c for c in self.state_pk if decodes_exactly(types[c])}   # stored once, in the key
        self.table = StateTable(store, table_id, input.schema.pairs(), self.state_pk, dist_key_indices=self.keys,
                                value_indices=[c for c in range(self.width) if c not in in_key], vnodes=vnodes,
                                consistent=consistent, name=f"{identity}.{label}",
                                prefix_len_hint=n_keys, flush_threshold=flush_threshold)
        self.degree = None
        if outer:
            if degree_table_id is None:
                raise ExecutorError(identity, f"the {label} side is outer: it needs a degree table id")
            columns = [(input.schema.names[c], input.schema.types[c]) for c in self.state_pk]
            columns.append(("_degree", DataType.BIGINT))
            width = len(self.state_pk)
            self.degree = StateTable(store, degree_table_id, columns, list(range(width)),
                                     dist_key_indices=list(range(n_keys)),
                                     value_indices=[i for i, c in enumerate(self.state_pk) if c not in in_key] + [width],
                                     vnodes=vnodes, consistent=consistent,
                                     name=f"{identity}.{label}_degree", prefix_len_hint=n_keys,
                                     flush_threshold=flush_threshold)
        self.cache = budget.cache(f"{identity}.{label}")
        # the keys known to have no rows on this side, and the keys read once with rows but
        # not cached (a second read admits the key's entry): bounded key sets under the budget
        self.absent_keys = KeySet(budget, f"{identity}.{label}.absent")
        self.absent_cache = self.absent_keys.cache
        self.seen = KeySet(budget, f"{identity}.{label}.seen")
        self.absent = _ABSENT[outer]
        self.row_charge = row_bytes((0,) * self.width)   # refined by sample()
        # the join keys this side ever wrote (integer-like keys only): a probe of a key outside
        # it needs no read (stream/executors/join_key_filter.py); rebuilt by on_init
        self.filter = KeyFilter() if supported([types[c] for c in self.keys]) else None
        # the column-wise probe's seen keys, by key hash (join_key_filter.SeenFilter; the same
        # key types as the key filter), under the budget: dropped, it is rebuilt empty
        self.seen_hashes = budget.cache(f"{identity}.{label}.seen_hashes") if self.filter is not None else None
        # the rows inserted under keys new to this side, column-wise, for the other side's
        # column-wise probe (stream/executors/join_fresh_rows.py); set by an inner HashJoin
        # without an extra condition (``keep_fresh_rows``)
        self.fresh: FreshRows | None = None

    def keep_fresh_rows(self, budget, identity: str) -> None:
        """Keep this side's fresh rows when it can (a strict table with a key filter, every
        column integer-like), in at most a third of the budget."""
        types = self.schema.types
        if self.filter is None or not self.table.consistent or not join_fresh_rows.supported(types):
            return
        self.fresh = FreshRows(types, self.keys, budget.cache(f"{identity}.{self.label}.fresh"))

    def sample(self, row) -> None:
        """Fold ``row``'s size into the per-row charge estimate."""
        self.row_charge = (3 * self.row_charge + row_bytes(row)) >> 2

    def charge_of(self, entry: _KeyRows) -> int:
        """The byte charge of a cache entry of this side."""
        n = len(entry.rows)
        return _ENTRY_BYTES + (_FIRST_ROW_BYTES + n * (self.row_charge + _ROW_OVERHEAD) if n else 0)

    @property
    def absent_limit(self) -> int:
        """At most this many known-absent keys (the older half goes when full)."""
        return self.absent_keys.limit

    @absent_limit.setter
    def absent_limit(self, n: int) -> None:
        self.absent_keys.limit = n

    def known_absent(self) -> dict:
        """The keys known to have no rows on this side (read-only; empty when the budget
        dropped them)."""
        return self.absent_keys.keys()

    def change_absent(self, add=(), remove=()) -> None:
        """Add keys now known to have no rows; remove keys that got rows (or an entry)."""
        self.absent_keys.change(add, remove)

    def own(self, key, touched: dict):
        """This side's cached entry of ``key`` for its own chunk to change (kept in ``touched``
        until the chunk is done and they are put back), or None when the key is not cached
        (and the side is not ``unique``: then nothing needs it). A key known to have no rows
        leaves the known-absent keys (write-around: the next probe reads its rows)."""
        entry = touched.get(key)
        if entry is None:
            if None in key:
                return None
            entry = self.cache.peek(key)
            if entry is None:
                if key in self.known_absent():
                    self.change_absent(remove=[key])
                if not self.unique:
                    return None
                entry = _KeyRows(self.outer)    # the key's only row is this one (or none)
            touched[key] = entry
        return entry

    def own_many(self, distinct: set) -> dict:
        """:meth:`own` of every key of ``distinct`` (a chunk's distinct keys without NULLs) at
        once: the ``touched`` dict of the entries handed out."""
        touched = self.cache.peek_many(distinct)
        known = self.known_absent()
        if known:   # (not distinct & known: that walks all of known)
            gaining = [key for key in distinct if key in known]
            if gaining:
                self.change_absent(remove=gaining)
        if self.unique:
            outer = self.outer
            for key in distinct:
                if key not in touched:
                    touched[key] = _KeyRows(outer)
        return touched

    def put_back(self, touched: dict) -> None:
        """Re-cache the entries ``own`` handed out, with their new charges; a key left
        without rows leaves the cache for the known-absent keys."""
        charge_of, cache = self.charge_of, self.cache
        empty = [key for key, entry in touched.items() if not entry.rows]
        if empty:
            for key in empty:
                cache.pop(key, None)
            cache.put_many((key, entry, charge_of(entry)) for key, entry in touched.items() if entry.rows)
        else:
            cache.put_many((key, entry, charge_of(entry)) for key, entry in touched.items())
        if empty or self.known_absent():
            self.change_absent(add=empty, remove=[key for key, entry in touched.items() if entry.rows])

    def tables(self) -> list:
        return [self.table] if self.degree is None else [self.table, self.degree]

    def entries(self, keys) -> dict:
        """key -> :class:`_KeyRows` for ``keys`` (distinct, non-NULL): cached ones, the others
        read with one batched prefix read per table and cached; keys outside the side's key
        filter are absent without a read (and, as in the column-wise probe, get no known-absent
        entry: the known-absent keys stay inside the filter, which ``_inner_chunk`` relies on)."""
        out: dict = {}
        missing = self.cache.get_many(keys, out)
        if not missing:
            return out
        absent = self.absent
        known = self.known_absent()
        if known:
            unknown = [key for key in missing if key not in known]
            if len(unknown) < len(missing):
                for key in missing:
                    if key in known:
                        out[key] = absent
                missing = unknown
                if not missing:
                    return out
        if self.filter is not None and self.filter.on:   # keys this side never wrote: no read, and
            types = self.schema.types                      # no known-absent entry (``_inner_chunk``)
            maybe = self.filter.may_contain(hash_keys([to_arrow([key[j] for key in missing], types[c])
                                                       for j, c in enumerate(self.keys)]))
            if not maybe.all():
                for key in compress(missing, ~maybe):
                    out[key] = absent
                missing = list(compress(missing, maybe))
                if not missing:
                    return out
        groups = self.table.rows_with_prefixes(missing)
        degrees = self.degree.rows_with_prefixes(missing) if self.degree is not None else None
        pk_of, outer = self.pk_of, self.outer
        none = [key for key, rows in zip(missing, groups) if not rows]
        for key in none:
            out[key] = absent
        if len(none) < len(missing):
            self.sample(next(rows for rows in groups if rows)[0])
            per_row = self.row_charge + _ROW_OVERHEAD   # charge_of's per-row part
            seen = self.seen.keys()
            puts, first = [], []   # admitted (read before, within the seen keys' horizon); read once
            if degrees is None:
                for key, rows in zip(missing, groups):
                    if rows:
                        entry = out[key] = _KeyRows(outer, dict(zip(map(pk_of, rows), rows)))
                        if key in seen:
                            puts.append((key, entry, _ENTRY_BYTES + _FIRST_ROW_BYTES + len(rows) * per_row))
                        else:
                            first.append(key)
            else:
                n_pk = len(self.state_pk)
                for key, rows, found in zip(missing, groups, degrees):
                    if rows:
                        by_pk = dict(zip(map(pk_of, rows), rows))
                        stored = {d[:n_pk]: d[n_pk] for d in found}
                        entry = out[key] = _KeyRows(outer, by_pk, {pk: stored.get(pk, 0) for pk in by_pk})
                        if key in seen:
                            puts.append((key, entry, _ENTRY_BYTES + _FIRST_ROW_BYTES + len(by_pk) * per_row))
                        else:
                            first.append(key)
            if puts:
                self.cache.put_many(puts)
            if puts or first:
                self.seen.change(add=first, remove=[key for key, _, _ in puts])
        if none:
            self.change_absent(add=none)
        return out

    def probe_columns(self, keys):
        """The rows of ``keys`` (distinct, non-NULL) as columns, for the probe of an inner join's
        column-wise path (a side without degrees): ``(index, starts, counts, columns)`` -- key ->
        its number ``j``, whose rows are ``columns[c][starts[j]:starts[j] + counts[j]]`` (a cached
        entry's in entry order, a read key's in pk order; only keys with rows are numbered) --
        or None when no key has rows. The same reads, admissions and known-absent keys as
        :meth:`entries`, but a key read once is not made into an entry (nothing keeps it), and
        the rows read are decoded straight into Arrow columns (``StateTable.pairs_with_prefixes``
        and ``decode_columns``): no tuple per row, no list per key. With integer-like join keys
        the seen keys are a :class:`SeenFilter` of their hashes (one vectorized test for all
        keys read), else the side's seen :class:`KeySet`."""
        cached: dict = {}
        missing = self.cache.get_many(keys, cached)
        if missing:
            known = self.known_absent()
            if known:
                missing = [key for key in missing if key not in known]
        found, parts, starts, counts = [], [], [], []
        if missing:
            bkeys, bvalues, ends = self.table.pairs_with_prefixes(missing)
            ends = np.asarray(ends, np.int64)
            sizes = ends.copy()
            sizes[1:] -= ends[:-1]
            has = sizes > 0
            if not has.all():
                self.change_absent(add=list(compress(missing, ~has)))
            if bkeys:
                found = list(compress(missing, has))
                sizes = sizes[has]
                firsts = (ends[has] - sizes)
                block = self.table.decode_columns(bkeys, bvalues)
                self.sample(self.table.serde.decode(bkeys[0], bvalues[0]))
                if self.seen_hashes is not None:   # the seen test on the keys' hashes, vectorized
                    seen = self.seen_hashes.get(0)
                    if seen is None:
                        seen = SeenFilter(self.seen.limit)
                        self.seen_hashes.put(0, seen, seen.nbytes)
                    again = seen.seen_then_add(hash_keys([_take(block[c], firsts) for c in self.keys]))
                    admitted = np.flatnonzero(again).tolist() if again.any() else ()
                else:
                    seen = self.seen.keys()
                    admitted = [j for j, key in enumerate(found) if key in seen] if seen else ()
                    if admitted:
                        taken = set(admitted)
                        self.seen.change(add=[key for j, key in enumerate(found) if j not in taken],
                                         remove=[found[j] for j in admitted])
                    else:
                        self.seen.change(add=found)
                if admitted:   # read before, within the seen keys' horizon: cached from now on
                    per_row = self.row_charge + _ROW_OVERHEAD   # charge_of's per-row part
                    pk_of, puts = self.pk_of, []
                    spans = list(zip(firsts[admitted].tolist(), sizes[admitted].tolist()))
                    if len(spans) == len(found):
                        decoded = self.table.serde.decode_many(bkeys, bvalues)
                    else:   # the admitted keys' pairs, decoded in one call
                        ks, vs = [], []
                        for a, size in spans:
                            ks += bkeys[a:a + size]
                            vs += bvalues[a:a + size]
                        decoded = self.table.serde.decode_many(ks, vs)
                    at = 0
                    for j, (_, size) in zip(admitted, spans):
                        rows = decoded[at:at + size]
                        at += size
                        puts.append((found[j], _KeyRows(False, dict(zip(map(pk_of, rows), rows))),
                                     _ENTRY_BYTES + _FIRST_ROW_BYTES + size * per_row))
                    self.cache.put_many(puts)
                parts.append(block)
                starts.append(firsts)
                counts.append(sizes)
        if cached:
            rows = []
            sizes = []
            for entry in cached.values():
                sizes.append(len(entry.rows))
                rows += entry.rows.values()
            sizes = np.array(sizes, np.int64)
            offset = len(parts[0][0]) if parts else 0
            starts.append(np.cumsum(sizes) - sizes + offset)
            counts.append(sizes)
            found += cached.keys()
            parts.append([to_arrow(list(c), t) for c, t in zip(zip(*rows), self.schema.types)])
        if not found:
            return None
        columns = parts[0] if len(parts) == 1 else [pa.concat_arrays(pair) for pair in zip(*parts)]
        index = dict(zip(found, range(len(found))))
        return index, np.concatenate(starts), np.concatenate(counts), columns

    def write(self, chunk: StreamChunk, identity: str):
        """Apply a compact input chunk to the rows table (strict mode: all or nothing) and add
        its keys to the key filter; returns ``(hashes, parts, new)``: the rows' key hashes and
        their ``probe_parts`` (None without a filter) and which rows' join keys the filter
        proved new to this side before this chunk (None unless the table is strict and the
        filter on). A strict table is told
        those rows (``StateTable.write_chunk_fresh``): their pks cannot have a row, so they need
        no store probe -- in a 1:1 join, every insert."""
        table, filt = self.table, self.filter
        hashes = parts = fresh = None
        try:
            if filt is None:
                table.write_chunk(chunk.ops, chunk.columns, chunk.visibility)
            else:
                hashes = hash_keys([chunk.columns[c] for c in self.keys])
                parts = probe_parts(hashes)   # (for this side's filter and the other's)
                if table.consistent and filt.on:
                    fresh = ~filt.may_contain(hashes, parts)
                    table.write_chunk_fresh(chunk.ops, chunk.columns, fresh, chunk.visibility)
                else:
                    table.write_chunk(chunk.ops, chunk.columns, chunk.visibility)
        except InconsistentOpError as exc:
            raise InconsistentStreamError(identity, f"{self.label} input: {exc.reason}", exc.pk) from exc
        if filt is not None:
            filt.add(hashes, parts)
        if self.fresh is not None:
            self._keep_fresh(chunk, hashes, fresh)
        return hashes, parts, fresh

    def _keep_fresh(self, chunk: StreamChunk, hashes, fresh) -> None:
        """Hand a written chunk to the fresh rows: its keys are forgotten, and its inserts of
        keys the key filter proved new (``new``), each once in the chunk and without a NULL,
        kept."""
        new = fresh
        if fresh is not None and fresh.any():
            fresh = fresh & (chunk.ops == INSERT)
            if fresh.any():
                h = np.sort(hashes)
                twice = h[1:][h[1:] == h[:-1]]
                if len(twice):   # a hash twice in the chunk: a key's second row or op (or a collision)
                    fresh &= ~np.isin(hashes, twice)
                for c in self.keys:
                    if chunk.columns[c].null_count:
                        fresh &= chunk.columns[c].is_valid().to_numpy(zero_copy_only=False)
        else:
            fresh = np.zeros(0, np.bool_)
        self.fresh.write(hashes, chunk.columns, fresh, new)

    def write_rows(self, table: StateTable, ops: list, rows: list, identity: str) -> None:
        if not ops:
            return
        if table is self.table and self.fresh is not None:   # (the watermark's state cleaning)
            self.fresh.clear()
        columns = [list(c) for c in zip(*rows)]
        try:
            table.write_chunk(ops, columns)
        except InconsistentOpError as exc:   # a degree that disagrees with the state: a bug or a broken store
            raise InconsistentStreamError(identity, f"{self.label} degree: {exc.reason}", exc.pk) from exc


class HashJoin(Executor):
    """``left <join_type> JOIN right ON left[left_keys] = right[right_keys] AND condition``
    (module docstring).

    ``table_ids``: ``(left rows, right rows, left degree, right degree)``; a degree id is only
    needed for an outer side (left for ``left``/``full``, right for ``right``/``full``).
    ``condition``: a boolean :mod:`stream.expr` expression over the joined row (left columns,
    then right columns), or None. ``budget``: the MemoryBudget of the caches (None: the
    process default). ``consistent``: strict state tables (a delete of a missing row raises).
    ``flush_threshold``: the state tables' MemTable spill size (``JOIN_FLUSH_BYTES``)."""

    def __init__(self, left: Executor, right: Executor, left_keys, right_keys, join_type: str = "inner", *,
                 store, table_ids, condition=None, budget=None, vnodes=None, consistent: bool = True,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, flush_threshold: int = JOIN_FLUSH_BYTES,
                 identity: str | None = None):
        identity = identity or f"HashJoin({join_type})"
        if join_type not in JOIN_TYPES:
            raise ExecutorError(identity, f"join_type must be one of {JOIN_TYPES}, got {join_type!r}")
        left_keys, right_keys = list(left_keys), list(right_keys)
        if not left_keys or len(left_keys) != len(right_keys):
            raise ExecutorError(identity, f"needs as many left keys as right keys (>= 1), got {left_keys} "
                                          f"and {right_keys}")
        for lk, rk in zip(left_keys, right_keys):
            if not (0 <= lk < len(left.schema) and 0 <= rk < len(right.schema)):
                raise ExecutorError(identity, f"join key columns {lk}, {rk} are out of range")
            if left.schema.types[lk] != right.schema.types[rk]:
                raise ExecutorError(identity, f"join key types differ: {left.schema.types[lk].sql_name()} and "
                                              f"{right.schema.types[rk].sql_name()} (cast one side first)")
        # an input without a stream key is a one-row stream (a global aggregate): its state pk is
        # the join key alone, unique since it holds one row at a time
        table_ids = list(table_ids) + [None] * (4 - len(table_ids))
        schema = self._output_schema(left.schema, right.schema)
        if condition is not None and condition.data_type != DataType.BOOLEAN:
            raise ExecutorError(identity, f"the condition is {condition.data_type.sql_name()}, not BOOLEAN")
        self._join_schema = schema    # the extra condition's input: left then right columns
        if join_type in SEMI_ANTI:
            schema, stream_key = left.schema, list(left.stream_key)
        else:
            stream_key = self._output_key(join_type, left, right, left_keys, right_keys)
        super().__init__([left, right], schema, stream_key, identity)
        self.join_type = join_type
        self.condition = condition
        self.chunk_size = chunk_size
        budget = budget if budget is not None else default_budget()
        self.budget = budget
        self.left = _Side("left", left, left_keys, join_type in ("left", "full") + SEMI_ANTI, store, table_ids[0],
                          table_ids[2], budget, vnodes, consistent, identity, flush_threshold)
        self.right = _Side("right", right, right_keys, join_type in ("right", "full"), store, table_ids[1],
                           table_ids[3], budget, vnodes, consistent, identity, flush_threshold)
        if join_type == "inner" and condition is None:   # the column-wise path's probes (``_inner_chunk``)
            for side in (self.left, self.right):
                side.keep_fresh_rows(budget, identity)

    @staticmethod
    def _output_schema(left: Schema, right: Schema) -> Schema:
        names = list(left.names)
        taken = set(names)
        for name in right.names:
            new, n = name, 1
            while new in taken:
                new, n = f"{name}_{n}", n + 1
            names.append(new)
            taken.add(new)
        return Schema(list(zip(names, left.types + right.types)))

    @staticmethod
    def _output_key(join_type, left, right, left_keys, right_keys) -> list:
        """The output stream key (module docstring): both keys, minus the dropped duplicates."""
        offset = len(left.schema)
        lkey, rkey = list(left.stream_key), list(right.stream_key)
        if join_type in ("inner", "left"):
            equal = {rk for lk, rk in zip(left_keys, right_keys) if lk in lkey}
            rkey = [c for c in rkey if c not in equal]
        elif join_type == "right":
            equal = {lk for lk, rk in zip(left_keys, right_keys) if rk in rkey}
            lkey = [c for c in lkey if c not in equal]
        return lkey + [offset + c for c in rkey]

    # --- the executor --------------------------------------------------------------------------

    def state_tables(self) -> list:
        return self.left.tables() + self.right.tables()

    def caches(self) -> list:
        """Each side's entries, known-absent keys and seen keys (the key sets' caches sit two
        levels down, below what ``Executor.caches`` looks through)."""
        return [c for side in (self.left, self.right)
                for c in (side.cache, side.absent_keys.cache, side.seen.cache, side.seen_hashes,
                          side.fresh and side.fresh.cache) if c is not None]

    def on_init(self, barrier: Barrier) -> None:
        for side in (self.left, self.right):   # refill from the committed state
            side.cache.clear()
            side.absent_keys.clear()
            side.seen.clear()
            if side.seen_hashes is not None:
                side.seen_hashes.clear()
            if side.fresh is not None:
                side.fresh.clear()
            if side.filter is not None:
                side.filter.rebuild(side.table, side.keys)

    async def execute(self):
        inputs = [self.left.input.execute(), self.right.input.execute()]
        async for i, msg in align_barriers(inputs, self.identity):
            if i is None:
                for m in self.handle_barrier(msg):
                    yield m
            elif type(msg) is StreamChunk:
                if self._epoch is None:
                    raise ExecutorError(self.identity, f"the first message must be a barrier, got {msg!r}")
                if msg.cardinality:
                    for m in self.on_side_chunk(i, msg):
                        yield m
            else:   # a Watermark (module docstring)
                for m in self._on_watermark(i, msg):
                    yield m

    def _on_watermark(self, side: int, watermark) -> list:
        """Input ``side``'s watermark: the output watermarks it raises, after the state
        cleaning it allows (stream/executors/join_watermark.py)."""
        marks = self.__dict__.get("_join_watermarks")
        if marks is None:
            marks = self._join_watermarks = JoinWatermarks(self)
        return marks.on_watermark(side, watermark)

    def close(self) -> None:
        """Release the caches' budget (the executor is dropped)."""
        for side in (self.left, self.right):
            side.cache.close()
            side.absent_keys.close()
            side.seen.close()
            if side.seen_hashes is not None:
                side.seen_hashes.close()
            if side.fresh is not None:
                side.fresh.cache.close()

    # --- one chunk -----------------------------------------------------------------------------

    def on_side_chunk(self, side: int, chunk: StreamChunk) -> list:
        """Apply ``chunk`` of input ``side`` (0 left, 1 right); returns the output chunks."""
        s, o = (self.left, self.right) if side == 0 else (self.right, self.left)
        s_left = side == 0
        chunk = chunk.compact()   # once, for the write and the probe
        hashes, parts, new = s.write(chunk, self.identity)
        if self.join_type in SEMI_ANTI:
            return semi_anti_chunk(self, s, o, chunk, s_left)
        if self.condition is None and not s.outer and not o.outer:
            if not (chunk.ops >= UPDATE_DELETE).any():
                return self._inner_chunk(s, o, chunk, s_left, hashes, new, parts)
        rows = chunk.rows()
        keys, entries, passes = self._probe(s, o, rows, s_left)

        builder = StreamChunkBuilder(self.schema, self.chunk_size)
        out = []

        def emit(op, srow, orow):
            done = builder.append(op, srow + orow if s_left else orow + srow)
            if done is not None:
                out.append(done)

        def emit_pair(sold, snew, orow):
            done = builder.append_update(sold + orow if s_left else orow + sold,
                                         snew + orow if s_left else orow + snew)
            if done is not None:
                out.append(done)

        o_outer, s_outer = o.outer, s.outer
        o_null, s_null = o.null_row, s.null_row
        o_changed: dict = {}       # O state pk -> (entry, degree before this chunk)
        s_deg_ops, s_deg_rows = [], []
        s_touched: dict = {}       # key -> S entry changed by this chunk
        pk_of = s.pk_of
        empty = _ABSENT[0]

        def matches(i):
            """[(O pk, O row)] matching row i."""
            key = keys[i]
            if None in key:
                return []
            entry = entries[key]
            if passes is None:
                return list(entry.rows.items())
            ok = passes[i]
            return [item for item, p in zip(entry.rows.items(), ok) if p]

        def bump(entry, opk, delta):
            """O row ``opk``'s degree += delta; returns the degree before."""
            degrees = entry.degrees
            before = degrees[opk]
            if opk not in o_changed:
                o_changed[opk] = (entry, before)
            degrees[opk] = before + delta
            return before

        def own_entry(key):
            """S's cached entry of ``key`` to update, or None."""
            return s.own(key, s_touched)

        n = len(rows)
        i = 0
        while i < n:
            op, row = rows[i]
            key = keys[i]
            if op == UPDATE_DELETE and i + 1 < n and rows[i + 1][0] == UPDATE_INSERT and keys[i + 1] == key:
                new = rows[i + 1][1]
                old_m = dict(matches(i))
                new_m = dict(matches(i + 1))
                entry = entries.get(key, empty) if None not in key else empty
                if s_outer and not old_m and new_m:
                    emit(DELETE, row, o_null)
                for opk, orow in entry.rows.items():
                    a, b = opk in old_m, opk in new_m
                    if a and b:
                        emit_pair(row, new, orow)
                    elif a:
                        emit(DELETE, row, orow)
                        if o_outer and bump(entry, opk, -1) == 1:
                            emit(INSERT, s_null, orow)
                    elif b:
                        if o_outer and bump(entry, opk, 1) == 0:
                            emit(DELETE, s_null, orow)
                        emit(INSERT, new, orow)
                if s_outer:
                    if not old_m and not new_m:
                        emit_pair(row, new, o_null)
                    elif old_m and not new_m:
                        emit(INSERT, new, o_null)
                    pk = pk_of(row)
                    if len(old_m) != len(new_m):
                        s_deg_ops += [UPDATE_DELETE, UPDATE_INSERT]
                        s_deg_rows += [pk + (len(old_m),), pk + (len(new_m),)]
                mine = own_entry(key)
                if mine is not None:
                    mine.remove(pk_of(row))
                    mine.add(pk_of(new), new, len(new_m))
                i += 2
                continue
            found = matches(i)
            if op == INSERT or op == UPDATE_INSERT:
                if o_outer and found:
                    entry = entries[key]
                    for opk, orow in found:
                        if bump(entry, opk, 1) == 0:
                            emit(DELETE, s_null, orow)
                        emit(INSERT, row, orow)
                else:
                    for _, orow in found:
                        emit(INSERT, row, orow)
                if s_outer:
                    if not found:
                        emit(INSERT, row, o_null)
                    s_deg_ops.append(INSERT)
                    s_deg_rows.append(pk_of(row) + (len(found),))
                mine = own_entry(key)
                if mine is not None:
                    mine.add(pk_of(row), row, len(found))
            else:
                if o_outer and found:
                    entry = entries[key]
                    for opk, orow in found:
                        emit(DELETE, row, orow)
                        if bump(entry, opk, -1) == 1:
                            emit(INSERT, s_null, orow)
                else:
                    for _, orow in found:
                        emit(DELETE, row, orow)
                if s_outer:
                    if not found:
                        emit(DELETE, row, o_null)
                    s_deg_ops.append(DELETE)
                    s_deg_rows.append(pk_of(row) + (len(found),))
                mine = own_entry(key)
                if mine is not None:
                    mine.remove(pk_of(row))
            i += 1

        if s_outer:
            s.write_rows(s.degree, s_deg_ops, s_deg_rows, self.identity)
        if o_changed:
            ops, deg_rows = [], []
            for opk, (entry, before) in o_changed.items():
                after = entry.degrees[opk]
                if after != before:
                    ops += [UPDATE_DELETE, UPDATE_INSERT]
                    deg_rows += [opk + (before,), opk + (after,)]
            o.write_rows(o.degree, ops, deg_rows, self.identity)
        if s_touched:
            s.put_back(s_touched)
        for table in s.tables():
            table.try_flush()
        if o_changed:
            o.degree.try_flush()
        last = builder.take()
        if last is not None:
            out.append(last)
        return out

    def _inner_chunk(self, s: _Side, o: _Side, chunk: StreamChunk, s_left: bool, hashes=None, new=None,
                     parts=None) -> list:
        """The per-chunk path of an inner join without an extra condition for a compact chunk
        of inserts and deletes only (no update pairs), written into S's table already: every
        row's output is its op with each O row of its key (entry order), so the output is
        built column-wise -- S's columns with one ``take`` of the row positions repeated by
        their match counts, O's from the matched rows -- in the order the row-by-row path
        emits it, up to the order of one row's matches (a key this probe reads is not made an
        entry, so its rows come in pk order where the row path's entry may hold them in
        arrival order). S's cached entries take the rows of their keys. ``hashes``: the rows' key
        hashes (``_Side.write``): keys outside O's key filter are not probed. ``new``: the rows
        whose key S's key filter proved new before this chunk (``_Side.write``): such a key has
        no cached entry and is not known absent on S (both only hold keys inside the filter),
        so a side that is not ``unique`` looks up its entries only for the other rows. Key
        tuples are made only for the rows probed or looked up. ``parts``: the hashes'
        ``probe_parts``."""
        n = len(chunk.ops)
        cols = chunk.columns
        types = s.schema.types
        valid = None   # rows without a NULL in the key (None: all)
        if any(cols[c].null_count for c in s.keys):
            valid = np.ones(n, np.bool_)
            for c in s.keys:
                if cols[c].null_count:
                    valid &= cols[c].is_valid().to_numpy(zero_copy_only=False)
        maybe = o.filter.may_contain(hashes, parts) if hashes is not None and o.filter is not None else None
        fresh = self._fresh_hits(s, o, chunk, hashes, maybe, valid) if o.fresh is not None else None
        probing = np.ones(n, np.bool_) if maybe is None else maybe.copy()   # O may have rows of their key
        if fresh is not None:   # the keys O's fresh rows answer are not probed
            probing[fresh[0]] = False
        owning = ~new if new is not None and not s.unique else np.ones(n, np.bool_)   # S's entries to look up
        if valid is not None:
            probing &= valid
            owning &= valid
        wanted = probing | owning
        if wanted.all():
            keys = list(zip(*[_key_values(cols[c], types[c]) for c in s.keys]))
            rows = None   # keys[j] is row j's
        else:
            rows = np.flatnonzero(wanted)
            keys = list(zip(*[_key_values(cols[c], types[c], rows) for c in s.keys]))
            probing, owning = probing[rows], owning[rows]
        probe = set(compress(keys, probing))
        probed = o.probe_columns(probe) if probe else None

        # S's own cached entries (read-after-write for later chunks of O)
        touched = s.own_many(set(compress(keys, owning))) if owning.any() else None
        need = [j for j, key in enumerate(keys) if key in touched] if touched else None
        if need:
            if rows is not None:
                need_rows = rows[need].tolist()
            else:
                need_rows = need
            if len(need_rows) == n:
                srows = list(zip(*[to_pylist(c, t) for c, t in zip(cols, types)]))
            else:
                at = pa.array(need_rows, pa.int64())
                srows = list(zip(*[to_pylist(c.take(at), t) for c, t in zip(cols, types)]))
            s.sample(srows[0])
            pk_of = s.pk_of
            ops = chunk.ops.tolist()
            for i, j, row in zip(need_rows, need, srows):
                entry = touched[keys[j]]
                if ops[i] == INSERT:
                    entry.add(pk_of(row), row, None)
                else:
                    entry.remove(pk_of(row))
        if touched:
            s.put_back(touched)
        for table in s.tables():
            table.try_flush()

        if probed is None and fresh is None:
            return []
        if probed is not None:
            index, starts, counts, o_block = probed
            none = len(index)   # the number of "no rows": count 0
            probed_at = np.flatnonzero(probing)   # (rows not probed have no rows read)
            which = np.full(n, none, np.int64)
            which[probed_at if rows is None else rows[probed_at]] = np.fromiter(
                map(index.get, compress(keys, probing), repeat(none, len(probed_at))), np.int64, len(probed_at))
            starts = np.append(starts, np.int64(0))[which]
            counts = np.append(counts, np.int64(0))[which]
        else:
            starts = np.zeros(n, np.int64)
            counts = np.zeros(n, np.int64)
            o_block = None
        if fresh is not None:   # each hit row's one O row, after the rows read
            at, f_block = fresh
            offset = len(o_block[0]) if o_block else 0
            starts[at] = np.arange(offset, offset + len(at), dtype=np.int64)
            counts[at] = 1
            o_block = f_block if not o_block else [pa.concat_arrays(pair) for pair in zip(o_block, f_block)]
        total = int(counts.sum())
        if not total:
            return []
        at = np.repeat(np.arange(n, dtype=np.int64), counts)
        first = np.cumsum(counts) - counts   # each row's first output position
        o_at = np.repeat(starts - first, counts) + np.arange(total, dtype=np.int64)
        s_cols = [_take(c, at) for c in cols]
        o_cols = [_take(c, o_at) for c in o_block]
        columns = s_cols + o_cols if s_left else o_cols + s_cols
        ops = np.repeat(chunk.ops, counts)
        size = self.chunk_size
        if total <= size:
            return [StreamChunk(ops, columns, self.schema)]
        return [StreamChunk(ops[a:a + size], [c.slice(a, size) for c in columns], self.schema)
                for a in range(0, total, size)]

    @staticmethod
    def _fresh_hits(s: _Side, o: _Side, chunk: StreamChunk, hashes, maybe, valid):
        """The rows of S's chunk whose key O's fresh rows hold (its one row):
        ``(row positions, O's columns of their rows)``, or None when no row's is there. Only
        rows O's key filter passes (``maybe``) and without a NULL in the key (``valid``; None:
        all) are looked up, and a hash found counts only when the key's values are the row's."""
        cols = chunk.columns
        if maybe is not None:
            at = np.flatnonzero(maybe if valid is None else maybe & valid)
        else:
            at = np.arange(len(chunk.ops)) if valid is None else np.flatnonzero(valid)
        if not len(at):
            return None
        looked = o.fresh.lookup(hashes[at])
        if looked is None:
            return None
        found, slots, table = looked
        if not found.any():
            return None
        at, slots = at[found], slots[found]
        same = o.fresh.keys_equal(table, slots, [_as_int64(cols[c])[at] for c in s.keys])
        if not same.all():
            at, slots = at[same], slots[same]
            if not len(at):
                return None
        o.fresh.hits += len(at)
        o.fresh.taken(table, slots)
        return at, o.fresh.take(table, slots)

    def _probe(self, s, o, rows, s_left: bool):
        """``(keys, entries, passes)`` of side ``s``'s ``rows``: their join keys, the other side's
        cached entries of the non-NULL keys (one batched read), and the extra condition's
        results (None without one)."""
        keys = [s.key_of(row) for _, row in rows]
        wanted = {k for k in keys if None not in k}
        entries = o.entries(wanted) if wanted else {}
        passes = self._condition(rows, keys, entries, s_left) if self.condition is not None else None
        return keys, entries, passes

    def _condition(self, rows, keys, entries, s_left: bool) -> list:
        """Per row, the extra condition over each of its candidates (the rows of its key on the
        other side, in entry order) as a list of bools (NULL is False); one vectorized
        evaluation over every pair of the chunk."""
        pair_s, pair_o, counts = [], [], []
        for (_, row), key in zip(rows, keys):
            if None in key:
                counts.append(0)
                continue
            others = entries[key].rows.values()
            counts.append(len(others))
            for orow in others:
                pair_s.append(row)
                pair_o.append(orow)
        if not pair_s:
            return [[] for _ in rows]
        lrows, rrows = (pair_s, pair_o) if s_left else (pair_o, pair_s)
        columns = [to_arrow(list(col), t) for col, t in zip(zip(*lrows), self.left.schema.types)]
        columns += [to_arrow(list(col), t) for col, t in zip(zip(*rrows), self.right.schema.types)]
        result = self.condition.eval(columns, len(pair_s))
        if result.null_count:
            result = pc.fill_null(result, False)
        flags = result.to_pylist()
        out, at = [], 0
        for c in counts:
            out.append(flags[at:at + c])
            at += c
        return out

    # --- checks ----------------------------------------------------------------------------------

    def _check(self) -> None:
        """The invariants of the module docstring, read from the state tables (tests)."""
        self.budget._check()
        for s, o in ((self.left, self.right), (self.right, self.left)):
            for key in s.known_absent():
                assert key not in s.cache, (s.label, key, "cached and known absent")
                assert not list(s.table.iter_with_prefix(key)), (s.label, key, "known absent but has rows")
            assert len(s.known_absent()) <= s.absent_limit, (s.label, len(s.known_absent()))
            if s.filter is not None and s.filter.on:   # every stored key is in the key filter
                for batch in s.table.iter_batches(columns=s.keys):
                    assert s.filter.may_contain(hash_keys(batch.columns)).all(), (s.label, "key filter")
                known = list(s.known_absent())   # and so is every known-absent key (``_inner_chunk``)
                if known:
                    types = s.schema.types
                    h = hash_keys([to_arrow([k[j] for k in known], types[c]) for j, c in enumerate(s.keys)])
                    assert s.filter.may_contain(h).all(), (s.label, "a known-absent key outside the key filter")
            assert len(s.seen.keys()) <= s.seen.limit, (s.label, len(s.seen.keys()))
            if s.fresh is not None:   # a key kept is the key's one stored row
                kept = s.fresh.kept()
                types = s.schema.types
                for row in zip(*[to_pylist(c, t) for c, t in zip(kept, types)]):
                    stored = list(s.table.iter_with_prefix(s.key_of(row)))
                    assert stored == [row], (s.label, "fresh", row, stored)
            for key in s.cache.keys():
                entry = s.cache.peek(key)
                stored = {s.pk_of(r): r for r in s.table.iter_with_prefix(key)}
                assert entry.rows == stored, (s.label, key, entry.rows, stored)
                if s.degree is not None:
                    n = len(s.state_pk)
                    degs = {d[:n]: d[n] for d in s.degree.iter_with_prefix(key)}
                    assert entry.degrees == degs, (s.label, key, entry.degrees, degs)
            if s.degree is None:
                continue
            n = len(s.state_pk)
            degrees = {d[:n]: d[n] for d in s.degree.iter_with_prefix(())}
            rows = list(s.table.iter_with_prefix(()))
            assert set(degrees) == {s.pk_of(r) for r in rows}, (s.label, degrees)
            for row in rows:
                key = s.key_of(row)
                count = 0
                if None not in key:
                    for orow in o.table.iter_with_prefix(key):
                        count += self._passes(row, orow, s is self.left)
                assert degrees[s.pk_of(row)] == count, (s.label, row, degrees[s.pk_of(row)], count)

    def _passes(self, srow, orow, s_left: bool) -> bool:
        if self.condition is None:
            return True
        joined = srow + orow if s_left else orow + srow
        columns = [to_arrow([v], t) for v, t in zip(joined, self._join_schema.types)]
        return self.condition.eval(columns, 1).to_pylist()[0] is True
