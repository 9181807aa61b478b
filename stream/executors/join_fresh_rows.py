"""A HashJoin side's *fresh rows*: the rows it inserted under a join key it never had before,
kept column-wise in numpy arrays, so the other side's probe of such a key takes the row from
here instead of reading the store (stream/executors/hash_join.py, the inner join's column-wise
path). In a 1:1 join every row is such a row, and every probe that finds a partner finds it
here while the partner is still kept.

What is kept: a row of an insert whose join key (a) the side's key filter proved new
(``join_key_filter.KeyFilter``: the key has no row in the side's state table) and (b) occurs
once in its chunk -- so at that moment the row is the key's only row. Any later write of the
side to that key (an insert or delete the filter does not prove new) removes the key from here
(:meth:`FreshRows.write`), so a key found here always has exactly this one row. A state-table
write that bypasses ``_Side.write`` (the watermark's state cleaning) clears everything
(:meth:`FreshRows.clear`). A key the filter proves new cannot be here: every key kept went into
the filter, which forgets nothing and answers by the key's hash alone.

Shape: a two-way set-associative table, as a CPU cache: a key may sit in one of two slots,
given by two bit fields of its 64-bit hash (``join_key_filter.hash_keys``), and each slot holds
the hash, the order the key came in and the row's values, one numpy array per column (and a
validity array from a column's first NULL). A new key takes the empty one of its slots, else
one whose row a probe has taken already (:meth:`FreshRows.taken`: its age becomes 0), else
the one whose key came in first (that key is then read from the store again): no probing, two
gathers a lookup. A taken row stays until its slot is needed: in a 1:1 join its key is never
probed again, and without that rule the table filled with such rows and pushed out rows still
waiting for their partner; in a 1:n join the one side's row stays for the n probes while its
slots are not needed. Keys of one chunk that want one slot take turns (:meth:`_Table.insert`:
the others try their other slot), as do a growing table's. A hash found is checked against
the key's values by the caller (:meth:`FreshRows.keys_equal`), so a collision costs a store
read, never a wrong row. The table starts at ``FIRST_SLOTS`` slots and doubles (re-slotting
its keys) each time as many keys went in as half its slots or a chunk's keys would push out
more than 1/64 of their number of keys still waiting, up to ``max_slots`` (by default as many
as a third of the budget holds). Only sides whose columns are all fixed-width integer-like
(SMALLINT, INT, BIGINT, DATE, TIMESTAMP, TIMESTAMPTZ: :func:`supported`) keep fresh rows: they
come back as the very Arrow arrays the store read gives (``StateTable.decode_columns``:
``relational.arrow.arrow_type`` of each column).

Memory: the table is one entry of the side's cache under the runtime's
:class:`~stream.cache.MemoryBudget`, charged ``nbytes`` (12 bytes a slot for the hash and the
order, the columns' widths, one byte a slot per validity array); evicted, it is simply gone
(its keys are read from the store again) and a new one starts small.

Invariants (``HashJoin._check``): every key kept has exactly one row in the side's state table,
equal to the row kept. Who may call: the side owning it, on the event-loop thread.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from relational.arrow import arrow_type
from relational.types import TypeKind

FIRST_SLOTS = 1 << 12
_ROUNDS = 3   # the tries of keys that want one slot at once (_Table.insert)
_DTYPES = {TypeKind.SMALLINT: np.int16, TypeKind.INT: np.int32, TypeKind.BIGINT: np.int64, TypeKind.DATE: np.int32,
           TypeKind.TIMESTAMP: np.int64, TypeKind.TIMESTAMPTZ: np.int64}
_EMPTY = np.uint64(0)   # a slot's hash when it holds no key (a key hashing to 0 is never kept)
_SECOND = np.uint64(32)  # the second slot: the hash's bits from 32 up


def supported(types) -> bool:
    """Whether a side with these column types can keep fresh rows (module docstring)."""
    return all(t.kind in _DTYPES for t in types)


def slot_bytes(types) -> int:
    """The bytes of one slot of a side with these column types (validity arrays included)."""
    return 12 + sum(np.dtype(_DTYPES[t.kind]).itemsize for t in types)


def _waiting(table, at: np.ndarray) -> int:
    """How many of slots ``at`` hold a key no probe has taken yet."""
    return int(((table.hashes[at] != _EMPTY) & (table.ages[at] != 0)).sum())


class _Table:
    """The slots: hashes, and the columns' values and validity (None: no NULL so far)."""

    __slots__ = ("hashes", "ages", "size", "mask", "columns", "valid", "added", "clock", "nbytes")

    def __init__(self, slots: int, dtypes: list):
        self.hashes = np.zeros(slots, np.uint64)
        self.ages = np.zeros(slots, np.int32)   # the order keys came in (larger: later; 0: taken)
        self.size = np.uint64(slots)
        self.mask = np.uint64(slots - 1) if slots & (slots - 1) == 0 else None   # (a power of two)
        self.columns = [np.zeros(slots, dt) for dt in dtypes]
        self.valid: list = [None] * len(dtypes)
        self.added = 0   # keys put in since the table got this size
        self.clock = 0   # the last age handed out
        self.nbytes = slots * (12 + sum(np.dtype(dt).itemsize for dt in dtypes))

    def charge(self) -> int:
        return self.nbytes + sum(len(v) for v in self.valid if v is not None)

    def homes(self, h: np.ndarray):
        """Each hash's two slots (``h % size`` and ``(h >> 32) % size``; a mask when the size
        is a power of two, as it is below ``max_slots``)."""
        mask = self.mask
        if mask is not None:
            return (h & mask).view(np.int64), ((h >> _SECOND) & mask).view(np.int64)
        size = self.size
        return (h % size).astype(np.int64), ((h >> _SECOND) % size).astype(np.int64)

    def find(self, h: np.ndarray):
        """``(found, slot)`` of each hash (the slot meaningless where not found)."""
        a, b = self.homes(h)
        hashes = self.hashes
        in_a = hashes[a] == h
        in_b = hashes[b] == h
        return in_a | in_b, np.where(in_a, a, b)

    def places(self, h: np.ndarray) -> np.ndarray:
        """The slot each new hash takes: an empty one of its two, else the older key's (a key
        whose row a probe took is the oldest)."""
        a, b = self.homes(h)
        hashes, ages = self.hashes, self.ages
        take_b = (hashes[a] != _EMPTY) & ((hashes[b] == _EMPTY) | (ages[b] < ages[a]))
        return np.where(take_b, b, a)

    def insert(self, h: np.ndarray, values: list, valids: list, taken=None, at=None) -> int:
        """Put the keys of hashes ``h`` (distinct, none in the table) with their rows' values,
        each in the slot :meth:`places` gives (``at``: already asked); of keys that want one
        slot at once the last one takes it, and the others try again against the table as it
        then is (an empty second slot, or an older key's), up to ``_ROUNDS`` times in all.
        ``taken``: which keys stay taken (a grown table's). Returns how many keys went in."""
        idx = None   # the keys still to place (None: all)
        done = 0
        for _ in range(_ROUNDS):
            if at is None:
                at = self.places(h if idx is None else h[idx])
            order = np.argsort(at, kind="stable")
            sorted_at = at[order]
            if len(order) > 1 and (sorted_at[1:] == sorted_at[:-1]).any():   # two keys, one slot: the last one
                last = np.ones(len(order), np.bool_)
                last[:-1] = sorted_at[1:] != sorted_at[:-1]
                win = np.sort(order[last])
            else:
                win = None
            pick = idx if win is None else (win if idx is None else idx[win])
            slots = at if win is None else at[win]
            if pick is None:
                self.put(slots, h, values, valids)
            else:
                self.put(slots, h[pick], [v[pick] for v in values], [None if v is None else v[pick] for v in valids])
            if taken is not None:
                self.ages[slots[taken if pick is None else taken[pick]]] = 0   # (taken stays taken)
            done += len(slots)
            if win is None:
                break
            lost = np.ones(len(at), np.bool_)
            lost[win] = False
            idx = np.flatnonzero(lost) if idx is None else idx[lost]
            at = None
        return done

    def put(self, at: np.ndarray, h: np.ndarray, values: list, valids: list) -> None:
        """Slots ``at`` (distinct) take hashes ``h`` and the rows' values."""
        if self.clock > (1 << 30):   # renumber the ages from 1, order kept (taken: still 0)
            taken = self.ages == 0
            order = np.argsort(self.ages, kind="stable")
            self.ages[order] = np.arange(1, len(order) + 1, dtype=np.int32)
            self.ages[taken] = 0
            self.clock = len(order)
        self.hashes[at] = h
        self.ages[at] = np.arange(self.clock + 1, self.clock + 1 + len(at), dtype=np.int32)
        self.clock += len(at)
        for c, (v, ok) in enumerate(zip(values, valids)):
            self.columns[c][at] = v
            if ok is not None or self.valid[c] is not None:
                if self.valid[c] is None:
                    self.valid[c] = np.ones(len(self.hashes), np.bool_)
                self.valid[c][at] = True if ok is None else ok


