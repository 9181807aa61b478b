"""StreamChunk, its builder and the messages (stream/chunk.py, stream/message.py): the chunk
contract (update pairs adjacent, visibility never splits a pair, column types), compaction,
pretty printing, and a builder that never splits an update pair (hypothesis)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relational.types import DataType as T
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk, StreamChunkBuilder
from stream.errors import BarrierError, InvalidChunkError
from stream.message import Barrier, Stop
from stream.schema import Schema

S = Schema([("id", T.BIGINT), ("name", T.VARCHAR)])


def test_from_rows_round_trips_ops_values_and_nulls():
    rows = [(INSERT, (1, "a")), (DELETE, (2, None)), (UPDATE_DELETE, (3, "x")), (UPDATE_INSERT, (3, "y"))]
    chunk = StreamChunk.from_rows(S, [("+", (1, "a")), ("-", (2, None)), ("U-", (3, "x")), ("U+", (3, "y"))])
    assert chunk.rows() == rows
    assert chunk.ops.dtype == np.int8 and len(chunk) == chunk.cardinality == 4
    assert chunk.columns[0].type == pa.int64() and chunk.columns[1].type == pa.string()


def test_visibility_and_compact():
    chunk = StreamChunk.from_rows(S, [("+", (1, "a")), ("+", (2, "b")), ("-", (3, "c"))])
    masked = chunk.with_visibility(np.array([True, False, True]))
    assert masked.cardinality == 2 and len(masked) == 3
    compacted = masked.compact()
    assert compacted.visibility is None and len(compacted) == 2
    assert compacted.rows() == [(INSERT, (1, "a")), (DELETE, (3, "c"))] == masked.rows()
    assert chunk.with_visibility(np.ones(3, bool)).visibility is None   # all visible: no mask kept


@pytest.mark.parametrize("rows, row, message", [
    ([("U-", (1, "a")), ("+", (2, "b"))], 0, "not immediately followed"),
    ([("U-", (1, "a"))], 0, "not immediately followed"),
    ([("+", (1, "a")), ("U+", (1, "b"))], 1, "does not follow"),
    ([("U+", (1, "b")), ("U-", (1, "a"))], 0, "does not follow"),
])
def test_validate_refuses_broken_update_pairs(rows, row, message):
    with pytest.raises(InvalidChunkError, match=message) as info:
        StreamChunk.from_rows(S, rows)
    assert info.value.row == row


def test_validate_refuses_a_mask_that_splits_a_pair_and_bad_columns():
    chunk = StreamChunk.from_rows(S, [("U-", (1, "a")), ("U+", (1, "b"))])
    with pytest.raises(InvalidChunkError, match="hides one row"):
        chunk.with_visibility(np.array([False, True])).validate()
    chunk.with_visibility(np.array([False, False])).validate()   # both hidden: fine
    with pytest.raises(InvalidChunkError, match="is int32"):
        StreamChunk([1], [pa.array([1], pa.int32()), pa.array(["a"])], S).validate()
    with pytest.raises(InvalidChunkError, match="has 2 values"):
        StreamChunk([1], [pa.array([1, 2]), pa.array(["a"])], S).validate()
    with pytest.raises(InvalidChunkError, match="unknown op 7"):
        StreamChunk([7], [pa.array([1]), pa.array(["a"])], S).validate()
    with pytest.raises(InvalidChunkError, match="unknown op"):
        StreamChunk.from_rows(S, [("*", (1, "a"))])


def test_validate_with_stream_key_refuses_a_pair_that_changes_the_key():
    moved = StreamChunk.from_rows(S, [("+", (9, "z")), ("U-", (1, "a")), ("U+", (2, "a"))])
    moved.validate()   # without a key: fine
    with pytest.raises(InvalidChunkError, match="stream key column id") as info:
        moved.validate([0])
    assert info.value.row == 1
    StreamChunk.from_rows(S, [("U-", (None, "a")), ("U+", (None, "b"))]).validate([0])   # NULL = NULL here


def test_pretty_print_has_an_op_column_and_counts_hidden_rows():
    chunk = StreamChunk.from_rows(S, [("+", (1, "ann")), ("U-", (2, None)), ("U+", (2, "bob")), ("-", (3, "c"))])
    text = chunk.with_visibility(np.array([True, True, True, False])).to_pretty()
    lines = text.splitlines()
    assert lines[1].split("|")[1:4] == [" op ", " id ", " name "]
    assert "| U- | 2  | NULL |" in text and "| +  | 1  | ann  |" in text
    assert lines[-1] == "(1 invisible rows)"


def test_concat_and_select_keep_rows_and_visibility():
    a = StreamChunk.from_rows(S, [("+", (1, "a"))])
    b = StreamChunk.from_rows(S, [("+", (2, "b")), ("-", (3, "c"))]).with_visibility(np.array([False, True]))
    both = StreamChunk.concat([a, b])
    assert both.rows() == [(INSERT, (1, "a")), (DELETE, (3, "c"))]
    assert both.select([1]).rows() == [(INSERT, ("a",)), (DELETE, ("c",))]
    assert both.to_record_batch("op").to_pydict() == {"op": [1, 2], "id": [1, 3], "name": ["a", "c"]}


@given(st.lists(st.sampled_from(["+", "-", "U"]), max_size=60), st.integers(3, 9))
def test_builder_never_splits_an_update_pair(kinds, capacity):
    builder = StreamChunkBuilder(S, capacity)
    chunks, expected = [], []
    for i, kind in enumerate(kinds):
        if kind == "U":
            expected += [(UPDATE_DELETE, (i, "old")), (UPDATE_INSERT, (i, "new"))]
            out = builder.append_update((i, "old"), (i, "new"))
        else:
            op = INSERT if kind == "+" else DELETE
            expected.append((op, (i, None)))
            out = builder.append(op, (i, None))
        if out is not None:
            chunks.append(out)
    last = builder.take()
    if last is not None:
        chunks.append(last)
    assert [r for c in chunks for r in c.rows()] == expected
    for c in chunks:
        assert 1 <= len(c) <= capacity
        c.validate([0])   # every pair whole, within one chunk


def test_builder_refuses_a_lone_update_insert_and_tiny_capacity():
    with pytest.raises(InvalidChunkError):
        StreamChunkBuilder(S, 4).append(UPDATE_INSERT, (1, "a"))
    with pytest.raises(InvalidChunkError):
        StreamChunkBuilder(S, 2)


def test_barrier_epochs_and_mutations():
    with pytest.raises(BarrierError):
        Barrier(5 << 16, 5 << 16)
    b = Barrier(1 << 16, 2 << 16, True, Stop(frozenset({3})))
    assert b.is_stop(3) and not b.is_stop(4) and "checkpoint" in repr(b)
