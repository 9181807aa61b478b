"""``agg(x) FILTER (WHERE c) OVER (...)``: a window aggregate's FILTER, rewritten before binding.

Job: :func:`rewrite` returns the SELECT (a copy when it has such a window) with each window
aggregate ``count / sum / avg / min / max`` carrying a FILTER turned into the same aggregate over
``CASE WHEN c THEN x END`` (``count(*)``: ``CASE WHEN c THEN 1 END``). The aggregates skip NULLs,
so the rows the condition rejects (false or NULL) contribute nothing: Postgres' result exactly
(checked against PostgreSQL in tests/test_sql_issue29_audit.py), in batch and in MVs (the
OverWindow executor sees a plain window aggregate). ``DISTINCT`` with FILTER is left alone (the
binder refuses DISTINCT in a window aggregate, as Postgres does), as are other functions.

Only the windows of the SELECT's own select list and ORDER BY are rewritten (a subquery's are
its own, rewritten when it is bound).

Callers: :mod:`sql.bind.select` (``_select``), after :mod:`sql.bind.named_windows`.
"""

from __future__ import annotations

from sqlglot import exp

from sql.bind.frozen import kept
from sql.bind.named_windows import own_windows

_AGGS = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def _needs(node: exp.Select) -> bool:
    return any(_rewritable(w) for w in own_windows(node))


def _rewritable(w) -> bool:
    f = w.this
    return isinstance(f, exp.Filter) and isinstance(f.this, _AGGS) and not isinstance(f.this.this, exp.Distinct) \
        and f.this.this is not None and isinstance(f.expression, exp.Where)


def rewrite(node: exp.Select) -> exp.Select:
    """``node`` with its window aggregates' FILTERs folded into their arguments."""
    if not kept(node, "hummock_window_filter", _needs):
        return node
    node = node.copy()
    for w in own_windows(node):
        if not _rewritable(w):
            continue
        agg, cond = w.this.this, w.this.expression.this
        arg = exp.Literal.number(1) if isinstance(agg.this, exp.Star) else agg.this
        agg.set("this", exp.Case(ifs=[exp.If(this=cond, true=arg)]))
        w.set("this", agg)
    return node
