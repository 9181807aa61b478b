"""Arrays in expressions: Postgres' one-dimensional arrays, stored as the relational LIST type
(``DataType.list(elem)``; a Python ``list``, an Arrow ``list_`` column).

Nodes: :class:`ArrayCtor` (``ARRAY[a, b, ...]``), :class:`ArrayIndex` (``a[i]``),
:class:`ArraySlice` (``a[lo:hi]``), :class:`ArrayCompare` (``x op ANY(a)`` / ``x op ALL(a)``;
``a op b`` between two arrays; ``@>``, ``<@``, ``&&``). Functions (``FUNCS``, merged into
:mod:`stream.expr_funcs`' table): ``array_length``, ``cardinality``, ``array_lower``, ``array_upper``, ``array_ndims``,
``array_dims``, ``array_position(s)``, ``array_append``, ``array_prepend``, ``array_cat``,
``array_remove``, ``array_replace``, ``array_to_string``, ``string_to_array``, ``regexp_match``,
``regexp_split_to_array``.
Text in and out (:func:`array_text`, :func:`parse_array_text`) and the casts ``LIST <-> LIST``
(element by element) and ``VARCHAR <-> LIST`` (:func:`cast_array`, which
:func:`stream.expr_cast.cast_to` calls).

Semantics (PostgreSQL 16, arrays of one dimension with lower bound 1):
- ``a[i]`` is 1-based; an index outside ``1..cardinality(a)`` or a NULL index is NULL (not an
  error). ``a[lo:hi]`` clamps to the array's bounds; an empty range is ``{}``.
- ``array_length(a, 1)`` of an empty array is NULL, ``cardinality`` is 0; any other dimension NULL.
- Elements compare with ``IS NOT DISTINCT FROM`` in ``array_position``/``array_remove``/
  ``array_replace`` (a NULL element is found); in ``= ANY`` with SQL's three-valued logic: true
  if some element compares true, else NULL if some comparison was NULL, else false (``ALL``:
  false if some is false, else NULL if some is NULL, else true; an empty array gives false for
  ANY, true for ALL). Two arrays compare element by element as Postgres' ``array_cmp``: NULL
  elements equal each other and sort after every value; a shorter prefix sorts first. Floats
  order NaN above every number and equal to itself, as Postgres does.
- Text output is ``array_out``'s: ``{1,2,NULL}``; an element that is empty, spells ``NULL``, or
  holds a space, ``{ } , " \\`` is double-quoted with ``"`` and ``\\`` backslash-escaped; an
  element prints as its ``::text`` (a boolean as ``t``/``f``, bytea as ``\\x...``).

Invariants: every node's ``data_type`` is fixed at construction (the binder has already cast
the element operands to the array's element type); NULL array in, NULL out except where
Postgres says otherwise (``array_append``/``array_prepend``/``array_cat`` read a NULL array as
empty, ``string_to_array`` with a NULL delimiter splits into characters). Rows are computed in
Python (:func:`stream.expr_pg.rowwise`), except ``cardinality``, ``array_length(a, 1)`` and
``a[i]`` (Arrow kernels and numpy index arithmetic over the flattened elements) and casts, which
flatten and cast the elements with Arrow.

Callers: :mod:`stream.expr_funcs` (``FUNCS``), :mod:`stream.expr_cast` (``cast_array``), the SQL
binder (:mod:`sql.bind.expr`), the SQL types module (text of array literals) and the CLI/pgwire
formatting (:func:`format_array_value`).
"""

from __future__ import annotations

import decimal
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from relational.arrow import arrow_type, to_arrow
from relational.types import DataType, TypeKind
from stream.errors import ExpressionError
from stream.expr_base import Expr
from stream.expr_pg import RowError, _const, _regex, rowwise

_V = DataType.VARCHAR
_INT = DataType.INT
_INTS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)


def is_array(t: DataType) -> bool:
    return t.kind == TypeKind.LIST


# --- text in and out ---------------------------------------------------------------------------

_NEEDS_QUOTES = re.compile(r'[{}",\\\s]')


