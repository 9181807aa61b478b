"""NUMERIC(p, s) typmods: rounding a NUMERIC value or column to a declared precision and scale
as Postgres' ``apply_typmod`` does (``numeric(5,2)`` columns, ``x::numeric(5,2)`` casts).

Job: :func:`check_typmod` says whether ``(precision, scale)`` is a typmod Postgres accepts
(precision 1..1000, scale 0..1000 here: sqlglot does not parse Postgres 15's negative scales);
:func:`apply_value` rounds one ``Decimal`` to scale ``s`` half away from zero and refuses it
when its integer part needs more than ``p - s`` digits; :func:`apply_column` does the same to
a DECIMAL column (Arrow strings, relational/arrow.py) and is what every write path and cast
calls.

Semantics (Postgres 18, checked against the server): the rounded value must be less than
``10^(p - s)`` in absolute value, else "numeric field overflow" with Postgres' detail ("A field
with precision 5, scale 2 must round to an absolute value less than 10^3"); NaN passes
unchanged; +-Infinity is refused ("cannot hold an infinite value"); the result has exactly
``s`` digits after the point (``12.3`` -> ``12.30``) and never a negative zero (``-0.001`` ->
``0.00``).

Vectorized: values already written as plain text with at most ``p - s`` integer digits and at
most ``s`` fraction digits (the common case: what an application sends) are matched by one regex
over the column and padded to scale ``s`` by an Arrow ``decimal128`` round trip; plain values
with more fraction digits are rounded by Arrow's ``round`` (half towards infinity, i.e. away
from zero) in ``decimal128``; only the other rows (an exponent, NaN, Infinity, an overflow, more
than 37 digits) are read row by row with Python decimals. A column without a typmod never comes here.

Callers: :class:`stream.expr_cast.Cast` (a cast with a typmod, batch and MV), the SQL layer's
write checks (``sql.column_checks``), sql.types (declared typmods).
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc

from stream import decimal_ops as D

MAX_PRECISION = 1000   # Postgres' NUMERIC_MAX_PRECISION
MAX_SCALE = 1000       # NUMERIC_MAX_SCALE
_NAN = decimal.Decimal("NaN")
_VECTOR_PRECISION = 38  # decimal128 holds the padded values of typmods up to this precision


def check_typmod(precision: int, scale: int) -> str | None:
    """None when ``NUMERIC(precision, scale)`` is a valid typmod, else Postgres' message."""
    if not 1 <= precision <= MAX_PRECISION:
        return f"NUMERIC precision {precision} must be between 1 and {MAX_PRECISION}"
    if not 0 <= scale <= MAX_SCALE:
        return f"NUMERIC scale {scale} must be between 0 and {MAX_SCALE}"
    return None


def type_text(precision: int, scale: int) -> str:
    """Postgres' ``format_type`` of the typmod: ``numeric(5,2)``."""
    return f"numeric({precision},{scale})"


def pg_typmod(precision: int, scale: int) -> int:
    """The ``atttypmod`` Postgres stores for ``numeric(precision, scale)``."""
    return ((precision << 16) | (scale & 0x7FF)) + 4


def _overflow(precision: int, scale: int, infinite: bool = False) -> D.RowError:
    if infinite:
        detail = "cannot hold an infinite value"
    else:
        detail = f"must round to an absolute value less than 10^{precision - scale}"
    return D.RowError(f"numeric field overflow: a field with precision {precision}, scale {scale} {detail}")


def apply_value(d: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """``d`` rounded to ``scale`` (half away from zero), or a RowError (module docstring)."""
    if d.is_nan():
        return _NAN   # Postgres has one NaN (no sign, no payload)
    if d.is_infinite():
        raise _overflow(precision, scale, True)
    D.check(d)
    if d and d.adjusted() >= precision - scale + 1:   # far too large: refuse before rounding builds digits
        raise _overflow(precision, scale)
    out = d.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP, context=D._EXACT)
    if out and out.adjusted() >= precision - scale:
        raise _overflow(precision, scale)
    if not out and out.is_signed():
        out = out.copy_negate()
    return out


