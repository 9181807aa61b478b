"""Batch-only access paths: which key ranges of a Scan a batch plan reads, and where a TopN
may stop reading early. Stream plans never pass through here (an MV reads every row).

Job: :func:`plan_batch` returns a copy of a batch plan whose Scans carry a :class:`KeyRange`
(``scan.key_range``) and a read direction (``scan.reverse``) and whose TopNs over a Scan in key
order carry ``top.early_stop`` (the rows to read before the answer is known):
- a Filter (chain) over a Scan: its AND-ed conjuncts ``pk_col op literal`` (op ``= < <= > >=``,
  the column on either side, ``IN (...)`` as ORs of ``=``, ``= ANY (array)`` of a constant array
  or a parameter) give equality values on a pk prefix
  and bounds on the next pk column -> key ranges; the full pk bound by equality -> point
  lookups; equality on every distribution-key column -> only its vnode is read.
- ``TopN(limit n, offset o, no group)`` over Project/Filter over a Scan whose order columns
  are the pk columns after the equality prefix, each in the pk's OrderType (or all in its
  inverse: a reverse scan): the scan stops after ``o + n`` rows passing the filters and the
  rows tied with the last of them on the order columns; the TopN then runs over those rows as
  usual (so ties, WITH TIES and the stream-key tie-break stay exact).

- an index of the Scan's table (``scan.indexes``, :mod:`sql.index`) replaces the Scan -- same
  columns, the index's key order, ``index_of`` naming the table -- when the conjuncts bound more
  of its key than of the table's (:func:`_ranged_scan`), or when a TopN's order is its key order
  and the table's is not. Time-travel scans have no indexes.
- a Project over Filter*(Scan) reads only the columns it and the Filters use (``scan.columns``);
  under an Agg, only those of the Project's outputs the Agg reads (count(*) reads none); then
  :func:`_prune` carries the columns each consumer reads down through projections, filters,
  sorts, aggregates, top-Ns and joins to every Scan (a join's inputs read only their keys, the
  condition's columns and what is selected above).

Invariants: a key range is a superset of the rows the conjuncts accept -- the Filter stays
above the Scan and decides (so NULLs, ``= NULL``, three-valued logic and errors are the
Filter's, as before). Only columns whose memcomparable order is the comparison order take
part: integers, VARCHAR, BYTEA, BOOLEAN, DATE, TIME, TIMESTAMP(TZ) (not REAL/DOUBLE: NaN and
-0.0; not DECIMAL: scales; not INTERVAL). A literal of another numeric type against an integer
column bounds it by floor/ceil (``bigint_col = 4.5`` reads keys 4..5 and the Filter keeps none).
``= NULL`` (or a contradiction found while collecting) is an empty range.

Callers: :mod:`sql.batch.execute` (before running a plan; ``KEY_RANGES`` switches it off for
differential tests) and :mod:`sql.plan.explain` (batch EXPLAIN shows the ranges).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import itertools
import math
from decimal import Decimal

from relational.memcomparable import OrderType
from relational.types import TypeKind
from relational.arrow import to_pylist
from stream.expr import And, Arith, Cast, Cmp, Col, Lit, Negate, Or, raising_errors
from stream.expr_array import ArrayCompare

from sql.plan import nodes as P

KEY_RANGES = contextvars.ContextVar("batch_key_ranges", default=True)

_ORDERED = {TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.VARCHAR, TypeKind.BYTEA, TypeKind.BOOLEAN,
            TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ}
_INTS = {TypeKind.SMALLINT: 16, TypeKind.INT: 32, TypeKind.BIGINT: 64}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
MAX_POINTS = 1024   # more combinations of IN values than this: a range over the first column instead


@contextlib.contextmanager
def key_ranges(enabled: bool):
    """Within the block, batch plans use key ranges and early stops only if ``enabled``."""
    token = KEY_RANGES.set(enabled)
    try:
        yield
    finally:
        KEY_RANGES.reset(token)


class KeyRange:
    """The rows of a Scan to read: ``points`` (prefix tuples, in key order) each with the bound
    ``lo``/``hi`` (``(value, inclusive)`` or None) on the pk column after the prefix; ``empty``
    reads nothing; ``vnode`` (or None) the only vnode to read."""

    def __init__(self, points, lo=None, hi=None, empty=False, vnode=None, width=0):
        self.points, self.lo, self.hi, self.empty, self.vnode = list(points), lo, hi, empty, vnode
        self.width = width   # pk columns

    @property
    def prefix_len(self) -> int:
        return len(self.points[0]) if self.points else 0

    def is_point(self) -> bool:
        """Every pk column bound by equality: point lookups."""
        return not self.empty and self.prefix_len == self.width and self.width > 0

    def __str__(self) -> str:
        if self.empty:
            return "ranges=[]"
        parts = []
        bound = ""
        if self.lo is not None or self.hi is not None:
            lo = "-inf" if self.lo is None else ("[" if self.lo[1] else "(") + repr(self.lo[0])
            hi = "+inf" if self.hi is None else repr(self.hi[0]) + ("]" if self.hi[1] else ")")
            bound = f"{lo}, {hi}"
        for p in self.points[:4]:
            vals = ", ".join(map(repr, p))
            parts.append(f"({vals}{', ' if vals and bound else ''}{bound})" if bound else f"({vals})")
        more = f", ... {len(self.points)} in all" if len(self.points) > 4 else ""
        kind = "points" if self.is_point() else "ranges"
        vnode = f", vnode={self.vnode}" if self.vnode is not None else ""
        return f"{kind}=[{', '.join(parts)}{more}]{vnode}"


def plan_batch(plan: P.Node) -> P.Node:
    """``plan`` with key ranges and early stops (module docstring); ``plan`` itself unchanged.
    With ``KEY_RANGES`` off: ``plan`` as it is (every Scan reads every row)."""
    if not KEY_RANGES.get():
        return plan
    plan = _rewrite(plan)
    return _prune(plan, set(range(len(plan.types))))


# --- column pruning -------------------------------------------------------------------------------

def _prune(node: P.Node, needed: set) -> P.Node:
    """``node`` whose Scans read only the columns some consumer up to the root reads
    (``scan.columns``; the others come out NULL): ``needed`` are the output columns of ``node``
    its parent reads. Every node keeps its input's stream key (tie-breaks read it); a node kind
    not listed reads all of its inputs' columns."""
    if isinstance(node, P.Scan):
        if len(needed) >= len(node.types):
            return node
        have = getattr(node, "columns", None)
        cols = sorted(needed if have is None else needed & set(have))
        return node if have is not None and cols == sorted(have) else _clone(node, columns=cols)
    inputs = node.inputs
    if isinstance(node, P.Project):
        refs = set()
        for i in needed:
            if i < len(node.exprs):
                refs |= node.exprs[i].column_refs()
        want = [refs | set(node.input.stream_key)]
    elif isinstance(node, (P.Filter, P.Sort, P.Limit)):
        refs = set(needed) | set(node.input.stream_key)
        if isinstance(node, P.Filter):
            refs |= node.condition.column_refs()
        if isinstance(node, P.Sort):
            refs |= {c for c, _, _ in node.keys}
        want = [refs]
    elif isinstance(node, P.Agg):
        want = [set(node.group) | {c.arg for c in node.calls if c.arg is not None} |
                {c.filter_col for c in node.calls if c.filter_col is not None}]
    elif isinstance(node, P.TopN):
        width = len(node.input.types)
        want = [{i for i in needed if i < width} | {c for c, _, _ in node.order} | set(node.group) |
                set(node.input.stream_key)]
    elif isinstance(node, P.Join):
        w = len(node.left.types)
        cond = node.condition.column_refs() if node.condition is not None else set()
        out = set(needed) if node.kind not in ("semi", "anti") else {i for i in needed if i < w}
        left = {i for i in out | cond if i < w} | set(node.left_keys) | set(node.left.stream_key)
        right = {i - w for i in out | cond if i >= w} | set(node.right_keys) | set(node.right.stream_key)
        want = [left, right]
    else:
        want = [set(range(len(i.types))) for i in inputs]
    new = [_prune(i, w) for i, w in zip(inputs, want)]
    return _with_inputs(node, new)


