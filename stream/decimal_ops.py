"""Exact NUMERIC (DECIMAL) arithmetic, comparisons, casts and functions for :mod:`stream.expr`.

DECIMAL columns are Arrow strings holding ``str(Decimal)`` (relational/arrow.py), of any scale,
with NaN and +-Infinity. Operations decode a column to ``decimal.Decimal`` values, compute
row by row with Postgres' numeric rules and encode the results back:

- ``+ - *`` and ``%`` are exact (result scale: max of the scales for ``+ - %``, their sum for
  ``*``; ``%`` has the dividend's sign); ``/`` rounds half away from zero to Postgres'
  ``select_div_scale`` (at least 16 significant digits, at least either operand's scale).
- NaN equals NaN and sorts above every other value (Postgres); NaN in, NaN out for arithmetic;
  ``Infinity - Infinity`` and ``0 * Infinity`` are NaN.
- Results never have a negative scale or a negative zero (``1E+2`` is stored as ``100``):
  :func:`encode` normalizes, and :func:`decode` reads a stored ``1E+2`` as ``100``.
- Range: Postgres' numeric holds at most 131072 digits before the decimal point and 16383
  after it; an operand or result beyond that is a row error "value overflows numeric format"
  (checked before computing: ``1e1000000000 + 1`` would otherwise build a billion digits).
- Casts: integers and text exactly; REAL/DOUBLE through 6/15 significant digits (Postgres'
  ``float4_numeric``/``float8_numeric``); to integers half away from zero with a range check;
  to text in plain notation. :func:`stored_texts` checks a column of user text
  (``insert_arrow``) the same way before it is stored.

Row errors (division by zero, an integer out of range, NaN to an integer, bad text) raise
:class:`RowError`; :func:`map_rows` turns them into NULLs and reports how many rows failed,
and the caller (stream/expr.py) decides whether that raises (batch, DML) or is counted
(streaming). Python loops over the rows: DECIMAL is exact and arbitrary-precision, which no
Arrow kernel is; every other type stays vectorized in stream/expr.py.
"""

from __future__ import annotations

import decimal
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

Decimal = decimal.Decimal

# exact + - * %: no rounding at any size; division picks its own precision (div)
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                         rounding=decimal.ROUND_HALF_UP, traps=[decimal.DivisionByZero, decimal.Overflow])
_ONE = Decimal(1)
_INT_RANGES = {"SMALLINT": (-(1 << 15), (1 << 15) - 1, "smallint"), "INT": (-(1 << 31), (1 << 31) - 1, "integer"),
               "BIGINT": (-(1 << 63), (1 << 63) - 1, "bigint")}


class RowError(ArithmeticError):
    """One row's value failed (the message says why, as Postgres words it)."""


# --- Arrow <-> Python --------------------------------------------------------------------------

def decode(value):
    """``(values, is_scalar)``: the Decimals (None = NULL) of an Arrow string array or scalar."""
    if isinstance(value, pa.Scalar):
        return [None if not value.is_valid else _read(value.as_py())], True
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    return [None if v is None else _read(v) for v in value.to_pylist()], False


def _read(text: str) -> Decimal:
    d = Decimal(text)
    return normalize(d) if "E+" in text else d   # a stored 1E+2 is the numeric 100 (scale 0)


def encode(values, scalar: bool):
    """Decimals (None = NULL) as an Arrow string array, or a scalar when ``scalar``."""
    texts = [None if v is None else _text(v) for v in values]
    return pa.scalar(texts[0], pa.string()) if scalar else pa.array(texts, pa.string())


def _text(d: Decimal) -> str:
    text = str(d)
    if "E+" in text or (text[0] == "-" and not d):   # the rare cases normalize() changes
        return str(normalize(d))
    return text


def normalize(d: Decimal) -> Decimal:
    """No negative scale and no negative zero (Postgres numerics have neither)."""
    if not d.is_finite():
        return d
    if d.as_tuple().exponent > 0:
        d = d.quantize(_ONE, context=_EXACT)
    if not d and d.is_signed():
        d = d.copy_negate()
    return d


