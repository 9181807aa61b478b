"""The ``hummock`` command line: the README's main job runs end to end."""

import io
import subprocess
import sys

from sql.cli import run_demo


def test_demo_writes_commits_reopens_and_reads_in_key_order():
    out = io.StringIO()
    assert run_demo(out) == 0
    lines = [line for line in out.getvalue().splitlines() if line.startswith("  key=")]
    assert len(lines) == 4
    cities = [line.split("('")[1].split("'")[0] for line in lines]
    assert cities == sorted(cities)  # city ASC
    assert "2026, 11, 21" in lines[0] and "2026, 11, 19" in lines[1]  # day DESC within a city


def test_version_flag():
    out = subprocess.run([sys.executable, "-m", "sql.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("hummock ")
