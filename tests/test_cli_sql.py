"""``hummock sql`` fed by stdin and ``hummock run`` on scripts, as subprocesses (the way a user
runs them), plus the statement splitting and table rendering they share (cli/script.py)."""

import os
import pathlib
import subprocess
import sys

import pytest

from cli.script import command_tag, is_complete, render_table, split_statements

ROOT = pathlib.Path(__file__).resolve().parent.parent


def hummock(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               HUMMOCK_HISTORY=os.devnull)
    return subprocess.run([sys.executable, "-m", "cli", *map(str, args)], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


# --- cli/script.py ------------------------------------------------------------------------------

def test_split_statements_keeps_positions_and_respects_quotes_and_comments():
    text = "SELECT 1;\n  -- a comment; still a comment\n  SELECT 'a;b' /* ; */ ,\n 2 ;\n;  \n-- only\n"
    parts = split_statements(text)
    assert [(p.text, p.line, p.column) for p in parts] == [
        ("SELECT 1", 1, 1), ("-- a comment; still a comment\n  SELECT 'a;b' /* ; */ ,\n 2", 2, 3)]


@pytest.mark.parametrize("buffer, complete", [
    ("SELECT 1", False), ("SELECT 1;", True), ("SELECT 1;  -- done\n", True), ("SELECT ';'", False),
    ("SELECT 1; SELECT", False), ("SELECT 1; /* open", False), ("", False), ("-- x;\n", False)])
def test_is_complete(buffer, complete):
    assert is_complete(buffer) is complete


def test_render_table_aligns_numbers_right_and_text_left():
    text = render_table(["id", "name", "ok"], [(1, "ab", True), (100, None, False)])
    assert text.splitlines() == ["  id | name | ok", "-----+------+----", "   1 | ab   | t",
                                 " 100 |      | f", "(2 rows)"]
    assert render_table(["x"], []).splitlines()[-1] == "(0 rows)"


def test_command_tags():
    assert command_tag("insert into t values (1)", 1) == "INSERT 0 1"
    assert command_tag("DELETE FROM t", 3) == "DELETE 3"
    assert command_tag("create materialized view m as select 1", -1) == "CREATE MATERIALIZED VIEW"
    assert command_tag("FLUSH", -1) == "FLUSH"


# --- hummock sql, stdin -----------------------------------------------------------------------------

SESSION = """CREATE TABLE t (id INT PRIMARY KEY, g VARCHAR, v INT);
CREATE MATERIALIZED VIEW m AS
  SELECT g, count(*) AS n, sum(v) AS s
  FROM t GROUP BY g;
INSERT INTO t VALUES (1, 'a', 10), (2, 'a', 5),
                     (3, 'b;c', 7);
FLUSH;
\\dt
\\dm
\\d m
\\timing on
SELECT * FROM m ORDER BY g;
\\timing off
SELECT nosuch FROM t;
SELECT count(*) AS rows FROM t;
\\q
SELECT 'never run';
"""


def test_sql_shell_reads_a_script_from_stdin(tmp_path):
    out = hummock("sql", tmp_path / "db", stdin=SESSION)
    assert out.returncode == 4, out.stderr            # one statement failed; the rest ran
    text = out.stdout
    assert "CREATE TABLE\nCREATE MATERIALIZED VIEW\nINSERT 0 3\nFLUSH\n" in text
    assert " t    | table" in text and " m    | materialized view" in text
    assert 'Materialized view "m"' in text and "View definition:" in text and "COUNT(*)" in text
    assert "  g  | n | s\n-----+---+----\n a   | 2 | 15\n b;c | 1 |  7\n(2 rows)\nTime: " in text
    assert " rows\n------\n    3\n(1 row)" in text
    assert "never run" not in text
    assert text.count("Time: ") == 1
    assert "ERROR: BindError: column 'nosuch' does not exist at line 14, column 8" in out.stderr
    assert "Traceback" not in out.stderr
    again = hummock("sql", tmp_path / "db", stdin="SELECT sum(s) FROM m")   # reopened; no final ';'
    assert again.returncode == 0 and "  22\n(1 row)" in again.stdout


def test_sql_shell_on_error_stop_and_bad_meta_command():
    out = hummock("sql", "--on-error-stop", stdin="\\nope\nSELEC 1;\nSELECT 2;\n")
    assert out.returncode == 4
    assert "invalid command \\nope" in out.stderr and "SqlSyntaxError" in out.stderr
    assert "2" not in out.stdout


# --- hummock run ------------------------------------------------------------------------------------

def test_run_prints_results_then_stops_at_the_first_error(tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t (id INT PRIMARY KEY);\nINSERT INTO t VALUES (1), (2);\nFLUSH;\n"
                      "SELECT id FROM t ORDER BY id;\n\nSELECT id,\n       missing FROM t;\nSELECT 42;\n")
    out = hummock("run", ":memory:", script)
    assert out.returncode == 4
    assert out.stdout.splitlines() == ["CREATE TABLE", "INSERT 0 2", "FLUSH", " id", "----", "  1", "  2",
                                       "(2 rows)"]
    first, stmt, *body = out.stderr.splitlines()
    assert first == f"{script}:7:8: ERROR: BindError: column 'missing' does not exist at line 7, column 8"
    assert stmt == "STATEMENT (line 6, column 1):" and body == ["  SELECT id,", "         missing FROM t"]


def test_run_error_without_a_position_names_the_statement_start(tmp_path):
    script = tmp_path / "s.sql"
    script.write_text("CREATE TABLE t (id INT PRIMARY KEY);\n  CREATE TABLE t (id INT PRIMARY KEY);\n")
    out = hummock("run", tmp_path / "db", script)
    assert out.returncode == 4 and "CatalogError" in out.stderr and f"{script}:2:" in out.stderr


def test_run_reads_stdin_and_a_clean_script_exits_0():
    out = hummock("run", ":memory:", "-", "--echo", stdin="SELECT 1 + 1 AS two;")
    assert out.returncode == 0 and out.stdout.splitlines() == ["SELECT 1 + 1 AS two;", " two", "-----",
                                                                 "   2", "(1 row)"]


def test_run_on_a_missing_file_or_store_is_exit_3(tmp_path):
    assert hummock("run", ":memory:", tmp_path / "absent.sql").returncode != 0


# --- issue 25: unreadable scripts, control characters, one statement per execute --------------

def _no_traceback(out):
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout, out.stderr


def test_run_on_a_missing_directory_or_non_utf8_script_is_exit_3_with_a_message(tmp_path):
    out = hummock("run", ":memory:", tmp_path / "absent.sql")
    assert out.returncode == 3 and "cannot read the script" in out.stderr and "No such file" in out.stderr
    _no_traceback(out)
    out = hummock("run", ":memory:", tmp_path)
    assert out.returncode == 3 and "cannot read the script" in out.stderr and "directory" in out.stderr
    _no_traceback(out)
    script = tmp_path / "latin1.sql"
    script.write_bytes(b"SELECT 1;\nSELECT 'caf\xe9';\n")
    out = hummock("run", ":memory:", script)
    assert out.returncode == 3 and "is not UTF-8 text: byte 0xe9 at line 2, column 12" in out.stderr
    assert out.stdout == ""   # nothing ran: the script is read whole first
    _no_traceback(out)


def test_sql_on_stdin_that_is_not_utf8_stops_with_exit_3_after_what_ran():
    out = subprocess.run([sys.executable, "-m", "cli", "sql"], input=b"SELECT 41 + 1 AS x;\nSELECT '\xff';\n",
                         capture_output=True, cwd=ROOT, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), HUMMOCK_HISTORY=os.devnull))
    assert out.returncode == 3, out.stderr
    assert b"42" in out.stdout and b"<stdin> is not UTF-8 text: byte 0xff at line 2, column 9" in out.stderr
    assert b"Traceback" not in out.stderr


