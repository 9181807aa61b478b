"""EXPLAIN text: one line per plan node, indented by depth, with the state table ids of
stateful nodes (stream) -- ``ids`` maps ``id(node)`` to its table ids. A batch plan is shown
as it runs (:func:`sql.plan.key_range.plan_batch`): a Scan with the key ranges or point
lookups it reads (``ranges=[...]`` / ``points=[...]``) and ``reverse`` when it reads in
descending key order, a TopN that stops its scan early with ``early_stop=n``. A stream Agg or
TopN over an input that can only insert (``P.inserts_only``) shows ``append_only``. EXPLAIN ANALYZE
adds each node's rows and time as it ran.

Callers: :mod:`sql.statements` (EXPLAIN)."""

from __future__ import annotations

from sql.plan import nodes as P
from sql.plan.key_range import plan_batch

_STREAM_NAMES = {"Scan": "StreamTableScan", "Project": "StreamProject", "Filter": "StreamFilter",
                 "Agg": "StreamHashAgg", "Join": "StreamHashJoin", "Union": "StreamUnion", "TopN": "StreamTopN",
                 "ScalarJoin": "StreamScalarJoin", "DynamicFilter": "StreamDynamicFilter",
                 "OverWindow": "StreamOverWindow", "Now": "StreamNow"}
_STREAM_NAMES.update(TumbleWindow="StreamTumbleWindow", HopWindow="StreamHopWindow")   # sql/plan/time_window.py


def explain_plan(plan: P.Node, ids: dict, stream: bool, profile: dict | None = None) -> str:
    """``profile`` (EXPLAIN ANALYZE of a batch plan): what ``sql.batch.execute.execute`` filled
    in; each node it ran shows ``(actual rows=N time=T ms)``, T including its inputs' time."""
    lines = []
    if stream:
        lines.append(f"StreamMaterialize(pk={plan.stream_key})")
    elif profile is not None:
        plan = profile["plan"]   # the plan as it ran
    else:
        plan = plan_batch(plan)

    def visit(n, depth):
        label = n.label()
        if stream:
            kind = type(n).__name__
            if isinstance(n, P.Agg) and not n.group:
                kind = "SimpleAgg"
                label = "StreamSimpleAgg" + label[3:]
            elif isinstance(n, P.TopN) and n.group:
                label = "StreamGroupTopN" + label[len(kind):]
            elif isinstance(n, P.Join) and getattr(n, "temporal", False):   # sql/bind/temporal.py
                label = "StreamTemporalJoin" + label[len(kind):]
            else:
                label = _STREAM_NAMES.get(kind, kind) + label[len(kind):]
            if isinstance(n, P.Agg) and P.inserts_only(n.input):   # sql.build.agg_append_only
                label = label[:-1] + ", append_only)"
        else:
            label = "Batch" + _access(n, label)
        tables = ids.get(id(n))
        if tables:
            label += f" state_tables={list(tables)}"
        if profile is not None:
            figures = profile.get(id(n))
            label += (f" (actual rows={figures[0]} time={figures[1] * 1000:.3f} ms)" if figures
                      else " (streamed into its parent)")
        lines.append("  " * depth + label)
        for i in n.inputs:
            visit(i, depth + 1)
    visit(plan, 1 if stream else 0)
    return "\n".join(lines)


def _access(n, label: str) -> str:
    """``label`` with the access path of batch node ``n`` (module docstring) before its ')'."""
    extra = []
    if getattr(n, "index_of", None) is not None:   # a Scan reading an index of its table (sql/index.py)
        label = f"IndexScan({n.index_of}, index={n.relation.name}, table_id={n.relation.table_id})"
    if getattr(n, "key_range", None) is not None:
        extra.append(str(n.key_range))
    if getattr(n, "reverse", False):
        extra.append("reverse")
    if getattr(n, "early_stop", None) is not None:
        extra.append(f"early_stop={n.early_stop}")
    return label if not extra or not label.endswith(")") else label[:-1] + ", " + ", ".join(extra) + ")"