def map_rows(fn, columns, n: int | None):
    """``fn`` over the rows of ``columns`` (lists; a 1-element list of a scalar broadcasts to
    ``n`` rows when ``n`` is given). A row with a NULL argument is NULL; a row whose ``fn``
    raises :class:`RowError` is NULL too. Returns ``(values, first error message, failed rows)``."""
    if n is not None:
        columns = [repeat(c[0], n) if len(c) == 1 and n != 1 else c for c in columns]
    out, message, failed = [], None, 0
    for row in zip(*columns):
        if None in row:
            out.append(None)
            continue
        try:
            out.append(fn(*row))
        except RowError as exc:
            out.append(None)
            failed += 1
            message = message or str(exc)
    return out, message, failed


# --- operators -----------------------------------------------------------------------------------

_MAX_WEIGHT = 131072   # digits before the decimal point (Postgres NUMERIC_WEIGHT_MAX, in base 10)
_MAX_SCALE = 16383     # digits after it (NUMERIC_DSCALE_MAX)


def check(d: Decimal) -> Decimal:
    """``d`` when Postgres' numeric can hold it, else a RowError (module docstring)."""
    if d.is_finite() and d:
        exponent = d.as_tuple().exponent
        if d.adjusted() >= _MAX_WEIGHT or -exponent > _MAX_SCALE:
            raise RowError("value overflows numeric format")
    return d


def _checked(op, multiply=False):
    def run(a, b):
        check(a)
        check(b)
        if multiply and a and b and a.is_finite() and b.is_finite() and a.adjusted() + b.adjusted() >= _MAX_WEIGHT:
            raise RowError("value overflows numeric format")
        return check(op(a, b))
    return run


def _scale(d: Decimal) -> int:
    exponent = d.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def _weight(x: Decimal) -> tuple:
    """Postgres' base-10000 weight and first base-10000 digit of ``x``."""
    if not x:
        return 0, 0
    a = x.copy_abs()
    weight = a.adjusted() // 4
    return weight, int(a.scaleb(-4 * weight, context=_EXACT))


_TRUNCATING: dict = {}   # precision -> a truncating context, for div
_QUANTUM: dict = {}      # scale -> 10**-scale


