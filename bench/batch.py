"""Benchmark ``batch``: batch queries a new user types (issue 27), through Hummock SQL and
through DuckDB over the same rows in a Parquet file, in one run.

Data: ``orders(order_id BIGINT PRIMARY KEY, customer INT, amount DOUBLE, status VARCHAR,
qty INT)`` with ``--rows`` rows (customer = order_id % 100,000: a 1k-group key is
``customer % 1000``, a 1M-group key is ``order_id``) and ``customers(customer INT PRIMARY KEY,
name VARCHAR, region INT)`` with 100,000 rows, and ``regions(region INT PRIMARY KEY, name
VARCHAR, manager INT)`` with 10 (the latency of a query over a small table: scan, count with a
filter, GROUP BY with one and two aggregates, a self-join, a point query by parameter; medians of
at least ``SMALL_REPEATS`` runs, whatever ``--repeats`` says); loaded with ``insert_arrow``, flushed, an index
``orders_customer ON orders (customer DESC)`` created (its backfill timed), then ``compact_all``
(one sorted run). Each table is also exported with ``StorageTable.to_parquet``
at the same epoch, and DuckDB reads those files (``read_parquet``), so both engines see the
same rows.

Figures: per query, the median of ``--repeats`` timed runs after one warm-up, in ms, for
Hummock (``sql.connect(path)``; ``conn.execute(q).fetch_arrow()``) and DuckDB
(``duck.sql(q).to_arrow_table()``), and the ratio ``duckdb_ms / hummock_ms`` (1.0: as fast;
the issue's target for scans, aggregates and joins is >= 0.25); both answers are checked equal
(as sorted rows, floats to 9 significant digits: sums add in different orders). UPDATE/DELETE
by pk run on Hummock only (the Parquet copy is read-only); each run changes a different row.
``checked`` in the JSON line: every compared answer was equal.

Run: ``python -m bench.batch [--quick] [--rows N] [--big] [--block-cache-mib M]`` (``--big``:
10M rows instead of 1M; ``--quick``: 20k rows, 1 repeat, for the test; ``--block-cache-mib``:
the queries' block cache, default the store's (1/16 of memory, 128 MiB to 2 GiB: 1.5 GiB on this
24 GiB machine, which the 10M-row table's ~430 MiB of blocks fit in; 128 MiB does not)); prints a table, then one JSON line
``{"bench": "batch", "rows": N, "checked": bool, "results": [{query, hummock_ms, duckdb_ms, ratio, equal}],
...}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

import sql
from bench.harness import machine
from hummock.options import default_block_cache_capacity

CUSTOMERS = 100_000

QUERIES = (
    ("point lookup", "SELECT * FROM orders WHERE order_id = {k}"),
    ("limit 10", "SELECT * FROM orders LIMIT 10"),
    ("count(*)", "SELECT count(*) FROM orders"),
    ("filtered count", "SELECT count(*) FROM orders WHERE amount > 500 AND status = 'open'"),
    ("group by 1k", "SELECT customer % 1000 AS g, count(*), sum(amount), max(qty) FROM orders GROUP BY 1"),
    ("group by 1M", "SELECT order_id, sum(qty) FROM orders GROUP BY order_id"),
    ("join", "SELECT c.region, count(*), sum(o.amount) FROM orders o JOIN customers c "
             "ON o.customer = c.customer GROUP BY c.region"),
    ("order by limit 100", "SELECT order_id, amount FROM orders ORDER BY amount DESC, order_id LIMIT 100"),
    ("order by pk desc limit 10", "SELECT * FROM orders ORDER BY order_id DESC LIMIT 10"),
    ("pk range count", "SELECT count(*) FROM orders WHERE order_id BETWEEN {k} AND {k} + 999"),
    ("index lookup", "SELECT * FROM orders WHERE customer = {c}"),
    ("index range count", "SELECT count(*) FROM orders WHERE customer BETWEEN {c} AND {c} + 99"),
    ("index order by limit 10", "SELECT order_id, customer FROM orders ORDER BY customer DESC, order_id LIMIT 10"),
    ("small table scan", "SELECT * FROM regions"),
    ("small table group by", "SELECT manager % 3 AS g, count(*) FROM regions GROUP BY 1"),
    ("small table count where", "SELECT count(*) FROM regions WHERE manager > 3"),
    ("small table group by 2 aggs", "SELECT manager % 3 AS g, count(*), sum(region) FROM regions GROUP BY 1"),
    ("small table join", "SELECT a.name, b.manager FROM regions a JOIN regions b ON a.region = b.manager"),
    ("small table point (parameter)", "SELECT * FROM regions WHERE region = {p}"),
)
SMALL_REPEATS = 200   # the small-table queries take ~0.5-1.5 ms: medians of at least this many runs
PARAMETER = 7         # {p} in a query: this value as a parameter (%s in Hummock, $1 in DuckDB), not text
DML = (
    ("update by pk", "UPDATE orders SET qty = qty + 1 WHERE order_id = {k}"),
    ("delete by pk", "DELETE FROM orders WHERE order_id = {k}"),
)


def order_batch(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi, dtype=np.int64)
    status = np.array(["open", "shipped", "closed", "returned"], dtype=object)[ids % 4]
    return pa.table({"order_id": ids, "customer": (ids % CUSTOMERS).astype(np.int32),
                     "amount": (ids * 7919 % 100_000) / 100.0, "status": pa.array(status, pa.string()),
                     "qty": (ids % 17).astype(np.int32)})


def customer_table() -> pa.Table:
    ids = np.arange(CUSTOMERS, dtype=np.int32)
    return pa.table({"customer": ids, "name": pa.array([f"c{i}" for i in ids], pa.string()),
                     "region": (ids % 10).astype(np.int32)})


def region_table() -> pa.Table:
    ids = np.arange(10, dtype=np.int32)
    return pa.table({"region": ids, "name": pa.array([f"r{i}" for i in ids], pa.string()),
                     "manager": (ids * 7 % 10).astype(np.int32)})


def load(path: str, rows: int) -> dict:
    """Create and fill the three tables at ``path`` (then FLUSH and ``compact_all``); seconds per stage."""
    out = {}
    with sql.connect(path) as conn:
        conn.execute("CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer INT, amount DOUBLE, "
                     "status VARCHAR, qty INT)")
        conn.execute("CREATE TABLE customers (customer INT PRIMARY KEY, name VARCHAR, region INT)")
        conn.execute("CREATE TABLE regions (region INT PRIMARY KEY, name VARCHAR, manager INT)")
        start = time.perf_counter()
        for at in range(0, rows, 200_000):
            conn.insert_arrow("orders", order_batch(at, min(rows, at + 200_000)), chunk_size=65536)
        conn.insert_arrow("customers", customer_table(), chunk_size=65536)
        conn.insert_arrow("regions", region_table())
        conn.execute("FLUSH")
        out["load_s"] = time.perf_counter() - start
        start = time.perf_counter()
        conn.execute("CREATE INDEX orders_customer ON orders (customer DESC)")   # backfills every row
        out["index_s"] = time.perf_counter() - start
        start = time.perf_counter()
        conn.db.store.compact_all()
        out["compact_s"] = time.perf_counter() - start
    return out


def export_parquet(conn, directory: str) -> dict:
    """Each table at the committed epoch as Parquet under ``directory``/<table>; name -> glob."""
    from relational.storage_table import StorageTable
    store = conn.db.store
    epoch = store.max_committed_epoch
    out = {}
    for name in ("orders", "customers", "regions"):
        rel = conn.db.catalog.get(name)
        visible = [n for n, _ in rel.visible_columns]
        StorageTable.from_desc(store, rel.desc).to_parquet(f"{directory}/{name}", epoch, columns=visible)
        out[name] = f"{directory}/{name}/*.parquet"
    return out


def timed(fn, repeats: int) -> tuple:
    """(median ms of ``repeats`` runs after one warm-up, the warm-up's result)."""
    result = fn(0)
    timings = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i + 1)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings), result


