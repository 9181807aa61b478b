"""StateTable: the streaming read/write view of one relational table over Hummock (seed 000).

Job: executors write rows (``insert``, ``delete``, ``update``, ``write_chunk``) into a
:class:`~relational.mem_table.MemTable` holding this epoch's operations, and read with
read-after-write (``get_row``, ``get_rows``, ``iter_with_prefix``, ``iter_batches``): the
MemTable first, then the store at the current epoch. ``commit(new_epoch)`` writes the MemTable as one sorted batch at the current
epoch (``HummockStorage.ingest_batch``) and moves to ``new_epoch``; making the epoch durable
(``store.checkpoint``) is the caller's barrier, not the table's. Row format and paths:
docs/relational.md.

Contracts:
- REQUIRES ``init_epoch(e)`` before any read or write. Epochs are ``int``s with the low 16 bits
  zero (``hummock.key.new_epoch()``; the store uses those bits for spill offsets) and only grow:
  ``init_epoch`` and ``commit`` refuse anything else with :class:`EpochError` naming the values.
- Strict mode (``consistent=True``, the default) checks every write against the table: an
  insert of an existing pk, a delete or update of a missing pk, or an old row that is not the
  stored row (compared as encoded bytes) raises :class:`InconsistentOpError` naming the pk.
  Relaxed mode trusts the caller (executors that guarantee consistency).
- Every write is all or nothing: a call that raises (an inconsistent row, an unknown op, a row
  of the wrong shape, a store error during a strict check) leaves the MemTable exactly as it
  was. An update that moves a row to another pk checks both pks first; ``write_chunk`` checks
  the whole chunk (one batched storage probe in strict mode) before it changes anything.
- ``commit`` and ``try_flush`` empty the MemTable only after ``store.ingest_batch`` returned: if
  the store refuses the batch (``InvalidArgumentError``, ``StoreClosedError``, an
  ``ObjectStoreError`` while it spills; the store then wrote nothing), the MemTable, the pending
  watermark and the epoch are as before and calling ``commit`` again retries. (The watermark is
  published after the batch; the store refuses it only for reasons it would have refused the
  batch for.)
- Rows and pks are tuples (or lists) of values; anything else raises :class:`RowError`, a
  wrong width :class:`SchemaError`, a value of the wrong type :class:`TypeMismatchError`.
- A row whose vnode is not in ``vnodes`` raises :class:`VnodeNotOwnedError`; reads only see the
  owned vnodes. Two instances owning disjoint vnodes of one table id may write the same epoch.
  ``update_vnode_bitmap(new)`` (rescaling) changes the owned set between epochs: it requires an
  empty MemTable (call it after ``commit``) and returns the old set.
- ``update_watermark(w)``: at the next commit, rows whose first pk column is below ``w``
  (SQL order; NULLs are never cleaned) disappear, in every owned vnode, from the current
  epoch on: the commit publishes one store table watermark per owned vnode
  (``HummockStorage.update_table_watermarks``), which hides them -- rows of earlier epochs and
  rows written in this epoch alike -- without scanning or writing tombstones; compaction
  removes them later. Several calls per epoch keep the highest; a watermark below an earlier
  epoch's changes nothing (watermarks never go back). Until the commit they stay readable.
- Rows read are tuples in schema order. An iterator (``iter_with_prefix``, ``iter_batches``)
  yields the table as it was when it was created: the store as of that call and the MemTable
  as of that call. Writes to the same range while it is iterated (a join probes its state,
  then updates the degrees of the rows it found) never break it and are not seen by it; the
  MemTable copies what an open iterator has left of its range on the first write after the
  iterator's creation (mem_table.py, "Range reads are snapshots"). It stays valid across
  ``commit`` and ``try_flush`` too (it keeps reading the old MemTable and store state).
- ``prefix_len_hint=k`` declares that reads probe prefixes of the first ``k`` pk columns (a
  join key, a group key): when those columns all have fixed-width key encodings (BOOLEAN,
  integers, floats, DATE, TIME, TIMESTAMP[TZ], INTERVAL) the table declares the prefix length
  ``2 + their widths`` bytes to the store (``set_table_options``), whose SSTs then carry prefix
  filters, and an ``iter_with_prefix`` with at least ``k`` non-NULL prefix values skips SSTs
  without that prefix (no block read). With a variable-width column among them (VARCHAR,
  BYTEA, DECIMAL, STRUCT, LIST) nothing is declared (``prefix_len`` is None): one byte length
  would not be the prefix of every probe. Results never change, only what is read; every
  instance of one table id should pass the same hint (the last declaration wins).
Not thread-safe: one instance belongs to one executor.

Callers: the stream layer's executors, library users (README "StateTable").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import sys
from itertools import compress, islice
from operator import eq

import pyarrow as pa

import numpy as np

from hummock.key import EPOCH_SPILL_MASK, MAX_EPOCH, prefix_end
from hummock.table_watermarks import TableWatermarks

from relational.errors import EpochError, InconsistentOpError, RowError, SchemaError, VnodeNotOwnedError
from relational.mem_table import DELETE, MemTable
from relational.memcomparable import encode_row as mc_encode_row
from relational.memcomparable import fixed_width
from relational.row_serde import RowSerde
from relational.table_iter import (as_values, batch_schema, check_batch_size, check_limit, column_indices,
                                   decoded_rows, merge_mem_over_storage, merge_vnodes, pinned_vnode, pk_ranges,
                                   record_batches)
from relational.arrow import to_arrow
from relational.types import DataType
from relational.vnode import SINGLETON_VNODE, VNODE_BYTES, Bitmap

#: ops of a chunk (the stream layer's ``Op`` uses the same numbers)
OP_INSERT, OP_DELETE, OP_UPDATE_DELETE, OP_UPDATE_INSERT = 1, 2, 3, 4
_INSERTS = (OP_INSERT, OP_UPDATE_INSERT)
_DELETES = (OP_DELETE, OP_UPDATE_DELETE)
_NOT_A_ROW = (str, bytes, bytearray, memoryview)
_TUPLE_OR_LIST = frozenset((tuple, list))   # pk containers get_rows takes as they are
DEFAULT_FLUSH_BYTES = 64 << 20
DEFAULT_BATCH_SIZE = 1024


def split_schema(schema):
    """``(names, types)`` of a schema given as DataTypes or ``(name, DataType)`` pairs."""
    names, types = [], []
    for i, col in enumerate(schema):
        if isinstance(col, DataType):
            names.append(f"c{i}")
            types.append(col)
        else:
            try:
                name, dtype = col
            except (TypeError, ValueError):
                raise SchemaError(f"a column is a DataType or a (name, DataType) pair, got {col!r}") from None
            if not isinstance(name, str) or not isinstance(dtype, DataType):
                raise SchemaError(f"a column is a DataType or a (name, DataType) pair, got {col!r}")
            names.append(name)
            types.append(dtype)
    return names, types


def _index_list(value, what: str, required: bool = False):
    """``value`` as a list (``None`` stays ``None`` unless ``required``); SchemaError if it is
    not a sequence."""
    if value is None:
        if required:
            raise SchemaError(f"{what} is required: the pk's column indices in key order, e.g. [0]")
        return None
    if isinstance(value, _NOT_A_ROW) or not isinstance(value, Iterable):
        raise SchemaError(f"{what} must be a sequence, got {type(value).__name__} {value!r}")
    return list(value)


def table_layout(schema, pk_indices, order_types=None, dist_key_indices=None, value_indices=None):
    """``(names, RowSerde)`` of a table's schema and key layout (the state and storage tables'
    constructor arguments); :class:`SchemaError` naming the argument that does not fit."""
    names, types = split_schema(schema)
    serde = RowSerde(types, _index_list(pk_indices, "pk_indices", required=True),
                     _index_list(order_types, "order_types"), _index_list(dist_key_indices, "dist_key_indices") or (),
                     _index_list(value_indices, "value_indices"))
    return names, serde


def check_epoch_arg(epoch, what: str, table: str, current=None) -> int:
    """``epoch`` as an int if it is a valid table epoch above ``current``; else EpochError."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)):
        raise EpochError(f"state table {table}: {what} needs an int epoch, got {type(epoch).__name__} {epoch!r}",
                         epoch, current)
    value = int(epoch)
    if not 0 <= value <= MAX_EPOCH:
        raise EpochError(f"state table {table}: {what} epoch {epoch!r} is outside [0, {MAX_EPOCH}]", epoch, current)
    if value & EPOCH_SPILL_MASK:
        raise EpochError(f"state table {table}: {what} epoch {epoch!r} has spill-offset bits set (low 16 bits "
                         f"{value & EPOCH_SPILL_MASK:#x}); epochs come from hummock.key.new_epoch()", epoch, current)
    if current is not None and value <= current:
        raise EpochError(f"state table {table}: {what} epoch {epoch!r} is not above the current epoch {current}",
                         epoch, current)
    return value


