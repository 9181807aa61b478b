"""Crash recovery: a writer process (committing, with its background compactor running) is killed
with SIGKILL at random moments; after each kill the store must hold exactly the epochs up to
max_committed_epoch, nothing later, and no orphan SST.

``HUMMOCK_CRASH_CYCLES`` sets the number of kills (default 20; thousands for a soak run).
"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from hummock import HummockStorage
from hummock.errors import ExpiredEpochError
from kv_model import KvModel

sys.path.insert(0, os.path.dirname(__file__))
from crash_writer import OPTIONS, crash_batch  # noqa: E402

WRITER = os.path.join(os.path.dirname(__file__), "crash_writer.py")


def expected_model(last_epoch_index: int) -> KvModel:
    model = KvModel()
    for i in range(1, last_epoch_index + 1):
        for table, batch in crash_batch(i):
            model.ingest(table, batch, i << 16)
        model.commit(i << 16)
    return model


def test_kill_9_at_random_moments(tmp_path):
    cycles = int(os.environ.get("HUMMOCK_CRASH_CYCLES", "20"))
    rng = random.Random(int(os.environ.get("HUMMOCK_CRASH_SEED", "1")))
    path = str(tmp_path / "store")
    acknowledged = 0
    for cycle in range(cycles):
        writer = subprocess.Popen([sys.executable, WRITER, path], stdout=subprocess.PIPE, text=True,
                                  env=dict(os.environ, PYTHONUNBUFFERED="1"))
        time.sleep(rng.uniform(0.3, 1.2))
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate()
        acks = [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed ")]
        acknowledged = max([acknowledged] + acks)
        # the checker compacts nothing itself, so what is on disk is exactly what recovery left
        with HummockStorage.open(path, OPTIONS.replace(compactor="none")) as store:
            committed = store.max_committed_epoch >> 16
            # every acknowledged commit survived; at most the one in flight landed too
            assert acknowledged <= committed <= acknowledged + 1, (cycle, acknowledged, committed)
            acknowledged = committed
            model = expected_model(committed)
            for table in (1, 2):
                assert list(store.iter(table, 2**64 - 1)) == model.items(table, 2**64 - 1), (cycle, table)
            older = (committed - 2) << 16
            if committed > 2 and older >= store.min_readable_epoch:   # (else compaction dropped it)
                assert list(store.iter(1, older)) == model.items(1, older)
            elif committed > 2:
                with pytest.raises(ExpiredEpochError):
                    list(store.iter(1, older))
            referenced = store.version().sst_ids()
            on_disk = {int(m.path.rsplit("/", 1)[-1][:-4]) for m in store._store.list("sst/")}
            assert on_disk == referenced, "orphan SSTs survived the writer's vacuum"
    assert acknowledged > 0, "the writer never committed: kills came too early to test anything"