def quote_element(text: str) -> str:
    """One element's text as ``array_out`` writes it (module docstring)."""
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def element_texts(values: pa.Array, elem: DataType) -> list:
    """The ``::text`` of each value of a flat Arrow array of ``elem`` (None for NULL); a boolean
    is ``t``/``f`` and bytea ``\\x`` hex, as inside an array and in ``array_to_string``."""
    if elem.kind == TypeKind.BOOLEAN:
        return [None if v is None else ("t" if v else "f") for v in values.to_pylist()]
    if elem.kind == TypeKind.BYTEA:
        return [None if v is None else "\\x" + v.hex() for v in values.to_pylist()]
    if elem.kind == TypeKind.LIST:
        return array_text(values, elem)
    if elem.kind == TypeKind.STRUCT:
        return [None if v is None else str(v) for v in values.to_pylist()]
    from stream.expr_cast import cast_to   # cast_to imports this module lazily: no cycle
    return cast_to(values, elem, _V, None).to_pylist()


def _split(array: pa.Array) -> tuple:
    """``(flat values, [(start, stop) or None per row])`` of an Arrow list array."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    lengths = pc.list_value_length(array).to_pylist()
    spans, at = [], 0
    for n in lengths:
        if n is None:
            spans.append(None)
        else:
            spans.append((at, at + n))
            at += n
    return array.flatten(), spans


def _element_lists(array: pa.Array, elem: DataType) -> list:
    """Each row of a list array as a list of element texts (None: a NULL array)."""
    flat, spans = _split(array)
    texts = element_texts(flat, elem)
    return [None if s is None else texts[s[0]:s[1]] for s in spans]


def array_text(array: pa.Array, dtype: DataType) -> list:
    """``array_out`` of each row of an Arrow list array of ``dtype`` (None for a NULL array)."""
    return [None if row is None else "{" + ",".join("NULL" if t is None else quote_element(t) for t in row) + "}"
            for row in _element_lists(array, dtype.elem)]


def format_array_value(value, dtype: DataType) -> str:
    """The Postgres text of one array value (a Python list of ``dtype``'s elements)."""
    return array_text(to_arrow([value], dtype), dtype)[0]


def parse_array_text(text: str) -> list:
    """The element texts of a one-dimensional array literal (``'{1, "a b", NULL}'``), None for an
    unquoted NULL; ValueError ("malformed array literal") when it is not one."""
    s = text.strip()
    if s.startswith("["):   # optional dimension decoration [1:n]=
        m = re.match(r"\[\s*1\s*:\s*(\d+)\s*\]\s*=", s)
        if m is None:
            raise ValueError(f"malformed array literal: {text!r:.60} (only lower bound 1 is supported)")
        s = s[m.end():].strip()
    if not (s.startswith("{") and s.endswith("}")):
        raise ValueError(f"malformed array literal: {text!r:.60}")
    body, out, i = s[1:-1], [], 0
    if not body.strip():
        return out
    while True:
        while i < len(body) and body[i].isspace():
            i += 1
        if i < len(body) and body[i] == "{":
            raise ValueError("multidimensional arrays are not supported")
        if i < len(body) and body[i] == '"':
            i, buf = i + 1, []
            while i < len(body) and body[i] != '"':
                if body[i] == "\\":
                    i += 1
                    if i == len(body):
                        break
                buf.append(body[i])
                i += 1
            if i >= len(body):
                raise ValueError(f"malformed array literal: {text!r:.60} (unterminated quote)")
            i += 1
            item = "".join(buf)
        else:
            buf = []
            while i < len(body) and body[i] not in ",}":
                if body[i] in '{"':
                    raise ValueError(f"malformed array literal: {text!r:.60}")
                if body[i] == "\\" and i + 1 < len(body):
                    i += 1
                buf.append(body[i])
                i += 1
            item = "".join(buf).strip()
            if item == "":
                raise ValueError(f"malformed array literal: {text!r:.60} (empty element)")
            if item.upper() == "NULL":
                item = None
        out.append(item)
        while i < len(body) and body[i].isspace():
            i += 1
        if i == len(body):
            return out
        if body[i] != ",":
            raise ValueError(f"malformed array literal: {text!r:.60}")
        i += 1


_BOOL_TEXT = {"t": True, "true": True, "yes": True, "y": True, "on": True, "1": True,
              "f": False, "false": False, "no": False, "n": False, "off": False, "0": False}


def _from_texts(texts: list, elem: DataType, expr) -> pa.Array:
    """Element texts as an Arrow array of ``elem`` (each read as ``text::elem``)."""
    if elem.kind == TypeKind.BOOLEAN:
        out = []
        for t in texts:
            if t is not None and t.strip().lower() not in _BOOL_TEXT:
                raise RowError(f"invalid input syntax for type boolean: {t!r}")
            out.append(None if t is None else _BOOL_TEXT[t.strip().lower()])
        return pa.array(out, pa.bool_())
    from stream.expr_cast import cast_to
    return cast_to(pa.array(texts, pa.string()), _V, elem, expr)


def cast_array(value, source: DataType, target: DataType, expr):
    """``value`` (an Arrow array or scalar) of ``source`` as ``target`` where one of them is an
    array type: LIST -> LIST element by element, LIST -> VARCHAR as ``array_out``, VARCHAR ->
    LIST as ``array_in`` (a malformed literal is a data error)."""
    scalar = isinstance(value, pa.Scalar)
    array = pa.array([value.as_py()], value.type) if scalar else value
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if is_array(source) and target == _V:
        out = pa.array(array_text(array, source), pa.string())
    elif is_array(source) and is_array(target):
        flat, spans = _split(array)
        from stream.expr_cast import cast_to
        values = cast_to(flat, source.elem, target.elem, expr)
        out = _rebuild(values, spans, target)
    elif source == _V and is_array(target):
        rows, bad = [], None
        for text in array.to_pylist():
            try:
                rows.append(None if text is None else parse_array_text(text))
            except ValueError as exc:
                rows.append(None)
                bad = bad or str(exc)
        if bad is not None:
            from stream.expr_errors import data_error
            data_error(str(expr) if expr is not None else "array", bad)
        spans, flat, at = [], [], 0
        for row in rows:
            if row is None:
                spans.append(None)
                continue
            spans.append((at, at + len(row)))
            flat.extend(row)
            at += len(row)
        out = _rebuild(_from_texts(flat, target.elem, expr), spans, target)
    else:
        raise ExpressionError(f"cannot cast {source.sql_name()} to {target.sql_name()}", expr)
    return out[0] if scalar else out


def _rebuild(values: pa.Array, spans: list, dtype: DataType) -> pa.Array:
    offsets, mask, at = [0], [], 0
    for s in spans:
        mask.append(s is None)
        at += 0 if s is None else s[1] - s[0]
        offsets.append(at)
    out = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=pa.array(mask, pa.bool_()))
    return out.cast(arrow_type(dtype)) if out.type != arrow_type(dtype) else out


