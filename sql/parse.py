"""SQL text -> statements: a small pre-pass, then sqlglot (Postgres dialect).

Job: split a script into statements, recognise the few statements sqlglot does not know
(``FLUSH``, ``SHOW TABLES``, ``SHOW MATERIALIZED VIEWS``, ``SHOW name``, ``SET name =|TO
value``, ``DESCRIBE t``, ``EXPLAIN stmt``; the subscription statements ``CREATE SUBSCRIPTION``,
``DROP SUBSCRIPTION``, ``DECLARE c SUBSCRIPTION CURSOR``, ``FETCH``, ``CLOSE``; ``COPY``, whose
query part is parsed as a statement of its own, positions kept), strip
RisingWave's table options (``APPEND ONLY``, ``ON CONFLICT ...``, a ``WATERMARK FOR col AS
expr`` element: ``options["watermark"]``) into flags (also ``SOURCE`` of
CREATE / DROP / ALTER SOURCE, parsed as TABLE, and ``MATERIALIZED`` of ALTER MATERIALIZED VIEW,
parsed as ALTER VIEW: ``options["source"]`` / ``options["materialized"]``), spell ``[FOR SYSTEM_TIME] AS OF EPOCH n`` as ``FOR VERSION n``
(same width; sqlglot has no EPOCH form), number ``%s`` placeholders as ``$1, $2, ...``, and hand
the rest to sqlglot (Postgres dialect; :mod:`sql.dialect` keeps ``INTERVAL '...'`` strings whole).

Invariants: positions survive the pre-pass -- each statement is parsed inside a copy of the
whole text where everything else is blanked (newlines kept), and stripped options are replaced
by spaces, so sqlglot's line/column are the user's. Nesting is bounded before sqlglot sees the
text: parentheses and brackets outside quotes and comments nest at most ``MAX_DEPTH`` (200)
levels, else ``SqlSyntaxError`` at the first one too deep (a long VALUES list or a string full
of parentheses is no nesting); sqlglot recurses ~25 frames per level, so parsing (and the
statement's execution, :mod:`sql.session`) runs under :func:`stack_headroom`, and a
RecursionError that still happens (``NOT NOT ...`` or ``CASE`` chains without parentheses) is a
``SqlSyntaxError``. A parse failure is ``SqlSyntaxError`` with
line/column; text sqlglot only keeps as an opaque ``Command`` is ``UnsupportedError``. Values
are never spliced into the text: ``%s`` becomes a ``$n`` parameter node the binder resolves.

Callers: :mod:`sql.session` (``parse_script``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import sys
import threading
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from sql.bind.frozen import freeze
from sql.dialect import Hummock
from sql.errors import SqlSyntaxError, UnsupportedError

logging.getLogger("sqlglot").setLevel(logging.ERROR)

MAX_DEPTH = 200   # parentheses/brackets nest at most this deep (docs/sql.md); deeper: SqlSyntaxError
FRAMES_PER_LEVEL = 40   # Python frames a statement may recurse per nesting level (sqlglot: ~25)
STACK_HEADROOM = FRAMES_PER_LEVEL * MAX_DEPTH + 2000   # frames stack_headroom() grants


@dataclass
class Statement:
    """One parsed statement. ``kind``: ``"ast"`` (``ast`` holds the sqlglot tree), ``"flush"``,
    ``"show"`` (``name``), ``"set"`` (``name``, ``value``), ``"describe"`` (``name`` and its
    ``qualifiers``: schema, database; case-folded as Postgres does), ``"explain"`` (``inner``,
    ``analyze``),
    the subscription statements (sql/subscription.py): ``"create_subscription"`` (``name``,
    ``options``: ``relation``, ``with``, ``if_not_exists``), ``"drop_subscription"`` (``name``,
    ``options["if_exists"]``), ``"declare_cursor"`` (``name``, ``options``: ``subscription``,
    ``since`` text or ``full``), ``"fetch"`` (``name``, ``value``: the count text), ``"close"``
    (``name``, None for ALL).
    ``options``: flags the pre-pass stripped (``append_only``, ``on_conflict``, ``watermark``: the
    column name and the sqlglot expression of ``WATERMARK FOR col AS expr``).
    ``line``/``column``: where the statement starts."""

    kind: str
    text: str
    line: int
    column: int
    ast: object = None
    name: str | None = None
    qualifiers: list = field(default_factory=list)
    value: str | None = None
    inner: "Statement | None" = None
    analyze: bool = False   # EXPLAIN ANALYZE / EXPLAIN (ANALYZE): run the query, show rows and times
    options: dict = field(default_factory=dict)
    n_params: int = 0


_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


def _scan(text: str, nesting: bool = False):
    """Yield ``(kind, start, end)`` for ``;``, ``%s`` and ``$n`` outside quotes (``'...'``,
    ``"..."``, ``$tag$...$tag$``) and comments; with ``nesting``, also ``(`` for ``(``/``[``
    and ``)`` for ``)``/``]``."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in ("'", '"'):
            j = i + 1
            while j < n:
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            i = j + 1
        elif c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == ";":
            yield ";", i, i + 1
            i += 1
        elif nesting and c in "([":
            yield "(", i, i + 1
            i += 1
        elif nesting and c in ")]":
            yield ")", i, i + 1
            i += 1
        elif c == "%" and text.startswith("%s", i):
            yield "%s", i, i + 2
            i += 2
        elif c == "$" and (m := _DOLLAR_TAG.match(text, i)) is not None:   # $tag$ ... $tag$
            j = text.find(m.group(0), m.end())
            i = n if j < 0 else j + len(m.group(0))
        elif c == "$" and i + 1 < n and text[i + 1].isdigit():
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            yield "$n", i, j
            i = j
        else:
            i += 1


