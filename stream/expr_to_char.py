"""``to_char`` of numbers, intervals, dates and time stamps, as PostgreSQL formats them (its
``formatting.c``, C locale: decimal point ``.``, group separator ``,``, currency symbol a space,
signs ``+``/``-``; UTC the only time zone).

Numbers (:func:`number_formatter`): the format is parsed once into pattern nodes (``9 0 . , D G S
MI PL SG PR L FM B TH th V``, upper or lower case; ``"quoted text"``, a backslash before a
double quote, any other character copied) and described as Postgres' ``NUMDesc`` (digits before
and after the point, the first zero, sign placement, fill mode). Each value is turned into the
digit string Postgres builds (``int4out``/``int8out`` with ``.000`` appended for post digits;
``numeric_round`` to the post digits then ``numeric_out``; ``"%.*f"`` for floats with at most
``DBL_DIG``/``FLT_DIG`` significant digits; ``#`` everywhere when the integer part does not fit)
and walked through the pattern as ``NUM_processor`` / ``NUM_numpart_to_char`` do (blank or zero
padding, the sign written before the first digit or at ``S``/``MI``/``PL``/``SG``/``PR``, fill
mode trimming trailing zeros). ``EEEE`` and ``RN`` raise :class:`ExpressionError` (not supported).

Intervals (:func:`interval_char`): the fields of Postgres' ``interval2itm`` (years and months from
the months, days, hours that may exceed 24, minutes, seconds, microseconds, each with the
interval's sign, C truncation) through the date/time patterns: ``HH HH12 HH24 MI SS MS US FF1-6
SSSS SSSSS AM PM A.M. P.M.`` (any case as Postgres' keywords) ``YYYY YYY YY Y Y,YYY MM DD DDD
WW Q CC`` with ``FM``, a negative field one wider (``-05``); the day and month names, ``D``,
``ID``, ``IW``, ``IYYY``, ``J`` and the time zone patterns are Postgres' "invalid format
specification for an interval value" (a :class:`RowError`, a data error per row).

Dates and time stamps (:func:`datetime_char`): the same keyword parser (Postgres' table, case by
case: ``Day`` is a name, ``DDay`` is ``DD`` then text; ``FM`` only before a keyword, ``TH``/``th``
after a number) over the value's fields: every pattern of Postgres' ``DCH_to_char`` (ISO year,
week and day from ``isocalendar``, ``J`` the Julian day, the time zone patterns UTC's; a TIMESTAMP
has no zone name, so ``TZ`` prints nothing for it, as Postgres).

Callers: :mod:`stream.expr_pg` (``to_char``).
"""

from __future__ import annotations

import decimal

import numpy as np

from relational.types import TypeKind
from stream.errors import ExpressionError

# --- numbers -----------------------------------------------------------------------------------

# Postgres' NUM keywords, longest first within a first letter (index_seq_search's table order)
_NUM_KEYWORDS = [",", ".", "0", "9", "B", "C", "D", "EEEE", "FM", "G", "L", "MI", "PL", "PR", "RN", "SG", "SP", "S",
                 "TH", "V", "b", "c", "d", "eeee", "fm", "g", "l", "mi", "pl", "pr", "rn", "sg", "sp", "s", "th", "v"]
_DBL_DIG, _FLT_DIG = 15, 6
_INF = float("inf")


class RowError(ArithmeticError):
    """Postgres rejects this row (the message is its wording); expr_pg reports it per row."""


def _parse(fmt: str) -> list:
    """The format as nodes: ``("k", KEYWORD)`` (upper case but ``th``) or ``("c", text)``."""
    nodes, i, n = [], 0, len(fmt)
    while i < n:
        for kw in _NUM_KEYWORDS:
            if fmt.startswith(kw, i):
                key = kw if kw == "th" else kw.upper()
                nodes.append(("k", key))
                i += len(kw)
                break
        else:
            ch = fmt[i]
            if ch == '"':   # quoted text; a backslash quotes the next character
                i += 1
                while i < n:
                    if fmt[i] == '"':
                        i += 1
                        break
                    if fmt[i] == "\\" and i + 1 < n:
                        i += 1
                    nodes.append(("c", fmt[i]))
                    i += 1
                continue
            if ch == "\\" and i + 1 < n and fmt[i + 1] == '"':
                i += 1
                ch = '"'
            nodes.append(("c", ch))
            i += 1
    return nodes