# --- comparing values --------------------------------------------------------------------------

def _key(v):
    """A sort key of one element as Postgres orders it: NaN above every number (and equal to
    itself), NULL after every value."""
    if v is None:
        return (2,)
    if isinstance(v, float) and math.isnan(v) or isinstance(v, decimal.Decimal) and v.is_nan():
        return (1,)
    if isinstance(v, list):
        return (0, [_key(x) for x in v])
    return (0, v)


_OPS = {"=": lambda c: c == 0, "<>": lambda c: c != 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
        ">": lambda c: c > 0, ">=": lambda c: c >= 0}


def _compare(a, b) -> int:
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def _contains(a, b) -> bool:   # Postgres' arraycontains: every element of b equals one of a (NULL never does)
    keys = {_hashable(e) for e in a if e is not None}
    return all(e is not None and _hashable(e) in keys for e in b)


def _hashable(v):
    return tuple(_key(v)) if not isinstance(v, list) else (0, tuple(_hashable(x) for x in v))


_SET_OPS = {"@>": lambda a, b: _contains(a, b), "<@": lambda a, b: _contains(b, a),
            "&&": lambda a, b: bool({_hashable(e) for e in a if e is not None} &
                                    {_hashable(e) for e in b if e is not None})}


class ArrayCompare(Expr):
    """``x op ANY(a)`` / ``x op ALL(a)`` (``quantifier`` "any" / "all"), or ``a op b`` between
    two arrays (``quantifier`` None: ``= <> < <= > >=`` element by element, ``@>`` contains,
    ``<@`` is contained by, ``&&`` overlaps -- NULL elements never match); BOOLEAN (module
    docstring)."""

    def __init__(self, op: str, left: Expr, right: Expr, quantifier: str | None = None):
        if op in _SET_OPS and quantifier is None:
            self.op, self.left, self.right, self.quantifier = op, left, right, None
            self.data_type = DataType.BOOLEAN
            if not (is_array(left.data_type) and left.data_type == right.data_type):
                raise ExpressionError(f"operator does not exist: {left.data_type.sql_name()} {op} "
                                      f"{right.data_type.sql_name()}", self)
            return
        if op not in _OPS:
            raise ExpressionError(f"operator {op} is not supported with arrays", self)
        self.op, self.left, self.right, self.quantifier = op, left, right, quantifier
        self.data_type = DataType.BOOLEAN
        if not is_array(right.data_type) or quantifier is None and not is_array(left.data_type):
            raise ExpressionError(f"operator does not exist: {left.data_type.sql_name()} {op} "
                                  f"{right.data_type.sql_name()}", self)

    def children(self) -> tuple:
        return (self.left, self.right)

    def evaluate(self, columns):
        if self.op in _SET_OPS:
            return rowwise(_SET_OPS[self.op], lambda ts: DataType.BOOLEAN)([self.left, self.right], columns)
        test = _OPS[self.op]
        if self.quantifier is None:
            return rowwise(lambda a, b: test(_compare(a, b)), lambda ts: DataType.BOOLEAN)(
                [self.left, self.right], columns)
        want_all = self.quantifier == "all"
        lk, ek = self.left.data_type.kind, self.right.data_type.elem.kind
        if ek in _VECTOR_KINDS and self.left.data_type == self.right.data_type.elem:
            return _quantified_vec(self.op, want_all, self.left.evaluate(columns), self.right.evaluate(columns))
        if lk in _INT_KINDS and ek in _INT_KINDS:   # integers of two widths: compared as BIGINT (exact)
            return _quantified_vec(self.op, want_all, _as_int64(self.left.evaluate(columns)),
                                   _as_int64(self.right.evaluate(columns)))

        def quantified(x, arr):
            if arr is None:
                return None
            unknown = False
            for e in arr:
                if x is None or e is None:
                    unknown = True
                elif test(_compare(x, e)) != want_all:
                    return not want_all
            return None if unknown else want_all
        return rowwise(quantified, lambda ts: DataType.BOOLEAN, strict=False)([self.left, self.right], columns)

    def __str__(self) -> str:
        if self.quantifier is None:
            return f"({self.left} {self.op} {self.right})"
        return f"({self.left} {self.op} {self.quantifier.upper()}({self.right}))"


