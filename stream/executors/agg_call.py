"""Aggregate calls of HashAgg / SimpleAgg: what each call computes, its Postgres result type,
the slots of per-group state it keeps, and the vectorized per-chunk deltas of those slots.

An :class:`AggCall` is ``kind`` (``count``, ``sum``, ``avg``, ``min``, ``max``, ``bool_and``,
``bool_or``, ``string_agg``, ``array_agg``; the last two with ``order``, their ORDER BY as
``(input column, desc, nulls_first)`` triples, and string_agg's delimiter ``sep``), an input column ``arg`` (``None`` only for ``count(*)``), ``distinct`` (``count``,
``sum``, ``avg``, ``string_agg``, ``array_agg`` over a column: each distinct value counts once;
the binder drops it from min/max/bool_*, which it does not change) and an optional ``filter`` (a :mod:`stream.expr` BOOLEAN expression
over the input columns: ``agg(...) FILTER (WHERE filter)``; a row counts only where it is TRUE).
NULL arguments are ignored, as SQL says.

Result types follow Postgres: ``count`` -> BIGINT; ``sum(smallint|int)`` -> BIGINT (an
overflow raises :class:`AggregateOverflowError`, Postgres' "bigint out of range");
``sum(bigint|decimal)`` -> DECIMAL; ``sum(real)`` -> REAL, ``sum(double)`` -> DOUBLE, a sum of
finite values beyond its type is Postgres' "value out of range: overflow" (also ``avg(double)``),
not an infinity; ``sum(interval)`` -> INTERVAL, added fieldwise (months, days, microseconds) as
Postgres' ``interval_pl``, "interval out of range" when a field does not fit, and
``avg(interval)`` that sum ``/ count`` as ``interval_div`` (in a stream, outside
:func:`stream.expr_errors.raising_errors`, an out-of-range group's result is NULL instead: a
data error, counted and logged, as every data error of a streaming executor is);
``avg(integers|decimal)`` -> DECIMAL (scale chosen like Postgres' numeric division: at least
16 significant digits), ``avg(real|double)`` -> DOUBLE; ``min``/``max`` -> the argument's type
(an INTERVAL ordered by its span, 30-day months and 24-hour days, as Postgres orders it);
``bool_and``/``bool_or`` -> BOOLEAN; ``string_agg(varchar)`` -> VARCHAR, ``array_agg(t)`` -> ``t[]``
(NULL elements kept).

State slots per group (all retractable, so deletes are exact): ``count`` one BIGINT;
``sum``/``avg`` the sum (BIGINT for small integers, DECIMAL for bigint/decimal, DOUBLE for
floats) and the count of non-NULL values, and for floats and NUMERIC the counts of NaN,
+Infinity and -Infinity values, which the sum leaves out (a NaN is forgotten exactly when it
is deleted; the result is NaN while one is there, or both infinities are, else the infinity);
``sum``/``avg`` of INTERVAL the sum of microseconds (DECIMAL), the count, and the sums of months
and of days (BIGINT); ``bool_*`` the counts of TRUE and FALSE values;
a DISTINCT call the slots of its kind over the group's distinct values (their multiplicities live
in the distinct-dedup table, :mod:`stream.executors.agg_distinct`); ``string_agg``/``array_agg`` the current result (recomputed from the
group's ordered materialized input, :mod:`stream.executors.agg_ordered`); ``min``/``max`` the current result (its candidates live in the
materialized-input table unless the input is append-only). Float sums are retracted by
subtraction and so carry the usual rounding error; a stream's float sum that overflowed stays
infinite (so NULL) after its rows are deleted, as a NaN does. An interval sum is checked once,
at the end (Postgres checks each addition, so a sum that leaves the range and comes back is an
error there).

Callers: :mod:`stream.executors.hash_agg`, the SQL planner.
"""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.types import DataType, Interval, TypeKind
from stream.decimal_vec import scaled_decimals
from stream.errors import ExecutorError, ExpressionError
from stream.expr_errors import data_error, strict
from stream.expr_interval import interval_fields, scale_interval

