"""The ``hummock`` command line: the top layer of the project.

Layering: ``cli`` -> ``sql`` -> ``stream`` -> ``relational`` -> ``hummock``. This package may
import any layer below it; nothing in ``sql/`` or below imports it (tests/test_layering.py).
Modules: :mod:`cli.main` (parser, dispatch, the console script ``hummock`` of pyproject.toml)
and one module per subcommand, listed in :data:`cli.main.SUBCOMMANDS` (``demo``, ``shell``
for ``hummock sql``, ``run``, ``serve``, ``inspection``, ``compact``, ``benchmarks``), plus what
they share: :mod:`cli.common` (URLs, exit codes, escaping), :mod:`cli.script` (statement
splitting, rendering), :mod:`cli.format` (values as psql prints them), :mod:`cli.terminal`,
:mod:`cli.decode`, :mod:`cli.verify`, :mod:`cli.demo_live`.

Importing this package imports nothing else: ``hummock --help`` loads only :mod:`cli.main`
(docs/cli.md). Callers: users (``hummock``, ``python -m cli``), tests.
"""
