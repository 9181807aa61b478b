"""The sqlglot dialect Hummock parses with: Postgres, except that an ``INTERVAL '...'`` literal
keeps its string whole.

Job: sqlglot's Postgres parser rewrites ``INTERVAL '1 day 01:00:00'`` into ``INTERVAL '1' DAY``
(it keeps the first ``number unit`` pair of the string and drops the rest) and ``'P1D'`` into
``'1' DAY``, so the binder could never see the time part, a second unit or ``ago``. Here an
interval string is left as written; the only unit taken after it is a Postgres field
restriction (``YEAR``, ``MONTH``, ``DAY``, ``HOUR``, ``MINUTE``, ``SECOND``, or ``f1 TO f2``).
:func:`stream.interval_text.parse_interval` reads the text as Postgres' ``interval_in`` does.

It also keeps ``to_char``, ``to_timestamp``, ``date_part``, ``date_trunc``, ``log10``,
``generate_series``, ``now`` and ``div`` calls
as written (``Anonymous``): sqlglot's Postgres parser turns them into other functions whose
arguments lose Postgres' meaning (a ``to_char`` format string becomes a strftime one).

Invariant: every other construct parses exactly as ``read="postgres"`` (this class overrides
one parser method and eight function names and nothing else).

Callers: :mod:`sql.parse` (``sqlglot.parse(text, read=Hummock)``).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.postgres import Postgres

from sql.types import INTERVAL_FIELDS   # the fields an interval literal may be restricted to


def _as_written(name: str):
    """A parser builder keeping ``name(args)`` as the user wrote it (an ``Anonymous`` call)."""
    return lambda args: exp.Anonymous(this=name, expressions=args)


class Hummock(Postgres):
    class Parser(Postgres.Parser):
        # sqlglot rewrites these into other dialects' functions, losing what Postgres means:
        # to_char's and to_timestamp's format strings become strftime ('Month' and 'FM' are
        # lost), date_part (double precision) becomes EXTRACT (numeric), log10(x) becomes
        # log(10, x) (numeric only), now() becomes CURRENT_TIMESTAMP (an error must say now()),
        # div(a, b) becomes CAST(a // b AS DECIMAL) (Postgres truncates the numeric quotient),
        # generate_series' interval step is rewritten ('-30 minutes'
        # becomes '-30' MINUTES). Kept as written, the binder maps them (stream/expr_pg.py,
        # sql/bind/select.py's generate_series).
        FUNCTIONS = {**Postgres.Parser.FUNCTIONS,
                     **{name.upper(): _as_written(name) for name in ("to_char", "to_timestamp", "date_part",
                                                                     "date_trunc", "log10",
                                                                     "generate_series", "now", "div")}}
        FUNCTION_PARSERS = {k: v for k, v in Postgres.Parser.FUNCTION_PARSERS.items() if k != "DATE_PART"}

        def _parse_interval_span(self, this, parse_function_unit: bool = True):
            if this is None or not this.is_string:   # INTERVAL 5 DAY and the like: sqlglot's way
                return super()._parse_interval_span(this, parse_function_unit)
            unit = self._field()
            if unit is not None and self._match_text_seq("TO"):
                last = self._field()
                if last is None:
                    self.raise_error("expected an interval field after TO")
                unit = self.expression(exp.IntervalSpan(this=unit, expression=last))
            return self.expression(exp.Interval(this=this, unit=unit))

        def _field(self):
            """The next token as an interval field (``DAY``...), consumed; None when it is not one
            (``INTERVAL '1 day' x`` keeps ``x`` an alias)."""
            if self._curr is None or self._curr.text.upper() not in INTERVAL_FIELDS:
                return None
            return self._parse_var(any_token=True, upper=True)
