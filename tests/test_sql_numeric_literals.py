"""NUMERIC and integer literal limits as PostgreSQL has them (issue 25): a numeric literal beyond
131072 digits before the point (16383 after) is "value overflows numeric format", refused at the
literal before any digit is expanded (``SELECT 1e1000000000 + 1`` once took 9.7 GB); an integer
literal too long for a bigint is a NUMERIC, never Python's 4,300-digit int-conversion error.
"""

import decimal

import pytest

import sql
from sql.errors import BindError

Dec = decimal.Decimal


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        yield c


def one(conn, query, params=()):
    return conn.execute(query, params).fetchall()[0]


# --- numeric literals --------------------------------------------------------------------------

@pytest.mark.parametrize("literal", ["1e1000000000", "-1e1000000000", "1e131072", "1e-16384", "9" * 131073,
                                     "0." + "0" * 16383 + "1"])
def test_numeric_literal_out_of_range_is_refused_before_it_is_built(conn, literal):
    with pytest.raises(BindError, match="value overflows numeric format") as info:
        conn.execute(f"SELECT {literal} + 1")
    assert info.value.line == 1 and info.value.column in (8, 9)


def test_numeric_literals_at_the_limits_are_values(conn):
    assert one(conn, "SELECT 1e131071 > 0, 1e-16383 > 0, length((1e131071)::varchar)") == (True, True, 131072)


def test_insert_beyond_the_numeric_limit_is_refused(conn):
    conn.execute("CREATE TABLE n (k INT PRIMARY KEY, a NUMERIC)")
    with pytest.raises(BindError, match="value overflows numeric format"):
        conn.execute("INSERT INTO n VALUES (1, 1e200000)")
    with pytest.raises(BindError, match="value overflows numeric format"):
        conn.execute("INSERT INTO n VALUES (1, -1e200000)")
    with pytest.raises(BindError, match="value overflows numeric format"):
        conn.execute("INSERT INTO n VALUES (1, '1e200000')")
    assert conn.execute("SELECT count(*) FROM n").fetchall() == [(0,)]


def test_long_integer_literals_are_numeric_or_refused(conn):
    big = "9" * 5000
    assert one(conn, f"SELECT {big} > 0, 99999999999999999999, 9223372036854775807") == \
        (True, Dec("99999999999999999999"), 9223372036854775807)
    cur = conn.execute("SELECT 9223372036854775808")
    assert cur.description[0][1] == "numeric"
    with pytest.raises(BindError, match="out of range for type integer"):
        conn.execute(f"SELECT '{big}'::int")
    with pytest.raises(BindError, match="value overflows numeric format"):
        conn.execute(f"SELECT {'9' * 200000}")


def test_insert_arrow_checks_numeric_text_before_writing(conn):
    import pyarrow as pa
    conn.execute("CREATE TABLE n (k INT PRIMARY KEY, a NUMERIC)")

    def load(values):
        conn.insert_arrow("n", pa.table({"k": pa.array(range(len(values)), pa.int32()),
                                         "a": pa.array(values, pa.string())}))
    for bad, message in ((["1", "1e200000"], "value overflows numeric format"),
                         (["1e1000000000"], "value overflows numeric format"),
                         (["2", "garbage"], "invalid input syntax for type numeric")):
        with pytest.raises(BindError, match=message):
            load(bad)
    assert conn.execute("SELECT count(*) FROM n").fetchall() == [(0,)]
    load(["1.50", None, "-0", "1E+2", " 7 ", "NaN"])   # read as Postgres' numeric_in does
    assert [None if a is None else str(a) for a, in conn.execute("SELECT a FROM n ORDER BY k").fetchall()] == \
        ["1.50", None, "0", "100", "7", "NaN"]
    conn.execute("INSERT INTO n VALUES (10, 1)")   # the graph is alive
    assert conn.execute("SELECT count(*) FROM n").fetchall() == [(7,)]
