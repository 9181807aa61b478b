"""Recycled files of the local store's writer (hummock/object_store/spares.py, "Recycled files"):
a deleted object's file is kept and overwritten by the next upload into its directory, and every
object reads back exactly what was uploaded -- shorter or longer than the file it reuses, through
``upload``, streaming and deferred uploads and ``upload_if_absent`` -- with nothing visible and
nothing left behind at close; only a writer handle recycles, only into directories it uploads
to, only files up to ``RECYCLE_MAX_BYTES``, and at most ``spare_files`` a directory."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from hummock.object_store import spares as spares_module
from hummock.object_store.local import TEMP_PREFIX, LocalObjectStore


def writer_store(root) -> LocalObjectStore:
    store = LocalObjectStore(root)
    store.writer_lock({"owner": "test"}, stale_after=30, force=False)
    return store


def temps(directory) -> set:
    return {name for name in os.listdir(directory) if name.startswith(TEMP_PREFIX)}


def inode(store, path) -> int:
    return os.stat(store._file(path)).st_ino


def test_the_next_upload_overwrites_a_deleted_objects_file_and_reads_back_exactly(tmp_path):
    store = writer_store(tmp_path / "root")
    store.upload("sst/a", b"A" * 10_000)
    old = inode(store, "sst/a")
    store.delete("sst/a")
    assert not store.exists("sst/a") and [m.path for m in store.list("sst/")] == []
    store.upload("sst/b", b"short")                         # into the 10 KB file: cut to size
    assert inode(store, "sst/b") == old, "the deleted object's file was reused"
    assert store.read("sst/b") == b"short" and store.size("sst/b") == 5
    store.delete("sst/b")
    with store.streaming_upload("sst/c") as upload:         # longer than the file it reuses
        for part in (b"x" * 7000, b"y" * 9000):
            upload.write(part)
    assert inode(store, "sst/c") == old
    assert store.read("sst/c") == b"x" * 7000 + b"y" * 9000
    store.close()
    assert not temps(tmp_path / "root" / "sst")


def test_upload_if_absent_and_deferred_uploads_cut_a_reused_file_before_it_becomes_durable(tmp_path):
    store = writer_store(tmp_path / "root")
    store.upload("manifest/old", b"O" * 4096)
    store.upload("sst/old", b"S" * 4096)
    ino_manifest, ino_sst = inode(store, "manifest/old"), inode(store, "sst/old")
    store.delete("manifest/old")
    store.delete("sst/old")
    with store.deferred_durability():
        with store.streaming_upload("sst/new") as upload:
            upload.write(b"fresh sst")
    assert store.upload_if_absent("manifest/delta", b"delta")   # the barrier: fsyncs sst/new
    assert (inode(store, "sst/new"), inode(store, "manifest/delta")) == (ino_sst, ino_manifest)
    assert store.read("sst/new") == b"fresh sst" and store.read("manifest/delta") == b"delta"
    assert os.path.getsize(store._file("manifest/delta")) == 5
    store.close()


def test_only_a_writer_recycles_and_only_into_directories_it_uploads_to(tmp_path):
    root = tmp_path / "root"
    writer = writer_store(root)
    writer.upload("sst/a", b"a")
    reader = LocalObjectStore(root)
    reader.upload("lease/r", b"lease")
    reader.upload("sst/x", b"x")
    before = temps(root / "sst")
    reader.delete("sst/x")                                  # not a writer handle: unlinked
    assert reader._spares is None and temps(root / "sst") == before
    writer.delete("lease/r")                                # a directory the writer never uploads to
    assert not temps(root / "lease") and not writer._spares._recycled
    writer.delete("sst/a")
    assert len(writer._spares._recycled[str(root / "sst")]) == 1
    writer.close()
    reader.close()


def test_large_files_are_unlinked_and_each_directory_keeps_at_most_its_share(tmp_path, monkeypatch):
    monkeypatch.setattr(spares_module, "RECYCLE_MAX_BYTES", 1000)
    monkeypatch.setattr(spares_module, "RECYCLE_PER_DIRECTORY", 6)
    monkeypatch.setattr(spares_module, "RECYCLE_DIRECTORY_BYTES", 5 * 100 + 99)
    store = writer_store(tmp_path / "root")
    store.upload("sst/big", b"b" * 1001)
    store.delete("sst/big")
    names = [f"sst/{i:03d}" for i in range(10)]
    for name in names:
        store.upload(name, b"s" * 100)
    store.delete(names)
    kept = store._spares._recycled.get(os.path.dirname(store._file("sst/x")), [])
    assert len(kept) == 5, "the byte budget (5 files of 100 bytes) bounds it before the count (6)"
    assert all(os.path.getsize(path) == 100 for _, path, _ in kept), "the large file was not kept"
    monkeypatch.setattr(spares_module, "RECYCLE_DIRECTORY_BYTES", 1 << 20)
    more = [f"sst/m{i}" for i in range(10)]
    for name in more:                 # the first five reuse the kept files
        store.upload(name, b"m")
    assert not kept
    store.delete(more)
    assert len(kept) == 6, "the count bounds it"
    store.close()
    assert not temps(tmp_path / "root" / "sst")


def test_a_recycled_file_is_a_temporary_file_of_now_for_the_age_rule(tmp_path):
    store = writer_store(tmp_path / "root")
    store.upload("sst/old", b"o" * 100)
    os.utime(store._file("sst/old"), (1_000_000, 1_000_000))   # written long ago
    store.delete("sst/old")
    (fd, path, _), = store._spares._recycled[str(tmp_path / "root" / "sst")]
    other = LocalObjectStore(tmp_path / "root")   # another handle's cleanup: the age rule only
    assert other.cleanup_temp(older_than_seconds=600) == 0 and os.path.exists(path)
    other.close()
    store.upload("sst/new", b"n")
    assert store.read("sst/new") == b"n"
    store.close()


def test_a_crashed_writers_recycled_files_go_with_its_other_temporary_files(tmp_path):
    root = tmp_path / "root"
    store = writer_store(root)
    store.upload("sst/a", b"a" * 100)
    store.delete("sst/a")
    assert len(temps(root / "sst")) >= 1   # the recycled file (and maybe spares) under temp names
    # a crash: the handle is never closed; the next writer's open removes a dead writer's files
    store._spares._closed = True
    successor = LocalObjectStore(root)
    successor.cleanup_temp(writer_files=True)
    assert not temps(root / "sst")
    successor.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "delete", "put_if_absent", "stream"]),
                          st.integers(0, 5), st.integers(0, 3000)), max_size=40))
def test_a_writer_recycling_files_matches_a_dict_model(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("recycle")
    store = writer_store(root)
    model = {}
    for n, (op, key, size) in enumerate(ops):
        path, data = f"sst/{key}", bytes([n % 251]) * size
        if op == "put":
            store.upload(path, data)
            model[path] = data
        elif op == "stream":
            with store.streaming_upload(path) as upload:
                upload.write(data[:size // 2])
                upload.write(data[size // 2:])
            model[path] = data
        elif op == "put_if_absent":
            assert store.upload_if_absent(path, data) == (path not in model)
            model.setdefault(path, data)
        else:
            store.delete(path)
            model.pop(path, None)
        assert {m.path: m.size for m in store.list("sst/")} == {p: len(d) for p, d in model.items()}
    assert {p: store.read(p) for p in model} == model
    store.close()
    assert not temps(root / "sst") if (root / "sst").exists() else True
