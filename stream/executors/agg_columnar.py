"""Columnar group state of an append-only :class:`~stream.executors.hash_agg.HashAgg` over one
integer group-key column (issue 30 item 4): the groups' states as numpy arrays indexed by a dense
slot id, so a chunk's work is a few numpy calls per column, not Python per group.

Applies (:func:`columnar_eligible`) to an append-only HashAgg (not SimpleAgg) whose one group key
is SMALLINT, INT or BIGINT and whose calls are all ``count``, ``sum`` of SMALLINT/INT/BIGINT and
``min``/``max`` of SMALLINT/INT/BIGINT, none DISTINCT (FILTER is fine) -- such as issue 30's
``qa`` (``count(*), sum(price), max(price) GROUP BY auction``) over an APPEND ONLY table. Every other aggregation keeps
the per-group states of hash_agg.py; both produce the same changes and the same value state.

Structures:

- :class:`IntSlotMap`: int64 key -> slot id ``0..n-1`` (dense, in insertion order), an
  open-addressing table (linear probing, Fibonacci hashing, load <= 1/2) probed and filled with
  vectorized rounds; ``keys[slot]`` is each slot's key. A NULL key has a slot of its own
  (``null_slot``), which the table does not hold.
- :class:`ColumnarGroups`: per state index of the HashAgg's value state (``row_count``, then the
  calls' slots, hash_agg.py's layout) one array ``cur[at]`` over slots (int64; a sum that leaves
  int64 turns its column into Python ints, ``dtype=object``, exact from then on; while a
  column's bound ``_bounds[at]`` plus a chunk's cannot overflow the add is not checked) and
  for a min/max slot a ``has[at]`` bool array (False: NULL). The dirty set is a bool array
  ``dirty`` plus the slots in the order they became dirty and, taken then, their state before
  the epoch (``_snaps``); ``stored`` says which groups have a value-state row. The flush
  compares and emits from those, so only dirty groups carry an old copy.

Semantics are hash_agg.py's for append-only inputs: per flush a new group is ``+``, a group
whose slots (the row count aside) changed is ``U-``/``U+``, one whose only change is its row
count is neither emitted nor written and its row count lags (reset to the stored one); the
value state is relaxed and written with the insert of each changed group's new row; an epoch
touching more than ``max_dirty_groups`` groups flushes early. ``sum`` results: BIGINT for
SMALLINT/INT (beyond BIGINT: :meth:`AggCall.result_column`'s overflow rule), NUMERIC (text) for
BIGINT; NULL while a group has no non-NULL value; min/max NULL likewise.

Reading state: a slot missing from the map is read from the value state (one ``get_rows`` per
chunk) unless it is known not to be stored: the value state was empty when this state was
(re)started and the key was never evicted (``_evicted``, sorted keys; beyond ``EVICTED_LIMIT``
keys every miss is read).

Memory: the arrays are charged as one entry of the executor's group
:class:`~stream.cache.StateCache` (``_ENTRY``), stamped on every chunk; when the budget evicts
that entry, the least recently touched half of the clean slots is dropped (their keys join
``_evicted``) and the rest compacted -- dirty slots are never dropped.

Invariants (``_check``): the map's table holds exactly ``keys[:n]`` at their slots; ``dirty``
is exactly the slots of ``_order``, each once; every clean slot equals its value-state row.

Callers: :mod:`stream.executors.hash_agg` only (its ``_on_chunk``, ``_flush``, ``_reset``, ``_check``).
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa

from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.chunk import INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.executors.agg_call import filter_mask

_INTS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
_FIB = np.uint64(0x9E3779B97F4A7C15)
_EMPTY = -1
_ENTRY = "columnar groups"   # the one entry of the group cache that charges the arrays
EVICTED_LIMIT = 1 << 22
_F53 = 1 << 53   # below it a float64 sum of integers is exact (np.bincount's weights)
_I62 = 1 << 62
_I63 = 1 << 63


def columnar_eligible(agg) -> bool:
    """Whether HashAgg ``agg`` (bound calls, tables built) can keep its groups in columns
    (module docstring)."""
    if agg.keep_empty_group or not agg.append_only or len(agg.group_key) != 1:
        return False
    if agg._key_types[0].kind not in _INTS:
        return False
    for c in agg.calls:
        if c.distinct or c.is_ordered:
            return False
        if c.kind == "count":
            continue
        if c.kind not in ("sum", "min", "max") or c.arg_type.kind not in _INTS:
            return False
    return True


class IntSlotMap:
    """int64 key -> dense slot id (module docstring)."""

    def __init__(self, capacity: int = 1024):
        self.n = 0
        self.null_slot = -1
        self.keys = np.empty(max(16, capacity), np.int64)
        self._alloc_table(max(16, capacity))

    def _alloc_table(self, entries: int) -> None:
        size = 32
        while size < 2 * entries:
            size *= 2
        self._bits = size.bit_length() - 1
        self._mask = size - 1
        self._tkeys = np.zeros(size, np.int64)
        self._tslots = np.full(size, _EMPTY, np.int64)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self._tkeys.nbytes + self._tslots.nbytes

    def _home(self, keys: np.ndarray) -> np.ndarray:
        h = keys.view(np.uint64) * _FIB   # wraps (Fibonacci hashing: the high bits)
        return (h >> np.uint64(64 - self._bits)).astype(np.int64)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """The slot of each of ``keys`` (int64), -1 where absent."""
        out = np.full(len(keys), _EMPTY, np.int64)
        if not self.n or not len(keys):
            return out
        pos = self._home(keys)
        todo = np.arange(len(keys))
        tkeys, tslots, mask = self._tkeys, self._tslots, self._mask
        while len(todo):
            p = pos[todo]
            s = tslots[p]
            hit = (s != _EMPTY) & (tkeys[p] == keys[todo])
            out[todo[hit]] = s[hit]
            go_on = (s != _EMPTY) & ~hit
            todo, p = todo[go_on], p[go_on]
            pos[todo] = (p + 1) & mask
        return out

    def _allocate(self, m: int) -> np.ndarray:
        slots = np.arange(self.n, self.n + m, dtype=np.int64)
        if self.n + m > len(self.keys):
            grown = np.zeros(max(2 * len(self.keys), self.n + m), np.int64)
            grown[:self.n] = self.keys[:self.n]
            self.keys = grown
        self.n += m
        return slots

    def insert(self, keys: np.ndarray) -> np.ndarray:
        """Give each of ``keys`` (distinct, none present) the next slot ids; returns them."""
        slots = self._allocate(len(keys))
        self.keys[slots] = keys
        if 2 * self.n > len(self._tslots):
            self._alloc_table(len(self.keys))
            self._place_all()
        else:
            self._place(keys, slots)
        return slots

    def insert_null(self) -> int:
        """The NULL key's slot (the next slot id; it is not in the table)."""
        assert self.null_slot < 0
        self.null_slot = int(self._allocate(1)[0])
        self.keys[self.null_slot] = 0
        return self.null_slot

    def _place_all(self) -> None:
        slots = np.arange(self.n, dtype=np.int64)
        if self.null_slot >= 0:
            slots = slots[slots != self.null_slot]
        self._place(self.keys[slots], slots)

    def _place(self, keys: np.ndarray, slots: np.ndarray) -> None:
        pos = self._home(keys)
        todo = np.arange(len(keys))
        tkeys, tslots, mask = self._tkeys, self._tslots, self._mask
        while len(todo):
            p = pos[todo]
            free = tslots[p] == _EMPTY
            cand, pc = todo[free], p[free]
            # among the keys aiming at one free position one takes it (a scatter: whichever
            # write lands, read back to see who won); the rest probe on
            tslots[pc] = slots[cand]
            won = tslots[pc] == slots[cand]
            tkeys[pc[won]] = keys[cand[won]]
            placed = np.zeros(len(keys), np.bool_)
            placed[cand[won]] = True
            todo = todo[~placed[todo]]
            pos[todo] = (pos[todo] + 1) & mask

    def rebuild(self, keys: np.ndarray, null_slot: int = -1) -> None:
        """Hold exactly ``keys`` at slots ``0..len-1`` (distinct; at ``null_slot``, if >= 0, the
        NULL key)."""
        self.n, self.null_slot = len(keys), null_slot
        self.keys = np.zeros(max(16, 2 * len(keys)), np.int64)
        self.keys[:len(keys)] = keys
        self._alloc_table(len(self.keys))
        self._place_all()

    def _check(self) -> None:
        used = np.flatnonzero(self._tslots != _EMPTY)
        expect = [i for i in range(self.n) if i != self.null_slot]
        assert -1 <= self.null_slot < self.n
        assert len(used) == len(expect), (len(used), self.n)
        assert 2 * self.n <= len(self._tslots)
        slots = self._tslots[used]
        assert sorted(slots.tolist()) == expect
        assert (self.keys[slots] == self._tkeys[used]).all()
        assert (self.lookup(self.keys[expect]) == np.array(expect, np.int64)).all()


