"""The SQL layer's error classes and position helpers.

Job: one typed exception per failure class (docs/sql.md, "Errors"), each carrying the 1-based
``line`` and ``column`` of the offending text when known, and a message that names both
("... at line 1, column 17"). ``SqlError`` derives from ``hummock.HummockError`` so callers can
catch everything the engine raises with one class.

Invariants: ``line``/``column`` are ``None`` together or ints >= 1 together; the message always
ends with the position when one is known.

Callers: every ``sql`` module; users catch these (re-exported from ``sql``).
"""

from __future__ import annotations

from hummock.errors import HummockError


class SqlError(HummockError):
    """Root of the SQL errors (module docstring)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        if line is not None and column is not None:
            message = f"{message} at line {line}, column {column}"
        else:
            line = column = None
        super().__init__(message)
        self.line, self.column = line, column


class SqlSyntaxError(SqlError):
    """The text does not parse."""


class BindError(SqlError):
    """Unknown table/column, ambiguous column, type mismatch, wrong argument types."""


class UnsupportedError(SqlError):
    """Valid SQL this engine does not support (the message says what)."""


class CatalogError(SqlError):
    """A relation already exists, does not exist, or is still needed by an MV."""


class ExecutionError(SqlError):
    """A runtime failure: overflow, pk column update, pk conflict, a bad value."""


class ReadOnlyError(SqlError):
    """A statement that writes (DDL, DML, COPY FROM) on a read-only connection
    (``connect(url, read_only=True)``, ``hummock sql --read-only``): the message names it."""


class LostWritesError(ExecutionError):
    """Acknowledged DML statements that a stream-graph failure lost (sql/database.py, "Graph
    failures"): ``statements`` names each (``"[session N] INSERT ..."``), ``cause`` is the
    failure's text. Every session of the database gets it once."""

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
