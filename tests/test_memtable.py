"""Ingest-batch checking and imm merging (native and twin) against plain Python models."""


import gc
import re
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import twins
from hummock import HummockStorage, _memtable_py, _twins
from hummock.key import new_epoch
from hummock.shared_buffer import KeyValueColumns
from hummock.errors import InvalidArgumentError
from hummock.key import encode_full_key, full_key_sort_key


def implementations():
    return twins.implementations(_memtable_py, "_memtable")


IMPLS = pytest.mark.parametrize("impl", implementations(), ids=lambda m: m.__name__)
small_keys = st.lists(st.sampled_from([b"", b"a", b"a\x00", b"ab", b"b", b"\xff"]), unique=True, max_size=6)


@IMPLS
@given(small_keys, st.data())
def test_check_batch_accepts_sorted_unique(impl, keys, data):
    pairs = [(k, data.draw(st.one_of(st.none(), st.binary(max_size=5)))) for k in sorted(keys)]
    got_keys, got_values, size = impl.check_batch(pairs)
    assert got_keys == [k for k, _ in pairs] and got_values == [v for _, v in pairs]
    assert size == sum(len(k) + len(v or b"") + _memtable_py.ENTRY_OVERHEAD for k, v in pairs)


@IMPLS
@given(st.lists(st.sampled_from([b"", b"a", b"a\x00", b"ab", b"b", b"\xff"]), max_size=6), st.data())
def test_check_columns_is_check_batch_of_the_pairs(impl, keys, data):
    """Same result, or the same error and message, as ``check_batch(zip(keys, values))``;
    new lists (the caller's are not kept)."""
    keys = [bytearray(k) if data.draw(st.booleans()) else k for k in keys]   # sorted or not
    values = [data.draw(st.one_of(st.none(), st.binary(max_size=3), st.just(memoryview(b"m")))) for _ in keys]
    try:
        expected = impl.check_batch(list(zip(keys, values)))
    except InvalidArgumentError as exc:
        with pytest.raises(InvalidArgumentError, match="^" + re.escape(str(exc)) + "$"):
            impl.check_columns(keys, values)
        return
    got = impl.check_columns(keys, values)
    assert got == expected and got[0] is not keys and got[1] is not values


@IMPLS
def test_check_columns_rejects_what_is_not_two_lists_of_one_length(impl):
    for keys, values, what in (([b"a"], [], "1 keys but 0 values"), ((b"a",), [b""], "must be lists"),
                               ([b"a"], None, "must be lists"), ([b"a", 5], [b"", b""], "key must be bytes")):
        with pytest.raises(InvalidArgumentError, match=what):
            impl.check_columns(keys, values)


def test_the_facade_checks_key_value_columns_as_the_pairs_they_hold():
    from hummock.shared_buffer import KeyValueColumns, check_batch
    batch = KeyValueColumns([b"a", b"b"], [b"1", None])
    assert list(batch) == [(b"a", b"1"), (b"b", None)] and len(batch) == 2
    assert check_batch(batch) == check_batch(list(batch))
    with pytest.raises(InvalidArgumentError, match="batch item 1: keys not sorted ascending"):
        check_batch(KeyValueColumns([b"b", b"a"], [b"", b""]))


@IMPLS
def test_check_batch_rejects(impl):
    for bad in ([(b"b", b""), (b"a", b"")], [(b"a", b""), (b"a", b"")], [(b"a",)], [("a", b"")],
                [(b"a", 5)], [5]):
        with pytest.raises(InvalidArgumentError):
            impl.check_batch(bad)
    assert impl.check_batch([(bytearray(b"a"), memoryview(b"v"))]) == ([b"a"], [b"v"], 2 + _memtable_py.ENTRY_OVERHEAD)


@IMPLS
@given(st.lists(small_keys, min_size=1, max_size=4))
def test_merge_runs_is_full_key_order(impl, key_sets):
    runs = [((i + 1) << 16, sorted(keys), [bytes([i])] * len(keys)) for i, keys in enumerate(key_sets)]
    full_keys, values = impl.merge_runs(b"\x00\x00\x00\x09", runs)
    expected = sorted(((encode_full_key(9, k, epoch), v) for epoch, ks, vs in runs for k, v in zip(ks, vs)),
                      key=lambda e: full_key_sort_key(e[0]))
    assert list(zip(full_keys, values)) == expected
    with pytest.raises(InvalidArgumentError):
        impl.merge_runs(b"\x00", runs)


