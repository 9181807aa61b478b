"""Each executor alone, on hand-written chunks (retractions, update pairs, NULLs): Filter's pair
rewriting, Project's key and watermark mapping, Materialize's strict errors and conflict
behaviours, Dml's row ids, Union's barrier alignment, the hash dispatcher's split, and the
executor base's epoch bookkeeping. Stores: memory (state tables need one)."""

import asyncio

import numpy as np
import pyarrow as pa
import pytest

from hummock import HummockStorage
from relational import StateTable
from relational.types import DataType as T
from relational.vnode import compute_vnodes
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import BarrierError, ExecutorError, InconsistentStreamError, InvalidChunkError, StreamError
from stream.executor import Checked, UnaryExecutor
from stream.executors import Dml, Filter, Materialize, Project, Union
from stream.executors.filter import filter_chunk
from stream.expr import Arith, Cmp, Col, Lit
from stream.message import Watermark
from stream.row_id import MAX_GENERATOR, SEQUENCE_LIMIT, RowIdGenerator, split_row_id
from stream.runtime.dispatch import split_by_vnode, vnode_mapping
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows

S = Schema([("id", T.BIGINT), ("v", T.INT)])


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


def src(messages, schema=S, key=(0,)):
    return ListSource(schema, list(key), messages)


def rows(*items, schema=S):
    return StreamChunk.from_rows(schema, items)


# --- Filter -------------------------------------------------------------------------------------

def test_filter_rewrites_update_pairs_when_one_side_passes():
    chunk = rows(("U-", (1, 10)), ("U+", (1, 1)),      # only the old row passes -> DELETE
                 ("U-", (2, 1)), ("U+", (2, 10)),      # only the new row passes -> INSERT
                 ("U-", (3, 10)), ("U+", (3, 20)),     # both -> the pair stays
                 ("U-", (4, 1)), ("U+", (4, 2)),       # neither -> gone
                 ("+", (5, None)), ("-", (6, 7)))      # NULL condition drops; the delete passes
    out = filter_chunk(chunk, np.array([True, False, False, True, True, True, False, False, False, True]))
    out.validate([0])
    assert out.rows() == [(DELETE, (1, 10)), (INSERT, (2, 10)), (UPDATE_DELETE, (3, 10)),
                          (UPDATE_INSERT, (3, 20)), (DELETE, (6, 7))]
    assert chunk.ops[0] == UPDATE_DELETE   # the input is not changed


def test_filter_executor_treats_null_as_false_and_keeps_input_visibility():
    e = Epochs()
    chunk = rows(("+", (1, 5)), ("+", (2, None)), ("+", (3, 9))).with_visibility(np.array([True, True, False]))
    f = Filter(src([e.barrier(), chunk, e.barrier()]), Cmp(">", Col(1, T.INT), Lit(1, T.INT)))
    assert visible_rows(drain(Checked(f))) == [(INSERT, (1, 5))]
    with pytest.raises(ExecutorError, match="not BOOLEAN"):
        Filter(src([]), Col(1, T.INT))


# --- Project ------------------------------------------------------------------------------------

def test_project_keeps_ops_and_maps_the_stream_key_and_watermarks():
    e = Epochs()
    chunk = rows(("U-", (1, 2)), ("U+", (1, 3)), ("-", (2, None)))
    p = Project(src([e.barrier(), chunk, Watermark(0, 5), Watermark(1, 7), e.barrier()]),
                [Arith("*", Col(1, T.INT), Lit(10, T.INT)), Col(0, T.BIGINT)], names=["w", "id"])
    assert p.stream_key == [1] and p.schema.names == ("w", "id")
    out = drain(Checked(p))
    assert visible_rows(out) == [(UPDATE_DELETE, (20, 1)), (UPDATE_INSERT, (30, 1)), (DELETE, (None, 2))]
    assert [m for m in out if type(m) is Watermark] == [Watermark(1, 5)]   # column 1 is not projected
    with pytest.raises(ExecutorError, match=r"stream key columns \['id'\]"):
        Project(src([]), [Col(1, T.INT)])


