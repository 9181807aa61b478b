"""The SQL layer: parse, bind, plan and run SQL over the streaming engine (DESIGN.md section 9;
docs/sql.md).

Pipeline (one module per step): :mod:`sql.parse` -> :mod:`sql.bind` -> :mod:`sql.plan` ->
:mod:`sql.build` (stream) / :mod:`sql.batch` (SELECT); :mod:`sql.catalog`,
:mod:`sql.database` (lifecycle), :mod:`sql.statements`, :mod:`sql.session` (``connect``).
The ``hummock`` command line sits above this layer, in the top-level package :mod:`cli`
(nothing here imports it: tests/test_layering.py).

A PEP 249 (DB-API 2.0) module: ``apilevel``, ``threadsafety``, ``paramstyle`` and the
exception classes below (sql/errors.py places every SQL error under them); ``connect``
returns a :class:`sql.session.Connection`.
"""

from sql.errors import (BindError, CatalogError, DatabaseError, DataError, Error, ExecutionError, IntegrityError,
                        InterfaceError, InternalError, NotSupportedError, OperationalError, ProgrammingError,
                        ReadOnlyError, SqlError, SqlSyntaxError, UnsupportedError, Warning)

#: PEP 249 module globals. threadsafety 1: threads may share the module, not a connection (a
#: Connection's session state is unsynchronised); paramstyle ``format``: ``%s`` (``$1`` also works).
apilevel = "2.0"
threadsafety = 1
paramstyle = "format"


def connect(url: str = ":memory:", **kwargs):
    """``sql.connect(url, barrier_interval_ms=1000, implicit_flush=False, **store_options)``."""
    from sql.session import connect as _connect
    return _connect(url, **kwargs)


__all__ = ["BindError", "CatalogError", "DataError", "DatabaseError", "Error", "ExecutionError", "IntegrityError",
           "InterfaceError", "InternalError", "NotSupportedError", "OperationalError", "ProgrammingError",
           "ReadOnlyError", "SqlError", "SqlSyntaxError", "UnsupportedError", "Warning", "apilevel", "connect",
           "paramstyle", "threadsafety"]
