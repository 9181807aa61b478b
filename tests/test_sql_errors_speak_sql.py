"""Refusals speak SQL (issue 29, item 6): an unsupported or malformed statement is refused with
the construct as the user wrote it -- never a sqlglot class or function name (``TIME_TO_STR``,
``GROUP_CONCAT``, ``TRUNCATETABLE``, ``JSON_EXTRACT``), nor parser internals ("Required
keyword: 'this' missing for <class ...>", token dumps) -- with its position, and a hint naming
the nearest supported function when one is close.
"""

import re

import pytest
from sqlglot import exp

import sql
from sql.errors import SqlError, SqlSyntaxError, UnsupportedError


def _internal_names():
    """Every sqlglot expression class name and its upper-case function name (``TimeToStr``,
    ``TIME_TO_STR``): what a message must not show unless the user wrote it."""
    names = set()
    for name in dir(exp):
        cls = getattr(exp, name)
        if isinstance(cls, type) and issubclass(cls, exp.Expression):
            names.add(cls.__name__)
            if issubclass(cls, exp.Func):
                try:
                    names.add(cls.sql_name())
                except Exception:
                    pass
    return names


INTERNAL = _internal_names() - {"CAST", "ARRAY", "FILTER", "WITHIN"}   # SQL's own words (``::`` is CAST)
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@pytest.fixture(scope="module")
def conn():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, s VARCHAR, ts TIMESTAMP)")
        yield c


def refusal(conn, text):
    with pytest.raises(SqlError) as info:
        conn.execute(text).fetchall()
    message = str(info.value)
    written = {w.lower() for w in WORD.findall(text)}
    leaked = [w for w in WORD.findall(message) if w in INTERNAL and w.lower() not in written
              and (any(ch.islower() for ch in w[1:]) and w[0].isupper() or "_" in w or len(w) > 3 and w.isupper())]
    assert not leaked, f"{text!r}: the message names parser internals {leaked}: {message}"
    for internal in ("Required keyword", "<class", "SENTINEL", "<Token", "sqlglot"):
        assert internal not in message, message
    return info.value, message


@pytest.mark.parametrize("text, named", [
    ("SELECT '{\"a\": 1}'::jsonb @? '$.a'", "@?"),   # ->, ->>, #- are supported (stream/expr_jsonb.py)
    ("SELECT ARRAY(SELECT a FROM t LIMIT 2)", "ARRAY"),   # ARRAY[...] is supported (stream/expr_array.py)
    ("CREATE MATERIALIZED VIEW m AS SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FROM t",
     "percentile_cont"),   # batch only
    ("SELECT group_concat(s) FROM t", "string_agg"),
    ("SELECT s FROM t WHERE regexp_matches(s, 'a') IS NULL", "regexp_matches"),
    ("SELECT xmlelement(name foo) FROM t", "xmlelement"),
    ("GRANT SELECT ON t TO someone", "GRANT"),
    ("ALTER VIEW v RENAME TO w", "ALTER VIEW"),   # ALTER TABLE is supported (sql/alter.py)
    ("SELECT abs(a) FILTER (WHERE a > 1) FROM t", "abs"),
    ("SELECT sinn(a) FROM t", "sinn"),
    # other dialects' functions sqlglot renders as another construct in Postgres: their own name
    ("SELECT count_if(a > 1) FROM t", "aggregate count_if"),
    ("SELECT if(a > 1, 1, 2) FROM t", "function if"),
    ("SELECT array_contains(ARRAY[a], 1) FROM t", "function array_contains"),
    ("SELECT date_diff('day', s, s) FROM t", "function datediff"),
])
def test_an_unsupported_construct_is_named_as_written_with_its_position(conn, text, named):
    err, message = refusal(conn, text)
    assert named.lower() in message.lower(), message
    assert err.line == 1 and err.column is not None, message


def test_an_unknown_function_near_a_known_one_gets_a_hint(conn):
    _, message = refusal(conn, "SELECT lowr(s) FROM t")
    assert "function lowr is not supported" in message and "did you mean lower?" in message
    _, message = refusal(conn, "SELECT frobnicate(s) FROM t")
    assert "did you mean" not in message


@pytest.mark.parametrize("text, expected, column", [
    ("SELECT a +", 'syntax error at end of input: + needs an operand', 10),
    ("SELECT a FROM t WHERE", "syntax error at end of input: WHERE needs a condition", 17),
    ("SELECT CASE WHEN END", "syntax error at end of input: CASE WHEN needs a condition and a THEN result", 18),
    ("SELECT * FROM", "syntax error at end of input: expected table name but got the end of the input", 10),
    ("SELECT a FROM t WHERE a = = 1", 'syntax error at or near "="', 27),
    ("SELEC 1", 'syntax error at or near "1"', 7),
])
def test_syntax_errors_say_where_in_postgres_words(conn, text, expected, column):
    err, message = refusal(conn, text)
    assert isinstance(err, SqlSyntaxError)
    assert message.startswith(expected), message
    assert (err.line, err.column) == (1, column)


def test_a_statement_is_named_by_its_keywords(conn):
    err, message = refusal(conn, "CREATE SCHEMA s")
    assert isinstance(err, UnsupportedError) and "CREATE SCHEMA" in message


def test_a_function_given_the_wrong_types_is_named_as_postgres_names_it(conn):
    err, message = refusal(conn, "SELECT lower(1), to_char(ts, 'YYYY') FROM t")
    assert message.startswith("function lower(int) does not exist at line 1, column 8"), message
    err, message = refusal(conn, "SELECT to_char(TRUE, 'DD')")   # (to_char of intervals is supported)
    assert "True" not in message and "function to_char(boolean, varchar) does not exist" in message
