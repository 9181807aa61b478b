"""Ordered reads shared by the state and storage tables: key ranges, merges, row batches.

Job: turn "rows of these vnodes with this pk prefix, between these bounds" into table-key
ranges (one per vnode, since every key starts with its vnode), merge the MemTable over storage
within one range, merge the per-vnode streams into one pk-ordered stream, decode pairs into
rows in batches (one encoder call per batch), and gather rows into Arrow record batches.

Bounds: ``start``/``end`` bound the pk columns after the prefix, compared in pk order; a
partial tuple compares only its columns (with ``end=(5,)`` exclusive, every row whose next
column is 5 is out; inclusive, they are in). Because every memcomparable column encoding is
self-delimiting, "the row's columns equal the bound" is "the key extends the bound's bytes",
so an inclusive end and an exclusive start are both ``prefix_end(bound)``.

Invariants: every stream handled here is strictly ordered by table key (descending when
``reverse``); the merge of MemTable over storage yields each key once, the MemTable's record
winning (its DELETE hides the stored row); the vnode merge orders by the key without its
2-byte vnode, i.e. by the encoded pk, which is the pk order. That merge is native
(``native/_vnode_merge.pyx``, a heap of stream slots comparing keys with ``memcmp``; twin
``relational/_vnode_merge_py.py``); an empty stream costs one ``next`` and leaves the heap.

Callers: :mod:`relational.state_table`, :mod:`relational.storage_table`.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

import numpy as np
import pyarrow as pa

from hummock import _twins
from hummock.key import prefix_end
from relational import memcomparable
from relational.arrow import arrow_type, to_arrow
from relational.errors import RowError, SchemaError
from relational.mem_table import DELETE
from relational.vnode import VNODE_BYTES

_merge = _twins.load("_vnode_merge", "relational._vnode_merge_py")

BATCH = 256
FIRST_BATCH = 4


def as_values(values, what: str) -> tuple:
    """``values`` (a tuple, list or other iterable of column values) as a tuple; a str, bytes,
    ``None`` or a scalar raises :class:`RowError` naming ``what`` it should have been."""
    if type(values) is tuple:
        return values
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise RowError(f"a {what} is a tuple of values in pk order, got {type(values).__name__} {values!r:.200}")
    return tuple(values)


def pinned_vnode(serde, pk_prefix):
    """The one vnode every row with ``pk_prefix`` is in (the prefix covers the distribution
    key, or the table is a singleton), or ``None`` when the rows spread over vnodes."""
    pk_prefix = as_values(pk_prefix, "pk prefix")
    if not serde.dist_in_pk:
        return 0
    if len(pk_prefix) <= len(serde.pk_types) and all(i < len(pk_prefix) for i in serde.dist_in_pk):
        return serde.vnode_of_pk(pk_prefix + (None,) * (len(serde.pk_types) - len(pk_prefix)))
    return None


def pk_ranges(serde, vnodes, pk_prefix=(), start=None, end=None, start_inclusive: bool = True,
              end_inclusive: bool = False):
    """``[(vnode, lo, hi)]``: the table-key ranges holding the rows with ``pk_prefix`` and, on
    the pk columns after it, ``start <= rest < end`` (``<`` for an exclusive start, ``<=`` for
    an inclusive end; partial tuples compare as prefixes; the order is the pk order). ``hi``
    may be ``None`` (unbounded). When the prefix covers the distribution key only its vnode is
    searched; ``vnodes`` (a Bitmap) limits the rest."""
    pk_prefix = as_values(pk_prefix, "pk prefix")
    start = as_values(start, "start bound") if start is not None else None
    end = as_values(end, "end bound") if end is not None else None
    width = len(serde.pk_types)
    for part in (start, end):
        if part is not None and len(pk_prefix) + len(part) > width:
            raise memcomparable.SchemaError(
                f"prefix {pk_prefix!r} and bound {part!r} have more values than the pk's {width}")
    if len(pk_prefix) > width:
        raise memcomparable.SchemaError(f"pk prefix {pk_prefix!r} is longer than the pk ({width} columns)")

    def enc(values):
        k = len(values)
        return memcomparable.encode_row(values, serde.pk_types[:k], serde.order_types[:k])

    body = enc(pk_prefix)
    lo_body = enc(pk_prefix + start) if start is not None else body
    hi_body = enc(pk_prefix + end) if end is not None else None
    lo_past = start is not None and not start_inclusive      # lo = prefix_end(vp + lo_body)
    hi_past = hi_body is None or end_inclusive               # hi = prefix_end(vp + hi_body or body)
    if hi_body is None:
        hi_body = body
    pinned = pinned_vnode(serde, pk_prefix)
    targets = [pinned] if pinned is not None else list(vnodes)
    out = []
    for vnode in targets:
        vp = vnode.to_bytes(VNODE_BYTES, "big")
        lo = prefix_end(vp + lo_body) if lo_past else vp + lo_body
        hi = prefix_end(vp + hi_body) if hi_past else vp + hi_body
        if hi is None or lo < hi:
            out.append((vnode, lo, hi))
    return out


def check_limit(limit, table: str):
    """``limit`` if it is ``None`` or an int >= 0; :class:`SchemaError` otherwise."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0:
        raise SchemaError(f"table {table}: limit must be None or an int >= 0, got {limit!r}")
    return int(limit)