# --- Materialize --------------------------------------------------------------------------------

def table(store, table_id=1, consistent=True):
    return StateTable(store, table_id, S.pairs(), [0], dist_key_indices=[0], consistent=consistent)


def test_materialize_applies_retractions_and_commits_on_every_barrier(store):
    e = Epochs()
    t = table(store)
    b1, b2, b3 = e.barrier(), e.barrier(), e.barrier()
    m = Materialize(src([b1, rows(("+", (1, 1)), ("+", (2, 2))), b2,
                         rows(("U-", (1, 1)), ("U+", (1, 5)), ("-", (2, 2)), ("+", (3, None))), b3]), t)
    out = drain(m)
    assert t.epoch == b3.curr_epoch   # init at b1.curr, committed at b2 and b3
    assert list(t.iter_with_prefix()) == [(1, 5), (3, None)]
    assert out[0] is b1 and out[-1] is b3
    assert store.get(1, t.serde.key_of_pk((2,)), b2.curr_epoch) is None   # deleted in the b2 epoch


def test_materialize_writes_a_pk_keeping_update_pair_into_a_relaxed_table_as_one_insert(store):
    e = Epochs()
    t = table(store, consistent=False)
    written = []
    real = t.write_chunk

    def spy(ops, columns, visibility=None):
        written.append(list(ops))
        return real(ops, columns, visibility)
    t.write_chunk = spy
    b1, b2, b3 = e.barrier(), e.barrier(), e.barrier()
    changes = rows(("U-", (1, 1)), ("U+", (1, 5)), ("U-", (2, 2)), ("U+", (4, 2)), ("U-", (None, 3)),
                   ("U+", (None, 6)), ("-", (3, 3)))
    m = Materialize(src([b1, rows(("+", (1, 1)), ("+", (2, 2)), ("+", (3, 3)), ("+", (None, 3))), b2,
                         changes, b3]), t)
    out = drain(m)
    assert [msg.rows() for msg in out if isinstance(msg, StreamChunk)][1] == changes.rows()   # passed on as is
    # the pairs keeping pk 1 and the NULL pk are inserts of their new rows; the pk change is not
    assert written[1] == [INSERT, UPDATE_DELETE, UPDATE_INSERT, INSERT, DELETE]
    assert set(t.iter_with_prefix()) == {(None, 6), (1, 5), (4, 2)}


def test_materialize_upserts_leave_an_unpaired_update_half_as_it_is():
    from stream.executors.materialize import _upserts
    ops = np.array([UPDATE_INSERT, UPDATE_DELETE, UPDATE_INSERT, UPDATE_DELETE], np.int8)
    new_ops, columns = _upserts(ops, [pa.array([1, 2, 2, 3]), pa.array([5, 6, 7, 8])], [0])
    assert new_ops.tolist() == [UPDATE_INSERT, INSERT, UPDATE_DELETE]
    assert [c.to_pylist() for c in columns] == [[1, 2, 3], [5, 7, 8]]


def test_materialize_strict_error_names_executor_and_key_and_applies_nothing(store):
    e = Epochs()
    t = table(store)
    b1, b2 = e.barrier(), e.barrier()
    m = Materialize(src([b1, rows(("+", (1, 1))), b2, rows(("+", (7, 7)), ("+", (1, 2)))]), t,
                    identity="Materialize(mv)")
    with pytest.raises(InconsistentStreamError) as info:
        drain(m)
    assert info.value.executor == "Materialize(mv)" and info.value.pk == (1,)
    assert "Materialize(mv)" in str(info.value) and "pk=(1,)" in str(info.value)
    assert list(t.iter_with_prefix()) == [(1, 1)]   # the refused chunk left nothing behind
    with pytest.raises(InconsistentStreamError, match="no row"):
        drain(Materialize(src([Epochs(b2.curr_epoch).barrier(), rows(("-", (9, 9)))]), table(store, 2)))