KINDS = ("count", "sum", "avg", "min", "max", "bool_and", "bool_or", "string_agg", "array_agg")
ORDERED_KINDS = ("string_agg", "array_agg")
DISTINCT_KINDS = ("count", "sum", "avg", "string_agg", "array_agg")   # values from the group's ordered materialized input
_SMALL_INTS = (TypeKind.SMALLINT, TypeKind.INT)
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# the decimal context NUMERIC sums are added in (HashAgg, batch aggregates): exact, never the
# default 28 digits (1e30 + 0.5 would lose the 0.5, and retracting 1e30 leave 0)
EXACT_SUMS = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                             rounding=decimal.ROUND_HALF_UP)
_ORDERABLE = (TypeKind.BOOLEAN, TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.DECIMAL, TypeKind.REAL,
              TypeKind.DOUBLE, TypeKind.VARCHAR, TypeKind.BYTEA, TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP,
              TypeKind.TIMESTAMPTZ, TypeKind.INTERVAL)


class AggregateOverflowError(ExecutorError, OverflowError):
    """A result that does not fit its type (``sum(int)`` beyond BIGINT), naming the group."""

    def __init__(self, executor: str, call: str, group):
        self.group = group
        super().__init__(executor, f"{call} is out of range for BIGINT in group {group!r}")


