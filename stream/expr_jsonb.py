"""JSONB operators, functions and casts, computed row by row (Postgres 16 semantics).

Job: the entries of ``FUNCS`` that :mod:`stream.expr_funcs` merges into its ``_FUNCS`` table
(same contract: ``name: (implementation, result type from the argument types, (min, max))``),
the casts to and from JSONB (:func:`cast_jsonb`, called by :mod:`stream.expr_cast`) and
:class:`JsonbCmp` (``= <> < <= > >=`` in Postgres' jsonb order, :func:`relational.jsonb.sort_key`).

A JSONB value is its normal text (relational/jsonb.py); each row is parsed into the Python
json model, the operation applied, and a JSONB result printed back to normal text.

Names: the operators are entered under their own spelling, which no SQL call can name (the
binder maps them): ``->`` (by key for a text operand, by index for an integer one, a negative
index counting from the end), ``->>``, ``#>`` / ``#>>`` (a text path ``'{a,0,b}'``), ``@>``
(``<@`` swaps the operands), ``?``, ``||`` (``jsonb_concat``), ``-`` (``jsonb_delete``: a key
or an index); the functions ``jsonb_contains``, ``jsonb_exists``, ``jsonb_concat``,
``jsonb_extract_path[_text]`` (variadic keys), ``jsonb_typeof``, ``jsonb_array_length``,
``jsonb_build_object``, ``to_jsonb``; stream/expr_jsonb_edit.py adds the path edits
(``jsonb_set``, ``jsonb_insert``, ``jsonb_set_lax``, ``#-``), ``?|`` / ``?&``, ``jsonb_pretty``
and the JSONB aggregates' final steps, and ``-`` takes a text array too (``jsonb_delete_array``).
A top-level scalar is a one-element array to ``->`` with an index (``'"s"'::jsonb -> 0`` is
``"s"``), as Postgres stores it. JSON null cast to a scalar type is SQL NULL. What does not
apply (a key of an array, an index of an object, a missing key, an index out of
range) is NULL, as Postgres; ``->>`` of JSON null is NULL; ``jsonb_array_length`` of a
non-array, ``jsonb_build_object`` with a NULL key and a cast of the wrong JSON type to a
scalar type are data errors (:func:`stream.expr_errors.data_error`).

Also here: the internal JSONB -> LIST functions ``unnest`` expands for ``jsonb_each`` and the
like over a column (sql/bind/jsonb_rows.py) or in a select list, and for each column of
``jsonb_to_record[set]`` (sql/bind/jsonb_select.py), and :func:`order_key` (batch ORDER BY). JSON text
arriving in Arrow columns and files is normalised by :mod:`stream.jsonb_ingest`.

Callers: :mod:`stream.expr_funcs` (merges ``FUNCS``), :mod:`stream.expr_cast` (casts),
:mod:`stream.expr_jsonb_cmp`, the SQL binder (:mod:`sql.bind.expr`, :mod:`sql.bind.jsonb_rows`
for the set-returning functions, which use :func:`array_elements` and :func:`each`),
:mod:`sql.batch.execute` (ORDER BY).
"""

from __future__ import annotations

import datetime
import decimal
import functools
import re

import pyarrow as pa

from relational import jsonb as J
from relational.arrow import arrow_type
from relational.types import DataType, TypeKind
from stream.expr_errors import data_error
from stream.expr_jsonb_edit import FUNCS as EDIT_FUNCS, delete_keys
from stream.expr_pg import RowError, rowwise

_JB = DataType.JSONB
_V = DataType.VARCHAR
_INTS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
_FLOATS = (TypeKind.REAL, TypeKind.DOUBLE)
_FRACTION_ZEROS = re.compile(r"(\.\d*?)0+(?=$|[+-])")


@functools.lru_cache(maxsize=4096)
def tree(text: str):
    """The tree of a JSONB value's normal text (cached: read-only, never mutate it)."""
    return J.parse(text)


def _out(value):
    """A tree as a JSONB result (its normal text); None stays SQL NULL."""
    return None if value is _MISSING else J.to_text(value)