# element kinds whose Arrow comparison is Postgres' (no NaN, no decimal text, no intervals)
_VECTOR_KINDS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.VARCHAR, TypeKind.BOOLEAN,
                 TypeKind.DATE, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
_KERNELS = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}


_INT_KINDS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)


def _as_int64(v):
    """An integer column, array column or scalar of either, widened to BIGINT."""
    t = v.type
    wide = pa.list_(pa.int64()) if pa.types.is_list(t) else pa.int64()
    return v if t == wide else v.cast(wide)


def _in_set(op: str, x, arr: pa.Scalar):
    """``x = ANY (arr)`` / ``x <> ALL (arr)`` of a column against one constant array, by one
    hash lookup per row (``is_in``): a match decides; else a NULL element (or a NULL x, or a NULL
    array) makes the row NULL, as comparing with it would."""
    n = len(x)
    if not arr.is_valid:
        return pa.nulls(n, pa.bool_())
    values = arr.values
    has_null = values.null_count > 0
    found = pc.is_in(x, value_set=values.drop_null())   # NULL x: false here, masked below
    x_null = np.asarray(x.is_null(), dtype=bool)
    hit = np.asarray(pc.fill_null(found, False), dtype=bool)
    null = x_null | (~hit & has_null)
    out = hit if op == "=" else ~hit
    return pa.array(out, pa.bool_(), mask=null)