class FreshRows:
    """One side's fresh rows (module docstring)."""

    def __init__(self, types, key_indices, cache, max_slots: int | None = None):
        self.types = list(types)
        self.dtypes = [_DTYPES[t.kind] for t in self.types]
        self.arrow_types = [arrow_type(t) for t in self.types]
        self.keys = list(key_indices)
        self.cache = cache          # 0 -> the _Table, under the budget
        self._max_slots = max_slots   # None: a third of the cache's budget (as it is then: a runtime
        self.slot_bytes = slot_bytes(self.types)   # may adopt the cache into its own budget)
        self.hits = 0               # probing rows answered here (tests, stats)

    @property
    def max_slots(self) -> int:
        """The most slots the table grows to: ``max_slots`` as given, else what a third of the
        cache's budget holds."""
        n = self._max_slots
        if n is None:
            n = self.cache.budget.capacity // (3 * self.slot_bytes)
        return max(FIRST_SLOTS, n)

    def table(self) -> _Table | None:
        return self.cache.get(0)

    def clear(self) -> None:
        self.cache.clear()

    def write(self, h: np.ndarray, columns: list, keep: np.ndarray, new: np.ndarray | None) -> None:
        """A chunk of the side was written (its rows' key hashes ``h``, its columns): the keys
        of the rows not proved new (``new``: the key filter's proof per row, None for none)
        are forgotten, then the rows ``keep`` marks (inserts of keys proved new, each once
        in the chunk, no NULL in the key) are kept."""
        table = self.cache.get(0)
        if table is not None:
            old = h if new is None else h[~new]
            if len(old):
                hit, at = table.find(old)
                if hit.any():
                    table.hashes[at[hit]] = _EMPTY
        rows = np.flatnonzero(keep)
        if not len(rows):
            return
        for column, t in zip(columns, self.arrow_types):
            if column.type != t:   # not the store's Arrow type: not kept (the store answers)
                return
        hk = h[rows]
        if not hk.all():   # (a key hashing to 0 is not kept)
            rows = rows[hk != _EMPTY]
            hk = h[rows]
        if table is None:
            table = _Table(FIRST_SLOTS, self.dtypes)
            self.cache.put(0, table, table.charge())
        while table.added + len(rows) > len(table.hashes) // 2 and len(table.hashes) < self.max_slots:
            table = self._grow(table)
        at = table.places(hk)
        while len(table.hashes) < self.max_slots and 64 * _waiting(table, at) > len(at):
            table = self._grow(table)   # (below its size limit, a table grows rather than drop many waiting keys)
            at = table.places(hk)
        values, valids = [], []
        for column, dt in zip(columns, self.dtypes):
            v = np.frombuffer(column.buffers()[1], dt, len(column), column.offset * np.dtype(dt).itemsize)
            values.append(v[rows])
            valids.append(column.is_valid().to_numpy(zero_copy_only=False)[rows] if column.null_count else None)
        had_valid = sum(v is not None for v in table.valid)
        table.added += table.insert(hk, values, valids, at=at)
        if sum(v is not None for v in table.valid) != had_valid:   # a validity array more
            self.cache.put(0, table, table.charge())

    def _grow(self, table: _Table) -> _Table:
        """The table at twice its slots, its keys re-slotted (two that meet: the later one)."""
        bigger = _Table(min(self.max_slots, 2 * len(table.hashes)), self.dtypes)
        live = np.flatnonzero(table.hashes != _EMPTY)
        live = live[np.argsort(table.ages[live], kind="stable")]   # in the order they came in (taken first)
        h = table.hashes[live]
        taken = table.ages[live] == 0
        values = [c[live] for c in table.columns]
        valids = [None if v is None else v[live] for v in table.valid]
        for half in (slice(0, len(live) // 2), slice(len(live) // 2, None)):   # the older half first
            bigger.insert(h[half], [v[half] for v in values], [None if v is None else v[half] for v in valids],
                          taken[half])
        bigger.added = len(live)
        self.cache.put(0, bigger, bigger.charge())
        return bigger

    def lookup(self, h: np.ndarray):
        """``(found, slots, table)``: which of the hashes ``h`` (no 0) are kept and at which
        slot; None when the table is gone or empty."""
        table = self.cache.get(0)
        if table is None:
            return None
        found, at = table.find(h)
        return found & (h != _EMPTY), at, table

    @staticmethod
    def taken(table: _Table, at: np.ndarray) -> None:
        """A probe took the rows of slots ``at`` (found, keys equal): they go first when a new
        key needs their slot (module docstring)."""
        table.ages[at] = 0

    def keys_equal(self, table: _Table, at: np.ndarray, probe: list) -> np.ndarray:
        """Per slot of ``at``: whether its key equals ``probe``'s (the probing rows' key values,
        int64 numpy per key column, no NULLs) -- a hash may be another key's."""
        ok = None
        for c, values in zip(self.keys, probe):
            same = table.columns[c][at].astype(np.int64) == values
            if table.valid[c] is not None:
                same &= table.valid[c][at]
            ok = same if ok is None else ok & same
        return ok

    def take(self, table: _Table, at: np.ndarray) -> list:
        """The rows of slots ``at`` as Arrow arrays, one per column."""
        n = len(at)
        out = []
        for values, valid, t in zip(table.columns, table.valid, self.arrow_types):
            bitmap = None
            if valid is not None:
                ok = valid[at]
                if not ok.all():
                    bitmap = pa.py_buffer(np.packbits(ok, bitorder="little"))
            out.append(pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(values[at])],
                                             null_count=-1 if bitmap is not None else 0))
        return out

    def kept(self) -> list:
        """Every row kept, as Arrow arrays (``HashJoin._check``)."""
        table = self.cache.peek(0)
        if table is None:
            return [pa.array([], t) for t in self.arrow_types]
        return self.take(table, np.flatnonzero(table.hashes != _EMPTY))
