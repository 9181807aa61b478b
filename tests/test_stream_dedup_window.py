"""AppendOnlyDedup (first row per key, across chunks, restarts and a tiny budget; refuses
retractions) and the window executors (TumbleWindow, HopWindow: window arithmetic against a
plain-Python computation, NULL times, update pairs expanded pairwise and rewritten when their
windows move), on hand-written chunks and a hypothesis test."""

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.types import DataType as T
from stream.cache import MemoryBudget
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError
from stream.executor import Checked
from stream.executors.dedup import AppendOnlyDedup, dedup_state_table
from stream.executors.hop_window import HopWindow, TumbleWindow
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows

S = Schema([("id", T.BIGINT), ("k", T.VARCHAR), ("t", T.BIGINT)])


def rows(*items, schema=S):
    return StreamChunk.from_rows(schema, items)


# --- Dedup --------------------------------------------------------------------------------------

def test_dedup_keeps_the_first_row_per_key_across_chunks_and_restarts():
    with HummockStorage.open("memory://") as store:
        e = Epochs()
        budget = MemoryBudget(300)     # a few keys at most: the rest is probed in the table
        first = [e.barrier(), rows(("+", (1, "a", 0)), ("+", (2, "b", 0)), ("+", (3, "a", 1))),
                 rows(*[("+", (10 + i, f"k{i}", 0)) for i in range(20)]), e.barrier(),
                 rows(("+", (4, "b", 2)), ("+", (5, "c", 2)), ("+", (6, "c", 3))), e.barrier()]
        x = AppendOnlyDedup(ListSource(S, [0], first), dedup_state_table(store, 1, S, [1]), [1], budget=budget)
        out = visible_rows(drain(Checked(x)))
        assert [r[0] for _, r in out] == [1, 2, *range(10, 30), 5]
        assert all(op == INSERT for op, _ in out) and budget.evictions > 0
        x._check()
        again = [e.barrier(), rows(("+", (7, "c", 9)), ("+", (8, "d", 9)), ("+", (9, "k3", 0))), e.barrier()]
        y = AppendOnlyDedup(ListSource(S, [0], again), dedup_state_table(store, 1, S, [1]), [1], budget=budget)
        assert visible_rows(drain(Checked(y))) == [(INSERT, (8, "d", 9))]


def test_dedup_refuses_retractions():
    with HummockStorage.open("memory://") as store:
        e = Epochs()
        x = AppendOnlyDedup(ListSource(S, [0], [e.barrier(), rows(("-", (1, "a", 0)))]),
                            dedup_state_table(store, 1, S, [1]), [1])
        with pytest.raises(ExecutorError, match="append-only"):
            drain(x)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8), max_size=8),
       st.sampled_from([0, 200, 1 << 20]))
def test_dedup_passes_each_key_once(batches, capacity):
    with HummockStorage.open("memory://") as store:
        e = Epochs()
        msgs, n = [e.barrier()], 0
        for keys in batches:
            msgs.append(rows(*[("+", (n + i, k, 0)) for i, k in enumerate(keys)]))
            n += len(keys)
            msgs.append(e.barrier())
        x = AppendOnlyDedup(ListSource(S, [0], msgs), dedup_state_table(store, 1, S, [1]), [1],
                            budget=MemoryBudget(capacity))
        got = [r for _, r in visible_rows(drain(Checked(x)))]
        flat = [(i, k, 0) for i, k in enumerate(k for keys in batches for k in keys)]
        want = list({r[1]: r for r in reversed(flat)}.values())
        assert sorted(got) == sorted(want)


# --- windows ------------------------------------------------------------------------------------

def test_tumble_adds_the_window_and_keeps_ops_and_key():
    e = Epochs()
    x = TumbleWindow(ListSource(S, [0], [e.barrier(), rows(("U-", (1, "a", 7)), ("U+", (1, "a", 12)),
                                                           ("+", (2, "b", None)), ("+", (3, "c", -1))),
                                         e.barrier()]), 2, 5, offset=1)
    assert x.stream_key == [0] and x.schema.names[-2:] == ("window_start", "window_end")
    assert visible_rows(drain(Checked(x))) == [
        (UPDATE_DELETE, (1, "a", 7, 6, 11)), (UPDATE_INSERT, (1, "a", 12, 11, 16)),
        (INSERT, (2, "b", None, None, None)), (INSERT, (3, "c", -1, -4, 1))]


def test_hop_expands_each_row_into_every_window_containing_it():
    e = Epochs()
    x = HopWindow(ListSource(S, [0], [e.barrier(), rows(("+", (1, "a", 7)), ("+", (2, "b", None))), e.barrier()]),
                  2, slide=2, size=6)
    assert x.stream_key == [0, 3]
    assert visible_rows(drain(Checked(x))) == [(INSERT, (1, "a", 7, 2, 8)), (INSERT, (1, "a", 7, 4, 10)),
                                               (INSERT, (1, "a", 7, 6, 12))]


