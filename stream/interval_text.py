"""Interval text as Postgres reads and writes it: :func:`parse_interval` (``interval_in``) and
:func:`format_interval` (``interval_out`` with ``IntervalStyle = postgres``).

Reading: every field of the text counts -- ``'1 day 01:00:00'``, fractions cascading down as
Postgres' DecodeInterval does (``'1.5 days'`` is 1 day 12:00, ``'1.5 years'`` 18 months,
``'1.1 months'`` 1 month 3 days), Postgres' unit spellings and abbreviations (``mon``, ``yr``,
``hr``, ``min``, ``ms``, ``us``...), signed ``h:m[:s]`` parts, ``ago``, SQL's ``'Y-M'``, ISO
8601 ``'P1Y2M3DT4H'``, and the field restrictions of ``INTERVAL '...' DAY`` / ``HOUR TO
MINUTE``. Amounts are exact (``fractions.Fraction``); microseconds round half to even. Text
that is not an interval raises ValueError; fields that do not fit (months and days int32,
microseconds int64) :class:`IntervalOutOfRange`.

Writing: ``1 year 2 mons 3 days 04:05:06.5``, ``-1 days +02:03:00``, ``00:00:00`` -- the text
Postgres prints and reads back to the same fields.

Callers: :mod:`sql.types` (literals and text typed INTERVAL), :mod:`stream.expr_cast` (``CAST``
between VARCHAR and INTERVAL at run time).
"""

from __future__ import annotations

import fractions
import re

from relational.types import Interval

INTERVAL_FIELDS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")   # INTERVAL '1' DAY, HOUR TO MINUTE


_US = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000, "millisecond": 1000, "microsecond": 1}
_YEARS = {"year": 1, "decade": 10, "century": 100, "millennium": 1000}
_UNIT_NAMES = {   # Postgres' spellings (datetime.c deltatktbl), lower case
    "year": ("y", "yr", "yrs", "year", "years"), "decade": ("dec", "decs", "decade", "decades"),
    "century": ("c", "cent", "century", "centuries"), "millennium": ("mil", "mils", "millennium", "millennia"),
    "month": ("mon", "mons", "month", "months"), "week": ("w", "week", "weeks"), "day": ("d", "day", "days"),
    "hour": ("h", "hr", "hrs", "hour", "hours"), "minute": ("m", "min", "mins", "minute", "minutes"),
    "second": ("s", "sec", "secs", "second", "seconds"),
    "millisecond": ("ms", "msec", "msecs", "msecond", "mseconds", "millisecon", "millisecond", "milliseconds"),
    "microsecond": ("us", "usec", "usecs", "usecond", "useconds", "microsecon", "microsecond", "microseconds"),
}
_UNIT = {spelling: unit for unit, spellings in _UNIT_NAMES.items() for spelling in spellings}
_TOKEN = re.compile(r"\s*(?:(?P<time>[+-]?\d+(?::\d+){1,2}(?:\.\d*)?|[+-]?\d+:\d+\.\d*)"
                    r"|(?P<ym>[+-]?\d+-\d+)(?![\d:])"
                    r"|(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
                    r"|(?P<word>[a-z]+)|(?P<at>@))")
_ISO = re.compile(r"p(?:(?P<year>[\d.]+)y)?(?:(?P<month>[\d.]+)m)?(?:(?P<week>[\d.]+)w)?(?:(?P<day>[\d.]+)d)?"
                  r"(?:t(?:(?P<hour>[\d.]+)h)?(?:(?P<minute>[\d.]+)m)?(?:(?P<second>[\d.]+)s)?)?")
_MAX_DIGITS = 30   # no valid field needs more; longer numbers are out of range before any arithmetic


class _Fields:
    """An interval being read: exact months/days/microseconds (Fractions until the end)."""

    def __init__(self):
        self.months = self.days = self.usecs = 0

    def add(self, amount: fractions.Fraction, unit: str) -> None:
        """``amount`` of ``unit``, a fraction cascading down as Postgres' DecodeInterval does: a
        fractional year becomes whole months (half to even), a fractional month or week whole
        days then microseconds, a fractional day microseconds."""
        whole = int(amount)   # toward zero
        frac = amount - whole
        if unit in _YEARS:
            self.months += whole * 12 * _YEARS[unit] + _round_even(frac * 12 * _YEARS[unit])
        elif unit in ("month", "week", "day"):
            per = {"month": 30, "week": 7, "day": 1}[unit]
            if unit == "month":
                self.months += whole
            else:
                self.days += whole * per
            days = frac * per if unit != "day" else frac
            if unit != "day":
                self.days += int(days)
                days -= int(days)
            self.usecs += _round_even(days * 86_400_000_000)
        else:
            self.usecs += _round_even(amount * _US[unit])

    def interval(self, negate: bool, text: str) -> Interval:
        sign = -1 if negate else 1
        try:
            return Interval(sign * self.months, sign * self.days, sign * self.usecs)
        except (ValueError, OverflowError):
            raise IntervalOutOfRange(f"interval field value out of range: {text!r}") from None


class IntervalOutOfRange(ValueError):
    """An interval text whose fields do not fit (months/days int32, microseconds int64)."""


