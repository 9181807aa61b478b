"""The runtime (stream/runtime/): channels with backpressure, N x M hash exchanges with barrier
alignment, broadcast, Pause/Resume, failure propagation with nothing committed lost, and the
barrier loop's order of checkpoints."""

import asyncio
import threading
import time

import pytest

from hummock import HummockStorage
from relational import StateTable, StorageTable
from relational.types import DataType as T
from stream.chunk import StreamChunk
from stream.errors import ActorFailedError, CheckpointFailedError, InconsistentStreamError, StreamError
from stream.executors import Dml, Materialize
from stream.message import Pause, Resume
from stream.runtime import StreamRuntime
from stream.runtime.channel import Channel
from stream.runtime.dispatch import vnode_bitmaps
from stream.schema import Schema

S = Schema([("id", T.BIGINT), ("v", T.INT)])


@pytest.fixture
def store():
    s = HummockStorage.open("memory://")
    yield s
    s.close()


def table(store, table_id, vnodes=None):
    return StateTable(store, table_id, S.pairs(), [0], dist_key_indices=[0], vnodes=vnodes)


def contents(store, table_id, epoch):
    reader = StorageTable(store, table_id, S.pairs(), [0], dist_key_indices=[0])
    return sorted(tuple(r.values()) for b in reader.batch_iter(epoch) for r in b.to_pylist())


def inserts(ids, v=0):
    return StreamChunk.from_rows(S, [("+", (i, v)) for i in ids])


def test_two_sources_hash_into_two_actors_with_aligned_barriers(store):
    rt = StreamRuntime(store, channel_capacity=2)
    sources = [rt.source(f"t{i}", S, [0]) for i in range(2)]
    ups = [rt.actor(Dml(s.executor, S, [0])) for s in sources]
    heads = rt.exchange(ups, 2, "hash", key=[0])
    for head, vnodes in zip(heads, vnode_bitmaps(2)):
        rt.actor(Materialize(head, table(store, 7, vnodes)))   # one table id, disjoint vnodes
    [bcast_a, bcast_b] = rt.exchange([ups[0]], 2, "broadcast")
    rt.actor(Materialize(bcast_a, table(store, 8)))
    rt.actor(Materialize(bcast_b, table(store, 9)))
    rt.start()
    for k in range(20):
        rt.write(sources[k % 2], inserts(range(k * 10, k * 10 + 10), k))
        if k % 7 == 3:
            rt.barrier(checkpoint=False)
    epoch = rt.flush()
    assert contents(store, 7, epoch) == [(i, i // 10) for i in range(200)]
    expected = [(i, i // 10) for i in range(200) if (i // 10) % 2 == 0]
    assert contents(store, 8, epoch) == contents(store, 9, epoch) == expected
    rt.stop()


def test_backpressure_blocks_the_writer_until_the_graph_drains(store):
    rt = StreamRuntime(store, channel_capacity=1)
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1)))
    rt.start()
    gate = threading.Event()
    # hold the event loop: the next write cannot be delivered until it is released
    rt._loop.call_soon_threadsafe(gate.wait)
    done = threading.Event()

    def writer():
        rt.write(src, inserts([1]))
        rt.write(src, inserts([2]))
        done.set()
    t = threading.Thread(target=writer)
    t.start()
    assert not done.wait(0.2)   # blocked: the loop (and so the channel) is held
    gate.set()
    t.join(10)
    assert done.is_set()
    assert contents(store, 1, rt.flush()) == [(1, 0), (2, 0)]
    rt.stop()


def test_channel_is_bounded():
    async def go():
        ch = Channel(2)
        await ch.send(1)
        await ch.send(2)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(ch.send(3), 0.05)
        assert ch.queue.qsize() == 2
    asyncio.run(go())


def test_an_actor_error_fails_the_graph_and_loses_nothing_committed(store):
    rt = StreamRuntime(store)
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1), identity="Materialize(t)"))
    rt.start()
    rt.write(src, inserts([1, 2]))
    committed = rt.flush()
    rt.write(src, inserts([3]))
    rt.write(src, inserts([2]))   # insert of an existing pk: strict mode refuses
    with pytest.raises(ActorFailedError) as info:
        rt.flush()
    cause = info.value.__cause__
    assert isinstance(cause, InconsistentStreamError) and cause.executor == "Materialize(t)" and cause.pk == (2,)
    assert store.max_committed_epoch == committed
    assert contents(store, 1, committed) == [(1, 0), (2, 0)]
    with pytest.raises(ActorFailedError):
        rt.write(src, inserts([9]))
    rt.abort()


