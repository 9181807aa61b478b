"""Arrays without the PostgreSQL oracle (tests/test_sql_pg_arrays.py has it): the array
functions and operators of stream/expr_array.py against a Python model of Postgres' definitions
(hypothesis, few examples), ``array_out`` / ``array_in`` text round trips, refusals by name with
a position, arrays in a materialized view under inserts, updates and deletes equal to their batch
recomputation (``unnest`` in an MV through the ProjectSet executor among them), and the text the shell
and pgwire show.
"""

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from relational.arrow import to_arrow, to_pylist
from relational.types import DataType
from sql.errors import BindError, ExecutionError, UnsupportedError
from stream import expr as E
from stream.chunk import DELETE, INSERT, StreamChunk
from stream.executor import Checked
from stream.executors.project_set import ProjectSet
from stream.expr_array import array_text, format_array_value, parse_array_text, quote_element
from stream.schema import Schema
from stream_harness import Epochs, ListSource, drain, visible_rows

INT_ARR = DataType.list(DataType.INT)
TEXT_ARR = DataType.list(DataType.VARCHAR)

ints = st.none() | st.integers(-3, 3)
int_arrays = st.none() | st.lists(ints, max_size=5)
texts = st.none() | st.sampled_from(["", "a", "NULL", "a,b", 'q"', "b\\", "{x}", "two words", "é"])
text_arrays = st.none() | st.lists(texts, max_size=4)


def col(values, dtype):
    return to_arrow(values, dtype)


def run(node, columns):
    with E.raising_errors():
        return to_pylist(node.eval(columns, len(columns[0])), node.data_type)


# --- the model: Postgres' definitions over Python lists -----------------------------------------

def m_length(a):
    return None if a is None or not a else len(a)


def m_position(a, x):
    if a is None:
        return None
    return next((i + 1 for i, e in enumerate(a) if e == x), None)   # IS NOT DISTINCT FROM (None == None)


def m_any(x, a, test):
    if a is None:
        return None
    if any(x is not None and e is not None and test(x, e) for e in a):
        return True
    return None if any(x is None or e is None for e in a) else False


def m_all(x, a, test):
    if a is None:
        return None
    if any(x is not None and e is not None and not test(x, e) for e in a):
        return False
    return None if any(x is None or e is None for e in a) else True


def m_to_string(a, sep, null=None):
    if a is None:
        return None
    return sep.join(str(e) if e is not None else null for e in a if e is not None or null is not None)


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(st.tuples(int_arrays, int_arrays, ints), min_size=1, max_size=8))
def test_array_functions_match_the_model(rows):
    a_vals, b_vals, x_vals = zip(*rows)
    cols = [col(list(a_vals), INT_ARR), col(list(b_vals), INT_ARR), col(list(x_vals), DataType.INT)]
    a, b, x = E.Col(0, INT_ARR), E.Col(1, INT_ARR), E.Col(2, DataType.INT)
    one = E.Lit(1, DataType.INT)
    cases = [
        (E.Func("array_length", a, one), [m_length(r[0]) for r in rows]),
        (E.Func("cardinality", a), [None if r[0] is None else len(r[0]) for r in rows]),
        (E.Func("array_position", a, x), [m_position(r[0], r[2]) for r in rows]),
        (E.Func("array_append", a, x), [(r[0] or []) + [r[2]] for r in rows]),
        (E.Func("array_prepend", x, a), [[r[2]] + (r[0] or []) for r in rows]),
        (E.Func("array_cat", a, b), [None if r[0] is None and r[1] is None else (r[0] or []) + (r[1] or [])
                                     for r in rows]),
        (E.Func("array_remove", a, x), [None if r[0] is None else [e for e in r[0] if e != r[2]] for r in rows]),
        (E.Func("array_to_string", a, E.Lit(",", DataType.VARCHAR)), [m_to_string(r[0], ",") for r in rows]),
        (E.Func("array_to_string", a, E.Lit("-", DataType.VARCHAR), E.Lit("*", DataType.VARCHAR)),
         [m_to_string(r[0], "-", "*") for r in rows]),
        (E.ArrayIndex(a, x), [None if r[0] is None or r[2] is None or not 1 <= r[2] <= len(r[0]) else r[0][r[2] - 1]
                              for r in rows]),
        (E.ArraySlice(a, x, None), [None if r[0] is None or r[2] is None else r[0][max(r[2], 1) - 1:]
                                    for r in rows]),
        (E.ArrayCompare("=", x, a, "any"), [m_any(r[2], r[0], lambda p, q: p == q) for r in rows]),
        (E.ArrayCompare("<", x, a, "all"), [m_all(r[2], r[0], lambda p, q: p < q) for r in rows]),
        (E.ArrayCompare(">=", one, a, "any"), [m_any(1, r[0], lambda p, q: p >= q) for r in rows]),
        (E.ArrayCompare("<>", E.Lit(None, DataType.INT), a, "all"), [m_all(None, r[0], lambda p, q: p != q)
                                                                      for r in rows]),
        (E.ArrayCompare("=", x, E.Lit([1, None], INT_ARR), "any"), [m_any(r[2], [1, None], lambda p, q: p == q)
                                                                     for r in rows]),
        (E.ArrayCompare("=", E.Cast(x, DataType.BIGINT), a, "any"),   # operand types differ: row by row
         [m_any(r[2], r[0], lambda p, q: p == q) for r in rows]),
        (E.ArrayCtor([x, E.Lit(None, DataType.INT)], DataType.INT), [[r[2], None] for r in rows]),
    ]
    for node, expected in cases:
        assert run(node, cols) == expected, str(node)


