"""``python -m bench.spark_stream``: Nexmark on the Spark runtime against the in-process runtime.

- one tiny end-to-end run (q4: four stages; 2,000-event batches, one Spark master in its child
  process): the last stdout line is the JSON object of the issue's shape, every MV equal to its
  batch recomputation, the Spark batches' figures (stage overhead, SSTs, warm-up) present;
- the summary's rules without Spark: ``checked`` is false as soon as one query of one runtime
  mismatched or failed, ratios are against the in-process rate, stage overhead is a stage's
  wall time minus its slowest task's, percentiles by nearest rank;
- ``--commit-cost`` alone (no Spark): one commit_ssts per SST count, figures per count;
- bench/report.py renders the saved JSON line as a section with a chart.

Figures are never asserted (timings); only shapes and the check verdict.
"""

import json
import subprocess
import sys

import pytest

from bench import report, spark_stream


@pytest.mark.slow
@pytest.mark.spark_integration   # child processes with Spark sessions of their own: the native run only
def test_quick_run_prints_one_checked_json_line():
    done = subprocess.run([sys.executable, "-m", "bench.spark_stream", "--quick", "--queries", "q4",
                           "--events", "2000", "--batches", "1", "--warmup-events", "300", "--masters", "local[1]"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    obj = json.loads(done.stdout.strip().splitlines()[-1])
    assert obj["bench"] == "spark_stream" and obj["events"] == 2000 and obj["batches"] == 1
    assert set(obj["events_per_s"]) == {"in_process", "spark_local1"}
    assert all(set(r) == {"q4"} and r["q4"] > 0 for r in obj["events_per_s"].values())
    assert obj["checked"] is True, obj["by_batch"]["2000"].get("errors")
    assert obj["epoch_ms"]["runtime"] == "spark_local1" and 0 < obj["epoch_ms"]["p50"] <= obj["epoch_ms"]["p99"]
    size = obj["by_batch"]["2000"]
    spark = size["spark"]["spark_local1"]
    assert spark["partitions"] == 1 and spark["stages"] >= 2 and spark["ssts_per_batch_mean"] > 0
    assert spark["stage_overhead_ms_mean"] >= 0
    assert set(size["warmup_ms"]["spark_local1"]) == {"q4"}
    assert "errors" not in size


def _child(runtime, queries):
    """A child's result as run_child prints it, with fabricated figures."""
    out = {"runtime": runtime, "queries": {}}
    for q, (ok, seconds) in queries.items():
        r = {"batch_s": seconds, "warmup_ms": 5.0, "checked": ok, "rows": 3, "stats": [],
             "events_per_s": round(1000 * len(seconds) / sum(seconds))}
        if runtime != "in_process":
            out.update(master=runtime, partitions=2, session_s=1.0)
            r["stats"] = [{"stages_run": 2, "ssts": 4,
                           "seconds": {"route": 0.1, "stage1": s / 2, "stage1_task_max": s / 4,
                                       "stage1_task_max_parts": [0.0], "stage2": s / 4, "stage2_task_max": s / 4,
                                       "commit": 0.01, "total": s}} for s in seconds]
        out["queries"][q] = r
    return out


def test_summary_checks_every_runtime_and_computes_overheads():
    children = [_child("in_process", {"q0": (True, [0.5, 0.5]), "q4": (True, [1.0, 1.0])}),
                _child("local[2]", {"q0": (True, [1.0, 1.0]), "q4": (True, [2.0, 4.0])})]
    s = spark_stream.summarize(1000, 2, children, ["q0", "q4"])
    assert s["checked"] is True and "errors" not in s
    assert s["events_per_s"] == {"in_process": {"q0": 2000, "q4": 1000}, "spark_local2": {"q0": 1000, "q4": 333}}
    assert s["ratio_to_in_process"] == {"spark_local2": {"q0": 0.5, "q4": 0.333}}
    assert s["epoch_ms"]["spark_local2"] == {"p50": 1000.0, "p99": 4000.0, "batches": 4}
    sp = s["spark"]["spark_local2"]
    # stage1 overhead = s/2 - s/4 = s/4 for s in (1, 1, 2, 4); stage2 none
    assert sp["stages"] == 8 and sp["stage_overhead_ms_max"] == 1000.0 and sp["stage_overhead_ms_mean"] == 250.0
    assert sp["ssts_per_batch_mean"] == 4 and sp["commit_ms_mean"] == 10.0
    assert sp["stage1_overhead_ms_p50"] == 250.0 and sp["later_stage_overhead_ms_p50"] == 0.0

    bad = [children[0], _child("local[2]", {"q0": (True, [1.0]), "q4": (False, [2.0])})]
    assert spark_stream.summarize(1000, 1, bad, ["q0", "q4"])["checked"] is False
    failed = [children[0], {"runtime": "local[1]", "error": "child exited 1", "queries": {}}]
    s = spark_stream.summarize(1000, 2, failed, ["q0", "q4"])
    assert s["checked"] is False and s["errors"] == {"spark_local1": "child exited 1"}
    crashed = _child("local[1]", {"q0": (True, [1.0])})
    crashed["queries"]["q4"] = {"batch_s": [], "stats": [], "checked": False, "error": "BatchFailedError: x"}
    s = spark_stream.summarize(1000, 1, [children[0], crashed], ["q0", "q4"])
    assert s["checked"] is False and s["errors"] == {"spark_local1.q4": "BatchFailedError: x"}
    assert s["events_per_s"]["spark_local1"] == {"q0": 1000}


def test_percentile_is_nearest_rank_and_runtime_names():
    assert spark_stream.percentile([3.0], 99) == 3.0
    assert spark_stream.percentile([1, 2, 3, 4], 50) == 2 and spark_stream.percentile([1, 2, 3, 4], 99) == 4
    assert spark_stream.percentile(list(range(1, 201)), 99) == 198
    assert spark_stream.runtime_name("local[2]") == "spark_local2"
    assert spark_stream.runtime_name("spark://h:7077") == "spark_sparkh7077"


def test_commit_cost_alone_without_spark(capsys):
    obj = spark_stream.main(["--masters", "", "--commit-cost", "--commit-ssts", "3,6", "--commit-repeats", "1"])
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last == json.loads(json.dumps(obj))
    cost = last["commit_cost"]
    assert set(cost) == {"0", "3", "6", "per_sst_ms", "repeats"}
    assert cost["0"]["bytes_per_sst"] == 0 < cost["3"]["bytes_per_sst"]
    assert all(cost[n]["commit_ms"] > 0 for n in ("0", "3", "6"))
    assert "events_per_s" not in last and "by_batch" not in last


def test_report_renders_the_spark_stream_section(tmp_path):
    children = [_child("in_process", {"q0": (True, [0.5]), "q4": (True, [1.0])}),
                _child("local[2]", {"q0": (True, [1.0]), "q4": (True, [2.0])})]
    size = spark_stream.summarize(1000, 1, children, ["q0", "q4"])
    line = {"bench": "spark_stream", "events": 1000, "batches": 1, "events_per_s": size["events_per_s"],
            "epoch_ms": {**size["epoch_ms"]["spark_local2"], "runtime": "spark_local2"}, "checked": True,
            "by_batch": {"1000": size}}
    source = tmp_path / "run.log"
    source.write_text("noise\n" + json.dumps(line) + "\n")
    out = tmp_path / "report.md"
    assert report.main(["--from", str(source), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Nexmark on the Spark runtime" in text and "**all equal**" in text
    assert "| q0 | 2,000 | 1,000 (0.50x) |" in text and "| q4 | 1,000 | 500 (0.50x) |" in text
    assert "| spark_local2 | 1,000.0 | 2,000.0 | 187.5 | 10.0 | 4.0 |" in text
    assert list(tmp_path.glob("report-spark-stream.*"))
