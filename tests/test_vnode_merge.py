"""The k-way merge of per-vnode streams (native/_vnode_merge.pyx and its twin).

Both implementations must give, for any sorted streams, the pairs ordered by ``key[skip:]`` with
ties in stream order (both directions), return the streams' own pair objects, read lazily, and
raise the same errors for bad input.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import relational._vnode_merge_py as merge_py
from twins import implementations

IMPLS = implementations(merge_py, "_vnode_merge")

tails = st.binary(max_size=4)
vnode_streams = st.lists(st.lists(tails, max_size=12, unique=True), max_size=9)


def _streams(tail_lists, reverse, skip=2):
    """One stream per list: keys ``vnode u16be || tail``, sorted like a vnode's key range."""
    out = []
    for v, tails_ in enumerate(tail_lists):
        keys = sorted((v.to_bytes(skip, "big") + t for t in tails_), reverse=reverse)
        out.append([(k, b"v%d" % v) for k in keys])
    return out


def _expected(streams, reverse, skip=2):
    tagged = [(pair[0][skip:], i, pair) for i, s in enumerate(streams) for pair in s]
    if reverse:   # descending tails, ties by ascending stream index
        tagged.sort(key=lambda t: t[1])
        tagged.sort(key=lambda t: t[0], reverse=True)
    else:
        tagged.sort(key=lambda t: (t[0], t[1]))
    return [pair for _, _, pair in tagged]


@pytest.mark.parametrize("impl", IMPLS)
@given(tail_lists=vnode_streams, reverse=st.booleans())
def test_merge_orders_by_tail_with_ties_in_stream_order(impl, tail_lists, reverse):
    streams = _streams(tail_lists, reverse)
    got = list(impl.merge_by_tail([iter(s) for s in streams], reverse, 2))
    assert got == _expected(streams, reverse)
    flat = {id(p) for s in streams for p in s}
    assert all(id(p) in flat for p in got)     # the streams' own pairs, no copies


@given(tail_lists=vnode_streams, reverse=st.booleans(), skip=st.integers(0, 3))
def test_native_equals_pure(tail_lists, reverse, skip):
    streams = _streams(tail_lists, reverse, skip=max(skip, 1))
    results = [list(impl.merge_by_tail(streams, reverse, skip)) for impl in IMPLS]
    assert all(r == results[0] for r in results)


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_shorter_than_skip_compare_as_empty(impl):
    streams = [[(b"\x00", 1)], [(b"", 2), (b"\x00\x01a", 3)], [(b"\x00\x02", 4)]]
    assert list(impl.merge_by_tail(streams, False, 2)) == [(b"\x00", 1), (b"", 2), (b"\x00\x02", 4),
                                                             (b"\x00\x01a", 3)]


@pytest.mark.parametrize("impl", IMPLS)
def test_empty_inputs(impl):
    assert list(impl.merge_by_tail([], False)) == []
    assert list(impl.merge_by_tail([[], [], []], True)) == []
    assert list(impl.merge_by_tail([[], [(b"\x00\x01k", b"v")], []], False)) == [(b"\x00\x01k", b"v")]


@pytest.mark.parametrize("impl", IMPLS)
def test_streams_are_read_lazily(impl):
    pulled = []

    def stream(v, n):
        for i in range(n):
            pulled.append(v)
            yield bytes([0, v, i]), i

    merged = impl.merge_by_tail([stream(0, 3), stream(1, 3)], False, 2)
    assert pulled == []                 # nothing read before the first next()
    first = next(merged)
    assert first == (bytes([0, 0, 0]), 0)
    assert len(pulled) <= 3             # one pair ahead per stream, at most
    assert [p[1] for p in merged] == [0, 1, 1, 2, 2]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("bad", [[b"\x00\x01k"], (b"\x00\x01k",), ("str-key", b"v"), (b"k", b"v", b"x"), None])
def test_bad_pairs_raise_type_error(impl, bad):
    merged = impl.merge_by_tail([[(b"\x00\x00a", b"v")], [bad]], False, 2)
    with pytest.raises(TypeError, match="stream 1 yielded"):
        list(merged)


@pytest.mark.parametrize("impl", IMPLS)
def test_stream_errors_propagate_and_bad_skip_raises(impl):
    def broken():
        yield b"\x00\x00a", 1
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        list(impl.merge_by_tail([broken(), [(b"\x00\x01b", 2)]], False))
    with pytest.raises(ValueError):
        impl.merge_by_tail([], False, -1)
