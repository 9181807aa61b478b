"""DynamicFilter on hand-written chunks: the scalar moving up and down, becoming NULL and coming
back, left rows with NULL keys, update pairs crossing the boundary, recovery of the right row,
and a hypothesis test (every comparator, random left/right changes and barriers, restarts)
against the Python filter at every barrier. Also barrier alignment through execute()."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hummock import HummockStorage
from relational.types import DataType as T
from stream.chunk import DELETE, INSERT, UPDATE_DELETE, UPDATE_INSERT, StreamChunk
from stream.errors import ExecutorError, InconsistentStreamError
from stream.executor import Checked
from stream.executors.dynamic_filter import DynamicFilter, dynamic_filter_left_table, dynamic_filter_right_table
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows
from stream_topn_model import apply_changes, passes

L = Schema([("id", T.BIGINT), ("x", T.INT)])
R = Schema([("m", T.INT)])


class Driver:
    def __init__(self, store, op):
        self.store, self.op = store, op
        self.epochs = Epochs()
        self.mv, self.left = {}, {}
        self.right = self.committed_right = None     # the right row (a tuple) or None
        self.start()

    def start(self):
        lt = dynamic_filter_left_table(self.store, 1, L, [0], 1)
        rt = dynamic_filter_right_table(self.store, 2, R)
        self.x = DynamicFilter(ListSource(L, [0], []), ListSource(R, [], []), 1, self.op, lt, rt)
        self.x.handle_barrier(self.epochs.barrier())

    def take(self, out):
        out = [] if out is None else [out] if isinstance(out, StreamChunk) else [m for m in out
                                                                               if type(m) is StreamChunk]
        apply_changes(self.mv, out, [0])
        return [r for c in out for r in c.rows()]

    def left_rows(self, *items):
        chunk = StreamChunk.from_rows(L, items)
        for op, row in chunk.rows():
            if op in (INSERT, UPDATE_INSERT):
                self.left[row[0]] = row
            else:
                del self.left[row[0]]
        return self.take(self.x.on_left(chunk))

    def right_rows(self, *items):
        self.x.on_right(StreamChunk.from_rows(R, items))
        for op, row in items:
            self.right = row if op in ("+", "U+") else None

    def barrier(self):
        out = self.take(self.x.handle_barrier(self.epochs.barrier()))
        self.committed_right = self.right
        self.check()
        return out

    def check(self):
        value = None if self.committed_right is None else self.committed_right[0]
        want = {(r[0],): r for r in self.left.values() if passes(self.op, r[1], value)}
        assert self.mv == want
        self.x._check()


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


def test_the_scalar_moves_up_and_down_and_rows_leave_and_enter(store):
    d = Driver(store, ">")
    assert d.left_rows(*[("+", (i, i)) for i in range(10)]) == []     # no scalar yet: nothing passes
    d.right_rows(("+", (5,)))
    assert d.barrier() == [(INSERT, (6, 6)), (INSERT, (7, 7)), (INSERT, (8, 8)), (INSERT, (9, 9))]
    assert d.left_rows(("+", (20, 5)), ("+", (21, 6))) == [(INSERT, (21, 6))]
    d.right_rows(("U-", (5,)), ("U+", (7,)))
    assert sorted(d.barrier()) == [(DELETE, (6, 6)), (DELETE, (7, 7)), (DELETE, (21, 6))]
    d.right_rows(("U-", (7,)), ("U+", (2,)))
    assert sorted(d.barrier()) == [(INSERT, (3, 3)), (INSERT, (4, 4)), (INSERT, (5, 5)), (INSERT, (6, 6)),
                                   (INSERT, (7, 7)), (INSERT, (20, 5)), (INSERT, (21, 6))]


def test_the_scalar_becoming_null_removes_everything_and_coming_back_restores(store):
    d = Driver(store, "<=")
    d.left_rows(("+", (1, 1)), ("+", (2, None)), ("+", (3, 3)))
    d.right_rows(("+", (2,)))
    assert d.barrier() == [(INSERT, (1, 1))]
    d.right_rows(("U-", (2,)), ("U+", (None,)))
    assert d.barrier() == [(DELETE, (1, 1))]
    d.right_rows(("U-", (None,)), ("U+", (3,)))
    assert d.barrier() == [(INSERT, (1, 1)), (INSERT, (3, 3))]   # never the NULL key
    d.right_rows(("-", (3,)))
    assert sorted(d.barrier()) == [(DELETE, (1, 1)), (DELETE, (3, 3))]


def test_changes_within_an_epoch_apply_at_the_barrier_only(store):
    d = Driver(store, ">=")
    d.right_rows(("+", (5,)))
    d.barrier()
    d.right_rows(("U-", (5,)), ("U+", (0,)))
    assert d.left_rows(("+", (1, 3)), ("+", (2, 6))) == [(INSERT, (2, 6))]   # still >= 5 in this epoch
    d.right_rows(("U-", (0,)), ("U+", (5,)))
    assert d.barrier() == []          # the value came back: nothing moves


def test_update_pairs_crossing_the_boundary_are_rewritten(store):
    d = Driver(store, ">")
    d.right_rows(("+", (5,)))
    d.barrier()
    d.left_rows(("+", (1, 9)), ("+", (2, 1)), ("+", (3, 8)))
    assert d.left_rows(("U-", (1, 9)), ("U+", (1, 2)), ("U-", (2, 1)), ("U+", (2, 7)),
                       ("U-", (3, 8)), ("U+", (3, 6))) == [(DELETE, (1, 9)), (INSERT, (2, 7)),
                                                           (UPDATE_DELETE, (3, 8)), (UPDATE_INSERT, (3, 6))]
    d.barrier()


def test_the_right_row_survives_a_restart(store):
    d = Driver(store, "<")
    d.left_rows(("+", (1, 1)), ("+", (2, 5)))
    d.right_rows(("+", (3,)))
    d.barrier()
    d.start()     # a new executor over the same tables
    assert d.x.value == 3
    d.right_rows(("U-", (3,)), ("U+", (9,)))
    assert d.barrier() == [(INSERT, (2, 5))]


def test_bad_input(store):
    d = Driver(store, ">")
    with pytest.raises(InconsistentStreamError):
        d.right_rows(("-", (3,)))
    with pytest.raises(InconsistentStreamError, match="DynamicFilter"):
        d.x.on_left(StreamChunk.from_rows(L, [("-", (1, 1))]))
    lt = dynamic_filter_left_table(store, 1, L, [0], 1)
    rt = dynamic_filter_right_table(store, 2, R)
    with pytest.raises(ExecutorError, match="comparator"):
        DynamicFilter(ListSource(L, [0], []), ListSource(R, [], []), 1, "=", lt, rt)


def test_execute_aligns_the_barriers_of_both_inputs(store):
    e = Epochs()
    b1, b2, b3 = e.barrier(), e.barrier(), e.barrier()
    left = ListSource(L, [0], [b1, StreamChunk.from_rows(L, [("+", (1, 4)), ("+", (2, 8))]), b2,
                               StreamChunk.from_rows(L, [("+", (3, 6))]), b3])
    right = ListSource(R, [], [b1, StreamChunk.from_rows(R, [("+", (5,))]), b2, b3])
    x = DynamicFilter(left, right, 1, ">", dynamic_filter_left_table(store, 1, L, [0], 1),
                      dynamic_filter_right_table(store, 2, R))
    assert visible_rows(drain(Checked(x))) == [(INSERT, (2, 8)), (INSERT, (3, 6))]


LEFT_ITEM = st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 5)), st.booleans())
RARELY = st.integers(0, 4).map(lambda k: k == 0)
STEP = st.one_of(st.tuples(st.just("left"), st.lists(LEFT_ITEM, min_size=1, max_size=6)),
                 st.tuples(st.just("right"), st.one_of(st.none(), st.integers(-1, 6)), RARELY),
                 st.tuples(st.just("right"), st.integers(0, 5), st.just(False)),
                 st.tuples(st.just("barrier")), st.tuples(st.just("restart")))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=100, deadline=None)
@given(st.sampled_from([">", ">=", "<", "<="]), st.lists(STEP, max_size=25))
def test_dynamic_filter_equals_the_python_filter_at_every_barrier(op, steps):
    with HummockStorage.open("memory://") as store:
        d = Driver(store, op)
        for step in steps:
            if step[0] == "left":
                rows, shadow = [], dict(d.left)
                for i, x, delete in step[1]:
                    old = shadow.get(i)
                    if old is None:
                        rows.append(("+", (i, x)))
                        shadow[i] = (i, x)
                    elif delete:
                        rows.append(("-", old))
                        del shadow[i]
                    else:
                        rows += [("U-", old), ("U+", (i, x))]
                        shadow[i] = (i, x)
                d.left_rows(*rows)
            elif step[0] == "right":
                _, value, remove = step
                if d.right is None:
                    d.right_rows(("+", (value,)))
                elif remove:
                    d.right_rows(("-", d.right))
                else:
                    d.right_rows(("U-", d.right), ("U+", (value,)))
            elif step[0] == "barrier":
                d.barrier()
            else:
                d.barrier()
                d.start()
        d.barrier()
