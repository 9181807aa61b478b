"""trim/ltrim/rtrim/btrim and ``TRIM([LEADING|TRAILING|BOTH] chars FROM s)`` as Postgres: each
strips only the side it names, the default set is a space (not tabs or newlines), and the
characters argument is a set. Checked in batch SELECT and in an MV, against a real PostgreSQL
(``tests/pg_server.py``) on strings drawn by hypothesis."""

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sql
from sql.errors import UnsupportedError

pytestmark = pytest.mark.postgres

FORMS = ["trim(s)", "ltrim(s)", "rtrim(s)", "btrim(s)", "ltrim(s, 'xy')", "rtrim(s, 'xy ')", "btrim(s, 'x')",
         "trim(both 'x' from s)", "trim(leading 'xy' from s)", "trim(trailing 'y' from s)", "trim(s, '')"]
TEXT = st.text(alphabet=" \txy\na", max_size=8)


@pytest.fixture(scope="module")
def pg(pg_server):
    conn = psycopg.connect(pg_server.dsn, autocommit=True)
    yield conn
    conn.close()


def test_each_form_strips_only_its_side_with_a_space_by_default():
    with sql.connect(":memory:") as c:
        row = c.execute("SELECT ltrim('  a  '), rtrim('  a  '), trim('  a  '), trim(' \ta\n '), ltrim('aab', 'a'),"
                        " trim(trailing 'a' FROM 'aaba'), ltrim(NULL, 'a'), ltrim('a', NULL)").fetchall()[0]
    assert row == ("a  ", "  a", "a", "\ta\n", "b", "aab", None, None)


def test_characters_that_are_not_a_constant_are_refused():
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, s VARCHAR)")
        with pytest.raises(UnsupportedError, match="constant"):
            c.execute("SELECT ltrim(s, s) FROM t")


@settings(max_examples=30)
@given(values=st.lists(TEXT, min_size=1, max_size=6))
def test_batch_and_mv_agree_with_postgres(pg, values):
    rows = list(enumerate(values))
    expected = {}
    for form in FORMS:
        expected[form] = sorted(pg.execute(f"SELECT k, {form} FROM (VALUES {', '.join(['(%s, %s)'] * len(rows))})"
                                           f" AS v(k, s)", [x for r in rows for x in r]).fetchall())
    with sql.connect(":memory:") as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, s VARCHAR)")
        for i, form in enumerate(FORMS):
            c.execute(f"CREATE MATERIALIZED VIEW m{i} AS SELECT k, {form} AS r FROM t")
        c.executemany("INSERT INTO t VALUES (%s, %s)", rows)
        c.execute("FLUSH")
        for i, form in enumerate(FORMS):
            assert sorted(c.execute(f"SELECT k, {form} FROM t").fetchall()) == expected[form], form
            assert sorted(c.execute(f"SELECT * FROM m{i}").fetchall()) == expected[form], form
