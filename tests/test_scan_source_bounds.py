"""A scan opens only the SSTs that can hold keys of its range: an SST that starts at or after the
scan's end -- the end bound, or the table's end for a scan without one -- is never opened, so
damage there cannot fail the scan. Both twins choose the same SSTs (both modes run this file).

Before: a scan without an end bound (``iter(t)``, ``iter(t, start=...)``, ``scan_prefixes(t,
[b""])``) chose every SST of the run from its start on, the next tables' included, and opened
the first of them (the pure twin's ``scan_prefixes`` too): a damaged SST of another table failed
the scan.
"""

from __future__ import annotations

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.errors import CorruptionError

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", block_size=256, target_sst_size=4096, vacuum_min_age_s=0,
                         retention_seconds=3600)
KEYS = [b"k%05d" % i for i in range(400)]


def _damage(path, info) -> None:
    sst = path / "sst" / f"{info.sst_id:020d}.sst"
    data = bytearray(sst.read_bytes())
    data[-1] ^= 0xFF     # the footer's magic
    data[10] ^= 0xFF     # and the first block
    sst.write_bytes(bytes(data))


@pytest.fixture
def two_tables(tmp_path):
    """Tables 1 and 2 compacted into one sorted run of several SSTs each; the SSTs by table."""
    path = tmp_path / "db"
    with HummockStorage.open(str(path), OPTIONS) as store:
        for table_id in (1, 2):
            store.ingest_batch(table_id, [(k, b"v" * 20) for k in KEYS], E)
        store.checkpoint(E)
        store.compact_all()
        ssts = sorted(store.version().all_ssts(), key=lambda i: i.smallest_key)
    by_table = {t: [s for s in ssts if s.table_ids == (t,)] for t in (1, 2)}
    assert len(by_table[1]) >= 2 and len(by_table[2]) >= 1
    assert len(ssts) == len(by_table[1]) + len(by_table[2])
    return path, by_table


def test_scans_of_a_table_never_open_the_next_tables_sst(two_tables):
    path, by_table = two_tables
    _damage(path, by_table[2][0])
    last_start = by_table[1][-1].smallest_key[4:-8]
    tail = KEYS[KEYS.index(last_start):]
    expected = [(k, b"v" * 20) for k in KEYS]
    with HummockStorage.open(str(path), OPTIONS) as store:
        assert list(store.iter(1, E)) == expected
        assert list(store.iter(1, E, reverse=True)) == expected[::-1]
        assert [k for k, _ in store.iter(1, E, last_start)] == tail
        assert [k for k, _ in store.iter(1, E, prefix=b"k")] == KEYS
        keys, values, ends = store.scan_prefixes(1, E, [b"", last_start[:5]])
        assert ends[0] == len(KEYS) and keys[:ends[0]] == KEYS
        with pytest.raises(CorruptionError):   # the damage is real: a read of table 2 finds it
            list(store.iter(2, E))


def test_a_range_scan_ending_before_a_damaged_sst_succeeds(two_tables):
    path, by_table = two_tables
    first, second = by_table[1][0], by_table[1][1]
    _damage(path, second)
    last = first.largest_key[4:-8]
    expected = [k for k in KEYS if k <= last]
    with HummockStorage.open(str(path), OPTIONS) as store:
        for end in (last + b"\x00", second.smallest_key[4:-8]):
            assert [k for k, _ in store.iter(1, E, KEYS[0], end)] == expected
            assert [k for k, _ in store.iter(1, E, None, end, reverse=True)] == expected[::-1]
        keys, _, ends = store.scan_prefixes(1, E, [last])
        assert keys == [last]
        with pytest.raises(CorruptionError):
            list(store.iter(1, E, second.smallest_key[4:-8]))


# --- within an SST: a block holding no key of the range is never read --------------------------

def _sst_with_damaged_block(damaged: int):
    """An SST of 300 keys in many blocks with block ``damaged`` flipped (its checksum fails),
    opened; and its entries."""
    from hummock.key import encode_full_key
    from hummock.object_store import MemoryObjectStore
    from hummock.sstable.builder import SstableBuilderOptions, build_sstable
    from hummock.sstable.meta import sst_object_path
    from hummock.sstable.reader import Sstable
    from hummock.value import encode_value

    entries = [(encode_full_key(1, b"k%05d" % i, 5), b"v" * 30) for i in range(300)]
    data, _ = build_sstable(entries, 1, SstableBuilderOptions(block_size=256, restart_interval=4))
    store = MemoryObjectStore()
    store.upload(sst_object_path(1), data)
    blocks = Sstable.open(store, 1).meta.blocks
    assert len(blocks) > 6
    damaged_data = bytearray(data)
    damaged_data[blocks[damaged].offset + 3] ^= 0xFF
    store.upload(sst_object_path(1), bytes(damaged_data))
    sst = Sstable.open(store, 1)
    return sst, [(k, encode_value(v)) for k, v in entries]


def _scan_both_ways(sst, start, end):
    """What ``Sstable.scan`` gives, and what a UserScan over the SST gives (the native twin walks
    the SST block by block in C), forward and backward."""
    from hummock import iterators
    from hummock.key import MAX_EPOCH

    class Reader:
        pass
    reader = Reader()
    reader.sst = sst
    forward = list(sst.scan(start, end))
    backward = list(sst.scan(start, end, reverse=True))
    merged = list(iterators.UserScan([iterators.SstRun([reader], start, end)], MAX_EPOCH))
    merged_back = list(iterators.UserScan([iterators.SstRun([reader], start, end)], MAX_EPOCH, True))
    return forward, backward, merged, merged_back


def test_a_range_ending_at_a_damaged_block_never_reads_it():
    sst, entries = _sst_with_damaged_block(4)
    first_keys = sst.meta.first_keys
    end = first_keys[4]                       # the range ends where the damaged block starts
    expected = [e for e in entries if e[0] < end]
    forward, backward, merged, merged_back = _scan_both_ways(sst, None, end)
    assert forward == expected and backward == expected[::-1]
    assert [k for k, _ in merged] == [k[4:-8] for k, _ in expected]
    assert merged_back == merged[::-1]
    with pytest.raises(CorruptionError):      # the block is damaged indeed
        list(sst.scan(None, first_keys[5]))


def test_a_range_starting_after_a_damaged_block_never_reads_it():
    sst, entries = _sst_with_damaged_block(2)
    first_keys = sst.meta.first_keys
    start = first_keys[3]                     # the range starts where the block after it starts
    expected = [e for e in entries if e[0] >= start]
    forward, backward, merged, merged_back = _scan_both_ways(sst, start, None)
    assert forward == expected and backward == expected[::-1]
    assert [k for k, _ in merged] == [k[4:-8] for k, _ in expected]
    assert merged_back == merged[::-1]
    with pytest.raises(CorruptionError):
        list(sst.scan(first_keys[2], None, reverse=True))
