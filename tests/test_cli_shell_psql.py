"""The shell as psql users expect it (cli/shell.py, cli/format.py): ``-c``/``-f`` in
order then exit, ``--csv``/``--json``, ``\\x``, ``\\i``, ``\\o``, ``help``/``quit``, an error's
line and caret counted within its statement, values spelled as Postgres prints them, control
characters escaped -- in process through ``Shell``, as subprocesses, and in a real terminal
(tmux) for the interactive prompt."""

import io
import json
import shutil
import subprocess
import time

import pytest

import sql
from cli.shell import Shell
from test_cli_sql import hummock


def _shell(conn, fmt="aligned"):
    out, err = io.StringIO(), io.StringIO()
    return Shell(conn, out=out, err=err, fmt=fmt), out, err


def test_values_print_as_postgres_prints_them():
    with sql.connect(":memory:") as conn:
        shell, out, err = _shell(conn)
        shell.feed("SELECT 'NaN'::float8 AS n, 'Infinity'::float8 AS i, 0.1::real AS r, 1e20::float8 AS big, "
                   "TIME '01:02:03.5' AS t, TIMESTAMP '2024-01-02 03:04:05.120' AS ts, "
                   "TIMESTAMPTZ '2024-01-02 03:04:05+00' AS tz, INTERVAL '1 day 2 hours 3 minutes 4 seconds' AS iv, "
                   "true AS b, NULL::int AS nul, 'a' || chr(27) || '[2J' AS ctl, 1.50::numeric AS d;")
        header, rule, row, count = out.getvalue().splitlines()
        cells = [c.strip() for c in row.split("|")]
        assert cells == ["NaN", "Infinity", "0.1", "1e+20", "01:02:03.5", "2024-01-02 03:04:05.12",
                         "2024-01-02 03:04:05+00", "1 day 02:03:04", "t", "", "a\\x1b[2J", "1.50"], row
        assert count == "(1 row)" and err.getvalue() == ""


def test_expanded_csv_and_json_layouts():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR, f DOUBLE PRECISION)")
        conn.execute("INSERT INTO t VALUES (1, 'a,b', 'NaN'), (2, NULL, 2.5)")
        conn.execute("FLUSH")
        shell, out, _ = _shell(conn)
        for line in ("\\x", "SELECT * FROM t ORDER BY id;", "\\x off", "SELECT * FROM t WHERE id > 5;"):
            shell.feed(line)
        assert out.getvalue().splitlines() == [
            "Expanded display is on.", "-[ RECORD 1 ]", "id | 1", "s  | a,b", "f  | NaN",
            "-[ RECORD 2 ]", "id | 2", "s  |", "f  | 2.5", "Expanded display is off.",
            " id | s | f", "----+---+---", "(0 rows)"]
        shell, out, _ = _shell(conn, "csv")
        shell.feed("SELECT * FROM t ORDER BY id;")
        assert out.getvalue() == 'id,s,f\n1,"a,b",NaN\n2,,2.5\n'
        shell, out, _ = _shell(conn, "json")
        shell.feed("SELECT * FROM t ORDER BY id;")
        assert json.loads(out.getvalue()) == [{"id": 1, "s": "a,b", "f": "NaN"}, {"id": 2, "s": None, "f": "2.5"}]


def test_errors_show_the_line_and_a_caret_counted_within_the_statement():
    with sql.connect(":memory:") as conn:
        shell, _, err = _shell(conn)
        conn.execute("CREATE TABLE t (a INT)")
        for line in ("SELECT 1;", "", "SELECT a,", "       nosuch", "  FROM t;", "SELECT 1 +;"):
            shell.feed(line)
        lines = err.getvalue().splitlines()
        assert lines[0].startswith("ERROR: BindError: column 'nosuch' does not exist")
        assert lines[1:3] == ["LINE 2:        nosuch", "               ^"]
        assert lines[3].startswith("ERROR: SqlSyntaxError") and lines[4].startswith("LINE 1: SELECT 1 +")


def test_include_redirect_help_and_quit(tmp_path):
    (tmp_path / "inc.sql").write_text("CREATE TABLE t (a INT);\nINSERT INTO t VALUES (7);\nFLUSH;\nSELECT nope;\n")
    with sql.connect(":memory:") as conn:
        shell, out, err = _shell(conn)
        for line in (f"\\i {tmp_path / 'inc.sql'}", f"\\o {tmp_path / 'res.txt'}", "SELECT a FROM t;", "\\o",
                     "SELECT 1 AS one;", "help", "quit", "SELECT 'never';"):
            shell.feed(line)
        assert (tmp_path / "res.txt").read_text() == " a\n---\n 7\n(1 row)\n"
        text = out.getvalue()
        assert text.startswith("CREATE TABLE\nINSERT 0 1\nFLUSH\n one\n-----\n   1\n(1 row)\n")
        assert "\\x [on|off]" in text and "never" not in text and shell.done
        assert "at line 4, column 8\nLINE 1: SELECT nope" in err.getvalue()   # the file's line; LINE within the statement
        shell2, _, err2 = _shell(conn)
        shell2.feed(f"\\i {tmp_path / 'absent.sql'}")
        assert "absent.sql" in err2.getvalue() and shell2.failures == 1


