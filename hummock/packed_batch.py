"""Packed write batches: the keys and values of one sorted batch in two buffers, not as a
``bytes`` object per entry (issue 30's packed insert path).

:class:`PackedColumns` is what a relaxed state table hands ``HummockStorage.ingest_batch`` for an
epoch of inserts of distinct integer pks (an ``APPEND ONLY`` table's row ids, a materialized
view's): ``n`` table keys of one width back to back in ``keys`` (strictly ascending), their
values back to back in ``values``, and ``n + 1`` offsets (``values[offsets[i]:offsets[i+1]]`` is
entry ``i``'s value; there are no deletes). Encoding writes it in C from the chunk's columns,
the shared buffer keeps it as one imm (:class:`~hummock.shared_buffer.PackedImm`) and the flush
builds the SST from it (``BlockBuilder.add_packed``): no per-entry Python object is made on the
way unless something reads the imm, which then gets the usual lists once (:meth:`lists`).

Invariants: the object is immutable (the offsets array is made read-only, and C-contiguous: a
strided array is copied); ``keys`` holds whole
keys of ``key_width`` bytes; ``offsets`` starts at 0, never decreases and ends at
``len(values)``. Sortedness and those bounds are checked by ``ingest_batch``
(``check_packed``, native with a twin), not here: building one costs no pass over the entries.

Callers: :mod:`relational.mem_table` and :mod:`relational.state_table` (build and concatenate),
:mod:`hummock.storage`, :mod:`hummock.shared_buffer`, :mod:`hummock.flush`.
"""

from __future__ import annotations

import numpy as np

from hummock import _twins
from hummock.errors import InvalidArgumentError

_impl = _twins.load("_memtable", "hummock._memtable_py")

__all__ = ["PackedColumns"]


class PackedColumns:
    """One packed batch (module docstring). Iterating it yields ``(key, value)`` pairs."""

    __slots__ = ("keys", "key_width", "values", "offsets", "_lists")

    def __init__(self, keys: bytes, key_width: int, values: bytes, offsets: np.ndarray):
        if type(keys) is not bytes or type(values) is not bytes:
            raise InvalidArgumentError("packed keys and values must be bytes")
        if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
            raise InvalidArgumentError("value offsets must be a 1-D numpy int64 array")
        if not offsets.flags.c_contiguous:   # the native readers (split_packed, add_packed) take C-contiguous offsets
            offsets = np.ascontiguousarray(offsets)
        offsets.flags.writeable = False   # handed over: nobody changes it from here on
        self.keys, self.key_width, self.values, self.offsets = keys, key_width, values, offsets
        self._lists = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self):
        keys, values = self.lists()
        return zip(keys, values)

    @property
    def first_key(self) -> bytes:
        return self.keys[:self.key_width]

    @property
    def last_key(self) -> bytes:
        return self.keys[-self.key_width:]

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values (what ``check_batch`` counts before its per-entry overhead)."""
        return len(self.keys) + len(self.values)

    def lists(self) -> tuple[list, list]:
        """``(keys, values)``: two lists of bytes, built once (native ``split_packed``); do not
        mutate them."""
        lists = self._lists
        if lists is None:
            lists = self._lists = _impl.split_packed(self.keys, self.key_width, self.values, self.offsets)
        return lists

    @staticmethod
    def concat(batches: list) -> PackedColumns:
        """One batch of ``batches`` (one key width; the caller knows each one's keys lie above
        the previous one's) back to back."""
        if len(batches) == 1:
            return batches[0]
        width = batches[0].key_width
        if any(b.key_width != width for b in batches):
            raise InvalidArgumentError("packed batches of different key widths")
        offsets = np.empty(sum(len(b) for b in batches) + 1, dtype=np.int64)
        offsets[0] = 0
        at, base = 1, 0
        for b in batches:
            n = len(b)
            np.add(b.offsets[1:], base, out=offsets[at:at + n])
            at += n
            base += len(b.values)
        return PackedColumns(b"".join(b.keys for b in batches), width, b"".join(b.values for b in batches), offsets)

    def __repr__(self) -> str:
        return f"PackedColumns(entries={len(self)}, key_width={self.key_width}, bytes={self.nbytes})"