def _clone(node, **attrs):
    out = copy.copy(node)
    for k, v in attrs.items():
        setattr(out, k, v)
    return out


def _with_inputs(node, inputs):
    inputs = tuple(inputs)
    if all(a is b for a, b in zip(inputs, node.inputs)):
        return node
    out = _clone(node, inputs=inputs)
    for attr, i in (("input", 0), ("left", 0), ("right", 1)):
        if hasattr(out, attr):
            setattr(out, attr, inputs[i])
    return out


def _rewrite(node: P.Node) -> P.Node:
    if isinstance(node, P.Filter):
        conds, scan = _filter_chain(node)
        if scan is not None:
            best = _ranged_scan(scan, conds)
            if best is not None:
                return _replace_scan(node, best)
    if isinstance(node, P.Agg) and isinstance(node.input, P.Project):   # the Agg reads some of its columns
        proj = node.input
        used = set(node.group) | {c.arg for c in node.calls if c.arg is not None} | \
            {c.filter_col for c in node.calls if c.filter_col is not None}
        return _with_inputs(node, [_pruned(_with_inputs(proj, [_rewrite(proj.input)]), used)])
    node = _with_inputs(node, [_rewrite(i) for i in node.inputs])
    if isinstance(node, P.TopN):
        return _early_stop(node) or node
    if isinstance(node, P.Project):
        return _pruned(node)
    return node