_MISSING = object()


def _step(node, key):
    """``node -> key`` (a str key or an int index) or ``_MISSING``."""
    if isinstance(key, str):
        return node.get(key, _MISSING) if isinstance(node, dict) else _MISSING
    if isinstance(node, dict):
        return _MISSING
    if not isinstance(node, list):   # a scalar is stored as a one-element array: -> 0 and -> -1 reach it
        node = [node]
    i = key + len(node) if key < 0 else key
    return node[i] if 0 <= i < len(node) else _MISSING


def _as_text(node):
    """``->>``'s text of a tree: a string's own text, JSON null as SQL NULL, else normal text."""
    if node is _MISSING or node is None:
        return None
    return node if isinstance(node, str) else J.to_text(node)


def _get(text, key):
    return _out(_step(tree(text), key))


def _get_text(text, key):
    return _as_text(_step(tree(text), key))


def parse_path(text: str) -> list:
    """A ``#>`` path, Postgres' text-array literal ``{a,b,"c d"}``, as its elements; ValueError
    when it is not one (elements: bare words or double-quoted strings with backslash escapes)."""
    s = text.strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise RowError(f'malformed array literal: "{text}"')
    body, out, i = s[1:-1], [], 0
    if not body.strip():
        return out
    while i <= len(body):
        while i < len(body) and body[i].isspace():
            i += 1
        if i < len(body) and body[i] == '"':
            i += 1
            item = []
            while i < len(body) and body[i] != '"':
                if body[i] == "\\":
                    i += 1
                if i < len(body):
                    item.append(body[i])
                i += 1
            if i >= len(body):
                raise RowError(f'malformed array literal: "{text}"')
            i += 1
            out.append("".join(item))
            while i < len(body) and body[i].isspace():
                i += 1
        else:
            start = i
            while i < len(body) and body[i] not in ',"{}':
                i += 1
            word = body[start:i].strip()
            if not word or (i < len(body) and body[i] != ","):
                raise RowError(f'malformed array literal: "{text}"')
            out.append(None if word.upper() == "NULL" else word)
        if i < len(body) and body[i] != ",":
            raise RowError(f'malformed array literal: "{text}"')
        i += 1
    return out


def _walk_path(text, path):
    return _walk_keys(text, parse_path(path))


def _walk_keys(text, keys):
    node = tree(text)
    for item in keys:
        if item is None:
            return _MISSING
        if isinstance(node, dict):
            node = node.get(item, _MISSING)
        elif isinstance(node, list):
            try:
                index = int(item.strip())
            except ValueError:
                return _MISSING
            node = _step(node, index)
        else:
            return _MISSING
        if node is _MISSING:
            return node
    return node


def _get_path(text, path):
    return _out(_walk_path(text, path))


def _get_path_text(text, path):
    return _as_text(_walk_path(text, path))


def _typeof(text):
    return J.TYPE_NAMES[J.kind_of(tree(text))]


def _array_length(text):
    node = tree(text)
    if not isinstance(node, list):
        raise RowError("cannot get array length of a " + ("non-array" if isinstance(node, dict) else "scalar"))
    return len(node)


# --- containment and existence ----------------------------------------------------------------

def _equal(a, b) -> bool:
    return J.kind_of(a) == J.kind_of(b) and J.sort_key(a) == J.sort_key(b)


