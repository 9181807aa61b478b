"""Unit tests of tests/slt_runner.py against a tiny fake connection, so the runner is proven
independently of the SQL frontend: parsing, sort modes, error matching, value rendering,
file:line reporting and the rewrite mode."""

import datetime
import decimal

import pytest

import slt_runner
from hummock import HummockError
from relational.types import Interval
from slt_runner import SltError, SltFormatError, parse, render_value, run_file, run_text


class FakeError(HummockError):
    pass


class FakeCursor:
    def __init__(self, rows):
        self._rows = rows

    def fetchall(self):
        rows, self._rows = self._rows, []
        return rows


class FakeConn:
    """Answers each SQL text from a table: a list of rows, or an exception to raise."""

    def __init__(self, answers):
        self.answers = answers
        self.executed = []

    def execute(self, sql):
        self.executed.append(sql)
        answer = self.answers.get(sql, [])
        if isinstance(answer, BaseException):
            raise answer
        return FakeCursor(list(answer))


SAMPLE = """\
# a comment
statement ok
CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR);

statement error unknown column
SELECT c FROM t;

query IT rowsort
SELECT a, b
FROM t;
----
1 x
2 NULL
"""


def test_parse_records_lines_and_modes():
    recs = parse(SAMPLE, "s.slt")
    assert [(r.kind, r.line, r.expect_error, r.sort) for r in recs] == [
        ("statement", 2, None, "nosort"),
        ("statement", 5, "unknown column", "nosort"),
        ("query", 8, None, "rowsort"),
    ]
    assert recs[2].sql == "SELECT a, b\nFROM t;"
    assert recs[2].types == "IT"
    assert recs[2].expected == ["1 x", "2 NULL"]


def test_sample_passes_with_rowsort_in_any_order():
    conn = FakeConn({
        "SELECT c FROM t;": FakeError("unknown column c at line 1, column 8"),
        "SELECT a, b\nFROM t;": [(2, None), (1, "x")],
    })
    run_text(conn, SAMPLE, "s.slt", rewrite=False)
    assert conn.executed[0].startswith("CREATE TABLE")
    assert len(conn.executed) == 3


def test_result_mismatch_reports_file_and_line():
    conn = FakeConn({
        "SELECT c FROM t;": FakeError("unknown column c"),
        "SELECT a, b\nFROM t;": [(1, "x"), (3, None)],
    })
    with pytest.raises(SltError, match=r"^s\.slt:8: query result mismatch") as info:
        run_text(conn, SAMPLE, "s.slt", rewrite=False)
    assert "3 NULL" in str(info.value) and "2 NULL" in str(info.value)


def test_nosort_order_matters_and_rowsort_does_not():
    text = "query I nosort\nSELECT 1\n----\n1\n2\n"
    run_text(FakeConn({"SELECT 1": [(1,), (2,)]}), text, rewrite=False)
    with pytest.raises(SltError, match=":1:"):
        run_text(FakeConn({"SELECT 1": [(2,), (1,)]}), text, rewrite=False)
    run_text(FakeConn({"SELECT 1": [(2,), (1,)]}), text.replace("nosort", "rowsort"), rewrite=False)


def test_missing_or_extra_rows_fail():
    text = "query I rowsort\nSELECT 1\n----\n1\n"
    with pytest.raises(SltError):
        run_text(FakeConn({"SELECT 1": []}), text, rewrite=False)
    with pytest.raises(SltError):
        run_text(FakeConn({"SELECT 1": [(1,), (1,)]}), text, rewrite=False)


def test_empty_result_query():
    text = "query I\nSELECT 1 WHERE false\n----\n\nstatement ok\nX\n"
    run_text(FakeConn({"SELECT 1 WHERE false": []}), text, rewrite=False)
    with pytest.raises(SltError):
        run_text(FakeConn({"SELECT 1 WHERE false": [(1,)]}), text, rewrite=False)


def test_valuesort_sorts_individual_values():
    text = "query II valuesort\nQ\n----\n1 2\n3 4\n"
    run_text(FakeConn({"Q": [(4, 1), (3, 2)]}), text, rewrite=False)
    with pytest.raises(SltError):
        run_text(FakeConn({"Q": [(4, 1), (3, 5)]}), text, rewrite=False)


def test_column_count_is_checked():
    with pytest.raises(SltError, match="declares 2 columns"):
        run_text(FakeConn({"Q": [(1,)]}), "query II\nQ\n----\n1\n", rewrite=False)


