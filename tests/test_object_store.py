"""Tests of the object stores (``hummock/object_store``, ``docs/object_store.md``).

- The contract tests take the ``object_store`` fixture (``conftest.py``), so each runs on the
  memory, local and S3 (moto on 127.0.0.1) backends: the same answers from all three.
- A hypothesis test replays random upload/stream/delete/read/list sequences against a dict model
  (memory and local in full, S3 with few examples).
- Backend-specific tests: local crash safety (leftover temp files, failures injected mid-upload),
  named memory stores, S3 multipart, retries with injected faults, credential hygiene, and the
  URL factory.
"""

from __future__ import annotations

import array
import datetime
import errno
import logging
import os
import pickle
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock.errors import HummockError, InvalidArgumentError
from hummock.object_store import (
    LocalObjectStore, MemoryObjectStore, ObjectNotFoundError, ObjectRangeError, ObjectStoreError,
    S3ObjectStore, open_object_store,
)
from hummock.object_store.local import TEMP_PREFIX
from s3_server import CREDENTIALS, TEST_PART_SIZE, new_bucket_name

MiB = 1024 * 1024
DATA = b"0123456789"


def temp_files(root) -> list[str]:
    return [name for _, _, files in os.walk(root) for name in files if name.startswith(".")]


# --- the contract, on every backend ---------------------------------------------------------

@pytest.mark.parametrize("data", [DATA, bytearray(DATA), memoryview(DATA)],
                         ids=["bytes", "bytearray", "memoryview"])
def test_upload_read_roundtrip(object_store, data):
    object_store.upload("sst/1.sst", data)
    got = object_store.read("sst/1.sst")
    assert got == DATA and type(got) is bytes
    assert object_store.size("sst/1.sst") == 10
    assert object_store.exists("sst/1.sst") and not object_store.exists("sst/2.sst")


def test_upload_wide_and_strided_memoryviews(object_store):
    wide = array.array("I", range(1000))
    object_store.upload("wide", memoryview(wide))
    assert object_store.read("wide") == wide.tobytes()
    with object_store.streaming_upload("strided") as uploader:
        uploader.write(memoryview(DATA)[::2])
        uploader.write(memoryview(wide))
        assert uploader.bytes_written == 5 + 4000
    assert object_store.read("strided") == DATA[::2] + wide.tobytes()


@pytest.mark.parametrize("start,end,expected", [
    (None, None, DATA), (0, None, DATA), (None, 10, DATA), (0, 10, DATA), (2, 5, b"234"),
    (9, 10, b"9"), (9, None, b"9"), (10, None, b""), (10, 10, b""), (0, 0, b""), (4, 4, b""),
    (None, 3, b"012"), (7, None, b"789"),
])
def test_ranged_read(object_store, start, end, expected):
    object_store.upload("obj", DATA)
    assert object_store.read("obj", start, end) == expected


@pytest.mark.parametrize("start,end", [(0, 11), (5, 20), (10, 11), (11, None), (11, 11),
                                       (20, 30), (None, 11)])
def test_range_past_end_raises(object_store, start, end):
    object_store.upload("obj", DATA)
    with pytest.raises(ObjectRangeError) as info:
        object_store.read("obj", start, end)
    assert isinstance(info.value, ObjectStoreError) and info.value.path == "obj"
    assert (info.value.start, info.value.end) == (start or 0, end)


@pytest.mark.parametrize("start,end", [(5, 4), (-1, None), (None, -1), (1.0, None),
                                       (True, None), (0, "3")])
def test_bad_range_arguments(object_store, start, end):
    object_store.upload("obj", DATA)
    with pytest.raises(InvalidArgumentError):
        object_store.read("obj", start, end)


def test_empty_object(object_store):
    object_store.upload("empty", b"")
    assert object_store.read("empty") == b""
    assert object_store.read("empty", 0, 0) == b""
    assert object_store.read("empty", 0) == b""
    assert object_store.size("empty") == 0 and object_store.exists("empty")
    with pytest.raises(ObjectRangeError):
        object_store.read("empty", 0, 1)
    with pytest.raises(ObjectRangeError):
        object_store.read("empty", 1)
    assert [m.path for m in object_store.list()] == ["empty"]


def test_missing_object(object_store):
    for call in (lambda: object_store.read("nope"), lambda: object_store.read("nope", 1, 2),
                 lambda: object_store.read("nope", 0, 0), lambda: object_store.size("nope")):
        with pytest.raises(ObjectNotFoundError) as info:
            call()
        err = info.value
        assert isinstance(err, (FileNotFoundError, ObjectStoreError, HummockError, OSError))
        assert err.errno == errno.ENOENT and err.path == "nope" and "nope" in str(err)
    assert not object_store.exists("nope")