def _pruned(project: P.Project, used=None) -> P.Node:
    """``project`` over Filter*(Scan) with the Scan reading only the columns the chain uses
    (``scan.columns``; the others are all-NULL placeholders nobody reads). ``used``: the
    project's output columns its consumer reads (None: all); the others come out NULL."""
    refs, node = set(), project
    for i, e in enumerate(project.exprs):
        if used is None or i in used:
            refs |= e.column_refs()
    node = project.input
    while isinstance(node, P.Filter):
        refs |= node.condition.column_refs()
        node = node.input
    if not isinstance(node, P.Scan) or len(refs) >= len(node.types) or getattr(node, "columns", None) is not None:
        return project
    return _replace_scan(project, _clone(node, columns=sorted(refs)))


def _filter_chain(node):
    """(conjuncts, scan) of Filter(...Filter(Scan)) or ([], None)."""
    conds = []
    while isinstance(node, P.Filter):
        conds.extend(_conjuncts(node.condition))
        node = node.input
    return (conds, node) if isinstance(node, P.Scan) else ([], None)


def _conjuncts(e) -> list:
    if isinstance(e, And) and not isinstance(e, Or):
        return [c for a in e.args for c in _conjuncts(a)]
    return [e]


def _replace_scan(node, scan):
    """``node`` (a chain of single-input nodes over one Scan) with its Scan replaced."""
    if isinstance(node, P.Scan):
        return scan
    return _with_inputs(node, [_replace_scan(node.input, scan)])


# --- ranges ---------------------------------------------------------------------------------------

