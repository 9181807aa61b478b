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
refused without doing it (an update that moves a row checks both keys first); :meth:`apply`
runs a whole chunk of inserts and deletes through the merge rules into an overlay and changes
the buffer only when every operation passed; :meth:`undo` puts back records saved before a run
of operations; and :meth:`columns` reads the batch without emptying the buffer, so a commit
empties it (:meth:`clear`) only once the store has accepted the batch.

Range reads are snapshots: an iterator from :meth:`range` yields the records of its range as
they were when :meth:`range` was called, whatever is written meanwhile (a join probes a
range, then updates the rows it found). It reads the shared index and records while nothing
changes; the first write after its creation (any method that changes a record, or re-sorts
the index) first copies the iterator's remaining keys and their records into the iterator
("freezing" it, once, O(what is left of its range)) and forgets it. Exhausted iterators
unregister themselves, so writes after a finished scan cost one attribute test.

Invariants (checked by :meth:`_check`): every record has the shape above; the sorted-key index
holds every live key, in ascending byte order, plus possibly removed keys that reads skip; so
does the per-prefix index of :meth:`records_with_prefixes` (each key under its first
``prefix_len`` bytes; keys added since its last read wait in a pending list);
every registered (live, unfrozen) range iterator reads the current index and records.
Not thread-safe: one state table, one executor thread.

