"""A small expression tree evaluated on Arrow columns (``pyarrow.compute``), for Project and
Filter; the SQL layer builds these trees from sqlglot.

Nodes: :class:`Col` (a column by index), :class:`Lit` (a typed constant), :class:`Arith`
(``+ - * / %``), :class:`Cmp` (``= <> < <= > >=``), :class:`And`, :class:`Or`, :class:`Not`,
:class:`IsNull` (and IS NOT NULL), :class:`Cast`, :class:`Func` (``abs``, ``lower``,
``upper``, ``length``, ``round``, ``coalesce``, ``concat``). Each node knows its result
:class:`~relational.types.DataType` at construction, so a Project's output schema is known
before any data flows; operands that do not fit raise :class:`ExpressionError` at
construction, not at the first chunk.

Semantics (Postgres, except where noted):
- NULL in, NULL out for arithmetic, comparisons, casts and functions (``coalesce`` aside);
  AND/OR are three-valued (Kleene). A Filter keeps a row only where its condition is TRUE.
- Integer arithmetic is checked; ``/`` on integers truncates toward zero; ``%`` has the
  dividend's sign.
- Mixed numeric operands widen: SMALLINT < INT < BIGINT < DECIMAL; any REAL/DOUBLE makes DOUBLE
  (REAL with REAL stays REAL). DECIMAL (NUMERIC) is exact: stream/decimal_ops.py.
- A cast to an integer rounds REAL/DOUBLE half to even (C's ``rint``) and DECIMAL half away
  from zero, like Postgres; an integer to REAL/DOUBLE rounds to the nearest float.
- Float arithmetic whose result overflows (or underflows to zero from non-zero operands) is the
  data error "value out of range: overflow" ("underflow"), as Postgres, not +-Infinity or 0.
- Data errors (integer overflow, division or remainder by zero, a cast that does not fit)
  depend on the evaluation mode (stream/expr_errors.py). Inside :func:`raising_errors` (batch SELECT, DML) they raise
  :class:`ExpressionError` (``expr`` is the failing node). Otherwise (a streaming MV) the row's
  value is NULL, the error is logged (logger ``stream.expr``) and counted
  (:func:`error_counts`), as RisingWave's streaming engine does, so one bad row does not stop
  a materialized view.
- ``CASE`` evaluates a branch only on the rows that take it (Postgres' lazy CASE), so
  ``CASE WHEN b <> 0 THEN a / b END`` never divides by zero.
Evaluation never loops in Python over rows, except for DECIMAL values that Arrow's decimal128
cannot hold exactly (stream/decimal_vec.py is the vectorized path for ``+ - *`` and
comparisons; division, ``%``, NaN/Infinity and wider values go row by row) and the rows of a
chunk on which a kernel failed in streaming mode.

Where each part lives (this module is the facade: import expression names from here):

============================  ==================================================================
:mod:`stream.expr_base`       the protocol (:class:`Expr`: ``evaluate`` / ``eval``), :class:`Col`,
                              :class:`Lit`, numeric typing (:func:`is_numeric`,
                              :func:`common_numeric`)
:mod:`stream.expr_cast`       :class:`Cast` and the operand widening every operator applies
:mod:`stream.expr_ops`        :class:`Arith`, :class:`Cmp`, :class:`And`, :class:`Or`,
                              :class:`Not`, :class:`IsNull`
:mod:`stream.expr_funcs`      :class:`Func` and its function table ``_FUNCS``
:mod:`stream.expr_case`       :class:`Case` (lazy branches)
:mod:`stream.expr_like`       :class:`Like`, :func:`like_regex`
:mod:`stream.expr_errors`     data-error modes: :func:`raising_errors`, :func:`error_counts`
:mod:`stream.expr_time`       date/time ``+``/``-`` (:class:`~stream.expr_time.TimeArith`)
:mod:`stream.expr_interval`   INTERVAL comparison (for ``Cmp``), :class:`Negate` (``-interval``),
                              :class:`IntervalScale` (``interval * / number``)
:mod:`stream.expr_array`      arrays: :class:`ArrayCtor`, :class:`ArrayIndex`, :class:`ArraySlice`,
                              :class:`ArrayCompare` (``ANY``/``ALL``), array functions, text in/out
============================  ==================================================================

Import order is base <- cast <- ops, funcs; case and like need only base; nothing imports
this facade back, so there is no cycle.

Callers: :mod:`stream.executors.project`, :mod:`stream.executors.filter`, sql's planner and
binder, tests, benchmarks.
"""

from stream.expr_array import ArrayCompare, ArrayCtor, ArrayIndex, ArraySlice
from stream.expr_base import Col, Expr, Lit, common_numeric, is_numeric
from stream.expr_case import Case
from stream.expr_cast import Cast
from stream.expr_errors import data_error, error_counts, raising_errors, strict
from stream.expr_interval import IntervalScale, Negate
from stream.expr_funcs import _FUNCS, Func  # noqa: F401 (_FUNCS: sql/bind/expr.py checks names against it)
from stream.expr_like import Like, like_regex
from stream.expr_ops import And, Arith, Cmp, IsNull, Not, Or

__all__ = [
    "And", "Arith", "ArrayCompare", "ArrayCtor", "ArrayIndex", "ArraySlice", "Case", "Cast", "Cmp", "Col", "Expr", "Func", "IntervalScale", "IsNull", "Like", "Lit",
    "Negate", "Not", "Or",
    "common_numeric", "data_error", "error_counts", "is_numeric", "like_regex", "raising_errors", "strict",
]