def _quantified_vec(op: str, want_all: bool, x, arr):
    """``x op ANY / ALL (arr)`` with Arrow kernels: every element compared with its row's ``x``,
    then per row the counts of true, false and unknown comparisons decide (ArrayCompare)."""
    scalar = isinstance(arr, pa.Scalar)
    if scalar and not isinstance(x, pa.Scalar) and (op, want_all) in (("=", False), ("<>", True)):
        if isinstance(x, pa.ChunkedArray):
            x = x.combine_chunks()
        return _in_set(op, x, arr)
    if scalar:
        arr = pa.array([arr.as_py()], arr.type)
        if not isinstance(x, pa.Scalar):   # a constant array against a column: repeat the array
            arr = pa.repeat(pa.scalar(arr[0].as_py(), arr.type), len(x)) if arr[0].is_valid else \
                pa.nulls(len(x), arr.type)
            scalar = False
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    lengths = np.asarray(pc.fill_null(pc.list_value_length(arr), 0), dtype=np.int64)
    flat = arr.flatten()
    if isinstance(x, pa.Scalar):
        xs = x
    else:
        xs = (x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x).take(
            pa.array(np.repeat(np.arange(n, dtype=np.int64), lengths)))
    result = _KERNELS[op](xs, flat)   # x op element
    if isinstance(result, pa.Scalar):   # no element at all
        result = pa.nulls(0, pa.bool_())
    unknown = np.asarray(result.is_null(), dtype=np.int64)
    true = np.asarray(pc.fill_null(result, False), dtype=np.int64)
    ends = np.cumsum(lengths)

    def per_row(flags):   # how many of each row's elements are set
        total = np.concatenate(([0], np.cumsum(flags)))
        return total[ends] - total[ends - lengths]
    n_true, n_unknown = per_row(true), per_row(unknown)
    n_false = lengths - n_true - n_unknown
    if want_all:
        out = np.where(n_false > 0, False, True)
        decided = n_false > 0
    else:
        out = np.where(n_true > 0, True, False)
        decided = n_true > 0
    null = (~decided & (n_unknown > 0)) | np.asarray(arr.is_null(), dtype=bool)
    out = pa.array(out, pa.bool_(), mask=null)
    return out[0] if scalar else out


# --- nodes -------------------------------------------------------------------------------------

class ArrayCtor(Expr):
    """``ARRAY[e1, e2, ...]`` of elements already of ``elem`` (an empty one needs its type)."""

    def __init__(self, items, elem: DataType):
        self.items, self.data_type = tuple(items), DataType.list(elem)
        if elem.kind == TypeKind.LIST:
            raise ExpressionError("multidimensional arrays are not supported", self)
        for e in self.items:
            if e.data_type != elem:
                raise ExpressionError(f"ARRAY element {e} is {e.data_type.sql_name()}, not {elem.sql_name()}", self)

    def children(self) -> tuple:
        return self.items

    def evaluate(self, columns):
        if not self.items:
            return pa.scalar([], arrow_type(self.data_type))
        return rowwise(lambda *vs: list(vs), lambda ts: self.data_type, strict=False)(list(self.items), columns)

    def __str__(self) -> str:
        return "ARRAY[" + ", ".join(map(str, self.items)) + "]"


def _need_int(e: Expr, what: str, parent) -> None:
    if e.data_type.kind not in _INTS:
        raise ExpressionError(f"array {what} must be an integer, not {e.data_type.sql_name()}", parent)