def _rows(table: pa.Table) -> list:
    rows = [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in r.values())
            for r in table.to_pylist()]
    return sorted(rows, key=repr)


def run(rows: int, repeats: int, tmp: str, block_cache_mib: int | None = None) -> list:
    import duckdb
    path = f"{tmp}/db"
    stages = load(path, rows)
    options = {} if block_cache_mib is None else {"block_cache_capacity": block_cache_mib << 20}
    print(f"# loaded {rows:,} rows in {stages['load_s']:.1f} s, compact_all {stages['compact_s']:.1f} s",
          file=sys.stderr)
    results = []
    with sql.connect(path, **options) as conn:
        files = export_parquet(conn, f"{tmp}/parquet")
        duck = duckdb.connect()
        for name, glob in files.items():
            duck.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{glob}')")
        key = rows // 2
        for label, text in QUERIES:
            q = text.format(k=key, c=CUSTOMERS // 2 + 7, p="%s")
            dq = text.format(k=key, c=CUSTOMERS // 2 + 7, p="$1")
            args = [PARAMETER] if "{p}" in text else None
            n = max(repeats, SMALL_REPEATS) if label.startswith("small table") else repeats
            h_ms, h_out = timed(lambda i: conn.execute(q, args).fetch_arrow(), n)
            d_ms, d_out = timed(lambda i: duck.sql(dq, params=args).to_arrow_table(), n)
            same = _rows(h_out) == _rows(d_out)
            results.append({"query": label, "hummock_ms": h_ms, "duckdb_ms": d_ms, "ratio": d_ms / h_ms,
                            "equal": same})
        for label, text in DML:
            h_ms, _ = timed(lambda i: conn.execute(text.format(k=key + 10 * i + (1 if "delete" in label else 0))),
                            repeats)
            results.append({"query": label, "hummock_ms": h_ms, "duckdb_ms": None, "ratio": None, "equal": None})
    results.append({"query": "load (insert_arrow + flush)", "hummock_ms": stages["load_s"] * 1000,
                    "duckdb_ms": None, "ratio": None, "equal": None})
    results.append({"query": "create index (backfill)", "hummock_ms": stages["index_s"] * 1000,
                    "duckdb_ms": None, "ratio": None, "equal": None})
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--big", action="store_true", help="10M rows")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--block-cache-mib", type=int, default=None,
                    help="the queries' block cache (default: StorageOptions', 1/16 of memory from 128 "
                         "MiB to 2 GiB; the 10M-row table's blocks take ~430 MiB)")
    args = ap.parse_args(argv)
    rows = 10_000_000 if args.big else args.rows
    repeats = args.repeats
    if args.quick:
        rows, repeats = 20_000, 1
    tmp = tempfile.mkdtemp(prefix="bench-batch-")
    try:
        results = run(rows, repeats, tmp, args.block_cache_mib)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cols = ["query", "hummock_ms", "duckdb_ms", "ratio", "equal"]
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in results)) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in results:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in cols))
    checked = all(r["equal"] is not False for r in results)
    print(json.dumps({"bench": "batch", "rows": rows, "checked": checked, "block_cache_mib": args.block_cache_mib or default_block_cache_capacity() >> 20,
                      "machine": machine(), "results": results}, sort_keys=True))
    return 0 if checked else 1


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
    return "" if value is None else str(value)


if __name__ == "__main__":
    sys.exit(main())