class _Desc:
    """Postgres' NUMDesc of a parsed format (NUMDesc_prepare)."""

    def __init__(self, nodes):
        self.pre = self.post = self.multi = 0
        self.zero_start = self.zero_end = 0
        self.pre_lsign_num = 0
        self.lsign = None          # None, "pre", "post"
        self.zero = self.decimal = self.fill = self.bracket = self.minus = self.plus = False
        self.multi_flag = False
        for kind, key in nodes:
            if kind != "k":
                continue
            if key == "9":
                if self.bracket:
                    raise ExpressionError('"9" must be ahead of "PR"')
                if self.multi_flag:
                    self.multi += 1
                elif self.decimal:
                    self.post += 1
                else:
                    self.pre += 1
            elif key == "0":
                if self.bracket:
                    raise ExpressionError('"0" must be ahead of "PR"')
                if not self.zero and not self.decimal:
                    self.zero = True
                    self.zero_start = self.pre + 1
                if not self.decimal:
                    self.pre += 1
                else:
                    self.post += 1
                self.zero_end = self.pre + self.post
            elif key in ("D", "."):
                if self.decimal:
                    raise ExpressionError("multiple decimal points")
                if self.multi_flag:
                    raise ExpressionError('cannot use "V" and decimal point together')
                self.decimal = True
            elif key == "FM":
                self.fill = True
            elif key == "S":
                if self.lsign is not None:
                    raise ExpressionError('cannot use "S" twice')
                if self.plus or self.minus or self.bracket:
                    raise ExpressionError('cannot use "S" and "PL"/"MI"/"SG"/"PR" together')
                if not self.decimal:
                    self.lsign, self.pre_lsign_num = "pre", self.pre
                else:
                    self.lsign = "post"
            elif key == "MI":
                if self.lsign is not None:
                    raise ExpressionError('cannot use "S" and "MI" together')
                self.minus = True
            elif key == "PL":
                if self.lsign is not None:
                    raise ExpressionError('cannot use "S" and "PL" together')
                self.plus = True
            elif key == "SG":
                if self.lsign is not None:
                    raise ExpressionError('cannot use "S" and "SG" together')
                self.minus = self.plus = True
            elif key == "PR":
                if self.lsign is not None or self.plus or self.minus:
                    raise ExpressionError('cannot use "PR" and "S"/"PL"/"MI"/"SG" together')
                self.bracket = True
            elif key == "V":
                if self.decimal:
                    raise ExpressionError('cannot use "V" and decimal point together')
                self.multi_flag = True
            elif key in ("EEEE", "RN"):
                raise ExpressionError(f'to_char\'s "{key}" format is not supported')


