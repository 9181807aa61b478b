"""A table keyed by a NUMERIC column takes inserts: Materialize's bulk path (a chunk of new,
distinct keys) read the keys as Arrow's text of the decimals, which the key encoding refuses
(TypeMismatchError: the graph failed and the writes were lost), and text equality is not NUMERIC
equality ('1.0' and '1.00' are one key)."""

from decimal import Decimal

import pytest

import sql


@pytest.mark.parametrize("ddl", ["k NUMERIC PRIMARY KEY, v INT", "k NUMERIC(5, 2) PRIMARY KEY, v INT",
                                 "j INT, k NUMERIC, v INT, PRIMARY KEY (j, k)"])
def test_inserts_into_a_numeric_keyed_table(ddl):
    with sql.connect(":memory:") as conn:
        conn.execute(f"CREATE TABLE t ({ddl})")
        conn.execute("INSERT INTO t (k, v) VALUES (2.5, 1), (1, 2)" if ddl.startswith("k")
                     else "INSERT INTO t VALUES (0, 2.5, 1), (0, 1, 2)")
        conn.execute("FLUSH")
        assert sorted(conn.execute("SELECT k, v FROM t").fetchall()) == [(Decimal("1") if "(5" not in ddl
                                                                          else Decimal("1.00"), 2),
                                                                         (Decimal("2.5") if "(5" not in ddl
                                                                          else Decimal("2.50"), 1)]


def test_numeric_keys_of_another_scale_are_the_same_key():
    with sql.connect(":memory:") as conn:
        conn.execute("CREATE TABLE t (k NUMERIC PRIMARY KEY, v INT)")   # ON CONFLICT: the default overwrite
        conn.execute("INSERT INTO t VALUES (1.0, 1), (1.00, 2)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