def _round_even(x: fractions.Fraction) -> int:
    return round(x)   # Fraction.__round__ rounds half to even, as C's rint


def _number(text: str, whole: str) -> fractions.Fraction:
    if len(text) > _MAX_DIGITS:
        raise IntervalOutOfRange(f"interval field value out of range: {whole!r}")
    return fractions.Fraction(text)


def parse_interval(text: str, fields: tuple | None = None) -> Interval:
    """Postgres' reading of an interval string: ``'1 day 01:00:00'``, ``'1.5 days'``, ``'2 mons'``,
    ``'-1 day +02:03'``, ``'1 year 2 months 3 days ago'``, ``'1-2'`` (years-months), ``'P1Y2M3DT4H'``
    (ISO 8601). Units take Postgres' spellings and abbreviations (``mon``, ``yr``, ``hr``, ``min``,
    ``ms``, ``us``...); a bare number is seconds. ``fields`` is a field restriction
    (``INTERVAL '1' DAY`` -> ``("DAY",)``; ``HOUR TO MINUTE`` -> ``("HOUR", "MINUTE")``): a bare
    number counts in the last field, ``'m:s'`` is read as minutes:seconds under ``MINUTE TO
    SECOND``, and what lies below the last field is dropped (``'1 day 02:03:04' HOUR TO MINUTE``
    is ``1 day 02:03``). ValueError (IntervalOutOfRange when it does not fit) otherwise."""
    s = text.strip().lower()
    bad = ValueError(f"invalid input syntax for type interval: {text!r}")
    last = fields[-1].lower() if fields else "second"
    acc = _Fields()
    negate = False
    if s.startswith("p"):
        m = _ISO.fullmatch(s)
        if m is None or s in ("p", "pt") or s.endswith("t"):
            raise bad
        for unit, amount in m.groupdict().items():
            if amount is not None:
                if amount.count(".") > 1 or amount == ".":
                    raise bad
                acc.add(_number(amount, text), unit)
    else:
        tokens, pos = [], 0
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if m is None or m.end() == pos:
                if s[pos:].strip() == "":
                    break
                raise bad
            pos = m.end()
            kind = m.lastgroup
            if kind != "at":
                tokens.append((kind, m.group(kind)))
        if not tokens:
            raise bad
        i, bare = 0, False
        while i < len(tokens):
            kind, value = tokens[i]
            nxt = tokens[i + 1] if i + 1 < len(tokens) else (None, None)
            if kind == "word":
                if value == "ago" and i == len(tokens) - 1:
                    negate = True
                    i += 1
                    continue
                raise bad
            if kind == "time":
                _add_time(acc, value, fields, text)
                i += 1
                continue
            if kind == "ym":
                sign = -1 if value.startswith("-") else 1
                years, months = value.lstrip("+-").split("-")
                acc.months += sign * int(_number(years, text) * 12 + _number(months, text))
                i += 1
                continue
            amount = _number(value, text)
            if nxt[0] == "word" and nxt[1] in _UNIT:
                acc.add(amount, _UNIT[nxt[1]])
                i += 2
                continue
            if nxt[0] == "time":   # SQL standard 'D H:M:S': the number is days
                acc.add(amount, "day")
                i += 1
                continue
            if bare or (nxt[0] is not None and not (nxt[0] == "word" and nxt[1] == "ago")):
                raise bad
            bare = True
            acc.add(amount, last)
            i += 1
    if fields:
        _restrict(acc, last)
    return acc.interval(negate, text)


def _add_time(acc: _Fields, value: str, fields, text: str) -> None:
    """``[+-]h:m[:s[.f]]`` (or ``m:s[.f]`` under ``MINUTE TO SECOND`` or with a fraction)."""
    sign = -1 if value.startswith("-") else 1
    parts = value.lstrip("+-").split(":")
    minutes_first = len(parts) == 2 and ("." in parts[1] or (fields and fields[0] == "MINUTE"))
    if minutes_first:
        parts = ["0"] + parts
    h, m = _number(parts[0], text), _number(parts[1], text)
    sec = _number(parts[2], text) if len(parts) > 2 and parts[2] not in ("", ".") else 0
    if m >= 60 or sec >= 60:
        raise IntervalOutOfRange(f"interval field value out of range: {text!r}")
    acc.usecs += sign * _round_even(h * 3_600_000_000 + m * 60_000_000 + sec * 1_000_000)


def _restrict(acc: _Fields, last: str) -> None:
    """Drop what lies below the field restriction's last field (toward zero, as Postgres)."""
    if last == "year":
        acc.months, acc.days, acc.usecs = int(acc.months / 12) * 12, 0, 0
    elif last == "month":
        acc.days, acc.usecs = 0, 0
    elif last == "day":
        acc.usecs = 0
    elif last in ("hour", "minute"):
        unit = _US[last]
        acc.usecs = int(fractions.Fraction(acc.usecs, unit)) * unit


def format_interval(iv: Interval) -> str:
    """Postgres' output of ``iv`` (``interval_out``, ``IntervalStyle = postgres``): ``str(iv)``,
    :meth:`relational.types.Interval.__str__`."""
    return str(iv)
