"""PEP 249 surface of ``sql`` (issue 28 item 2): module globals, the exception hierarchy with the
SQL errors under it, cursors as context managers, closed objects refusing with InterfaceError,
numpy scalars and tuples as parameters, ``%%``, ``commit``/``rollback`` and ``cursor.df()``."""

from __future__ import annotations

import builtins
import datetime

import numpy as np
import pytest

import sql
from hummock.errors import HummockError
from sql import errors as E
from sql.session import Connection


@pytest.fixture
def conn():
    c = sql.connect(":memory:", barrier_interval_ms=0)
    c.execute("CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR, x DOUBLE)")
    c.execute("INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b%', 2.5), (3, 'c', NULL)")
    c.flush()
    yield c
    c.close()


def test_module_globals():
    assert sql.apilevel == "2.0"
    assert sql.threadsafety in (0, 1, 2, 3)
    assert sql.paramstyle == "format"


def test_exception_hierarchy_is_pep249_with_hummock_root():
    assert issubclass(sql.Error, HummockError) and issubclass(sql.Error, Exception)
    assert issubclass(sql.Warning, Exception) and not issubclass(sql.Warning, sql.Error)
    assert issubclass(sql.InterfaceError, sql.Error) and not issubclass(sql.InterfaceError, sql.DatabaseError)
    for cls in (sql.DataError, sql.OperationalError, sql.IntegrityError, sql.InternalError, sql.ProgrammingError,
                sql.NotSupportedError):
        assert issubclass(cls, sql.DatabaseError)
    assert issubclass(sql.DatabaseError, sql.Error)
    # the project's errors sit under both roots, so old and new except clauses catch them
    for cls, dbapi in ((E.SqlSyntaxError, sql.ProgrammingError), (E.BindError, sql.ProgrammingError),
                       (E.CatalogError, sql.ProgrammingError), (E.UnsupportedError, sql.NotSupportedError),
                       (E.ExecutionError, sql.DataError), (E.ReadOnlyError, sql.InternalError),
                       (E.LostWritesError, sql.OperationalError), (E.ClosedError, sql.InterfaceError),
                       (E.ParameterError, sql.ProgrammingError)):
        assert issubclass(cls, E.SqlError) and issubclass(cls, HummockError) and issubclass(cls, dbapi), cls
    for name in ("Warning", "Error", "InterfaceError", "DatabaseError", "DataError", "OperationalError",
                 "IntegrityError", "InternalError", "ProgrammingError", "NotSupportedError"):
        assert getattr(Connection, name) is getattr(sql, name)


def test_raised_errors_are_their_dbapi_class(conn):
    with pytest.raises(sql.ProgrammingError):
        conn.execute("SELEC 1")
    with pytest.raises(sql.ProgrammingError):
        conn.execute("SELECT nope FROM t")
    with pytest.raises(sql.ProgrammingError):
        conn.execute("SELECT * FROM missing_table")
    with pytest.raises(sql.DataError):
        conn.execute("SELECT 1 / 0")
    with pytest.raises(sql.ProgrammingError):   # parameter count
        conn.execute("SELECT %s", (1, 2))
    with pytest.raises(E.SqlError):             # the old root still catches it
        conn.execute("SELECT %s, %s", (1,))


