"""Benchmark ``pgwire``: what the Postgres wire protocol costs over in-process SQL (issue 28 item 1).

One database (a temporary directory) holds ``t (id BIGINT PRIMARY KEY, k INT, v DOUBLE,
s VARCHAR)`` with ``--rows`` rows (100k). Figures, each the best of ``--repeat`` runs:

- ``point_qps``: ``SELECT v, s FROM t WHERE id = %s`` for ``--points`` random ids, one client,
  queries per second -- ``inprocess`` (``sql.connect``), ``pgwire`` (psycopg 3 through
  ``hummock serve``'s server, prepared statements, text format), ``pgwire_binary`` (the same
  with binary results), ``pgwire_unprepared`` (psycopg's default: Parse each time);
- ``scan_rows_per_s``: ``SELECT * FROM t`` (every row) -- ``inprocess`` (``fetchall``: Python
  tuples; ``fetch_arrow`` as ``inprocess_arrow``), ``pgwire`` (psycopg ``fetchall``, text),
  ``pgwire_binary``;
- ``concurrent_qps``: ``--clients`` psycopg clients (threads) running point queries at once:
  the writer lock serialises them, so this shows the lock's cost, not parallelism;
- ``buenavista_point_qps`` (with ``--buenavista DIR``: a directory holding the unpacked
  buenavista wheel, e.g. ``pip download --no-deps buenavista`` then unzip): the same point
  queries through buenavista 0.5's threaded server with a 30-line adapter onto the same
  database -- the candidate library, measured beside ours (docs/pgwire.md, "Why not a library").

Every psycopg figure comes from a client process of its own (as real clients are: the server's
threads and the client's then do not share one GIL); the server runs in this process.

Run: ``python -m bench.pgwire [--quick]``; prints a table, then one JSON line
``{"bench": "pgwire", ...}`` (last line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

import sql
from bench.harness import machine
from sql.pgwire import PgServer, ServerOptions


def load(url: str, rows: int) -> None:
    with sql.connect(url, barrier_interval_ms=0) as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k INT, v DOUBLE, s VARCHAR)")
        ids = np.arange(rows, dtype=np.int64)
        conn.insert_arrow("t", pa.table({"id": ids, "k": (ids % 1000).astype(np.int32), "v": ids * 0.5,
                                         "s": pa.array([f"row-{i}" for i in range(rows)])}))
        conn.flush()


def best(fn, repeat: int) -> float:
    """The shortest of ``repeat`` runs of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


QUERY = "SELECT v, s FROM t WHERE id = %s"


