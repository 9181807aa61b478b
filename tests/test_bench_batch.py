"""``python -m bench.batch --quick``: the issue-27 batch queries through Hummock SQL and DuckDB
over the same rows (Parquet) in one run; the last stdout line is the JSON object, every
compared answer equal. Figures are never asserted (timings), only the shape and the verdict."""

import json
import subprocess
import sys

from bench import batch


def test_quick_run_prints_one_checked_json_line():
    done = subprocess.run([sys.executable, "-m", "bench.batch", "--quick"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    obj = json.loads(done.stdout.strip().splitlines()[-1])
    assert obj["bench"] == "batch" and obj["rows"] == 20_000 and obj["checked"] is True
    queries = [r["query"] for r in obj["results"]]
    assert queries[:len(batch.QUERIES)] == [label for label, _ in batch.QUERIES]
    assert {"update by pk", "delete by pk"} <= set(queries)
    for r in obj["results"]:
        assert r["hummock_ms"] > 0
        if r["duckdb_ms"] is not None:
            assert r["equal"] is True and r["ratio"] > 0, r


def test_answers_compare_as_sorted_rows_with_float_tolerance():
    import pyarrow as pa
    a = pa.table({"g": [2, 1], "s": [0.1 + 0.2, 1.0]})
    b = pa.table({"g": [1, 2], "s": [1.0, 0.3]})
    assert batch._rows(a) == batch._rows(b)
    assert batch._rows(a) != batch._rows(pa.table({"g": [1, 2], "s": [1.0, 0.31]}))


def test_report_renders_a_batch_section(tmp_path):
    from bench import report
    line = json.dumps({"bench": "batch", "rows": 1000, "checked": True, "results": [
        {"query": "point lookup", "hummock_ms": 0.5, "duckdb_ms": 2.0, "ratio": 4.0, "equal": True},
        {"query": "update by pk", "hummock_ms": 7.5, "duckdb_ms": None, "ratio": None, "equal": None}]})
    source = tmp_path / "runs.log"
    source.write_text("noise\n" + line + "\n")
    out = tmp_path / "report.md"
    assert report.main(["--from", str(source), "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Batch queries: Hummock SQL vs DuckDB over Parquet" in text and "**all equal**" in text
    assert "| point lookup | 0.5 | 2.0 | 4.00 |" in text and "| update by pk | 7.5 | - | - |" in text
    assert list(tmp_path.glob("report-batch.*"))
