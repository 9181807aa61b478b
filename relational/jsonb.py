"""JSONB values as Postgres reads, normalises, prints and orders them.

Job: the one place that knows what a JSONB value is. A JSONB column's Python value is a ``str``:
the value's *normal text*, exactly what Postgres' ``jsonb_out`` prints (``{"a": 1, "b": [1,
2]}``). :func:`normalize` turns any JSON text into it; :func:`parse` gives the *tree* (the
Python json model: ``dict`` with keys in jsonb order, ``list``, ``str``, ``decimal.Decimal`` for
numbers, ``True``/``False``, ``None`` for JSON null); :func:`to_text` prints a tree;
:func:`sort_key` orders trees as Postgres' ``compareJsonbContainers`` does.

Postgres' normal form (``jsonb_in``):
- whitespace between tokens is dropped and the text is printed with ``", "`` between items and
  ``": "`` after a key;
- object keys are sorted by their UTF-8 length, then bytewise; a duplicate key keeps its last
  value;
- a number keeps its decimal scale but is printed without an exponent (``1.50`` stays ``1.50``,
  ``1e2`` is ``100``, ``-0`` is ``0``) -- Postgres' numeric output;
- strings print with ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t`` and ``\\u00XX`` for other
  control characters; everything else (non-ASCII included) as is.

Refused input (:class:`JsonbSyntaxError`, a ``ValueError`` with the character ``position``):
anything that is not one JSON value (``NaN``, ``Infinity``, single quotes, trailing commas,
leading zeros, unescaped control characters), ``\\u0000`` and lone surrogates (Postgres: "unsupported
Unicode escape sequence"), nesting deeper than ``MAX_DEPTH``, and numbers beyond Postgres'
numeric range (more than 131072 digits before the point or 16383 after it).

Order (Postgres, for ``=``, ``<``, ORDER BY, GROUP BY): null < string < number < boolean < array
< object; strings bytewise (the C collation), numbers by value (``1.0 = 1``), false < true; an
array with more elements is greater, equal lengths compare element by element; an object with
more pairs is greater, equal counts compare key 1, value 1, key 2... in stored key order. A
top-level scalar is less than any non-empty array, and a top-level empty array ``[]`` is less
than every other value, JSON null included (Postgres' documented anomaly). Memcomparable keys
also hold a number's scale, after its value: as a key (GROUP BY, DISTINCT, a join or primary
key) ``1.0`` and ``1`` are two values, as in the batch engine that groups by the normal text,
while ``=`` compares them equal as Postgres does. Memcomparable keys follow this order
(relational/_memcomparable_py.py ``jsonb_body``; docs/format.md).

Callers: :mod:`relational.types` (validation), the memcomparable encoders, the stream layer's
JSONB functions (stream/expr_jsonb.py), the SQL layer's literal typing.
"""

from __future__ import annotations

import decimal
import json

MAX_DEPTH = 1000
_MAX_INT_DIGITS = 131072
MAX_SCALE = 16383   # digits after the point (Postgres' numeric limit)

# sort_key tags: the type order of Postgres' jsonb comparison (also the memcomparable tags)
NULL, STRING, NUMBER, BOOLEAN, ARRAY, OBJECT = 1, 2, 3, 4, 5, 6
#: a top-level empty array: below every other value (Postgres' compareJsonbContainers lets the
#: element count override the scalar-before-array rule at the top level, "for historical reasons")
EMPTY_TOP = 0


class JsonbSyntaxError(ValueError):
    """Text that is not a JSON value Postgres' jsonb accepts; ``position`` is the 0-based
    character offset where reading failed (None when not known)."""

    def __init__(self, message: str, position: int | None = None):
        super().__init__(message)
        self.position = position


def _reject_constant(name):
    raise ValueError(f"Token \"{name}\" is invalid")


def _number(text: str) -> decimal.Decimal:
    value = decimal.Decimal(text)
    if not value.is_zero():
        adjusted = value.adjusted()
        if adjusted >= _MAX_INT_DIGITS or -value.as_tuple().exponent > MAX_SCALE:
            raise _OutOfRange("value overflows numeric format")
    return value


class _OutOfRange(Exception):
    pass


def _object(pairs):
    merged = {}
    for key, value in pairs:   # a duplicate key keeps its last value
        merged[key] = value
    return {k: merged[k] for k in sorted(merged, key=_key_order)}


def _key_order(key: str):
    raw = key.encode("utf-8", "surrogatepass")
    return len(raw), raw


_DECODER = json.JSONDecoder(parse_float=_number, parse_int=_number, parse_constant=_reject_constant,
                            object_pairs_hook=_object)


def parse(text: str):
    """The tree of JSON ``text`` in jsonb normal form (module docstring); raises
    :class:`JsonbSyntaxError` for text Postgres' jsonb refuses."""
    if not isinstance(text, str):
        raise TypeError(f"JSON text must be a str, got {type(text).__name__}")
    try:
        tree = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JsonbSyntaxError(f"invalid input syntax for type json: {exc.msg} at line {exc.lineno}, column "
                               f"{exc.colno} (character {exc.pos + 1})", exc.pos) from None
    except ValueError as exc:   # NaN / Infinity
        raise JsonbSyntaxError(f"invalid input syntax for type json: {exc}", None) from None
    except _OutOfRange as exc:
        raise JsonbSyntaxError(str(exc), None) from None
    except RecursionError:
        raise JsonbSyntaxError(f"JSON nests deeper than {MAX_DEPTH} levels", None) from None
    _check(tree, 0)
    return tree


