"""Postgres scalar functions computed row by row: math (``trunc``, ``ln``, ``log``, ``log10``,
``exp``, ``sign``, ``cbrt``, trigonometry, ``degrees``/``radians``, ``pi``), ``greatest`` /
``least``, text (``split_part``, ``lpad``/``rpad``, ``initcap``, ``translate``, ``md5``,
``left``/``right``, ``reverse``, ``repeat``, ``strpos``, ``starts_with``, ``ascii``, ``chr``,
``octet_length``, ``regexp_replace``, ``regexp_count``, ``format``, ``concat_ws``), ``div``, and
date/time
(``date_trunc``, ``extract``/``date_part``, ``to_char``, ``to_timestamp``, ``make_date``,
``age``).

Job: the entries of ``FUNCS`` that :mod:`stream.expr_funcs` merges into its ``_FUNCS`` table
(same contract: ``name: (implementation, result type from the argument types, (min, max))``).
An implementation evaluates its arguments, turns them into Python values
(:func:`relational.arrow.to_pylist`; a scalar broadcasts), applies a Python function per row
and builds the Arrow result (:func:`relational.arrow.to_arrow`). Functions are strict (a NULL
argument makes the row NULL) except ``greatest``/``least`` (NULLs are skipped) and ``format``
(a NULL argument is empty text).

Invariants: results follow PostgreSQL 16 (UTC is the only time zone); a row Postgres rejects
(``ln(0)``, ``make_date(2024, 2, 30)``, ``split_part(s, ',', 0)``) is a data error
(:func:`stream.expr_errors.data_error`: raised in batch and DML, NULL and counted in an MV).
Arguments that must be constant (a ``date_trunc`` unit, a ``to_char`` format, a regular
expression) are checked when the node is built (``ExpressionError``). Regular expressions are
Postgres' advanced syntax read by Python's ``re``: the common subset (classes, anchors,
quantifiers, groups, ``\\d``/``\\s``/``\\w``) means the same; ``[[:alpha:]]``-style classes
are translated.

Callers: :mod:`stream.expr_funcs` (merges ``FUNCS``); the SQL binder (:mod:`sql.bind.expr`).
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import hashlib
import math
import random
import re

import pyarrow as pa

from relational.arrow import to_arrow, to_pylist
from relational.types import DataType, Interval, TypeKind
from stream.errors import ExpressionError
from stream.expr_base import Lit
from stream.expr_errors import data_error
from stream.expr_to_char import RowError as ToCharRowError
from stream.expr_to_char import datetime_char, interval_char, number_formatter

_INTS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_NUMS = _INTS + _FLOATS + (TypeKind.DECIMAL,)
_TS = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
_V = DataType.VARCHAR
_UTC = datetime.timezone.utc
_DEC = decimal.Context(prec=40)


class RowError(ArithmeticError):
    """Postgres rejects this row's value (the message is Postgres' wording)."""


def _values(arg, columns):
    value = arg.evaluate(columns)
    if isinstance(value, pa.Scalar):
        return to_pylist(pa.array([value.as_py()], type=value.type), arg.data_type), True
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    return to_pylist(value, arg.data_type), False


def rowwise(fn, typer, strict: bool = True):
    """An implementation applying ``fn`` to each row's Python values (module docstring)."""
    def run(args, columns):
        out_type = typer([a.data_type for a in args])
        cols = [_values(a, columns) for a in args]
        scalar = all(sc for _, sc in cols)
        n = 1 if scalar else next(len(v) for v, sc in cols if not sc)
        lists = [v * n if sc and n != 1 else v for v, sc in cols]
        out, message, failed = [], None, 0
        for row in zip(*lists) if lists else [()] * n:
            if strict and None in row:
                out.append(None)
                continue
            try:
                out.append(fn(*row))
            except (RowError, OverflowError, ValueError, decimal.InvalidOperation) as exc:
                out.append(None)
                failed += 1
                message = message or (str(exc) if isinstance(exc, RowError) else "value out of range")
        if failed:
            name = getattr(fn, "__name__", "").lstrip("_")
            data_error(name if name.isidentifier() else "function", message, failed)
        array = to_arrow(out, out_type)
        return array[0] if scalar else array
    return run


def _const(arg, what: str):
    if not isinstance(arg, Lit):
        raise ExpressionError(f"{what} must be a constant")
    return arg.value


# --- math ---------------------------------------------------------------------------------------

def _float_or_numeric(ts):
    """Postgres' f(double precision) / f(numeric) pair: NUMERIC stays NUMERIC, the rest DOUBLE."""
    if len(ts) == 1 and ts[0].kind in _NUMS:
        return DataType.DECIMAL if ts[0].kind == TypeKind.DECIMAL else DataType.DOUBLE
    return None


def _double_only(n):
    return lambda ts: DataType.DOUBLE if len(ts) == n and all(t.kind in _NUMS for t in ts) else None


def _checked_float(x: float) -> float:
    if math.isinf(x):
        raise RowError("value out of range: overflow")
    return x


def _trunc(x, digits=0):
    if isinstance(x, decimal.Decimal):
        if not x.is_finite():
            return x
        q = decimal.Decimal(1).scaleb(-digits)
        out = x.quantize(q, rounding=decimal.ROUND_DOWN, context=decimal.Context(prec=200)) if digits >= 0 else \
            (x.scaleb(digits).to_integral_value(rounding=decimal.ROUND_DOWN)).scaleb(-digits)
        return out if digits >= 0 else out.quantize(decimal.Decimal(1))
    return float(math.trunc(x)) if math.isfinite(x) else x


def _trunc_type(ts):
    if len(ts) == 2:
        return DataType.DECIMAL if ts[0].kind in _NUMS and ts[0].kind not in _FLOATS and ts[1].kind in _INTS \
            else None
    return _float_or_numeric(ts)


# --- NUMERIC ln / log / exp at Postgres' result scale (numeric.c: numeric_ln, numeric_log, numeric_exp)

def _dscale(x: decimal.Decimal) -> int:
    return max(0, -x.as_tuple().exponent)


