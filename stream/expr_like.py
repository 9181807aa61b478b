"""``arg [NOT] LIKE/ILIKE pattern [ESCAPE e]``: :class:`Like`, and :func:`like_regex`, the
translation of a LIKE pattern to an anchored RE2 regular expression.

The pattern is a constant (a NULL pattern or escape gives NULL). With the default escape
character (a backslash, as in Postgres) Arrow's own ``match_like`` runs (it has fast paths);
any other escape character goes through :func:`like_regex` and ``match_substring_regex``.
``%`` matches any run of characters (newlines included), ``_`` exactly one.

Callers: the facade :mod:`stream.expr` (the SQL binder imports from there).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType
from stream.errors import ExpressionError
from stream.expr_base import Expr
from stream.expr_errors import wrap as _wrap

_REGEX_META = set("\\.^$|?*+()[]{}")


def like_regex(pattern: str, escape: str | None = "\\") -> str:
    """An anchored RE2 regex for a LIKE ``pattern`` (``%`` any run, ``_`` one character,
    ``escape`` makes the next character literal; None or '' means no escape character)."""
    out, i = ["(?s)^"], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 == len(pattern):
                raise ExpressionError("LIKE pattern must not end with escape character")
            ch = pattern[i + 1]
            out.append("\\" + ch if ch in _REGEX_META else ch)
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else ("\\" + ch if ch in _REGEX_META else ch))
        i += 1
    out.append("$")
    return "".join(out)


class Like(Expr):
    """``arg [NOT] LIKE pattern [ESCAPE e]`` (``ignore_case``: ILIKE); the pattern is a
    constant (None: NULL). The default escape character is a backslash, as in Postgres."""

    def __init__(self, arg: Expr, pattern: str | None, negated: bool = False, ignore_case: bool = False,
                 escape: str | None = "\\"):
        if arg.data_type != DataType.VARCHAR:
            raise ExpressionError(f"LIKE needs a VARCHAR operand, got {arg.data_type.sql_name()}", self)
        if escape is not None and len(escape) > 1:
            raise ExpressionError("invalid escape string: it must be empty or one character")
        self.arg, self.pattern, self.negated, self.ignore_case = arg, pattern, negated, ignore_case
        self.escape = escape
        self.data_type = DataType.BOOLEAN
        self._regex = None if pattern is None else like_regex(pattern, escape)

    def children(self) -> tuple:
        return (self.arg,)

    def evaluate(self, columns):
        value = self.arg.evaluate(columns)
        if self.pattern is None or self.escape is None:
            return pa.scalar(None, pa.bool_())
        if self.escape == "\\":   # Arrow's LIKE (its escape is a backslash) has fast paths
            out = _wrap(lambda: pc.match_like(value, self.pattern, ignore_case=self.ignore_case), self)
        else:
            out = _wrap(lambda: pc.match_substring_regex(value, self._regex, ignore_case=self.ignore_case), self)
        return pc.invert(out) if self.negated else out

    def __str__(self) -> str:
        op = ("NOT " if self.negated else "") + ("ILIKE" if self.ignore_case else "LIKE")
        esc = "" if self.escape == "\\" else f" ESCAPE {self.escape!r}"
        return f"({self.arg} {op} {self.pattern!r}{esc})"