def _line_col(text: str, offset: int) -> tuple:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


_SHOW = re.compile(r"\s*SHOW\s+(.+?)\s*$", re.I | re.S)
_SET = re.compile(r"\s*SET\s+(?:SESSION\s+|LOCAL\s+)?([A-Za-z_][\w.]*)\s*(?:=|\bTO\b)\s*(.+?)\s*$", re.I | re.S)
_IDENT = r'(?:"(?:[^"]|"")+"|[^\W\d][\w$]*)'   # a quoted or an unquoted identifier
_DESCRIBE = re.compile(rf"\s*(?:DESCRIBE|DESC)\s+({_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}})\s*$", re.I | re.S)
_IDENT_PART = re.compile(_IDENT)


def _ident_parts(text: str) -> list:
    """The parts of a dotted name as Postgres reads them: a quoted part as written (``""`` is
    one ``"``), an unquoted one lowercased."""
    return [p[1:-1].replace('""', '"') if p.startswith('"') else p.lower() for p in _IDENT_PART.findall(text)]


_FLUSH = re.compile(r"\s*FLUSH\s*$", re.I)
_CREATE_SUB = re.compile(rf"\s*CREATE\s+SUBSCRIPTION\s+(IF\s+NOT\s+EXISTS\s+)?({_IDENT})\s+FROM\s+"
                         rf"({_IDENT}(?:\s*\.\s*{_IDENT})?)\s*(?:WITH\s*\((.*)\))?\s*$", re.I | re.S)
_DROP_SUB = re.compile(rf"\s*DROP\s+SUBSCRIPTION\s+(IF\s+EXISTS\s+)?({_IDENT})\s*$", re.I | re.S)
_DECLARE = re.compile(rf"\s*DECLARE\s+({_IDENT})\s+SUBSCRIPTION\s+CURSOR\s+FOR\s+({_IDENT})"
                      rf"(?:\s+(FULL|SINCE\s+(.+?)))?\s*$", re.I | re.S)
_FETCH = re.compile(rf"\s*FETCH\s+(?:(NEXT|ALL|\d+)\s+)?(?:FROM\s+|IN\s+)?({_IDENT})\s*$", re.I | re.S)
_CLOSE = re.compile(rf"\s*CLOSE\s+({_IDENT})\s*$", re.I | re.S)
_QUERY_CURSOR = re.compile(rf"\s*DECLARE\s+{_IDENT}\s+(?:(?:BINARY|INSENSITIVE|ASENSITIVE|NO|SCROLL)\s+)*CURSOR\b",
                           re.I | re.S)
_FETCH_DIRECTION = re.compile(r"\s*(?:FETCH|MOVE)\s+(?:PRIOR|FIRST|LAST|ABSOLUTE|RELATIVE|FORWARD|BACKWARD|-)",
                              re.I | re.S)
