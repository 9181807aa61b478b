"""Unit tests of the SQL pipeline steps one by one: parse pre-pass, types, binder + logical
plan keys, EXPLAIN, batch execution, the stream hooks the SQL layer added (Case, Like,
substr/replace..., Backfill via a rebuild, start_ticker) and crash atomicity of CREATE MV."""

import datetime
import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import sql
from relational.types import DataType as D, Interval
from sql import types as T
from sql.bind.select import QueryBinder
from sql.catalog import SqlCatalog, Relation
from sql.errors import BindError, UnsupportedError
from sql.parse import parse_script
from sql.plan import nodes as P
from relational.catalog import TableDesc
from stream import expr as E


# --- parse ------------------------------------------------------------------------------------------

def test_prepass_statements_and_options():
    stmts = parse_script("FLUSH; SET rw_implicit_flush TO true; SHOW MATERIALIZED VIEWS; DESCRIBE t;"
                         "CREATE TABLE t (a INT PRIMARY KEY) APPEND ONLY ON CONFLICT DO NOTHING; EXPLAIN SELECT 1;"
                         " -- just a comment\n")
    assert [s.kind for s in stmts] == ["flush", "set", "show", "describe", "ast", "explain"]
    assert stmts[1].value == "true" and stmts[2].name == "materialized views"
    assert stmts[4].options == {"append_only": True, "on_conflict": "ignore"}
    assert stmts[5].inner.kind == "ast"


def test_positions_survive_the_prepass():
    with pytest.raises(sql.SqlSyntaxError) as info:
        parse_script("CREATE TABLE t (a INT) APPEND ONLY;\n\n  SELECT (1")
    assert info.value.line == 3


def test_semicolons_and_placeholders_in_strings_are_text():
    [stmt] = parse_script("SELECT ';', '%s', \"a;b\" FROM t WHERE x = %s")
    assert stmt.n_params == 1


def test_as_of_epoch_is_rewritten_in_place():
    """sqlglot has no EPOCH form: the pre-pass spells it FOR VERSION, keeping later positions."""
    [stmt] = parse_script("SELECT * FROM t AS OF EPOCH 7 WHERE nosuch = 'AS OF EPOCH'")
    version = stmt.ast.args["from_"].this.args["version"]
    assert str(version.this).upper() == "VERSION" and version.expression.this == "7"
    assert stmt.ast.args["where"].this.expression.this == "AS OF EPOCH"
    [stmt] = parse_script("SELECT * FROM t FOR SYSTEM_TIME AS OF EPOCH 7")
    assert stmt.ast.args["from_"].this.args["version"].expression.this == "7"


def test_time_travel_in_a_materialized_view_is_unsupported_with_position():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT)")
        with pytest.raises(UnsupportedError, match="time travel") as info:
            conn.execute("CREATE MATERIALIZED VIEW m AS SELECT * FROM t FOR SYSTEM_TIME AS OF now()")
        assert (info.value.line, info.value.column) == (1, 69)   # the AS OF expression


# --- types ------------------------------------------------------------------------------------------

def test_implicit_casts_follow_postgres_ladders():
    assert T.can_implicit_cast(D.SMALLINT, D.BIGINT) and T.can_implicit_cast(D.INT, D.DOUBLE)
    assert not T.can_implicit_cast(D.BIGINT, D.INT) and not T.can_implicit_cast(D.INT, D.VARCHAR)
    assert T.common_supertype(D.INT, D.DECIMAL) == D.DECIMAL
    assert T.common_supertype(D.DATE, D.TIMESTAMP) == D.TIMESTAMP
    assert T.common_supertype(D.VARCHAR, D.INT) is None


def test_literal_and_text_typing():
    assert T.literal_type(1) == D.INT and T.literal_type(1 << 40) == D.BIGINT and T.literal_type(True) == D.BOOLEAN
    assert T.literal_type(datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)) == D.TIMESTAMPTZ
    assert T.parse_text("2024-01-02", D.DATE) == datetime.date(2024, 1, 2)
    assert T.parse_text("1 day 02:00:00", D.INTERVAL) == Interval(0, 1, 2 * 3_600_000_000)
    assert T.parse_text("t", D.BOOLEAN) is True
    assert T.coerce_value(2, D.DECIMAL) == decimal.Decimal(2)
    assert T.description_name(D.VARCHAR) == "character varying"


# --- binder + plan ------------------------------------------------------------------------------------

def _catalog():
    cat = SqlCatalog()
    cat.add(Relation("table", TableDesc(1, "t", (("a", D.INT), ("b", D.VARCHAR), ("_row_id", D.BIGINT)), (2,)),
                     2, row_id=True))
    cat.add(Relation("table", TableDesc(2, "u", (("k", D.INT), ("v", D.INT)), (0,)), 2))
    return cat


