"""Watermarks through a HashJoin: the output watermarks an interval join derives and the state
cleaning they allow (RisingWave's interval join; docs/sql.md "Watermarks").

A :class:`JoinWatermarks` belongs to one :class:`~stream.executors.hash_join.HashJoin` (inner,
left, right or full; a semi/anti join drops watermarks). It reads the join's bounds once, from
the equality keys and the extra condition's conjuncts ``a op b`` (``op`` one of ``< <= > >=``)
where each of ``a`` and ``b`` is *monotone in one column* of one side -- the column itself, or
``col + interval`` / ``col - interval`` / ``interval + col`` -- and the two sides differ.
Written ``lo <= hi`` (``<`` is taken as ``<=``: a weaker bound, never a wrong one), such a
conjunct says a pair matches only if ``lo(O row) <= hi(S row)``, S being the side of ``hi``.

Each input's watermarks are kept per column (the largest seen). With the other side O's
watermark ``w`` on ``lo``'s column every future O row has ``lo >= lo(w)`` (``lo`` is monotone), so:

- *state cleaning* (inner joins): a row of S's state with ``hi(row) < lo(w)`` for some bound can
  match no future O row; if it is also below one of S's own watermarks (no later S message can
  delete it), it is deleted from S's rows table and cache, silently -- its joined rows stay in
  the output, which is exact: nothing could ever retract or extend them. Cleaning runs on the
  first watermark of an epoch that moves a threshold (later ones in the epoch wait for the
  next: a late cleaning is only a larger state), over the side's whole state (a scan: the
  state is what cleaning keeps small). Outer joins keep their state (a cleaned inner-side row would leave a degree
  counting a partner no longer stored);
- *output watermarks*: an output column ``c`` of S (a bare column as ``hi``, or an equality
  key) with S's own watermark ``ws`` gets ``min(ws, max over its bounds of lo(w))``: a later
  output row carries either a new S row (``c >= ws``) or an old one matched by a new O row
  (``c >= lo(O row) >= lo(w)``); a NULL-padded row's other side is NULL, below nothing. Emitted
  when it rises, right when the input watermark that raised it is handled (the join emits its
  output per chunk, holding nothing back).

Callers: :mod:`stream.executors.hash_join` (``HashJoin.execute``), tests.
"""

from __future__ import annotations

from collections import Counter

import pyarrow.compute as pc

from relational.arrow import to_arrow, to_pylist
from relational.types import TypeKind
from stream.chunk import DELETE
from stream.expr_base import Col, Lit
from stream.expr_errors import counting_into, raising_errors
from stream.expr_ops import And, Cmp, Or
from stream.expr_time import TimeArith
from stream.message import Watermark

_FLIP = {"<": "<=", "<=": "<=", ">": ">=", ">=": ">="}


def _monotone_column(e) -> int | None:
    """The joined-row column ``e`` is monotone (non-decreasing) in, or None."""
    if isinstance(e, Col):
        return e.index
    if isinstance(e, TimeArith) and getattr(e, "mode", None) == "shift":
        col, other = (e.right, e.left) if e.swap else (e.left, e.right)
        if isinstance(col, Col) and isinstance(other, Lit) and other.data_type.kind == TypeKind.INTERVAL:
            return col.index
    return None


def _conjuncts(e) -> list:
    if e is None:
        return []
    if isinstance(e, And) and not isinstance(e, Or):   # Or subclasses And: its terms are no bounds
        return [c for a in e.args for c in _conjuncts(a)]
    return [e]