_SOURCE_DDL = re.compile(r"\s*(?:CREATE|DROP|ALTER)\s+(SOURCE)\b", re.I)   # 6 characters, as "TABLE "
_ALTER_MV = re.compile(r"\s*ALTER\s+(MATERIALIZED)\s+VIEW\b", re.I)   # blanked: sqlglot parses ALTER VIEW
_SUB_WORDS = re.compile(r"\s*(?:CREATE\s+SUBSCRIPTION|DROP\s+SUBSCRIPTION|DECLARE|FETCH|CLOSE)\b", re.I)
_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?:\(\s*([^)]*)\)\s*|(ANALY[SZ]E)\s+)?", re.I)
_EXPLAIN_OFF = ("false", "off", "0")
_CREATE_TABLE = re.compile(r"\s*CREATE\s+TABLE\b", re.I)
_APPEND_ONLY = re.compile(r"\bAPPEND\s+ONLY\b", re.I)
_ON_CONFLICT = re.compile(
    r"\bON\s+CONFLICT\s+(DO\s+NOTHING|OVERWRITE|DO\s+UPDATE\s+IF\s+NOT\s+NULL|DO\s+UPDATE\s+FULL)\b", re.I)
_CONFLICT_NAMES = {"DONOTHING": "ignore", "OVERWRITE": "overwrite", "DOUPDATEIFNOTNULL": "do_update_if_not_null",
                   "DOUPDATEFULL": "overwrite"}
_AS_OF_EPOCH = re.compile(r"\b(?:FOR\s+SYSTEM_TIME\s+)?AS\s+OF\s+EPOCH\b", re.I)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)


def _rewrite_as_of_epoch(body: str) -> str:
    """``[FOR SYSTEM_TIME] AS OF EPOCH n`` -> ``FOR VERSION n`` padded to the same width (sqlglot
    parses that as a ``Version`` of kind VERSION; sql/bind/time_travel.py reads it as an epoch).
    Quoted text and comments are left alone; newlines stay where they were."""
    masked = _QUOTED.sub(lambda m: _blank(m.group(0)).replace(" ", "x"), body)
    out, at = [], 0
    for m in _AS_OF_EPOCH.finditer(masked):
        old = body[m.start():m.end()]
        newlines = old.count("\n")
        out += [body[at:m.start()], "FOR VERSION", " " * (len(old) - 11 - newlines), "\n" * newlines]
        at = m.end()
    return "".join(out) + body[at:] if out else body


def parse_script(text: str) -> list:
    """Every statement of ``text`` (empty statements skipped), as :class:`Statement`. Results
    are cached by text (statements are never mutated after parsing: each tree is frozen, and the
    binder keeps facts such as SQL texts on its nodes, sql/bind/frozen.py), so ``executemany``
    and repeated queries parse once."""
    if not isinstance(text, str):
        raise SqlSyntaxError(f"SQL text must be a str, got {type(text).__name__}")
    with stack_headroom():
        return list(_parse_cached(text))


@functools.lru_cache(maxsize=256)
def statement_starts(text: str) -> tuple:
    """``(line, column)`` where each non-empty statement of ``text`` starts: the cuts
    :func:`parse_script` makes, found without parsing (``;`` outside quotes and comments).
    Cached by text, as parses are."""
    starts, at = [], 0
    for start in [s for kind, s, _ in _scan(text) if kind == ";"] + [len(text)]:
        body = text[at:start]
        if body.strip() and not _only_comments(body):
            starts.append(_line_col(text, at + len(body) - len(body.lstrip())))
        at = start + 1
    return tuple(starts)


# --- stack headroom ------------------------------------------------------------------------------

_headroom_lock = threading.Lock()
_headroom_users = 0
_headroom_saved = _headroom_set = 0


@contextlib.contextmanager
def stack_headroom(frames: int = STACK_HEADROOM):
    """Run the block with at least ``frames`` Python frames of recursion room above the caller.

    sqlglot's parser and the binder recurse per nesting level; 200 levels need ~5,000 frames,
    more than CPython's default limit of 1,000. The recursion limit is interpreter-wide, so it
    is raised while any thread is inside such a block and put back when the last one leaves
    (unless someone else changed it meanwhile). Python-to-Python calls use no C stack
    (CPython >= 3.11), so the higher limit cannot overflow a thread's stack."""
    global _headroom_users, _headroom_saved, _headroom_set
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    with _headroom_lock:
        if _headroom_users == 0:
            _headroom_saved = _headroom_set = sys.getrecursionlimit()
        _headroom_users += 1
        if sys.getrecursionlimit() < depth + frames:
            _headroom_set = depth + frames
            sys.setrecursionlimit(_headroom_set)
    try:
        yield
    finally:
        with _headroom_lock:
            _headroom_users -= 1
            if _headroom_users == 0 and sys.getrecursionlimit() == _headroom_set != _headroom_saved:
                try:
                    sys.setrecursionlimit(_headroom_saved)
                except RecursionError:   # this thread is deeper than the old limit: keep it
                    pass