@settings(max_examples=25, deadline=None)
@given(values=st.lists(text_arrays, min_size=1, max_size=6))
def test_array_text_reads_back_as_the_same_array(values):
    out = array_text(col(values, TEXT_ARR), TEXT_ARR)
    assert [None if t is None else parse_array_text(t) for t in out] == values
    cast = E.Cast(E.Cast(E.Col(0, TEXT_ARR), DataType.VARCHAR), TEXT_ARR)   # array_out then array_in
    assert run(cast, [col(values, TEXT_ARR)]) == values


def test_array_out_quotes_as_postgres():
    assert format_array_value([1, None, -2], INT_ARR) == "{1,NULL,-2}"
    assert format_array_value(["", "NULL", "a b", 'q"t', "b\\s", "x"], TEXT_ARR) == \
        '{"","NULL","a b","q\\"t","b\\\\s",x}'
    assert format_array_value([True, False], DataType.list(DataType.BOOLEAN)) == "{t,f}"
    assert format_array_value([], INT_ARR) == "{}"
    assert quote_element("{") == '"{"'
    assert parse_array_text(' { 1 , "2" ,NULL, "NULL" } ') == ["1", "2", None, "NULL"]
    for bad in ("{1,2", "1,2", "{1,,2}", '{"a}', "{{1},{2}}"):
        with pytest.raises(ValueError):
            parse_array_text(bad)


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT[], s VARCHAR[])")
        c.execute("INSERT INTO t VALUES (1, ARRAY[1, 2, NULL], '{x,\"y z\"}'), (2, '{}', NULL), (3, NULL, '{NULL}')")
        yield c


@pytest.mark.parametrize("text, named, error", [
    ("CREATE MATERIALIZED VIEW m AS SELECT a, count(*) FROM t GROUP BY a", "GROUP BY", UnsupportedError),
    ("CREATE MATERIALIZED VIEW m AS SELECT DISTINCT a FROM t", "DISTINCT", UnsupportedError),
    ("SELECT k, rank() OVER (PARTITION BY a ORDER BY k) FROM t", "PARTITION BY", UnsupportedError),
    ("SELECT * FROM t t1 JOIN t t2 USING (a)", "join key", UnsupportedError),
    ("CREATE TABLE p (a INT[] PRIMARY KEY)", "PRIMARY KEY", UnsupportedError),
    ("CREATE TABLE p (a INT[][])", "multidimensional", UnsupportedError),
    ("SELECT ARRAY[ARRAY[1]]", "multidimensional", UnsupportedError),
    ("SELECT ARRAY(SELECT k FROM t LIMIT 2)", "ARRAY(subquery)", UnsupportedError),
    ("SELECT ARRAY(SELECT k, a FROM t)", "one column", UnsupportedError),
    ("SELECT k FROM t, LATERAL (SELECT k) AS s", "LATERAL", UnsupportedError),
    ("SELECT k FROM t WHERE regexp_matches('a', 'a') IS NULL", "regexp_matches", UnsupportedError),
    ("SELECT ARRAY[]", "empty array", BindError),
    ("SELECT k[1] FROM t", "subscript", BindError),
    ("SELECT 1 = ANY(k) FROM t", "array", BindError),
    ("SELECT * FROM unnest(5)", "unnest", BindError),
    ("SELECT count(*), unnest(a) FROM t", "unnest", UnsupportedError),
    ("UPDATE t SET a[1] = 5", "SET a[i]", UnsupportedError),
    ("SELECT k, sum(a) FROM t GROUP BY k", "function sum(integer[]) does not exist", BindError),
    ("CREATE MATERIALIZED VIEW m AS SELECT k, max(a) AS m FROM t GROUP BY k", "max() of an array", UnsupportedError),
])
def test_refusals_name_the_construct_with_a_position(conn, text, named, error):
    with pytest.raises(error) as info:
        conn.execute(text).fetchall()
    assert named.lower() in str(info.value).lower()
    if text != "SELECT ARRAY[]":   # sqlglot gives an empty ARRAY[] no position
        assert info.value.line == 1 and info.value.column is not None