def div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` rounded like Postgres' ``numeric_div`` (module docstring)."""
    if b.is_nan() or a.is_nan():
        return Decimal("NaN")
    if not b:
        raise RowError("division by zero")
    if not a.is_finite():
        return Decimal("NaN") if b.is_infinite() else (a if (b > 0) else -a)
    if b.is_infinite():
        return Decimal(0)
    (w1, f1), (w2, f2) = _weight(a), _weight(b)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    scale = min(max(16 - qweight * 4, _scale(a), _scale(b), 0), 1000)
    digits = max(1, a.adjusted() - b.adjusted() + 2 + scale + 2)
    ctx = _TRUNCATING.get(digits)
    if ctx is None:
        ctx = _TRUNCATING[digits] = decimal.Context(prec=digits, rounding=decimal.ROUND_DOWN, Emax=decimal.MAX_EMAX,
                                                    Emin=decimal.MIN_EMIN)
    quantum = _QUANTUM.get(scale)
    if quantum is None:
        quantum = _QUANTUM[scale] = _ONE.scaleb(-scale)
    # truncate with guard digits, then round once: no double rounding (the scale is >= 0, so
    # only a negative zero is left to normalize, which encode does)
    return ctx.divide(a, b).quantize(quantum, context=_EXACT)


def mod(a: Decimal, b: Decimal) -> Decimal:
    if a.is_nan() or b.is_nan():
        return Decimal("NaN")
    if not b:
        raise RowError("division by zero")
    if a.is_infinite():
        return Decimal("NaN")
    if b.is_infinite():
        return normalize(a)
    return normalize(_EXACT.remainder(a, b))


def _quiet(op):
    def run(a, b):   # the result is normalized when it is encoded
        try:
            return op(a, b)
        except decimal.InvalidOperation:   # inf - inf, 0 * inf
            return Decimal("NaN")
    return run


ARITH = {"+": _checked(_quiet(_EXACT.add)), "-": _checked(_quiet(_EXACT.subtract)),
         "*": _checked(_quiet(_EXACT.multiply), multiply=True), "/": _checked(div), "%": _checked(mod)}


def sort_key(d: Decimal) -> tuple:
    """Postgres' numeric order: NaN equals NaN and is above everything else."""
    return (1, 0) if d.is_nan() else (0, d)


CMP = {"=": lambda a, b: sort_key(a) == sort_key(b), "<>": lambda a, b: sort_key(a) != sort_key(b),
       "!=": lambda a, b: sort_key(a) != sort_key(b), "<": lambda a, b: sort_key(a) < sort_key(b),
       "<=": lambda a, b: sort_key(a) <= sort_key(b), ">": lambda a, b: sort_key(a) > sort_key(b),
       ">=": lambda a, b: sort_key(a) >= sort_key(b)}


# --- casts -----------------------------------------------------------------------------------------

def from_float(x: float, digits: int = 15) -> Decimal:
    """REAL (``digits`` 6) or DOUBLE (15) to NUMERIC as Postgres rounds it."""
    if x != x:
        return Decimal("NaN")
    if x in (float("inf"), float("-inf")):
        return Decimal("Infinity") if x > 0 else Decimal("-Infinity")
    return normalize(Decimal(format(x, f".{digits}g")))


_CANONICAL = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$"   # plain text as encode() writes it (when not too long)


def stored_texts(column: pa.Array) -> pa.Array:
    """A DECIMAL column given as text (``insert_arrow``) as it is stored: every value a number
    Postgres' numeric holds, in :func:`encode`'s text. Plain canonical text passes as it is (one
    regex over the column); anything else is read row by row (:func:`from_text`), so ``1e200000``
    or ``'garbage'`` raises :class:`RowError` before any row is written."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = column.drop_null() if column.null_count else column
    if len(valid) == 0 or (pc.max(pc.utf8_length(valid)).as_py() <= _MAX_SCALE   # within both limits
                           and pc.all(pc.match_substring_regex(valid, _CANONICAL)).as_py()
                           and not pc.any(pc.match_substring_regex(valid, r"^-0(\.0*)?$")).as_py()):
        return column
    return encode([None if v is None else from_text(v) for v in column.to_pylist()], False)


def from_text(s: str) -> Decimal:
    text = s.strip()
    low = text.lower()
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return Decimal("Infinity")
    if low in ("-inf", "-infinity"):
        return Decimal("-Infinity")
    try:
        d = Decimal(text)
    except decimal.InvalidOperation:
        raise RowError(f"invalid input syntax for type numeric: {s!r}") from None
    if d.is_snan() or "_" in text:
        raise RowError(f"invalid input syntax for type numeric: {s!r}")
    return normalize(check(d))


def to_int(d: Decimal, kind: str) -> int:
    """Half away from zero, as Postgres' numeric -> integer casts; ``kind`` SMALLINT/INT/BIGINT."""
    if d.is_nan():
        raise RowError(f"cannot convert NaN to {_INT_RANGES[kind][2]}")
    if d.is_infinite():
        raise RowError(f"cannot convert infinity to {_INT_RANGES[kind][2]}")
    value = int(d.to_integral_value(rounding=decimal.ROUND_HALF_UP, context=_EXACT))
    lo, hi, name = _INT_RANGES[kind]
    if not lo <= value <= hi:
        raise RowError(f"{name} out of range")
    return value


def to_text(d: Decimal) -> str:
    if d.is_nan():
        return "NaN"
    if d.is_infinite():
        return "Infinity" if d > 0 else "-Infinity"
    return format(d, "f")


# --- functions --------------------------------------------------------------------------------------

def round_to(d: Decimal, digits: int = 0) -> Decimal:
    """Postgres ``round(numeric, int)``: half away from zero; scale ``max(digits, 0)``."""
    if not d.is_finite():
        return d
    check(d)
    digits = max(min(digits, 2000), -2000)   # Postgres clamps to NUMERIC_MAX_RESULT_SCALE
    return normalize(d.quantize(_ONE.scaleb(-digits), rounding=decimal.ROUND_HALF_UP, context=_EXACT))


def ceil(d: Decimal) -> Decimal:
    return d if not d.is_finite() else normalize(d.to_integral_value(rounding=decimal.ROUND_CEILING))


def floor(d: Decimal) -> Decimal:
    return d if not d.is_finite() else normalize(d.to_integral_value(rounding=decimal.ROUND_FLOOR))


def trunc(d: Decimal) -> Decimal:
    return d if not d.is_finite() else normalize(d.to_integral_value(rounding=decimal.ROUND_DOWN))