def _nbase(x: decimal.Decimal) -> tuple:
    """``(weight, first base-10000 digit, second or None)`` of ``x > 0`` as Postgres stores it."""
    weight = x.adjusted() // 4
    d0 = int(x.scaleb(-4 * weight))
    rest = x - decimal.Decimal(d0).scaleb(4 * weight)
    d1 = int(x.scaleb(-4 * (weight - 1))) % 10000 if rest != 0 else None
    return weight, d0, d1


def _ln_dweight(x: decimal.Decimal) -> int:
    """Postgres' ``estimate_ln_dweight``: the decimal weight of ``ln(x)``."""
    if x <= 0:
        return 0
    if decimal.Decimal("0.9") <= x <= decimal.Decimal("1.1"):
        d = abs(x - 1)
        if d == 0:
            return 0
        weight, d0, _ = _nbase(d)
        return weight * 4 + int(math.log10(d0))
    weight, d0, d1 = _nbase(x)
    digits, dweight = (d0, weight * 4) if d1 is None else (d0 * 10000 + d1, weight * 4 - 4)
    return int(math.log10(abs(math.log(digits) + dweight * 2.302585092994046)))


def _at_scale(value: decimal.Decimal, rscale: int) -> decimal.Decimal:
    rscale = min(max(rscale, 0), 1000)   # NUMERIC_MIN/MAX_DISPLAY_SCALE
    return value.quantize(decimal.Decimal(1).scaleb(-rscale), rounding=decimal.ROUND_HALF_UP,
                          context=decimal.Context(prec=max(60, value.adjusted() + rscale + 5)))


def _precise(rscale: int, x: decimal.Decimal) -> decimal.Context:
    return decimal.Context(prec=max(40, min(rscale, 1000) + abs(x.adjusted()) + 20), Emax=999999, Emin=-999999)


def _ln_numeric(x: decimal.Decimal) -> decimal.Decimal:
    rscale = max(16 - _ln_dweight(x), _dscale(x))
    return _at_scale(x.ln(_precise(rscale, x)), rscale)


def _log_numeric(b: decimal.Decimal, x: decimal.Decimal) -> decimal.Decimal:
    rscale = max(16 - (_ln_dweight(x) - _ln_dweight(b)), _dscale(b), _dscale(x))
    ctx = _precise(rscale, x if abs(x.adjusted()) > abs(b.adjusted()) else b)
    return _at_scale(ctx.divide(x.ln(ctx), b.ln(ctx)), rscale)


def _ln(x):
    if x == 0:
        raise RowError("cannot take logarithm of zero")
    if x < 0:
        raise RowError("cannot take logarithm of a negative number")
    if isinstance(x, decimal.Decimal):
        return _ln_numeric(x) if x.is_finite() else x
    return math.log(x) if math.isfinite(x) else x


def _log10(x):
    if x == 0:
        raise RowError("cannot take logarithm of zero")
    if x < 0:
        raise RowError("cannot take logarithm of a negative number")
    if isinstance(x, decimal.Decimal):   # Postgres' log(numeric) is log(10, x)
        return _log_numeric(decimal.Decimal(10), x) if x.is_finite() else x
    return math.log10(x) if math.isfinite(x) else x


def _log_base(b, x):   # log(numeric, numeric) only, in Postgres
    b, x = decimal.Decimal(b), decimal.Decimal(x)
    if b == 0 or x == 0:
        raise RowError("cannot take logarithm of zero")
    if b < 0 or x < 0:
        raise RowError("cannot take logarithm of a negative number")
    if b == 1:
        raise RowError("division by zero")
    if not (b.is_finite() and x.is_finite()):
        lb, lx = b.ln(_DEC), x.ln(_DEC)
        return _DEC.divide(lx, lb)
    return _log_numeric(b, x)


def _exp(x):
    if isinstance(x, decimal.Decimal):
        if not x.is_finite():
            return decimal.Decimal(0) if x.is_infinite() and x < 0 else x
        val = min(max(float(x) * 0.434294481903252, -2000.0), 2000.0)   # NUMERIC_MAX_RESULT_SCALE
        rscale = max(16 - int(val), _dscale(x))
        try:
            out = x.exp(decimal.Context(prec=max(40, min(rscale, 1000) + max(int(val), 0) + 20),
                                        Emax=999999, Emin=-999999, traps=[decimal.Overflow]))
        except decimal.Overflow:
            raise RowError("value overflows numeric format") from None
        return _at_scale(out, rscale)
    if math.isnan(x) or math.isinf(x):
        return 0.0 if x == -math.inf else x
    try:
        out = math.exp(x)
    except OverflowError:
        raise RowError("value out of range: overflow") from None
    if out == 0.0:
        raise RowError("value out of range: underflow")
    return out


def _sign(x):
    if isinstance(x, decimal.Decimal):
        return decimal.Decimal(0 if x == 0 else (1 if x > 0 else -1)) if not x.is_nan() else x
    return x if math.isnan(x) else float((x > 0) - (x < 0))


def _cbrt(x):
    x = float(x)
    return math.copysign(abs(x) ** (1.0 / 3.0), x) if math.isfinite(x) else x


def _ranged(fn, lo, hi):
    def run(x):
        x = float(x)
        if math.isnan(x):
            return x
        if not lo <= x <= hi:
            raise RowError("input is out of range")
        return fn(x)
    run.__name__ = fn.__name__
    return run


def _trig(fn):
    def run(x):
        x = float(x)
        if math.isinf(x):
            raise RowError("input is out of range")
        return fn(x) if not math.isnan(x) else x
    run.__name__ = fn.__name__
    return run


def _cot(x):
    x = float(x)
    if math.isinf(x):
        raise RowError("input is out of range")
    t = math.tan(x)
    return math.inf if t == 0 else 1.0 / t


def _as_float(fn):
    def run(*xs):
        return fn(*(float(x) for x in xs))
    run.__name__ = fn.__name__
    return run


