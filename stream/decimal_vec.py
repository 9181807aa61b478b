"""Vectorized fast path for NUMERIC ``+ - *`` and comparisons through Arrow ``decimal128``.

Job: :mod:`stream.expr` tries these first on DECIMAL text columns; each returns None when the
fast path does not apply, and the caller falls back to the exact row-by-row
:mod:`stream.decimal_ops`. It applies when every value is plain (``-?digits[.digits]``: no NaN,
Infinity or exponent) and the operands and the result fit 38 digits.

Invariant: the result is exactly what decimal_ops computes, text included. Postgres keeps a
scale per value (``1.5 + 1`` is ``2.5``, ``1.50 + 1`` is ``2.50``) while a decimal128 column has
one scale, so each row's scale is computed alongside (max of the operands' for ``+ -``, their
sum for ``*``) and the surplus trailing zeros of the column-scale text are cut per row.

Also :func:`scaled_decimals`: a DECIMAL column as int64 coefficients at one scale, so HashAgg
sums NUMERIC per group with numpy (``np.add.reduceat``) and rebuilds each group's exact Decimal,
exponent included (:class:`ScaledDecimals`); None (the row-by-row path) for values that are not
plain or do not fit 18 digits.

Callers: :class:`stream.expr.Arith`, :class:`stream.expr.Cmp`, and casts to text
(:func:`is_plain`: plain text is already Postgres' output); :mod:`stream.executors.agg_call`
(``additive_weights``) and :mod:`stream.executors.hash_agg` (sums).
"""

from __future__ import annotations

import decimal
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PLAIN = r"^-?[0-9]+(\.[0-9]+)?$"
_PLAIN_RE = re.compile(r"-?([0-9]+)(\.[0-9]+)?\Z")
_MAX_DIGITS = 38
_ARITH = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_CMP = {"=": pc.equal, "<>": pc.not_equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
        ">": pc.greater, ">=": pc.greater_equal}


class _Operand:
    """A DECIMAL text array (a scalar is repeated to ``n`` rows) with its per-row scales,
    column scale and the integer digits it needs; ``ok`` False when it is not plain."""

    def __init__(self, value, n: int):
        if isinstance(value, pa.Scalar) and value.is_valid:
            # a constant (``0.908 * price``): its figures from its one text, kept a scalar (Arrow
            # broadcasts it), not repeated to n rows and scanned n times
            self.text = value
            match = _PLAIN_RE.match(value.as_py())
            self.ok = match is not None
            if self.ok:
                digits, fraction = match.group(1), match.group(2) or ""
                self.scale = max(len(fraction) - 1, 0)
                self.scales = pa.scalar(self.scale, pa.int32())
                self.whole = max(len(digits), 1)
            return
        if isinstance(value, pa.Scalar):
            value = pa.nulls(n, pa.string())
        elif isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        self.text = value
        self.ok = is_plain(value)
        if not self.ok:
            return
        length = pc.binary_length(value)
        dot = pc.find_substring(value, ".")
        self.scales = pc.if_else(pc.less(dot, 0), 0, pc.subtract(pc.subtract(length, dot), 1))
        whole = pc.if_else(pc.less(dot, 0), length, dot)
        whole = pc.subtract(whole, pc.cast(pc.starts_with(value, "-"), pa.int32()))
        self.scale = int(pc.max(self.scales).as_py() or 0)
        self.whole = max(int(pc.max(whole).as_py() or 1), 1)

    def decimals(self, precision: int, scale: int) -> pa.Array:
        return pc.cast(self.text, pa.decimal128(precision, scale))


def is_plain(value) -> bool:
    """Whether every value of a DECIMAL text array or scalar is plain ``-?digits[.digits]``."""
    if isinstance(value, pa.Scalar):
        return not value.is_valid or pc.match_substring_regex(value.as_py(), _PLAIN).as_py()
    valid = value.drop_null() if value.null_count else value
    return len(valid) == 0 or bool(pc.all(pc.match_substring_regex(valid, _PLAIN)).as_py())


def _n(left, right) -> int | None:
    for v in (left, right):
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            return len(v)
    return None


def arith(op: str, left, right) -> pa.Array | None:
    """``left op right`` for ``op`` in ``+ - *`` on DECIMAL text (arrays or scalars, at least
    one array), as decimal_ops would compute it; None when the fast path does not apply."""
    n = _n(left, right)
    if op not in _ARITH or n is None:
        return None
    a, b = _Operand(left, n), _Operand(right, n)
    if not (a.ok and b.ok):
        return None
    if op == "*":
        if a.whole + a.scale + b.whole + b.scale + 1 > _MAX_DIGITS:
            return None
        x, y = a.decimals(a.whole + a.scale, a.scale), b.decimals(b.whole + b.scale, b.scale)
        row_scales = pc.add(a.scales, b.scales)
    else:
        whole, scale = max(a.whole, b.whole) + 1, max(a.scale, b.scale)
        if whole + scale > _MAX_DIGITS:
            return None
        x, y = a.decimals(whole + scale, scale), b.decimals(whole + scale, scale)
        row_scales = pc.max_element_wise(a.scales, b.scales)
    try:
        result = _ARITH[op](x, y)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return _trim(result, row_scales)