class ArrayIndex(Expr):
    """``arr[i]``: 1-based, NULL outside the array's bounds."""

    def __init__(self, arr: Expr, index: Expr):
        if not is_array(arr.data_type):
            raise ExpressionError(f"cannot subscript type {arr.data_type.sql_name()} because it does not "
                                  "support subscripting", self)
        _need_int(index, "subscript", self)
        self.arr, self.index, self.data_type = arr, index, arr.data_type.elem

    def children(self) -> tuple:
        return (self.arr, self.index)

    def evaluate(self, columns):
        arr, index = self.arr.evaluate(columns), self.index.evaluate(columns)
        if isinstance(arr, pa.Scalar):   # a constant array: row by row (rare, small)
            return rowwise(lambda a, i: a[i - 1] if 1 <= i <= len(a) else None, lambda ts: self.data_type)(
                [self.arr, self.index], columns)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        n = len(arr)
        lengths = np.asarray(pc.fill_null(pc.list_value_length(arr), 0), dtype=np.int64)
        if isinstance(index, pa.Scalar):
            i = np.full(n, index.as_py() if index.is_valid else 0, dtype=np.int64)
        else:
            i = np.asarray(pc.fill_null(pc.cast(index, pa.int64()), 0), dtype=np.int64)
        valid = (i >= 1) & (i <= lengths)   # a NULL array has length 0, a NULL index is 0: NULL
        flat = arr.flatten()
        if not valid.any():
            return pa.nulls(n, flat.type)
        at = np.cumsum(lengths) - lengths + i - 1
        return flat.take(pa.array(np.where(valid, at, 0), mask=~valid))

    def __str__(self) -> str:
        return f"{self.arr}[{self.index}]"


class ArraySlice(Expr):
    """``arr[lo:hi]`` (either bound may be omitted: None), clamped to the array's bounds."""

    def __init__(self, arr: Expr, lo: Expr | None, hi: Expr | None):
        if not is_array(arr.data_type):
            raise ExpressionError(f"cannot subscript type {arr.data_type.sql_name()} because it does not "
                                  "support subscripting", self)
        for b in (lo, hi):
            if b is not None:
                _need_int(b, "subscript", self)
        self.arr, self.lo, self.hi, self.data_type = arr, lo, hi, arr.data_type

    def children(self) -> tuple:
        return tuple(e for e in (self.arr, self.lo, self.hi) if e is not None)

    def evaluate(self, columns):
        args = [self.arr] + [e for e in (self.lo, self.hi) if e is not None]
        has_lo, has_hi = self.lo is not None, self.hi is not None

        def slice_(a, *bounds):
            lo = bounds[0] if has_lo else 1
            hi = bounds[-1] if has_hi else len(a)
            lo, hi = max(lo, 1), min(hi, len(a))
            return a[lo - 1:hi] if lo <= hi else []
        return rowwise(slice_, lambda ts: self.data_type)(args, columns)

    def __str__(self) -> str:
        return f"{self.arr}[{self.lo if self.lo is not None else ''}:{self.hi if self.hi is not None else ''}]"


# --- functions ---------------------------------------------------------------------------------

def _same(a, b) -> bool:   # IS NOT DISTINCT FROM, as array_position / array_remove compare
    return _compare(a, b) == 0


def _array_length(a, dim):
    return len(a) if dim == 1 and a else None


def _array_upper(a, dim):
    return len(a) if dim == 1 and a else None


def _array_lower(a, dim):
    return 1 if dim == 1 and a else None


def _array_position(a, x, start=1):
    if a is None:
        return None
    if start is None:
        raise RowError("initial position must not be null")
    for i in range(max(start, 1) - 1, len(a)):
        if _same(a[i], x):
            return i + 1
    return None


def _array_positions(a, x):
    return None if a is None else [i + 1 for i, e in enumerate(a) if _same(e, x)]


def _array_append(a, x):
    return (a or []) + [x]


def _array_prepend(x, a):
    return [x] + (a or [])


def _array_cat(a, b):
    if a is None and b is None:
        return None
    return (a or []) + (b or [])


def _array_remove(a, x):
    return None if a is None else [e for e in a if not _same(e, x)]


def _array_replace(a, x, y):
    return None if a is None else [y if _same(e, x) else e for e in a]


def _string_to_array(s, delim, null=None):
    if s is None:
        return None
    if s == "":
        parts = []
    elif delim is None:
        parts = list(s)
    elif delim == "":
        parts = [s]
    else:
        parts = s.split(delim)
    return [None if null is not None and p == null else p for p in parts]