@pytest.mark.parametrize("conflict, expected_out, expected_rows", [
    ("overwrite",
     [(INSERT, (1, 1)), (UPDATE_DELETE, (1, 1)), (UPDATE_INSERT, (1, None)), (DELETE, (2, 20)),
      (UPDATE_DELETE, (3, 30)), (UPDATE_INSERT, (3, 4))],
     [(1, None), (3, 4)]),
    ("ignore", [(INSERT, (1, 1)), (DELETE, (2, 20))], [(1, 1), (3, 30)]),
    ("do_update_if_not_null",
     [(INSERT, (1, 1)), (DELETE, (2, 20)), (UPDATE_DELETE, (3, 30)), (UPDATE_INSERT, (3, 4))],
     [(1, 1), (3, 4)]),
])
def test_materialize_conflict_behaviours(store, conflict, expected_out, expected_rows):
    e = Epochs()
    t = table(store)
    b1, b2, b3 = e.barrier(), e.barrier(), e.barrier()
    seed = rows(("+", (2, 20)), ("+", (3, 30)))
    changes = rows(("+", (1, 1)), ("+", (1, None)),   # insert, then an insert of the same pk
                   ("-", (2, 999)),                    # a delete by pk (the stored row leaves)
                   ("-", (8, 8)),                      # a delete of a missing pk: nothing
                   ("+", (3, 4)))                      # an insert over a stored row
    m = Materialize(src([b1, seed, b2, changes, b3]), t, conflict=conflict)
    out = drain(Checked(m))
    assert visible_rows(out)[2:] == expected_out
    assert list(t.iter_with_prefix()) == expected_rows


# --- Dml and row ids ----------------------------------------------------------------------------

def test_dml_fills_row_ids_and_keeps_them_through_updates():
    e = Epochs()
    schema = Schema([("v", T.VARCHAR), ("_row_id", T.BIGINT)])
    b1 = e.barrier()
    chunk = StreamChunk.from_rows(schema, [("+", ("a", None)), ("+", ("b", None)), ("+", ("c", 42)),
                                           ("U-", ("c", 42)), ("U+", ("d", None)), ("-", ("a", 42))])
    out = visible_rows(drain(Dml(src([b1, chunk, e.barrier()], schema, [1]), schema, [1], row_id_index=1,
                                 generator=5)))
    ids = [row[1] for _, row in out]
    assert ids[2:] == [42, 42, 42, 42]
    assert ids[0] < ids[1] and all(split_row_id(i)[1] == 5 for i in ids[:2])
    assert split_row_id(ids[0])[0] >= b1.curr_epoch >> 16   # not below the first epoch's time
    bad = StreamChunk.from_rows(schema, [("-", ("a", None))])
    with pytest.raises(InvalidChunkError, match="must name its row id"):
        drain(Dml(src([e.barrier(), bad], schema, [1]), schema, [1], row_id_index=1))


def test_dml_casts_narrower_columns_and_refuses_other_types():
    e = Epochs()
    given = StreamChunk([INSERT], [pa.array([1], pa.int64()), pa.array([2], pa.int32())], S)
    wide = Schema([("id", T.BIGINT), ("v", T.BIGINT)])
    as_bigint = StreamChunk([INSERT], [pa.array([1]), pa.array([2])], wide)
    assert visible_rows(drain(Dml(src([e.barrier(), given]), S, [0]))) == [(INSERT, (1, 2))]
    with pytest.raises(InvalidChunkError, match="for a table of"):
        drain(Dml(src([Epochs().barrier(), as_bigint]), S, [0]))


