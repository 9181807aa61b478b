"""Hypothesis strategies shared by the encoding tests: random data types and values for them.

``data_types()`` draws any type of relational/types.py (nested STRUCT/LIST included);
``values(dtype)`` draws a valid Python value of that type or ``None``. Values lean towards
edge cases: NULs inside strings, prefix-related strings, NaN, -0.0, infinities, decimals of
many scales, extreme dates, intervals whose fields differ but totals agree.
"""

import datetime
import decimal
import json

from hypothesis import strategies as st

from hummock.key import MAX_EPOCH, encode_full_key, full_key_sort_key
from relational.types import (INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                              DataType, Interval, TypeKind)

SCALARS = [DataType(kind) for kind in TypeKind if kind not in (TypeKind.STRUCT, TypeKind.LIST)]


def data_types(max_depth: int = 2):
    scalar = st.sampled_from(SCALARS)
    if max_depth <= 0:
        return scalar
    inner = data_types(max_depth - 1)
    struct = st.lists(inner, min_size=1, max_size=3).map(
        lambda ts: DataType.struct([(f"f{i}", t) for i, t in enumerate(ts)]))
    return st.one_of(scalar, scalar, scalar, struct, inner.map(DataType.list))


def _decimals():
    finite = st.builds(
        lambda sign, coefficient, exponent: decimal.Decimal((sign, tuple(int(c) for c in str(coefficient)), exponent)),
        st.integers(0, 1), st.integers(0, 10**30), st.integers(-40, 40))
    special = st.sampled_from([decimal.Decimal(x) for x in
                               ("NaN", "Infinity", "-Infinity", "0", "-0", "0.000", "1", "1.0", "1.00", "-1", "10", "0.1")])
    return st.one_of(finite, special, st.decimals(allow_nan=False, allow_infinity=False, places=3).filter(lambda d: not d.is_snan()))


_OFFSETS = st.integers(-23 * 60, 23 * 60).map(lambda m: datetime.timezone(datetime.timedelta(minutes=m)))
_SAFE_DATETIMES = st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9999, 12, 30))

_SCALAR_VALUES = {
    TypeKind.BOOLEAN: st.booleans(),
    TypeKind.SMALLINT: st.one_of(st.integers(INT16_MIN, INT16_MAX), st.sampled_from([INT16_MIN, INT16_MAX, 0, -1])),
    TypeKind.INT: st.one_of(st.integers(INT32_MIN, INT32_MAX), st.sampled_from([INT32_MIN, INT32_MAX, 0, -1])),
    TypeKind.BIGINT: st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, 0, -1])),
    TypeKind.DECIMAL: _decimals(),
    TypeKind.REAL: st.floats(width=32),
    TypeKind.DOUBLE: st.one_of(st.floats(), st.sampled_from([0.0, -0.0, float("nan"), float("inf"), -float("inf")])),
    TypeKind.VARCHAR: st.one_of(st.text(max_size=12), st.text(alphabet="\x00\x01ab\u00e9\U0001f600", max_size=5)),
    TypeKind.BYTEA: st.one_of(st.binary(max_size=12), st.lists(st.sampled_from([b"\x00", b"\x01", b"\xff", b"a"]), max_size=5).map(b"".join)),
    TypeKind.DATE: st.dates(),
    TypeKind.TIME: st.times(),
    TypeKind.TIMESTAMP: st.datetimes(),
    TypeKind.TIMESTAMPTZ: st.builds(lambda dt, tz: dt.replace(tzinfo=tz), _SAFE_DATETIMES, _OFFSETS),
    TypeKind.INTERVAL: st.one_of(
        st.builds(Interval, st.integers(INT32_MIN, INT32_MAX), st.integers(INT32_MIN, INT32_MAX), st.integers(INT64_MIN, INT64_MAX)),
        st.builds(Interval, st.integers(-3, 3), st.integers(-60, 60), st.sampled_from([0, 1, -1, 86_400_000_000]))),
}


def _json_text(value) -> str:
    """JSON text of a json-model value whose numbers are Decimals (json.dumps takes none)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(json.dumps(k) + ":" + _json_text(v) for k, v in value.items()) + "}"
    return json.dumps(value)


#: JSON values of the Python json model (Decimal numbers): nested, duplicate-free keys that share
#: prefixes and lengths, numbers of several scales, escapes in strings
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20).map(decimal.Decimal)
    | st.sampled_from([decimal.Decimal(x) for x in ("0", "-0", "1.0", "1.50", "1e2", "-2.5E-3", "0.000")])
    | st.text(alphabet='ab\u00e9"\\\n\x01', max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet="ab\u00e9", max_size=3), inner,
                                                                 max_size=3),
    max_leaves=8)
_SCALAR_VALUES[TypeKind.JSONB] = json_values.map(_json_text)


def values(dtype: DataType, nullable: bool = True):
    """A strategy for values of ``dtype`` (``None`` included when ``nullable``)."""
    if dtype.kind == TypeKind.STRUCT:
        base = st.tuples(*[values(t) for _, t in dtype.fields])
    elif dtype.kind == TypeKind.LIST:
        base = st.lists(values(dtype.elem), max_size=3)
    else:
        base = _SCALAR_VALUES[dtype.kind]
    return st.one_of(st.none(), base) if nullable else base


# --- KV entries for blocks and SSTs ---------------------------------------------------------

user_keys = st.tuples(st.sampled_from([1, 2]), st.binary(max_size=5) | st.lists(
    st.sampled_from([b"\x00", b"a", b"b"]), max_size=4).map(b"".join))
kv_values = st.one_of(st.none(), st.binary(max_size=20), st.just(b""), st.binary(min_size=1000, max_size=5000))


@st.composite
def entry_lists(draw, min_size=1, max_size=60, single_table=False):
    """Sorted unique (full_key, value_or_None) pairs; many versions per user key."""
    uks = draw(st.lists(user_keys, min_size=1, max_size=max_size))
    pairs = {}
    for table_id, table_key in uks:
        if single_table:
            table_id = 1
        for epoch in draw(st.lists(st.sampled_from([0, 1, 2, 5, 2**16, MAX_EPOCH]), min_size=1, max_size=3, unique=True)):
            pairs[encode_full_key(table_id, table_key, epoch)] = draw(kv_values)
    items = sorted(pairs.items(), key=lambda kv: full_key_sort_key(kv[0]))
    return items[:max(min_size, max_size)]


def rows(types, nullable: bool = True):
    return st.tuples(*[values(t, nullable) for t in types])
