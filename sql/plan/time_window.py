"""TUMBLE and HOP window table functions (RisingWave spelling), bound, planned and executed.

``FROM TUMBLE(rel, time_col, size [, offset])`` gives every row of ``rel`` plus ``window_start``
and ``window_end``: the window ``[start, start + size)`` containing ``time_col``, where
``start = offset + k * size``. ``FROM HOP(rel, time_col, slide, size [, offset])`` gives each
row once per window containing it (``size / slide`` of them; windows start at
``offset + k * slide``). ``rel`` is a table, MV or CTE name; ``time_col`` a TIMESTAMP or
TIMESTAMPTZ column; the sizes constant INTERVALs without months (a month has no fixed length),
``size`` a positive multiple of ``slide``.

Plan: the plan nodes :class:`TumbleWindow` / :class:`HopWindow` append the two window columns
to their input (stream: the executors of :mod:`stream.executors.hop_window`; batch: the same
arithmetic, :func:`stream.executors.hop_window.window_starts`), under a ``Project`` that puts
them after the relation's visible columns (hidden key columns stay last).

Invariants: TUMBLE keeps its input's stream key and every row (a NULL time gives NULL window
columns); HOP drops rows whose time is NULL and its key is the input's plus ``window_start``.
Batch and stream give the same rows (tests/test_sql_time_window.py checks an MV against a model).

Callers: :mod:`sql.bind.select` (``bind_window_table`` for a FROM item), :mod:`sql.build`
(``build_executor``), :mod:`sql.batch.execute` (``run_batch``), EXPLAIN (labels).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from relational.types import DataType, TypeKind
from stream import executors as X
from stream.executors.hop_window import out_of_range, window_starts

from sql.bind.expr import ExprBinder, Scope, _name
from sql.errors import BindError, UnsupportedError, error_at
from sql.plan import nodes as P

WINDOW_FUNCTIONS = ("TUMBLE", "HOP")
_TIME_TYPES = (DataType.TIMESTAMP, DataType.TIMESTAMPTZ)


class _Window(P.Node):
    """Input columns, then ``window_start`` and ``window_end`` (the time column's type)."""

    row_wise = True   # each input change maps to changes of the same op (P.inserts_only)

    def __init__(self, input: P.Node, time_col: int, slide: int, size: int, offset: int, key):
        self.input, self.inputs = input, (input,)
        self.time_col, self.slide, self.size, self.offset = time_col, slide, size, offset
        t = input.types[time_col]
        self._finish(input.names + ["window_start", "window_end"], input.types + [t, t], key)

    def _args(self) -> str:
        return f"time_col=${self.time_col}, size={_show(self.size)}" + \
            (f", offset={_show(self.offset)}" if self.offset else "")


class TumbleWindow(_Window):
    def __init__(self, input: P.Node, time_col: int, size: int, offset: int = 0):
        super().__init__(input, time_col, size, size, offset, input.stream_key)

    def label(self) -> str:
        return f"TumbleWindow({self._args()})"


class HopWindow(_Window):
    def __init__(self, input: P.Node, time_col: int, slide: int, size: int, offset: int = 0):
        super().__init__(input, time_col, slide, size, offset, list(input.stream_key) + [len(input.types)])

    def label(self) -> str:
        return f"HopWindow(slide={_show(self.slide)}, {self._args()})"


def _show(micros: int) -> str:
    return f"{micros // 1_000_000}s" if micros % 1_000_000 == 0 else f"{micros}us"


# --- binding -------------------------------------------------------------------------------------

def is_window_table(node) -> bool:
    """Whether FROM item ``node`` is ``TUMBLE(...)`` / ``HOP(...)``."""
    return isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous) and \
        node.this.name.upper() in WINDOW_FUNCTIONS