@IMPLS
@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.randoms(use_true_random=False),
       st.booleans())
def test_merge_runs_of_disjoint_runs_in_any_order(impl, sizes, rnd, touching):
    """Sequential batches (disjoint key ranges) take the concatenating path; runs that share a
    boundary key (``touching``) must still come out epoch-descending for that key."""
    runs, start = [], 0
    for i, size in enumerate(sizes):
        keys = [b"%06d" % (start + k) for k in range(size)]
        start += size - (1 if touching and size else 0)
        runs.append(((i + 1) << 16, keys, [bytes([i])] * size))
    rnd.shuffle(runs)
    full_keys, values = impl.merge_runs(b"\x00\x00\x00\x09", runs)
    expected = sorted(((encode_full_key(9, k, epoch), v) for epoch, ks, vs in runs for k, v in zip(ks, vs)),
                      key=lambda e: full_key_sort_key(e[0]))
    assert list(zip(full_keys, values)) == expected


def test_native_checked_lists_are_not_traversed_by_the_cycle_collector():
    """The lists an imm keeps (check_batch / check_columns, native) are untracked: a full
    collection does not visit their entries. They still read back as they were, and the store
    still reads the imm they became."""
    if _twins.pure_python_forced():
        pytest.skip("HUMMOCK_PURE_PYTHON=1: the twin cannot untrack a list")
    native = implementations()[1]
    keys, values, _ = native.check_batch([(b"a", b"1"), (b"b", None)])
    assert not gc.is_tracked(keys) and not gc.is_tracked(values)
    assert (keys, values) == ([b"a", b"b"], [b"1", None])
    keys, values, _ = native.check_columns([b"a", bytearray(b"c")], [memoryview(b"x"), None])
    assert not gc.is_tracked(keys) and not gc.is_tracked(values)
    assert (keys, values) == ([b"a", b"c"], [b"x", None])
    with tempfile.TemporaryDirectory() as tmp, HummockStorage.open(tmp + "/db") as store:
        epoch = new_epoch()
        store.ingest_batch(3, KeyValueColumns([b"k1", b"k2"], [b"v1", b"v2"]), epoch)
        (imm,) = store._buffer.imms(3)
        assert not gc.is_tracked(imm.keys) and not gc.is_tracked(imm.values)
        gc.collect()
        assert store.get(3, b"k2", epoch) == b"v2"


@pytest.mark.parametrize("runs", [
    [(1 << 16, [b"a", "b", b"c"], [b"1", b"2", b"3"])],                      # disjoint: a bad key inside
    [(1 << 16, [b"a", bytearray(b"b")], [b"1", b"2"]), (2 << 16, [b"x"], [b"9"])],
    [(1 << 16, [b"a", 5, b"c"], [b"1", b"2", b"3"]), (2 << 16, [b"b"], [b"1", b"2"])],   # which error first
    [(1 << 16, [b"a", b"c"], [b"1", b"2"]), (2 << 16, [b"b", None, b"d"], [b"1", b"2", b"3"])],   # overlapping
    [(1 << 16, [b"a"], [b"1"]), (2 << 16, [b"b"], [])],
], ids=["inside", "disjoint-bytearray", "type-before-length", "overlapping", "length"])
def test_merge_runs_refuses_bad_runs_as_the_twin_does(runs):
    """Every implementation raises the twin's error (class and message) for the first bad run,
    wherever its bad key sits (the native merge checks the keys of sequential runs as it copies
    them), and a failed merge changes none of the runs."""
    outcomes = []
    for impl in implementations():
        copies = [(e, list(ks), list(vs)) for e, ks, vs in runs]
        with pytest.raises(InvalidArgumentError) as info:
            impl.merge_runs(b"\x00\x00\x00\x09", copies)
        assert copies == runs
        outcomes.append(str(info.value))
    assert len(set(outcomes)) == 1, outcomes


@IMPLS
def test_merge_runs_takes_tuples_and_leaves_the_lists_alone(impl):
    keys, values = [b"a", b"b"], [b"1", None]
    full_keys, out = impl.merge_runs(b"\x00\x00\x00\x09", [(1 << 16, tuple(keys), tuple(values))])
    assert full_keys == [encode_full_key(9, k, 1 << 16) for k in keys] and out == values
    full_keys, out = impl.merge_runs(b"\x00\x00\x00\x09", [(1 << 16, keys, values)])
    assert out == values and out is not values and keys == [b"a", b"b"]
