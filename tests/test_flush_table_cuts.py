"""A flush gives a large table SSTs of its own and keeps small tables together (hummock/flush.py):
the compaction picker then sees each large table's own key span in L0."""

import tempfile

import pytest

from hummock import HummockStorage, StorageOptions
from hummock.flush import TABLE_OWN_SST_BYTES
from hummock.key import new_epoch


def flushed(batches: dict) -> list:
    """The table ids of each SST one checkpoint of ``batches`` ({table: rows}) writes."""
    with tempfile.TemporaryDirectory() as tmp, \
            HummockStorage.open(tmp + "/db", StorageOptions(compactor="none")) as store:
        epoch = new_epoch()
        for table_id, rows in batches.items():
            store.ingest_batch(table_id, rows, epoch)
        store.checkpoint(epoch)
        infos = sorted(store.version().all_ssts(), key=lambda info: info.smallest_key)
        for table_id, rows in batches.items():   # every row is there, whatever the cuts
            assert list(store.iter(table_id, epoch)) == sorted(rows)
        return [info.table_ids for info in infos]


def rows(n: int, width: int = 100) -> list:
    return [(b"k%07d" % i, b"v" * width) for i in range(n)]


LARGE = TABLE_OWN_SST_BYTES // 100 + 1000   # rows of 100-byte values: above the threshold


@pytest.mark.parametrize("order", ["large_first", "large_last", "large_between"])
def test_a_large_table_gets_ssts_of_its_own(order):
    small = rows(20)
    batches = {"large_first": {1: rows(LARGE), 2: small, 3: small},
               "large_last": {1: small, 2: small, 3: rows(LARGE)},
               "large_between": {1: small, 2: rows(LARGE), 3: small}}[order]
    cuts = flushed(batches)
    large = next(t for t, r in batches.items() if len(r) == LARGE)
    assert all(ids == (large,) for ids in cuts if large in ids), cuts
    assert len([ids for ids in cuts if large not in ids]) == (1 if order != "large_between" else 2), cuts


def test_small_tables_share_one_sst():
    assert flushed({t: rows(30) for t in range(1, 40)}) == [tuple(range(1, 40))]


def test_two_large_tables_flushed_together_never_share_an_sst():
    cuts = flushed({5: rows(LARGE), 6: rows(LARGE)})
    assert {ids for ids in cuts} == {(5,), (6,)}