def test_list_prefixes_and_order(object_store):
    paths = ["b", "a/2", "a/10", "a/1", "ab", "a-b", "version/checkpoint"]
    for i, path in enumerate(paths):
        object_store.upload(path, b"x" * i)
    metas = object_store.list()
    assert [m.path for m in metas] == sorted(paths)
    assert {m.path: m.size for m in metas} == {p: i for i, p in enumerate(paths)}
    now = datetime.datetime.now(datetime.timezone.utc)
    for meta in metas:
        assert meta.last_modified.tzinfo is not None
        assert abs((now - meta.last_modified).total_seconds()) < 300
    assert [m.path for m in object_store.list("a/")] == ["a/1", "a/10", "a/2"]
    assert [m.path for m in object_store.list("a")] == ["a-b", "a/1", "a/10", "a/2", "ab"]
    assert [m.path for m in object_store.list("a/1")] == ["a/1", "a/10"]
    assert [m.path for m in object_store.list("version/")] == ["version/checkpoint"]
    assert object_store.list("zzz") == [] and object_store.list("b/") == []


def test_list_more_than_1000_objects_then_delete_them(object_store):
    paths = [f"many/{i:05d}" for i in range(1105)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: object_store.upload(p, p.encode()), paths))
    object_store.upload("other", b"")
    assert [m.path for m in object_store.list("many/")] == paths
    assert len(object_store.list()) == 1106
    object_store.delete(iter(paths))  # two batches on S3
    assert [m.path for m in object_store.list()] == ["other"]


def test_delete(object_store):
    for path in ("a", "b", "c", "d/e"):
        object_store.upload(path, b"x")
    object_store.delete("a")
    assert not object_store.exists("a")
    object_store.delete(["b", "d/e", "missing", "b"])
    object_store.delete("missing")
    object_store.delete([])
    assert [m.path for m in object_store.list()] == ["c"]
    with pytest.raises(InvalidArgumentError):
        object_store.delete(["c", "../x"])  # validated before anything is deleted
    assert object_store.exists("c")


def test_overwrite_replaces(object_store):
    object_store.upload("obj", b"old-object-bytes")
    object_store.upload("obj", b"new")
    assert object_store.read("obj") == b"new" and object_store.size("obj") == 3
    with object_store.streaming_upload("obj") as uploader:
        uploader.write(b"streamed")
    assert object_store.read("obj") == b"streamed"
    assert [m.path for m in object_store.list()] == ["obj"]


def test_streaming_upload_small(object_store):
    uploader = object_store.streaming_upload("s/1")
    for piece in (b"ab", b"", bytearray(b"cd"), memoryview(b"ef")):
        uploader.write(piece)
    assert not object_store.exists("s/1") and object_store.list() == []
    assert uploader.bytes_written == 6
    uploader.finish()
    assert object_store.read("s/1") == b"abcdef"
    with object_store.streaming_upload("s/empty"):
        pass
    assert object_store.read("s/empty") == b""


