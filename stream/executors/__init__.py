"""Streaming executors, one module each (docs/streaming.md): sources and DML, Project,
Filter, Materialize, Union, HashJoin. Stateful and multi-input executors (HashAgg, TopN) plug
into :mod:`stream.executor` the same way.
"""

from stream.executors.dml import Dml
from stream.executors.filter import Filter
from stream.executors.hash_join import HashJoin
from stream.executors.materialize import Materialize
from stream.executors.project import Project
from stream.executors.source import TableSource, Values
from stream.executors.union import Union

__all__ = ["Dml", "Filter", "HashJoin", "Materialize", "Project", "TableSource", "Union", "Values"]
