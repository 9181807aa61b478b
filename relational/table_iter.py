"""Ordered reads shared by the state and storage tables: key ranges, merges, row batches.

Job: turn "rows of these vnodes with this pk prefix, between these bounds" into table-key
ranges (one per vnode, since every key starts with its vnode), merge the MemTable over storage
within one range, merge the per-vnode streams into one pk-ordered stream, and decode pairs into
rows in batches (one encoder call per batch).

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

from hummock import _twins
from hummock.key import prefix_end
from relational import memcomparable
from relational.errors import RowError
from relational.mem_table import DELETE
from relational.vnode import VNODE_BYTES

_merge = _twins.load("_vnode_merge", "relational._vnode_merge_py")

BATCH = 256


def as_values(values, what: str) -> tuple:
    """``values`` (a tuple, list or other iterable of column values) as a tuple; a str, bytes,
    ``None`` or a scalar raises :class:`RowError` naming ``what`` it should have been."""
    if type(values) is tuple:
        return values
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Iterable):
        raise RowError(f"a {what} is a tuple of values in pk order, got {type(values).__name__} {values!r:.200}")
    return tuple(values)


def pk_ranges(serde, vnodes, pk_prefix=(), start=None, end=None):
    """``[(vnode, lo, hi)]``: the table-key ranges holding the rows with ``pk_prefix`` and, on
    the pk columns after it, ``start <= rest < end`` (partial tuples compare as prefixes; the
    order is the pk order). ``hi`` may be ``None`` (unbounded). When the prefix covers the
    distribution key only its vnode is searched; ``vnodes`` (a Bitmap) limits the rest."""
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
    lo_body = enc(pk_prefix + start) if start else body
    hi_body = enc(pk_prefix + end) if end is not None else None
    if serde.dist_in_pk and all(i < len(pk_prefix) for i in serde.dist_in_pk):
        targets = [serde.vnode_of_pk(pk_prefix + (None,) * (width - len(pk_prefix)))]
    elif not serde.dist_in_pk:
        targets = [0]
    else:
        targets = list(vnodes)
    out = []
    for vnode in targets:
        vp = vnode.to_bytes(VNODE_BYTES, "big")
        lo = vp + lo_body
        hi = vp + hi_body if hi_body is not None else prefix_end(vp + body)
        if hi is None or lo < hi:
            out.append((vnode, lo, hi))
    return out


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
    """Yield the rows of ``(key, value)`` pairs, decoding ``BATCH`` pairs per encoder call."""
    pairs = iter(pairs)
    while True:
        batch = list(islice(pairs, BATCH))
        if not batch:
            return
        keys, values = zip(*batch)
        yield from serde.decode_many(keys, values)
        if len(batch) < BATCH:
            return