def _contains(a, b, top: bool) -> bool:
    """Postgres' ``JsonbDeepContains``: does ``a`` contain ``b``."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return False
        for key, value in b.items():
            if key not in a:
                return False
            mine = a[key]
            if isinstance(value, (dict, list)):
                if type(mine) is not type(value) or not _contains(mine, value, False):
                    return False
            elif isinstance(mine, (dict, list)) or not _equal(mine, value):
                return False
        return True
    if isinstance(a, list):
        if not isinstance(b, list):
            if top and not isinstance(b, dict):   # a top-level array contains a scalar element
                return any(not isinstance(x, (dict, list)) and _equal(x, b) for x in a)
            return False
        scalars = [x for x in a if not isinstance(x, (dict, list))]
        for value in b:
            if isinstance(value, (dict, list)):
                if not any(type(x) is type(value) and _contains(x, value, False) for x in a):
                    return False
            elif not any(_equal(x, value) for x in scalars):
                return False
        return True
    if isinstance(b, (dict, list)):   # a top-level scalar never contains a container
        return False
    return _equal(a, b)


def _contains_rows(a_text, b_text):
    return _contains(tree(a_text), tree(b_text), True)


def _exists(text, key):
    node = tree(text)
    if isinstance(node, dict):
        return key in node
    if isinstance(node, list):
        return any(isinstance(x, str) and x == key for x in node)
    return isinstance(node, str) and node == key


# --- building values --------------------------------------------------------------------------

def from_sql(value, dtype: DataType):
    """The tree of a SQL value as ``to_jsonb`` makes it (Postgres' ``datum_to_jsonb``):
    numbers stay numbers (a float's text read as a number; NaN/Infinity become strings),
    booleans booleans, JSONB itself, date/time values their ISO text, anything else its text."""
    if value is None:
        return None
    kind = dtype.kind
    if kind == TypeKind.JSONB:
        return tree(value)
    if kind == TypeKind.BOOLEAN:
        return bool(value)
    if kind in _INTS:
        return decimal.Decimal(value)
    if kind == TypeKind.DECIMAL:
        return value if value.is_finite() else str(value)   # NaN / Infinity: not JSON numbers
    if kind in _FLOATS:
        from stream.expr_cast import float_text
        text = float_text(value, kind == TypeKind.REAL)
        try:
            return decimal.Decimal(text) if value == value and abs(value) != float("inf") else text
        except decimal.InvalidOperation:
            return text
    if kind == TypeKind.TIMESTAMPTZ:
        value = value.astimezone(datetime.timezone.utc)
    if kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.TIME):
        return _FRACTION_ZEROS.sub(r"\1", value.isoformat())   # ISO 8601, fraction without trailing zeros
    if kind == TypeKind.DATE:
        return value.isoformat()
    if kind == TypeKind.INTERVAL:
        return str(value)
    if kind == TypeKind.BYTEA:
        return "\\x" + value.hex()
    if kind == TypeKind.LIST:
        return [from_sql(v, dtype.elem) for v in value]
    return str(value)


def _key_text(value, dtype: DataType) -> str:
    """A value as an object key (Postgres' ``datum_to_jsonb`` of a key): its type's text output
    (a float as ``float8out`` prints it: ``1e+20``), date/time values in ISO form."""
    if dtype.kind == TypeKind.BOOLEAN:
        return "true" if value else "false"
    if dtype.kind in _FLOATS:
        from stream.expr_cast import float_text
        return float_text(value, dtype.kind == TypeKind.REAL)
    node = from_sql(value, dtype)
    return node if isinstance(node, str) else J.to_text(node)


def _to_jsonb_impl(args, columns):
    dtype = args[0].data_type
    return rowwise(lambda v: J.to_text(from_sql(v, dtype)), lambda ts: _JB)(args, columns)


def _build_object_impl(args, columns):
    types = [a.data_type for a in args]

    def build(*row):
        if len(row) % 2:   # Postgres checks it per call, at run time (a data error, 22023)
            raise RowError("argument list must have even number of elements")
        pairs = []
        for i in range(0, len(row), 2):
            if row[i] is None:
                raise RowError(f"argument {i + 1}: key must not be null")
            pairs.append((_key_text(row[i], types[i]), from_sql(row[i + 1], types[i + 1])))
        return J.to_text(J._object(pairs))
    build.__name__ = "jsonb_build_object"
    return rowwise(build, lambda ts: _JB, strict=False)(args, columns)


def _build_array_impl(args, columns):
    types = [a.data_type for a in args]

    def build(*row):
        return J.to_text([from_sql(v, t) for v, t in zip(row, types)])
    build.__name__ = "jsonb_build_array"
    return rowwise(build, lambda ts: _JB, strict=False)(args, columns)


def _strip_nulls(node):
    """Postgres' ``jsonb_strip_nulls``: object fields whose value is JSON null are dropped, at
    every depth; array elements stay."""
    if isinstance(node, dict):
        return {k: _strip_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_strip_nulls(v) for v in node]
    return node


def _build_object_type(ts):
    return _JB


# --- the function table -----------------------------------------------------------------------

def _get_type(ts):
    if ts[0] != _JB:
        return None
    return _JB if ts[1] == _V or ts[1].kind in _INTS else None


def _get_text_type(ts):
    return _V if _get_type(ts) else None


def _rows(fn, typer, name):
    fn.__name__ = name
    return (lambda a, c: rowwise(fn, typer)(a, c)), typer


def _entry(fn, typer, name, arity):
    impl, typer = _rows(fn, typer, name)
    return impl, typer, arity


def _concat(a_text, b_text):
    """``a || b`` (Postgres' ``jsonb_concat``): two objects merge (the right's keys win), else
    both sides as arrays (a scalar or an object is a one-element array) are concatenated."""
    a, b = tree(a_text), tree(b_text)
    if isinstance(a, dict) and isinstance(b, dict):
        return J.to_text(J._object(list(a.items()) + list(b.items())))
    return J.to_text((a if isinstance(a, list) else [a]) + (b if isinstance(b, list) else [b]))


def _delete(text, key):
    """``j - 'key'`` (an object's key, or an array's string elements equal to it) and ``j - n``
    (an array's element n, negative from the end), as Postgres' ``jsonb_delete``."""
    node = tree(text)
    if not isinstance(node, (dict, list)):
        raise RowError("cannot delete from scalar")
    if isinstance(key, list):   # j - text[] (jsonb_delete_array)
        return delete_keys(text, key)
    if isinstance(key, str):
        if isinstance(node, dict):
            return J.to_text({k: v for k, v in node.items() if k != key})
        return J.to_text([x for x in node if not (isinstance(x, str) and x == key)])
    if isinstance(node, dict):
        raise RowError("cannot delete from object using integer index")
    i = key + len(node) if key < 0 else key
    return J.to_text([x for n, x in enumerate(node) if n != i])


def _path_args(text, *keys):   # jsonb_extract_path(j, VARIADIC keys): the path as its elements
    return _out(_walk_keys(text, keys))


def _list_entry(fn, elem, name):
    """An internal JSONB -> LIST function: what ``unnest`` expands for ``jsonb_array_elements``
    and the like over a column (sql/bind/jsonb_rows.py); its name holds a space, so no SQL call
    names it."""
    typer = (lambda ts: DataType.list(elem) if ts == [_JB] else None)
    fn.__name__ = name.split()[0]
    return (lambda a, c: rowwise(fn, typer)(a, c)), typer, (1, 1)


def _record_entry(fn, elem, name, strict=True):
    """An internal ``jsonb_to_record[set] texts / values`` (JSONB, field name) -> LIST function
    (sql/bind/jsonb_select.py unnests one per column of the column definition list)."""
    typer = (lambda ts: DataType.list(elem) if ts == [_JB, _V] else None)
    fn.__name__ = name.split()[0]
    return (lambda a, c: rowwise(fn, typer, strict=strict)(a, c)), typer, (2, 2)


#: the operators under their Postgres names (``->`` ... ``?``) and the functions; an operator's
#: entry is named as written, so no SQL call reaches it by name and no hint suggests it
FUNCS = {
    # (the third item names the row's data errors: the Postgres function behind the operator)
    "->": _entry(_get, _get_type, "jsonb_object_field", (2, 2)),
    "->>": _entry(_get_text, _get_text_type, "jsonb_object_field_text", (2, 2)),
    "#>": _entry(_get_path, lambda ts: _JB if ts == [_JB, _V] else None, "jsonb_extract_path", (2, 2)),
    "#>>": _entry(_get_path_text, lambda ts: _V if ts == [_JB, _V] else None, "jsonb_extract_path_text", (2, 2)),
    "@>": _entry(_contains_rows, lambda ts: DataType.BOOLEAN if ts == [_JB, _JB] else None, "jsonb_contains",
                 (2, 2)),
    "?": _entry(_exists, lambda ts: DataType.BOOLEAN if ts == [_JB, _V] else None, "jsonb_exists", (2, 2)),
    "||": _entry(_concat, lambda ts: _JB if ts == [_JB, _JB] else None, "jsonb_concat", (2, 2)),
    "-": _entry(_delete, lambda ts: _JB if ts == [_JB, DataType.list(_V)] else _get_type(ts), "jsonb_delete",
                (2, 2)),
    "jsonb_contains": _entry(_contains_rows, lambda ts: DataType.BOOLEAN if ts == [_JB, _JB] else None,
                             "jsonb_contains", (2, 2)),
    "jsonb_exists": _entry(_exists, lambda ts: DataType.BOOLEAN if ts == [_JB, _V] else None, "jsonb_exists",
                           (2, 2)),
    "jsonb_concat": _entry(_concat, lambda ts: _JB if ts == [_JB, _JB] else None, "jsonb_concat", (2, 2)),
    "jsonb_extract_path": _entry(_path_args, lambda ts: _JB if ts[0] == _JB and all(t == _V for t in ts[1:])
                                 else None, "jsonb_extract_path", (2, None)),
    "jsonb_extract_path_text": _entry(lambda *a: _as_text(_walk_keys(a[0], a[1:])),
                                      lambda ts: _V if ts[0] == _JB and all(t == _V for t in ts[1:]) else None,
                                      "jsonb_extract_path_text", (2, None)),
    "jsonb_typeof": _entry(_typeof, lambda ts: _V if ts == [_JB] else None, "jsonb_typeof", (1, 1)),
    "jsonb_array_length": _entry(_array_length, lambda ts: DataType.INT if ts == [_JB] else None,
                                 "jsonb_array_length", (1, 1)),
    "jsonb_build_object": (_build_object_impl, _build_object_type, (0, None)),
    "jsonb_build_array": (_build_array_impl, lambda ts: _JB, (0, None)),
    "jsonb_strip_nulls": _entry(lambda t: J.to_text(_strip_nulls(tree(t))), lambda ts: _JB if ts == [_JB] else None,
                                "jsonb_strip_nulls", (1, 1)),
    "jsonb_array_elements list": _list_entry(lambda t: array_elements(t, False), _JB, "jsonb_array_elements list"),
    "jsonb_array_elements_text list": _list_entry(lambda t: array_elements(t, True), _V,
                                                  "jsonb_array_elements_text list"),
    "jsonb_each keys": _list_entry(lambda t: [k for k, _ in each(t, False)], _V, "jsonb_each keys"),
    "jsonb_each values": _list_entry(lambda t: [v for _, v in each(t, False)], _JB, "jsonb_each values"),
    "jsonb_each_text keys": _list_entry(lambda t: [k for k, _ in each(t, True)], _V, "jsonb_each_text keys"),
    "jsonb_each_text values": _list_entry(lambda t: [v for _, v in each(t, True)], _V, "jsonb_each_text values"),
    "jsonb_object_keys list": _list_entry(lambda t: object_keys(t), _V, "jsonb_object_keys list"),
    "jsonb_to_recordset texts": _record_entry(lambda t, n: to_recordset_column(t, n, False), _V,
                                              "jsonb_to_recordset texts"),
    "jsonb_to_recordset values": _record_entry(lambda t, n: to_recordset_column(t, n, True), _JB,
                                               "jsonb_to_recordset values"),
    "jsonb_to_record texts": _record_entry(lambda t, n: to_record_column(t, n, False), _V, "jsonb_to_record texts",
                                           strict=False),
    "jsonb_to_record values": _record_entry(lambda t, n: to_record_column(t, n, True), _JB,
                                            "jsonb_to_record values", strict=False),
    "to_jsonb": (_to_jsonb_impl, lambda ts: _JB, (1, 1)),
    # internal (a name no SQL call can spell): the hash key of a JSONB equality in a join / IN
    "jsonb join key": _entry(lambda t: join_key_text(t), lambda ts: _JB if ts == [_JB] else None,
                             "jsonb join key", (1, 1)),
    **EDIT_FUNCS,   # jsonb_set, jsonb_insert, jsonb_set_lax, #-, ?|, ?&, jsonb_pretty, the aggregates' final steps
}


# --- casts ------------------------------------------------------------------------------------

_CAST_NAMES = {TypeKind.SMALLINT: "smallint", TypeKind.INT: "integer", TypeKind.BIGINT: "bigint",
               TypeKind.REAL: "real", TypeKind.DOUBLE: "double precision", TypeKind.DECIMAL: "numeric",
               TypeKind.BOOLEAN: "boolean"}


def pg_name(dtype: DataType) -> str:
    """The type's name in Postgres' messages (``integer``, ``text``, ``jsonb``)."""
    return _CAST_NAMES.get(dtype.kind) or {TypeKind.VARCHAR: "text", TypeKind.JSONB: "jsonb"}.get(
        dtype.kind, dtype.sql_name().lower())


def can_cast(source: DataType, target: DataType) -> bool:
    """Postgres' casts of jsonb: from and to text, and jsonb to a number or boolean type."""
    if source == _JB:
        return target.kind in _CAST_NAMES or target == _V
    return target == _JB and source == _V


def _scalar_cast(text, target: DataType):
    node = tree(text)
    name = _CAST_NAMES[target.kind]
    if node is None:   # Postgres 17+: JSON null casts to SQL NULL
        return None
    if target.kind == TypeKind.BOOLEAN:
        if not isinstance(node, bool):
            raise RowError(f"cannot cast jsonb {J.TYPE_NAMES[J.kind_of(node)]} to type {name}")
        return node
    if not isinstance(node, decimal.Decimal):
        raise RowError(f"cannot cast jsonb {J.TYPE_NAMES[J.kind_of(node)]} to type {name}")
    if target.kind == TypeKind.DECIMAL:
        return node
    if target.kind in _FLOATS:
        value = float(node)
        too_big = target.kind == TypeKind.REAL and abs(value) > 3.4028234663852886e38
        if value in (float("inf"), float("-inf")) or too_big:
            raise RowError(f"value out of range for type {name}")
        return value
    value = int(node.to_integral_value(decimal.ROUND_HALF_UP))   # numeric -> integer: half away from zero
    bits = {TypeKind.SMALLINT: 15, TypeKind.INT: 31, TypeKind.BIGINT: 63}[target.kind]
    if not -(1 << bits) <= value < (1 << bits):
        raise RowError(f"{name} out of range")
    return value


def cast_jsonb(value, source: DataType, target: DataType, expr):
    """``value`` (array or scalar) cast between JSONB and ``target`` (:func:`can_cast`); a row
    that does not convert is a data error."""
    scalar = isinstance(value, pa.Scalar)
    values = [value.as_py()] if scalar else value.to_pylist()
    if source == _V:
        fn = J.normalize
    elif target == _V:
        def fn(text):
            return text
    else:
        def fn(text):
            return _scalar_cast(text, target)
    out, failed, message = [], 0, None
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            out.append(fn(v))
        except (RowError, ValueError, OverflowError) as exc:
            out.append(None)
            failed += 1
            message = message or str(exc)
    if failed:
        data_error(expr, message, failed)
    if target.kind == TypeKind.DECIMAL:
        out = [None if d is None else str(d) for d in out]
    return pa.scalar(out[0], arrow_type(target)) if scalar else pa.array(out, arrow_type(target))


# --- comparison (stream/expr_jsonb_cmp.py) ----------------------------------------------------


def compare(a_text: str, b_text: str) -> int:
    """-1, 0 or 1: how two JSONB values order (Postgres' ``compareJsonbContainers``)."""
    if a_text == b_text:
        return 0
    a, b = J.sort_key(tree(a_text)), J.sort_key(tree(b_text))
    return (a > b) - (a < b)


# --- set-returning functions (constant arguments; sql/bind/select.py makes them rows) ----------

def array_elements(text: str, as_text: bool) -> list:
    """The elements of a JSONB array (``jsonb_array_elements[_text]``); RowError for a
    non-array, as Postgres ("cannot extract elements from a scalar / an object")."""
    node = tree(text)
    if not isinstance(node, list):
        raise RowError("cannot extract elements from " + ("an object" if isinstance(node, dict) else "a scalar"))
    return [_as_text(x) if as_text else J.to_text(x) for x in node]


def each(text: str, as_text: bool) -> list:
    """The ``(key, value)`` pairs of a JSONB object in stored key order (``jsonb_each[_text]``)."""
    node = tree(text)
    if not isinstance(node, dict):
        raise RowError("cannot call jsonb_each on a non-object" if not as_text else
                       "cannot call jsonb_each_text on a non-object")
    return [(k, _as_text(v) if as_text else J.to_text(v)) for k, v in node.items()]


def _field(node, name: str, jsonb: bool):
    """A field of a ``jsonb_to_record[set]`` object as its column reads it: the value itself
    (a JSONB column) or its text (a string's own text, another value's JSON text); a missing
    field or JSON null is NULL."""
    value = node.get(name)
    if value is None:
        return None
    return J.to_text(value) if jsonb else _as_text(value)


def to_recordset_column(text: str, name: str, jsonb: bool) -> list:
    """Column ``name`` of ``jsonb_to_recordset(text)``: one item per object of the array."""
    node = tree(text)
    if not isinstance(node, list):
        raise RowError("cannot call jsonb_to_recordset on a non-array")
    if not all(isinstance(x, dict) for x in node):
        raise RowError("argument of jsonb_to_recordset must be an array of objects")
    return [_field(x, name, jsonb) for x in node]


def to_record_column(text, name: str, jsonb: bool) -> list:
    """Column ``name`` of ``jsonb_to_record(text)``: one item (a NULL document: a row of NULLs)."""
    if text is None:
        return [None]
    node = tree(text)
    if not isinstance(node, dict):
        raise RowError("cannot call populate_composite on " + ("an array" if isinstance(node, list) else "a scalar"))
    return [_field(node, name, jsonb)]


def object_keys(text: str) -> list:
    node = tree(text)
    if not isinstance(node, dict):
        raise RowError("cannot call jsonb_object_keys on " + ("an array" if isinstance(node, list) else "a scalar"))
    return list(node)




def _unscaled(node):
    """``node`` with every number at its least scale (``1.0`` -> ``1``, ``2.50`` -> ``2.5``,
    ``-0`` -> ``0``), by dropping trailing fractional zero digits only (no rounding, no exponent)."""
    if isinstance(node, decimal.Decimal):
        if node.is_zero():
            return decimal.Decimal(0)
        sign, digits, exp = node.as_tuple()
        drop = 0
        while exp + drop < 0 and len(digits) - drop > 1 and digits[len(digits) - 1 - drop] == 0:
            drop += 1
        return decimal.Decimal((sign, digits[:len(digits) - drop], exp + drop)) if drop else node
    if isinstance(node, dict):
        return {k: _unscaled(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unscaled(v) for v in node]
    return node


def join_key_text(text: str) -> str:
    """The equality key of a JSONB value: its normal text with every number at its least scale,
    so two values are ``=`` (Postgres' jsonb equality, ``1 = 1.0``) exactly when their keys are
    the same text (hence the same memcomparable bytes, which keep a number's scale). A join or
    an ``IN`` hashes on this key (the internal function ``jsonb join key``); the stored and
    returned values keep their scale. GROUP BY / DISTINCT do not use it (docs/sql.md)."""
    return J.to_text(_unscaled(tree(text)))


def order_key(text: str):
    """A sort key of a JSONB value (its normal text) in Postgres' jsonb order."""
    return J.sort_key(tree(text))