def _fits_regex(precision: int, scale: int) -> str | None:
    """Plain text that fits the typmod without rounding (None: no vectorized path)."""
    digits = precision - scale
    if precision > _VECTOR_PRECISION or digits < 1:
        return None
    fraction = rf"(\.[0-9]{{1,{scale}}})?" if scale else ""
    return rf"^-?[0-9]{{1,{digits}}}{fraction}$"


def _round_plain(column, out, rest, precision: int, scale: int):
    """``(out, rest)``: the ``rest`` rows of ``column`` that are plain decimal text (no
    exponent, NaN or Infinity) of at most 37 digits, rounded half away from zero through
    ``decimal128`` and written into ``out`` when they fit the typmod; ``rest`` is then the rows
    still to read one by one (None: no row is left)."""
    plain = pc.and_(rest, pc.fill_null(pc.match_substring_regex(column, r"^-?[0-9]+\.[0-9]+$"), False))
    if not pc.any(plain).as_py():
        return out, rest
    texts = pc.filter(column, plain)
    dot = pc.find_substring(texts, ".")
    int_digits = pc.max(pc.subtract(dot, pc.cast(pc.starts_with(texts, "-"), pa.int32()))).as_py()
    frac_digits = pc.max(pc.subtract(pc.subtract(pc.utf8_length(texts), dot), 1)).as_py()
    if int_digits + frac_digits + 1 > _VECTOR_PRECISION:
        return out, rest
    exact = pc.cast(texts, pa.decimal128(int_digits + frac_digits + 1, frac_digits))
    rounded = pc.round(exact, ndigits=scale, round_mode="half_towards_infinity")
    if int_digits + 1 <= precision - scale:   # rounding adds at most one digit: every row fits
        ok = None
    else:
        limit = pa.scalar(decimal.Decimal(10) ** (precision - scale), pa.decimal128(precision - scale + 1, 0))
        ok = pc.less(pc.abs(rounded), limit)
    if ok is not None and not pc.all(ok).as_py():   # the overflows stay for the row-by-row path (its message)
        rounded = pc.filter(rounded, ok)
        done = pc.replace_with_mask(plain, plain, ok)
    else:
        done = plain
    if len(rounded):
        text = pc.cast(pc.cast(rounded, pa.decimal128(precision, scale), safe=False), pa.string())
        out = pc.replace_with_mask(out, done, text)
    rest = pc.and_(rest, pc.invert(done))
    return out, (rest if pc.any(rest).as_py() else None)


def apply_column(column, precision: int, scale: int):
    """``(column, first error, failed rows)``: the DECIMAL text ``column`` (array or scalar)
    with every value through :func:`apply_value`; a failed row is NULL (the caller raises
    or counts it)."""
    if isinstance(column, pa.Scalar):
        if not column.is_valid:
            return column, None, 0
        try:
            out = apply_value(D.decode(column)[0][0], precision, scale)
        except D.RowError as exc:
            return pa.scalar(None, pa.string()), str(exc), 1
        return D.encode([out], True), None, 0
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0 or column.null_count == len(column):
        return column, None, 0
    pattern = _fits_regex(precision, scale)
    if pattern is None:
        fits = pa.array([False] * len(column))
    else:
        fits = pc.fill_null(pc.and_(pc.match_substring_regex(column, pattern),
                                    pc.invert(pc.match_substring_regex(column, r"^-0*(\.0*)?$"))), True)
    n_fit = pc.sum(fits).as_py() or 0
    out = column
    if n_fit:   # plain values that fit: padded to the scale, vectorized
        padded = pc.cast(pc.cast(pc.filter(column, fits), pa.decimal128(precision, scale)), pa.string())
        if n_fit == len(column):
            return padded, None, 0
        out = pc.replace_with_mask(out, fits, padded)
    rest = pc.invert(fits)
    if pattern is not None:   # plain values with more fraction digits: rounded by Arrow where they fit
        out, rest = _round_plain(column, out, rest, precision, scale)
        if rest is None:
            return out, None, 0
    values, message, failed = [], None, 0
    for text in pc.filter(column, rest).to_pylist():   # the others, row by row
        try:
            values.append(D._text(apply_value(D._read(text), precision, scale)))
        except D.RowError as exc:
            values.append(None)
            failed += 1
            message = message or str(exc)
    return pc.replace_with_mask(out, rest, pa.array(values, pa.string())), message, failed