class StateTable:
    """One executor's state table. See the module docstring for the contracts."""

    def __init__(self, store, table_id: int, schema, pk_indices, order_types=None, dist_key_indices=None,
                 value_indices=None, vnodes: Bitmap | None = None, *, consistent: bool = True,
                 name: str | None = None, flush_threshold: int = DEFAULT_FLUSH_BYTES,
                 prefix_len_hint: int | None = None):
        self.store = store
        self.table_id = table_id
        self.names, self.serde = table_layout(schema, pk_indices, order_types, dist_key_indices, value_indices)
        self._width = len(self.names)
        self.vnodes = Bitmap.full() if vnodes is None else vnodes
        if not isinstance(self.vnodes, Bitmap):
            raise SchemaError(f"vnodes must be a Bitmap, got {vnodes!r}")
        self.name = name or f"#{table_id}"
        self.consistent = consistent
        self.flush_threshold = flush_threshold
        self.mem = MemTable(consistent, self._describe_key, self.name)
        self._owns_all = self.vnodes.is_full()
        self.epoch: int | None = None
        self._watermark = None
        self.prefix_len = self._declare_prefix(prefix_len_hint)

    def _declare_prefix(self, hint) -> int | None:
        """Turn ``prefix_len_hint`` (the first ``hint`` pk columns) into the store's prefix
        length in bytes -- the vnode plus those columns' fixed encoded widths -- and declare it
        (``HummockStorage.set_table_options``); return it, or None when nothing is declared."""
        if hint is None:
            return None
        width = len(self.serde.pk_types)
        if isinstance(hint, bool) or not isinstance(hint, (int, np.integer)) or not 1 <= hint <= width:
            raise SchemaError(f"state table {self.name}: prefix_len_hint must be None or an int in "
                              f"[1, {width}] (pk columns), got {hint!r}")
        widths = [fixed_width(t) for t in self.serde.pk_types[:int(hint)]]
        if None in widths:
            return None   # a variable-width column: no one prefix length fits every probe
        prefix_len = VNODE_BYTES + sum(widths)
        if not getattr(self.store, "read_only", False):
            self.store.set_table_options(self.table_id, prefix_len=prefix_len)
        return prefix_len

    @classmethod
    def from_desc(cls, store, desc, vnodes: Bitmap | None = None, **kwargs) -> StateTable:
        """A state table for a :class:`~relational.catalog.TableDesc`."""
        return cls(store, desc.table_id, desc.columns, desc.pk_indices, desc.order_types,
                   desc.dist_key_indices, desc.value_indices, vnodes, name=desc.name, **kwargs)

    @property
    def types(self):
        return self.serde.types

    def _describe_key(self, key: bytes):
        try:
            return self.serde.decode_pk(key)
        except Exception:   # a key we cannot decode is named by its bytes
            return key

    def _require_epoch(self) -> int:
        if self.epoch is None:
            raise SchemaError(f"state table {self.name}: call init_epoch(epoch) first")
        return self.epoch

    # --- epochs -----------------------------------------------------------------------------

    def init_epoch(self, epoch: int) -> None:
        """Start reading and writing at ``epoch`` (after creation or recovery).

        REQUIRES: an empty MemTable (``SchemaError`` otherwise) and a valid epoch above the
        current one, if any (``EpochError``). Nothing changes when it raises."""
        epoch = check_epoch_arg(epoch, "init_epoch", self.name, self.epoch)
        if self.mem:
            raise SchemaError(f"state table {self.name}: init_epoch with uncommitted writes")
        self.epoch = epoch

    def commit(self, new_epoch: int) -> None:
        """Write this epoch's operations as one sorted batch at the current epoch, publish the
        pending watermark (if any) at it, then continue at ``new_epoch``.

        REQUIRES: ``new_epoch`` a valid epoch above the current one (``EpochError``). All or
        nothing: if ``ingest_batch`` raises, the MemTable, the pending watermark and the epoch
        are unchanged and the error propagates; calling ``commit`` again retries."""
        epoch = self._require_epoch()
        new_epoch = check_epoch_arg(new_epoch, "commit", self.name, epoch)
        batch = self.mem.batch()
        if batch is not None:
            self.store.ingest_batch(self.table_id, batch, epoch)
        if self._watermark is not None:
            ranges = self._watermark_ranges()
            if ranges:   # cannot be refused once the batch was taken (same epoch, same store)
                self.store.update_table_watermarks(self.table_id, epoch, ranges)
        self.mem.clear()   # only now: the store has the batch
        self._watermark = None
        self.epoch = new_epoch

    def try_flush(self) -> bool:
        """Spill the MemTable to the store inside the epoch when it holds more than
        ``flush_threshold`` bytes (the engine gives the batch a spill offset). Reads are
        unchanged. Returns whether it flushed. If ``ingest_batch`` raises, the MemTable is
        unchanged and the error propagates."""
        epoch = self._require_epoch()
        if self.mem.approx_bytes < self.flush_threshold:
            return False
        batch = self.mem.batch()
        if batch is not None:
            self.store.ingest_batch(self.table_id, batch, epoch)
        self.mem.clear()
        return True

    # --- writes -----------------------------------------------------------------------------

    def _owned(self, key: bytes) -> None:
        if self._owns_all:
            return
        vnode = key[0] << 8 | key[1]
        if vnode not in self.vnodes:
            raise VnodeNotOwnedError(f"state table {self.name}: pk={self.serde.decode_pk(key)!r} is in vnode "
                                     f"{vnode}, which this instance does not own")

    def _stored(self, key: bytes):
        return self.store.get(self.table_id, key, self.epoch)

    def _check_absent(self, key: bytes) -> None:
        if self.consistent and self.mem.get(key) is None and self._stored(key) is not None:
            raise InconsistentOpError("insert of a pk that already has a row", self._describe_key(key), self.name)

    def _check_present(self, key: bytes, old: bytes, what: str) -> None:
        if self.consistent and self.mem.get(key) is None:
            stored = self._stored(key)
            if stored is None:
                raise InconsistentOpError(f"{what} of a pk that has no row", self._describe_key(key), self.name)
            if stored != old:
                raise InconsistentOpError(f"{what} whose old row is not the stored row",
                                          self._describe_key(key), self.name)

    def _encode(self, row, what: str):
        """``(key, value)`` of a row given as a tuple or list (or another sequence of values)."""
        if type(row) is not tuple and type(row) is not list:
            if isinstance(row, _NOT_A_ROW) or not isinstance(row, Sequence):
                raise RowError(f"state table {self.name}: {what} takes a row, a tuple of {self._width} values "
                               f"in schema order, got {type(row).__name__} {row!r:.200}")
        return self.serde.encode(row)

    def insert(self, row) -> None:
        """Insert ``row``; strict mode: its pk must have no row. Raises and changes nothing otherwise."""
        self._require_epoch()
        key, value = self._encode(row, "insert")
        self._owned(key)
        self._check_absent(key)
        self.mem.insert(key, value)

    def delete(self, row) -> None:
        """Delete ``row``; strict mode: it must be the pk's current row. Raises and changes nothing otherwise."""
        self._require_epoch()
        key, old = self._encode(row, "delete")
        self._owned(key)
        self._check_present(key, old, "delete")
        self.mem.delete(key, old)

    def update(self, old_row, new_row) -> None:
        """Replace ``old_row`` by ``new_row``; with different pks this is a delete and an
        insert, both checked before either is applied. Raises and changes nothing on failure."""
        self._require_epoch()
        key, old = self._encode(old_row, "update")
        new_key, new = self._encode(new_row, "update")
        self._owned(key)
        if new_key != key:
            self._owned(new_key)
            self._check_present(key, old, "update")
            self._check_absent(new_key)
            if self.consistent:   # the MemTable's own checks, for both keys, before changing either
                self.mem.check_delete(key, old, "update")
                self.mem.check_insert(new_key, "update")
            self.mem.delete(key, old)
            self.mem.insert(new_key, new)
            return
        self._check_present(key, old, "update")
        self.mem.update(key, old, new)

    def _ops_array(self, ops) -> np.ndarray:
        """``ops`` as a 1-D integer numpy array whose every op is known; SchemaError otherwise."""
        if hasattr(ops, "to_numpy"):
            ops = ops.to_numpy(zero_copy_only=False)
        arr = np.asarray(ops)
        if arr.ndim != 1:
            raise RowError(f"state table {self.name}: ops must be a sequence of ints, got {ops!r:.200}")
        if arr.dtype.kind not in "iu":
            try:
                ints = arr.astype(np.int64)
                exact = bool((ints == arr).all())
            except (TypeError, ValueError):
                exact = False
            if not exact:
                raise RowError(f"state table {self.name}: ops must be ints, got {arr.dtype} {ops!r:.200}")
            arr = ints
        return arr

    def _visibility(self, visibility, n: int) -> np.ndarray:
        """``visibility`` as a numpy bool array of ``n`` entries (Arrow NULLs are invisible)."""
        if isinstance(visibility, (pa.Array, pa.ChunkedArray)):
            if visibility.null_count:
                visibility = visibility.fill_null(False)
            visibility = visibility.to_numpy(zero_copy_only=False)
        mask = np.asarray(visibility)
        if mask.ndim == 1 and mask.size == 0:
            mask = mask.astype(np.bool_)
        if mask.ndim != 1 or mask.dtype != np.bool_:
            raise RowError(f"state table {self.name}: visibility must be a sequence of bools, "
                           f"got {type(visibility).__name__} {visibility!r:.200}")
        if len(mask) != n:
            raise SchemaError(f"state table {self.name}: visibility has {len(mask)} entries for {n} rows")
        return mask

    def _visible_columns(self, columns: list, mask: np.ndarray) -> list:
        n = len(mask)
        out = []
        for i, column in enumerate(columns):
            if isinstance(column, (pa.Array, pa.ChunkedArray, np.ndarray)):
                if len(column) != n:
                    raise SchemaError(f"state table {self.name}: column {i} has {len(column)} values, expected {n}")
                out.append(column.filter(pa.array(mask)) if not isinstance(column, np.ndarray) else column[mask])
            else:
                values = list(column)
                if len(values) != n:
                    raise SchemaError(f"state table {self.name}: column {i} has {len(values)} values, expected {n}")
                out.append(list(compress(values, mask)))
        return out

    def write_chunk(self, ops, columns, visibility=None) -> None:
        """Apply a chunk: ``ops`` (one op per row: 1 insert, 2 delete, 3 update-delete, 4
        update-insert; any int sequence, numpy or Arrow array) and ``columns`` (schema order;
        Arrow arrays, numpy arrays or sequences). An update is its update-delete row (a delete
        of the old row) then its update-insert row (an insert of the new one). ``visibility``
        (optional, one bool per row; numpy, Arrow or a sequence): rows marked False are skipped
        entirely (not encoded, not checked).

        The whole chunk is encoded at once and sorted by key (a stable sort, so the rows of one
        pk keep their order and the result is that of applying the rows in chunk order). An
        all-insert chunk of new keys is checked with one sorted ``multi_get`` (strict) and
        added with one dict update (relaxed: kept as a sorted run until commit); any other chunk is checked with one ``multi_get`` of its
        keys that have no MemTable record (strict) and run through the MemTable's merge rules
        into an overlay (``MemTable.apply``) that replaces the records only when every row
        passed.

        All or nothing: a chunk with an unknown op, a row outside the owned vnodes, a value
        that does not encode, a store error while probing or (strict mode) a row that fails its
        check raises and applies none of its rows; an inconsistent row is the first one in
        chunk order that fails, named by ``InconsistentOpError.pk``."""
        self._write_chunk(ops, columns, visibility, None)

    def write_chunk_fresh(self, ops, columns, fresh, visibility=None) -> None:
        """:meth:`write_chunk`, told which rows' pks have no row: ``fresh`` (one bool per row,
        chunk order, before ``visibility``; numpy or a sequence) marks the rows whose pk the
        caller knows has no row in the table -- neither stored nor in the MemTable -- before
        this chunk (a join side whose Bloom filter of every join key it ever wrote does not
        hold the row's key). Strict mode then probes the store only for the other rows; the
        MemTable's own checks run as before (a pk repeated inside the chunk, or one with a
        record, is checked as ever). What is written is exactly what :meth:`write_chunk`
        writes; a row wrongly marked fresh only escapes strict mode's store check. Relaxed
        mode ignores ``fresh``. ``SchemaError`` when ``fresh`` has not one entry per row."""
        fresh = np.asarray(fresh, dtype=np.bool_)
        n = len(ops)
        if fresh.ndim != 1 or len(fresh) != n:
            raise SchemaError(f"state table {self.name}: fresh has {fresh.size} entries for {n} rows")
        self._write_chunk(ops, columns, visibility, fresh if self.consistent and fresh.any() else None)

    def _write_chunk(self, ops, columns, visibility, fresh) -> None:
        """:meth:`write_chunk`; ``fresh``: :meth:`write_chunk_fresh`'s mask or None."""
        self._require_epoch()
        ops = self._ops_array(ops)
        if not isinstance(columns, (list, tuple)):
            if isinstance(columns, _NOT_A_ROW) or not isinstance(columns, Iterable):
                raise RowError(f"state table {self.name}: columns must be a sequence of {self._width} columns, "
                               f"got {type(columns).__name__}")
        columns = list(columns)
        visible_rows = None        # chunk positions of the visible rows, when some are not
        if visibility is not None:
            mask = self._visibility(visibility, len(ops))
            if not mask.all():
                if len(columns) != self._width:
                    raise SchemaError(f"state table {self.name}: a chunk has {self._width} columns, "
                                      f"got {len(columns)}")
                ops = ops[mask]
                columns = self._visible_columns(columns, mask)
                visible_rows = np.flatnonzero(mask)
                if fresh is not None:
                    fresh = fresh[mask]
        n = len(ops)
        all_inserts = bool(n) and bool((ops == OP_INSERT).all())
        if not all_inserts and n:
            bad = (ops < OP_INSERT) | (ops > OP_UPDATE_INSERT)
            if bad.any():
                i = int(np.argmax(bad))
                row = i if visible_rows is None else int(visible_rows[i])
                raise SchemaError(f"state table {self.name}: unknown op {int(ops[i])} at row {row} "
                                  "(1 insert, 2 delete, 3/4 update -/+); nothing applied")
        if all_inserts and not self.consistent and fresh is None and not self.mem.packed_settled and \
                self._packed_insert(columns, n):
            return
        vnodes, keys, values, order = self.serde.encode_chunk(columns, n, sort=True, return_order=True)
        if not self._owns_all and n and not self.vnodes.mask[vnodes].all():
            bad = int(np.argmin(self.vnodes.mask[vnodes]))
            self._owned(keys[bad])
        if fresh is not None:   # key order, as ``keys``
            fresh = fresh if order is None else fresh[order]
        if not n or all_inserts and self._insert_all(keys, values, order, self._distinct_int_pks(columns, n, order),
                                                     fresh):
            return
        inserts = (ops == OP_INSERT) | (ops == OP_UPDATE_INSERT)
        self._apply_batch(inserts, order, keys, values, fresh)

    def _packed_insert(self, columns, n: int) -> bool:
        """Relaxed mode, an all-insert chunk: encode it packed (``RowSerde.encode_chunk_packed``:
        integer pks, value columns from buffers) and add it to the MemTable as one packed run
        (``MemTable.append_packed``) -- no ``bytes`` object per row, here or in the store, unless
        something reads the rows before the flush. False (nothing changed) when the chunk does
        not encode packed or repeats a pk: the general path then takes it. Not tried once the
        MemTable had to turn a packed run back into records (``MemTable.packed_settled``: a
        table read while it is written, e.g. an upsert table's conflict check, gains nothing
        from packing and pays for the lists twice)."""
        encoded = self.serde.encode_chunk_packed(columns, n)
        if encoded is None:
            return False
        vnodes, batch, distinct = encoded
        if not self._owns_all and not self.vnodes.mask[vnodes].all():
            bad = int(np.argmin(self.vnodes.mask[vnodes]))
            self._owned(batch.keys[bad * batch.key_width:(bad + 1) * batch.key_width])
        if not distinct:
            return False
        self.mem.append_packed(batch)
        return True

    def _apply_batch(self, inserts: np.ndarray, order, keys: list, values: list, fresh=None) -> None:
        """Apply rows given in key order (``order``: their chunk positions); ``inserts`` (chunk
        order) tells inserts from deletes. Strict mode: one ``multi_get`` of the keys without a
        MemTable record (but those ``fresh`` marks: key order, known to have no row). Raises,
        changing nothing, at the first row in chunk order that fails."""
        stored = None
        if self.consistent:
            if fresh is not None:
                known = dict.fromkeys(compress(keys, fresh))
                probe = [key for key in self.mem.unrecorded(keys) if key not in known]
            else:
                known = None
                probe = self.mem.unrecorded(keys)
            stored = dict(zip(probe, self.store.multi_get(self.table_id, probe, self.epoch))) if probe else {}
            if known:
                for key in known:   # (a fresh key with a record is checked against the record)
                    stored.setdefault(key, None)
        sorted_inserts = (inserts if order is None else inserts[order]).tolist()
        try:
            self.mem.apply(sorted_inserts, keys, values, stored)
        except InconsistentOpError:
            if order is None:
                raise
            # name the first failing row in chunk order: each key's rows are independent of
            # the others', so the same rows in chunk order fail too (and change nothing)
            chunk_keys, chunk_values = [None] * len(order), [None] * len(order)
            for j, i in enumerate(order.tolist()):
                chunk_keys[i], chunk_values[i] = keys[j], values[j]
            self.mem.apply(inserts.tolist(), chunk_keys, chunk_values, stored)
            raise

    def _distinct_int_pks(self, columns, n: int, order) -> bool | None:
        """Whether the rows of a chunk sorted by key (``order``) have distinct pks, told from its
        integer pk columns in numpy: a repeated key is a repeated pk, and sits next to its twin
        in key order. None (ask the keys) unless every pk column is an integer without NULLs."""
        if order is None or n < 2 or not self.serde._int_pk_widths:
            return None
        pks = self.serde._int_pk_columns(columns, n)
        if pks is None:
            return None
        same = None
        for values in pks:
            values = values[order]
            step = values[1:] == values[:-1]
            same = step if same is None else same & step
        return not same.any()

    def _insert_all(self, keys, values, order, distinct: bool | None = None, fresh=None) -> bool:
        """All-insert chunks, ``keys`` sorted (``order``: their chunk positions; ``distinct``:
        whether they are, when the caller knows; ``fresh``: key order, the keys known to have
        no row, not probed). Relaxed mode:
        the chunk becomes a MemTable run, merged with the others at commit. Strict mode: one
        sorted storage check, then the keys go in unless one has a record (one dict probe a
        key). False = take the general path (a key repeats or already has a record); nothing
        changed then."""
        if distinct is None:
            distinct = not any(map(eq, keys, islice(keys, 1, None)))
        if not distinct:
            return False
        if not self.consistent:      # relaxed: a run merged at commit (MemTable.append_run)
            self.mem.append_run(keys, values)
            return True
        # strict: the store check, then the records' check fused with the insert
        # (MemTable.insert_absent: nothing changes when a key has a record)
        if fresh is None:
            at = None
            found = self.store.multi_get(self.table_id, keys, self.epoch)
        else:
            at = np.flatnonzero(~fresh).tolist()
            found = self.store.multi_get(self.table_id, [keys[j] for j in at], self.epoch) if at else []
        if found.count(None) != len(found):   # name the first such row in chunk order
            records = self.mem.records
            if records and not records.keys().isdisjoint(keys):
                return False   # (a record decides over the store: the general path)
            if at is not None:
                found = dict(zip(at, found))
                found = [found.get(j) for j in range(len(keys))]
            _, j = min((int(order[j]), j) for j, v in enumerate(found) if v is not None)
            key = keys[j]
            raise InconsistentOpError("insert of a pk that already has a row", self._describe_key(key), self.name)
        return self.mem.insert_absent(keys, values)

    # --- watermark --------------------------------------------------------------------------

    def update_watermark(self, value) -> None:
        """Rows whose first pk column is below ``value`` (SQL order; NULLs never) disappear at
        the next commit (module docstring). Several calls before a commit keep the highest.
        Raises ``SchemaError`` for a table without pk or a NULL ``value``, the type's error for a
        value of the wrong type; nothing changes then."""
        if not self.serde.pk_types:
            raise SchemaError(f"state table {self.name} has no pk to clean by watermark")
        value = self.serde.pk_types[0].validate(value)
        if value is None:
            raise SchemaError(f"state table {self.name}: a watermark cannot be NULL")
        encoded = mc_encode_row([value], self.serde.pk_types[:1], self.serde.order_types[:1])
        if self._watermark is not None:   # the highest value: the largest encoding, or the
            pick = min if self.serde.order_types[0].descending else max   # smallest when descending
            encoded = pick(encoded, self._watermark)
        self._watermark = encoded

    def truncate(self) -> None:
        """Empty the whole table id -- every vnode, every instance's rows (``TRUNCATE``,
        ``DROP``): the MemTable is cleared and the store hides every row written before this
        call from the current epoch on (``HummockStorage.truncate_table``); rows written
        afterwards are kept. The store's watermarks stay. If the store refuses (closed,
        read-only), nothing changes."""
        epoch = self._require_epoch()
        self.store.truncate_table(self.table_id, epoch)
        self.mem.clear()

    @property
    def watermark_records(self) -> TableWatermarks:
        """The store's watermark records of this table (what reads hide; for inspection)."""
        return self.store.table_watermarks(self.table_id)

    def _watermark_ranges(self) -> dict:
        """Per owned vnode (the one vnode of a singleton table), the range of key bytes after the
        vnode that the pending watermark
        hides: the non-NULL first-column values below it. Non-NULL values carry the tag 0x01
        (NULLs 0x00 or 0x02, never hidden), so ascending they span ``[01, w)``; descending,
        smaller values sort after ``w`` and every key extending it: ``[prefix_end(w), 02)``
        (empty, so nothing to publish, when ``w`` is the smallest encoding)."""
        w = self._watermark
        if self.serde.order_types[0].descending:
            lo = prefix_end(w)
            if lo is None or lo >= b"\x02":
                return {}
            rng = (lo, b"\x02")
        else:
            rng = (b"\x01", w)
        if not self.serde.dist_key_indices:   # a singleton table lives in one vnode
            return {SINGLETON_VNODE: rng} if SINGLETON_VNODE in self.vnodes else {}
        return dict.fromkeys(self.vnodes, rng)

    # --- vnodes -----------------------------------------------------------------------------

    def update_vnode_bitmap(self, new_bitmap: Bitmap) -> Bitmap:
        """Own the vnodes of ``new_bitmap`` from now on (rescaling) and return the old set.

        REQUIRES: no uncommitted writes (call it after ``commit``, before the new epoch's first
        write): ``SchemaError`` otherwise, and for a ``new_bitmap`` that is not a Bitmap;
        nothing changes then. Reads (and a pending watermark, published per owned vnode at the
        commit) then cover the new set;
        rows of vnodes given away stay in the store for their new owner. Iterators created
        before keep their vnodes."""
        if not isinstance(new_bitmap, Bitmap):
            raise SchemaError(f"state table {self.name}: update_vnode_bitmap takes a Bitmap, got {new_bitmap!r}")
        if self.mem:
            raise SchemaError(f"state table {self.name}: update_vnode_bitmap with {len(self.mem)} uncommitted "
                              "writes; commit the epoch first")
        old, self.vnodes = self.vnodes, new_bitmap
        self._owns_all = new_bitmap.is_full()
        return old

    # --- reads ------------------------------------------------------------------------------

    def get_row(self, pk):
        """The row with primary key ``pk`` (tuple in pk order) as of this epoch's writes, or
        None. A pk that is not a tuple or list raises RowError, a wrong width SchemaError."""
        epoch = self.epoch
        if epoch is None:
            self._require_epoch()
        key = self.serde.key_of_pk(pk if type(pk) is tuple else as_values(pk, "pk"))
        if not self._owns_all:
            self._owned(key)
        rec = self.mem.records.get(key)
        if rec is not None:
            if rec[0] == DELETE:
                return None
            value = rec[2]
        else:
            value = self.store.get(self.table_id, key, epoch)
            if value is None:
                return None
        return self.serde.decode(key, value)

    def get_rows(self, pks) -> list:
        """``[get_row(pk) for pk in pks]`` in a few calls: the pks are encoded at once
        (``RowSerde.keys_of_pks``), the MemTable answers the keys it has, one
        ``store.multi_get`` the rest, and the found values are decoded in one call.

        Raises as :meth:`get_row` (``RowError``, ``SchemaError``, a value's typed error,
        ``VnodeNotOwnedError``), naming the first bad pk, before reading anything."""
        epoch = self.epoch
        if epoch is None:
            self._require_epoch()
        if isinstance(pks, _NOT_A_ROW) or not isinstance(pks, Iterable):
            raise RowError(f"state table {self.name}: get_rows takes a sequence of pks, got {type(pks).__name__}")
        pks = list(pks)
        if not _TUPLE_OR_LIST.issuperset(map(type, pks)):
            pks = [as_values(pk, "pk") for pk in pks]
        if not pks:
            return []
        keys = self.serde.keys_of_pks(pks)
        if not self._owns_all:
            for key in keys:
                self._owned(key)
        records = self.mem.records
        if records:
            recs = list(map(records.get, keys))
            missing = [k for k, r in zip(keys, recs) if r is None]
            found = iter(self.store.multi_get(self.table_id, missing, epoch) if missing else ())
            values = [next(found) if r is None else r[2] for r in recs]   # a DELETE's new value is None
        else:
            values = self.store.multi_get(self.table_id, keys, epoch)
        if None not in values:
            return self.serde.decode_many(keys, values)
        at = [i for i, v in enumerate(values) if v is not None]
        out = [None] * len(values)
        if at:
            rows = self.serde.decode_many([keys[i] for i in at], [values[i] for i in at])
            for i, row in zip(at, rows):
                out[i] = row
        return out

    def _merged(self, lo: bytes, hi, reverse: bool):
        stored = self.store.iter(self.table_id, self.epoch, lo, hi, reverse=reverse)
        if not self.mem.has_range(lo, hi):
            return stored
        return merge_mem_over_storage(self.mem.range(lo, hi, reverse), iter(stored), reverse)

    def _pairs(self, pk_prefix, start, end, start_inclusive, end_inclusive, reverse, limit):
        """The merged ``(key, value)`` stream of a read, built now (the iterators' snapshot)."""
        self._require_epoch()
        limit = check_limit(limit, self.name)
        ranges = pk_ranges(self.serde, self.vnodes, pk_prefix, start, end, bool(start_inclusive),
                           bool(end_inclusive))
        if not self._owns_all:
            pinned = pinned_vnode(self.serde, pk_prefix)
            if pinned is not None and pinned not in self.vnodes:
                raise VnodeNotOwnedError(f"state table {self.name}: pk prefix {tuple(pk_prefix)!r} is in vnode "
                                         f"{pinned}, which this instance does not own")
        if not ranges or limit == 0:
            return ()
        pairs = merge_vnodes([self._merged(lo, hi, reverse) for _, lo, hi in ranges], reverse)
        return pairs if limit is None or limit > sys.maxsize else islice(pairs, limit)   # (no table is that big)

    def iter_with_prefix(self, pk_prefix=(), *, start=None, end=None, start_inclusive: bool = True,
                         end_inclusive: bool = False, reverse: bool = False, limit: int | None = None):
        """Yield the rows whose pk starts with ``pk_prefix``, in pk order across vnodes
        (descending with ``reverse``), at most ``limit`` of them (``None``: all).

        ``start`` and ``end`` bound the pk columns after the prefix, as tuples compared in pk
        order; a partial tuple bounds its columns only (``end=(5,)`` stops before every row
        whose next column is 5, or after the last of them with ``end_inclusive=True``).
        Defaults: ``start`` inclusive, ``end`` exclusive. With ``reverse`` the bounds keep their
        meaning (``start`` is still the low end).

        The iterator sees the table as of this call (module docstring); writes while it is
        open are safe. A prefix whose vnode this instance does not own raises
        ``VnodeNotOwnedError``; a ``limit`` that is not ``None`` or an int >= 0 raises
        ``SchemaError``; both at the call."""
        pairs = self._pairs(pk_prefix, start, end, start_inclusive, end_inclusive, reverse, limit)
        return decoded_rows(self.serde, pairs) if pairs != () else iter(())

    def rows_with_prefixes(self, prefixes) -> list:
        """``[list(iter_with_prefix(p)) for p in prefixes]`` in a few calls (a join probing the
        rows of many join keys at once): when the prefixes all have one width and cover the
        distribution key, their key prefixes are encoded together
        (``RowSerde.keys_of_prefixes``), each is one store range read (merged under the
        MemTable only where it has records; declared prefix filters apply as for
        ``iter_with_prefix``), and every row found is decoded in one call. Prefixes of exactly
        the declared prefix length (``prefix_len_hint`` columns, none NULL) find their MemTable
        records through its per-prefix index (``MemTable.records_with_prefixes``: a dict
        lookup, where a range read first merges the epoch's new keys into the sorted index). Other prefixes are
        read one by one. Same results, snapshot and errors as :meth:`iter_with_prefix`
        (``VnodeNotOwnedError`` for a prefix whose vnode is not owned), raised before anything
        is read."""
        prefixes, los = self._prefix_keys(prefixes, "rows_with_prefixes")
        if not prefixes:
            return []
        if los is None:
            return [list(self.iter_with_prefix(p)) for p in prefixes]
        keys, values, ends = self._prefix_pairs(los)
        rows = self.serde.decode_many(keys, values) if keys else []
        return [rows[begin:end] for begin, end in zip([0, *ends], ends)]

    def pairs_with_prefixes(self, prefixes) -> tuple[list, list, list]:
        """The stored form of :meth:`rows_with_prefixes`: ``(keys, values, ends)``, the encoded
        pairs of every row found, prefix ``i``'s being ``keys[ends[i-1]:ends[i]]`` (from 0 for
        the first), each prefix's in pk order -- one list for all prefixes, not one per prefix,
        and nothing decoded (:meth:`decode_columns` turns them into Arrow columns, ``serde``'s
        ``decode_many`` into rows). The same reads, snapshot and errors as
        :meth:`rows_with_prefixes`."""
        prefixes, los = self._prefix_keys(prefixes, "pairs_with_prefixes")
        if not prefixes:
            return [], [], []
        if los is not None:
            return self._prefix_pairs(los)
        keys, values, ends = [], [], []
        for p in prefixes:   # (prefixes of mixed widths, or not covering the distribution key)
            for key, value in self._pairs(p, None, None, True, False, False, None):
                keys.append(key)
                values.append(value)
            ends.append(len(keys))
        return keys, values, ends

    def decode_columns(self, keys: list, values: list) -> list:
        """The rows of the encoded pairs ``keys``/``values`` (this table's, e.g. from
        :meth:`pairs_with_prefixes`) as Arrow arrays, one per column in schema order -- equal
        to ``relational.arrow.to_arrow`` of ``serde.decode_many``'s values, of the types
        ``iter_batches`` gives. Integer pk columns come from the keys and value columns from
        the values without a Python tuple per row where the layout allows
        (``relational/pair_columns.py``); else through the rows. Raises ``DecodeError`` for a
        malformed pair."""
        decoder = self.__dict__.get("_pair_columns", False)
        if decoder is False:
            from relational.pair_columns import PairColumns
            decoder = self._pair_columns = PairColumns.of(self.serde)
        if decoder is not None:
            columns = decoder.decode(keys, values)
            if columns is not None:
                return columns
        rows = self.serde.decode_many(keys, values) if keys else []
        if not rows:
            return [to_arrow([], t) for t in self.serde.types]
        return [to_arrow(list(c), t) for c, t in zip(zip(*rows), self.serde.types)]

    def _prefix_keys(self, prefixes, what: str) -> tuple[list, list | None]:
        """``(prefixes, los)``: the prefixes as a list of value sequences and, when they all have
        one width and cover the distribution key, their encoded key prefixes (None: read one by
        one); ``RowError`` / ``VnodeNotOwnedError`` before anything is read."""
        self._require_epoch()
        if isinstance(prefixes, _NOT_A_ROW) or not isinstance(prefixes, Iterable):
            raise RowError(f"state table {self.name}: {what} takes a sequence of pk prefixes, "
                           f"got {type(prefixes).__name__}")
        prefixes = list(prefixes)
        if not _TUPLE_OR_LIST.issuperset(map(type, prefixes)):
            prefixes = [as_values(p, "pk prefix") for p in prefixes]
        if not prefixes:
            return prefixes, None
        width = len(prefixes[0])
        los = None
        if 1 <= width <= len(self.serde.pk_types) and len(set(map(len, prefixes))) == 1:
            los = self.serde.keys_of_prefixes(prefixes, width)
        if los is None:
            if not self._owns_all:   # (iter_with_prefix's check, for every prefix before any read)
                for p in prefixes:
                    self._pairs(p, None, None, True, False, False, 0)
            return prefixes, None
        if not self._owns_all:
            for lo, p in zip(los, prefixes):
                if (lo[0] << 8 | lo[1]) not in self.vnodes:
                    raise VnodeNotOwnedError(f"state table {self.name}: pk prefix {tuple(p)!r} is in vnode "
                                             f"{lo[0] << 8 | lo[1]}, which this instance does not own")
        return prefixes, los

    def _prefix_pairs(self, los: list) -> tuple[list, list, list]:
        """``(keys, values, ends)`` of the key prefixes ``los`` (``HummockStorage.scan_prefixes``'s
        shape), the MemTable merged over the store: every prefix is read from the store in one
        ``scan_prefixes`` call; a prefix with MemTable records then takes them merged over its
        stored pairs (just its live records when it has none stored)."""
        mem, table_id, epoch = self.mem, self.table_id, self.epoch
        scan_prefixes = getattr(self.store, "scan_prefixes", None)
        if scan_prefixes is not None:
            batch = scan_prefixes(table_id, epoch, los)
        else:   # a store without the batched read (test doubles)
            batch = _scan_prefixes_one_by_one(self.store, table_id, epoch, los)
        if not mem:
            return batch
        plen = self.prefix_len
        if plen is not None and set(map(len, los)) == {plen}:   # the MemTable's prefix index
            in_mem = mem.records_with_prefixes(plen, los)
        else:
            in_mem = [mem.range(lo, hi, False) if mem.has_range(lo, hi) else None
                      for lo, hi in zip(los, map(prefix_end, los))]
        hits = [i for i, records in enumerate(in_mem) if records is not None]
        if not hits:
            return batch
        # copy the batch between the prefixes with records in whole slices; ``grown`` is how
        # many pairs each such prefix's merge added (or removed), shifting the later ends
        bkeys, bvalues, bends = batch
        keys, values = [], []
        grown = np.zeros(len(los), np.int64)
        copied = 0   # batch pairs [0, copied) are in ``keys`` already
        for i in hits:
            begin, end = (bends[i - 1] if i else 0), bends[i]
            keys += bkeys[copied:begin]
            values += bvalues[copied:begin]
            before = len(keys)
            if begin == end:   # nothing stored: the live records alone
                for key, (op, _, new) in in_mem[i]:
                    if op != DELETE:
                        keys.append(key)
                        values.append(new)
            else:
                stored = zip(bkeys[begin:end], bvalues[begin:end])
                for key, value in merge_mem_over_storage(iter(in_mem[i]), stored, False):
                    keys.append(key)
                    values.append(value)
            grown[i] = (len(keys) - before) - (end - begin)
            copied = end
        keys += bkeys[copied:]
        values += bvalues[copied:]
        ends = (np.asarray(bends, np.int64) + np.cumsum(grown)).tolist()
        return keys, values, ends

    def iter_batches(self, pk_prefix=(), *, start=None, end=None, start_inclusive: bool = True,
                     end_inclusive: bool = False, reverse: bool = False, limit: int | None = None,
                     batch_size: int = DEFAULT_BATCH_SIZE, columns=None):
        """:meth:`iter_with_prefix` as ``pyarrow.RecordBatch``es of at most ``batch_size`` rows
        with ``columns`` (names or indices; default all), typed as ``StorageTable.batch_iter``
        types them (:func:`relational.arrow.arrow_type`). Same snapshot and errors, plus
        ``SchemaError`` for a bad ``batch_size`` or column, at the call."""
        batch_size = check_batch_size(batch_size, self.name)
        idx = column_indices(self.names, columns, self.name)
        schema = batch_schema(self.names, self.serde.types, idx)
        rows = self.iter_with_prefix(pk_prefix, start=start, end=end, start_inclusive=start_inclusive,
                                     end_inclusive=end_inclusive, reverse=reverse, limit=limit)
        return record_batches(rows, idx, self.serde.types, schema, batch_size)


def _scan_prefixes_one_by_one(store, table_id: int, epoch: int, los: list) -> tuple[list, list, list]:
    """``HummockStorage.scan_prefixes`` through ``store.iter``, for stores without it."""
    keys, values, ends = [], [], []
    for lo in los:
        for key, value in store.iter(table_id, epoch, lo, prefix_end(lo)):
            keys.append(key)
            values.append(value)
        ends.append(len(keys))
    return keys, values, ends