def test_row_id_generator_is_unique_increasing_and_waits_after_borrowing():
    now = [1000]
    slept = []
    gen = RowIdGenerator(3, clock=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + 3)))
    ids = gen.next_ids(SEQUENCE_LIMIT * 2 + 5)   # needs 3 ms of sequence space at one clock reading
    assert (np.diff(ids) > 0).all() and len(set(ids.tolist())) == len(ids)
    assert split_row_id(int(ids[-1])) == (1002, 3, 4) and slept == [0.002]
    more = gen.next_ids(3)
    assert more[0] > ids[-1]
    restarted = RowIdGenerator(3, clock=lambda: 500)   # a clock behind: the epoch floor holds
    restarted.start_at_epoch(2000 << 16)
    assert split_row_id(int(restarted.next_ids(1)[0]))[0] == 2000



def test_a_wide_row_id_generator_fills_its_generator_numbers_in_order_within_a_millisecond():
    """A generator ``width`` numbers wide issues width x 4,096 ids a millisecond: the first
    number's sequences, then the next one's; ids still increase, stay unique, and keep to its
    numbers; a chunk past that borrows the next millisecond as a narrow one does."""
    now = [1000]
    slept = []
    gen = RowIdGenerator(2, clock=lambda: now[0], sleep=lambda s: (slept.append(s), now.__setitem__(0, now[0] + 1)),
                         width=3)
    ids = gen.next_ids(SEQUENCE_LIMIT * 3 + 7)
    assert (np.diff(ids) > 0).all() and len(set(ids.tolist())) == len(ids)
    parts = [split_row_id(int(i)) for i in ids]
    assert {g for _, g, _ in parts} == {2, 3, 4}
    assert parts[0] == (1000, 2, 0) and parts[SEQUENCE_LIMIT] == (1000, 3, 0)
    assert parts[3 * SEQUENCE_LIMIT - 1] == (1000, 4, SEQUENCE_LIMIT - 1) and parts[-1] == (1001, 2, 6)
    assert slept == [0.001]
    with pytest.raises(StreamError, match="do not fit"):
        RowIdGenerator(MAX_GENERATOR, width=2)

def test_dml_waits_for_borrowed_row_ids_at_the_barrier_not_after_each_chunk():
    """Chunks needing more than 4,096 ids in one millisecond borrow the next milliseconds: the
    DML executor does not sleep after each of them (its thread runs every actor of the stream)
    but at the next barrier, so no id is ahead of the clock once the barrier -- and the commit
    of the epoch holding the ids -- has passed. Ids stay unique and increasing; a lead past
    ``MAX_LEAD_MS`` is slept off at once."""
    from relational.row_id import MAX_LEAD_MS
    e = Epochs()
    schema = Schema([("v", T.BIGINT), ("_row_id", T.BIGINT)])
    b1, b2 = e.barrier(), e.barrier()
    now = [b1.curr_epoch >> 16]
    events = []

    def chunk(n):
        return StreamChunk(np.full(n, INSERT, np.int8), [pa.array(range(n), pa.int64()), pa.nulls(n, pa.int64())],
                           schema)

    class Clocked(Dml):
        def on_init(self, barrier):
            self.row_ids._clock = lambda: now[0]
            self.row_ids._sleep = lambda s: (events.append(("sleep", s)), now.__setitem__(0, now[0] + round(s * 1000)))
            super().on_init(barrier)

        def on_chunk(self, c):
            out = super().on_chunk(c)
            events.append(("chunk", self.row_ids._ts - now[0]))
            return out

    out = drain(Clocked(src([b1, chunk(SEQUENCE_LIMIT), chunk(SEQUENCE_LIMIT), chunk(5), b2], schema, [1]),
                        schema, [1], row_id_index=1))
    assert events == [("chunk", 0), ("chunk", 1), ("chunk", 2), ("sleep", 0.002)]
    ids = [row[1] for _, row in visible_rows(out)]
    assert len(ids) == 2 * SEQUENCE_LIMIT + 5 and all(a < b for a, b in zip(ids, ids[1:]))
    events.clear()
    gen = RowIdGenerator(1, clock=lambda: now[0], sleep=lambda s: events.append(s))
    gen.next_ids(SEQUENCE_LIMIT * (MAX_LEAD_MS + 3), wait=False)   # 52 ms past the clock
    assert events == [0.002]