CONTROL = "a\x1b[2Jb\rc\x07d\u202ee\nf"


def test_results_and_names_from_stored_data_reach_the_terminal_escaped(tmp_path):
    script = (f"CREATE TABLE \"t\x1b[31m\" (v VARCHAR);\nINSERT INTO \"t\x1b[31m\" VALUES ('{CONTROL}');\nFLUSH;\n"
              f"SELECT v, v AS \"h\x1b[1m\" FROM \"t\x1b[31m\";\n\\dt\nSELECT v::int FROM \"t\x1b[31m\";\n")
    out = hummock("sql", tmp_path / "db", stdin=script)
    assert out.returncode == 4   # the cast fails: its message holds the value too
    for stream in (out.stdout, out.stderr):
        assert not any(c in stream for c in "\x1b\r\x07\u202e"), repr(stream)
    assert "a\\x1b[2Jb\\rc\\x07d\\u202ee\\nf" in out.stdout and "h\\x1b[1m" in out.stdout
    assert "t\\x1b[31m" in out.stdout and "a\\x1b[2Jb\\rc" in out.stderr
    (tmp_path / "s.sql").write_text(script)
    out = hummock("run", tmp_path / "db2", tmp_path / "s.sql")
    assert "a\\x1b[2Jb" in out.stdout and not any(c in out.stdout + out.stderr for c in "\x1b\r\x07\u202e")