def test_statement_ok_failing_reports_line():
    text = "\n\nstatement ok\nBAD\n"
    with pytest.raises(SltError, match=r"f\.slt:3: unexpected error FakeError: boom"):
        run_text(FakeConn({"BAD": FakeError("boom")}), text, "f.slt", rewrite=False)


def test_statement_error_requires_an_error_matching_the_regex():
    text = "statement error does not exist\nDROP TABLE x\n"
    run_text(FakeConn({"DROP TABLE x": FakeError("table x does not exist")}), text, rewrite=False)
    with pytest.raises(SltError, match="succeeded"):
        run_text(FakeConn({}), text, rewrite=False)
    with pytest.raises(SltError, match="does not match"):
        run_text(FakeConn({"DROP TABLE x": FakeError("syntax error")}), text, rewrite=False)


def test_statement_error_with_empty_regex_accepts_any_sql_error():
    run_text(FakeConn({"X": FakeError("whatever")}), "statement error\nX\n", rewrite=False)


def test_query_error_record():
    text = "query error division by zero\nSELECT 1/0\n"
    run_text(FakeConn({"SELECT 1/0": FakeError("division by zero")}), text, rewrite=False)
    with pytest.raises(SltError):
        run_text(FakeConn({"SELECT 1/0": [(1,)]}), text, rewrite=False)


def test_crashes_are_not_mistaken_for_expected_errors():
    """A RecursionError or TypeError is an engine crash, never a passing `statement error`."""
    text = "statement error\nX\n"
    with pytest.raises(RecursionError):
        run_text(FakeConn({"X": RecursionError("deep")}), text, rewrite=False)
    with pytest.raises(TypeError):
        run_text(FakeConn({"X": TypeError("bug")}), text, rewrite=False)


def test_malformed_files_are_rejected():
    with pytest.raises(SltFormatError, match=":1: unknown record header"):
        parse("stmt ok\nX\n", "m.slt")
    with pytest.raises(SltFormatError, match="without '----'"):
        parse("query I\nSELECT 1\n", "m.slt")
    with pytest.raises(SltFormatError, match="no SQL"):
        parse("statement ok\n\nX\n", "m.slt")
    with pytest.raises(SltFormatError, match="sort mode"):
        parse("query I sorted\nQ\n----\n1\n", "m.slt")
    with pytest.raises(SltFormatError, match="statement ok"):
        parse("statement maybe\nQ\n", "m.slt")