def number_formatter(fmt: str, kind):
    """A function formatting one non-NULL value of type ``kind`` (an integer, NUMERIC, REAL or
    DOUBLE) with the constant format ``fmt`` as Postgres' to_char (module docstring)."""
    nodes = _parse(fmt)
    desc = _Desc(nodes)   # format errors: at build time

    def to_char(value):
        if not nodes:
            return ""
        pre, post = desc.pre, desc.post
        if kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
            v = int(value)
            if desc.multi_flag:   # int4: C's wrapping product, as Postgres computes it; int8: int8mul
                v *= 10 ** desc.multi
                if kind != TypeKind.BIGINT:
                    v = (v + (1 << 31)) % (1 << 32) - (1 << 31)
                elif not -(1 << 63) <= v < 1 << 63:
                    raise RowError("bigint out of range")
                pre += desc.multi
            sign = "-" if v < 0 else "+"
            digits = str(abs(v))
            int_len = len(digits)
            number = digits + ("." + "0" * post if post else "")
        elif kind == TypeKind.DECIMAL:
            d = decimal.Decimal(value)
            if desc.multi_flag:   # (NaN and the infinities stay what they are)
                d = d.scaleb(desc.multi) if d.is_finite() else d
                pre += desc.multi
            if d.is_nan():
                text = "NaN"
            elif d.is_infinite():
                text = "Infinity" if d > 0 else "-Infinity"
            else:
                q = d.quantize(decimal.Decimal(1).scaleb(-post), rounding=decimal.ROUND_HALF_UP,
                               context=decimal.Context(prec=max(60, d.adjusted() + post + 5)))
                if q == 0:
                    q = abs(q)   # NUMERIC has no negative zero
                text = f"{q:f}"
            sign, number = ("-", text[1:]) if text.startswith("-") else ("+", text)
            int_len = number.find(".") if "." in number else len(number)
        else:
            v = float(value)
            if kind == TypeKind.REAL:
                v = float(np.float32(v))
                if desc.multi_flag:
                    v = float(np.float32(v) * np.float32(10.0 ** desc.multi))
            elif desc.multi_flag:
                v = v * 10.0 ** desc.multi
            if desc.multi_flag:
                pre += desc.multi
            dig = _FLT_DIG if kind == TypeKind.REAL else _DBL_DIG
            plen = len("%.0f" % abs(v))
            if plen >= dig:
                post = 0
            elif plen + post > dig:
                post = dig - plen
            text = "NaN" if v != v else "%.*f" % (post, v)
            sign, number = ("-", text[1:]) if text.startswith("-") else ("+", text)
            int_len = number.find(".") if "." in number else len(number)
            if v in (_INF, -_INF):   # an infinity never fits: every digit position is #
                int_len = pre + 1
        out_pre_spaces = 0
        if int_len < pre:
            out_pre_spaces = pre - int_len
        elif int_len > pre:
            number = "#" * pre + "." + "#" * post
        return _process(nodes, desc, pre, post, number, out_pre_spaces, sign)
    return to_char


def _last_relevant(number: str):
    """Index of the last non-zero digit after the point (or the point itself); None: no point."""
    p = number.find(".")
    if p < 0:
        return None
    result = p
    for i in range(p + 1, len(number)):
        if number[i] != "0":
            result = i
    return result


