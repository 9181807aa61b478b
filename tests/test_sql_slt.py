"""Golden SQL tests: every tests/sql/*.slt file runs through tests/slt_runner.py, once over
``sql.connect(":memory:")`` and once over a database in a fresh local directory.

Rewrite expected output with ``HUMMOCK_SLT_REWRITE=1`` (then review the diff: a rewrite is a
claim that the new output is right by Postgres/RisingWave semantics).
"""

from pathlib import Path

import pytest

import sql
import slt_runner

if not hasattr(sql, "connect"):
    pytest.skip("SQL frontend not merged yet", allow_module_level=True)

SLT_DIR = Path(__file__).parent / "sql"
SLT_FILES = sorted(SLT_DIR.glob("*.slt"))


def test_slt_files_exist():
    assert len(SLT_FILES) >= 17, [p.name for p in SLT_FILES]


@pytest.mark.parametrize("store", ["memory", "local"])
@pytest.mark.parametrize("path", SLT_FILES, ids=[p.stem for p in SLT_FILES])
def test_slt(path, store, tmp_path):
    url = ":memory:" if store == "memory" else str(tmp_path / "db")
    with sql.connect(url) as conn:
        slt_runner.run_file(conn, path)
