"""Sources (docs/sql.md "Sources"): CREATE SOURCE / CREATE TABLE ... WITH (connector = ...),
the datagen and nexmark connectors, exactly once across restarts; and the layering fix that
moved the Nexmark generator out of ``bench/`` (nothing in ``sql/`` or ``stream/`` imports it)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _imports(path: pathlib.Path) -> list:
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("package", ["sql", "stream"])
def test_no_import_of_bench(package):
    offenders = [f"{p.relative_to(ROOT)}: {m}" for p in sorted((ROOT / package).rglob("*.py"))
                 for m in _imports(p) if m == "bench" or m.startswith("bench.")]
    assert offenders == []


def test_bench_nexmark_still_works_from_the_new_place():
    from bench.nexmark import feed, generator, queries, schema
    from sql import nexmark_feed, nexmark_queries
    from stream.sources import nexmark, nexmark_schema
    assert generator.NexmarkGenerator is nexmark.NexmarkGenerator and generator._uniforms is nexmark._uniforms
    assert schema.BID_SCHEMA is nexmark_schema.BID_SCHEMA
    assert queries.QUERIES is nexmark_queries.QUERIES and feed.feed is nexmark_feed.feed
