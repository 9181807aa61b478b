"""Interval text as Postgres reads and writes it: :func:`parse_interval` (``interval_in``) and
:func:`format_interval` (``interval_out`` with ``IntervalStyle = postgres``).

Reading: every field of the text counts -- ``'1 day 01:00:00'``, fractions cascading down as
Postgres' DecodeInterval does (``'1.5 days'`` is 1 day 12:00, ``'1.5 years'`` 18 months,
``'1.1 months'`` 1 month 3 days), Postgres' unit spellings and abbreviations (``mon``, ``yr``,
``hr``, ``min``, ``ms``, ``us``...), signed ``h:m[:s]`` parts, ``ago``, SQL's ``'Y-M'``, ISO
8601 ``'P1Y2M3DT4H'``, and the field restrictions of ``INTERVAL '...' DAY`` / ``HOUR TO
MINUTE``, each field at most once. Amounts are exact (``fractions.Fraction``) and round as
Postgres': a fraction of a unit to microseconds half toward zero, of a year to months and of an
``h:m:s.f`` part half to even. Text that is not an interval raises ValueError; fields that do
not fit (months and days int32, microseconds int64) :class:`IntervalOutOfRange`. Infinite
intervals (PostgreSQL 17) are not supported. tests/test_sql_pg_types_oracle.py checks this
module against a real PostgreSQL.

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
_ISO = re.compile(r"p(?:(?P<year>[-+]?[\d.]+)y)?(?:(?P<month>[-+]?[\d.]+)m)?(?:(?P<week>[-+]?[\d.]+)w)?"
                  r"(?:(?P<day>[-+]?[\d.]+)d)?(?:t(?:(?P<hour>[-+]?[\d.]+)h)?(?:(?P<minute>[-+]?[\d.]+)m)?"
                  r"(?:(?P<second>[-+]?[\d.]+)s)?)?")
_TIME_MASKS = ("hour", "minute", "second", "millisecond", "microsecond")   # what 'h:m:s' sets
_ISO_ALT = re.compile(r"p(\d+)-(\d+)(?:-(\d+))?(?:t(\d+):(\d+):(\d+(?:\.\d*)?))?")
_MAX_DIGITS = 30   # no valid field needs more; longer numbers are out of range before any arithmetic


class _Fields:
    """An interval being read: exact months/days/microseconds (Fractions until the end)."""

    def __init__(self):
        self.months = self.days = self.usecs = 0
        self.time_given = False   # after an 'h:m:s' part, later fractions add no microseconds

    def add(self, amount: fractions.Fraction, unit: str) -> None:
        """``amount`` of ``unit``, a fraction cascading down as Postgres' DecodeInterval does: a
        fractional year becomes whole months (half to even), a fractional month or week whole
        days then microseconds, a fractional day microseconds (half toward zero, as
        AdjustFractMicroseconds). Postgres reads the fields right to left and an ``h:m:s`` part
        *sets* the microseconds, so a fraction written after one cascades nothing into time
        (``'00:00 0.11 mon'`` is ``3 days``): ``time_given`` reproduces that."""
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
            if not self.time_given:
                self.usecs += _round_half_to_zero(days * 86_400_000_000)
        else:
            self.usecs += whole * _US[unit] + _round_half_to_zero(frac * _US[unit])

    def interval(self, negate: bool, text: str) -> Interval:
        sign = -1 if negate else 1
        try:
            return Interval(sign * self.months, sign * self.days, sign * self.usecs)
        except (ValueError, OverflowError):
            raise IntervalOutOfRange(f"interval field value out of range: {text!r}") from None


class IntervalOutOfRange(ValueError):
    """An interval text whose fields do not fit (months/days int32, microseconds int64)."""


def _round_half_to_zero(x: fractions.Fraction) -> int:
    """Postgres' AdjustFractMicroseconds: nearest, a tie toward zero."""
    q = int(x)
    r = x - q
    return q + 1 if r > fractions.Fraction(1, 2) else (q - 1 if r < -fractions.Fraction(1, 2) else q)


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
        alt = _ISO_ALT.fullmatch(s)
        if alt is not None:   # ISO 8601's alternative format: P[Y-M[-D]][Th:m:s]
            y, mo, d, h, mi, sec = alt.groups()
            acc.months = int(_number(y, text)) * 12 + int(_number(mo, text))
            acc.days = int(_number(d or "0", text))
            if h is not None:
                acc.usecs = _round_even(_number(h, text) * 3_600_000_000 + _number(mi, text) * 60_000_000
                                        + _number(sec, text) * 1_000_000)
            return acc.interval(False, text)
        m = _ISO.fullmatch(s)
        if m is None or s == "p":
            raise bad
        for unit, amount in m.groupdict().items():
            if amount is not None:
                if amount.count(".") > 1 or amount.lstrip("+-") in ("", "."):
                    raise bad
                acc.add(_number(amount, text), unit)
    else:
        s = re.sub(r"([+-])\s+(?=[\d.])", r"\1", s.replace(",", " "))   # '1 day,2 hours'; '- 1 day'
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
        i, bare, seen = 0, False, set()

        def claim(*masks):   # Postgres' fmask: each field may be given once ('1 day 2 days' is an error)
            if seen.intersection(masks):
                raise bad
            seen.update(masks)
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
                claim(*_TIME_MASKS)
                _add_time(acc, value, fields, text)
                acc.time_given = True
                i += 1
                continue
            if kind == "ym":
                claim("year", "month")
                sign = -1 if value.startswith("-") else 1
                years, months = value.lstrip("+-").split("-")
                if int(months) > 11:
                    raise IntervalOutOfRange(f"interval field value out of range: {text!r}")
                acc.months += sign * int(_number(years, text) * 12 + _number(months, text))
                i += 1
                continue
            amount = _number(value, text)
            if nxt[0] == "word" and nxt[1] in _UNIT:
                unit = _UNIT[nxt[1]]
                claim(*(_TIME_MASKS[2:] if unit == "second" and amount != int(amount) else (unit,)))
                acc.add(amount, unit)
                i += 2
                continue
            if nxt[0] == "time":   # SQL standard 'D H:M:S': the number is days
                claim("day")
                acc.add(amount, "day")
                i += 1
                continue
            after = tokens[i + 2] if i + 2 < len(tokens) else (None, None)
            if nxt[0] == "num" and after[0] == "word" and _UNIT.get(after[1]) == "hour":
                claim("day")   # Postgres reads right to left: a number before 'N hours' is days
                acc.add(amount, "day")
                i += 1
                continue
            if bare or nxt[0] is not None:   # a bare number comes last ('1 ago' is an error too)
                raise bad
            bare = True
            claim(last)
            acc.add(amount, last)
            i += 1
        if not seen:   # 'ago' alone
            raise bad
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
