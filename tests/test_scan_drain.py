"""``UserScan.drain`` (native/_iterators.pyx), the block walk ``count_pairs`` / ``decode_columns``
take over a store scan: the rows, counts and bytes equal those of the same scan read as Python
pairs (``next_raw``'s rows), over random histories on many small blocks and several SSTs --
keys longer than the iterator's first key buffer, values whose lengths take multi-byte varints,
several versions per key side by side (compacted while snapshots pin them), deletes, a
truncation floor, end bounds inside a block -- read in chunks of random sizes, so the walk stops
at every kind of place; and scans of disjoint ranges decoded in two threads at once (the walk
runs without the GIL) give what they give one after the other."""

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch
from hummock.iterators import _impl as _iterators
from hummock.sstable.block import _impl as _blocks
from relational.scan_columns import _impl
from relational.types import DataType as T
from relational.value_encoding import encode_row

TABLE = 5
TYPES = [T.BIGINT, T.VARCHAR]
CODES = tuple(int(t.kind) for t in TYPES)
OPTIONS = StorageOptions(block_size=512, restart_interval=4, target_sst_size=4096, compression="none")


def key_of(k: int, width: int) -> bytes:
    return k.to_bytes(4, "big") + b"k" * width   # keys of one width order as their k


history = st.lists(   # epochs of (key, value or None = delete); each epoch checkpointed or not
    st.tuples(st.lists(st.tuples(st.integers(0, 120), st.one_of(st.none(), st.integers(-9, 9))), max_size=60),
              st.booleans()),
    min_size=1, max_size=5)


def _fill(store, epochs, width):
    committed, snapshots = [], {}
    for writes, checkpoint in epochs:
        epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
        pairs = [(key_of(k, width), None if v is None else encode_row((v, "v" * (k * (v + 10) % 300)), TYPES))
                 for k, v in sorted(dict(writes).items())]
        store.ingest_batch(TABLE, pairs, epoch)
        if checkpoint:
            store.checkpoint(epoch)
            committed.append(epoch)
            snapshots[epoch] = store.snapshot(epoch)   # pinned: compaction keeps what it reads
    return committed, snapshots


def _chunked(fn, scan, caps):
    """``fn(scan, cap)`` for each cap in turn (cycled) until a chunk comes back short."""
    out, i = [], 0
    while True:
        cap = caps[i % len(caps)]
        i += 1
        got = fn(scan, cap)
        out.append(got)
        n = got if isinstance(got, int) else got[0]
        if n < cap:
            return out


@settings(deadline=None, max_examples=30)
@given(history, st.data())
def test_drained_chunks_equal_the_pair_path(tmp_path_factory, epochs, data):
    width = data.draw(st.sampled_from([0, 70]))   # 70: longer than the iterator's first 64-byte key buffer
    with HummockStorage.open(str(tmp_path_factory.mktemp("db")), OPTIONS) as store:
        committed, snapshots = _fill(store, epochs, width)
        if not committed:
            return
        epoch = data.draw(st.sampled_from(committed))
        snapshot = snapshots[epoch]
        if data.draw(st.booleans()):   # versions side by side in one run (the pins keep them)
            store.compact_all()
            snapshot = store.snapshot(epoch)
        lo = data.draw(st.one_of(st.none(), st.integers(0, 120)))
        hi = data.draw(st.one_of(st.none(), st.integers(0, 121)))
        bounds = (None if lo is None else key_of(lo, width), None if hi is None else key_of(hi, width))
        reference = list(snapshot.iter(TABLE, *bounds))
        caps = data.draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
        counts = _chunked(lambda s, cap: _impl.count_pairs(s, cap), snapshot.iter(TABLE, *bounds), caps)
        assert sum(counts) == len(reference)
        for wanted in ((0,), (1, 0)):
            got = _chunked(lambda s, cap: _impl.decode_columns(s, cap, CODES, wanted),
                           snapshot.iter(TABLE, *bounds), caps)
            at = 0
            for n, buffers in got:
                assert (n, buffers) == _impl.decode_columns(iter(reference[at:at + n]), n, CODES, wanted)
                at += n
            assert at == len(reference)


