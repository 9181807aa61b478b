"""The shared buffer: uncommitted writes, as immutable memtables (imms), until they become SSTs.

Every ``ingest_batch`` becomes one :class:`Imm` (a :class:`PackedImm` for a packed batch, whose
lists are built only if something reads it): one table, one *versioned* epoch, the batch's
table keys (strictly ascending) and values (``None`` = delete). Several batches of one table in
one epoch get distinct versioned epochs ``epoch + spill_offset`` (offset 0, 1, 2, ... in
arrival order), so a later batch always shadows an earlier one and every version stays distinct
(DESIGN.md section 3: the low 16 bits of an epoch are the spill offset).

Invariants:
- user epochs written here have their low 16 bits zero (``EPOCH_SPILL_MASK``) and are greater
  than the sealed epoch; versioned epochs are unique per table;
- ``size`` is the sum of the imms' byte sizes (keys + values + a per-entry overhead) and is what
  the engine compares with ``shared_buffer_capacity``;
- imms are never mutated; ``remove`` drops them only after the caller made them durable
  elsewhere (staging SSTs), under the engine's lock.

Thread safety: none of its own; the engine serializes calls.
Callers: :mod:`hummock.storage` only.
"""

from __future__ import annotations

import bisect

from hummock import _twins
from hummock._memtable_py import ENTRY_OVERHEAD
from hummock.errors import InvalidArgumentError
from hummock.key import EPOCH_SPILL_MASK
from hummock.packed_batch import PackedColumns
from hummock.sstable.filter import FilterReader, build_filter

_impl = _twins.load("_memtable", "hummock._memtable_py")