def bind_window_table(binder, node, alias_name, col_aliases):
    """``(plan, scope)`` of a ``TUMBLE``/``HOP`` FROM item (module docstring). ``binder`` is the
    :class:`sql.bind.select.QueryBinder` (it binds the relation argument like any FROM item)."""
    fn = node.this
    kind = fn.name.upper()
    args = list(fn.expressions)
    arity = (3, 4) if kind == "TUMBLE" else (4, 5)
    if len(args) not in arity:
        spell = "TUMBLE(relation, time_col, size [, offset])" if kind == "TUMBLE" else \
            "HOP(relation, time_col, slide, size [, offset])"
        raise error_at(BindError, f"{kind} takes {arity[0]} or {arity[1]} arguments: {spell}", fn)
    rel_arg = args[0]
    if not (isinstance(rel_arg, exp.Column) and rel_arg.args.get("table") is None
            and isinstance(rel_arg.this, exp.Identifier)):
        raise error_at(UnsupportedError, f"the first argument of {kind} must be a table, materialized view or "
                                         "CTE name", rel_arg)
    rel_name = _name(rel_arg.this)
    inner, inner_scope = binder._from_item(exp.Table(this=rel_arg.this.copy()))
    time_arg = args[1]
    if not isinstance(time_arg, exp.Column) or isinstance(time_arg.this, exp.Star):
        raise error_at(BindError, f"the second argument of {kind} must be a column of {rel_name}", time_arg)
    col = inner_scope.resolve(_name(time_arg.this), _name(time_arg.args.get("table")), time_arg)
    if col.dtype not in _TIME_TYPES:
        raise error_at(BindError, f"the time column of {kind} must be a TIMESTAMP or TIMESTAMPTZ, "
                                  f"not {col.dtype.sql_name()} ({col.name!r})", time_arg)
    consts = ExprBinder(Scope(), binder.params, context=kind)
    sizes = [_micros(consts, a, kind, what) for a, what in
             zip(args[2:], (("size", "offset") if kind == "TUMBLE" else ("slide", "size", "offset")))]
    if kind == "TUMBLE":
        size, offset = sizes[0], (sizes[1] if len(sizes) > 1 else 0)
        _positive(size, "size", args[2], kind)
        window = TumbleWindow(inner, col.index, size, offset)
    else:
        slide, size, offset = sizes[0], sizes[1], (sizes[2] if len(sizes) > 2 else 0)
        _positive(slide, "slide", args[2], kind)
        _positive(size, "size", args[3], kind)
        if size % slide:
            raise error_at(BindError, f"HOP window size {_show(size)} must be a multiple of its slide "
                                      f"{_show(slide)}", args[3])
        window = HopWindow(inner, col.index, slide, size, offset)
    n = inner.n_visible
    width = len(inner.types)
    exprs = [P.Col(i, inner.types[i], inner.names[i]) for i in range(n)]
    exprs += [P.Col(width + j, window.types[width + j], window.names[width + j]) for j in range(2)]
    names = list(inner_scope_names(inner, inner_scope)) + ["window_start", "window_end"]
    plan = P.Project(window, exprs, names)
    return plan, binder._scope_of(plan, alias_name or rel_name, col_aliases)


def inner_scope_names(inner, scope) -> list:
    """The relation's visible column names as its scope sees them."""
    by_index = {c.index: c.name for c in scope.cols}
    return [by_index.get(i, inner.names[i]) for i in range(inner.n_visible)]


def _micros(binder: ExprBinder, node, kind: str, what: str) -> int:
    value = binder.bind_as(node, DataType.INTERVAL)
    if value.data_type != DataType.INTERVAL or not isinstance(value, P.Lit) or value.value is None:
        raise error_at(BindError, f"the {what} of {kind} must be a constant INTERVAL", node)
    iv = value.value
    if iv.months:
        raise error_at(UnsupportedError, f"a {what} of {kind} in months or years is not supported "
                                         "(a month has no fixed length)", node)
    return iv.days * 86_400_000_000 + iv.usecs


def _positive(micros: int, what: str, node, kind: str) -> None:
    if micros <= 0:
        raise error_at(BindError, f"the {what} of {kind} must be a positive interval", node)


# --- stream and batch ----------------------------------------------------------------------------

def build_executor(plan: _Window, input_executor):
    """The stream executor of ``plan`` over ``input_executor``."""
    if isinstance(plan, HopWindow):
        return X.HopWindow(input_executor, plan.time_col, plan.slide, plan.size, plan.offset)
    return X.TumbleWindow(input_executor, plan.time_col, plan.size, plan.offset)


def run_batch(plan: _Window, table: pa.Table) -> list:
    """The output columns of ``plan`` for its input's rows ``table`` (Arrow arrays)."""
    cols = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in table.columns]
    arrow = cols[plan.time_col].type
    last, null = window_starts(cols[plan.time_col], plan.slide, plan.offset)
    stamps = plan.input.types[plan.time_col].kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
    if isinstance(plan, TumbleWindow):
        null = null | out_of_range(last, plan.size, null, stamps, "TUMBLE")   # raises in a batch query
        return cols + [_array(last, null, arrow), _array(last + plan.size, null, arrow)]
    keep = ~null
    if not keep.all():
        mask = pa.array(keep)
        cols = [pc.filter(c, mask) for c in cols]
        last = last[keep]
    units = plan.size // plan.slide
    out = [[] for _ in range(len(cols) + 2)]
    no_null = np.zeros(len(last), dtype=bool)
    for k in range(units - 1, -1, -1):    # earliest window first
        start = last - k * plan.slide
        out_of_range(start, plan.size, no_null, stamps, "HOP")   # raises in a batch query
        for i, c in enumerate(cols + [_array(start, no_null, arrow), _array(start + plan.size, no_null, arrow)]):
            out[i].append(c)
    return [pa.concat_arrays(parts) if parts else pa.array([], type=cols[i].type if i < len(cols) else arrow)
            for i, parts in enumerate(out)]


def _array(values: np.ndarray, null: np.ndarray, arrow_type) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=null if null.any() else None).cast(arrow_type)