Callers: :mod:`relational.state_table` only.
"""

from __future__ import annotations

import bisect
import weakref
from itertools import islice

from hummock import _twins
from hummock.packed_batch import PackedColumns
from hummock.shared_buffer import ENTRY_OVERHEAD, KeyValueColumns
from relational._rel_memapply_py import RECORD_OVERHEAD
from relational.errors import InconsistentOpError

#: ``merge_ops``: a run of inserts and deletes through the merge rules, into an overlay
#: (``native/_rel_memapply.pyx``, twin ``relational/_rel_memapply_py.py``)
_apply = _twins.load("_rel_memapply", "relational._rel_memapply_py")

INSERT, DELETE, UPDATE = 1, 2, 3
OP_NAMES = {INSERT: "INSERT", DELETE: "DELETE", UPDATE: "UPDATE"}
#: ``approx_bytes`` charges real memory (CPython 3.11): a record costs its key and value bytes
#: plus ``RECORD_OVERHEAD`` (dict slot, record tuple, bytes headers), an UPDATE's old value
#: ``VALUE_OVERHEAD`` more (one more bytes object); an entry of a relaxed run waiting in two
#: lists costs ``RUN_OVERHEAD`` (= an imm entry of the shared buffer: the same two lists)
VALUE_OVERHEAD = 40
RUN_OVERHEAD = ENTRY_OVERHEAD


class MemTable:
    """Ordered buffer of merged operations. ``consistent=True`` is strict mode."""

    def __init__(self, consistent: bool = True, describe_key=None, table: str | None = None):
        self.consistent = consistent
        self._describe = describe_key or (lambda key: key)
        self._table = table
        self._ops: dict[bytes, tuple] = {}        # key -> record (``records``)
        self._runs: list = []                     # relaxed all-insert runs not yet in _ops (append_run)
        self._sorted: list[bytes] | None = None   # built on the first range read
        self._pending: list[bytes] = []           # keys added since, not yet in _sorted
        self._stale = 0                           # removed keys still in _sorted
        self._live: dict = {}                     # id -> weakref of range iterators reading _sorted, _ops
        self._buckets = None                      # the PrefixIndex, built on the first prefix read
        self._bucket_pending: list[bytes] = []    # keys added since, not yet in _buckets
        self.approx_bytes = 0
        #: packed runs turned into records by a read or a write (:meth:`_settle`), over the
        #: MemTable's life (``clear`` keeps it): the state table stops packing chunks once a
        #: packed run had to be read back, as an upsert table's own reads do every chunk
        self.packed_settled = 0

    # --- state ------------------------------------------------------------------------------

    @property
    def records(self) -> dict:
        """key -> record; read-only for callers (``get`` without a method call). Replaced, not
        emptied, by :meth:`clear`, so re-read it after a commit."""
        if self._runs:
            self._settle()
        return self._ops

    def _settle(self) -> None:
        """Turn the pending runs of :meth:`append_run` into records, in write order, through
        the insert merge rules (relaxed mode: never refused). Every method that reads or
        changes records calls this first."""
        if self._live:
            self._freeze_live()
        runs, self._runs = self._runs, []
        ops = self._ops
        approx = self.approx_bytes         # append_run counted these bytes already, as run entries
        for run in runs:
            if type(run) is tuple:
                keys, values = run
            else:
                keys, values = run.lists()
                self.packed_settled += 1
            if not ops or ops.keys().isdisjoint(keys):
                _apply.insert_new(ops, keys, values)
                if self._sorted is not None:
                    self._pending.extend(keys)
                if self._buckets is not None:
                    self._bucket_pending.extend(keys)
            else:
                self.apply([True] * len(keys), keys, values)
            approx += len(keys) * (RECORD_OVERHEAD - RUN_OVERHEAD)   # now records
        self.approx_bytes = approx

    def __len__(self) -> int:
        if self._runs:
            self._settle()
        return len(self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops) or bool(self._runs)

    def get(self, key: bytes):
        """The record ``(op, old, new)`` of ``key``, or ``None`` if this epoch did not touch it."""
        if self._runs:
            self._settle()
        return self._ops.get(key)

    def _error(self, reason: str, key: bytes) -> InconsistentOpError:
        return InconsistentOpError(reason, self._describe(key), self._table)

    def _add_key(self, key: bytes) -> None:
        if self._sorted is not None:
            self._pending.append(key)
        if self._buckets is not None:
            self._bucket_pending.append(key)

    def _remove(self, key: bytes) -> None:
        del self._ops[key]
        if self._sorted is not None:
            self._stale += 1

    def _freeze_live(self) -> None:
        """Before a write: give every live range iterator its own copy of what it has left."""
        live, self._live = self._live, {}
        for ref in list(live.values()):
            it = ref()
            if it is not None:
                it._freeze()

    def _register(self, it) -> None:
        """Track a live range iterator; a dropped one leaves by itself (weak reference)."""
        live, key = self._live, id(it)
        live[key] = weakref.ref(it, lambda _, live=live, key=key: live.pop(key, None))

    # --- writes -----------------------------------------------------------------------------

    def insert(self, key: bytes, new: bytes) -> None:
        if self._runs:
            self._settle()
        if self._live:
            self._freeze_live()
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (INSERT, None, new)
            self._add_key(key)
            self.approx_bytes += len(key) + len(new) + RECORD_OVERHEAD
            return
        op, old, _ = rec
        if op == DELETE:
            self._ops[key] = (UPDATE, old, new)
        elif self.consistent:
            raise self._error("insert of a pk that already has a row", key)
        else:
            self._ops[key] = (op, old, new)

    def delete(self, key: bytes, old: bytes) -> None:
        if self._runs:
            self._settle()
        if self._live:
            self._freeze_live()
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (DELETE, old, None)
            self._add_key(key)
            self.approx_bytes += len(key) + len(old) + RECORD_OVERHEAD
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
        if self._runs:
            self._settle()
        if self._live:
            self._freeze_live()
        rec = self._ops.get(key)
        if rec is None:
            self._ops[key] = (UPDATE, old, new)
            self._add_key(key)
            self.approx_bytes += len(key) + len(old) + len(new) + RECORD_OVERHEAD + VALUE_OVERHEAD
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

    def unrecorded(self, keys: list) -> list:
        """The distinct keys of ``keys`` (first-occurrence order) that have no record: what a
        strict chunk must check against storage (one native pass, ``probe_keys``)."""
        if self._runs:
            self._settle()
        return _apply.probe_keys(self._ops, keys)

    def check_insert(self, key: bytes, what: str = "insert") -> None:
        """Raise what :meth:`insert` of ``key`` would raise on its record (strict mode); change
        nothing. A key without a record passes (the caller checks storage)."""
        if self._runs:
            self._settle()
        rec = self._ops.get(key)
        if rec is not None and rec[0] != DELETE and self.consistent:
            raise self._error(f"{what} of a pk that already has a row", key)

    def check_delete(self, key: bytes, old: bytes, what: str = "delete") -> None:
        """Raise what :meth:`delete` of ``key`` with ``old`` would raise on its record (strict
        mode); change nothing. A key without a record passes (the caller checks storage)."""
        if self._runs:
            self._settle()
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
        if self._runs:
            self._settle()
        if self._live:
            self._freeze_live()
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
        if self._runs:
            self._settle()
        ops = self._ops
        if not distinct and (ops and not ops.keys().isdisjoint(keys) or len(set(keys)) != len(keys)):
            return False
        if self._live:
            self._freeze_live()
        _apply.insert_new(ops, keys, values)
        self._note_inserted(keys, values)
        return True

    def _note_inserted(self, keys: list, values: list) -> None:
        """The indexes and the size after ``keys`` got new INSERT records (``insert_many``,
        ``insert_absent``)."""
        if self._sorted is not None:
            self._pending.extend(keys)
        if self._buckets is not None:
            self._bucket_pending.extend(keys)
        self.approx_bytes += sum(map(len, values)) + len(keys) * (len(keys[0]) + RECORD_OVERHEAD if keys else 0)

    def insert_absent(self, keys: list, values: list) -> bool:
        """:meth:`insert_many` of keys the caller knows are distinct: inserts them all and
        returns True when none has a record, else returns False and changes nothing (one dict
        probe a key natively, ``insert_absent``)."""
        if self._runs:
            self._settle()
        if self._live:
            self._freeze_live()
        if not _apply.insert_absent(self._ops, keys, values):
            return False
        self._note_inserted(keys, values)
        return True

    def append_run(self, keys: list, values: list) -> None:
        """Relaxed mode: insert a run of new values (``keys`` strictly ascending, as a sorted
        chunk's) without touching the records: the run waits in a list, and :meth:`columns`
        merges the runs in C at commit (a key in several runs keeps the latest value, what
        :meth:`insert` gives in relaxed mode). Anything that reads or changes records first
        applies the pending runs in order. REQUIRES relaxed mode."""
        if self.consistent:
            raise AssertionError("append_run is for relaxed MemTables")
        if not keys:
            return
        if self._live:
            self._freeze_live()
        self._runs.append((keys, values))
        self.approx_bytes += sum(map(len, values)) + len(keys) * (len(keys[0]) + RUN_OVERHEAD)

    def append_packed(self, batch: PackedColumns) -> None:
        """:meth:`append_run` of a packed batch (``hummock.packed_batch``: keys strictly
        ascending, one width): it waits as it is, and :meth:`batch` hands a buffer of packed
        runs that follow one another to the store as one packed batch, with no ``bytes`` object
        per entry. Anything that reads or changes records first turns it into lists. REQUIRES
        relaxed mode."""
        if self.consistent:
            raise AssertionError("append_packed is for relaxed MemTables")
        if not len(batch):
            return
        if self._live:
            self._freeze_live()
        self._runs.append(batch)
        self.approx_bytes += batch.nbytes + len(batch) * RUN_OVERHEAD

    def apply(self, inserts, keys: list, values: list, stored=None) -> None:
        """Apply a run of operations all or nothing: ``inserts[i]`` true inserts ``values[i]``
        under ``keys[i]``, false deletes the row ``values[i]`` (the old row). The result is
        exactly that of :meth:`insert`/:meth:`delete` called in order; the first operation they
        would refuse raises the same :class:`InconsistentOpError`, and then nothing changed.

        ``stored`` (strict mode): ``key -> stored value`` (``None``: no row) for every key that
        had no record when the run started; a key without a record is checked against it as
        the state table checks storage (insert: no row; delete: exactly this row). A key whose
        record a cancelled insert removed during the run had no stored row (strict inserts are
        checked) and is absent from ``stored``. Ignored in relaxed mode.

        Operations on one key depend only on each other, so the caller may reorder a run as
        long as each key's operations keep their order (a stable sort by key)."""
        if self._runs:
            self._settle()
        overlay, gone, added = _apply.merge_ops(self._ops, inserts, keys, values, stored, self.consistent,
                                                self._error)
        if not overlay and not gone:
            return
        # every operation passed: change the buffer
        if self._live:
            self._freeze_live()
        ops = self._ops
        for key in gone:
            if key in ops:
                self._remove(key)
        if self._sorted is not None or self._buckets is not None:
            fresh = [key for key in overlay if key not in ops]
            if self._sorted is not None:
                self._pending.extend(fresh)
            if self._buckets is not None:
                self._bucket_pending.extend(fresh)
        ops.update(overlay)
        self.approx_bytes += added

    # --- reads ------------------------------------------------------------------------------

    def _index(self) -> list:
        """The sorted keys (may include removed keys; callers skip those). Keys added since the
        last read are merged in: one by one when few, else by one sort of two sorted runs."""
        if self._runs:
            self._settle()
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
            if self._live:   # the merge below changes the list live iterators read
                self._freeze_live()
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
        """An iterator of ``(key, record)`` for keys in ``[start, end)``, ascending (descending
        with ``reverse``): the records as they are at this call, whatever is written to the
        MemTable while it is iterated (module docstring, "Range reads are snapshots"). It stays
        valid after :meth:`clear` (it keeps the old records)."""
        index = self._index()
        lo = 0 if start is None else bisect.bisect_left(index, start)
        hi = len(index) if end is None else max(lo, bisect.bisect_left(index, end))
        return _Range(self, index, lo, hi, reverse)

    def records_with_prefixes(self, prefix_len: int, prefixes: list) -> list:
        """For each key prefix in ``prefixes`` (each ``prefix_len`` bytes long): the records
        ``[(key, record)]`` of the keys that start with it, ascending, or ``None`` when there
        are none. The lists are read at the call (no snapshot to keep). Probing many prefixes
        of a large buffer this way costs a dict lookup each, where :meth:`range` would first
        merge every key added since the last range read into the sorted index: a per-prefix
        index of the keys is built on the first call (one pass; again if ``prefix_len``
        changes) and then takes the keys each write adds (removed keys are skipped)."""
        if self._runs:
            self._settle()
        index = self._buckets
        if index is None or index.prefix_len != prefix_len:
            index = self._buckets = _apply.PrefixIndex(prefix_len)
            added = list(self._ops)
        else:
            added = self._bucket_pending
        self._bucket_pending = []
        index.add(added)   # (native: the prefixes hashed in C, no bytes object or dict entry a key)
        return index.records(self._ops, prefixes)

    def has_range(self, start: bytes | None, end: bytes | None) -> bool:
        """True when some live key lies in ``[start, end)``."""
        if self._runs:
            self._settle()
        ops = self._ops
        if not ops:
            return False
        index = self._index()
        lo = 0 if start is None else bisect.bisect_left(index, start)
        hi = len(index) if end is None else bisect.bisect_left(index, end)
        for i in range(lo, hi):
            if index[i] in ops:
                return True
        return False

    # --- flush ------------------------------------------------------------------------------

    def columns(self) -> tuple[list, list]:
        """The KV batch of this buffer as two lists, ``(keys, new_values_or_None)``, sorted by
        key (the sort merges the ascending runs that chunk inserts leave, in dict order). The
        buffer is unchanged: the caller clears it once the batch is written (the lists may be
        the buffer's own: the caller does not change them). Pending runs of
        :meth:`append_run` alone are merged in C (``merge_insert_runs``), with no records."""
        if self._runs and not self._ops:
            runs = [run if type(run) is tuple else run.lists() for run in self._runs]
            if len(runs) == 1:   # one chunk this epoch: the run is the batch (the caller copies it)
                return runs[0]
            if len(runs) > 1 and all(a[0][-1] < b[0][0] for a, b in zip(runs, islice(runs, 1, None))):
                # runs that follow one another (a table's increasing row ids): the merge is
                # their concatenation -- each run ascends and holds bytes (append_run's callers)
                keys, values = [], []
                for run_keys, run_values in runs:
                    keys += run_keys
                    values += run_values
                return keys, values
            return _apply.merge_insert_runs(runs)
        if self._runs:
            self._settle()
        return _apply.sorted_news(self._ops)

    def batch(self):
        """The KV batch of this buffer for ``HummockStorage.ingest_batch``, or None when it is
        empty: a ``PackedColumns`` when it holds only packed runs (:meth:`append_packed`) whose
        keys follow one another (a table's increasing row ids), else a ``KeyValueColumns`` of
        :meth:`columns`. The buffer is unchanged (as :meth:`columns`)."""
        runs = self._runs
        if runs and not self._ops and all(type(run) is PackedColumns for run in runs) and all(
                a.last_key < b.first_key for a, b in zip(runs, islice(runs, 1, None))):
            return PackedColumns.concat(runs)
        if not self._runs and not self._ops:
            return None
        keys, values = self.columns()
        return KeyValueColumns(keys, values) if keys else None

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
        other._ops = dict(self.records)
        other.approx_bytes = self.approx_bytes
        return other

    def clear(self) -> None:
        """Empty the buffer. Live range iterators keep reading the old records (which are
        no longer changed), so they need no copy."""
        self._ops = {}
        self._runs = []
        self._sorted = None
        self._pending = []
        self._stale = 0
        self._live = {}
        self._buckets = None
        self._bucket_pending = []
        self.approx_bytes = 0

    def _check(self) -> None:
        """Verify every invariant in the module docstring; raises ``AssertionError``."""
        for run in self._runs:
            keys, values = run if type(run) is tuple else run.lists()
            assert not self.consistent, "append_run runs in strict mode"
            assert len(keys) == len(values) and all(a < b for a, b in zip(keys, keys[1:])), "a run out of order"
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
        if self._buckets is not None:
            index, n, pending = self._buckets, self._buckets.prefix_len, set(self._bucket_pending)
            for key in self._ops:
                assert key in pending or key in index.find(key[:n]), "a live key is missing from the prefix index"
        for it in filter(None, (ref() for ref in self._live.values())):
            assert it._keys is self._sorted and it._ops is self._ops, "a live iterator reads stale structures"


class _Range:
    """Iterator of :meth:`MemTable.range`: while registered in the MemTable's ``_live`` set it
    reads the shared sorted index (positions ``_pos`` up to ``_stop``, step ``_step``) and the
    shared records; :meth:`_freeze` (called by the MemTable before it changes either) replaces
    both by private copies of what is left."""

    __slots__ = ("_mem", "_keys", "_ops", "_pos", "_stop", "_step", "__weakref__")

    def __init__(self, mem: MemTable, index: list, lo: int, hi: int, reverse: bool):
        self._keys = index
        self._ops = mem._ops
        if reverse:
            self._pos, self._stop, self._step = hi - 1, lo - 1, -1
        else:
            self._pos, self._stop, self._step = lo, hi, 1
        self._mem = None
        if lo < hi:
            self._mem = mem
            mem._register(self)

    def __iter__(self):
        return self

    def __next__(self):
        keys, ops, pos, stop, step = self._keys, self._ops, self._pos, self._stop, self._step
        while pos != stop:
            key = keys[pos]
            pos += step
            rec = ops.get(key)
            if rec is not None:
                self._pos = pos
                return key, rec
        self._pos = pos
        if self._mem is not None:
            self._mem._live.pop(id(self), None)
            self._mem = None
        raise StopIteration

    def _freeze(self) -> None:
        """Copy the remaining keys (in iteration order) and their records; forget the MemTable."""
        pos, stop, step, ops = self._pos, self._stop, self._step, self._ops
        rest = self._keys[pos:stop] if step == 1 else self._keys[stop + 1:pos + 1][::-1]
        self._ops = {key: ops[key] for key in rest if key in ops}
        self._keys = rest
        self._pos, self._stop, self._step = 0, len(rest), 1
        self._mem = None