def merge_mem_over_storage(mem_items, store_items, reverse: bool):
    """Yield ``(key, value)`` of the live rows: MemTable records ``(key, (op, old, new))`` over
    stored pairs ``(key, value)``, both ordered by key (descending when ``reverse``)."""
    m = next(mem_items, None)
    s = next(store_items, None)
    while m is not None or s is not None:
        if s is None or (m is not None and ((m[0] > s[0]) if reverse else (m[0] < s[0]))):
            if m[1][0] != DELETE:
                yield m[0], m[1][2]
            m = next(mem_items, None)
        elif m is None or m[0] != s[0]:
            yield s
            s = next(store_items, None)
        else:   # same key: the MemTable wins
            if m[1][0] != DELETE:
                yield m[0], m[1][2]
            m = next(mem_items, None)
            s = next(store_items, None)


def merge_vnodes(streams: list, reverse: bool):
    """One stream of ``(key, value)`` in pk order from per-vnode streams in key order."""
    if len(streams) == 1:
        return streams[0]
    return _merge.merge_by_tail(streams, reverse, VNODE_BYTES)


def decoded_rows(serde, pairs):
    """Yield the rows of ``(key, value)`` pairs, decoding a batch of pairs per encoder call: 4
    pairs first, then 4 times more each batch up to ``BATCH``, so a reader that stops after a
    few rows (a probe) decodes few and a scan pays one call per ``BATCH`` rows. The pairs of a
    batch are read before its first row is yielded."""
    pairs = iter(pairs)
    size = FIRST_BATCH
    while True:
        batch = list(islice(pairs, size))
        if not batch:
            return
        keys, values = zip(*batch)
        yield from serde.decode_many(keys, values)
        if len(batch) < size:
            return
        size = min(size * 4, BATCH)


# --- Arrow record batches ---------------------------------------------------------------------

def check_batch_size(batch_size, table: str) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise SchemaError(f"table {table}: batch_size must be an int >= 1, got {batch_size!r}")
    return int(batch_size)


def column_indices(names, columns, table: str) -> list:
    """Schema positions of ``columns`` (names or indices; ``None``: every column)."""
    if columns is None:
        return list(range(len(names)))
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
        raise SchemaError(f"table {table}: columns must be a list of names or indices, got {columns!r}")
    out = []
    for c in columns:
        if isinstance(c, str):
            if c not in names:
                raise SchemaError(f"table {table} has no column {c!r} (columns: {list(names)})")
            out.append(names.index(c))
        elif isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c < len(names):
            out.append(int(c))
        else:
            raise SchemaError(f"a column is a name or an index in [0, {len(names)}), got {c!r}")
    return out


def batch_schema(names, types, idx) -> pa.Schema:
    return pa.schema([(names[i], arrow_type(types[i])) for i in idx])


def record_batches(rows, idx, types, schema: pa.Schema, batch_size: int):
    """Yield ``pyarrow.RecordBatch``es of at most ``batch_size`` of ``rows`` (tuples in schema
    order), with the columns ``idx`` typed by ``schema``."""
    rows = iter(rows)
    while True:
        chunk = list(islice(rows, batch_size))
        if not chunk:
            return
        if not idx:   # no column read (a count): a batch of len(chunk) rows and no column
            yield pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), len(chunk), [None],
                                                                         children=[]))
        else:
            arrays = [to_arrow([r[i] for r in chunk], types[i]) for i in idx]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)
        if len(chunk) < batch_size:
            return