def _check(tree, depth: int) -> None:
    """Postgres' refusals Python's reader lets through: ``\\u0000``, lone surrogates, depth."""
    if depth > MAX_DEPTH:
        raise JsonbSyntaxError(f"JSON nests deeper than {MAX_DEPTH} levels")
    if isinstance(tree, str):
        _check_string(tree)
    elif isinstance(tree, list):
        for item in tree:
            _check(item, depth + 1)
    elif isinstance(tree, dict):
        for key, item in tree.items():
            _check_string(key)
            _check(item, depth + 1)


def _check_string(s: str) -> None:
    if "\x00" in s:
        raise JsonbSyntaxError("unsupported Unicode escape sequence: \\u0000 cannot be converted to text")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonbSyntaxError("invalid input syntax for type json: a Unicode high surrogate must be followed "
                               "by a low surrogate") from None


def from_python(value, depth: int = 0):
    """The tree of a Python json-model value (``dict``/``list``/``tuple``/``str``/``int``/
    ``float``/``Decimal``/``bool``/``None``), keys normalised; TypeError/ValueError otherwise
    (non-finite numbers, non-string keys)."""
    if depth > MAX_DEPTH:
        raise JsonbSyntaxError(f"JSON nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_string(value)
        return value
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("JSON has no NaN or Infinity")
        return _number(repr(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError("JSON has no NaN or Infinity")
        try:
            return _number(str(value))
        except _OutOfRange as exc:
            raise JsonbSyntaxError(str(exc)) from None
    if isinstance(value, (list, tuple)):
        return [from_python(v, depth + 1) for v in value]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be str, got {type(key).__name__}")
            _check_string(key)
        return _object((k, from_python(v, depth + 1)) for k, v in value.items())
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# --- text output ---------------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
for _c in range(0x20):
    _ESCAPES.setdefault(chr(_c), f"\\u{_c:04x}")
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def quote(s: str) -> str:
    """A string as Postgres' ``escape_json`` prints it (quotes included)."""
    return '"' + s.translate(_ESCAPE_TABLE) + '"'


def scale_of(d: decimal.Decimal) -> int:
    """Digits after the point in ``d``'s text (``1.50``: 2, ``100``/``1e2``: 0)."""
    return max(0, -d.as_tuple().exponent)


def number_text(d: decimal.Decimal) -> str:
    """A number as Postgres' ``numeric_out`` prints it: no exponent, the scale kept, no ``-0``."""
    if d.is_zero():
        d = abs(d)
    if d.as_tuple().exponent > 0:
        d = d.quantize(decimal.Decimal(1), context=decimal.Context(prec=max(28, d.adjusted() + 2)))
    return format(d, "f")


def to_text(tree) -> str:
    """The normal text of ``tree`` (Postgres' ``jsonb_out``)."""
    out = []
    _write(tree, out)
    return "".join(out)


def _write(tree, out: list) -> None:
    if tree is None:
        out.append("null")
    elif tree is True:
        out.append("true")
    elif tree is False:
        out.append("false")
    elif isinstance(tree, str):
        out.append(quote(tree))
    elif isinstance(tree, decimal.Decimal):
        out.append(number_text(tree))
    elif isinstance(tree, list):
        out.append("[")
        for i, item in enumerate(tree):
            if i:
                out.append(", ")
            _write(item, out)
        out.append("]")
    else:
        out.append("{")
        for i, (key, item) in enumerate(tree.items()):
            if i:
                out.append(", ")
            out.append(quote(key))
            out.append(": ")
            _write(item, out)
        out.append("}")


def normalize(text: str) -> str:
    """The normal text of JSON ``text`` (what ``text::jsonb::text`` gives in Postgres)."""
    return to_text(parse(text))


# --- order ---------------------------------------------------------------------------------------

def kind_of(tree) -> int:
    """The type tag of ``tree`` (``NULL`` ... ``OBJECT``)."""
    if tree is None:
        return NULL
    if isinstance(tree, bool):
        return BOOLEAN
    if isinstance(tree, str):
        return STRING
    if isinstance(tree, decimal.Decimal):
        return NUMBER
    if isinstance(tree, list):
        return ARRAY
    return OBJECT


def sort_key(tree):
    """A tuple that orders trees as Postgres orders jsonb values (module docstring)."""
    if tree == [] and isinstance(tree, list):   # Postgres' anomaly: a top-level [] sorts below everything
        return (EMPTY_TOP,)
    return _key(tree)


def _key(tree):
    kind = kind_of(tree)
    if kind == NULL:
        return (NULL,)
    if kind == STRING:
        return (STRING, tree.encode("utf-8"))
    if kind in (NUMBER, BOOLEAN):
        return (kind, tree)
    if kind == ARRAY:
        return (ARRAY, len(tree), tuple(_key(item) for item in tree))
    return (OBJECT, len(tree), tuple(part for key, item in tree.items()
                                     for part in (key.encode("utf-8"), _key(item))))


TYPE_NAMES = {NULL: "null", STRING: "string", NUMBER: "number", BOOLEAN: "boolean", ARRAY: "array",
              OBJECT: "object"}