def test_malformed_array_text_is_a_data_error(conn):
    with pytest.raises(BindError, match="malformed|invalid input"):
        conn.execute("SELECT '{1,2'::int[]")
    conn.execute("CREATE TABLE w (k INT PRIMARY KEY, v VARCHAR)")
    conn.execute("INSERT INTO w VALUES (1, '{1,x}')")
    with pytest.raises(ExecutionError):
        conn.execute("SELECT v::int[] FROM w").fetchall()
    conn.execute("INSERT INTO w VALUES (2, '{1,2')")
    with pytest.raises(ExecutionError):
        conn.execute("SELECT v::int[] FROM w WHERE k = 2").fetchall()


def test_array_parameters_and_values(conn):
    assert conn.execute("SELECT $1::int[], cardinality($1)", [[1, None, 3]]).fetchall() == [([1, None, 3], 3)]
    conn.execute("INSERT INTO t VALUES ($1, $2, $3)", [4, [7], ["p"]])
    assert conn.execute("SELECT a, s FROM t WHERE k = 4").fetchall() == [([7], ["p"])]
    assert [d[1] for d in conn.execute("SELECT a, s FROM t").description] == ["integer[]", "character varying[]"]


def test_arrays_in_a_materialized_view_equal_their_batch_recomputation():
    items = ["a", "a[1]", "a[2:3]", "cardinality(a)", "array_length(a, 1)", "2 = ANY(a)", "k <> ALL(a)",
             "array_append(a, k)", "array_to_string(a, ',', '*')", "a || ARRAY[k]", "array_position(a, NULL)",
             "string_to_array(w, ',')", "(string_to_array(w, ','))[1]", "ARRAY[k, k * 2]", "a = ARRAY[1, 2]"]
    rng = random.Random(3)
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT[], w VARCHAR)")
        c.execute("CREATE MATERIALIZED VIEW m AS SELECT k, " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(items))
                  + " FROM t WHERE cardinality(a) IS DISTINCT FROM 3")

        def arr():
            return None if rng.random() < 0.2 else [rng.choice([None, 1, 2, 3]) for _ in range(rng.randint(0, 4))]
        for step in range(4):
            for k in rng.sample(range(20), 5):
                c.execute("DELETE FROM t WHERE k = $1", [k])
                c.execute("INSERT INTO t VALUES ($1, $2, $3)", [k, arr(), rng.choice([None, "a,b", "", "x"])])
            c.execute(f"UPDATE t SET a = array_append(a, {step}) WHERE k % 3 = {step % 3}")
            c.execute(f"DELETE FROM t WHERE k % 7 = {step}")
            c.execute("FLUSH")
            batch = c.execute("SELECT k, " + ", ".join(items) + " FROM t WHERE cardinality(a) IS DISTINCT FROM 3 "
                              "ORDER BY k").fetchall()
            assert c.execute("SELECT * FROM m ORDER BY k").fetchall() == batch


def test_shell_and_pgwire_show_postgres_array_text(conn):
    from cli.format import cell_texts
    from sql.pgwire.types import format_type, text_values, type_oid
    cur = conn.execute("SELECT a, s FROM t ORDER BY k")
    table = cur.fetch_arrow()
    assert cell_texts(table, cur.result_types) == [["{1,2,NULL}", "{}", None], ['{x,"y z"}', None, "{NULL}"]]
    assert text_values(table.column(1), TEXT_ARR) == ['{x,"y z"}', None, "{NULL}"]
    assert type_oid(INT_ARR) == 1007 and type_oid(TEXT_ARR) == 1015 and format_type(INT_ARR) == "integer[]"
    assert to_pylist(pa.array([[1]], pa.list_(pa.int32())), INT_ARR) == [[1]]


