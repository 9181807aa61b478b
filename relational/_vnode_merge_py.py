"""Pure-Python twin of ``native/_vnode_merge.pyx``: merge per-vnode streams into pk order.

The reference for the native module: same name, results and exceptions.
``merge_by_tail(streams, reverse=False, skip=2)`` returns an iterator of the ``(key, value)``
pairs of every stream, ordered by ``key[skip:]`` (descending with ``reverse``); pairs with
equal ``key[skip:]`` come in stream order (the lower index first, in both directions). Each
stream must be ordered that way itself (the relational layer passes one stream per vnode, each
ordered by table key, so by the key after its 2-byte vnode). The pairs are the streams' own
objects. A stream that yields anything but a 2-tuple whose key is ``bytes`` raises
``TypeError``; exceptions of the streams propagate.

Callers: :mod:`relational.table_iter` only, through ``hummock._twins.load``.
"""

from __future__ import annotations

import heapq


def _bad_pair(index: int, pair) -> TypeError:
    return TypeError(f"merge_by_tail: stream {index} yielded {pair!r:.80}, not a (bytes key, value) pair")


def _tagged(stream, index: int, skip: int, sign: int):
    for pair in stream:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not bytes:
            raise _bad_pair(index, pair)
        yield pair[0][skip:], sign * index, pair


def merge_by_tail(streams, reverse=False, skip=2):
    """Merge ``streams`` by ``key[skip:]``; see the module docstring."""
    skip = int(skip)
    if skip < 0:
        raise ValueError(f"skip must be >= 0, got {skip}")
    reverse = bool(reverse)
    # the index breaks ties; negated for reverse so that the lower index still comes first
    sign = -1 if reverse else 1
    tagged = [_tagged(s, i, skip, sign) for i, s in enumerate(streams)]
    return (pair for _, _, pair in heapq.merge(*tagged, reverse=reverse))
