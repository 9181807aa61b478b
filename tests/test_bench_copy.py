"""``python -m bench.copy --quick``: COPY in/out figures beside DuckDB's COPY of the same files.

The quick run (100k rows) must end with one JSON line of the benchmark's shape, every figure
a positive rate; the run itself checks each load's count and sum and the MV's total. Figures
are never asserted (timings).
"""

import json
import subprocess
import sys


def test_quick_run_prints_one_json_line_with_every_figure():
    done = subprocess.run([sys.executable, "-m", "bench.copy", "--quick", "--rows", "20000"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    obj = json.loads(done.stdout.strip().splitlines()[-1])
    assert obj["bench"] == "copy" and obj["rows"] == 20000 and obj["repeat"] == 1
    names = {"copy_in_csv", "copy_in_parquet", "copy_in_csv_mv", "copy_out_csv", "copy_out_parquet"}
    assert set(obj["rows_per_s"]) == names | {f"duckdb_{n}" for n in names - {"copy_in_csv_mv"}}
    assert all(v > 0 for v in obj["rows_per_s"].values())
    assert set(obj["rows_per_cpu_s"]) == set(obj["rows_per_s"]) and all(v > 0 for v in obj["rows_per_cpu_s"].values())