def _literal_bounds(op, lit: Lit, dtype):
    """``[(op, value)]`` a superset of ``col op lit`` in the column's own values (exact when the
    literal has the column's type), or None when the comparison cannot bound keys; ``("none",)``
    when nothing matches (NULL)."""
    if lit.value is None:
        return [("none", None)]
    ck, lk = dtype.kind, lit.data_type.kind
    if ck in _INTS:
        v = lit.value
        if lk not in _INTS:
            if lk not in (TypeKind.DECIMAL, TypeKind.DOUBLE, TypeKind.REAL) or isinstance(v, bool):
                return None
            if isinstance(v, float) and not math.isfinite(v) or isinstance(v, Decimal) and not v.is_finite():
                return None
            lo, hi = math.floor(v), math.ceil(v)
            if lo != hi:   # between two keys: a range holding both (the Filter decides)
                out = {"=": [(">=", lo), ("<=", hi)], "<": [("<=", hi)], "<=": [("<=", hi)],
                       ">": [(">=", lo)], ">=": [(">=", lo)]}[op]
                return _clamped(out, _INTS[ck])
            v = int(lo)
        return _clamped([(op, int(v))], _INTS[ck])
    if ck in _ORDERED and lit.data_type == dtype:
        return [(op, lit.value)]
    return None


def _clamped(bounds, bits):
    """Bounds outside the column type's range: dropped (always true) or none (never true)."""
    lo_lim, hi_lim = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    out = []
    for op, v in bounds:
        if v < lo_lim:
            if op in ("=", "<", "<="):
                return [("none", None)]
            continue
        if v > hi_lim:
            if op in ("=", ">", ">="):
                return [("none", None)]
            continue
        out.append((op, v))
    return out


def _constant(e):
    """``e`` as a Lit when it is built of literals by arithmetic, casts and negation (folded:
    ``k + 999``), else None; a fold that fails (overflow, division by zero) is None too, and
    the Filter raises the error as before."""
    if isinstance(e, Lit):
        return e
    if not isinstance(e, (Arith, Cast, Negate)) or e.column_refs():
        return None
    if not all(_constant(c) is not None for c in e.children()):
        return None
    try:
        with raising_errors():
            out = e.eval([], 1)
        value = to_pylist(out, e.data_type)[0]
        return Lit(value, e.data_type)
    except Exception:   # noqa: BLE001 -- any failure: no range, the Filter decides
        return None


def _column_cmp(e, pk_pos, types):
    """``(pk position, [(op, value)])`` of a comparison of a pk column with a literal, or None."""
    if not isinstance(e, Cmp) or e.op not in _FLIP:
        return None
    left, right, op = e.left, e.right, e.op
    if not isinstance(left, Col):
        left = _constant(left) or left
    if not isinstance(right, Col):
        right = _constant(right) or right
    if isinstance(left, Lit) and isinstance(right, Col):
        left, right, op = right, left, _FLIP[op]
    if not (isinstance(left, Col) and isinstance(right, Lit)) or left.index not in pk_pos:
        return None
    dtype = types[left.index]
    if dtype.kind not in _ORDERED:
        return None
    bounds = _literal_bounds(op, right, dtype)
    return None if bounds is None else (pk_pos[left.index], bounds)


def _in_list(e, pk_pos, types):
    """``(pk position, {values})`` of ``col = a OR col = b ...`` over one pk column, or None."""
    if not isinstance(e, Or):
        return None
    pos, values = None, []
    for arm in e.args:
        got = _column_cmp(arm, pk_pos, types)
        if got is None or (pos is not None and got[0] != pos):
            return None
        pos = got[0]
        bounds = got[1]
        if bounds == [("none", None)]:
            continue
        if len(bounds) != 1 or bounds[0][0] != "=":
            return None
        values.append(bounds[0][1])
    return pos, values


def _any_array(e, pk_pos, types):
    """``(pk position, [values])`` of ``col = ANY (array)`` over one pk column and an array
    built without columns (``ARRAY[...]``, ``'{...}'``, a parameter), or None. A NULL array or
    no non-NULL element matches nothing (an empty list)."""
    if not isinstance(e, ArrayCompare) or e.op != "=" or e.quantifier != "any":
        return None
    if not isinstance(e.left, Col) or e.left.index not in pk_pos or e.right.column_refs():
        return None
    dtype, elem = types[e.left.index], e.right.data_type.elem
    if dtype.kind not in _ORDERED:
        return None
    try:
        with raising_errors():
            items = to_pylist(e.right.eval([], 1), e.right.data_type)[0]
    except Exception:   # noqa: BLE001 -- any failure: no range, the Filter raises it
        return None
    values = []
    for v in items or ():
        bounds = _literal_bounds("=", Lit(v, elem), dtype)
        if bounds is None:
            return None
        if bounds == [("none", None)]:
            continue
        if len(bounds) != 1 or bounds[0][0] != "=":
            return None   # a fraction against an integer key: the span of the IN form would be needed
        values.append(bounds[0][1])
    return pk_pos[e.left.index], values


