"""bench.commit at tiny sizes: both fsync protocols run, each checkpoint pays its four fsyncs
(SST, SST directory, delta temp, manifest directory), and the comparison leaves the store's
protocol as it found it. Never timings."""

from __future__ import annotations

import json

from bench import commit
from hummock.object_store import LocalObjectStore
from hummock.uploader import Uploader


def test_both_protocols_run_and_the_switch_is_undone(capsys):
    before = LocalObjectStore.deferred_durability, Uploader.submit
    assert commit.main(["--epochs", "3", "--rounds", "2", "--rows", "10"]) == 0
    assert (LocalObjectStore.deferred_durability, Uploader.submit) == before
    line = json.loads(next(x for x in capsys.readouterr().out.splitlines() if x.startswith('{"bench": "commit"')))
    assert set(line["protocols"]) == set(commit.PROTOCOLS)
    for figures in line["protocols"].values():
        assert figures["fsyncs_per_epoch"] >= 4 and len(figures["round_medians_ms"]) == 2
        assert figures["ms_per_checkpoint_max"] >= figures["ms_per_checkpoint_median"]
        assert figures["cpu_ms_per_checkpoint_mean"] > 0
    assert "conditions" in line["machine"]