def test_project_set_turns_update_pairs_into_deletes_and_inserts():
    schema = Schema([("k", DataType.INT), ("a", INT_ARR)])
    e = Epochs()
    chunk = StreamChunk.from_rows(schema, [("+", (1, [7, 8])), ("U-", (1, [7, 8])), ("U+", (1, [9])),
                                           ("+", (2, [])), ("-", (3, None)), ("+", (4, [None]))])
    ps = ProjectSet(ListSource(schema, [0], [e.barrier(), chunk, e.barrier()]), [E.Col(1, INT_ARR)], ["x"])
    assert ps.stream_key == [0, 3]
    assert visible_rows(drain(Checked(ps))) == [
        (INSERT, (1, [7, 8], 7, 1)), (INSERT, (1, [7, 8], 8, 2)), (DELETE, (1, [7, 8], 7, 1)),
        (DELETE, (1, [7, 8], 8, 2)), (INSERT, (1, [9], 9, 1)), (INSERT, (4, [None], None, 1))]


def test_unnest_in_a_materialized_view_equals_its_batch_recomputation():
    views = {"m1": "SELECT k, x, n FROM t, unnest(t.a) WITH ORDINALITY AS u(x, n)",
             "m2": "SELECT k, unnest(a) AS e, unnest(s) AS f FROM t WHERE k % 2 = 0",
             "m3": "SELECT k, v FROM t LEFT JOIN LATERAL unnest(t.s) AS v ON TRUE",
             "m4": "SELECT x, count(*) AS c FROM t, unnest(a) AS u(x) GROUP BY x"}
    rng = random.Random(7)
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT[], s VARCHAR[])")
        for name, q in views.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")

        def arr(pool):
            return None if rng.random() < 0.2 else [rng.choice(pool) for _ in range(rng.randint(0, 3))]
        for step in range(4):
            for k in rng.sample(range(12), 4):
                c.execute("DELETE FROM t WHERE k = $1", [k])
                c.execute("INSERT INTO t VALUES ($1, $2, $3)", [k, arr([None, 1, 2, 3]), arr([None, "p", "q r"])])
            c.execute(f"UPDATE t SET a = array_append(a, {step}) WHERE k % 3 = {step % 3}")
            c.execute(f"DELETE FROM t WHERE k % 5 = {step}")
            c.execute("FLUSH")
            for name, q in views.items():
                assert sorted(c.execute(f"SELECT * FROM {name}").fetchall(), key=repr) == \
                    sorted(c.execute(q).fetchall(), key=repr), name


@pytest.mark.server_integration
def test_psycopg_reads_and_sends_arrays_over_pgwire(tmp_path):
    import psycopg
    from sql.pgwire import PgServer, ServerOptions
    server = PgServer(str(tmp_path / "db"), ServerOptions(port=0, barrier_interval_ms=0)).start_in_thread()
    try:
        with psycopg.connect(host="127.0.0.1", port=server.port, user="t", dbname="db", autocommit=True) as c:
            c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT[], s TEXT[])")
            c.execute("INSERT INTO t VALUES (1, ARRAY[1, NULL], ARRAY['a b', 'x']), (2, %s, %s)", ([3, 4], ['q"']))
            c.execute("FLUSH")
            assert c.execute("SELECT * FROM t ORDER BY k").fetchall() == [(1, [1, None], ["a b", "x"]),
                                                                          (2, [3, 4], ['q"'])]
            assert c.execute("SELECT k FROM t WHERE %s = ANY(a)", (4,)).fetchall() == [(2,)]
            assert c.execute("SELECT a::text FROM t WHERE k = 1").fetchall() == [("{1,NULL}",)]
    finally:
        server.stop()


@pytest.mark.parametrize("fmt, expected", [
    ("text", '1\t{1,NULL}\t{"a b","q\\\\"t","",NULL,"x,y"}\n2\t{}\t\\N\n3\t\\N\t{z}\n'),
    ("csv", None),
])
def test_copy_writes_and_reads_array_text(tmp_path, fmt, expected):
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT[], s TEXT[])")
        c.execute("INSERT INTO t VALUES (1, ARRAY[1, NULL], ARRAY['a b', 'q\"t', '', NULL, 'x,y']), (2, '{}', NULL), "
                  "(3, NULL, '{z}')")
        path = tmp_path / f"t.{fmt}"
        c.execute(f"COPY t TO '{path}' WITH (format {fmt})")
        if expected is not None:   # Postgres' COPY text: array_out, then the text format's backslash escapes
            assert path.read_text() == expected
        c.execute("CREATE TABLE u (k INT PRIMARY KEY, a INT[], s TEXT[])")
        c.execute(f"COPY u FROM '{path}' WITH (format {fmt})")
        assert c.execute("SELECT * FROM u ORDER BY k").fetchall() == c.execute("SELECT * FROM t ORDER BY k").fetchall()
