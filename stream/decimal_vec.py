"""Vectorized fast path for NUMERIC ``+ - *`` and comparisons through Arrow ``decimal128``.

Job: :mod:`stream.expr` tries these first on DECIMAL text columns; each returns None when the
fast path does not apply, and the caller falls back to the exact row-by-row
:mod:`stream.decimal_ops`. It applies when every value is plain (``-?digits[.digits]``: no NaN,
Infinity or exponent) and the operands and the result fit 38 digits.

Invariant: the result is exactly what decimal_ops computes, text included. Postgres keeps a
scale per value (``1.5 + 1`` is ``2.5``, ``1.50 + 1`` is ``2.50``) while a decimal128 column has
one scale, so each row's scale is computed alongside (max of the operands' for ``+ -``, their
sum for ``*``) and the surplus trailing zeros of the column-scale text are cut per row.

Callers: :class:`stream.expr.Arith`, :class:`stream.expr.Cmp`, and casts to text
(:func:`is_plain`: plain text is already Postgres' output).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_PLAIN = r"^-?[0-9]+(\.[0-9]+)?$"
_MAX_DIGITS = 38
_ARITH = {"+": pc.add_checked, "-": pc.subtract_checked, "*": pc.multiply_checked}
_CMP = {"=": pc.equal, "<>": pc.not_equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
        ">": pc.greater, ">=": pc.greater_equal}


class _Operand:
    """A DECIMAL text array (a scalar is repeated to ``n`` rows) with its per-row scales,
    column scale and the integer digits it needs; ``ok`` False when it is not plain."""

    def __init__(self, value, n: int):
        if isinstance(value, pa.Scalar):
            value = pa.repeat(value, n) if value.is_valid else pa.nulls(n, pa.string())
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
