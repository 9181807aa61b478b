"""The write-back hint of deferred uploads (hummock/object_store/writeback.py, local.py
"Deferred durability"): given once per deferred file as it is published, never for an upload
that fsyncs itself, and a failure of it changes nothing -- the barrier still fsyncs the file
before the delta is linked."""

from __future__ import annotations

import os
import sys

import pytest

import hummock.object_store.local as local
from hummock.object_store import LocalObjectStore
from hummock.object_store import writeback
from tests.test_deferred_durability import FsLog


@pytest.fixture
def fslog(monkeypatch):
    return FsLog(monkeypatch)


@pytest.fixture
def hints(monkeypatch):
    """The fds the local store hinted, with whether each was still open then."""
    given = []

    def record(fd):
        given.append((fd, _is_open(fd)))
        return True
    monkeypatch.setattr(local, "start_writeback", record)
    return given


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_each_deferred_upload_is_hinted_once_while_open(tmp_path, hints):
    store = LocalObjectStore(tmp_path)
    with store.deferred_durability():
        for name in ("sst/1.sst", "sst/2.sst"):
            with store.streaming_upload(name) as up:
                up.write(b"x" * 5000)
    assert len(hints) == 2 and all(still_open for _, still_open in hints)
    store.upload("plain/a", b"a")              # fsynced by itself: no hint
    with store.streaming_upload("plain/b") as up:   # outside the context: durable as ever
        up.write(b"b")
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    assert len(hints) == 2


def test_the_hint_can_be_turned_off(tmp_path, hints):
    store = LocalObjectStore(tmp_path)
    store.writeback_hint = False
    with store.deferred_durability():
        with store.streaming_upload("sst/1.sst") as up:
            up.write(b"x")
    assert hints == []


@pytest.mark.parametrize("failure", ["raises", "refused"])
def test_a_failing_hint_leaves_the_barrier_to_sync_the_file(tmp_path, monkeypatch, fslog, failure):
    """start_writeback swallows its own failures (below); even a replacement that raises or
    returns False must not lose the file: the upload goes on and the barrier fsyncs it."""
    if failure == "raises":   # the libc call itself raising: start_writeback swallows it
        def raising(*args):
            raise OSError("injected")
        monkeypatch.setattr(writeback, "_call", raising)
        monkeypatch.setattr(local, "start_writeback", writeback.start_writeback)
    else:
        monkeypatch.setattr(local, "start_writeback", lambda fd: False)
    store = LocalObjectStore(tmp_path)
    with store.deferred_durability():
        with store.streaming_upload("sst/1.sst") as up:
            up.write(b"payload")
    assert store.read("sst/1.sst") == b"payload"
    assert store.upload_if_absent("manifest/delta-1", b"d") is True
    file = os.path.join(str(tmp_path), "sst", "1.sst")
    linked = next(seq for seq, k, *d in fslog.events if k == "link_start" and "delta-1" in d[1])
    ends = [seq for seq, k, *d in fslog.events if k == "fsync_end" and d[0] == file]
    assert len(ends) == 1 and ends[0] < linked


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is a Linux call")
def test_start_writeback_on_linux(tmp_path):
    assert writeback.available()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"y" * 100_000)
        assert writeback.start_writeback(fd) is True
    finally:
        os.close(fd)
    assert writeback.start_writeback(fd) is False       # a closed descriptor: refused, no raise
    assert writeback.start_writeback(-1) is False
    assert (tmp_path / "f").read_bytes() == b"y" * 100_000


def test_without_the_call_the_hint_does_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(writeback, "_call", False)   # as on a platform without it
    assert writeback.available() is False
    fd = os.open(tmp_path / "g", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert writeback.start_writeback(fd) is False
    finally:
        os.close(fd)
