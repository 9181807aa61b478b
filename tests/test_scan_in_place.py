"""Counting and column decoding straight off a store scan (``UserScan.next_raw``, used by
``count_pairs`` / ``decode_columns`` in native/_scan_columns.pyx when handed the scan itself):
the rows, counts and bytes equal those of the same scan read as Python pairs, over random
histories of puts, overwrites and deletes spread over SSTs (checkpointed), the shared buffer
(sealed, not yet checkpointed) and several versions per key (compacted into one SST while a
snapshot pins the older ones), at every read epoch; and a scan
read partly in place, partly by ``next()`` yields each row once, in order."""

from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from hummock.key import new_epoch
from relational.scan_columns import _impl
from relational.types import DataType as T
from relational.value_encoding import encode_row

TABLE = 9
CODES = (int(T.BIGINT.kind), int(T.VARCHAR.kind))

history = st.lists(   # epochs of (key, value or None = delete); each epoch checkpointed or not
    st.tuples(st.lists(st.tuples(st.integers(0, 30), st.one_of(st.none(), st.integers(-5, 5))), max_size=12),
              st.booleans()),
    min_size=1, max_size=6)


@settings(deadline=None, max_examples=40)
@given(history, st.data())
def test_in_place_reads_equal_the_pair_path(tmp_path_factory, epochs, data):
    path = tmp_path_factory.mktemp("db")
    with HummockStorage.open(str(path)) as store:
        committed, snapshots = [], {}
        for writes, checkpoint in epochs:
            epoch = max(new_epoch(), store.max_committed_epoch + (1 << 16))
            pairs = [(k.to_bytes(4, "big"), None if v is None else encode_row((v, f"s{k}" * (k % 3)),
                                                                              [T.BIGINT, T.VARCHAR]))
                     for k, v in sorted(dict(writes).items())]
            store.ingest_batch(TABLE, pairs, epoch)
            if checkpoint:
                store.checkpoint(epoch)
                committed.append(epoch)
                snapshots[epoch] = store.snapshot(epoch)   # pinned: compaction keeps what it reads
        if not committed:
            return
        epoch = data.draw(st.sampled_from(committed))
        snapshot = snapshots[epoch]
        if data.draw(st.booleans()):   # versions of a key side by side in one SST (the pins keep them)
            store.compact_all()
            snapshot = store.snapshot(epoch)   # reads the compacted SSTs, newer versions too

        def _scan(store, epoch):
            return snapshot.iter(TABLE, None, None)
        reference = list(_scan(store, epoch))
        assert _impl.count_pairs(_scan(store, epoch), 1 << 20) == len(reference)
        for wanted in ((0,), (1, 0), ()):
            if not wanted:
                continue
            want = _impl.decode_columns(iter(reference), 1 << 20, CODES, wanted)
            assert _impl.decode_columns(_scan(store, epoch), 1 << 20, CODES, wanted) == want
        # in place, then next(), then in place again: every row once, in order
        scan = _scan(store, epoch)
        cut = data.draw(st.integers(0, len(reference)))
        first = _impl.decode_columns(scan, cut, CODES, (0,))
        middle = next(scan, None)
        rest = _impl.count_pairs(scan, 1 << 20)
        assert first == _impl.decode_columns(iter(reference[:cut]), cut, CODES, (0,))
        assert middle == (reference[cut] if cut < len(reference) else None)
        assert rest == max(0, len(reference) - cut - 1)