def test_command_and_file_options_run_in_order_then_exit(tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("INSERT INTO t VALUES (1), (2);\nFLUSH;\n")
    out = hummock("sql", tmp_path / "db", "-c", "CREATE TABLE t (a INT)", "-f", script, "--csv",
                  "-c", "SELECT a FROM t ORDER BY a", stdin="SELECT 'stdin is not read';\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["CREATE TABLE", "INSERT 0 2", "FLUSH", "a", "1", "2"]
    bad = hummock("sql", tmp_path / "db", "-c", "SELECT nosuch FROM t", "-c", "SELECT 5 AS five", "--json")
    assert bad.returncode == 4 and "LINE 1: SELECT nosuch FROM t" in bad.stderr
    assert json.loads(bad.stdout) == [{"five": 5}]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs a tmux binary for a real terminal")
def test_the_interactive_prompt_in_a_real_terminal(tmp_path):
    """tmux runs the shell on a pseudo-terminal: prompts, a statement over two lines, \\x, an
    error with its caret, tab completion of a keyword and a table, a multi-line statement
    recalled from history as one entry, and quit."""
    from test_cli_sql import ROOT
    import os
    import sys
    name = f"hummock-test-{os.getpid()}"
    env = f"PYTHONPATH={ROOT} HUMMOCK_HISTORY={tmp_path / 'history'} PAGER="
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                    f"cd {ROOT} && env {env} {sys.executable} -m cli sql {tmp_path / 'db'}; sleep 30"], check=True)
    try:
        def screen():
            return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout

        def wait_for(text):
            deadline = time.monotonic() + 60
            while text not in screen():
                assert time.monotonic() < deadline, f"never saw {text!r}:\n{screen()}"
                time.sleep(0.2)

        def wait_for_input_line(ending):   # the line being edited, not text printed earlier
            deadline = time.monotonic() + 60
            while not screen().rstrip().endswith(ending):
                assert time.monotonic() < deadline, f"the input line never ended with {ending!r}:\n{screen()}"
                time.sleep(0.2)

        def send(*keys):   # tmux reads an argument ending in ';' as a command separator: escape it
            keys = [k[:-1] + "\\;" if k.endswith(";") else k for k in keys]
            subprocess.run(["tmux", "send-keys", "-t", name, *keys], check=True)

        wait_for("hummock=>")
        send("CREATE TABLE t (a INT, b VARCHAR);", "Enter")
        wait_for("CREATE TABLE")
        send("CREATE TABLE widgets (w INT);", "Enter")
        wait_for("hummock=> CREATE TABLE widgets (w INT);\nCREATE TABLE")
        send("SELECT 42 AS answer,", "Enter")
        wait_for("hummock->")
        send("  'x' AS b;", "Enter")
        wait_for("(1 row)")
        send("\\x", "Enter")
        wait_for("Expanded display is on.")
        send("SELECT 1 AS one, nosuch;", "Enter")
        wait_for("^")
        text = screen()
        assert " answer | b" in text and "     42 | x" in text and "LINE 1: SELECT 1 AS one, nosuch" in text
        send("\\x", "Enter")
        wait_for("Expanded display is off.")
        # completion: a keyword, then a table name from the catalog. prompt_toolkit completes
        # asynchronously and drops a completion when more keys arrive first: wait for each one
        send("SEL", "Tab")
        wait_for_input_line("hummock=> SELECT")
        send(" * FROM wid", "Tab")
        wait_for_input_line("* FROM widgets")
        send(" WHERE w", "Enter")   # not complete: a new line, the same entry
        wait_for_input_line("hummock->")
        send("  IS NULL;", "Enter")
        wait_for("(0 rows)")
        send("Up")   # history: the whole two-line statement comes back as one entry
        time.sleep(0.5)
        recalled = screen().rstrip().splitlines()[-2:]
        assert recalled[0].endswith("SELECT * FROM widgets WHERE w") and recalled[1].endswith("IS NULL;"), recalled
        send("C-c")
        send("quit", "Enter")
        deadline = time.monotonic() + 30
        while "hummock=>" in screen().splitlines()[-1:] and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_a_tall_result_goes_through_the_pager_and_a_short_one_does_not(tmp_path, monkeypatch):
    from cli.terminal import completion_words, page
    monkeypatch.setenv("LINES", "24")
    monkeypatch.setenv("COLUMNS", "80")
    target = tmp_path / "paged.txt"
    command = ["sh", "-c", f"cat > '{target}'"]
    assert not page("one\ntwo", command) and not target.exists()
    tall = "\n".join(str(i) for i in range(100))
    assert page(tall, command) and target.read_text() == tall + "\n"
    assert not page(tall, None)   # PAGER="" turns paging off
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE widgets (wheel INT)")
        shell, out, _ = _shell(conn)
        words = completion_words(shell)
        assert {"SELECT", "\\dt", "widgets", "wheel"} <= set(words)
        shell.pager = command
        shell.feed("SELECT 1 AS x;")
        assert "(1 row)" in out.getvalue()   # short: printed, not paged
        conn.executemany("INSERT INTO widgets VALUES (%s)", [(i,) for i in range(60)])
        conn.execute("FLUSH")
        shell.feed("SELECT count(*) AS n FROM widgets;")
        shell.feed("SELECT wheel FROM widgets ORDER BY wheel;")
        assert " n\n----\n 60\n(1 row)" in out.getvalue() and "(60 rows)" not in out.getvalue()
        assert target.read_text().endswith("   59\n(60 rows)\n")