def _process(nodes, desc, pre, post, number, out_pre_spaces, sign) -> str:
    """Postgres' NUM_processor (to_char direction) over ``number`` (digits, maybe a point)."""
    zero_start = desc.zero_start - 1 if desc.zero_start else 0
    fill, zero, decimal_, lsign = desc.fill, desc.zero, desc.decimal, desc.lsign
    bracket, minus, plus = desc.bracket, desc.minus, desc.plus
    if plus or minus:
        sign_wrote = not (plus and not minus)
    else:
        if sign != "-" and fill:
            bracket = False
        sign_wrote = sign == "+" and fill and lsign is None
        if lsign == "pre" and pre == desc.pre_lsign_num:
            lsign = "post"
    num_count = post + pre - 1
    last_relevant = None
    if fill and decimal_:
        last_relevant = _last_relevant(number)
        if last_relevant is not None and desc.zero_end > out_pre_spaces:
            last_zero = desc.zero_end - out_pre_spaces
            if last_relevant < last_zero:
                last_relevant = last_zero
    if not sign_wrote and out_pre_spaces == 0:
        num_count += 1

    def at(i):
        return number[i] if i < len(number) else ""

    out = []
    st = {"num_in": False, "num_curr": 0, "number_p": 0, "sign_wrote": sign_wrote}

    def predec_space():
        return not zero and st["number_p"] == 0 and number[:1] == "0" and post != 0

    def numpart(key):
        st["num_in"] = False
        lr_dot = last_relevant is not None and at(last_relevant) == "."
        if not st["sign_wrote"] and (st["num_curr"] >= out_pre_spaces or (zero and zero_start == st["num_curr"])) \
                and (not predec_space() or lr_dot):
            if lsign is not None:
                if lsign == "pre":
                    out.append("-" if sign == "-" else "+")
                    st["sign_wrote"] = True
            elif bracket:
                out.append(" " if sign == "+" else "<")
                st["sign_wrote"] = True
            elif sign == "+":
                if not fill:
                    out.append(" ")
                st["sign_wrote"] = True
            elif sign == "-":
                out.append("-")
                st["sign_wrote"] = True
        if key in ("9", "0", "D", "."):
            cur = st["num_curr"]
            if cur < out_pre_spaces and (zero_start > cur or not zero):
                if not fill:
                    out.append(" ")
            elif zero and cur < out_pre_spaces and zero_start <= cur:
                out.append("0")
                st["num_in"] = True
            else:
                np_ = st["number_p"]
                if at(np_) == ".":
                    if not lr_dot:
                        out.append(".")
                    elif fill and lr_dot:
                        out.append(".")
                else:
                    if last_relevant is not None and np_ > last_relevant and key != "0":
                        pass
                    elif predec_space():
                        if not fill:
                            out.append(" ")
                        elif lr_dot:
                            out.append("0")
                    else:   # past the digits: C writes the string's NUL, which ends the output
                        out.append(at(np_) or "\0")
                        st["num_in"] = True
                if at(np_):
                    st["number_p"] += 1
            end = num_count + (1 if out_pre_spaces else 0) + (1 if decimal_ else 0)
            if last_relevant is not None and last_relevant == st["number_p"]:
                end = st["num_curr"]
            if st["num_curr"] + 1 == end:
                if st["sign_wrote"] and bracket:
                    out.append(" " if sign == "+" else ">")
                elif lsign == "post":
                    out.append("-" if sign == "-" else "+")
        st["num_curr"] += 1

    for kind, key in nodes:
        if kind == "c":
            out.append(key)
            continue
        if key in ("9", "0", "D", "."):
            numpart(key)
        elif key in (",", "G"):
            if not st["num_in"]:
                if not fill:
                    out.append(" ")
            else:
                out.append(",")
        elif key == "L":
            out.append(" ")
        elif key in ("TH", "th"):
            if number[:1] == "#" or sign == "-" or decimal_:
                continue
            out.append(_th(number, key == "TH"))
        elif key == "MI":
            if sign == "-":
                out.append("-")
            elif not fill:
                out.append(" ")
        elif key == "PL":
            if sign == "+":
                out.append("+")
            elif not fill:
                out.append(" ")
        elif key == "SG":
            out.append(sign)
    return "".join(out).split("\0", 1)[0]


def _th(number: str, upper: bool) -> str:
    """Postgres' get_th: the ordinal suffix of the digits ``number``."""
    last = number[-1:]
    if not last.isdigit():
        raise RowError(f'"{number}" is not a number')
    if len(number) > 1 and number[-2] == "1":
        s = "th"
    else:
        s = {"1": "st", "2": "nd", "3": "rd"}.get(last, "th")
    return s.upper() if upper else s


# --- intervals ---------------------------------------------------------------------------------

# Postgres' date/time keywords as its parser matches them (case-exact variants, longest first
# within a first letter) and the names this module refuses for intervals: Postgres' own "invalid
# for an interval" ones (``_INVALID``) and those it computes from a calendar date no interval has
# (``_UNSUPPORTED``, refused by name when the node is built)
_DCH_KEYWORDS = [
    "A.D.", "A.M.", "AD", "AM", "B.C.", "BC", "CC", "DAY", "DDD", "DD", "DY", "Day", "Dy", "D",
    "FF1", "FF2", "FF3", "FF4", "FF5", "FF6", "FX", "HH24", "HH12", "HH", "IDDD", "ID", "IW", "IYYY", "IYY", "IY",
    "I", "J", "MI", "MM", "MONTH", "MON", "MS", "Month", "Mon", "OF", "P.M.", "PM", "Q", "RM", "SSSSS", "SSSS",
    "SS", "TZH", "TZM", "TZ", "US", "WW", "W", "Y,YYY", "YYYY", "YYY", "YY", "Y",
    "a.d.", "a.m.", "ad", "am", "b.c.", "bc", "cc", "day", "ddd", "dd", "dy", "d", "ff1", "ff2", "ff3", "ff4",
    "ff5", "ff6", "fx", "hh24", "hh12", "hh", "iddd", "id", "iw", "iyyy", "iyy", "iy", "i", "j", "mi", "mm",
    "month", "mon", "ms", "of", "p.m.", "pm", "q", "rm", "sssss", "ssss", "ss", "tzh", "tzm", "tz", "us", "ww",
    "w", "y,yyy", "yyyy", "yyy", "yy", "y"]