def _plan(text, batch=False):
    [stmt] = parse_script(text)
    return QueryBinder(_catalog(), batch=batch).bind_query(stmt.ast)


def test_project_keeps_the_stream_key_as_hidden_column():
    plan = _plan("SELECT b FROM t")
    assert plan.n_visible == 1 and plan.names[0] == "b"
    assert plan.stream_key == [1] and plan.types[1] == D.BIGINT


def test_agg_key_is_the_group_and_join_key_is_both_keys():
    plan = _plan("SELECT b, count(*) FROM t GROUP BY b")
    agg = next(n for n in P.walk(plan) if isinstance(n, P.Agg))
    assert agg.stream_key == [0] and agg.calls[0].return_type == D.BIGINT
    join = next(n for n in P.walk(_plan("SELECT a, v FROM t JOIN u ON t.a = u.k")) if isinstance(n, P.Join))
    assert join.left_keys == [0] and join.right_keys == [0] and join.stream_key == [2, 3]


def test_comma_join_takes_its_equalities_from_where():
    plan = _plan("SELECT a FROM t, u WHERE t.a = u.k AND u.v > 1")
    join = next(n for n in P.walk(plan) if isinstance(n, P.Join))
    assert join.condition is None
    assert any(isinstance(n, P.Filter) for n in P.walk(plan))


def test_union_all_key_is_tag_plus_slots():
    plan = _plan("SELECT a FROM t UNION ALL SELECT k FROM u")
    assert isinstance(plan, P.Union) and plan.n_visible == 1 and plan.stream_key == [1, 2, 3]


@pytest.mark.parametrize("text, error, match", [
    ("SELECT c FROM t", BindError, "does not exist"),
    ("SELECT a FROM t, u WHERE a = v AND b = 'x' AND k = a + 0", None, None),
    ("SELECT b, a FROM t GROUP BY b", BindError, "GROUP BY"),
    ("SELECT a + 'x' FROM t", BindError, "invalid input syntax"),
    ("SELECT DISTINCT ON (a) a, b FROM t ORDER BY b", BindError, "DISTINCT ON expressions must match"),
    ("SELECT a FROM t ORDER BY a", None, None),
    ("SELECT a FROM t WHERE a > (SELECT max(k) FROM u WHERE u.k < t.a)", UnsupportedError, "correlated"),
    ("SELECT a, (SELECT k FROM u) FROM t", UnsupportedError, "at most one row"),
    ("SELECT a FROM t WHERE a IN (SELECT k FROM u) OR a = 1", UnsupportedError, "IN \\(subquery\\)"),
    ("SELECT a FROM t JOIN u ON t.a > u.k", UnsupportedError, "equality"),
    ("SELECT mode() WITHIN GROUP (ORDER BY a) FROM t", UnsupportedError, "aggregate mode"),
    ("SELECT a FROM t WHERE regexp_matches(b::text, 'x') IS NULL", UnsupportedError, "regexp_matches"),
    ("SELECT a, sum(b) OVER (ORDER BY a GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", UnsupportedError,
     "window frame GROUPS"),
    ("SELECT a, sum(b) OVER (ORDER BY a ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t", UnsupportedError,
     "window frame"),
    ("SELECT ARRAY[a] AS x, count(*) FROM t GROUP BY ARRAY[a]", UnsupportedError, "array .* GROUP BY"),
])
def test_bind_errors_name_the_problem(text, error, match):
    if error is None:
        _plan(text)
        return
    with pytest.raises(error, match=match) as info:
        _plan(text)
    assert info.value.line == 1 or error is UnsupportedError


# --- stream hooks ---------------------------------------------------------------------------------------

@given(st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=20))
@settings(max_examples=50, deadline=None)
def test_case_matches_python(values):
    col = E.Col(0, D.INT)
    case = E.Case([(E.Cmp(">", col, E.Lit(0, D.INT)), E.Lit(1, D.INT)),
                   (E.IsNull(col), E.Lit(-1, D.INT))], E.Lit(0, D.INT), D.INT)
    got = case.eval([pa.array(values, pa.int32())], len(values)).to_pylist()
    assert got == [-1 if v is None else (1 if v > 0 else 0) for v in values]


