"""What the pgwire server reads from and says about statement text: the SQLSTATE and position
of an error (``sqlstate_of``, ``_position``, ``_message``), the statements the server answers
itself (the ``_BEGIN`` ... ``_COPY`` patterns), the Postgres settings it keeps per session
(``PG_SETTINGS``, ``REPORTED``), splitting a simple Query into statements and counting its
parameters, and the command tag of a finished statement (``_tag``). Pure functions of text and
exceptions: no socket, no database.

Callers: :mod:`sql.pgwire.server` only.
"""

from __future__ import annotations

import re

from sql import errors as E
from sql.pgwire import pg_catalog as C


class QueryCanceled(E.OperationalError):
    sqlstate = "57014"


class FailedTransaction(E.InternalError):
    sqlstate = "25P02"


class ServerFilesRefused(E.ProgrammingError):
    sqlstate = "42501"


# --- SQLSTATE --------------------------------------------------------------------------------------

_REFINE = (
    (re.compile(r"^column .* does not exist|unknown column", re.I), "42703"),
    (re.compile(r"(relation|table|view|index) .*does not exist|no such (table|relation)|unknown (table|relation)",
                re.I), "42P01"),
    (re.compile(r"already exists", re.I), "42P07"),
    (re.compile(r"division by zero", re.I), "22012"),
    (re.compile(r"out of range|overflow", re.I), "22003"),
    (re.compile(r"duplicate key|primary key conflict|violates", re.I), "23505"),
    (re.compile(r"invalid input syntax|invalid .* value|cannot read", re.I), "22P02"),
    (re.compile(r"function .* does not exist|unknown function", re.I), "42883"),
    (re.compile(r"unrecognized configuration parameter", re.I), "42704"),
    (re.compile(r"still needed by|depend", re.I), "2BP01"),
)


def sqlstate_of(exc: BaseException) -> str:
    """The SQLSTATE reported for ``exc`` (module docstring)."""
    code = getattr(exc, "sqlstate", None) or "XX000"
    if isinstance(exc, (E.BindError, E.CatalogError, E.ExecutionError)) and not isinstance(exc, E.ParameterError):
        text = str(exc)
        for pattern, refined in _REFINE:
            if pattern.search(text):
                return refined
    return code


def _position(exc, text: str, offset: int) -> int | None:
    """1-based character position of ``exc``'s line/column in ``text`` (the statement starts at
    ``offset`` of the query string)."""
    line, column = getattr(exc, "line", None), getattr(exc, "column", None)
    if line is None or column is None:
        return None
    at = 0
    for _ in range(line - 1):
        nl = text.find("\n", at)
        if nl < 0:
            return None
        at = nl + 1
    return offset + at + column


def _message(exc) -> str:
    text = str(exc)
    if getattr(exc, "line", None) is not None:   # the position goes in its own field
        text = re.sub(r" at line \d+, column \d+$", "", text)
    return text


# --- statements the server answers itself --------------------------------------------------------

_BEGIN = re.compile(r"\s*(BEGIN|START\s+TRANSACTION)\b", re.I)
_COMMIT = re.compile(r"\s*(COMMIT|END)(\s+(WORK|TRANSACTION))?\s*;?\s*$", re.I)
_ROLLBACK = re.compile(r"\s*(ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?\s*;?\s*$", re.I)
_ROLLBACK_TO = re.compile(r"\s*ROLLBACK\s+(WORK\s+|TRANSACTION\s+)?TO\b", re.I)
_SAVEPOINT = re.compile(r"\s*(SAVEPOINT|RELEASE)\b", re.I)
_SET = re.compile(r"\s*SET\s+(SESSION\s+|LOCAL\s+)?(?!TRANSACTION\b)([\w.]+)\s*(?:=|\bTO\b)\s*(.*?)\s*;?\s*$",
                  re.I | re.S)
_SET_TZ = re.compile(r"\s*SET\s+(SESSION\s+|LOCAL\s+)?TIME\s+ZONE\s+(.*?)\s*;?\s*$", re.I | re.S)
_SET_TX = re.compile(r"\s*SET\s+(SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b", re.I)
_RESET = re.compile(r"\s*RESET\s+(ALL|[\w.]+)\s*;?\s*$", re.I)
_SHOW = re.compile(r"\s*SHOW\s+([\w.]+)\s*;?\s*$", re.I)
_DISCARD = re.compile(r"\s*(DISCARD\s+\w+|DEALLOCATE\s+(PREPARE\s+)?(ALL|\w+)|UNLISTEN\s+\S+|CLOSE\s+ALL)\s*;?\s*$",
                      re.I)