def client(port: int, rows: int, points: int, clients: int, repeat: int, only_points: bool) -> dict:
    """The psycopg side (run in a process of its own, as a real client is: the server's threads
    and the client's then do not share one GIL): figures as in the module docstring."""
    import psycopg

    conninfo = dict(host="127.0.0.1", port=port, user="bench", dbname="db", autocommit=True)
    ids = [random.randrange(rows) for _ in range(points)]
    out = {}
    with psycopg.connect(**conninfo) as c:
        for binary in (False,) if only_points else (False, True):
            suffix = "_binary" if binary else ""
            cur = c.cursor(binary=binary)
            prepare = None if only_points else True

            def points_run():
                for i in ids:
                    cur.execute(QUERY, (i,), prepare=prepare).fetchone()

            points_run()   # warm: plans, prepared statements
            out[f"point_qps{suffix}"] = points / best(points_run, repeat)
            if only_points:
                return out

            def scan():
                assert len(cur.execute("SELECT * FROM t").fetchall()) == rows

            out[f"scan_rows_per_s{suffix}"] = rows / best(scan, repeat)
    share = ids[:max(1, points // clients)]

    def one():
        with psycopg.connect(**conninfo) as c:
            for i in share:
                c.execute(QUERY, (i,), prepare=True).fetchone()

    def concurrent():
        threads = [threading.Thread(target=one) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    out["concurrent_qps"] = len(share) * clients / best(concurrent, repeat)
    return out


def run_client(port: int, args, only_points: bool = False) -> dict:
    code = [sys.executable, "-m", "bench.pgwire", "--client", str(port), "--rows", str(args.rows), "--points",
            str(args.points), "--clients", str(args.clients), "--repeat", str(args.repeat)]
    done = subprocess.run(code + (["--only-points"] if only_points else []), capture_output=True, text=True,
                          check=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--points", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10k rows, 300 point queries, one run")
    ap.add_argument("--buenavista", metavar="DIR", help="an unpacked buenavista wheel: measure it too")
    ap.add_argument("--client", type=int, metavar="PORT", help=argparse.SUPPRESS)   # the client process
    ap.add_argument("--only-points", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.points, args.repeat = 10_000, 300, 1
    if args.client:
        out = client(args.client, args.rows, args.points, args.clients, args.repeat, args.only_points)
        print(json.dumps(out))
        return out
    tmp = tempfile.mkdtemp(prefix="bench-pgwire-")
    url = f"{tmp}/db"
    figures = {}
    try:
        load(url, args.rows)
        ids = [random.randrange(args.rows) for _ in range(args.points)]
        server = PgServer(url, ServerOptions(port=0, barrier_interval_ms=0)).start_in_thread()
        try:
            local = sql.session.Connection(server.db, owns_db=False)   # in process, same Database

            def points_inprocess():
                for i in ids:
                    local.execute(QUERY, (i,)).fetchone()

            points_inprocess()
            figures["point_qps_inprocess"] = args.points / best(points_inprocess, args.repeat)

            def scan_inprocess():
                assert len(local.execute("SELECT * FROM t").fetchall()) == args.rows

            def scan_arrow():
                assert local.execute("SELECT * FROM t").fetch_arrow().num_rows == args.rows

            figures["scan_rows_per_s_inprocess"] = args.rows / best(scan_inprocess, args.repeat)
            figures["scan_rows_per_s_inprocess_arrow"] = args.rows / best(scan_arrow, args.repeat)
            for name, value in run_client(server.port, args).items():
                figures[name.replace("point_qps", "point_qps_pgwire").replace("scan_rows_per_s",
                        "scan_rows_per_s_pgwire").replace("concurrent_qps", "concurrent_qps_pgwire")] = value
            if args.buenavista:   # interleaved rounds, best of each: the machine's load moves between them
                ours, theirs = buenavista_points(args.buenavista, server.db, server.port, args)
                figures["point_qps_pgwire_unprepared"], figures["buenavista_point_qps"] = ours, theirs
            else:
                figures["point_qps_pgwire_unprepared"] = run_client(server.port, args, only_points=True)["point_qps"]
            local.close()
        finally:
            server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'figure':<36} {'value':>14}")
    for name, value in figures.items():
        print(f"{name:<36} {value:>14,.0f}")
    line = {"bench": "pgwire", "rows": args.rows, "points": args.points, "clients": args.clients,
            "machine": machine(), **{k: round(v, 1) for k, v in figures.items()}}
    print(json.dumps(line, sort_keys=True))
    return line


def buenavista_points(directory: str, db, port: int, args) -> tuple:
    """``(ours, buenavista's)`` unprepared point queries/s onto ``db`` (module docstring), from
    client processes, in ``--repeat`` interleaved rounds (best of each)."""
    sys.path.insert(0, directory)
    from buenavista import core as bv
    from buenavista.postgres import BuenaVistaServer

    from sql.session import Connection

    types = {"BIGINT": bv.BVType.BIGINT, "INTEGER": bv.BVType.INTEGER, "DOUBLE PRECISION": bv.BVType.FLOAT,
             "CHARACTER VARYING": bv.BVType.TEXT}

    class Result(bv.QueryResult):
        def __init__(self, cur):
            super().__init__()
            self.cur = cur
            self.desc = cur.description or []

        def has_results(self):
            return bool(self.desc)

        def column_count(self):
            return len(self.desc)

        def column(self, index):
            return self.desc[index][0], types.get(self.desc[index][1], bv.BVType.TEXT)

        def rows(self):
            return iter(self.cur.fetchall())

        def status(self):
            return "SELECT" if self.desc else "OK"

    class Session(bv.Session):
        def __init__(self):
            super().__init__()
            self.conn = Connection(db, owns_db=False)

        def cursor(self):
            return self.conn.cursor()

        def close(self):
            self.conn.close()

        def execute_sql(self, sql_text, params=None):
            return Result(self.conn.cursor().execute_prepared(sql_text, list(params or ())))

        def in_transaction(self):
            return False

    class Conn(bv.Connection):
        def new_session(self):
            return Session()

    server = BuenaVistaServer(("127.0.0.1", 0), Conn())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ours, theirs = [], []
        for _ in range(max(args.repeat, 3)):
            ours.append(run_client(port, args, only_points=True)["point_qps"])
            theirs.append(run_client(server.server_address[1], args, only_points=True)["point_qps"])
        return max(ours), max(theirs)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