def _array_to_string(args, columns):
    """``array_to_string(a, delimiter [, null_text])``: the elements' text joined; NULL elements
    left out unless ``null_text`` is given."""
    arr = args[0].evaluate(columns)
    scalar = isinstance(arr, pa.Scalar)
    rows = _element_lists(pa.array([arr.as_py()], arr.type) if scalar else arr, args[0].data_type.elem)
    # the element texts stand in for the array: one VARCHAR[] column, then row by row
    texts = pa.array(rows, pa.list_(pa.string()))
    text_arg = _Given(texts[0] if scalar else texts, DataType.list(_V))

    def join(row, delim, null=None):   # a NULL null_text is as if not given (Postgres)
        if row is None or delim is None:
            return None
        return delim.join(t if t is not None else null for t in row if t is not None or null is not None)
    return rowwise(join, lambda ts: _V, strict=False)([text_arg] + list(args[1:]), columns)


class _Given(Expr):
    """An already computed value standing in as an argument (internal)."""

    def __init__(self, value, data_type: DataType):
        self.value, self.data_type = value, data_type

    def evaluate(self, columns):
        return self.value


def _regexp_match(args, columns):
    """``regexp_match(s, pattern [, flags])``: the first match's capture groups (the whole match
    when the pattern has none) as text[], NULL when nothing matches; ``g`` is refused, as Postgres."""
    pattern = _const(args[1], "regexp_match's pattern")
    flags = _const(args[2], "regexp_match's flags") if len(args) > 2 else ""
    if pattern is None or flags is None:
        return pa.scalar(None, pa.list_(pa.string()))
    if "g" in flags:
        raise ExpressionError("regexp_match() does not support the \"global\" option (use regexp_matches)")
    rx = _regex(pattern, flags)

    def regexp_match(s):
        m = rx.search(s)
        if m is None:
            return None
        return list(m.groups()) if rx.groups else [m.group(0)]
    return rowwise(regexp_match, lambda ts: DataType.list(_V))(args[:1], columns)


def _regexp_matches_list(args, columns):
    """The rows of the set-returning ``regexp_matches(s, pattern [, flags])`` as one list per row
    (``"regexp_matches list"``, an internal name: sql/bind/regexp_rows.py unnests it): each match's
    capture groups (the whole match when the pattern has none; an unmatched group NULL) as text[];
    without ``g`` the first match only, with ``g`` every match, the search going on at its end (one
    character further after an empty match, as Python's ``finditer`` and Postgres both do)."""
    pattern = _const(args[1], "regexp_matches' pattern")
    flags = _const(args[2], "regexp_matches' flags") if len(args) > 2 else ""
    if pattern is None or flags is None:
        return pa.scalar(None, pa.list_(pa.list_(pa.string())))
    rx = _regex(pattern, flags)
    every = "g" in flags

    def regexp_matches(s):
        out = []
        for m in rx.finditer(s):
            out.append(list(m.groups()) if rx.groups else [m.group(0)])
            if not every:
                break
        return out
    return rowwise(regexp_matches, lambda ts: DataType.list(DataType.list(_V)))(args[:1], columns)


def _regexp_split_to_array(args, columns):
    """``regexp_split_to_array(s, pattern [, flags])``: the text between matches, as Postgres
    splits -- a zero-length match at the start or the end of the text, or right after the
    previous match, splits nothing (``regexp_split_to_array('abc', '')`` is ``{a,b,c}``)."""
    pattern = _const(args[1], "regexp_split_to_array's pattern")
    flags = _const(args[2], "regexp_split_to_array's flags") if len(args) > 2 else ""
    if pattern is None or flags is None:
        return pa.scalar(None, pa.list_(pa.string()))
    if "g" in flags:
        raise ExpressionError("regexp_split_to_array() does not support the \"global\" option")
    rx = _regex(pattern, flags)

    def regexp_split_to_array(s):
        out, start, prev_end = [], 0, 0
        for m in rx.finditer(s):
            if m.start() == m.end() and (m.start() in (0, len(s)) or m.start() == prev_end):
                continue
            out.append(s[start:m.start()])
            start = prev_end = m.end()
        out.append(s[start:])
        return out
    return rowwise(regexp_split_to_array, lambda ts: DataType.list(_V))(args[:1], columns)


def _arr_typer(*rest, out):
    """Typing of ``f(array, rest...)``: ``rest`` items are "elem" (the array's element type),
    "int", "text" or "array" (the same array type); ``out`` likewise or a DataType."""
    def typer(ts):
        if not ts or not is_array(ts[0]) or len(ts) - 1 > len(rest):
            return None
        want = {"elem": ts[0].elem, "array": ts[0], "text": _V}
        for t, w in zip(ts[1:], rest):
            if (t.kind not in _INTS) if w == "int" else t != want[w]:
                return None
        return want.get(out, out) if isinstance(out, str) else out
    return typer


