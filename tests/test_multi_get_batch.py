"""``multi_get`` answers each key as ``get`` does, whatever the batch looks like.

The native ``multi_get`` visits a batch's keys in ascending order, walks each sorted run of
SSTs forward once and reuses a block between keys that land in it (``FindCursor``); the pure
twin looks each key up alone. These tests build stores where that could go wrong -- tiny
blocks (256 bytes) so one key's versions span blocks, several L0 sub-levels, a compacted bottom level,
sealed-but-unsynced imms, synced-but-uncommitted staging SSTs, table watermarks -- and ask
batches with duplicates, absent keys, unsorted and sorted orders and old read epochs. Every
answer must equal the per-key ``get`` and a plain model (``KvModel``).
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hummock import HummockStorage, StorageOptions
from tests.kv_model import KvModel

E = 1 << 16
TABLE = 3
# keys of many lengths, some the prefix of others (b"" < b"a" < b"a\x00" < b"ab"): a batch is
# ordered by user key, not by user key || epoch suffix compared bytewise; the long ones share
# their first 8 bytes (the native sort's word) and differ after them, or end inside them
KEYS = sorted({b"", b"a", b"a\x00", b"ab", b"b", b"d\xff"} | {b"k%03d" % i for i in range(0, 60, 2)}
              | {b"k%02d" % i for i in range(0, 60, 7)}
              | {b"longkey", b"longkey\x00", b"longkey-", b"longkey-\x00", b"longkey-a", b"longkey-ab", b"longkey-b"})

# one step: (kind, payload)
#   ("put", [(key index, value or None)])  a batch in the current epoch
#   ("seal",) | ("sync",) | ("commit",)    the epoch's life cycle (each also starts a new epoch)
#   ("compact",)                           everything committed to the bottom level
steps = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(st.tuples(st.integers(0, len(KEYS) - 1),
                                                     st.one_of(st.none(), st.binary(min_size=0, max_size=200))),
                                           min_size=1, max_size=25)),
        st.tuples(st.sampled_from(["seal", "sync", "commit", "compact"])),
    ),
    min_size=1, max_size=30)

batches = st.lists(st.integers(0, len(KEYS) + 5), min_size=1, max_size=80)


def _key(i: int) -> bytes:
    return KEYS[i] if i < len(KEYS) else b"zz%d" % i       # absent keys above every key


def _build(path, script):
    store = HummockStorage.open(str(path), StorageOptions(
        block_size=256, restart_interval=2, compactor="none", target_sst_size=4096,   # runs of several SSTs
                                                               retention_seconds=3600))
    model = KvModel()
    epoch = E
    for step in script:
        kind = step[0]
        if kind == "put":
            pairs = {}
            for i, value in step[1]:
                pairs[KEYS[i]] = value          # a batch holds each key once
            ordered = sorted(pairs.items())
            store.ingest_batch(TABLE, ordered, epoch)
            model.ingest(TABLE, ordered, epoch)
        elif kind == "compact":
            store.compact_all()
        else:
            if kind == "seal":
                store.seal_epoch(epoch)
            elif kind == "sync":
                store.sync(epoch)
            else:
                store.checkpoint(epoch)
                model.commit(epoch)
            epoch += E
    return store, model, epoch


@settings(max_examples=60, deadline=None)
@given(script=steps, picks=batches, back=st.integers(0, 6), data=st.data())
def test_multi_get_equals_get_and_model(tmp_path_factory, script, picks, back, data):
    path = tmp_path_factory.mktemp("mg")
    store, model, epoch = _build(path, script)
    try:
        read = max(E, epoch - back * E)
        keys = [_key(i) for i in picks]
        expected = [model.get(TABLE, k, read) for k in keys]
        assert store.multi_get(TABLE, keys, read) == expected
        assert [store.get(TABLE, k, read) for k in keys] == expected
        in_order = sorted(keys)
        assert store.multi_get(TABLE, in_order, read) == [model.get(TABLE, k, read) for k in in_order]
        reverse = data.draw(st.booleans())
        if reverse:
            keys.reverse()
            assert store.multi_get(TABLE, keys, read) == [model.get(TABLE, k, read) for k in keys]
    finally:
        store.close()


def test_multi_get_of_versions_spanning_blocks(tmp_path):
    """A key with many versions fills several tiny blocks; a read of an old epoch finds its
    version in a later block, and the next key of the batch (in the block after) still reads
    right, in both orders."""
    store = HummockStorage.open(str(tmp_path / "s"), StorageOptions(block_size=256, restart_interval=1, retention_seconds=3600,
                                                                    compactor="none"))
    try:
        for n in range(1, 41):
            store.ingest_batch(TABLE, [(b"a", b"a%02d" % n), (b"b", b"b%02d" % n)] if n % 10 == 0
                               else [(b"a", b"a%02d" % n)], n * E)
        store.checkpoint(40 * E)
        store.compact_all()
        for read in (1, 5, 9, 10, 11, 25, 40):
            want_a = b"a%02d" % read
            want_b = b"b%02d" % (read // 10 * 10) if read >= 10 else None
            assert store.multi_get(TABLE, [b"a", b"b", b"c"], read * E) == [want_a, want_b, None]
            assert store.multi_get(TABLE, [b"c", b"b", b"a", b"a"], read * E) == [None, want_b, want_a, want_a]
    finally:
        store.close()


def test_multi_get_orders_keys_by_user_key_not_by_their_full_key_bytes(tmp_path):
    """``b""`` sorts before ``b"a"``, though ``b"" || suffix`` sorts after ``b"a" || suffix``
    bytewise (the inverted-epoch suffix starts with 0xff): a batch ordered by those bytes walked
    the blocks out of order and missed ``b""`` and ``b"a"`` (found by the Spark read test)."""
    store = HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none", target_sst_size=4096,
                                                                    block_size=256))
    try:
        keys = [b"", b"a", b"a\x00", b"ab", b"b"] + [b"k%03d" % i for i in range(40)]
        store.ingest_batch(TABLE, [(k, b"v" * 300 + k) for k in keys], E)
        store.checkpoint(E)
        for _ in range(2):
            expected = [b"v" * 300 + k for k in keys]
            assert store.multi_get(TABLE, keys, E) == expected
            assert store.multi_get(TABLE, keys[::-1], E) == expected[::-1]
            store.compact_all()
    finally:
        store.close()


def test_multi_get_large_batches_in_adversarial_orders(tmp_path):
    """The native batch sort (a quicksort on each key's 8 bytes after the batch's common prefix,
    with libc's sort past a depth limit) against orders built to hurt it: descending, organ
    pipe, sawtooth, many duplicates, keys that are prefixes of each other and end inside the
    common prefix's word -- each batch thousands of keys; every answer equals the model's."""
    import random
    store = HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none", target_sst_size=16384,
                                                                    block_size=1024))
    try:
        base = b"common-prefix-of-every-key/"
        present = [base + b"%06d" % i for i in range(0, 6000, 3)] + [base[:-1], base, base + b"\x00", base + b"\x00\x00"]
        store.ingest_batch(TABLE, sorted((k, b"v" + k) for k in present), E)
        store.checkpoint(E)
        live = set(present)
        universe = sorted(set(present) | {base + b"%06d" % i for i in range(6000)} | {base + b"\x00\x01", base[:5]})
        rng = random.Random(7)
        n = len(universe)
        orders = {
            "descending": universe[::-1],
            "organ pipe": universe[0::2] + universe[1::2][::-1],
            "sawtooth": [universe[(i * 97) % n] for i in range(n)],
            "duplicates": [rng.choice(universe[:40]) for _ in range(3000)],
            "shuffled": rng.sample(universe, n),
            "one key": [universe[5]] * 500,
        }
        for name, keys in orders.items():
            got = store.multi_get(TABLE, keys, E)
            assert got == [b"v" + k if k in live else None for k in keys], name
    finally:
        store.close()



def test_multi_get_takes_the_newest_version_across_an_overlapping_sub_level():
    """An overlapping sub-level's SSTs are searched newest max epoch first, but a bulk load may
    hold several epochs per SST: here SST A (max epoch +5) holds ``y`` at +1 and SST B (max +3)
    holds ``y`` at +3, so A is searched first and B's newer version must replace its hit (and
    B's tombstone of ``w`` A's value). Every batch order and the per-key ``get`` agree."""
    import uuid
    from hummock.key import encode_full_key
    from hummock.sstable.builder import SstableBuilder
    base = 2 * E
    with HummockStorage.open(f"memory://{uuid.uuid4().hex}", StorageOptions(compactor="none")) as db:
        db.ingest_batch(1, [(b"other", b"x")], E)
        db.checkpoint(E)
        ids = iter(db.reserve_sst_ids(2))
        ssts = {"A": [(b"w", 1, b"A-w"), (b"x", 5, b"A-x"), (b"y", 1, b"A-y")],
                "B": [(b"w", 3, None), (b"y", 3, b"B-y"), (b"z", 2, b"B-z")]}
        infos = []
        for rows in ssts.values():
            builder = SstableBuilder.to_store(db._store, next(ids))
            for key, offset, value in rows:
                builder.add(encode_full_key(TABLE, key, base + offset), value)
            infos.append(builder.finish())
        db.ingest_ssts(TABLE, infos, base)
        (sub,) = [s for s in db._version.l0 if TABLE in s.ssts[0].table_ids]
        assert sub.overlapping and len(sub.ssts) == 2
        keys = [b"y", b"x", b"w", b"z", b"v"]
        want = {b"y": b"B-y", b"x": b"A-x", b"w": None, b"z": b"B-z", b"v": None}
        for batch in (keys, sorted(keys), sorted(keys, reverse=True), keys + keys):
            assert db.multi_get(TABLE, batch, base) == [want[k] for k in batch]
            assert db.multi_get(TABLE, batch, E) == [None] * len(batch)     # before the load
            assert [db.get(TABLE, k, base) for k in batch] == [want[k] for k in batch]
