"""``scan_prefixes``: a batch of prefixes read in one call gives, for each prefix, exactly what
``iter(prefix=p)`` gives and what a model of versions says -- whatever mix of sources holds the
keys (unsynced imms, L0 sub-levels, compacted levels), at the newest epoch and at older ones,
with watermarks, truncations and prefix filters, in any prefix order (duplicates, prefixes of
one another, ``b""``, all-0xFF prefixes).

The native read path reads a batch in its own way (native/_prefix_scan.pxi: prefixes sorted,
each source walked once, a prefix found in one SST read without a merge); the twin scans each
prefix in turn. Both modes run this file.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage, StorageOptions, _twins
from hummock.errors import CorruptionError, InvalidArgumentError

E = 1 << 16
OPTIONS = StorageOptions(compactor="none", block_size=256, target_sst_size=4096, vacuum_min_age_s=0, retention_seconds=3600)
VNODES = (b"\x00\x00", b"\x00\x01", b"\xff\xff")
PARTS = (b"\x00", b"\x01", b"\x7f", b"\xff")


def make_key(rng: random.Random) -> bytes:
    """vnode (2 bytes) || 1-3 parts: keys share prefixes often, so prefixes hold several keys."""
    return rng.choice(VNODES) + b"".join(rng.choice(PARTS) for _ in range(rng.randint(1, 3)))


def make_prefix(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.05:
        return b""
    if roll < 0.1:
        return b"\xff" * rng.randint(1, 4)
    return make_key(rng)[:rng.randint(1, 5)]


class Model:
    """Every version written: key -> [(epoch, value or None)]; watermarks and truncations as
    the store applies them to reads at epochs >= theirs."""

    def __init__(self):
        self.versions: dict = {}
        self.marks: list = []        # (epoch, vnode, bound): hide keys of vnode whose rest < bound
        self.truncations: list = []  # (epoch, versions written up to that call are hidden)

    def write(self, epoch, pairs):
        for k, v in pairs:
            self.versions.setdefault(k, []).append((epoch, v, len(self.truncations)))

    def read(self, epoch, prefix):
        out = []
        cut = max((n + 1 for n, (e, _) in enumerate(self.truncations) if e <= epoch), default=0)
        for k in sorted(self.versions):
            if not k.startswith(prefix):
                continue
            seen = [(e, v) for e, v, gen in self.versions[k] if e <= epoch and gen >= cut]
            if not seen:
                continue
            _, v = max(reversed(seen), key=lambda ev: ev[0])   # the last write of the newest epoch
            if v is None or any(e <= epoch and k[:2] == vn and k[2:] < bound for e, vn, bound in self.marks):
                continue
            out.append((k, v))
        return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), declared=st.sampled_from([None, 2, 3]),
       plan=st.lists(st.sampled_from(["write", "write", "write", "checkpoint", "checkpoint", "compact",
                                      "watermark", "truncate"]), min_size=3, max_size=14))
def test_batched_prefix_scans_match_iter_and_the_model(seed, declared, plan):
    rng = random.Random(seed)
    model = Model()   # (prefix_len 2 is the vnode: a declared prefix shorter than many keys)
    with HummockStorage.open("memory://", OPTIONS) as store:
        if declared is not None:
            store.set_table_options(1, prefix_len=declared)
        epoch, committed = E, 0
        for step in plan:
            if step == "write":
                pairs = {make_key(rng): (None if rng.random() < 0.25 else rng.randbytes(rng.randint(0, 3)))
                         for _ in range(rng.choice((8, 40, 200)))}   # imms of 64+ keys get a prefix index
                store.ingest_batch(1, sorted(pairs.items()), epoch)
                model.write(epoch, sorted(pairs.items()))
                store.ingest_batch(2, [(b"\x00\x00\x00", b"other")], epoch)   # a neighbouring table
            elif step == "checkpoint":
                store.checkpoint(epoch)
                committed = epoch
                epoch += E
            elif step == "compact":
                store.compact_all()
            elif step == "watermark":
                vnode, bound = rng.choice(VNODES), rng.choice(PARTS)
                store.update_table_watermarks(1, epoch, {int.from_bytes(vnode, "big"): bound})
                model.marks.append((epoch, vnode, bound))
            else:
                store.truncate_table(1, epoch)
                model.truncations.append((epoch, None))
        prefixes = [make_prefix(rng) for _ in range(rng.randint(1, 60))]
        prefixes += rng.sample(prefixes, min(3, len(prefixes)))   # duplicates, out of order
        reads = {epoch, committed} if committed else {epoch}
        if committed > E:
            reads.add(committed - E)   # an older epoch: newer versions in the same SSTs are skipped
        for read in sorted(reads):
            keys, values, ends = store.scan_prefixes(1, read, prefixes)
            begin = 0
            for prefix, end in zip(prefixes, ends):
                got = list(zip(keys[begin:end], values[begin:end]))
                assert got == list(store.iter(1, read, prefix=prefix)), (prefix, read)
                assert got == model.read(read, prefix), (prefix, read)
                begin = end
            assert ends[-1] == len(keys) == len(values)


def test_a_prefix_spanning_blocks_and_versions_in_one_sst():
    """One SST (the single-source path) holding many versions of many keys under one prefix:
    the read crosses blocks and keeps the newest version <= the read epoch of each key."""
    with HummockStorage.open("memory://", OPTIONS.replace(target_sst_size=1 << 20)) as store:
        keys = [b"\x00\x01" + b"k%04d" % i for i in range(300)]
        for n in range(1, 5):
            store.ingest_batch(1, [(k, None if (i + n) % 7 == 0 else b"v%d" % n) for i, k in enumerate(keys)], n * E)
        store.checkpoint(4 * E)
        assert len(store.version().sst_ids()) == 1
        for read in (E, 2 * E, 4 * E):
            got = store.scan_prefixes(1, read, [b"\x00\x01k", b"\x00\x01k01", b"\x00\x02", b"\x00\x01"])
            for prefix, (start, end) in zip([b"\x00\x01k", b"\x00\x01k01", b"\x00\x02", b"\x00\x01"],
                                            zip([0] + got[2][:-1], got[2])):
                assert list(zip(got[0][start:end], got[1][start:end])) == list(store.iter(1, read, prefix=prefix))
            n = read // E
            assert got[2][0] == sum((i + n) % 7 != 0 for i in range(300))


@pytest.mark.skipif(_twins.pure_python_forced(),
                    reason="HUMMOCK_PURE_PYTHON=1: ImmPrefixIndex belongs to the native read path only")
@given(st.lists(st.binary(max_size=5), max_size=300), st.integers(1, 4))
def test_imm_prefix_index_holds_each_distinct_prefix_once(keys, n):
    """One slot per distinct n-byte prefix of the keys long enough to have one (what the scan
    looks up); keys of other lengths and absent prefixes are found through the scan's answers
    above."""
    from native._readpath import ImmPrefixIndex
    keys = sorted(set(keys))
    index = ImmPrefixIndex(keys, n)
    assert index.prefix_count == len({k[:n] for k in keys if len(k) >= n})
    with pytest.raises(InvalidArgumentError):
        ImmPrefixIndex([b"a", "b"], 1)
    with pytest.raises(InvalidArgumentError):
        ImmPrefixIndex(keys, 0)


def test_a_damaged_block_raises_corruption_from_a_batched_scan(tmp_path):
    """A flipped byte in an SST's data block: the batch's read of that block raises
    ``CorruptionError`` (its checksum), in both modes -- never a wrong answer or a crash; the
    prefixes whose blocks are intact still read (one prefix at a time)."""
    path = str(tmp_path / "db")
    keys = [b"\x00\x01" + b"k%05d" % i for i in range(2000)]
    with HummockStorage.open(path, OPTIONS.replace(block_size=1024, target_sst_size=1 << 20)) as store:
        store.set_table_options(1, prefix_len=4)
        store.ingest_batch(1, [(k, b"value-%d" % i) for i, k in enumerate(keys)], E)
        store.checkpoint(E)
        (info,) = store.version().all_ssts()
    sst = tmp_path / "db" / "sst" / f"{info.sst_id:020d}.sst"
    data = bytearray(sst.read_bytes())
    data[100] ^= 0xFF   # inside the first data block (a block is ~1 KiB; the meta sits at the end)
    sst.write_bytes(bytes(data))
    with HummockStorage.open(path, OPTIONS) as store:
        with pytest.raises(CorruptionError):
            store.scan_prefixes(1, E, [b"\x00\x01k0", b"\x00\x01k00000"[:7], b"\x00\x01k01"])
        keys_read, _, ends = store.scan_prefixes(1, E, [b"\x00\x01k019"])
        assert keys_read == [k for k in keys if k.startswith(b"\x00\x01k019")] and ends == [100]