def check_nesting(text: str) -> None:
    """Raise ``SqlSyntaxError`` at the first parenthesis or bracket (outside quotes and
    comments) opening a level deeper than ``MAX_DEPTH``. Linear in the text, no recursion."""
    depth = 0
    for kind, start, _ in _scan(text, nesting=True):
        if kind == "(":
            depth += 1
            if depth > MAX_DEPTH:
                line, column = _line_col(text, start)
                raise SqlSyntaxError(f"the statement nests deeper than {MAX_DEPTH} levels of "
                                     "parentheses", line, column)
        elif kind == ")":
            depth = max(depth - 1, 0)


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> tuple:
    out = tuple(_parse(text))
    for stmt in out:   # never mutated from here on: facts about its nodes are kept (sql/bind/frozen.py)
        while stmt is not None:
            if stmt.ast is not None:
                freeze(stmt.ast)
            stmt = stmt.inner
    return out


def _parse(text: str) -> list:
    cuts, holes, dollars = [], [], []
    for kind, start, end in _scan(text):
        {";": cuts, "%s": holes, "$n": dollars}[kind].append((start, end))
    # number %s placeholders: "%s" -> "$1" (same width below 10 parameters). sqlglot's tokenizer
    # reads "$1,$2" as a dollar-quoted string's tag, so a placeholder directly followed by
    # anything but whitespace gets a space after it (positions after it shift by one).
    if holes or dollars:
        parts, at, k = [], 0, 0
        for start, end in sorted(holes + dollars):
            if text[start] == "%":
                k += 1
                parts += [text[at:start], f"${k}"]
            else:
                parts += [text[at:start], text[start:end]]
            if end < len(text) and not text[end].isspace():
                parts.append(" ")
            at = end
        parts.append(text[at:])
        text = "".join(parts)
        cuts = [(s, e) for kind, s, e in _scan(text) if kind == ";"]
    out, at = [], 0
    for start, end in cuts + [(len(text), len(text))]:
        body = text[at:start]
        if body.strip() and not _only_comments(body):
            out.append(_statement(text, at, start))
        at = end
    return out


def _only_comments(body: str) -> bool:
    stripped = re.sub(r"--[^\n]*|/\*.*?\*/", "", body, flags=re.S)
    return not stripped.strip()


