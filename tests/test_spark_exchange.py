"""Exchange files (sql/spark_pipeline/exchange.py) and scratch uploads, without Spark.

- ``spill`` moves payloads of at least ``inline_bytes`` to scratch objects and names them in
  ``"r"`` records; smaller payloads, metas and ``inline_bytes=None`` stay inline;
- ``batch_records`` reads a named payload back, as a stage task does, byte for byte;
- a payload whose object is gone is a typed error naming it; a path outside the prefix too;
- ``clear`` removes one batch's objects or all of them, and nothing else;
- ``upload_scratch`` publishes whole objects (readable, listed, no temporary file left) on
  the local store and, by its default, on the memory store.
(The pipeline through exchange files: test_spark_pipeline.py's row-moving test.)
"""

from __future__ import annotations

import os

import pytest

from hummock.object_store import LocalObjectStore, MemoryObjectStore
from sql.spark_pipeline import exchange
from sql.spark_pipeline.task import PipelineTaskError, batch_records, record_batch

KEYS = {0: 10, 1: 11}


@pytest.fixture(params=["local", "memory"])
def objects(request, tmp_path):
    store = LocalObjectStore(tmp_path) if request.param == "local" else MemoryObjectStore()
    yield store
    store.close()


def test_spill_moves_large_payloads_only(objects):
    big, small = os.urandom(1000), b"tiny"
    records = [("b", 0, 3, big), ("b", 1, 3, small), ("m", 0, -1, big)]
    out = list(exchange.spill(records, objects, 77, "s5", 100))
    assert out[1:] == records[1:]               # small blob and meta stay
    kind, part, edge, path = out[0]
    assert (kind, part, edge) == ("r", 0, 3) and path.startswith(b"pipeline-exchange/77/s5-")
    assert objects.read(path.decode()) == big
    assert list(exchange.spill(records, objects, 77, "s5", None)) == records
    assert len(objects.list("pipeline-exchange/")) == 1


def test_spill_names_never_collide_between_runs(objects):
    """A retried producer (same name) writes new objects: the first attempt's stay intact."""
    first = list(exchange.spill([("b", 0, 1, b"a" * 10)], objects, 5, "s1", 1))
    second = list(exchange.spill([("b", 0, 1, b"b" * 10)], objects, 5, "s1", 1))
    assert first[0][3] != second[0][3]
    assert objects.read(first[0][3].decode()) == b"a" * 10


def test_batch_records_reads_exchange_files(objects):
    payloads = [os.urandom(500), b"inline"]
    records = list(exchange.spill([("b", 1, 4, payloads[0]), ("b", 1, 4, payloads[1])], objects, 9, "d", 100))
    assert [r[0] for r in records] == ["r", "b"]
    got = list(batch_records([record_batch(records, KEYS, src=7)], 1, objects))
    assert got == [(4, payloads[0], 7), (4, payloads[1], 7)]
    with pytest.raises(PipelineTaskError, match="no object store"):
        list(batch_records([record_batch(records, KEYS, src=7)], 1, None))


def test_lost_exchange_file_is_a_typed_error(objects):
    records = list(exchange.spill([("b", 0, 2, b"x" * 50)], objects, 12, "r0", 10))
    exchange.clear(objects, 12)
    with pytest.raises(exchange.ExchangeLostError, match="pipeline-exchange/12/r0-.* is gone"):
        list(batch_records([record_batch(records, KEYS)], 0, objects))
    with pytest.raises(exchange.ExchangeLostError, match="outside"):
        exchange.fetch(objects, b"sst/1.sst")


def test_clear_one_batch_or_all(objects):
    objects.upload("sst/1.sst", b"keep")
    for epoch in (1, 2):
        list(exchange.spill([("b", 0, 0, b"p" * 20)] * 3, objects, epoch, "d", 1))
    assert exchange.clear(objects, 1) == 3
    assert {m.path.split("/")[1] for m in objects.list("pipeline-exchange/")} == {"2"}
    assert exchange.clear(objects) == 3
    assert exchange.clear(objects) == 0
    assert [m.path for m in objects.list("")] == ["sst/1.sst"]


def test_local_scratch_upload_leaves_no_temporary_file(tmp_path):
    store = LocalObjectStore(tmp_path)
    try:
        store.upload_scratch("pipeline-exchange/1/a", b"one")
        store.upload_scratch("pipeline-exchange/1/a", b"two")   # replaced whole
        assert store.read("pipeline-exchange/1/a") == b"two"
        assert sorted(os.listdir(tmp_path / "pipeline-exchange" / "1")) == ["a"]
        with pytest.raises(Exception, match="path"):
            store.upload_scratch("../escape", b"x")
    finally:
        store.close()
