"""The collector policy of running stream runtimes (stream/runtime/gc_policy.py): raised while
any runtime runs, the process's own thresholds back after the last one stops or aborts, and a
change made meanwhile by the application is left alone."""

import gc

import pytest

from hummock import HummockStorage
from relational import StateTable
from relational.types import DataType as T
from stream.chunk import StreamChunk
from stream.executors import Dml, Materialize
from stream.runtime import StreamRuntime, gc_policy
from stream.schema import Schema

S = Schema([("id", T.BIGINT), ("v", T.INT)])


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def runtime(store, table_id):
    rt = StreamRuntime(store)
    src = rt.source(f"t{table_id}", S, [0])
    table = StateTable(store, table_id, S.pairs(), [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table))
    return rt, src


def test_raised_while_runtimes_run_and_restored_after_the_last(thresholds):
    with HummockStorage.open("memory://") as store:
        a, src = runtime(store, 1)
        b, _ = runtime(store, 2)
        assert gc_policy.active_runtimes() == 0
        a.start()
        assert gc.get_threshold() == (700, 10, gc_policy.FULL_COLLECTION_THRESHOLD)
        b.start()
        a.write(src, StreamChunk.from_rows(S, [("+", (1, 1))]))
        a.flush()
        a.stop()
        assert gc.get_threshold()[2] == gc_policy.FULL_COLLECTION_THRESHOLD   # b still runs
        assert gc_policy.active_runtimes() == 1
        b.abort()
        assert gc.get_threshold() == (700, 10, 10)
        assert gc_policy.active_runtimes() == 0
        b.abort()   # a second abort releases nothing twice
        assert gc_policy.active_runtimes() == 0


def test_a_threshold_the_application_set_meanwhile_stands(thresholds):
    with HummockStorage.open("memory://") as store:
        rt, _ = runtime(store, 1)
        rt.start()
        gc.set_threshold(5000, 20, 30)
        rt.stop()
        assert gc.get_threshold() == (5000, 20, 30)


def test_a_higher_threshold_of_the_process_is_kept(thresholds):
    gc.set_threshold(700, 10, 5000)
    gc_policy.acquire()
    try:
        assert gc.get_threshold() == (700, 10, 5000)
    finally:
        gc_policy.release()
    assert gc.get_threshold() == (700, 10, 5000)
    gc_policy.release()   # unbalanced: ignored
    assert gc_policy.active_runtimes() == 0