_INVALID = {"A.D.", "AD", "B.C.", "BC", "DAY", "DY", "D", "ID", "MONTH", "MON", "OF", "TZH", "TZM", "TZ"}
_UNSUPPORTED = {"IDDD", "IYYY", "IYY", "IY", "I", "RM", "W"}


def _dch_nodes(fmt: str) -> list:
    """The format as Postgres' parse_format reads it: ``(keyword, fm, th)`` nodes (``th``:
    None, "TH" or "th") and ``(None, text)`` literals; ``FM`` only as a keyword's prefix."""
    nodes, i, n = [], 0, len(fmt)
    while i < n:
        fm = False
        if fmt.startswith(("FM", "fm"), i):
            fm, i = True, i + 2
            if i >= n:
                break
        kw = next((k for k in _DCH_KEYWORDS if fmt.startswith(k, i)), None)
        if kw is not None:
            i += len(kw)
            th = None
            if fmt.startswith(("TH", "th"), i):
                th, i = fmt[i:i + 2], i + 2
            elif fmt.startswith(("SP", "sp", "TM", "tm"), i):   # (no effect on to_char here)
                i += 2
            nodes.append((kw, fm, th))
            continue
        if fmt[i] == '"':   # quoted text; a backslash quotes the next character
            i += 1
            while i < n and fmt[i] != '"':
                if fmt[i] == "\\" and i + 1 < n:
                    i += 1
                nodes.append((None, fmt[i]))
                i += 1
            i += 1
            continue
        if fmt[i] == "\\" and i + 1 < n and fmt[i + 1] == '"':
            i += 1
        nodes.append((None, fmt[i]))
        i += 1
    return nodes


def _date2j(year: int, month: int, day: int) -> int:
    """Postgres' date2j (C integer division) over any field values."""
    if month > 2:
        month, year = month + 1, year + 4800
    else:
        month, year = month + 13, year + 4799
    century = _cdiv(year, 100)
    return year * 365 - 32167 + _cdiv(year, 4) - century + _cdiv(century, 4) + _cdiv(7834 * month, 256) + day


def _j2day(j: int) -> int:
    d = _cmod(j + 1, 7)
    return d + 7 if d < 0 else d


def _isoweek(year: int, mon: int, mday: int) -> int:
    """Postgres' date2isoweek over any field values."""
    dayn = _date2j(year, mon, mday)
    day4 = _date2j(year, 1, 4)
    day0 = _j2day(day4 - 1)
    if dayn < day4 - day0:
        day4 = _date2j(year - 1, 1, 4)
        day0 = _j2day(day4 - 1)
    result = _cdiv(dayn - (day4 - day0), 7) + 1
    if result >= 52:
        day4 = _date2j(year + 1, 1, 4)
        day0 = _j2day(day4 - 1)
        if dayn >= day4 - day0:
            result = _cdiv(dayn - (day4 - day0), 7) + 1
    return result


def _cdiv(a: int, b: int) -> int:
    """C's ``a / b`` (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _itm(iv):
    """Postgres' interval2itm: (years, months, days, hours, minutes, seconds, microseconds)."""
    years = _cdiv(iv.months, 12)
    t = iv.usecs
    hours = _cdiv(t, 3_600_000_000)
    t -= hours * 3_600_000_000
    minutes = _cdiv(t, 60_000_000)
    t -= minutes * 60_000_000
    seconds = _cdiv(t, 1_000_000)
    return years, iv.months - years * 12, iv.days, hours, minutes, seconds, t - seconds * 1_000_000


def _cmod(a: int, b: int) -> int:
    """C's ``a % b`` (the sign of ``a``)."""
    r = abs(a) % b
    return -r if a < 0 else r


