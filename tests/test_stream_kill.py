"""A real crash of the streaming engine: a child process (tests/stream_kill_writer.py) streams
changes through the graph of tests/stream_graphs.py and is killed with SIGKILL at a random
moment -- mid-epoch, mid-checkpoint or between. After reopening the store, every MV at
``max_committed_epoch`` equals its computation over the base tables stored at that epoch (no
partial epoch anywhere); a second child resumes from there and is killed again; finally the
graph runs in this process, writes more and checks again."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from hummock import HummockStorage
from stream.chunk import StreamChunk
from stream_graphs import BASE, OPTIONS, bases_of, build, changes, expected, read_all

WRITER = os.path.join(os.path.dirname(__file__), "stream_kill_writer.py")


def _consistent(store) -> dict:
    epoch = store.max_committed_epoch
    tables = read_all(store, epoch)
    assert tables == expected(bases_of(tables))
    return tables


def _run_and_kill(path: str, seed: int, min_commits: int) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(WRITER), os.getcwd(),
                                                       os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, WRITER, path, str(seed)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        commits = 0
        deadline = time.monotonic() + 120
        while commits < min_commits:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"the writer ended: {child.stderr.read()[-2000:]}")
            commits += line.startswith("committed")
            assert time.monotonic() < deadline, "the writer made no progress"
        time.sleep(random.Random(seed).uniform(0, 0.05))   # land anywhere in the next epochs
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


@pytest.mark.parametrize("seed", [1, 2])
def test_mvs_stay_consistent_across_sigkill(tmp_path, seed):
    path = str(tmp_path / "store")
    _run_and_kill(path, seed, min_commits=3)
    with HummockStorage.open(path, OPTIONS) as store:
        first = store.max_committed_epoch
        assert first and any(_consistent(store).values())   # something committed, and consistent
    _run_and_kill(path, seed + 100, min_commits=2)   # resume from the committed state, kill again
    with HummockStorage.open(path, OPTIONS) as store:
        assert store.max_committed_epoch > first
        model = bases_of(_consistent(store))
        rt, s1, s2 = build(store)
        rt.start()
        rt.write(s1, StreamChunk.from_rows(BASE, changes(model[0], [(99, (50, "z")), (1, (None, None))])))
        rt.write(s2, StreamChunk.from_rows(BASE, changes(model[1], [(98, (None, None))])))
        epoch = rt.flush()
        tables = read_all(store, epoch)
        assert tables == expected(model) == expected(bases_of(tables))
        rt.stop()
