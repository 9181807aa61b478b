"""``hummock sql --read-only`` and the shell's ``\\copy`` (issue 27 items 3 and 4).

A database whose writer is running (here: a connection in this process) refuses a second
writer: a script gets the error and the hint to use ``--read-only`` (exit 3), ``--read-only``
queries it and refuses DML (exit 4, ``ReadOnlyError``), and an interactive shell offers to
open it read-only. ``\\copy`` runs COPY from the shell, and the shell prints ``COPY n``.
"""

import argparse
import subprocess
import sys

import pytest

import sql
from cli import shell as cli_sql
from cli.common import CommandError


def _shell(*args, stdin: str):
    return subprocess.run([sys.executable, "-m", "cli", "sql", *args], input=stdin, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def running(tmp_path):
    url = str(tmp_path / "db")
    with sql.connect(url, implicit_flush=True) as w:
        w.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)")
        w.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
        yield url, w


def test_a_script_on_a_database_with_a_writer_is_told_about_read_only(running):
    url, _ = running
    done = _shell(url, stdin="SELECT 1;\n")
    assert done.returncode == 3
    assert "already has a writer" in done.stderr and "--read-only" in done.stderr


def test_read_only_shell_queries_beside_the_writer_and_refuses_writes(running):
    url, w = running
    done = _shell(url, "--read-only", stdin="SELECT count(*) FROM t;\nINSERT INTO t VALUES (3, 'z');\n")
    assert done.returncode == 4, done.stderr
    assert "(1 row)" in done.stdout and " 2\n" in done.stdout
    assert "ReadOnlyError: INSERT is not allowed on a read-only connection" in done.stderr
    assert w.execute("SELECT count(*) FROM t").fetchall() == [(2,)]


def test_interactive_shell_offers_read_only(running, monkeypatch):
    url, _ = running
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    args = argparse.Namespace(url=url, implicit_flush=False, spark=None, partitions=None, read_only=False)
    monkeypatch.setattr("builtins.input", lambda prompt: "")
    with cli_sql._connect(args) as conn:
        assert conn.db.read_only
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(2,)]
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(CommandError, match="has a writer"):
        cli_sql._connect(args)


def test_backslash_copy_in_a_script(tmp_path):
    url = str(tmp_path / "db")
    out = tmp_path / "out.csv"
    script = (f"CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR);\nINSERT INTO t VALUES (1, 'x'), (2, 'y');\nFLUSH;\n"
              f"\\copy t TO '{out}' (format csv, header)\nCREATE TABLE u (a INT PRIMARY KEY, b VARCHAR);\n"
              f"\\copy u FROM '{out}' WITH (format csv, header true);\nSELECT * FROM u ORDER BY a;\n")
    done = _shell(url, stdin=script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("COPY 2") == 2
    assert " 1 | x\n 2 | y\n(2 rows)" in done.stdout
    assert out.read_text() == '"a","b"\n1,"x"\n2,"y"\n'


def test_meta_commands_of_a_read_only_shell_see_new_relations(running):
    import io
    url, w = running
    with sql.connect(url, read_only=True) as r:
        shell = cli_sql.Shell(r, out=io.StringIO(), err=io.StringIO())
        w.execute("CREATE MATERIALIZED VIEW later AS SELECT count(*) AS n FROM t")
        shell.feed("\\dm")
        shell.feed("\\d later")
        out = shell.out.getvalue()
        assert "later" in out and "materialized view" in out and 'Materialized view "later"' in out, out
