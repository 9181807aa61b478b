"""The SQL layer's error classes and position helpers.

Job: one typed exception per failure class (docs/sql.md, "Errors"), each carrying the 1-based
``line`` and ``column`` of the offending text when known, and a message that names both
("... at line 1, column 17"). ``SqlError`` derives from ``hummock.HummockError`` so callers can
catch everything the engine raises with one class.

PEP 249 (docs/sql.md, "Python API"): the DB-API exception classes ``Error`` (root, itself a
``HummockError``), ``InterfaceError``, ``DatabaseError`` and its ``DataError``,
``OperationalError``, ``IntegrityError``, ``InternalError``, ``ProgrammingError``,
``NotSupportedError`` live here, and every SQL error is one of them as well as a ``SqlError``:
``SqlError`` is a ``DatabaseError``; each subclass also derives the DB-API class that names
its kind (a syntax or bind error is a ``ProgrammingError``, an unsupported feature a
``NotSupportedError``, a runtime value failure a ``DataError`` ...). So ``except SqlError``,
``except HummockError`` and ``except sql.ProgrammingError`` all keep working. Each class
carries ``sqlstate``, the Postgres SQLSTATE code the pgwire server (sql/pgwire) reports for it.

Invariants: ``line``/``column`` are ``None`` together or ints >= 1 together; the message always
ends with the position when one is known.

Callers: every ``sql`` module; users catch these (re-exported from ``sql``).
"""

from __future__ import annotations

from hummock.errors import HummockError


class Warning(Exception):  # noqa: A001  (PEP 249 names it so)
    """PEP 249 ``Warning`` (nothing raises it today)."""


class Error(HummockError):
    """PEP 249 root: every error of the DB-API surface (module docstring)."""

    sqlstate = "XX000"


class InterfaceError(Error):
    """PEP 249: misuse of the Python interface itself (a closed connection or cursor)."""

    sqlstate = "08003"


class DatabaseError(Error):
    """PEP 249: an error of the database (every ``SqlError``)."""


class DataError(DatabaseError):
    """PEP 249: a bad value (overflow, division by zero, a cast that does not fit)."""

    sqlstate = "22000"


class OperationalError(DatabaseError):
    """PEP 249: the database's operation failed, not the statement's text."""

    sqlstate = "58000"


class IntegrityError(DatabaseError):
    """PEP 249: a constraint was violated."""

    sqlstate = "23000"


class InternalError(DatabaseError):
    """PEP 249: the database is in a state that refuses the statement."""


class ProgrammingError(DatabaseError):
    """PEP 249: the statement is wrong (syntax, unknown names, wrong parameter count)."""

    sqlstate = "42000"


class NotSupportedError(DatabaseError):
    """PEP 249: a feature this database does not have."""

    sqlstate = "0A000"


class SqlError(DatabaseError):
    """Root of the SQL errors (module docstring)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        if line is not None and column is not None:
            message = f"{message} at line {line}, column {column}"
        else:
            line = column = None
        super().__init__(message)
        self.line, self.column = line, column


class SqlSyntaxError(SqlError, ProgrammingError):
    """The text does not parse."""

    sqlstate = "42601"


class BindError(SqlError, ProgrammingError):
    """Unknown table/column, ambiguous column, type mismatch, wrong argument types."""

    sqlstate = "42000"


class ParameterError(BindError):
    """The parameters do not fit the statement (their count, a value that cannot be one)."""

    sqlstate = "08P01"


class UnsupportedError(SqlError, NotSupportedError):
    """Valid SQL this engine does not support (the message says what)."""

    sqlstate = "0A000"


class CatalogError(SqlError, ProgrammingError):
    """A relation already exists, does not exist, or is still needed by an MV."""

    sqlstate = "42000"


class ExecutionError(SqlError, DataError):
    """A runtime failure: overflow, pk column update, pk conflict, a bad value."""

    sqlstate = "22000"


class ReadOnlyError(SqlError, InternalError):
    """A statement that writes (DDL, DML, COPY FROM) on a read-only connection
    (``connect(url, read_only=True)``, ``hummock sql --read-only``): the message names it.
    (An ``InternalError`` as Postgres's ``read_only_sql_transaction``, 25006, is in psycopg.)"""

    sqlstate = "25006"


class ClosedError(SqlError, InterfaceError):
    """A closed connection or cursor was used."""

    sqlstate = "08003"


class LostWritesError(ExecutionError, OperationalError):
    """Acknowledged DML statements that a stream-graph failure lost (sql/database.py, "Graph
    failures"): ``statements`` names each (``"[session N] INSERT ..."``), ``cause`` is the
    failure's text. Every session of the database gets it once."""

    sqlstate = "58000"

    def __init__(self, message: str, statements=(), cause: str = ""):
        super().__init__(message)
        self.statements = list(statements)
        self.cause = cause


def execution_error(exc, node=None) -> ExecutionError:
    """An ExecutionError for a failed evaluation ``exc`` (a data error such as an overflow),
    positioned at the failing expression when it has one (``exc.expr.node``: the sqlglot node
    the binder built it from), else at ``node``."""
    failing = getattr(getattr(exc, "expr", None), "node", None)
    line, column = start_of(failing if failing is not None else node)
    return ExecutionError(str(exc), line, column)


def start_of(node) -> tuple:
    """``(line, column)`` where the text of ``node`` starts (its leftmost positioned part)."""
    found = []
    try:
        for sub in node.walk():
            pos = position_of(sub) if (getattr(sub, "_meta", None) or {}).get("line") else None
            if pos is not None and pos[0] is not None:
                found.append(pos)
    except AttributeError:
        return None, None
    return min(found) if found else (None, None)


def position_of(node) -> tuple:
    """``(line, column)`` of a sqlglot node (its first positioned descendant), or ``(None, None)``."""
    if node is None:
        return None, None
    try:
        walk = node.walk()
    except AttributeError:
        return None, None
    for sub in walk:
        meta = getattr(sub, "_meta", None) or {}
        if "line" in meta and "col" in meta:
            start = meta.get("start")
            end = meta.get("end")
            col = meta["col"]
            if start is not None and end is not None:   # sqlglot's col is the token's last char
                col = col - (end - start)
            return meta["line"], max(1, col)
    return None, None


def error_at(cls, message: str, node=None):
    """An instance of ``cls`` positioned at ``node`` (a sqlglot expression) when it has a position."""
    line, col = position_of(node)
    return cls(message, line, col)