def test_streaming_upload_multipart(object_store, s3_server_if_s3):
    data = os.urandom(11 * MiB)  # 5 + 5 + 1 MiB parts on S3
    with object_store.streaming_upload("big/1.sst") as uploader:
        for i in range(0, len(data), 3 * MiB // 2):
            uploader.write(data[i:i + 3 * MiB // 2])
    assert object_store.size("big/1.sst") == len(data)
    assert object_store.read("big/1.sst") == data
    assert object_store.read("big/1.sst", 5 * MiB - 3, 5 * MiB + 3) == data[5 * MiB - 3:5 * MiB + 3]
    if s3_server_if_s3:
        head = s3_server_if_s3.admin_client().head_object(
            Bucket=object_store.bucket, Key=object_store._key("big/1.sst"))
        assert head["ETag"].endswith('-3"')  # a multipart object of three parts


def test_streaming_abort_leaves_nothing(object_store, s3_server_if_s3):
    object_store.upload("keep", b"old")
    uploader = object_store.streaming_upload("keep")
    uploader.write(os.urandom(TEST_PART_SIZE + 1))  # starts a multipart upload on S3
    uploader.abort()
    uploader.abort()  # idempotent
    assert object_store.read("keep") == b"old"
    assert [m.path for m in object_store.list()] == ["keep"]
    if isinstance(object_store, LocalObjectStore):
        assert temp_files(object_store.root) == []
    if s3_server_if_s3:
        uploads = s3_server_if_s3.admin_client().list_multipart_uploads(Bucket=object_store.bucket)
        assert uploads.get("Uploads", []) == []


def test_streaming_context_manager_and_states(object_store):
    with pytest.raises(RuntimeError, match="boom"):
        with object_store.streaming_upload("cm") as uploader:
            uploader.write(b"partial")
            raise RuntimeError("boom")
    assert not object_store.exists("cm")
    with pytest.raises(InvalidArgumentError, match="aborted"):
        uploader.write(b"more")
    with pytest.raises(InvalidArgumentError, match="aborted"):
        uploader.finish()
    uploader = object_store.streaming_upload("cm")
    uploader.write(b"done")
    uploader.finish()
    uploader.abort()  # a no-op once finished: the object stays
    with pytest.raises(InvalidArgumentError, match="finished"):
        uploader.write(b"x")
    with pytest.raises(InvalidArgumentError, match="finished"):
        uploader.finish()
    with pytest.raises(InvalidArgumentError):
        uploader.write("text")
    assert object_store.read("cm") == b"done"


BAD_PATHS = ["", "/a", "a/", "a//b", ".", "..", "./a", "a/./b", "../a", "a/..", "a\\b",
             "a\x00b", "a b", "caf\u00e9", ".hidden", "a/.tmp-1", "a?b", "a%2Fb", "x" * 1025,
             "s" * 256, None, b"a", 3]


@pytest.mark.parametrize("path", BAD_PATHS, ids=lambda p: repr(p)[:20])
def test_path_validation(object_store, path):
    for call in (lambda: object_store.upload(path, b""), lambda: object_store.read(path),
                 lambda: object_store.size(path), lambda: object_store.exists(path),
                 lambda: object_store.delete([path]), lambda: object_store.streaming_upload(path)):
        with pytest.raises(InvalidArgumentError):
            call()
    if path not in ("", "a/"):  # "" and "a/" are fine list prefixes
        with pytest.raises(InvalidArgumentError):
            object_store.list(path)
    assert object_store.list() == []


@pytest.mark.parametrize("path", ["a", "sst/000001.sst", "a-b_c.d/E9", "a..b", "x" * 255,
                                  "/".join(["d"] * 300)], ids=lambda p: p[:20])
def test_valid_paths(object_store, path):
    object_store.upload(path, b"ok")
    assert object_store.read(path) == b"ok"
    assert [m.path for m in object_store.list(path)] == [path]


def test_bad_data(object_store):
    with pytest.raises(InvalidArgumentError):
        object_store.upload("a", "text")
    with pytest.raises(InvalidArgumentError):
        object_store.upload("a", None)


def test_concurrent_uploads_and_reads(object_store):
    payloads = [bytes([i]) * (1000 + 37 * i) for i in range(8)]
    object_store.upload("hot", payloads[0])
    stop = threading.Event()
    torn = []

    def writer(i):
        for j in range(10):
            object_store.upload(f"w{i}/{j}", payloads[i])
            object_store.upload("hot", payloads[i])

    def reader():
        while not stop.is_set():
            data = object_store.read("hot")
            if data not in payloads:
                torn.append(data)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in readers:
        thread.start()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(writer, range(8)))
    stop.set()
    for thread in readers:
        thread.join()
    assert torn == []
    assert object_store.read("hot") in payloads
    assert len(object_store.list("w")) == 80
    for i in range(8):
        assert object_store.read(f"w{i}/9") == payloads[i]


def test_upload_if_absent(object_store):
    assert object_store.upload_if_absent("m/delta-1", b"first") is True
    assert object_store.upload_if_absent("m/delta-1", b"second") is False
    assert object_store.read("m/delta-1") == b"first"
    assert object_store.upload_if_absent("m/delta-2", memoryview(b"mv")) is True
    assert object_store.upload_if_absent("m/empty", bytearray()) is True
    assert object_store.read("m/delta-2") == b"mv" and object_store.read("m/empty") == b""
    object_store.delete("m/delta-1")
    assert object_store.upload_if_absent("m/delta-1", b"again") is True  # absent again
    assert object_store.read("m/delta-1") == b"again"
    assert [m.path for m in object_store.list()] == ["m/delta-1", "m/delta-2", "m/empty"]
    for path in ("", "/a", "a/.tmp-1", None):
        with pytest.raises(InvalidArgumentError):
            object_store.upload_if_absent(path, b"x")
    with pytest.raises(InvalidArgumentError):
        object_store.upload_if_absent("a", "text")
    if isinstance(object_store, LocalObjectStore):
        assert temp_files(object_store.root) == []
    object_store.close()
    with pytest.raises(ObjectStoreError, match="closed"):
        object_store.upload_if_absent("m/x", b"x")


@pytest.mark.parametrize("kind", ["memory", "local"])
def test_upload_if_absent_race_has_one_winner(kind, tmp_path):
    """Threads race to create the same paths: exactly one caller wins each, its bytes stay."""
    store = MemoryObjectStore() if kind == "memory" else LocalObjectStore(tmp_path)
    barrier = threading.Barrier(8)

    def contender(i):
        barrier.wait()
        return [store.upload_if_absent(f"race/{round_}", b"%d" % i * 1000) for round_ in range(20)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(contender, range(8)))
    for round_ in range(20):
        winners = [i for i in range(8) if results[i][round_]]
        assert len(winners) == 1
        assert store.read(f"race/{round_}") == b"%d" % winners[0] * 1000
    if kind == "local":
        assert temp_files(tmp_path) == []


def test_local_upload_if_absent_failures(tmp_path, monkeypatch):
    store = LocalObjectStore(tmp_path)
    store.upload("d/x", b"x")
    with pytest.raises(ObjectStoreError, match="directory"):
        store.upload_if_absent("d", b"x")  # a directory is not an object
    for victim in ("fsync", "link"):
        def boom(*args, **kwargs):
            raise OSError(errno.EIO, "injected I/O error")
        monkeypatch.setattr(os, victim, boom)
        with pytest.raises(ObjectStoreError, match="injected"):
            store.upload_if_absent("new", b"data")
        monkeypatch.undo()
        assert not store.exists("new") and temp_files(tmp_path) == []
    assert store.lock_file_path() == os.path.join(store.root, ".writer-lock")


def test_s3_upload_if_absent_lost_reply_counts_as_created(make_s3_store, monkeypatch):
    """A conditional PUT whose reply is lost is retried; the 412 it then gets is our own."""
    store = make_s3_store(max_attempts=3)
    real_put = store._client.put_object
    calls = []

    def lossy_put(**kwargs):
        calls.append(kwargs.get("IfNoneMatch"))
        response = real_put(**kwargs)
        if len(calls) == 1:
            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
        return response

    monkeypatch.setattr(store._client, "put_object", lossy_put)
    assert store.upload_if_absent("d", b"mine") is True
    assert calls == ["*", "*"]
    calls.clear()
    assert store.upload_if_absent("d", b"other bytes") is False  # lost reply, then 412: not ours
    assert store.read("d") == b"mine"


def test_s3_conditional_put_and_conflict_retry(make_s3_store):
    store = make_s3_store(max_attempts=4)
    etag = store.conditional_put("lock", b"v1")
    assert etag and store.conditional_put("lock", b"v1-again") is None
    data, read_etag, age = store.read_with_etag("lock")
    assert (data, read_etag) == (b"v1", etag) and 0 <= age < 60
    failures = [2]
    store._client.meta.events.register(
        "before-send.s3.PutObject", slow_down_hook(failures, 409, "ConditionalRequestConflict"))
    etag2 = store.conditional_put("lock", b"v2", if_match=etag)
    assert failures == [0] and etag2 not in (None, etag) and store.read("lock") == b"v2"
    assert store.conditional_put("lock", b"v3", if_match=etag) is None  # stale etag
    assert store.conditional_put("missing", b"x", if_match=etag) is None
    assert store.read("lock") == b"v2" and not store.exists("missing")
    with pytest.raises(ObjectNotFoundError):
        store.read_with_etag("missing")
    with pytest.raises(InvalidArgumentError):
        store.conditional_put("lock", b"x", if_match="")


def test_closed_store(object_store):
    object_store.upload("a", b"x")
    object_store.close()
    object_store.close()  # idempotent
    for call in (lambda: object_store.read("a"), lambda: object_store.upload("a", b""),
                 lambda: object_store.list(), lambda: object_store.exists("a"),
                 lambda: object_store.streaming_upload("b")):
        with pytest.raises(ObjectStoreError, match="closed"):
            call()


def test_errors_pickle():
    err = pickle.loads(pickle.dumps(ObjectRangeError("m", path="p", start=1, end=2, size=0)))
    assert (type(err), str(err), err.path, err.start, err.end, err.size) == (
        ObjectRangeError, "m", "p", 1, 2, 0)
    err = pickle.loads(pickle.dumps(ObjectNotFoundError("gone", path="p")))
    assert isinstance(err, FileNotFoundError) and err.errno == errno.ENOENT and err.path == "p"


# --- a dict model, on every backend ---------------------------------------------------------

MODEL_PATHS = ["a", "b", "ab", "c/d", "c/e", "d/x/y", "0.sst"]  # none is a directory of another
MODEL_PREFIXES = ["", "a", "c/", "c", "d/x", "z", "0"]
OPS = st.lists(st.one_of(
    st.tuples(st.just("upload"), st.sampled_from(MODEL_PATHS), st.binary(max_size=40)),
    st.tuples(st.just("stream"), st.sampled_from(MODEL_PATHS),
              st.lists(st.binary(max_size=20), max_size=4), st.booleans()),
    st.tuples(st.just("delete"), st.lists(st.sampled_from(MODEL_PATHS), max_size=3)),
    st.tuples(st.just("read"), st.sampled_from(MODEL_PATHS), st.none() | st.integers(0, 45),
              st.none() | st.integers(0, 45)),
    st.tuples(st.just("list"), st.sampled_from(MODEL_PREFIXES)),
), max_size=25)


def run_model(store, ops) -> None:
    model: dict[str, bytes] = {}
    for op, *args in ops:
        if op == "upload":
            store.upload(*args)
            model[args[0]] = args[1]
        elif op == "stream":
            path, pieces, finish = args
            uploader = store.streaming_upload(path)
            for piece in pieces:
                uploader.write(piece)
            if finish:
                uploader.finish()
                model[path] = b"".join(pieces)
            else:
                uploader.abort()
        elif op == "delete":
            store.delete(args[0])
            for path in args[0]:
                model.pop(path, None)
        elif op == "read":
            path, start, end = args
            if start is not None and end is not None and start > end:
                start, end = end, start
            if path not in model:
                with pytest.raises(ObjectNotFoundError):
                    store.read(path, start, end)
            elif max(start or 0, len(model[path]) if end is None else end) > len(model[path]):
                with pytest.raises(ObjectRangeError):
                    store.read(path, start, end)
            else:
                assert store.read(path, start, end) == model[path][start:end]
        else:
            assert [(m.path, m.size) for m in store.list(args[0])] == sorted(
                (p, len(v)) for p, v in model.items() if p.startswith(args[0]))
    assert {m.path: store.read(m.path) for m in store.list()} == model


@pytest.mark.parametrize("kind", ["memory", "local"])
@given(ops=OPS)
def test_model_memory_and_local(kind, ops):
    if kind == "memory":
        run_model(MemoryObjectStore(), ops)
        return
    with tempfile.TemporaryDirectory() as root:
        run_model(LocalObjectStore(root), ops)
        assert temp_files(root) == []


@settings(max_examples=8)
@given(ops=OPS)
def test_model_s3(s3_server, ops):
    store = s3_server.new_store()
    try:
        run_model(store, ops)
    finally:
        store.close()
        s3_server.drop_bucket(store.bucket)


# --- local: crash safety ---------------------------------------------------------------------

def test_local_creates_root_and_keeps_layout(tmp_path):
    store = LocalObjectStore(tmp_path / "x" / "y")
    store.upload("sst/1.sst", b"abc")
    assert (tmp_path / "x" / "y" / "sst" / "1.sst").read_bytes() == b"abc"
    assert repr(store) == f"LocalObjectStore(root={str(tmp_path / 'x' / 'y')!r})"


def test_local_leftover_temp_file_is_invisible(tmp_path):
    store = LocalObjectStore(tmp_path)
    store.upload("sst/1.sst", b"good")
    (tmp_path / "sst" / f"{TEMP_PREFIX}crashed").write_bytes(b"half an obj")
    (tmp_path / f"{TEMP_PREFIX}crashed2").write_bytes(b"half")
    assert [m.path for m in store.list()] == ["sst/1.sst"]
    with pytest.raises(InvalidArgumentError):
        store.read(f"sst/{TEMP_PREFIX}crashed")
    assert store.cleanup_temp(older_than_seconds=3600) == 0
    assert store.cleanup_temp() == 2
    assert temp_files(tmp_path) == [] and store.read("sst/1.sst") == b"good"


@pytest.mark.parametrize("victim", ["write", "fsync", "replace"])
@pytest.mark.parametrize("streaming", [False, True], ids=["upload", "streaming"])
def test_local_failure_mid_upload_keeps_old_object(tmp_path, monkeypatch, victim, streaming):
    store = LocalObjectStore(tmp_path)
    store.upload("sst/1.sst", b"old")

    def boom(*args, **kwargs):
        raise OSError(errno.ENOSPC, "injected: no space left")

    monkeypatch.setattr(os, victim, boom)
    with pytest.raises(ObjectStoreError, match="injected") as info:
        if streaming:
            with store.streaming_upload("sst/1.sst") as uploader:
                uploader.write(b"new bytes")
        else:
            store.upload("sst/1.sst", b"new bytes")
    assert info.value.path == "sst/1.sst"
    monkeypatch.undo()
    assert store.read("sst/1.sst") == b"old"
    assert temp_files(tmp_path) == []


def test_local_streaming_temp_file_is_invisible_until_finish(tmp_path):
    store = LocalObjectStore(tmp_path)
    uploader = store.streaming_upload("a/b")
    uploader.write(b"data")
    assert len(temp_files(tmp_path)) == 1
    assert store.list() == [] and not store.exists("a/b")
    uploader.finish()
    assert temp_files(tmp_path) == [] and store.read("a/b") == b"data"


def test_local_file_where_directory_needed(tmp_path):
    store = LocalObjectStore(tmp_path)
    store.upload("a", b"file")
    with pytest.raises(ObjectStoreError):
        store.upload("a/b", b"x")
    with pytest.raises(ObjectNotFoundError):
        store.read("a/b")
    store.upload("c/d", b"x")
    with pytest.raises(ObjectNotFoundError):
        store.read("c")  # a directory is not an object
    assert not store.exists("c")
    assert temp_files(tmp_path) == []


# --- memory ---------------------------------------------------------------------------------

def test_memory_named_and_private_stores():
    first = open_object_store("memory://reopen-test")
    first.upload("a", b"kept")
    first.close()
    again = open_object_store("memory://reopen-test")
    assert again.read("a") == b"kept"
    assert open_object_store("memory://").list() == []
    assert open_object_store("memory://other-name").list() == []
    MemoryObjectStore.drop_named("reopen-test")
    assert open_object_store("memory://reopen-test").list() == []
    assert again.read("a") == b"kept"  # an open handle keeps its table


def test_memory_copies_the_buffer():
    store = MemoryObjectStore()
    buffer = bytearray(b"abc")
    store.upload("a", buffer)
    buffer[0] = ord("X")
    assert store.read("a") == b"abc"


# --- S3 -------------------------------------------------------------------------------------

@pytest.fixture
def make_s3_store(s3_server):
    """``make_s3_store(**options)``: a store on a fresh bucket; all are closed and dropped after."""
    stores = []

    def make(**options):
        stores.append(s3_server.new_store(**options))
        return stores[-1]
    yield make
    for store in stores:
        store.close()
    for bucket in {store.bucket for store in stores}:
        try:
            s3_server.drop_bucket(bucket)
        except ClientError:  # never created (create_bucket_if_missing=False)
            pass


def slow_down_hook(failures: list[int], status=503, code="SlowDown"):
    """A before-send hook answering the first ``failures[0]`` requests with an S3 error."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>injected</Message></Error>").encode()

    class Raw:
        def stream(self, **kwargs):
            yield body

    def hook(request, **kwargs):
        if failures[0] > 0:
            failures[0] -= 1
            return AWSResponse(request.url, status, {}, Raw())
        return None
    return hook


def test_s3_retries_transient_errors_then_succeeds(make_s3_store, caplog):
    store = make_s3_store(max_attempts=4)
    failures = [3]
    store._client.meta.events.register("before-send.s3.PutObject", slow_down_hook(failures))
    with caplog.at_level(logging.WARNING, logger="hummock.object_store.s3"):
        store.upload("a", b"data")
    assert failures == [0] and store.read("a") == b"data"
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 3


def test_s3_gives_up_after_max_attempts(make_s3_store):
    store = make_s3_store(max_attempts=3)
    failures = [10]
    store._client.meta.events.register("before-send.s3.GetObject",
                                       slow_down_hook(failures, 500, "InternalError"))
    store.upload("a", b"data")
    with pytest.raises(ObjectStoreError, match="after 3 attempts") as info:
        store.read("a")
    assert failures == [7] and not isinstance(info.value, ObjectNotFoundError)
    assert info.value.path == "a"


def test_s3_does_not_retry_permanent_errors(make_s3_store):
    store = make_s3_store(max_attempts=5)
    failures = [10]
    store._client.meta.events.register("before-send.s3.PutObject",
                                       slow_down_hook(failures, 403, "AccessDenied"))
    with pytest.raises(ObjectStoreError, match="AccessDenied"):
        store.upload("a", b"data")
    assert failures == [9]


def test_s3_retries_connection_errors_and_short_bodies(s3_server, make_s3_store, monkeypatch):
    store = make_s3_store(max_attempts=3)
    store.upload("a", DATA)
    real_get = store._client.get_object
    calls = []

    class ShortBody:
        def __init__(self, data):
            self.data = data

        def read(self):
            return self.data[:-1]

        def close(self):
            pass

    def flaky_get(**kwargs):
        calls.append(kwargs.get("Range"))
        if len(calls) == 1:
            raise EndpointConnectionError(endpoint_url=s3_server.endpoint_url)
        response = real_get(**kwargs)
        if len(calls) == 2:
            response["Body"] = ShortBody(response["Body"].read())
        return response

    monkeypatch.setattr(store._client, "get_object", flaky_get)
    assert store.read("a", 2, 6) == b"2345"
    assert calls == ["bytes=2-5"] * 3


def test_s3_failed_part_aborts_the_multipart_upload(s3_server, make_s3_store):
    store = make_s3_store(max_attempts=2)
    store._client.meta.events.register("before-send.s3.UploadPart", slow_down_hook([99]))
    with pytest.raises(ObjectStoreError, match="part 1"):
        with store.streaming_upload("big") as uploader:
            uploader.write(b"x" * TEST_PART_SIZE)
    assert not store.exists("big")
    uploads = s3_server.admin_client().list_multipart_uploads(Bucket=store.bucket)
    assert uploads.get("Uploads", []) == []


def test_s3_delete_batches_by_1000(make_s3_store):
    store = make_s3_store()
    batches = []
    store._client.meta.events.register("before-call.s3.DeleteObjects",
                                       lambda **kwargs: batches.append(1))
    store.delete([f"x/{i}" for i in range(2500)])
    assert len(batches) == 3


def test_s3_prefix_mapping_and_isolation(s3_server, make_s3_store):
    bucket = new_bucket_name()
    one = make_s3_store(bucket=bucket, prefix="/tenant/one/")
    two = make_s3_store(bucket=bucket, prefix="tenant/two")
    root = make_s3_store(bucket=bucket, prefix="")
    one.upload("sst/1.sst", b"1")
    two.upload("sst/1.sst", b"22")
    root.upload("loose", b"333")
    admin = s3_server.admin_client()
    admin.put_object(Bucket=bucket, Key="tenant/one/dir/", Body=b"")  # a foreign "folder" key
    keys = [o["Key"] for o in admin.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["loose", "tenant/one/dir/", "tenant/one/sst/1.sst", "tenant/two/sst/1.sst"]
    assert [(m.path, m.size) for m in one.list()] == [("sst/1.sst", 1)]
    assert [(m.path, m.size) for m in two.list()] == [("sst/1.sst", 2)]
    assert [m.path for m in root.list("tenant/t")] == ["tenant/two/sst/1.sst"]
    assert one.prefix == "tenant/one"


def test_s3_missing_bucket_is_not_a_missing_object(make_s3_store):
    store = make_s3_store(create_bucket_if_missing=False)
    with pytest.raises(ObjectStoreError, match="NoSuchBucket") as info:
        store.read("a")
    assert not isinstance(info.value, ObjectNotFoundError)
    with pytest.raises(ObjectStoreError, match="NoSuchBucket"):
        store.upload("a", b"x")


SECRET_ID = "AKIAHUMMOCKSECRETID9"
SECRET_KEY = "hummock/SECRET+key/do-not-print-0123456789"


def test_s3_credentials_never_shown(s3_server, caplog):
    store = S3ObjectStore("no-such-bucket-here", "p", endpoint_url=s3_server.endpoint_url,
                          region="us-east-1", access_key_id=SECRET_ID,
                          secret_access_key=SECRET_KEY, session_token="SECRET-TOKEN",
                          max_attempts=2, retry_base_delay=0.001)
    messages = [repr(store), str(store)]
    for call in (lambda: store.upload("a", b"x"), lambda: store.read("a"), lambda: store.list()):
        with pytest.raises(ObjectStoreError) as info:
            call()
        messages.append(str(info.value))
    store._client.meta.events.register("before-send.s3.HeadObject", slow_down_hook([9]))
    with caplog.at_level(logging.DEBUG, logger="hummock"):
        with pytest.raises(ObjectStoreError, match="after 2 attempts") as info:
            store.size("a")
    messages += [str(info.value), caplog.text]
    store.close()
    messages.append(str(pytest.raises(InvalidArgumentError, open_object_store,
                                      f"s3://{SECRET_ID}:{SECRET_KEY}@bucket/p").value))
    messages.append(str(pytest.raises(InvalidArgumentError, open_object_store,
                                      f"s3://bucket/p?secret_access_key={SECRET_KEY}").value))
    messages.append(str(pytest.raises(
        InvalidArgumentError, S3ObjectStore, "bucket", endpoint_url=f"http://u:{SECRET_KEY}@h",
    ).value))
    for text in messages:
        assert SECRET_ID not in text and SECRET_KEY not in text and "SECRET-TOKEN" not in text


@pytest.mark.parametrize("options,match", [
    ({"part_size": 5 * MiB - 1}, "part_size"), ({"max_attempts": 0}, "max_attempts"),
    ({"access_key_id": "k"}, "together"), ({"session_token": "t"}, "together"),
    ({"endpoint_url": "ftp://h"}, "endpoint"),
])
def test_s3_bad_options(options, match):
    with pytest.raises(InvalidArgumentError, match=match):
        S3ObjectStore("bucket", **options)


@pytest.mark.parametrize("bucket", ["", "ab", "Upper", "a_b", "-ab", "x" * 64, None])
def test_s3_bad_bucket(bucket):
    with pytest.raises(InvalidArgumentError, match="bucket"):
        S3ObjectStore(bucket)


# --- the URL factory ------------------------------------------------------------------------

def test_open_local_forms(tmp_path, monkeypatch):
    for url in (str(tmp_path / "a"), f"file://{tmp_path}/b", f"file://localhost{tmp_path}/c",
                tmp_path / "d"):
        store = open_object_store(url)
        assert isinstance(store, LocalObjectStore) and os.path.isdir(store.root)
    monkeypatch.chdir(tmp_path)
    assert open_object_store("rel/dir").root == str(tmp_path / "rel" / "dir")
    assert open_object_store("./x:y").root == str(tmp_path / "x:y")
    assert isinstance(open_object_store("/tmp", region=None, endpoint_url=None), LocalObjectStore)


def test_open_s3_url(s3_server):
    bucket = new_bucket_name()
    url = (f"s3://{bucket}/tenant/a?endpoint={s3_server.endpoint_url}&region=us-east-1"
           f"&max_attempts=2")
    store = open_object_store(url, create_bucket_if_missing=True, **CREDENTIALS,
                              region="us-east-1", part_size=None)
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix, store.endpoint_url, store.region, store.max_attempts) == (
        bucket, "tenant/a", s3_server.endpoint_url, "us-east-1", 2)
    store.upload("x", b"via url")
    assert store.read("x") == b"via url"
    store.close()
    s3_server.drop_bucket(bucket)


@pytest.mark.parametrize("url,options,match", [
    ("ftp://host/x", {}, "unknown object store scheme 'ftp'"),
    ("s3:bucket", {}, "no '//'"),
    ("", {}, "non-empty"),
    (None, {}, "non-empty"),
    ("file://host/x", {}, "file:///"),
    ("file:///x?y=1", {}, "file:///"),
    ("memory://a/b", {}, "memory://name"),
    ("memory://bad name", {}, "memory://name"),
    ("memory://", {"region": "x"}, "do not apply to a memory store"),
    ("/tmp/x", {"part_size": 1}, "do not apply to a local store"),
    ("s3://user:pw@bucket", {}, "must not contain credentials"),
    ("s3://user:s/e/cret@bucket/p", {}, "must not contain credentials"),
    ("file://user:pw@host/x", {}, "file:///"),
    ("s3://bucket?access_key_id=x", {}, "credentials are not accepted"),
    ("s3://bucket?colour=red", {}, "unknown s3 URL query key 'colour'"),
    ("s3://bucket?max_attempts=many", {}, "integer"),
    ("s3://bucket?region=a&region=b", {}, "twice"),
    ("s3://bucket?region=a", {"region": "b"}, "different values"),
    ("s3://bucket", {"colour": "red"}, "unknown S3 options"),
    ("s3://bucket/a/../b", {}, "invalid object path"),
    ("s3://Bucket", {}, "bucket"),
])
def test_open_rejects(url, options, match):
    with pytest.raises(InvalidArgumentError, match=match):
        open_object_store(url, **options)


@pytest.fixture
def s3_server_if_s3(request, object_store):
    """The moto server when the test runs on the S3 backend, else None."""
    return request.getfixturevalue("s3_server") if isinstance(object_store, S3ObjectStore) else None