def _random(args, columns):
    """random(): a fresh double in [0, 1) per row (batch only: the binder refuses it in an MV)."""
    if not columns:
        return pa.scalar(_RNG.random(), pa.float64())
    return pa.array([_RNG.random() for _ in range(len(columns[0]))], pa.float64())


_RNG = random.SystemRandom()


def _div(a, b):
    """Postgres' div(numeric, numeric): the quotient truncated toward zero."""
    a, b = decimal.Decimal(a), decimal.Decimal(b)
    if b == 0:
        raise RowError("division by zero")
    if not a.is_finite() or not b.is_finite():
        raise RowError("div of NaN or Infinity is not supported")
    return _DEC_EXACT.divide_int(a, b)


_DEC_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _concat_ws(sep, *args):
    """concat_ws(sep, ...): the non-NULL arguments as text joined by ``sep``; NULL ``sep``: NULL."""
    if sep is None:
        return None
    return sep.join(_text_of(v) for v in args if v is not None)


# --- greatest / least ------------------------------------------------------------------------

def _sort_key(dtype: DataType):
    if dtype.kind == TypeKind.INTERVAL:
        return lambda v: v.total_usecs()
    if dtype.kind in _FLOATS:   # NaN sorts above every number, as in Postgres
        return lambda v: (math.isnan(v), v if not math.isnan(v) else 0.0)
    if dtype.kind == TypeKind.DECIMAL:
        return lambda v: (v.is_nan(), v if not v.is_nan() else 0)
    return lambda v: v


def _extreme(pick):
    def make(args, columns):
        key = _sort_key(args[0].data_type)

        def fn(*row):
            present = [v for v in row if v is not None]
            return pick(present, key=key) if present else None
        fn.__name__ = "greatest" if pick is max else "least"
        return rowwise(fn, lambda ts: ts[0], strict=False)(args, columns)
    return make


def _same_type(ts):
    return ts[0] if all(t == ts[0] for t in ts) and ts[0].kind not in (TypeKind.STRUCT, TypeKind.LIST) else None


# --- text ------------------------------------------------------------------------------------

def _split_part(s, delim, n):
    if n == 0:
        raise RowError("field position must not be zero")
    parts = s.split(delim) if delim else [s]
    if n < 0:
        n = len(parts) + n + 1
        if n <= 0:
            return ""
    return parts[n - 1] if n <= len(parts) else ""