class KeyValueColumns:
    """A batch for ``ingest_batch`` given as two parallel lists -- what a state table's MemTable
    hands over -- instead of ``(key, value)`` pairs: iterating it yields the pairs, and
    :func:`check_batch` checks the lists without making a pair per entry."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: list, values: list):
        self.keys, self.values = keys, values

    def __iter__(self):
        return zip(self.keys, self.values)

    def __len__(self) -> int:
        return len(self.keys)


def check_batch(kv_pairs):
    """``(keys, values, size)`` of a validated batch (native or twin): ``(key, value)`` pairs,
    or a :class:`KeyValueColumns` (same checks and errors; new lists either way), or a
    :class:`~hummock.packed_batch.PackedColumns`, which gives ``(the batch, None, size)``."""
    if type(kv_pairs) is KeyValueColumns:
        return _impl.check_columns(kv_pairs.keys, kv_pairs.values)
    if type(kv_pairs) is PackedColumns:
        b = kv_pairs
        return b, None, _impl.check_packed(b.keys, b.key_width, b.values, b.offsets)
    return _impl.check_batch(kv_pairs)

#: ``merge_runs(prefix, [(epoch, keys, values)]) -> (full_keys, values)``: merge one table's imms.
merge_runs = _impl.merge_runs

__all__ = ["Imm", "PackedImm", "KeyValueColumns", "SharedBuffer", "check_batch", "merge_runs", "ENTRY_OVERHEAD"]


#: Imms with fewer keys get no bloom filter: their binary search costs about as much as a probe.
IMM_FILTER_MIN_KEYS = 64


class Imm:
    """One immutable sorted batch. ``keys``/``values`` are parallel lists; do not mutate them
    (the native :func:`check_batch` hands them over untracked by the cycle collector, which
    then never walks their entries: native/_memtable.pyx).

    ``filter`` is ``None`` until a native point read first asks for it (:meth:`build_filter`),
    then a bloom :class:`~hummock.sstable.filter.FilterReader` over the table keys (``False``
    for small imms): absent keys -- most of a strict-mode insert's checks -- then skip the imm's
    binary search. Built on demand, so write-only workloads never pay for it; two readers racing
    both build the same filter. (The pure read path skips it: a pure-Python hash costs more than
    the binary search it saves.)

    ``prefix_filter``, likewise built on a native scan's first use (:meth:`build_prefix_filter`),
    is ``(n, filter)``: a bloom filter over the distinct first ``n`` bytes of the keys (keys
    shorter add nothing; ``False`` for small imms), for tables that declare a prefix length: a scan confined to one
    prefix (a join's probe of a join key, usually absent) then skips the imm's two binary
    searches, whose random memory accesses over a large imm cost more than the probe.

    ``prefix_index`` is the native batched prefix scan's ``(n, ImmPrefixIndex)`` (built there
    on first use, native only): where each n-byte prefix's keys start, so a present prefix
    costs a hash lookup instead of a binary search (native/_prefix_scan.pxi)."""

    __slots__ = ("table_id", "epoch", "keys", "values", "size", "filter", "prefix_filter", "prefix_index")

    def __init__(self, table_id: int, epoch: int, keys: list, values: list, size: int):
        self.keys = keys
        self.values = values
        self._init(table_id, epoch, size)

    def _init(self, table_id: int, epoch: int, size: int) -> None:
        """Set every field but :attr:`keys` and :attr:`values`, which are the subclass's to
        provide (a :class:`PackedImm` builds them on first use)."""
        self.table_id = table_id
        self.epoch = epoch          # versioned epoch: user epoch + spill offset
        self.size = size
        self.filter = None
        self.prefix_filter = None
        self.prefix_index = None

    @property
    def user_epoch(self) -> int:
        """The epoch the batch was written at (:attr:`epoch` without its spill offset)."""
        return self.epoch & ~EPOCH_SPILL_MASK

    def build_filter(self):
        """Build (once) and return :attr:`filter`."""
        if self.filter is None:
            if len(self.keys) < IMM_FILTER_MIN_KEYS:
                self.filter = False
            else:
                self.filter = FilterReader(build_filter(self.keys), object_name="imm filter")
        return self.filter

    def build_prefix_filter(self, n: int):
        """Build (once per prefix length ``n``) and return the filter of :attr:`prefix_filter`
        (``False`` for small imms). The pair is replaced as one object, so a racing reader
        never pairs a filter with another length."""
        built = self.prefix_filter
        if built is None or built[0] != n:
            if len(self.keys) < IMM_FILTER_MIN_KEYS:
                built = (n, False)
            else:
                built = (n, FilterReader(build_filter([k[:n] for k in self.keys if len(k) >= n]),
                                         object_name="imm prefix filter"))
            self.prefix_filter = built
        return built[1]

    def get(self, key: bytes):
        """``(True, value_or_None)`` when the batch holds ``key``, else ``(False, None)``."""
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            return True, self.values[i]
        return False, None

    def __len__(self) -> int:
        return len(self.keys)

    def at_epoch(self, epoch: int) -> Imm:
        """A copy of this imm at versioned epoch ``epoch`` (a task store's spill offset applied),
        sharing its batch."""
        return Imm(self.table_id, epoch, self.keys, self.values, self.size)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table_id}, epoch={self.epoch}, entries={len(self)}, bytes={self.size})"


class PackedImm(Imm):
    """An imm holding a :class:`~hummock.packed_batch.PackedColumns` (the packed insert path):
    the flush builds its SST from the buffers (``flush.flush_imms``); :attr:`keys` and
    :attr:`values` -- what every reader takes -- are the batch's lists, built on first use.

    The lists replace the buffers: once built, :attr:`packed` is ``None`` and the imm holds
    what a list :class:`Imm` of the batch holds -- what the shared buffer counted for it
    (:attr:`size`, the list path's count, never changes) -- not that and the buffers. Its
    flush then takes the list path (``merge_runs`` + ``add_batch``), which writes the same
    SSTs byte for byte. Racing readers may each build the lists (equal ones); the lists are
    stored before ``packed`` is cleared, so whoever sees ``packed is None`` finds them. A
    flush reads :attr:`packed` once per imm and keeps that reference while it adds it."""

    __slots__ = ("packed", "_lists")

    def __init__(self, table_id: int, epoch: int, packed, size: int):
        self.packed = packed
        self._lists = None
        self._init(table_id, epoch, size)

    def _unpacked(self) -> tuple:
        """``(keys, values)``, built from the buffers on the first call, which drops them."""
        lists = self._lists
        if lists is None:
            packed = self.packed
            if packed is None:      # another reader built them after our first look
                return self._lists
            lists = self._lists = packed.lists()
            self.packed = None
        return lists

    @property
    def keys(self) -> list:
        return self._unpacked()[0]

    @property
    def values(self) -> list:
        return self._unpacked()[1]

    def at_epoch(self, epoch: int) -> Imm:
        packed = self.packed
        if packed is None:          # read already: the lists are what it holds
            keys, values = self._lists
            return Imm(self.table_id, epoch, keys, values, self.size)
        return PackedImm(self.table_id, epoch, packed, self.size)

    def __len__(self) -> int:
        packed = self.packed
        return len(packed) if packed is not None else len(self._lists[0])


class SharedBuffer:
    """All uncommitted imms of a store, by table, oldest first within a table."""

    def __init__(self):
        self._tables: dict[int, list[Imm]] = {}
        # table id -> tuple of its imms, kept in step with _tables: a read state copies this
        # dict (O(tables)) instead of freezing every table's list on every write
        self._frozen: dict[int, tuple] = {}
        self._spill_offsets: dict[tuple[int, int], int] = {}
        self.size = 0
        self.sealed_epoch = 0

    def check_add(self, table_id: int, epoch: int) -> None:
        """Raise InvalidArgumentError if a batch of ``table_id`` at ``epoch`` cannot be added."""
        if epoch & EPOCH_SPILL_MASK:
            raise InvalidArgumentError(
                f"epoch {epoch} has low 16 bits set; those hold spill offsets (use hummock.key.new_epoch() "
                "or multiples of 1 << 16)")
        if epoch <= self.sealed_epoch:
            raise InvalidArgumentError(f"epoch {epoch} is sealed (sealed up to {self.sealed_epoch}); "
                                       "write to a newer epoch")
        offset = self._spill_offsets.get((table_id, epoch), 0)
        if offset > EPOCH_SPILL_MASK:
            raise InvalidArgumentError(f"more than {EPOCH_SPILL_MASK + 1} batches for table {table_id} in epoch {epoch}")

    def next_offset(self, table_id: int, epoch: int) -> int:
        """The spill offset the next batch of ``(table_id, epoch)`` gets (the batches so far)."""
        return self._spill_offsets.get((table_id, epoch), 0)

    def add(self, table_id: int, epoch: int, keys, values, size: int) -> Imm:
        """Add a checked batch as a new imm at the next spill offset of ``(table_id, epoch)``:
        ``keys``/``values`` two lists, or ``keys`` a checked ``PackedColumns`` and ``values``
        None (a :class:`PackedImm`)."""
        self.check_add(table_id, epoch)
        offset = self._spill_offsets.get((table_id, epoch), 0)
        self._spill_offsets[(table_id, epoch)] = offset + 1
        if values is None:
            imm = PackedImm(table_id, epoch + offset, keys, size)
        else:
            imm = Imm(table_id, epoch + offset, keys, values, size)
        imms = self._tables.setdefault(table_id, [])
        if imms and imms[-1].epoch > imm.epoch:
            bisect.insort(imms, imm, key=lambda m: m.epoch)
        else:
            imms.append(imm)
        self._frozen[table_id] = tuple(imms)
        self.size += size
        return imm

    def seal(self, epoch: int) -> None:
        if epoch > self.sealed_epoch:
            self.sealed_epoch = epoch

    def tables(self) -> list[int]:
        """Table ids that have imms."""
        return list(self._tables)

    def imms(self, table_id: int) -> list[Imm]:
        """The table's imms, oldest first (do not mutate)."""
        return self._tables.get(table_id, [])

    def frozen(self) -> dict[int, tuple]:
        """A new dict: table id -> its imms oldest first, as a tuple (what a read state holds)."""
        return dict(self._frozen)

    def all_imms(self) -> list[Imm]:
        """Every imm, in (table id, versioned epoch) order."""
        return [imm for table_id in sorted(self._tables) for imm in self._tables[table_id]]

    def remove(self, predicate) -> None:
        """Drop the imms for which ``predicate(imm)`` is true (after they were made durable)."""
        for table_id in list(self._tables):
            keep = []
            for imm in self._tables[table_id]:
                if predicate(imm):
                    self.size -= imm.size
                else:
                    keep.append(imm)
            if keep:
                self._tables[table_id] = keep
                self._frozen[table_id] = tuple(keep)
            else:
                del self._tables[table_id]
                del self._frozen[table_id]

    def forget_offsets(self, max_epoch: int) -> None:
        """Drop spill counters of epochs <= ``max_epoch`` (they can take no more writes)."""
        for key in [k for k in self._spill_offsets if k[1] <= max_epoch]:
            del self._spill_offsets[key]

    def clear(self) -> None:
        self._tables.clear()
        self._frozen.clear()
        self._spill_offsets.clear()
        self.size = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._tables.values())

    def _check(self) -> None:
        """Assert the invariants (tests): sizes add up, each table's imms are in strictly
        increasing versioned-epoch order above nothing sealed before them, and the frozen
        view equals the lists."""
        total = 0
        for table_id, imms in self._tables.items():
            assert imms, f"table {table_id} has an empty imm list"
            assert self._frozen.get(table_id) == tuple(imms), f"frozen view of table {table_id} is stale"
            epochs = [imm.epoch for imm in imms]
            assert epochs == sorted(set(epochs)), f"table {table_id}: epochs not strictly increasing: {epochs}"
            assert all(imm.table_id == table_id for imm in imms)
            total += sum(imm.size for imm in imms)
        assert set(self._frozen) == set(self._tables), "frozen view has other tables"
        assert total == self.size, f"size {self.size} != sum of imm sizes {total}"
