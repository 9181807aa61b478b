"""MemTable: one epoch's operations of one state table, keyed and ordered by encoded table key.

Job: buffer the writes a :class:`~relational.state_table.StateTable` receives between two
commits, merging the operations on one key so that at most one record per key is written, and
serve reads of that buffer (point and ordered range) for read-after-write.

Records (``op, old, new`` with encoded values as bytes)::

    INSERT  (None, new)     the key had no row before this epoch; it now has ``new``
    DELETE  (old, None)     the key had ``old``; it now has no row
    UPDATE  (old, new)      the key had ``old``; it now has ``new``

Merge rules (an existing record, then a new operation):

    ======================  ===================================  ===========================
    existing + operation    strict (consistent) mode             relaxed mode
    ======================  ===================================  ===========================
    INSERT n + delete(n)    record removed (the two cancel)      DELETE(n) (a tombstone)
    INSERT n + update(n,m)  INSERT m                             INSERT m
    INSERT n + insert       InconsistentOpError                  INSERT (the new value)
    DELETE o + insert(m)    UPDATE(o, m)                         UPDATE(o, m)
    DELETE o + delete       InconsistentOpError                  DELETE o
    DELETE o + update(_,m)  InconsistentOpError                  UPDATE(o, m)
    UPDATE o,n + delete(n)  DELETE o                             DELETE o
    UPDATE o,n + update     UPDATE(o, m)                         UPDATE(o, m)
    UPDATE o,n + insert     InconsistentOpError                  UPDATE(o, the new value)
    ======================  ===================================  ===========================

In strict mode an operation whose old row differs (as encoded bytes) from the record's current
row raises too. Relaxed mode turns INSERT + delete into a tombstone rather than nothing
because it never checked storage: the insert may have overwritten a stored row. Errors name the
key through ``describe_key`` (the state table passes its pk decoder) and change nothing.

All or nothing (what the state table builds on): every single operation raises before it
changes anything; :meth:`check_insert`/:meth:`check_delete` ask whether an operation would be
refused without doing it (an update that moves a row checks both keys first); :meth:`undo`
puts back records saved before a run of operations (a chunk that fails half-way); and
:meth:`columns` reads the batch without emptying the buffer, so a commit empties it
(:meth:`clear`) only once the store has accepted the batch.

Invariants (checked by :meth:`_check`): every record has the shape above; the sorted-key index
holds every live key, in ascending byte order, plus possibly removed keys that reads skip.
Not thread-safe: one state table, one executor thread.

Callers: :mod:`relational.state_table` only.
"""

from __future__ import annotations

import bisect
from itertools import repeat
from operator import itemgetter

from relational.errors import InconsistentOpError

INSERT, DELETE, UPDATE = 1, 2, 3
OP_NAMES = {INSERT: "INSERT", DELETE: "DELETE", UPDATE: "UPDATE"}
_NEW = itemgetter(2)


