"""Block-cache refill after a compaction: the outputs' blocks take the place of the inputs' warm ones.

A compaction replaces its input SSTs by new ones, so every block the reads had warmed in the
block cache is dead (its SST left the version) and the same rows now live in blocks no read has
loaded: the next probe of each of them reads, checksums and decompresses a 64 KiB block for one
row (~50 us). A join whose state was rewritten by one L0 -> base merge took ~23k such misses in
the following 500 chunks (docs/performance.md). RisingWave refills its cache after compaction for
the same reason; this is the same idea, kept small:

1. drop the inputs' blocks from the block cache (``erase_if``), remembering which were cached
   and how many bytes they held;
2. their key ranges (each block's first user key up to the next block's, from the inputs' block
   metas, normally in the meta cache) are the *warm* ranges;
3. load the output blocks whose ranges meet a warm range, in key order, until they hold as many
   bytes as the dropped ones did (the space the inputs freed; the cache evicts as usual).

Nothing warm, nothing loaded: a compaction of data no read touched (a bulk load) costs no I/O.
Best effort: an SST or meta that cannot be read (vacuum removed an input already, a damaged
object) ends the refill quietly -- a later read reports any damage as it would anyway; the
compaction is applied either way.

Callers: :class:`~hummock.compaction.host.EngineHost` only (after a task is applied).
"""

from __future__ import annotations

import bisect
import logging

from hummock.errors import HummockError

log = logging.getLogger(__name__)

_EPOCH_LEN = 8


def _block_ranges(sst, info):
    """``(first user key, next block's first user key or the SST's last user key)`` per block."""
    blocks = sst.meta.blocks
    last = info.largest_key[:-_EPOCH_LEN]
    return [(b.first_key[:-_EPOCH_LEN], blocks[i + 1].first_key[:-_EPOCH_LEN] if i + 1 < len(blocks) else last)
            for i, b in enumerate(blocks)]


def _merged(ranges: list) -> tuple[list, list]:
    """Sorted, merged closed ranges as two lists (starts, ends)."""
    starts, ends = [], []
    for lo, hi in sorted(ranges):
        if starts and lo <= ends[-1]:
            if hi > ends[-1]:
                ends[-1] = hi
        else:
            starts.append(lo)
            ends.append(hi)
    return starts, ends


def _meets(starts: list, ends: list, lo: bytes, hi: bytes) -> bool:
    i = bisect.bisect_right(starts, hi) - 1     # the last warm range starting at or below hi
    return i >= 0 and ends[i] >= lo


def refill_after_compaction(block_cache, open_sst, inputs, outputs) -> int:
    """Steps 1-3 of the module docstring for a task that replaced ``inputs`` (SstableInfos) by
    ``outputs``; ``open_sst(info)`` opens an SST through the store's caches. Returns the number
    of output blocks loaded."""
    if block_cache is None or not outputs:
        return 0
    by_id = {info.sst_id: info for info in inputs}
    dropped = []

    def input_block(key) -> bool:
        if type(key) is tuple and len(key) == 2 and key[0] in by_id:
            dropped.append(key)
            return True
        return False

    before = block_cache.used
    block_cache.erase_if(input_block)
    budget = before - block_cache.used
    if not dropped or budget <= 0:
        return 0
    loaded = 0
    try:
        warm = []
        opened = {}
        for sst_id, index in dropped:
            if sst_id not in opened:
                opened[sst_id] = _block_ranges(open_sst(by_id[sst_id]), by_id[sst_id])
            ranges = opened[sst_id]
            if 0 <= index < len(ranges):
                warm.append(ranges[index])
        starts, ends = _merged(warm)
        for info in sorted(outputs, key=lambda i: i.smallest_key):
            sst = open_sst(info)
            for index, (lo, hi) in enumerate(_block_ranges(sst, info)):
                if not _meets(starts, ends, lo, hi):
                    continue
                budget -= len(sst.block(index))    # loads it into the block cache
                loaded += 1
                if budget <= 0:
                    return loaded
    except (HummockError, OSError) as exc:
        log.debug("block cache refill after compaction stopped: %s", exc)
    return loaded
