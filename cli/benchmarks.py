"""``hummock bench NAME [ARGS...]``: run a named benchmark of ``bench/`` (``python -m bench.NAME``).

The names are found, not listed by hand: every ``bench/<name>.py`` and ``bench/<pkg>/<name>.py``
(and a package with ``__main__.py``) that runs as a script. ``--help`` lists them with the first
line of each module's docstring, read from the source without importing it (benchmarks import
heavy peers such as rocksdict or pyspark). The benchmark runs in this process with
``sys.argv = [NAME, *ARGS]``, exactly as ``python -m bench.NAME ARGS`` would.

``bench/`` is a folder of the source tree, not an installed package: when it is not importable
the folder beside ``sql/`` (an editable install, a checkout) is put on ``sys.path``.

Callers: ``cli/main.py``.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import re
import runpy
import sys

from cli.common import EXIT_OK, EXIT_USAGE

_NOT_BENCHMARKS = {"harness", "__init__", "__main__"}
_RUNS_AS_SCRIPT = re.compile(r"""__name__\s*==\s*["']__main__["']""")


def bench_dir() -> pathlib.Path | None:
    """The ``bench/`` folder this CLI runs from: an importable ``bench`` package, else the one
    beside ``sql/``."""
    import importlib.util
    spec = importlib.util.find_spec("bench")
    if spec is not None and spec.submodule_search_locations:
        return pathlib.Path(next(iter(spec.submodule_search_locations)))
    candidate = pathlib.Path(__file__).resolve().parent.parent / "bench"
    return candidate if (candidate / "__init__.py").exists() else None


def benchmarks() -> dict[str, str]:
    """name -> first docstring line of every runnable benchmark module, sorted by name."""
    root = bench_dir()
    if root is None:
        return {}
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if len(rel.parts) > 2 or "__pycache__" in rel.parts:
            continue
        source = path.read_text(encoding="utf-8")
        if path.stem == "__main__":
            name = ".".join(rel.parts[:-1])
        elif path.stem in _NOT_BENCHMARKS or not _RUNS_AS_SCRIPT.search(source):
            continue
        else:
            name = ".".join(rel.with_suffix("").parts)
        try:
            doc = ast.get_docstring(ast.parse(source)) or ""
        except SyntaxError:
            doc = ""
        found[name] = doc.strip().splitlines()[0] if doc.strip() else ""
    return found


def register(commands) -> None:
    names = benchmarks()
    listing = "\n".join(f"  {n:<20} {d}" for n, d in names.items()) or "  (no bench/ folder found)"
    parser = commands.add_parser(
        "bench", help="run a named benchmark of bench/ (see 'hummock bench --help')",
        description="Run a benchmark of bench/ as 'python -m bench.NAME ARGS' would; each prints a "
                    "table and one JSON line. Pass '--help' after NAME for its own options.",
        epilog="benchmarks:\n" + listing, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", metavar="NAME", help="the benchmark (listed below)")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="passed to the benchmark")
    parser.set_defaults(func=run_bench)


def run_bench(args) -> int:
    names = benchmarks()
    if args.name not in names:
        print(f"hummock: error: unknown benchmark {args.name!r}; one of: {', '.join(names)}", file=sys.stderr)
        return EXIT_USAGE
    root = bench_dir()
    if str(root.parent) not in sys.path:
        sys.path.insert(0, str(root.parent))
    saved = sys.argv
    sys.argv = [f"bench.{args.name}", *args.args]
    try:
        runpy.run_module(f"bench.{args.name}", run_name="__main__", alter_sys=True)
    except SystemExit as exc:   # a benchmark's own argparse or sys.exit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    return EXIT_OK