def test_cursor_context_manager_and_closed_cursor_refuses(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT k FROM t ORDER BY k")
        assert cur.fetchone() == (1,)
    assert cur.closed
    for call in (lambda: cur.execute("SELECT 1"), cur.fetchone, cur.fetchall, cur.fetch_arrow,
                 lambda: cur.executemany("SELECT %s", [(1,)])):
        with pytest.raises(sql.InterfaceError, match="cursor is closed"):
            call()
    with pytest.raises(sql.InterfaceError):
        with cur:
            pass


def test_closed_connection_refuses_with_interface_error(conn):
    cur = conn.cursor()
    conn.close()
    with pytest.raises(sql.InterfaceError, match="connection is closed"):
        conn.execute("SELECT 1")
    with pytest.raises(sql.InterfaceError):
        cur.execute("SELECT 1")
    with pytest.raises(sql.InterfaceError):
        conn.cursor()
    with pytest.raises(E.SqlError):   # as before
        conn.commit()


def test_numpy_scalars_as_parameters(conn):
    row = conn.execute("SELECT %s, %s, %s, %s", (np.int64(7), np.float32(0.5), np.bool_(True), np.str_("s"))).fetchone()
    assert row == (7, 0.5, True, "s")
    assert all(type(v) is t for v, t in zip(row, (int, float, bool, str)))
    ts = conn.execute("SELECT %s", (np.datetime64("2024-01-02T03:04:05.123456"),)).fetchone()[0]
    assert ts == datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert conn.execute("SELECT v FROM t WHERE k = %s", (np.int32(2),)).fetchone() == ("b%",)
    conn.execute("INSERT INTO t VALUES (%s, %s, %s)", (np.int16(9), "n", np.float64(9.5)))
    conn.flush()
    assert conn.execute("SELECT x FROM t WHERE k = 9").fetchone() == (9.5,)


def test_tuple_parameter_expands_for_in(conn):
    cur = conn.execute("SELECT k FROM t WHERE k IN %s AND v <> %s ORDER BY k", ((1, 3, 4), "zz"))
    assert cur.fetchall() == [(1,), (3,)]
    assert conn.execute("SELECT k FROM t WHERE v IN %s", (("b%",),)).fetchall() == [(2,)]
    with pytest.raises(sql.ProgrammingError, match="empty tuple"):
        conn.execute("SELECT k FROM t WHERE k IN %s", ((),))


def test_percent_percent_is_a_literal_percent_with_parameters(conn):
    assert conn.execute("SELECT 7 %% %s", (4,)).fetchone() == (3,)
    assert conn.execute("SELECT k FROM t WHERE v LIKE 'b%%' AND k > %s", (0,)).fetchall() == [(2,)]
    assert conn.execute("SELECT '%%s', %s", (1,)).fetchone() == ("%s", 1)
    # without parameters the text is sent as written (psycopg does the same)
    assert conn.execute("SELECT 7 % 4").fetchone() == (3,)
    with pytest.raises(sql.ProgrammingError, match="by name"):
        conn.execute("SELECT %(a)s", {"a": 1})


def test_commit_flushes_and_rollback_is_not_supported(conn):
    conn.execute("INSERT INTO t VALUES (5, 'e', 5.0)")
    conn.commit()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (4,)
    with pytest.raises(sql.NotSupportedError, match="no transactions"):
        conn.rollback()


def test_df_returns_a_dataframe_of_the_remaining_rows(conn):
    cur = conn.execute("SELECT k, v, x FROM t ORDER BY k")
    assert cur.fetchone() == (1, "a", 1.5)
    frame = cur.df()
    assert list(frame.columns) == ["k", "v", "x"]
    assert frame["k"].tolist() == [2, 3] and frame["v"].tolist() == ["b%", "c"]
    assert cur.fetchall() == []


def test_df_without_pandas_says_how_to_install(conn, monkeypatch):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    cur = conn.execute("SELECT k FROM t")
    with pytest.raises(sql.InterfaceError, match="needs pandas"):
        cur.df()
    assert len(cur.fetch_arrow()) == 3   # nothing was consumed


def test_executemany_takes_numpy_scalars_and_percent_percent(conn):
    conn.execute("CREATE TABLE m (k INT PRIMARY KEY, x DOUBLE)")
    conn.executemany("INSERT INTO m VALUES (%s, %s)", [(np.int64(1), np.float64(2.5)), (np.int32(2), np.float32(1))])
    conn.executemany("INSERT INTO m VALUES (%s, %s %% 7)", [(3, 9), (4, 10)])   # the fast path's text
    conn.executemany("UPDATE m SET x = x + %s WHERE k = %s %% 100", [(1, 103), (1, 104)])   # one by one
    conn.flush()
    assert conn.execute("SELECT k, x FROM m ORDER BY k").fetchall() == [(1, 2.5), (2, 1.0), (3, 3.0), (4, 4.0)]
    with pytest.raises(sql.ProgrammingError, match="tuple"):
        conn.executemany("INSERT INTO m VALUES (%s, %s)", [((1, 2), 3)])


def test_import_sql_and_a_local_database_stay_light(tmp_path):
    """Issue 28 item 5: boto3 loads only for s3:// URLs, pyspark only for Spark, pandas neither
    at ``import sql`` nor for a local database (a fresh interpreter: this process has them all
    loaded already). A ``pa.array`` built at import time imported pandas (pyarrow asks whether
    it is installed) on every connect."""
    import subprocess
    import sys

    heavy = "sorted(m for m in ('boto3', 'pandas', 'pyspark') if m in sys.modules)"
    code = (f"import sys, sql; before = {heavy}; "
            "from hummock import HummockStorage; "   # the store a local connect opens (compactor included)
            f"HummockStorage.open({str(tmp_path / 'db')!r}).close(); "
            f"sql.connect({str(tmp_path / 'sqldb')!r}).close(); "
            f"after = {heavy}; print(before, after)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "[]"]
