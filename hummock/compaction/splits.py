"""Key-range splits of a compaction task: how the Spark runner cuts one task into partitions.

A task's inputs are cut at *split points*: user keys taken from the first keys of the input
SSTs' blocks, chosen so that every split holds about the same number of input bytes (a block's
bytes count for the split its first key falls in). Split ``k`` covers the full keys
``[bound(p_k), bound(p_k+1))`` where ``bound(p) = p + 8 zero bytes`` is the newest possible
version of user key ``p`` (the inverted epoch 0), so every version of one user key lands in
exactly one split and the outputs of consecutive splits never overlap. The first split has no
lower bound and the last no upper bound: together the splits cover the whole key space.

Guarantees of :func:`plan_splits`: split points strictly increase and every one is above the
smallest input user key, so no split is empty of blocks; at most ``max_splits`` splits; each
split lists only the input SSTs whose key range meets it (runs keep their order).

Pure functions; callers: :mod:`hummock.compaction.spark` and tests.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

_EPOCH_LEN = 8
_NEWEST = b"\x00" * _EPOCH_LEN   # inverted epoch 0: the newest version of a user key sorts first


def bound(user_key: bytes) -> bytes:
    """The full key every version of ``user_key`` sorts at or after (and every smaller key before)."""
    return user_key + _NEWEST


@dataclass(frozen=True)
class Split:
    """One key range of a task: full-key bounds (``None``: open), the input runs restricted to the
    SSTs that meet the range, and the input bytes (of blocks) it was charged with."""

    index: int
    start: bytes | None
    end: bytes | None
    runs: tuple            # tuple of tuples of SstableInfo, empty runs dropped
    input_bytes: int

    @property
    def table_ids(self) -> frozenset:
        return frozenset(t for run in self.runs for info in run for t in info.table_ids)


def split_points(blocks, max_splits: int) -> list[bytes]:
    """Up to ``max_splits - 1`` user keys cutting ``blocks`` (``(user_key, bytes)`` pairs, any
    order) into parts of about equal bytes. Each point is the user key of some block, strictly
    above the smallest block key; points ascend."""
    ordered = sorted(blocks)
    total = sum(size for _, size in ordered)
    if max_splits <= 1 or not ordered or total <= 0:
        return []
    points: list[bytes] = []
    lowest = ordered[0][0]
    step = 1                 # the next threshold is step * total / max_splits
    before = 0               # bytes of the blocks before the current one
    for user_key, size in ordered:
        if before * max_splits >= step * total and user_key > (points[-1] if points else lowest):
            points.append(user_key)
            if len(points) == max_splits - 1:
                break
            while before * max_splits >= step * total:
                step += 1
        before += size
    return points


def plan_splits(runs, blocks_of, max_splits: int) -> list[Split]:
    """Cut the task's ``runs`` (tuples of ``SstableInfo``) into at most ``max_splits`` splits.
    ``blocks_of(info)`` returns ``(first_full_key, bytes)`` for each block of the SST."""
    blocks = []
    for run in runs:
        for info in run:
            blocks.extend((first_key[:-_EPOCH_LEN], size) for first_key, size in blocks_of(info))
    points = split_points(blocks, max_splits)
    lows = [None] + points
    highs = points + [None]
    charged = [0] * len(lows)
    for user_key, size in blocks:
        charged[bisect.bisect_right(points, user_key)] += size
    splits = []
    for index, (low, high) in enumerate(zip(lows, highs)):
        chosen = []
        for run in runs:
            meeting = tuple(info for info in run if _meets(info, low, high))
            if meeting:
                chosen.append(meeting)
        splits.append(Split(index, None if low is None else bound(low), None if high is None else bound(high),
                            tuple(chosen), charged[index]))
    return splits


def _meets(info, low: bytes | None, high: bytes | None) -> bool:
    """Whether the SST's user-key range meets ``[low, high)`` (user keys, ``None``: open)."""
    smallest, largest = info.smallest_key[:-_EPOCH_LEN], info.largest_key[:-_EPOCH_LEN]
    return (low is None or largest >= low) and (high is None or smallest < high)