class JoinWatermarks:
    """The watermark bookkeeping of one HashJoin (module docstring)."""

    def __init__(self, join):
        self.join = join
        self.wl = join.left.width
        self.width = self.wl + join.right.width
        self.types = list(join.left.schema.types) + list(join.right.schema.types)
        self.active = join.join_type not in ("left_semi", "left_anti")
        self.cleans = join.join_type == "inner"
        self.seen = ({}, {})         # per side: input column -> its largest watermark
        self.emitted: dict = {}      # output column -> the last watermark emitted
        self.thresholds = [None, None]   # per side: the cleaning thresholds last applied
        self.cleaned = [0, 0]        # rows cleaned per side (tests, stats)
        self.cleaned_epoch = None    # the epoch of the last cleaning (at most one per epoch)
        # per side S: [(hi over S's columns, lo over O's columns, O's joined column)]
        self.bounds = ([], [])
        for lk, rk in zip(join.left.keys, join.right.keys):
            lcol, rcol = Col(lk, self.types[lk]), Col(self.wl + rk, self.types[self.wl + rk])
            self.bounds[0].append((lcol, rcol, self.wl + rk))
            self.bounds[1].append((rcol, lcol, lk))
        for c in _conjuncts(join.condition):
            if not isinstance(c, Cmp) or c.op not in _FLIP:
                continue
            lo, hi = (c.left, c.right) if c.op in ("<", "<=") else (c.right, c.left)
            lo_col, hi_col = _monotone_column(lo), _monotone_column(hi)
            if lo_col is None or hi_col is None or (lo_col < self.wl) == (hi_col < self.wl):
                continue
            self.bounds[0 if hi_col < self.wl else 1].append((hi, lo, lo_col))

    def _side_of(self, joined: int) -> tuple:
        """``(side, input column)`` of a joined-row column."""
        return (0, joined) if joined < self.wl else (1, joined - self.wl)

    def _at(self, e, joined: int, value):
        """``e`` evaluated on a row whose column ``joined`` is ``value`` (None: not computable)."""
        columns = [None] * self.width
        columns[joined] = to_arrow([value], self.types[joined])
        try:
            with raising_errors():   # a bound, not user data: never counted as a data error
                [out] = to_pylist(e.eval(columns, 1), e.data_type)
        except (ArithmeticError, ValueError):   # out of the type's range: no bound
            return None
        return out

    def _threshold(self, bound, other: int):
        """``lo(w)`` of ``bound`` with the other side's watermark, or None when unknown."""
        _, lo, lo_col = bound
        side, col = self._side_of(lo_col)
        value = self.seen[side].get(col)
        return None if value is None else self._at(lo, lo_col, value)

    def on_watermark(self, side: int, watermark: Watermark) -> list:
        """Take input ``side``'s watermark; returns the output watermarks it raises (after
        cleaning the state it allows)."""
        if not self.active:
            return []
        seen = self.seen[side]
        if watermark.value is None or (watermark.column in seen and watermark.value <= seen[watermark.column]):
            return []
        seen[watermark.column] = watermark.value
        if self.cleans and self.join.epoch != self.cleaned_epoch:
            self.cleaned_epoch = self.join.epoch
            for s in (0, 1):
                self._clean(s)
        return self._outputs()

    def _outputs(self) -> list:
        out = []
        for s in (0, 1):
            offset = 0 if s == 0 else self.wl
            for col, own in self.seen[s].items():
                joined = offset + col
                lows = [self._threshold(b, 1 - s) for b in self.bounds[s]
                        if isinstance(b[0], Col) and b[0].index == joined]
                lows = [v for v in lows if v is not None]
                if not lows:
                    continue
                value = min(own, max(lows))
                if joined not in self.emitted or value > self.emitted[joined]:
                    self.emitted[joined] = value
                    out.append(Watermark(joined, value))
        return out

    def _clean(self, s: int) -> None:
        """Delete the rows of side ``s``'s state no future message can match or touch."""
        own = self.seen[s]
        if not own:
            return
        bounds = [(b, t) for b in self.bounds[s] if (t := self._threshold(b, 1 - s)) is not None]
        if not bounds:
            return
        key = (tuple(sorted(own.items())), tuple((id(b), t) for b, t in bounds))
        if key == self.thresholds[s]:
            return
        self.thresholds[s] = key
        join = self.join
        side = join.left if s == 0 else join.right
        rows = list(side.table.iter_with_prefix(()))
        if not rows:
            return
        offset = 0 if s == 0 else self.wl
        columns = [None] * self.width
        for c, t in enumerate(side.schema.types):
            columns[offset + c] = to_arrow([r[c] for r in rows], t)
        n = len(rows)
        dead = None
        try:
            with counting_into(Counter()):   # a row's bound out of range is NULL (kept), counted apart
                for (hi, _, _), t in bounds:
                    below = pc.less(hi.eval(columns, n), to_arrow([t], hi.data_type)[0])
                    dead = below if dead is None else pc.or_kleene(dead, below)
        except (ArithmeticError, ValueError):   # a bound out of the type's range: keep every row
            return
        gone = None
        for c, w in own.items():
            below = pc.less(columns[offset + c], to_arrow([w], side.schema.types[c])[0])
            gone = below if gone is None else pc.or_kleene(gone, below)
        flags = pc.fill_null(pc.and_kleene(dead, gone), False).to_pylist()
        doomed = [r for r, f in zip(rows, flags) if f]
        if not doomed:
            return
        side.write_rows(side.table, [DELETE] * len(doomed), doomed, join.identity)
        keys = {side.key_of(r) for r in doomed}
        for k in keys:   # their entries are read again when probed (the key sets only hint)
            side.cache.pop(k, None)
        side.seen.change(remove=[k for k in keys if k in side.seen.keys()])
        side.table.try_flush()
        self.cleaned[s] += len(doomed)
