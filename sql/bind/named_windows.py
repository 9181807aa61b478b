"""Named windows: ``WINDOW w AS (PARTITION BY ... ORDER BY ... [frame])`` and ``OVER w`` /
``OVER (w [ORDER BY ...] [frame])``, inlined before a SELECT is bound.

Job: :func:`rewrite` returns the SELECT (a copy when it has a WINDOW clause) with every window
of its own select list and ORDER BY that names a window replaced by the spelled-out window, and
the WINDOW clause dropped; the binder then sees only inline windows (sql/bind/order.py).

Postgres' rules (parse_clause.c ``transformWindowDefinitions``, checked against PostgreSQL in
tests/test_sql_issue29_audit.py): a definition may name an earlier one (``w2 AS (w1 ORDER BY
k)``); ``OVER w`` takes the window as it is, frame included; ``OVER (w ...)`` and a definition
over another copy its PARTITION BY and ORDER BY, may add an ORDER BY only where it has none,
never a PARTITION BY, and refuse to copy a window with a frame. Every violation is a
``BindError`` with Postgres' message at the window: an unknown name (``window "w" does not
exist``), a name defined twice, overriding PARTITION BY / ORDER BY, copying a frame.

Windows inside subqueries belong to those subqueries' own WINDOW clauses and are left alone.

Callers: :mod:`sql.bind.select` (``_select``); :mod:`sql.bind.window_filter` uses :func:`own_windows`.
"""

from __future__ import annotations

from sqlglot import exp

from sql.bind.frozen import kept
from sql.errors import BindError, error_at


def rewrite(node: exp.Select) -> exp.Select:
    """``node`` with its named windows inlined (``node`` itself when it has no WINDOW clause
    and no window names one)."""
    if not kept(node, "hummock_named_windows", _needs):
        return node
    node = node.copy()
    named: dict[str, exp.Window] = {}
    for d in node.args.get("windows") or []:
        name = d.this.name
        if name in named:
            raise error_at(BindError, f'window "{name}" is already defined', d)
        named[name] = _resolve(d, named, definition=True)
    for w in own_windows(node):
        if w.args.get("alias") is None:
            continue
        spelled = _resolve(w, named, definition=False)
        w.set("alias", None)
        for key in ("partition_by", "order", "spec"):
            w.set(key, spelled.args.get(key).copy() if spelled.args.get(key) is not None else None)
    node.set("windows", None)
    return node


def _needs(node: exp.Select) -> bool:
    return bool(node.args.get("windows")) or any(w.args.get("alias") is not None for w in own_windows(node))


def own_windows(node: exp.Select) -> list:
    """The ``OVER`` windows of ``node``'s select list and ORDER BY, not of its subqueries."""
    roots = list(node.expressions) + ([node.args["order"]] if node.args.get("order") is not None else [])
    return [w for root in roots for w in root.find_all(exp.Window)
            if w.args.get("over") and w.find_ancestor(exp.Select) is node]


def _resolve(w: exp.Window, named: dict, definition: bool) -> exp.Window:
    """A window without a reference: ``w``'s own parts over the window it names (if any)."""
    ref = w.args.get("alias")
    if ref is None:
        return w
    base = named.get(ref.name)
    if base is None:
        raise error_at(BindError, f'window "{ref.name}" does not exist', w)
    own_order, own_spec = w.args.get("order"), w.args.get("spec")
    if not definition and own_order is None and own_spec is None and not w.args.get("partition_by"):
        return base   # OVER w: the window as it is, frame included
    if w.args.get("partition_by"):
        raise error_at(BindError, f'cannot override PARTITION BY clause of window "{ref.name}"', w)
    if own_order is not None and base.args.get("order") is not None:
        raise error_at(BindError, f'cannot override ORDER BY clause of window "{ref.name}"', w)
    if base.args.get("spec") is not None:
        raise error_at(BindError, f'cannot copy window "{ref.name}" because it has a frame clause', w)
    out = exp.Window(this=w.this)
    out.set("partition_by", base.args.get("partition_by"))
    out.set("order", own_order if own_order is not None else base.args.get("order"))
    out.set("spec", own_spec)
    return out
