"""A NULL in an integer primary-key column: what the state tables do with it, and what SQL says.

State tables (relational/): a NULL pk value is a key like any other (memcomparable's NULL tag:
last ascending, first descending) -- a materialized view's group key may be NULL. An all-insert
chunk with one goes the list path (``RowSerde._int_pk_columns`` declines, so no packed batch and
no ``sorted_int_keys``), beside the table's packed chunks; the rows read back as written, the same as a table forced onto the list
path, in both modes, relaxed and strict, ASC and DESC, with no ``TypeError`` anywhere.

SQL (sql/): a table's PRIMARY KEY columns are NOT NULL, as in PostgreSQL, and every write path
refuses a NULL there before anything is written with Postgres' not-null violation
(``null value in column "id" of relation "t" violates not-null constraint``), the message
sql/column_checks.py gives a NULL in a ``NOT NULL`` column: INSERT VALUES (a NULL or the pk left
out), INSERT ... SELECT, executemany, ``insert_arrow``, COPY (with its file and row context).
The INSERT statements are checked against the real server (the ``pg`` fixture).
"""

import numpy as np
import psycopg
import pyarrow as pa
import pytest

import sql
from hummock import HummockStorage, StorageOptions
from hummock.key import new_epoch
from hummock.packed_batch import PackedColumns
from relational.memcomparable import OrderType
from relational.state_table import StateTable
from relational.types import DataType as T
from sql.errors import ExecutionError
from test_sql_pg_functions import pg  # noqa: F401  (the fixture)

# --- state tables ---------------------------------------------------------------------------

SCHEMA = [("id", T.BIGINT), ("g", T.INT), ("v", T.VARCHAR)]


def _chunk(rows):
    ids, gs, vs = zip(*rows)
    return [pa.array(ids, pa.int64()), pa.array(gs, pa.int32()), pa.array(vs, pa.string())]


def _sort_key(descending):
    def key(row):   # NULL after every value ascending, before every value descending
        pk = row[:2]
        return tuple((v is None, 0 if v is None else v) if not descending else (v is not None, 0 if v is None else -v)
                     for v in pk)
    return key


@pytest.mark.parametrize("consistent", [False, True], ids=["relaxed", "strict"])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_null_int_pks_are_keys_on_the_packed_and_the_list_path(tmp_path, consistent, descending):
    orders = [OrderType.DESC, OrderType.DESC] if descending else None
    with HummockStorage.open(str(tmp_path / "s"), StorageOptions(compactor="none")) as store:
        packed = StateTable(store, 1, SCHEMA, [0, 1], order_types=orders, consistent=consistent)
        listed = StateTable(store, 2, SCHEMA, [0, 1], order_types=orders, consistent=consistent)
        listed._packed_insert = lambda columns, n: False
        epoch = new_epoch()
        model = {}
        chunks = [[(i, i % 3, f"a{i}") for i in range(20)],                           # packed (relaxed)
                  [(None, 1, "n1"), (5, None, "n2"), (None, None, "n3"), (30, 0, "x")],  # NULLs: the list path
                  [(40 + i, 0, f"b{i}") for i in range(10)]]
        for t in (packed, listed):
            t.init_epoch(epoch)
        for n, rows in enumerate(chunks):
            for t in (packed, listed):
                t.write_chunk(np.ones(len(rows), np.int16), _chunk(rows))
            model.update({r[:2]: r for r in rows})
            if n == 0:   # a relaxed table packed the chunk without NULLs
                assert any(type(run) is PackedColumns for run in packed.mem._runs) == (not consistent)
        assert packed.get_row((None, None)) == listed.get_row((None, None)) == (None, None, "n3")
        for t in (packed, listed):
            t.commit(epoch + (1 << 16))
        store.checkpoint(epoch)
        expected = sorted(model.values(), key=_sort_key(descending))
        for t in (packed, listed):
            assert [tuple(r) for r in t.iter_with_prefix(())] == expected
        assert packed.get_row((5, None)) == (5, None, "n2")
        assert packed.get_rows([(None, 1), (None, 2)]) == [(None, 1, "n1"), None]


# --- SQL ------------------------------------------------------------------------------------

MESSAGE = 'null value in column "{}" of relation "t" violates not-null constraint'

STATEMENTS = [
    ("INSERT INTO t VALUES (NULL, 1, 'a')", "id"),
    ("INSERT INTO t (g, v) VALUES (2, 'b')", "id"),
    ("INSERT INTO t VALUES (1, 1, 'a'), (NULL, 2, 'b')", "id"),
    ("INSERT INTO t VALUES (1, NULL, 'a')", "g"),
    ("INSERT INTO t SELECT NULL::bigint, 5, 'c'", "id"),
    ("INSERT INTO t SELECT CASE WHEN x > 1 THEN x END, x, 'd' FROM generate_series(1, 3) AS g(x)", "id"),
]
DDL = "CREATE TABLE t (id BIGINT, g INT, v VARCHAR, PRIMARY KEY (id, g))"


@pytest.mark.postgres
@pytest.mark.parametrize("text, column", STATEMENTS)
def test_insert_of_a_null_pk_says_what_postgres_says(pg, text, column):  # noqa: F811
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute(DDL)
    with pytest.raises(psycopg.errors.NotNullViolation) as theirs:
        pg.execute(text)
    assert theirs.value.diag.message_primary == MESSAGE.format(column)
    for tail in ("", " APPEND ONLY"):
        with sql.connect(":memory:", implicit_flush=True) as c:
            c.execute(DDL + tail)
            with pytest.raises(ExecutionError) as ours:
                c.execute(text)
            assert str(ours.value) == theirs.value.diag.message_primary, tail
            assert c.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


@pytest.fixture
def conn():
    with sql.connect(":memory:", implicit_flush=True) as c:
        c.execute(DDL + " APPEND ONLY")
        yield c


def test_executemany_and_insert_arrow_of_a_null_pk(conn):
    with pytest.raises(ExecutionError, match=f"^{MESSAGE.format('id')}$"):
        conn.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(1, 1, "a"), (None, 2, "b")])
    with pytest.raises(ExecutionError, match=f"^{MESSAGE.format('g')}$"):
        conn.insert_arrow("t", pa.table({"id": pa.array([7, 8], pa.int64()), "g": pa.array([1, None], pa.int32()),
                                         "v": pa.array(["x", "y"])}))
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_copy_of_a_null_pk(conn, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("id,g,v\n1,1,a\n,2,b\n")
    with pytest.raises(ExecutionError, match=f"row 2: {MESSAGE.format('id')}$"):
        conn.execute(f"COPY t FROM '{path}' WITH (FORMAT csv, HEADER true)")
    narrow = tmp_path / "narrow.csv"
    narrow.write_text("id,v\n1,a\n")
    with pytest.raises(ExecutionError, match=f"^COPY t: {MESSAGE.format('g')}$"):   # g left out: NULL
        conn.execute(f"COPY t (id, v) FROM '{narrow}' WITH (FORMAT csv, HEADER true)")
    empty = tmp_path / "empty.csv"   # Postgres refuses a row, not the column list: no row, no error
    empty.write_text("id,v\n")
    assert conn.execute(f"COPY t (id, v) FROM '{empty}' WITH (FORMAT csv, HEADER true)").rowcount == 0
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
