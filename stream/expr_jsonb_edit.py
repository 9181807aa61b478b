"""JSONB edits by path and by key, pretty printing, and the final steps of the JSONB aggregates
(Postgres 16+ semantics, row by row).

Job: the entries of ``FUNCS`` that :mod:`stream.expr_jsonb` adds to its table (same contract:
``name: (implementation, result type from the argument types, (min, max))``):

- ``jsonb_set(j, path, new [, create_if_missing])``, ``jsonb_insert(j, path, new [, insert_after])``,
  ``jsonb_set_lax(j, path, new [, create_if_missing [, null_value_treatment]])`` and ``#-``
  (``jsonb_delete_path``), all one walk, :func:`set_path`, Postgres' ``setPath``: a path is a
  text array (``'{a,0}'`` or ``ARRAY[...]``); each step reached must not be NULL ("path element
  at position N is null", a data error); an array step must be an integer as C's ``strtol``
  reads one (leading blanks and a sign, nothing after: else "is not an integer"), negative
  counting from the end; a missing step on the way changes nothing. At the last step:
  ``jsonb_set`` replaces (creating a missing key, or prepending / appending for an index before
  the start / past the end, when ``create_if_missing``), ``jsonb_insert`` inserts before (after)
  the element or adds a missing key ("cannot replace existing key" when it exists), ``#-``
  deletes. A top-level scalar is an error for all four ("cannot set path in scalar" / "cannot
  delete path in scalar"); an empty path returns the value unchanged.
  ``jsonb_set_lax`` is ``jsonb_set`` unless the new value is SQL NULL: then
  ``null_value_treatment`` says ``use_json_null`` (the default: JSON null), ``delete_key``
  (``#-``), ``return_target`` or ``raise_exception``; a NULL target, path or create flag gives
  NULL, a NULL or unknown treatment is an error.
- ``?|`` / ``?&`` (``jsonb_exists_any`` / ``_all``: any / all of a text array's non-NULL
  strings are top-level keys or string elements, as ``?``), ``jsonb - text[]``
  (``jsonb_delete_array``: those keys or string elements dropped; a scalar is an error).
- ``jsonb_object(text[])`` / ``jsonb_object(keys text[], values text[])``: an object of string
  values (NULL: JSON null; an odd count, a NULL key or arrays of other lengths: data errors).
- ``jsonb_pretty``: Postgres' indented text (4 spaces a level, one item a line, an empty
  container as its brackets on two lines).
- the JSONB aggregates' final steps, over the ``array_agg`` sql/bind/jsonb_select.py rewrites
  them into (internal names holding a space, which no SQL call can spell): ``jsonb_agg final``
  (a list of JSONB values, SQL NULL elements as JSON null, into one array), ``jsonb_object_agg
  pair`` (a key and a value into a two-element array ``[key, value]``: the key as Postgres
  names it, its type's text output, a NULL key as JSON null and a key of a non-scalar type --
  JSONB, an array -- as the number 0) and ``jsonb_object_agg final`` (those pairs into one
  object, a later duplicate key winning; "field name must not be null" / "key value must be
  scalar, not array, composite, or json" when a pair says so).

Data errors are :class:`stream.expr_pg.RowError` (a batch raises them, a stream counts them
and gives NULL). Callers: :mod:`stream.expr_jsonb` (merges ``FUNCS``).
"""

from __future__ import annotations

import decimal
import re

from relational import jsonb as J
from relational.types import DataType, TypeKind
from stream.expr_pg import RowError, rowwise

_JB = DataType.JSONB
_V = DataType.VARCHAR
_TEXTS = DataType.list(_V)

# setPath's operations (Postgres' JB_PATH_*)
CREATE, REPLACE, INSERT_BEFORE, INSERT_AFTER, DELETE = "create", "replace", "insert_before", "insert_after", "delete"
_ADDS = (CREATE, INSERT_BEFORE, INSERT_AFTER)
_STRTOL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
_INT32 = 1 << 31


def _tree(text):
    from stream.expr_jsonb import tree
    return tree(text)


def _keys(path) -> list:
    """A path operand's elements: a text array literal (``'{a,0}'``) or an array's list."""
    if isinstance(path, str):
        from stream.expr_jsonb import parse_path
        return parse_path(path)
    return list(path)


def _index(key: str, level: int) -> int:
    if not _STRTOL.fullmatch(key) or not -_INT32 <= int(key) < _INT32:
        raise RowError(f'path element at position {level + 1} is not an integer: "{key}"')
    return int(key)


def set_path(node, keys: list, level: int, new, op: str):
    """Postgres' ``setPath`` of ``node`` (a tree reached at step ``level`` of ``keys``)."""
    if keys[level] is None:
        raise RowError(f"path element at position {level + 1} is null")
    if isinstance(node, dict):
        return _set_object(node, keys, level, new, op)
    if isinstance(node, list):
        return _set_array(node, keys, level, new, op)
    return node   # a scalar on the way: nothing to change


