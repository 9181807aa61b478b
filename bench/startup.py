"""Benchmark ``startup``: how long a fresh interpreter takes to be useful (issue 28 item 5).

Figures, each the best of ``--repeat`` fresh processes (seconds, wall clock):

- ``python``: ``python -c pass`` (the interpreter and site-packages alone: the floor);
- ``import_sql``: ``python -c "import sql"`` (target < 0.5 s);
- ``import_hummock``: ``python -c "import hummock"``;
- ``hummock_help``: ``python -m cli --help`` (the console script's work; target < 0.3 s);
- ``connect_local``: ``import sql`` + ``sql.connect(<a new directory>)`` + close.

Each figure is taken twice, with the bytecode cache under control (``PYTHONPYCACHEPREFIX`` set
to a directory of the bench's own, so the environment's ``__pycache__`` directories and its
``PYTHONDONTWRITEBYTECODE`` do not matter): **warm** -- the prefix filled by one run beforehand,
what a user sees from the second start on (pip writes the cache of what it installs, an
editable checkout's is written on its first import) -- and **cold** -- an empty prefix that is
never written, so every module, the project's and its dependencies', is compiled from source:
a first start, or every start where ``PYTHONDONTWRITEBYTECODE`` is set and nothing was cached
(this project's CI machines set it: ``connect_local`` measured 1.45 s cold and 0.42 s warm
there, 2026-11-29). The JSON's top-level figures are the warm ones; ``cold`` holds the others.

Then, for ``import sql`` and ``hummock --help``, the heaviest modules by cumulative import time
(``python -X importtime``), and whether boto3, pandas or pyspark were loaded -- none should be
for a local database (boto3 is for s3:// URLs, pyspark and pandas for Spark and ``cursor.df()``).

Run: ``python -m bench.startup``; prints a table, then one JSON line ``{"bench": "startup", ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench.harness import machine

HEAVY = ("boto3", "pandas", "pyspark")


def _env(prefix: str, write: bool) -> dict:
    """The environment of a measured process: bytecode read from (and, with ``write``, written
    to) ``prefix`` only (module docstring: warm and cold)."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=prefix)
    if write:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(code: list, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *code], check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def _top_imports(code: list, n: int, env: dict | None = None) -> tuple[list, list]:
    """The ``n`` heaviest top-level imports (module, cumulative ms) and which HEAVY modules loaded."""
    out = subprocess.run([sys.executable, "-X", "importtime", *code], capture_output=True, text=True, env=env).stderr
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
    warm_prefix, cold_prefix = os.path.join(tmp, "pyc-warm"), os.path.join(tmp, "pyc-cold")
    for code in cases.values():   # fills the warm prefix (every module each case imports)
        _run(code, _env(warm_prefix, write=True))
    warm_env, cold_env = _env(warm_prefix, write=False), _env(cold_prefix, write=False)
    figures = {name: min(_run(code, warm_env) for _ in range(args.repeat)) for name, code in cases.items()}
    cold = {name: min(_run(code, cold_env) for _ in range(args.repeat)) for name, code in cases.items()}
    if os.path.exists(cold_prefix):   # (nothing may have been written there)
        raise SystemExit(f"the cold runs wrote bytecode under {cold_prefix}: the cold figures are not cold")
    print(f"{'figure (s, best of ' + str(args.repeat) + ')':<28} {'warm':>8} {'cold':>8}")
    for name, value in figures.items():
        print(f"{name:<28} {value:>8.3f} {cold[name]:>8.3f}")
    loaded = {}
    for name in ("import_sql", "hummock_help", "connect_local"):
        top, heavy = _top_imports(cases[name], args.top, warm_env)   # (warm: imports, not compiles)
        loaded[name] = heavy
        print(f"\n{name}: heavy modules loaded: {', '.join(heavy) or 'none'}; slowest imports (cumulative ms):")
        for module, ms in top:
            print(f"  {module:<40} {ms:>8.1f}")
    line = {"bench": "startup", "machine": machine(), "loaded": loaded,
            **{k: round(v, 3) for k, v in figures.items()},
            "cold": {k: round(v, 3) for k, v in cold.items()},
            "bytecode": "PYTHONPYCACHEPREFIX per mode: warm = filled by one run first, cold = empty, never written"}
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(line, sort_keys=True))
    return line


if __name__ == "__main__":
    main()