def test_pause_holds_data_back_until_resume(store):
    rt = StreamRuntime(store)
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1)))
    rt.start()
    rt.barrier(True, Pause())
    rt.write(src, inserts([1]))
    assert contents(store, 1, rt.flush()) == []
    rt.barrier(True, Resume())
    assert contents(store, 1, rt.flush()) == [(1, 0)]
    rt.stop()


def test_building_rules_and_stop(store):
    rt = StreamRuntime(store)
    with pytest.raises(StreamError, match="no actors"):
        rt.start()
    src = rt.source("t", S, [0])
    a = rt.actor(Dml(src.executor, S, [0]))
    with pytest.raises(StreamError, match="simple exchange"):
        rt.exchange([a], 2, "simple")
    with pytest.raises(StreamError, match="needs key"):
        rt.exchange([a], 2, "hash")
    with pytest.raises(StreamError, match="not running"):
        rt.flush()
    rt.start()
    with pytest.raises(StreamError, match="is running"):
        rt.actor(Dml(src.executor, S, [0]))
    epoch = rt.stop()
    assert store.max_committed_epoch == epoch


def test_checkpoints_commit_in_epoch_order_and_latencies_are_recorded(store):
    commits = []
    real = store.checkpoint

    def slow_checkpoint(epoch):
        time.sleep(0.01)
        commits.append(epoch)
        real(epoch)
    store.checkpoint = slow_checkpoint
    rt = StreamRuntime(store, barrier_interval_ms=2, checkpoint_frequency=1)
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1)))
    rt.start()
    deadline = time.monotonic() + 30
    for k in range(10):
        rt.write(src, inserts([k]))
    while len(commits) < 3:   # the ticker's checkpoints, each slower than the interval
        assert time.monotonic() < deadline
        time.sleep(0.005)
    rt.stop()
    assert commits == sorted(commits) and len(commits) >= 2
    assert all(collect <= commit for collect, commit in rt.barrier_loop.latencies)


def test_the_runtime_owns_one_budget_for_its_executors_caches(store):
    from stream.cache import MemoryBudget, default_budget
    from stream.executors import AggCall, HashAgg, HashJoin
    rt = StreamRuntime(store, memory_budget_bytes=1 << 20)
    assert rt.budget.capacity == 1 << 20
    src = rt.source("t", S, [0])
    up = rt.actor(Dml(src.executor, S, [0]))
    left, right, agg_in, explicit_in = rt.exchange([up], 4, "broadcast")
    join = HashJoin(left, right, [1], [1], "inner", store=store, table_ids=(20, 21))
    agg = HashAgg(agg_in, [1], [AggCall("count")], store, [30])
    own = MemoryBudget(4096)
    kept = HashAgg(explicit_in, [1], [AggCall("count")], store, [40], budget=own)
    mine = [join.left.cache, join.right.cache, join.left.absent_cache, join.right.absent_cache, join.left.seen.cache,
            join.right.seen.cache, join.left.seen_hashes, join.right.seen_hashes, join.left.fresh.cache,
            join.right.fresh.cache, agg.groups]
    # by identity: cache names repeat across tests, and the default budget is process-wide
    assert all(any(c is d for d in default_budget()._caches) for c in mine)
    rt.actor(join)
    rt.actor(agg)
    rt.actor(kept)
    assert join.budget is agg.budget is rt.budget and kept.budget is own
    names = set(rt.budget.stats()["caches"])
    assert names == {c.name for c in mine}
    assert not any(c is d for c in mine for d in default_budget()._caches)
    assert set(own.stats()["caches"]) == {kept.groups.name}
    rt.start()
    for k in range(5):
        rt.write(src, inserts(range(k * 10, k * 10 + 10), k))
    rt.flush()
    assert len(agg.groups) == 5 and rt.budget.used > 0 and len(kept.groups) == 5 and own.used > 0
    rt.budget._check()
    own._check()
    rt.stop()


def test_a_bad_memory_budget_is_refused(store):
    with pytest.raises(ValueError):
        StreamRuntime(store, memory_budget_bytes=-1)


def test_executor_caches_are_its_own_not_every_cache_of_its_budget(store):
    """``Executor.caches()`` walks its attributes one level deep; its ``budget`` lists every
    cache charged to it (other executors' too), which must not count as this executor's: the
    runtime would adopt a stranger's cache (found when the full suite left caches behind)."""
    from stream.cache import default_budget
    from stream.executors import AggCall, HashAgg
    rt = StreamRuntime(store)
    src = rt.source("t", S, [0])
    up = rt.actor(Dml(src.executor, S, [0]))
    a_in, b_in = rt.exchange([up], 2, "broadcast")
    stranger = HashAgg(a_in, [1], [AggCall("count")], store, [50])
    mine = HashAgg(b_in, [1], [AggCall("count")], store, [51])
    assert stranger.budget is mine.budget is default_budget()
    assert mine.caches() == [mine.groups]
    rt.actor(mine)
    assert stranger.groups.budget is default_budget() and mine.groups.budget is rt.budget