def test_printable_and_render_table_escape_controls_but_keep_text():
    from cli.common import printable
    assert printable("plain, ünïcode ✓ and \\ backslash") == "plain, ünïcode ✓ and \\ backslash"
    assert printable("a\tb\nc\rd\x1b\x9b\u2028\udc80") == "a\tb\nc\\rd\\x1b\\x9b\\u2028\\udc80"
    assert printable("a\tb\nc", single_line=True) == "a\\tb\\nc"
    text = render_table(["x\x1b"], [("1\n2",), (None,)])
    assert text.splitlines() == [" x\\x1b", "-------", " 1\\n2", "", "(2 rows)"]


def test_run_still_runs_a_multi_statement_script_and_execute_refuses_one():
    script = "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); FLUSH; SELECT count(*) AS n FROM t;"
    out = hummock("run", ":memory:", "-", stdin=script)
    assert out.returncode == 0 and " n\n---\n 2\n(1 row)" in out.stdout
    out = hummock("sql", stdin="CREATE TABLE t (a INT); INSERT INTO t VALUES (1); FLUSH;\nSELECT a FROM t;\n")
    assert out.returncode == 0 and "INSERT 0 1" in out.stdout and " a\n---\n 1\n(1 row)" in out.stdout
    import sql
    with sql.connect(":memory:") as conn, pytest.raises(sql.SqlSyntaxError, match="runs one statement"):
        conn.execute(script)


def test_describe_meta_command_reads_names_as_describe_does(tmp_path):
    script = ('CREATE TABLE "we""ird" (a INT);\nCREATE TABLE "X" (b INT);\nCREATE TABLE lower_t (c INT);\n'
              '\\d "we""ird"\n\\d public."X"\n\\d LOWER_T\n\\d "LOWER_T"\n')
    out = hummock("sql", tmp_path / "db", stdin=script)
    assert 'Table "we"ird"' in out.stdout and 'Table "X"' in out.stdout and 'Table "lower_t"' in out.stdout
    assert "Did not find any relation named '\"LOWER_T\"'" in out.stderr   # quoted: case kept, so absent
    assert out.returncode == 4 and "Traceback" not in out.stderr


def test_a_query_says_why_rows_just_written_are_missing(tmp_path):
    """Issue 27: after an INSERT, a SELECT that cannot see the rows yet gets a NOTICE naming the
    next barrier and FLUSH; none once they are committed, none without pending writes."""
    import io

    import sql
    from cli.shell import Shell

    for interval, expected in ((0, "at FLUSH (barrier_interval_ms=0"), (3_600_000, "every 3600000 ms")):
        conn = sql.connect(str(tmp_path / f"db{interval}"), barrier_interval_ms=interval)
        try:
            out, err = io.StringIO(), io.StringIO()
            shell = Shell(conn, out=out, err=err)
            for line in ("CREATE TABLE t (a INT);", "SELECT * FROM t;", "INSERT INTO t VALUES (1), (2);",
                         "SELECT * FROM t;"):
                shell.feed(line)
            notices = [ln for ln in err.getvalue().splitlines() if ln.startswith("NOTICE")]
            assert len(notices) == 1 and "2 written row(s) are not visible" in notices[0], err.getvalue()
            assert expected in notices[0] and "run FLUSH" in notices[0]
            for line in ("FLUSH;", "SELECT * FROM t;"):
                shell.feed(line)
            assert len([ln for ln in err.getvalue().splitlines() if ln.startswith("NOTICE")]) == 1
            assert "(2 rows)" in out.getvalue()
        finally:
            conn.close()


def test_index_meta_commands(tmp_path):
    """``\\di`` lists indexes, ``\\d TABLE`` names its indexes, ``\\d INDEX`` its table and key."""
    import io

    import sql
    from cli.shell import Shell

    with sql.connect(str(tmp_path / "db")) as conn:
        out, err = io.StringIO(), io.StringIO()
        shell = Shell(conn, out=out, err=err)
        for line in ("CREATE TABLE t (id INT PRIMARY KEY, g VARCHAR, v INT);", "CREATE INDEX t_g ON t (g DESC, v);",
                     "\\di", "\\d t", "\\d t_g", "\\dt"):
            shell.feed(line)
        text = out.getvalue()
        assert "CREATE INDEX" in text and " t_g  | index |" in text, text
        assert 'Indexes:\n    "t_g" (g DESC, v)' in text and 'Index "t_g"\n  on "t" (g DESC, v)' in text, text
        assert text.count("t_g") == 3 and err.getvalue() == ""   # \dt lists no index
