"""Benchmark ``startup``: how long a fresh interpreter takes to be useful (issue 28 item 5).

Figures, each the best of ``--repeat`` fresh processes (seconds, wall clock):

- ``python``: ``python -c pass`` (the interpreter and site-packages alone: the floor);
- ``import_sql``: ``python -c "import sql"`` (target < 0.5 s);
- ``import_hummock``: ``python -c "import hummock"``;
- ``hummock_help``: ``python -m cli --help`` (the console script's work; target < 0.3 s);
- ``connect_local``: ``import sql`` + ``sql.connect(<a new directory>)`` + close.

Then, for ``import sql`` and ``hummock --help``, the heaviest modules by cumulative import time
(``python -X importtime``), and whether boto3, pandas or pyspark were loaded -- none should be
for a local database (boto3 is for s3:// URLs, pyspark and pandas for Spark and ``cursor.df()``).

Run: ``python -m bench.startup``; prints a table, then one JSON line ``{"bench": "startup", ...}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

from bench.harness import machine

HEAVY = ("boto3", "pandas", "pyspark")


def _run(code: list) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *code], check=True, capture_output=True)
    return time.perf_counter() - start


def _top_imports(code: list, n: int) -> tuple[list, list]:
    """The ``n`` heaviest top-level imports (module, cumulative ms) and which HEAVY modules loaded."""
    out = subprocess.run([sys.executable, "-X", "importtime", *code], capture_output=True, text=True).stderr
    rows = []
    for line in out.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        try:
            rows.append((name.rstrip(), int(cumulative) / 1000))
        except ValueError:
            continue
    loaded = sorted({h for h in HEAVY for name, _ in rows if name.strip() == h})
    depth = {name: len(name) - len(name.lstrip()) for name, _ in rows}
    shallow = sorted(((name.strip(), ms) for name, ms in rows if depth[name] <= 3), key=lambda r: -r[1])
    return shallow[:n], loaded


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="bench-startup-")
    cases = {
        "python": ["-c", "pass"],
        "import_sql": ["-c", "import sql"],
        "import_hummock": ["-c", "import hummock"],
        "hummock_help": ["-m", "cli", "--help"],
        "connect_local": ["-c", f"import sql, uuid; sql.connect({tmp!r} + '/' + uuid.uuid4().hex).close()"],
    }
    figures = {name: min(_run(code) for _ in range(args.repeat)) for name, code in cases.items()}
    print(f"{'figure (s, best of ' + str(args.repeat) + ')':<28} {'value':>8}")
    for name, value in figures.items():
        print(f"{name:<28} {value:>8.3f}")
    loaded = {}
    for name in ("import_sql", "hummock_help", "connect_local"):
        top, heavy = _top_imports(cases[name], args.top)
        loaded[name] = heavy
        print(f"\n{name}: heavy modules loaded: {', '.join(heavy) or 'none'}; slowest imports (cumulative ms):")
        for module, ms in top:
            print(f"  {module:<40} {ms:>8.1f}")
    line = {"bench": "startup", "machine": machine(), "loaded": loaded,
            **{k: round(v, 3) for k, v in figures.items()}}
    print(json.dumps(line, sort_keys=True))
    return line


if __name__ == "__main__":
    main()