def scan_range(scan: P.Scan, conds) -> KeyRange | None:
    """The :class:`KeyRange` of ``scan`` under the AND-ed ``conds``, or None (read everything)."""
    desc = scan.relation.desc
    pk = list(desc.pk_indices)
    if not pk or any(t.kind == TypeKind.STRUCT for t in scan.types):
        return None
    pk_pos = {c: i for i, c in enumerate(pk)}
    eq: dict = {}        # pk position -> set of allowed values (None: not constrained)
    lows: dict = {}      # pk position -> [(value, inclusive)]
    highs: dict = {}
    for c in conds:
        got = _column_cmp(c, pk_pos, scan.types)
        if got is None:
            inl = _in_list(c, pk_pos, scan.types) or _any_array(c, pk_pos, scan.types)
            if inl is None:
                continue
            pos, values = inl
            eq[pos] = (eq[pos] & set(values)) if pos in eq else set(values)
            continue
        pos, bounds = got
        for op, v in bounds:
            if op == "none":
                return KeyRange([], empty=True, width=len(pk))
            if op == "=":
                eq[pos] = (eq[pos] & {v}) if pos in eq else {v}
            elif op in (">", ">="):
                lows.setdefault(pos, []).append((v, op == ">="))
            else:
                highs.setdefault(pos, []).append((v, op == "<="))
    if any(not vals for vals in eq.values()):
        return KeyRange([], empty=True, width=len(pk))
    orders = list(desc.order_types) or [OrderType.ASC] * len(pk)
    prefix = []
    n_points = 1
    for i in range(len(pk)):
        if i not in eq or n_points * len(eq[i]) > MAX_POINTS:
            break
        desc_i = orders[i].descending
        prefix.append(sorted(eq[i], reverse=desc_i))
        n_points *= len(eq[i])
    nxt = len(prefix)
    lo = hi = None
    if nxt < len(pk):
        lo = _tightest(lows.get(nxt), max) if nxt in lows else None
        hi = _tightest(highs.get(nxt), min) if nxt in highs else None
        if nxt in eq and lo is None and hi is None:   # too many IN values to enumerate: their span
            vals = sorted(eq[nxt])
            lo, hi = (vals[0], True), (vals[-1], True)
    vnode = _pinned_vnode(desc, pk, eq, len(prefix))
    if not prefix and lo is None and hi is None and vnode is None:
        return None
    return KeyRange([tuple(p) for p in itertools.product(*prefix)], lo, hi, vnode=vnode, width=len(pk))


def _ranged_scan(scan: P.Scan, conds):
    """The best ranged read of ``scan`` under ``conds``: ``scan`` with its own key range or, when
    an index (``scan.indexes``, :mod:`sql.index`) bounds more key columns, a scan of that index
    with its range (``index_of`` names the table); None when nothing bounds the read."""
    rng = scan_range(scan, conds)
    best, score = (None if rng is None else _clone(scan, key_range=rng)), _range_score(rng)
    for index in getattr(scan, "indexes", ()):
        iscan = _index_scan(scan, index)
        irng = scan_range(iscan, conds)
        if _range_score(irng) > score:
            best, score = _clone(iscan, key_range=irng), _range_score(irng)
    return best


