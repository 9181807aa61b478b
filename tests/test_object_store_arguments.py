"""Bad object-store arguments raise InvalidArgumentError naming the problem, never a bare
builtin or botocore exception: S3 addressing styles, NUL bytes in local paths and file URLs."""

from __future__ import annotations

import pathlib

import pytest

from hummock.errors import InvalidArgumentError
from hummock.object_store import LocalObjectStore, S3ObjectStore, open_object_store

ENDPOINT = "http://127.0.0.1:9"   # never contacted: nothing here makes a request


@pytest.mark.parametrize("style", ["sideways", "", "Path", "virtual-hosted"])
def test_unknown_addressing_style_is_refused(style):
    with pytest.raises(InvalidArgumentError, match="addressing_style must be one of auto, path, virtual"):
        S3ObjectStore("bucket", endpoint_url=ENDPOINT, region="us-east-1", addressing_style=style)
    with pytest.raises(InvalidArgumentError, match="addressing_style"):
        open_object_store(f"s3://bucket/p?endpoint={ENDPOINT}&addressing_style={style}", region="us-east-1")


@pytest.mark.parametrize("style", ["auto", "path", "virtual", None])
def test_known_addressing_styles_are_accepted(style):
    store = S3ObjectStore("bucket", endpoint_url=ENDPOINT, region="us-east-1", addressing_style=style,
                          access_key_id="k", secret_access_key="s")
    store.close()


@pytest.mark.parametrize("url", ["/tmp/hummock\0db", "rel/a\0", "file:///tmp/hummock%00db",
                                 pathlib.Path("/tmp/hummock\0db")], ids=["abs", "rel", "file-url", "pathlike"])
def test_nul_byte_in_a_local_path_is_refused(url, tmp_path):
    with pytest.raises(InvalidArgumentError, match="NUL byte"):
        open_object_store(url)


def test_nul_byte_in_a_local_root_is_refused(tmp_path):
    with pytest.raises(InvalidArgumentError, match="NUL byte"):
        LocalObjectStore(str(tmp_path / "a\0b"))
    with pytest.raises(InvalidArgumentError, match="NUL byte"):
        LocalObjectStore(bytes(tmp_path / "a") + b"\0")


# --- issue 25: hostile paths and URLs are InvalidArgumentError, across the three stores ---------

@pytest.mark.parametrize("surrogate", ["\ud800", "\udc80", "\udfff"])
def test_a_lone_surrogate_in_a_path_or_url_is_refused(tmp_path, surrogate):
    import sql
    from hummock import HummockStorage
    for url in (str(tmp_path / f"a{surrogate}b"), f"file://{tmp_path}/a{surrogate}b", f"memory://a{surrogate}",
                f"s3://bucket/a{surrogate}?endpoint={ENDPOINT}", f"s3://bucket/p?endpoint=http://h{surrogate}:9"):
        with pytest.raises(InvalidArgumentError):
            open_object_store(url, create=False)
    for opener in (lambda u: LocalObjectStore(u), lambda u: HummockStorage.open(u),
                   lambda u: HummockStorage.open(u, read_only=True), lambda u: sql.connect(u)):
        with pytest.raises(InvalidArgumentError, match="lone surrogate"):
            opener(str(tmp_path / f"c{surrogate}"))
    with pytest.raises(InvalidArgumentError, match="region"):
        S3ObjectStore("bucket", endpoint_url=ENDPOINT, region=f"us{surrogate}")
    assert list(tmp_path.iterdir()) == []   # nothing was created


def test_a_name_that_is_not_utf8_is_given_as_bytes(tmp_path):
    root = bytes(tmp_path) + b"/\xff"
    with LocalObjectStore(root) as store:
        store.upload("a", b"x")
        assert store.read("a") == b"x"


def test_a_2000_level_path_is_refused_and_a_deep_one_is_created_without_recursion(tmp_path):
    import sys

    import sql
    from hummock import HummockStorage
    from hummock.object_store.local import MAX_ROOT_BYTES
    deep = str(tmp_path) + "/a" * 2000
    for opener in (lambda: open_object_store(deep), lambda: open_object_store(deep, create=False),
                   lambda: HummockStorage.open(deep), lambda: HummockStorage.open(deep, read_only=True),
                   lambda: sql.connect(deep)):
        with pytest.raises(InvalidArgumentError, match="bytes long"):
            opener()
    assert list(tmp_path.iterdir()) == []
    levels = (MAX_ROOT_BYTES - len(str(tmp_path))) // 2   # as deep as a root may be: > the recursion limit
    limit = sys.getrecursionlimit()   # CPython's default, whatever an earlier test (hypothesis) left it at
    sys.setrecursionlimit(1000)
    assert levels > sys.getrecursionlimit()
    root = str(tmp_path) + "/a" * levels
    try:
        with open_object_store(root) as store:
            store.upload("x/y", b"1")
            assert [m.path for m in store.list()] == ["x/y"]
    finally:
        sys.setrecursionlimit(limit)
        # shutil.rmtree (pytest's cleanup) recurses per level: take the tree down here
        import os
        import shutil
        shutil.rmtree(root + "/x", ignore_errors=True)
        for _ in range(levels):
            if os.path.isdir(root):
                os.rmdir(root)
            root = os.path.dirname(root)


@pytest.mark.parametrize("url", ["s3://[x]/y", "s3://[x/y", "s3://x]/y", "s3://bucket:99999/y",
                                 f"s3://bucket/y?endpoint=http://[x]:9", "s3://bucket/y?endpoint=http://h:abc",
                                 "s3://bucket/y?endpoint=http://[h", "file://[h]/x", "memory://[h]"])
def test_a_url_that_does_not_parse_is_an_invalid_argument(url):
    import sql
    with pytest.raises(InvalidArgumentError):
        open_object_store(url)
    with pytest.raises(InvalidArgumentError):
        sql.connect(url)


@pytest.fixture(params=["memory", "local", "s3"])
def any_store(request, tmp_path):
    from hummock.object_store import MemoryObjectStore
    store = {"memory": lambda: MemoryObjectStore(), "local": lambda: LocalObjectStore(tmp_path / "root"),
             "s3": lambda: S3ObjectStore("bucket", endpoint_url=ENDPOINT, region="us-east-1",
                                         access_key_id="k", secret_access_key="s")}[request.param]()
    yield store
    store.close()


@pytest.mark.parametrize("paths", [None, 5, 1.5, b"a", bytearray(b"a"), object(), [None], ["a", 5], ("ok", b"x")],
                         ids=["None", "int", "float", "bytes", "bytearray", "object", "[None]", "[str, int]",
                              "(str, bytes)"])
def test_delete_of_what_is_no_path_is_an_invalid_argument(any_store, paths):
    with pytest.raises(InvalidArgumentError):
        any_store.delete(paths)   # refused before the store is asked: nothing is contacted on S3


def test_a_root_that_is_no_path_is_an_invalid_argument():
    for root in (5, None, 1.5):
        with pytest.raises(InvalidArgumentError):
            LocalObjectStore(root)