def _set_object(node: dict, keys, level, new, op):
    key, last = keys[level], level == len(keys) - 1
    if key in node:
        out = dict(node)
        if not last:
            out[key] = set_path(node[key], keys, level + 1, new, op)
        elif op in (INSERT_BEFORE, INSERT_AFTER):
            raise RowError("cannot replace existing key")
        elif op == DELETE:
            del out[key]
        else:
            out[key] = new
        return out
    if last and op in _ADDS:
        return J._object(list(node.items()) + [(key, new)])
    return node


def _set_array(node: list, keys, level, new, op):
    n, last = len(node), level == len(keys) - 1
    idx = _index(keys[level], level)
    if idx < 0:
        idx = None if -idx > n else n + idx   # None: before the start (Postgres' INT_MIN)
    elif idx > n:
        idx = n
    if (idx is None or n == 0) and last and op in _ADDS:
        return [new] + node
    out = []
    for i, item in enumerate(node):
        if i == idx:
            if not last:
                out.append(set_path(item, keys, level + 1, new, op))
            elif op == INSERT_BEFORE:
                out += [new, item]
            elif op == INSERT_AFTER:
                out += [item, new]
            elif op != DELETE:
                out.append(new)
        else:
            out.append(item)
            if op in _ADDS and last and i == n - 1 and idx == n:   # past the end: appended
                out.append(new)
    return out


def _edit(text, path, new, op, scalar_message):
    node = _tree(text)
    if not isinstance(node, (dict, list)):
        raise RowError(scalar_message)
    keys = _keys(path)
    if not keys:
        return text
    return J.to_text(set_path(node, keys, 0, new, op))


def jsonb_set(text, path, new_text, create=True):
    """``jsonb_set(target, path, new_value [, create_if_missing])`` (module docstring)."""
    node = _tree(text)
    if isinstance(node, (dict, list)) and not node and not create:
        return text
    return _edit(text, path, _tree(new_text), CREATE if create else REPLACE, "cannot set path in scalar")


def jsonb_insert(text, path, new_text, after=False):
    return _edit(text, path, _tree(new_text), INSERT_AFTER if after else INSERT_BEFORE, "cannot set path in scalar")


def delete_path(text, path):
    """``j #- path`` (``jsonb_delete_path``)."""
    node = _tree(text)
    if isinstance(node, (dict, list)) and not node:
        return text
    return _edit(text, path, None, DELETE, "cannot delete path in scalar")


_TREATMENTS = ("delete_key", "return_target", "use_json_null", "raise_exception")


def jsonb_set_lax(text, path, new_text, create=True, treatment="use_json_null"):
    if text is None or path is None or create is None:
        return None
    if treatment is None:
        raise RowError('null_value_treatment must be "delete_key", "return_target", "use_json_null", or '
                       '"raise_exception"')
    if new_text is not None:
        return jsonb_set(text, path, new_text, create)
    if treatment == "raise_exception":
        raise RowError("JSON value must not be null")
    if treatment == "use_json_null":
        return jsonb_set(text, path, "null", create)
    if treatment == "delete_key":
        return delete_path(text, path)
    if treatment == "return_target":
        return text
    raise RowError('null_value_treatment must be "delete_key", "return_target", "use_json_null", or '
                   '"raise_exception"')


# --- keys ---------------------------------------------------------------------------------------

def exists_any(text, keys) -> bool:
    from stream.expr_jsonb import _exists
    return any(_exists(text, k) for k in keys if k is not None)


def exists_all(text, keys) -> bool:
    from stream.expr_jsonb import _exists
    return all(_exists(text, k) for k in keys if k is not None)


def delete_keys(text, keys):
    """``j - text[]``: the object's keys / the array's string elements named by ``keys``."""
    node = _tree(text)
    if not isinstance(node, (dict, list)):
        raise RowError("cannot delete from scalar")
    drop = {k for k in keys if k is not None}
    if isinstance(node, dict):
        return J.to_text({k: v for k, v in node.items() if k not in drop})
    return J.to_text([x for x in node if not (isinstance(x, str) and x in drop)])


def jsonb_object(keys, values=None):
    """``jsonb_object(text[])`` (alternating keys and values) / ``jsonb_object(keys, values)``:
    values as JSON strings (NULL: JSON null), a later duplicate key winning."""
    if values is None:
        if len(keys) % 2:
            raise RowError("array must have even number of elements")
        keys, values = keys[0::2], keys[1::2]
    elif len(keys) != len(values):
        raise RowError("mismatched array dimensions")
    if any(k is None for k in keys):
        raise RowError("null value not allowed for object key")
    return J.to_text(J._object(list(zip(keys, values))))