def _index_scan(scan: P.Scan, index) -> P.Scan:
    """``scan`` reading ``index`` instead of its table: the same columns in the same order (an
    index keeps every column of its table), in the index's key order."""
    return _clone(scan, relation=index, indexes=[], index_of=scan.relation.name)


def _range_score(rng) -> tuple:
    """How much of a read ``rng`` spares (compared as tuples; None reads everything): nothing
    to read, then whole keys, then the key columns bound, then a pinned vnode."""
    if rng is None:
        return (False, False, -1, False)
    if rng.empty or rng.is_point():   # one read per point either way: the table's own key wins ties
        return (rng.empty, True, 0, False)
    bound = rng.prefix_len + (rng.lo is not None or rng.hi is not None)
    return (False, False, bound, rng.vnode is not None)


def _tightest(bounds, pick):
    """The strictest of ``[(value, inclusive)]`` (``pick`` max for lower bounds, min for upper)."""
    best = pick(v for v, _ in bounds)
    return best, all(inc for v, inc in bounds if v == best)


def _pinned_vnode(desc, pk, eq, prefix_len):
    """The one vnode to read when every distribution-key column has one equality value and the
    prefix alone does not cover it (then pk_ranges pins it already), else None."""
    dist = list(desc.dist_key_indices)
    if not dist:
        return None
    positions = [pk.index(c) for c in dist]
    if all(p < prefix_len for p in positions):
        return None
    if not all(p in eq and len(eq[p]) == 1 for p in positions):
        return None
    from relational.vnode import compute_vnode
    types = [t for _, t in desc.columns]
    return compute_vnode([next(iter(eq[p])) for p in positions], [types[c] for c in dist])


# --- early stop ----------------------------------------------------------------------------------

def _early_stop(top: P.TopN):
    """``top`` marked to stop its Scan early (module docstring), or None."""
    if top.group or top.limit is None or top.rank:
        return None
    chain, node, mapping = [], top.input, None
    cols = [c for c, _, _ in top.order]
    while isinstance(node, (P.Project, P.Filter)):
        if isinstance(node, P.Project):
            mapped = []
            for c in cols:
                e = node.exprs[c]
                if not isinstance(e, Col):
                    return None
                mapped.append(e.index)
            cols = mapped
        chain.append(node)
        node = node.input
    if not isinstance(node, P.Scan) or getattr(node, "reverse", False):
        return None
    found = _early_stop_on(top, cols, node)
    if found is None and getattr(node, "key_range", None) is None:   # the order of an index?
        for index in getattr(node, "indexes", ()):
            found = _early_stop_on(top, cols, _index_scan(node, index))
            if found is not None:
                break
    return found


def _early_stop_on(top: P.TopN, cols, scan: P.Scan):
    """``top`` stopping early over ``scan`` when its order columns ``cols`` (the Scan's
    columns) are ``scan``'s key order, or None."""
    rng = getattr(scan, "key_range", None)
    if rng is not None and (rng.empty or rng.is_point()):
        return None
    desc = scan.relation.desc
    pk = list(desc.pk_indices)
    orders = list(desc.order_types) or [OrderType.ASC] * len(pk)
    fixed = rng.prefix_len if rng is not None and len(rng.points) == 1 else 0
    if rng is not None and len(rng.points) > 1:
        return None   # several prefixes: key order is theirs, not the order columns'
    reverse = None
    pos = fixed
    for (c, d, nf), col in zip(top.order, cols):
        if pos == len(pk):   # the whole pk ordered: later order columns never break a tie
            break
        if pk[pos] != col:
            return None
        want = OrderType(d, nf)
        same = want == orders[pos]
        inverse = want == OrderType(not orders[pos].descending, not orders[pos].nulls_first)
        this = False if same else True if inverse else None
        if this is None or (reverse is not None and this != reverse):
            return None
        reverse = this
        pos += 1
    new_scan = _clone(scan, reverse=bool(reverse))
    return _clone(_with_inputs(top, [_replace_scan(top.input, new_scan)]),
                  early_stop=top.offset + top.limit)
