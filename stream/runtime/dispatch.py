"""Dispatchers: how an actor's output reaches its downstream actors' channels.

- :class:`SimpleDispatcher`: everything to one channel.
- :class:`BroadcastDispatcher`: everything to every channel (MV on MV fan-out).
- :class:`HashDispatcher`: each row to the channel that owns the vnode of its distribution key
  (``relational.vnode.compute_vnodes``: the same hash the state tables use, so a downstream
  actor receives exactly the rows of the vnodes its state tables own, ``vnode_bitmaps``).
  An update pair whose two rows go to different channels (the key changed) becomes a DELETE
  on one and an INSERT on the other, so no channel ever gets half a pair. Each output gets the
  chunk with a visibility mask (compacted when fewer than half its rows remain).
Barriers and watermarks go to every channel of every dispatcher, in order with the data.

``vnode_mapping(n)`` splits the 256 vnodes into ``n`` contiguous ranges (RisingWave's even
split); ``vnode_bitmaps(n)`` are the same ranges as :class:`~relational.vnode.Bitmap`\\ s.
:func:`split_by_vnode` is the per-chunk work as a plain function.

Callers: :mod:`stream.runtime.runtime`.
"""

from __future__ import annotations

import numpy as np

from relational.vnode import VNODE_COUNT, Bitmap, compute_vnodes
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, StreamChunk


def vnode_mapping(n: int) -> np.ndarray:
    """Output index of each vnode: ``n`` contiguous, nearly equal ranges."""
    return (np.arange(VNODE_COUNT) * n // VNODE_COUNT).astype(np.int64)


def vnode_bitmaps(n: int) -> list:
    mapping = vnode_mapping(n)
    return [Bitmap(np.flatnonzero(mapping == i).tolist()) for i in range(n)]


def split_by_vnode(chunk: StreamChunk, key_indices, mapping: np.ndarray, n: int) -> list:
    """One chunk (or None) per output: the rows whose key's vnode maps to it (module docstring)."""
    types = [chunk.schema.types[k] for k in key_indices]
    vnodes = compute_vnodes([chunk.columns[k] for k in key_indices], types, len(chunk))
    target = mapping[vnodes]
    ops = chunk.ops
    ud = np.flatnonzero(ops[:-1] == UPDATE_DELETE)
    if len(ud):
        moved = target[ud] != target[ud + 1]
        if moved.any():
            ops = ops.copy()
            ops[ud[moved]] = DELETE
            ops[ud[moved] + 1] = INSERT
    vis = chunk.visible_mask()
    out = []
    for i in range(n):
        mask = vis & (target == i)
        count = int(mask.sum())
        if not count:
            out.append(None)
            continue
        part = StreamChunk(ops, chunk.columns, chunk.schema, mask)
        out.append(part.compact() if count * 2 < len(chunk) else part)
    return out


class Dispatcher:
    """Sends an actor's messages to channels. ``channels``: the outputs."""

    def __init__(self, channels):
        self.channels = list(channels)

    async def dispatch(self, msg) -> None:
        for channel in self.channels:
            await channel.send(msg)

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()

    def close_nowait(self) -> None:
        for channel in self.channels:
            channel.close_nowait()


class SimpleDispatcher(Dispatcher):
    def __init__(self, channel):
        super().__init__([channel])


class BroadcastDispatcher(Dispatcher):
    pass


class HashDispatcher(Dispatcher):
    """Rows by the vnode of ``key_indices`` (module docstring); ``mapping``: output per vnode."""

    def __init__(self, channels, key_indices, mapping: np.ndarray | None = None):
        super().__init__(channels)
        self.key_indices = list(key_indices)
        self.mapping = vnode_mapping(len(self.channels)) if mapping is None else np.asarray(mapping)

    async def dispatch(self, msg) -> None:
        if type(msg) is not StreamChunk:
            return await super().dispatch(msg)
        parts = split_by_vnode(msg, self.key_indices, self.mapping, len(self.channels))
        for channel, part in zip(self.channels, parts):
            if part is not None:
                await channel.send(part)
