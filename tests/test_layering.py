"""The layers import in one direction (README "Layout"): ``cli`` -> ``sql`` -> ``stream`` ->
``relational`` -> ``hummock``, never upward, and no layer imports the benchmarks or the tests.

Read from the source (``ast``), so imports inside functions count too, and so do module names
handed to ``importlib.import_module`` as constants (the CLI's lazy subcommand table is such a
list). ``native/`` holds Cython modules that the layers load through ``hummock._twins``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: lowest first: each package may import those before it, never those after it
LAYERS = ["hummock", "relational", "stream", "sql", "cli"]
NEVER = {"bench", "tests"}


def imported_modules(path: pathlib.Path) -> list:
    """``(line, module)`` for every absolute import and constant ``import_module(...)`` in the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value))
    return out


def upward_imports(layer: str, root: pathlib.Path = ROOT) -> list:
    above = set(LAYERS[LAYERS.index(layer) + 1:]) | NEVER
    return [f"{p.relative_to(root)}:{line}: {m}" for p in sorted((root / layer).rglob("*.py"))
            for line, m in imported_modules(p) if m.split(".")[0] in above]


@pytest.mark.parametrize("layer", LAYERS)
def test_no_layer_imports_a_layer_above_it(layer):
    assert (ROOT / layer / "__init__.py").exists()
    assert upward_imports(layer) == []


def test_the_cli_is_a_package_of_its_own_above_sql():
    """The command line moved out of ``sql/`` (issue 28, item 6): no ``sql/cli*.py`` is left,
    and the console script and ``python -m cli`` both name the new package."""
    assert sorted(p.name for p in (ROOT / "sql").glob("cli*")) == []
    assert 'hummock = "cli.main:main"' in (ROOT / "pyproject.toml").read_text()
    from cli import main
    assert all(module.startswith("cli.") for _, module, _ in main.SUBCOMMANDS)


def test_the_check_sees_imports_in_functions_and_import_module(tmp_path):
    """The checker itself: an upward import inside a function, and a lazy one by name, count."""
    (tmp_path / "stream").mkdir()
    (tmp_path / "stream" / "x.py").write_text(
        "import importlib\nfrom relational import types\n\ndef f():\n    from sql.parse import parse\n"
        "    return importlib.import_module('cli.main')\n")
    assert upward_imports("stream", tmp_path) == ["stream/x.py:5: sql.parse", "stream/x.py:6: cli.main"]