def _pad(left: bool):
    def pad(s, n, fill=" "):
        if n <= 0:
            return ""
        if n > _MAX_TEXT:
            raise RowError("requested length too large")
        if len(s) >= n or not fill:
            return s[:n]
        need = n - len(s)
        filler = (fill * (need // len(fill) + 1))[:need]
        return filler + s if left else s + filler
    pad.__name__ = "lpad" if left else "rpad"
    return pad


def _initcap(s):
    """Postgres' initcap under the C locale (the collation here): words are runs of ASCII
    letters and digits, and only ASCII letters change case."""
    out, word = [], False
    for ch in s:
        out.append((ch.lower() if word else ch.upper()) if ch.isascii() else ch)
        word = ch.isascii() and ch.isalnum()
    return "".join(out)


def _translate(s, frm, to):
    table = {}
    for i, ch in enumerate(frm):
        if ch not in table:
            table[ch] = to[i] if i < len(to) else None
    return "".join(table.get(ch, ch) or "" for ch in s)


def _left(s, n):
    return s[:n] if n >= 0 else s[:max(len(s) + n, 0)]


def _right(s, n):   # Postgres' text_right: -n wraps for INT's minimum, which keeps the whole text
    if n < 0:
        return s if n == -(1 << 31) else s[min(-n, len(s)):]
    return s[max(len(s) - n, 0):]


_MAX_TEXT = (1 << 30) - 1   # Postgres' largest text value, in bytes (here: characters)


def _repeat(s, n):
    if n > 0 and len(s) * n > _MAX_TEXT:
        raise RowError("requested length too large")
    return s * max(n, 0)


def _strpos(s, sub):
    return s.find(sub) + 1


def _ascii(s):
    return ord(s[0]) if s else 0


def _chr(n):
    if n == 0:
        raise RowError("null character not permitted")
    if n < 0 or n > 0x10FFFF or 0xD800 <= n <= 0xDFFF:
        raise RowError(f"requested character not valid for encoding: {n}")
    return chr(n)


def _md5(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


_POSIX_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
                  "space": r"\s", "punct": r"!-/:-@\[-`{-~", "xdigit": "0-9A-Fa-f", "word": r"\w"}


def _regex(pattern: str, flags: str = "") -> re.Pattern:
    text = re.sub(r"\[:(\w+):\]", lambda m: _POSIX_CLASSES.get(m.group(1), m.group(0)), pattern)
    bad = set(flags) - set("gi")
    if bad:
        raise ExpressionError(f"invalid regular expression option: \"{''.join(sorted(bad))}\"")
    try:
        # re.ASCII: classes and case folding as Postgres' regex under the C locale
        return re.compile(text, re.ASCII | (re.I if "i" in flags else 0))
    except re.error as exc:
        raise ExpressionError(f"invalid regular expression: {exc}") from None


def _regexp_replace(args, columns):
    pattern = _const(args[1], "regexp_replace's pattern")
    repl = _const(args[2], "regexp_replace's replacement")
    flags = _const(args[3], "regexp_replace's flags") if len(args) > 3 else ""
    if pattern is None or repl is None or flags is None:
        return pa.scalar(None, pa.string())
    rx = _regex(pattern, flags)
    # Postgres' replacement: \1..\9 a group, \& the whole match, \\ a backslash; & alone is text
    py_repl = re.sub(r"\\(\d|&|\\)|([^\\]+)|\\",
                     lambda m: ("\\g<0>" if m.group(1) == "&" else "\\\\" if m.group(1) == "\\" else
                                f"\\g<{m.group(1)}>") if m.group(1) else
                     (m.group(2).replace("\\", "\\\\") if m.group(2) else "\\\\"), repl)
    count = 0 if "g" in flags else 1

    def regexp_replace(s, *_):
        return rx.sub(py_repl, s, count=count)
    return rowwise(regexp_replace, lambda ts: _V)(args[:1], columns)


def _regexp_count(args, columns):
    pattern = _const(args[1], "regexp_count's pattern")
    flags = _const(args[3], "regexp_count's flags") if len(args) > 3 else ""
    if pattern is None or flags is None:
        return pa.scalar(None, pa.int32())
    if "g" in flags:
        raise ExpressionError("regexp_count does not support the \"global\" option")
    rx = _regex(pattern, flags)
    rest = [args[0]] + ([args[2]] if len(args) > 2 else [])

    def regexp_count(s, start=1):
        if start <= 0:
            raise RowError(f"invalid value for parameter \"start\": {start}")
        return sum(1 for _ in rx.finditer(s, start - 1))
    return rowwise(regexp_count, lambda ts: DataType.INT)(rest, columns)


_FORMAT_SPEC = re.compile(r"%(?:(\d+)\$)?(-)?(\d+|\*)?([sIL%])?")


def _quote_ident(s: str) -> str:
    return s if re.fullmatch(r"[a-z_][a-z0-9_$]*", s) else '"' + s.replace('"', '""') + '"'


def _quote_literal(s: str) -> str:
    body = s.replace("'", "''")
    return ("E'" + body.replace("\\", "\\\\") + "'") if "\\" in s else "'" + body + "'"


def _format(fmt, *args):
    """Postgres' format(): %s, %I, %L, %% with optional ``n$`` position and ``[-]width``."""
    if fmt is None:
        return None
    out, at, nxt = [], 0, 0
    for m in _FORMAT_SPEC.finditer(fmt):
        out.append(fmt[at:m.start()])
        at = m.end()
        pos, minus, width, conv = m.groups()
        if conv is None:
            raise RowError("unterminated format() type specifier")
        if conv == "%":
            out.append("%")
            continue
        if width == "*":
            raise RowError("format() width from an argument is not supported")
        i = int(pos) - 1 if pos else nxt
        if pos and int(pos) == 0:
            raise RowError("format specifies argument 0, but arguments are numbered from 1")
        if i >= len(args):
            raise RowError("too few arguments for format()")
        nxt = i + 1
        v = args[i]
        if conv == "s":
            text = "" if v is None else _text_of(v)
        elif conv == "I":
            if v is None:
                raise RowError("null values cannot be formatted as an SQL identifier")
            text = _quote_ident(_text_of(v))
        else:
            text = "NULL" if v is None else _quote_literal(_text_of(v))
        if width:
            text = text.ljust(int(width)) if minus else text.rjust(int(width))
        out.append(text)
    out.append(fmt[at:])
    return "".join(out)


def _text_of(v) -> str:
    """A value as Postgres' text output writes it."""
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v).replace("e+", "e+").rstrip("0").rstrip(".") if "e" not in repr(v) and "." in repr(v) \
            else repr(v)
    if isinstance(v, datetime.datetime):
        text = v.replace(tzinfo=None).isoformat(sep=" ")
        return text + ("+00" if v.tzinfo is not None else "")
    if isinstance(v, Interval):
        from stream.interval_text import format_interval
        return format_interval(v)
    return str(v)


# --- date / time ------------------------------------------------------------------------------

_TRUNC_UNITS = ("microseconds", "milliseconds", "second", "minute", "hour", "day", "week", "month", "quarter",
                "year", "decade", "century", "millennium")
_UNIT_ALIASES = {"microsecond": "microseconds", "us": "microseconds", "usec": "microseconds",
                 "usecs": "microseconds", "millisecond": "milliseconds", "ms": "milliseconds",
                 "msec": "milliseconds", "msecs": "milliseconds", "seconds": "second", "sec": "second",
                 "secs": "second", "s": "second", "minutes": "minute", "min": "minute", "mins": "minute",
                 "m": "minute", "hours": "hour", "hr": "hour", "hrs": "hour", "h": "hour", "days": "day",
                 "d": "day", "weeks": "week", "w": "week", "months": "month", "mon": "month",
                 "mons": "month", "quarters": "quarter", "qtr": "quarter", "years": "year", "y": "year",
                 "yr": "year", "yrs": "year", "decades": "decade", "dec": "decade", "centuries": "century",
                 "cent": "century", "c": "century", "millennia": "millennium", "millenniums": "millennium",
                 "mil": "millennium", "mils": "millennium", "microsec": "microseconds"}


def unit_name(text: str) -> str:
    t = text.strip().lower()
    return _UNIT_ALIASES.get(t, t)


def _as_datetime(v) -> datetime.datetime:
    if isinstance(v, datetime.datetime):
        return v
    return datetime.datetime(v.year, v.month, v.day)


def _trunc_dt(d: datetime.datetime, unit: str) -> datetime.datetime:
    if unit == "microseconds":
        return d
    if unit == "milliseconds":
        return d.replace(microsecond=d.microsecond // 1000 * 1000)
    if unit == "second":
        return d.replace(microsecond=0)
    if unit == "minute":
        return d.replace(second=0, microsecond=0)
    if unit == "hour":
        return d.replace(minute=0, second=0, microsecond=0)
    day = d.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return day
    if unit == "week":
        return day - datetime.timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "quarter":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    if unit == "year":
        return day.replace(month=1, day=1)
    y = day.year
    if unit == "decade":
        return day.replace(year=y - y % 10, month=1, day=1) if y >= 10 else day.replace(month=1, day=1)
    if unit == "century":
        return day.replace(year=(y - 1) // 100 * 100 + 1, month=1, day=1)
    if unit == "millennium":
        return day.replace(year=(y - 1) // 1000 * 1000 + 1, month=1, day=1)
    raise RowError(f"unit \"{unit}\" not supported")


def _trunc_interval(v: Interval, unit: str) -> Interval:
    us = v.usecs
    sign = -1 if us < 0 else 1
    a = abs(us)
    step = {"microseconds": 1, "milliseconds": 1000, "second": 10 ** 6, "minute": 60 * 10 ** 6,
            "hour": 3600 * 10 ** 6}.get(unit)
    if step is not None:
        return Interval(v.months, v.days, sign * (a // step * step))
    if unit == "day":
        return Interval(v.months, v.days, 0)
    if unit == "week":
        raise RowError("unit \"week\" not supported for type interval")
    years, months = int(v.months / 12), v.months - int(v.months / 12) * 12
    if unit == "month":
        return Interval(v.months, 0, 0)
    if unit == "quarter":
        return Interval(years * 12 + int(months / 3) * 3, 0, 0)
    span = {"year": 1, "decade": 10, "century": 100, "millennium": 1000}[unit]
    return Interval(int(years / span) * span * 12, 0, 0)


def _date_trunc(args, columns):
    unit = _const(args[0], "date_trunc's unit")
    if unit is None:
        return pa.scalar(None, pa.timestamp("us"))
    u = unit_name(unit)
    if u not in _TRUNC_UNITS:
        raise ExpressionError(f"unit \"{unit}\" not recognized for date_trunc")
    kind = args[1].data_type.kind

    def date_trunc(v):
        if kind == TypeKind.INTERVAL:
            return _trunc_interval(v, u)
        out = _trunc_dt(_as_datetime(v), u)
        return out.replace(tzinfo=_UTC) if kind == TypeKind.DATE else out
    return rowwise(date_trunc, lambda ts: _date_trunc_type([_V] + ts))(args[1:], columns)


def _date_trunc_type(ts):
    if len(ts) != 2 or ts[0] != _V:
        return None
    k = ts[1].kind
    if k == TypeKind.DATE:   # Postgres picks date_trunc(text, timestamptz) for a date
        return DataType.TIMESTAMPTZ
    return ts[1] if k in _TS + (TypeKind.INTERVAL,) else None


_EXTRACT_FIELDS = {"year", "month", "day", "hour", "minute", "second", "millisecond", "microsecond", "dow",
                   "isodow", "doy", "week", "quarter", "epoch", "decade", "century", "millennium", "isoyear",
                   "julian"}
_FIELD_ALIASES = {"years": "year", "months": "month", "mon": "month", "mons": "month", "days": "day",
                  "hours": "hour", "minutes": "minute", "seconds": "second", "milliseconds": "millisecond",
                  "microseconds": "microsecond", "y": "year", "d": "day", "h": "hour", "m": "minute",
                  "s": "second", "ms": "millisecond", "us": "microsecond", "min": "minute", "sec": "second",
                  "yr": "year", "yrs": "year", "hr": "hour", "hrs": "hour", "mins": "minute", "secs": "second",
                  "msec": "millisecond", "usec": "microsecond", "weeks": "week", "quarters": "quarter",
                  "decades": "decade", "centuries": "century", "millennia": "millennium"}
_DATE_ONLY_BAD = {"hour", "minute", "second", "millisecond", "microsecond"}
_INTERVAL_OK = {"year", "month", "day", "hour", "minute", "second", "millisecond", "microsecond", "epoch",
                "quarter", "decade", "century", "millennium"}


def field_name(text: str) -> str:
    t = text.strip().lower()
    return _FIELD_ALIASES.get(t, t)


def _extract_value(field: str, v, kind) -> decimal.Decimal:
    """Postgres' extract(field from v) as an exact NUMERIC."""
    D = decimal.Decimal
    if kind == TypeKind.INTERVAL:
        months, days, us = v.months, v.days, v.usecs
        years = int(months / 12)
        if field == "year":
            return D(years)
        if field == "month":
            return D(months - years * 12)
        if field == "quarter":
            return D(int((months - years * 12) / 3) + 1)
        if field in ("decade", "century", "millennium"):
            return D(int(years / {"decade": 10, "century": 100, "millennium": 1000}[field]))
        if field == "day":
            return D(days)
        if field == "hour":
            return D(int(us / 3_600_000_000))
        if field == "minute":
            return D(int((us - int(us / 3_600_000_000) * 3_600_000_000) / 60_000_000))
        sec_us = us - int(us / 60_000_000) * 60_000_000
        if field == "second":
            return D(sec_us).scaleb(-6)
        if field == "millisecond":
            return D(sec_us).scaleb(-3)
        if field == "microsecond":
            return D(sec_us)
        if field == "epoch":   # 365.25 days a year, 30 days a month
            total = D(years) * D("31557600") + D(months - years * 12) * D(2592000) + D(days) * D(86400)
            return total + D(us).scaleb(-6)
        raise RowError(f"unit \"{field}\" not supported for type interval")
    if kind == TypeKind.DATE and field in _DATE_ONLY_BAD:
        raise RowError(f"unit \"{field}\" not supported for type date")
    d = _as_datetime(v)
    if field == "year":
        return D(d.year)
    if field == "month":
        return D(d.month)
    if field == "day":
        return D(d.day)
    if field == "hour":
        return D(d.hour)
    if field == "minute":
        return D(d.minute)
    if field == "second":
        return D(d.second * 1_000_000 + d.microsecond).scaleb(-6)
    if field == "millisecond":
        return D(d.second * 1_000_000 + d.microsecond).scaleb(-3)
    if field == "microsecond":
        return D(d.second * 1_000_000 + d.microsecond)
    if field == "dow":
        return D((d.weekday() + 1) % 7)
    if field == "isodow":
        return D(d.isoweekday())
    if field == "doy":
        return D(d.timetuple().tm_yday)
    if field == "week":
        return D(d.isocalendar()[1])
    if field == "isoyear":
        return D(d.isocalendar()[0])
    if field == "quarter":
        return D((d.month - 1) // 3 + 1)
    if field == "decade":
        return D(d.year // 10)
    if field == "century":
        return D((d.year - 1) // 100 + 1 if d.year > 0 else -((-d.year) // 100 + 1))
    if field == "millennium":
        return D((d.year - 1) // 1000 + 1)
    if field == "epoch":
        naive = d.replace(tzinfo=None)
        delta = naive - datetime.datetime(1970, 1, 1)
        us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return D(us).scaleb(-6) if kind != TypeKind.DATE else D(us // 1_000_000)
    if field == "julian":
        jd = d.toordinal() + 1721425
        frac = D(d.hour * 3600_000_000 + d.minute * 60_000_000 + d.second * 1_000_000 + d.microsecond)
        return D(jd) + frac / D(86_400_000_000) if kind != TypeKind.DATE else D(jd)
    raise RowError(f"unit \"{field}\" not supported")


def _extract(as_double: bool):
    def run(args, columns):
        raw = _const(args[0], "the field of extract/date_part")
        if raw is None:
            return pa.scalar(None, pa.float64() if as_double else pa.string())
        field = field_name(raw)
        kind = args[1].data_type.kind
        if field not in _EXTRACT_FIELDS:
            raise ExpressionError(f"unit \"{raw}\" not recognized for type "
                                  f"{args[1].data_type.sql_name().lower()}")

        def extract(v):
            out = _extract_value(field, v, kind)
            if as_double:
                return float(out)
            if field in ("second", "millisecond", "epoch") and kind != TypeKind.DATE and out == out.to_integral():
                return out.quantize(decimal.Decimal("0.000001") if field != "millisecond" else decimal.Decimal(
                    "0.001"))
            return out
        return rowwise(extract, lambda ts: DataType.DOUBLE if as_double else DataType.DECIMAL)(args[1:], columns)
    return run


def _extract_type(as_double):
    def typer(ts):
        if len(ts) != 2 or ts[0] != _V or ts[1].kind not in _TS + (TypeKind.DATE, TypeKind.INTERVAL, TypeKind.TIME):
            return None
        return DataType.DOUBLE if as_double else DataType.DECIMAL
    return typer


def _make_date(y, m, d):
    if y <= 0:   # Postgres reads a negative year as BC, which DATE here cannot hold; 0 is an error
        raise RowError(f"date field value out of range: {y}-{m:02d}-{d:02d}" if y == 0 else
                       "date out of range (years BC are not supported)")
    try:
        return datetime.date(y, m, d)
    except ValueError:
        raise RowError(f"date field value out of range: {y}-{m:02d}-{d:02d}") from None


def _age(a, b):
    """Postgres' age(a, b) (timestamp_age): the field-wise difference, negative fields borrowed
    from the next larger one -- days from the length of a's month when a < b, else of b's."""
    a, b = _as_datetime(a).replace(tzinfo=None), _as_datetime(b).replace(tzinfo=None)
    f = [a.microsecond - b.microsecond, a.second - b.second, a.minute - b.minute, a.hour - b.hour,
         a.day - b.day, a.month - b.month, a.year - b.year]
    flip = a < b
    if flip:
        f = [-x for x in f]
    for i, unit in ((0, 1_000_000), (1, 60), (2, 60), (3, 24)):
        while f[i] < 0:
            f[i] += unit
            f[i + 1] -= 1
    month_of = a if flip else b
    while f[4] < 0:
        f[4] += calendar.monthrange(month_of.year, month_of.month)[1]
        f[5] -= 1
    while f[5] < 0:
        f[5] += 12
        f[6] -= 1
    if flip:
        f = [-x for x in f]
    us = ((f[3] * 60 + f[2]) * 60 + f[1]) * 1_000_000 + f[0]
    return Interval(f[6] * 12 + f[5], f[4], us)


def _to_timestamp_epoch(x):
    x = float(x)
    if math.isnan(x):
        raise RowError("timestamp cannot be NaN")
    if math.isinf(x):
        return None
    us = round(x * 1_000_000)
    if not -210866803200 * 1_000_000 <= us < 9224318016000 * 1_000_000:
        raise RowError(f"timestamp out of range: \"{x}\"")
    try:
        return datetime.datetime(1970, 1, 1, tzinfo=_UTC) + datetime.timedelta(microseconds=us)
    except OverflowError:
        raise RowError(f"timestamp out of range: \"{x}\"") from None


# date/time patterns (longest first), as to_timestamp's format reads them
_TO_CHAR = re.compile(r'FM|"(?:[^"\\]|\\.)*"|HH24|HH12|HH|MI|SS|MS|US|AM|PM|A\.M\.|P\.M\.|am|pm|a\.m\.|p\.m\.|'
                      r'YYYY|YYY|YY|Y,YYY|Y|IYYY|MONTH|Month|month|MON|Mon|mon|MM|DAY|Day|day|DY|Dy|dy|DDD|DD|D|'
                      r'ID|IW|WW|Q|J|SSSSS|SSSS|TZ|tz|OF|CC|\\.|.', re.S)
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]


def _to_char_fn(fmt: str, kind):
    """The per-row to_char of a value of type ``kind`` with the constant format ``fmt``, all through
    :mod:`stream.expr_to_char`: numbers, intervals, and dates and time stamps (a DATE as its
    midnight, with the time zone patterns of a TIMESTAMPTZ, as Postgres' date -> timestamptz); an
    empty format gives NULL but for numbers."""
    if kind in _NUMS or kind == TypeKind.INTERVAL:   # (format errors raise here, when the node is built)
        format_value = number_formatter(fmt, kind) if kind in _NUMS else interval_char(fmt)
    else:
        as_text = datetime_char(fmt, kind != TypeKind.TIMESTAMP)

        def format_value(v):
            return as_text(_as_datetime(v))

    def to_char_value(v):
        try:
            return format_value(v)
        except ToCharRowError as exc:
            raise RowError(str(exc)) from None
    return to_char_value


def _to_char(args, columns):
    fmt = _const(args[1], "to_char's format")
    if fmt is None:
        return pa.scalar(None, pa.string())
    return rowwise(_to_char_fn(fmt, args[0].data_type.kind), lambda ts: _V)(args[:1], columns)


def _to_char_type(ts):
    return _V if len(ts) == 2 and ts[1] == _V and ts[0].kind in _TS + _NUMS + (TypeKind.DATE, TypeKind.INTERVAL) \
        else None


def _to_timestamp(args, columns):
    if len(args) == 1:
        return rowwise(_to_timestamp_epoch, lambda ts: DataType.TIMESTAMPTZ)(args, columns)
    fmt = _const(args[1], "to_timestamp's format")
    if fmt is None:
        return pa.scalar(None, pa.timestamp("us", tz="UTC"))
    parse = _parser(fmt)
    return rowwise(parse, lambda ts: DataType.TIMESTAMPTZ)(args[:1], columns)


_PARSE_FIELDS = {"YYYY": r"(?P<Y>[-+]?\d{1,4})", "YY": r"(?P<y2>\d{1,2})", "MM": r"(?P<M>\d{1,2})",
                 "DD": r"(?P<D>\d{1,2})", "HH24": r"(?P<H>\d{1,2})", "HH12": r"(?P<h>\d{1,2})",
                 "HH": r"(?P<h>\d{1,2})", "MI": r"(?P<m>\d{1,2})", "SS": r"(?P<S>\d{1,2})",
                 "MS": r"(?P<ms>\d{1,3})", "US": r"(?P<us>\d{1,6})", "AM": r"(?P<ap>[AaPp]\.?[Mm]\.?)",
                 "PM": r"(?P<ap>[AaPp]\.?[Mm]\.?)", "Mon": r"(?P<mon>[A-Za-z]{3})", "MON": r"(?P<mon>[A-Za-z]{3})",
                 "mon": r"(?P<mon>[A-Za-z]{3})", "DDD": r"(?P<doy>\d{1,3})"}


def _parser(fmt: str):
    """to_timestamp(text, format) for the numeric patterns (YYYY MM DD HH24 HH12 MI SS MS US AM
    Mon); separators in the format match any run of non-alphanumerics in the input, as
    Postgres' non-FX mode does."""
    parts = []
    for tok in _TO_CHAR.findall(fmt):
        if tok == "FM":
            continue
        if tok in _PARSE_FIELDS:
            if _PARSE_FIELDS[tok] in parts:
                raise ExpressionError(f"conflicting values for \"{tok}\" field in formatting string")
            parts.append(_PARSE_FIELDS[tok])
        elif tok.startswith('"'):
            parts.append(re.escape(tok[1:-1]))
        elif re.fullmatch(r"[A-Za-z]+", tok):
            raise ExpressionError(f"to_timestamp format pattern \"{tok}\" is not supported")
        else:
            parts.append(r"[^A-Za-z0-9]*")
    rx = re.compile(r"\s*" + "".join(parts) + r"\s*$")

    def to_timestamp(s):
        m = rx.match(s)
        if m is None:
            raise RowError(f"invalid value \"{s}\" for \"{fmt}\"")
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        year = int(g["Y"]) if "Y" in g else (2000 + int(g["y2"]) if int(g["y2"]) < 70 else 1900 + int(g["y2"])) \
            if "y2" in g else 1
        month = int(g.get("M", 1))
        if "mon" in g:
            names = [n[:3].lower() for n in _MONTHS]
            if g["mon"].lower() not in names:
                raise RowError(f"invalid value \"{g['mon']}\" for \"Mon\"")
            month = names.index(g["mon"].lower()) + 1
        hour = int(g.get("H", g.get("h", 0)))
        if "h" in g:
            if not 1 <= hour <= 12:
                raise RowError(f"hour \"{hour}\" is invalid for the 12-hour clock")
            pm = g.get("ap", "a")[0].lower() == "p"
            hour = hour % 12 + (12 if pm else 0)
        us = int(g.get("ms", "0").ljust(3, "0")) * 1000 if "ms" in g else 0
        if "us" in g:
            us = int(g["us"].ljust(6, "0"))
        try:
            if "doy" in g:
                base = datetime.datetime(year, 1, 1) + datetime.timedelta(days=int(g["doy"]) - 1)
                return base.replace(hour=hour, minute=int(g.get("m", 0)), second=int(g.get("S", 0)),
                                    microsecond=us, tzinfo=_UTC)
            return datetime.datetime(year, month, int(g.get("D", 1)), hour, int(g.get("m", 0)),
                                     int(g.get("S", 0)), us, tzinfo=_UTC)
        except ValueError:
            raise RowError(f"date/time field value out of range: \"{s}\"") from None
    return to_timestamp


def _to_timestamp_type(ts):
    if len(ts) == 1:
        return DataType.TIMESTAMPTZ if ts[0].kind in _NUMS else None
    return DataType.TIMESTAMPTZ if ts[0] == _V and ts[1] == _V else None


def _age_type(ts):
    if len(ts) == 2 and all(t.kind in _TS + (TypeKind.DATE,) for t in ts):
        return DataType.INTERVAL
    return None


def _fn(f, typer, strict=True):
    return rowwise(f, typer, strict)


def _typed(*sig, out):
    """A typing function accepting exactly the argument kinds of ``sig`` (a kind or a tuple)."""
    def typer(ts):
        if len(ts) > len(sig):
            return None
        for t, want in zip(ts, sig):
            if t.kind not in (want if isinstance(want, tuple) else (want,)):
                return None
        return out
    return typer


_S, _I = TypeKind.VARCHAR, _INTS

FUNCS = {
    # math
    "trunc": (lambda a, c: rowwise(_trunc, _trunc_type)(a, c), _trunc_type, (1, 2)),
    "ln": (lambda a, c: rowwise(_ln, _float_or_numeric)(a, c), _float_or_numeric, (1, 1)),
    "log10": (lambda a, c: rowwise(_log10, _float_or_numeric)(a, c), _float_or_numeric, (1, 1)),
    "log": (lambda a, c: (rowwise(_log10, _float_or_numeric) if len(a) == 1 else
                          rowwise(_log_base, lambda ts: DataType.DECIMAL))(a, c),
            lambda ts: _float_or_numeric(ts) if len(ts) == 1 else
            (DataType.DECIMAL if all(t.kind in _NUMS and t.kind not in _FLOATS for t in ts) else None), (1, 2)),
    "exp": (lambda a, c: rowwise(_exp, _float_or_numeric)(a, c), _float_or_numeric, (1, 1)),
    "sign": (lambda a, c: rowwise(_sign, _float_or_numeric)(a, c), _float_or_numeric, (1, 1)),
    "cbrt": (lambda a, c: rowwise(_cbrt, _double_only(1))(a, c), _double_only(1), (1, 1)),
    "sin": (lambda a, c: rowwise(_trig(math.sin), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "cos": (lambda a, c: rowwise(_trig(math.cos), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "tan": (lambda a, c: rowwise(_trig(math.tan), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "cot": (lambda a, c: rowwise(_cot, _double_only(1))(a, c), _double_only(1), (1, 1)),
    "asin": (lambda a, c: rowwise(_ranged(math.asin, -1, 1), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "acos": (lambda a, c: rowwise(_ranged(math.acos, -1, 1), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "atan": (lambda a, c: rowwise(_as_float(math.atan), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "atan2": (lambda a, c: rowwise(_as_float(math.atan2), _double_only(2))(a, c), _double_only(2), (2, 2)),
    "degrees": (lambda a, c: rowwise(lambda x: _checked_float(math.degrees(float(x))), _double_only(1))(a, c),
                _double_only(1), (1, 1)),
    "radians": (lambda a, c: rowwise(_as_float(math.radians), _double_only(1))(a, c), _double_only(1), (1, 1)),
    "pi": (lambda a, c: pa.scalar(math.pi, pa.float64()), lambda ts: DataType.DOUBLE, (0, 0)),
    "random": (_random, lambda ts: DataType.DOUBLE, (0, 0)),
    "div": (lambda a, c: rowwise(_div, lambda ts: DataType.DECIMAL)(a, c),
            lambda ts: DataType.DECIMAL if all(t.kind in _NUMS and t.kind not in _FLOATS for t in ts) else None,
            (2, 2)),
    "concat_ws": (lambda a, c: rowwise(_concat_ws, lambda ts: _V, strict=False)(a, c),
                  lambda ts: _V if ts[0] == _V and all(t.kind not in (TypeKind.STRUCT, TypeKind.LIST) for t in ts)
                  else None, (2, None)),
    "greatest": (_extreme(max), _same_type, (1, None)),
    "least": (_extreme(min), _same_type, (1, None)),
    # text
    "split_part": (lambda a, c: rowwise(_split_part, lambda ts: _V)(a, c), _typed(_S, _S, _I, out=_V), (3, 3)),
    "lpad": (lambda a, c: rowwise(_pad(True), lambda ts: _V)(a, c), _typed(_S, _I, _S, out=_V), (2, 3)),
    "rpad": (lambda a, c: rowwise(_pad(False), lambda ts: _V)(a, c), _typed(_S, _I, _S, out=_V), (2, 3)),
    "initcap": (lambda a, c: rowwise(_initcap, lambda ts: _V)(a, c), _typed(_S, out=_V), (1, 1)),
    "translate": (lambda a, c: rowwise(_translate, lambda ts: _V)(a, c), _typed(_S, _S, _S, out=_V), (3, 3)),
    "md5": (lambda a, c: rowwise(_md5, lambda ts: _V)(a, c), _typed(_S, out=_V), (1, 1)),
    "left": (lambda a, c: rowwise(_left, lambda ts: _V)(a, c), _typed(_S, _I, out=_V), (2, 2)),
    "right": (lambda a, c: rowwise(_right, lambda ts: _V)(a, c), _typed(_S, _I, out=_V), (2, 2)),
    "reverse": (lambda a, c: rowwise(lambda s: s[::-1], lambda ts: _V)(a, c), _typed(_S, out=_V), (1, 1)),
    "repeat": (lambda a, c: rowwise(_repeat, lambda ts: _V)(a, c), _typed(_S, _I, out=_V), (2, 2)),
    "strpos": (lambda a, c: rowwise(_strpos, lambda ts: DataType.INT)(a, c), _typed(_S, _S, out=DataType.INT),
               (2, 2)),
    "starts_with": (lambda a, c: rowwise(lambda s, p: s.startswith(p), lambda ts: DataType.BOOLEAN)(a, c),
                    _typed(_S, _S, out=DataType.BOOLEAN), (2, 2)),
    "ascii": (lambda a, c: rowwise(_ascii, lambda ts: DataType.INT)(a, c), _typed(_S, out=DataType.INT), (1, 1)),
    "chr": (lambda a, c: rowwise(_chr, lambda ts: _V)(a, c), _typed(_I, out=_V), (1, 1)),
    "octet_length": (lambda a, c: rowwise(lambda s: len(s.encode("utf-8")), lambda ts: DataType.INT)(a, c),
                     _typed(_S, out=DataType.INT), (1, 1)),
    "regexp_replace": (_regexp_replace, _typed(_S, _S, _S, _S, out=_V), (3, 4)),
    "regexp_count": (_regexp_count, _typed(_S, _S, _I, _S, out=DataType.INT), (2, 4)),
    "format": (lambda a, c: rowwise(_format, lambda ts: _V, strict=False)(a, c),
               lambda ts: _V if ts and ts[0] == _V and all(t.kind not in (TypeKind.STRUCT, TypeKind.LIST)
                                                            for t in ts) else None, (1, None)),
    # date / time
    "date_trunc": (_date_trunc, _date_trunc_type, (2, 2)),
    "extract": (_extract(False), _extract_type(False), (2, 2)),
    "date_part": (_extract(True), _extract_type(True), (2, 2)),
    "to_char": (_to_char, _to_char_type, (2, 2)),
    "to_timestamp": (_to_timestamp, _to_timestamp_type, (1, 2)),
    "make_date": (lambda a, c: rowwise(_make_date, lambda ts: DataType.DATE)(a, c),
                  _typed(_I, _I, _I, out=DataType.DATE), (3, 3)),
    "age": (lambda a, c: rowwise(_age, _age_type)(a, c), _age_type, (2, 2)),
}