def interval_char(fmt: str):
    """A function formatting one non-NULL interval with the constant format ``fmt`` (module
    docstring); an empty format gives NULL, as Postgres."""
    nodes = _dch_nodes(fmt)
    for node in nodes:
        if node[0] is not None and node[0].upper() in _UNSUPPORTED:
            raise ExpressionError(f"to_char's \"{node[0]}\" of an interval is not supported")

    def to_char(iv):
        if not fmt:
            return None
        year, mon, mday, hour, minute, sec, usec = _itm(iv)
        yday = (year * 12 + mon) * 30 + mday
        out = []
        for node in nodes:
            kw = node[0]
            if kw is None:
                out.append(node[1])
                continue
            _, fm, th = node
            up = kw.upper()

            def num(v, width, widen=True):   # C's "%0*d" (a negative value one wider); FM: no padding
                return str(v) if fm else f"{v:0{width + 1 if widen and v < 0 else width}d}"
            if up in _INVALID:
                raise RowError("invalid format specification for an interval value")
            if up in ("AM", "PM", "A.M.", "P.M."):
                text = ("P" if _cmod(hour, 24) >= 12 else "A") + ("M" if len(up) == 2 else ".M.")
                out.append(text if kw[0].isupper() else text.lower())
                continue
            if up == "FX":
                continue
            if up in ("HH", "HH12"):
                h = _cmod(hour, 12)
                text = str(12 if h == 0 else h) if fm else f"{12 if h == 0 else h:0{2 if hour >= 0 else 3}d}"
            elif up == "HH24":
                text = num(hour, 2)
            elif up == "MI":
                text = num(minute, 2)
            elif up == "SS":
                text = num(sec, 2)
            elif up == "MS":
                text = f"{_cdiv(usec, 1000):03d}"
            elif up == "US":
                text = f"{usec:06d}"
            elif up.startswith("FF"):
                k = int(up[2])
                text = f"{_cdiv(usec, 10 ** (6 - k)):0{k}d}"
            elif up in ("SSSS", "SSSSS"):
                text = str(hour * 3600 + minute * 60 + sec)
            elif up == "Y,YYY":
                i = _cdiv(year, 1000)
                text = f"{i},{year - i * 1000:03d}"
            elif up == "YYYY":
                text = num(year, 4)
            elif up in ("YYY", "YY", "Y"):   # the last digits, with the year's sign
                text = num(_cmod(year, 10 ** len(up)), len(up))
            elif up == "MM":
                text = num(mon, 2)
            elif up == "DD":
                text = num(mday, 2, False)
            elif up == "DDD":
                text = num(yday, 3, False)
            elif up == "WW":
                text = num(_cdiv(yday - 1, 7) + 1, 2, False)
            elif up == "Q":
                if not mon:
                    continue
                text = str(_cdiv(mon - 1, 3) + 1)
            elif up == "CC":
                i = _cdiv(year, 100)
                text = str(i) if fm or not -99 <= i <= 99 else f"{i:0{2 if i >= 0 else 3}d}"
            elif up == "J":
                text = str(_date2j(year, mon, mday))
            elif up == "IW":
                text = num(_isoweek(year, mon, mday), 2, False)
            else:   # (not reached: every keyword is handled or refused above)
                raise ExpressionError(f"to_char's \"{kw}\" of an interval is not supported")
            out.append(text + (_th(text, th == "TH") if th else ""))
        return "".join(out)
    return to_char


# --- dates and time stamps -----------------------------------------------------------------------

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_ROMAN_MONTHS = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII"]


def _cased(text: str, kw: str) -> str:
    """A name spelled as its keyword is: ``MONTH`` upper, ``Month`` capitalised, ``month`` lower."""
    if kw.isupper():
        return text.upper()
    return text.lower() if kw.islower() else text