class AggCall:
    """One aggregate call (module docstring). ``bind(input_schema)`` resolves the types."""

    def __init__(self, kind: str, arg: int | None = None, *, distinct: bool = False, filter=None,
                 name: str | None = None, order=(), sep: str | None = None):
        if kind not in KINDS:
            raise ExecutorError("AggCall", f"unknown aggregate {kind!r}; known: {', '.join(KINDS)}")
        if arg is None and kind != "count":
            raise ExecutorError("AggCall", f"{kind} needs an argument column")
        if distinct and (kind not in DISTINCT_KINDS or arg is None):
            raise ExecutorError("AggCall", f"DISTINCT is supported for {', '.join(DISTINCT_KINDS)} of a column only")
        if filter is not None and filter.data_type != DataType.BOOLEAN:
            raise ExecutorError("AggCall", f"a FILTER condition must be BOOLEAN, got {filter.data_type.sql_name()}")
        self.kind, self.arg, self.distinct, self.filter = kind, arg, distinct, filter
        self.name = name
        # string_agg/array_agg: ORDER BY as (input column, desc, nulls_first); string_agg's delimiter
        self.order, self.sep = [tuple(o) for o in order], sep
        self.arg_type: DataType | None = None
        self.return_type: DataType | None = None
        self.slot_types: list = []

    def __repr__(self) -> str:
        inner = "*" if self.arg is None else ("DISTINCT " if self.distinct else "") + f"${self.arg}"
        if self.kind == "string_agg":
            inner += f", {self.sep!r}"
        if self.order:
            inner += " ORDER BY " + ", ".join(f"${c}{' DESC' if d else ''}{' NULLS FIRST' if nf else ' NULLS LAST'}"
                                              for c, d, nf in self.order)
        text = f"{self.kind}({inner})"
        return text if self.filter is None else f"{text} FILTER (WHERE {self.filter})"

    @property
    def is_extreme(self) -> bool:
        return self.kind in ("min", "max")

    @property
    def is_ordered(self) -> bool:
        """string_agg/array_agg: the value is recomputed from the group's ordered materialized
        input (stream/executors/agg_ordered.py), whatever the input (append-only too)."""
        return self.kind in ORDERED_KINDS

    def bind(self, schema) -> AggCall:
        """Resolve argument, result and state slot types against the input ``schema``;
        unsupported argument types raise :class:`ExecutorError`. Returns ``self``."""
        if self.arg is not None:
            if not 0 <= self.arg < len(schema):
                raise ExecutorError("AggCall", f"{self!r}: no input column {self.arg} in {schema!r}")
            self.arg_type = t = schema.types[self.arg]
        kind, k = self.kind, (self.arg_type.kind if self.arg_type is not None else None)
        for c, _, _ in self.order:
            if not 0 <= c < len(schema):
                raise ExecutorError("AggCall", f"{self!r}: no ORDER BY column {c} in {schema!r}")
        if kind == "count":
            self.return_type, self.slot_types = DataType.BIGINT, [DataType.BIGINT]
        elif kind in ("sum", "avg"):
            if k in _SMALL_INTS:
                state, ret = DataType.BIGINT, DataType.BIGINT
            elif k in (TypeKind.BIGINT, TypeKind.DECIMAL):
                state, ret = DataType.DECIMAL, DataType.DECIMAL
            elif k in _FLOATS:
                state, ret = DataType.DOUBLE, t
            elif k == TypeKind.INTERVAL:   # fieldwise: usecs, count, months, days
                self.return_type = t
                self.slot_types = [DataType.DECIMAL, DataType.BIGINT, DataType.BIGINT, DataType.BIGINT]
                return self
            else:
                raise ExecutorError("AggCall", f"{self!r}: {kind} of {t.sql_name()} is not supported")
            if kind == "avg":
                ret = DataType.DOUBLE if k in _FLOATS else DataType.DECIMAL
            # floats and NUMERIC also count their NaN, +Infinity and -Infinity values apart (the
            # sum holds the finite ones): deleting the last NaN gives the finite sum back
            specials = [DataType.BIGINT] * 3 if k in _FLOATS or k == TypeKind.DECIMAL else []
            self.return_type, self.slot_types = ret, [state, DataType.BIGINT, *specials]
        elif kind == "string_agg":
            if k != TypeKind.VARCHAR:
                raise ExecutorError("AggCall", f"{self!r}: string_agg needs a VARCHAR argument")
            self.return_type, self.slot_types = DataType.VARCHAR, [DataType.VARCHAR]
        elif kind == "array_agg":
            if k == TypeKind.LIST:
                raise ExecutorError("AggCall", f"{self!r}: array_agg of arrays is not supported")
            self.return_type = DataType.list(t)
            self.slot_types = [self.return_type]
        elif kind in ("min", "max"):
            if k not in _ORDERABLE:
                raise ExecutorError("AggCall", f"{self!r}: {kind} of {t.sql_name()} is not supported")
            self.return_type, self.slot_types = t, [t]
        else:
            if k != TypeKind.BOOLEAN:
                raise ExecutorError("AggCall", f"{self!r}: {kind} needs a BOOLEAN argument")
            self.return_type, self.slot_types = DataType.BOOLEAN, [DataType.BIGINT, DataType.BIGINT]
        return self

    # --- results ------------------------------------------------------------------------------

    def initial_slots(self) -> list:
        if self.kind in ("min", "max") or self.is_ordered:
            return [None]
        if self.kind in ("sum", "avg"):
            return [0.0 if self.arg_type.kind in _FLOATS else 0] + [0] * (len(self.slot_types) - 1)
        return [0] * len(self.slot_types)

    def value_slots(self, vals) -> list:
        """The state slots of a sum/avg over the non-NULL values ``vals`` (what HashAgg holds
        after inserting them): batch aggregates and window frames compute them this way."""
        if self.arg_type.kind == TypeKind.INTERVAL:
            return [sum(v.usecs for v in vals), len(vals), sum(v.months for v in vals), sum(v.days for v in vals)]
        decimal_state = self.slot_types[0].kind == TypeKind.DECIMAL
        total, nan, pinf, ninf = self.initial_slots()[0], 0, 0, 0
        with decimal.localcontext(EXACT_SUMS):
            for v in vals:
                if decimal_state:
                    v = decimal.Decimal(v)
                if v != v:
                    nan += 1
                elif v in (_POS_INF, _NEG_INF):
                    if v > 0:
                        pinf += 1
                    else:
                        ninf += 1
                else:
                    total += v
        return [total, len(vals)] + ([nan, pinf, ninf] if len(self.slot_types) > 2 else [])

    def result_column(self, slot_cols, executor: str, keys) -> list:
        """The call's output values of many groups at once: ``slot_cols`` are its state slots as
        columns (sequences), ``keys`` the groups (named by an overflow)."""
        kind = self.kind
        if kind == "count" or kind in ("min", "max") or self.is_ordered:
            return list(slot_cols[0])
        if kind in ("sum", "avg") and self.arg_type.kind == TypeKind.INTERVAL:
            return self._interval_results(slot_cols, executor, keys)
        if kind in ("sum", "avg"):
            totals, counts = slot_cols[:2]
            special = _special_results(slot_cols[2:], self.return_type) if len(slot_cols) > 2 else None
            if self.arg_type.kind in _FLOATS:   # Postgres' float8_accum / float4pl: overflow is an error
                totals = self._float_overflow(totals, counts, special, executor, keys)
            if kind == "avg":
                if self.return_type == DataType.DOUBLE:
                    out = [t / c if c and t is not None else None for t, c in zip(totals, counts)]
                else:
                    out = [numeric_div(decimal.Decimal(t), c) if c else None for t, c in zip(totals, counts)]
                return out if special is None else [o if sp is None else sp for o, sp in zip(out, special)]
            out = [t if c else None for t, c in zip(totals, counts)]
            if special is not None:
                out = [o if sp is None else sp for o, sp in zip(out, special)]
            if self.return_type == DataType.BIGINT:
                present = [t for t in out if t is not None]
                if present and (min(present) < _INT64_MIN or max(present) > _INT64_MAX):
                    bad = [i for i, t in enumerate(out) if t is not None and not _INT64_MIN <= t <= _INT64_MAX]
                    if strict():
                        raise AggregateOverflowError(executor, repr(self), keys[bad[0]])
                    for i in bad:   # a stream: the group's result is NULL until it fits again
                        out[i] = None
                    data_error(f"{executor}: {self!r}", "bigint out of range", len(bad))
            return out
        trues, falses = slot_cols
        if kind == "bool_and":
            return [f == 0 if t or f else None for t, f in zip(trues, falses)]
        return [t > 0 if t or f else None for t, f in zip(trues, falses)]

    def _interval_results(self, slot_cols, executor: str, keys) -> list:
        """``sum``/``avg`` of INTERVAL per group: the fieldwise sum (Postgres' ``interval_pl``:
        months, days and microseconds apart), and ``avg`` that sum ``/ count`` (``interval_div``).
        A sum whose field does not fit (months/days int32, microseconds as int64 nanoseconds) is
        "interval out of range": raised in a batch, the group's NULL (a counted data error) in
        a stream."""
        out, bad = [], []
        for i, (usecs, count, months, days) in enumerate(zip(*slot_cols)):
            if not count:
                out.append(None)
                continue
            usecs = int(usecs)
            try:
                if not (_INT32_MIN <= months <= _INT32_MAX and _INT32_MIN <= days <= _INT32_MAX
                        and _USECS_MIN < usecs < _USECS_MAX):
                    raise ValueError("interval out of range")
                if self.kind == "avg":
                    months, days, usecs = scale_interval(months, days, usecs, float(count), True)
                out.append(Interval(int(months), int(days), int(usecs)))
            except ValueError:
                bad.append(i)
                out.append(None)
        if bad:
            if strict():
                raise ExpressionError("interval out of range", f"{self!r} of group {keys[bad[0]]!r}")
            data_error(f"{executor}: {self!r}", "interval out of range", len(bad))
        return out

    def _float_overflow(self, totals, counts, special, executor: str, keys) -> list:
        """``totals`` with every group whose finite values' sum overflowed its type (beyond
        DOUBLE: an infinity; ``sum(real)`` beyond REAL) set to None: Postgres raises "value out
        of range: overflow" (in a batch: :class:`~stream.errors.ExpressionError`); in a stream
        the group's result is NULL, a data error counted and logged. An infinite or NaN input
        is not an overflow (its result is in ``special``). Known gap, as for NaN: a stream's
        running total that overflowed stays infinite after the rows are deleted."""
        limit = _REAL_MAX if self.kind == "sum" and self.return_type == DataType.REAL else _DOUBLE_MAX
        bad = [i for i, (t, c) in enumerate(zip(totals, counts))
               if c and not -limit <= t <= limit and (special is None or special[i] is None)]
        if not bad:
            return totals
        if strict():
            raise ExpressionError("value out of range: overflow", f"{self!r} of group {keys[bad[0]]!r}")
        data_error(f"{executor}: {self!r}", "value out of range: overflow", len(bad))
        totals = list(totals)
        for i in bad:   # a stream: the group's result is NULL
            totals[i] = None
        return totals


