"""Streaming executors, one module each (docs/streaming.md): sources and DML, Project,
Filter, Materialize, Union, HashAgg/SimpleAgg (aggregate calls in ``agg_call``), HashJoin,
TopN/GroupTopN, AppendOnlyDedup, Backfill (a new MV's snapshot of its input), TumbleWindow/HopWindow and DynamicFilter. Each plugs into
:mod:`stream.executor`'s interface; none knows the runtime.
"""

from stream.executors.agg_call import AggCall
from stream.executors.backfill import Backfill
from stream.executors.dedup import AppendOnlyDedup
from stream.executors.dml import Dml
from stream.executors.dynamic_filter import DynamicFilter
from stream.executors.filter import Filter
from stream.executors.hash_agg import HashAgg, SimpleAgg, agg_table_count
from stream.executors.hash_join import HashJoin
from stream.executors.hop_window import HopWindow, TumbleWindow
from stream.executors.materialize import Materialize
from stream.executors.project import Project
from stream.executors.source import TableSource, Values
from stream.executors.top_n import GroupTopN, TopN
from stream.executors.union import Union

__all__ = ["AggCall", "AppendOnlyDedup", "Backfill", "Dml", "DynamicFilter", "Filter", "GroupTopN", "HashAgg", "HashJoin",
           "HopWindow", "Materialize", "Project", "SimpleAgg", "TableSource", "TopN", "TumbleWindow", "Union",
           "Values", "agg_table_count"]