def datetime_char(fmt: str, with_zone: bool):
    """A function formatting one non-NULL ``datetime.datetime`` (a DATE reads as its midnight)
    with the constant format ``fmt`` as Postgres' timestamp[tz]_to_char (``with_zone``: the time
    zone patterns name UTC, the only zone here; a TIMESTAMP has no zone name); an empty format
    gives NULL."""
    nodes = _dch_nodes(fmt)

    def to_char(d):
        if not fmt:
            return None
        year, mon, mday, hour = d.year, d.month, d.day, d.hour
        yday = d.timetuple().tm_yday
        wday = (d.weekday() + 1) % 7   # Sunday 0
        iso_year, iso_week, iso_day = d.isocalendar()
        usec = d.microsecond
        out = []
        for node in nodes:
            kw = node[0]
            if kw is None:
                out.append(node[1])
                continue
            _, fm, th = node
            up = kw.upper()

            def num(v, width):   # C's "%0*d"; FM: no padding
                return str(v) if fm else f"{v:0{width}d}"
            if up in ("AM", "PM", "A.M.", "P.M."):
                text = ("P" if hour >= 12 else "A") + ("M" if len(up) == 2 else ".M.")
                out.append(text if kw[0].isupper() else text.lower())
                continue
            if up in ("AD", "BC", "A.D.", "B.C."):
                text = "AD" if len(up) == 2 else "A.D."
                out.append(text if kw[0].isupper() else text.lower())
                continue
            if up in ("MONTH", "DAY"):
                name = _cased(_MONTHS[mon - 1] if up == "MONTH" else _DAYS[wday], kw)
                out.append(name if fm else name.ljust(9))
                continue
            if up in ("MON", "DY"):
                out.append(_cased((_MONTHS[mon - 1] if up == "MON" else _DAYS[wday])[:3], kw))
                continue
            if up == "RM":
                name = _ROMAN_MONTHS[mon - 1]
                name = name if kw == "RM" else name.lower()
                out.append(name if fm else name.ljust(4))
                continue
            if up in ("TZ",):
                if with_zone:
                    out.append("UTC" if kw == "TZ" else "utc")
                continue
            if up == "FX":
                continue
            if up == "HH24":
                text = num(hour, 2)
            elif up in ("HH", "HH12"):
                text = num(hour % 12 or 12, 2)
            elif up == "MI":
                text = num(d.minute, 2)
            elif up == "SS":
                text = num(d.second, 2)
            elif up == "MS":
                text = f"{usec // 1000:03d}"
            elif up == "US":
                text = f"{usec:06d}"
            elif up.startswith("FF"):
                k = int(up[2])
                text = f"{usec // 10 ** (6 - k):0{k}d}"
            elif up in ("SSSS", "SSSSS"):
                text = str(hour * 3600 + d.minute * 60 + d.second)
            elif up == "TZH":
                text = "+00"
            elif up == "TZM":
                text = "00"
            elif up == "OF":
                text = "+0" if fm else "+00"
            elif up == "Y,YYY":
                text = f"{year // 1000},{year % 1000:03d}"
            elif up in ("YYYY", "IYYY"):
                text = num(year if up == "YYYY" else iso_year, 4)
            elif up in ("YYY", "YY", "Y", "IYY", "IY", "I"):
                width = len(up) if up[0] == "Y" else {"IYY": 3, "IY": 2, "I": 1}[up]
                y = year if up[0] == "Y" else iso_year
                text = num(y % 10 ** width, width)
            elif up == "MM":
                text = num(mon, 2)
            elif up == "DD":
                text = num(mday, 2)
            elif up == "DDD":
                text = num(yday, 3)
            elif up == "IDDD":
                text = num((iso_week - 1) * 7 + iso_day, 3)
            elif up == "D":
                text = str(wday + 1)
            elif up == "ID":
                text = str(iso_day)
            elif up == "WW":
                text = num((yday - 1) // 7 + 1, 2)
            elif up == "IW":
                text = num(iso_week, 2)
            elif up == "W":
                text = str((mday - 1) // 7 + 1)
            elif up == "Q":
                text = str((mon - 1) // 3 + 1)
            elif up == "CC":
                text = num((year - 1) // 100 + 1, 2)
            elif up == "J":
                text = str(d.toordinal() + 1721425)
            else:   # (not reached: every keyword is handled above)
                raise ExpressionError(f"to_char's \"{kw}\" is not supported")
            out.append(text + (_th(text, th == "TH") if th and up not in ("TZH", "TZM", "OF") else ""))
        return "".join(out)
    return to_char