def _statement(text: str, start: int, end: int) -> Statement:
    body = text[start:end]
    lead = len(body) - len(body.lstrip())
    line, column = _line_col(text, start + lead)
    stmt = Statement("ast", body.strip(), line, column)
    if _FLUSH.match(body):
        stmt.kind = "flush"
        return stmt
    m = _SET.match(body)
    if m:
        stmt.kind, stmt.name, stmt.value = "set", m.group(1).lower(), m.group(2)
        return stmt
    m = _SHOW.match(body)
    if m:
        stmt.kind, stmt.name = "show", " ".join(m.group(1).lower().split())
        return stmt
    m = _DESCRIBE.match(body)
    if m:
        parts = _ident_parts(m.group(1))
        stmt.kind, stmt.name, stmt.qualifiers = "describe", parts[-1], parts[:-1]
        return stmt
    if _SUB_WORDS.match(body):
        return _subscription_statement(stmt, body, line, column)
    if _COPY.match(body):
        return _copy_statement(stmt, text, start, end)
    m = _EXPLAIN.match(body)
    if m:
        stmt.kind = "explain"
        stmt.analyze = bool(m.group(2)) or any(
            words[0].upper() in ("ANALYZE", "ANALYSE") and (len(words) == 1 or words[1].lower() not in _EXPLAIN_OFF)
            for words in (option.split() for option in (m.group(1) or "").split(",")) if words)
        stmt.inner = _statement(text, start + m.end(), end)
        stmt.n_params = stmt.inner.n_params   # EXPLAIN binds the inner statement's parameters
        return stmt
    body = _rewrite_as_of_epoch(body)
    m = _SOURCE_DDL.match(body)
    if m:   # CREATE / DROP / ALTER SOURCE parse as CREATE / DROP / ALTER TABLE, marked (sql/source.py)
        stmt.options["source"] = True
        body = body[:m.start(1)] + "TABLE " + body[m.end(1):]
    m = _ALTER_MV.match(body)
    if m:   # ALTER MATERIALIZED VIEW: an ALTER VIEW marked (sql/alter.py)
        stmt.options["materialized"] = True
        body = body[:m.start(1)] + " " * (m.end(1) - m.start(1)) + body[m.end(1):]
    if _CREATE_TABLE.match(body):
        m = _APPEND_ONLY.search(body)
        if m:
            stmt.options["append_only"] = True
            body = body[:m.start()] + " " * (m.end() - m.start()) + body[m.end():]
        m = _ON_CONFLICT.search(body)
        if m:
            stmt.options["on_conflict"] = _CONFLICT_NAMES["".join(m.group(1).upper().split())]
            body = body[:m.start()] + " " * (m.end() - m.start()) + body[m.end():]
        body = _strip_watermark(stmt, text, start, end, body)
    padded = _blank(text[:start]) + body + _blank(text[end:])
    stmt.ast = _sqlglot(padded)
    stmt.n_params = max((int(p.this.name) for p in stmt.ast.find_all(exp.Parameter)
                         if p.this is not None and p.this.name.isdigit()), default=0)
    if any(True for _ in stmt.ast.find_all(exp.Placeholder)):
        raise UnsupportedError("only %s and $n placeholders are supported", line, column)
    return stmt


_WATERMARK = re.compile(rf",\s*WATERMARK\s+FOR\s+({_IDENT})\s+AS\s+", re.I | re.S)


def _strip_watermark(stmt: Statement, text: str, start: int, end: int, body: str) -> str:
    """A ``WATERMARK FOR col AS expr`` element of CREATE TABLE / SOURCE (RisingWave's event-time
    watermark; sqlglot's Postgres parser has no such element): blanked out of ``body`` (with
    its comma) and kept as ``options["watermark"] = (column name, sqlglot expression)``, the
    expression parsed at its place in the text (positions are the user's). A second one is a
    ``SqlSyntaxError``."""
    quoted = [(q.start(), q.end()) for q in _QUOTED.finditer(body)]
    found = [m for m in _WATERMARK.finditer(body) if not any(a <= m.start() < b for a, b in quoted)]
    if not found:
        return body
    if len(found) > 1:
        line, column = _line_col(text, start + found[1].start(1))
        raise SqlSyntaxError("a table has at most one WATERMARK", line, column)
    m = found[0]
    stop = _element_end(body, m.end())
    [column] = _ident_parts(m.group(1))
    expr_text = body[m.end():stop]
    if not expr_text.strip():
        line, col = _line_col(text, start + m.end())
        raise SqlSyntaxError("WATERMARK FOR ... AS needs an expression", line, col)
    at = m.start() + 1 + (len(body[m.start() + 1:]) - len(body[m.start() + 1:].lstrip()))   # the WATERMARK word
    head = "SELECT".ljust(m.end() - at)   # "WATERMARK FOR x AS " is wider than "SELECT"
    select = _blank(text[:start]) + _blank(body[:at]) + head + expr_text + _blank(body[stop:]) + _blank(text[end:])
    tree = _sqlglot(select)
    stmt.options["watermark"] = (column, tree.expressions[0])
    return body[:m.start()] + _blank(body[m.start():stop]) + body[stop:]


