"""``UserScan``'s inputs are checked alike by both twins: a read epoch, a resolved table
watermark (``hide``) and each source of the wrong shape raise ``InvalidArgumentError`` (never a
raw ``OverflowError``/``TypeError``/``ValueError`` from unpacking, never a silently wrong floor).
Both modes run this file; the merge itself is tested in test_iterators.py."""

import pytest

import twins
from hummock import _iterators_py
from hummock.errors import InvalidArgumentError
from hummock.key import MAX_EPOCH, encode_full_key

IMPLS = pytest.mark.parametrize("impl", twins.implementations(_iterators_py, "_iterators"),
                                ids=lambda m: m.__name__)
KEY = encode_full_key(3, b"\x00\x01k", 5)


def _source():
    return (iter([[(KEY, b"v")]]), False)


@IMPLS
@pytest.mark.parametrize("hide", [(-1, None), (2**64, None), (1.5, None), ("5", None), (5, []), (5,), [5, None]],
                         ids=["negative", "over-u64", "float", "str", "ranges-list", "one-tuple", "list"])
def test_bad_hide_is_refused(impl, hide):
    with pytest.raises(InvalidArgumentError):
        list(impl.UserScan([_source()], MAX_EPOCH, False, None, hide))


@IMPLS
def test_good_hide_applies(impl):
    assert list(impl.UserScan([_source()], MAX_EPOCH, False, None, (4, None))) == [(b"\x00\x01k", b"v")]
    assert list(impl.UserScan([_source()], MAX_EPOCH, False, None, (5, None))) == []   # truncated through 5
    assert list(impl.UserScan([_source()], MAX_EPOCH, False, None, (None, {1: (b"k", None)}))) == []


@IMPLS
@pytest.mark.parametrize("source", [None, [iter([]), False], (iter([]),), (iter([]), False, 1), 7],
                         ids=["none", "list", "one", "three", "int"])
def test_bad_source_is_refused(impl, source):
    with pytest.raises(InvalidArgumentError, match="a scan source must be"):
        list(impl.UserScan([source], MAX_EPOCH))


@IMPLS
@pytest.mark.parametrize("epoch", [-1, 2**64, 1.0, None])
def test_bad_read_epoch_is_refused(impl, epoch):
    with pytest.raises(InvalidArgumentError, match="read_epoch"):
        list(impl.UserScan([_source()], epoch))