_POS_INF, _NEG_INF = float("inf"), float("-inf")   # (== Decimal('Infinity') / Decimal('-Infinity'))
_DOUBLE_MAX = 1.7976931348623157e308
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_USECS_MIN, _USECS_MAX = -(1 << 63) // 1000, (1 << 63) // 1000   # Arrow keeps an interval's time in int64 ns
_REAL_MAX = 3.4028234663852886e38


def _special_results(counts, return_type) -> list:
    """Per group: the result its NaN/+Infinity/-Infinity counts force (NaN when a NaN is
    there or both infinities are, else the infinity), or None for the finite result."""
    nans, pinfs, ninfs = counts
    if return_type.kind == TypeKind.DECIMAL:
        nan, pinf, ninf = decimal.Decimal("NaN"), decimal.Decimal("Infinity"), decimal.Decimal("-Infinity")
    else:
        nan, pinf, ninf = float("nan"), _POS_INF, _NEG_INF
    return [nan if n or (p and m) else pinf if p else ninf if m else None for n, p, m in zip(nans, pinfs, ninfs)]


def order_key(value):
    """Postgres's total order of a non-NULL value, for min/max and sorting in Python: NaN
    (REAL/DOUBLE or NUMERIC) equals NaN and is above every other value (a plain ``<`` is
    False for a float NaN and raises for a Decimal NaN)."""
    return (1, 0) if value != value else (0, value)