class MemTable:
    """Ordered buffer of merged operations. ``consistent=True`` is strict mode."""

    def __init__(self, consistent: bool = True, describe_key=None, table: str | None = None):
        self.consistent = consistent
        self._describe = describe_key or (lambda key: key)
        self._table = table
        #: key -> record; read-only for callers (``get`` without a method call). Replaced, not
        #: emptied, by :meth:`clear`, so re-read it after a commit.
        self.records: dict[bytes, tuple] = {}
        self._ops = self.records
        self._sorted: list[bytes] | None = None   # built on the first range read
        self._pending: list[bytes] = []           # keys added since, not yet in _sorted
        self._stale = 0                           # removed keys still in _sorted
        self.approx_bytes = 0

    # --- state ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops)

    def get(self, key: bytes):
        """The record ``(op, old, new)`` of ``key``, or ``None`` if this epoch did not touch it."""
        return self._ops.get(key)

    def _error(self, reason: str, key: bytes) -> InconsistentOpError:
        return InconsistentOpError(reason, self._describe(key), self._table)

    def _add_key(self, key: bytes) -> None:
        if self._sorted is not None:
            self._pending.append(key)

    def _remove(self, key: bytes) -> None:
        del self._ops[key]
        if self._sorted is not None:
            self._stale += 1

    # --- writes -----------------------------------------------------------------------------

    def insert(self, key: bytes, new: bytes) -> None:
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (INSERT, None, new)
            self._add_key(key)
            self.approx_bytes += len(key) + len(new) + 64
            return
        op, old, _ = rec
        if op == DELETE:
            self._ops[key] = (UPDATE, old, new)
        elif self.consistent:
            raise self._error("insert of a pk that already has a row", key)
        else:
            self._ops[key] = (op, old, new)

    def delete(self, key: bytes, old: bytes) -> None:
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (DELETE, old, None)
            self._add_key(key)
            self.approx_bytes += len(key) + len(old) + 64
            return
        op, prev, cur = rec
        if op == DELETE:
            if self.consistent:
                raise self._error("delete of a pk that has no row", key)
            return
        if self.consistent and cur != old:
            raise self._error("delete whose old row is not the current row", key)
        if op == INSERT:
            if self.consistent:
                self._remove(key)
            else:
                self._ops[key] = (DELETE, cur, None)
        else:
            self._ops[key] = (DELETE, prev, None)

    def update(self, key: bytes, old: bytes, new: bytes) -> None:
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (UPDATE, old, new)
            self._add_key(key)
            self.approx_bytes += len(key) + len(old) + len(new) + 64
            return
        op, prev, cur = rec
        if op == DELETE:
            if self.consistent:
                raise self._error("update of a pk that has no row", key)
            self._ops[key] = (UPDATE, prev, new)
            return
        if self.consistent and cur != old:
            raise self._error("update whose old row is not the current row", key)
        self._ops[key] = (op, prev, new)

    def check_insert(self, key: bytes, what: str = "insert") -> None:
        """Raise what :meth:`insert` of ``key`` would raise on its record (strict mode); change
        nothing. A key without a record passes (the caller checks storage)."""
        rec = self._ops.get(key)
        if rec is not None and rec[0] != DELETE and self.consistent:
            raise self._error(f"{what} of a pk that already has a row", key)

    def check_delete(self, key: bytes, old: bytes, what: str = "delete") -> None:
        """Raise what :meth:`delete` of ``key`` with ``old`` would raise on its record (strict
        mode); change nothing. A key without a record passes (the caller checks storage)."""
        rec = self._ops.get(key)
        if rec is None or not self.consistent:
            return
        if rec[0] == DELETE:
            raise self._error(f"{what} of a pk that has no row", key)
        if rec[2] != old:
            raise self._error(f"{what} whose old row is not the current row", key)

    def undo(self, saved: list, approx_bytes: int) -> None:
        """Put back the records ``saved`` as ``[(key, record_or_None), ...]``, taken before a
        run of operations (in order; a key saved twice gets its first record back), and the
        ``approx_bytes`` of then."""
        ops = self._ops
        for key, rec in reversed(saved):
            if rec is None:
                if key in ops:
                    self._remove(key)
            else:
                if key not in ops:
                    self._add_key(key)
                ops[key] = rec
        self.approx_bytes = approx_bytes

    def insert_many(self, keys: list, values: list, distinct: bool = False) -> bool:
        """Insert many new keys at once, if none is in the table and none repeats; returns
        False (and changes nothing) otherwise, so the caller falls back to :meth:`insert`.
        ``distinct=True`` is the caller's promise that no key repeats and none has a record
        (it checked both). Keys given in ascending order keep :meth:`drain` cheap (its sort
        merges the runs)."""
        ops = self._ops
        if not distinct and (ops and not ops.keys().isdisjoint(keys) or len(set(keys)) != len(keys)):
            return False
        ops.update(zip(keys, zip(repeat(INSERT), repeat(None), values)))
        if self._sorted is not None:
            self._pending.extend(keys)
        self.approx_bytes += sum(map(len, values)) + len(keys) * (len(keys[0]) + 64 if keys else 0)
        return True

    # --- reads ------------------------------------------------------------------------------

    def _index(self) -> list:
        """The sorted keys (may include removed keys; callers skip those). Keys added since the
        last read are merged in: one by one when few, else by one sort of two sorted runs."""
        if self._sorted is None:
            self._sorted = sorted(self._ops)
            self._pending = []
            self._stale = 0
            return self._sorted
        index = self._sorted
        if self._stale > len(self._ops):
            ops = self._ops
            index = self._sorted = [k for k in index if k in ops]
            self._stale = 0
        if self._pending:
            fresh = []
            for key in sorted(set(self._pending)):
                i = bisect.bisect_left(index, key)
                if i == len(index) or index[i] != key:
                    fresh.append(key)
            if len(fresh) <= 8:
                for key in fresh:
                    bisect.insort(index, key)
            else:
                index.extend(fresh)
                index.sort()
            self._pending = []
        return index

    def range(self, start: bytes | None = None, end: bytes | None = None, reverse: bool = False):
        """Yield ``(key, record)`` for keys in ``[start, end)``, ascending (descending with
        ``reverse``). A snapshot of the key list is taken at the call; records are read as the
        iteration reaches them (a key removed meanwhile is skipped)."""
        index = self._index()
        lo = 0 if start is None else bisect.bisect_left(index, start)
        hi = len(index) if end is None else bisect.bisect_left(index, end)
        keys = index[lo:hi]
        if reverse:
            keys.reverse()
        ops = self._ops
        for key in keys:
            rec = ops.get(key)
            if rec is not None:
                yield key, rec

    def has_range(self, start: bytes | None, end: bytes | None) -> bool:
        """True when some live key lies in ``[start, end)``."""
        if not self._ops:
            return False
        return next(self.range(start, end), None) is not None

    # --- flush ------------------------------------------------------------------------------

    def columns(self) -> tuple[list, list]:
        """The KV batch of this buffer as two lists, ``(keys, new_values_or_None)``, sorted by
        key (the sort merges the ascending runs that chunk inserts leave, in dict order). The
        buffer is unchanged: the caller clears it once the batch is written."""
        ops = self._ops
        keys = sorted(ops)
        return keys, list(map(_NEW, map(ops.__getitem__, keys)))

    def drain(self) -> list:
        """The KV batch of this buffer, ``[(key, new_value_or_None), ...]`` sorted by key, and
        empty the buffer."""
        keys, values = self.drain_columns()
        return list(zip(keys, values))

    def drain_columns(self) -> tuple[list, list]:
        """:meth:`columns`, then empty the buffer."""
        batch = self.columns()
        self.clear()
        return batch

    def copy(self) -> MemTable:
        """An independent MemTable with the same records (its index is rebuilt when read)."""
        other = MemTable(self.consistent, self._describe, self._table)
        other._ops = other.records = dict(self._ops)
        other.approx_bytes = self.approx_bytes
        return other

    def clear(self) -> None:
        self._ops = self.records = {}
        self._sorted = None
        self._pending = []
        self._stale = 0
        self.approx_bytes = 0

    def _check(self) -> None:
        """Verify every invariant in the module docstring; raises ``AssertionError``."""
        for key, rec in self._ops.items():
            assert isinstance(key, bytes) and len(rec) == 3, (key, rec)
            op, old, new = rec
            if op == INSERT:
                assert old is None and isinstance(new, bytes), rec
            elif op == DELETE:
                assert isinstance(old, bytes) and new is None, rec
            else:
                assert op == UPDATE and isinstance(old, bytes) and isinstance(new, bytes), rec
        if self._sorted is not None:
            assert all(a < b for a, b in zip(self._sorted, self._sorted[1:])), "index out of order"
            indexed = set(self._sorted) | set(self._pending)
            assert set(self._ops) <= indexed, "a live key is missing from the index"