def _element_end(body: str, begin: int) -> int:
    """The offset of the ``,`` or ``)`` ending the list element that goes on at ``begin``
    (quotes, comments and nested parentheses skipped); ``len(body)`` when there is none."""
    quoted = {q.start(): q.end() for q in _QUOTED.finditer(body, begin)}
    depth, i, n = 0, begin, len(body)
    while i < n:
        if i in quoted:
            i = quoted[i]
            continue
        c = body[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                return i
            depth -= 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return n


def _subscription_statement(stmt: Statement, body: str, line: int, column: int) -> Statement:
    """The subscription statements (module docstring); a malformed one is ``SqlSyntaxError``."""
    m = _CREATE_SUB.match(body)
    if m:
        stmt.kind, stmt.name = "create_subscription", _ident_parts(m.group(2))[0]
        stmt.options = {"if_not_exists": bool(m.group(1)), "relation": _ident_parts(m.group(3)),
                        "with": m.group(4)}
        return stmt
    m = _DROP_SUB.match(body)
    if m:
        stmt.kind, stmt.name, stmt.options = "drop_subscription", _ident_parts(m.group(2))[0], {
            "if_exists": bool(m.group(1))}
        return stmt
    m = _DECLARE.match(body)
    if m:
        stmt.kind, stmt.name = "declare_cursor", _ident_parts(m.group(1))[0]
        stmt.options = {"subscription": _ident_parts(m.group(2))[0],
                        "full": (m.group(3) or "").upper() == "FULL", "since": m.group(4)}
        return stmt
    m = _FETCH.match(body)
    if m:
        stmt.kind, stmt.name, stmt.value = "fetch", _ident_parts(m.group(2))[0], (m.group(1) or "NEXT").upper()
        return stmt
    m = _CLOSE.match(body)
    if m:
        word = m.group(1)
        stmt.kind, stmt.name = "close", None if word.upper() == "ALL" else _ident_parts(word)[0]
        return stmt
    if _QUERY_CURSOR.match(body):
        raise UnsupportedError("DECLARE ... CURSOR FOR a query is not supported (only subscription cursors: "
                               "DECLARE c SUBSCRIPTION CURSOR FOR s)", line, column)
    if _FETCH_DIRECTION.match(body):
        raise UnsupportedError("FETCH directions other than NEXT, a count or ALL are not supported (subscription "
                               "cursors only move forward)", line, column)
    word = " ".join(body.split()[:2]).upper()
    raise SqlSyntaxError(f"syntax error in {word}: expected CREATE SUBSCRIPTION name FROM relation [WITH "
                         f"(retention = '...')], DROP SUBSCRIPTION [IF EXISTS] name, DECLARE name SUBSCRIPTION "
                         f"CURSOR FOR subscription [SINCE n | FULL], FETCH [NEXT | n | ALL] FROM name or "
                         f"CLOSE name | ALL", line, column)


_COPY = re.compile(r"\s*COPY\b", re.I)
_COPY_TARGET = re.compile(rf"\s*COPY\s+({_IDENT}(?:\s*\.\s*{_IDENT})?)\s*", re.I | re.S)
_COPY_DIRECTION = re.compile(r"(FROM|TO)\s+(?:'((?:[^']|'')*)'|(STDIN|STDOUT|PROGRAM)\b)\s*", re.I | re.S)
_COPY_WORD = re.compile(r"([A-Za-z_]+)\s*", re.S)
_COPY_VALUE = re.compile(r"(?:'((?:[^']|'')*)'|([A-Za-z0-9_.+-]+))\s*", re.S)
_COPY_SYNTAX = ("COPY table [(columns)] FROM 'path' [WITH (format csv|text|parquet|json, header true|false, "
                "delimiter ',', null '', quote '\"')] or COPY {table [(columns)] | (query)} TO 'path' [WITH (...)]")


def _copy_statement(stmt: Statement, text: str, start: int, end: int) -> Statement:
    """``COPY``: ``stmt.kind = "copy"``; ``stmt.options``: ``direction`` (``"from"``/``"to"``),
    ``table`` (name parts) and ``columns`` (names or None), or ``query`` (a parsed
    :class:`Statement`, positions kept), ``path`` and ``with`` (option name -> text value;
    a flag without a value is ``"true"``). ``SqlSyntaxError`` where it does not parse."""
    body = text[start:end]
    lead = len(body) - len(body.lstrip())
    at = lead

    def fail(message: str, offset: int):
        line, column = _line_col(text, start + min(offset, len(body)))
        raise SqlSyntaxError(f"syntax error in COPY: {message}; expected {_COPY_SYNTAX}", line, column)

    opts: dict = {"table": None, "columns": None, "query": None, "with": {}}
    m = re.compile(r"\s*COPY\s*", re.I).match(body, at)
    at = m.end()
    if body.startswith("(", at):
        close = _matching_paren(body, at)
        if close is None:
            fail("unbalanced parentheses around the query", at)
        inner = _statement(text, start + at + 1, start + close)
        if inner.kind != "ast":
            fail("COPY (query) takes a SELECT", at + 1)
        opts["query"] = inner
        stmt.n_params = inner.n_params
        at = close + 1
        while at < len(body) and body[at].isspace():
            at += 1
    else:
        m = _COPY_TARGET.match(body, lead)
        if m is None:
            fail("a table name or a parenthesized query expected", at)
        opts["table"] = _ident_parts(m.group(1))
        at = m.end()
        if body.startswith("(", at):
            close = _matching_paren(body, at)
            if close is None:
                fail("unbalanced parentheses around the column list", at)
            names = [p.strip() for p in body[at + 1:close].split(",")]
            if not all(_IDENT_PART.fullmatch(n) for n in names):
                fail("a column list holds names", at + 1)
            opts["columns"] = [_ident_parts(n)[0] for n in names]
            at = close + 1
            while at < len(body) and body[at].isspace():
                at += 1
    m = _COPY_DIRECTION.match(body, at)
    if m is None:
        fail("FROM 'path' or TO 'path' expected", at)
    opts["direction"] = m.group(1).lower()
    if m.group(3):
        line, column = _line_col(text, start + m.start(3))
        raise UnsupportedError(f"COPY {m.group(1).upper()} {m.group(3).upper()} is not supported: COPY reads and "
                               f"writes files ('path'); the shell's \\copy takes the same form", line, column)
    if opts["query"] is not None and opts["direction"] == "from":
        fail("COPY (query) FROM: a query can only be copied TO a file", at)
    opts["path"] = m.group(2).replace("''", "'")
    at = m.end()
    opts["with"] = _copy_options(body, at, fail)
    stmt.kind, stmt.options = "copy", opts
    return stmt


def _copy_options(body: str, at: int, fail) -> dict:
    """The options after the path: ``[WITH] (name [value], ...)`` or Postgres' older form
    ``[WITH] [CSV] [HEADER] [DELIMITER [AS] 'c'] [NULL [AS] 's'] [QUOTE [AS] 'q']``."""
    out: dict = {}
    m = re.compile(r"WITH\b\s*", re.I).match(body, at)
    if m:
        at = m.end()
    rest = body[at:].rstrip()
    if not rest:
        return out
    parenthesized = rest.startswith("(")
    if parenthesized:
        close = _matching_paren(body, at)
        if close is None or body[close + 1:].strip():
            fail("the options end with ')'", at)
        end, at = close, at + 1
    else:
        end = at + len(rest)
    while True:
        while at < end and (body[at].isspace() or (parenthesized and body[at] == ",")):
            at += 1
        if at >= end:
            return out
        m = _COPY_WORD.match(body, at)
        if m is None or m.end() > end + 1:
            fail("an option name expected", at)
        name, at = m.group(1).lower(), m.end()
        if not parenthesized and name in ("csv", "binary"):
            out["format"] = name
            continue
        m = re.compile(r"AS\s+", re.I).match(body, at)
        if m and not parenthesized:
            at = m.end()
        m = _COPY_VALUE.match(body, at) if at < end and body[at] != "," else None
        if m is None or (not parenthesized and name == "header" and m.group(1) is None
                         and m.group(2).lower() not in ("true", "false", "on", "off", "0", "1", "match")):
            out[name] = "true"
            continue
        out[name] = m.group(1).replace("''", "'") if m.group(1) is not None else m.group(2)
        at = m.end()


def _matching_paren(body: str, at: int) -> int | None:
    """The offset of the ``)`` closing the ``(`` at ``at`` (quotes and comments skipped)."""
    depth = 0
    for kind, pos, _ in _scan(body[at:], nesting=True):
        if kind == "(":
            depth += 1
        elif kind == ")":
            depth -= 1
            if depth == 0:
                return at + pos
    return None


def _sqlglot(text: str):
    check_nesting(text)
    try:
        trees = sqlglot.parse(text, read=Hummock)
    except ParseError as exc:
        err = exc.errors[0] if exc.errors else {}
        raise SqlSyntaxError(_syntax_message(err, str(exc)), err.get("line"), _start_col(err)) from None
    except TokenError as exc:
        raise SqlSyntaxError(f"syntax error: {exc}") from None
    except RecursionError:   # nesting without parentheses (NOT NOT ..., CASE in CASE ...)
        raise SqlSyntaxError("the statement nests too deeply") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise SqlSyntaxError("expected one statement")
    tree = _rewrite(trees[0])
    if isinstance(tree, exp.Command):
        word = str(tree.this).upper()
        raise UnsupportedError(f"statement {word} {str(tree.expression or '').strip()[:40]!s} is not supported")
    return tree


_SQLGLOT_CLASS = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")
_AT_END = re.compile(r"<Token token_type: TokenType\.SENTINEL[^>]*>")
_TOKEN = re.compile(r"<Token token_type: [^,]*, text: ([^,]*),[^>]*>")


def _syntax_message(err: dict, fallback: str) -> str:
    """A parse failure in SQL's words: Postgres' ``syntax error at or near "x"`` / ``at end of
    input``, never sqlglot's class names ("Required keyword: 'this' missing for <class
    'sqlglot.expressions.query.Where'>") or token dumps; what was expected is kept when sqlglot
    says it in words ("Expected table name")."""
    msg = err.get("description") or fallback.split("\n")[0]
    near = (err.get("highlight") or "").strip()
    at_end = not (err.get("end_context") or "").strip()
    where = "at end of input" if at_end and (_AT_END.search(msg) or _SQLGLOT_CLASS.search(msg)) else \
        f'at or near "{near}"' if near else "at end of input"
    m = _SQLGLOT_CLASS.search(msg)
    if m is not None:   # what is missing, said by the keyword the user wrote
        clause = {"Where": "WHERE needs a condition", "Having": "HAVING needs a condition",
                  "If": "CASE WHEN needs a condition and a THEN result"}.get(m.group(2))
        return f"syntax error {where}: {clause or (f'{near.upper()} needs an operand' if near else 'incomplete')}"
    msg = _AT_END.sub("the end of the input", msg)
    msg = _TOKEN.sub(r"'\1'", msg)
    if msg.startswith("Invalid expression / Unexpected token"):
        return f"syntax error {where}"
    if msg.startswith("Expected") or msg.startswith("Expecting"):
        return f"syntax error {where}: {msg[0].lower()}{msg[1:]}"
    return f"syntax error {where}: {msg}" if msg else f"syntax error {where}"


def _rewrite(tree):
    """Statements Postgres has that run as simpler ones (positions kept: the user's nodes are
    moved, not re-parsed): ``TRUNCATE [TABLE] t`` is ``DELETE FROM t`` (one table, no
    CASCADE / RESTART IDENTITY), ``UPDATE t SET (a, b) = (x, y)`` is ``SET a = x, b = y``
    (a sub-SELECT as the source is refused by name)."""
    if isinstance(tree, exp.TruncateTable):
        tables = tree.expressions
        if len(tables) != 1 or tree.args.get("option") or tree.args.get("identity") or tree.args.get("is_database"):
            what = "several tables" if len(tables) != 1 else "CASCADE / RESTART IDENTITY"
            raise UnsupportedError(f"TRUNCATE of {what} is not supported (TRUNCATE one table)",
                                   *_position(tables[0] if tables else tree))
        return exp.Delete(this=tables[0])
    if isinstance(tree, exp.Update):
        out = []
        for assign in tree.expressions:
            if isinstance(assign, exp.EQ) and isinstance(assign.this, (exp.Tuple, exp.Paren)):
                cols = assign.this.expressions if isinstance(assign.this, exp.Tuple) else [assign.this.this]
                source = assign.expression
                if isinstance(source, exp.Subquery):
                    raise UnsupportedError("UPDATE ... SET (columns) = (SELECT ...) is not supported (set each column "
                                           "to a scalar subquery)", *_position(source))
                values = source.expressions if isinstance(source, exp.Tuple) else \
                    [source.this] if isinstance(source, exp.Paren) else [source]
                if len(values) != len(cols):
                    raise SqlSyntaxError("number of columns does not match number of values", *_position(assign))
                out.extend(exp.EQ(this=c, expression=v) for c, v in zip(cols, values))
            else:
                out.append(assign)
        tree.set("expressions", out)
    return tree


def _position(node) -> tuple:
    from sql.errors import start_of
    return start_of(node)


def _start_col(err: dict):
    col = err.get("col")
    highlight = err.get("highlight") or ""
    if col is None:
        return None
    return max(1, col - max(len(highlight) - 1, 0))
