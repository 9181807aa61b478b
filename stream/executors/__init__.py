"""Streaming executors, one module each (docs/streaming.md): sources and DML, Project,
Filter, Materialize, Union, HashAgg/SimpleAgg (aggregate calls in ``agg_call``). Other
stateful and multi-input executors (HashJoin, TopN) plug into :mod:`stream.executor` the same
way.
"""

from stream.executors.dml import Dml
from stream.executors.agg_call import AggCall
from stream.executors.filter import Filter
from stream.executors.hash_agg import HashAgg, SimpleAgg, agg_table_count
from stream.executors.materialize import Materialize
from stream.executors.project import Project
from stream.executors.source import TableSource, Values
from stream.executors.union import Union

__all__ = ["AggCall", "Dml", "Filter", "HashAgg", "Materialize", "Project", "SimpleAgg", "TableSource", "Union", "Values",
           "agg_table_count"]