def test_a_truncation_floor_hides_old_versions_in_the_walk(tmp_path):
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        epochs, pins = [], []
        for round_ in range(4):
            epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
            if round_ == 2:   # reads at this epoch on see no version written before
                store.truncate_table(TABLE, epoch)
            store.ingest_batch(TABLE, [(key_of(k, 0), encode_row((round_, "x" * k), TYPES))
                                       for k in range(round_, 200, 2 + round_)], epoch)
            store.checkpoint(epoch)
            epochs.append(epoch)
            pins.append(store.snapshot(epoch))   # compaction keeps what each reads
        store.compact_all()
        for epoch, pin in zip(epochs, pins):
            scan_of = lambda: pin.iter(TABLE, None, None)   # noqa: E731
            reference = list(scan_of())
            assert _impl.decode_columns(scan_of(), 1 << 20, CODES, (0, 1)) == \
                _impl.decode_columns(iter(reference), 1 << 20, CODES, (0, 1))
            assert _impl.count_pairs(scan_of(), 1 << 20) == len(reference)
            if epoch >= epochs[2]:   # the truncation hides rounds 0 and 1
                written = set().union(*(range(r, 200, 2 + r) for r in range(2, epochs.index(epoch) + 1)))
                assert [k for k, _ in reference] == [key_of(k, 0) for k in sorted(written)]
        del pins


def test_two_threads_decode_disjoint_ranges_as_one_thread_does(tmp_path):
    with HummockStorage.open(str(tmp_path), OPTIONS) as store:
        epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
        store.ingest_batch(TABLE, [(key_of(k, 0), encode_row((k, "y" * (k % 50)), TYPES)) for k in range(4000)], epoch)
        store.checkpoint(epoch)
        store.compact_all()
        snap = store.snapshot(epoch)
        ranges = [(None, key_of(2000, 0)), (key_of(2000, 0), None)]
        serial = [_impl.decode_columns(snap.iter(TABLE, lo, hi), 1 << 20, CODES, (1, 0)) for lo, hi in ranges]
        assert serial[0][0] == serial[1][0] == 2000
        for _ in range(5):
            results = [None, None]

            def run(i):
                lo, hi = ranges[i]
                results[i] = _impl.decode_columns(snap.iter(TABLE, lo, hi), 1 << 20, CODES, (1, 0))
            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert results == serial


class _MutatedSst:
    """An opened SST whose blocks come back with some bytes changed (after their checksum: what a
    writer bug, not the disk, would make), for the scan's own checks to meet."""

    def __init__(self, sst, flips: dict):
        self.meta, self.sst_id, self._block_cache = sst.meta, sst.sst_id, None
        self._blocks = [bytearray(sst.block(i).content) for i in range(len(sst.meta.blocks))]
        for (i, at), value in flips.items():
            blk = self._blocks[i % len(self._blocks)]
            blk[at % len(blk)] = value

    def block(self, i):
        return _blocks.Block(bytes(self._blocks[i]), f"mutated block {i}")


class _Reader:
    def __init__(self, sst):
        self.sst = sst


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:   # the class and message are what must agree
        return (type(exc).__name__, str(exc))


@settings(deadline=None, max_examples=60)
@given(st.dictionaries(st.tuples(st.integers(0, 50), st.integers(0, 4000)), st.integers(0, 255), min_size=1,
                       max_size=4),
       st.integers(1, 300), st.sampled_from([(0,), (1, 0)]))
def test_a_malformed_block_gives_the_iterators_rows_or_error(flips, cap, wanted):
    """Blocks with bytes changed behind their checksum: decoding through the block walk
    (``UserScan.drain``) returns what decoding the iterator's rows one by one returns, or raises
    the same error -- never anything else, never a crash."""
    it = _iterators
    from hummock.key import MAX_EPOCH, encode_full_key
    from hummock.object_store import MemoryObjectStore
    from hummock.sstable.builder import SstableBuilderOptions, build_sstable
    from hummock.sstable.reader import Sstable
    entries = [(encode_full_key(TABLE, key_of(k, 3 * (k % 30)), 10), encode_row((k, "t" * (k % 140)), TYPES))
               for k in range(400)]
    blob, info = build_sstable(entries, 1, SstableBuilderOptions(block_size=1024, restart_interval=4,
                                                                 compression="none"))
    store = MemoryObjectStore()
    store.upload(info.object_path, blob)
    sst = _MutatedSst(Sstable.open(store, info), flips)

    def scan():
        return it.UserScan([it.SstRun([_Reader(sst)], None, None)], MAX_EPOCH)
    walked = _outcome(lambda: _impl.decode_columns(scan(), cap, CODES, wanted))
    one_by_one = _outcome(lambda: _impl.decode_columns((p for p in scan()), cap, CODES, wanted))
    assert walked == one_by_one