def _trim(result: pa.Array, row_scales: pa.Array) -> pa.Array | None:
    """The text of ``result`` (one column scale) with each row cut to its own scale."""
    text = pc.cast(result, pa.string())
    if pc.any(pc.match_substring(text, "E")).as_py():   # Arrow prints tiny values as 1E-7
        return None
    col_scale = result.type.scale
    if col_scale == 0:
        return text
    # characters to cut: the surplus zeros, plus the '.' when the row's scale is 0
    cut = pc.subtract(col_scale, row_scales)
    cut = pc.if_else(pc.equal(row_scales, 0), col_scale + 1, cut)
    for k in pc.unique(cut.drop_null() if cut.null_count else cut).to_pylist():
        if k:
            text = pc.if_else(pc.equal(cut, k), pc.utf8_slice_codeunits(text, 0, -k), text)
    return text


def compare(op: str, left, right) -> pa.Array | None:
    """``left op right`` on DECIMAL text (arrays or scalars, at least one array); None when the
    fast path does not apply."""
    n = _n(left, right)
    if n is None:
        return None
    a, b = _Operand(left, n), _Operand(right, n)
    if not (a.ok and b.ok):
        return None
    whole, scale = max(a.whole, b.whole), max(a.scale, b.scale)
    if whole + scale > _MAX_DIGITS:
        return None
    return _CMP[op](a.decimals(whole + scale, scale), b.decimals(whole + scale, scale))


# --- NUMERIC sums as scaled integers (HashAgg's sum/avg of DECIMAL) -----------------------------

_POW10 = np.array([10 ** k for k in range(19)], dtype=np.int64)
_MAX_INT64_DIGITS = 18


class ScaledDecimals:
    """A DECIMAL column's rows as int64 coefficients at one scale ``scale`` (each value times
    ``10**scale``), weighted and split into ``hi``/``lo`` 32-bit halves (per-group sums of
    each then fit int64 exactly, as a BIGINT sum's do), with ``scales``: each row's own scale
    where its weight is not 0, else -1. :meth:`combine` turns per-group sums of the halves
    into the Decimal Python's exact addition of the rows would give: the same value and the
    same exponent (the largest scale among the group's rows, as Postgres' numeric addition
    keeps it), or the int 0 for a group with no row."""

    def __init__(self, hi, lo, scales, scale: int):
        self.hi, self.lo, self.scales, self.scale = hi, lo, scales, scale

    def combine(self, hi_sums, lo_sums, group_scales) -> list:
        out = []
        top = self.scale
        for h, lo, s in zip(hi_sums, lo_sums, group_scales):
            if s < 0:
                out.append(0)
                continue
            total = (h << 32) + lo
            if s < top:
                total //= 10 ** (top - s)   # exact: every row's value has at most s decimals
            out.append(decimal.Decimal(total).scaleb(-s))
        return out


def scaled_decimals(column, weight) -> ScaledDecimals | None:
    """``column`` (DECIMAL text) weighted by ``weight`` (numpy ints, -1/0/+1 per row) as
    :class:`ScaledDecimals`, or None when a weighted value is not plain (NaN, Infinity, an
    exponent) or does not fit an int64 at the column's largest scale (18 digits): the caller
    then adds Decimals row by row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if not n or column.type not in (pa.string(), pa.large_string()):
        return None
    live = weight != 0
    text = column.fill_null("0") if column.null_count else column
    if not live.all():
        text = pc.if_else(pa.array(live), text, "0")
    if not pc.all(pc.match_substring_regex(text, _PLAIN)).as_py():
        return None
    negative = pc.starts_with(text, "-").to_numpy(zero_copy_only=False)
    length = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
    dot = pc.find_substring(text, ".").to_numpy(zero_copy_only=False).astype(np.int64)
    scales = np.where(dot >= 0, length - dot - 1, 0)
    digits = length - negative - (dot >= 0)
    top = int(scales[live].max()) if live.any() else 0
    if int((digits + top - scales).max()) > _MAX_INT64_DIGITS:
        return None
    coefficient = pc.cast(pc.replace_substring(pc.replace_substring(text, "-", ""), ".", ""),
                          pa.int64()).to_numpy(zero_copy_only=False)
    coefficient = coefficient * _POW10[top - scales]
    coefficient = np.where(negative, -coefficient, coefficient) * weight
    return ScaledDecimals(coefficient >> 32, coefficient & 0xFFFFFFFF, np.where(live, scales, -1), top)
