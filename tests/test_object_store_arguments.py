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