def _prepend_type(ts):
    return ts[1] if len(ts) == 2 and is_array(ts[1]) and ts[0] == ts[1].elem else None


def _string_to_array_type(ts):
    return DataType.list(_V) if all(t == _V for t in ts) else None


def _fn(f, out_of, strict=True):
    return lambda a, c: rowwise(f, lambda ts: out_of(ts), strict)(a, c)


def _lengths(arr) -> pa.Array:
    """Each row's element count (NULL for a NULL array) as INT, vectorized."""
    return pc.cast(pc.list_value_length(arr), pa.int32())


def _cardinality(args, columns):
    return _lengths(args[0].evaluate(columns))


def _array_length_vec(args, columns):
    """``array_length(a, 1)`` as Arrow kernels (an empty array is NULL); other dimensions, or a
    dimension that is not a constant, row by row."""
    value = args[1].evaluate(columns)
    if not isinstance(value, pa.Scalar):
        return rowwise(_array_length, lambda ts: _INT)(args, columns)
    if not value.is_valid or value.as_py() != 1:
        return pa.scalar(None, pa.int32())
    lengths = _lengths(args[0].evaluate(columns))
    return pc.if_else(pc.equal(lengths, 0), pa.scalar(None, pa.int32()), lengths)


FUNCS = {
    # name: (implementation, result type from the argument types, (min args, max args))
    "array_length": (_array_length_vec, _arr_typer("int", out=_INT), (2, 2)),
    "cardinality": (_cardinality, _arr_typer(out=_INT), (1, 1)),
    "array_upper": (_fn(_array_upper, lambda ts: _INT), _arr_typer("int", out=_INT), (2, 2)),
    "array_lower": (_fn(_array_lower, lambda ts: _INT), _arr_typer("int", out=_INT), (2, 2)),
    "array_ndims": (_fn(lambda a: 1 if a else None, lambda ts: _INT), _arr_typer(out=_INT), (1, 1)),
    "array_dims": (_fn(lambda a: f"[1:{len(a)}]" if a else None, lambda ts: _V), _arr_typer(out=_V), (1, 1)),
    "array_position": (_fn(_array_position, lambda ts: _INT, strict=False), _arr_typer("elem", "int", out=_INT),
                       (2, 3)),
    "array_positions": (_fn(_array_positions, lambda ts: DataType.list(_INT), strict=False),
                        _arr_typer("elem", out=DataType.list(_INT)), (2, 2)),
    "array_append": (_fn(_array_append, lambda ts: ts[0], strict=False), _arr_typer("elem", out="array"), (2, 2)),
    "array_prepend": (_fn(_array_prepend, lambda ts: ts[1], strict=False), _prepend_type, (2, 2)),
    "array_cat": (_fn(_array_cat, lambda ts: ts[0], strict=False), _arr_typer("array", out="array"), (2, 2)),
    "array_remove": (_fn(_array_remove, lambda ts: ts[0], strict=False), _arr_typer("elem", out="array"), (2, 2)),
    "array_replace": (_fn(_array_replace, lambda ts: ts[0], strict=False),
                      _arr_typer("elem", "elem", out="array"), (3, 3)),
    "array_to_string": (_array_to_string, _arr_typer("text", "text", out=_V), (2, 3)),
    "string_to_array": (_fn(_string_to_array, lambda ts: DataType.list(_V), strict=False), _string_to_array_type,
                        (2, 3)),
    "regexp_split_to_array": (_regexp_split_to_array,
                              lambda ts: DataType.list(_V) if all(t == _V for t in ts) else None, (2, 3)),
    "regexp_match": (_regexp_match, lambda ts: DataType.list(_V) if all(t == _V for t in ts) else None, (2, 3)),
    "regexp_matches list": (_regexp_matches_list,
                            lambda ts: DataType.list(DataType.list(_V)) if all(t == _V for t in ts) else None, (2, 3)),
}
