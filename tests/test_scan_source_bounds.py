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