def _grown(arr: np.ndarray, size: int, fill=0) -> np.ndarray:
    out = np.full(size, fill, dtype=arr.dtype)
    out[:len(arr)] = arr
    return out


def _to_int(v):
    """A stored slot value as a Python int (DECIMAL sums are read back as Decimal)."""
    return int(v) if type(v) is decimal.Decimal else v


class ColumnarGroups:
    """The group states of HashAgg ``agg`` in columns (module docstring)."""

    def __init__(self, agg):
        self.agg = agg
        self.width = agg.width
        self.extreme_of = {at: c for c, (at, _) in zip(agg.calls, agg.slots) if c.is_extreme}   # min/max slots
        self.key_type = agg._key_types[0]
        self._state_types = agg.value_table.types[1:]
        self.reset()

    # --- lifecycle --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every group (the state tables keep them); the next chunk checks again whether
        the value state is empty."""
        self.map = IntSlotMap()
        cap = len(self.map.keys)
        self.cur = [np.zeros(cap, np.int64) for _ in range(self.width)]
        self._bounds = [0] * self.width   # per column: at least every |value| (``_add``)
        self.has = {at: np.zeros(cap, np.bool_) for at in self.extreme_of}
        self.dirty = np.zeros(cap, np.bool_)
        self.stored = np.zeros(cap, np.bool_)   # the slot's group has a value-state row
        self.last = np.zeros(cap, np.int64)
        self.tick = 0
        self._scratch = np.empty(1024, np.int64)   # ``_row_slots``'s slot -> row scatter
        self._order, self._snaps = [], []   # per chunk: the slots turned dirty, their old state
        self.n_dirty = 0
        self._maybe_stored = None   # unknown until the next chunk
        self._evicted = np.empty(0, np.int64)
        self._null_evicted = False
        self._charged = -1
        self.agg.groups.pop(_ENTRY, None)

    def _capacity(self, need: int) -> None:
        cap = len(self.dirty)
        if need <= cap:
            return
        size = max(2 * cap, need)
        self.cur = [_grown(a, size) for a in self.cur]
        self.has = {at: _grown(a, size, False) for at, a in self.has.items()}
        self.dirty = _grown(self.dirty, size, False)
        self.stored = _grown(self.stored, size, False)
        self.last = _grown(self.last, size)

    @property
    def nbytes(self) -> int:
        size = self.map.nbytes + self.dirty.nbytes + self.stored.nbytes + self.last.nbytes
        size += sum(a.nbytes for a in self.has.values())
        for a in self.cur:
            size += a.nbytes if a.dtype != object else 40 * len(a)
        return size

    def _charge(self) -> None:
        """Stamp the cache entry (recency); re-charge it when the arrays' size changed; when
        the budget evicted it, drop the older half of the clean slots first."""
        cache = self.agg.groups
        if self._charged >= 0 and cache.get(_ENTRY) is None:
            self._evict()
            self._charged = -1   # gone from the cache: put back for what is kept, even if nothing went
        size = self.nbytes
        if size != self._charged:
            self._charged = size
            cache.put(_ENTRY, True, size)

    def _evict(self) -> None:
        n = self.map.n
        clean = np.flatnonzero(~self.dirty[:n])
        if not len(clean):
            return
        drop_n = max(len(clean) // 2, len(clean) - n // 2) if n > 1 else len(clean)
        drop = clean[np.argsort(self.last[clean], kind="stable")[:drop_n]]
        keep_mask = np.ones(n, np.bool_)
        keep_mask[drop] = False
        keep = np.flatnonzero(keep_mask)
        remap = np.full(n, -1, np.int64)
        remap[keep] = np.arange(len(keep))
        keys = self.map.keys[:n]
        null_slot = self.map.null_slot
        dropped = keys[drop]
        if null_slot >= 0 and not keep_mask[null_slot]:
            self._null_evicted = True
            dropped = dropped[drop != null_slot]
        if self._maybe_stored is False:
            if len(self._evicted) + len(dropped) > EVICTED_LIMIT:
                self._maybe_stored, self._evicted = True, np.empty(0, np.int64)
            else:
                self._evicted = np.union1d(self._evicted, dropped)
        self.map.rebuild(keys[keep], int(remap[null_slot]) if null_slot >= 0 else -1)
        cap = len(self.map.keys)
        self.cur = [_grown(a[keep], cap) for a in self.cur]
        self.has = {at: _grown(a[keep], cap, False) for at, a in self.has.items()}
        self.dirty = _grown(self.dirty[keep], cap, False)
        self.stored = _grown(self.stored[keep], cap, False)
        self.last = _grown(self.last[keep], cap)
        self._order = [remap[o] for o in self._order]

    # --- per chunk --------------------------------------------------------------------------------

    def on_chunk(self, chunk: StreamChunk, n: int):
        """Apply an all-insert ``chunk`` (compacted, ``n`` rows)."""
        agg = self.agg
        columns = chunk.columns
        if self._maybe_stored is None:
            self._maybe_stored = next(iter(agg.value_table.iter_with_prefix(limit=1)), None) is not None
        self.tick += 1
        self._charge()
        col = columns[agg.group_key[0]]
        slots, inv = self._row_slots(col, n)
        g = len(slots)
        # the groups' state before this chunk, for those not dirty yet (the flush's old rows)
        fresh = slots[~self.dirty[slots]]
        if len(fresh):
            self.dirty[fresh] = True
            self.n_dirty += len(fresh)
            self._order.append(fresh)
            self._snaps.append([a[fresh] for a in self.cur] + [self.has[at][fresh] for at in self.has])
        self.last[slots] = self.tick
        counts_all = np.bincount(inv, minlength=g)
        cur = self.cur
        self._add(0, slots, counts_all, n)
        memo = {}
        for c, (at, width) in zip(agg.calls, agg.slots):
            fmask = filter_mask(c, columns, n)
            if c.arg is None:
                if fmask is None:
                    self._add(at, slots, counts_all, n)
                else:
                    self._add(at, slots, np.bincount(inv, weights=fmask, minlength=g).astype(np.int64), n)
                continue
            arg = columns[c.arg]
            mask = None
            if arg.null_count:
                mask = arg.is_valid().to_numpy(zero_copy_only=False)
            if fmask is not None:
                mask = fmask if mask is None else mask & fmask
            if c.kind == "count":
                self._add(at, slots, counts_all if mask is None else
                          np.bincount(inv, weights=mask, minlength=g).astype(np.int64), n)
                continue
            values = memo.get(c.arg)
            if values is None:
                values = memo[c.arg] = (arg.fill_null(0) if arg.null_count else arg).to_numpy(
                    zero_copy_only=False).astype(np.int64, copy=False)
            if c.kind == "sum":
                present = counts_all if mask is None else np.bincount(inv, weights=mask, minlength=g).astype(np.int64)
                self._add(at + 1, slots, present, n)
                self._add(at, slots, *_group_sums(values if mask is None else np.where(mask, values, 0), inv, g))
                continue
            # append-only min/max
            is_min = c.kind == "min"
            if mask is not None:
                fill = np.iinfo(np.int64).max if is_min else np.iinfo(np.int64).min
                vals = np.where(mask, values, fill)
                present = np.bincount(inv, weights=mask, minlength=g) > 0
            else:
                vals, present = values, None
            best = np.full(g, np.iinfo(np.int64).max if is_min else np.iinfo(np.int64).min, np.int64)
            (np.minimum if is_min else np.maximum).at(best, inv, vals)
            old, had = cur[at][slots], self.has[at][slots]
            better = (best < old) if is_min else (best > old)
            take = ~had | better
            if present is not None:
                take &= present
            cur[at][slots[take]] = best[take]
            self.has[at][slots[take]] = True
        if self.n_dirty > agg.max_dirty_groups:
            return agg._flush()
        return None

    def _add(self, at: int, slots: np.ndarray, delta, bound: int) -> None:
        """``cur[at][slots] += delta`` exactly (``bound``: at least every ``|delta|``). While
        ``_bounds[at]`` (at least every ``|cur[at]|``) plus ``bound`` fits int64 the int64 add
        cannot overflow; past it the add is checked, and an int64 column turns into Python ints
        where the sum would leave int64 (``delta`` may be an object array of Python ints)."""
        col = self.cur[at]
        total = self._bounds[at] + bound
        self._bounds[at] = total
        if col.dtype == object or (isinstance(delta, np.ndarray) and delta.dtype == object):
            if col.dtype != object:
                col = self.cur[at] = col.astype(object)
            col[slots] = col[slots] + np.asarray(delta, dtype=object)
            return
        if total < _I63:
            col[slots] += delta
            return
        old = col[slots]
        new = old + delta
        if ((old ^ new) & (delta ^ new) < 0).any():   # int64 overflow (wrapped)
            col = self.cur[at] = col.astype(object)
            col[slots] = col[slots] + delta.astype(object)
            return
        col[slots] = new

    def _row_slots(self, col: pa.Array, n: int) -> tuple:
        """``(slots, inv)``: the distinct slots of the chunk's groups and each row's index into
        them -- every row's key looked up in the map at once, the missing keys given slots
        (``_slots``), then the rows' slots numbered densely with a scatter into ``_scratch``
        (no sort: the groups come in no particular order)."""
        if col.null_count:
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            keys = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        else:
            valid = None
            keys = col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        rs = self.map.lookup(keys)
        if valid is not None:
            rs[~valid] = -2   # the NULL key's rows: not looked up
        miss = rs == -1
        any_miss = bool(miss.any())
        if any_miss or (valid is not None and self.map.null_slot < 0):
            missing = keys[miss]
            uniq = np.unique(missing) if any_miss else missing
            new = self._slots(uniq, valid is not None, known_missing=True)
            if any_miss:
                rs[miss] = new[np.searchsorted(uniq, missing)]
        if valid is not None:
            rs[~valid] = self.map.null_slot
        scratch = self._scratch
        if len(scratch) < self.map.n:
            scratch = self._scratch = np.empty(max(2 * len(scratch), self.map.n), np.int64)
        rows = np.arange(n)
        scratch[rs] = rows        # one row per slot wins the write: the group's representative
        rep = scratch[rs]
        first = rep == rows
        gid = np.cumsum(first) - 1
        return rs[first], gid[rep]

    def _slots(self, uniq: np.ndarray, has_null: bool, known_missing: bool = False) -> np.ndarray:
        """The slots of the chunk's groups (``uniq`` keys, then the NULL key if ``has_null``),
        new ones read from the value state or made empty (``known_missing``: none of ``uniq``
        is in the map)."""
        slots = np.full(len(uniq), -1, np.int64) if known_missing else self.map.lookup(uniq)
        miss = np.flatnonzero(slots < 0)
        null_new = has_null and self.map.null_slot < 0
        if len(miss) or null_new:
            keys = uniq[miss]
            read = keys
            if self._maybe_stored is False:
                read = keys[np.isin(keys, self._evicted, assume_unique=True)] if len(self._evicted) else keys[:0]
            pks = [(k,) for k in read.tolist()]
            if null_new and (self._maybe_stored is not False or self._null_evicted):
                pks.append((None,))
            rows = {}
            if pks:
                for pk, row in zip(pks, self.agg.value_table.get_rows(pks)):
                    if row is not None:
                        rows[pk[0]] = row
            new = self.map.insert(keys)
            slots[miss] = new
            if null_new:
                new = np.append(new, self.map.insert_null())
            self._capacity(self.map.n)
            self._init_slots(new, keys.tolist() + ([None] if null_new else []), rows)
        if has_null:
            slots = np.append(slots, self.map.null_slot)
        return slots

    def _init_slots(self, slots: np.ndarray, keys, rows: dict) -> None:
        """New slots' state: their stored row's, else the empty group's; none is dirty yet."""
        for a in self.cur:
            a[slots] = 0
        for a in self.has.values():
            a[slots] = False
        self.dirty[slots] = False
        self.stored[slots] = False
        if not rows:
            return
        for slot, key in zip(slots.tolist(), keys):
            row = rows.get(key)
            if row is None:
                continue
            self.stored[slot] = True
            for at, v in enumerate(row[1:]):
                if at in self.has:
                    if v is None:
                        continue
                    self.has[at][slot] = True
                v = _to_int(v)
                self._bounds[at] = max(self._bounds[at], abs(v))
                col = self.cur[at]
                if col.dtype != object and not -(1 << 63) <= v < (1 << 63):
                    col = self.cur[at] = col.astype(object)
                col[slot] = v

    # --- flush ------------------------------------------------------------------------------------

    def flush(self):
        """Write every dirty group's new row and return the changes (one StreamChunk, or None)."""
        if not self.n_dirty:
            return None
        agg = self.agg
        d = np.concatenate(self._order)
        snaps = self._snaps
        ncur = len(self.cur)
        old = [np.concatenate([s[i] for s in snaps]) for i in range(len(snaps[0]))]
        old_has = dict(zip(self.has, old[ncur:]))
        old = old[:ncur]
        self._order, self._snaps, self.n_dirty = [], [], 0
        self.dirty[d] = False
        existed = self.stored[d]
        self.stored[d] = True
        new = [a[d] for a in self.cur]
        new_has = {at: a[d] for at, a in self.has.items()}
        changed = np.zeros(len(d), np.bool_)
        for at in range(1, self.width):
            if at in new_has:
                h0, h1 = old_has[at], new_has[at]
                changed |= (h0 != h1) | (h1 & (np.asarray(old[at] != new[at], np.bool_)))
            else:
                changed |= np.asarray(old[at] != new[at], np.bool_)
        same = existed & ~changed
        if same.any():   # only the row count changed: no output, the row count lags
            self.cur[0][d[same]] = old[0][same]
        upd = existed & changed
        emit = np.flatnonzero(~existed | upd)
        if not len(emit):
            return None
        reps = np.where(upd[emit], 2, 1)
        rows = np.repeat(emit, reps)
        starts = np.cumsum(reps) - reps
        is_old = np.zeros(len(rows), np.bool_)
        is_old[starts[reps == 2]] = True
        ops = np.full(len(rows), INSERT, np.int8)
        ops[starts[reps == 2]] = UPDATE_DELETE
        ops[starts[reps == 2] + 1] = UPDATE_INSERT
        slots = d[rows]
        key_col = self._key_column(slots)

        def pick(at):
            o, c = old[at][rows], new[at][rows]
            if o.dtype == object or c.dtype == object:
                o, c = o.astype(object), c.astype(object)
            return np.where(is_old, o, c)

        vals = [pick(at) for at in range(self.width)]
        valid = {at: np.where(is_old, old_has[at][rows], new_has[at][rows]) for at in new_has}
        state_cols = [self._arrow(vals[at], t, valid.get(at)) for at, t in enumerate(self._state_types)]
        # the value state: the insert of each changed group's new row (relaxed: it replaces)
        w = np.flatnonzero(~is_old)
        widx = pa.array(w)
        agg._write(agg.value_table, np.full(len(w), INSERT, np.int8),
                   [key_col.take(widx)] + [c.take(widx) for c in state_cols])
        results = []
        for c, (at, width) in zip(agg.calls, agg.slots):
            if c.kind == "count" or c.is_extreme:
                results.append(state_cols[at])
                continue
            totals, counts = vals[at], vals[at + 1]
            if totals.dtype == object:   # beyond int64: the general rule (overflow of a BIGINT sum)
                from stream.executors.hash_agg import _column
                keys = [(k,) for k in key_col.to_pylist()]
                results.append(_column(c.result_column([totals.tolist(), counts.tolist()], agg.identity, keys),
                                       c.return_type))
                continue
            results.append(self._arrow(totals, c.return_type, counts > 0))
        return StreamChunk(ops, [key_col] + results, agg.schema)

    def _key_column(self, slots: np.ndarray) -> pa.Array:
        keys = self.map.keys[slots]
        mask = (slots == self.map.null_slot) if self.map.null_slot >= 0 else None
        if mask is not None and not mask.any():
            mask = None
        return pa.array(keys, pa.int64(), mask=mask).cast(arrow_type(self.key_type))

    @staticmethod
    def _arrow(values: np.ndarray, dtype: DataType, valid=None) -> pa.Array:
        mask = None if valid is None or valid.all() else ~valid
        if values.dtype == object:
            vs = values.tolist()
            if mask is not None:
                vs = [None if m else v for v, m in zip(vs, mask.tolist())]
            if dtype.kind == TypeKind.DECIMAL:
                return pa.array([None if v is None else str(v) for v in vs], arrow_type(dtype))
            return pa.array(vs, arrow_type(dtype))
        arr = pa.array(values, pa.int64(), mask=mask)
        if dtype.kind == TypeKind.DECIMAL:
            return arr.cast(pa.string())
        at = arrow_type(dtype)
        return arr if at == pa.int64() else arr.cast(at)

    # --- checks -----------------------------------------------------------------------------------

    def _check(self) -> None:
        self.map._check()
        order = np.concatenate(self._order) if self._order else np.empty(0, np.int64)
        assert len(np.unique(order)) == len(order) == self.n_dirty
        assert sorted(order.tolist()) == np.flatnonzero(self.dirty).tolist()
        n = self.map.n
        assert not self.dirty[n:].any() and len(self.dirty) >= n
        assert self.stored[:n][~self.dirty[:n]].all()   # a clean group was flushed or read
        agg = self.agg
        for slot in range(n):
            if self.dirty[slot]:
                continue
            key = None if slot == self.map.null_slot else int(self.map.keys[slot])
            row = agg.value_table.get_row((key,))
            assert row is not None, key
            state = []
            for at in range(self.width):
                if at in self.has and not self.has[at][slot]:
                    state.append(None)
                else:
                    v = self.cur[at][slot]
                    state.append(int(v))
            assert [_to_int(v) for v in row[1:]] == state, (key, row, state)


def _group_sums(values: np.ndarray, inv: np.ndarray, g: int) -> tuple:
    """``(sums, bound)``: per-group sums of int64 ``values``, exact (float64 weights below 2**53
    in all, int64 below 2**62, else Python ints: an object array), and a bound of their
    absolute values."""
    if not len(values):
        return np.zeros(g, np.int64), 0
    lo, hi = int(values.min()), int(values.max())
    bound = max(abs(lo), abs(hi)) * len(values)
    if bound < _F53:
        return np.bincount(inv, weights=values, minlength=g).astype(np.int64), bound
    if bound < _I62:
        out = np.zeros(g, np.int64)
        np.add.at(out, inv, values)
        return out, bound
    out = np.zeros(g, dtype=object)
    np.add.at(out, inv, values.astype(object))
    return out, bound