# --- jsonb_pretty -------------------------------------------------------------------------------

def pretty(text) -> str:
    out = []
    _pretty(_tree(text), 0, out)
    return "".join(out)


def _pretty(node, level: int, out: list) -> None:
    if isinstance(node, (dict, list)):
        close = "}" if isinstance(node, dict) else "]"
        out.append("{" if isinstance(node, dict) else "[")
        items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
        for i, (key, item) in enumerate(items):
            out.append(("," if i else "") + "\n" + "    " * (level + 1))
            if key is not None:
                out.append(J.quote(key) + ": ")
            _pretty(item, level + 1, out)
        out.append("\n" + "    " * level + close)
    else:
        out.append(J.to_text(node))


# --- the aggregates' final steps (sql/bind/jsonb_select.py) ----------------------------------------

def agg_final(values) -> str:
    """``jsonb_agg``: the aggregated JSONB texts (SQL NULL as JSON null) as one array."""
    return "[" + ", ".join("null" if v is None else v for v in values) + "]"


def _pair_impl(args, columns):
    key_type, value_type = args[0].data_type, args[1].data_type
    from stream.expr_jsonb import _key_text, from_sql
    composite = key_type.kind in (TypeKind.JSONB, TypeKind.LIST)

    def pair(key, value):
        marker = None if key is None else decimal.Decimal(0) if composite else _key_text(key, key_type)
        return J.to_text([marker, from_sql(value, value_type)])
    pair.__name__ = "jsonb_object_agg"
    return rowwise(pair, lambda ts: _JB, strict=False)(args, columns)


def object_agg_final(pairs) -> str:
    """``jsonb_object_agg``: ``[key, value]`` pairs (``jsonb_object_agg pair``) as one object."""
    out = []
    for text in pairs:
        key, value = _tree(text)
        if key is None:
            raise RowError("field name must not be null")
        if not isinstance(key, str):
            raise RowError("key value must be scalar, not array, composite, or json")
        out.append((key, value))
    return J.to_text(J._object(out))


def _entry(fn, typer, name, arity, strict=True):
    fn.__name__ = name
    return (lambda a, c: rowwise(fn, typer, strict=strict)(a, c)), typer, arity


def _path_ok(t) -> bool:
    return t == _V or t == _TEXTS


def _insert_type(ts):
    ok = len(ts) in (3, 4) and ts[0] == _JB and _path_ok(ts[1]) and ts[2] == _JB and \
        (len(ts) == 3 or ts[3] == DataType.BOOLEAN)
    return _JB if ok else None


def _set_lax_type(ts):
    ok = 3 <= len(ts) <= 5 and ts[0] == _JB and _path_ok(ts[1]) and ts[2] == _JB and \
        (len(ts) < 4 or ts[3] == DataType.BOOLEAN) and (len(ts) < 5 or ts[4] == _V)
    return _JB if ok else None


FUNCS = {
    "jsonb_set": _entry(jsonb_set, _insert_type, "jsonb_set", (3, 4)),
    "jsonb_insert": _entry(jsonb_insert, _insert_type, "jsonb_insert", (3, 4)),
    "jsonb_set_lax": _entry(jsonb_set_lax, _set_lax_type, "jsonb_set_lax", (3, 5), strict=False),
    "#-": _entry(delete_path, lambda ts: _JB if len(ts) == 2 and ts[0] == _JB and _path_ok(ts[1]) else None,
                 "jsonb_delete_path", (2, 2)),
    "?|": _entry(exists_any, lambda ts: DataType.BOOLEAN if ts == [_JB, _TEXTS] else None, "jsonb_exists_any",
                 (2, 2)),
    "?&": _entry(exists_all, lambda ts: DataType.BOOLEAN if ts == [_JB, _TEXTS] else None, "jsonb_exists_all",
                 (2, 2)),
    "jsonb_object": _entry(jsonb_object, lambda ts: _JB if ts in ([_TEXTS], [_TEXTS, _TEXTS]) else None, "jsonb_object",
                           (1, 2)),
    "jsonb_pretty": _entry(pretty, lambda ts: _V if ts == [_JB] else None, "jsonb_pretty", (1, 1)),
    "jsonb_agg final": _entry(agg_final, lambda ts: _JB if ts == [DataType.list(_JB)] else None, "jsonb_agg",
                              (1, 1)),
    "jsonb_object_agg pair": (_pair_impl, lambda ts: _JB, (2, 2)),
    "jsonb_object_agg final": _entry(object_agg_final, lambda ts: _JB if ts == [DataType.list(_JB)] else None,
                                     "jsonb_object_agg", (1, 1)),
}