_NAN = object()
_FLOAT_NAN, _DECIMAL_NAN = float("nan"), decimal.Decimal("NaN")


def same_nan(value):
    """``value``, or one shared NaN object for any float/Decimal NaN: a group key holding it
    is then found again in a dict (lookups compare by identity before ``==``); a float -0.0
    is 0.0 (equal as values, but a different memcomparable pk)."""
    if value != value:
        return _DECIMAL_NAN if isinstance(value, decimal.Decimal) else _FLOAT_NAN
    if value == 0 and isinstance(value, float):
        return 0.0
    return value


def group_key(value):
    """``value`` as a dict/set key where every NaN is the same key (Python's ``nan != nan``
    would make each NaN its own group, unlike Postgres and the memcomparable state keys)."""
    return _NAN if value != value else (0.0 if value == 0 and isinstance(value, float) else value)


def numeric_div(num: decimal.Decimal, den: int) -> decimal.Decimal:
    """``num / den`` as Postgres' numeric division rounds it (``select_div_scale``): at least 16
    significant digits, and at least the dividend's scale; half away from zero."""
    if not num.is_finite():
        return num / den
    d = decimal.Decimal(den)
    weight_num = _base10000_weight(num)
    weight_den = _base10000_weight(d)
    qweight = weight_num - weight_den
    if _first_base10000_digit(num) <= _first_base10000_digit(d):
        qweight -= 1
    scale = max(16 - qweight * 4, -num.as_tuple().exponent if num.as_tuple().exponent < 0 else 0, 0)
    scale = min(scale, 1000)
    ctx = decimal.Context(prec=max(28, scale + len(num.as_tuple().digits) + 8), rounding=decimal.ROUND_HALF_UP)
    q = ctx.divide(num, d)
    return q.quantize(decimal.Decimal(1).scaleb(-scale), context=ctx)