@pytest.mark.parametrize("value, text", [
    (None, "NULL"), (True, "t"), (False, "f"), ("", "(empty)"), ("a b", "a b"),
    (0, "0"), (-7, "-7"), (2 ** 63 - 1, "9223372036854775807"),
    (1.5, "1.5"), (1 / 3, "0.333"), (2.0, "2"), (-0.0, "0"), (-0.0001, "0"), (2.0005, "2.001"),
    (float("inf"), "Infinity"), (float("-inf"), "-Infinity"), (float("nan"), "NaN"),
    (decimal.Decimal("1.50"), "1.5"), (decimal.Decimal("1E+2"), "100"),
    (decimal.Decimal("-0.000"), "0"), (decimal.Decimal("12.345678"), "12.345678"),
    (decimal.Decimal("NaN"), "NaN"),
    (b"\x0a\xff", "\\x0aff"),
    (datetime.date(2026, 1, 2), "2026-01-02"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02 03:04:05"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5, 120000), "2026-01-02 03:04:05.12"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), "2026-01-02 03:04:05+00:00"),
    (datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
     "2026-01-02 01:04:05+00:00"),
    (datetime.time(3, 4, 5), "03:04:05"),
    (Interval(0, 1, 2 * 3600 * 1_000_000), "1 day 02:00:00"),
    (Interval(14, 3, 0), "1 year 2 mons 3 days"),
    (Interval(0, 0, 0), "00:00:00"),
    (Interval(0, -2, -90 * 1_000_000), "-2 days -00:01:30"),
    (Interval(1, 0, 500_000), "1 mon 00:00:00.5"),
])
def test_render_value(value, text):
    assert render_value(value) == text


def test_render_unknown_type_is_an_error():
    with pytest.raises(TypeError):
        render_value(object())


def test_rewrite_replaces_expected_rows_and_keeps_the_rest(tmp_path, monkeypatch):
    path = tmp_path / "r.slt"
    path.write_text("# keep me\nquery IT rowsort\nQ\n----\n9 old\n9 older\n\nstatement ok\nS\n\n"
                    "query I\nR\n----\n\n# tail\n")
    conn = FakeConn({"Q": [(2, None), (1, "")], "R": [(5,)]})
    monkeypatch.setenv("HUMMOCK_SLT_REWRITE", "1")
    run_file(conn, path)
    assert path.read_text() == ("# keep me\nquery IT rowsort\nQ\n----\n1 (empty)\n2 NULL\n\n"
                                "statement ok\nS\n\nquery I\nR\n----\n5\n\n# tail\n")
    monkeypatch.delenv("HUMMOCK_SLT_REWRITE")
    run_file(FakeConn({"Q": [(2, None), (1, "")], "R": [(5,)]}), path)  # now passes as golden


def test_rewrite_still_fails_on_statement_errors(tmp_path):
    path = tmp_path / "r.slt"
    path.write_text("statement ok\nS\n")
    with pytest.raises(SltError):
        run_file(FakeConn({"S": FakeError("no")}), path, rewrite=True)


def test_without_rewrite_the_file_is_untouched(tmp_path):
    path = tmp_path / "r.slt"
    original = "query I\nQ\n----\n1\n"
    path.write_text(original)
    with pytest.raises(SltError):
        run_file(FakeConn({"Q": [(2,)]}), path, rewrite=False)
    assert path.read_text() == original


def test_module_is_importable_without_the_frontend():
    assert slt_runner.SORT_MODES == ("nosort", "rowsort", "valuesort")


# ---- the golden files themselves ----------------------------------------------------------------
# Every tests/sql/*.slt file must parse, and its expected rows must agree with DuckDB wherever
# DuckDB's semantics are Postgres's: MVs become views (an MV's contents = its query's answer),
# FLUSH/SET/EXPLAIN are no-ops, error records are skipped (they leave no change). A record
# preceded by a `# hand` line is exempt (semantics differ; the file's comment says how); a file
# containing a `# oracle: none` line is exempt entirely (RisingWave-only features).

import re  # noqa: E402
from pathlib import Path  # noqa: E402

SLT_DIR = Path(__file__).parent / "sql"
SLT_FILES = sorted(SLT_DIR.glob("*.slt"))


def _to_duckdb(text):
    import sqlglot

    s = text.strip().rstrip(";")
    head = s.split(None, 1)[0].upper()
    if head in ("FLUSH", "SET", "EXPLAIN"):
        return None
    s = re.sub(r"\bAPPEND ONLY\b", "", s, flags=re.I)
    s = re.sub(r"\bCREATE MATERIALIZED VIEW\b", "CREATE VIEW", s, flags=re.I)
    s = re.sub(r"\bDROP MATERIALIZED VIEW\b", "DROP VIEW", s, flags=re.I)
    return ";".join(sqlglot.transpile(s, read="postgres", write="duckdb"))


def test_golden_files_exist_and_parse():
    expected = {"ddl", "dml", "on_conflict", "expressions", "aggregates", "joins", "set_ops",
                "subqueries_ctes", "top_n", "window_row_number", "tumble_hop", "dynamic_filter",
                "mv_on_mv", "time_travel", "explain", "session_vars", "flush_consistency"}
    assert expected <= {p.stem for p in SLT_FILES}
    for path in SLT_FILES:
        records = parse(path.read_text(), str(path))
        assert records, path
        assert any(r.kind == "query" for r in records), path


@pytest.mark.parametrize("path", SLT_FILES, ids=[p.stem for p in SLT_FILES])
def test_golden_file_agrees_with_duckdb(path):
    duckdb = pytest.importorskip("duckdb")
    text = path.read_text()
    lines = text.split("\n")
    if any(line.strip() == "# oracle: none" for line in lines):
        pytest.skip(f"{path.name}: RisingWave-only features, expected rows are by hand")
    db = duckdb.connect()
    db.execute("SET integer_division = true")  # Postgres: integer / integer truncates
    checked = 0
    for rec in parse(text, str(path)):
        hand = rec.line >= 2 and lines[rec.line - 2].strip() == "# hand"
        if rec.expect_error is not None or hand:
            continue
        query = _to_duckdb(rec.sql)
        if query is None:
            continue
        rows = db.execute(query).fetchall()
        if rec.kind == "query":
            actual = slt_runner.render_rows(rows, rec.sort)
            assert actual == slt_runner._expected_lines(rec), f"{path}:{rec.line}: DuckDB says {actual}"
            checked += 1
    assert checked > 0