def test_an_interpreter_exiting_with_a_runtime_running_prints_no_asyncio_warnings(tmp_path):
    """A connection never closed leaves its runtime's loop thread (a daemon) running at exit;
    the runtime's own tasks (actors, the barrier loop, a fan-in's pulls) are then collected
    pending, which asyncio would report as "Task was destroyed but it is pending!" -- noise,
    since exiting loses only what a crash would (stream/tasks.py). Without a ticker
    (``barrier_interval_ms=0``) it was printed for every actor."""
    import os
    import subprocess
    import sys

    script = tmp_path / "unclosed.py"
    script.write_text(
        "import sql\n"
        "c = sql.connect(':memory:', barrier_interval_ms=0)\n"
        "c.execute(\"CREATE SOURCE s (v BIGINT) WITH (connector = 'push')\")\n"
        "c.execute('CREATE MATERIALIZED VIEW m AS SELECT v FROM s')\n"
        "c.execute('CREATE TABLE a (v BIGINT)')\n"   # fan-ins: a union's and a join's pulls
        "c.execute('CREATE MATERIALIZED VIEW u AS SELECT v FROM a UNION ALL SELECT v FROM s')\n"
        "c.execute('CREATE MATERIALIZED VIEW j AS SELECT a.v FROM a JOIN m ON a.v = m.v')\n"
        "c.execute('INSERT INTO s VALUES (1)')\n"
        "c.execute('FLUSH')\n"
        "print(c.execute('SELECT count(*) FROM m').fetchall())\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(1,)]"
    assert "Task was destroyed" not in done.stderr, done.stderr


# --- a waiting caller runs its checkpoint (barrier_loop module doc, "Checkpoints run by their waiter")


def test_flush_runs_its_checkpoint_on_the_calling_thread_in_epoch_order(store):
    threads, commits = [], []
    real = store.checkpoint

    def recording(epoch):
        threads.append(threading.current_thread().name)
        commits.append(epoch)
        real(epoch)
    store.checkpoint = recording
    rt = StreamRuntime(store, barrier_interval_ms=1, checkpoint_frequency=1)   # the ticker's too
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1)))
    rt.start()
    caller = threading.current_thread().name
    flushed = []
    for k in range(20):
        rt.write(src, inserts([k]))
        flushed.append(rt.flush())
        assert store.max_committed_epoch >= flushed[-1]   # committed when FLUSH returns
        assert contents(store, 1, flushed[-1]) == [(i, 0) for i in range(k + 1)]
    rt.stop()
    assert commits == sorted(commits) and len(set(commits)) == len(commits)   # strictly in order
    assert set(flushed) <= set(commits)
    assert caller in threads and any(name != caller for name in threads)   # ticker ones on the loop's worker


def test_a_checkpoint_failing_on_the_caller_fails_the_graph_as_on_the_loop(store):
    rt = StreamRuntime(store)
    src = rt.source("t", S, [0])
    rt.actor(Materialize(Dml(src.executor, S, [0]), table(store, 1)))
    rt.start()
    rt.write(src, inserts([1]))
    committed = rt.flush()
    real = store.checkpoint

    def broken(epoch):
        raise OSError("disk gone")
    store.checkpoint = broken
    rt.write(src, inserts([2]))
    with pytest.raises(CheckpointFailedError) as info:
        rt.flush()
    assert isinstance(info.value.__cause__, OSError) and rt.failure is info.value
    store.checkpoint = real
    with pytest.raises(CheckpointFailedError):   # the graph stays failed: nothing commits after it
        rt.flush()
    assert store.max_committed_epoch == committed
    rt.abort()


def test_a_caller_that_gives_up_leaves_its_checkpoint_to_the_loop():
    from stream.runtime.barrier_loop import CheckpointHandoff

    async def scenario():
        loop = asyncio.get_running_loop()
        given_back = CheckpointHandoff()
        assert given_back.withdraw()             # before its turn: the loop must run it
        assert given_back.request("barrier", loop) is None
        taken = CheckpointHandoff()
        outcome = taken.request("barrier", loop)
        assert taken.wait(0) and taken.barrier == "barrier"
        assert not taken.withdraw()              # handed over: the caller must run it
        await asyncio.to_thread(taken.finish, OSError("x"))
        with pytest.raises(OSError):
            await outcome
    asyncio.run(scenario())
