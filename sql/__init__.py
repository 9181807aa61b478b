"""The SQL layer: parse, bind, plan and run SQL over the streaming engine (DESIGN.md section 9;
docs/sql.md).

Pipeline (one module per step): :mod:`sql.parse` -> :mod:`sql.bind` -> :mod:`sql.plan` ->
:mod:`sql.build` (stream) / :mod:`sql.batch` (SELECT); :mod:`sql.catalog`,
:mod:`sql.database` (lifecycle), :mod:`sql.statements`, :mod:`sql.session` (``connect``).
Also the ``hummock`` command-line entry point (:mod:`sql.cli`).
"""

from sql.errors import BindError, CatalogError, ExecutionError, SqlError, SqlSyntaxError, UnsupportedError


def connect(url: str = ":memory:", **kwargs):
    """``sql.connect(url, barrier_interval_ms=1000, implicit_flush=False, **store_options)``."""
    from sql.session import connect as _connect
    return _connect(url, **kwargs)


__all__ = ["BindError", "CatalogError", "ExecutionError", "SqlError", "SqlSyntaxError", "UnsupportedError",
           "connect"]