def test_hop_chunk_without_update_pairs_keeps_rows_in_order_each_rows_windows_together():
    """The path without update pairs (no reordering needed): row by row, earliest window first,
    deletes where they were."""
    e = Epochs()
    chunk = rows(("+", (1, "a", 5)), ("-", (2, "b", 0)), ("+", (3, "c", 2)))
    x = HopWindow(ListSource(S, [0], [e.barrier(), chunk, e.barrier()]), 2, slide=2, size=4)
    assert visible_rows(drain(Checked(x))) == [
        (INSERT, (1, "a", 5, 2, 6)), (INSERT, (1, "a", 5, 4, 8)), (DELETE, (2, "b", 0, -2, 2)),
        (DELETE, (2, "b", 0, 0, 4)), (INSERT, (3, "c", 2, 0, 4)), (INSERT, (3, "c", 2, 2, 6))]


def test_hop_update_pairs_stay_pairs_only_when_the_window_is_the_same():
    e = Epochs()
    chunk = rows(("U-", (1, "a", 4)), ("U+", (1, "b", 5)),     # same windows: pairs
                 ("U-", (2, "a", 4)), ("U+", (2, "a", 9)),     # windows move: - and +
                 ("U-", (3, "a", None)), ("U+", (3, "a", 1)))  # only the new row has windows: +
    x = HopWindow(ListSource(S, [0], [e.barrier(), chunk, e.barrier()]), 2, slide=2, size=4)
    out = visible_rows(drain(Checked(x)))
    # rows in input order, a row's windows together: a moved pair deletes every old window
    # before inserting the new ones (interleaved, a shared window would be deleted after its insert)
    assert out == [(UPDATE_DELETE, (1, "a", 4, 2, 6)), (UPDATE_INSERT, (1, "b", 5, 2, 6)),
                   (UPDATE_DELETE, (1, "a", 4, 4, 8)), (UPDATE_INSERT, (1, "b", 5, 4, 8)),
                   (DELETE, (2, "a", 4, 2, 6)), (DELETE, (2, "a", 4, 4, 8)),
                   (INSERT, (2, "a", 9, 6, 10)), (INSERT, (2, "a", 9, 8, 12)),
                   (INSERT, (3, "a", 1, -2, 2)), (INSERT, (3, "a", 1, 0, 4))]


def test_hop_update_whose_windows_overlap_keeps_the_shared_windows():
    """U-/U+ of a row whose old and new windows overlap (slide 2, size 6: times 4 -> 6 share
    [2, 8) and [4, 10)): applied in order, the windows left are exactly the new row's."""
    e = Epochs()
    chunk = rows(("U-", (1, "a", 4)), ("U+", (1, "a", 6)))
    x = HopWindow(ListSource(S, [0], [e.barrier(), rows(("+", (1, "a", 4))), chunk, e.barrier()]), 2,
                  slide=2, size=6)
    state = {}
    for op, row in visible_rows(drain(Checked(x))):
        key = (row[0], row[3])
        if op in (DELETE, UPDATE_DELETE):
            assert state.pop(key) == row
        else:
            assert key not in state
            state[key] = row
    assert sorted(state) == [(1, 2), (1, 4), (1, 6)]


def test_timestamps_and_timedeltas():
    schema = Schema([("id", T.BIGINT), ("ts", T.TIMESTAMP)])
    e = Epochs()
    t = datetime.datetime(2024, 1, 1, 10, 7, 30)
    x = HopWindow(ListSource(schema, [0], [e.barrier(), StreamChunk.from_rows(schema, [("+", (1, t))]), e.barrier()]),
                  1, slide=datetime.timedelta(minutes=5), size=datetime.timedelta(minutes=10))
    got = [(r[2].strftime("%H:%M"), r[3].strftime("%H:%M")) for _, r in visible_rows(drain(Checked(x)))]
    assert got == [("10:00", "10:10"), ("10:05", "10:15")]
    with pytest.raises(ExecutorError, match="multiple"):
        HopWindow(ListSource(schema, [0], []), 1, slide=3, size=10)
    with pytest.raises(ExecutorError, match="TIMESTAMP"):
        TumbleWindow(ListSource(S, [0], []), 1, 10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=20), st.integers(1, 4),
       st.integers(1, 3), st.integers(-3, 3))
def test_hop_windows_equal_the_python_windows(times, slide, units, offset):
    e = Epochs()
    size = slide * units
    x = HopWindow(ListSource(S, [0], [e.barrier(), rows(*[("+", (i, "x", t)) for i, t in enumerate(times)]),
                                      e.barrier()]), 2, slide=slide, size=size, offset=offset)
    got = sorted(r for _, r in visible_rows(drain(Checked(x))))
    want = sorted((i, "x", t, s, s + size) for i, t in enumerate(times) if t is not None
                  for s in range(t - size - abs(offset) - slide, t + 1)
                  if (s - offset) % slide == 0 and s <= t < s + size)
    assert got == want