def _base10000_weight(x: decimal.Decimal) -> int:
    if x == 0:
        return 0
    return (x.copy_abs().adjusted()) // 4


def _first_base10000_digit(x: decimal.Decimal) -> int:
    if x == 0:
        return 0
    a = x.copy_abs()
    return int(a.scaleb(-4 * _base10000_weight(x)))


# --- vectorized per-chunk work ---------------------------------------------------------------

def filter_mask(call: AggCall, columns, n: int) -> np.ndarray | None:
    """Rows where the call's FILTER is TRUE (None: no filter)."""
    if call.filter is None:
        return None
    passed = call.filter.eval(columns, n)
    return pc.fill_null(passed, False).to_numpy(zero_copy_only=False)


def valid_mask(column: pa.Array) -> np.ndarray:
    if column.null_count == 0:
        return np.ones(len(column), np.bool_)
    return column.is_valid().to_numpy(zero_copy_only=False)


def _zero_filled(column: pa.Array) -> np.ndarray:
    """A numeric column as numpy, NULLs as 0 (their weight is 0 anyway)."""
    if column.null_count:
        column = column.fill_null(0)
    return column.to_numpy(zero_copy_only=False)


def additive_weights(call: AggCall, column, weight: np.ndarray) -> list:
    """Per-row deltas (numpy arrays, one per state slot) of an additive call; ``weight`` is
    the row's sign (+1/-1) times its FILTER and non-NULL masks. A DECIMAL sum is a
    :class:`~stream.decimal_vec.ScaledDecimals` (int64 coefficients, summed per group with
    numpy) when its values are plain and fit, else a Python list of ``Decimal``."""
    kind = call.kind
    if kind == "count":
        return [weight]
    if kind in ("sum", "avg"):
        k = call.arg_type.kind
        if k in _SMALL_INTS:
            values = _zero_filled(column).astype(np.int64)
            return [values * weight, weight]
        if k == TypeKind.INTERVAL:
            months, days, usecs = interval_fields(column)
            hi, lo = usecs >> 32, usecs & 0xFFFFFFFF   # exact, as a bigint sum's halves
            return [(hi * weight, lo * weight), weight, months * weight, days * weight]
        if k == TypeKind.BIGINT:
            values = _zero_filled(column)
            hi, lo = values >> 32, values & 0xFFFFFFFF   # exact: each part's sum fits int64
            return [(hi * weight, lo * weight), weight]
        if k in _FLOATS:
            values = _zero_filled(column).astype(np.float64)
            nan, pinf, ninf = np.isnan(values), values == np.inf, values == -np.inf
            finite = np.where(nan | pinf | ninf, 0.0, values)
            return [finite * weight, weight, nan * weight, pinf * weight, ninf * weight]
        scaled = scaled_decimals(column, weight)   # plain values that fit: numpy, summed per group
        if scaled is not None:
            zeros = np.zeros(len(weight), np.int64)
            return [scaled, weight, zeros, zeros, zeros]
        values = [decimal.Decimal(v) if w else None for v, w in zip(column.to_pylist(), weight.tolist())]   # text
        nan = np.array([v is not None and v.is_nan() for v in values])
        pinf = np.array([v is not None and v.is_infinite() and v > 0 for v in values])
        ninf = np.array([v is not None and v.is_infinite() and v < 0 for v in values])
        finite = [v * int(w) if v is not None and v.is_finite() else 0 for v, w in zip(values, weight.tolist())]
        return [finite, weight, nan * weight, pinf * weight, ninf * weight]
    trues = column.fill_null(False).to_numpy(zero_copy_only=False)
    return [weight * trues, weight * ~trues]