def test_like_and_string_functions():
    col = [pa.array(["apple", "Banana", None])]
    s = E.Col(0, D.VARCHAR)
    assert E.Like(s, "%an%").eval(col, 3).to_pylist() == [False, True, None]
    assert E.Like(s, "b%", ignore_case=True).eval(col, 3).to_pylist() == [False, True, None]
    assert E.Func("substr", s, E.Lit(2, D.INT), E.Lit(3, D.INT)).eval(col, 3).to_pylist() == ["ppl", "ana", None]
    assert E.Func("replace", s, E.Lit("a", D.VARCHAR), E.Lit("o", D.VARCHAR)).eval(col, 3).to_pylist() == \
        ["opple", "Bonono", None]
    assert E.Func("power", E.Lit(2, D.INT), E.Lit(10, D.INT)).eval([], 1).to_pylist() == [1024.0]


# --- end to end: EXPLAIN, batch, crash atomicity ---------------------------------------------------------

def test_explain_batch_and_stream():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
        batch = [r[0] for r in conn.execute("EXPLAIN SELECT a FROM t WHERE b > 1 ORDER BY a")]
        assert batch[0].startswith("BatchSort") and any("BatchScan(t" in line for line in batch)
        conn.execute("CREATE MATERIALIZED VIEW m AS SELECT b, max(a) FROM t GROUP BY b")
        stream = [r[0] for r in conn.execute("EXPLAIN CREATE MATERIALIZED VIEW m2 AS SELECT * FROM m JOIN t ON m.b = t.a")]
        assert any("StreamHashJoin" in line and "state_tables=['new0'" in line for line in stream)


def test_crash_after_create_mv_keeps_record_and_backfill_together(tmp_path):
    path = str(tmp_path)
    conn = sql.connect(path, barrier_interval_ms=0)
    conn.execute("CREATE TABLE t (a INT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1), (2), (3)")
    conn.execute("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n FROM t")
    conn.execute("INSERT INTO t VALUES (4)")   # not flushed: lost by the crash
    conn.db.rt.abort()
    conn.db.store.close()
    with sql.connect(path) as conn:
        assert conn.execute("SELECT n FROM m").fetchall() == [(3,)]
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(3,)]
        conn.execute("INSERT INTO t VALUES (4)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT n FROM m").fetchall() == [(4,)]


def test_ticker_makes_dml_visible_without_flush():
    import time
    with sql.connect(":memory:", barrier_interval_ms=20) as conn:
        conn.execute("CREATE TABLE t (a INT)")
        conn.execute("INSERT INTO t VALUES (1)")
        for _ in range(200):
            if conn.execute("SELECT count(*) FROM t").fetchone() == (1,):
                break
            time.sleep(0.02)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_rules_merge_filters_and_keep_stateful_nodes():
    from sql.plan.rules import optimize
    plan = optimize(_plan("SELECT a FROM (SELECT a, b FROM t WHERE a > 1) AS s WHERE s.b = 'x' AND TRUE"))
    filters = [n for n in P.walk(plan) if isinstance(n, P.Filter)]
    assert len(filters) <= 2
    agg_plan = _plan("SELECT b, count(*) FROM t WHERE a > 0 GROUP BY b")
    before = [type(n) for n in P.walk(agg_plan) if isinstance(n, (P.Agg, P.Join))]
    assert [type(n) for n in P.walk(optimize(agg_plan)) if isinstance(n, (P.Agg, P.Join))] == before


def test_table_behaviours_row_id_update_on_conflict_append_only():
    with sql.connect(":memory:", implicit_flush=True) as conn:
        conn.execute("CREATE TABLE n (a INT, b INT)")
        conn.execute("INSERT INTO n VALUES (1, 1), (1, 1), (2, 2)")   # duplicates are distinct rows
        assert conn.execute("UPDATE n SET b = b + 10 WHERE a = 1").rowcount == 2
        assert sorted(conn.execute("SELECT * FROM n").fetchall()) == [(1, 11), (1, 11), (2, 2)]
        assert [d[0] for d in conn.execute("SELECT * FROM n").description] == ["a", "b"]   # _row_id hidden
        conn.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT) ON CONFLICT DO NOTHING")
        conn.execute("INSERT INTO k VALUES (1, 1)")
        conn.execute("INSERT INTO k VALUES (1, 2)")
        assert conn.execute("SELECT * FROM k").fetchall() == [(1, 1)]
        conn.execute("CREATE TABLE o (id INT PRIMARY KEY, v INT)")   # default: overwrite
        conn.execute("INSERT INTO o VALUES (1, 1)")
        conn.execute("INSERT INTO o VALUES (1, 2)")
        assert conn.execute("SELECT * FROM o").fetchall() == [(1, 2)]
        conn.execute("CREATE TABLE ao (a INT) APPEND ONLY")
        with pytest.raises(sql.ExecutionError, match="append-only"):
            conn.execute("DELETE FROM ao")
        conn.execute("DROP TABLE k")
        conn.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
        assert conn.execute("SELECT * FROM k").fetchall() == []