_COPY_STDIN = re.compile(r"(\s*COPY\s+.*?\bFROM\s+)(STDIN)\b", re.I | re.S)
_COPY_STDOUT = re.compile(r"(\s*COPY\s+.*?\bTO\s+)(STDOUT)\b", re.I | re.S)
_COPY = re.compile(r"\s*COPY\b", re.I)
_SERVER_FILES = re.compile(r"\bread_(csv|parquet|json)\s*\(", re.I)
_QUERY_WORDS = ("SELECT", "WITH", "VALUES", "SHOW", "EXPLAIN", "DESCRIBE", "TABLE", "(")

#: Postgres settings clients set or read that the engine has no variable for: kept per session
PG_SETTINGS = {
    "server_version": C.PG_VERSION, "server_version_num": C.PG_VERSION_NUM, "server_encoding": "UTF8",
    "client_encoding": "UTF8", "datestyle": "ISO, MDY", "timezone": "UTC", "intervalstyle": "postgres",
    "integer_datetimes": "on", "standard_conforming_strings": "on", "is_superuser": "on",
    "default_transaction_read_only": "off", "transaction_read_only": "off", "in_hot_standby": "off",
    "application_name": "", "extra_float_digits": "1", "search_path": '"$user", public',
    "statement_timeout": "0", "lock_timeout": "0", "idle_in_transaction_session_timeout": "0",
    "client_min_messages": "notice", "default_transaction_isolation": "read committed",
    "transaction_isolation": "read committed", "bytea_output": "hex", "max_identifier_length": "63",
    "max_index_keys": "32", "block_size": "8192", "lc_collate": "C", "lc_ctype": "C", "jit": "off",
    "session_authorization": "", "row_security": "on", "default_tablespace": "", "xmloption": "content",
    "scram_iterations": "4096",
}
#: the settings a client is told about (ParameterStatus) at startup and when they change
REPORTED = ("server_version", "server_encoding", "client_encoding", "application_name", "datestyle", "timezone",
            "integer_datetimes", "standard_conforming_strings", "intervalstyle", "is_superuser",
            "session_authorization", "default_transaction_read_only", "in_hot_standby", "scram_iterations")
_REPORTED_NAMES = {"datestyle": "DateStyle", "timezone": "TimeZone", "intervalstyle": "IntervalStyle"}
_ENGINE_VARIABLES = None


def _engine_variables():
    global _ENGINE_VARIABLES
    if _ENGINE_VARIABLES is None:
        from sql.statements import SESSION_VARIABLES
        _ENGINE_VARIABLES = set(SESSION_VARIABLES)
    return _ENGINE_VARIABLES


def split_query(text: str) -> list:
    """``(piece, offset)`` of each non-empty statement of a simple Query's text."""
    from sql.parse import _only_comments, _scan

    cuts = [s for kind, s, _ in _scan(text) if kind == ";"]
    out, at = [], 0
    for cut in cuts + [len(text)]:
        piece = text[at:cut]
        if piece.strip() and not _only_comments(piece):
            out.append((piece, at))
        at = cut + 1
    return out


def count_params(text: str) -> int:
    """The highest ``$n`` outside quotes and comments (``%s`` counts too, as the engine's parser)."""
    from sql.parse import _scan

    n = holes = 0
    for kind, start, end in _scan(text):
        if kind == "$n":
            n = max(n, int(text[start + 1:end]))
        elif kind == "%s":
            holes += 1
    return max(n, holes)


def _tag(text: str, cursor) -> str:
    words = text.split(None, 3)
    first = words[0].upper().lstrip("(") if words else ""
    rows = max(cursor.rowcount, 0) if cursor is not None else 0
    if cursor is not None and cursor.description is not None and first not in ("INSERT", "UPDATE", "DELETE"):
        return f"SELECT {rows}" if first not in ("SHOW", "EXPLAIN", "DESCRIBE") else first   # (DML: RETURNING)
    if first == "INSERT":
        return f"INSERT 0 {rows}"
    if first in ("UPDATE", "DELETE", "COPY"):
        return f"{first} {rows}"
    if first in ("CREATE", "DROP", "ALTER") and len(words) > 1:
        second = words[1].upper()
        if second == "MATERIALIZED" and len(words) > 2:
            return f"{first} MATERIALIZED {words[2].upper()}"
        if second in ("TABLE", "INDEX", "VIEW", "SOURCE", "SINK", "SUBSCRIPTION", "SCHEMA", "FUNCTION"):
            return f"{first} {second}"
        if second == "UNIQUE":
            return f"{first} INDEX"
        return first
    return first or "OK"
