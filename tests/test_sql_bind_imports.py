"""The binder's modules import in one direction (issue 29, item 7): no cycle among the
``sql.bind`` modules, counting imports inside functions too (the old circle was
``select`` -> ``subquery`` -> ``correlated`` -> ``select``)."""

import ast
from pathlib import Path

BIND = Path(__file__).resolve().parents[1] / "sql" / "bind"


def bind_imports() -> dict:
    graph = {}
    for path in BIND.glob("*.py"):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("sql.bind."):
                    deps.add(node.module.split(".")[2])
                elif node.module == "sql.bind":
                    deps.update(a.name for a in node.names)
        graph[name] = deps - {name}
    return graph


def test_the_binder_modules_import_each_other_without_a_cycle():
    graph = bind_imports()
    assert graph["correlated"] and "select" not in graph["correlated"]
    state = {}

    def visit(n, path):
        if state.get(n) == "open":
            raise AssertionError(f"import cycle: {' -> '.join(path + [n])}")
        if state.get(n) == "done":
            return
        state[n] = "open"
        for d in sorted(graph.get(n, ())):
            visit(d, path + [n])
        state[n] = "done"
    for n in sorted(graph):
        visit(n, [])