# --- Union and alignment ------------------------------------------------------------------------

def test_union_aligns_barriers_and_merges_watermarks():
    e = Epochs()
    b1, b2 = e.barrier(), e.barrier()
    left = src([b1, rows(("+", (1, 1))), Watermark(1, 5), rows(("+", (2, 2))), b2])
    right = src([b1, Watermark(1, 3), rows(("+", (3, 3))), b2])
    out = drain(Checked(Union([left, right])))
    kinds = [type(m).__name__ for m in out]
    assert kinds[0] == "Barrier" and kinds[-1] == "Barrier" and kinds.count("Barrier") == 2
    assert sorted(r for _, r in visible_rows(out)) == [(1, 1), (2, 2), (3, 3)]
    assert [m for m in out if type(m) is Watermark] == [Watermark(1, 3)]


def test_union_refuses_inputs_whose_barriers_differ():
    e1, e2 = Epochs(), Epochs()
    with pytest.raises(BarrierError, match="different barriers"):
        drain(Union([src([e1.barrier()]), src([e2.barrier()])]))


# --- the executor base --------------------------------------------------------------------------

class _Count(UnaryExecutor):
    def on_chunk(self, chunk):
        return chunk


def test_base_requires_a_first_barrier_and_chained_epochs():
    e = Epochs()
    with pytest.raises(ExecutorError, match="first message must be a barrier"):
        drain(_Count(src([rows(("+", (1, 1)))])))
    b1 = e.barrier()
    e.barrier()
    with pytest.raises(BarrierError, match="does not follow"):
        drain(_Count(src([b1, e.barrier()])))


def test_checked_names_the_executor_that_broke_a_chunk():
    class Broken(UnaryExecutor):
        def on_chunk(self, chunk):
            return chunk.with_ops(np.array([UPDATE_DELETE] * len(chunk), np.int8))
    e = Epochs()
    with pytest.raises(ExecutorError, match="Broken: yielded an invalid chunk"):
        drain(Checked(Broken(src([e.barrier(), rows(("+", (1, 1)))]))))


# --- hash dispatch --------------------------------------------------------------------------------

def test_split_by_vnode_routes_rows_and_splits_moved_pairs():
    chunk = rows(*[("+", (i, i)) for i in range(40)], ("U-", (100, 1)), ("U+", (101, 1)))
    n = 3
    mapping = vnode_mapping(n)
    parts = split_by_vnode(chunk, [0], mapping, n)
    vnodes = compute_vnodes([chunk.columns[0]], [T.BIGINT])
    seen = []
    for i, part in enumerate(parts):
        assert part is not None
        part.validate()
        for op, row in part.rows():
            assert mapping[compute_vnodes([pa.array([row[0]])], [T.BIGINT])[0]] == i
            seen.append((op, row))
    target = mapping[vnodes]
    pair_ops = {row: op for op, row in seen if row[0] >= 100}
    if target[40] != target[41]:
        assert pair_ops == {(100, 1): DELETE, (101, 1): INSERT}
    else:
        assert pair_ops == {(100, 1): UPDATE_DELETE, (101, 1): UPDATE_INSERT}
    assert len(seen) == 42


def test_aligned_fan_in_yields_lowest_input_first_when_both_are_ready():
    from stream.align import align_barriers
    e = Epochs()
    b, b2 = e.barrier(), e.barrier()

    async def go():
        streams = [src([b, rows(("+", (1, 1))), b2]).execute(),
                   src([b, rows(("+", (2, 2))), b2]).execute()]
        return [(i, type(m).__name__) async for i, m in align_barriers(streams, "t")]
    out = asyncio.run(go())
    assert out[0] == (None, "Barrier") and out[-1] == (None, "Barrier") and len(out) == 4
