"""Dml's bulk path (issue 30 item 1): a chunk of only INSERTs whose row ids are all NULL (what
INSERT and insert_arrow hand in) gets fresh increasing ids without the update-pair checks;
every other chunk is still validated, and a malformed bulk chunk is still refused."""

import numpy as np
import pyarrow as pa
import pytest

from relational.types import DataType as T
from stream.chunk import INSERT, StreamChunk
from stream.errors import InvalidChunkError
from stream.executors import Dml
from stream.row_id import split_row_id
from stream_harness import Epochs, ListSource, drain, visible_rows
from stream.schema import Schema

S = Schema([("v", T.VARCHAR), ("_row_id", T.BIGINT)])


def _run(*chunks, key=(1,), row_id_index=1, schema=S):
    e = Epochs()
    return visible_rows(drain(Dml(ListSource(schema, list(key), [e.barrier(), *chunks, e.barrier()]), schema,
                                  list(key), row_id_index=row_id_index, generator=3)))


def test_a_bulk_chunk_gets_fresh_increasing_ids():
    n = 5000
    bulk = StreamChunk(np.full(n, INSERT, np.int8), [pa.array([f"r{i}" for i in range(n)]),
                                                     pa.nulls(n, pa.int64())], S)
    out = _run(bulk, bulk)
    ids = [row[1] for _, row in out]
    assert len(ids) == 2 * n and ids == sorted(set(ids)) and all(split_row_id(i)[1] == 3 for i in ids)
    assert [row[0] for _, row in out[:3]] == ["r0", "r1", "r2"] and all(op == INSERT for op, _ in out)


def test_a_malformed_or_mixed_chunk_is_still_refused():
    short = StreamChunk(np.full(3, INSERT, np.int8), [pa.array(["a", "b"]), pa.nulls(3, pa.int64())], S)
    with pytest.raises(InvalidChunkError):
        _run(short)
    orphan = StreamChunk(np.array([INSERT, 3], np.int8), [pa.array(["a", "b"]), pa.array([None, 7], pa.int64())], S)
    with pytest.raises(InvalidChunkError, match="update-delete"):
        _run(orphan)
    keyed = Schema([("k", T.INT), ("v", T.VARCHAR)])
    moved = StreamChunk(np.array([3, 4], np.int8), [pa.array([1, 2], pa.int32()), pa.array(["a", "b"])],
                        keyed)   # an update pair changing its key
    with pytest.raises(InvalidChunkError):
        _run(moved, key=(0,), row_id_index=None, schema=keyed)
    fine = StreamChunk.from_rows(keyed, [("+", (1, "a")), ("+", (2, "b"))])
    assert _run(fine, key=(0,), row_id_index=None, schema=keyed) == [(INSERT, (1, "a")), (INSERT, (2, "b"))]
